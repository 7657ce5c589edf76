"""Dword dumps written as crash reports write them, read back by `gpucosim disasm`:
dumps of many lines (packets straddling them, a second dump after prose, a gap in the
addresses) come back whole, at their addresses, and list as the stream they were."""

from __future__ import annotations

import codecs

import pytest

from gpucosim import cli
from gpucosim.dump import PER_LINE, Dump, format_dump, parse, parse_text
from spec import pm4


def _stream(base: int) -> list[int]:
    """Forty-odd dwords of every kind of packet, several straddling an 8-dword line."""
    s = (pm4.nop(2) + pm4.write_data(base + 0x800, list(range(0x100, 0x10C)), wr_confirm=1)
         + pm4.wait_reg_mem(base + 0x900, 1, 0xFF, "GE") + pm4.release_mem(base + 0x908, 0xDEAD_BEEF, int_sel="SEND_INT")
         + [pm4.TYPE2_FILLER] + pm4.indirect_buffer(base + 0x1000, 24, chain=1)
         + pm4.dma_data(base + 0xA00, base + 0xB00, 100))
    return s + pm4.pad(-len(s) % 8)


def test_long_dump_round_trip(capsys, tmp_path):
    base = 0x0201_3000
    dwords = _stream(base)
    assert len(dwords) > 4 * PER_LINE
    text = format_dump("IB1 at 0x2013000", base, dwords)
    lines = text.splitlines()
    assert len(lines) == 1 + -(-len(dwords) // PER_LINE)
    for k, line in enumerate(lines[1:]):  # each line starts at the address of its first dword
        assert line.startswith(f"{base + 4 * PER_LINE * k:#010x}: "), line
    assert parse_text(text) == [Dump("IB1 at 0x2013000", base, dwords)]
    # in a crash report: prose, this dump, prose, a second (ring) dump
    ring = pm4.indirect_buffer(base, len(dwords)) + pm4.release_mem(0x2000008, 5) + pm4.pad(5)
    report = tmp_path / "crash.txt"
    report.write_text("gpucosim crash report\nreason: timeout\n" + text + "\n\nlast ioctls:\n  CS ...\n"
                      + format_dump("ring", 0x100, ring) + "\n")
    dumps = parse(report.read_bytes(), str(report))
    assert [(d.name, d.base, d.dwords) for d in dumps] == [("IB1 at 0x2013000", base, dwords), ("ring", 0x100, ring)]
    assert cli.main(["disasm", str(report), "--max-data", "64"]) == 0
    out = capsys.readouterr().out
    want = (f"IB1 at 0x2013000 ({len(dwords)} dwords)\n{pm4.listing(dwords, base, max_data=64)}\n\n"
            f"ring ({len(ring)} dwords at 0x100)\n{pm4.listing(ring, 0x100, max_data=64)}\n")
    assert out == want
    # every packet is listed at its own address, in order
    starts = [base + 4 * p.offset for p in pm4.decode_stream(dwords)]
    listed = [int(line.split(":")[0], 16) for line in out.splitlines()[1:] if line.startswith("0x")][:len(starts)]
    assert listed == starts


def test_gaps_start_a_new_dump():
    """Addresses that jump (two separate IBs pasted as hex) make two dumps, each at its
    base; plain words without addresses continue the current one."""
    a, b = _stream(0x1000), pm4.write_data(0x5000, [1, 2, 3])
    text = format_dump("x", 0x1000, a).split("\n", 1)[1] + "\n" + f"0x8000: {' '.join(f'{w:x}' for w in b[:2])}\n" \
        + " ".join(f"{w:x}" for w in b[2:]) + "\n"
    dumps = parse_text(text)
    assert [(d.base, d.dwords) for d in dumps] == [(0x1000, a), (0x8000, b)]
    assert dumps[1].name == "dump @ 0x8000"


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-be", "utf-32"])
def test_a_text_dump_with_a_byte_order_mark(capsys, tmp_path, encoding):
    """A dump saved as UTF-16 (PowerShell's `>`) was read as binary dwords: "66 bytes is not a
    whole number of dwords"; with UTF-8's mark, its first word was '\\ufeffc0033700'."""
    f = tmp_path / "dump.txt"
    text = "c0033700 500 2000000 0 12345678\n"
    f.write_bytes(codecs.BOM_UTF16_BE + text.encode("utf-16-be") if encoding == "utf-16-be" else text.encode(encoding))
    assert cli.main(["disasm", str(f)]) == 0
    assert capsys.readouterr().out == "0x0000: c0033700  WRITE_DATA  addr=0x02000000 data=[0x12345678]\n"


def test_binary_dwords_that_begin_like_a_mark_stay_binary(capsys, tmp_path):
    f = tmp_path / "ib.bin"
    f.write_bytes(bytes.fromhex("fffe1000") + bytes.fromhex("0010ffff"))  # 0x0010feff, then a NOP
    assert cli.main(["disasm", str(f)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("0x0000: 0010feff") and out[1].startswith("0x0004: ffff1000  NOP"), out
