"""A script run by python (`python app.py`, no `gpucosim run`) that dies of a UMD error, an
argument mistake or ^C: its author reads the error's one line and where in their own code it
came from, as `gpucosim run` shows it (umd/tracebacks.py). Python's whole traceback went
through the UMD's argument checks, the KMD's ioctl dispatch and the model, and a GpuError or
SubmitError came with the KMD's error it was raised from: 20 to 50 lines, the script's two
at the top. A bug of the script's own, and any other exception out of the drivers (a bug of
theirs), keep Python's whole traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel

ROOT = Path(__file__).resolve().parents[3]
BIND = "import sys\nimport kmd_model, umd\nfrom testbench.refmodel import RefModel\nkmd_model.bind(RefModel())\n"


def _lines(stderr: str) -> list[str]:
    """stderr's lines without the caret lines Python 3.11 puts under part of a line (^^^, ~~^~~)."""
    return [line for line in stderr.splitlines() if line.strip(" ^~")]


def _python(*argv: str, cwd: Path | None = None, path: Path | None = None) -> subprocess.CompletedProcess:
    paths = [str(ROOT)] + ([str(path)] if path else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))
    env.pop("GPUCOSIM_LOG", None)
    return subprocess.run([sys.executable, *argv], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("how", ["file", "module"])
def test_an_argument_mistake_is_the_scripts_line_and_the_error(tmp_path, how):
    app = tmp_path / "first.py"
    app.write_text(BIND + "gpu = umd.open()\nq = gpu.queue()\nq.write(None, 0, 1)\n")
    r = _python(str(app)) if how == "file" else _python("-m", "first", path=tmp_path)
    assert r.returncode == 1 and r.stdout == ""
    assert _lines(r.stderr) == ["Traceback (most recent call last):", f'  File "{app}", line 7, in <module>',
                                "    q.write(None, 0, 1)",
                                "TypeError: write: buf must be a umd Buffer, not None"], r.stderr


def test_a_mistake_before_umd_open_is_the_scripts_line_too(tmp_path):
    """The tutorial's bind line comes before umd.open(): a script that imported umd has the
    hook from then on (RefModel's and bind's own argument mistakes went through the model's
    constructor and bind's checks)."""
    app = tmp_path / "early.py"
    for line, said in (("kmd_model.bind(RefModel)", "TypeError: bind: give a device, RefModel(), not the class "
                                                    "RefModel (docs/tutorial.md: kmd_model.bind(RefModel()))"),
                       ("kmd_model.bind(RefModel(dmaa=False))", "TypeError: RefModel() got an unexpected keyword "
                                                                "argument 'dmaa': did you mean dma=? (RefModel() takes")):
        app.write_text(f"import umd, kmd_model\nfrom testbench.refmodel import RefModel\n{line}\n")
        r = _python(str(app))
        assert r.returncode == 1
        lines = _lines(r.stderr)
        assert lines[:3] == ["Traceback (most recent call last):", f'  File "{app}", line 3, in <module>',
                             f"    {line}"] and len(lines) == 4 and lines[3].startswith(said), r.stderr


@pytest.mark.parametrize("line,said", [
    ("kmd_model.bind('notadevice')",
     "TypeError: bind: give a device (a kmd_model.device.Device such as RefModel()), not 'notadevice'"),
    ("kmd_model.open_render_node()",
     "kmd_model.KmdError: ENODEV: open: no device bound: call kmd_model.bind(dev) first"),
    # (raised under KmdParams' generated __init__, a frame of no file: not the script's either,
    # so bind's frames down to it were kept)
    ("kmd_model.bind(RefModel(), job_timeout=-1)",
     "ValueError: KMD parameter job_timeout must be an int in [1, 4611686018427387904], not -1")])
def test_a_kmd_mistake_before_any_umd_import_is_the_scripts_line(tmp_path, line, said):
    """A script that imports only the KMD (the tutorial's bind line first, `import umd` after
    it, or never): its mistake in a KMD call is its line and the error's, as after `import
    umd` (the excepthook was the UMD's alone: Python's whole traceback through bind's checks,
    and the KmdError named by its module, kmd_model.uapi.KmdError)."""
    app = tmp_path / "kmd_first.py"
    app.write_text(f"import kmd_model\nfrom testbench.refmodel import RefModel\n{line}\nimport umd\n")
    r = _python(str(app))
    assert r.returncode == 1 and r.stdout == ""
    assert _lines(r.stderr) == ["Traceback (most recent call last):", f'  File "{app}", line 3, in <module>',
                                f"    {line}", said], r.stderr


def test_a_refused_submission_in_main_is_mains_lines_and_the_error(tmp_path):
    """A SubmitError raised from the KMD's EINVAL: without the KMD's error it was raised from
    (nor its ioctl dispatch's frames), which said the same words again."""
    app = tmp_path / "bad_packet.py"
    app.write_text(BIND + "def main():\n"
                          "    gpu = umd.open()\n"
                          "    q = gpu.queue()\n"
                          "    q.emit_raw([0xc0007b00, 0])\n"
                          "    q.finish()\n"
                          "\n"
                          "if __name__ == '__main__':\n"
                          "    sys.exit(main())\n")
    r = _python(str(app))
    assert r.returncode == 1
    lines = _lines(r.stderr)
    assert lines[:6] == ["Traceback (most recent call last):", f'  File "{app}", line 12, in <module>',
                         "    sys.exit(main())", f'  File "{app}", line 9, in main', "    q.finish()",
                         lines[5]], r.stderr
    assert lines[5].startswith("umd.SubmitError: ") and "0x7b" in lines[5], r.stderr
    assert "kmd_model" not in r.stderr and str(ROOT / "umd") not in r.stderr and "direct cause" not in r.stderr


def test_ctrl_c_in_a_wait_is_the_scripts_line(tmp_path):
    """^C (here a SIGALRM whose handler is Python's own ^C handler) while the UMD waits for a
    job that never ends: KeyboardInterrupt at the script's line, and the process ends as a
    ^C'd python does (killed by SIGINT)."""
    app = tmp_path / "forever.py"
    app.write_text(BIND.replace("RefModel())", "RefModel(), job_timeout=1 << 50)") +
                   "import signal\n"
                   "gpu = umd.open()\n"
                   "buf = gpu.alloc(64)\n"
                   "q = gpu.queue()\n"
                   "q.wait_mem(buf, 0, 1)\n"
                   "done = q.signal()\n"
                   "signal.signal(signal.SIGALRM, signal.default_int_handler)\n"
                   "signal.setitimer(signal.ITIMER_REAL, 0.5)\n"
                   "done.wait(timeout=None)\n")
    r = _python(str(app))
    assert r.returncode == -signal.SIGINT, r.stderr
    assert _lines(r.stderr) == ["Traceback (most recent call last):", f'  File "{app}", line 13, in <module>',
                                "    done.wait(timeout=None)", "KeyboardInterrupt"], r.stderr


def test_the_scripts_own_bug_and_a_drivers_keep_the_whole_traceback(tmp_path):
    app = tmp_path / "buggy.py"
    app.write_text(BIND + "def average(xs):\n"
                          "    return sum(xs) / len(xs)\n"
                          "gpu = umd.open()\n"
                          "print(average([]))\n")
    r = _python(str(app))
    assert r.returncode == 1
    assert _lines(r.stderr) == ["Traceback (most recent call last):", f'  File "{app}", line 8, in <module>',
                                "    print(average([]))", f'  File "{app}", line 6, in average',
                                "    return sum(xs) / len(xs)", "ZeroDivisionError: division by zero"], r.stderr
    # an exception out of the drivers that is none of theirs for the app (here the script broke
    # the Device under them, as a bug of the UMD's would): its frames are where to look
    app.write_text(BIND + "gpu = umd.open()\ngpu.mm = None\ngpu.alloc(64)\n")
    r = _python(str(app))
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].startswith("AttributeError: ") and str(ROOT / "umd") in r.stderr, r.stderr


