"""The DMA engine's small queues: FIFOs whose head reads like an asynchronous read at the
read pointer.

- `LutramQueue`: LUTRAM, read asynchronously (wq, bq in write.py: their heads drive the
  bus's W and B handshakes the cycle they are read).
- `BramQueue`: the command queues (qa, qx, qw: commands.py), mostly in block RAM. A 16x4
  LUTRAM costs 6 logic cells, and these three are 65 of them in each DMA engine (~390
  cells, with most of the part's block RAMs unused). The head keeps its timing: the RAM's
  synchronous read is addressed by the read pointer's *next* value (`Pointer.next`, the D
  input of its register), so its output in cycle t is mem[rp] as the asynchronous read of
  cycle t gave it, provided the read sees a write to the same entry in the same cycle.
  The DP16KD's ports do that only for their own writes (WRITETHROUGH), so a push goes
  through the read's own port when it writes the entry being read next (into an empty
  queue) and through the other port otherwise: no bypass multiplexer in logic. The
  RAM's output is slow (no output register: ~5.6 ns clock to output), so only fields that
  are loaded into registers go there; the few the stages decide on in the cycle they read
  them (`fast`: whether to skip an entry, when a command ends), on which the read
  pointer's next value and so the RAM's address depend, stay in LUTRAM."""

from __future__ import annotations

from amaranth.hdl import Module, Signal
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


class Pointer:
    """A queue pointer register whose next value is a signal of its own.

    Drive `next` with comb assignments where the register would have been assigned in
    the sync domain (the last one wins, as it would have); `q` follows it a cycle later."""

    def __init__(self, m: Module, width: int, name: str):
        self.q = Signal(width, name=name)
        self.next = Signal(width, name=f"{name}_next")
        m.d.comb += self.next.eq(self.q)  # (first, so any later assignment overrides it)
        m.d.sync += self.q.eq(self.next)


class _Write:
    """What a caller drives to push an entry: `en` and `data` (the whole layout)."""

    def __init__(self, name: str, layout):
        self.en = Signal(name=f"{name}_w_en")
        self.data = Signal(layout, name=f"{name}_w_data")


class BramQueue:
    """A FIFO whose `fast` fields are in LUTRAM and the rest in block RAM (module
    docstring); `head` reads as the asynchronous read at the read pointer would.

    `wp` is a pointer with a wrap bit, `rp` a `Pointer`, both owned by the caller (the
    pipeline's command pointers double as queue pointers); `wp` must move by exactly
    `w.en` each cycle (one step per push, nothing else). `init_row`: the block RAM's
    fields before the first write (default zeros)."""

    def __init__(self, m: Module, name: str, layout: data.StructLayout, depth: int, wp: Signal,
                 rp: Pointer, fast=(), init_row=None):
        bits = _bits(depth)
        members = dict(layout.members)
        fast_layout = data.StructLayout({k: v for k, v in members.items() if k in fast})
        slow_layout = data.StructLayout({k: v for k, v in members.items() if k not in fast})
        self.w = w = _Write(name, layout)
        self.head = head = Signal(layout, name=f"{name}_head")
        wa_ = wp[:bits]
        ra_ = rp.next[:bits]

        if fast:
            fmem = Memory(shape=fast_layout, depth=1 << bits, init=[])
            m.submodules[f"{name}_fast"] = fmem
            fw, fr = fmem.write_port(), fmem.read_port(domain="comb")
            m.d.comb += [fw.addr.eq(wa_), fw.en.eq(w.en), fr.addr.eq(rp.q[:bits])]
            for k in fast:
                m.d.comb += [fw.data[k].eq(w.data[k]), head[k].eq(fr.data[k])]

        # (yosys would put a memory this shallow in LUTRAM: ram_style asks for block RAM)
        init = [init_row] * (1 << bits) if init_row else []
        self.mem = mem = Memory(shape=slow_layout, depth=1 << bits, init=init, attrs={"ram_style": "block"})
        m.submodules[name] = mem
        other = mem.write_port()   # a push into an entry not read next
        own = mem.write_port()     # a push into the entry read next: the read's port, written through
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
