"""cp_errors: errors are terminal and precise (rtl/cp/parser.py, errors.py, ih.py): no
packet after an error, only the CP_ERROR entry written, once; the latch holds; SOFT_RESET
clears it and ends once the bus is quiet."""

from amaranth.hdl import Cat, Signal

from rtl.cp import ih as cp_ih
from rtl.cp.writer import WriteSource
from spec import ih as ih_spec

from ... import properties
from . import reset


def build(h, m, b, csr, cp):
    err = b("err")
    in_reset = h.state("RESET")
    was = h.past
    writer_take = h.writer_start()

    # after an error latches no packet starts: the parser consumes no header
    h.prove("no_packet_after_error", ~(err & h.state("RUN") & b("pop")))

    # once the CP has left the packet in hand (ERR_DRAIN), it writes only the CP_ERROR
    # IH entry and the IH_WPTR write-back, and reads nothing
    drained = Signal()
    with m.If(h.state("ERR_DRAIN")):
        m.d.sync += drained.eq(1)
    with m.If(in_reset):
        m.d.sync += drained.eq(0)
    slot = (b("ih_base") + (b("ih_wptr") & (b("ih_bytes") - 1)))[:48]
    wb_addr = Cat(csr.ih_wptr_addr_lo, csr.ih_wptr_addr_hi)
    block = b("req_block", "writer")
    ih_write = (block == slot[5:]) | (block == wb_addr[5:])
    reads = Cat(*(b("arvalid", f"fetch{i}") & b("arready", f"fetch{i}") for i in range(3))).any() | \
        b("poll_taken")
    h.prove("only_ih_after_error", ~drained | ((~writer_take | ih_write) & ~reads))
    # (its step needs the poll request tied to WRM_READ, which needs the poll's place in the
    # memory's queue: cp_reset's invariants of the poll)
    reset.poll_invariants(h, m, b, cp)
    # (an entry of the error's, or another engine's taken in ERROR, which returns there)
    reporting = Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any() & \
        (b("ih_err") | (b("ih_ext") & (b("ih_ret") == cp_ih.RET_ERROR)))
    stopping = h.state("ERR_DRAIN") | reporting | h.state("ERROR")
    # (a parser error is captured a cycle before it latches, since issue 14: err_any has both)
    h.invariant(~stopping | b("err_any"))
    h.invariant(~err | stopping | in_reset | b("err_pending"))
    h.invariant(~drained | stopping | in_reset)
    quiet_fetch = ~Cat(*(b("active", f"fetch{i}") for i in range(3))).any() & ~b("ring_running")
    h.invariant(~(drained & ~h.state("ERR_DRAIN")) | quiet_fetch | in_reset)

    # one CP_ERROR entry per error
    entries = Signal(2)
    with m.If(h.started & writer_take & (b("wr_src") == WriteSource.IH) & b("ih_err") &
              (entries != 3)):
        m.d.sync += entries.eq(entries + 1)
    with m.If(in_reset):
        m.d.sync += entries.eq(0)
    h.prove("one_error_entry", entries <= 1)
    after_entry = Cat(*(h.state(st) for st in ("IH_ENTRY_WAIT", "IH_WB_WRITE", "IH_WB_WAIT",
                                                  "IH_DONE", "ERROR"))).any()
    in_ih = Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any()
    # (another engine's entry, taken in ERROR, returns there; its source is the engine's)
    ext, ext_in_error = b("ih_ext"), b("ih_ext") & (b("ih_ret") == cp_ih.RET_ERROR)
    h.invariant((entries == 0) | in_reset | (after_entry & b("ih_err")) | h.state("ERROR") |
                (in_ih & ext_in_error))
    h.invariant(~in_ih | ext | (b("ih_src") == ih_spec.Source.CP_ERROR) | (b("ih_src") == ih_spec.Source.EOP) |
                (b("ih_src") == ih_spec.Source.VM_FAULT))
    h.invariant(~in_ih | ext | (b("ih_err") == (b("ih_src") != ih_spec.Source.EOP)))
    h.invariant(~h.state("IH_ENTRY_WRITE") | ~b("err") | b("ih_err") | ext_in_error |
                   ~drained)

    # the first error is the one reported: the latch holds until soft reset
    latch = Cat(b("err_code"), b("err_level"), b("err_opcode"), b("err_addr"), b("err_offset"))
    h.prove("latch_holds", ~(h.started & was(err) & ~was(in_reset)) | (err & (latch == was(latch))))

    # soft reset: clean and idle, within a bound once the memory answers within L cycles
    left = was(in_reset) & ~in_reset
    h.prove("reset_clears", ~(h.started & left) |
               (h.state("RUN") & (b("rptr") == 0) & (b("wptr") == 0) & (b("ring_pos") == 0) &
                (b("ih_wptr") == 0) & ~err & (b("level") == 0)))
    # once the bus is quiet (the writer's one write answered, no poll outstanding; the
    # DMA engine is not in this harness) RESET ends in the next cycle
    quiet = ~b("busy", "writer") & ~b("poll_pending")
    h.prove("reset_bounded", ~(h.started & was(in_reset & quiet & ~csr.control_soft_reset)) |
               h.state("RUN"))

    for code in properties._cp_error_codes():
        h.cover(f"error_{code.name.lower()}", err & (b("err_code") == code))
    h.cover("reset_after_error", left & was(drained))

