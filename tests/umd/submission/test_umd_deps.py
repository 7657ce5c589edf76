"""A flush's wait_events become CS dependency chunks merged per (context, ring), as Mesa's
amdgpu winsys merges its fences: a ring's jobs end in order, so only the latest seqno
waited for on each matters. Without it, a flush waiting on more than the KMD's
max_dep_chunks (1,024) events was refused with EINVAL."""

from __future__ import annotations

import pytest

import kmd_model
import umd
from testbench.refmodel import RefModel
from tests.umd.drive import run_device


@pytest.mark.parametrize("async_submit", [False, True])
def test_5000_wait_events_send_one_dependency_per_ring_and_each_is_honoured(async_submit):
    kmd = kmd_model.bind(RefModel(), cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    gpu = umd.open()
    producers = [gpu.queue(), gpu.queue(engine="copy"), gpu.queue(priority="high")]
    consumer = gpu.queue(async_submit=async_submit, flush_threshold=10_000)  # one flush for all
    gate, buf = gpu.alloc(4096), gpu.alloc(4096)
    events = []
    for i in range(5000):
        p = producers[i % 3]
        if i == 4999:  # the copy queue's last job, the latest waited for there, is held by the CPU
            p.wait_mem(gate, 0, 1)
        events.append(p.signal())
        if i % 500 == 499:
            for p in producers:
                p.flush()
    for p in producers:
        p.flush()
    calls = []
    submit = consumer.ws.cs_submit

    def spy(ctx, chunks):
        calls.append([c for c in chunks if type(c).__name__ == "CsChunkDep"])
        return submit(ctx, chunks)

    consumer.ws.cs_submit = spy
    for ev in events:
        consumer.wait_event(ev)
    consumer.write(buf, 0, [7])
    done = consumer.signal()
    consumer.flush()
    if async_submit:
        gpu.submitter.drain()
    assert len(calls) == 1
    deps = calls[0]
    assert len(deps) == 3  # one per producer ring, each on its latest seqno
    assert {(d.ctx_id, d.handle) for d in deps} == {(p.ctx_id, p.last_seq) for p in producers}
    run_device(kmd)
    assert not done.signalled() and buf.u32[0] == 0  # held for the copy queue's gated job
    gate.u32[0] = 1
    assert done.wait() and buf.u32[0] == 7 and all(ev.signalled() for ev in events)
    gpu.close()


def test_merge_deps_keeps_the_latest_seqno_per_context_and_ring_wrap_safely():
    from kmd_model.uapi import CsChunkDep
    from umd.submit import merge_deps

    a = CsChunkDep(0, 0, 1, 0xFFFF_FFFE)
    merged = merge_deps([a, CsChunkDep(0, 0, 1, 3), CsChunkDep(0, 0, 1, 0xFFFF_FFFF), CsChunkDep(0, 0, 2, 5),
                         CsChunkDep(2, 0, 1, 9), CsChunkDep(0, 0, 2, 4)])
    # 3 is after 0xffffffff (the seqnos wrapped); contexts 1 and 2 and the two IPs stay apart
    assert [(d.ip_type, d.ctx_id, d.handle) for d in merged] == [(0, 1, 3), (0, 2, 5), (2, 1, 9)]
