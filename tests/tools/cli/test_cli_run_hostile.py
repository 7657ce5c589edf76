"""`gpucosim run` against apps and settings that misbehave: an exception that cannot be
printed, one that is no Exception, an async main(), an app that is interrupted or changes
directory before its outputs are written, garbage in the environment. Each is one line of
gpucosim's (or the app's own traceback), never a traceback of gpucosim's, and no output lost."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpucosim import cli

from .cli_helpers import ROOT, gpucosim, usage_error

# a little GPU work, so the timeline has the drivers' events in it
WORK = ("import umd\n"
        "def work():\n"
        "    gpu = umd.open()\n"
        "    q = gpu.queue()\n"
        "    q.write(gpu.alloc(64), 0, 1)\n"
        "    q.finish()\n"
        "    gpu.close()\n")


def test_a_bad_log_setting_in_the_environment_is_one_line():
    """GPUCOSIM_LOG=ring=loud: the drivers' own warning ("GPUCOSIM_LOG is ignored") came
    first, then the usage error refusing it: two lines that contradict each other."""
    r = gpucosim("run", "examples/hello.py", "--sim", "model", env={"GPUCOSIM_LOG": "ring=loud"})
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "gpucosim run: error: GPUCOSIM_LOG: unknown log level 'loud' (use debug, info, warning, error) "
        "(in the environment)"], r.stderr


def test_an_exception_that_cannot_be_printed(tmp_path):
    """An app's exception whose str() raises: the crash report's title called it, and
    gpucosim's own traceback followed the app's."""
    app = tmp_path / "unprintable.py"
    app.write_text("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no text')\n\n"
                   "def main():\n    raise E()\n")
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("Traceback") == 1 and "launch.py" not in r.stderr, r.stderr  # the app's own, alone
    assert "gpucosim: exception in the app: E: <exception str() failed>" in r.stderr.splitlines()
    assert len(list((tmp_path / "crash").glob("crash-unprintable-model-*.txt"))) == 1


@pytest.mark.parametrize("body, says", [
    ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no text')\n\nraise E()\n",
     "E: <exception str() failed>"),
    ("class Odd(BaseException):\n    pass\n\nraise Odd('at import')\n", "Odd: at import")])
def test_an_app_whose_import_raises_what_the_launcher_did_not_expect(tmp_path, body, says):
    """Raised while the app is imported: the message's str() of it raised out of the
    launcher, and a BaseException of the app's own went past it (a traceback through
    gpucosim's frames, exit 1)."""
    app = tmp_path / "odd_import.py"
    app.write_text(body + "\n\ndef main():\n    pass\n")  # (an app with a main() is imported before the run)
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == f"gpucosim: cannot load app {str(app)!r}: {says}"
    assert r.stderr.count("Traceback") == 1 and "launch.py" not in r.stderr, r.stderr


def test_an_exception_that_is_no_exception_subclass(tmp_path):
    """A BaseException of the app's own (neither SystemExit nor KeyboardInterrupt) left the
    launcher as a traceback through its frames: no crash report, no timeline."""
    app = tmp_path / "odd.py"
    app.write_text(WORK + "class Odd(BaseException):\n    pass\n\ndef main():\n    work()\n    raise Odd('odd')\n")
    trace = tmp_path / "t.json"
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash"), "--trace", str(trace))
    assert r.returncode == 1, r.stderr
    assert "gpucosim: exception in the app: Odd: odd" in r.stderr.splitlines(), r.stderr
    assert "cli.py" not in r.stderr, r.stderr
    assert len(list((tmp_path / "crash").glob("crash-odd-model-*.txt"))) == 1
    assert json.loads(trace.read_text())["traceEvents"]


def test_an_async_main_is_refused_in_one_line(tmp_path):
    """`async def main()`: its coroutine was taken as main()'s return value, printed as
    `<coroutine object main at 0x...>` with Python's "never awaited" warning, exit 1."""
    app = tmp_path / "coro.py"
    app.write_text("async def main():\n    return 0\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"gpucosim: cannot load app {str(app)!r}: its main() is async (a coroutine function): gpucosim calls "
        f"main() and does not await it; make it a plain def"], r.stderr


