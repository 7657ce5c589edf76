"""The designs the tests and demos simulate, and the Verilog they are built from.

`gpu_design(data_width)` converts the Amaranth top (rtl/) to Verilog once per
configuration (cached under build/rtl/, keyed by the content of rtl/ and spec/) and
wraps it in testbench/hdl/tb_top.v with the shared-file memory model and the AXI checker.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .sim import BUILD, CSRC_DIR, HDL_DIR, ROOT, Design, _locked

VPI_NAME = "gpumem"


def _rtl_digest() -> str:
    h = hashlib.sha256()
    for folder in ("rtl", "spec"):
        for p in sorted((ROOT / folder).rglob("*")):
            if p.suffix in (".py", ".rdl") and "__pycache__" not in p.parts:
                h.update(p.relative_to(ROOT).as_posix().encode())
                h.update(p.read_bytes())
    return h.hexdigest()[:16]


def gpu_verilog(data_width: int = 64) -> Path:
    """Verilog of rtl.top.GpuTop for one data width, regenerated only when rtl/ or spec/ change."""
    out = BUILD / "rtl" / f"gpu_top-dw{data_width}-{_rtl_digest()}.v"
    with _locked(BUILD / "rtl" / f".lock-dw{data_width}"):
        if not out.exists():
            from rtl.top import to_verilog

            tmp = out.with_suffix(".tmp")
            tmp.write_text(to_verilog(data_width))
            tmp.rename(out)
    return out


def memory_sources() -> dict:
    """The shared-file memory model: Verilog plus its C side for each simulator."""
    return dict(
        c_sources=(CSRC_DIR / "gpumem.c", CSRC_DIR / "gpumem_dpi.c"),
        vpi_sources=(CSRC_DIR / "gpumem.c", CSRC_DIR / "gpumem_vpi.c"),
        vpi_name=VPI_NAME,
    )


def gpu_design(data_width: int = 64) -> Design:
    return Design(
        name=f"gpu-dw{data_width}",
        toplevel="tb_top",
        sources=(gpu_verilog(data_width), HDL_DIR / "axi_mem.v", HDL_DIR / "axi_checker.v",
                 HDL_DIR / "tb_top.v"),
        parameters={"DATA_WIDTH": data_width},
        **memory_sources(),
    )
