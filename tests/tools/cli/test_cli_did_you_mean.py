"""A mistyped name on `gpucosim run`'s command line (an option, the app's file or module)
is a usage error that names what was meant, as `gpucosim regs CP_EROR` does: a new user's
`--trce`, `examples/helo.py` or `hello.py` from the top folder said only what was wrong."""

from __future__ import annotations

import os

from .cli_helpers import ROOT, usage_error


def test_a_mistyped_option_names_the_option_meant(capsys):
    # given to an app that reads no arguments
    for typed, meant in (("--trce", "--trace"), ("-trace", "--trace"), ("--stat", "--stats"),
                         ("--trce=x.json", "--trace")):
        assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", typed) == (
            f"gpucosim run: error: neither gpucosim nor the app knows {typed}: did you mean {meant}? "
            "(examples/hello.py reads no arguments; gpucosim run --help lists the options)")
        assert capsys.readouterr().out == ""  # (the app did not run)
    # nothing close: no guess
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--bogus") == (
        "gpucosim run: error: neither gpucosim nor the app knows --bogus (examples/hello.py reads no arguments; "
        "gpucosim run --help lists the options)")
    # before APP: the word after it was taken as APP, and the app itself was named as an
    # unrecognized argument ("unrecognized arguments before APP: --trce examples/hello.py")
    assert usage_error(capsys, "run", "--trce", "x.json", "examples/hello.py", "--sim", "model") == (
        "gpucosim run: error: unrecognized arguments before APP: --trce (did you mean --trace?)")
    assert usage_error(capsys, "sim", "--sim", "model", "--simm", "x") == (
        "gpucosim sim: error: unrecognized arguments: --simm (did you mean --sim?)")  # (x: its value)


def test_a_mistyped_app_names_the_app_meant(capsys, tmp_path):
    assert usage_error(capsys, "run", "examples/helo.py", "--sim", "model") == (
        "gpucosim run: error: no app at examples/helo.py: did you mean examples/hello.py?")
    assert usage_error(capsys, "run", "examples/memcopy.py", "--sim", "model") == (
        "gpucosim run: error: no app at examples/memcopy.py: did you mean examples/memcpy.py?")
    # from the top folder, an example named without its folder
    assert usage_error(capsys, "run", "hello.py", "--sim", "model") == (
        "gpucosim run: error: no app at hello.py: did you mean examples/hello.py?")
    assert usage_error(capsys, "run", "examples.helo", "--sim", "model") == (
        "gpucosim run: error: no module named 'examples.helo': did you mean examples.hello? (APP is APP.py, a "
        "module or module:function)")
    assert usage_error(capsys, "run", "hello", "--sim", "model") == (
        "gpucosim run: error: no module named 'hello': did you mean examples.hello? (APP is APP.py, a module or "
        "module:function)")
    # nothing close: no guess
    assert usage_error(capsys, "run", "nosuch.py", "--sim", "model") == "gpucosim run: error: no app at nosuch.py"
    assert usage_error(capsys, "run", "nosuch", "--sim", "model") == (
        "gpucosim run: error: no module named 'nosuch' (APP is APP.py, a module or module:function)")
    # elsewhere, beside the app meant, with its folder as typed
    (tmp_path / "first.py").write_text("import umd\n")
    assert usage_error(capsys, "run", str(tmp_path / "frist.py"), "--sim", "model") == (
        f"gpucosim run: error: no app at {tmp_path / 'frist.py'}: did you mean {tmp_path / 'first.py'}?")
    cwd = os.getcwd()
    os.chdir(tmp_path)  # (no examples/ here: no guess for a name that is nowhere close)
    try:
        assert usage_error(capsys, "run", "hello.py", "--sim", "model") == "gpucosim run: error: no app at hello.py"
    finally:
        os.chdir(cwd)
    assert (ROOT / "examples" / "hello.py").is_file()


