"""Compare what the RTL and the model did with one stream, and name the first packet
whose effects differ.

Compared: every `observe` point's registers (all readable registers the spec defines,
time and cycle counters aside), the IH entries the driver consumed (timestamps aside),
the whole memory image (RELEASE_MEM TIMESTAMP destinations and the IH timestamp bytes
aside), how the stream ended, and each backend's own invariant checks.

The first differing packet is found from the model's trace (the packets it started, in
order): the faulting packet when the CP stopped differently, else the first packet in
execution order whose writes overlap a differing memory range or whose interrupt gave a
differing IH entry. In lockstep replays (`--step`) the first differing observation
already names the ring packet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from kmd_model import regs
from kmd_model.regs import CpError, IbLevel
from spec import ih as ih_spec
from spec import packets
from testbench.refmodel import mem_diff

from .driver import Observation, ih_timestamp_ranges
from .streams import layout as L
from .streams.stream import Stream

_ADDR = re.compile(r"\baddr=(0x[0-9a-f]+)")
_DST = re.compile(r"\bdst=(0x[0-9a-f]+)")
_COUNT = re.compile(r"\bbyte_count=(\d+)")
_SEL = re.compile(r"\bdata_sel=(\w+)")
_RM_DATA_SEL_DEFAULT = packets.RELEASE_MEM.field("DATA_SEL").default
_DATA = re.compile(r"\bdata=\[([^\]]*)\]")


@dataclass
class Executed:
    """One packet the model started, from its trace line."""

    n: int
    where: str  # "IB1+0x0014"
    text: str
    writes: list[tuple[int, int]] = field(default_factory=list)
    kind: str = ""  # write, timestamp, poll, dma, or ""
    irq: bool = False

    @property
    def line(self) -> str:
        return f"{self.where}: {self.text}"


def executed(trace: list[str]) -> list[Executed]:
    out = []
    for n, line in enumerate(trace):
        where, _, text = line.partition(": ")
        name = text.split(" ", 1)[0]
        e = Executed(n, where, text)
        a = _ADDR.search(text)
        if name == "WRITE_DATA" and a:
            d = _DATA.search(text)
            items = d.group(1).split(", ") if d else []
            k = sum(1 for x in items if x.startswith("0x"))
            extra = [int(x.split("+")[1]) for x in items if x.startswith("...")]
            addr = int(a.group(1), 16)
            e.writes, e.kind = [(addr, addr + 4 * (k + sum(extra)))], "write"
        elif name == "RELEASE_MEM" and a:
            sel = _SEL.search(text)
            sel = sel.group(1) if sel else _RM_DATA_SEL_DEFAULT  # listings leave out defaults
            addr = int(a.group(1), 16)
            nb = {"DATA_32": 4, "DATA_64": 8, "TIMESTAMP": 8}.get(sel, 0)
            e.writes = [(addr, addr + nb)] if nb else []
            e.kind = "timestamp" if sel == "TIMESTAMP" else "write"
            e.irq = "int_sel=SEND_INT" in text
        elif name == "WAIT_REG_MEM" and a:
            addr = int(a.group(1), 16)
            e.writes, e.kind = [(addr, addr + 4)], "poll"
        elif name == "DMA_DATA":
            d, c = _DST.search(text), _COUNT.search(text)
            if d and c:
                addr = int(d.group(1), 16)
                e.writes, e.kind = [(addr, addr + int(c.group(1)))], "dma"
        out.append(e)
    return out


def executed_accesses(trace: list[str]) -> list[tuple[str, str, int, int]]:
    """(where, kind, start, end) of every memory access the traced packets make."""
    return [(e.where, e.kind, a, b) for e in executed(trace) for a, b in e.writes if e.kind]


def _hex(v) -> str:
    return "-" if v is None else f"{v:#x}" if isinstance(v, int) else repr(v)


def _error_regs(r: dict) -> tuple:
    e = regs.CP_ERROR.decode(r.get("CP_ERROR", 0))
    return (e["CODE"], e["LEVEL"], e["OPCODE"], r.get("CP_ERROR_ADDR_HI", 0) << 32 | r.get("CP_ERROR_ADDR_LO", 0),
            r.get("CP_ERROR_OFFSET", 0))


def describe_error(e: tuple) -> str:
    code, level, opcode, addr, offset = e
    name = CpError(code).name if code in CpError._value2member_map_ else str(code)
    lvl = IbLevel(level).name if level in IbLevel._value2member_map_ else str(level)
    return f"{name} at {lvl}+{4 * offset:#06x} (addr {addr:#x}, opcode {opcode:#04x})"


@dataclass
class Verdict:
    ok: bool
    diffs: list[str]
    checks: list[str]
    first_packet: str = ""
    mem_ranges: list[tuple[int, int]] = field(default_factory=list)
    first_n: int | None = None  # index of that packet in the model's trace

    def summary(self, limit: int = 12) -> list[str]:
        lines = self.checks + self.diffs
        return lines[:limit] + ([f"... {len(lines) - limit} more"] if len(lines) > limit else [])


def expected_outcome(stream: Stream, model: Observation) -> list[str]:
    """What the model did against what the stream's class says must happen."""
    if stream.kind == "valid":
        return [] if model.status == "idle" else [f"model: a valid stream ended with {model.status}"]
    if stream.kind != "malformed":
        return []
    code = stream.expect.get("code", "")
    want = f"error {code}" if code else "stuck"
    out = [] if model.status == want else [f"model: expected {want} for {stream.error_class}, got {model.status}"]
    if "opcode" in stream.expect and model.events:
        got = _error_regs(model.events[0][1])[2]
        if got != stream.expect["opcode"]:
            out.append(f"model: expected CP_ERROR.OPCODE {stream.expect['opcode']:#x}, got {got:#x}")
    return out


