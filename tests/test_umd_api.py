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
    with pytest.raises(AttributeError, match=r"^Queue.fill\(\) is not in API version 1 \(it is in version 2\)$"):
        q1.fill(b1, 0, 16, 0)
    with pytest.raises(AttributeError, match="^Queue has no entry point 'frobnicate' in API version 2$"):
        q2.frobnicate()
    assert "fill" in dir(q2) and "fill" not in dir(q1) and "write" in dir(q1)
    q2.fill(b2, 16, 16, 7)
    q2.finish()
    assert b2.u32[4:8].tolist() == [7] * 4
    # same entry point name, different functions
    assert umd.TABLES[1].entries["Queue.write"] is not umd.TABLES[2].entries["Queue.write"]
    assert umd.TABLES[1].entries["Queue.signal"] is umd.TABLES[2].entries["Queue.signal"]


CHECKS = [check_versions]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())
