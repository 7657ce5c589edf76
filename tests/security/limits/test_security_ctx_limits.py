"""A hostile context's own limits (round 3 of the hostile program): what one context can make
the driver spend, and run, beyond the checker.

- A CHAIN to itself with the CS checker off: the reference model ran it inside the doorbell's
  MMIO write for ever (the process hung). Its CP now runs a bounded burst of packets at an
  instant and the rest as time passes, so the job timer resets the loop, as on the RTL.
  The timeout's diagnosis then followed the loop's CHAIN 524,288 times (3.3 s, the lock held):
  it reads each IB once now.
- An SDMA job of POLL_REGMEMs that each give up inside a job timeout moved the engine at
  every look of the timer, for as long as it had polls (the SDMA ring has no checker, and
  the time rule skipped it): it is reset after `unchecked_job_timeouts` job timeouts now.
- Jobs queued without limit: a context could queue any number of jobs on a ring (about
  1.4 KB each; with the checker off nothing else bounds them). As amdgpu's context keeps
  `amdgpu_sched_jobs` (32) fences per entity and a CS waits for the one in its slot
  (amdgpu_ctx_wait_prev_fence), a CS with `KmdParams.sched_jobs` unfinished jobs of its
  context on that ring waits for the oldest; a hang there ends by its reset (ECANCELED).
- HIGH priority for everyone: every file could ask CTX ALLOC for HIGH. No file has
  CAP_SYS_NICE by default now (`KmdParams.cap_sys_nice` False): HIGH is EACCES, as amdgpu's
  amdgpu_ctx_priority_permit answers a process without it. What asks for HIGH opts in: a
  file opened with `open_render_node(cap_sys_nice=True)`, or a driver bound with
  `cap_sys_nice=True` (`gpucosim run --kmd cap_sys_nice=1`).
"""

from __future__ import annotations

import errno
import re
import threading

import numpy as np
import pytest

import kmd_model
from kmd_model import regs
from kmd_model.uapi import CsChunkIb, CtxArgs, CtxOp, CtxPriority, KmdError, Request
from spec import pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client
from tests.kmd_sched.queues import test_kmd_queues_stuck
from tests.kmd_sched.sched_helpers import sdma_ib


def _in_thread(fn, timeout: float = 60) -> tuple[bool, list]:
    """Run `fn` in a daemon thread: (hung, [its result or exception])."""
    out: list = []

    def run() -> None:
        try:
            out.append(fn())
        except Exception as e:  # noqa: BLE001 (the test looks at it)
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout=timeout)
    return t.is_alive(), out


# ------------------------------------------------------------------------------ a loop on the model

def test_a_chain_to_itself_with_the_checker_off_is_a_timeout_reset_on_the_model_as_on_the_rtl():
    dev = RefModel()
    kmd = kmd_model.bind(dev, job_timeout=5_000, fallback_poll=1_000, cs_check=False, unchecked_job_timeouts=4)
    h = Client()
    hbo = h.bo(0x1000)
    loop = h.ib(hbo, pm4.indirect_buffer(hbo.addr, 8, chain=1))  # (padded to 8: the CHAIN is the IB's first packet)
    hung, out = _in_thread(lambda: h.submit(loop))
    if hung:  # end the loop (the CP reads the client's own IB), so the thread ends
        hbo.u32[:8] = pm4.pad(8)
    assert not hung, "the doorbell's MMIO write never returned"
    seq = out[0]
    assert not regs.STATUS.IDLE.get(dev.mmio_read32(regs.STATUS.ADDR))  # busy in its loop
    with pytest.raises(KmdError) as ei:
        h.wait(seq, 1_000_000)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert "cycles unchecked (cs_check off), more than 4 job timeouts" in e.message
    assert kmd.stats["job_timeouts"] == 1
    v = Client()  # an innocent client's job then completes
    vbo = v.bo(0x1000)
    assert v.run(vbo, pm4.write_data(vbo.addr + 0x100, [5])) and vbo.u32[0x40] == 5


