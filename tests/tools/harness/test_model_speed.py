"""The model-vs-RTL speed comparison (testbench/bench/model_speed.py) and the figures it reads
(`gpucosim run --stats-json`): what they contain, and that a failing workload is refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testbench import sim
from testbench.bench import model_speed

ROOT = Path(__file__).resolve().parents[3]


def gpucosim(*argv: str):
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    return subprocess.run([sys.executable, "-m", "gpucosim", *argv], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=300)


def test_stats_json_agrees_with_the_exit_report(tmp_path):
    out = tmp_path / "sub" / "figures.json"
    r = gpucosim("run", "examples/hello.py", "--sim", "model", "--stats", "--stats-json", str(out))
    assert r.returncode == 0, r.stderr
    fig = json.loads(out.read_text())
    head = re.search(r"exit report \(model, (\d+) cycles; ([\d.]+) ms in the app, ([\d.]+) ms in (\d+) device calls\)",
                     r.stderr)
    assert head, r.stderr
    ioctls = re.search(r"ioctls: (\d+) ", r.stderr)
    assert fig["backend"] == "model" and fig["exit_code"] == 0 and fig["app"] == "examples/hello.py"
    assert fig["cycles"] == int(head[1]) > 0
    assert fig["ioctls"] == int(ioctls[1]) > 0
    assert round(fig["app_s"] * 1e3, 1) == float(head[2]) and fig["app_s"] > 0
    assert round(fig["device_s"] * 1e3, 1) == float(head[3]) and fig["device_s"] > 0
    # the same calls' CPU time: the model is Python in this one thread, so no more than the wall time
    assert 0 < fig["device_cpu_s"] <= fig["device_s"] + 1e-3
    # bring-up alone reads and writes ~20 registers
    assert fig["device_calls"] == int(head[4]) >= 20


def test_a_model_run_is_one_thread(tmp_path):
    """CPU time of device calls is bounded by their wall time only if nothing else runs in the
    process: numpy's OpenBLAS used to start a thread per core that spun at import (CI once saw
    75 ms CPU in 44 ms of device calls). The launcher turns that off, even from a bare shell."""
    app = tmp_path / "threads.py"
    app.write_text("import os, numpy, umd\n"
                   "def main():\n"
                   "    umd.open(api_version=2).close()\n"
                   "    print('threads', len(os.listdir('/proc/self/task')))\n")
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("OPENBLAS_NUM_THREADS", None)  # as a user's shell has it
    r = subprocess.run([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model"], cwd=ROOT, env=e,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "threads 1" in r.stdout.splitlines()


def test_stats_json_keeps_the_apps_exit_code(tmp_path):
    app = tmp_path / "three.py"
    app.write_text("import umd\ndef main():\n    umd.open(api_version=2).close()\n    return 3\n")
    out = tmp_path / "f.json"
    r = gpucosim("run", str(app), "--sim", "model", "--stats-json", str(out))
    assert r.returncode == 3
    assert json.loads(out.read_text())["exit_code"] == 3


def test_stats_json_that_cannot_be_written_is_reported(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "figures.json"  # its parent is a file
    # gpucosim run says so in one line before the run (gpucosim/cli.py, issue 12) ...
    r = gpucosim("run", "examples/hello.py", "--sim", "model", "--stats-json", str(target))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1] == f"gpucosim run: error: --stats-json: {blocker} is a file, not a folder"
    # ... and a run whose figures cannot be written when it ends keeps its exit code, and says so
    from gpucosim.run.session import RunOptions, Session

    Session(RunOptions(app="examples/hello.py", backend="model")).write_figures(str(target), 0)
    assert f"gpucosim: cannot write the run's figures to {target}: " in capsys.readouterr().err


@pytest.mark.parametrize("name", ["long_ib", "big_copy"])
def test_speed_apps_check_their_results_on_the_model(name):
    fig = model_speed.run_once(model_speed.WORKLOADS[name], "model")
    assert fig["exit_code"] == 0


def test_a_failing_workload_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def main():\n    return 1\n")
    with pytest.raises(RuntimeError, match=r"bad\.py failed on model \(exit 1\)"):
        model_speed.measure(str(bad), "model", 1)
    nomain = tmp_path / "nomain.py"
    nomain.write_text("main = 1\n")  # (cannot load: a file with no main at all is a script, which runs)
    with pytest.raises(RuntimeError, match=r"wrote no figures \(exit 2\)"):
        model_speed.run_once(str(nomain), "model")


@pytest.mark.xdist_group("verilator_speed")
def test_compare_on_verilator():
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    rows = model_speed.compare(["verilator"], {"hello": "examples/hello.py"}, model_repeat=1, log=lambda s: None)
    row = rows["hello"]
    assert row["verilator_device_ms"] > 0 and row["model_device_ms"] > 0
    for what in ("device", "app"):  # ratios are rounded to 0.1, times to 1 us
        ratio = row[f"verilator_{what}_ms"] / row[f"model_{what}_ms"]
        assert row[f"verilator_{what}_x"] == pytest.approx(ratio, rel=0.01, abs=0.06)
    s = model_speed.summary(rows, ["verilator"])
    assert s == {"model_speedup_device_min_verilator": row["verilator_device_x"],
                 "model_speedup_app_min_verilator": row["verilator_app_x"]}


def test_unknown_simulators_are_usage_errors(capsys):
    from testbench import bench

    for main, flag in ((model_speed.main, "--sims"), (bench.main, "--speed-sims")):
        with pytest.raises(SystemExit) as exc:
            main([flag, "verilator,spice"])
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
            f"error: {flag}: unknown simulator 'spice': choose verilator or icarus, or a comma list of them")



@pytest.mark.parametrize("given, says", [
    ("", "'' names no simulator: choose verilator or icarus, or a comma list of them{}"),
    ("verilator,", "'verilator,' has an empty name: choose verilator or icarus, or a comma list of them{}"),
    (",icarus", "',icarus' has an empty name: choose verilator or icarus, or a comma list of them{}"),
    ("verilator,verilator", "verilator is given twice"),
    ("verilator,none", "unknown simulator 'none': choose verilator or icarus, or a comma list of them"),
])
def test_a_list_of_simulators_that_names_none_or_one_twice_is_refused(capsys, given, says):
    """`--speed-sims ''` (SPEED_SIMS= given empty, a variable left unset) compared the model
    with nothing, in silence, as `none` does; a simulator named twice was measured twice."""
    from testbench import bench

    for main, flag, none in ((model_speed.main, "--sims", ""), (bench.main, "--speed-sims", ", or none")):
        with pytest.raises(SystemExit) as exc:
            main([flag, given])
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f"error: {flag}: {says.format(none)}")
    assert model_speed.parse_sims("none", none_ok=True) == ([], None)
    assert model_speed.parse_sims("none", none_ok=False)[1] == ("unknown simulator 'none': choose verilator or icarus, "
                                                                "or a comma list of them")


@pytest.mark.parametrize("output, says", [
    ("{tmp}", "-o: {tmp} is a folder; name the JSON file to write"),
    ("{tmp}/notes.md", "-o: {tmp}/notes.md: the file exists and is not an earlier table of it (a JSON object): the run "
                       "would write over it; give a new name, or remove the file first"),
    ("{tmp}/notes.md/speed.json", "-o: {tmp}/notes.md is a file, not a folder"),
])
def test_an_output_it_cannot_write_is_refused_before_the_runs(capsys, tmp_path, monkeypatch, output, says):
    """`-o` was written after every app had run on the model and each simulator: a folder or a
    path under a file was a traceback (IsADirectoryError) then, the runs lost; another file was
    written over."""
    (tmp_path / "notes.md").write_text("# notes\n")
    monkeypatch.setattr(model_speed, "compare", lambda *a, **k: pytest.fail("the apps ran first"))
    with pytest.raises(SystemExit) as exc:
        model_speed.main(["-o", output.replace("{tmp}", str(tmp_path))])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m testbench.bench.model_speed: error: " + says.replace("{tmp}", str(tmp_path))]
    assert (tmp_path / "notes.md").read_text() == "# notes\n"


def test_an_output_in_a_new_folder_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(model_speed, "compare", lambda sims, w: {"hello": {"verilator_device_x": 3.0,
                                                                         "verilator_app_x": 1.5}})
    out = tmp_path / "new" / "speed.json"
    assert model_speed.main(["-o", str(out)]) == 0
    assert json.loads(out.read_text())["model_speedup_device_min_verilator"] == 3.0


def test_the_bench_leaves_the_files_beside_its_output_alone(tmp_path, monkeypatch):
    """`-o X.json` removed and wrote over `X-32b.json` beside it (the 32-bit figures' scratch
    file), whatever that file was: the scratch file is the run's own, under build/runs. (The
    simulators are left out: the run stops where the 32-bit figures' session would start.)"""
    from testbench import bench

    out, beside = tmp_path / "b.json", tmp_path / "b-32b.json"
    beside.write_text("mine")
    tags = []

    class Stop(Exception):
        pass

    def run(*args, tag=None, extra_env=None, **kw):
        tags.append(tag)
        if tag == "bench32":
            assert tmp_path not in Path(extra_env["GPUCOSIM_BENCH_OUT"]).parents
            raise Stop

    monkeypatch.setattr(bench.sim, "run", run)
    monkeypatch.setattr(bench, "gpu_design", lambda width: None)
    with pytest.raises(Stop):
        bench.main(["--speed-sims", "none", "-o", str(out)])
    assert tags == ["bench", "bench-before", "bench32"]
    assert beside.read_text() == "mine"


