"""A queue the app did not close itself, closed by its device's close(), says so when it is
called: "finish: the queue is closed" left a new user looking for a q.close() the program
never made."""

from __future__ import annotations

import re

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel


def test_a_queue_closed_by_its_device_says_so():
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    q = gpu.queue()
    q.write(buf, 0, 42)
    gpu.close()  # (submits and finishes what q recorded, then closes q)
    assert q.closed
    with pytest.raises(ValueError, match="^" + re.escape(
            "finish: the queue is closed (its device was closed: Device.close closes its queues)") + "$"):
        q.finish()
    with pytest.raises(ValueError, match=r"^signal: the queue is closed \(its device was closed"):
        q.signal()


def test_a_queue_the_app_closed_says_only_that_it_is_closed():
    kmd_model.bind(RefModel())
    gpu = umd.open(api_version=2)
    q = gpu.queue()
    q.close()
    gpu.close()  # (after: the queue was the app's to close, and it did)
    with pytest.raises(ValueError, match=r"^signal: the queue is closed$"):
        q.signal()
    with pytest.raises(ValueError, match=r"^alloc: the device is closed$"):
        gpu.alloc(64)
