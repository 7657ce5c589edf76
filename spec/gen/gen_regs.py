"""The register map's reference forms for people: the C header and docs/registers.md.

Both come from what spec/gen/generate.py collects from spec/regs.rdl (registers, fields,
enums), so the offsets, masks and enum values a C driver compiles in are the ones the
RTL decodes and the KMD uses. (PeakRDL's exporters were used before; their header had
no offsets, no enums and hash names for arrays, and their Markdown dropped enums.)

C names, for register R, field F of R, enum E with value V:

    GPUCOSIM_R                  byte offset of R in the MMIO aperture
    GPUCOSIM_R(i)               ... of element i of an array R: (GPUCOSIM_R_BASE +
                                GPUCOSIM_R_STRIDE * (i)), i < GPUCOSIM_R_ELEMS
    GPUCOSIM_R_RESET            R's value after reset, but for fields the hardware drives
    GPUCOSIM_R_F_SHIFT          F's lowest bit
    GPUCOSIM_R_F_MASK           F's bits in place
    GPUCOSIM_R_F_WIDTH          F's width in bits
    GPUCOSIM_R_F_GET(v)         F from a value v of R
    GPUCOSIM_R_F_SET(x)         x placed as F (OR the fields together)
    enum gpucosim_e { GPUCOSIM_E_V = ..., }   (E without the RDL's `_e`)

Each name says one thing (spec/gen/cnames.py): defined once, and no field's prefix
GPUCOSIM_R_F is a name of its own. An array's length was GPUCOSIM_R_COUNT, which for PERF_PACKETS (field COUNT)
was also the prefix of GPUCOSIM_PERF_PACKETS_COUNT_SHIFT ...; Linux's generated register
headers (rnndb: nouveau, msm, etnaviv) keep R__LEN and R__ESIZE apart from fields with a
double underscore, which C++ reserves (this header is compiled as C++ too), so the array's
constants here are _ELEMS, _BASE and _STRIDE, and a spec that would make any of them, or any
other name, a field's prefix too is refused when the header is generated.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from spec.gen.cnames import CNames

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


def render_c_header(regs: list["RegInfo"], enums: dict, header: str, mmio_addr_width: int,
                    names: CNames | None = None) -> str:
    """include/gpucosim_regs.h; `names` (a new CNames if None) holds every name it defines."""
    names = CNames() if names is None else names
    define = names.define

    out = [f"/* {header} */",
           "/* gpucosim front-end registers for a C driver: offsets, fields, enums.",
           " *",
           " * For register R and its field F:",
           " *   GPUCOSIM_R               byte offset in the MMIO aperture; an array's element i is",
           " *                            GPUCOSIM_R(i), GPUCOSIM_R_BASE + GPUCOSIM_R_STRIDE * i,",
           " *                            for i < GPUCOSIM_R_ELEMS",
           " *   GPUCOSIM_R_RESET         value after reset of the fields software stores; a field",
           " *                            the hardware drives (STATUS.IDLE, CAPS ...) reads the",
           " *                            device's state instead (its _RESET bits are 0)",
           " *   GPUCOSIM_R_F_SHIFT / _MASK (in place) / _WIDTH",
           " *   GPUCOSIM_R_F_GET(v)      the field from a register value",
           " *   GPUCOSIM_R_F_SET(x)      x placed as the field",
           " * Enum-encoded fields have an enum gpucosim_<name> with GPUCOSIM_<NAME>_<VALUE>.",
           " * Registers are 32 bits wide; unmapped offsets answer DECERR (docs/registers.md); a",
           " * write to a read-only register (RB_WPTR ...) is answered OKAY and changes nothing.",
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
            names.add(cname, f"enum {ename}.{name}")
            out.append(f"    {cname + ' = ' + str(value) + ',':<44} /* {desc} */" if desc else
                       f"    {cname} = {value},")
        out += ["};", ""]
    for r in regs:
        base = f"{PREFIX}_{r.name}"
        out.append(f"/* {r.name}: {r.title}. {r.desc} */".replace(". .", ".").replace(". */", " */")
                   if r.desc else f"/* {r.name}: {r.title} */")
        if r.count > 1:
            # numbers in object-like constants, so a binding that reads no macro bodies finds them
            out.append(define(f"{base}(i)", f"({base}_BASE + {base}_STRIDE * (i))", f"register {r.name}"))
            out.append(define(f"{base}_BASE", f"{r.addr:#05x}u", f"the base of {r.name}", "element 0"))
            out.append(define(f"{base}_STRIDE", f"{r.stride}u", f"the stride of {r.name}", "bytes between elements"))
            out.append(define(f"{base}_ELEMS", str(r.count), f"the element count of {r.name}",
                              f"elements: i = 0 .. {r.count - 1}"))
        else:
            out.append(define(base, f"{r.addr:#05x}u", f"register {r.name}"))
        driven = ("every field the hardware drives: reads the device's state" if len(r.hw_driven) == len(r.fields)
                  else f"but {', '.join(r.hw_driven)}: the device's state" if r.hw_driven else "")
        out.append(define(f"{base}_RESET", f"{r.reset:#010x}u", f"the reset value of {r.name}", driven))
        for f in r.fields:
            fb = f"{base}_{f.name}"
            names.field(fb, f"{r.name}.{f.name}")
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
    out += [render_vm_c(names), render_ih_c(names), "#endif /* GPUCOSIM_REGS_H */", ""]
    names.check()
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(regs: list["RegInfo"], enums: dict, header: str, title: str, desc: str,
                    mmio_addr_width: int = 16) -> str:
    """docs/registers.md: an overview table, then each register with its fields and the
    values of every enum-encoded field."""
    out = [f"<!-- {header} -->", "", f"# {title}", "", desc, "",
           f"Offsets are bytes in the MMIO aperture, {(1 << mmio_addr_width) // 1024} KiB "
           f"({mmio_addr_width} address bits, `GPUCOSIM_MMIO_ADDR_WIDTH`): the registers lie in its first "
           "4 KiB, and no offset above them aliases one. Every register is 32 bits wide and read and "
           "written whole (byte strobes honoured: a write in part acts on the bytes it names alone, a "
           "pulse or RW1C bit only from its own byte). Bits no field names read 0, and writes to them "
           "are ignored. Access: R read-only (a write is answered OKAY and "
           "changes nothing: RB_WPTR, say, moves only by the doorbell), W write-only (reads return "
           "0; a W register written in part takes the bytes its strobes leave out from its last write, "
           "so a doorbell's come from there, not from the write pointer, and a doorbell or request acts "
           "only on a write that names its field's bytes), RW read/write, RW1C write 1 to clear, *(pulse)* acts once per write, (RO while X) a write "
           "is ignored while the 1-bit field X is set (a ring's base, size and pointer write-back address "
           "while the ring is enabled). A field whose reset is — is driven by the hardware: after a "
           "reset it reads the device's state (an idle device's STATUS.IDLE and RB_EMPTY read 1, CAPS "
           "its build parameters), and a register's reset value counts only the other fields. An offset not "
           "listed answers DECERR. The C header `include/gpucosim_regs.h` names all of it "
           "(`GPUCOSIM_<REG>`, `GPUCOSIM_<REG>_<FIELD>_SHIFT/_MASK/_WIDTH/_GET/_SET`, enums), the IH entry and "
           "the page-table entry; `include/gpucosim_packets.h` the packets ([packets.md](packets.md)). Element i "
           "of a register array is `GPUCOSIM_<REG>(i)`, which is `GPUCOSIM_<REG>_BASE + GPUCOSIM_<REG>_STRIDE * i` "
           "for i < `GPUCOSIM_<REG>_ELEMS`: plain numbers for a binding that does not expand macros. Every name "
           "in the header means one thing: the generator refuses a spec in which a name would be defined twice "
           "or be the prefix of a field's macros too (a field ELEMS, BASE, STRIDE or RESET of an array, say).", "",
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
    out += ["", "Every bit no row names is ignored, in a directory entry and in a page-table entry alike "
            "(amdgpu's TMZ 3, FRAG 11:7, bits 53:48 with PRT 51, 55, TF 56, MTYPE 58:57, a PDE's BFS 63:59; "
            "tests/model/contract/test_contract_vm.py's check_vm_entry_bits_and_walk_errors), and so are the "
            "permission bits of a directory entry without PDE_PTE: a walk needs VALID alone there."]
    huge = vm.leaf_bits(vm.LEVELS - 2, vm.LEVELS)
    out += ["", f"A huge page is aligned to its size: the MMU ignores the address bits of a PDE_PTE entry "
            f"below the range it maps (bits {huge - 1}:{vm.ADDR_LSB} for the {1 << huge - 20} MiB pages of level "
            f"{vm.LEVELS - 2} in the default build) and takes them from the virtual address, so an entry "
            f"written with them set maps the aligned page below its address (amdgpu aligns its huge "
            f"pages so)."]
    out += ["", "What each access kind needs (VM_FAULT_STATUS.ACCESS, and the hint in the fault's IH entry; "
            "the SDMA's accesses need the same, and its faults show no access kind: SDMA_ERROR):", "",
            "| ACCESS | access | needs | IH hint |", "|---|---|---|---|"]
    doc = {vm.Access.READ: "a WAIT_REG_MEM poll (the SDMA's POLL_REGMEM)",
           vm.Access.WRITE: "WRITE_DATA, RELEASE_MEM (the SDMA's FENCE, WRITE_LINEAR)",
           vm.Access.FETCH: "ring and IB dwords (the SDMA's too)",
           vm.Access.DMA_READ: "a DMA_DATA source (the SDMA's COPY_LINEAR)",
           vm.Access.DMA_WRITE: "a DMA_DATA destination (the SDMA's COPY_LINEAR, CONSTANT_FILL)"}
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


def _plain(names: CNames, src: str):
    """`#define NAME VALUE` lines for the VM and IH parts (unaligned, as they always were),
    each name registered in `names` as coming from `src`."""

    def define(name: str, value: str, what: str) -> str:
        names.add(name, what, src)
        return f"#define {name} {value}"

    def enumerator(name: str, value: str, what: str, comment: str = "") -> str:
        names.add(name, what, src)
        return f"    {name} = {value},{'  /* ' + comment + ' */' if comment else ''}"

    return define, enumerator


def render_vm_c(names: CNames) -> str:
    """spec/vm.py's constants for the C header: entry bits, access kinds, fault causes."""
    from spec import vm

    define, enumerator = _plain(names, "spec/vm.py")
    out = ["/* GPU virtual memory (spec/vm.py): page-table entries, as amdgpu's AMDGPU_PTE_* */",
           define(f"{PREFIX}_VM_PAGE_SHIFT", str(vm.PAGE_SHIFT), "the VM page shift"),
           define(f"{PREFIX}_VM_LEVEL_BITS", str(vm.LEVEL_BITS), "the VM level bits"),
           define(f"{PREFIX}_VM_ENTRY_ADDR_MASK", f"{vm.ADDR_MASK:#018x}ull", "the VM entry's address mask")]
    out += [define(f"{PREFIX}_VM_{b.name}", f"(1ull << {b.bit})", f"VM entry bit {b.name}") for b in vm.BITS]
    out += ["/* a VM_FAULT IH entry's DATA1: the address's bits 47:44, and one of these for the access */"]
    out += [define(f"{PREFIX}_VM_FAULT_HINT_{h}", f"{getattr(vm, 'HINT_' + h):#04x}u", f"VM fault hint {h}")
            for h in ("READ", "WRITE", "EXE")]
    out += ["", "enum gpucosim_vm_access {"]
    out += [enumerator(f"{PREFIX}_VM_ACCESS_{a.name}", str(int(a)), f"VM access {a.name}") for a in vm.Access]
    out += ["};", "", "enum gpucosim_vm_cause {"]
    out += [enumerator(f"{PREFIX}_VM_CAUSE_{c.name}", str(int(c)), f"VM cause {c.name}") for c in vm.Cause]
    out += ["};", ""]
    return "\n".join(out)