def test_an_example_named_from_another_folder_names_the_repositorys(capsys, tmp_path):
    """The README's `gpucosim run examples/hello.py`, typed in another folder, said only "no
    app at examples/hello.py", and `gpucosim run hello` there no module meant, though the
    module examples.hello runs from any folder."""
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model") == (
            f"gpucosim run: error: no app at examples/hello.py in {tmp_path}: did you mean "
            f"{ROOT / 'examples' / 'hello.py'} (the repository's; the module examples.hello runs from any folder)?")
        assert usage_error(capsys, "run", "hello", "--sim", "model") == (
            "gpucosim run: error: no module named 'hello': did you mean examples.hello? (APP is APP.py, a module or "
            "module:function)")
        # a path of its own that is nowhere: no guess
        assert usage_error(capsys, "run", "mine/app.py", "--sim", "model") == (
            "gpucosim run: error: no app at mine/app.py")
    finally:
        os.chdir(cwd)


def test_a_mistyped_kmd_parameter_or_log_module_names_the_one_meant(capsys):
    """`--kmd job_timout=5` listed the 24 parameters and left the reader to find the one meant;
    `--log iotcl=info` listed the modules alike."""
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--kmd", "job_timout=5").startswith(
        "gpucosim run: error: --kmd: unknown KMD parameter 'job_timout': did you mean job_timeout? (known: "
        "ban_after_hangs, ")
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--log", "iotcl=info") == (
        "gpucosim run: error: --log: unknown module 'iotcl': did you mean ioctl? (modules: umd, ioctl, kmd, cs, "
        "ring, fence, ih, sched, bo, vm, bus, cp, sdma, or all)")
    # nothing close: the lists alone, as before
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--kmd", "speed=3").startswith(
        "gpucosim run: error: --kmd: unknown KMD parameter 'speed' (known: ")


def test_an_app_given_without_run_says_run(capsys):
    """`gpucosim examples/hello.py --sim model` (the README's line without `run`) was argparse's
    "argument SUBCOMMAND: invalid choice: 'examples/hello.py' (choose from 'run', 'sim', ...)";
    it names the command meant, whole, and a mistyped subcommand the one meant."""
    assert usage_error(capsys, "examples/hello.py", "--sim", "model") == (
        "gpucosim: error: 'examples/hello.py' is not a SUBCOMMAND: to run an app, gpucosim run examples/hello.py "
        "--sim model")
    assert usage_error(capsys, "my app.py") == (  # (quoted as a shell needs it)
        "gpucosim: error: 'my app.py' is not a SUBCOMMAND: to run an app, gpucosim run 'my app.py'")
    assert usage_error(capsys, "rnu", "examples/hello.py") == (
        "gpucosim: error: 'rnu' is not a SUBCOMMAND: did you mean run? choose run, sim, bench, disasm, regs, plot "
        "(gpucosim --help)")
    assert usage_error(capsys, "dissasm", "x.txt") == (
        "gpucosim: error: 'dissasm' is not a SUBCOMMAND: did you mean disasm? choose run, sim, bench, disasm, regs, "
        "plot (gpucosim --help)")
    assert capsys.readouterr().out == ""


def test_a_log_pair_after_a_space_names_log(capsys):
    """`--log ioctl=info ring=debug` (a space where the comma goes) gave ring=debug to the app,
    and the usage error said only that nobody knew it: it names --log."""
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "--log", "ioctl=info", "ring=debug") == (
        "gpucosim run: error: neither gpucosim nor the app knows ring=debug: did you mean --log ring=debug? (--log "
        "takes a comma list: ioctl=info,ring=debug) (examples/hello.py reads no arguments; gpucosim run --help lists "
        "the options)")
    # an app's own key=value is no log module's: no guess
    assert usage_error(capsys, "run", "examples/hello.py", "--sim", "model", "size=4") == (
        "gpucosim run: error: neither gpucosim nor the app knows size=4 (examples/hello.py reads no arguments; "
        "gpucosim run --help lists the options)")


