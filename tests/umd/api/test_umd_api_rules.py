"""A new user's and an outside app writer's third round against the UMD API (README.md,
docs/tutorial.md, the umd docstrings, docs/architecture.md "The UMD's API rules"): one
keyword and meaning for every wait's bound, exceptions that cross a process boundary, one
rule for empty transfers, a fault's packet named by the call that recorded it, a banned
queue told from a lost device; then the programs such users write next (wrong types,
wrong order, reuse after close, sizes at the edges, numpy views, threads, ^C)."""

from __future__ import annotations

import errno
import pickle
import re
import signal

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from kmd_model.uapi import CtxArgs, CtxOp, CtxQueryFlags, HwErrorInfo, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from ..handles import named as _named


def _gpu(params: KmdParams | None = None, **kw):
    kmd_model.bind(RefModel(), params)
    return umd.open(**kw)


def _raises(exc, message, fn, *args, **kwargs):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        fn(*args, **kwargs)


# ---------------------------------------------------------------------------- timeouts

def test_every_wait_names_its_bound_timeout():
    """Event.wait(timeout_cycles=) and Queue.finish(timeout=) named the same bound two ways,
    and None (wait for ever) was a TypeError in both; download took None as "the default".
    Now each waiting call takes `timeout` (GPU cycles, None: no bound but the KMD's job
    timer), Event.wait still takes its old keyword, and a bad value names call and argument."""
    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    q.write(buf, 0, 7)
    ev = q.signal()
    assert ev.wait(None) and ev.wait(timeout=None) and ev.wait(timeout=0) and ev.wait(timeout_cycles=10)
    q.finish(None)
    q.finish(timeout=None)
    assert q.download(buf, 0, 4, timeout=None).view("<u4").tolist() == [7]
    _raises(TypeError, "wait: timeout and timeout_cycles (its old name) both given: pass timeout only",
            ev.wait, 5, timeout_cycles=5)
    _raises(TypeError, "wait: timeout and timeout_cycles (its old name) both given: pass timeout only",
            ev.wait, None, timeout_cycles=5)
    for fn, name in ((ev.wait, "wait"), (q.finish, "finish"),
                     (lambda t: q.download(buf, 0, 4, timeout=t), "download")):
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not 1.5", fn, 1.5)
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not '9'", fn, "9")
        _raises(TypeError, f"{name}: timeout must be an int (GPU cycles) or None, not True", fn, True)
        _raises(ValueError, f"{name}: timeout must be in [0, 2**64) or None, not -1", fn, -1)
    _raises(TypeError, "wait: timeout must be an int (GPU cycles) or None, not 1.5", ev.wait, timeout_cycles=1.5)
    gpu.close()


def test_a_wait_without_bound_ends_with_the_job_timer():
    """timeout=None waits for ever as far as the UMD goes: a job that never ends (a
    WAIT_REG_MEM nobody satisfies) is ended by the KMD's job timer, and the wait raises its
    GpuError rather than hanging or returning False."""
    gpu = _gpu(KmdParams(job_timeout=20_000))
    q, flag = gpu.queue(), gpu.alloc(64)
    q.wait_mem(flag, 0, 1)
    ev = q.signal()
    with pytest.raises(umd.GpuError, match="timed out"):
        ev.wait(None)
    gpu.queue().finish(None)  # (the device runs on)
    gpu.close()


# ---------------------------------------------------------------------------- exceptions

_INFO = HwErrorInfo(code="ILLEGAL_OPCODE", level="IB1", opcode=0x7B, opcode_name=None, offset=0x14,
                    addr=0x102014, seq=1, ctx_id=3, message="illegal opcode 0x7b at IB+0x14 (0x102014), context 3")


