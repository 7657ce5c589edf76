"""cocotb side of tests/test_rtl_security.py: the long malicious-client checks on the RTL."""

from tests import driver_checks, test_security_long

for _check in test_security_long.LONG_CHECKS:
    globals()[_check.__name__] = driver_checks.cocotb_test(_check.__name__, _check)
