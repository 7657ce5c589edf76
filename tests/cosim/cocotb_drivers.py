"""cocotb side of tests/cosim/test_rtl_drivers.py: the KMD and UMD checks on the RTL.

Every `check_*(dev)` body listed in the `CHECKS` list of a module of driver_checks.MODULES
(the KMD's, the UMD's, the security suite's, the hardware contract's) runs here as one cocotb
test on a freshly reset device: the same driver code the model tests run, now against the
real command processor. The few of driver_checks.SLOW_CHECKS run a second time on slow,
stalling memory ("<check>__slow_memory"). The other `CHECKS` lists are in
driver_checks.ELSEWHERE, each with where it runs instead and why: test_umd_async's,
test_model_cp_queues' and test_model_sdma's in sessions of their own, and test_high_memory's
on a model larger than the RTL's memory.
"""

from tests.cosim import driver_checks

for _name, _check in driver_checks.all_checks().items():
    globals()[_name] = driver_checks.cocotb_test(_name, _check)

for _name, (_check, _memory) in driver_checks.slow_checks().items():
    globals()[_name] = driver_checks.cocotb_test(_name, _check, _memory)
