"""Lockstep differential testing (testbench/difftest, docs/verification.md).

Model-only tests check the campaign machinery itself: streams are reproducible from
(seed, index), the generator's execution order is the model's, every stream is
timing-independent (two models with different MMIO timing agree), every error class
provokes its CP_ERROR code, and a planted difference is reported at the right packet.

`test_dma_error_after_seven_transfers` keeps a failure the campaign found, cut down.
`test_rtl_matches_model[sim]` is the CI campaign: a range of stream indices per simulator
(Verilator the most, Icarus the next ones), each stream run on the RTL and the model in
one simulator process. Both parts merge into build/difftest.json and the coverage table
build/difftest.txt. GPUCOSIM_SEED picks the master seed (the default is fixed).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import warnings
from collections import Counter

import numpy as np
import pytest

from kmd_model import regs
from spec import ih
from testbench import sim
from testbench.sim.design import gpu_design
from testbench.difftest import campaign as cp
from testbench.difftest.compare import compare, executed
from testbench.difftest.coverage import planned
from testbench.difftest.driver import execute, outside
from testbench.difftest.simulator.runner import run_rtl, split, split_sims
from testbench.difftest.streams import layout as L
from testbench.difftest.streams.gen import Caps
from testbench.difftest.streams.malformed import ERROR_CLASSES
from testbench.difftest.streams.stream import Config, Stream
from testbench.refmodel.snapshot import mem_digest
from tests.difftest.ci_plan import CP, difftest_scope, scope_or_subset

SEED = cp.master_seed()
M32 = 0xFFFF_FFFF


class DifftestReport(UserWarning):
    """Carries the campaign summary and coverage table to the end of a pytest run
    (xdist workers cannot print; warnings reach the summary)."""
DMA, NO_DMA = Caps(dma=True), Caps(dma=False)

# CI: stream index ranges per simulator, make test's subset or the full run (DIFFTEST=full:
# 1250 streams = 50 cases of every error class), tests/difftest/ci_plan.py. Icarus runs
# whole cycles of kinds: it simulates about 10x slower than Verilator.
SCOPE = scope_or_subset()
CI_PLAN = CP[SCOPE]["plan"]
CI_ALONE = CP[SCOPE]["alone"]  # when the other simulator is not selected
# Each simulator's range runs as this many parts, one simulator session each and each its own
# xdist group, so the two workers can share a slow part instead of one of them waiting.
CI_PARTS = CP[SCOPE]["parts"]


def pair(stream: Stream, caps: Caps):
    a, ma = cp.run_model(stream, caps)
    b, mb = cp.run_model(stream, caps, mmio_cycles=3, name="model2")
    return a, ma, b, mb


# ---------------------------------------------------------------------------- the machinery

def test_streams_are_reproducible():
    for i in range(48):
        a, b = cp.make_stream(SEED, i, DMA), cp.make_stream(SEED, i, DMA)
        assert a.listing() == b.listing() and a.bins == b.bins
    assert cp.make_stream(1, 30, DMA).listing() != cp.make_stream(2, 30, DMA).listing()


def _canon(x):
    """`x` as JSON-able data with a fixed order (sets sorted, arrays as lists with their dtype)."""
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return {f.name: _canon(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if isinstance(x, np.ndarray):
        return [str(x.dtype)] + x.tolist()
    if isinstance(x, (list, tuple)):
        return [_canon(y) for y in x]
    if isinstance(x, (set, frozenset)):
        return sorted((_canon(y) for y in x), key=repr)
    if isinstance(x, dict):
        return sorted(([_canon(k), _canon(v)] for k, v in x.items()), key=repr)
    if x is None or isinstance(x, (int, str)):
        return x
    raise TypeError(f"no canonical form for {type(x).__name__}")


# sha256 over indices 0..47 of each (seed, DMA): every Stream field, the model's whole
# Observation and its memory's digest. Recorded on main at a68094e, before the campaign's
# speed-ups (issue 13): they must change nothing the campaign generates or checks. A change
# meant to alter streams or the model updates these (print them with the test's body).
# Updated for PERF_Q0/Q1_DWORDS_FETCHED (two more observed registers, queue 0's left to
# timing after a DMA error as the total is): with those keys left out, the recorded ones.
# Updated for the driver's "stuck" reading PERF_Q0_DWORDS_FETCHED too: its one more MMIO
# read of model time moves the IH entries' timestamps of the 12 streams that wait in a poll
# (wait_timeout, raw, slverr poll_while_waiting); observations, traces and every other byte
# of memory are the old driver's.
STREAM_DIGESTS = {
    (cp.DEFAULT_SEED, True): "c5dbc81288df0dbf9e92307f7c0eab32bfca682813c213086cfc2da79fe06767",
    (cp.DEFAULT_SEED, False): "15acad7ab6222568974705fbb51286c4c438b9e3d83b680ab45aedf7ce17b6fb",
    (1515, True): "1c759f7cb226212d729896768d931e61e31ee731ac632a0e56b4d93d95e6997e",
}


@pytest.mark.parametrize("seed, dma", list(STREAM_DIGESTS), ids=lambda v: str(v))
def test_streams_and_model_runs_are_as_recorded(seed, dma):
    caps = DMA if dma else NO_DMA
    h = hashlib.sha256()
    for i in range(2 * len(cp.CYCLE)):
        s = cp.make_stream(seed, i, caps)
        obs, m = cp.run_model(s, caps)
        h.update(json.dumps([_canon(s), _canon(obs), mem_digest(m.mem)]).encode())
    assert h.hexdigest() == STREAM_DIGESTS[seed, dma]


def test_prefetched_streams_are_the_ones_made_here(monkeypatch):
    """The prefetch server (testbench/difftest/simulator/prefetch.py) hands the simulator the same
    stream, model observation and model memory it would make itself; an answer not there
    in time is computed here and dropped when it comes; no server, no prefetcher."""
    import time

    from testbench.difftest.simulator import prefetch

    monkeypatch.delenv(prefetch.ADDRESS_ENV, raising=False)
    assert prefetch.Prefetcher.connect(DMA, False, 10) is None
    server = prefetch.Server(SEED)
    try:
        for k, v in server.env().items():
            monkeypatch.setenv(k, v)
        end = 2 * len(cp.CYCLE)
        pre = prefetch.Prefetcher.connect(DMA, False, end, 1)  # one ahead
        assert pre.take(0, L.MEM_SIZE) is None  # nothing asked yet: made here
        pre.start(0)
        got = []
        for i in range(1, end):
            if i == 5:  # the simulator made stream 5 itself (its answer late) ...
                time.sleep(0.3)
                assert pre.conn.poll(0), "no answer for stream 5"
                pre.start(i)
                continue
            deadline = time.monotonic() + 30
            while (ready := pre.take(i, L.MEM_SIZE)) is None and time.monotonic() < deadline:
                time.sleep(0.01)  # (the simulator would run stream i - 1 meanwhile)
            assert ready is not None, f"stream {i} not prefetched"
            stream, obs, mem = ready  # ... and its answer dropped here, at stream 6
            s = cp.make_stream(SEED, i, DMA)
            local, m = cp.run_model(s, DMA)
            assert _canon(stream) == _canon(s) and _canon(obs) == _canon(local), i
            assert np.array_equal(mem, m.mem), i
            got.append(i)
            pre.start(i)
        pre.close()
        assert got == [i for i in range(1, end) if i != 5]
    finally:
        server.close()
    # (a thread left in accept() could take the next server's socket, reusing the file
    # descriptor, and turn its simulator away with the old key)
    assert not server.acceptor.is_alive()


def test_plan_visits_every_kind():
    kinds = Counter(cp.plan(i)[0] for i in range(len(cp.CYCLE)))
    assert set(kinds) == set(ERROR_CLASSES) | {"valid", "raw"}
    assert len(ERROR_CLASSES) >= 10
    # the how-many-th case of a class counts up by one per cycle
    assert [cp.plan(i * len(cp.CYCLE) + 3)[1] for i in range(4)] == [0, 1, 2, 3]
    assert split(10, 7, 3) == [(10, 3), (13, 2), (15, 2)]
    assert split_sims(["verilator", "icarus"], 0, 500) == [("verilator", 0, 400), ("icarus", 400, 100)]


def test_master_seed(monkeypatch):
    monkeypatch.setenv("GPUCOSIM_SEED", "0x10")
    assert cp.master_seed() == 16 and cp.master_seed(5) == 5
    monkeypatch.delenv("GPUCOSIM_SEED")
    assert cp.master_seed() == cp.DEFAULT_SEED
    assert cp.replay_command("verilator", 1234, 17) == \
        "python -m testbench.difftest --sim verilator --seed 1234 --replay 17"


@pytest.mark.parametrize("caps", [NO_DMA, DMA], ids=["no_dma", "dma"])
def test_generator_order_is_the_models(caps):
    """The packets a valid stream lists, in order, are exactly those the model runs."""
    for i in range(len(cp.CYCLE) * 6):
        s = cp.make_stream(SEED, i, caps)
        if s.kind != "valid":
            continue
        obs, _ = cp.run_model(s, caps)
        assert [f"{p.where}: {p.text}" for p in s.packets] == obs.trace, f"stream {i}"


@pytest.mark.parametrize("caps", [NO_DMA, DMA], ids=["no_dma", "dma"])
def test_streams_are_timing_independent(caps):
    """Two models with different MMIO timing agree on every stream, and every malformed
    stream ends the way its class says (checked inside compare)."""
    recs = cp.run_model_pair(SEED, range(len(cp.CYCLE) * 12), caps)
    bad = [(r["index"], r["kind"], r["class"], r["diffs"]) for r in recs if not r["ok"]]
    assert not bad
    outcomes = {r["class"]: r["outcome"] for r in recs if r["kind"] == "malformed"}
    for name, ec in ERROR_CLASSES.items():
        if ec.needs_dma and not caps.dma:
            assert name not in outcomes
        else:
            assert outcomes[name] == (f"error {ec.code}" if ec.code else "stuck"), name


def test_step_mode_observes_every_ring_packet():
    s = next(s for i in range(200) if (s := cp.make_stream(SEED, i, DMA)).kind == "valid"
             and sum(p.level == 0 for p in s.packets) >= 4)
    a, ma = cp.run_model(s, DMA, step=True)
    b, mb = cp.run_model(s, DMA, step=True, mmio_cycles=3, name="model2")
    ring = [p for p in s.packets if p.level == 0]
    steps = [e for e in a.events if e[0].startswith("after RING+")]
    assert len(steps) == len(ring) and compare(s, b, a, mb.mem, ma.mem).ok
    b.events[2][1]["PERF_DWORDS_FETCHED"] += 1
    v = compare(s, b, a, mb.mem, ma.mem)
    assert v.first_packet.startswith(f"first difference {steps[2][0]}")


class _PollsThenStuck:
    """A device that only answers register reads, on a script: the CP polls one WAIT_REG_MEM
    after another in IB1 (each `poll` cycles WAITING, then `gap` cycles on to the next,
    7 more dwords parsed), RB_RPTR 0 all along (the ring's INDIRECT_BUFFER has not ended),
    and from `stuck_at` on stays in the last one for good. A read costs 10 cycles."""

    name = "scripted"

    def __init__(self, polls: int, poll: int, gap: int):
        self.t, self.poll, self.gap = 0, poll, gap
        self.stuck_at = 200 + polls * (poll + gap)
        self.mem = np.zeros(L.MEM_SIZE, dtype=np.uint8)
        self.mem_model = None

    def now(self) -> int:
        return self.t

    def delay(self, cycles: int) -> None:
        self.t += cycles

    def parsed(self) -> tuple[int, bool]:
        """(dwords parsed, polling) now."""
        if self.t < 200:
            return 4, False  # fetching the IB
        k, into = divmod(min(self.t, self.stuck_at) - 200, self.poll + self.gap)
        return 4 + 7 * (k + 1), self.t >= self.stuck_at or into < self.poll

    def mmio_read32(self, offset: int) -> int:
        self.t += 10
        parsed, polling = self.parsed()
        if offset == regs.STATUS.addr():
            return regs.STATUS.LEVEL.put(regs.IbLevel.IB1) | regs.STATUS.WAITING.put(int(polling))
        return {regs.PERF_Q0_DWORDS_FETCHED.addr(): parsed, regs.PERF_DWORDS_FETCHED.addr(): parsed}.get(offset, 0)


@pytest.mark.parametrize("poll,gap", [(300, 60), (150, 20), (390, 5)])
def test_stuck_means_one_poll_for_the_kmd_timeout_not_two_polls_of_one_ib(poll, gap):
    """Found by the campaign (seed 20261206, stream 2339, rd_latency 59 with stalls): the
    driver's "stuck" took STATUS.WAITING with the same LEVEL and RB_RPTR KMD_TIMEOUT cycles
    apart for one never-ending WAIT_REG_MEM, but the CP was in IB1's first poll at the first
    look and in a later poll of the same IB at the second (RB_RPTR moves past the
    INDIRECT_BUFFER only when its IB has run). The RTL was soft-reset mid-IB, half a
    WRITE_DATA written, and the campaign reported a mismatch against the model, which had
    reached the stream's last poll. Stuck is one poll for the whole timeout: the dwords
    parsed do not move either."""
    from testbench.difftest.driver import StreamDriver, Observation
    from testbench.difftest.streams.stream import KMD_TIMEOUT

    dev = _PollsThenStuck(polls=20, poll=poll, gap=gap)
    c = Config(L.RING_REGION[0], 6, L.IH_REGION[0], 2, rptr_wb=False, ih_wptr_wb=False)
    obs = Observation(dev.name)
    StreamDriver(Stream(0, 0, "malformed", c), dev, obs).do_stuck()
    assert obs.status == "stuck" and not obs.checks
    assert dev.t >= dev.stuck_at + KMD_TIMEOUT, f"called stuck at cycle {dev.t}, in poll {dev.parsed()}, " \
                                                 f"{dev.stuck_at - dev.t} cycles before the last poll began"


def test_outside():
    assert outside([(0, 10), (20, 30)], [(2, 4), (3, 8), (25, 40)]) == [(0, 2), (8, 10), (20, 25)]
    assert outside([(5, 6)], [(0, 100)]) == []


def test_trace_parsing():
    lines = ["IB1+0x0000: WRITE_DATA  dst_sel=MEMORY addr=0x00040000 data=[0x00000001, 0x00000002, "
             "0x00000003, 0x00000004, 0x00000005, 0x00000006, 0x00000007, 0x00000008, ... +2]",
             "RING+0x0010: RELEASE_MEM  event_type=CACHE_FLUSH_AND_INV_TS_EVENT event_index=END_OF_PIPE "
             "int_sel=SEND_INT_ON_CONFIRM data_sel=TIMESTAMP addr=0x00001000 data=0x00000005",
             "RING+0x0030: RELEASE_MEM  data_sel=NONE addr=0x00002000 data=0x5",
             "RING+0x0040: RELEASE_MEM  addr=0x00003000 data=0x5",  # DATA_32, the default, left out
             "RING+0x0050: DMA_DATA  src=0x00000200 dst=0x00000100 byte_count=77",
             "IB2+0x0000: WAIT_REG_MEM  function=EQ mem_space=MEMORY addr=0x00001000 ref=0x1 mask=0x2"]
    e = executed(lines)
    assert [(x.kind, x.writes, x.irq) for x in e] == [
        ("write", [(0x40000, 0x40028)], False), ("timestamp", [(0x1000, 0x1008)], True),
        ("write", [], False), ("write", [(0x3000, 0x3004)], False), ("dma", [(0x100, 0x100 + 77)], False),
        ("poll", [(0x1000, 0x1004)], False)]


# ---------------------------------------------------------------------------- finding the culprit

def _first(kind: str, cls: str = ""):
    for i in range(len(cp.CYCLE) * 4):
        s = cp.make_stream(SEED, i, DMA)
        if s.kind == kind and s.error_class == cls and len(s.packets) > 6:
            return s
    raise AssertionError("no such stream")  # pragma: no cover


def test_a_memory_difference_names_its_packet():
    s = _first("valid")
    a, ma, b, mb = pair(s, DMA)
    k, p = next((k, p) for k, p in enumerate(s.packets) if k >= 3 and p.writes and p.writes[0][1] > p.writes[0][0]
                and not any(t[0] <= p.writes[0][0] < t[1] for t in s.ts_ranges))
    addr = p.writes[0][1] - 1
    later = [q for q in s.packets[k + 1:] for x, y in q.writes if x <= addr < y]
    if later:  # a later packet overwrote it: that one is the culprit then
        p = s.packets[s.packets.index(later[-1])]
    mb.mem[addr] ^= 0x5A
    v = compare(s, b, a, mb.mem, ma.mem)
    assert not v.ok and v.diffs[0].startswith(f"memory [{addr:#x}, {addr + 1:#x})")
    # the earliest packet whose writes cover the byte is named
    first = next(q for q in s.packets if any(x <= addr < y for x, y in q.writes))
    assert v.first_packet.startswith(f"{first.where}: {first.text}")
    text = cp.explain(s, v, b, a, "model2")
    assert ">> " in text and "replay: python -m testbench.difftest --sim model2" in text


def test_a_stray_write_is_called_one():
    s = _first("valid")
    a, ma, b, mb = pair(s, DMA)
    mb.mem[L.CANARY_REGION[0] + 0x800] = 1
    v = compare(s, b, a, mb.mem, ma.mem)
    assert "a stray write" in v.first_packet


def test_a_different_error_names_the_faulting_packet():
    s = _first("malformed", "fence_misaligned")
    a, ma, b, mb = pair(s, DMA)
    ev = b.events[0][1]
    ev["CP_ERROR"] = regs.CP_ERROR.CODE.put(regs.CpError.BUS_SLVERR) | (ev["CP_ERROR"] & ~regs.CP_ERROR.CODE.mask)
    v = compare(s, b, a, mb.mem, ma.mem)
    faulty = next(p for p in s.packets if p.note == "faulty")
    assert v.first_packet.startswith("the CP stopped differently (error): model FENCE_MISALIGNED")
    assert "rtl BUS_SLVERR" in v.first_packet and faulty.text in v.first_packet


def test_an_ih_difference_names_the_fence():
    for i in range(200):
        s = cp.make_stream(SEED, i, DMA)
        if s.kind == "valid" and sum(p.irq for p in s.packets) >= 2:
            break
    a, ma, b, mb = pair(s, DMA)
    eop = [k for k, e in enumerate(a.ih) if e["SOURCE_ID"] == ih.Source.EOP]
    b.ih[eop[1]]["DATA0"] ^= 1
    v = compare(s, b, a, mb.mem, ma.mem)
    second = [p for p in s.packets if p.irq][1]
    assert f"IH entry {eop[1]}" in v.first_packet and second.text in v.first_packet


def test_checks_catch_writes_outside_the_allowed_ranges():
    c = Config(L.RING_REGION[0], 6, L.IH_REGION[0], 2, rptr_wb=False, ih_wptr_wb=False)
    s = Stream(0, 0, "valid", c)
    from spec import pm4
    s.actions = [("mark",), ("submit", pm4.write_data(L.DATA_REGION[0], [1, 0xFFFF_FFFF]), []), ("settle",),
                 ("check", [(L.DATA_REGION[0], L.DATA_REGION[0] + 4)] + [(c.ring_base, c.ring_base + 256)])]
    obs = execute(s, cp.new_model(NO_DMA))
    assert obs.checks == [f"4 byte(s) changed outside the allowed ranges: [{L.DATA_REGION[0] + 4:#x}, "
                          f"{L.DATA_REGION[0] + 8:#x})"]


def test_report_and_coverage():
    caps = NO_DMA
    rep = cp.Report(SEED)
    rep.caps["model"] = caps
    rep.seconds["model"] = 1.0
    rep.add(cp.run_model_pair(SEED, range(len(cp.CYCLE) * 2), caps))
    bad = copy.deepcopy(next(r for r in rep.records if r["kind"] == "valid"))
    bad.update(ok=False, diffs=["x"], first_packet="RING+0x0000: NOP",
               replay=cp.replay_command("model", SEED, bad["index"]))
    rep.add([bad])
    d = rep.to_json()
    assert {"streams", "mismatches", "malformed_cases", "error_classes", "simulators", "seed"} <= set(d)
    assert d["streams"] == 2 * len(cp.CYCLE) + 1 and d["mismatches"] == 1 and d["seed"] == SEED
    assert d["error_classes"]["dma_byte_count"]["cases"] == 0 and "skipped" in d["error_classes"]["dma_byte_count"]
    assert d["error_classes"]["slverr"]["cases"] == 2 and d["malformed_cases"] == 2 * (len(ERROR_CLASSES) - 1)
    assert d["failures"][0]["replay"].endswith(f"--seed {SEED} --replay {bad['index']}")
    text = rep.text()
    assert "functional coverage (opcode x field class x error class)" in text and "holes:" in text
    assert "skipped (the device reports CAPS.DMA = 0)" in text and f"MISMATCH model stream {bad['index']}" in text
    plan, skipped = planned(caps)
    assert len(plan) > 150 and skipped and not planned(DMA)[1]
    json.dumps(d)


# ---------------------------------------------------------------------------- the RTL

def dma_error_after(k: int, site: str) -> Stream:
    """k completed 16-byte copies, then one whose source or destination answers DECERR."""
    from spec import pm4

    c = Config(L.RING_REGION[0], 8, L.IH_REGION[0], 4, rptr_wb=True, ih_wptr_wb=True,
               mem=dict(rd_latency=2, wr_latency=2, stall={}, seed=5))
    s = Stream(0, 0, "malformed", c, error_class="decerr", variant=f"{k} copies, then a {site} error")
    s.expect = {"code": "BUS_DECERR"}
    pre = [w for j in range(k) for w in pm4.dma_data(L.DMA_DST_REGION[0] + 0x40 * j, L.SRC_REGION[0], 16)]
    bad = L.FAULT_REGION[0]
    faulty = (pm4.dma_data(bad, L.SRC_REGION[0], 64) if site == "write"
              else pm4.dma_data(L.DMA_DST_REGION[1] - 0x100, bad, 64))
    s.actions = ([("submit", pre, []), ("settle",)] if k else []) + [
        ("errwin", bad, bad + 32, "DECERR"), ("submit", faulty, []), ("expect_error",), ("observe", "error"),
        ("recover",), ("observe", "final")]
    s.undefined = [(L.FAULT_REGION[0], L.FAULT_REGION[1]), (L.DMA_DST_REGION[1] - 0x100, L.DMA_DST_REGION[1]),
                   (L.RPTR_WB, L.RPTR_WB + 4)]
    s.timing_regs = {n: 0xFFFF_FFFF for n in ("RB_RPTR", "PERF_DWORDS_FETCHED", "PERF_Q0_DWORDS_FETCHED",
                                             "PERF_DMA_BYTES_READ",
                                             "PERF_DMA_BYTES_WRITTEN", "PERF_PACKETS[5]")}
    s.timing_regs["STATUS"] = regs.STATUS.RB_EMPTY.mask | regs.STATUS.LEVEL.mask
    return s


def test_dma_error_after_seven_transfers(tmp_path):
    """Found by the campaign (stream 82 of the default seed): a DMA bus error hung the CP
    when 7 (mod 8) transfers had completed before it."""
    simulator = next((s for s in sim.selected_simulators() if sim.unavailable_reason(s) is None), None)
    if simulator is None:
        pytest.skip("no simulator available")
    cases = [(k, site) for k in (0, 7, 8, 15) for site in ("write", "read")]
    streams = [dma_error_after(k, site) for k, site in cases]
    for i, st in enumerate(streams):
        st.index = i
    model = [cp.run_model(st, DMA)[0].status for st in streams]
    assert model == ["error BUS_DECERR"] * len(cases)
    f = tmp_path / "streams.pkl"
    f.write_bytes(__import__("pickle").dumps(streams))
    recs, _, problems = run_rtl(simulator, 0, 0, len(streams), streams_file=f, workdir=tmp_path)
    assert not problems
    bad = [f"{streams[r['index']].variant}: {r['diffs'][:3]}" for r in recs if not r["ok"]]
    assert not bad, "\n".join(bad)


def polls_then_stuck(level: int, mem: dict, between: str, seed: int) -> Stream:
    """IB1 (or an IB2 it calls: `level`) of 16 WAIT_REG_MEMs that end, each after `between`
    ("nothing", a 45-dword WRITE_DATA, a CPU write after the doorbell), then one that never
    holds (EQ with MASK 0) and a canary WRITE_DATA that must not run: the class of
    seed 20261206's stream 2339, where slow memory spreads an IB's polls over more than the
    KMD timeout."""
    import random

    from spec import pm4

    r = random.Random(seed)
    c = Config(L.RING_REGION[0], 6, L.IH_REGION[0], 2, rptr_wb=False, ih_wptr_wb=True, mem=mem)
    s = Stream(seed, 0, "malformed", c, error_class="wait_timeout", variant=f"16 polls, {between} between, IB{level}")
    s.expect = {"code": ""}
    sem, data, releases, body = L.SEM_REGION[0], L.DATA_REGION[0], [], []
    for k in range(16):
        a = sem + 4 * k
        if between == "cpu write":  # released 0-60 cycles apart after the doorbell
            s.actions.append(("mem", a, [0]))
            releases += [("delay", r.randint(0, 60)), ("mem", a, [k + 1])]
            body += pm4.wait_reg_mem(a, k + 1, M32, "EQ", poll_interval=r.choice([0, 1, 30, 100]))
        else:
            s.actions.append(("mem", a, [k + 1]))
            body += pm4.wait_reg_mem(a, k, M32, "GE", poll_interval=r.choice([0, 1, 30, 100]),
                                     optimize_ace_offload_mode=k & 1)
            if between == "write_data":
                body += pm4.write_data(data + 0x100 * k, [r.getrandbits(32) for _ in range(45)])
    body += pm4.wait_reg_mem(sem + 0x100, r.randint(1, M32), 0, "EQ", poll_interval=r.choice([0, 208]))
    body += pm4.write_data(L.CANARY_REGION[0], [0xCA11AB1E])
    ib1, ib2 = L.IB_REGION[0], L.IB_REGION[0] + 0x1000
    if level == 2:
        s.buffers[ib2] = body
        body = pm4.indirect_buffer(ib2, len(body))
    s.buffers[ib1] = body
    for base, dw in s.buffers.items():
        s.actions.append(("mem", base, dw))
    s.actions += [("submit", pm4.indirect_buffer(ib1, len(s.buffers[ib1])), releases), ("stuck",),
                  ("observe", "stuck"), ("recover",), ("observe", "final")]
    return s


def test_polls_spread_over_the_kmd_timeout_are_not_stuck(tmp_path):
    """The RTL half of test_stuck_means_one_poll_for_the_kmd_timeout_not_two_polls_of_one_ib,
    for the class: an IB's polls on slow memory (seed 20261206's stream 2339: rd_latency 59,
    R stalled half the cycles) and on faster, with writes, CPU releases or nothing between
    them, in IB1 and IB2. The driver took the RTL for stuck in an early poll and soft-reset it
    while the model ran on to the last one (outcome and PERF_* mismatches, the IB's later
    WRITE_DATAs missing)."""
    simulator = next((s for s in sim.selected_simulators() if sim.unavailable_reason(s) is None), None)
    if simulator is None:
        pytest.skip("no simulator available")
    slow = dict(rd_latency=59, wr_latency=0, stall={"aw": 16, "w": 16, "b": 64, "ar": 64, "r": 128}, seed=2894831831)
    mid = dict(rd_latency=16, wr_latency=8, stall={"r": 64}, seed=7)
    streams = [polls_then_stuck(level, mem, between, seed)
               for seed, (level, mem, between) in enumerate(
                   [(1, slow, "nothing"), (1, slow, "write_data"), (2, slow, "cpu write"),
                    (2, slow, "nothing"), (1, mid, "cpu write"), (2, mid, "write_data")])]
    for i, st in enumerate(streams):
        st.index = i
    assert [cp.run_model(st, DMA)[0].status for st in streams] == ["stuck"] * len(streams)
    f = tmp_path / "streams.pkl"
    f.write_bytes(__import__("pickle").dumps(streams))
    recs, _, problems = run_rtl(simulator, 0, 0, len(streams), streams_file=f, workdir=tmp_path)
    assert not problems
    bad = [f"{streams[r['index']].variant}: {r['diffs'][:3]}" for r in recs if not r["ok"]]
    assert not bad, "\n".join(bad)


def test_a_hand_made_stream_that_cannot_run_is_a_failed_record(tmp_path):
    """A --streams-file stream the driver or the model cannot run (here an action verb
    with a typo) stopped the simulator process: the streams after it never ran and the
    report was a traceback's tail. It is a failed record naming it, and the next runs."""
    simulator = next((s for s in sim.selected_simulators() if sim.unavailable_reason(s) is None), None)
    if simulator is None:
        pytest.skip("no simulator available")
    streams = [cp.make_stream(SEED, i, DMA) for i in range(3)]
    streams[1] = dataclasses.replace(streams[1], actions=[("doorbel", 1)])
    f = tmp_path / "streams.pkl"
    f.write_bytes(__import__("pickle").dumps(streams))
    recs, _, problems = run_rtl(simulator, 0, 0, 0, streams_file=f, workdir=tmp_path)
    assert not problems
    assert [(r["index"], r["ok"]) for r in sorted(recs, key=lambda r: r["index"])] == [(0, True), (1, False), (2, True)]
    assert recs[1]["diffs"] == ["item 1 of the streams file cannot run: AttributeError(\"'StreamDriver' object has "
                                "no attribute 'do_doorbel'\")"]


