"""Buffer memory: the first-fit heap's free list (coalescing with either neighbour, a heap
filled to the last byte, the lowest hole first), a BO the CP still runs from after its
handle is gone (with the checker off, the KMD finds it by address), and the shadow pool
for checked IB copies (packed back to back; a job larger than the pool, one that takes it
exactly, and one that waits for room)."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model.cs.shadow import ShadowPool
from kmd_model.mm.bo import Bo, Heap
from kmd_model.uapi import CsChunkIb, Domain, GemCloseArgs, GemCreateArgs, InfoArgs, InfoQuery, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.security.security_helpers import LoopingCpModel

from ..test_kmd_ioctl import Client, expect


def test_heap_coalesces_with_both_neighbours():
    h = Heap("t", 0x1000, 0x5000)
    a, b, c, d = (h.alloc(0x1000, 0x1000) for _ in range(4))
    assert (a, b, c, d) == (0x1000, 0x2000, 0x3000, 0x4000) and h.holes == [[0x5000, 0x6000]]
    h.free(b, 0x1000)
    assert h.holes == [[0x2000, 0x3000], [0x5000, 0x6000]] and h.largest_free == 0x1000
    h.free(a, 0x1000)  # joins the hole after it
    assert h.holes == [[0x1000, 0x3000], [0x5000, 0x6000]]
    h.free(d, 0x1000)  # joins the hole before it... and the one after
    assert h.holes == [[0x1000, 0x3000], [0x4000, 0x6000]]
    h.free(c, 0x1000)  # joins both at once
    assert h.holes == [[0x1000, 0x6000]] and h.used == 0 and h.largest_free == 0x5000
    assert h.alloc(0x2000, 0x2000) == 0x2000 and h.holes == [[0x1000, 0x2000], [0x4000, 0x6000]]
    # first fit: the lowest hole that fits, though a higher one does too; top down, the highest
    assert h.alloc(0x1000, 0x1000, top_down=True) == 0x5000 and h.alloc(0x1000, 0x1000) == 0x1000
    assert h.holes == [[0x4000, 0x5000]]
    full = Heap("full", 0, 0x2000)
    assert full.alloc(0x2000, 0x1000) == 0 and full.holes == [] and full.largest_free == 0
    assert full.alloc(1, 1) is None


def test_memory_info_when_a_heap_is_full():
    kmd = kmd_model.bind(RefModel(mem_size=1 << 20))
    c = Client()
    vram = kmd.bo.heaps[Domain.VRAM]
    c.io(Request.GEM_CREATE, GemCreateArgs(vram.size - vram.used, 0, Domain.VRAM))  # (the VM's root table is there)
    mem = c.io(Request.INFO, InfoArgs(InfoQuery.MEMORY))
    v = mem.vram
    assert (v.total, v.used, v.largest_free) == (vram.size, vram.size, 0)
    assert 0 < mem.gtt.largest_free <= mem.gtt.total - mem.gtt.used
    expect(errno.ENOMEM, "GEM_CREATE: no 0x1 bytes (0x1000 in whole pages) free in VRAM (0x0 free, largest hole "
           "0x0)", c.io, Request.GEM_CREATE, GemCreateArgs(1, 0, Domain.VRAM))
    # (the size as given: rounded up, 2**64 - 1 was named 0x10000000000000000, wider than its field)
    expect(errno.ENOMEM, "GEM_CREATE: no 0xffffffffffffffff bytes free in VRAM (0x0 free, largest hole 0x0)", c.io,
           Request.GEM_CREATE, GemCreateArgs(2**64 - 1, 0, Domain.VRAM))


def test_memory_infos_largest_free_follows_allocations_and_frees():
    """INFO MEMORY's largest_free is the largest hole as the heap is at the query, through
    allocations, frees that leave a hole between two BOs, and frees that coalesce holes (no
    value kept from an earlier query or an earlier state of the heap)."""
    kmd_model.bind(RefModel())
    c = Client()
    m = 1 << 20

    def largest() -> int:
        return c.io(Request.INFO, InfoArgs(InfoQuery.MEMORY)).vram.largest_free

    def create(size: int) -> int:
        return c.io(Request.GEM_CREATE, GemCreateArgs(size, 0, Domain.VRAM)).handle

    def close(handle: int) -> None:
        c.io(Request.GEM_CLOSE, GemCloseArgs(handle))

    whole = largest()
    a, b, d = create(m), create(m), create(m)  # first fit: side by side from the bottom
    assert largest() == whole - 3 * m
    rest = create(whole - 3 * m)
    assert largest() == 0
    close(b)
    assert largest() == m  # a hole between a and d
    close(a)
    assert largest() == 2 * m  # a's and b's, one hole
    half = create(m // 2)
    assert largest() == 3 * m // 2
    close(d)
    assert largest() == 5 * m // 2
    close(half)
    close(rest)
    assert largest() == whole


def test_closed_bo_the_cp_runs_from_stays_allocated():
    """With the checker off the job's IB is named by address: the KMD keeps its BO (every BO
    the VM maps) alive past GEM_CLOSE until the job is done."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    c = Client()
    low = c.bo(0x1000, Domain.VRAM)
    plow = c.phys(low)
    data = c.bo(0x1000)
    ib = pm4.wait_reg_mem(data.addr, 1, 1, "EQ") + pm4.write_data(data.addr + 0x10, [7]) + pm4.pad(4)
    low.u32[:len(ib)] = ib
    seq = c.submit(CsChunkIb(len(ib), gpu_addr=low.addr))
    c.io(Request.GEM_CLOSE, GemCloseArgs(low.handle))
    assert any(b.gpu_addr == plow for b in kmd.bo.live)  # still there: the CP runs from it
    assert c.phys(c.bo(0x1000, Domain.VRAM)) != plow
    data.u32[0] = 1
    assert c.wait(seq) and data.u32[4] == 7
    assert not any(b.gpu_addr == plow for b in kmd.bo.live)


