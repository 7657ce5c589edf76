"""The copy engine's (SDMA's) packets: the table (packets.py, AMD's SDMA v4 layouts) and
its codec (codec.py: builders, decoder, disassembler), as spec/packets.py and spec/pm4.py
are for PM4. `from spec import sdma` gives the codec: `sdma.copy_linear(...)`,
`sdma.decode(...)`; the table is `spec.sdma.packets`.
"""

from spec.sdma import codec as _codec

__all__ = [*_codec.__all__, "packet_length"]
globals().update((name, getattr(_codec, name)) for name in __all__)
