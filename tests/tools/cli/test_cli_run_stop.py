"""`gpucosim run` stopping an app: `--timeout` (an app spinning in Python ran until Ctrl-C),
Ctrl-C on a simulator (its timeline was lost: the simulator was killed before writing it),
and which stream carries the app's traceback and gpucosim's own error lines (stdout on a
simulator, through its log; stderr on the model). Each on the model and on Verilator."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cli_helpers import ROOT, dies_with_the_test, gpucosim, processes_with, usage_error

# a little GPU work, so the timeline and the figures have something in them, then a spin
WORK = ("import umd\n"
        "def work():\n"
        "    gpu = umd.open()\n"
        "    q = gpu.queue()\n"
        "    q.write(gpu.alloc(64), 0, 1)\n"
        "    q.finish()\n"
        "    gpu.close()\n")
SPIN = WORK + "def main():\n    work()\n    print('running', flush=True)\n    while True:\n        pass\n"
# one that keeps the GPU busy: a stop mostly arrives while the simulator runs, not the app
BUSY = WORK + "def main():\n    print('running', flush=True)\n    while True:\n        work()\n"

RTL = pytest.mark.xdist_group("demo_rtl")
BACKENDS = ["model", pytest.param("verilator", marks=RTL)]
EVERY_BACKEND = [*BACKENDS, pytest.param("icarus", marks=RTL)]


def _need(backend: str) -> None:
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon", "", "1e308", "1000001", "0x0", "0xF4241"])
def test_a_bad_timeout_is_one_line(capsys, value):
    """(1e308 was a traceback: OverflowError from the interval timer)"""
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--timeout", value) == (
        f"gpucosim run: error: argument --timeout: {value!r} is not a timeout: give a number of seconds above 0, "
        "at most 1000000")


def test_a_timeout_in_hex_is_seconds():
    """Numbers are "decimal or 0x hex everywhere" (gpucosim --help): --timeout 0x10 was refused."""
    from gpucosim.cli import _timeout

    assert _timeout("0x10") == 16.0 and _timeout("1.5") == 1.5 and _timeout("1_000") == 1000.0


@pytest.mark.parametrize("body", [SPIN, BUSY], ids=["spins", "busy"])
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_timeout_stops_an_app_that_spins_and_keeps_its_outputs(tmp_path, backend, body):
    _need(backend)
    app = tmp_path / "spin.py"
    app.write_text(body)
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    t0 = time.monotonic()
    r = gpucosim("run", str(app), "--sim", backend, "--timeout", "3", "--trace", str(trace),
                 "--stats-json", str(stats), timeout=300)
    took = time.monotonic() - t0
    assert r.returncode == 124, r.stdout[-2000:] + r.stderr[-2000:]
    last = r.stderr.splitlines()[-1]
    assert re.fullmatch(rf"gpucosim: {re.escape(str(app))} did not finish within 3 s \(at cycle \d+\): stopped",
                        last), r.stderr
    assert int(re.search(r"at cycle (\d+)", last).group(1)) > 0
    assert "Traceback" not in r.stderr + r.stdout
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" for e in events)
    figures = json.loads(stats.read_text())
    # the figures and the timeline tell the same run (how far it got in 3 s depends on the
    # machine's load: an Icarus run at load 8 was stopped inside the KMD's start, no ioctl
    # made); one that printed `running` after its GPU work made its ioctls
    assert figures["exit_code"] == 124
    assert figures["ioctls"] == sum(e.get("cat") == "ioctl" and e["ph"] == "X" for e in events), figures
    if body is SPIN and "running" in r.stdout:
        assert figures["ioctls"] > 0
    assert took < 120, took


# An app that catches every stop has it raised again after $GPUCOSIM_STOP_REFIRE seconds
# (2 by default) and is ended after as long again: the tests of such apps wait a fifth of
# that (it is how long the app has to act on its stop, not the machine's speed)
REFIRE = {"GPUCOSIM_STOP_REFIRE": "0.4"}


def _stop(backend: str, tmp_path, how: str, body: str = SPIN, sig: int = signal.SIGINT, env: dict | None = None):
    app = tmp_path / "spin.py"
    app.write_text(body)
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    e = dict(os.environ, GPUCOSIM_PROGRESS="0", **(env or {}))
    e.pop("GPUCOSIM_LOG", None)
    # (SIGINT as a terminal leaves it: an xdist worker ignores it, and a child inherits that)
    p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", backend, "--trace", str(trace),
                          "--stats-json", str(stats)], cwd=ROOT, env=e, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=dies_with_the_test(sigint=True))
    try:
        assert p.stdout.readline().strip() == "running"
        time.sleep(0.3)
        if how == "group":  # as a terminal sends ^C: to every process of the foreground group
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    return p.returncode, out, err, trace, stats


@pytest.mark.parametrize("backend, how, body", [
    ("model", "group", SPIN), ("model", "gpucosim", SPIN),
    pytest.param("verilator", "group", SPIN, marks=RTL), pytest.param("verilator", "gpucosim", SPIN, marks=RTL),
    pytest.param("verilator", "group", BUSY, marks=RTL), pytest.param("icarus", "group", SPIN, marks=RTL)])
def test_ctrl_c_keeps_the_timeline_and_the_figures(tmp_path, backend, how, body):
    """^C to gpucosim alone (`kill -INT`), or to its process group as a terminal sends it
    (the simulator gets it from the terminal and from gpucosim, which passes it on)."""
    _need(backend)
    code, out, err, trace, stats = _stop(backend, tmp_path, how, body)
    assert code == 130, out[-2000:] + err[-2000:]
    assert err.splitlines()[-1] == "gpucosim: interrupted" and "Traceback" not in err + out, err
    assert err.count("gpucosim: interrupted") == 1, err
    assert any(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"])
    assert json.loads(stats.read_text())["exit_code"] == 130


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_apps_traceback_and_gpucosims_errors_go_to_stderr(tmp_path, backend):
    _need(backend)
    app = tmp_path / "boom.py"
    # (it names sys.argv, unread: an argument it cannot take is told after the run, which is
    # what this checks; one whose source names none is refused before it, test_cli_run.py)
    app.write_text(WORK + "import sys\n\ndef main():\n    work()\n    print('to stdout')\n"
                   "    print('to stderr', file=sys.stderr)\n    if False:\n        print(sys.argv)\n"
                   "    raise RuntimeError('boom')\n")
    r = gpucosim("run", str(app), "--sim", backend, "--crash-dir", str(tmp_path / "crash"), "--stray", timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.splitlines() == ["to stdout"], r.stdout
    for said in ("to stderr", "Traceback (most recent call last):", "RuntimeError: boom",
                 "gpucosim: crash report written to ", "gpucosim run: error: neither gpucosim nor the app knows --stray"):
        assert said in r.stderr, (said, r.stderr)


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_the_simulators_process_writes_to_its_stderr_goes_to_stderr(tmp_path, backend):
    """File descriptor 2 of the simulator's process (Verilator's own messages; here the app
    writes to it, as a C library would) was its log's, and the log is echoed to stdout: it
    reached the app's stdout, which must stay clean for a pipe. The simulator's stderr is a
    file apart now, echoed to stderr; on the model fd 2 is gpucosim's stderr anyway."""
    _need(backend)
    app = tmp_path / "fd2.py"
    app.write_text("import os\n\ndef main():\n    print('to stdout', flush=True)\n"
                   "    os.write(2, b'%Warning: to fd 2\\n')\n")
    r = gpucosim("run", str(app), "--sim", backend, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert r.stdout.splitlines() == ["to stdout"], r.stdout
    assert "%Warning: to fd 2" in r.stderr.splitlines(), r.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_stops_an_app_that_swallows_the_stop(tmp_path, backend):
    """An app whose loop catches BaseException caught the stop and spun on (on the model,
    for ever): the stop is raised again until the run has seen it."""
    _need(backend)
    app = tmp_path / "stubborn.py"
    # (it swallows the stop from its first line, its GPU work too, which it does not begin
    # again: a stop that came while the app was still in work(), before a loop that swallowed
    # it, on a machine busy with more than this suite, ended it there, the line without its reason)
    app.write_text(WORK + "def main():\n    done = False\n    while True:\n        try:\n"
                   "            if not done:\n                done = True\n                work()\n"
                   "            while True:\n                pass\n        except BaseException:\n            pass\n")
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    r = gpucosim("run", str(app), "--sim", backend, "--timeout", "3", "--trace", str(trace), "--stats-json",
                 str(stats), env=REFIRE, timeout=60)
    assert r.returncode == 124, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.search(r"did not finish within 3 s \(at cycle \d+\): stopped \(the app caught every stop: its "
                     r"process ended\)$", r.stderr.splitlines()[-1]), r.stderr
    assert any(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"])
    assert json.loads(stats.read_text())["exit_code"] == 124


@pytest.mark.parametrize("how, sig", [("group", signal.SIGTERM), ("gpucosim", signal.SIGTERM),
                                      ("group", signal.SIGINT), ("simulator", signal.SIGTERM)])
def test_a_stop_the_app_swallows_on_a_simulator_is_said_once(tmp_path, how, sig):
    """An app that catches every stop is ended by the simulator's process itself
    (stops.hard_stop), which said "gpucosim: terminated (SIGTERM)" (or "interrupted"), and
    the launcher, which had the signal too, said it again: two lines for one stop. A signal
    sent to the simulator alone is said once as well, by the launcher."""
    _need("verilator")
    body = ("import time\ndef main():\n    print('running', flush=True)\n    while True:\n        try:\n"
            "            time.sleep(10)\n        except BaseException:\n            pass\n")
    if how == "simulator":
        app = tmp_path / "spin.py"
        app.write_text(body)
        e = dict(os.environ, GPUCOSIM_PROGRESS="0", **REFIRE)
        e.pop("GPUCOSIM_LOG", None)
        p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "verilator"], cwd=ROOT,
                             env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True, preexec_fn=dies_with_the_test())
        try:
            assert p.stdout.readline().strip() == "running"
            kids = [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()
                    and _ppid(d) == p.pid]
            assert len(kids) == 1, kids
            os.kill(kids[0], sig)
            out, err = p.communicate(timeout=120)
        finally:
            p.kill()
        code = p.returncode
    else:
        code, out, err, _, _ = _stop("verilator", tmp_path, how, body=body, sig=sig, env=REFIRE)
    words = "interrupted" if sig == signal.SIGINT else "terminated (SIGTERM)"
    assert code == 128 + sig, err
    assert err.splitlines().count(f"gpucosim: {words}") == 1, err


