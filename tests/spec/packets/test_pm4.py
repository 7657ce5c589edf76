"""spec/packets.py and spec/pm4.py: builders, decoder, disassembler, packet doc.

Strategies are derived from the table, so a packet added there is tested here
without editing this file.
"""

from __future__ import annotations

import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spec import packets, pm4
from spec.gen import gen_packets
from spec.sdma import packets as sp
from spec.packets import PACKETS, PacketDef

ROOT = Path(__file__).resolve().parents[3]
NAMES = [p.name for p in PACKETS]


# ---------------------------------------------------------------------------- strategies

def _plain(p: PacketDef):
    parts = {n for v in p.values for n in v.fields}
    return [f for f in p.fields if f.name not in parts]


def builder_args(p: PacketDef, max_tail: int = 8):
    """Arguments the builder must accept: full ranges, supported enum values, rules applied."""
    strat = {}
    for v in p.values:
        align, width = p.value_align(v), p.value_width(v)
        strat[v.name] = st.integers(0, (1 << width) // align - 1).map(lambda x, a=align: x * a)
    for f in _plain(p):
        if f.enum and not f.open_enum:
            strat[f.arg_name] = st.sampled_from([e.value for e in f.enum if e.supported])
        else:
            strat[f.arg_name] = st.integers(0, f.max)
    if p.tail:
        hi = p.tail.min + max_tail
        strat[p.tail.arg_name] = (st.integers(p.tail.min, hi) if p.tail.ignored
                                  else st.lists(st.integers(0, 2**32 - 1), min_size=p.tail.min, max_size=hi))

    def apply_rules(args):
        for r in p.rules:
            sel = p.field(r.when)
            if args[sel.arg_name] in [sel.values[n] for n in r.among]:
                if r.align > 1:
                    args[r.value] &= ~(r.align - 1)
                if r.width is not None:
                    args[r.value] &= (1 << r.width) - 1
        return args

    return st.fixed_dictionaries(strat).map(apply_rules)


def raw_fields(p: PacketDef, max_tail: int = 8):
    """Any value of every field (reserved and unsupported values included) plus a tail."""
    fields = st.fixed_dictionaries({f.name: st.integers(0, f.max) for f in p.fields})
    tail = st.lists(st.integers(0, 2**32 - 1), min_size=p.tail.min, max_size=p.tail.min + max_tail) \
        if p.tail else st.just([])
    return st.tuples(fields, tail)


@st.composite
def streams(draw):
    """Dword streams mixing garbage with plausible headers (known opcodes, any COUNT)."""
    items = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            items.append(draw(st.integers(0, 2**32 - 1)))
        elif kind == 1:
            items.append(pm4.TYPE2_FILLER)
        else:
            op = draw(st.sampled_from([p.opcode for p in PACKETS] + [0x7B, 0x00, 0xFF]))
            count = draw(st.integers(0, 12) | st.integers(0, packets.HEADER.field("COUNT").max))
            items.append(pm4.header(op, count))
            items += draw(st.lists(st.integers(0, 2**32 - 1), max_size=10))
    return items


# ---------------------------------------------------------------------------- the table

def test_table_api_for_rtl():
    f = packets.by_name["WRITE_DATA"].field("WR_CONFIRM")
    assert (f.dword, f.lsb, f.width) == (0, 20, 1)
    assert packets.HEADER.field("OPCODE").bits == slice(8, 16)
    assert [p.name for p in PACKETS] == NAMES and [p.index for p in PACKETS] == list(range(len(PACKETS)))
    assert packets.by_opcode[packets.Opcode.DMA_DATA].name == "DMA_DATA"
    assert packets.by_name["INDIRECT_BUFFER"].count_ok(2)
    assert not packets.by_name["INDIRECT_BUFFER"].count_ok(3)
    assert packets.by_name["WRITE_DATA"].min_count == 3


def test_amd_golden_encodings():
    """Spot checks against Linux amdgpu (soc15d.h / gfx_v9_0.c), written independently."""
    assert pm4.TYPE2_FILLER == 0x80000000
    assert pm4.header(0x49, 6) == 0xC0064900  # PACKET3(PACKET3_RELEASE_MEM, 6)
    # gfx_v9_0_ring_emit_fence: EVENT_TYPE(CACHE_FLUSH_AND_INV_TS_EVENT) | EVENT_INDEX(5),
    # DATA_SEL(1) | INT_SEL(2)
    fence = pm4.release_mem(0x1_0000_1000, 7, int_sel="SEND_INT_ON_CONFIRM")
    assert fence == [0xC0064900, 0x14 | 5 << 8, 1 << 29 | 2 << 24, 0x1000, 0x1, 7, 0, 0]
    assert pm4.write_data(0x1000, [0xDEADBEEF], wr_confirm=True) == [
        0xC0033700, 5 << 8 | 1 << 20, 0x1000, 0, 0xDEADBEEF]
    assert pm4.indirect_buffer(0x2000, 16) == [0xC0023F00, 0x2000, 0, 16]  # gfx: VALID 0
    assert pm4.wait_reg_mem(0x3000, 1, 0xFFFFFFFF, "EQ") == [
        0xC0053C00, 3 | 1 << 4, 0x3000, 0, 1, 0xFFFFFFFF, 0x10]
    assert pm4.dma_data(0x5000, 0xAB, 64, src_sel="DATA", cp_sync=1, raw_wait=1) == [
        0xC0055000, 1 << 31 | 2 << 29, 0xAB, 0, 0x5000, 0, 64 | 1 << 30]
    assert pm4.nop(2) == [0xC0011000, 0, 0]


def test_enums_exposed():
    assert pm4.WAIT_REG_MEM_FUNCTION.EQ == 3
    assert pm4.RELEASE_MEM_DATA_SEL.TIMESTAMP == 3
    assert pm4.wait_reg_mem(0, 0, 0, pm4.WAIT_REG_MEM_FUNCTION.GE) == pm4.wait_reg_mem(0, 0, 0, "GE")
    assert pm4.BUILDERS["WRITE_DATA"] is pm4.write_data


# ---------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_builder_round_trip(name, data):
    p = packets.by_name[name]
    args = data.draw(builder_args(p))
    dwords = pm4.BUILDERS[name](**args)
    assert all(type(d) is int and 0 <= d < 2**32 for d in dwords)
    pkt = pm4.decode(dwords)
    assert isinstance(pkt, pm4.Packet), pm4.describe(pkt)
    assert (pkt.name, pkt.opcode, pkt.length) == (name, p.opcode, len(dwords))
    assert pkt.count == (len(dwords) - 2) & 0x3FFF if p.count_wraps else pkt.count == len(dwords) - 2
    assert pkt.args == args
    assert pkt.reserved == {}
    assert pkt.dwords == dwords
    assert pm4.BUILDERS[name](**pkt.args) == dwords


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_raw_round_trip_full_field_ranges(name, data):
    fields, tail = data.draw(raw_fields(packets.by_name[name]))
    dwords = pm4.encode_fields(name, fields, tail)
    pkt = pm4.decode(dwords)
    assert isinstance(pkt, pm4.Packet)
    assert pkt.fields == fields and list(pkt.data) == tail and pkt.reserved == {}
    pm4.disassemble(dwords)  # unsupported and reserved values still list


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_reserved_bits_reported(name, data):
    """Random payload under a valid header: fields re-encode to the payload minus reserved bits."""
    p = packets.by_name[name]
    n = data.draw(st.integers(p.min_payload, p.min_payload + 4)) if p.tail else p.fixed
    payload = data.draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n))
    pkt = pm4.decode([pm4.header(p.opcode, (n - 1) & 0x3FFF)] + payload)
    assert isinstance(pkt, pm4.Packet)
    rebuilt = pm4.encode_fields(name, pkt.fields, pkt.data)[1:]
    assert [got | pkt.reserved.get(i, 0) for i, got in enumerate(rebuilt)] == payload
    assert all(bits & ~p.defined_mask(i) == bits for i, bits in pkt.reserved.items())


