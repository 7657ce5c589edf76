"""cocotb side of tests/difftest/test_rtl_vs_model.py: every scenario of tests/difftest/scenarios.py on the RTL.

Each scenario is one cocotb test on a freshly reset device; its observation is written as
JSON to $SCENARIO_OUT for the pytest side to compare with the reference model.
"""

import json
import os

import cocotb

from testbench.sim.cocotb_device import run_driver
from tests.difftest import scenarios


def _make(name):
    async def test(dut):
        obs = await run_driver(dut, lambda dev: scenarios.run(name, dev))
        with open(os.path.join(os.environ["SCENARIO_OUT"], name + ".json"), "w") as f:
            json.dump(obs, f)
    test.__name__ = test.__qualname__ = name
    return cocotb.test()(test)


for _name in scenarios.SCEN:
    globals()[_name] = _make(_name)
