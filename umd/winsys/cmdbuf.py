"""Command buffers: a growable command stream made of IBs chained together (radv's way).

Packets go into the current IB, kept as a Python list until the IB is closed. When the
next packet would not fit (leaving room for the chain packet and the padding), the IB
is closed: padded so that it ends on the alignment with an INDIRECT_BUFFER CHAIN
packet, written to its BO, and a new IB is started. The chain packet's IB_SIZE is only
known once the next IB is closed, so it is patched then (radv patches its chain
packets the same way). `end()` pads the last IB and returns the first one, which is all
a submission names: the CP follows the chain.

    cb = CmdBuf(pool.get, ib_size_dw=1024, align_dw=8)
    cb.emit(pm4.write_data(addr, [1, 2, 3]), Label("Queue.write() #1", 1))
    first = cb.end()            # (Ib, size_dw) of the first IB, or None when empty
    ... submit ..., then cb.ibs are the IBs this stream used; cb.reset() starts anew.

With `sdma=True` the stream holds the copy engine's packets (spec/sdma/codec.py): SDMA IBs do
not chain, so a full IB is simply closed (padded with SDMA NOPs) and the submission names
every IB as a chunk of its own, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from spec import pm4, sdma

CHAIN_DW = len(pm4.indirect_buffer(0, 1))


@dataclass(frozen=True)
class Label:
    """The API call that recorded a packet: `text` for messages (GpuError.command), `call`
    the queue's how-manieth call it was (Queue.calls; None for a packet no call recorded,
    the NOP a wait_event's dependency rides on). Code that needs the call (a copy flush's
    split, umd/submit.py) reads `call`, never the text, which may be worded as messages need."""

    text: str
    call: int | None = None
    # what the error of a packet it recorded should add: emit_raw()'s dwords that are the
    # other engine's packets (PM4 on a copy queue, SDMA on a gfx queue) say so
    hint: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return self.text


@dataclass(eq=False)
class Ib:
    """One IB: its memory (a UMD Buffer) and, once closed, its size and chain packet."""

    buf: Any  # umd Buffer: gpu_addr, handle, u32
    size_dw: int = 0
    chain_at: int | None = None  # dword index of the CHAIN packet, if it chains

    @property
    def gpu_addr(self) -> int:
        return self.buf.gpu_addr


class CmdBuf:
    def __init__(self, get_ib: Callable[[], Any], ib_size_dw: int, align_dw: int = 8, sdma: bool = False,
                 put_ib: Callable[[Any], None] | None = None):
        if align_dw < 1 or align_dw & (align_dw - 1):
            raise ValueError(f"CmdBuf: align_dw must be a power of two, not {align_dw!r}")
        if ib_size_dw < self.min_ib_dw(align_dw) or ib_size_dw % align_dw:
            raise ValueError(f"CmdBuf: ib_size_dw must be a multiple of {align_dw} and at least "
                             f"{self.min_ib_dw(align_dw)}, not {ib_size_dw!r}")
        self.get_ib = get_ib
        self.put_ib = put_ib  # an IB taken back unused (rollback), or None: dropped
        self.ib_size_dw = ib_size_dw
        self.align_dw = align_dw
        self.sdma = sdma
        self.pad = _sdma_pad if sdma else pm4.pad
        # room a packet may use in an IB that still has to take padding and a chain packet
        self.max_packet_dw = ib_size_dw - (0 if sdma else CHAIN_DW) - (align_dw - 1)
        self.chains = 0
        self.reset()

    @staticmethod
    def min_ib_dw(align_dw: int) -> int:
        """The smallest IB a stream may use: room for a packet beside the padding and CHAIN."""
        return 4 * (CHAIN_DW + align_dw)

    def reset(self) -> None:
        """Start a new stream (the IBs of the previous one belong to its submission now). The
        first IB is taken when the first packet comes, so an idle queue holds no IB and a
        flush can reclaim before anything new is allocated."""
        self.ibs: list[Ib] = []
        self.cur: list[int] = []
        self.labels: dict[int, Any] = {}  # GPU address of a packet -> the call that recorded it (a Label)
        self._pending_labels: list[tuple[int, Any]] = []  # (dword offset in cur, label)
        self.commands = 0
        self._mark = (0, 0, 0, self.chains)  # where the command being recorded began (begin)
        self._mark_commands = 0  # the count then (take_back undoes a command() after the mark)

    @property
    def dwords(self) -> int:
        """Dwords recorded so far (closed IBs and the current one)."""
        return sum(ib.size_dw for ib in self.ibs[:-1]) + len(self.cur)

    def begin(self) -> None:
        """A command (an API call's packets) starts here: emit's rollback point."""
        self._mark = (len(self.ibs), len(self.cur), len(self._pending_labels), self.chains)
        self._mark_commands = self.commands

    def take_back(self) -> None:
        """Take the command begun at begin() back whole: its packets, the IBs it took, its
        labels and its count. For a call that raises after recording its command but before
        a flush submitted it (download, whose flush timed out: its copy would run into a
        staging buffer nobody reads). After reset() (a flush took the stream) nothing of
        it is left here: nothing to do."""
        self._rollback()
        self.commands = self._mark_commands

    def emit(self, dwords: list[int], label: Any = None) -> None:
        """Append one packet (or a few that must stay together). When taking a new IB fails
        (get_ib raises: a wait for one that timed out, met a failed job, or was interrupted),
        the command's earlier packets are taken back too: the stream is as it was at begin(),
        so a call that raised recorded nothing of itself (its first packets ran at the next
        flush, the app told it had failed)."""
        n = len(dwords)
        if n > self.max_packet_dw:
            raise ValueError(f"CmdBuf: a {n}-dword packet does not fit an IB of {self.ib_size_dw} "
                             f"dwords (at most {self.max_packet_dw})")
        try:
            if not self.ibs:
                self.ibs.append(Ib(self.get_ib()))
            elif len(self.cur) + n > self.max_packet_dw:
                self._chain()
        except BaseException:
            self._rollback()
            raise
        if label is not None:
            self._pending_labels.append((len(self.cur), label))
        self.cur.extend(dwords)

    def _rollback(self) -> None:
        """Back to begin()'s mark: the IBs taken since go back (put_ib), the one it was in is
        open again with the dwords and labels it had (its chain packet and padding dropped)."""
        n_ibs, n_cur, n_labels, chains = self._mark
        if len(self.ibs) == n_ibs:  # (nothing chained since: cut the open IB back)
            del self.cur[n_cur:]
            del self._pending_labels[n_labels:]
            if self.ibs:  # end() may have closed it since (a flush that did not submit): its labels moved
                ib = self.ibs[-1]
                for a in [a for a in self.labels if ib.gpu_addr + 4 * n_cur <= a < ib.gpu_addr + 4 * self.ib_size_dw]:
                    del self.labels[a]
            return
        reopened = self.ibs[n_ibs - 1] if n_ibs else None
        pending = []
        for ib in self.ibs[max(n_ibs - 1, 0):]:  # their labels went to self.labels when they were closed
            end = ib.gpu_addr + 4 * self.ib_size_dw
            for a in [a for a in self.labels if ib.gpu_addr <= a < end]:
                label = self.labels.pop(a)
                off = (a - ib.gpu_addr) // 4
                if ib is reopened and off < n_cur:  # (pending at the mark)
                    pending.append((off, label))
        if reopened is not None:
            self.cur = reopened.buf.u32[:n_cur].tolist()  # (what _close wrote of it: cur as it was)
            reopened.size_dw, reopened.chain_at = 0, None
        else:
            self.cur = []
        self._pending_labels = sorted(pending)
        for ib in self.ibs[n_ibs:]:
            if self.put_ib is not None:
                self.put_ib(ib.buf)
        del self.ibs[n_ibs:]
        self.chains = chains

    def command(self) -> None:
        """Count one API-level command (the flush threshold counts these)."""
        self.commands += 1

    def _close(self, ib: Ib) -> None:
        """Write the current dwords into `ib`, record labels, patch the previous chain."""
        ib.size_dw = len(self.cur)
        ib.buf.u32[:ib.size_dw] = self.cur
        for off, label in self._pending_labels:
            self.labels[ib.gpu_addr + 4 * off] = label
        self._pending_labels = []
        if len(self.ibs) >= 2 and ib is self.ibs[-1] and not self.sdma:
            prev = self.ibs[-2]
            # now that this IB's size is known, the previous IB's CHAIN packet can name it
            # (CHAIN and VALID set, as Mesa's radv_amdgpu_cs_grow chains)
            prev.buf.u32[prev.chain_at:prev.chain_at + CHAIN_DW] = \
                pm4.indirect_buffer(ib.gpu_addr, ib.size_dw, chain=1, valid=1)

    def _chain(self) -> None:
        nxt = Ib(self.get_ib())
        if self.sdma:  # no chaining: close this IB, the next one is a chunk of its own
            self.cur += self.pad(-len(self.cur) % self.align_dw)
            self._close(self.ibs[-1])
            self.ibs.append(nxt)
            self.cur = []
            return
        self.cur += pm4.pad(-(len(self.cur) + CHAIN_DW) % self.align_dw)
        cur = self.ibs[-1]
        cur.chain_at = len(self.cur)
        # IB_SIZE 0 until patched: if it were ever run unpatched, the CP stops with IB_SIZE_ZERO
        self.cur += pm4.indirect_buffer(nxt.gpu_addr, 0, chain=1, valid=1)
        self._close(cur)
        self.ibs.append(nxt)
        self.cur = []
        self.chains += 1

    def end(self) -> Ib | None:
        """Close the stream: pad the last IB, patch the last chain. Returns the first IB
        (with its final size) to submit, or None when nothing was recorded."""
        if not self.ibs:
            return None
        if not self.cur:  # a chain packet cannot point at an empty IB
            self.cur = self.pad(self.align_dw)
        self.cur += self.pad(-len(self.cur) % self.align_dw)
        self._close(self.ibs[-1])
        return self.ibs[0]


def _sdma_pad(n: int) -> list[int]:
    return sdma.pad(n)
