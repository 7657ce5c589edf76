"""python -m testbench.mutate: the mutation campaign (`make mutate`).

    python -m testbench.mutate                    # Python (sampled) and RTL: build/mutate.json + table
    python -m testbench.mutate --python           # the Python layers only
    python -m testbench.mutate --rtl              # the curated RTL mutants only
    python -m testbench.mutate --sample 1         # every Python mutant (hours on 2 cores)
    python -m testbench.mutate --modules kmd_model/sched/fence.py,kmd_model/irq/ih.py --sample 1
    python -m testbench.mutate --recheck          # also run the survivors argued in survivors.toml
    python -m testbench.mutate --python --resume  # go on where the last run's budget stopped it
    python -m testbench.mutate --fast             # the handful make test runs (tests/flows/test_mutate.py)

The Python part runs mutmut in a scratch copy (build/mutate/py); the RTL part applies
each curated mutant to a scratch copy of the Amaranth source (build/mutate/rtl) and runs
the directed RTL tests and a short RTL-vs-model campaign. The exit code is 1 when a
survivor has no argument (a test to add) or a score is below --min-score.
"""

from __future__ import annotations

import json
import sys
import time
from importlib.metadata import version
from dataclasses import asdict
from pathlib import Path

from ..argtypes import OneLineParser, fraction, int_at_least, integer_in, positive_float, real_in, report_file_problem
from ..pipes import pipe_safe, write_whole
from . import scope, survivors
from .pymut import ROOT, TIMEOUT_CODES, PyCampaign
from .report import Outcome, Report

DEFAULT_SEED = 20240605
DEFAULT_SAMPLE = 0.10  # the whole chosen set runs in the 30-minute budget on a quiet machine


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m testbench.mutate", options_in_errors=True, description=__doc__.splitlines()[0])
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--python", action="store_true", help="the Python layers only")
    part.add_argument("--rtl", action="store_true", help="the curated RTL mutants only")
    part.add_argument("--fast", action="store_true", help="the fast subset (a handful of mutants, < 60 s)")
    part.add_argument("--report", action="store_true",
                      help="no run: rebuild the report from the last run's results and survivors.toml as it is now")
    ap.add_argument("--sample", type=fraction, default=DEFAULT_SAMPLE,
                    help=f"share of each function's Python mutants to run (default {DEFAULT_SAMPLE})")
    ap.add_argument("--seed", type=integer_in(), default=DEFAULT_SEED, help="seed of the sample")
    ap.add_argument("--modules", default=None, help="comma list of Python modules (default: scope.MODULES)")
    ap.add_argument("--budget", type=positive_float, default=30.0, help="minutes for the whole campaign (default 30)")
    ap.add_argument("--jobs", type=int_at_least(1), default=2, help="mutants run at once (default 2)")
    ap.add_argument("--recheck", action="store_true", help="run the argued survivors too (are they still?)")
    ap.add_argument("--resume", action="store_true",
                    help="Python: reuse the last run's mutants and verdicts (build/mutate/py), run only the "
                    "chosen ones it did not reach (same --sample and --seed)")
    # (a float: nan, or any score above 1 or below 0, turned the gate off or failed every run)
    ap.add_argument("--min-score", type=real_in(lambda v: 0 <= v <= 1, "a score from 0 to 1"), default=0.9,
                    help="fail below this score, from 0 to 1 (default 0.9)")
    ap.add_argument("--json", default=str(ROOT / "build" / "mutate.json"), help="report file")
    args = ap.parse_args(argv)

    if args.fast:
        from .fast import main as fast_main
        return fast_main()
    modules = scope.MODULES
    if args.modules is not None:
        try:
            modules = module_list(args.modules)
        except ValueError as e:
            ap.error(f"argument --modules: {e}")
    # (a file other than an earlier report, --json README.md, was written over after the campaign)
    if problem := report_file_problem(args.json, "a mutation report"):
        ap.error(f"argument --json: {problem}")
    if args.resume and not args.rtl and not args.report and (problem := _resume_problem(modules, args)):
        ap.error(f"argument --resume: {problem}")

    t0 = time.monotonic()
    deadline = t0 + 60 * args.budget
    try:
        argued = survivors.load()
    except ValueError as e:
        print(f"mutate: {e}", file=sys.stderr)
        return 2
    report = Report(argued, meta={"tool": f"mutmut {version('mutmut')}", "seed": args.seed,
                                  "sample": args.sample, "budget_minutes": args.budget, "seconds": {}})
    if args.report:
        for layer in ("rtl", "py"):
            f = ROOT / "build" / "mutate" / layer / "outcomes.json"
            if f.exists():
                try:  # (cut short, or edited: json's or the dataclass's traceback)
                    saved = json.loads(f.read_text())
                    outcomes = [Outcome(**o) for o in saved["outcomes"]]
                    report.meta.update(saved["meta"])
                except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as e:
                    why = e.strerror if isinstance(e, OSError) else f"{type(e).__name__}: {e}"
                    print(f"mutate: --report: {f} is not a run's outcomes ({' '.join(str(why).split())}): "
                          "run the campaign again (make mutate)", file=sys.stderr)
                    return 2
                report.outcomes += outcomes
        if not report.outcomes:
            print("mutate: no earlier run to report on (build/mutate/*/outcomes.json)", file=sys.stderr)
            return 2
        return _finish(report, args, t0)
    if not args.python:
        from .rtl import run_rtl
        rtl_deadline = deadline if args.rtl else t0 + 60 * args.budget / 2
        try:
            meta = run_rtl(report, rtl_deadline, jobs=args.jobs)
        except ValueError as e:  # a hand-written mutant whose code moved
            print(f"mutate: {e}", file=sys.stderr)
            return 2
        report.meta["rtl"] = meta
        report.meta["seconds"]["rtl"] = round(time.monotonic() - t0, 1)
        _save(report, "rtl")
    if not args.rtl:
        t1 = time.monotonic()
        try:
            _python(report, modules, args, deadline)
        except RuntimeError as e:  # a step in the scratch copy failed: which, and where its log is
            print(f"mutate: {e}", file=sys.stderr)
            return 2
        report.meta["seconds"]["python"] = round(time.monotonic() - t1, 1)
        _save(report, "python")
    report.meta["seconds"]["total"] = round(time.monotonic() - t0, 1)
    return _finish(report, args, t0)


