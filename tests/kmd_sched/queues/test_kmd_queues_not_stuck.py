"""The job timer with many rings, what is not stuck: a job held off by the other CP queue's
flood or transfers, parked in a poll that holds while queue 1 holds the CP, behind the CP's
long packet, an unchecked job starved or parked by queue 1 (reference-model backend, on
models that run a packet a cycle and park their polls as the RTL does; the `check_*` bodies
run on the RTL too, tests/cosim/test_rtl_drivers.py). What is: test_kmd_queues_stuck.py."""

from __future__ import annotations

import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CtxPriority, ResetStatus
from spec import packets as pm4_spec
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.sched_helpers import DMA, GFX, sdma_ib, query, new_ctx, OnePacketACycle, ParkedPolls


def check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck(dev):
    """On the RTL the SDMA's TRAP waits for the CP's IH writer, which takes an entry only
    between two CP packets, so an SDMA job behind the TRAP of the job before it stands still
    while the CP runs a long CP_SYNC DMA_DATA (docs/hardware.md, "Timing on the RTL"). The
    SDMA ring's timer took only the engine's own counters for progress: a hostile client's
    gfx fill (its own memory, a legal packet) longer than two job timeouts had an innocent
    client's SDMA job reset with TIMEOUT, its context guilty, a hang counted towards its
    file's ban. The CP's DMA bytes moving now count for an SDMA ring neither polling nor
    stopped by an error. A 128 KiB fill (about 16,000 cycles on a 64-bit bus) against a job
    timeout of 3,000: as a 1 MiB fill against 20,000."""
    from kmd_model import regs
    kmd = kmd_model.bind(dev, job_timeout=3_000)
    good, evil = Client(), Client()
    fill = 128 << 10
    ebo, gbo = evil.bo(fill + 0x1000), good.bo()
    e = evil.submit(evil.ib(ebo, pm4.dma_data(ebo.addr + 0x1000, 0x5A5A5A5A, fill, src_sel="DATA", cp_sync=1)
                            + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    for _ in range(100):  # the CP is in the fill (the model's was at once)
        if kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN) or ebo.u32[0] == 0xE71:
            break
        kmd.dev.delay(50)
    a = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x800, [0xA1])))
    b = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x804, [0xB2]), 0x100))
    assert good.wait(a, 1_000_000) and good.wait(b, 1_000_000)
    assert (gbo.u32[0x200], gbo.u32[0x201]) == (0xA1, 0xB2)
    assert evil.wait(e, 1_000_000) and ebo.u32[0] == 0xE71 and ebo.u32[(fill + 0xFFC) // 4] == 0x5A5A5A5A
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), \
        (kmd.stats, kmd.recovery_log)
    q = query(good)
    assert q.reset_status == ResetStatus.NO_RESET and q.ring_status == {} and good.f.hangs == 0


