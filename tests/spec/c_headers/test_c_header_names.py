"""The C header's names say one thing each, and its numbers can be read without a C compiler.

An outside driver writer found GPUCOSIM_PERF_PACKETS_COUNT (the length of the register array
PERF_PACKETS) beside GPUCOSIM_PERF_PACKETS_COUNT_SHIFT/_MASK (its field COUNT): one name read
as two things. Here the header is read as a binding generator would read it (names and
numbers, no preprocessor): no name is defined twice, no field's prefix is a name of its own,
and every register array has numeric base, stride and length constants that give the same
offsets as kmd_model/regs.py for every element. The generator refuses a spec that would
break any of that, with a one-line error (spec/gen/gen_regs.py), and so does the packets
header's (spec/gen/gen_packets_c.py: a packet table, or a name of the registers header
again; both share spec/gen/cnames.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from kmd_model import regs
from spec.gen import gen_regs, generate

ROOT = Path(__file__).resolve().parents[3]
HEADER = ROOT / "include" / "gpucosim_regs.h"
# A field's macros, by which a reader (or a binding) recognises F of R: GPUCOSIM_R_F_SHIFT, _MASK.
FIELD_ROLES = ("_SHIFT", "_MASK")


def _names(text: str) -> list[str]:
    """Every name the header defines: macros (object- and function-like) and enumerators."""
    macros = re.findall(r"^#define\s+(\w+)", text, re.M)
    enumerators = re.findall(r"^\s+(GPUCOSIM_\w+)\s*=", text, re.M)
    return macros + enumerators


def _constants(text: str) -> dict[str, int]:
    """The object-like macros whose value is a number, as a non-C consumer reads them."""
    return {m[1]: int(m[2], 0) for m in
            re.finditer(r"^#define\s+(\w+)\s+\(?(0x[0-9a-fA-F]+|\d+)u?\)?(?:\s|$)", text, re.M)}


def _ambiguous(names: list[str]) -> list[str]:
    """Names that are also the prefix of a field's macros (X and X_SHIFT, X_MASK)."""
    have = set(names)
    stems = {n.removesuffix(FIELD_ROLES[0]) for n in have
             if n.endswith(FIELD_ROLES[0]) and n.removesuffix(FIELD_ROLES[0]) + FIELD_ROLES[1] in have}
    return sorted(stems & have)


def _arrays():
    return [c for c in regs.REGISTERS + regs.MODEL_ONLY_REGISTERS if c.ARRAY_LEN > 1]


def _both() -> str:
    """A driver includes both headers: their names share one namespace."""
    return HEADER.read_text() + (HEADER.parent / "gpucosim_packets.h").read_text()


def test_no_name_is_defined_twice():
    twice = [n for n, k in Counter(_names(_both())).items() if k > 1]
    assert not twice


def test_no_field_prefix_is_also_a_name():
    """GPUCOSIM_PERF_PACKETS_COUNT was the array's length and the prefix of its COUNT field."""
    assert _ambiguous(_names(_both())) == []


def test_the_ambiguity_check_bites():
    assert _ambiguous(["GPUCOSIM_A_COUNT", "GPUCOSIM_A_COUNT_SHIFT", "GPUCOSIM_A_COUNT_MASK",
                       "GPUCOSIM_B", "GPUCOSIM_B_SHIFT"]) == ["GPUCOSIM_A_COUNT"]


def test_every_array_element_offset_from_the_base_and_stride_constants():
    """A binding that reads only numeric #defines finds every element of every array."""
    c = _constants(HEADER.read_text())
    arrays = _arrays()
    assert {a.NAME for a in arrays} >= {"PERF_PACKETS", "VM_CONTEXT_CNTL", "PERF_SDMA_PACKETS"}
    for a in arrays:
        r = f"GPUCOSIM_{a.NAME}"
        assert c[f"{r}_ELEMS"] == a.ARRAY_LEN and c[f"{r}_STRIDE"] == a.ARRAY_STRIDE
        offsets = [c[f"{r}_BASE"] + c[f"{r}_STRIDE"] * i for i in range(c[f"{r}_ELEMS"])]
        assert offsets == [a.addr(i) for i in range(a.ARRAY_LEN)], a.NAME


def test_the_element_macro_is_made_of_the_constants():
    """GPUCOSIM_R(i) holds no number of its own: base and stride have one definition each."""
    text = HEADER.read_text()
    for a in _arrays():
        r = f"GPUCOSIM_{a.NAME}"
        [body] = re.findall(rf"^#define\s+{r}\(i\)\s+(.*?)\s*(?:/\*.*)?$", text, re.M)
        assert body == f"({r}_BASE + {r}_STRIDE * (i))"