def test_a_generator_main_is_refused_in_one_line(tmp_path):
    """A main() with a yield in it: calling it ran none of its body, and the generator it
    returned was printed as `<generator object main at 0x...>`, exit 1: the app's work
    silently never done."""
    app = tmp_path / "gen.py"
    app.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    yield gpu\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        f"gpucosim: cannot load app {str(app)!r}: its main() is a generator function (it has a yield): gpucosim "
        f"calls main(), which runs none of its body; make it a plain def (return, not yield)"], r.stderr


def test_an_interrupted_run_still_writes_its_timeline(tmp_path):
    """Ctrl-C (here a KeyboardInterrupt of the app's own) on the model: the timeline of what
    ran was lost (the RTL's launcher writes it in a finally; the model's did not)."""
    app = tmp_path / "stop.py"
    app.write_text(WORK + "def main():\n    work()\n    raise KeyboardInterrupt\n")
    trace = tmp_path / "t.json"
    r = gpucosim("run", str(app), "--sim", "model", "--trace", str(trace))
    assert r.returncode == 130, r.stderr
    assert r.stderr.splitlines()[-1] == "gpucosim: interrupted"
    assert any(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"])


def test_outputs_go_where_they_were_asked_for_when_the_app_changes_directory(tmp_path):
    """Relative --trace, --stats-json and --crash-dir were resolved after the app ran, in
    whatever directory it had moved to (on the model; the RTL's launcher resolved them first)."""
    work = tmp_path / "work"
    (tmp_path / "elsewhere").mkdir()
    work.mkdir()
    app = work / "wander.py"
    app.write_text(WORK + "import os\n\ndef main():\n    work()\n    os.chdir(os.path.join('..', 'elsewhere'))\n"
                   "    raise RuntimeError('lost?')\n")
    r = gpucosim("run", "wander.py", "--sim", "model", "--trace", "out/t.json", "--stats-json", "out/s.json",
                 "--crash-dir", "out", cwd=work, env={"PYTHONPATH": str(ROOT)})  # (this tree's gpucosim)
    assert r.returncode == 1, r.stderr
    names = sorted(p.name for p in (work / "out").iterdir())
    assert len(names) == 3 and names[0].startswith("crash-wander-model-") and names[1:] == ["s.json", "t.json"], \
        r.stderr
    assert not (tmp_path / "elsewhere" / "out").exists()
    assert "gpucosim: timeline written to out/t.json" in r.stderr


@pytest.mark.parametrize("value, bad", [("cpu", "'cpu'"), ("cp,dma", "'dma'")])
def test_a_bad_hardware_trace_setting_is_refused_before_the_run(capsys, monkeypatch, tmp_path, value, bad):
    """GPUCOSIM_HWTRACE picks the RTL's monitors that feed --trace: a name it does not know
    (cpu for cp) dropped that track without a word."""
    from gpucosim.run import launch

    monkeypatch.setenv("GPUCOSIM_HWTRACE", value)
    monkeypatch.setattr(launch, "run_app", lambda opts: 0)  # (the RTL run is not the point)
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verilator", "--trace", str(tmp_path / "t.json")) \
        == (f"gpucosim run: error: GPUCOSIM_HWTRACE={value!r}: {bad} is not a monitor: give a comma list of "
            f"cp, sdma, bus, irq (in the environment)")
    monkeypatch.setenv("GPUCOSIM_HWTRACE", "cp,irq")
    assert cli.main(["run", "examples/hello.py", "--sim", "verilator", "--trace", str(tmp_path / "t.json")]) == 0


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_sys_exit_as_the_app_is_imported_is_its_status_on_every_backend(tmp_path, backend):
    """sys.exit(4) at the app's top level: status 4 on the model, while the RTL's said "the app
    did not finish on verilator: app: 4" with status 1."""
    app = tmp_path / "early.py"
    app.write_text("import sys\nsys.exit(4)\n")
    r = gpucosim("run", str(app), "--sim", backend, timeout=600)
    assert r.returncode == 4 and "did not finish" not in r.stderr, r.stderr


