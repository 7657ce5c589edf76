"""The designs the tests and demos simulate, and the Verilog they are built from.

`gpu_design(data_width)` converts the Amaranth top (rtl/) to Verilog once per
configuration (cached under build/rtl/, keyed by the content of rtl/ and spec/) and
wraps it in testbench/sim/hdl/tb_top.v with the shared-file memory model and the AXI checker.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..pipes import write_whole
from . import BUILD, CSRC_DIR, HDL_DIR, ROOT, Design, _locked

VPI_NAME = "gpumem"


def _rtl_digest() -> str:
    h = hashlib.sha256(Path(__file__).read_bytes())  # kick_time_zero is part of the output
    for folder in ("rtl", "spec"):
        for p in sorted((ROOT / folder).rglob("*")):
            if p.suffix in (".py", ".rdl") and "__pycache__" not in p.parts:
                h.update(p.relative_to(ROOT).as_posix().encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


_DUMP_REG = re.compile(r"^(\s*)reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+ ) = 0;$", re.M)


def kick_time_zero(verilog: str) -> str:
    """Make every `always @*` block run once at time zero under Icarus.

    Yosys makes its combinational blocks sensitive to a dummy register initialised to 0
    so simulators evaluate them at time zero; Icarus applies declaration initialisers
    before the blocks start waiting, so a block whose inputs never change after reset
    (an FSM's outputs while it stays in its reset state) would keep X forever. Toggling
    the dummy register once, after a #0, wakes them all. Verilator does not need it.
    """
    def repl(mo: re.Match) -> str:
        indent, name = mo.group(1), mo.group(2)
        return (f"{mo.group(0)}\n`ifndef VERILATOR\n{indent}initial #0 {name} = 1;\n`endif")
    return _DUMP_REG.sub(repl, verilog)


def gpu_verilog(data_width: int = 64, fetch_depth: int | None = None) -> Path:
    """Verilog of rtl.top.GpuTop for one data width (and, for `make sweep`, one CP fetch
    depth; None is the top's default), regenerated only when rtl/ or spec/ change."""
    fd = "" if fetch_depth is None else f"-fd{fetch_depth}"
    out = BUILD / "rtl" / f"gpu_top-dw{data_width}{fd}-{_rtl_digest()}.v"
    with _locked(BUILD / "rtl" / f".lock-dw{data_width}{fd}"):
        if not out.exists():
            from rtl.top import to_verilog

            kw = {} if fetch_depth is None else {"fetch_depth": fetch_depth}
            write_whole(out, kick_time_zero(to_verilog(data_width, **kw)))
    return out


def memory_sources() -> dict:
    """The shared-file memory model: Verilog plus its C side for each simulator."""
    return dict(
        c_sources=(CSRC_DIR / "gpumem.c", CSRC_DIR / "gpumem_dpi.c"),
        vpi_sources=(CSRC_DIR / "gpumem.c", CSRC_DIR / "gpumem_vpi.c"),
        vpi_name=VPI_NAME,
    )


def gpu_design(data_width: int = 64, fetch_depth: int | None = None) -> Design:
    fd = "" if fetch_depth is None else f"-fd{fetch_depth}"
    return Design(
        name=f"gpu-dw{data_width}{fd}",
        toplevel="tb_top",
        sources=(gpu_verilog(data_width, fetch_depth), HDL_DIR / "axi_mem.v", HDL_DIR / "axi_checker.v",
                 HDL_DIR / "mmio_master.v", HDL_DIR / "tb_top.v"),
        parameters={"DATA_WIDTH": data_width},
        hdl_clock=True,
        **memory_sources(),
    )
