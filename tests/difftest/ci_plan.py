"""Which differential streams `make test` runs on the RTL: its fast subset, or the full CI
run (`make test DIFFTEST=full`, $GPUCOSIM_DIFFTEST=full). docs/verification.md, "The
campaigns in make test".

Each plan is a range of stream indices per simulator, whole cycles of the generator's
plan (the CP's `campaign.CYCLE`, 25 streams; the SDMA's `sdma.PLAN`, 14), so each range
runs every stream class the same number of times. The subset's ranges are the first
indices of the full run's: a stream the subset runs, the full run runs too.
"""

from __future__ import annotations

import os

DIFFTEST_ENV = "GPUCOSIM_DIFFTEST"


def difftest_scope(spec: str | None = None) -> str:
    """The campaigns' scope under `spec` ($GPUCOSIM_DIFFTEST when None): "subset" (unset,
    empty or "subset": make test's) or "full". Anything else is a one-line ValueError."""
    spec = (os.environ.get(DIFFTEST_ENV, "") if spec is None else spec).strip()
    if spec in ("", "subset"):
        return "subset"
    if spec == "full":
        return "full"
    raise ValueError(f"{DIFFTEST_ENV}={spec!r}: choose full (the campaigns' whole CI run: 50 cases of every "
                     "stream class) or subset (make test's), or leave it empty")


def scope_or_subset() -> str:
    """difftest_scope(), or "subset" for a bad setting (tests/conftest.py's pytest_configure
    reports it in one line; collection must not fail first with a traceback)."""
    try:
        return difftest_scope()
    except ValueError:
        return "subset"


# The CP's campaign (tests/difftest/test_difftest.py): (first, count) per simulator when
# both run ("plan"), when one runs alone ("alone"), and the parts each simulator's range is
# split into (one simulator session and xdist group each).
# full: 1,250 streams = 50 cycles, 50 cases of every class; Icarus 4 cycles of them.
# subset: 12 cycles, 12 cases of every class: 10 cycles on Verilator, the first 2 of the
# full run's Icarus range on Icarus (every class on both simulators, twice on Icarus).
CP = {
    "full": {"plan": {"verilator": (0, 1150), "icarus": (1150, 100)},
             "alone": {"verilator": (0, 1250), "icarus": (1150, 100)},
             "parts": {"verilator": 2, "icarus": 2}},
    "subset": {"plan": {"verilator": (0, 250), "icarus": (1150, 50)},
               "alone": {"verilator": (0, 300), "icarus": (1150, 50)},
               "parts": {"verilator": 1, "icarus": 1}},
}

# The SDMA's campaign (tests/difftest/test_sdma_difftest.py): (first block, blocks) per
# simulator; a block is one stream of every SDMA error class and four valid ones.
# full: 46 blocks on Verilator, the next 4 on Icarus (50 cases of every class).
# subset: the first 8 of Verilator's, the first 2 of Icarus's (10 cases of every class).
SDMA_BLOCKS = {
    "full": {"verilator": (0, 46), "icarus": (46, 4)},
    "subset": {"verilator": (0, 8), "icarus": (46, 2)},
}