def test_numpy_and_other_sequences():
    dwords = pm4.write_data(0x1000, np.array([1, 2, 3], dtype=np.uint32)) + pm4.nop(1)
    assert pm4.write_data(np.uint64(0x1000), (1, 2, 3)) == dwords[:-2]
    arr = np.array(dwords, dtype=np.uint32)
    assert pm4.disassemble(arr) == pm4.disassemble(dwords)
    pkt = pm4.decode(arr)
    assert pkt.args["data"] == [1, 2, 3] and all(type(v) is int for v in pkt.fields.values())


def test_pad():
    for n in [0, 1, 2, 3, 17, pm4.MAX_PAYLOAD + 1, pm4.MAX_PAYLOAD + 2, 2 * pm4.MAX_PAYLOAD + 5]:
        dw = pm4.pad(n)
        assert len(dw) == n
        items = list(pm4.decode_stream(dw))
        assert all(i.ok and i.name == "NOP" for i in items)  # Mesa's way: NOPs only
        assert n != 1 or dw == [0xFFFF1000]


# ---------------------------------------------------------------------------- decoding garbage

@settings(max_examples=300, deadline=None)
@given(stream=streams())
def test_decoder_never_raises(stream):
    items = list(pm4.decode_stream(stream))
    assert sum(i.length for i in items) == len(stream)
    assert all(i.length >= 1 for i in items)
    for i in items:
        assert i == pm4.decode(stream, i.offset)
    lines = pm4.disassemble(stream, base=0x100)
    assert len(lines) == len(items)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=32))
