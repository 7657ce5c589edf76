"""What the `gpucosim` command-line tests share: the repository root, the subcommands, and
two ways to run the CLI (a fresh process; in this process, expecting a usage error)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpucosim import cli


ROOT = Path(__file__).resolve().parents[3]


SUBCOMMANDS = ("run", "sim", "bench", "disasm", "regs", "plot")


def gpucosim(*argv: str, cwd: Path = ROOT, env: dict | None = None, timeout: int = 120):
    """The installed console script's behaviour, in a fresh process."""
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "gpucosim", *argv], cwd=cwd, env=e, capture_output=True,
                          text=True, timeout=timeout)


def usage_error(capsys, *argv: str) -> str:
    """Run the CLI in this process, expect a usage error (exit 2) of one line, the whole of
    stderr (no usage block before it: --help has that), and return it."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]
