"""The PM4 packet table: the single source of every opcode and field position.

The RTL command processor, the UMD/KMD packet builders (spec/pm4.py), the
disassembler, the reference model, the KMD's checker (through spec/rules.py, the CP's
checks as data) and docs/packets.md all read this table; no opcode number or bit
position is written anywhere else.

Layouts and numbers are AMD's (gfx9 PM4, as in Linux amdgpu's soc15d.h and the
kfd pm4 headers), cut down to the fields this device gives a meaning to. Bits a
packet does not declare are reserved: builders write 0, the decoder reports non-zero
reserved bits, the CP ignores them and the KMD's checker refuses them.

Indexing: `Field.dword` counts payload dwords, 0 being the dword after the header;
header fields (`HEADER`) use dword -1. For RTL, a field is `payload[f.lsb:f.lsb +
f.width]` of payload dword `f.dword` (`f.bits` is that slice).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field as _dc_field, replace

# The shapes both tables are written in (re-exported: `from spec.packets import Field` is
# how most readers of this table name them).
from spec.layout import EnumValue, Field, Layout, Rule, Tail, Value, aligned_text

__all__ = [
    "EnumValue", "Field", "Value", "Rule", "Tail", "Layout", "PacketDef", "HeaderDef",
    "HEADER", "PACKET_TYPE2", "PACKET_TYPE3", "TYPE2_FILLER", "TYPE2_PAD", "NOP_PAD", "MAX_PAYLOAD",
    "PACKETS", "by_name", "by_opcode", "Opcode", "aligned_text",
]


# ---------------------------------------------------------------------------- PM4 shapes

@dataclass(frozen=True)
class HeaderDef:
    """The PM4 header dword's fields (all with dword = -1)."""

    fields: tuple[Field, ...]

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"PM4 header has no field {name!r}")


@dataclass(frozen=True)
class PacketDef(Layout):
    """One type-3 packet: opcode, payload layout and builder signature.

    `args` orders the builder's positional arguments (value, field or tail names);
    every other field becomes a keyword-only argument with its default.
    """

    name: str
    opcode: int
    doc: str
    fields: tuple[Field, ...] = ()
    values: tuple[Value, ...] = ()
    tail: Tail | None = None
    args: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    count_wraps: bool = False
    """COUNT is the payload length − 1 modulo 2^14, so the all-ones COUNT (0x3FFF) means no
    payload: the header alone. AMD defines this for NOP only (Mesa's PKT3_NOP_PAD, the
    gfx9 ring's nop dword 0xFFFF1000)."""
    index: int = _dc_field(default=-1, compare=False)  # position in PACKETS

    @property
    def min_payload(self) -> int:
        return self.fixed + (self.tail.min if self.tail else 0)

    @property
    def max_payload(self) -> int:
        if not self.tail:
            return self.fixed
        return MAX_PAYLOAD - 1 if self.count_wraps else MAX_PAYLOAD

    @property
    def min_count(self) -> int:
        """Smallest legal header COUNT (payload dwords - 1)."""
        return 0 if self.count_wraps else self.min_payload - 1

    @property
    def max_count(self) -> int:
        """Largest legal header COUNT; equal to min_count for fixed-length packets."""
        return HEADER.field("COUNT").max if self.count_wraps else self.max_payload - 1

    @property
    def variable(self) -> bool:
        return self.tail is not None

    def count_ok(self, count: int) -> bool:
        return self.min_count <= count <= self.max_count


# ---------------------------------------------------------------------------- header

def _bit(name: str, lsb: int, doc: str, dword: int = 0, **kw) -> Field:
    return Field(name, dword, lsb, 1, doc, default=0, **kw)