def test_no_excepthook_where_the_umd_is_not_used_from_a_script(monkeypatch):
    """umd.open() from code that is not the script's __main__ (a test, a program that imported
    the app, the REPL) leaves sys.excepthook alone."""
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    kmd_model.bind(RefModel())
    try:
        umd.open().close()
        assert sys.excepthook is sys.__excepthook__
    finally:
        kmd_model.unbind()


def test_the_excepthook_of_a_scripts_open_trims_only_what_the_drivers_said(monkeypatch, tmp_path, capsys):
    """In this process: umd.open() from a __main__ module's own code (a file's) installs the
    hook; the hook prints an argument mistake as the script's lines and the error, and hands
    the script's own error to the hook it replaced. Under a `gpucosim run` (which holds the
    binding and prints the app's exceptions itself) none is installed."""
    import types

    from kmd_model import tracebacks
    from kmd_model.core.bind import claim

    script = tmp_path / "script.py"
    script.write_text("gpu = umd.open()\nq = gpu.queue()\nq.write(None, 0, 1)\n")
    main = types.ModuleType("__main__")
    main.__file__, main.umd = str(script), umd
    monkeypatch.setitem(sys.modules, "__main__", main)
    handed = []
    monkeypatch.setattr(sys, "__excepthook__", lambda typ, e, tb: handed.append(e))  # (Python's, as a stand-in)
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(tracebacks, "_previous", None)
    kmd_model.bind(RefModel())
    try:
        with pytest.raises(TypeError) as e:
            exec(compile(script.read_text(), str(script), "exec"), main.__dict__)
        assert sys.excepthook is tracebacks._excepthook
        sys.excepthook(TypeError, e.value, e.value.__traceback__)
        err = capsys.readouterr().err
        assert err.splitlines()[-3:] == [f'  File "{script}", line 3, in <module>', "    q.write(None, 0, 1)",
                                         "TypeError: write: buf must be a umd Buffer, not None"], err
        assert str(ROOT / "umd") not in err and not handed
        mine = ZeroDivisionError("the script's own")
        sys.excepthook(ZeroDivisionError, mine, None)
        assert handed == [mine] and capsys.readouterr().err == ""
        main.gpu.close()
        monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
        claim("gpucosim run --sim model")
        try:
            exec(compile("gpu = umd.open()\n", str(script), "exec"), main.__dict__)
        finally:
            claim(None)
        assert sys.excepthook is sys.__excepthook__
    finally:
        main.gpu.close()
        kmd_model.unbind()


