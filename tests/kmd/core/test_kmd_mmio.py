"""The KMD's register access (kmd_model/mmio.py, kmd_model/regfield.py): 64-bit addresses over
LO/HI pairs, whole registers from named fields, the probe that refuses a device it does not
know, and the register manual `gpucosim regs NAME` prints from the same field shapes.
"""

from __future__ import annotations

import pytest

from gpucosim import regmap
from kmd_model import regs
from kmd_model.device import BusError
from kmd_model.mmio import Mmio, ProbeError
from testbench.refmodel import RefModel


class Recording(RefModel):
    """The model, with every MMIO write kept as (register name, value)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.writes: list[tuple[str, int]] = []

    def mmio_write32(self, offset: int, value: int) -> None:
        self.writes.append((next(r.NAME for r in regs.REGISTERS if r.ADDR == offset), value))
        super().mmio_write32(offset, value)


def test_a_64_bit_address_takes_every_value_its_pair_holds_and_no_other():
    """RB_BASE is bits 39:8 of the ring's address (AMD's base >> 8): LO takes 32 bits, HI its
    8; 0 and the widest value are addresses like any other (a page 0 to invalidate, a ring at
    the bottom of memory), one more is refused before either register is written."""
    dev = Recording()
    m = Mmio(dev)
    for addr, lo, hi in ((0, 0, 0), ((1 << 40) - 1, 0xFFFF_FFFF, 0xFF), (0x12_3456_789A, 0x3456_789A, 0x12)):
        dev.writes.clear()
        m.write64(regs.RB_BASE_LO, regs.RB_BASE_HI, addr)
        assert dev.writes == [("RB_BASE_LO", lo), ("RB_BASE_HI", hi)]
        assert m.read64(regs.RB_BASE_LO, regs.RB_BASE_HI) == addr
    dev.writes.clear()
    for addr in (1 << 40, -1):
        with pytest.raises(ValueError, match=rf"^RB_BASE: address {addr:#x} does not fit in 40 bits$"):
            m.write64(regs.RB_BASE_LO, regs.RB_BASE_HI, addr)
    assert dev.writes == []


def test_a_register_written_from_named_fields():
    """Each named field in place, the others 0; a field the register does not have, or a
    value wider than its field, is refused by name and nothing is written."""
    dev = Recording()
    m = Mmio(dev)
    m.write_fields(regs.SDMA_RB_CNTL, RB_SIZE=0x1F, RPTR_WRITEBACK_ENABLE=1)
    assert dev.writes == [("SDMA_RB_CNTL", 0x1F << 1 | 1 << 12)]
    dev.writes.clear()
    with pytest.raises(ValueError, match=r"^SDMA_RB_CNTL has no field 'ENABLE'$"):
        m.write_fields(regs.SDMA_RB_CNTL, ENABLE=1)
    with pytest.raises(ValueError, match=r"^SDMA_RB_CNTL has no field 'NAME'$"):
        m.write_fields(regs.SDMA_RB_CNTL, NAME=1)  # a class attribute, not a field
    with pytest.raises(ValueError, match=r"^RB_SIZE: 0x20 does not fit in 5 bits$"):
        m.write_fields(regs.SDMA_RB_CNTL, RB_SIZE=0x20)
    assert dev.writes == []


@pytest.mark.parametrize("reg, value, why", [
    (regs.ID, 0x1234_5678, r"^ID reads 0x12345678, expected 0x[0-9a-f]{8}: not a gpucosim device$"),
    (regs.VERSION, 0x0702_0000, r"^register interface version 7\.2 is not supported \(this driver knows major 0\)$"),
])
def test_probe_refuses_a_device_it_does_not_know(reg, value, why):
    class Other(RefModel):
        def mmio_read32(self, offset: int) -> int:
            return value if offset == reg.ADDR else super().mmio_read32(offset)

    with pytest.raises(ProbeError, match=why):
        Mmio(Other()).probe()


def test_probe_reads_what_the_device_was_built_with():
    info = Mmio(RefModel(data_width=256)).probe()
    assert (info.bus_bytes, info.addr_bits, info.has_dma, info.has_ih, info.vm_levels, info.vmids) == (
        32, 48, True, True, 2, 16)
    assert info.dma_max_bytes == 1 << regs.CAPS.DMA_MAX_LOG2.get(RefModel().mmio_read32(regs.CAPS.ADDR))


def test_probe_reads_no_register_of_a_block_the_device_lacks():
    """Without an MMU (CAPS.VM clear) the probe does not read VM_CAPS: a build without the
    block need not decode its registers (here they answer DECERR), and the driver takes it
    as 0 levels, 0 VMIDs."""
    class NoMmu(RefModel):
        def mmio_read32(self, offset: int) -> int:
            if offset == regs.VM_CAPS.ADDR:
                raise BusError("read", offset, 3)
            return super().mmio_read32(offset)

    info = Mmio(NoMmu(vm=False, dma=False)).probe()
    assert (info.vm_levels, info.vmids, info.has_dma, info.dma_max_bytes) == (0, 0, False, 0)


def test_the_register_manual_names_each_fields_bits_access_and_reset():
    """`gpucosim regs NAME` (gpucosim/regmap.py) prints each field's bits as [msb:lsb], its
    access as register manuals do (RO, RW, RW1C, WO, WO (pulse)), and which fields read the
    device's state after a reset instead of RESET's bits."""
    lines = regmap.describe(regs.INT_STATUS).splitlines()
    assert lines[0] == "INT_STATUS @ 0x020, reset 0x00000000 but for IH_PENDING (the device's state)"
    assert [ln.split()[:3] for ln in lines[2:]] == [
        ["IH_PENDING", "[0]", "RO"], ["EOP", "[1]", "RW1C"], ["CP_ERROR", "[2]", "RW1C"], ["IH_OVERFLOW", "[3]", "RW1C"]]
    lines = regmap.describe(regs.VM_INVALIDATE_REQ).splitlines()
    assert lines[0] == "VM_INVALIDATE_REQ @ 0x204, reset 0x00000000"
    assert [ln.split()[:3] for ln in lines[2:]] == [["PER_VMID", "[15:0]", "WO"], ["ALL_ADDR", "[16]", "WO"]]
    assert [ln.split()[:4] for ln in regmap.describe(regs.CONTROL).splitlines()[2:]] == [
        ["HALT", "[0]", "RW", "Stop"], ["SOFT_RESET", "[1]", "WO", "(pulse)"], ["PERF_CLEAR", "[2]", "WO", "(pulse)"]]
    assert regmap.describe(regs.CAPS).splitlines()[0] == "CAPS @ 0x008, reset: the device's state (driven by the hardware)"
    assert [ln.split()[1] for ln in regmap.describe(regs.CAPS).splitlines()[2:]] == [
        "[3:0]", "[11:4]", "[15:12]", "[16]", "[17]", "[22:18]", "[23]"]
    assert regs.VM_CONTEXT_PT_BASE_LO.ADDRESS.msb == 31 and regs.SDMA_RB_CNTL.RB_SIZE.msb == 5
    assert regs.STATUS.hw_driven() == ["IDLE", "HALTED", "ERROR", "RB_EMPTY", "DMA_BUSY", "WAITING", "LEVEL"]
    assert regs.RB_DOORBELL.hw_driven() == [] and regs.SCRATCH.hw_driven() == []


def test_a_register_array_and_its_bounds():
    m = Mmio(RefModel())
    m.write(regs.VM_CONTEXT_CNTL, 1, index=5)
    assert [m.fields(regs.VM_CONTEXT_CNTL, i) for i in (4, 5, 6)] == [{"ENABLE": 0}, {"ENABLE": 1}, {"ENABLE": 0}]
    assert [regs.PERF_PACKETS.addr(i) for i in (0, 7)] == [0x120, 0x13C]
    assert regs.VM_CONTEXT_CNTL.addr(15) == regs.VM_CONTEXT_CNTL.ADDR + 15 * 4
    for reg, index in ((regs.PERF_PACKETS, 8), (regs.PERF_PACKETS, -1), (regs.SCRATCH, 1)):
        with pytest.raises(IndexError, match=rf"^{reg.NAME}\[{index}\] out of range: the array has "
                                             rf"{reg.ARRAY_LEN} registers$"):
            reg.addr(index)
