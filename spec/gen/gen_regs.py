"""The register map's reference forms for people: the C header and docs/registers.md.

Both come from what spec/gen/generate.py collects from spec/regs.rdl (registers, fields,
enums), so the offsets, masks and enum values a C driver compiles in are the ones the
RTL decodes and the KMD uses. (PeakRDL's exporters were used before; their header had
no offsets, no enums and hash names for arrays, and their Markdown dropped enums.)

C names, for register R, field F of R, enum E with value V:

    GPUCOSIM_R                  byte offset of R in the MMIO aperture
    GPUCOSIM_R(i)               ... of element i of an array R; GPUCOSIM_R_COUNT, _STRIDE
    GPUCOSIM_R_RESET            R's value after reset, but for fields the hardware drives
    GPUCOSIM_R_F_SHIFT          F's lowest bit
    GPUCOSIM_R_F_MASK           F's bits in place
    GPUCOSIM_R_F_WIDTH          F's width in bits
    GPUCOSIM_R_F_GET(v)         F from a value v of R
    GPUCOSIM_R_F_SET(x)         x placed as F (OR the fields together)
    enum gpucosim_e { GPUCOSIM_E_V = ..., }   (E without the RDL's `_e`)
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spec.gen.generate import FieldInfo, RegInfo

PREFIX = "GPUCOSIM"


def _enum_name(rdl_name: str) -> str:
    return rdl_name.removesuffix("_e").upper()


def _access(f: "FieldInfo") -> str:
    sw = {"r": "R", "rw": "RW", "w": "W"}[f.sw]
    if f.onwrite == "woclr":
        sw = "RW1C"
    if f.singlepulse:
        sw += " (pulse)"
    if f.swwel:
        sw += f" (RO while {f.swwel})"
    return sw


def render_c_header(regs: list["RegInfo"], enums: dict, header: str, mmio_addr_width: int) -> str:
    names: dict[str, str] = {}  # C name -> what defines it, to refuse a clash

    def define(name: str, value: str, what: str, comment: str = "") -> str:
        if name in names:
            raise ValueError(f"C header: {name} would name both {names[name]} and {what}")
        names[name] = what
        line = f"#define {name:<40} {value}"
        return f"{line}  /* {comment} */" if comment else line

    out = [f"/* {header} */",
           "/* gpucosim front-end registers for a C driver: offsets, fields, enums.",
           " *",
           " * For register R and its field F:",
           " *   GPUCOSIM_R               byte offset in the MMIO aperture (arrays: GPUCOSIM_R(i),",
           " *                            GPUCOSIM_R_COUNT, GPUCOSIM_R_STRIDE)",
           " *   GPUCOSIM_R_RESET         value after reset of the fields software stores; a field",
           " *                            the hardware drives (STATUS.IDLE, CAPS ...) reads the",
           " *                            device's state instead (its _RESET bits are 0)",
           " *   GPUCOSIM_R_F_SHIFT / _MASK (in place) / _WIDTH",
           " *   GPUCOSIM_R_F_GET(v)      the field from a register value",
           " *   GPUCOSIM_R_F_SET(x)      x placed as the field",
           " * Enum-encoded fields have an enum gpucosim_<name> with GPUCOSIM_<NAME>_<VALUE>.",
           " * Registers are 32 bits wide; unmapped offsets answer DECERR (docs/registers.md).",
           " */",
           "",
           "#ifndef GPUCOSIM_REGS_H",
           "#define GPUCOSIM_REGS_H",
           "",
           "#include <stdint.h>",
           "",
           define(f"{PREFIX}_MMIO_ADDR_WIDTH", str(mmio_addr_width), "the aperture",
                  "the MMIO aperture is 2^this bytes"),
           ""]
    for ename, members in enums.items():
        e = _enum_name(ename)
        out.append(f"enum gpucosim_{e.lower()} {{")
        for name, value, desc in members:
            cname = f"{PREFIX}_{e}_{name}"
            if cname in names:
                raise ValueError(f"C header: {cname} would name both {names[cname]} and enum {ename}.{name}")
            names[cname] = f"enum {ename}.{name}"
            out.append(f"    {cname + ' = ' + str(value) + ',':<44} /* {desc} */" if desc else
                       f"    {cname} = {value},")
        out += ["};", ""]
    for r in regs:
        base = f"{PREFIX}_{r.name}"
        out.append(f"/* {r.name}: {r.title}. {r.desc} */".replace(". .", ".").replace(". */", " */")
                   if r.desc else f"/* {r.name}: {r.title} */")
        if r.count > 1:
            out.append(define(f"{base}(i)", f"({r.addr:#05x}u + {r.stride}u * (i))", f"register {r.name}"))
            names[base] = f"register {r.name}"
            out.append(define(f"{base}_COUNT", str(r.count), f"{r.name} count", "elements"))
            out.append(define(f"{base}_STRIDE", f"{r.stride}u", f"{r.name} stride", "bytes between elements"))
        else:
            out.append(define(base, f"{r.addr:#05x}u", f"register {r.name}"))
        driven = ("every field the hardware drives: reads the device's state" if len(r.hw_driven) == len(r.fields)
                  else f"but {', '.join(r.hw_driven)}: the device's state" if r.hw_driven else "")
        out.append(define(f"{base}_RESET", f"{r.reset:#010x}u", f"{r.name} reset", driven))
        for f in r.fields:
            fb = f"{base}_{f.name}"
            mask = ((1 << f.width) - 1) << f.lsb
            enc = f", enum gpucosim_{_enum_name(f.encode).lower()}" if f.encode else ""
            out.append(define(f"{fb}_SHIFT", str(f.lsb), f"{r.name}.{f.name}",
                              f"[{f.lsb + f.width - 1}:{f.lsb}] {_access(f)}{enc}"))
            out.append(define(f"{fb}_MASK", f"{mask:#010x}u", f"{r.name}.{f.name} mask"))
            out.append(define(f"{fb}_WIDTH", str(f.width), f"{r.name}.{f.name} width"))
            out.append(define(f"{fb}_GET(v)", f"(((v) & {fb}_MASK) >> {fb}_SHIFT)", f"{r.name}.{f.name} get"))
            out.append(define(f"{fb}_SET(x)", f"(((uint32_t)(x) << {fb}_SHIFT) & {fb}_MASK)",
                              f"{r.name}.{f.name} set"))
        out.append("")
    out += [render_vm_c(), render_ih_c(), "#endif /* GPUCOSIM_REGS_H */", ""]
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(regs: list["RegInfo"], enums: dict, header: str, title: str, desc: str) -> str:
    """docs/registers.md: an overview table, then each register with its fields and the
    values of every enum-encoded field."""
    out = [f"<!-- {header} -->", "", f"# {title}", "", desc, "",
           "Offsets are bytes in the MMIO aperture; every register is 32 bits wide and read and "
           "written whole (byte strobes honoured). Access: R read-only, W write-only (reads return "
           "0), RW read/write, RW1C write 1 to clear, *(pulse)* acts once per write, (RO while X) a write "
           "is ignored while the 1-bit field X is set (a ring's base and size while the ring is enabled). A field whose "
           "reset is — is driven by the hardware: after a reset it reads the device's state (an "
           "idle device's STATUS.IDLE and RB_EMPTY read 1, CAPS its build parameters), and a "
           "register's reset value counts only the other fields. An offset not "
           "listed answers DECERR. The C header `include/gpucosim_regs.h` names all of it "
           "(`GPUCOSIM_<REG>`, `GPUCOSIM_<REG>_<FIELD>_SHIFT/_MASK`, enums), the IH entry and the page-table "
           "entry; `include/gpucosim_packets.h` the packets ([packets.md](packets.md)).", "",
           "| offset | register | name |", "|---|---|---|"]
    for r in regs:
        if r.count > 1:
            out.append(f"| {r.addr:#05x} + {r.stride}·i | [{r.name}[0..{r.count - 1}]](#{r.name.lower()}) | "
                       f"{_cell(r.title)}{' *(model only)*' if r.model_only else ''} |")
        else:
            out.append(f"| {r.addr:#05x} | [{r.name}](#{r.name.lower()}) | {_cell(r.title)}"
                       f"{' *(model only)*' if r.model_only else ''} |")
    out.append("")
    for r in regs:
        where = (f"{r.addr:#05x} + {r.stride}·i, i = 0 … {r.count - 1}" if r.count > 1 else f"{r.addr:#05x}")
        if len(r.hw_driven) == len(r.fields):
            reset = "driven by the hardware (after a reset it reads the device's state)"
        elif r.hw_driven:
            reset = f"reset {r.reset:#010x} but for {', '.join(r.hw_driven)} (the device's state)"
        else:
            reset = f"reset {r.reset:#010x}"
        out += [f"## {r.name}", "", f"**{r.title}** — offset {where}, {reset}.", ""]
        if r.model_only:
            out += ["*Reference model only*: the RTL does not implement this engine yet, so on the "
                    "Verilator and Icarus backends this offset answers DECERR (issue 16).", ""]
        if r.desc:
            out += [r.desc, ""]
        out += ["| bits | field | access | reset | description |", "|---|---|---|---|---|"]
        for f in sorted(r.fields, key=lambda f: -f.lsb):
            bits = f"{f.lsb + f.width - 1}:{f.lsb}" if f.width > 1 else f"{f.lsb}"
            reset = "—" if f.reset is None else f"{f.reset:#x}"
            text = f.desc or ""
            if f.encode:
                e = _enum_name(f.encode).lower()
                text = (text + " " if text else "") + f"Values: [enum {e}](#enum-{e})."
            out.append(f"| {bits} | {f.name} | {_access(f)} | {reset} | {_cell(text)} |")
        out.append("")
    for ename, members in enums.items():
        e = _enum_name(ename).lower()
        users = [f"{r.name}.{f.name}" for r in regs for f in r.fields if f.encode == ename]
        out += [f"## enum {e}", "", f"The values of {', '.join(users)} (C: `enum gpucosim_{e}`).", "",
                "| value | name | meaning |", "|---|---|---|"]
        out += [f"| {v} | {n} | {_cell(d)} |" for n, v, d in members]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------------------- the IH entry (spec/ih.py)

IH_BEGIN = "<!-- BEGIN generated from spec/ih.py by `make gen`: do not edit -->"
IH_END = "<!-- END generated from spec/ih.py -->"


def render_ih_section() -> str:
    from spec import ih

    out = [IH_BEGIN, "",
           f"Each entry is {ih.ENTRY_DWORDS} dwords ({ih.ENTRY_BYTES} bytes), written in one burst:", "",
           "| dword | bits | field | meaning |", "|---|---|---|---|"]
    for f in ih.FIELDS:
        bits = f"{f.lsb + f.width - 1}:{f.lsb}" if f.width > 1 else f"{f.lsb}"
        out.append(f"| {f.dword} | {bits} | {f.name} | {_cell(f.desc)} |")
    out += ["", "Bits no field names are 0. What DATA0–DATA3 hold depends on CLIENT_ID and SOURCE_ID:", "",
            "| CLIENT_ID | SOURCE_ID | source | " + " | ".join(n for n in ih.DATA_FIELDS) + " |",
            "|---|---|---|" + "---|" * len(ih.DATA_FIELDS)]
    for src in ih.Source:
        data = ih.SOURCE_DATA[src]
        client = ih.CLIENT[src]
        out.append(f"| {int(client):#04x} ({client.name}) | {int(src)} | {src.name}: {_cell(ih.SOURCE_DOC[src])} | " +
                   " | ".join(_cell(d) for d in data) + " |")
    out += ["", IH_END]
    return "\n".join(out)


# ---------------------------------------------------------------------------- virtual memory (spec/vm.py)

VM_BEGIN = "<!-- BEGIN generated from spec/vm.py by `make gen`: do not edit -->"
VM_END = "<!-- END generated from spec/vm.py -->"


def render_vm_section() -> str:
    from spec import vm

    out = [VM_BEGIN, "",
           f"Tables of {vm.ENTRIES} entries of {vm.ENTRY_BYTES} bytes ({vm.TABLE_BYTES} bytes, one page), "
           f"{vm.PAGE_SIZE}-byte pages, {vm.LEVELS} levels in the default build: a virtual address has "
           f"{vm.va_bits()} bits, level 0 (the root) indexed by bits "
           f"{vm.va_bits() - 1}:{vm.PAGE_SHIFT + vm.LEVEL_BITS * (vm.LEVELS - 1)}, the page tables by bits "
           f"{vm.PAGE_SHIFT + vm.LEVEL_BITS - 1}:{vm.PAGE_SHIFT}. An entry (amdgpu's PDE/PTE) holds the next "
           f"table's or the page's address in bits {vm.ADDR_MSB}:{vm.ADDR_LSB} and:", "",
           "| bit | name | meaning |", "|---|---|---|"]
    out += [f"| {b.bit} | {b.name} | {_cell(b.desc)} |" for b in vm.BITS]
    out += ["", "What each access kind needs (VM_FAULT_STATUS.ACCESS, and the hint in the fault's IH entry):", "",
            "| ACCESS | access | needs | IH hint |", "|---|---|---|---|"]
    doc = {vm.Access.READ: "a WAIT_REG_MEM poll", vm.Access.WRITE: "WRITE_DATA, RELEASE_MEM",
           vm.Access.FETCH: "ring and IB dwords", vm.Access.DMA_READ: "a DMA_DATA source",
           vm.Access.DMA_WRITE: "a DMA_DATA destination"}
    names = {b.mask: b.name for b in vm.BITS}
    hint = {vm.HINT_READ: "READ 0x40", vm.HINT_WRITE: "WRITE 0x20", vm.HINT_EXE: "EXE 0x10"}
    out += [f"| {int(a)} | {a.name}: {doc[a]} | {names[vm.NEEDS[a]]} | {hint[vm.HINTS[a]]} |" for a in vm.Access]
    out += ["", "The MMU takes what a request needs from its channel as well: every write address needs "
            "WRITEABLE and a read needs READABLE (EXECUTABLE for a FETCH), whatever else its access kind "
            "says, so a request mislabelled by a master cannot pass a page the table protects "
            "(formal/blocks/mmu.py proves it with any label)."]
    why = {vm.Cause.INVALID: "the entry at LEVEL is not VALID",
           vm.Cause.PERMISSION: "the leaf (a PTE, or a huge page's directory entry, at LEVEL) lacks what the "
                                "access needs",
           vm.Cause.RANGE: "the address has bits above the tables' reach, within the bus's 48 (LEVEL 0; bits above 47 are the CP's BUS_DECERR first)",
           vm.Cause.WALK_ERROR: "reading the entry at LEVEL answered a bus error"}
    out += ["", "Why a translation fails (VM_FAULT_STATUS.CAUSE):", "", "| CAUSE | name | when |", "|---|---|---|"]
    out += [f"| {int(c)} | {c.name} | {why[c]} |" for c in vm.Cause]
    out += ["", VM_END]
    return "\n".join(out)


def render_vm_c() -> str:
    """spec/vm.py's constants for the C header: entry bits, access kinds, fault causes."""
    from spec import vm

    out = ["/* GPU virtual memory (spec/vm.py): page-table entries, as amdgpu's AMDGPU_PTE_* */",
           f"#define {PREFIX}_VM_PAGE_SHIFT {vm.PAGE_SHIFT}",
           f"#define {PREFIX}_VM_LEVEL_BITS {vm.LEVEL_BITS}",
           f"#define {PREFIX}_VM_ENTRY_ADDR_MASK {vm.ADDR_MASK:#018x}ull"]
    out += [f"#define {PREFIX}_VM_{b.name} (1ull << {b.bit})" for b in vm.BITS]
    out += ["/* a VM_FAULT IH entry's DATA1: the address's bits 47:44, and one of these for the access */",
            f"#define {PREFIX}_VM_FAULT_HINT_READ {vm.HINT_READ:#04x}u",
            f"#define {PREFIX}_VM_FAULT_HINT_WRITE {vm.HINT_WRITE:#04x}u",
            f"#define {PREFIX}_VM_FAULT_HINT_EXE {vm.HINT_EXE:#04x}u"]
    out += ["", "enum gpucosim_vm_access {"]
    out += [f"    {PREFIX}_VM_ACCESS_{a.name} = {int(a)}," for a in vm.Access]
    out += ["};", "", "enum gpucosim_vm_cause {"]
    out += [f"    {PREFIX}_VM_CAUSE_{c.name} = {int(c)}," for c in vm.Cause]
    out += ["};", ""]
    return "\n".join(out)


