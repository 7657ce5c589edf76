"""Render docs/packets.md, the packet reference, from spec/packets.py.

`render_markdown()` returns the text; spec/gen/generate.py adds its "generated" banner
and writes the file (so the staleness check covers it like the register docs).
"""

from __future__ import annotations

from spec.packets import HEADER, MAX_PAYLOAD, NOP_PAD, PACKETS, TYPE2_FILLER, Field, PacketDef
from spec.pm4 import header


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _hex_field(f: Field) -> bool:
    """Same choice as the disassembler: hex unless asked, or 4 bits or fewer."""
    return not f.decimal


def _enum_text(f: Field) -> str:
    if not f.enum:
        return ""
    items = []
    for e in f.enum:
        note = "" if e.supported else " *(not supported by this device)*"
        number = f"{e.value:#x}" if _hex_field(f) else str(e.value)
        items.append(f"`{number}` {e.name}: {e.doc}{note}")
    if f.open_enum:
        items.append("other values: allowed, passed through")
    return "<br>" + "<br>".join(items)


def _reserved_spans(mask: int) -> list[tuple[int, int]]:
    """(msb, lsb) runs of zero bits in a 32-bit mask, highest first."""
    spans, bit = [], 31
    while bit >= 0:
        if mask >> bit & 1:
            bit -= 1
            continue
        msb = bit
        while bit >= 0 and not mask >> bit & 1:
            bit -= 1
        spans.append((msb, bit + 1))
    return spans


def _span(msb: int, lsb: int) -> str:
    return f"[{msb}]" if msb == lsb else f"[{msb}:{lsb}]"


def _field_rows(fields: list[Field], dword_label: str, p: PacketDef | None) -> list[str]:
    """Rows for one dword, highest bits first, with reserved gaps made explicit."""
    rows: list[tuple[int, str]] = []
    mask = 0
    for f in fields:
        mask |= f.mask
        extra = ""
        if p is not None and (v := p.value_of(f.name)) is not None:
            extra = f" Part of `{v.name}`."
        default = "" if p is None or f.default is None or f.arg_name in p.args \
            else f" Builder default: {f.default}."
        rows.append((f.msb, f"| {dword_label} | {f.span} | {f.name} | "
                             f"{_cell(f.doc + extra + default)}{_enum_text(f)} |"))
    for msb, lsb in _reserved_spans(mask):
        rows.append((msb, f"| {dword_label} | {_span(msb, lsb)} | *reserved* | Must be 0. |"))
    return [r for _, r in sorted(rows, key=lambda r: -r[0])]


def _signature(p: PacketDef) -> str:
    parts = {n for v in p.values for n in v.fields}
    kw = [f for f in p.fields if f.name not in parts and f.arg_name not in p.args]
    args = list(p.args)
    if kw:
        args += ["*"] + [f"{f.arg_name}={f.default}" for f in kw]
    return f"pm4.{p.name.lower()}({', '.join(args)})"


def _length(p: PacketDef) -> str:
    if p.tail is None:
        return f"{p.fixed + 1} dwords (COUNT = {p.min_count})"
    n = p.tail.name
    count = f"COUNT = {p.fixed - 1} + N".replace("COUNT = -1 + N", "COUNT = N - 1")
    if p.count_wraps:  # NOP: the all-ones COUNT is the header alone, so N stops one short
        count += f", mod 2^14: N = 0 is COUNT {HEADER.field('COUNT').max:#x}"
    return (f"{p.fixed + 1} + N dwords, N = number of {n} dwords, {p.tail.min} ≤ N ≤ "
            f"{p.max_payload - p.fixed} ({count})")


