"""The command processor (rtl/cp/): ring and doorbell, IH ring, errors and soft reset. One
harness, three groups (cp_ring, cp_ih, cp_errors), each stating its own rows of the table
over the same environment (and the strengthening invariants its induction needs):

- the registers are free (the CSR block's ports, from its signature): the configuration
  (ring and IH base and size, write-back addresses and enables) is chosen once, the rest
  (doorbell writes, RB_CNTL.ENABLE, HALT, SOFT_RESET, PERF_CLEAR, the timestamp) anew
  every cycle; the driver moves IH_RPTR only forward, never past IH_WPTR (or sets it to
  IH_WPTR);
- memory is a free AXI slave that answers reads in order with free data and free
  responses (OKAY, SLVERR, DECERR), so every packet, every malformed one and every bus
  error is possible; it keeps AXI's rules (one R beat per requested beat, RLAST on the
  last, B only after AW and the last W beat). With `latency` it also answers within that
  many cycles (for bounds in cycles; no group uses it yet).

The ring is at most 2^(ring_log2_max+1) dwords (RB_SIZE ≤ ring_log2_max): the CP's
pointer arithmetic (masks from RB_SIZE, free-running 32-bit pointers) is the same
at every size, and a small ring wraps within a few packets.
"""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import wiring

from rtl import csr as csr_mod
from rtl.cp import processor as cp_mod
from rtl.csr import CpError
from spec import ih as ih_spec
from spec import packets as pk

from . import properties
from .harness import Harness, WhiteBox

_TYPE = pk.HEADER.field("TYPE")
_COUNT = pk.HEADER.field("COUNT")
_OPCODE = pk.HEADER.field("OPCODE")

CONFIG = ("rb_base_lo", "rb_base_hi", "rb_size", "rb_rptr_addr_lo", "rb_rptr_addr_hi", "rb_cntl_rptr_wb",
          "ih_base_lo", "ih_base_hi", "ih_size", "ih_wptr_addr_lo", "ih_wptr_addr_hi",
          "ih_cntl_enable", "ih_cntl_wptr_wb", "int_enable_ih_pending", "int_enable_eop",
          "int_enable_cp_error", "int_enable_ih_overflow")


def free_csr(h):
    """A stand-in for the CSR block with its exact ports: what the hardware reads is free,
    what it drives is a plain signal."""
    dut = csr_mod.CSRBlock()
    dut._MustUse__used = True  # only its signature is used
    ports = {}
    for name, member in dut.signature.members.items():
        if name == "bus":
            continue
        sig = Signal(member.shape, name=f"csr_{name}")
        ports[name] = sig
        if member.flow == wiring.Out:  # the register block drives it: the driver's choice
            if name in CONFIG:
                h.m.d.comb += sig.eq(h.const(len(sig), f"cfg_{name}"))
            elif name != "ih_rptr":
                h.m.d.comb += sig.eq(h.free(len(sig), f"drv_{name}"))
    return SimpleNamespace(**ports)


