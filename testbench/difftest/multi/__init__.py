"""Differential streams that run several queues at once: the CP's two hardware queues
(q0 = RB_*, q1 = CP_HQD1_*) and the SDMA copy engine, on the RTL against the reference
model (docs/hardware.md, "CP hardware queues" and "The SDMA copy engine").

Stream `index` of master seed `seed` is determined by (seed, index): its kind comes from
`PLAN` (one stream of each kind in every block), its contents from a random generator
seeded with "seed/index". A stream programs the three rings (random bases and sizes, rptr
write-backs drawn), CP_QUEUE_PRIORITY and the memory model's back-pressure, preloads
memory and runs a driver program (`steps`) that submits to the engines in pieces, with
delays, CPU writes that release waits, halts, settles, observations and queue resets.

What the contract fixes, and so what is compared (`compare`):
- every observation point's registers (all readable ones at the end, the hardware-driven
  ones before; time and cycle counters aside, as `refmodel.snapshot`), each queue's error
  registers included: the exact code, level, opcode, address and offset per queue;
- the IH entries, **in order per producer** (q0, q1, SDMA: the (CLIENT_ID, RING_ID) pair),
  timestamps aside: each engine runs its packets in order, so its own entries come in a
  fixed order, but how the producers' entries interleave in the IH ring depends on
  timing (which queue the arbiter picked when, and the SDMA beside the CP);
- the whole memory image except the IH ring's slots (the same entries, interleaved by
  timing; compared above) and what a stream declares undefined (`undefined`);
- how each engine ended (idle, the error code its kind planted, stuck in a poll) and
  each backend's own checks (hangs, the AXI protocol checker, MMIO errors).

Timing freedoms the generator keeps out of the results: queues never write each other's
memory except in the *ordered* phase (both queues loaded while the CP is halted, then
released: only then is the packet order across queues fixed by CP_QUEUE_PRIORITY and the
turns, so there both queues write shared cells and the last writer is compared); a queue
whose doorbell the stream makes bad has finished its work first (a doorbell error of the
queue not running is latched at the next packet boundary on the RTL, at the write on the
model: with nothing pending the queue stops at the same place); a CP/SDMA rendezvous
through memory (WAIT_REG_MEM on an SDMA FENCE, POLL_REGMEM on a CP write) is a DAG, so it
ends the same whenever each poll happens (a parked poll re-polls after POLL_INTERVAL).

Modules: gen (the streams: kinds, layout slices, the generator), run (the driver both
backends run, the comparison, the cocotb side).
"""

from .careless import RING_REGS
from .gen import (CP_FAULTS, ENGINES, ERROR_CLASSES, IH_LOG2_DW, KMD_TIMEOUT, M32, ORDERED, PLAN, RPTR_WB, SETTLE,
                  SHARED, MultiStream, make)
from .run import (COMPARED, Driver, by_producer, campaign, check_pair, compare, drive, expected, explain, ih_slots,
                  model_options, producer, record, replay_command, run_model, undefined)

__all__ = ["COMPARED", "CP_FAULTS", "ENGINES", "ERROR_CLASSES", "IH_LOG2_DW", "KMD_TIMEOUT", "M32", "ORDERED", "PLAN",
           "RING_REGS", "RPTR_WB", "SETTLE", "SHARED", "Driver", "MultiStream", "by_producer", "campaign", "check_pair", "compare",
           "drive", "expected", "explain", "ih_slots", "make", "model_options", "producer", "record", "replay_command", "run_model",
           "undefined"]
