"""A careless driver's steps in the multi-queue streams (testbench/difftest/multi/gen.py draws
them into some streams): writes to an enabled ring's base, size and write-back address,
which the hardware ignores, and rings paused (ENABLE cleared, then set) mid-run, which end
where they would without the pause. Each is drawn from a generator of its own, so the rest
of every stream is what it was without them."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from kmd_model import regs

if TYPE_CHECKING:
    from .gen import MultiStream

# A ring's base, size and pointer write-back address registers (the rptr's; the IH ring's
# wptr's), each locked by its ring's enable (spec/regs.rdl swwel)
RING_REGS = {"q0": ("RB_BASE_LO", "RB_BASE_HI", "RB_SIZE", "RB_RPTR_ADDR_LO", "RB_RPTR_ADDR_HI"),
             "q1": ("CP_HQD1_RB_BASE_LO", "CP_HQD1_RB_BASE_HI", "CP_HQD1_RB_SIZE", "CP_HQD1_RB_RPTR_ADDR_LO",
                    "CP_HQD1_RB_RPTR_ADDR_HI"),
             "sdma": ("SDMA_RB_BASE_LO", "SDMA_RB_BASE_HI", "SDMA_RB_CNTL", "SDMA_RB_RPTR_ADDR_LO",
                      "SDMA_RB_RPTR_ADDR_HI"),
             "ih": ("IH_BASE_LO", "IH_BASE_HI", "IH_SIZE", "IH_WPTR_ADDR_LO", "IH_WPTR_ADDR_HI")}
RING_WRITES = 0.3  # the share of streams with careless writes to an enabled ring's registers


def ring_writes(s: MultiStream) -> None:
    """A careless driver: in some streams, 1-3 writes of random values to a ring's base,
    size or pointer write-back address while every ring is enabled and running (after a
    submission), which the hardware ignores (docs/hardware.md, "Ring and doorbell"): had
    either side taken one, its ring would run elsewhere or write its rptr elsewhere, and
    the final registers differ (the IH wptr's address too: these streams leave
    IH_CNTL.WPTR_WB clear, so only its read-back tells). Drawn from a generator of their
    own, so the rest of every stream is what it was without them. SDMA_RB_CNTL's write
    keeps RB_ENABLE and RPTR_WRITEBACK_ENABLE (only RB_SIZE is locked) and changes RB_SIZE."""
    r = random.Random(f"gpucosim-multi-difftest/{s.seed}/{s.index}/ring-writes")
    if r.random() >= RING_WRITES:
        return
    at = [i for i, st in enumerate(s.steps) if st[0] == "submit"]
    for i in sorted(r.sample(at, min(len(at), r.randrange(1, 4))), reverse=True):
        e = r.choice(tuple(RING_REGS))
        name = r.choice(RING_REGS[e])
        if name == "SDMA_RB_CNTL":
            f = regs.SDMA_RB_CNTL
            value = (f.RB_ENABLE.put(1) | f.RPTR_WRITEBACK_ENABLE.put(int(s.rptr_wb["sdma"]))
                     | f.RB_SIZE.put(r.choice([x for x in range(32) if x != s.rings["sdma"][1]])))
        else:
            value = r.getrandbits(32)
        s.steps.insert(i + 1, ("ring_write", name, value))


RING_PAUSES = 0.3  # the share of streams whose rings are paused (ENABLE cleared, then set) mid-run
PAUSE_CYCLES = (0, 2, 5, 6, 8, 12, 20, 40, 100, 300)  # how long a pause lasts: from before the
# doorbell is taken to well into a packet (64-bit bus: a header is taken about 6 cycles on)


def ring_pauses(s: MultiStream) -> None:
    """A driver that pauses a ring: in some streams, 1-3 times right after a submission, the
    ring's enable (RB_CNTL.ENABLE, CP_HQD1_RB_CNTL.ENABLE, SDMA_RB_CNTL.RB_ENABLE) is cleared
    and set again some cycles later (step "pause"). hardware.md pauses the ring at a packet
    boundary and resumes it there, so the stream ends as it would without the pause; a ring
    that held a packet half taken, or lost or repeated one, ends elsewhere. Drawn from a
    generator of their own, so the rest of every stream (and the careless writes) is what it
    was without them."""
    r = random.Random(f"gpucosim-multi-difftest/{s.seed}/{s.index}/ring-pauses")
    if r.random() >= RING_PAUSES:
        return
    at = [i for i, st in enumerate(s.steps) if st[0] == "submit"]
    for i in sorted(r.sample(at, min(len(at), r.randrange(1, 4))), reverse=True):
        s.steps.insert(i + 1, ("pause", s.steps[i][1], r.choice(PAUSE_CYCLES)))
