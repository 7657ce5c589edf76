"""The KMD's clocks: the job timer (a lost error interrupt is found by it, on the gfx ring
with or without a waiter and on the SDMA ring; it runs out after job_timeout cycles to the
cycle, and jobs entering the ring behind a stuck one do not restart it; a long job that
moves is not timed out; a timeout says what the CP was doing, from what the job has mapped
only) and the waits (a wait returns at its timeout, keeps its deadline to the cycle while a
job timer runs, and wakes at the fallback poll interval when no interrupt comes)."""

from __future__ import annotations

import errno
import re
from types import SimpleNamespace

import numpy as np
import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import (CsChunkIb, CtxArgs, CtxOp, CtxPriority, GemCreateArgs, GemMmapArgs, GemVaArgs, Request,
                            ResetStatus, VaOp)
from spec import packets as pm4_spec
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import RWX, Client, expect


def test_a_lost_error_interrupt_is_found_by_the_job_timer():
    """Interrupts masked and no fallback poll in sight: the job timer finds the CP stopped
    on an error (STATUS.ERROR) and reports that error, not a timeout."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=2_000, fallback_poll=1 << 40)
    c = Client()
    bo = c.bo()
    kmd.mmio.write(regs.INT_ENABLE, 0)
    seq = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]))
    e = expect(errno.ECANCELED, f"WAIT_CS: illegal opcode 0x7b at IB+0x0 ({bo.addr:#x}), context {c.ctx}",
               c.wait, seq, 100_000)
    assert e.info.code == "ILLEGAL_OPCODE"
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["cp_errors"] == 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)  # queue 0's reset (CP_QUEUE_RESET.Q0)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]


@pytest.mark.parametrize("ring", ["gfx", "gfx_high"])
def test_an_error_entry_read_after_its_queue_was_reset_for_it_is_not_a_new_error(ring):
    """The error found by the job timer (STATUS.ERROR, CP_HQD1_STATUS.ERROR) while its
    CP_ERROR entry waits in the IH ring (interrupts masked: the handler has not run). A
    queue's own reset leaves the IH ring as it is (the full reset emptied it): when the
    interrupts come back, that entry is read after its error was recovered, and taken as a
    new one it reset the queue again (queue 1's as an error of code 0), counted a second
    error and told every context of a second reset. Its queue's STATUS.ERROR reads 0 then:
    it is stale. (Ring 0 went to the full reset before CP_QUEUE_RESET.Q0 was used: the case
    came with it, queue 1's was there already.)"""
    from ..sched_helpers import new_ctx
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=2_000, fallback_poll=1 << 40, cap_sys_nice=True)
    c, d = Client(), Client()
    bo, dbo = c.bo(), d.bo()
    cctx, dctx = ((new_ctx(c, CtxPriority.HIGH), new_ctx(d, CtxPriority.HIGH)) if ring == "gfx_high"
                  else (c.ctx, d.ctx))
    enable = kmd.mmio.read(regs.INT_ENABLE)
    kmd.mmio.write(regs.INT_ENABLE, 0)
    seq = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]), ctx=cctx)
    owner = f"{ring}, " if ring != "gfx" else ""
    expect(errno.ECANCELED, f"WAIT_CS: illegal opcode 0x7b at IB+0x0 ({bo.addr:#x}), {owner}context {cctx}",
           c.wait, seq, 100_000, cctx)
    assert kmd.ih.by_source.get("CP_ERROR", 0) == 0  # (its entry not read yet)
    assert kmd.recovery_log == [(ring, "error"), (ring, "queue_reset")]
    nice = d.submit(d.ib(dbo, pm4.wait_reg_mem(dbo.addr + 0x800, 1, 1, "EQ") + pm4.write_data(dbo.addr, [0xD])),
                    ctx=dctx)
    kmd.mmio.write(regs.INT_ENABLE, enable)
    kmd.dev.delay(100)
    dbo.u32[0x200] = 1
    assert d.wait(nice, 100_000, dctx) and dbo.u32[0] == 0xD
    assert kmd.ih.by_source.get("CP_ERROR", 0) == 1  # read, and let go
    assert (kmd.stats["cp_errors"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0)
    assert kmd.recovery_log == [(ring, "error"), (ring, "queue_reset")]
    st = d.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, dctx))
    assert (st.reset_status, st.resets) == (ResetStatus.NO_RESET, 1)


