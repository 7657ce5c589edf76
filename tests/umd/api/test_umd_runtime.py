"""The UMD runtime API: buffers, writes, GPU-side waits, events, errors. Bodies are
`check_*(dev)` taking a fresh Device (they bind it), so they also run on the RTL backend."""

from __future__ import annotations

import errno
import re

import numpy as np
import pytest

import kmd_model
import umd
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd_sched.test_kmd_fence import WRAP_BEFORE, WRAP_JOBS, WRAP_START, assert_rings_wrapped


def check_buffers_and_writes(dev):
    kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    assert gpu.name == dev.name and gpu.api_version == 2
    v, g = gpu.alloc(4096, "vram"), gpu.alloc(100, "gtt")
    assert v.size == 4096 and g.size == 100 and not v.u32.any()
    q = gpu.queue()
    q.write(v, 0, [1, 2, 3])
    q.write(v, 64, np.arange(10, 20, dtype=np.uint32))
    q.write(g, 96, 0xDEADBEEF)
    q.write(v, 12, b"\x04\x00\x00\x00")
    q.finish()
    assert v.u32[:4].tolist() == [1, 2, 3, 4] and v.u32[16:26].tolist() == list(range(10, 20))
    assert g.u32[24] == 0xDEADBEEF and len(g.map()) == 100
    big = list(range(5000))  # more than one WRITE_DATA (and more than one IB) can carry
    q.write(v, 0, big[:1024])
    q.finish()
    assert v.u32.tolist() == big[:1024]
    mem = gpu.memory()
    assert mem.vram.used >= 4096
    gpu.close()
    assert kmd_model.bound().live_bos() == []


def check_wait_mem_released_later(dev):
    """A GPU-side wait holds the queue until the CPU writes the flag."""
    kmd_model.bind(dev)
    gpu = umd.open(api_version=1)
    flag, out = gpu.alloc(4096), gpu.alloc(4096)
    q = gpu.queue()
    q.write(out, 0, 1)
    q.wait_mem(flag, 8, 0x10, mask=0xF0, compare=">=")
    q.write(out, 4, 2)
    ev = q.signal()
    assert not ev.wait(4000)  # still waiting: (0 & 0xF0) >= 0x10 is false
    assert out.u32[:2].tolist() == [1, 0] and not ev.signalled()
    flag.u32[2] = 0x13
    assert ev.wait(50_000) and ev.signalled()
    assert out.u32[:2].tolist() == [1, 2]


def check_events_check_memory_first(dev):
    kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    q = gpu.queue()
    evs = []
    for i in range(5):
        q.write(buf, 4 * i, i + 1)
        evs.append(q.signal())
    assert not evs[0].signalled()  # recorded, not flushed yet
    assert evs[4].wait()  # flushes, then waits
    n = gpu.ws.ioctls
    assert all(e.wait() for e in evs)  # memory says so: no ioctl
    assert gpu.ws.ioctls == n
    assert buf.u32[:5].tolist() == [1, 2, 3, 4, 5]


