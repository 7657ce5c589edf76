"""The campaigns' command lines (make soak / make mutate / make formal call them): a bad
count, index, share or number of jobs is one usage line naming the option, before anything
is built or run. `--jobs 0` once started `make mutate`'s minute-long baseline and then died
in the thread pool, and `make formal`'s waited for ever; `--streams -5` ran an empty
campaign and reported success."""

from __future__ import annotations

import json

import pytest

from formal.run import main as formal_main
from testbench.difftest.__main__ import main as difftest_main
from testbench.mutate.__main__ import main as mutate_main
from testbench.mutate.rtl import main as rtl_mutant_main
from tests.cosim.driver_checks import _main as driver_checks_main

CASES = [
    (difftest_main, "python -m testbench.difftest", ["--streams", "-5"], "argument --streams: must be at least 0, not -5"),
    (difftest_main, "python -m testbench.difftest", ["--streams", "0"],
     "--streams 0: nothing to run (give a count, or --multi-streams M for the multi-queue streams alone)"),
    (difftest_main, "python -m testbench.difftest", ["--multi", "--streams", "0"],
     "--streams 0: nothing to run (give a count, or --multi-streams M for the multi-queue streams alone)"),
    (difftest_main, "python -m testbench.difftest", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (difftest_main, "python -m testbench.difftest", ["--replay", "-1"], "argument --replay: must be at least 0, not -1"),
    (difftest_main, "python -m testbench.difftest", ["--list", "-2"], "argument --list: must be at least 0, not -2"),
    (difftest_main, "python -m testbench.difftest", ["--first", "x"], "argument --first: must be an integer (decimal or 0x hex), not 'x'"),
    (difftest_main, "python -m testbench.difftest", ["--multi-streams", "-1"],
     "argument --multi-streams: must be at least 0, not -1"),
    (difftest_main, "python -m testbench.difftest", ["--seed", "abc"], "argument --seed: must be an integer (decimal or 0x hex), not 'abc'"),
    (difftest_main, "python -m testbench.difftest", ["--sim", ","],
     "argument --sim: ',' names no simulator: choose verilator, icarus or model, or a comma list of them"),
    (difftest_main, "python -m testbench.difftest", ["--sim", "model,model", "--streams", "4"],
     "argument --sim: model is given twice"),
    (difftest_main, "python -m testbench.difftest", ["--sim", "verilator,spice", "--streams", "4"],
     "argument --sim: unknown simulator 'spice': choose verilator, icarus or model, or a comma list of them"),
    (difftest_main, "python -m testbench.difftest", ["--sim", "model", "--json", "."],
     "argument --json: . is a directory (give the report's file name)"),
    # an empty report name (Path reads it as "."): "-o: . is a folder" or "--json  is a directory"
    (difftest_main, "python -m testbench.difftest", ["--sim", "model", "--json", ""],
     "argument --json: an empty name (give a path)"),
    (mutate_main, "python -m testbench.mutate", ["--json", ""], "argument --json: an empty name (give a path)"),
    (mutate_main, "python -m testbench.mutate", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (mutate_main, "python -m testbench.mutate", ["--budget", "-3"], "argument --budget: must be a positive number, not '-3'"),
    (mutate_main, "python -m testbench.mutate", ["--budget", "inf"], "argument --budget: must be a positive number, not 'inf'"),
    (mutate_main, "python -m testbench.mutate", ["--sample", "x"], "argument --sample: must be a number in (0, 1], not 'x'"),
    (mutate_main, "python -m testbench.mutate", ["--sample", "0"], "argument --sample: must be a number in (0, 1], not '0'"),
    # a float: nan passed every run (no score is below nan), 2 failed every one
    (mutate_main, "python -m testbench.mutate", ["--min-score", "nan"], "argument --min-score: must be a score from 0 to 1, not 'nan'"),
    (mutate_main, "python -m testbench.mutate", ["--min-score", "90"], "argument --min-score: must be a score from 0 to 1, not '90'"),
    (mutate_main, "python -m testbench.mutate", ["--min-score", "-1"], "argument --min-score: must be a score from 0 to 1, not '-1'"),
    (mutate_main, "python -m testbench.mutate", ["--seed", "x"], "argument --seed: must be an integer (decimal or 0x hex), not 'x'"),
    # a mistyped mutant name: its line had no `PROG: error:` (docs/verification.md's one-line rule)
    (rtl_mutant_main, "python -m testbench.mutate.rtl", ["wait-lt-as-lte"],
     "unknown RTL mutant(s) wait-lt-as-lte (known: wait-lt-as-le, wait-ge-as-gt, wait-mask-ignored, "
     "ib-nesting-unchecked, chain-in-ring-allowed, ib-size-zero-unchecked, chain-as-call, fence64-low-dword-only, "
     "eop-data-swapped, ih-wptr-half-step, ih-overflow-late, doorbell-overflow-off-by-one, doorbell-backwards-small, "
     "rptr-write-back-inverted, write-data-stride, qword-rule-as-dword, type2-exact-filler-only, nop-pad-counted, "
     "int-sel-3-interrupts, addr-incr-ignored, ib-beyond-bus-unchecked, raw-wait-dropped, int-status-not-w1c, "
     "burst-clamp-removed, dma-raw-ignored, dma-first-strobe, mux-w-to-first-master, mmu-write-needs-read, "
     "mmu-invalidate-ignored, mmu-huge-page-offset, mmu-range-unchecked; or baseline)"),
    # (argparse's own "invalid choice: 'spice' (choose from 'verilator', 'icarus')", worded unlike every other --sim)
    (driver_checks_main, "python -m tests.cosim.driver_checks", ["--sim", "spice"],
     "argument --sim: unknown simulator 'spice': choose verilator or icarus"),
    (driver_checks_main, "python -m tests.cosim.driver_checks", ["--sim", "model"],
     "argument --sim: 'model' is the reference model, not a simulator: choose verilator or icarus"),
    (formal_main, "python -m formal", ["--jobs", "0"], "argument --jobs: must be at least 1, not 0"),
    (formal_main, "python -m formal", ["--jobs", "two"], "argument --jobs: must be an integer (decimal or 0x hex), not 'two'"),
]


@pytest.mark.parametrize("main, prog, argv, message", CASES, ids=[" ".join([c[1].split()[-1]] + c[2]) for c in CASES])
def test_bad_campaign_arguments_are_usage_errors(capsys, main, prog, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    # the whole of stderr: argparse's usage block printed before the line buried it
    assert capsys.readouterr().err.splitlines() == [f"{prog}: error: {message}"]


@pytest.mark.parametrize("module, prog", [
    ("testbench.difftest.__main__", "python -m testbench.difftest"),
    ("testbench.mutate.__main__", "python -m testbench.mutate"),
    ("testbench.mutate.rtl", "python -m testbench.mutate.rtl"),
    ("testbench.bench", "python -m testbench.bench"),
    ("testbench.bench.model_speed", "python -m testbench.bench.model_speed"),
    ("testbench.lint", "python -m testbench.lint"),
    ("formal.run", "python -m formal"),
    ("spec.gen.generate", "python -m spec.gen.generate"),
])
def test_every_testbench_cli_says_a_usage_error_in_one_line(capsys, module, prog):
    """argparse's own errors (an unknown option, a missing value) too: one line, the usage
    left to --help (testbench/argtypes.py OneLineParser, shared by every CLI)."""
    import importlib

    main = importlib.import_module(module).main
    for argv, message in ((["--no-such-option"], "unrecognized arguments: --no-such-option"),
                          (["--help", "--no-such-option"], None)):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        out, err = capsys.readouterr()
        if message is None:  # --help still prints the whole usage, to stdout
            assert exc.value.code == 0 and out.startswith(f"usage: {prog}") and not err
        else:  # (a campaign's few options follow: test_cli_arguments.py)
            assert exc.value.code == 2 and len(err.splitlines()) == 1 and not out, err
            line = f"{prog}: error: {message}"
            assert err == f"{line}\n" or (err.startswith(f"{line} (usage: {prog} [-h]") and err.endswith(")\n")), err


@pytest.mark.parametrize("multi", [False, True])
def test_difftest_list_lines_fit_the_listing_width(capsys, multi):
    """`--list` wraps: a stream's actions (and its VM's pages) were one line of 11,000
    characters; nothing is lost (the words are the listing's, in order)."""
    from testbench.difftest import __main__ as dt

    for index in (0, 1, 17):
        assert difftest_main(["--multi", "--list", str(index)] if multi else ["--list", str(index)]) == 0
        out = capsys.readouterr().out
        assert max(len(line) for line in out.splitlines()) <= dt.LIST_WIDTH
        if not multi:
            from testbench.difftest.campaign import make_stream, master_seed, model_caps

            whole = make_stream(master_seed(None), index, model_caps(None, 64)).listing(max_data=64)
            assert out.split() == whole.split()
    assert dt.wrapped("  a " + "b" * 200) == "  a\n        " + "b" * 200  # no space to break at: whole


@pytest.mark.parametrize("argv", [["--replay", "17"], ["--multi", "--replay", "397"]])
def test_difftest_replay_lines_fit_the_listing_width(capsys, argv):
    """A replay's story (docs/verification.md's `--replay 17`, the command every mismatch
    prints) lists the stream as --list does, and wraps it as --list does: stream 17's
    actions were one line of 10,000 characters there."""
    from testbench.difftest import __main__ as dt

    assert difftest_main(["--sim", "model", *argv]) == 0
    out = capsys.readouterr().out
    assert "and the model agree." in out
    assert max(len(line) for line in out.splitlines()) <= dt.LIST_WIDTH


def test_counts_take_the_usual_spellings():
    from testbench.argtypes import int_at_least

    assert int_at_least(0)("0x10") == 16 and int_at_least(1)("7") == 7


# --streams-file: hand-made streams, a pickled list (testbench/difftest/streams/file.py).
# Each bad file is one usage line naming the file and what is wrong with it, before any
# simulator is built; they were tracebacks (UnpicklingError, EOFError, TypeError ...).

def _streams(n: int = 3) -> list:
    from testbench.difftest.campaign import make_stream, model_caps

    return [make_stream(7, i, model_caps(None, 64)) for i in range(n)]


class _RunsOnLoad:
    """A pickle that calls os.mkdir when loaded: a hostile file must not run it."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os

        return os.mkdir, (str(self.path),)


def _bad_files(tmp_path) -> dict:
    """name -> (file contents, the error after "FILE: ", extra arguments)"""
    import dataclasses
    import os
    import pickle

    from testbench.difftest import multi

    s = _streams(1)[0]
    good = pickle.dumps([s])
    return {
        "text": (b"ring 0: WRITE_DATA 0x1000\n", "not a pickled list of Streams (UnpicklingError: "
                 "unpickling stack underflow)", []),
        "empty": (b"", "an empty file, not a pickled list of Streams", []),
        "truncated": (good[:len(good) // 2], "not a pickled list of Streams (UnpicklingError: "
                      "pickle data was truncated)", []),
        "dict": (pickle.dumps({"streams": [s]}), "a pickled dict, not a list of Streams", []),
        "empty-list": (pickle.dumps([]), "an empty list: no streams to run", []),
        "wrong-item": (pickle.dumps([s, "stream 2"]), "item 1 is a str, not a Stream", []),
        "wrong-field": (pickle.dumps([dataclasses.replace(s, config=None)]),
                        "item 0: Stream.config is a NoneType, not a Config", []),
        "multi-in-cp": (pickle.dumps([multi.make(7, 0, True)]),
                        "item 0 is a MultiStream, not a Stream (a multi-queue stream: run it with --multi)", []),
        "cp-in-multi": (good, "item 0 is a Stream, not a MultiStream (a CP stream: run it without --multi)",
                        ["--multi"]),
        "runs-code": (pickle.dumps([_RunsOnLoad(tmp_path / "ran")]),
                      f"names {os.mkdir.__module__}.mkdir, which is not part of a stream (not loaded)", []),
        "unknown-class": (pickle.dumps([s], protocol=0).replace(b"streams.stream\n", b"streams.streem\n"),
                          "names testbench.difftest.streams.streem.Stream, which does not exist here: re-create "
                          "the file from streams made by this checkout", []),
    }


BAD_FILES = ["text", "empty", "truncated", "dict", "empty-list", "wrong-item", "wrong-field", "multi-in-cp",
             "cp-in-multi", "runs-code", "unknown-class"]


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        difftest_main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_streams_file_is_one_usage_line(capsys, tmp_path, name):
    data, message, extra = _bad_files(tmp_path)[name]
    f = tmp_path / f"{name}.pkl"
    f.write_bytes(data)
    line = _usage_error(capsys, ["--sim", "verilator", "--streams-file", str(f)] + extra)
    assert line == f"python -m testbench.difftest: error: --streams-file {f}: {message}"
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("name, message", [("missing", "cannot read it: No such file or directory"),
                                           ("a-directory", "cannot read it: Is a directory"),
                                           ("unreadable", "cannot read it: Permission denied")])
def test_a_streams_file_that_cannot_be_read_is_one_usage_line(capsys, tmp_path, monkeypatch, name, message):
    from pathlib import Path

    f = tmp_path / name
    if name == "a-directory":
        f.mkdir()
    elif name == "unreadable":  # (a chmod does not stop root, who runs the CI)
        f.write_bytes(b"")
        read = Path.read_bytes

        def refuse(self):
            if self == f:
                raise PermissionError(13, "Permission denied", str(self))
            return read(self)
        monkeypatch.setattr(Path, "read_bytes", refuse)
    line = _usage_error(capsys, ["--sim", "icarus", "--streams-file", str(f)])
    assert line == f"python -m testbench.difftest: error: --streams-file {f}: {message}"


@pytest.mark.parametrize("option", [["--replay", "3"], ["--list", "0"], ["--multi-streams", "5"]])
def test_streams_file_options_that_do_not_apply(capsys, tmp_path, option):
    line = _usage_error(capsys, ["--streams-file", str(tmp_path / "x.pkl")] + option)
    assert line == f"python -m testbench.difftest: error: --streams-file runs the file's streams: {option[0]} " \
                   "does not apply"


def _old_pickle(monkeypatch, streams: list) -> bytes:
    """`streams` pickled as the difftest package before its split (7c84d77) did: the
    classes under testbench.difftest.stream, .vm ... (the old modules, faked for the dump)."""
    import pickle
    import sys

    from testbench.difftest.streams import stream, vm

    for mod, classes in ((stream, (stream.Stream, stream.Config, stream.PacketInfo)), (vm, (vm.VmPlan, vm.VmFault))):
        old = mod.__name__.replace(".streams.", ".")
        monkeypatch.setitem(sys.modules, old, mod)
        for c in classes:
            monkeypatch.setattr(c, "__module__", old)
    data = pickle.dumps(streams)
    monkeypatch.undo()
    return data


def test_a_streams_file_from_before_the_package_split_loads(monkeypatch, tmp_path, capsys):
    import pickle

    from testbench.difftest.streams.file import load

    streams = _streams(3)
    assert any(s.vm is not None for s in streams)  # (a VmPlan too: testbench.difftest.vm)
    data = _old_pickle(monkeypatch, streams)
    assert b"testbench.difftest.stream\x94" in data and b"testbench.difftest.vm\x94" in data
    with pytest.raises(ModuleNotFoundError, match="testbench.difftest.stream"):
        pickle.loads(data)
    f = tmp_path / "old.pkl"
    f.write_bytes(data)
    assert pickle.dumps(load(f)) == pickle.dumps(pickle.loads(pickle.dumps(streams)))  # (a round trip shares more)
    assert difftest_main(["--sim", "model", "--streams-file", str(f)]) == 0
    out = capsys.readouterr().out
    assert all(f"stream {i} (seed 7): {s.label}" in out for i, s in enumerate(streams))


def test_streams_file_on_the_model(tmp_path, capsys):
    """--sim model --streams-file runs the model against itself (as --replay does); it
    raised SimulatorUnavailable. With --multi it ran 500 generated streams instead of
    the file's."""
    import pickle

    from testbench.difftest import multi

    f = tmp_path / "cp.pkl"
    f.write_bytes(pickle.dumps(_streams(2)))
    assert difftest_main(["--sim", "model", "--streams-file", str(f)]) == 0
    out = capsys.readouterr().out
    assert "stream 0 (seed 7)" in out and "stream 1 (seed 7)" in out
    m = tmp_path / "multi.pkl"
    m.write_bytes(pickle.dumps([multi.make(7, 4, True)]))
    assert difftest_main(["--multi", "--sim", "model", "--streams-file", str(m)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("multi stream 4 (seed 7)") and "multi stream 0 " not in out


def test_a_stream_the_model_cannot_run_is_one_line(tmp_path, capsys):
    import dataclasses
    import pickle

    s = dataclasses.replace(_streams(1)[0], actions=[("doorbel", 1)])
    f = tmp_path / "typo.pkl"
    f.write_bytes(pickle.dumps([s]))
    assert difftest_main(["--sim", "model", "--streams-file", str(f)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"difftest: item 0 of {f} cannot run: AttributeError(\"'StreamDriver' object has no "
                   "attribute 'do_doorbel'\")"]


def test_run_rtl_checks_a_streams_file_before_building(tmp_path, monkeypatch):
    from testbench import sim
    from testbench.difftest.simulator.runner import run_rtl
    from testbench.difftest.streams.file import StreamsFileError

    f = tmp_path / "cut.pkl"
    f.write_bytes(b"")
    monkeypatch.setattr(sim, "build", lambda *a, **k: pytest.fail("built before the file was checked"))
    with pytest.raises(StreamsFileError, match=f"^{f}: an empty file, not a pickled list of MultiStreams$"):
        run_rtl("verilator", 0, 0, 0, streams_file=f, workdir=tmp_path, family="multi")


def test_a_bad_seed_in_the_environment_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.setenv("GPUCOSIM_SEED", "x12")
    assert _usage_error(capsys, ["--list", "1"]) == \
        "python -m testbench.difftest: error: $GPUCOSIM_SEED: must be an integer (decimal or 0x hex), not 'x12'"


def test_a_report_that_cannot_be_written_is_one_line_before_the_campaign(tmp_path, capsys):
    """(It was one line after the campaign's summary: the campaign ran for nothing.)"""
    (tmp_path / "a-file").write_text("")
    path = tmp_path / "a-file" / "difftest.json"
    with pytest.raises(SystemExit) as e:
        difftest_main(["--sim", "model", "--streams", "1", "--json", str(path)])
    assert e.value.code == 2
    out, err = capsys.readouterr()
    assert "difftest: seed " not in out
    assert err.splitlines() == [f"python -m testbench.difftest: error: argument --json: {path.parent} is a file, not a folder"]


@pytest.mark.parametrize("tool", ["difftest", "mutate", "formal", "bench"])
@pytest.mark.parametrize("existing", ["# my notes\n", "[1, 2]\n"])
def test_a_report_path_that_names_another_file_is_refused_before_the_run(capsys, tmp_path, monkeypatch, tool, existing):
    """Each campaign writes its JSON report at its end: `--json README.md` (`-o` for the
    bench) wrote over the file after the whole run, and the bench removed it first. A file
    that is not an earlier report (a JSON object) is refused before anything runs, and left
    as it was."""
    import formal.run as formal_run
    import testbench.bench as bench
    import testbench.mutate.__main__ as mutate_cli

    victim = tmp_path / "notes.md"
    victim.write_text(existing)
    monkeypatch.setattr(mutate_cli.survivors, "load", lambda *a: pytest.fail("the campaign started"))
    monkeypatch.setattr(bench.sim, "run", lambda *a, **k: pytest.fail("the bench started"))
    monkeypatch.setattr(formal_run, "BUILD", tmp_path / "formal")  # (no earlier logs: --report would say so)
    says = {"difftest": ("python -m testbench.difftest: error: argument --json: ", "a difftest report"),
            "mutate": ("python -m testbench.mutate: error: argument --json: ", "a mutation report"),
            "formal": ("formal: --json: ", "a formal report"),
            "bench": ("python -m testbench.bench: error: -o: ", "figures of an earlier bench")}[tool]
    argv = {"difftest": ["--sim", "model", "--streams", "1", "--json", str(victim)],
            "mutate": ["--json", str(victim)],
            "formal": ["--report", "--groups", "dma", "--json", str(victim)],
            "bench": ["-o", str(victim)]}[tool]
    main = {"difftest": difftest_main, "mutate": mutate_main, "formal": formal_main, "bench": bench.main}[tool]
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{says[0]}{victim}: the file exists and is not {says[1]} (a JSON object): the run would write over it; "
        "give a new name, or remove the file first"]
    assert victim.read_text() == existing


def _mutate_modules(monkeypatch, tmp_path, modules: str):
    """What `python -m testbench.mutate --python --modules MODULES` would mutate (the
    campaign itself stubbed out), or its usage error."""
    import testbench.mutate.__main__ as mutate_cli

    seen = []
    monkeypatch.setattr(mutate_cli, "_python", lambda report, mods, *a: seen.append(mods))
    monkeypatch.setattr(mutate_cli, "_finish", lambda *a: 0)
    mutate_cli.main(["--python", "--modules", modules, "--json", str(tmp_path / "m.json")])
    return seen[0]


def test_mutate_modules_are_paths_in_the_tree(monkeypatch, tmp_path):
    """An absolute path to a module of the tree is the module (the scratch copy rewrote the
    path as given: the working tree's own file, in place)."""
    from testbench.mutate.pymut import ROOT

    assert _mutate_modules(monkeypatch, tmp_path, f"{ROOT}/kmd_model/sched/fence.py, ./kmd_model/irq/ih.py") == \
        ("kmd_model/sched/fence.py", "kmd_model/irq/ih.py")


@pytest.mark.parametrize("modules, message", [
    # none named ran every module of the campaign (an hour of --sample 1)
    ("", "no module in '': name .py files under kmd_model/, umd/, spec/, or leave --modules out for the "
         "campaign's own (testbench/mutate/scope.py)"),
    (" , ", "no module in ' , ': name .py files under kmd_model/, umd/, spec/, or leave --modules out for the "
            "campaign's own (testbench/mutate/scope.py)"),
    # a file outside the tree was rewritten in place by the scratch copy's undecorate
    ("/etc/hostname", "/etc/hostname is outside the tree ({root})"),
    ("../kmd_model/sched/fence.py", "../kmd_model/sched/fence.py is outside the tree ({root})"),
    ("README.md", "README.md: the campaign mutates .py files under kmd_model/, umd/, spec/"),
    ("testbench/lint.py", "testbench/lint.py: the campaign mutates .py files under kmd_model/, umd/, spec/"),
    ("kmd_model/nosuch.py", "no such module kmd_model/nosuch.py"),
    ("umd/queue/record.py,umd/queue/./record.py", "umd/queue/./record.py is given twice"),
])
def test_mutate_modules_that_cannot_be_mutated_are_one_usage_line(monkeypatch, tmp_path, capsys, modules, message):
    from testbench.mutate.pymut import ROOT

    with pytest.raises(SystemExit) as e:
        _mutate_modules(monkeypatch, tmp_path, modules)
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "python -m testbench.mutate: error: argument --modules: " + message.replace("{root}", str(ROOT.resolve()))]


@pytest.mark.parametrize("text", ['{"outcomes": [', "[1]", '{"outcomes": [{"x": 1}], "meta": {}}'],
                         ids=["cut-short", "a-list", "other-fields"])
def test_mutate_report_from_outcomes_it_cannot_read_is_one_line(monkeypatch, tmp_path, capsys, text):
    """`python -m testbench.mutate --report` on a build/mutate/*/outcomes.json cut short (^C or
    a full disk while it was written) or edited: json's or the dataclass's traceback."""
    import testbench.mutate.__main__ as mutate_cli

    f = tmp_path / "build" / "mutate" / "py" / "outcomes.json"
    f.parent.mkdir(parents=True)
    f.write_text(text)
    monkeypatch.setattr(mutate_cli, "ROOT", tmp_path)
    report = tmp_path / "mutate.json"
    assert mutate_cli.main(["--report", "--json", str(report)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"mutate: --report: {f} is not a run's outcomes (") and \
        err[0].endswith("): run the campaign again (make mutate)"), err
    assert not report.exists()


def test_mutate_reports_are_written_whole_or_not_at_all(monkeypatch, tmp_path):
    """A ^C (or a full disk) while build/mutate.json or a layer's outcomes.json was written
    left half a file, which --report then read (or a reader took for the campaign's)."""
    from pathlib import Path

    import testbench.mutate.__main__ as mutate_cli
    from testbench.mutate import survivors
    from testbench.mutate.report import Outcome, Report

    report = Report(survivors.load(), meta={"seconds": {}})
    report.outcomes.append(Outcome("rtl", "rtl/x.py", "k", "-a\n+b", "killed", "1", "f"))
    path = tmp_path / "mutate.json"
    layer = tmp_path / "build" / "mutate" / "rtl" / "outcomes.json"
    for f in (path, layer):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text('{"earlier": 1}')
    from testbench import pipes

    real = pipes.os.replace

    def interrupted(src, dst):  # (stopped with the new text written beside it, not in place yet)
        assert Path(src).read_text() and Path(src).parent == Path(dst).parent
        raise KeyboardInterrupt

    monkeypatch.setattr(mutate_cli, "ROOT", tmp_path)
    monkeypatch.setattr(pipes.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write(path)
    with pytest.raises(KeyboardInterrupt):
        mutate_cli._save(report, "rtl")
    monkeypatch.setattr(pipes.os, "replace", real)
    assert sorted(p.name for p in path.parent.iterdir() if p.suffix == ".tmp") == []
    assert path.read_text() == '{"earlier": 1}' and layer.read_text() == '{"earlier": 1}'
    report.write(path)
    mutate_cli._save(report, "rtl")
    assert json.loads(path.read_text())["layers"]["rtl"]["killed"] == 1
    assert json.loads(layer.read_text())["outcomes"][0]["key"] == "k"


@pytest.mark.parametrize("given, says", [
    (["--sample", "0.5"], "the last run was --sample 0.25"),
    (["--seed", "9"], "the last run was --seed 3"),
    (["--modules", "kmd_model/irq/ih.py"], "the last run was --modules kmd_model/sched/fence.py"),
])
def test_mutate_resume_with_another_choice_is_one_usage_line(monkeypatch, tmp_path, capsys, given, says):
    """--resume reused the last run's mutants and verdicts whatever --sample, --seed and
    --modules said (its help: "same --sample and --seed"): another choice mixed one sample's
    verdicts with another's, and other modules' mutants ran as the ones asked for."""
    import testbench.mutate.__main__ as mutate_cli
    from testbench.mutate.pymut import PyCampaign

    monkeypatch.setattr(PyCampaign, "work", tmp_path)
    (tmp_path / "campaign.json").write_text(json.dumps(
        {"modules": ["kmd_model/sched/fence.py"], "sample": 0.25, "seed": 3}))
    monkeypatch.setattr(mutate_cli, "_python", lambda *a, **k: pytest.fail("the campaign ran"))
    base = ["--python", "--resume", "--modules", "kmd_model/sched/fence.py", "--sample", "0.25", "--seed", "3"]
    with pytest.raises(SystemExit) as exc:
        mutate_cli.main(base + given + ["--json", str(tmp_path / "m.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"python -m testbench.mutate: error: argument --resume: {says}"), err
    assert err[0].endswith("give the same to go on, or run without --resume to start again"), err