def _ppid(d) -> int:
    try:
        return int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return -1


def _report(stderr: str) -> tuple[str, str]:
    """The exit report's header line and its body, from a run's stderr."""
    lines = stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("gpucosim: exit report ("))
    body = []
    for line in lines[at + 1:]:
        if not line.startswith("  "):
            break
        body.append(line)
    return lines[at], "\n".join(body)


@pytest.mark.parametrize("how", ["timeout", "group"])
def test_stats_prints_the_exit_report_of_a_stopped_run(tmp_path, how):
    """`--stats` printed no exit report for a run that --timeout or ^C stopped: it prints what
    the run has, says it was stopped, and counts the buffers the app still held as allocated,
    not leaked (it never reached its cleanup). The timeline carries the same report."""
    app = tmp_path / "spin.py"
    app.write_text(SPIN)
    trace = tmp_path / "t.json"
    if how == "timeout":
        r = gpucosim("run", str(app), "--sim", "model", "--timeout", "1", "--stats", "--trace", str(trace))
        code, err = r.returncode, r.stderr
        said = "stopped by --timeout (status 124)"
    else:
        p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model", "--stats",
                              "--trace", str(trace)], cwd=ROOT, env=dict(os.environ, GPUCOSIM_PROGRESS="0"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                             preexec_fn=dies_with_the_test(sigint=True))
        try:
            assert p.stdout.readline().strip() == "running"
            os.killpg(p.pid, signal.SIGINT)
            _, err = p.communicate(timeout=60)
        finally:
            p.kill()
        code, said = p.returncode, "stopped by Ctrl-C (status 130)"
    assert code == (124 if how == "timeout" else 130), err
    assert "Traceback" not in err, err
    head, body = _report(err)
    assert re.fullmatch(rf"gpucosim: exit report \(model, \d+ cycles; [\d.]+ ms in the app, [\d.]+ ms in \d+ device "
                        rf"calls; {re.escape(said)}: what ran until then\)", head), head
    assert "LEAK" not in body and "queue fd 3 ctx 1 on CP queue 0 (gfx): 1 API call, 1 flush" in body, body
    assert "ioctls: " in body and "CS 1" in body, body
    assert json.loads(trace.read_text())["otherData"]["exit_report"] == body


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_inside_a_flush_keeps_the_submission(tmp_path, backend):
    """A flush holds ^C from its CS ioctl to the end of its bookkeeping (umd/signals.py), but
    not --timeout's stop (SIGALRM): one that came in between was raised there, and the
    submission was lost: the exit report had the CS ioctl and no flush. The flush now holds
    both. The app's CS returns slowly here, so that the timeout comes in that window."""
    app = tmp_path / "slow_cs.py"
    app.write_text("import time\nimport umd\n\n"
                   "def main():\n"
                   "    gpu = umd.open()\n"
                   "    q = gpu.queue()\n"
                   "    cs = type(q.ws).cs_submit\n"
                   "    def slow(ws, ctx, chunks):\n"
                   "        seq = cs(ws, ctx, chunks)\n"
                   "        print('cs in', flush=True)\n"
                   "        time.sleep(2)  # (the CS is in; the flush records it after this)\n"
                   "        return seq\n"
                   "    type(q.ws).cs_submit = slow\n"
                   "    q.write(gpu.alloc(64), 0, 7)\n"
                   "    q.flush()\n"
                   "    print('not reached')\n")
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    _need(backend)
    # The timeout must come in the CS's two seconds. On a loaded machine the simulator's
    # start alone took more than 0.5 s and the stop came before the app's first call
    # ("within 0.5 s (at cycle 0)", no exit report): a stop that came before the CS (no
    # "cs in") is tried again with a longer timeout, steps shorter than the window.
    for seconds in ("0.5", "1", "2", "3.5", "5", "6.5", "8"):
        r = gpucosim("run", str(app), "--sim", backend, "--timeout", seconds, "--stats", "--trace", str(trace),
                     "--stats-json", str(stats), timeout=300)
        if "cs in" in r.stdout or r.returncode != 124:
            break
    assert "cs in" in r.stdout, f"the timeout never came after the CS: {r.stdout + r.stderr}"
    assert r.returncode == 124 and "not reached" not in r.stdout, r.stdout + r.stderr
    assert "Traceback" not in r.stderr, r.stderr
    head, body = _report(r.stderr)
    assert "stopped by --timeout (status 124)" in head
    assert "queue fd 3 ctx 1 on CP queue 0 (gfx): 1 API call, 1 flush," in body, body  # (0 flushes: lost)
    assert re.search(r"\bCS 1\b", body), body
    total = int(re.search(r"ioctls: (\d+) \(", body).group(1))
    assert json.loads(stats.read_text())["ioctls"] == total
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["name"] == "CS" and e["ph"] == "X" for e in events) == 1
    flush = [e for e in events if e["name"] == "Queue.flush"]
    assert len(flush) == 1 and flush[0]["args"]["raised"].startswith("RunTimeout"), flush
    assert r.stderr.splitlines()[-1].endswith(f"did not finish within {seconds} s (at cycle "
                                              + re.search(r"at cycle (\d+)", r.stderr).group(1) + "): stopped")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seconds", ["1e-6", "0.005"])
