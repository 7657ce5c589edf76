"""The CP's two hardware queues on the RTL (rtl/cp/queues.py) under each simulator: the
checks of tests/model/refmodel/test_model_cp_queues.py, which the reference model passes too, run by one
simulator session per simulator."""

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from tests.model.refmodel import test_model_cp_queues

from tests.conftest import shared_run

pytestmark = pytest.mark.xdist_group("rtl_cp_queues")  # one simulator process per simulator


@pytest.mark.parametrize("name", [c.__name__ for c in test_model_cp_queues.CHECKS])
def test_cp_queue_check_on_rtl(simulator, name):
    res = shared_run(f"cp-queues-{simulator}",
                     lambda: sim.run(gpu_design(64), simulator, "tests.cosim.cocotb_cp_queues", tag="cp_queues"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on {simulator}: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on {simulator}\n" + res.explain()
