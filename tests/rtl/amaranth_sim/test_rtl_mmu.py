"""The MMU (rtl/mmu.py) in Amaranth's simulator, against spec/vm.py's walk.

A Python AXI slave serves a small physical memory (page tables included) with random
stalls and an error window; a master side issues reads and writes of several VMIDs,
access kinds and IDs. Every request is checked against `spec.vm.walk` of the same
memory: a translated request reaches the slave at the physical address (reads return
its bytes, writes land there), a failing one is answered by the MMU with SLVERR and the
fault's cause and level in RUSER/BUSER (and its W beats never reach memory), and
responses keep AXI's per-ID order. Also: TLB hits and misses, huge pages, invalidation,
a VMID with translation off, and the constructor's errors.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.hdl import Array, Const, Fragment, Module
from amaranth.sim import Simulator

from rtl.mmu import MMU
from spec import vm

A = vm.Access
MEM = 1 << 20  # physical memory of the test
ROOT = {1: 0x1000, 2: 0x8000, 5: 0x20000}  # root directories by VMID
ERR = (0xF0000, 0xF1000)  # slave answers SLVERR here


class Tables:
    """Page tables of `levels` levels in `mem`, built with spec/vm.py's entry helpers."""

    def __init__(self, mem: bytearray, levels: int = vm.LEVELS):
        self.mem = mem
        self.levels = levels
        self.next_table = 0x40000

    def r64(self, a: int) -> int:
        return int.from_bytes(self.mem[a:a + 8], "little")

    def w64(self, a: int, v: int) -> None:
        self.mem[a:a + 8] = v.to_bytes(8, "little")

    def map(self, vmid: int, va: int, pa: int, flags: int, huge: bool = False, huge_level: int = 0) -> None:
        """A PTE for `va`'s page, making the directories on the way; with `huge`, a PDE_PTE
        leaf at directory level `huge_level` instead."""
        table = ROOT[vmid]
        for level in range(self.levels):
            ea = table + 8 * vm.index(va, level, self.levels)
            if level == self.levels - 1 or (huge and level == huge_level):
                self.w64(ea, vm.pte(pa, flags) | (vm.PDE_PTE if huge else 0))
                return
            e = self.r64(ea)
            if not e & vm.VALID or e & vm.PDE_PTE:
                t = self.next_table
                self.next_table += vm.TABLE_BYTES
                self.w64(ea, vm.pde(t))
                e = self.r64(ea)
            table = e & vm.ADDR_MASK

    def walk(self, vmid: int, va: int, access: int, enabled: bool) -> vm.Walk:
        if not enabled:
            return vm.Walk(va, 0, None, 0)
        return vm.walk(self.r64, ROOT[vmid], va, access, self.levels,
                       read_ok=lambda a: not ERR[0] <= a < ERR[1] and a + 8 <= MEM)


def pattern(pa: int, beat: int) -> int:
    return ((pa >> 3) * 0x9E3779B1 + beat * 0x85EBCA6B) & ((1 << 64) - 1)