def render_ih_c(names: CNames) -> str:
    """spec/ih.py's entry for the C header: its size, each field's dword, shift and mask (in
    its dword), the client and source ids; docs/hardware.md says what DATA0-3 hold."""
    from spec import ih

    define, enumerator = _plain(names, "spec/ih.py")
    out = ["/* The IH ring entry (spec/ih.py, docs/hardware.md \"The IH entry\"): AMD's soc15 layout */",
           define(f"{PREFIX}_IH_ENTRY_DWORDS", str(ih.ENTRY_DWORDS), "the IH entry's dwords"),
           define(f"{PREFIX}_IH_ENTRY_BYTES", str(ih.ENTRY_BYTES), "the IH entry's bytes")]
    for f in ih.FIELDS:
        n = f"{PREFIX}_IH_{f.name}"
        names.field(n, f"IH entry.{f.name}", "spec/ih.py")
        out += [define(f"{n}_DWORD", str(f.dword), f"IH entry.{f.name} dword"),
                define(f"{n}_SHIFT", str(f.lsb), f"IH entry.{f.name} shift"),
                define(f"{n}_MASK", f"{f.mask:#010x}u", f"IH entry.{f.name} mask"),
                define(f"{n}_GET(e)", f"((((const uint32_t *)(e))[{n}_DWORD] & {n}_MASK) >> {n}_SHIFT)",
                       f"IH entry.{f.name} get")]
    out += ["", "enum gpucosim_ih_client {"]
    out += [enumerator(f"{PREFIX}_IH_CLIENT_{c.name}", f"{int(c):#04x}", f"IH client {c.name}") for c in ih.Client]
    out += ["};", "", "enum gpucosim_ih_source {"]
    out += [enumerator(f"{PREFIX}_IH_SOURCE_{s.name}", str(int(s)), f"IH source {s.name}",
                       f"client {ih.CLIENT[s].name}") for s in ih.Source]
    out += ["};", ""]
    return "\n".join(out)


def with_section(text: str, section: str, begin: str, end: str, where: str) -> str:
    """`text` with the part between the `begin` and `end` markers replaced by `section`."""
    m = re.search(re.escape(begin) + r".*?" + re.escape(end), text, flags=re.S)
    if m is None:
        raise ValueError(f"{where}: the markers of the generated section are missing ({begin!r} ... {end!r})")
    return text[:m.start()] + section + text[m.end():]
