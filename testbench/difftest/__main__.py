"""python -m testbench.difftest: run a differential campaign, or replay one stream.

    python -m testbench.difftest --sim verilator --streams 2000 --jobs 2   # a campaign
    python -m testbench.difftest --sim verilator,icarus --streams 600      # split 4:1
    python -m testbench.difftest --sim verilator --seed 1234 --replay 17   # one stream, the whole story
    python -m testbench.difftest --sim verilator --seed 1234 --replay 17 --step   # observe after each ring packet
    python -m testbench.difftest --list 17                                 # the stream only, no simulator
    python -m testbench.difftest --sim model --streams 5000                # generator self-check, no simulator
    python -m testbench.difftest --sim verilator --streams-file cut.pkl    # hand-made Streams (pickled list)
    python -m testbench.difftest --sim model --streams-file cut.pkl        # the same on the model, twice
    python -m testbench.difftest --multi --sim verilator --streams-file m.pkl   # hand-made MultiStreams
    python -m testbench.difftest --multi --sim verilator --streams 500     # multi-queue streams (multi/)
    python -m testbench.difftest --multi --sim verilator --replay 17       # one of them, the whole story
    python -m testbench.difftest --sim verilator --streams 10000 --multi-streams 1000   # both families

A campaign prints a progress bar, the summary, every mismatch with its first differing
packet and replay command, and the coverage table; it writes build/difftest.json. The
exit code is 1 when any stream mismatched.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from ..argtypes import NOT_AN_INTEGER, OneLineParser, int_at_least, int_one_of, report_file_problem
from ..pipes import pipe_safe
from ..simnames import BACKENDS, given_twice, no_simulator, unknown_simulator
from .campaign import (Caps, Progress, Report, explain, make_stream, master_seed, model_caps, run_model,
                       run_model_pair)
from .compare import compare
from .simulator.runner import caps_of, run_rtl, split_sims
from .streams.file import StreamsFileError, load, unrunnable
from .streams.stream import LIST_WIDTH, wrapped  # noqa: F401 (LIST_WIDTH: --list's columns)


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m testbench.difftest", options_in_errors=True, description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default="verilator",
                    help="verilator, icarus, model (model vs model: a generator self-check), or a comma list")
    ap.add_argument("--seed", default=None, help="master seed (default $GPUCOSIM_SEED, else a fixed one)")
    ap.add_argument("--streams", type=int_at_least(0), default=500, help="number of streams in the campaign")
    ap.add_argument("--first", type=int_at_least(0), default=0, help="index of the first stream")
    ap.add_argument("--replay", type=int_at_least(0), default=None, metavar="INDEX", help="run one stream and tell all")
    ap.add_argument("--step", action="store_true", help="lockstep: observe after every ring packet")
    ap.add_argument("--list", type=int_at_least(0), default=None, metavar="INDEX", help="print one stream and exit")
    ap.add_argument("--jobs", type=int_at_least(1), default=1, help="simulator processes per simulator")
    ap.add_argument("--data-width", type=int_one_of((32, 64, 128, 256)), default=64, metavar="{32,64,128,256}")
    ap.add_argument("--no-dma", action="store_true", help="with --sim model / --list: a model without DMA engine")
    ap.add_argument("--json", default=None, help="report file (default build/difftest.json)")
    ap.add_argument("--streams-file", default=None, metavar="PICKLE",
                    help="run hand-made Streams (a pickled list) instead of generated ones, with the full story")
    ap.add_argument("--multi", action="store_true",
                    help="the multi-queue streams (both CP queues and the SDMA at once: testbench/difftest/multi/)")
    ap.add_argument("--multi-streams", type=int_at_least(0), default=0, metavar="M",
                    help="after a CP campaign, also M multi-queue streams from --first, in the same report")
    args = ap.parse_args(argv)
    one = args.replay is not None or args.list is not None or args.streams_file is not None
    if not one and args.streams == 0 and (args.multi or args.multi_streams == 0):
        ap.error("--streams 0: nothing to run (give a count, or --multi-streams M for the multi-queue streams alone)")
    given = None
    if args.streams_file is not None:  # checked before anything is built: one line names what is wrong
        for opt, given_too in (("--replay", args.replay is not None), ("--list", args.list is not None),
                               ("--multi-streams", args.multi_streams > 0)):
            if given_too:
                ap.error(f"--streams-file runs the file's streams: {opt} does not apply")
        try:
            given = load(args.streams_file, "multi" if args.multi else "cp")
        except StreamsFileError as e:
            ap.error(f"--streams-file {e}")
    try:
        seed = master_seed(args.seed)
    except ValueError:  # (--seed, else $GPUCOSIM_SEED)
        where, text = ("argument --seed", args.seed) if args.seed is not None else \
            ("$GPUCOSIM_SEED", os.environ.get("GPUCOSIM_SEED"))
        ap.error(f"{where}: {NOT_AN_INTEGER}, not {text!r}")
    sims = [s.strip() for s in args.sim.split(",") if s.strip()]
    if not sims:
        ap.error(f"argument --sim: {no_simulator(args.sim, BACKENDS)}")
    unknown = [s for s in sims if s not in BACKENDS]
    if unknown:  # (the simulator layer's message named neither the option nor the model)
        ap.error(f"argument --sim: {unknown_simulator(unknown[0], BACKENDS, lists=True)}")
    twice = [s for i, s in enumerate(sims) if s in sims[:i]]
    if twice:  # (the campaign was split between the two, one's time and capabilities written over by the other's)
        ap.error(f"argument --sim: {given_twice(twice[0])}")
    if args.json and Path(args.json).is_dir():  # (found after the campaign, it lost the report)
        ap.error(f"argument --json: {args.json} is a directory (give the report's file name)")
    # (a file other than an earlier report, --json README.md, was written over after the campaign)
    from testbench.sim import BUILD

    if problem := report_file_problem(BUILD / "difftest.json" if args.json is None else args.json, "a difftest report"):
        ap.error(f"argument --json: {problem}")
    mcaps = model_caps(False if args.no_dma else None, args.data_width)

    if args.multi:
        return main_multi(args, seed, sims, given)

    if args.list is not None:
        print(wrapped(make_stream(seed, args.list, mcaps).listing(max_data=64)))
        return 0

    from testbench import sim as simmod

    for s in sims:
        if s != "model":
            reason = simmod.unavailable_reason(s)
            if reason:
                print(f"difftest: {reason}", file=sys.stderr)
                return 2

    if given is not None:
        return run_given(args, seed, sims, given, "cp", mcaps)

    if args.replay is not None:
        print(f"difftest: seed {seed}, stream {args.replay}", file=sys.stderr)
        bad = False
        for s in sims:
            if s == "model":
                stream = make_stream(seed, args.replay, mcaps)
                a, ma = run_model(stream, mcaps, step=args.step)
                b, mb = run_model(stream, mcaps, step=args.step, mmio_cycles=3, name="model2")
                v = compare(stream, b, a, mb.mem, ma.mem)
                print(explain(stream, v, b, a, "model2"))
                bad |= not v.ok
                continue
            with tempfile.TemporaryDirectory() as d:
                rep = Path(d) / "replay.txt"
                recs, _, problems = run_rtl(s, seed, args.replay, 1, step=args.step, data_width=args.data_width,
                                            report_file=rep, workdir=Path(d))
                if rep.exists():
                    print(rep.read_text())
                for p in problems:
                    print(p)
                bad |= any(not r["ok"] for r in recs)
        return 1 if bad else 0

    report = Report(seed)
    print(f"difftest: seed {seed} (set GPUCOSIM_SEED or --seed to change it), {args.streams} streams from index "
          f"{args.first} on {', '.join(sims)}", file=sys.stderr)
    plan = [(s, args.first, args.streams)] if len(sims) == 1 else split_sims(sims, args.first, args.streams)
    for s, a, n in plan:
        if n <= 0:
            continue
        prog = Progress(n, f"{s:9s}")
        if s == "model":
            t0 = time.monotonic()
            recs: list[dict] = []

            def tick(rec, recs=recs, prog=prog):
                recs.append(rec)
                prog.update(len(recs), sum(not r["ok"] for r in recs))
            run_model_pair(seed, range(a, a + n), mcaps, step=args.step, on_record=tick)
            report.seconds[s] = time.monotonic() - t0
            report.caps[s] = mcaps
        else:
            recs, secs, problems = run_rtl(s, seed, a, n, jobs=args.jobs, step=args.step,
                                           data_width=args.data_width, progress=prog.update)
            report.seconds[s] = secs
            report.caps[s] = caps_of(recs) or Caps()
            report.notes += problems
            prog.update(len(recs), sum(not r["ok"] for r in recs))
        prog.close()
        report.add(recs)
    if args.multi_streams:  # the multi-queue family after the CP's, into the same report
        run_multi(report, args, seed, sims, args.first, args.multi_streams)
    return finish(report, Path(args.json) if args.json else simmod.BUILD / "difftest.json")


def finish(report: Report, path: Path) -> int:
    """Write the report to `path` and print it: 1 when any stream mismatched, 2 when the
    report could not be written (its summary is printed all the same)."""
    try:
        report.write(path)
    except OSError as e:
        print(report.text())
        at = f" ({e.filename})" if e.filename and str(e.filename) != str(path) else ""
        print(f"difftest: cannot write the report {path}: {e.strerror or e}{at}", file=sys.stderr)
        return 2
    print(report.text())
    print(f"report: {path}")
    return 1 if report.failures else 0


def run_multi(report: Report, args, seed: int, sims: list[str], first: int, count: int, replay: bool = False) -> bool:
    """Multi-queue streams [first, first + count) on `sims` into `report` (a replay prints
    each stream's story); True when any mismatched."""
    from . import multi

    dma = not args.no_dma
    bad = False
    plan = [(s, first, count) for s in sims] if replay or len(sims) == 1 else \
        split_sims(sims, first, count)
    for s, a, n in plan:
        if n <= 0:
            continue
        prog = Progress(n, f"{s:9s}") if not replay else None
        if s == "model":
            t0, recs = time.monotonic(), []
            for i in range(a, a + n):
                stream = multi.make(seed, i, dma)
                x, mx = multi.run_model(stream, dma=dma, data_width=args.data_width)
                y, my = multi.run_model(stream, mmio_cycles=3, dma=dma, data_width=args.data_width)
                diffs = multi.compare(stream, y, x, my.mem, mx.mem) + multi.expected(stream, x)
                if replay:
                    print(multi.explain(stream, diffs, y, x, "model2"))
                recs.append(multi.record(stream, diffs, "model", 0.0, x))
                if prog:
                    prog.update(len(recs), sum(not r["ok"] for r in recs))
            secs = time.monotonic() - t0
        else:
            with tempfile.TemporaryDirectory() as d:
                story = Path(d) / "story.txt"
                recs, secs, problems = run_rtl(s, seed, a, n, jobs=args.jobs, data_width=args.data_width,
                                               progress=prog.update if prog else None, family="multi",
                                               report_file=story if replay else None,
                                               workdir=Path(d))
                if story.exists():
                    print(story.read_text())
            report.notes += problems
        if prog:
            prog.close()
        report.multi_seconds[s] = secs
        report.add(recs)
        bad |= any(not r["ok"] for r in recs)
    return bad


def run_given(args, seed: int, sims: list[str], given: list, family: str, mcaps: Caps | None = None) -> int:
    """--streams-file: the file's streams (`given`, loaded and checked) on each of `sims`,
    with the full story; on "model", the model against itself with slower MMIO (as
    --replay's). 1 when any mismatched, 2 when the file changed into a bad one meanwhile."""
    from . import multi

    bad = False
    for s in sims:
        if s == "model":
            for k, stream in enumerate(given):
                try:
                    if family == "multi":
                        x, mx = multi.run_model(stream, dma=not args.no_dma)
                        y, my = multi.run_model(stream, mmio_cycles=3, dma=not args.no_dma)
                        diffs = multi.compare(stream, y, x, my.mem, mx.mem) + multi.expected(stream, x)
                        print(multi.explain(stream, diffs, y, x, "model2"))
                        bad |= bool(diffs)
                    else:
                        a, ma = run_model(stream, mcaps, step=args.step)
                        b, mb = run_model(stream, mcaps, step=args.step, mmio_cycles=3, name="model2")
                        v = compare(stream, b, a, mb.mem, ma.mem)
                        print(explain(stream, v, b, a, "model2"))
                        bad |= not v.ok
                except Exception as e:  # a stream the generator could never make: one line, not a traceback
                    print(f"difftest: {unrunnable(stream, k, s, family, e, args.streams_file)[1]}", file=sys.stderr)
                    bad = True
            continue
        with tempfile.TemporaryDirectory() as d:
            rep = Path(d) / "story.txt"
            try:
                recs, _, problems = run_rtl(s, seed, 0, 0, step=args.step, data_width=args.data_width,
                                            report_file=rep, workdir=Path(d), streams_file=Path(args.streams_file),
                                            family=family)
            except StreamsFileError as e:
                print(f"difftest: --streams-file {e}", file=sys.stderr)
                return 2
            if rep.exists():
                print(rep.read_text())
            for p in problems:
                print(p)
            bad |= any(not r["ok"] for r in recs) or bool(problems)
    return 1 if bad else 0


def main_multi(args, seed: int, sims: list[str], given: list | None = None) -> int:
    """--multi: the same commands for testbench/difftest/multi/'s streams."""
    from testbench import sim as simmod

    from . import multi

    dma = not args.no_dma
    if args.list is not None:
        print(wrapped("\n".join(multi.make(seed, args.list, dma).listing())))
        return 0
    for s in sims:
        reason = simmod.unavailable_reason(s) if s != "model" else None
        if reason:
            print(f"difftest: {reason}", file=sys.stderr)
            return 2
    if given is not None:
        return run_given(args, seed, sims, given, "multi")
    first, count = (args.replay, 1) if args.replay is not None else (args.first, args.streams)
    report = Report(seed)
    bad = run_multi(report, args, seed, sims, first, count, replay=args.replay is not None)
    if args.replay is not None:
        return 1 if bad else 0
    return finish(report, Path(args.json) if args.json else simmod.BUILD / "difftest.json")


if __name__ == "__main__":
    sys.exit(main())