def run(ops, tables: Tables, enabled: set[int], seed: int, stall: float = 0.3, tlb_entries: int = 16,
        between=None, max_cycles: int = 40000, phys_in: bool = False) -> dict:
    """Run `ops` [(kind 'r'|'w', id, va, len, vmid, access)] through an MMU; returns counters.
    `between(ctx, dut)`: an async callback run once all ops of a phase are answered, returning
    the next list of ops (or None to stop). `phys_in`: the MMU as the top builds it, told by
    its master whether the VMID on offer goes untranslated (`s_arphys`, `s_awphys`)."""
    dut = MMU(data_width=64, tlb_entries=tlb_entries, phys_in=phys_in, levels=tables.levels)
    rng = random.Random(seed)
    mem = tables.mem
    errors: list[str] = []
    stats = {"hits": 0, "misses": 0, "walk_cycles": 0, "cycles": 0}

    async def bench(ctx):
        ctx.set(dut.ctx_enable, sum(1 << i for i in enabled))
        phase = list(ops)
        s, m = dut.s, dut.m
        while phase is not None:
            reads = deque(op for op in phase if op[0] == "r")
            writes = deque(op for op in phase if op[0] == "w")
            expect_r: dict[int, deque] = {}  # id -> deque[(op, walk, beats left)]
            expect_b: dict[int, deque] = {}
            w_order: deque = deque()  # (op, beat) writes whose AW was handed over: W in that order
            w_beat = 0
            # slave state
            s_reads: deque = deque()  # [id, pa, len, beat, due]
            s_aw: deque = deque()  # [id, pa, len, beat]
            s_b: deque = deque()  # (id, resp)
            outstanding = len(phase)
            ar_on = aw_on = w_on = False
            for cycle in range(max_cycles):
                stats["cycles"] += 1
                # ---- master side
                ar = reads[0] if reads else None
                aw = writes[0] if writes else None
                ar_on = ar is not None and (ar_on or rng.random() > stall)  # VALID stays until READY
                aw_on = aw is not None and (aw_on or rng.random() > stall)
                for ch, req, on in (("ar", ar, ar_on), ("aw", aw, aw_on)):
                    ctx.set(getattr(s, f"{ch}valid"), int(on))
                    if req:
                        _, id_, va, ln, vmid, acc = req
                        for k, v in (("id", id_), ("addr", va), ("len", ln), ("size", 3), ("burst", 1),
                                     ("user", vmid | acc << 4)):
                            ctx.set(getattr(s, ch + k), v)
                        if phys_in:
                            ctx.set(getattr(dut, f"s_{ch}phys"), int(vmid not in enabled))
                if w_order:
                    op = w_order[0]
                    w_on = w_on or rng.random() > stall
                    ctx.set(s.wvalid, int(w_on))
                    ctx.set(s.wdata, pattern(op[2] | 0x5000_0000, w_beat))
                    ctx.set(s.wstrb, 0xFF)
                    ctx.set(s.wlast, int(w_beat == op[3]))
                else:
                    ctx.set(s.wvalid, 0)
                ctx.set(s.rready, int(rng.random() > stall))
                ctx.set(s.bready, int(rng.random() > stall))
                # ---- slave side
                ctx.set(m.arready, int(rng.random() > stall))
                ctx.set(m.awready, int(rng.random() > stall))
                ctx.set(m.wready, int(bool(s_aw) and rng.random() > stall))
                rcur = s_reads[0] if s_reads and s_reads[0][4] <= cycle and rng.random() > stall else None
                ctx.set(m.rvalid, int(rcur is not None))
                if rcur:
                    rid, pa, ln, beat, _ = rcur
                    a = pa + 8 * beat
                    ctx.set(m.rid, rid)
                    ctx.set(m.rdata, int.from_bytes(mem[a:a + 8], "little") if a + 8 <= MEM else 0)
                    ctx.set(m.rresp, 2 if ERR[0] <= a < ERR[1] or a + 8 > MEM else 0)
                    ctx.set(m.rlast, int(beat == ln))
                bcur = s_b[0] if s_b and rng.random() > stall else None
                ctx.set(m.bvalid, int(bcur is not None))
                if bcur:
                    ctx.set(m.bid, bcur[0])
                    ctx.set(m.bresp, bcur[1])

                g = lambda sig: ctx.get(sig)  # noqa: E731
                # ---- handshakes (settled)
                if g(s.arvalid) and g(s.arready):
                    ar_on = False
                    op = reads.popleft()
                    walk = tables.walk(op[4], op[2], op[5], op[4] in enabled)
                    expect_r.setdefault(op[1], deque()).append([op, walk, 0])
                if g(s.awvalid) and g(s.awready):
                    aw_on = False
                    op = writes.popleft()
                    walk = tables.walk(op[4], op[2], op[5], op[4] in enabled)
                    expect_b.setdefault(op[1], deque()).append((op, walk))
                    w_order.append(op)
                if g(s.wvalid) and g(s.wready):
                    w_on = False
                    w_beat += 1
                    if w_beat > w_order[0][3]:
                        w_beat = 0
                        w_order.popleft()
                if g(m.arvalid) and g(m.arready):
                    s_reads.append([g(m.arid), g(m.araddr), g(m.arlen), 0, cycle + rng.randrange(2, 8)])
                if g(m.awvalid) and g(m.awready):
                    s_aw.append([g(m.awid), g(m.awaddr), g(m.awlen), 0])
                if g(m.wvalid) and g(m.wready):
                    wid, pa, ln, beat = s_aw[0]
                    a = pa + 8 * beat
                    err = ERR[0] <= a < ERR[1] or a + 8 > MEM
                    if not err:
                        mem[a:a + 8] = g(m.wdata).to_bytes(8, "little")
                    s_aw[0][3] += 1
                    if beat == ln:
                        s_aw.popleft()
                        s_b.append((wid, 2 if err else 0))
                if g(m.rvalid) and g(m.rready):
                    s_reads[0][3] += 1
                    if s_reads[0][3] > s_reads[0][2]:
                        s_reads.popleft()
                if g(m.bvalid) and g(m.bready):
                    s_b.popleft()
                if g(s.rvalid) and g(s.rready):
                    rid = g(s.rid)
                    q = expect_r.get(rid)
                    if not q:
                        errors.append(f"cycle {cycle}: R beat for ID {rid} with no read outstanding")
                    else:
                        op, walk, beat = q[0]
                        user, resp, data = g(s.ruser), g(s.rresp), g(s.rdata)
                        if walk.phys is None:
                            want = (2, 1 | int(walk.cause) << 1 | walk.level << 3)
                            if (resp, user) != want:
                                errors.append(f"{op}: beat {beat} answered resp {resp} user {user:#x}, "
                                              f"want a fault {walk.cause.name} at level {walk.level} {want}")
                        else:
                            a = walk.phys + 8 * beat
                            want = int.from_bytes(mem[a:a + 8], "little")
                            if ERR[0] <= a < ERR[1]:
                                if (resp, user) != (2, 0):
                                    errors.append(f"{op}: beat {beat} at {a:#x} resp {resp} user {user:#x}, "
                                                  "want the slave's SLVERR")
                            elif (resp, user, data) != (0, 0, want):
                                errors.append(f"{op}: beat {beat} read {data:#x} resp {resp} user {user:#x}, "
                                              f"want {want:#x} from {a:#x}")
                        if g(s.rlast) != int(beat == op[3]):
                            errors.append(f"{op}: RLAST {g(s.rlast)} on beat {beat}")
                        q[0][2] += 1
                        if beat == op[3]:
                            q.popleft()
                            outstanding -= 1
                if g(s.bvalid) and g(s.bready):
                    bid = g(s.bid)
                    q = expect_b.get(bid)
                    if not q:
                        errors.append(f"cycle {cycle}: B for ID {bid} with no write outstanding")
                    else:
                        op, walk = q.popleft()
                        outstanding -= 1
                        resp, user = g(s.bresp), g(s.buser)
                        bus_err = walk.phys is not None and ERR[0] <= walk.phys < ERR[1]
                        want = ((2 if bus_err else 0, 0) if walk.phys is not None
                                else (2, 1 | int(walk.cause) << 1 | walk.level << 3))
                        if (resp, user) != want:
                            errors.append(f"{op}: B resp {resp} user {user:#x}, want {want}")
                        if walk.phys is not None and not bus_err:
                            for beat in range(op[3] + 1):
                                a = walk.phys + 8 * beat
                                got = int.from_bytes(mem[a:a + 8], "little")
                                if got != pattern(op[2] | 0x5000_0000, beat):
                                    errors.append(f"{op}: beat {beat} not at {a:#x}")
                stats["hits"] += g(dut.perf_hit)
                stats["misses"] += g(dut.perf_miss)
                stats["walk_cycles"] += g(dut.perf_walk)
                await ctx.tick()
                if not outstanding:
                    for sig in (s.arvalid, s.awvalid, s.wvalid, m.rvalid, m.bvalid):
                        ctx.set(sig, 0)  # quiet between phases
                    break
            else:
                errors.append(f"phase did not finish: {outstanding} requests unanswered")
                break
            phase = await between(ctx, dut) if between else None

    # the page-table bases as the CSR block gives them: the entry of the VMID the MMU names
    top = Module()
    top.submodules.mmu = dut
    top.d.comb += dut.ctx_base.eq(Array(Const(ROOT.get(i, 0) >> 12, len(dut.ctx_base))
                                        for i in range(vm.VMIDS))[dut.ctx_vmid])
    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert not errors, "\n".join(errors[:12])
    return stats