HEADER = HeaderDef((
    _bit("PREDICATE", 0, "Conditional execution on the predicate (AMD); this device keeps it 0.", dword=-1),
    _bit("SHADER_TYPE", 1, "0 graphics, 1 compute queue (AMD); this device keeps it 0.", dword=-1),
    Field("OPCODE", -1, 8, 8, "Packet opcode (IT_OPCODE)."),
    Field("COUNT", -1, 16, 14, "Payload dwords - 1: the packet is COUNT + 2 dwords long."),
    Field("TYPE", -1, 30, 2, "Packet type.", enum=(
        EnumValue("TYPE0", 0, "Register write (AMD).", supported=False),
        EnumValue("TYPE1", 1, "Reserved.", supported=False),
        EnumValue("TYPE2", 2, "One-dword filler: bits 29:0 (PAD) are ignored."),
        EnumValue("TYPE3", 3, "Type-3 packet: opcode + COUNT + 1 payload dwords."),
    )),
))

PACKET_TYPE2 = HEADER.field("TYPE").values["TYPE2"]
PACKET_TYPE3 = HEADER.field("TYPE").values["TYPE3"]
TYPE2_FILLER = PACKET_TYPE2 << HEADER.field("TYPE").lsb
"""0x80000000: the type-2 packet with PAD 0 (AMD's PACKET2(0)); any PAD does the same."""
TYPE2_PAD = Field("PAD", -1, 0, 30, "Type-2 packets only: ignored (AMD's PACKET2_PAD).")
MAX_PAYLOAD = HEADER.field("COUNT").max + 1
"""A COUNT of 14 bits allows up to 16384 payload dwords (16383 for NOP, whose all-ones
COUNT means no payload)."""


# ---------------------------------------------------------------------------- enums used twice

def _engine(name: str, dword: int, lsb: int, width: int, extra: tuple[EnumValue, ...] = ()) -> Field:
    return Field(name, dword, lsb, width, "Which CP micro-engine executes the packet (AMD). "
                 "This CP is one engine that fetches, parses and executes in order, so PFP and "
                 "ME behave the same (AMD's PFP waits before fetching further; so does this CP).",
                 enum=(EnumValue("ME", 0, "Micro engine."),
                       EnumValue("PFP", 1, "Prefetch parser (amdgpu's gfx ring waits and writes with it)."),
                       *extra), default="ME")


def _addr_lo(name: str, dword: int, doc: str) -> Field:
    return Field(name, dword, 2, 30, doc + " Bits [1:0] are reserved: the address is dword aligned.")


def _addr_hi(name: str, dword: int, width: int = 32) -> Field:
    return Field(name, dword, 0, width, f"Address bits [{31 + width}:32].")


# ---------------------------------------------------------------------------- packets

NOP = PacketDef(
    "NOP", 0x10,
    "Does nothing: the CP skips the payload. COUNT 0x3FFF is the header alone, one dword "
    "(0xFFFF1000, the gfx9 ring's nop and Mesa's PKT3_NOP_PAD, with which amdgpu pads rings "
    "and IBs); any other COUNT skips COUNT + 1 dwords.",
    tail=Tail("payload", "Ignored dwords (builders write 0); 0 of them is the one-dword form.", min=0,
              ignored=True),
    args=("n_payload",),
    count_wraps=True,
)


def _cache_policy(dword: int, lsb: int, what: str = "") -> Field:
    return Field(f"{what}CACHE_POLICY", dword, lsb, 2, "Cache policy (AMD: 0 LRU, 1 stream, 2 bypass); "
                 "this front end has no cache and ignores it.", default=0)


def _ignored(name: str, dword: int, lsb: int, doc: str) -> Field:
    return _bit(name, lsb, doc + " Ignored: this front end has no cache to act on.", dword=dword)