def test_a_stale_error_entry_read_while_the_next_error_is_latched_describes_the_next_one():
    """As above, but the next client's job stops queue 0 with an error of its own before the
    stale CP_ERROR entry is read: STATUS.ERROR reads 1 then, so the entry is taken as the
    error, and queue 0's entry was decoded from its own data, the old error's. The second
    client was told of the first client's error (its opcode, its IB's address), and its own
    was never reported. Queue 0's error now comes from the registers, as queue 1's does and
    as the VM_FAULT entry's does: the entry says that an error happened, the registers
    which one stops the queue now."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=2_000, fallback_poll=1 << 40)
    c, d = Client(), Client()
    bo, dbo = c.bo(), d.bo()
    enable = kmd.mmio.read(regs.INT_ENABLE)
    kmd.mmio.write(regs.INT_ENABLE, 0)
    seq = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]))
    expect(errno.ECANCELED, f"WAIT_CS: illegal opcode 0x7b at IB+0x0 ({bo.addr:#x}), context {c.ctx}",
           c.wait, seq, 100_000)
    assert kmd.ih.by_source.get("CP_ERROR", 0) == 0  # (its entry not read yet)
    bad = d.submit(d.ib(dbo, pm4.nop(2) + [pm4.header(0x7C, 0), 0], 0x100))
    kmd.dev.delay(500)  # d's error latched, its entry behind c's in the IH ring
    assert regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS))
    kmd.mmio.write(regs.INT_ENABLE, enable)
    expect(errno.ECANCELED, f"WAIT_CS: illegal opcode 0x7c at IB+0xc ({dbo.addr + 0x10c:#x}), context {d.ctx}",
           d.wait, bad, 100_000)
    assert (kmd.stats["cp_errors"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (2, 2, 0)


def test_a_lost_error_interrupt_is_found_by_the_job_timer_with_nobody_waiting():
    """The same with no WAIT_CS (whose fallback poll would find the error first): a client
    that only asks for its context's state. The job timer runs in every ioctl that folds in
    the hardware's state; when it runs out (twice: the first only marks where the CP is), it
    finds the CP stopped on an error and reports that error, not a timeout."""
    t_out = 2_000
    kmd = kmd_model.bind(RefModel(), cs_check=False, job_timeout=t_out, fallback_poll=1 << 40)
    c = Client()
    bo = c.bo()
    kmd.mmio.write(regs.INT_ENABLE, 0)
    seq = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]))
    states = []
    for _ in range(3):
        kmd.dev.delay(t_out + 500)
        states.append(c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx)))
    assert [(s.reset_status, s.resets, s.ring_status) for s in states] == \
        [(ResetStatus.NO_RESET, 0, {})] + [(ResetStatus.GUILTY, 1, {"gfx": ResetStatus.GUILTY})] * 2
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["cp_errors"] == 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq)
    info = ei.value.info
    assert (ei.value.errno, info.code, info.opcode, info.seq, info.message) == (
        errno.ECANCELED, "ILLEGAL_OPCODE", 0x7B, seq, f"illegal opcode 0x7b at IB+0x0 ({bo.addr:#x}), context {c.ctx}")


def test_a_lost_sdma_error_interrupt_is_found_by_the_job_timer():
    """The same on the SDMA ring: its engine stopped on a bad header, no interrupt seen and
    nobody polling; the ring's job timer finds SDMA_STATUS.ERROR when it runs out and
    recovers that error (a queue reset), not a timeout."""
    from ..sched_helpers import sdma_ib

    t_out = 2_000
    kmd = kmd_model.bind(RefModel(), job_timeout=t_out, fallback_poll=1 << 40)
    c = Client()
    bo = c.bo()
    kmd.mmio.write(regs.INT_ENABLE, 0)
    seq = c.submit(sdma_ib(bo, [0x23DECD3D]))  # amd_deadlock's corrupted SDMA header
    states = []
    for _ in range(3):
        kmd.dev.delay(t_out + 500)
        states.append(c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx)))
    assert [(s.resets, s.ring_status) for s in states] == [(0, {})] + [(1, {"sdma0": ResetStatus.GUILTY})] * 2
    assert kmd.recovery_log == [("sdma0", "error"), ("sdma0", "queue_reset")]
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["sdma_errors"] == 1 and kmd.stats["resets"] == 0
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE", ei.value


def test_a_long_gfx_job_that_moves_is_not_timed_out():
    """The gfx ring's job timer restarts while the CP makes progress (its rptr, the dwords it
    fetches, DMA bytes): a job that runs longer than twice job_timeout, moving on every so
    often (polls released one after another), runs to its end; only a stretch of
    job_timeout without progress counts. (The model runs an unblocked job at once, so the
    polls make it long; check_progress_resets_job_timeout does it with fetching on the RTL.)"""
    kmd = kmd_model.bind(RefModel(), job_timeout=20_000)
    c = Client()
    bo = c.bo()
    flags = [bo.addr + 0x3000 + 4 * k for k in range(3)]
    words = sum((pm4.wait_reg_mem(a, 1, 0xFFFFFFFF, "EQ") for a in flags), []) + pm4.write_data(bo.addr + 0x100, [8])
    seq = c.submit(c.ib(bo, words))
    for k in range(3):  # 15,000 cycles per step: 45,000 in all, > 2 * job_timeout
        assert not kmd.wait_for(lambda: False, 15_000)
        bo.u32[0x3000 // 4 + k] = 1
    assert c.wait(seq) and bo.u32[0x40] == 8
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["resets"] == 0


def test_the_job_timer_runs_out_after_job_timeout_cycles_to_the_cycle():
    """"No progress for job_timeout cycles" counts to the cycle: an ioctl one cycle short of
    it leaves the timer alone; at it, the timer has run out. Its first look, job_timeout / 8
    after the job started (Scheduler.FIRST_LOOK), only marks where the CP is and starts it
    again; the next, with nothing moved, times the job out. (The first look came at
    job_timeout: a hang cost two job timeouts.)"""
    t_out = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=t_out, fallback_poll=1 << 40)
    c = Client()
    bo = c.bo()
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    sched = kmd.sched

    def ioctl_at(cycles: int) -> None:  # one that folds in the hardware's state, timer + cycles
        kmd.dev.delay(sched.progress_at + cycles - kmd.dev.now())
        c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))

    start = sched.progress_at
    first = t_out // sched.FIRST_LOOK
    ioctl_at(first - 1)
    assert sched.progress_at == start
    ioctl_at(first)
    assert sched.progress_at == start + first and kmd.stats["job_timeouts"] == 0  # marked, started again
    ioctl_at(t_out - 1)
    assert kmd.stats["job_timeouts"] == 0
    ioctl_at(t_out)
    assert kmd.stats["job_timeouts"] == 1


def test_jobs_entering_the_ring_behind_a_stuck_job_do_not_restart_its_timer():
    """The job timer starts when a job enters an idle ring, not whenever one enters: a stuck
    job is reset within 2 * job_timeout though another client puts a job behind it every
    job_timeout / 2 (were each entry to restart the timer, the stuck job would hold the
    ring for as long as jobs kept coming)."""
    t_out = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=t_out)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    stuck = a.submit(a.ib(abo, pm4.wait_reg_mem(abo.addr + 0x800, 1, 1, "EQ")))
    seqs = []
    for k in range(6):  # 3 * job_timeout in all
        kmd.dev.delay(t_out // 2)
        seqs.append(b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x100 + 4 * k, [k + 1]), 0x400 + 0x40 * k)))
    assert kmd.stats["job_timeouts"] == 1
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        a.wait(stuck, 0)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert all(b.wait(s) for s in seqs) and bbo.u32[0x40:0x46].tolist() == [1, 2, 3, 4, 5, 6]


def test_timeouts_say_what_the_cp_was_doing():
    """A job stuck in a WAIT_REG_MEM: the message names the wait and how long nothing moved
    (at least job_timeout, at most twice that: the timer is checked when it runs out), the
    observers see it, the decoded error carries the context and the packet."""
    t_out = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=t_out, fallback_poll=1 << 40)
    seen = []
    kmd.observers.append(lambda e, f: seen.append((e, f, kmd.dev.now())))
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))  # progress first: the timer starts at the stuck job
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x900, 1, 1, "EQ"), offset=0x100))
    start = kmd.dev.now()
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000)
    e = ei.value
    m = re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx: no progress for (\d+) cycles, stuck in WAIT_REG_MEM at "
                     rf"IB\+0x0 \({bo.addr + 0x100:#x}\): \*{bo.addr + 0x900:#x} & 0x1 = 0x0, waits for == 0x1, "
                     rf"context {c.ctx}", e.message)
    assert m, e.message
    assert t_out <= int(m.group(1)) <= 2 * t_out + 100
    assert (e.info.code, e.info.opcode_name, e.info.ctx_id, e.info.seq, e.info.level) == \
        ("TIMEOUT", "WAIT_REG_MEM", c.ctx, seq, "IB1")
    assert (e.info.offset, e.info.addr) == (0, bo.addr + 0x100)  # the stuck packet's place, in the client's VA
    errs = [(f, t) for ev, f, t in seen if ev == "gpu_error"]
    assert len(errs) == 1 and errs[0][0]["info"] == e.info and errs[0][0]["state"] is None
    assert errs[0][0]["job"].seq == seq and t_out <= errs[0][1] - start <= 2 * t_out + 100
    # the wait's condition already holds but the CP sleeps out a long poll interval: not
    # "stuck in" (nothing unsatisfied is found), but polling
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0xA00, 1, 1, "EQ", poll_interval=0xFFFF), offset=0x200),
                   ctx=c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id)
    ctx2 = c.f.contexts[max(c.f.contexts)].id
    kmd.dev.delay(100)
    bo.u32[0x280] = 1
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000, ctx2)
    assert re.fullmatch(r"WAIT_CS: job 0x1 timed out on gfx: no progress for \d+ cycles, CP queue 0 polling in a WAIT_REG_MEM, "
                        rf"context {ctx2}", ei.value.message), ei.value.message
    info = ei.value.info  # polling in a WAIT_REG_MEM the diagnosis did not find: its kind, no place
    assert (info.opcode, info.opcode_name, info.offset, info.addr, info.level) == \
        (pm4_spec.WAIT_REG_MEM.opcode, "WAIT_REG_MEM", 0, 0, "IB1"), info
    # neither: a CP held by CONTROL.HALT before the job's IB; the message says where it is
    # and the STATUS it read
    kmd.mmio.write_fields(regs.CONTROL, HALT=1)
    ctx3 = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0xB00, [3]), offset=0x300), ctx=ctx3)
    st = kmd.mmio.read(regs.STATUS)
    assert regs.STATUS.LEVEL.get(st) == regs.IbLevel.RING and not regs.STATUS.WAITING.get(st)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000, ctx3)
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx: no progress for \d+ cycles, CP queue 0 busy at RING \(STATUS "
                        rf"{st:#x}\), context {ctx3}", ei.value.message), ei.value.message
    assert (ei.value.info.opcode, ei.value.info.opcode_name, ei.value.info.level) == (0, None, "RING")


def test_a_timeout_on_the_cps_second_queue_names_the_queue():
    """The CP has two hardware queues: a timed-out job not stuck in a packet the diagnosis
    finds said "CP polling in a WAIT_REG_MEM" or "CP busy at RING (STATUS ...)", queue 0's
    words and register, whichever queue it was on. A HIGH-priority context's job (CP queue
    1, ring gfx_high) names queue 1 and its own status register."""
    from kmd_model.uapi import CtxPriority

    kmd = kmd_model.bind(RefModel(), job_timeout=5_000, fallback_poll=1 << 40, cap_sys_nice=True)
    c = Client()
    bo = c.bo()
    hi = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0xA00, 1, 1, "EQ", poll_interval=0xFFFF), offset=0x200),
                   ctx=hi)
    kmd.dev.delay(100)
    bo.u32[0x280] = 1  # the condition holds, the queue sleeps out its poll interval
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000, hi)
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx_high: no progress for \d+ cycles, CP queue 1 "
                        rf"polling in a WAIT_REG_MEM, context {hi}", ei.value.message), ei.value.message
    info = ei.value.info  # polling in a WAIT_REG_MEM the diagnosis did not find: its kind (a PM4 one), no place
    assert (info.opcode, info.opcode_name, info.offset, info.addr, info.level) == \
        (pm4_spec.WAIT_REG_MEM.opcode, "WAIT_REG_MEM", 0, 0, "IB1"), info
    kmd.mmio.write_fields(regs.CONTROL, HALT=1)
    hi2 = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0xB00, [3]), offset=0x300), ctx=hi2)
    st = kmd.mmio.read(regs.CP_HQD1_STATUS)
    assert regs.CP_HQD1_STATUS.LEVEL.get(st) == regs.IbLevel.RING
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000, hi2)
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx_high: no progress for \d+ cycles, CP queue 1 "
                        rf"busy at RING \(CP_HQD1_STATUS {st:#x}\), context {hi2}", ei.value.message), ei.value.message


def _straddling_ib(priority: int | None = None):
    """Client a's IB of 16 dwords from the last 8 dwords of BO x into the VA page after it,
    where a BO y is mapped (its 8 dwords: the WAIT_REG_MEM the CP is stuck in). In memory,
    what follows x is client b's BO, holding a WAIT_REG_MEM on a secret. `priority`: of a
    context of its own (HIGH: on the CP's second queue, ring gfx_high)."""
    kmd_model.bind(RefModel(), cs_check=False, job_timeout=5_000, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    a, b = Client(), Client()
    x, theirs = a.bo(0x1000), b.bo(0x1000)
    y = a.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
    a.io(Request.GEM_VA, GemVaArgs(y, VaOp.MAP, x.addr + 0x1000, 0, 0x1000, RWX))  # (Client's guard page)
    assert b.phys(theirs) == a.phys(x) + 0x1000
    secret = 0x5EC12E7
    theirs.u32[:8] = pm4.wait_reg_mem(x.addr + 0x100, secret, secret, "EQ") + pm4.pad(1)
    x.u32[0x3F8:0x400] = pm4.pad(8)
    ywords = a.io(Request.GEM_MMAP, GemMmapArgs(y)).view.view("<u4")
    ywords[:8] = pm4.wait_reg_mem(x.addr + 0x200, 1, 1, "EQ") + pm4.pad(1)  # where the CP is stuck
    ctx = None if priority is None else a.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=priority)).ctx_id
    seq = a.submit(CsChunkIb(16, gpu_addr=x.addr + 0xFE0), ctx=ctx)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        a.wait(seq, 1_000_000, ctx)
    assert f"{secret:x}" not in ei.value.message
    return a, x, seq, ei.value


