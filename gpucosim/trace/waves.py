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

# (group, [signal]) by name under the testbench top; widths come from the file
SIGNALS = [
    ("clock and irq", ["clk", "rst", "irq"]),
    ("MMIO (a doorbell is a write to RB_DOORBELL)", [
        "s_axil_awvalid", "s_axil_awaddr", "s_axil_wdata", "s_axil_bvalid",
        "s_axil_arvalid", "s_axil_araddr", "s_axil_rdata"]),
    ("command processor", ["gpu.cp.cp_state", "gpu.cp.level", "gpu.cp.hdr", "gpu.cp.hdr_addr", "gpu.cp.hdr_taken_off"]),
    ("memory bus", [
        "arvalid", "arready", "arid", "araddr", "arlen", "rvalid", "rlast",
        "awvalid", "awready", "awid", "awaddr", "awlen", "wvalid", "wlast", "bvalid", "bresp"]),
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


def _scopes_of(wave: Path) -> dict[str, tuple[str, int]]:
    """Every variable the file holds, by its name under the testbench top
    (`gpu.cp.level`), as (its full name in the file, its width). The file says where the
    top sits: Verilator's FST puts the ports in `$rootio` and the design in `tb_top`,
    Icarus's has `tb_top` alone, a VCD may add `TOP.`; names are never guessed."""
    import pywellen

    found: dict[str, tuple[str, int]] = {}
    for var in pywellen.Waveform(str(wave)).all_vars():
        full = var.full_name
        parts = full.split(".")
        if "tb_top" not in parts:
            continue  # ($rootio: copies of the top's ports)
        rel = ".".join(parts[parts.index("tb_top") + 1:])
        if rel not in found or len(full) < len(found[rel][0]):
            found[rel] = (full, var.bitwidth)
    return found


def write_gtkw(wave: str | Path) -> tuple[Path, list[str]]:
    """`<wave>.gtkw` beside the waveform: the signals above, grouped, under the names the
    file itself uses. Returns the save file and the wanted signals the file lacks."""
    wave = Path(wave)
    have = _scopes_of(wave)
    missing: list[str] = []
    lines = [f'[dumpfile] "{wave}"', "[timestart] 0", "[sst_expanded] 1"]
    for group, sigs in SIGNALS:
        lines += ["@800200", f"-{group}"]
        for name in sigs:
            if name not in have:
                missing.append(name)
                continue
            full, width = have[name]
            if width == 1:
                lines += ["@28", full]
            else:
                lines += ["@22", f"{full}[{width - 1}:0]"]
        lines += ["@1000200", f"-{group}"]
    out = wave.with_suffix(".gtkw")
    out.write_text("\n".join(lines) + "\n")
    return out, missing


def gtkw_signals(gtkw: str | Path) -> list[str]:
    """The signals a save file names, without their `[msb:lsb]` (for checking them)."""
    names = []
    for line in Path(gtkw).read_text().splitlines():
        if line and line[0] not in "[@-*":
            names.append(line.split("[", 1)[0])
    return names
