"""cocotb tests: the register map through the real AXI4-Lite bus (driven by tests/rtl/test_regs.py).

The bodies are tests/model/refmodel/register_checks.py, which tests/model/refmodel/test_refmodel_registers.py runs on the model.
"""

import cocotb

from testbench.sim.cocotb_device import design_params, run_driver
from tests.model.refmodel import register_checks as rc


def _width() -> int:
    return design_params()["DATA_WIDTH"]


@cocotb.test()
async def reset_values(dut):
    await run_driver(dut, lambda dev: rc.check_reset_values(dev, _width()))


@cocotb.test()
async def reset_after_writes(dut):
    """A reset of the device, not a power-up, brings back every register's reset value,
    whatever was written before it (the page-table bases in LUTRAM included), and a byte
    written to an entry then leaves the entry's other bytes at their reset value."""
    await run_driver(dut, lambda dev: rc.fill_storage(dev, cocotb.RANDOM_SEED))

    def after(dev):
        rc.check_reset_values(dev, _width())
        rc.check_first_byte_writes(dev)
    await run_driver(dut, after)


@cocotb.test()
async def pt_base_reset_reaches_mmu(dut):
    """The MMU's read of a page-table base sees the reset too."""
    await run_driver(dut, rc.point_pt_base)
    await run_driver(dut, rc.check_pt_base_reset_reaches_mmu)


@cocotb.test()
async def access_types(dut):
    await run_driver(dut, lambda dev: rc.check_access_types(dev, cocotb.RANDOM_SEED))


@cocotb.test()
async def kmd_probe_and_scratch(dut):
    await run_driver(dut, lambda dev: rc.check_probe_and_scratch(dev, _width(), cocotb.RANDOM_SEED))


@cocotb.test()
async def unmapped_access(dut):
    await run_driver(dut, rc.check_unmapped_access)


@cocotb.test()
async def irq_line(dut):
    await run_driver(dut, rc.check_irq_line)


@cocotb.test()
async def registers_md_reset_values(dut):
    await run_driver(dut, rc.check_registers_md_reset_values)


@cocotb.test()
async def soft_reset_per_engine(dut):
    await run_driver(dut, rc.check_soft_reset_ends_per_engine)
