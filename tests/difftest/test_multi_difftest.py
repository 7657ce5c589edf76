"""Multi-queue difftest streams (testbench/difftest/multi/): both CP queues and the SDMA at
once, per-queue errors and resets, on the RTL against the reference model.

The model-only tests check the family itself: every stream is timing-independent (two
models with different MMIO timing agree) and ends each engine the way its kind plants
(exact codes); 50 cases of each error class walk every variant on both queues; the
ordered phase really observes the arbitration; the IH comparison is free exactly where
the contract leaves the interleaving to timing. `test_multi_rtl_matches_model[sim]` is the
quick part `make test` runs (a block of every kind on Verilator, two streams on Icarus);
the full classes run with `python -m testbench.difftest --multi --streams 500`
(docs/verification.md). Its part joins build/difftest.json's `multi_queue` section.

Two RTL bugs the family found are kept as hand-made streams on the first simulator:
`test_a_parked_poll_does_not_starve_the_other_queue` and
`test_a_one_dword_filler_takes_its_turn`.
"""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from kmd_model import regs
from testbench import sim
from testbench.difftest import campaign as cp
from testbench.difftest import multi as M
from testbench.difftest import sdma as S
from testbench.difftest.simulator.runner import run_rtl

SEED = cp.master_seed()
BLOCK = len(M.PLAN)
# make test's quick part: one block of every kind on Verilator, the two cheapest kinds on Icarus
CI_PLAN = {"verilator": (0, BLOCK), "icarus": (BLOCK + M.PLAN.index("cp_error_sdma_runs"), 2)}


def test_multi_streams_are_timing_independent():
    kinds = Counter()
    for i in range(3 * BLOCK):
        s = M.make(SEED, i)
        assert not M.check_pair(s), (i, s.label, M.check_pair(s), "\n".join(s.listing()))
        kinds[s.kind] += 1
    assert set(kinds) == set(M.PLAN)
    assert M.make(SEED, 5).listing() == M.make(SEED, 5).listing()
    assert M.make(SEED, 5).listing() != M.make(SEED + 1, 5).listing()


def test_careless_ring_writes_are_ignored_and_would_be_caught(monkeypatch):
    """Some streams write random values to an enabled ring's base, size or pointer write-back
    address mid-run (careless.ring_writes), on every ring, the write-back addresses of all four
    (the IH ring's wptr's too): on the model they change nothing (the stream ends as it does without
    them, every register and byte alike), and a model that took them (its swwel locks
    removed) differs from it, so a side that took one is a mismatch."""
    import dataclasses

    from testbench.refmodel import device as model_device

    written, streams = set(), []
    for i in range(5 * BLOCK):
        s = M.make(SEED, i)
        names = [st[1] for st in s.steps if st[0] == "ring_write"]
        if names:
            written |= set(names)
            streams.append(s)
    assert {e for e, names in M.RING_REGS.items() if written & set(names)} == set(M.RING_REGS), written
    assert 0.15 < len(streams) / (5 * BLOCK) < 0.5, len(streams)
    # the first six, and the first that writes each ring's write-back address (looked for
    # further on: about 1 stream in 18 writes the IH ring's, none of seed 20240605's first 50)
    def ring_writes(x):
        return {st[1] for st in x.steps if st[0] == "ring_write"}

    wb = {e: {n for n in names if "PTR_ADDR_" in n} for e, names in M.RING_REGS.items()}
    chosen = streams[:6]
    for e, names in wb.items():
        if not any(names & ring_writes(x) for x in chosen):
            chosen.append(next((x for x in (M.make(SEED, i) for i in range(40 * BLOCK)) if names & ring_writes(x)),
                               None))
            assert chosen[-1] is not None, f"no stream of the first {40 * BLOCK} writes {e}'s write-back address"
    for s in chosen:
        bare = copy.deepcopy(s)
        bare.steps = [st for st in s.steps if st[0] != "ring_write"]
        (a, ma), (b, mb) = M.run_model(s), M.run_model(bare)
        assert not M.compare(s, b, a, mb.mem, ma.mem), s.index
    locked = model_device._slots

    def unlocked(**kw):
        return {o: dataclasses.replace(x, locks=()) for o, x in locked(**kw).items()}

    for s in chosen:
        real, mr = M.run_model(s)
        monkeypatch.setattr(model_device, "_slots", unlocked)
        took, mt = M.run_model(s)
        monkeypatch.setattr(model_device, "_slots", locked)
        assert M.compare(s, took, real, mt.mem, mr.mem), s.index


