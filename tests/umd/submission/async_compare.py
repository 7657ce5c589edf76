"""Run an app (or a driver check) with synchronous and with asynchronous submission
(GPUCOSIM_ASYNC_SUBMIT=0 / 1, every queue of the app) and record what an observer of the
driver can see, to compare the two: issue 16's "the same observable results".

What is recorded, per run:
- memory: every app buffer's bytes when the app frees it and, at Device.close, those of
  every app buffer still allocated (in the app's order, so addresses do not matter);
- fences: per queue (in creation order), the seqnos its submissions got (the user fence
  values) and its last event value;
- the order of fence interrupts: per queue, the seqnos of its jobs in the order the KMD's
  interrupt handler signalled their fences (kmd_model Kmd._fence_signalled);
- the API's answers: Event.wait / finish / flush (None for async flush: its seqno is
  the thread's to know) results, downloads' bytes, and the exceptions raised (class, errno).

Used on the model (tests/umd/submission/test_umd_async.py) and on the RTL (tests/cosim/cocotb_async.py).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from kmd_model.core import kmd as kmd_mod
from umd import runtime
from umd.submit import ENV


@dataclass
class Observation:
    result: Any = None
    memory: list = field(default_factory=list)  # (event, size, bytes)
    queues: list = field(default_factory=list)  # Queue objects, creation order
    fences: dict = field(default_factory=dict)  # queue index -> [seq in signalled order]
    calls: list = field(default_factory=list)  # (API call, its answer)

    def summary(self) -> dict:
        """What must be equal between a synchronous and an asynchronous run."""
        per_queue = []
        for i, q in enumerate(self.queues):
            per_queue.append({"first_seq": q.first_seq, "last_seq": q.last_seq, "submitted": q.submitted,
                              "timeline": q.timeline, "fences_in_irq_order": self.fences.get(i, [])})
        return {"result": self.result, "memory": self.memory, "queues": per_queue, "calls": self.calls}


def _answer(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return ("bytes", v.tobytes())
    if isinstance(v, (bool, int, type(None))):
        return v
    return type(v).__name__  # objects: their kind (an Event, a Buffer ...)


class _Recorder:
    def __init__(self, obs: Observation):
        self.obs = obs
        self.ctx_queue: dict[int, int] = {}
        self.closing = False

    def api(self, name: str, fn: Callable, args: tuple, kwargs: dict) -> Any:
        obs = self.obs
        me = getattr(fn, "__self__", None) or (args[0] if args else None)  # (dispatched calls are bound)
        if name == "Buffer.free":
            if me.owner is None and not me.freed and not self.closing:  # (close frees a set: no order)
                obs.memory.append(("free", me.size, bytes(me.map())))
        elif name == "Device.close" and not me.closed:
            for b in sorted(me.buffers, key=lambda b: b.gpu_addr):
                if b.owner is None:
                    obs.memory.append(("close", b.size, bytes(b.map())))
        closing = self.closing
        self.closing = closing or name == "Device.close"
        try:
            out = fn(*args, **kwargs)
        except Exception as e:
            obs.calls.append((name, "raised", type(e).__name__, getattr(e, "errno", None)))
            raise
        finally:
            self.closing = closing
        if name == "Device.queue":
            self.ctx_queue[out.ctx_id] = len(obs.queues)
            obs.queues.append(out)
        elif name == "Queue.flush":
            obs.calls.append((name,))  # (its seqno: None when async, the thread's to know)
        elif name in ("Event.wait", "Queue.finish", "Queue.download", "Queue.signal", "Queue.timestamp"):
            obs.calls.append((name, _answer(out)))
        return out

    def fence(self, fence) -> None:
        job = fence.job
        if job is None:
            return
        i = self.ctx_queue.get(job.ctx.id)
        if i is not None:
            self.obs.fences.setdefault(i, []).append(job.seq)


@contextlib.contextmanager
def _recording(obs: Observation):
    rec = _Recorder(obs)
    saved_hook, saved_signalled = runtime.api_hook, kmd_mod.Kmd._fence_signalled

    def signalled(self, fence):
        rec.fence(fence)
        return saved_signalled(self, fence)

    runtime.api_hook = rec.api
    kmd_mod.Kmd._fence_signalled = signalled
    try:
        yield
    finally:
        runtime.api_hook = saved_hook
        kmd_mod.Kmd._fence_signalled = saved_signalled


def observe(app: Callable[[], Any], async_submit: bool) -> Observation:
    """Run `app()` with every queue's submission sync or async; what it showed."""
    saved = os.environ.get(ENV)
    os.environ[ENV] = "1" if async_submit else "0"
    obs = Observation()
    try:
        with _recording(obs):
            obs.result = app()
    finally:
        if saved is None:
            del os.environ[ENV]
        else:
            os.environ[ENV] = saved
    return obs


def assert_same(app: Callable[[], Any], what: str) -> dict:
    """Run `app` sync then async; assert every recorded observation is equal; the summary."""
    sync, asy = observe(app, False), observe(app, True)
    assert not any(q.async_submit for q in sync.queues if q.engine and q.device.api_version < 3), what
    assert any(q.async_submit for q in asy.queues), f"{what}: no queue submitted asynchronously"
    a, b = sync.summary(), asy.summary()
    for key in a:
        assert a[key] == b[key], f"{what}: {key} differs between sync and async submission:\n" \
                                 f"sync:  {_short(a[key])}\nasync: {_short(b[key])}"
    assert any(q["submitted"] for q in a["queues"]), f"{what}: nothing was submitted: nothing compared"
    return a


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 2000 else text[:2000] + "..."
