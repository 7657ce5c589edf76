"""cp_ring: the ring, the doorbell and RB_RPTR (rtl/cp/parser.py, queues.py): rptr moves forward by
whole ring packets, never past wptr; a bad doorbell is flagged and changes nothing; the rptr
write-back equals RB_RPTR when idle. Its invariants tie the parser's position and payload
counters to the end of the ring packet in hand (a ghost register)."""

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import data

from rtl.cp import packets as cp_packets
from rtl.cp.writer import WriteSource
from rtl.csr import CpError
from spec import packets as pk

from .env import COUNT


def build(h, m, b, csr, cp):
    rptr, wptr, ring_pos = b("rptr"), b("wptr"), b("ring_pos")
    size = Signal(33)
    m.d.comb += size.eq(b("ring_mask") + 1)
    soft = csr.control_soft_reset
    in_reset = h.state("RESET")
    was = h.past

    # rptr: forward, by whole ring packets, never past wptr
    changed = rptr != was(rptr)
    fwd = (rptr - was(rptr))[:32]
    h.prove("rptr_forward", ~(h.started & changed) | was(in_reset) |
               ((fwd != 0) & (fwd <= (was(wptr) - was(rptr))[:32])))
    pkt_end = Signal(32)
    hdr = b("cur_fetch_data")
    tag = data.View(cp_packets.DwordTag(cp.dma_max_log2, cp.addr_width).layout, b("cur_tag"))
    one_dword = tag.filler  # a type-2 dword or AMD's header-only NOP
    with m.If(h.state("RUN") & b("pop") & (b("level") == 0) & ~b("fsm_err")):
        m.d.sync += pkt_end.eq(ring_pos + Mux(one_dword, 1, hdr[COUNT.bits] + 2))
    with m.If(in_reset):
        m.d.sync += pkt_end.eq(0)
    h.prove("rptr_whole_packets", ~(h.started & changed) | was(in_reset) | (rptr == was(pkt_end)))
    h.prove("occupancy", ((wptr - rptr)[:32] <= size) & ((ring_pos - rptr)[:32] <= (wptr - rptr)[:32]))

    # doorbells
    look, v = h.doorbell()
    backwards = (v - wptr)[31]
    overflow = ~backwards & ((v - rptr)[:32] > size)
    fsm_err = b("fsm_err")
    for name, bad, code in (("doorbell_backwards", backwards, CpError.DOORBELL_BACKWARDS),
                            ("doorbell_overflow", overflow, CpError.DOORBELL_OVERFLOW)):
        # (latched two cycles on: captured, then CP_ERROR; wptr stays meanwhile)
        hit = was(was(look & bad & ~fsm_err) & h.started)
        h.prove(name, ~(h.started & hit) |
                   (b("err") & (b("err_code") == code) & (b("err_addr") == was(was(v))) &
                    (wptr == was(was(wptr)))))
    ok = look & ~backwards & ~overflow
    h.prove("doorbell_accepts", ~(h.started & was(ok)) | was(soft) | (wptr == was(v)))
    h.prove("wptr_only_doorbell", ~(h.started & (wptr != was(wptr))) |
               (was(ok) & (wptr == was(v))) | (was(in_reset) & (wptr == 0)))

    # the rptr write-back: the dword last written there (and answered) is RB_RPTR when
    # idle; the data is read where the writer reads it, from the value registers (one
    # dword: both hold it)
    wb_val = Signal(32)
    wb_seen = Signal()
    written = b("wval0")
    writer_done_ok = b("done", "writer") & (b("resp", "writer") == 0)
    with m.If(h.state("RPTR_WAIT") & writer_done_ok):
        m.d.sync += [wb_val.eq(written), wb_seen.eq(1)]
    with m.If(in_reset):
        m.d.sync += wb_seen.eq(0)
    idle = b("idle")
    h.prove("rptr_writeback", ~(idle & ~b("err") & csr.rb_cntl_rptr_wb & wb_seen) | (wb_val == rptr))

    parser_invariants(h, b, cp, pkt_end, rptr, wptr)

    in_wb = h.state("RPTR_WRITE") | h.state("RPTR_WAIT")
    h.invariant(~(wb_seen & ~b("err_any") & ~in_wb & ~in_reset & csr.rb_cntl_rptr_wb) | (wb_val == rptr))
    h.invariant(~(in_wb & csr.rb_cntl_rptr_wb) | ((written == rptr) & (b("wr_src") == WriteSource.VALUE) &
                                                      b("blk_mask").bit_select(csr.rb_rptr_addr_lo[2:5], 1)))

    # covers
    level = b("level")
    h.cover("ring_wrap", h.started & changed & ((rptr & b("ring_mask")) < (was(rptr) & b("ring_mask"))) &
               (rptr & b("ring_mask") != 0))
    h.cover("ib1", level == 1)
    h.cover("ib2", level == 2)
    h.cover("chain", h.state("EXEC_INDIRECT_BUFFER"))
    h.cover("doorbell_ignored", csr.rb_doorbell_swmod & ~csr.rb_cntl_enable & (csr.rb_doorbell != wptr))