@pytest.mark.parametrize("job", ["chain_loop", "honest_long"])
def test_an_unchecked_job_may_fetch_twice_max_job_dw_then_is_reset(job):
    """With the checker off a CHAIN loop ran `unchecked_job_timeouts` job timeouts (64) before
    its reset: 32,063,948 cycles with the default KmdParams, 120.7 s on the model. It is now
    reset once the CP has fetched more than 2 * max_job_dw dwords for it (1,562,972 cycles,
    8.1 s), what no job the checker accepts fetches: an honest job of max_job_dw dwords, one
    1-dword NOP at a time over more than 16 job timeouts, runs to its end. (Small max_job_dw and
    job_timeout here, so the test is quick, and the model's CP runs 64 packets at an instant
    at most, not 65,536, so the honest job takes time; the time rule is set far off.)"""
    n = 1 << 16
    kmd = kmd_model.bind(RefModel(cp_burst=64), cs_check=False, max_job_dw=n, job_timeout=2_000, fallback_poll=1_000,
                         unchecked_job_timeouts=1 << 10)
    h = Client()
    hbo = h.bo(4 * n + 0x1000)
    if job == "chain_loop":
        t0 = kmd.dev.now()
        seq = h.submit(h.ib(hbo, pm4.indirect_buffer(hbo.addr, 8, chain=1)))
        with pytest.raises(KmdError) as ei:
            h.wait(seq, 1 << 30)
        e = ei.value
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
        assert re.search(r"job 0x1 timed out on gfx: fetched \d+ dwords unchecked \(cs_check off\), more than twice "
                         rf"max_job_dw \({2 * n}\)", e.message), e.message
        assert kmd.dev.now() - t0 < (1 << 10) * 2_000 // 4  # long before the time rule's 2,048,000
    else:
        hbo.u32[:n] = pm4.pad(1) * (n - 8) + pm4.write_data(hbo.addr + 4 * n + 0x100, [7]) + pm4.pad(3)
        t0 = kmd.dev.now()
        seq = h.submit(CsChunkIb(n, handle=hbo.handle))
        assert h.wait(seq, 1 << 30) and hbo.u32[n + 0x40] == 7
        assert kmd.dev.now() - t0 > 16 * 2_000 and kmd.stats["job_timeouts"] == 0


@pytest.mark.parametrize("limit", [8, 64])
def test_a_checked_job_that_keeps_moving_is_reset_after_checked_job_timeouts(limit):
    """The checker bounds a job's dwords, not its time (a DMA_DATA of 7 dwords may move 1 MiB:
    tests/kmd_sched/queues/test_kmd_queues_stuck.py check_a_checked_job_of_long_fills_is_reset_by_the_time_rule,
    on the RTL): a checked job whose queue moves at every look of the timer ran to its end
    however long that took. It is reset once it has run `checked_job_timeouts` job timeouts;
    within them it runs to its end. Here a checked job of 2^16 one-dword NOPs on a model whose
    CP runs 64 packets at an instant (more than 16 job timeouts of 2,000 cycles)."""
    n = 1 << 16
    kmd = kmd_model.bind(RefModel(cp_burst=64), max_job_dw=n, job_timeout=2_000, fallback_poll=1_000,
                         checked_job_timeouts=limit)
    h = Client()
    hbo = h.bo(4 * n + 0x1000)
    hbo.u32[:n] = pm4.pad(1) * (n - 8) + pm4.write_data(hbo.addr + 4 * n + 0x100, [7]) + pm4.pad(3)
    t0 = kmd.dev.now()
    seq = h.submit(CsChunkIb(n, handle=hbo.handle))
    if limit == 64:
        assert h.wait(seq, 1 << 30) and hbo.u32[n + 0x40] == 7
        assert kmd.dev.now() - t0 > 16 * 2_000 and kmd.stats["job_timeouts"] == 0
        return
    with pytest.raises(KmdError) as ei:
        h.wait(seq, 1 << 30)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT"
    assert re.search(r"job 0x1 timed out on gfx: ran \d+ cycles, more than 8 job timeouts \(checked_job_timeouts: "
                     r"the checker bounds a job's dwords, not the bytes it moves\)", e.message), e.message
    assert hbo.u32[n + 0x40] == 0 and 8 * 2_000 <= kmd.dev.now() - t0 < 11 * 2_000


def test_an_unchecked_loop_is_reset_by_its_own_dwords_while_the_other_cp_queue_works():
    """The check of tests/kmd_sched/queues/test_kmd_queues_stuck.py (which runs on the RTL too), on a model
    that runs 64 packets at an instant, not 65,536, so the loop takes time to reach its limit."""
    test_kmd_queues_stuck.check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works(
        RefModel(cp_burst=64))


