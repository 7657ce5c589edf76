"""`verilator --lint-only` on the generated Verilog, for every supported bus width.

Run by `make lint` and by tests/spec/test_generated.py. The only waivers are the two width
warnings Yosys's minimal-width constants cause (testbench.sim.VERILATOR_WAIVERS).
"""

from __future__ import annotations

import subprocess
import sys

from .argtypes import OneLineParser
from .pipes import pipe_safe
from .sim.design import gpu_verilog
from .sim import VERILATOR_WAIVERS, setup_env, verilator_root

DATA_WIDTHS = (32, 64, 128, 256)


def lint(data_width: int) -> subprocess.CompletedProcess:
    setup_env()
    cmd = [str(verilator_root() / "bin" / "verilator"), "--lint-only", *VERILATOR_WAIVERS,
           "--top-module", "gpu_top", str(gpu_verilog(data_width))]
    return subprocess.run(cmd, capture_output=True, text=True)


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    # (no options: --help says what it does, a stray argument is refused, neither lints)
    OneLineParser(prog="python -m testbench.lint", description=__doc__.split("\n\n")[0]).parse_args(argv)
    failed = 0
    for w in DATA_WIDTHS:
        r = lint(w)
        print(f"gpu_top DATA_WIDTH={w}: {'clean' if r.returncode == 0 else 'FAILED'}")
        if r.returncode:
            failed += 1
            print((r.stdout + r.stderr)[-6000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