def _script_main(monkeypatch, tmp_path):
    """A stand-in for `python script.py` in this process (as the test above): a __main__ module
    of a file, Python's excepthook (recording what is handed to it), the UMD's not installed."""
    import types

    from kmd_model import tracebacks

    script = tmp_path / "script.py"
    main = types.ModuleType("__main__")
    main.__file__, main.umd = str(script), umd
    monkeypatch.setitem(sys.modules, "__main__", main)
    handed: list = []
    monkeypatch.setattr(sys, "__excepthook__", lambda typ, e, tb: handed.append(e))
    monkeypatch.setattr(sys, "excepthook", sys.__excepthook__)
    monkeypatch.setattr(tracebacks, "_previous", None)
    return script, main, handed


def test_a_priority_the_script_may_not_have_is_one_line_and_its_own_value_error_whole(monkeypatch, tmp_path,
                                                                                         capsys):
    """umd.NotPermitted (a PermissionError: a high-priority queue without CAP_SYS_NICE) is the
    UMD's error for the script: its line and the error. A ValueError of the script's own code
    (its int("x")) is its bug, not an argument mistake the UMD found: Python's whole traceback
    (the hook it replaced)."""
    script, main, handed = _script_main(monkeypatch, tmp_path)
    kmd_model.bind(RefModel())
    try:
        src = "gpu = umd.open()\nq = gpu.queue(priority='high')\n"
        script.write_text(src)
        with pytest.raises(umd.NotPermitted) as e:
            exec(compile(src, str(script), "exec"), main.__dict__)
        sys.excepthook(type(e.value), e.value, e.value.__traceback__)
        err = capsys.readouterr().err
        assert _lines(err)[-3:-1] == [f'  File "{script}", line 2, in <module>', "    q = gpu.queue(priority='high')"]
        assert "needs CAP_SYS_NICE" in _lines(err)[-1] and str(ROOT / "umd") not in err and not handed, err
        with pytest.raises(ValueError) as own:
            exec(compile("n = int('x')\n", str(script), "exec"), main.__dict__)
        sys.excepthook(ValueError, own.value, own.value.__traceback__)
        assert handed == [own.value] and capsys.readouterr().err == ""
    finally:
        main.gpu.close()
        kmd_model.unbind()


def test_no_excepthook_when_a_program_imports_the_app_that_opens_the_gpu(monkeypatch, tmp_path):
    """A program (a script, its __main__) that imports an app module whose own code calls
    umd.open(): the app is not the script Python runs, the program's exceptions are its own
    to print; sys.excepthook is left alone."""
    _, _, _ = _script_main(monkeypatch, tmp_path)
    app = tmp_path / "app.py"
    ns = {"__name__": "app", "__file__": str(app), "umd": umd}
    kmd_model.bind(RefModel())
    try:
        exec(compile("gpu = umd.open()\n", str(app), "exec"), ns)
        assert sys.excepthook is sys.__excepthook__
    finally:
        ns["gpu"].close()
        kmd_model.unbind()


def test_no_excepthook_under_python_c(tmp_path):
    """`python -c` (as the REPL) runs no script: umd.open() there leaves Python's excepthook."""
    r = _python("-c", BIND + "gpu = umd.open()\nprint(sys.excepthook is sys.__excepthook__)\ngpu.close()\n")
    assert r.returncode == 0 and r.stdout.split() == ["True"], (r.stdout, r.stderr)


def test_a_drivers_own_error_keeps_its_cause_whole():
    """An exception with none of the app's frames (a bug of the drivers' or of gpucosim's own,
    as `gpucosim run` prints it): Python's whole traceback, the exception it was raised from
    included (where to look)."""
    from umd.tracebacks import app_traceback

    ns: dict = {}
    code = ("def inner():\n    return {}['key']\n"
            "def outer():\n    try:\n        inner()\n    except KeyError as e:\n        raise RuntimeError('lost') from e\n"
            "def caught():\n    try:\n        outer()\n    except RuntimeError as e:\n        return e\n")
    exec(compile(code, str(ROOT / "umd" / "driver_bug.py"), "exec"), ns)  # (frames the drivers' own)
    e = ns["caught"]()
    text = app_traceback(e)
    assert "KeyError: 'key'" in text and "direct cause" in text and text.rstrip().endswith("RuntimeError: lost"), text