@pytest.mark.parametrize("err, attrs", [
    (umd.UmdError("open: no GPU is bound yet"), {}),
    (umd.GpuError(_INFO, "Queue.emit_raw() #4", refused=True), {"info": _INFO, "command": "Queue.emit_raw() #4",
                                                                "refused": True, "code": "ILLEGAL_OPCODE",
                                                                "context": 3, "ib_offset": 0x14}),
    (umd.GpuError(_INFO, None, unnamed="the fault is in the kernel's ring packets"),
     {"command": None, "unnamed": "the fault is in the kernel's ring packets"}),
    (umd.GpuTimeout("finish: queue (context 1) not idle after 10 cycles"), {}),
    (umd.SubmitError(errno.EINVAL, "flush: EINVAL: CS: ..."), {"errno": errno.EINVAL}),
    (umd.OutOfMemory("alloc: no device memory"), {}),
    (umd.DeviceLost("flush: CS: the device is wedged"), {}),
    (umd.QueueBanned("flush: this copy queue (context 2) is banned", 2), {"context": 2}),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else "")
def test_every_error_pickles_with_its_attributes(err, attrs):
    """multiprocessing and concurrent.futures carry a worker's exception back by pickle, which
    rebuilds it as cls(*args): SubmitError(message) lacked its errno ("missing 1 required
    positional argument") and GpuError(message) took the message for its info. Each class
    comes back as itself, with its message, its attributes and its notes."""
    err.add_note("while copying chunk 3")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err) and back.args == err.args
    assert back.__notes__ == ["while copying chunk 3"]
    for name, value in attrs.items():
        assert getattr(back, name) == value, name


def test_a_raised_gpu_error_pickles():
    """The GpuError a real hang raises (its info the KMD's, its command the UMD's) too."""
    gpu = _gpu(KmdParams(cs_check=False))
    q = gpu.queue()
    q.emit_raw([pm4.header(0x7B, 0)])
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    back = pickle.loads(pickle.dumps(ei.value))
    assert str(back) == str(ei.value) and back.command == "Queue.emit_raw() #1" and back.info == ei.value.info
    gpu.close()


# ---------------------------------------------------------------------------- empty transfers

@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_an_empty_transfer_records_nothing(engine):
    """write([]) and write(b"") were ValueErrors while upload(b""), copy/fill of 0 bytes and
    download of 0 were no-ops. One rule now: an empty transfer is checked as any other (its
    buffer, its offset within the buffer) and records nothing, no command toward the flush
    threshold either; emit_raw, which records packets, still refuses none."""
    gpu = _gpu()
    q, a, b = gpu.queue(engine=engine, flush_threshold=1), gpu.alloc(64), gpu.alloc(64)
    empties = [lambda: q.write(a, 0, []), lambda: q.write(a, 64, b""), lambda: q.write(a, 8, np.zeros(0, np.uint32)),
               lambda: q.write(a, 0, ()), lambda: q.upload(a, 64, b""), lambda: q.upload(a, 0, np.zeros((0, 3))),
               lambda: q.copy(a, 0, b, 0, 0), lambda: q.fill(a, 64, 0, 5)]
    for fn in empties:
        fn()
        assert q.calls == 0 and q.flushes == 0 and not q.cmdbuf.ibs
    got = q.download(a, 64, 0)
    assert got.dtype == np.uint8 and got.shape == (0,) and q.flushes == 0  # (nothing to wait for)
    # still checked: the buffer, the offset, the types
    _raises(ValueError, "write: [0x44, 0x44) is outside the 0x40-byte buffer", q.write, a, 68, [])
    _raises(ValueError, "upload: [0x44, 0x44) is outside the 0x40-byte buffer", q.upload, a, 68, b"")
    _raises(ValueError, "write: bytes data must be a multiple of 4 bytes, not 3", q.write, a, 0, b"abc")
    _raises(TypeError, "write: buf must be a umd Buffer, not None", q.write, None, 0, [])
    _raises(ValueError, "emit_raw: dwords is empty", q.emit_raw, [])
    assert q.calls == 0
    gpu.close()


# ---------------------------------------------------------------------------- faults

_UNMAPPED = 0x7000_0000  # (no buffer of these tests is there: the VA allocator starts low)


