"""The GPU MMU: translates every request of the AXI mux before it reaches the memory port.

docs/hardware.md ("Virtual memory") is the contract, spec/vm.py the page-table format.

    s (from the mux)  ──►  AR / AW holding registers ──► translator ──► AR / AW output registers ──► m
                           W  ──► forwarded or swallowed, in AW order (a queue of decisions) ──► m
    R / B  ◄── passed back, or answered here (a fault) ◄───────────────────────────────── m

- Each request carries its VMID and access kind in AxUSER (REQ_USER). A VMID whose
  VM_CONTEXT_CNTL.ENABLE is clear is not translated (its address is physical); for the
  others the address is looked up in the TLB (`tlb_entries`, fully associative, round-robin
  replacement) and on a miss the page tables are walked over the same port (reads with
  ID `walk_id`, which no master uses), and the leaf is installed. Bursts never cross
  4 KiB (every master splits there), so one translation serves a burst.
- One request is translated at a time (AR and AW take turns): in the cycle after a
  request is held, its tag is compared with every TLB entry and its access with the
  entries' permissions (flip-flops; both holding registers are compared side by side, so
  no multiplexer stands in front of the compare); in the next the hit's entry (a small
  memory) gives the physical page, and the request moves to the output register. A
  request costs 3 cycles more than without the MMU on a hit, 2 for a VMID without
  translation (it leaves the holding register for the output one at once). After a walk
  the new entry is the hit: CHECK follows at once.
- A fault (entry not VALID, permission missing, address beyond the tables, or a walk
  read answering an error) is answered here: after every request forwarded before it has
  been answered (so responses keep AXI's per-ID order), a read gets ARLEN + 1 beats and a
  write (whose W beats are swallowed) one B, with SLVERR and RESP_USER's FAULT, CAUSE and
  LEVEL. The requester decides what that means (the CP stops with VM_FAULT when it uses
  the data: a prefetched dword never consumed does not fault).
- Invalidation (`inv_*`, from VM_INVALIDATE_REQ) runs between translations: the entries
  of the named VMIDs (all, or one page's) go in one cycle, then `inv_ack` shows the VMIDs.
  A walk under way finishes first, and its entry goes too if it matches.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2, exact_log2

from spec import vm as vm_spec

from .bus import AXI4Signature, RESP_OKAY, RESP_SLVERR

REQ_USER = data.StructLayout({"vmid": 4, "access": 3})
"""AxUSER of a request: its VMID and spec.vm.Access."""
RESP_USER = data.StructLayout({"fault": 1, "cause": 2, "level": 2})
"""RUSER / BUSER: set by the MMU on the response to a request whose translation failed."""


def req_user(vmid, access) -> data.Const | Cat:
    """AxUSER for a request of `vmid` (a Value or int) and `access` (spec.vm.Access)."""
    return Cat(Const(vmid, 4) if isinstance(vmid, int) else vmid[:4], Const(int(access), 3))


class MMU(wiring.Component):
    """See the module docstring.

    Configuration ports (the CSR block's, connected in rtl/top.py): `ctx_enable[i]` per VMID,
    and `ctx_base`, the root directory's address bits 47:12 of the VMID `ctx_vmid` names (the
    page-table bases are a small memory in the CSR block, read where a walk starts); `inv_req` (a pulse)
    with `inv_vmids`, `inv_all` and `inv_page` (address bits 47:12); `inv_ack`.
    `perf_hit`, `perf_miss`, `perf_walk`: pulses for the PERF_TLB_* / PERF_WALK_CYCLES counters.

    With `phys_in`, two more inputs, `s_arphys` and `s_awphys`: whether the request on offer
    on AR / AW has a VMID without translation (`~ctx_enable[its VMID]`), worked out by the
    integrator from each master's own AxUSER before its arbiter picks one (rtl/top.py:
    the mux carries the bit with AxUSER). Without it the MMU selects the enable by the VMID
    on offer itself, behind the arbiter (issue 14: that put the mux's pick and a 16-way
    select in series, the top's critical path). Either way the same bit, the same cycle.
    """

    def _invalid(self, message: str) -> ValueError:
        self._MustUse__used = True
        return ValueError(message)

    def __init__(self, data_width: int = 64, addr_width: int = 48, id_width: int = 4,
                 levels: int = vm_spec.LEVELS, tlb_entries: int = 16, walk_id: int = 7,
                 w_order_depth: int = 8, max_outstanding: int = 32, phys_in: bool = False):
        if data_width not in (32, 64, 128, 256):
            raise self._invalid(f"MMU data width must be 32, 64, 128 or 256, not {data_width!r}")
        if not isinstance(levels, int) or isinstance(levels, bool) or levels not in vm_spec.BUILD_LEVELS:
            raise self._invalid(f"levels must be 2, 3 or 4, not {levels!r}")
        if vm_spec.va_bits(levels) > addr_width:
            raise self._invalid(f"{levels} levels need {vm_spec.va_bits(levels)} address bits; the bus has {addr_width}")
        if not isinstance(tlb_entries, int) or tlb_entries < 2 or tlb_entries & (tlb_entries - 1) or tlb_entries > 64:
            raise self._invalid(f"tlb_entries must be a power of two from 2 to 64, not {tlb_entries!r}")
        if not 0 <= walk_id < 1 << id_width:
            raise self._invalid(f"walk_id {walk_id!r} does not fit in {id_width} ID bits")
        self.data_width = data_width
        self.addr_width = addr_width
        self.id_width = id_width
        self.levels = levels
        self.tlb_entries = tlb_entries
        self.walk_id = walk_id
        self.w_order_depth = w_order_depth
        self.max_outstanding = max_outstanding
        self.phys_in = phys_in
        ppn = addr_width - vm_spec.PAGE_SHIFT
        hint = {"s_arphys": In(1), "s_awphys": In(1)} if phys_in else {}
        super().__init__({**hint,
            "s": In(AXI4Signature(addr_width, data_width, id_width, REQ_USER.size, RESP_USER.size)),
            "m": Out(AXI4Signature(addr_width, data_width, id_width)),
            "ctx_enable": In(vm_spec.VMIDS),
            "ctx_vmid": Out(4), "ctx_base": In(ppn),
            "inv_req": In(1), "inv_vmids": In(vm_spec.VMIDS), "inv_all": In(1), "inv_page": In(ppn),
            "inv_ack": Out(vm_spec.VMIDS),
            "perf_hit": Out(1), "perf_miss": Out(1), "perf_walk": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        s, out = self.s, self.m
        AW, DW, L = self.addr_width, self.data_width, self.levels
        B = DW // 8
        lb = exact_log2(B)
        PS = vm_spec.PAGE_SHIFT
        VA = vm_spec.va_bits(L)
        VPN = VA - PS
        PPN = AW - PS
        N = self.tlb_entries
        nb = exact_log2(N)

        # ------------------------------------------------------------ holding registers
        req = data.StructLayout({"addr": AW, "len": 8, "size": 3, "burst": 2, "id": self.id_width,
                                 "user": REQ_USER})
        ar_h = Signal(req)
        aw_h = Signal(req)
        ar_full = Signal()
        aw_full = Signal()
        m.d.comb += [s.arready.eq(~ar_full), s.awready.eq(~aw_full)]
        with m.If(s.arvalid & s.arready):
            m.d.sync += [ar_full.eq(1), ar_h.addr.eq(s.araddr), ar_h.len.eq(s.arlen), ar_h.size.eq(s.arsize),
                         ar_h.burst.eq(s.arburst), ar_h.id.eq(s.arid), ar_h.user.eq(s.aruser)]
        with m.If(s.awvalid & s.awready):
            m.d.sync += [aw_full.eq(1), aw_h.addr.eq(s.awaddr), aw_h.len.eq(s.awlen), aw_h.size.eq(s.awsize),
                         aw_h.burst.eq(s.awburst), aw_h.id.eq(s.awid), aw_h.user.eq(s.awuser)]
        release_ar = Signal()
        release_aw = Signal()

        def untranslated(vmid):
            """`vmid` has no page tables (its VM_CONTEXT_CNTL.ENABLE is clear): its address is physical."""
            return ~self.ctx_enable.bit_select(vmid, 1)

        # Whether each holding register's VMID is translated, looked up a cycle ahead: from the
        # VMID on offer while the register is empty (what it takes), else from the one it holds.
        # IDLE then decides from a register, not through the 16-way multiplexer of the enables
        # by the picked request's VMID (issue 14: that was the top's critical path). An enable
        # written while a request is held counts a cycle later.
        ar_phys = Signal()
        aw_phys = Signal()
        if self.phys_in:
            m.d.sync += [
                ar_phys.eq(Mux(ar_full, untranslated(ar_h.user.vmid), self.s_arphys)),
                aw_phys.eq(Mux(aw_full, untranslated(aw_h.user.vmid), self.s_awphys)),
            ]
        else:  # (one 16-way select of the VMID held or offered)
            m.d.sync += [
                ar_phys.eq(untranslated(Mux(ar_full, ar_h.user.vmid, data.View(REQ_USER, s.aruser).vmid))),
                aw_phys.eq(untranslated(Mux(aw_full, aw_h.user.vmid, data.View(REQ_USER, s.awuser).vmid))),
            ]
        with m.If(release_ar):
            m.d.sync += ar_full.eq(0)
        with m.If(release_aw):
            m.d.sync += aw_full.eq(0)

        # ------------------------------------------------------------ output registers
        ar_o = Signal(req)
        ar_o_valid = Signal()
        ar_o_walk = Signal()  # the AR out is a page-table read
        aw_o = Signal(req)
        aw_o_valid = Signal()
        m.d.comb += [
            out.arvalid.eq(ar_o_valid), out.araddr.eq(ar_o.addr), out.arlen.eq(ar_o.len),
            out.arsize.eq(ar_o.size), out.arburst.eq(ar_o.burst), out.arid.eq(ar_o.id),
            out.awvalid.eq(aw_o_valid), out.awaddr.eq(aw_o.addr), out.awlen.eq(aw_o.len),
            out.awsize.eq(aw_o.size), out.awburst.eq(aw_o.burst), out.awid.eq(aw_o.id),
        ]
        ar_free = Signal()
        aw_free = Signal()
        m.d.comb += [ar_free.eq(~ar_o_valid | out.arready), aw_free.eq(~aw_o_valid | out.awready)]
        with m.If(out.arready):
            m.d.sync += ar_o_valid.eq(0)
        with m.If(out.awready):
            m.d.sync += aw_o_valid.eq(0)

        # requests forwarded and not yet answered (a fault waits for them: AXI's per-ID order)
        ow = ceil_log2(self.max_outstanding + 1)
        rd_out = Signal(ow)
        wr_out = Signal(ow)
        r_mine = Signal()  # an R beat of the walker
        m.d.comb += r_mine.eq(out.rid == self.walk_id)
        m.d.sync += [
            rd_out.eq(rd_out + (out.arvalid & out.arready & ~ar_o_walk)
                      - (out.rvalid & out.rready & out.rlast & ~r_mine)),
            wr_out.eq(wr_out + (out.awvalid & out.awready) - (out.bvalid & out.bready)),
        ]
        rd_room = Signal()
        wr_room = Signal()
        m.d.comb += [rd_room.eq(rd_out < self.max_outstanding - 1), wr_room.eq(wr_out < self.max_outstanding - 1)]

        # ------------------------------------------------------------ W: forwarded or swallowed, in AW order
        Dw = self.w_order_depth
        qb = exact_log2(Dw)
        wq = Signal(Dw)  # bit i: the burst in slot i is forwarded
        wq_wp = Signal(qb + 1)
        wq_rp = Signal(qb + 1)
        wq_full = Signal()
        wq_n = Signal(qb + 1)
        m.d.comb += [wq_n.eq(wq_wp - wq_rp), wq_full.eq(wq_n == Dw)]
        wq_push = Signal()
        wq_push_fwd = Signal()
        with m.If(wq_push):
            m.d.sync += [wq.bit_select(wq_wp[:qb], 1).eq(wq_push_fwd), wq_wp.eq(wq_wp + 1)]
        # Whether the queue has a head and whether it is forwarded are registers, worked out
        # from the next pointers and the slot a push fills: W's READY and VALID then start from
        # flip-flops (issue 14: through the mux they reach the masters' W logic, and the DMA
        # engine's FIFO, in the same cycle).
        wq_ne = Signal()
        head_fwd = Signal()
        w_pop = Signal()  # a burst's last W beat goes (or is swallowed) now
        m.d.comb += w_pop.eq(s.wvalid & s.wready & s.wlast)
        head_is_push = Signal()  # the push fills the slot that is the head next cycle
        m.d.comb += head_is_push.eq(wq_push & Mux(w_pop, wq_n == 1, wq_n == 0))
        m.d.sync += [
            wq_ne.eq(wq_push | Mux(w_pop, wq_n != 1, wq_n != 0)),
            head_fwd.eq(Mux(head_is_push, wq_push_fwd,
                            Mux(w_pop, wq.bit_select((wq_rp + 1)[:qb], 1), wq.bit_select(wq_rp[:qb], 1)))),
        ]
        m.d.comb += [
            out.wvalid.eq(s.wvalid & wq_ne & head_fwd),
            out.wdata.eq(s.wdata), out.wstrb.eq(s.wstrb), out.wlast.eq(s.wlast),
            s.wready.eq(wq_ne & (out.wready | ~head_fwd)),
        ]
        with m.If(w_pop):
            m.d.sync += wq_rp.eq(wq_rp + 1)

        # ------------------------------------------------------------ R and B: passed back, or a fault
        inj_r = Signal()
        inj_b = Signal()
        f_user = Signal(RESP_USER)
        # The request being translated is the holding register on t_write's side: a register
        # keeps its request until the translator releases it, so no copy is latched (issue 14:
        # the copy cost 72 flip-flops and the multiplexer from both registers in front of them,
        # and the output registers a third source each)
        t = Signal(req)
        t_write = Signal()  # translating the AW holding register (else AR)
        m.d.comb += t.eq(Mux(t_write, aw_h, ar_h))
        m.d.comb += self.ctx_vmid.eq(t.user.vmid)  # (its page-table base: ctx_base)
        inj_beat = Signal(8)
        inj_last = Signal()  # inj_beat == ARLEN, kept a beat ahead (RLAST from a register)
        with m.If(inj_r):
            m.d.comb += [s.rvalid.eq(1), s.rid.eq(ar_h.id), s.rresp.eq(RESP_SLVERR), s.ruser.eq(f_user),
                         s.rlast.eq(inj_last), s.rdata.eq(0)]
        with m.Else():
            m.d.comb += [s.rvalid.eq(out.rvalid & ~r_mine), s.rid.eq(out.rid), s.rresp.eq(out.rresp),
                         s.rlast.eq(out.rlast), s.rdata.eq(out.rdata),
                         out.rready.eq(r_mine | s.rready)]
        with m.If(inj_b):
            m.d.comb += [s.bvalid.eq(1), s.bid.eq(aw_h.id), s.bresp.eq(RESP_SLVERR), s.buser.eq(f_user)]
        with m.Else():
            m.d.comb += [s.bvalid.eq(out.bvalid), s.bid.eq(out.bid), s.bresp.eq(out.bresp),
                         out.bready.eq(s.bready)]

        # ------------------------------------------------------------ the TLB
        t_valid = Signal(N)
        t_vmid = Array(Signal(4, name=f"tlb_vmid{i}") for i in range(N))
        t_vpn = Array(Signal(VPN, name=f"tlb_vpn{i}") for i in range(N))
        entry = data.StructLayout({"ppn": PPN, "level": 2})  # the permissions are in t_perm
        m.submodules.tlb = tlb = Memory(shape=entry, depth=N, init=[])
        tlb_w = tlb.write_port()
        tlb_r = tlb.read_port(domain="comb")
        victim = Signal(nb)

        # ------------------------------------------------------------ invalidation requests
        inv_pending = Signal()
        inv_vmids = Signal(vm_spec.VMIDS)
        inv_all = Signal()
        inv_page = Signal(PPN)
        # (a request is latched after the translator, below: one written in the cycle the
        # pending one completes must replace it, not be dropped by the completion)

        # ------------------------------------------------------------ the translator
        rr = Signal()  # AW's turn when both wait
        hits = Signal(N)  # the TLB entries the request hit (one at most)
        bypass = Signal()
        beyond = Signal()
        walked = Signal()  # this request's entry was just installed (not a hit to count)
        level = Signal(range(L))
        table = Signal(PPN)  # the table being read, address bits 47:12
        f_cause = Signal(2)
        f_level = Signal(2)
        m.d.comb += [f_user.fault.eq(1), f_user.cause.eq(f_cause), f_user.level.eq(f_level)]

        # The tag compare and the permission check of both holding registers, side by side
        # (no multiplexer in front of the compare): IDLE latches both verdicts and the picked
        # one's hits, so CHECK decides from registers alone; the TLB's memory gives only the
        # physical page.
        t_perm = Array(Signal(3, name=f"tlb_perm{i}") for i in range(N))  # R, W, X

        def needs(r, write):
            """The permission request `r` needs, one-hot: R, W, X. A write address needs W
            whatever its AxUSER says (the channel, not a label, decides what a request does);
            on AR the access kind tells a fetch from a read."""
            if write:
                return Const(0b010, 3)
            x = r.user.access == vm_spec.Access.FETCH
            return Cat(~x, 0, x)

        def compare(r, vpn, name):
            match = Signal(N, name=f"match_{name}")
            permit = Signal(N, name=f"permit_{name}")
            need_r = Signal(3, name=f"need_{name}")
            vpn_eq = Signal(N, name=f"vpn_eq_{name}")
            key = Signal(VPN, name=f"key_{name}")
            m.d.comb += [need_r.eq(needs(r, name == "aw")), key.eq(vpn)]
            for i in range(N):
                m.d.comb += vpn_eq[i].eq(t_vpn[i] == key)
                m.d.comb += [match[i].eq(t_valid[i] & (t_vmid[i] == r.user.vmid) & vpn_eq[i]),
                             permit[i].eq((need_r & t_perm[i]).any())]
            return match, (match & permit).any(), vpn_eq

        # The AR side's page compare doubles as the invalidation's (issue 14: its own 16
        # compares of 18 bits cost about 165 LUT4 in mmu_32, about 100 more in the flattened
        # top): while an invalidation is pending no lookup happens (IDLE invalidates first),
        # so the AR compare is free and compares the page it names. The multiplexer in front
        # of the compare costs it half a nanosecond (mmu_32 106.02 -> 100.32 MHz median); a
        # register holding the named page instead (loaded from the request, then AR's page
        # again when the entries go) kept the speed but saved the top 103 LUT4 less.
        match_ar, ok_ar, vpn_eq_ar = compare(ar_h, Mux(inv_pending, inv_page[:VPN], ar_h.addr[PS:VA]), "ar")
        match_aw, ok_aw, _ = compare(aw_h, aw_h.addr[PS:VA], "aw")
        need = Signal(3)  # the permission the request in hand needs
        # each holding register's verdict is latched apart: a multiplexer on the picked side
        # after the compares was the MMU's critical path (aw_h.addr → hit_ok, 10.24 ns); in
        # CHECK the side is a register (t_write), so the choice is one more LUT input there
        hit_any_ar, hit_any_aw = Signal(name="hit_any_ar"), Signal(name="hit_any_aw")  # it hit in the TLB
        hit_ok_ar, hit_ok_aw = Signal(name="hit_ok_ar"), Signal(name="hit_ok_aw")  # and the entry permits the access
        hit_any = Signal()
        hit_ok = Signal()
        m.d.comb += [hit_any.eq(Mux(t_write, hit_any_aw, hit_any_ar)), hit_ok.eq(Mux(t_write, hit_ok_aw, hit_ok_ar))]

        def lookup(pick_w):
            """Latch the compare of the request picked (AW when `pick_w`); CHECK uses it next cycle."""
            m.d.sync += [hits.eq(Mux(pick_w, match_aw, match_ar)),
                         hit_any_ar.eq(match_ar.any()), hit_any_aw.eq(match_aw.any()),
                         hit_ok_ar.eq(ok_ar), hit_ok_aw.eq(ok_aw),
                         bypass.eq(Mux(pick_w, aw_phys, ar_phys)),
                         beyond.eq(Mux(pick_w, aw_h.addr[VA:] != 0, ar_h.addr[VA:] != 0)),
                         need.eq(Mux(pick_w, needs(aw_h, True), needs(ar_h, False)))]
            m.next = "CHECK"

        # at most one entry hits: its index is the OR of the indices of the hits (no priority chain)
        hit_idx = Signal(nb)
        for k in range(nb):
            m.d.comb += hit_idx[k].eq(Cat(*(hits[i] for i in range(N) if i >> k & 1)).any())
        m.d.comb += tlb_r.addr.eq(hit_idx)
        e = tlb_r.data

        # one entry of the table being walked: its address and the beat(s) that hold it
        idx = Signal(vm_spec.LEVEL_BITS)
        for lv in range(L):
            with m.If(level == lv):
                lo = PS + vm_spec.LEVEL_BITS * (L - 1 - lv)
                m.d.comb += idx.eq(t.addr[lo:lo + vm_spec.LEVEL_BITS])
        e_addr = Signal(AW)
        m.d.comb += e_addr.eq(Cat(Const(0, 3), idx, table))
        beats = max(1, 8 // B)
        w_beat = Signal(range(beats + 1))
        w_lo = Signal(32)  # the first half of an entry on a 32-bit bus
        w_err = Signal()
        pte = Signal(64)
        if B >= 8:
            m.d.comb += pte.eq(out.rdata.word_select(e_addr[3:lb], 64) if B > 8 else out.rdata)
        else:
            m.d.comb += pte.eq(Cat(w_lo, out.rdata))
        pte_addr = pte[vm_spec.ADDR_LSB:vm_spec.ADDR_MSB + 1]  # bits 47:12
        pte_leaf = Signal()
        m.d.comb += pte_leaf.eq((level == L - 1) | pte[vm_spec.BIT["PDE_PTE"].bit])
        leaf_ppn = Signal(PPN)  # the 4 KiB page the leaf maps for this address
        for lv in range(L):
            with m.If(level == lv):
                span = vm_spec.LEVEL_BITS * (L - 1 - lv)  # page-number bits the leaf leaves to the address
                if span:
                    m.d.comb += leaf_ppn.eq(Cat(t.addr[PS:PS + span], pte_addr[span:]))
                else:
                    m.d.comb += leaf_ppn.eq(pte_addr)

        def fault(cause, lvl):
            m.d.sync += [f_cause.eq(cause), f_level.eq(lvl)]
            m.next = "FAULT"

        walk_r = Signal()
        m.d.comb += walk_r.eq(out.rvalid & r_mine)

        with m.FSM(name="mmu") as fsm:
            with m.State("IDLE"):
                m.d.sync += walked.eq(0)
                pick_w = Signal()
                m.d.comb += pick_w.eq(aw_full & (~ar_full | rr))
                with m.If(inv_pending):
                    for i in range(N):
                        # (Array: a case; bit_select, a shift, cost 37 LUT4 more)
                        with m.If(Array(inv_vmids)[t_vmid[i]] & (inv_all | vpn_eq_ar[i])
                                  & (inv_all | (inv_page[VPN:] == 0))):
                            m.d.sync += t_valid[i].eq(0)
                    m.d.sync += [inv_pending.eq(0), self.inv_ack.eq(inv_vmids)]
                with m.Elif(ar_full | aw_full):
                    m.d.sync += [t_write.eq(pick_w), rr.eq(~pick_w)]
                    lookup(pick_w)
                    # a VMID without translation goes straight out (one cycle less than CHECK);
                    # the lookup above is latched all the same, so only the next state depends
                    # on whether the output was free
                    # (the output register takes the request whenever it is free: harmless while
                    # its VALID stays clear)
                    with m.If(~pick_w & ar_free):
                        m.d.sync += [ar_o_walk.eq(0), ar_o.eq(ar_h)]
                    with m.If(pick_w & aw_free):
                        m.d.sync += aw_o.eq(aw_h)
                    phys_now = Signal()
                    m.d.comb += phys_now.eq(Mux(pick_w, aw_phys, ar_phys))
                    with m.If(phys_now & ~pick_w & ar_free & rd_room):
                        m.d.comb += release_ar.eq(1)
                        m.d.sync += ar_o_valid.eq(1)
                        m.next = "IDLE"
                    with m.Elif(phys_now & pick_w & aw_free & ~wq_full & wr_room):
                        m.d.comb += [release_aw.eq(1), wq_push.eq(1), wq_push_fwd.eq(1)]
                        m.d.sync += aw_o_valid.eq(1)
                        m.next = "IDLE"

            with m.State("CHECK"):
                ok = Signal()
                with m.If(beyond & ~bypass):
                    fault(vm_spec.Cause.RANGE, 0)
                with m.Elif(~bypass & ~hit_any):
                    m.d.comb += self.perf_miss.eq(1)
                    m.d.sync += [level.eq(0), table.eq(self.ctx_base)]
                    m.next = "WALK_AR"
                with m.Elif(~bypass & ~hit_ok):
                    fault(vm_spec.Cause.PERMISSION, e.level)
                with m.Else():
                    m.d.comb += ok.eq(1)
                # the output register takes the request whenever it is free (harmless while
                # its VALID stays clear), so only VALID waits for the TLB's verdict; each side
                # from its own holding register (the page: the held one's, or the TLB's)
                with m.If(~t_write & ar_free):
                    m.d.sync += [ar_o_walk.eq(0), ar_o.eq(ar_h), ar_o.addr[PS:].eq(Mux(bypass, ar_h.addr[PS:], e.ppn))]
                with m.If(t_write & aw_free):
                    m.d.sync += [aw_o.eq(aw_h), aw_o.addr[PS:].eq(Mux(bypass, aw_h.addr[PS:], e.ppn))]
                with m.If(ok):
                    with m.If(~t_write & ar_free & rd_room):
                        m.d.comb += [release_ar.eq(1), self.perf_hit.eq(~bypass & ~walked)]
                        m.d.sync += ar_o_valid.eq(1)
                        m.next = "IDLE"
                    with m.If(t_write & aw_free & ~wq_full & wr_room):
                        m.d.comb += [release_aw.eq(1), self.perf_hit.eq(~bypass & ~walked),
                                     wq_push.eq(1), wq_push_fwd.eq(1)]
                        m.d.sync += aw_o_valid.eq(1)
                        m.next = "IDLE"

            with m.State("WALK_AR"):
                m.d.comb += self.perf_walk.eq(1)
                with m.If(ar_free):
                    m.d.sync += [ar_o_valid.eq(1), ar_o_walk.eq(1), ar_o.id.eq(self.walk_id),
                                 ar_o.addr.eq(Cat(Const(0, max(3, lb)), e_addr[max(3, lb):])),
                                 ar_o.len.eq(beats - 1), ar_o.size.eq(lb), ar_o.burst.eq(1),
                                 w_beat.eq(0), w_err.eq(0)]
                    m.next = "WALK_R"

            with m.State("WALK_R"):
                m.d.comb += self.perf_walk.eq(1)
                with m.If(walk_r):
                    m.d.sync += w_beat.eq(w_beat + 1)
                    if beats > 1:
                        m.d.sync += w_lo.eq(out.rdata[:32])
                    err = w_err | (out.rresp != RESP_OKAY)
                    m.d.sync += w_err.eq(err)
                    with m.If(out.rlast):
                        with m.If(err):
                            fault(vm_spec.Cause.WALK_ERROR, level)
                        with m.Elif(~pte[vm_spec.BIT["VALID"].bit]):
                            fault(vm_spec.Cause.INVALID, level)
                        with m.Elif(pte_leaf):
                            # install, and check the request again with the new entry as its hit
                            perm = Cat(pte[vm_spec.BIT["READABLE"].bit], pte[vm_spec.BIT["WRITEABLE"].bit],
                                       pte[vm_spec.BIT["EXECUTABLE"].bit])
                            walk_ok = Signal()  # the new entry permits the access
                            m.d.comb += walk_ok.eq((need & perm).any())
                            m.d.comb += [tlb_w.en.eq(1), tlb_w.addr.eq(victim), tlb_w.data.ppn.eq(leaf_ppn),
                                         tlb_w.data.level.eq(level)]
                            m.d.sync += [t_valid.bit_select(victim, 1).eq(1), t_vmid[victim].eq(t.user.vmid),
                                         t_vpn[victim].eq(t.addr[PS:VA]), t_perm[victim].eq(perm),
                                         victim.eq(victim + 1), walked.eq(1),
                                         hits.eq(Const(1, N) << victim), hit_any_ar.eq(1), hit_any_aw.eq(1),
                                         hit_ok_ar.eq(walk_ok), hit_ok_aw.eq(walk_ok)]
                            m.next = "CHECK"
                        with m.Else():
                            m.d.sync += [table.eq(pte_addr), level.eq(level + 1)]
                            m.next = "WALK_AR"

            with m.State("FAULT"):
                # a write's W beats are swallowed: its place in the W order says so
                with m.If(t_write):
                    with m.If(~wq_full):
                        m.d.comb += [wq_push.eq(1), wq_push_fwd.eq(0)]
                        m.next = "FAULT_WAIT"
                with m.Else():
                    m.next = "FAULT_WAIT"

            with m.State("FAULT_WAIT"):
                # everything forwarded before it is answered first
                with m.If(~t_write & (rd_out == 0) & ~ar_o_valid):
                    m.d.sync += [inj_beat.eq(0), inj_last.eq(ar_h.len == 0)]
                    m.next = "FAULT_R"
                with m.If(t_write & (wr_out == 0) & ~aw_o_valid & ~wq_ne):
                    m.next = "FAULT_B"

            with m.State("FAULT_R"):
                m.d.comb += inj_r.eq(1)
                with m.If(s.rready):
                    m.d.sync += [inj_beat.eq(inj_beat + 1), inj_last.eq(inj_beat + 1 == ar_h.len)]
                    with m.If(inj_last):
                        m.d.comb += release_ar.eq(1)
                        m.next = "IDLE"

            with m.State("FAULT_B"):
                m.d.comb += inj_b.eq(1)
                with m.If(s.bready):
                    m.d.comb += release_aw.eq(1)
                    m.next = "IDLE"

        with m.If(self.inv_req):
            m.d.sync += [inv_pending.eq(1), inv_vmids.eq(self.inv_vmids), inv_all.eq(self.inv_all),
                         inv_page.eq(self.inv_page), self.inv_ack.eq(0)]
        # one flip-flop per state on an FPGA (as the CP's): paths that start from the state
        # (the fault responder's R and B, the next state) start from a register, not a decoder
        fsm.state.attrs["fsm_encoding"] = "one-hot"
        return m
