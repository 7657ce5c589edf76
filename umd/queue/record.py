"""The Queue: a KMD context recording commands into chained IBs (umd/winsys/cmdbuf.py),
with its throttling and reclaim (what a KMD error means for it is
umd/failures/kmd_errors.py). Its entry points that submit (flush, finish, close) are in
umd/queue/flush.py; Device.queue, which makes one, in umd/queue/create.py; the commands it
records: write, wait_mem and emit_raw in umd/queue/commands.py, events, timestamps and waits
on them in umd/events.py, fill, copy, upload and download in umd/queue/transfer.py.
"""

from __future__ import annotations

import bisect
import errno
from collections import deque
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Callable

import numpy as np


from kmd_model.sched.fence import seq_passed
from kmd_model.log import get_logger
from kmd_model.uapi import CtxPriority, HwIp, KmdError
from spec import packets, sdma

from .. import submit
from ..args import DEFAULT_TIMEOUT, M32, _index, _timeout
from ..errors import OPEN_NEW_DEVICE, DeviceLost, GpuError, GpuTimeout, NotPermitted, OutOfMemory, UmdError
from ..failures import failed_jobs, kmd_errors
from ..memory import Buffer, device_alloc
from ..runtime import Device, _close_after, _Dispatched, _raise_first, _state, fixed
from ..submit import PendingCs
from ..winsys.cmdbuf import CmdBuf, Label
from ..winsys.ioctl import DRIVER_CLOSED

if TYPE_CHECKING:
    from ..events import Event

log = get_logger("umd")

MAX_INFLIGHT = 32  # submissions a queue has in flight before a flush waits for the oldest
# A queue's engine: the CS ring it submits to (HW IP type, ring 0)
ENGINES = {"gfx": HwIp.GFX, "copy": HwIp.DMA}
PRIORITIES = {"low": CtxPriority.LOW, "normal": CtxPriority.NORMAL, "high": CtxPriority.HIGH}

# The queue's own page: user fence, event timeline, timestamp slots.
QBO_BYTES = 4096
QBO_USER_FENCE = 0
QBO_TIMELINE = 1
QBO_TS_FIRST = 8  # qword index of the first timestamp slot (byte 64)
QBO_TS_SLOTS = QBO_BYTES // 8 - QBO_TS_FIRST  # reused in turn: a Timestamp is read before 504 more are taken


# ---------------------------------------------------------------------------- Queue

@dataclass(eq=False)
class Submission:
    seq: int  # its last CS's seqno
    ibs: list  # umd Buffers used as IBs
    labels: dict  # packet address -> the API call that recorded it (cmdbuf.Label)
    ncs: int = 1  # CS ioctls it took (a copy flush past max_ib_chunks IBs takes several)
    deps: bool = False  # it waits for another queue's job (wait_event): a failed one cancels it
    number: int = 0  # the queue's how-manieth flush (Queue.flushes): its errors' order (failed_jobs.pending)


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
        # (named by the app's call that needs it: "new IB: ..." named none, to an app that wrote)
        what = f"{q._recording} (a new IB)" if q._recording else "new IB"
        if not self.free:
            q._throttle(what)
        if self.free:
            return self.free.pop()
        got: list[Buffer] = []

        def reclaimed() -> Buffer | None:  # (an IB the wait for memory gave back: no new one needed)
            if self.free:
                got.append(self.free.pop())
                return got[0]
            return None

        buf = q._alloc_or_wait(4 * self.size_dw, what, reclaimed=reclaimed)
        self.created += not got
        return buf


def _knob(name: str, check, doc: str):
    """A queue setting the app may change after queue(), checked as queue() checks it:
    `q.max_inflight = 0` ended the next flush in an IndexError, `q.dma_chunk = 0` a copy in
    a ZeroDivisionError, `q.flush_threshold = 0` was taken (a flush after every command).
    `doc`: what it is, for help() and docs/api.md."""
    private = "_" + name

    def set_(self, v) -> None:
        self.__dict__[private] = check(self, v)
    return property(lambda self: self.__dict__[private], set_, doc=f"{doc} (the app may set it)")


