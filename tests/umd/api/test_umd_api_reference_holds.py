"""docs/api.md's attribute tables, as an outside app writer reads them, hold: each test takes
the one-line meanings of a class's attributes (umd/'s docstrings) that no other test checks
and does what they say. test_umd_api_reference.py checks the page's shape."""

from __future__ import annotations

import pytest

import kmd_model
import umd
from kmd_model.uapi import Domain, HwIp
from spec.sdma import packets as sdma
from testbench.refmodel import RefModel


def _gpu(api_version: int = umd.LATEST, **model) -> umd.Device:
    kmd_model.bind(RefModel(**model), cap_perfmon=True)
    return umd.open(api_version=api_version)


def test_queue_settings_are_the_tables_defaults():
    """flush_threshold: "16 in version 1, 64 from version 2"; max_inflight: "32 by default";
    timeout: DEFAULT_TIMEOUT; flush_dwords: None; dma_chunk: "from 1 to the engine's limit,
    its default" (DEV_INFO.dma_max_bytes on gfx, an SDMA packet's most on copy); engine,
    copy_engine, ip_type (GFX or DMA), priority; ctx_id a KMD context's id."""
    for version, threshold in ((1, 16), (2, 64), (3, 64)):
        gpu = _gpu(version)
        q = gpu.queue()
        assert (q.flush_threshold, q.max_inflight, q.timeout, q.flush_dwords) == \
            (threshold, 32, umd.DEFAULT_TIMEOUT, None), version
        gpu.close()
    gpu = _gpu()
    g, c = gpu.queue(), gpu.queue(engine="copy")
    assert (g.engine, g.copy_engine, g.ip_type, g.priority) == ("gfx", False, HwIp.GFX, "normal")
    assert (c.engine, c.copy_engine, c.ip_type, c.priority) == ("copy", True, HwIp.DMA, "normal")
    assert 0 < g.ctx_id != c.ctx_id > 0
    for q, top in ((g, gpu.dev_info.dma_max_bytes), (c, sdma.MAX_COPY_BYTES)):
        assert q.dma_chunk == top > 0
        for v in (1, top):
            q.dma_chunk = v
            assert q.dma_chunk == v
        for v in (0, top + 1):
            with pytest.raises(ValueError, match=r"^Queue.dma_chunk must be in \[1, "):
                q.dma_chunk = v
    gpu.close()


def test_has_dma_a_copy_queue_always():
    """has_dma: "a copy queue always, a gfx queue when the CP has a DMA engine
    (DEV_INFO.has_dma); without it fill is dword-aligned WRITE_DATA"; dma_chunk is 0 on
    such a gfx queue, which takes no value; the copy queue fills any offset."""
    gpu = _gpu(dma=False)
    g, c = gpu.queue(), gpu.queue(engine="copy")
    assert (gpu.dev_info.has_dma, g.has_dma, c.has_dma) == (False, False, True)
    assert (g.dma_chunk, c.dma_chunk) == (0, sdma.MAX_COPY_BYTES)
    with pytest.raises(ValueError, match=r"^Queue.dma_chunk: this queue has no DMA engine"):
        g.dma_chunk = 1
    buf = gpu.alloc(0x100)
    with pytest.raises(ValueError, match=r"offset must be a non-negative multiple of 4"):
        g.fill(buf, 1, 4, 0xFF)
    c.fill(buf, 1, 5, 0x0403_0201)
    c.finish()
    assert buf.map()[:8].tolist() == [0, 2, 3, 4, 1, 2, 0, 0]  # byte a gets byte (a mod 4) of the value
    gpu.close()


@pytest.mark.parametrize("engine", ["gfx", "copy"])
def test_max_write_dw_is_one_write_packets_most(engine):
    """max_write_dw: "the most data dwords one write packet carries ... write() splits longer
    data": max_write_dw dwords are one packet, one more are two (each packet carries its
    call's label; a gate keeps the submission in flight, so the queue still has them); both
    land whole."""
    gpu = _gpu()
    q = gpu.queue(engine=engine, flush_threshold=100)
    n = q.max_write_dw
    gate, buf = gpu.alloc(0x1000), gpu.alloc(4 * (2 * n + 1))
    q.wait_mem(gate, 0, 1)
    q.write(buf, 0, list(range(1, n + 1)))
    q.write(buf, 4 * n, list(range(n + 1, 2 * n + 2)))
    q.flush()
    labels = [v.text for v in q.inflight[-1].labels.values()]
    assert (labels.count("Queue.write() #2"), labels.count("Queue.write() #3")) == (1, 2), labels
    gate.u32[0] = 1
    q.finish()
    assert buf.u32.tolist() == list(range(1, 2 * n + 2))
    gpu.close()


