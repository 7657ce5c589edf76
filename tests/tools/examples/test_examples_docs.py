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
