"""The Queue, a KMD context an app records commands into and submits, by concept:

- record.py: the Queue itself, recording into chained IBs, its throttling and reclaim;
- flush.py: its entry points that submit (flush, finish, close);
- commands.py: the commands it records of its own (write, wait_mem, emit_raw);
- transfer.py: the DMA engine's transfers (fill, copy, upload, download);
- create.py: Device.queue, which makes one, in each API version's form.

Its events, timestamps and waits on them are umd/events.py; the asynchronous submission
thread umd/submit.py; what a KMD error means for a queue umd/failures/.
"""

from .record import (ENGINES, MAX_INFLIGHT, PRIORITIES, QBO_BYTES, QBO_TIMELINE,  # noqa: F401
                     QBO_TS_FIRST, QBO_TS_SLOTS, QBO_USER_FENCE, IbPool, Queue, Submission)
