"""A simulator's name mistyped reads the same wherever it is typed: `gpucosim run --sim` and
its $SIM (`make sim SIM=`), `make test SIM=`, the difftest's, the driver checks' and make
bench's lists, and gpucosim's Python entry (run_app). They said it five ways ("'x' is not a
backend: choose verilator, icarus, model", "SIM='x': unknown simulator 'x'; choose from
verilator, icarus", "'x' is not a simulator: choose verilator and/or icarus", ...), and none
guessed the name meant (testbench/simnames.py)."""

from __future__ import annotations

import pytest

from gpucosim.run.launch import LaunchError, run_app
from gpucosim.run.session import RunOptions
from testbench import bench, sim
from testbench.bench import model_speed
from testbench.difftest.__main__ import main as difftest_main
from tests.cosim.driver_checks import _main as driver_checks_main

from .cli_helpers import usage_error

TYPO = "unknown simulator 'verliator' (did you mean verilator?): choose "
RUNS = "verilator, icarus or model"  # gpucosim run's backends
SIMS = "verilator or icarus"
LISTS = ", or a comma list of them"


def _usage(capsys, main, argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]


def test_gpucosim_run_and_its_sim_variable(capsys, monkeypatch):
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verliator") == (
        f"gpucosim run: error: argument --sim: {TYPO}{RUNS}")
    monkeypatch.setenv("SIM", "verliator")  # make sim SIM=verliator
    assert usage_error(capsys, "run", "examples/hello.py") == (
        f"gpucosim run: error: SIM='verliator' (from the environment): {TYPO}{RUNS} (or give --sim)")
    with pytest.raises(LaunchError) as got:
        run_app(RunOptions(app="examples/hello.py", backend="verliator"))
    assert str(got.value) == TYPO + RUNS


@pytest.mark.parametrize("main, argv, said", [
    (difftest_main, ["--sim", "model,verliator"],
     f"python -m testbench.difftest: error: argument --sim: {TYPO}{RUNS}{LISTS}"),
    (driver_checks_main, ["--sim", "verliator"],
     f"python -m tests.cosim.driver_checks: error: argument --sim: {TYPO}{SIMS}"),
    (model_speed.main, ["--sims", "verliator"],
     f"python -m testbench.bench.model_speed: error: --sims: {TYPO}{SIMS}{LISTS}"),
    (bench.main, ["--speed-sims", "icarus,verliator"],
     f"python -m testbench.bench: error: --speed-sims: {TYPO}{SIMS}{LISTS}"),
], ids=["difftest", "driver_checks", "model_speed", "bench"])
def test_the_campaigns_lists(capsys, main, argv, said):
    assert _usage(capsys, main, argv) == said


def test_make_tests_sim_variable(monkeypatch):
    monkeypatch.setenv("SIM", "icarus,verliator")
    with pytest.raises(ValueError) as got:
        sim.selected_simulators()
    assert str(got.value) == f"SIM='icarus,verliator': {TYPO}{SIMS}{LISTS}"


def test_a_name_like_none_is_not_guessed_at():
    assert sim.unknown_simulator("vcs") == "unknown simulator 'vcs': choose verilator or icarus"
    assert sim.unavailable_reason("Icarus") == "unknown simulator 'Icarus' (did you mean icarus?): choose verilator or icarus"
