"""What an example's docstring quotes of its own output is its output (docs/tutorial.md's
listings are checked the same way by test_tutorial.py)."""

from __future__ import annotations

import re

import kmd_model
from testbench.refmodel import RefModel


def test_gpu_errors_docstring_quotes_the_error_it_raises(capsys):
    """gpu_error.py's docstring quoted 'IB+0x1c ..., recorded by Queue.emit_raw() #3' long
    after the run said IB+0x14 and #4."""
    from examples import gpu_error

    kmd_model.bind(RefModel())
    try:
        assert gpu_error.main() == 0
    finally:
        kmd_model.unbind()
    out = capsys.readouterr().out
    message, call = re.search(r'GpuError\("([^"]+)",\s+recorded by (\w+\.\w+\(\) #\d+)\)', gpu_error.__doc__).groups()
    assert f"the UMD raised: GPU error: {message} (recorded by {call})" in out, out


def test_the_pools_table_is_what_pools_py_gives_on_the_model():
    """docs/architecture.md's table of examples/pools.py (10,000 allocations, pools on and
    off): the model's rows said 189 and 29,904 ioctls and "158x fewer" long after every flush
    had come to cost a CTX QUERY_STATE more (the UMD's proof that its jobs ended well: 157
    flushes, 346 and 30,061 ioctls, 87x)."""
    from pathlib import Path

    from examples import pools

    doc = (Path(__file__).resolve().parents[3] / "docs" / "architecture.md").read_text()
    runs = []
    for on in (True, False):
        kmd_model.bind(RefModel())
        try:
            runs.append(pools.run(on, 10_000, 256, 1))
        finally:
            kmd_model.unbind()
    for r in runs:
        row = (f"| model | {'on' if r.pools else 'off'} | {r.ioctls:,} | {r.cycles:,} | {r.mem_bytes // 1024:,} KiB | "
               f"{r.va_bytes // 1024:,} KiB |")
        assert row in doc, row
    on, off = runs
    assert f"× fewer ioctls on the RTL,\n{off.ioctls / on.ioctls:.0f}× on the model;" in doc


def test_memcpys_version_1_copy_moves_more_than_one_packet():
    """memcpy.py's docstring: under API version 1 the app builds DMA_DATA itself
    (record_copy, the code a reader copies). It split a copy into packets of 2 MiB - 4 bytes
    ("BYTE_COUNT is 21 bits"), twice the engine's 1 MiB limit: any copy above 1 MiB was a
    SubmitError, "BYTE_COUNT 2097148 is over the DMA engine's limit of 1048576 bytes"."""
    import numpy as np

    import umd
    from examples import memcpy

    kmd_model.bind(RefModel())
    try:
        gpu = umd.open(api_version=1)
        n = (3 << 20) + 12
        src, dst = gpu.alloc(n, "vram"), gpu.alloc(n, "vram")
        src.map()[:n] = np.arange(n, dtype=np.uint32).astype(np.uint8)
        q = gpu.queue()
        memcpy.record_copy(q, dst, 0, src, 0, n)
        q.finish()
        assert np.array_equal(dst.map()[:n], src.map()[:n])
        gpu.close()
    finally:
        kmd_model.unbind()
