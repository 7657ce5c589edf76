"""The recovery path beyond the cases of test_kmd_reset.py: an error nobody's job caused
(a stray doorbell: the kernel is named, no context is blamed), a guilty context's decoded
error, the jobs of other contexts that survive a reset, and a reset that fails (the CP never
goes idle): the device is wedged, every job in flight is cancelled with EIO, and every later
CS says why. A job the timer finds stuck is in test_kmd_timeouts.py; what observers see, in
test_kmd_bind.py."""

from __future__ import annotations

import errno
import logging

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CsChunkIb, CtxArgs, CtxOp, HwIp, Request, ResetStatus, VmFlags
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, expect
from tests.kmd_sched.sched_helpers import HANG, NoQueue0Reset, query, sdma_ib
from tests.security.security_helpers import Holder


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
    # queue 0's own reset (CP_QUEUE_RESET.Q0), not the device's
    assert kmd.stats["cp_errors"] == kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]


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


def test_a_reset_that_fails_as_a_timeout_bans_the_file_fails_its_job_with_eio():
    """A job timeout that bans its file (file_ban_after_hangs), and the reset after it
    fails: the device is wedged, and the file's job in flight fails with EIO as everyone's
    does (no reset happened), not with the ban's ECANCELED, which is for the jobs a ban
    takes from the queues."""
    dev = StuckResetModel()
    kmd = kmd_model.bind(dev, cs_check=False, hw_timeout=2000, job_timeout=20_000, file_ban_after_hangs=1)
    c = Client()
    bo = c.bo()
    hang = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    dev.stuck = True
    expect(errno.EIO, "WAIT_CS: soft reset: CP not idle after 2000 cycles (STATUS 0x8)", c.wait, hang, 1_000_000)
    assert c.f.banned and kmd.wedged.startswith("GPU reset failed: ")
    expect(errno.EIO, f"WAIT_CS: {kmd.wedged}", c.wait, hang, 0)


def test_an_sdma_error_is_announced_with_its_state_and_job():
    """Observers (a crash report) see an SDMA ring's error as the gfx ring's: the error, the
    engine's latched state and the guilty job, before the queue reset."""
    seen = []
    kmd_model.bind(RefModel(), observers=[lambda event, fields: seen.append((event, dict(fields)))])
    c = Client()
    bo = c.bo()
    rw = c.bo(vm_flags=VmFlags.READABLE | VmFlags.WRITEABLE)  # not EXECUTABLE: the IB fetch faults
    rw.u32[:8] = sdma.write_linear(bo.addr, [5]) + sdma.pad(3)
    seq = c.submit(CsChunkIb(8, rw.handle, ip_type=HwIp.DMA))
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        c.wait(seq, 1_000_000)
    errors = [f for e, f in seen if e == "gpu_error"]
    assert len(errors) == 1 and errors[0]["info"] == ei.value.info and errors[0]["job"].seq == seq
    assert errors[0]["state"].code_name == ei.value.info.code == "VM_FAULT"
    assert [e for e, _ in seen].index("gpu_error") < [e for e, _ in seen].index("reset")