def test_ring_pauses_reach_every_ring_and_change_nothing_on_the_model():
    """Some streams clear a ring's enable right after a submission and set it again some cycles
    later (careless.ring_pauses), on every CP queue and the SDMA, for every listed length: the
    stream ends on the model as it does without them. (On the RTL the campaign compares them
    with the model: a pause that lost or repeated a packet is a mismatch. One that held a
    packet half taken and finished it from the same ring ends the same: the driver check
    check_ring_enable_cleared_mid_packet_pauses_at_a_packet_boundary moves the ring to see it.)"""
    rings, lengths, streams = set(), set(), []
    for i in range(5 * BLOCK):
        s = M.make(SEED, i)
        pauses = [st for st in s.steps if st[0] == "pause"]
        if pauses:
            rings |= {st[1] for st in pauses}
            lengths |= {st[2] for st in pauses}
            streams.append(s)
    assert rings == {"q0", "q1", "sdma"} and lengths == set(M.careless.PAUSE_CYCLES), (rings, lengths)
    assert 0.15 < len(streams) / (5 * BLOCK) < 0.5, len(streams)
    for s in streams[:6]:
        bare = copy.deepcopy(s)
        bare.steps = [st for st in s.steps if st[0] != "pause"]
        (a, ma), (b, mb) = M.run_model(s), M.run_model(bare)
        assert not M.compare(s, b, a, mb.mem, ma.mem), s.index


def test_fifty_cases_walk_every_variant():
    """The planted codes of 50 cases per error class: every CP fault on both queues, both
    doorbell errors on both queues, a hang on each queue, every SDMA error class."""
    codes: dict[str, set] = {k: set() for k in M.ERROR_CLASSES}
    for i in range(50 * BLOCK):
        if M.PLAN[i % BLOCK] in M.ERROR_CLASSES:
            s = M.make(SEED, i)
            for st in s.expect_at.values():
                codes[s.kind] |= {f"{e} {v}" for e, v in st.items()}
    cp_codes = {"ILLEGAL_OPCODE", "IB_SIZE_ZERO", "IB_MISALIGNED", "FENCE_MISALIGNED", "BUS_DECERR", "BAD_COUNT"}
    for kind in ("mq_packet_error", "cp_error_sdma_runs"):
        assert codes[kind] == {f"{q} error {c}" for q in ("q0", "q1") for c in cp_codes}, kind
    assert codes["mq_doorbell_error"] == {f"{q} error DOORBELL_{d}" for q in ("q0", "q1")
                                          for d in ("BACKWARDS", "OVERFLOW")}
    assert codes["mq_hang_reset"] == {"q0 stuck", "q1 stuck"}
    sdma_codes = {"ILLEGAL_OPCODE", "BAD_COUNT", "UNSUPPORTED", "FENCE_MISALIGNED", "IB_MISALIGNED", "IB_SIZE_ZERO",
                  "IB_NESTING", "BUS_DECERR", "DOORBELL_BACKWARDS", "DOORBELL_OVERFLOW"}
    assert len(S.CLASSES) == len(sdma_codes)
    assert codes["sdma_error_cp_runs"] == {f"sdma error {c}" for c in sdma_codes}