def test_the_timeout_diagnosis_reads_each_ib_of_a_chain_loop_once():
    """timedout_job looks for the WAIT_REG_MEM a job is stuck in: it followed the loop's CHAIN
    until its 4 Mi-dword budget ran out, 524,288 reads of the same 8 dwords (3.3 s with
    the driver's lock held, at every timeout of such a job)."""
    from kmd_model.reset.stuck import find_unsatisfied_wait
    mem32 = np.zeros(0x1000, dtype="<u4")
    a, b = 0x100, 0x200  # A calls B, then CHAINs to itself; B CHAINs to itself
    mem32[a // 4: a // 4 + 8] = pm4.indirect_buffer(b, 12) + pm4.indirect_buffer(a, 8, chain=1)
    mem32[b // 4: b // 4 + 12] = pm4.pad(8) + pm4.indirect_buffer(b, 12, chain=1)
    reads = []

    def read(va: int, n: int):
        reads.append(va)
        return mem32[va // 4: va // 4 + n]
    assert find_unsatisfied_wait(mem32, [(a, 8)], 2, read=read) is None
    assert reads == [a, b]
    mem32[b // 4: b // 4 + 8] = pm4.wait_reg_mem(0x800, 1, 1, "EQ") + pm4.pad(1)  # and now it waits in B
    assert find_unsatisfied_wait(mem32, [(a, 8)], 2).startswith("WAIT_REG_MEM at IB2+0x0 (0x200): *0x800")


def _diagnosis_decode_steps(calls: int) -> tuple[int, str]:
    """Line events in spec/pm4.py (the packet decoder) while the timeout's diagnosis walks a job
    whose IB1 calls the same IB2 `calls` times, then waits in a WAIT_REG_MEM that does not hold."""
    from kmd_model.reset.stuck import find_unsatisfied_wait
    from tests.kmd_sched.test_kmd_hostile import _lines_in
    ib2, ib1 = 0x100, 0x1000
    mem32 = np.zeros((ib1 + 16 * calls + 0x100) // 4, dtype="<u4")
    mem32[ib2 // 4: ib2 // 4 + 8] = pm4.pad(8)
    words = [w for _ in range(calls) for w in pm4.indirect_buffer(ib2, 8)] + pm4.wait_reg_mem(0x80, 1, 1, "EQ")
    mem32[ib1 // 4: ib1 // 4 + len(words)] = words
    steps, (hit,) = _lines_in(lambda: find_unsatisfied_wait(mem32, [(ib1, len(words))], 2,
                                                            translate_many=lambda va: va),
                              "spec/pm4.py")
    return steps, hit


def test_the_timeout_diagnosis_decodes_a_call_repeated_in_an_ib_once():
    """A hung job's IB1 of a million dwords may hold 250,000 calls of the same IB2: the
    diagnosis (the driver's lock held, at each of its timeouts) decoded every one of those
    INDIRECT_BUFFERs in Python. The same dwords decode the same: each distinct call is decoded once."""
    few, hit_few = _diagnosis_decode_steps(4)
    many, hit_many = _diagnosis_decode_steps(4_000)
    assert hit_few.startswith("WAIT_REG_MEM at IB+0x40 (0x1040): *0x80") and hit_many.startswith(
        "WAIT_REG_MEM at IB+0xfa00 (0x10a00): *0x80"), (hit_few, hit_many)
    assert many < few + 50, (few, many)


def test_an_sdma_job_of_polls_that_give_up_one_by_one_is_reset_after_the_time_rule():
    """The SDMA ring has no checker, and its POLL_REGMEM gives up after RETRY_COUNT polls and
    moves on: a job of polls that each give up well inside a job timeout moves the engine's
    fetch counter at every look, so the timer restarted for ever (no dword rule bounds an
    SDMA job, and the time rule skipped the SDMA ring): 174,762 such polls fit one IB, about
    1,400 job timeouts each IB, and every other client's copy waited behind it (its WAIT_CS
    ran out, ETIME). Now an SDMA job runs `unchecked_job_timeouts` job timeouts at most."""
    jt = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=jt, fallback_poll=1_000, unchecked_job_timeouts=8)
    h, victim = Client(), Client()
    hbo, vbo = h.bo(0x10000), victim.bo(0x1000)
    # each poll waits for a value nobody writes and gives up after 16 x 160 cycles
    words = [w for _ in range(2_000) for w in sdma.poll_regmem(hbo.addr + 0xF000, 1, 0xFFFF_FFFF, "EQ",
                                                               interval=10, retry_count=15)]
    seq = h.submit(sdma_ib(hbo, words))
    t0 = kmd.dev.now()
    vseq = victim.submit(sdma_ib(vbo, sdma.write_linear(vbo.addr + 0x100, [5])))
    assert victim.wait(vseq, 100 * jt) and vbo.u32[0x40] == 5  # (it waited 2,000 x 2,560 cycles)
    assert 8 * jt <= kmd.dev.now() - t0 < 10 * jt  # the limit, and a timer period more at most
    with pytest.raises(KmdError) as ei:
        h.wait(seq)
    e = ei.value
    assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT", e
    m = re.fullmatch(r"WAIT_CS: job 0x1 timed out on sdma0: ran (\d+) cycles \(the SDMA ring is not checked\), "
                     r"more than 8 job timeouts, .*", e.message)
    assert m and 8 * jt <= int(m.group(1)) < 10 * jt, e.message  # (the job's own cycles, from the head of its ring)
    assert kmd.stats["job_timeouts"] == 1
    assert victim.run(vbo, pm4.write_data(vbo.addr + 0x200, [6])) and vbo.u32[0x80] == 6  # the driver runs on


def test_the_sdma_time_rule_counts_a_job_s_own_cycles_not_the_device_s():
    """The time rule bounds an SDMA job by the cycles since it reached the head of its ring,
    whatever the device's clock reads: an honest job of polls that give up, some 4 job
    timeouts of progress against a limit of 8, started after the device has been up for 40
    job timeouts, runs to its end (counted from the device's start, or with the start added
    instead of taken away, it would be reset at the timer's first look)."""
    jt = 5_000
    kmd = kmd_model.bind(RefModel(), job_timeout=jt, fallback_poll=1_000, unchecked_job_timeouts=8)
    c = Client()
    bo = c.bo(0x10000)
    kmd.dev.delay(40 * jt)
    words = [w for _ in range(8) for w in sdma.poll_regmem(bo.addr + 0xF000, 1, 0xFFFF_FFFF, "EQ",
                                                           interval=10, retry_count=15)]
    t0 = kmd.dev.now()
    seq = c.submit(sdma_ib(bo, words + sdma.fence(bo.addr + 0x100, 9)))
    assert c.wait(seq, 100 * jt) and bo.u32[0x40] == 9
    assert 3 * jt <= kmd.dev.now() - t0 < 8 * jt  # (it ran several job timeouts: the rule's looks came)
    assert kmd.stats["job_timeouts"] == 0 and kmd.recovery_log == []



def test_an_sdma_job_of_polls_that_give_up_does_not_flood_the_log(caplog):
    """Each POLL_REGMEM that gave up was one warning: a job of 2,000 polls each giving up after
    a cycle logged 2,000 lines. At most POLL_TIMEOUT_LOGS (10) a job timeout now, then one line
    says how many more were not logged."""
    import logging
    kmd = kmd_model.bind(RefModel(), job_timeout=1 << 30)
    c = Client()
    bo = c.bo(0x10000)
    words = [w for _ in range(2_000) for w in sdma.poll_regmem(bo.addr + 0xF000, 1, 0xFFFF_FFFF, "EQ",
                                                               interval=0, retry_count=1)]
    with caplog.at_level(logging.WARNING, logger="gpucosim.kmd"):
        assert c.wait(c.submit(sdma_ib(bo, words)), 1 << 20)
        kmd.params.job_timeout = 1  # (the next window: the count of those not logged is said)
        kmd.on_sdma_poll_timeout({"DATA0": 0, "DATA1": 0, "DATA2": 0})
    lines = [r.getMessage() for r in caplog.records if "POLL_REGMEM" in r.getMessage()]
    assert kmd.ih.by_source["SDMA_POLL_TIMEOUT"] == 2_000
    assert len(lines) == 10 + 2, (len(lines), lines[:3])
    assert lines[-2] == "sdma0: 1990 more POLL_REGMEMs gave up (not logged)"


def test_faults_made_on_purpose_do_not_flood_the_log(caplog):
    """A fault is reset at once and costs its client only the job, and no checker looks at
    an SDMA IB: a client whose SDMA jobs each wrote an unmapped address, a new context every
    `ban_after_hangs` faults (a file is banned for timeouts only), had the driver log 3 to 4
    lines a fault ("sdma0 error", "context N of fd M is guilty", "sdma0 queue reset done",
    "context N is banned"): 60 faults, some 200 lines in a few thousand cycles, without end.
    Each kind is now rate limited as amdgpu's dev_err_ratelimited: at most ERROR_LOGS (10) a
    job timeout, then one line says how many were left out; the counters see every one."""
    import logging
    from kmd_model.uapi import WaitCsArgs
    kmd = kmd_model.bind(RefModel())
    c = Client()
    bo = c.bo(0x1000)
    n = 60
    with caplog.at_level(logging.WARNING, logger="gpucosim.kmd"):
        ctx = None
        for i in range(n):
            if i % kmd.params.ban_after_hangs == 0:
                ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
            seq = c.io(Request.CS, kmd_model.uapi.CsArgs(ctx, [sdma_ib(bo, sdma.write_linear(0x3000_0000, [1]))])).seq
            with pytest.raises(KmdError) as e:
                c.io(Request.WAIT_CS, WaitCsArgs(ctx, seq, 1_000_000))
            assert e.value.errno == errno.ECANCELED
        assert kmd.dev.now() < kmd.params.job_timeout  # all inside one job timeout
        lines = [r.getMessage() for r in caplog.records if r.name == "gpucosim.kmd"]
        assert kmd.stats["sdma_errors"] == n
        errors = [x for x in lines if x.startswith("sdma0 error: ")]
        assert len(errors) == 10 and len(lines) <= 4 * 10, (len(lines), lines[:5])
        kmd.params.job_timeout = 1  # (the next window: the count of those not logged is said)
        ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id
        seq = c.io(Request.CS, kmd_model.uapi.CsArgs(ctx, [sdma_ib(bo, sdma.write_linear(0x3000_0000, [1]))])).seq
        with pytest.raises(KmdError):
            c.io(Request.WAIT_CS, WaitCsArgs(ctx, seq, 1_000_000))
    lines = [r.getMessage() for r in caplog.records if r.name == "gpucosim.kmd"]
    assert f"{n - 10} more 'error' lines of fd {c.f.fd} not logged (at most 10 a job timeout)" in lines
    assert lines[-1].startswith("sdma0 queue reset done")


def test_a_client_flooding_the_log_with_faults_does_not_hide_another_clients_lines(caplog):
    """The recovery's rate limit counts per file: a hostile client's 30 SDMA faults inside one
    job timeout have 10 of its lines of a kind logged, and an innocent client's fault after
    them still has its error and guilty lines logged. With one count for every client the
    flood had used it up: the innocent client's fault was not logged at all, and the line
    that came later said only how many lines of the kind had been left out, not whose."""
    import logging
    from kmd_model.uapi import WaitCsArgs
    kmd = kmd_model.bind(RefModel())
    bad, good = Client(), Client()
    bbo, gbo = bad.bo(0x1000), good.bo(0x1000)

    def fault(c, bo):
        ctx = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC)).ctx_id  # (a new context each time: none is banned)
        seq = c.io(Request.CS, kmd_model.uapi.CsArgs(ctx, [sdma_ib(bo, sdma.write_linear(0x3000_0000, [1]))])).seq
        with pytest.raises(KmdError) as e:
            c.io(Request.WAIT_CS, WaitCsArgs(ctx, seq, 1_000_000))
        assert e.value.errno == errno.ECANCELED
        return ctx

    with caplog.at_level(logging.WARNING, logger="gpucosim.kmd"):
        for _ in range(30):
            fault(bad, bbo)
        ctx = fault(good, gbo)
        assert kmd.dev.now() < kmd.params.job_timeout  # all inside one job timeout
    lines = [r.getMessage() for r in caplog.records if r.name == "gpucosim.kmd"]
    guilty = [x for x in lines if re.fullmatch(r"context \d+ of fd \d+ is guilty: .*", x)]
    assert len([x for x in guilty if f" of fd {bad.f.fd} " in x]) == 10
    assert f"context {ctx} of fd {good.f.fd} is guilty: 1 job(s) cancelled" in guilty
    assert len([x for x in lines if x.startswith("sdma0 error: ")]) == 11
    assert kmd.stats["sdma_errors"] == 31


# ------------------------------------------------------------------------------ jobs queued per context

def _held(c: Client, bo, n: int) -> list[int]:
    """A job held in a WAIT_REG_MEM on bo+0x800 (nobody sets it), then n - 1 small jobs behind it."""
    seqs = [c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))]
    for i in range(1, n):
        seqs.append(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x1000 + 4 * i, [i]), 0x2000 + 0x20 * i)))
    return seqs