def test_a_streams_file_of_replayed_streams_runs_on_a_simulator(tmp_path):
    """docs/verification.md's cut: `make_stream(seed, index, caps)` pickled as is. Each
    stream keeps its own index (17, 3), not its place in the file: the runner matched the
    records by index against the file's places, so the streams ran, agreed, and the run
    still failed with "stopped at stream 0 (2 stream(s) not run)"."""
    simulator = next((s for s in sim.selected_simulators() if sim.unavailable_reason(s) is None), None)
    if simulator is None:
        pytest.skip("no simulator available")
    streams = [cp.make_stream(SEED, i, DMA) for i in (17, 3)]
    f = tmp_path / "cut.pkl"
    f.write_bytes(__import__("pickle").dumps(streams))
    recs, _, problems = run_rtl(simulator, 0, 0, 0, streams_file=f, workdir=tmp_path)
    assert problems == []
    assert [(r["index"], r["ok"]) for r in recs] == [(17, True), (3, True)]


def _session() -> str:
    """Parts of the same pytest run (all xdist workers share the run id) merge."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())


def _merge_report() -> dict:
    """Fold this session's parts (per simulator and range, the multi-queue streams' too) into
    build/difftest.json (+ .txt); `parts` counts the CP campaign's."""
    with sim._locked(sim.BUILD / ".lock-difftest"):
        rep, parts = cp.Report(SEED), 0
        for part in sorted(sim.BUILD.glob("difftest-part-*.json")):
            d = json.loads(part.read_text())
            if d["session"] != _session() or d["seed"] != SEED:
                continue
            rep.add(d["records"])
            rep.notes += d["problems"]
            if d.get("family") == "multi":  # tests/difftest/test_multi_difftest.py's part
                rep.multi_seconds[d["sim"]] = rep.multi_seconds.get(d["sim"], 0.0) + d["seconds"]
                continue
            parts += 1
            rep.seconds[d["sim"]] = rep.seconds.get(d["sim"], 0.0) + d["seconds"]  # simulator-seconds
            rep.caps[d["sim"]] = Caps(**d["caps"]) if d["caps"] else Caps()
        data = rep.write(sim.BUILD / "difftest.json")
        text = rep.text()
        (sim.BUILD / "difftest.txt").write_text(text + "\n")
    return {"data": data, "text": text, "parts": parts}