def test_a_timeout_diagnosis_reads_an_ib_across_adjacent_mappings():
    """The diagnosis decodes a stuck job's IBs from memory where the job's VM maps them: an
    IB (the checker off) running from the end of one BO into a second BO mapped right after
    it in the VM is read from both BOs, wherever each is in memory, and the packet in the
    second is named. In memory, what follows the first BO is another client's: had the
    diagnosis read on from the first BO, it would have decoded that client's words as the
    job's packets and put their values in the message."""
    a, x, seq, e = _straddling_ib()
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx: no progress for \d+ cycles, stuck in WAIT_REG_MEM at "
                        rf"IB\+0x20 \({x.addr + 0x1000:#x}\): \*{x.addr + 0x200:#x} & 0x1 = 0x0, waits for == 0x1, "
                        rf"context {a.ctx}", e.message), e.message


def test_a_timeout_diagnosis_on_the_cps_second_queue_reads_an_ib_across_adjacent_mappings():
    """The same on the CP's second queue (a HIGH-priority context, ring gfx_high, whose timer
    diagnoses as ring 0's does: Kmd.ring_timedout_job): the IB is read from both BOs, the
    packet in the second is named, and the error's fields give its kind and place (the UMD
    names the call that recorded it from them)."""
    a, x, seq, e = _straddling_ib(CtxPriority.HIGH)
    ctx = e.info.ctx_id
    assert ctx != a.ctx
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx_high: no progress for \d+ cycles, stuck in "
                        rf"WAIT_REG_MEM at IB\+0x20 \({x.addr + 0x1000:#x}\): \*{x.addr + 0x200:#x} & 0x1 = 0x0, "
                        rf"waits for == 0x1, context {ctx}", e.message), e.message
    assert (e.info.code, e.info.opcode, e.info.opcode_name, e.info.level, e.info.offset, e.info.addr) == \
        ("TIMEOUT", pm4_spec.WAIT_REG_MEM.opcode, "WAIT_REG_MEM", "IB1", 0x20, x.addr + 0x1000), e.info


