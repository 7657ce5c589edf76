"""The fast Verilator build evaluates the design's combinational logic once per cycle (issue 13).

Verilator re-evaluates every combinational cone that reads a top-level input or a signal
VPI may write each time the model is evaluated (its "ico" region: twice per cycle under
the HDL clock). Every register's next-state logic of gpu_top reads the reset, so a reset
input read directly, or a bus wire left writable in public.vlt, puts the whole design's
logic there: a third of the co-simulation's time (docs/architecture.md). tb_top gives the
design its reset through a register and public.vlt makes writable only what Python drives;
this checks the generated model keeps it that way, and that the design's logic is
evaluated after no event but the rising edge and a change of the reset.
"""

import re
from pathlib import Path

import pytest

from testbench import sim
from testbench.sim.design import gpu_design

ICO_FUNCTION = re.compile(r"^void \w+___ico_(?:sequent|comb)__\w+\([^)]*\) \{\n(.*?)^\}", re.S | re.M)


def ico_lines(build_dir: Path) -> int:
    """Lines of C++ in the model's ico region functions."""
    return sum(m.group(1).count("\n") for f in build_dir.glob("V*___024root__*.cpp") if "Slow" not in f.name
               for m in ICO_FUNCTION.finditer(f.read_text()))


def test_no_design_logic_is_evaluated_on_every_model_evaluation():
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    d = sim.build(gpu_design(64), "verilator", clock="hdl")
    # what is left copies the inputs Python drives (rst, mmio_cmd, cfg_*): about 20 lines
    assert 0 < ico_lines(d) < 200, f"{ico_lines(d)} lines of C++ in the ico region of {d}"


# the names of the triggers the nba region runs on: Verilator's debug dump of them
TRIGGER_DUMP = re.compile(r"^VL_ATTR_COLD void \w+___dump_triggers__act\(.*?^\}", re.S | re.M)
TRIGGER_NAME = re.compile(r"region trigger index (\d+) is active: (.*?)\\n")
NBA_BLOCK = re.compile(r"if \(\((\d+)ULL & vlSelfRef\.__VnbaTriggered\[(\d+)U\]\)\) \{\n(.*?)^    \}", re.S | re.M)


def comb_triggers(build_dir: Path) -> set[str]:
    """The events after which the model evaluates the design's combinational logic (the
    `nba_comb` functions), as Verilator names its triggers."""
    names: dict[int, str] = {}
    for f in build_dir.glob("V*___024root__*Slow.cpp"):
        for dump in TRIGGER_DUMP.findall(f.read_text()):
            names.update((int(i), n) for i, n in TRIGGER_NAME.findall(dump))
    events: set[str] = set()
    for f in build_dir.glob("V*___024root__*.cpp"):
        for mask, word, body in NBA_BLOCK.findall(f.read_text()):
            if "nba_comb" in body:
                m = int(mask)
                events |= {names.get(64 * int(word) + b, f"trigger {64 * int(word) + b}") for b in range(64) if m >> b & 1}
    return events


def test_the_design_logic_runs_once_per_cycle():
    """Only the rising edge and a change of the reset are followed by the design's logic. A
    reset register loaded at the clock's falling edge made Verilator evaluate the whole
    combinational logic after that edge too: 13% of the CPU time per cycle."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    d = sim.build(gpu_design(64), "verilator", clock="hdl")
    assert comb_triggers(d) == {"@(posedge tb_top.clk)", "@(edge tb_top.rst)"}, d


def test_the_fast_build_runs_our_main_loop_derived_from_the_installed_cocotb():
    """testbench/sim/csrc/verilator_main.cpp is cocotb's main loop with less work per time step;
    an upgraded cocotb's main must be looked at again (it may have fixed or added something)."""
    import hashlib

    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    stock = sim.cocotb_main()
    assert hashlib.sha256(stock.read_bytes()).hexdigest() == sim.COCOTB_MAIN_SHA256, (
        f"cocotb's Verilator main loop ({stock}) is not the one {sim.VERILATOR_MAIN} was derived from: "
        "carry its changes over, then update testbench.sim.COCOTB_MAIN_SHA256")
    d = sim.build(gpu_design(64), "verilator", clock="hdl")
    mk = (d / "Vtop.mk").read_text()
    assert sim.VERILATOR_MAIN.name in mk and "verilator/verilator.cpp" not in mk, d


def model_objects(build_dir: Path) -> set[str]:
    """The object files a Verilator build compiled its model into (not the runtime library
    or the main loop), and any precompiled header it made."""
    return {p.name for p in build_dir.iterdir() if p.name.startswith("Vtop") and p.suffix in (".o", ".gch")}


def test_the_fast_build_compiles_its_model_as_two_files():
    """The per-cycle classes in one C++ file, the run-once ones in another, without the
    precompiled headers Verilator's per-class build makes (docs/architecture.md: a quarter
    of the build's CPU). A Verilator whose makefile no longer takes VK_OBJS from the
    command line would quietly go back to the per-class build."""
    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    d = sim.build(gpu_design(64), "verilator", clock="hdl")
    assert model_objects(d) == set(sim.TWO_UNITS), d


def test_a_block_bench_build_compiles_its_model_as_one_file():
    """The block benches (cocotb's clock) compile their small model as Verilator's one file,
    without precompiled headers (about 40 % of such a build)."""
    from testbench.sim.dma_design import dma_design

    reason = sim.unavailable_reason("verilator")
    if reason:
        pytest.skip(reason)
    d = sim.build(dma_design(64), "verilator")
    assert model_objects(d) == {"Vtop__ALL.o"}, d
