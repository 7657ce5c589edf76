"""A pipeline across two engines: the copy engine (SDMA) stages chunks, the gfx queue (CP)
consumes them, and the two meet only through GPU-side events — the CPU records everything
up front and then just waits for the end.

    copy queue (SDMA ring), per chunk i:          gfx queue (CP ring), per chunk i:
      wait_event(consumed[i - slots])               wait_event(staged[i])
      copy  src[i] -> staging slot i % slots        copy  staging slot -> out[i]
      staged[i] = signal()                          write i into the log
                                                    consumed[i] = signal()

Each chunk is its own submission on each queue, so a dependency (a CS dependency chunk,
held back by the KMD's scheduler as drm_sched does) covers one chunk only: the copy
engine stages chunk i + 1 while the CP consumes chunk i, and a slot is reused only once
the CP has finished with it. On a timeline the SDMA's and the CP's tracks overlap:

    gpucosim run examples/copy_pipeline.py --sim verilator --trace build/pipeline.json
    gpucosim plot build/pipeline.json -o build/pipeline.png
    gpucosim run examples/copy_pipeline.py --sim model -- --chunks 16 --slots 3

Backends without a copy engine (QUEUE_CAPS.SDMA = 0) or without a DMA engine are told
so in one line, exit status 2 (as memcpy's; 1 is a pipeline that ran and failed).
"""

from __future__ import annotations

import sys

import numpy as np

import gpucosim
import umd
from testbench.argtypes import OneLineParser, integer_in


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="copy_pipeline", description=" ".join(__doc__.split("\n\n")[0].split()),
                       options_in_errors=True)
    ap.add_argument("--chunks", type=integer_in(1, 256), default=8,
                    help="chunks through the pipeline (default 8, 1-256)")
    ap.add_argument("--slots", type=integer_in(1, 16), default=2,
                    help="staging slots between the engines (default 2, 1-16)")
    ap.add_argument("--chunk-bytes", type=integer_in(4, 65536, multiple=4), default=4096,
                    help="bytes per chunk, a multiple of 4 (default 4096, 4-65536)")
    args = ap.parse_args(sys.argv[1:] if argv is None else argv)
    n, slots, size = args.chunks, args.slots, args.chunk_bytes

    gpu = umd.open(api_version=2)
    info = gpu.info()
    if not info.has_dma or not info.sdma_rings:
        print(f"copy_pipeline: the {gpu.name} backend has "
              f"{'no DMA engine' if not info.has_dma else 'no copy engine (QUEUE_CAPS.SDMA = 0)'}; "
              "this example needs both")
        gpu.close()
        return 2  # cannot run here (as memcpy): 1 is a pipeline that ran and failed
    try:
        src = gpu.alloc(n * size, "gtt")  # what the CPU produced, before anything runs
        staging = gpu.alloc(slots * size, "vram")  # the slots between the engines
        out = gpu.alloc(n * size, "vram")  # what the consumer delivered
        log = gpu.alloc(4 * n, "gtt")  # the order in which the CP consumed chunks
    except umd.OutOfMemory as e:
        # (256 chunks of 64 KiB are 16 MiB in GTT and 16 MiB in VRAM: more GTT than the
        # reference model's kernel leaves free; said before anything runs, as a bad option)
        gpu.close()
        ap.error(f"--chunks {n} of --chunk-bytes {size} ({n * size} bytes in GTT and again in VRAM) do not fit in "
                 f"the {gpu.name} device's memory ({e}): give fewer or smaller chunks")
    rng = np.random.default_rng(11)
    data = rng.integers(0, 1 << 32, n * size // 4, dtype=np.uint64).astype(np.uint32)
    src.u32[:] = data
    log.u32[:] = 0xFFFF_FFFF

    # Every chunk is a submission on each queue, all recorded before the first one ends:
    # max_inflight must hold them (else a flush waits for the oldest, on the CPU).
    copy_q = gpu.queue(engine="copy", max_inflight=n + 1)
    gfx_q = gpu.queue(engine="gfx", max_inflight=n + 1)
    t0 = gpu.counters().hw["timestamp"]
    staged, consumed = [], []
    for i in range(n):
        slot = (i % slots) * size
        if i >= slots:
            copy_q.wait_event(consumed[i - slots])  # the slot is free once the CP is done with it
        copy_q.copy(staging, slot, src, i * size, size)
        staged.append(copy_q.signal())
        copy_q.flush()
        gfx_q.wait_event(staged[i])
        gfx_q.copy(out, i * size, staging, slot, size)
        gfx_q.write(log, 4 * i, i)
        consumed.append(gfx_q.signal())
        gfx_q.flush()
        gpucosim.progress(i + 1, n, "chunks recorded")
    print(f"copy pipeline on {gpu.name}: {n} chunk{'s' * (n != 1)} of {size} bytes "
          f"through {slots} staging slot{'s' * (slots != 1)}, copy engine -> gfx queue, GPU-side waits only")

    try:
        done = consumed[-1].wait(umd.DEFAULT_TIMEOUT)
    except umd.GpuError as e:
        print(f"copy_pipeline: the pipeline stopped: {e}")
        gpu.close()  # (its buffers and queues: a failed run leaks nothing either)
        return 1
    if not done:
        print("copy_pipeline: the last chunk was never consumed")
        gpu.close()
        return 1
    copy_q.finish()
    gfx_q.finish()
    cycles = gpu.counters().hw["timestamp"] - t0

    bad = [i for i in range(n) if not np.array_equal(out.u32[i * size // 4:(i + 1) * size // 4],
                                                      data[i * size // 4:(i + 1) * size // 4])]
    order = log.u32[:n].tolist()
    gpu.close()
    print(f"{n * size} bytes through the pipeline in {cycles} cycles "
          f"({n * size / max(cycles, 1):.2f} bytes/cycle, each byte copied twice)")
    if bad:
        print(f"copy_pipeline: FAILED — {len(bad)} chunks wrong, first chunk {bad[0]}")
        return 1
    if order != list(range(n)):
        print(f"copy_pipeline: FAILED — the CP consumed chunks in the order {order}")
        return 1
    print(f"copy_pipeline: OK on {gpu.name} — {n} chunk{'s' * (n != 1)}, {slots} slot{'s' * (slots != 1)}")
    return 0


if __name__ == "__main__":
    import kmd_model
    from testbench.refmodel import RefModel

    kmd_model.bind(RefModel(dma=True))
    sys.exit(main())
