"""The reference model's register file through the Device API: reset values, access
types, storage, probe, soft reset per engine, unmapped access, the IRQ line and the MMIO
time costs. The register checks are those of tests/model/refmodel/register_checks.py, which
tests/rtl/cocotb_regs.py runs on the RTL.
"""

from __future__ import annotations

import pytest

from kmd_model import regs
from kmd_model.mmio import Mmio
from tests.model.refmodel import register_checks as rc
from testbench.refmodel import DEFAULT_MMIO_CYCLES, RefModel


# ---------------------------------------------------------------------------- registers (tests/model/refmodel/register_checks.py)

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
