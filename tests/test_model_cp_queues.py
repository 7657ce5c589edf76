"""The reference model's second CP hardware queue (CP_HQD1_*): arbitration by
CP_QUEUE_PRIORITY at packet boundaries, a high-priority queue not waiting behind a long
low-priority IB, per-queue errors and CP_QUEUE_RESET (docs/hardware.md, "CP hardware
queues")."""

from __future__ import annotations

from kmd_model import regs
from kmd_model.regs import CpError
from spec import ih as ih_spec
from spec import pm4
from testbench.refmodel import RefModel

IH, Q0, Q1, DATA, WB = 0x20000, 0x30000, 0x31000, 0x40000, 0x8000


class Rig:
    def __init__(self):
        self.trace: list[str] = []
        self.dev = d = RefModel(1 << 20, trace=self.trace.append)
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

    def submit(self, q, words, doorbell=True):
        base = (Q0, Q1)[q]
        for x in words:
            self.m32[(base + 4 * (self.wptr[q] & 0xFF)) // 4] = x
            self.wptr[q] += 1
        if doorbell:
            self.dev.mmio_write32((regs.RB_DOORBELL, regs.CP_HQD1_RB_DOORBELL)[q].addr(), self.wptr[q])

    def r(self, reg):
        return self.dev.mmio_read32(reg.addr())

    def halt(self, on):
        self.dev.mmio_write32(regs.CONTROL.addr(), int(on))

    def order(self):
        return ["1" if t.startswith("HQD1") else "0" for t in self.trace]


def test_queue1_runs_with_its_own_pointers():
    g = Rig()
    g.submit(1, pm4.write_data(DATA, [7, 8]))
    assert g.m32[DATA // 4:DATA // 4 + 2].tolist() == [7, 8]
    assert g.r(regs.CP_HQD1_RB_RPTR) == g.r(regs.CP_HQD1_RB_WPTR) == 6 and g.r(regs.RB_RPTR) == 0
    assert g.m32[(WB + 0x10) // 4] == 6  # its rptr write-back
    assert regs.CP_HQD1_STATUS.decode(g.r(regs.CP_HQD1_STATUS))["IDLE"] == 1


def test_priority_picks_the_queue_at_every_packet_boundary():
    g = Rig()
    g.halt(True)  # both queues get work while the CP is stopped, then compete
    g.submit(0, pm4.write_data(DATA, [1]) * 3)
    g.submit(1, pm4.write_data(DATA + 4, [2]) * 2)
    g.halt(False)
    assert g.order() == ["1", "1", "0", "0", "0"]  # queue 1 is HIGH (2) by default, queue 0 MEDIUM (1)
    g = Rig()
    g.dev.mmio_write32(regs.CP_QUEUE_PRIORITY.addr(), regs.CP_QUEUE_PRIORITY.Q0.put(2) | regs.CP_QUEUE_PRIORITY.Q1.put(0))
    g.halt(True)
    g.submit(0, pm4.write_data(DATA, [1]) * 2)
    g.submit(1, pm4.write_data(DATA + 4, [2]) * 2)
    g.halt(False)
    assert g.order() == ["0", "0", "1", "1"]
    g = Rig()
    g.dev.mmio_write32(regs.CP_QUEUE_PRIORITY.addr(), regs.CP_QUEUE_PRIORITY.Q0.put(1) | regs.CP_QUEUE_PRIORITY.Q1.put(1))
    g.halt(True)
    g.submit(0, pm4.write_data(DATA, [1]) * 3)
    g.submit(1, pm4.write_data(DATA + 4, [2]) * 2)
    g.halt(False)
    assert g.order() == ["1", "0", "1", "0", "0"]  # equal priority: turns


def test_high_priority_job_does_not_wait_behind_a_long_ib():
    """Queue 0 is inside an IB of 64 packets, stopped in a WAIT_REG_MEM at its second; queue
    1's job runs at its doorbell (preemption at the packet boundary), then queue 0 resumes
    the IB where it was."""
    g = Rig()
    ib = 0x50000
    body = pm4.write_data(DATA, [1]) + pm4.wait_reg_mem(DATA + 0x100, 1, 1, "EQ")
    body += sum((pm4.write_data(DATA + 8 + 4 * k, [k]) for k in range(62)), [])
    g.m32[ib // 4: ib // 4 + len(body)] = body
    g.submit(0, pm4.indirect_buffer(ib, len(body)))
    st = regs.STATUS.decode(g.r(regs.STATUS))
    assert st["WAITING"] == 1 and st["LEVEL"] == 1
    g.submit(1, pm4.write_data(DATA + 0x200, [0xAB]) + pm4.release_mem(DATA + 0x204, 0xCD))
    assert g.m32[(DATA + 0x200) // 4:(DATA + 0x208) // 4].tolist() == [0xAB, 0xCD]
    assert g.m32[(DATA + 8) // 4] == 0  # queue 0's IB has not gone on
    g.m32[(DATA + 0x100) // 4] = 1
    g.dev.delay(64)
    assert g.m32[(DATA + 8) // 4:(DATA + 8) // 4 + 62].tolist() == list(range(62))
    assert g.r(regs.RB_RPTR) == g.wptr[0]


def test_an_error_stops_one_queue_and_the_queue_reset_brings_it_back():
    g = Rig()
    g.submit(1, pm4.nop(1) + [pm4.header(0x7B, 0), 0])
    e = regs.CP_HQD1_ERROR.decode(g.r(regs.CP_HQD1_ERROR))
    assert (CpError(e["CODE"]).name, e["OPCODE"]) == ("ILLEGAL_OPCODE", 0x7B)
    assert g.r(regs.CP_HQD1_ERROR_ADDR_LO) == Q1 + 8 and g.r(regs.CP_HQD1_ERROR_OFFSET) == 2
    assert g.r(regs.CP_ERROR) == 0 and not regs.STATUS.ERROR.get(g.r(regs.STATUS))
    entry = ih_spec.decode(g.m32[IH // 4: IH // 4 + 8].tolist())
    assert (entry["SOURCE_ID"], entry["RING_ID"], entry["DATA0"]) == (ih_spec.Source.CP_ERROR, 1,
                                                                      g.r(regs.CP_HQD1_ERROR))
    g.submit(0, pm4.write_data(DATA, [5]))  # queue 0 runs on
    assert g.m32[DATA // 4] == 5
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q1.mask)
    assert g.r(regs.CP_HQD1_ERROR) == 0 and g.r(regs.CP_HQD1_RB_RPTR) == 0 and g.r(regs.RB_RPTR) == g.wptr[0]
    g.wptr[1] = 0
    g.submit(1, pm4.write_data(DATA + 4, [6]))
    assert g.m32[DATA // 4 + 1] == 6
    # and the other way round: queue 0 fails, queue 1 runs, Q0's reset (not SOFT_RESET) revives it
    g.submit(0, [pm4.header(0x7B, 0), 0])
    assert regs.STATUS.ERROR.get(g.r(regs.STATUS)) and ih_spec.decode(g.m32[IH // 4 + 8: IH // 4 + 16].tolist())["RING_ID"] == 0
    g.submit(1, pm4.write_data(DATA + 8, [7]))
    assert g.m32[DATA // 4 + 2] == 7
    g.dev.mmio_write32(regs.CP_QUEUE_RESET.addr(), regs.CP_QUEUE_RESET.Q0.mask)
    assert g.r(regs.CP_ERROR) == 0 and g.r(regs.RB_RPTR) == 0 and g.r(regs.CP_HQD1_RB_RPTR) == g.wptr[1]
    g.wptr[0] = 0
    g.submit(0, pm4.write_data(DATA + 12, [8]))
    assert g.m32[DATA // 4 + 3] == 8
