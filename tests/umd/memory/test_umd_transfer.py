"""memcpy in every direction and memset through the DMA engine (umd/queue/transfer.py), checked
against numpy: random sizes 0 … 64 KiB at every alignment, transfers split into several
packets, read-after-write between transfers, and the argument errors. Bodies are
`check_*(dev)` so tests/cosim/test_rtl_drivers.py runs them on the RTL too."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import kmd_model
import umd
from kmd_model import regs
from spec import pm4
from testbench.refmodel import RefModel
from umd.winsys.cmdbuf import Label


def _open(dev, **kw):
    kmd_model.bind(dev, **kw)
    return umd.open(api_version=2)


def check_random_transfers(dev, sizes=None):
    """Random copies, uploads, downloads and fills, 0 … 64 KiB, every alignment mod 8."""
    gpu = _open(dev)
    rng = random.Random(20261129)
    a = gpu.alloc(0x20000, "vram")
    b = gpu.alloc(0x20000, "gtt")
    ref = {id(a): np.zeros(a.size, np.uint8), id(b): np.zeros(b.size, np.uint8)}
    q = gpu.queue()
    if sizes is None:
        sizes = [0, 1, 3, 4, 7, 16, 31, 64, 255, 1000, 4096, 4099, 0x8000 + 5, 0x10000]
        if dev.name == "icarus":  # ~20x slower than Verilator: fewer, but still 0 … 64 KiB
            sizes = [0, 1, 7, 31, 255, 4099, 0x10000]
    for i, size in enumerate(sizes):
        so, do = rng.randrange(0, 0x10000 - 0), rng.randrange(0, 0x10000)
        so, do = so - so % 8 + i % 8, do - do % 8 + (i * 3) % 8
        data = np.frombuffer(rng.randbytes(size), np.uint8)
        q.upload(a, so, data)  # host → device (VRAM)
        ref[id(a)][so:so + size] = data
        q.copy(b, do, a, so, size)  # device → device
        ref[id(b)][do:do + size] = data
        value = rng.getrandbits(32)
        fo = (do + 0x10000 + i) % 0xF000
        fsize = rng.randrange(0, 0x1000)
        if fsize:
            q.fill(b, fo, fsize, value)
            pattern = np.frombuffer(value.to_bytes(4, "little"), np.uint8)
            addr = b.gpu_addr + fo
            ref[id(b)][fo:fo + fsize] = np.resize(np.roll(pattern, -(addr % 4)), fsize)
        got = q.download(a, so, size)  # device → host, flushes and waits
        assert np.array_equal(got, data), f"download of {size} bytes at {so:#x}"
    q.finish()
    assert np.array_equal(b.map(), ref[id(b)]), "GTT buffer differs from numpy"
    assert np.array_equal(q.download(a, 0, a.size), ref[id(a)]), "VRAM buffer differs from numpy"
    gpu.close()


def check_split_and_raw(dev):
    """A transfer larger than one packet is split; a copy reading what a fill just wrote
    in the same submission sees the new bytes (RAW_WAIT). (The RTL happens to finish this
    fill's writes before the copy's reads even without RAW_WAIT, and the model always does:
    check_raw_chain_under_write_latency is the check that needs the bit.)"""
    gpu = _open(dev, cap_perfmon=True)  # (it counts the device's DMA_DATA packets)
    q = gpu.queue(flush_threshold=64)
    q.dma_chunk = 0x300  # split small so the RTL run stays short; the device allows 1 MiB
    a = gpu.alloc(0x2000, "gtt")
    b = gpu.alloc(0x2000, "gtt")
    counters0 = gpu.counters().packets["DMA_DATA"]
    q.fill(a, 0x10, 0x1000, 0xC0FFEE11)
    q.copy(b, 0x7, a, 0x10, 0x1000)  # reads what the fill writes: must wait for it
    q.finish()
    expect = np.resize(np.frombuffer((0xC0FFEE11).to_bytes(4, "little"), np.uint8), 0x1000)
    assert np.array_equal(b.map()[0x7:0x1007], expect)
    assert b.map()[0x6] == 0 and b.map()[0x1007] == 0
    packets = gpu.counters().packets["DMA_DATA"] - counters0
    assert packets == 2 * -(-0x1000 // 0x300), f"{packets} DMA_DATA packets for two 4 KiB transfers in 0x300 chunks"
    gpu.close()


def check_transfer_errors(dev):
    gpu = _open(dev)
    q = gpu.queue()
    a = gpu.alloc(0x100, "gtt")
    with pytest.raises(ValueError, match=r"^copy: dst \[0xf0, 0x110\) is outside the 0x100-byte buffer$"):
        q.copy(a, 0xF0, a, 0, 0x20)
    with pytest.raises(ValueError, match=r"^copy: source \[0x[0-9a-f]+, 0x[0-9a-f]+\) and destination .* overlap$"):
        q.copy(a, 0x10, a, 0x0, 0x20)
    with pytest.raises(ValueError, match=r"^upload: \[0xff, 0x101\) is outside the 0x100-byte buffer$"):
        q.upload(a, 0xFF, b"ab")
    # bytes-like or an array only (a list, or a tuple, is said to be write()'s)
    dwords = ": a list of dwords is np.array(data, '<u4'), or write()'s data"
    for data, kind in (([1, 2], "list" + dwords), ((1, 2), "tuple" + dwords), ("ab", "str"), (7, "int")):
        with pytest.raises(TypeError, match=rf"^upload: data must be bytes-like or a numpy array, not "
                                            rf"{re.escape(kind)}$"):
            q.upload(a, 0, data)
    q.upload(a, 0, bytearray(b"\x01\x02"))
    q.upload(a, 2, memoryview(np.array([0x0403], "<u2")))  # any buffer: its bytes
    q.upload(a, 4, np.array([[5, 6], [7, 8]], np.uint8)[:, 1])  # an array need not be contiguous
    q.finish()
    assert a.map()[:6].tolist() == [1, 2, 3, 4, 6, 8]
    with pytest.raises(ValueError, match=r"^download: size must be >= 0, not -1$"):
        q.download(a, 0, -1)
    q1 = umd.open(api_version=1).queue()
    with pytest.raises(AttributeError, match=r"Queue.copy\(\) is not in API version 1 \(it is in version 2, 3\)"):
        q1.copy(a, 0, a, 0x80, 4)
    gpu.close()


def check_fence_after_dma_sees_the_data(dev):
    """An event signalled after a copy (a RELEASE_MEM behind the DMA_DATA) is written only
    after the copy's last write is answered: whoever sees the event sees the data. On the
    reference model a copy is done before the next packet starts, so this holds there by
    construction; it bites on the RTL (tests/cosim/test_rtl_drivers.py), where the engine runs
    alongside the CP and only the CP's wait for it orders the fence after the data."""
    gpu = _open(dev)
    q = gpu.queue(flush_threshold=64)
    a = gpu.alloc(0x10000, "gtt")
    b = gpu.alloc(0x10000, "gtt")
    a.map()[:] = np.arange(0x10000, dtype=np.uint32).astype(np.uint8)
    q.copy(b, 0x3, a, 0x5, 0xFF00)
    ev = q.signal()
    q.flush()
    assert ev.wait(2_000_000)
    assert np.array_equal(b.map()[0x3:0xFF03], a.map()[0x5:0xFF05])
    gpu.close()


