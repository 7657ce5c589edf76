"""cp_reset: SOFT_RESET and the block writer in cycles, with a memory that answers within
`latency` cycles (a potential argument: see build())."""

from amaranth.hdl import Cat, Const, Mux, Signal

from rtl.cp import ih as cp_ih

from ... import properties


def build(h, m, b, csr, cp):
    """SOFT_RESET in cycles: with a memory that takes every request and gives every
    response within `latency` cycles, RESET ends within a bound worked out from what can be
    outstanding when the pulse comes (one block write, one poll behind the queued reads).
    Proved by k-induction with a potential: the cycles since the pulse plus an upper bound
    of the cycles the outstanding work still needs never exceed the bound, and the work's
    bound drops by at least one every cycle (each pending handshake either waits, which
    the memory's wait counter counts, or happens)."""
    L = h.latency
    assert L, "cp_reset needs a memory latency"
    bus = cp.bus
    mem = h.mem
    t = mem.waits
    soft = csr.control_soft_reset
    in_reset = h.state("RESET")
    B = h.data_width // 8
    nbeats = 32 // B
    fb = min(8, h.fetch_depth)  # the fetchers' longest burst (fetch.burst_legal)
    D = mem.D

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
    start = h.writer_start()
    w_len = Signal(8, name="ghost_w_len")
    w_age = Signal(range(p_w_max + 2), name="ghost_w_age")
    cur_len = Mux(start, bus.awlen, w_len)
    cur_age = Mux(start, 0, w_age)
    m.d.sync += [w_len.eq(cur_len), w_age.eq(Mux(cur_age <= p_w_max, cur_age + 1, cur_age))]
    h.prove("writer_bound", ~req | (cur_age < (cur_len + 2) * (L + 1)))

    # ---- the poll's: in the slice's slot, or queued in the memory behind earlier reads
    live, ent_len, ent_poll, in_slot = poll_invariants(h, m, b, cp)
    beats = [Mux(live[k], ent_len[k] + 1, 0) for k in range(D)]
    s_all = sum(beats) - mem.beat
    upto = []
    seen = Const(0)
    for k in range(D):
        upto.append(Mux(seen, 0, beats[k]))
        seen = seen | ent_poll[k]
    s_upto = sum(upto) - mem.beat
    p_p = Signal(W, name="pot_poll")
    m.d.comb += p_p.eq(Mux(~b("poll_pending"), 0,
                           Mux(in_slot, L + 1 - t["ar"] + (s_all + 1) * (L + 1) - t["r"],
                               s_upto * (L + 1) - t["r"])))
    p_p_max = (L + 1) + (D * fb + 1) * (L + 1)
    bound = 1 + max(p_w_max, p_p_max)
    assert bound == properties._reset_bound(h.data_width, L, D, fb), "formal/properties.py says another bound"

    # cycles since the last SOFT_RESET pulse, while RESET lasts
    since = Signal(range(bound + 2), name="reset_cycles")
    with m.If(soft):
        m.d.sync += since.eq(1)
    with m.Elif(in_reset & (since <= bound)):
        m.d.sync += since.eq(since + 1)
    h.prove("reset_bound", ~(in_reset & ~soft) | (since <= bound))
    left = h.past(in_reset) & ~in_reset
    fetchers_stopped = ~Cat(*(b("active", f"fetch{i}") for i in range(1 + cp.ib_levels))).any()
    h.prove("reset_idle", ~(h.started & left) |
               (h.state("RUN") & ~req & ~aw_sent & ~w_sent & ~b("poll_pending") & ~b("poll_req") &
                fetchers_stopped & ~b("ring_running") & (mem.aw_n == 0) & (mem.wl_n == 0)))

    # ---- induction strengthening
    for name, tw in t.items():
        h.invariant(tw <= L)
    pot = Mux(p_w > p_p, p_w, p_p)
    h.invariant(~(in_reset & ~soft & h.started) | ((since >= 1) & (since + pot <= bound)))
    h.invariant((p_w <= p_w_max) & (p_p <= p_p_max))
    h.invariant(~req | (cur_age + p_w <= (cur_len + 2) * (L + 1) + 1))
    # (until the write is sent: a *_WAIT state then loads the next write's mask)
    h.invariant(~req | b("sent", "writer") | (cur_len == last - b("first", "writer")))
    # the writer's beat lies in the burst until its last is sent
    h.invariant(~req | w_sent | ((cur >= b("first", "writer")) & (cur <= last)))
    h.invariant(~b("resetting") | in_reset)

    h.cover("reset_waits_for_write", in_reset & ~soft & req & (since >= 2))
    h.cover("reset_waits_for_poll", in_reset & ~soft & b("poll_pending"))



