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

import errno
import gc
import tracemalloc

import pytest

import kmd_model
from kmd_model import uapi
from kmd_model.uapi import CsChunkDep, CtxOp, HwIp, KmdError, Request
from spec import pm4, sdma
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


def test_a_cs_looks_up_each_ring_and_context_its_dependencies_name_once(monkeypatch):
    """A CS's dependency chunks are looked up under the driver's lock, each its ring, its
    context and its job: 1,024 of them (max_dep_chunks), naming jobs of 33 contexts, held
    the lock about 30 ms a CS on a loaded machine (317 ms when a garbage collection fell in
    it; another client's INFO waited up to 268 ms behind them), as often as the client
    submits. The ring and the context a chunk names are looked up once a CS (each error
    still the first chunk's that has it), the job each names once a chunk: 21 to 27 ms. (The
    rest, a few microseconds a chunk, is an open bound: docs/architecture.md.)"""
    from kmd_model.core.file import File
    from kmd_model.ioctl import cs as cs_ioctl

    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x4000)
    hold = c.submit(sdma_ib(bo, sdma.poll_regmem(bo.addr + 0x3000, 1, 1, "EQ", interval=1)))
    ctxs = [c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id for _ in range(4)]
    jobs = [(x, c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x2000, [k]), 0x100),
                         CsChunkDep(HwIp.DMA, 0, c.ctx, hold), ctx=x)) for x in ctxs for k in range(30)]
    rings, lookups = [], []
    real_ring, real_ctx = cs_ioctl._ring, File.ctx
    monkeypatch.setattr(cs_ioctl, "_ring", lambda *a: rings.append(a) or real_ring(*a))
    monkeypatch.setattr(File, "ctx", lambda self, *a: lookups.append(a) or real_ctx(self, *a))
    deps = [CsChunkDep(HwIp.DMA, 0, x, s) for x, s in jobs] * 8  # 960 chunks, 120 jobs of 4 contexts
    last = c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x2004, [7]), 0x200), *deps)
    assert len(rings) <= 1 + 4 and len(lookups) <= 1 + 4, (len(rings), len(lookups))
    # each chunk still checked: a bad one among them is refused, naming its own index
    bad = deps[:500] + [CsChunkDep(HwIp.DMA, 0, ctxs[0], 0x7777)] + deps[500:]
    with pytest.raises(KmdError) as ei:
        c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x2008, [8]), 0x300), *bad)
    assert ei.value.errno == errno.EINVAL and ei.value.message.startswith(
        f"CS: chunk 501: context {ctxs[0]} never submitted seqno 0x7777"), ei.value.message
    bad = deps[:300] + [CsChunkDep(HwIp.DMA, 0, 4000, 1)] + deps[300:]
    with pytest.raises(KmdError) as ei:
        c.submit(sdma_ib(bo, sdma.write_linear(bo.addr + 0x2008, [8]), 0x300), *bad)
    assert ei.value.message == "CS: chunk 301: no context 4000 on this file"
    bo.u32[0xC00] = 1  # every job they named ran before it
    assert c.wait(last, 1_000_000) and bo.u32[0x801] == 7 and bo.u32[0x800] == 29


def test_a_bo_mapped_and_unmapped_between_css_keeps_no_record_of_ended_jobs():
    """A BO records the generations of its VM it was mapped in (Bo.spans: what a job
    submitted then holds). A client mapping it, submitting a CS and unmapping it, 1,000
    times, each job ended, left 1,000 spans on the BO, kept for as long as it lived (the
    driver's memory grew with the client's ioctls): spans no unfinished job holds are
    dropped as the next begins. While a job holds its span, that span stays."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40)
    c = Client()
    ib = c.bo(0x2000)
    h = c.io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000, 0, uapi.Domain.GTT, 0)).handle
    bo = c.f.handles[h]
    chunk = c.ib(ib, pm4.write_data(ib.addr + 0x100, [1]))
    va = c.next_va
    for _ in range(1000):
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, va, 0, 0x1000, RWX))
        seq = c.submit(chunk)
        c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.UNMAP, va, 0, 0x1000, RWX))
        assert c.wait(seq)
    assert len(bo.spans) <= 2, len(bo.spans)
    # a job that holds the BO (mapped at its CS, held in a WAIT_REG_MEM) keeps its span
    c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, va, 0, 0x1000, RWX))
    held = c.submit(c.ib(ib, pm4.wait_reg_mem(ib.addr + 0x1800, 1, 1, "EQ"), 0x1000))
    c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.UNMAP, va, 0, 0x1000, RWX))
    c.io(Request.GEM_VA, uapi.GemVaArgs(h, uapi.VaOp.MAP, va, 0, 0x1000, RWX))
    assert bo.busy and c.f.vm.holds(bo)
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    assert not bo.freed  # (the held job may still reach it)
    kmd.mem32[c.phys(ib) // 4 + 0x600] = 1
    assert c.wait(held)
    kmd.service()
    assert bo.freed
