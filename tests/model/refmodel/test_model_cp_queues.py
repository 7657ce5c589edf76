"""The CP's second hardware queue (CP_HQD1_*): arbitration by CP_QUEUE_PRIORITY at packet
boundaries, a high-priority queue not waiting behind a long low-priority IB, per-queue
errors (a doorbell error of either queue included) and CP_QUEUE_RESET (docs/hardware.md,
"CP hardware queues").

Each `check_*(dev)` runs on the reference model here and on the RTL (rtl/cp/queues.py)
under each simulator in tests/cosim/test_rtl_cp_queues.py: the same bodies, programming the
device over MMIO directly (no KMD), waiting for the queues by their STATUS registers. The
order in which packets ran is the model's trace on the model and the GPU clock each
packet's RELEASE_MEM wrote on the RTL."""

from __future__ import annotations

import pytest

from kmd_model import regs
from kmd_model.regs import CpError
from spec import ih as ih_spec
from spec import packets as pk
from spec import pm4
from testbench.refmodel import RefModel

IH, Q0, Q1, DATA, WB, STAMPS = 0x20000, 0x30000, 0x31000, 0x40000, 0x8000, 0x60000
SETTLE_CYCLES = 20_000  # far more than any of these streams takes on the RTL
P = regs.CP_QUEUE_PRIORITY


