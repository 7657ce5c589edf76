"""Fences, waits and ring space: wrap-safe seqnos across 2^32, a WAIT_REG_MEM released by
a later CPU write, the fallback poll when interrupts are lost, a ring that fills up,
BOs kept alive by running jobs. Bodies are `check_*(dev)`, as in test_kmd_ioctl.py."""

from __future__ import annotations

import errno

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.sched.fence import seq_after, seq_diff, seq_passed
from kmd_model.uapi import CsChunkFence, CsChunkIb, Request
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect

# Jobs across the wrap: enough that the seqnos cross 2^32 in the middle, the 4096-dword ring
# wraps three times and the 256-entry IH ring twice (each check asserts its own wraps, from
# the KMD's counters, so a smaller N cannot quietly stop covering them). 600 jobs, not the
# 1,100 once used: the wrap checks were Icarus's longest (issue 13).
WRAP_JOBS = 600
WRAP_BEFORE = WRAP_JOBS // 2  # jobs before seqno 0
WRAP_START = 2**32 - WRAP_BEFORE


def assert_rings_wrapped(kmd, times: int = 2) -> None:
    """The kernel ring and the IH ring each went round at least `times` times."""
    s = kmd.kmd_stats()
    ring_dw, ih_entries = 1 << kmd.params.ring_log2_dw, 1 << kmd.params.ih_log2_entries
    assert s["ring_dwords"] >= times * ring_dw, (s["ring_dwords"], ring_dw)
    assert s["ih_entries"] >= times * ih_entries, (s["ih_entries"], ih_entries)


def test_seq_compare():
    assert seq_after(1, 0) and not seq_after(0, 1) and not seq_after(5, 5)
    assert seq_after(0, 0xFFFF_FFFF) and seq_after(3, 0xFFFF_FFF0)  # across the wrap
    assert not seq_after(0xFFFF_FFF0, 3)
    assert seq_diff(0x8000_0000, 0) == -(2**31)  # exactly half the space apart: "earlier"
    assert seq_passed(0xFFFF_FFFF, 0) and seq_passed(7, 7) and not seq_passed(8, 7)


def check_fence_wrap(dev):
    """WRAP_JOBS jobs whose ring and context seqnos start WRAP_BEFORE below 2^32."""
    kmd = kmd_model.bind(dev, initial_seq=WRAP_START)
    c = Client()
    bo = c.bo(0x10000)
    uf = 0xF000
    n, last = WRAP_JOBS, WRAP_JOBS - WRAP_BEFORE - 1  # the last job's seqno, past the wrap
    seqs = []
    # a ring of 4096 dwords holds ~170 jobs: submit in bursts, waiting on the last of each
    for i in range(n):
        ib = c.ib(bo, pm4.write_data(bo.addr + 0x8000 + 4 * (i % 0x1000), [i]), offset=0x40 * (i % 0x200))
        seqs.append(c.submit(ib, CsChunkFence(bo.handle, uf)))
        if i % 100 == 99:
            assert c.wait(seqs[-1])
            assert bo.u32[uf // 4] == seqs[-1]
    assert c.wait(seqs[-1])
    assert seqs[0] == WRAP_START and seqs[WRAP_BEFORE - 1] == 0xFFFF_FFFF and seqs[WRAP_BEFORE] == 0
    assert seqs[-1] == last
    assert bo.u32[0x2000:0x2000 + n].tolist() == list(range(n))
    assert bo.u32[uf // 4] == last
    assert c.wait(seqs[0], 0) and c.wait(seqs[WRAP_BEFORE - 1], 0)  # from before the wrap: long signalled
    expect(errno.EINVAL, f"WAIT_CS: context 1 never submitted seqno {last + 1:#x} (last is {last:#x})", c.io,
           Request.WAIT_CS, uapi.WaitCsArgs(c.ctx, last + 1, 10))
    s = kmd.kmd_stats()
    # the hardware fences wrapped too (the IB test used WRAP_START)
    assert s["fences_emitted"] == n + 1 and s["last_fence"] == (WRAP_START + n) & 0xFFFF_FFFF
    assert s["fences_signalled"] == n + 1 and s["jobs_retired"] == n and s["resets"] == 0
    assert_rings_wrapped(kmd)


def check_fence_wrap_in_one_interrupt(dev):
    """Twelve jobs queue up behind a held CP, their hardware fences straddling 2^32; released,
    they all finish before the driver looks: one read of fence memory (a seqno past the
    wrap) must signal the fences from before the wrap too. (Submitted one at a time, each
    job finishes before the next CS on the model, and a compare that is not wrap-safe
    would still see fence == memory every time.)"""
    kmd = kmd_model.bind(dev, initial_seq=2**32 - 6)
    c = Client()
    bo = c.bo(0x4000)
    flag = bo.addr + 0x3000
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(flag, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x2000 + 4 * i, [i + 1]), offset=0x40 * (i + 1)))
            for i in range(12)]
    hw = [c.f.contexts[c.ctx].jobs[s].hw_fence.seq for s in seqs]
    assert hw[0] > hw[-1]  # the hardware fences wrap in the middle of the burst
    irqs = kmd.stats["interrupts"]
    bo.u32[0xC00] = 1
    assert c.wait(seqs[-1])
    if dev.name == "model":  # (on the RTL the jobs finish while the driver looks: any number)
        assert kmd.stats["interrupts"] - irqs <= 2  # one interrupt (or two) for all of them
    assert all(c.wait(s, 0) for s in [hold] + seqs)
    assert bo.u32[0x800:0x80C].tolist() == list(range(1, 13))
    s = kmd.kmd_stats()
    assert s["fences_signalled"] == s["fences_emitted"] == 14 and not kmd.fence_drv.pending
    assert s["last_fence"] == hw[-1] and s["resets"] == 0


