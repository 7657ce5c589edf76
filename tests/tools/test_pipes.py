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

ROOT = Path(__file__).resolve().parents[2]


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
