"""The recovery path beyond the cases of test_kmd_reset.py: an error nobody's job caused
(a stray doorbell: the kernel is named, no context is blamed), and a reset that fails (the
CP never goes idle): the device is wedged, every job in flight is cancelled with EIO, and
every later CS says why. Observers see each step (gpucosim's timeline and crash reports
are built on them)."""

from __future__ import annotations

import dataclasses
import errno
import re

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CtxArgs, CtxOp, Request, ResetStatus
from spec import pm4
from testbench.refmodel import RefModel

from .test_kmd_ioctl import Client, expect
from .security_helpers import Holder


class StuckResetModel(RefModel):
    """A model whose CP never reports idle once `stuck` is set (a reset that does not take)."""

    stuck = False

    def mmio_read32(self, offset: int) -> int:
        v = super().mmio_read32(offset)
        if self.stuck and offset == regs.STATUS.ADDR:
            v &= ~regs.STATUS.IDLE.mask
        return v


def test_stray_doorbell_blames_the_kernel():
    dev = RefModel()
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))
    seen = []
    kmd.observers.append(lambda event, fields: seen.append((event, fields)))
    wptr = kmd.ring.committed + 5000
    kmd.mmio.write(regs.RB_DOORBELL, wptr)  # a driver bug: more than the ring ahead
    c.run(bo, pm4.write_data(bo.addr + 0x804, [2]), offset=0x100)  # the next ioctl finds and recovers it
    errors = [f for e, f in seen if e == "gpu_error"]
    assert len(errors) == 1 and errors[0]["job"] is None and errors[0]["state"].code == regs.CpError.DOORBELL_OVERFLOW
    info = errors[0]["info"]
    assert (info.code, info.level, info.ctx_id, info.seq, info.addr) == ("DOORBELL_OVERFLOW", "RING", 0, 0, wptr)
    assert info.message == f"doorbell wptr {wptr:#x} more than the ring size ahead of rptr at ring+{info.offset:#x}, kernel"
    assert [e for e, _ in seen].index("gpu_error") < [e for e, _ in seen].index("reset")
    assert [f["resubmitted"] for e, f in seen if e == "reset"] == [0]
    st = c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))
    assert st.reset_status == ResetStatus.NO_RESET and st.resets == 1  # seen, not blamed
    assert bo.u32[0x200:0x202].tolist() == [1, 2]
    assert kmd.stats["cp_errors"] == kmd.stats["resets"] == 1


def _reset_that_fails():
    """B holds the CP, A's bad packet is next, B has a job queued behind it; every reset
    from now on fails. Returns (kmd, a, b, abo, bbo, hold, bad, queued)."""
    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    hold = b.submit(b.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x800, 1, 1, "EQ")))
    bad = a.submit(a.ib(abo, [pm4.header(0x7B, 0), 0]))
    queued = b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x900, [1]), offset=0x100))
    dev.stuck = True
    bbo.u32[0x200] = 1  # let the CP run into A's bad packet
    return kmd, a, b, abo, bbo, hold, bad, queued


def test_a_reset_that_fails_wedges_the_device():
    kmd, a, b, abo, bbo, hold, bad, queued = _reset_that_fails()
    why = "soft reset: CP not idle after 2000 cycles"
    e = None
    try:
        a.wait(bad)
    except kmd_model.uapi.KmdError as x:
        e = x
    # the reset ran inside A's WAIT_CS: the message names that ioctl, as every ioctl error does
    assert e is not None and e.errno == errno.EIO and e.message.startswith(f"WAIT_CS: {why}"), e
    assert str(e).startswith(f"EIO: WAIT_CS: {why}")
    assert kmd.wedged.startswith(f"GPU reset failed: {why}")
    # the job that had finished stays finished; every one still in flight was cancelled,
    # whoever it belonged to
    assert b.wait(hold, 0)
    expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", b.wait, queued)
    assert bbo.u32[0x240] == 0  # it never ran
    assert not kmd.sched.pending and not kmd.sched.queue
    expect(errno.EIO, f"CS: {kmd.wedged}", b.submit, b.ib(bbo, pm4.nop(2), offset=0x200))
    assert kmd.stats["resets"] == 1 and kmd.stats["jobs_cancelled"] >= 2


