"""The campaign: which stream has which index, running streams, and the report.

Stream `index` of master seed `seed` is fully determined by (seed, index): its kind
comes from `CYCLE` (every error class, two raw streams and eight valid streams in each
block of 24 indices, so any long enough range covers everything), its contents from a
random generator seeded with "seed/index". The RTL runs under cocotb
(testbench/difftest/simulator/rtl.py) and writes one JSON line per stream; `Report` turns those
lines into build/difftest.json and the coverage table.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from testbench.argtypes import parse_int
from testbench.pipes import write_whole
from testbench.refmodel import DMA_MAX_BYTES, RefModel

from . import coverage
from .compare import Verdict, compare
from .driver import Observation, execute
from .streams import layout as L
from .streams.gen import Caps, valid_stream
from .streams.malformed import ERROR_CLASSES, malformed_stream
from .streams.raw import raw_stream
from .streams.stream import Stream, wrapped

CYCLE: tuple[str, ...] = tuple(ERROR_CLASSES) + ("raw", "raw") + ("valid",) * 8
DEFAULT_SEED = 20240605


def master_seed(seed: int | str | None = None) -> int:
    """The campaign seed: the argument, else $GPUCOSIM_SEED, else a fixed default."""
    if seed is None:
        seed = os.environ.get("GPUCOSIM_SEED") or DEFAULT_SEED
    return parse_int(seed) if isinstance(seed, str) else int(seed)


def plan(index: int) -> tuple[str, int]:
    """(kind: an error class, "raw" or "valid"; how many of that kind came before)."""
    kind = CYCLE[index % len(CYCLE)]
    per = CYCLE.count(kind)
    before = CYCLE[:index % len(CYCLE)].count(kind)
    return kind, (index // len(CYCLE)) * per + before


def make_stream(seed: int, index: int, caps: Caps) -> Stream:
    kind, case = plan(index)
    rng = random.Random(f"gpucosim-difftest/{seed}/{index}")
    if kind in ERROR_CLASSES:
        if ERROR_CLASSES[kind].needs_dma and not caps.dma:
            s = valid_stream(rng, index, seed, caps)
            s.skipped = kind
            s.notes.append(f"error class {kind} skipped (the device reports CAPS.DMA = 0): a valid stream "
                           f"runs in its slot")
            return s
        return malformed_stream(rng, index, seed, caps, kind, case)
    if kind == "raw":
        return raw_stream(rng, index, seed, caps)
    return valid_stream(rng, index, seed, caps)


def new_model(caps: Caps, trace=None, mmio_cycles: int | None = None) -> RefModel:
    kw = {} if mmio_cycles is None else {"mmio_cycles": mmio_cycles}
    # (the engines the RTL has, both CP queues and the SDMA, so QUEUE_CAPS and the register map agree)
    # Plain zeroed memory, not the model's default memfd (which lets a KMD map buffers, and
    # whose pages are made on first read): a stream reads all of it at least twice (a
    # "mark", the compare), 1.5 ms more per stream from the memfd.
    return RefModel(mem=np.zeros(L.MEM_SIZE, dtype=np.uint8), ib_levels=caps.ib_levels, dma=caps.dma,
                    dma_max_bytes=caps.dma_max_bytes, data_width=8 * caps.bus_bytes, trace=trace, **kw)


def run_model(stream: Stream, caps: Caps, *, step: bool = False, mmio_cycles: int | None = None,
              name: str = "model") -> tuple[Observation, RefModel]:
    obs = Observation(name)
    m = new_model(caps, obs.trace.append, mmio_cycles)
    execute(stream, m, step=step, obs=obs)
    return obs, m


def read_caps(dev) -> Caps:
    """What the device reports in CAPS (after the driver's probe has accepted it)."""
    from kmd_model import regs
    from kmd_model.mmio import Mmio

    io = Mmio(dev)
    io.probe()
    c = io.fields(regs.CAPS)
    dma = bool(c["DMA"])
    log2 = c.get("DMA_MAX_LOG2", 0)  # a field of newer register maps
    return Caps(ib_levels=c["IB_LEVELS"], dma=dma, dma_max_bytes=(1 << log2) if dma and log2 else DMA_MAX_BYTES,
                bus_bytes=1 << c["BUS_BYTES_LOG2"])


def model_caps(dma: bool | None = None, data_width: int = 64) -> Caps:
    """The caps of the reference model as constructed by default (optionally without DMA)."""
    kw = {} if dma is None else {"dma": dma}
    return read_caps(RefModel(L.MEM_SIZE, data_width=data_width, **kw))


def replay_command(sim: str, seed: int, index: int, step: bool = False) -> str:
    return f"python -m testbench.difftest --sim {sim} --seed {seed} --replay {index}" + (" --step" if step else "")


def record(stream: Stream, v: Verdict, sim: str, wall: float, rtl: Observation, model: Observation) -> dict:
    return {
        "index": stream.index, "sim": sim, "kind": stream.kind, "class": stream.error_class,
        "variant": stream.variant, "skipped": stream.skipped, "ok": v.ok, "outcome": model.status,
        "rtl_outcome": rtl.status, "diffs": v.summary(), "first_packet": v.first_packet,
        "bins": sorted(list(b) for b in stream.bins), "wall": round(wall, 4),
        "idle_after": max(rtl.idle_after, default=None), "replay": "" if v.ok else replay_command(sim, stream.seed,
                                                                                                   stream.index),
    }


def explain(stream: Stream, v: Verdict, rtl: Observation, model: Observation, sim: str) -> str:
    """The long story of one stream (a replay's): listing with the culprit marked,
    differences, traces; wrapped as `--list` is (its action list was one line of 11,000
    characters)."""
    mark = None
    if v.first_n is not None and stream.kind != "raw" and v.first_n < len(stream.packets):
        mark = stream.packets[v.first_n]
    out = [stream.listing(mark=mark), ""]
    out.append(f"outcome: model {model.status}, {sim} {rtl.status}; cycles from error/soft reset to idle on "
               f"{sim}: {rtl.idle_after}")
    if v.ok:
        out.append(f"{sim} and the model agree.")
    else:
        out.append(f"MISMATCH between {sim} and the model:")
        out += [f"  {line}" for line in v.checks + v.diffs]
        out.append(f"first differing packet: {v.first_packet}")
        out.append(f"replay: {replay_command(sim, stream.seed, stream.index)}")
    out.append("packets the model executed (in order):")
    out += [f"  {line}" for line in model.trace[:200]]
    if len(model.trace) > 200:
        out.append(f"  ... {len(model.trace) - 200} more")
    return wrapped("\n".join(out))


# ---------------------------------------------------------------------------- model-only runs

def run_model_pair(seed: int, indices: Iterable[int], caps: Caps, *, step: bool = False,
                   verbose: bool = False, on_record=None) -> list[dict]:
    """Each stream on the model and on a second model with other MMIO timing: the
    generator's own check that what it draws is timing-independent (no simulator)."""
    out = []
    for index in indices:
        stream = make_stream(seed, index, caps)
        t0 = time.perf_counter()
        a, ma = run_model(stream, caps, step=step)
        b, mb = run_model(stream, caps, step=step, mmio_cycles=3, name="model2")
        v = compare(stream, b, a, mb.mem, ma.mem)
        rec = record(stream, v, "model", time.perf_counter() - t0, b, a)
        if verbose:
            print(explain(stream, v, b, a, "model2"))
        out.append(rec)
        if on_record:
            on_record(rec)
    return out


# ---------------------------------------------------------------------------- the report

@dataclass
class Report:
    seed: int
    caps: dict[str, Caps] = field(default_factory=dict)  # by simulator
    seconds: dict[str, float] = field(default_factory=dict)
    records: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    multi: list[dict] = field(default_factory=list)  # multi-queue streams (testbench/difftest/multi/)
    multi_seconds: dict[str, float] = field(default_factory=dict)

    def add(self, recs: Iterable[dict]) -> None:
        for r in recs:
            (self.multi if r.get("family") == "multi" else self.records).append(r)

    @property
    def failures(self) -> list[dict]:
        return [r for r in self.records + self.multi if not r["ok"]]

    def multi_json(self) -> dict | None:
        """The multi-queue streams: cases and mismatches per kind, the codes each error
        class planted (and the model and RTL both stopped with), per simulator."""
        from . import multi

        recs = self.multi
        if not recs:
            return None
        kinds = {}
        for kind in multi.PLAN:
            mine = [r for r in recs if r["kind"] == kind]
            e = {"cases": len(mine), "mismatches": sum(not r["ok"] for r in mine)}
            if kind in multi.ERROR_CLASSES:
                codes = Counter(v for r in mine for st in r.get("codes", {}).values() for v in st.values())
                e["codes"] = dict(sorted(codes.items()))
                e["doc"] = multi.ERROR_CLASSES[kind]
            kinds[kind] = e
        sims = {}
        for sim in sorted({r["sim"] for r in recs}):
            mine = [r for r in recs if r["sim"] == sim]
            secs = self.multi_seconds.get(sim)
            sims[sim] = {"streams": len(mine), "mismatches": sum(not r["ok"] for r in mine),
                         "seconds": round(secs, 1) if secs else None,
                         "streams_per_second": round(len(mine) / secs, 2) if secs else None,
                         "cycles": sum(r.get("cycles", 0) for r in mine),
                         "indices": [min(r["index"] for r in mine), max(r["index"] for r in mine)]}
        return {"streams": len(recs), "mismatches": sum(not r["ok"] for r in recs), "kinds": kinds,
                "error_classes": {k: v for k, v in kinds.items() if k in multi.ERROR_CLASSES},
                "simulators": sims, "compared": multi.COMPARED}

    def hits(self) -> Counter:
        c: Counter = Counter()
        for r in self.records:
            for b in r["bins"]:
                c[tuple(b)] += 1
        return c

    def any_caps(self) -> Caps:
        return next(iter(self.caps.values()), Caps())

    def to_json(self) -> dict:
        caps = self.any_caps()
        recs = self.records
        classes = {}
        for name, ec in ERROR_CLASSES.items():
            mine = [r for r in recs if r["class"] == name]
            e = {"cases": len(mine), "mismatches": sum(not r["ok"] for r in mine), "code": ec.code or "timeout",
                 "doc": ec.doc}
            if ec.needs_dma and not caps.dma:
                e["skipped"] = f"the device reports CAPS.DMA = 0 ({sum(r['skipped'] == name for r in recs)} slots " \
                               f"ran valid streams)"
            classes[name] = e
        sims = {}
        for sim in sorted({r["sim"] for r in recs}):
            mine = [r for r in recs if r["sim"] == sim]
            secs = self.seconds.get(sim)
            c = self.caps.get(sim)
            sims[sim] = {"streams": len(mine), "mismatches": sum(not r["ok"] for r in mine),
                         "seconds": round(secs, 1) if secs else None,
                         "streams_per_second": round(len(mine) / secs, 2) if secs else None,
                         "indices": [min(r["index"] for r in mine), max(r["index"] for r in mine)],
                         "caps": c.__dict__ if c else None}
        cov, _ = coverage.report(self.hits(), caps)
        return {
            "seed": self.seed,
            "streams": len(recs),
            "mismatches": len(self.failures),
            "malformed_cases": sum(r["kind"] == "malformed" for r in recs),
            "error_classes": classes,
            "simulators": sims,
            "kinds": dict(Counter(r["kind"] for r in recs)),
            "raw_outcomes": dict(Counter(r["outcome"] for r in recs if r["kind"] == "raw")),
            "max_idle_after_error": max((r["idle_after"] for r in recs if r["idle_after"] is not None), default=None),
            "dma": "generated" if caps.dma else "skipped: the device reports CAPS.DMA = 0, so DMA_DATA streams "
                                                "and the dma_byte_count class are not run",
            "failures": [{k: r.get(k, "") for k in ("sim", "index", "kind", "class", "variant", "first_packet",
                                                    "diffs", "replay")} for r in self.failures[:100]],
            "coverage": cov,
            "multi_queue": self.multi_json(),
            "notes": self.notes,
        }

    def write(self, path: Path) -> dict:
        data = self.to_json()
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, json.dumps(data, indent=1) + "\n")
        return data

    def text(self) -> str:
        d = self.to_json()
        lines = [f"difftest: seed {self.seed}, {d['streams']} streams, {d['mismatches']} mismatch(es)"]
        mq = d["multi_queue"]
        if mq:
            lines.append(f"  multi-queue streams: {mq['streams']}, {mq['mismatches']} mismatch(es); " + ", ".join(
                f"{k} {v['cases']}" + (f" ({v['mismatches']} bad)" if v["mismatches"] else "")
                for k, v in mq["kinds"].items()))
            for sim, s in mq["simulators"].items():
                rate = f", {s['seconds']} s ({s['streams_per_second']} streams/s)" if s["seconds"] else ""
                lines.append(f"    {sim}: {s['streams']} multi-queue streams, {s['cycles']} cycles{rate}")
            lines.append("    codes: " + "; ".join(f"{k} " + ", ".join(f"{c} {n}" for c, n in v["codes"].items())
                                                 for k, v in mq["error_classes"].items()))
        if not self.records:  # a multi-queue campaign alone: nothing of the CP campaign to show
            lines += [f"  MISMATCH {f['sim']} multi stream {f['index']} ({f['kind']} {f['variant']}): "
                      + "; ".join(f["diffs"][:4]) + f"\n    replay: {f['replay']}" for f in self.failures[:20]]
            return "\n".join(lines + self.notes)
        for sim, s in d["simulators"].items():
            rate = f", {s['seconds']} s ({s['streams_per_second']} streams/s)" if s["seconds"] else ""
            lines.append(f"  {sim}: {s['streams']} streams (indices {s['indices'][0]}..{s['indices'][1]}){rate}")
        lines.append(f"  kinds: {d['kinds']}; malformed cases: {d['malformed_cases']}")
        lines.append("  error classes: " + ", ".join(
            f"{k} {v['cases']}" + (f" ({v['mismatches']} bad)" if v["mismatches"] else "")
            + (" (skipped)" if "skipped" in v else "") for k, v in d["error_classes"].items()))
        if d["raw_outcomes"]:
            lines.append(f"  raw stream outcomes: {d['raw_outcomes']}")
        if d["max_idle_after_error"] is not None:
            lines.append(f"  slowest error/soft reset to idle: {d['max_idle_after_error']} cycles")
        if not self.any_caps().dma:
            lines.append("  DMA: " + d["dma"])
        for f in self.failures[:20]:
            lines.append(f"  MISMATCH {f['sim']} stream {f['index']} ({f['kind']} {f['class']} {f['variant']})".rstrip())
            if f.get("first_packet"):
                lines.append(f"    first differing packet: {f['first_packet']}")
            for x in f["diffs"][:6]:
                lines.append(f"    {x}")
            lines.append(f"    replay: {f['replay']}")
        if len(self.failures) > 20:
            lines.append(f"  ... {len(self.failures) - 20} more mismatches in the JSON report")
        lines += self.notes
        _, cov = coverage.report(self.hits(), self.any_caps())
        return "\n".join(lines) + "\n" + cov


# ---------------------------------------------------------------------------- progress

class Progress:
    """A one-line progress bar on stderr (a line every 10% when not a terminal)."""

    def __init__(self, total: int, label: str = "difftest", stream=None):
        self.total, self.label = total, label
        self.out = stream or sys.stderr
        self.tty = self.out.isatty()
        self.t0 = time.monotonic()
        self.last = -1

    def update(self, done: int, bad: int) -> None:
        frac = done / self.total if self.total else 1.0
        step = int(frac * 10)
        if not self.tty and step == self.last and done < self.total:
            return
        self.last = step
        el = time.monotonic() - self.t0
        rate = done / el if el > 0 else 0.0
        eta = (self.total - done) / rate if rate > 0 else 0
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        msg = (f"{self.label} [{bar}] {done}/{self.total} streams, {bad} mismatch(es), {rate:.1f}/s, "
               f"ETA {int(eta) // 60}m{int(eta) % 60:02d}s")
        self.out.write(("\r" + msg) if self.tty else (msg + "\n"))
        self.out.flush()

    def close(self) -> None:
        if self.tty:
            self.out.write("\n")
            self.out.flush()