def _tables(seed: int) -> tuple[Tables, list]:
    rng = random.Random(seed)
    mem = bytearray(rng.randbytes(MEM))
    for a in range(0, MEM, 0x1000):  # no stray VALID entries: tables are built below
        if a in ROOT.values() or 0x40000 <= a < 0x60000:
            mem[a:a + 0x1000] = bytes(0x1000)
    t = Tables(mem)
    flags = [vm.READABLE, vm.WRITEABLE, vm.EXECUTABLE, vm.READABLE | vm.WRITEABLE,
             vm.READABLE | vm.WRITEABLE | vm.EXECUTABLE]
    pages = []
    for vmid in (1, 2, 5):
        for k in range(12):
            va = (rng.randrange(1, 1 << 18) << 12)
            pa = rng.randrange(0x60, 0xF8) << 12  # the error window's page included
            t.map(vmid, va, pa, rng.choice(flags))
            pages.append((vmid, va))
    t.map(2, 0x3FE0_0000, 0x0, vm.READABLE | vm.WRITEABLE, huge=True)  # 2 MiB at physical 0
    pages.append((2, 0x3FE0_0000 + 0x61000))
    t.w64(ROOT[5] + 8 * vm.index(0x2000_0000, 0), vm.pde(ERR[0]))  # a table in the error window
    pages.append((5, 0x2000_0000 + 0x3000))
    return t, pages


