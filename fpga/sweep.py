"""`make sweep`: the DMA engine's design space — bus width × reads in flight × data FIFO
depth — as copy throughput (MB/s at each point's own Fmax) against LUT4; and the CP's
fetch-ahead depth, as parsing throughput (Mdwords/s at the CP's Fmax) against LUT4.

For each point: synthesis and place and route of the engine alone (fpga/flow.py, one
seed: the sweep compares points, the goals use the median of three), and a cocotb run of
back-to-back 4 KiB copies on Verilator (tests/rtl/cocotb_dma.py test_sweep_point) at 0 and
at SWEEP_LATENCY cycles of read latency. Throughput = bus efficiency × bus bytes × Fmax.
The CP points: the CP alone through the same flow, and a Verilator run of the 32-bit top
built with that fetch depth parsing a 4,096-dword IB of NOPs at CP_LATENCY cycles of read
latency (testbench/bench/cocotb_bench.py cp_fetch_stream): dwords per busy cycle × Fmax.
Writes build/sweep.json, build/sweep.txt (the tables) and build/sweep.png (the Pareto
front — no other point is both smaller and faster — drawn as steps).

    python -m fpga.sweep [--jobs 2] [--latency 32] [--points w32:r8:f128,...]
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from rtl.cp import CommandProcessor
from testbench import sim
from testbench.argtypes import OneLineParser, int_at_least, integer_in
from testbench.pipes import pipe_safe, write_whole
from testbench.sim.design import gpu_design
from testbench.sim.dma_design import dma_design

from .blocks import block
from .flow import FlowError
from .run import run_block

OUT = sim.BUILD / "sweep"


@dataclass(frozen=True)
class Point:
    width: int
    max_reads: int
    fifo_depth: int

    @property
    def name(self) -> str:
        return f"w{self.width}:r{self.max_reads}:f{self.fifo_depth}"

    @property
    def dma_kwargs(self) -> dict:
        return {"max_reads": self.max_reads, "fifo_depth": self.fifo_depth}


# Chosen to fit in 30 minutes on 2 cores: every width at the default (8 reads, 128 beats),
# and at 32 bits the reads in flight and the FIFO depth that bound latency hiding.
DEFAULT_POINTS = (
    Point(32, 8, 128), Point(64, 8, 128), Point(128, 8, 128), Point(256, 8, 128),
    Point(32, 1, 64), Point(32, 2, 64), Point(32, 4, 64), Point(32, 8, 64), Point(32, 8, 256),
)


CP_DEPTHS = (2, 4, 8, 16)
CP_LATENCY = 16


def measure_cp(depth: int, width: int = 32, log=print) -> dict:
    b = block("cp", width, fetch_depth=depth)
    fig = run_block(b, (1,), jobs=1, log=log)
    out = OUT / f"cp-fd{depth}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    res = sim.run(gpu_design(width, depth), "verilator", "testbench.bench.cocotb_bench", ["cp_fetch_stream"],
                  tag="sweep-cp", extra_env={"GPUCOSIM_BENCH_OUT": str(out), "CP_STREAM_LATENCY": str(CP_LATENCY)})
    if not res.ok or not out.exists():
        raise FlowError(f"cp fetch_depth {depth}: bench run (Verilator) failed:\n{res.explain()}")
    rate = json.loads(out.read_text())[f"cp_stream_dwords_per_cycle_lat{CP_LATENCY}"]
    return {"point": f"cp:fd{depth}", "fetch_depth": depth, "lut4": fig["lut4"], "ff": fig["ff"],
            "lutram": fig["lutram"], "fmax_mhz": fig["fmax_mhz"], "dwords_per_cycle": round(rate, 4),
            "mdwords_s": round(rate * fig["fmax_mhz"], 1)}


def cp_table(rows: list[dict]) -> str:
    head = ("CP point", "LUT4", "FF", "LUTRAM", "Fmax MHz", f"dwords/cycle lat{CP_LATENCY}", "Mdwords/s")
    body = [(r["point"], r["lut4"], r["ff"], r["lutram"], r["fmax_mhz"], r["dwords_per_cycle"], r["mdwords_s"])
            for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *body])


def parse_point(text: str) -> Point:
    try:
        w, r, f = text.split(":")
        assert w[0] == "w" and r[0] == "r" and f[0] == "f"
        return Point(int(w[1:]), int(r[1:]), int(f[1:]))
    except (ValueError, AssertionError, IndexError):
        raise ValueError(f"point {text!r}: expected wWIDTH:rREADS:fFIFO, e.g. w32:r8:f128") from None


def efficiency(p: Point, latency: int) -> float:
    out = OUT / f"{p.name.replace(':', '-')}-lat{latency}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    res = sim.run(dma_design(p.width, **p.dma_kwargs), "verilator", "tests.rtl.cocotb_dma", ["test_sweep_point"],
                  tag=f"sweep-lat{latency}", extra_env={"GPUCOSIM_BENCH_OUT": str(out), "SWEEP_LATENCY": str(latency)})
    if not res.ok or not out.exists():
        raise FlowError(f"dma {p.name}: bench run (Verilator, latency {latency}) failed:\n{res.explain()}")
    return json.loads(out.read_text())["copy_4k_eff"]


def measure(p: Point, latency: int, log=print) -> dict:
    b = block("dma", p.width, **p.dma_kwargs)
    fig = run_block(b, (1,), jobs=1, log=log)
    eff0 = efficiency(p, 0)
    effl = efficiency(p, latency)
    bpb = p.width // 8
    return {"point": p.name, "width": p.width, "max_reads": p.max_reads, "fifo_depth": p.fifo_depth,
            "lut4": fig["lut4"], "ff": fig["ff"], "lutram": fig["lutram"], "bram": fig["bram"],
            "comb_cells": fig.get("comb_cells"), "fmax_mhz": fig["fmax_mhz"],
            "eff_lat0": round(eff0, 4), f"eff_lat{latency}": round(effl, 4),
            "mb_s_lat0": round(eff0 * bpb * fig["fmax_mhz"], 1),
            f"mb_s_lat{latency}": round(effl * bpb * fig["fmax_mhz"], 1)}


def pareto(rows: list[dict], key: str) -> list[dict]:
    """Points no other point beats on both LUT4 (fewer) and throughput (more)."""
    front = []
    for r in sorted(rows, key=lambda r: (r["lut4"], -r[key])):
        if not front or r[key] > front[-1][key]:
            front.append(r)
    return front


def table(rows: list[dict], latency: int) -> str:
    key = f"mb_s_lat{latency}"
    front = {r["point"] for r in pareto(rows, key)}
    head = ("point", "LUT4", "FF", "LUTRAM", "BRAM", "Fmax MHz", "eff lat0", f"eff lat{latency}",
            "MB/s lat0", f"MB/s lat{latency}", "Pareto")
    body = [(r["point"], r["lut4"], r["ff"], r["lutram"], r["bram"], r["fmax_mhz"], r["eff_lat0"],
             r[f"eff_lat{latency}"], r["mb_s_lat0"], r[key], "*" if r["point"] in front else "")
            for r in sorted(rows, key=lambda r: r["lut4"])]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head, *body])


def plot(rows: list[dict], latency: int, path: Path, cp_rows: list[dict] = ()) -> None:
    from gpucosim.trace.plot import pyplot

    plt = pyplot()  # (Agg, whatever $MPLBACKEND says: a value matplotlib does not know was its traceback)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [3, 2]})
    for lat, marker in ((0, "o"), (latency, "s")):
        key = f"mb_s_lat{lat}"
        ax.scatter([r["lut4"] for r in rows], [r[key] for r in rows], marker=marker,
                   label=f"read latency {lat} cycles")
        front = pareto(rows, key)
        ax.step([r["lut4"] for r in front], [r[key] for r in front], where="post", alpha=0.6)
    for r in rows:
        ax.annotate(r["point"], (r["lut4"], r[f"mb_s_lat{latency}"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("LUT4 (ECP5-25F, synth_ecp5)")
    ax.set_ylabel("copy throughput, MB/s at the point's Fmax")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_title("DMA engine: 4 KiB copies back to back (Pareto fronts as steps)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    if cp_rows:
        bx.scatter([r["lut4"] for r in cp_rows], [r["mdwords_s"] for r in cp_rows])
        front = pareto(cp_rows, "mdwords_s")
        bx.step([r["lut4"] for r in front], [r["mdwords_s"] for r in front], where="post", alpha=0.6)
        for r in cp_rows:
            bx.annotate(f"fetch_depth {r['fetch_depth']}", (r["lut4"], r["mdwords_s"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
        bx.set_xlabel("LUT4 of the CP (32-bit)")
        bx.set_ylabel(f"parsing, Mdwords/s at the CP's Fmax (read latency {CP_LATENCY})")
        bx.set_title("CP fetch-ahead depth")
        bx.grid(True, alpha=0.3)
    else:
        bx.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m fpga.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--points", help="comma-separated wWIDTH:rREADS:fFIFO (default: the built-in set)")
    # (above 65535, the memory model's cfg_rd_latency refused it in each point's bench run,
    # after the point's synthesis and place and route)
    ap.add_argument("--latency", type=integer_in(2, 0xFFFF), default=32,
                    help="the second read latency, in cycles (default 32; the memory model takes 2 to 65535)")
    ap.add_argument("--jobs", type=int_at_least(1), default=2, help="points measured at once")
    ap.add_argument("--cp-depths", default=",".join(map(str, CP_DEPTHS)),
                    help="the CP's fetch depths to measure, comma-separated, or none")
    args = ap.parse_args(argv)
    if args.points is not None and not args.points.strip(", "):  # (it ran the whole built-in set)
        ap.error("--points: name at least one point (wWIDTH:rREADS:fFIFO), or leave --points out for the built-in set")
    try:
        points = [parse_point(t) for t in args.points.split(",")] if args.points else list(DEFAULT_POINTS)
        for p in points:  # parameter errors now, not after minutes
            block("dma", p.width, **p.dma_kwargs).make()._MustUse__used = True  # (built only to check)
    except ValueError as e:
        ap.error(str(e))
    twice = [p.name for i, p in enumerate(points) if p in points[:i]]
    if twice:  # (measured twice, and drawn twice on the picture)
        ap.error(f"--points: {twice[0]} is given twice")
    try:
        cp_depths = [] if args.cp_depths == "none" else [int(x) for x in args.cp_depths.split(",") if x]
    except ValueError:
        ap.error(f"--cp-depths: comma-separated integers or none, not {args.cp_depths!r}")
    try:
        for d in cp_depths:  # (built only to check the parameter)
            CommandProcessor(None, 32, fetch_depth=d)._MustUse__used = True
    except ValueError as e:
        ap.error(f"--cp-depths: {e}")
    twice = [d for i, d in enumerate(cp_depths) if d in cp_depths[:i]]
    if twice:
        ap.error(f"--cp-depths: {twice[0]} is given twice")
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as ex:
            rows = ex.map(lambda p: measure(p, args.latency), points)
            cp_rows = ex.map(measure_cp, cp_depths)
            rows, cp_rows = list(rows), list(cp_rows)
    except FlowError as e:
        print(f"make sweep: {e}", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    write_whole(sim.BUILD / "sweep.json", json.dumps({"dma": rows, "cp": cp_rows}, indent=1) + "\n")
    text = table(rows, args.latency) + ("\n\n" + cp_table(cp_rows) if cp_rows else "")
    write_whole(sim.BUILD / "sweep.txt", text + "\n")
    plot(rows, args.latency, sim.BUILD / "sweep.png", cp_rows)
    print(text)
    print(f"\n{len(rows) + len(cp_rows)} points in {time.monotonic() - t0:.0f} s; written to build/sweep.json, "
          f"build/sweep.txt and build/sweep.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
