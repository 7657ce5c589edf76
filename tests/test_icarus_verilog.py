"""What Icarus compiles of Amaranth's Verilog (testbench/icarus_verilog.py): each module's
register processes merged into one per clock, with the same values cycle by cycle."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from amaranth import ClockDomain, ClockSignal, Elaboratable, Module, ResetSignal, Signal
from amaranth.back import verilog

from testbench.icarus_verilog import AMARANTH_HEADER, icarus_sources, merge_register_blocks

_ASSIGN = re.compile(r"<=[^;]*;")
_ONE_REGISTER = re.compile(r"always @\(posedge [\w$]+\)\n[ \t]*[^\n;]*<=")


class _Sub(Elaboratable):
    """A shift register and a register loaded on an enable: NBAs whose order matters."""

    def __init__(self):
        self.d = Signal(8)
        self.en = Signal()
        self.q = Signal(8)

    def elaborate(self, platform):
        m = Module()
        a, b, held = Signal(8), Signal(8), Signal(8, init=0x5A)
        m.d.sync += [a.eq(self.d), b.eq(a), self.q.eq(b ^ held)]
        with m.If(self.en):
            m.d.sync += held.eq(a + b)
        return m


class _Top(Elaboratable):
    """Two clock domains (the second one's clock an input), a counter and a submodule."""

    def __init__(self):
        self.oclk = Signal()
        self.d = Signal(8)
        self.en = Signal()
        self.out = Signal(8)
        self.count = Signal(16)
        self.slow = Signal(8)

    def elaborate(self, platform):
        m = Module()
        m.domains.other = ClockDomain()
        m.d.comb += [ClockSignal("other").eq(self.oclk), ResetSignal("other").eq(ResetSignal())]
        m.submodules.sub = sub = _Sub()
        m.d.comb += [sub.d.eq(self.d), sub.en.eq(self.en), self.out.eq(sub.q)]
        m.d.sync += self.count.eq(self.count + 1)
        m.d.other += self.slow.eq(self.slow + self.out)
        return m


def _convert(name: str) -> str:
    top = _Top()
    return verilog.convert(top, name=name, emit_src=False,
                           ports=[top.oclk, top.d, top.en, top.out, top.count, top.slow])


def test_register_processes_become_one_per_module_and_clock():
    text = _convert("top")
    merged = merge_register_blocks(text)
    assert len(_ONE_REGISTER.findall(text)) >= 6
    assert not _ONE_REGISTER.findall(merged)
    assert sorted(_ASSIGN.findall(merged)) == sorted(_ASSIGN.findall(text))  # every assignment kept
    for module in re.findall(r"^module .*?^endmodule", merged, re.M | re.S):
        clocks = re.findall(r"always @\(posedge ([\w$]+)\) begin", module)
        assert len(clocks) == len(set(clocks))


def test_other_processes_are_left_as_they_are():
    text = ("module m(input clk, input en, input [1:0] a, input [7:0] d);\n"
            "  reg [7:0] mem [0:3];\n"
            "  always @(posedge clk) begin\n    if (en)\n      mem[a] <= d;\n  end\n"
            "  always @(negedge clk)\n    x <= d;\n"
            "endmodule\n")
    assert merge_register_blocks(text) == text


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog not found: apt-get install iverilog")
def test_merged_registers_hold_the_same_values_every_cycle(tmp_path):
    """Amaranth's Verilog and its merged copy side by side under Icarus, on random inputs:
    every output equal at every edge of both clocks."""
    (tmp_path / "orig.v").write_text(_convert("orig"))
    (tmp_path / "merged.v").write_text(merge_register_blocks(_convert("merged")))

    def inst(module: str, x: str) -> str:
        return (f"  {module} {module}_i (.clk(clk), .rst(rst), .oclk(oclk), .d(d), .en(en), "
                f".out(out_{x}), .count(count_{x}), .slow(slow_{x}));\n")

    (tmp_path / "tb.v").write_text(f"""
module tb;
  reg clk = 0, oclk = 0, rst = 1, en = 0;
  reg [7:0] d = 0;
  wire [7:0] out_a, out_b, slow_a, slow_b;
  wire [15:0] count_a, count_b;
{inst("orig", "a")}{inst("merged", "b")}  integer i;
  initial begin
    for (i = 0; i < 400; i = i + 1) begin
      #5 clk = ~clk;
      if (i % 3 == 0) oclk = ~oclk;
      if (i == 6) rst = 0;
      #1 d = $random; en = $random;
      if ({{out_a, count_a, slow_a}} !== {{out_b, count_b, slow_b}}) begin
        $display("MISMATCH at %0d: %h %h %h vs %h %h %h", i, out_a, count_a, slow_a, out_b, count_b, slow_b);
        $finish;
      end
    end
    $display("SAME %h %h %h", out_a, count_a, slow_a);
    $finish;
  end
endmodule
""")
    vvp = tmp_path / "tb.vvp"
    subprocess.run(["iverilog", "-g2012", "-o", str(vvp), "-s", "tb", *(str(tmp_path / f) for f in
                    ("tb.v", "orig.v", "merged.v"))], check=True, capture_output=True, text=True)
    out = subprocess.run(["vvp", "-n", str(vvp)], capture_output=True, text=True, check=True).stdout
    assert "SAME" in out and "MISMATCH" not in out, out
    assert "SAME 00 0000 00" not in out, "the registers never moved: the test checks nothing"


def test_icarus_compiles_the_merged_copy_of_amaranth_output_only(tmp_path):
    amaranth = tmp_path / "gen.v"
    amaranth.write_text(_convert("top"))
    assert amaranth.read_text().startswith(AMARANTH_HEADER)
    hand = tmp_path / "tb.v"
    hand.write_text("module tb; reg clk; reg q;\n  always @(posedge clk)\n    q <= 1;\nendmodule\n")
    build = tmp_path / "build"
    build.mkdir()
    out = icarus_sources([amaranth, hand], build)
    assert out == [build / "gen.icarus.v", hand]
    assert out[0].read_text() == merge_register_blocks(amaranth.read_text())