def test_a_mistyped_option_an_app_refused_names_the_option_meant():
    """`gpucosim run examples/memcpy.py --trce x.json`: gpucosim does not know --trce, so the
    app got it, and refused it in its own words (its options alone, none of gpucosim's):
    gpucosim adds the option meant. An app's refusal of its own option's value gets no such
    line."""
    from .cli_helpers import gpucosim

    r = gpucosim("run", "examples/memcpy.py", "--sim", "model", "--trce", "x.json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "memcpy: error: unrecognized arguments: --trce x.json (usage: memcpy [-h] [--seed SEED])",
        "gpucosim run: the app got what gpucosim does not know (--trce x.json): did you mean --trace?"], r.stderr
    r = gpucosim("run", "examples/producer_consumer.py", "--sim", "model", "--items", "3", "ring=debug")
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == (
        "gpucosim run: the app got what gpucosim does not know (--items 3 ring=debug): did you mean --log "
        "ring=debug? (--log takes a comma list: ioctl=info,ring=debug)"), r.stderr
    r = gpucosim("run", "examples/memcpy.py", "--sim", "model", "--seed", "-1")
    assert r.returncode == 2 and r.stderr.splitlines() == [
        "memcpy: error: argument --seed: must be at least 0, not -1"], r.stderr


def test_a_mistyped_function_names_the_function_meant():
    """`module:function` with the function mistyped named only what was missing; the module's
    own function spelt close to it (any case) is named, a name close to none is not."""
    from .cli_helpers import gpucosim

    for target, said in (("examples.hello:mian", "it has no callable mian(): did you mean main()?"),
                         ("examples.hello:Main", "it has no callable Main(): did you mean main()?"),
                         ("examples.hello:zzz", "it has no callable zzz()")):
        r = gpucosim("run", target, "--sim", "model")
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.splitlines() == [f"gpucosim: cannot load app '{target}': {said}"], r.stderr


def test_a_backend_given_as_an_option_or_a_word_names_sim(capsys):
    """`gpucosim sim --model` (or `sim model`, `run --model APP`): the backend is --sim's
    value; the error named the word alone, or said sim takes no APP."""
    assert usage_error(capsys, "sim", "--model") == (
        "gpucosim sim: error: unrecognized arguments: --model (did you mean --sim model?)")
    assert usage_error(capsys, "sim", "--verilator") == (
        "gpucosim sim: error: unrecognized arguments: --verilator (did you mean --sim verilator?)")
    assert usage_error(capsys, "sim", "model") == (
        "gpucosim sim: error: too many arguments (model): did you mean --sim model? sim runs the demo and takes "
        "no APP (gpucosim run APP runs another)")
    assert usage_error(capsys, "run", "--model", "examples/hello.py") == (
        "gpucosim run: error: unrecognized arguments before APP: --model (did you mean --sim model?)")
    assert usage_error(capsys, "run", "examples/hello.py", "--model") == (
        "gpucosim run: error: neither gpucosim nor the app knows --model: did you mean --sim model? "
        "(examples/hello.py reads no arguments; gpucosim run --help lists the options)")
    assert capsys.readouterr().out == ""  # (nothing ran)


def test_gpucosims_own_options_mistyped_name_the_one_meant(capsys):
    """`gpucosim --versoin` said only that options follow a SUBCOMMAND: --version and --help
    are gpucosim's own, before any; spelt close to one (or begun), it is named."""
    for typed, meant in (("--versoin", "--version"), ("--vers", "--version"), ("--hlep", "--help")):
        assert usage_error(capsys, typed) == (
            f"gpucosim: error: unrecognized argument {typed}: did you mean {meant}? (other options follow a "
            "SUBCOMMAND: gpucosim SUBCOMMAND --help)")
    assert usage_error(capsys, "--trace", "x") == (  # (a subcommand's option, before it)
        "gpucosim: error: unrecognized argument --trace: options follow a SUBCOMMAND (gpucosim SUBCOMMAND --help)")
