"""The harnesses, one per RTL block, each around the real block (the property table's
`harness` column names them: `formal.blocks.mmu:MMUHarness`): axil.py (the CSR block's
AXI4-Lite slave), mux.py (the AXI4 mux), dma.py (the DMA engine), fetch.py (the CP's
read-ahead), mmu.py (the MMU), and the CP's in the cp/ package. What they share (the
Harness base, WhiteBox, the check of each group's rows against the table) is
formal/harness.py."""