def check_argument_errors(dev):
    kmd_model.bind(dev)
    gpu = umd.open()
    buf = gpu.alloc(64)
    q = gpu.queue()
    cases = [
        (ValueError, "alloc: size must be > 0, not 0", gpu.alloc, 0),
        (ValueError, "alloc: domain must be 'gtt' or 'vram', not 'l2'", gpu.alloc, 64, "l2"),
        (TypeError, "alloc: size must be an int, not 1.5", gpu.alloc, 1.5),
        (ValueError, "write: offset must be a non-negative multiple of 4, not 2", q.write, buf, 2, 1),
        (ValueError, "write: [0x3c, 0x44) is outside the 0x40-byte buffer", q.write, buf, 60, [1, 2]),
        (ValueError, "write: data[1] must fit in 32 bits, not 0x100000000", q.write, buf, 0, [1, 1 << 32]),
        (ValueError, "write: [0x44, 0x44) is outside the 0x40-byte buffer", q.write, buf, 68, []),
        (ValueError, "write: bytes data must be a multiple of 4 bytes, not 3", q.write, buf, 0, b"abc"),
        (ValueError, "wait_mem: compare must be one of always, <, <=, ==, !=, >=, >, not '=>'",
         q.wait_mem, buf, 0, 1, ), 
        (ValueError, "queue: flush_threshold must be >= 1, not 0", gpu.queue),
        (ValueError, "open: api_version 4 is not a version this UMD serves: 1, 2 or 3 (leave it out for the newest, 3)",
         umd.open, 4),
        (TypeError, "open: api_version must be an int: 1, 2 or 3 (leave it out for the newest, 3), not 2.0", umd.open, 2.0),
        (TypeError, "open: api_version must be an int: 1, 2 or 3 (leave it out for the newest, 3), not True",
         umd.open, True),
    ]
    cases[8] = (ValueError, cases[8][1], lambda: q.wait_mem(buf, 0, 1, compare="=>"))
    cases[9] = (ValueError, cases[9][1], lambda: gpu.queue(flush_threshold=0))
    for exc, msg, fn, *args in cases:
        with pytest.raises(exc) as ei:
            fn(*args)
        assert str(ei.value) == msg
    buf.free()
    with pytest.raises(ValueError, match=r"^map: <umd.Buffer GTT 0x[0-9a-f]+\+0x40> was freed \(Buffer.free\)$"):
        buf.map()


def check_gpu_error_decoded(dev):
    """A CP error surfaces as GpuError naming opcode, IB offset, context and the call, once:
    queue 0 alone is reset and the queue runs on."""
    kmd_model.bind(dev, cs_check=False)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    bad, good = gpu.queue(), gpu.queue()
    bad.write(buf, 0, list(range(1, 11)))  # 14 dwords: the bad packet lands at IB+0x38
    bad.emit_raw([pm4.header(0x7B, 0), 0])
    with pytest.raises(umd.GpuError) as ei:
        bad.finish()
    e = ei.value
    assert (e.opcode, e.ib_offset, e.context, e.code) == (0x7B, 0x38, bad.ctx_id, "ILLEGAL_OPCODE")
    assert e.command == "Queue.emit_raw() #2" and not e.waited_for
    assert re.fullmatch(rf"GPU error: illegal opcode 0x7b at IB\+0x38 \(0x[0-9a-f]+\), context {bad.ctx_id} "
                        r"\(recorded by Queue.emit_raw\(\) #2\)", str(e)), str(e)
    bad.write(buf, 64, 5)
    bad.finish()  # (told once: the context runs on after its queue's reset)
    good.write(buf, 128, 7)
    good.finish()
    assert buf.u32[32] == 7 and buf.u32[16] == 5


def check_submit_refused(dev):
    """With the checker on, a packet reaching outside the app's buffers never runs."""
    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    q = gpu.queue()
    q.emit_raw(pm4.write_data(kmd.fence_addr, [0]))
    ev = q.signal()
    with pytest.raises(umd.SubmitError) as ei:
        q.flush()
    assert ei.value.errno == errno.EINVAL
    assert re.fullmatch(rf"flush: EINVAL: CS: WRITE_DATA at IB\+0x0 \(0x[0-9a-f]+\) writes \[{kmd.fence_addr:#x}, "
                        rf"{kmd.fence_addr + 4:#x}\), outside every mapping of context {q.ctx_id} "
                        r"\(recorded by Queue.emit_raw\(\) #1\)", str(ei.value))
    with pytest.raises(umd.SubmitError):
        ev.wait()
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)
    q.finish()  # the queue still works
    assert buf.u32[0] == 1


def check_timestamp_and_fill(dev):
    kmd = kmd_model.bind(dev, cap_perfmon=True)  # (it reads the device's packet counters)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(8192, "vram")
    q = gpu.queue()
    t0 = q.timestamp()
    q.fill(buf, 16, 4096, 0xA5A5A5A5)
    t1 = q.timestamp()
    assert t1.wait()
    assert t0.cycles <= t1.cycles <= dev.now()
    assert (buf.u32[4:4 + 1024] == 0xA5A5A5A5).all() and buf.u32[3] == 0 and buf.u32[1028] == 0
    kind = "DMA_DATA" if kmd.info.has_dma else "WRITE_DATA"
    assert gpu.counters().packets[kind] >= 1