def test_slab_and_bo_offset():
    """Buffer.slab: "the slab it was carved from (a buffer of 16 KiB or less), or None";
    bo_offset: "0 for a BO of its own, its entry's in a slab's": gpu_addr is the BO's
    address plus bo_offset, handle the BO's; size "as alloc() was asked", domain the
    uAPI's Domain. With pools=False no buffer is a slab's."""
    gpu = _gpu()
    small, edge, big = gpu.alloc(100), gpu.alloc(16 << 10), gpu.alloc((16 << 10) + 1, "vram")
    assert small.slab is not None and edge.slab is not None and big.slab is None
    assert big.bo_offset == 0 and big.gpu_addr == big.backing.va
    entries = [gpu.alloc(100) for _ in range(3)]
    assert any(b.bo_offset for b in entries)  # entries of one slab, at their own offsets
    for b in [small, edge, big, *entries]:
        assert b.gpu_addr == b.backing.va + b.bo_offset and b.handle == b.backing.handle
    assert (small.size, big.size, small.domain, big.domain) == (100, (16 << 10) + 1, Domain.GTT, Domain.VRAM)
    gpu.close()
    kmd_model.bind(RefModel())
    gpu = umd.open(pools=False)
    bufs = [gpu.alloc(n) for n in (64, 100, 16 << 10)]
    assert all(b.slab is None and b.bo_offset == 0 for b in bufs)
    gpu.close()


def test_a_timestamp_is_read_once_signalled_until_its_slot_is_taken():
    """Timestamp.cycles: "ValueError until it is signalled (wait(), or signalled() True),
    and once QBO_TS_SLOTS later timestamps of its queue have taken its slot again"; value is
    the same; Event.value is the timeline value the queue's events count up."""
    gpu = _gpu()
    q = gpu.queue(flush_threshold=1 << 20)
    t = q.timestamp()
    with pytest.raises(ValueError, match=r"^timestamp: not written yet"):
        t.cycles
    q.flush()
    while not t.signalled():
        pass
    assert t.cycles == t.value > 0  # no wait(): signalled() saw it
    e1, e2 = q.signal(), q.signal()
    assert e2.value == e1.value + 1 and e2.wait()
    from umd.queue import QBO_TS_SLOTS
    later = [q.timestamp() for _ in range(QBO_TS_SLOTS - 1)]
    q.finish()
    assert t.cycles <= later[-1].cycles  # 503 more: its slot is still its own
    q.timestamp()
    q.finish()
    with pytest.raises(ValueError, match=r"^timestamp: its slot was taken again"):
        t.cycles
    gpu.close()


def test_closed_is_set_by_close_not_by_the_driver():
    """closed: "True once closed (its close(), or a queue's device's close()); every entry
    point but close() then raises ValueError naming the call. A file the driver closed (its
    unload: every call is DeviceLost) leaves it open until close()" (it said "or the
    driver's: DeviceLost": a Device the driver's unload had lost was not closed, and its
    calls raised DeviceLost, not ValueError)."""
    gpu = _gpu()
    q = gpu.queue()
    kmd_model.unbind()
    assert not gpu.closed and not q.closed
    with pytest.raises(umd.DeviceLost, match=r"^flush: this Device's file was closed by the driver"):
        q.flush()
    with pytest.raises(umd.DeviceLost, match=r"^alloc: this Device's file was closed by the driver"):
        gpu.alloc(64)
    gpu.close()
    assert gpu.closed and q.closed
    with pytest.raises(ValueError, match=r"^alloc: the device is closed"):
        gpu.alloc(64)
    with pytest.raises(ValueError, match=r"^flush: the queue is closed"):
        q.flush()