def test_a_timeout_s_level_is_that_of_the_packet_it_names():
    """The error's level, offset and addr name one packet, the diagnosis's (a UMD maps them
    to the call that recorded it): a WAIT_REG_MEM of the IB1 whose flag was taken back after
    the CP passed it is the first the diagnosis finds not holding, while the CP polls in the
    IB2 the IB1 calls next; the level is the IB1's, not the IB2 the CP's STATUS names."""
    kmd = kmd_model.bind(RefModel(), job_timeout=5_000, fallback_poll=1 << 40)
    c = Client()
    bo = c.bo()
    bo.u32[0x800 // 4] = 1  # the IB1's wait holds when the CP comes to it
    c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x900, 1, 1, "EQ"), offset=0x400)  # the IB2: its wait never holds
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ") + pm4.indirect_buffer(bo.addr + 0x400, 8),
                        offset=0x100))
    assert kmd.wait_for(lambda: regs.STATUS.LEVEL.get(kmd.mmio.read(regs.STATUS)) == regs.IbLevel.IB2, 10_000)
    bo.u32[0x800 // 4] = 0
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000)
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out on gfx: no progress for \d+ cycles, stuck in WAIT_REG_MEM at "
                        rf"IB\+0x0 \({bo.addr + 0x100:#x}\): \*{bo.addr + 0x800:#x} & 0x1 = 0x0, waits for == 0x1, "
                        rf"context {c.ctx}", ei.value.message), ei.value.message
    assert (ei.value.info.level, ei.value.info.offset, ei.value.info.addr) == ("IB1", 0, bo.addr + 0x100), ei.value.info


