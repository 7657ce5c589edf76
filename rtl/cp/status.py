"""What the CP shows in the CSR block: STATUS, the CP_ERROR registers, the interrupt
events, and the performance counters (docs/hardware.md, "Counters and time").

STATUS and the counters come from registers (issue 14): the CSR block's read multiplexer
then starts from flip-flops, not from the CP's state machine. So STATUS shows the CP as it
was a cycle before, and a counter counts an event a cycle after it (a PERF_CLEAR drops
what is on its way, as it dropped what happened before it); IH_PENDING is worked out from
what IH_WPTR and IH_RPTR become, so the interrupt line rises and drops as early as before.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Mux, Signal

from spec import ih as ih_spec
from spec import packets as pk

from ..csr import CpError
from ..mmu import RESP_USER
from ..perf import CounterBank


def drive(c):
    m, csr, cp = c.m, c.csr, c.cp
    quiet = Signal(name="quiet")
    m.d.comb += quiet.eq(~c.writer.busy & ~c.poll_pending & ~c.ar_valid &
                         ~Cat(*[f.busy for f in c.fetchers]).any())
    # Not idle in the cycle after a doorbell (it moves wptr, or raises an error, a cycle
    # later: a STATUS read right after the write's response would show an idle CP with its
    # work or its error on the way), nor while a doorbell error is pending in RUN at the
    # ring's end, before the parser drains to ERROR. Both terms are registers.
    # Each queue's (queues.py): the active one's from the state machine, the other's from
    # its shadow registers (idle at a packet boundary of the ring with nothing to do, or
    # stopped by an error); neither is idle while its reset or a doorbell error waits.
    q, sh = c.q, c.sh
    act_idle = Signal(name="act_idle")
    m.d.comb += act_idle.eq(quiet & ~c.dma_busy & (c.fsm.ongoing("ERROR") |
                            (c.fsm.ongoing("RUN") & (c.level == 0) & (c.ring_pos == c.ring_end) &
                             ~c.err_pending & ~c.qc.swmod)))
    qidle = [Signal(name=f"idle_q{i}", init=1) for i in range(2)]
    qwait = [Signal(name=f"waiting_q{i}") for i in range(2)]
    for i in range(2):
        o = c.ports[i]
        sh_idle = sh["err"][0] | ((sh["level"][0] == 0) & (sh["ring_pos"][0] == c.wptr_q[i]) & ~c.park_q[i] &
                                  ~o.swmod)
        # A parked poll shows WAITING until its packet, parsed again, polls; a queue stopped
        # by an error polls no more, its park left for the reset to clear: a queue swapped
        # back in with its park, stopped by its doorbell error before it polled again, read
        # WAITING 1 beside ERROR until its reset (driver-writer-9; resume() clears the park
        # only for an error that waited while the queue was out)
        m.d.sync += [qidle[i].eq(Mux(q == i, act_idle, sh_idle) & ~c.qr_pend_q[i] & ~c.dbpend_q[i]),
                     qwait[i].eq(Mux(q == i, c.waiting | (c.park_q[i] & ~c.err), c.park_q[i] & ~sh["err"][0]))]
    idle = Signal(name="idle")  # both queues (PERF_BUSY_CYCLES counts cycles either is busy)
    m.d.comb += [idle.eq(qidle[0] & qidle[1]), cp.idle.eq(idle)]

    status = {name: Signal(name=f"status_{name}") for name in ("halted",)}
    # HALTED, once shown, holds while CONTROL.HALT does: with HALT set the parser starts no
    # packet, but it leaves the states that show `halted` to latch the other queue's doorbell
    # error (a switch, the drain, its IH entry), to switch to a queue given work while the
    # other is stopped, or to write another engine's IH entry; HALTED read 0 meanwhile (about
    # 18 cycles for the doorbell error), a CP that seemed to run. Queue 0's own error shows
    # ERROR instead, as before (STATUS is queue 0's).
    halt_keep = Signal(name="halt_keep")
    m.d.sync += halt_keep.eq(csr.control_halt & (halt_keep | c.halted))
    # IH_WPTR != IH_RPTR as both are next cycle: IH_WPTR moves by an entry when one is
    # written, IH_RPTR by the driver's MMIO write (ih_rptr_next), so the line drops in the
    # cycle the handler's write is answered, not a cycle later (which the KMD's interrupt
    # wait saw as one more, spurious, interrupt after every one)
    ih_pending = Signal(name="ih_pending")
    rptr = csr.ih_rptr_next
    m.d.sync += ih_pending.eq(Mux(c.ih_clear, rptr != 0,
                                  Mux(c.ih_advance, c.ih_wptr + ih_spec.ENTRY_BYTES != rptr, c.ih_wptr != rptr)))
    # an IH overflow a cycle late, dropped if it came from a first step whose checks failed
    ovf_r = Signal(name="ovf_r")
    m.d.sync += ovf_r.eq(c.ovf_set)
    ovf = ovf_r & ~c.failed
    # each queue's error latch and level: the active registers or the shadow
    def of(i, name):
        return Mux(q == i, getattr(c, name), sh[name][0])
    m.d.sync += status["halted"].eq(c.halted | (halt_keep & csr.control_halt & ~of(0, "err")))
    rb_empty = [Signal(name=f"rb_empty_q{i}") for i in range(2)]
    m.d.sync += [rb_empty[i].eq(c.rptr_q[i] == c.wptr_q[i]) for i in range(2)]
    m.d.comb += [
        csr.rb_rptr.eq(c.rptr_q[0]), csr.rb_wptr.eq(c.wptr_q[0]), csr.ih_wptr.eq(c.ih_wptr),
        csr.status_idle.eq(qidle[0]), csr.status_halted.eq(status["halted"]), csr.status_error.eq(of(0, "err")),
        csr.status_rb_empty.eq(rb_empty[0]), csr.status_waiting.eq(qwait[0]),
        csr.status_level.eq(of(0, "level")),
        csr.cp_error_code.eq(Mux(of(0, "err"), of(0, "err_code"), 0)), csr.cp_error_level.eq(of(0, "err_level")),
        csr.cp_error_opcode.eq(of(0, "err_opcode")),
        csr.cp_error_addr_lo.eq(of(0, "err_addr")[:32]), csr.cp_error_addr_hi.eq(of(0, "err_addr")[32:48]),
        csr.cp_error_offset.eq(of(0, "err_offset")),
        csr.cp_hqd1_rb_rptr.eq(c.rptr_q[1]), csr.cp_hqd1_rb_wptr.eq(c.wptr_q[1]),
        csr.cp_hqd1_status_idle.eq(qidle[1]), csr.cp_hqd1_status_error.eq(of(1, "err")),
        csr.cp_hqd1_status_rb_empty.eq(rb_empty[1]), csr.cp_hqd1_status_waiting.eq(qwait[1]),
        csr.cp_hqd1_status_level.eq(of(1, "level")),
        csr.cp_hqd1_error_code.eq(Mux(of(1, "err"), of(1, "err_code"), 0)),
        csr.cp_hqd1_error_level.eq(of(1, "err_level")), csr.cp_hqd1_error_opcode.eq(of(1, "err_opcode")),
        csr.cp_hqd1_error_addr_lo.eq(of(1, "err_addr")[:32]),
        csr.cp_hqd1_error_addr_hi.eq(of(1, "err_addr")[32:48]),
        csr.cp_hqd1_error_offset.eq(of(1, "err_offset")),
        csr.int_status_ih_pending.eq(ih_pending),
        csr.int_status_eop_set.eq(c.eop_set | csr.int_force_eop),
        csr.int_status_cp_error_set.eq(c.cperr_set | csr.int_force_cp_error),
        csr.int_status_ih_overflow_set.eq(ovf | csr.int_force_ih_overflow),
    ]

    # VM_FAULT_*: the latched error's fault details, while that error is a VM fault
    # (of the queue it stopped; queue 0's when both are)
    vmfq = [Signal(name=f"vm_fault_q{i}") for i in range(2)]
    m.d.comb += [vmfq[i].eq(of(i, "err") & (of(i, "err_code") == CpError.VM_FAULT)) for i in range(2)]
    vmf = Signal(name="vm_fault")
    m.d.comb += vmf.eq(vmfq[0] | vmfq[1])
    fq = Signal(name="vm_fault_q")  # the queue whose fault VM_FAULT_* show
    m.d.comb += fq.eq(~vmfq[0])
    from_fq = Signal(name="vm_fault_from_active")
    m.d.comb += from_fq.eq(fq == q)
    user = Mux(from_fq, c.err_user, sh["err_user"][0])
    m.d.comb += [
        csr.vm_fault_status_vmid.eq(Mux(vmf, Mux(from_fq, c.err_vmid, sh["err_vmid"][0]), 0)),
        csr.vm_fault_status_access.eq(Mux(vmf, Mux(from_fq, c.err_access, sh["err_access"][0]), 0)),
        csr.vm_fault_status_level.eq(Mux(vmf, RESP_USER(user).level, 0)),
        csr.vm_fault_status_cause.eq(Mux(vmf, RESP_USER(user).cause, 0)),
        csr.vm_fault_addr_lo.eq(Mux(vmf, Mux(from_fq, c.err_addr, sh["err_addr"][0])[:32], 0)),
        csr.vm_fault_addr_hi.eq(Mux(vmf, Mux(from_fq, c.err_addr, sh["err_addr"][0])[32:48], 0)),
    ]

    # the counters' increments, a cycle late (and dropped by PERF_CLEAR, as events before it are)
    def late(v, name):
        r = Signal(name=name)
        m.d.sync += r.eq(v & ~csr.control_perf_clear)
        return r

    busy_cycles = Signal(32, name="busy_cycles")
    stall_cycles = Signal(32, name="stall_cycles")
    dwords = Signal(32, name="dwords")
    # each queue's part of `dwords` (PERF_Q0/Q1_DWORDS_FETCHED): the active queue `q` owns
    # every dword popped (one set of fetchers serves both queues, none pops in SWAP)
    q_dwords = [Signal(32, name=f"dwords_q{i}") for i in range(2)]
    # each queue's poll reads (PERF_Q0/Q1_POLLS), counted as the bus takes them: the queue
    # that asked is the active one (a poll is asked and taken in WRM_READ, never across a
    # SWAP). What a job timer needs to tell a queue parked behind the other queue's work
    # (no read since its last look) from one that polled and failed.
    q_polls = [Signal(32, name=f"polls_q{i}") for i in range(2)]
    polled = late(c.poll_taken & ~c.q, "polled_q0")
    polled_q1 = late(c.poll_taken & c.q, "polled_q1")
    stalled = late(c.stall, "stalled")
    popped = late(c.pop & ~c.reparse, "popped")  # (a parked poll's packet counts once: queues.py)
    popped_q1 = late(c.pop & ~c.reparse & c.q, "popped_q1")
    # PERF_PACKETS: a bank in LUTRAM (rtl/perf.py) for the kinds counted as they start, at
    # most one a cycle (a packet's first step and a filler NOP are states of the one FSM); a
    # packet whose checks failed was counted as it started and is dropped here (`failed`).
    # DMA_DATA counts when its transfer is answered, which may be in the same cycle as
    # another packet's start: it keeps a register of its own.
    counted_kind = late(c.perf_count_kind & ~c.reparse, "counted_kind")
    counted_nop = late(c.perf_count_nop, "counted_nop")
    counted_dma = late(c.perf_count_dma, "counted_dma")
    kind_d = Signal(len(c.kind), name="counted_kind_of")
    m.d.sync += kind_d.eq(c.kind)
    m.submodules.perf_packets = bank = CounterBank(1 << (len(pk.PACKETS) - 1).bit_length())
    dma_packets = Signal(32, name="dma_packets")
    m.d.comb += [bank.inc.eq((counted_kind & ~c.failed) | counted_nop),
                 bank.idx.eq(Mux(counted_nop, pk.NOP.index, kind_d)), bank.clear.eq(csr.control_perf_clear),
                 bank.rd_idx.eq(csr.perf_packets_index),
                 csr.perf_packets.eq(Mux(csr.perf_packets_index == pk.DMA_DATA.index, dma_packets, bank.rd_data))]
    with m.If(csr.control_perf_clear):
        m.d.sync += [busy_cycles.eq(0), stall_cycles.eq(0), dwords.eq(0), dma_packets.eq(0),
                     q_dwords[0].eq(0), q_dwords[1].eq(0), q_polls[0].eq(0), q_polls[1].eq(0)]
    with m.Else():
        m.d.sync += [
            busy_cycles.eq(busy_cycles + ~idle),
            stall_cycles.eq(stall_cycles + (stalled & ~idle)),
            dwords.eq(dwords + popped),
            q_dwords[0].eq(q_dwords[0] + (popped & ~popped_q1)),
            q_dwords[1].eq(q_dwords[1] + popped_q1),
            q_polls[0].eq(q_polls[0] + polled),
            q_polls[1].eq(q_polls[1] + polled_q1),
            dma_packets.eq(dma_packets + counted_dma),
        ]
    m.d.comb += [
        csr.perf_busy_cycles.eq(busy_cycles), csr.perf_stall_cycles.eq(stall_cycles),
        csr.perf_dwords_fetched.eq(dwords),
        csr.perf_q0_dwords_fetched.eq(q_dwords[0]), csr.perf_q1_dwords_fetched.eq(q_dwords[1]),
        csr.perf_q0_polls.eq(q_polls[0]), csr.perf_q1_polls.eq(q_polls[1]),
    ]
