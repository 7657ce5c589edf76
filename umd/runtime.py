"""The runtime objects an application holds: Device, Buffer, Queue, Event.

The entry points of Device and Queue (alloc, write, signal, ...) are not methods of the
classes: they are looked up in the dispatch table of the API version the application
asked for (umd/api.py), so one UMD serves every version side by side. The functions
here, named `<class>_<call>[_v<N>]`, are what the tables point at.
"""

from __future__ import annotations

import bisect
import errno
import functools
import logging
import operator
import os
import threading
import types
import weakref
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from kmd_model.fence import seq_passed
from kmd_model.log import get_logger
from kmd_model.uapi import CsChunkDep, CsChunkFence, CsChunkIb, CtxPriority, Domain, HwIp, InfoQuery, KmdError
from spec import pm4, sdma

from . import submit
from .cmdbuf import CmdBuf
from .errors import DeviceLost, GpuError, GpuTimeout, OutOfMemory, SubmitError, UmdError
from .pool import Backing, MemoryManager, PoolStats
from .submit import ENV as ASYNC_ENV
from .submit import PendingCs, Submitter
from .va import VaStats
from .winsys import Winsys

if TYPE_CHECKING:
    from .api import DispatchTable

log = get_logger("umd")

M32 = 0xFFFF_FFFF
KMD_MAJOR = 2  # the KMD API this UMD speaks (GPU virtual addresses, GEM_VA)
DEFAULT_TIMEOUT = 2_000_000  # simulated cycles
MAX_INFLIGHT = 32  # submissions a queue has in flight before a flush waits for the oldest
DOMAINS = {"gtt": Domain.GTT, "vram": Domain.VRAM}
COMPARE = {"always": "ALWAYS", "<": "LT", "<=": "LE", "==": "EQ", "!=": "NE", ">=": "GE", ">": "GT"}
# A queue's engine: the CS ring it submits to (HW IP type, ring 0)
ENGINES = {"gfx": HwIp.GFX, "copy": HwIp.DMA}
PRIORITIES = {"low": CtxPriority.LOW, "normal": CtxPriority.NORMAL, "high": CtxPriority.HIGH}

# The queue's own page: user fence, event timeline, timestamp slots.
QBO_BYTES = 4096
QBO_USER_FENCE = 0
QBO_TIMELINE = 1
QBO_TS_FIRST = 8  # qword index of the first timestamp slot (byte 64)
QBO_TS_SLOTS = QBO_BYTES // 8 - QBO_TS_FIRST  # reused in turn: a Timestamp is read before 504 more are taken


# ---------------------------------------------------------------------------- tracing hook

# Set by a tracer (gpucosim's timeline): every API call then runs as
# `api_hook("Queue.write", fn, args, kwargs)`, which must call fn(*args, **kwargs) and
# return its result. None costs the dispatched entry points nothing and the few plain
# methods (Event.wait, Buffer.free, umd.open) one global lookup.
api_hook: Callable[[str, Callable, tuple, dict], Any] | None = None


