"""How much faster the reference model is than the RTL, on the same apps.

Each workload is run by `gpucosim run APP --sim S --stats-json F` in a process of its own,
on the model and on the simulators asked for, and two ratios are taken from the figures
the session writes (gpucosim/run/session.py, Session.figures):

- device: seconds inside the device's methods (MMIO, waits, delays), driver bring-up
  included. This is what the backend costs: the UMD, KMD and app are the same Python on
  every backend.
- app: seconds in the app's main(), driver work included: what a user waits for once the
  process has started. Driver-heavy apps are bounded here by that shared Python.

A workload counts only when it passed (exit code 0) on every backend. Part of
`make bench`; on its own: `python -m testbench.bench.model_speed [--sims verilator,icarus]`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from testbench.argtypes import OneLineParser, report_file_problem
from testbench.pipes import pipe_safe
from testbench.simnames import SIMULATORS, choices, given_twice, no_simulator, unknown_simulator

ROOT = Path(__file__).resolve().parents[2]  # the repository (testbench/bench/model_speed.py)

WORKLOADS = {
    "hello": "examples/hello.py",
    "demo": "examples/demo.py",
    "memcpy": "examples/memcpy.py",
    "fill": "examples/fill.py",
    "producer_consumer": "examples/producer_consumer.py",
    "batching": "examples/batching.py",
    "long_ib": "testbench.bench.speed_apps:long_ib",
    "big_copy": "testbench.bench.speed_apps:big_copy",
}
GOAL = 100  # issue 5: the model runs at least 100x faster than the RTL


def parse_sims(text: str, none_ok: bool) -> tuple[list[str], str | None]:
    """A comma list of simulators (`none` for no comparison, where `none_ok`), and why it
    cannot be used, or None. An empty list was taken as `none` (`--speed-sims ''`, a
    variable left unset), and a simulator named twice was measured twice."""
    names = [x.strip() for x in text.split(",")]
    if none_ok and names == ["none"]:
        return [], None
    if not any(names) or "" in names:
        return [], (no_simulator(text) if not any(names) else f"{text!r} has an empty name: choose "
                    f"{choices(lists=True)}") + (", or none" if none_ok else "")
    twice = [x for i, x in enumerate(names) if x in names[:i]]
    if twice:
        return [], given_twice(twice[0])
    return names, sims_problem(names)


def sims_problem(sims: list[str]) -> str | None:
    """Why these simulators cannot be compared with the model, or None."""
    from testbench import sim

    for s in sims:
        if s not in SIMULATORS:
            return unknown_simulator(s, lists=True)
        reason = sim.unavailable_reason(s)
        if reason:
            return reason
    return None


def run_once(app: str, backend: str, clock: str | None = None) -> dict:
    """One `gpucosim run` of `app`; `clock` picks who drives the RTL's clock
    ($GPUCOSIM_CLOCK: "hdl", or "cocotb" for the path before issue 13)."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "figures.json"
        cmd = [sys.executable, "-m", "gpucosim", "run", app, "--sim", backend, "--stats-json", str(out)]
        env = {**os.environ, "GPUCOSIM_LOG": ""}
        if clock is not None:
            env["GPUCOSIM_CLOCK"] = clock
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        if not out.exists():
            raise RuntimeError(f"{' '.join(cmd)} wrote no figures (exit {p.returncode}):\n{p.stderr[-2000:]}")
        fig = json.loads(out.read_text())
    fig["exit_code"] = p.returncode if fig.get("exit_code") is None else fig["exit_code"]
    return fig


def measure(app: str, backend: str, repeat: int, clock: str | None = None) -> dict:
    """The median run of `repeat` (by device time); fails if any run failed."""
    runs = [run_once(app, backend, clock) for _ in range(repeat)]
    bad = [r for r in runs if r["exit_code"] != 0]
    if bad:
        raise RuntimeError(f"{app} failed on {backend} (exit {bad[0]['exit_code']})")
    runs.sort(key=lambda r: r["device_s"])
    return runs[len(runs) // 2]


def compare(sims: list[str], workloads: dict[str, str], model_repeat: int = 3, rtl_repeat: int = 1,
            log=print) -> dict:
    result: dict = {}
    for name, app in workloads.items():
        row: dict = {}
        model = measure(app, "model", model_repeat)
        row["model_device_ms"] = round(model["device_s"] * 1e3, 3)
        row["model_app_ms"] = round(model["app_s"] * 1e3, 3)
        for s in sims:
            rtl = measure(app, s, rtl_repeat)
            row[f"{s}_device_ms"] = round(rtl["device_s"] * 1e3, 3)
            row[f"{s}_app_ms"] = round(rtl["app_s"] * 1e3, 3)
            row[f"{s}_device_x"] = round(rtl["device_s"] / model["device_s"], 1)
            row[f"{s}_app_x"] = round(rtl["app_s"] / model["app_s"], 1)
        result[name] = row
        log(f"  {name:18s} " + "  ".join(
            f"{s}: device {row[f'{s}_device_x']:7.1f}x app {row[f'{s}_app_x']:6.1f}x" for s in sims))
    return result


def summary(result: dict, sims: list[str]) -> dict:
    """The figures make bench tabulates: per simulator, the least device and app ratios."""
    out = {}
    for s in sims:
        out[f"model_speedup_device_min_{s}"] = min(r[f"{s}_device_x"] for r in result.values())
        out[f"model_speedup_app_min_{s}"] = min(r[f"{s}_app_x"] for r in result.values())
    return out


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="python -m testbench.bench.model_speed", description=__doc__.splitlines()[0])
    ap.add_argument("--sims", default="verilator", help="simulators to compare against (default verilator)")
    ap.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), help="a subset of the workloads (one or more names)")
    ap.add_argument("-o", "--output", help="write the table as JSON here")
    args = ap.parse_args(argv)
    sims, problem = parse_sims(args.sims, none_ok=False)
    if problem:
        ap.error(f"--sims: {problem}")
    # (a folder, a path under a file, or a file of another kind: a traceback after the runs)
    if args.output is not None and (problem := report_file_problem(args.output, "an earlier table of it")):
        ap.error(f"-o: {problem}")
    workloads = {k: v for k, v in WORKLOADS.items() if not args.only or k in args.only}
    result = compare(sims, workloads)
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps({"model_speedup": result, **summary(result, sims)}, indent=1) + "\n")
    for k, v in summary(result, sims).items():
        print(f"{k}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