class CPHarness(Harness):
    def __init__(self, group, data_width=32, fetch_depth=2, ring_log2_max=3, latency=0, ar_queue=4):
        super().__init__()
        self.group = group
        self.data_width = data_width
        self.fetch_depth = fetch_depth
        self.ring_log2_max = ring_log2_max
        self.latency = latency
        self.ar_queue = ar_queue

    # ------------------------------------------------------------------ the environment
    def memory(self, m, bus):
        """A free slave, in order, within AXI's rules (and `latency` when non-zero)."""
        D = self.ar_queue
        q_id = Array(Signal(4, name=f"mem_ar_id{i}") for i in range(D))
        q_len = Array(Signal(8, name=f"mem_ar_len{i}") for i in range(D))
        wp = Signal(range(2 * D))
        rp = Signal(range(2 * D))
        qb = len(wp) - 1
        count = Signal(range(2 * D + 1))
        m.d.comb += count.eq((wp - rp)[:len(wp)])
        beat = Signal(8)
        m.d.comb += bus.arready.eq(self.free(1, "mem_arready") & (count < D))
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [q_id[wp[:qb]].eq(bus.arid), q_len[wp[:qb]].eq(bus.arlen), wp.eq(wp + 1)]
        rvalid = self.free(1, "mem_rvalid")
        m.d.comb += [
            bus.rvalid.eq(rvalid & (count != 0)), bus.rid.eq(q_id[rp[:qb]]),
            bus.rlast.eq(beat == q_len[rp[:qb]]), bus.rdata.eq(self.free(self.data_width, "mem_rdata")),
            bus.rresp.eq(self.free(2, "mem_rresp")),
            bus.ruser.eq(self.free(len(bus.ruser), "mem_ruser")),  # an MMU's fault details
        ]
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += beat.eq(beat + 1)
            with m.If(bus.rlast):
                m.d.sync += [beat.eq(0), rp.eq(rp + 1)]
        # writes: B once both the AW and the burst's last W beat are in
        aw_n = Signal(3)
        wl_n = Signal(3)
        m.d.comb += [bus.awready.eq(self.free(1, "mem_awready") & (aw_n < 3)),
                     bus.wready.eq(self.free(1, "mem_wready") & (wl_n < 3))]
        aw_hs = bus.awvalid & bus.awready
        wl_hs = bus.wvalid & bus.wready & bus.wlast
        b_hs = bus.bvalid & bus.bready
        can_b = (aw_n != 0) & (wl_n != 0)
        m.d.comb += [bus.bvalid.eq(self.free(1, "mem_bvalid") & can_b), bus.bid.eq(0),
                     bus.bresp.eq(self.free(2, "mem_bresp")), bus.buser.eq(self.free(len(bus.buser), "mem_buser"))]
        m.d.sync += [aw_n.eq(aw_n + aw_hs - b_hs), wl_n.eq(wl_n + wl_hs - b_hs)]
        self.mem = SimpleNamespace(count=count, aw_n=aw_n, wl_n=wl_n, beat=beat, q_len=q_len, rp=rp, qb=qb)
        if self.latency:
            L = self.latency
            for name, waiting, answer in (
                    ("ar", bus.arvalid, bus.arready), ("aw", bus.awvalid, bus.awready),
                    ("w", bus.wvalid, bus.wready), ("r", count != 0, bus.rvalid), ("b", can_b, bus.bvalid)):
                t = Signal(range(L + 2), name=f"mem_wait_{name}")
                with m.If(waiting & ~answer):
                    m.d.sync += t.eq(t + 1)
                with m.Else():
                    m.d.sync += t.eq(0)
                with m.If(waiting & (t >= L)):
                    self.assume(answer)

    def build(self, m):
        csr = free_csr(self)
        cp = cp_mod.CommandProcessor(csr, self.data_width, 48, 2, 48, dma=None,
                                     fetch_depth=self.fetch_depth)
        box = self.box = WhiteBox(cp, "CommandProcessor")
        m.submodules.cp = box.module
        self.no_reset()
        self.memory(m, cp.bus)
        m.d.comb += cp.timestamp.eq(self.free(48, "timestamp"))
        self.csr, self.cp = csr, cp

        # ring within the harness's size; IH_RPTR: the driver consumes forward only
        self.assume(csr.rb_size <= self.ring_log2_max)
        self.assume(csr.ih_size <= self.ring_log2_max + 1)
        ih_wptr = box("ih_wptr")
        rptr_next = self.free(32, "drv_ih_rptr")
        ih_rptr = Signal(32, name="drv_ih_rptr_q")
        m.d.sync += ih_rptr.eq(rptr_next)
        m.d.comb += csr.ih_rptr.eq(ih_rptr)
        self.assume(((rptr_next - ih_rptr)[:32] <= (ih_wptr - ih_rptr)[:32]) | (rptr_next == ih_wptr))

        states = box.states("cp")
        self.invariant(box("cp_state") < len(states))
        self.invariant(~box("err_pending") | box("err"))
        self.invariant(~box.state("cp", "RESET") | box("resetting"))
        # the block buffer says whose data the writer reads: the IH entry's only for it
        for st in ("RPTR_WRITE", "WD_WRITE", "RM_WRITE", "IH_WB_WRITE", "RPTR_WAIT", "WD_WAIT", "RM_WAIT",
                   "IH_WB_WAIT"):
            self.invariant(~box.state("cp", st) | ~box("wr_ih"))
        for st in ("IH_ENTRY_WRITE", "IH_ENTRY_WAIT"):
            self.invariant(~box.state("cp", st) | box("wr_ih"))
        # a block waiting in the buffer for its *_WRITE state is where its packet said
        slot = (box("ih_base") + (box("ih_wptr") & (box("ih_bytes") - 1)))[:48]
        self.invariant(~box.state("cp", "IH_ENTRY_WRITE") | ((box("blk_addr")[5:] == slot[5:]) &
                                                             (box("blk_mask") == 0xFF)))
        wb = Cat(Const(0, 2), csr.ih_wptr_addr_lo[2:], csr.ih_wptr_addr_hi)
        self.invariant(~box.state("cp", "IH_WB_WRITE") | (box("blk_addr") == wb))
        getattr(self, self.group.replace("cp_", "group_"))(m, box, csr, cp)

    # ------------------------------------------------------------------ shared views
    def state(self, name):
        return self.box.state("cp", name)

    def doorbell(self):
        """(accepted-or-flagged doorbell this cycle, value): the CP looks at it."""
        b = self.box
        look = self.csr.rb_doorbell_swmod & self.csr.rb_cntl_enable & ~b("stopped") & ~b("err")
        return look, self.csr.rb_doorbell

    # ------------------------------------------------------------------ cp_ring
    def group_ring(self, m, b, csr, cp):
        rptr, wptr, ring_pos = b("rptr"), b("wptr"), b("ring_pos")
        size = Signal(33)
        m.d.comb += size.eq(b("ring_mask") + 1)
        soft = csr.control_soft_reset
        in_reset = self.state("RESET")
        was = self.past

        # rptr: forward, by whole ring packets, never past wptr
        changed = rptr != was(rptr)
        fwd = (rptr - was(rptr))[:32]
        self.prove("rptr_forward", ~(self.started & changed) | was(in_reset) |
                   ((fwd != 0) & (fwd <= (was(wptr) - was(rptr))[:32])))
        pkt_end = Signal(32)
        hdr = b("cur_fetch_data")
        one_dword = (hdr[_TYPE.bits] == pk.PACKET_TYPE2) | b("nop_pad")
        with m.If(self.state("RUN") & b("pop") & (b("level") == 0) & ~b("fsm_err")):
            m.d.sync += pkt_end.eq(ring_pos + Mux(one_dword, 1, hdr[_COUNT.bits] + 2))
        with m.If(in_reset):
            m.d.sync += pkt_end.eq(0)
        self.prove("rptr_whole_packets", ~(self.started & changed) | was(in_reset) | (rptr == was(pkt_end)))
        self.prove("occupancy", ((wptr - rptr)[:32] <= size) & ((ring_pos - rptr)[:32] <= (wptr - rptr)[:32]))

        # doorbells
        look, v = self.doorbell()
        backwards = (v - wptr)[31]
        overflow = ~backwards & ((v - rptr)[:32] > size)
        fsm_err = b("fsm_err")
        for name, bad, code in (("doorbell_backwards", backwards, CpError.DOORBELL_BACKWARDS),
                                ("doorbell_overflow", overflow, CpError.DOORBELL_OVERFLOW)):
            hit = was(look & bad & ~fsm_err)
            self.prove(name, ~(self.started & hit) |
                       (b("err") & (b("err_code") == code) & (b("err_addr") == was(v)) & (wptr == was(wptr))))
        ok = look & ~backwards & ~overflow
        self.prove("doorbell_accepts", ~(self.started & was(ok)) | was(soft) | (wptr == was(v)))
        self.prove("wptr_only_doorbell", ~(self.started & (wptr != was(wptr))) |
                   (was(ok) & (wptr == was(v))) | (was(in_reset) & (wptr == 0)))

        # the rptr write-back: the dword last written there (and answered) is RB_RPTR when
        # idle; the data is read where the writer reads it, from the block buffer
        wb_val = Signal(32)
        wb_seen = Signal()
        blk = Array(b(f"blk{i}") for i in range(8))
        written = blk[csr.rb_rptr_addr_lo[2:5]]
        writer_done_ok = b("done", "writer") & (b("resp", "writer") == 0)
        with m.If(self.state("RPTR_WAIT") & writer_done_ok):
            m.d.sync += [wb_val.eq(written), wb_seen.eq(1)]
        with m.If(in_reset):
            m.d.sync += wb_seen.eq(0)
        idle = b("idle")
        self.prove("rptr_writeback", ~(idle & ~b("err") & csr.rb_cntl_rptr_wb & wb_seen) | (wb_val == rptr))

        # induction strengthening: a ring packet's end is where the parser will be when it
        # finishes (the payload still to read, `rem`, counts down to it)
        level = b("level")
        rem = b("rem")
        reporting = Cat(*(self.state(s) for s in self.box.states("cp") if s.startswith("IH_"))).any() & \
            b("ih_err")
        outside = Cat(*(self.state(s) for s in ("RUN", "ERR_DRAIN", "ERROR", "RESET", "RPTR_WRITE",
                                                "RPTR_WAIT", "RING_DONE"))).any() | reporting
        self.invariant(~((level == 0) & ~outside) | ((ring_pos + rem)[:32] == pkt_end))
        self.invariant((level == 0) | in_reset | (ring_pos == pkt_end))
        self.invariant(in_reset | ((pkt_end - rptr)[:32] <= (wptr - rptr)[:32]))
        self.invariant(~(self.state("PAYLOAD") | self.state("WD_COLLECT")) | (rem != 0))
        # in PAYLOAD the dwords read (pidx) and still to read (rem) add up to the COUNT the
        # header passed with
        kind, pidx = b("kind"), b("pidx")
        for pkt in pk.PACKETS:
            if pkt is pk.NOP:
                continue
            total = rem + pidx
            ok = (total == pkt.max_count + 1) if pkt.min_count == pkt.max_count else (total >= pkt.min_count + 1)
            self.invariant(~(self.state("PAYLOAD") & (kind == pkt.index)) | (ok & (pidx < pkt.fixed)))
        self.invariant(kind < len(pk.PACKETS))
        # after its fixed payload only WRITE_DATA has dwords left to read
        tail = [st for st in self.box.states("cp")
                if st == "DONE" or st.startswith(("EXEC_", "WRM_", "RM_", "DMA_"))]
        in_tail = Cat(*(self.state(st) for st in tail)).any() | \
            (Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("IH_"))).any() &
             ~b("ih_err"))
        self.invariant(~in_tail | (rem == 0))
        wd_states = Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("WD_"))).any()
        self.invariant(~wd_states | (kind == pk.WRITE_DATA.index))
        self.invariant(~self.state("RING_DONE") | ((level == 0) & (ring_pos == pkt_end)))
        self.invariant(~(self.state("RUN") & (level == 0)) | (ring_pos == rptr))
        after_ring = self.state("RPTR_WRITE") | self.state("RPTR_WAIT")
        self.invariant(~after_ring | ((level == 0) & (ring_pos == rptr) & (pkt_end == rptr)))

        in_wb = self.state("RPTR_WRITE") | self.state("RPTR_WAIT")
        self.invariant(~(wb_seen & ~b("err") & ~in_wb & ~in_reset & csr.rb_cntl_rptr_wb) | (wb_val == rptr))
        self.invariant(~(in_wb & csr.rb_cntl_rptr_wb) | ((written == rptr) & ~b("wr_ih") &
                                                          b("blk_mask").bit_select(csr.rb_rptr_addr_lo[2:5], 1)))

        # covers
        self.cover("ring_wrap", self.started & changed & ((rptr & b("ring_mask")) < (was(rptr) & b("ring_mask"))) &
                   (rptr & b("ring_mask") != 0))
        self.cover("ib1", level == 1)
        self.cover("ib2", level == 2)
        self.cover("chain", self.state("EXEC_INDIRECT_BUFFER"))
        self.cover("doorbell_ignored", csr.rb_doorbell_swmod & ~csr.rb_cntl_enable & (csr.rb_doorbell != wptr))

    # ------------------------------------------------------------------ cp_ih
    def group_ih(self, m, b, csr, cp):
        ih_wptr, ih_rptr = b("ih_wptr"), csr.ih_rptr
        nbytes = b("ih_bytes")
        used = (ih_wptr - ih_rptr)[:32]
        in_reset = self.state("RESET")
        was = self.past
        writer_take = b("req_valid", "writer") & b("req_ready", "writer")
        # the writer took a request last cycle, and it was the IH entry (the block buffer
        # says whose data the writer reads: `wr_ih`)
        entry = self.started & was(writer_take) & b("wr_ih")
        slot = (b("ih_base") + (ih_wptr & (nbytes - 1)))[:48]
        self.prove("no_overwrite", ~entry | was(used < nbytes))
        self.prove("entry_slot", ~entry | (was(b("req_block", "writer")) == was(slot[5:])) &
                   (was(b("req_mask", "writer")) == 0xFF))
        self.invariant(~self.state("IH_ENTRY_WRITE") | (used < nbytes))
        ovf = b("ovf_set")
        self.prove("overflow_drops", ~ovf | ((used >= nbytes) & ~writer_take))
        self.prove("overflow_keeps_wptr", ~(self.started & was(ovf)) | (ih_wptr == was(ih_wptr)) | was(in_reset))
        step = (ih_wptr - was(ih_wptr))[:32]
        self.prove("wptr_step", ~(self.started & (ih_wptr != was(ih_wptr))) |
                   (step == ih_spec.ENTRY_BYTES) | (was(in_reset) & (ih_wptr == 0)))
        self.prove("pending_level", csr.int_status_ih_pending == (ih_wptr != ih_rptr))

        self.cover("overflow", ovf)
        self.cover("eop", b("eop_set"))

    # ------------------------------------------------------------------ cp_errors
    def group_errors(self, m, b, csr, cp):
        err = b("err")
        in_reset = self.state("RESET")
        was = self.past
        writer_take = b("req_valid", "writer") & b("req_ready", "writer")

        # after an error latches no packet starts: the parser consumes no header
        self.prove("no_packet_after_error", ~(err & self.state("RUN") & b("pop")))

        # once the CP has left the packet in hand (ERR_DRAIN), it writes only the CP_ERROR
        # IH entry and the IH_WPTR write-back, and reads nothing
        drained = Signal()
        with m.If(self.state("ERR_DRAIN")):
            m.d.sync += drained.eq(1)
        with m.If(in_reset):
            m.d.sync += drained.eq(0)
        slot = (b("ih_base") + (b("ih_wptr") & (b("ih_bytes") - 1)))[:48]
        wb_addr = Cat(csr.ih_wptr_addr_lo, csr.ih_wptr_addr_hi)
        block = b("req_block", "writer")
        ih_write = (block == slot[5:]) | (block == wb_addr[5:])
        reads = Cat(*(b("arvalid", f"fetch{i}") & b("arready", f"fetch{i}") for i in range(3))).any() | \
            b("poll_taken")
        self.prove("only_ih_after_error", ~drained | ((~writer_take | ih_write) & ~reads))
        reporting = Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("IH_"))).any() & \
            b("ih_err")
        stopping = self.state("ERR_DRAIN") | reporting | self.state("ERROR")
        self.invariant(~stopping | err)
        self.invariant(~err | stopping | in_reset | b("err_pending"))
        self.invariant(~drained | stopping | in_reset)
        quiet_fetch = ~Cat(*(b("active", f"fetch{i}") for i in range(3))).any() & ~b("ring_running")
        self.invariant(~(drained & ~self.state("ERR_DRAIN")) | quiet_fetch | in_reset)

        # one CP_ERROR entry per error
        entries = Signal(2)
        with m.If(self.started & was(writer_take) & b("wr_ih") & b("ih_err") &
                  (entries != 3)):
            m.d.sync += entries.eq(entries + 1)
        with m.If(in_reset):
            m.d.sync += entries.eq(0)
        self.prove("one_error_entry", entries <= 1)
        after_entry = Cat(*(self.state(st) for st in ("IH_ENTRY_WAIT", "IH_WB_WRITE", "IH_WB_WAIT",
                                                      "IH_DONE", "ERROR"))).any()
        self.invariant((entries == 0) | in_reset | (after_entry & b("ih_err")))
        self.invariant((b("ih_src") == ih_spec.Source.CP_ERROR) | (b("ih_src") == ih_spec.Source.EOP) |
                       (b("ih_src") == ih_spec.Source.VM_FAULT))
        in_ih = Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("IH_"))).any()
        self.invariant(~in_ih | (b("ih_err") == (b("ih_src") != ih_spec.Source.EOP)))
        self.invariant(~self.state("IH_ENTRY_WRITE") | ~b("err") | b("ih_err") |
                       ~drained)

        # the first error is the one reported: the latch holds until soft reset
        latch = Cat(b("err_code"), b("err_level"), b("err_opcode"), b("err_addr"), b("err_offset"))
        self.prove("latch_holds", ~(self.started & was(err) & ~was(in_reset)) | (err & (latch == was(latch))))

        # soft reset: clean and idle, within a bound once the memory answers within L cycles
        left = was(in_reset) & ~in_reset
        self.prove("reset_clears", ~(self.started & left) |
                   (self.state("RUN") & (b("rptr") == 0) & (b("wptr") == 0) & (b("ring_pos") == 0) &
                    (b("ih_wptr") == 0) & ~err & (b("level") == 0)))
        # once the bus is quiet (the writer's one write answered, no poll outstanding; the
        # DMA engine is not in this harness) RESET ends in the next cycle
        quiet = ~b("busy", "writer") & ~b("poll_pending")
        self.prove("reset_bounded", ~(self.started & was(in_reset & quiet & ~csr.control_soft_reset)) |
                   self.state("RUN"))

        for code in properties._cp_error_codes():
            self.cover(f"error_{code.name.lower()}", err & (b("err_code") == code))
        self.cover("reset_after_error", left & was(drained))
