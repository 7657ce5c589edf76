"""The generators: every derived form of the spec (RTL CSR block, Python constants, C
header, docs tables) from regs.rdl and the packet tables. `make gen` runs
`python -m spec.gen.generate`; `make check-gen` adds --check."""
