"""Waveforms: what `--waves` needs, and a GTKWave save file that opens on the signals
worth looking at first (most of a Yosys netlist's nets are anonymous `$N` wires).

Verilator writes FST, which its FST writer compresses with LZ4: the build needs the lz4
headers (Debian: liblz4-dev). Icarus writes FST on its own.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path

LZ4_PACKAGE = "liblz4-dev"

# (group, [(signal, width or None for one bit)]) under the testbench top
SIGNALS = [
    ("clock and irq", [("clk", None), ("rst", None), ("irq", None)]),
    ("MMIO (a doorbell is a write to RB_DOORBELL)", [
        ("s_axil_awvalid", None), ("s_axil_awaddr", 16), ("s_axil_wdata", 32), ("s_axil_bvalid", None),
        ("s_axil_arvalid", None), ("s_axil_araddr", 16), ("s_axil_rdata", 32)]),
    ("command processor", [
        ("gpu.cp.cp_state", 5), ("gpu.cp.level", 2), ("gpu.cp.hdr", 32), ("gpu.cp.hdr_addr", 48),
        ("gpu.cp.hdr_off", 32)]),
    ("memory bus", [
        ("arvalid", None), ("arready", None), ("arid", 4), ("araddr", 48), ("arlen", 8),
        ("rvalid", None), ("rlast", None),
        ("awvalid", None), ("awready", None), ("awid", 4), ("awaddr", 48), ("awlen", 8),
        ("wvalid", None), ("wlast", None), ("bvalid", None), ("bresp", 2)]),
]


@functools.lru_cache(maxsize=1)
def lz4_headers() -> bool:
    """Can the C++ compiler find lz4.h (Verilator's FST writer needs it)?"""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        return False
    r = subprocess.run([cxx, "-E", "-x", "c++", "-"], input="#include <lz4.h>\n", capture_output=True, text=True)
    return r.returncode == 0


def unavailable_reason(backend: str) -> str | None:
    if backend == "verilator" and not lz4_headers():
        return (f"--waves on Verilator writes FST, whose writer needs the lz4 headers: "
                f"apt-get install {LZ4_PACKAGE} (or use --sim icarus)")
    return None


def write_gtkw(wave: str | Path, backend: str) -> Path:
    """`<wave>.gtkw` beside the waveform: the signals above, grouped."""
    wave = Path(wave)
    top = "TOP.tb_top." if backend == "verilator" else "tb_top."
    lines = [f'[dumpfile] "{wave}"', "[timestart] 0", "[sst_expanded] 1"]
    for group, sigs in SIGNALS:
        lines += ["@800200", f"-{group}"]
        for name, width in sigs:
            if width is None:
                lines += ["@28", f"{top}{name}"]
            else:
                lines += ["@22", f"{top}{name}[{width - 1}:0]"]
        lines += ["@1000200", f"-{group}"]
    out = wave.with_suffix(".gtkw")
    out.write_text("\n".join(lines) + "\n")
    return out