def test_a_vm_fault_names_the_command_that_recorded_its_packet():
    """A fault latches the access's address, not the packet's, and the GpuError's `command`
    was None: the UMD looked the fault address up among its packets. It finds the packet at
    IB+offset of the failed submission's IBs (where several IBs have one there, the one
    whose address is near the fault's), and says why when it cannot."""
    gpu = _gpu()
    # the copy engine's queue: its packets' addresses are the engine's to check
    q, buf = gpu.queue(engine="copy"), gpu.alloc(64)
    q.write(buf, 0, 1)
    q.emit_raw(sdma.write_linear(_UNMAPPED, [1]))
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    assert ei.value.code == "VM_FAULT" and ei.value.command == "Queue.emit_raw() #2"
    assert str(ei.value).endswith("sdma0, context 1 (recorded by Queue.emit_raw() #2)")
    # many IBs in one submission (a copy queue's IBs are CS chunks of their own)
    q = gpu.queue(engine="copy", ib_size_dw=64)
    for i in range(40):
        q.write(buf, 4, i)
    q.emit_raw(sdma.write_linear(_UNMAPPED + 8, [1]))
    q.write(buf, 4, 99)
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    assert ei.value.command == "Queue.emit_raw() #41", str(ei.value)
    gpu.close()


def test_a_fault_no_recorded_command_holds_says_why():
    """A gfx fault in an IB2 the app's own INDIRECT_BUFFER ran: no command of the UMD's
    holds that packet, and the message says so (the checker is off, as for gpu_error.py, so
    the bad address reaches the CP)."""
    gpu = _gpu(KmdParams(cs_check=False))
    q, ib2 = gpu.queue(), gpu.alloc(4096)
    words = pm4.write_data(_UNMAPPED, [1], wr_confirm=1) + pm4.pad(3)
    ib2.u32[:len(words)] = words
    q.emit_raw(pm4.indirect_buffer(ib2.gpu_addr, len(words)))
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert e.code == "VM_FAULT" and e.command is None and e.info.level == "IB2"
    assert str(e).endswith("(no API call named: the fault is in an IB2, which an INDIRECT_BUFFER of the app's own "
                           "(emit_raw) ran: the UMD recorded none of its packets)"), str(e)
    # the same packet in the queue's own IB is named
    q = gpu.queue()
    q.write(ib2, 0, 1)
    q.emit_raw(words)
    with pytest.raises(umd.GpuError, match=re.escape("(recorded by Queue.emit_raw() #2)")):
        q.finish()
    gpu.close()


def test_a_refusal_in_an_ib2_names_the_call_that_recorded_its_indirect_buffer():
    """The CS checker refuses a packet in an IB2 the app built itself: no call of the UMD's
    recorded that packet, and the SubmitError named none, where a refusal in the queue's own
    IB names the call that recorded the packet. It names the call that recorded the
    INDIRECT_BUFFER that ran the IB2 now (the KMD's PacketAt.via), the IB2's own words
    unchanged; a refusal in the queue's own IB is named as before."""
    gpu = _gpu()
    q, ib2 = gpu.queue(), gpu.alloc(4096)
    words = pm4.write_data(_UNMAPPED, [1]) + pm4.pad(3)  # (outside every mapping: refused)
    ib2.u32[:len(words)] = words
    q.write(ib2, 64, 1)
    q.emit_raw(pm4.indirect_buffer(ib2.gpu_addr, len(words)))
    with pytest.raises(umd.SubmitError) as ei:
        q.finish()
    assert re.fullmatch(rf"finish: EINVAL: CS: WRITE_DATA at IB2\+0x0 \({ib2.gpu_addr:#x}\) writes "
                        rf"\[{_UNMAPPED:#x}, {_UNMAPPED + 4:#x}\), outside every mapping of context \d+ "
                        r"\(run by the INDIRECT_BUFFER recorded by Queue.emit_raw\(\) #2\)", str(ei.value)), str(ei.value)
    q = gpu.queue()
    q.emit_raw(words)
    with pytest.raises(umd.SubmitError, match=r"writes .* \(recorded by Queue.emit_raw\(\) #1\)$"):
        q.finish()
    gpu.close()


# ---------------------------------------------------------------------------- a banned queue