def test_the_ordered_phase_observes_the_arbitration():
    """Flip the priorities of an ordered stream (equal ones to q0 first): the model's
    results must change for most of them, or the phase would not test the arbiter."""
    P = regs.CP_QUEUE_PRIORITY
    n = changed = 0
    for i in range(6 * BLOCK):
        s = M.make(SEED, i)
        if s.kind not in ("mq_priority", "mq_turns"):
            continue
        a, ma = M.run_model(s)
        t = copy.deepcopy(s)
        p0, p1 = P.Q0.get(s.prio), P.Q1.get(s.prio)
        t.prio = P.Q0.put(p1) | P.Q1.put(p0) if s.kind == "mq_priority" else P.Q0.put(2) | P.Q1.put(0)
        b, mb = M.run_model(t)
        diffs = [d for d in M.compare(s, b, a, mb.mem, ma.mem) if "CP_QUEUE_PRIORITY" not in d]
        n += 1
        changed += bool(diffs)
    assert n == 12 and changed >= n // 2, (n, changed)


def _two_producers(label: str | None) -> tuple[M.MultiStream, dict]:
    for i in range(20 * BLOCK):
        s = M.make(SEED, i)
        obs, _ = M.run_model(s)
        at = [k for k, x in enumerate(obs["ih_at"]) if (x not in M.ORDERED if label is None else x == label)]
        prods = [M.producer(obs["ih"][k]) for k in at]
        if len(set(prods)) >= 2 and len(prods) > len(set(prods)):
            return s, obs
    raise AssertionError("no stream with two producers' entries")  # pragma: no cover


def test_ih_entries_interleave_freely_but_keep_each_producers_order():
    s, obs = _two_producers(None)  # (outside the ordered phase)
    ih, at = obs["ih"], obs["ih_at"]
    free = [k for k in range(len(ih)) if at[k] not in M.ORDERED]
    # move one entry of another producer in front of the first: allowed outside the ordered phase
    f0 = free[0]
    k = next(k for k in free if M.producer(ih[k]) != M.producer(ih[f0]))
    other = copy.deepcopy(obs)
    other["ih"].insert(f0, other["ih"].pop(k))
    other["ih_at"].insert(f0, other["ih_at"].pop(k))
    other["ih_at"][f0] = at[f0]  # (consumed at the same observation)
    assert not M.compare(s, other, obs)
    # two entries of one producer swapped: a difference, named by producer
    p = Counter(M.producer(ih[k]) for k in free).most_common(1)[0][0]
    i, j = [k for k in free if M.producer(ih[k]) == p][:2]
    if ih[i] != ih[j]:
        other = copy.deepcopy(obs)
        other["ih"][i], other["ih"][j] = other["ih"][j], other["ih"][i]
        pos = sum(M.producer(e) == p for e in ih[:i])  # (its index among p's entries)
        assert any(d.startswith(f"IH entry {pos} of {p}") for d in M.compare(s, other, obs))
    other = copy.deepcopy(obs)  # one entry lost
    other["ih"].pop(j)
    other["ih_at"].pop(j)
    n = sum(M.producer(e) == p for e in ih)
    assert f"IH entries of {p}: model {n}, rtl {n - 1}" in M.compare(s, other, obs)


def test_the_ordered_phase_compares_the_order_across_queues():
    s, obs = _two_producers("ordered phase")
    idx = [k for k, x in enumerate(obs["ih_at"]) if x == "ordered phase"]
    a = idx[0]
    b = next(k for k in idx if M.producer(obs["ih"][k]) != M.producer(obs["ih"][a]))
    other = copy.deepcopy(obs)
    other["ih"].insert(a, other["ih"].pop(b))
    assert any(d.startswith("ordered phase: IH entries in order") for d in M.compare(s, other, obs))


def test_a_queue_that_stops_differently_is_a_mismatch():
    s = next(s for i in range(BLOCK, 4 * BLOCK) if (s := M.make(SEED, i)).kind == "mq_packet_error")
    obs, m = M.run_model(s)
    q = next(iter(s.expect_at["error"]))
    reg = "CP_ERROR" if q == "q0" else "CP_HQD1_ERROR"
    other = copy.deepcopy(obs)
    ev = dict(other["events"][0][1])
    ev[reg] ^= regs.CP_ERROR.CODE.put(1)
    other["events"][0] = ("error", ev)
    other["status"]["error"] = {**other["status"]["error"], q: "error X"}
    d = M.compare(s, other, obs, m.mem, m.mem)
    assert any(x.startswith(f"error: {reg}: model") for x in d) and any("engines ended" in x for x in d)
    # and the model's own outcome is held to the planted code
    assert M.expected(s, obs) == []
    assert M.expected(s, other) == [f"model: at 'error' {q} ended error X, the stream plants "
                                    f"{s.expect_at['error'][q]}"]


