"""cocotb side of tests/cosim/test_rtl_drivers.py: the KMD and UMD checks on the RTL.

Every `check_*(dev)` body listed in a `CHECKS` list of tests/kmd*/test_kmd_*.py and
tests/umd/test_umd_*.py runs here as one cocotb test on a freshly reset device: the same
driver code the model tests run, now against the real command processor. The few of
driver_checks.SLOW_CHECKS run a second time on slow, stalling memory ("<check>__slow_memory").
"""

from tests.cosim import driver_checks

for _name, _check in driver_checks.all_checks().items():
    globals()[_name] = driver_checks.cocotb_test(_name, _check)

for _name, (_check, _memory) in driver_checks.slow_checks().items():
    globals()[_name] = driver_checks.cocotb_test(_name, _check, _memory)