def test_a_banned_queue_is_not_a_lost_device():
    """A context that caused ban_after_hangs resets is banned: its CS fails with EIO, which
    the UMD raised as DeviceLost although the device and its other queues ran. CTX
    QUERY_STATE now says BANNED (beside amdgpu's QUERY2 flags RESET and GUILTY), and the
    queue raises QueueBanned, a DeviceLost still, naming the queue and what to do."""
    gpu = _gpu(KmdParams(job_timeout=20_000))
    cq, other, flag = gpu.queue(engine="copy"), gpu.queue(), gpu.alloc(64)
    query = lambda ctx: gpu.ws.ioctl(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, ctx))  # noqa: E731
    assert query(cq.ctx_id).flags == CtxQueryFlags(0)
    for _ in range(3):  # a copy queue's hang resets its ring alone: the queue runs on, until banned
        cq.wait_mem(flag, 0, 1)
        with pytest.raises(umd.GpuError, match="timed out on sdma0"):
            cq.finish()
    assert query(cq.ctx_id).flags == CtxQueryFlags.RESET | CtxQueryFlags.GUILTY | CtxQueryFlags.BANNED
    assert query(other.ctx_id).flags == CtxQueryFlags.RESET
    cq.write(flag, 0, 1)
    msg = (f"flush: this copy queue (context {cq.ctx_id}) is banned (CS: context {cq.ctx_id} is banned: it caused "
           "3 resets (ban_after_hangs 3)); the device and its other queues still run: make a new queue "
           "(Device.queue())")
    _raises(umd.QueueBanned, msg, cq.flush)
    with pytest.raises(umd.DeviceLost) as ei:  # (what code written for DeviceLost catches)
        cq.signal().wait()
    assert type(ei.value) is umd.QueueBanned and ei.value.context == cq.ctx_id
    other.write(flag, 0, 2)
    other.finish()
    new = gpu.queue(engine="copy")
    new.write(flag, 4, 3)
    new.finish()
    assert flag.u32[:2].tolist() == [2, 3]
    cq.close()
    gpu.close()


# ---------------------------------------------------------------------------- the programs that follow

def test_a_handle_is_not_copied_or_pickled():
    """copy.copy(buf) made a second Buffer over the same memory: freeing both gave that
    memory to the next two buffers at once (two live buffers at one gpu_addr). pickle of a
    buffer or an event failed naming an internal function ("Can't pickle <function
    Device.alloc>"), deepcopy of a queue "cannot pickle memoryview objects". Every handle
    (Device, Queue, Buffer, Event, Timestamp) refuses, saying what it is."""
    import copy

    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(64)
    ev, ts = q.signal(), q.timestamp()
    _raises(TypeError, f"cannot copy or pickle {buf!r}: it is a handle to device memory of this process (a copy "
            "would free it twice): pass its bytes (Buffer.map().copy(), Queue.download())", copy.copy, buf)
    for h, what in ((gpu, "the GPU's render node"), (q, "a GPU context"), (buf, "device memory"),
                    (ev, "a queue's fence"), (ts, "a queue's fence")):
        for fn in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match=f"^cannot copy or pickle {re.escape(repr(h))}: it is a handle to "
                                                f"{re.escape(what)} of this process"):
                fn(h)
    buf.free()
    a, b = gpu.alloc(64), gpu.alloc(64)
    assert a.gpu_addr != b.gpu_addr
    gpu.close()