@pytest.mark.parametrize("where", ["in_an_ib2", "across_two_mappings"])
def test_a_poll_that_does_not_hold_behind_queue_1_s_flood_is_found_in_an_ib2_or_across_mappings(where):
    """A job on queue 0 whose poll does not hold is reset by its timeout while queue 1 floods
    (tests/kmd_sched/queues/test_kmd_queues_stuck.py test_a_poll_that_does_not_hold_behind_queue_1_s_flood_is_still_stuck,
    on the model whose queue 0 polls only when queue 1 lets it): whether a poll of the job
    holds (Kmd._polls_hold) is read as the timeout's diagnosis reads it, through the IB2s the
    job calls and across adjacent mappings of its VM (cs_check off), wherever the poll is.
    An IB it cannot read has no poll that does not hold: the job was taken for parked in
    one, not stuck, for as long as the flood lasted."""
    from tests.kmd_sched.sched_helpers import ParkedPolls

    kmd = kmd_model.bind(ParkedPolls(), job_timeout=3_000, hw_timeout=5_000, cs_check=where == "in_an_ib2",
                         cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    bad, evil = Client(), Client()
    bbo, ebo = bad.bo(0x4000), evil.bo(0x100000)
    ehi = evil.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id
    if where == "in_an_ib2":
        ib2 = bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16), 0x400)
        b = bad.submit(bad.ib(bbo, pm4.indirect_buffer(bbo.addr + 0x400, ib2.size_dw), 0x100))
    else:  # 8 dwords of padding at the end of bbo, the poll in the BO mapped right after it
        y = bad.io(Request.GEM_CREATE, GemCreateArgs(0x1000)).handle
        bad.io(Request.GEM_VA, GemVaArgs(y, VaOp.MAP, bbo.addr + 0x4000, 0, 0x1000, RWX))  # (Client's guard page)
        bbo.u32[0xFF8:0x1000] = pm4.pad(8)
        bad.io(Request.GEM_MMAP, GemMmapArgs(y)).view.view("<u4")[:8] = \
            pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16) + pm4.pad(1)
        b = bad.submit(CsChunkIb(16, gpu_addr=bbo.addr + 0x3FE0))
    flood = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
    for k in range(20_000):
        flood += pm4.dma_data(ebo.addr + 0xFF000, k, 64, src_sel="DATA")
    f = evil.submit(evil.ib(ebo, flood, 0x4000), ctx=ehi)
    kmd.dev.delay(1_000)
    request, seen = kmd.ring.request_reset, []
    kmd.ring.request_reset = lambda: (seen.append(kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start), request())[1]
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        bad.wait(b, 1_000_000)
    # reset during the flood (its timeout, not the flood's end): queue 1 had fetched a part of it
    assert len(seen) == 1 and 0 < seen[0] < len(flood) / 2, (seen, len(flood))
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT", ei.value
    assert "stuck in WAIT_REG_MEM" in ei.value.info.message, ei.value.info.message
    assert evil.wait(f, 1_000_000, ehi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0)


