"""Hardware errors and hangs: decoded messages, the guilty context refused with ECANCELED,
innocent contexts resubmitted and carrying on (drm_sched's stop -> reset -> resubmit ->
start), timeouts. Bodies are `check_*(dev)`, as in test_kmd_ioctl.py."""

from __future__ import annotations

import errno
import re

import pytest

import kmd_model
from kmd_model import regs, uapi
from kmd_model.uapi import CsChunkFence, CsChunkIb, CtxOp, Request, ResetStatus
from spec import packets, pm4, sdma
from testbench.refmodel import RefModel

from tests.kmd.test_kmd_ioctl import Client, addr_fields, expect
from tests.kmd_sched.sched_helpers import sdma_ib


def query(c: Client, ctx: int | None = None) -> uapi.CtxOut:
    return c.io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, c.ctx if ctx is None else ctx))


def check_cp_error_recovery(dev):
    """A job's second IB holds an illegal opcode, which the checker would refuse; with the
    checker off (cs_check=False, as a test harness does) it reaches the CP: the CP stops,
    context A is guilty, context B's jobs before and after finish. Queue 0 alone is reset
    (CP_QUEUE_RESET.Q0): A's unfinished gfx jobs are cancelled, and A submits on."""
    kmd = kmd_model.bind(dev, cs_check=False)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    bflag, bout = bbo.addr + 0x3000, bbo.addr + 0x3100
    # B1 waits for the CPU, so A's job and B2 queue up behind it in the ring
    b1 = b.submit(b.ib(bbo, pm4.wait_reg_mem(bflag, 1, 1, "EQ") + pm4.write_data(bout, [0xB1])))
    # A: a good first IB; the IB at +0x100 is a NOP, then the bad header at IB+0x40
    abo.u32[0x40:0x60] = pm4.nop(15) + [pm4.header(0x7B, 14)] + [0] * 15
    evil = a.ib(abo, pm4.write_data(abo.addr + 0x180, [1]))
    a1 = a.submit(evil, CsChunkIb(32, abo.handle, 0x100))
    a2 = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2000, [0xA2]), offset=0x800))
    b2 = b.submit(b.ib(bbo, pm4.write_data(bout + 4, [0xB2]), offset=0x800), CsChunkFence(bbo.handle, 0x3200))
    assert not bbo.u32[0xC40:0xC42].any()
    bbo.u32[0xC00] = 1  # release B1
    msg = f"illegal opcode 0x7b at IB+0x40 ({abo.addr + 0x140:#x}), context {a.ctx}"
    e = expect(errno.ECANCELED, f"WAIT_CS: {msg}", a.wait, a1)
    assert e.info.code == "ILLEGAL_OPCODE" and e.info.offset == 0x40 and e.info.opcode == 0x7B
    assert b.wait(b2)
    assert bbo.u32[0xC40:0xC42].tolist() == [0xB1, 0xB2] and bbo.u32[0x3200 // 4] == b2
    assert b.wait(b1, 0)
    assert abo.u32[0x800] == 0  # A's second job was cancelled, never ran
    expect(errno.ECANCELED, f"WAIT_CS: {msg}", a.wait, a2)  # its own error: the reset cancelled it
    qa, qb = query(a), query(b)
    # (the full reset's lasting guilt, qa.error and CS refused, is test_kmd_recovery.py's)
    assert qa.reset_status == ResetStatus.GUILTY and qa.ring_status == {"gfx": ResetStatus.GUILTY}
    assert qa.error == e.info and qa.resets == 1  # (it was None: GUILTY, naming nothing)
    assert qb.reset_status == ResetStatus.INNOCENT and qb.error is None and qb.resets == 1
    assert qb.ring_status == {"gfx": ResetStatus.INNOCENT}
    # the device works on; the guilty context submits on, and a new context of the same file is fine
    a3 = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2008, [0xA4]), offset=0xA00))
    a2ctx = a.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x2004, [0xA3]), offset=0x900), ctx=a2ctx)
    assert b.wait(b.run(bbo, pm4.write_data(bout + 8, [0xB3]), offset=0xA00), 0) and a.wait(a3, 0)
    assert abo.u32[0x801:0x803].tolist() == [0xA3, 0xA4] and bbo.u32[0xC42] == 0xB3
    s = kmd.kmd_stats()
    assert (s["queue_resets"], s["resets"], s["cp_errors"], s["jobs_cancelled"]) == (1, 0, 1, 2)
    assert kmd.recovery_log == [("gfx", "error"), ("gfx", "queue_reset")]
    assert s["ih_by_source"].get("CP_ERROR") == (1 if kmd.ih else None)


