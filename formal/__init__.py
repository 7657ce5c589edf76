"""`make formal`: proofs of the front end's properties with SymbiYosys (docs/formal.md).

properties.py is the table (every property, what it says, why it matters); harness.py what
the harnesses share; blocks/ one harness per block around the real RTL (axil.py, mux.py,
fetch.py, dma.py, mmu.py, and the cp/ package: one module per CP group); mutants.py the broken
copies of the RTL each property must catch; run.py runs sby and reports (`python -m
formal`, build/formal.json).
"""
