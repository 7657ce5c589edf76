"""The SDMA packet table (spec/sdma/packets.py) and its codec (spec/sdma/codec.py) against AMD's
published encodings: amdgpu's sdma_v4_0.c and vega10_sdma_pkt_open.h, Mesa's sid.h and
ac_cmdbuf_sdma.c, igt's amd_deadlock. Golden dwords have every field non-zero where the
device allows it, so a field at the wrong position cannot pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spec import sdma
from spec.sdma import packets as sp


def test_opcodes_are_amdgpus():
    # vega10_sdma_pkt_open.h: SDMA_OP_NOP 0, COPY 1, WRITE 2, INDIRECT 4, FENCE 5, TRAP 6,
    # POLL_REGMEM 8, CONST_FILL 11; SUB_OP COPY_LINEAR 0, WRITE_LINEAR 0
    ops = {p.name: (p.op, p.sub_op) for p in sp.SDMA_PACKETS}
    assert ops == {"NOP": (0, 0), "COPY_LINEAR": (1, 0), "WRITE_LINEAR": (2, 0), "INDIRECT_BUFFER": (4, 0),
                   "FENCE": (5, 0), "TRAP": (6, 0), "POLL_REGMEM": (8, 0), "CONSTANT_FILL": (11, 0)}


GOLDEN = [
    # sdma_v4_0_emit_copy_buffer(src=0x1_2345_6780 + 4, dst=0xA_BCDE_F000 + 8, 4096 bytes)
    (lambda: sdma.copy_linear(0xA_BCDE_F008, 0x1_2345_6784, 4096),
     [0x00000001, 0x00000FFF, 0, 0x23456784, 0x00000001, 0xBCDEF008, 0x0000000A]),
    # sdma_v4_0_ring_test_ring: WRITE_LINEAR COUNT(0), 0xDEADBEEF; two dwords: COUNT 1
    (lambda: sdma.write_linear(0x3_1234_5678, [0xDEADBEEF, 0xCAFEF00D]),
     [0x00000002, 0x12345678, 0x00000003, 0x00000001, 0xDEADBEEF, 0xCAFEF00D]),
    # sdma_v4_0_emit_fill_buffer (fillsize 0) and Mesa's ac_emit_sdma_constant_fill (fillsize 2)
    (lambda: sdma.constant_fill(0x5_0000_0010, 0x01020304, 0x100),
     [0x0000000B, 0x00000010, 0x00000005, 0x01020304, 0x000000FF]),
    (lambda: sdma.constant_fill(0x5_0000_0010, 0x01020304, 0x100, fillsize="DWORDS"),
     [0x8000000B, 0x00000010, 0x00000005, 0x01020304, 0x000000FF]),
    # sdma_v4_0_ring_emit_fence (32-bit) then its TRAP; a TRAP with an int_context (amdkfd's events)
    (lambda: sdma.fence(0x1_1234_5678, 0x42) + sdma.trap(),
     [0x00000005, 0x12345678, 0x00000001, 0x00000042, 0x00000006, 0x00000000]),
    (lambda: sdma.trap(int_context=0x0ABCDEF), [0x00000006, 0x0ABCDEF]),
    # Mesa's ac_emit_sdma_fence: MTYPE UC (3)
    (lambda: sdma.fence(0x2000, 7, mtype=3), [0x00030005, 0x2000, 0, 7]),
    # igt amdgpu_wait_memory's hang: mem poll, func 4 (!=), ref 0, mask ~0, DW5 0x0fff0004
    (lambda: sdma.poll_regmem(0x7_0000_1000, 0, 0xFFFFFFFF, "NE", interval=4),
     [0xC0000008, 0x00001000, 0x00000007, 0, 0xFFFFFFFF, 0x0FFF0004]),
    # sdma_v4_0_emit_pipeline_sync: mem poll, ==, interval 4 -> header 0xB0000008
    (lambda: sdma.poll_regmem(0x1_0000_0040, 0x11, 0xFFFF, "EQ", interval=4, retry_count=0x123),
     [0xB0000008, 0x00000040, 0x00000001, 0x11, 0xFFFF, 0x01230004]),
    # sdma_v4_0_ring_emit_ib: OP(INDIRECT) | VMID(3), base & ~0x1f, hi, length_dw, csa 0, 0
    (lambda: sdma.indirect_buffer(0x9_8765_4320, 24, vmid=3, csa_addr_lo=0x100, csa_addr_hi=2),
     [0x00030004, 0x87654320, 0x00000009, 24, 0x100, 2]),
    # sdma_v4_0_ring_insert_nop(8) with burst_nop: NOP COUNT(7) and 7 zeros
    (lambda: sdma.pad(8), [0x00070000] + [0] * 7),
    (lambda: sdma.pad(1), [0x00000000]),
]


@pytest.mark.parametrize("build, want", GOLDEN, ids=range(len(GOLDEN)))
def test_golden_dwords_and_round_trip(build, want):
    words = build()
    assert words == want, [hex(w) for w in words]
    items = list(sdma.decode_stream(words))
    assert all(i.ok for i in items)
    assert sum(i.length for i in items) == len(words)
    for it in items:  # decode -> builder arguments -> the same dwords
        assert sdma.BUILDERS[it.name](**it.args) == it.dwords


def test_lengths_come_from_the_header_or_count():
    w = sdma.write_linear(0x1000, list(range(1, 6)))
    assert sdma.decode(w).length == 4 + 5
    n = sdma.nop(3)
    assert n[0] == 0x00030000 and sdma.decode(n).length == 4
    assert sdma.decode([0]).length == 1  # NOP_PAD


@pytest.mark.parametrize("call, msg", [
    (lambda: sdma.copy_linear(0, 0, 0), "SDMA COPY_LINEAR: byte_count must be 1 to 4194304, not 0"),
    (lambda: sdma.copy_linear(0, 0, (1 << 22) + 1), "SDMA COPY_LINEAR: byte_count must be 1 to 4194304, not 4194305"),
    (lambda: sdma.fence(0x1002, 1), "SDMA FENCE: addr must be dword aligned, not 0x1002"),
    (lambda: sdma.write_linear(0x1000, []), "SDMA WRITE_LINEAR: data must have 1 to 1048576 dwords, not 0"),
    (lambda: sdma.indirect_buffer(0x1010, 8), "SDMA INDIRECT_BUFFER: base must be 32-byte aligned, not 0x1010"),
    (lambda: sdma.poll_regmem(0, 0, 0, "XX"),
     "SDMA POLL_REGMEM: func must be one of ALWAYS(0), LT(1), LE(2), EQ(3), NE(4), GE(5), GT(6), not 'XX'"),
    (lambda: sdma.poll_regmem(0, 0, 0, "EQ", mem_poll="REGISTER"),
     "SDMA POLL_REGMEM: mem_poll=REGISTER is not supported by this device"),
    (lambda: sdma.copy_linear(0, 0, 4, tmz=1), "SDMA COPY_LINEAR: tmz=SECURE is not supported by this device"),
    (lambda: sdma.constant_fill(0, 1, 4, fillsize=1), "SDMA CONSTANT_FILL: fillsize=WORDS is not supported by this device"),
    (lambda: sdma.write_linear(1 << 64, [1]), "SDMA WRITE_LINEAR: dst must fit in 64 bits, not 0x10000000000000000"),
    # a plain field one past its width: the message names the packet, argument and field
    (lambda: sdma.trap(int_context=1 << 28), "SDMA TRAP: int_context must fit in INT_CONTEXT[27:0] (28 bits), not 0x10000000"),
    (lambda: sdma.poll_regmem(0, 0, 0, "EQ", interval=1 << 16),
     "SDMA POLL_REGMEM: interval must fit in INTERVAL[15:0] (16 bits), not 0x10000"),
    (lambda: sdma.indirect_buffer(0x1000, 8, vmid=16), "SDMA INDIRECT_BUFFER: vmid must fit in VMID[19:16] (4 bits), not 0x10"),
])
def test_builders_refuse_what_the_engine_rejects(call, msg):
    with pytest.raises(ValueError) as e:
        call()
    assert str(e.value) == msg


def test_decoder_reports_malformed_and_reserved_bits():
    bad = [0x23DECD3D]  # igt amd_deadlock's corrupted copy header
    m = sdma.decode(bad)
    assert not m.ok and m.problem is sdma.Problem.UNKNOWN_OPCODE and (m.op, m.sub_op) == (0x3D, 0xCD)
    t = sdma.decode(sdma.copy_linear(0x10, 0x20, 4)[:5])
    assert not t.ok and t.problem is sdma.Problem.TRUNCATED and (t.needed, t.available) == (7, 5)
    w = sdma.write_linear(0x10, [1, 2, 3])
    assert sdma.decode(w[:5]).problem is sdma.Problem.TRUNCATED
    assert sdma.decode(w[:3]).problem is sdma.Problem.TRUNCATED  # its COUNT dword is missing
    r = sdma.decode(sdma.encode_fields("FENCE", {"ADDR_LO": 4}) [:1] + [0x1003, 0, 9])
    assert r.reserved == {0: 3}
    assert "RESERVED[dw0]=0x00000003" in sdma.describe(r)


def test_listing_and_cli():
    words = sdma.copy_linear(0x200000, 0x100000, 4096) + sdma.pad(3) + [0x23DECD3D]
    lines = sdma.disassemble(words, 0x1000)
    assert lines == ["0x1000: 00000001  COPY_LINEAR  byte_count=4096 src=0x00100000 dst=0x00200000",
                     "0x101c: 00020000  NOP  n_payload=2",
                     "0x1028: 23decd3d  UNKNOWN op=0x3d sub_op=0xcd"]  # (hex: it said op=61 sub_op=205)
    out = subprocess.run([sys.executable, "-m", "gpucosim", "disasm", "--sdma", "-x",
                          *(f"{w:x}" for w in sdma.fence(0x40, 5) + sdma.trap(int_context=9))],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["0x0000: 00000005  FENCE  addr=0x00000040 data=0x5",
                                "0x0010: 00000006  TRAP  int_context=0x9"]


# ---------------------------------------------------------------------------- the codec's own edges
# (mutation campaign, issue 19: each test pins a class of behaviour the golden dwords above
# leave open: raw headers, encode_fields, the truncated-packet report, stream windows, listings)

def test_header_places_op_sub_op_and_upper_bits_at_their_widest():
    assert sdma.header(0xFF, 0xFF, 0xFFFF) == 0xFFFF_FFFF
    assert sdma.header(0x12, 0x34, 0x5678) == 0x5678_3412
    assert sdma.header(0x3D) == 0x3D and sdma.header(0x3D, upper=0x8001) == 0x8001_003D  # sub_op, upper: 0
    assert sdma.header(0, 0xCD) == 0xCD00
    for p in sp.SDMA_PACKETS:  # the table's own headers are the packet's (op, sub_op) with no field set
        assert sdma.header(p.op, p.sub_op) == p.header == sdma.encode_fields(p.name, data=[0] if p.tail else ())[0] \
            & p.HEADER_BITS
    m = sdma.decode([sdma.header(0x3D, 0xCD, 0x23DE)])  # igt's corrupted header, rebuilt
    assert (m.problem, m.op, m.sub_op, m.header) == (sdma.Problem.UNKNOWN_OPCODE, 0x3D, 0xCD, 0x23DECD3D)


@pytest.mark.parametrize("args, msg", [
    ((0x100,), "header: op must fit in 8 bits, not 0x100"),
    ((0, 0x100), "header: sub_op must fit in 8 bits, not 0x100"),
    ((0, 0, 0x10000), "header: upper must fit in 16 bits, not 0x10000"),
    ((-1,), "header: op must fit in 8 bits, not -0x1"),
])
def test_header_refuses_a_field_one_past_its_width(args, msg):
    with pytest.raises(ValueError) as e:
        sdma.header(*args)
    assert str(e.value) == msg


def test_header_refuses_a_non_integer_naming_the_argument():
    with pytest.raises(TypeError) as e:
        sdma.header(1, "2")
    assert str(e.value) == "header: sub_op must be an int, not '2'"


def _distinct(p, seed):
    """Every field of `p` but its length field at a distinct non-zero value within its width."""
    out = {}
    for i, f in enumerate(p.fields):
        if f.name != p.length_field:
            v = ((0x9E3779B9 * (i + 1 + seed)) >> 3) & f.mask >> f.lsb
            out[f.name] = v or 1
    return out


@pytest.mark.parametrize("name", [p.name for p in sp.SDMA_PACKETS])
def test_encode_fields_places_every_field_where_decode_reads_it(name):
    """Raw fields at their widest and at distinct non-zero values land in their own dword and
    bits: decode (which reads each field from its own position) gives them all back, the length
    field says exactly how many tail dwords were given, and nothing lands anywhere else."""
    p = sp.by_name[name]
    data = [0xA0000001, 0xA0000002, 0xA0000003] if p.tail else []
    widest = {f.name: f.max for f in p.fields if f.name != p.length_field}
    for fields in (widest, _distinct(p, 0), _distinct(p, 7)):
        words = sdma.encode_fields(name, fields, data)
        assert len(words) == 1 + p.fixed + len(data)
        item = sdma.decode(words)
        assert item.ok and item.name == name and item.length == len(words), item
        want = dict.fromkeys((f.name for f in p.fields), 0) | fields
        if p.tail:
            want[p.length_field] = len(data) - p.length_bias
            assert list(item.data) == data
        assert item.fields == want
        assert item.reserved == {}


def test_encode_fields_matches_amds_encodings_and_refuses_what_does_not_fit():
    # the same COPY_LINEAR and WRITE_LINEAR as the golden builders' (sdma_v4_0's copy, ring test)
    assert sdma.encode_fields("COPY_LINEAR", {"COUNT": 0xFFF, "SRC_ADDR_LO": 0x23456784, "SRC_ADDR_HI": 1,
                                              "DST_ADDR_LO": 0xBCDEF008, "DST_ADDR_HI": 0xA}) == \
        [0x00000001, 0x00000FFF, 0, 0x23456784, 0x00000001, 0xBCDEF008, 0x0000000A]
    assert sdma.encode_fields("WRITE_LINEAR", {"DST_ADDR_LO": 0x12345678 >> 2, "DST_ADDR_HI": 3},
                              [0xDEADBEEF, 0xCAFEF00D]) == \
        [0x00000002, 0x12345678, 0x00000003, 0x00000001, 0xDEADBEEF, 0xCAFEF00D]
    assert sdma.encode_fields("NOP", data=[0, 0, 0]) == [0x00030000, 0, 0, 0]
    assert sdma.encode_fields("NOP", {"COUNT": 5}) == [0x00050000]  # a given length field is kept
    with pytest.raises(ValueError) as e:
        sdma.encode_fields("POLL_REGMEM", {"RETRY_COUNT": 0x1000})
    assert str(e.value) == "POLL_REGMEM: RETRY_COUNT must fit in RETRY_COUNT[27:16] (12 bits), not 0x1000"
    with pytest.raises(ValueError) as e:
        sdma.encode_fields("FENCE", {"DATA": 1}, [5])
    assert str(e.value) == "encode_fields: SDMA FENCE has no variable tail"


def _shortest(p):
    """Dwords of the shortest packet of its kind (a variable tail as short as its length field allows)."""
    return len(sdma.encode_fields(p.name, data=[0] * p.length_bias if p.tail else ()))


@pytest.mark.parametrize("name", [p.name for p in sp.SDMA_PACKETS])
def test_decode_reports_a_truncated_packets_offset_and_needed_length_exactly(name):
    """A packet cut short anywhere, at any offset in the stream: TRUNCATED at its own offset,
    with the dwords it needs (its whole length once the dword holding its length is there,
    else the shortest packet of its kind) and the dwords left."""
    p = sp.by_name[name]
    full = sdma.encode_fields(name, _distinct(p, 3), [1, 2] if p.tail else ())
    for lead in (0, 3):
        for cut in range(1, len(full)):
            words = [sdma.NOP_PAD] * lead + full[:cut]
            m = sdma.decode(words, lead)
            knows_length = p.tail is None or 1 + p.field(p.length_field).dword < cut
            assert not m.ok and m.problem is sdma.Problem.TRUNCATED, (cut, m)
            assert (m.offset, m.name, m.length, m.available) == (lead, name, cut, cut)
            assert m.needed == (len(full) if knows_length else _shortest(p)), (cut, m)
            assert m.message == sdma.describe(m) == f"TRUNCATED {name}: needs {m.needed} dwords, {cut} left"
            assert [(i.offset, i.ok) for i in sdma.decode_stream(words)] == [*((k, True) for k in range(lead)),
                                                                             (lead, False)]


def test_write_linear_without_its_count_dword_needs_the_shortest_write():
    w = sdma.write_linear(0x10, [7])  # the shortest WRITE_LINEAR: header, dst lo/hi, COUNT, one dword
    assert len(w) == 5
    m = sdma.decode(w[:3])
    assert (m.needed, m.available) == (5, 3)


def test_decode_refuses_an_offset_outside_the_stream():
    words = sdma.trap() + sdma.pad(1)
    assert sdma.decode(words, 2).name == "NOP"
    for off in (3, 4, -1):
        with pytest.raises(IndexError) as e:
            sdma.decode(words, off)
        assert str(e.value) == f"decode: offset {off} is outside a stream of 3 dwords"


def test_decode_stream_window_reports_offsets_in_the_whole_stream():
    a, b, c = sdma.fence(0x40, 1), sdma.trap(int_context=2), sdma.copy_linear(0x100, 0x200, 8)
    words = a + b + c + sdma.pad(2)
    got = [(i.offset, i.name) for i in sdma.decode_stream(words, len(a), len(a) + len(b) + len(c))]
    assert got == [(4, "TRAP"), (6, "COPY_LINEAR")]
    assert [(i.offset, i.name) for i in sdma.decode_stream(words, 4, 1000)] == \
        [(4, "TRAP"), (6, "COPY_LINEAR"), (13, "NOP")]
    cut = list(sdma.decode_stream(words, 4, 10))  # the window ends inside the copy
    assert [(i.offset, i.ok) for i in cut] == [(4, True), (6, False)] and cut[1].available == 4


def test_reserved_bits_are_shown_by_dword_header_included():
    r = sdma.decode([sdma.header(6, 0, 0x0010), 0xF000_0009])  # TRAP: no header field, INT_CONTEXT [27:0]
    assert r.ok and r.reserved == {-1: 0x0010_0000, 0: 0xF000_0000}
    assert sdma.describe(r) == "TRAP  int_context=0x9 RESERVED[hdr]=0x00100000 RESERVED[dw0]=0xf0000000"


def test_disassemble_and_listing_count_addresses_from_base_zero_by_default():
    words = sdma.fence(0x40, 5) + sdma.trap(int_context=9)
    lines = ["0x0000: 00000005  FENCE  addr=0x00000040 data=0x5", "0x0010: 00000006  TRAP  int_context=0x9"]
    assert sdma.disassemble(words) == lines
    assert sdma.listing(words) == "\n".join(lines)
    assert sdma.listing(words, 0x2000).splitlines() == ["0x2000: " + lines[0][8:], "0x2010: " + lines[1][8:]]
    assert sdma.listing(words, 0x100, verbose=True).splitlines()[1].startswith("0x0110: 00000006  TRAP")


def test_listing_shows_every_positional_argument_and_verbose_every_field():
    """A builder's positional arguments are listed even at 0 (FENCE data=0, POLL_REGMEM
    func=ALWAYS), so the line rebuilds the packet; keyword fields only when off their
    default, unless verbose=True, which disassemble/listing pass on to describe."""
    words = sdma.fence(0x40, 0) + sdma.poll_regmem(0x80, 1, 0xFF, "ALWAYS") + sdma.trap()
    assert sdma.disassemble(words) == [
        "0x0000: 00000005  FENCE  addr=0x00000040 data=0x0",
        "0x0010: 80000008  POLL_REGMEM  func=ALWAYS addr=0x00000080 value=0x1 mask=0xff",
        "0x0028: 00000006  TRAP"]
    assert sdma.listing(words, verbose=True).splitlines() == [
        "0x0000: 00000005  FENCE  mtype=0 addr=0x00000040 data=0x0",
        "0x0010: 80000008  POLL_REGMEM  hdp_flush=OFF func=ALWAYS mem_poll=MEMORY addr=0x00000080 value=0x1 "
        "mask=0xff interval=10 retry_count=0xfff",
        "0x0028: 00000006  TRAP  int_context=0x0"]


def test_pad_fills_exactly_with_the_fewest_burst_nops():
    most = (1 << 14)  # a NOP's COUNT [29:16] covers 16383 dwords after its header
    assert [p.max_tail for p in sp.SDMA_PACKETS] == [
        most - 1 if p.name == "NOP" else (1 << 20) if p.name == "WRITE_LINEAR" else 0 for p in sp.SDMA_PACKETS]
    assert sdma.pad(0) == []
    for n, heads in ((most, [0]), (most + 1, [0, most]), (2 * most + 3, [0, most, 2 * most])):
        words = sdma.pad(n)
        items = list(sdma.decode_stream(words))
        assert len(words) == n and [i.offset for i in items] == heads and all(i.name == "NOP" for i in items)
    with pytest.raises(ValueError) as e:
        sdma.pad(-1)
    assert str(e.value) == "pad: n_dwords must be >= 0, not -1"
    with pytest.raises(TypeError) as e:
        sdma.pad(2.0)
    assert str(e.value) == "pad: n_dwords must be an int, not 2.0"


# A valid call of every builder; each argument is then broken one at a time.
_VALID = {"n_payload": 0, "dst": 0x1000, "src": 0x2000, "byte_count": 4, "data": [1, 2],
          "base": 0x1000, "size_dw": 8, "addr": 0x1000, "value": 0, "mask": 0xFFFFFFFF, "func": 3}


def _valid_args(name):
    import inspect
    sig = inspect.signature(sdma.BUILDERS[name])
    args = {a: _VALID[a] for a, prm in sig.parameters.items() if prm.default is inspect.Parameter.empty}
    if name == "FENCE":
        args["data"] = 7  # FENCE's data is the one dword written, not a tail
    return args


@pytest.mark.parametrize("name", sorted(sdma.BUILDERS))
def test_every_builder_argument_of_the_wrong_type_is_named_with_its_packet(name):
    """The class: a user who passes a string, None or a float to any argument of any SDMA
    builder reads which packet and which argument, not a traceback from deep inside."""
    import inspect
    build = sdma.BUILDERS[name]
    assert build(**_valid_args(name))  # the valid call builds
    for arg in inspect.signature(build).parameters:
        kwargs = {**_valid_args(name), arg: "x"}
        with pytest.raises((TypeError, ValueError)) as e:
            build(**kwargs)
        assert str(e.value).startswith(f"SDMA {name}: {arg} "), (arg, str(e.value))


def test_tail_errors_name_the_argument_and_the_element():
    with pytest.raises(ValueError) as e:
        sdma.nop(sp.NOP.max_tail + 1)
    assert str(e.value) == f"SDMA NOP: n_payload must be 0 to {sp.NOP.max_tail}, not {sp.NOP.max_tail + 1}"
    with pytest.raises(ValueError) as e:
        sdma.nop(-1)
    assert str(e.value) == f"SDMA NOP: n_payload must be 0 to {sp.NOP.max_tail}, not -1"
    with pytest.raises(TypeError) as e:
        sdma.write_linear(0x1000, [1, "a"])
    assert str(e.value) == "SDMA WRITE_LINEAR: data[1] must be an int, not 'a'"
    with pytest.raises(ValueError) as e:
        sdma.write_linear(0x1000, [1, 2, 1 << 32])
    assert str(e.value) == "SDMA WRITE_LINEAR: data[2] must fit in 32 bits, not 0x100000000"