def check_wait_reg_mem_released_later(dev):
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    flag, out = bo.addr + 0x3000, bo.addr + 0x3100
    seq = c.submit(c.ib(bo, pm4.write_data(out, [1]) + pm4.wait_reg_mem(flag, 0xAB, 0xFF, "EQ", poll_interval=8)
                        + pm4.write_data(out + 4, [2]) + pm4.release_mem(out + 8, 3)))
    expect(errno.ETIME, f"WAIT_CS: seqno {seq:#x} of context 1 not signalled after 3000 cycles", c.wait, seq, 3000)
    assert bo.u32[0xC40:0xC43].tolist() == [1, 0, 0]  # stopped in the wait
    assert regs.STATUS.WAITING.get(kmd.mmio.read(regs.STATUS))
    assert not c.wait(seq, 0)  # a poll is not an error
    bo.u32[0xC00] = 0x1AA  # wrong value under the mask: still waiting
    with pytest.raises(uapi.KmdError):
        c.wait(seq, 1000)
    bo.u32[0xC00] = 0x2AB  # (0x2AB & 0xFF) == 0xAB
    assert c.wait(seq, 10_000)
    assert bo.u32[0xC40:0xC43].tolist() == [1, 2, 3]
    assert kmd.stats["resets"] == 0


def check_fallback_poll(dev):
    """With the interrupt masked, fences still signal through the fallback poll."""
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    kmd.mmio.write(regs.INT_ENABLE, 0)  # lose every interrupt from here on
    irqs = kmd.stats["interrupts"]
    # (the flag is not in the IB: on the RTL the CP may not have fetched the IB yet)
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(bo.addr + 0x100, [5])))
    bo.u32[0x200] = 1  # the job finishes some time after the CS, with nobody told
    assert c.wait(seq, 10 * kmd.params.fallback_poll)
    assert bo.u32[0x40] == 5
    assert kmd.stats["interrupts"] == irqs and kmd.stats["fallback_polls"] >= 1


