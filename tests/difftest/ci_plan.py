"""Which differential streams `make test` runs on the RTL: its fast subset, or the full CI
run (`make test DIFFTEST=full`, $GPUCOSIM_DIFFTEST=full). docs/verification.md, "The
campaigns in make test".

Each plan names the stream indices per simulator. The full run's are whole cycles of the
generator's plan (the CP's `campaign.CYCLE`, 25 streams; the SDMA's `sdma.PLAN`, 14), so
every stream class runs the same number of times. The subset runs every stream class on
both simulators, and (the CP's) every coverage bin the full run hits; a stream the subset
runs, the full run runs too.
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


# The CP's campaign (tests/difftest/test_difftest.py): the stream indices each simulator
# runs when both run ("plan") and when one runs alone ("alone"), and the parts each
# simulator's indices are split into (one simulator session and xdist group each).
#
# full: 1,250 streams = 50 cycles, 50 cases of every error class (within a class the n-th
# case walks its variants); Icarus 4 cycles of them.
#
# subset: every coverage bin the full run hits (269 with the default seed: each error
# class's packets, sites and levels, the valid streams' packets and fields, the raw
# streams' outcomes), in 176 streams: on Icarus the first 2 cycles of the full run's Icarus
# range (every kind twice); on Verilator the first cycle (every kind once) and SUBSET_PICKS,
# the indices a greedy cover took from the full run's (the stream hitting the most bins
# still missing, the lowest index on a tie, until none is missing: 101 picks).
# test_difftest.py's test_the_subset_covers_every_bin_of_the_full_run fails when a change
# to the generator leaves a bin to the full run alone (pick again: the loop is in that test).
SUBSET_PICKS = (25, 27, 28, 31, 32, 33, 35, 36, 40, 50, 53, 57, 61, 64, 75, 77, 78, 82, 83, 85, 86, 89, 91,
                100, 102, 103, 108, 110, 111, 125, 126, 128, 133, 135, 136, 150, 151, 158, 161, 175, 183, 186,
                189, 200, 202, 208, 210, 211, 215, 225, 227, 228, 233, 235, 236, 283, 300, 303, 311, 325, 328,
                350, 353, 358, 366, 375, 383, 400, 403, 408, 425, 450, 475, 483, 485, 500, 511, 525, 528, 550,
                552, 560, 575, 600, 611, 625, 650, 675, 683, 700, 725, 741, 750, 775, 800, 825, 850, 875, 1140,
                1236, 1239)
_SUBSET_ICARUS = tuple(range(1150, 1200))
_SUBSET_VERILATOR = tuple(range(25)) + SUBSET_PICKS
CP = {
    "full": {"plan": {"verilator": tuple(range(0, 1150)), "icarus": tuple(range(1150, 1250))},
             "alone": {"verilator": tuple(range(0, 1250)), "icarus": tuple(range(1150, 1250))},
             "parts": {"verilator": 2, "icarus": 2}},
    "subset": {"plan": {"verilator": _SUBSET_VERILATOR, "icarus": _SUBSET_ICARUS},
               "alone": {"verilator": tuple(sorted(_SUBSET_VERILATOR + _SUBSET_ICARUS)), "icarus": _SUBSET_ICARUS},
               "parts": {"verilator": 1, "icarus": 1}},
}


def pick_cover(bins: list, given: set[int], candidates: list[int]) -> list[int]:
    """The greedy cover SUBSET_PICKS came from: indices of `candidates` until the streams
    of `given` and the picks hit every bin any stream of `bins` (a list by index) hits."""
    every = set().union(*bins)
    left = every - set().union(*(bins[i] for i in given))
    picks = []
    while left:
        j = max(candidates, key=lambda i: (len(bins[i] & left), -i))
        if not bins[j] & left:
            break
        picks.append(j)
        left -= bins[j]
    return sorted(picks)


# The SDMA's campaign (tests/difftest/test_sdma_difftest.py): (first block, blocks) per
# simulator; a block is one stream of every SDMA error class and four valid ones.
# full: 46 blocks on Verilator, the next 4 on Icarus (50 cases of every class).
# subset: the first 16 of Verilator's, the first 2 of Icarus's (18 cases of every class; the
# SDMA's streams have no coverage bins: which packet, ring or IB, are drawn per stream).
SDMA_BLOCKS = {
    "full": {"verilator": (0, 46), "icarus": (46, 4)},
    "subset": {"verilator": (0, 16), "icarus": (46, 2)},
}