def test_a_timeout_diagnosis_reads_only_what_the_job_has_mapped():
    """What the diagnosis reads of a job's IB (Kmd.job_read): the dwords its VM maps, across
    adjacent mappings wherever each is in memory; nothing (None) where the range runs into a
    hole, though the memory right after the BO is another client's, with words in it."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    a, b = Client(), Client()
    x, theirs = a.bo(0x1000), b.bo(0x1000)
    assert b.phys(theirs) == a.phys(x) + 0x1000
    theirs.u32[:] = 0x5EC12E7
    x.u32[:] = np.arange(0x400)
    read = kmd.job_read(SimpleNamespace(vm=a.f.vm))
    assert read(x.addr + 0xFE0, 8).tolist() == list(range(0x3F8, 0x400))
    assert read(x.addr + 0xFE0, 9) is None and read(x.addr + 0x1000, 1) is None  # the hole after x
    y = a.io(Request.GEM_CREATE, GemCreateArgs(0x2000)).handle  # elsewhere in memory
    a.io(Request.GEM_VA, GemVaArgs(y, VaOp.MAP, x.addr + 0x1000, 0, 0x1000, RWX))
    a.io(Request.GEM_MMAP, GemMmapArgs(y)).view.view("<u4")[:] = 0x77
    assert read(x.addr + 0xFE0, 16).tolist() == list(range(0x3F8, 0x400)) + [0x77] * 8
    assert read(x.addr + 0xFE0, 0x408).tolist() == list(range(0x3F8, 0x400)) + [0x77] * 0x400
    assert read(x.addr + 0xFE0, 0x409) is None  # one dword past y's mapping: a hole again


def test_a_timeout_diagnosis_reads_no_data_in_the_kernel_range():
    """The shadow pool's kernel range, in every VM, is executable only: the CP fetches the
    checked copies of IBs from it, and no packet reads data there (the checker refuses a
    WAIT_REG_MEM on it; an SDMA job, never checked, faults). The diagnosis took it for the
    job's memory: a spy's SDMA job, a poll on a flag of its own (a long interval) then one
    on the kernel range, the flag set while the engine slept out its interval, timed out
    "stuck in POLL_REGMEM ... = 0x5ec12e7": a dword of the pool, here the data of another
    client's WRITE_DATA in the copy of its IB (its job done, the copy's words still there,
    before retired copies were zeroed; a copy of a job in flight holds them still). A poll
    there is in no memory of the job's now."""
    from spec import sdma

    from tests.kmd_sched.sched_helpers import sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=5_000, fallback_poll=1 << 40)
    victim, spy = Client(), Client()
    vb, sb = victim.bo(), spy.bo()
    secret = 0x5EC12E7
    held = victim.submit(victim.ib(vb, pm4.wait_reg_mem(vb.addr + 0x800, 1, 1, "EQ")
                                   + pm4.write_data(vb.addr + 0x900, [secret])))
    copy = kmd.sched.pending[0].ibs[0][0]  # the IB's copy, in the kernel range
    assert copy >= kmd.kernel_va
    at = copy + 4 * (len(pm4.wait_reg_mem(0, 0, 0, "EQ")) + len(pm4.write_data(0, [0])) - 1)  # its data dword
    vb.u32[0x200] = 1
    assert victim.wait(held) and vb.u32[0x240] == secret
    # (a retired copy is zeroed (Kmd.job_retired); a copy of a job in flight holds its words:
    # the dword is put back as such a copy would hold it)
    pool_dw = (kmd.shadow.bo.gpu_addr + at - kmd.kernel_va) // 4
    assert int(kmd.mem32[pool_dw]) == 0
    kmd.mem32[pool_dw] = secret
    s = spy.submit(sdma_ib(sb, sdma.poll_regmem(sb.addr + 0x800, 1, 0xFFFF_FFFF, "EQ", interval=0xFFFF)
                           + sdma.poll_regmem(at, 1, 0xFFFF_FFFF, "EQ")))
    kmd.dev.delay(500)
    sb.u32[0x200] = 1  # the first poll holds now: the engine sleeps out its interval
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        spy.wait(s, 1_000_000)
    e = ei.value
    assert f"{secret:x}" not in e.message
    assert re.fullmatch(rf"WAIT_CS: job {s:#x} timed out on sdma0: no progress for \d+ cycles, the SDMA engine polling "
                        rf"in a POLL_REGMEM, context {spy.ctx}", e.message), e.message
    assert (e.info.code, e.info.offset, e.info.addr) == ("TIMEOUT", 0, 0), e.info