class SpuriousModel(RefModel):
    """A model whose interrupt line reads high `spurious` more times with nothing behind it."""

    spurious = 0

    def irq_level(self) -> bool:
        if self.spurious:
            self.spurious -= 1
            return True
        return super().irq_level()


def test_spurious_interrupts_are_counted_not_taken_for_events():
    dev = SpuriousModel(ih=False)
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))
    assert kmd.mmio.read(regs.INT_STATUS) == 0
    before = (kmd.stats["spurious_interrupts"], kmd.stats["interrupts"], dev.now())
    dev.spurious = 2
    kmd.service()
    kmd.service()
    assert kmd.stats["spurious_interrupts"] == before[0] + 2 and kmd.stats["interrupts"] == before[1] + 2
    assert dev.now() - before[2] >= 2 * 16  # a line stuck high must not spin the driver
    assert kmd.stats["resets"] == 0 and kmd.mmio.read(regs.INT_STATUS) == 0


def test_rebind_keeps_observers_and_trace_hooks():
    dev = RefModel()
    seen, hooked = [], []
    kmd = kmd_model.bind(dev, observers=[lambda e, f: seen.append((e, f))])
    kmd.trace_hooks.append(hooked.append)
    c = Client()
    c.bo()
    n0 = len(seen)
    new = kmd_model.rebind(ring_log2_dw=8)
    assert new is not kmd and kmd_model.bound() is new and new.ring.size_dw == 256
    assert c.f.closed and not kmd.live_bos()  # the old driver's files were closed
    events = [e for e, _ in seen[n0:]]
    assert events[-1] == "bind" and seen[-1][1]["kmd"] is new and events.count("bind") == 1
    assert "doorbell" in events and "fence" in events  # the new bring-up (ring and IB tests) was observed
    n = len(hooked)
    c2 = Client()
    c2.bo()
    assert [r.request for r in hooked[n:]] == ["CTX", "INFO", "GEM_CREATE", "GEM_MMAP", "GEM_VA"]
    assert new.params.ring_log2_dw == 8 and new.params.ib_test


def test_idle_waits_return_at_once_and_counters_read_the_hardware():
    dev = RefModel()
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo(0x4000)
    c.run(bo, pm4.write_data(bo.addr + 0x2000, [1, 2, 3]) + pm4.dma_data(bo.addr + 0x3000, bo.addr + 0x2000, 12))
    t = dev.now()
    assert not c.io(Request.GEM_WAIT_IDLE, kmd_model.uapi.GemWaitIdleArgs(bo.handle, 1_000_000)).busy
    assert dev.now() - t < 1000  # an idle BO: no waiting out the timeout
    cnt = c.io(Request.INFO, kmd_model.uapi.InfoArgs(kmd_model.uapi.InfoQuery.COUNTERS))
    assert set(cnt.hw) == {"busy_cycles", "stall_cycles", "dwords_fetched", "dma_bytes_read", "dma_bytes_written",
                           "dma_busy_cycles", "timestamp"}
    assert cnt.hw["dma_bytes_written"] == 12 and 12 <= cnt.hw["dma_bytes_read"] <= 16  # reads: whole bus beats
    assert cnt.hw["dwords_fetched"] >= 24 and cnt.hw["timestamp"] > 0
    # the ring tests of the gfx ring and of the CP's second queue (gfx_high), the IB test, ours
    assert cnt.packets["DMA_DATA"] == 1 and cnt.packets["WRITE_DATA"] == 4
    assert bo.u32[0xC00:0xC03].tolist() == [1, 2, 3]