def test_an_output_that_would_write_over_the_app_or_another_output(capsys, tmp_path):
    """`--trace app.py` (one completion too few) replaced the app's source with its timeline;
    --trace and --stats-json on one file kept only the timeline. Refused before the run."""
    app = tmp_path / "app.py"
    app.write_text("def main():\n    return 0\n")
    assert usage_error(capsys, "run", str(app), "--sim", "model", "--trace", str(app)) == \
        f"gpucosim run: error: --trace {app} is the app's own source: the run would write over it"
    assert app.read_text() == "def main():\n    return 0\n"
    assert usage_error(capsys, "run", "examples.hello", "--sim", "model", "--stats-json", "examples/hello.py") == \
        "gpucosim run: error: --stats-json examples/hello.py is the app's own source: the run would write over it"
    same = tmp_path / "out.json"
    assert usage_error(capsys, "run", str(app), "--sim", "model", "--trace", str(same), "--stats-json",
                       f"{tmp_path}/./out.json") == \
        f"gpucosim run: error: --trace and --stats-json name one file ({tmp_path}/./out.json): give each its own"
    assert not same.exists()


def test_an_output_that_would_write_over_a_file_that_is_not_json(capsys, tmp_path):
    """The flags in the wrong order (`--trace examples/hello.py examples/fill.py`, or
    `--stats-json README.md`): the example or the README was replaced by JSON, exit 0. A file
    that holds something else is refused before the run; a JSON file (an earlier run's
    figures), an empty one and a new one are written."""
    readme = tmp_path / "README.md"
    readme.write_text("# notes\n")
    src = tmp_path / "other.py"
    src.write_text("x = 1\n")
    for opt, victim in (("--stats-json", readme), ("--trace", src)):
        assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", opt, str(victim)) == \
            (f"gpucosim run: error: {opt} {victim}: the file exists and is not JSON (not a timeline or figures "
             "of an earlier run): the run would write over it; give a new name, or remove the file first")
    assert readme.read_text() == "# notes\n" and src.read_text() == "x = 1\n"
    earlier, empty, new = tmp_path / "earlier.json", tmp_path / "empty.json", tmp_path / "new.json"
    empty.write_text("")
    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--stats-json", str(earlier),
                     "--trace", str(empty)]) == 0
    assert json.loads(empty.read_text())["traceEvents"]
    # an earlier run's figures and timeline are written over, each by either option
    earlier.write_text(json.dumps({**json.loads(earlier.read_text()), "cycles": -1}, indent=1))
    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--stats-json", str(empty),
                     "--trace", str(earlier)]) == 0
    assert json.loads(earlier.read_text())["traceEvents"] and json.loads(empty.read_text())["cycles"] > 0
    assert cli.main(["run", "examples/hello.py", "--sim", "model", "--trace", str(new)]) == 0 and new.exists()


@pytest.mark.parametrize("opt", ["--stats-json", "--trace"])
@pytest.mark.parametrize("other", [
    '{"old": 1}',  # any JSON object
    '{"top_32": {"fmax_mhz": 85.8}}',  # build/fpga.json's records
    '{"app": "x.py", "backend": "model"}',  # figures without all their keys
    '{"traceEvents": []}',  # another tool's Perfetto trace
    '[1, 2]', '  {"x": ' + "[" * 5000 + "]" * 5000 + "}"],
    ids=["object", "fpga_records", "figures_in_part", "perfetto", "array", "deep"])
def test_an_output_that_would_write_over_a_json_file_of_something_else(capsys, tmp_path, opt, other):
    """`--stats-json build/bench.json` (or `--trace build/fpga.json`, tests/durations.json):
    the check looked at the first byte only, so any JSON file was taken for an earlier run's
    output and replaced, `make bench`'s or `make fpga`'s records with it. Only a timeline or
    figures gpucosim run wrote are written over."""
    victim = tmp_path / "records.json"
    victim.write_text(other)
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", opt, str(victim)) == \
        (f"gpucosim run: error: {opt} {victim}: the file exists and is JSON of something else (not a timeline or "
         "figures of an earlier run): the run would write over it; give a new name, or remove the file first")
    assert victim.read_text() == other