# (stream builder, expected message without ", context N") for streams the checker
# would refuse; with cs_check=False they reach the CP, which must refuse them itself.
def _bad_streams(base: int, mem_size: int, ib_levels: int):
    m = base
    return [
        ([pm4.header(0x7B, 0), 0], f"illegal opcode 0x7b at IB+0x0 ({m:#x})"),
        ([pm4.TYPE2_FILLER, 0x1234_5678], f"illegal packet header (type 0/1) at IB+0x4 ({m + 4:#x})"),
        (pm4.nop(2) + [pm4.header(0x37, 1), 0, 0], f"bad COUNT in WRITE_DATA at IB+0xc ({m + 0xc:#x})"),
        (pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, **addr_fields("WRITE_DATA", m + 0x100)}, [1]),
         f"unsupported field value in WRITE_DATA at IB+0x0 ({m:#x})"),
        (pm4.encode_fields("INDIRECT_BUFFER", addr_fields("INDIRECT_BUFFER", m + 0x200, "base")),
         f"INDIRECT_BUFFER with IB_SIZE 0 at IB+0x0 ({m:#x})"),
        (pm4.encode_fields("RELEASE_MEM", {"DATA_SEL": 2, **addr_fields("RELEASE_MEM", m + 0x104), "EVENT_INDEX": 5}),
         f"misaligned address in RELEASE_MEM at IB+0x0 ({m:#x})"),
        # an address nothing maps: the MMU's fault (the root directory has no entry for it)
        (pm4.write_data(mem_size, [1]), re.compile(rf"VM fault: WRITE at {mem_size:#x} in WRITE_DATA "
                                                   r"\(VMID \d+, no valid entry at page-table level 0\) at IB\+0x0")),
        (pm4.indirect_buffer(m + 0x200, 8), f"INDIRECT_BUFFER nested deeper than the {ib_levels} IB levels "
         f"at IB2+0x0 ({m + 0x200:#x})"),
    ]


def check_hw_errors_decoded(dev):
    """Bad streams reach the CP with the checker off; each error is decoded into a message,
    its context is guilty, and queue 0's reset recovers the device every time."""
    kmd = kmd_model.bind(dev, cs_check=False)
    c = Client()
    bo = c.bo()
    bo.u32[0x80:0x88] = pm4.indirect_buffer(bo.addr + 0x200, 8) + pm4.pad(4)  # IB2 -> IB3, for the nesting case
    streams = _bad_streams(bo.addr, len(dev.mem), kmd.info.ib_levels)
    for i, (stream, what) in enumerate(streams):
        ctx = c.io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
        seq = c.submit(c.ib(bo, stream), ctx=ctx)
        if isinstance(what, re.Pattern):
            with pytest.raises(uapi.KmdError) as ei:
                c.wait(seq, 100_000, ctx)
            assert ei.value.errno == errno.ECANCELED
            assert re.fullmatch(rf"WAIT_CS: {what.pattern}, context {ctx}", ei.value.message), ei.value.message
        else:
            expect(errno.ECANCELED, f"WAIT_CS: {what}, context {ctx}", c.wait, seq, 100_000, ctx)
        assert query(c, ctx).reset_status == ResetStatus.GUILTY
        assert (kmd.stats["queue_resets"], kmd.stats["resets"]) == (i + 1, 0)
        assert query(c, c.ctx).resets == i + 1  # the innocent context counts every reset it lived through
    c.run(bo, pm4.write_data(bo.addr + 0x3000, [0x600D]))
    assert bo.u32[0xC00] == 0x600D


def check_timeout_recovery(dev):
    """A WAIT_REG_MEM that is never satisfied: WAIT_CS times out (ETIME); once the job has
    made no progress for job_timeout cycles, timedout_job resets queue 0 and the ring works
    again."""
    kmd = kmd_model.bind(dev, job_timeout=30_000, fallback_poll=5_000)
    a, b = Client(), Client()
    abo, bbo = a.bo(), b.bo()
    hang = a.submit(a.ib(abo, pm4.write_data(abo.addr + 0x100, [1]) + pm4.wait_reg_mem(abo.addr, 1, 0xFF, "EQ")))
    after = b.submit(b.ib(bbo, pm4.write_data(bbo.addr + 0x100, [0xB])))
    expect(errno.ETIME, f"WAIT_CS: seqno {hang:#x} of context {a.ctx} not signalled after 5000 cycles",
           a.wait, hang, 5000)
    assert not kmd.stats["resets"] and not kmd.stats["queue_resets"]
    assert b.wait(after, 100_000)  # B's job waits behind A's, until the timeout resets queue 0
    assert bbo.u32[0x40] == 0xB
    st = query(a)
    assert st.reset_status == ResetStatus.GUILTY and st.ring_status == {"gfx": ResetStatus.GUILTY}
    with pytest.raises(uapi.KmdError) as ei:
        a.wait(hang)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "TIMEOUT"
    assert re.fullmatch(rf"job 0x1 timed out on gfx: no progress for \d+ cycles, stuck in WAIT_REG_MEM at IB\+0x14 "
                        rf"\({abo.addr + 0x14:#x}\): \*{abo.addr:#x} & 0xff = 0x0, waits for == 0x1, "
                        rf"context {a.ctx}", ei.value.info.message), ei.value.info.message
    s = kmd.kmd_stats()
    assert (s["job_timeouts"], s["queue_resets"], s["resets"]) == (1, 1, 0)
    assert query(b).reset_status == ResetStatus.INNOCENT
    assert kmd.recovery_log == [("gfx", "timeout"), ("gfx", "queue_reset")]
    b.run(bbo, pm4.write_data(bbo.addr + 0x104, [0xC]), offset=0x200)
    assert bbo.u32[0x41] == 0xC and not regs.STATUS.ERROR.get(kmd.mmio.read(regs.STATUS))


