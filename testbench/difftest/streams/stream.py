"""A difftest stream: what the driver does, step by step, plus what the generator knows.

A `Stream` is plain data derived from (master seed, index) alone, so the RTL and the
model run exactly the same thing and any stream can be regenerated for a replay:

- `config`: ring, IH ring and memory-model (back-pressure) settings;
- `actions`: the driver program (`Action` tuples, below), run by testbench.difftest.driver;
- `packets`: every packet meant to execute, in execution order, with the byte ranges it
  may write (for the allowed-ranges check and to name the first differing packet);
- `buffers`: the indirect buffers (address -> dwords), for listings;
- `expect`: for a malformed stream, the error class and the CP_ERROR code it provokes;
- `bins`: functional-coverage bins the stream exercises (testbench.difftest.coverage).

Actions (first element is the verb):

    ("mem", addr, dwords)          CPU writes dwords to memory (preloads, WAIT releases)
    ("submit", dwords, releases)   write dwords at the ring's wptr, ring the doorbell, then run
                                   `releases` (a list of actions: delays and CPU writes that
                                   satisfy the submission's WAIT_REG_MEMs)
    ("doorbell", delta)            write RB_DOORBELL = driver wptr + delta (malformed doorbells)
    ("errwin", base, limit, resp)  memory model error window ("SLVERR"/"DECERR")
    ("delay", cycles)
    ("settle",)                    wait until STATUS.IDLE, then consume the IH ring
    ("mark",)                      copy memory: `check` compares against this copy
    ("expect_error",)              wait for the CP_ERROR interrupt; the CP must be idle
                                   within IDLE_AFTER_ERROR cycles
    ("stuck",)                     wait until the CP is idle or waiting in a WAIT_REG_MEM,
                                   then KMD_TIMEOUT more cycles (the driver's timeout)
    ("observe", label)             record every register the spec defines and the IH ring
    ("check", ranges)              bytes changed since "mark" must lie inside `ranges`
    ("recover",)                   soft reset (idle within IDLE_AFTER_ERROR cycles), then a
                                   good submission must complete
    ("vm", vmid, root)             translate VMID `vmid` through the tables at `root`
                                   (testbench/difftest/streams/vm.py); every other VMID is off
    ("pte", addr, vmid)            clear the page-table entry at `addr`, invalidate the VMID's
                                   TLB entries and wait for the acknowledge
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

from kmd_model.regs import IbLevel
from spec import pm4

LIST_WIDTH = 120  # a listing's columns: a packet with its data fits, a stream's action list wraps


def wrapped(text: str, width: int = LIST_WIDTH) -> str:
    """`text` with every line longer than `width` broken at spaces, its continuation lines
    indented 6 more than it (a stream's actions or VM pages were one line of 11,000
    characters, in `--list` and in a replay's story alike); a line with no space to break
    at stays whole."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 6)
        out += textwrap.wrap(line, width, subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False, drop_whitespace=True) or [line]
    return "\n".join(out)

Action = tuple

# The CP must be idle this many cycles after an error's interrupt, or after a soft reset.
IDLE_AFTER_ERROR = 1000
# The driver-level timeout for a WAIT_REG_MEM that never ends (the KMD's job_timeout).
KMD_TIMEOUT = 400


@dataclass
class Config:
    ring_base: int
    ring_log2: int
    ih_base: int
    ih_log2: int
    rptr_wb: bool
    ih_wptr_wb: bool
    ih_enable: bool = True
    mem: dict = field(default_factory=dict)  # rd_latency, wr_latency, stall, seed

    @property
    def ring_size(self) -> int:
        return 1 << self.ring_log2

    def describe(self) -> str:
        m = self.mem
        stall = ",".join(f"{k}={v}" for k, v in sorted(m.get("stall", {}).items()) if v) or "none"
        return (f"ring {self.ring_size} dwords at {self.ring_base:#x}, IH {1 << self.ih_log2} entries at "
                f"{self.ih_base:#x}{'' if self.ih_enable else ' (disabled)'}, rptr write-back "
                f"{'on' if self.rptr_wb else 'off'}, IH wptr write-back {'on' if self.ih_wptr_wb else 'off'}; "
                f"memory: rd_latency {m.get('rd_latency', 0)}, wr_latency {m.get('wr_latency', 0)}, "
                f"stall {stall} (seed {m.get('seed', 1)})")


@dataclass
class PacketInfo:
    """One packet the generator placed, where it sits and what it may write."""

    level: int  # IbLevel of the buffer it is in
    addr: int  # byte address of its header
    offset: int  # dword offset of the header in its ring (masked) or IB
    dwords: list[int]
    writes: list[tuple[int, int]] = field(default_factory=list)  # byte ranges [a, b)
    irq: bool = False  # appends an EOP IH entry
    note: str = ""  # e.g. "faulty", "never runs"

    @property
    def where(self) -> str:
        return f"{IbLevel(self.level).name}+{4 * self.offset:#06x}"

    @property
    def text(self) -> str:
        return pm4.describe(pm4.decode(self.dwords, 0)) if self.dwords else "(nothing)"

    def line(self) -> str:
        return f"{self.where} @{self.addr:#x}: {self.text}"


@dataclass
class Stream:
    index: int
    seed: int  # the campaign's master seed
    kind: str  # "valid", "malformed" or "raw"
    config: Config
    actions: list[Action] = field(default_factory=list)
    packets: list[PacketInfo] = field(default_factory=list)
    buffers: dict[int, list[int]] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    bins: set = field(default_factory=set)  # (error class or "", opcode name, field class)
    ts_ranges: list[tuple[int, int]] = field(default_factory=list)  # RELEASE_MEM TIMESTAMP bytes
    infra: list[tuple[int, int]] = field(default_factory=list)  # bytes the device itself may write
    notes: list[str] = field(default_factory=list)
    error_class: str = ""
    variant: str = ""
    skipped: str = ""  # an error class whose slot this stream fills (it needs a DMA engine)
    # What docs/hardware.md leaves to timing (after a DMA bus error): bytes not compared,
    # and register bits not compared (label -> mask of ignored bits).
    undefined: list[tuple[int, int]] = field(default_factory=list)
    timing_regs: dict[str, int] = field(default_factory=dict)
    vm: Any = None  # the VmPlan when the IBs run under a VMID (testbench/difftest/streams/vm.py)

    @property
    def label(self) -> str:
        if self.kind == "malformed":
            return f"malformed {self.error_class} ({self.variant})"
        return self.kind + (f" ({self.variant})" if self.variant else "")

    def submissions(self) -> list[tuple[int, list[int]]]:
        """(ring wptr before, dwords) of every submission, in order."""
        out, wptr = [], 0
        for a in self.actions:
            if a[0] == "submit":
                out.append((wptr, a[1]))
                wptr = (wptr + len(a[1])) & 0xFFFF_FFFF
            elif a[0] == "recover":
                wptr = 0
        return out

    def listing(self, mark: PacketInfo | None = None, max_data: int = 8) -> str:
        """The stream as a reader wants it: config, ring submissions and IBs disassembled,
        the driver's actions; `mark` is flagged with '>>', the planted faulty packet '!!'."""
        c = self.config
        lines = [f"stream {self.index} (seed {self.seed}): {self.label}", f"  {c.describe()}"]
        for n in self.notes:
            lines.append(f"  note: {n}")
        marked = (mark.level, mark.addr, tuple(mark.dwords)) if mark is not None else None
        faulty = {(p.level, p.addr, tuple(p.dwords)) for p in self.packets if p.note == "faulty"}

        def emit(level: int, addr: int, off: int, item, words) -> None:
            key = (level, addr, tuple(words))
            flag = ">>" if marked == key else "!!" if key in faulty else "  "
            lines.append(f"  {flag} {IbLevel(level).name}+{4 * off:#06x} @{addr:#08x}: {item.header:08x}  "
                         f"{pm4.describe(item, max_data=max_data)}")

        mask = c.ring_size - 1
        for k, (wptr, dw) in enumerate(self.submissions()):
            lines.append(f"  submission {k}: {len(dw)} dwords at ring wptr {wptr}")
            for item in pm4.decode_stream(dw):
                off = (wptr + item.offset) & mask
                emit(0, c.ring_base + 4 * off, off, item, dw[item.offset:item.offset + item.length])
        for base, dw in sorted(self.buffers.items()):
            lines.append(f"  IB at {base:#x}: {len(dw)} dwords")
            level = next((p.level for p in self.packets if base <= p.addr < base + 4 * len(dw)), 1)
            for item in pm4.decode_stream(dw):
                emit(level, base + 4 * item.offset, item.offset, item, dw[item.offset:item.offset + item.length])
        lines.append("  actions: " + "; ".join(describe_action(a) for a in self.actions))
        return "\n".join(lines)


def describe_action(a: Action) -> str:
    verb = a[0]
    if verb == "mem":
        return f"mem {a[1]:#x} <- {len(a[2])} dw"
    if verb == "submit":
        rel = f" + {len(a[2])} release step(s)" if a[2] else ""
        return f"submit {len(a[1])} dw{rel}"
    if verb == "doorbell":
        return f"doorbell wptr{a[1] - (1 << 32) if a[1] >> 31 else a[1]:+d}"
    if verb == "errwin":
        return f"error window [{a[1]:#x}, {a[2]:#x}) {a[3]}"
    if verb in ("delay", "observe"):
        return f"{verb} {a[1]}"
    if verb == "vm":
        return f"VMID {a[1]} translates, tables at {a[2]:#x}"
    if verb == "pte":
        return f"unmap: PTE at {a[1]:#x} cleared, VMID {a[2]} invalidated"
    if verb == "check":
        return f"check {len(a[1])} allowed range(s)"
    return verb
