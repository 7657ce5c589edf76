"""The raw harness of `make bench` (testbench/bench/raw.py) outside the simulator: a harness
that hangs is stopped and named, not left to spin (one did, for 80 minutes of a shared
machine's CPU, before this timeout existed)."""

from __future__ import annotations

import stat

import pytest

from testbench.bench import raw


def test_a_hung_harness_times_out_with_its_output(tmp_path, monkeypatch):
    harness = tmp_path / "tb_raw"
    harness.write_text("#!/bin/sh\necho 'cycle 17'\nexec sleep 60\n")
    harness.chmod(harness.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(raw, "build_raw", lambda simulator, data_width=64: tmp_path)
    monkeypatch.setattr(raw, "RAW_TIMEOUT_S", 1)
    with pytest.raises(RuntimeError) as e:
        raw.run_raw(raw.idle_work(100), "verilator")
    msg = str(e.value)
    assert msg.startswith("raw verilator run of idle did not finish in 1 s (a hang: its last output follows)")
    assert "cycle 17" in msg