def check_ring_full(dev):
    """A 64-dword ring: jobs wait in the scheduler's queue, nothing unconsumed is overwritten."""
    kmd = kmd_model.bind(dev, ring_log2_dw=6)
    c = Client()
    bo = c.bo(0x8000)
    flag = bo.addr + 0x7000
    first = c.submit(c.ib(bo, pm4.wait_reg_mem(flag, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x4000 + 4 * i, [i + 1]), offset=0x100 * (i + 1)),
                     CsChunkFence(bo.handle, 0x7100)) for i in range(12)]
    assert len(kmd.sched.queue) >= 10  # most never reached the ring
    ring = kmd.ring
    assert (ring.committed - ring.get_rptr()) & 0xFFFF_FFFF <= ring.size_dw
    assert not bo.u32[0x1000:0x100C].any()
    bo.u32[0x7000 // 4] = 1
    assert c.wait(seqs[-1])
    assert c.wait(first, 0)
    assert bo.u32[0x1000:0x100C].tolist() == list(range(1, 13))
    assert kmd.stats["resets"] == 0 and not regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS))
    assert ring.doorbells > 4  # refilled as space came back


def check_bo_kept_alive(dev):
    """A BO closed while a job uses it stays allocated until the job is done."""
    kmd = kmd_model.bind(dev)
    c = Client()
    ib_bo, data = c.bo(0x1000), c.bo(0x1000)
    seq = c.submit(c.ib(ib_bo, pm4.wait_reg_mem(data.addr, 1, 1, "EQ") + pm4.write_data(data.addr + 4, [7])))
    busy = c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(data.handle, 100))
    assert busy.busy
    addr = c.phys(data)
    c.io(Request.GEM_CLOSE, uapi.GemCloseArgs(data.handle))
    assert any(b.gpu_addr == addr for b in kmd.live_bos())  # still allocated (and mapped), without a handle
    assert c.phys(c.bo(0x1000)) != addr
    with pytest.raises(uapi.MappingRevoked, match=r"was closed \(GEM_CLOSE\): its CPU mapping is gone"):
        data.u32[0] = 1  # our old mapping went with the handle
    mem32 = dev.mem[addr:addr + 8].view("<u4")  # the memory itself is still there
    mem32[0] = 1
    assert c.wait(seq)
    assert mem32[1] == 7
    assert not any(b.gpu_addr == addr for b in kmd.live_bos())
    assert not c.io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(ib_bo.handle, 0)).busy


CHECKS = [check_fence_wrap, check_fence_wrap_in_one_interrupt, check_wait_reg_mem_released_later, check_fallback_poll, check_ring_full,
          check_bo_kept_alive]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_without_ih_ring():
    """No IH ring (CAPS.IH = 0): the KMD takes EOP / CP_ERROR from INT_STATUS."""
    from tests.kmd.test_kmd_ioctl import check_cs_and_wait
    check_cs_and_wait(RefModel(ih=False))
    kmd = kmd_model.bound()
    assert kmd.ih is None and kmd.stats["interrupts"] >= 2


