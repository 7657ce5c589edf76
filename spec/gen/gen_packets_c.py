"""Render include/gpucosim_packets.h, the packet formats for a C driver, from the PM4 table
(spec/packets.py) and the SDMA table (spec/sdma/packets.py): what docs/packets.md shows,
as macros. spec/gen/generate.py adds the banner and writes the file.

Each name says one thing, as in the registers header (spec/gen/cnames.py): a table that would
define a name twice (a field's named value SHIFT beside its _SHIFT), or make a packet's
constant a field's prefix too (a field INDEX beside the packet's _INDEX), or reuse a name of
gpucosim_regs.h (a driver includes both), is refused with one line.
"""

from __future__ import annotations

from spec import packets as pm4_table
from spec.gen.cnames import CNames
from spec.layout import Field
from spec.sdma import packets as sdma_table

PREFIX = "GPUCOSIM"
PM4_SRC, SDMA_SRC = "spec/packets.py", "spec/sdma/packets.py"


def _field(names: CNames, prefix: str, f: Field, label: str, src: str) -> list[str]:
    """DWORD (index in the packet: 0 is the header), SHIFT, MASK, WIDTH, SET(x), and the
    field's named values. `label` names the field in a refusal ("WRITE_DATA.DST_SEL")."""
    n = f"{prefix}_{f.name}"
    names.field(n, label, src)

    def define(name: str, value: str, what: str, comment: str = "") -> str:
        return names.define(name, value, what, comment, src)

    out = [define(f"{n}_DWORD", str(f.dword + 1), f"{label}'s dword", f"{f.span}"),
           define(f"{n}_SHIFT", str(f.lsb), f"{label}'s shift"),
           define(f"{n}_MASK", f"{f.mask:#010x}u", f"{label}'s mask"),
           define(f"{n}_WIDTH", str(f.width), f"{label}'s width"),
           define(f"{n}_SET(x)", f"(((uint32_t)(x) << {f.lsb}) & {f.mask:#010x}u)", f"{label}'s SET(x)")]
    for e in f.enum:
        out.append(define(f"{n}_{e.name}", f"{e.value}u", f"{label}'s value {e.name}",
                          "" if e.supported else "not supported by this device"))
    return out


def _pm4(names: CNames) -> list[str]:
    hdr = pm4_table.HEADER
    t, c, o = hdr.field("TYPE"), hdr.field("COUNT"), hdr.field("OPCODE")
    define = names.define
    out = ["/* PM4 packets (spec/packets.py, docs/packets.md): a type-3 header, then COUNT + 1 payload",
           " * dwords. <P>_DWORD is a field's dword in the packet (0 the header, 1 the first payload",
           " * dword: packets.md's payload dword d is DWORD d + 1); <P>_DWORDS a fixed-length packet's",
           " * length, or a variable one's without its data (NOP: payload, WRITE_DATA: data). */",
           define(f"{PREFIX}_PM4_HDR(opcode, count)",
                  f"(({pm4_table.PACKET_TYPE3}u << {t.lsb}) | (((uint32_t)(count) << {c.lsb}) & {c.mask:#010x}u)"
                  f" | (((uint32_t)(opcode) << {o.lsb}) & {o.mask:#010x}u))", "the PM4 header macro",
                  "COUNT = payload dwords - 1"),
           define(f"{PREFIX}_PM4_NOP_PAD", f"{pm4_table.NOP_PAD:#010x}u", "the PM4 NOP pad",
                  "one-dword NOP: COUNT 0x3FFF"),
           define(f"{PREFIX}_PM4_TYPE2_FILLER", f"{pm4_table.TYPE2_FILLER:#010x}u", "the PM4 type-2 filler",
                  "any type-2 dword pads one dword"),
           define(f"{PREFIX}_PM4_PACKET_COUNT", str(len(pm4_table.PACKETS)), "the count of PM4 packet kinds",
                  "kinds: PERF_PACKETS(INDEX)")]
    for f in hdr.fields:
        out += _field(names, f"{PREFIX}_PM4_HDR", f, f"PM4 header.{f.name}", PM4_SRC)
    for p in pm4_table.PACKETS:
        n = f"{PREFIX}_PM4_{p.name}"
        out += ["", f"/* {p.name}: {p.doc.split('. ')[0].rstrip('.')} */",
                define(f"{n}_OPCODE", f"{p.opcode:#04x}u", f"the opcode of {p.name}"),
                define(f"{n}_INDEX", str(p.index), f"the PERF_PACKETS index of {p.name}", "PERF_PACKETS index"),
                define(f"{n}_DWORDS", str(1 + p.fixed), f"the length of {p.name}",
                       f"then {p.tail.name}[] ({p.tail.min} or more)" if p.tail else "")]
        for f in p.fields:
            out += _field(names, n, f, f"{p.name}.{f.name}", PM4_SRC)
    return out