def _both() -> bool:
    return {"verilator", "icarus"} <= set(sim.selected_simulators()) and all(
        sim.unavailable_reason(s) is None for s in ("verilator", "icarus"))


def ci_parts(simulator: str, both: bool, scope: str | None = None) -> list[tuple[int, ...]]:
    """The stream indices `simulator` runs in make test, one tuple per part."""
    plan = CP[scope or SCOPE]
    indices = plan["plan" if both else "alone"][simulator]
    return [indices[a:a + n] for a, n in split(0, len(indices), plan["parts"][simulator])]


def _kinds(indices) -> Counter:
    return Counter(cp.plan(i)[0] for i in indices)


@pytest.mark.parametrize("scope", ["full", "subset"])
def test_ci_parts_cover_the_plan_once(scope):
    """Each scope runs every kind of stream on both simulators, on Icarus twice or more (the
    full run 50 cases of every error class), no index twice, every index one the full run
    has; the parts split each simulator's indices in order."""
    plan, alone = CP[scope]["plan"], CP[scope]["alone"]
    every = set(ERROR_CLASSES) | {"valid", "raw"}
    v, i = plan["verilator"], plan["icarus"]
    assert not set(v) & set(i) and len(set(v)) == len(v) and len(set(i)) == len(i)  # no index twice
    assert set(alone["verilator"]) == set(v) | set(i) and alone["icarus"] == i
    for s in ("verilator", "icarus"):
        assert set(_kinds(plan[s])) == every, s
    assert min(_kinds(plan["icarus"]).values()) >= 2  # Icarus sees every kind, twice or more
    assert set(v) | set(i) <= set(range(1250))  # the full run's indices
    if scope == "full":
        assert v == tuple(range(1150)) and i == tuple(range(1150, 1250))
        assert all(_kinds(v + i)[c] == 50 for c in ERROR_CLASSES)  # 50 cases of every error class
    for both in (True, False):
        for s in ("verilator", "icarus"):
            parts = ci_parts(s, both, scope)
            assert len(parts) == CP[scope]["parts"][s] and all(parts)
            assert tuple(x for p in parts for x in p) == (plan if both else alone)[s]


