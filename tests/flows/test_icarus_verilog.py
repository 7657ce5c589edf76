"""What Icarus compiles of Amaranth's Verilog (testbench/sim/icarus_verilog.py): each module's
register processes merged into one per clock (their assignments in groups that run only
when one of the group's registers changes), combinational blocks as continuous assignments,
wires assigned in parts assigned whole: with the same values cycle by cycle."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from amaranth import Array, ClockDomain, ClockSignal, Elaboratable, Module, ResetSignal, Signal
from amaranth.back import verilog
from amaranth.lib import data
from amaranth.lib.memory import Memory

from testbench.sim.design import kick_time_zero
from testbench.sim.icarus_verilog import (AMARANTH_HEADER, GATE_GROUP, comb_blocks_to_assigns, icarus_sources,
                                     merge_part_assigns, merge_register_blocks)

_ASSIGN = re.compile(r"<=[^;]*;")
_ONE_REGISTER = re.compile(r"always @\(posedge [\w$]+\)\n[ \t]*[^\n;]*<=")


_BEAT = data.StructLayout({"data": 8, "first": 1, "tag": 3})


class _Sub(Elaboratable):
    """A shift register and a register loaded on an enable: NBAs whose order matters; a
    struct assigned field by field (Yosys: one `assign` per field) and registered; a
    memory with a write port and a synchronous read port (Yosys: a clocked process each)."""

    def __init__(self):
        self.d = Signal(8)
        self.en = Signal()
        self.q = Signal(8)

    def elaborate(self, platform):
        m = Module()
        a, b, held = Signal(8), Signal(8), Signal(8, init=0x5A)
        beat, kept = Signal(_BEAT), Signal(_BEAT)
        m.d.comb += [beat.data.eq(a ^ self.d), beat.first.eq(self.en), beat.tag.eq(b[1:4])]
        m.d.sync += [a.eq(self.d), b.eq(a), self.q.eq(b ^ held ^ kept.data ^ kept.tag ^ kept.first)]
        with m.If(self.en):
            m.d.sync += [held.eq(a + b), kept.eq(beat)]
        m.submodules.mem = mem = Memory(shape=8, depth=4, init=[1, 2, 3, 4])
        wr, rd = mem.write_port(), mem.read_port()
        m.d.comb += [wr.addr.eq(self.d[:2]), wr.data.eq(a), wr.en.eq(self.d[2]),
                     rd.addr.eq(self.d[3:5]), rd.en.eq(self.d[5] | self.en)]
        m.d.sync += self.q.eq(b ^ held ^ kept.data ^ kept.tag ^ kept.first ^ rd.data)
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
        clocks = re.findall(r"always @\(posedge ([\w$]+)\)", module)
        assert len(clocks) == len(set(clocks))  # the memory's ports too
    assert re.search(r"^\s+\w+\[[^\n]*\] <= ", text, re.M), "the design has no memory write port"


def test_register_assignments_are_gated_in_groups():
    text = _convert("top")
    gated = merge_register_blocks(text)
    flags = re.findall(r"^  wire (\\icarus\$changed\$\S+ ) = (.*);$", gated, re.M)
    assert flags, gated
    for flag, test in flags:
        assert 1 <= test.count("!==") <= GATE_GROUP  # `!==`: a next value of X or Z counts as a change
        assert f"if ({flag}) begin" in gated
    # without gating: the same assignments, none behind a test
    plain = merge_register_blocks(text, gate=False)
    assert "icarus$changed" not in plain and not re.search(r"^\s*if \(\\icarus", plain, re.M)
    assert sorted(_ASSIGN.findall(plain)) == sorted(_ASSIGN.findall(gated))


def test_group_tests_are_read_in_sets():
    """Groups of 1 in sets of 2: each set's test is the `|` of its groups' tests, and its
    groups' tests are read inside it alone; every assignment is kept."""
    text = _convert("top")
    gated = merge_register_blocks(text, group_size=1, set_size=2)
    sets = re.findall(r"^  wire (\\icarus\$any\$\S+ ) = (.*);$", gated, re.M)
    assert sets, gated
    groups = set(re.findall(r"^  wire (\\icarus\$changed\$\S+ ) =", gated, re.M))
    inside = []
    for flag, test in sets:
        members = [f + " " for f in re.findall(r"(\\icarus\$changed\$\S+) ", test)]
        assert len(members) == 2 and test == " | ".join(members), test
        body = gated.split(f"if ({flag}) begin\n", 1)[1]
        for m in members:  # each group's test is inside its set's `if`, before the set's end
            assert body.index(f"if ({m}) begin") < body.index("\n    end\n"), (flag, m)
        inside += members
    assert len(inside) == len(set(inside)) and set(inside) <= groups
    assert sorted(_ASSIGN.findall(gated)) == sorted(_ASSIGN.findall(text))


