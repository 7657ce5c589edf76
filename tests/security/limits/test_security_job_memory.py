"""What a queued job costs the driver's memory (hostile-17).

Each job held a set of every BO mapped in its file's VM when it was submitted (Vm.bos: the
BOs it may reach stay allocated until it ends), so its memory grew with the file's BOs: with
7,000 4 KiB BOs mapped, 258 KiB a job. A file queues up to `sched_jobs` (32) jobs a context
a ring behind a dependency that does not end, in 4,095 contexts: SDMA jobs alone, which no
shadow pool bounds, some 131,000 of them, 33 GB, the driver's memory the whole process's
(every other client's). Now a job holds its VM's generation (Vm.job_started: which BOs were
mapped when it was submitted is the BOs' own record, `Bo.spans`), and the explicit holds
beside it (its user fence's BO, a BO unmapped while it was in a ring): a few hundred bytes
whatever the file maps. A BO closed under a queued job still stays until the job ends.
"""

from __future__ import annotations

import gc
import tracemalloc

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, CtxOp, HwIp, Request
from spec import sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client
from tests.kmd_sched.sched_helpers import sdma_ib


def _many_bos(c: Client, n: int) -> list[int]:
    """`n` 4 KiB VRAM BOs mapped one after another above the client's others: their handles."""
    out = []
    for _ in range(n):
        h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM, 0)).handle
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, c.next_va, 0, 0x1000, RWX))
        c.next_va += 0x1000
        out.append(h)
    return out


def _queued_jobs_bytes(c: Client, bo, hold, n: int, between=None) -> float:
    """Bytes the driver holds a job for `n` SDMA jobs of new contexts, each waiting for job
    `hold` (the client's first context's); `between()` runs before each CS."""
    ctxs = [c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id for _ in range(-(-n // 32))]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(n):
            if between is not None:
                between(k)
            c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x2000, [k]), 0x100),
                     CsChunkDep(HwIp.DMA, 0, c.ctx, hold), ctx=ctxs[k // 32])
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()


def test_a_queued_jobs_memory_does_not_grow_with_the_bos_its_file_maps():
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x4000)
    many = _many_bos(c, 3_000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 1, "EQ", interval=1)))
    per_job = _queued_jobs_bytes(c, bo, hold, 200)
    assert per_job < 8 << 10, f"{per_job:.0f} bytes a queued job with 3,000 BOs mapped"
    # what a job holds is as before: a BO mapped when the jobs were submitted, closed while
    # they wait, stays allocated (GEM_WAIT_IDLE busy) until the last of them has ended
    x = c.f.handles[many[0]]
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(many[0]))
    assert not x.freed and x.busy
    late = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.VRAM, 0)).handle
    c.io(Request.GEM_VA, uapi.GemVaArgs(late, uapi.VaOp.MAP, c.next_va, 0, 0x1000, RWX))
    assert not c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(late, 0)).busy  # mapped after them: not theirs
    bo.u32[0xC00] = 1
    assert c.wait(hold, 1_000_000)
    c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(bo.handle, 1_000_000))
    assert bo.u32[0x800] == 199 and x.freed
    assert not any(j for s in kmd.scheds for j in (*s.pending, *s.queue))


def test_a_mapping_changed_before_each_cs_costs_no_copy_of_the_vms_bos_either():
    """The BOs a job holds change with each GEM_VA: a client mapping and unmapping a page
    between its CSs gave each job a set of its own (the honest case could share one)."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x4000)
    _many_bos(c, 3_000)
    page = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)).handle
    va = c.next_va
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 1, "EQ", interval=1)))

    def toggle(k: int) -> None:
        op = uapi.VaOp.MAP if k % 2 == 0 else uapi.VaOp.UNMAP
        c.io(Request.GEM_VA, uapi.GemVaArgs(page, op, va, 0, 0x1000, RWX if op == uapi.VaOp.MAP else 0))
    per_job = _queued_jobs_bytes(c, bo, hold, 200, toggle)
    assert per_job < 8 << 10, f"{per_job:.0f} bytes a queued job with 3,000 BOs mapped"
    p = c.f.handles[page]
    assert p.busy  # the jobs submitted while it was mapped hold it
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(page))
    assert not p.freed
    bo.u32[0xC00] = 1
    assert c.wait(hold, 1_000_000)
    c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(bo.handle, 1_000_000))
    assert bo.u32[0x800] == 199 and p.freed
