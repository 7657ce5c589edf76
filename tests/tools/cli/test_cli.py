"""The `gpucosim` command line as a whole: the installed script, every subcommand's help,
the help's examples, a bad log environment, the examples' --help, and the make targets'
one-line errors (pinned: they are the interface a user reads). `run` and `sim` are in
test_cli_run.py; regs, disasm, bench and plot in test_cli_tools.py."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpucosim import cli

from .cli_helpers import ROOT, SUBCOMMANDS, gpucosim, usage_error


# ------------------------------------------------------------------------------ the script

def test_console_script_is_installed():
    script = Path(sys.executable).parent / "gpucosim"
    assert script.exists(), "pip install -e . creates the gpucosim script ([project.scripts])"
    out = subprocess.run([str(script), "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("gpucosim ")


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommand_has_help(capsys, sub):
    with pytest.raises(SystemExit) as exc:
        cli.main([sub, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: gpucosim {sub}")


@pytest.mark.parametrize("sub", [s for s in SUBCOMMANDS if s != "bench"])
def test_every_subcommands_description_is_wrapped_to_the_terminal(capsys, monkeypatch, sub):
    """`gpucosim run --help` began with its description as one line of 600 characters (its
    formatter kept the epilog's lines as written, and the description's one line too), which
    an 80-column terminal broke mid-word; disasm's and regs' alike. The description is
    wrapped; the epilog's examples stay as written."""
    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        cli.main([sub, "--help"])
    out = capsys.readouterr().out
    description = out.split("\n\n")[1]
    assert max(map(len, description.splitlines())) <= 80, description
    if sub == "run":
        assert "  gpucosim run examples/memcpy.py --sim model\n" in out  # (the epilog as written)


def test_no_subcommand(capsys):
    assert usage_error(capsys) == "gpucosim: error: the following arguments are required: SUBCOMMAND"


def test_an_option_before_the_subcommand_is_named(capsys):
    """`gpucosim --frob` said "the following arguments are required: SUBCOMMAND", not a word
    of --frob; `gpucosim --sim model run APP` the same."""
    for argv in (["--frob"], ["--sim", "model", "run", "examples/hello.py"]):
        assert usage_error(capsys, *argv) == (f"gpucosim: error: unrecognized argument {argv[0]}: options follow a "
                                              "SUBCOMMAND (gpucosim SUBCOMMAND --help)")


def test_sim_names_itself_when_the_demo_reads_no_arguments():
    """`gpucosim sim -- --foo` said `gpucosim run: error: ... gpucosim run --help lists the
    options` (the launcher's message named run whatever the subcommand)."""
    r = gpucosim("sim", "--sim", "model", "--", "--foo")
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines()[-1] == ("gpucosim sim: error: neither gpucosim nor the app knows --foo (examples.demo "
                                         "reads no arguments; gpucosim sim --help lists the options)")


def test_unknown_subcommand(capsys):
    # (it was argparse's "argument SUBCOMMAND: invalid choice: 'frobnicate' (choose from 'run', ...)")
    assert usage_error(capsys, "frobnicate") == ("gpucosim: error: 'frobnicate' is not a SUBCOMMAND: choose run, sim, "
                                                 "bench, disasm, regs, plot (gpucosim --help)")


@pytest.mark.parametrize("argv", [("regs", "CP_ERROR", "1", "2"), ("disasm", "-x", "0", "--frob"), ("sim", "extra"),
                                  ("plot", "t.json", "-o", "x.png", "--form", "3")])
def test_an_argument_no_subcommand_knows_is_named_by_its_subcommand(capsys, argv):
    """Every other usage error of a subcommand says `gpucosim regs: error:`, and its --help is
    the one to read; an unknown argument said `gpucosim: error:`. (What follows the word is
    test_cli_arguments.py's: what the subcommand takes, or its options.)"""
    extra = argv[-2] if argv[-1] == "3" else argv[-1]  # (an unknown option is named without its value)
    said = usage_error(capsys, *argv)
    assert said.startswith(f"gpucosim {argv[0]}: error: ") and extra in said and " 3" not in said, said


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_subcommands_usage_error_and_help_name_gpucosim(sub):
    """`gpucosim bench --frob` said `python -m testbench.bench: error: ...` (the bench's own
    parser, in the process gpucosim started), and its --help showed gpucosim's `ARGS` only,
    none of the bench's options. Each subcommand's error and usage name `gpucosim SUB`."""
    r = gpucosim(sub, "--frob", "1")
    assert r.returncode == 2 and not r.stdout, (r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"gpucosim {sub}: error: "), r.stderr
    h = gpucosim(sub, "--help")
    assert h.returncode == 0 and h.stdout.startswith(f"usage: gpucosim {sub} "), h.stdout[:200]
    assert "python -m" not in h.stdout.split("\n\n")[0] and not h.stderr, h.stdout[:500]
    if sub == "bench":
        assert "--speed-sims" in h.stdout  # (the benchmarks' own options)


