"""Render include/gpucosim_packets.h, the packet formats for a C driver, from the PM4 table
(spec/packets.py) and the SDMA table (spec/sdma/packets.py): what docs/packets.md shows,
as macros. spec/gen/generate.py adds the banner and writes the file.
"""

from __future__ import annotations

from spec import packets as pm4_table
from spec.layout import Field
from spec.sdma import packets as sdma_table

PREFIX = "GPUCOSIM"


def _define(name: str, value: str, comment: str = "") -> str:
    line = f"#define {name:<48} {value}"
    return f"{line}  /* {comment} */" if comment else line


def _field(prefix: str, f: Field) -> list[str]:
    """DWORD (index in the packet: 0 is the header), SHIFT, MASK, WIDTH, SET(x), and the
    field's named values."""
    n = f"{prefix}_{f.name}"
    out = [_define(f"{n}_DWORD", str(f.dword + 1), f"{f.span}"),
           _define(f"{n}_SHIFT", str(f.lsb)),
           _define(f"{n}_MASK", f"{f.mask:#010x}u"),
           _define(f"{n}_WIDTH", str(f.width)),
           _define(f"{n}_SET(x)", f"(((uint32_t)(x) << {f.lsb}) & {f.mask:#010x}u)")]
    for e in f.enum:
        out.append(_define(f"{n}_{e.name}", f"{e.value}u", "" if e.supported else "not supported by this device"))
    return out


def _pm4() -> list[str]:
    hdr = pm4_table.HEADER
    t, c, o = hdr.field("TYPE"), hdr.field("COUNT"), hdr.field("OPCODE")
    out = ["/* PM4 packets (spec/packets.py, docs/packets.md): a type-3 header, then COUNT + 1 payload",
           " * dwords. <P>_DWORD is a field's dword in the packet (0 the header, 1 the first payload",
           " * dword: packets.md's payload dword d is DWORD d + 1); <P>_DWORDS a fixed-length packet's",
           " * length, or a variable one's without its data (NOP: payload, WRITE_DATA: data). */",
           _define(f"{PREFIX}_PM4_HDR(opcode, count)",
                   f"(({pm4_table.PACKET_TYPE3}u << {t.lsb}) | (((uint32_t)(count) << {c.lsb}) & {c.mask:#010x}u)"
                   f" | (((uint32_t)(opcode) << {o.lsb}) & {o.mask:#010x}u))",
                   "COUNT = payload dwords - 1"),
           _define(f"{PREFIX}_PM4_NOP_PAD", f"{pm4_table.NOP_PAD:#010x}u", "one-dword NOP: COUNT 0x3FFF"),
           _define(f"{PREFIX}_PM4_TYPE2_FILLER", f"{pm4_table.TYPE2_FILLER:#010x}u", "any type-2 dword pads one dword"),
           _define(f"{PREFIX}_PM4_PACKET_COUNT", str(len(pm4_table.PACKETS)), "kinds: PERF_PACKETS(INDEX)")]
    for f in hdr.fields:
        out += _field(f"{PREFIX}_PM4_HDR", f)
    for p in pm4_table.PACKETS:
        n = f"{PREFIX}_PM4_{p.name}"
        out += ["", f"/* {p.name}: {p.doc.split('. ')[0].rstrip('.')} */",
                _define(f"{n}_OPCODE", f"{p.opcode:#04x}u"),
                _define(f"{n}_INDEX", str(p.index), "PERF_PACKETS index"),
                _define(f"{n}_DWORDS", str(1 + p.fixed),
                        f"then {p.tail.name}[] ({p.tail.min} or more)" if p.tail else "")]
        for f in p.fields:
            out += _field(n, f)
    return out


def _sdma() -> list[str]:
    op, sub = sdma_table.SDMA_OP, sdma_table.SDMA_SUB_OP
    out = ["", "/* SDMA packets (spec/sdma/packets.py, docs/packets.md): the header holds OP and SUB_OP",
           " * (and packet-specific bits, DWORD 0); the pair fixes the length but for NOP and",
           " * WRITE_LINEAR, whose COUNT says how many dwords follow. Byte counts are bytes - 1. */",
           _define(f"{PREFIX}_SDMA_HDR(op, sub_op)",
                   f"((((uint32_t)(op) << {op.lsb}) & {op.mask:#010x}u) | (((uint32_t)(sub_op) << {sub.lsb}) & "
                   f"{sub.mask:#010x}u))"),
           _define(f"{PREFIX}_SDMA_NOP_PAD", f"{sdma_table.NOP_PAD:#010x}u", "one-dword NOP"),
           _define(f"{PREFIX}_SDMA_PACKET_COUNT", str(len(sdma_table.SDMA_PACKETS)),
                   "kinds: PERF_SDMA_PACKETS(INDEX)"),
           _define(f"{PREFIX}_SDMA_POLL_RETRY_FOREVER", f"{sdma_table.RETRY_FOREVER:#x}u", "POLL_REGMEM RETRY_COUNT")]
    for p in sdma_table.SDMA_PACKETS:
        n = f"{PREFIX}_SDMA_{p.name}"
        out += ["", f"/* SDMA {p.name}: {p.doc.split('. ')[0].rstrip('.')} */",
                _define(f"{n}_OP", f"{p.op}u"), _define(f"{n}_SUB_OP", f"{p.sub_op}u"),
                _define(f"{n}_INDEX", str(p.index), "PERF_SDMA_PACKETS index"),
                _define(f"{n}_DWORDS", str(1 + p.fixed), f"then {p.tail.name}[]" if p.tail else "")]
        for f in p.fields:
            if f.name not in ("OP", "SUB_OP"):
                out += _field(n, f)
    return out


def render_c(banner: str) -> str:
    out = [f"/* {banner} */",
           "/* gpucosim packet formats for a C driver: PM4 for the CP's rings and IBs, SDMA for the",
           " * copy engine's. For packet P and its field F:",
           " *   GPUCOSIM_PM4_P_OPCODE / GPUCOSIM_SDMA_P_OP, _SUB_OP; _INDEX (the PERF_*PACKETS",
           " *   index); _DWORDS (length with no variable part); and per field",
           " *   GPUCOSIM_..._P_F_DWORD (0 = the header), _SHIFT, _MASK, _WIDTH, _SET(x), and",
           " *   GPUCOSIM_..._P_F_<VALUE> for its named values. An address split into _LO/_HI fields",
           " *   is the byte address: ADDR_LO's dword holds bits 31:0 (its low bits must be 0),",
           " *   ADDR_HI's bits 63:32. The registers and the IH entry are in gpucosim_regs.h. */",
           "", "#ifndef GPUCOSIM_PACKETS_H", "#define GPUCOSIM_PACKETS_H", "", "#include <stdint.h>", ""]
    out += _pm4() + _sdma()
    out += ["", "#endif /* GPUCOSIM_PACKETS_H */", ""]
    return "\n".join(out)