def test_report_counts_the_multi_queue_family():
    rep = cp.Report(SEED)
    for i in range(BLOCK):
        s = M.make(SEED, i)
        obs, _ = M.run_model(s)
        rep.add([M.record(s, [] if i else ["x"], "model", 0.1, obs)])
    rep.multi_seconds["model"] = 1.0
    d = rep.to_json()
    mq = d["multi_queue"]
    assert mq["streams"] == BLOCK and mq["mismatches"] == 1 and d["mismatches"] == 1 and d["streams"] == 0
    assert set(mq["error_classes"]) == set(M.ERROR_CLASSES)
    assert all(v["cases"] == 1 for v in mq["kinds"].values())
    assert sum(mq["error_classes"]["sdma_error_cp_runs"]["codes"].values()) == 1
    assert mq["simulators"]["model"]["streams_per_second"] == BLOCK
    text = rep.text()
    assert f"multi-queue streams: {BLOCK}, 1 mismatch(es)" in text and "--multi --sim model" in text
    json.dumps(d)


@pytest.mark.parametrize("simulator", [
    pytest.param(s, marks=pytest.mark.xdist_group(f"multi-difftest-{s}")) for s in sim.selected_simulators()])
def test_multi_rtl_matches_model(simulator):
    reason = sim.unavailable_reason(simulator)
    if reason:
        pytest.skip(reason)
    from tests.difftest.test_difftest import _merge_report, _session

    first, count = CI_PLAN[simulator]
    recs, seconds, problems = run_rtl(simulator, SEED, first, count, family="multi")
    out = sim.BUILD / f"difftest-part-multi-{simulator}.json"
    out.write_text(json.dumps({"session": _session(), "seed": SEED, "sim": simulator, "family": "multi",
                               "seconds": seconds, "caps": None, "problems": problems, "records": recs}))
    _merge_report()
    assert len(recs) == count and not problems, "\n".join(problems)
    bad = [r for r in recs if not r["ok"]]
    assert not bad, "\n".join(f"multi stream {r['index']} {r['kind']} ({r['variant']}): " + "; ".join(r["diffs"][:6])
                              + f"\n    replay: {r['replay']}\n    " + "\n    ".join(r["listing"][:40])
                              for r in bad[:5])
    assert {r["kind"] for r in recs} == set(M.PLAN[first % BLOCK:first % BLOCK + count])


def parked_poll(hung: str, interval: int, latency: int, in_ib: bool, index: int = 0) -> M.MultiStream:
    """Queue `hung` (the higher priority) polls a WAIT_REG_MEM that never holds, POLL_INTERVAL
    `interval`; the other queue has eight packets to run (memory latency `latency`)."""
    from spec import pm4

    P = regs.CP_QUEUE_PRIORITY
    s = M.MultiStream(index, 0, "mq_hang_reset", f"{hung} polls (interval {interval}, latency {latency}"
                      f"{', in an IB' if in_ib else ''}), the other runs")
    for k, e in enumerate(M.ENGINES):
        s.rings[e], s.rptr_wb[e] = (0x10000 + 0x4000 * k, 8), True
    s.prio = P.Q0.put(2) | P.Q1.put(0) if hung == "q0" else P.Q0.put(0) | P.Q1.put(2)
    s.mem = dict(rd_latency=latency, wr_latency=latency, stall={}, seed=1)
    other = "q1" if hung == "q0" else "q0"
    sem = 0x240000 + 0x4000 * M.ENGINES.index(hung)
    s.preload.append((sem, (5).to_bytes(4, "little")))
    poll = pm4.wait_reg_mem(sem, 6, M.M32, "EQ", poll_interval=interval)
    if in_ib:
        ib = 0x40000 + 0x28000 * M.ENGINES.index(hung)
        s.preload.append((ib, b"".join(x.to_bytes(4, "little") for x in poll)))
        poll = pm4.indirect_buffer(ib, len(poll))
    data = 0x100000 + 0x20000 * M.ENGINES.index(other)
    work = [w for k in range(8) for w in pm4.write_data(data + 4 * k, [0x1000 + k])]
    s.steps = [("submit", hung, poll), ("until", hung, "waiting"), ("submit", other, work), ("settle", (other,)),
               ("until", hung, "stuck"), ("observe", "hung"), ("reset", hung), ("settle", tuple(M.ENGINES)),
               ("observe", "final")]
    s.expect = {e: "idle" for e in M.ENGINES}
    s.expect_at = {"hung": {hung: "stuck"}}
    return s


