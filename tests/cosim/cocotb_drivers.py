"""cocotb side of tests/test_rtl_drivers.py: the KMD and UMD checks on the RTL.

Every `check_*(dev)` body listed in a `CHECKS` list of tests/test_kmd_*.py and
tests/test_umd_*.py runs here as one cocotb test on a freshly reset device: the same
driver code the model tests run, now against the real command processor.
"""

from tests import driver_checks

for _name, _check in driver_checks.all_checks().items():
    globals()[_name] = driver_checks.cocotb_test(_name, _check)