def _ops(rng: random.Random, pages, n: int) -> list:
    ops = []
    for _ in range(n):
        vmid, va = rng.choice(pages)
        if rng.random() < 0.15:
            va = rng.randrange(1 << 30) & ~0xFFF  # unmapped, mostly
            if rng.random() < 0.3:
                va |= rng.randrange(1, 4) << 30  # beyond the tables (RANGE)
        if rng.random() < 0.1:
            vmid = rng.choice((0, 3))  # translation off: physical
            va = rng.randrange(0x60, 0xF8) << 12
        ln = rng.randrange(4)
        va += 8 * rng.randrange(0, 512 - ln)
        kind = rng.choice("rw")
        acc = rng.choice((A.READ, A.FETCH, A.DMA_READ) if kind == "r" else (A.WRITE, A.DMA_WRITE))
        ids = [i for i in range(16) if i != 7]
        ops.append((kind, rng.choice(ids), va, ln, vmid, int(acc)))
    return ops


@pytest.mark.parametrize("seed", [1, 2])
def test_mmu_translates_and_faults_like_spec_walk(seed):
    t, pages = _tables(seed)
    run(_ops(random.Random(seed), pages, 160), t, enabled={1, 2, 5}, seed=seed)


def _deep_tables(seed: int, levels: int) -> tuple[Tables, list]:
    """Tables of 3 or 4 levels: random pages of three VMIDs, and VMID 2's huge page at every
    directory level (1 GiB, 2 MiB; 512 GiB with four), each at physical 0 with address bits
    below its size set in the entry (the MMU takes them from the virtual address)."""
    rng = random.Random(seed)
    mem = bytearray(rng.randbytes(MEM))
    for a in range(0, MEM, 0x1000):  # roots and up to 3 tables a page: zeroed
        if a in ROOT.values() or 0x40000 <= a < 0xB0000:
            mem[a:a + 0x1000] = bytes(0x1000)
    t = Tables(mem, levels)
    flags = [vm.READABLE, vm.WRITEABLE, vm.EXECUTABLE, vm.READABLE | vm.WRITEABLE,
             vm.READABLE | vm.WRITEABLE | vm.EXECUTABLE]
    bits = vm.va_bits(levels)
    pages = []
    for vmid in (1, 2, 5):
        for _ in range(12):
            va = rng.randrange(1, 1 << (bits - 13)) << 12  # the lower half of the space
            t.map(vmid, va, rng.randrange(0xB0, 0xF8) << 12, rng.choice(flags))  # the error window's page too
            pages.append((vmid, va))
    for level in range(levels - 1):  # the upper half: one huge page per directory level
        span = vm.leaf_bits(level, levels)
        va = (1 << (bits - 1)) + (level + 1 << max(span, bits - 4))
        t.map(2, va, 0x3000, vm.READABLE | vm.WRITEABLE, huge=True, huge_level=level)  # (0x3000: ignored)
        pages += [(2, va + 0xB1000), (2, va + 0xC7000)]
    t.w64(ROOT[5] + 8 * vm.index(1 << (bits - 2), 0, levels), vm.pde(ERR[0]))  # a table in the error window
    pages.append((5, (1 << (bits - 2)) + 0x3000))
    return t, pages