def module_list(text: str) -> tuple[str, ...]:
    """--modules: the Python files to mutate, as paths under the tree (`kmd_model/sched/fence.py`),
    or ValueError saying which one cannot be. The scratch copy rewrites each (undecorate) at
    ROOT-relative paths: an absolute path named the real file, which was rewritten in place (the
    working tree's own source), and one outside the tree was a traceback after the copy. Only
    the folders mutmut mutates (scope.SOURCE_PATHS) hold modules; none given ran them all."""
    given = [t.strip() for t in text.split(",") if t.strip()]
    if not given:
        raise ValueError(f"no module in {text!r}: name .py files under {', '.join(scope.SOURCE_PATHS)}, "
                         "or leave --modules out for the campaign's own (testbench/mutate/scope.py)")
    out: list[str] = []
    root = ROOT.resolve()
    for t in given:
        p = Path(t)
        try:
            rel = (p.resolve() if p.is_absolute() else (root / p).resolve()).relative_to(root).as_posix()
        except ValueError:
            raise ValueError(f"{t} is outside the tree ({root})") from None
        if not (root / rel).is_file():
            raise ValueError(f"no such module {t}")
        if not rel.endswith(".py") or not rel.startswith(scope.SOURCE_PATHS):
            raise ValueError(f"{t}: the campaign mutates .py files under {', '.join(scope.SOURCE_PATHS)}")
        if rel in out:
            raise ValueError(f"{t} is given twice")
        out.append(rel)
    return tuple(out)


def _save(report: Report, layer: str) -> None:
    """The layer's outcomes, for `--report` after survivors.toml changes."""
    d = ROOT / "build" / "mutate" / ("py" if layer == "python" else "rtl")
    d.mkdir(parents=True, exist_ok=True)
    write_whole(d / "outcomes.json", json.dumps({  # (^C or a full disk left half a file)
        "outcomes": [asdict(o) for o in report.outcomes if o.layer == layer],
        "meta": {k: v for k, v in report.meta.items() if k in (layer, "tool", "seed", "sample")}}))


