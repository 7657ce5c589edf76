"""The long malicious-client checks of tests/security/cs/test_security_long.py on the RTL, on Verilator: a plain
race with the running CP, a maximum-size IB from the ring and from an IB1 (about a million
cycles each), a job timeout that progress keeps from firing. (Minutes on Icarus: there the
same code runs as tests/security/test_security_*.py's shorter checks.)"""

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from tests.security.cs import test_security_long

from tests.conftest import shared_run

pytestmark = pytest.mark.xdist_group("rtl_security")


@pytest.mark.parametrize("name", [c.__name__ for c in test_security_long.LONG_CHECKS])
def test_long_check_on_verilator(name):
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    res = shared_run("security-verilator",
                     lambda: sim.run(gpu_design(64), "verilator", "tests.cosim.cocotb_security", tag="security"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on verilator: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on verilator\n" + res.explain()


def test_long_checks_on_model():
    from testbench.refmodel import RefModel
    for check in test_security_long.LONG_CHECKS:
        if check is test_security_long.check_progress_resets_job_timeout:
            continue  # the model runs a job in no time: nothing to time out (the RTL run above)
        check(RefModel())