def test_typed_buffers_write_a_dword_per_item():
    """write()'s data may be "an integer array" or "bytes-like": array.array('I', ...), a
    ctypes array or a range were refused as "data must be an int", and a typed memoryview
    wrote its raw bytes where the same numpy array writes a dword per element. Typed buffers
    follow numpy's rule (a dword per item), byte buffers are bytes, a generator is refused
    naming what is taken; upload takes a strided view (its bytes in order)."""
    import array
    import ctypes

    gpu = _gpu()
    q, buf = gpu.queue(), gpu.alloc(256)
    q.write(buf, 0, array.array("I", [1, 2]))
    q.write(buf, 8, array.array("H", [3, 4]))  # (two dwords, as np.array([3, 4], np.uint16))
    q.write(buf, 16, (ctypes.c_uint32 * 2)(5, 6))
    q.write(buf, 24, range(7, 9))
    q.write(buf, 32, memoryview(np.arange(20, 24, dtype=np.uint32))[::2])
    q.write(buf, 40, memoryview(b"\x09\x00\x00\x00\x0a\x00\x00\x00"))
    q.finish()
    assert buf.u32[:12].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 20, 22, 9, 10]
    _raises(TypeError, "write: data must be an int, a list of ints, an integer array or bytes-like, not "
            "<generator object>", q.write, buf, 0, _gen())
    _raises(TypeError, "write: data is a int8 array, whose elements would each be a dword: pass data.tobytes() for "
            "its bytes, or data.astype(np.uint32) for a dword each", q.write, buf, 0, array.array("b", [1, 2]))
    _raises(TypeError, "write: data must be an integer array, not float64", q.write, buf, 0, array.array("d", [1.0]))
    src = np.arange(8, dtype=np.uint32)
    q.upload(buf, 64, memoryview(src)[::2])  # a strided view: cast() refused it ("bytes-like or a numpy array")
    q.finish()
    assert buf.u32[16:20].tolist() == [0, 2, 4, 6]
    gpu.close()


class _Gen:
    def __repr__(self):
        return "<generator object>"

    def __iter__(self):
        return iter([1])


def _gen():
    return _Gen()


def test_alloc_past_the_address_space_names_alloc():
    """alloc(1 << 40) raised OutOfMemory("GPU virtual address space exhausted: ..."), the VA
    allocator's words, naming no call; every other alloc error begins "alloc:"."""
    gpu = _gpu()
    # (larger than all of GTT: said so now, not "GPU virtual address space exhausted")
    with pytest.raises(umd.OutOfMemory, match=r"^alloc: 0x10000000000 bytes is more than the whole of GTT \(32 MiB, "
                                               r"[\d.]+ MiB of it free now") as ei:
        gpu.alloc(1 << 40)
    assert ei.value.__context__ is None
    gpu.close()


class _CtrlC(RefModel):
    """The model, with a ^C (SIGINT) arriving during its `arm`-th wait for an interrupt from
    now (a CS ioctl services interrupts first, a wait waits for one)."""

    arm = 0

    def wait_irq(self, timeout_cycles: int) -> bool:
        if self.arm:
            self.arm -= 1
            if not self.arm:
                signal.raise_signal(signal.SIGINT)
        return super().wait_irq(timeout_cycles)


def test_ctrl_c_during_a_flush_loses_nothing():
    """A ^C that arrived during a flush's CS ioctl lost the submission silently: the
    recorded commands had left the queue, the seqno was never recorded, and the next
    finish() and Event.wait() answered at once, the write never done. A flush now holds
    SIGINT until its CS and bookkeeping are done (as the kernel delivers a signal after the
    ioctl): the KeyboardInterrupt comes, and the submission stands. A wait stays
    interruptible, and can be waited on again."""
    # (pytest-xdist's workers ignore SIGINT: the default handler, as a plain Python run has)
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_during_a_flush()
    finally:
        signal.signal(signal.SIGINT, prev)


def _ctrl_c_during_a_flush():
    dev = _CtrlC()
    kmd_model.bind(dev)
    gpu = umd.open()
    q, out, flag = gpu.queue(), gpu.alloc(64), gpu.alloc(64)
    q.write(out, 4, 6)
    dev.arm = 1
    with pytest.raises(KeyboardInterrupt):
        q.finish()
    assert q.last_seq is not None and q.flushes == 1
    q.finish()
    assert out.u32[1] == 6
    q.wait_mem(flag, 0, 1)
    q.write(out, 0, 5)
    ev = q.signal()
    q.flush()
    dev.arm = 2
    with pytest.raises(KeyboardInterrupt):
        ev.wait(None)
    assert not ev.signalled()
    flag.u32[0] = 1
    assert ev.wait() and out.u32[:2].tolist() == [5, 6]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # (given back)
    gpu.close()


