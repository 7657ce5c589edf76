"""The copy engine's packets on the RTL timeline: the "SDMA packets (copy engine)" track.

The reference model emits one instant per SDMA packet (it has no time to spend); on the
RTL the SDMA parser's state machine (rtl/sdma/engine.py, FSM "sdma") says when a packet
starts and ends, so each packet is a slice from its header leaving RUN to DONE, with an
INDIRECT_BUFFER's slice holding the packets of its IB. The engine's memory traffic is on
its own track ("memory bus (SDMA)", hwtrace.py's BusMonitor).

A COPY_LINEAR or CONSTANT_FILL slice ends when the packet hands its transfer to the
SDMA's DMA engine, not when the last byte lands: the parser may take the next packet
while the transfer runs (hardware.md), and the bursts show the rest.
"""

from __future__ import annotations

from typing import Callable

from spec.sdma import packets as sp

from .timeline import Timeline, wave_time

TRACK = "sdma"
# the parser's states between packets: leaving them for another state starts a packet
BETWEEN = ("RUN", "RING_DONE", "RPTR_WAIT")
ERRORS = ("ERR_DRAIN", "ERR_IH", "ERROR")


class SdmaMonitor:
    """Packets the SDMA engine executes, as nested slices (an IB holds its packets)."""

    def __init__(self, sdma, states: dict[int, str], timeline: Timeline | None, now: Callable[[], int]):
        self.sdma = sdma
        self.states = states
        self.tl = timeline
        self.now = now
        self.stack: list[tuple[str, int, dict, bool]] = []  # (name, start, args, is an IB)
        self.packets = 0
        self.stopped = False

    def tasks(self) -> list:
        from .hwtrace import _int, _watch

        self._st = self.sdma.sdma_state
        self._ps = self.states.get(_int(self._st), "RUN")
        return [_watch(self._st, self._wake, self)]

    def _wake(self) -> None:
        from .hwtrace import _int

        s = self.states.get(_int(self._st), "?")
        if s != self._ps:
            self.step(self._ps, s)
            self._ps = s

    def _header(self) -> tuple[str, dict]:
        from .hwtrace import _int

        hdr, off, in_ib = _int(self.sdma.hdr), _int(self.sdma.hdr_off), _int(self.sdma.in_ib)
        p = sp.by_op.get((hdr & 0xFF, (hdr >> 8) & 0xFF))
        name = p.name if p else f"bad header {hdr:#010x}"
        return name, {"where": f"{'IB' if in_ib else 'ring'}+{4 * off:#06x}", "header": f"{hdr:#010x}"}

    def step(self, ps: str, s: str) -> None:
        t = self.now()
        if s == "RESET":
            self._close_all(t, "queue reset")
            self._instant("queue reset", t)
            return
        if s in ERRORS:
            if s == "ERR_DRAIN" and ps not in ERRORS:
                if ps == "RUN":  # a bad header: the packet never started
                    name, args = self._header()
                    self._instant(name, t, args)
                self._close_all(t, "SDMA error")
                self._instant("SDMA error", t, {"wave_time": wave_time(t)})
            return
        if ps == "RUN" and s not in BETWEEN:  # a header was taken
            name, args = self._header()
            self.packets += 1
            self.stack.append((name, t, args, name == "INDIRECT_BUFFER"))
            if s == "DONE":  # a one-dword NOP: done in the cycle it was taken
                self._close(t + 1)
            return
        if s == "DONE" and self.stack and not self.stack[-1][3]:
            self._close(t)
        elif s == "RUN" and ps not in BETWEEN and ps != "DONE" and self.stack and not self.stack[-1][3]:
            self._close(t)  # (a packet that returns to RUN without DONE)
        if s == "RING_DONE":  # the ring packet is over: an IB's packet and anything left in it
            self._close_all(t, None)

    def _close(self, t: int, why: str | None = None) -> None:
        name, start, args, _ = self.stack.pop()
        if why:
            args["ended_by"] = why
        if self.tl is not None:
            self.tl.span(TRACK, name, start, max(t, start), args)

    def _close_all(self, t: int, why: str | None) -> None:
        while self.stack:
            self._close(t, why)

    def _instant(self, name: str, t: int, args: dict | None = None) -> None:
        if self.tl is not None:
            self.tl.instant(TRACK, name, t, args)

    def finish(self) -> None:
        self._close_all(self.now(), "end of run")
