"""^C and the UMD's bookkeeping: a flush holds SIGINT until it is done.

A flush hands its IBs to the KMD (the CS ioctl) and then records what it submitted (the
seqno its events and the queue's waits need, its IBs in flight). A KeyboardInterrupt between
the two lost the submission silently: the recorded commands were gone from the queue, the
job had run or not, and a later finish() or Event.wait() answered at once as if all were
done. The kernel has the same problem with signals and answers it the same way: a signal
that arrives during an ioctl is delivered on the way back to user space, after the ioctl
is complete. Waits (Event.wait, finish) stay interruptible: they change nothing the UMD
records, and a wait without bound (timeout=None) must be one ^C can end.

Only the main thread receives signals in Python, and only a Python handler can be deferred
(SIG_IGN and SIG_DFL are left alone): elsewhere this does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator


@contextlib.contextmanager
def deferred_sigint() -> Iterator[None]:
    """Run the block with SIGINT held: a ^C during it runs the app's handler (by default
    KeyboardInterrupt) once the block has ended, normally or not."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    prev = signal.getsignal(signal.SIGINT)
    if not callable(prev):
        yield
        return
    held: list = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, prev)
        if held:
            prev(signal.SIGINT, held[0])