def test_help_examples_decode_to_valid_values():
    """The examples in `regs --help` run, and those that decode a value (at least one: a
    help without them, or with them misspelt, is not a pass) decode it into fields every
    one of which the register defines: the header line, then a named value per field."""
    epilog = cli.build_parser()._subparsers._group_actions[0].choices["regs"].epilog
    examples = [line.split() for line in epilog.splitlines() if line.split()[:2] == ["gpucosim", "regs"]]
    decoding = [words for words in examples if len(words) == 4]
    assert decoding, f"`regs --help` shows no example that decodes a value:\n{epilog}"
    for words in examples:
        r = gpucosim(*words[1:])
        assert r.returncode == 0 and r.stdout and not r.stderr, (words, r.stdout, r.stderr)
        if words in decoding:
            head, *fields = r.stdout.splitlines()
            assert head.startswith(f"{words[2].upper()} @ ") and head.endswith(f"= {int(words[3], 0):#010x}"), head
            assert fields and "not a " not in r.stdout and "belong to no field" not in r.stdout, r.stdout


def test_bad_log_environment_is_one_line_not_a_traceback():
    """A library does not crash its program over GPUCOSIM_LOG: one line, then it carries on."""
    r = subprocess.run([sys.executable, "-c", "import kmd_model, umd; print('imported')"], cwd=ROOT,
                       env=dict(os.environ, GPUCOSIM_LOG="ring=loud"), capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "imported\n"
    assert r.stderr == ("gpucosim: GPUCOSIM_LOG: unknown log level 'loud' (use debug, info, warning, error); "
                        "GPUCOSIM_LOG is ignored\n")


@pytest.mark.parametrize("value, says", [
    ("vcs", "SIM='vcs': unknown simulator 'vcs': choose verilator or icarus, or a comma list of them"),
    # (`SIM=,` ran the RTL's tests on no simulator and passed; `SIM=model` said "unknown
    # simulator", where `make sim SIM=model` runs the model; a simulator twice ran its tests twice)
    (" , ", "SIM=',' names no simulator: choose verilator or icarus, or a comma list of them (or leave SIM unset "
            "for all)"),
    ("model", "SIM='model': 'model' is the reference model, not a simulator: choose verilator or icarus, or a comma "
              "list of them (the model's tests run with either)"),
    ("verilator,verilator", "SIM='verilator,verilator': verilator is given twice")])
def test_make_test_with_an_unknown_simulator_is_one_line(value, says):
    """`make test SIM=vcs`: one line naming the simulators, not a conftest traceback."""
    e = dict(os.environ, SIM=value)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/spec/test_docs.py"],
                       cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert r.returncode == 4 and lines == [f"ERROR: {says}"], (r.returncode, lines)


@pytest.mark.parametrize("app", ["async_submit", "batching", "copy_pipeline", "memcpy", "pools", "producer_consumer"])
def test_every_example_help_says_what_it_is_in_whole_sentences(app, capsys):
    """An example's --help shows its docstring's first paragraph, not a line cut mid-sentence."""
    mod = importlib.import_module(f"examples.{app}")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    assert exc.value.code == 0
    first = " ".join(mod.__doc__.split("\n\n")[0].split())
    out = " ".join(capsys.readouterr().out.split())
    assert first in out and first.endswith((".", ":")), first


@pytest.mark.parametrize("app, argv, message", [
    # each ran the whole experiment (or part of it) and ended in a traceback and a crash report
    ("batching", ["--thresholds", "x"], "--thresholds: a comma list of integers, not 'x'"),
    ("batching", ["--thresholds", "4,0"], "--thresholds: each must be at least 1, not 0"),
    ("batching", ["--commands", "0"], "argument --commands: must be at least 1, not 0"),
    ("batching", ["--aligns", "8,3"], "--aligns: an IB alignment is a power of two in 1..256 dwords, not 3"),
    ("producer_consumer", ["--items", "0"], "argument --items: must be at least 1, not 0"),
    ("producer_consumer", ["--poll-interval", "-1"], "argument --poll-interval: must be at least 0, not -1"),
    # every example's numbers are checked one way (testbench.argtypes.integer_in, its bounds
    # given where the option is declared): pools took --seed -1 where memcpy refused it, and
    # the others said "--items must be in 1..1024" where memcpy said "argument --seed: ..."
    ("pools", ["--seed", "-1"], "argument --seed: must be at least 0, not -1"),
    ("memcpy", ["--seed", "-1"], "argument --seed: must be at least 0, not -1"),
    ("pools", ["--allocs", "0"], "argument --allocs: must be at least 1, not 0"),
    ("pools", ["--allocs", "1000001"], "argument --allocs: must be at most 1000000, not 1000001"),
    ("pools", ["--live", "0"], "argument --live: must be at least 1, not 0"),
    ("async_submit", ["--writes", "65"], "argument --writes: must be at most 64, not 65"),
    ("async_submit", ["--submits", "0"], "argument --submits: must be at least 1, not 0"),
    ("copy_pipeline", ["--chunks", "257"], "argument --chunks: must be at most 256, not 257"),
    ("copy_pipeline", ["--slots", "0"], "argument --slots: must be at least 1, not 0"),
    ("copy_pipeline", ["--chunk-bytes", "6"], "argument --chunk-bytes: must be a multiple of 4, not 6"),
    ("producer_consumer", ["--slots", "65"], "argument --slots: must be at most 64, not 65"),
    # a plot it cannot write, found after the run, or written where it does not say (PATH.png)
    ("batching", ["--plot", "{tmp}"], "--plot {tmp}: a folder, not a file (give a name such as {tmp}/plot.png)"),
    ("batching", ["--plot", "{tmp}/x.txt"], "--plot {tmp}/x.txt: give a .png, .svg or .pdf file"),
    ("pools", ["--plot", "{tmp}"], "--plot {tmp}: a folder, not a file (give a name such as {tmp}/plot.png)"),
    ("pools", ["--plot", "{tmp}/plot"], "--plot {tmp}/plot: give a .png, .svg or .pdf file"),
    # a folder that is there and takes no file: matplotlib's FileNotFoundError traceback after the run
    ("batching", ["--plot", "/proc/x.png"], "--plot /proc/x.png: cannot write in /proc: No such file or directory"),
    ("pools", ["--plot", "/proc/x.png"], "--plot /proc/x.png: cannot write in /proc: No such file or directory"),
    # every count takes what gpucosim's options take (testbench.argtypes.parse_int), and says so
    ("pools", ["--allocs", "1e3"], "argument --allocs: must be an integer (decimal or 0x hex), not '1e3'"),
    ("memcpy", ["--seed", "x"], "argument --seed: must be an integer (decimal or 0x hex), not 'x'"),
    ("batching", ["--commands", "0x0"], "argument --commands: must be at least 1, not 0x0"),
    ("batching", ["--thresholds", "0x4,0"], "--thresholds: each must be at least 1, not 0"),
])
def test_example_arguments_are_checked_before_anything_runs(app, argv, message, capsys, tmp_path, monkeypatch):
    mod = importlib.import_module(f"examples.{app}")
    import kmd_model

    # (no device bound: an argument error must come before the app opens one)
    monkeypatch.setattr(kmd_model, "bound", lambda: pytest.fail("the app ran before checking its arguments"))
    with pytest.raises(SystemExit) as exc:
        mod.main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"{app}: error: {message.replace('{tmp}', str(tmp_path))}"


def test_example_counts_and_sizes_take_hex():
    """memcpy --seed 0x10 and copy_pipeline --chunk-bytes 0x1000 were argparse's "invalid int
    value", where every option of gpucosim's takes 0x hex."""
    r = gpucosim("run", "examples/copy_pipeline.py", "--sim", "model", "--", "--chunk-bytes", "0x1000", "--chunks",
                 "0x2")
    assert r.returncode == 0 and "copy_pipeline: OK on model — 2 chunks" in r.stdout, r.stderr


def test_make_mutate_names_a_bad_part_in_one_line():
    """`make mutate PART=bogus` said "unrecognized arguments: --bogus" (the option PART makes)."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    # (STAMP= : no virtualenv refresh from a test, whatever pyproject.toml's time)
    r = subprocess.run(["make", "-s", "mutate", "PART=bogus", "STAMP=", f"PY={sys.executable}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.splitlines()[0] == "make mutate: PART=bogus: choose python or rtl", r.stderr


@pytest.mark.parametrize("var, value", [("N", "abc"), ("N", "0"), ("M", "-5"), ("N", "1e3"), ("M", "1e3")])
def test_make_soak_names_a_bad_count_in_one_line(var, value):
    """`make soak N=abc` was refused by difftest as "--streams: ..." (the option N makes), after
    the make line; a user gave N, so N is named."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    r = subprocess.run(["make", "-s", "soak", f"{var}={value}", "STAMP=", f"PY={sys.executable}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    says = "a positive whole number of streams" if var == "N" else "a whole number of streams; 0 for none"
    assert r.returncode == 2 and r.stderr.splitlines()[0] == f"make soak: {var}={value}: {says}", r.stderr


def _make_line(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`make -s ARGS` with a stand-in for the virtualenv's Python that prints what it was
    given (`PY -m ...`) instead of running a campaign."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    py = tmp_path / "py"
    py.write_text('#!/bin/sh\necho "PY $*"\n')
    py.chmod(0o755)
    return subprocess.run(["make", "-s", *args, "STAMP=", f"PY={py}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_make_soak_m_0_runs_no_multi_queue_streams(tmp_path):
    """M=0 (difftest's --multi-streams 0: none) was refused as not a positive number: a soak of
    the CP's streams alone could not be asked of make."""
    r = _make_line(tmp_path, "soak", "N=5", "M=0")
    assert r.returncode == 0 and r.stdout.split() == ["PY", "-m", "testbench.difftest", "--streams", "5", "--sim",
                                                      "verilator", "--jobs", "2", "--multi-streams", "0"], r.stderr


@pytest.mark.parametrize("deep, given", [("", False), ("0", False), ("1", True)])
def test_make_formal_deep_is_1_or_0(tmp_path, deep, given):
    """DEEP=0 ran the mutants whose counterexample takes hours (any value of DEEP was --deep)."""
    r = _make_line(tmp_path, "formal", f"DEEP={deep}")
    assert r.returncode == 0 and r.stdout.startswith("PY -m formal --jobs 2") and ("--deep" in r.stdout) == given


def test_make_formal_names_a_bad_deep_in_one_line(tmp_path):
    r = _make_line(tmp_path, "formal", "DEEP=yes")
    assert r.returncode == 2 and not r.stdout
    assert r.stderr.splitlines()[0] == \
        "make formal: DEEP=yes: DEEP=1 adds the deep mutants; DEEP=0 or none leaves them out", r.stderr


def test_make_passes_each_value_as_one_argument(tmp_path):
    """BLOCKS="dma, cp" reached fpga as two arguments (`unrecognized arguments: cp`), and a
    quote in PNR_ARGS ended make's shell line early (a shell syntax error): each variable is
    one argument, as the user gave it."""
    if shutil.which("make") is None:
        pytest.skip("no make")
    py = tmp_path / "py"
    py.write_text('#!/bin/sh\nfor a in "$@"; do echo "[$a]"; done\n')
    py.chmod(0o755)
    pnr = """--placer-heap-alpha 0.1 --pre-pack "it's.py\""""
    r = subprocess.run(["make", "-s", "fpga", "BLOCKS=dma, cp", "SEEDS=1, 2", f"PNR_ARGS={pnr}", "STAMP=", f"PY={py}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["[-m]", "[fpga]", "[--blocks]", "[dma, cp]", "[--seeds]", "[1, 2]", "[--jobs]",
                                     "[2]", f"[--pnr-args={pnr}]"], r.stdout
    r = subprocess.run(["make", "-s", "formal", "GROUPS=axil, cp_ring", "STAMP=", f"PY={py}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "[axil, cp_ring]" in r.stdout.splitlines(), (r.stdout, r.stderr)


@pytest.mark.parametrize("how", ["never consumed", "stopped"])
def test_copy_pipeline_closes_its_device_when_the_pipeline_fails(monkeypatch, capsys, how):
    """copy_pipeline's two failure paths returned 1 with the device open: its buffers,
    queues and file were a user's leaks in the exit report (producer_consumer had the same)."""
    import kmd_model
    import umd
    from examples import copy_pipeline
    from kmd_model.uapi import HwErrorInfo
    from testbench.refmodel import RefModel

    kmd = kmd_model.bind(RefModel(dma=True))

    def wait(self, *a, **k):
        if how == "stopped":
            raise umd.GpuError(HwErrorInfo(code="ILLEGAL_OPCODE", level="IB1", opcode=0x7B, opcode_name=None,
                                           offset=0, addr=0, seq=1, ctx_id=1, message="stopped here by the test"))
        return False

    monkeypatch.setattr(umd.Event, "wait", wait)
    assert copy_pipeline.main(["--chunks", "2"]) == 1
    assert ("the last chunk was never consumed" if how == "never consumed" else "the pipeline stopped") \
        in capsys.readouterr().out
    assert kmd.files == {}, "the example left its device open"