@pytest.mark.parametrize("reset", ["queue", "full"])
@pytest.mark.parametrize("cs_check", [True, False])
def test_a_context_with_sched_jobs_unfinished_on_a_ring_waits_in_cs_for_its_oldest(cs_check, reset):
    """33 CS behind a held job: the 33rd waited for the oldest, a hang, until its reset. After
    the full reset (full: ring 0's recovery as on a CP without CP_QUEUE_RESET) it is the
    guilty context's ECANCELED; after queue 0's reset the context's 32 gfx jobs are
    cancelled and the 33rd is taken and runs. (It was queued at once, as were 10,000 more.)"""
    from tests.kmd_sched.sched_helpers import full_reset_for_ring_0
    kmd = kmd_model.bind(RefModel(), job_timeout=5_000, fallback_poll=1_000, cs_check=cs_check)
    if reset == "full":
        full_reset_for_ring_0(kmd)
    h = Client()
    hbo = h.bo(0x4000)
    t0 = kmd.dev.now()
    seqs = _held(h, hbo, 32)
    assert kmd.stats["job_timeouts"] == 0 and len(h.f.contexts[h.ctx].jobs) == 32 and kmd.dev.now() - t0 < 5_000
    sseq = h.submit(sdma_ib(hbo, sdma.write_linear(hbo.addr + 0x3000, [7]), 0x3800))  # another ring: its own 32
    assert h.wait(sseq) and hbo.u32[0x3000 // 4] == 7 and kmd.stats["job_timeouts"] == 0
    if reset == "full":
        with pytest.raises(KmdError) as ei:
            h.submit(h.ib(hbo, pm4.write_data(hbo.addr + 0x3F00, [33]), 0x1F00))
        e = ei.value
        assert e.errno == errno.ECANCELED and e.info.code == "TIMEOUT" and e.info.seq == seqs[0]
        assert e.message.startswith(f"CS: context {h.ctx} was reset: job 0x1 timed out")
        assert hbo.u32[0x3F00 // 4] == 0  # the refused CS did not run
    else:
        seq = h.submit(h.ib(hbo, pm4.write_data(hbo.addr + 0x3F00, [33]), 0x1F00))
        assert seq == 34 and h.wait(seq) and hbo.u32[0x3F00 // 4] == 33  # (33: the SDMA job's)
        for s in (seqs[0], seqs[-1]):
            with pytest.raises(KmdError) as ei:
                h.wait(s)
            assert ei.value.errno == errno.ECANCELED and ei.value.info.seq == seqs[0]
    assert kmd.stats["job_timeouts"] == 1 and kmd.dev.now() - t0 >= 5_000
    assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == ((1, 0) if reset == "queue" else (0, 1))
    v = Client()  # and the driver runs on
    vbo = v.bo(0x1000)
    assert v.run(vbo, pm4.write_data(vbo.addr + 0x100, [5])) and vbo.u32[0x40] == 5


def test_a_cs_past_the_bound_runs_once_the_oldest_job_of_its_context_on_that_ring_is_done():
    kmd = kmd_model.bind(RefModel(), job_timeout=50_000, fallback_poll=1_000, sched_jobs=4)
    c = Client()
    bo = c.bo(0x4000)
    seqs = _held(c, bo, 4)
    ctx = c.f.contexts[c.ctx]
    bo.u32[0x800 // 4] = 1  # the hold may end: the CP sees it as time passes
    assert seqs[0] in ctx.jobs
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3F00, [5]), 0x1F00))
    assert seq == 5 and seqs[0] not in ctx.jobs  # it waited for job 1
    assert c.wait(seq) and bo.u32[0x3F00 // 4] == 5
    s = kmd.kmd_stats()
    assert (s["resets"], s["job_timeouts"]) == (0, 0)


def test_a_cs_past_the_bound_waits_for_the_oldest_job_alone():
    """sched_jobs 2, both jobs held, each by a flag of its own; the model releases the first
    later: the CS goes ahead then, while the second still holds (its slot is the first's).
    Waiting for any later job would have held the CS until that job's reset (ECANCELED)."""
    dev = ReleasingModel()
    kmd = kmd_model.bind(dev, job_timeout=50_000, fallback_poll=1_000, sched_jobs=2)
    c = Client()
    bo = c.bo(0x4000)
    ctx = c.f.contexts[c.ctx]
    first = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    second = c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x900, 1, 1, "EQ"), 0x100))
    t0 = dev.now()
    dev.flag, dev.at = c.phys(bo) + 0x800, t0 + 10_000
    seq = c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x3F00, [5]), 0x1F00))
    assert first not in ctx.jobs and second in ctx.jobs and 10_000 <= dev.now() - t0 < 50_000
    bo.u32[0x900 // 4] = 1
    assert c.wait(seq) and bo.u32[0x3F00 // 4] == 5
    s = kmd.kmd_stats()
    assert (s["resets"], s["job_timeouts"]) == (0, 0)


class ReleasingModel(RefModel):
    """Sets the dword at `flag` once model time reaches `at` (seen at the next MMIO read):
    a hold that ends by itself, later."""

    flag = at = None

    def mmio_read32(self, offset: int) -> int:
        if self.at is not None and self.now() >= self.at:
            self.mem[self.flag:self.flag + 4] = [1, 0, 0, 0]
            self.at = None
        return super().mmio_read32(offset)


def test_a_context_that_queues_jobs_in_a_loop_holds_sched_jobs_of_them_at_most():
    """Checker off, nothing else bounds them: 200 CS of one context behind a job held for
    200,000 cycles, each its 1.4 KB of job and fences while queued."""
    dev = ReleasingModel()
    kmd = kmd_model.bind(dev, job_timeout=1_000_000, fallback_poll=1_000, cs_check=False)
    c = Client()
    bo = c.bo(0x10000)
    ctx = c.f.contexts[c.ctx]
    c.submit(c.ib(bo, pm4.wait_reg_mem(bo.addr + 0x800, 1, 1, "EQ")))
    dev.flag, dev.at = c.phys(bo) + 0x800, dev.now() + 200_000
    most = 0
    for i in range(1, 200):
        c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x8000 + 4 * i, [i]), 0x100 * (i % 64) + 0x1000))
        most = max(most, len(ctx.jobs))
    assert most == 32, most  # (200 before)
    assert c.wait(200) and bo.u32[0x8000 // 4 + 199] == 199
    assert kmd.kmd_stats()["job_timeouts"] == 0


def test_sched_jobs_is_checked_like_every_kmd_parameter():
    assert kmd_model.KmdParams().sched_jobs == 32  # amdgpu_sched_jobs' default
    with pytest.raises(ValueError) as ei:
        kmd_model.KmdParams(sched_jobs=0)
    assert str(ei.value) == "KMD parameter sched_jobs must be an int in [1, 65536], not 0"


# ------------------------------------------------------------------------------ who may ask for HIGH

def test_an_unprivileged_clients_high_priority_is_eacces_and_its_normal_work_runs():
    """File.cap_sys_nice was True for every file: any client's CTX ALLOC got HIGH (the CP's
    second queue, ahead of everyone's NORMAL work). amdgpu permits it only with CAP_SYS_NICE
    or to the DRM master (amdgpu_ctx_priority_permit): a driver bound with cap_sys_nice=False
    opens files without it, and open_render_node(cap_sys_nice=...) says it per file."""
    kmd = kmd_model.bind(RefModel(), cap_sys_nice=False)
    c = Client()
    for prio in (CtxPriority.HIGH, CtxPriority.VERY_HIGH):
        with pytest.raises(KmdError) as ei:
            c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=prio))
        assert (ei.value.errno, ei.value.message) == (
            errno.EACCES, f"CTX ALLOC: priority {prio.name} needs CAP_SYS_NICE (amdgpu_ctx_priority_permit)")
    low = c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.LOW)).ctx_id
    bo = c.bo(0x1000)
    assert c.run(bo, pm4.write_data(bo.addr + 0x100, [5])) and bo.u32[0x40] == 5
    assert c.wait(c.submit(c.ib(bo, pm4.write_data(bo.addr + 0x104, [6]), 0x200), ctx=low), ctx=low)
    assert bo.u32[0x41] == 6 and set(kmd.contexts) == {(c.f.fd, c.ctx), (c.f.fd, low)}
    root = kmd_model.open_render_node(cap_sys_nice=True)  # a privileged process beside it
    assert root.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id == 1
    with pytest.raises(TypeError) as ei:
        kmd_model.open_render_node(cap_sys_nice=1)
    assert str(ei.value) == "open_render_node: cap_sys_nice must be True, False or None, not 1"


