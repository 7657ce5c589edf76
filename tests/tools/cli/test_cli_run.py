"""`gpucosim run` and `gpucosim sim`: argument errors, an app's exit status, arguments and
exit report, crash reports, an app that cannot load, a reader that goes away, Ctrl-C, the
simulator build's one line, and the demo's whole journey on the model and the RTL (pinned:
the messages are the interface a user reads)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import shared_run

from .cli_helpers import ROOT, gpucosim, usage_error


# ------------------------------------------------------------------------------ run: argument errors

def test_run_errors(capsys, tmp_path):
    assert usage_error(capsys, "run") == "gpucosim run: error: the following arguments are required: APP"
    assert usage_error(capsys, "run", "nosuch.py", "--sim", "model") == "gpucosim run: error: no app at nosuch.py"
    # a module's name with the file's .py: said which two ways there are (it was "no app at" alone)
    assert usage_error(capsys, "run", "examples.hello.py", "--sim", "model") == (
        "gpucosim run: error: no app at examples.hello.py: a module is named without .py (examples.hello), a file "
        "with its folders (examples/hello.py)")
    # a folder where the app was meant: said so (it was "no app at", or "no module named")
    (tmp_path / "apps.py").mkdir()
    assert usage_error(capsys, "run", str(tmp_path / "apps.py"), "--sim", "model") == (
        f"gpucosim run: error: {tmp_path / 'apps.py'} is a folder, not an app: give the .py file to run")
    from gpucosim.run.app import AppNotFound, find_app

    (tmp_path / "apps").mkdir()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(AppNotFound, match=r"^apps\.py is a folder, not an app: give the \.py file to run$"):
            find_app("apps.py")
        with pytest.raises(AppNotFound, match=r"^apps is a folder, not an app: give the APP\.py in it, a module "
                                              r"\(examples\.demo\) or module:function$"):
            find_app("apps")
    finally:
        os.chdir(cwd)
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "spice") == (
        "gpucosim run: error: argument --sim: unknown simulator 'spice': choose verilator, icarus or model")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--waves") == (
        "gpucosim run: error: --waves needs a simulator: use --sim verilator or --sim icarus")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--waves-file", "w.fst") == (
        "gpucosim run: error: --waves-file (a waveform) needs a simulator: use --sim verilator or --sim icarus")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "verilator", "--rtl-engines") == (
        "gpucosim run: error: --rtl-engines applies to the reference model (--sim model): the RTL has only its "
        "own engines")
    # (both ran a model without its DMA engine, which --rtl-engines says the RTL has)
    for order in (("--rtl-engines", "--no-dma"), ("--no-dma", "--rtl-engines")):
        assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", *order) == (
            "gpucosim run: error: --rtl-engines and --no-dma contradict each other: the RTL has a DMA engine "
            "(give one of them)")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--kmd", "job_timeout") == (
        "gpucosim run: error: --kmd wants KEY=VALUE, not 'job_timeout'")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--kmd", "speed=3").startswith(
        "gpucosim run: error: --kmd: unknown KMD parameter 'speed' (known: ban_after_hangs, cap_perfmon, cap_sys_nice, checked_job_timeouts, cs_check, fallback_poll, ")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--kmd", "job_timeout=soon") == (
        "gpucosim run: error: --kmd job_timeout: 'soon' is not an integer (decimal or 0x hex)")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--kmd", "cs_check=maybe") == (
        "gpucosim run: error: --kmd cs_check: 'maybe' is not a boolean (1/0, true/false)")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--kmd", "job_timeout=0") == (
        "gpucosim run: error: --kmd: KMD parameter job_timeout must be an int in [1, 4611686018427387904], not 0")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--log", "ioctl=loud") == (
        "gpucosim run: error: --log: unknown log level 'loud' (use debug, info, warning, error)")
    # (a module where a level goes was "unknown log level 'ioctl'"; `all`, which the modules' list
    # offers as a module, too); each names the spelling it meant (`--log all` was told the
    # syntax alone, not all=info)
    for spec, meant in (("ioctl", "ioctl=info"), ("ioctl:info", "ioctl=info"), ("all", "all=info"),
                        ("ring:debug", "ring=debug"), ("rign:debug", "ring=debug"), ("all:warning", "all=warning")):
        assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--log", spec) == (
            f"gpucosim run: error: --log: {spec!r}: did you mean {meant}? (a module's level is MODULE=LEVEL, "
            "ioctl=info; a level alone is every module's: debug, info, warning, error)")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--data-width", "48") == (
        "gpucosim run: error: argument --data-width: '48' is not a bus width: choose 32, 64, 128 or 256")
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "model", "--stats-json", str(tmp_path)) == (
        f"gpucosim run: error: --stats-json wants a file, not the folder {tmp_path}")


def test_run_help_names_every_log_module():
    """`gpucosim run --help` lists the --log modules: it left out vm (mappings, VMIDs, TLB
    flushes), which --log accepts and its error message names."""
    from gpucosim import cli
    from kmd_model.log import MODULES

    listed = cli.RUN_EPILOG.split("modules:", 1)[1].split("levels:", 1)[0]
    assert [m for m in MODULES if f" {m}" not in listed.replace(",", " ").replace("\n", " ")] == []


def test_run_refuses_what_it_would_find_out_too_late(capsys, tmp_path, monkeypatch):
    """Bad settings that used to be ignored, or to fail with a traceback (some only after the
    whole run), are one line before anything runs."""
    monkeypatch.delenv("GPUCOSIM_LOG", raising=False)
    monkeypatch.delenv("SIM", raising=False)
    model = ("run", "examples/demo.py", "--sim", "model")
    assert usage_error(capsys, *model, "--log", "nosuchmod=info") == (
        "gpucosim run: error: --log: unknown module 'nosuchmod' (modules: umd, ioctl, kmd, cs, ring, fence, ih, "
        "sched, bo, vm, bus, cp, sdma, or all)")
    for empty in ("", " , "):  # (`--log "$LOG"` with LOG unset set nothing, and said nothing)
        assert usage_error(capsys, *model, "--log", "ioctl=info", "--log", empty) == (
            f"gpucosim run: error: --log: {empty!r} names no module=level pair (e.g. ioctl=info,ring=debug, "
            "or one level for all: info)")
    a_file = tmp_path / "f"
    a_file.write_text("")
    assert usage_error(capsys, *model, "--trace", str(a_file / "t.json")) == (
        f"gpucosim run: error: --trace: {a_file} is a file, not a folder")
    # (a folder to be made is checked where it would be made: the nearest that exists)
    assert usage_error(capsys, *model, "--trace", "/proc/no/t.json") == (
        "gpucosim run: error: --trace: cannot write in /proc: No such file or directory")
    assert usage_error(capsys, *model, "--crash-dir", str(a_file)) == (
        f"gpucosim run: error: --crash-dir: {a_file} is a file, not a folder")
    assert usage_error(capsys, *model, "--stats-json", "/proc/no/s.json") == (
        "gpucosim run: error: --stats-json: cannot write in /proc: No such file or directory")
    monkeypatch.setenv("GPUCOSIM_LOG", "bogus")
    assert usage_error(capsys, *model) == ("gpucosim run: error: GPUCOSIM_LOG: unknown log level 'bogus' "
                                           "(use debug, info, warning, error) (in the environment)")
    monkeypatch.setenv("GPUCOSIM_LOG", "kmd=info,nosuch=debug")
    assert usage_error(capsys, *model).startswith("gpucosim run: error: GPUCOSIM_LOG: unknown module 'nosuch'")
    monkeypatch.delenv("GPUCOSIM_LOG")
    monkeypatch.setenv("SIM", "spice")
    assert usage_error(capsys, "run", "examples/demo.py") == (
        "gpucosim run: error: SIM='spice' (from the environment): unknown simulator 'spice': choose verilator, icarus "
        "or model (or give --sim)")
    monkeypatch.delenv("SIM")
    monkeypatch.setenv("GPUCOSIM_BUILD", str(a_file))
    assert usage_error(capsys, "run", "examples/demo.py", "--sim", "verilator") == (
        f"gpucosim run: error: GPUCOSIM_BUILD: {a_file} is a file, not a folder")
    assert usage_error(capsys, "plot", "build/x.json", "-o", str(a_file / "p.png")) == (
        f"gpucosim plot: error: -o: {a_file} is a file, not a folder")
    # a folder that exists but takes no files (os.access says yes to root): /proc
    assert usage_error(capsys, *model, "--trace", "/proc/t.json") == (
        "gpucosim run: error: --trace: cannot write in /proc: No such file or directory")
    assert usage_error(capsys, *model, "--crash-dir", "/proc") == (
        "gpucosim run: error: --crash-dir: cannot write in /proc: No such file or directory")
    assert usage_error(capsys, "plot", "build/x.json", "-o", "/proc/p.png") == (
        "gpucosim plot: error: -o: cannot write in /proc: No such file or directory")


def test_run_makes_its_output_folders_only_to_write(capsys, monkeypatch, tmp_path):
    """The argument checks made --trace's, --stats-json's and --crash-dir's folders (checking
    they could take a file by making them): a run refused after the checks (here: an
    argument the app cannot read), or failing, left them empty behind it. They are made by
    what writes into them; a run that writes makes them."""
    outs = ["--trace", str(tmp_path / "t" / "a" / "t.json"), "--stats-json", str(tmp_path / "s" / "s.json"),
            "--crash-dir", str(tmp_path / "c" / "crash")]
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", *outs, "--bogus").endswith(
        "neither gpucosim nor the app knows --bogus (examples/hello.py reads no arguments; gpucosim run --help "
        "lists the options)")
    assert list(tmp_path.iterdir()) == []
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", *outs, "--kmd", "job_timeout=0") \
        .startswith("gpucosim run: error: --kmd: ")  # (a refusal after the output checks)
    assert list(tmp_path.iterdir()) == []
    # the build folder (a simulator's run, or a timeline's) is checked, not made, too
    monkeypatch.setenv("GPUCOSIM_BUILD", str(tmp_path / "b" / "build"))
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verilator", "--bogus").endswith(
        "neither gpucosim nor the app knows --bogus (examples/hello.py reads no arguments; gpucosim run --help "
        "lists the options)")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", *outs, "--bogus").startswith(
        "gpucosim run: error: ")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.delenv("GPUCOSIM_BUILD")
    r = gpucosim("run", "examples/gpu_error.py", "--sim", "model", *outs)
    assert (tmp_path / "t" / "a" / "t.json").is_file() and (tmp_path / "s" / "s.json").is_file(), r.stderr
    assert list((tmp_path / "c" / "crash").glob("crash-gpu_error-model-*.txt")), r.stderr
    r = gpucosim("run", "examples/hello.py", "--sim", "model", "--crash-dir", str(tmp_path / "none"))
    assert r.returncode == 0 and not (tmp_path / "none").exists(), r.stderr  # (no crash: no folder)


def test_run_refuses_bad_driver_settings_in_the_environment(capsys, monkeypatch):
    """GPUCOSIM_CLOCK=bogus ended a simulator run in a 28-line traceback from the build;
    GPUCOSIM_ASYNC_SUBMIT=maybe in the app's first umd.open(), a traceback and a crash
    report. Both are one line before anything runs, as GPUCOSIM_LOG and SIM are."""
    monkeypatch.setenv("GPUCOSIM_CLOCK", "bogus")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "verilator") == (
        "gpucosim run: error: GPUCOSIM_CLOCK='bogus': choose hdl or cocotb (in the environment)")
    monkeypatch.delenv("GPUCOSIM_CLOCK")
    monkeypatch.setenv("GPUCOSIM_ASYNC_SUBMIT", "maybe")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model") == (
        "gpucosim run: error: GPUCOSIM_ASYNC_SUBMIT='maybe': choose 0 or 1 (in the environment)")


@pytest.mark.parametrize("var", ["COCOTB_LOG_LEVEL", "GPI_LOG_LEVEL"])
def test_run_refuses_a_bad_cocotb_log_level_in_the_environment(var):
    """COCOTB_LOG_LEVEL=LOUD (or GPI_LOG_LEVEL) was cocotb's ValueError traceback inside the
    simulator, then "the app did not finish on verilator: ... the simulator crashed or
    hung", status 1. One line before the build now; any case of a level cocotb knows runs."""
    r = gpucosim("run", "examples/hello.py", "--sim", "verilator", env={var: "LOUD"})
    assert r.returncode == 2 and r.stderr == (f"gpucosim run: error: {var}='LOUD': choose CRITICAL, ERROR, WARNING, "
                                              "INFO, DEBUG, TRACE, NOTSET (in the environment)\n"), r.stderr
    from testbench import sim

    if sim.unavailable_reason("verilator"):
        return
    r = gpucosim("run", "examples/hello.py", "--sim", "verilator", env={var: "error"}, timeout=300)
    assert r.returncode == 0 and "hello: OK on verilator" in r.stdout, r.stderr[-2000:]


