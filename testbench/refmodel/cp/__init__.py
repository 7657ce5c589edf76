"""The reference model's command processor, as the RTL's rtl/cp/ is split: processor.py
(CommandProcessor: the doorbell, error latching, the IH writer and every PM4 packet's
`_op_*`), queues.py (the second hardware queue, CP_HQD1_*), packets.py (the PM4 packet
table precomputed for the per-packet path, and the CP's error and wait records, which
the model's memory and DMA raise too)."""

from .processor import CommandProcessor

__all__ = ["CommandProcessor"]