def render_ih_c() -> str:
    """spec/ih.py's entry for the C header: its size, each field's dword, shift and mask (in
    its dword), the client and source ids; docs/hardware.md says what DATA0-3 hold."""
    from spec import ih

    out = ["/* The IH ring entry (spec/ih.py, docs/hardware.md \"The IH entry\"): AMD's soc15 layout */",
           f"#define {PREFIX}_IH_ENTRY_DWORDS {ih.ENTRY_DWORDS}",
           f"#define {PREFIX}_IH_ENTRY_BYTES {ih.ENTRY_BYTES}"]
    for f in ih.FIELDS:
        n = f"{PREFIX}_IH_{f.name}"
        out += [f"#define {n}_DWORD {f.dword}", f"#define {n}_SHIFT {f.lsb}", f"#define {n}_MASK {f.mask:#010x}u",
                f"#define {n}_GET(e) ((((const uint32_t *)(e))[{n}_DWORD] & {n}_MASK) >> {n}_SHIFT)"]
    out += ["", "enum gpucosim_ih_client {"]
    out += [f"    {PREFIX}_IH_CLIENT_{c.name} = {int(c):#04x}," for c in ih.Client]
    out += ["};", "", "enum gpucosim_ih_source {"]
    out += [f"    {PREFIX}_IH_SOURCE_{s.name} = {int(s)},  /* client {ih.CLIENT[s].name} */" for s in ih.Source]
    out += ["};", ""]
    return "\n".join(out)


def with_section(text: str, section: str, begin: str, end: str, where: str) -> str:
    """`text` with the part between the `begin` and `end` markers replaced by `section`."""
    m = re.search(re.escape(begin) + r".*?" + re.escape(end), text, flags=re.S)
    if m is None:
        raise ValueError(f"{where}: the markers of the generated section are missing ({begin!r} ... {end!r})")
    return text[:m.start()] + section + text[m.end():]
