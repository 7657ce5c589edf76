"""The SDMA copy engine's differential streams (testbench/difftest/sdma.py): valid streams
and every SDMA error class, on the RTL against the reference model.

`test_sdma_streams_are_timing_independent` is the generator's own check on the model alone
(two models with different MMIO timing agree, and each malformed stream stops with the
code its class plants). `test_sdma_rtl_matches_model[sim]` runs a range of stream indices
per simulator: Verilator the most, Icarus the next ones; together at least
`CASES_PER_CLASS` cases of every error class.
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

SEED = cp.master_seed()
CASES_PER_CLASS = 50
# index ranges per simulator, in blocks of PLAN (one case of each class each): 46 on Verilator,
# the next 4 on Icarus (about 1.3 s a stream there)
BLOCKS = {"verilator": (0, 46), "icarus": (46, 4)}
CI_PLAN = {k: (a * len(S.PLAN), n * len(S.PLAN)) for k, (a, n) in BLOCKS.items()}
assert sum(n for _, n in BLOCKS.values()) >= CASES_PER_CLASS


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
