"""The driver side of the reference model's tests: the addresses a test's memory is laid out
at, and `Driver`, which programs the ring and the IH ring as the KMD does and submits
packets, all through the Device API only (registers by their kmd_model.regs names,
results read back through MMIO and the memory view).

tests/model/refmodel/test_refmodel_*.py use it, and so do tests/difftest/scenarios.py,
tests/model/refmodel/register_checks.py and tests/spec/amd/test_amd_conformance.py.
"""

from __future__ import annotations

import numpy as np

from kmd_model import regs
from kmd_model.mmio import Mmio
from spec import ih, pm4
from spec.packets import PACKETS, by_name
from testbench.refmodel import RefModel

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


def submit_ibs_and_chains(drv) -> None:
    """IB1 calls IB2, then CHAINs to IB1B, which calls IB2B, which CHAINs to IB2C; each
    writes its dword of OUT[0:8] in order (also a tests/difftest/scenarios.py scenario)."""
    ib2c = pm4.write_data(OUT + 0x18, [6])
    ib2b = pm4.write_data(OUT + 0x14, [5]) + pm4.indirect_buffer(IB2C, len(ib2c), chain=1)
    ib1b = pm4.write_data(OUT + 0x10, [4]) + pm4.indirect_buffer(IB2B, len(ib2b))
    ib2 = pm4.write_data(OUT + 0x04, [2])
    ib1 = (pm4.write_data(OUT, [1]) + pm4.indirect_buffer(IB2, len(ib2)) + pm4.write_data(OUT + 0x08, [3])
           + pm4.indirect_buffer(IB1B, len(ib1b), chain=1) + pm4.write_data(OUT + 0x100, [0xBAD]))
    for base, body in ((IB1, ib1), (IB1B, ib1b), (IB2, ib2), (IB2B, ib2b), (IB2C, ib2c)):
        w32(drv.dev, base, body)
    drv.submit(pm4.indirect_buffer(IB1, len(ib1)), pm4.write_data(OUT + 0x1C, [7]))
