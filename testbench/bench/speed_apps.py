"""GPU-bound apps for the model-vs-RTL speed comparison (`make bench`, model_speedup).

The examples/ apps are mostly driver work: the UMD and KMD run the same Python on every
backend, so they show what a user waits for but little of what the backend itself costs.
These two keep the device busy with few ioctls, so the backend's cost dominates. Each
checks its result and returns 1 when it is wrong, so a fast wrong answer is not counted.

    gpucosim run testbench.bench.speed_apps:long_ib --sim model --stats
    gpucosim run testbench.bench.speed_apps:big_copy --sim verilator --stats
"""

from __future__ import annotations

import numpy as np

import umd

LONG_IB_PACKETS = 3000
BIG_COPY_BYTES = 1 << 20


def long_ib(packets: int = LONG_IB_PACKETS) -> int:
    """One submission of `packets` WRITE_DATA packets (4 dwords each) into one buffer,
    through chained IBs; the buffer must hold every packet's data."""
    gpu = umd.open(api_version=2)
    buf = gpu.alloc(16 * packets, "vram")
    q = gpu.queue(flush_threshold=packets + 1)  # one flush: the CP runs the whole stream
    rng = np.random.default_rng(1)
    data = rng.integers(0, 1 << 32, (packets, 4), dtype=np.uint32)
    for i in range(packets):
        q.write(buf, 16 * i, data[i])
    q.finish()
    ok = np.array_equal(buf.u32.reshape(packets, 4), data)
    gpu.close()
    print(f"long_ib: {packets} WRITE_DATA packets in one submission: {'OK' if ok else 'WRONG'}")
    return 0 if ok else 1


def big_copy(size: int = BIG_COPY_BYTES) -> int:
    """A `size`-byte fill, then a copy of it with a misaligned source, on the DMA engine."""
    gpu = umd.open(api_version=2)
    src = gpu.alloc(size + 8, "gtt")
    dst = gpu.alloc(size, "vram")
    q = gpu.queue()
    q.fill(src, 0, size + 8, 0x0403_0201)
    q.copy(dst, 0, src, 3, size)
    q.finish()
    # byte a of a fill is byte (a mod 4) of the value: from offset 3 the copy reads 4,1,2,3,...
    want = np.resize(np.array([4, 1, 2, 3], dtype=np.uint8), size)
    ok = np.array_equal(dst.map(), want)
    gpu.close()
    print(f"big_copy: {size} bytes filled and copied by the DMA engine: {'OK' if ok else 'WRONG'}")
    return 0 if ok else 1