def check_events_across_wrap(dev):
    """WRAP_JOBS submissions whose seqnos cross 2^32 in the middle: user fences and events
    stay in order while the ring and the IH ring wrap too."""
    kmd = kmd_model.bind(dev, initial_seq=WRAP_START)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    q = gpu.queue(flush_threshold=2)
    evs = []
    for i in range(WRAP_JOBS):
        q.write(buf, 4 * (i % 1024), i)
        evs.append(q.signal())  # the 2nd command: flushes
        if i % 50 == 49:
            assert evs[-1].wait()
    q.finish()
    assert all(e.signalled() for e in evs) and buf.u32[:WRAP_JOBS].tolist() == list(range(WRAP_JOBS))
    last = WRAP_JOBS - WRAP_BEFORE - 1
    assert q.last_seq == last and q.seq_done(WRAP_START) and q.seq_done(last)
    assert kmd.fence_drv.sync_seq == (WRAP_START + WRAP_JOBS) & 0xFFFF_FFFF  # + the IB test's
    assert_rings_wrapped(kmd)


def _polls(ev, most: int = 20_000) -> int:
    """How many looks of ev.signalled() until it says True (AssertionError past `most`:
    a loop that never ends fails here, it does not hang the test)."""
    for n in range(most):
        if ev.signalled():
            return n
    raise AssertionError(f"{ev!r} not signalled after {most} looks of signalled()")


def check_a_loop_of_signalled_ends_when_the_gpu_gets_there(dev):
    """The CPU spins on ev.signalled(), as an app spins on a fence on hardware: each look
    that finds it unsignalled lets the device run POLL_CYCLES (the GPU and the kernel beside
    it), so the loop ends, on the model as on the simulators. Before, the device's time
    passed only inside the driver, and such a loop never ended: on the RTL for any job, on
    the model for a job waiting on a flag the CPU sets after the flush. No look makes an
    ioctl; an event never flushed lets no time pass."""
    from umd.events import POLL_CYCLES

    kmd = kmd_model.bind(dev)
    gpu = umd.open()
    flag, out = gpu.alloc(4096), gpu.alloc(4096)
    # (an async queue's flush is queued for the submission thread: a look lets it submit)
    for engine, async_submit in (("gfx", False), ("copy", False), ("gfx", True)):
        q = gpu.queue(engine=engine, async_submit=async_submit)
        q.wait_mem(flag, 0, 1)  # the GPU waits for the CPU ...
        q.write(out, 4, 0xC0FFEE)
        ev = q.signal()
        ts = q.timestamp() if engine == "gfx" else None  # (the copy engine has no timestamp packet)
        t0, n = dev.now(), gpu.ws.ioctls
        assert not ev.signalled() and dev.now() == t0 and gpu.ws.ioctls == n  # never flushed: no time passes
        q.flush()
        t0 = dev.now()
        assert not ev.signalled() and dev.now() >= t0 + POLL_CYCLES  # (held on the flag)
        n = gpu.ws.ioctls
        flag.u32[0] = 1  # ... which sets the flag after the flush, then spins
        assert _polls(ev) >= 0 and out.u32[1] == 0xC0FFEE and (ts is None or _polls(ts) >= 0)
        # looks at memory, no ioctl (an async queue's CS is its thread's, made when it runs)
        assert gpu.ws.ioctls == n or async_submit
        # (the GPU's clock restarts at the device's reset: a sample, not dev.now()'s count)
        assert ev.wait(0) and (ts is None or 0 < ts.cycles <= dev.now())
        flag.u32[0] = out.u32[1] = 0
        q.close()
    assert kmd.stats["cs"] >= 2
    gpu.close()


