"""The SDMA copy engine's differential streams (testbench/difftest/sdma.py): valid streams
and every SDMA error class, on the RTL against the reference model.

`test_sdma_streams_are_timing_independent` is the generator's own check on the model alone
(two models with different MMIO timing agree, and each malformed stream stops with the
code its class plants). `test_sdma_rtl_matches_model[sim]` runs a range of stream indices
per simulator: Verilator the most, Icarus the next ones; together at least
`CASES_PER_CLASS` cases of every error class: make test's subset, or the full run under
`make test DIFFTEST=full` (tests/difftest/ci_plan.py).
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from testbench.difftest import campaign as cp
from testbench.difftest import sdma as S

from tests.conftest import shared_run
from tests.difftest.ci_plan import SDMA_BLOCKS, scope_or_subset

SEED = cp.master_seed()
CASES = {"full": 50, "subset": 18}  # the cases of every error class each scope runs
SCOPE = scope_or_subset()
CASES_PER_CLASS = CASES[SCOPE]
# index ranges per simulator, in blocks of PLAN (one case of each class each): the full run
# 46 on Verilator, the next 4 on Icarus (about 1.3 s a stream there); make test's subset the
# first 16 and the first 2 of those
BLOCKS = SDMA_BLOCKS[SCOPE]
CI_PLAN = {k: (a * len(S.PLAN), n * len(S.PLAN)) for k, (a, n) in BLOCKS.items()}


@pytest.mark.parametrize("scope", ["full", "subset"])
def test_each_scope_runs_every_class_on_both_simulators(scope):
    """Each simulator's range is whole blocks, so it runs every SDMA error class and valid
    streams; the subset's blocks are where the full run's begin; no index runs twice."""
    blocks = SDMA_BLOCKS[scope]
    assert sum(n for _, n in blocks.values()) == CASES[scope]
    (va, vn), (ia, i_n) = blocks["verilator"], blocks["icarus"]
    assert va + vn <= ia and vn >= 1 and i_n >= 1
    for s, (a, n) in blocks.items():
        full_a, full_n = SDMA_BLOCKS["full"][s]
        assert a == full_a and n <= full_n
        kinds = {S.PLAN[i % len(S.PLAN)] for i in range(a * len(S.PLAN), (a + n) * len(S.PLAN))}
        assert kinds == set(S.CLASSES) | {"valid"}, (s, kinds)
    assert CASES["full"] == 50


def test_sdma_streams_are_timing_independent():
    kinds = Counter()
    for i in range(3 * len(S.PLAN)):
        s = S.make(SEED, i)
        a, _ = S.run_model(s)
        b, _ = S.run_model(s, mmio_cycles=3)
        assert not S.compare(s, a, b), (i, S.compare(s, a, b), s.listing)
        assert not a["checks"]
        kinds[s.kind] += 1
    assert set(kinds) == set(S.CLASSES) | {"valid"}
    assert S.make(SEED, 5).listing == S.make(SEED, 5).listing


def run_range(simulator: str, first: int, count: int) -> list[dict]:
    out = sim.BUILD / "runs" / f"sdma-difftest-{simulator}-{os.getpid()}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    env = {"SDMA_SEED": str(SEED), "SDMA_FIRST": str(first), "SDMA_COUNT": str(count), "SDMA_OUT": str(out),
           "COCOTB_LOG_LEVEL": "WARNING"}
    res = sim.run(gpu_design(64), simulator, "tests.difftest.cocotb_sdma_difftest", tag="sdma-difftest", extra_env=env)
    recs = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return recs, res


@pytest.mark.xdist_group("sdma_difftest")
def test_sdma_rtl_matches_model(simulator):
    first, count = CI_PLAN[simulator]
    recs, res = shared_run(f"sdma-difftest-{simulator}", lambda: run_range(simulator, first, count))
    assert len(recs) == count, f"{len(recs)} of {count} streams ran on {simulator}\n" + res.explain()
    bad = [r for r in recs if not r["ok"]]
    assert not bad, "\n".join(f"stream {r['index']} ({r['kind']}): " + "; ".join(r["diffs"][:6]) + "\n  "
                              + "\n  ".join(r["listing"]) for r in bad[:5])
    got = Counter(r["kind"] for r in recs)
    assert set(got) == set(S.CLASSES) | {"valid"}