WRITE_DATA = PacketDef(
    "WRITE_DATA", 0x37,
    "Writes the data dwords to memory starting at addr: to consecutive dwords, or all to "
    "addr itself with ADDR_INCR = 1.",
    fields=(
        Field("DST_SEL", 0, 8, 4, "Destination.", enum=(
            EnumValue("REGISTER", 0, "A register; AMD puts its dword offset in ADDR_LO's dword "
                      "bits [17:0]. Not modelled: the CP writes memory only.", supported=False),
            EnumValue("MEMORY_SYNC", 1, "Memory, synchronous through GRBM (AMD); the same as MEMORY here."),
            EnumValue("TC_L2", 2, "Memory through the L2 cache (AMD); the same as MEMORY here (no cache)."),
            EnumValue("GDS", 3, "Global data share.", supported=False),
            EnumValue("MEMORY", 5, "Memory, written directly (AMD: memory async)."),
        ), default="MEMORY"),
        Field("ADDR_INCR", 0, 16, 1, "AMD's WR_ONE_ADDR: 1 writes every data dword to addr itself.", enum=(
            EnumValue("INCREMENT", 0, "Consecutive dwords from addr."),
            EnumValue("NO_INCREMENT", 1, "Every dword to addr (the last one stays)."),
        ), default="INCREMENT"),
        Field("WR_CONFIRM", 0, 20, 1, "Wait for the write response before the next packet, "
              "so later packets observe the data.", default=0),
        _cache_policy(0, 25),
        _engine("ENGINE_SEL", 0, 30, 2, (EnumValue("CE", 2, "Constant engine.", supported=False),
                                          EnumValue("DE", 3, "Draw engine (Mesa).", supported=False))),
        _addr_lo("ADDR_LO", 1, "Destination address bits [31:2]."),
        _addr_hi("ADDR_HI", 2),
    ),
    values=(Value("addr", ("ADDR_LO", "ADDR_HI"), "Destination byte address."),),
    tail=Tail("data", "The dwords to write, in address order.", min=1),
    args=("addr", "data"),
)

INDIRECT_BUFFER = PacketDef(
    "INDIRECT_BUFFER", 0x3F,
    "Runs IB_SIZE dwords of packets fetched from base, then returns to the packet after "
    "this one (or, with CHAIN, does not return: the IB replaces the current one).",
    fields=(
        _addr_lo("IB_BASE_LO", 0, "IB address bits [31:2]."),
        _addr_hi("IB_BASE_HI", 1),
        Field("IB_SIZE", 2, 0, 20, "IB length in dwords.", arg="size_dw", fmt="d"),
        Field("CHAIN", 2, 20, 1, "Chain: continue in the new IB instead of returning (Mesa "
              "grows command streams this way).", default=0),
        _bit("PRE_ENB", 21, "Preemption enable (AMD, mid-command-buffer preemption); ignored: "
             "this CP switches only between packets.", dword=2),
        Field("VALID", 2, 23, 1, "AMD's compute queues and Mesa's chains set it, the gfx ring "
              "leaves it 0 (gfx_v9_0_ring_emit_ib_gfx); the CP runs the IB either way.", default=0),
        Field("VMID", 2, 24, 4, "Virtual memory context the IB runs in.", default=0),
        _cache_policy(2, 28),
        _bit("PRE_RESUME", 30, "Resume a preempted IB (AMD); ignored.", dword=2),
        _bit("PRIV", 31, "Privileged IB (AMD); ignored.", dword=2),
    ),
    values=(Value("base", ("IB_BASE_LO", "IB_BASE_HI"), "IB byte address."),),
    args=("base", "size_dw"),
)

WAIT_REG_MEM = PacketDef(
    "WAIT_REG_MEM", 0x3C,
    "Polls until (*addr & mask) FUNCTION ref holds, re-reading every POLL_INTERVAL clocks.",
    fields=(
        Field("FUNCTION", 0, 0, 3, "Comparison of the masked value with ref.", enum=(
            EnumValue("ALWAYS", 0, "Always true: one read (which can still fault), no wait."),
            EnumValue("LT", 1, "value < ref"),
            EnumValue("LE", 2, "value <= ref"),
            EnumValue("EQ", 3, "value == ref"),
            EnumValue("NE", 4, "value != ref"),
            EnumValue("GE", 5, "value >= ref"),
            EnumValue("GT", 6, "value > ref"),
        )),
        Field("MEM_SPACE", 0, 4, 2, "What addr names.", enum=(
            EnumValue("REGISTER", 0, "A register (AMD: its dword offset in ADDR_LO's dword bits "
                      "[17:0]). Refused: this CP polls memory only.", supported=False),
            EnumValue("MEMORY", 1, "Memory."),
        ), default="MEMORY"),
        Field("OPERATION", 0, 6, 2, "What to do.", enum=(
            EnumValue("WAIT_REG_MEM", 0, "Wait."),
            EnumValue("WR_WAIT_WR_REG", 1, "Write a register, wait, write another.", supported=False),
            EnumValue("WAIT_MEM_PREEMPTABLE", 3, "Wait, preemptible (AMD MES).", supported=False),
        ), default="WAIT_REG_MEM"),
        _engine("ENGINE", 0, 8, 2),
        _cache_policy(0, 25),
        _addr_lo("ADDR_LO", 1, "Poll address bits [31:2]."),
        _addr_hi("ADDR_HI", 2),
        Field("REFERENCE", 3, 0, 32, "Reference value.", arg="ref"),
        Field("MASK", 4, 0, 32, "Mask applied to the polled value before comparing."),
        Field("POLL_INTERVAL", 5, 0, 16, "Clocks from a poll's answer to the next poll's request; 0 acts as 1.",
              default=0x10, fmt="d"),
        _bit("OPTIMIZE_ACE_OFFLOAD_MODE", 31, "AMD's compute offload hint; ignored.", dword=5),
    ),
    values=(Value("addr", ("ADDR_LO", "ADDR_HI"), "Byte address of the polled dword."),),
    args=("addr", "ref", "mask", "function"),
)

