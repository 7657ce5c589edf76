"""What the UMD says when the kernel has banned the app's whole file (KmdParams
file_ban_after_hangs: its contexts' jobs timed out that many times in all): no context of
the file runs any more and no new one can be made (CTX ALLOC: EIO), so no error may tell
the app to make a new queue, and each one that the ban explains says to open a new Device.

Before, a guilty gfx context's refused flush said "make a new queue", Device.queue() then
raised the KMD's own KmdError (EIO) out of the UMD, and a copy or high-priority queue's
DeviceLost gave the kernel's words alone (for a context banned before its file, "context 1
is banned", the ban a new queue gets round).
"""

from __future__ import annotations

import pickle
import re
import time

import pytest

import kmd_model
import umd
from kmd_model.core.kmd import KmdParams
from testbench.refmodel import RefModel

from ..drive import run_device
from .test_umd_lost_failures import KINDS, _model

JOB_TIMEOUT = 20_000
NEW_DEVICE = r"fd \d+ is banned: its contexts' jobs timed out \d+ times \(file_ban_after_hangs \d+\): nothing " \
             r"of this Device runs any more: open a new Device \(umd.open\(\)\)$"


def _hang(kmd, q, flag) -> None:
    """A job of `q` that never ends (nobody writes `flag`), flushed and timed out by the job timer."""
    q.wait_mem(flag, 0, 1)
    q.flush()
    deadline = time.monotonic() + 10
    while q.async_submit and not all(j.done for j in q.pending) and time.monotonic() < deadline:  # (the thread's CS)
        time.sleep(0.001)
    for _ in range(12):
        run_device(kmd, JOB_TIMEOUT // 4)


@pytest.mark.parametrize("async_submit", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_no_error_of_a_banned_file_says_make_a_new_queue(kind, async_submit):
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, file_ban_after_hangs=1,
                                                 hw_timeout=2_000, cap_sys_nice=True))
    gpu = umd.open(api_version=3)
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind], async_submit=async_submit)
    _hang(kmd, q, flag)
    said = []
    for call in ("flush", "flush", "finish", "close"):  # the hang's own error, then the refused flushes
        if call != "close":
            q.write(buf, 0, 9)
        try:
            getattr(q, call)()
        except umd.UmdError as e:
            said.append(e)
    refusals = [e for e in said if isinstance(e, umd.DeviceLost) or e.refused]
    # (an async queue's finish raises the refusals pending with the hang's error: its notes)
    noted = [n for e in said for n in getattr(e, "__notes__", ())]
    assert refusals or noted, said
    for e in said:
        assert "make a new queue" not in str(e), e
    for n in noted:
        assert re.search(NEW_DEVICE, n) and n.count("is banned") == 1, n
    for e in refusals:  # (a context a full reset left guilty: GpuError, refused; else the ban's EIO: DeviceLost)
        assert type(e) is (umd.GpuError if kind == "gfx_full" else umd.DeviceLost), e
        assert re.search(NEW_DEVICE, str(e)) and str(e).count("is banned") == 1, str(e)  # (the kernel's words once)
        back = pickle.loads(pickle.dumps(e))  # (the kernel's words why travel with it)
        assert str(back) == str(e) and getattr(back, "file_banned", None) == getattr(e, "file_banned", None)
        assert kind != "gfx_full" or e.file_banned.startswith("fd ")
    with pytest.raises(umd.DeviceLost, match=r"^queue: CTX ALLOC: " + NEW_DEVICE):
        gpu.queue(**KINDS[kind])
    gpu.close()


@pytest.mark.parametrize("kind", ["gfx_high", "copy"])
def test_a_banned_queue_whose_file_is_banned_after_is_told_to_open_a_new_device(kind):
    """A context banned for its own hangs (ban_after_hangs) is QueueBanned, "make a new
    queue", true while its file runs on. Once the file's ban follows (another queue's hang),
    its refused flush is DeviceLost (QUERY_STATE's BANNED is left unset then), and says so:
    the kernel's words name the context's ban alone ("CS: context 1 is banned")."""
    kmd = kmd_model.bind(_model(kind), KmdParams(cs_check=False, job_timeout=JOB_TIMEOUT, ban_after_hangs=1,
                                               file_ban_after_hangs=2, cap_sys_nice=True))
    gpu = umd.open()
    buf, flag = gpu.alloc(64), gpu.alloc(64)
    q = gpu.queue(**KINDS[kind])
    _hang(kmd, q, flag)
    with pytest.raises(umd.GpuError, match="timed out"):  # (the hang's own error, at the next call)
        q.finish()
    q.write(buf, 0, 9)
    with pytest.raises(umd.QueueBanned, match=r"make a new queue \(Device.queue\(\)\)$"):
        q.flush()
    _hang(kmd, gpu.queue(**KINDS[kind]), flag)  # a new queue runs, and its hang bans the file
    q.write(buf, 0, 9)
    with pytest.raises(umd.DeviceLost, match=r"^flush: CS: context \d+ is banned: it caused 1 resets "
                                             r"\(ban_after_hangs 1\); " + NEW_DEVICE) as ei:
        q.flush()
    assert type(ei.value) is umd.DeviceLost
    with pytest.raises(umd.UmdError):
        gpu.close()  # (the second queue's hang, nobody told of it)