def check_transfers_under_backpressure(dev):
    """The random transfers again with read/write latency and random back-pressure on every
    AXI channel of the memory (the reference model accepts and ignores these settings)."""
    dev.mem_model.configure(rd_latency=23, wr_latency=11, seed=7,
                            stall={"aw": 0.2, "w": 0.3, "b": 0.2, "ar": 0.25, "r": 0.3})
    check_random_transfers(dev, [0, 3, 255, 4099, 0x2000 + 1] if dev.name == "icarus" else None)


def check_raw_chain_under_write_latency(dev):
    """Copies that read what the transfer just before them writes (one submission), with
    reads answered 40 cycles late and W held back half the time: a copy of the last bytes
    another copy writes, and a copy of a fill. Each reads the new bytes only because the
    UMD sets RAW_WAIT and the CP hands it to the engine, which holds the read until the
    earlier writes are answered. On the reference model a transfer is done before the next
    packet starts and memory settings are ignored, so this passes there whatever RAW_WAIT
    says (tests/umd/memory/test_umd_transfer_packets.py checks the bits); it bites on the RTL
    (tests/cosim/test_rtl_drivers.py)."""
    dev.mem_model.configure(rd_latency=40, wr_latency=40, seed=11, stall={"w": 0.5, "aw": 0.3})
    gpu = _open(dev)
    q = gpu.queue(flush_threshold=64)
    a, b, c = (gpu.alloc(0x2000, "gtt") for _ in range(3))
    data = np.random.default_rng(5).integers(0, 256, 0x1000, dtype=np.uint8)
    a.map()[:0x1000] = data
    b.map()[:] = 0xEE  # stale bytes a copy would read without RAW_WAIT
    c.map()[:] = 0xEE
    q.copy(b, 0, a, 0, 0x1000)  # writes b[0, 0x1000), its last bytes last
    q.copy(c, 0, b, 0xFC0, 0x40)  # reads those last bytes
    q.fill(a, 0x1800, 0x40, 0x5A5A_5A5A)
    q.copy(c, 0x100, a, 0x1800, 0x40)  # reads what the fill writes
    q.finish()
    assert np.array_equal(c.map()[:0x40], data[0xFC0:]), "a copy read stale bytes of the copy before it"
    assert (c.map()[0x100:0x140] == 0x5A).all(), "a copy read stale bytes of the fill before it"
    gpu.close()


