"""testbench/sim/bridge.py: blocking driver code in a greenlet, its waits awaited by the
coroutine that runs it. Checked here under asyncio (any awaitable works); every RTL test
runs its drivers through it under cocotb."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from testbench.sim import bridge


async def _double(x: int, log: list) -> int:
    log.append(("sim", x))
    await asyncio.sleep(0)
    return 2 * x


def test_results_arguments_and_order():
    log: list = []
    double = bridge.resume(_double)

    def driver(a, *, b):
        log.append(("driver", a))
        got = [double(a, log), double(b, log)]
        log.append(("driver", got))
        return sum(got)

    assert asyncio.run(bridge.bridge(driver)(3, b=4)) == 14
    # the driver runs up to its call, the coroutine, then the driver again: never both
    assert log == [("driver", 3), ("sim", 3), ("sim", 4), ("driver", [6, 8])]


def test_an_awaited_exception_is_raised_at_the_call_and_can_be_handled():
    async def fail(msg):
        await asyncio.sleep(0)
        raise KeyError(msg)

    def driver():
        try:
            bridge.run(fail("bus"))
        except KeyError as e:
            caught = e.args[0]
        return caught, bridge.run(_double(5, []))

    assert asyncio.run(bridge.bridge(driver)()) == ("bus", 10)


def test_a_driver_exception_reaches_the_awaiting_coroutine():
    def driver():
        bridge.run(_double(1, []))
        raise ValueError("driver failed")

    with pytest.raises(ValueError, match="driver failed"):
        asyncio.run(bridge.bridge(driver)())


def test_calls_from_outside_a_bridged_driver_are_refused():
    async def from_a_coroutine():
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the refused coroutine is closed, not left un-awaited
            with pytest.raises(RuntimeError, match="driver code started with testbench.sim.bridge.bridge"):
                bridge.run(_double(1, []))

    asyncio.run(from_a_coroutine())
    errors = []

    def from_another_thread():
        try:
            bridge.resume(_double)(1, [])
        except RuntimeError as e:
            errors.append(str(e))

    def driver():
        t = threading.Thread(target=from_another_thread)
        t.start()
        t.join()
        return bridge.run(_double(2, []))

    assert asyncio.run(bridge.bridge(driver)()) == 4
    assert len(errors) == 1 and "not from another thread" in errors[0]


def test_cancelling_the_bridge_unwinds_the_driver():
    unwound = []

    def driver():
        try:
            bridge.run(asyncio.sleep(10))
        finally:
            unwound.append(True)

    async def main():
        task = asyncio.ensure_future(bridge.bridge(driver)())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert unwound == [True]