def test_the_timeline_goes_into_what_trace_names_not_over_it(tmp_path):
    """--trace through a symlink, or into a pipe (`--trace /dev/stdout | jq`, a FIFO): the
    timeline was written beside it and renamed over it, replacing the link with a file, or
    the pipe (its reader waiting forever; as root, /dev/stdout itself was replaced)."""
    app = tmp_path / "app.py"
    app.write_text(WORK + "def main():\n    work()\n")
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    link.symlink_to(real)
    r = gpucosim("run", str(app), "--sim", "model", "--trace", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and json.loads(real.read_text())["traceEvents"]
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    r = gpucosim("run", str(app), "--sim", "model", "--trace", str(fifo))
    reader.join(timeout=30)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and not (tmp_path / "pipe.json.tmp").exists()
    assert got and json.loads(got[0])["traceEvents"]


def test_an_empty_build_folder_setting_is_no_setting(tmp_path):
    """GPUCOSIM_BUILD= (set, but empty) was the folder "": crash reports (and RTL builds) went
    into ./crash (./sim) of wherever gpucosim was run."""
    app = tmp_path / "boom.py"
    app.write_text("def main():\n    raise RuntimeError('boom')\n")
    r = gpucosim("run", str(app), "--sim", "model", cwd=tmp_path, env={"GPUCOSIM_BUILD": "", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 1, r.stderr
    assert not (tmp_path / "crash").exists()
    report = Path(r.stderr.splitlines()[-1].split("crash report written to ", 1)[1])
    assert report.parent == ROOT / "build" / "crash", r.stderr
    report.unlink()


def test_a_thread_the_app_left_running_is_named_and_ctrl_c_ends_it(tmp_path):
    """An app whose main() returns with a thread of its own still running: gpucosim waited
    for it (the interpreter's exit) without a word, and Ctrl-C then printed the interpreter's
    KeyboardInterrupt traceback ("Exception ignored in threading") with status 0."""
    app = tmp_path / "linger.py"
    app.write_text("import threading, time\n\ndef main():\n"
                   "    threading.Thread(target=time.sleep, args=(600,), name='poller').start()\n")
    p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, GPUCOSIM_PROGRESS="0"),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # (as a terminal's)
    try:
        ready = select.select([p.stderr], [], [], 60)[0]  # (before: nothing, ever)
        first = p.stderr.readline() if ready else "(nothing said)"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert first == ("gpucosim: the app's main() returned with 1 thread of its own still running (poller): "
                     "waiting for it to end (Ctrl-C ends the run)\n"), first + err
    assert p.returncode == 130 and err == "gpucosim: interrupted\n", err


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_a_timeline_that_cannot_be_written_is_one_line(tmp_path, backend):
    """--trace /dev/full (a disk that fills up) was an OSError traceback at the run's end; it
    is one line now, as --stats-json's is, and the run's status stands."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    r = gpucosim("run", "examples/hello.py", "--sim", backend, "--trace", "/dev/full", timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.splitlines() == ["gpucosim: cannot write the timeline to /dev/full: No space left on device"]


def test_a_main_that_wants_arguments_is_refused_in_one_line(tmp_path):
    """`def main(x)` was called and failed: a TypeError traceback of gpucosim's call and a
    crash report. main(x=1) and main(*args) are called as before."""
    app = tmp_path / "wants.py"
    app.write_text("def main(x, *, y):\n    return 0\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2 and not r.stdout, r.stdout
    assert r.stderr == (f"gpucosim: cannot load app '{app}': its main(x, *, y) takes arguments: gpucosim calls main() "
                        "with none (the app's arguments are in sys.argv)\n"), r.stderr
    app.write_text("def main(x=3, *args):\n    return x\n")
    assert gpucosim("run", str(app), "--sim", "model").returncode == 3


def test_an_app_that_closes_stdout(tmp_path):
    """An app run in gpucosim's process (the model) that closed sys.stdout ended the run in a
    "ValueError: I/O operation on closed file" traceback from gpucosim's last flush, status 1."""
    app = tmp_path / "closes.py"
    app.write_text("import sys\n\ndef main():\n    print('bye')\n    sys.stdout.close()\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 0 and r.stdout == "bye\n" and not r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_a_progress_the_bar_cannot_show_ends_nothing(tmp_path, backend):
    """gpucosim.progress(1, nan) raised "cannot convert float NaN to integer" in the console's
    thread: a traceback, no more status line, and on a simulator no more of the app's output
    (that thread echoes it): "after" and "end" were lost."""
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    app = tmp_path / "prog.py"
    app.write_text("import time\nimport gpucosim\n\ndef main():\n"
                   "    gpucosim.progress(1, float('nan'), 'x')\n    time.sleep(1.3)\n    print('after', flush=True)\n"
                   "    gpucosim.progress(float('inf'), 10)\n    gpucosim.progress(1, -5)\n    time.sleep(0.3)\n"
                   "    print('end', flush=True)\n")
    r = gpucosim("run", str(app), "--sim", backend, env={"GPUCOSIM_PROGRESS": "1"}, timeout=300)
    assert r.returncode == 0 and r.stdout == "after\nend\n", (r.stdout, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_trace_and_figures_to_gpucosims_own_stdout_and_stderr(tmp_path, backend):
    """--trace /dev/stdout on a simulator said "timeline written to /dev/stdout" and nothing
    came: the simulator's /dev/stdout is its log, which the open() for writing truncated (the
    echo lost the timeline, and the app's output before it). With stdout redirected to a
    file, the model's write-and-rename replaced that file, the app's output with it. Both
    streams get what was asked now, after the app's output."""
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    with open(out, "w") as o, open(err, "w") as e:
        r = subprocess.run([sys.executable, "-m", "gpucosim", "run", "examples/hello.py", "--sim", backend, "--trace",
                            "/dev/stdout", "--stats-json", "/dev/stderr"], cwd=ROOT, env=env, stdout=o, stderr=e,
                           timeout=300)
    assert r.returncode == 0, err.read_text()[-2000:]
    first, rest = out.read_text().split("\n", 1)
    assert first == f"hello: OK on {backend} — read back 0xc0ffee", first
    assert any(ev["ph"] == "X" for ev in json.loads(rest)["traceEvents"])
    said = err.read_text()
    assert "gpucosim: timeline written to /dev/stdout (" in said
    assert json.loads(said[said.index("{"):])["exit_code"] == 0, said


def test_a_cached_build_without_its_executable_is_built_again(tmp_path, monkeypatch):
    """A build folder whose stamp says built but whose simulator executable is gone (a cleanup
    that took it) was reused: `gpucosim run --sim verilator` ended in cocotb's traceback,
    "FileNotFoundError: ... tb_top". The stamp counts only with its product beside it; the
    build runs again. (The build itself is faked here: a real one takes minutes.)"""
    from testbench import sim
    from testbench.sim.design import gpu_design

    monkeypatch.setattr(sim, "BUILD", tmp_path)
    monkeypatch.setattr(sim, "unavailable_reason", lambda s: None)
    monkeypatch.setattr(sim, "setup_env", lambda: None)
    design = gpu_design(64)
    build_dir, _ = sim._build_dir(design, "verilator", False, design.clock("hdl"))
    build_dir.mkdir(parents=True)
    (build_dir / ".built").write_text("{}")
    assert not sim.is_built(design, "verilator", clock="hdl")
    built = []

    class Fake:
        def build(self, build_dir, **kw):
            built.append(build_dir)
            (Path(build_dir) / design.toplevel).write_text("")

    monkeypatch.setattr(sim, "_runner", lambda *a, **k: Fake())
    assert sim.build(design, "verilator", clock="hdl") == build_dir and built == [build_dir]
    assert sim.is_built(design, "verilator", clock="hdl")
    assert sim.build(design, "verilator", clock="hdl") == build_dir and len(built) == 1  # (reused now)


def test_a_simulator_build_that_fails_is_its_log_and_one_line(capsys, monkeypatch, tmp_path):
    """A build the toolchain failed (no working C++ compiler here; faked: a real one fails
    after Verilator's few seconds) was two tracebacks, the runner's and the launcher's, around
    the log's tail. Now the tail, then one line naming the log; status 1."""
    from testbench import sim

    if sim.unavailable_reason("verilator"):
        pytest.skip(sim.unavailable_reason("verilator"))
    log = tmp_path / "build.log"

    def fail(design, backend, waves=False, clock=None):
        raise sim.BuildError("verilator build of gpu-dw64 failed:\nc++: fake compiler: no\nmake: *** Error 1\n", log)

    monkeypatch.setattr(sim, "build", fail)
    monkeypatch.setattr(sim, "is_built", lambda *a, **k: False)
    monkeypatch.setenv("GPUCOSIM_PROGRESS", "0")
    assert cli.main(["run", "examples/hello.py", "--sim", "verilator"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[-3:] == ["c++: fake compiler: no", "make: *** Error 1",
                        f"gpucosim: the verilator build of gpu-dw64 failed (above: the end of its log, {log})"], err


@pytest.mark.parametrize("spec, says", [("sdma=debug", True), ("ioctl=info,sdma=info", True), ("sdma=warning", False),
                                         ("sdma=info,sdma=error", False), ("debug", False)])
def test_log_sdma_on_a_simulator_says_it_is_the_models(capsys, monkeypatch, tmp_path, spec, says):
    """`--log sdma=debug` on a simulator printed nothing, whatever the SDMA did: its packets are
    logged by the reference model only. It says so now, once, before the build (a failing one
    here, so no simulator runs); not for a level above info, nor for `all`."""
    from testbench import sim

    if sim.unavailable_reason("verilator"):
        pytest.skip(sim.unavailable_reason("verilator"))

    def fail(design, backend, waves=False, clock=None):
        raise sim.BuildError("verilator build failed:\nfake\n", tmp_path / "build.log")

    monkeypatch.setattr(sim, "build", fail)
    monkeypatch.setattr(sim, "is_built", lambda *a, **k: False)
    monkeypatch.setenv("GPUCOSIM_PROGRESS", "0")
    assert cli.main(["run", "examples/hello.py", "--sim", "verilator", "--log", spec]) == 1
    notes = [line for line in capsys.readouterr().err.splitlines() if "--log sdma" in line]
    assert notes == (["gpucosim: --log sdma: the SDMA engine's packets are logged on the reference model only "
                      "(--sim model); on verilator, --trace shows the bus traffic they make"] if says else []), notes


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_an_app_that_prints_the_stream_markers(tmp_path, backend):
    """On a simulator the app's stderr reaches the log between '\\x1e' and '\\x1f': an app
    that printed a '\\x1e' itself sent the rest of its stdout to stderr. Its text is escaped
    in the log now, and comes out as it was written, on its own stream."""
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    app = tmp_path / "markers.py"
    app.write_text("import sys\n\ndef main():\n    print('a\\x1eb\\x1fc\\x1dd', flush=True)\n"
                   "    print('err\\x1e\\x1f\\x1dx', file=sys.stderr, flush=True)\n    print('after', flush=True)\n")
    r = gpucosim("run", str(app), "--sim", backend, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout == "a\x1eb\x1fc\x1dd\nafter\n", repr(r.stdout)
    assert r.stderr == "err\x1e\x1f\x1dx\n", repr(r.stderr)


def test_an_app_that_raises_gets_its_own_traceback_and_no_leak_report(tmp_path):
    """A one-line mistake in an API call (`gpu.alloc("4096")`) was a 17-line traceback, most
    of it gpucosim's hooks and the UMD's argument checks, then LEAK lines for the device and
    buffers the exception kept the app from freeing; a GpuError came with the KMD error it
    was raised from (20 lines of ioctl dispatch). stderr has the app's frames and the error;
    the crash report keeps the whole traceback."""
    app = tmp_path / "typo.py"
    app.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    gpu.alloc(4096)\n"
                   "    gpu.alloc('4096', 'vram')\n")
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash"))
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[:4] == [
        "Traceback (most recent call last):", f'  File "{app}", line 6, in main',
        "    gpu.alloc('4096', 'vram')", "TypeError: alloc: size must be an int, not '4096'"], r.stderr
    assert "LEAK" not in r.stderr and "exit report" not in r.stderr, r.stderr
    (report,) = (tmp_path / "crash").glob("crash-*.txt")
    assert "umd/runtime.py" in report.read_text()  # (the whole traceback, for the drivers' authors)
    hang = tmp_path / "hang.py"
    hang.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    q = gpu.queue()\n"
                    "    q.wait_mem(gpu.alloc(4096), 0, 1)\n    q.signal().wait()\n")
    r = gpucosim("run", str(hang), "--sim", "model", "--crash-dir", str(tmp_path / "crash"), "--stats")
    tb = r.stderr[r.stderr.index("Traceback"):].splitlines()
    assert tb[1:3] == [f'  File "{hang}", line 7, in main', "    q.signal().wait()"], r.stderr
    assert tb[3].startswith("umd.GpuError: GPU error: job 0x1 timed out") and "kmd_model" not in r.stderr
    assert "direct cause" not in r.stderr and "LEAK" not in r.stderr
    assert "the app raised (status 1): what it held then" in r.stderr  # (--stats asked for the report)


def test_a_traceback_wholly_inside_gpucosim_is_shown_whole():
    """An exception none of whose frames is the app's (gpucosim's own bug) keeps every frame."""
    from gpucosim.run.app import app_traceback
    from umd.args import _index

    # (caught in a frame of gpucosim's: no frame of the traceback is outside the project)
    ns = {"_index": _index}
    exec(compile("def catch():\n    try:\n        _index('alloc', 'size', 'x')\n    except TypeError as e:\n"
                 "        return e\n", str(ROOT / "gpucosim" / "catch.py"), "exec"), ns)
    text = app_traceback(ns["catch"]())
    assert "umd/args.py" in text and "gpucosim/catch.py" in text and text.rstrip().endswith("TypeError: alloc: size must be an int, not 'x'")


def test_commands_recorded_and_never_submitted_are_reported(tmp_path):
    """`q.write(...)` and return, with no flush, finish or close: the GPU never ran the write,
    and the exit report said only "1 API calls, 0 flushes" (now "1 API call, 0 flushes")."""
    app = tmp_path / "noflush.py"
    app.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    q = gpu.queue()\n"
                   "    q.write(gpu.alloc(64), 0, 1)\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 0, r.stderr
    assert ("  LEAK: queue fd 3 ctx 1 on CP queue 0 (gfx): 1 command recorded and never submitted (5 dwords): the GPU never ran "
            "it (flush(), finish() or close() submits); the first Queue.write() #1") in r.stderr.splitlines(), r.stderr
    app.write_text(app.read_text() + "    q.flush()\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert "never submitted" not in r.stderr, r.stderr


def test_run_folders_are_pruned_but_never_a_running_ones(tmp_path):
    """Every `gpucosim run` on a simulator (and every test session) left a run folder with
    its simulator log, for ever (101 `app-PID` folders after a day here). The newest
    RUNS_KEPT of a tag stay; older ones go, unless their process still runs (another
    pytest worker's, another run's) or is this one; other tags and files are left alone."""
    import subprocess

    from testbench import sim

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
        dead_pid = int(dead.stdout)
        names = [f"app-{dead_pid}", f"app-{live.pid}", f"app-{os.getpid()}"]
        beyond = int(Path("/proc/sys/kernel/pid_max").read_text())  # (numbers no process has)
        for i, name in enumerate(names + [f"app-{beyond + i}" for i in range(5)]):
            (tmp_path / name).mkdir()
            (tmp_path / name / "sim.log").write_text("x")
            os.utime(tmp_path / name, (1000 + i, 1000 + i))  # the three above oldest
        (tmp_path / "sdma-12").mkdir()
        (tmp_path / "app-notes.txt").write_text("keep")
        sim.prune_runs(tmp_path, "app", keep=2)
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted([f"app-{live.pid}", f"app-{os.getpid()}", f"app-{beyond + 3}", f"app-{beyond + 4}",
                               "app-notes.txt", "sdma-12"]), left
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize("backend", [pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_the_status_lines_cycles_move_during_one_long_wait(tmp_path, backend):
    """The status line's cycles moved at each ioctl's end: an app's one long wait (a hang
    the job timer ends, an 8 MiB upload) showed the cycles of its start for all of its
    seconds, as if the simulator were stuck."""
    from testbench import sim

    if sim.unavailable_reason(backend):
        pytest.skip(sim.unavailable_reason(backend))
    app = tmp_path / "hang.py"
    app.write_text("import umd\n\ndef main():\n    gpu = umd.open()\n    buf = gpu.alloc(64)\n    q = gpu.queue()\n"
                   "    q.wait_mem(buf, 0, 1)\n    try:\n        q.finish(timeout=None)\n"
                   "    except umd.GpuError:\n        pass\n    gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", backend, "--kmd", "job_timeout=200000", "--crash-dir",
                 str(tmp_path / "crash"), env={"GPUCOSIM_PROGRESS": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    seen: dict[int, set] = {}  # ioctls done -> the cycles the line showed then
    for cycles, ioctls in re.findall(r"([\d,]+) cycles  (\d+) ioctls?", r.stderr):
        seen.setdefault(int(ioctls), set()).add(int(cycles.replace(",", "")))
    # the wait (WAIT_CS, 200,000 cycles and more): the cycles moved while no ioctl ended
    assert max(len(c) for c in seen.values()) >= 3, seen
