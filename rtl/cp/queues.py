"""The CP's two hardware queues (docs/hardware.md, "CP hardware queues"): the queue-select
stage ahead of the parser.

One parser, one set of fetchers and one block writer serve both queues. What belongs to a
queue is in two kinds of registers:

- fixed per queue (`rptr_q`, `wptr_q`, `limit_q`, the ring's size and mask, a parked poll,
  a pending doorbell error, a pending queue reset): whatever the parser is doing, a
  doorbell checks and moves its own queue's pointers, and STATUS reads them directly;
- swapped (`SWAPPED`: the parser's position in the ring and its IBs, the level, the VMID,
  the error latch): the parser works on the active queue's registers as it always did, and
  `shadow` holds the other queue's. At a packet boundary the arbiter (RUN) exchanges the
  two sets in one cycle (SWAP), the fetchers are flushed and, the next cycle (SWAP1),
  restarted where the new queue stands (the ring at its position, each IB level it is in at
  its base and position), so a preempted IB resumes where it stopped.

Arbitration (`want_switch`, a register: the parser's paths start from flip-flops): the
other queue can run (work pending, no error, not polling, or a doorbell error to report)
and the active one cannot, or has a lower CP_QUEUE_PRIORITY, or the same one and has run a
packet since the last switch (turns; `turn_due` ends a turn the cycle after its header, for
a one-cycle filler in an IB). A higher-priority queue back from a parked poll also
waits until the active one has run a packet since the switch (progress for the queue a
poll yielded to). The switch waits for the DMA engine to answer every transfer (so a
transfer's error is always the active queue's).

A WAIT_REG_MEM whose poll fails while the other queue can run yields: its queue is rewound
to the packet's header and parked for POLL_INTERVAL cycles; swapped back in, it parses the
packet again (not counted twice: `reparse`) and polls again.

A doorbell error of the inactive queue is kept (`dbpend_q`) and makes that queue runnable at
once: swapped in, the error goes through the CP's usual doorbell-error path (errors.py), so
it is latched in that queue's registers and its IH entry carries its RING_ID.

CP_QUEUE_RESET.Qn: the inactive queue's registers are cleared in a cycle; the active
queue's reset stops the parser at once (but not inside an IH entry, which finishes),
aborts the DMA engine's transfers, drains the bus (QRESET), then clears that queue alone.

`c` is the CP's context (rtl/cp/processor.py): its signals and helpers by name."""

from amaranth.hdl import Array, Const, Mux, Signal, Value

from ..csr import CpError

N = 2

# the parser's registers that belong to the queue it runs (swapped at a switch)
SWAPPED = ("ring_pos", "level", "lvl", "vmid", "ib_base", "ib_size", "ib_pos", "saved_opcode", "saved_off",
           "err", "err_pending", "err_code", "err_level", "err_opcode", "err_addr", "err_offset", "err_vmid", "err_user",
           "err_access")


class Ports:
    """One queue's configuration ports of the CSR block."""

    def __init__(self, csr, i):
        pre = "rb_" if i == 0 else "cp_hqd1_rb_"
        self.base_lo = getattr(csr, pre + "base_lo")
        self.base_hi = getattr(csr, pre + "base_hi")
        self.size = getattr(csr, pre + "size")
        self.enable = getattr(csr, pre + "cntl_enable")
        self.rptr_wb = getattr(csr, pre + "cntl_rptr_wb")
        self.rptr_addr_lo = getattr(csr, pre + "rptr_addr_lo")
        self.rptr_addr_hi = getattr(csr, pre + "rptr_addr_hi")
        self.doorbell = getattr(csr, pre + "doorbell")
        self.swmod = getattr(csr, pre + "doorbell_swmod")
        self.prio = getattr(csr, f"cp_queue_priority_q{i}")
        self.reset = getattr(csr, f"cp_queue_reset_q{i}")