CHECKS = [check_buffers_and_writes, check_events_across_wrap, check_wait_mem_released_later, check_events_check_memory_first,
          check_argument_errors, check_gpu_error_decoded, check_submit_refused, check_timestamp_and_fill,
          check_a_loop_of_signalled_ends_when_the_gpu_gets_there]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_fill_with_dma():
    check_timestamp_and_fill(RefModel(dma=True))


def test_a_reset_context_whose_seqnos_cross_zero_is_not_taken_for_done():
    """The user fence dword reads 0 both before the GPU wrote it and when seqno 0 (ours,
    near the wrap) has ended; then the queue asks the kernel about its first job. Once the
    context has been reset that question fails, and the answer is "not done": finish()
    reports the GPU error instead of returning as if the work had run."""
    kmd = kmd_model.bind(RefModel(), initial_seq=2**32 - 1, job_timeout=5_000)
    gpu = umd.open()
    q = gpu.queue()
    flag, buf = gpu.alloc(4096), gpu.alloc(4096)
    q.wait_mem(flag, 0, 1)  # never satisfied: the job timer resets the context
    q.flush()
    q.write(buf, 0, 1)
    q.flush()
    assert (q.first_seq, q.last_seq) == (2**32 - 1, 0)
    kmd.wait_for(lambda: False, 4 * 5_000)  # someone else's wait: the reset happens there
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)  # (queue 0's reset: the same question)
    assert int(q.q32[umd.queue.QBO_USER_FENCE]) == 0
    assert not q.seq_done(0)
    with pytest.raises(umd.GpuError, match="timed out"):
        q.finish()
    assert buf.u32[0] == 0


@pytest.mark.parametrize("dma", [True, False])
def test_a_buffer_of_another_device_is_refused_by_every_call(dma):
    """A Buffer's gpu_addr is a VA in its own device's VM: recorded on another device's
    queue it names whatever that device has at the same VA (two devices start their VA
    ranges at the same place). Every call taking a buffer refuses it; a non-Buffer is a
    TypeError naming the call and the argument, not an AttributeError from inside. On a
    device without a DMA engine fill takes another path (WRITE_DATA): it checks the same way."""
    kmd_model.bind(RefModel(dma=dma))
    gpu, other = umd.open(), umd.open()
    mine, theirs = gpu.alloc(4096), other.alloc(4096)
    assert mine.gpu_addr == theirs.gpu_addr  # the same VA, each in its own VM
    q = gpu.queue()
    calls = [("write", "buf", lambda b: q.write(b, 0, 0xBAD)),
             ("wait_mem", "buf", lambda b: q.wait_mem(b, 0, 0)),
             ("fill", "buf", lambda b: q.fill(b, 0, 4, 0xBAD)),
             ("copy", "dst", lambda b: q.copy(b, 0, mine, 64, 4)),
             ("copy", "src", lambda b: q.copy(mine, 64, b, 0, 4)),
             ("upload", "dst", lambda b: q.upload(b, 0, b"\xad\x0b\x00\x00")),
             ("download", "src", lambda b: q.download(b, 0, 4))]
    if not dma:  # (transfers need the engine: "copy: this device has no DMA engine")
        calls = [c for c in calls if c[0] not in ("copy", "upload", "download")]
    for call, name, fn in calls:
        with pytest.raises(ValueError, match=re.escape(f"{call}: {name} {theirs!r} belongs to another device")):
            fn(theirs)
        with pytest.raises(TypeError, match=re.escape(f"{call}: {name} must be a umd Buffer, not None")):
            fn(None)
    q.finish()
    assert not mine.u32.any() and not theirs.u32.any()
    gpu.close()
    other.close()


