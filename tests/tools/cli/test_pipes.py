"""A command whose stdout reader goes away (`python -m testbench.difftest --list 3 | head`)
ends quietly: what it prints after that is lost, its exit status is the run's, and there is
no BrokenPipeError traceback (difftest --list had one, on main too). One helper for every
CLI: testbench/pipes.py `pipe_safe`."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def run_with_stdout_closed(*argv: str) -> subprocess.CompletedProcess:
    """Run `python ARGV` with stdout a pipe whose reader has gone already: its first write
    that reaches the pipe fails with EPIPE (Python ignores SIGPIPE: BrokenPipeError)."""
    r, w = os.pipe()
    os.close(r)
    try:
        env = dict(os.environ, GPUCOSIM_PROGRESS="0")
        env.pop("GPUCOSIM_LOG", None)
        return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=300)
    finally:
        os.close(w)


@pytest.mark.parametrize("argv", [
    ("-m", "testbench.difftest", "--list", "3"),
    ("-m", "testbench.difftest", "--multi", "--list", "3"),
    ("-m", "gpucosim", "regs"),
], ids=lambda a: " ".join(a[1:]))
def test_a_listing_into_a_closed_pipe_ends_quietly(argv):
    p = run_with_stdout_closed(*argv)
    assert p.returncode == 0 and p.stderr == "", p.stderr


MAINS = ["testbench.difftest.__main__", "testbench.mutate.__main__", "testbench.mutate.rtl", "testbench.mutate.fast",
         "testbench.mutate.survivors",
         "testbench.bench", "testbench.bench.cs", "testbench.bench.model_speed", "testbench.lint", "fpga.__main__",
         "fpga.sweep", "formal.run", "gpucosim.cli"]


@pytest.mark.parametrize("module", MAINS)
def test_every_cli_main_is_pipe_safe(module):
    from testbench.pipes import pipe_safe

    main = importlib.import_module(module).main
    assert main.__code__ is pipe_safe(lambda: 0).__code__, f"{module}.main is not @pipe_safe"


def test_pipe_safe_restores_stdout_and_passes_the_status_through():
    from testbench.pipes import PipeSafe, pipe_safe

    seen = []

    @pipe_safe
    def main(x):
        seen.append(type(sys.stdout))
        return x + 1

    before = sys.stdout
    assert main(2) == 3 and seen == [PipeSafe] and sys.stdout is before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (a device every write to fails: ENOSPC)")
@pytest.mark.parametrize("argv, code", [
    (("-m", "gpucosim", "regs"), 1),  # (past the buffer: fails in a print)
    (("-m", "gpucosim", "regs", "CP_ERROR", "7"), 1),
    (("-m", "gpucosim", "run", "APP", "--sim", "model"), 1),  # (an app's own print)
    (("-m", "gpucosim", "run", "APP", "--sim", "model", "--", "3"), 3),  # (its own failure's status stays)
], ids=["regs", "regs-one", "run", "run-fails"])
def test_output_onto_a_full_disk_is_one_line_and_a_failure(tmp_path, argv, code):
    """stdout onto a full disk (`gpucosim regs > out.txt`): an OSError traceback (ENOSPC), or,
    from an app's print, the app's 'exception' and a crash report. The output is incomplete,
    which is the command's failure: one line says so, and the status is not 0."""
    app = tmp_path / "talk.py"
    app.write_text("import sys\n\ndef main():\n    print('hello ' * 10)\n    return int(sys.argv[1]) if sys.argv[1:] else 0\n")
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, *(str(app) if a == "APP" else a for a in argv)], cwd=ROOT, env=env,
                           stdout=full, stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == code and p.stderr.splitlines()[-1:] == [
        "gpucosim: cannot write the output to stdout: No space left on device (it is incomplete)"], p.stderr
    assert "Traceback" not in p.stderr and "crash report" not in p.stderr, p.stderr


