"""The reference model (testbench/refmodel/) through the Device API only.

Everything is driven as a driver would: registers by their kmd_model.regs names, packets
from the spec.pm4 builders (spec.pm4.encode_fields for the malformed ones), results read
back through MMIO and the memory view. The register checks are those of
tests/cocotb_regs.py, run on the model.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from kmd_model import regs
from kmd_model.mmio import Mmio
from kmd_model.regs import CpError, IbLevel
from spec import ih, pm4
from spec.packets import PACKETS, by_name
from tests import register_checks as rc
from testbench.refmodel import (
    DEFAULT_MMIO_CYCLES, RefModel, diff_snapshots, mem_diff, snapshot,
)

RING = 0x10000  # command ring
RPTR_WB = 0x8000  # RB_RPTR write-back
IH_RING = 0x20000
IH_WPTR_WB = 0x8040
OUT = 0x40000  # where packets write
IB1, IB1B, IB2, IB2B, IB2C = 0x50000, 0x51000, 0x52000, 0x53000, 0x54000

NOP = by_name["NOP"].index
WRITE_DATA = by_name["WRITE_DATA"].index
INDIRECT_BUFFER = by_name["INDIRECT_BUFFER"].index
WAIT_REG_MEM = by_name["WAIT_REG_MEM"].index
RELEASE_MEM = by_name["RELEASE_MEM"].index
DMA_DATA = by_name["DMA_DATA"].index
OP = {p.name: p.opcode for p in PACKETS}


# ---------------------------------------------------------------------------- driver-side helpers

def w32(dev, addr, values):
    values = np.asarray(values, dtype=np.uint32)
    dev.mem[addr:addr + 4 * values.size] = values.view(np.uint8)


def r32(dev, addr, n=1):
    v = dev.mem[addr:addr + 4 * n].view("<u4").tolist()
    return v[0] if n == 1 else v


class Driver:
    """Programs the ring and the IH ring as the KMD does, and submits packets."""

    def __init__(self, dev=None, ring_log2=8, ih_log2=4, **model_kw):
        self.dev = dev or RefModel(**model_kw)
        self.io = io = Mmio(self.dev)
        io.write64(regs.RB_BASE_LO, regs.RB_BASE_HI, RING >> 8)  # AMD's units
        io.write_fields(regs.RB_SIZE, LOG2_QWORDS=ring_log2 - 1)
        io.write64(regs.RB_RPTR_ADDR_LO, regs.RB_RPTR_ADDR_HI, RPTR_WB)
        io.write64(regs.IH_BASE_LO, regs.IH_BASE_HI, IH_RING >> 8)
        io.write_fields(regs.IH_SIZE, LOG2_DWORDS=ih_log2 + 3)
        io.write64(regs.IH_WPTR_ADDR_LO, regs.IH_WPTR_ADDR_HI, IH_WPTR_WB)
        io.write_fields(regs.IH_CNTL, ENABLE=1, WPTR_WB=1)
        io.write_fields(regs.RB_CNTL, ENABLE=1, RPTR_WB=1)
        self.size = 1 << ring_log2
        self.wptr = 0

    def emit(self, dwords):
        for d in dwords:
            w32(self.dev, RING + 4 * (self.wptr % self.size), [d])
            self.wptr = (self.wptr + 1) & 0xFFFF_FFFF

    def submit(self, *packets):
        for p in packets:
            self.emit(p)
        self.io.write(regs.RB_DOORBELL, self.wptr)

    def read(self, reg, index=0):
        return self.io.read(reg, index)

    def fields(self, reg, index=0):
        return self.io.fields(reg, index)

    def perf(self, kind):
        return self.io.read(regs.PERF_PACKETS, kind)

    def ih_entries(self):
        wptr = self.read(regs.IH_WPTR)
        return [ih.decode(r32(self.dev, IH_RING + p, ih.ENTRY_DWORDS)) for p in range(0, wptr, ih.ENTRY_BYTES)]

    def error(self):
        e = self.fields(regs.CP_ERROR)
        return (e["CODE"], e["LEVEL"], e["OPCODE"], self.io.read64(regs.CP_ERROR_ADDR_LO, regs.CP_ERROR_ADDR_HI),
                self.read(regs.CP_ERROR_OFFSET))

    def expect_error(self, code, level, opcode, addr, offset):
        """The CP stopped with exactly this error, told it the documented ways."""
        assert self.error() == (code, level, opcode, addr, offset)
        st = self.fields(regs.STATUS)
        assert (st["ERROR"], st["IDLE"], st["WAITING"]) == (1, 1, 0)
        assert self.fields(regs.INT_STATUS)["CP_ERROR"] == 1
        last = self.ih_entries()[-1]
        assert (last["CLIENT_ID"], last["SOURCE_ID"]) == (ih.Client.GRBM_CP, ih.Source.CP_ERROR) == (0x14, 183)
        assert (last["DATA0"], last["DATA1"], last["DATA2"], last["DATA3"]) == (
            code | level << 8 | opcode << 16, addr & 0xFFFF_FFFF, addr >> 32, offset)

    def recover(self):
        """Soft reset, then the ring works again from 0."""
        self.io.write_fields(regs.CONTROL, SOFT_RESET=1)
        assert self.error() == (0, 0, 0, 0, 0)
        st = self.fields(regs.STATUS)
        assert (st["ERROR"], st["IDLE"], st["RB_EMPTY"], st["LEVEL"]) == (0, 1, 1, 0)
        assert (self.read(regs.RB_RPTR), self.read(regs.RB_WPTR), self.read(regs.IH_WPTR)) == (0, 0, 0)
        assert self.fields(regs.INT_STATUS)["CP_ERROR"] == 1, "soft reset keeps INT_STATUS"
        self.io.write(regs.INT_STATUS, regs.INT_STATUS.CP_ERROR.put(1))
        self.io.write(regs.IH_RPTR, 0)
        self.wptr = 0
        self.submit(pm4.write_data(OUT + 0xF00, [0x600D]))
        assert r32(self.dev, OUT + 0xF00) == 0x600D
        assert self.read(regs.RB_RPTR) == 5


@pytest.fixture
def drv():
    return Driver()


# ---------------------------------------------------------------------------- registers (tests/register_checks.py)

@pytest.mark.parametrize("data_width", [32, 64, 256])
def test_reset_values(data_width):
    dev = RefModel(data_width=data_width)  # (the engines the RTL has: two CP queues, the SDMA)
    rc.check_reset_values(dev, data_width)
    t0 = dev.mmio_read32(regs.TIMESTAMP_LO.addr())
    dev.delay(10)
    assert dev.mmio_read32(regs.TIMESTAMP_LO.addr()) - t0 == 10 + DEFAULT_MMIO_CYCLES  # the delay and one read


def test_the_shared_register_map_is_read_only():
    """Every model shares one register map per configuration (built once): a model that
    decodes fewer registers must take a copy, and the map refuses a change, which would
    reach every later model (a deleted QUEUE_CAPS made later models answer DECERR)."""
    from testbench.refmodel.regmap import _slots

    shared = RefModel()._slots
    assert shared is _slots(queues=True, sdma=True)
    with pytest.raises(TypeError):
        del shared[regs.QUEUE_CAPS.addr()]
    narrowed = RefModel()
    narrowed._slots = {off: s for off, s in narrowed._slots.items() if off != regs.QUEUE_CAPS.addr()}
    with pytest.raises(Exception, match="DECERR"):
        narrowed.mmio_read32(regs.QUEUE_CAPS.addr())
    assert RefModel().mmio_read32(regs.QUEUE_CAPS.addr()) != 0


def test_access_types():
    rc.check_access_types(RefModel(), 1234)


def test_storage_fill_and_first_byte_writes():
    rc.fill_storage(RefModel(), 1234)
    rc.check_first_byte_writes(RefModel())


def test_pt_base_reset_reaches_mmu():
    rc.point_pt_base(RefModel())
    rc.check_pt_base_reset_reaches_mmu(RefModel())  # a model starts as a reset device does


def test_probe_and_scratch():
    rc.check_probe_and_scratch(RefModel(data_width=128), 128, 7)
    other = Mmio(RefModel(dma=False, ih=False)).probe()
    assert (other.has_dma, other.has_ih, other.dma_max_bytes) == (False, False, 0)


def test_registers_md_reset_values():
    rc.check_registers_md_reset_values(RefModel())


def test_soft_reset_per_engine():
    rc.check_soft_reset_ends_per_engine(RefModel())


def test_unmapped_access():
    dev = RefModel()
    rc.check_unmapped_access(dev)
    with pytest.raises(ValueError, match="outside the 16-bit register space"):
        dev.mmio_read32(0x10000)
    with pytest.raises(ValueError, match="MMIO value must fit in 32 bits"):
        dev.mmio_write32(0, 1 << 32)


def test_irq_line():
    dev = RefModel()
    rc.check_irq_line(dev)
    io = Mmio(dev)  # and on the model, exactly: no time passes while the line is high
    io.write_fields(regs.INT_FORCE, EOP=1)
    t0 = dev.now()
    assert dev.wait_irq(100) and dev.now() == t0


def test_time_costs():
    dev = RefModel(mmio_cycles=5)
    assert dev.now() == 0
    dev.mmio_read32(0)
    dev.mmio_write32(regs.SCRATCH.addr(), 1)
    dev.mmio_write_bytes(regs.SCRATCH.addr() + 3, b"\x01\x02")  # two words touched
    dev.delay(7)
    dev.delay(0)
    assert dev.now() == 4 * 5 + 7
    assert dev.mmio_read32(regs.SCRATCH.addr()) == 0x0100_0001
    assert dev.mmio_read32(regs.CONTROL.addr()) == 0  # 0x02 went to CONTROL: the SOFT_RESET pulse


# ---------------------------------------------------------------------------- packets

def test_nop_filler_and_rptr_writeback(drv):
    drv.submit(pm4.nop(2), [pm4.TYPE2_FILLER], [pm4.TYPE2_FILLER], pm4.write_data(OUT, [1, 2]))
    assert r32(drv.dev, OUT, 2) == [1, 2]
    assert drv.read(regs.RB_RPTR) == drv.read(regs.RB_WPTR) == 11
    assert r32(drv.dev, RPTR_WB) == 11
    assert (drv.perf(NOP), drv.perf(WRITE_DATA)) == (3, 1)  # fillers count as NOPs
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 11
    st = drv.fields(regs.STATUS)
    assert (st["IDLE"], st["RB_EMPTY"], st["HALTED"], st["ERROR"], st["LEVEL"]) == (1, 1, 0, 0, 0)


def test_write_data_many_dwords():
    drv = Driver(ring_log2=13)
    data = np.arange(5000, dtype=np.uint32) * 0x01010101
    drv.submit(pm4.write_data(OUT + 4, data))
    assert np.array_equal(drv.dev.mem[OUT + 4:OUT + 4 + 4 * 5000].view("<u4"), data)
    assert r32(drv.dev, OUT) == 0 and r32(drv.dev, OUT + 4 * 5001) == 0
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 5004


def test_packet_straddling_the_ring_wrap():
    d = Driver(ring_log2=4)
    d.submit(pm4.nop(13))  # 14 dwords: the next packet starts 2 dwords before the end
    d.submit(pm4.write_data(OUT, [0xAAAA, 0xBBBB]))  # 6 dwords: 2 at the end, 4 at the start
    assert r32(d.dev, OUT, 2) == [0xAAAA, 0xBBBB]
    assert d.read(regs.RB_RPTR) == 20 and r32(d.dev, RPTR_WB) == 20
    d.submit(pm4.release_mem(OUT + 8, 7))  # the ring keeps working after the wrap
    assert r32(d.dev, OUT + 8) == 7 and d.read(regs.RB_RPTR) == 28


def submit_ibs_and_chains(drv) -> None:
    """IB1 calls IB2, then CHAINs to IB1B, which calls IB2B, which CHAINs to IB2C; each
    writes its dword of OUT[0:8] in order (also a tests/scenarios.py scenario)."""
    ib2c = pm4.write_data(OUT + 0x18, [6])
    ib2b = pm4.write_data(OUT + 0x14, [5]) + pm4.indirect_buffer(IB2C, len(ib2c), chain=1)
    ib1b = pm4.write_data(OUT + 0x10, [4]) + pm4.indirect_buffer(IB2B, len(ib2b))
    ib2 = pm4.write_data(OUT + 0x04, [2])
    ib1 = (pm4.write_data(OUT, [1]) + pm4.indirect_buffer(IB2, len(ib2)) + pm4.write_data(OUT + 0x08, [3])
           + pm4.indirect_buffer(IB1B, len(ib1b), chain=1) + pm4.write_data(OUT + 0x100, [0xBAD]))
    for base, body in ((IB1, ib1), (IB1B, ib1b), (IB2, ib2), (IB2B, ib2b), (IB2C, ib2c)):
        w32(drv.dev, base, body)
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)), pm4.write_data(OUT + 0x1C, [7]))


def test_two_level_ibs_and_chain(drv):
    dev = drv.dev
    submit_ibs_and_chains(drv)
    assert r32(dev, OUT, 8) == [1, 2, 3, 0, 4, 5, 6, 7]
    assert r32(dev, OUT + 0x100) == 0, "the rest of an IB after a CHAIN never runs"
    assert drv.perf(INDIRECT_BUFFER) == 5 and drv.perf(WRITE_DATA) == 7
    assert drv.read(regs.RB_RPTR) == 4 + 5
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING
    # ring 9 + IB1 up to the CHAIN (5+4+5+4) + IB2 5 + IB1b 9 + IB2b 9 + IB2c 5
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 9 + 18 + 5 + 9 + 9 + 5


def test_rptr_moves_past_an_ib_only_when_it_has_run(drv):
    ib = pm4.wait_reg_mem(OUT, 1, 0xFFFF_FFFF, "EQ", poll_interval=4) + pm4.write_data(OUT + 4, [9])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.nop(1), pm4.indirect_buffer(IB1, len(ib)))
    st = drv.fields(regs.STATUS)
    assert (st["WAITING"], st["LEVEL"], st["IDLE"], st["RB_EMPTY"]) == (1, IbLevel.IB1, 0, 0)
    assert drv.read(regs.RB_RPTR) == 2 and r32(drv.dev, RPTR_WB) == 2
    assert drv.perf(WAIT_REG_MEM) == 1, "counted when it starts"
    w32(drv.dev, OUT, [1])
    drv.dev.delay(4)
    assert r32(drv.dev, OUT + 4) == 9
    assert drv.read(regs.RB_RPTR) == 6 and r32(drv.dev, RPTR_WB) == 6
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING


def test_wait_reg_mem_released_by_a_later_cpu_write(drv):
    dev = drv.dev
    w32(dev, OUT, [0xABCD_0000])
    drv.submit(pm4.wait_reg_mem(OUT, 0x1234, 0xFFFF, "EQ", poll_interval=100),
               pm4.release_mem(OUT + 8, 0, data_sel="TIMESTAMP"))
    t0 = dev.now()  # the doorbell's time: the first poll
    assert drv.fields(regs.STATUS)["WAITING"] == 1
    w32(dev, OUT, [0xABCD_1234])  # high bits are masked off
    dev.delay(t0 + 99 - dev.now())
    assert r32(dev, OUT + 8, 2) == [0, 0], "released before the next poll"
    dev.delay(1)
    assert r32(dev, OUT + 8, 2) == [t0 + 100, 0], "released at the poll after the write"
    st = drv.fields(regs.STATUS)
    assert (st["WAITING"], st["IDLE"]) == (0, 1)
    assert drv.read(regs.RB_RPTR) == 15
    # busy: the cycles STATUS.IDLE was 0; no stalls, the model's memory answers at once
    assert (drv.read(regs.PERF_BUSY_CYCLES), drv.read(regs.PERF_STALL_CYCLES)) == (100, 0)
    assert drv.perf(WAIT_REG_MEM) == 1


WAITS = {  # function: (reference, a value that makes the wait block, one that releases it)
    "LT": (0x1234, 0x1234, 0x1233),
    "LE": (0x1234, 0x1235, 0x1234),
    "EQ": (0x1234, 0x1235, 0x1234),
    "NE": (0x1234, 0x1234, 0x1235),
    "GE": (0x1234, 0x1233, 0x1234),
    "GT": (0x1234, 0x1234, 0x1235),
}


@pytest.mark.parametrize("function", WAITS)
def test_wait_reg_mem_functions(drv, function):
    ref, blocks, releases = WAITS[function]
    w32(drv.dev, OUT, [0xFFFF_0000 | blocks])
    drv.submit(pm4.wait_reg_mem(OUT, ref, 0xFFFF, function, poll_interval=0), pm4.write_data(OUT + 4, [1]))
    assert drv.fields(regs.STATUS)["WAITING"] == 1 and r32(drv.dev, OUT + 4) == 0
    w32(drv.dev, OUT, [0xFFFF_0000 | releases])
    drv.dev.delay(1)  # POLL_INTERVAL 0 polls every cycle
    assert r32(drv.dev, OUT + 4) == 1
    assert drv.fields(regs.STATUS)["WAITING"] == 0


def test_wait_reg_mem_always_and_unsigned(drv):
    w32(drv.dev, OUT, [0x8000_0000])
    drv.submit(pm4.wait_reg_mem(OUT, 0x1234, 0, "ALWAYS"),
               pm4.wait_reg_mem(OUT, 0x7FFF_FFFF, 0xFFFF_FFFF, "GT"),
               pm4.write_data(OUT + 4, [1]))
    assert r32(drv.dev, OUT + 4) == 1 and drv.perf(WAIT_REG_MEM) == 2


def test_wait_irq_runs_time_to_a_release(drv):
    dev = drv.dev
    drv.io.write_fields(regs.INT_ENABLE, EOP=1)
    drv.submit(pm4.wait_reg_mem(OUT, 1, 1, "EQ", poll_interval=50),
               pm4.release_mem(OUT + 8, 0x55, int_sel="SEND_INT_ON_CONFIRM"))
    t0 = dev.now()
    assert not dev.wait_irq(1000) and dev.now() == t0 + 1000, "nothing can release the wait"
    w32(dev, OUT, [1])
    assert dev.wait_irq(1000)
    assert dev.now() == t0 + 1050 and r32(dev, OUT + 8) == 0x55


def test_release_mem_and_ih(drv):
    dev = drv.dev
    drv.io.write_fields(regs.INT_ENABLE, EOP=1)
    drv.submit(pm4.release_mem(OUT, 0x1111_2222),
               pm4.release_mem(OUT + 8, 0x3333_4444_5555_6666, data_sel="DATA_64"))
    assert r32(dev, OUT, 4) == [0x1111_2222, 0, 0x5555_6666, 0x3333_4444]
    assert not dev.irq_level() and drv.read(regs.IH_WPTR) == 0
    dev.delay(123)
    drv.submit(pm4.release_mem(OUT + 16, 0, data_sel="TIMESTAMP", int_sel="SEND_INT_ON_CONFIRM",
                               int_ctxid=0xC0DE))
    t = dev.now()
    assert r32(dev, OUT + 16, 2) == [t, 0]
    assert dev.irq_level() and dev.wait_irq(10)
    assert drv.fields(regs.INT_STATUS) == {"IH_PENDING": 1, "EOP": 1, "CP_ERROR": 0, "IH_OVERFLOW": 0}
    assert drv.read(regs.IH_WPTR) == 32 and r32(dev, IH_WPTR_WB) == 32  # bytes, as amdgpu's
    [e] = drv.ih_entries()
    # AMD's soc15 entry: client GRBM_CP (0x14), source CP_EOP_INTERRUPT (181), context id in
    # src_data[0]
    assert e == {"CLIENT_ID": 0x14, "SOURCE_ID": 181, "RING_ID": 0, "VMID": 0, "VMID_SRC": 0,
                 "TIMESTAMP_LO": t, "TIMESTAMP_HI": 0, "TIMESTAMP_SRC": 0, "PASID": 0,
                 "DATA0": 0xC0DE, "DATA1": 0, "DATA2": 0, "DATA3": OUT + 16}
    assert r32(dev, IH_RING) == 0x0000B514
    # Interrupt only (no data): INT_SEL SEND_INT.
    drv.submit(pm4.release_mem(OUT + 24, 0xF00D, data_sel="NONE", int_sel="SEND_INT", int_ctxid=2))
    assert r32(dev, OUT + 24) == 0
    e = drv.ih_entries()[1]
    assert (e["DATA0"], e["DATA1"], e["DATA3"]) == (2, 0xF00D, OUT + 24)
    # SEND_DATA_ON_CONFIRM (Mesa's EOP_INT_SEL_SEND_DATA_AFTER_WR_CONFIRM): data, no interrupt
    drv.submit(pm4.release_mem(OUT + 28, 0xBEEF, int_sel="SEND_DATA_ON_CONFIRM", int_ctxid=3))
    assert r32(dev, OUT + 28) == 0xBEEF and len(drv.ih_entries()) == 2
    # Consuming the entries drops IH_PENDING; EOP stays until cleared.
    drv.io.write(regs.IH_RPTR, 64)
    assert drv.fields(regs.INT_STATUS)["IH_PENDING"] == 0 and dev.irq_level()
    drv.io.write(regs.INT_STATUS, regs.INT_STATUS.EOP.put(1))
    assert not dev.irq_level()
    assert drv.perf(RELEASE_MEM) == 5


def test_irq_follows_ih_pending_only(drv):
    drv.io.write_fields(regs.INT_ENABLE, IH_PENDING=1)
    drv.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"))
    assert drv.dev.irq_level()
    drv.io.write(regs.IH_RPTR, drv.read(regs.IH_WPTR))
    assert not drv.dev.irq_level()


def test_ih_overflow_and_disabled_ih():
    d = Driver(ih_log2=0)  # room for one entry
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"), pm4.release_mem(OUT + 4, 2, int_sel="SEND_INT"))
    assert r32(d.dev, OUT, 2) == [1, 2]
    assert d.read(regs.IH_WPTR) == 32
    assert d.fields(regs.INT_STATUS) == {"IH_PENDING": 1, "EOP": 1, "CP_ERROR": 0, "IH_OVERFLOW": 1}
    assert d.ih_entries()[0]["DATA1"] == 1
    d.io.write(regs.IH_RPTR, 32)
    d.submit(pm4.release_mem(OUT + 8, 3, int_sel="SEND_INT"))  # the ring wraps onto the same slot
    assert d.read(regs.IH_WPTR) == 64 and r32(d.dev, IH_RING + 20) == 3
    d.io.write(regs.IH_CNTL, 0)
    d.submit(pm4.release_mem(OUT + 12, 4, int_sel="SEND_INT"))
    assert d.read(regs.IH_WPTR) == 64 and r32(d.dev, OUT + 12) == 4


def test_ih_size_below_one_entry_is_one_entry():
    d = Driver(ih_log2=0)
    d.io.write_fields(regs.IH_SIZE, LOG2_DWORDS=0)  # 1 dword: smaller than an entry
    d.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"), pm4.release_mem(OUT + 4, 2, int_sel="SEND_INT"))
    assert d.read(regs.IH_WPTR) == 32 and d.fields(regs.INT_STATUS)["IH_OVERFLOW"] == 1
    assert r32(d.dev, IH_RING + 32, 8) == [0] * 8, "nothing past the one entry"


def test_halt(drv):
    drv.io.write_fields(regs.CONTROL, HALT=1)
    assert drv.fields(regs.STATUS)["HALTED"] == 1
    drv.submit(pm4.write_data(OUT, [1]))
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["IDLE"], st["RB_EMPTY"]) == (1, 0, 0)
    assert r32(drv.dev, OUT) == 0 and drv.read(regs.RB_RPTR) == 0
    drv.io.write(regs.CONTROL, 0)
    assert r32(drv.dev, OUT) == 1 and drv.read(regs.RB_RPTR) == 5
    assert drv.fields(regs.STATUS)["HALTED"] == 0
    # HALT lets a WAIT_REG_MEM in progress finish, then stops before the next packet.
    drv.submit(pm4.wait_reg_mem(OUT + 8, 1, 1, "EQ", poll_interval=1), pm4.write_data(OUT + 4, [2]))
    drv.io.write_fields(regs.CONTROL, HALT=1)
    assert drv.fields(regs.STATUS)["HALTED"] == 0, "still waiting"
    w32(drv.dev, OUT + 8, [1])
    drv.dev.delay(1)
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["WAITING"]) == (1, 0) and r32(drv.dev, OUT + 4) == 0
    drv.io.write(regs.CONTROL, 0)
    assert r32(drv.dev, OUT + 4) == 2


def test_doorbell_ignored_while_ring_disabled():
    dev = RefModel()
    io = Mmio(dev)
    io.write(regs.RB_DOORBELL, 5)
    assert io.read(regs.RB_WPTR) == 0 and io.read(regs.RB_DOORBELL) == 0


def test_perf_counters_clear_and_soft_reset(drv):
    drv.submit(pm4.nop(1), pm4.write_data(OUT, [1]), pm4.release_mem(OUT + 8, 1))
    assert [drv.perf(i) for i in range(8)] == [1, 1, 0, 0, 1, 0, 0, 0]
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 2 + 5 + 8
    drv.io.write_fields(regs.CONTROL, SOFT_RESET=1)
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 15, "soft reset keeps the counters"
    drv.io.write_fields(regs.CONTROL, PERF_CLEAR=1)
    assert [drv.perf(i) for i in range(8)] == [0] * 8 and drv.read(regs.PERF_DWORDS_FETCHED) == 0


def test_trace():
    lines = []
    d = Driver(trace=lines.append)
    ib = pm4.write_data(OUT, [1]) + [pm4.TYPE2_FILLER]
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib)), pm4.release_mem(OUT, 1, int_sel="SEND_INT_ON_CONFIRM"))
    assert lines == [
        "RING+0x0000: INDIRECT_BUFFER  base=0x00050000 size_dw=6",
        "IB1+0x0000: WRITE_DATA  addr=0x00040000 data=[0x00000001]",
        "IB1+0x0014: TYPE2 FILLER",
        "RING+0x0010: RELEASE_MEM  int_sel=SEND_INT_ON_CONFIRM addr=0x00040000 data=0x00000001",
    ]


# ---------------------------------------------------------------------------- errors

def bad(name, fields=None, data=(), count=None):
    return pm4.encode_fields(name, fields or {}, data, count=count)


# (packets after a 2-dword NOP at ring offset 0, code, opcode, offset in the ring)
RING_ERRORS = {
    "illegal_opcode": ([pm4.header(0x7B, 1), 0, 0], CpError.ILLEGAL_OPCODE, 0x7B),
    "type0_header": ([0x0000_1234], CpError.ILLEGAL_OPCODE, 0),
    "type1_header": ([0x4000_0000], CpError.ILLEGAL_OPCODE, 0),
    "count_too_small": (bad("WRITE_DATA", {"DST_SEL": 5}, count=2), CpError.BAD_COUNT, OP["WRITE_DATA"]),
    "count_fixed_mismatch": (bad("RELEASE_MEM", count=7) + [0], CpError.BAD_COUNT, OP["RELEASE_MEM"]),
    "past_wptr": ([pm4.header(OP["NOP"], 20), 0], CpError.BAD_COUNT, OP["NOP"]),
    "write_data_dst_sel": (bad("WRITE_DATA", {"DST_SEL": 0, "ADDR_LO": OUT >> 2}, [1]),
                           CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_engine": (bad("WRITE_DATA", {"DST_SEL": 5, "ENGINE_SEL": 2, "ADDR_LO": OUT >> 2}, [1]),
                          CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_gds": (bad("WRITE_DATA", {"DST_SEL": 3, "ADDR_LO": OUT >> 2}, [1]),
                       CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_unsupported_first": (bad("WRITE_DATA", {"DST_SEL": 0}, [1])[:2] + [OUT + 2, 0, 1],
                                     CpError.UNSUPPORTED, OP["WRITE_DATA"]),
    "write_data_misaligned": (pm4.write_data(OUT, [1])[:2] + [OUT + 2] + [0, 1],
                              CpError.FENCE_MISALIGNED, OP["WRITE_DATA"]),
    "ib_misaligned": (pm4.indirect_buffer(IB1, 4)[:1] + [IB1 + 1] + pm4.indirect_buffer(IB1, 4)[2:],
                      CpError.IB_MISALIGNED, OP["INDIRECT_BUFFER"]),
    "ib_size_zero": (bad("INDIRECT_BUFFER", {"IB_BASE_LO": IB1 >> 2, "VALID": 1}),
                     CpError.IB_SIZE_ZERO, OP["INDIRECT_BUFFER"]),
    "ib_chain_before_misaligned": (pm4.indirect_buffer(IB1, 4)[:1] + [IB1 + 1, 0, 4 | 1 << 20],
                                   CpError.UNSUPPORTED, OP["INDIRECT_BUFFER"]),
    "chain_in_ring": (pm4.indirect_buffer(IB1, 4, chain=1), CpError.UNSUPPORTED, OP["INDIRECT_BUFFER"]),
    "wait_function_7": (bad("WAIT_REG_MEM", {"FUNCTION": 7, "MEM_SPACE": 1, "ADDR_LO": OUT >> 2}),
                        CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "wait_register_space": (bad("WAIT_REG_MEM", {"FUNCTION": 3, "MEM_SPACE": 0, "ADDR_LO": OUT >> 2}),
                            CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "wait_misaligned": (pm4.wait_reg_mem(OUT, 0, 0, "EQ")[:2] + [OUT + 1] + pm4.wait_reg_mem(OUT, 0, 0, "EQ")[3:],
                        CpError.FENCE_MISALIGNED, OP["WAIT_REG_MEM"]),
    "release_data_sel": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 5, "ADDR_LO": OUT >> 2}),
                         CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "release_int_sel": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "INT_SEL": 4, "ADDR_LO": OUT >> 2}),
                        CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "release_dst_sel_queue": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 1, "DST_SEL": 2,
                                                  "ADDR_LO": OUT >> 2}), CpError.UNSUPPORTED, OP["RELEASE_MEM"]),
    "wait_register_pfp": (bad("WAIT_REG_MEM", {"FUNCTION": 3, "MEM_SPACE": 0, "ENGINE": 1, "ADDR_LO": OUT >> 2}),
                          CpError.UNSUPPORTED, OP["WAIT_REG_MEM"]),
    "dma_dst_nowhere": (bad("DMA_DATA", {"DST_SEL": 2, "BYTE_COUNT": 16}), CpError.UNSUPPORTED, OP["DMA_DATA"]),
    "release_misaligned_64": (bad("RELEASE_MEM", {"EVENT_INDEX": 5, "DATA_SEL": 2, "ADDR_LO": (OUT + 4) >> 2}),
                              CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "release_none_misaligned": (pm4.release_mem(OUT, 1, data_sel="NONE")[:3] + [OUT + 2]
                                + pm4.release_mem(OUT, 1)[4:], CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "release_misaligned_32": (pm4.release_mem(OUT, 1)[:3] + [OUT + 2] + pm4.release_mem(OUT, 1)[4:],
                              CpError.FENCE_MISALIGNED, OP["RELEASE_MEM"]),
    "dma_byte_count": (pm4.dma_data(OUT, OUT + 64, 16)[:6] + [(1 << 20) + 1], CpError.DMA_BYTE_COUNT, OP["DMA_DATA"]),
    "dma_src_gds": (bad("DMA_DATA", {"SRC_SEL": 1, "BYTE_COUNT": 16}), CpError.UNSUPPORTED, OP["DMA_DATA"]),
    "dma_bad_count": (bad("DMA_DATA", count=4), CpError.BAD_COUNT, OP["DMA_DATA"]),
}


@pytest.mark.parametrize("case", RING_ERRORS)
def test_packet_errors_in_the_ring(drv, case):
    packet, code, opcode = RING_ERRORS[case]
    drv.submit(pm4.nop(1), packet, pm4.write_data(OUT + 0x80, [1]))
    drv.expect_error(code, IbLevel.RING, opcode, RING + 8, 2)
    assert drv.read(regs.RB_RPTR) == 2, "rptr stays at the faulting packet"
    assert r32(drv.dev, OUT + 0x80) == 0 and r32(drv.dev, OUT) == 0, "nothing after the error runs"
    drv.recover()


def test_bad_count_past_the_end_of_an_ib(drv):
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.indirect_buffer(IB1, len(ib) - 1))
    drv.expect_error(CpError.BAD_COUNT, IbLevel.IB1, OP["WRITE_DATA"], IB1 + 8, 2)
    assert r32(drv.dev, OUT) == 0
    drv.recover()


def test_ib_nesting_and_check_order(drv):
    inner = pm4.nop(1)
    w32(drv.dev, IB1 + 0x800, inner)
    ib2 = pm4.nop(1) + pm4.indirect_buffer(IB1 + 0x800, 2)[:1] + [IB1 + 0x802, 0, 2] \
        + pm4.indirect_buffer(IB1 + 0x800, 2)
    ib1 = pm4.indirect_buffer(IB2, len(ib2))
    w32(drv.dev, IB2, ib2)
    w32(drv.dev, IB1, ib1)
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)))
    # a misaligned base is IB_MISALIGNED even where the nesting is too deep: it is checked first
    drv.expect_error(CpError.IB_MISALIGNED, IbLevel.IB2, OP["INDIRECT_BUFFER"], IB2 + 8, 2)
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.IB2
    drv.recover()
    w32(drv.dev, IB2 + 8, pm4.nop(3))
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)))
    drv.expect_error(CpError.IB_NESTING, IbLevel.IB2, OP["INDIRECT_BUFFER"], IB2 + 24, 6)
    drv.recover()


def test_check_order_opcode_before_count_before_fields(drv):
    drv.submit([pm4.header(0x7B, 0x3FFF)])  # unknown opcode, count far past wptr
    drv.expect_error(CpError.ILLEGAL_OPCODE, IbLevel.RING, 0x7B, RING, 0)
    drv.recover()
    at = drv.wptr
    drv.submit(bad("DMA_DATA", {"SRC_SEL": 1}, count=9))  # a bad count beats UNSUPPORTED
    drv.expect_error(CpError.BAD_COUNT, IbLevel.RING, OP["DMA_DATA"], RING + 4 * at, at)
    drv.recover()


def test_doorbell_errors(drv):
    drv.submit(pm4.nop(2))  # rptr = wptr = 3
    drv.io.write(regs.RB_DOORBELL, 2)
    drv.expect_error(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, 2, 3)
    assert drv.read(regs.RB_WPTR) == 3
    drv.io.write(regs.RB_DOORBELL, 10)
    assert drv.error()[0] == CpError.DOORBELL_BACKWARDS, "the first error stays latched"
    assert drv.read(regs.RB_WPTR) == 3, "doorbells are ignored while stopped"
    drv.recover()
    drv.io.write(regs.RB_DOORBELL, 5 + 256 + 1)  # rptr 5: one dword too many
    drv.expect_error(CpError.DOORBELL_OVERFLOW, IbLevel.RING, 0, 5 + 257, 5)
    drv.recover()
    drv.io.write(regs.RB_DOORBELL, 5 + 0x8000_0000)  # backwards in int32 terms
    drv.expect_error(CpError.DOORBELL_BACKWARDS, IbLevel.RING, 0, 5 + 0x8000_0000, 5)


def test_doorbell_full_ring_is_fine():
    d = Driver(ring_log2=3)
    d.submit(pm4.nop(7))  # exactly the ring size
    assert d.read(regs.RB_RPTR) == 8 and d.error()[0] == 0


def test_bus_error_on_a_write(drv):
    drv.dev.configure(error_window=(OUT + 0x20, OUT + 0x28, "SLVERR"), rd_latency=30, stall={"r": 0.5})
    data = list(range(1, 17))  # OUT+0x10 .. OUT+0x50: blocks 0x00, 0x20, 0x40
    drv.submit(pm4.nop(1), pm4.write_data(OUT + 0x10, data))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["WRITE_DATA"], OUT + 0x20, 2)
    assert r32(drv.dev, OUT + 0x10, 16) == [1, 2, 3, 4, 0, 0, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0]
    assert drv.perf(WRITE_DATA) == 1, "it started executing"
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 2 + 4 + 12
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_errors_on_fetch(drv):
    # A payload dword of an IB packet in a SLVERR window: ADDR is that dword, OFFSET its header.
    ib = pm4.nop(1) + pm4.write_data(OUT, [1, 2])
    w32(drv.dev, IB1, ib)
    drv.dev.configure(error_window=(IB1 + 16, IB1 + 24, "SLVERR"))
    drv.submit(pm4.indirect_buffer(IB1, len(ib)))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.IB1, OP["WRITE_DATA"], IB1 + 16, 2)
    assert drv.read(regs.PERF_DWORDS_FETCHED) == 4 + 2 + 3, "the faulting dword was consumed"
    drv.dev.configure(error_window=None)
    drv.recover()
    # An IB beyond the memory: its header fetch answers DECERR.
    far = 1 << 40
    drv.submit(pm4.indirect_buffer(far, 8))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.IB1, 0, far, 0)  # no header, no opcode
    drv.recover()


def test_prefetch_past_the_packet_does_not_fault(drv):
    drv.dev.configure(error_window=(RING + 24, RING + 0x1000, "DECERR"))
    drv.submit(pm4.write_data(OUT, [5]))  # 5 dwords; the window starts 1 dword after
    assert r32(drv.dev, OUT) == 5 and drv.error()[0] == 0


def test_bus_error_on_a_poll_and_on_a_fence(drv):
    drv.dev.configure(error_window=(OUT + 0x100, OUT + 0x108, "DECERR"))
    drv.submit(pm4.wait_reg_mem(OUT + 0x104, 0, 0, "ALWAYS"))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.RING, OP["WAIT_REG_MEM"], OUT + 0x104, 0)
    drv.recover()
    at = drv.wptr
    drv.submit(pm4.release_mem(OUT + 0x100, 1, data_sel="DATA_64", int_sel="SEND_INT"))
    drv.expect_error(CpError.BUS_DECERR, IbLevel.RING, OP["RELEASE_MEM"], OUT + 0x100, at)
    assert drv.fields(regs.INT_STATUS)["EOP"] == 0, "no interrupt for a fence that was not written"
    drv.recover()


def test_bus_error_while_waiting(drv):
    drv.submit(pm4.wait_reg_mem(OUT, 1, 1, "EQ", poll_interval=10))
    drv.dev.configure(error_window=(OUT, OUT + 8, "SLVERR"))
    drv.dev.delay(10)
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["WAIT_REG_MEM"], OUT, 0)
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_error_on_rptr_writeback(drv):
    drv.dev.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    drv.submit(pm4.nop(2), pm4.nop(1))
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["NOP"], RPTR_WB, 0)
    assert drv.read(regs.RB_RPTR) == 3, "rptr moved before its write-back failed"
    drv.dev.configure(error_window=None)
    drv.recover()


def test_bus_error_on_rptr_writeback_after_an_ib(drv):
    ib = pm4.write_data(OUT, [1])
    w32(drv.dev, IB1, ib)
    drv.submit(pm4.nop(1))
    drv.dev.configure(error_window=(RPTR_WB, RPTR_WB + 8, "SLVERR"))
    drv.submit(pm4.indirect_buffer(IB1, len(ib)))
    # the write-back belongs to the ring's INDIRECT_BUFFER packet, which has just finished
    drv.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["INDIRECT_BUFFER"], RPTR_WB, 2)
    assert drv.read(regs.RB_RPTR) == 6 and r32(drv.dev, OUT) == 1
    assert drv.fields(regs.STATUS)["LEVEL"] == IbLevel.RING


def test_halted_reads_0_once_an_error_stopped_the_cp(drv):
    drv.io.write_fields(regs.CONTROL, HALT=1)
    drv.io.write(regs.RB_DOORBELL, 1000)
    st = drv.fields(regs.STATUS)
    assert (st["HALTED"], st["ERROR"], st["IDLE"]) == (0, 1, 1)


def test_bus_error_on_the_ih_ring(drv):
    drv.dev.configure(error_window=(IH_RING, IH_RING + 32, "SLVERR"))
    drv.submit(pm4.release_mem(OUT, 1, int_sel="SEND_INT"))
    assert r32(drv.dev, OUT) == 1
    assert drv.error() == (CpError.BUS_SLVERR, IbLevel.RING, OP["RELEASE_MEM"], IH_RING, 0)
    assert drv.read(regs.IH_WPTR) == 0, "the error entry could not be written either"
    assert drv.fields(regs.INT_STATUS)["CP_ERROR"] == 1
    drv.dev.configure(error_window=None)
    drv.recover()


def test_dma_byte_count():
    d = Driver(dma=True, dma_max_bytes=4096)
    d.submit(pm4.nop(1), pm4.dma_data(OUT, OUT + 0x1000, 4097))
    d.expect_error(CpError.DMA_BYTE_COUNT, IbLevel.RING, OP["DMA_DATA"], RING + 8, 2)
    d.recover()


# ---------------------------------------------------------------------------- DMA (dma=True)

def test_dma_copy_and_fill():
    d = Driver(dma=True)
    dev = d.dev
    src = np.arange(1000, dtype=np.uint8) * 7 % 251
    dev.mem[OUT + 3:OUT + 1003] = src
    d.submit(pm4.dma_data(OUT + 0x2001, OUT + 3, 1000),
             pm4.dma_data(OUT + 0x3002, 0xA1B2C3D4, 7, src_sel="DATA"),
             pm4.dma_data(OUT + 0x4000, OUT, 0))
    assert np.array_equal(dev.mem[OUT + 0x2001:OUT + 0x2001 + 1000], src)
    assert dev.mem[OUT + 0x2000] == 0 and dev.mem[OUT + 0x2001 + 1000] == 0
    # a fill puts byte (a mod 4) of the value at address a
    assert dev.mem[OUT + 0x3001:OUT + 0x300A].tolist() == [0, 0xB2, 0xA1, 0xD4, 0xC3, 0xB2, 0xA1, 0xD4, 0]
    assert d.perf(DMA_DATA) == 3
    # the engine reads whole 8-byte beats: [OUT, OUT + 1008) for 1000 bytes from OUT + 3
    assert (d.read(regs.PERF_DMA_BYTES_READ), d.read(regs.PERF_DMA_BYTES_WRITTEN)) == (1008, 1007)


def test_dma_bus_error():
    d = Driver(dma=True)
    d.dev.configure(error_window=(OUT + 0x100, OUT + 0x200, "SLVERR"))
    d.dev.mem[OUT:OUT + 0x400] = 0xEE
    d.submit(pm4.dma_data(OUT + 0x1000, OUT + 0xF0, 0x40))
    d.expect_error(CpError.BUS_SLVERR, IbLevel.RING, OP["DMA_DATA"], OUT + 0x100, 0)
    assert d.dev.mem[OUT + 0x1000:OUT + 0x1010].tolist() == [0xEE] * 16
    assert d.dev.mem[OUT + 0x1010] == 0


# ---------------------------------------------------------------------------- configure, snapshot

def test_configure_checks_like_the_rtl_memory_model():
    dev = RefModel()
    with pytest.raises(ValueError, match="unknown AXI response"):
        dev.configure(error_window=(0, 16, "BAD"))
    with pytest.raises(ValueError, match="rd_latency must be 0..65535"):
        dev.configure(rd_latency=70000)
    with pytest.raises(ValueError, match="unknown stall channel"):
        dev.configure(stall={"x": 0.1})
    with pytest.raises(ValueError, match="multiple of 32"):
        RefModel(mem_size=100)


def stream(d):
    ib = pm4.write_data(OUT + 0x40, [1, 2, 3]) + pm4.release_mem(OUT + 0x50, 9, int_sel="SEND_INT", int_ctxid=4)
    w32(d.dev, IB1, ib)
    d.submit(pm4.indirect_buffer(IB1, len(ib)), pm4.release_mem(OUT, 0, data_sel="TIMESTAMP"))


def test_snapshot_compares_two_runs():
    a, b = Driver(), Driver()
    stream(a)
    b.dev.delay(1000)  # other timing, same state
    stream(b)
    sa, sb = a.dev.snapshot(exclude=[(OUT, OUT + 8)]), snapshot(b.dev, exclude=[(OUT, OUT + 8)])
    assert diff_snapshots(sa, sb) == []
    assert "TIMESTAMP_LO" not in sa["regs"] and "PERF_BUSY_CYCLES" not in sa["regs"]
    assert "RB_DOORBELL" not in sa["regs"] and sa["regs"]["PERF_PACKETS[4]"] == 2
    assert sa["ih"] == [dict(ih.decode(ih.encode(CLIENT_ID=ih.Client.GRBM_CP, SOURCE_ID=ih.Source.EOP,
                                                 DATA0=4, DATA1=9, DATA3=OUT + 0x50)))]
    assert a.dev.snapshot()["mem"] != b.dev.snapshot()["mem"], "the timestamps differ"
    # the RELEASE_MEM timestamp and the IH entry's: 104 and 1104 cycles, two bytes each
    assert mem_diff(a.dev.mem, b.dev.mem) == [(IH_RING + 4, IH_RING + 6), (OUT, OUT + 2)]
    b.dev.mem[OUT + 0x44] = 0x77
    b.io.write(regs.SCRATCH, 3)
    sb2 = b.dev.snapshot(exclude=[(OUT, OUT + 8)])
    assert diff_snapshots(sa, sb2, ("model", "rtl")) == [
        "SCRATCH: model 0x0, rtl 0x3",
        f"memory digests differ (model {sa['mem'][:12]}, rtl {sb2['mem'][:12]}); use mem_diff"]
    assert mem_diff(a.dev.mem, b.dev.mem, exclude=[(OUT, OUT + 8), (IH_RING, IH_RING + 16)]) == [
        (OUT + 0x44, OUT + 0x45)]


def test_mem_diff_by_qwords_is_the_byte_compare():
    """mem_diff compares 8 bytes at a time where it can: the same ranges as a byte compare,
    at the ends of the memory and of qwords, with exclusions and limits, and on memories
    it cannot view as qwords."""
    def by_bytes(a, b, exclude=(), limit=16):
        idx = np.flatnonzero(a != b)
        for x, y in exclude:
            idx = idx[(idx < x) | (idx >= y)]
        if not idx.size:
            return []
        breaks = np.flatnonzero(np.diff(idx) > 1)
        starts, ends = np.concatenate(([idx[0]], idx[breaks + 1])), np.concatenate((idx[breaks], [idx[-1]])) + 1
        return [(int(s), int(e)) for s, e in zip(starts[:limit], ends[:limit])]

    rng = random.Random(5)
    for size in (64, 1024, 4100):
        for _ in range(60):
            a = np.frombuffer(rng.randbytes(size), dtype=np.uint8).copy()
            b = a.copy()
            for _ in range(rng.choice([0, 1, 3, 40])):
                at = rng.choice([0, size - 1, rng.randrange(size)])
                n = rng.choice([1, 2, 7, 8, 9, 33])
                b[at:at + n] ^= np.uint8(rng.randrange(1, 256))
            exclude = [(x, x + rng.randrange(1, 64)) for x in (rng.randrange(size) for _ in range(rng.randrange(3)))]
            limit = rng.choice([1, 4, 16, 1 << 20])
            assert mem_diff(a, b, exclude, limit) == by_bytes(a, b, exclude, limit)
            assert mem_diff(a[::2], b[::2], exclude, limit) == by_bytes(a[::2], b[::2], exclude, limit)


def test_sparse_memory_digest_is_exact():
    """snapshot()'s memory digest (sparse_digest: the nonzero qwords only) is equal exactly
    when the memories are, outside the excluded byte ranges, as a full hash would be."""
    from testbench.refmodel.snapshot import _masked, sparse_digest

    rng = np.random.default_rng(7)
    size = 64 << 10
    outcomes = set()
    for _ in range(400):
        a = np.zeros(size, np.uint8)
        for _ in range(int(rng.integers(0, 5))):
            at, n = int(rng.integers(0, size - 64)), int(rng.integers(1, 64))
            a[at:at + n] = rng.integers(0, 256, n, dtype=np.uint8)
        b = a.copy()
        if rng.random() < 0.6:  # one bit flipped somewhere, perhaps inside an excluded range
            k = int(rng.integers(0, size))
            b[k] ^= np.uint8(1 << int(rng.integers(0, 8)))
        ex = [(int(x), int(x) + int(rng.integers(1, 20))) for x in rng.integers(0, size - 20, int(rng.integers(0, 3)))]
        same = np.array_equal(_masked(a, ex), _masked(b, ex))
        assert (sparse_digest(a, ex) == sparse_digest(b, ex)) == same, (ex, np.flatnonzero(a != b))
        outcomes.add(same)
    assert outcomes == {True, False}
    # a value only inside an excluded range reads as zero memory; a byte beside it does not
    z, m = np.zeros(size, np.uint8), np.zeros(size, np.uint8)
    m[0x1005:0x1009] = 0xAB
    assert sparse_digest(m, [(0x1005, 0x1009)]) == sparse_digest(z) != sparse_digest(m, [(0x1006, 0x1009)])
    assert sparse_digest(z) != sparse_digest(np.zeros(2 * size, np.uint8))  # the size counts
    odd = np.zeros(size + 3, np.uint8)  # not whole 4 KiB blocks: the full hash
    assert sparse_digest(odd).startswith("full:")