def test_a_bench_output_that_cannot_be_written_is_refused_before_the_run(capsys, tmp_path):
    """`make bench -o` (or `gpucosim bench -o`) that cannot be written is one usage line at the
    start, not a traceback after minutes of benchmarks."""
    from testbench import bench

    blocker = tmp_path / "file"
    blocker.write_text("")
    for out, message in ((tmp_path, f"-o: {tmp_path} is a folder; name the JSON file to write"),
                         (blocker / "b.json", f"-o: {blocker} is a file, not a folder"),
                         (blocker / "sub" / "b.json", f"-o: {blocker} is a file, not a folder")):
        with pytest.raises(SystemExit) as exc:
            bench.main(["--speed-sims", "none", "-o", str(out)])
        assert exc.value.code == 2
        assert capsys.readouterr().err.strip().splitlines()[-1] == f"python -m testbench.bench: error: {message}"

def test_the_cs_bench_runs_the_checker_as_the_kmd_does():
    """`make bench`'s CS figures (testbench/bench/cs.py) call the checker and the shadow pool
    directly: they must follow the KMD's calls (they once lagged behind a new argument and
    crashed make bench at its last step). Every figure is there and positive; their values
    are make bench's business."""
    from testbench.bench import cs

    out = cs.measure()
    assert set(out) == {"cs_submit_us_per_kdw", "cs_submit_us_per_kdw_one_ib", "cs_shadow_bytes_per_submit"}
    assert all(v > 0 for v in out.values()), out


def test_only_with_no_workload_is_refused(capsys, monkeypatch):
    """`--only` with no names ran every workload (nargs "*": an empty subset read as none
    given), minutes on each simulator for a command that asked for nothing."""
    monkeypatch.setattr(model_speed, "compare", lambda *a, **k: pytest.fail("the apps ran"))
    with pytest.raises(SystemExit) as exc:
        model_speed.main(["--only"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m testbench.bench.model_speed: error: argument --only: expected at least one argument"]