def test_a_guilty_context_reports_the_decoded_error():
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    c = Client()
    bo = c.bo()
    bad = pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, "ADDR_LO": (bo.addr + 0x100) >> 2}, [1])
    seq = c.submit(c.ib(bo, bad))
    e = expect(errno.ECANCELED, f"WAIT_CS: unsupported field value in WRITE_DATA at IB+0x0 ({bo.addr:#x}), context "
               f"{c.ctx}", c.wait, seq)
    assert (e.info.code, e.info.opcode_name, e.info.offset, e.info.ctx_id, e.info.seq) == \
        ("UNSUPPORTED", "WRITE_DATA", 0, c.ctx, seq)
    again = expect(errno.ECANCELED, f"CS: context {c.ctx} was reset: {e.info.message}", c.submit, c.ib(bo, pm4.nop(2)))
    assert again.info == e.info
    assert kmd.stats["cp_errors"] == 1


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
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["cp_errors"] == 1 and kmd.stats["resets"] == 1


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
    assert [(s.reset_status, s.resets) for s in states] == [(ResetStatus.NO_RESET, 0)] + [(ResetStatus.GUILTY, 1)] * 2
    info = states[-1].error
    assert (info.code, info.opcode, info.seq, info.message) == (
        "ILLEGAL_OPCODE", 0x7B, seq, f"illegal opcode 0x7b at IB+0x0 ({bo.addr:#x}), context {c.ctx}")
    assert kmd.stats["job_timeouts"] == 0 and kmd.stats["cp_errors"] == 1 and kmd.stats["resets"] == 1


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
    m = re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out: no progress for (\d+) cycles, stuck in WAIT_REG_MEM at "
                     rf"IB\+0x0 \({bo.addr + 0x100:#x}\): \*{bo.addr + 0x900:#x} & 0x1 = 0x0, waits for == 0x1, "
                     rf"context {c.ctx}", e.message)
    assert m, e.message
    assert t_out <= int(m.group(1)) <= 2 * t_out + 100
    assert (e.info.code, e.info.opcode_name, e.info.ctx_id, e.info.seq, e.info.level) == \
        ("TIMEOUT", "WAIT_REG_MEM", c.ctx, seq, "IB1")
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
    assert re.fullmatch(r"WAIT_CS: job 0x1 timed out: no progress for \d+ cycles, CP polling in a WAIT_REG_MEM, "
                        rf"context {ctx2}", ei.value.message), ei.value.message
    assert ei.value.info.opcode_name == "WAIT_REG_MEM"
    # neither: a CP held by CONTROL.HALT before the job's IB; the message says where it is
    # and the STATUS it read
    kmd.mmio.write_fields(regs.CONTROL, HALT=1)
    ctx3 = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0xB00, [3]), offset=0x300), ctx=ctx3)
    st = kmd.mmio.read(regs.STATUS)
    assert regs.STATUS.LEVEL.get(st) == regs.IbLevel.RING and not regs.STATUS.WAITING.get(st)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000, ctx3)
    assert re.fullmatch(rf"WAIT_CS: job {seq:#x} timed out: no progress for \d+ cycles, CP busy at RING \(STATUS "
                        rf"{st:#x}\), context {ctx3}", ei.value.message), ei.value.message
    assert (ei.value.info.opcode, ei.value.info.opcode_name, ei.value.info.level) == (0, None, "RING")