@pytest.mark.parametrize("levels", [3, 4])
def test_mmu_walks_three_and_four_levels_like_spec_walk(levels):
    """The MMU takes 2 to 4 levels (VM_CAPS.LEVELS) but only the default 2 ran: with 3 and 4,
    every request (random pages, unmapped and beyond-the-tables addresses, a huge page at
    each directory level, a table that answers an error) against spec/vm.py's walk."""
    t, pages = _deep_tables(levels, levels)
    rng = random.Random(levels)
    ops = _ops(rng, pages, 160)
    bits = vm.va_bits(levels)
    for k in range(0, len(ops), 7):  # unmapped, and (but with four levels) beyond the tables
        kind, id_, _, ln, vmid, acc = ops[k]
        va = rng.randrange(1 << bits) & ~0xFFF
        if levels < 4 and k % 2:
            va |= rng.randrange(1, 1 << (48 - bits)) << bits
        ops[k] = (kind, id_, va + 8 * rng.randrange(0, 512 - ln), ln, rng.choice((1, 2, 5)), acc)
    st = run(ops, t, enabled={1, 2, 5}, seed=levels)
    assert st["misses"] and st["hits"] and st["walk_cycles"] >= 2 * levels * st["misses"] // 2


def test_mmu_untranslated_bit_from_the_master():
    """The top's MMU takes whether a VMID goes untranslated from its master (worked out before
    the mux's pick): the same translations, faults and counts as when it selects the enable itself."""
    t, pages = _tables(8)
    ops = _ops(random.Random(8), pages, 160)
    want = run(ops, _tables(8)[0], enabled={1, 2, 5}, seed=8)
    got = run(ops, t, enabled={1, 2, 5}, seed=8, phys_in=True)
    assert got == want


def test_mmu_no_stalls_small_tlb():
    t, pages = _tables(3)
    run(_ops(random.Random(3), pages, 120), t, enabled={1, 2, 5}, seed=3, stall=0.0, tlb_entries=2)


def test_tlb_hits_after_one_walk():
    t, _ = _tables(4)
    t.map(1, 0x0070_0000, 0x90000, vm.READABLE | vm.WRITEABLE)
    ops = [("r", 1, 0x0070_0000 + 64 * k, 3, 1, int(A.READ)) for k in range(20)]
    st = run(ops, t, enabled={1}, seed=4, stall=0.0)
    assert (st["misses"], st["hits"]) == (1, 19)
    assert st["walk_cycles"] >= 2 * vm.LEVELS  # an AR and at least one R cycle per level