def test_a_rings_guilt_stays_when_a_later_reset_of_that_ring_finds_the_context_innocent():
    """QUERY_STATE's ring_status says what resets of each ring did to the context: guilty
    there once (a queue reset of sdma0, after which it submits on), it stays guilty there
    when a later reset of that ring, for another context's hang, finds its job in flight."""
    kmd_model.bind(RefModel(), job_timeout=20_000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bad = a.submit(sdma_ib(abo, HANG(abo.addr + 0x3000)))
    with pytest.raises(kmd_model.uapi.KmdError):
        a.wait(bad, 1_000_000)
    assert query(a).ring_status == {"sdma0": ResetStatus.GUILTY}
    hang = b.submit(sdma_ib(bbo, HANG(bbo.addr + 0x3000)))
    later = a.submit(sdma_ib(abo, sdma.fence(abo.addr + 0x100, 4), 0x400))  # in flight behind b's hang
    with pytest.raises(kmd_model.uapi.KmdError):
        b.wait(hang, 1_000_000)
    assert a.wait(later) and abo.u32[0x40] == 4
    assert query(a).ring_status == query(b).ring_status == {"sdma0": ResetStatus.GUILTY}


def test_a_failed_queue_0_reset_says_so_and_falls_to_the_full_reset(caplog):
    """Queue 0's reset that does not come back (STATUS keeps its ERROR): the log says which
    queue and why, then the full reset runs; the innocent context with a job in the SDMA
    ring is told of it (its job there is run again)."""
    kmd = kmd_model.bind(NoQueue0Reset(), cs_check=False, hw_timeout=2000)
    c, other = Client(), Client()
    bo, obo = c.bo(), other.bo()
    held = other.submit(sdma_ib(obo, sdma.poll_regmem(obo.addr + 0x3000, 1, 0xFFFF_FFFF, "EQ", interval=4)))
    seq = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0]))
    with caplog.at_level(logging.ERROR, logger="gpucosim"), pytest.raises(kmd_model.uapi.KmdError):
        c.wait(seq)
    msgs = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("gfx queue reset failed (gfx queue reset: not idle after 2000 cycles (STATUS 0x")
               and m.endswith("): resetting the device") for m in msgs), msgs
    assert regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS)) == 0  # (the full reset cleared it)
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 1)
    assert query(other).ring_status == {"sdma0": ResetStatus.INNOCENT}
    obo.u32[0x3000 // 4] = 1
    assert other.wait(held)


@pytest.mark.parametrize("reset", ["queue", "full"])
def test_a_context_whose_job_was_only_queued_at_a_reset_reads_no_reset(reset):
    """A reset touches the jobs in the reset rings: they run again from their start (their
    contexts INNOCENT there). A job still queued (its ring at hw_submission_limit) is not
    touched: it runs once, after the reset, as it would have. Its context read INNOCENT, the
    status of a context whose work was resubmitted. Now it reads NO_RESET (ring_status
    empty), and learns of the reset as amdgpu_ctx_query2 tells every context, by the reset
    counter: `resets` 1, flag RESET. (The full reset too: NoQueue0Reset.)"""
    kmd = kmd_model.bind(RefModel() if reset == "queue" else NoQueue0Reset(), hw_timeout=2000,
                         hw_submission_limit=1)
    evil, good = Client(), Client()
    ebo, victim, gbo = evil.bo(), evil.bo(), good.bo()
    e = evil.submit(evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ") + pm4.write_data(victim.addr, [1])))
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x10, [0x600D])))
    gjob = kmd.sched.queue[0]
    assert [j.ctx.file for j in kmd.sched.pending] == [evil.f] and gjob.runs == 0  # (queued, not in the ring)
    evil.io(Request.GEM_VA, kmd_model.uapi.GemVaArgs(victim.handle, kmd_model.uapi.VaOp.UNMAP, victim.addr, 0,
                                                     victim.size, 0))
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(kmd_model.uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "VM_FAULT"
    assert good.wait(g, 1_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == ((1, 0) if reset == "queue" else (0, 1))
    q = query(good)
    assert (q.reset_status, q.ring_status, q.resets, q.flags, q.error) == (
        ResetStatus.NO_RESET, {}, 1, kmd_model.uapi.CtxQueryFlags.RESET, None)
    qe = query(evil)
    assert (qe.reset_status, qe.ring_status, qe.error) == (ResetStatus.GUILTY, {"gfx": ResetStatus.GUILTY},
                                                           ei.value.info)


@pytest.mark.parametrize("reset", ["queue", "full"])
def test_a_guilty_context_reports_the_decoded_error(reset):
    """The job's WAIT_CS has the decoded error, and so has the context's QUERY_STATE (`error`:
    after the queue reset it was None, the context GUILTY naming nothing). After queue 0's
    reset the context submits on (as after the other rings' queue resets); after the full
    reset (queue 0's reset did not come back) it stays guilty: its CS fails with the same error."""
    kmd = kmd_model.bind(RefModel() if reset == "queue" else NoQueue0Reset(), cs_check=False, hw_timeout=2000)
    c = Client()
    bo = c.bo()
    bad = pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, "ADDR_LO": (bo.addr + 0x100) >> 2}, [1])
    seq = c.submit(c.ib(bo, bad))
    e = expect(errno.ECANCELED, f"WAIT_CS: unsupported field value in WRITE_DATA at IB+0x0 ({bo.addr:#x}), context "
               f"{c.ctx}", c.wait, seq)
    assert (e.info.code, e.info.opcode_name, e.info.offset, e.info.ctx_id, e.info.seq) == \
        ("UNSUPPORTED", "WRITE_DATA", 0, c.ctx, seq)
    assert kmd.stats["cp_errors"] == 1
    st = c.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, c.ctx))
    if reset == "queue":
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0) and st.error == e.info  # (was None)
        assert c.wait(c.run(bo, pm4.write_data(bo.addr + 0x200, [3]), 0x400), 0) and bo.u32[0x80] == 3
        assert expect(errno.ECANCELED, "WAIT_CS: " + e.info.message, c.wait, seq).info == e.info  # (its own error)
    else:
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 1) and st.error == e.info
        assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset"), ("gfx", "full_reset")]
        again = expect(errno.ECANCELED, f"CS: context {c.ctx} was reset: {e.info.message}", c.submit,
                       c.ib(bo, pm4.nop(2)))
        assert again.info == e.info
    assert st.reset_status == ResetStatus.GUILTY and st.ring_status == {"gfx": ResetStatus.GUILTY}