def test_run_names_an_app_file_that_is_not_text(capsys, tmp_path):
    """A binary file named like an app (a build product, a mistyped name) was imported: a
    SyntaxError whose excerpt wrote its raw bytes to the terminal."""
    app = tmp_path / "blob.py"
    app.write_bytes(bytes([0x7f, 0x45, 0x4c, 0x46, 0xe5, 0x80, 0x00, 0x01]))
    assert usage_error(capsys, "run", str(app), "--sim", "model") == \
        f"gpucosim run: error: {app} is not a Python file: byte 4 is not UTF-8 text"
    app.write_bytes(b"def main():\n    return 0\n\0\0")
    assert usage_error(capsys, "run", str(app), "--sim", "model") == \
        f"gpucosim run: error: {app} is not a Python file: it holds NUL bytes"


def test_app_arguments_without_dashes(capsys):
    """Options gpucosim does not know, after APP, are the app's; before APP they are an error."""
    r = gpucosim("run", "examples/producer_consumer.py", "--sim", "model", "--items", "6")
    assert r.returncode == 0 and "producer/consumer: OK on model — 6 items, 4 slots" in r.stdout, r.stderr
    assert usage_error(capsys, "run", "--frob", "examples/producer_consumer.py", "--sim", "model") == (
        "gpucosim run: error: unrecognized arguments before APP: --frob")
    r = gpucosim("run", "examples/producer_consumer.py", "--sim", "model", "--bogus")
    assert r.returncode == 2 and "producer_consumer: error: unrecognized arguments: --bogus" in r.stderr
    # an app that reads no arguments: a mistyped gpucosim option must not pass unnoticed, and
    # is refused before the run (its source names no argv, no parser, imports nothing that
    # could read them): it was found after the app had run to its end, after a simulator's
    # build and the whole run on the RTL
    for sim in ("model", "verilator"):
        assert usage_error(capsys, "run", "examples/hello.py", "--sim", sim, "--trce", "build/t.json") == (
            "gpucosim run: error: neither gpucosim nor the app knows --trce build/t.json: did you mean --trace? "
            "(examples/hello.py reads no arguments; gpucosim run --help lists the options)")
        assert capsys.readouterr().out == ""  # (the app did not run)
    assert usage_error(capsys, "run", "examples.gpu_error:main", "--sim", "model", "--bogus") == (
        "gpucosim run: error: neither gpucosim nor the app knows --bogus (examples.gpu_error:main reads no "
        "arguments; gpucosim run --help lists the options)")


