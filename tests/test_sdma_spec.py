"""The SDMA packet table (spec/sdma_packets.py) and its codec (spec/sdma.py) against AMD's
published encodings: amdgpu's sdma_v4_0.c and vega10_sdma_pkt_open.h, Mesa's sid.h and
ac_cmdbuf_sdma.c, igt's amd_deadlock. Golden dwords have every field non-zero where the
device allows it, so a field at the wrong position cannot pass."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spec import sdma
from spec import sdma_packets as sp


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
                     "0x1028: 23decd3d  UNKNOWN op=61 sub_op=205"]
    out = subprocess.run([sys.executable, "-m", "gpucosim", "disasm", "--sdma", "-x",
                          *(f"{w:x}" for w in sdma.fence(0x40, 5) + sdma.trap(int_context=9))],
                         capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["0x0000: 00000005  FENCE  addr=0x00000040 data=0x5",
                                "0x0010: 00000006  TRAP  int_context=0x9"]