@pytest.mark.parametrize("given, says", [
    ("build/no-such-report.json", "cannot read build/no-such-report.json"),
    ("pyproject.toml", "is not a mutation report"),
])
def test_survivors_stub_lister_names_a_bad_report_in_one_line(given, says):
    """`python -m testbench.mutate.survivors REPORT`: a missing or wrong file is one line, exit 2
    (it was a FileNotFoundError / JSONDecodeError traceback)."""
    p = subprocess.run([sys.executable, "-m", "testbench.mutate.survivors", given], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and says in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def _closed_fds(*fds: int):
    def close() -> None:
        for fd in fds:
            os.close(fd)
    return close


@pytest.mark.parametrize("argv", [("regs",), ("run", "examples/hello.py", "--sim", "model")], ids=" ".join)
def test_started_with_stdout_closed(argv):
    """`gpucosim regs >&-`: Python makes sys.stdout None, and the first print was an
    AttributeError traceback. The output is lost, said in one line, status 1 (as on a full
    disk); a run goes on to its end."""
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    r = subprocess.run([sys.executable, "-m", "gpucosim", *argv], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                       text=True, timeout=120, preexec_fn=_closed_fds(1))
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines()[-1] == "gpucosim: cannot write the output to stdout: stdout is closed (it is incomplete)"
    assert "Traceback" not in r.stderr, r.stderr


def test_started_with_stderr_closed(tmp_path):
    """`gpucosim run APP 2>&-`: sys.stderr is None, and print(..., file=sys.stderr) writes to
    stdout: the crash report's line and the app's traceback came out among the app's output."""
    app = tmp_path / "boom.py"
    app.write_text("def main():\n    print('out')\n    raise RuntimeError('boom')\n")
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)
    r = subprocess.run([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model", "--crash-dir",
                        str(tmp_path / "crash")], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, timeout=120,
                       preexec_fn=_closed_fds(2))
    assert r.returncode == 1 and r.stdout == "out\n", r.stdout


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_a_character_stdout_cannot_encode_is_escaped(backend):
    """With PYTHONIOENCODING=ascii, hello.py's '—' was UnicodeEncodeError: a crash report on
    the model, and on a simulator "the app did not finish: the simulator crashed or hung"
    (MarkedStderr's write into the log failed too). stdout escapes it, as stderr does."""
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    env = dict(os.environ, GPUCOSIM_PROGRESS="0", PYTHONIOENCODING="ascii")
    env.pop("GPUCOSIM_LOG", None)
    r = subprocess.run([sys.executable, "-m", "gpucosim", "run", "examples/hello.py", "--sim", backend], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == f"hello: OK on {backend} \\u2014 read back 0xc0ffee\n", r.stderr[-2000:]


def test_ctrl_c_in_a_cli_is_one_line_and_status_130(capsys):
    """^C in a campaign or a flow (make soak, make fpga, make formal, make mutate) was a
    KeyboardInterrupt traceback of wherever it happened to be: now one line, status 130 as
    a shell reports SIGINT, stdout given back."""
    from testbench.pipes import pipe_safe

    @pipe_safe
    def main():
        print("working")
        raise KeyboardInterrupt

    before = sys.stdout
    try:
        code = main()
    except KeyboardInterrupt:
        pytest.fail("the KeyboardInterrupt went through (a traceback)")
    assert code == 130 and sys.stdout is before
    out, err = capsys.readouterr()
    assert out == "working\n"
    assert err.splitlines() == [f"{__name__}: interrupted (stopped before its end)"]


def test_a_ctrl_c_that_lands_in_a_finalizer_still_stops_the_command(capsys):
    """A ^C whose KeyboardInterrupt is raised inside a finalizer the garbage collector runs
    (every difftest stream frees a memory mapping by weakref.finalize) is one Python ignores:
    "Exception ignored in: <finalize object ...>", and the campaign ran on (make test saw
    `python -m testbench.difftest` not stop within 30 s of its SIGINT). The command stops in
    its one line all the same."""
    import signal
    import time
    import weakref

    from testbench.pipes import pipe_safe

    class Mapping:
        pass

    def munmap():  # where the signal happened to land
        raise KeyboardInterrupt

    laps = []

    @pipe_safe
    def main():
        m = Mapping()
        weakref.finalize(m, munmap)
        del m  # (the finalizer runs here, its exception ignored by Python)
        end = time.monotonic() + 5
        while time.monotonic() < end:  # the campaign's next streams
            laps.append(1)
        return 0

    hook = sys.unraisablehook
    # (a command's ^C is Python's KeyboardInterrupt: a pytest-xdist worker may ignore SIGINT)
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main() == 130
    finally:
        signal.signal(signal.SIGINT, prev)
    assert sys.unraisablehook is hook
    err = capsys.readouterr().err
    assert err.splitlines() == [f"{__name__}: interrupted (stopped before its end)"], err


def test_ctrl_c_stops_a_campaign_promptly_in_one_line(tmp_path):
    """A real SIGINT to `python -m testbench.difftest` on the model, once its campaign runs:
    it stops at once, says so in one line naming the command (not `__main__`), writes no
    report (an earlier one stays as it was)."""
    import signal
    import time

    report = tmp_path / "difftest.json"
    report.write_text('{"earlier": 1}\n')
    env = dict(os.environ, GPUCOSIM_PROGRESS="0")
    env.pop("GPUCOSIM_LOG", None)  # (a user's log settings would print before the campaign's first line)
    p = subprocess.Popen([sys.executable, "-m", "testbench.difftest", "--sim", "model", "--streams", "100000",
                          "--json", str(report)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = p.stderr.readline()  # "difftest: seed ..., 100000 streams ...": the campaign has started
        assert "100000 streams" in first, first
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err and err.strip().splitlines()[-1] == "testbench.difftest: interrupted (stopped before its end)", err
    assert report.read_text() == '{"earlier": 1}\n'


# ------------------------------------------------------------------ files written whole

def test_a_campaign_report_leaves_the_users_files_beside_it_alone(tmp_path):
    """`difftest --json a.json` wrote through `a.tmp`, the user's own file beside it if there
    was one (path.with_suffix): every report file is written through a temporary of its
    own (testbench.pipes.write_whole)."""
    from testbench.difftest.campaign import Report

    mine = tmp_path / "a.tmp"
    mine.write_text("the user's notes\n")
    Report(seed=7).write(tmp_path / "a.json")
    assert mine.read_text() == "the user's notes\n"
    assert '"seed": 7' in (tmp_path / "a.json").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.tmp"]


def test_write_whole_keeps_the_earlier_file_when_the_write_fails(tmp_path, monkeypatch):
    """A write that stops half way (^C, a full disk) leaves the earlier file as it was and
    no temporary beside it; a symlink keeps pointing at its target, which gets the data;
    bytes are written as bytes; a pipe or device (/dev/stdout) is written into."""
    from testbench import pipes

    out = tmp_path / "report.json"
    out.write_text("earlier\n")


    real_open = open

    def failing_open(path, mode="r", *a, **kw):
        f = real_open(path, mode, *a, **kw)
        if str(path).endswith(".tmp"):
            f.write("half")
            f.close()
            raise KeyboardInterrupt
        return f
    monkeypatch.setattr("builtins.open", failing_open)
    with pytest.raises(KeyboardInterrupt):
        pipes.write_whole(out, "new\n")
    monkeypatch.undo()
    assert out.read_text() == "earlier\n" and sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    target = tmp_path / "target.bin"
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    pipes.write_whole(link, b"\x00\x01")
    assert link.is_symlink() and target.read_bytes() == b"\x00\x01"
    r, w = os.pipe()
    try:
        pipes.write_whole(f"/proc/self/fd/{w}", "through\n")
        assert os.read(r, 100) == b"through\n"
    finally:
        os.close(r)
        os.close(w)