def test_decoder_never_raises_on_random_dwords(stream):
    assert sum(i.length for i in pm4.decode_stream(stream)) == len(stream)
    pm4.listing(stream)


def test_decode_offset_outside_stream():
    with pytest.raises(IndexError, match=r"^decode: offset 3 is outside a stream of 3 dwords$"):
        pm4.decode([0, 0, 0], 3)


def test_listing_good_packets():
    lines = pm4.disassemble([0] * 4 + pm4.write_data(0x1000, [0xDEADBEEF], wr_confirm=1))
    assert lines[4] == "0x0010: c0033700  WRITE_DATA  wr_confirm=1 addr=0x00001000 data=[0xdeadbeef]"
    assert pm4.listing(pm4.indirect_buffer(0x10_0000_0000, 64, chain=1), base=0x200) == (
        "0x0200: c0023f00  INDIRECT_BUFFER  base=0x1000000000 size_dw=64 chain=1")
    # fields at their builder default are left out, but shown when they differ or with verbose
    assert pm4.describe(pm4.decode(pm4.release_mem(0x100, 7), 0)) == "RELEASE_MEM  addr=0x00000100 data=0x00000007"
    assert pm4.describe(pm4.decode(pm4.release_mem(0x100, 7, event_type=0x28, data_sel="NONE"), 0)) == (
        "RELEASE_MEM  event_type=BOTTOM_OF_PIPE_TS data_sel=NONE addr=0x00000100 data=0x00000007")
    assert pm4.describe(pm4.decode(pm4.indirect_buffer(0x100, 8, valid=1), 0)) == (
        "INDIRECT_BUFFER  base=0x00000100 size_dw=8 valid=1")
    assert pm4.describe(pm4.decode(pm4.release_mem(0x100, 7), 0), verbose=True) == (
        "RELEASE_MEM  event_type=CACHE_FLUSH_AND_INV_TS_EVENT event_index=END_OF_PIPE "
        "tcl1_vol_action_en=0 tc_vol_action_en=0 tc_wb_action_en=0 tcl1_action_en=0 tc_action_en=0 "
        "tc_nc_action_en=0 tc_wc_action_en=0 tc_md_action_en=0 cache_policy=0 exec=0 dst_sel=MEMORY "
        "int_sel=NONE data_sel=DATA_32 addr=0x00000100 data=0x00000007 int_ctxid=0x0")
    assert pm4.listing(pm4.nop(3) + [pm4.TYPE2_FILLER]) == (
        "0x0000: c0021000  NOP  n_payload=3\n0x0010: 80000000  TYPE2 FILLER")
    long = pm4.disassemble(pm4.write_data(0, list(range(10))), max_data=2)[0]
    assert long.endswith("data=[0x00000000, 0x00000001, ... +8]")