def _sdma(names: CNames) -> list[str]:
    op, sub = sdma_table.SDMA_OP, sdma_table.SDMA_SUB_OP

    def define(name: str, value: str, what: str, comment: str = "") -> str:
        return names.define(name, value, what, comment, SDMA_SRC)

    out = ["", "/* SDMA packets (spec/sdma/packets.py, docs/packets.md): the header holds OP and SUB_OP",
           " * (and packet-specific bits, DWORD 0); the pair fixes the length but for NOP and",
           " * WRITE_LINEAR, whose COUNT says how many dwords follow. Byte counts are bytes - 1. */",
           define(f"{PREFIX}_SDMA_HDR(op, sub_op)",
                  f"((((uint32_t)(op) << {op.lsb}) & {op.mask:#010x}u) | (((uint32_t)(sub_op) << {sub.lsb}) & "
                  f"{sub.mask:#010x}u))", "the SDMA header macro"),
           define(f"{PREFIX}_SDMA_NOP_PAD", f"{sdma_table.NOP_PAD:#010x}u", "the SDMA NOP pad", "one-dword NOP"),
           define(f"{PREFIX}_SDMA_PACKET_COUNT", str(len(sdma_table.SDMA_PACKETS)), "the count of SDMA packet kinds",
                  "kinds: PERF_SDMA_PACKETS(INDEX)"),
           define(f"{PREFIX}_SDMA_POLL_RETRY_FOREVER", f"{sdma_table.RETRY_FOREVER:#x}u",
                  "POLL_REGMEM's retry-forever count", "POLL_REGMEM RETRY_COUNT")]
    for p in sdma_table.SDMA_PACKETS:
        n = f"{PREFIX}_SDMA_{p.name}"
        out += ["", f"/* SDMA {p.name}: {p.doc.split('. ')[0].rstrip('.')} */",
                define(f"{n}_OP", f"{p.op}u", f"the OP of SDMA {p.name}"),
                define(f"{n}_SUB_OP", f"{p.sub_op}u", f"the SUB_OP of SDMA {p.name}"),
                define(f"{n}_INDEX", str(p.index), f"the PERF_SDMA_PACKETS index of SDMA {p.name}",
                       "PERF_SDMA_PACKETS index"),
                define(f"{n}_DWORDS", str(1 + p.fixed), f"the length of SDMA {p.name}",
                       f"then {p.tail.name}[]" if p.tail else "")]
        for f in p.fields:
            if f.name not in ("OP", "SUB_OP"):
                out += _field(names, n, f, f"SDMA {p.name}.{f.name}", SDMA_SRC)
    return out


def render_c(banner: str, regs_names: CNames | None = None) -> str:
    """include/gpucosim_packets.h. `regs_names`: the registers header's names (CNames), which
    none of this header's may repeat; a refusal is a ValueError of one line."""
    names = CNames("packets C header", PM4_SRC, 48, after=regs_names)
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
    out += _pm4(names) + _sdma(names)
    out += ["", "#endif /* GPUCOSIM_PACKETS_H */", ""]
    names.check()
    return "\n".join(out)