def filler_turns(filler: list[int], q: str, index: int) -> M.MultiStream:
    """Equal priorities, both queues loaded while the CP is halted: queue `q` runs an IB that
    starts with `filler`, then three interrupting fences; the other queue four fences in its
    ring. The IH entries' order is the turns' order (an ordered phase)."""
    from spec import pm4

    P = regs.CP_QUEUE_PRIORITY
    s = M.MultiStream(index, 0, "mq_turns", f"{[hex(x) for x in filler]} first in {q}'s IB")
    for k, e in enumerate(M.ENGINES):
        s.rings[e], s.rptr_wb[e] = (0x10000 + 0x4000 * k, 9), False
    s.prio = P.Q0.put(1) | P.Q1.put(1)
    s.mem = dict(rd_latency=0, wr_latency=0, stall={}, seed=1)

    def fence(tag):
        return pm4.release_mem(0x100000 + 8 * tag, tag, int_sel="SEND_INT", int_ctxid=tag)

    other = "q1" if q == "q0" else "q0"
    ib = 0x40000 + 0x28000 * M.ENGINES.index(q)
    body = filler + fence(0x11) + fence(0x12) + fence(0x13)
    s.preload.append((ib, b"".join(x.to_bytes(4, "little") for x in body)))
    s.steps = [("halt", 1), ("submit", q, pm4.indirect_buffer(ib, len(body))),
               ("submit", other, fence(1) + fence(2) + fence(3) + fence(4)), ("delay", 10), ("halt", 0),
               ("settle", ("q0", "q1")), ("observe", "ordered phase"), ("observe", "final")]
    s.expect = {e: "idle" for e in M.ENGINES}
    return s


PARKED = [(hung, interval, latency, in_ib) for hung in ("q0", "q1") for interval in (0, 7)
          for latency in (0, 24) for in_ib in (False, True)]
FILLERS = [(f, q) for f in ([0xFFFF1000], [0x80000000], [0xFFFF1000, 0x80000000]) for q in ("q0", "q1")]


def _regressions() -> tuple[list[M.MultiStream], list[dict]]:
    """The hand-made streams of both regressions, in one simulator session (the first
    simulator available): the streams and the records, by index."""
    import pickle
    import tempfile
    from pathlib import Path

    from tests.conftest import shared_run

    simulator = next((s for s in sim.selected_simulators() if sim.unavailable_reason(s) is None), None)
    if simulator is None:
        pytest.skip("no simulator available")
    streams = [parked_poll(*c) for c in PARKED] + [filler_turns(f, q, 0) for f, q in FILLERS]
    for i, s in enumerate(streams):
        s.index = i

    def run():
        with tempfile.TemporaryDirectory(dir=sim.BUILD) as d:
            f = Path(d) / "streams.pkl"
            f.write_bytes(pickle.dumps(streams))
            recs, _, problems = run_rtl(simulator, 0, 0, 0, streams_file=f, workdir=Path(d), family="multi")
        assert not problems, problems
        return sorted(recs, key=lambda r: r["index"])
    recs = shared_run(f"multi-regressions-{simulator}", run)
    assert len(recs) == len(streams)
    return streams, recs