def test_the_tutorials_deadlock_ends_in_its_report_not_in_leaks(tmp_path):
    """docs/tutorial.md's job that never finishes (`producer_consumer.py --one-submission`):
    the KMD's job timer ends it, the example says which item was never consumed, exit 1. The
    example returned without closing its device, so every such run ended in four LEAK lines
    (device, buffers, BOs) that blamed the user's first experiment for the example's exit."""
    r = gpucosim("run", "examples/producer_consumer.py", "--sim", "model", "--one-submission",
                 "--kmd", "job_timeout=20000", "--crash-dir", str(tmp_path / "crash"))
    assert r.returncode == 1, r.stderr
    assert "producer/consumer: item 0 was never consumed: GPU error: job 0x1 timed out on gfx" in r.stdout
    assert "stuck in WAIT_REG_MEM" in r.stderr and len(list((tmp_path / "crash").glob("*.txt"))) == 1
    assert "LEAK" not in r.stderr and "exit report" not in r.stderr, r.stderr


def test_app_arguments_reach_an_app_that_may_read_them(tmp_path):
    """The check before the run refuses only what no app could take: an app whose own module
    reads sys.argv for it gets its arguments (a helper beside it, `import helper`); one that
    names argv but never reads it is still told after its run, as before."""
    (tmp_path / "helper.py").write_text("import sys\n\ndef items():\n    return sys.argv[1:]\n")
    (tmp_path / "app.py").write_text("import helper\n\ndef main():\n    print('app got', helper.items())\n")
    r = gpucosim("run", str(tmp_path / "app.py"), "--sim", "model", "--bogus", "3")
    assert r.returncode == 0 and "app got ['--bogus', '3']" in r.stdout, r.stderr
    (tmp_path / "lazy.py").write_text("import sys\n\ndef main():\n    print('lazy ran')\n    if False:\n"
                                      "        print(sys.argv)\n")
    r = gpucosim("run", str(tmp_path / "lazy.py"), "--sim", "model", "--bogus")
    assert r.returncode == 2 and "lazy ran" in r.stdout, r.stderr
    assert r.stderr.splitlines()[-1].startswith("gpucosim run: error: neither gpucosim nor the app knows --bogus (")


@pytest.mark.parametrize("reads", ["print('args:', sys.argv)", "args = sys.argv.copy(); print('args:', args)",
                                   "print('args:', sys.argv.pop())", "print('args:', sys.argv == ['x', '--n'])"])
