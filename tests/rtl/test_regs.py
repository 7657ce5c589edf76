"""The register map over the real AXI4-Lite bus, on each simulator."""

import pytest

from testbench import sim
from testbench.sim.design import gpu_design

from tests.conftest import shared_run

CASES = ["reset_values", "reset_after_writes", "pt_base_reset_reaches_mmu", "access_types", "kmd_probe_and_scratch", "unmapped_access", "irq_line",
         "registers_md_reset_values", "soft_reset_per_engine"]

pytestmark = pytest.mark.xdist_group("rtl_regs")  # all cases in one simulator process per simulator


@pytest.mark.parametrize("case", CASES)
def test_registers(simulator, case):
    res = shared_run(f"regs-{simulator}", lambda: sim.run(gpu_design(64), simulator, "tests.rtl.cocotb_regs", tag="regs"))
    failed = [msg for n, msg in res.failures if n == case]
    assert not failed, f"{case} on {simulator}: {failed[0]}\n" + res.explain()
    assert case in res.passed, f"{case} did not run on {simulator}\n" + res.explain()
