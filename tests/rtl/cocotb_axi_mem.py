"""cocotb tests of the AXI memory model and the AXI protocol checker (tb_axi_mem.v).

Started by tests/rtl/test_axi_mem.py through testbench.sim.run; each test brings its own
shared memory file and resets the bench, so any subset runs in one simulator process.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
import warnings

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

from testbench.memory import (CHECKER_BY_NAME, ProtocolChecker, SharedMemory, checker_message,
                              configure, start_bench_clock)

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\..*")
from cocotbext.axi import AxiBus, AxiMaster, AxiResp  # noqa: E402

MEM_SIZE = 1 << 20

MASTER_INPUTS = ("awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "wdata", "wstrb", "wlast",
                 "wvalid", "bready", "arid", "araddr", "arlen", "arsize", "arburst", "arvalid", "rready")


def bus_bytes(dut) -> int:
    return len(dut.s_axi_wdata) // 8


def max_size(dut) -> int:
    return (bus_bytes(dut) - 1).bit_length()


async def start(dut, mem_size: int = MEM_SIZE, checker_fails: bool = True, **cfg):
    """Clock, fresh shared memory, settings, reset; returns (memory, checker)."""
    start_bench_clock(dut.clk)
    mem = SharedMemory(mem_size)
    mem.export_env()
    configure(dut, **cfg)
    for name in MASTER_INPUTS:
        getattr(dut, "s_axi_" + name).value = 0
    dut.bench_en.value = 0
    dut.bench_addr.value = 0
    dut.bench_mask.value = 0
    dut.bench_bursts.value = 0
    dut.bench_len.value = 0
    await reset(dut)
    return mem, ProtocolChecker(dut, fail=checker_fails)


async def reset(dut, cycles: int = 3) -> None:
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def axi_master(dut) -> AxiMaster:
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)  # cocotbext logs every burst
    return AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.clk, dut.rst)


# ----------------------------------------------------------------------------- traffic

async def random_traffic(dut, axi: AxiMaster, mem: SharedMemory, rng: random.Random,
                         ops: int, workers: int = 4) -> None:
    """Reads and writes of random length, alignment and beat size, checked both ways.

    Python-written bytes must come back over the bus; bus-written bytes must appear in
    the numpy view, and the bytes around them (strobes!) must not change. Workers own
    disjoint regions and run concurrently, so several bursts with different IDs overlap.
    """
    region = mem.size // workers
    guard = 16

    async def worker(k: int, seed: int) -> None:
        r = random.Random(seed)
        base = k * region
        for _ in range(ops):
            size = r.randint(0, max_size(dut))
            length = r.randint(1, min(256, (1 << size) * 64))
            addr = base + guard + r.randrange(0, region - length - 2 * guard)
            if r.random() < 0.5:
                data = bytes(r.getrandbits(8) for _ in range(length))
                mem.write(addr, data)
                resp = await axi.read(addr, length, size=size)
                assert resp.resp == AxiResp.OKAY, f"read {addr:#x}+{length} size {size}: {resp.resp!r}"
                assert resp.data == data, f"read {addr:#x}+{length} size {size}: data differs from the view"
            else:
                before = mem.read(addr - guard, length + 2 * guard)
                data = bytes(r.getrandbits(8) for _ in range(length))
                resp = await axi.write(addr, data, size=size)
                assert resp.resp == AxiResp.OKAY, f"write {addr:#x}+{length} size {size}: {resp.resp!r}"
                after = mem.read(addr - guard, length + 2 * guard)
                assert after[guard:guard + length] == data, f"write {addr:#x}+{length} size {size}: view differs"
                assert after[:guard] == before[:guard] and after[guard + length:] == before[guard + length:], \
                    f"write {addr:#x}+{length} size {size}: bytes outside the write changed (strobes)"

    tasks = [cocotb.start_soon(worker(k, rng.getrandbits(32))) for k in range(workers)]
    for t in tasks:
        await t


@cocotb.test()
async def test_random_rw(dut):
    """Random reads/writes of every size and alignment, fast memory, no back-pressure."""
    mem, checker = await start(dut)
    mem.view[:] = np.random.default_rng(1).integers(0, 256, mem.size, dtype=np.uint8)
    axi = axi_master(dut)
    await random_traffic(dut, axi, mem, random.Random(11), ops=int(os.environ.get("AXI_MEM_OPS", "24")))
    checker.check()
    mem.close()


@cocotb.test()
async def test_backpressure(dut):
    """Same traffic with latency and random stalls on all five channels."""
    mem, checker = await start(dut, rd_latency=9, wr_latency=5, seed=1234,
                               stall={"aw": 0.4, "w": 0.4, "b": 0.5, "ar": 0.4, "r": 0.5})
    axi = axi_master(dut)
    await random_traffic(dut, axi, mem, random.Random(22), ops=int(os.environ.get("AXI_MEM_OPS", "24")) // 2)
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- by hand

async def step(dut) -> dict[str, int]:
    """Sample the bus at the end of this cycle, then move to the next clock edge.

    Returns which handshakes happened at that edge (e.g. {"ar": 1, "r": 0, ...}).
    """
    await ReadOnly()
    hs = {ch: int(getattr(dut, f"s_axi_{ch}valid").value) & int(getattr(dut, f"s_axi_{ch}ready").value)
          for ch in ("aw", "w", "b", "ar", "r")}
    await RisingEdge(dut.clk)
    return hs


def drive(dut, **fields: int) -> None:
    for name, v in fields.items():
        getattr(dut, "s_axi_" + name).value = v


async def send(dut, ch: str, **fields: int) -> int:
    """Offer one transfer on `ch` until it is taken; returns the cycles it waited."""
    drive(dut, **fields, **{ch + "valid": 1})
    n = 0
    while True:
        hs = await step(dut)
        n += 1
        if hs[ch]:
            drive(dut, **{ch + "valid": 0})
            return n


async def read_by_hand(dut, addr: int, length: int, size: int, burst: int = 1, arid: int = 0):
    """One AR, all its R beats; returns (cycles from AR to first R handshake, beats)."""
    drive(dut, rready=1, arid=arid, araddr=addr, arlen=length - 1, arsize=size, arburst=burst, arvalid=1)
    t, t_ar, beats = 0, None, []
    while len(beats) < length:
        await ReadOnly()
        r = (int(dut.s_axi_rdata.value), int(dut.s_axi_rresp.value), int(dut.s_axi_rlast.value),
             int(dut.s_axi_rid.value)) if int(dut.s_axi_rvalid.value) else None
        ar = int(dut.s_axi_arvalid.value) & int(dut.s_axi_arready.value)
        await RisingEdge(dut.clk)
        t += 1
        if ar:
            t_ar = t
            drive(dut, arvalid=0)
        if r is not None:
            beats.append((t - t_ar, *r))
    return beats[0][0], beats


@cocotb.test()
async def test_latency(dut):
    """cfg_rd_latency / cfg_wr_latency are honoured (cycles handshake to handshake, min 2)."""
    mem, checker = await start(dut)
    mem.view[:4096] = np.arange(4096, dtype=np.uint8)
    nb = bus_bytes(dut)
    for lat in (0, 1, 2, 3, 10, 64):
        configure(dut, rd_latency=lat, wr_latency=lat)
        first, beats = await read_by_hand(dut, 0x40, 4, max_size(dut), arid=3)
        assert first == max(lat, 2), f"rd_latency {lat}: first R beat after {first} cycles"
        assert [b[0] for b in beats] == [first + i for i in range(4)], f"rd_latency {lat}: beats not back-to-back"
        assert [b[4] for b in beats] == [3] * 4 and [b[3] for b in beats] == [0, 0, 0, 1]
        # write: AW, then one W beat; B comes wr_latency after the W handshake
        drive(dut, bready=1)
        await send(dut, "aw", awid=5, awaddr=0x800, awlen=0, awsize=max_size(dut), awburst=1)
        drive(dut, wdata=(1 << (8 * nb)) - 1, wstrb=(1 << nb) - 1, wlast=1, wvalid=1)
        t, t_w = 0, None
        while True:
            hs = await step(dut)
            t += 1
            if hs["w"]:
                t_w = t
                drive(dut, wvalid=0)
            if hs["b"]:
                break
        assert t - t_w == max(lat, 2), f"wr_latency {lat}: B after {t - t_w} cycles"
        assert int(dut.s_axi_bid.value) == 5
    assert mem.read(0x800, nb) == b"\xff" * nb
    checker.check()
    mem.close()


@cocotb.test()
async def test_errors(dut):
    """DECERR at and beyond the end of memory; SLVERR/DECERR in the error window."""
    mem, checker = await start(dut)
    axi = axi_master(dut)
    nb = bus_bytes(dut)
    end = mem.size
    mem.write(end - 64, bytes(range(64)))

    resp = await axi.read(end - 64, 64)
    assert resp.resp == AxiResp.OKAY and resp.data == bytes(range(64))
    resp = await axi.read(end, 16)
    assert resp.resp == AxiResp.DECERR and resp.data == bytes(16), "read beyond the end"
    resp = await axi.read(end - 2 * nb, 4 * nb)  # straddles the end: OK beats, then DECERR
    assert resp.resp == AxiResp.DECERR and resp.data[2 * nb:] == bytes(2 * nb)
    resp = await axi.write(end + 0x100, b"\x55" * 16)
    assert resp.resp == AxiResp.DECERR, "write beyond the end"
    resp = await axi.read(0xFFFF_FFFF_F000, 8)  # far beyond, top of the 48-bit space
    assert resp.resp == AxiResp.DECERR

    win = (0x4000, 0x4100)
    for name, code in (("SLVERR", AxiResp.SLVERR), ("DECERR", AxiResp.DECERR)):
        configure(dut, error_window=(*win, name))
        mem.write(0x3FC0, b"\xaa" * 0x180)
        resp = await axi.read(0x4000, 32)
        assert resp.resp == code and resp.data == bytes(32), f"read in the {name} window"
        resp = await axi.read(0x3FC0, 64)  # before the window: fine
        assert resp.resp == AxiResp.OKAY and resp.data == b"\xaa" * 64
        resp = await axi.read(0x3FE0, 64)  # runs into the window
        assert resp.resp == code and resp.data[:32] == b"\xaa" * 32 and resp.data[32:] == bytes(32)
        resp = await axi.write(0x40F0, b"\x11" * 32)  # half in, half after the window
        assert resp.resp == code
        assert mem.read(0x40F0, 16) == b"\xaa" * 16, f"write in the {name} window was not dropped"
        assert mem.read(0x4100, 16) == b"\x11" * 16, "write after the window was dropped"
    configure(dut, error_window=None)
    resp = await axi.read(0x4000, 32)
    assert resp.resp == AxiResp.OKAY and resp.data == b"\xaa" * 32
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- checker

async def expect_violation(dut, checker: ProtocolChecker, name: str, addr: int, args: tuple[int, int, int]):
    await ClockCycles(dut.clk, 2)
    v = checker.read()
    code = CHECKER_BY_NAME[name].code
    assert v is not None, f"checker missed {name}"
    assert (v.code, v.addr, v.info) == (code, addr, args), f"expected {name} at {addr:#x} {args}, got: {v}"
    assert str(v) == checker_message(code, addr, *args)
    dut._log.info("checker caught it: %s", v)
    assert checker.violations and checker.violations[-1].code == code
    await reset(dut)
    assert checker.read() is None, "reset did not clear the checker"


@cocotb.test()
async def test_checker_catches_bad_master(dut):
    """Hand-driven illegal traffic: each violation is latched with its code and text."""
    mem, checker = await start(dut, checker_fails=False)
    mem.view[:0x2000] = np.random.default_rng(3).integers(0, 256, 0x2000, dtype=np.uint8)
    nb, sz = bus_bytes(dut), max_size(dut)

    # A read burst crossing 4 KiB (the slave still answers it).
    await read_by_hand(dut, 0x1000 - 2 * nb, 4, sz, arid=2)
    await expect_violation(dut, checker, "AR_4K", 0x1000 - 2 * nb, (0, 2, 4 * nb))

    # A write burst of 4 beats whose WLAST never comes.
    drive(dut, bready=1)
    await send(dut, "aw", awid=1, awaddr=0x100, awlen=3, awsize=sz, awburst=1)
    for beat in range(4):
        await send(dut, "w", wdata=beat, wstrb=(1 << nb) - 1, wlast=0)
    await expect_violation(dut, checker, "WLAST_MISSING", 0x100, (0, 4, 4))
    assert "W burst 0 at 0x100: WLAST missing on beat 4 of 4" in str(checker.violations[-1])

    # WLAST on beat 2 of a 3-beat burst (after one good burst: burst number 1).
    drive(dut, bready=1)
    await send(dut, "aw", awid=0, awaddr=0x200, awlen=0, awsize=sz, awburst=1)
    await send(dut, "w", wdata=0, wstrb=(1 << nb) - 1, wlast=1)
    await send(dut, "aw", awid=0, awaddr=0x300, awlen=2, awsize=sz, awburst=1)
    await send(dut, "w", wdata=0, wstrb=(1 << nb) - 1, wlast=0)
    await send(dut, "w", wdata=0, wstrb=(1 << nb) - 1, wlast=1)
    await expect_violation(dut, checker, "WLAST_EARLY", 0x300, (1, 2, 3))
    drive(dut, wlast=0)

    # WRAP: the model serves it (beat order wraps), the INCR-only checker flags it.
    first, beats = await read_by_hand(dut, 0x100 + 3 * nb, 4, sz, burst=2, arid=6)
    order = [0x100 + ((3 + i) % 4) * nb for i in range(4)]
    got = [b[1].to_bytes(nb, "little") for b in beats]
    assert got == [mem.read(a, nb) for a in order], "WRAP burst data out of order"
    await expect_violation(dut, checker, "AR_BURST", 0x100 + 3 * nb, (0, 6, 2))

    # FIXED: every beat reads the same word.
    first, beats = await read_by_hand(dut, 0x180, 3, sz, burst=0, arid=7)
    assert [b[1] for b in beats] == [int.from_bytes(mem.read(0x180, nb), "little")] * 3
    await expect_violation(dut, checker, "AR_BURST", 0x180, (0, 7, 0))

    # A beat wider than the bus.
    await read_by_hand(dut, 0x200, 1, sz + 1, arid=1)
    await expect_violation(dut, checker, "AR_SIZE", 0x200, (0, 1, 2 * nb))

    # ARVALID withdrawn, and ARADDR changed, before ARREADY (the model stalls AR hard).
    for name in ("AR_VALID_DROP", "AR_UNSTABLE"):
        configure(dut, stall={"ar": 255}, seed=99)
        await reset(dut)
        drive(dut, rready=1)
        while True:
            drive(dut, arid=4, araddr=0x440, arlen=0, arsize=sz, arburst=1, arvalid=1)
            hs = await step(dut)
            if not hs["ar"]:
                break
            drive(dut, arvalid=0)  # taken after all (1 in 256): let it complete, try again
            await ClockCycles(dut.clk, 4)
        if name == "AR_VALID_DROP":
            drive(dut, arvalid=0)
        else:
            drive(dut, araddr=0x480)
        await RisingEdge(dut.clk)
        drive(dut, arvalid=0)
        await expect_violation(dut, checker, name, 0x440, (4, 0, 0))
        configure(dut)
    mem.close()


@cocotb.test()
async def test_checker_quiet_on_legal_traffic(dut):
    """cocotbext-axi's legal traffic, including 4 KiB-splitting and many IDs: no violation."""
    mem, checker = await start(dut, rd_latency=3, stall={"r": 0.2, "w": 0.2})
    axi = axi_master(dut)
    data = bytes(random.Random(5).getrandbits(8) for _ in range(3 * 4096))
    writes = [cocotb.start_soon(axi.write(0x10000 + 100, data[:5000])),
              cocotb.start_soon(axi.write(0x20000 - 7, data[5000:]))]
    for w in writes:
        assert (await w).resp == AxiResp.OKAY
    reads = [cocotb.start_soon(axi.read(0x10000 + 100, 5000)),
             cocotb.start_soon(axi.read(0x20000 - 7, len(data) - 5000))]
    assert b"".join([(await r).data for r in reads]) == data
    assert not checker.violations
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- throughput