def test_events_and_timestamps_outlive_their_queue_and_device():
    """close() finishes the queue, then frees its page (user fence, timeline, timestamp
    slots): its events and timestamps keep answering from what the page held at close, not
    from the freed memory (which the next buffer gets, zero-filled) nor from a revoked
    mapping once the device is closed too."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    buf = gpu.alloc(4096)
    q.write(buf, 0, 1)
    ev, ts = q.signal(), q.timestamp()
    late = q.signal()  # never waited for: close() submits and finishes it
    assert ev.wait() and ts.wait()
    cycles = ts.cycles
    page = q.qbo.gpu_addr
    q.close()
    reused = [gpu.alloc(4096) for _ in range(4)]  # the queue's page among them
    assert page in [b.gpu_addr for b in reused]
    for b in reused:
        b.u32[:] = 0xFFFF_FFFF
    assert ev.signalled() and late.signalled() and ev.wait() and late.wait(0)
    assert ts.signalled() and ts.cycles == cycles
    q2 = gpu.queue()
    ev2 = q2.signal()
    gpu.close()
    assert ev2.wait() and ev.wait() and ts.cycles == cycles
    assert repr(ev2) == f"<umd.Event {ev2.value} signalled>"


def test_waiting_on_an_event_its_closed_queue_never_signalled_says_so():
    """close() gave up on the queue's work (the GPU failed it): waiting on its event later is
    a ValueError naming the wait and why, not the KMD's EINVAL/EBADF for the context or
    file the queue released."""
    kmd_model.bind(RefModel(), job_timeout=5_000)
    gpu = umd.open()
    q = gpu.queue()
    q.wait_mem(gpu.alloc(4096), 0, 1)  # never satisfied: the job is reset
    ev = q.signal()
    with pytest.raises(umd.GpuError, match="timed out"):  # (close raises what nobody waited for)
        q.close()
    message = "wait: the queue of this event was closed before the GPU signalled it"
    with pytest.raises(ValueError, match=message):
        ev.wait()
    gpu.close()
    assert not ev.signalled()
    with pytest.raises(ValueError, match=message):
        ev.wait(0)


@pytest.mark.parametrize("dma", [True, False])
def test_a_write_longer_than_one_write_data_in_large_ibs(dma):
    """With IBs larger than the biggest WRITE_DATA (16,381 data dwords: COUNT's 14 bits less
    the packet's 3 fixed dwords), a long write (and a fill without a DMA engine, made of
    WRITE_DATAs too) is split at the packet's limit, not one dword past it."""
    kmd_model.bind(RefModel(dma=dma))
    gpu = umd.open()
    n = 20_000
    buf = gpu.alloc(4 * n)
    q = gpu.queue(ib_size_dw=1 << 15)
    q.write(buf, 0, np.arange(n, dtype=np.uint32))
    q.finish()
    assert buf.u32.tolist() == list(range(n))
    q.fill(buf, 0, 4 * n, 7)
    q.finish()
    assert (buf.u32 == 7).all()


def test_a_gpu_side_wait_on_an_event_of_a_closed_queue():
    """wait_event on an event whose queue is closed: close() finished that queue, so a
    signalled event needs no wait (the closed queue's context is gone: naming it in a CS
    dependency failed the waiting queue's flush with EINVAL), and one it never signalled
    is refused at once, as Event.wait refuses it."""
    kmd_model.bind(RefModel(), job_timeout=5_000)
    gpu = umd.open()
    a, b = gpu.queue(), gpu.queue()
    buf = gpu.alloc(64)
    a.write(buf, 0, 1)
    ev = a.signal()
    a.close()
    b.wait_event(ev)
    b.write(buf, 4, 2)
    b.finish()
    assert buf.u32[:2].tolist() == [1, 2]
    c = gpu.queue()
    c.wait_mem(buf, 8, 1)  # never satisfied: the job is reset
    lost = c.signal()
    with pytest.raises(umd.GpuError, match="timed out"):  # (close raises what nobody waited for)
        c.close()
    with pytest.raises(ValueError, match="^wait_event: the queue of this event was closed before the GPU "
                                         "signalled it"):
        b.wait_event(lost)
    b.write(buf, 12, 3)
    b.finish()
    assert buf.u32[3] == 3