RELEASE_MEM = PacketDef(
    "RELEASE_MEM", 0x49,
    "End-of-pipe fence: once all earlier work is done, writes data (per DATA_SEL) to addr "
    "and then, per INT_SEL, appends an IH ring entry carrying INT_CTXID and raises the irq.",
    fields=(
        Field("EVENT_TYPE", 0, 0, 6, "The pipeline event to wait for (AMD VGT event number); "
              "this device treats every event as end of pipe.", enum=(
                  EnumValue("CACHE_FLUSH_AND_INV_TS_EVENT", 0x14, "Flush caches, then signal (amdgpu's fence)."),
                  EnumValue("BOTTOM_OF_PIPE_TS", 0x28, "Signal at the bottom of the pipe (radv)."),
              ), open_enum=True, default="CACHE_FLUSH_AND_INV_TS_EVENT"),
        Field("EVENT_INDEX", 0, 8, 4, "Event class.", enum=(
            EnumValue("END_OF_PIPE", 5, "A timestamp (TS) event at the end of the pipe."),
            EnumValue("SHADER_DONE", 6, "Shaders done (AMD).", supported=False),
        ), default="END_OF_PIPE"),
        _ignored("TCL1_VOL_ACTION_EN", 0, 12, "Act on volatile L1 lines (AMD EOP_TCL1_VOL_ACTION_EN)."),
        _ignored("TC_VOL_ACTION_EN", 0, 13, "Act on volatile L2 lines (AMD)."),
        _ignored("TC_WB_ACTION_EN", 0, 15, "Write back L2 (AMD; amdgpu's fence sets it)."),
        _ignored("TCL1_ACTION_EN", 0, 16, "Invalidate L1 (AMD; amdgpu's fence sets it)."),
        _ignored("TC_ACTION_EN", 0, 17, "Invalidate L2 (AMD; amdgpu's fence sets it)."),
        _ignored("TC_NC_ACTION_EN", 0, 19, "Act on non-coherent L2 lines (AMD)."),
        _ignored("TC_WC_ACTION_EN", 0, 20, "Act on write-combined L2 lines (AMD gfx9+, kfd and Mesa)."),
        _ignored("TC_MD_ACTION_EN", 0, 21, "Act on L2 metadata (AMD; amdgpu's fence sets it)."),
        _cache_policy(0, 25),
        _bit("EXEC", 28, "Trailing fence of a preempted IB (AMD EOP_EXEC); ignored.", dword=0),
        Field("DST_SEL", 1, 16, 2, "Where the data write goes.", enum=(
            EnumValue("MEMORY", 0, "Memory (AMD: MC)."),
            EnumValue("TC_L2", 1, "Memory through the L2 cache (AMD); the same as MEMORY here (no cache)."),
            EnumValue("QUEUE_WPTR", 2, "A queue's write pointer register (AMD MEC).", supported=False),
            EnumValue("QUEUE_WPTR_POLL_MASK", 3, "A queue's write pointer poll mask (AMD MEC).",
                      supported=False),
        ), default="MEMORY"),
        Field("INT_SEL", 1, 24, 3, "Interrupt after the write.", enum=(
            EnumValue("NONE", 0, "No interrupt."),
            EnumValue("SEND_INT", 1, "Send the interrupt only (AMD: with DATA_SEL = NONE)."),
            EnumValue("SEND_INT_ON_CONFIRM", 2, "Send the interrupt once the data write is confirmed."),
            EnumValue("SEND_DATA_ON_CONFIRM", 3, "Write the data with write confirm, no interrupt "
                      "(Mesa's EOP_INT_SEL_SEND_DATA_AFTER_WR_CONFIRM; this CP always confirms)."),
            EnumValue("SEND_INT_CTXID", 4, "Unconditionally send INT_CTXID (AMD MEC).", supported=False),
            EnumValue("SEND_INT_CTXID_IF_32", 5, "Send INT_CTXID on a 32-bit compare (AMD MEC).",
                      supported=False),
            EnumValue("SEND_INT_CTXID_IF_64", 6, "Send INT_CTXID on a 64-bit compare (AMD MEC).",
                      supported=False),
        ), default="NONE"),
        Field("DATA_SEL", 1, 29, 3, "What to write at addr.", enum=(
            EnumValue("NONE", 0, "Nothing (AMD: discard)."),
            EnumValue("DATA_32", 1, "DATA_LO, 32 bits."),
            EnumValue("DATA_64", 2, "DATA_HI:DATA_LO, 64 bits."),
            EnumValue("TIMESTAMP", 3, "The 64-bit GPU clock counter (AMD: send GPU clock counter)."),
            EnumValue("SYS_COUNTER", 4, "The 64-bit system counter (AMD).", supported=False),
            EnumValue("GDS", 5, "Data from GDS (AMD).", supported=False),
        ), default="DATA_32"),
        _addr_lo("ADDR_LO", 2, "Destination address bits [31:2]."),
        _addr_hi("ADDR_HI", 3),
        Field("DATA_LO", 4, 0, 32, "Data bits [31:0]."),
        Field("DATA_HI", 5, 0, 32, "Data bits [63:32]."),
        Field("INT_CTXID", 6, 0, 32, "Context id copied into the IH ring entry (src_data[0]).", default=0),
    ),
    values=(
        Value("addr", ("ADDR_LO", "ADDR_HI"), "Destination byte address."),
        Value("data", ("DATA_LO", "DATA_HI"), "The value written (a fence seqno)."),
    ),
    rules=(
        Rule("DATA_SEL", ("DATA_64", "TIMESTAMP"), "addr", align=8,
             doc="64-bit writes need a qword-aligned address (AMD: ADDRESS_LO_64B[31:3])."),
        Rule("DATA_SEL", ("DATA_32",), "data", width=32, doc="Only DATA_LO is written."),
    ),
    args=("addr", "data"),
)

