"""cocotb side of tests/cosim/test_rtl_cp_queues.py: the CP queue checks (tests/model/refmodel/test_model_cp_queues.py)
on the RTL, each as one cocotb test on a freshly reset device."""

from tests.model.refmodel import test_model_cp_queues
from tests.cosim.driver_checks import cocotb_test

for _check in test_model_cp_queues.CHECKS:
    globals()[_check.__name__] = cocotb_test(_check.__name__, _check)
