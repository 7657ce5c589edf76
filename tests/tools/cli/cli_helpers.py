"""What the `gpucosim` command-line tests share: the repository root, the subcommands, and
two ways to run the CLI (a fresh process; in this process, expecting a usage error), and
what the tests that start and stop one themselves use."""

from __future__ import annotations

import os
import signal
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


def dies_with_the_test(sigint: bool = False):
    """A `preexec_fn` for a `gpucosim` the test starts and stops itself: SIGTERM to it when the
    test's process dies (Linux's PR_SET_PDEATHSIG; the launcher stops its run and simulator on
    SIGTERM). A pytest killed by timeout(1) or CI's limit signals its own process group, which
    a child in a session of its own is not in: one ran on for 58 minutes with a Verilator
    simulator at 100 % of a core. `sigint`: SIGINT back to its default, as a terminal leaves
    it (an xdist worker ignores it, a child inherits that, and Python then never raises
    KeyboardInterrupt)."""
    def pre() -> None:
        if sigint:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        if sys.platform.startswith("linux"):
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    return pre


def processes_with(text: bytes) -> list[int]:
    """The processes whose command line or environment holds `text` (a simulator has the
    app's path in its environment, the model's process and its forks in their arguments)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            for part in ("cmdline", "environ"):
                try:
                    with open(f"/proc/{d}/{part}", "rb") as f:
                        if text in f.read():
                            found.append(int(d))
                            break
                except OSError:
                    pass
    return found


def usage_error(capsys, *argv: str) -> str:
    """Run the CLI in this process, expect a usage error (exit 2) of one line, the whole of
    stderr (no usage block before it: --help has that), and return it."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(argv))
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    return err[0]
