"""cocotb side of tests/difftest/test_difftest.py and `python -m testbench.difftest`: one test
that runs a range of difftest streams on the RTL and the model (testbench/difftest/simulator/rtl.py)."""

import cocotb

from testbench.difftest.simulator.rtl import campaign


@cocotb.test()
async def difftest(dut):
    await campaign(dut)
