"""Batching: ioctls and doorbells per command with a flush every command vs every 64."""

from __future__ import annotations

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel

N = 256


def per_command(gpu, q, buf) -> tuple[float, float, float]:
    """(ioctls, CS ioctls, doorbells) per command for N writes and a finish()."""
    ws = gpu.ws
    k = kmd_model.bound()
    io0, cs0, db0 = ws.ioctls, k.stats["cs"], k.ring.doorbells
    for i in range(N):
        q.write(buf, 4 * (i % 1024), i)
    q.finish()
    return (ws.ioctls - io0) / N, (k.stats["cs"] - cs0) / N, (k.ring.doorbells - db0) / N


def check_batching(dev):
    kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    io1, cs1, db1 = per_command(gpu, gpu.queue(flush_threshold=1), buf)
    io64, cs64, db64 = per_command(gpu, gpu.queue(flush_threshold=64), buf)
    assert cs1 == 1.0 and io1 >= 1.0 and db1 >= 1.0  # one CS (and one doorbell) per command
    assert cs64 == 1 / 64 and db64 <= 1 / 64  # one per batch
    assert io64 <= io1 / 10 and db64 <= db1 / 10  # the design target
    assert buf.u32[:N].tolist() == list(range(N))
    return io1, db1, io64, db64


def check_flush_by_dwords(dev):
    kmd_model.bind(dev)
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(4096)
    q = gpu.queue(flush_dwords=100)  # a 4-dword write is an 8-dword WRITE_DATA: 13 make 104
    for i in range(30):
        q.write(buf, 16 * i, [i, i, i, i])
    assert q.flushes == 2 and q.cmdbuf.commands == 4  # flushed after writes 13 and 26
    q.finish()
    assert buf.u32[::4][:30].tolist() == list(range(30))


CHECKS = [check_batching, check_flush_by_dwords]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


@pytest.mark.parametrize("threshold", [1, 8, 128])
def test_the_batching_example_counts_every_ioctl_of_the_workload(threshold):
    """examples/batching.py's ioctls column: the COUNTERS queries around the workload are
    outside it already, so nothing is taken off. On the model every job has ended by the
    time the final wait looks, so the workload's ioctls are its CS ioctls and the looks that
    prove its jobs ended well, one CTX QUERY_STATE at each flush and at the final wait (the
    gfx ring, like every ring, may be reset alone: umd/failures/failed_jobs.py) (it took one off:
    64 commands at threshold 128 read 0 ioctls per command and "64x fewer")."""
    from examples import batching

    kmd_model.bind(RefModel())
    row = batching.measure(1, threshold, 64)
    assert row.cs == -(-65 // threshold)  # 64 writes and the signal, flushed every `threshold`
    assert row.ioctls == 2 * row.cs + 1


def test_the_batching_example_counts_in_english(capsys):
    """`--commands 1` printed "1 commands per configuration", and a run where batching saved
    nothing (one threshold) "1x fewer"."""
    from examples import batching

    kmd_model.bind(RefModel())
    try:
        assert batching.main(["--commands", "1", "--thresholds", "1", "--aligns", "1"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "batching on model: 1 command per configuration", out
        assert "(no fewer)" in out[-1] and "1x" not in out[-1], out
        assert batching.main(["--commands", "8", "--thresholds", "1,8", "--aligns", "1"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == "batching on model: 8 commands per configuration" and "x fewer)" in out[-1], out
        assert " unbatched -> " in out[-1], out
        # the worst of thresholds 4 and 8 is no unbatched run: it is named by its threshold
        assert batching.main(["--commands", "8", "--thresholds", "4,8", "--aligns", "1"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert "unbatched" not in out[-1] and " at flush threshold 4 -> " in out[-1], out
    finally:
        kmd_model.unbind()
