"""The long runs, short on the model here and long on the RTL (Verilator) in
tests/cosim/test_rtl_security.py, through `LONG_CHECKS`: a maximum-size IB (2^20 - 1 dwords)
from the ring and from an IB1, a plain race with the running CP, and a job that runs
longer than the job timeout while it moves.
"""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model.uapi import CsChunkIb, KmdError
from spec import pm4
from testbench.refmodel import RefModel

from ..security_helpers import EVIL, _nops, quiet
from tests.kmd.test_kmd_ioctl import Client


# ------------------------------------------------------------------------------ long runs (RTL: tests/cosim/test_rtl_security.py)

def max_ib(kmd, c: Client, two_levels: bool) -> None:
    """A legal maximum-size IB (2^20 - 1 dwords), called from the ring or from an IB1, runs
    to its end on every backend (the job timeout counts time without progress)."""
    n = kmd_model.core.kmd.MAX_IB_DW
    big = c.bo(4 * n + 0x1000)
    m = big.addr
    body = _nops(n - 5) + pm4.write_data(m + 4 * n + 0x10, [0x600D], wr_confirm=1)
    big.u32[:n] = body
    assert len(body) == n
    if two_levels:
        small = c.bo(0x1000)
        seq = c.submit(c.ib(small, pm4.indirect_buffer(m, n) + pm4.write_data(small.addr + 0x100, [1])))
    else:
        seq = c.submit(CsChunkIb(n, big.handle))
    assert c.wait(seq, 50_000_000)
    assert big.u32[n + 4] == 0x600D
    if two_levels:
        assert small.u32[0x40] == 1


def test_max_ib_on_model():
    """(The RTL runs the same in tests/cosim/test_rtl_security.py, on Verilator: minutes on Icarus.)"""
    kmd = kmd_model.bind(RefModel())
    c = Client()
    max_ib(kmd, c, False)
    max_ib(kmd, c, True)
    quiet(kmd)

def check_race_with_running_cp(dev):
    """No CP held: the client rewrites the end of its IB right after CS, while the CP is
    still running the IB's first part. The CP runs the checked copy. (On the model the job
    has finished before CS returns; the race is the RTL's.)"""
    kmd = kmd_model.bind(dev)
    a, v = Client(), Client()
    abo, vbo = a.bo(0x8000), v.bo()
    vbo.u32[:] = 0x5A5A5A5A
    ib = _nops(4000) + pm4.write_data(abo.addr + 0x7000, [1], wr_confirm=1)
    seq = a.submit(a.ib(abo, ib))
    abo.u32[4000:4005] = pm4.write_data(vbo.addr, [EVIL], wr_confirm=1)
    assert a.wait(seq)
    assert abo.u32[0x1C00] == 1 and (vbo.u32 == 0x5A5A5A5A).all()
    quiet(kmd)


def check_max_ib(dev):
    kmd = kmd_model.bind(dev)
    max_ib(kmd, Client(), False)
    quiet(kmd)


def check_max_ib2(dev):
    kmd = kmd_model.bind(dev)
    max_ib(kmd, Client(), True)
    quiet(kmd)


def check_progress_resets_job_timeout(dev):
    """A legal job that runs for longer than job_timeout, moving all the while, is not a
    hang; one that stops moving is, after job_timeout without progress."""
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1_000)
    c = Client()
    bo = c.bo(0x40000)
    n = 0xF000  # dwords of NOPs: several job_timeouts of fetching
    t0 = dev.now()
    seq = c.submit(c.ib(bo, _nops(n) + pm4.write_data(bo.addr + 0x3F000, [1], wr_confirm=1)))
    assert c.wait(seq, 10_000_000)
    assert bo.u32[0xFC00] == 1
    assert dev.now() - t0 > 3 * 5_000, "the job was not longer than the timeout"
    quiet(kmd)
    stuck = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr, 1, 1, "EQ")))
    with pytest.raises(KmdError) as ei:
        c.wait(stuck, 100_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.stats["job_timeouts"] == 1


LONG_CHECKS = [check_race_with_running_cp, check_max_ib, check_max_ib2, check_progress_resets_job_timeout]
