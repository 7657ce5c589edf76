"""A timeline in Chrome's trace-event JSON, the format the Perfetto UI opens.

One track per layer, on simulated time. Timestamps are the simulator's own time: one
device cycle is 10 ns (the RTL's 100 MHz clock; the reference model counts the same
cycles), so an event at 12.34 µs in Perfetto is at 12 340 ns in the waveform. Every
event also carries `cycle` and the wall-clock time of the run in its arguments.

    tl = Timeline("verilator")
    tl.span("ioctl", "CS", start_cycle, end_cycle, {"seq": 3})
    tl.instant("kmd", "doorbell", cycle, {"wptr": "0x40"})
    tl.write("trace.json")          # open it at https://ui.perfetto.dev

Events are kept as small tuples and turned into JSON once, at the end.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbench.pipes import write_whole

from ..inputs import MAX_BYTES

NS_PER_CYCLE = 10  # testbench.sim.cocotb_device.CLOCK_PERIOD_NS (a test keeps them equal)


@dataclass(frozen=True)
class Track:
    key: str
    pid: int
    tid: int
    name: str


CPU, GPU = 1, 2
# In the order Perfetto shows them: one request goes down this list.
TRACKS: dict[str, Track] = {t.key: t for t in (
    Track("umd", CPU, 1, "UMD API"),
    Track("ioctl", CPU, 2, "ioctl"),
    Track("kmd", CPU, 3, "KMD ring + doorbell"),
    Track("fence", CPU, 4, "fences"),
    Track("cp", GPU, 1, "CP packets"),
    Track("cp.hqd1", GPU, 2, "CP packets, queue 1 (CP_HQD1)"),
    Track("bus", GPU, 3, "memory bus (CP)"),
    Track("dma", GPU, 4, "DMA bursts"),
    Track("irq", GPU, 5, "interrupts"),
    Track("sdma", GPU, 6, "SDMA packets (copy engine)"),
    Track("sdma_bus", GPU, 7, "memory bus (SDMA)"),
)}


def cycles_to_us(cycles: float) -> float:
    """Trace timestamps are microseconds; keep them exact to the nanosecond."""
    return round(cycles * NS_PER_CYCLE / 1000, 3)


def wave_time(cycles: int) -> str:
    """Where to look in the waveform (FST/VCD times are in simulator time units)."""
    return f"{cycles * NS_PER_CYCLE} ns"


# The events a timeline keeps: the first million, and no more than the file `gpucosim plot` and
# `disasm` read (gpucosim/inputs.py's MAX_BYTES; write() drops the last ones past it). An
# 11-minute run kept every event: 3.6 GB of memory, a 930 MB file the tools then refused to
# read. A million events are 220 to 280 MB of JSON (an RTL run's, a model run's), around that
# bound: a model run that kept a million wrote a file the tools refused again.
MAX_EVENTS = 1_000_000


class Timeline:
    """Collects events; `write()` produces the JSON. Not thread safe, and need not be:
    the driver thread and cocotb's scheduler never run at the same time."""

    def __init__(self, backend: str, *, app: str = ""):
        self.backend = backend
        self.app = app
        self.wall0 = time.perf_counter()
        self.events: list[tuple] = []  # (track, ph, name, start_cycle, end_cycle, args)
        self.metadata: dict[str, Any] = {}
        self.dropped = 0  # events after the first MAX_EVENTS, not kept
        self.metadata_events = 0  # the "M" events naming processes and tracks (to_json's last)

    def wall_ms(self) -> float:
        """Wall time since the timeline started, for event arguments."""
        return round((time.perf_counter() - self.wall0) * 1000, 3)

    def span(self, track: str, name: str, start: float, end: float, args: dict | None = None) -> None:
        """A slice from cycle `start` to cycle `end` (ph "X")."""
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        a = {"wall_ms": self.wall_ms()}
        if args:
            a.update(args)
        self.events.append((track, "X", name, start, max(end, start), a))

    def instant(self, track: str, name: str, at: float, args: dict | None = None) -> None:
        """A point in time on one track (ph "i")."""
        if len(self.events) >= MAX_EVENTS:
            self.dropped += 1
            return
        a = {"wall_ms": self.wall_ms()}
        if args:
            a.update(args)
        self.events.append((track, "i", name, at, at, a))

    def __len__(self) -> int:
        return len(self.events)

    # ------------------------------------------------------------------ output

    def to_json(self) -> dict:
        procs = {CPU: "CPU: app, UMD, KMD", GPU: f"GPU: {self.backend}"}
        meta: list[dict] = []
        for pid, name in procs.items():
            meta.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            meta.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                         "args": {"sort_index": pid}})
        # by time; at equal times the longer slice first, so nesting reads parent-first
        events = sorted(self.events, key=lambda e: (e[3], -(e[4] - e[3])))
        lanes = _lanes(events)
        for t in TRACKS.values():
            for lane in range(max((ln for (key, ln) in lanes.values() if key == t.key), default=0) + 1):
                tid = _tid(t, lane)
                name = t.name if not lane else f"{t.name} ({lane + 1})"
                meta.append({"ph": "M", "name": "thread_name", "pid": t.pid, "tid": tid, "args": {"name": name}})
                meta.append({"ph": "M", "name": "thread_sort_index", "pid": t.pid, "tid": tid,
                             "args": {"sort_index": tid}})
        self.metadata_events = len(meta)  # (what `gpucosim run` says it wrote counts them apart)
        out = []
        for i, (track, ph, name, start, end, args) in enumerate(events):
            t = TRACKS[track]
            ev = {"name": name, "cat": track, "ph": ph, "ts": cycles_to_us(start), "pid": t.pid,
                  "tid": _tid(t, lanes.get(i, (track, 0))[1]), "args": {"cycle": int(start), **args}}
            if ph == "X":
                ev["dur"] = round(cycles_to_us(end) - cycles_to_us(start), 3)
                ev["args"]["cycles"] = int(end - start)
            else:
                ev["s"] = "t"
            out.append(ev)
        return {
            "traceEvents": meta + out,
            "displayTimeUnit": "ns",
            "otherData": {"generator": "gpucosim", "backend": self.backend, "app": self.app,
                          "ns_per_cycle": NS_PER_CYCLE, **self.metadata,
                          **({"dropped_events": self.dropped} if self.dropped else {})},
        }

    def write(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # (C encoder: json.dump is not; whole or not at all, into a pipe such as /dev/stdout,
        # through a symlink to its target)
        write_whole(path, self.encoded())
        return path

    def encoded(self) -> str:
        """The JSON, at most MAX_BYTES: the events past what fits are dropped (counted in
        `dropped`), so that gpucosim's own tools read every timeline it writes."""
        while True:
            text = json.dumps(self.to_json(), separators=(",", ":"), default=str)  # (ASCII: chars are bytes)
            if len(text) <= MAX_BYTES or not self.events:
                return text
            keep = min(len(self.events) - 1, int(len(self.events) * MAX_BYTES * 0.98 / len(text)))
            self.dropped += len(self.events) - keep
            del self.events[keep:]


def _tid(t: Track, lane: int) -> int:
    """Lane 0 is the track itself; more lanes of a track sort right after it."""
    return t.tid if lane == 0 else t.tid * 100 + lane


def _lanes(events: list[tuple]) -> dict[int, tuple[str, int]]:
    """For each slice (index into `events`, sorted by start), its (track, lane). Perfetto
    draws the slices of one track as a stack: they must nest or not touch, so a slice that
    partly overlaps another (a DMA burst under way while the next one starts, two fences
    in flight) goes to the first lane of its track where it nests or stands alone."""
    open_: dict[str, list[list[float]]] = {}  # track -> per lane, the ends of the slices still open
    out = {}
    for i, (track, ph, _name, start, end, _args) in enumerate(events):
        if ph != "X":
            continue
        stacks = open_.setdefault(track, [])
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:  # alone, or inside the innermost open slice
                break
        else:
            lane = len(stacks)
            stacks.append([])
        stacks[lane].append(end)
        out[i] = (track, lane)
    return out


def overlaps(trace: dict) -> list[str]:
    """Slices that partly overlap another on the same track (Perfetto would drop them)."""
    bad = []
    by_track: dict[tuple, list] = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":  # in whole nanoseconds: the microsecond floats do not add up exactly
            t0 = round(e["ts"] * 1000)
            by_track.setdefault((e["pid"], e["tid"]), []).append((t0, t0 + round(e.get("dur", 0) * 1000), e["name"]))
    for key, spans in by_track.items():
        stack: list[tuple] = []
        for s0, s1, name in sorted(spans, key=lambda x: (x[0], -(x[1] - x[0]))):
            while stack and stack[-1][1] <= s0:
                stack.pop()
            if stack and s1 > stack[-1][1]:
                bad.append(f"track {key}: {name} [{s0}, {s1}) overlaps {stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]})")
            stack.append((s0, s1, name))
    return bad


def load(path: str | os.PathLike) -> dict:
    """A trace file written by `Timeline.write` (or any Chrome trace JSON). OSError, the JSON
    errors, and ..inputs.InputError for a file too large or nested too deep to read."""
    from ..inputs import loads, read_bytes

    data = loads(read_bytes(str(path)), str(path))
    if isinstance(data, list):  # the bare-array flavour of the format
        data = {"traceEvents": data}
    return data
