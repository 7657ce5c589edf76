"""What the UMD's transfers submit: the DMA_DATA packets, read back from the IBs of each CS
(CHAINs followed), with their RAW_WAIT bits.

On the reference model a transfer completes before the next packet starts, so a missing
RAW_WAIT changes no byte there: the data checks of test_umd_transfer.py cannot see it.
Whether the engine really needs the bit is the RTL's to show (test_umd_transfer.py's
checks run on the RTL in test_rtl_drivers.py, under memory back-pressure). What the model
can show is here: the UMD sets RAW_WAIT exactly on the copies that read bytes an earlier
transfer of the same submission writes, at the boundaries of those ranges, on every
packet of a split transfer, and not across a flush.
"""

from __future__ import annotations

import numpy as np

import kmd_model
import umd
from kmd_model.uapi import Request
from spec import packets, pm4
from testbench.refmodel import RefModel


class Submitted:
    """The DMA_DATA packets of every CS, as (dst, src, bytes, fill, raw_wait); `packets`:
    every packet of every CS, decoded (CHAINs followed)."""

    def __init__(self, kmd):
        self.kmd = kmd
        self.cs: list[list[tuple]] = []
        self.packets: list = []
        kmd.trace_hooks.append(self._hook)

    def _hook(self, rec) -> None:
        if rec.request != Request.CS.name or rec.error is not None:
            return
        f = self.kmd.files[rec.fd]
        out = []
        for ch in rec.args.chunks:
            if hasattr(ch, "size_dw"):
                va = ch.gpu_addr
                if ch.handle:
                    m = next(m for m in f.vm.maps if m.bo is f.handles[ch.handle])
                    va = m.va + ch.offset - m.offset
                out += self._walk(f.vm, va, ch.size_dw)
        self.cs.append(out)

    def _walk(self, vm, va: int, size: int) -> list[tuple]:
        """The packets from `va` on, CHAINs followed (the addresses are the file's VAs)."""
        out = []
        while True:
            addr = vm.translate(va, 4 * size)
            words = self.kmd.mem32[addr // 4: addr // 4 + size].tolist()
            nxt = None
            for p in pm4.decode_stream(words):
                assert p.ok, p
                self.packets.append(p)
                if p.name == "DMA_DATA":
                    f = p.fields
                    out.append((f["DST_ADDR_LO"] | f["DST_ADDR_HI"] << 32, f["SRC_ADDR_LO"] | f["SRC_ADDR_HI"] << 32,
                                f["BYTE_COUNT"], f["SRC_SEL"] == packets.DMA_DATA.field("SRC_SEL").values["DATA"],
                                f["RAW_WAIT"]))
                elif p.name == "INDIRECT_BUFFER" and p.fields["CHAIN"]:
                    nxt = (p.fields["IB_BASE_LO"] << 2 | p.fields["IB_BASE_HI"] << 32, p.fields["IB_SIZE"])
            if nxt is None:
                return out
            va, size = nxt


def test_raw_wait_exactly_where_a_copy_reads_what_was_written():
    kmd = kmd_model.bind(RefModel(dma=True))
    seen = Submitted(kmd)
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1000)
    a, b, c, d, e = (gpu.alloc(0x1000, "gtt") for _ in range(5))
    c.map()[:] = np.arange(0x1000, dtype=np.uint32).astype(np.uint8)
    A = a.gpu_addr
    q.fill(a, 0x10, 0x100, 0x11223344)  # writes [A+0x10, A+0x110)
    q.copy(b, 0x000, a, 0x010, 0x20)  # reads the fill's first bytes: RAW
    q.copy(b, 0x100, a, 0x110, 0x10)  # starts just past the fill: no RAW
    q.copy(b, 0x200, a, 0x10F, 1)  # the fill's last byte: RAW
    q.copy(b, 0x300, a, 0x000, 0x10)  # ends just before the fill: no RAW
    q.copy(b, 0x400, c, 0x000, 0x40)  # nothing wrote c: no RAW
    q.copy(d, 0x000, b, 0x01F, 0x2)  # reads what the first copy wrote ([B, B+0x20)): RAW
    q.upload(e, 0x80, bytes(range(64)))  # a copy from a staging buffer into e
    q.copy(d, 0x100, e, 0x0BF, 0x1)  # the upload's last byte: RAW
    q.finish()
    want = [
        (A + 0x10, 0x11223344, 0x100, True, 0),
        (b.gpu_addr, A + 0x10, 0x20, False, 1),
        (b.gpu_addr + 0x100, A + 0x110, 0x10, False, 0),
        (b.gpu_addr + 0x200, A + 0x10F, 1, False, 1),
        (b.gpu_addr + 0x300, A, 0x10, False, 0),
        (b.gpu_addr + 0x400, c.gpu_addr, 0x40, False, 0),
        (d.gpu_addr, b.gpu_addr + 0x1F, 2, False, 1),
    ]
    got = seen.cs[-1]
    assert got[:len(want)] == want
    upload, last = got[len(want):]
    assert upload[0] == e.gpu_addr + 0x80 and upload[2:] == (64, False, 0)  # from staging: nothing wrote it
    assert last == (d.gpu_addr + 0x100, e.gpu_addr + 0xBF, 1, False, 1)
    # the data, for good measure
    fill = np.resize(np.frombuffer((0x11223344).to_bytes(4, "little"), np.uint8), 0x100)
    assert np.array_equal(b.map()[:0x20], fill[:0x20]) and b.map()[0x200] == fill[0xFF]
    assert d.map()[0x100] == 63
    # a flush ends the submission (its fence waits for every transfer): no RAW after it
    q.copy(b, 0x800, a, 0x10, 0x20)
    q.finish()
    assert seen.cs[-1] == [(b.gpu_addr + 0x800, A + 0x10, 0x20, False, 0)]
    gpu.close()


