"""The single source: the SystemRDL register map (regs.rdl) and the PM4 packet table
(packets.py), plus what is derived from them."""