def test_shadow_pool_limits():
    """A 4 KiB pool: a job whose checked copies take more than the whole pool is refused
    (E2BIG); a job that does not fit beside the ones in flight waits for them, as long as
    the pool drains; ENOMEM once nothing in it was freed for 2 * job_timeout."""
    dev = LoopingCpModel()
    kmd = kmd_model.bind(dev, shadow_pool_kib=4, job_timeout=5_000, fallback_poll=1_000)
    assert kmd.shadow.size == 0x1000 and kmd.max_job_dw == 512
    c = Client()
    bo = c.bo(0x8000)
    m = bo.addr
    # 100 one-dword IB2s: 500 dwords to run (under 512), but each copy takes 32 bytes
    bo.u32[0x1000:0x1064] = pm4.TYPE2_FILLER
    calls = sum((pm4.indirect_buffer(m + 0x4000 + 4 * i, 1) for i in range(100)), [])
    bo.u32[:400] = calls
    expect(errno.E2BIG, "CS: the job's checked copies take 0x12c0 bytes, more than the whole shadow pool "
           "(0x1000 bytes)", c.submit, CsChunkIb(400, bo.handle))
    # a held job, then three of 1 KiB: the fourth does not fit beside them. It waits for
    # room while the pool drains; with the held job moving for ever (a checked job's timer
    # restarts for progress) nothing is freed for 2 * job_timeout: ENOMEM, by name
    other = Client()
    obo = other.bo()
    bo.u32[0x400:0x500] = [pm4.TYPE2_FILLER] * 0x100

    def fill_pool():
        held = other.submit(other.ib(obo, pm4.wait_reg_mem(obo.addr + 0x800, 1, 1, "EQ")))
        seqs = [c.submit(CsChunkIb(0x100, bo.handle, 0x1000)) for _ in range(3)]
        assert kmd.shadow.used == 32 + 3 * 0x400
        return held, seqs

    held, seqs = fill_pool()
    dev.looping = True
    expect(errno.ENOMEM, "CS: no room for the job's 0x400 bytes of checked copies in the shadow pool (0x1000 "
           "bytes; this file's 3 job(s) in flight hold 0xc00 of them, other clients' use is not shown)",
           c.submit, CsChunkIb(0x100, bo.handle, 0x1000))
    assert kmd.stats["job_timeouts"] == 0  # (the held job is one of the 4: never reset)
    dev.looping = False  # now it stops moving: reset, and the three behind it run
    assert all(c.wait(s) for s in seqs) and kmd.shadow.used == 0 and kmd.stats["job_timeouts"] == 1
    # what the jobs took went back where it came from (the pool's memory, not the VA the
    # jobs saw it at): the pool is one hole again
    assert kmd.shadow.heap.holes == [[kmd.shadow.bo.gpu_addr, kmd.shadow.bo.end]]
    # again, with the held job older: this time the wait outlasts its reset and what follows
    other = Client()
    obo = other.bo()
    held, seqs = fill_pool()
    kmd.dev.delay(3_000)
    t0 = kmd.dev.now()
    seqs.append(c.submit(CsChunkIb(0x100, bo.handle, 0x1000)))
    waited = kmd.dev.now() - t0
    # it waited for the reset (the held job's timer runs out 5,000 to 10,000 cycles after it
    # started, 3,000 before this CS), and not for the wait's whole 2 * job_timeout
    assert 1_000 <= waited < 2 * 5_000 and kmd.stats["job_timeouts"] == 2
    assert all(c.wait(s) for s in seqs)
    assert kmd.shadow.used == 0 and kmd.shadow.high_water == 32 + 3 * 0x400



