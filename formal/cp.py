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
from amaranth.lib import data, wiring

from rtl import csr as csr_mod
from rtl.cp import packets as cp_packets
from rtl.cp import processor as cp_mod
from rtl.cp.writer import WriteSource
from rtl.csr import CpError
from rtl.mmu import RESP_USER
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


# The CP's second hardware queue (rtl/cp/queues.py) stays off in these proofs: its enable, its
# doorbell and the queue resets are held at 0, so queue 0 runs alone, as before it existed.
QUEUE1_OFF = ("cp_hqd1_rb_cntl_enable", "cp_hqd1_rb_doorbell_swmod", "cp_queue_reset_q0", "cp_queue_reset_q1")


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
            if name in QUEUE1_OFF:
                h.m.d.comb += sig.eq(0)
            elif name in CONFIG:
                h.m.d.comb += sig.eq(h.const(len(sig), f"cfg_{name}"))
            elif name != "ih_rptr":
                h.m.d.comb += sig.eq(h.free(len(sig), f"drv_{name}"))
    return SimpleNamespace(**ports)


class CPHarness(Harness):
    def __init__(self, group, data_width=32, fetch_depth=2, ring_log2_max=3, latency=0, ar_queue=4,
                 live_bound=0):
        super().__init__()
        self.live_bound = live_bound
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
        self.mem = SimpleNamespace(count=count, aw_n=aw_n, wl_n=wl_n, beat=beat, q_len=q_len, q_id=q_id,
                                   rp=rp, qb=qb, D=D, waits={})
        if self.latency:
            L = self.latency
            for name, waiting, answer in (
                    ("ar", bus.arvalid, bus.arready), ("aw", bus.awvalid, bus.awready),
                    ("w", bus.wvalid, bus.wready), ("r", count != 0, bus.rvalid), ("b", can_b, bus.bvalid)):
                t = Signal(range(L + 2), name=f"mem_wait_{name}")
                self.mem.waits[name] = t
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
        # RB_DOORBELL is a register: it changes only with a write (RB_DOORBELL's swmod pulse,
        # in the cycle the new value shows), and two MMIO writes are never in consecutive
        # cycles (the AXI4-Lite bridge answers each with B first). The CP reads the value a
        # cycle after the pulse when it reports a bad doorbell (rtl/cp/errors.py).
        was_db = self.past(csr.rb_doorbell, "drv_rb_doorbell_q")
        was_swmod = self.past(csr.rb_doorbell_swmod, "drv_rb_doorbell_swmod_q")
        self.assume(~self.started | csr.rb_doorbell_swmod | (csr.rb_doorbell == was_db))
        self.assume(~(csr.rb_doorbell_swmod & was_swmod))
        # (and the first doorbell comes two cycles after reset at the earliest: the ring's size
        # and rptr + size are registers that follow RB_SIZE a cycle late)
        self.assume(~csr.rb_doorbell_swmod | (self.started & self.past(self.started, "started_q")))
        ih_wptr = box("ih_wptr")
        rptr_next = self.free(32, "drv_ih_rptr")
        ih_rptr = Signal(32, name="drv_ih_rptr_q")
        m.d.sync += ih_rptr.eq(rptr_next)
        m.d.comb += csr.ih_rptr.eq(ih_rptr)
        self.assume(((rptr_next - ih_rptr)[:32] <= (ih_wptr - ih_rptr)[:32]) | (rptr_next == ih_wptr))

        # registers that follow the (fixed) configuration a cycle or two late: they are what it
        # says once `age` cycles have passed (and the IH slot register follows IH_WPTR a cycle
        # late), so an induction step never starts from a slot or size nothing could produce
        age = Signal(2, name="age", reset_less=True)
        with m.If(age != 3):
            m.d.sync += age.eq(age + 1)
        self.invariant((age != 0) | ~self.started)
        # (nothing has happened yet in the first cycles: no doorbell has come)
        self.invariant((age == 3) | ((box.state("cp", "RUN") | box.state("cp", "RESET")) & ~box("wr_req") & ~box("err_any") &
                                     (box("wptr") == 0) & (box("rptr") == 0) & (box("ring_pos") == 0) &
                                     (box("ih_wptr") == 0) & (box("level") == 0) & ~box("err_pending")))
        log2 = Mux(csr.ih_size < ih_spec.MIN_LOG2_DWORDS, ih_spec.MIN_LOG2_DWORDS, csr.ih_size) + 2
        size = (Const(1, 34) << (csr.rb_size + 1))
        self.invariant((age < 1) | ((box("ih_log2_bytes") == log2) & (box("ring_size") == size) &
                                    (box("ring_mask") == size - 1) & (box("ring_huge_q0") == (csr.rb_size == 31))))
        self.invariant((age < 2) | ((box("ih_bytes") == (Const(1, 35) << log2)) &
                                    (box("ih_bytes_m1") == (Const(1, 35) << log2) - 1) &
                                    (box("limit") == (box("rptr") + size)[:32])))
        was_slot = self.past((box("ih_base") + (box("ih_wptr") & box("ih_bytes_m1")))[:48], "ih_slot_q")
        self.invariant((age < 3) | (box("ih_entry_addr") == was_slot))

        # the writer's one write against the memory's counts: B comes once, after its AW and
        # its last W beat
        aw_sent, w_sent = box("aw_sent", "writer"), box("w_sent", "writer")
        self.invariant((self.mem.aw_n == aw_sent) & (self.mem.wl_n == w_sent))
        self.invariant(~(aw_sent | w_sent | box("w_started", "writer")) | box("req_valid", "writer"))
        # a write is asked for only while the CP waits for it (or drains, or resets)
        waits = [st for st in box.states("cp") if st.endswith("_WAIT")] + ["ERR_DRAIN", "RESET"]
        self.invariant(~box("wr_req") | Cat(*(box.state("cp", st) for st in waits)).any())

        # each fetcher's dword tags are the tag function's of their dwords: every beat is written
        # to the buffer with its tags worked out from it (rtl/cp/fetch.py), so a beat read back,
        # or taken as it arrives, has them (assumed of the buffer, whose contents an induction
        # step does not know), and the output register keeps the pair
        dtag = cp_packets.DwordTag(cp.dma_max_log2, cp.addr_width)
        dpb = self.data_width // 32
        idx_w = max(1, (dpb - 1).bit_length())
        beat = data.StructLayout({"data": self.data_width, "resp": 2, "first": idx_w, "last": idx_w,
                                  "tags": dtag.layout.size * dpb, "user": RESP_USER.size})
        for i in range(1 + cp.ib_levels):
            f = f"fetch{i}"
            src = data.View(beat, box("src", f))
            tags = [src.tags[k * dtag.layout.size:(k + 1) * dtag.layout.size] for k in range(dpb)]
            self.assume(Cat(*(t == dtag(m, src.data[32 * k:32 * (k + 1)]).as_value()
                              for k, t in enumerate(tags))).all())
            self.invariant(~box("out_valid", f) | (box("out_tag", f) == dtag(m, box("out_data", f)).as_value()))
            # (and its response's not-OKAY bit, a register of its own, is its response's)
            self.invariant(~box("out_valid", f) | (box("out_bad", f) == (box("out_resp", f) != 0)))

        # the ring's fetcher offers a dword only below wptr: it requests dwords in [ring_pos,
        # wptr) and delivers them in order (the fetch group proves its reads stay in that
        # window); assumed here, where an induction step cannot count the dwords it holds
        self.assume(~box("out_valid", "fetch0") | (box("ring_pos") != box("wptr")))

        # the level kept one-hot too (for the fast multiplexers) is the level
        # (an IB2's INDIRECT_BUFFER, refused for IB_NESTING, starts a level deeper for the one
        # cycle its failed check takes to stop it: `failed` restores the level, or a soft reset
        # that came meanwhile sets it to 0)
        self.invariant(((box("level") <= cp.ib_levels) | box("failed") | box.state("cp", "RESET")) &
                       (box("lvl") == (Const(1, 1 + cp.ib_levels) << box("level"))[:1 + cp.ib_levels]))
        self.invariant(~box("failed") | (box("level_d") <= cp.ib_levels))  # (the level it restores)

        states = box.states("cp")
        self.invariant(box("cp_state") < len(states))
        # with queue 1 off (QUEUE1_OFF) queue 0 is always the one running: nothing switches,
        # parks or waits for a queue reset, and queue 1's state is its reset state
        for n in ("q", "other_can", "want_switch", "qr_pend_q0", "qr_pend_q1", "dbpend_q0", "dbpend_q1", "park_q0",
                  "park_q1", "reparse_q0", "reparse_q1", "sh_level", "sh_err", "sh_err_pending", "sh_ring_pos",
                  "rptr_q1", "wptr_q1"):
            self.invariant(box(n) == 0)
        self.invariant(~box.state("cp", "SWAP") & ~box.state("cp", "SWAP1") & ~box.state("cp", "QRESET"))
        self.invariant(~box("err_pending") | box("err_any"))  # (err latches a cycle after the capture)
        self.invariant(~box.state("cp", "RESET") | box("resetting"))
        # the block buffer says whose data the writer reads: the IH entry's only for it
        for st in ("RPTR_WRITE", "WD_WRITE", "RM_WRITE", "IH_WB_WRITE", "RPTR_WAIT", "WD_WAIT", "RM_WAIT",
                   "IH_WB_WAIT"):
            self.invariant(~box.state("cp", st) | (box("wr_src") != WriteSource.IH))
        for st in ("IH_ENTRY_WRITE", "IH_ENTRY_WAIT"):
            self.invariant(~box.state("cp", st) | (box("wr_src") == WriteSource.IH))
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

    def writer_start(self):
        """A write starts: the writer's request is raised (from the CP's registers, which hold
        its block, mask and data until `done`), or raised again in the cycle of `done`."""
        b = self.box
        valid = b("req_valid", "writer")
        return valid & (~self.past(valid) | self.past(b("done", "writer")))

    def doorbell(self):
        """(accepted-or-flagged doorbell this cycle, value): the CP looks at it."""
        b = self.box
        look = self.csr.rb_doorbell_swmod & self.csr.rb_cntl_enable & ~b("stopped") & ~b("err_any")
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
        tag = data.View(cp_packets.DwordTag(cp.dma_max_log2, cp.addr_width).layout, b("cur_tag"))
        one_dword = tag.filler  # a type-2 dword or AMD's header-only NOP
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
            # (latched two cycles on: captured, then CP_ERROR; wptr stays meanwhile)
            hit = was(was(look & bad & ~fsm_err) & self.started)
            self.prove(name, ~(self.started & hit) |
                       (b("err") & (b("err_code") == code) & (b("err_addr") == was(was(v))) &
                        (wptr == was(was(wptr)))))
        ok = look & ~backwards & ~overflow
        self.prove("doorbell_accepts", ~(self.started & was(ok)) | was(soft) | (wptr == was(v)))
        self.prove("wptr_only_doorbell", ~(self.started & (wptr != was(wptr))) |
                   (was(ok) & (wptr == was(v))) | (was(in_reset) & (wptr == 0)))

        # the rptr write-back: the dword last written there (and answered) is RB_RPTR when
        # idle; the data is read where the writer reads it, from the value registers (one
        # dword: both hold it)
        wb_val = Signal(32)
        wb_seen = Signal()
        written = b("wval0")
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
        # (a header whose COUNT runs past wptr is refused a cycle after it is taken: bad_count)
        self.invariant(in_reset | b("err_any") | (self.state("PAYLOAD") & b("bad_count")) |
                       ((pkt_end - rptr)[:32] <= (wptr - rptr)[:32]))
        self.invariant(~(self.state("PAYLOAD") | self.state("WD_COLLECT")) | (rem != 0))
        # in PAYLOAD the dwords read (pidx) and still to read (rem) add up to the COUNT the
        # header passed with
        kind, pidx = b("kind"), b("pidx")
        for pkt in pk.PACKETS:
            if pkt is pk.NOP:
                continue
            total = rem + pidx
            ok = (total == pkt.max_count + 1) if pkt.min_count == pkt.max_count else (total >= pkt.min_count + 1)
            # (a wrong COUNT is answered in PAYLOAD's first cycle: bad_count)
            self.invariant(~(self.state("PAYLOAD") & (kind == pkt.index) & ~b("bad_count")) |
                           (ok & (pidx < pkt.fixed)))
        wd_states = Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("WD_"))).any()
        # the flags kept a cycle ahead are what they stand for
        fixed_of = Array(Const(pkt.fixed, 4) for pkt in pk.PACKETS)
        self.invariant(~(self.state("PAYLOAD") & ~b("bad_count") & (kind < len(pk.PACKETS))) |
                       ((b("fixed") == fixed_of[kind]) & (b("last_fixed") == (pidx + 1 == b("fixed"))) &
                        (b("rem_is1") == (rem == 1))))
        self.invariant(~wd_states | (b("rem_is1") == (rem == 1)))
        # (and WRITE_DATA's "the next dword ends a block": its position is a block's last, or
        # it is the packet's last)
        wd = pk.WRITE_DATA
        no_incr = cp_packets.field([b(f"p{i}") for i in range(wd.fixed)], wd, "ADDR_INCR") == \
            wd.field("ADDR_INCR").values["NO_INCREMENT"]
        self.invariant(~wd_states | (b("wd_ends") == (((b("wd_addr")[2:5] == 7) & ~no_incr) | (rem == 1))))
        # (RELEASE_MEM's first step reads "beyond the bus" from `oob`, which PAYLOAD loads every
        # cycle from ADDR_HI: right from the cycle after the dword after ADDR_HI was taken)
        rm = pk.RELEASE_MEM
        hi = rm.field(rm.value("addr").fields[1]).dword
        self.invariant(~(self.state("PAYLOAD") & (kind == rm.index) & (pidx >= hi + 2)) |
                       (b("oob") == (b(f"p{hi}")[cp.addr_width - 32:] != 0)))
        self.invariant(~(self.state("WD_WAIT") | self.state("WD_WRITE")) | (b("rem_is0") == (rem == 0)))
        # (a packet's kind comes from its header's tag: the tag function's, a packet's index)
        self.invariant(~self.state("PAYLOAD") | (kind < len(pk.PACKETS)))
        # after its fixed payload only WRITE_DATA has dwords left to read
        tail = [st for st in self.box.states("cp")
                if st == "DONE" or st.startswith(("EXEC_", "WRM_", "RM_", "DMA_"))]
        in_tail = Cat(*(self.state(st) for st in tail)).any() | \
            (Cat(*(self.state(st) for st in self.box.states("cp") if st.startswith("IH_"))).any() &
             ~b("ih_err"))
        self.invariant(~in_tail | (rem == 0))
        self.invariant(~wd_states | (kind == pk.WRITE_DATA.index))
        self.invariant(~self.state("RING_DONE") | ((level == 0) & (ring_pos == pkt_end)))
        self.invariant(~(self.state("RUN") & (level == 0)) | (ring_pos == rptr))
        after_ring = self.state("RPTR_WRITE") | self.state("RPTR_WAIT")
        self.invariant(~after_ring | ((level == 0) & (ring_pos == rptr) & (pkt_end == rptr)))

        in_wb = self.state("RPTR_WRITE") | self.state("RPTR_WAIT")
        self.invariant(~(wb_seen & ~b("err_any") & ~in_wb & ~in_reset & csr.rb_cntl_rptr_wb) | (wb_val == rptr))
        self.invariant(~(in_wb & csr.rb_cntl_rptr_wb) | ((written == rptr) & (b("wr_src") == WriteSource.VALUE) &
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
        writer_start = self.writer_start()
        # a write starts, and it is the IH entry (the writer reads the block from the IH
        # entry's registers: `wr_src`)
        entry = self.started & writer_start & (b("wr_src") == WriteSource.IH)
        slot = (b("ih_base") + (ih_wptr & (nbytes - 1)))[:48]
        self.prove("no_overwrite", ~entry | (used < nbytes))
        self.prove("entry_slot", ~entry | (b("req_block", "writer") == slot[5:]) &
                   (b("req_mask", "writer") == 0xFF))
        self.invariant(~self.state("IH_ENTRY_WRITE") | (used < nbytes))
        # (IH_RPTR may stop inside an entry: the ring is at most an entry less a byte over;
        # after a soft reset, until the driver sets IH_RPTR to 0 the ring looks full)
        self.invariant((used < nbytes + ih_spec.ENTRY_BYTES) | (ih_wptr == 0))
        # an entry's write is asked for from IH_ENTRY_WAIT: the ring had room (IH_RPTR only
        # moves forward meanwhile) and the block is the entry at its slot
        self.invariant(~self.state("IH_ENTRY_WAIT") | ((used < nbytes) & (b("blk_addr")[5:] == slot[5:]) &
                                                       (b("blk_mask") == 0xFF) &
                                                       (b("wr_src") == WriteSource.IH)))
        # (whether the ring is full is kept a cycle ahead: it was full a cycle ago)
        ovf = b("ovf_set")
        self.prove("overflow_drops", ~ovf | (self.started & was(used >= nbytes) & ~writer_start))
        self.prove("overflow_keeps_wptr", ~(self.started & was(ovf)) | (ih_wptr == was(ih_wptr)) | was(in_reset))
        step = (ih_wptr - was(ih_wptr))[:32]
        self.prove("wptr_step", ~(self.started & (ih_wptr != was(ih_wptr))) |
                   (step == ih_spec.ENTRY_BYTES) | (was(in_reset) & (ih_wptr == 0)))
        # (IH_PENDING is a register: it compares IH_WPTR with IH_RPTR as it was a cycle ago)
        self.prove("pending_level", ~self.started | (csr.int_status_ih_pending == (ih_wptr != was(ih_rptr))))

        self.cover("overflow", ovf)
        self.cover("eop", b("eop_set"))

    # ------------------------------------------------------------------ cp_errors
    def group_errors(self, m, b, csr, cp):
        err = b("err")
        in_reset = self.state("RESET")
        was = self.past
        writer_take = self.writer_start()

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
        with m.If(self.started & writer_take & (b("wr_src") == WriteSource.IH) & b("ih_err") &
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

    # ------------------------------------------------------------------ cp_bus
    def group_bus(self, m, b, csr, cp):
        """The CP's AXI master side: the AR slice (rtl/cp/bus_port.py) and the block writer
        (rtl/cp/writer.py) as the memory sees them, and the failing packet's writes."""
        from rtl.cp.bus_port import ID_POLL
        bus = cp.bus
        was = self.past
        B = self.data_width // 8
        lb = B.bit_length() - 1
        nbeats = 32 // B
        in_reset = self.state("RESET")

        # ---- AR: VALID held and the payload stable until ARREADY
        ar_payload = Cat(bus.araddr, bus.arlen, bus.arsize, bus.arburst, bus.arid, bus.aruser)
        waited, old = self.held(bus.arvalid, bus.arready, ar_payload)
        self.prove("ar_held", ~waited | bus.arvalid)
        self.prove("ar_stable", ~waited | (ar_payload == old))
        # every AR is a client's request as the slice took it (address, length, the client's ID),
        # one per take: the fetchers' own proofs (fetch.*: window, 4 KiB, lengths) then hold
        # on the CP's AR channel
        takes = [(b("arvalid", f"fetch{i}") & b("arready", f"fetch{i}"), b("araddr", f"fetch{i}"),
                  b("arlen", f"fetch{i}"), i) for i in range(1 + cp.ib_levels)]
        poll_addr = b("poll_addr")
        takes.append((b("poll_taken"), Cat(Const(0, lb), poll_addr[lb:]), Const(0, 8), ID_POLL))
        g_full = Signal(name="ghost_ar_full")
        g_addr, g_len, g_id = Signal(48, name="ghost_ar_addr"), Signal(8, name="ghost_ar_len"), \
            Signal(4, name="ghost_ar_id")
        n_takes = sum(t for t, *_ in takes)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += g_full.eq(0)
        for take, addr, length, cid in takes:
            with m.If(take):
                m.d.sync += [g_full.eq(1), g_addr.eq(addr), g_len.eq(length), g_id.eq(cid)]
        self.prove("ar_from_client", (n_takes <= 1) & ~(g_full & (n_takes != 0)) &
                   (bus.arvalid == g_full) &
                   (~bus.arvalid | ((bus.araddr == g_addr) & (bus.arlen == g_len) & (bus.arid == g_id))))
        self.prove("ar_legal", ~bus.arvalid | ((bus.arsize == lb) & (bus.arburst == 1) &
                                               ((bus.arid != ID_POLL) | (bus.arlen == 0))))
        routed = Cat(*(b("rvalid", f"fetch{i}") == (bus.rvalid & (bus.rid == i)) for i in range(1 + cp.ib_levels)))
        self.prove("r_routed", routed.all() & (b("poll_rvalid") == (bus.rvalid & (bus.rid == ID_POLL))) &
                   bus.rready)

        # ---- AW and W: VALID held and the payload stable until READY
        for ch, valid, ready, payload in (
                ("aw", bus.awvalid, bus.awready,
                 Cat(bus.awaddr, bus.awlen, bus.awsize, bus.awburst, bus.awid, bus.awuser)),
                ("w", bus.wvalid, bus.wready, Cat(bus.wdata, bus.wstrb, bus.wlast))):
            waited, old = self.held(valid, ready, payload)
            self.prove(f"{ch}_held", ~waited | valid)
            self.prove(f"{ch}_stable", ~waited | (payload == old))

        # ---- a write is one burst inside one aligned 32-byte block, of legal shape
        self.prove("aw_in_block", ~bus.awvalid | ((bus.awaddr[:lb] == 0) &
                                                  (bus.awaddr[5:] == b("req_block", "writer")) &
                                                  (bus.awaddr[:5] + (bus.awlen + 1) * B <= 32)))
        self.prove("aw_legal", ~bus.awvalid | ((bus.awsize == lb) & (bus.awburst == 1) & (bus.awlen < nbeats)))

        # ---- W: AWLEN + 1 beats, WLAST on the last; only for the write under way, whose AW is
        # offered or accepted (W may go first: AXI allows it, and the mux holds it for its AW)
        start = self.writer_start()
        len_q = Signal(8, name="ghost_w_len")
        beats_q = Signal(8, name="ghost_w_beats")
        cur_len = Mux(start, bus.awlen, len_q)
        cur_beats = Mux(start, 0, beats_q)
        w_hs = bus.wvalid & bus.wready
        m.d.sync += [len_q.eq(cur_len), beats_q.eq(cur_beats + w_hs)]
        self.prove("wlast_beat", ~bus.wvalid | ((cur_beats <= cur_len) & (bus.wlast == (cur_beats == cur_len))))
        aw_sent = b("aw_sent", "writer")
        self.prove("w_with_aw", ~bus.wvalid | (b("req_valid", "writer") & (bus.awvalid | aw_sent)))
        # one write at a time: no AW and no last W beat before the previous write's B
        self.prove("one_write", (self.mem.aw_n <= 1) & (self.mem.wl_n <= 1))

        # ---- a packet whose check fails writes nothing: from the parser's error on, the only
        # writes requested (until soft reset) are the CP_ERROR IH entry and its IH_WPTR write-back
        failed = Signal(name="ghost_parser_failed")
        with m.If(b("fsm_err") & ~self.state("RESET")):
            m.d.sync += failed.eq(1)
        with m.If(in_reset):
            m.d.sync += failed.eq(0)
        slot = (b("ih_base") + (b("ih_wptr") & (b("ih_bytes") - 1)))[:48]
        wb_addr = Cat(csr.ih_wptr_addr_lo, csr.ih_wptr_addr_hi)
        block = b("req_block", "writer")
        ih_write = (b("wr_src") == WriteSource.IH) & (block == slot[5:]) | \
            (b("wr_src") == WriteSource.VALUE) & (block == wb_addr[5:])
        self.prove("failed_packet_writes_nothing", ~(failed & start) | ih_write)
        # (after a parser error: the cycle of `failed` that undoes the step, then the drain, the
        # CP_ERROR entry and ERROR; the error is captured or latched meanwhile)
        reporting = Cat(*(self.state(st) for st in b.states("cp") if st.startswith("IH_"))).any() & b("ih_err")
        self.invariant(~failed | in_reset | (b("err_any") & (b("failed") | self.state("ERR_DRAIN") |
                                                             self.state("ERROR") | reporting)))

        # ---- induction strengthening: the writer's beat against the ghost count, and its
        # request (block, mask, data source) held from the request to the response
        w_started, w_sent = b("w_started", "writer"), b("w_sent", "writer")
        first, last, cur = b("first", "writer"), b("last", "writer"), b("cur", "writer")
        req = b("req_valid", "writer")
        self.invariant(~(req & ~start) | ((len_q == last - first) &
                                          (beats_q == Mux(w_sent, last - first + 1, cur - first)) &
                                          (w_started | (beats_q == 0)) & (w_sent | (cur >= first) & (cur <= last))))
        self.invariant(g_full == b("ar_valid"))

        # covers
        self.cover("w_before_aw", w_hs & bus.awvalid & ~bus.awready)
        self.cover("whole_block", w_hs & bus.wlast & (cur_len == nbeats - 1))
        self.cover("poll_waits_for_slot", b("poll_req") & bus.arvalid & ~bus.arready)
        self.cover("parser_error_entry", failed & start & ih_write)

    # ------------------------------------------------------------------ cp_reset
    def group_reset(self, m, b, csr, cp):
        """SOFT_RESET in cycles: with a memory that takes every request and gives every
        response within `latency` cycles, RESET ends within a bound worked out from what can be
        outstanding when the pulse comes (one block write, one poll behind the queued reads).
        Proved by k-induction with a potential: the cycles since the pulse plus an upper bound
        of the cycles the outstanding work still needs never exceed the bound, and the work's
        bound drops by at least one every cycle (each pending handshake either waits, which
        the memory's wait counter counts, or happens)."""
        from rtl.cp.bus_port import ID_POLL
        L = self.latency
        assert L, "cp_reset needs a memory latency"
        bus = cp.bus
        mem = self.mem
        t = mem.waits
        soft = csr.control_soft_reset
        in_reset = self.state("RESET")
        B = self.data_width // 8
        nbeats = 32 // B
        fb = min(8, self.fetch_depth)  # the fetchers' longest burst (fetch.burst_legal)
        D = mem.D

        # the fetchers' bursts are at most their longest (proved by fetch.burst_legal)
        for i in range(1 + cp.ib_levels):
            self.assume(~b("arvalid", f"fetch{i}") | (b("arlen", f"fetch{i}") < fb))

        # ---- the writer's outstanding work (cycles, at most)
        req = b("req_valid", "writer")
        aw_sent, w_sent = b("aw_sent", "writer"), b("w_sent", "writer")
        last, cur = b("last", "writer"), b("cur", "writer")
        W = 16
        a_part = Mux(aw_sent, 0, L + 1 - t["aw"])
        w_part = Mux(w_sent, 0, (last - cur + 1) * (L + 1) - t["w"])
        aw_w = Mux(a_part > w_part, a_part, w_part)
        b_part = Mux(aw_sent & w_sent, L + 1 - t["b"], L + 1)
        p_w = Signal(W, name="pot_writer")
        m.d.comb += p_w.eq(Mux(req, aw_w + b_part + 1, 0))
        p_w_max = (nbeats + 1) * (L + 1) + 1
        # a write of AWLEN + 1 beats is answered within (AWLEN + 2)(L + 1) cycles of its request:
        # its work bound when it starts is at most (AWLEN + 2)(L + 1) + 1 and drops every cycle
        start = self.writer_start()
        w_len = Signal(8, name="ghost_w_len")
        w_age = Signal(range(p_w_max + 2), name="ghost_w_age")
        cur_len = Mux(start, bus.awlen, w_len)
        cur_age = Mux(start, 0, w_age)
        m.d.sync += [w_len.eq(cur_len), w_age.eq(Mux(cur_age <= p_w_max, cur_age + 1, cur_age))]
        self.prove("writer_bound", ~req | (cur_age < (cur_len + 2) * (L + 1)))

        # ---- the poll's: in the slice's slot, or queued in the memory behind earlier reads
        live = [Signal(name=f"mem_live{k}") for k in range(D)]
        ent_len = [Signal(8, name=f"mem_len_at{k}") for k in range(D)]
        ent_poll = [Signal(name=f"mem_poll_at{k}") for k in range(D)]
        for k in range(D):
            idx = (mem.rp + k)[:mem.qb]
            m.d.comb += [live[k].eq(k < mem.count), ent_len[k].eq(mem.q_len[idx]),
                         ent_poll[k].eq(live[k] & (mem.q_id[idx] == ID_POLL))]
        beats = [Mux(live[k], ent_len[k] + 1, 0) for k in range(D)]
        s_all = sum(beats) - mem.beat
        upto = []
        seen = Const(0)
        for k in range(D):
            upto.append(Mux(seen, 0, beats[k]))
            seen = seen | ent_poll[k]
        s_upto = sum(upto) - mem.beat
        in_slot = b("ar_valid") & (b("ar_id") == ID_POLL)
        p_p = Signal(W, name="pot_poll")
        m.d.comb += p_p.eq(Mux(~b("poll_pending"), 0,
                               Mux(in_slot, L + 1 - t["ar"] + (s_all + 1) * (L + 1) - t["r"],
                                   s_upto * (L + 1) - t["r"])))
        p_p_max = (L + 1) + (D * fb + 1) * (L + 1)
        bound = 1 + max(p_w_max, p_p_max)
        assert bound == properties._reset_bound(self.data_width, L, D, fb), "formal/properties.py says another bound"

        # cycles since the last SOFT_RESET pulse, while RESET lasts
        since = Signal(range(bound + 2), name="reset_cycles")
        with m.If(soft):
            m.d.sync += since.eq(1)
        with m.Elif(in_reset & (since <= bound)):
            m.d.sync += since.eq(since + 1)
        self.prove("reset_bound", ~(in_reset & ~soft) | (since <= bound))
        left = self.past(in_reset) & ~in_reset
        fetchers_stopped = ~Cat(*(b("active", f"fetch{i}") for i in range(1 + cp.ib_levels))).any()
        self.prove("reset_idle", ~(self.started & left) |
                   (self.state("RUN") & ~req & ~aw_sent & ~w_sent & ~b("poll_pending") & ~b("poll_req") &
                    fetchers_stopped & ~b("ring_running") & (mem.aw_n == 0) & (mem.wl_n == 0)))

        # ---- induction strengthening
        for name, tw in t.items():
            self.invariant(tw <= L)
        pot = Mux(p_w > p_p, p_w, p_p)
        self.invariant(~(in_reset & ~soft & self.started) | ((since >= 1) & (since + pot <= bound)))
        self.invariant((p_w <= p_w_max) & (p_p <= p_p_max))
        self.invariant(~req | (cur_age + p_w <= (cur_len + 2) * (L + 1) + 1))
        self.invariant(~req | (cur_len == last - b("first", "writer")))
        # the writer's beat lies in the burst until its last is sent
        self.invariant(~req | w_sent | ((cur >= b("first", "writer")) & (cur <= last)))
        # one poll at a time: pending while in the slot or queued (exactly one of them), and
        # not asked for again meanwhile; queued bursts as long as their clients' longest
        n_polls = sum(ent_poll) + in_slot
        self.invariant(n_polls == b("poll_pending"))
        self.invariant(~b("poll_pending") | ~b("poll_req"))
        # (a poll is in flight only while WAIT_REG_MEM waits for it, or the CP drains or resets)
        self.invariant(~b("poll_pending") | self.state("WRM_RESP") | self.state("ERR_DRAIN") | in_reset)
        self.invariant(~b("poll_req") | (self.state("WRM_READ") & ~b("oob")))
        self.invariant(~(self.state("WRM_RESP") | self.state("WRM_SLEEP")) | ~b("oob"))
        for k in range(D):
            self.invariant(~live[k] | (ent_len[k] < fb) & (~ent_poll[k] | (ent_len[k] == 0)))
        self.invariant(~b("ar_valid") | (b("ar_len") < fb) & ((b("ar_id") != ID_POLL) | (b("ar_len") == 0)))
        self.invariant(Mux(mem.count == 0, mem.beat == 0, mem.beat <= ent_len[0]))
        self.invariant(~b("resetting") | in_reset)
        self.invariant(mem.count <= D)

        self.cover("reset_waits_for_write", in_reset & ~soft & req & (since >= 2))
        self.cover("reset_waits_for_poll", in_reset & ~soft & b("poll_pending"))

    # ------------------------------------------------------------------ cp_live
    def group_live(self, m, b, csr, cp):
        """Liveness with a bound, for a small configuration, by BMC: with a memory that answers
        within `latency` cycles and a ring of two dwords (so a doorbell's work is at most two
        dwords: fillers, a two-dword NOP, or a packet the parser refuses), the driver neither
        halting, disabling nor resetting the CP and ringing no other doorbell meanwhile, a doorbell's work is done (STATUS.IDLE with
        RB_RPTR at its wptr) or an error is latched within `bound` cycles of the doorbell."""
        assert self.latency, "cp_live needs a memory latency"
        bound = self.live_bound
        self.assume(~csr.control_halt & csr.rb_cntl_enable & ~csr.control_soft_reset)
        look, v = self.doorbell()
        ok = look & ~(v - b("wptr"))[31] & ((v - b("rptr"))[:32] <= b("ring_mask") + 1)
        tracked = Signal(name="live_tracked")
        target = Signal(32, name="live_target")
        r0 = Signal(32, name="live_rptr0")
        age = Signal(range(bound + 2), name="live_age")
        with m.If(~tracked & ok):
            m.d.sync += [tracked.eq(1), target.eq(v), r0.eq(b("rptr")), age.eq(1)]
        with m.Elif(tracked & (age <= bound)):
            m.d.sync += age.eq(age + 1)
        # (later doorbells may add work: RB_RPTR reaching the doorbell's wptr, or passing it
        # with a packet that a later doorbell completed, is this doorbell's work done)
        reached = (b("rptr") - r0)[:32] >= (target - r0)[:32]
        # the driver rings once and waits: no later doorbell adds to the work meanwhile (a
        # header before the doorbell's wptr whose packet a later doorbell completes would make
        # its work depend on that doorbell)
        self.assume(~(tracked & ~reached & ~b("err") & csr.rb_doorbell_swmod))
        self.prove("doorbell_finishes", ~(tracked & (age > bound)) | reached | b("err"))
        self.cover("doorbell_work_done", tracked & reached & ~b("err") & (target != r0))
