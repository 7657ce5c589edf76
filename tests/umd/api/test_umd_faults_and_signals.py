"""Edges of the UMD's API the end-to-end tests did not reach, found by the mutation campaign
(docs/verification.md): which call recorded a faulting packet when several IBs of the
failed submission have one at the fault's offset (umd/failures/faults.py); the ^C a flush holds
(umd/signals.py), given to the app's own SIGINT handler as Python would have; and the
survivors of the UMD's queue modules, back in the campaign after mutmut's trampoline was
taught their names (a CS EIO whose context cannot be asked, a download while recorded
uploads hold the GTT, what help() shows, version 1's max_inflight, transfers' names in
their errors)."""

from __future__ import annotations

import signal
import types

import numpy as np
import pytest

from kmd_model.uapi import HwErrorInfo
from spec import pm4
from umd.failures import faults
from umd.signals import deferred_stops

_FAULT = 0x7000_0000  # the faulting access's address
_AT = 0x800  # the faulting packet's offset in its IB (CP_ERROR_OFFSET)


def _queue(*packets, seq: int = 5, dma_chunk: int = 0x1000, max_write_dw: int = 16):
    """A gfx queue as faults.find_command reads it: one submission in flight, whose IBs each
    hold one of `packets` ((dwords, the call that recorded them)) at IB+_AT (the CP latches
    the offset, not which IB). By default a WAIT_REG_MEM that polls elsewhere for the value
    _FAULT, and a WRITE_DATA to just below _FAULT."""
    packets = packets or ((pm4.wait_reg_mem(0x20_0000, _FAULT, 0xFFFF_FFFF, "EQ"), "Queue.wait_mem() #1"),
                          (pm4.write_data(_FAULT - 8, [1, 2, 3]), "Queue.emit_raw() #2"))
    sub = types.SimpleNamespace(seq=seq, ibs=[], labels={})
    for i, (words, label) in enumerate(packets):
        gpu_addr = 0x10_0000 * (i + 1)
        u32 = np.zeros(0x1000 // 4, dtype=np.uint32)
        u32[_AT // 4: _AT // 4 + len(words)] = words
        sub.ibs.append(types.SimpleNamespace(gpu_addr=gpu_addr, u32=u32))
        sub.labels[gpu_addr + _AT] = label
    return types.SimpleNamespace(inflight=[sub], copy_engine=False, cmdbuf=types.SimpleNamespace(max_packet_dw=64),
                                 dma_chunk=dma_chunk, max_write_dw=max_write_dw)


def _fault(addr: int = _FAULT, offset: int = _AT, seq: int = 5, level: str = "IB1") -> HwErrorInfo:
    return HwErrorInfo("VM_FAULT", level, 0x37, "WRITE_DATA", offset, addr, seq, 1, "VM fault")


def _find(q, info: HwErrorInfo):
    return faults.find_command(q, info, q.inflight)  # (the queue's submissions in flight, as a wait's error)


_FAR = (pm4.write_data(_FAULT + 0x10_0000, [1]), "Queue.write() #9")  # (above the fault: reaches nothing)


def test_a_fault_names_the_packet_whose_access_reaches_its_address():
    """Of the IBs' packets at the fault's offset, the one whose address lies a transfer below
    the fault's; a packet's other numbers (the WAIT_REG_MEM's reference value, equal to the
    address here) are not addresses it accesses."""
    assert _find(_queue(), _fault()) == ("Queue.emit_raw() #2", None)
    # a DMA_DATA's source is an address it accesses; a packet that does not decode reaches nothing
    assert _find(_queue(_FAR, (pm4.dma_data(0x20_0000, _FAULT - 8, 64), "Queue.copy() #3")),
                               _fault()) == ("Queue.copy() #3", None)
    assert _find(_queue(([0xFFFF_FFFF, 0, 0], "Queue.emit_raw() #1"), _FAR,
                                      (pm4.write_data(_FAULT - 8, [1]), "Queue.write() #4")),
                               _fault()) == ("Queue.write() #4", None)


@pytest.mark.parametrize("below, reaches", [(0x3FC, True), (0x400, False), (0x4FC, False)])
def test_a_packet_reaches_as_far_as_one_transfer_of_the_queue(below, reaches):
    """One transfer: the larger of a DMA chunk (0x100 bytes here) and a WRITE_DATA's most
    dwords (0x100 of them: 0x400 bytes), from the packet's address up."""
    q = _queue(_FAR, (pm4.write_data(_FAULT - below, [1]), "Queue.write() #2"), dma_chunk=0x100, max_write_dw=0x100)
    command, _ = _find(q, _fault())
    assert command == ("Queue.write() #2" if reaches else None)


def test_a_fault_no_packet_reaches_names_every_candidate():
    assert _find(_queue(), _fault(addr=_FAULT + 0x10_0000)) == (
        None, "the CP latches no IB base, and IB+0x800 of the submission's IBs is Queue.emit_raw() #2 or "
              "Queue.wait_mem() #1")


def test_a_fault_of_a_submission_the_umd_no_longer_holds_or_at_no_packet_says_so():
    assert _find(_queue(seq=4), _fault()) == (
        None, "the UMD no longer holds the failed submission's commands")
    assert _find(_queue(), _fault(offset=_AT + 0x40)) == (
        None, "no packet the UMD recorded starts at IB+0x840")
    assert _find(_queue(), _fault(level="RING")) == (
        None, "the fault is in the kernel's ring packets, which no API call recorded")


def test_a_held_ctrl_c_reaches_the_apps_handler_with_its_frame():
    """The app's own SIGINT handler gets, once the flush's block ends, what Python would
    have given it: the signal number and the frame the ^C interrupted."""
    got = []
    prev = signal.signal(signal.SIGINT, lambda signum, frame: got.append((signum, frame)))
    try:
        with deferred_stops():
            signal.raise_signal(signal.SIGINT)
            assert not got  # held
        assert len(got) == 1 and got[0][0] == signal.SIGINT and isinstance(got[0][1], types.FrameType)
    finally:
        signal.signal(signal.SIGINT, prev)


def test_an_alarm_is_held_as_a_ctrl_c_is_and_both_come_in_order():
    """SIGALRM (`gpucosim run --timeout`'s stop) is held too: held for SIGINT alone, a
    timeout between the CS and its bookkeeping lost the submission. Each handler runs once
    the block ends, in the order the signals came, the second even when the first raises."""
    got = []

    def alarm(signum, frame):
        got.append(signum)
        raise TimeoutError

    prev = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    prev_alarm = signal.signal(signal.SIGALRM, alarm)
    try:
        with pytest.raises(TimeoutError):
            with deferred_stops():
                signal.raise_signal(signal.SIGALRM)
                signal.raise_signal(signal.SIGINT)
                signal.raise_signal(signal.SIGALRM)  # (one signal pending is one delivery)
                assert not got
        assert got == [signal.SIGALRM, signal.SIGINT]
        assert signal.getsignal(signal.SIGALRM) is alarm
    finally:
        signal.signal(signal.SIGINT, prev)
        signal.signal(signal.SIGALRM, prev_alarm)


@pytest.mark.parametrize("handler", [signal.SIG_IGN, signal.SIG_DFL], ids=["ignored", "default"])
def test_a_sigint_python_does_not_handle_is_left_alone(handler):
    """SIG_IGN and SIG_DFL are not Python handlers: nothing to defer, nothing replaced."""
    prev = signal.signal(signal.SIGINT, handler)
    try:
        with deferred_stops():
            assert signal.getsignal(signal.SIGINT) is handler
        assert signal.getsignal(signal.SIGINT) is handler
    finally:
        signal.signal(signal.SIGINT, prev)


def test_a_cs_eio_whose_context_cannot_be_asked_is_a_lost_device(monkeypatch):
    """A CS's EIO is a banned context's or a lost device's, and the context's QUERY_STATE
    tells them apart; a query that fails too (the device gone under it) is the device's:
    DeviceLost itself, not QueueBanned (which code written for DeviceLost catches as well,
    so only the type tells)."""
    import errno

    import kmd_model
    import umd
    from kmd_model.uapi import KmdError
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    gpu = umd.open()
    q, buf = gpu.queue(), gpu.alloc(64)

    def lost(*args):
        raise KmdError(errno.EIO, "the device is wedged")

    monkeypatch.setattr(q.ws, "cs_submit", lost)
    monkeypatch.setattr(q.ws, "ctx_query", lost)
    q.write(buf, 0, 1)
    with pytest.raises(umd.DeviceLost, match=r"^flush: the device is wedged$") as ei:
        q.flush()
    assert type(ei.value) is umd.DeviceLost
    monkeypatch.undo()
    gpu.close()


def test_a_download_while_recorded_uploads_hold_the_gtt_flushes_them_first():
    """Uploads recorded since the last flush hold their staging buffers until it: a download
    whose staging buffer does not fit then submits them and waits for them, as an upload's
    does, where it raised OutOfMemory with nothing of the queue's in flight."""
    import kmd_model
    import umd
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    gpu = umd.open()
    q, chunk = gpu.queue(), 4 << 20
    n = (gpu.memory().gtt.largest_free - (2 << 20)) // chunk  # their staging leaves less than a chunk free
    big = gpu.alloc((n + 1) * chunk, "vram")
    for i in range(n):
        q.upload(big, i * chunk, np.full(chunk, i + 1, np.uint8))
    assert n >= 2 and q.flushes == 0 and gpu.memory().gtt.largest_free < chunk
    assert (q.download(big, (n - 1) * chunk, chunk) == n).all()
    assert q.flushes >= 1
    gpu.close()


def test_what_an_old_keyword_default_shows_and_v1_queues_keep_max_inflight():
    """help(Event.wait) shows the old keyword's default as `<not given>` (not an object's
    address); API version 1's queue() passes max_inflight on, as version 2's does."""
    import inspect

    import kmd_model
    import umd
    from testbench.refmodel import RefModel

    assert str(inspect.signature(umd.Event.wait).parameters["timeout_cycles"]).endswith(" = <not given>")
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=1)
    assert gpu.queue(max_inflight=2).max_inflight == 2
    gpu.close()


def test_transfers_name_themselves_in_their_errors():
    """A download whose packet faults is named by its call, as every command is; an upload
    that can get no staging buffer says so; emit_raw's bytes that are not whole dwords name
    the rule."""
    import kmd_model
    import umd
    from kmd_model.uapi import VaOp
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    gpu = umd.open(pools=False)  # (every buffer a BO of its own: unmapped alone below)
    src, dst = gpu.alloc(64), gpu.alloc(1 << 20, "vram")
    gpu.ws.gem_va(src.handle, VaOp.UNMAP, src.gpu_addr, src.size, 0)  # behind the UMD's back
    q = gpu.queue(engine="copy")  # (the copy engine checks its own addresses: a VM fault)
    with pytest.raises(umd.GpuError) as ei:
        q.download(src, 0, 64)
    assert ei.value.code == "VM_FAULT" and ei.value.command == "Queue.download() #1", str(ei.value)
    q = gpu.queue()
    with pytest.raises(ValueError, match=r"^emit_raw: bytes dwords must be a non-empty multiple of 4 bytes, not 3$"):
        q.emit_raw(b"abc")
    held = []
    while gpu.memory().gtt.largest_free >= 1 << 20:  # no room left for a 1 MiB staging buffer
        held.append(gpu.alloc(gpu.memory().gtt.largest_free - (64 << 10), "gtt"))
    with pytest.raises(umd.OutOfMemory, match=r"^upload: staging buffer: no memory for 0x100000 bytes on queue "
                                              r"\(context \d+\), with nothing of its own in flight"):
        q.upload(dst, 0, bytes(1 << 20))
    for b in held:
        b.free()
    gpu.close()


def test_an_async_flush_refused_for_its_guilty_context_says_so():
    """A flush of a queue whose context a full reset left guilty is refused; an async
    queue's thread makes that CS, and its GpuError says it was refused (`refused`, "make a
    new queue") as a synchronous flush's does."""
    import kmd_model
    import umd
    from kmd_model.core.kmd import KmdParams
    from testbench.refmodel import RefModel

    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    full_reset_for_ring_0(kmd_model.bind(RefModel(), KmdParams(cs_check=False)))
    gpu = umd.open(api_version=3)
    buf = gpu.alloc(64)
    q = gpu.queue(async_submit=True)
    q.emit_raw([pm4.header(0x7B, 0), 0])
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b") as ei:
        q.finish()
    assert not ei.value.refused
    q.write(buf, 0, 1)
    q.flush()
    with pytest.raises(umd.GpuError, match="illegal opcode 0x7b") as ei:
        q.finish()
    assert ei.value.refused is True and str(ei.value).endswith("takes no more work: make a new queue")
    gpu.close()
