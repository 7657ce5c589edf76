"""A word too many, a word in the wrong place, an option mistyped: the usage error says what
the command takes. `gpucosim regs CP_ERROR 0x7b0101 0x1` said only "unrecognized arguments:
0x1"; `plot --frm 3 t.json` named t.json as unrecognized (3 had become TRACE); the campaigns'
and gpucosim's short parsers did not list their options (OneLineParser options_in_errors)."""

from __future__ import annotations

import importlib

import pytest

from tests.tools.cli.cli_helpers import usage_error


@pytest.mark.parametrize("argv, said", [
    (("regs", "CP_ERROR", "0x7b0101", "0x1"),
     "gpucosim regs: error: too many arguments (0x1): regs takes at most one REGISTER and one VALUE "
     "(gpucosim regs CP_ERROR 0x7b0101)"),
    (("plot", "a.json", "b.json", "-o", "x.png"),
     "gpucosim plot: error: too many arguments (b.json): plot takes one TRACE (gpucosim plot TRACE -o PNG; "
     "one picture per trace)"),
    (("sim", "examples/memcpy.py"),
     "gpucosim sim: error: too many arguments (examples/memcpy.py): sim runs the demo and takes no APP "
     "(gpucosim run APP runs another)"),
])
def test_a_word_too_many_says_what_the_subcommand_takes(capsys, argv, said):
    assert usage_error(capsys, *argv) == said


def test_a_mistyped_option_is_named_without_the_value_it_pushed_into_place(capsys):
    said = usage_error(capsys, "plot", "--frm", "3", "t.json", "-o", "x.png")
    assert said == ("gpucosim plot: error: unrecognized arguments: --frm: did you mean --from? "
                    "(usage: gpucosim plot [-h] -o PNG [--from CYCLE] [--to CYCLE] [--title TITLE] TRACE)")
    assert usage_error(capsys, "sim", "--trce", "x.json") == (
        "gpucosim sim: error: unrecognized arguments: --trce (did you mean --trace?)")


@pytest.mark.parametrize("sub, usage", [
    ("regs", "gpucosim regs [-h] [REGISTER] [VALUE]"),
    ("disasm", "gpucosim disasm [-h] [-x HEX [HEX ...]] [--base ADDR] [--only TEXT] [--sdma] [-v] [--max-data N] "
               "[FILE ...]"),
])
def test_short_subcommands_list_their_options_on_an_unknown_one(capsys, sub, usage):
    assert usage_error(capsys, sub, "-x" if sub == "disasm" else "CP_ERROR", "0", "--frob") == (
        f"gpucosim {sub}: error: unrecognized arguments: --frob (usage: {usage})")


def test_a_value_given_alone_or_first_to_regs_says_the_order(capsys):
    assert usage_error(capsys, "regs", "0x7b0101") == (
        "gpucosim regs: error: no register at offset 0x7b0101: the map ends at 0x4d4 (CP_QUEUE_RESET); a VALUE "
        "to decode follows its REGISTER (gpucosim regs CP_ERROR 0x7b0101)")
    assert usage_error(capsys, "regs", "0x15").endswith("multiples of 4 (0x14 is STATUS)")  # (inside the map)
    assert usage_error(capsys, "regs", "0x7b0101", "CP_ERROR") == (
        "gpucosim regs: error: argument VALUE: 'CP_ERROR' is a register, not a value: REGISTER comes first "
        "(gpucosim regs CP_ERROR VALUE)")
    assert usage_error(capsys, "regs", "CP_ERROR", "CP_EROR") == (  # (no register: the number's words)
        "gpucosim regs: error: argument VALUE: must be an integer (decimal or 0x hex), not 'CP_EROR'")


