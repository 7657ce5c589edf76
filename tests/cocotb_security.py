"""cocotb side of tests/test_rtl_security.py: the long malicious-client checks on the RTL."""

import cocotb

import kmd_model
from testbench.cocotb_device import run_driver
from tests import test_security


def _make(check):
    async def test(dut):
        def body(dev):
            try:
                check(dev)
            finally:
                kmd_model.unbind()
        await run_driver(dut, body)
    test.__name__ = test.__qualname__ = check.__name__
    return cocotb.test()(test)


for _check in test_security.LONG_CHECKS:
    globals()[_check.__name__] = _make(_check)