# The longest NOP (COUNT 0x3FFE: the header and 16,383 dwords, each fetched: docs/hardware.md):
# about 8,200 cycles of fetching on a 64-bit bus and 16,400 on a 32-bit one, in which the CP
# moves no DMA byte and the CP's IH writer, which takes an entry only between two CP
# packets, holds every SDMA entry.
LONGEST_NOP = pm4.nop(packets.NOP.max_payload)


def _in_the_nops(kmd, bo) -> None:
    """Until the CP fetches the NOPs (the model's ran at once)."""
    for _ in range(100):
        if kmd.mmio.read(regs.PERF_DWORDS_FETCHED) > 64 or bo.u32[0] == 0xE71:
            return
        kmd.dev.delay(50)


def check_an_sdma_job_behind_the_cps_long_nop_is_not_taken_for_stuck(dev):
    """An SDMA job behind the TRAP of the job before it stands still while the CP's IH writer
    waits for the CP's packet in hand. The SDMA ring's timer took the CP's DMA bytes moving
    for progress (a long CP_SYNC fill), not its fetched dwords: a hostile client's NOPs of
    16,383 dwords each (legal packets, its own IB) longer than two job timeouts had an
    innocent client's SDMA job reset with TIMEOUT, its context guilty, a hang counted towards
    its file's ban. The CP's fetched dwords now count as its DMA bytes do."""
    kmd = kmd_model.bind(dev, job_timeout=2_000)
    good, evil = Client(), Client()
    nops = LONGEST_NOP * 2
    ebo, gbo = evil.bo(4 * len(nops) + 0x1000), good.bo()
    e = evil.submit(evil.ib(ebo, nops + pm4.write_data(ebo.addr, [0xE71]), 0x100))
    _in_the_nops(kmd, ebo)
    a = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x800, [0xA1])))
    b = good.submit(sdma_ib(gbo, sdma.write_linear(gbo.addr + 0x804, [0xB2]), 0x100))
    assert good.wait(a, 1_000_000) and good.wait(b, 1_000_000)
    assert (gbo.u32[0x200], gbo.u32[0x201]) == (0xA1, 0xB2)
    assert evil.wait(e, 1_000_000) and ebo.u32[0] == 0xE71
    assert (kmd.stats["job_timeouts"], kmd.stats["queue_resets"], kmd.stats["resets"]) == (0, 0, 0), \
        (kmd.stats, kmd.recovery_log)
    assert query(good).reset_status == ResetStatus.NO_RESET and good.f.hangs == 0


def check_sdma_queue_reset_behind_the_cps_long_nop_stays_a_queue_reset(dev):
    """SDMA_CNTL.QUEUE_RESET is done only once the queue's IH entry, waiting for the CP's IH
    writer, is written (docs/hardware.md), and the KMD's wait for it went on only while the
    CP's DMA bytes moved: behind an innocent client's NOPs of 16,383 dwords the reset of a
    hostile SDMA job gave up after hw_timeout and fell to the full reset, the innocent gfx
    job stopped and run again, its context told of a reset. The CP's fetched dwords now
    extend the wait as its DMA bytes do (bounded as before)."""
    kmd = kmd_model.bind(dev, job_timeout=2_000, hw_timeout=3_000)
    good, evil = Client(), Client()
    nops = LONGEST_NOP * 2
    gbo, ebo = good.bo(4 * len(nops) + 0x1000), evil.bo()
    g = good.submit(good.ib(gbo, nops + pm4.write_data(gbo.addr, [0x600D]), 0x100))
    _in_the_nops(kmd, gbo)
    e = evil.submit(sdma_ib(ebo, [0x23DECD3D]))  # amd_deadlock's corrupted SDMA header
    with pytest.raises(uapi.KmdError) as ei:
        evil.wait(e, 1_000_000)
    assert ei.value.errno == errno.ECANCELED and ei.value.info.code == "ILLEGAL_OPCODE"
    assert good.wait(g, 1_000_000) and gbo.u32[0] == 0x600D
    assert kmd.stats["queue_resets"] == 1 and kmd.stats["resets"] == 0, (kmd.stats, kmd.recovery_log)
    assert {r for r, s in kmd.recovery_log} == {"sdma0"}
    assert query(good).reset_status == ResetStatus.NO_RESET
    e2 = evil.submit(sdma_ib(ebo, sdma.fence(ebo.addr + 0x2000, 0xE2), 0x400))  # the SDMA works again
    assert evil.wait(e2) and ebo.u32[0x800] == 0xE2


CHECKS = [check_cp_error_recovery, check_hw_errors_decoded, check_timeout_recovery,
          check_an_sdma_job_behind_the_cps_long_nop_is_not_taken_for_stuck,
          check_sdma_queue_reset_behind_the_cps_long_nop_stays_a_queue_reset]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_model(check):
    check(RefModel())


def test_cp_error_without_ih_ring():
    check_cp_error_recovery(RefModel(ih=False))
