"""The SDMA copy engine (docs/hardware.md, "The SDMA copy engine"), one module per concept:

- engine.py: the SdmaEngine component — its ring and doorbell, the ring and IB fetchers
  (rtl/cp/fetch.py's Fetcher), the parser FSM, queue reset, status and counters;
- errors.py: the error latch (SDMA_ERROR*, in two steps), the parser's `fail()` and the
  queue reset's request;
- packets.py: what the parser checks, derived from spec/sdma/packets.py (kind, length,
  unsupported values, alignment);
- read_port.py: the AR slice shared by the fetchers and POLL_REGMEM's reads;
- one executor per packet family: copy_fill.py (COPY_LINEAR and CONSTANT_FILL on the
  engine's own DMA engine, rtl/dma/), write.py (WRITE_LINEAR, FENCE, the rptr
  write-back), poll_regmem.py, indirect_buffer.py, trap.py (TRAP and the engine's IH
  entries, which the CP's IH writer appends: rtl/cp/ih.py).
"""

from .engine import SDMA_BYTES_WIDTH, SdmaEngine

__all__ = ["SdmaEngine", "SDMA_BYTES_WIDTH"]