def test_a_timeout_before_the_app_runs_is_still_a_stop_with_its_outputs(tmp_path, backend, seconds):
    """--timeout 1e-6 fired inside the clock's own setup, before the launcher had its way to
    disarm it: a RunTimeout traceback, status 1. One that came during the app's import or
    the driver's bring-up wrote no figures (or exit_code 1) and no timeline."""
    _need(backend)
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    r = gpucosim("run", "examples/hello.py", "--sim", backend, "--timeout", seconds, "--trace", str(trace),
                 "--stats-json", str(stats), timeout=300)
    if r.returncode == 0:  # (hello.py ended first: 5 ms is enough on a fast day)
        return
    assert r.returncode == 124 and "Traceback" not in r.stderr, r.stderr
    assert re.fullmatch(rf"gpucosim: examples/hello\.py did not finish within {float(seconds):g} s \(at cycle \d+\): "
                        r"stopped", r.stderr.splitlines()[-1]), r.stderr
    assert json.loads(stats.read_text())["exit_code"] == 124
    assert isinstance(json.loads(trace.read_text())["traceEvents"], list)


# gpucosim's setup between the app's import and its main() in the simulator's process (the one
# with GPUCOSIM_APP_RESULT) made slow, as a cold cache of the CP's and the copy engine's state
# names made it on the RTL with --trace (some 5 s of Amaranth)
SLOW_SETUP = ("import os\n"
              "if os.environ.get('SLOW_FSM_STATES'):\n"
              "    import time\n"
              "    import gpucosim.trace.hwtrace as h\n"
              "    real = h.fsm_states\n"
              "    def slow(*a, **k):\n"
              "        if os.environ.get('GPUCOSIM_APP_RESULT'):\n"
              "            time.sleep(float(os.environ['SLOW_FSM_STATES']))\n"
              "        return real(*a, **k)\n"
              "    h.fsm_states = slow\n")