def test_an_app_that_reads_its_arguments_is_not_told_it_reads_none(tmp_path, reads):
    """A script that printed its sys.argv, copied it, popped an argument off it or compared
    it ran to its end and was then told "neither gpucosim nor the app knows --n (... reads no
    arguments ...)", exit status 2: only iterating, len(), `in` and indexing were seen."""
    (tmp_path / "args.py").write_text(f"import sys\n{reads}\n")
    r = gpucosim("run", str(tmp_path / "args.py"), "--sim", "model", "--n")
    assert r.returncode == 0 and "args:" in r.stdout and "neither gpucosim" not in r.stderr, r.stderr


# ------------------------------------------------------------------------------ run / sim on the model

def test_sim_runs_the_demo_on_the_model():
    r = gpucosim("sim", "--sim", "model")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("demo: OK on model — 24 packets")


LAYERS = ("app", "umd", "ioctl", "cs", "sched", "ring", "cp", "ih", "fence", "kmd")


def _demo(backend: str, *extra: str) -> list[str]:
    if backend != "model":
        from testbench import sim

        reason = sim.unavailable_reason(backend)
        if reason:
            pytest.skip(reason)
    r = gpucosim("sim", "--sim", backend, *extra, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout.splitlines()


@pytest.mark.parametrize("backend", ["icarus", "verilator"])
@pytest.mark.xdist_group("demo_rtl")
def test_sim_shows_the_whole_journey(backend):
    """`make sim` is the journey at a glance: every layer appears, the CP's own lines
    among them (the app's trace is on before the hardware monitors start), the packets the
    CP started are those the reference model ran, and the lines fit a terminal."""
    lines = _demo(backend)
    seen = {ln[1:ln.index("]")] for ln in lines if ln.startswith("[") and "]" in ln}
    assert set(LAYERS) <= seen, sorted(set(LAYERS) - seen)
    cp = [ln for ln in lines if ln.startswith("[cp] ")]
    # the model built with the RTL's engines only (today all of them): the same device
    # (the same model run for both simulators: made once per pytest run)
    model = shared_run("demo-model-rtl-engines", lambda: _demo("model", "--rtl-engines"))
    model_cp = [ln for ln in model if ln.startswith("[cp] ")]
    assert len(model_cp) > 20 and cp == model_cp
    assert max(map(len, lines)) <= 170, max(lines, key=len)
    assert lines[-1].startswith(f"demo: OK on {backend} — 24 packets")


def test_python_m_gpucosim_run_works():
    """`python -m gpucosim run` (what `make sim` runs) without the installed script; it
    replaced `python -m testbench.run`, which imported the launcher from below it."""
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    r = subprocess.run([sys.executable, "-m", "gpucosim", "run", "examples.demo", "--sim", "model"], cwd=ROOT,
                       env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("demo: OK on model")


OUT_OF_RANGE = "gpucosim: the app's exit status {} is not one a process can have (0 to 255): status 1"


@pytest.mark.parametrize("ret, code, last", [("'no GPU here'", 1, "no GPU here"), ("True", 1, None), ("7", 7, None),
                                             ("None", 0, None), ("3.5", 1, "3.5"), ("raise SystemExit('bye')", 1, "bye"),
                                             ("256", 1, OUT_OF_RANGE.format(256)), ("-1", 1, OUT_OF_RANGE.format(-1)),
                                             ("raise SystemExit(512)", 1, OUT_OF_RANGE.format(512))])
def test_what_main_returns_is_an_exit_status_as_sys_exit_has_it(tmp_path, ret, code, last):
    """main()'s return value means what `sys.exit(value)` would: a string is a message and
    status 1, not a crash report of the launcher's own int() (as it once was). An int no
    status can hold was its low 8 bits: `return 256` was status 0, success (--stats-json
    said 256); it is 1, said so."""
    app = tmp_path / "app.py"
    app.write_text("def main():\n    " + (ret if ret.startswith("raise") else f"return {ret}") + "\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == code, r.stderr
    assert "crash report" not in r.stderr and "Traceback" not in r.stderr
    if last is not None:
        assert r.stderr.strip().splitlines()[-1] == last


def test_run_help_and_the_tutorial_say_what_a_return_value_means():
    """`gpucosim run os:getcwd` printed the directory on stderr and exited 1, which looked
    like a failure nobody had said: sys.exit's rule (test above), now written where a user
    looks, `gpucosim run --help` and the tutorial."""
    r = gpucosim("run", "--help")
    assert r.returncode == 0
    text = " ".join(r.stdout.split())
    assert "The exit status is what main() (or module:function) returns, as sys.exit(value)" in text
    assert "anything else is printed to stderr and is 1 (`gpucosim run os:getcwd` prints" in text
    tutorial = " ".join((ROOT / "docs" / "tutorial.md").read_text().split())
    assert "`gpucosim run os:getcwd` prints the directory and exits 1" in tutorial
    r = gpucosim("run", "os:getcwd", "--sim", "model")
    assert r.returncode == 1 and r.stdout == "" and r.stderr.strip().splitlines()[-1] == str(ROOT)


def test_run_exit_code_args_and_exit_report(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("import sys, umd\n"
                   "def main():\n"
                   "    gpu = umd.open(api_version=2)\n"
                   "    gpu.alloc(8192)  # never freed: a leak\n"
                   "    print('args', sys.argv[1:])\n"
                   "    return 3\n")
    r = gpucosim("run", str(app), "--sim", "model", "--stats", "--", "--size", "5")
    assert r.returncode == 3
    assert "args ['--size', '5']" in r.stdout
    assert "gpucosim: exit report (model, " in r.stderr
    assert "LEAK: 1 buffer of the app, 8 KiB, never freed: <umd.Buffer GTT " in r.stderr
    assert "LEAK: 1 buffer object, 256 KiB still allocated at exit" in r.stderr  # its slab: 32 entries
    assert "fences: " in r.stderr and "ioctls: " in r.stderr


def test_exit_report_counts_the_fences_of_every_driver_the_app_loaded(tmp_path):
    """An app that reloads the driver (kmd_model.rebind, as examples/batching.py does per IB
    alignment): the report's fences, doorbells and interrupts are the whole run's. They
    were the last driver's alone: batching.py --stats said "1 emitted, 2 doorbells, 1
    interrupts" (its final reload's IB test) beside 1,554 CS ioctls."""
    app = tmp_path / "reload.py"
    app.write_text("import kmd_model\nimport umd\n\n\n"
                   "def main():\n"
                   "    for align in (8, 16, 8):\n"
                   "        if kmd_model.bound().params.ib_align_dw != align:\n"
                   "            kmd_model.rebind(ib_align_dw=align)\n"
                   "        gpu = umd.open(api_version=2)\n"
                   "        q = gpu.queue()\n"
                   "        for i in range(3):\n"
                   "            q.write(gpu.alloc(64), 0, i)\n"
                   "            q.flush()\n"
                   "        q.finish()\n"
                   "        gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", "model", "--stats")
    assert r.returncode == 0, r.stderr
    # 9 CS, and each of the 3 drivers' bring-up: an IB test (a fence, an interrupt) after its ring test
    assert "  fences: 12 emitted, 12 signalled, 0 pending, last 0x00000004; 15 doorbells, 12 interrupts, 0 GPU " \
           "resets, 0 queue resets (over 3 driver loads: kmd_model.rebind)" in r.stderr.splitlines(), r.stderr
    assert "CS 9" in r.stderr


@pytest.mark.parametrize("sim", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_an_app_that_binds_a_device_of_its_own_is_told_it_runs_on_gpucosims(tmp_path, sim):
    """The tutorial's paste line (kmd_model.bind(RefModel())) copied into an app's main():
    under `gpucosim run --sim verilator` the app's work ran on that model instead of the RTL
    and said nothing ("ran on model", an exit report and a timeline of the RTL's bring-up
    alone). Binding another device during a run is EBUSY in one line naming the fix; a
    reload of the run's own device (kmd_model.rebind, batching.py) still works, and the
    claim ends with the run."""
    app = tmp_path / "own_model.py"
    app.write_text("import kmd_model\nimport umd\nfrom testbench.refmodel import RefModel\n\n\n"
                   "def main():\n"
                   "    kmd_model.bind(RefModel())\n"
                   "    gpu = umd.open(api_version=2)\n"
                   "    print('ran on', gpu.name)\n"
                   "    gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", sim, "--crash-dir", str(tmp_path / "crash"), timeout=600)
    assert r.returncode == 1 and "ran on" not in r.stdout, (r.stdout, r.stderr)
    assert (f"gpucosim: exception in the app: KmdError: EBUSY: bind: gpucosim run --sim {sim} has bound the driver "
            "to its own device: the app opens it with umd.open() alone (kmd_model.bind(RefModel()) is for a script "
            "run by itself, under `if __name__ == \"__main__\":`, as examples/hello.py does; a script without a main(), "
            "which gpucosim runs as __main__, binds only when kmd_model.bound() raises KmdError, as examples/demo.py "
            "does)") in r.stderr.splitlines()
    if sim == "model":
        r = gpucosim("run", "examples/batching.py", "--sim", "model", "--", "--commands", "8", "--thresholds", "1",
                     "--aligns", "1,8")
        assert r.returncode == 0 and "ioctls per command" in r.stdout, r.stderr
        from gpucosim.run.session import RunOptions, Session
        import kmd_model
        from testbench.refmodel import RefModel

        Session(RunOptions(app="examples/hello.py", backend="model")).run(RefModel(), lambda: 0)
        kmd_model.bind(RefModel())  # (after the run: anyone's)
        kmd_model.unbind()


@pytest.mark.parametrize("sim", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_an_app_named_like_a_driver_package_runs_on_every_backend(tmp_path, sim):
    """An app called umd.py (its folder goes first on sys.path, as a script's does) ran on
    the model, whose process had the drivers imported already, and on a simulator ended in
    a 20-line cocotb traceback: "No module named 'umd.runtime'; 'umd' is not a package"."""
    app = tmp_path / "umd.py"
    app.write_text("def main():\n"
                   "    import umd\n"
                   "    gpu = umd.open(api_version=2)\n"
                   "    print('app umd.py ran on', gpu.name)\n"
                   "    gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", sim, timeout=600)
    assert r.returncode == 0 and f"app umd.py ran on {sim}" in r.stdout, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr


def test_run_names_a_device_the_app_never_closed(tmp_path):
    """An app that opens a device and forgets gpu.close() (nothing allocated, so no BO is
    left to report) ended without a word."""
    app = tmp_path / "open_only.py"
    app.write_text("import umd\n"
                   "def main():\n"
                   "    umd.open(api_version=2)\n"
                   "    return 0\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 0, r.stderr
    assert "  LEAK: the app never closed its device (model, fd 3): gpu.close() frees its buffers, queues and " \
           "pools" in r.stderr.splitlines()


def test_run_writes_a_crash_report_on_an_exception(tmp_path):
    app = tmp_path / "boom.py"
    app.write_text("import umd\n"
                   "def main():\n"
                   "    gpu = umd.open(api_version=2)\n"
                   "    q = gpu.queue()\n"
                   "    q.write(gpu.alloc(4096), 0, [1, 2])\n"
                   "    q.finish()\n"
                   "    raise RuntimeError('the app gave up')\n")
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash"))
    assert r.returncode == 1
    assert "RuntimeError: the app gave up" in r.stderr
    assert "gpucosim: exception in the app: RuntimeError: the app gave up" in r.stderr
    reports = list((tmp_path / "crash").glob("crash-boom-model-*.txt"))
    assert len(reports) == 1 and f"crash report written to {reports[0]}" in r.stderr
    text = reports[0].read_text()
    for section in ("== exception in the app ==", "== registers ==", "== ring ==", "== last ioctls ==",
                    "== counters ==", "ioctl(fd 3, CS, "):
        assert section in text


@pytest.mark.parametrize("backend", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_a_reader_that_goes_away_ends_the_output_not_the_run(tmp_path, backend):
    """`gpucosim run APP | head`: once the pipe's reader has gone, output is dropped, and the
    app, the exit code and the reports are the run's (before: the app died of a
    BrokenPipeError on the model, with a traceback and a crash report; on a simulator the
    log's echo thread printed a traceback)."""
    if backend != "model":
        from testbench import sim

        if sim.unavailable_reason(backend):
            pytest.skip(sim.unavailable_reason(backend))
    app = tmp_path / "chatty.py"
    done = tmp_path / "done"
    app.write_text("import umd\n"
                   "def main():\n"
                   "    gpu = umd.open(api_version=2)\n"
                   "    buf = gpu.alloc(4096)\n"
                   "    for i in range(20000):\n"
                   "        print('line', i, 'of the app, long enough to fill a pipe quickly', flush=i % 100 == 0)\n"
                   "    q = gpu.queue()\n"
                   "    q.write(buf, 0, 7)\n"
                   "    q.finish()\n"
                   f"    open({str(done)!r}, 'w').write(str(int(buf.u32[0])))\n"
                   "    gpu.close()\n"
                   "    return 5\n")
    e = dict(os.environ, GPUCOSIM_PROGRESS="0")
    e.pop("GPUCOSIM_LOG", None)
    p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", backend, "--crash-dir",
                          str(tmp_path / "crash")], cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().startswith("line 0 ")
    p.stdout.close()  # the reader goes away, as `head -1` does
    err = p.stderr.read()
    assert p.wait(timeout=600) == 5, err[-3000:]
    assert "Traceback" not in err and "BrokenPipe" not in err, err[-3000:]
    assert done.read_text() == "7"  # the app ran to its end: the GPU wrote the buffer after the output was gone
    assert not list((tmp_path / "crash").glob("crash-*"))


def test_run_reports_an_app_that_cannot_load(tmp_path):
    app = tmp_path / "nomain.py"
    app.write_text("main = 1\n")  # (a main that is no function; a file with no main at all is a script)
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2
    assert f"gpucosim: cannot load app '{app}': it has no callable main()" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("sim", ["model", "verilator"])
@pytest.mark.parametrize("target, says", [
    ("/etc/passwd", "'/etc/passwd' is not an app: give APP.py, a module (examples.demo) or module:function"),
    ("examples.nosuch", "no module named 'examples.nosuch' (APP is APP.py, a module or module:function)"),
    ("nosuchpkg.mod:main", "no module named 'nosuchpkg.mod' (APP is APP.py, a module or module:function)"),
])
def test_run_names_an_app_that_is_not_there(sim, target, says):
    """A target that is no app (a file that is not Python, a module that does not exist) is
    one line of usage error before any backend starts: no traceback, no simulator build."""
    r = gpucosim("run", "--sim", sim, target)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == f"gpucosim run: error: {says}"
    assert "Traceback" not in r.stderr and "cocotb" not in r.stderr + r.stdout


FUNC = "is not a function name (give module:function, one colon, a Python name after it)"


@pytest.mark.parametrize("target, says", [
    ("examples.demo:", "'examples.demo:' names no function after the colon: give module:function, or the module "
                       "alone for its main()"),
    (":main", "':main' is not an app: give APP.py, a module (examples.demo) or module:function"),
    ("a::b", f"'a::b' is not an app: ':b' {FUNC}"),
    ("examples.demo:1x", f"'examples.demo:1x' is not an app: '1x' {FUNC}"),
    ("examples.demo:main:x", f"'examples.demo:main:x' is not an app: 'main:x' {FUNC}"),
    ("examples.demo:class", f"'examples.demo:class' is not an app: 'class' {FUNC}"),
    ("examples..demo", "'examples..demo' is not an app: 'examples..demo' is not a module name (dotted Python "
                       "names, as examples.demo)"),
    # (a new user's natural `PATH.py:function` was "is not an app: give APP.py, ... or module:function")
    ("examples/hello.py:main", "'examples/hello.py:main' is not an app: a function is named after a module, not a "
                               "file: give examples.hello:main (from the folder the module is in), or "
                               "examples/hello.py for its main()"),
    # (a path without its .py: "give APP.py, a module (examples.demo) or module:function", the file there)
    ("examples/hello", "'examples/hello' is not an app: did you mean examples/hello.py?"),
    ("examples/nosuch", "'examples/nosuch' is not an app: give APP.py, a module (examples.demo) or module:function"),
])
def test_run_refuses_a_malformed_target_before_importing_it(target, says):
    """`examples.demo:` (nothing after the colon) ran main(); `examples.demo:1x` imported the
    demo and then said it has no callable 1x(); `a::b` looked for a module `a`. The target's
    form is checked first: one line, the app never imported (nothing on stdout)."""
    r = gpucosim("run", target, "--sim", "model")
    assert r.returncode == 2 and not r.stdout, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == [f"gpucosim run: error: {says}"]


def test_run_shows_where_an_app_fails_to_import(tmp_path):
    """The app's own error while it is imported is its bug: the traceback says where."""
    app = tmp_path / "broken.py"
    app.write_text("import no_such_module_anywhere\n\ndef main():\n    pass\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2
    assert "Traceback" in r.stderr and f'File "{app}", line 1' in r.stderr
    assert (f"gpucosim: cannot load app '{app}': ModuleNotFoundError: No module named 'no_such_module_anywhere'"
            in r.stderr)
    assert "gpucosim/" not in r.stderr and "importlib" not in r.stderr  # (the app's frames only)


def test_an_app_that_opens_the_gpu_as_it_is_imported_is_told_where_in_its_own_frames(tmp_path):
    """An app with a main() that opens the device at its top level (imported before the
    device is up): the UMD's one-line error, and the traceback of the app's own line, not the
    UMD's frames under it (umd/runtime.py's hook, umd/api.py's check)."""
    app = tmp_path / "early.py"
    app.write_text("import umd\n\ngpu = umd.open()\n\ndef main():\n    gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2
    assert f'File "{app}", line 3' in r.stderr and "gpu = umd.open()" in r.stderr, r.stderr
    assert "umd/" not in r.stderr.replace("umd.open", "") and "gpucosim/" not in r.stderr, r.stderr
    assert r.stderr.splitlines()[-1].startswith(
        f"gpucosim: cannot load app '{app}': UmdError: open: no GPU is bound yet: an app with a main() run by "
        "`gpucosim run` opens it in main()"), r.stderr


FLAT = ("import sys\n"
        "import umd\n"
        "GPUCOSIM_LOG = 'ioctl=info'\n"
        "gpu = umd.open()\n"
        "buf = gpu.alloc(4096)\n"
        "q = gpu.queue()\n"
        "q.write(buf, 0, int(sys.argv[1], 0))\n"
        "done = q.signal()\n"
        "print('waited', done.wait(), hex(int(buf.u32[0])), __name__)\n"
        "if __name__ == '__main__':\n"
        "    gpu.close()\n"
        "    sys.exit(3)\n")


@pytest.mark.parametrize("sim", ["model", "verilator"])
def test_a_script_without_main_runs_once_the_device_is_up(tmp_path, sim):
    """A new user's first script has no main(): `umd.open()` on its top level. gpucosim
    imported it before the device was up, and it ended in "no GPU is bound yet". It runs
    now as `python app.py` would run it, as __main__ (its `if __name__ == "__main__":`
    too), once the device is bound, with its arguments and its GPUCOSIM_LOG."""
    app = tmp_path / "first.py"
    app.write_text(FLAT)
    r = gpucosim("run", str(app), "--sim", sim, "--", "0xc0ffee", timeout=600)
    assert r.returncode == 3, r.stderr[-3000:]
    assert "waited True 0xc0ffee __main__" in r.stdout, r.stdout[-3000:]
    assert "[ioctl]" in r.stdout  # (its GPUCOSIM_LOG, read from its source before it ran)
    assert "Traceback" not in r.stderr and "LEAK" not in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("source, has_main", [
    ("def main():\n    pass\n", True), ("main = lambda: 0\n", True), ("from examples.hello import main\n", True),
    ("if True:\n    def main():\n        pass\n", True), ("try:\n    import main\nexcept ImportError:\n    pass\n", True),
    ("from os import *\n", True),  # (it might: as before)
    ("import umd\ngpu = umd.open()\n", False), ("def run():\n    main = 1\n", False),
    ("class App:\n    def main(self):\n        pass\n", False), ("f = lambda main: main\n", False),
    ("from examples.hello import main as hello_main\n", False)])
def test_which_apps_are_scripts(tmp_path, source, has_main):
    """An app with a main() at its top level is imported and its main() called; one without
    (names bound inside a function or class are not the module's) runs as a script."""
    import ast

    from gpucosim.run.app import binds_name, script_source

    assert binds_name(ast.parse(source), "main") == has_main
    app = tmp_path / "app.py"
    app.write_text(source)
    assert script_source(str(app)) == (None if has_main else str(app))
    assert script_source(f"{app}:main") is None  # (a function named: never a script)


def test_a_script_without_main_that_binds_when_none_is_runs_both_ways(tmp_path):
    """A script without main() is __main__ under gpucosim too: one that binds the model for
    `python app.py` does it when no device is bound (the EBUSY's words say how), and then
    runs both ways, on gpucosim's device under `gpucosim run`."""
    app = tmp_path / "both.py"
    app.write_text("import kmd_model, umd\n"
                   "from testbench.refmodel import RefModel\n"
                   "try:\n"
                   "    kmd_model.bound()\n"
                   "except kmd_model.KmdError:\n"
                   "    kmd_model.bind(RefModel())\n"
                   "gpu = umd.open()\n"
                   "print('ran on', gpu.name)\n"
                   "gpu.close()\n")
    r = gpucosim("run", str(app), "--sim", "verilator", timeout=600)
    assert r.returncode == 0 and "ran on verilator" in r.stdout, r.stderr[-3000:]
    r = subprocess.run([sys.executable, str(app)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert r.returncode == 0 and "ran on model" in r.stdout, r.stderr[-3000:]


def test_a_script_module_without_main_runs_and_its_errors_are_its_own_lines(tmp_path):
    """The same for a module target (`python -m` would run it as __main__); an exception in
    a script is its own frames' traceback (not runpy's, not gpucosim's) and a crash report."""
    (tmp_path / "firstmod.py").write_text(FLAT)
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", str(ROOT))])}
    r = gpucosim("run", "firstmod", "--sim", "model", "--crash-dir", str(tmp_path / "crash"), "--", "7", env=env)
    assert r.returncode == 3 and "waited True 0x7 __main__" in r.stdout, r.stderr[-3000:]
    app = tmp_path / "bad.py"
    app.write_text("import umd\ngpu = umd.open()\nq = gpu.queue()\nq.write(None, 0, 1)\n")
    r = gpucosim("run", str(app), "--sim", "model", "--crash-dir", str(tmp_path / "crash"))
    assert r.returncode == 1, r.stderr
    lines = r.stderr.splitlines()
    assert lines[:4] == ["Traceback (most recent call last):", f'  File "{app}", line 4, in <module>',
                         "    q.write(None, 0, 1)", "TypeError: write: buf must be a umd Buffer, not None"], r.stderr
    assert "gpucosim: exception in the app: TypeError: write: buf must be a umd Buffer, not None" in r.stderr
    assert "runpy" not in r.stderr and "gpucosim/" not in r.stderr
    assert list((tmp_path / "crash").glob("crash-bad-*"))


def test_run_shows_where_an_app_has_a_syntax_error(tmp_path):
    """A syntax error in the app: its file, line and caret, and the one-line summary; none of
    the launcher's frames."""
    app = tmp_path / "typo.py"
    app.write_text("def main(:\n    pass\n")
    r = gpucosim("run", str(app), "--sim", "model")
    assert r.returncode == 2
    lines = r.stderr.rstrip().splitlines()
    assert lines[0] == f'  File "{app}", line 1', r.stderr
    assert lines[-2].startswith("SyntaxError:")
    assert lines[-1].startswith(f"gpucosim: cannot load app '{app}': SyntaxError: ")
    assert "Traceback" not in r.stderr and "gpucosim/" not in r.stderr


def test_a_build_says_so_once_off_a_terminal(tmp_path):
    """Off a terminal (CI, a pipe) there is no progress line: a run that must build the
    simulator says so in its first line, and a run that reuses the build says nothing."""
    from testbench import sim

    reason = sim.unavailable_reason("icarus")
    if reason:
        pytest.skip(reason)
    env = {"GPUCOSIM_BUILD": str(tmp_path / "build")}
    import shutil

    if (sim.BUILD / "rtl").is_dir():  # (the generated Verilog: only the simulator build is new)
        shutil.copytree(sim.BUILD / "rtl", tmp_path / "build" / "rtl")
    first = gpucosim("run", "examples/hello.py", "--sim", "icarus", env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    assert first.stderr.splitlines()[0] == ("gpucosim: building icarus gpu-dw64, once for this configuration "
                                            "(under a minute)")
    again = gpucosim("run", "examples/hello.py", "--sim", "icarus", env=env, timeout=600)
    assert again.returncode == 0 and "building" not in again.stderr, again.stderr


def test_exit_report_shows_va_fragmentation_and_pools(tmp_path):
    """The exit report gives each device's VA use and fragmentation (now and at worst) and
    its pools' counters (BO cache hits and misses, slab entries, waste now and at most); a
    queue's own page and IBs are not the app's leaks."""
    app = tmp_path / "frag.py"
    app.write_text("import umd\n"
                   "def main():\n"
                   "    plain = umd.open(pools=False)\n"
                   "    bufs = [plain.alloc(8192) for _ in range(8)]\n"
                   "    for b in bufs[1::2]:\n"
                   "        b.free()  # 4 holes between the 4 left\n"
                   "    m = plain.memory().va\n"
                   "    i = plain.info()\n"
                   "    print('memory', i.va_start, i.va_end, m.allocations, m.free_ranges, m.largest_free, "
                   "m.peak_free_ranges)\n"
                   "    for b in bufs[::2]:\n"
                   "        b.free()\n"
                   "    gpu = umd.open()\n"
                   "    q = gpu.queue()\n"
                   "    small = [gpu.alloc(100) for _ in range(40)]  # 128-byte slab entries\n"
                   "    for b in small[:30]:\n"
                   "        b.free()\n"
                   "    gpu.alloc(64 << 10).free()\n"
                   "    gpu.alloc(60 << 10).free()  # the cached 64 KiB BO\n"
                   "    q.write(small[35], 0, [1])\n"
                   "    q.finish()\n"
                   "    for b in small[30:]:\n"
                   "        b.free()\n"
                   "    return 0  # (the queue and the pools' BOs left to the exit)\n")
    r = gpucosim("run", str(app), "--sim", "model", "--stats")
    assert r.returncode == 0, r.stderr
    va_start, va_end, *got = map(int, r.stdout.split("memory ")[1].split())
    # 8 buffers of 8 KiB + a guard page each from va_start, every other one freed: 4 holes,
    # the last merged with the rest of the range (less one guard page)
    assert got == [4, 4, va_end - va_start - 7 * 0x3000 - 0x1000, 4], got
    err = r.stderr
    assert f"  VA (model, fd 3): 0 bytes in 0 ranges, 1 free range, the largest {(va_end - va_start) // 1024 - 4} " \
           "KiB; at most 96 KiB used, 4 free ranges\n  pools: off (8 BOs created, 8 released)\n" in err
    assert "  pools: BO cache 1 hit, 3 misses, 0 expired, 1 cached (64 KiB); slabs 42 entries handed out, " \
           "2 slabs (192 KiB), 0 frees deferred to their fence, 0 bytes wasted by rounding up (at most 6 KiB)" in err
    assert "of the app" not in err  # the queue's page and IB were left to it, not leaked by the app


def test_ctrl_c_is_one_line_not_a_traceback(tmp_path):
    """SIGINT while an app runs (Ctrl-C): `gpucosim: interrupted`, exit status 130, no traceback."""
    import signal
    import time

    app = tmp_path / "forever.py"
    app.write_text("import time\n\ndef main():\n    print('running', flush=True)\n    while True:\n"
                   "        time.sleep(0.05)\n")
    # (SIGINT as a terminal leaves it: an xdist worker ignores it, and a child inherits that,
    # where Python then never raises KeyboardInterrupt)
    p = subprocess.Popen([sys.executable, "-m", "gpucosim", "run", str(app), "--sim", "model"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert p.stdout.readline().strip() == "running"
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert p.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1] == "gpucosim: interrupted" and "Traceback" not in err, err


@pytest.mark.parametrize("sim", ["model", pytest.param("verilator", marks=pytest.mark.xdist_group("demo_rtl"))])
def test_an_app_that_stops_itself_says_so_on_every_backend(tmp_path, sim):
    """An app that raises KeyboardInterrupt itself (its own handler, a ^C it caught and
    raised again): `gpucosim: interrupted` and 130 on the model, where it reached the
    launcher's process; on a simulator it ended the simulator's run alone, and the launcher
    returned 130 without a word (it says the stop a ^C through it would have said)."""
    app = tmp_path / "stops_itself.py"
    app.write_text("def main():\n    raise KeyboardInterrupt\n")
    r = gpucosim("run", str(app), "--sim", sim, timeout=600)
    assert r.returncode == 130, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1:] == ["gpucosim: interrupted"], r.stderr
    assert r.stderr.count("gpucosim: interrupted") == 1 and "Traceback" not in r.stderr, r.stderr


def test_an_apps_option_that_begins_like_one_of_gpucosims_is_the_apps(tmp_path):
    """argparse took abbreviations: an app's --time 5 was gpucosim's --timeout 5 (the app ran
    with its default, and was stopped after 5 s), its --data 7 a usage error about
    --data-width. gpucosim's options are taken whole only."""
    app = tmp_path / "opts.py"
    app.write_text("import argparse\n\ndef main():\n    ap = argparse.ArgumentParser()\n"
                   "    ap.add_argument('--time', type=float, default=0)\n    ap.add_argument('--data', default='x')\n"
                   "    a = ap.parse_args()\n    print('app got', a.time, a.data)\n")
    r = gpucosim("run", str(app), "--sim", "model", "--time", "5", "--data", "7")
    assert r.returncode == 0 and r.stdout == "app got 5.0 7\n", r.stdout + r.stderr