def _finish(report: Report, args, t0: float) -> int:
    report.write(Path(args.json))
    print(report.table())
    print(f"\nwritten to {args.json} ({time.monotonic() - t0:.0f} s)")
    d = report.as_dict()
    low = [(name, s) for name, s in (("python", d["python_score"]), ("rtl", d["rtl_score"]))
           if s is not None and s < args.min_score]
    todo = [s for s in d["survivors"] if s["reason"] == "test to add"]
    if low:
        print("score below " + f"{args.min_score}: " + ", ".join(f"{n} {s:.3f}" for n, s in low))
    return 1 if low or todo else 0


CAMPAIGN_FILE = "campaign.json"  # beside mutants.json: what the run chose its mutants by


def _chosen_by(modules: tuple[str, ...], args) -> dict:
    return {"modules": sorted(modules), "sample": args.sample, "seed": args.seed}


def _resume_problem(modules: tuple[str, ...], args) -> str | None:
    """Why --resume cannot go on from the last Python run, or None. Its mutants were made of
    that run's modules and chosen by its --sample and --seed: with others, the verdicts of
    one choice were mixed with another's (or other modules' mutants were run as these)."""
    work = PyCampaign.work
    try:
        last = json.loads((work / CAMPAIGN_FILE).read_text())
    except FileNotFoundError:
        return None  # (no earlier run, or one from before this check: the campaign starts or goes on)
    except (OSError, ValueError) as e:
        return f"{work / CAMPAIGN_FILE} cannot be read ({e}): run without --resume"
    now = _chosen_by(modules, args)
    differ = [k for k in now if last.get(k) != now[k]]
    if not differ:
        return None
    was = " ".join(f"--{k} {','.join(last[k]) if k == 'modules' else last.get(k)}" for k in differ)
    return f"the last run was {was}: give the same to go on, or run without --resume to start again"


def _python(report: Report, modules: tuple[str, ...], args, deadline: float) -> None:
    camp = PyCampaign(workers=args.jobs, modules=modules)
    if args.resume and (camp.work / "mutants.json").exists():
        print(f"mutate: resuming the Python campaign in {camp.work} ...", flush=True)
        camp.load()  # the mutants of the last prepare (the tree as it was then), verdicts so far
    else:
        print(f"mutate: generating the Python mutants of {len(modules)} modules in {camp.work} ...", flush=True)
        camp.prepare()
    listed = {m.key for m in camp.mutants if report.args.find(m.key)}
    todo = camp.choose(args.sample, args.seed, skip_keys=set() if args.recheck else listed)
    write_whole(camp.work / CAMPAIGN_FILE, json.dumps(_chosen_by(modules, args)))
    done = [m for m in todo if m.exit_code is not None]  # (only after a resume)
    todo = [m for m in todo if m.exit_code is None]
    chosen = [m for m in camp.mutants if m.chosen]
    print(f"mutate: {len(camp.mutants)} mutants, {sum(m.logging for m in camp.mutants)} in logging calls left "
          f"out; {len(chosen)} chosen (sample {args.sample} per function, seed {args.seed}), "
          f"{len(chosen) - len(todo) - len(done)} of them argued survivors not rerun, {len(done)} run before; "
          f"running {len(todo)} ...", flush=True)
    camp.run(todo, deadline)
    run_names = {m.name for m in todo + done}
    for m in camp.mutants:
        if not m.chosen:
            verdict, detail = "skipped", "logging call" if m.logging else "not in the sample"
        elif m.name not in run_names:
            verdict, detail = "survived", "argued survivor, not rerun"
        else:
            verdict, detail = m.verdict, str(m.exit_code)
        report.outcomes.append(Outcome("python", m.path, m.key, m.diff(), verdict, detail, m.function))
    finished = [m for m in todo + done if m.exit_code is not None]
    report.meta["python"] = {"mutants": len(camp.mutants), "logging": sum(m.logging for m in camp.mutants),
                             "chosen": len(chosen), "to_run": len(todo) + len(done), "run": len(finished),
                             "timeouts": sum(m.exit_code in TIMEOUT_CODES for m in finished),
                             "raised": sum(m.exit_code == 255 for m in finished), "seconds": camp.seconds,
                             "tests": list(scope.TESTS), "test_filter": scope.TEST_FILTER}


if __name__ == "__main__":
    sys.exit(main())
