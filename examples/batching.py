"""The batching experiment: how the UMD's flush threshold and the IB alignment change the
number of ioctls, doorbells and ring dwords per command, and the throughput.

The same workload runs for every configuration: COMMANDS small writes (one WRITE_DATA
each) and a fence at the end. The flush threshold is the queue's (`gpu.queue(
flush_threshold=T)`: a CS ioctl every T commands); the IB alignment is the KMD's
`ib_align_dw` parameter (the ring and every IB are padded with NOPs to a multiple of it),
so the driver is reloaded for each alignment (`kmd_model.rebind`). Counts come from the
KMD's statistics, time from the GPU clock (cycles from the first command to the fence).

    gpucosim run examples/batching.py --sim verilator -- --plot build/batching.png
    gpucosim run examples/batching.py --sim model -- --commands 64

It prints one table row per configuration and draws the plot with matplotlib.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import gpucosim
from gpucosim.trace.plot import picture_file_problem
import kmd_model
import umd
from umd.winsys import Winsys
from testbench.argtypes import OneLineParser, integer_in, parse_int

THRESHOLDS = (1, 2, 4, 8, 16, 32, 64, 128)
ALIGNS = (1, 8, 64)


@dataclass
class Row:
    align: int
    threshold: int
    commands: int
    ioctls: int
    cs: int
    doorbells: int
    ring_dw: int
    fetched_dw: int
    cycles: int

    @property
    def per_kcycle(self) -> float:
        return 1000 * self.commands / self.cycles if self.cycles else float("nan")


def measure(align: int, threshold: int, commands: int) -> Row:
    kmd = kmd_model.bound()
    if kmd.params.ib_align_dw != align:
        kmd_model.rebind(ib_align_dw=align)
    # what it prints counts the whole device: a file with CAP_PERFMON (docs/architecture.md, "Side channels")
    gpu = umd.open(api_version=2, winsys=Winsys(kmd_model.open_render_node(cap_perfmon=True)))
    buf = gpu.alloc(4 * commands, "vram")
    q = gpu.queue(flush_threshold=threshold)
    q.finish()  # nothing yet: the context exists, the IB pool is empty
    c0 = gpu.counters()
    ws0 = gpu.ws.ioctls
    for i in range(commands):
        q.write(buf, 4 * i, i + 1)
    ev = q.signal()
    ev.wait()
    ws1 = gpu.ws.ioctls
    c1 = gpu.counters()
    ok = buf.u32[:commands].tolist() == list(range(1, commands + 1))
    gpu.close()
    if not ok:
        raise RuntimeError(f"align {align}, threshold {threshold}: the writes did not land")
    k0, k1 = c0.kmd, c1.kmd
    # (both COUNTERS queries fall outside [ws0, ws1): the difference is the workload's alone)
    return Row(align, threshold, commands, ws1 - ws0,
               k1["cs"] - k0["cs"], k1["doorbells"] - k0["doorbells"], k1["ring_dwords"] - k0["ring_dwords"],
               c1.hw["dwords_fetched"] - c0.hw["dwords_fetched"], c1.hw["timestamp"] - c0.hw["timestamp"])


def table(rows: list[Row]) -> str:
    lines = [f"{'align':>5} {'flush@':>6} {'ioctls/cmd':>10} {'doorbells/cmd':>13} {'ring dw/cmd':>11} "
             f"{'fetched dw/cmd':>14} {'cycles':>8} {'cmds/kcycle':>11}"]
    for r in rows:
        n = r.commands
        lines.append(f"{r.align:5d} {r.threshold:6d} {r.ioctls / n:10.3f} {r.doorbells / n:13.3f} "
                     f"{r.ring_dw / n:11.2f} {r.fetched_dw / n:14.2f} {r.cycles:8d} {r.per_kcycle:11.2f}")
    return "\n".join(lines)


def plot(rows: list[Row], path: str, backend: str) -> None:
    from gpucosim.trace.plot import pyplot

    plt = pyplot()

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(14, 4.2))
    for i, align in enumerate(sorted({r.align for r in rows})):
        rs = [r for r in rows if r.align == align]
        x = [r.threshold for r in rs]
        col = f"C{i}"
        a.plot(x, [r.ioctls / r.commands for r in rs], "o-", color=col, label=f"ioctls, align {align}")
        a.plot(x, [r.doorbells / r.commands for r in rs], "s--", color=col, label=f"doorbells, align {align}")
        b.plot(x, [r.fetched_dw / r.commands for r in rs], "o-", color=col, label=f"align {align}")
        c.plot(x, [r.per_kcycle for r in rs], "o-", color=col, label=f"align {align}")
    for ax, title, ylabel in ((a, "driver calls per command", "per command"),
                              (b, "dwords the CP fetched per command", "dwords"),
                              (c, "throughput", "commands per 1000 cycles")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("flush threshold (commands per submission)")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    a.set_yscale("log")
    fig.suptitle(f"batching on {backend}: {rows[0].commands} one-dword writes per configuration", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _ints(ap: argparse.ArgumentParser, name: str, text: str) -> list[int]:
    """A comma list of integers >= 1, or a usage error naming the option."""
    try:
        values = [parse_int(x) for x in text.split(",")]
    except ValueError:
        ap.error(f"{name}: a comma list of integers, not {text!r}")
    if bad := [v for v in values if v < 1]:
        ap.error(f"{name}: each must be at least 1, not {bad[0]}")
    return values


def _check_plot(ap: argparse.ArgumentParser, path: str) -> None:
    """A picture matplotlib can write there, in a folder that exists: refused before the run."""
    if problem := picture_file_problem(path):
        ap.error(f"--plot {problem}")


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="batching", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--commands", type=integer_in(1, 65536), default=256,
                    help="writes per configuration (default 256, 1-65536)")
    ap.add_argument("--thresholds", default=",".join(map(str, THRESHOLDS)), help="flush thresholds, comma list")
    ap.add_argument("--aligns", default=",".join(map(str, ALIGNS)), help="IB alignments in dwords, comma list")
    ap.add_argument("--plot", metavar="PNG", help="draw the results (needs matplotlib)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    # (checked before anything runs: a bad value used to end a whole run in a traceback)
    thresholds, aligns = _ints(ap, "--thresholds", args.thresholds), _ints(ap, "--aligns", args.aligns)
    if bad := [a for a in aligns if a > 256 or a & (a - 1)]:
        ap.error(f"--aligns: an IB alignment is a power of two in 1..256 dwords, not {bad[0]}")
    if args.plot:
        _check_plot(ap, args.plot)
    backend = kmd_model.bound().name
    params = kmd_model.bound().params
    saved_align = params.ib_align_dw
    configs = [(a, t) for a in aligns for t in thresholds]
    rows = []
    for i, (a, t) in enumerate(configs):
        gpucosim.progress(i, len(configs), f"align {a}, flush every {t}")
        rows.append(measure(a, t, args.commands))
    gpucosim.progress(len(configs), len(configs), "done")
    if kmd_model.bound().params.ib_align_dw != saved_align:
        kmd_model.rebind(ib_align_dw=saved_align)
    print(f"batching on {backend}: {args.commands} command{'s' * (args.commands != 1)} per configuration")
    print(table(rows))
    worst = max(rows, key=lambda r: r.ioctls)
    best = min(rows, key=lambda r: r.ioctls)
    # ("1x fewer" where batching saved nothing: one threshold, or the same count)
    fewer = (f"{worst.ioctls / max(best.ioctls, 1):.0f}x fewer" if worst.ioctls >= 2 * max(best.ioctls, 1) else
             f"{worst.ioctls - best.ioctls} fewer" if worst.ioctls > best.ioctls else "no fewer")
    # "unbatched" is a flush per command; with --thresholds not starting at 1, the worst is
    # named by its own threshold
    worst_is = "unbatched" if worst.threshold == 1 else f"at flush threshold {worst.threshold}"
    print(f"ioctls per command: {worst.ioctls / worst.commands:.3f} {worst_is} -> {best.ioctls / best.commands:.3f} "
          f"at flush threshold {best.threshold} ({fewer}); doorbells "
          f"{worst.doorbells / worst.commands:.3f} -> {best.doorbells / best.commands:.3f}")
    if args.plot:
        plot(rows, args.plot, backend)
        print(f"batching: plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel())
    sys.exit(main())
