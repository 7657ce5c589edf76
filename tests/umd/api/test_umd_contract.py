"""The UMD API's promises in detail: every argument error names its call and argument and
says what was wrong (at the boundaries: 0 and 2^32 - 1 in, -1 and 2^32 out), each recorded
packet remembers the call that recorded it (what GpuError and crash reports name), the
flush limit holds exactly at max_inflight, and a device without a DMA engine fills with
WRITE_DATA split to fit its IBs."""

from __future__ import annotations

import errno
import re

import numpy as np
import pytest

import kmd_model
import umd
from spec import pm4
from testbench.refmodel import RefModel
from umd.winsys.cmdbuf import Label

from tests.kmd.test_kmd_ioctl import Client
from tests.security.security_helpers import Holder, LoopingCpModel
from tests.umd.drive import run_device
from tests.umd.handles import named as _named


def _gpu(dev=None, pools: bool = True, **kw):
    """A UMD on a fresh KMD; pools=False where a test is about what one ioctl per buffer does
    (a new IB is a GEM_CREATE that can fail; test_umd_memory.py tests the pools)."""
    kmd_model.bind(dev or RefModel(), **kw)
    return umd.open(api_version=2, pools=pools)


def _raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        fn(*args, **kwargs)


def test_argument_errors():
    gpu = _gpu()
    q = gpu.queue()
    buf = gpu.alloc(0x100)
    _raises(ValueError, "alloc: size must be > 0, not 0", gpu.alloc, 0)
    _raises(TypeError, "alloc: size must be an int, not 1.5", gpu.alloc, 1.5)
    _raises(ValueError, "alloc: domain must be 'gtt' or 'vram', not 'ram'", gpu.alloc, 16, "ram")
    assert gpu.alloc(16, "VRAM").domain == umd.memory.Domain.VRAM
    for kw, msg in ((dict(flush_threshold=0), "queue: flush_threshold must be >= 1, not 0"),
                    (dict(flush_dwords=0), "queue: flush_dwords must be >= 1, not 0"),
                    (dict(max_inflight=0), "queue: max_inflight must be >= 1, not 0")):
        _raises(ValueError, msg, gpu.queue, **kw)
    for kw, msg in ((dict(flush_threshold=1.5), "queue: flush_threshold must be an int, not 1.5"),
                    (dict(flush_dwords=True), "queue: flush_dwords must be an int, not True"),
                    (dict(max_inflight="2"), "queue: max_inflight must be an int, not '2'")):
        _raises(TypeError, msg, gpu.queue, **kw)
    assert gpu.queue(flush_threshold=1, flush_dwords=1, max_inflight=1).max_inflight == 1
    # write
    _raises(ValueError, "write: bytes data must be a multiple of 4 bytes, not 3", q.write, buf, 0, b"abc")
    _raises(TypeError, "write: data must be an integer array, not float64", q.write, buf, 0, np.zeros(2))
    _raises(ValueError, "write: data[1] must fit in 32 bits, not 0x100000000", q.write, buf, 0, [0, 1 << 32])
    _raises(ValueError, "write: data[0] must fit in 32 bits, not -0x1", q.write, buf, 0, [-1])
    _raises(TypeError, "write: data must be an int, a list of ints, an integer array or bytes-like, not 'x'",
            q.write, buf, 0, "x")
    _raises(TypeError, "write: data[0] must be an int, not 1.0", q.write, buf, 0, [1.0])
    _raises(ValueError, "write: offset must be a non-negative multiple of 4, not 2", q.write, buf, 2, 1)
    _raises(ValueError, "write: offset must be a non-negative multiple of 4, not -4", q.write, buf, -4, 1)
    _raises(TypeError, "write: offset must be an int, not 1.5", q.write, buf, 1.5, 1)
    _raises(ValueError, "write: [0xfc, 0x104) is outside the 0x100-byte buffer", q.write, buf, 0xFC, [1, 2])
    # a wait's bound, checked whatever the wait would find (an event already signalled too),
    # as the caller's error rather than the kernel's EINVAL
    ev = q.signal()
    q.finish()
    for fn, name in ((ev.wait, "wait"), (q.finish, "finish")):
        _raises(ValueError, f"{name}: timeout must be in [0, 2**64) or None, not -1", fn, -1)
        _raises(ValueError, f"{name}: timeout must be in [0, 2**64) or None, not {1 << 64}", fn, 1 << 64)
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not 1.5", fn, 1.5)
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not '9'", fn, "9")
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not True", fn, True)
    _raises(ValueError, "download: timeout must be in [0, 2**64) or None, not -1", q.download, buf, 0, 4, timeout=-1)
    assert ev.wait(0) and ev.wait((1 << 64) - 1)
    # emit_raw takes its dwords as write does, and names itself
    _raises(ValueError, "emit_raw: dwords is empty", q.emit_raw, [])
    _raises(ValueError, "emit_raw: dwords[1] must fit in 32 bits, not 0x100000000", q.emit_raw, [0, 1 << 32])
    _raises(TypeError, "emit_raw: dwords must be an int, a list of ints, an integer array or bytes-like, not 'x'",
            q.emit_raw, "x")
    # wait_mem: 32-bit ref and mask, boundaries included
    _raises(ValueError, "wait_mem: compare must be one of always, <, <=, ==, !=, >=, >, not '~'",
            q.wait_mem, buf, 0, 1, compare="~")
    for name in ("ref", "mask"):
        for bad, text in ((-1, "-0x1"), (1 << 32, "0x100000000")):
            _raises(ValueError, f"wait_mem: {name} must fit in 32 bits, not {text}", q.wait_mem, buf, 0,
                    **{"ref": 0, name: bad})
    _raises(TypeError, "wait_mem: mask must be an int, not 1.5", q.wait_mem, buf, 0, 1, mask=1.5)
    _raises(ValueError, "wait_mem: [0x100, 0x104) is outside the 0x100-byte buffer", q.wait_mem, buf, 0x100, 0)
    q.wait_mem(buf, 0xFC, 0xFFFF_FFFF, mask=0, compare="<=")  # the last dword; mask 0: holds at once
    q.wait_mem(buf, 0, 0, mask=0xFFFF_FFFF, compare="GE")  # the packet's own names work too
    # fill
    for bad, text in ((-1, "-0x1"), (1 << 32, "0x100000000")):
        _raises(ValueError, f"fill: value must fit in 32 bits, not {text}", q.fill, buf, 0, 4, bad)
    _raises(TypeError, "fill: value must be an int, not None", q.fill, buf, 0, 4, None)
    q.fill(buf, 0, 4, 0)
    q.fill(buf, 4, 4, 0xFFFF_FFFF)
    _raises(ValueError, "fill: size must be >= 0, not -4", q.fill, buf, 0, -4, 1)
    _raises(TypeError, "fill: size must be an int, not '4'", q.fill, buf, 0, "4", 1)
    # transfers
    _raises(TypeError, "copy: dst_offset must be an int, not '1'", q.copy, buf, "1", buf, 0x80, 4)
    _raises(TypeError, "copy: size must be an int, not 4.0", q.copy, buf, 0, buf, 0x80, 4.0)
    # (the offsets the app gave, as every range check says them: the buffer's VAs were the app's to subtract)
    _raises(ValueError, "copy: source [0x10, 0x30) and destination [0x0, 0x20) of the same buffer overlap",
            q.copy, buf, 0, buf, 0x10, 0x20)
    q.copy(buf, 0x80, buf, 0xA0, 0x20)  # the destination ends exactly where the source starts: no overlap
    _raises(ValueError, "upload: [0xff, 0x101) is outside the 0x100-byte buffer", q.upload, buf, 0xFF, b"xy")
    q.finish()
    assert buf.u32[:2].tolist() == [0, 0xFFFF_FFFF]
    other = gpu.alloc(0x100)
    other.free()
    # the argument named, and what freed it (copy said "the buffer was freed" of either; a range
    # outside the freed buffer was that range's error)
    for call, name, fn, args in (("write", "buf", q.write, (other, 0, 1)), ("fill", "buf", q.fill, (other, 0, 4, 1)),
                                 ("copy", "src", q.copy, (buf, 0, other, 0, 4)),
                                 ("copy", "dst", q.copy, (other, 0, buf, 0, 4)),
                                 ("upload", "dst", q.upload, (other, 0, b"abcd")),
                                 ("download", "src", q.download, (other, 0x200, 4)),
                                 ("wait_mem", "buf", q.wait_mem, (other, 0, 0))):
        _raises(ValueError, f"{call}: {name} {_named(other)} was freed (Buffer.free)", fn, *args)
    mine = gpu.alloc(0x100)
    gpu.close()
    # freed by its device's close, given to another device: freed, not "another device's"
    kmd_model.bind(RefModel())
    with umd.open() as gpu2:
        _raises(ValueError, f"write: buf {_named(mine)} was freed (its device was closed: Device.close)",
                gpu2.queue().write, mine, 0, 1)
        # freed by Buffer.free before its device closed: still Buffer.free
        _raises(ValueError, f"map: {_named(other)} was freed (Buffer.free)", other.map)