def compare(stream: Stream, rtl: Observation, model: Observation, rtl_mem: np.ndarray,
            model_mem: np.ndarray) -> Verdict:
    diffs: list[str] = []
    if rtl.status != model.status:
        diffs.append(f"outcome: model {model.status}, rtl {rtl.status}")
    ln = [e[0] for e in model.events], [e[0] for e in rtl.events]
    if ln[0] != ln[1]:
        diffs.append(f"observations: model {ln[0]}, rtl {ln[1]}")
    ign = stream.timing_regs
    for (label, m), (_, r) in zip(model.events, rtl.events):
        for k in sorted(set(m) | set(r), key=lambda k: (k != "CP_ERROR", k)):
            a, b = m.get(k), r.get(k)
            if k in ign and a is not None and b is not None:
                a, b = a & ~ign[k], b & ~ign[k]
            if a != b:
                diffs.append(f"{label}: {k}: model {_hex(m.get(k))}, rtl {_hex(r.get(k))}")
    if len(model.ih) != len(rtl.ih):
        diffs.append(f"IH entries: model {len(model.ih)}, rtl {len(rtl.ih)}")
    for i, (x, y) in enumerate(zip(model.ih, rtl.ih)):
        if x != y:
            diffs.append(f"IH entry {i}: " + ", ".join(f"{f} model {x[f]:#x} rtl {y.get(f, 0):#x}"
                                                      for f in x if x[f] != y.get(f)))
    exclude = stream.ts_ranges + ih_timestamp_ranges(stream) + stream.undefined
    ranges = mem_diff(model_mem, rtl_mem, exclude, limit=64)
    for a, b in ranges[:8]:
        n = min(b - a, 8)
        diffs.append(f"memory [{a:#x}, {b:#x}): model {bytes(model_mem[a:a + n]).hex()}"
                     f"{'..' if b - a > n else ''}, rtl {bytes(rtl_mem[a:a + n]).hex()}{'..' if b - a > n else ''}")
    if len(ranges) > 8:
        diffs.append(f"memory: {len(ranges) - 8} more differing range(s)")
    for e in executed(model.trace):
        if e.text.startswith("RELEASE_MEM") and e.kind == "write" and e.writes:
            a, b = e.writes[0]
            if any(a < y and x < b for x, y in ranges):
                v = lambda mem: int.from_bytes(bytes(mem[a:b]), "little")  # noqa: E731
                diffs.append(f"fence at {a:#x} ({e.where}): model {v(model_mem):#x}, rtl {v(rtl_mem):#x}")
    checks = [f"rtl: {c}" for c in rtl.checks] + [f"model: {c}" for c in model.checks]
    checks += expected_outcome(stream, model)
    v = Verdict(not diffs and not checks, diffs, checks, mem_ranges=ranges)
    if not v.ok:
        v.first_packet, v.first_n = locate(stream, rtl, model, ranges)
    return v


def _differ(stream: Stream, m: dict, r: dict) -> bool:
    ign = stream.timing_regs
    return any((m.get(k, 0) & ~ign.get(k, 0)) != (r.get(k, 0) & ~ign.get(k, 0)) for k in set(m) | set(r))


