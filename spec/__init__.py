"""The single source: the SystemRDL register map (regs.rdl) and the PM4 packet table
(packets.py), plus what is derived from them.

- regs.rdl: the register map; ih.py the IH ring entry; vm.py page-table entries and faults;
  gfx9.py where this device differs from AMD's gfx9 on purpose.
- layout.py: the shapes a packet table is written in (Field, Value, Rule, Tail, Layout);
  packets.py: the PM4 table; pm4.py: its builders, decoder and disassembler (builder_args.py:
  how builders check their arguments, shared with SDMA; generated.py: how both codecs run the
  code they generate from their tables); rules.py: the CP's checks as data.
- sdma/: the copy engine's packet table (sdma/packets.py) and codec (sdma/codec.py).
- gen/: the generators of every derived form (`make gen`: `python -m spec.gen.generate`).
"""