def test_listing_malformed():
    stream = ([pm4.header(0x7B, 3), 1, 2, 3, 4]            # unknown: skip declared length
              + [0x12345678, 0x80000001]                    # garbage: one dword each
              + [pm4.header(0x3F, 4), 0, 0, 0, 0, 0]        # IB with a bad COUNT
              + pm4.write_data(0x1000, [1, 2, 3])[:2])      # truncated
    assert pm4.disassemble(stream) == [
        "0x0000: c0037b00  UNKNOWN op=0x7b count=3",
        "0x0014: 12345678  BAD TYPE 0: not a type-3 header",
        "0x0018: 80000001  TYPE2 FILLER pad=0x1",
        "0x001c: c0043f00  BAD COUNT INDIRECT_BUFFER: count=4, must be 2",
        "0x0034: c0053700  TRUNCATED WRITE_DATA: needs 7 dwords, 2 left",
    ]
    items = list(pm4.decode_stream(stream))
    assert [getattr(i, "problem", None) for i in items] == [
        pm4.Problem.UNKNOWN_OPCODE, pm4.Problem.BAD_TYPE, None,  # any type-2 dword is a filler
        pm4.Problem.BAD_COUNT, pm4.Problem.TRUNCATED]
    assert isinstance(items[2], pm4.Filler) and items[2].ok
    assert (items[-1].needed, items[-1].available, items[-1].length) == (7, 2, 2)
    assert pm4.describe(pm4.decode([pm4.header(0x37, 1), 0, 0])) == \
        "BAD COUNT WRITE_DATA: count=1, must be >= 3"
    # An unknown packet whose COUNT runs past the end is skipped to the end.
    assert pm4.decode([pm4.header(0x7B, 100), 0]).length == 2


def test_listing_flags_odd_values():
    dw = pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, "ADDR_HI": 1}, [7])
    dw[0] |= 0b101  # predicate + a reserved header bit
    dw[1] |= 1 << 12  # reserved bit in the control dword
    assert pm4.listing(dw) == (
        "0x0000: c0033705  WRITE_DATA  dst_sel=REGISTER(unsupported) addr=0x100000000 "
        "data=[0x00000007] predicate=1 RESERVED[hdr]=0x00000004 RESERVED[dw0]=0x00001000")
    assert "dst_sel=4(reserved)" in pm4.listing(pm4.encode_fields("WRITE_DATA", {"DST_SEL": 4}, [0]))
    assert "event_type=0x3f" in pm4.listing(pm4.release_mem(0, 0, event_type=0x3F))


# ---------------------------------------------------------------------------- refusing bad arguments

