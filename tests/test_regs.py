"""The register map over the real AXI4-Lite bus, on each simulator."""

import pytest

from testbench.design import gpu_design

from .conftest import run_cocotb

CASES = ["reset_values", "access_types", "kmd_probe_and_scratch", "unmapped_access", "irq_line"]


@pytest.mark.parametrize("case", CASES)
def test_registers(simulator, case):
    run_cocotb(gpu_design(64), simulator, "tests.cocotb_regs", case)
