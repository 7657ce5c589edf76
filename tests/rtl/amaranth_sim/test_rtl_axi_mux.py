"""AXI4Mux in Amaranth's simulator: three masters with several IDs each against a slave
that interleaves R beats across IDs and answers B out of order across IDs.

Every cycle the test drives both sides, lets the logic settle, checks the downstream
port's handshake rules (VALID and payload held until READY), then follows every
handshake: R/B must reach the master named by the ID's top bits with its own ID, W beats
must reach the slave in AW order, and each downstream AR/AW must be exactly the one a
master handed over in the same cycle, with the master's index in the top ID bits.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from rtl.axi_mux import AXI4Mux

AR = ("arid", "araddr", "arlen", "arsize", "arburst")
AW = ("awid", "awaddr", "awlen", "awsize", "awburst")
W = ("wdata", "wstrb", "wlast")


def wbeat(master: int, addr: int, beat: int) -> int:
    return (master << 56) | (addr << 8) | beat


def rbeat(addr: int, beat: int) -> int:
    return (addr << 8) | beat ^ 0x5A


class Master:
    """A well-behaved master: queued reads and writes, random READYs on R and B."""

    def __init__(self, index: int, rng: random.Random, n_ops: int, id_bits: int):
        self.i = index
        self.rng = rng
        self.reads = deque()
        self.writes = deque()
        for k in range(n_ops):
            addr = (index << 24) | (k << 12)
            self.reads.append((rng.randrange(1 << id_bits), addr, rng.randrange(4)))
            self.writes.append((rng.randrange(1 << id_bits), addr | 0x800, rng.randrange(4)))
        self.wq = deque()           # (addr, len) of writes whose AW was offered: W follows in order
        self.w_beat = 0
        self.r_pending: dict[int, deque] = {}   # id -> deque[(addr, len, beats seen)]
        self.b_pending: dict[int, deque] = {}
        self.aw_offered = False
        self.done_reads = 0
        self.done_writes = 0


def offer(ctx, port, ch, request):
    """Drive an address channel ("ar" or "aw") of `port`: request (id, addr, len) in 64-bit
    INCR beats, or None for no VALID."""
    ctx.set(getattr(port, f"{ch}valid"), int(request is not None))
    if request is not None:
        id_, addr, ln = request
        for name, v in (("id", id_), ("addr", addr), ("len", ln), ("size", 3), ("burst", 1)):
            ctx.set(getattr(port, ch + name), v)

def run_mux(n: int, seed: int, n_ops: int = 25, stall: float = 0.35, max_cycles: int = 6000) -> None:
    mux = AXI4Mux(n, addr_width=48, data_width=64, id_width=4, w_order_depth=4)
    low = mux.master_id_bits
    rng = random.Random(seed)
    masters = [Master(i, random.Random(seed * 100 + i), n_ops, low) for i in range(n)]
    out = mux.m
    errors: list[str] = []

    async def bench(ctx):
        # slave state
        reads: dict[int, deque] = {}          # downstream id -> deque[[addr, len, beat]]
        aw_order: deque = deque()             # (id, addr, len) in AW order
        w_seen = 0
        b_ready_q: list[tuple[int, int]] = []  # (id, addr) writes complete, awaiting B (per-ID order)
        r_cur = None                          # (id, addr, beat, last) being presented
        b_cur = None
        hold = {}                              # channel -> payload offered last cycle without READY
        for cycle in range(max_cycles):
            # ---- masters drive
            for mst in masters:
                p = mux.s[mst.i]
                offer(ctx, p, "ar", mst.reads[0] if mst.reads else None)
                offer(ctx, p, "aw", mst.writes[0] if mst.writes else None)
                if mst.writes:
                    _, addr, ln = mst.writes[0]
                    if not mst.aw_offered:
                        mst.aw_offered = True
                        mst.wq.append((addr, ln))  # W may go as soon as AW is offered
                else:
                    ctx.set(p.awvalid, 0)
                if mst.wq:
                    addr, ln = mst.wq[0]
                    ctx.set(p.wvalid, 1)
                    ctx.set(p.wdata, wbeat(mst.i, addr, mst.w_beat))
                    ctx.set(p.wstrb, 0xFF)
                    ctx.set(p.wlast, int(mst.w_beat == ln))
                else:
                    ctx.set(p.wvalid, 0)
                ctx.set(p.rready, int(mst.rng.random() > stall))
                ctx.set(p.bready, int(mst.rng.random() > stall))
            # ---- slave drives
            ctx.set(out.arready, int(rng.random() > stall))
            ctx.set(out.awready, int(rng.random() > stall))
            # A single-master mux is a wire, and W may lead AW (AXI allows it): this slave,
            # like axi_mem, then takes W only once its AW is in. With n > 1 the mux itself
            # must hold W back until the AW has gone out, so that is checked below.
            ctx.set(out.wready, int(rng.random() > stall and (n > 1 or bool(aw_order))))
            if r_cur is None and reads and rng.random() > stall:
                rid = rng.choice(sorted(reads))   # interleave across IDs
                rd = reads[rid][0]
                r_cur = (rid, rd[0], rd[2], rd[2] == rd[1])
            if r_cur is not None:
                rid, addr, beat, last = r_cur
                ctx.set(out.rvalid, 1)
                ctx.set(out.rid, rid)
                ctx.set(out.rdata, rbeat(addr, beat))
                ctx.set(out.rresp, 0)
                ctx.set(out.rlast, int(last))
            else:
                ctx.set(out.rvalid, 0)
            if b_cur is None and b_ready_q and rng.random() > stall:
                ids = sorted({i for i, _ in b_ready_q})
                bid = rng.choice(ids)               # any ID's oldest write
                b_cur = next(x for x in b_ready_q if x[0] == bid)
            if b_cur is not None:
                ctx.set(out.bvalid, 1)
                ctx.set(out.bid, b_cur[0])
                ctx.set(out.bresp, 0)
            else:
                ctx.set(out.bvalid, 0)

            # ---- settled outputs; downstream handshake rules
            g = {name: ctx.get(getattr(out, name)) for name in
                 AR + AW + W + ("arvalid", "awvalid", "wvalid", "arready", "awready", "wready",
                                "rready", "bready")}
            for ch, fields in (("ar", AR), ("aw", AW), ("w", W)):
                payload = tuple(g[f] for f in fields)
                if ch in hold:
                    if not g[f"{ch}valid"]:
                        errors.append(f"cycle {cycle}: {ch.upper()}VALID dropped before READY")
                    elif payload != hold[ch]:
                        errors.append(f"cycle {cycle}: {ch.upper()} payload changed while waiting")
                hold.pop(ch, None)
                if g[f"{ch}valid"] and not g[f"{ch}ready"]:
                    hold[ch] = payload
            mg = [{name: ctx.get(getattr(mux.s[i], name)) for name in
                   ("arready", "awready", "wready", "rvalid", "rid", "rdata", "rlast", "bvalid", "bid")}
                  for i in range(n)]

            # ---- AR
            took = [i for i in range(n) if masters[i].reads and mg[i]["arready"]]
            if g["arvalid"] and g["arready"]:
                if len(took) != 1:
                    errors.append(f"cycle {cycle}: AR taken downstream, masters handing over: {took}")
                else:
                    mst = masters[took[0]]
                    rid, addr, ln = mst.reads.popleft()
                    if (g["arid"], g["araddr"], g["arlen"]) != ((mst.i << low) | rid, addr, ln):
                        errors.append(f"cycle {cycle}: AR of master {mst.i} arrived as "
                                      f"id {g['arid']} addr {g['araddr']:#x} len {g['arlen']}")
                    reads.setdefault(g["arid"], deque()).append([addr, ln, 0])
                    mst.r_pending.setdefault(rid, deque()).append([addr, ln, 0])
            elif took:
                errors.append(f"cycle {cycle}: master(s) {took} saw ARREADY without a downstream AR")
            # ---- AW
            took = [i for i in range(n) if masters[i].writes and mg[i]["awready"]]
            if g["awvalid"] and g["awready"]:
                if len(took) != 1:
                    errors.append(f"cycle {cycle}: AW taken downstream, masters handing over: {took}")
                else:
                    mst = masters[took[0]]
                    wid, addr, ln = mst.writes.popleft()
                    mst.aw_offered = False
                    if (g["awid"], g["awaddr"], g["awlen"]) != ((mst.i << low) | wid, addr, ln):
                        errors.append(f"cycle {cycle}: AW of master {mst.i} arrived wrong")
                    aw_order.append((g["awid"], addr, ln, mst.i))
                    mst.b_pending.setdefault(wid, deque()).append(addr)
            elif took:
                errors.append(f"cycle {cycle}: master(s) {took} saw AWREADY without a downstream AW")
            # ---- W (AW order)
            took = [i for i in range(n) if masters[i].wq and mg[i]["wready"]]
            if g["wvalid"] and g["wready"]:
                if not aw_order:
                    errors.append(f"cycle {cycle}: W beat before any AW")
                else:
                    awid, addr, ln, who = aw_order[0]
                    if took != [who] or g["wdata"] != wbeat(who, addr, w_seen) or g["wlast"] != int(w_seen == ln):
                        errors.append(f"cycle {cycle}: W beat {w_seen} of master {who}'s burst at {addr:#x} "
                                      f"came as {g['wdata']:#x} last={g['wlast']} (masters taking: {took})")
                    mst = masters[who]
                    if took == [who]:
                        mst.w_beat += 1
                        if mst.w_beat > ln:
                            mst.w_beat = 0
                            mst.wq.popleft()
                    if w_seen == ln:
                        aw_order.popleft()
                        b_ready_q.append((awid, addr))
                        w_seen = 0
                    else:
                        w_seen += 1
            elif took:
                errors.append(f"cycle {cycle}: master(s) {took} saw WREADY without a downstream W")
            # ---- R (by ID)
            if r_cur is not None and g["rready"]:
                rid, addr, beat, last = r_cur
                owner, mid = rid >> low, rid & ((1 << low) - 1)
                got = [i for i in range(n) if mg[i]["rvalid"]]
                mst = masters[owner]
                if got != [owner] or mg[owner]["rid"] != mid or mg[owner]["rdata"] != rbeat(addr, beat):
                    errors.append(f"cycle {cycle}: R beat for id {rid} reached masters {got}")
                else:
                    exp = mst.r_pending[mid][0]
                    if (exp[0], exp[2]) != (addr, beat) or mg[owner]["rlast"] != int(last):
                        errors.append(f"cycle {cycle}: master {owner} got R {addr:#x}/{beat}, expected "
                                      f"{exp[0]:#x}/{exp[2]}")
                    exp[2] += 1
                    if last:
                        mst.r_pending[mid].popleft()
                        mst.done_reads += 1
                rd = reads[rid][0]
                rd[2] += 1
                if last:
                    reads[rid].popleft()
                    if not reads[rid]:
                        del reads[rid]
                r_cur = None
            # ---- B (by ID)
            if b_cur is not None and g["bready"]:
                bid, addr = b_cur
                owner, mid = bid >> low, bid & ((1 << low) - 1)
                got = [i for i in range(n) if mg[i]["bvalid"]]
                if got != [owner] or mg[owner]["bid"] != mid:
                    errors.append(f"cycle {cycle}: B for id {bid} reached masters {got}")
                else:
                    mst = masters[owner]
                    if mst.b_pending[mid].popleft() != addr:
                        errors.append(f"cycle {cycle}: master {owner} got B out of order for ID {mid}")
                    mst.done_writes += 1
                b_ready_q.remove(b_cur)
                b_cur = None
            if errors:
                return
            if all(m.done_reads == n_ops and m.done_writes == n_ops for m in masters):
                return
            if n > 1:
                await ctx.tick()
            else:
                await ctx.delay(1e-8)  # a single-master mux is only wires: no clock domain
        errors.append(f"not finished in {max_cycles} cycles: " +
                      ", ".join(f"master {m.i}: {m.done_reads} reads, {m.done_writes} writes" for m in masters))

    sim = Simulator(mux)
    if n > 1:
        sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not errors, "\n".join(errors[:10])


@pytest.mark.parametrize("n,seed", [(2, 1), (3, 2), (4, 3)])
def test_mux_routes_and_orders(n, seed):
    run_mux(n, seed)


def test_mux_no_stalls():
    run_mux(2, 9, stall=0.0)


def test_mux_single_master_is_a_wire():
    run_mux(1, 4, n_ops=10)


def test_mux_id_convention():
    from amaranth.hdl import Fragment

    mux = AXI4Mux(2, id_width=4)
    Fragment.get(mux, None)  # (elaborated, so Amaranth does not warn it went unused)
    assert (mux.sel_bits, mux.master_id_bits) == (1, 3)
    assert mux.downstream_id(0, 3) == 3 and mux.downstream_id(1, 0) == 8
    with pytest.raises(ValueError, match="does not fit in 3 bits"):
        mux.downstream_id(1, 8)
    with pytest.raises(ValueError, match="leaves no ID bits"):
        AXI4Mux(4, id_width=2)
    with pytest.raises(ValueError, match="power of two"):
        AXI4Mux(2, w_order_depth=3)