def _packet_section(p: PacketDef) -> list[str]:
    out = [f"### {p.name} (opcode {p.opcode:#04x})", "", p.doc, ""]
    out.append(f"- Length: {_length(p)}.")
    if p.count_wraps:  # the shortest form is the header alone, COUNT all ones
        out.append(f"- Header: `{header(p.opcode, HEADER.field('COUNT').max):#010x}` for the shortest form "
                   f"(N = 0), `{header(p.opcode, 0):#010x}` for N = 1.")
    else:
        out.append(f"- Header: `{header(p.opcode, p.min_count):#010x}`"
                   + (" for the shortest form." if p.tail else "."))
    out.append(f"- Builder: `{_signature(p)}`.")
    for v in p.values:
        align = p.value_align(v)
        out.append(f"- `{v.name}` = {':'.join(reversed(v.fields))} ({p.value_width(v)} bits"
                   + (f", {align}-byte aligned" if align > 1 else "") + f"): {v.doc}")
    for r in p.rules:
        need = []
        if r.align > 1:
            need.append(f"{r.align}-byte aligned")
        if r.width is not None:
            need.append(f"at most {r.width} bits")
        out.append(f"- When {r.when} is {' or '.join(r.among)}: `{r.value}` must be "
                   f"{' and '.join(need)}. {r.doc}")
    out += ["", "| dword | bits | field | description |", "|---|---|---|---|"]
    for d in range(p.fixed):
        out += _field_rows(list(p.fields_in(d)), str(d), p)
    if p.tail:
        first = str(p.fixed)
        what = "ignored" if p.tail.ignored else "value"
        out.append(f"| {first}… | [31:0] | {p.tail.name}[] | {_cell(p.tail.doc)} ({what}; "
                   f"at least {p.tail.min}) |")
    out.append("")
    return out


def render_markdown() -> str:
    """The whole packet reference as Markdown."""
    out = [
        "# Packet reference: PM4 and SDMA",
        "",
        "The command processor reads PM4 packets from its ring and from indirect buffers. "
        "Every packet is a header dword followed by COUNT + 1 payload dwords; layouts and "
        "opcode numbers are AMD's (gfx9 PM4), cut down to what this device implements. "
        "This page, the RTL decoder, the UMD/KMD builders (`spec/pm4.py`) and the "
        "disassembler all come from one table, `spec/packets.py`; so does the C header "
        "`include/gpucosim_packets.h` (`GPUCOSIM_PM4_<P>_OPCODE`, `GPUCOSIM_PM4_<P>_<F>_DWORD/_SHIFT/_MASK/_SET`, "
        "named values; the SDMA packets as `GPUCOSIM_SDMA_<P>_*`). Every name in it means one thing, "
        "here and beside `include/gpucosim_regs.h`: the generator refuses a table in which a name would "
        "be defined twice (a named value SHIFT), be a field's prefix too (a field INDEX beside the "
        "packet's `_INDEX`) or repeat a register header's name.",
        "",
        "Conventions: *dword* is the payload dword index (0 is the first dword after the "
        "header), as `Field.dword` in the table. Bits not listed are reserved and must be "
        "0: builders write 0, the decoder reports any that are set (`Packet.reserved`), the CP "
        "ignores them (except the bits below an address's low field, which it checks as alignment) "
        "and the KMD's checker refuses them. Values the table "
        "marks *not supported* are AMD's, kept for recognition; the CP refuses them "
        "(CP_ERROR UNSUPPORTED) and the builders will not produce them.",
        "",
        "## Header",
        "",
        "| dword | bits | field | description |",
        "|---|---|---|---|",
        *_field_rows(list(HEADER.fields), "hdr", None),
        "",
        f"A packet is COUNT + 2 dwords long, so COUNT ≤ {HEADER.field('COUNT').max} allows up to "
        f"{MAX_PAYLOAD} payload dwords. A type-3 header whose opcode is not below is an illegal "
        "opcode; a COUNT outside the packet's range is a bad COUNT.",
        "",
        f"**One-dword pads.** AMD pads rings and IBs with the header-only NOP `{NOP_PAD:#010x}` "
        "(COUNT 0x3FFF: no payload; `pm4.NOP_PAD`, Mesa's `PKT3_NOP_PAD`); `pm4.pad(n)` pads n "
        "dwords as Mesa's winsys does (one NOP, or NOP_PAD for one dword). Any type-2 dword "
        f"(bits 31:30 = 2, bits 29:0 PAD ignored; `{TYPE2_FILLER:#010x}` is `pm4.TYPE2_FILLER`) is "
        "a one-dword filler too. Type-0 and type-1 dwords are illegal.",
        "",
        "## Packets",
        "",
        "Index is the packet's position in the table: PERF_PACKETS[index] counts it.",
        "",
        "| index | packet | opcode | length (dwords) | description |",
        "|---|---|---|---|---|",
    ]
    for p in PACKETS:
        length = str(p.fixed + 1) if p.tail is None else f"{p.min_payload + 1}+"
        out.append(f"| {p.index} | [{p.name}](#{p.name.lower()}-opcode-{p.opcode:#04x}) | "
                   f"{p.opcode:#04x} | {length} | {_cell(p.doc)} |")
    out.append("")
    for p in PACKETS:
        out += _packet_section(p)
    out += _sdma_sections()
    from spec import gfx9
    out += ["## Differences from AMD gfx9", "",
            "Field positions, opcodes and values are gfx9's (amdgpu soc15d.h, Mesa sid.h); "
            "tests/spec/amd/test_amd_conformance.py runs AMD's own dwords. What differs on purpose "
            "(the same table is in [hardware.md](hardware.md#differences-from-amd-gfx9)):", "",
            gfx9.render_table()]
    return "\n".join(out).rstrip() + "\n"