class Rig:
    def __init__(self, dev):
        self.dev = d = dev
        w = d.mmio_write32
        w(regs.IH_BASE_LO.addr(), IH >> 8)
        w(regs.IH_SIZE.addr(), 8)
        w(regs.IH_CNTL.addr(), regs.IH_CNTL.ENABLE.mask)
        for base, size, addr, cntl, rb in ((regs.RB_BASE_LO, regs.RB_SIZE, regs.RB_RPTR_ADDR_LO, regs.RB_CNTL, Q0),
                                           (regs.CP_HQD1_RB_BASE_LO, regs.CP_HQD1_RB_SIZE,
                                            regs.CP_HQD1_RB_RPTR_ADDR_LO, regs.CP_HQD1_RB_CNTL, Q1)):
            w(base.addr(), rb >> 8)
            w(size.addr(), 7)
            w(addr.addr(), WB + (rb & 0xF000) // 0x100)
            w(cntl.addr(), 3)  # ENABLE, RPTR_WB
        self.wptr = [0, 0]
        self.m32 = d.mem.view("<u4")
        self.stamp = 0  # RELEASE_MEM timestamps written so far (the order on the RTL)
        self.trace = getattr(dev, "queue_trace", None)  # (the model's: which queue ran each packet)

    def submit(self, q, words, doorbell=True):
        base = (Q0, Q1)[q]
        for x in words:
            self.m32[(base + 4 * (self.wptr[q] & 0xFF)) // 4] = x
            self.wptr[q] += 1
        if doorbell:
            self.dev.mmio_write32((regs.RB_DOORBELL, regs.CP_HQD1_RB_DOORBELL)[q].addr(), self.wptr[q])

    def marked(self, q, n):
        """n packets for queue q, each a RELEASE_MEM writing the GPU clock to the next slot
        (slot i: STAMPS + 16 i, the queue at + 8)."""
        words = []
        for _ in range(n):
            a = STAMPS + 16 * self.stamp
            self.m32[a // 4 + 2] = q
            words += pm4.release_mem(a, 0, data_sel="TIMESTAMP")
            self.stamp += 1
        return words

    def order(self):
        """Which queue ran each marked packet, in the order they ran."""
        if self.trace is not None:
            return ["1" if t.startswith("HQD1") else "0" for t in self.trace if "RELEASE_MEM" in t]
        slots = [(int(self.m32[STAMPS // 4 + 4 * i]) | int(self.m32[STAMPS // 4 + 4 * i + 1]) << 32,
                  str(int(self.m32[STAMPS // 4 + 4 * i + 2]))) for i in range(self.stamp)]
        return [q for _, q in sorted(slots)]

    def r(self, reg):
        return self.dev.mmio_read32(reg.addr())

    def fetched(self):
        """(PERF_Q0_DWORDS_FETCHED, PERF_Q1_DWORDS_FETCHED), checked to add up to PERF_DWORDS_FETCHED."""
        got = self.r(regs.PERF_Q0_DWORDS_FETCHED), self.r(regs.PERF_Q1_DWORDS_FETCHED)
        assert sum(got) == self.r(regs.PERF_DWORDS_FETCHED), got
        return got

    def halt(self, on):
        self.dev.mmio_write32(regs.CONTROL.addr(), int(on))

    def until(self, cond, what, cycles=SETTLE_CYCLES):
        end = self.dev.now() + cycles
        while not cond():
            assert self.dev.now() < end, f"{what}: not after {cycles} cycles"
            self.dev.delay(16)

    def idle(self, q):
        return (regs.STATUS, regs.CP_HQD1_STATUS)[q].IDLE.get(self.r((regs.STATUS, regs.CP_HQD1_STATUS)[q]))

    def settle(self):
        self.until(lambda: self.idle(0) and self.idle(1), "both CP queues idle")


def check_queue1_runs_with_its_own_pointers(dev):
    g = Rig(dev)
    assert regs.QUEUE_CAPS.CP_QUEUES.get(g.r(regs.QUEUE_CAPS)) == 2
    g.submit(1, pm4.write_data(DATA, [7, 8]))
    g.settle()
    assert g.m32[DATA // 4:DATA // 4 + 2].tolist() == [7, 8]
    assert g.r(regs.CP_HQD1_RB_RPTR) == g.r(regs.CP_HQD1_RB_WPTR) == 6 and g.r(regs.RB_RPTR) == 0
    assert g.m32[(WB + 0x10) // 4] == 6  # its rptr write-back
    assert g.fetched() == (0, 6)  # its dwords, not queue 0's
    st = regs.CP_HQD1_STATUS.decode(g.r(regs.CP_HQD1_STATUS))
    assert (st["IDLE"], st["ERROR"], st["RB_EMPTY"]) == (1, 0, 1)
    g.submit(0, pm4.write_data(DATA + 8, [9]) + pm4.release_mem(DATA + 12, 5, int_sel="SEND_INT_ON_CONFIRM"))
    g.settle()
    assert g.m32[(DATA + 8) // 4:(DATA + 16) // 4].tolist() == [9, 5] and g.r(regs.RB_RPTR) == g.wptr[0]
    assert g.fetched() == (g.wptr[0], 6)
    entry = ih_spec.decode(g.m32[IH // 4: IH // 4 + 8].tolist())
    assert (entry["SOURCE_ID"], entry["RING_ID"]) == (ih_spec.Source.EOP, 0)
    g.submit(1, pm4.release_mem(DATA + 16, 6, int_sel="SEND_INT_ON_CONFIRM"))
    g.settle()
    entry = ih_spec.decode(g.m32[IH // 4 + 8: IH // 4 + 16].tolist())
    assert (entry["SOURCE_ID"], entry["RING_ID"]) == (ih_spec.Source.EOP, 1)  # its IH entries carry its RING_ID


def check_priority_picks_the_queue_at_every_packet_boundary(dev):
    for prio, n0, n1, want in (
            (None, 3, 2, "11000"),  # queue 1 is HIGH (2) by default, queue 0 MEDIUM (1)
            (P.Q0.put(2) | P.Q1.put(0), 2, 2, "0011"),
            (P.Q0.put(1) | P.Q1.put(1), 3, 2, "10100")):  # equal priority: turns
        g = Rig(dev)
        if prio is not None:
            g.dev.mmio_write32(P.addr(), prio)
        g.halt(True)  # both queues get work while the CP is stopped, then compete
        g.submit(0, g.marked(0, n0))
        g.submit(1, g.marked(1, n1))
        g.halt(False)
        g.settle()
        assert "".join(g.order()) == want, (prio, g.order())
        g.dev.mmio_write32(regs.CONTROL.addr(), regs.CONTROL.SOFT_RESET.mask)  # (the next round's pointers)
        g.until(lambda: g.idle(0) and g.r(regs.RB_RPTR) == 0, "the soft reset")
        if g.trace is not None:
            g.trace.clear()


def check_high_priority_job_does_not_wait_behind_a_long_ib(dev):
    """Queue 0 is inside an IB of 64 packets, stopped in a WAIT_REG_MEM at its second; queue
    1's job runs at its doorbell (preemption at the packet boundary), then queue 0 resumes
    the IB where it was."""
    g = Rig(dev)
    ib = 0x50000
    body = pm4.write_data(DATA, [1]) + pm4.wait_reg_mem(DATA + 0x100, 1, 1, "EQ")
    body += sum((pm4.write_data(DATA + 8 + 4 * k, [k]) for k in range(62)), [])
    g.m32[ib // 4: ib // 4 + len(body)] = body
    g.submit(0, pm4.indirect_buffer(ib, len(body)))
    g.until(lambda: regs.STATUS.WAITING.get(g.r(regs.STATUS)), "queue 0 waiting")
    st = regs.STATUS.decode(g.r(regs.STATUS))
    assert st["WAITING"] == 1 and st["LEVEL"] == 1
    g.submit(1, pm4.write_data(DATA + 0x200, [0xAB]) + pm4.release_mem(DATA + 0x204, 0xCD))
    g.until(lambda: g.idle(1), "queue 1 idle")
    assert g.m32[(DATA + 0x200) // 4:(DATA + 0x208) // 4].tolist() == [0xAB, 0xCD]
    assert g.m32[(DATA + 8) // 4] == 0  # queue 0's IB has not gone on
    st = regs.STATUS.decode(g.r(regs.STATUS))
    assert st["LEVEL"] == 1 and st["IDLE"] == 0
    g.m32[(DATA + 0x100) // 4] = 1
    g.dev.delay(64)
    g.settle()
    assert g.m32[(DATA + 8) // 4:(DATA + 8) // 4 + 62].tolist() == list(range(62))
    assert g.r(regs.RB_RPTR) == g.wptr[0]
    # the parked poll's packet counted once, as the model counts it
    assert g.dev.mmio_read32(regs.PERF_PACKETS.addr(pk.WAIT_REG_MEM.index)) == 1
    # and its dwords once, as queue 0's (the preempting job's as queue 1's)
    assert g.fetched() == (g.wptr[0] + len(body), g.wptr[1])


def check_dma_data_takes_no_turn_out_of_order(dev):
    """A queue whose DMA_DATAs keep the DMA engine busy takes no packet while a switch is
    due, a DMA_DATA's included: the switch waits for the transfers, then the other queue has
    its turn (the RTL took every DMA_DATA header on offer while transfers ran, so a queue
    had a turn more for each, and held the CP against a higher priority for as long)."""
    src, dst, n = 0x70000, 0x80000, 0x1000  # 4 KiB each: the engine stays busy for hundreds of cycles
    g = Rig(dev)
    g.dev.mmio_write32(regs.CONTROL.addr(), regs.CONTROL.SOFT_RESET.mask)  # queue 1 has the first turn
    g.until(lambda: g.idle(0) and g.idle(1), "the soft reset")
    g.dev.mmio_write32(P.addr(), P.Q0.put(1) | P.Q1.put(1))  # equal priority: turns, packet by packet
    g.halt(True)
    g.submit(0, sum((pm4.dma_data(dst + n * k, src, n) for k in range(3)), []) + g.marked(0, 1))
    g.submit(1, g.marked(1, 4))
    g.halt(False)
    g.settle()
    # q1 mark, q0 DMA, q1 mark, q0 DMA, q1 mark, q0 DMA, q1 mark, q0 mark
    assert "".join(g.order()) == "11110", g.order()

    # a high-priority queue waits for the transfers taken, not for the DMA_DATAs after them
    g = Rig(dev)
    g.dev.mmio_write32(regs.CONTROL.addr(), regs.CONTROL.SOFT_RESET.mask | regs.CONTROL.PERF_CLEAR.mask)
    g.until(lambda: g.idle(0) and g.idle(1) and g.r(regs.RB_RPTR) == 0, "the soft reset")
    g.dev.mmio_write32(P.addr(), P.Q0.put(0) | P.Q1.put(2))
    done = regs.PERF_PACKETS.addr(pk.DMA_DATA.index)  # (DMA_DATAs are counted as their transfer ends)
    n_dma = 24
    ib = 0x50000
    g.m32[ib // 4: ib // 4 + 7 * n_dma] = sum((pm4.dma_data(dst + n * (k % 4), src, n) for k in range(n_dma)), [])
    g.submit(0, pm4.indirect_buffer(ib, 7 * n_dma))
    g.until(lambda: g.dev.mmio_read32(done) >= 1, "queue 0's first transfer", 4_000)
    g.halt(True)  # (on the model queue 0 has run to its end by now; the RTL is in its first transfers)
    started = g.dev.mmio_read32(done)
    # queue 1's job, rung while the CP is halted: a mark, then a packet long enough (1,000
    # dwords) that the mark is seen while it still runs (queue 0, lower, waits for it)
    ib1 = 0x58000
    body = pm4.write_data(DATA, [0x5A]) + pm4.write_data(DATA + 0x100, list(range(1, 1001)))
    g.m32[ib1 // 4: ib1 // 4 + len(body)] = body
    g.submit(1, pm4.indirect_buffer(ib1, len(body)))
    g.halt(False)
    g.until(lambda: g.m32[DATA // 4] == 0x5A, "queue 1's job")
    # what queue 0 had taken before the halt: the transfer in hand and the engine's command
    # queue (4), one more in its packet (margin); taking on, it ran all 24 first
    ended = g.dev.mmio_read32(done)
    assert ended <= min(started + 6, n_dma), (started, ended)
    g.settle()
    assert g.dev.mmio_read32(done) == n_dma


def check_an_error_stops_one_queue_and_the_queue_reset_brings_it_back(dev):
    g = Rig(dev)
    g.submit(1, pm4.nop(1) + [pm4.header(0x7B, 0), 0])
    g.settle()
    e = regs.CP_HQD1_ERROR.decode(g.r(regs.CP_HQD1_ERROR))
    assert (CpError(e["CODE"]).name, e["OPCODE"]) == ("ILLEGAL_OPCODE", 0x7B)
    assert g.r(regs.CP_HQD1_ERROR_ADDR_LO) == Q1 + 8 and g.r(regs.CP_HQD1_ERROR_OFFSET) == 2
    assert g.r(regs.CP_ERROR) == 0 and not regs.STATUS.ERROR.get(g.r(regs.STATUS))
    assert regs.CP_HQD1_STATUS.ERROR.get(g.r(regs.CP_HQD1_STATUS))
    entry = ih_spec.decode(g.m32[IH // 4: IH // 4 + 8].tolist())
    assert (entry["SOURCE_ID"], entry["RING_ID"], entry["DATA0"]) == (ih_spec.Source.CP_ERROR, 1,
                                                                      g.r(regs.CP_HQD1_ERROR))
    g.submit(0, pm4.write_data(DATA, [5]))  # queue 0 runs on
    g.settle()
    assert g.m32[DATA // 4] == 5
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q1.mask)
    g.settle()
    assert g.r(regs.CP_HQD1_ERROR) == 0 and g.r(regs.CP_HQD1_RB_RPTR) == 0 and g.r(regs.RB_RPTR) == g.wptr[0]
    g.wptr[1] = 0
    g.submit(1, pm4.write_data(DATA + 4, [6]))
    g.settle()
    assert g.m32[DATA // 4 + 1] == 6
    # and the other way round: queue 0 fails, queue 1 runs, Q0's reset (not SOFT_RESET) revives it
    g.submit(0, [pm4.header(0x7B, 0), 0])
    g.settle()
    assert regs.STATUS.ERROR.get(g.r(regs.STATUS)) and ih_spec.decode(g.m32[IH // 4 + 8: IH // 4 + 16].tolist())["RING_ID"] == 0
    g.submit(1, pm4.write_data(DATA + 8, [7]))
    g.settle()
    assert g.m32[DATA // 4 + 2] == 7
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q0.mask)
    g.settle()
    assert g.r(regs.CP_ERROR) == 0 and g.r(regs.RB_RPTR) == 0 and g.r(regs.CP_HQD1_RB_RPTR) == g.wptr[1]
    g.wptr[0] = 0
    g.submit(0, pm4.write_data(DATA + 12, [8]))
    g.settle()
    assert g.m32[DATA // 4 + 3] == 8


def check_a_doorbell_error_stops_its_queue_alone(dev):
    """A doorbell behind the write pointer on either queue, while the other queue is busy in
    a poll: CP_HQD1_ERROR / CP_ERROR say DOORBELL_BACKWARDS, the IH entry carries the queue."""
    g = Rig(dev)
    g.submit(0, pm4.wait_reg_mem(DATA + 0x100, 1, 1, "EQ"))  # queue 0 polls
    g.until(lambda: regs.STATUS.WAITING.get(g.r(regs.STATUS)), "queue 0 waiting")
    g.submit(1, pm4.nop(4))
    g.until(lambda: g.idle(1), "queue 1 idle")
    g.dev.mmio_write32(regs.CP_HQD1_RB_DOORBELL.addr(), 2)
    # a second write while the error waits for its queue is ignored: the error names the first
    # (the RTL keeps a write's value for the error it may raise: rtl/cp/queues.py doorbells)
    g.dev.mmio_write32(regs.CP_HQD1_RB_DOORBELL.addr(), g.wptr[1] + 4)
    g.until(lambda: regs.CP_HQD1_STATUS.ERROR.get(g.r(regs.CP_HQD1_STATUS)), "queue 1 stopped")
    e = regs.CP_HQD1_ERROR.decode(g.r(regs.CP_HQD1_ERROR))
    assert CpError(e["CODE"]).name == "DOORBELL_BACKWARDS" and g.r(regs.CP_HQD1_ERROR_ADDR_LO) == 2
    g.until(lambda: g.r(regs.IH_WPTR) == 32, "the IH entry")
    entry = ih_spec.decode(g.m32[IH // 4: IH // 4 + 8].tolist())
    assert (entry["SOURCE_ID"], entry["RING_ID"]) == (ih_spec.Source.CP_ERROR, 1)
    assert not regs.STATUS.ERROR.get(g.r(regs.STATUS)) and regs.STATUS.WAITING.get(g.r(regs.STATUS))
    g.m32[(DATA + 0x100) // 4] = 1  # queue 0's poll ends; it runs on
    g.submit(0, pm4.write_data(DATA, [3]))
    g.until(lambda: g.idle(0), "queue 0 idle")
    assert g.m32[DATA // 4] == 3 and g.r(regs.RB_RPTR) == g.wptr[0]
    g.dev.mmio_write32(regs.RB_DOORBELL.addr(), 1)  # queue 0's own
    g.until(lambda: regs.STATUS.ERROR.get(g.r(regs.STATUS)), "queue 0 stopped")
    assert CpError(regs.CP_ERROR.CODE.get(g.r(regs.CP_ERROR))).name == "DOORBELL_BACKWARDS"
    g.until(lambda: g.r(regs.IH_WPTR) == 64, "the second IH entry")
    assert ih_spec.decode(g.m32[IH // 4 + 8: IH // 4 + 16].tolist())["RING_ID"] == 0


def check_amd_queue_reset_a_hung_queue_alone(dev):
    """igt's amd_queue_reset on one device: queue 1 hangs in a poll that never ends while
    queue 0 runs a good job; CP_QUEUE_RESET.Q1 brings queue 1 back (no SOFT_RESET) and the
    good job's results and queue 0's pointers are untouched."""
    g = Rig(dev)
    g.submit(1, pm4.wait_reg_mem(DATA + 0x300, 1, 1, "EQ"))  # never true
    g.until(lambda: regs.CP_HQD1_STATUS.WAITING.get(g.r(regs.CP_HQD1_STATUS)), "queue 1 waiting")
    g.submit(0, pm4.write_data(DATA, [1, 2, 3]) + pm4.release_mem(DATA + 16, 9))
    g.until(lambda: g.idle(0), "queue 0 idle")
    assert g.m32[DATA // 4:DATA // 4 + 3].tolist() == [1, 2, 3] and g.m32[(DATA + 16) // 4] == 9
    assert not g.idle(1)
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q1.mask)
    g.settle()
    st = regs.CP_HQD1_STATUS.decode(g.r(regs.CP_HQD1_STATUS))
    assert (st["IDLE"], st["ERROR"], st["WAITING"], st["LEVEL"]) == (1, 0, 0, 0)
    assert g.r(regs.CP_HQD1_RB_RPTR) == g.r(regs.CP_HQD1_RB_WPTR) == 0 and g.r(regs.RB_RPTR) == g.wptr[0]
    g.wptr[1] = 0
    g.submit(1, pm4.write_data(DATA + 0x40, [0x77]))
    g.submit(0, pm4.write_data(DATA + 0x44, [0x88]))
    g.settle()
    assert g.m32[(DATA + 0x40) // 4:(DATA + 0x48) // 4].tolist() == [0x77, 0x88]
    # the active queue's reset: queue 0 hangs in a poll, nothing else runs, Q0 resets it
    g.submit(0, pm4.wait_reg_mem(DATA + 0x300, 1, 1, "EQ"))
    g.until(lambda: regs.STATUS.WAITING.get(g.r(regs.STATUS)), "queue 0 waiting")
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q0.mask)
    g.settle()
    assert g.r(regs.RB_RPTR) == g.r(regs.RB_WPTR) == 0 and not regs.STATUS.WAITING.get(g.r(regs.STATUS))
    g.wptr[0] = 0
    g.submit(0, pm4.write_data(DATA + 0x48, [0x99]))
    g.settle()
    assert g.m32[(DATA + 0x48) // 4] == 0x99 and g.r(regs.IH_WPTR) == 0  # no error was raised


def check_random_interleavings_of_both_queues(dev):
    """Random jobs on both queues (WRITE_DATA, RELEASE_MEM, NOPs, satisfied WAIT_REG_MEMs,
    IBs with IB2s inside), doorbells in random pieces at random times, random priorities:
    every packet runs once, on its queue's pointers, whatever the switches (a preempted IB
    resumes where it stopped), the packet counters count each once, and each queue's fetched
    dwords (PERF_Q0/Q1_DWORDS_FETCHED) are its ring's and its IBs', whoever ran between."""
    import random

    for seed in range(3):  # (30 seeds passed on the model and on Verilator)
        rng = random.Random(seed)
        g = Rig(dev)
        g.dev.mmio_write32(P.addr(), P.Q0.put(rng.randrange(4)) | P.Q1.put(rng.randrange(4)))
        want: dict[int, int] = {}
        counts = {"WRITE_DATA": 0, "RELEASE_MEM": 0, "INDIRECT_BUFFER": 0, "WAIT_REG_MEM": 0}
        ib_next = [0x50000, 0x58000]
        ib_dwords = [0, 0]
        slot = [0]
        g.m32[(DATA + 0xF00) // 4] = 1  # what the WAIT_REG_MEMs wait for: already there

        def packet(q, depth):
            k = rng.randrange(10 if depth < 2 else 8)
            a = DATA + 4 * slot[0]
            if k < 4:
                vals = [rng.getrandbits(32) for _ in range(rng.randrange(1, 5))]
                slot[0] += len(vals)
                want.update({a + 4 * i: v for i, v in enumerate(vals)})
                counts["WRITE_DATA"] += 1
                return pm4.write_data(a, vals)
            if k < 6:
                v = rng.getrandbits(32)
                slot[0] += 1
                want[a] = v
                counts["RELEASE_MEM"] += 1
                return pm4.release_mem(a, v)
            if k == 6:
                counts["WAIT_REG_MEM"] += 1
                return pm4.wait_reg_mem(DATA + 0xF00, 1, 1, "EQ", poll_interval=1)
            if k == 7:
                return pm4.nop(rng.randrange(1, 4))
            body = sum((packet(q, depth + 1) for _ in range(rng.randrange(1, 8))), [])
            base = ib_next[q]
            ib_next[q] += 4 * len(body) + 64 & ~31
            g.m32[base // 4: base // 4 + len(body)] = body
            counts["INDIRECT_BUFFER"] += 1
            ib_dwords[q] += len(body)
            return pm4.indirect_buffer(base, len(body))

        jobs = [[], []]
        for _ in range(24):
            q = rng.randrange(2)
            jobs[q].append(packet(q, 0))
        assert all(len(sum(j, [])) < 256 for j in jobs)
        sent = [0, 0]
        while sent != [len(j) for j in jobs]:  # (a doorbell never cuts a packet: BAD_COUNT)
            q = rng.randrange(2)
            n = min(len(jobs[q]) - sent[q], rng.randrange(1, 5))
            g.submit(q, sum(jobs[q][sent[q]:sent[q] + n], []))
            sent[q] += n
            g.dev.delay(rng.randrange(0, 60))
        g.settle()
        for q, (rptr, wptr, err) in enumerate(((regs.RB_RPTR, regs.RB_WPTR, regs.CP_ERROR),
                                               (regs.CP_HQD1_RB_RPTR, regs.CP_HQD1_RB_WPTR, regs.CP_HQD1_ERROR))):
            assert (g.r(rptr), g.r(wptr), g.r(err)) == (g.wptr[q], g.wptr[q], 0), (seed, q)
        got = {a: int(g.m32[a // 4]) for a in want}
        assert got == want, (seed, [hex(a) for a in want if got[a] != want[a]][:8])
        for name, n in counts.items():
            assert g.dev.mmio_read32(regs.PERF_PACKETS.addr(getattr(pk, name).index)) == n, (seed, name)
        assert g.fetched() == (g.wptr[0] + ib_dwords[0], g.wptr[1] + ib_dwords[1]), seed
        g.dev.mmio_write32(regs.CONTROL.addr(), regs.CONTROL.SOFT_RESET.mask | regs.CONTROL.PERF_CLEAR.mask)
        g.until(lambda: g.idle(0) and g.r(regs.RB_RPTR) == 0, "the soft reset")
        g.m32[DATA // 4: DATA // 4 + slot[0] + 1] = 0


CHECKS = [check_queue1_runs_with_its_own_pointers, check_priority_picks_the_queue_at_every_packet_boundary,
          check_high_priority_job_does_not_wait_behind_a_long_ib, check_dma_data_takes_no_turn_out_of_order,
          check_an_error_stops_one_queue_and_the_queue_reset_brings_it_back,
          check_a_doorbell_error_stops_its_queue_alone, check_amd_queue_reset_a_hung_queue_alone,
          check_random_interleavings_of_both_queues]


@pytest.mark.parametrize("check", CHECKS, ids=lambda f: f.__name__[6:])
def test_on_the_model(check):
    trace: list[str] = []
    dev = RefModel(1 << 20, trace=trace.append)
    dev.queue_trace = trace
    check(dev)