def test_a_long_wait_wakes_at_the_fallback_poll_interval():
    """A WAIT_CS on a job that makes no progress (no interrupt, far from its timeout)
    sleeps in steps of the fallback poll interval: 200,000 cycles cost ten polls, not a
    poll a cycle, and one more for the job timer's first look at the job (its own deadline
    is the other bound of a step: job_timeout / 8 after the job started)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 20, fallback_poll=20_000)
    c = Client()
    bo = c.bo()
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    polls = kmd.stats["fallback_polls"]
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        c.wait(seq, 200_000)
    assert e.value.errno == errno.ETIME
    assert kmd.stats["fallback_polls"] - polls == 200_000 // 20_000 + 1
    bo.u32[0x200] = 1
    assert c.wait(seq) and kmd.stats["job_timeouts"] == 0


def test_a_wait_returns_at_its_timeout():
    """A WAIT_CS that times out returns at its deadline, not at the next fallback poll."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 20, fallback_poll=20_000)
    c = Client()
    bo = c.bo()
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    t0 = kmd.dev.now()
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        c.wait(seq, 5_000)
    assert e.value.errno == errno.ETIME and 5_000 <= kmd.dev.now() - t0 < 5_100
    bo.u32[0x200] = 1
    assert c.wait(seq)


def test_a_wait_keeps_its_deadline_to_the_cycle_while_a_job_timer_runs():
    """With a job's timer running, the KMD waits in steps up to the timer or the deadline,
    whichever is first: a wait of T cycles ends T cycles later plus the same MMIO of its
    last look at the hardware, for a deadline of 1 cycle as for 5 (no step longer than
    what is left)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 20, fallback_poll=20_000)
    c = Client()
    bo = c.bo()
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))  # a job whose timer runs
    over = []
    for t in (1, 2, 3, 5):
        t0 = kmd.dev.now()
        assert not kmd.wait_for(lambda: False, t)
        over.append(kmd.dev.now() - t0 - t)
    assert len(set(over)) == 1 and over[0] >= 0, over


@pytest.mark.parametrize("rule", ["sdma", "checked", "unchecked"])
def test_a_time_rule_resets_a_job_that_ran_more_than_its_job_timeouts_not_exactly_them(rule):
    """The time rules (JobTimerMixin._overrun) say "more than N job timeouts": a job that has
    run exactly N * job_timeout cycles is left alone, one cycle more is overrun. The rules
    compared with >=, so a job at exactly N was reset with a message saying it ran more."""
    from tests.kmd_sched.sched_helpers import HANG, sdma_ib
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 40, fallback_poll=1_000, cs_check=rule != "unchecked")
    c = Client()
    bo = c.bo(0x8000)
    if rule == "sdma":
        c.submit(sdma_ib(bo, HANG(bo.addr + 0x7000), 0x400))  # polls until the CPU writes
        sched, n = kmd.sdma_sched, kmd.params.unchecked_job_timeouts
    else:
        c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ"), 0x400))
        sched = kmd.sched
        n = kmd.params.checked_job_timeouts if rule == "checked" else kmd.params.unchecked_job_timeouts
    assert sched.head_job() is not None
    limit = n * sched.job_timeout

    def ran(cycles):
        if rule == "sdma":
            sched.head_at = kmd.dev.now() - cycles  # (the SDMA rule counts from the head's start)
        else:
            sched.head_ran = cycles
        return kmd._overrun(sched)

    assert ran(limit) is None
    why = {"sdma": f"ran {limit + 1} cycles (the SDMA ring is not checked), more than {n} job timeouts",
           "checked": f"ran {limit + 1} cycles, more than {n} job timeouts (checked_job_timeouts: the checker "
                      "bounds a job's dwords, not the bytes it moves)",
           "unchecked": f"ran {limit + 1} cycles unchecked (cs_check off), more than {n} job timeouts"}[rule]
    assert ran(limit + 1) == why
    bo.u32[0x7000 // 4] = 1
