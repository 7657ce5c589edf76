"""A command cut into AXI bursts: the walk the AR issuer (read.py) and the AW issuer
(write.py) each make over their side of a command.

Bursts are INCR, bus-aligned, at most `max_burst_beats` long and split at
min(max_burst_beats · bus bytes, 4 KiB)-aligned boundaries, so they never cross 4 KiB.
The first burst of a command is worked out as the command is queued; after it every
burst starts on a boundary, so the next one is a subtraction of the boundary size."""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal


class BurstWalk:
    """A command cut into bursts (AR or AW): the current burst's address (the
    command's start plus an offset, so loading a command needs no multiplexer),
    length and whether it is the command's last, and `left`, the beats after it − 1,
    plus bnd_beats (so the first burst needs one addition and no subtraction).

    Its signals are named `<prefix>_start` and so on, in the engine's own module."""

    def __init__(self, m: Module, s, prefix: str):
        self.m = m
        self.bnd_beats, self.bnd_bits, self.cw = s.bnd_beats, s.bnd_bits, s.cw
        AW, lb, cw, MB = s.take("AW lb cw MB")
        self.start = Signal(AW - lb, name=f"{prefix}_start")
        self.off = Signal(cw, name=f"{prefix}_off")
        self.addr = Signal(AW - lb, name=f"{prefix}_addr")
        m.d.comb += self.addr.eq(self.start + self.off)
        self.n = Signal(range(MB + 1), name=f"{prefix}_n")
        self.last = Signal(name=f"{prefix}_last")
        self.left = Signal(cw + 1, name=f"{prefix}_left")

    @staticmethod
    def last_beat(nbytes, off, lb):
        """(off + nbytes − 1) >> lb: the beat, counted from off's beat 0, of the last of
        nbytes bytes from byte off. One carry chain: off − 1 is a few bits."""
        return (nbytes + (off - 1))[lb:]

    @staticmethod
    def first(s, addr, nbytes, zero) -> dict:
        """The first burst of a command of `nbytes` bytes from the byte address `addr`: from
        its beat to the boundary, at most its beats. Worked out as the command is queued
        (commands.py), so loading it is a copy: its fields of a queue entry,
        `first_layout`. This lies on the path from where the command comes from into the
        queues' block RAMs, so each field is at most one carry chain from the command, side
        by side, and the short burst's test and length use only the low bits. A zero-length
        command's (`zero`) are never used; they only have to be a valid burst, as every
        row is."""
        bnd_beats, bnd_bits, lb = s.bnd_beats, s.bnd_bits, s.lb
        k = lb + bnd_bits  # the boundary, in bytes: 1 << k
        lo = addr[lb:k] if bnd_bits else Const(0, 1)
        total = BurstWalk.last_beat(nbytes, addr[:k], lb)  # the last beat, from the boundary
        # It lies before the boundary (one burst does it) when addr[:k] + nbytes <= 1 << k:
        # nbytes' high bits zero, and a sum of its low bits
        short = (nbytes[k + 1:] == 0) & ((nbytes[:k + 1] + addr[:k]) <= (1 << k)) & ~zero
        # (its beats, last beat + 1, from the low bits too: (off + nbytes + B − 1) >> lb)
        beats = (nbytes[:k + 1] + (addr[:lb] + ((1 << lb) - 1)))[lb:]
        return {"left": total, "short": short, "n": Mux(short, beats[:bnd_bits + 1], bnd_beats - lo)}

    @staticmethod
    def first_layout(s) -> dict:
        """The queue fields `first` fills, with the widths of the walk's registers."""
        return {"left": s.cw + 1, "short": 1, "n": Signal(range(s.MB + 1)).shape().width}

    def load(self, addr, first):
        """The first burst (`first`: the fields `first` worked out, from a queue entry)."""
        self.m.d.sync += [self.start.eq(addr), self.off.eq(0), self.last.eq(first.short),
                          self.left.eq(first.left), self.n.eq(first.n)]

    def step(self):
        """After a burst: the next starts on a boundary, so it is bnd_beats long
        unless fewer are left."""
        m, bnd_beats, bnd_bits = self.m, self.bnd_beats, self.bnd_bits
        hi = self.left[bnd_bits:]
        short = hi == 1
        m.d.sync += [self.off.eq(self.off + self.n), self.last.eq(short),
                     self.n.eq(Mux(short, self.left[:bnd_bits] + 1, bnd_beats)),
                     self.left[bnd_bits:].eq(hi - 1)]
