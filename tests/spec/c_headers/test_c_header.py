"""The C header is what a C driver needs, and agrees with the register map the KMD uses:
a C program, compiled here by the system's C compiler, checks every register offset,
array layout (GPUCOSIM_R(i), _BASE, _STRIDE, _ELEMS), reset value, field shift, mask and
width, the GET/SET macros and every enum constant of include/gpucosim_regs.h against
kmd_model/regs.py (both generated from spec/regs.rdl). test_c_header_names.py checks its
names and reads it as a binding would."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kmd_model import regs
from spec import ih, vm

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "include" / "gpucosim_regs.h"


def _program() -> tuple[str, int]:
    """A C program that prints every mismatch and "ok <n>"; and n, the number of checks."""
    checks: list[str] = []

    def eq(expr: str, value: int, what: str) -> None:
        checks.append(f'    if ((unsigned long long)({expr}) != {value}ull) '
                      f'{{ printf("{what}: %llu, not {value}\\n", (unsigned long long)({expr})); bad++; }}')

    for cls in regs.REGISTERS:
        r = f"GPUCOSIM_{cls.NAME}"
        n = getattr(cls, "ARRAY_LEN", 1)
        if n > 1:
            eq(f"{r}_ELEMS", n, f"{cls.NAME} elements")
            eq(f"{r}_BASE", cls.ADDR, f"{cls.NAME} base")
            eq(f"{r}_STRIDE", cls.ARRAY_STRIDE, f"{cls.NAME} stride")
            for i in range(n):
                eq(f"{r}({i})", cls.addr(i), f"{cls.NAME}[{i}] offset")
                eq(f"{r}_BASE + {r}_STRIDE * {i}", cls.addr(i), f"{cls.NAME}[{i}] from base and stride")
        else:
            eq(r, cls.ADDR, f"{cls.NAME} offset")
        eq(f"{r}_RESET", cls.RESET, f"{cls.NAME} reset")
        for f in cls.FIELDS:
            fr = f"{r}_{f.name}"
            eq(f"{fr}_SHIFT", f.lsb, f"{cls.NAME}.{f.name} shift")
            eq(f"{fr}_MASK", f.mask, f"{cls.NAME}.{f.name} mask")
            eq(f"{fr}_WIDTH", f.width, f"{cls.NAME}.{f.name} width")
            top = (1 << f.width) - 1
            eq(f"{fr}_GET(0xffffffffu)", top, f"{cls.NAME}.{f.name} GET")
            eq(f"{fr}_SET({top}u)", f.mask, f"{cls.NAME}.{f.name} SET")
            eq(f"{fr}_GET({fr}_SET(1u))", 1, f"{cls.NAME}.{f.name} SET then GET")
    for enum, cname in ((regs.CpError, "CP_ERROR"), (regs.IbLevel, "IB_LEVEL")):
        for m in enum:
            eq(f"GPUCOSIM_{cname}_{m.name}", m.value, f"enum {cname}.{m.name}")
        checks.append(f"    {{ enum gpucosim_{cname.lower()} e = GPUCOSIM_{cname}_{next(iter(enum)).name}; (void)e; }}")
    # the IH entry: a sample entry with every field at a distinct value, read back by GET
    eq("GPUCOSIM_IH_ENTRY_DWORDS", ih.ENTRY_DWORDS, "IH entry dwords")
    eq("GPUCOSIM_IH_ENTRY_BYTES", ih.ENTRY_BYTES, "IH entry bytes")
    values = {f.name: (0x9E3779B9 * (i + 1)) & ((1 << f.width) - 1) for i, f in enumerate(ih.FIELDS)}
    entry = ", ".join(f"{w:#010x}u" for w in ih.encode(**values))
    checks.append(f"    {{ static const uint32_t ih_entry[{ih.ENTRY_DWORDS}] = {{{entry}}};")
    for f in ih.FIELDS:
        n = f"GPUCOSIM_IH_{f.name}"
        eq(f"{n}_DWORD", f.dword, f"IH {f.name} dword")
        eq(f"{n}_SHIFT", f.lsb, f"IH {f.name} shift")
        eq(f"{n}_MASK", f.mask, f"IH {f.name} mask")
        eq(f"{n}_GET(ih_entry)", values[f.name], f"IH {f.name} GET")
    checks.append("    }")
    for enum, cname in ((ih.Client, "IH_CLIENT"), (ih.Source, "IH_SOURCE")):
        for m in enum:
            eq(f"GPUCOSIM_{cname}_{m.name}", int(m), f"enum {cname}.{m.name}")
    # the page-table entry, the fault's access kinds and causes, and the VM_FAULT entry's hints
    eq("GPUCOSIM_VM_PAGE_SHIFT", vm.PAGE_SHIFT, "VM page shift")
    eq("GPUCOSIM_VM_LEVEL_BITS", vm.LEVEL_BITS, "VM level bits")
    eq("GPUCOSIM_VM_ENTRY_ADDR_MASK", vm.ADDR_MASK, "VM entry address mask")
    for b in vm.BITS:
        eq(f"GPUCOSIM_VM_{b.name}", 1 << b.bit, f"VM entry bit {b.name}")
    for enum, cname in ((vm.Access, "VM_ACCESS"), (vm.Cause, "VM_CAUSE")):
        for m in enum:
            eq(f"GPUCOSIM_{cname}_{m.name}", int(m), f"enum {cname}.{m.name}")
    for name in ("READ", "WRITE", "EXE"):
        eq(f"GPUCOSIM_VM_FAULT_HINT_{name}", getattr(vm, f"HINT_{name}"), f"VM fault hint {name}")
    src = "\n".join(["#include <stdio.h>", '#include "gpucosim_regs.h"', "", "int main(void) {",
                     "    int bad = 0;", *checks,
                     f'    if (!bad) printf("ok {len(checks)}\\n");', "    return bad != 0;", "}", ""])
    return src, len(checks)


def _compile_and_run(tmp_path: Path, header_dir: Path, compiler: str, std: str) -> subprocess.CompletedProcess:
    src, _ = _program()
    c = tmp_path / ("check.c" if compiler == "cc" else "check.cpp")
    c.write_text(src)
    exe = tmp_path / f"check-{compiler.replace('+', 'x')}"
    build = subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", str(header_dir),
                            str(c), "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, f"{compiler} could not compile against the header:\n{build.stderr}"
    return subprocess.run([str(exe)], capture_output=True, text=True)


@pytest.mark.parametrize("compiler,std", [("cc", "c99"), ("c++", "c++11")])
def test_c_header_matches_register_map(tmp_path, compiler, std):
    if shutil.which(compiler) is None:
        pytest.fail(f"no `{compiler}` on PATH: a C compiler is a prerequisite (README)")
    _, n = _program()
    res = _compile_and_run(tmp_path, HEADER.parent, compiler, std)
    assert res.returncode == 0 and res.stdout == f"ok {n}\n", res.stdout
    assert n > 500


def test_a_wrong_header_is_caught(tmp_path):
    """The check bites: one wrong mask in a copy of the header fails it, by name."""
    text = HEADER.read_text()
    wrong = re.sub(r"(#define GPUCOSIM_CP_ERROR_LEVEL_MASK +)0x00000300u", r"\g<1>0x00000700u", text)
    assert wrong != text
    (tmp_path / "gpucosim_regs.h").write_text(wrong)
    res = _compile_and_run(tmp_path, tmp_path, "cc", "c99")
    assert res.returncode == 1 and "CP_ERROR.LEVEL mask: 1792, not 768" in res.stdout, res.stdout