@pytest.mark.parametrize("reset", ["queue", "full"])
def test_waiting_on_a_job_that_finished_before_its_context_was_reset(reset):
    """J1 and J2 of one context run behind a held CP; J2 is bad. A WAIT_CS on J1 that began
    before the reset sees J1's fence signal. After the full reset (queue 0's reset did not
    come back) one after it reports J2's error, the latest job of the context on that ring:
    amdgpu's wait fails with the entity's error first (amdgpu_ctx_get_entity's
    drm_sched_entity_error), then waits for the job's own fence. After queue 0's reset the
    context is not guilty and each wait answers for its own job (docs/architecture.md)."""
    kmd = kmd_model.bind(RefModel() if reset == "queue" else NoQueue0Reset(), cs_check=False, hw_timeout=2000)
    c, h = Client(), Client()
    bo, hbo = c.bo(), h.bo()
    held = h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr + 0x800, 1, 1, "EQ")))
    j1 = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x800, [1])))
    j2 = c.submit(c.ib(bo, [pm4.header(0x7B, 0), 0], offset=0x100))
    hbo.u32[0x200] = 1
    assert c.wait(j1)
    msg = f"illegal opcode 0x7b at IB+0x0 ({bo.addr + 0x100:#x}), context {c.ctx}"
    e = expect(errno.ECANCELED, f"WAIT_CS: {msg}", c.wait, j2)
    if reset == "full":
        assert expect(errno.ECANCELED, f"WAIT_CS: context {c.ctx}'s latest job on gfx, seqno {j2:#x}, failed: {msg}",
                      c.wait, j1).info == e.info
    else:
        assert c.wait(j1, 0)
    assert e.info.seq == j2 and bo.u32[0x200] == 1 and h.wait(held, 0)
    s = kmd.kmd_stats()
    assert s["last_fence"] == kmd.fence_drv.sync_seq == kmd.fence_drv.read()  # the lost fences were completed
    assert (s["queue_resets"], s["resets"]) == ((1, 0) if reset == "queue" else (0, 1)) and not kmd.fence_drv.pending


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
    expect(errno.ECANCELED, f"WAIT_CS: illegal opcode 0x7b at IB+0x0 ({abo.addr:#x}), context {a.ctx}", a.wait, bad)
    st = b.io(Request.CTX, CtxArgs(CtxOp.QUERY_STATE, b.ctx))
    assert (st.reset_status, st.resets, st.error) == (ResetStatus.INNOCENT, 1, None)  # it had work in the ring
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 0)


