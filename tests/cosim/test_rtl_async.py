"""Asynchronous submission on the RTL (tests/cosim/cocotb_async.py): on Verilator every check of
tests/umd/submission/test_umd_async.py, each app of the sync/async comparison its own test; on Icarus
(about 20x slower) one small app, the gated gfx -> copy -> gfx pipeline, sync and async, and
the check that the CS ioctls run on the bridged thread.
One simulator session per simulator."""

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from tests.umd.submission import test_umd_async

from tests.conftest import shared_run

VERILATOR = [f"same_results_{a}" for a in test_umd_async.APPS] + \
    [c.__name__[6:] for c in test_umd_async.CHECKS if c is not test_umd_async.check_same_results] + \
    ["cycles_repeat", "drain_all_submits_what_an_unclosed_device_left"]  # (RTL only: tests/cosim/cocotb_async.py)
ICARUS = ["same_results_gated_pipeline", "ioctls_run_on_the_right_thread"]


def _params():
    for s in sim.selected_simulators():
        for name in {"verilator": VERILATOR, "icarus": ICARUS}.get(s, []):
            yield pytest.param(s, name, id=f"{s}-{name}", marks=pytest.mark.xdist_group(f"rtl_async-{s}"))


@pytest.mark.parametrize("simulator_name, name", list(_params()))
def test_async_submission_on_rtl(simulator_name, name):
    reason = sim.unavailable_reason(simulator_name)
    if reason:
        pytest.skip(reason)
    names = VERILATOR if simulator_name == "verilator" else ICARUS
    res = shared_run(f"async-{simulator_name}",
                     lambda: sim.run(gpu_design(64), simulator_name, "tests.cosim.cocotb_async", testcase=names,
                                     tag="async"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on {simulator_name}: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on {simulator_name}\n" + res.explain()