def test_the_subset_covers_every_bin_of_the_full_run():
    """make test's subset hits every coverage bin the full run (DIFFTEST=full) hits, with the
    default seed: each error class's packets, sites and levels, the valid streams' packets
    and fields, the raw streams' outcomes (tests/difftest/ci_plan.py says how it was picked)."""
    from tests.difftest.ci_plan import SUBSET_PICKS, pick_cover

    full, sub = CP["full"]["plan"], CP["subset"]["plan"]
    caps = cp.model_caps(None, 64)  # (what the default device reports)
    bins = [frozenset(cp.make_stream(cp.DEFAULT_SEED, i, caps).bins) for i in range(1250)]
    hit = set().union(*(bins[i] for s in full for i in full[s]))
    got = set().union(*(bins[i] for s in sub for i in sub[s]))
    missing = sorted(hit - got, key=repr)
    given = set(sub["icarus"]) | set(range(len(cp.CYCLE)))
    assert not missing, (f"{len(missing)} bins only the full run hits: {missing[:8]}; SUBSET_PICKS would be "
                         f"{pick_cover(bins, given, [i for i in range(1250) if i not in given])}")
    assert set(SUBSET_PICKS) <= set(sub["verilator"])


def test_make_test_collects_its_scopes_parts(request):
    """The parts collected are the scope's (DIFFTEST=full's are not collected in make test's
    subset, nor skipped); a bad $GPUCOSIM_DIFFTEST is one line."""
    got = sorted(i.callspec.params["part"] for i in request.session.items
                 if i.nodeid.split("[")[0].endswith("test_difftest.py::test_rtl_matches_model")
                 and i.callspec.params["simulator"] == "verilator")
    if got:
        assert got == list(range(CI_PARTS["verilator"]))
    assert difftest_scope(" subset ") == difftest_scope("") == "subset" and difftest_scope("full") == "full"
    with pytest.raises(ValueError) as ei:
        difftest_scope("all")
    assert str(ei.value) == ("GPUCOSIM_DIFFTEST='all': choose full (the campaigns' whole CI run: 50 cases of every "
                             "stream class) or subset (make test's), or leave it empty")