def _at_least_1(name: str, none: bool = False):
    def check(q: "Queue", v):
        if v is None and none:
            return None
        v = _index(f"Queue.{name}", None, v)
        if v < 1:
            raise ValueError(f"Queue.{name} must be >= 1{' or None' if none else ''}, not {v}")
        return v
    return check


def _dma_chunk(q: "Queue", v) -> int:
    v = _index("Queue.dma_chunk", None, v)
    top = sdma.MAX_COPY_BYTES if q.copy_engine else q.device.dev_info.dma_max_bytes
    if not top:
        raise ValueError("Queue.dma_chunk: this queue has no DMA engine (CAPS.DMA = 0): nothing to split")
    if not 1 <= v <= top:
        raise ValueError(f"Queue.dma_chunk must be in [1, {top:#x}] (one packet's most on this engine), not {v}")
    return v


class IpType(IntEnum):
    """Queue.ip_type: the uAPI's HwIp of the queue's ring, equal to it (an int, a key), printed
    by name: Python 3.11 printed the uAPI's IntEnum as its number (0, 2)."""

    GFX = int(HwIp.GFX)
    DMA = int(HwIp.DMA)

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


def _fixed(name: str, keyword: str = "", *, doc: str):
    """What the queue is (its engine, priority, context ...): set by queue(), read-only after
    (`q.engine = "copy"` was taken and the queue went on as a gfx queue; `q.async_submit =
    True` ended the next flush in an AttributeError)."""
    return fixed("Queue", name, f": give it to queue() ({keyword}=...), it makes a new queue" if keyword else "",
                 doc=doc)


