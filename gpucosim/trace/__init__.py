"""What the drivers and the hardware did, on one timeline (`gpucosim run --trace`):
`timeline` is the format (Chrome trace JSON for Perfetto), `swtrace` the drivers' half
(UMD calls, ioctls, KMD events), `hwtrace` and `sdma_monitor` the hardware's half (watched
from cocotb), `waves` the waveforms (`--waves`), `plot` a timeline drawn as a picture.
"""
