"""The examples' command lines: a usage error is one line (`NAME: error: MESSAGE`, exit
status 2), the usage block left to --help, as every CLI of the project
(testbench/argtypes.py OneLineParser)."""

from __future__ import annotations

from pathlib import Path

import pytest


EXAMPLES = sorted(p.stem for p in (Path(__file__).resolve().parents[3] / "examples").glob("*.py")
                  if "parse_args(" in p.read_text())


def test_the_examples_that_read_arguments_are_found():
    assert EXAMPLES == ["async_submit", "batching", "copy_pipeline", "memcpy", "pools", "producer_consumer"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_says_a_usage_error_in_one_line(capsys, name):
    """The examples' own parsers are the shared one-line parser too (they printed argparse's
    usage block first), for argparse's errors and their own range checks (ap.error)."""
    import importlib

    main = importlib.import_module(f"examples.{name}").main
    source = (Path(__file__).resolve().parents[3] / "examples" / f"{name}.py").read_text()
    assert "argparse.ArgumentParser(" not in source
    for argv, message in ((["--help"], None),
                          (["--no-such-option"], "unrecognized arguments: --no-such-option (")):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        out, err = capsys.readouterr()
        if message is None:
            assert exc.value.code == 0 and out.startswith(f"usage: {name}") and not err
            usage = " ".join(out.split("\n\n")[0].split())  # (--help's usage lines, as one)
        else:
            assert exc.value.code == 2 and err.splitlines() == [f"{name}: error: {message}{usage})"] and not out


@pytest.mark.parametrize("name", EXAMPLES)
def test_an_examples_unknown_option_names_its_options_and_the_one_meant(capsys, name):
    """`memcpy --sedd 3` said "unrecognized arguments: --sedd 3" and no more: which options an
    example has was --help's alone. The error names them, as the usage line does, and the
    one meant when the unknown one is spelt close to one (each example's first option,
    with a letter doubled)."""
    import importlib
    import re

    main = importlib.import_module(f"examples.{name}").main
    with pytest.raises(SystemExit):
        main(["--help"])
    usage = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    first = re.findall(r"\[(--[a-z-]+)", usage)[0]
    typo = first[:4] + first[3] + first[4:]  # (--seed: --seeed)
    with pytest.raises(SystemExit) as exc:
        main([typo, "3"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{name}: error: unrecognized arguments: {typo} 3: did you mean {first}? ({usage})"]


def test_memcpys_unknown_option_as_a_newcomer_reads_it(capsys):
    from examples import memcpy

    with pytest.raises(SystemExit):
        memcpy.main(["--sedd", "3"])
    assert capsys.readouterr().err == ("memcpy: error: unrecognized arguments: --sedd 3: did you mean --seed? "
                                       "(usage: memcpy [-h] [--seed SEED])\n")


def test_an_examples_own_range_check_is_one_line(capsys):
    from examples import copy_pipeline

    with pytest.raises(SystemExit) as exc:
        copy_pipeline.main(["--chunk-bytes", "6"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["copy_pipeline: error: argument --chunk-bytes: must be a multiple "
                                                    "of 4, not 6"]


def test_memcpy_refuses_a_negative_seed_before_it_runs(capsys):
    """`memcpy --seed -1` was numpy's "ValueError: expected non-negative integer" from the app
    (a crash report of an exception) instead of a usage error."""
    from examples import memcpy

    with pytest.raises(SystemExit) as exc:
        memcpy.main(["--seed", "-1"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == ["memcpy: error: argument --seed: must be at least 0, not -1"]


def test_copy_pipeline_chunks_that_do_not_fit_are_one_line(capsys):
    """`copy_pipeline --chunks 256 --chunk-bytes 65536`, both within the ranges its --help
    gives, needs 16 MiB of GTT, more than the reference model leaves free: it ended in
    alloc's OutOfMemory traceback and a crash report. It is one usage line, status 2, the
    device closed, before anything runs."""
    import kmd_model
    from examples import copy_pipeline
    from testbench.refmodel import RefModel

    kmd = kmd_model.bind(RefModel())
    try:
        with pytest.raises(SystemExit) as exc:
            copy_pipeline.main(["--chunks", "256", "--chunk-bytes", "65536"])
        assert exc.value.code == 2 and not kmd.files
        out, err = capsys.readouterr()
        assert not out and len(err.splitlines()) == 1 and err.startswith(
            "copy_pipeline: error: --chunks 256 of --chunk-bytes 65536 (16777216 bytes in GTT and again in VRAM) do "
            "not fit in the model device's memory (alloc: no device memory for 0x1000000 bytes") and err.endswith(
            "): give fewer or smaller chunks\n"), err
    finally:
        kmd_model.unbind()


def test_producer_consumer_items_past_the_kmds_job_limit_are_one_line(capsys):
    """`producer_consumer --items 33` (its --help gave 1-1024) recorded 33 jobs before the
    producer's first item; the KMD holds a context's CS past sched_jobs (32) unfinished jobs
    until the oldest is done, and the oldest waited for the producer: the job timer ended it
    after 500,000 cycles, a GpuError and a crash report. It is one usage line naming the
    limit, the device never opened; 32 items run, and --one-submission (one job) is not held
    to it."""
    import kmd_model
    from examples import producer_consumer
    from testbench.refmodel import RefModel

    kmd = kmd_model.bind(RefModel(dma=True))
    try:
        with pytest.raises(SystemExit) as exc:
            producer_consumer.main(["--items", "33"])
        assert exc.value.code == 2 and not kmd.files
        assert capsys.readouterr().err.splitlines() == [
            "producer_consumer: error: --items 33: at most 32 here: every item is a job recorded before the producer "
            "starts, and the KMD holds a context's CS past 32 unfinished jobs (sched_jobs) until its oldest, item 0, "
            "is done: a deadlock the job timer would end"]
        assert producer_consumer.main(["--items", "32", "--slots", "64"]) == 0
        assert capsys.readouterr().out.splitlines()[-1] == "producer/consumer: OK on model — 32 items, 64 slots"
    finally:
        kmd_model.unbind()


@pytest.mark.parametrize("name", ["hello", "fill", "gpu_error", "demo"])
def test_an_example_without_options_run_by_python_refuses_arguments(name):
    """`python examples/hello.py --help` ran the whole example, and so did a mistyped option
    or gpucosim's `--sim model` given to python: ignored. --help says what the example is,
    another argument is one line, exit status 2, and nothing runs."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("GPUCOSIM_LOG", None)

    def python(*argv):
        return subprocess.run([sys.executable, f"examples/{name}.py", *argv], cwd=root, env=env,
                              capture_output=True, text=True, timeout=120)

    r = python("--help")
    assert r.returncode == 0 and r.stdout.startswith(f"usage: {name} [-h]\n") and not r.stderr, r
    assert "It takes no arguments; `gpucosim run examples/" in r.stdout and f"{name}:" not in r.stdout
    r = python("--sim", "model")
    assert r.returncode == 2 and r.stdout == "", r
    assert r.stderr.splitlines() == [f"{name}: error: {name} takes no arguments, not --sim model (usage: {name} [-h]; "
                                     "`gpucosim run --help` lists the options of a run, --sim among them)"], r.stderr
    r = python()  # (without arguments it runs, on the reference model)
    assert r.returncode == 0 and f"{name}: OK on model" in r.stdout, r
