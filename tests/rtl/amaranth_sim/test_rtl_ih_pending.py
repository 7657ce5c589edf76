"""INT_STATUS.IH_PENDING, and with only INT_ENABLE.IH_PENDING set the irq line, follows an
IH_RPTR write in the cycle the write is answered (docs/hardware.md, "Interrupts and the IH
ring"), in Amaranth's simulator on the whole front end with an AXI4-Lite master at the
bridge's full rate.

IH_PENDING is IH_WPTR != IH_RPTR. With no entry written IH_WPTR stays 0, so writing IH_RPTR
alone moves the line: a value other than 0 raises it, 0 drops it. A line that dropped a
cycle after the B response (IH_PENDING registered from the IH_RPTR register, as it was) made
the KMD's interrupt wait call its handler once more after every interrupt, find nothing and
count a spurious interrupt (tests/kmd_sched/test_kmd_ih.py on the RTL)."""

from __future__ import annotations

from amaranth.sim import Simulator

from kmd_model import regs
from rtl.top import GpuTop


async def _write(ctx, bus, addr: int, data: int, strb: int = 0xF) -> None:
    """One write; returns in the cycle its B response is valid (and taken: BREADY is high)."""
    ctx.set(bus.awvalid, 1)
    ctx.set(bus.awaddr, addr)
    ctx.set(bus.wvalid, 1)
    ctx.set(bus.wdata, data)
    ctx.set(bus.wstrb, strb)
    ctx.set(bus.bready, 1)
    while not (ctx.get(bus.awready) and ctx.get(bus.wready)):
        await ctx.tick()
    await ctx.tick()
    ctx.set(bus.awvalid, 0)
    ctx.set(bus.wvalid, 0)
    while not ctx.get(bus.bvalid):
        await ctx.tick()
    assert ctx.get(bus.bresp) == 0, f"write of {addr:#x} answered {ctx.get(bus.bresp)}"


def test_irq_follows_an_ih_rptr_write_with_its_b_response():
    """The line is low in the cycle the B response of the write that empties the ring is
    valid (and stays low), high in that of the one that makes it non-empty; only the bytes
    the write's strobes select count: a write whose strobed bytes leave IH_RPTR where it was
    does not move the line even for a cycle."""
    dut = GpuTop(data_width=32)
    R = regs.IH_RPTR.addr()
    seen = []  # (what, irq in the B cycle, irq the cycle after)

    async def bench(ctx):
        bus = dut.s_axil
        await _write(ctx, bus, regs.INT_ENABLE.addr(), regs.INT_ENABLE.IH_PENDING.put(1))
        assert not ctx.get(dut.irq)

        async def step(what, data, strb=0xF):
            await _write(ctx, bus, R, data, strb)
            at_b = ctx.get(dut.irq)
            await ctx.tick()
            seen.append((what, at_b, ctx.get(dut.irq)))

        await step("bytes other than byte 0 strobed off", 0x12345600, strb=0x1)  # IH_RPTR stays 0
        await step("byte 1 written with its old value", 0x20, strb=0x2)  # still 0
        await step("byte 0 written: IH_RPTR = 0x20", 0x20, strb=0x1)
        await step("IH_RPTR = 0: the ring is empty", 0)
        await step("IH_RPTR = 0x120", 0x120)
        await step("byte 0 written 0: IH_RPTR = 0x100", 0x0, strb=0x1)
        await step("byte 3 written 0x80: IH_RPTR = 0x80000100", 0x80000000, strb=0x8)
        await step("IH_RPTR = 0 again", 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    want = [("bytes other than byte 0 strobed off", 0, 0), ("byte 1 written with its old value", 0, 0),
            ("byte 0 written: IH_RPTR = 0x20", 1, 1), ("IH_RPTR = 0: the ring is empty", 0, 0),
            ("IH_RPTR = 0x120", 1, 1), ("byte 0 written 0: IH_RPTR = 0x100", 1, 1),
            ("byte 3 written 0x80: IH_RPTR = 0x80000100", 1, 1), ("IH_RPTR = 0 again", 0, 0)]
    assert seen == want
