"""The SDMA copy engine against docs/hardware.md, "The SDMA copy engine": packets, trap
interrupt, polls, every error class with its exact registers, queue reset, and the
independence of the CP and SDMA queues.

Each `check_*(dev)` runs on the reference model here and on the RTL (rtl/sdma/) under each
simulator in tests/cosim/test_rtl_sdma.py: the same bodies, programming the device over MMIO
directly (no KMD), waiting for the engines by their STATUS registers."""

from __future__ import annotations

import random

import pytest

from kmd_model import regs
from kmd_model.device import BusError
from kmd_model.regs import CpError
from spec import ih as ih_spec
from spec import pm4, sdma
from spec.sdma import packets as sdma_packets
from testbench.refmodel import RefModel

RING, RPTR_WB, IH, DATA, CP_RING, IB = 0x10000, 0x8000, 0x20000, 0x40000, 0x30000, 0x50000
SETTLE_CYCLES = 20_000  # far more than any of these streams takes on the RTL


class Rig:
    """A device with its IH ring, the SDMA ring (2^8 dwords) and the CP ring programmed
    directly over MMIO (no KMD)."""

    def __init__(self, dev):
        self.dev = d = dev
        w = d.mmio_write32
        w(regs.IH_BASE_LO.addr(), IH >> 8)
        w(regs.IH_SIZE.addr(), 8)
        w(regs.IH_CNTL.addr(), regs.IH_CNTL.ENABLE.mask)
        w(regs.SDMA_RB_BASE_LO.addr(), RING >> 8)
        w(regs.SDMA_RB_RPTR_ADDR_LO.addr(), RPTR_WB)
        w(regs.SDMA_RB_CNTL.addr(), regs.SDMA_RB_CNTL.RB_ENABLE.put(1) | regs.SDMA_RB_CNTL.RB_SIZE.put(8)
          | regs.SDMA_RB_CNTL.RPTR_WRITEBACK_ENABLE.put(1))
        w(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.TRAP_ENABLE.mask)
        w(regs.RB_BASE_LO.addr(), CP_RING >> 8)
        w(regs.RB_SIZE.addr(), 7)
        w(regs.RB_CNTL.addr(), regs.RB_CNTL.ENABLE.mask)
        self.wptr = self.cp_wptr = 0
        self.m32 = d.mem.view("<u4")

    def submit(self, words, settle=True):
        for x in words:
            self.m32[(RING + (self.wptr & 0x3FF)) // 4] = x
            self.wptr += 4
        self.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), self.wptr)
        if settle:
            self.settle()

    def cp(self, words):
        for x in words:
            self.m32[(CP_RING + 4 * (self.cp_wptr & 0xFF)) // 4] = x
            self.cp_wptr += 1
        self.dev.mmio_write32(regs.RB_DOORBELL.addr(), self.cp_wptr)
        self.until(lambda: regs.STATUS.IDLE.get(self.r(regs.STATUS)), "the CP idle")

    def until(self, cond, what, cycles=SETTLE_CYCLES):
        end = self.dev.now() + cycles
        while not cond():
            assert self.dev.now() < end, f"{what}: not after {cycles} cycles"
            self.dev.delay(16)

    def settle(self):
        """Until the SDMA queue is idle (its work done, or stopped by an error)."""
        self.until(lambda: regs.SDMA_STATUS.IDLE.get(self.r(regs.SDMA_STATUS)), "SDMA_STATUS.IDLE")

    def r(self, reg):
        return self.dev.mmio_read32(reg.addr())

    def ih(self):
        n = self.r(regs.IH_WPTR) // 32
        return [ih_spec.decode(self.m32[IH // 4 + 8 * i: IH // 4 + 8 * i + 8].tolist()) for i in range(n)]

    def error(self):
        e = regs.SDMA_ERROR.decode(self.r(regs.SDMA_ERROR))
        return (CpError(e["CODE"]).name, e["LEVEL"], e["OP"], self.r(regs.SDMA_ERROR_ADDR_LO), self.r(regs.SDMA_ERROR_OFFSET))


def check_sdma_packets_copy_write_fill_fence_trap(dev):
    g = Rig(dev)
    g.dev.mem[DATA:DATA + 64] = range(64)
    g.submit(sdma.copy_linear(DATA + 0x101, DATA + 3, 37) + sdma.write_linear(DATA + 0x200, [7, 8, 9])
             + sdma.constant_fill(DATA + 0x301, 0x44332211, 6) + sdma.pad(3)
             + sdma.fence(DATA + 0x400, 0xF00D) + sdma.trap(int_context=0x123))
    mem = g.dev.mem
    assert bytes(mem[DATA + 0x101:DATA + 0x101 + 37]) == bytes(range(3, 40))
    assert mem[DATA + 0x100] == 0 and mem[DATA + 0x101 + 37] == 0
    assert g.m32[(DATA + 0x200) // 4:(DATA + 0x20C) // 4].tolist() == [7, 8, 9]
    assert bytes(mem[DATA + 0x300:DATA + 0x308]) == bytes([0, 0x22, 0x33, 0x44, 0x11, 0x22, 0x33, 0])
    assert g.m32[(DATA + 0x400) // 4] == 0xF00D
    (e,) = g.ih()
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"]) == (ih_spec.Client.SDMA0, ih_spec.Source.SDMA_TRAP, 0x123)
    assert g.r(regs.SDMA_RB_RPTR) == g.wptr == g.m32[RPTR_WB // 4] and g.r(regs.SDMA_RB_WPTR) == g.wptr
    st = regs.SDMA_STATUS.decode(g.r(regs.SDMA_STATUS))
    assert st["IDLE"] == 1 and st["ERROR"] == 0 and st["RB_EMPTY"] == 1
    pk = [g.dev.mmio_read32(regs.PERF_SDMA_PACKETS.addr(p.index)) for p in sdma_packets.SDMA_PACKETS]
    assert pk == [1, 1, 1, 0, 1, 1, 0, 1]
    assert g.r(regs.PERF_SDMA_BYTES_WRITTEN) == 37 + 6
    n = len(sdma.copy_linear(0, 0, 1) + sdma.write_linear(0, [7, 8, 9]) + sdma.constant_fill(0, 0, 1) + sdma.pad(3)
            + sdma.fence(0, 0) + sdma.trap())
    assert g.r(regs.PERF_SDMA_DWORDS_FETCHED) == n
    assert regs.QUEUE_CAPS.SDMA.get(g.r(regs.QUEUE_CAPS)) == 1


def check_sdma_trap_disabled_writes_no_entry_and_ib_runs_with_its_vmid(dev):
    g = Rig(dev)
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), 0)
    ib = sdma.write_linear(DATA, [0xAB]) + sdma.pad(3)
    g.m32[IB // 4:IB // 4 + len(ib)] = ib
    g.submit(sdma.indirect_buffer(IB, len(ib)) + sdma.trap())
    assert g.m32[DATA // 4] == 0xAB and g.ih() == []
    assert g.r(regs.SDMA_RB_RPTR) == g.wptr == g.m32[RPTR_WB // 4]
    assert g.dev.mmio_read32(regs.PERF_SDMA_PACKETS.addr(sdma_packets.INDIRECT_BUFFER.index)) == 1


def check_sdma_long_write_and_copy_cross_blocks_and_pages(dev):
    """WRITE_LINEAR over several 32-byte blocks from an odd dword, a copy and a fill across a
    4 KiB boundary at odd byte offsets."""
    g = Rig(dev)
    data = [0x1000 + i for i in range(21)]
    src = 0x60000 + 0xFF5
    g.dev.mem[src:src + 300] = [(7 * i + 3) & 0xFF for i in range(300)]
    g.submit(sdma.write_linear(DATA + 0x14, data) + sdma.copy_linear(0x70000 + 0xFE3, src, 300)
             + sdma.constant_fill(0x80000 + 0xFFE, 0xA1B2C3D4, 9))
    assert g.m32[(DATA + 0x14) // 4:(DATA + 0x14) // 4 + 21].tolist() == data
    assert g.m32[(DATA + 0x10) // 4] == 0 and g.m32[(DATA + 0x14) // 4 + 21] == 0
    assert bytes(g.dev.mem[0x70000 + 0xFE3:0x70000 + 0xFE3 + 300]) == bytes((7 * i + 3) & 0xFF for i in range(300))
    assert bytes(g.dev.mem[0x80000 + 0xFFE:0x80000 + 0x1007]) == bytes([0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0xA1, 0xD4, 0xC3,
                                                                        0xB2])
    assert g.r(regs.SDMA_ERROR) == 0 and g.r(regs.SDMA_RB_RPTR) == g.wptr


def check_sdma_poll_waits_for_the_cp_and_times_out_with_finite_retries(dev):
    g = Rig(dev)
    g.submit(sdma.poll_regmem(DATA, 5, 0xFFFFFFFF, "EQ", interval=1) + sdma.fence(DATA + 4, 1), settle=False)
    g.until(lambda: regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS)), "SDMA_STATUS.WAITING")
    assert g.m32[(DATA + 4) // 4] == 0 and not regs.SDMA_STATUS.IDLE.get(g.r(regs.SDMA_STATUS))
    g.cp(pm4.write_data(DATA, [5]))  # the CP releases the copy engine
    g.settle()
    assert g.m32[(DATA + 4) // 4] == 1 and not regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS))
    t0 = g.dev.now()
    g.submit(sdma.poll_regmem(DATA + 8, 1, 1, "EQ", interval=2, retry_count=3) + sdma.fence(DATA + 12, 2),
             settle=False)
    g.dev.delay(3 * 32 - 40)
    assert g.m32[(DATA + 12) // 4] == 0
    g.settle()
    assert g.m32[(DATA + 12) // 4] == 2  # gave up after 4 reads, 3 intervals of 32 cycles
    e = g.ih()[-1]
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"]) == (
        ih_spec.Client.SDMA0, ih_spec.Source.SDMA_POLL_TIMEOUT, DATA + 8, 0)
    assert g.dev.now() - t0 >= 96
    assert g.r(regs.SDMA_ERROR) == 0


ERRORS = [
    # (stream, code, op, offset of the faulting header in dwords)
    ([0x23DECD3D], "ILLEGAL_OPCODE", 0x3D, 0),
    (sdma.pad(2) + sdma.copy_linear(DATA, DATA, 4)[:5], "BAD_COUNT", 1, 2),
    (sdma.write_linear(DATA, [1, 2])[:5], "BAD_COUNT", 2, 0),
    (sdma.nop(5)[:4], "BAD_COUNT", 0, 0),
    (sdma.encode_fields("COPY_LINEAR", {"TMZ": 1, "COUNT": 3}), "UNSUPPORTED", 1, 0),
    (sdma.encode_fields("POLL_REGMEM", {"MEM_POLL": 0}), "UNSUPPORTED", 8, 0),
    (sdma.encode_fields("CONSTANT_FILL", {"FILLSIZE": 1}), "UNSUPPORTED", 11, 0),
    ([sdma_packets.FENCE.header, DATA + 2, 0, 0], "FENCE_MISALIGNED", 5, 0),  # address bits 1:0 set
    ([sdma_packets.WRITE_LINEAR.header, DATA + 1, 0, 0, 1], "FENCE_MISALIGNED", 2, 0),
    ([sdma_packets.INDIRECT_BUFFER.header, IB + 0x10, 0, 4, 0, 0], "IB_MISALIGNED", 4, 0),
    (sdma.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": IB >> 5}), "IB_SIZE_ZERO", 4, 0),
    (sdma.copy_linear(1 << 30, DATA, 64), "BUS_DECERR", 1, 0),
]


def _check_error(dev, words, code, op, offset):
    g = Rig(dev)
    g.submit(words)
    got = g.error()
    assert got[0] == code and got[1] == 0 and got[2] == op and got[4] == offset, got
    if code != "BUS_DECERR":
        assert got[3] == RING + 4 * offset  # packet errors name the header
    else:
        assert got[3] == 1 << 30
    e = g.ih()[-1]
    assert (e["CLIENT_ID"], e["SOURCE_ID"]) == (ih_spec.Client.SDMA0, ih_spec.Source.SDMA_ERROR)
    assert (e["DATA0"], e["DATA1"], e["DATA3"]) == (g.r(regs.SDMA_ERROR), got[3], offset)
    assert regs.SDMA_STATUS.ERROR.get(g.r(regs.SDMA_STATUS)) and not regs.STATUS.ERROR.get(g.r(regs.STATUS))
    g.cp(pm4.write_data(DATA + 0x800, [0x77]))  # the CP runs on
    assert g.m32[(DATA + 0x800) // 4] == 0x77
    # the queue reset brings SDMA back without touching the CP
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.mask)
    g.settle()
    assert g.r(regs.SDMA_ERROR) == 0 and g.r(regs.SDMA_RB_RPTR) == 0 and g.r(regs.SDMA_RB_WPTR) == 0
    assert not regs.SDMA_STATUS.ERROR.get(g.r(regs.SDMA_STATUS))
    g.wptr = 0
    g.submit(sdma.fence(DATA + 0x900, 3))
    assert g.m32[(DATA + 0x900) // 4] == 3 and g.r(regs.RB_RPTR) == g.cp_wptr


def _error_check(i, words, code, op, offset):
    def check(dev):
        _check_error(dev, words, code, op, offset)
    check.__name__ = check.__qualname__ = f"check_sdma_error_{i}_{code.lower()}"
    return check


ERROR_CHECKS = [_error_check(i, *e) for i, e in enumerate(ERRORS)]


def check_sdma_ib_nesting_and_doorbell_errors(dev):
    g = Rig(dev)
    inner = sdma.indirect_buffer(IB, 8)
    g.m32[IB // 4:IB // 4 + 6] = inner
    g.submit(sdma.indirect_buffer(IB, 6, vmid=0))
    assert g.error()[:4] == ("IB_NESTING", 1, 4, IB) and g.error()[4] == 0
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.mask)
    g.settle()
    g.wptr = 0
    g.submit(sdma.fence(DATA, 1))
    g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), 8)
    g.settle()
    assert g.error() == ("DOORBELL_BACKWARDS", 0, 0, 8, 4)
    assert g.r(regs.SDMA_RB_WPTR) == 16
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.mask)
    g.settle()
    g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), 4 * 256 + 4)
    g.settle()
    assert g.error()[0] == "DOORBELL_OVERFLOW" and g.r(regs.SDMA_RB_WPTR) == 0


def check_a_cp_error_leaves_the_sdma_queue_running(dev):
    g = Rig(dev)
    g.cp([pm4.header(0x99, 0), 0])
    assert regs.STATUS.ERROR.get(g.r(regs.STATUS))
    g.submit(sdma.fence(DATA, 9) + sdma.trap(int_context=5))  # its trap entry too, with the CP stopped
    assert g.m32[DATA // 4] == 9 and g.r(regs.SDMA_ERROR) == 0
    assert [(e["CLIENT_ID"], e["DATA0"]) for e in g.ih()] == [(ih_spec.Client.GRBM_CP, g.r(regs.CP_ERROR)),
                                                               (ih_spec.Client.SDMA0, 5)]


def check_sdma_trap_while_the_cp_polls(dev):
    """The CP waits in a WAIT_REG_MEM; the SDMA's trap entry is appended meanwhile."""
    g = Rig(dev)
    g.m32[CP_RING // 4:CP_RING // 4 + 7] = pm4.wait_reg_mem(DATA + 0x40, 1, 0xFFFFFFFF, "EQ")
    g.cp_wptr = 7
    g.dev.mmio_write32(regs.RB_DOORBELL.addr(), 7)
    g.until(lambda: regs.STATUS.WAITING.get(g.r(regs.STATUS)), "STATUS.WAITING")
    g.submit(sdma.fence(DATA, 3) + sdma.trap(int_context=9))
    assert [(e["CLIENT_ID"], e["DATA0"]) for e in g.ih()] == [(ih_spec.Client.SDMA0, 9)]
    assert regs.STATUS.WAITING.get(g.r(regs.STATUS))  # still waiting
    g.m32[(DATA + 0x40) // 4] = 1
    g.until(lambda: regs.STATUS.IDLE.get(g.r(regs.STATUS)), "the CP idle")
    assert g.r(regs.RB_RPTR) == 7


def check_sdma_ring_size_outside_4_to_20_acts_as_the_nearest(dev):
    """SDMA_RB_CNTL.RB_SIZE below 4 acts as 4 (16 dwords) and above 20 as 20, while the
    register reads back what was written: the doorbell's overflow limit shows the size (the
    engine halted, so the ring's contents do not matter)."""
    g = Rig(dev)
    halt = regs.SDMA_CNTL.HALT.mask
    for written, acts in ((2, 4), (25, 20)):
        g.dev.mmio_write32(regs.SDMA_CNTL.addr(), halt)
        cntl = regs.SDMA_RB_CNTL.RB_ENABLE.put(1) | regs.SDMA_RB_CNTL.RB_SIZE.put(written)
        g.dev.mmio_write32(regs.SDMA_RB_CNTL.addr(), 0)  # (RB_SIZE is written with the ring disabled)
        g.dev.mmio_write32(regs.SDMA_RB_CNTL.addr(), cntl)
        assert g.r(regs.SDMA_RB_CNTL) == cntl
        limit = 4 << acts  # bytes
        g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), limit)
        g.dev.delay(16)
        assert (g.r(regs.SDMA_ERROR), g.r(regs.SDMA_RB_WPTR)) == (0, limit), written
        g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), limit + 4)
        g.dev.delay(16)
        assert g.error() == ("DOORBELL_OVERFLOW", 0, 0, limit + 4, 0), (written, g.error())
        g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask)
        g.settle()


def check_sdma_addresses_above_47_bits_and_an_always_poll_reads(dev):
    """The SDMA's poll, fence, write and copy addresses drop their bits above 47 (as the DMA
    engine does); an IB base beyond the bus is BUS_DECERR at its low 48 bits (as the CP's);
    a POLL_REGMEM with FUNC ALWAYS still reads once, so a bus error there stops the queue."""
    g = Rig(dev)
    hi = 1 << 16  # address bit 48, in an *_HI dword
    g.m32[DATA // 4] = 7
    # each packet's header from its builder, its *_HI address dword with bit 48 set
    g.submit([sdma.poll_regmem(DATA, 7, 0xFF, "EQ")[0], DATA, hi, 7, 0xFF, (0xFFF << 16) | 1])
    g.submit([sdma.fence(DATA, 0)[0], DATA + 0x10, hi, 0x55])
    g.submit([sdma.write_linear(DATA, [0])[0], DATA + 0x20, hi, 0, 0x66])
    g.submit([sdma.copy_linear(DATA, DATA, 4)[0], 3, 0, DATA, hi, DATA + 0x40, hi << 1])
    assert g.r(regs.SDMA_ERROR) == 0, g.error()
    assert g.m32[(DATA + 0x10) // 4] == 0x55 and g.m32[(DATA + 0x20) // 4] == 0x66 and g.m32[(DATA + 0x40) // 4] == 7
    ib = sdma.fence(DATA + 0x80, 1) + sdma.pad(4)
    g.m32[IB // 4:IB // 4 + len(ib)] = ib
    at = g.wptr // 4
    g.submit([sdma.indirect_buffer(IB, len(ib))[0], IB, hi, len(ib), 0, 0])
    assert g.error() == ("BUS_DECERR", 0, 4, IB, at) and g.m32[(DATA + 0x80) // 4] == 0
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask)
    g.settle()
    g.wptr = 0
    g.dev.mem_model.configure(error_window=(DATA + 0x100, DATA + 0x104, "SLVERR"))
    g.submit(sdma.poll_regmem(DATA + 0x100, 0, 0, "ALWAYS"))
    assert g.error() == ("BUS_SLVERR", 0, 8, DATA + 0x100, 0)
    g.dev.mem_model.configure(error_window=None)


def check_sdma_copies_wait_for_the_writes_they_read(dev):
    """A copy that reads what a copy or fill before it writes (one doorbell) reads the new
    bytes, with reads answered 40 cycles late and W held back: the engine keeps the
    destinations in flight as one range and makes a copy whose source meets it wait (RAW).
    The second copy's destination lies far above the first's and widens the range, which
    must still cover the first's bytes for the third copy. On the reference model transfers
    finish in order and memory settings are ignored: this bites on the RTL."""
    g = Rig(dev)
    g.dev.mem_model.configure(rd_latency=40, wr_latency=40, seed=3, stall={"w": 0.5, "aw": 0.3})
    a, b, c, far = 0x60000, 0x70000, 0x80000, 0x90000
    data = bytes((5 * i + 1) & 0xFF for i in range(0x800))
    g.dev.mem[a:a + 0x800] = list(data)
    g.dev.mem[b:b + 0x800] = 0xEE  # stale bytes a copy would read too early
    g.dev.mem[far + 0x2000:far + 0x2040] = range(0x40)
    g.submit(sdma.copy_linear(b, a, 0x800)  # writes b[0, 0x800), its last bytes last
             + sdma.copy_linear(far, far + 0x2000, 0x40)  # another destination, above
             + sdma.copy_linear(c, b + 0x7C0, 0x40)  # reads the first copy's last bytes
             + sdma.constant_fill(far + 0x100, 0x5A5A_5A5A, 0x40)
             + sdma.copy_linear(c + 0x100, far + 0x100, 0x40))  # reads what the fill writes
    g.dev.mem_model.configure(rd_latency=0, wr_latency=0, stall={})
    assert bytes(g.dev.mem[c:c + 0x40]) == data[0x7C0:], "a copy read stale bytes of the copy before it"
    assert bytes(g.dev.mem[c + 0x100:c + 0x140]) == b"\x5A" * 0x40, "a copy read stale bytes of the fill before it"
    assert bytes(g.dev.mem[far:far + 0x40]) == bytes(range(0x40))
    assert g.r(regs.SDMA_ERROR) == 0 and g.r(regs.SDMA_RB_RPTR) == g.wptr


def check_sdma_trap_whose_ih_write_fails_names_the_entry(dev):
    """A TRAP whose IH entry's write is answered SLVERR stops the SDMA queue with that error
    at the entry's address (the IH writer's, answered to the SDMA), the TRAP's OP and offset;
    its own SDMA_ERROR entry is then lost to the same window, and the CP runs on."""
    g = Rig(dev)
    g.submit(sdma.trap(int_context=1))  # one entry written: the next goes to IH + 32
    assert len(g.ih()) == 1
    g.dev.mem_model.configure(error_window=(IH + 0x20, IH + 0x40, "SLVERR"))
    at = g.wptr // 4
    g.submit(sdma.pad(2) + sdma.trap(int_context=2))
    g.dev.mem_model.configure(error_window=None)
    assert g.error() == ("BUS_SLVERR", 0, sdma_packets.TRAP.op, IH + 0x20, at + 2), g.error()
    assert regs.SDMA_STATUS.ERROR.get(g.r(regs.SDMA_STATUS))
    g.cp(pm4.write_data(DATA + 0x800, [0x78]))  # the CP runs on
    assert g.m32[(DATA + 0x800) // 4] == 0x78


CHECKS = [check_sdma_packets_copy_write_fill_fence_trap,
          check_sdma_trap_disabled_writes_no_entry_and_ib_runs_with_its_vmid,
          check_sdma_long_write_and_copy_cross_blocks_and_pages,
          check_sdma_poll_waits_for_the_cp_and_times_out_with_finite_retries,
          *ERROR_CHECKS, check_sdma_ib_nesting_and_doorbell_errors, check_a_cp_error_leaves_the_sdma_queue_running,
          check_sdma_trap_while_the_cp_polls, check_sdma_ring_size_outside_4_to_20_acts_as_the_nearest,
          check_sdma_addresses_above_47_bits_and_an_always_poll_reads,
          check_sdma_copies_wait_for_the_writes_they_read, check_sdma_trap_whose_ih_write_fails_names_the_entry]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel(1 << 20))


def test_without_hqd1_only_its_registers_answer_decerr():
    d = RefModel(1 << 20, queues=False)
    assert regs.QUEUE_CAPS.decode(d.mmio_read32(regs.QUEUE_CAPS.addr())) == {"SDMA": 1, "CP_QUEUES": 1}
    assert regs.QUEUE_CAPS.decode(RefModel(1 << 20).mmio_read32(regs.QUEUE_CAPS.addr())) == {"SDMA": 1, "CP_QUEUES": 2}
    with pytest.raises(BusError, match="DECERR"):
        d.mmio_read32(regs.CP_HQD1_RB_BASE_LO.addr())


@pytest.mark.parametrize("cpu_writes", [False, True], ids=["the_sdma_writes", "the_cpu_writes"])
def test_a_poll_skipped_in_a_long_wait_sees_a_write_made_before_its_end(cpu_writes):
    """The model skips a failing WAIT_REG_MEM's polls while nothing can change memory. It
    skipped them to the end of the whole `wait_irq`, past the moment the SDMA moved on
    (its POLL_REGMEM held) and wrote the polled dword, and past the moment the call
    returned early on the SDMA's trap, after which the CPU writes it: the CP saw either
    100,000 cycles late. docs/hardware.md: the CP reads every POLL_INTERVAL cycles, so the
    fence behind the wait comes at the first poll after the write (10 cycles apart here)."""
    dev = RefModel(1 << 20)
    g = Rig(dev)
    dev.mmio_write32(regs.INT_ENABLE.addr(), regs.INT_ENABLE.IH_PENDING.mask)
    release, fence = DATA + 0x40, DATA + 0x80
    g.submit(sdma.poll_regmem(DATA, 1, 1, "EQ", interval=10)  # reads 160 cycles apart
             + ([] if cpu_writes else sdma.write_linear(release, [1])) + sdma.trap(int_context=7), settle=False)
    g.m32[CP_RING // 4:CP_RING // 4 + 7] = pm4.wait_reg_mem(release, 1, 1, "EQ", poll_interval=10)
    g.m32[CP_RING // 4 + 7:CP_RING // 4 + 15] = pm4.release_mem(fence, 0, data_sel=3)  # the timestamp
    g.cp_wptr = 15
    dev.mmio_write32(regs.RB_DOORBELL.addr(), 15)
    assert regs.STATUS.WAITING.get(g.r(regs.STATUS)) and regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS))
    g.m32[DATA // 4] = 1  # releases the SDMA at its next read, up to 160 cycles on
    t0 = dev.now()
    assert dev.wait_irq(100_000)
    t_write = dev.now()  # the SDMA's write, at its trap; or the CPU's, at once
    assert t0 < t_write <= t0 + 160
    if cpu_writes:
        assert g.m32[fence // 4] == 0
        g.m32[release // 4] = 1
    assert [e["DATA0"] for e in g.ih()] == [7]  # (8 cycles of MMIO read)
    dev.delay(20)
    assert t_write < g.m32[fence // 4] <= t_write + 10, (t_write, g.m32[fence // 4])


@pytest.mark.parametrize("cpu_writes", [False, True], ids=["the_cp_writes", "the_cpu_writes"])
def test_a_skipped_sdma_poll_sees_a_write_made_before_the_long_wait_ends(cpu_writes):
    """The same for the SDMA's POLL_REGMEM: its polls were skipped to the end of the whole
    `wait_irq`, past the CP's release of it (a WAIT_REG_MEM that holds, then a WRITE_DATA
    and an interrupting RELEASE_MEM) and past the CPU's write after that early return. It
    reads every 16 cycles here: its fence comes within 16 cycles of the write."""
    dev = RefModel(1 << 20)
    g = Rig(dev)
    dev.mmio_write32(regs.INT_ENABLE.addr(), regs.INT_ENABLE.IH_PENDING.mask)
    release, fence = DATA + 0x40, DATA + 0x80
    g.submit(sdma.poll_regmem(release, 1, 1, "EQ", interval=1) + sdma.fence(fence, 0x5E), settle=False)
    cp = (pm4.wait_reg_mem(DATA, 1, 1, "EQ", poll_interval=200) + ([] if cpu_writes else pm4.write_data(release, [1]))
          + pm4.release_mem(DATA + 0xC0, 0, int_sel=2))  # (an EOP entry: IH_PENDING)
    g.m32[CP_RING // 4:CP_RING // 4 + len(cp)] = cp
    g.cp_wptr = len(cp)
    dev.mmio_write32(regs.RB_DOORBELL.addr(), len(cp))
    assert regs.STATUS.WAITING.get(g.r(regs.STATUS)) and regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS))
    g.m32[DATA // 4] = 1  # releases the CP at its next read, up to 200 cycles on
    t0 = dev.now()
    assert dev.wait_irq(100_000)
    t_write = dev.now()
    assert t0 < t_write <= t0 + 200
    if cpu_writes:
        g.m32[release // 4] = 1
    dev.delay(t_write + 15 - dev.now())
    assert g.m32[fence // 4] in (0, 0x5E)
    dev.delay(1)
    assert g.m32[fence // 4] == 0x5E, (t_write, dev.now())


class _PollsEveryPoint(RefModel):
    """The reference model without its skipping of polls whose result is known."""

    skip_polls = False


def _poll_race(dev, seed: int) -> list:
    """Both CP queues and the SDMA wait on flags (random intervals, finite SDMA retries or
    not), release one another's flags and stamp the time (RELEASE_MEM TIMESTAMP, an EOP
    and a TRAP entry each with its time); the driver waits (delay, wait_irq that return
    early at the entries) and the CPU sets flags in between. What the driver saw."""
    rnd = random.Random(seed)
    w = dev.mmio_write32
    flags, stamps = DATA + 0x400, DATA + 0x800
    w(regs.IH_BASE_LO.addr(), IH >> 8)
    w(regs.IH_SIZE.addr(), 8)
    w(regs.IH_CNTL.addr(), regs.IH_CNTL.ENABLE.mask)
    w(regs.INT_ENABLE.addr(), regs.INT_ENABLE.IH_PENDING.mask)
    m32 = dev.mem.view("<u4")
    rings = ((regs.RB_BASE_LO, regs.RB_SIZE, regs.RB_CNTL, regs.RB_DOORBELL, CP_RING),
             (regs.CP_HQD1_RB_BASE_LO, regs.CP_HQD1_RB_SIZE, regs.CP_HQD1_RB_CNTL, regs.CP_HQD1_RB_DOORBELL,
              CP_RING + 0x800))
    stamp = 0
    for q, (base, size, cntl, bell, ring) in enumerate(rings):
        words = []
        for _ in range(rnd.randint(1, 4)):
            words += pm4.wait_reg_mem(flags + 4 * rnd.randrange(8), 1, 1, "EQ", poll_interval=rnd.randint(0, 40))
            if rnd.random() < 0.5:
                words += pm4.write_data(flags + 4 * rnd.randrange(8), [1])
            words += pm4.release_mem(stamps + 8 * stamp, 0, data_sel="TIMESTAMP", int_sel=rnd.choice((0, 2)))
            stamp += 1
        m32[ring // 4:ring // 4 + len(words)] = words
        w(base.addr(), ring >> 8)
        w(size.addr(), 8)
        w(cntl.addr(), 1)
        w(bell.addr(), len(words))
    g = Rig(dev)
    words = []
    for k in range(rnd.randint(1, 4)):
        words += sdma.poll_regmem(flags + 4 * rnd.randrange(8), 1, 1, "EQ", interval=rnd.randint(0, 3),
                                  retry_count=rnd.choice((4095, rnd.randint(0, 30))))
        if rnd.random() < 0.5:
            words += sdma.write_linear(flags + 4 * rnd.randrange(8), [1])
        words += sdma.trap(int_context=k)
    g.submit(words, settle=False)
    seen = []
    for _ in range(40):
        if rnd.random() < 0.5:
            seen.append(("irq", dev.wait_irq(rnd.randint(1, 3000)), dev.now()))
            w(regs.IH_RPTR.addr(), dev.mmio_read32(regs.IH_WPTR.addr()))  # (the line drops)
        else:
            dev.delay(rnd.randint(1, 300))
        if rnd.random() < 0.4:
            m32[flags // 4 + rnd.randrange(8)] = 1  # the CPU, at once after the call
        seen.append(dev.now())
    return seen


@pytest.mark.parametrize("seed", range(60))
def test_skipped_polls_change_nothing_the_driver_sees(seed):
    """Skipping the polls whose result is known (RefModel._advance) must be invisible: the
    same race of three waiting engines, driver waits and CPU writes on a model that polls
    at every point of every grid gives the same times, memory (RELEASE_MEM timestamps,
    entries with their times) and registers. It did not: a skip ran to the end of the
    whole call, past another engine's release and past an early return at an irq. One
    race in three with a CP of one packet a cycle (cp_burst 1), one in three of 2."""
    burst = {0: {}, 1: {"cp_burst": 1}, 2: {"cp_burst": 2}}[seed % 3]
    fast, slow = RefModel(1 << 20, **burst), _PollsEveryPoint(1 << 20, **burst)
    assert _poll_race(fast, seed) == _poll_race(slow, seed)
    assert (fast.mem == slow.mem).all()
    assert fast.snapshot(memory=False) == slow.snapshot(memory=False)
    # the skipped reads are counted as made (the snapshot leaves the poll counters out: their
    # figures are a matter of time between backends, not between these two)
    polls = [regs.PERF_Q0_POLLS.addr(), regs.PERF_Q1_POLLS.addr()]
    assert [fast.mmio_read32(a) for a in polls] == [slow.mmio_read32(a) for a in polls]
    assert slow.mmio_read32(polls[0]) + slow.mmio_read32(polls[1]) > 0
