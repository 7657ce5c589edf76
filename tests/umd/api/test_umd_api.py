"""API versions: an app written for version 1 keeps version 1's behaviour (write()
submits at once, threshold 16, no fill()); version 2 batches writes (threshold 64) and
adds fill() and timestamp()."""

from __future__ import annotations

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel


def check_versions(dev):
    kmd = kmd_model.bind(dev)
    v1, v2 = umd.open(api_version=1), umd.open(api_version=2)
    b1, b2 = v1.alloc(4096), v2.alloc(4096)
    q1, q2 = v1.queue(), v2.queue()
    assert (q1.flush_threshold, q2.flush_threshold) == (16, 64)
    # version 1: write() submits at once
    q1.write(b1, 0, 0x11)
    assert q1.flushes == 1 and v1.ws.ioctls and not q1.cmdbuf.commands
    assert q1.signal().wait() and b1.u32[0] == 0x11
    # version 2: write() is recorded until a flush point
    n = kmd.stats["cs"]
    q2.write(b2, 0, 0x22)
    assert q2.flushes == 0 and kmd.stats["cs"] == n and q2.cmdbuf.commands == 1
    q2.flush()
    assert q2.flushes == 1
    q2.finish()
    assert b2.u32[0] == 0x22
    # calls a version does not have are not there, with a message saying where they are
    with pytest.raises(AttributeError, match=r"^Queue.fill\(\) is not in API version 1 \(it is in version 2, 3\)$"):
        q1.fill(b1, 0, 16, 0)
    with pytest.raises(AttributeError, match=r"^Queue has no entry point 'frobnicate' in API version 2 \(it has "
                       r"close, copy, download, emit_raw, fill, finish, flush, signal, timestamp, upload, wait_event, wait_mem, "
                       r"write\)$"):
        q2.frobnicate()
    # what other runtimes call it, and typos, are answered with this API's name
    with pytest.raises(AttributeError, match=r"^Queue has no entry point 'memset' in API version 2: "
                       r"Queue.fill\(\) is what this API calls it$"):
        q2.memset(b2, 0, 16, 0)
    with pytest.raises(AttributeError, match=r"^Queue has no entry point 'memcpy' in API version 2: "
                       r"Queue.copy\(\) is what this API calls it$"):
        q2.memcpy
    with pytest.raises(AttributeError, match=r"^Queue has no entry point 'sgnal' in API version 2: did you mean "
                       r"signal\(\)\?$"):
        q2.sgnal()
    assert "fill" in dir(q2) and "fill" not in dir(q1) and "write" in dir(q1)
    with pytest.raises(AttributeError, match=r"^Queue has no entry point 'memset' in API version 1 \(it has close, "
                       r"emit_raw, finish, flush, signal, wait_mem, write\)$"):
        q1.memset  # (fill, what version 2 calls it, is not in version 1)
    q2.fill(b2, 16, 16, 7)
    q2.finish()
    assert b2.u32[4:8].tolist() == [7] * 4
    # same entry point name, different functions
    assert umd.TABLES[1].entries["Queue.write"] is not umd.TABLES[2].entries["Queue.write"]
    assert umd.TABLES[1].entries["Queue.signal"] is umd.TABLES[2].entries["Queue.signal"]
    # what each version changed, as an app can print it (each table's own, not its parent's)
    assert [t.notes.split(";")[0] for t in umd.TABLES.values()] == [
        "write() submits at once", "write() is batched", "queue(async_submit=True): a submission thread makes the "
        "CS ioctls"]


def check_defaults_and_help(dev):
    """umd.open() is the newest API; entry points keep their signature and docstring through
    the dispatch table, also with a tracer's hook in place; a timestamp's value is its cycles."""
    import inspect

    from umd import runtime

    kmd_model.bind(dev)
    gpu = umd.open()
    assert gpu.api_version == umd.LATEST == 3
    assert umd.open(api_version=1).api_version == 1
    q = gpu.queue()
    saved = runtime.api_hook
    runtime.api_hook = lambda name, fn, args, kwargs: fn(*args, **kwargs)
    try:
        q2 = gpu.queue()
        for fn in (q2.fill, q2.copy, q2.write, gpu.alloc):
            assert "*args" not in str(inspect.signature(fn)), (fn, inspect.signature(fn))
            assert fn.__doc__ and len(fn.__doc__) > 20
        assert str(inspect.signature(q2.fill)) == "(buf: 'Buffer', offset: 'int', size: 'int', value: 'int') -> 'None'"
    finally:
        runtime.api_hook = saved
    buf = gpu.alloc(64)
    q.write(buf, 0, 1)
    t0, t1 = q.timestamp(), q.timestamp()
    with pytest.raises(ValueError, match=r"^timestamp: not written yet: wait\(\) for it first$"):
        t0.value
    assert t1.wait() and t0.signalled()
    assert 0 < t0.value == t0.cycles <= t1.value, (t0.value, t1.value)
    gpu.close()