DMA_DATA = PacketDef(
    "DMA_DATA", 0x50,
    "Copies BYTE_COUNT bytes from src to dst through the DMA engine, or (SRC_SEL = DATA) "
    "fills them with the 32-bit value src.",
    fields=(
        _engine("ENGINE", 0, 0, 1),
        _cache_policy(0, 13, "SRC_"),
        Field("DST_SEL", 0, 20, 2, "Destination kind.", enum=(
            EnumValue("ADDRESS", 0, "DST_ADDR, a memory (DAS) address."),
            EnumValue("GDS", 1, "Global data share.", supported=False),
            EnumValue("NOWHERE", 2, "Read only, write nothing (gfx9: a prefetch).", supported=False),
            EnumValue("ADDRESS_TC_L2", 3, "DST_ADDR through the L2 cache; the same as ADDRESS here."),
        ), default="ADDRESS"),
        _cache_policy(0, 25, "DST_"),
        Field("SRC_SEL", 0, 29, 2, "Source kind.", enum=(
            EnumValue("ADDRESS", 0, "SRC_ADDR, a memory (SAS) address: a copy."),
            EnumValue("GDS", 1, "Global data share.", supported=False),
            EnumValue("DATA", 2, "SRC_ADDR_LO is a 32-bit value: a fill."),
            EnumValue("ADDRESS_TC_L2", 3, "SRC_ADDR through the L2 cache; the same as ADDRESS here."),
        ), default="ADDRESS"),
        Field("CP_SYNC", 0, 31, 1, "The CP waits for the DMA to finish before the next packet.",
              default=0),
        Field("SRC_ADDR_LO", 1, 0, 32, "Source address bits [31:0], or the fill value."),
        Field("SRC_ADDR_HI", 2, 0, 32, "Source address bits [63:32]."),
        Field("DST_ADDR_LO", 3, 0, 32, "Destination address bits [31:0]."),
        Field("DST_ADDR_HI", 4, 0, 32, "Destination address bits [63:32]."),
        Field("BYTE_COUNT", 5, 0, 26, "Bytes to move (gfx9: [25:0]).", fmt="d"),
        Field("SAS", 5, 26, 1, "Source address space.", enum=(
            EnumValue("MEMORY", 0, "Memory."),
            EnumValue("REGISTER", 1, "Register.", supported=False),
        ), default="MEMORY"),
        Field("DAS", 5, 27, 1, "Destination address space.", enum=(
            EnumValue("MEMORY", 0, "Memory."),
            EnumValue("REGISTER", 1, "Register.", supported=False),
        ), default="MEMORY"),
        Field("SAIC", 5, 28, 1, "Source address increment.", enum=(
            EnumValue("INCREMENT", 0, "Walk the source."),
            EnumValue("NO_INCREMENT", 1, "Read one address repeatedly.", supported=False),
        ), default="INCREMENT"),
        Field("DAIC", 5, 29, 1, "Destination address increment.", enum=(
            EnumValue("INCREMENT", 0, "Walk the destination."),
            EnumValue("NO_INCREMENT", 1, "Write one address repeatedly.", supported=False),
        ), default="INCREMENT"),
        Field("RAW_WAIT", 5, 30, 1, "Wait for earlier writes to complete before reading the "
              "source (read-after-write).", default=0),
        Field("DIS_WC", 5, 31, 1, "Disable the write confirm of the last write (gfx9: bit 31); "
              "ignored: this engine always waits for its writes.", default=0),
    ),
    values=(
        Value("src", ("SRC_ADDR_LO", "SRC_ADDR_HI"), "Source byte address, or the fill value."),
        Value("dst", ("DST_ADDR_LO", "DST_ADDR_HI"), "Destination byte address."),
    ),
    rules=(Rule("SRC_SEL", ("DATA",), "src", width=32, doc="A fill value is one dword."),),
    args=("dst", "src", "byte_count"),
)