def check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck(dev):
    """Queue 1 outranks queue 0 and takes the CP back after one packet of queue 0's, but a
    switch waits until the DMA engine has answered every transfer queue 0 queued
    (docs/hardware.md, "CP hardware queues"): DMA_DATAs without CP_SYNC keep queue 1 off
    the CP for as long as their transfers run. An innocent HIGH job in a poll whose flag its
    client set meanwhile was parked there, its rptr, fetched dwords and poll reads still
    while queue 0's transfers moved the DMA counters, and the job timer took it for stuck
    (the parked rule was queue 0's alone): reset with TIMEOUT, its context guilty, a hang
    towards its file's ban (Verilator: four 128 KiB fills against a job timeout of 3,000,
    "job 0x1 timed out on gfx_high: no progress for 3030 cycles, CP queue 1 polling in a
    WAIT_REG_MEM"). Queue 1 may be parked too now, on the same proof: no poll read of its own
    since the last look, and a poll of its job holding."""
    from kmd_model import regs
    kmd = kmd_model.bind(dev, job_timeout=3_000, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    good, evil = Client(), Client()
    hi = new_ctx(good, CtxPriority.HIGH)
    fill = 128 << 10
    gbo, ebo = good.bo(0x2000), evil.bo(4 * fill + 0x2000)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x1000, 1, 1, "EQ")
                            + pm4.write_data(gbo.addr + 0x800, [0x600D])), ctx=hi)
    kmd.dev.delay(200)  # (its poll failed: queue 1 yields the CP)
    e = evil.submit(evil.ib(ebo, sum((pm4.dma_data(ebo.addr + 0x2000 + k * fill, 0x5A5A5A5A, fill, src_sel="DATA")
                                      for k in range(4)), []) + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    for _ in range(400):  # queue 0's transfers under way (the model's were at once)
        if kmd.mmio.read(regs.PERF_DMA_BYTES_WRITTEN) or ebo.u32[0] == 0xE71:
            break
        kmd.dev.delay(20)
    gbo.u32[0x400] = 1  # the flag, set by its client
    assert good.wait(g, 1_000_000, ctx=hi) and gbo.u32[0x200] == 0x600D
    assert evil.wait(e, 1_000_000) and ebo.u32[0] == 0xE71 and ebo.u32[(4 * fill + 0x1FFC) // 4] == 0x5A5A5A5A
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), \
        (kmd.stats, kmd.recovery_log)
    assert query(good, hi).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0


def check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck(dev, fills: int = 8, fill: int = 16 << 10):
    """An innocent client's job on queue 0 polls a flag (WAIT_REG_MEM); a client of HIGH
    priority (any client by default) keeps queue 1 busy with fills longer than the job
    timeout. The flag is set meanwhile: the poll holds, but on the RTL queue 0 is parked
    (STATUS.WAITING) until it gets the CP to poll again, which queue 1, of higher priority,
    keeps. The job timer took the parked queue for stuck in its poll (its own counters still,
    the shared ones moved by the other queue): the innocent job was reset with TIMEOUT, its
    context guilty, a hang counted towards its file's ban (file_ban_after_hangs). Now a
    waiting queue whose poll holds in memory, the other CP queue having run since the last
    look, is waiting for the CP, not stuck."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000, cap_sys_nice=True)
    good, evil = Client(), Client()
    dst = 0x5000 + -(-(len(pm4.dma_data(0, 0, 4)) * fills + 0x40) * 4 // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + max(fill, 0x1000))
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    f = _the_flood(evil, ebo, ehi, dst, fills, fill)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert evil.wait(f, 2_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + fills - 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0

def check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck(
        dev, fills: int = 8, fill: int = 16 << 10):
    """An innocent client's job on queue 0 polls a flag (A), then a second one (B) that it is
    given only later (once the flood is over); a HIGH client floods queue 1 meanwhile, with
    fills longer than the job timeout. A is set during the flood: queue 0 is parked in it
    (on the RTL, and ParkedPolls) until queue 1 lets it poll again. The timer took the job
    for stuck because B did not hold in memory (which poll the queue is in is not known):
    the innocent job was reset with TIMEOUT, its context guilty, a hang counted towards its
    file's ban. Now a waiting queue that the other CP queue kept off the CP since the last
    look (a job in its ring all along, running at the look) is not stuck while any poll of
    its job holds: it may be parked in that one."""
    t_out = 3_000
    kmd = kmd_model.bind(dev, job_timeout=t_out, hw_timeout=5_000, cap_sys_nice=True)
    good, evil = Client(), Client()
    dst = 0x5000 + -(-(len(pm4.dma_data(0, 0, 4)) * fills + 0x40) * 4 // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + max(fill, 0x1000))
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.wait_reg_mem(gbo.addr + 0x3004, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    f = _the_flood(evil, ebo, ehi, dst, fills, fill)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)  # (A holds from then on)
    t0 = kmd.dev.now()
    assert evil.wait(f, 2_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + fills - 1
    parked = kmd.dev.now() - t0
    assert not gjob.finished and kmd.stats["job_timeouts"] == 0, kmd.recovery_log
    gbo.u32[0x3004 // 4] = 1  # B, once the flood is over
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0
    return parked / t_out  # (job timeouts the flood lasted after A was set)

def check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone(
        dev, jobs: int = 4, fills: int = 1, fill: int = 16 << 10):
    """As check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck, the HIGH
    client's flood on queue 1 now `jobs` jobs, each starting with a WAIT_REG_MEM that holds at
    once (its flag set), then fills longer than the job timeout. The job timer took the
    innocent job, parked in its released poll, for stuck: a poll of queue 1 that fails yields
    the CP, so a WAIT_REG_MEM started on the CP since the last look (PERF_PACKETS) meant queue 0
    may have had its turn, and one that holds at once yields nothing (the innocent job reset
    with TIMEOUT, its context guilty, a hang towards its file's ban: what any client, HIGH by
    default, could do to another). The timer now asks the queue's own poll reads
    (PERF_Q0_POLLS): still since the last look, it had no turn."""
    kmd = kmd_model.bind(dev, job_timeout=3_000, hw_timeout=5_000, cap_sys_nice=True)
    good, evil = Client(), Client()
    per_job = len(pm4.wait_reg_mem(0, 1, 1, "EQ")) + len(pm4.dma_data(0, 0, 4)) * fills
    ib_bytes = -(-per_job * 4 // 0x100) * 0x100
    dst = 0x5000 + -(-(ib_bytes * jobs) // 0x1000) * 0x1000
    gbo, ebo = good.bo(0x4000), evil.bo(dst + fill)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    seqnos = []
    for j in range(jobs):  # (the first job's poll is what starts the flood; the others' hold at once)
        words = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
        for k in range(fills):
            words += pm4.dma_data(ebo.addr + dst, 0x0F100D00 + j * fills + k, fill, src_sel="DATA", cp_sync=1)
        seqnos.append(evil.submit(evil.ib(ebo, words, 0x5000 + j * ib_bytes), ctx=ehi))
    waits = kmd.mmio.read(regs.PERF_PACKETS, pm4_spec.WAIT_REG_MEM.index)
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert evil.wait(seqnos[-1], 4_000_000, ehi) and ebo.u32[(dst + fill) // 4 - 1] == 0x0F100D00 + jobs * fills - 1
    assert kmd.mmio.read(regs.PERF_PACKETS, pm4_spec.WAIT_REG_MEM.index) - waits >= jobs - 1, "the flood's later polls started"
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0

CHECKS = [check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck,
          check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck,
          check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck,
          check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck,
          check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck():
    """The check on a model whose CP runs a packet a cycle and whose queue 0 polls again only
    when queue 1 lets it, as the RTL's: the flood some 40,000 cycles, the job timeout 3,000."""
    check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck(ParkedPolls(), 40_000, 64)


def test_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone():
    """The check on the model that parks as the RTL does (a packet a cycle): four HIGH jobs of
    10,000 fills each, each job's poll holding at once, the job timeout 3,000."""
    check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone(ParkedPolls(), 4, 10_000, 64)


def test_an_unchecked_job_starved_by_queue_1_is_not_reset_for_the_time_it_could_not_run():
    """With cs_check off, an innocent client's one-packet job on queue 0 waits behind a HIGH
    client's jobs that keep queue 1 (which outranks it) busy longer than the time rule,
    unchecked_job_timeouts job timeouts. The time rule counted from when the job reached the
    head of its ring: the job, which had not run a packet, was reset as "ran N cycles
    unchecked (cs_check off), more than 4 job timeouts", its context guilty and a hang counted
    towards its file's ban. The checked path takes such a job as waiting for the CP, not
    stuck (its timer restarts); the time rule now counts only the intervals between the
    timer's looks in which the queue was served, so the job runs once the flood ends."""
    t_out, timeouts, jobs, fills = 2_000, 4, 24, 1_000
    kmd = kmd_model.bind(OnePacketACycle(), cs_check=False, job_timeout=t_out, hw_timeout=5_000,
                         unchecked_job_timeouts=timeouts, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    good, busy = Client(), Client()
    gbo, ebo = good.bo(0x1000), busy.bo(0x10000 * jobs)
    hi = new_ctx(busy, CtxPriority.HIGH)
    floods = []
    for j in range(jobs):  # (each shorter than the time rule: they are unchecked too)
        words = pm4.wait_reg_mem(ebo.addr + 0x7000, 1, 1, "EQ", poll_interval=4) if j == 0 else []
        words += sum((pm4.dma_data(ebo.addr + 0x8000 + 0x10000 * j, k, 64, src_sel="DATA") for k in range(fills)), [])
        floods.append(busy.submit(busy.ib(ebo, words, 0x10000 * j), ctx=hi))
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x7000 // 4] = 1  # the flood starts
    while kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start < 14:
        kmd.dev.delay(16)
    t0 = kmd.dev.now()
    g = good.submit(good.ib(gbo, pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert kmd.dev.now() - t0 > 2 * timeouts * t_out  # (starved twice the time rule and more)
    for f in floods:
        assert busy.wait(f, 2_000_000, hi)
    assert ebo.u32[(0x8000 + 0x10000 * (jobs - 1)) // 4 + 15] == fills - 1
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0


def test_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck():
    """The check on a model whose queue 0 polls again only when queue 1 lets it, as the RTL's:
    the flood lasts job timeouts after A is set, queue 0 parked in A all along."""
    assert check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck(
        ParkedPolls(), 40_000, 64) > 3


def _the_flood(evil, ebo, ehi, dst: int, fills: int, fill: int) -> int:
    """A HIGH job that waits on ebo's flag at 0x3000, then fills `fills` times `fill` bytes
    at ebo + `dst` (CP_SYNC above 64 bytes): its seqno."""
    flood = pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4)
    for k in range(fills):
        flood += pm4.dma_data(ebo.addr + dst, 0x0F100D00 + k, fill, src_sel="DATA", cp_sync=int(fill > 64))
    return evil.submit(evil.ib(ebo, flood, 0x5000), ctx=ehi)


def _release_the_flood_then_the_poll(kmd, ebo, gbo) -> None:
    """The victim's job polls, the timer's first look to come; then the flood on queue 1
    (waiting on ebo's flag at 0x3000) starts, and once it has fetched a few dwords the
    victim's poll (gbo's flag at 0x3000) holds from then on."""
    kmd.dev.delay(1_000)
    start = kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED)
    ebo.u32[0x3000 // 4] = 1  # the flood starts
    deadline = kmd.dev.now() + 100_000
    while kmd.mmio.read(regs.PERF_Q1_DWORDS_FETCHED) - start < 14 and kmd.dev.now() < deadline:
        kmd.dev.delay(16)
    gbo.u32[0x3000 // 4] = 1  # the poll holds from now on


def test_an_unchecked_job_parked_behind_queue_1_s_jobs_is_not_reset_for_the_time_it_was_parked():
    """The unchecked time rule (head_ran) leaves out the intervals in which the job's queue
    was parked in a poll that holds while queue 1 held the CP (_progressed: moved = unserved
    = True): an innocent job with the checker off, its poll released early in a HIGH
    client's flood of five jobs of 8,000 cycles each (each well under the rule's 4 job
    timeouts, the flood some 40,000 cycles, 13 of them), runs to its end, nobody reset."""
    kmd = kmd_model.bind(ParkedPolls(), job_timeout=3_000, hw_timeout=5_000, cs_check=False,
                         unchecked_job_timeouts=4, cap_sys_nice=True)  # (it asks for HIGH: CAP_SYS_NICE)
    good, evil = Client(), Client()
    fills, jobs = 8_000, 5
    gbo, ebo = good.bo(0x4000), evil.bo(0x80_000)
    ehi = new_ctx(evil, CtxPriority.HIGH)
    g = good.submit(good.ib(gbo, pm4.wait_reg_mem(gbo.addr + 0x3000, 1, 1, "EQ", poll_interval=16)
                            + pm4.write_data(gbo.addr + 0x10, [0x600D]), 0x100))
    gjob = kmd.sched.pending[0]
    fill = []
    for k in range(fills):
        fill += pm4.dma_data(ebo.addr + 0x7F_000, 0x0F100D00 + k, 64, src_sel="DATA")
    first = evil.ib(ebo, pm4.wait_reg_mem(ebo.addr + 0x3000, 1, 1, "EQ", poll_interval=4) + fill, 0x5000)
    more = evil.ib(ebo, fill, 0x40_000)  # (no poll: one would yield the CP)
    fs = [evil.submit(first, ctx=ehi)] + [evil.submit(more, ctx=ehi) for _ in range(jobs - 1)]
    _release_the_flood_then_the_poll(kmd, ebo, gbo)
    assert good.wait(g, 2_000_000) and gbo.u32[4] == 0x600D and gjob.runs == 1, kmd.recovery_log
    assert all(evil.wait(f, 2_000_000, ehi) for f in fs)
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), kmd.recovery_log
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0