def test_waiting_on_a_job_that_finished_before_its_context_was_reset():
    """J1 and J2 of one context run behind a held CP; J2 is bad. WAIT_CS on J1 (which did
    finish) reports the context's reset, as amdgpu does for every wait on a guilty context."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    c, h = Client(), Client()
    bo, hbo = c.bo(), h.bo()
    held = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ")))
    j1 = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x800, [1])))
    j2 = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], offset=0x100))
    hbo.u32[0x200] = 1
    e = expect(errno.ECANCELED, f"WAIT_CS: context {c.ctx} was reset: illegal opcode 0x7b at IB+0x0 "
               f"({bo.addr + 0x100:#x}), context {c.ctx}", c.wait, j1)
    assert e.info.seq == j2 and bo.u32[0x200] == 1 and h.wait(held, 0)
    s = kmd.kmd_stats()
    assert s["last_fence"] == kmd.fence_drv.sync_seq == kmd.fence_drv.read()  # the lost fences were completed
    assert s["resets"] == 1 and not kmd.fence_drv.pending


def test_every_doorbell_brings_new_work():
    """A ring smaller than the queue of jobs: the scheduler refills it as space comes back,
    and never rings the doorbell without moving the write pointer."""
    kmd = kmd_model.bind(RefModel(), ring_log2_dw=6)
    wptrs = []
    kmd.observers.append(lambda e, f: wptrs.append(f["wptr"]) if e == "doorbell" else None)
    c = Client()
    bo = c.bo(0x8000)
    hold = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x7000, 1, 1, "EQ")))
    seqs = [c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x4000 + 4 * i, [i + 1]), offset=0x100 * (i + 1)))
            for i in range(12)]
    for _ in range(5):
        kmd.service()  # nothing moved: nothing to ring
    bo.u32[0x1C00] = 1
    assert c.wait(seqs[-1]) and c.wait(hold, 0)
    assert len(wptrs) > 3 and all(b > a for a, b in zip(wptrs, wptrs[1:])), wptrs
    assert kmd.ring.doorbells == len(wptrs) + 2  # and the bring-up's two (ring test, IB test)


def test_fence_repr():
    from kmd_model.sched.fence import Fence
    f = Fence(0x12)
    assert repr(f) == "Fence(0x00000012 pending)"
    f.signalled = True
    assert repr(f) == "Fence(0x00000012 signalled)"
    f.error = RuntimeError("reset")
    assert repr(f) == "Fence(0x00000012 error)"


def test_a_bus_error_in_a_checked_copy_names_the_clients_ib():
    """The CP runs the shadow copies; when fetching one fails (memory answers SLVERR there),
    the error names the IB at the client's address, as the client wrote it."""
    dev = RefModel()
    kmd = kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    shadow = kmd.shadow.bo.gpu_addr
    dev.mem_model.configure(error_window=(shadow, shadow + kmd.shadow.size, "SLVERR"))
    seq = c.submit(c.ib(bo, pm4.nop(6), offset=0x200))
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq)
    e = ei.value
    assert e.info.code == "BUS_SLVERR" and e.info.addr == bo.addr + 0x200, e.message
    assert e.message == f"WAIT_CS: bus error SLVERR at address {bo.addr + 0x200:#x} at IB+0x0, context {c.ctx}"


def test_stats_and_odd_parameters():
    kmd = kmd_model.bind(RefModel(), initial_seq=0xFFFF_FFFF)  # the last seqno is a first seqno too
    a, b = Client(), Client()
    a.bo()
    c = a.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
    s = kmd.kmd_stats()
    # the kernel's: wb, ring, IH, IB test, shadow pool, SDMA ring and gfx_high ring (7), a
    # root table per file's VM (2) and the page table under a's BO (1)
    assert (s["files"], s["contexts"], s["live_bos"], s["kernel_bos"]) == (2, 3, 1, 7 + 2 + 1)
    assert kmd.fence_drv.sync_seq == 0xFFFF_FFFF and s["last_fence"] == 0xFFFF_FFFF
    bo = a.bo()
    assert a.wait(a.submit(a.ib(bo, pm4.nop(2)), ctx=c), ctx=c)
    assert kmd.kmd_stats()["last_fence"] == 0
    pa = a.phys(bo)
    assert repr(a.f.handles[bo.handle]) == f"Bo(fd3:2 GTT [{pa:#x}, {pa + 0x4000:#x}) fd 3)"
    assert repr(kmd.wb_bo) == f"Bo(wb GTT [{kmd.wb_bo.gpu_addr:#x}, {kmd.wb_bo.end:#x}) kernel)"
    b.f.close()
    assert kmd.kmd_stats()["files"] == 1