def _error_packet(stream: Stream, ex: list[Executed], e: tuple) -> tuple[str, int | None]:
    """The packet CP_ERROR names (LEVEL + OFFSET): the last one the model started there,
    else (an error found before the packet started: a bad header) the packet whose
    header is at ADDR."""
    code, level, opcode, addr, offset = e
    if code in (CpError.DOORBELL_BACKWARDS, CpError.DOORBELL_OVERFLOW):
        return f"the doorbell write (RB_DOORBELL = {addr:#x})", None
    lvl = IbLevel(level).name if level in IbLevel._value2member_map_ else str(level)
    where = f"{lvl}+{4 * offset:#06x}"
    for x in reversed(ex):
        if x.where == where:
            return x.line, x.n
    for n, p in enumerate(stream.packets):
        if p.addr == addr and p.dwords:
            return p.line(), n
    return f"the packet at {where}", None


def locate(stream: Stream, rtl: Observation, model: Observation,
           ranges: list[tuple[int, int]]) -> tuple[str, int | None]:
    """The packet whose effects differ first, as a line a user can act on, and its index
    in execution order (the model's trace; for generated streams also `stream.packets`)."""
    ex = executed(model.trace)
    # Lockstep observations name the ring packet after which things first differ.
    for (label, m), (_, r) in zip(model.events, rtl.events):
        if _differ(stream, m, r) and label.startswith("after "):
            inner, n = _locate_in(stream, ex, rtl, model, ranges)
            return f"first difference {label}" + (f"; inside it: {inner}" if inner else ""), n
    mem_text, mem_n = _locate_in(stream, ex, rtl, model, ranges)
    for k, ((label, m), (_, r)) in enumerate(zip(model.events, rtl.events)):
        if not _differ(stream, m, r):
            continue
        em, er = _error_regs(m), _error_regs(r)
        upto = ex[:model.marks[k]] if k < len(model.marks) else ex
        if em != er and not {"CP_ERROR", "CP_ERROR_ADDR_LO", "CP_ERROR_OFFSET"} & set(stream.timing_regs):
            pkt, n = _error_packet(stream, upto, em if em[0] else er)
            text = (f"the CP stopped differently ({label}): model {describe_error(em)}, rtl {describe_error(er)}"
                    + (f"; packet {pkt}" if pkt else ""))
            if mem_text and mem_n is not None and (n is None or mem_n < n):
                return f"{mem_text}; then {text}", mem_n  # an earlier packet's write differs already
            return text, n
        if em[0]:
            # the same error on both sides; what follows it differs
            pkt, n = _error_packet(stream, upto, em)
            if mem_text and mem_n is not None and (n is None or mem_n < n):
                return mem_text, mem_n  # an earlier packet's write differs already
            text = f"after the same error ({describe_error(em)}) the state differs ({label}); the faulting " \
                   f"packet: {pkt}"
            return text + (f"; also: {mem_text}" if mem_text else ""), n
        break
    return mem_text or "no single packet: registers/counters differ; replay with --step to see after which " \
        "ring packet", mem_n


def _locate_in(stream: Stream, ex: list[Executed], rtl: Observation, model: Observation,
               ranges: list[tuple[int, int]]) -> tuple[str, int | None]:
    best: tuple[int, str] | None = None
    for e in ex:
        hit = [(a, b) for a, b in e.writes for x, y in ranges if a < y and x < b and e.kind != "poll"]
        if hit:
            best = (e.n, f"{e.line} (its write [{hit[0][0]:#x}, {hit[0][1]:#x}) differs)")
            break
    for i, (x, y) in enumerate(zip(model.ih, rtl.ih)):
        if x != y:
            k = sum(1 for z in model.ih[:i] if z["SOURCE_ID"] == x["SOURCE_ID"])
            irqs = [e for e in ex if e.irq]
            if x["SOURCE_ID"] == ih_spec.Source.EOP and k < len(irqs) and (best is None or irqs[k].n < best[0]):
                best = (irqs[k].n, f"{irqs[k].line} (its IH entry {i} differs)")
            break
    if best is None and ranges:
        a, b = ranges[0]
        c = stream.config
        own = [((c.ih_base, c.ih_base + (32 << c.ih_log2)), "the IH ring"), ((L.RPTR_WB, L.RPTR_WB + 4),
               "the rptr write-back"), ((L.IH_WPTR_WB, L.IH_WPTR_WB + 4), "the IH wptr write-back")]
        for (x, y), what in own:
            if a < y and x < b:
                return f"{what} differs at [{a:#x}, {b:#x}) (written by the device, not by a packet)", None
        return f"no packet of the model writes [{a:#x}, {b:#x}): a stray write", None
    return (best[1], best[0]) if best else ("", None)
