"""cocotb side of tests/test_rtl_async.py: the asynchronous submission checks of
tests/test_umd_async.py on the RTL, where the submission thread cannot drive the simulator
and hands its ioctls to the bridged thread (umd/submit.py). One cocotb test per check, and
one per app of the sync/async comparison."""

import functools

from tests import driver_checks, test_umd_async

for _check in test_umd_async.CHECKS:
    if _check is test_umd_async.check_same_results:
        for _app in test_umd_async.APPS:
            _name = f"same_results_{_app}"
            _fn = functools.partial(_check, apps=(_app,))
            globals()[_name] = driver_checks.cocotb_test(_name, _fn)
    else:
        _name = _check.__name__[6:]
        globals()[_name] = driver_checks.cocotb_test(_name, _check)