# ---------------------------------------------------------------------------- the generator refuses

@pytest.fixture(scope="module")
def spec():
    """spec/regs.rdl collected once (a quarter second each); the tests change copies."""
    return generate.collect(generate.compile_rdl())


def _with_field(regs_, reg: str, old: str, new: str):
    out = []
    for r in regs_:
        if r.name == reg:
            r = replace(r, fields=[replace(f, name=new) if f.name == old else f for f in r.fields])
        out.append(r)
    return out


@pytest.mark.parametrize("field,what", [
    ("ELEMS", "the element count of PERF_PACKETS"),
    ("BASE", "the base of PERF_PACKETS"),
    ("STRIDE", "the stride of PERF_PACKETS"),
    ("RESET", "the reset value of PERF_PACKETS"),
])
def test_generator_refuses_a_field_named_like_an_arrays_constant(spec, field, what):
    regs_, enums = spec
    with pytest.raises(ValueError) as e:
        gen_regs.render_c_header(_with_field(regs_, "PERF_PACKETS", "COUNT", field), enums, "h", 16)
    assert str(e.value) == (f"C header: GPUCOSIM_PERF_PACKETS_{field} would be both {what} and the prefix "
                            f"of field PERF_PACKETS.{field}'s macros (GPUCOSIM_PERF_PACKETS_{field}_SHIFT ...); "
                            f"rename one in spec/regs.rdl")


def test_generator_refuses_a_field_prefix_that_names_a_register(spec):
    """A register IH with a field WPTR_ADDR_LO would make GPUCOSIM_IH_WPTR_ADDR_LO both the
    offset of the register IH_WPTR_ADDR_LO and that field's prefix."""
    regs_, enums = spec
    ih_cntl = next(r for r in regs_ if r.name == "IH_CNTL")
    fake = replace(ih_cntl, name="IH", addr=0xFFC, fields=[replace(ih_cntl.fields[0], name="WPTR_ADDR_LO")])
    with pytest.raises(ValueError) as e:
        gen_regs.render_c_header(regs_ + [fake], enums, "h", 16)
    assert str(e.value) == ("C header: GPUCOSIM_IH_WPTR_ADDR_LO would be both register IH_WPTR_ADDR_LO and the "
                            "prefix of field IH.WPTR_ADDR_LO's macros (GPUCOSIM_IH_WPTR_ADDR_LO_SHIFT ...); "
                            "rename one in spec/regs.rdl")


def test_generator_refuses_an_enumerator_that_is_a_field_prefix(spec):
    regs_, enums = spec
    enums = {**enums, "int_status_e": [("EOP", 1, "")]}
    with pytest.raises(ValueError) as e:
        gen_regs.render_c_header(regs_, enums, "h", 16)
    assert str(e.value) == ("C header: GPUCOSIM_INT_STATUS_EOP would be both enum int_status_e.EOP and the prefix "
                            "of field INT_STATUS.EOP's macros (GPUCOSIM_INT_STATUS_EOP_SHIFT ...); "
                            "rename one in spec/regs.rdl")


def test_make_gen_says_what_clashes_in_one_line(tmp_path):
    """`make gen` on such a spec: one line naming the clash, no traceback, nothing written."""
    rdl = (ROOT / "spec" / "regs.rdl").read_text()
    bad = rdl.replace("reg perf_t { field { sw = r; hw = w; } COUNT[31:0]; };",
                      "reg perf_t { field { sw = r; hw = w; } STRIDE[31:0]; };")
    assert bad != rdl
    (tmp_path / "regs.rdl").write_text(bad)
    prog = ("import sys; from pathlib import Path; from spec.gen import generate; "
            f"generate.RDL = Path({str(tmp_path / 'regs.rdl')!r}); sys.exit(generate.main(['--check']))")
    res = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == ("python -m spec.gen.generate: error: C header: GPUCOSIM_PERF_PACKETS_STRIDE would be both "
                          "the stride of PERF_PACKETS and the prefix of field PERF_PACKETS.STRIDE's macros "
                          "(GPUCOSIM_PERF_PACKETS_STRIDE_SHIFT ...); rename one in spec/regs.rdl\n")


# ---------------------------------------------------------------------------- the packets header's generator refuses
# (spec/gen/gen_packets_c.py: the same guard, spec/gen/cnames.py, over PM4 and SDMA names)