def poll_invariants(h, m, b, cp):
    """The WAIT_REG_MEM poll against the memory's read queue, for any CP group whose induction
    needs the poll tied to its state (cp_reset's potential, cp_errors' "reads nothing after
    the drain"): one poll at a time, in the AR slice's slot or queued in memory, asked for
    only in WRM_READ. Returns (live, ent_len, ent_poll, in_slot): per queued read (oldest
    first) whether it is there, its AXI length, whether it is the poll; the poll in the slot."""
    from rtl.cp.bus_port import ID_POLL
    mem = h.mem
    D = mem.D
    in_reset = h.state("RESET")
    fb = min(8, h.fetch_depth)  # the fetchers' longest burst (fetch.burst_legal)
    # the fetchers' bursts are at most their longest (proved by fetch.burst_legal)
    for i in range(1 + cp.ib_levels):
        h.assume(~b("arvalid", f"fetch{i}") | (b("arlen", f"fetch{i}") < fb))
    live = [Signal(name=f"mem_live{k}") for k in range(D)]
    ent_len = [Signal(8, name=f"mem_len_at{k}") for k in range(D)]
    ent_poll = [Signal(name=f"mem_poll_at{k}") for k in range(D)]
    for k in range(D):
        idx = (mem.rp + k)[:mem.qb]
        m.d.comb += [live[k].eq(k < mem.count), ent_len[k].eq(mem.q_len[idx]),
                     ent_poll[k].eq(live[k] & (mem.q_id[idx] == ID_POLL))]
    in_slot = b("ar_valid") & (b("ar_id") == ID_POLL)
    # one poll at a time: pending while in the slot or queued (exactly one of them), and
    # not asked for again meanwhile; queued bursts as long as their clients' longest
    n_polls = sum(ent_poll) + in_slot
    h.invariant(n_polls == b("poll_pending"))
    h.invariant(~b("poll_pending") | ~b("poll_req"))
    # (a poll is in flight only while WAIT_REG_MEM waits for it, or the CP drains or resets)
    h.invariant(~b("poll_pending") | h.state("WRM_RESP") | h.state("ERR_DRAIN") | in_reset)
    h.invariant(~b("poll_req") | (h.state("WRM_READ") & ~b("oob")))
    # (another engine's IH entry taken while WAIT_REG_MEM sleeps returns to WRM_SLEEP)
    in_ih = Cat(*(h.state(st) for st in h.box.states("cp") if st.startswith("IH_"))).any()
    ext_in_wrm = in_ih & b("ih_ext") & (b("ih_ret") == cp_ih.RET_WRM)
    h.invariant(~(h.state("WRM_RESP") | h.state("WRM_SLEEP") | ext_in_wrm) | ~b("oob"))
    for k in range(D):
        h.invariant(~live[k] | (ent_len[k] < fb) & (~ent_poll[k] | (ent_len[k] == 0)))
    h.invariant(~b("ar_valid") | (b("ar_len") < fb) & ((b("ar_id") != ID_POLL) | (b("ar_len") == 0)))
    h.invariant(Mux(mem.count == 0, mem.beat == 0, mem.beat <= ent_len[0]))
    h.invariant(mem.count <= D)
    return live, ent_len, ent_poll, in_slot
