"""Functional coverage: opcode x field class x error class.

A bin is (error class, opcode, field class): "" is the error class of valid streams,
"raw" that of raw dword streams (whose field class is the model's outcome), "*" the
opcode of per-class level bins (where the faulty packet sat). The plan (`planned`) is
derived from the same tables the generators draw from, so a hole is a bin the
generators can hit but did not in this run; bins that need a DMA engine are listed as
skipped while the device reports CAPS.DMA = 0.
"""

from __future__ import annotations

from collections import Counter

from .streams.gen import Caps, dma_bins, valid_bins
from .streams.malformed import ERROR_CLASSES, class_bins
from .streams.raw import RAW_OUTCOMES

Bin = tuple[str, str, str]


def planned(caps: Caps) -> tuple[set[Bin], dict[str, list[Bin]]]:
    """(bins a campaign on this device should hit, skipped bins by reason)."""
    plan = {("", op, fc) for op, fc in valid_bins(caps)}
    plan |= {("raw", "RAW", o) for o in RAW_OUTCOMES}
    skipped: dict[str, list[Bin]] = {}
    why = "the device reports CAPS.DMA = 0"
    if not caps.dma:
        skipped[why] = sorted(("", op, fc) for op, fc in dma_bins(caps))
    for name, ec in ERROR_CLASSES.items():
        bins = {(name, op, fc) for op, fc in class_bins(name, caps)}
        if ec.needs_dma and not caps.dma:
            skipped[why] += sorted(bins)
        else:
            plan |= bins
    return plan, skipped


def _name(b: Bin) -> str:
    return f"{b[1]}.{b[2]}"


def report(hits: Counter, caps: Caps) -> tuple[dict, str]:
    """(JSON-able summary, text to print) of the bins hit against the plan."""
    plan, skipped = planned(caps)
    hit = {b for b, n in hits.items() if n}
    holes = sorted(plan - hit)
    extra = sorted(hit - plan)
    groups = ["", *ERROR_CLASSES, "raw"]
    lines = [f"functional coverage (opcode x field class x error class): {len(plan & hit)}/{len(plan)} bins hit"]
    per = {}
    for g in groups:
        mine = {b for b in plan if b[0] == g}
        if not mine:
            continue
        got = mine & hit
        gh = sorted(mine - hit)
        label = {"": "valid streams", "raw": "raw dword streams"}.get(g, g)
        per[label] = {"bins": len(mine), "hit": len(got), "holes": [_name(b) for b in gh]}
        hole_text = f"  holes: {', '.join(_name(b) for b in gh)}" if gh else ""
        lines.append(f"  {label:<22} {len(got):>3}/{len(mine):<3}{hole_text}")
    for why, bins in skipped.items():
        classes = sorted({b[0] for b in bins if b[0]})
        valid = [b for b in bins if not b[0]]
        parts = []
        if valid:
            parts.append(f"{len(valid)} DMA_DATA field classes of valid streams")
        if classes:
            parts.append("error class " + ", ".join(classes))
        lines.append(f"  skipped ({why}): {'; '.join(parts)}")
    if extra:
        lines.append("  also hit: " + ", ".join(f"{b[0] or 'valid'}:{_name(b)}" for b in extra[:20])
                     + (" ..." if len(extra) > 20 else ""))
    summary = {"bins": len(plan), "hit": len(plan & hit), "holes": [f"{b[0] or 'valid'}:{_name(b)}" for b in holes],
               "groups": per, "skipped": {w: [f"{b[0] or 'valid'}:{_name(b)}" for b in bs] for w, bs in skipped.items()},
               "hits": {f"{b[0] or 'valid'}:{_name(b)}": n for b, n in sorted(hits.items())}}
    return summary, "\n".join(lines)
