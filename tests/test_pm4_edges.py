"""The packet table's helpers and the disassembler at their edges: what the RTL and the
difftest take from a Field (bits, put), COUNT limits exactly at their ends, how narrow
and wide fields print, a data list exactly as long as the listing shows, and the
messages of encode_fields (the tests' way to build what the CP must refuse)."""

from __future__ import annotations

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
])
def test_encode_and_builder_messages(call, message):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value) == message


def test_malformed_items_describe_themselves():
    item = pm4.decode([pm4.header(0x7B, 0), 0])
    assert not item.ok and item.message == pm4.describe(item) == "UNKNOWN op=0x7b count=0"