class Queue(_Dispatched):
    """A command queue: `q = gpu.queue()` (a KMD context on a GPU ring, and its command
    buffers). Its calls record commands; flush() submits them (so do finish(), an event's
    wait() and close()), and only then does the GPU run them."""

    _kind = "Queue"
    _what = "a GPU context"
    _made_by = "q = gpu.queue()"
    # settings the app may change (checked), and what the queue is (read-only)
    flush_threshold = _knob("flush_threshold", _at_least_1("flush_threshold"),
                            "commands recorded before the queue flushes by itself (>= 1; queue(flush_threshold=), "
                            "else the API version's default: 16 in version 1, 64 from version 2)")
    flush_dwords = _knob("flush_dwords", _at_least_1("flush_dwords", none=True),
                         "dwords recorded before the queue flushes by itself (>= 1), or None: no such bound "
                         "(queue(flush_dwords=))")
    max_inflight = _knob("max_inflight", _at_least_1("max_inflight"),
                         "submissions in flight at most (>= 1; queue(max_inflight=), 32 by default): past it a "
                         "flush, or a new IB, first waits for the oldest to finish")
    timeout = _knob("timeout", lambda q, v: _timeout("Queue.timeout", v, None),
                    "GPU cycles a flush held back by max_inflight waits for the oldest submission before "
                    "GpuTimeout (DEFAULT_TIMEOUT; None: no bound)")
    dma_chunk = _knob("dma_chunk", _dma_chunk,
                      "the most bytes one DMA packet of copy, fill, upload or download moves; a larger "
                      "transfer is split (from 1 to the engine's limit, its default; 0 on a gfx queue without "
                      "a DMA engine, which takes no value)")
    engine = _fixed("engine", "engine", doc='"gfx" (the CP\'s ring, PM4 packets) or "copy" (the SDMA engine\'s '
                                            'ring, SDMA packets): queue(engine=)')
    priority = _fixed("priority", "priority", doc='"low", "normal" or "high": the context\'s scheduler run '
                                                  'queue (queue(priority=))')
    async_submit = _fixed("async_submit", "async_submit",
                          doc="True when the device's submission thread makes the queue's CS ioctls (API version 3: "
                              "queue(async_submit=))")
    ctx_id = _fixed("ctx_id", doc="the id of the queue's KMD context (CTX ALLOC), as the KMD's messages name it")
    copy_engine = _fixed("copy_engine", "engine", doc='True for a queue of engine="copy"')
    ip_type = property(lambda self: IpType(self._ip_type), _fixed("ip_type", "engine", doc="").fset,
                       doc="the uAPI's ring type its CS ioctls name (kmd_model.uapi.HwIp's GFX or DMA, which it "
                           "equals), printed by name (read-only)")
    has_dma = _fixed("has_dma", doc="whether its engine moves memory itself (copy, fill, upload, download as "
                                    "DMA packets): a copy queue always, a gfx queue when the CP has a DMA engine "
                                    "(DEV_INFO.has_dma); without it fill is dword-aligned WRITE_DATA")
    max_write_dw = _fixed("max_write_dw", doc="the most data dwords one write packet carries (WRITE_DATA, SDMA "
                                              "WRITE_LINEAR), and one IB holds: write() splits longer data")

    def __init__(self, device: Device, flush_threshold: int, ib_size_dw: int, flush_dwords: int | None = None,
                 max_inflight: int = MAX_INFLIGHT, engine: str = "gfx", priority: str = "normal"):
        flush_threshold = _index("queue", "flush_threshold", flush_threshold)
        if flush_threshold < 1:
            raise ValueError(f"queue: flush_threshold must be >= 1, not {flush_threshold}")
        if flush_dwords is not None and (flush_dwords := _index("queue", "flush_dwords", flush_dwords)) < 1:
            raise ValueError(f"queue: flush_dwords must be >= 1, not {flush_dwords}")
        max_inflight = _index("queue", "max_inflight", max_inflight)
        if max_inflight < 1:
            raise ValueError(f"queue: max_inflight must be >= 1, not {max_inflight}")
        # (before the context and the page are taken: a bad size must cost nothing) an IB
        # holds at most DEV_INFO.max_ib_dw dwords: a larger one every CS would refuse
        ib_size_dw = _index("queue", "ib_size_dw", ib_size_dw)
        align = device.dev_info.ib_align_dw
        lo, hi = CmdBuf.min_ib_dw(align), device.dev_info.max_ib_dw // align * align
        if not lo <= ib_size_dw <= hi or ib_size_dw % align:
            raise ValueError(f"queue: ib_size_dw must be a multiple of {align} from {lo} to {hi}, not {ib_size_dw}")
        self.max_inflight = max_inflight
        self.timeout = DEFAULT_TIMEOUT  # how long a throttled flush waits for the oldest submission
        self.flush_dwords = flush_dwords
        self._table = device._table
        self.device = device
        self.ws = device.ws
        self.flush_threshold = flush_threshold
        self._engine = engine
        self._priority = priority
        self._copy_engine = engine == "copy"
        self._ip_type = ENGINES[engine]
        try:
            self._ctx_id = self.ws.ctx_alloc(PRIORITIES[priority])
        except KmdError as e:
            if e.errno == errno.ENOSPC:  # the file's contexts are all taken (kmd_model/core/ctx.py)
                raise OutOfMemory(f"queue: no context for it ({e})") from e
            if e.errno == errno.EACCES:  # an unprivileged client (KmdParams.cap_sys_nice, False by default)
                raise NotPermitted(f"queue: priority={priority!r} needs CAP_SYS_NICE, which this client lacks "
                                   "(CTX ALLOC: EACCES): use priority='normal', or give the client the right: "
                                   "gpucosim run APP --kmd cap_sys_nice=1 (in Python: umd.open(winsys=umd.winsys."
                                   "Winsys(kmd_model.open_render_node(cap_sys_nice=True))))") from None
            if e.errno == errno.EIO:  # the file is banned: no context of it runs (umd/failures/kmd_errors.py)
                self.ws.banned = kmd_errors.ban_reason(e)
                raise DeviceLost(f"queue: {e.message}: {OPEN_NEW_DEVICE}") from e
            raise
        self.deps: list = []  # events of other queues the next submission waits for (submit.SeqDep, EventDep)
        self.seq_deps: dict = {}  # the SeqDep of self.deps per queue waited for (one each: submit.add_seq_dep)
        info = device.dev_info
        try:
            self.qbo = device_alloc(device, QBO_BYTES, "gtt", _owner=self)
        except BaseException as e:
            self.ws.ctx_free(self.ctx_id)  # (kept, each failed queue() would use up the file's contexts)
            if isinstance(e, KmdError) and e.errno == errno.EIO:  # the device is lost: no memory made on it
                raise DeviceLost(f"queue: {e.message}") from e
            if isinstance(e, OutOfMemory):  # the app called queue(), not alloc(): say what it was for
                why = e.__cause__ if isinstance(e.__cause__, KmdError) else e  # (the kernel's words)
                raise OutOfMemory(f"queue: no memory for the queue's page ({QBO_BYTES} bytes of GTT: its fences "
                                  f"and timestamps): {why}") from e
            raise
        self.q32 = self.qbo.u32
        self.timeline = 0  # last event value handed out
        self.ts_next = 0
        self.pool = IbPool(self, ib_size_dw)
        self.cmdbuf = CmdBuf(self.pool.get, ib_size_dw, info.ib_align_dw, sdma=self.copy_engine,
                             put_ib=self.pool.free.append)
        self._has_dma = info.has_dma or self.copy_engine
        # one DMA_DATA (or SDMA COPY_LINEAR / CONSTANT_FILL) moves at most this much
        self._dma_chunk = sdma.MAX_COPY_BYTES if self.copy_engine else info.dma_max_bytes  # (0: no DMA)
        self.staging: list = []  # (seq, Buffer) staging buffers of uploads/downloads in flight
        self.inflight: deque[Submission] = deque()
        self.unflushed_events: list[Event] = []
        self.first_seq: int | None = None
        self.last_seq: int | None = None
        self.fence_trusted = False  # the user fence dword holds a seqno of ours (seq_done)
        self.submitted = 0  # flushes submitted (umd/winsys/pool.py's fences count in these)
        # flushes that took more than one CS (a copy queue's, past max_ib_chunks IBs): (flush,
        # CS ioctls beyond one per flush up to it), so seq_of(n) finds the n-th flush's last seqno
        self._extra_cs: list[tuple[int, int]] = []
        self.calls = 0
        self._recording: str | None = None  # the call recording now (_label): what waits for a new IB name
        # the number of the last call that recorded a command: a call that raised after taking
        # its number (its wait for an IB interrupted) recorded nothing (wait_event's check)
        self.last_recorded = 0
        self.flushes = 0
        # closed with jobs still running (close() gave up waiting; the kernel lets them
        # finish): the queue keeps its fence page, and what they may use stays busy until
        # the page says they ended (umd/winsys/pool.py fence_idle)
        self.abandoned = False
        # asynchronous submission (umd/submit.py; set by Device.queue): flushes waiting for
        # the device's submission thread, in order, and the refusals not yet raised (each
        # with its flush's number)
        self._async_submit = False
        self.pending: deque[PendingCs] = deque()
        self.async_errors: list[tuple[int, UmdError]] = []
        self.last_number = 0  # the flush number of the last submission (last_seq's)
        # the seqno of its first job a GpuError was raised for: from it on, a seqno the fence has
        # passed may be a job a ring reset cancelled (jobs before it ended well: they end in order)
        self.failed_from: int | None = None
        # its jobs not yet proven to have ended well, and the errors raised (umd/failures/failed_jobs.py);
        # a ring reset alone leaves the context running on, and every ring may be: sdma0,
        # gfx_high, and the gfx ring too (CP_QUEUE_RESET.Q0), so every queue's jobs are watched
        self.watch = failed_jobs.Watch()
        # data dwords per write packet: the packet's own limit (WRITE_DATA: COUNT's range less
        # its 3 fixed dwords; SDMA WRITE_LINEAR: its count field) and what fits in one IB
        # beside the packet's 4 other dwords
        wd = packets.WRITE_DATA
        limit = sdma.MAX_WRITE_DW if self.copy_engine else wd.max_payload - wd.fixed
        self._max_write_dw = min(limit, self.cmdbuf.max_packet_dw - 4)

    def __enter__(self) -> "Queue":
        return self

    def __exit__(self, typ, exc, tb) -> None:
        """`with gpu.queue() as q:` closes the queue at the end (as Device's `with` closes
        the device): what it recorded is submitted and finished, even when the body raised
        (whose exception is then the one raised: runtime._close_after)."""
        _close_after(self.close, exc)  # (the entry point: a tracer sees Queue.close)

    def __repr__(self) -> str:
        return f"{self._named()[:-1]}{_state(self)}>"

    def _named(self) -> str:
        """Its repr without its state: what the messages about it name it by."""
        eng = "" if self.engine == "gfx" else f" {self.engine}"
        return f"<umd.Queue{eng} ctx {self.ctx_id} api v{self._table.version}>"

    # -- recording helpers
    def _label(self, call: str) -> Label:
        """The label of the API call that records now (each names its packets by it: its
        text and its call number); its packets begin here (CmdBuf.begin: an IB wait that
        raises takes them all back)."""
        self.cmdbuf.begin()
        self.calls += 1
        self._recording = call
        return Label(f"Queue.{call}() #{self.calls}", self.calls)

    def _end_command(self) -> None:
        cb = self.cmdbuf
        cb.command()
        self.last_recorded = self.calls
        if cb.commands >= self.flush_threshold or (self.flush_dwords and cb.dwords >= self.flush_dwords):
            from .flush import queue_flush  # (at the call: umd/queue/flush.py imports this module)
            queue_flush(self)

    # -- completion
    def _submitted(self, seq: int, ncs: int, number: int) -> None:
        """Flush `number` is in: its CS ioctls took `ncs` seqnos, the last `seq`."""
        if self.first_seq is None:
            self.first_seq = (seq - ncs + 1) & M32
        self.last_seq, self.last_number = seq, number
        self.submitted += 1
        if ncs > 1:
            self._extra_cs.append((self.submitted, (self._extra_cs[-1][1] if self._extra_cs else 0) + ncs - 1))

    def seq_of(self, n: int) -> int:
        """The last seqno of the queue's n-th submitted flush (n from 1): the one whose end
        means the whole flush has run."""
        n = _index("seq_of", "n", n)
        if not 1 <= n <= self.submitted:  # (a flush not submitted has no seqno: None + n, a TypeError)
            raise ValueError(f"seq_of: n must be the number of a submitted flush, from 1 to {self.submitted} "
                             f"(the queue has submitted {self.submitted}), not {n}")
        k = bisect.bisect_right(self._extra_cs, (n, M32)) - 1
        return (self.first_seq + n - 1 + (self._extra_cs[k][1] if k >= 0 else 0)) & M32

    def seq_done(self, seq: int) -> bool:
        """The cheap check: has the user fence (written by the GPU after each job) passed seq?
        Seqnos are 32-bit and compared wrap-safely. Until the GPU has written the dword once
        it holds 0 (the BO was zero-filled); 0 can be a seqno too when the queue's seqnos pass
        through it (near the wrap, or starting there), and only then is the kernel asked about
        the queue's first job (one WAIT_CS that does not wait). Jobs end in order, so once a
        seqno of ours is there the dword always holds the last job that ended. `seq` is a
        seqno (seq_of's, flush's): an int from 0 to 0xffffffff; any other value is the call's
        one-line TypeError or ValueError."""
        seq = _index("seq_done", "seq", seq)  # (read once: "x" was Python's "unsupported operand")
        if not 0 <= seq <= M32:  # (-1 and 2**70 answered True; numpy's uint64 warned from the KMD's fence.py)
            raise ValueError(f"seq_done: seq must be a seqno, an int from 0 to 0xffffffff (seq_of's, flush's), "
                             f"not {seq}")
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

    # -- asynchronous submission (the body is in umd/submit.py)
    def _drain(self) -> None:
        submit.drain(self)

    def _throttle(self, what: str) -> None:
        """Reclaim what finished, then wait for the oldest submission while `max_inflight`
        are in flight (Mesa's throttling, drm_sched's hw_submission_limit)."""
        if self.pending and len(self.inflight) + len(self.pending) >= self.max_inflight:
            self._drain()  # (refusals are raised at the next flush or wait, not mid-command)
        self._reclaim()
        while len(self.inflight) >= self.max_inflight:
            oldest = self.inflight[0].seq
            if not self._wait_oldest(what):
                raise GpuTimeout(f"{what}: queue (context {self.ctx_id}) has {len(self.inflight)} "
                                 f"submission{'s' * (len(self.inflight) != 1)} in flight, its limit (max_inflight={self.max_inflight}), and the oldest "
                                 f"(seqno {oldest:#x}) has not finished after {self.timeout} cycles")
            self._reclaim()

    def _alloc_or_wait(self, size: int, what: str, may_flush: bool = False,
                       reclaimed: Callable[[], Buffer | None] | None = None) -> Buffer:
        """A GTT buffer for the queue's own use; when memory is short, wait for the queue's
        submissions to finish (their IBs and staging buffers come back) and try again.
        `may_flush` (between commands: a transfer's staging buffer, before its packets):
        first submit what the queue has recorded, whose staging buffers only a flush lets go.
        `reclaimed`: what the waits gave back that will do instead (a new IB's: an IB of a
        submission that finished; the alloc was tried again, and with nothing left in flight
        the queue said it had no memory, its pool full of free IBs)."""
        while True:
            try:
                return device_alloc(self.device, size, "gtt", zero=False, _owner=self)
            except (KmdError, OutOfMemory) as e:  # (the pools' OutOfMemory: the kernel's ENOMEM)
                if isinstance(e, KmdError) and e.errno == errno.EIO:  # the device is lost: waiting frees nothing
                    raise DeviceLost(f"{what}: {e.message}") from e
                if isinstance(e, KmdError) and e.errno != errno.ENOMEM:
                    raise
                why = e.__cause__ if isinstance(e.__cause__, KmdError) else e  # (the kernel's words)
                if may_flush and (self.staging or self.cmdbuf.ibs):
                    # uploads recorded since the last flush hold their staging until it: a
                    # memory-pressure flush, as Mesa's winsys flushes when a CS grows too big
                    from .flush import _flush  # (at the call: umd/queue/flush.py imports this module)
                    _flush(self, check=False)
                    continue
                if self.pending:  # flushes still queued hold IBs and staging: let them go
                    self._drain()
                    self._reclaim()
                    if reclaimed is not None and (buf := reclaimed()) is not None:
                        return buf
                    continue
                if not self.inflight:
                    raise OutOfMemory(f"{what}: no memory for {size:#x} bytes on queue (context {self.ctx_id}), "
                                      f"with nothing of its own in flight (max_inflight={self.max_inflight}): "
                                      f"{why}") from e
                oldest = self.inflight[0].seq
                if not self._wait_oldest(what):
                    raise OutOfMemory(f"{what}: no memory for {size:#x} bytes on queue (context {self.ctx_id}), "
                                      f"and its oldest submission (seqno {oldest:#x}) has not finished after "
                                      f"{self.timeout} cycles ({len(self.inflight)} in flight, "
                                      f"max_inflight={self.max_inflight}): {why}") from e
                self._reclaim()
                if reclaimed is not None and (buf := reclaimed()) is not None:
                    return buf

    def _wait_oldest(self, what: str) -> bool:
        """Wait (up to self.timeout) for the oldest submission in flight, for `what`. One
        the kernel cancelled (its GPU error, or a dependency's) never runs, so it leaves
        `inflight` as its error is raised: the error is raised once, not again by every
        later command throttled on it (with max_inflight=1 a copy queue, whose ring is
        reset alone, took no more work after its hang). Raised with every other error
        pending (failed_jobs.pending): the call raises anyway, and the next would have
        raised them a call late. An error the call has raised already (a flush's look, just
        before its wait for room) is not raised again: the job leaves, the wait goes on."""
        known = set(self.watch.reported)
        try:
            return self._wait_seq(self.inflight[0].seq, self.timeout, what)
        except GpuError as e:
            sub = self.inflight.popleft()
            self.pool.free.extend(sub.ibs)
            if (e.info.ctx_id, e.info.seq) in known:  # raised already (this flush's look): not twice
                return True
            failed_jobs.check(self, what, found=(sub.number, e))
            raise  # (unreachable: check raises `found` at least)

    def _reclaim(self) -> None:
        while self.inflight and self.seq_done(self.inflight[0].seq):
            self.pool.free.extend(self.inflight.popleft().ibs)

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
            kmd_errors.raise_from(self, e, what)
            raise  # unreachable

    def _still_running(self) -> bool:
        """After a finish that failed: may the queue's last job still run? Not when its
        fence has passed, nor when the kernel has cancelled it (its context was reset)."""
        if self.last_seq is None or self.seq_done(self.last_seq):
            return False
        try:
            return not self.ws.wait_cs(self.ctx_id, self.last_seq, 0)
        except KmdError:
            return False  # reset: the kernel will not run it

    def _close_lost(self) -> None:
        """Close the queue of a Device whose file the driver closed (its unload or reload): its
        context, page and IBs went with the file, so no ioctl is made and no mapping read (each
        raised, and close() never got to closing it). Its events answer from a page of zeros
        (never signalled: wait() says the queue was closed first). Commands it recorded and
        never submitted are DeviceLost, raised once the queue is closed."""
        lost = [f"{n} command{'s' * (n != 1)} recorded and never submitted"] if (n := self.cmdbuf.commands) else []
        if n := sum(not p.done for p in self.pending):
            lost.append(f"{n} flush{'es' * (n != 1)} the submission thread had not submitted")
        self.q32 = np.zeros(self.qbo.size // 4, dtype=np.uint32)
        self.pending.clear()
        self._set_closed()
        if self in self.device.queues:
            self.device.queues.remove(self)
        if lost:
            raise DeviceLost(f"close: {self._named()}: {' and '.join(lost)} did not run: {DRIVER_CLOSED}")

    def _close(self) -> None:
        """Submit and finish what the queue has, release its context; the errors the app was
        not told of (refused submissions: an async queue's, or the flush of what it had
        recorded; failed jobs) are raised after that, together (failed_jobs.pending)."""
        if self.closed:
            return
        if self.ws.lost():  # the driver closed the file under it: nothing to submit, finish or release
            return self._close_lost()
        errors = []
        for _ in range(2):  # what is recorded: refused, it is raised after the release, as an async queue's is
            try:
                from .flush import _flush  # (at the call: umd/queue/flush.py imports this module)
                _flush(self, check=False, call="close")
                break
            except GpuTimeout:
                continue  # (its commands stay recorded: tried once more, as the finish did)
            except UmdError as e:
                errors.append(e)
                break
        found, done = None, True
        try:
            if self.async_submit:
                self._drain()
            done, found = failed_jobs.wait_last(self, DEFAULT_TIMEOUT, "close")
        except Exception:  # a dead queue still releases its context
            pass
        try:
            errors += failed_jobs.pending(self, "close", found=found)
        except Exception:
            pass
        self.abandoned = self._still_running()
        if self.abandoned and not done:
            # (it returned as if its work were done: the app's last commands, maybe never run,
            # and its events' wait() said the work "failed or was cancelled")
            errors.append(GpuTimeout(
                f"close: queue (context {self.ctx_id}) not idle after {DEFAULT_TIMEOUT} cycles: closed all the "
                f"same, its last job (seqno {self.last_seq:#x}) still running: finish(timeout) before close() waits "
                "longer; its events' signalled() turns True if it ends"))
        self.ws.ctx_free(self.ctx_id)
        if not self.abandoned:
            # every job has ended or will never run (its context reset): the IBs of those still
            # listed in flight go back with the pool's (an async queue's, whose flushes do not
            # reclaim below max_inflight: each closed queue kept up to max_inflight IBs until
            # the device closed, and the exit report counted its ended jobs "in flight")
            while self.inflight:
                self.pool.free.extend(self.inflight.popleft().ibs)
            # the page goes back to the pools (the next buffer may get it): the queue's events
            # and timestamps answer from what it held now, the queue having finished
            self.q32 = self.q32.copy()
            self.qbo.free()
        # else the jobs still write their fences into the page: it stays the queue's (freed
        # with the device), and the pools read it to learn when the buffers they use are free
        for b in self.pool.free:
            b.free()
        self._set_closed()
        if self in self.device.queues and not self.abandoned:  # (an abandoned one still fences buffers)
            self.device.queues.remove(self)
        _raise_first(errors)