def test_invalidation_drops_stale_entries():
    """A changed PTE is not seen while the TLB holds the old one; after an invalidation of
    that VMID (one page, then all) it is."""
    t, _ = _tables(5)
    va = 0x0012_3000
    t.map(1, va, 0x91000, vm.READABLE)
    t.map(2, va, 0x92000, vm.READABLE)
    read = [("r", 2, va, 0, 1, int(A.READ)), ("r", 3, va, 0, 2, int(A.READ))]
    steps = []

    async def invalidate(ctx, dut, vmids, all_, page):
        ctx.set(dut.inv_vmids, vmids)
        ctx.set(dut.inv_all, all_)
        ctx.set(dut.inv_page, page)
        ctx.set(dut.inv_req, 1)
        await ctx.tick()
        ctx.set(dut.inv_req, 0)
        assert ctx.get(dut.inv_ack) == 0  # a request clears the acknowledge
        for _ in range(20):
            if ctx.get(dut.inv_ack) == vmids:
                return
            await ctx.tick()
        raise AssertionError(f"no acknowledge for VMIDs {vmids:#x}")

    async def between(ctx, dut):
        steps.append(len(steps))
        if len(steps) == 1:
            # remap VMID 1's page without telling the MMU: it still answers from the TLB
            t.map(1, va, 0x93000, vm.READABLE)
            stale = Tables(bytearray(t.mem))
            stale.map(1, va, 0x91000, vm.READABLE)
            t.walk_override = stale
            return [("r", 2, va, 0, 1, int(A.READ))]
        if len(steps) == 2:  # VMID 1's page goes (VMID 2's entry for the same address stays)
            t.walk_override = None
            await invalidate(ctx, dut, 1 << 1, 0, (va >> 12) + 1)  # another page: nothing goes
            await invalidate(ctx, dut, 1 << 1, 0, va >> 12)
            return read
        if len(steps) == 3:  # every address of every VMID
            await invalidate(ctx, dut, 0xFFFF, 1, 0)
            return read
        return None

    orig = t.walk
    t.walk_override = None

    def walk(vmid, v, access, enabled):
        w = t.walk_override
        return w.walk(vmid, v, access, enabled) if w is not None and vmid == 1 else orig(vmid, v, access, enabled)

    t.walk = walk
    st = run(read, t, enabled={1, 2}, seed=5, stall=0.0, between=between)
    # VMIDs 1 and 2 once; VMID 1 again after its page went (2's entry stayed); both after "all"
    assert (st["misses"], st["hits"]) == (5, 2)


def test_faulting_write_never_reaches_memory():
    t, _ = _tables(6)
    t.map(1, 0x5000, 0x95000, vm.READABLE)  # read-only
    before = bytes(t.mem[0x95000:0x96000])
    ops = [("w", 1, 0x5000, 3, 1, int(A.WRITE)), ("w", 2, 0x5100, 0, 1, int(A.DMA_WRITE)),
           ("r", 1, 0x5000, 0, 1, int(A.FETCH)), ("r", 4, 0x5000, 1, 1, int(A.DMA_READ))]
    run(ops, t, enabled={1}, seed=6)
    assert bytes(t.mem[0x95000:0x96000]) == before


def test_mmu_parameters_refused():
    with pytest.raises(ValueError, match="tlb_entries must be a power of two"):
        MMU(tlb_entries=12)
    with pytest.raises(ValueError, match="levels must be 2, 3 or 4"):
        MMU(levels=5)
    with pytest.raises(ValueError, match="walk_id 16 does not fit"):
        MMU(walk_id=16)
    Fragment.get(MMU(levels=3, data_width=32), None)  # other shapes elaborate


def test_invalidation_written_as_one_completes_replaces_it():
    """VM_INVALIDATE_REQ written in the very cycle the pending request completes replaces it
    (hardware.md: "a request written while one is pending replaces it"). It used to be
    dropped: VM_INVALIDATE_ACK showed the first request's VMIDs and the second request's
    entries stayed (found by formal/blocks/mmu.py's unmap_takes_effect)."""
    t, _ = _tables(7)
    va = 0x0012_3000
    t.map(1, va, 0x91000, vm.READABLE)
    read = [("r", 2, va, 0, 1, int(A.READ))]
    acks = []

    async def between(ctx, dut):
        if acks:
            return None
        # one page of VMID 2 (VMID 1's entry stays) ...
        ctx.set(dut.inv_vmids, 1 << 2)
        ctx.set(dut.inv_all, 0)
        ctx.set(dut.inv_page, 0x777)
        ctx.set(dut.inv_req, 1)
        await ctx.tick()
        # ... and, in the cycle the MMU completes it, every address of VMIDs 1 and 3
        ctx.set(dut.inv_vmids, (1 << 1) | (1 << 3))
        ctx.set(dut.inv_all, 1)
        await ctx.tick()
        ctx.set(dut.inv_req, 0)
        for _ in range(20):
            acks.append(ctx.get(dut.inv_ack))
            if acks[-1] == 0b1010:
                break
            await ctx.tick()
        return read

    st = run(read, t, enabled={1}, seed=7, stall=0.0, between=between)
    assert acks[-1] == 0b1010, [hex(a) for a in acks]
    assert (st["misses"], st["hits"]) == (2, 0)  # VMID 1's entry went: the read walks again