# Future packets, deliberately not entries yet (nothing half-specified should leak into
# the RTL or the builders):
#   SET_SH_REG      0x76  write a window of user registers (start offset, values...)
#   DISPATCH_DIRECT 0x15  launch a compute grid (dim_x, dim_y, dim_z, initiator)
# and, on its own ring, AMD's SDMA format (COPY_LINEAR, WRITE_LINEAR, CONST_FILL, FENCE,
# TRAP, POLL_REGMEM), which is not PM4 and would get its own table.

PACKETS: tuple[PacketDef, ...] = tuple(
    replace(p, index=i) for i, p in enumerate(
        (NOP, WRITE_DATA, INDIRECT_BUFFER, WAIT_REG_MEM, RELEASE_MEM, DMA_DATA))
)
"""Every packet, in a fixed order (`PacketDef.index`; PERF_PACKETS counts by it)."""
NOP, WRITE_DATA, INDIRECT_BUFFER, WAIT_REG_MEM, RELEASE_MEM, DMA_DATA = PACKETS

NOP_PAD = (PACKET_TYPE3 << HEADER.field("TYPE").lsb | HEADER.field("COUNT").max << HEADER.field("COUNT").lsb
           | NOP.opcode << HEADER.field("OPCODE").lsb)
"""0xFFFF1000: the one-dword NOP, header only (AMD's PACKET3(PACKET3_NOP, 0x3FFF), Mesa's
PKT3_NOP_PAD): the gfx9 ring's nop, with which amdgpu and Mesa pad rings and IBs."""