def _run_indices(simulator: str, indices: tuple[int, ...], workdir) -> tuple[list[dict], float, list[str]]:
    """Streams `indices` of the campaign on `simulator`: a range as the campaign runs it (the
    model's side made ahead), others as a streams file of those streams (each keeps its index,
    its replay command the campaign's)."""
    if indices == tuple(range(indices[0], indices[0] + len(indices))):
        return run_rtl(simulator, SEED, indices[0], len(indices))
    import pickle

    caps = cp.model_caps(None, 64)  # (what the default device reports, as the simulator will)
    f = workdir / f"difftest-{simulator}.pkl"
    f.write_bytes(pickle.dumps([cp.make_stream(SEED, i, caps) for i in indices]))
    return run_rtl(simulator, SEED, 0, 0, streams_file=f, workdir=workdir)


@pytest.mark.parametrize("simulator, part", [
    pytest.param(s, k, marks=pytest.mark.xdist_group(f"difftest-{s}-{k}"), id=f"{s}-{k}")
    for s in sim.selected_simulators() for k in range(CI_PARTS[s])])
def test_rtl_matches_model(simulator, part, tmp_path):
    reason = sim.unavailable_reason(simulator)
    if reason:
        pytest.skip(reason)
    both = _both()
    indices = ci_parts(simulator, both)[part]
    count = len(indices)
    recs, seconds, problems = _run_indices(simulator, indices, tmp_path)
    caps = next((r["caps"] for r in recs if "caps" in r), None)
    out = sim.BUILD / f"difftest-part-{simulator}-{part}.json"
    out.write_text(json.dumps({"session": _session(), "seed": SEED, "sim": simulator, "seconds": seconds,
                               "caps": caps, "problems": problems, "records": recs}))
    merged = _merge_report()
    whole = merged["parts"] == sum(CI_PARTS[s] for s in (("verilator", "icarus") if both else (simulator,)))
    if whole:  # the last part in: show the whole run
        warnings.warn(DifftestReport("\n" + merged["text"] + "\n(build/difftest.json, build/difftest.txt)"))
    bad = [r for r in recs if not r["ok"]]
    assert len(recs) >= count and not problems, "\n".join(problems)
    assert sorted(r["index"] for r in recs) == sorted(indices)
    assert not bad, f"{len(bad)} of {count} streams differ on {simulator} (seed {SEED}):\n" + "\n".join(
        f"stream {r['index']} {r['kind']} {r['class']} {r['variant']}: {r['first_packet']}\n    "
        + "\n    ".join(r["diffs"][:6]) + f"\n    replay: {r['replay']}" for r in bad[:10])
    if whole:  # the whole CI plan has run: every error class as often as the plan has it
        ran = _kinds(i for s in (("verilator", "icarus") if both else (simulator,))
                     for i in (CI_PLAN if both else CI_ALONE)[s])
        for name, c in merged["data"]["error_classes"].items():
            assert c["cases"] >= ran[name] or "skipped" in c, f"{name}: only {c['cases']} cases of {ran[name]}"


