"""include/gpucosim_packets.h is enough for a C driver to build every packet: a C program,
compiled here by the system's C compiler, checks each field's dword, shift, mask, width and
named values against the tables (spec/packets.py, spec/sdma/packets.py), and builds a fence,
an IB, a wait, a copy and the SDMA packets the way an outside driver writer would, with the
header's macros alone, to the dwords the Python builders give. Its registers and IH entry are
tests/spec/c_headers/test_c_header.py's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from spec import packets as pm4_table, pm4, sdma
from spec.sdma import packets as sdma_table

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "include" / "gpucosim_packets.h"

# What an outsider writes in C with the header (left), and what the builders give (right).
P, S = "GPUCOSIM_PM4_", "GPUCOSIM_SDMA_"
BUILT = {
    "release_mem": (
        [f"{P}HDR({P}RELEASE_MEM_OPCODE, {P}RELEASE_MEM_DWORDS - 2)",
         f"{P}RELEASE_MEM_EVENT_TYPE_SET({P}RELEASE_MEM_EVENT_TYPE_CACHE_FLUSH_AND_INV_TS_EVENT)"
         f" | {P}RELEASE_MEM_EVENT_INDEX_SET({P}RELEASE_MEM_EVENT_INDEX_END_OF_PIPE)",
         f"{P}RELEASE_MEM_DATA_SEL_SET({P}RELEASE_MEM_DATA_SEL_DATA_64)"
         f" | {P}RELEASE_MEM_INT_SEL_SET({P}RELEASE_MEM_INT_SEL_SEND_INT_ON_CONFIRM)",
         "(uint32_t)0x40010u", "0x0u", "0x9u", "0x1u", "0xabcu"],
        pm4.release_mem(0x40010, 0x1_0000_0009, data_sel=2, int_sel=2, int_ctxid=0xABC)),
    "indirect_buffer": (
        [f"{P}HDR({P}INDIRECT_BUFFER_OPCODE, {P}INDIRECT_BUFFER_DWORDS - 2)", "(uint32_t)0x50000u", "0x0u",
         f"{P}INDIRECT_BUFFER_IB_SIZE_SET(40) | {P}INDIRECT_BUFFER_VMID_SET(3) | {P}INDIRECT_BUFFER_CHAIN_SET(1)"],
        pm4.indirect_buffer(0x50000, 40, vmid=3, chain=1)),
    "wait_reg_mem": (
        [f"{P}HDR({P}WAIT_REG_MEM_OPCODE, {P}WAIT_REG_MEM_DWORDS - 2)",
         f"{P}WAIT_REG_MEM_FUNCTION_SET({P}WAIT_REG_MEM_FUNCTION_GE)"
         f" | {P}WAIT_REG_MEM_MEM_SPACE_SET({P}WAIT_REG_MEM_MEM_SPACE_MEMORY)",
         "0x8000u", "0x1u", "0x7u", "0xffffffffu", f"{P}WAIT_REG_MEM_POLL_INTERVAL_SET(16)"],
        pm4.wait_reg_mem(0x1_0000_8000, 7, 0xFFFF_FFFF, 5)),
    "write_data": (
        [f"{P}HDR({P}WRITE_DATA_OPCODE, {P}WRITE_DATA_DWORDS - 2 + 2)",
         f"{P}WRITE_DATA_DST_SEL_SET({P}WRITE_DATA_DST_SEL_MEMORY)", "0x40000u", "0x0u", "0x11u", "0x22u"],
        pm4.write_data(0x40000, [0x11, 0x22])),
    "dma_fill": (
        [f"{P}HDR({P}DMA_DATA_OPCODE, {P}DMA_DATA_DWORDS - 2)",
         f"{P}DMA_DATA_SRC_SEL_SET({P}DMA_DATA_SRC_SEL_DATA) | {P}DMA_DATA_CP_SYNC_SET(1)",
         "0x5a5a5a5au", "0x0u", "0x200000u", "0x0u", f"{P}DMA_DATA_BYTE_COUNT_SET(4096)"],
        pm4.dma_data(0x200000, 0x5A5A5A5A, 4096, src_sel=2, cp_sync=1)),
    "nop": ([f"{P}HDR({P}NOP_OPCODE, 1)", "0x0u", "0x0u", f"{P}NOP_PAD", f"{P}TYPE2_FILLER"],
            pm4.nop(2) + [pm4_table.NOP_PAD, pm4_table.TYPE2_FILLER]),
    "sdma_copy": (
        [f"{S}HDR({S}COPY_LINEAR_OP, {S}COPY_LINEAR_SUB_OP)", f"{S}COPY_LINEAR_COUNT_SET(100 - 1)", "0x0u",
         "0x1001u", "0x0u", "0x2003u", "0x0u"],
        sdma.copy_linear(0x2003, 0x1001, 100)),
    "sdma_fence_trap": (
        [f"{S}HDR({S}FENCE_OP, {S}FENCE_SUB_OP)", "0x40020u", "0x0u", "0xfeu",
         f"{S}HDR({S}TRAP_OP, {S}TRAP_SUB_OP)", f"{S}TRAP_INT_CONTEXT_SET(0x123)"],
        sdma.fence(0x40020, 0xFE) + sdma.trap(int_context=0x123)),
    "sdma_poll": (
        [f"{S}HDR({S}POLL_REGMEM_OP, {S}POLL_REGMEM_SUB_OP) | {S}POLL_REGMEM_FUNC_SET({S}POLL_REGMEM_FUNC_EQ)"
         f" | {S}POLL_REGMEM_MEM_POLL_SET({S}POLL_REGMEM_MEM_POLL_MEMORY)", "0x40040u", "0x0u", "0x1u", "0xffu",
         f"{S}POLL_REGMEM_RETRY_COUNT_SET(GPUCOSIM_SDMA_POLL_RETRY_FOREVER) | {S}POLL_REGMEM_INTERVAL_SET(10)"],
        sdma.poll_regmem(0x40040, 1, 0xFF, 3)),
    "sdma_fill_write_ib": (
        [f"{S}HDR({S}CONSTANT_FILL_OP, {S}CONSTANT_FILL_SUB_OP)", "0x3001u", "0x0u", "0xa1b2c3d4u",
         f"{S}CONSTANT_FILL_COUNT_SET(6 - 1)",
         f"{S}HDR({S}WRITE_LINEAR_OP, {S}WRITE_LINEAR_SUB_OP)", "0x40000u", "0x0u",
         f"{S}WRITE_LINEAR_COUNT_SET(2 - 1)", "0x5u", "0x6u",
         f"{S}HDR({S}INDIRECT_BUFFER_OP, {S}INDIRECT_BUFFER_SUB_OP) | {S}INDIRECT_BUFFER_VMID_SET(2)", "0x50000u",
         "0x0u", f"{S}INDIRECT_BUFFER_IB_SIZE_SET(8)", "0x0u", "0x0u", f"{S}NOP_PAD"],
        sdma.constant_fill(0x3001, 0xA1B2C3D4, 6) + sdma.write_linear(0x40000, [5, 6])
        + sdma.indirect_buffer(0x50000, 8, vmid=2) + [sdma_table.NOP_PAD]),
}


def _program() -> tuple[str, int]:
    checks: list[str] = []

    def eq(expr: str, value: int, what: str) -> None:
        checks.append(f'    if ((unsigned long long)({expr}) != {value}ull) '
                      f'{{ printf("{what}: %llu, not {value}\\n", (unsigned long long)({expr})); bad++; }}')

    tables = [("GPUCOSIM_PM4_HDR", None, pm4_table.HEADER.fields)]
    tables += [(f"GPUCOSIM_PM4_{p.name}", p, p.fields) for p in pm4_table.PACKETS]
    tables += [(f"GPUCOSIM_SDMA_{p.name}", p, [f for f in p.fields if f.name not in ("OP", "SUB_OP")])
               for p in sdma_table.SDMA_PACKETS]
    for prefix, p, fields in tables:
        if isinstance(p, pm4_table.PacketDef):
            eq(f"{prefix}_OPCODE", p.opcode, f"{p.name} opcode")
        elif p is not None:
            eq(f"{prefix}_OP", p.op, f"SDMA {p.name} op")
            eq(f"{prefix}_SUB_OP", p.sub_op, f"SDMA {p.name} sub_op")
        if p is not None:
            eq(f"{prefix}_INDEX", p.index, f"{p.name} index")
            eq(f"{prefix}_DWORDS", 1 + p.fixed, f"{p.name} dwords")
        for f in fields:
            n = f"{prefix}_{f.name}"
            eq(f"{n}_DWORD", f.dword + 1, f"{n} dword")
            eq(f"{n}_SHIFT", f.lsb, f"{n} shift")
            eq(f"{n}_MASK", f.mask, f"{n} mask")
            eq(f"{n}_WIDTH", f.width, f"{n} width")
            eq(f"{n}_SET({f.max}u)", f.mask, f"{n} SET")
            for e in f.enum:
                eq(f"{n}_{e.name}", e.value, f"{n}_{e.name}")
    for name, (c_dwords, want) in BUILT.items():
        assert len(c_dwords) == len(want), name
        checks.append(f"    {{ const uint32_t {name}[] = {{{', '.join(c_dwords)}}};")
        for i, w in enumerate(want):
            eq(f"{name}[{i}]", w, f"{name} dword {i}")
        checks.append("    }")
    src = "\n".join(["#include <stdio.h>", '#include "gpucosim_packets.h"', '#include "gpucosim_regs.h"', "",
                     "int main(void) {", "    int bad = 0;", *checks,
                     f'    if (!bad) printf("ok {len(checks)}\\n");', "    return bad != 0;", "}", ""])
    return src, len(checks)


def _compile_and_run(tmp_path: Path, header_dir: Path, compiler: str, std: str) -> subprocess.CompletedProcess:
    src, _ = _program()
    c = tmp_path / ("packets.c" if compiler == "cc" else "packets.cpp")
    c.write_text(src)
    exe = tmp_path / f"packets-{compiler.replace('+', 'x')}"
    build = subprocess.run([compiler, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", str(header_dir),
                            "-I", str(HEADER.parent), str(c), "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, f"{compiler} could not compile against the header:\n{build.stderr}"
    return subprocess.run([str(exe)], capture_output=True, text=True)


@pytest.mark.parametrize("compiler,std", [("cc", "c99"), ("c++", "c++11")])
def test_c_packets_build_what_the_builders_build(tmp_path, compiler, std):
    if shutil.which(compiler) is None:
        pytest.fail(f"no `{compiler}` on PATH: a C compiler is a prerequisite (README)")
    _, n = _program()
    res = _compile_and_run(tmp_path, HEADER.parent, compiler, std)
    assert res.returncode == 0 and res.stdout == f"ok {n}\n", res.stdout
    assert n > 600


def test_a_wrong_packet_header_is_caught(tmp_path):
    """The check bites: a wrong INT_SEL shift in a copy of the header fails it, by name."""
    text = HEADER.read_text()
    wrong = re.sub(r"(#define GPUCOSIM_PM4_RELEASE_MEM_INT_SEL_SHIFT +)24\b", r"\g<1>23", text)
    assert wrong != text
    (tmp_path / "gpucosim_packets.h").write_text(wrong)
    res = _compile_and_run(tmp_path, tmp_path, "cc", "c99")
    assert res.returncode == 1 and "GPUCOSIM_PM4_RELEASE_MEM_INT_SEL shift: 23, not 24" in res.stdout, res.stdout