def _sdma_signature(p) -> str:
    from spec.sdma import BUILDERS

    return f"sdma.{p.name.lower()}{BUILDERS[p.name].__signature__}".replace("'", "")


def _sdma_sections() -> list[str]:
    """The SDMA copy engine's packets (spec/sdma/packets.py), after the PM4 ones."""
    from spec.sdma.packets import SDMA_OP, SDMA_PACKETS, SDMA_SUB_OP, NOP_PAD

    out = ["## SDMA packets", "",
           "The copy engine (SDMA) reads AMD's SDMA v4 packets from its own ring and IBs "
           "(vega10_sdma_pkt_open.h; docs/hardware.md, \"The SDMA copy engine\"). Dword 0 holds "
           f"OP {SDMA_OP.span} and SUB_OP {SDMA_SUB_OP.span}; the pair fixes the packet's length, except "
           "NOP (its COUNT dwords follow) and WRITE_LINEAR (COUNT + 1 data dwords follow). An unknown pair "
           "stops the queue with ILLEGAL_OPCODE. The one-dword NOP is "
           f"`{NOP_PAD:#010x}`; `sdma.pad(n)` pads with one burst NOP as amdgpu does. Byte counts are "
           "AMD's bytes − 1; the builders (`spec/sdma/codec.py`) take bytes. "
           "*dword* counts the dwords after the header; `hdr` is the header's bits [31:16].", "",
           "| index | packet | op, sub_op | length (dwords) | description |", "|---|---|---|---|---|"]
    for p in SDMA_PACKETS:
        length = str(p.fixed + 1) if p.tail is None else f"{p.fixed + 1 + p.tail.min}+"
        out.append(f"| {p.index} | [SDMA {p.name}](#sdma-{p.name.lower()}) | {p.op}, {p.sub_op} | "
                   f"{length} | {_cell(p.doc)} |")
    out.append("")
    for p in SDMA_PACKETS:
        out += [f"### SDMA {p.name}", "", p.doc, ""]
        if p.tail is None:
            out.append(f"- Length: {p.fixed + 1} dwords.")
        else:
            lf = p.field(p.length_field)
            out.append(f"- Length: {p.fixed + 1} + N dwords, N = {p.length_field}"
                       + (f" + {p.length_bias}" if p.length_bias else "") + f" ({p.tail.min} ≤ N ≤ "
                       f"{lf.max + p.length_bias}).")
        out.append(f"- Header: `{p.header:#010x}` with every header field 0.")
        out.append(f"- Builder: `{_sdma_signature(p)}`.")
        for v in p.values:
            align = p.value_align(v)
            out.append(f"- `{v.name}` = {':'.join(reversed(v.fields))} ({p.value_width(v)} bits"
                       + (f", {align}-byte aligned" if align > 1 else "") + f"): {v.doc}")
        for n in p.minus_one:
            out.append(f"- {n} holds the builder's `{p.field(n).arg_name}` − 1.")
        out += ["", "| dword | bits | field | description |", "|---|---|---|---|"]
        hdr = [SDMA_OP, SDMA_SUB_OP, *p.fields_in(-1)]
        out += _field_rows(hdr, "hdr", None)
        for d in range(p.fixed):
            out += _field_rows(list(p.fields_in(d)), str(d), None)
        if p.tail:
            out.append(f"| {p.fixed}… | [31:0] | {p.tail.name}[] | {_cell(p.tail.doc)} |")
        out.append("")
    return out


if __name__ == "__main__":
    print(render_markdown(), end="")
