"""Device.queue, the entry point that makes a Queue (umd/queue/record.py), in each API version's
form: v1 (gfx only), v2 (engine= and priority=), v3 (async_submit=); the arguments a later
version added are refused by name in an earlier one, as missing entry points are.
"""

from __future__ import annotations

import difflib
import weakref
from typing import Any

import numpy as np

from kmd_model.ioctl.copyin import shown

from ..calls import accepted_keywords, unexpected_keyword
from ..runtime import Device
from ..submit import Submitter
from .record import ENGINES, MAX_INFLIGHT, PRIORITIES, Queue


def device_queue(self: Device, *, flush_threshold: int | None = None, flush_dwords: int | None = None,
                 ib_size_dw: int = 1024, max_inflight: int = MAX_INFLIGHT, engine: str = "gfx",
                 priority: str = "normal", **v3: Any) -> "Queue":
    """A queue (a KMD context) recording commands into chained IBs. `engine`: "gfx" (the
    CP's ring, PM4) or "copy" (the SDMA copy engine's ring: write, fill, copy, upload,
    download, signal, wait_mem run as SDMA packets beside the gfx queues); `priority`: "low",
    "normal" or "high", the context's scheduler run queue ("high" needs CAP_SYS_NICE, which
    a client has only when opted into: a Device over open_render_node(cap_sys_nice=True), or a
    KMD bound with cap_sys_nice=True; else umd.NotPermitted, a PermissionError). It flushes by itself
    after `flush_threshold` commands (the API version's default) or, when given, once
    `flush_dwords` dwords are recorded; `ib_size_dw` is the size of each chained IB. At most
    `max_inflight` submissions are in flight: past that a flush (or a new IB) waits for the
    oldest to finish, so memory stays bounded however fast the app records."""
    for name in v3:  # (the arguments later versions added are named as missing entry points are)
        if name == "async_submit":
            raise TypeError(f"queue: async_submit= is not in API version {self.api_version} (it is in version 3)")
        raise unexpected_keyword("Device.queue", name, accepted_keywords(device_queue))
    return _new_queue(self, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
                      self.async_default)


def device_queue_v1(self: Device, *, flush_threshold: int | None = None, flush_dwords: int | None = None,
                    ib_size_dw: int = 1024, max_inflight: int = MAX_INFLIGHT, **later: Any) -> "Queue":
    """API v1: a queue (a KMD context) on the gfx ring, recording commands into chained
    IBs; it flushes by itself after `flush_threshold` commands (16) or, when given, once
    `flush_dwords` dwords are recorded; `ib_size_dw` is the size of each chained IB; at most
    `max_inflight` submissions are in flight. (engine= and priority= came with version 2.)"""
    for name in later:
        if name in ("engine", "priority"):
            raise TypeError(f"queue: {name}= is not in API version {self.api_version} (it is in version 2, 3)")
        if name != "async_submit":  # (device_queue names it as a later version's)
            raise unexpected_keyword("Device.queue", name, accepted_keywords(device_queue_v1))
    return device_queue(self, flush_threshold=flush_threshold, flush_dwords=flush_dwords, ib_size_dw=ib_size_dw,
                        max_inflight=max_inflight, **later)


def device_queue_v3(self: Device, *, flush_threshold: int | None = None, flush_dwords: int | None = None,
                    ib_size_dw: int = 1024, max_inflight: int = MAX_INFLIGHT, engine: str = "gfx",
                    priority: str = "normal", async_submit: bool | None = None) -> "Queue":
    """API v3: a queue (a KMD context) recording commands into chained IBs. `engine`: "gfx"
    (the CP's ring, PM4) or "copy" (the SDMA copy engine's ring: write, fill, copy, upload,
    download, signal, wait_mem run as SDMA packets beside the gfx queues); `priority`:
    "low", "normal" or "high", the context's scheduler run queue ("high" needs
    CAP_SYS_NICE, which a client has only when opted into: a Device over
    open_render_node(cap_sys_nice=True), or a KMD bound with cap_sys_nice=True; else
    umd.NotPermitted, a PermissionError). It flushes by itself after `flush_threshold` commands (64)
    or, when given, once `flush_dwords` dwords are recorded; `ib_size_dw` is the size of
    each chained IB. At most `max_inflight` submissions are in flight: past that a flush
    (or a new IB) waits for the oldest to finish, so memory stays bounded however fast the
    app records. `async_submit`: True, the queue's flushes are submitted by the device's
    submission thread (the CS ioctl no longer runs inside flush(); umd/submit.py); False,
    by flush() itself; None, as GPUCOSIM_ASYNC_SUBMIT says (default 0). Events, fences,
    results and the order of the queue's jobs are the same either way; a refused
    submission is raised by the queue's next flush(), finish(), Event.wait() or close()
    (docs/architecture.md, "The asynchronous submission thread")."""
    if async_submit is not None and not isinstance(async_submit, (bool, np.bool_)):
        raise TypeError(f"queue: async_submit must be True, False or None, not {shown(async_submit)}")
    async_submit = None if async_submit is None else bool(async_submit)  # (numpy's bool too, as _flag)
    return _new_queue(self, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
                      self.async_default if async_submit is None else async_submit)


# what a newcomer calls an engine by (amdgpu's and the hardware's names), and the one it is
_ENGINE_WORDS = {**dict.fromkeys(("sdma", "sdma0", "dma", "transfer"), "copy"),
                 **dict.fromkeys(("gfx0", "graphics", "cp", "pm4"), "gfx")}
_ENGINE_WHY = {"copy": "the SDMA copy engine's queue", "gfx": "the CP's ring, PM4 packets"}


def _meant(given, names, words: dict | None = None) -> str:
    """": did you mean 'copy'?" for a name in another case or spelling, or another's word for
    it (engine="sdma": the copy engine is the SDMA); else nothing."""
    if not isinstance(given, str):
        return ""
    key = given.strip().lower()
    if words and key in words:
        return f": did you mean {words[key]!r}? ({_ENGINE_WHY[words[key]]})"
    meant = key if key in names else next(iter(difflib.get_close_matches(key, list(names), n=1, cutoff=0.75)), None)
    return f": did you mean {meant!r}?" if meant else ""


def _new_queue(self: Device, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
               async_submit: bool) -> "Queue":
    if not isinstance(engine, str) or engine not in ENGINES:  # (a list is no engine: not "unhashable")
        raise ValueError(f"queue: engine must be one of {', '.join(map(repr, ENGINES))}, not {shown(engine)}"
                         + _meant(engine, ENGINES, _ENGINE_WORDS))
    if not isinstance(priority, str) or priority not in PRIORITIES:
        raise ValueError(f"queue: priority must be one of {', '.join(map(repr, PRIORITIES))}, not {shown(priority)}"
                         + _meant(priority, PRIORITIES))
    if engine == "copy" and not self.dev_info.sdma_rings:
        raise ValueError(f"queue: engine='copy' needs an SDMA engine, and the {self.name} backend has none "
                         "(QUEUE_CAPS.SDMA is 0): use engine='gfx'")
    q = Queue(self, flush_threshold if flush_threshold is not None else self._table.flush_threshold,
              ib_size_dw, flush_dwords, max_inflight, engine, priority)
    if async_submit:
        if self.submitter is None:
            self.submitter = self.ws.submitter = Submitter(self.owner_thread, self.ws.thread_bound())
            weakref.finalize(self, self.submitter.stop)  # (an app that never closes its device)
        q._async_submit = True  # (read-only to the app: Queue.async_submit)
    self.queues.append(q)
    return q