def test_queued_jobs_of_other_contexts_survive_a_reset():
    """A small ring (64 dwords): while a held CP has the guilty job in the ring, the
    innocent context's later jobs wait in the scheduler's queue, not yet in the ring. The
    reset drops the guilty context's jobs only: the queued ones run after it, in order."""
    kmd = kmd_model.bind(RefModel(), cs_check=False, ring_log2_dw=6)
    hold = Holder()
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(a.ib(abo, [pm4.header(0x7B, 0), 0]))
    seqs = [b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x1000, [i + 1]) + pm4.write_data(bbo.addr + 0x1004 + 4 * i,
                                                                                             [i + 1]), offset=0x40 * i))
            for i in range(6)]
    assert len(kmd.sched.queue) >= 3  # (the ring holds the holder, the guilty job and one of b's)
    hold.release()
    assert all(b.wait(s) for s in seqs)
    assert bbo.u32[0x400] == 6 and bbo.u32[0x401:0x407].tolist() == [1, 2, 3, 4, 5, 6]  # all ran, the last last
    expect(errno.ECANCELED, f"WAIT_CS: context {a.ctx} was reset: illegal opcode 0x7b at IB+0x0 ({abo.addr:#x}), "
           f"context {a.ctx}", a.wait, bad)
    st = b.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, b.ctx))
    assert (st.reset_status, st.resets, st.error) == (ResetStatus.INNOCENT, 1, None)  # it had work in the ring
    assert kmd.stats["resets"] == 1


def test_a_long_wait_wakes_at_the_fallback_poll_interval():
    """A WAIT_CS on a job that makes no progress (no interrupt, far from its timeout)
    sleeps in steps of the fallback poll interval: 200,000 cycles cost ten polls, not a
    poll a cycle (the job timer's own deadline is the other bound of a step)."""
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 20, fallback_poll=20_000)
    c = Client()
    bo = c.bo()
    seq = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    polls = kmd.stats["fallback_polls"]
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        c.wait(seq, 200_000)
    assert e.value.errno == errno.ETIME
    assert kmd.stats["fallback_polls"] - polls == 200_000 // 20_000
    bo.u32[0x200] = 1
    assert c.wait(seq) and kmd.stats["job_timeouts"] == 0


def test_observers_see_each_job_enter_the_ring():
    """"run_job" (gpucosim's timeline draws it): the job and its hardware fence, once per
    time the job enters the ring: an innocent job in the ring at a reset enters it again,
    with a new fence."""
    kmd = kmd_model.bind(RefModel(), cs_check=False)
    seen = []
    kmd.observers.append(lambda event, f: seen.append((f["job"].seq, f["job"].ctx.id, f["fence"].seq))
                         if event == "run_job" else None)
    hold = Holder()
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(a.ib(abo, [pm4.header(0x7B, 0), 0]))
    good = b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x100, [5])))
    hold.release()
    assert b.wait(good) and bbo.u32[0x40] == 5
    jobs = [(s, c) for s, c, _ in seen]
    assert jobs == [(hold.seq, hold.c.ctx), (bad, a.ctx), (good, b.ctx), (good, b.ctx)]  # b's again after the reset
    fences = [f for _, _, f in seen]
    assert fences == sorted(set(fences)) and all(f == seen[0][2] + i for i, f in enumerate(fences))


