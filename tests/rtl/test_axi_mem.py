"""The AXI memory model (shared-file storage) and the AXI protocol checker.

The cocotb tests live in tests/rtl/cocotb_axi_mem.py; each pytest test here runs a group of
them in one simulator process on a cached build (build/sim/).
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from testbench import sim
from testbench.memory import (CHECKER_CODES, MEM_ENV, SharedMemory, checker_message,
                              checker_source_is_current, configure, render_checker_codes)

HDL = sim.HDL_DIR
CSRC = sim.CSRC_DIR
MODULE = "tests.rtl.cocotb_axi_mem"


def design(data_width: int = 64) -> sim.Design:
    return sim.Design(
        name=f"tb_axi_mem_{data_width}",
        toplevel="tb_axi_mem",
        sources=(HDL / "tb_axi_mem.v", HDL / "axi_mem.v", HDL / "axi_checker.v"),
        parameters={"DATA_WIDTH": data_width},
        c_sources=(CSRC / "gpumem_dpi.c", CSRC / "gpumem.c"),
        vpi_sources=(CSRC / "gpumem_vpi.c", CSRC / "gpumem.c"),
        vpi_name="gpumem",
    )


def _run(simulator: str, width: int, tests: list[str], tag: str, **kw) -> sim.Results:
    """Run a group of cocotb tests in one simulator process (the `simulator` fixture skips absent ones)."""
    res = sim.run(design(width), simulator, MODULE, tests, tag=tag, **kw)
    assert res.ok, res.explain()
    assert res.tests == len(tests), f"expected {len(tests)} cocotb tests, ran {res.tests}\n{res.explain()}"
    return res


def test_axi_mem_64(simulator):
    _run(simulator, 64, ["test_random_rw", "test_backpressure", "test_latency", "test_errors",
                         "test_checker_catches_bad_master", "test_checker_quiet_on_legal_traffic"],
         tag="w64")


def test_axi_checker_alone(simulator):
    """The checker as toplevel, both sides driven by hand (W ahead of AW, slave errors...)."""
    d = sim.Design(name="axi_checker", toplevel="axi_checker", sources=(HDL / "axi_checker.v",))
    res = sim.run(d, simulator, MODULE, ["test_checker_unit"], tag="unit")
    assert res.ok, res.explain()


@pytest.mark.parametrize("width", [32, 128])
def test_axi_mem_widths(simulator, width):
    _run(simulator, width, ["test_random_rw", "test_backpressure", "test_latency",
                            "test_checker_catches_bad_master"], tag=f"w{width}")


def test_axi_mem_read_throughput(simulator, tmp_path, record_property):
    """Streams a large read through the model; prints beats/s (a figure, not a pass bar)."""
    out = tmp_path / "bench.json"
    beats = {"verilator": 1 << 20, "icarus": 1 << 16}[simulator]
    _run(simulator, 64, ["test_bench_read_throughput"], tag="bench",
         extra_env={"GPUCOSIM_BENCH_OUT": str(out), "AXI_MEM_BENCH_BEATS": str(beats)})
    results = json.loads(out.read_text())
    for name, r in results.items():
        record_property(f"{simulator}_{name}_beats_per_s", round(r["beats_per_s"]))
        print(f"\naxi_mem read throughput, {simulator}, {name}: {r['beats']} beats in "
              f"{r['seconds']:.3f} s = {r['beats_per_s']:,.0f} beats/s")


# ----------------------------------------------------------------------------- no simulator

def test_checker_codes_generated():
    """axi_checker.v carries the current rendering of CHECKER_CODES."""
    assert checker_source_is_current(), "axi_checker.v is stale: run `python -m testbench.memory`"
    text = render_checker_codes()
    assert len({c.code for c in CHECKER_CODES}) == len(CHECKER_CODES)
    assert 'CHK_WLAST_MISSING: $display("axi_checker: W burst %0d at 0x%0h: WLAST missing on beat %0d of %0d"' in text
    assert checker_message(0x07, 0x100, 3, 4, 4) == "axi_checker: W burst 3 at 0x100: WLAST missing on beat 4 of 4"


def test_shared_memory_python_side(monkeypatch):
    monkeypatch.delenv(MEM_ENV, raising=False)
    with SharedMemory(1 << 16) as mem:
        assert mem.path.stat().st_size == 1 << 16
        if os.path.isdir("/dev/shm"):
            assert str(mem.path).startswith("/dev/shm/")
        mem.write32(0x10, 0xDEADBEEF)
        assert mem.read(0x10, 4) == bytes.fromhex("efbeadde")
        assert mem.read32(0x10) == 0xDEADBEEF
        mem.view[0x20:0x24] = [1, 2, 3, 4]
        assert mem.read32(0x20) == 0x04030201
        mem.write(0x30, np.arange(8, dtype=np.uint16))
        assert mem.read(0x30, 4) == b"\x00\x00\x01\x00"
        with pytest.raises(IndexError, match="outside"):
            mem.read(0xFFFE, 4)
        mem.export_env()
        assert os.environ[MEM_ENV] == str(mem.path)
        path = mem.path
        # a second mapping (what the simulator's C side does) sees the same bytes
        other = np.memmap(path, dtype=np.uint8, mode="r+")
        other[0x40] = 0x5A
        assert mem.read(0x40, 1) == b"\x5a"
        del other
    assert not path.exists()
    assert MEM_ENV not in os.environ
    with pytest.raises(ValueError, match="multiple of 32"):
        SharedMemory(1000)


def test_configure_validates():
    class Sig:
        value = None

    class Dut:
        def __getattr__(self, name):
            s = Sig()
            setattr(self, name, s)
            return s

    dut = Dut()
    configure(dut, rd_latency=64, stall={"r": 0.25, "ar": 10}, error_window=(0x1000, 0x2000, "SLVERR"))
    assert (dut.cfg_rd_latency.value, dut.cfg_stall_r.value, dut.cfg_stall_ar.value) == (64, 64, 10)
    assert (dut.cfg_err_base.value, dut.cfg_err_limit.value, dut.cfg_err_resp.value) == (0x1000, 0x2000, 2)
    with pytest.raises(ValueError, match="unknown stall channel"):
        configure(dut, stall={"x": 1})
    with pytest.raises(ValueError, match="unknown AXI response"):
        configure(dut, error_window=(0, 1, "BAD"))


@pytest.mark.parametrize("width", [32, 64, 128, 256])
def test_hdl_lint_clean(width):
    """axi_mem, axi_checker and their bench pass `verilator --lint-only -Wall` with no waiver."""
    import subprocess

    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    cmd = [str(sim.verilator_root() / "bin" / "verilator"), "--lint-only", "-Wall", f"-GDATA_WIDTH={width}",
           f"-I{HDL}", "--top-module", "tb_axi_mem", str(HDL / "tb_axi_mem.v"), str(HDL / "axi_mem.v"), str(HDL / "axi_checker.v")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
