"""cp_queues: the CP's two hardware queues (rtl/cp/queues.py) with both on: each queue's
fetches and rptr are its own, an error stops its queue alone, CP_QUEUE_RESET clears one
queue, switches happen at packet boundaries and a preempted queue resumes where it stood.

A BMC from reset. Ghost state per queue: the end of the ring packet in hand (as cp_ring's),
the start and end of the packet in hand at each IB level, whether the queue's error is
latched, and the queue's parser registers as they were swapped out (or as a reset leaves
them), which they must be again when it is swapped in.

The induction's invariants (end of build(), with the shared ones of harness.py, which hold
for the running queue): cp_ring's parser invariants for the running queue
(ring.parser_invariants) and their IB-level analogues, each queue's occupancy, the queue not
running at a packet boundary on its shadow registers, the ghosts against both (`errd`
against each queue's latch, `saved` against the shadows, the ring fetcher's queue against
`q`), the ring fetcher's burst registers (fetch.burst_invariants) inside the running queue's
window, and the resumed levels' first reads. The k = 3 step does not close yet
(docs/formal.md)."""

from amaranth.hdl import Cat, Const, Mux, Signal
from amaranth.lib import data

from rtl.cp import packets as cp_packets
from rtl.cp.packets import value as cp_value
from spec import packets as pk

from . import ring
from ..fetch import burst_invariants
from .env import COUNT

N = 2
# the parser's registers a queue keeps across a switch (rtl/cp/queues.py SWAPPED), as
# position_kept compares them: the ring position, the IB stack, the VMID, the error latch
KEPT = ("ring_pos", "level", "lvl", "vmid", "ib_base1", "ib_base2", "ib_size1", "ib_size2", "ib_pos1",
        "ib_pos2", "err", "err_code")