CHECKS = [check_versions, check_defaults_and_help]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_device_opened_on_a_given_render_node_makes_its_ioctls_there():
    """umd.open(winsys=Winsys(file)), the file here a layer in front of the render node (as a
    tracer would be): the device's ioctls go through it, its buffers and contexts are that
    file's, no other render node is opened, closing the device closes it; not being the
    KMD's own file, it is not bound to a thread, and an async queue submits through it."""
    from umd.winsys import Winsys

    class Layer:
        def __init__(self, f):
            self.f, self.calls = f, 0

        def ioctl(self, request, args=None):
            self.calls += 1
            return self.f.ioctl(request, args)

        def close(self):
            self.f.close()

    kmd = kmd_model.bind(RefModel())
    f = kmd_model.open_render_node()
    files = len(kmd.files)
    layer = Layer(f)
    ws = Winsys(layer)
    assert ws.ioctls == 0 and not ws.thread_bound()
    gpu = umd.open(winsys=ws, pools=False)
    q = gpu.queue(async_submit=True)
    buf = gpu.alloc(4096)
    q.write(buf, 0, [7])
    q.finish()
    assert buf.u32[0] == 7 and ws.ioctls == layer.calls > 0
    assert len(kmd.files) == files and (f.fd, q.ctx_id) in kmd.contexts and len(f.handles) >= 1
    gpu.close()
    assert f.closed


def test_each_versions_queue_describes_itself():
    """help(gpu.queue) of an API version 3 device said "Device.queue as in v2, plus
    async_submit": what the other arguments do was in another version's docstring, which
    help() does not show. Each version's Device.queue names every argument it takes, and
    no entry point's docstring sends the reader to another version's."""
    import inspect
    import re

    kmd_model.bind(RefModel())
    for version, table in umd.TABLES.items():
        gpu = umd.open(api_version=version)
        doc = inspect.getdoc(gpu.queue) or ""
        args = [p.name for p in inspect.signature(gpu.queue).parameters.values()
                if p.kind is p.KEYWORD_ONLY and not p.name.startswith("_")]
        assert args and [a for a in args if not re.search(rf"`{a}`", doc)] == [], (version, doc)
        for key, fn in table.entries.items():
            assert not re.search(r"\bas (?:in )?(?:v|version )\d", fn.__doc__ or ""), (version, key)
        gpu.close()


def test_seq_of_a_flush_not_submitted_is_one_line():
    """Queue.seq_of, which help(umd.Queue) lists, of a flush the queue has not submitted
    (a new queue's first) was Python's "unsupported operand type(s) for +: 'NoneType' and
    'int'"."""
    kmd_model.bind(RefModel())
    try:
        gpu = umd.open()
        q = gpu.queue()
        with pytest.raises(ValueError, match=r"^seq_of: n must be the number of a submitted flush, from 1 to 0 "
                                             r"\(the queue has submitted 0\), not 1$"):
            q.seq_of(1)
        with pytest.raises(TypeError, match=r"^seq_of: n must be an int, not '1'$"):
            q.seq_of("1")
        q.write(gpu.alloc(64), 0, 1)
        q.finish()
        assert q.seq_done(q.seq_of(1))
        with pytest.raises(ValueError, match=r"^seq_of: n must be the number of a submitted flush, from 1 to 1 "
                                             r"\(the queue has submitted 1\), not 0$"):
            q.seq_of(0)
        gpu.close()
    finally:
        kmd_model.unbind()


def test_seq_done_of_a_value_that_is_no_seqno_is_one_line():
    """Queue.seq_done, which help(umd.Queue) lists, took any value (hostile-21): "x" and None
    were Python's "unsupported operand type(s) for -: 'int' and 'str'" from inside the UMD,
    -1, 2**70 and True answered True, a numpy uint64 printed numpy's overflow warning from
    the KMD's fence.py. A seqno is an int from 0 to 0xffffffff; numpy's integers are ints."""
    import warnings

    import numpy as np
    kmd_model.bind(RefModel())
    try:
        gpu = umd.open()
        q = gpu.queue()
        q.write(gpu.alloc(64), 0, 1)
        q.finish()
        s = q.seq_of(1)
        for bad, kind, text in (("x", TypeError, "an int, not 'x'"), (None, TypeError, "an int, not None"),
                                (1.5, TypeError, "an int, not 1.5"), (True, TypeError, "an int, not True"),
                                (-1, ValueError, "a seqno, an int from 0 to 0xffffffff (seq_of's, flush's), not -1"),
                                (1 << 70, ValueError, f"a seqno, an int from 0 to 0xffffffff (seq_of's, flush's), "
                                                      f"not {1 << 70}"),
                                (np.uint64(1 << 63), ValueError, f"not {1 << 63}")):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with pytest.raises(kind) as ei:
                    q.seq_done(bad)
            assert str(ei.value).startswith("seq_done: seq must be ") and str(ei.value).endswith(text), str(ei.value)
        assert q.seq_done(s) and q.seq_done(np.uint32(s)) and not q.seq_done((s + 1) & 0xFFFFFFFF)
        gpu.close()
    finally:
        kmd_model.unbind()