class Active:
    """The active queue's configuration (a multiplexer by `q`)."""

    def __init__(self, m, ports, q):
        for name in ("base_lo", "base_hi", "size", "enable", "rptr_wb", "rptr_addr_lo", "rptr_addr_hi", "swmod"):
            a, b = getattr(ports[0], name), getattr(ports[1], name)
            s = Signal(len(a), name=f"q_{name}")
            m.d.comb += s.eq(Mux(q, b, a))
            setattr(self, name, s)


def pointers(m, csr, q):
    """The fixed per-queue registers, and the active queue's view of them. Returns a dict."""
    ports = [Ports(csr, i) for i in range(N)]
    d = {"ports": ports, "qc": Active(m, ports, q)}
    for name, width in (("rptr", 32), ("wptr", 32), ("limit", 32), ("ring_size", 33), ("ring_mask", 32)):
        regs = [Signal(width, name=f"{name}_q{i}") for i in range(N)]
        act = Signal(width, name=name)
        m.d.comb += act.eq(Mux(q, regs[1], regs[0]))
        d[name + "_q"], d[name] = regs, act
    # the ring fetcher's `end`: wptr_q[q] in a register of its own (active_wptr, below)
    d["ring_end"] = Signal(32, name="ring_end")
    d["ring_huge_q"] = [Signal(name=f"ring_huge_q{i}") for i in range(N)]
    # `limit_q` follows `rptr_q` + the ring's size every cycle; a reset (rptr to 0: `lim_zero`)
    # and RING_DONE (rptr to the ring position: `lim_pos`, with `lim_pos_sum`) name its next
    # value instead. Both sums are worked out whatever happens and the choice comes after
    # them: written as assignments in each state, synthesis folded the choice into the
    # adder's operand, which put QRESET's bus-quiet condition in front of a 32-bit carry
    # chain (issue 14: `top_32`'s seed-2 path, `cp.dma_busy_r` -> `cp.limit_q1`, 12.79 ns)
    d["lim_zero"] = [Signal(name=f"lim_zero{i}") for i in range(N)]
    d["lim_pos"] = [Signal(name=f"lim_pos{i}") for i in range(N)]
    d["lim_pos_sum"] = Signal(32, name="lim_pos_sum", attrs={"keep": 1})
    for i, pt in enumerate(ports):
        # AMD's units: RB_SIZE counts qwords (log2). (A cycle late, like the ring's mask
        # before: the ring starts at least two cycles after that write.)
        m.d.sync += [d["ring_mask_q"][i].eq((Const(1, 34) << (pt.size + 1)) - 1),
                     d["ring_size_q"][i].eq(Const(1, 34) << (pt.size + 1)),
                     d["ring_huge_q"][i].eq(pt.size == 31)]
        follow = Signal(32, name=f"lim_follow{i}", attrs={"keep": 1})
        m.d.comb += follow.eq(d["rptr_q"][i] + d["ring_size_q"][i])
        m.d.sync += d["limit_q"][i].eq(Mux(d["lim_pos"][i], d["lim_pos_sum"],
                                           Mux(d["lim_zero"][i], d["ring_size_q"][i], follow)))
    return d


def active_wptr(c):
    """`ring_end`, the ring fetcher's `end`, is the active queue's wptr in a register kept
    equal to `wptr_q[q]` every cycle (not the multiplexer by `q` that `wptr` is): the
    fetcher's burst sizing starts its carry chains from it. `q` drives some 400 loads
    across the CP, and `q` → the multiplexer → `end − fptr` → the burst's fit →
    `fetch0.go_next` was `cp_32`'s critical path (10.88 ns, 2.24 of it the route out of
    `q`). It takes what `wptr_q` and `q` take, from the same conditions (flags raised beside
    their writes): a doorbell that moves the active queue's wptr (`db_move`), SWAP (the
    other queue's, or the doorbell moving it now), the active queue's reset or SOFT_RESET
    (0: `ring_clear`; every wptr is 0 then, and `q`). (`wptr` itself as such a register,
    for the ring's `avail`, the arbiter and STATUS too, cost about 400 LUT4 in `cp_32`.)"""
    m, q, wp = c.m, c.q, c.wptr_q
    dbv = [pt.doorbell for pt in c.ports]
    nxt = [Mux(c.db_move[i], dbv[i], wp[i]) for i in range(N)]  # each queue's wptr, next cycle
    with m.If(c.ring_clear):
        m.d.sync += c.ring_end.eq(0)
    with m.Elif(c.swap_now):
        m.d.sync += c.ring_end.eq(Mux(q, nxt[0], nxt[1]))
    with m.Elif(Mux(q, c.db_move[1], c.db_move[0])):
        m.d.sync += c.ring_end.eq(Mux(q, dbv[1], dbv[0]))


