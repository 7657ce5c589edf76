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
