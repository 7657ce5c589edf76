"""cocotb side of tests/cosim/test_rtl_security.py: the long malicious-client checks on the RTL."""

from tests.cosim import driver_checks
from tests.security.cs import test_security_long

for _check in test_security_long.LONG_CHECKS:
    globals()[_check.__name__] = driver_checks.cocotb_test(_check.__name__, _check)
