"""AXI4 mux: N masters share one AXI4 master port.

ID convention: the mux owns the top ceil(log2 N) bits of the downstream ID and puts the
master's index there; a master keeps the low `id_width − sel_bits` bits. Every port
has the same `AXI4Signature(addr_width, data_width, id_width)`, so components connect
with `wiring.connect` unchanged, but master i must only use IDs below
2**(id_width − sel_bits) (their top bits are replaced). With id_width 4 and 2 masters:
master 0's ID k goes out as k, master 1's as 8 + k; R and B come back to the master
named by those top bits, with the master's own ID.

- AR and AW: without a register stage, parked on the last master (its READY starts from
  the mux's registers and the downstream READY), the others round-robin whenever it is idle, and
  turns alternate when both wait; a master that was offered but not yet accepted keeps
  the grant until it is, so the downstream VALID and payload stay put (AXI A3.2.1). The
  master's READY is the downstream READY while it holds the grant.
- W: AXI4 has no WID, so W bursts go in AW order: each accepted AW queues its master's
  index (`w_order_depth` deep; a full queue holds AW back), and the W channel is
  locked to the master at the head of that queue until its WLAST beat. A master that
  offers W before its AW is granted waits (AXI allows it; every master here raises AW
  no later than W).
- R and B: routed by the top ID bits, combinationally (no added latency).
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from .bus import AXI4Signature

AR_FIELDS = ("araddr", "arlen", "arsize", "arburst")
AW_FIELDS = ("awaddr", "awlen", "awsize", "awburst")
W_FIELDS = ("wdata", "wstrb", "wlast")


class AXI4Mux(wiring.Component):
    """`s[i]`: the port master i connects to; `m`: the shared downstream master port."""

    def _invalid(self, message: str) -> ValueError:
        self._MustUse__used = True  # not built, so not "created but never used" either
        return ValueError(message)

    def __init__(self, n: int = 2, addr_width: int = 48, data_width: int = 64, id_width: int = 4,
                 w_order_depth: int = 16, req_user: int = 0, resp_user: int = 0):
        """`req_user`/`resp_user`: AxUSER and xUSER widths (rtl/bus.py), routed with their channel."""
        if not isinstance(n, int) or n < 1:
            raise self._invalid(f"AXI4Mux needs at least one master, not {n!r}")
        self.n = n
        self.sel_bits = ceil_log2(n)
        if id_width <= self.sel_bits:
            raise self._invalid(f"id_width {id_width} leaves no ID bits for the masters "
                             f"({self.sel_bits} select the master)")
        if w_order_depth < 1 or w_order_depth & (w_order_depth - 1):
            raise self._invalid(f"w_order_depth must be a power of two, not {w_order_depth!r}")
        self.addr_width = addr_width
        self.data_width = data_width
        self.id_width = id_width
        self.master_id_bits = id_width - self.sel_bits
        self.w_order_depth = w_order_depth
        self.resp_user = resp_user
        sig = AXI4Signature(addr_width, data_width, id_width, req_user, resp_user)
        self.ar_fields = AR_FIELDS + (("aruser",) if req_user else ())
        self.aw_fields = AW_FIELDS + (("awuser",) if req_user else ())
        super().__init__({"s": In(sig).array(n), "m": Out(sig)})

    def downstream_id(self, master: int, id_: int) -> int:
        """The ID master `master`'s `id_` carries on the shared port."""
        if not 0 <= id_ < (1 << self.master_id_bits):
            raise ValueError(f"master ID {id_} does not fit in {self.master_id_bits} bits")
        return (master << self.master_id_bits) | id_

    def elaborate(self, platform):
        m = Module()
        n, sb, low = self.n, self.sel_bits, self.master_id_bits
        s, out = self.s, self.m

        if n == 1:
            wiring.connect(m, wiring.flipped(s[0]), wiring.flipped(out))
            return m

        def tag(i, id_):
            return Cat(id_[:low], Const(i, sb))

        def arbiter(name, valids, ready):
            """Grant that holds while its VALID waits for `ready`, parked on the last master.

            The last master (the DMA engine in the front end) is served whenever it is its
            turn (`turn`, a register: it is its turn unless another master waits since its
            last burst), so its READY depends on registers of the mux and its own VALID
            only: no path runs from the other masters' VALIDs into its handshake. The others
            are served in round-robin order whenever the last one is not offered on its turn
            (no cycle lost while it is idle), and alternate with it when both are busy.

            Returns (sel, valid, parked): the granted master, whether any master is offered and
            whether the last master holds the grant (for its READY: from registers)."""
            P = n - 1
            rr = Signal(range(max(P, 2)), name=f"{name}_rr")  # (a zero-bit signal is not valid Verilog)
            turn = Signal(init=1, name=f"{name}_turn")  # the parked master's turn
            lock = Signal(name=f"{name}_lock")
            lock_sel = Signal(range(n), name=f"{name}_lock_sel")
            pick = Signal(range(n), name=f"{name}_pick")  # among the others, round robin from rr
            m.d.comb += pick.eq(P)  # (none of them offered)
            for r in range(P):
                with m.If(rr == r):
                    for k in reversed(range(P)):  # the last assignment wins: r first
                        idx = (r + k) % P
                        with m.If(valids[idx]):
                            m.d.comb += pick.eq(idx)
            others = Signal(name=f"{name}_others")
            m.d.comb += others.eq(Cat(*valids[:P]).any())
            sel = Signal(range(n), name=f"{name}_sel")
            valid = Signal(name=f"{name}_valid")
            with m.If(lock):
                m.d.comb += [sel.eq(lock_sel), valid.eq(Array(valids)[lock_sel])]
            with m.Elif(turn & valids[P]):
                m.d.comb += [sel.eq(P), valid.eq(1)]
            with m.Else():
                m.d.comb += [sel.eq(pick), valid.eq(others)]
            with m.If(valid & ~ready):
                m.d.sync += [lock.eq(1), lock_sel.eq(sel)]
            with m.If(valid & ready):
                m.d.sync += lock.eq(0)
                with m.If(sel == P):
                    m.d.sync += turn.eq(~others)  # the others' turn if one waits
                with m.Else():
                    if P > 1:
                        m.d.sync += rr.eq(Mux(sel == P - 1, 0, sel + 1))
                    m.d.sync += turn.eq(1)
            with m.If(~valid):
                m.d.sync += turn.eq(1)
            # The parked master's grant from registers alone: unlocked, it is granted on its
            # turn. Off its turn the others are offered (`turn` falls only when the last one
            # is served while another waits, and a master that waits keeps its VALID until
            # its handshake), so `sel == P` would say the same when it offers, and its READY
            # no longer waits for the others' VALIDs and the round robin (issue 14: the top's
            # path from the CP writer's AWVALID, through the pick, into the SDMA's DMA engine's
            # write-response queue). READY while it does not offer is allowed (AXI A3.2.1).
            parked = Signal(name=f"{name}_parked")
            m.d.comb += parked.eq(Mux(lock, lock_sel == P, turn))
            return sel, valid, parked

        # ---- AR
        ar_sel, ar_valid, ar_parked = arbiter("ar", [p.arvalid for p in s], out.arready)
        m.d.comb += [
            out.arvalid.eq(ar_valid),
            out.arid.eq(Array(tag(i, p.arid) for i, p in enumerate(s))[ar_sel]),
        ]
        for f in self.ar_fields:
            m.d.comb += getattr(out, f).eq(Array(getattr(p, f) for p in s)[ar_sel])
        for i, p in enumerate(s):
            m.d.comb += p.arready.eq(out.arready & (ar_parked if i == n - 1 else ar_sel == i))

        # ---- AW, and the order W bursts must follow
        Dw = self.w_order_depth
        qb = exact_log2(Dw)
        wq = Array(Signal(range(n), name=f"wq{i}") for i in range(Dw))
        wq_wp = Signal(qb + 1)
        wq_rp = Signal(qb + 1)
        # full, as a register: AWREADY goes to every master's AW logic (the DMA engines' next
        # burst) in the cycle it is decided, so it starts from a flip-flop, not from a compare
        # of the pointers. It is worked out for the next cycle from the late push and pop: a
        # push alone fills the queue if one entry was free, a pop empties a slot.
        wq_full = Signal()
        wq_one_free = Signal()
        m.d.comb += wq_one_free.eq((wq_wp + 1)[:qb + 1] == (wq_rp ^ (1 << qb)))

        def wq_index(p):
            return p[:qb] if qb else Const(0, 1)

        aw_ready = Signal()
        m.d.comb += aw_ready.eq(out.awready & ~wq_full)
        aw_sel, aw_valid, aw_parked = arbiter("aw", [p.awvalid for p in s], aw_ready)
        m.d.comb += [
            out.awvalid.eq(aw_valid & ~wq_full),
            out.awid.eq(Array(tag(i, p.awid) for i, p in enumerate(s))[aw_sel]),
        ]
        for f in self.aw_fields:
            m.d.comb += getattr(out, f).eq(Array(getattr(p, f) for p in s)[aw_sel])
        for i, p in enumerate(s):
            m.d.comb += p.awready.eq(aw_ready & (aw_parked if i == n - 1 else aw_sel == i))
        # (the free slot at wq_wp takes the granted master every cycle; the handshake, which
        # comes late, only moves wq_wp)
        with m.If(~wq_full):
            m.d.sync += wq[wq_index(wq_wp)].eq(aw_sel)
        with m.If(out.awvalid & out.awready):
            m.d.sync += wq_wp.eq(wq_wp + 1)

        # ---- W: locked to the master of the oldest AW whose W burst is unfinished. The head of
        # the order queue is kept in a register (`w_sel`, `w_ok`), worked out for the next
        # cycle from the queue as it will be, so WREADY and the W multiplexer start from
        # flip-flops.
        w_sel = Signal(range(n))
        w_ok = Signal()  # the queue is not empty: w_sel names the master W follows
        m.d.comb += out.wvalid.eq(w_ok & Array(p.wvalid for p in s)[w_sel])
        for f in W_FIELDS:
            m.d.comb += getattr(out, f).eq(Array(getattr(p, f) for p in s)[w_sel])
        for i, p in enumerate(s):
            m.d.comb += p.wready.eq(out.wready & w_ok & (w_sel == i))
        w_done = Signal()  # the head's burst ends (late: WLAST and WVALID come from the master)
        m.d.comb += w_done.eq(out.wvalid & out.wready & out.wlast)
        aw_push = Signal()
        m.d.comb += aw_push.eq(out.awvalid & out.awready)
        # the next head either way, worked out before w_done: after the burst, the entry behind
        # it (or the one pushed now, if there is none); otherwise the head stays (or the one
        # pushed now, if the queue is empty)
        rp1 = Signal.like(wq_rp)
        m.d.comb += rp1.eq(wq_rp + 1)
        last_entry = Signal()
        m.d.comb += last_entry.eq(rp1 == wq_wp)
        with m.If(w_done):
            m.d.sync += [wq_rp.eq(rp1), w_ok.eq(~last_entry | aw_push),
                         w_sel.eq(Mux(last_entry, aw_sel, wq[wq_index(rp1)]))]
        with m.Else():
            m.d.sync += [w_ok.eq(w_ok | aw_push), w_sel.eq(Mux(w_ok, w_sel, aw_sel))]
        with m.If(aw_push & ~w_done):
            m.d.sync += wq_full.eq(wq_one_free)
        with m.Elif(w_done & ~aw_push):
            m.d.sync += wq_full.eq(0)

        # ---- R and B: by the top ID bits. An ID naming no master is taken and dropped.
        r_sel = out.rid[low:]
        b_sel = out.bid[low:]
        readies_r = [p.rready for p in s] + [Const(1)] * ((1 << sb) - n)
        readies_b = [p.bready for p in s] + [Const(1)] * ((1 << sb) - n)
        m.d.comb += [out.rready.eq(Array(readies_r)[r_sel]), out.bready.eq(Array(readies_b)[b_sel])]
        for i, p in enumerate(s):
            m.d.comb += [
                p.rvalid.eq(out.rvalid & (r_sel == i)), p.rid.eq(out.rid[:low]),
                p.rdata.eq(out.rdata), p.rresp.eq(out.rresp), p.rlast.eq(out.rlast),
                p.bvalid.eq(out.bvalid & (b_sel == i)), p.bid.eq(out.bid[:low]),
                p.bresp.eq(out.bresp),
            ]
            if self.resp_user:
                m.d.comb += [p.ruser.eq(out.ruser), p.buser.eq(out.buser)]
        return m
