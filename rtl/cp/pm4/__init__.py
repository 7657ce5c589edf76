"""The CP's PM4 packets, one module per packet family: each holds its packet's states in the
parser's state machine (rtl/cp/parser.py) and what its first step loads and starts.

- write_data.py: WRITE_DATA, collected block by block into the block buffer;
- indirect_buffer.py: INDIRECT_BUFFER and CHAIN, an IB level's fetcher;
- wait_reg_mem.py: WAIT_REG_MEM, its poll and the yield to the other queue;
- release_mem.py: RELEASE_MEM, the fence write and its interrupt;
- dma_data.py: DMA_DATA, the DMA engine's port.

Each sees the CP's signals through its context `c` (rtl/cp/processor.py)."""