def test_the_shadow_pool_is_the_size_asked_for():
    """shadow_pool_kib in whole pages, each page counted (12 KiB is 0x3000, not 0x2000), and
    the per-job limit follows from it: half the pool in dwords, rounded down to a power of 2."""
    for kib, size, max_dw in ((4, 0x1000, 512), (12, 0x3000, 1024), (20, 0x5000, 2048)):
        kmd = kmd_model.bind(RefModel(), shadow_pool_kib=kib)
        assert (kmd.shadow.size, kmd.max_job_dw) == (size, max_dw)


def test_the_shadow_pool_packs_copies_back_to_back():
    """The pool's ranges are 32-byte aligned and follow one another with no gap, so copies
    that add up to the pool's size all fit; a freed range is taken again whole."""
    pool = ShadowPool(Bo(0x10000, 0x1000, Domain.GTT, 0, None, "shadow IBs"))
    assert [pool.alloc(n) for n in (0x20, 0x60, 0xF80)] == [0x10000, 0x10020, 0x10080]
    assert pool.used == pool.high_water == pool.size and not pool.fits(0x20) and pool.alloc(0x20) is None
    pool.free(0x10020, 0x60)
    assert pool.fits(0x60) and not pool.fits(0x80) and pool.alloc(0x60) == 0x10020


