"""The AXI4 mux (rtl/axi_mux.py): what the shared master port keeps of its masters' rules.

Two free masters that keep AXI's rules (assumed: VALID held and payload stable until
READY, IDs below 2^(id_width-1)), a free slave that keeps its own (R and B held and
stable until READY). The properties: the downstream port keeps the rules too, every
handshake is exactly one master's, R and B reach the master their ID names, W beats
follow AW order (a ghost FIFO of the masters of forwarded AWs), and no more AWs wait for
their data than the order queue holds.
"""

from amaranth.hdl import Array, Cat, Const, Signal

from rtl.axi_mux import AR_FIELDS, AW_FIELDS, W_FIELDS, AXI4Mux

from ..harness import Harness, WhiteBox


class MuxHarness(Harness):
    group = "mux"

    def __init__(self, n=2, id_width=4, data_width=64, w_order_depth=4):
        super().__init__()
        self.n, self.id_width, self.data_width, self.depth = n, id_width, data_width, w_order_depth

    def build(self, m):
        n = self.n
        dut = AXI4Mux(n, 48, self.data_width, self.id_width, w_order_depth=self.depth)
        box = WhiteBox(dut, "AXI4Mux")
        m.submodules.dut = box.module
        self.no_reset()
        s, out = dut.s, dut.m
        low = dut.master_id_bits

        # ---- free masters within AXI's rules
        for p in s:
            for f in ("arid", "awid"):
                m.d.comb += getattr(p, f).eq(self.free(low))
            for f in AR_FIELDS + AW_FIELDS + W_FIELDS + ("arvalid", "awvalid", "wvalid", "rready", "bready"):
                sig = getattr(p, f)
                m.d.comb += sig.eq(self.free(len(sig)))
            for valid, ready, fields in ((p.arvalid, p.arready, ("arid",) + AR_FIELDS),
                                         (p.awvalid, p.awready, ("awid",) + AW_FIELDS),
                                         (p.wvalid, p.wready, W_FIELDS)):
                payload = Cat(*(getattr(p, f) for f in fields))
                waited, old = self.held(valid, ready, payload)
                with m.If(waited):
                    self.assume(valid & (payload == old))
        # ---- a free slave within AXI's rules
        self.free_axi_slave(m, out)

        # ---- the downstream port keeps the rules
        for ch, valid, ready, fields in (("ar", out.arvalid, out.arready, ("arid",) + AR_FIELDS),
                                         ("aw", out.awvalid, out.awready, ("awid",) + AW_FIELDS),
                                         ("w", out.wvalid, out.wready, W_FIELDS)):
            payload = Cat(*(getattr(out, f) for f in fields))
            waited, old = self.held(valid, ready, payload)
            self.prove(f"{ch}_held", ~waited | valid)
            self.prove(f"{ch}_stable", ~waited | (payload == old))

        # ---- AR and AW: a downstream handshake is exactly one master's, tagged with its index
        for ch, fields in (("ar", AR_FIELDS), ("aw", AW_FIELDS)):
            ok = Signal(name=f"{ch}_ok")
            hs_out = getattr(out, f"{ch}valid") & getattr(out, f"{ch}ready")
            hs = [getattr(p, f"{ch}valid") & getattr(p, f"{ch}ready") for p in s]
            conds = []
            for i, p in enumerate(s):
                same = Cat(*(getattr(out, f) for f in fields)) == Cat(*(getattr(p, f) for f in fields))
                tagged = (getattr(out, f"{ch}id")[:low] == getattr(p, f"{ch}id")[:low]) & \
                         (getattr(out, f"{ch}id")[low:] == i)
                only = Cat(*(hs[j] for j in range(n) if j != i)) == 0
                conds.append(hs[i] & same & tagged & only)
            m.d.comb += ok.eq(Cat(*conds).any())
            self.prove(f"{ch}_routed", (hs_out == Cat(*hs).any()) & (~hs_out | ok))

        # ---- R and B: to the master the ID's top bits name, with its own ID bits
        for ch, fields in (("r", ("rdata", "rresp", "rlast")), ("b", ("bresp",))):
            valid, ready, id_ = getattr(out, f"{ch}valid"), getattr(out, f"{ch}ready"), getattr(out, f"{ch}id")
            conds = []
            for i, p in enumerate(s):
                mine = id_[low:] == i
                conds.append((getattr(p, f"{ch}valid") == (valid & mine)) &
                             (~mine | (ready == getattr(p, f"{ch}ready"))) &
                             (~(valid & mine) | ((getattr(p, f"{ch}id") == id_[:low]) &
                              (Cat(*(getattr(p, f) for f in fields)) == Cat(*(getattr(out, f) for f in fields))))))
            self.prove(f"{ch}_routed", Cat(*conds).all())

        # ---- W follows AW order: a ghost FIFO of the masters of forwarded AWs
        D = self.depth
        ghost = Array(Signal(range(n), name=f"ghost_w{i}") for i in range(D))
        gw = Signal(range(2 * D))
        gr = Signal(range(2 * D))
        count = Signal(range(2 * D + 1))
        m.d.comb += count.eq((gw - gr)[:len(gw)])
        aw_hs = out.awvalid & out.awready
        wl_hs = out.wvalid & out.wready & out.wlast
        with m.If(aw_hs):
            m.d.sync += [ghost[gw[:len(gw) - 1]].eq(out.awid[low:]), gw.eq(gw + 1)]
        with m.If(wl_hs):
            m.d.sync += gr.eq(gr + 1)
        head = ghost[gr[:len(gr) - 1]]
        w_ok = []
        for i, p in enumerate(s):
            is_head = head == i
            w_ok.append(~is_head | ((out.wvalid == p.wvalid) & (p.wready == out.wready) &
                                    (Cat(*(getattr(out, f) for f in W_FIELDS)) ==
                                     Cat(*(getattr(p, f) for f in W_FIELDS)))))
            w_ok.append(is_head | ~p.wready)
        self.prove("w_order", (count == 0) | Cat(*w_ok).all())
        self.prove("w_after_aw", (count != 0) | (~out.wvalid & ~Cat(*(p.wready for p in s)).any()))
        self.prove("aw_limit", count <= D)

        # ---- fairness: with both masters offering, consecutive AR grants alternate
        both = Cat(*(p.arvalid for p in s)).all()
        ar_hs = out.arvalid & out.arready
        last_sel = self.past(out.arid[low:])
        last_both = self.past(ar_hs & both)
        self.prove("ar_round_robin", ~(self.started & last_both & ar_hs & both) | (out.arid[low:] != last_sel))

        # ---- induction: the mux's order queue is the ghost FIFO
        wq_wp, wq_rp = box("wq_wp"), box("wq_rp")
        self.invariant((wq_wp == gw) & (wq_rp == gr))
        # (the head is kept in a register: w_ok says the queue is not empty, w_sel is its head)
        self.invariant(box("w_ok") == (count != 0))
        self.invariant(box("wq_full") == (count == D))  # (a register worked out a cycle ahead)
        self.invariant((count == 0) | (box("w_sel") == head))
        for i in range(D):
            self.invariant(((Const(i, len(gr)) - gr)[:len(gr) - 1] >= count) |
                           (box(f"wq{i}") == ghost[i]))
        ar_lock, aw_lock = box("ar_lock"), box("aw_lock")
        self.invariant(~ar_lock | out.arvalid)
        self.invariant(~aw_lock | Cat(*(p.awvalid for p in s)).any())

        # ---- covers
        self.cover("r_to_master1", out.rvalid & out.rready & (out.rid[low:] == 1))
        self.cover("order_full", count == D)
        self.cover("ar_contention", both & out.arvalid & ~out.arready)
        self.cover("w_master1_after_master0", wl_hs & (head == 1) & self.past(wl_hs & (head == 0)))
