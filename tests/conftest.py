"""Shared pytest plumbing: one parameter per simulator, and a way to run cocotb tests."""

from __future__ import annotations

import pytest

from testbench import sim


@pytest.fixture(params=sim.selected_simulators())
def simulator(request) -> str:
    """Each simulator test runs on Verilator and Icarus ($SIM narrows it)."""
    reason = sim.unavailable_reason(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


def run_cocotb(design: sim.Design, simulator: str, module: str, testcase: str | None = None,
               **kwargs) -> sim.Results:
    """Run cocotb tests of `module` in the simulator and fail with the simulator's story."""
    res = sim.run(design, simulator, module, testcase=testcase,
                  tag=(testcase or module.rsplit(".", 1)[-1]), **kwargs)
    assert res.ok, res.explain()
    return res
