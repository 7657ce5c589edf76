"""The packet counters' bank (rtl/perf.py CounterBank) in Amaranth's simulator, against what
eight 32-bit registers would read: each cycle, the entry at `rd_idx` (the MMIO read) is the
register's value, with an `inc` counted from the next cycle on and an `inc` in the cycle of
`clear` dropped. The bank's increment takes two cycles, so the stimulus has runs of the same
entry counting in consecutive cycles, `rd_idx` on the entry just counted, and `clear` next
to increments."""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from rtl.perf import CounterBank


def run_bank(seed: int, cycles: int, width: int = 32) -> list[str]:
    """Random `inc`/`idx`/`clear`/`rd_idx` for `cycles` cycles; the mismatches, one line each."""
    bank = CounterBank(8, width)
    rng = random.Random(seed)
    errors: list[str] = []
    mask = (1 << width) - 1

    async def bench(ctx):
        regs = [0] * 8
        last = 0
        for cycle in range(cycles):
            # runs of one entry, bursts of increments, and reads of what was just counted
            inc = rng.random() < 0.8
            idx = last if rng.random() < 0.6 else rng.randrange(8)
            clear = rng.random() < 0.03
            rd_idx = last if rng.random() < 0.5 else rng.randrange(8)
            for sig, v in ((bank.inc, inc), (bank.idx, idx), (bank.clear, clear), (bank.rd_idx, rd_idx)):
                ctx.set(sig, int(v))
            got = ctx.get(bank.rd_data)
            if got != regs[rd_idx]:
                errors.append(f"seed {seed} cycle {cycle}: entry {rd_idx} reads {got:#x}, "
                              f"a register would read {regs[rd_idx]:#x}")
                if len(errors) > 5:
                    return
            await ctx.tick()
            if clear:
                regs = [0] * 8
            elif inc:
                regs[idx] = (regs[idx] + 1) & mask
            last = idx


    sim = Simulator(bank)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return errors


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_counter_bank_reads_as_registers(seed):
    errors = run_bank(seed, 3000)
    assert not errors, "\n".join(errors)


def test_counter_bank_wraps_at_its_width():
    # a 4-bit bank wraps after 16 counts, as a 4-bit register does (the carry's top bit)
    errors = run_bank(5, 3000, width=4)
    assert not errors, "\n".join(errors)
