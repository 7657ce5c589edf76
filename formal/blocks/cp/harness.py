"""CPHarness: the real CommandProcessor in the free world of env.py, the invariants every
CP group's induction needs (the configuration's registers, the writer against memory, the
fetchers' tags, the level, the state machine), then the group's own rows (one module each)."""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import data

from rtl.cp import ih as cp_ih
from rtl.cp import packets as cp_packets
from rtl.cp import processor as cp_mod
from rtl.cp.writer import WriteSource
from rtl.mmu import RESP_USER
from spec import ih as ih_spec

from ...harness import Harness, HarnessError, WhiteBox
from . import bus, env, errors, ih, live, queues, reset, ring
from .env import free_csr

BUILDERS = {"cp_ring": ring.build, "cp_ih": ih.build, "cp_errors": errors.build, "cp_bus": bus.build,
            "cp_reset": reset.build, "cp_live": live.build, "cp_queues": queues.build}


class CPHarness(Harness):
    def __init__(self, group, data_width=32, fetch_depth=2, ring_log2_max=3, latency=0, ar_queue=4,
                 live_bound=0, steady=False, queues=False, image=(), okay=False, ext_ih=False):
        super().__init__()
        # `ext_ih`: another engine (the device's SDMA) asks the CP for IH entries (ext_ih_*);
        # off, ext_ih_valid is 0 (cp_queues' invariants say no such entry is in hand)
        self.ext_ih = ext_ih
        # `queues`: the CP's second hardware queue on (cp_queues: the shared invariants below hold
        # for the running queue, queues.py states each queue's)
        self.queues = queues
        self.live_bound = live_bound
        # `steady`: the driver never halts, disables or soft-resets the CP. Fewer traces, so a
        # mutant's counterexample that needs a long one (a whole packet parsed) is found sooner;
        # a counterexample under more assumptions is one under the group's too
        self.steady = steady
        # `image`: memory holds these dwords (formal/blocks/cp/env.py), repeated: a mutant's
        # configuration that fixes the ring's packets (a counterexample with the ring so is one
        # with any ring: the group's memory returns free data)
        self.image = tuple(image)
        n = len(self.image)
        if n and not (2 <= n <= 64 and n & (n - 1) == 0):  # (refused here, before anything is built)
            self._MustUse__silence = True  # (a refused harness is no unused one)
            raise HarnessError(f"CPHarness image: {n} dwords; it must be a power of two from 2 to 64")
        # `okay`: memory answers every request OKAY (formal/blocks/cp/env.py)
        self.okay = okay
        self.group = group
        self.data_width = data_width
        self.fetch_depth = fetch_depth
        self.ring_log2_max = ring_log2_max
        self.latency = latency
        self.ar_queue = ar_queue

    def memory(self, m, bus):
        env.memory(self, m, bus)

    def build(self, m):
        csr = free_csr(self, self.queues)
        cp = cp_mod.CommandProcessor(csr, self.data_width, 48, 2, 48, dma=None,
                                     fetch_depth=self.fetch_depth)
        box = self.box = WhiteBox(cp, "CommandProcessor")
        m.submodules.cp = box.module
        self.no_reset()
        self.memory(m, cp.bus)
        m.d.comb += cp.timestamp.eq(self.free(48, "timestamp"))
        self.csr, self.cp = csr, cp

        if self.steady:
            # (enabled from cycle 2 on, after its size: a ring enabled in cycle 0 or 1 starts its
            # fetcher with the reset mask, and one never disabled keeps it, so that no packet
            # longer than the reset ring parses: `steady` once made every such trace impossible)
            self.assume(~csr.control_halt & ~csr.control_soft_reset)
            self.assume(csr.rb_cntl_enable == (self.started & self.past(self.started, "steady_q")))
        # ring within the harness's size; IH_RPTR: the driver consumes forward only
        self.assume(csr.rb_size <= self.ring_log2_max)
        if self.queues:
            self.assume(csr.cp_hqd1_rb_size <= self.ring_log2_max)
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
        if self.queues:
            # the same for queue 1's doorbell, and CP_QUEUE_RESET is an MMIO write too: one
            # write a cycle at most, never two in consecutive cycles, none before cycle 2
            was_db1 = self.past(csr.cp_hqd1_rb_doorbell, "drv_hqd1_doorbell_q")
            self.assume(~self.started | csr.cp_hqd1_rb_doorbell_swmod | (csr.cp_hqd1_rb_doorbell == was_db1))
            writes = [csr.rb_doorbell_swmod, csr.cp_hqd1_rb_doorbell_swmod, csr.cp_queue_reset_q0,
                      csr.cp_queue_reset_q1]
            any_write = Cat(*writes).any()
            self.assume(sum(writes) <= 1)
            self.assume(~(any_write & self.past(any_write, "drv_mmio_write_q")))
            self.assume(~any_write | (self.started & self.past(self.started, "started_q1")))
            # and the rings are enabled after their size is written (an MMIO write each): the ring
            # masks follow RB_SIZE a cycle late, so a ring fetcher started in cycle 0 or 1 would
            # read with the reset mask (cp_ring states nothing about the fetcher's addresses)
            self.assume((self.started & self.past(self.started, "started_q1")) |
                        ~(csr.rb_cntl_enable | csr.cp_hqd1_rb_cntl_enable))
        ih_wptr = box("ih_wptr")
        rptr_next = self.free(32, "drv_ih_rptr")
        ih_rptr = Signal(32, name="drv_ih_rptr_q")
        m.d.sync += ih_rptr.eq(rptr_next)
        m.d.comb += [csr.ih_rptr.eq(ih_rptr), csr.ih_rptr_next.eq(rptr_next)]  # (as the CSR block's)
        self.assume(((rptr_next - ih_rptr)[:32] <= (ih_wptr - ih_rptr)[:32]) | (rptr_next == ih_wptr))

        # registers that follow the (fixed) configuration a cycle or two late: they are what it
        # says once `age` cycles have passed (and the IH slot register follows IH_WPTR a cycle
        # late), so an induction step never starts from a slot or size nothing could produce
        age = Signal(2, name="age", reset_less=True)
        with m.If(age != 3):
            m.d.sync += age.eq(age + 1)
        self.invariant((age != 0) | ~self.started)
        if self.ext_ih:
            # another engine's IH entries, free within the protocol the SDMA keeps: a request
            # holds, with its payload, until the CP answers it (ext_ih_done) or a soft reset
            # drops it (the CP's IH writer is reset with it); none in the first cycles (the
            # engine is started by MMIO writes, the first of which comes in cycle 2)
            for port in (cp.ext_ih_valid, cp.ext_ih_src, cp.ext_ih_client, cp.ext_ih_vmid, cp.ext_ih_data):
                m.d.comb += port.eq(self.free(len(port), f"drv_{port.name}"))
            payload = Cat(cp.ext_ih_src, cp.ext_ih_client, cp.ext_ih_vmid, cp.ext_ih_data)
            waited, old = self.held(cp.ext_ih_valid, cp.ext_ih_done, payload)
            held = waited & ~self.past(csr.control_soft_reset, "drv_soft_reset_q")
            with m.If(held):
                self.assume(cp.ext_ih_valid & (payload == old))
            self.assume(~cp.ext_ih_valid | (age == 3))
            # (an entry of another engine's in hand is one whose request waits: it holds)
            in_ih = Cat(*(box.state("cp", st) for st in box.states("cp") if st.startswith("IH_"))).any()
            self.invariant(~(box("ih_ext") & in_ih) | held)
            self.invariant(~box("ih_ext") | in_ih | box.state("cp", "RESET"))  # (RESET clears it)
            self.invariant(~box("ih_ext") | (box("ih_ret") <= max(cp_ih.RET_RUN, cp_ih.RET_ERROR, cp_ih.RET_WRM)))
            self.invariant(~(box("ih_ext") & box("ih_err")))  # (another engine's entry is no error's)
        else:
            self.invariant(~box("ih_ext"))  # (no other engine's IH entry: ext_ih_valid is 0)
        # (nothing has happened yet in the first cycles: no doorbell has come)
        self.invariant((age == 3) | ((box.state("cp", "RUN") | box.state("cp", "RESET")) & ~box("wr_req") & ~box("err_any") &
                                     (box("wptr") == 0) & (box("rptr") == 0) & (box("ring_pos") == 0) &
                                     (box("ih_wptr") == 0) & (box("level") == 0) & ~box("err_pending")))
        log2 = Mux(csr.ih_size < ih_spec.MIN_LOG2_DWORDS, ih_spec.MIN_LOG2_DWORDS, csr.ih_size) + 2
        self.invariant((age < 1) | (box("ih_log2_bytes") == log2))
        self.invariant((age < 2) | ((box("ih_bytes") == (Const(1, 35) << log2)) &
                                    (box("ih_bytes_m1") == (Const(1, 35) << log2) - 1)))
        # each queue's ring registers (queue 1's only when it is on: off, its size is free)
        for i, rb_size in enumerate((csr.rb_size, csr.cp_hqd1_rb_size)[:2 if self.queues else 1]):
            size = (Const(1, 34) << (rb_size + 1))
            self.invariant((age < 1) | ((box(f"ring_size_q{i}") == size) & (box(f"ring_mask_q{i}") == size - 1) &
                                        (box(f"ring_huge_q{i}") == (rb_size == 31))))
            self.invariant((age < 2) | (box(f"limit_q{i}") == (box(f"rptr_q{i}") + size)[:32]))
        was_slot = self.past((box("ih_base") + (box("ih_wptr") & box("ih_bytes_m1")))[:48], "ih_slot_q")
        self.invariant((age < 3) | (box("ih_entry_addr") == was_slot))
        was_full = self.past((box("ih_wptr") - csr.ih_rptr)[:32] >= box("ih_bytes"), "ih_full_q")
        self.invariant((age < 3) | (box("ih_entry_full") == was_full))

        # the writer's one write against the memory's counts: B comes once, after its AW and
        # its last W beat
        aw_sent, w_sent = box("aw_sent", "writer"), box("w_sent", "writer")
        self.invariant((self.mem.aw_n == aw_sent) & (self.mem.wl_n == w_sent))
        self.invariant(~(aw_sent | w_sent | box("w_started", "writer")) | box("req_valid", "writer"))
        # a write is asked for only while the CP waits for it (or drains, or resets)
        # (or a queue reset, which waits for it too)
        waits = [st for st in box.states("cp") if st.endswith("_WAIT")] + ["ERR_DRAIN", "RESET"] + \
            (["QRESET"] if self.queues else [])
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
        # (with two queues the BMC starts from reset and needs no such assumption)
        # (with two queues the group's BMC starts from reset and needs no such assumption: its
        # induction assumes as much of the dwords the fetcher requested, queues.py)
        if not self.queues:
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
        if not self.queues:
            for n in ("q", "other_can", "want_switch", "qr_pend_q0", "qr_pend_q1", "dbpend_q0", "dbpend_q1",
                      "park_q0", "park_q1", "reparse_q0", "reparse_q1", "sh_level", "sh_err", "sh_err_pending",
                      "sh_ring_pos", "rptr_q1", "wptr_q1"):
                self.invariant(box(n) == 0)
            self.invariant(~box.state("cp", "SWAP") & ~box.state("cp", "SWAP1") & ~box.state("cp", "QRESET"))
        # (err latches a cycle after the capture, so a pending error always has a capture or a
        # latch beside it; with two queues too, since a doorbell write of the running queue holds
        # the switch for its cycle: rtl/cp/queues.py, cp_queues.doorbell_error_kept)
        self.invariant(~box("err_pending") | box("err_any"))
        # the ring fetcher's `end` is a register kept equal to the running queue's wptr
        # (rtl/cp/queues.py active_wptr)
        self.invariant(box("ring_end") == Mux(box("q"), box("wptr_q1"), box("wptr_q0")))
        # the IB fetchers' load and start, flat (rtl/cp/parser.py), are what the packet's
        # states ask for (pm4/indirect_buffer.py) and SWAP1's restart; `sw_due` is
        # `want_switch | turn_due` (rtl/cp/queues.py arbiter)
        for i in range(1, 1 + cp.ib_levels):
            restart = box("resume") & (box("level") >= i)
            self.invariant(box(f"ib_load{i}") == ((box("load_ib") & (box("load_level") == i)) | restart))
            self.invariant(box(f"ib_start{i}") == ((box("start_ib") & (box("start_level") == i)) | restart))
        self.invariant(box("sw_due") == (box("want_switch") | (box("took") & box("prio_eq"))))
        self.invariant(~box.state("cp", "RESET") | box("resetting"))
        # the block buffer says whose data the writer reads: the IH entry's only for it (until
        # the write is sent: RM_WAIT and IH_ENTRY_WAIT then load the next write's request)
        sent = box("sent", "writer")
        for st in ("RPTR_WRITE", "WD_WRITE", "RM_WRITE", "IH_WB_WRITE", "RPTR_WAIT", "WD_WAIT", "RM_WAIT",
                   "IH_WB_WAIT"):
            self.invariant(~box.state("cp", st) | (box("wr_src") != WriteSource.IH) | (st == "RM_WAIT") & sent)
        for st in ("IH_ENTRY_WRITE", "IH_ENTRY_WAIT"):
            self.invariant(~box.state("cp", st) | (box("wr_src") == WriteSource.IH) |
                           (st == "IH_ENTRY_WAIT") & sent)
        # a RELEASE_MEM's EOP entry is in the entry's registers from its payload on (prepare():
        # the fence's answer loads only its GPU clock, then asks for the entry's write)
        for st in ("RM_WRITE", "RM_WAIT"):
            self.invariant(~box.state("cp", st) | ((box("ih_src") == ih_spec.Source.EOP) & ~box("ih_err")))
        # a block waiting in the buffer for its *_WRITE state is where its packet said
        slot = (box("ih_base") + (box("ih_wptr") & (box("ih_bytes") - 1)))[:48]
        self.invariant(~box.state("cp", "IH_ENTRY_WRITE") | ((box("blk_addr")[5:] == slot[5:]) &
                                                             (box("blk_mask") == 0xFF)))
        wb = Cat(Const(0, 2), csr.ih_wptr_addr_lo[2:], csr.ih_wptr_addr_hi)
        self.invariant(~box.state("cp", "IH_WB_WRITE") | (box("blk_addr") == wb))
        BUILDERS[self.group](self, m, box, csr, cp)

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