def parser_invariants(h, b, cp, pkt_end, rptr, wptr, away=0):
    """The parser's invariants against the end of the ring packet in hand (`pkt_end`, a ghost)
    and the running queue's rptr and wptr: cp_ring's, and cp_queues' for the queue that runs.
    `away`: states in which the parser is not in a packet of the ring (cp_queues: a switch, a
    queue reset), besides cp_ring's. Returns the test "the parser is between packets"."""
    ring_pos = b("ring_pos")
    in_reset = h.state("RESET")
    # induction strengthening: a ring packet's end is where the parser will be when it
    # finishes (the payload still to read, `rem`, counts down to it)
    level = b("level")
    rem = b("rem")
    reporting = Cat(*(h.state(s) for s in h.box.states("cp") if s.startswith("IH_"))).any() & \
        b("ih_err")
    outside = Cat(*(h.state(s) for s in ("RUN", "ERR_DRAIN", "ERROR", "RESET", "RPTR_WRITE",
                                            "RPTR_WAIT", "RING_DONE"))).any() | reporting | away
    h.invariant(~((level == 0) & ~outside) | ((ring_pos + rem)[:32] == pkt_end))
    h.invariant((level == 0) | in_reset | (ring_pos == pkt_end))
    # (a header whose COUNT runs past wptr is refused a cycle after it is taken: bad_count)
    h.invariant(in_reset | b("err_any") | (h.state("PAYLOAD") & b("bad_count")) | away |
                   ((pkt_end - rptr)[:32] <= (wptr - rptr)[:32]))
    h.invariant(~(h.state("PAYLOAD") | h.state("WD_COLLECT")) | (rem != 0))
    # in PAYLOAD the dwords read (pidx) and still to read (rem) add up to the COUNT the
    # header passed with
    kind, pidx = b("kind"), b("pidx")
    for pkt in pk.PACKETS:
        if pkt is pk.NOP:
            continue
        total = rem + pidx
        ok = (total == pkt.max_count + 1) if pkt.min_count == pkt.max_count else (total >= pkt.min_count + 1)
        # (a wrong COUNT is answered in PAYLOAD's first cycle: bad_count)
        h.invariant(~(h.state("PAYLOAD") & (kind == pkt.index) & ~b("bad_count")) |
                       (ok & (pidx < pkt.fixed)))
    wd_states = Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("WD_"))).any()
    # the flags kept a cycle ahead are what they stand for
    fixed_of = Array(Const(pkt.fixed, 4) for pkt in pk.PACKETS)
    h.invariant(~(h.state("PAYLOAD") & ~b("bad_count") & (kind < len(pk.PACKETS))) |
                   ((b("fixed") == fixed_of[kind]) & (b("last_fixed") == (pidx + 1 == b("fixed"))) &
                    (b("rem_is1") == (rem == 1))))
    h.invariant(~wd_states | (b("rem_is1") == (rem == 1)))
    # (and WRITE_DATA's "the next dword ends a block": its position is a block's last, or
    # it is the packet's last)
    wd = pk.WRITE_DATA
    no_incr = cp_packets.field([b(f"p{i}") for i in range(wd.fixed)], wd, "ADDR_INCR") == \
        wd.field("ADDR_INCR").values["NO_INCREMENT"]
    h.invariant(~wd_states | (b("wd_ends") == (((b("wd_addr")[2:5] == 7) & ~no_incr) | (rem == 1))))
    # (RELEASE_MEM's first step reads "beyond the bus" from `oob`, which PAYLOAD loads every
    # cycle from ADDR_HI: right from the cycle after the dword after ADDR_HI was taken)
    rm = pk.RELEASE_MEM
    hi = rm.field(rm.value("addr").fields[1]).dword
    h.invariant(~(h.state("PAYLOAD") & (kind == rm.index) & (pidx >= hi + 2)) |
                   (b("oob") == (b(f"p{hi}")[cp.addr_width - 32:] != 0)))
    h.invariant(~(h.state("WD_WAIT") | h.state("WD_WRITE")) | (b("rem_is0") == (rem == 0)))
    # (a packet's kind comes from its header's tag: the tag function's, a packet's index)
    h.invariant(~h.state("PAYLOAD") | (kind < len(pk.PACKETS)))
    # after its fixed payload only WRITE_DATA has dwords left to read
    tail = [st for st in h.box.states("cp")
            if st == "DONE" or st.startswith(("EXEC_", "WRM_", "RM_", "DMA_"))]
    in_tail = Cat(*(h.state(st) for st in tail)).any() | \
        (Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any() &
         ~b("ih_err"))
    h.invariant(~in_tail | (rem == 0))
    h.invariant(~wd_states | (kind == pk.WRITE_DATA.index))
    h.invariant(~h.state("RING_DONE") | ((level == 0) & (ring_pos == pkt_end)))
    h.invariant(~(h.state("RUN") & (level == 0)) | (ring_pos == rptr))
    after_ring = h.state("RPTR_WRITE") | h.state("RPTR_WAIT")
    h.invariant(~after_ring | ((level == 0) & (ring_pos == rptr) & (pkt_end == rptr)))
    return outside
