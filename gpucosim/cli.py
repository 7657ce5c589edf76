"""`gpucosim`: run apps on the simulated GPU, and read what they leave behind.

    gpucosim run APP.py [--sim verilator|icarus|model] [--trace FILE] [--waves] [--log SPEC]
    gpucosim sim                       the demo on Verilator (make sim)
    gpucosim bench [--help]            the benchmarks (make bench)
    gpucosim disasm FILE [--sdma]      a dword dump, crash report or trace -> PM4 (or SDMA) listing
    gpucosim regs [REG [VALUE]]        the register map; one register; a value decoded
    gpucosim plot TRACE -o PNG         a timeline drawn as a picture

Numbers (addresses, sizes, counts, cycles, register values) are decimal or 0x hex on every
option (testbench.argtypes.parse_int). Every subcommand has --help. Exit codes: the app's
own for `run`/`sim`, 124 when `--timeout` stopped it, 130 on Ctrl-C, 143 on SIGTERM (129 on
SIGHUP), 2 for a usage error (the message says what was wrong), 1 for a failure.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import os
import shlex
import signal
import sys
import threading
from pathlib import Path

from testbench.argtypes import OneLineParser, integer_in, option_meant, parse_int
from testbench.pipes import pipe_safe
from testbench.simnames import unknown_simulator

from . import __version__
from .checks import BACKENDS, option_hint, output_arg, path_arg, run_options, writable_file
from .trace.plot import MAX_CYCLE

DEMO = "examples.demo"

RUN_EPILOG = """\
examples:
  gpucosim run examples/memcpy.py --sim model
  gpucosim run examples/demo.py --trace build/demo.json      # open it at https://ui.perfetto.dev
  gpucosim run examples/demo.py --waves --log ioctl=info,ring=debug
  gpucosim run examples/batching.py --sim model -- --plot build/batching.png
  gpucosim run examples/demo.py --timeout 60 --trace build/demo.json   # stopped after 60 s: status 124

