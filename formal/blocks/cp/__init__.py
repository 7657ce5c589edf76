"""The command processor (rtl/cp/): ring and doorbell, IH ring, errors and soft reset. One
harness (harness.py, its world in env.py) and six groups, one module each (ring.py, ih.py,
errors.py, bus.py, reset.py, live.py), each stating its own rows of the table over the same
environment (and the strengthening invariants its induction needs):

- the registers are free (the CSR block's ports, from its signature): the configuration
  (ring and IH base and size, write-back addresses and enables) is chosen once, the rest
  (doorbell writes, RB_CNTL.ENABLE, HALT, SOFT_RESET, PERF_CLEAR, the timestamp) anew
  every cycle; the driver moves IH_RPTR only forward, never past IH_WPTR (or sets it to
  IH_WPTR);
- memory is a free AXI slave that answers reads in order with free data and free
  responses (OKAY, SLVERR, DECERR), so every packet, every malformed one and every bus
  error is possible; it keeps AXI's rules (one R beat per requested beat, RLAST on the
  last, B only after AW and the last W beat). With `latency` it also answers within that
  many cycles (for bounds in cycles: cp_reset, cp_live).

The ring is at most 2^(ring_log2_max+1) dwords (RB_SIZE ≤ ring_log2_max): the CP's
pointer arithmetic (masks from RB_SIZE, free-running 32-bit pointers) is the same
at every size, and a small ring wraps within a few packets.
"""

from .env import free_csr
from .harness import CPHarness

__all__ = ["CPHarness", "free_csr"]
