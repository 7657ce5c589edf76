"""cocotb side of tests/cosim/test_rtl_sdma.py: the SDMA engine's checks (tests/model/refmodel/test_model_sdma.py)
on the RTL, each as one cocotb test on a freshly reset device."""

from tests.model.refmodel import test_model_sdma
from tests.cosim.driver_checks import cocotb_test

for _check in test_model_sdma.CHECKS:
    globals()[_check.__name__] = cocotb_test(_check.__name__, _check)