def test_raw_wait_on_every_packet_of_a_split_copy():
    kmd = kmd_model.bind(RefModel(dma=True))
    seen = Submitted(kmd)
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1000)
    q.dma_chunk = 0x100
    a, b = gpu.alloc(0x1000, "gtt"), gpu.alloc(0x1000, "gtt")
    q.fill(a, 0xFF0, 0x10, 7)
    q.copy(b, 0, a, 0xC00, 0x400)  # 4 packets; the copy as a whole reads the fill's bytes
    q.copy(a, 0, b, 0x800, 0x300)  # 3 packets; reads nothing written before: none of them
    q.finish()
    got = seen.cs[-1]
    assert [(n, raw) for _, _, n, _, raw in got] == [(0x10, 0)] + [(0x100, 1)] * 4 + [(0x100, 0)] * 3
    assert [src for _, src, _, _, _ in got[1:5]] == [a.gpu_addr + 0xC00 + 0x100 * i for i in range(4)]
    gpu.close()


def test_a_gfx_queue_splits_transfers_at_the_devices_dma_limit():
    """A graphics queue's DMA_DATA moves at most DevInfo.dma_max_bytes (CAPS.DMA_MAX_LOG2, 1 MiB
    on the model), not the copy engine's 4 MiB COPY_LINEAR limit: one byte over is a second
    packet, and the CS checker would refuse a larger BYTE_COUNT."""
    kmd = kmd_model.bind(RefModel(dma=True))
    seen = Submitted(kmd)
    gpu = umd.open(api_version=2)
    lim = gpu.info().dma_max_bytes
    assert lim == 1 << 20
    q = gpu.queue()
    a, b = gpu.alloc(lim + 0x1000, "gtt"), gpu.alloc(lim + 0x1000, "gtt")
    q.fill(a, 0, lim + 0x100, 0x5A5A5A5A)
    q.copy(b, 0, a, 0, lim + 4)
    q.finish()
    got = [(n, fill) for cs in seen.cs for _, _, n, fill, _ in cs]
    assert got == [(lim, 1), (0x100, 1), (lim, 0), (4, 0)], got
    assert (b.u32[:(lim + 4) // 4] == 0x5A5A5A5A).all()
    gpu.close()


def test_the_umds_own_packets_are_amds():
    """What the UMD records besides transfers, as AMD's drivers emit it: WRITE_DATA to
    memory with WR_CONFIRM (amdgpu's IB test, Mesa's si_cp_write_data: AMD's CP moves on
    before an unconfirmed write lands; this device always confirms, so only the bit can
    show it), chained IBs with CHAIN and VALID (Mesa's S_3F2_CHAIN(1) | S_3F2_VALID(1)),
    WAIT_REG_MEM with the API's poll interval (16 unless given)."""
    kmd = kmd_model.bind(RefModel())
    seen = Submitted(kmd)
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1000, ib_size_dw=64)
    buf = gpu.alloc(0x1000)
    for i in range(20):  # more than one 64-dword IB holds: chains
        q.write(buf, 4 * i, [i, i + 1])
    q.wait_mem(buf, 0, 0)
    q.wait_mem(buf, 4, 1, poll_interval=4)
    q.finish()
    by = {}
    for p in seen.packets:
        by.setdefault(p.name, []).append(p.fields)
    assert len(by["WRITE_DATA"]) == 20 and all(
        (f["DST_SEL"], f["WR_CONFIRM"]) == (packets.WRITE_DATA.field("DST_SEL").values["MEMORY"], 1)
        for f in by["WRITE_DATA"])
    chains = [f for f in by["INDIRECT_BUFFER"] if f["CHAIN"]]
    assert chains and all(f["VALID"] == 1 for f in chains)
    assert [f["POLL_INTERVAL"] for f in by["WAIT_REG_MEM"]] == [16, 4]


def test_a_write_fills_each_packet_as_far_as_an_ib_allows():
    """A long write is split into WRITE_DATA packets each as large as an IB takes beside its
    chain (4 dwords of header, control and address, then data): one dword more than that
    is a second packet."""
    kmd = kmd_model.bind(RefModel())
    seen = Submitted(kmd)
    gpu = umd.open(api_version=2)
    q = gpu.queue(flush_threshold=1000, ib_size_dw=64)
    n = q.cmdbuf.max_packet_dw - 4
    buf = gpu.alloc(0x1000)
    for k in (n, n + 1):
        seen.packets.clear()
        q.write(buf, 0, list(range(k)))
        q.finish()
        assert [len(p.data) for p in seen.packets if p.name == "WRITE_DATA"] == ([n] if k == n else [n, 1])
        assert buf.u32[:k].tolist() == list(range(k))
