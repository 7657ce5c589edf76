"""cocotb tests of the DMA engine and the AXI4 mux (testbench/sim/hdl/tb_dma.v).

Two engines share the memory model's port through the mux; the protocol checker
watches that port. Commands are driven from Python, but everything per cycle and per
beat (counting completions, latching results, the memory itself) happens in hardware,
so a test wakes Python once per command. Results are checked against numpy on the
shared memory view. Started by tests/rtl/test_dma_rtl.py; each test resets the bench and
brings its own memory file, so any subset runs in one simulator process.

Environment knobs (set by the pytest side): DMA_SCALE (fraction of the default amount
of random work), GPUCOSIM_BENCH_OUT (where test_bench writes its figures as JSON).
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

from testbench.memory import ProtocolChecker, SharedMemory, configure, start_bench_clock

MEM_SIZE = 2 << 20
ENGINE_AREA = 1 << 20           # engine e owns [e·1 MiB, (e+1)·1 MiB)
SRC_AREA = 512 << 10            # first half: source data, never written by copies
MAX_BURST = int(os.environ.get("DMA_MAX_BURST", "16"))  # the engines' max_burst_beats
CMD_DEPTH = int(os.environ.get("DMA_CMD_DEPTH", "4"))   # and cmd_depth
SCALE = float(os.environ.get("DMA_SCALE", "1"))
SIM = os.environ.get("GPUCOSIM_SIM", "verilator")

RESP_OK, RESP_SLVERR, RESP_DECERR = 0, 2, 3


@dataclass
class Cmd:
    src: int
    dst: int
    nbytes: int
    fill: bool = False
    raw: bool = False

    def __str__(self) -> str:
        what = f"fill {self.src:#010x}" if self.fill else f"copy {self.src:#x}"
        return f"{what} -> {self.dst:#x} +{self.nbytes}{' raw' if self.raw else ''}"


def apply(expected: np.ndarray, c: Cmd) -> None:
    """What the command does to memory, in program order."""
    if c.nbytes == 0:
        return
    if c.fill:
        pat = np.frombuffer(c.src.to_bytes(4, "little"), dtype=np.uint8)
        expected[c.dst:c.dst + c.nbytes] = pat[np.arange(c.dst, c.dst + c.nbytes) % 4]
    else:
        expected[c.dst:c.dst + c.nbytes] = expected[c.src:c.src + c.nbytes].copy()


class Engine:
    """One DMA engine's command port and the bench's counters for it."""

    def __init__(self, dut, index: int):
        self.dut = dut
        self.i = index
        self.pushed = 0     # commands handed over that will complete
        self.dropped = 0    # commands handed over and then aborted (no completion)
        for name in ("cmd_valid", "cmd_src", "cmd_dst", "cmd_bytes", "cmd_fill", "cmd_raw_wait", "abort"):
            self.sig(name).value = 0

    def sig(self, name: str):
        return getattr(self.dut, f"d{self.i}_{name}")

    def get(self, name: str) -> int:
        return int(self.sig(name).value)

    async def wait_completed(self, count: int, timeout_cycles: int = 2_000_000) -> None:
        """Until `count` commands have completed (a hung engine fails the test)."""
        async def wait():
            while self.get("completed") < count:
                await self.sig("completed").value_change  # wakes once per completion
        if self.get("completed") < count:
            await with_timeout(wait(), timeout_cycles * 10, "ns")

    async def push(self, c: Cmd) -> int:
        """Offer the command until taken; returns the cycle it was accepted in."""
        await self.wait_completed(self.pushed - CMD_DEPTH + 1)  # room in the engine's queue
        self.sig("cmd_src").value = c.src & ((1 << 48) - 1)
        self.sig("cmd_dst").value = c.dst
        self.sig("cmd_bytes").value = c.nbytes
        self.sig("cmd_fill").value = int(c.fill)
        self.sig("cmd_raw_wait").value = int(c.raw)
        self.sig("cmd_valid").value = 1
        for _ in range(100_000):
            await ReadOnly()
            ready = self.get("cmd_ready")
            cycle = int(self.dut.cycle.value)
            await RisingEdge(self.dut.clk)
            if ready:
                break
        else:
            raise AssertionError(f"engine {self.i}: command not taken in 100000 cycles: {c}")
        self.sig("cmd_valid").value = 0
        self.pushed += 1
        return cycle

    async def drain(self, timeout_cycles: int = 2_000_000) -> None:
        """Wait until every pushed command has completed."""
        await self.wait_completed(self.pushed, timeout_cycles)
        await RisingEdge(self.dut.clk)
        assert self.get("completed") == self.pushed == self.get("accepted") - self.dropped
        assert not self.get("busy"), f"engine {self.i} busy after its last completion"


async def start(dut, **cfg):
    """Clock, fresh shared memory (random contents), settings, reset."""
    start_bench_clock(dut.clk)
    mem = SharedMemory(MEM_SIZE)
    mem.export_env()
    mem.view[:] = np.random.default_rng(12345).integers(0, 256, mem.size, dtype=np.uint8)
    configure(dut, **cfg)
    engines = [Engine(dut, 0), Engine(dut, 1)]
    dut.rst.value = 1
    await ClockCycles(dut.clk, 3)
    dut.rst.value = 0
    await RisingEdge(dut.clk)
    return mem, ProtocolChecker(dut), engines


def nbytes_bus(dut) -> int:
    return int(json.loads(os.environ.get("GPUCOSIM_PARAMS", "{}")).get("DATA_WIDTH", 64)) // 8


def rand_size(rng: random.Random, max_bytes: int) -> int:
    r = rng.random()
    if r < 0.06:
        return 0
    if r < 0.10:
        return max_bytes
    return min(max_bytes, int(2 ** rng.uniform(0, math.log2(max_bytes + 1))))


def rand_cmd(rng: random.Random, engine: int, max_bytes: int, allow_raw: bool = True) -> Cmd:
    base = engine * ENGINE_AREA
    n = rand_size(rng, max_bytes)
    dst = base + SRC_AREA + rng.randrange(0, ENGINE_AREA - SRC_AREA - n + 1)
    kind = rng.random()
    if kind < 0.25:
        return Cmd(rng.getrandbits(32), dst, n, fill=True)
    if kind < 0.35 and allow_raw:
        # Read back what earlier commands wrote: needs RAW_WAIT; src and dst apart.
        for _ in range(20):
            src = base + SRC_AREA + rng.randrange(0, ENGINE_AREA - SRC_AREA - n + 1)
            if src + n <= dst or dst + n <= src:
                return Cmd(src, dst, n, raw=True)
    return Cmd(base + rng.randrange(0, SRC_AREA - n + 1), dst, n)


async def run_stream(dut, mem: SharedMemory, eng: Engine, cmds: list[Cmd], expected: np.ndarray) -> None:
    for c in cmds:
        apply(expected, c)
        await eng.push(c)
    await eng.drain()


def check_memory(dut, mem: SharedMemory, expected: np.ndarray, lo: int = 0, hi: int | None = None,
                 what: str = "") -> None:
    hi = mem.size if hi is None else hi
    got = mem.view[lo:hi]
    exp = expected[lo:hi]
    bad = np.nonzero(got != exp)[0]
    if len(bad):
        a = lo + int(bad[0])
        raise AssertionError(f"{what}: {len(bad)} bytes differ, first at {a:#x}: "
                             f"got {bytes(mem.view[a:a + 16]).hex()} expected {bytes(expected[a:a + 16]).hex()}")


# ----------------------------------------------------------------------------- data

@cocotb.test()
async def test_alignments(dut):
    """Every (src, dst) alignment mod the bus width, short lengths around beat edges."""
    mem, checker, (e0, e1) = await start(dut)
    B = nbytes_bus(dut)
    rng = random.Random(7)
    expected = np.array(mem.view)
    pairs = [(s, d) for s in range(B) for d in range(B)]
    if SIM == "icarus" and len(pairs) > 64:
        pairs = rng.sample(pairs, 64)
    cmds: list[Cmd] = []
    for k, (s, d) in enumerate(pairs):
        for n in sorted({1, max(1, B - s), B, B + 1, 2 * B - 1, 3 * B + 5, rng.randrange(1, 6 * B)}):
            src = (rng.randrange(0x1000, SRC_AREA - 0x1000) & ~(B - 1)) + s
            dst = SRC_AREA + (rng.randrange(0x1000, ENGINE_AREA - SRC_AREA - 0x1000) & ~(B - 1)) + d
            cmds.append(Cmd(src, dst, n))
    await run_stream(dut, mem, e0, cmds, expected)
    check_memory(dut, mem, expected, what=f"{len(cmds)} copies")
    # Fills at every destination alignment.
    fills = [Cmd(0x11223344 + d, SRC_AREA + 0x100 * (d + 1) + d, n, fill=True)
             for d in range(B) for n in (1, 3, B, 2 * B + 1)]
    await run_stream(dut, mem, e0, fills, expected)
    check_memory(dut, mem, expected, what="fills")
    checker.check()
    dut._log.info("%d copies, %d fills at %d alignment pairs", len(cmds), len(fills), len(pairs))
    mem.close()


@cocotb.test()
async def test_random(dut):
    """Random copies/fills (0..64 KiB) on both engines at once, with latency and back-pressure."""
    seed = int(os.environ.get("DMA_SEED", "2024"))
    rng = random.Random(seed)
    mem, checker, engines = await start(dut, rd_latency=rng.choice([0, 5, 23]),
                                        wr_latency=rng.choice([0, 3, 17]), seed=seed,
                                        stall={"aw": 0.3, "w": 0.25, "b": 0.3, "ar": 0.3, "r": 0.25})
    expected = np.array(mem.view)
    max_bytes = 65536 if SIM == "verilator" else 32768
    n_cmds = max(4, int((40 if SIM == "verilator" else 30) * SCALE))
    streams = [[rand_cmd(rng, e, max_bytes) for _ in range(n_cmds)] for e in range(2)]
    t0 = int(dut.cycle.value)
    tasks = [cocotb.start_soon(run_stream(dut, mem, eng, cmds, expected))
             for eng, cmds in zip(engines, streams)]
    for t in tasks:
        await t
    cycles = int(dut.cycle.value) - t0
    check_memory(dut, mem, expected, what=f"random stream (seed {seed})")
    total = sum(c.nbytes for s in streams for c in s)
    written = engines[0].get("wr_bytes") + engines[1].get("wr_bytes")
    assert written == total, f"engines report {written} bytes written, commands moved {total}"
    assert engines[0].get("errors") == engines[1].get("errors") == 0
    checker.check()
    dut._log.info("random: %d commands, %d bytes in %d cycles (seed %d)", 2 * n_cmds, total, cycles, seed)
    mem.close()


@cocotb.test()
async def test_zero_length_and_4k(dut):
    """Zero bytes is a no-op that completes; bursts split at 4 KiB (the checker would flag it)."""
    mem, checker, (e0, e1) = await start(dut)
    B = nbytes_bus(dut)
    expected = np.array(mem.view)
    r0, w0 = int(dut.bus_r_beats.value), int(dut.bus_w_beats.value)
    for c in (Cmd(0x100, SRC_AREA + 0x100, 0), Cmd(0x5, SRC_AREA + 0x7, 0, fill=True),
              Cmd(0x100, SRC_AREA + 0x300, 0, raw=True)):
        await e0.push(c)
    await e0.drain()
    assert (int(dut.bus_r_beats.value), int(dut.bus_w_beats.value)) == (r0, w0), "a zero-length command moved data"
    check_memory(dut, mem, expected, what="zero-length commands")
    # Across 4 KiB boundaries, at every offset class, copies and fills, mixed with zeros.
    cmds = []
    for k, off in enumerate((1, B, 3 * B + 1, 8 * B - 3, 64)):
        cmds.append(Cmd(0x3000 - off, SRC_AREA + 0x8000 * (k + 1) - off - 5, 2 * off + 3 * B + 7))
        cmds.append(Cmd(0, SRC_AREA, 0))
        cmds.append(Cmd(0xA5A5_0000 + k, SRC_AREA + 0x8000 * (k + 1) + 0x2000 - off, 2 * off + 9, fill=True))
    cmds.append(Cmd(0x1FF8, SRC_AREA + 0x70FF1, 0x3000))  # several pages, odd alignment
    await run_stream(dut, mem, e0, cmds, expected)
    check_memory(dut, mem, expected, what="4 KiB crossings")
    assert e0.get("errors") == 0
    checker.check()
    mem.close()


@cocotb.test()
async def test_raw_wait(dut):
    """A copy that reads what the previous command wrote sees the new data with RAW_WAIT."""
    mem, checker, (e0, e1) = await start(dut, rd_latency=3, wr_latency=40)
    expected = np.array(mem.view)
    a, b, c = SRC_AREA + 0x1003, SRC_AREA + 0x9005, SRC_AREA + 0x20001
    cmds = [Cmd(0x100, a, 3000), Cmd(a, b, 3000, raw=True), Cmd(0xCAFEF00D, b + 100, 50, fill=True),
            Cmd(b, c, 3000, raw=True)]
    await run_stream(dut, mem, e0, cmds, expected)
    check_memory(dut, mem, expected, what="RAW chain")
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- errors

def bursts(addr: int, nbytes: int, B: int) -> list[tuple[int, int]]:
    """The engine's bursts over [addr, addr + nbytes): (first beat address, beats)."""
    bnd = min(MAX_BURST * B, 4096)
    out = []
    a = addr & ~(B - 1)
    end = addr + nbytes
    while a < end:
        nxt = min((a // bnd + 1) * bnd, (end + B - 1) & ~(B - 1))
        out.append((a, (nxt - a) // B))
        a = nxt
    return out


def read_err_addr(c: Cmd, win: tuple[int, int], B: int, mem_size: int) -> int | None:
    """Where the engine must report a read error: first beat in the window or past memory."""
    a = c.src & ~(B - 1)
    while a < c.src + c.nbytes:
        if win[0] <= a < win[1] or a + B > mem_size:
            return max(a, c.src)
        a += B
    return None


def write_err_addr(c: Cmd, win: tuple[int, int], B: int) -> int | None:
    for start, beats in bursts(c.dst, c.nbytes, B):
        if any(win[0] <= start + i * B < win[1] for i in range(beats)):
            return max(start, c.dst)
    return None


def check_partial(mem: SharedMemory, before: np.ndarray, c: Cmd, src_data: np.ndarray, stop: int | None) -> None:
    """After a failed copy: every destination byte is its old value or the right one, and
    nothing at or after the source offset `stop` was written (no data from failed beats)."""
    got = mem.view[c.dst:c.dst + c.nbytes]
    old = before[c.dst:c.dst + c.nbytes]
    ok = (got == old) | (got == src_data)
    assert ok.all(), f"{c}: byte {int(np.nonzero(~ok)[0][0])} is neither old nor copied data"
    if stop is not None:
        k = max(0, stop)
        changed = np.nonzero(got[k:] != old[k:])[0]
        assert not len(changed), f"{c}: byte {k + int(changed[0])} written after the failing beat"


@cocotb.test()
async def test_read_errors(dut):
    """SLVERR / DECERR on a read mid-burst: exact resp and err_addr, drain, then recover."""
    mem, checker, (e0, e1) = await start(dut, rd_latency=7, stall={"r": 0.2, "w": 0.2, "aw": 0.2})
    B = nbytes_bus(dut)
    rng = random.Random(5)
    cases = 12 if SIM == "verilator" else 6
    for k in range(cases):
        resp = (RESP_SLVERR, RESP_DECERR)[k % 2]
        n = rng.randrange(B * 3, 3000)
        src = rng.randrange(0x1000, SRC_AREA - n)
        dst = SRC_AREA + rng.randrange(0x1000, 0x40000)
        c = Cmd(src, dst, n)
        lo = rng.randrange(src, src + n) & ~(B - 1)  # an aligned beat address the copy reads
        win = (lo, lo + rng.choice([1, B, 100]))
        configure(dut, rd_latency=7, stall={"r": 0.2, "w": 0.2, "aw": 0.2}, error_window=(*win, resp))
        before = np.array(mem.view)
        src_data = np.array(mem.view[src:src + n])
        await e0.push(c)
        await e0.drain()
        want = read_err_addr(c, win, B, mem.size)
        assert want is not None
        assert (e0.get("last_resp"), e0.get("last_err_addr")) == (resp, want), \
            f"{c}, window {win[0]:#x}..{win[1]:#x}: resp {e0.get('last_resp')} at " \
            f"{e0.get('last_err_addr'):#x}, expected {resp} at {want:#x}"
        check_partial(mem, before, c, src_data, (want & ~(B - 1)) - c.src)
        configure(dut, error_window=None)
        # The engine is idle and the next command works.
        ok = Cmd(src, dst, n)
        expected = np.array(mem.view)
        await run_stream(dut, mem, e0, [ok], expected)
        check_memory(dut, mem, expected, what="copy after an error")
        assert e0.get("last_resp") == RESP_OK
    # Reading past the end of memory: DECERR from the model.
    end = mem.size
    c = Cmd(end - 200 - 3, SRC_AREA + 0x100, 400)
    await e0.push(c)
    await e0.drain()
    assert (e0.get("last_resp"), e0.get("last_err_addr")) == (RESP_DECERR, end), \
        f"read past the end: resp {e0.get('last_resp')} at {e0.get('last_err_addr'):#x}"
    checker.check()
    mem.close()


@cocotb.test()
async def test_write_errors(dut):
    """SLVERR / DECERR on writes (copies and fills): resp and the burst's address, then recover."""
    mem, checker, (e0, e1) = await start(dut, wr_latency=9, stall={"b": 0.3, "w": 0.2})
    B = nbytes_bus(dut)
    rng = random.Random(6)
    cases = 12 if SIM == "verilator" else 6
    for k in range(cases):
        resp = (RESP_DECERR, RESP_SLVERR)[k % 2]
        n = rng.randrange(B * 3, 3000)
        dst = SRC_AREA + rng.randrange(0x1000, 0x40000)
        c = Cmd(rng.getrandbits(32), dst, n, fill=True) if k % 3 == 2 else \
            Cmd(rng.randrange(0x1000, SRC_AREA - n), dst, n)
        lo = rng.randrange(dst, dst + n) & ~(B - 1)
        win = (lo, lo + rng.choice([1, B, 64]))
        configure(dut, wr_latency=9, stall={"b": 0.3, "w": 0.2}, error_window=(*win, resp))
        before = np.array(mem.view)
        expect_img = np.array(mem.view)
        apply(expect_img, c)
        await e0.push(c)
        await e0.drain()
        want = write_err_addr(c, win, B)
        assert (e0.get("last_resp"), e0.get("last_err_addr")) == (resp, want), \
            f"{c}, window {win[0]:#x}..{win[1]:#x}: resp {e0.get('last_resp')} at " \
            f"{e0.get('last_err_addr'):#x}, expected {resp} at {want:#x}"
        check_partial(mem, before, c, expect_img[dst:dst + n], None)
        configure(dut, error_window=None)
        expected = np.array(mem.view)
        await run_stream(dut, mem, e0, [Cmd(0x2000, dst, n)], expected)
        check_memory(dut, mem, expected, what="copy after a write error")
    checker.check()
    mem.close()


@cocotb.test()
async def test_error_cancels_queue(dut):
    """Queued commands: those before the failing one finish, it and the ones after report its
    error (in order); then the engine takes new work. The other engine is unaffected."""
    mem, checker, (e0, e1) = await start(dut, rd_latency=20)
    B = nbytes_bus(dut)
    win = (0x9000, 0x9000 + B)
    configure(dut, rd_latency=20, error_window=(*win, "SLVERR"))
    expected = np.array(mem.view)
    c0 = Cmd(0x1000, SRC_AREA + 0x1000, 5000)        # fine
    c1 = Cmd(0x8000 + 3, SRC_AREA + 0x10000, 8000)   # reads 0x9000: fails
    c2 = Cmd(0x20000, SRC_AREA + 0x20000, 3000)      # cancelled
    c3 = Cmd(0x77, SRC_AREA + 0x30000, 100, fill=True)
    other = [Cmd(ENGINE_AREA + 0x1000 * k + k, ENGINE_AREA + SRC_AREA + 0x4000 * k, 3000 + k) for k in range(6)]
    before = np.array(mem.view)
    apply(expected, c0)
    for c in other:
        apply(expected, c)
    t = cocotb.start_soon(run_stream(dut, mem, e1, other, np.array(mem.view)))
    for c in (c0, c1, c2, c3):
        await e0.push(c)
    await e0.drain()
    await t
    assert e0.get("errors") == 3, f"{e0.get('errors')} error completions, expected 3"
    assert (e0.get("last_resp"), e0.get("last_err_addr")) == (RESP_SLVERR, win[0])
    check_memory(dut, mem, expected, SRC_AREA, SRC_AREA + 0x1000 + 5000, "command before the failing one")
    check_memory(dut, mem, expected, ENGINE_AREA, 2 * ENGINE_AREA, "the other engine")
    check_partial(mem, before, c1, before[c1.src:c1.src + c1.nbytes], win[0] - c1.src)
    for c in (c2, c3):  # their writes wait behind c1's, which never all go out
        check_memory(dut, mem, before, c.dst, c.dst + c.nbytes, f"cancelled {c}")
    configure(dut, rd_latency=20, error_window=None)
    expected = np.array(mem.view)
    await run_stream(dut, mem, e0, [c1, c2, c3], expected)
    check_memory(dut, mem, expected, what="after recovery")
    assert e0.get("errors") == 3
    checker.check()
    mem.close()


@cocotb.test()
async def test_abort(dut):
    """`abort` (the CP's soft reset) mid-transfer: the bus drains cleanly, queued commands
    end without a completion, nothing is written after the drain, and new work runs."""
    mem, checker, (e0, e1) = await start(dut, rd_latency=30, stall={"r": 0.2, "w": 0.2, "b": 0.2})
    rng = random.Random(8)
    for k in range(6 if SIM == "verilator" else 3):
        cmds = [Cmd(0x1000 * j + k, SRC_AREA + 0x4000 * j + 3 * k, 3000 + 7 * j, fill=(j == 2)) for j in range(4)]
        for c in cmds:
            await e0.push(c)
        await ClockCycles(dut.clk, rng.randrange(1, 1500))
        e0.sig("abort").value = 1
        await RisingEdge(dut.clk)
        e0.sig("abort").value = 0
        done_before = e0.get("completed")
        for _ in range(10_000):
            await RisingEdge(dut.clk)
            if not e0.get("busy"):
                break
        else:
            raise AssertionError("engine still busy 10000 cycles after abort")
        assert e0.get("completed") == done_before, "an aborted command reported completion"
        dut._log.info("abort after %d commands completed: %d dropped", done_before, e0.pushed - done_before)
        e0.dropped += e0.pushed - done_before
        e0.pushed = done_before
        snap = np.array(mem.view)
        await ClockCycles(dut.clk, 200)
        check_memory(dut, mem, snap, what="memory after the drain")  # nothing still trickling in
        expected = np.array(mem.view)
        await run_stream(dut, mem, e0, [Cmd(0x800 + k, SRC_AREA + 0x30000 + k, 1000)], expected)
        check_memory(dut, mem, expected, what="copy after abort")
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- figures

async def timed(dut, eng: Engine, cmds: list[Cmd]) -> int:
    """Cycles from the first command's acceptance to the last command's completion."""
    first = None
    for c in cmds:
        t = await eng.push(c)
        first = t if first is None else first
    await eng.drain()
    return eng.get("done_cycle") - first


@cocotb.test()
async def test_bench(dut):
    """Bus efficiency and fixed cost (figures, printed and written as JSON; no pass bar).

    Efficiency = bytes moved / (cycles × bus bytes), cycles from the first command's
    acceptance to the last completion. `_run` figures include the one-time start (first
    read latency, last write response); `_steady` figures are the marginal cost of extra
    copies (the difference between a long and a short run), i.e. the back-to-back rate.
    """
    mem, checker, (e0, e1) = await start(dut)
    B = nbytes_bus(dut)
    short, long_ = (8, 40) if SIM == "verilator" else (2, 6)
    res: dict[str, float] = {}
    expected = np.array(mem.view)

    async def run(cmds: list[Cmd], eng: Engine = e0) -> int:
        for c in cmds:
            apply(expected, c)
        return await timed(dut, eng, cmds)

    async def eff(name: str, make, **cfg) -> None:
        configure(dut, **cfg)
        c1 = await run(make(short))
        c2 = await run(make(long_))
        res[f"{name}_run"] = long_ * 4096 / (c2 * B)
        res[f"{name}_steady"] = (long_ - short) * 4096 / ((c2 - c1) * B)
        dut._log.info("%s: %d x 4 KiB in %d cycles (%.4f of bus peak), %d in %d; back-to-back %.4f",
                      name, long_, c2, res[f"{name}_run"], short, c1, res[f"{name}_steady"])

    await eff("copy_4k_lat0", lambda n: [Cmd(0x1000 * k, SRC_AREA + 0x1000 * k, 4096) for k in range(n)])
    await eff("copy_4k_lat64", lambda n: [Cmd(0x1000 * k, SRC_AREA + 0x1000 * k, 4096) for k in range(n)],
              rd_latency=64)
    await eff("copy_4k_unaligned_lat0",
              lambda n: [Cmd(0x1000 * k + 3, SRC_AREA + 0x1000 * k + 5, 4096) for k in range(n)])
    await eff("fill_4k_lat0", lambda n: [Cmd(0xDEADBEEF, SRC_AREA + 0x1000 * k, 4096, fill=True) for k in range(n)])

    # One long copy: the W channel should be busy every cycle once data flows.
    for lat in (0, 64):
        configure(dut, rd_latency=lat)
        cyc = await run([Cmd(0, SRC_AREA, 65536)])
        res[f"copy_64k_lat{lat}_run"] = 65536 / (cyc * B)

    # Both engines at once through the mux: how full is the shared bus?
    configure(dut)
    t0 = int(dut.cycle.value)
    w0 = int(dut.bus_w_beats.value)
    jobs = [cocotb.start_soon(run([Cmd(e * ENGINE_AREA + 0x1000 * k, e * ENGINE_AREA + SRC_AREA + 0x1000 * k, 4096)
                                   for k in range(long_)], eng)) for e, eng in enumerate((e0, e1))]
    for j in jobs:
        await j
    res["two_engines_4k_lat0_w_busy"] = (int(dut.bus_w_beats.value) - w0) / (int(dut.cycle.value) - t0)

    for lat in (0, 2):
        configure(dut, rd_latency=lat, wr_latency=lat)
        for name, c in (("copy16", Cmd(0x40, SRC_AREA + 0x80, 16)), ("fill16", Cmd(1, SRC_AREA + 0xC0, 16, True))):
            res[f"{name}_cycles_lat{lat}"] = await run([c])
    dut._log.info("figures: %s", res)
    check_memory(dut, mem, expected, what="bench traffic")
    checker.check()
    out = os.environ.get("GPUCOSIM_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(res, f)
    mem.close()


@cocotb.test()
async def test_sweep_point(dut):
    """One design-space point for `make sweep` (fpga/sweep.py): back-to-back 4 KiB copies at
    SWEEP_LATENCY cycles of read latency; the bus efficiency goes to GPUCOSIM_BENCH_OUT."""
    mem, checker, (e0, _) = await start(dut, rd_latency=int(os.environ.get("SWEEP_LATENCY", "0")))
    B = nbytes_bus(dut)
    n = 16
    expected = np.array(mem.view)
    cmds = [Cmd(0x1000 * k, SRC_AREA + 0x1000 * k, 4096) for k in range(n)]
    for c in cmds:
        apply(expected, c)
    cycles = await timed(dut, e0, cmds)
    check_memory(dut, mem, expected, what="sweep copies")
    checker.check()
    out = os.environ.get("GPUCOSIM_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"copy_4k_eff": n * 4096 / (cycles * B), "cycles": cycles}, f)
    mem.close()
