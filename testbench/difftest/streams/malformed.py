"""Malformed command streams, one generator per error class: here the stream's shape and the
faults the CP's parser catches in the packets (bus errors and VM faults: access_faults.py;
raw random dword streams: raw.py).

Every malformed stream has the same shape: sometimes a valid prefix that runs to
completion (so the fault lands mid-ring, after wraps), a `mark`, then one submission in
which valid packets run and then, at a random level (ring, IB1, IB2, possibly reached
through a CHAIN), the faulty packet, followed by canary packets that must never run.
The driver then waits for the CP_ERROR interrupt (or, for a WAIT_REG_MEM that never
ends, for its timeout), observes every register, checks that no byte outside the
allowed ranges changed, soft-resets and runs a good submission.

ERROR_CLASSES maps each class to its generator and the CP_ERROR code it must provoke
("" for the timeout class). `needs_dma` classes are skipped, and reported as skipped,
when the device has no DMA engine.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from spec import packets as pk
from spec import pm4

from . import layout as L
from .access_faults import VM_FAULT_ACCESSES, VM_FAULT_KINDS, AccessFaults, bus_sites
from .gen import DATA_SELS, LEVEL_BIN, Buf, Builder, Caps, memory_config_bins
from .stream import Stream
from .vm import VmFault, to_vm

M32 = 0xFFFF_FFFF
KNOWN_OPCODES = frozenset(p.opcode for p in pk.PACKETS)


@dataclass(frozen=True)
class ErrorClass:
    name: str
    code: str  # CpError name, or "" for the WAIT_REG_MEM timeout
    make: Callable[["Malformed"], None]
    doc: str
    needs_dma: bool = False


def _lo_dword(p: pk.PacketDef, value: str) -> int:
    """Index (in the packet's dwords, header = 0) of the low dword of a 64-bit value."""
    return 1 + p.field(p.value(value).fields[0]).dword


ILLEGAL_VARIANTS = ("opcode", "type0", "type1")  # (any type-2 dword is a filler, as on gfx9)
BAD_COUNT_OPS = ("WRITE_DATA", "INDIRECT_BUFFER", "WAIT_REG_MEM", "RELEASE_MEM", "DMA_DATA")
PAST_END_OPS = ("NOP", "WRITE_DATA", "INDIRECT_BUFFER", "WAIT_REG_MEM", "RELEASE_MEM", "DMA_DATA")
FENCE_VARIANTS = (("WRITE_DATA", "addr"), ("WAIT_REG_MEM", "addr")) + tuple(
    ("RELEASE_MEM", f"data_{s}") for s in DATA_SELS)
WAIT_TIMEOUT_FUNCS = tuple(n for n in pk.WAIT_REG_MEM.field("FUNCTION").values if n != "ALWAYS")
# error classes whose streams may also run their IBs under a VMID (their faults do not
# depend on the address being physical: not decerr, whose addresses lie beyond memory)
VM_CLASSES = ("illegal_opcode", "bad_count", "count_past_end", "ib_nesting", "ib_size_zero", "ib_misaligned",
              "fence_misaligned", "unsupported", "dma_byte_count", "slverr", "wait_timeout")


def unsupported_choices(caps: Caps) -> list[tuple[str, str, list[int]]]:
    """(packet, field class, values) of every way to be UNSUPPORTED, from the packet table."""
    out = [("INDIRECT_BUFFER", "CHAIN_IN_RING", [1])]
    for p in pk.PACKETS:
        for f in p.fields:
            if f.enum and not f.open_enum:
                ok = {e.value for e in f.enum if e.supported}
                bad = [x for x in range(f.max + 1) if x not in ok]
                if bad:  # (ADDR_INCR, say, has no unsupported value)
                    out.append((p.name, f.name, bad))
    if not caps.dma:
        out.append(("DMA_DATA", "NO_ENGINE", [0]))
    return out


class Malformed(AccessFaults):
    """Builds one malformed stream around a Builder.

    `rot` drives the main choices of a class (which variant, which level) through
    `pick`, a mixed-radix counter over the campaign's cases of that class: the first
    cases of a class visit every variant, the rest of each stream is random.
    """

    def __init__(self, b: Builder, cls: str, rot: int | None = None):
        self.b, self.r, self.cls = b, b.rng, cls
        self.rot = rot
        self.cut = 0  # dwords of the faulty packet left outside its buffer (count_past_end)
        self.vm_fault_plan: VmFault | None = None  # the vm_fault class's plan for its region (set by vm_fault())

    def pick(self, options):
        options = list(options)
        if self.rot is None:
            return self.r.choice(options)
        k = self.rot % len(options)
        self.rot //= len(options)
        return options[k]

    # ------------------------------------------------------------------ placement

    def levels(self, lo: int = 0, hi: int | None = None) -> list[int]:
        hi = self.b.caps.ib_levels if hi is None else hi
        return list(range(lo, hi + 1))

    def fault(self, buf: Buf, i: int, dwords: list[int], opcode: str, cls: str, writes=()) -> list[int]:
        """Record the faulty packet (its bins, and what it may write before failing)."""
        self.b.info(buf, i, dwords, list(writes), note="faulty")
        self.b.bin(opcode, cls, self.cls)
        self.b.bin("*", LEVEL_BIN[buf.level], self.cls)
        self.b.s.variant = f"{opcode} {cls} {LEVEL_BIN[buf.level]}"
        return dwords

    def place(self, level: int, make: Callable[[Buf, int], list[int]], chain_ok: bool = True,
              prefix: bool = True) -> None:
        """Submit: valid packets, then `make`'s faulty packet at `level`, then canaries."""
        b, r = self.b, self.r
        c = b.s.config
        ring = b.ring_buf()
        out = b.body(ring, r.randint(0, 2), max(0, c.ring_size - 48)) if prefix else []
        if level == 0:
            out += make(ring, len(out))
            if self.cut:
                out = out[:-self.cut]  # the doorbell stops inside the packet
            elif len(out) + 5 <= c.ring_size:
                out += b.canary(1)
        else:
            out += self.ib_to(ring, len(out), level, make, chain_ok)
            if len(out) + 5 <= c.ring_size:
                out += b.canary(1)
        assert len(out) <= c.ring_size, (len(out), c.ring_size)
        b.submit(out)

    def ib_to(self, buf: Buf, i: int, target: int, make, chain_ok: bool, chain: bool = False) -> list[int]:
        b, r = self.b, self.r
        base = b.new_ib()
        assert base is not None
        level = buf.level if chain else buf.level + 1
        me = b.info(buf, i, [])
        sub = Buf(level, base)
        dw = b.body(sub, r.randint(0, 3), 400)
        cut = 0
        if level < target:
            dw += self.ib_to(sub, len(dw), target, make, chain_ok)
            dw += b.canary(r.randint(0, 1))
        elif chain_ok and not chain and r.random() < 0.25:
            dw += self.ib_to(sub, len(dw), target, make, chain_ok, chain=True)
            dw += b.canary(r.randint(0, 1))
            b.bin("INDIRECT_BUFFER", "fault_in_chained_ib", self.cls)
        else:
            dw += make(sub, len(dw))
            cut, self.cut = self.cut, 0
            if not cut:
                dw += b.canary(r.randint(0, 2))
        b.s.buffers[base] = dw
        b.preload(base, dw)
        me.dwords = pm4.indirect_buffer(base, len(dw) - cut, chain=int(chain))
        return me.dwords

    # ------------------------------------------------------------------ helpers

    def valid(self, name: str) -> list[int]:
        """A valid packet of kind `name` that writes nothing outside the fault region."""
        r = self.r
        a = L.FAULT_REGION[0] + 8 * r.randrange(0x100)
        if name == "NOP":
            return pm4.nop(r.randint(1, 6))
        if name == "WRITE_DATA":
            return pm4.write_data(a, [r.getrandbits(32) for _ in range(r.randint(1, 4))])
        if name == "INDIRECT_BUFFER":
            return pm4.indirect_buffer(L.IB_REGION[0], r.randint(1, 64))
        if name == "WAIT_REG_MEM":
            return pm4.wait_reg_mem(a, 0, 0, "ALWAYS", poll_interval=r.randint(0, 20))
        if name == "RELEASE_MEM":
            return pm4.release_mem(a, r.getrandbits(32), int_sel=r.choice(["NONE", "SEND_INT"]))
        if name == "DMA_DATA":
            return pm4.dma_data(a, L.SRC_REGION[0], r.randint(1, 64))
        raise KeyError(name)

    def window(self, nblocks: int = 1) -> tuple[int, int]:
        w = L.FAULT_REGION[0] + 32 * self.r.randrange(8, 0x100)
        return w, w + 32 * nblocks

    # ------------------------------------------------------------------ the classes

    def illegal_opcode(self) -> None:
        r = self.r
        v = self.pick(ILLEGAL_VARIANTS)

        def make(buf, i):
            if v == "opcode":
                op = r.choice([x for x in range(256) if x not in KNOWN_OPCODES])
                h = pm4.header(op, r.choice([0, r.randint(1, 8), r.randrange(1 << 14)])) | r.randint(0, 3)
            else:
                h = {"type0": 0, "type1": 1}[v] << 30 | r.randrange(1 << 30)
            dw = [h] + [r.getrandbits(32) for _ in range(r.randint(0, 3))]
            self.b.s.expect["opcode"] = (h >> 8) & 0xFF if v == "opcode" else 0
            return self.fault(buf, i, dw, "ILLEGAL", v)

        self.place(self.pick(self.levels()), make)

    def bad_count(self) -> None:
        r = self.r
        name = self.pick(BAD_COUNT_OPS)
        p = pk.by_name[name]
        small = p.variable or self.pick([True, False])

        def make(buf, i):
            dw = self.valid(name)
            if small:
                count = r.randint(0, p.min_count - 1)
            else:
                count = r.choice([p.min_count + r.randint(1, 4), r.randint(p.min_count + 1, (1 << 14) - 1)])
            dw[0] = pm4.header(p.opcode, count)
            return self.fault(buf, i, dw, name, "count_small" if small else "count_large")

        self.place(self.pick(self.levels()), make)

    def count_past_end(self) -> None:
        r = self.r
        name = self.pick(PAST_END_OPS)
        level = self.pick(self.levels())
        huge = self.pick([False, True]) and pk.by_name[name].variable

        def make(buf, i):
            dw = self.valid(name)
            if huge:
                # more than any ring (1024 dwords) or IB remainder holds
                dw[0] = pm4.header(pk.by_name[name].opcode, r.randint(2048, (1 << 14) - 1))
                self.cut = 0
                return self.fault(buf, i, dw, name, "huge_count")
            self.cut = r.randint(1, len(dw) - 1)
            return self.fault(buf, i, dw, name, "past_wptr" if buf.level == 0 else "past_ib_end")

        self.place(level, make)

    def ib_nesting(self) -> None:
        r = self.r
        deepest = self.b.caps.ib_levels

        def make(buf, i):
            dw = pm4.indirect_buffer(L.IB_REGION[0] + 4 * r.randrange(1024), r.randint(1, 100),
                                     vmid=r.randrange(16))
            return self.fault(buf, i, dw, "INDIRECT_BUFFER", "too_deep")

        self.place(deepest, make)

    def ib_size_zero(self) -> None:
        r = self.r
        level = self.pick(self.levels())

        def make(buf, i):
            chain = int(buf.level > 0 and r.random() < 0.3)
            base = L.IB_REGION[0] + 4 * r.randrange(1 << 16)
            dw = pm4.encode_fields("INDIRECT_BUFFER", {"IB_BASE_LO": base >> 2, "VALID": 1, "CHAIN": chain,
                                                       "VMID": r.randrange(16)})
            return self.fault(buf, i, dw, "INDIRECT_BUFFER", "size0" + ("_chain" if chain else ""))

        self.place(level, make)

    def ib_misaligned(self) -> None:
        r = self.r

        def make(buf, i):
            chain = int(buf.level > 0 and r.random() < 0.3)
            dw = pm4.indirect_buffer(L.IB_REGION[0] + 4 * r.randrange(1 << 16), r.randint(0, 50) or 1, chain=chain)
            dw[_lo_dword(pk.INDIRECT_BUFFER, "base")] |= r.randint(1, 3)
            return self.fault(buf, i, dw, "INDIRECT_BUFFER", "misaligned" + ("_chain" if chain else ""))

        self.place(self.pick(self.levels()), make)

    def fence_misaligned(self) -> None:
        r = self.r
        v, cls = self.pick(FENCE_VARIANTS)
        sel = cls[5:]
        level = self.pick(self.levels())

        def make(buf, i):
            a = L.FAULT_REGION[0] + 8 * r.randrange(0x100)
            if v == "WRITE_DATA":
                dw = pm4.write_data(a, [r.getrandbits(32) for _ in range(r.randint(1, 4))])
                dw[_lo_dword(pk.WRITE_DATA, "addr")] |= r.randint(1, 3)
            elif v == "WAIT_REG_MEM":
                dw = pm4.wait_reg_mem(a, 0, 0, "ALWAYS")
                dw[_lo_dword(pk.WAIT_REG_MEM, "addr")] |= r.randint(1, 3)
            else:
                dw = pm4.release_mem(a, r.getrandbits(32), data_sel=sel, int_sel=r.choice(["NONE", "SEND_INT"]))
                k = _lo_dword(pk.RELEASE_MEM, "addr")
                dw[k] |= r.choice([4, r.randint(1, 7)]) if sel in ("DATA_64", "TIMESTAMP") else r.randint(1, 3)
            return self.fault(buf, i, dw, v, cls)

        self.place(level, make)

    def unsupported(self) -> None:
        r = self.r
        name, fname, values = self.pick(unsupported_choices(self.b.caps))
        value = r.choice(values)
        p = pk.by_name[name]

        def make(buf, i):
            dw = self.valid(name)
            if fname == "CHAIN_IN_RING":
                dw[1 + p.field("CHAIN").dword] |= p.field("CHAIN").put(1)
                cls = fname
            elif fname == "NO_ENGINE":
                cls = fname
            else:
                f = p.field(fname)
                dw[1 + f.dword] = (dw[1 + f.dword] & ~f.mask & M32) | f.put(value)
                cls = fname
                self.b.s.notes.append(f"{name}.{fname} = {f.names.get(value, value)}")
            return self.fault(buf, i, dw, name, cls)

        self.place(0 if fname == "CHAIN_IN_RING" else self.pick(self.levels()), make)

    def dma_byte_count(self) -> None:
        r = self.r
        limit = self.b.caps.dma_max_bytes

        def make(buf, i):
            n = r.choice([limit + 1, r.randint(limit + 1, (1 << 21) - 1), r.randint(1 << 21, (1 << 26) - 1)])
            fill = r.random() < 0.3
            dw = pm4.dma_data(L.FAULT_REGION[0], r.getrandbits(32) if fill else L.SRC_REGION[0], n,
                              src_sel="DATA" if fill else "ADDRESS")
            return self.fault(buf, i, dw, "DMA_DATA", "fill" if fill else "copy")

        self.place(self.pick(self.levels()), make)

    def doorbell(self, backwards: bool) -> None:
        b, r = self.b, self.r
        size = b.s.config.ring_size
        if not any(a[0] == "settle" for a in b.actions):
            b.submit(b.ring_packets(r.randint(1, 3)))
            b.settle()
        if backwards:
            d = r.choice([1, r.randint(2, 64), r.randint(1, 1 << 31)])
            delta = -d & M32
            cls = "backwards"
        else:
            delta = r.choice([size + 1, size + r.randint(2, 64), r.randint(size + 1, (1 << 31) - 1)])
            cls = "overflow"
        b.actions.append(("doorbell", delta))
        b.bin("DOORBELL", cls, self.cls)
        b.s.variant = f"wptr{-d if backwards else delta:+d}"

    def doorbell_overflow(self) -> None:
        self.doorbell(False)

    def doorbell_backwards(self) -> None:
        self.doorbell(True)

    def wait_timeout(self) -> None:
        b, r = self.b, self.r
        fn = self.pick(WAIT_TIMEOUT_FUNCS)
        level = self.pick(self.levels())
        v = "mask0" if fn in ("EQ", "LT", "GT") and r.random() < 0.4 else "sem"

        def make(buf, i):
            if v == "mask0":  # (value & 0) is 0: these never hold
                ref = {"EQ": r.randint(1, M32), "LT": 0, "GT": r.getrandbits(32)}[fn]
                a = L.SEM_REGION[0] + 4 * r.randrange(0x1000)
                mask = 0
            else:
                _, mask, ref, good, bad = b.wait_condition(block=True, fn=fn)
                a = b.sem(bad)
            dw = pm4.wait_reg_mem(a, ref, mask, fn, poll_interval=r.choice([0, r.randint(1, 30), r.randint(31, 300)]))
            self.fault(buf, i, dw, "WAIT_REG_MEM", f"fn_{fn}")
            b.s.variant += f" {v}"
            return dw

        self.place(level, make)


ERROR_CLASSES: dict[str, ErrorClass] = {e.name: e for e in (
    ErrorClass("vm_fault", "VM_FAULT", Malformed.vm_fault,
               "a packet in an IB reaches an unmapped page, one without the permission it needs, a table "
               "read that fails, an address beyond the tables, or a page unmapped after use"),
    ErrorClass("illegal_opcode", "ILLEGAL_OPCODE", Malformed.illegal_opcode,
               "an unknown type-3 opcode, a type-0/1 header, a type-2 dword other than the filler"),
    ErrorClass("bad_count", "BAD_COUNT", Malformed.bad_count, "COUNT wrong for the opcode"),
    ErrorClass("count_past_end", "BAD_COUNT", Malformed.count_past_end,
               "COUNT runs past the end of the IB (IB_SIZE) or past wptr in the ring"),
    ErrorClass("ib_nesting", "IB_NESTING", Malformed.ib_nesting, "an INDIRECT_BUFFER below CAPS.IB_LEVELS"),
    ErrorClass("ib_size_zero", "IB_SIZE_ZERO", Malformed.ib_size_zero, "INDIRECT_BUFFER with IB_SIZE 0"),
    ErrorClass("ib_misaligned", "IB_MISALIGNED", Malformed.ib_misaligned, "IB base with bits 1:0 set"),
    ErrorClass("fence_misaligned", "FENCE_MISALIGNED", Malformed.fence_misaligned,
               "WRITE_DATA / WAIT_REG_MEM / RELEASE_MEM address not aligned"),
    ErrorClass("unsupported", "UNSUPPORTED", Malformed.unsupported,
               "a closed-enum field value the device does not implement, VALID = 0, CHAIN in the ring"),
    ErrorClass("dma_byte_count", "DMA_BYTE_COUNT", Malformed.dma_byte_count, "DMA_DATA BYTE_COUNT over the limit",
               needs_dma=True),
    ErrorClass("slverr", "BUS_SLVERR", Malformed.slverr,
               "SLVERR on a write, fence, poll, fetch, rptr/IH write-back, IH entry (or DMA)"),
    ErrorClass("decerr", "BUS_DECERR", Malformed.decerr, "DECERR: the same sites, and addresses beyond memory"),
    ErrorClass("doorbell_overflow", "DOORBELL_OVERFLOW", Malformed.doorbell_overflow,
               "doorbell wptr more than the ring size ahead of rptr"),
    ErrorClass("doorbell_backwards", "DOORBELL_BACKWARDS", Malformed.doorbell_backwards,
               "doorbell wptr moving backwards"),
    ErrorClass("wait_timeout", "", Malformed.wait_timeout,
               "a WAIT_REG_MEM never satisfied, caught by the driver's timeout and a soft reset"),
)}


def class_bins(cls: str, caps: Caps) -> set[tuple[str, str]]:
    """Every (opcode, field class) bin error class `cls` can hit on a device with `caps`."""
    lv = {("*", LEVEL_BIN[i]) for i in range(caps.ib_levels + 1)}
    if caps.ib_levels:
        lv.add(("INDIRECT_BUFFER", "fault_in_chained_ib"))
    IB = "INDIRECT_BUFFER"
    if cls == "illegal_opcode":
        return {("ILLEGAL", v) for v in ILLEGAL_VARIANTS} | lv
    if cls == "bad_count":
        return ({(op, "count_small") for op in BAD_COUNT_OPS} | lv
                | {(op, "count_large") for op in BAD_COUNT_OPS if not pk.by_name[op].variable})
    if cls == "count_past_end":
        return ({(op, k) for op in PAST_END_OPS for k in ("past_wptr", "past_ib_end")} | lv
                | {(op, "huge_count") for op in PAST_END_OPS if pk.by_name[op].variable})
    if cls == "ib_nesting":
        return {(IB, "too_deep"), ("*", LEVEL_BIN[caps.ib_levels]), (IB, "fault_in_chained_ib")}
    if cls == "ib_size_zero":
        return {(IB, "size0"), (IB, "size0_chain")} | lv
    if cls == "ib_misaligned":
        return {(IB, "misaligned"), (IB, "misaligned_chain")} | lv
    if cls == "fence_misaligned":
        return set(FENCE_VARIANTS) | lv
    if cls == "unsupported":
        return {(p, f) for p, f, _ in unsupported_choices(caps)} | lv
    if cls == "dma_byte_count":
        return {("DMA_DATA", "copy"), ("DMA_DATA", "fill")} | lv
    if cls in ("slverr", "decerr"):
        return {b for bins in bus_sites(cls.upper(), caps).values() for b in bins} | lv
    if cls == "doorbell_overflow":
        return {("DOORBELL", "overflow")}
    if cls == "doorbell_backwards":
        return {("DOORBELL", "backwards")}
    if cls == "wait_timeout":
        return {("WAIT_REG_MEM", f"fn_{f}") for f in WAIT_TIMEOUT_FUNCS} | lv
    if cls == "vm_fault":
        acc = [a for a in VM_FAULT_ACCESSES if caps.dma or not a.startswith("dma")]
        return ({("VM", f"{k}_{a}") for k in VM_FAULT_KINDS for a in acc}
                | {("*", LEVEL_BIN[i]) for i in range(1, caps.ib_levels + 1)})
    raise KeyError(cls)


def malformed_stream(rng: random.Random, index: int, seed: int, caps: Caps, cls: str,
                     case: int | None = None) -> Stream:
    """A stream of error class `cls`; `case` (the how-many-th of its class in the campaign)
    steers the variant so that a campaign visits them all."""
    ec = ERROR_CLASSES[cls]
    b = Builder(rng, index, seed, "malformed", caps)
    b.s.error_class = cls
    b.s.expect = {"code": ec.code}
    memory_config_bins(b)
    if rng.random() < 0.5:  # a valid prefix that runs to completion first
        for _ in range(rng.randint(1, 3)):
            dw = b.ring_packets(rng.randint(1, 4))
            if dw:
                b.submit(dw)
        b.settle()
    b.actions.append(("mark",))
    first = len(b.s.packets)
    rot = None if case is None else case + random.Random(f"{seed}:{cls}").randrange(1 << 20)
    m = Malformed(b, cls, rot)
    ec.make(m)
    b.actions.append(("stuck",) if cls == "wait_timeout" else ("expect_error",))
    allowed = [w for p in b.s.packets[first:] for w in p.writes] + b.s.infra
    b.actions += [("observe", "stuck" if cls == "wait_timeout" else "error"), ("check", allowed),
                  ("recover",), ("observe", "final")]
    s = b.finish()
    if cls == "vm_fault" or cls in VM_CLASSES and rng.random() < 0.3:
        to_vm(s, rng, m.vm_fault_plan)
    return s