def test_kmd_parameters_at_their_bounds():
    """Each KMD parameter (`bind(dev, name=...)`, `gpucosim run --kmd name=...`) takes its
    smallest value and its largest (the cycle counts' 2^62 is only a sanity bound) and
    refuses one past either, in one line naming the parameter and its range."""
    from kmd_model.core.kmd import KmdParams

    smallest = {"ring_log2_dw": 6, "ih_log2_entries": 2, "ib_align_dw": 1, "initial_seq": 0, "job_timeout": 1,
                "fallback_poll": 1, "hw_timeout": 1, "max_ib_chunks": 1, "max_job_dw": 1, "max_job_ibs": 1,
                "shadow_pool_kib": 4, "sdma_ring_log2_dw": 6, "hw_submission_limit": 1, "ban_after_hangs": 1}
    largest = {"ring_log2_dw": 20, "ih_log2_entries": 16, "ib_align_dw": 256, "initial_seq": 0xFFFF_FFFF,
               "max_ib_chunks": 64, "max_job_ibs": 1 << 20, "max_job_dw": 1 << 30, "shadow_pool_kib": 1 << 30,
               "job_timeout": 1 << 62, "fallback_poll": 1 << 62, "hw_timeout": 1 << 62,
               "sdma_ring_log2_dw": 20, "hw_submission_limit": 1 << 20, "ban_after_hangs": 1 << 20}
    # Every integer parameter is bounded on both sides: a parameter added without its
    # bounds here fails this line.
    ints = {f.name for f in dataclasses.fields(KmdParams) if f.type in ("int", int)}
    assert set(smallest) == set(largest) == ints
    for name, lo in smallest.items():
        assert getattr(KmdParams(**{name: lo}), name) == lo
        with pytest.raises(ValueError, match=rf"^KMD parameter {name} must be an int in \[{lo}, \d+\], not {lo - 1}$"):
            KmdParams(**{name: lo - 1})
    for name, hi in largest.items():
        assert getattr(KmdParams(**{name: hi}), name) == hi
        with pytest.raises(ValueError, match=rf"^KMD parameter {name} must be an int in \[\d+, {hi}\], not {hi + 1}$"):
            KmdParams(**{name: hi + 1})
    with pytest.raises(ValueError, match=r"^KMD parameter ib_align_dw must be a power of two, not 24$"):
        KmdParams(ib_align_dw=24)


def test_observers_see_interrupts_and_fences_and_traces_are_sane():
    """"irq" for each interrupt taken and "fence" for each fence signalled (the timeline's
    instants); every traced ioctl says how long it took in wall-clock microseconds (under
    a second for these) and the failed ones are counted."""
    kmd = kmd_model.bind(RefModel())
    events, recs = [], []
    kmd.observers.append(lambda event, f: events.append((event, f.get("fence"))))
    kmd.trace_hooks.append(recs.append)
    c = Client()
    bo = c.bo()
    for i in range(3):
        c.run(bo, pm4.write_data(bo.addr + 4 * i, [i]), offset=0x100 * (i + 1))
    fences = [f.seq for e, f in events if e == "fence"]
    assert len(fences) == 3 and fences == sorted(fences) and fences[-1] == kmd.fence_drv.last_seq
    assert [e for e, _ in events].count("irq") == kmd.stats["interrupts"] - 1  # (the IB test's came before)
    errors = kmd.stats["ioctl_errors"]
    for _ in range(3):
        with pytest.raises(kmd_model.uapi.KmdError):
            c.io(Request.GEM_MMAP, kmd_model.uapi.GemMmapArgs(99))
    assert kmd.stats["ioctl_errors"] == errors + 3
    assert recs and all(0 <= r.wall_us < 1_000_000 for r in recs)


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


def test_rebinding_clears_the_counters_and_bind_says_what_it_takes():
    """A driver bound to a device that has run work starts its counters afresh (CONTROL.
    PERF_CLEAR): INFO COUNTERS shows its own ring and IB tests only; unknown parameters,
    and params given twice, are refused in one line."""
    from kmd_model.core.kmd import KmdParams

    dev = RefModel()
    kmd_model.bind(dev)
    c = Client()
    bo = c.bo()
    for i in range(4):
        c.run(bo, pm4.write_data(bo.addr + 4 * i, [i]))
    kmd = kmd_model.bind(dev)
    cnt = kmd.counters()["packets"]
    # the ring tests (gfx and gfx_high: the CP's two queues) and the IB test
    assert (cnt["WRITE_DATA"], cnt["RELEASE_MEM"], cnt["INDIRECT_BUFFER"]) == (3, 1, 1)
    with pytest.raises(TypeError, match=r"^unknown KMD parameter\(s\) speed, zoom; known: ban_after_hangs, cs_check, fallback_poll, "):
        kmd_model.bind(dev, speed=1, zoom=2)
    with pytest.raises(TypeError, match=r"^bind: give either params or keyword parameters, not both$"):
        kmd_model.bind(dev, KmdParams(), job_timeout=5)