def flags(m):
    """The per-queue flags (fixed per queue). Returns a dict of lists."""
    d = {}
    for name, width in (("park", 1), ("park_timer", 16), ("reparse", 1), ("dbpend", 1), ("dbpend_back", 1),
                        ("dbpend_val", 32), ("qr_pend", 1)):
        d[name + "_q"] = [Signal(width, name=f"{name}_q{i}") for i in range(N)]
    return d


def _flat(c, name):
    """The signals of a swapped register (an Array's elements, index 0 of the IB arrays unused)."""
    v = getattr(c, name)
    if name in ("ib_base", "ib_size", "ib_pos"):
        return [v[i] for i in range(1, 1 + c.cp.ib_levels)]
    if name in ("saved_opcode", "saved_off"):
        return [v[i] for i in range(c.cp.ib_levels)]
    return [v]


def shadows(c):
    """The other queue's copy of each swapped register; `lvl` starts one-hot at the ring."""
    sh = {}
    for name in SWAPPED:
        sh[name] = [Signal(len(Value.cast(s)), name=f"sh_{Value.cast(s).name}", init=1 if name == "lvl" else 0)
                    for s in _flat(c, name)]
    return sh


def clear_shadow(c):
    m = c.m
    for name, sigs in c.sh.items():
        m.d.sync += [s.eq(1 if name == "lvl" else 0) for s in sigs]


