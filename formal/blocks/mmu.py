"""The GPU MMU (rtl/mmu.py): a VMID reaches only what its own page tables map.

The isolation the KMD relies on, stated on the MMU alone with a free world around it: a
free master (the mux's side: any VMID, any access, any address, AXI's rules), a free
memory (any latency, any data, R and B held until READY), free page-table bases and
invalidation requests any cycle. One VMID `v` (any, fixed) is watched, with three 2 MiB
physical regions chosen freely (the largest page a leaf maps at two levels is 2 MiB, so a
region is what one entry can name at either level):

- `foreign`: v's page tables never point into it (no entry read by a walk for v names
  it), so v must never reach it: another client's memory, the ring, the IH ring.
- `readonly` / `noexec`: v's entries that name these lack WRITEABLE / EXECUTABLE.
- `unmapped`: v's entries may name it until an invalidation of all of v's pages is
  acknowledged (the KMD's unmap: change the tables, invalidate, wait for INV_ACK); a
  request v makes after that never reaches it, whatever the TLB held.

"The walk is for v" reads the request the MMU is translating (white-box, as the
invariants of the other groups do); every other VMID's tables are free, so a TLB entry
of another VMID may well name `foreign`, which is what makes a VMID mix-up visible.
"""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import data

from rtl.mmu import MMU, REQ_USER
from spec import vm as vm_spec

from ..harness import Harness, WhiteBox


