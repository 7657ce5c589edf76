"""What the CP shows in the CSR block: STATUS, the CP_ERROR registers, the interrupt
events, and the performance counters (docs/hardware.md, "Counters and time").

STATUS and the counters come from registers (issue 14): the CSR block's read multiplexer
then starts from flip-flops, not from the CP's state machine. So STATUS shows the CP as it
was a cycle before, and a counter counts an event a cycle after it (a PERF_CLEAR drops
what is on its way, as it dropped what happened before it); IH_PENDING is worked out from
what IH_WPTR becomes, so the interrupt line rises as early as before.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Cat, Mux, Signal

from spec import ih as ih_spec
from spec import packets as pk

from ..csr import CpError


def drive(c):
    m, csr, cp = c.m, c.csr, c.cp
    idle = Signal(name="idle", init=1)
    quiet = Signal(name="quiet")
    m.d.comb += quiet.eq(~c.writer.busy & ~c.poll_pending & ~c.ar_valid &
                         ~Cat(*[f.busy for f in c.fetchers]).any())
    # Not idle in the cycle after a doorbell (it moves wptr, or raises an error, a cycle
    # later: a STATUS read right after the write's response would show an idle CP with its
    # work or its error on the way), nor while a doorbell error is pending in RUN at the
    # ring's end, before the parser drains to ERROR. Both terms are registers.
    m.d.sync += idle.eq(quiet & ~c.dma_busy & (c.fsm.ongoing("ERROR") |
                        (c.fsm.ongoing("RUN") & (c.level == 0) & (c.ring_pos == c.wptr) &
                         ~c.err_pending & ~c.csr.rb_doorbell_swmod)))
    m.d.comb += cp.idle.eq(idle)

    status = {name: Signal(name=f"status_{name}") for name in ("halted", "rb_empty", "waiting")}
    m.d.sync += [status["halted"].eq(c.halted), status["rb_empty"].eq(c.rptr == c.wptr),
                 status["waiting"].eq(c.waiting)]
    # IH_WPTR != IH_RPTR as it is next cycle: IH_WPTR moves by an entry when one is written
    ih_pending = Signal(name="ih_pending")
    m.d.sync += ih_pending.eq(Mux(c.ih_clear, csr.ih_rptr != 0,
                                  Mux(c.ih_advance, c.ih_wptr + ih_spec.ENTRY_BYTES != csr.ih_rptr,
                                      c.ih_wptr != csr.ih_rptr)))
    # an IH overflow a cycle late, dropped if it came from a first step whose checks failed
    ovf_r = Signal(name="ovf_r")
    m.d.sync += ovf_r.eq(c.ovf_set)
    ovf = ovf_r & ~c.failed
    m.d.comb += [
        csr.rb_rptr.eq(c.rptr), csr.rb_wptr.eq(c.wptr), csr.ih_wptr.eq(c.ih_wptr),
        csr.status_idle.eq(idle), csr.status_halted.eq(status["halted"]), csr.status_error.eq(c.err),
        csr.status_rb_empty.eq(status["rb_empty"]), csr.status_waiting.eq(status["waiting"]),
        csr.status_level.eq(c.level),
        csr.cp_error_code.eq(Mux(c.err, c.err_code, 0)), csr.cp_error_level.eq(c.err_level),
        csr.cp_error_opcode.eq(c.err_opcode),
        csr.cp_error_addr_lo.eq(c.err_addr[:32]), csr.cp_error_addr_hi.eq(c.err_addr[32:48]),
        csr.cp_error_offset.eq(c.err_offset),
        csr.int_status_ih_pending.eq(ih_pending),
        csr.int_status_eop_set.eq(c.eop_set | csr.int_force_eop),
        csr.int_status_cp_error_set.eq(c.cperr_set | csr.int_force_cp_error),
        csr.int_status_ih_overflow_set.eq(ovf | csr.int_force_ih_overflow),
    ]

    # VM_FAULT_*: the latched error's fault details, while that error is a VM fault
    vmf = Signal(name="vm_fault")
    m.d.comb += vmf.eq(c.err & (c.err_code == CpError.VM_FAULT))
    m.d.comb += [
        csr.vm_fault_status_vmid.eq(Mux(vmf, c.err_vmid, 0)),
        csr.vm_fault_status_access.eq(Mux(vmf, c.err_access, 0)),
        csr.vm_fault_status_level.eq(Mux(vmf, c.err_user.level, 0)),
        csr.vm_fault_status_cause.eq(Mux(vmf, c.err_user.cause, 0)),
        csr.vm_fault_addr_lo.eq(Mux(vmf, c.err_addr[:32], 0)),
        csr.vm_fault_addr_hi.eq(Mux(vmf, c.err_addr[32:48], 0)),
    ]

    # the counters' increments, a cycle late (and dropped by PERF_CLEAR, as events before it are)
    def late(v, name):
        r = Signal(name=name)
        m.d.sync += r.eq(v & ~csr.control_perf_clear)
        return r

    busy_cycles = Signal(32, name="busy_cycles")
    stall_cycles = Signal(32, name="stall_cycles")
    dwords = Signal(32, name="dwords")
    packets = [Signal(32, name=f"packets{i}") for i in range(len(pk.PACKETS))]
    stalled = late(c.stall, "stalled")
    popped = late(c.pop, "popped")
    counted = []
    for i in range(len(pk.PACKETS)):
        # each counter its own increment (no multiplexer of eight counters by `kind`); a packet
        # whose checks failed was counted as it started and is dropped here (`failed`)
        inc = late(c.perf_count_kind & (c.kind == i), f"counted{i}") & ~c.failed
        if i == pk.NOP.index:
            inc = inc | late(c.perf_count_nop, "counted_nop")
        if i == pk.DMA_DATA.index:
            inc = inc | late(c.perf_count_dma, "counted_dma")
        counted.append(inc)
    with m.If(csr.control_perf_clear):
        m.d.sync += [busy_cycles.eq(0), stall_cycles.eq(0), dwords.eq(0)]
        m.d.sync += [n.eq(0) for n in packets]
    with m.Else():
        m.d.sync += [
            busy_cycles.eq(busy_cycles + ~idle),
            stall_cycles.eq(stall_cycles + (stalled & ~idle)),
            dwords.eq(dwords + popped),
        ]
        m.d.sync += [packets[i].eq(packets[i] + counted[i]) for i in range(len(pk.PACKETS))]
    m.d.comb += [
        csr.perf_busy_cycles.eq(busy_cycles), csr.perf_stall_cycles.eq(stall_cycles),
        csr.perf_dwords_fetched.eq(dwords),
    ]
    for i in range(len(pk.PACKETS)):
        m.d.comb += getattr(csr, f"perf_packets_{i}").eq(packets[i])
