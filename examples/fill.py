"""Fill buffers on the GPU with a 32-bit pattern (`Queue.fill()`, API version 2).

The UMD records a fill as DMA_DATA with SRC_SEL = DATA when the device has a DMA engine,
and as WRITE_DATA packets carrying the pattern when it has none: the same call works
on both, at very different costs, which the app measures with GPU timestamps.

    gpucosim run examples/fill.py --sim model
    gpucosim run examples/fill.py --sim verilator           # the RTL's DMA engine (rtl/dma/)
    gpucosim run examples/fill.py --sim model --no-dma      # WRITE_DATA: no DMA engine
"""

from __future__ import annotations

import sys

import kmd_model
import umd
from umd.winsys import Winsys

SIZES = [4, 64, 1000, 4096, 65536]  # bytes, multiples of 4
PATTERN = 0xA5C3_0F01


def main() -> int:
    # what it prints counts the whole device: a file with CAP_PERFMON (docs/architecture.md, "Side channels")
    gpu = umd.open(api_version=2, winsys=Winsys(kmd_model.open_render_node(cap_perfmon=True)))
    info = gpu.info()
    how = "DMA_DATA fills (the DMA engine)" if info.has_dma else "WRITE_DATA packets (no DMA engine)"
    buf = gpu.alloc(max(SIZES) + 4096, "vram")
    q = gpu.queue()
    print(f"fill on {gpu.name}: {how}")
    print(f"{'bytes':>7} {'cycles':>7} {'bytes/cycle':>11}  result")
    failures = 0
    for n in SIZES:
        buf.map()[:] = 0
        t0 = q.timestamp()
        q.fill(buf, 4, n, PATTERN)
        t1 = q.timestamp()
        q.finish()
        words = buf.u32
        ok = (words[0] == 0 and (words[1:1 + n // 4] == PATTERN).all() and words[1 + n // 4] == 0)
        failures += not ok
        cycles = t1.cycles - t0.cycles
        rate = f"{n / cycles:11.2f}" if cycles > 0 else f"{'-':>11}"  # the model has no cycles
        print(f"{n:7d} {cycles:7d} {rate}  {'ok' if ok else 'WRONG'}")
    c = gpu.counters()
    gpu.close()
    print(f"fill: {'OK' if not failures else f'{failures} FAILED'} on {gpu.name} — packets: "
          + ", ".join(f"{k} {v}" for k, v in c.packets.items() if v))
    return 1 if failures else 0


if __name__ == "__main__":
    from testbench.argtypes import script_takes_no_arguments

    script_takes_no_arguments("fill", __doc__)
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel(dma=True))
    sys.exit(main())