The exit status is what main() (or module:function) returns, as sys.exit(value) and a
console script take it: None is 0, an int that status (0 to 255; others are 1, said so),
anything else is printed to stderr and is 1 (`gpucosim run os:getcwd` prints the directory
and exits 1: the function is an app's main, its result no output).

Ctrl-C, --timeout, SIGTERM and SIGHUP stop the app and still write --trace and --stats-json,
and print --stats's exit report of what ran (status 130, 124, 143 and 129). The app's
traceback and gpucosim's errors go to stderr on every backend.

--log takes module=level pairs (the GPUCOSIM_LOG syntax; repeated, they add up), modules:
umd, ioctl, kmd, cs, ring, fence, ih, sched, bo, vm (mappings, VMIDs, TLB flushes), bus
(every MMIO access), cp (packets the CP starts), sdma (the copy engine's, on the model);
levels: debug, info, warning, error; all=LEVEL, or a bare level, applies to every module
(--log all=info,ring=debug).

On the RTL, $GPUCOSIM_HWTRACE picks the hardware monitors that feed --trace: a comma list
of cp, sdma, bus, irq (default all).
"""


class _Help(argparse.RawDescriptionHelpFormatter):
    """A description of one paragraph wrapped to the terminal, as argparse's default
    formatter does; an epilog of lines (examples, tables) kept as written.
    RawDescriptionHelpFormatter kept both as written: `gpucosim run --help` began with one
    line of 600 characters, which a terminal broke mid-word."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return super()._fill_text(text, width, indent)
        return argparse.HelpFormatter._fill_text(self, text, width, indent)


class Parser(OneLineParser):
    """argparse, with `gpucosim <sub>: error: ...` (one line) and exit code 2 for usage errors,
    and no abbreviations: `run` passes what it does not know to the app, and an app's own
    --time or --data was taken as gpucosim's --timeout or --data-width (the app ran with its
    default, and gpucosim stopped it after that many seconds)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _default_backend() -> str | None:
    """None: --sim was not given; `run_options` takes $SIM, else verilator."""
    return None


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(unknown_simulator(text, BACKENDS))
    return text


# plot's window, in cycles: an integer as every numeric option takes (it was a float: nan and
# inf were matplotlib's "Axis limits cannot be NaN or Inf" as a traceback, 1e308 numpy's
# overflow warning), within what a picture can show
_cycle = integer_in(0, MAX_CYCLE)


_u32 = integer_in(0, 0xFFFF_FFFF, bits=32)


def _reg_value(text: str) -> int:
    """regs' VALUE; a register's name there says the order (`gpucosim regs 0x7b0101 CP_ERROR`
    said only "must be an integer, not 'CP_ERROR'")."""
    from . import regmap

    try:
        return _u32(text)
    except argparse.ArgumentTypeError as e:
        try:
            regmap.lookup(text)
        except regmap.RegisterLookupError:
            raise e from None
        raise argparse.ArgumentTypeError(f"{text!r} is a register, not a value: REGISTER comes first "
                                         f"(gpucosim regs {text} VALUE)") from None


MAX_TIMEOUT = 1_000_000  # seconds (11.6 days); the interval timer overflowed at 1e10 (a traceback)


def _timeout(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        try:  # (numbers are "decimal or 0x hex everywhere": whole seconds in hex too)
            v = float(parse_int(text))
        except ValueError:
            v = math.nan
    if not (math.isfinite(v) and 0 < v <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout: give a number of seconds above 0, "
                                         f"at most {MAX_TIMEOUT}")
    return v


def _data_width(text: str) -> int:
    try:
        v = parse_int(text)
    except ValueError:
        v = None
    if v not in (32, 64, 128, 256):
        raise argparse.ArgumentTypeError(f"{text!r} is not a bus width: choose 32, 64, 128 or 256")
    return v


def _add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sim", type=_backend, default=_default_backend(), metavar="{verilator,icarus,model}",
                   help="backend: the RTL on Verilator or Icarus, or the reference model "
                        "(default: $SIM or verilator)")
    p.add_argument("--trace", type=output_arg, metavar="FILE",
                   help="write a timeline (Chrome trace JSON, for ui.perfetto.dev); an existing FILE only "
                        "if it is an earlier run's timeline or figures")
    p.add_argument("--waves", action="store_true",
                   help="write a waveform (FST) of the RTL run (a separate, cached build)")
    p.add_argument("--waves-file", type=output_arg, metavar="FILE",
                   help="where --waves writes, a .fst file (default build/waves/APP-SIM.fst in the repository, from any folder)")
    # (repeatable, the pairs of each joined: a second --log replaced the first, silently)
    p.add_argument("--log", action="append", metavar="SPEC", help="per-module log levels, e.g. ioctl=info,ring=debug "
                                                                    "(repeatable; default: $GPUCOSIM_LOG)")
    p.add_argument("--stats", action="store_true",
                   help="print the exit report: buffers left allocated, IB pools, fences, ioctls")
    p.add_argument("--stats-json", type=output_arg, metavar="FILE",
                   help="write the run's figures as JSON: cycles, ioctls, seconds in the app and in the device "
                        "(over an existing FILE only if it is an earlier run's figures or timeline)")
    p.add_argument("--timeout", type=_timeout, metavar="SECONDS",
                   help="stop the app after SECONDS of wall-clock time (from its start, the build not counted), "
                        "writing --trace and --stats-json as a Ctrl-C does; exit status 124")
    p.add_argument("--crash-dir", type=path_arg, metavar="DIR", help="where crash reports go (default build/crash in the repository, from any folder; made by the first report)")
    p.add_argument("--kmd", action="append", default=[], metavar="KEY=VALUE",
                   help="a KMD parameter for this run (repeatable), e.g. --kmd job_timeout=20000")
    p.add_argument("--no-dma", action="store_true",
                   help="a reference model without the DMA engine (--sim model; the RTL always has one)")
    p.add_argument("--rtl-engines", action="store_true",
                   help="a reference model with only the engines the RTL has (--sim model): today every "
                        "engine the model has (the SDMA copy engine, both CP queues), so the default")
    p.add_argument("--data-width", type=_data_width, default=64, metavar="{32,64,128,256}",
                   help="memory bus width in bits (default 64)")


def build_parser() -> Parser:
    ap = Parser(prog="gpucosim", description="Run apps on the simulated GPU and read what they leave behind.",
                formatter_class=_Help,
                epilog="Run `gpucosim SUBCOMMAND --help` for the options of each.\nNumbers (addresses, sizes, "
                       "cycles, register values) are decimal or 0x hex everywhere.")
    ap.add_argument("--version", action="version", version=f"gpucosim {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=Parser)
    sub.required = True

    run = sub.add_parser("run", help="run an app (a Python program using the UMD) on a backend",
                         description="Run an app: APP.py with a main(), a module (examples.demo) or "
                                     "module:function; a script without a main() (umd.open() on its top level) runs "
                                     "whole as __main__, as `python APP.py` runs it, once the device is up. Arguments gpucosim does not know are the app's "
                                     "sys.argv[1:] (`APP --items 8`; given to an app that reads none of them they are a usage error, "
                                     "exit status 2: before the run when the app's source names no sys.argv, no "
                                     "argument parser and imports nothing that could read them, else after it); after `--` every argument is the app's, for one whose name gpucosim uses too (`-- --trace x`).",
                         formatter_class=_Help, epilog=RUN_EPILOG)
    run.add_argument("app", metavar="APP", help="APP.py, a module, or module:function")
    _add_run_options(run)

    s = sub.add_parser("sim", help="the demo on Verilator, as `make sim` runs it",
                       description="Run the demo (examples/demo.py): UMD -> KMD -> ring -> doorbell -> "
                                   "CP -> fence -> interrupt. Same options as `run`.")
    _add_run_options(s)

    # (every argument, --help too, is the benchmarks' own: cmd_bench)
    sub.add_parser("bench", help="the benchmarks, as `make bench` runs them", add_help=False)

    d = sub.add_parser("disasm", options_in_errors=True, help="list PM4 (or SDMA) packets from a dword dump, crash report or trace",
                       description="Disassemble PM4 dwords: a text dump (hex words, optional `ADDR:` "
                                   "prefixes, # comments), a binary file of little-endian dwords, a crash "
                                   "report's dumps, or the ring and IB dumps in a `run --trace` file.",
                       formatter_class=_Help,
                       epilog="examples:\n"
                              "  gpucosim disasm build/crash/crash-gpu_error-*.txt   # the reports gpu_error.py left\n"
                              "  gpucosim disasm build/demo.json --only ring\n"
                              "  gpucosim disasm -x c0033700 500 2000000 0 12345678\n"
                              "  gpucosim disasm ib.bin --base 0x2000000\n"
                              "  gpucosim disasm --sdma -x 00000001 fff 0 100000 0 200000 0")
    d.add_argument("files", nargs="*", type=path_arg, metavar="FILE",
                   help="the dump (- for stdin); several are listed one after another, each under "
                        "a `==> FILE <==` line (a glob: `build/crash/crash-gpu_error-*.txt`)")
    d.add_argument("-x", "--dwords", nargs="+", action="extend", metavar="HEX",  # (a second -x dropped the first's)
                   help="dwords on the command line instead of FILE (repeatable)")
    d.add_argument("--base", type=integer_in(0, (1 << 64) - 4, multiple=4, bits=64), default=0, metavar="ADDR",
                   help="byte address of the first dword (default 0)")
    d.add_argument("--only", metavar="TEXT", help="only the dumps whose name contains TEXT (not empty)")
    d.add_argument("--sdma", action="store_true",
                   help="the dwords are SDMA packets (the copy engine's); dumps named like *sdma* are anyway")
    d.add_argument("-v", "--verbose", action="store_true", help="show every field, zeros included")
    d.add_argument("--max-data", type=integer_in(1, 1 << 16), default=8, metavar="N",
                   help="data dwords shown per packet (default 8)")

    r = sub.add_parser("regs", options_in_errors=True, help="print the register map, one register, or decode a value",
                       description="Without arguments: every register (offset, reset value, fields). "
                                   "With REGISTER (a name like CP_ERROR or PERF_PACKETS[2], or an offset "
                                   "like 0x14): its fields. With a VALUE too: that value decoded (an array named "
                                   "alone, PERF_PACKETS: as any of its elements, all of them named).",
                       formatter_class=_Help,
                       epilog="examples:\n  gpucosim regs\n  gpucosim regs status\n  gpucosim regs CP_ERROR 0x7b0101")
    r.add_argument("register", nargs="?", metavar="REGISTER")
    r.add_argument("value", nargs="?", type=_reg_value, metavar="VALUE")

    pl = sub.add_parser("plot", options_in_errors=True, help="draw a timeline (a `run --trace` file) as a PNG",
                        description="Draw a `gpucosim run --trace` timeline as a picture: one row per "
                                    "track, slices as bars. Needs matplotlib.")
    pl.add_argument("trace", type=path_arg, metavar="TRACE", help="the trace JSON")
    pl.add_argument("-o", "--output", type=path_arg, required=True, metavar="PNG", help="the picture to write")
    pl.add_argument("--from", dest="start", type=_cycle, metavar="CYCLE", help="first cycle shown")
    pl.add_argument("--to", dest="end", type=_cycle, metavar="CYCLE", help="last cycle shown")
    pl.add_argument("--title", help="the picture's title")
    return ap


# ------------------------------------------------------------------------------ subcommands

def cmd_run(p, args, app_args: list[str]) -> int:
    from .run.launch import LaunchError, run_app

    opts = run_options(p, args, getattr(args, "app", DEMO), app_args)
    try:
        return run_app(opts)
    except LaunchError as e:
        p.error(str(e))
    return 2  # pragma: no cover


def cmd_bench(p, args) -> int:
    import importlib.util

    try:
        found = importlib.util.find_spec("testbench.bench") is not None
    except ImportError:
        found = False
    if not found:
        print("gpucosim bench: error: the benchmarks (testbench/bench/) are not there yet", file=sys.stderr)
        return 2
    from testbench.bench import main as bench_main

    # (in this process, under this name: its usage errors and --help say `gpucosim bench`,
    # not the `python -m testbench.bench` it was started as)
    return bench_main(args.bench_args, prog=p.prog)


def cmd_disasm(p, args) -> int:
    from spec import pm4, sdma

    from .dump import SAID_DWORDS, DumpError, n_dwords, parse, parse_text
    from .inputs import InputError

    base = args.base
    if args.dwords and args.files:
        p.error("give FILE or --dwords, not both")
    if not args.dwords and not args.files:
        p.error("nothing to disassemble: give FILE, - for stdin, or --dwords HEX...")
    if args.files.count("-") > 1:
        p.error("- (stdin) can be read once")
    if args.only == "":  # (every name contains "": an unset shell variable, --only "$NAME", listed them all)
        p.error("--only: '' matches every dump: give part of a dump's name (gpucosim disasm FILE lists them)")
    sources: list[tuple[str, list]] = []  # (FILE, its dumps), every one read before any is listed
    names: list[str] = []  # (every dump's name, for an --only that matches none)
    for name in args.files or ["--dwords"]:
        try:
            if args.dwords:
                dumps = parse_text(" ".join(args.dwords), "--dwords", base)
            else:
                dumps = parse(_read_input(p, name), "stdin" if name == "-" else name, base)
        except (DumpError, InputError) as e:
            p.error(str(e))
        names += [d.name for d in dumps if d.name not in names and d.name not in ("dump", "--dwords", "stdin", name)]
        if args.only:
            dumps = [d for d in dumps if args.only in d.name]
        sources.append((name, dumps))
    if args.only and not any(dumps for _, dumps in sources):
        have = f"the dumps: {', '.join(names)}" if names else "the input has no named dumps, as a crash report has"
        p.error(f"no dump named like {args.only!r} ({have})")
    for k, (name, dumps) in enumerate(sources):
        if len(sources) > 1:  # (as head(1) heads several files)
            print(f"{chr(10) if k else ''}==> {name} <==")
        for i, d in enumerate(dumps):
            if len(dumps) > 1 or d.name not in ("dump", "--dwords", "stdin", name):
                if i:
                    print()
                n = n_dwords(len(d.dwords))
                print(d.name if SAID_DWORDS.search(d.name) else f"{d.name} ({n})" if "0x" in d.name
                      else f"{d.name} ({n} at {d.base:#x})")
            # the copy engine's ring and IBs hold SDMA packets, not PM4 (spec/sdma/codec.py)
            codec = sdma if args.sdma or "sdma" in d.name.lower() else pm4
            print(codec.listing(d.dwords, d.base, verbose=args.verbose, max_data=args.max_data))
            if hint := _other_codec(d.dwords, codec is sdma, d.name):
                print(f"gpucosim disasm: {hint}", file=sys.stderr)
    return 0


def _other_codec(dwords, as_sdma: bool, name: str) -> str | None:
    """A note when `dwords` read as one engine's packets decode as none, and as the other's they
    are packets from the first to the last (SDMA dwords listed as PM4: every line "BAD TYPE 0";
    PM4 given --sdma): which option lists them."""
    from spec import pm4, sdma

    mine, other = (sdma, pm4) if as_sdma else (pm4, sdma)
    if not dwords or any(item.ok for item in mine.decode_stream(dwords)):
        return None
    theirs = list(other.decode_stream(dwords))
    if not all(item.ok for item in theirs) or all(item.name in ("NOP", "TYPE2_FILLER") for item in theirs):
        return None  # (zeros are SDMA NOPs: memory never written, not SDMA packets)
    first = f"{theirs[0].name}{', ...' if len(theirs) > 1 else ''}"
    where = "" if name in ("dump", "--dwords", "stdin") else f" ({name})"
    if as_sdma:
        return f"no SDMA packet decodes{where}, and as PM4 they are {first}: leave out --sdma"
    return f"no PM4 packet decodes{where}, and as SDMA they are {first}: give --sdma"


def _read_input(p: argparse.ArgumentParser, name: str) -> bytes:
    """The bytes of an input FILE; a usage error naming what is wrong. A pattern the shell
    passed on because nothing matched it (`build/crash/*.txt` before any crash) says so."""
    from .inputs import read_bytes

    try:
        return read_bytes(name)
    except FileNotFoundError:
        if any(c in name for c in "*?["):
            p.error(f"cannot read {name}: no file matches that pattern (the shell passes a pattern that "
                    "matches nothing on as it is)")
        if re.fullmatch(r"(0x)?[0-9a-fA-F]{1,8}", name):  # (`gpucosim disasm c0033700 ...`: dwords, not a file)
            p.error(f"cannot read {name}: No such file or directory (dwords on the command line go after -x: "
                    f"gpucosim disasm -x {name} ...)")
        p.error(f"cannot read {name}: No such file or directory")
    except OSError as e:
        p.error(f"cannot read {name}: {e.strerror}")


def cmd_regs(p, args) -> int:
    from . import regmap

    if args.register is None:
        print(regmap.table())
        return 0
    try:
        reg, index = regmap.lookup(args.register)
    except regmap.RegisterLookupError as e:
        p.error(str(e))
    element = index if regmap.names_element(args.register) else None
    if args.value is None:
        print(regmap.describe(reg, element))
        return 0
    print(regmap.decode(reg, args.value, element))
    return 0


def cmd_plot(p, args) -> int:
    from .trace.plot import PlotError, picture_path_problem, plot

    if problem := picture_path_problem(args.output):
        p.error(f"-o {problem}")
    writable_file(p, "-o", Path(args.output))
    if args.start is not None and args.end is not None and args.end <= args.start:
        p.error(f"--to {args.end} is not after --from {args.start}")
    try:
        out = plot(args.trace, args.output, start=args.start, end=args.end, title=args.title)
    except PlotError as e:
        p.error(str(e))
    print(f"gpucosim: wrote {out}")
    return 0


@pipe_safe  # `gpucosim run APP | head`: the reader may go away at any time; what is printed after
# that is lost, never a traceback (in the app, in the simulator log's echo, at exit)
def main(argv: list[str] | None = None) -> int:
    from .run.stops import TERMINATING, Terminated, stop_words, terminate

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for signum in TERMINATING:  # (SIGTERM, SIGHUP: a stop as ^C, not the launcher killed alone)
            if signal.getsignal(signum) is signal.SIG_DFL:
                saved[signum] = signal.signal(signum, terminate)
    try:
        return _main(argv)
    except KeyboardInterrupt as e:  # Ctrl-C: the user's choice, not a crash (a simulator child is
        # killed by the subprocess call it was waited on in)
        print(f"gpucosim: {stop_words(e)}", file=sys.stderr)
        return 128 + e.signum if isinstance(e, Terminated) else 130  # as a shell reports the signal
    finally:
        for signum, handler in saved.items():  # (main() called in a process of its own: a test's)
            signal.signal(signum, handler)


# what each subcommand takes besides its options, said when it is given a word too many
# (`gpucosim regs CP_ERROR 0x7b0101 0x1` said only "unrecognized arguments: 0x1")
TAKES = {
    "regs": "regs takes at most one REGISTER and one VALUE (gpucosim regs CP_ERROR 0x7b0101)",
    "plot": "plot takes one TRACE (gpucosim plot TRACE -o PNG; one picture per trace)",
    "sim": "sim runs the demo and takes no APP (gpucosim run APP runs another)",
}


def _unrecognized(command: str, unknown: list[str]) -> str:
    """The usage error for arguments `command` does not know. An unknown option is named
    alone: the word after it, its value, was taken as a positional (`plot --frm 3 t.json`
    said "unrecognized arguments: --frm t.json": 3 had become TRACE). Else the words too
    many, and what the subcommand takes (TAKES); its usage is added to an unknown option only
    (options_in_errors: the options there are, the one meant)."""
    options = [w for w in unknown if w.startswith("-") and w != "-"]
    if options:
        hint = option_hint(options) if command == "sim" else ""  # (sim's options are run's)
        return f"unrecognized arguments: {' '.join(options)}{f' ({hint})' if hint else ''}"
    if command == "sim" and unknown[0] in BACKENDS:  # (`gpucosim sim model`: the demo on the model)
        return f"too many arguments ({' '.join(unknown)}): did you mean --sim {unknown[0]}? {TAKES['sim']}"
    return f"too many arguments ({' '.join(unknown)}): {TAKES.get(command, f'{command} takes no more')}"


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    app_args: list[str] = []
    if argv and argv[0] in ("run", "sim") and "--" in argv:
        i = argv.index("--")
        argv, app_args = argv[:i], argv[i + 1:]
    ap = build_parser()
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        # (argparse said "the following arguments are required: SUBCOMMAND", not a word of the option;
        # gpucosim's own two, mistyped, are named: --versoin was only "options follow a SUBCOMMAND")
        if meant := option_meant(argv[0], ["--help", "--version"], cutoff=0.75):
            ap.error(f"unrecognized argument {argv[0]}: did you mean {meant}? (other options follow a SUBCOMMAND: "
                     "gpucosim SUBCOMMAND --help)")
        ap.error(f"unrecognized argument {argv[0]}: options follow a SUBCOMMAND (gpucosim SUBCOMMAND --help)")
    subcommands = list(ap._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    if argv and not argv[0].startswith("-") and argv[0] not in subcommands:
        # (argparse's "invalid choice: 'examples/hello.py' (choose from 'run', ...)" to a new user
        # who left out `run`, or mistyped it)
        word = argv[0]
        if word.endswith(".py") or os.path.isfile(word):
            ap.error(f"{word!r} is not a SUBCOMMAND: to run an app, gpucosim run {shlex.join(argv)}")
        close = difflib.get_close_matches(word, subcommands, n=1, cutoff=0.6)
        ap.error(f"{word!r} is not a SUBCOMMAND: {f'did you mean {close[0]}? ' if close else ''}"
                 f"choose {', '.join(subcommands)} (gpucosim --help)")
    if argv[:1] == ["bench"]:
        args = argparse.Namespace(command="bench", bench_args=argv[1:])  # all of it is the bench's
    elif argv[:1] == ["run"]:
        # what gpucosim does not know, after APP, belongs to the app, before what follows `--`;
        # before APP it is a mistake
        args, unknown = ap.parse_known_args(argv)
        if unknown:
            at_app = argv.index(args.app, 1)
            rest = iter(range(1, len(argv)))
            first = next(i for i in rest if argv[i] == unknown[0])
            if first < at_app:
                # (only those before APP: with `--trce x hello.py`, x was taken as APP, and the
                # message named hello.py, the app, as an unrecognized argument too)
                before = [a for a in argv[1:at_app] if a in unknown]
                hint = option_hint(before)
                ap._subparsers._group_actions[0].choices["run"].error(  # type: ignore[union-attr]
                    f"unrecognized arguments before APP: {' '.join(before)}{f' ({hint})' if hint else ''}")
        app_args = unknown + app_args
    else:
        args, unknown = ap.parse_known_args(argv)
        if unknown:  # (named by the subcommand, as its other usage errors are: its --help is the one to read)
            ap._subparsers._group_actions[0].choices[args.command].error(  # type: ignore[union-attr]
                _unrecognized(args.command, unknown))
    sub = ap._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr]
    if args.command in ("run", "sim"):
        return cmd_run(sub, args, app_args)
    return {"bench": cmd_bench, "disasm": cmd_disasm, "regs": cmd_regs, "plot": cmd_plot}[args.command](sub, args)


if __name__ == "__main__":
    sys.exit(main())