def test_jobs_with_user_fences_never_overrun_a_small_ring():
    """A 64-dword ring without padding (ib_align_dw=1) filled while the CP is held: each
    job takes its IB packet and two fences (the user fence and the kernel's), and a job
    enters the ring only when all of it fits, so nothing the CP has not read is written
    over (a doorbell more than the ring ahead would stop the CP) and every fence runs."""
    from tests.security.security_helpers import Holder

    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, ib_align_dw=1)
    fences = kmd.counters()["packets"]["RELEASE_MEM"]
    hold = Holder()
    c = Client()
    bo = c.bo()
    seqs = []
    for i in range(8):
        seqs.append(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i + 1]), offset=0x40 * i),
                             CsChunkFence(bo.handle, 0x1F00)))
        assert 0 <= kmd.ring.space() < kmd.ring.size_dw
    assert kmd.sched.queue  # some wait their turn outside the ring
    hold.release()
    assert all(c.wait(s) for s in seqs) and bo.u32[0x400:0x408].tolist() == list(range(1, 9))
    assert kmd.counters()["packets"]["RELEASE_MEM"] - fences == 1 + 2 * 8  # the holder's, and two per job
    assert kmd.stats["resets"] == 0 and bo.u32[0x1F00 // 4] == seqs[-1]


def test_ring_commits_are_aligned_and_a_job_that_fits_exactly_enters():
    """Every doorbell the KMD rings leaves RB_WPTR on the ring's alignment (commits padded
    as amdgpu pads them), and the IB test's IB is padded to it too. With no padding
    (ib_align_dw=1), a job needing exactly the space left enters the ring."""
    kmd = kmd_model.bind(RefModel())
    seen = []
    kmd.observers.append(lambda event, f: seen.append((f["ring"] is kmd.ring, f["start"], f["wptr"]))
                         if event == "doorbell" else None)
    c = Client()
    bo = c.bo()
    for i in range(3):
        c.run(bo, pm4.write_data(bo.addr + 4 * i, [i]), offset=0x40 * i)
    assert len(seen) == 3 and all(r and w % 8 == 0 and s % 8 == 0 for r, s, w in seen)
    ibs = [i for i in pm4.decode_stream(kmd.ring.ring32.tolist()) if i.ok and i.name == "INDIRECT_BUFFER"]
    assert ibs[0].fields["IB_BASE_LO"] << 2 == kmd.ib_test_bo.gpu_addr and ibs[0].fields["IB_SIZE"] == 8
    from tests.security.security_helpers import Holder

    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, ib_align_dw=1)
    hold = Holder()  # 12 dwords: its IB packet and its fence; 52 left
    c = Client()
    bo = c.bo()
    for i in range(2):  # 20 each with a user fence: 12 left
        c.submit(c.ib(bo, pm4.write_data(bo.addr + 4 * i, [i]), offset=0x40 * i), CsChunkFence(bo.handle, 0x1F00))
    last = c.submit(c.ib(bo, pm4.write_data(bo.addr + 8, [2]), offset=0x80))  # 12: exactly what is left
    assert kmd.ring.space() == 0 and not kmd.sched.queue and len(kmd.sched.pending) == 4
    hold.release()
    assert c.wait(last) and bo.u32[:3].tolist() == [0, 1, 2]


@pytest.mark.parametrize("align", [1, 2, 4, 8, 16])
def test_a_job_that_fits_exactly_enters_at_every_alignment(align):
    """The ring reserves a job's dwords and exactly the padding its commit adds (none when
    the job ends aligned), not the worst case: at every ring alignment a job that needs
    exactly the space left enters the ring at once, and the next one waits for space."""
    from tests.security.security_helpers import Holder

    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, ib_align_dw=align)
    r, up = kmd.ring, (lambda n: -(-n // align) * align)  # noqa: E731
    plain, fenced = r.IB_DW + r.FENCE_DW, r.IB_DW + 2 * r.FENCE_DW  # 12 and 20 dwords
    hold = Holder()
    # jobs with a user fence (True) or without: what they take, padded, is all that is left
    jobs = {1: [True, True, False], 2: [True, True, False], 4: [True, True, False], 8: [True, True],
            16: [True, False]}[align]
    assert sum(up(fenced) if f else up(plain) for f in jobs) == r.size_dw - up(plain)
    c = Client()
    bo = c.bo()
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 4 * i, [i + 1]), offset=0x40 * i),
                     *([CsChunkFence(bo.handle, 0x1F00)] if f else [])) for i, f in enumerate(jobs)]
    assert r.space() == 0 and not kmd.sched.queue and len(kmd.sched.pending) == 1 + len(jobs)
    waits = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x100, [9]), offset=0x800))
    assert len(kmd.sched.queue) == 1 and len(kmd.sched.pending) == 1 + len(jobs)  # no room: it waits
    hold.release()
    assert c.wait(waits) and all(c.wait(s, 0) for s in seqs)
    assert bo.u32[:len(jobs)].tolist() == list(range(1, len(jobs) + 1)) and bo.u32[0x40] == 9


