"""DMAEngine in Amaranth's simulator against a small Python AXI slave (no HDL simulator
needed): copies at several alignments, fills, zero length, and a read and a write
error, with random stalls on every channel. The thorough tests (every alignment, 64 KiB
transfers, back-pressure, both simulators, the protocol checker) are in
tests/rtl/test_dma_rtl.py; this one gives quick feedback when rtl/dma/ changes.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from rtl.dma import DMAEngine

MEM = 1 << 14


class Slave:
    """In-order AXI4 memory: reads and writes independent, random READY/VALID stalls.

    Beats whose bus word is in `bad` answer `bad_resp` (reads return 0, writes are dropped)."""

    def __init__(self, mem: bytearray, nb: int, rng: random.Random, stall: float):
        self.mem, self.nb, self.rng, self.stall = mem, nb, rng, stall
        self.bad: set[int] = set()
        self.bad_resp = 2
        self.reads: deque = deque()   # [addr, beats left]
        self.r_cur = None             # (data, resp, last)
        self.aws: deque = deque()     # [addr, beats left, worst resp]
        self.bs: deque = deque()
        self.b_cur = None

    def go(self) -> bool:
        return self.rng.random() >= self.stall


def run_commands(dut: DMAEngine, cmds, slave: Slave, max_cycles: int = 20000):
    """Push `cmds` ((src, dst, n, fill)), serve the bus; returns [(resp, err_addr)] per command."""
    results = []
    pending = deque(cmds)
    nb = slave.nb
    bus = dut.bus

    async def bench(ctx):
        for cycle in range(max_cycles):
            if pending:
                src, dst, n, fill = pending[0]
                ctx.set(dut.cmd_valid, 1)
                ctx.set(dut.cmd_src, src)
                ctx.set(dut.cmd_dst, dst)
                ctx.set(dut.cmd_bytes, n)
                ctx.set(dut.cmd_fill, fill)
            else:
                ctx.set(dut.cmd_valid, 0)
            ctx.set(bus.arready, int(slave.go()))
            ctx.set(bus.awready, int(slave.go()))
            ctx.set(bus.wready, int(slave.go() and bool(slave.aws)))
            if slave.r_cur is None and slave.reads and slave.go():
                rd = slave.reads[0]
                word = rd[0]
                resp = slave.bad_resp if word in slave.bad else 0
                data = 0 if resp else int.from_bytes(slave.mem[word:word + nb], "little")
                rd[0] += nb
                rd[1] -= 1
                slave.r_cur = (data, resp, int(rd[1] == 0))
                if rd[1] == 0:
                    slave.reads.popleft()
            ctx.set(bus.rvalid, int(slave.r_cur is not None))
            if slave.r_cur is not None:
                ctx.set(bus.rdata, slave.r_cur[0])
                ctx.set(bus.rresp, slave.r_cur[1])
                ctx.set(bus.rlast, slave.r_cur[2])
            if slave.b_cur is None and slave.bs and slave.go():
                slave.b_cur = slave.bs.popleft()
            ctx.set(bus.bvalid, int(slave.b_cur is not None))
            if slave.b_cur is not None:
                ctx.set(bus.bresp, slave.b_cur)

            g = {s: ctx.get(getattr(bus, s)) for s in
                 ("arvalid", "araddr", "arlen", "awvalid", "awaddr", "awlen", "wvalid", "wdata", "wstrb",
                  "wlast", "rready", "bready", "arsize", "awsize")}
            if pending and ctx.get(dut.cmd_ready):
                pending.popleft()
            if ctx.get(dut.done):
                results.append((ctx.get(dut.resp), ctx.get(dut.err_addr)))
            if g["arvalid"] and ctx.get(bus.arready):
                assert g["araddr"] % nb == 0 and g["arsize"] == (nb - 1).bit_length()
                assert g["araddr"] // 4096 == (g["araddr"] + (g["arlen"] + 1) * nb - 1) // 4096, "AR crosses 4 KiB"
                slave.reads.append([g["araddr"], g["arlen"] + 1])
            if g["awvalid"] and ctx.get(bus.awready):
                assert g["awaddr"] // 4096 == (g["awaddr"] + (g["awlen"] + 1) * nb - 1) // 4096, "AW crosses 4 KiB"
                slave.aws.append([g["awaddr"], g["awlen"] + 1, 0])
            if g["wvalid"] and ctx.get(bus.wready):
                aw = slave.aws[0]
                if aw[0] in slave.bad:
                    aw[2] = max(aw[2], slave.bad_resp)
                else:
                    for k in range(nb):
                        if g["wstrb"] >> k & 1:
                            slave.mem[aw[0] + k] = g["wdata"] >> (8 * k) & 0xFF
                aw[0] += nb
                aw[1] -= 1
                assert g["wlast"] == int(aw[1] == 0), "WLAST not on the burst's last beat"
                if aw[1] == 0:
                    slave.bs.append(aw[2])
                    slave.aws.popleft()
            if slave.r_cur is not None and g["rready"]:
                slave.r_cur = None
            if slave.b_cur is not None and g["bready"]:
                slave.b_cur = None
            if not pending and len(results) == len(cmds):
                await ctx.tick()
                assert ctx.get(dut.idle), "not idle after the last completion"
                return
            await ctx.tick()
        raise AssertionError(f"{len(results)} of {len(cmds)} commands done in {max_cycles} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return results


def expect(mem: bytearray, cmds) -> bytearray:
    out = bytearray(mem)
    for src, dst, n, fill in cmds:
        if fill:
            pat = src.to_bytes(4, "little")
            out[dst:dst + n] = bytes(pat[a % 4] for a in range(dst, dst + n))
        else:
            out[dst:dst + n] = out[src:src + n]
    return out


@pytest.mark.parametrize("width", [32, 64, 128])
def test_copies_and_fills(width):
    rng = random.Random(width)
    nb = width // 8
    mem = bytearray(rng.getrandbits(8) for _ in range(MEM))
    cmds = [(0x100 + s, 0x2000 + 0x200 * k + d, n, 0)
            for k, (s, d, n) in enumerate([(0, 0, 16), (3, 5, 40), (5, 3, 40), (1, 0, 1), (0, nb - 1, nb + 2),
                                           (nb - 1, 1, 3 * nb), (2, 2, 0), (7, 1, 100)])]
    cmds += [(0x12345678, 0x3000 + 3, 27, 1), (0xA5A5A5A5, 0x3100, 0, 1),
             (0x80 + 1, 0x1000 - 7, 60, 0)]  # the last one crosses 4 KiB on the write side
    want = expect(mem, cmds)
    dut = DMAEngine(width, max_burst_beats=4, fifo_depth=16)
    results = run_commands(dut, cmds, Slave(mem, nb, rng, 0.3))
    assert results == [(0, 0)] * len(cmds)
    diff = [i for i in range(MEM) if mem[i] != want[i]]
    assert not diff, f"{len(diff)} bytes differ, first at {diff[0]:#x}"


def test_errors_report():
    rng = random.Random(3)
    nb = 8
    mem = bytearray(rng.getrandbits(8) for _ in range(MEM))
    slave = Slave(mem, nb, rng, 0.2)
    dut = DMAEngine(64, max_burst_beats=4, fifo_depth=16)
    slave.bad = {0x240}
    cmds = [(0x200 + 3, 0x2000, 200, 0),      # reads 0x240: SLVERR there
            (0x300, 0x2400, 50, 0),           # queued behind it: cancelled, same report
            (0x12345678, 0x240 - 12, 40, 1)]  # (cancelled as well)
    results = run_commands(dut, cmds, slave)
    assert results == [(2, 0x240)] * 3
    slave.bad, slave.bad_resp = {0x2820}, 3
    cmds = [(0x400, 0x2800 + 1, 100, 0), (0x400, 0x3000, 16, 0)]
    results = run_commands(DMAEngine(64, max_burst_beats=4, fifo_depth=16), cmds, slave)
    # the write burst holding beat 0x2820 starts at the 32-byte boundary 0x2820 (4 beats of 8)
    assert results == [(3, 0x2820), (3, 0x2820)]


def test_parameter_checks():
    with pytest.raises(ValueError, match="data width must be 32, 64, 128 or 256, not 48"):
        DMAEngine(48)
    with pytest.raises(ValueError, match="fifo_depth must be a power of two of at least 2 \\* max_burst_beats "
                                         "\\+ 2 = 34, not 32"):
        DMAEngine(64, fifo_depth=32)
    with pytest.raises(ValueError, match="max_burst_beats must be a power of two"):
        DMAEngine(64, max_burst_beats=12)
    with pytest.raises(ValueError, match="read_id 16 does not fit in 4 ID bits"):
        DMAEngine(64, read_id=16)
