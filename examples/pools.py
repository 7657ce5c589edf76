"""What the UMD's buffer pools are worth: 10,000 small allocations with the pools on
(Mesa's pb_cache and pb_slab: umd/winsys/pool.py) and off (every buffer a BO of its own).

The workload is an app's temporary buffers: ALLOCS buffers of 64 B .. 4 KiB, each written
by the GPU once (WRITE_DATA, batched 64 to a submission), at most LIVE of them alive at a
time (the oldest is freed when a new one would pass that). Both runs do the same thing
on the same device; what differs is counted:

- ioctls the UMD made (GEM_CREATE, GEM_VA, GEM_MMAP, GEM_CLOSE, CS ...),
- GPU cycles from the first command to the last fence (the TLB flushes of every GEM_CLOSE
  and the ioctls' MMIO are paid in cycles on the RTL),
- memory the kernel gave the device's BOs (VRAM + GTT used, at the end, LIVE buffers
  alive) and the VA range in use, and the pools' hit, miss and waste counters.

    gpucosim run examples/pools.py --sim model -- --plot build/pools.png
    gpucosim run examples/pools.py --sim verilator -- --allocs 2000
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass

import gpucosim
from gpucosim.trace.plot import picture_file_problem
import kmd_model
import umd
from testbench.argtypes import OneLineParser, integer_in

SIZES = (64, 100, 256, 640, 1000, 2048, 4096)


@dataclass
class Run:
    pools: bool
    allocs: int
    ioctls: int
    cycles: int
    mem_bytes: int  # VRAM + GTT the kernel gave out for this device's buffers (end of run)
    va_bytes: int
    stats: object


MAX_ALLOCS = 1_000_000  # (about 20 minutes on the model; a typo's extra zeros ran for days)


class TooMany(Exception):
    """--live buffers alive at once do not fit in the device's memory."""


def run(pools: bool, allocs: int, live: int, seed: int) -> Run:
    kmd = kmd_model.bound()
    base = kmd.bo.heaps
    before = sum(h.used for h in base.values())
    with umd.open(api_version=2, pools=pools) as gpu:  # (closed on the way out of an error too)
        return _run(gpu, pools, allocs, live, seed, before)


def _run(gpu: umd.Device, pools: bool, allocs: int, live: int, seed: int, before: int) -> Run:
    q = gpu.queue()
    q.finish()
    rng = random.Random(seed)
    t0 = gpu.counters().hw["timestamp"]
    n0 = gpu.ws.ioctls
    window = []
    for i in range(allocs):
        if len(window) == live:
            window.pop(0)[0].free()
        try:
            b = gpu.alloc(rng.choice(SIZES), rng.choice(("gtt", "vram")))
        except umd.OutOfMemory as e:  # (the window the app asked for, not a failure of the pools)
            raise TooMany(f"with the pools {'on' if pools else 'off'} the device's memory ran out with {len(window)} "
                          f"alive ({e})") from None
        q.write(b, 0, i + 1)
        window.append((b, i + 1))
        if i % 500 == 0:
            gpucosim.progress(i, allocs, f"pools {'on' if pools else 'off'}")
    q.finish()
    ioctls = gpu.ws.ioctls - n0
    cycles = gpu.counters().hw["timestamp"] - t0
    bad = [v for b, v in window if int(b.u32[0]) != v]
    if bad:
        raise RuntimeError(f"pools {'on' if pools else 'off'}: {len(bad)} buffers do not hold what the GPU wrote")
    m = gpu.memory()
    mem = m.vram.used + m.gtt.used - before
    return Run(pools, allocs, ioctls, cycles, mem, m.va.used, m.pools)


def table(runs: list[Run]) -> str:
    lines = [f"{'pools':>5} {'allocs':>7} {'ioctls':>8} {'per alloc':>9} {'GPU cycles':>11} {'memory':>10} "
             f"{'VA in use':>10}  pools"]
    for r in runs:
        s = r.stats
        note = (f"cache {s.cache_hits} hits / {s.cache_misses} misses, {s.slab_allocs} slab entries in "
                f"{s.slabs} slabs, {s.waste_bytes // 1024} KiB rounding waste") if r.pools else \
            f"{s.bos_created} BOs made, {s.bos_released} closed"
        lines.append(f"{'on' if r.pools else 'off':>5} {r.allocs:7d} {r.ioctls:8d} {r.ioctls / r.allocs:9.3f} "
                     f"{r.cycles:11d} {r.mem_bytes // 1024:8d} K {r.va_bytes // 1024:8d} K  {note}")
    return "\n".join(lines)


def plot(runs: list[Run], path: str, backend: str) -> None:
    from gpucosim.trace.plot import pyplot

    plt = pyplot()

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
    labels = ["pools on" if r.pools else "pools off" for r in runs]
    colors = ["C0" if r.pools else "C3" for r in runs]
    for ax, (title, values, log) in zip(axes, (
            ("ioctls", [r.ioctls for r in runs], True),
            ("GPU cycles, first command to last fence", [r.cycles for r in runs], False),
            ("KiB the kernel gave the buffers", [r.mem_bytes / 1024 for r in runs], False))):
        ax.bar(labels, values, color=colors)
        for i, v in enumerate(values):
            ax.text(i, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
        ax.set_title(title, fontsize=10)
        if log:
            ax.set_yscale("log")
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{runs[0].allocs:,} small allocations (64 B - 4 KiB) on {backend}, written by the GPU, "
                 "at most a window of them alive", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _check_plot(ap: argparse.ArgumentParser, path: str) -> None:
    """A picture matplotlib can write there, in a folder that exists: refused before the run."""
    if problem := picture_file_problem(path):
        ap.error(f"--plot {problem}")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="pools", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--allocs", type=integer_in(1, MAX_ALLOCS), default=10_000,
                    help=f"allocations per run (default 10,000, at most {MAX_ALLOCS:,})")
    ap.add_argument("--live", type=integer_in(1), default=256,
                    help="buffers alive at most (default 256; as many as the device's memory holds)")
    ap.add_argument("--seed", type=integer_in(0), default=1, help="the allocation sizes' random seed, at least 0 "
                    "(default 1)")
    ap.add_argument("--plot", metavar="PNG", help="draw the comparison (needs matplotlib)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if args.plot:
        _check_plot(ap, args.plot)
    backend = kmd_model.bound().name
    try:
        runs = [run(True, args.allocs, args.live, args.seed), run(False, args.allocs, args.live, args.seed)]
    except TooMany as e:
        ap.error(f"--live {args.live}: that many buffers alive at once do not fit: {e}; give a smaller --live")
    gpucosim.progress(1, 1, "done")
    print(f"pools on {backend}: {args.allocs} allocations, at most {args.live} alive")
    print(table(runs))
    on, off = runs
    print(f"pools: {off.ioctls / max(on.ioctls, 1):.0f}x fewer ioctls, {off.cycles / max(on.cycles, 1):.1f}x fewer "
          f"GPU cycles, {on.mem_bytes / max(off.mem_bytes, 1):.2f}x the memory")
    if args.plot:
        plot(runs, args.plot, backend)
        print(f"pools: plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    sys.exit(main())