def test_a_job_too_large_for_the_ring_is_refused_and_hurts_no_one():
    """A CS whose ring packets (its IB chunks' INDIRECT_BUFFERs and fences) cannot fit even an
    empty ring gets EINVAL at once, before it takes a seqno; queued, it would wait forever
    in front of every other client's job. The file and the device go on."""
    from tests.security.security_helpers import Holder

    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, max_ib_chunks=64)
    r = kmd.ring
    hold = Holder()
    c = Client()
    bo = c.bo()
    bo.u32[:8] = pm4.write_data(bo.addr + 0x800, [1]) + pm4.pad(3)
    most = (r.size_dw - r.FENCE_DW) // r.IB_DW  # IB chunks that fit an empty ring
    n = most + 1
    expect(errno.EINVAL, f"CS: the job takes {n * r.IB_DW + r.FENCE_DW} dwords of the gfx ring ({n} IB chunk(s)), "
           f"more than its {r.size_dw}: use fewer IB chunks or a larger ring",
           c.submit, *[CsChunkIb(8, bo.handle, 0) for _ in range(n)])
    expect(errno.EINVAL, f"CS: the job takes {most * r.IB_DW + 2 * r.FENCE_DW} dwords of the gfx ring ({most} IB "
           f"chunk(s) and a user fence), more than its {r.size_dw}: use fewer IB chunks or a larger ring",
           c.submit, *[CsChunkIb(8, bo.handle, 0) for _ in range(most)], CsChunkFence(bo.handle, 0x1F00))
    hold.release()  # the other client's wait runs the scheduler: nothing of the refused job is queued
    seq = c.submit(*[CsChunkIb(8, bo.handle, 0) for _ in range(most)])  # the largest that fits
    assert seq == 1 and c.wait(seq) and bo.u32[0x200] == 1


def test_jobs_moved_in_one_batch_share_one_commits_padding():
    """Jobs that enter the ring together are written back to back and padded once, at the
    end: each reserves only the padding from where it ends, so with a 16-dword alignment
    three 20-dword jobs fill a 64-dword ring in one doorbell (each alone would take 32)."""
    from tests.security.security_helpers import Holder

    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6, ib_align_dw=16)
    r = kmd.ring
    fenced = r.IB_DW + 2 * r.FENCE_DW
    assert (fenced, r.size_dw) == (20, 64)
    bells = []
    kmd.observers.append(lambda event, f: bells.append((f["wptr"] - f["start"]) & 0xFFFF_FFFF)
                         if event == "doorbell" and f["ring"] is r else None)
    hold = Holder()  # 12 dwords, padded to 16
    c = Client()
    bo = c.bo()
    sub = lambda i: c.submit(c.ib(bo, pm4.write_data(bo.addr + 4 * i, [i + 1]), offset=0x40 * i),  # noqa: E731
                             CsChunkFence(bo.handle, 0x1F00))
    seqs = [sub(0)]  # 20, padded to 32: 16 left, too few for the next ones
    seqs += [sub(i) for i in (1, 2, 3)]
    assert len(kmd.sched.queue) == 3
    bells.clear()
    hold.release()  # the ring empties; the three queued jobs go in together
    assert all(c.wait(s) for s in seqs) and bo.u32[:4].tolist() == [1, 2, 3, 4]
    assert bells[0] == 3 * fenced + 4, bells  # one commit: 60 dwords and 4 of padding


def test_a_user_fence_in_the_bos_last_dword_is_written_and_one_past_it_is_einval():
    """The user fence chunk's offset: the BO's last dword is inside it (the fence lands
    there); the next one is outside (EINVAL naming the BO's size)."""
    kmd_model.bind(RefModel())
    c = Client()
    bo, fb = c.bo(0x1000), c.bo(0x1000)
    seq = c.submit(c.ib(bo, pm4.nop(2)), CsChunkFence(fb.handle, 0xFFC))
    assert c.wait(seq) and fb.u32[0x3FF] == seq
    expect(errno.EINVAL, f"CS: chunk 1: user fence offset 0x1000 must be dword aligned and inside BO {fb.handle} "
           "(0x1000 bytes)", c.submit, c.ib(bo, pm4.nop(2), 0x100), CsChunkFence(fb.handle, 0x1000))