@pytest.mark.xdist_group("multi-regressions")
def test_a_parked_poll_does_not_starve_the_other_queue():
    """Found by this family (streams 397 and 487 of the default seed, mq_hang_reset): a
    higher-priority queue polling a WAIT_REG_MEM that never holds took the CP back at every
    packet boundary once its POLL_INTERVAL ran out, before the other queue had taken a
    packet after the refetch its switch needs, so the other queue never ran again (a
    polling queue must never block the other: docs/hardware.md). Fixed in rtl/cp/queues.py:
    the parked queue preempts only after the other has taken a packet since the switch.
    (All 16 streams hung before the fix; a POLL_INTERVAL of 40 did not.)"""
    streams, recs = _regressions()
    mine = [(s, r) for s, r in zip(streams, recs) if s.kind == "mq_hang_reset"]
    assert len(mine) == len(PARKED)
    for s, _ in mine:
        assert not M.check_pair(s), s.variant
    bad = [f"{s.variant}: {r['diffs'][:2]}" for s, r in mine if not r["ok"]]
    assert not bad, "\n".join(bad)


@pytest.mark.xdist_group("multi-regressions")
def test_a_one_dword_filler_takes_its_turn():
    """Found by this family (stream 871 of seed 1515, mq_turns): at equal priority a
    one-dword filler in an IB (the header-only NOP 0xFFFF1000, a type-2 dword) is a packet
    and ends its queue's turn on the model, but on the RTL the queue took its next header
    the cycle after, before the registered `want_switch` had seen the filler, so the turns
    went off by one (and only without read stalls: timing-dependent). Fixed in
    rtl/cp/queues.py (`turn_due`: the turn ends at the header after it). (All 6 streams
    differed before the fix.)"""
    streams, recs = _regressions()
    mine = [(s, r) for s, r in zip(streams, recs) if s.kind == "mq_turns"]
    assert len(mine) == len(FILLERS)
    for (f, _), (s, _) in zip(FILLERS, mine):
        assert not M.check_pair(s), s.variant
        obs, _ = M.run_model(s)
        changes = sum(M.producer(a) != M.producer(b) for a, b in zip(obs["ih"], obs["ih"][1:]))
        assert changes >= (3 if len(f) == 1 else 1), s.variant  # the turns interleave the fences
    bad = [f"{s.variant}: {r['diffs'][:1]}" for s, r in mine if not r["ok"]]
    assert not bad, "\n".join(bad)


def test_cli_runs_the_family_into_the_report(tmp_path, capsys):
    from testbench.difftest.__main__ import main

    out = tmp_path / "d.json"
    assert main(["--sim", "model", "--streams", "0", "--multi-streams", str(BLOCK), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["multi_queue"]["streams"] == BLOCK and d["multi_queue"]["mismatches"] == 0 and d["streams"] == 0
    assert main(["--multi", "--list", "3"]) == 0
    assert capsys.readouterr().out.count("multi stream 3 (seed") == 1


@pytest.mark.parametrize("data_width", [32, 64, 128, 256])
@pytest.mark.parametrize("dma", [True, False])
def test_the_model_is_told_the_rtl_it_is_compared_with(data_width, dma):
    """The multi-queue campaign builds its model from the RTL's CAPS: a model built so reads
    back the same CAPS (and so counts bytes per beat as the RTL does). It built a 64-bit
    model whatever the RTL: a 32-bit RTL mismatched in every stream (24 of 24 on Verilator,
    `--multi --data-width 32`; 0 since)."""
    from testbench.difftest.streams import layout as L
    from testbench.refmodel import RefModel

    rtl_caps = RefModel(L.MEM_SIZE, data_width=data_width, dma=dma).mmio_read32(regs.CAPS.addr())
    opts = M.model_options(rtl_caps)
    assert opts == {"dma": dma, "data_width": data_width}
    _, m = M.run_model(M.make(SEED, 0, dma), **opts)
    assert m.mmio_read32(regs.CAPS.addr()) == rtl_caps
