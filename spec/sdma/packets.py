"""The SDMA packet table: the single source of every SDMA opcode and field position.

The copy engine (SDMA) reads its own packet format from its own ring, not PM4. Layouts
and numbers are AMD's SDMA v4 (vega10: amdgpu's vega10_sdma_pkt_open.h, the ring code
of sdma_v4_0.c, Mesa's sid.h and ac_cmdbuf_sdma.c), cut down to the packets and fields
this engine gives a meaning to. spec/sdma/codec.py builds, decodes and disassembles from this
table; the reference model's engine (testbench/refmodel/sdma.py), the KMD's SDMA ring and
docs/packets.md read it too. No SDMA opcode or bit position is written anywhere else.

An SDMA packet has no length field in general: dword 0 holds OP [7:0] and SUB_OP [15:8],
and the (OP, SUB_OP) pair fixes the length, except for NOP (its header COUNT says how
many dwords follow) and WRITE_LINEAR (its COUNT says how many data dwords follow, − 1).

Indexing is spec/packets.py's: `Field.dword` counts the dwords after the header, the
header's packet-specific bits [31:16] use dword -1. The Field, Value, Tail and Rule
shapes are the PM4 table's own (spec/layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field as _dc_field, replace

from spec.layout import EnumValue, Field, Layout, Rule, Tail, Value

__all__ = ["SDMA_OP", "SDMA_SUB_OP", "SdmaPacketDef", "SDMA_PACKETS", "by_name", "by_op",
           "MAX_WRITE_DW", "MAX_COPY_BYTES", "NOP_PAD", "RETRY_FOREVER"]

SDMA_OP = Field("OP", -1, 0, 8, "Packet opcode (SDMA_PKT_HEADER_OP).")
SDMA_SUB_OP = Field("SUB_OP", -1, 8, 8, "Sub-opcode (SDMA_PKT_HEADER_SUB_OP).")


@dataclass(frozen=True)
class SdmaPacketDef(Layout):
    """One SDMA packet: (op, sub_op), layout and builder signature.

    `length_field`: the field whose value + `length_bias` is the number of tail dwords
    (NOP: COUNT, bias 0; WRITE_LINEAR: COUNT, bias 1); None for fixed-length packets.
    `minus_one`: fields that hold the builder's argument − 1 (AMD's byte counts on v4).
    """

    name: str
    op: int
    sub_op: int
    doc: str
    fields: tuple[Field, ...] = ()
    values: tuple[Value, ...] = ()
    tail: Tail | None = None
    length_field: str | None = None
    length_bias: int = 0
    minus_one: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    index: int = _dc_field(default=-1, compare=False)  # position in SDMA_PACKETS

    HEADER_BITS = SDMA_OP.mask | SDMA_SUB_OP.mask  # (a class attribute, not a dataclass field)

    @property
    def header(self) -> int:
        """The header dword with every packet-specific field 0."""
        return self.op << SDMA_OP.lsb | self.sub_op << SDMA_SUB_OP.lsb

    @property
    def max_tail(self) -> int:
        if self.tail is None:
            return 0
        return self.field(self.length_field).max + self.length_bias  # type: ignore[arg-type]


def _off(name: str, dword: int, lsb: int, doc: str, on: str, width: int = 1) -> Field:
    """A field AMD defines whose only value here is 0 (the others are refused)."""
    return Field(name, dword, lsb, width, doc, enum=(
        EnumValue("OFF", 0, "Off."),
        *(EnumValue(on if width == 1 else f"{on}{v}", v, f"{on} (AMD).", supported=False)
          for v in range(1, 1 << width)),
    ), default="OFF")


def _swap(name: str, dword: int, lsb: int) -> Field:
    return Field(name, dword, lsb, 2, "Endian swap of the data (AMD: 0 none, 1 16-bit, 2 32-bit, "
                 "3 64-bit); amdgpu writes 0.", enum=(
                     EnumValue("NONE", 0, "No swap."),
                     EnumValue("SWAP_16", 1, "16-bit swap.", supported=False),
                     EnumValue("SWAP_32", 2, "32-bit swap.", supported=False),
                     EnumValue("SWAP_64", 3, "64-bit swap.", supported=False),
                 ), default="NONE")


def _lo(name: str, dword: int, lsb: int, doc: str) -> Field:
    return Field(name, dword, lsb, 32 - lsb, doc + (f" Bits [{lsb - 1}:0] are reserved: the address is "
                                                   f"{1 << lsb}-byte aligned." if lsb else ""))


def _hi(name: str, dword: int) -> Field:
    return Field(name, dword, 0, 32, "Address bits [63:32].")


_ENCRYPT = lambda: _off("ENCRYPT", -1, 16, "Encrypted data (AMD, secure display).", "ENCRYPTED")  # noqa: E731
_TMZ = lambda: _off("TMZ", -1, 18, "Trusted memory zone access (AMD).", "SECURE")  # noqa: E731

MAX_COPY_BYTES = 1 << 22
"""COPY_LINEAR and CONSTANT_FILL move at most COUNT[21:0] + 1 = 4 MiB per packet (amdgpu's
copy_max_bytes and fill_max_bytes, 0x400000)."""
MAX_WRITE_DW = 1 << 20
"""WRITE_LINEAR carries at most COUNT[19:0] + 1 data dwords."""
RETRY_FOREVER = 0xFFF
"""POLL_REGMEM RETRY_COUNT that never gives up (Mesa's SDMA_POLL_RETRY_INDEFINITELY)."""

NOP = SdmaPacketDef(
    "NOP", 0, 0,
    "Does nothing. COUNT dwords follow the header and are skipped (a burst NOP); the one-dword "
    "NOP is 0x00000000, with which amdgpu pads SDMA rings and IBs.",
    fields=(Field("COUNT", -1, 16, 14, "Dwords that follow the header (SDMA_PKT_NOP_HEADER_COUNT).",
                  fmt="d"),),
    tail=Tail("payload", "Skipped dwords (builders write 0).", min=0, ignored=True),
    length_field="COUNT", args=("n_payload",),
)

COPY_LINEAR = SdmaPacketDef(
    "COPY_LINEAR", 1, 0,
    "Copies COUNT + 1 bytes from src to dst. Any alignment; the ranges must not overlap (as "
    "DMA_DATA's: the RTL's DMA engine reads ahead; the reference model copies as memmove).",
    fields=(
        _ENCRYPT(), _TMZ(),
        _off("BROADCAST", -1, 27, "The 9-dword form writing two destinations (AMD).", "BROADCAST"),
        Field("COUNT", 0, 0, 22, "Bytes to copy − 1 (SDMA v4; Mesa writes bytes − 1 from SDMA 4.0 on).",
              arg="byte_count", fmt="d"),
        _swap("DST_SW", 1, 16), _swap("SRC_SW", 1, 24),
        Field("SRC_ADDR_LO", 2, 0, 32, "Source address bits [31:0]."), _hi("SRC_ADDR_HI", 3),
        Field("DST_ADDR_LO", 4, 0, 32, "Destination address bits [31:0]."), _hi("DST_ADDR_HI", 5),
    ),
    values=(Value("src", ("SRC_ADDR_LO", "SRC_ADDR_HI"), "Source byte address."),
            Value("dst", ("DST_ADDR_LO", "DST_ADDR_HI"), "Destination byte address.")),
    minus_one=("COUNT",), args=("dst", "src", "byte_count"),
)

WRITE_LINEAR = SdmaPacketDef(
    "WRITE_LINEAR", 2, 0,
    "Writes the data dwords to consecutive dwords from dst (AMD's WRITE_UNTILED).",
    fields=(
        _ENCRYPT(), _TMZ(),
        _lo("DST_ADDR_LO", 0, 2, "Destination address bits [31:2]."), _hi("DST_ADDR_HI", 1),
        Field("COUNT", 2, 0, 20, "Data dwords − 1 (SDMA_PKT_WRITE_UNTILED_DW_3_COUNT).", fmt="d"),
        _swap("SW", 2, 24),
    ),
    values=(Value("dst", ("DST_ADDR_LO", "DST_ADDR_HI"), "Destination byte address."),),
    tail=Tail("data", "The dwords to write, in address order."),
    length_field="COUNT", length_bias=1, args=("dst", "data"),
)

INDIRECT_BUFFER = SdmaPacketDef(
    "INDIRECT_BUFFER", 4, 0,
    "Runs IB_SIZE dwords of SDMA packets fetched from base with VMID's translation, then "
    "returns to the ring (AMD's INDIRECT). IBs do not nest: an INDIRECT_BUFFER inside an IB is "
    "IB_NESTING.",
    fields=(
        Field("VMID", -1, 16, 4, "Virtual memory context the IB runs in.", default=0),
        _lo("IB_BASE_LO", 0, 5, "IB address bits [31:5] (amdgpu: \"base must be 32 byte aligned\")."),
        _hi("IB_BASE_HI", 1),
        Field("IB_SIZE", 2, 0, 20, "IB length in dwords.", arg="size_dw", fmt="d"),
        Field("CSA_ADDR_LO", 3, 0, 32, "Context save area, bits [31:0] (AMD, for preemption); ignored: "
              "this engine finishes an IB once it starts it.", default=0, fmt="x"),
        Field("CSA_ADDR_HI", 4, 0, 32, "Context save area, bits [63:32]; ignored.", default=0, fmt="x"),
    ),
    values=(Value("base", ("IB_BASE_LO", "IB_BASE_HI"), "IB byte address."),),
    args=("base", "size_dw"),
)

FENCE = SdmaPacketDef(
    "FENCE", 5, 0,
    "Once every earlier packet is done, writes the 32-bit data to addr (amdgpu's sdma fence; a "
    "64-bit seqno takes two).",
    fields=(
        Field("MTYPE", -1, 16, 3, "Memory type of the write (SDMA 4.4+ headers; Mesa writes 3, "
              "uncached). Ignored: there is no cache.", default=0),
        _lo("ADDR_LO", 0, 2, "Address bits [31:2]."), _hi("ADDR_HI", 1),
        Field("DATA", 2, 0, 32, "The value written."),
    ),
    values=(Value("addr", ("ADDR_LO", "ADDR_HI"), "Destination byte address."),),
    args=("addr", "data"),
)

TRAP = SdmaPacketDef(
    "TRAP", 6, 0,
    "Once every earlier packet is done, raises the engine's trap interrupt: an IH entry from "
    "client SDMA0, source SDMA_TRAP, with INT_CONTEXT in src_data[0] (while SDMA_CNTL.TRAP_ENABLE).",
    fields=(Field("INT_CONTEXT", 0, 0, 28, "Context id for the IH entry (amdkfd: its event id).",
                  default=0),),
)

POLL_REGMEM = SdmaPacketDef(
    "POLL_REGMEM", 8, 0,
    "Polls until (*addr & mask) FUNC value holds, re-reading every INTERVAL × 16 clocks, at most "
    "RETRY_COUNT + 1 times (0xFFF: forever); when the retries run out the engine raises a "
    "POLL_TIMEOUT IH entry and moves on, as AMD's does.",
    fields=(
        _off("HDP_FLUSH", -1, 26, "Flush the host data path before polling (AMD).", "FLUSH"),
        Field("FUNC", -1, 28, 3, "Comparison of the masked value with value (amdgpu: 3 is ==; igt: "
              "4 is !=; the others as the CP's WAIT_REG_MEM).", enum=(
                  EnumValue("ALWAYS", 0, "Always true: one read (which can still fault), no wait."),
                  EnumValue("LT", 1, "masked < value"),
                  EnumValue("LE", 2, "masked <= value"),
                  EnumValue("EQ", 3, "masked == value"),
                  EnumValue("NE", 4, "masked != value"),
                  EnumValue("GE", 5, "masked >= value"),
                  EnumValue("GT", 6, "masked > value"),
              )),
        Field("MEM_POLL", -1, 31, 1, "What addr names.", enum=(
            EnumValue("REGISTER", 0, "A register (AMD: its dword offset << 2). Refused: this engine "
                      "polls memory only.", supported=False),
            EnumValue("MEMORY", 1, "Memory."),
        ), default="MEMORY"),
        _lo("ADDR_LO", 0, 2, "Poll address bits [31:2]."), _hi("ADDR_HI", 1),
        Field("VALUE", 2, 0, 32, "Reference value.", arg="value"),
        Field("MASK", 3, 0, 32, "Mask applied to the polled dword."),
        Field("INTERVAL", 4, 0, 16, "Time between polls, in units of 16 clocks (Mesa: 0xA is "
              "160 clocks).", default=0xA, fmt="d"),
        Field("RETRY_COUNT", 4, 16, 12, "Polls − 1 before giving up; 0xFFF: poll forever.",
              default=RETRY_FOREVER),
    ),
    values=(Value("addr", ("ADDR_LO", "ADDR_HI"), "Byte address of the polled dword."),),
    args=("addr", "value", "mask", "func"),
)

CONSTANT_FILL = SdmaPacketDef(
    "CONSTANT_FILL", 11, 0,
    "Fills COUNT + 1 bytes from dst with the 32-bit value: the byte at address a gets byte "
    "(a mod 4) of it, as DMA_DATA fills. Any alignment.",
    fields=(
        _swap("SW", -1, 16),
        Field("FILLSIZE", -1, 30, 2, "Fill granularity (amdgpu writes 0, Mesa 2: \"count is in "
              "dwords\", still programmed in bytes).", enum=(
                  EnumValue("BYTES", 0, "amdgpu's choice; the dword pattern as below."),
                  EnumValue("WORDS", 1, "16-bit granularity (AMD).", supported=False),
                  EnumValue("DWORDS", 2, "Mesa's choice; the same dword pattern."),
                  EnumValue("QWORDS", 3, "64-bit granularity (AMD).", supported=False),
              ), default="BYTES"),
        Field("DST_ADDR_LO", 0, 0, 32, "Destination address bits [31:0]."), _hi("DST_ADDR_HI", 1),
        Field("SRC_DATA", 2, 0, 32, "The fill value.", arg="value"),
        Field("COUNT", 3, 0, 22, "Bytes to fill − 1 (SDMA v4).", arg="byte_count", fmt="d"),
    ),
    values=(Value("dst", ("DST_ADDR_LO", "DST_ADDR_HI"), "Destination byte address."),),
    minus_one=("COUNT",), args=("dst", "value", "byte_count"),
)

SDMA_PACKETS: tuple[SdmaPacketDef, ...] = tuple(
    replace(p, index=i) for i, p in enumerate(
        (NOP, COPY_LINEAR, WRITE_LINEAR, INDIRECT_BUFFER, FENCE, TRAP, POLL_REGMEM, CONSTANT_FILL))
)
"""Every SDMA packet in a fixed order (PERF_SDMA_PACKETS counts by `index`)."""
(NOP, COPY_LINEAR, WRITE_LINEAR, INDIRECT_BUFFER, FENCE, TRAP, POLL_REGMEM, CONSTANT_FILL) = SDMA_PACKETS

by_name: dict[str, SdmaPacketDef] = {p.name: p for p in SDMA_PACKETS}
by_op: dict[tuple[int, int], SdmaPacketDef] = {(p.op, p.sub_op): p for p in SDMA_PACKETS}
NOP_PAD = NOP.header
"""0x00000000: the one-dword NOP (amdgpu's sdma_v4_0 ring nop, Mesa's SDMA_NOP_PAD)."""


def _check() -> None:
    def fail(msg: str) -> None:
        raise AssertionError(f"spec/sdma/packets.py: {msg}")

    if len(by_name) != len(SDMA_PACKETS) or len(by_op) != len(SDMA_PACKETS):
        fail("duplicate packet name or (op, sub_op)")
    for p in SDMA_PACKETS:
        used: dict[int, int] = {-1: SDMA_OP.mask | SDMA_SUB_OP.mask}
        for f in p.fields:
            if not (f.width >= 1 and f.lsb >= 0 and f.msb <= 31) or (f.dword == -1 and f.lsb < 16):
                fail(f"{p.name}.{f.name}: bits {f.span} outside its dword's free bits")
            if used.get(f.dword, 0) & f.mask:
                fail(f"{p.name}.{f.name}: overlaps another field")
            used[f.dword] = used.get(f.dword, 0) | f.mask
            if isinstance(f.default, str) and f.default not in f.values:
                fail(f"{p.name}.{f.name}: default {f.default!r} is not an enum value")
        for d in range(p.fixed):
            if not p.fields_in(d):
                fail(f"{p.name}: dword {d} has no field")
        if (p.tail is None) != (p.length_field is None):
            fail(f"{p.name}: a tail needs a length field and the reverse")
        parts = {n for v in p.values for n in v.fields}
        for f in p.fields:
            if f.name not in parts and f.name != p.length_field and f.default is None and f.arg_name not in p.args:
                fail(f"{p.name}.{f.name}: no default, so it must be listed in args")
        for n in p.minus_one:
            p.field(n)


_check()