# the state names' cache in a folder of the test's own: cold, as on a design's first --trace run
COLD_STATES = ("import os\n"
               "if os.environ.get('COLD_STATES_DIR'):\n"
               "    import gpucosim.trace.hwtrace as h\n"
               "    real = h.fsm_states\n"
               "    def cold(data_width=64, cache_dir=None, block='cp'):\n"
               "        return real(data_width, os.environ['COLD_STATES_DIR'], block)\n"
               "    h.fsm_states = cold\n")


@pytest.mark.parametrize("backend", [pytest.param("verilator", marks=RTL)])
def test_the_state_names_of_a_first_trace_run_are_made_before_the_timeout_counts(tmp_path, backend):
    """The CP's and the copy engine's state names (the timeline's monitors read them) were
    made in the simulator's process on a design's first run with --trace: some 5 s of
    Amaranth counted in --timeout, the app stopped before it ran ("at cycle 0"). The
    launcher makes them with the build; the simulator finds them made."""
    _need(backend)
    site, states = tmp_path / "site", tmp_path / "states"
    site.mkdir()
    (site / "sitecustomize.py").write_text(COLD_STATES)
    app = tmp_path / "spin.py"
    app.write_text(SPIN)
    trace = tmp_path / "t.json"
    env = {"COLD_STATES_DIR": str(states), "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    r = gpucosim("run", str(app), "--sim", backend, "--timeout", "2", "--trace", str(trace), env=env, timeout=300)
    assert r.returncode == 124, r.stdout[-2000:] + r.stderr[-2000:]
    last = r.stderr.splitlines()[-1]
    assert re.fullmatch(rf"gpucosim: {re.escape(str(app))} did not finish within 2 s \(at cycle \d+\): stopped",
                        last), r.stderr
    assert int(re.search(r"at cycle (\d+)", last).group(1)) > 0, r.stderr
    assert sorted(p.name.split(".", 1)[1] for p in states.iterdir()) == ["cp_states.json", "sdma_states.json"]


@pytest.mark.parametrize("backend", [pytest.param("verilator", marks=RTL)])
def test_a_timeout_during_the_runs_setup_is_raised_there_with_its_outputs(tmp_path, backend):
    """A stop that came while the simulator's process set the run up (the timeline's hardware
    monitors, after the app's import) waited for driver code that had not started, was
    raised again every 2 s and, the third time, ended the process: "gpucosim: interrupted"
    for a --timeout, no timeline, no exit report."""
    _need(backend)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_SETUP)
    app = tmp_path / "spin.py"
    app.write_text(SPIN)
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    env = {"SLOW_FSM_STATES": "8", "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    t0 = time.monotonic()
    r = gpucosim("run", str(app), "--sim", backend, "--timeout", "0.5", "--trace", str(trace),
                 "--stats-json", str(stats), env=env, timeout=300)
    assert r.returncode == 124, r.stdout[-2000:] + r.stderr[-2000:]
    assert re.fullmatch(rf"gpucosim: {re.escape(str(app))} did not finish within 0.5 s \(at cycle \d+\): stopped",
                        r.stderr.splitlines()[-1]), r.stderr
    assert "interrupted" not in r.stderr and "Traceback" not in r.stderr + r.stdout, r.stderr
    assert isinstance(json.loads(trace.read_text())["traceEvents"], list)
    assert json.loads(stats.read_text())["exit_code"] == 124
    assert time.monotonic() - t0 < 120


def test_a_half_written_cache_of_the_state_names_is_made_again(tmp_path):
    """A stop is now raised where the run's setup is, the cache of the CP's state names being
    written too: half of it (or half of one another run was writing) was JSONDecodeError, a
    traceback at every run with --trace after it. It is written whole or not at all."""
    from gpucosim.trace.hwtrace import fsm_states
    from testbench.sim.design import gpu_verilog

    cache = tmp_path / (gpu_verilog(64).stem + ".cp_states.json")
    cache.write_text('{"0": "IDLE", "1": "RU')
    states = fsm_states(64, tmp_path)
    assert "RUN" in states.values()
    assert {int(k): v for k, v in json.loads(cache.read_text()).items()} == states
    assert sorted(p.name for p in tmp_path.iterdir()) == [cache.name]  # (no temporary file left)


@pytest.mark.parametrize("backend, how, sig", [
    ("model", "gpucosim", signal.SIGTERM), ("model", "gpucosim", signal.SIGHUP),
    pytest.param("verilator", "gpucosim", signal.SIGTERM, marks=RTL),
    pytest.param("verilator", "group", signal.SIGTERM, marks=RTL)])
def test_sigterm_and_sighup_stop_the_run_as_ctrl_c_does(tmp_path, backend, how, sig):
    """`kill PID` of gpucosim killed the launcher alone: on a simulator, the simulator ran on
    (100 % of a core, for ever with an app that spins), and no timeline or figures were
    written. SIGTERM and SIGHUP stop the run as ^C does now, status 128 + the signal; to the
    whole group (timeout(1)) as well."""
    _need(backend)
    code, out, err, trace, stats = _stop(backend, tmp_path, how, sig=sig)
    name = signal.Signals(sig).name
    assert code == 128 + sig, out[-2000:] + err[-2000:]
    assert err.splitlines()[-1] == f"gpucosim: terminated ({name})" and "Traceback" not in err + out, err
    assert any(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"])
    assert json.loads(stats.read_text())["exit_code"] == 128 + sig
    if backend != "model":  # (no simulator left behind: the app's path is in its environment)
        assert _gone(str(tmp_path).encode(), within=0.5), processes_with(str(tmp_path).encode())


def test_ctrl_c_to_the_group_leaves_no_traceback_of_the_apps_processes(tmp_path):
    """^C at a terminal goes to the whole process group: the app's multiprocessing child got
    it too, raised KeyboardInterrupt in its own code, and its traceback ("Process Process-1:
    Traceback (most recent call last):") was cut off halfway when the run ended the app's
    processes. The child now leaves quietly; the run says it was interrupted (130) and its
    figures are written, as for a ^C to gpucosim alone."""
    app = tmp_path / "leaves.py"
    app.write_text(LEAVES["process"])
    stats = tmp_path / "s.json"
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    argv = [sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model", "--stats-json", str(stats)]
    p = subprocess.Popen(argv, cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=dies_with_the_test(sigint=True))
    try:
        assert p.stdout.readline().strip() == "running"
        time.sleep(0.5)  # (the child is running its loop)
        os.killpg(p.pid, signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130, err
        assert "Traceback" not in err and "Process Process-" not in err, err
        assert err.splitlines()[-1] == "gpucosim: interrupted", err
        assert json.loads(stats.read_text())["exit_code"] == 130
        assert _gone(str(app).encode(), within=0.3), processes_with(str(app).encode())
    finally:
        p.kill()
        for pid in processes_with(str(app).encode()):
            os.kill(pid, signal.SIGKILL)


def _gone(text: bytes, within: float) -> bool:
    """Whether no process holds `text` (`processes_with`) at some moment in the next `within`
    seconds: the same bound as a sleep of `within` and one look, without waiting the whole
    of it when they are gone at once (every stop test's run looked only after its sleep)."""
    deadline = time.monotonic() + within
    while processes_with(text):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.xdist_group("demo_rtl")
def test_the_simulator_stops_when_the_launcher_is_killed(tmp_path):
    """`kill -9` of gpucosim (or the OOM killer) left the simulator running alone, for ever
    with an app that spins. It gets SIGTERM when the launcher dies (PR_SET_PDEATHSIG), and
    stops the app as on any stop: its timeline is written."""
    _need("verilator")
    app = tmp_path / "spin.py"
    app.write_text(SPIN)
    trace = tmp_path / "t.json"
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "verilator", "--trace",
                          str(trace)], cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=dies_with_the_test())
    try:
        assert p.stdout.readline().strip() == "running"
        p.kill()
        p.wait(timeout=30)
        deadline = time.monotonic() + 30
        while processes_with(str(app).encode()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not processes_with(str(app).encode())
        assert any(ev["ph"] == "X" for ev in json.loads(trace.read_text())["traceEvents"])
    finally:
        for pid in processes_with(str(app).encode()):  # (what a failure left: this test's own)
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("takes", ["signal.signal(signal.SIGALRM, lambda *a: None)", "signal.alarm(0)"])
def test_timeout_ends_an_app_that_takes_the_clock_on_the_model(tmp_path, takes):
    """An app that set its own SIGALRM handler or cancelled the alarm ran on past
    --timeout on the model, for ever (the simulator's launcher kills its simulator after
    $GPUCOSIM_STOP_GRACE more; the model had nothing). A watchdog ends it as hard_stop does,
    its outputs written."""
    app = tmp_path / "takes.py"
    app.write_text(WORK + f"import signal\nimport time\n\ndef main():\n    work()\n    {takes}\n"
                   "    while True:\n        time.sleep(0.05)\n")
    trace, stats = tmp_path / "t.json", tmp_path / "s.json"
    t0 = time.monotonic()
    r = gpucosim("run", str(app), "--sim", "model", "--timeout", "0.5", "--trace", str(trace), "--stats-json",
                 str(stats), env={"GPUCOSIM_STOP_GRACE": "0.5"}, timeout=60)
    assert r.returncode == 124 and time.monotonic() - t0 < 30, r.stderr
    assert re.search(r"did not finish within 0\.5 s \(at cycle \d+\): stopped \(the app did not stop within 0\.5 s "
                     r"more: its process ended\)$", r.stderr.splitlines()[-1]), r.stderr
    assert json.loads(stats.read_text())["exit_code"] == 124
    assert any(e["ph"] == "X" for e in json.loads(trace.read_text())["traceEvents"])


def test_a_bad_stop_refire_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("GPUCOSIM_STOP_REFIRE", "0")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model") == (
        "gpucosim run: error: GPUCOSIM_STOP_REFIRE='0': give a number of seconds above 0, at most 1000000 "
        "(in the environment)")


def test_a_bad_stop_grace_is_one_line(capsys, monkeypatch):
    monkeypatch.setenv("GPUCOSIM_STOP_GRACE", "soon")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--timeout", "5") == (
        "gpucosim run: error: GPUCOSIM_STOP_GRACE='soon': give a number of seconds above 0, at most 1000000 "
        "(in the environment)")


LEAVES = {  # an app that leaves something of its own running when it is stopped
    "thread": "import threading\nimport time\n\ndef spin():\n    while True:\n        time.sleep(0.05)\n\n"
              "def main():\n    threading.Thread(target=spin).start()\n    print('running', flush=True)\n"
              "    while True:\n        time.sleep(0.05)\n",
    "process": "import multiprocessing\nimport time\n\ndef spin():\n    while True:\n        time.sleep(0.05)\n\n"
               "def main():\n    multiprocessing.Process(target=spin).start()\n    print('running', flush=True)\n"
               "    while True:\n        time.sleep(0.05)\n",
}


@pytest.mark.parametrize("leaves", LEAVES)
@pytest.mark.parametrize("how", ["timeout", "sigint"])
def test_a_stopped_model_run_does_not_wait_for_what_the_app_left_running(tmp_path, leaves, how):
    """A stopped model run said it was stopped and then hung: the interpreter's exit waited for
    the app's thread (or multiprocessing joined its process) for ever. Its processes are
    terminated now, and with threads left the process ends after its outputs; a process the
    app forked no longer raises the run's own stop (a "Terminated: SIGTERM" traceback)."""
    app = tmp_path / "leaves.py"
    app.write_text(LEAVES[leaves])
    stats = tmp_path / "s.json"
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    argv = [sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model", "--stats-json", str(stats)]
    p = subprocess.Popen(argv + (["--timeout", "1"] if how == "timeout" else []), cwd=ROOT, env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=dies_with_the_test(sigint=True))
    try:
        assert p.stdout.readline().strip() == "running"
        if how == "sigint":
            time.sleep(0.3)
            p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        code = 124 if how == "timeout" else 130
        assert p.returncode == code and "Traceback" not in err, err
        assert json.loads(stats.read_text())["exit_code"] == code
        assert _gone(str(app).encode(), within=0.3), processes_with(str(app).encode())
    finally:
        p.kill()
        for pid in processes_with(str(app).encode()):  # (what a failure left: this test's own)
            os.kill(pid, signal.SIGKILL)
