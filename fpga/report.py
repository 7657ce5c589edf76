"""build/fpga.json, its table, and the figures that need both `make fpga` and `make bench`.

Time is cycles ÷ clock: `cp_submit_to_irq_ns` = bench cycles (32-bit top) ÷ Fmax of the
32-bit top; `dma_copy_mb_s_32b` = bench efficiency (32-bit) × 4 bytes × that Fmax.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from testbench.pipes import write_whole
from testbench.sim import BUILD

from .flow import placer_args

FPGA_JSON = BUILD / "fpga.json"
BENCH_JSON = BUILD / "bench.json"

# goals of issue 14 (32-bit data, ECP5-25F, median of 3 seeds)
GOALS = {
    ("top_32", "fmax_mhz"): (">= 100", lambda v: v >= 100),
    ("top_32", "lut4"): ("<= 6000", lambda v: v <= 6000),
    ("dma_32", "fmax_mhz"): (">= 100", lambda v: v >= 100),
    ("dma_32", "lut4"): ("<= 1000", lambda v: v <= 1000),
}
DERIVED_GOALS = {
    "cp_submit_to_irq_ns": ("<= 400", lambda v: v <= 400),
    "dma_copy_mb_s_32b": (">= 380", lambda v: v >= 380),
}


def load(path) -> dict:
    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else {}


def load_other(path) -> dict:
    """The other flow's report (build/bench.json for `make fpga`, build/fpga.json for `make
    bench`), read at the end of a long run for the figures that need both: one that cannot be
    read (cut short, edited by hand) gives none of them and a line saying why, not a
    traceback that loses the run's own results."""
    p = Path(path)
    try:
        data = load(p)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        print(f"warning: {p} cannot be read ({type(e).__name__}: {e}): no figures from it", file=sys.stderr)
        return {}
    if not isinstance(data, dict):
        print(f"warning: {p} is not a JSON object: no figures from it", file=sys.stderr)
        return {}
    return data


def merge(path, results: dict) -> dict:
    """Add `results` (block name → record) to the JSON at `path`, keeping other blocks."""
    p = Path(path)
    data = load(p)
    data.update(results)
    # every derived figure from this pair of reports, or none: a figure an earlier merge
    # worked out from another Fmax (or another bench run) must not stay behind
    for k in DERIVED_GOALS:
        data.pop(k, None)
    data.pop("cp_plus_sdma_mb_s", None)
    data.update(derived(data, load_other(BENCH_JSON)))
    p.parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all: a ^C (or a full disk) mid-write left half a report, which the next
    # run refuses to write over (not a JSON object), so every block's record was lost with it
    write_whole(p, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def _record(data: dict, name: str) -> dict:
    """A block's record in a report, or {} where there is none, or something else stands there
    (a report edited by hand, or by another tool): what is not a record gives no figures."""
    v = data.get(name)
    return v if isinstance(v, dict) else {}


def _number(v) -> float | int | None:
    """A figure that is a number (not a bool, a string, NaN or infinite), else None."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) != float("inf")
    return v if ok else None


def derived(fpga: dict, bench: dict) -> dict:
    """Nanoseconds and MB/s at the 32-bit top's Fmax, from the bench's 32-bit cycle figures.
    A figure that is not a number in either report (one edited by hand, `"top_32": null`) gives
    none of those it enters: it was a traceback at the end of `make fpga` or `make bench`,
    which lost the run's own results with it."""
    out = {}
    fmax = _number(_record(fpga, "top_32").get("fmax_mhz"))
    if not fmax:
        return out
    cycles = _number(bench.get("cp_submit_to_irq_cycles_32b"))
    if cycles is not None:
        out["cp_submit_to_irq_ns"] = round(cycles * 1000 / fmax, 1)
    eff = _number(bench.get("dma_copy_eff_4k_32b"))
    if eff is not None:
        out["dma_copy_mb_s_32b"] = round(eff * 4 * fmax, 1)
    both = _number(bench.get("cp_plus_sdma_bytes_per_cycle_32b"))
    if both is not None:  # the CP's DMA_DATA and the SDMA's COPY_LINEAR at once
        out["cp_plus_sdma_mb_s"] = round(both * fmax, 1)
    return out


def _cols(rows: list[tuple]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def _failing(v: dict) -> str:
    """The failing-endpoint count of a record: exact from the detailed report, else `~`."""
    if "failing_endpoints" not in v:
        return ""
    return f"{v['failing_endpoints']:,}" if v.get("failing_exact") else f"~{v['failing_endpoints']:,}"


def table(data: dict) -> str:
    rows = [("block", "LUT4", "FF", "CCU2C", "BRAM", "LUTRAM", "comb", "Fmax MHz", "seeds", "failing", "critical path")]
    for name in sorted(k for k, v in data.items() if isinstance(v, dict) and "lut4" in v):
        v = data[name]
        seeds = "/".join(f"{x:.0f}" for x in v.get("fmax_seeds_mhz", {}).values())
        cp = v.get("critical_path")
        path = f"{cp['from']} -> {cp['to']} ({cp['ns']} ns)" if cp else ""
        if v.get("does_not_fit"):
            path = f"does not fit the ECP5-25F: {v['does_not_fit']}"
        rows.append((name, v["lut4"], v.get("ff", ""), v.get("ccu2c", ""), v.get("bram", ""), v.get("lutram", ""),
                     v.get("comb_cells", ""),
                     v.get("fmax_mhz", "-" if v.get("does_not_fit") else ""), seeds,
                     _failing(v), path))
    text = [_cols(rows)]
    # where the median run's failing endpoints are, for the blocks the detailed report covers
    for name in sorted(k for k, v in data.items() if isinstance(v, dict) and v.get("failing_by_block")):
        v = data[name]
        where = ", ".join(f"{b} {n:,}" for b, n in v["failing_by_block"].items())
        text += ["", f"{name}: {v['failing_endpoints']:,} endpoints miss the target, by where they end: {where}"]
        regs = [(r["name"], r["bits"], r["worst_ns"]) for r in v.get("failing_registers", ())]
        if regs:
            text.append(_cols([("  register", "bits", "worst ns")] + [(f"  {n}", b, w) for n, b, w in regs]))
    # build/fpga.json merges runs: a record placed with other nextpnr settings than the
    # flow's (a --pnr-args run, or one from before the flow set its own) is not comparable
    # with the rest as it stands, so the table says which
    flows = " ".join(placer_args())
    other = [(name, v.get("pnr_args")) for name, v in sorted(data.items())
             if isinstance(v, dict) and "fmax_mhz" in v and v.get("pnr_args") != flows]
    if other:
        text += ["", f"placed with other nextpnr settings than the flow's ({flows}):"]
        text += [f"  {name}: {args}" if args else f"  {name}: nextpnr's own (placed before the flow set {flows})"
                 for name, args in other]
    for name in sorted(k for k, v in data.items() if isinstance(v, dict) and v.get("parts")):
        parts = data[name]["parts"]
        rows = [(f"{name} by submodule (hierarchy kept)", "LUT4", "FF", "CCU2C", "BRAM", "LUTRAM")]
        for mod in sorted(parts):
            p = parts[mod]
            rows.append((mod, p["lut4"], p["ff"], p["ccu2c"], p["bram"], p["lutram"]))
        text += ["", _cols(rows)]
    goals = [("goal (32-bit, ECP5-25F)", "value", "target", "")]
    for (blk, key), (target, ok) in GOALS.items():
        v = _number(_record(data, blk).get(key))
        if v is None and _record(data, blk).get("does_not_fit"):
            goals.append((f"{blk}.{key}", "does not fit", target, "MISSED"))
            continue
        goals.append((f"{blk}.{key}", "not measured" if v is None else v, target,
                      "" if v is None else ("met" if ok(v) else "MISSED")))
    for key, (target, ok) in DERIVED_GOALS.items():
        v = _number(data.get(key))
        goals.append((key, "needs make bench" if v is None else v, target,
                      "" if v is None else ("met" if ok(v) else "MISSED")))
    text += ["", _cols(goals)]
    return "\n".join(text)