def api_call(name: str) -> Callable:
    """Mark a function as an API entry point `name`, seen by `api_hook`."""
    def deco(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def call(*args, **kwargs):
            hook = api_hook
            return fn(*args, **kwargs) if hook is None else hook(name, fn, args, kwargs)
        return call
    return deco


def _hooked(name: str, bound: Callable) -> Callable:
    @functools.wraps(bound)  # help() and inspect.signature show the entry point, not the wrapper
    def call(*args, **kwargs):
        hook = api_hook
        return bound(*args, **kwargs) if hook is None else hook(name, bound, args, kwargs)
    return call


# ---------------------------------------------------------------------------- dispatch

class _Dispatched:
    """Entry points come from the object's dispatch table (see umd/api.py). Once the object
    is closed, every entry point but close() raises ValueError naming the call (as Python's
    files do): a command recorded into a closed queue would otherwise be lost silently."""

    _kind = ""
    closed = False

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        table: DispatchTable = self.__dict__["_table"]
        fn = table.entries.get(f"{self._kind}.{name}")
        if fn is None:
            raise AttributeError(table.missing(self._kind, name))
        if self.closed and fn is not table.entries.get(f"{self._kind}.close"):
            return _closed_call(f"{name}: the {self._kind.lower()} is closed")
        bound = types.MethodType(fn, self)
        if api_hook is not None:
            bound = _hooked(f"{self._kind}.{name}", bound)
        self.__dict__[name] = bound  # later calls skip the lookup (until close: _set_closed)
        return bound

    def _set_closed(self) -> None:
        """Closed from now on: the entry points cached so far are dropped, so each call
        goes through __getattr__ again and is refused there."""
        for k, v in list(self.__dict__.items()):
            if isinstance(v, (types.MethodType, types.FunctionType)):  # (private attributes are data)
                del self.__dict__[k]
        self.closed = True

    def __dir__(self) -> list[str]:
        own = [k.split(".", 1)[1] for k in self.__dict__["_table"].entries if k.startswith(self._kind + ".")]
        return sorted(set(super().__dir__()) | set(own))


def _closed_call(message: str):
    def refuse(*args, **kwargs):
        raise ValueError(message)
    return refuse


# ---------------------------------------------------------------------------- Device

class Device(_Dispatched):
    """An opened GPU: `umd.open(api_version=1)`."""

    _kind = "Device"

    def __init__(self, table: "DispatchTable", winsys: Winsys | None = None, pools: bool = True):
        # asynchronous submission (umd/submit.py): the default of every queue's async_submit
        # (GPUCOSIM_ASYNC_SUBMIT, a driver setting as Mesa's GALLIUM_THREAD), and the thread,
        # started with the first async queue; the thread that opened the device owns the KMD
        env = os.environ.get(ASYNC_ENV, "0")
        if env not in ("0", "1"):
            raise ValueError(f"open: {ASYNC_ENV} must be 0 or 1, not {env!r}")
        self.async_default = env == "1"
        self.owner_thread = threading.get_ident()
        self.submitter: Submitter | None = None
        self._table = table
        self.api_version = table.version
        self.ws = winsys or Winsys()
        fw = self.ws.query(InfoQuery.FW_VERSION)
        if fw.kmd_version[0] != KMD_MAJOR:
            raise DeviceLost(f"KMD {fw.kmd_name} {'.'.join(map(str, fw.kmd_version))}: this UMD needs major "
                             f"version {KMD_MAJOR}")
        self.dev_info = i = self.ws.query(InfoQuery.DEV_INFO)
        self.name = i.backend
        self.queues: list[Queue] = []
        self.buffers: set[Buffer] = set()
        # the VA range and the BOs behind Buffers (umd/va.py, umd/pool.py)
        self.mm = MemoryManager(self, i.va_start, i.va_end, i.va_alignment, pools)
        self.closed = False

    def __repr__(self) -> str:
        return f"<umd.Device {self.name} api v{self.api_version}>"

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def device_alloc(self: Device, size: int, domain: str | int = "gtt", *, alignment: int = 0,
                 zero: bool = True, _owner: Any = None) -> "Buffer":
    """A buffer of `size` bytes in "gtt" or "vram" at a GPU virtual address (`gpu_addr`),
    zero-filled unless zero=False. Small buffers are carved from slabs and freed ones are
    reused (umd/pool.py) unless the device was opened with pools=False."""
    size = _index("alloc", "size", size)
    if size <= 0:
        raise ValueError(f"alloc: size must be > 0, not {size}")
    alignment = _index("alloc", "alignment", alignment)
    if alignment < 0 or alignment & (alignment - 1):
        raise ValueError(f"alloc: alignment must be 0 or a power of two, not {alignment:#x}")
    dom = DOMAINS.get(domain.lower()) if isinstance(domain, str) else \
        domain if type(domain) in (int, Domain) and domain in DOMAINS.values() else None
    if dom is None:
        raise ValueError(f"alloc: domain must be 'gtt' or 'vram', not {domain!r}")
    if not isinstance(zero, bool):
        raise TypeError(f"alloc: zero must be True or False, not {zero!r}")
    backing, offset, slab, fresh = self.mm.alloc(size, Domain(dom), alignment)
    buf = Buffer(self, backing, offset, size, dom, slab)
    buf.owner = _owner
    if zero and not fresh:
        buf.map()[:] = 0  # reused memory: what was there is the app's own, but alloc promises zeros
    self.buffers.add(buf)
    return buf


def device_queue(self: Device, *, flush_threshold: int | None = None, flush_dwords: int | None = None,
                 ib_size_dw: int = 1024, max_inflight: int = MAX_INFLIGHT, engine: str = "gfx",
                 priority: str = "normal", **v3: Any) -> "Queue":
    """A queue (a KMD context) recording commands into chained IBs. `engine`: "gfx" (the
    CP's ring, PM4) or "copy" (the SDMA copy engine's ring: write, fill, copy, upload,
    download, signal, wait_mem run as SDMA packets beside the gfx queues); `priority`: "low",
    "normal" or "high", the context's scheduler run queue. It flushes by itself
    after `flush_threshold` commands (the API version's default) or, when given, once
    `flush_dwords` dwords are recorded; `ib_size_dw` is the size of each chained IB. At most
    `max_inflight` submissions are in flight: past that a flush (or a new IB) waits for the
    oldest to finish, so memory stays bounded however fast the app records."""
    for name in v3:  # (the arguments later versions added are named as missing entry points are)
        if name == "async_submit":
            raise TypeError(f"queue: async_submit= is not in API version {self.api_version} (it is in version 3)")
        raise TypeError(f"queue() got an unexpected keyword argument {name!r}")
    return _new_queue(self, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
                      self.async_default)


def device_queue_v3(self: Device, *, flush_threshold: int | None = None, flush_dwords: int | None = None,
                    ib_size_dw: int = 1024, max_inflight: int = MAX_INFLIGHT, engine: str = "gfx",
                    priority: str = "normal", async_submit: bool | None = None) -> "Queue":
    """API v3: Device.queue as in v2, plus `async_submit`: True, the queue's flushes are
    submitted by the device's submission thread (the CS ioctl no longer runs inside flush();
    umd/submit.py); False, by flush() itself; None, as GPUCOSIM_ASYNC_SUBMIT says (default 0).
    Events, fences, results and the order of the queue's jobs are the same either way; a
    refused submission is raised by the queue's next flush(), finish(), Event.wait() or
    close() (docs/architecture.md, "The asynchronous submission thread")."""
    if async_submit is not None and not isinstance(async_submit, bool):
        raise TypeError(f"queue: async_submit must be True, False or None, not {async_submit!r}")
    return _new_queue(self, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
                      self.async_default if async_submit is None else async_submit)


def _new_queue(self: Device, flush_threshold, flush_dwords, ib_size_dw, max_inflight, engine, priority,
               async_submit: bool) -> "Queue":
    if engine not in ENGINES:
        raise ValueError(f"queue: engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    if priority not in PRIORITIES:
        raise ValueError(f"queue: priority must be one of {', '.join(map(repr, PRIORITIES))}, not {priority!r}")
    if engine == "copy" and not self.dev_info.sdma_rings:
        raise ValueError(f"queue: engine='copy' needs an SDMA engine, and the {self.name} backend has none "
                         "(QUEUE_CAPS.SDMA is 0): use engine='gfx'")
    q = Queue(self, flush_threshold if flush_threshold is not None else self._table.flush_threshold,
              ib_size_dw, flush_dwords, max_inflight, engine, priority)
    if async_submit:
        if self.submitter is None:
            self.submitter = self.ws.submitter = Submitter(self.owner_thread, self.ws.thread_bound())
            weakref.finalize(self, self.submitter.stop)  # (an app that never closes its device)
        q.async_submit = True
    self.queues.append(q)
    return q


def device_info(self: Device) -> Any:
    """The KMD's DEV_INFO: backend name, capabilities, IB alignment ..."""
    return self.dev_info


def device_counters(self: Device) -> Any:
    """INFO COUNTERS: hardware performance counters (packets by kind ...) and KMD statistics."""
    return self.ws.query(InfoQuery.COUNTERS)


@dataclass(frozen=True)
class MemoryReport:
    """Device.memory(): the KMD's heaps (vram, gtt), the device's VA range (va: used,
    free ranges, largest free range) and the pools (hits, misses, slabs, waste)."""

    vram: Any
    gtt: Any
    va: VaStats
    pools: PoolStats


def device_memory(self: Device) -> MemoryReport:
    self.mm.take_back()
    m = self.ws.query(InfoQuery.MEMORY)
    return MemoryReport(m.vram, m.gtt, self.mm.va.stats(), self.mm.stats())


def device_close(self: Device) -> None:
    """Close every queue (each submits and finishes what it has), free every buffer, close
    the render node. A submission of an async queue that the KMD refused and the app was
    not told of yet is raised here, once everything is closed (as a file's close() raises
    what its last flush could not write)."""
    if self.closed:
        return
    errors = []
    for q in list(self.queues):
        try:
            q._close()
        except UmdError as e:  # (only unreported async refusals: _close swallows the rest)
            errors.append(e)
    for b in list(self.buffers):
        b.free()
    self.mm.close()
    if self.submitter is not None:
        self.submitter.close()  # nothing is queued any more: the queues are closed
        self.ws.submitter = None
    self.ws.close()
    self._set_closed()
    _raise_first(errors)


def _raise_first(errors: list) -> None:
    if errors:
        for e in errors[1:]:
            errors[0].add_note(f"and: {type(e).__name__}: {e}")
        raise errors[0]


# ---------------------------------------------------------------------------- Buffer

class Buffer:
    """Device memory: `gpu_addr` (a GPU virtual address), `size`, a CPU mapping (`map()`,
    `u32`). It lives in a BO of its own or in a slab's (`handle`, at `bo_offset`)."""

    def __init__(self, device: Device, backing: Backing, bo_offset: int, size: int, domain: Domain, slab=None):
        self.device = device
        self.backing = backing
        self.handle = backing.handle
        self.bo_offset = bo_offset
        self.gpu_addr = backing.va + bo_offset
        self.size = size
        self.domain = domain
        self.slab = slab
        self.owner = None  # the Queue whose own buffer it is (its page, IBs, staging); None: the app's
        self._view: np.ndarray | None = None
        self.freed = False

    def map(self) -> np.ndarray:
        """The bytes as a numpy uint8 view of device memory (GEM_MMAP, once per BO)."""
        if self.freed:
            raise ValueError(f"map: {self!r} was freed")
        if self._view is None:
            self._view = self.backing.map(self.device.ws)[self.bo_offset:self.bo_offset + self.size]
        return self._view

    @property
    def u32(self) -> np.ndarray:
        """The buffer as little-endian dwords."""
        v = self.map()
        return v[:len(v) & ~3].view("<u4")

    @api_call("Buffer.free")
    def free(self) -> None:
        """Release the buffer; the KMD keeps the memory until the GPU is done with it."""
        if self.freed:
            return
        self.device.mm.free(self)
        self.device.buffers.discard(self)
        self._view = None
        self.freed = True

    def _range(self, call: str, offset: int, nbytes: int) -> int:
        offset = _index(call, "offset", offset)
        if offset < 0 or offset & 3:
            raise ValueError(f"{call}: offset must be a non-negative multiple of 4, not {offset}")
        if offset + nbytes > self.size:
            raise ValueError(f"{call}: [{offset:#x}, {offset + nbytes:#x}) is outside the "
                             f"{self.size:#x}-byte buffer")
        if self.freed:
            raise ValueError(f"{call}: the buffer was freed")
        return self.gpu_addr + offset

    def __repr__(self) -> str:
        return f"<umd.Buffer {self.domain.name} {self.gpu_addr:#x}+{self.size:#x}>"


# ---------------------------------------------------------------------------- Queue

@dataclass(eq=False)
class Submission:
    seq: int
    ibs: list  # umd Buffers used as IBs
    labels: dict  # packet address -> API call


class IbPool:
    """IB buffers, reused once the submission that used them has finished (pb_cache's
    idea, with reclaim only after the fence is idle). A new one is made only when none is
    free after reclaiming and throttling (Queue._throttle), so the pool stays bounded."""

    def __init__(self, queue: "Queue", size_dw: int):
        self.queue = queue
        self.size_dw = size_dw
        self.free: list[Buffer] = []
        self.created = 0

    def get(self) -> Buffer:
        q = self.queue
        if not self.free:
            q._throttle("new IB")
        if self.free:
            return self.free.pop()
        buf = q._alloc_or_wait(4 * self.size_dw, "new IB")
        self.created += 1
        return buf


class Queue(_Dispatched):
    _kind = "Queue"

    def __init__(self, device: Device, flush_threshold: int, ib_size_dw: int, flush_dwords: int | None = None,
                 max_inflight: int = MAX_INFLIGHT, engine: str = "gfx", priority: str = "normal"):
        flush_threshold = _index("queue", "flush_threshold", flush_threshold)
        if flush_threshold < 1:
            raise ValueError(f"queue: flush_threshold must be >= 1, not {flush_threshold}")
        if flush_dwords is not None and _index("queue", "flush_dwords", flush_dwords) < 1:
            raise ValueError(f"queue: flush_dwords must be >= 1, not {flush_dwords}")
        max_inflight = _index("queue", "max_inflight", max_inflight)
        if max_inflight < 1:
            raise ValueError(f"queue: max_inflight must be >= 1, not {max_inflight}")
        self.max_inflight = max_inflight
        self.timeout = DEFAULT_TIMEOUT  # how long a throttled flush waits for the oldest submission
        self.flush_dwords = flush_dwords
        self._table = device._table
        self.device = device
        self.ws = device.ws
        self.flush_threshold = flush_threshold
        self.engine = engine
        self.priority = priority
        self.copy_engine = engine == "copy"
        self.ip_type = ENGINES[engine]
        self.ctx_id = self.ws.ctx_alloc(PRIORITIES[priority])
        self.deps: list[CsChunkDep] = []  # events of other queues the next submission waits for
        info = device.dev_info
        self.qbo = device_alloc(device, QBO_BYTES, "gtt", _owner=self)
        self.q32 = self.qbo.u32
        self.timeline = 0  # last event value handed out
        self.ts_next = 0
        self.pool = IbPool(self, ib_size_dw)
        self.cmdbuf = CmdBuf(self.pool.get, ib_size_dw, info.ib_align_dw, sdma=self.copy_engine)
        self.has_dma = info.has_dma or self.copy_engine
        # one DMA_DATA (or SDMA COPY_LINEAR / CONSTANT_FILL) moves at most this much
        self.dma_chunk = sdma.MAX_COPY_BYTES if self.copy_engine else info.dma_max_bytes
        self.staging: list = []  # (seq, Buffer) staging buffers of uploads/downloads in flight
        self.inflight: deque[Submission] = deque()
        self.unflushed_events: list[Event] = []
        self.first_seq: int | None = None
        self.last_seq: int | None = None
        self.fence_trusted = False  # the user fence dword holds a seqno of ours (seq_done)
        self.submitted = 0  # flushes submitted (umd/pool.py's fences count in these)
        # flushes that took more than one CS (a copy queue's, past max_ib_chunks IBs): (flush,
        # CS ioctls beyond one per flush up to it), so seq_of(n) finds the n-th flush's last seqno
        self._extra_cs: list[tuple[int, int]] = []
        self.calls = 0
        self.flushes = 0
        self.closed = False
        # asynchronous submission (umd/submit.py; set by Device.queue): flushes waiting for
        # the device's submission thread, in order, and the refusals not yet raised
        self.async_submit = False
        self.pending: deque[PendingCs] = deque()
        self.async_errors: list[UmdError] = []
        self.async_flushes = 0
        self._closing = False
        # WRITE_DATA payload per packet: what fits in one IB beside its 3 header dwords
        self.max_write_dw = min(pm4.MAX_PAYLOAD - 2, self.cmdbuf.max_packet_dw - 4)

    def __repr__(self) -> str:
        eng = "" if self.engine == "gfx" else f" {self.engine}"
        return f"<umd.Queue{eng} ctx {self.ctx_id} api v{self._table.version}>"

    # -- recording helpers
    def _label(self, call: str) -> str:
        self.calls += 1
        return f"Queue.{call}() #{self.calls}"

    def _end_command(self) -> None:
        cb = self.cmdbuf
        cb.command()
        if cb.commands >= self.flush_threshold or (self.flush_dwords and cb.dwords >= self.flush_dwords):
            queue_flush(self)

    # -- completion
    def _submitted(self, seq: int, ncs: int) -> None:
        """A flush is in: its CS ioctls took `ncs` seqnos, the last `seq`."""
        if self.first_seq is None:
            self.first_seq = (seq - ncs + 1) & M32
        self.last_seq = seq
        self.submitted += 1
        if ncs > 1:
            self._extra_cs.append((self.submitted, (self._extra_cs[-1][1] if self._extra_cs else 0) + ncs - 1))

    def seq_of(self, n: int) -> int:
        """The last seqno of the queue's n-th submitted flush (n from 1): the one whose end
        means the whole flush has run."""
        k = bisect.bisect_right(self._extra_cs, (n, M32)) - 1
        return (self.first_seq + n - 1 + (self._extra_cs[k][1] if k >= 0 else 0)) & M32

    def seq_done(self, seq: int) -> bool:
        """The cheap check: has the user fence (written by the GPU after each job) passed seq?
        Seqnos are 32-bit and compared wrap-safely. Until the GPU has written the dword once
        it holds 0 (the BO was zero-filled); 0 can be a seqno too when the queue's seqnos pass
        through it (near the wrap, or starting there), and only then is the kernel asked about
        the queue's first job (one WAIT_CS that does not wait). Jobs end in order, so once a
        seqno of ours is there the dword always holds the last job that ended."""
        if self.last_seq is None:
            return False
        v = int(self.q32[QBO_USER_FENCE])
        if not self.fence_trusted:
            if v == 0 and ((0 - self.first_seq) & M32) <= ((self.last_seq - self.first_seq) & M32):
                try:  # 0 may be ours: ask whether the first job has ended
                    if not self.ws.wait_cs(self.ctx_id, self.first_seq, 0):
                        return False
                except KmdError:
                    return False  # the context was reset: the caller's own wait reports it
            elif v == 0:
                return False  # nothing written yet
            self.fence_trusted = True
        return seq_passed(seq, v)

    # -- asynchronous submission (the bodies are in umd/submit.py)
    def _collect(self) -> None:
        submit.collect(self)

    def _report(self) -> None:
        submit.report(self)

    def _drain(self, report: bool = True) -> None:
        submit.drain(self, report)

    def _throttle(self, what: str) -> None:
        """Reclaim what finished, then wait for the oldest submission while `max_inflight`
        are in flight (Mesa's throttling, drm_sched's hw_submission_limit)."""
        if self.pending and len(self.inflight) + len(self.pending) >= self.max_inflight:
            self._drain(report=False)  # (refusals are raised at the next flush or wait, not mid-command)
        self._reclaim()
        while len(self.inflight) >= self.max_inflight:
            oldest = self.inflight[0].seq
            if not self._wait_seq(oldest, self.timeout, what):
                raise GpuTimeout(f"{what}: queue (context {self.ctx_id}) has {len(self.inflight)} submissions "
                                 f"in flight, its limit (max_inflight={self.max_inflight}), and the oldest "
                                 f"(seqno {oldest:#x}) has not finished after {self.timeout} cycles")
            self._reclaim()

    def _alloc_or_wait(self, size: int, what: str) -> Buffer:
        """A GTT buffer for the queue's own use; when memory is short, wait for the queue's
        submissions to finish (their IBs and staging buffers come back) and try again."""
        while True:
            try:
                return device_alloc(self.device, size, "gtt", zero=False, _owner=self)
            except KmdError as e:
                if e.errno != errno.ENOMEM:
                    raise
                if self.pending:  # flushes still queued hold IBs and staging: let them go
                    self._drain(report=False)
                    self._reclaim()
                    continue
                if not self.inflight:
                    raise OutOfMemory(f"{what}: no memory for {size:#x} bytes on queue (context {self.ctx_id}), "
                                      f"with nothing of its own in flight (max_inflight={self.max_inflight}): "
                                      f"{e}") from e
                oldest = self.inflight[0].seq
                if not self._wait_seq(oldest, self.timeout, what):
                    raise OutOfMemory(f"{what}: no memory for {size:#x} bytes on queue (context {self.ctx_id}), "
                                      f"and its oldest submission (seqno {oldest:#x}) has not finished after "
                                      f"{self.timeout} cycles ({len(self.inflight)} in flight, "
                                      f"max_inflight={self.max_inflight}): {e}") from e
                self._reclaim()

    def _reclaim(self) -> None:
        while self.inflight and self.seq_done(self.inflight[0].seq):
            self.pool.free.extend(self.inflight.popleft().ibs)

    def _find_command(self, addr: int) -> str | None:
        for sub in self.inflight:
            if addr in sub.labels:
                return sub.labels[addr]
        return None

    def _raise_from(self, e: KmdError, what: str) -> None:
        """Turn a KMD error into the UMD's exception (a WAIT_CS's ETIME never comes here:
        _wait_seq answers it with False, and the caller says what timed out)."""
        if e.errno == errno.ECANCELED and e.info is not None:
            # the KMD's ECANCELED carries the context's decoded error (what CTX QUERY_STATE
            # would return): no need to ask again
            raise GpuError(e.info, self._find_command(e.info.addr)) from e
        if e.errno == errno.EIO:
            raise DeviceLost(f"{what}: {e.message}") from e
        if e.errno == errno.ENOMEM:
            raise OutOfMemory(f"{what}: queue (context {self.ctx_id}), {len(self.inflight)} submissions in flight "
                              f"(max_inflight={self.max_inflight}): {e.message}") from e
        raise SubmitError(e.errno, f"{what}: {e}") from e

    def _wait_seq(self, seq: int, timeout: int, what: str) -> bool:
        if self.seq_done(seq):
            return True
        if submit.any_queued():
            # A job of ours may wait (WAIT_REG_MEM, a dependency) for a flush still queued,
            # of any async queue: submit all of them before blocking, as sync flushes were.
            submit.drain_all()
        try:
            done = self.ws.wait_cs(self.ctx_id, seq, timeout)
            if done:
                self.fence_trusted = True  # seq and every job before it ended, the first included
            return done
        except KmdError as e:
            if e.errno == errno.ETIME:
                return False
            self._raise_from(e, what)
            raise  # unreachable

    def _close(self) -> None:
        """Submit and finish what the queue has, release its context; an async queue's
        refused submissions the app was not told of are raised after that."""
        if self.closed:
            return
        self._closing = True  # the refusals wait until the queue is released
        try:
            queue_finish(self)
        except Exception:  # a dead queue still releases its context
            pass
        if self.async_submit:
            self._drain(report=False)
        errors, self.async_errors = self.async_errors, []
        self.ws.ctx_free(self.ctx_id)
        self.qbo.free()
        for b in self.pool.free:
            b.free()
        self._set_closed()
        if self in self.device.queues:
            self.device.queues.remove(self)
        _raise_first(errors)


# -- entry points (the dispatch tables name these)

def queue_write_now(self: Queue, buf: Buffer, offset: int, data: Any) -> None:
    """API v1: write dwords through the GPU (WRITE_DATA) and submit at once."""
    queue_write_batched(self, buf, offset, data)
    queue_flush(self)


def queue_write_batched(self: Queue, buf: Buffer, offset: int, data: Any) -> None:
    """Record WRITE_DATA packets writing `data` (an int, dwords, a uint32 array or bytes)
    at buf+offset; they are submitted at the next flush."""
    words = _dwords("write", data)
    addr = buf._range("write", offset, 4 * len(words))
    label = self._label("write")
    step = self.max_write_dw
    for i in range(0, len(words), step):
        chunk = words[i:i + step]
        self.cmdbuf.emit(sdma.write_linear(addr + 4 * i, chunk) if self.copy_engine
                         else pm4.write_data(addr + 4 * i, chunk, wr_confirm=1), label)
    self._end_command()


def queue_wait_mem(self: Queue, buf: Buffer, offset: int, ref: int, *, mask: int = M32,
                   compare: str = "==", poll_interval: int = 16) -> None:
    """GPU-side wait: the queue stops until (dword at buf+offset & mask) <compare> ref
    (WAIT_REG_MEM; unsigned compare: always, <, <=, ==, !=, >=, >)."""
    addr = buf._range("wait_mem", offset, 4)
    fn = COMPARE.get(compare, compare)
    if fn not in COMPARE.values():
        raise ValueError(f"wait_mem: compare must be one of {', '.join(COMPARE)}, not {compare!r}")
    for name, v in (("ref", ref), ("mask", mask)):
        if not 0 <= _index("wait_mem", name, v) <= M32:
            raise ValueError(f"wait_mem: {name} must fit in 32 bits, not {v:#x}")
    if self.copy_engine:  # POLL_REGMEM's interval counts 16 clocks
        pkt = sdma.poll_regmem(addr, ref, mask, fn, interval=max(1, -(-poll_interval // 16)))
    else:
        pkt = pm4.wait_reg_mem(addr, ref, mask, fn, poll_interval=poll_interval)
    self.cmdbuf.emit(pkt, self._label("wait_mem"))
    self._end_command()


def queue_signal(self: Queue) -> "Event":
    """An event the GPU signals when it gets here (RELEASE_MEM of a timeline value)."""
    self.timeline = (self.timeline + 1) & M32
    ev = Event(self, self.timeline)
    addr = self.qbo.gpu_addr + 4 * QBO_TIMELINE
    self.cmdbuf.emit(sdma.fence(addr, ev.value) if self.copy_engine else
                     pm4.release_mem(addr, ev.value, data_sel="DATA_32"), self._label("signal"))
    self.unflushed_events.append(ev)
    self._end_command()
    return ev


def queue_wait_event(self: Queue, event: "Event") -> None:
    """API v2: the queue's next submission starts only once `event` (of another queue,
    gfx or copy, of this device) is signalled: a dependency the KMD's scheduler holds the
    job back for (a CS dependency chunk), so the CPU never waits. The wait covers the whole
    submission that carries the event. An event of this same queue needs no wait (the
    queue runs in order)."""
    if not isinstance(event, Event):
        raise TypeError(f"wait_event: event must be a umd Event, not {event!r}")
    q = event.queue
    if q.device is not self.device:
        raise ValueError("wait_event: the event belongs to another device")
    if q is self:
        return
    if event.lost:
        raise SubmitError(errno.ECANCELED, "wait_event: the submission carrying this event was refused")
    if event.seq is None and event.pending is None:
        queue_flush(q)  # the event must be submitted before anything can depend on it
    if event.pending is not None:  # flushed, queued for the submission thread
        if self.async_submit:
            # that thread submits it before this queue's next flush (one FIFO per device)
            # and names the dependency then
            self.deps.append(submit.EventDep(q, event.pending))
            self._label("wait_event")
            self._end_command()
            return
        q._drain(report=False)
        if event.lost:
            raise SubmitError(errno.ECANCELED, "wait_event: the submission carrying this event was refused")
    self.deps.append(CsChunkDep(q.ip_type, 0, q.ctx_id, event.seq))  # type: ignore[arg-type]
    self._label("wait_event")
    self._end_command()


def queue_emit_raw(self: Queue, dwords: Any) -> None:
    """Raw dwords, for experiments (PM4, or SDMA packets on a copy queue): the KMD's
    checker still sees a gfx queue's."""
    words = _dwords("emit_raw", dwords)
    self.cmdbuf.emit(words, self._label("emit_raw"))
    self._end_command()


def queue_flush(self: Queue) -> int | None:
    """Submit what was recorded (one CS ioctl); returns the submission's seqno, or None
    when there was nothing to submit. With `max_inflight` submissions in flight it first
    waits for the oldest; if that times out (GpuTimeout) the commands stay recorded."""
    if self.async_submit:
        self._report()  # a refused earlier flush first (when the thread is done with it)
    cb = self.cmdbuf
    if not cb.ibs and self.deps:  # a wait with nothing after it yet: a NOP job carries it
        cb.emit(sdma.pad(8) if self.copy_engine else pm4.pad(8), "wait_event")
    if not cb.ibs:
        return None
    if len(self.inflight) + len(self.pending) >= self.max_inflight:
        self._throttle("flush")
    first = cb.end()
    ibs = [ib.buf for ib in cb.ibs]
    labels = cb.labels
    events, self.unflushed_events = self.unflushed_events, []
    if log.isEnabledFor(logging.DEBUG):
        log.debug("flush ctx %d: %d command(s), %d dwords in %d IB(s)", self.ctx_id, cb.commands,
                  sum(ib.size_dw for ib in cb.ibs), len(cb.ibs))
        for ib in cb.ibs:
            log.debug("IB at %#x, %d dwords:\n%s", ib.gpu_addr, ib.size_dw, "\n".join(
                "  " + line for line in pm4.disassemble(ib.buf.u32[:ib.size_dw].tolist(), ib.gpu_addr)))
    sizes = [ib.size_dw for ib in cb.ibs]
    first_ib = (first.buf.gpu_addr, first.size_dw)
    cb.reset()
    deps, self.deps = self.deps, []
    fence = CsChunkFence(self.qbo.handle, self.qbo.bo_offset + 4 * QBO_USER_FENCE)
    do_cs = functools.partial(_cs_submit, self, first_ib, ibs, sizes, deps, fence)
    if self.async_submit:  # the device's submission thread makes the ioctl (umd/submit.py)
        self.async_flushes += 1
        self.flushes += 1
        job = PendingCs(self, do_cs, ibs, labels, events, self.staging, self.async_flushes)
        self.staging = []  # freed once the CS is in (submit.collect)
        for ev in events:
            ev.pending = job
        self.pending.append(job)
        self.device.submitter.push(job)  # type: ignore[union-attr]
        return None
    try:
        seq, ncs = do_cs()
    except KmdError as e:
        self.pool.free.extend(ibs)  # never ran
        for ev in events:
            ev.lost = True
        self._raise_from(e, "flush")
    self._submitted(seq, ncs)
    self.flushes += 1
    self.inflight.append(Submission(seq, ibs, labels))
    for ev in events:
        ev.seq = seq
    for b in self.staging:  # upload/download staging: the KMD keeps them until the job is done
        b.free()
    self.staging.clear()
    self.device.mm.flushed()
    self._reclaim()
    return seq


def _cs_submit(q: Queue, first_ib: tuple[int, int], ibs: list, sizes: list, deps: list,
               fence: CsChunkFence) -> tuple[int, int]:
    """The CS ioctl(s) of one flush: its last seqno and how many it took. On the app's
    thread (a synchronous queue) or the device's submission thread (an async one): it
    touches no queue state."""
    deps = [d.chunk() if isinstance(d, submit.EventDep) else d for d in deps]
    if not q.copy_engine:
        return q.ws.cs_submit(q.ctx_id, [*deps, CsChunkIb(first_ib[1], gpu_addr=first_ib[0]), fence]), 1
    # SDMA IBs do not chain: every IB is a chunk, max_ib_chunks per CS, in order
    step = q.device.dev_info.max_ib_chunks
    ncs = 0
    for k in range(0, len(ibs), step):
        chunks = [CsChunkIb(n, gpu_addr=b.gpu_addr, ip_type=q.ip_type)
                  for b, n in zip(ibs[k:k + step], sizes[k:k + step])]
        seq = q.ws.cs_submit(q.ctx_id, [*(deps if k == 0 else ()), *chunks, fence])
        ncs += 1
    return seq, ncs


def queue_finish(self: Queue, timeout: int = DEFAULT_TIMEOUT) -> None:
    """Flush, then wait until the GPU has done everything submitted on this queue (an
    async queue's flushes included: a refused one is raised here at the latest)."""
    queue_flush(self)
    if self.async_submit:
        self._drain()
    if self.last_seq is not None and not self._wait_seq(self.last_seq, timeout, "finish"):
        raise GpuTimeout(f"finish: queue (context {self.ctx_id}) not idle after {timeout} cycles")
    self._reclaim()


def queue_fill(self: Queue, buf: Buffer, offset: int, size: int, value: int) -> None:
    """API v2 (memset): fill `size` bytes with a 32-bit value; the byte at address a gets
    byte (a mod 4) of the value. With a DMA engine any offset and size (DMA_DATA fills,
    split at the engine's limit); without one, dword-aligned WRITE_DATA."""
    if not 0 <= _index("fill", "value", value) <= M32:
        raise ValueError(f"fill: value must fit in 32 bits, not {value:#x}")
    label = self._label("fill")
    if self.copy_engine:
        from .transfer import _bytes_range

        addr, size = _bytes_range(buf, "fill", offset, size)
        for i in range(0, size, self.dma_chunk):
            self.cmdbuf.emit(sdma.constant_fill(addr + i, value, min(self.dma_chunk, size - i)), label)
    elif self.has_dma:
        from .transfer import _bytes_range

        addr, size = _bytes_range(buf, "fill", offset, size)
        step = self.dma_chunk
        for i in range(0, size, step):
            self.cmdbuf.emit(pm4.dma_data(addr + i, value, min(step, size - i), src_sel="DATA"), label)
        if size:
            from .transfer import _written

            _written(self).append((addr, addr + size))
    else:
        size = _index("fill", "size", size)
        if size <= 0 or size & 3:
            raise ValueError(f"fill: size must be a positive multiple of 4, not {size}")
        addr = buf._range("fill", offset, size)
        n = size // 4
        step = self.max_write_dw
        for i in range(0, n, step):
            self.cmdbuf.emit(pm4.write_data(addr + 4 * i, [value] * min(step, n - i), wr_confirm=1), label)
    self._end_command()


def queue_timestamp(self: Queue) -> "Timestamp":
    """API v2: the GPU clock when the queue gets here (RELEASE_MEM TIMESTAMP)."""
    if self.copy_engine:
        raise ValueError("timestamp: the copy engine has no timestamp packet here (SDMA TIMESTAMP is not "
                         "implemented): take it on a gfx queue")
    slot = QBO_TS_FIRST + self.ts_next % QBO_TS_SLOTS
    self.ts_next += 1
    ts = Timestamp(self, slot)  # (read only once its job has ended: the GPU wrote the slot by then)
    self.cmdbuf.emit(pm4.release_mem(self.qbo.gpu_addr + 8 * slot, 0, data_sel="TIMESTAMP"), self._label("timestamp"))
    self.unflushed_events.append(ts)
    self._end_command()
    return ts


def queue_close(self: Queue) -> None:
    self._close()


# ---------------------------------------------------------------------------- Event

class Event:
    """Signalled when the GPU has executed the queue up to the `signal()` that made it."""

    def __init__(self, queue: Queue, value: int):
        self.queue = queue
        self.value = value
        self.seq: int | None = None  # the submission carrying it, once flushed
        self.pending: PendingCs | None = None  # its flush, while queued for the submission thread
        self.lost = False  # its submission was refused

    def signalled(self) -> bool:
        """Memory only: no ioctl."""
        # timeline values start at 1 over a zeroed dword, and are compared wrap-safely
        return seq_passed(self.value, int(self.queue.q32[QBO_TIMELINE]))

    @api_call("Event.wait")
    def wait(self, timeout_cycles: int = DEFAULT_TIMEOUT) -> bool:
        """True once signalled, False if `timeout_cycles` pass first. Checks memory first,
        then the user fence, and asks the kernel (WAIT_CS) last; raises GpuError when the
        GPU failed on this queue."""
        if self.signalled():
            return True
        q = self.queue
        if self.lost:
            raise SubmitError(errno.ECANCELED, "wait: the submission carrying this event was refused")
        if self.seq is None and q.async_submit:
            if self.pending is None:
                queue_flush(q)  # never flushed
            q._drain()  # its submission first (and a refused one of the queue's is raised here)
            if self.lost:
                raise SubmitError(errno.ECANCELED, "wait: the submission carrying this event was refused")
        if self.seq is None:
            queue_flush(q)
        if not q._wait_seq(self.seq, timeout_cycles, "wait"):  # type: ignore[arg-type]
            return False
        q._reclaim()
        return self._done()

    def _done(self) -> bool:
        return self.signalled()

    def __repr__(self) -> str:
        return f"<umd.Event {self.value} {'signalled' if self.signalled() else 'pending'}>"


class Timestamp(Event):
    """A GPU clock sample (RELEASE_MEM TIMESTAMP): `wait()` for it, then `value` (or its
    alias `cycles`) is the 48-bit GPU clock, in cycles, when the queue got there."""

    def __init__(self, queue: Queue, slot: int):
        super().__init__(queue, 0)
        self.slot = slot

    @property  # type: ignore[override]
    def value(self) -> int:
        return self.cycles

    @value.setter
    def value(self, _v: int) -> None:
        pass  # Event.__init__ sets a timeline value; a timestamp has none

    def __repr__(self) -> str:
        return f"<umd.Timestamp {self.cycles} cycles>" if self.signalled() else "<umd.Timestamp pending>"

    def signalled(self) -> bool:
        return self.seq is not None and self.queue.seq_done(self.seq)

    def _done(self) -> bool:
        return True

    @property
    def cycles(self) -> int:
        if not self.signalled():
            raise ValueError("timestamp: not written yet: wait() for it first")
        lo, hi = self.queue.q32[2 * self.slot: 2 * self.slot + 2].tolist()
        return lo | hi << 32


# ---------------------------------------------------------------------------- argument helpers

def _index(call: str, name: str, v: Any) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{call}: {name} must be an int, not {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{call}: {name} must be an int, not {v!r}") from None


def _dwords(call: str, data: Any) -> list[int]:
    if isinstance(data, (bytes, bytearray, memoryview)):
        b = bytes(data)
        if not b or len(b) % 4:
            raise ValueError(f"{call}: bytes data must be a non-empty multiple of 4 bytes, not {len(b)}")
        return np.frombuffer(b, "<u4").tolist()
    if isinstance(data, np.ndarray):
        if data.dtype.kind not in "ui":
            raise TypeError(f"{call}: data must be an integer array, not {data.dtype}")
        words = data.ravel().tolist()
    elif isinstance(data, (list, tuple)):
        words = list(data)
    else:
        words = [_index(call, "data", data)]
    if not words:
        raise ValueError(f"{call}: data is empty")
    for i, w in enumerate(words):
        w = _index(call, f"data[{i}]", w)
        if not 0 <= w <= M32:
            raise ValueError(f"{call}: data[{i}] must fit in 32 bits, not {w:#x}")
    return words
