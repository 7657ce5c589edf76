"""The CSR block's read-back from its shadow RAM (spec/gen/generate.py `shadow_lanes`), in
Amaranth's simulator, against what flip-flop registers would read: an AXI4-Lite master
with random timing writes (random byte strobes) and reads a few registers, and the block
is reset at random. The RAM takes a write a cycle after the register does, and has no
reset, so the cases that matter are a read accepted in the cycle of a write or the cycle
after it, and the first write after a reset with some bytes not strobed."""

from __future__ import annotations

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from kmd_model import regs
from rtl.csr import CSRBlock

# shadowed whole (SCRATCH: no flip-flops at all), shadowed in part of the word (the
# 8- and 16-bit highs), a constant (ID: the RAM's initial contents) and one the read
# multiplexer answers (IH_SIZE, reset 3): their reads must agree whatever the timing.
REGS = [regs.SCRATCH, regs.IH_BASE_HI, regs.RB_RPTR_ADDR_HI, regs.ID, regs.IH_SIZE]


def _mask(reg) -> int:
    return sum(f.mask for f in reg.FIELDS)


def run_master(seed: int, cycles: int) -> list[str]:
    """Random writes, reads and resets for `cycles` cycles; the wrong reads, one line each."""
    rst = Signal()
    dut = CSRBlock()
    m = Module()
    m.submodules.dut = ResetInserter(rst)(dut)
    bus = dut.bus
    rng = random.Random(seed)
    errors: list[str] = []

    async def bench(ctx):
        model = {r.ADDR: r.RESET for r in REGS}
        wr = ar = None  # the requests until their handshakes (a write: address, data, strobes)
        aw_wait = w_wait = False
        pending_write = None  # (addr, data, strb) with AW and W accepted, its B not yet seen
        reads = []  # the model's value at each accepted read, oldest first
        b_was = 0
        for cycle in range(cycles):
            if rng.random() < 0.01:  # a reset: requests and answers in flight are dropped
                ctx.set(rst, 1)
                for s in (bus.awvalid, bus.wvalid, bus.arvalid):
                    ctx.set(s, 0)
                await ctx.tick()
                ctx.set(rst, 0)
                model = {r.ADDR: r.RESET for r in REGS}
                wr = ar = pending_write = None
                reads, b_was = [], 0
                continue
            # a B that rose: the write took effect in the cycle before
            b = ctx.get(bus.bvalid)
            if b and not b_was:
                addr, data, strb = pending_write
                reg = next(r for r in REGS if r.ADDR == addr)
                if reg.FIELDS[0].sw == "rw":
                    bits = sum(0xFF << 8 * i for i in range(4) if strb >> i & 1)
                    model[addr] = (model[addr] & ~bits | data & bits) & _mask(reg)
                pending_write = None
            b_was = b
            # new requests: AW and W of a write, and AR, each held until its handshake
            if wr is None and pending_write is None and rng.random() < 0.4:
                wr = (rng.choice(REGS).ADDR, rng.getrandbits(32), rng.choice([0xF, 0xF, 1, 2, 4, 8, 0x3, 0xC]))
                aw_wait = w_wait = True
            if ar is None and rng.random() < 0.4:
                ar = rng.choice(REGS).ADDR
            ctx.set(bus.awvalid, wr is not None and aw_wait)
            ctx.set(bus.awaddr, wr[0] if wr else 0)
            ctx.set(bus.wvalid, wr is not None and w_wait)
            ctx.set(bus.wdata, wr[1] if wr else 0)
            ctx.set(bus.wstrb, wr[2] if wr else 0)
            ctx.set(bus.arvalid, ar is not None)
            ctx.set(bus.araddr, ar or 0)
            ctx.set(bus.bready, rng.random() < 0.7)
            ctx.set(bus.rready, rng.random() < 0.7)
            if ctx.get(bus.rvalid) and ctx.get(bus.rready):
                got, want = ctx.get(bus.rdata), reads.pop(0)
                if got != want[1]:
                    errors.append(f"seed {seed} cycle {cycle}: {want[0]} read {got:#x}, "
                                  f"a register would read {want[1]:#x}")
            if wr is not None:
                aw_wait = aw_wait and not ctx.get(bus.awready)
                w_wait = w_wait and not ctx.get(bus.wready)
                if not aw_wait and not w_wait:
                    pending_write, wr = wr, None
            if ar is not None and ctx.get(bus.arready):
                name = next(r.NAME for r in REGS if r.ADDR == ar)
                reads.append((name, model[ar]))
                ar = None
            await ctx.tick()
            if len(errors) > 5:
                return

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return errors


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_shadowed_registers_read_as_flip_flops(seed):
    errors = run_master(seed, 4000)
    assert not errors, "\n".join(errors)