class CorruptingModel(RefModel):
    """A CP whose WRITE_DATA lands one bit off when it writes the IB test's magic."""

    def _op_write_data(self, *args) -> None:
        super()._op_write_data(*args)
        from kmd_model.core.kmd import IB_TEST_MAGIC

        m32 = self.mem.view("<u4")
        m32[m32 == IB_TEST_MAGIC] ^= 1


def test_an_ib_test_that_reads_back_wrong_fails_the_bind():
    """amdgpu's IB test at bind: its fence signals but the magic it wrote reads back wrong:
    the bind fails with EIO saying what it read and what it expected."""
    from kmd_model.core.kmd import IB_TEST_MAGIC

    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(CorruptingModel())
    assert e.value.errno == errno.EIO
    assert e.value.message == f"IB test failed: read {IB_TEST_MAGIC ^ 1:#010x}, expected {IB_TEST_MAGIC:#010x}"


class DeafModel(RefModel):
    """A CP that never hears the doorbell."""

    def mmio_write32(self, offset: int, value: int) -> None:
        if offset != regs.RB_DOORBELL.ADDR:
            super().mmio_write32(offset, value)


def test_a_ring_test_that_never_completes_fails_the_bind():
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(DeafModel(), hw_timeout=2_000)
    assert e.value.errno == errno.ETIMEDOUT
    assert e.value.message == "ring test failed: scratch 0xcafedead after 2000 cycles (rptr 0x0, wptr 0x8)"


@pytest.mark.parametrize("how", ["gem_close", "file_close"])
def test_a_reset_that_fails_inside_a_close_still_closes(how):
    """A GEM_CLOSE (of a busy BO) or a file's close folds in what the hardware did first,
    and that may run a recovery whose reset fails. The error is the caller's to see, but the
    close happens all the same, as close(2) releases the fd when it reports EIO: the BO (the
    file) is gone and its memory freed once no job holds it. Before, GEM_CLOSE dropped the
    handle and raised before closing the BO, which then stayed allocated for good, and a
    file's close raised before releasing anything."""
    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, hw_timeout=2000, job_timeout=5000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    a.submit(a.ib(abo, pm4.wait_reg_mem(abo.addr + 0x800, 1, 1, "EQ")))  # hangs
    queued = b.submit(b.ib(bbo, pm4.nop(2)))  # behind it: b's BO is busy
    dev.stuck = True
    dev.delay(20_000)
    kmd.service()  # the job timer has seen the hang once
    dev.delay(20_000)
    with pytest.raises(kmd_model.uapi.KmdError) as ei:  # the recovery runs, and fails, in here
        if how == "gem_close":
            b.io(Request.GEM_CLOSE, kmd_model.uapi.GemCloseArgs(bbo.handle))
        else:
            b.f.close()
    assert ei.value.errno == errno.EIO and "soft reset: CP not idle" in ei.value.message
    assert kmd.wedged
    if how == "gem_close":
        assert bbo.handle not in b.f.handles
        expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", b.wait, queued)
    else:
        assert b.f.closed and b.f.fd not in kmd.files and not b.f.contexts
    assert not kmd.live_bos(b.f)  # freed: the wedge cancelled the job that held it
    b.f.close()
    a.f.close()
    assert not kmd.live_bos()


def test_a_reset_that_fails_still_tells_each_context_what_it_did_to_it():
    """The device wedges (its reset fails): every context has seen a reset (`resets` 1);
    the one whose job caused it reads GUILTY, one with work in flight INNOCENT, an idle one
    NO_RESET, as after a reset that works; every unfinished job and CS stays EIO. Every
    context read NO_RESET and 0 resets, as if nothing had happened."""
    kmd, a, b, abo, bbo, hold, bad, queued = _reset_that_fails()
    idle = Client()
    with pytest.raises(kmd_model.uapi.KmdError):
        a.wait(bad)
    assert kmd.wedged and b.wait(hold, 0)
    got = {name: c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx)) for name, c in
           (("a", a), ("b", b), ("idle", idle))}
    assert {n: (s.reset_status, s.resets, s.ring_status) for n, s in got.items()} == {
        "a": (ResetStatus.GUILTY, 1, {"gfx": ResetStatus.GUILTY}),
        "b": (ResetStatus.INNOCENT, 1, {"gfx": ResetStatus.INNOCENT}),
        "idle": (ResetStatus.NO_RESET, 1, {})}
    for c, s in ((a, bad), (b, queued)):
        expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", c.wait, s)
        expect(errno.EIO, f"CS: {kmd.wedged}", c.submit, c.ib(abo if c is a else bbo, pm4.nop(2), offset=0x200))


