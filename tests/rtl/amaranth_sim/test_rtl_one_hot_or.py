"""rtl/bus.py one_hot_or (the CSR read multiplexer) in Amaranth's simulator, against
`table[index]` and against mux_tree, which it replaced: tables with holes, entries of
different widths, and the same Value at several indices (aligned runs, as the register
arrays are, and scattered ones), every index read with random values on the entries."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rtl.bus import mux_tree, one_hot_or


def _table(rng: random.Random, n: int) -> tuple[list, list[Signal]]:
    sigs = [Signal(rng.choice((1, 5, 16, 32)), name=f"e{i}") for i in range(n // 2)]
    table: list = [None] * n
    for i in range(n):
        if rng.random() < 0.6:
            table[i] = rng.choice(sigs)
    # an aligned run of one Value (a register array) and a misaligned one
    run = rng.choice(sigs)
    table[n // 2:n // 2 + n // 4] = [run] * (n // 4)
    table[3:6] = [sigs[0]] * 3
    return table, sigs


@pytest.mark.parametrize("seed", range(4))
def test_one_hot_or_reads_the_entry_at_the_index(seed):
    rng = random.Random(seed)
    n = 32
    table, sigs = _table(rng, n)
    index = Signal(5)
    m = Module()
    got, ref = Signal(32), Signal(32)
    m.d.comb += [got.eq(one_hot_or(index, table)), ref.eq(mux_tree(index, table))]
    sim = Simulator(m)
    errors: list[str] = []

    async def bench(ctx):
        for _ in range(8):
            values = [rng.getrandbits(len(s)) for s in sigs]
            for s, v in zip(sigs, values):
                ctx.set(s, v)
            for i in range(n):
                ctx.set(index, i)
                want = 0 if table[i] is None else values[next(k for k, s in enumerate(sigs) if s is table[i])]
                g, r = ctx.get(got), ctx.get(ref)
                if g != want or r != want:
                    errors.append(f"seed {seed} index {i}: one_hot_or {g:#x}, mux_tree {r:#x}, entry {want:#x}")

    sim.add_testbench(bench)
    sim.run()
    assert not errors, "\n".join(errors[:5])


def test_one_hot_or_index_too_narrow():
    with pytest.raises(ValueError, match=r"^one_hot_or: 64 entries for a 5-bit index \(a power of two, at most 2\*\*bits\)$"):
        one_hot_or(Signal(5), [None] * 64)


def test_one_hot_or_all_holes_read_zero():
    assert one_hot_or(Signal(3), [None] * 8).value == 0