def build(h, m, b, csr, cp):
    was = h.past
    q = b("q")
    in_reset = h.state("RESET")
    run_pop = h.state("RUN") & b("pop")
    level, ring_pos, err = b("level"), b("ring_pos"), b("err")
    rptr_q = [b(f"rptr_q{i}") for i in range(N)]
    wptr_q = [b(f"wptr_q{i}") for i in range(N)]
    qr_pend = [b(f"qr_pend_q{i}") for i in range(N)]
    reparse_q = [b(f"reparse_q{i}") for i in range(N)]
    ports = [dict(base=Cat(Const(0, 8), csr.rb_base_lo, csr.rb_base_hi), size=csr.rb_size,
                  enable=csr.rb_cntl_enable, swmod=csr.rb_doorbell_swmod, doorbell=csr.rb_doorbell),
             dict(base=Cat(Const(0, 8), csr.cp_hqd1_rb_base_lo, csr.cp_hqd1_rb_base_hi), size=csr.cp_hqd1_rb_size,
                  enable=csr.cp_hqd1_rb_cntl_enable, swmod=csr.cp_hqd1_rb_doorbell_swmod,
                  doorbell=csr.cp_hqd1_rb_doorbell)]
    for pt in ports:
        pt["dwords"] = Const(1, 34) << (pt["size"] + 1)

    def mine(i, name):
        """Queue i's copy of a swapped register: the parser's while it runs, else the shadow's."""
        return Mux(q == i, b(name), b(f"sh_{name}"))

    # a queue's reset is done (CP_QUEUE_RESET: its request, pending, clears with the queue)
    qdone = [was(qr_pend[i]) & ~qr_pend[i] for i in range(N)]
    # (the ghosts follow the clearing itself, the cycle after it: a second CP_QUEUE_RESET write in
    # the clearing cycle keeps the request pending, so qdone may come a reset later)
    clearing = [Signal(name=f"ghost_queue_clear{i}") for i in range(N)]
    for i in range(N):
        m.d.comb += clearing[i].eq(Mux(q == i, h.state("QRESET") & ~b("failed") & (b("qr_wait") == 3) &
                                       ~b("busy", "writer") & ~b("poll_pending") & ~b("dma_busy_r"),
                                       qr_pend[i] & ~h.state("SWAP") & ~b("stopped")))
    qclr = [was(clearing[i]) for i in range(N)]
    reset_of = [was(in_reset) | was(qr_pend[i]) for i in range(N)]

    # ---- each queue's ring fetches: inside its ring, inside [its rptr, its wptr)
    fq = Signal(name="ghost_fetch_queue")  # the queue the ring fetcher was started for
    with m.If(b("ring_start")):
        m.d.sync += fq.eq(q)
    take0 = b("arvalid", "fetch0") & b("arready", "fetch0")
    addr0, len0 = b("araddr", "fetch0"), b("arlen", "fetch0")
    base = Mux(fq, ports[1]["base"], ports[0]["base"])
    dwords = Mux(fq, ports[1]["dwords"], ports[0]["dwords"])
    rp, wp = Mux(fq, rptr_q[1], rptr_q[0]), Mux(fq, wptr_q[1], wptr_q[0])
    off = Signal(48, name="ghost_fetch_off")
    m.d.comb += off.eq(addr0 - base)
    d = off[2:]
    rel = Signal(32, name="ghost_fetch_rel")  # the burst's first dword, counted from rptr
    m.d.comb += rel.eq((d[:32] - rp) & (dwords - 1)[:32])
    h.prove("fetch_in_own_window", ~take0 | ((addr0 >= base) & (off[:2] == 0) & (d + len0 + 1 <= dwords) &
                                            (rel + len0 + 1 <= (wp - rp)[:32])))

    # ---- each queue's rptr: forward, to the end of its ring packet just finished, never past
    # its wptr (0 only by its reset or a soft reset)
    tag = data.View(cp_packets.DwordTag(cp.dma_max_log2, cp.addr_width).layout, b("cur_tag"))
    length = Mux(tag.filler, 1, b("cur_fetch_data")[COUNT.bits] + 2)
    ring_end = [Signal(32, name=f"ghost_ring_end{i}") for i in range(N)]
    ib_start = [[Signal(20, name=f"ghost_ib{lv}_start{i}") for lv in (1, 2)] for i in range(N)]
    ib_end = [[Signal(20, name=f"ghost_ib{lv}_end{i}") for lv in (1, 2)] for i in range(N)]
    ib_pos = [b("ib_pos1"), b("ib_pos2")]
    for i in range(N):
        with m.If(in_reset | qclr[i]):  # (end_now: 0 in that cycle)
            m.d.sync += ring_end[i].eq(0)
        with m.If(run_pop & ~b("fsm_err") & (q == i)):
            with m.If(level == 0):
                m.d.sync += ring_end[i].eq(ring_pos + length)
            for k in range(2):
                with m.If(level == k + 1):
                    m.d.sync += [ib_start[i][k].eq(ib_pos[k]), ib_end[i][k].eq(ib_pos[k] + length)]
        for k in range(2):  # (an IB set up at a level starts at its dword 0: prepare(), a CHAIN)
            with m.If(b("load_ib") & (b("load_level") == k + 1) & (q == i)):
                m.d.sync += [ib_start[i][k].eq(0), ib_end[i][k].eq(0)]
    # (the ghost as it is now: 0 from the cycle after the queue's reset, when the register follows)
    end_now = [Mux(qclr[i], 0, ring_end[i]) for i in range(N)]
    ok_rptr = []
    for i in range(N):
        r = rptr_q[i]
        fwd = (r - was(r))[:32]
        ok_rptr.append(~(h.started & (r != was(r))) | (reset_of[i] & (r == 0)) |
                       ((r == was(ring_end[i])) & (fwd != 0) & (fwd <= (was(wptr_q[i]) - was(r))[:32])))
    h.prove("rptr_whole_packets", Cat(*ok_rptr).all())

    # ---- errors: the errored queue takes no header until its reset; the other runs on
    errd = [Signal(name=f"ghost_errored{i}") for i in range(N)]
    for i in range(N):
        with m.If((q == i) & err):
            m.d.sync += errd[i].eq(1)
        with m.If(in_reset | qclr[i]):
            m.d.sync += errd[i].eq(0)
    errd_active = Mux(q, errd[1], errd[0]) | err
    # ... and a queue switched out keeps its latch (in its shadow) until its reset: a swap that
    # dropped it would let the queue run again when it is switched back in, 20-odd cycles later
    # (the shadows are read as the queue's own registers: `mine`)
    kept = {n: [mine(i, n) for i in range(N)] for n in KEPT}
    kept_err = Cat(*[~((q != i) & ~in_reset) | qclr[i] | ~errd[i] | kept["err"][i] for i in range(N)]).all()
    h.prove("errored_queue_stops", ~(run_pop & errd_active) & kept_err)
    drain_empty = h.state("ERR_DRAIN") & ~b("err_any")
    h.prove("doorbell_error_kept", ~(h.state("SWAP1") & b("sh_err_pending") & ~b("sh_err")) &
            ~(drain_empty & was(drain_empty)))
    # the stopped queue hands over within 3 cycles once the other can run (work, no error,
    # not parked for a poll, no reset pending); a cycle for each registered decision
    o_ok = Signal(name="ghost_other_runnable")
    m.d.comb += o_ok.eq(Mux(q, ports[0]["enable"], ports[1]["enable"]) &
                        (Mux(q, wptr_q[0], wptr_q[1]) != Mux(q, rptr_q[0], rptr_q[1])) &
                        ~b("sh_err") & ~Mux(q, b("park_q0"), b("park_q1")) & ~Mux(q, qr_pend[0], qr_pend[1]))
    stuck = Signal(3, name="ghost_error_stuck")
    with m.If(h.state("ERROR") & o_ok & ~in_reset):
        m.d.sync += stuck.eq(Mux(stuck == 7, 7, stuck + 1))
    with m.Else():
        m.d.sync += stuck.eq(0)
    h.prove("error_yields", ~(h.state("ERROR") & o_ok) | (stuck <= 2))

    # ---- CP_QUEUE_RESET.Qi: queue i clean (pointers, position, level, error); the other's own
    ok_clear = []
    for i in range(N):
        ok_clear.append(~qdone[i] | ((rptr_q[i] == 0) & (wptr_q[i] == 0) & (kept["ring_pos"][i] == 0) &
                                     (kept["level"][i] == 0) & ~kept["err"][i]))
    h.prove("queue_reset_clears", Cat(*ok_clear).all())
    ok_alone = []
    for i in range(N):
        w, pt = wptr_q[i], ports[i]
        ok_alone.append(~(h.started & (w != was(w))) | (was(pt["swmod"]) & (w == was(pt["doorbell"]))) |
                        (reset_of[i] & (w == 0)))
        e = kept["err"][i]
        ok_alone.append(~(h.started & was(e) & ~e) | reset_of[i])
    h.prove("reset_alone", Cat(*ok_alone).all())

    # ---- switches: at packet boundaries; the queue swapped in is where it was swapped out
    # (a WAIT_REG_MEM that yields is rewound to its header, and stays there, `reparse`, until it is
    # parsed again: a queue swapped back in may be switched out again before that)
    rewound = was(h.state("WRM_SLEEP")) | b("reparse")
    swap = h.state("SWAP")
    at_ib_end = Cat(*((level == k + 1) & ((ib_pos[k] == Mux(q, ib_end[1][k], ib_end[0][k])) |
                                         (rewound & (ib_pos[k] == Mux(q, ib_start[1][k], ib_start[0][k]))))
                      for k in range(2))).any()
    boundary = ((level == 0) & (ring_pos == Mux(q, rptr_q[1], rptr_q[0]))) | \
        ((level != 0) & (ring_pos == Mux(q, ring_end[1], ring_end[0])) & at_ib_end)
    h.prove("switch_at_boundary", ~swap | b("err_any") | boundary)

    now = Cat(*(b(n) for n in KEPT))
    clean_v, at = 0, 0
    for n in KEPT:  # the reset values: the ring level (lvl one-hot at 0), nothing else
        clean_v |= (1 if n == "lvl" else 0) << at
        at += len(b(n))
    clean = Const(clean_v, len(now))
    saved = [Signal(len(now), name=f"ghost_saved{i}", init=clean_v) for i in range(N)]
    for i in range(N):
        with m.If(swap & (q == i)):
            m.d.sync += saved[i].eq(now)
        with m.If(in_reset | (qclr[i] & (q != i))):
            m.d.sync += saved[i].eq(clean)
    h.prove("position_kept", ~h.state("SWAP1") | (now == Mux(q, saved[1], saved[0])))

    # a preempted IB is fetched again from where it stands: the first read of each IB level
    # after the queue is swapped in starts at that level's base + 4 * position
    flushed = Cat(*(h.state(s) for s in ("ERR_DRAIN", "RESET", "SWAP", "QRESET"))).any() | b("failed")
    ib_base = [b("ib_base1"), b("ib_base2")]
    # (until a resumed level's first read no packet of it is parsed: the parser is between packets,
    # writing another engine's IH entry or an error's, stopped, or flushing, which ends the wait)
    between = Cat(*(h.state(st) for st in ("RUN", "SWAP1", "RING_DONE", "RPTR_WRITE", "RPTR_WAIT", "RESET",
                                            "ERR_DRAIN", "ERROR", "QRESET", "SWAP"))).any() | \
        (Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any() & (b("ih_ext") | b("ih_err")))
    resumed = []
    for k in range(2):
        f = f"fetch{k + 1}"
        fresh = Signal(name=f"ghost_ib{k + 1}_fresh")
        exp = Signal(48, name=f"ghost_ib{k + 1}_resume_addr")
        take = b("arvalid", f) & b("arready", f)
        with m.If(take | flushed | (level <= k) | (b("load_ib") & (b("load_level") == k + 1))):
            m.d.sync += fresh.eq(0)
        with m.If(h.state("SWAP1") & (level > k)):
            m.d.sync += [fresh.eq(1), exp.eq(ib_base[k] + Cat(Const(0, 2), ib_pos[k]))]
        resumed.append(~(take & fresh) | (b("araddr", f) == exp))
        # (induction: until its first read the resumed level stands where it was swapped in, and
        # its fetcher, once started, has requested nothing yet)
        h.invariant(~fresh | (level <= k) | (exp == (ib_base[k] + Cat(Const(0, 2), ib_pos[k]))[:48]))
        h.invariant(~(fresh & b("active", f)) | ((b("fptr", f) == ib_pos[k]) & (b("base", f) == ib_base[k])))
        h.invariant(~(fresh & (level == k + 1)) | between)
        burst_invariants(h, lambda n, f=f: b(n, f), b("base", f), Const(0xFFFF_FFFF, 32), False, h.data_width,
                         min(8, h.fetch_depth))
        if h.with_invariants:  # (as the ring's, below: a flushed fetcher offers nothing it did not read since)
            h.assume(~(fresh & b("out_valid", f)))
        if k == 0:
            h.cover("ib_resumed", take & fresh & (exp != ib_base[k]))
    # (and the ring's fetcher, restarted by itself after the flush, at the queue's ring position)
    r_fresh = Signal(name="ghost_ring_fresh")
    r_exp = Signal(48, name="ghost_ring_resume_addr")
    q_base = Mux(q, ports[1]["base"], ports[0]["base"])
    q_mask = Mux(q, ports[1]["dwords"], ports[0]["dwords"])[:32] - 1
    with m.If(take0 | flushed):
        m.d.sync += r_fresh.eq(0)
    with m.If(h.state("SWAP1")):
        m.d.sync += [r_fresh.eq(1), r_exp.eq(q_base + Cat(Const(0, 2), ring_pos & q_mask))]
    resumed.append(~(take0 & r_fresh) | (addr0 == r_exp))
    h.invariant(~r_fresh | (r_exp == (q_base + Cat(Const(0, 2), ring_pos & q_mask))[:48]))
    h.invariant(~(r_fresh & b("active", "fetch0")) | (b("fptr", "fetch0") == ring_pos))
    if h.with_invariants:
        h.assume(~(r_fresh & b("out_valid", "fetch0")))
    # (and at the ring level no ring packet is parsed before that read)
    h.invariant(~(r_fresh & (level == 0)) | between)
    h.prove("resume_fetch", Cat(*resumed).all())

    # ---- the induction's invariants: the running queue's as cp_ring's (on the parser's registers),
    # the other queue's on its shadow registers, and the ghosts against both
    swapping = h.state("SWAP") | h.state("SWAP1") | h.state("QRESET")
    outside = ring.parser_invariants(h, b, cp, Mux(q, end_now[1], end_now[0]), b("rptr"), b("wptr"),
                                     away=swapping)
    # the same in an IB (level k): the packet in hand ends at its ghost end, its header's offset is
    # its ghost start; the IB packet of each level above is finished; between packets the level
    # stands at the last one's end, or at its start (a WAIT_REG_MEM rewound when it yielded)
    for k in range(cp.ib_levels):
        lv = level == k + 1
        start_k, end_k = Mux(q, ib_start[1][k], ib_start[0][k]), Mux(q, ib_end[1][k], ib_end[0][k])
        h.invariant(~(lv & ~outside) | (((ib_pos[k] + b("rem"))[:20] == end_k) & (b("hdr_off") == start_k)))
        h.invariant(~(level > k + 1) | in_reset | b("failed") | (ib_pos[k] == end_k))
        h.invariant(~(lv & h.state("RUN")) | (ib_pos[k] == end_k) | (b("reparse") & (ib_pos[k] == start_k)))
    # (in PAYLOAD the checks gathered so far are those of the dwords taken, as packets.checks_at
    # gives them: an IB whose checks pass has a dword's base)
    pregs = [b(f"p{i}") for i in range(max(p_.fixed for p_ in pk.PACKETS))]
    for pkt in pk.PACKETS:
        acc = {"unsup": Const(0), "misal": Const(0), "beyond": Const(0)}
        for k in range(pkt.fixed - 1):
            for name, v in zip(acc, cp_packets.checks_at(pregs[:k + 1], pkt, k, cp.addr_width)):
                acc[name] = acc[name] | ((b("pidx") > k) & v)
        h.invariant(~(h.state("PAYLOAD") & ~b("bad_count") & (b("kind") == pkt.index)) |
                    Cat(*(b(f"acc_{n}") == v for n, v in acc.items())).all())
    # (the WAIT_REG_MEM states are that packet's)
    wrm = [st for st in h.box.states("cp") if st.startswith("WRM_") or st == "EXEC_WAIT_REG_MEM"]
    h.invariant(~Cat(*(h.state(st) for st in wrm)).any() | (b("kind") == pk.WAIT_REG_MEM.index))
    sizes = [b(f"ring_size_q{i}") for i in range(N)]
    for i in range(N):
        r, w, used = rptr_q[i], wptr_q[i], (wptr_q[i] - rptr_q[i])[:32]
        pos, lev = kept["ring_pos"][i], kept["level"][i]
        # each queue's occupancy, and its position inside [rptr, wptr] (cp_ring.occupancy)
        h.invariant((used <= sizes[i]) & ((pos - r)[:32] <= used))
        # the queue not running (and not errored: it stopped where its error came) stands at a
        # packet boundary: at its rptr in the ring, or inside its ring packet (an IB) whose end is
        # its ghost's; the ghost end lies in its window (at the ring level it is its rptr, or the
        # end of a WAIT_REG_MEM it yielded from, rewound to its header). (Not in RESET, which
        # clears every queue.)
        idle = (q != i) & ~in_reset
        e = kept["err"][i]
        h.invariant(~idle | e | (lev != 0) | (pos == r))
        h.invariant(~idle | e | (((lev == 0) | (pos == end_now[i])) & ((end_now[i] - r)[:32] <= used)))
        # (and in each IB it is in, at the end of that level's packet, or at the current level at
        # the start of a WAIT_REG_MEM that yielded)
        for k in range(cp.ib_levels):
            sp = b(f"sh_ib_pos{k + 1}")
            h.invariant(~idle | e | (lev < k + 1) | (sp == ib_end[i][k]) |
                        ((lev == k + 1) & reparse_q[i] & (sp == ib_start[i][k])))
        # its one-hot level is its level, one of the IB stack's
        h.invariant(~idle | ((lev <= cp.ib_levels) &
                             (b("sh_lvl") == (Const(1, 1 + cp.ib_levels) << lev)[:1 + cp.ib_levels])))
        # the ghosts: "errored" is its latch (set a cycle after it latches), its saved registers are
        # its shadows
        h.invariant(~errd[i] | e | qclr[i])  # (cleared the cycle after its reset)
        h.invariant(~idle | qclr[i] | (errd[i] == e))
        # a queue switched out has no error pending without its latch (before the doorbell hold,
        # a doorbell error of the running queue in the cycle RUN picked SWAP was captured as the
        # swap took its registers away, and the queue swapped back in waited in ERR_DRAIN for a
        # latch that never came: docs/formal.md)
        h.invariant(~idle | ~b("sh_err_pending") | e)
        h.invariant(~idle | qclr[i] | (Cat(*(b(f"sh_{n}") for n in KEPT)) == saved[i]))
    # every IB a queue is in has a dword's base (a misaligned one fails its checks before it runs),
    # swapped out or not
    # (a check that fails stops the IB the cycle after it started it: `failed`; a CHAIN's new base,
    # checked, is in the payload until EXEC_INDIRECT_BUFFER loads it)
    for k in range(1, 1 + cp.ib_levels):
        h.invariant((b("failed") | in_reset | (level < k) | (b(f"ib_base{k}")[:2] == 0)) &
                    ((b("sh_level") < k) | (b(f"sh_ib_base{k}")[:2] == 0)))
    chain_base = cp_value([b(f"p{i}") for i in range(pk.INDIRECT_BUFFER.fixed)], pk.INDIRECT_BUFFER, "base", 48)
    h.invariant(~h.state("EXEC_INDIRECT_BUFFER") | b("failed") | (chain_base[:2] == 0))
    # a queue reset in hand is the running queue's, pending until it is done
    h.invariant(~h.state("QRESET") | Mux(q, qr_pend[1], qr_pend[0]))
    # errors (cp_errors' invariants, with the switch): a latched error stops the running queue
    # (draining, reporting, stopped, switched out of ERROR or reset), and the queue switched in
    # has none: the arbiter picks a queue with an error only for its waiting doorbell error
    reporting = Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any() & b("ih_err")
    stopping = h.state("ERR_DRAIN") | reporting | h.state("ERROR")
    h.invariant(~stopping | b("err_any"))
    h.invariant(~err | stopping | in_reset | b("err_pending") | h.state("SWAP") | h.state("QRESET"))
    o_db = Mux(q, b("dbpend_q0"), b("dbpend_q1"))
    # (not in RESET, which clears both queues; the arbiter's registers in SWAP1 are still the
    # queue's swapped out)
    for n in ("other_can", "want_switch"):
        h.invariant(h.state("SWAP1") | in_reset | ~b(n) | ~b("sh_err") | o_db)
    h.invariant(in_reset | ~(b("sh_err") & o_db))
    # (a doorbell error waits only for a queue not running: the one swapped in reports it in SWAP1)
    h.invariant(h.state("SWAP1") | in_reset | ~Mux(q, b("dbpend_q1"), b("dbpend_q0")))
    h.invariant(~h.state("SWAP1") | ~err)

    # the ring's fetcher runs for the queue that runs, loaded with its ring, and its pointer and
    # the burst it works out lie in that queue's [ring position, wptr] (the fetch group's burst
    # invariants, for the running queue's ring)
    def f0(n):
        return b(n, "fetch0")
    fa, fptr, rp_a, wp_a = f0("active"), f0("fptr"), b("rptr"), b("wptr")
    h.invariant(~fa | ((fq == q) & b("ring_running")))
    burst_invariants(h, f0, Mux(q, ports[1]["base"], ports[0]["base"]), b("ring_mask"), True, h.data_width,
                     min(8, h.fetch_depth))
    h.invariant(~fa | (((ring_pos - rp_a)[:32] <= (fptr - rp_a)[:32]) &
                       ((fptr - rp_a)[:32] <= (wp_a - rp_a)[:32])))
    h.invariant(~f0("n_ok") | ((fptr - rp_a)[:32] + f0("n_next") <= (was(wp_a) - rp_a)[:32]))
    # (assumed, as cp_ring assumes that the dword on offer is below wptr: the fetcher offers only
    # dwords it requested since it was started, in order, so the ring's dword on offer lies below
    # its pointer; what it held or had in flight when flushed it drops. Its beat accounting against
    # the shared memory is not tied here: the fetch group proves its reads, its delivery is tested)
    if h.with_invariants:  # (not in a mutant's BMC, which starts from reset)
        h.assume(~f0("out_valid") | (fa & ((ring_pos - rp_a)[:32] < (fptr - rp_a)[:32])))

    # covers
    h.cover("switch_to_q1", h.started & swap & (q == 0))
    h.cover("switch_to_q0", h.started & swap & (q == 1))
    h.cover("reset_while_other_runs", Cat(*(qdone[i] & (q != i) for i in range(N))).any() &
            (Mux(q, wptr_q[1], wptr_q[0]) != Mux(q, rptr_q[1], rptr_q[0])) & ~err)
    h.cover("other_runs_after_error", run_pop & ~err & Mux(q, errd[0], errd[1]))