def test_a_client_opened_by_default_gets_no_high_priority():
    """Every file had CAP_SYS_NICE by default (KmdParams.cap_sys_nice=True, so that the tests
    and examples could ask for HIGH): a client opened as every app is, with no parameter, took
    the CP's HIGH queue ahead of everyone's NORMAL work. As amdgpu (amdgpu_ctx_priority_permit:
    EACCES without CAP_SYS_NICE) a file now has it only when asked for: the driver's default
    is False, and what asks for HIGH opens its file with open_render_node(cap_sys_nice=True)
    (or binds with cap_sys_nice=True)."""
    import umd
    kmd = kmd_model.bind(RefModel())
    assert kmd.params.cap_sys_nice is False
    c = Client()
    assert not c.f.cap_sys_nice
    for prio in (CtxPriority.HIGH, CtxPriority.VERY_HIGH):
        with pytest.raises(KmdError) as ei:
            c.io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=prio))
        assert (ei.value.errno, ei.value.message) == (
            errno.EACCES, f"CTX ALLOC: priority {prio.name} needs CAP_SYS_NICE (amdgpu_ctx_priority_permit)")
    assert set(kmd.contexts) == {(c.f.fd, c.ctx)}  # nothing of the refused ones left
    # the UMD's default device too: one line naming what to do
    gpu = umd.open()
    try:
        with pytest.raises(PermissionError) as ei:
            gpu.queue(priority="high")
        assert ei.value.errno == errno.EACCES and "\n" not in str(ei.value)
        assert str(ei.value).startswith("queue: priority='high' needs CAP_SYS_NICE")
        assert str(ei.value).endswith(
            "umd.open(winsys=umd.winsys.Winsys(kmd_model.open_render_node(cap_sys_nice=True))))")
    finally:
        gpu.close()
    # opting in: a privileged file beside it (an app's Device over one), or a driver bound so
    root = kmd_model.open_render_node(cap_sys_nice=True)
    assert root.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id == 1
    from umd.winsys import Winsys
    gpu = umd.open(winsys=Winsys(kmd_model.open_render_node(cap_sys_nice=True)))
    try:
        hi, buf = gpu.queue(priority="high"), gpu.alloc(0x1000)
        hi.fill(buf, 0, 0x1000, 0x600D_0001)
        hi.finish()
        assert (buf.u32 == 0x600D_0001).all() and kmd.contexts[(gpu.ws.file.fd, hi.ctx_id)].priority.name == "HIGH"
    finally:
        gpu.close()
    assert Client(cap_sys_nice=True).io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.VERY_HIGH)).ctx_id == 2
    kmd_model.bind(RefModel(), cap_sys_nice=True)
    assert Client().io(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH)).ctx_id == 2
    f = kmd_model.open_render_node(cap_sys_nice=False)
    with pytest.raises(KmdError) as ei:
        f.ioctl(Request.CTX, CtxArgs(CtxOp.ALLOC, priority=CtxPriority.HIGH))
    assert ei.value.errno == errno.EACCES
    with pytest.raises(ValueError) as ei:
        kmd_model.KmdParams(cap_sys_nice=1)
    assert str(ei.value) == "KMD parameter cap_sys_nice must be True or False, not 1"


def test_an_unprivileged_umd_apps_high_queue_is_one_line_and_its_normal_queues_run():
    import umd
    kmd_model.bind(RefModel(), cap_sys_nice=False)
    gpu = umd.open()
    with pytest.raises(PermissionError) as ei:
        gpu.queue(priority="high")
    assert str(ei.value) == (
        "queue: priority='high' needs CAP_SYS_NICE, which this client lacks (CTX ALLOC: EACCES): use "
        "priority='normal', or give the client the right: gpucosim run APP --kmd cap_sys_nice=1 (in Python: "
        "umd.open(winsys=umd.winsys.Winsys(kmd_model.open_render_node(cap_sys_nice=True))))")
    assert ei.value.errno == errno.EACCES and isinstance(ei.value, umd.NotPermitted)
    buf = gpu.alloc(0x1000)
    for i, q in enumerate((gpu.queue(), gpu.queue(engine="copy"), gpu.queue(priority="low"))):
        q.fill(buf, 0, 0x1000, 0x5A5A_0000 + i)
        q.finish()
        assert (buf.u32 == 0x5A5A_0000 + i).all()