def doorbells(c):
    """Each queue's doorbell (docs/hardware.md, "Ring and doorbell"): BACKWARDS is v − wptr <
    0; OVERFLOW is v − rptr > the ring's size, worked out as v − limit − 1 ≥ 0 with limit =
    rptr + size kept in a register: each is the sign of one carry chain. An error of the
    active queue goes to the error latch now (`db_err`); the inactive queue's waits in
    `dbpend_q` until that queue is swapped in (SWAP1)."""
    m = c.m
    for i, pt in enumerate(c.ports):
        dbv, wp, lim = pt.doorbell, c.wptr_q[i], c.limit_q[i]
        is_active = Signal(name=f"db_active{i}")
        m.d.comb += is_active.eq((c.q == i) & ~c.swapping)
        q_err = Signal(name=f"db_q_err{i}")
        m.d.comb += q_err.eq(Mux(c.q == i, c.err_any, c.sh["err"][0]) | c.dbpend_q[i] | c.qr_pend_q[i])
        ahead, ahead_m1, over_m1 = (Signal(32, name=f"db_{n}{i}") for n in ("ahead", "ahead_m1", "over_m1"))
        m.d.comb += [ahead.eq(dbv - wp), ahead_m1.eq(dbv + ~wp), over_m1.eq(dbv + ~lim)]
        back = ahead[31]
        over = ~ahead_m1[31] & ~c.ring_huge_q[i] & ~over_m1[31]
        code = Mux(back, CpError.DOORBELL_BACKWARDS, CpError.DOORBELL_OVERFLOW)
        # The active queue's value is loaded on every write, not only on an error: `db_value`
        # is read only the cycle after `db_err` (errors.py), so its 32 enables do not wait for
        # the carry chains (issue 14g: `cp_32`'s critical path was `wptr` -> `back` ->
        # `db_value`). The same for the inactive queue's pending error: its value and whether
        # it went backwards are loaded by every write while no error waits (`dbpend_q`), and
        # read only once one does, so only `dbpend_q` itself waits for the chains
        # (`dbpend_val_q1` and `dbpend_code_q1` were 32 + 1 of `cp_32`'s 41 endpoints short of
        # 100 MHz, 10.17 ns, behind the chains, `q_err` and `is_active`).
        with m.If(pt.swmod & ~c.dbpend_q[i]):
            m.d.sync += [c.dbpend_val_q[i].eq(dbv), c.dbpend_back_q[i].eq(back)]
        with m.If(pt.swmod & is_active):
            m.d.sync += c.db_value.eq(dbv)
            # A bad doorbell of the running queue in the cycle RUN picked SWAP was captured as
            # the swap took away the registers its latch writes: the error was lost, and the
            # queue, swapped back in with `err_pending` and nothing latched, held the whole CP
            # in ERR_DRAIN (found by cp_queues' induction, docs/formal.md). A doorbell write of
            # the running queue (a pulse from the CSR: no carry chain on this path) holds the
            # switch for that cycle, so its error latches first and stops the queue as usual.
            m.d.comb += c.db_write_active.eq(1)
        with m.If(pt.swmod & pt.enable & ~c.stopped & ~q_err):
            with m.If(back | over):
                with m.If(~is_active):
                    m.d.sync += c.dbpend_q[i].eq(1)
            with m.Else():
                m.d.sync += wp.eq(dbv)
                m.d.comb += c.db_move[i].eq(1)  # (active_wptr follows)
        # The active queue's error, without `err_any` in `q_err`: every reader of `db_err`
        # (errors.latch: `err_pending`, the capture) ignores it while an error is latched or
        # captured. `fsm_err_valid` -> `err_any` -> this queue's `q_err` -> `db_err` ->
        # `err_pending` was `top_32`'s critical path on seeds 2 and 3 (13.95, 13.65 ns).
        with m.If(pt.swmod & pt.enable & ~c.stopped & is_active & ~c.dbpend_q[i] & ~c.qr_pend_q[i] & (back | over)):
            m.d.comb += [c.db_err.eq(1), c.db_code.eq(code)]


def arbiter(c):
    """`want_switch` and `other_can` (registers): whether RUN should switch queues, and
    whether the inactive queue can run (a polling WAIT_REG_MEM yields to it)."""
    m, q, sh = c.m, c.q, c.sh
    other = ~q
    sel = lambda regs: Mux(q, regs[0], regs[1])  # noqa: E731 (the inactive queue's)
    o_enable = Mux(q, c.ports[0].enable, c.ports[1].enable)
    o_park, o_timer, o_db, o_qr = (sel(getattr(c, n + "_q")) for n in ("park", "park_timer", "dbpend", "qr_pend"))
    o_work = (sh["level"][0] != 0) | (o_enable & (sh["ring_pos"][0] != sel(c.wptr_q)))
    o_can = Signal(name="other_can_now")
    m.d.comb += o_can.eq(~o_qr & (o_db | (~sh["err"][0] & o_work & (~o_park | (o_timer == 0)))))
    # (`ring_end`: wptr_q[q] in a register, not the multiplexer by `q`)
    s_can = ~c.err_any & ((c.level != 0) | (c.qc.enable & (c.ring_pos != c.ring_end)))

    def prio(p):
        return Mux(p == 3, 2, p)
    p_self = prio(Mux(q, c.ports[1].prio, c.ports[0].prio))
    p_other = prio(Mux(q, c.ports[0].prio, c.ports[1].prio))
    # A parked poll takes the CP back only once this queue has taken a packet since the
    # switch: else a short POLL_INTERVAL runs out during the refetch every switch needs and
    # the polling queue starves the other (a polling queue never blocks the other).
    # At equal priority the turn ends with the packet whose header was taken, however short:
    # `want_switch`, a register, sees a one-cycle packet (a filler in an IB) only after the
    # next header is taken, so the turn is also ended from flip-flops at once (`turn_due`).
    # (`other_can` and the equal priorities in one register: `turn_due` is then one term
    # short on the parser's take decision, a LUT and a route less on `cp_32`'s seed 2 path,
    # `took` -> `prio_eq` -> the pop -> `fetch0.buffered`, 12.22 ns)
    m.d.sync += c.prio_eq.eq(o_can & (p_other == p_self))
    m.d.comb += c.turn_due.eq(c.took & c.prio_eq)
    ws = ~s_can | o_db | ((p_other > p_self) & (~o_park | c.took)) | ((p_other == p_self) & c.took)
    m.d.sync += [c.other_can.eq(o_can), c.want_switch.eq(o_can & ws)]
    # `want_switch | turn_due` as a register of its own (next cycle's `want_switch`, `took`
    # and `prio_eq`): the parser's take decision reads one flip-flop, not three
    m.d.sync += c.sw_due.eq(o_can & (ws | (c.took_next & (p_other == p_self))))
    del other

    # a parked queue's poll interval runs out while the other queue runs
    for i in range(N):
        with m.If(c.park_q[i] & (c.park_timer_q[i] != 0)):
            m.d.sync += c.park_timer_q[i].eq(c.park_timer_q[i] - 1)


