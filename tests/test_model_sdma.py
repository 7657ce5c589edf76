"""The reference model's SDMA copy engine (testbench/model_sdma.py) against docs/hardware.md,
"The SDMA copy engine": packets, trap interrupt, polls, every error class with its exact
registers, queue reset, and the independence of the CP and SDMA queues."""

from __future__ import annotations

import pytest

from kmd_model import regs
from kmd_model.device import BusError
from kmd_model.regs import CpError
from spec import ih as ih_spec
from spec import pm4, sdma, sdma_packets
from testbench.refmodel import RefModel

RING, RPTR_WB, IH, DATA, CP_RING = 0x10000, 0x8000, 0x20000, 0x40000, 0x30000


class Rig:
    """A RefModel with its IH ring, the SDMA ring (2^8 dwords) and the CP ring programmed
    directly over MMIO (no KMD)."""

    def __init__(self, **kw):
        self.dev = d = RefModel(1 << 20, **kw)
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

    def submit(self, words, ring=True):
        for x in words:
            self.m32[(RING + (self.wptr & 0x3FF)) // 4] = x
            self.wptr += 4
        self.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), self.wptr)

    def cp(self, words):
        for x in words:
            self.m32[(CP_RING + 4 * (self.cp_wptr & 0xFF)) // 4] = x
            self.cp_wptr += 1
        self.dev.mmio_write32(regs.RB_DOORBELL.addr(), self.cp_wptr)

    def r(self, reg):
        return self.dev.mmio_read32(reg.addr())

    def ih(self):
        n = self.r(regs.IH_WPTR) // 32
        return [ih_spec.decode(self.m32[IH // 4 + 8 * i: IH // 4 + 8 * i + 8].tolist()) for i in range(n)]

    def error(self):
        e = regs.SDMA_ERROR.decode(self.r(regs.SDMA_ERROR))
        return (CpError(e["CODE"]).name, e["LEVEL"], e["OP"], self.r(regs.SDMA_ERROR_ADDR_LO), self.r(regs.SDMA_ERROR_OFFSET))


def test_packets_copy_write_fill_fence_trap():
    g = Rig()
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
    assert regs.QUEUE_CAPS.decode(g.r(regs.QUEUE_CAPS)) == {"SDMA": 1, "CP_QUEUES": 2}


def test_trap_disabled_writes_no_entry_and_ib_runs_with_its_vmid():
    g = Rig()
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), 0)
    ib = sdma.write_linear(DATA, [0xAB]) + sdma.pad(3)
    g.m32[0x50000 // 4:0x50000 // 4 + len(ib)] = ib
    g.submit(sdma.indirect_buffer(0x50000, len(ib)) + sdma.trap())
    assert g.m32[DATA // 4] == 0xAB and g.ih() == []
    assert g.r(regs.SDMA_RB_RPTR) == g.wptr


def test_poll_waits_for_the_cp_and_times_out_with_finite_retries():
    g = Rig()
    g.submit(sdma.poll_regmem(DATA, 5, 0xFFFFFFFF, "EQ", interval=1) + sdma.fence(DATA + 4, 1))
    assert regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS)) and g.m32[(DATA + 4) // 4] == 0
    g.cp(pm4.write_data(DATA, [5]))  # the CP releases the copy engine
    g.dev.delay(64)
    assert g.m32[(DATA + 4) // 4] == 1 and not regs.SDMA_STATUS.WAITING.get(g.r(regs.SDMA_STATUS))
    t0 = g.dev.now()
    g.submit(sdma.poll_regmem(DATA + 8, 1, 1, "EQ", interval=2, retry_count=3) + sdma.fence(DATA + 12, 2))
    g.dev.delay(3 * 32 - 40)
    assert g.m32[(DATA + 12) // 4] == 0
    g.dev.delay(200)
    assert g.m32[(DATA + 12) // 4] == 2  # gave up after 4 reads, 3 intervals of 32 cycles
    e = g.ih()[-1]
    assert (e["SOURCE_ID"], e["DATA0"]) == (ih_spec.Source.SDMA_POLL_TIMEOUT, DATA + 8)
    assert g.dev.now() - t0 >= 96


ERRORS = [
    # (stream, code, op, offset of the faulting header in dwords)
    ([0x23DECD3D], "ILLEGAL_OPCODE", 0x3D, 0),
    (sdma.pad(2) + sdma.copy_linear(DATA, DATA, 4)[:5], "BAD_COUNT", 1, 2),
    (sdma.write_linear(DATA, [1, 2])[:5], "BAD_COUNT", 2, 0),
    (sdma.encode_fields("COPY_LINEAR", {"TMZ": 1, "COUNT": 3}), "UNSUPPORTED", 1, 0),
    (sdma.encode_fields("POLL_REGMEM", {"MEM_POLL": 0}), "UNSUPPORTED", 8, 0),
    ([sdma_packets.FENCE.header, DATA + 2, 0, 0], "FENCE_MISALIGNED", 5, 0),  # address bits 1:0 set
    ([sdma_packets.INDIRECT_BUFFER.header, 0x50010, 0, 4, 0, 0], "IB_MISALIGNED", 4, 0),
    (sdma.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 0x50000 >> 5}), "IB_SIZE_ZERO", 4, 0),
    (sdma.copy_linear(1 << 30, DATA, 64), "BUS_DECERR", 1, 0),
]


@pytest.mark.parametrize("words, code, op, offset", ERRORS, ids=[e[1] + str(i) for i, e in enumerate(ERRORS)])
def test_each_error_stops_the_sdma_queue_alone(words, code, op, offset):
    g = Rig()
    g.submit(words)
    got = g.error()
    assert got[0] == code and got[1] == 0 and got[2] == op and got[4] == offset
    if code != "BUS_DECERR":
        assert got[3] == RING + 4 * offset  # packet errors name the header
    else:
        assert got[3] == 1 << 30
    e = g.ih()[-1]
    assert (e["CLIENT_ID"], e["SOURCE_ID"]) == (ih_spec.Client.SDMA0, ih_spec.Source.SDMA_ERROR)
    assert e["DATA0"] == g.r(regs.SDMA_ERROR)
    assert regs.SDMA_STATUS.ERROR.get(g.r(regs.SDMA_STATUS)) and not regs.STATUS.ERROR.get(g.r(regs.STATUS))
    g.cp(pm4.write_data(DATA + 0x800, [0x77]))  # the CP runs on
    assert g.m32[(DATA + 0x800) // 4] == 0x77
    # the queue reset brings SDMA back without touching the CP
    g.dev.mmio_write32(regs.SDMA_CNTL.addr(), regs.SDMA_CNTL.QUEUE_RESET.mask | regs.SDMA_CNTL.TRAP_ENABLE.mask)
    assert g.r(regs.SDMA_ERROR) == 0 and g.r(regs.SDMA_RB_RPTR) == 0 and g.r(regs.SDMA_RB_WPTR) == 0
    g.wptr = 0
    g.submit(sdma.fence(DATA + 0x900, 3))
    assert g.m32[(DATA + 0x900) // 4] == 3 and g.r(regs.RB_RPTR) == g.cp_wptr


def test_ib_nesting_and_doorbell_errors():
    g = Rig()
    inner = sdma.indirect_buffer(0x50000, 8)
    g.m32[0x50000 // 4:0x50000 // 4 + 6] = inner
    g.submit(sdma.indirect_buffer(0x50000, 6, vmid=0))
    assert g.error()[:3] == ("IB_NESTING", 1, 4) and g.error()[3] == 0x50000
    g = Rig()
    g.submit(sdma.fence(DATA, 1))
    g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), 8)
    assert g.error() == ("DOORBELL_BACKWARDS", 0, 0, 8, 4)
    g = Rig()
    g.dev.mmio_write32(regs.SDMA_DOORBELL.addr(), 4 * 256 + 4)
    assert g.error()[0] == "DOORBELL_OVERFLOW"


def test_a_cp_error_leaves_the_sdma_queue_running():
    g = Rig()
    g.cp([pm4.header(0x99, 0), 0])
    assert regs.STATUS.ERROR.get(g.r(regs.STATUS))
    g.submit(sdma.fence(DATA, 9))
    assert g.m32[DATA // 4] == 9 and g.r(regs.SDMA_ERROR) == 0


def test_without_sdma_its_registers_answer_decerr_as_on_the_rtl():
    d = RefModel(1 << 20, queues=False)
    with pytest.raises(BusError, match="DECERR"):
        d.mmio_read32(regs.QUEUE_CAPS.addr())
