"""The packet table's helpers and the disassembler at their edges: what the RTL and the
difftest take from a Field (bits, put), COUNT limits exactly at their ends, how narrow
and wide fields print, a data list exactly as long as the listing shows, and the
messages of encode_fields (the tests' way to build what the CP must refuse)."""

from __future__ import annotations

import numpy as np
import pytest

from spec import packets, pm4


def test_field_bits_put_and_mask_agree():
    for p in packets.PACKETS:
        for f in p.fields:
            assert f.bits == slice(f.lsb, f.lsb + f.width)
            assert list(range(32))[f.bits] == [b for b in range(32) if f.mask >> b & 1]
            for v in (0, 1, f.max, f.max >> 1):
                assert f.put(v) == v << f.lsb and f.get(f.put(v)) == v
            assert f.put(f.max + 1) == 0  # what does not fit is dropped, never spills into the next field


def test_count_limits_exact():
    for p in packets.PACKETS:
        assert p.count_ok(p.min_count) and p.count_ok(p.max_count)
        assert not p.count_ok(p.min_count - 1) and not p.count_ok(p.max_count + 1)


def test_narrow_fields_print_decimal_wide_ones_hex():
    # VMID is 4 bits wide: decimal; IB_SIZE (20 bits): decimal by its own format; a 16-bit
    # POLL_INTERVAL too; addresses and data: hex
    line = pm4.listing(pm4.indirect_buffer(0x1000, 8, vmid=12))
    assert line.endswith("size_dw=8 vmid=12")
    assert packets.INDIRECT_BUFFER.field("VMID").width == 4
    wide = pm4.listing(pm4.release_mem(0x100, 7, int_ctxid=0x1234))
    assert "int_ctxid=0x1234" in wide


def test_decode_stream_stops_at_end_and_describe_defaults():
    """decode_stream's `end` bounds the window (a packet it cuts is TRUNCATED, offsets stay
    the stream's); a listing shows 8 data dwords unless told; a type-1 header says so."""
    words = pm4.nop(2) + pm4.write_data(0x100, [1, 2, 3])
    items = list(pm4.decode_stream(words, 0, 5))
    assert [(i.name, i.offset) for i in items] == [("NOP", 0), ("WRITE_DATA", 3)]
    assert not items[1].ok and items[1].problem == pm4.Problem.TRUNCATED and items[1].available == 2
    assert [i.offset for i in pm4.decode_stream(words, 3, 100)] == [3]
    nine = pm4.write_data(0, list(range(9)))
    assert pm4.describe(pm4.decode(nine)).endswith("0x00000007, ... +1]")
    assert pm4.describe(pm4.decode([0x4000_0000])) == "BAD TYPE 1: not a type-3 header"


def test_data_lists_up_to_max_data_are_whole():
    assert pm4.listing(pm4.write_data(0, [1, 2, 3]), max_data=3).endswith(
        "data=[0x00000001, 0x00000002, 0x00000003]")
    assert pm4.listing(pm4.write_data(0, [1, 2, 3, 4]), max_data=3).endswith(
        "data=[0x00000001, 0x00000002, 0x00000003, ... +1]")


