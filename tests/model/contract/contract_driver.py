"""A bare-metal driver written from the docs alone, as an outside driver writer would.

It imports nothing of the project's drivers or specs (no kmd_model/, umd/, spec/): every
register offset, field position, enum value, packet layout and IH entry field comes from
reading docs/registers.md, docs/packets.md and docs/hardware.md, the contract. So the
checks of the test_contract_*.py files under tests/model/contract/, which run this driver on the reference model
and on the RTL, test what the docs say, number by number: a wrong bit position in a
table fails them as a wrong bit in the hardware would.

The Device API (mmio_read32/mmio_write32, mem, delay) is the only way to the device.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"


# ---------------------------------------------------------------------------- reading the docs

class Field:
    def __init__(self, name: str, lsb: int, width: int, access: str = "", reset: int | None = None,
                 values: dict[str, int] | None = None, dword: int | str = 0, unsupported: frozenset = frozenset(),
                 open_values: bool = False):
        self.name, self.lsb, self.width, self.access, self.reset = name, lsb, width, access, reset
        self.values = values or {}
        self.dword = dword
        self.unsupported = unsupported  # value names marked "not supported by this device"
        self.open_values = open_values  # "other values: allowed, passed through"

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def put(self, v) -> int:
        if isinstance(v, str):
            v = self.values[v]
        assert 0 <= v < 1 << self.width, f"{self.name} = {v:#x} does not fit {self.width} bits"
        return v << self.lsb

    def get(self, word: int) -> int:
        return (word >> self.lsb) & ((1 << self.width) - 1)


class Reg:
    def __init__(self, name: str, offset: int, stride: int, count: int, reset: int | None):
        self.name, self.offset, self.stride, self.count, self.reset = name, offset, stride, count, reset
        self.fields: dict[str, Field] = {}

    def addr(self, i: int = 0) -> int:
        assert 0 <= i < self.count
        return self.offset + self.stride * i


def _bits(text: str) -> tuple[int, int]:
    """'31:2' or '[31:2]' or '7' -> (lsb, width)."""
    hi, _, lo = text.strip("[]").partition(":")
    hi, lo = int(hi), int(lo or hi)
    return lo, hi - lo + 1


def _values(desc: str) -> dict[str, int]:
    """`5` MEMORY: ... items of a description -> {"MEMORY": 5}."""
    return {m.group(2): int(m.group(1), 0) for m in re.finditer(r"`(0x[0-9a-fA-F]+|\d+)` (\w+):", desc)}


def _unsupported(desc: str) -> frozenset:
    """The names of the items a description marks "*(not supported by this device)*"."""
    return frozenset(m.group(1) for m in re.finditer(r"`(?:0x[0-9a-fA-F]+|\d+)` (\w+):[^`]*?\*\(not supported", desc))


@lru_cache(maxsize=None)
def registers() -> dict[str, Reg]:
    """docs/registers.md: every register with its offset, array stride, reset and fields."""
    text = (DOCS / "registers.md").read_text()
    out: dict[str, Reg] = {}
    for sec in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = sec.partition("\n")
        if title.startswith("enum "):
            continue
        m = re.search(r"— offset (0x[0-9a-f]+)(?: \+ (\d+)·i, i = 0 … (\d+))?, (?:reset (0x[0-9a-f]+))?", body)
        assert m, f"registers.md: no offset line for {title}"
        reg = out[title] = Reg(title, int(m.group(1), 16), int(m.group(2) or 4),
                               int(m.group(3) or 0) + 1, int(m.group(4), 16) if m.group(4) else None)
        for row in re.finditer(r"^\| (\d+(?::\d+)?) \| (\w+) \| ([^|]+) \| ([^|]+) \| (.*) \|$", body, flags=re.M):
            lsb, width = _bits(row.group(1))
            reset = row.group(4).strip()
            reg.fields[row.group(2)] = Field(row.group(2), lsb, width, row.group(3).strip(),
                                             int(reset, 16) if reset.startswith("0x") else None)
    return out


@lru_cache(maxsize=None)
def enums() -> dict[str, dict[str, int]]:
    """docs/registers.md's enums: {"cp_error": {"NONE": 0, ...}, "ib_level": {...}}."""
    text = (DOCS / "registers.md").read_text()
    out = {}
    for m in re.finditer(r"^## enum (\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S):
        out[m.group(1)] = {r.group(2): int(r.group(1)) for r in
                           re.finditer(r"^\| (\d+) \| (\w+) \|", m.group(2), flags=re.M)}
    return out


class Packet:
    def __init__(self, name: str, index: int, opcode: int, sub_op: int | None):
        self.name, self.index, self.opcode, self.sub_op = name, index, opcode, sub_op
        self.fields: dict[str, Field] = {}
        self.fixed = 0  # payload dwords with fixed fields (data[] / payload[] follow)


def _packet_fields(pkt: Packet, body: str) -> Packet:
    for row in re.finditer(r"^\| (hdr|\d+)(…)? \| \[(\d+(?::\d+)?)\] \| ([^|]+) \| (.*) \|$", body, flags=re.M):
        dword, tail, bits, name, desc = row.groups()
        if name.startswith("*reserved*"):
            continue
        if tail:  # data[] / payload[]: the variable part
            pkt.fixed = int(dword)
            continue
        lsb, width = _bits(bits)
        d = dword if dword == "hdr" else int(dword)
        pkt.fields[name] = Field(name, lsb, width, values=_values(desc), dword=d, unsupported=_unsupported(desc),
                                 open_values="other values: allowed" in desc)
        if d != "hdr":
            pkt.fixed = max(pkt.fixed, d + 1)
    return pkt


@lru_cache(maxsize=None)
def pm4_packets() -> dict[str, Packet]:
    """docs/packets.md's PM4 packets: opcode, PERF_PACKETS index and payload fields."""
    text = (DOCS / "packets.md").read_text().split("## SDMA packets")[0]
    index = {m.group(2): int(m.group(1)) for m in re.finditer(r"^\| (\d+) \| \[(\w+)\]", text, flags=re.M)}
    out = {}
    for m in re.finditer(r"^### (\w+) \(opcode (0x[0-9a-f]+)\)\n(.*?)(?=^### |\Z)", text, flags=re.M | re.S):
        out[m.group(1)] = _packet_fields(Packet(m.group(1), index[m.group(1)], int(m.group(2), 16), None), m.group(3))
    return out


@lru_cache(maxsize=None)
def pm4_header() -> dict[str, Field]:
    text = (DOCS / "packets.md").read_text()
    body = re.search(r"^## Header\n(.*?)^## ", text, flags=re.M | re.S).group(1)
    return {r.group(2): Field(r.group(2), *_bits(r.group(1)))
            for r in re.finditer(r"^\| hdr \| (\[[\d:]+\]) \| (\w+) \|", body, flags=re.M)}


@lru_cache(maxsize=None)
def sdma_packets() -> dict[str, Packet]:
    """docs/packets.md's SDMA packets: (OP, SUB_OP), PERF_SDMA_PACKETS index, fields."""
    text = (DOCS / "packets.md").read_text().split("## SDMA packets")[1].split("## Differences")[0]
    table = {m.group(2): (int(m.group(1)), int(m.group(3)), int(m.group(4)))
             for m in re.finditer(r"^\| (\d+) \| \[SDMA (\w+)\]\([^)]*\) \| (\d+), (\d+) \|", text, flags=re.M)}
    out = {}
    for m in re.finditer(r"^### SDMA (\w+)\n(.*?)(?=^### |\Z)", text, flags=re.M | re.S):
        idx, op, sub = table[m.group(1)]
        out[m.group(1)] = _packet_fields(Packet(m.group(1), idx, op, sub), m.group(2))
    return out


@lru_cache(maxsize=None)
def ih_entry() -> tuple[dict[str, Field], dict[str, tuple[int, int]]]:
    """docs/hardware.md's IH entry: its fields ({name: Field with dword}) and its sources
    ({"EOP": (client_id, source_id), ...})."""
    text = (DOCS / "hardware.md").read_text()
    body = text.split("### The IH entry")[1].split("## Counters")[0]
    fields = {r.group(3): Field(r.group(3), *_bits(r.group(2)), dword=int(r.group(1)))
              for r in re.finditer(r"^\| (\d) \| (\d+(?::\d+)?) \| (\w+) \|", body, flags=re.M)}
    sources = {r.group(3): (int(r.group(1), 16), int(r.group(2)))
               for r in re.finditer(r"^\| (0x[0-9a-f]+) \(\w+\) \| (\d+) \| (\w+):", body, flags=re.M)}
    return fields, sources


# ---------------------------------------------------------------------------- packets from the tables

def _payload(pkt: Packet, fields: dict, extra: list[int]) -> tuple[int, list[int]]:
    hdr, words = 0, [0] * pkt.fixed
    for name, v in fields.items():
        f = pkt.fields[name]
        if f.dword == "hdr":
            hdr |= f.put(v)
        else:
            words[f.dword] |= f.put(v)
    return hdr, words + [int(x) & 0xFFFF_FFFF for x in extra]


def pm4(name: str, data: list[int] = (), **fields) -> list[int]:
    """A type-3 packet from docs/packets.md: header (TYPE 3, COUNT = payload dwords − 1,
    OPCODE), then the payload with `fields` at their documented dwords and bits."""
    pkt = pm4_packets()[name]
    _, words = _payload(pkt, fields, list(data))
    h = pm4_header()
    return [h["TYPE"].put(3) | h["COUNT"].put(len(words) - 1) | h["OPCODE"].put(pkt.opcode)] + words


def sdma(name: str, data: list[int] = (), **fields) -> list[int]:
    """An SDMA packet from docs/packets.md: OP and SUB_OP in the header with its fields."""
    pkt = sdma_packets()[name]
    hdr, words = _payload(pkt, fields, list(data))
    return [hdr | pkt.fields["OP"].put(pkt.opcode) | pkt.fields["SUB_OP"].put(pkt.sub_op)] + words


def lo_hi(prefix: str, addr: int, low_field_lsb: int = 0) -> dict:
    """ADDR_LO/ADDR_HI fields of a 64-bit address: the LO field holds bits [31:lsb]."""
    return {f"{prefix}_LO": (addr & 0xFFFF_FFFF) >> low_field_lsb, f"{prefix}_HI": addr >> 32}


# ---------------------------------------------------------------------------- the driver

class Gpu:
    """Registers by name (docs/registers.md), memory as dwords, polling with a bound."""

    def __init__(self, dev):
        self.dev = dev
        self.regs = registers()
        self.err = enums()["cp_error"]
        self.level = enums()["ib_level"]

    def read(self, name: str, i: int = 0) -> int:
        return self.dev.mmio_read32(self.regs[name].addr(i))

    def write(self, name: str, value: int, i: int = 0) -> None:
        self.dev.mmio_write32(self.regs[name].addr(i), value & 0xFFFF_FFFF)

    def value(self, name: str, **fields) -> int:
        reg = self.regs[name]
        return sum(reg.fields[f].put(v) for f, v in fields.items())

    def set(self, name: str, i: int = 0, **fields) -> None:
        self.write(name, self.value(name, **fields), i)

    def fields(self, name: str, i: int = 0) -> dict[str, int]:
        word = self.read(name, i)
        return {f.name: f.get(word) for f in self.regs[name].fields.values()}

    def field(self, reg: str, field: str, i: int = 0) -> int:
        return self.regs[reg].fields[field].get(self.read(reg, i))

    def timestamp(self) -> int:
        """TIMESTAMP as hardware.md says to read it: HI, LO, then HI again, and again if HI
        changed (nothing latches HI when LO is read)."""
        while True:
            hi = self.read("TIMESTAMP_HI")
            lo = self.read("TIMESTAMP_LO")
            if self.read("TIMESTAMP_HI") == hi:
                return hi << 32 | lo

    def w32(self, addr: int, values) -> None:
        for k, v in enumerate(values):
            self.dev.mem[addr + 4 * k:addr + 4 * k + 4] = list(int(v & 0xFFFF_FFFF).to_bytes(4, "little"))

    def r32(self, addr: int, n: int = 1):
        out = [int.from_bytes(bytes(self.dev.mem[addr + 4 * k:addr + 4 * k + 4]), "little") for k in range(n)]
        return out[0] if n == 1 else out

    def w64(self, addr: int, v: int) -> None:
        self.w32(addr, [v & 0xFFFF_FFFF, v >> 32])

    def until(self, cond, what: str, cycles: int = 20000, step: int = 20):
        """Poll `cond()` every `step` cycles for at most `cycles` (a bound, not a timing claim)."""
        for _ in range(cycles // step):
            v = cond()
            if v:
                return v
            self.dev.delay(step)
        v = cond()
        assert v, f"timed out waiting for {what}"
        return v

    def beats_bytes(self, addr: int, n: int) -> int:
        """Bytes of the whole bus beats (CAPS.BUS_BYTES_LOG2) that [addr, addr + n) touches."""
        beat = 1 << self.fields("CAPS")["BUS_BYTES_LOG2"]
        return -(-(addr + n) // beat) * beat - addr // beat * beat

    def waiting(self, status: str = "STATUS") -> dict[str, int]:
        """Wait until `status`.WAITING reads 1 (a poll has started) and return its fields."""
        return self.until(lambda: (lambda s: s if s["WAITING"] else None)(self.fields(status)), f"{status}.WAITING")

    def idle(self, status: str = "STATUS", cycles: int = 20000) -> dict[str, int]:
        """Wait (at most `cycles`) until `status`.IDLE reads 1 and return its fields."""
        return self.until(lambda: (lambda s: s if s["IDLE"] else None)(self.fields(status)), f"{status}.IDLE",
                          cycles)


class Ring:
    """A CP ring (queue 0: prefix "RB_", queue 1: "CP_HQD1_RB_"), brought up in the order
    docs/hardware.md gives: base, size, rptr write-back address, then RB_CNTL with ENABLE."""

    def __init__(self, gpu: Gpu, base: int, log2_dwords: int, rptr_wb: int | None = None, queue: int = 0):
        self.gpu, self.base, self.size = gpu, base, 1 << log2_dwords
        self.p = "RB_" if queue == 0 else "CP_HQD1_RB_"
        self.status = "STATUS" if queue == 0 else "CP_HQD1_STATUS"
        self.error = "CP_ERROR" if queue == 0 else "CP_HQD1_ERROR"
        self.rptr_wb = rptr_wb
        self.wptr = 0
        gpu.write(self.p + "BASE_LO", (base >> 8) & 0xFFFF_FFFF)
        gpu.write(self.p + "BASE_HI", base >> 40)
        gpu.set(self.p + "SIZE", LOG2_QWORDS=log2_dwords - 1)
        if rptr_wb is not None:
            gpu.write(self.p + "RPTR_ADDR_LO", rptr_wb & 0xFFFF_FFFF)
            gpu.write(self.p + "RPTR_ADDR_HI", rptr_wb >> 32)
        gpu.set(self.p + "CNTL", ENABLE=1, RPTR_WB=int(rptr_wb is not None))

    def emit(self, *packets) -> None:
        for p in packets:
            for d in p:
                self.gpu.w32(self.base + 4 * (self.wptr % self.size), [d])
                self.wptr = (self.wptr + 1) & 0xFFFF_FFFF

    def set_rptr_wb(self, addr: int) -> None:
        """Move the rptr write-back to `addr`: written while ENABLE is clear (a write while it
        is set is ignored), then ENABLE again; the ring keeps its pointers."""
        g = self.gpu
        g.set(self.p + "CNTL", ENABLE=0, RPTR_WB=1)
        g.write(self.p + "RPTR_ADDR_LO", addr & 0xFFFF_FFFF)
        g.write(self.p + "RPTR_ADDR_HI", addr >> 32)
        g.set(self.p + "CNTL", ENABLE=1, RPTR_WB=1)

    def doorbell(self, v: int | None = None) -> None:
        self.gpu.write(self.p + "DOORBELL", self.wptr if v is None else v)

    def submit(self, *packets) -> None:
        self.emit(*packets)
        self.doorbell()

    def run(self, *packets) -> dict[str, int]:
        """Submit and wait for the queue to go idle; returns its STATUS fields."""
        self.submit(*packets)
        return self.gpu.idle(self.status)

    def error_regs(self) -> tuple[dict[str, int], int, int]:
        g = self.gpu
        return (g.fields(self.error),
                g.read(self.error + "_ADDR_LO") | g.read(self.error + "_ADDR_HI") << 32,
                g.read(self.error + "_OFFSET"))


class IhRing:
    """The IH ring as vega10_ih programs it: base >> 8, log2 dwords, byte pointers."""

    def __init__(self, gpu: Gpu, base: int, log2_dwords: int, wptr_wb: int | None = None):
        self.gpu, self.base, self.bytes = gpu, base, 4 << log2_dwords
        self.rptr = 0
        gpu.write("IH_BASE_LO", (base >> 8) & 0xFFFF_FFFF)
        gpu.write("IH_BASE_HI", base >> 40)
        gpu.set("IH_SIZE", LOG2_DWORDS=log2_dwords)
        if wptr_wb is not None:
            gpu.write("IH_WPTR_ADDR_LO", wptr_wb & 0xFFFF_FFFF)
            gpu.write("IH_WPTR_ADDR_HI", wptr_wb >> 32)
        gpu.set("IH_CNTL", ENABLE=1, WPTR_WB=int(wptr_wb is not None))

    def set_wptr_wb(self, addr: int) -> None:
        """Move the wptr write-back to `addr`: written while IH_CNTL.ENABLE is clear (a write
        while it is set is ignored; no entry is written meanwhile), then ENABLE again."""
        g = self.gpu
        g.set("IH_CNTL", ENABLE=0, WPTR_WB=1)
        g.write("IH_WPTR_ADDR_LO", addr & 0xFFFF_FFFF)
        g.write("IH_WPTR_ADDR_HI", addr >> 32)
        g.set("IH_CNTL", ENABLE=1, WPTR_WB=1)

    def entry(self, ptr: int) -> dict[str, int]:
        """The entry at byte pointer `ptr`, decoded by docs/hardware.md's table; "raw" holds
        its 8 dwords."""
        fields, _ = ih_entry()
        raw = self.gpu.r32(self.base + ptr % self.bytes, 8)
        out = {f.name: f.get(raw[f.dword]) for f in fields.values()}
        out["raw"] = raw
        return out

    def pop(self) -> list[dict[str, int]]:
        """Every entry between our rptr and IH_WPTR; then IH_RPTR = IH_WPTR."""
        wptr = self.gpu.read("IH_WPTR")
        out = []
        while self.rptr != wptr:
            out.append(self.entry(self.rptr))
            self.rptr = (self.rptr + 32) & 0xFFFF_FFFF
        self.gpu.write("IH_RPTR", self.rptr)
        return out

    def source(self, e: dict) -> str:
        _, sources = ih_entry()
        return next(n for n, cs in sources.items() if cs == (e["CLIENT_ID"], e["SOURCE_ID"]))


class SdmaRing:
    """The SDMA ring: base >> 8, RB_SIZE log2 dwords, byte pointers."""

    def __init__(self, gpu: Gpu, base: int, log2_dwords: int, rptr_wb: int | None = None):
        self.gpu, self.base, self.size = gpu, base, 1 << log2_dwords
        self.wptr = 0  # bytes
        gpu.write("SDMA_RB_BASE_LO", (base >> 8) & 0xFFFF_FFFF)
        gpu.write("SDMA_RB_BASE_HI", base >> 40)
        if rptr_wb is not None:
            gpu.write("SDMA_RB_RPTR_ADDR_LO", rptr_wb & 0xFFFF_FFFF)
            gpu.write("SDMA_RB_RPTR_ADDR_HI", rptr_wb >> 32)
        gpu.set("SDMA_RB_CNTL", RB_SIZE=log2_dwords, RB_ENABLE=1, RPTR_WRITEBACK_ENABLE=int(rptr_wb is not None))

    def emit(self, *packets) -> None:
        for p in packets:
            for d in p:
                self.gpu.w32(self.base + self.wptr % (4 * self.size), [d])
                self.wptr = (self.wptr + 4) & 0xFFFF_FFFF

    def submit(self, *packets) -> None:
        self.emit(*packets)
        self.gpu.write("SDMA_DOORBELL", self.wptr)

    def run(self, *packets) -> dict[str, int]:
        self.submit(*packets)
        return self.gpu.idle("SDMA_STATUS")


# ---------------------------------------------------------------------------- the checks' conveniences
# (tests/model/contract/**/test_contract_*.py): a memory layout, the
# packets by their usual arguments, bring-up, and what an error must latch.

RING, RING1, SRING = 0x10000, 0x11000, 0x12000
RPTR_WB, RPTR1_WB, SRPTR_WB, IH_WB = 0x8000, 0x8040, 0x8080, 0x80C0
IH_BASE = 0x20000
OUT = 0x40000
IB1, IB1B, IB2 = 0x50000, 0x51000, 0x52000
M32 = 0xFFFF_FFFF


def write_data(addr, data, **kw):
    return pm4("WRITE_DATA", data, **lo_hi("ADDR", addr, 2), DST_SEL=kw.pop("DST_SEL", "MEMORY"), **kw)


def release_mem(addr, data=0, **kw):
    kw = {"DATA_SEL": "DATA_32", "EVENT_TYPE": 0x14, "EVENT_INDEX": "END_OF_PIPE", **kw}
    return pm4("RELEASE_MEM", **lo_hi("ADDR", addr, 2), DATA_LO=data & M32, DATA_HI=data >> 32, **kw)


def ib(base, size, **kw):
    return pm4("INDIRECT_BUFFER", **lo_hi("IB_BASE", base, 2), IB_SIZE=size, **kw)


def wait_mem(addr, ref, mask, function, interval=4):
    return pm4("WAIT_REG_MEM", **lo_hi("ADDR", addr, 2), REFERENCE=ref, MASK=mask, FUNCTION=function,
               MEM_SPACE="MEMORY", POLL_INTERVAL=interval)


def dma_data(dst, src, n, **kw):
    return pm4("DMA_DATA", **lo_hi("SRC_ADDR", src), **lo_hi("DST_ADDR", dst), BYTE_COUNT=n, **kw)


def bring_up(dev, ring_log2=8, ih_log2=6):
    """docs/hardware.md's order: the IH ring, then the ring (base, size, write-back, ENABLE)."""
    g = Gpu(dev)
    ih = IhRing(g, IH_BASE, ih_log2, IH_WB)
    return g, Ring(g, RING, ring_log2, RPTR_WB), ih


def expect_error(ring: Ring, ih: IhRing, code: str, level: str, opcode: int, addr: int, offset: int):
    """The queue stopped with exactly this CP_ERROR; its IH entry carries the registers; then
    CP_QUEUE_RESET of that queue clears it and the driver starts again at wptr 0."""
    g = ring.gpu
    st = g.idle(ring.status)
    assert st["ERROR"] == 1, f"{ring.status} {st}: expected a stop with {code}"
    err, got_addr, got_off = ring.error_regs()
    want = {"CODE": g.err[code], "LEVEL": g.level[level], "OPCODE": opcode}
    assert (err, got_addr, got_off) == (want, addr, offset), \
        f"{code}: {ring.error}={err} addr={got_addr:#x} offset={got_off}, expected {want} {addr:#x} {offset}"
    assert g.field("INT_STATUS", "CP_ERROR") == 1
    entries = ih.pop()
    q = 0 if ring.p == "RB_" else 1
    if code != "VM_FAULT":
        assert len(entries) == 1 and ih.source(entries[0]) == "CP_ERROR", entries
        e = entries[0]
        raw_err = g.read(ring.error)
        assert (e["RING_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
            (q, raw_err, addr & M32, addr >> 32, offset), e
    g.write("INT_STATUS", g.value("INT_STATUS", CP_ERROR=1))
    g.set("CP_QUEUE_RESET", **{f"Q{q}": 1})
    st = g.idle(ring.status)
    assert st["ERROR"] == 0 and g.read(ring.error) == 0 and g.read(ring.p + "RPTR") == 0 \
        and g.read(ring.p + "WPTR") == 0, f"CP_QUEUE_RESET.Q{q} left {st}"
    ring.wptr = 0
    return entries


def expect_sdma_error(s: SdmaRing, ih: IhRing, code: str, level: str, op: int, addr: int, offset: int):
    g = s.gpu
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 1, st
    err = g.fields("SDMA_ERROR")
    got = (err["CODE"], err["LEVEL"], err["OP"], err["SUB_OP"],
           g.read("SDMA_ERROR_ADDR_LO") | g.read("SDMA_ERROR_ADDR_HI") << 32, g.read("SDMA_ERROR_OFFSET"))
    assert got == (g.err[code], g.level[level], op, 0, addr, offset), f"{code}: {got}"
    (e,) = g.until(lambda: ih.pop() or None, "the SDMA_ERROR entry")
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        (0x08, 241, g.read("SDMA_ERROR"), addr & M32, addr >> 32, offset), e
    g.set("SDMA_CNTL", QUEUE_RESET=1)
    st = g.idle("SDMA_STATUS")
    assert st["ERROR"] == 0 and g.read("SDMA_ERROR") == 0 and g.read("SDMA_RB_RPTR") == 0 == g.read("SDMA_RB_WPTR")
    s.wptr = 0


# A VMID's page tables (VMID 1): two levels, as docs/hardware.md lays them out.
PT_ROOT, PT_L1 = 0x80000, 0x81000
VALID, EXECUTABLE, READABLE, WRITEABLE, PDE_PTE = 1 << 0, 1 << 4, 1 << 5, 1 << 6, 1 << 54
VA_CODE, VA_OUT, VA_RO, VA_HOLE, VA_HUGE = 0x100000, 0x101000, 0x102000, 0x103000, 0x200000
PA_CODE, PA_OUT, PA_RO, PA_OUT2, PA_HUGE = 0x90000, 0x91000, 0x92000, 0x93000, 0x400000


def map_vmid1(g: Gpu) -> None:
    """Two levels of 512 8-byte entries: the root indexed by VA bits 29:21, a page table by
    20:12; addresses in entry bits 47:12; a root entry with PDE_PTE maps 2 MiB."""
    g.w64(PT_ROOT + 8 * (VA_CODE >> 21), PT_L1 | VALID)
    g.w64(PT_ROOT + 8 * (VA_HUGE >> 21), PA_HUGE | VALID | PDE_PTE | READABLE | WRITEABLE)
    for va, pa, bits in ((VA_CODE, PA_CODE, EXECUTABLE | READABLE), (VA_OUT, PA_OUT, WRITEABLE | READABLE),
                         (VA_RO, PA_RO, READABLE)):
        g.w64(PT_L1 + 8 * (va >> 12 & 511), pa | VALID | bits)
    g.write("VM_CONTEXT_PT_BASE_LO", PT_ROOT, 1)
    g.write("VM_CONTEXT_PT_BASE_HI", 0, 1)
    g.set("VM_CONTEXT_CNTL", 1, ENABLE=1)


def expect_fault(ring, ih, va, access, level, cause, opcode, offset, hint):
    g = ring.gpu
    g.idle()
    vs = g.fields("VM_FAULT_STATUS")
    raw_vs, raw_err = g.read("VM_FAULT_STATUS"), g.read("CP_ERROR")
    assert vs == {"VMID": 1, "ACCESS": access, "LEVEL": level, "CAUSE": cause}, f"{va:#x}: VM_FAULT_STATUS {vs}"
    assert g.read("VM_FAULT_ADDR_LO") | g.read("VM_FAULT_ADDR_HI") << 32 == va
    (e,) = expect_error(ring, ih, "VM_FAULT", "IB1", opcode, va, offset)
    assert (e["CLIENT_ID"], e["SOURCE_ID"], e["RING_ID"], e["VMID"]) == (0x1B, 0, 0, 1), e
    assert (e["DATA0"], e["DATA1"], e["DATA2"], e["DATA3"]) == \
        ((va >> 12) & M32, (va >> 44) & 0xF | hint, raw_vs, raw_err), e
    assert g.read("VM_FAULT_STATUS") == 0 and g.read("VM_FAULT_ADDR_LO") == 0, "CP_QUEUE_RESET.Q0 clears the fault"