@cocotb.test()
async def test_bench_read_throughput(dut):
    """The HDL read master streams long runs of 16-beat bursts: full bus, correct data.

    Prints beats/s of wall time (not asserted); asserts that the bus never idles once
    data flows, at latency 0 and at latency 64 (several bursts in flight).
    """
    mem, checker = await start(dut)
    nb = bus_bytes(dut)
    span = 1 << 16
    words = np.random.default_rng(7).integers(0, 1 << 32, span // 4, dtype=np.uint64).astype(np.uint32)
    mem.write(0, words.view(np.uint8))
    span_sum = int(words.astype(np.uint64).sum())
    total_beats = int(os.environ.get("AXI_MEM_BENCH_BEATS", "65536"))
    burst_beats = 16
    results = {}
    for lat in (0, 64):
        configure(dut, rd_latency=lat)
        passes = max(1, total_beats * nb // span)
        bursts = passes * span // (burst_beats * nb)
        dut.bench_addr.value = 0
        dut.bench_mask.value = span - 1
        dut.bench_bursts.value = bursts
        dut.bench_len.value = burst_beats - 1
        await RisingEdge(dut.clk)
        t0 = time.perf_counter()
        dut.bench_en.value = 1
        await with_timeout(RisingEdge(dut.bench_done), 20 * bursts * burst_beats * 10 + 10_000, "ns")
        dt = time.perf_counter() - t0
        await RisingEdge(dut.clk)
        beats = int(dut.bench_beats.value)
        cycles = int(dut.bench_cycles.value)
        assert beats == bursts * burst_beats
        assert int(dut.bench_sum.value) == (passes * span_sum) & 0xFFFF_FFFF, "bench read wrong data"
        assert cycles == beats, f"latency {lat}: {beats} beats took {cycles} cycles (bus idled)"
        dut.bench_en.value = 0
        await ClockCycles(dut.clk, 2)
        results[f"latency{lat}"] = {"beats": beats, "seconds": dt, "beats_per_s": beats / dt,
                                    "bytes_per_beat": nb}
        dut._log.info("bench: latency %d: %d beats in %.3f s = %.0f beats/s (%d-bit bus, full bus)",
                      lat, beats, dt, beats / dt, 8 * nb)
    out = os.environ.get("GPUCOSIM_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f)
    checker.check()
    mem.close()


# ----------------------------------------------------------------------------- checker alone

CHK_INPUTS = ("awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata", "wstrb", "wlast",
              "wvalid", "wready", "bid", "bresp", "bvalid", "bready", "arid", "araddr", "arlen", "arsize",
              "arburst", "arvalid", "arready", "rid", "rdata", "rresp", "rlast", "rvalid", "rready")


def AW(addr, len_=0, id_=0, size=3):
    return {"awvalid": 1, "awaddr": addr, "awlen": len_, "awid": id_, "awsize": size, "awburst": 1}


def W(last=0, data=0):
    return {"wvalid": 1, "wlast": last, "wdata": data, "wstrb": 0xFF}


def AR(addr, len_=0, id_=0, size=3):
    return {"arvalid": 1, "araddr": addr, "arlen": len_, "arid": id_, "arsize": size, "arburst": 1}


def R(id_=0, last=0, data=0):
    return {"rvalid": 1, "rid": id_, "rlast": last, "rdata": data}


def B(id_=0):
    return {"bvalid": 1, "bid": id_}


# Each scenario: cycles (dicts of signals driven for one cycle; READYs default high, all
# else 0) and the expected violation (name, addr, (arg0, arg1, arg2)) or None.
CHECKER_SCENARIOS = {
    "W ahead of AW, legal": ([W(), W(last=1), AW(0x40, 1, id_=2), B(2)], None),
    "W ahead, AW in the same cycle as its last W": ([W(), {**AW(0x40, 1, id_=3), **W(last=1)}, B(3)], None),
    "AW and W of several bursts, legal": ([AW(0x0, 0, 1), {**AW(0x8, 1, 2), **W(last=1)}, W(), W(last=1), B(1), B(2)], None),
    "W ahead of AW, length differs": ([W(), W(), W(last=1), AW(0x80, 1)], ("W_LEN_MISMATCH", 0x80, (0, 3, 2))),
    "W ahead of AW, already too long": ([W(), W(), W(), AW(0x90, 1)], ("WLAST_MISSING", 0x90, (0, 2, 2))),
    "W with no WLAST for 256 beats": ([W()] * 256, ("W_TOO_LONG", 0, (0, 256, 0))),
    "B before the last W": ([AW(0x0, 1, id_=1), W(), B(1)], ("B_NO_WRITE", 0, (1, 0, 0))),
    "B with an unused ID": ([AW(0x0, 0, id_=1), W(last=1), B(4)], ("B_NO_WRITE", 0, (4, 0, 0))),
    "R with no read": ([R(5, last=1)], ("R_NO_READ", 0, (5, 0, 0))),
    "R interleaved across IDs, legal": ([AR(0x100, 1, 1), AR(0x200, 1, 2), R(2), R(1), R(2, 1), R(1, 1)], None),
    "RLAST early": ([AR(0x300, 2, 3), R(3, last=1)], ("RLAST_EARLY", 0x300, (3, 1, 3))),
    "RLAST missing": ([AR(0x340, 1, 3), R(3), R(3)], ("RLAST_MISSING", 0x340, (3, 2, 2))),
    "BVALID dropped": ([AW(0x0, 0, 1), W(last=1), {**B(1), "bready": 0}, {}], ("B_VALID_DROP", 0, (1, 0, 0))),
    "RDATA changed before RREADY": ([AR(0x10, 0), {**R(last=1, data=1), "rready": 0}, R(last=1, data=2)],
                                    ("R_UNSTABLE", 0, (0, 0, 0))),
    "WDATA changed before WREADY": ([AW(0x0, 0), {**W(1, 1), "wready": 0}, W(1, 2)], ("W_UNSTABLE", 0, (0, 0, 0))),
    "AW crossing 4 KiB": ([AW(0xFF8, 1, id_=6)], ("AW_4K", 0xFF8, (0, 6, 16))),
    "AW size wider than the bus": ([AW(0x0, 0, size=4)], ("AW_SIZE", 0, (0, 0, 16))),
}


@cocotb.test()
async def test_checker_unit(dut):
    """axi_checker alone (toplevel), both sides driven by hand: legal and illegal cases."""
    start_bench_clock(dut.clk)
    checker = ProtocolChecker(dut, fail=False)
    for title, (cycles, expect) in CHECKER_SCENARIOS.items():
        dut.rst.value = 1
        for name in CHK_INPUTS:
            getattr(dut, "axi_" + name).value = 0
        await ClockCycles(dut.clk, 2)
        dut.rst.value = 0
        for c in cycles:
            sig = {"awready": 1, "wready": 1, "bready": 1, "arready": 1, "rready": 1, **c}
            for name in CHK_INPUTS:
                getattr(dut, "axi_" + name).value = sig.get(name, 0)
            await RisingEdge(dut.clk)
        for name in CHK_INPUTS:
            getattr(dut, "axi_" + name).value = 0
        await ClockCycles(dut.clk, 2)
        v = checker.read()
        if expect is None:
            assert v is None, f"{title}: false alarm: {v}"
        else:
            name, addr, info = expect
            assert v is not None, f"{title}: checker missed {name}"
            assert (v.name, v.addr, v.info) == (name, addr, info), f"{title}: expected {expect}, got {v.name}: {v}"
        dut._log.info("%s: %s", title, v or "no violation")