CHECKS = [check_random_transfers, check_split_and_raw, check_transfer_errors,
          check_fence_after_dma_sees_the_data, check_transfers_under_backpressure,
          check_raw_chain_under_write_latency]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_no_dma_engine():
    gpu = _open(RefModel(dma=False))
    q = gpu.queue()
    a = gpu.alloc(0x100, "gtt")
    with pytest.raises(RuntimeError, match=r"^copy: this device has no DMA engine \(CAPS.DMA = 0\): a copy queue "
                       r"\(Device.queue\(engine='copy'\)\) has the SDMA's$"):
        q.copy(a, 0, a, 0x80, 4)
    assert regs.CAPS.DMA.get(kmd_model.bound().mmio.read(regs.CAPS)) == 0


def _queue_at_its_limit(gpu, hold_cls):
    """A queue with IBs free in its pool (a download records without waiting for one) and
    max_inflight (1) submissions in flight, held by a job that waits until released."""
    q = gpu.queue(flush_threshold=1000, max_inflight=2)
    buf = gpu.alloc(0x100)
    hold = hold_cls()
    for i in range(2):  # two IBs in flight at once, in the pool after
        q.write(buf, 4 * i, i)
        q.flush()
    hold.release()
    q.finish()
    q.max_inflight = 1
    hold = hold_cls()
    q.write(buf, 0, 1)
    q.flush()
    q.timeout = 5000  # (the throttle's bound)
    return q, hold


@pytest.mark.parametrize("before", [True, False], ids=["a_write_before", "nothing_before"])
def test_a_download_whose_flush_times_out_takes_its_copy_back(before):
    """download()'s flush waits at max_inflight and times out: the download raises, and its
    own copy into its staging buffer (which it freed) is taken back, not left recorded for
    the next flush to run into memory nobody reads; what was recorded before it stays and
    runs. (Before, the copy stayed recorded and the next flush ran it: wasted GPU work, and
    the staging memory held until then. Not corruption: a buffer freed while a recorded
    command may use it is reused only once that command's submission has finished.)"""
    from tests.security.security_helpers import Holder

    gpu = _open(RefModel(), job_timeout=1 << 40)
    q, hold = _queue_at_its_limit(gpu, Holder)
    src, dst = gpu.alloc(0x1000), gpu.alloc(0x100)
    src.u32[:] = np.arange(0x400, dtype=np.uint32)
    if not before:  # the download alone recorded: nothing stays
        calls = q.calls
        with pytest.raises(umd.GpuTimeout) as ei:
            q.download(src, 0x100, 0x100)
        assert ei.value.__notes__[-1] == (
            f"download: its own copy (the queue's call #{calls + 1}) is taken back; nothing else was recorded")
        assert q.cmdbuf.commands == 0 and not q.cmdbuf.ibs
        hold.release()
        q.finish()
        assert q.download(src, 0x100, 0x100).view("<u4").tolist() == list(range(0x40, 0x80))
        gpu.close()
        return
    q.write(dst, 0, 0xAB)  # recorded before the download: stays, and runs at the next flush
    calls = q.calls
    with pytest.raises(umd.GpuTimeout) as ei:
        q.download(src, 0x100, 0x100)
    assert ei.value.__notes__[-1] == (
        f"download: its own copy (the queue's call #{calls + 1}) is taken back; the commands recorded before it "
        f"(the queue's calls up to #{calls}) stay recorded: the next flush submits them")
    assert q.cmdbuf.commands == 1 and list(q.cmdbuf.labels.values()) + [
        label for _, label in q.cmdbuf._pending_labels] == [Label(f"Queue.write() #{calls}", calls)]
    recorded = pm4.disassemble(q.cmdbuf.cur, 0)
    assert len(recorded) == 1 and "WRITE_DATA" in recorded[0], recorded  # no DMA_DATA into the staging buffer
    hold.release()
    q.finish()
    assert dst.u32[0] == 0xAB
    # and the download, tried again, returns the bytes
    assert q.download(src, 0x100, 0x100).view("<u4").tolist() == list(range(0x40, 0x80))
    gpu.close()


def test_a_download_interrupted_in_its_flush_takes_its_copy_back(monkeypatch):
    """A ^C while download()'s flush waits at max_inflight: the download raises it, and its
    copy is taken back as at a timeout; the next flush has nothing to submit."""
    from tests.security.security_helpers import Holder

    gpu = _open(RefModel(), job_timeout=1 << 40)
    q, hold = _queue_at_its_limit(gpu, Holder)
    src = gpu.alloc(0x1000)

    def interrupted(what):
        raise KeyboardInterrupt
    monkeypatch.setattr(q, "_wait_oldest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        q.download(src, 0, 0x100)
    monkeypatch.undo()
    assert q.cmdbuf.commands == 0 and not q.cmdbuf.cur and not q.cmdbuf.labels
    hold.release()
    assert q.flush() is None  # (before: the copy into the freed staging buffer was submitted here)
    q.finish()
    gpu.close()