def test_an_event_of_a_failed_job_raises_rather_than_time_out():
    """A queue whose ring is reset alone (the copy engine's, the high-priority gfx ring's, the
    gfx ring's since CP_QUEUE_RESET.Q0) runs on after its job fails. An event of the failed job, waited for after the queue's
    next job ended, answered False, "the timeout ran out", at once and for ever; a
    timestamp of it read the slot's stale value. Both raise the job's GpuError now."""
    gpu = _gpu(KmdParams(cs_check=False, cap_sys_nice=True))  # (it asks for HIGH: CAP_SYS_NICE)
    buf = gpu.alloc(64)
    c = gpu.queue(engine="copy")
    c.emit_raw([0xFFFF_FFF0])  # (no SDMA opcode: the engine stops)
    lost = c.signal()
    with pytest.raises(umd.GpuError):
        c.finish()
    c.write(buf, 0, 9)
    c.finish()  # the queue runs on: its fence passes the failed job's seqno
    with pytest.raises(umd.GpuError, match=r"^GPU error: illegal opcode 0xf0 SUB_OP 0xff at IB\+0x0 \(0x[0-9a-f]+\), "
                                          r"sdma0"):
        lost.wait()
    hi = gpu.queue(priority="high")
    ok = hi.timestamp()
    hi.finish()
    hi.emit_raw([pm4.header(0x7B, 0)])
    ts = hi.timestamp()
    with pytest.raises(umd.GpuError):
        hi.finish()
    hi.write(buf, 4, 8)
    hi.finish()
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b"):
        ts.wait()
    assert ok.wait() and ok.cycles > 0  # (a job before the failed one ended well)
    assert buf.u32[:2].tolist() == [9, 8]
    g = gpu.queue()  # a normal gfx queue: CP queue 0's reset alone
    g.emit_raw([pm4.header(0x7B, 0)])
    gone = g.signal()
    with pytest.raises(umd.GpuError):
        g.finish()
    g.write(buf, 8, 7)
    g.finish()
    with pytest.raises(umd.GpuError, match=r"^GPU error: illegal opcode 0x7b at IB\+0x0 \(0x[0-9a-f]+\), context "):
        gone.wait()
    assert buf.u32[2] == 7
    gpu.close()


def test_a_copy_queues_bad_packet_is_named_from_the_sdmas_table():
    """A copy queue's bad packet was named from the CP's PM4 table by the SDMA's OP: a NOP
    whose COUNT ran past its IB was "bad COUNT in opcode 0x0", a COPY_LINEAR with TMZ set
    "unsupported field value in opcode 0x1", and an SDMA fault in a WRITE_LINEAR's write named
    no packet. Each names its SDMA packet now (the error's opcode_name too)."""
    gpu = _gpu(KmdParams(ban_after_hangs=10))
    buf = gpu.alloc(64)
    q = gpu.queue(engine="copy")
    tmz = sdma.copy_linear(buf.gpu_addr + 32, buf.gpu_addr, 16)
    tmz[0] |= 1 << 18  # TMZ: unsupported here
    for dwords, what in (([0x0010_0000], "bad COUNT in NOP"), (tmz, "unsupported field value in COPY_LINEAR"),
                         (sdma.write_linear(_UNMAPPED, [1]), f"VM fault at {_UNMAPPED:#x} in WRITE_LINEAR (VMID ")):
        q.emit_raw(dwords)
        with pytest.raises(umd.GpuError) as ei:
            q.finish()
        assert str(ei.value).startswith(f"GPU error: {what}"), str(ei.value)
        assert ei.value.opcode_name == what.split(" in ")[1].split()[0]
    gpu.close()


