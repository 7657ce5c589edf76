"""cocotb side of tests/cosim/test_rtl_async.py: the asynchronous submission checks of
tests/umd/submission/test_umd_async.py on the RTL, where the submission thread cannot drive the simulator
and hands its ioctls to the bridged thread (umd/submit.py). One cocotb test per check, and
one per app of the sync/async comparison."""

import functools

from tests.cosim import driver_checks
from tests.umd.submission import test_umd_async

for _check in test_umd_async.CHECKS:
    if _check is test_umd_async.check_same_results:
        for _app in test_umd_async.APPS:
            _name = f"same_results_{_app}"
            _fn = functools.partial(_check, apps=(_app,))
            globals()[_name] = driver_checks.cocotb_test(_name, _fn)
    else:
        _name = _check.__name__[6:]
        globals()[_name] = driver_checks.cocotb_test(_name, _check)


def _flush_then_ioctl(dev):
    """Flushes each followed by an ioctl of the app thread's (INFO COUNTERS reads registers:
    simulated time passes in it)."""
    import time

    import kmd_model
    import umd

    kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True)
    buf = gpu.alloc(4096)
    for i in range(4):
        q.write(buf, 4 * i, i + 1)
        q.flush()
        time.sleep(0.02)  # app work: time for a quick thread to hand its CS over, not a slow one
        gpu.counters()
    q.finish()
    assert buf.u32[:4].tolist() == [1, 2, 3, 4]
    gpu.close()


def check_cycles_repeat(dev):
    """On the RTL the app thread runs the thread's ioctls of every queued flush before its
    own, so each CS reaches the simulator at the same cycle however the threads run: the
    same cycles with a submission thread slowed down (50 ms before each CS) as without,
    and run after run."""
    import time

    from tests.umd.submission.async_compare import observe
    from umd import submit as umd_submit

    assert dev.thread_bound

    slowed = []  # the CS ioctls the slowed run delayed: none would mean the patch missed flush()

    def cycles(app, slow=False):
        real = umd_submit.cs_ioctls

        def late(*args):
            slowed.append(args)
            time.sleep(0.05)
            return real(*args)

        umd_submit.cs_ioctls = late if slow else real
        try:
            t0 = dev.now()
            observe(lambda: app(dev), True)
            return dev.now() - t0
        finally:
            umd_submit.cs_ioctls = real

    fast, slow = cycles(_flush_then_ioctl), cycles(_flush_then_ioctl, slow=True)
    assert len(slowed) == 4 and fast == slow, (len(slowed), fast, slow)
    for name in ("mixed", "copy_pipeline"):
        runs = [cycles(test_umd_async.APPS[name]) for _ in range(3)]
        assert runs[0] == runs[1] == runs[2], (name, runs)


cycles_repeat = driver_checks.cocotb_test("cycles_repeat", check_cycles_repeat)


def check_drain_all_submits_what_an_unclosed_device_left(dev):
    """An app that flushes and returns without a wait or close: on the RTL nothing reaches
    the KMD until the app thread enters the driver again; umd.submit.drain_all() (what
    gpucosim's Session calls after main()) submits it all."""
    import kmd_model
    import umd
    from umd import submit

    kmd = kmd_model.bind(dev)
    gpu = umd.open(api_version=3)
    q = gpu.queue(async_submit=True, flush_threshold=1)
    buf = gpu.alloc(4096)
    cs0 = kmd.stats["cs"]
    for i in range(5):
        q.write(buf, 4 * i, i + 1)  # a flush each
    assert kmd.stats["cs"] == cs0 and len(gpu.submitter.jobs) == 5  # all queued: the thread waits for us
    assert submit.drain_all() == 5
    assert kmd.stats["cs"] == cs0 + 5 and not gpu.submitter.jobs
    kmd.wait_for(lambda: buf.u32[4] == 5, 100_000)
    assert buf.u32[:5].tolist() == [1, 2, 3, 4, 5]
    gpu.close()


drain_all_submits_what_an_unclosed_device_left = driver_checks.cocotb_test(
    "drain_all_submits_what_an_unclosed_device_left", check_drain_all_submits_what_an_unclosed_device_left)
