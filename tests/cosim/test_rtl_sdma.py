"""The SDMA copy engine on the RTL (rtl/sdma/) under each simulator: the checks of
tests/model/refmodel/test_model_sdma.py, which the reference model passes too, run by one simulator
session per simulator."""

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from tests.model.refmodel import test_model_sdma

from tests.conftest import shared_run

pytestmark = pytest.mark.xdist_group("rtl_sdma")  # one simulator process per simulator


@pytest.mark.parametrize("name", [c.__name__ for c in test_model_sdma.CHECKS])
def test_sdma_check_on_rtl(simulator, name):
    res = shared_run(f"sdma-{simulator}",
                     lambda: sim.run(gpu_design(64), simulator, "tests.cosim.cocotb_sdma", tag="sdma"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on {simulator}: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on {simulator}\n" + res.explain()
