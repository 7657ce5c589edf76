"""memcpy on the GPU: copies of several sizes and alignments through the DMA engine.

Each copy is one DMA_DATA packet (SRC_SEL = ADDRESS), recorded by the UMD's
`Queue.copy()` (API version 2; under version 1 the app builds the packet itself with
`spec.pm4` and records it with `emit_raw`, and the KMD's checker still checks it: both
addresses must lie in this app's buffers). GPU timestamps around each copy give its cost
in cycles; on the reference model, which takes no time to copy, they are 0.

    gpucosim run examples/memcpy.py --sim verilator    # the RTL's DMA engine (rtl/dma/)
    gpucosim run examples/memcpy.py --sim model        # the reference model's

A device without a DMA engine (CAPS.DMA = 0, e.g. `--sim model --no-dma`) cannot copy:
the app says so and exits 2.
"""

from __future__ import annotations

import sys

import numpy as np

import kmd_model
import umd
from umd.winsys import Winsys
from spec import pm4
from testbench.argtypes import OneLineParser, integer_in

# (bytes, source offset, destination offset): aligned, misaligned both ways, big
CASES = [(16, 0, 0), (64, 4, 0), (100, 1, 3), (4096, 0, 0), (4093, 7, 2), (65536, 0, 512)]


def record_copy(q, dst, dst_off: int, src, src_off: int, n: int) -> None:
    """Queue.copy() if this API version has it, else a raw DMA_DATA."""
    try:
        copy = q.copy
    except AttributeError:
        copy = None
    if copy is not None:
        copy(dst, dst_off, src, src_off, n)
        return
    # one packet moves at most the engine's limit, 2^CAPS.DMA_MAX_LOG2 bytes (BYTE_COUNT has 26
    # bits; more is DMA_BYTE_COUNT, which the KMD's checker refuses)
    step = q.device.dev_info.dma_max_bytes
    for i in range(0, n, step):
        k = min(step, n - i)
        q.emit_raw(pm4.dma_data(dst.gpu_addr + dst_off + i, src.gpu_addr + src_off + i, k, cp_sync=1))


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="memcpy", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--seed", type=integer_in(0), default=1, help="the data's random seed, at least 0 (default 1)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    rng = np.random.default_rng(args.seed)

    # what it prints counts the whole device: a file with CAP_PERFMON (docs/architecture.md, "Side channels")
    gpu = umd.open(api_version=2, winsys=Winsys(kmd_model.open_render_node(cap_perfmon=True)))
    info = gpu.info()
    if not info.has_dma:
        print(f"memcpy: this {gpu.name} device has no DMA engine (CAPS.DMA = 0), so it cannot copy; "
              "run it where there is one (the RTL, or the model without --no-dma)")
        gpu.close()
        return 2
    size = max(n + max(s, d) for n, s, d in CASES)
    src = gpu.alloc(size, "gtt")
    dst = gpu.alloc(size, "vram")
    q = gpu.queue()
    print(f"memcpy on {gpu.name}: {len(CASES)} copies, {'Queue.copy()' if 'copy' in dir(q) else 'DMA_DATA via emit_raw'}")
    print(f"{'bytes':>7} {'src+':>5} {'dst+':>5} {'cycles':>7} {'bytes/cycle':>11}  result")
    failures = 0
    for n, so, do in CASES:
        data = rng.integers(0, 256, size, dtype=np.uint8)
        src.map()[:] = data
        dst.map()[:] = 0
        t0 = q.timestamp()
        record_copy(q, dst, do, src, so, n)
        t1 = q.timestamp()
        q.finish()
        got = dst.map()
        ok = np.array_equal(got[do:do + n], data[so:so + n]) and not got[:do].any() and not got[do + n:].any()
        failures += not ok
        cycles = t1.cycles - t0.cycles
        rate = f"{n / cycles:11.2f}" if cycles > 0 else f"{'-':>11}"
        print(f"{n:7d} {so:5d} {do:5d} {cycles:7d} {rate}  {'ok' if ok else 'WRONG'}")
    c = gpu.counters()
    gpu.close()
    print(f"memcpy: {'OK' if not failures else f'{failures} FAILED'} on {gpu.name} — "
          f"{c.hw['dma_bytes_written']} bytes written by the DMA engine")
    return 1 if failures else 0


if __name__ == "__main__":
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel(dma=True))
    sys.exit(main())
