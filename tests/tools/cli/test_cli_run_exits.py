"""An app that ends its process itself (os._exit) ends the run with its status, on the RTL as
on the model: on a simulator it was gpucosim's traceback ("RuntimeError: Command failed with
return code: 5"), the simulator's process being the app's."""

from __future__ import annotations

import pytest

from .cli_helpers import gpucosim

RTL = pytest.mark.xdist_group("demo_rtl")  # (one worker builds and runs the RTL, as test_cli_run_stop's)


@pytest.mark.parametrize("sim", ["model", pytest.param("verilator", marks=RTL)])
def test_an_app_that_calls_os_exit_ends_the_run_with_its_status(tmp_path, sim):
    app = tmp_path / "quits.py"
    app.write_text("import os\nimport umd\n\ngpu = umd.open()\nprint('before _exit', flush=True)\nos._exit(5)\n")
    r = gpucosim("run", str(app), "--sim", sim, timeout=600)
    assert r.returncode == 5, r.stderr
    assert "before _exit" in r.stdout and "Traceback" not in r.stderr, r.stderr
    if sim != "model":  # (the simulator's process ended under the launcher: said in one line)
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"gpucosim: the {sim} simulator's process ended (status 5) before the app "
                               "returned: an os._exit() in the app, or the simulator died (its log: "), r.stderr


@RTL
def test_a_verilator_simulator_killed_by_a_signal_is_said_in_one_line(tmp_path):
    app = tmp_path / "dies.py"
    app.write_text("import os, signal\nimport umd\n\ngpu = umd.open()\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    r = gpucosim("run", str(app), "--sim", "verilator", timeout=600)
    assert r.returncode == 128 + 11 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith(
        "gpucosim: the verilator simulator's process ended (signal SIGSEGV) before the app returned"), r.stderr
