"""The signals that stop a run besides Ctrl-C, kept light: cli.main installs `terminate`
before it imports anything of a run.

SIGTERM (`kill PID`, timeout(1), a service manager) and SIGHUP (the terminal closed) stop
a run as a Ctrl-C does: the app is stopped where a ^C would be (umd/signals.py holds them
through a flush), the timeline, the figures and the exit report are written, and the status
is 128 + the signal's number (143, 129). By their default action they killed the launcher
alone: a simulator it had started ran on (100 % of a core, for ever when the app spins),
and nothing was written.
"""

from __future__ import annotations

import signal

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """A run stopped by SIGTERM or SIGHUP: a KeyboardInterrupt, so that every place that
    stops a run on ^C stops it on these too."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def terminate(signum: int, frame=None) -> None:
    """SIGTERM's and SIGHUP's handler in the launcher, as Python's own is for SIGINT."""
    raise Terminated(signum)


def stop_words(e: BaseException) -> str:
    """How gpucosim says it was stopped: "interrupted", "terminated (SIGTERM)"."""
    return f"terminated ({signal.Signals(e.signum).name})" if isinstance(e, Terminated) else "interrupted"