def test_a_reset_that_fails_does_not_call_the_guilty_context_innocent_on_its_other_rings():
    """The guilty context also has a copy in flight on the SDMA ring when the reset fails:
    that ring did not find it innocent (its work there fails with EIO like the rest): it
    reads GUILTY for gfx and nothing for sdma0, as after a full reset that works."""
    from .test_kmd_queues import HANG, sdma_ib

    kmd, a, b, abo, bbo, hold, bad, queued = _reset_that_fails()
    copy = a.submit(sdma_ib(abo, HANG(abo.addr + 0x3000), 0x400))  # polls until the wedge
    with pytest.raises(kmd_model.uapi.KmdError):
        a.wait(bad)
    assert kmd.wedged
    st = a.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, a.ctx))
    assert (st.reset_status, st.ring_status) == (ResetStatus.GUILTY, {"gfx": ResetStatus.GUILTY})
    expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", a.wait, copy)


class SlowResetModel(RefModel):
    """The RTL's soft reset seen from the driver: each engine's part ends when its own bus
    traffic has, so after SOFT_RESET the SDMA queue and the CP's second queue read IDLE 0
    and ignore their doorbells for a while after STATUS.IDLE already reads 1 (docs/hardware.md,
    Errors). Here that while is `busy` cycles."""

    busy = 3000
    until = 0

    def _resetting(self, offset: int) -> bool:
        return self.now() < self.until and offset in (regs.SDMA_STATUS.ADDR, regs.SDMA_DOORBELL.ADDR,
                                                      regs.CP_HQD1_STATUS.ADDR, regs.CP_HQD1_RB_DOORBELL.ADDR)

    def mmio_read32(self, offset: int) -> int:
        v = super().mmio_read32(offset)
        return v & ~regs.SDMA_STATUS.IDLE.mask if self._resetting(offset) else v

    def mmio_write32(self, offset: int, value: int) -> None:
        if offset == regs.CONTROL.ADDR and regs.CONTROL.SOFT_RESET.get(value):
            self.until = self.now() + self.busy
        if not self._resetting(offset):
            super().mmio_write32(offset, value)


def test_a_soft_reset_waits_for_every_queue_to_go_idle():
    """A doorbell an engine ignores while its reset runs would fail that ring's test: the KMD
    waits for every queue's IDLE after SOFT_RESET, not the CP's queue 0 alone, at bind and
    at a full reset; an engine that never comes back is named."""
    assert regs.SDMA_STATUS.IDLE.mask == regs.CP_HQD1_STATUS.IDLE.mask
    dev = SlowResetModel()
    kmd = kmd_model.bind(dev, hw_timeout=5000)
    c = Client()
    bo = c.bo()
    kmd.gpu_recover(None, kmd.describe_error(kmd.read_cp_error(), None))
    assert not kmd.wedged and kmd.stats["resets"] == 1
    c.run(bo, pm4.write_data(bo.addr + 0x800, [1]))
    assert bo.u32[0x200] == 1
    dev.busy = 10_000
    with pytest.raises(kmd_model.uapi.KmdError) as e:
        kmd_model.bind(dev, hw_timeout=5000)
    assert e.value.errno == errno.EIO
    st = dev.mmio_read32(regs.CP_HQD1_STATUS.ADDR)
    assert e.value.message == f"soft reset: CP_HQD1 not idle after 5000 cycles (CP_HQD1_STATUS {st:#x})"