def test_registers_of_other_widths_or_signed_run_every_cycle():
    text = ("module m(input clk, input [7:0] d, input signed [3:0] s);\n"
            "  reg [7:0] q = 8'h00;\n  reg [3:0] r = 4'h0;\n  reg signed [3:0] t = 4'sh0;\n"
            "  wire [3:0] \\n$1 ;\n  wire [7:0] \\n$2 ;\n"
            "  always @(posedge clk)\n    q <= \\n$2 ;\n"
            "  always @(posedge clk)\n    r <= d;\n"
            "  always @(posedge clk)\n    t <= s;\n"
            "endmodule\n")
    out = merge_register_blocks(text)
    assert "(q !== \\n$2 )" in out  # same width, unsigned: gated
    body = out[out.index("always @(posedge clk) begin"):]
    assert body.index("r <= d;") < body.index("if (") and body.index("t <= s;") < body.index("if (")


def test_memory_ports_join_the_clocks_process_and_other_processes_are_left_as_they_are():
    """A memory port (a clocked process with a body) moves into its clock's one process, as
    it is; a process on another edge stays where it was."""
    head = ("module m(input clk, input en, input [1:0] a, input [7:0] d);\n"
            "  reg [7:0] mem [0:3];\n")
    port = "    if (en)\n      mem[a] <= d;\n"
    other = "  always @(negedge clk)\n    x <= d;\n"
    text = head + "  always @(posedge clk) begin\n" + port + "  end\n" + other + "endmodule\n"
    for gate in (True, False):
        assert merge_register_blocks(text, gate=gate) == (head + other + "  always @(posedge clk) begin\n" + port
                                                          + "  end\n" + "endmodule\n")


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog not found: apt-get install iverilog")
@pytest.mark.parametrize("sizes", [{}, {"group_size": 1, "set_size": 2}], ids=["default", "sets_of_groups"])
def test_merged_registers_hold_the_same_values_every_cycle(tmp_path, sizes):
    """Amaranth's Verilog and its merged copy side by side under Icarus, on random inputs:
    every output equal at every edge of both clocks (with the default sizes, and with
    groups small enough that the group tests are read in sets)."""
    (tmp_path / "orig.v").write_text(_convert("orig"))
    merged = merge_part_assigns(merge_register_blocks(_convert("merged"), **sizes))
    assert "icarus$changed" in merged and re.search(r"assign \S+ +=\s*\{", merged)
    assert ("icarus$any" in merged) == bool(sizes)
    (tmp_path / "merged.v").write_text(merged)

    def inst(module: str, x: str) -> str:
        return (f"  {module} {module}_i (.clk(clk), .rst(rst), .oclk(oclk), .d(d), .en(en), "
                f".out(out_{x}), .count(count_{x}), .slow(slow_{x}));\n")

    (tmp_path / "tb.v").write_text(f"""
module tb;
  reg clk = 0, oclk = 0, rst = 1, en = 0;
  reg [7:0] d = 0;
  reg [3:0] flip = 0;
  wire [7:0] out_a, out_b, slow_a, slow_b;
  wire [15:0] count_a, count_b;
{inst("orig", "a")}{inst("merged", "b")}  integer i;
  initial begin
    for (i = 0; i < 400; i = i + 1) begin
      #5 clk = ~clk;
      if (i % 3 == 0) oclk = ~oclk;
      if (i == 6) rst = 0;
      #1 d = $random; en = $random;
      if (i % 37 == 20) d = 8'bx0z1_x01z;  // an unknown next value is a change, as ungated
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
    assert out[0].read_text() == merge_part_assigns(comb_blocks_to_assigns(merge_register_blocks(amaranth.read_text())))


class _Comb(Elaboratable):
    """Combinational logic of every shape Yosys writes as an `always @*` block: If/Elif/Else,
    a Switch with wildcard patterns, several patterns per case and a default, a signal
    assigned in slices, a process driving several signals, an FSM, and a register fed
    from them all."""

    def __init__(self):
        self.a = Signal(8)
        self.b = Signal(8)
        self.sel = Signal(4)
        self.en = Signal()
        self.o1 = Signal(8)
        self.o2 = Signal(8, init=0x3C)
        self.o3 = Signal(6)
        self.st = Signal(2)
        self.o4 = Signal(8)
        self.acc = Signal(16)

    def elaborate(self, platform):
        m = Module()
        # an index into an Array: a full case with no value before it (Yosys's full_case)
        m.d.comb += self.o4.eq(Array([self.a, self.b])[self.sel[2]])
        with m.If(self.en):
            m.d.comb += self.o1.eq(self.a)
        with m.Elif(self.sel[0]):
            m.d.comb += [self.o1.eq(self.b), self.o3[4:6].eq(self.a[0:2])]
        with m.Else():
            m.d.comb += [self.o1.eq(self.a ^ self.b), self.o3.eq(self.b[2:8])]
        with m.Switch(self.sel):
            with m.Case("1-0-"):
                m.d.comb += [self.o2.eq(self.a + 1), self.o3[1:3].eq(self.sel[2:4])]
            with m.Case(3, 6):
                m.d.comb += self.o2.eq(self.b)
            with m.Case("0--1"):
                m.d.comb += self.o3.eq(self.a[2:8])
            with m.Default():
                m.d.comb += self.o3[0].eq(1)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.st.eq(0)
                with m.If(self.en & self.a[7]):
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.st.eq(1)
                with m.If(self.sel == 9):
                    m.next = "DONE"
                with m.Elif(~self.en):
                    m.next = "IDLE"
            with m.State("DONE"):
                m.d.comb += self.st.eq(2)
                m.next = "IDLE"
        m.d.sync += self.acc.eq(self.acc + self.o1 + self.o2 + self.o3 + self.st + self.o4)
        return m


def _convert_comb(name: str) -> str:
    """As gpu_verilog writes it: with the time-zero wake-up of the `always @*` blocks."""
    top = _Comb()
    return kick_time_zero(verilog.convert(top, name=name, emit_src=False, ports=[
        top.a, top.b, top.sel, top.en, top.o1, top.o2, top.o3, top.st, top.o4, top.acc]))


def test_combinational_blocks_become_continuous_assignments():
    text = merge_register_blocks(_convert_comb("top"))
    out = comb_blocks_to_assigns(text)
    blocks = text.count("always @*")
    assert blocks >= 5 and out.count("always @*") == 0, out
    assert "full_case" in text
    assert out.count("\n  assign ") >= text.count("\n  assign ") + blocks
    # every variable a block drove is declared a wire now, none is left a reg without a driver
    driven = set(re.findall(r"^  assign (\S+) =", out, re.M)) - set(re.findall(r"^  assign (\S+) =", text, re.M))
    assert len(driven) >= blocks
    for name in driven:
        assert re.search(rf"^  wire (\[\d+:0\] )?{re.escape(name)} ?;", out, re.M), name
        assert not re.search(rf"^  reg (\[\d+:0\] )?{re.escape(name)} ?;", out, re.M), name


def test_blocks_the_rewrite_cannot_read_stay_as_they_are():
    # a latch (x not assigned when en is low), a block reading what it drives, a slice of
    # a variable with no value yet: each kept as it was, its variable still a reg
    text = ("module m(input en, input [3:0] d, output [3:0] q, output [3:0] r, output [3:0] s);\n"
            "  reg [3:0] x;\n  reg [3:0] y;\n  reg [3:0] z;\n"
            "  always @* begin\n    if (en) begin\n      x = d;\n    end\n  end\n"
            "  always @* begin\n    y = d;\n    if (en) begin\n      y = y;\n    end\n  end\n"
            "  always @* begin\n    z[1:0] = d[1:0];\n  end\n"
            "  assign q = x;\n  assign r = y;\n  assign s = z;\nendmodule\n")
    assert comb_blocks_to_assigns(text) == text


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog not found: apt-get install iverilog")
def test_assignments_hold_the_same_values_every_cycle(tmp_path):
    """The design above as Amaranth wrote it and with its blocks as assignments, side by
    side under Icarus on random inputs: every output equal after every change."""
    (tmp_path / "orig.v").write_text(merge_register_blocks(_convert_comb("orig")))
    rewritten = comb_blocks_to_assigns(merge_register_blocks(_convert_comb("rewritten")))
    assert "always @*" not in rewritten
    (tmp_path / "rewritten.v").write_text(rewritten)

    def inst(module: str, x: str) -> str:
        return (f"  {module} {module}_i (.clk(clk), .rst(rst), .a(a), .b(b), .sel(sel), .en(en), "
                f".o1(o1_{x}), .o2(o2_{x}), .o3(o3_{x}), .st(st_{x}), .o4(o4_{x}), .acc(acc_{x}));\n")

    (tmp_path / "tb.v").write_text(f"""
module tb;
  reg clk = 0, rst = 1, en = 0;
  reg [7:0] a = 0, b = 0;
  reg [3:0] sel = 0;
  wire [7:0] o1_a, o1_b, o2_a, o2_b, o4_a, o4_b;
  wire [5:0] o3_a, o3_b;
  wire [1:0] st_a, st_b;
  wire [15:0] acc_a, acc_b;
  reg [3:0] seen = 0;
{inst("orig", "a")}{inst("rewritten", "b")}  integer i;
  initial begin
    for (i = 0; i < 2000; i = i + 1) begin
      #5 clk = ~clk;
      if (i == 6) rst = 0;
      #1 a = $random; b = $random; sel = $random; en = ($random % 4) == 0;
      #1 if ({{o1_a, o2_a, o3_a, st_a, o4_a, acc_a}} !== {{o1_b, o2_b, o3_b, st_b, o4_b, acc_b}}) begin
        $display("MISMATCH at %0d: %h %h %h %h %h %h vs %h %h %h %h %h %h", i, o1_a, o2_a, o3_a, st_a,
                 o4_a, acc_a, o1_b, o2_b, o3_b, st_b, o4_b, acc_b);
        $finish;
      end
      seen[st_a] = 1;
    end
    $display("SAME %h states %b", acc_a, seen);
    $finish;
  end
endmodule
""")
    vvp = tmp_path / "tb.vvp"
    subprocess.run(["iverilog", "-g2012", "-o", str(vvp), "-s", "tb", *(str(tmp_path / f) for f in
                    ("tb.v", "orig.v", "rewritten.v"))], check=True, capture_output=True, text=True)
    out = subprocess.run(["vvp", "-n", str(vvp)], capture_output=True, text=True, check=True).stdout
    assert "SAME" in out and "MISMATCH" not in out, out
    assert "states 0111" in out, f"the FSM did not visit all of its states: {out}"


def test_wires_assigned_in_parts_are_assigned_whole():
    text = ("module m(a, b, c);\n  input [7:0] a;\n  input [2:0] b;\n  input c;\n"
            "  wire [11:0] s;\n  wire [11:0] \\t$1 ;\n  wire [7:0] gap;\n  wire [7:0] wide;\n  wire [3:0] e;\n"
            "  assign s[11:9] = b;\n  assign s[8] = a[0];\n  assign s[7:0] = a;\n"
            "  assign \\t$1 [11:4] = a;\n  assign \\t$1 [3:0] = { c, b };\n"
            "  assign gap[7:4] = a[7:4];\n  assign gap[2:0] = b;\n"     # bit 3 undriven
            "  assign wide[7:4] = a;\n  assign wide[3:0] = b;\n"        # 8 bits into 4, 3 into 4
            "  assign e[3:2] = a[1:0] + b;\n  assign e[1:0] = b[1:0];\n"  # an expression: width unknown
            "endmodule\n")
    out = merge_part_assigns(text)
    assert "  assign s = { b , a[0] , a };\n" in out
    assert "  assign \\t$1  = { a , { c, b } };\n" in out
    for name in ("gap", "wide", "e"):  # left as they were
        assert not re.search(rf"assign {name} =", out) and f"assign {name}[" in out
    assert out.count("assign s") == 1


@pytest.mark.skipif(shutil.which("iverilog") is None, reason="Icarus Verilog not found: apt-get install iverilog")
def test_whole_assignment_matches_the_parts(tmp_path):
    text = ("module m(a, b, c, o);\n  input [7:0] a;\n  input [2:0] b;\n  input c;\n  output [11:0] o;\n"
            "  wire [11:0] s;\n"
            "  assign s[11:9] = b;\n  assign s[8] = c;\n  assign s[7:0] = a;\n  assign o = s;\nendmodule\n")
    (tmp_path / "parts.v").write_text(text.replace("module m", "module parts"))
    (tmp_path / "whole.v").write_text(merge_part_assigns(text).replace("module m", "module whole"))
    (tmp_path / "tb.v").write_text("""
module tb;
  reg [7:0] a = 0; reg [2:0] b = 0; reg c = 0; wire [11:0] x, y; integer i;
  parts p (.a(a), .b(b), .c(c), .o(x));
  whole w (.a(a), .b(b), .c(c), .o(y));
  initial begin
    for (i = 0; i < 300; i = i + 1) begin
      #1 a = $random; b = $random; c = $random;
      if (i % 50 == 7) a = 8'bx1z0_1010;
      #1 if (x !== y) begin $display("MISMATCH %b %b", x, y); $finish; end
    end
    $display("SAME %h", x);
  end
endmodule
""")
    vvp = tmp_path / "tb.vvp"
    subprocess.run(["iverilog", "-g2012", "-o", str(vvp), "-s", "tb", *(str(tmp_path / f) for f in
                    ("tb.v", "parts.v", "whole.v"))], check=True, capture_output=True, text=True)
    out = subprocess.run(["vvp", "-n", str(vvp)], capture_output=True, text=True, check=True).stdout
    assert "SAME" in out and "MISMATCH" not in out, out
