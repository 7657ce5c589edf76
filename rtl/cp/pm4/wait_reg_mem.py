"""WAIT_REG_MEM: read the dword at addr until (value & mask) FUNCTION ref holds, sleeping
POLL_INTERVAL cycles between reads; STATUS.WAITING is set meanwhile. The poll read
shares the AR channel with the fetchers (rtl/cp/processor.py).

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Array, Mux, Signal
from amaranth.utils import ceil_log2

from spec import packets as pk

from ...bus import RESP_OKAY
from ...csr import CpError
from .. import errors, ih
from ..packets import field, value

WRM = pk.WAIT_REG_MEM


def states(c):
    m, state, p, bus = c.m, c.state, c.p, c.bus
    dpb = c.dpb
    # (the read is requested from a register, set on the way into WRM_READ and cleared once
    # the read is taken, or by a soft reset: processor.py)
    with state("EXEC_WAIT_REG_MEM"):
        m.d.sync += [c.poll_addr.eq(value(p, WRM, "addr", c.aw)), c.poll_req.eq(~c.oob),
                     Array(c.reparse_q)[c.q].eq(0), Array(c.park_q)[c.q].eq(0)]  # (a parked poll: queues.py)
        m.next = "WRM_READ"
    with state("WRM_READ"):
        with m.If(c.oob):
            c.fail(CpError.BUS_DECERR)  # at poll_addr
        with m.Else():
            m.d.comb += c.waiting.eq(1)
            with m.If(c.poll_taken):
                m.next = "WRM_RESP"
    with state("WRM_RESP"):
        m.d.comb += [c.waiting.eq(1), c.stall.eq(1)]
        word = bus.rdata.word_select(c.poll_addr[2:2 + ceil_log2(dpb)], 32) if dpb > 1 else bus.rdata
        masked = Signal(32)
        ref = field(p, WRM, "REFERENCE")
        m.d.comb += masked.eq(word & field(p, WRM, "MASK"))
        fn = field(p, WRM, "FUNCTION")
        funcs = WRM.field("FUNCTION").values
        # One subtraction's borrow (less than) and one equality, and which of below, equal and
        # above each FUNCTION accepts, from the packet's registers: the answer is a LUT after
        # them. (Six compares, four of them carry chains, and a multiplexer by FUNCTION after
        # them put three levels of wide multiplexers between the chain and the state:
        # `cp_32`'s critical path on seeds 2 and 3, `cp.failed` / `cp.cp_state` -> the poll's
        # compare -> `cp_state`, 10.2-10.8 ns.) A FUNCTION outside the table accepts nothing.
        diff = Signal(33)
        m.d.comb += diff.eq(masked - ref)
        below, equal = diff[32], masked == ref
        ok_below, ok_equal, ok_above = Signal(), Signal(), Signal()
        accepts = {"ALWAYS": "<=>", "LT": "<", "LE": "<=", "EQ": "=", "NE": "<>", "GE": "=>", "GT": ">"}
        for name, which in accepts.items():
            with m.If(fn == funcs[name]):
                m.d.comb += [ok_below.eq("<" in which), ok_equal.eq("=" in which), ok_above.eq(">" in which)]
        ok = Signal()
        m.d.comb += ok.eq(Mux(below, ok_below, Mux(equal, ok_equal, ok_above)))
        # (the timer is loaded while the read is on its way: WRM_SLEEP counts it down)
        m.d.sync += c.poll_timer.eq(field(p, WRM, "POLL_INTERVAL"))
        with m.If(c.poll_rvalid):
            with m.If(bus.rresp != RESP_OKAY):
                c.fail(errors.BUS)  # at poll_addr
            with m.Elif(ok):
                m.next = "DONE"
            with m.Else():
                m.next = "WRM_SLEEP"
    with state("WRM_SLEEP"):
        m.d.comb += c.waiting.eq(1)
        m.d.sync += c.poll_timer.eq(c.poll_timer - 1)
        with m.If(c.err_pending_any):
            m.next = "ERR_DRAIN"
        with m.Elif(c.cp.ext_ih_valid):
            ih.start_ext(c, ih.RET_WRM)  # (the SDMA's entry: a CP poll may wait forever)
        with m.Elif(c.other_can & ~c.csr.control_halt):
            # the other CP queue can run: this one yields, rewound to the packet's header
            # (at the ring level its rptr), parked for POLL_INTERVAL cycles (queues.py); a cycle
            # later if its doorbell is written now (an error of it latches first). Not while
            # CONTROL.HALT holds the CP: no queue can run then, and a yielded wait would stay
            # undone (rptr before it) until the halt ends, where the contract finishes it.
            with m.If(~c.db_write_active):
                with m.If(c.level == 0):
                    m.d.sync += c.ring_pos.eq(c.rptr)
                with m.Else():
                    m.d.sync += c.ib_pos[c.level].eq(c.hdr_off)
                m.d.sync += [Array(c.park_q)[c.q].eq(1), Array(c.reparse_q)[c.q].eq(1),
                             Array(c.park_timer_q)[c.q].eq(field(p, WRM, "POLL_INTERVAL"))]
                m.next = "SWAP"
        with m.Elif(c.poll_timer <= 1):
            m.d.sync += c.poll_req.eq(1)
            m.next = "WRM_READ"