def test_a_hung_mmio_access_fails_with_a_timeout():
    """The campaign's MMIO watchdog (testbench/difftest/simulator/rtl.py) turns an access nobody
    answers into MmioTimeout, one stream's failure, within 1.25 x MMIO_TIMEOUT cycles."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    res = sim.run(gpu_design(64), "verilator", "tests.difftest.cocotb_mmio_timeout", tag="mmio-timeout")
    assert res.ok, res.explain()


def test_vm_streams_rewrite_addresses_not_fence_values():
    """Regression: a VM stream's RELEASE_MEM data that looked like an address in a mapped
    region was rewritten as one, so a later poll on the fence never ended (seed 1515,
    stream 4317 of a 5,000-stream soak: 'a valid stream ended with hang' on both sides)."""
    from spec import pm4
    from testbench.difftest.streams.vm import retarget

    p = retarget(pm4.release_mem(0x100000, 0x0010_4245), lambda a: a + 0x1000_0000)
    assert p == pm4.release_mem(0x1010_0000, 0x0010_4245)
    s = cp.make_stream(1515, 4317, DMA)
    assert s.kind == "valid" and s.vm is not None
    obs, _ = cp.run_model(s, DMA)
    assert obs.status == "idle"


def test_a_malformed_builders_vm_fault_method_is_not_hidden_by_its_plan():
    """Malformed kept the vm_fault class's plan in `self.vm_fault`, which hid the method
    of that name on every instance (ERROR_CLASSES only worked by calling it through the
    class): the plan is `vm_fault_plan`."""
    import random

    from testbench.difftest.streams.gen import Builder
    from testbench.difftest.streams.malformed import Malformed

    m = Malformed(Builder(random.Random(3), 0, 0, "malformed", DMA), "vm_fault")
    m.vm_fault()  # (was: 'NoneType' object is not callable)
    assert m.vm_fault_plan is not None and m.vm_fault_plan.kind in ("pte", "pde", "perm", "walk", "range",
                                                                     "invalidated")
