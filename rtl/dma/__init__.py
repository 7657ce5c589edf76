"""The DMA engine: copies and fills of any length and alignment over an AXI4 master
(engine.py has the contract; one file per stage of its pipeline)."""

from .engine import BYTES_WIDTH, DMAEngine

__all__ = ["BYTES_WIDTH", "DMAEngine"]