def swap(c):
    """SWAP: exchange the swapped registers with the shadow, flip `q`."""
    m = c.m
    for name in SWAPPED:
        for a, s in zip(_flat(c, name), c.sh[name]):
            m.d.sync += [a.eq(s), s.eq(a)]
    m.d.sync += [c.q.eq(~c.q), c.q_ring.eq(~c.q_ring)]
    m.d.comb += c.took_next.eq(0)
    m.d.comb += c.swap_now.eq(1)  # (active_wptr follows)


def resume(c):
    """SWAP1: the new queue's doorbell error, if one waits. (A parked poll shows WAITING
    until its packet, parsed again, polls: pm4/wait_reg_mem.py clears `park_q`.) The error
    stops the queue where it is, its parked poll abandoned: `park_q` goes with it, or the
    stopped queue read WAITING 1 beside ERROR until its reset (driver-writer-5), and
    `reparse_q` too (only a reset restarts the queue, and it clears both anyway)."""
    m, q = c.m, c.q
    with m.If(Array(c.dbpend_q)[q]):
        m.d.comb += [c.db_err.eq(1), c.db_code.eq(Mux(Array(c.dbpend_back_q)[q], CpError.DOORBELL_BACKWARDS,
                                                      CpError.DOORBELL_OVERFLOW))]
        m.d.sync += [c.db_value.eq(Array(c.dbpend_val_q)[q]), Array(c.dbpend_q)[q].eq(0),
                     Array(c.park_q)[q].eq(0), Array(c.reparse_q)[q].eq(0)]


def clear_queue_flags(c, i):
    # (not `park_timer_q`: it is read only while `park_q` is set, and WRM_SLEEP loads it as it
    # sets `park_q`. Clearing it here put the resets' bus-quiet conditions on the timer's 16
    # enables: the top's critical path, issue 14g)
    m = c.m
    m.d.sync += [c.park_q[i].eq(0), c.reparse_q[i].eq(0), c.dbpend_q[i].eq(0), c.qr_pend_q[i].eq(0)]


def queue_resets(c):
    """CP_QUEUE_RESET: a request waits in `qr_pend_q`; the inactive queue's is done here at
    once (its registers are the shadow and its own), the active queue's in QRESET."""
    m = c.m
    for i, pt in enumerate(c.ports):
        with m.If(c.qr_pend_q[i] & (c.q != i) & ~c.swapping & ~c.stopped):
            clear_shadow(c)
            clear_queue_flags(c, i)
            m.d.sync += [c.rptr_q[i].eq(0), c.wptr_q[i].eq(0)]
            m.d.comb += c.lim_zero[i].eq(1)
        with m.If(pt.reset & ~c.stopped):
            m.d.sync += c.qr_pend_q[i].eq(1)