@pytest.mark.parametrize("call, exc, message", [
    (lambda: pm4.write_data(0x1002, [1]), ValueError, "WRITE_DATA: addr must be dword aligned, not 0x1002"),
    (lambda: pm4.write_data(1 << 64, [1]), ValueError, "WRITE_DATA: addr must fit in 64 bits, not 0x10000000000000000"),
    (lambda: pm4.write_data(-4, [1]), ValueError, "WRITE_DATA: addr must fit in 64 bits, not -0x4"),
    (lambda: pm4.write_data(0, []), ValueError, "WRITE_DATA: data must have 1 to 16381 dwords, not 0"),
    (lambda: pm4.write_data(0, [1, 1 << 32]), ValueError, "WRITE_DATA: data[1] must fit in 32 bits, not 0x100000000"),
    (lambda: pm4.write_data(0, [1.5]), TypeError, "WRITE_DATA: data[0] must be an int, not 1.5"),
    (lambda: pm4.write_data(0, 5), TypeError, "WRITE_DATA: data must be a sequence of dwords, not 5"),
    (lambda: pm4.write_data("0", [1]), TypeError, "WRITE_DATA: addr must be an int, not '0'"),
    (lambda: pm4.write_data(0, [1], wr_confirm=2), ValueError,
     "WRITE_DATA: wr_confirm must fit in WR_CONFIRM[20] (1 bit), not 0x2"),
    (lambda: pm4.write_data(0, [1], dst_sel="REGISTER"), ValueError,
     "WRITE_DATA: dst_sel=REGISTER is not supported by this device"),
    (lambda: pm4.write_data(0, [1], dst_sel=4), ValueError,
     "WRITE_DATA: dst_sel must be one of MEMORY_SYNC(1), TC_L2(2), MEMORY(5), not 4"),
    (lambda: pm4.write_data(0, [1], dst_sel="GDS"), ValueError, "WRITE_DATA: dst_sel=GDS is not supported by this device"),
    (lambda: pm4.indirect_buffer(0, 1 << 20), ValueError,
     "INDIRECT_BUFFER: size_dw must fit in IB_SIZE[19:0] (20 bits), not 0x100000"),
    (lambda: pm4.indirect_buffer(1 << 64, 4), ValueError,
     "INDIRECT_BUFFER: base must fit in 64 bits, not 0x10000000000000000"),
    (lambda: pm4.indirect_buffer(0, 4, vmid=16), ValueError,
     "INDIRECT_BUFFER: vmid must fit in VMID[27:24] (4 bits), not 0x10"),
    (lambda: pm4.wait_reg_mem(0, 0, 0, 7), ValueError,
     "WAIT_REG_MEM: function must be one of ALWAYS(0), LT(1), LE(2), EQ(3), NE(4), GE(5), GT(6), not 7"),
    (lambda: pm4.wait_reg_mem(0, 0, 0, "=="), ValueError,
     "WAIT_REG_MEM: function must be one of ALWAYS(0), LT(1), LE(2), EQ(3), NE(4), GE(5), GT(6), not '=='"),
    (lambda: pm4.wait_reg_mem(0, 1 << 32, 0, "EQ"), ValueError,
     "WAIT_REG_MEM: ref must fit in REFERENCE[31:0] (32 bits), not 0x100000000"),
    (lambda: pm4.wait_reg_mem(0, 0, 0, "EQ", poll_interval=1 << 16), ValueError,
     "WAIT_REG_MEM: poll_interval must fit in POLL_INTERVAL[15:0] (16 bits), not 0x10000"),
    (lambda: pm4.release_mem(0x1004, 1, data_sel="DATA_64"), ValueError,
     "RELEASE_MEM: addr must be qword aligned when DATA_SEL=DATA_64, not 0x1004"),
    (lambda: pm4.release_mem(0x1004, 0, data_sel="TIMESTAMP"), ValueError,
     "RELEASE_MEM: addr must be qword aligned when DATA_SEL=TIMESTAMP, not 0x1004"),
    (lambda: pm4.release_mem(0x1000, 1 << 32), ValueError,
     "RELEASE_MEM: data must fit in 32 bits when DATA_SEL=DATA_32, not 0x100000000"),
    (lambda: pm4.release_mem(0, 0, event_type=64), ValueError,
     "RELEASE_MEM: event_type must fit in EVENT_TYPE[5:0] (6 bits), not 0x40"),
    (lambda: pm4.release_mem(0, 0, int_sel=4), ValueError,
     "RELEASE_MEM: int_sel=SEND_INT_CTXID is not supported by this device"),
    (lambda: pm4.release_mem(0, 0, int_sel=7), ValueError,
     "RELEASE_MEM: int_sel must be one of NONE(0), SEND_INT(1), SEND_INT_ON_CONFIRM(2), SEND_DATA_ON_CONFIRM(3), not 7"),
    (lambda: pm4.dma_data(0, 1 << 32, 4, src_sel="DATA"), ValueError,
     "DMA_DATA: src must fit in 32 bits when SRC_SEL=DATA, not 0x100000000"),
    (lambda: pm4.dma_data(0, 0, 1 << 26), ValueError,
     "DMA_DATA: byte_count must fit in BYTE_COUNT[25:0] (26 bits), not 0x4000000"),
    (lambda: pm4.dma_data(0, 0, 4, src_sel="GDS"), ValueError,
     "DMA_DATA: src_sel=GDS is not supported by this device"),
    (lambda: pm4.nop(16384), ValueError, "NOP: n_payload must be 0 to 16383, not 16384"),
    (lambda: pm4.nop(-1), ValueError, "NOP: n_payload must be 0 to 16383, not -1"),
    (lambda: pm4.header(0x100, 0), ValueError, "header: opcode must fit in OPCODE[15:8] (8 bits), not 0x100"),
    (lambda: pm4.header(0x10, 1 << 14), ValueError, "header: count must fit in COUNT[29:16] (14 bits), not 0x4000"),
    (lambda: pm4.pad(-1), ValueError, "pad: n_dwords must be >= 0, not -1"),
    (lambda: pm4.encode_fields("WRITE_DATA", {"DST_SEL": 16}, [0]), ValueError,
     "WRITE_DATA: DST_SEL must fit in DST_SEL[11:8] (4 bits), not 0x10"),
    (lambda: pm4.encode_fields("WRITE_DATA", {"WR_CONFIRMED": 1}), ValueError,
     "encode_fields: WRITE_DATA has no field 'WR_CONFIRMED'"),
    (lambda: pm4.encode_fields("FOO"), ValueError, "encode_fields: unknown packet 'FOO'"),
    (lambda: pm4.encode_fields("INDIRECT_BUFFER", {}, [1]), ValueError,
     "encode_fields: INDIRECT_BUFFER has no variable tail"),
])
def test_builders_refuse(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("call, message", [
    (lambda: packets.by_name["WRITE_DATA"].field("WR_CONFIRMED"), "WRITE_DATA has no field 'WR_CONFIRMED'"),
    (lambda: packets.by_name["RELEASE_MEM"].value("DATA"), "RELEASE_MEM has no value 'DATA'"),
    (lambda: packets.HEADER.field("OPCODES"), "PM4 header has no field 'OPCODES'"),
    (lambda: sp.by_name["COPY_LINEAR"].field("COUNT_"), "COPY_LINEAR has no field 'COUNT_'"),
])
def test_table_lookups_name_the_packet_and_what_it_lacks(call, message):
    with pytest.raises(KeyError) as info:
        call()
    assert info.value.args == (message,)


def test_value_width_and_align_follow_the_top_and_bottom_fields_for_any_number_of_parts():
    """Layout.value_width is 32 bits per dword below the top field plus the top field's msb + 1,
    value_align the low field's lsb. Every value in today's tables has two parts (LO, HI),
    where the last field and the second are the same: a one-part and a three-part value
    (as a table may declare) pin the rule itself."""
    from spec.layout import Field, Layout, Value

    class Shape(Layout):
        name = "SHAPE"
        fields = (Field("COUNT", 0, 0, 14, "one dword"), Field("ADDR_LO", 1, 3, 29, "low"),
                  Field("ADDR_MID", 2, 0, 32, "middle"), Field("ADDR_HI", 3, 0, 16, "top"))
        values = (Value("count", ("COUNT",), "one part"), Value("addr", ("ADDR_LO", "ADDR_MID", "ADDR_HI"), "three parts"))

    s = Shape()
    assert [(s.value_width(v), s.value_align(v)) for v in s.values] == [(14, 1), (32 * 2 + 16, 8)]


def test_tail_limits():
    p = packets.by_name["WRITE_DATA"]
    most = pm4.MAX_PAYLOAD - p.fixed
    assert pm4.decode(pm4.write_data(0, [0] * most)).count == packets.HEADER.field("COUNT").max
    with pytest.raises(ValueError, match=rf"data must have 1 to {most} dwords, not {most + 1}$"):
        pm4.write_data(0, [0] * (most + 1))


def test_bool_and_intenum_arguments():
    assert pm4.write_data(0, [1], wr_confirm=True) == pm4.write_data(0, [1], wr_confirm=1)
    assert pm4.release_mem(8, 1, data_sel=pm4.RELEASE_MEM_DATA_SEL.DATA_64) == \
        pm4.release_mem(8, 1, data_sel=2)


# ---------------------------------------------------------------------------- single source, deps, doc

def test_no_opcode_number_outside_the_table():
    """pm4.py (with builder_args.py, its argument checks) and gen_packets.py derive every
    number from packets.py: their code (not their docstrings, which show examples) has no
    hex literal equal to an opcode."""
    opcodes = {p.opcode for p in PACKETS}
    for path in ("spec/pm4.py", "spec/builder_args.py", "spec/generated.py", "spec/gen/gen_packets.py"):
        with tokenize.open(ROOT / path) as f:
            for tok in tokenize.generate_tokens(f.readline):
                if tok.type == tokenize.NUMBER and tok.string.lower().startswith("0x"):
                    assert int(tok.string, 16) not in opcodes, f"{path}:{tok.start[0]} spells an opcode"


def test_stdlib_only():
    code = ("import sys, spec.pm4, spec.packets, spec.gen.gen_packets; "
            "bad = [m for m in ('numpy', 'amaranth', 'cocotb') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_markdown_reference():
    md = gen_packets.render_markdown()
    assert md == gen_packets.render_markdown() and md.endswith("\n")
    for p in PACKETS:
        assert f"### {p.name} (opcode {p.opcode:#04x})" in md
        for f in p.fields:
            assert f"| {f.span} | {f.name} |" in md
    assert "0x80000000" in md
    assert "| 2 | [19:0] | IB_SIZE | IB length in dwords. |" in md


def test_the_checked_in_packet_reference_is_the_tables():
    """docs/packets.md is what the tables (PM4 and SDMA) render to now: a field's doc or an
    enum value's support changed in spec/ without `make gen` reads wrong there (the same check
    as test_generated.py's, here where the packet modules' mutants are run)."""
    from spec.gen import generate

    stale = (ROOT / "docs" / "packets.md").read_text() != generate.render_packets_markdown()
    assert not stale, "docs/packets.md differs from spec/packets.py and spec/sdma/packets.py (run `make gen`)"


def test_builder_docs_say_what_each_argument_takes():
    """Each builder's docstring (help(), editors) has one line per parameter of its signature,
    saying what that parameter sets: the tail's own doc for the variable tail, the field's name
    and span for a field, and "or any number" exactly where the builder accepts a number
    outside the field's enum."""
    import inspect

    for p in PACKETS:
        build = pm4.BUILDERS[p.name]
        lines = inspect.getdoc(build).splitlines()
        assert lines[0] == f"Build {p.name} (opcode {p.opcode:#04x}): {p.doc}"
        for arg in inspect.signature(build).parameters:
            mine = [ln for ln in lines if ln.startswith(f"{arg}: ")]
            assert len(mine) == 1, (p.name, arg, mine)
            text = mine[0][len(arg) + 2:]
            if p.tail and arg == p.tail.arg_name:
                assert p.tail.doc and text == p.tail.doc, (p.name, arg, text)
                continue
            f = next((f for f in p.fields if f.arg_name == arg), None)
            if f is None:  # a value spread over fields (an address)
                v = p.value(arg)
                assert text == f"{v.doc} ({p.value_width(v)} bits)", (p.name, arg, text)
                continue
            assert text.startswith(f"{f.name}{f.span}: {f.doc}"), (p.name, arg, text)
            outside = next((v for v in range(f.max + 1) if v not in f.names), None) if f.enum else None
            if outside is not None:  # (an enum that names every value has nothing outside)
                try:
                    pm4._enum_arg(p.name, arg, f, outside)
                    accepted = True
                except ValueError:
                    accepted = False
                assert ("or any number" in text) == accepted, (p.name, arg, text)
