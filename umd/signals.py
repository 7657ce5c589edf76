"""^C and the UMD's bookkeeping: a flush holds the stopping signals until it is done.

A flush hands its IBs to the KMD (the CS ioctl) and then records what it submitted (the
seqno its events and the queue's waits need, its IBs in flight). A KeyboardInterrupt between
the two lost the submission silently: the recorded commands were gone from the queue, the
job had run or not, and a later finish() or Event.wait() answered at once as if all were
done. The kernel has the same problem with signals and answers it the same way: a signal
that arrives during an ioctl is delivered on the way back to user space, after the ioctl
is complete. Waits (Event.wait, finish) stay interruptible: they change nothing the UMD
records, and a wait without bound (timeout=None) must be one ^C can end.

The signals held are those that stop a run: SIGINT (^C), SIGALRM (`gpucosim run --timeout`
raises its RunTimeout from one; held for SIGINT alone, a timeout in the same place lost the
submission as ^C had), SIGTERM and SIGHUP (`kill`, a closed terminal: gpucosim stops a run
on them as on ^C).

Only the main thread receives signals in Python, and only a Python handler can be deferred
(SIG_IGN and SIG_DFL are left alone): elsewhere this does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator

from kmd_model.core.signals import deliver, set_handlers  # (the kernel's delivery after an ioctl, the same order)

HELD = (signal.SIGINT, signal.SIGALRM, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def deferred_stops() -> Iterator[None]:
    """Run the block with the HELD signals held: one that arrives during it runs the
    app's handler (for ^C by default KeyboardInterrupt) once the block has ended, normally
    or not, in the order they came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prevs = {s: h for s in HELD if callable(h := signal.getsignal(s))}
    if not prevs:
        yield
        return
    held: list = []  # (signum, frame), each signal once

    def note(signum, frame) -> None:
        if all(signum != h[0] for h in held):
            held.append((signum, frame))
    # (set_handlers: a signal between two of the calls whose handler raises leaves none held)
    try:
        set_handlers([(s, note) for s in prevs], signal.signal)
    except BaseException:
        try:
            set_handlers(list(prevs.items()), signal.signal)
        finally:
            deliver(prevs, held)
        raise
    try:
        yield
    finally:
        try:
            set_handlers(list(prevs.items()), signal.signal)
        finally:
            deliver(prevs, held)