@pytest.mark.parametrize("call, message", [
    (lambda: pm4.encode_fields("WRITE_DATA", {"ADDR_LO": 1.5}), "WRITE_DATA: ADDR_LO must be an int, not 1.5"),
    (lambda: pm4.encode_fields("WRITE_DATA", {"DST_SEL": 16}),
     "WRITE_DATA: DST_SEL must fit in DST_SEL[11:8] (4 bits), not 0x10"),
    (lambda: pm4.encode_fields("WRITE_DATA", {}, ["x"]), "WRITE_DATA: data[0] must be an int, not 'x'"),
    (lambda: pm4.encode_fields("WRITE_DATA", {}, [1 << 32]), "WRITE_DATA: data[0] must fit in 32 bits, not 0x100000000"),
    (lambda: pm4.encode_fields("INDIRECT_BUFFER", {}, [1]), "encode_fields: INDIRECT_BUFFER has no variable tail"),
    (lambda: pm4.encode_fields("NOPE"), "encode_fields: unknown packet 'NOPE'"),
    (lambda: pm4.encode_fields("NOP", {"X": 1}), "encode_fields: NOP has no field 'X'"),
    (lambda: pm4.write_data(0, [1], dst_sel=None), "WRITE_DATA: dst_sel must be an int, not None"),
    (lambda: pm4.release_mem(0x104, 1, data_sel="DATA_64"),
     "RELEASE_MEM: addr must be qword aligned when DATA_SEL=DATA_64, not 0x104"),
    (lambda: pm4.release_mem(0x100, 1 << 32), "RELEASE_MEM: data must fit in 32 bits when DATA_SEL=DATA_32, "
                                              "not 0x100000000"),
    (lambda: pm4.pad("4"), "pad: n_dwords must be an int, not '4'"),
    (lambda: pm4.pad(-1), "pad: n_dwords must be >= 0, not -1"),
])
def test_encode_and_builder_messages(call, message):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value) == message


def test_malformed_items_describe_themselves():
    item = pm4.decode([pm4.header(0x7B, 0), 0])
    assert not item.ok and item.message == pm4.describe(item) == "UNKNOWN op=0x7b count=0"


def test_packet_error_codes():
    """spec/rules.py's checks 4-7, one packet each: the CpError name and the reason."""
    from spec import rules
    caps = rules.Caps(ib_levels=2, has_dma=True, dma_max_bytes=1 << 20)

    def err(builder_dwords, level=1, c=caps):
        item = pm4.decode(builder_dwords)
        return rules.packet_error(rules.RULES[item.name if item.ok else item.name], list(builder_dwords[1:]), level, c)

    ib = pm4.indirect_buffer(0x1000, 8)
    assert err(ib) is None
    assert err(pm4.indirect_buffer(0x1000, 8, chain=1), level=0) == ("UNSUPPORTED", "CHAIN in the ring (only an IB "
                                                                                    "may chain)")
    assert err(pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 0x400, "IB_SIZE": 8})) is None  # VALID 0 runs
    assert err(pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": 0x400, "VALID": 1})) == ("IB_SIZE_ZERO",
                                                                                          "IB_SIZE is 0")
    assert err(ib, level=2) == ("IB_NESTING", "nests deeper than the device's 2 IB levels")
    assert err(pm4.indirect_buffer(0x1000, 8, chain=1), level=2) is None
    assert err(pm4.encode_fields("WRITE_DATA", {"DST_SEL": 0, "ADDR_LO": 0x40}, [1])) == \
        ("UNSUPPORTED", "DST_SEL=REGISTER is not supported by this device")
    assert err(pm4.encode_fields("WRITE_DATA", {"DST_SEL": 9, "ADDR_LO": 0x40}, [1])) == \
        ("UNSUPPORTED", "DST_SEL=9 is not a defined value")
    big = pm4.dma_data(0x1000, 0x2000, 16)
    big[-1] = (big[-1] & ~0x1F_FFFF) | ((1 << 20) + 1)
    assert err(big) == ("DMA_BYTE_COUNT", f"BYTE_COUNT {(1 << 20) + 1} is over the DMA engine's limit of "
                                          f"{1 << 20} bytes (CAPS.DMA_MAX_LOG2)")
    assert err(pm4.dma_data(0x1000, 0x2000, 16), c=rules.Caps(has_dma=False)) == \
        ("UNSUPPORTED", "this device has no DMA engine (CAPS.DMA = 0)")
    mis = pm4.write_data(0x1000, [1])
    mis[2] |= 2
    assert err(mis) == ("FENCE_MISALIGNED", "addr 0x1002 is not dword aligned")


