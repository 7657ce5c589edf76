"""cocotb side of tests/test_rtl_drivers.py: the KMD and UMD checks on the RTL.

Every `check_*(dev)` body listed in a `CHECKS` list of tests/test_kmd_*.py and
tests/test_umd_*.py runs here as one cocotb test on a freshly reset device: the same
driver code the model tests run, now against the real command processor.
"""

import cocotb

import kmd_model
from testbench.cocotb_device import run_driver
from tests import driver_checks


def _make(name, check):
    async def test(dut):
        def body(dev):
            try:
                check(dev)
            finally:
                kmd_model.unbind()
        await run_driver(dut, body)
    test.__name__ = test.__qualname__ = name
    return cocotb.test()(test)


for _name, _check in driver_checks.all_checks().items():
    globals()[_name] = _make(_name, _check)
