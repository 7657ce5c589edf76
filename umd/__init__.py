"""The user-mode driver: the runtime API applications use.

    import umd
    dev = umd.open(api_version=1)          # opens the render node of the bound device
    buf = dev.alloc(4096, "vram")          # Buffer: gpu_addr, map() / u32 (numpy views)
    q = dev.queue()                        # a KMD context + chained command buffers
    q.write(buf, 0, [1, 2, 3])             # WRITE_DATA
    q.wait_mem(buf, 0, 1)                  # GPU-side wait (WAIT_REG_MEM): till buf's dword 0 is 1
    ev = q.signal()                        # RELEASE_MEM; ev.wait(timeout) in GPU cycles, None: no bound
    q.flush(); q.finish()
    dev.close()                            # or: with umd.open() as dev, with dev.queue() as q,
                                           # with dev.alloc(n) as buf (close or free at the end)

Layers: api (versions and dispatch tables), runtime (the Device), memory (Device.alloc,
Device.memory, the Buffer), queue/ (the Queue: record, its flush, finish and close, its
commands, transfer's copies and fills, create's Device.queue by API version), events (Event,
Timestamp, waits), submit (the asynchronous submission thread), failures/ (kmd_errors: what a
KMD error means for a queue; faults: the call that recorded a faulting packet; failed_jobs: a
failed job's error, raised once), errors, tracebacks (an uncaught error as the app's author
reads it: their frames and its line, under `gpucosim run` and `python app.py` alike), args
(the argument checks every call shares) and calls (argument mistakes said for the app);
below them winsys/ (the ioctls, the VA allocator, the buffer pools, chained IBs). The UMD reaches the GPU only through the KMD's
ioctls (kmd_model.open_render_node()).
"""

from .api import LATEST, TABLES, DispatchTable, open  # noqa: F401
from .errors import DeviceLost, GpuError, GpuTimeout, NotPermitted, OutOfMemory, QueueBanned, SubmitError, UmdError  # noqa: F401
from .events import Event, Timestamp  # noqa: F401
from .queue import Queue  # noqa: F401
from .args import DEFAULT_TIMEOUT  # noqa: F401
from .memory import Buffer  # noqa: F401
from .runtime import Device  # noqa: F401

__all__ = ["LATEST", "TABLES", "DispatchTable", "open", "DeviceLost", "GpuError", "GpuTimeout", "OutOfMemory",
           "NotPermitted", "QueueBanned", "SubmitError", "UmdError", "Event", "Timestamp", "Queue", "DEFAULT_TIMEOUT", "Buffer", "Device"]

# `import umd` in a script run by python: its uncaught UMD, KMD and argument errors, and ^C,
# as `gpucosim run` prints them, from its first line on (umd/tracebacks.py)
from . import tracebacks as _tracebacks  # noqa: E402

_tracebacks.install_for_script()