by_name: dict[str, PacketDef] = {p.name: p for p in PACKETS}
by_opcode: dict[int, PacketDef] = {p.opcode: p for p in PACKETS}

Opcode = enum.IntEnum("Opcode", {p.name: p.opcode for p in PACKETS}, module=__name__)
Opcode.__doc__ = "Opcodes of the packets in PACKETS (usable as an Amaranth shape)."


# ---------------------------------------------------------------------------- self-check

def _check() -> None:
    """Refuse an inconsistent table at import: overlaps, bad widths, dangling names."""
    def fail(msg: str) -> None:
        raise AssertionError(f"spec/packets.py: {msg}")

    def check_fields(owner: str, fields: tuple[Field, ...]) -> None:
        used: dict[int, int] = {}
        for f in fields:
            if not (f.width >= 1 and 0 <= f.lsb and f.msb <= 31):
                fail(f"{owner}.{f.name}: bits {f.span} outside a dword")
            if used.get(f.dword, 0) & f.mask:
                fail(f"{owner}.{f.name}: overlaps another field of dword {f.dword}")
            used[f.dword] = used.get(f.dword, 0) | f.mask
            for e in f.enum:
                if not 0 <= e.value <= f.max:
                    fail(f"{owner}.{f.name}: enum {e.name} = {e.value} does not fit {f.width} bits")
            if len(f.values) != len(f.enum) or len(f.names) != len(f.enum):
                fail(f"{owner}.{f.name}: duplicate enum name or value")
            if isinstance(f.default, str) and f.default not in f.values:
                fail(f"{owner}.{f.name}: default {f.default!r} is not an enum value")
            if isinstance(f.default, int) and not f.legal(f.default):
                fail(f"{owner}.{f.name}: default {f.default} is not legal")

    check_fields("HEADER", HEADER.fields)
    if len(by_name) != len(PACKETS) or len(by_opcode) != len(PACKETS):
        fail("duplicate packet name or opcode")
    for p in PACKETS:
        if not 0 <= p.opcode <= HEADER.field("OPCODE").max:
            fail(f"{p.name}: opcode {p.opcode:#x} does not fit OPCODE")
        check_fields(p.name, p.fields)
        for d in range(p.fixed):
            if not p.fields_in(d):
                fail(f"{p.name}: payload dword {d} has no field")
        in_values: set[str] = set()
        for v in p.values:
            fs = [p.field(n) for n in v.fields]  # KeyError on a dangling name
            if [f.dword for f in fs] != list(range(fs[0].dword, fs[0].dword + len(fs))):
                fail(f"{p.name}.{v.name}: parts are not in consecutive dwords")
            if any(f.enum or f.default is not None for f in fs):
                fail(f"{p.name}.{v.name}: a part has an enum or a default")
            # Contiguous bits: only the low part may start above bit 0, only the top
            # part may end below bit 31 (builders rely on it to split without masking).
            if any(f.lsb for f in fs[1:]) or any(f.msb != 31 for f in fs[:-1]):
                fail(f"{p.name}.{v.name}: parts do not form one contiguous bit range")
            in_values.update(v.fields)
        names = [v.name for v in p.values] + [f.arg_name for f in p.fields if f.name not in in_values]
        if p.tail:
            names.append(p.tail.arg_name)
        if len(set(names)) != len(names):
            fail(f"{p.name}: two builder arguments share a name")
        for a in p.args:
            if a not in names:
                fail(f"{p.name}: args names unknown argument {a!r}")
        for f in p.fields:
            if f.name not in in_values and f.default is None and f.arg_name not in p.args:
                fail(f"{p.name}.{f.name}: no default, so it must be listed in args")
        for r in p.rules:
            w = p.field(r.when)
            if any(n not in w.values for n in r.among) or r.value not in [v.name for v in p.values]:
                fail(f"{p.name}: rule on {r.value} names an unknown value or enum")


_check()