def _renamed(packet, old: str, new: str):
    """`packet` with its field `old` called `new`."""
    return replace(packet, fields=tuple(replace(f, name=new) if f.name == old else f for f in packet.fields))


def _pm4_with(monkeypatch, name: str, change) -> None:
    from spec import packets as pm4_table

    monkeypatch.setattr(pm4_table, "PACKETS", tuple(change(p) if p.name == name else p for p in pm4_table.PACKETS))


def test_packets_generator_refuses_a_field_named_like_a_packets_constant(monkeypatch):
    """A WRITE_DATA field INDEX would make GPUCOSIM_PM4_WRITE_DATA_INDEX both the packet's
    PERF_PACKETS index and that field's prefix."""
    from spec.gen import gen_packets_c

    _pm4_with(monkeypatch, "WRITE_DATA", lambda p: _renamed(p, "DST_SEL", "INDEX"))
    with pytest.raises(ValueError) as e:
        gen_packets_c.render_c("h")
    assert str(e.value) == ("packets C header: GPUCOSIM_PM4_WRITE_DATA_INDEX would be both the PERF_PACKETS index "
                            "of WRITE_DATA and the prefix of field WRITE_DATA.INDEX's macros "
                            "(GPUCOSIM_PM4_WRITE_DATA_INDEX_SHIFT ...); rename one in spec/packets.py")


def test_packets_generator_refuses_a_value_named_like_a_fields_macro(monkeypatch):
    """A DST_SEL value SHIFT would define GPUCOSIM_PM4_WRITE_DATA_DST_SEL_SHIFT twice."""
    from spec.gen import gen_packets_c

    def change(p):
        f = p.field("DST_SEL")
        f2 = replace(f, enum=(replace(f.enum[0], name="SHIFT"),) + f.enum[1:])
        return replace(p, fields=tuple(f2 if x is f else x for x in p.fields))

    _pm4_with(monkeypatch, "WRITE_DATA", change)
    with pytest.raises(ValueError) as e:
        gen_packets_c.render_c("h")
    assert str(e.value) == ("packets C header: GPUCOSIM_PM4_WRITE_DATA_DST_SEL_SHIFT would name both "
                            "WRITE_DATA.DST_SEL's shift and WRITE_DATA.DST_SEL's value SHIFT; "
                            "rename one in spec/packets.py")


def test_packets_generator_refuses_a_name_of_the_registers_header(spec, monkeypatch):
    """A driver includes both headers: an SDMA packet CNTL with a field HALT would define
    GPUCOSIM_SDMA_CNTL_HALT_SHIFT, the register SDMA_CNTL's field HALT's shift, again."""
    from spec.gen import gen_packets_c
    from spec.gen.cnames import CNames
    from spec.sdma import packets as sdma_table

    regs_, enums = spec
    names = CNames()
    gen_regs.render_c_header(regs_, enums, "h", 16, names)
    fence = _renamed(replace(sdma_table.FENCE, name="CNTL"), "DATA", "HALT")
    monkeypatch.setattr(sdma_table, "SDMA_PACKETS",
                        tuple(fence if p.name == "FENCE" else p for p in sdma_table.SDMA_PACKETS))
    with pytest.raises(ValueError) as e:
        gen_packets_c.render_c("h", names)
    assert str(e.value) == ("packets C header: GPUCOSIM_SDMA_CNTL_HALT_SHIFT would name both SDMA_CNTL.HALT and "
                            "SDMA CNTL.HALT's shift; rename one in spec/regs.rdl or spec/sdma/packets.py")


def test_make_gen_says_what_clashes_in_the_packets_in_one_line():
    """`make gen` with such a packet table: one line naming the clash, exit 2, nothing written."""
    prog = ("import sys; from dataclasses import replace; from spec import packets as t; "
            "from spec.gen import generate; "
            "t.PACKETS = tuple(replace(p, fields=tuple(replace(f, name='OPCODE') if f.name == 'CP_SYNC' else f "
            "for f in p.fields)) if p.name == 'DMA_DATA' else p for p in t.PACKETS); "
            "sys.exit(generate.main(['--check']))")
    res = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True)
    assert (res.returncode, res.stdout) == (2, ""), res.stderr
    assert res.stderr == ("python -m spec.gen.generate: error: packets C header: GPUCOSIM_PM4_DMA_DATA_OPCODE would "
                          "be both the opcode of DMA_DATA and the prefix of field DMA_DATA.OPCODE's macros "
                          "(GPUCOSIM_PM4_DMA_DATA_OPCODE_SHIFT ...); rename one in spec/packets.py\n")
