"""The command processor (docs/hardware.md is its contract), one module per concept:

- processor.py: the CommandProcessor component — ring and doorbell, the parser FSM
  (header, payload, the table-driven checks of packets.py), errors, soft reset, status;
- fetch.py: the Fetcher (one per level: ring, IB1, IB2), reading ahead in bursts;
- writer.py: the BlockWriter, every CP memory write as one aligned 32-byte block;
- bus_port.py: the AR slice shared by the fetchers and polls, R routing by ID;
- status.py: STATUS, CP_ERROR and the performance counters;
- one module per packet family in pm4/: write_data.py, indirect_buffer.py, wait_reg_mem.py,
  release_mem.py, dma_data.py (the DMA engine's port); and ih.py (IH entries).
"""

from .processor import ID_IB1, ID_IB2, ID_POLL, ID_RING, ID_WRITE, CommandProcessor, pack_fields

__all__ = ["CommandProcessor", "pack_fields", "ID_RING", "ID_IB1", "ID_IB2", "ID_POLL", "ID_WRITE"]