@pytest.mark.parametrize("module, prog, typo, meant", [
    ("testbench.difftest.__main__", "python -m testbench.difftest", "--seeed", "--seed"),
    ("testbench.mutate.__main__", "python -m testbench.mutate", "--budegt", "--budget"),
    ("fpga.__main__", "python -m fpga", "--widhts", "--widths"),
    ("testbench.bench", "python -m testbench.bench", "--speed-simz", "--speed-sims"),
])
def test_campaigns_name_the_option_meant_and_list_theirs(capsys, module, prog, typo, meant):
    with pytest.raises(SystemExit) as exc:
        importlib.import_module(module).main([typo, "1"])
    assert exc.value.code == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"{prog}: error: unrecognized arguments: {typo} 1: did you mean {meant}? (usage: {prog} [-h]")
    assert f"[{meant} " in err and err.endswith(")"), err


def test_bench_help_says_each_option_and_how_long_it_runs(capsys):
    """`gpucosim bench --help` showed -o OUTPUT and --data-width bare: where the figures go, and
    what the width is, were the source's; how long a run is, nowhere."""
    from testbench import bench

    with pytest.raises(SystemExit) as exc:
        bench.main(["--help"], prog="gpucosim bench")
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for option, words in (("--data-width {32,64,128,256}", "memory bus width in bits"),
                          ("-o JSON, --output JSON", "where the figures go, as JSON (default build/bench.json)"),
                          ("--speed-sims SIMS", "simulators the model is compared with")):
        assert f"{option} {words}" in text, text
    assert "tens of minutes on 2 cores" in text and "unless --speed-sims none" in text


@pytest.mark.parametrize("argv, said", [
    # bench took abbreviations (argparse's default), as no other subcommand does: `--data 7` was
    # --data-width's error, `--speed none --data 32` started tens of minutes of benchmarks (the
    # values here are wrong ones: without the fix, an error after the abbreviation was taken,
    # not a run)
    (("bench", "--data", "7"), "gpucosim bench: error: unrecognized arguments: --data 7: did you mean --data-width? "
                               "(usage: gpucosim bench [-h] [--data-width {32,64,128,256}] [-o JSON] "
                               "[--speed-sims SIMS])"),
    (("bench", "--speed", "nosuch"), "gpucosim bench: error: unrecognized arguments: --speed nosuch: did you mean "
                                     "--speed-sims? (usage: gpucosim bench [-h] [--data-width {32,64,128,256}] "
                                     "[-o JSON] [--speed-sims SIMS])"),
    # an abbreviation names the option it begins (difflib's closest was another: --max, --sdma;
    # --tim, --sim), those it begins when there are several
    (("disasm", "-x", "0", "--max", "3"), "gpucosim disasm: error: unrecognized arguments: --max: did you mean "
                                          "--max-data? (usage: gpucosim disasm [-h] [-x HEX [HEX ...]] [--base ADDR] "
                                          "[--only TEXT] [--sdma] [-v] [--max-data N] [FILE ...])"),
    (("sim", "--tim", "5"), "gpucosim sim: error: unrecognized arguments: --tim (did you mean --timeout?)"),
    (("run", "--t", "5", "examples/hello.py"),
     "gpucosim run: error: unrecognized arguments before APP: --t (did you mean --trace or --timeout?)"),
    # an abbreviation of a required option: it was "the following arguments are required:
    # -o/--output", not a word of the --out typed
    (("plot", "t.json", "--out", "x.png"), "gpucosim plot: error: unrecognized arguments: --out: did you mean "
                                           "--output? (usage: gpucosim plot [-h] -o PNG [--from CYCLE] [--to CYCLE] "
                                           "[--title TITLE] TRACE)"),
    (("plot", "--out=x.png", "t.json"), "gpucosim plot: error: unrecognized arguments: --out=x.png: did you mean "
                                        "--output? (usage: gpucosim plot [-h] -o PNG [--from CYCLE] [--to CYCLE] "
                                        "[--title TITLE] TRACE)"),
])
def test_an_abbreviated_option_is_refused_naming_the_option_it_begins(capsys, argv, said):
    assert usage_error(capsys, *argv) == said


def test_plots_missing_output_is_still_said_so(capsys):
    """(A plot without -o, and with nothing mistyped, is the missing option's error.)"""
    assert usage_error(capsys, "plot", "t.json", "--from", "3") == (
        "gpucosim plot: error: the following arguments are required: -o/--output")
