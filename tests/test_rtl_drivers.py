"""The KMD and UMD checks, run on the RTL under each simulator.

tests/test_kmd_*.py and tests/test_umd_*.py run their `check_*(dev)` bodies on the
reference model; here the same bodies run against the command processor under cocotb:
ioctls, CS checker, fences across the 2^32 wrap (1100 jobs), WAIT_REG_MEM released by a
later write, hardware errors with recovery, IB chaining, batching, API versions.
"""

import pytest

from testbench import sim
from testbench.design import gpu_design
from tests import driver_checks

from .conftest import shared_run

pytestmark = pytest.mark.xdist_group("rtl_drivers")  # one simulator process per simulator


@pytest.mark.parametrize("name", list(driver_checks.all_checks()))
def test_driver_check_on_rtl(simulator, name):
    res = shared_run(f"drivers-{simulator}",
                     lambda: sim.run(gpu_design(64), simulator, "tests.cocotb_drivers", tag="drivers"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on {simulator}: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on {simulator}\n" + res.explain()
