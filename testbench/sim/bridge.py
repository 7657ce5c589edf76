"""Blocking driver code on the simulator's own thread: a greenlet bridge.

Driver code (the KMD, the UMD, an app, the difftest's stream driver) is ordinary blocking
Python; the simulator is driven by cocotb coroutines. `bridge(fn)` runs `fn` in a greenlet
of the simulator's thread, and `resume(coro_fn)` makes a coroutine function callable from
it: the call switches back to the coroutine that runs the bridge, which awaits the
coroutine in cocotb's scheduler and switches back with its result (or throws its
exception in at the call). It is the pattern of SQLAlchemy's asyncio layer
(greenlet_spawn / await_only).

cocotb's own `cocotb.task.bridge` / `cocotb.task.resume` do the same with a thread per
bridge and a new task, an event and two thread hand-overs per call: measured on gpu_top
(20,000 register reads, process CPU time), 143 us a read on Verilator and 288 us on Icarus,
against 20 and 152 us here and 19 and 147 us awaiting the coroutine directly
(docs/architecture.md, "Issue 13's greenlet round"). The semantics are the ones the drivers
were written for: the simulator never runs while driver code does, the driver may touch
the shared memory view freely between calls, and a call from anywhere but a bridged
greenlet (another thread, or a coroutine) is refused with RuntimeError.

The path before issue 13 (GPUCOSIM_CLOCK=cocotb: cocotb's clock, ClockCycles), which
`make bench` measures the new one against, keeps cocotb's thread bridge as it had it.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

import greenlet

from . import CLOCK_ENV

R = TypeVar("R")


def _threads() -> bool:
    """Whether this simulator process runs the path before issue 13 (cocotb's bridge)."""
    return os.environ.get(CLOCK_ENV) == "cocotb"


class _Driver(greenlet.greenlet):
    """The greenlet a bridge runs its function in (resume() checks it is in one)."""


# A stop (Ctrl-C, a timeout) that a signal handler could not raise where it arrived, for
# the driver code to raise at its next resumption (see `interrupt`)
_pending: BaseException | None = None
# set around plain code of the caller's own (no scheduler underneath), where it may be raised
direct = False


def interrupt(exc: BaseException) -> None:
    """From a signal handler: raise `exc` in the driver code. Raised at once when the handler
    runs in driver code (or `direct` code); when it runs in cocotb's scheduler (the simulator
    is busy), where an exception would break the scheduler, it waits for the driver's
    current call to return and is raised there."""
    global _pending
    if direct or isinstance(greenlet.getcurrent(), _Driver):
        raise exc
    _pending = exc


def take_pending() -> BaseException | None:
    """The stop `interrupt` left for driver code that never resumed, once (None: none)."""
    global _pending
    exc, _pending = _pending, None
    return exc


async def bridge_call(fn: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    """Run blocking `fn(*args, **kwargs)` to its end, serving its resume() calls; its
    result, or its exception raised here."""
    g = _Driver(fn)
    request = g.switch(*args, **kwargs)
    while not g.dead:
        # `request` is the awaitable a resume() call handed over
        try:
            result = await request
        except BaseException as e:  # into the driver at its call, as a blocking call raises
            request = g.throw(e)
        else:
            stop = take_pending()
            request = g.switch(result) if stop is None else g.throw(stop)
    return request  # (the greenlet's return value once it is dead)


def bridge(fn: Callable[..., R]) -> Callable[..., Coroutine[Any, Any, R]]:
    """`fn` as a coroutine function: `await bridge(fn)(*args)` (as cocotb.task.bridge)."""

    if _threads():
        import cocotb.task

        return cocotb.task.bridge(fn)

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> R:
        return await bridge_call(fn, *args, **kwargs)

    return wrapper


def run(awaitable: Awaitable[R]) -> R:
    """Await `awaitable` in the scheduler from bridged driver code; its result."""
    me = greenlet.getcurrent()
    if not isinstance(me, _Driver):
        close = getattr(awaitable, "close", None)
        if close is not None:
            close()  # never awaited: no "coroutine was never awaited" warning on top
        raise RuntimeError("the simulator can only be driven from driver code started with "
                           "testbench.sim.bridge.bridge (the thread and greenlet of its simulator), "
                           "not from another thread or a coroutine")
    return me.parent.switch(awaitable)


def resume(func: Callable[..., Awaitable[R]]) -> Callable[..., R]:
    """Coroutine function `func` as a blocking function for bridged code (as cocotb.task.resume)."""

    if _threads():
        import cocotb.task

        return cocotb.task.resume(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> R:
        return run(func(*args, **kwargs))

    return wrapper