def test_a_job_stuck_in_a_wait_names_the_wait_mem():
    """A gfx job the timer ended in an unsatisfied WAIT_REG_MEM: the message said where
    ("stuck in WAIT_REG_MEM at IB+0x14 (0x...)") but the error's fields had no address
    (offset 0, addr 0), so `command` was None. The KMD now puts the packet's place in them,
    and the UMD names the wait_mem() that recorded it."""
    gpu = _gpu(KmdParams(job_timeout=20_000))
    q, flag = gpu.queue(), gpu.alloc(64)
    q.write(flag, 4, 1)
    q.wait_mem(flag, 0, 1)
    with pytest.raises(umd.GpuError) as ei:
        q.finish()
    e = ei.value
    assert e.code == "TIMEOUT" and e.command == "Queue.wait_mem() #2" and e.info.offset == 0x14
    assert str(e).endswith("(recorded by Queue.wait_mem() #2)")
    gpu.close()


def test_a_buffer_of_a_closed_device_says_so():
    """Device.close frees every buffer: a view the app kept, or its map(), then said "was
    freed (Buffer.free)", a call the app never made. It names the device's close."""
    gpu = _gpu()
    buf = gpu.alloc(64)
    view = buf.u32
    gpu.close()
    with pytest.raises(ValueError, match=re.escape(f"a view of {_named(buf)} (Buffer.map, Buffer.u32) used after the buffer "
                                                   "was freed (its device was closed: Device.close): ")):
        view[0]
    _raises(ValueError, f"map: {_named(buf)} was freed (its device was closed: Device.close)", buf.map)
    gpu = _gpu()
    buf = gpu.alloc(64)
    buf.free()
    _raises(ValueError, f"map: {_named(buf)} was freed (Buffer.free)", buf.map)
    # (u32 said "map: ...", a call the app did not make)
    _raises(ValueError, f"u32: {_named(buf)} was freed (Buffer.free)", lambda: buf.u32)
    gpu.close()


def test_an_event_is_not_a_truth_value():
    """`if ev:` for "has the GPU got there?" was always True, the job not even submitted; an
    Event (a Timestamp too) is no truth value now, naming the two calls that answer."""
    gpu = _gpu()
    q, flag = gpu.queue(), gpu.alloc(64)
    q.wait_mem(flag, 0, 1)
    ev, ts = q.signal(), q.timestamp()
    for e in (ev, ts):
        _raises(TypeError, f"{e!r} is not a truth value: ev.signalled() looks (memory only), ev.wait() waits",
                bool, e)
    assert ev is not None and not ev.signalled()
    flag.u32[0] = 1
    assert ev.wait() and ts.wait()
    gpu.close()


def test_open_names_a_wrong_winsys_and_v1_writes_nothing_empty():
    """umd.open(winsys="x") failed inside the device's bring-up ("'str' object has no
    attribute 'query'"); it is open's TypeError. A version 1 write of no data submitted
    what the queue had recorded (its wait_mem, its signal): it records and submits nothing."""
    kmd_model.bind(RefModel())
    _raises(TypeError, "open: winsys must be a umd.winsys.Winsys (None: the bound render node's), not 'x'",
            umd.open, winsys="x")
    gpu = umd.open(api_version=1)
    q, buf = gpu.queue(), gpu.alloc(64)
    q.wait_mem(buf, 0, 0)
    q.write(buf, 4, [])
    assert q.flushes == 0 and q.calls == 1
    q.write(buf, 4, 1)  # (version 1: submits at once, the wait_mem with it)
    assert q.flushes == 1
    gpu.close()


def _hang_in_a_worker() -> None:
    """A worker process's app: its own device, a packet the CP refuses."""
    kmd_model.bind(RefModel(), KmdParams(cs_check=False))
    gpu = umd.open()
    q = gpu.queue()
    q.emit_raw([pm4.header(0x7B, 0)])
    q.finish()


def test_a_worker_processs_gpu_error_reaches_the_parent():
    """What the pickling is for: concurrent.futures hands a worker's exception back to the
    parent. A GpuError raised there broke the pool instead (BrokenProcessPool: "A process in
    the process pool was terminated abruptly", its unpickling having failed); it arrives as
    itself, its command and info with it."""
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        with pytest.raises(umd.GpuError) as ei:
            pool.submit(_hang_in_a_worker).result(timeout=120)
    e = ei.value
    assert e.command == "Queue.emit_raw() #1" and e.code == "ILLEGAL_OPCODE" and e.info.opcode == 0x7B
