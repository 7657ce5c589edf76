"""The `gpucosim` runs a test starts in a session of its own end with the test's process.
A pytest killed from outside (timeout(1), CI's time limit) signals its own process group;
a child in another session outlived it: a `gpucosim run ... --sim verilator` and its
simulator ran on for 58 minutes at 100 % of a core with PPID 1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from .cli_helpers import ROOT, processes_with

SPIN = "def main():\n    print('running', flush=True)\n    while True:\n        pass\n"

# the test's process as it would be killed: it starts the run as test_cli_run_stop's do
TEST = """
import subprocess, sys
sys.path.insert(0, {root!r})
from tests.tools.cli.cli_helpers import dies_with_the_test
p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", {app!r}, "--sim", "model"], cwd={root!r},
                     stdout=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=dies_with_the_test())
print(p.stdout.readline().strip(), flush=True)
while True:
    pass
"""


def test_a_run_in_its_own_session_ends_with_the_killed_test(tmp_path):
    app = tmp_path / "spin.py"
    app.write_text(SPIN)
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    test = subprocess.Popen([sys.executable, "-c", TEST.format(root=str(ROOT), app=str(app))], env=e,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert test.stdout.readline().strip() == "running"
        assert processes_with(str(app).encode())  # (the run is up: the app spins)
        test.kill()  # as timeout(1) or a CI limit ends pytest
        test.wait(timeout=30)
        deadline = time.monotonic() + 30
        while processes_with(str(app).encode()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not processes_with(str(app).encode()), "the run outlived the test's process"
    finally:
        test.kill()
        for pid in processes_with(str(app).encode()):  # (what a failure left)
            os.kill(pid, signal.SIGKILL)