def test_each_packet_remembers_its_call():
    gpu = _gpu()
    hold = Holder()  # keeps the submission in flight, so the queue still knows its labels
    q = gpu.queue(flush_threshold=100)
    a, b = gpu.alloc(0x1000), gpu.alloc(0x1000)
    q.write(a, 0, [1, 2])
    q.fill(a, 0x100, 0x20, 7)
    q.wait_mem(a, 0, 1)
    ev = q.signal()
    ts = q.timestamp()
    q.copy(b, 0, a, 0x100, 0x10)
    q.upload(b, 0x40, b"abcd")
    q.emit_raw(pm4.nop(3))
    q.flush()
    labels = list(q.inflight[-1].labels.values())
    assert labels == [Label(f"Queue.{c}() #{i}", i) for i, c in enumerate(
        ["write", "fill", "wait_mem", "signal", "timestamp", "copy", "upload", "emit_raw"], 1)]
    addrs = sorted(q.inflight[-1].labels)
    assert addrs[0] % 32 == 0 and all(x < y for x, y in zip(addrs, addrs[1:]))
    # each address is the packet's: decoding there finds the call's packet
    vm, mem32 = gpu.ws.file.vm, hold.c.f.kmd.mem32  # (the addresses are the queue's VAs)
    kinds = [pm4.decode(mem32[vm.translate(x) // 4: vm.translate(x) // 4 + 16].tolist(), 0).name for x in addrs]
    assert kinds == ["WRITE_DATA", "DMA_DATA", "WAIT_REG_MEM", "RELEASE_MEM", "RELEASE_MEM", "DMA_DATA", "DMA_DATA",
                     "NOP"]
    assert repr(ev) == "<umd.Event 1 pending>" and repr(ts) == "<umd.Timestamp pending>"
    hold.release()
    q.finish()
    assert ev.signalled() and repr(ev) == "<umd.Event 1 signalled>"
    assert repr(ts) == f"<umd.Timestamp {ts.cycles} cycles>" and ts.cycles > 0
    gpu.close()


@pytest.mark.parametrize("engine, dma", [("gfx", False), ("copy", True)], ids=["gfx_without_dma", "copy"])
def test_each_packet_remembers_its_call_on_every_engine(engine, dma):
    """As above where the packets differ: a device without a DMA engine (fill is WRITE_DATA,
    split to fit the packet) and a copy queue (SDMA packets). Every packet a call records,
    each piece of a split fill included, carries the call's label. A gate the queue waits
    on keeps the submission in flight, so the queue still knows its labels."""
    gpu = _gpu(RefModel(dma=dma))
    q = gpu.queue(engine=engine, flush_threshold=100)
    gate, a = gpu.alloc(0x1000), gpu.alloc(0x4000)
    q.wait_mem(gate, 0, 1)
    q.write(a, 0, [1, 2])
    q.fill(a, 0x100, 0x2000, 7)
    q.flush()
    pieces = 1 if q.has_dma else -(-0x2000 // 4 // q.max_write_dw)
    assert q.has_dma is dma and pieces == (1 if dma else 3)
    labels = [v for _, v in sorted(q.inflight[-1].labels.items())]
    assert labels == [Label("Queue.wait_mem() #1", 1), Label("Queue.write() #2", 2)] + [Label("Queue.fill() #3", 3)] * pieces
    gate.u32[0] = 1
    q.finish()
    assert a.u32[0x40:0x840].tolist() == [7] * 0x800 and a.u32[0x840] == 0
    gpu.close()


@pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])
def test_a_cs_refused_for_memory_is_out_of_memory(async_submit):
    """The KMD refuses a CS with ENOMEM when its checked copies find no room in the shadow
    pool in time (test_kmd_bo.py's setup: a held job, moving for ever, and three of 1 KiB in a
    4 KiB pool: nothing is freed while the CS waits): the flush raises OutOfMemory naming the
    call, the queue, what it has in flight and its limit, then the KMD's own message (for an
    async queue, at the finish after the flush)."""
    from kmd_model.uapi import CsChunkIb

    dev = LoopingCpModel()
    kmd = kmd_model.bind(dev, shadow_pool_kib=4, job_timeout=5_000, fallback_poll=1_000)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=async_submit, flush_threshold=1000)
    c, other = Client(), Client()
    bo, obo = c.bo(0x8000), other.bo()
    bo.u32[0x400:0x500] = [pm4.TYPE2_FILLER] * 0x100
    other.submit(other.ib(obo, pm4.wait_reg_mem(obo.addr + 0x800, 1, 1, "EQ")))
    for _ in range(3):
        c.submit(CsChunkIb(0x100, bo.handle, 0x1000))
    free = kmd.shadow.size - kmd.shadow.used
    dev.looping = True
    q.emit_raw(pm4.nop(free // 4 + 1))  # checked copies larger than what is free
    with pytest.raises(umd.OutOfMemory) as ei:
        q.flush()
        q.finish()
    kmd_error = ei.value.__cause__
    assert kmd_error.errno == errno.ENOMEM and kmd_error.message.startswith("CS: no room for the job's ")
    what = f"flush (asynchronous submission #1 of queue context {q.ctx_id})" if async_submit else "flush"
    assert str(ei.value) == (f"{what}: queue (context {q.ctx_id}), 0 submissions in flight "
                             f"(max_inflight={q.max_inflight}): {kmd_error.message}")
    gpu.close()


def test_flush_limit_is_exact():
    """max_inflight submissions in flight: the next flush waits for the oldest and says so
    when it times out; one fewer does not wait."""
    gpu = _gpu(job_timeout=1 << 40)
    hold = Holder()
    q = gpu.queue(flush_threshold=1, max_inflight=2)
    q.timeout = 5000
    buf = gpu.alloc(0x100)
    q.write(buf, 0, 1)
    q.write(buf, 4, 2)
    assert len(q.inflight) == 2
    msg = (f"queue (context {q.ctx_id}) has 2 submissions in flight, its limit (max_inflight=2), and the oldest "
           f"(seqno {q.inflight[0].seq:#x}) has not finished after 5000 cycles")
    _raises(umd.GpuTimeout, f"write (a new IB): {msg}", q.write, buf, 8, 3)  # needs an IB: none is free
    q2 = gpu.queue(flush_threshold=1000, max_inflight=1)
    q2.timeout = 5000
    q2.write(buf, 0x10, 4)
    seq = q2.flush()
    msg2 = (f"queue (context {q2.ctx_id}) has 1 submission in flight, its limit (max_inflight=1), and the oldest "
            f"(seqno {seq:#x}) has not finished after 5000 cycles")
    _raises(umd.GpuTimeout, f"write (a new IB): {msg2}", q2.write, buf, 0x14, 5)
    hold.release()
    q.write(buf, 8, 3)
    q2.write(buf, 0x14, 5)
    q.finish()
    q2.finish()
    assert buf.u32[:3].tolist() == [1, 2, 3] and buf.u32[4:6].tolist() == [4, 5]
    gpu.close()


def test_fill_without_dma_engine():
    """No DMA engine: fill writes dwords (WRITE_DATA), split so each packet fits an IB."""
    gpu = _gpu(RefModel(dma=False))
    q = gpu.queue(ib_size_dw=64)
    buf = gpu.alloc(0x1000)
    _raises(ValueError, "fill: size must be a non-negative multiple of 4, not 6", q.fill, buf, 0, 6, 1)
    _raises(ValueError, "fill: size must be a non-negative multiple of 4, not -4", q.fill, buf, 0, -4, 1)
    _raises(ValueError, "fill: offset must be a non-negative multiple of 4, not 2", q.fill, buf, 2, 4, 1)
    _raises(ValueError, "fill: [0xffc, 0x1004) is outside the 0x1000-byte buffer", q.fill, buf, 0xFFC, 8, 1)
    q.fill(buf, 0xFFC, 4, 9)  # the last dword
    q.fill(buf, 0x10, 4 * 300, 0xA5A5_0000)  # more dwords than one packet in a 64-dword IB takes
    q.finish()
    assert q.max_write_dw < 300
    assert buf.u32[4:304].tolist() == [0xA5A5_0000] * 300 and buf.u32[3] == 0 and buf.u32[304] == 0
    assert buf.u32[0x3FF] == 9
    gpu.close()


def test_flush_waits_at_the_limit_when_ibs_are_to_hand():
    """With IBs free in the pool, recording needs none new: the flush itself waits at
    max_inflight (and says so), one below it does not."""
    gpu = _gpu(job_timeout=1 << 40)
    q = gpu.queue(flush_threshold=1000, max_inflight=3)
    buf = gpu.alloc(0x100)
    hold = Holder()
    for i in range(3):  # three IBs in flight at once, back to the pool once the CP moves
        q.write(buf, 4 * i, i)
        q.flush()
    hold.release()
    q.finish()
    assert q.pool.created == 3 and len(q.pool.free) == 3
    hold = Holder()
    q.max_inflight = 2
    q.write(buf, 0x10, 1)
    q.flush()
    q.write(buf, 0x14, 2)
    q.flush()  # the second in flight: below the limit when it was asked
    q.write(buf, 0x18, 3)  # an IB from the pool: no wait
    msg = (f"flush: queue (context {q.ctx_id}) has 2 submissions in flight, its limit (max_inflight=2), and the "
           f"oldest (seqno {q.inflight[0].seq:#x}) has not finished after {umd.DEFAULT_TIMEOUT} cycles\n"
           "flush: the commands recorded since the last flush (the queue's calls up to #6) stay recorded: the next "
           "flush submits them")  # (its note)
    _raises(umd.GpuTimeout, msg, q.flush)
    hold.release()
    q.finish()  # what was recorded was kept, and runs now
    assert buf.u32[4:7].tolist() == [1, 2, 3]
    gpu.close()


@pytest.mark.parametrize("call", ["finish", "download"])
def test_finish_names_itself_when_its_flush_waits_at_the_limit(call):
    """finish() (and download(), which finishes) submits what was recorded first: when that
    flush times out at max_inflight, the message and its note name the call the app made,
    not "flush" (before, "flush: queue (context 1) has 2 submissions in flight ...")."""
    gpu = _gpu(job_timeout=1 << 40)
    q = gpu.queue(flush_threshold=1000, max_inflight=3)
    buf = gpu.alloc(0x100)
    hold = Holder()
    for i in range(3):  # three IBs in flight at once, in the pool after: the write below takes no new one
        q.write(buf, 4 * i, i)
        q.flush()
    hold.release()
    q.finish()
    q.max_inflight = 2
    hold = Holder()
    for i in range(2):
        q.write(buf, 4 * i, i)
        q.flush()
    q.write(buf, 0x10, 3)
    q.timeout = 5000  # (the throttle's bound: a queue's, not the finish's)
    note = {"finish": "finish: the commands recorded since the last flush (the queue's calls up to #6) stay recorded",
            # (download's own copy, call #7, is not left to run into its freed staging buffer)
            "download": "download: its own copy (the queue's call #7) is taken back; the commands recorded before it "
                        "(the queue's calls up to #6) stay recorded"}[call]
    msg = (f"{call}: queue (context {q.ctx_id}) has 2 submissions in flight, its limit (max_inflight=2), and the "
           f"oldest (seqno {q.inflight[0].seq:#x}) has not finished after 5000 cycles\n{note}: the next flush "
           "submits them")
    _raises(umd.GpuTimeout, msg, *((q.finish,) if call == "finish" else (q.download, buf, 0, 4)))
    hold.release()
    q.finish()
    assert buf.u32[4] == 3
    gpu.close()


def test_finish_and_close_name_themselves_when_their_flush_is_refused():
    """The refusal of the flush finish() or close() makes names that call ("finish: EINVAL:
    CS: ..."; it said "flush: EINVAL: CS: ..."), as a refused flush() names flush."""
    gpu = _gpu()
    for call in ("finish", "close"):
        q = gpu.queue()
        q.emit_raw(pm4.write_data(0xDEAD_0000, [1]))  # outside every mapping: the checker refuses the CS
        with pytest.raises(umd.SubmitError, match=f"^{call}: EINVAL: CS: WRITE_DATA at IB\\+0x0 "):
            getattr(q, call)()
        q.close()
    gpu.close()


def test_tracer_hook_sees_every_call():
    gpu = _gpu()
    calls = []

    def hook(name, fn, args, kwargs):
        calls.append((name, args[1:], dict(kwargs)))
        return fn(*args, **kwargs)

    umd.runtime.api_hook = hook
    try:
        q = gpu.queue(flush_threshold=100)
        buf = gpu.alloc(0x100)
        q.write(buf, 4, [5, 6])
        q.fill(buf, 0x10, 8, 7)
        q.finish()
        buf.free()
    finally:
        umd.runtime.api_hook = None
    names = [n for n, _, _ in calls]
    assert names == ["Device.queue", "Device.alloc", "Queue.write", "Queue.fill", "Queue.finish", "Buffer.free"]
    assert calls[0][2] == {"flush_threshold": 100} and calls[2][1] == (4, [5, 6])
    # the tracer gone, the entry points looked up while it was there (cached on the object)
    # still take keyword arguments
    buf = gpu.alloc(0x100)
    q.fill(buf, offset=0x10, size=8, value=7)
    q.finish()
    assert buf.u32[4:6].tolist() == [7, 7] and len(calls) == 6


def test_a_closed_queue_or_device_refuses_every_call():
    """After close() every entry point but close() raises ValueError naming the call, before
    anything is recorded or reaches the KMD: a write into a closed queue used to be recorded
    into freed memory and lost (the KMD's EINVAL came only at the next flush), and a device's
    calls leaked the KMD's raw EBADF. An entry point used before close (cached) is refused
    too; the device's close closes its queues."""
    gpu = _gpu()
    buf = gpu.alloc(0x100)
    q, q2 = gpu.queue(), gpu.queue()
    q.write(buf, 0, [1])
    q.signal().wait()
    q.close()
    for name, args in (("write", (buf, 0, [2])), ("signal", ()), ("flush", ()), ("finish", ()),
                       ("fill", (buf, 0, 4, 3)), ("copy", (buf, 0, buf, 4, 4)), ("emit_raw", ([0],)),
                       ("timestamp", ()), ("wait_mem", (buf, 0, 1))):
        _raises(ValueError, f"{name}: the queue is closed", getattr(q, name), *args)
    q.close()  # still fine
    assert buf.u32[0] == 1  # nothing after close reached memory
    q2.write(buf, 0, [5])
    q2.finish()
    gpu.close()
    for name, args in (("alloc", (0x10,)), ("queue", ()), ("memory", ()), ("counters", ()), ("info", ())):
        _raises(ValueError, f"{name}: the device is closed", getattr(gpu, name), *args)
    # (q2 was closed by the device's close, not by the app: said so)
    _raises(ValueError, "write: the queue is closed (its device was closed: Device.close closes its queues)",
            q2.write, buf, 0, [6])
    gpu.close()


def test_device_and_queue_lifecycle(monkeypatch):
    gpu = _gpu()
    assert gpu.alloc(0x10, int(umd.memory.Domain.VRAM)).domain == umd.memory.Domain.VRAM
    q = gpu.queue(flush_threshold=100)
    q.finish()  # nothing ever recorded: nothing to wait for
    buf = gpu.alloc(0x100)
    q.write(buf, 0, [9])  # recorded, not flushed
    ev = q.signal()
    q.close()  # finishes first: what was recorded runs
    assert buf.u32[0] == 9 and ev.seq is not None
    q.close()  # twice is fine
    gpu.close()
    gpu.close()
    # a KMD of another major version
    kmd_model.bind(RefModel())
    major = umd.runtime.KMD_MAJOR
    monkeypatch.setattr(kmd_model.uapi, "KMD_VERSION", (major + 1, 1, 0))
    _raises(umd.DeviceLost, f"KMD gpucosim {major + 1}.1.0: this UMD needs major version {major}", umd.open,
            api_version=2)


def test_flush_at_exactly_flush_dwords():
    gpu = _gpu()
    buf = gpu.alloc(0x100)
    q = gpu.queue(flush_threshold=1000, flush_dwords=5)
    q.write(buf, 0, [1])  # WRITE_DATA of one dword: 5 dwords
    assert q.flushes == 1
    q2 = gpu.queue(flush_threshold=1000, flush_dwords=6)
    q2.write(buf, 4, [1])
    assert q2.flushes == 0
    q2.finish()
    gpu.close()


def test_events_of_a_refused_submission():
    gpu = _gpu()
    q = gpu.queue(flush_threshold=1000)
    buf = gpu.alloc(0x100)
    q.write(buf, 0, 1)
    ev = q.signal()
    q.emit_raw([pm4.header(0x7B, 0), 0])  # the checker refuses the whole submission
    with pytest.raises(umd.SubmitError):
        q.flush()
    _raises(umd.SubmitError, "wait: the submission carrying this event was refused", ev.wait)
    assert repr(ev) == "<umd.Event 1 lost>"
    q.write(buf, 4, 2)
    q.finish()
    assert buf.u32[:2].tolist() == [0, 2]
    gpu.close()


def test_timestamp_slots_are_reused():
    """The queue's page holds 504 timestamp slots: the 505th reuses the first."""
    gpu = _gpu()
    q = gpu.queue(flush_threshold=1 << 20)
    ts = [q.timestamp() for _ in range(505)]
    q.finish()
    assert ts[0].slot == ts[504].slot == umd.queue.QBO_TS_FIRST and ts[503].slot == 511
    assert ts[504].cycles >= ts[503].cycles > 0
    gpu.close()


def test_transfers_split_unevenly_and_their_errors():
    gpu = _gpu()
    q = gpu.queue(flush_threshold=1000)
    q.dma_chunk = 0x100
    a, b = gpu.alloc(0x1000), gpu.alloc(0x1000)
    a.map()[:] = np.arange(0x1000, dtype=np.uint32).astype(np.uint8)
    q.copy(b, 0x10, a, 0x20, 0x3F0)  # four packets: 0x100, 0x100, 0x100, 0xf0
    words = np.arange(16, dtype=np.uint32)
    q.upload(b, 0x800, words[::2])  # a strided array: its eight values, not its memory
    got = q.download(b, 0x10, 0x3F0, timeout=100_000)
    assert np.array_equal(got, a.map()[0x20:0x410])
    assert b.map()[0x400] == 0 and b.map()[0xF] == 0
    assert b.u32[0x200:0x208].tolist() == list(range(0, 16, 2))
    gpu.close()
    gpu = _gpu(RefModel(dma=False))
    q = gpu.queue()
    a = gpu.alloc(0x100)
    _raises(RuntimeError, "upload: this device has no DMA engine (CAPS.DMA = 0): a copy queue (Device.queue(engine='copy')) has the SDMA's", q.upload, a, 0, b"abcd")
    _raises(RuntimeError, "download: this device has no DMA engine (CAPS.DMA = 0): a copy queue (Device.queue(engine='copy')) has the SDMA's", q.download, a, 0, 4)
    _raises(TypeError, "fill: size must be an int, not 4.0", q.fill, a, 0, 4.0, 1)
    gpu.close()


@pytest.mark.parametrize("first", [1, 2**32 - 20])
def test_seq_done_makes_no_ioctl_while_zero_cannot_be_ours(first):
    """Queue.seq_done is the cheap check (Mesa's fence check reads memory, no syscall): while
    the user fence dword still holds 0 and the queue's seqnos do not pass through 0, it
    answers from memory alone; only when 0 may be one of its own seqnos does it ask the
    kernel (one WAIT_CS that does not wait)."""
    gpu = _gpu(initial_seq=first)
    kmd = kmd_model.bound()
    hold = Holder()
    q = gpu.queue(flush_threshold=1)
    buf = gpu.alloc(0x100)
    for i in range(3):
        q.write(buf, 4 * i, [i + 1])  # three submissions behind the holder
    assert q.first_seq == first and int(q.q32[0]) == 0  # (seqnos count per context)
    before = kmd.stats["ioctls"]
    assert not any(q.seq_done(q.last_seq) for _ in range(5))
    assert kmd.stats["ioctls"] == before
    hold.release()
    q.finish()
    assert buf.u32[:3].tolist() == [1, 2, 3] and q.seq_done(q.last_seq)


def test_seq_done_asks_the_kernel_when_zero_may_be_ours():
    """Seqnos 0xfffffffe, 0xffffffff, 0: while the dword holds 0 the queue asks the kernel
    about its first job (one WAIT_CS); once a wait has seen its jobs end, a 0 there is its
    own seqno, trusted without asking."""
    gpu = _gpu(initial_seq=2**32 - 2)
    kmd = kmd_model.bound()
    q = gpu.queue(flush_threshold=1)
    buf = gpu.alloc(0x100)
    # the first job polls a flag, and sleeps 0xffff cycles between polls
    q.wait_mem(buf, 0x80, 1, poll_interval=0xFFFF)
    run_device(kmd, 100, service=False)
    for i in range(2):
        q.write(buf, 4 * i, [i + 1])
    buf.u32[0x20] = 1  # the condition holds now; the CP sees it at its next poll
    assert (q.first_seq, q.last_seq) == (0xFFFF_FFFE, 0) and int(q.q32[0]) == 0
    before = kmd.stats["ioctls"]
    assert not q.seq_done(q.last_seq)
    assert kmd.stats["ioctls"] == before + 1  # the WAIT_CS on the first job, with timeout 0
    before = kmd.stats["ioctls"]
    q.finish()  # a WAIT_CS that does not wait (the first job: not yet), one that waits out the poll,
    # and the look that proves its jobs ended well (one CTX QUERY_STATE: any ring, the gfx ring
    # too, may be reset alone, umd/failures/failed_jobs.py)
    assert kmd.stats["ioctls"] == before + 3  # ... and then the 0 is trusted: nothing more to ask
    assert int(q.q32[0]) == 0 and buf.u32[:2].tolist() == [1, 2]  # the last seqno, 0, is there
    before = kmd.stats["ioctls"]
    assert q.seq_done(0xFFFF_FFFF) and q.seq_done(0)  # the wait made the 0 trusted: memory only
    assert kmd.stats["ioctls"] == before


def _hog_gtt(gpu, kmd) -> list:
    gtt = kmd.bo.heaps[kmd_model.uapi.Domain.GTT]
    hog = []
    while gtt.largest_free >= 0x1000:
        hog.append(gpu.alloc(gtt.largest_free, "gtt"))
    return hog


def test_a_queue_short_of_memory_waits_for_its_oldest_submission():
    """GTT full when the queue needs a new IB, with a submission of its own in flight: it
    waits for that one (the staging buffer of its upload comes back to the heap when it
    ends) and tries again; when the oldest does not finish in time, OutOfMemory says so."""
    gpu = _gpu(job_timeout=1 << 40, pools=False)
    kmd = kmd_model.bound()
    q = gpu.queue(flush_threshold=1 << 20)
    buf, flag, dst = gpu.alloc(0x1000), gpu.alloc(0x100), gpu.alloc(0x8000)
    # the oldest: a wait that sleeps out a long poll interval, then an upload (staged in GTT)
    q.wait_mem(flag, 0, 1, poll_interval=0xFFFF)
    q.flush()
    run_device(kmd, 100, service=False)
    flag.u32[0] = 1  # seen at the CP's next poll, 0xffff cycles on
    data = bytes(range(256)) * 0x80
    q.upload(dst, 0, data)
    q.flush()
    hog = _hog_gtt(gpu, kmd)
    for i in range(300):  # more than one IB's worth: a new IB, no memory until the upload ends
        q.write(buf, 4 * i, i)
    q.finish()
    assert buf.u32[:300].tolist() == list(range(300)) and bytes(dst.map()[:len(data)]) == data
    # the same with an oldest submission that never ends
    for h in hog:
        h.free()
    q.timeout = 5000
    flag.u32[0] = 0
    q.wait_mem(flag, 0, 1)
    q.upload(dst, 0, data)
    seq = q.flush()
    hog = _hog_gtt(gpu, kmd)
    with pytest.raises(umd.OutOfMemory, match=rf"^write \(a new IB\): no memory for 0x1000 bytes on queue "
                       rf"\(context {q.ctx_id}\), "
                       rf"and its oldest submission \(seqno {seq:#x}\) has not finished after 5000 cycles \(1 in "
                       r"flight, max_inflight=32\): ENOMEM: GEM_CREATE: no 0x1000 bytes free in GTT"):
        for i in range(5000):  # past the IBs the first part left in the queue's pool
            q.write(buf, 4 * (i % 0x400), i + 1)
    flag.u32[0] = 1
    for h in hog:
        h.free()
    q.finish()
    gpu.close()


def test_waits_on_a_lost_device_say_what_waited():
    """A GPU reset that fails (the CP never goes idle) loses the device: every wait of the
    UMD on a submission in flight then raises DeviceLost, naming the call that waited:
    a new IB waiting for memory (the reset runs in its wait), finish, an event's wait, a
    flush held back by max_inflight; a new queue then fails at once (the lost device makes
    no memory: GEM_CREATE's EIO), where it failed at its first flush."""
    from tests.kmd_sched.reset.test_kmd_recovery import StuckResetModel

    dev = StuckResetModel()
    gpu = _gpu(dev, cs_check=False, hw_timeout=2000, pools=False)
    kmd = kmd_model.bound()
    buf = gpu.alloc(0x1000)
    fin = gpu.queue(flush_threshold=1 << 20)
    thr = gpu.queue(flush_threshold=1 << 20, max_inflight=1, ib_size_dw=64)
    mem = gpu.queue(flush_threshold=1 << 20)
    for i in range(20):  # a submission of chained IBs: back in thr's pool once it ends
        thr.write(buf, 4 * i, i)
    thr.finish()
    assert len(thr.pool.free) >= 2
    hold = Holder()
    bad = Client()
    bad.submit(bad.ib(bad.bo(), [pm4.header(0x7B, 0), 0]))
    for q in (fin, thr, mem):  # one submission each, behind the holder and the bad packet
        q.write(buf, 0, 1)
        q.flush()
    ev = fin.signal()
    fin.flush()
    thr.write(buf, 4, 2)  # recorded in thr's second pooled IB, not flushed
    hog = _hog_gtt(gpu, kmd)  # (before the loss: a lost device makes no memory)
    dev.stuck = True
    hold.bo.u32[0x200] = 1  # the CP runs into the bad packet; its reset will not take
    with pytest.raises(umd.DeviceLost, match=r"^write \(a new IB\): WAIT_CS: soft reset: CP not idle after 2000 cycles"):
        for i in range(5000):  # a new IB, no memory: waits for its submission in flight, which runs the reset
            mem.write(buf, 4 * (i % 0x400), i)
    lost = re.escape(f"WAIT_CS: {kmd.wedged}")
    with pytest.raises(umd.DeviceLost, match=f"^finish: {lost}$"):
        fin.finish()
    with pytest.raises(umd.DeviceLost, match=f"^flush: {lost}$"):
        thr.flush()  # max_inflight=1: waits for the one in flight first
    with pytest.raises(umd.DeviceLost, match=f"^queue: {re.escape(f'GEM_CREATE: {kmd.wedged}')}$") as ei:
        gpu.queue()  # (its page: the device's EIO, not a ban's)
    assert type(ei.value) is umd.DeviceLost
    with pytest.raises(umd.DeviceLost, match=f"^wait: {lost}$"):
        ev.wait()
    for h in hog:
        h.free()
