"""The job timer with many rings, what is stuck: a hang on one CP queue found while the other
works, an unchecked loop reset by its dwords, a checked job of long fills by the time rule, a
poll that never holds after one that does whatever queue 1 does, a poll a client makes hold
only at the timer's looks (reference-model backend, on models that run a packet a cycle and
park their polls as the RTL does; the `check_*` bodies run on the RTL too,
tests/cosim/test_rtl_drivers.py). What is not stuck: test_kmd_queues_not_stuck.py."""

from __future__ import annotations

import errno
import re

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CtxPriority, ResetStatus
from spec import pm4
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import DMA, GFX, query, new_ctx, ParkedPolls


def check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works(dev):
    """The CP's two queues share the fetch and DMA counters: a job stuck in a WAIT_REG_MEM
    on one queue is still timed out while another client keeps the other queue busy (a job,
    then 2,000 cycles, and again), between job_timeout and twice that after it started, and
    only its own queue's recovery runs (its queue reset, CP_QUEUE_RESET.Q1 or .Q0; the
    full reset, which ring 0's hang went to before, stopped the worker's queue too):
    the worker's jobs all complete. Both ways, gfx_high hung first. (Before the KMD read the
    queue's own STATUS.WAITING, neither hang was found in 10 job timeouts.)

    Nothing here counts on how fast a job runs: a worker's job took 1,100 cycles at 64 bits
    and 4,900 at 32 bits on slow, stalling memory, where the 10 jobs this asked for did not
    fit in the timeout. What it asks is that worker jobs completed while the hang could not
    yet have been found (before job_timeout), and that the first look after twice the
    timeout (and the worker's one job and pause) saw it."""
    t_out = 20_000
    kmd = kmd_model.bind(dev, job_timeout=t_out, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    bad_c, work_c = Client(), Client()
    bbo, wbo = bad_c.bo(), work_c.bo(0x8000)
    for n, hung in enumerate(("gfx_high", "gfx")):
        bad_ctx = new_ctx(bad_c, CtxPriority.HIGH) if hung == "gfx_high" else bad_c.ctx
        work_ctx = work_c.ctx if hung == "gfx_high" else new_ctx(work_c, CtxPriority.HIGH)
        start = kmd.dev.now()
        bad = bad_c.submit(bad_c.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ"), 0x100 * n), ctx=bad_ctx)
        done, failed, looked, finished = 0, None, 0, []  # looked: the last look that saw no failure
        while failed is None and kmd.dev.now() - start < 10 * t_out:
            words = sum((pm4.write_data(wbo.addr + 0x4000 + 4 * i, [done]) for i in range(16)), [])
            seq = work_c.submit(work_c.ib(wbo, words, 0x400 * (done % 8)), ctx=work_ctx)
            assert work_c.wait(seq, ctx=work_ctx)
            assert wbo.u32[0x100F] == done
            done += 1
            finished.append(kmd.dev.now() - start)
            kmd.dev.delay(2_000)
            try:
                bad_c.wait(bad, 0, ctx=bad_ctx)
                looked = kmd.dev.now() - start
            except uapi.KmdError as e:
                failed = (e, kmd.dev.now() - start)
        assert failed is not None, f"the hang on {hung} was not found in {kmd.dev.now() - start} cycles"
        e, when = failed
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
        assert t_out <= when and looked <= 2 * t_out + 5_000, (looked, when)
        assert (hung == "gfx_high") == ("gfx_high" in e.message), e.message
        assert kmd.stats["job_timeouts"] == n + 1
        # the other queue ran jobs to the end while this one was stuck, not after its recovery
        assert sum(t < t_out for t in finished) >= 2, finished
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (n + 1, 0)
        assert kmd.recovery_log[-2:] == [(hung, "timeout"), (hung, "queue_reset")]
        assert query(work_c, work_ctx).reset_status == ResetStatus.NO_RESET  # (its ring was never reset)


def check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works(dev):
    """The CP had one fetch counter for its two queues: while the other queue had work (a job
    in its ring since the timer's last look), the job timer could not tell a loop's dwords
    from the other queue's, and an unchecked CHAIN to itself ran until the time rule,
    unchecked_job_timeouts (64) job timeouts, every other client of its ring waiting behind
    it (32 M cycles with the default job_timeout). Each queue's own counter
    (PERF_Q0/Q1_DWORDS_FETCHED) now bounds it by its own dwords whatever the other queue
    does. Both ways round (gfx_high, then gfx): a hostile file's loop while an innocent
    client keeps the other CP queue busy, a job, then 500 cycles, and again (on gfx, behind
    the HIGH-priority loop, its job waits in the ring until the reset); the loop is reset
    once it fetched more than 2 * max_job_dw, long before the time rule, and the innocent
    jobs, the one queued behind the loop on its ring too, complete. (Before: 'ran 129,336
    cycles unchecked, more than 64 job timeouts' on the model, both ways.)"""
    # 256 job timeouts for the time rule: on slow, stalling memory at 32 bits the worker's
    # jobs on the HIGH queue leave the loop on gfx so little of the CP that at 64 the time
    # rule (128,000 cycles) came first (GPUCOSIM_DRIVER_MEM=slow:3)
    n, t_out, timeouts = 1 << 10, 2_000, 256
    kmd = kmd_model.bind(dev, cs_check=False, max_job_dw=n, job_timeout=t_out, fallback_poll=1_000,
                         unchecked_job_timeouts=timeouts, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    bad, work, behind = Client(), Client(), Client()
    hbo, wbo, bbo = bad.bo(0x1000), work.bo(0x8000), behind.bo(0x1000)
    for k, ring in enumerate(("gfx_high", "gfx")):
        other = "gfx" if ring == "gfx_high" else "gfx_high"
        ctx = {c: new_ctx(c, CtxPriority.HIGH) if r == "gfx_high" else c.ctx
               for c, r in ((bad, ring), (work, other), (behind, ring))}
        t0 = kmd.dev.now()
        seq = bad.submit(bad.ib(hbo, pm4.indirect_buffer(hbo.addr + 0x100 * k, 8, chain=1), 0x100 * k), ctx=ctx[bad])
        bseq = behind.submit(behind.ib(bbo, pm4.write_data(bbo.addr + 0x100 + 4 * k, [5 + k]), 0x200 * k),
                             ctx=ctx[behind])
        done, failed = 0, None
        while failed is None and kmd.dev.now() - t0 < 2 * timeouts * t_out:
            words = sum((pm4.write_data(wbo.addr + 0x4000 + 4 * i, [done]) for i in range(16)), [])
            wseq = work.submit(work.ib(wbo, words, 0x400 * (done % 8)), ctx=ctx[work])
            assert work.wait(wseq, 1 << 30, ctx=ctx[work]) and wbo.u32[0x100F] == done
            done += 1
            kmd.dev.delay(500)
            try:
                bad.wait(seq, 0, ctx=ctx[bad])
            except uapi.KmdError as e:
                failed = e, kmd.dev.now() - t0
        assert failed is not None, f"the loop on {ring} ran {kmd.dev.now() - t0} cycles"
        e, when = failed
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
        m = re.search(r"timed out on (gfx|gfx_high): fetched \d+ dwords unchecked \(cs_check off\), more than "
                      rf"twice max_job_dw \({2 * n}\), CP queue (0|1) ", e.message)
        assert m and m.groups() == (ring, "01"[ring == "gfx_high"]), e.message
        # before the time rule (512,000 cycles): the dwords' rule came at 31,000 or less on
        # fast memory; on slow, stalling memory at 32 bits at 40,800 with the loop on
        # gfx_high and 134,100 on gfx (the worker's HIGH jobs take most of the CP)
        assert when < timeouts * t_out // 2, (ring, when)
        assert behind.wait(bseq, 1 << 20, ctx=ctx[behind]) and bbo.u32[(0x100 + 4 * k) // 4] == 5 + k
        # the loop on gfx: the worker (gfx_high) ran beside it; on gfx_high: the worker's
        # first job (gfx) waited it out in the ring
        assert done >= (2 if ring == "gfx" else 1) and kmd.stats["job_timeouts"] == k + 1
        wseq = work.submit(work.ib(wbo, pm4.write_data(wbo.addr + 0x4000, [done])), ctx=ctx[work])
        assert work.wait(wseq, 1 << 20, ctx=ctx[work]) and wbo.u32[0x1000] == done


def check_a_checked_job_of_long_fills_is_reset_by_the_time_rule(dev):
    """The checker bounds a job's dwords (max_job_dw), not its time, and a DMA_DATA of 7 dwords
    moves up to 1 MiB: the job timer, restarted by the DMA counters moving, let a hostile
    client's checked job of CP_SYNC fills of its own memory (legal packets) hold queue 0 for as
    long as its bytes took, every other client of the queue behind it (24 fills of 128 KiB, 168
    dwords, held it 394,188 cycles on Verilator, 131 job timeouts of 3,000; max_job_dw dwords of
    1 MiB fills some 4e10 cycles). A checked job is now reset once it has run
    `checked_job_timeouts` job timeouts (the time rule unchecked jobs have, further off): here 16
    of 3,000. The model's fills take no time, so there the job ends at once."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, checked_job_timeouts=16)
    evil, good = Client(), Client()
    fill = 128 << 10
    ebo, gbo = evil.bo(fill + 0x2000), good.bo()
    t0 = kmd.dev.now()
    e = evil.submit(evil.ib(ebo, pm4.dma_data(ebo.addr + 0x2000, 0x5A5A5A5A, fill, src_sel="DATA", cp_sync=1) * 24
                            + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x800, [0x600D])))
    assert good.wait(g, 1_000_000) and gbo.u32[0x200] == 0x600D
    waited = kmd.dev.now() - t0
    try:
        evil.wait(e, 1_000_000)
        assert dev.name == "model" and ebo.u32[0] == 0xE71, "the fills ran to their end"
    except uapi.KmdError as x:
        assert x.errno == errno.ECANCELED and x.info.code == "TIMEOUT", x
        assert re.search(r"job 0x1 timed out on gfx: ran \d+ cycles, more than 16 job timeouts \(checked_job_timeouts",
                         x.message), x.message
        assert ebo.u32[0] == 0 and 16 * 3_000 <= waited < 20 * 3_000 + 40_000, waited
        q = query(good)  # (its job, in the ring behind the fills, was run again after the queue reset)
        assert q.reset_status == ResetStatus.INNOCENT and q.ring_status == {"gfx": ResetStatus.INNOCENT}
        assert good.f.hangs == 0 and query(evil).reset_status == ResetStatus.GUILTY


CHECKS = [check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works,
          check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works,
          check_a_checked_job_of_long_fills_is_reset_by_the_time_rule]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_poll_that_does_not_hold_behind_queue_1_s_flood_is_still_stuck():
    """The other side of the rule: a job on queue 0 whose poll does not hold is reset by its
    timeout while queue 1 floods (the flood, queue 0's only hope of being moved on, is no
    reason to wait for it), queue 0 alone, the flood run once."""
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=3_000, hw_timeout=5_000, cap_sys_nice=True)
    bad, evil = Client(), Client()
    bbo, ebo = bad.bo(0x4000), evil.bo(0x100000)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    b = bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16), 0x100))
    flood = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
    for k in range(20_000):
        flood += pm4.dma_data(ebo.addr + 0xFF000, k, 64, src_sel="DATA")
    f = evil.submit(evil.ib(ebo, flood, 0x4000), ctx=ehi)
    fjob = kmd.hqd_sched.pending[0]
    kmd.dev.delay(1_000)
    request, seen = kmd.ring.request_reset, []
    kmd.ring.request_reset = lambda: (seen.append(kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start), request())[1]
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x3000 // 4] = 1
    with pytest.raises(uapi.KmdError) as ei:
        bad.wait(b, 1_000_000)
    # reset during the flood (its timeout, not the flood's end): queue 1 had fetched a part of it
    assert len(seen) == 1 and 0 < seen[0] < len(flood) / 2, (seen, len(flood))  # (after it: 140,013)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT", ei.value
    assert "stuck in WAIT_REG_MEM" in ei.value.info.message, ei.value.info.message
    assert evil.wait(f, 1_000_000, ehi) and fjob.runs == 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0)


def _reset_at_the_look(kmd, bad, b: int, t0: int):
    """(the KmdError, cycles since t0) if job `b` was reset by the timer's look just made,
    else None (the look: a WAIT_CS of timeout 0 services the driver)."""
    try:
        bad.wait(b, 0)
    except uapi.KmdError as e:
        return e, kmd.dev.now() - t0
    return None


def _the_timers_next_look(kmd, t_out: int) -> int:
    """The cycle of the job timer's next look at ring 0 (a client can learn its phase)."""
    return kmd.sched.progress_at + (t_out if kmd.sched.progress_mark else max(1, t_out // 8))


def _past_a_into_b(bad, bbo, **kw) -> int:
    """A job that passes a poll that holds (A, its flag at 0x3000 set) and polls one that
    never will (B, at 0x3004), each every 16 cycles: its seqno."""
    bbo.u32[0x3000 // 4] = 1  # A holds
    return bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                             + pm4.wait_reg_mem(bbo.addr + 0x3004, 1, 1, "EQ", poll_interval=16), 0x100), **kw)


def _rounds_of_work_and_a_poll(client, wbo, rounds: int, **kw) -> int:
    """One long job: `rounds` times 300 DMA_DATA fills, then a poll of round k's flag (at
    wbo + 0xF8000 + 4k, every 4 cycles), which the test sets: its seqno."""
    words = []
    for k in range(rounds):
        words += sum((pm4.dma_data(wbo.addr + 0xF0000, j, 64, src_sel="DATA") for j in range(300)), [])
        words += pm4.wait_reg_mem(wbo.addr + 0xF8000 + 4 * k, 1, 1, "EQ", poll_interval=4)
    return client.submit(client.ib(wbo, words, 0x1000), **kw)


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_lets_it_poll():
    """The other side of the rule above: a hostile job on queue 0 passes a poll that holds
    (A) and then polls one that never will (B), while a client keeps queue 1 busy now and
    then, a job of some 1,000 cycles, then its ring empty for 500 (queue 0 polls, and fails,
    between them). Were the job taken as parked in A (some poll of it holds,
    queue 1 had work and moved the shared counters since the last look), it would hold ring
    0 for as long as queue 1 had such work, every other client's job on ring 0 behind it.
    It is reset by its timeout, and the innocent job behind it runs."""
    t_out = 3_000
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    bad, busy, behind = Client(), Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), busy.bo(0x10000), behind.bo(0x1000)
    hi = new_ctx(busy, CtxPriority.HIGH)
    b = _past_a_into_b(bad, bbo)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    t0, done, failed = kmd.dev.now(), 0, None
    while failed is None and kmd.dev.now() - t0 < 20 * t_out:
        words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
        w = busy.submit(busy.ib(wbo, words, 0x8000 * (done % 2)), ctx=hi)
        assert busy.wait(w, 1 << 20, ctx=hi)
        done += 1
        kmd.dev.delay(t_out // 6)
        try:
            bad.wait(b, 0)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles ({done} jobs on queue 1)"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out, when  # (its timeout: 9/8 of one, and the loop's step)
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_polls_in_its_job():
    """As above, queue 1's work one long job this time, always in its ring, that runs some
    300 packets and then polls a flag its client sets 1,500 cycles later, and again: queue 1
    polling yields the CP, and queue 0 polls B, and fails, then. Queue 1 held the CP since
    the last look only if it is running at the look (not polling, its STATUS): the hostile
    job is reset by its timeout, the first look that finds queue 1 polling."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    bad, busy = Client(), Client()
    bbo, wbo = bad.bo(0x4000), busy.bo(0x100000)
    hi = new_ctx(busy, CtxPriority.HIGH)
    w = _rounds_of_work_and_a_poll(busy, wbo, rounds, ctx=hi)
    b = _past_a_into_b(bad, bbo)
    t0, failed = kmd.dev.now(), None
    for k in range(rounds):
        kmd.dev.delay(1_500)
        try:
            bad.wait(b, 0)  # (the look: queue 1 has polled its flag for some 1,200 cycles)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
            break
        # set after the look: set before it, queue 1 saw it at its next poll, 4 cycles on,
        # and ran at every look (the model saw it late: its skipped polls hid the CPU's write)
        wbo.u32[0xF8000 // 4 + k] = 1
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out, when  # (its timeout: 9/8 of one, and the loop's step)
    wbo.u32[0xF8000 // 4: 0xF8000 // 4 + rounds] = 1
    assert busy.wait(w, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_poll_that_never_holds_after_one_that_does_is_stuck_when_queue_1_polls_only_between_looks():
    """The blind spot of the rule above (the look sees queue 1 only at that moment): a hostile
    client's job on queue 0 passes a poll that holds (A) and polls one that never will (B); its
    own HIGH context's job on queue 1 runs 300 packets, then polls a flag, and the client sets
    that flag just before each of the timer's looks (its period is job_timeout: the client can
    learn its phase), so queue 1 is running at every look and polling between them, where queue
    0 polls B, and fails, every 16 cycles. The job was taken as parked at every look and held
    ring 0 for as long as the client kept this up (120,000 cycles, 40 job timeouts, in this
    test), an innocent job behind it never run, where its timeout bounds it. The look asked
    next whether any WAIT_REG_MEM started since the last one (PERF_PACKETS), and now asks
    whether queue 0 made a poll read (PERF_Q0_POLLS): it polled B between the looks, and the
    hostile job is reset by its timeout."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x100000), behind.bo(0x1000)
    hi = new_ctx(bad, CtxPriority.HIGH)
    w = _rounds_of_work_and_a_poll(bad, wbo, rounds, ctx=hi)
    b = _past_a_into_b(bad, bbo)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    t0, failed = kmd.dev.now(), None
    for k in range(rounds):
        look = _the_timers_next_look(kmd, t_out)
        kmd.dev.delay(max(0, look - 100 - kmd.dev.now()))  # queue 1 polls its flag meanwhile
        wbo.u32[0xF8000 // 4 + k] = 1  # queue 1 runs again from its next poll on
        kmd.dev.delay(max(0, look + 4 - kmd.dev.now()))
        failed = _reset_at_the_look(kmd, bad, b, t0)
        if failed:
            break
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    # (its last step, into B, came after the first look, queue 1 ahead of it: caught within
    # two job timeouts of that; before, 117,703 cycles, when queue 1's job ran out of rounds)
    assert when <= 3 * t_out, when
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    wbo.u32[0xF8000 // 4: 0xF8000 // 4 + rounds] = 1
    assert bad.wait(w, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_high_job_in_a_poll_that_never_holds_after_one_that_does_is_stuck_while_queue_0_works():
    """The parked rule the other way round: a hostile client's HIGH job on queue 1 passes a
    poll that holds (A) and polls one that never will (B), while its own normal-priority jobs
    keep queue 0 busy (its ring never empty, running at every look). Queue 1 outranks queue 0:
    queue 0 never keeps it off the CP (one packet at most), it polls B, and fails, every few
    cycles. The rule that spares a queue the other kept off the CP took queue 0's work for
    holding the CP, and the job as parked in A: it held ring 1 for as long as queue 0 had
    work (all the test's 40 job timeouts), an innocent HIGH client's job behind it never run.
    A queue of higher priority than the other's is never parked behind it: reset by its
    timeout."""
    t_out, rounds = 3_000, 120
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x10000), behind.bo(0x1000)
    hi, nhi = new_ctx(bad, CtxPriority.HIGH), new_ctx(behind, CtxPriority.HIGH)
    b = _past_a_into_b(bad, bbo, ctx=hi)
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100), ctx=nhi)
    words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
    t0, failed, last = kmd.dev.now(), None, []
    for k in range(rounds):
        while len(last) < 3:  # (queue 0's ring never empty: a job in it and two behind)
            last.append(bad.submit(bad.ib(wbo, words, 0x8000 * (k % 2))))
        kmd.dev.delay(t_out // 3)
        try:
            bad.wait(b, 0, ctx=hi)
        except uapi.KmdError as e:
            failed = e, kmd.dev.now() - t0
            break
        while last and bad.wait(last[0], 0):
            last.pop(0)
    assert failed is not None, f"the hostile job held ring 1 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "stuck in WAIT_REG_MEM at IB+0x1c" in e.message, e.message  # (B)
    assert when <= 2 * t_out + t_out // 3, when  # (its timeout: 9/8 of one, and the loop's step)
    assert behind.wait(n, 1 << 20, ctx=nhi) and nbo.u32[4] == 0x600D
    for s in last:
        assert bad.wait(s, 1 << 20)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log


def test_a_poll_a_client_makes_hold_only_at_the_looks_is_stuck():
    """A hostile client's job on queue 0 polls a flag the client sets just before each of the
    timer's looks (its period is job_timeout: the client can learn its phase) and clears just
    after, while its own HIGH context's job, submitted then, runs on queue 1 through the look
    (queue 0 parked meanwhile); between the looks queue 1 is idle and queue 0 polls the flag,
    and fails. A job whose every poll held at the look was parked whatever queue 1 had done
    since the last one: it held ring 0 for as long as the client went on (all the test's 40
    job timeouts), an innocent job behind it never run. A queue is parked only when the
    other queue held the CP since the last look (it had no turn to poll): reset by its
    timeout."""
    t_out, rounds = 3_000, 40
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    bad, behind = Client(), Client()
    bbo, wbo, nbo = bad.bo(0x4000), bad.bo(0x10000), behind.bo(0x1000)
    hi = new_ctx(bad, CtxPriority.HIGH)
    flag = 0x3000 // 4
    b = bad.submit(bad.ib(bbo, pm4.wait_reg_mem(bbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16), 0x100))
    n = behind.submit(behind.ib(nbo, pm4.write_data(nbo.addr + 0x10, [0x600D]), 0x100))
    words = sum((pm4.dma_data(wbo.addr + 0xC000, k, 64, src_sel="DATA") for k in range(1_000)), [])
    t0, failed, runs = kmd.dev.now(), None, []
    for k in range(rounds):
        look = _the_timers_next_look(kmd, t_out)
        kmd.dev.delay(max(0, look - 60 - kmd.dev.now()))  # queue 0 polls, and fails, meanwhile
        runs.append(bad.submit(bad.ib(wbo, words, 0x8000 * (k % 2)), ctx=hi))  # queue 1 runs through the look
        bbo.u32[flag] = 1
        kmd.dev.delay(max(0, look + 4 - kmd.dev.now()))
        failed = _reset_at_the_look(kmd, bad, b, t0)
        bbo.u32[flag] = 0
        if failed:
            break
    assert failed is not None, f"the hostile job held ring 0 for {kmd.dev.now() - t0} cycles"
    e, when = failed
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    assert "polling in a WAIT_REG_MEM" in e.message, e.message
    assert when <= 9 * t_out // 8 + t_out, when  # (its timeout: 9/8 of one, and a look's step)
    assert behind.wait(n, 1 << 20) and nbo.u32[4] == 0x600D
    for r in runs:
        assert bad.wait(r, 1 << 20, ctx=hi)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (1, 1, 0), kmd.recovery_log
