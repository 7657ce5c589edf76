"""cocotb side of tests/difftest/test_multi_difftest.py and `python -m testbench.difftest --multi`: a range
of multi-queue difftest streams (testbench/difftest/multi/) on the RTL and the model in one
simulator process."""

import cocotb

from testbench.difftest.multi import campaign


@cocotb.test()
async def multi_difftest(dut):
    await campaign(dut)