@pytest.mark.parametrize("how", ["gem_close", "file_close"])
def test_a_reset_that_fails_inside_a_close_still_closes(how):
    """A GEM_CLOSE (of a busy BO) or a file's close folds in what the hardware did first,
    and that may run a recovery whose reset fails. The error is the caller's to see, but the
    close happens all the same, as close(2) releases the fd when it reports EIO: the BO (the
    file) is gone and its memory freed once no job holds it (on the wedged device,
    quarantined: tests/security/memory/test_security_wedged.py). Before, GEM_CLOSE dropped the
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
    assert not kmd.live_bos(b.f)  # gone (quarantined: the wedge cancelled the job that held it)
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
    from ..sched_helpers import HANG, sdma_ib

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
    assert e.value.message == (f"soft reset: CP_HQD1 not idle after 5000 cycles (CP_HQD1_STATUS {st:#x}): "
                               "no driver is bound now (the device's old driver was unloaded first): bind again")


@pytest.mark.parametrize("ring", ["gfx", "gfx_full", "sdma"])
def test_vmids_across_a_reset_keep_their_tables_and_a_dead_files_goes_back(ring):
    """A hostile file hangs a ring and closes; an innocent file's job waits behind the hang.
    The reset (queue 0's own for gfx, the full one for gfx_full, where queue 0's reset does
    not come back, the SDMA queue's own for sdma) keeps VMID ownership:
    the MMU is not reset (docs/hardware.md), and every TLB flush is MMIO the KMD waited for,
    so none was lost with the ring (amdgpu re-flushes every VMID after a reset because its
    flushes ride in the ring, amdgpu_vmid_had_gpu_reset). The innocent job reruns with its
    VM's VMID and tables, no extra flush; the dead file's VMID and tables are given back as
    its job is cancelled; each owned VMID's page-table base is its owner's root."""
    kmd = kmd_model.bind(NoQueue0Reset() if ring == "gfx_full" else RefModel(), job_timeout=30_000,
                         fallback_poll=5_000, hw_timeout=5_000)
    h, i = Client(), Client()
    hbo, ibo = h.bo(), i.bo()
    if ring != "sdma":
        h.submit(h.ib(hbo, pm4.wait_reg_mem(hbo.addr, 1, 0xFF, "EQ")))
        after = i.submit(i.ib(ibo, pm4.write_data(ibo.addr + 0x100, [0x1B])))
    else:
        h.submit(sdma_ib(hbo, HANG(hbo.addr + 0x3000)))
        after = i.submit(sdma_ib(ibo, sdma.write_linear(ibo.addr + 0x100, [0x1B])))
    hvm, ivm = h.f.vm, i.f.vm
    hvmid, ivmid = hvm.vmid, ivm.vmid
    assert hvmid and ivmid and hvmid != ivmid
    h.f.close()
    assert kmd.vmids.ids[hvmid - 1].owner is hvm  # its job still runs with it
    flushes = kmd.vmids.flushes
    assert i.wait(after, 400_000) and ibo.u32[0x40] == 0x1B
    assert (kmd.stats["resets"], kmd.stats["queue_resets"]) == ((1, 0) if ring == "gfx_full" else (0, 1))
    assert ivm.vmid == ivmid and kmd.vmids.flushes == flushes  # kept, not flushed again
    assert hvm.vmid is None and kmd.vmids.ids[hvmid - 1].owner is None and not kmd.live_bos(h.f)
    assert all(t.freed for t in hvm.tables.values())  # its page tables went too
    for v in kmd.vmids.ids:
        if v.owner is not None:
            base = kmd.mmio.read(regs.VM_CONTEXT_PT_BASE_LO, v.n) | kmd.mmio.read(regs.VM_CONTEXT_PT_BASE_HI, v.n) << 32
            assert base == v.owner.root.gpu_addr and not v.owner.closed
    i.run(ibo, pm4.write_data(ibo.addr + 0x104, [0x2B]), offset=0x200)  # and on after the reset
    assert ibo.u32[0x41] == 0x2B