class MMUHarness(Harness):
    group = "mmu"

    def __init__(self, tlb_entries=2, data_width=64, w_order_depth=2, max_outstanding=4):
        super().__init__()
        self.tlb_entries, self.data_width = tlb_entries, data_width
        self.w_order_depth, self.max_outstanding = w_order_depth, max_outstanding

    def build(self, m):
        AW, IW, L = 48, 4, vm_spec.LEVELS
        walk_id = 7
        dut = MMU(data_width=self.data_width, addr_width=AW, id_width=IW, levels=L,
                  tlb_entries=self.tlb_entries, walk_id=walk_id, w_order_depth=self.w_order_depth,
                  max_outstanding=self.max_outstanding)
        box = WhiteBox(dut, "MMU")
        m.submodules.dut = box.module
        self.no_reset()
        s, out = dut.s, dut.m
        req = data.StructLayout({"addr": AW, "len": 8, "size": 3, "burst": 2, "id": IW, "user": REQ_USER})
        t = data.View(req, box("t"))
        ar_o = data.View(req, box("ar_o"))
        aw_o = data.View(req, box("aw_o"))
        ar_o_walk = box("ar_o_walk")
        REGION = vm_spec.PAGE_SHIFT + vm_spec.LEVEL_BITS * (L - 1)  # 2 MiB: the largest leaf

        v = self.const(4, "watched_vmid")
        foreign = self.const(AW - REGION, "foreign")
        readonly = self.const(AW - REGION, "readonly")
        noexec = self.const(AW - REGION, "noexec")
        unmapped = self.const(AW - REGION, "unmapped")

        # ---- a free master within AXI's rules (IDs other than the walker's, accesses the spec names)
        for f in ("araddr", "arlen", "arsize", "arburst", "arid", "aruser", "arvalid",
                  "awaddr", "awlen", "awsize", "awburst", "awid", "awuser", "awvalid",
                  "wdata", "wstrb", "wlast", "wvalid", "rready", "bready"):
            sig = getattr(s, f)
            m.d.comb += sig.eq(self.free(len(sig)))
        # (any access kind on either channel: a write labelled as a read must still need
        # WRITEABLE; only the values spec.vm.Access names)
        for ch in ("ar", "aw"):
            user = data.View(REQ_USER, getattr(s, f"{ch}user"))
            self.assume(getattr(s, f"{ch}id") != walk_id)
            self.assume(user.access <= max(vm_spec.Access))
        for valid, ready, fields in ((s.arvalid, s.arready, ("arid", "araddr", "arlen", "arsize", "arburst", "aruser")),
                                     (s.awvalid, s.awready, ("awid", "awaddr", "awlen", "awsize", "awburst", "awuser")),
                                     (s.wvalid, s.wready, ("wdata", "wstrb", "wlast"))):
            waited, old = self.held(valid, ready, Cat(*(getattr(s, f) for f in fields)))
            with m.If(waited):
                self.assume(valid & (Cat(*(getattr(s, f) for f in fields)) == old))

        # ---- configuration: the watched VMID translated, everything else free any cycle
        enable = self.const(vm_spec.VMIDS, "ctx_enable")
        self.assume(enable.bit_select(v, 1))
        m.d.comb += dut.ctx_enable.eq(enable)
        # (the base of the VMID the MMU asks for on ctx_vmid: any, any cycle)
        m.d.comb += dut.ctx_base.eq(self.free(len(dut.ctx_base)))
        for f in ("inv_req", "inv_vmids", "inv_all", "inv_page"):
            sig = getattr(dut, f)
            m.d.comb += sig.eq(self.free(len(sig)))

        # ---- a free memory within AXI's rules: it answers only what was asked
        self.free_axi_slave(m, out)
        cnt = 2 * self.max_outstanding + 2
        walks = Signal(range(cnt))  # walk reads asked and not answered (RLAST)
        reads = Signal(range(cnt))  # the masters' reads forwarded, not answered
        writes = Signal(range(cnt))  # writes forwarded (AW handshake), not answered
        w_done = Signal(range(cnt))  # writes whose last W beat went out, not answered
        w_due = Signal(range(cnt))  # write addresses put out whose last W beat has not gone
        ar_hs, aw_hs = out.arvalid & out.arready, out.awvalid & out.awready
        r_last = out.rvalid & out.rready & out.rlast
        w_last = out.wvalid & out.wready & out.wlast
        b_hs = out.bvalid & out.bready
        # a write address appears (its first cycle of VALID): AXI lets its W beats go before
        # the AW handshake, not before the MMU has decided to forward it
        aw_new = out.awvalid & ~(self.started & self.past(out.awvalid & ~out.awready))
        is_walk_r = out.rid == walk_id
        m.d.sync += [
            walks.eq(walks + (ar_hs & (out.arid == walk_id)) - (r_last & is_walk_r)),
            reads.eq(reads + (ar_hs & (out.arid != walk_id)) - (r_last & ~is_walk_r)),
            writes.eq(writes + aw_hs - b_hs),
            w_done.eq(w_done + w_last - b_hs),
            w_due.eq(w_due + aw_new - w_last),
        ]
        self.assume(~out.rvalid | Mux(is_walk_r, walks != 0, reads != 0))
        # (a write is answered after its address and its data, as AXI requires)
        self.assume(~out.bvalid | ((writes != 0) & (w_done != 0)))

        # ---- v's page tables, as the walks for v read them
        pte = out.rdata[:64]
        pte_region = pte[vm_spec.ADDR_LSB + vm_spec.LEVEL_BITS * (L - 1):vm_spec.ADDR_MSB + 1]
        valid_entry = pte[vm_spec.BIT["VALID"].bit]
        walk_for_v = out.rvalid & is_walk_r & (t.user.vmid == v)
        unmapped_done = Signal()  # an invalidation of all of v's pages was acknowledged
        inv_all_v = Signal()  # such an invalidation is pending
        with m.If(dut.inv_req):
            m.d.sync += inv_all_v.eq(dut.inv_all & dut.inv_vmids.bit_select(v, 1))
        with m.If(inv_all_v & dut.inv_ack.bit_select(v, 1)):
            m.d.sync += unmapped_done.eq(1)
        with m.If(walk_for_v & valid_entry):
            self.assume(pte_region != foreign)
            with m.If(pte_region == readonly):
                self.assume(~pte[vm_spec.BIT["WRITEABLE"].bit])
            with m.If(pte_region == noexec):
                self.assume(~pte[vm_spec.BIT["EXECUTABLE"].bit])
            with m.If(unmapped_done):
                self.assume(pte_region != unmapped)

        # ---- which forwarded requests v made after the unmap (ghost flags beside the registers)
        ar_h_new, aw_h_new, ar_o_new, aw_o_new = (Signal(name=n) for n in ("ar_h_new", "aw_h_new", "ar_o_new", "aw_o_new"))
        with m.If(s.arvalid & s.arready):
            m.d.sync += ar_h_new.eq(unmapped_done)
        with m.If(s.awvalid & s.awready):
            m.d.sync += aw_h_new.eq(unmapped_done)
        with m.If(box("release_ar")):
            m.d.sync += ar_o_new.eq(ar_h_new)
        with m.If(box("release_aw")):
            m.d.sync += aw_o_new.eq(aw_h_new)

        ar_v = out.arvalid & ~ar_o_walk & (ar_o.user.vmid == v)
        aw_v = out.awvalid & (aw_o.user.vmid == v)
        ar_region, aw_region = out.araddr[REGION:], out.awaddr[REGION:]
        self.prove("no_foreign_page", ~(ar_v & (ar_region == foreign)) & ~(aw_v & (aw_region == foreign)))
        self.prove("write_needs_w", ~(aw_v & (aw_region == readonly)))
        self.prove("fetch_needs_x", ~(ar_v & (ar_o.user.access == vm_spec.Access.FETCH) & (ar_region == noexec)))
        self.prove("unmap_takes_effect", ~(ar_v & ar_o_new & (ar_region == unmapped)) &
                   ~(aw_v & aw_o_new & (aw_region == unmapped)))
        self.prove("faulted_w_swallowed", ~out.wvalid | (w_due != 0) | aw_new)

        # ---- induction strengthening: what the MMU holds for v agrees with v's page tables
        N = self.tlb_entries
        PS, VA = vm_spec.PAGE_SHIFT, vm_spec.va_bits(L)
        st = lambda name: box.state("mmu", name)  # noqa: E731
        rows = box.rows("tlb")  # each entry's physical page (a memory: read by name)
        t_valid = box("t_valid")
        t_vmid = [box(f"tlb_vmid{i}") for i in range(N)]
        t_vpn = [box(f"tlb_vpn{i}") for i in range(N)]
        t_perm = [box(f"tlb_perm{i}") for i in range(N)]  # R, W, X
        inv_ack_v = dut.inv_ack.bit_select(v, 1)
        # (the invalidation of all of v's pages is done: the acknowledgement shows, or was seen)
        unmapped_safe = unmapped_done | (inv_all_v & inv_ack_v)
        region_of = lambda ppn: ppn[REGION - vm_spec.PAGE_SHIFT:]  # noqa: E731
        for i in range(N):
            r = region_of(rows[i].ppn)
            self.invariant(~(t_valid[i] & (t_vmid[i] == v)) |
                           ((r != foreign) & (~t_perm[i][1] | (r != readonly)) & (~t_perm[i][2] | (r != noexec)) &
                            (~unmapped_safe | (r != unmapped))))
            for j in range(i + 1, N):  # (a request hits one entry at most)
                self.invariant(~(t_valid[i] & t_valid[j] & (t_vmid[i] == t_vmid[j]) & (t_vpn[i] == t_vpn[j])))
        # the ghost invalidation state is the MMU's: the pending request's, its acknowledgement
        inv_pending, inv_vmids_r, inv_all_r = box("inv_pending"), box("inv_vmids"), box("inv_all")
        self.invariant(inv_all_v == (inv_all_r & inv_vmids_r.bit_select(v, 1)))
        self.invariant(~inv_pending | (dut.inv_ack == 0))
        self.invariant((dut.inv_ack == 0) | (dut.inv_ack == inv_vmids_r))
        # (the acknowledgement is seen the cycle after it shows: meanwhile the translator is idle)
        self.invariant(~(inv_all_v & inv_ack_v & ~unmapped_done) | st("IDLE"))
        # the request in hand is the holding register it came from, with its VMID's bypass
        ar_h, aw_h = data.View(req, box("ar_h")), data.View(req, box("aw_h"))
        ar_full, aw_full = box("ar_full"), box("aw_full")
        t_write = box("t_write")
        busy = ~st("IDLE")
        self.invariant(~busy | Mux(t_write, aw_full & (t.as_value() == aw_h.as_value()),
                                   ar_full & (t.as_value() == ar_h.as_value())))
        self.invariant(~ar_full | (box("ar_phys") == ~enable.bit_select(ar_h.user.vmid, 1)))
        self.invariant(~aw_full | (box("aw_phys") == ~enable.bit_select(aw_h.user.vmid, 1)))
        self.invariant(~busy | (box("bypass") == ~enable.bit_select(t.user.vmid, 1)))
        x = t.user.access == vm_spec.Access.FETCH
        self.invariant(~busy | (box("need") == Mux(t_write, 0b010, Cat(~x, Const(0, 1), x))))
        # in CHECK the hits are entries of the request's VMID and page, and hit_ok their permission
        hits, hit_any, hit_ok = box("hits"), box("hit_any"), box("hit_ok")
        walking = st("WALK_AR") | st("WALK_R")
        for i in range(N):
            match = t_valid[i] & (t_vmid[i] == t.user.vmid) & (t_vpn[i] == t.addr[PS:VA])
            self.invariant(~st("CHECK") | ((hits[i] == match) & (~hits[i] | (hit_ok == (box("need") & t_perm[i]).any()))))
            self.invariant(~walking | ~match)  # (a walk follows a miss; nothing installs meanwhile)
        self.invariant(~st("CHECK") | (hit_any == hits.any()))
        self.invariant(~walking | ~box("bypass"))
        # v's requests flagged "after the unmap" came after it
        self.invariant(~ar_h_new | unmapped_done)
        self.invariant(~aw_h_new | unmapped_done)
        self.invariant(~ar_o_new | unmapped_done)
        self.invariant(~aw_o_new | unmapped_done)
        # what waits in the output registers already meets the properties (they hold it)
        ar_o_valid, aw_o_valid = box("ar_o_valid"), box("aw_o_valid")
        self.invariant(~ar_o_walk | (ar_o.id == walk_id))
        # (a fault is answered once everything forwarded before it is: no request waits in the
        # output register then, so a fault's release flags nothing that goes out)
        self.invariant(~st("FAULT_R") | ~ar_o_valid)
        self.invariant(~st("FAULT_B") | ~aw_o_valid)
        # ... and the W order queue: its forwarded bursts are the write addresses put out
        wq, wq_wp, wq_rp = box("wq"), box("wq_wp"), box("wq_rp")
        Dw = self.w_order_depth
        qb = (Dw - 1).bit_length()
        wq_n = (wq_wp - wq_rp)[:qb + 1]
        self.invariant(wq_n <= Dw)
        self.invariant(box("wq_ne") == (wq_n != 0))
        self.invariant(~box("wq_ne") | (box("head_fwd") == wq.bit_select(wq_rp[:qb], 1)))
        fwd = sum(((Const(k, qb + 1) < wq_n) & wq.bit_select((wq_rp + k)[:qb], 1)) for k in range(Dw))
        self.invariant(fwd == w_due + aw_new)
        self.invariant(~aw_new | (w_due < Dw))

        # ---- covers
        walked = box("walked")
        self.cover("translated_read", ar_v & out.arready & walked & self.past(walked))
        self.cover("tlb_hit_read", ar_v & out.arready & ~walked & self.past(~walked))
        self.cover("translated_write", aw_v & out.awready)
        self.cover("fault_answered", s.rvalid & s.rready & s.rlast & s.ruser[0])
        self.cover("rewalk_after_unmap", ar_v & ar_o_new)
