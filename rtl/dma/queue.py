"""The DMA engine's small queues: FIFOs whose head reads like an asynchronous read at the
read pointer.

- `LutramQueue`: LUTRAM, read asynchronously (wq, bq in write.py: their heads drive the
  bus's W and B handshakes the cycle they are read).
- `BramQueue`: the command queues (qa, qx, qw: commands.py), mostly in block RAM. A 16x4
  LUTRAM costs 6 logic cells, and these three are 65 of them in each DMA engine (~390
  cells, with most of the part's block RAMs unused). The head keeps its timing, where it
  is used: a stage reads the block RAM's fields only as it loads a command (the cycle it
  has none, `act` low, and the head is neither empty nor an entry it skips). The RAM's
  read is synchronous, and its address comes from registers only: the read pointer `rp`,
  or `rp + 1` while the stage has a command (its pointer moves past it as it ends) or
  while the head is one it skips (the pointer moves past it as the stage sees it), so
  the slow decisions of when a pointer moves (the bus's handshakes, the abort scope)
  never reach the RAM's inputs (they did, through the pointer's next value: 89 MHz). A
  read at `rp + 1` that turns out early (a skipped entry held back) is never used, and
  one at the head of an empty queue is redone every cycle until a push fills it. The
  read must see a write to its entry in the same cycle: the DP16KD's ports do that only
  for their own writes (WRITETHROUGH), so a push goes through the read's own port when it
  writes the entry being read (into an empty queue, or the next one) and through the
  other port otherwise: no bypass multiplexer in logic. The RAM's output is slow (no
  output register: ~5.6 ns clock to output), so only fields that are loaded into
  registers go there; the few the stages decide on in the cycle they read them (`fast`:
  whether to skip an entry, when a command ends) stay in LUTRAM."""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data
from amaranth.lib.memory import Memory
from amaranth.utils import exact_log2


def _bits(depth: int) -> int:
    # (a queue of one entry still gets two: a zero-bit address is not valid Verilog; the
    # pointer's wrap bit then picks the entry, which works as well)
    return max(1, exact_log2(depth))


class LutramQueue:
    """A FIFO in a small memory (LUTRAM): a write port and an asynchronous read of the head.

    `wp`/`rp` are pointers with a wrap bit, owned by the caller."""

    def __init__(self, m: Module, name: str, layout, depth: int, wp: Signal, rp: Signal):
        bits = _bits(depth)
        self.mem = Memory(shape=layout, depth=1 << bits, init=[])
        m.submodules[name] = self.mem
        self.w = self.mem.write_port()
        r = self.mem.read_port(domain="comb")
        m.d.comb += [self.w.addr.eq(wp[:bits]), r.addr.eq(rp[:bits])]
        self.head = r.data


class _Write:
    """What a caller drives to push an entry: `en` and `data` (the whole layout)."""

    def __init__(self, name: str, layout):
        self.en = Signal(name=f"{name}_w_en")
        self.data = Signal(layout, name=f"{name}_w_data")


class BramQueue:
    """A FIFO whose `fast` fields are in LUTRAM and the rest in block RAM (module
    docstring); `head` reads as the asynchronous read at the read pointer would, in the
    cycles a stage loads a command from it.

    `wp` and `rp` are pointers with a wrap bit, owned by the caller (the pipeline's
    command pointers double as queue pointers); `wp` must move by exactly `w.en` each
    cycle (one step per push, nothing else), and `rp` by at most one, past an entry the
    stage has loaded (as the command ends), past one whose `skip` field is set, or to `wp`
    (a reset, with no push in that cycle). `skip`: the `fast` field that says the stage
    moves past the entry without loading it. The stage names its command flag with
    `follow(act)`. `init_row`: the block RAM's fields before the first write (default
    zeros)."""

    def __init__(self, m: Module, name: str, layout: data.StructLayout, depth: int, wp: Signal,
                 rp: Signal, skip: str, fast=(), init_row=None):
        assert skip in fast
        bits = _bits(depth)
        self.m, self.name, self.bits, self.wp, self.rp = m, name, bits, wp, rp
        members = dict(layout.members)
        fast_layout = data.StructLayout({k: v for k, v in members.items() if k in fast})
        slow_layout = data.StructLayout({k: v for k, v in members.items() if k not in fast})
        self.w = w = _Write(name, layout)
        self.head = head = Signal(layout, name=f"{name}_head")
        self.skip = head[skip]
        wa_ = wp[:bits]
        self.ra = ra_ = Signal(bits, name=f"{name}_ra")  # the RAM's read address: follow()

        fmem = Memory(shape=fast_layout, depth=1 << bits, init=[])
        m.submodules[f"{name}_fast"] = fmem
        fw, fr = fmem.write_port(), fmem.read_port(domain="comb")
        m.d.comb += [fw.addr.eq(wa_), fw.en.eq(w.en), fr.addr.eq(rp[:bits])]
        for k in fast:
            m.d.comb += [fw.data[k].eq(w.data[k]), head[k].eq(fr.data[k])]

        # (yosys would put a memory this shallow in LUTRAM: ram_style asks for block RAM)
        init = [init_row] * (1 << bits) if init_row else []
        self.mem = mem = Memory(shape=slow_layout, depth=1 << bits, init=init, attrs={"ram_style": "block"})
        m.submodules[name] = mem
        other = mem.write_port()   # a push into an entry not being read
        own = mem.write_port()     # a push into the entry being read: the read's port, written through
        r = mem.read_port(transparent_for=(own,))
        # Which port a push takes. yosys merges two write ports it can prove never write in
        # the same cycle back into one (memory_share), and then builds the write-through
        # from registers and a multiplexer per bit (~1 LUT4 a bit: the saving gone). So the
        # read's own port tests the write pointer from a copy of its own, kept inverted
        # (`wpn` is always ~wp: both start at 0 / all ones and move by `en`), which yosys
        # does not see is the same; the other port's test is on wp itself, from which
        # yosys does see that it never writes the entry being read (no collision to handle).
        wpn = Signal(bits, init=(1 << bits) - 1, name=f"{name}_wpn")
        m.d.sync += wpn.eq(wpn - w.en)
        m.d.comb += [
            other.addr.eq(wa_), other.en.eq(w.en & (wa_ != ra_)),
            own.addr.eq(ra_), own.en.eq(w.en & (~wpn == ra_)),
            r.addr.eq(ra_),
        ]
        rd = Signal(slow_layout, name=f"{name}_rd")  # (named: formal/blocks/dma.py ties it to the RAM)
        m.d.comb += rd.eq(r.data)
        for k in slow_layout.members:
            m.d.comb += [other.data[k].eq(w.data[k]), own.data[k].eq(w.data[k]), head[k].eq(rd[k])]

    def follow(self, act: Signal) -> None:
        """`act`: the stage has a command loaded (a register). The RAM reads ahead, at
        rp + 1, while it does, and while the head is an entry to skip; at rp otherwise."""
        ahead = Signal(name=f"{self.name}_ahead", attrs={"keep": 1})
        self.m.d.comb += [
            ahead.eq(act | ((self.rp != self.wp) & self.skip)),
            self.ra.eq(Mux(ahead, self.rp + 1, self.rp)[:self.bits]),
        ]
