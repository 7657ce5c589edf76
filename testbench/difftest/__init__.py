"""Lockstep differential testing of the RTL against the reference model (issue 5).

    python -m testbench.difftest --sim verilator --streams 500      # a campaign
    python -m testbench.difftest --sim verilator --seed 1234 --replay 17 [--step]

See docs/verification.md. The layers:
- streams/: what the CP's streams are and how they are made (layout, stream, gen,
  malformed, access_faults, raw, vm; file reads --streams-file);
- driver (runs a stream on any Device), compare (RTL vs model, the first differing
  packet), coverage, campaign (seeds, plan, report, progress);
- simulator/: the campaign in simulator processes (runner starts them, rtl is the cocotb
  side, prefetch makes the model's side ahead in the launcher);
- the other families: sdma (the SDMA engine's streams), multi/ (both CP queues and the
  SDMA at once).
"""

from .campaign import CYCLE, Report, make_stream, master_seed, plan, replay_command, run_model, run_model_pair
from .compare import Verdict, compare
from .driver import Observation, execute
from .streams.gen import Caps
from .streams.malformed import ERROR_CLASSES
from .streams.stream import Stream

__all__ = ["CYCLE", "Caps", "ERROR_CLASSES", "Observation", "Report", "Stream", "Verdict", "compare", "execute",
           "make_stream", "master_seed", "plan", "replay_command", "run_model", "run_model_pair"]
