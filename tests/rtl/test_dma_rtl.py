"""The DMA engine and the AXI4 mux on the RTL simulators (cocotb tests in tests/rtl/cocotb_dma.py).

Two engines share the memory model's port through an AXI4Mux (testbench/sim/dma_design.py,
testbench/sim/hdl/tb_dma.v); axi_checker watches that port, so every test also checks the
protocol (bursts within 4 KiB, WLAST, handshake stability, W in AW order, IDs).
"""

from __future__ import annotations

import json
import os

import pytest

from testbench import sim
from testbench.sim.dma_design import dma_design

from tests.conftest import _simulators, shared_run
from tests.cosim.driver_checks import icarus_scope

MODULE = "tests.rtl.cocotb_dma"
DATA_TESTS = ["test_alignments", "test_random", "test_zero_length_and_4k", "test_raw_wait"]
ERROR_TESTS = ["test_read_errors", "test_write_errors", "test_error_cancels_queue", "test_abort"]
WIDTH_TESTS = ["test_alignments", "test_random", "test_read_errors", "test_write_errors"]
BENCH = "test_bench"


# The engines' figures (test_bench) are measured on the same design as a width's tests
# (the default configuration) and in the same simulator process: one start instead of two
# (about 1 s of CPU each, six of them); each test resets the bench and brings its own memory,
# and test_bench reads none of the knobs (DMA_SCALE, DMA_SEED) the width's tests are given.
SESSIONS = {64: (DATA_TESTS + ERROR_TESTS, "w64", {}),
            32: (WIDTH_TESTS, "w32", {"DMA_SCALE": "1", "DMA_SEED": "32"}),
            256: (WIDTH_TESTS, "w256", {"DMA_SCALE": "0.5", "DMA_SEED": "256"})}


def _session(simulator: str, width: int) -> tuple[sim.Results, dict | None]:
    """The width's simulator session, once per pytest run: its results and test_bench's figures."""
    tests, tag, env = SESSIONS[width]

    def run():
        out = sim.BUILD / "runs" / f"dma-figures-{simulator}-{width}-{os.getpid()}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.unlink(missing_ok=True)
        res = sim.run(dma_design(width), simulator, MODULE, tests + [BENCH], tag=tag,
                      extra_env={**env, "GPUCOSIM_BENCH_OUT": str(out)})
        figures = json.loads(out.read_text()) if out.exists() else None
        out.unlink(missing_ok=True)
        return res, figures

    return shared_run(f"dma-{simulator}-w{width}", run)


def _passed(res: sim.Results, tests: list[str]) -> None:
    """Every one of `tests` ran and passed in the session (the others are another test's)."""
    mine = [f for f in res.failures if f[0] in tests or f[0] == "simulator"]
    missing = [t for t in tests if t not in res.passed]
    assert not mine and not missing, f"failed: {mine}, did not pass: {missing}\n{res.explain()}"


# Every width on Verilator; on Icarus make test runs the default width (64, and the small
# configuration and the 4 KiB bursts at 64 and 256 bits), `make test ICARUS=all` the other
# widths' sessions too (docs/verification.md): a width's second run tests the same RTL again,
# Icarus adding its own reading of the Verilog, which the 64-bit session keeps in every run.
ICARUS_WIDTHS = {"subset": (64,), "all": (32, 64, 256)}


def _icarus_widths() -> tuple[int, ...]:
    try:
        return ICARUS_WIDTHS[icarus_scope()]
    except ValueError:  # (tests/conftest.py's pytest_configure reports the bad $GPUCOSIM_ICARUS in one line)
        return ICARUS_WIDTHS["subset"]


def _widths(widths, simulators=None, icarus_widths=None):
    """(simulator, width) for each selected simulator and width, Icarus's only those of its
    scope: the others are not collected."""
    icarus_widths = _icarus_widths() if icarus_widths is None else icarus_widths
    for s in _simulators() if simulators is None else simulators:
        for w in widths:
            if s != "icarus" or w in icarus_widths:
                yield pytest.param(s, w, id=f"{s}-{w}", marks=pytest.mark.xdist_group(f"dma-w{w}"))


def _need(simulator: str) -> None:
    reason = sim.unavailable_reason(simulator)
    if reason:
        pytest.skip(reason)


@pytest.mark.xdist_group("dma-w64")
def test_dma_64(simulator):
    res, _ = _session(simulator, 64)
    _passed(res, DATA_TESTS + ERROR_TESTS)


@pytest.mark.parametrize("simulator, width", list(_widths((32, 256))))
def test_dma_widths(simulator, width):
    _need(simulator)
    res, _ = _session(simulator, width)
    _passed(res, WIDTH_TESTS)


def test_dma_small_config(simulator):
    """Shortest bursts, one read and one write in flight, the smallest FIFO and queue:
    the credit and ordering corner cases, and bursts split every two beats."""
    kw = dict(max_burst_beats=2, fifo_depth=8, max_reads=1, max_writes=1, cmd_depth=2)
    res = sim.run(dma_design(64, **kw), simulator, MODULE, DATA_TESTS + ["test_read_errors", "test_write_errors"],
                  tag="small", extra_env={"DMA_MAX_BURST": "2", "DMA_CMD_DEPTH": "2", "DMA_SCALE": "0.5"})
    assert res.ok, res.explain()


@pytest.mark.parametrize("simulator, width", list(_widths((32, 64, 256))))
def test_dma_figures(simulator, width, record_property):
    """Bus efficiency and fixed cost: printed, not asserted (figures belong to `make bench`)."""
    _need(simulator)
    res, figures = _session(simulator, width)
    _passed(res, [BENCH])
    assert figures is not None, f"test_bench wrote no figures\n{res.explain()}"
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


def test_icarus_runs_the_default_width_and_icarus_all_every_width(request):
    """make test collects every width on Verilator and the 64-bit session on Icarus (its
    other widths are not collected, not skipped); ICARUS=all every width on both."""
    def got(icarus_widths, widths=(32, 64, 256)):
        return sorted(p.values for p in _widths(widths, ("verilator", "icarus"), icarus_widths))
    sub, full = got(ICARUS_WIDTHS["subset"]), got(ICARUS_WIDTHS["all"])
    assert sub == sorted([("verilator", 32), ("verilator", 64), ("verilator", 256), ("icarus", 64)])
    assert full == sorted((s, w) for s in ("verilator", "icarus") for w in (32, 64, 256))
    assert set(SESSIONS) == set(ICARUS_WIDTHS["all"])  # ICARUS=all: every width's session on Icarus
    collected = {(i.callspec.params["simulator"], i.callspec.params["width"]) for i in request.session.items
                 if i.nodeid.split("[")[0].endswith("test_dma_rtl.py::test_dma_figures")}
    if collected:  # (this run's collection: the scope's widths only)
        assert {w for s, w in collected if s == "icarus"} <= set(_icarus_widths())