def test_a_timestamp_whose_slot_was_taken_again_is_refused_not_misread():
    """A queue keeps its last 504 timestamps (slots in its page, reused in turn): reading an
    older one after more were taken is a ValueError saying so, not the later sample that
    now sits in its slot (which read as earlier timestamps later than later ones)."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    buf = gpu.alloc(64)
    ts = []
    for i in range(umd.queue.QBO_TS_SLOTS + 1):
        q.write(buf, 0, i)
        ts.append(q.timestamp())
        if i == 100:
            q.flush()  # the later ones run later
    q.finish()
    values = [t.cycles for t in ts[1:]]
    assert values == sorted(values) and values[0] < values[-1]
    with pytest.raises(ValueError, match=r"^timestamp: its slot was taken again by a later timestamp \(a queue "
                                         r"keeps its last 504\): read it before taking more$"):
        ts[0].cycles
    assert repr(ts[0]) == "<umd.Timestamp (its slot was taken again)>" and ts[0].wait()


def test_a_timestamps_value_is_read_only():
    """`ts.value = 5` did nothing (a setter that ignored it, there for Event.__init__), so an
    app that stored its own number there read the GPU's sample back unawares. It is an
    AttributeError saying why (both names of the sample); an Event's value is its own."""
    kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    ts, ev = q.timestamp(), q.signal()
    assert ts.wait() and ev.wait()
    sample = ts.value
    for name in ("value", "cycles"):
        with pytest.raises(AttributeError, match=r"^timestamp: its value \(cycles\) is the GPU clock sample the "
                                                 r"queue's job wrote: read-only$"):
            setattr(ts, name, 5)
    assert ts.value == ts.cycles == sample > 0 and ev.value == 1
    gpu.close()


def test_an_event_of_a_refused_flush_stays_lost_after_later_events_signal():
    """Event values are a queue's timeline, compared wrap-safely: once a later event of the
    queue is signalled, a refused flush's event compared as passed too, and its wait()
    returned True for work that never ran. It stays lost: signalled() is False and wait()
    raises ECANCELED (docs/architecture.md: "the refused flush's events are lost")."""
    kmd = kmd_model.bind(RefModel())
    gpu = umd.open()
    q = gpu.queue()
    buf = gpu.alloc(64)
    q.emit_raw(pm4.write_data(kmd.fence_addr, [0]))  # refused by the checker
    lost = q.signal()
    with pytest.raises(umd.SubmitError):
        q.flush()
    q.write(buf, 0, 1)
    assert q.signal().wait() and buf.u32[0] == 1
    assert not lost.signalled()
    with pytest.raises(umd.SubmitError, match="^wait: the submission carrying this event was refused$") as ei:
        lost.wait()
    assert ei.value.errno == errno.ECANCELED


def test_open_takes_numpy_integers():
    """An API version held in a numpy integer (read from an array, a config) is a version,
    as numpy integers are for every other integer argument."""
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=np.int64(2))
    assert gpu.api_version == 2 and type(gpu.api_version) is int
    gpu.close()


def test_a_vm_fault_surfaces_as_a_gpu_error_naming_the_packet_and_address():
    """A write to an address the file never mapped (the CS checker off, as a hostile or buggy
    command stream past it would be): the queue's GpuError names the fault, the packet by
    name and the faulting address, once; queue 0 alone is reset (CP_QUEUE_RESET.Q0) and the
    queue runs on: its later work runs (after a full reset it would be refused,
    tests/umd/api/test_umd_first_programs.py)."""
    kmd_model.bind(RefModel(), cs_check=False)
    gpu = umd.open()
    q = gpu.queue()
    q.emit_raw(pm4.write_data(0x3000_0000, [1]))
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert (e.code, e.opcode, e.opcode_name, e.ib_offset, e.context) == ("VM_FAULT", 0x37, "WRITE_DATA", 0, q.ctx_id)
    assert (e.info.code, e.info.level, e.info.ctx_id) == ("VM_FAULT", "IB1", q.ctx_id)  # the KMD's decoded error
    assert str(e).startswith("GPU error: VM fault: WRITE at 0x30000000 in WRITE_DATA (VMID ")
    q.finish()  # (nothing new: the app was told)
    later = gpu.alloc(64)
    q.write(later, 0, 1)
    q.finish()
    assert later.u32[0] == 1