def test_a_job_whose_copies_take_the_whole_shadow_pool_is_taken():
    """The E2BIG limit is the pool's size itself: a job whose checked copies take exactly the
    4 KiB pool (an IB of 384 dwords calling 80 one-dword IB2s: 0x600 + 80 * 0x20 bytes)
    runs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4)
    c = Client()
    bo = c.bo(0x8000)
    bo.u32[0x1000:0x1050] = pm4.TYPE2_FILLER
    calls = sum((pm4.indirect_buffer(bo.addr + 0x4000 + 4 * i, 1) for i in range(80)), [])
    bo.u32[:384] = calls + pm4.pad(384 - len(calls))
    seq = c.submit(CsChunkIb(384, bo.handle))
    assert kmd.shadow.high_water == kmd.shadow.size == 0x1000 and c.wait(seq)


def test_a_cs_waiting_for_the_shadow_pool_takes_a_hole_of_exactly_its_size_at_once():
    """A CS waits for room in the pool until a hole as large as its copies opens, and goes
    on as soon as one does, even when the hole is exactly its size: here another client's
    held job ahead of it is reset, freeing its 2 KiB beside a third client's held 2 KiB, and
    the CS of 2 KiB gets in then, not at the end of its wait (2 * job_timeout)."""
    jt = 5_000
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=jt, fallback_poll=1_000)
    assert kmd.shadow.size == 0x1000 and kmd.max_job_dw == 512
    a, b, c = Client(), Client(), Client()

    def ib512(cl, tail):  # an IB of 512 dwords: 2 KiB of checked copies
        bo = cl.bo(0x2000)
        bo.u32[:0x200] = [pm4.TYPE2_FILLER] * (0x200 - len(tail)) + tail
        return bo, CsChunkIb(0x200, bo.handle, 0)

    abo, a_ib = ib512(a, pm4.wait_reg_mem(a.next_va + 0x1000, 1, 1, "EQ"))  # flags: in the BO's 2nd page
    bbo, b_ib = ib512(b, pm4.wait_reg_mem(b.next_va + 0x1000, 1, 1, "EQ"))
    cbo, c_ib = ib512(c, pm4.write_data(c.next_va + 0x1000, [0xC]))
    held_a, held_b = a.submit(a_ib), b.submit(b_ib)  # A until its timer resets it, B until the end
    assert kmd.shadow.used == 0x1000  # the pool is full
    kmd.dev.delay(jt)
    t0 = kmd.dev.now()
    seq = c.submit(c_ib)
    waited = kmd.dev.now() - t0
    assert kmd.stats["job_timeouts"] == 1 and kmd.shadow.used == 0x1000  # A's 2 KiB went to C
    assert waited < 3 * jt // 2, waited  # at A's reset, not at the end of the wait
    with pytest.raises(kmd_model.uapi.KmdError):
        a.wait(held_a)
    bbo.u32[0x400] = 1  # B may end now, and C after it
    assert c.wait(seq) and b.wait(held_b) and cbo.u32[0x400] == 0xC


def test_kernel_buffers_at_bind():
    """bind makes the kernel's own BOs in GTT, named as the crash report lists them, sized by
    the parameters; on a device too small for them it says which did not fit."""
    kmd = kmd_model.bind(RefModel(mem_size=1 << 17))  # a 4096-dword ring, 256 IH entries
    kb = kmd.bo.live_bos(None)
    assert [(b.name, b.size) for b in kb[:4]] == [("wb", 0x1000), ("ring", 0x4000), ("ih", 0x2000),
                                                  ("ib test", 0x1000)]
    # the rings of the engines the model adds (QUEUE_CAPS) before the shadow pool, which takes
    # a share of what they leave
    assert [(b.name, b.size) for b in kb[4:6]] == [("sdma ring", 0x1000), ("gfx_high ring", 0x4000)]
    assert kb[6].name == "shadow IBs" and kb[6] is kmd.shadow.bo and all(b.domain == Domain.GTT for b in kb)
    for size, what, need in ((1 << 14, "ring", 0x4000), (1 << 16, "sdma ring", 0x1000),
                             (0x19000, "gfx_high ring", 0x4000), (0x1a000, "shadow IBs", 0x1000)):
        with pytest.raises(kmd_model.uapi.KmdError, match=rf"^ENOMEM: bind: {what}: no {need:#x} bytes free in GTT"):
            kmd_model.bind(RefModel(mem_size=size))


def test_heaps_split_the_memory():
    """VRAM from the second page up to the split, GTT from there to the last whole page: no
    overlap, no gap; four pages is the smallest memory taken, one byte less is refused."""
    from kmd_model.mm.bo import PAGE, BoManager

    for size, fraction in ((4 * PAGE, 0.5), (0x100_0000 + 0x123, 0.25), (64 << 20, 0.5)):
        v, g = (BoManager(size, fraction).heaps[d] for d in (Domain.VRAM, Domain.GTT))
        assert v.base == PAGE and v.base + v.size == g.base and g.base + g.size == size & ~(PAGE - 1)
        assert v.size > 0 and g.size > 0 and g.base % PAGE == 0
    with pytest.raises(ValueError, match=r"^device memory of 0x3fff bytes is too small \(need >= 0x4000\)$"):
        BoManager(4 * PAGE - 1)


def _a_hang_and_a_full_shadow_pool(kmd):
    """A client's hang (a WAIT_REG_MEM never released) and three 1 KiB jobs behind it that
    fill a 4 KiB shadow pool; its next IB at 0x2000 (1 KiB, a WRITE_DATA of 7 to 0x7100 at
    its end) finds no room, and the hang's timer runs out while that CS waits. Returns
    (client, bo, held_seq, the three seqs)."""
    c = Client()
    bo = c.bo(0x8000)
    bo.u32[0x400:0x500] = [pm4.TYPE2_FILLER] * 0x100
    held = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ")))  # its hang
    seqs = [c.submit(CsChunkIb(0x100, bo.handle, 0x1000)) for _ in range(3)]  # the pool is full
    kmd.dev.delay(3_000)  # the held job's timer runs out during the next CS's wait
    wd = pm4.write_data(bo.addr + 0x7100, [7])
    bo.u32[0x800:0x900] = [pm4.TYPE2_FILLER] * (0x100 - len(wd)) + wd  # 1 KiB: no room beside them
    return c, bo, held, seqs

def test_a_cs_whose_context_is_reset_while_it_waits_for_the_shadow_pool_is_refused():
    """A CS waiting for room in the shadow pool lets the driver recover a hang meanwhile. If
    that recovery made the CS's own context guilty (its held job was the hang, and the full
    reset followed: a CP without CP_QUEUE_RESET), the CS fails with ECANCELED, as any later
    CS of the context does. It was accepted instead, and the guilty context's job ran after
    all. (After a queue reset the context runs on: the CS is taken,
    test_a_cs_that_waits_for_the_shadow_pool_through_a_queue_0_reset_runs.)"""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=5_000, fallback_poll=1_000)
    full_reset_for_ring_0(kmd)
    c, bo, held, seqs = _a_hang_and_a_full_shadow_pool(kmd)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.submit(CsChunkIb(0x100, bo.handle, 0x2000))
    assert ei.value.errno == errno.ECANCELED and ei.value.message.startswith(f"CS: context {c.ctx} was reset: "), ei.value
    assert ei.value.info.code == "TIMEOUT"
    kmd.dev.delay(1_000)
    kmd.service()
    assert bo.u32[0x7100 // 4] == 0  # it never ran
    assert kmd.shadow.used == 0 and not kmd.sched.queue and not kmd.sched.pending
    assert c.f.contexts[c.ctx].submitted == 4  # (the refused CS took no seqno)
    for s in (held, *seqs):
        with pytest.raises(kmd_model.uapi.KmdError):
            c.wait(s)


def test_a_cs_that_waits_for_the_shadow_pool_through_a_queue_0_reset_runs():
    """The same CS, the hang recovered by queue 0's reset alone: the context's jobs on the gfx
    ring (the hang and the three behind it) are cancelled and their shadow copies freed, the
    context is not refused, so the waiting CS gets its room, is taken, and its job runs."""
    kmd = kmd_model.bind(RefModel(), shadow_pool_kib=4, job_timeout=5_000, fallback_poll=1_000)
    c, bo, held, seqs = _a_hang_and_a_full_shadow_pool(kmd)
    seq = c.submit(CsChunkIb(0x100, bo.handle, 0x2000))
    assert c.wait(seq) and bo.u32[0x7100 // 4] == 7
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    for s in (held, *seqs):
        with pytest.raises(kmd_model.uapi.KmdError) as ei:
            c.wait(s)
        assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert kmd.shadow.used == 0 and not kmd.sched.queue and not kmd.sched.pending


def test_a_bo_whose_job_ended_unheard_goes_back_to_its_heap_at_its_close():
    """A BO's job has run on the device but the KMD has not handled its fence yet (no ioctl
    since the CS has serviced the interrupt): the BO still looks busy. GEM_CLOSE looks first,
    so its memory is back in the heap when the close returns (INFO MEMORY reads the heap
    without servicing anything); without that look it was held until some later ioctl
    retired the job (dropping GEM_CLOSE's service passed every test: mutants-11)."""
    kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x10000)
    before = c.io(Request.INFO, InfoArgs(InfoQuery.MEMORY)).gtt.used
    c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x800, [7])))
    assert c.f.handles[bo.handle].busy  # (the job ran; its fence is not handled yet)
    c.io(Request.GEM_CLOSE, GemCloseArgs(bo.handle))
    assert c.io(Request.INFO, InfoArgs(InfoQuery.MEMORY)).gtt.used == before - 0x10000
