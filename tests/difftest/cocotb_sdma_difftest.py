"""cocotb side of tests/difftest/test_sdma_difftest.py: a range of SDMA difftest streams on the RTL and
the model (testbench/difftest/sdma.py) in one simulator process."""

import cocotb

from testbench.difftest.sdma import campaign


@cocotb.test()
async def sdma_difftest(dut):
    await campaign(dut)