def test_decoder_inputs_and_header_flags():
    import collections
    words = pm4.write_data(0x2000, [7, 8])
    for seq in (words, tuple(words), collections.UserList(words), range(0)):  # any Sequence
        items = list(pm4.decode_stream(seq))
        assert [i.name for i in items] == (["WRITE_DATA"] if seq else [])
    assert list(pm4.decode_stream(collections.UserList(words)))[0].data == (7, 8)
    assert [i.offset for i in pm4.decode_stream(words + pm4.nop(1), 0, 100)] == [0, 6]  # end past the stream: clipped
    cut = pm4.decode(words[:3])
    assert (cut.problem, cut.count, cut.needed, cut.available) == (pm4.Problem.TRUNCATED, 4, 6, 3)
    flags = list(words)
    flags[0] |= 0b11  # PREDICATE and SHADER_TYPE
    assert pm4.listing(flags).endswith("predicate=1 shader_type=1")
    assert "dst_sel=MEMORY" in pm4.listing(words, verbose=True) and "dst_sel" not in pm4.listing(words)
    with pytest.raises(TypeError, match=r"^header: opcode must be an int, not 'x'$"):
        pm4.header("x", 0)
    with pytest.raises(TypeError, match=r"^header: count must be an int, not None$"):
        pm4.header(0x10, None)


def test_open_enum_too_wide_and_unknown_value_names_say_so():
    """RELEASE_MEM's EVENT_TYPE is an open enum (any 6-bit event): one bit more is refused
    with the field's span; a packet asked for a value it does not have says which."""
    import pytest

    from spec import packets

    assert pm4.release_mem(0x1000, 1, event_type=63)  # the widest event fits
    with pytest.raises(ValueError, match=r"^RELEASE_MEM: event_type must fit in EVENT_TYPE\[5:0\] \(6 bits\), not 0x40$"):
        pm4.release_mem(0x1000, 1, event_type=64)
    with pytest.raises(ValueError, match=r"^RELEASE_MEM: event_type must fit in EVENT_TYPE\[5:0\] \(6 bits\), not 0x40$"):
        pm4.release_mem(0x1000, 1, event_type=np.uint8(64))  # (not an int: resolved as an enum argument)
    with pytest.raises(KeyError, match="RELEASE_MEM has no value 'NOPE'"):
        packets.RELEASE_MEM.value("NOPE")


def test_packets_md_length_lines_match_the_builders():
    """docs/packets.md's "Length:" and "Header:" lines of the variable packets give the bounds
    the builders and the CP use: NOP's said 0 ≤ N ≤ 16384, but its all-ones COUNT is the header
    alone, so 16383 payload dwords is the most (pm4.nop(16384) refuses), and its "shortest form"
    header was 0xc0001000, a NOP with one payload dword, not the one-dword 0xffff1000."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "packets.md").read_text()
    build = {"NOP": lambda n: pm4.nop(n), "WRITE_DATA": lambda n: pm4.write_data(0x1000, [0] * n)}
    for p in (p for p in packets.PACKETS if p.tail):
        sec = re.search(rf"^### {p.name} \(opcode.*?(?=^### )", text, flags=re.M | re.S).group(0)
        lo, hi = map(int, re.search(r"^- Length: .*?(\d+) ≤ N ≤ (\d+)", sec, flags=re.M).groups())
        assert len(build[p.name](lo)) == p.fixed + 1 + lo and len(build[p.name](hi)) == p.fixed + 1 + hi
        for bad in (lo - 1, hi + 1):
            with pytest.raises(ValueError):
                build[p.name](bad)
        shortest = int(re.search(r"^- Header: `(0x[0-9a-f]+)` for the shortest form", sec, flags=re.M).group(1), 16)
        assert pm4.decode(build[p.name](lo)).header == shortest, p.name
        assert pm4.decode([shortest] + [0] * (p.fixed + lo)).length == p.fixed + 1 + lo, p.name
