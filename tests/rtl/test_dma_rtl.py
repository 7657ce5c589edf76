"""The DMA engine and the AXI4 mux on the RTL simulators (cocotb tests in tests/rtl/cocotb_dma.py).

Two engines share the memory model's port through an AXI4Mux (testbench/sim/dma_design.py,
testbench/sim/hdl/tb_dma.v); axi_checker watches that port, so every test also checks the
protocol (bursts within 4 KiB, WLAST, handshake stability, W in AW order, IDs).
"""

from __future__ import annotations

import json

import pytest

from testbench import sim
from testbench.sim.dma_design import dma_design

MODULE = "tests.rtl.cocotb_dma"
DATA_TESTS = ["test_alignments", "test_random", "test_zero_length_and_4k", "test_raw_wait"]
ERROR_TESTS = ["test_read_errors", "test_write_errors", "test_error_cancels_queue", "test_abort"]


def _run(simulator: str, width: int, tests: list[str], tag: str, **kw) -> sim.Results:
    res = sim.run(dma_design(width), simulator, MODULE, tests, tag=tag, **kw)
    assert res.ok, res.explain()
    assert res.tests == len(tests), f"expected {len(tests)} cocotb tests, ran {res.tests}\n{res.explain()}"
    return res


def test_dma_64(simulator):
    _run(simulator, 64, DATA_TESTS + ERROR_TESTS, tag="w64")


@pytest.mark.parametrize("width", [32, 256])
def test_dma_widths(simulator, width):
    scale = "0.5" if width == 256 else "1"
    _run(simulator, width, ["test_alignments", "test_random", "test_read_errors", "test_write_errors"],
         tag=f"w{width}", extra_env={"DMA_SCALE": scale, "DMA_SEED": str(width)})


def test_dma_small_config(simulator):
    """Shortest bursts, one read and one write in flight, the smallest FIFO and queue:
    the credit and ordering corner cases, and bursts split every two beats."""
    kw = dict(max_burst_beats=2, fifo_depth=8, max_reads=1, max_writes=1, cmd_depth=2)
    res = sim.run(dma_design(64, **kw), simulator, MODULE, DATA_TESTS + ["test_read_errors", "test_write_errors"],
                  tag="small", extra_env={"DMA_MAX_BURST": "2", "DMA_CMD_DEPTH": "2", "DMA_SCALE": "0.5"})
    assert res.ok, res.explain()


@pytest.mark.parametrize("width", [32, 64, 256])
def test_dma_figures(simulator, width, tmp_path, record_property):
    """Bus efficiency and fixed cost: printed, not asserted (figures belong to `make bench`)."""
    out = tmp_path / "dma.json"
    _run(simulator, width, ["test_bench"], tag=f"bench{width}", extra_env={"GPUCOSIM_BENCH_OUT": str(out)})
    figures = json.loads(out.read_text())
    print(f"\nDMA figures, {simulator}, {width}-bit bus:")
    for name, v in figures.items():
        record_property(f"{simulator}_dw{width}_{name}", v)
        print(f"  {name}: {v:.4f}" if isinstance(v, float) else f"  {name}: {v}")


def test_dma_bursts_longer_than_4k(simulator):
    """256-beat bursts on a 256-bit bus would be 8 KiB long: only the 4 KiB boundary cuts
    them, so this is the one configuration where that clamp shows (the AXI checker flags a
    burst crossing 4 KiB, and the cocotb side predicts the split bursts of write errors)."""
    kw = dict(max_burst_beats=256, fifo_depth=1024)
    res = sim.run(dma_design(256, **kw), simulator, MODULE,
                  ["test_zero_length_and_4k", "test_alignments", "test_write_errors"], tag="long",
                  extra_env={"DMA_MAX_BURST": "256", "DMA_SCALE": "0.5", "DMA_SEED": "4096"})
    assert res.ok, res.explain()
    assert res.tests == 3, res.explain()


def test_dma_bench_cache_key_follows_every_rtl_file(tmp_path, monkeypatch):
    """The DMA bench's cached Verilog is keyed by every source of the engine: an edit to
    rtl/dma/write.py or spec/vm.py (its AxUSER) gives a new key, so no stale build runs."""
    import shutil

    from testbench.sim import design, dma_design as dd

    for folder in ("rtl", "spec"):
        shutil.copytree(sim.ROOT / folder, tmp_path / folder, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(design, "ROOT", tmp_path)
    monkeypatch.setattr(dd, "ROOT", tmp_path, raising=False)  # (where it kept its own)
    keys = [dd._digest("dw64")]
    for edited in ("rtl/dma/write.py", "spec/vm.py", "rtl/bus.py"):
        with open(tmp_path / edited, "a") as f:
            f.write("\n# edited\n")
        keys.append(dd._digest("dw64"))
    assert len(set(keys)) == len(keys), keys
