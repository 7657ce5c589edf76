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
import dataclasses
import errno
import math
import os
import re
import signal
import sys
import threading
from pathlib import Path

from testbench.argtypes import OneLineParser, folder_problem, integer_in, parse_int
from testbench.pipes import pipe_safe

from . import __version__
from .trace.plot import MAX_CYCLE

BACKENDS = ("verilator", "icarus", "model")
COCOTB_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "TRACE", "NOTSET")  # (cocotb.logging's)
DEMO = "examples.demo"

RUN_EPILOG = """\
examples:
  gpucosim run examples/memcpy.py --sim model
  gpucosim run examples/demo.py --trace build/demo.json      # open it at https://ui.perfetto.dev
  gpucosim run examples/demo.py --waves --log ioctl=info,ring=debug
  gpucosim run examples/batching.py --sim model -- --plot build/batching.png
  gpucosim run examples/demo.py --timeout 60 --trace build/demo.json   # stopped after 60 s: status 124

Ctrl-C, --timeout, SIGTERM and SIGHUP stop the app and still write --trace and --stats-json,
and print --stats's exit report of what ran (status 130, 124, 143 and 129). The app's
traceback and gpucosim's errors go to stderr on every backend.

--log takes module=level pairs (the GPUCOSIM_LOG syntax; repeated, they add up), modules:
umd, ioctl, kmd, cs, ring, fence, ih, sched, bo, vm (mappings, VMIDs, TLB flushes), bus
(every MMIO access), cp (packets the CP starts), sdma (the copy engine's, on the model);
levels: debug, info, warning, error; a bare level applies to all.

On the RTL, $GPUCOSIM_HWTRACE picks the hardware monitors that feed --trace: a comma list
of cp, sdma, bus, irq (default all).
"""


class Parser(OneLineParser):
    """argparse, with `gpucosim <sub>: error: ...` (one line) and exit code 2 for usage errors."""


def _default_backend() -> str | None:
    """None: --sim was not given; `_run_options` takes $SIM, else verilator."""
    return None


def _backend(text: str) -> str:
    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a backend: choose {', '.join(BACKENDS)}")
    return text


# plot's window, in cycles: an integer as every numeric option takes (it was a float: nan and
# inf were matplotlib's "Axis limits cannot be NaN or Inf" as a traceback, 1e308 numpy's
# overflow warning), within what a picture can show
_cycle = integer_in(0, MAX_CYCLE)


MAX_TIMEOUT = 1_000_000  # seconds (11.6 days); the interval timer overflowed at 1e10 (a traceback)


def _timeout(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and 0 < v <= MAX_TIMEOUT):
        raise argparse.ArgumentTypeError(f"{text!r} is not a timeout: give a number of seconds above 0, "
                                         f"at most {MAX_TIMEOUT}")
    return v


def _path(text: str) -> str:
    """A file or folder name: not empty (`--trace "$OUT"` with OUT unset ran with no timeline,
    and `disasm ""` said "cannot read : Is a directory"), and one the system can take."""
    if not text:
        raise argparse.ArgumentTypeError("an empty name (give a path)")
    if problem := _name_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def _output(text: str) -> str:
    """A file to write: a _path, and not "-" (a file named "-" was written, where stdin's
    name suggests stdout; /dev/stdout is stdout)."""
    if text == "-":
        raise argparse.ArgumentTypeError("- is no file here: give a name (/dev/stdout for stdout)")
    return _path(text)


def _name_problem(text: str) -> str | None:
    """Why the system refuses `text` as a path whatever is written there, or None: a name too
    long (pathlib's is_dir() and is_file() raised ENAMETOOLONG as a traceback, where a missing
    file is just False), or symbolic links in a loop."""
    try:
        os.stat(text)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            shown = text if len(text) <= 60 else text[:30] + "..." + text[-20:]
            return f"{shown!r} ({len(text)} characters): {e.strerror}"
        if e.errno == errno.ELOOP:  # (a symlink to itself: Path.resolve's RuntimeError traceback)
            return f"{text}: {e.strerror}"
    return None


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
    p.add_argument("--trace", type=_output, metavar="FILE", help="write a timeline (Chrome trace JSON, for ui.perfetto.dev)")
    p.add_argument("--waves", action="store_true",
                   help="write a waveform (FST) of the RTL run (a separate, cached build)")
    p.add_argument("--waves-file", type=_output, metavar="FILE",
                   help="where --waves writes, a .fst file (default build/waves/APP-SIM.fst)")
    # (repeatable, the pairs of each joined: a second --log replaced the first, silently)
    p.add_argument("--log", action="append", metavar="SPEC", help="per-module log levels, e.g. ioctl=info,ring=debug "
                                                                    "(repeatable; default: $GPUCOSIM_LOG)")
    p.add_argument("--stats", action="store_true",
                   help="print the exit report: buffers left allocated, IB pools, fences, ioctls")
    p.add_argument("--stats-json", type=_output, metavar="FILE",
                   help="write the run's figures as JSON: cycles, ioctls, seconds in the app and in the device")
    p.add_argument("--timeout", type=_timeout, metavar="SECONDS",
                   help="stop the app after SECONDS of wall-clock time (from its start, the build not counted), "
                        "writing --trace and --stats-json as a Ctrl-C does; exit status 124")
    p.add_argument("--crash-dir", type=_path, metavar="DIR", help="where crash reports go (default build/crash)")
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
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="Run `gpucosim SUBCOMMAND --help` for the options of each.\nNumbers (addresses, sizes, "
                       "cycles, register values) are decimal or 0x hex everywhere.")
    ap.add_argument("--version", action="version", version=f"gpucosim {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="SUBCOMMAND", parser_class=Parser)
    sub.required = True

    run = sub.add_parser("run", help="run an app (a Python program using the UMD) on a backend",
                         description="Run an app: APP.py with a main(), a module (examples.demo) or "
                                     "module:function. Arguments gpucosim does not know are the app's "
                                     "sys.argv[1:] (`APP --items 8`; an app that reads none of them fails with "
                                     "exit status 2); after `--` every argument is the app's, for one whose name gpucosim uses too (`-- --trace x`).",
                         formatter_class=argparse.RawDescriptionHelpFormatter, epilog=RUN_EPILOG)
    run.add_argument("app", metavar="APP", help="APP.py, a module, or module:function")
    _add_run_options(run)

    s = sub.add_parser("sim", help="the demo on Verilator, as `make sim` runs it",
                       description="Run the demo (examples/demo.py): UMD -> KMD -> ring -> doorbell -> "
                                   "CP -> fence -> interrupt. Same options as `run`.")
    _add_run_options(s)

    # (every argument, --help too, is the benchmarks' own: cmd_bench)
    sub.add_parser("bench", help="the benchmarks, as `make bench` runs them", add_help=False)

    d = sub.add_parser("disasm", help="list PM4 (or SDMA) packets from a dword dump, crash report or trace",
                       description="Disassemble PM4 dwords: a text dump (hex words, optional `ADDR:` "
                                   "prefixes, # comments), a binary file of little-endian dwords, a crash "
                                   "report's dumps, or the ring and IB dumps in a `run --trace` file.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n"
                              "  gpucosim disasm build/crash/crash-gpu_error-*.txt   # the reports gpu_error.py left\n"
                              "  gpucosim disasm build/demo.json --only ring\n"
                              "  gpucosim disasm -x c0033700 500 2000000 0 12345678\n"
                              "  gpucosim disasm ib.bin --base 0x2000000\n"
                              "  gpucosim disasm --sdma -x 00000001 fff 0 100000 0 200000 0")
    d.add_argument("files", nargs="*", type=_path, metavar="FILE",
                   help="the dump (- for stdin); several are listed one after another, each under "
                        "a `==> FILE <==` line (a glob: `build/crash/crash-gpu_error-*.txt`)")
    d.add_argument("-x", "--dwords", nargs="+", action="extend", metavar="HEX",  # (a second -x dropped the first's)
                   help="dwords on the command line instead of FILE (repeatable)")
    d.add_argument("--base", type=integer_in(0, (1 << 64) - 4, multiple=4, bits=64), default=0, metavar="ADDR",
                   help="byte address of the first dword (default 0)")
    d.add_argument("--only", metavar="TEXT", help="only the dumps whose name contains TEXT")
    d.add_argument("--sdma", action="store_true",
                   help="the dwords are SDMA packets (the copy engine's); dumps named like *sdma* are anyway")
    d.add_argument("-v", "--verbose", action="store_true", help="show every field, zeros included")
    d.add_argument("--max-data", type=integer_in(1, 1 << 16), default=8, metavar="N",
                   help="data dwords shown per packet (default 8)")

    r = sub.add_parser("regs", help="print the register map, one register, or decode a value",
                       description="Without arguments: every register (offset, reset value, fields). "
                                   "With REGISTER (a name like CP_ERROR or PERF_PACKETS[2], or an offset "
                                   "like 0x14): its fields. With a VALUE too: that value decoded.",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="examples:\n  gpucosim regs\n  gpucosim regs status\n  gpucosim regs CP_ERROR 0x7b0101")
    r.add_argument("register", nargs="?", metavar="REGISTER")
    r.add_argument("value", nargs="?", type=integer_in(0, 0xFFFF_FFFF, bits=32), metavar="VALUE")

    pl = sub.add_parser("plot", help="draw a timeline (a `run --trace` file) as a PNG",
                        description="Draw a `gpucosim run --trace` timeline as a picture: one row per "
                                    "track, slices as bars. Needs matplotlib.")
    pl.add_argument("trace", type=_path, metavar="TRACE", help="the trace JSON")
    pl.add_argument("-o", "--output", type=_path, required=True, metavar="PNG", help="the picture to write")
    pl.add_argument("--from", dest="start", type=_cycle, metavar="CYCLE", help="first cycle shown")
    pl.add_argument("--to", dest="end", type=_cycle, metavar="CYCLE", help="last cycle shown")
    pl.add_argument("--title", help="the picture's title")
    return ap


# ------------------------------------------------------------------------------ subcommands

def _kmd_params(p: argparse.ArgumentParser, items: list[str]) -> dict:
    from kmd_model.core.kmd import KmdParams

    known = {f.name: f for f in dataclasses.fields(KmdParams)}
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            p.error(f"--kmd wants KEY=VALUE, not {item!r}")
        if key not in known:
            p.error(f"--kmd: unknown KMD parameter {key!r} (known: {', '.join(sorted(known))})")
        default = known[key].default
        text = text.strip()
        try:
            if isinstance(default, bool):
                if text.lower() not in ("0", "1", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError
                value = text.lower() in ("1", "true", "yes", "on")
            elif isinstance(default, float):
                value = float(text)
            else:
                value = parse_int(text)
        except ValueError:
            kind = {bool: "boolean (1/0, true/false)", float: "number", int: "integer (decimal or 0x hex)"}[type(default)]
            p.error(f"--kmd {key}: {text!r} is not a{'n' if kind[0] == 'i' else ''} {kind}")
        out[key] = value
    try:
        KmdParams(**out)
    except ValueError as e:
        p.error(f"--kmd: {e}")
    return out


def _run_options(p: argparse.ArgumentParser, args, app: str, app_args: list[str]):
    from .run.session import RunOptions, default_build_dir

    if args.log is not None:
        args.log = ",".join(spec for spec in args.log if spec)

    if args.sim is None:
        env = os.environ.get("SIM", "").strip()
        if env and env not in BACKENDS:
            p.error(f"SIM={env} (from the environment) is not a backend: choose {', '.join(BACKENDS)}, "
                    "or give --sim")
        args.sim = env or "verilator"
    if args.sim == "model" and (args.waves or args.waves_file):
        p.error("--waves needs a simulator: use --sim verilator or --sim icarus")
    if args.no_dma and args.sim != "model":
        p.error("--no-dma applies to the reference model (--sim model): the RTL always has its DMA engine")
    if args.rtl_engines and args.sim != "model":
        p.error("--rtl-engines applies to the reference model (--sim model): the RTL has only its own engines")
    if (app.endswith(".py") or os.sep in app) and (problem := _name_problem(app)):
        p.error(f"APP {problem}")
    if app.endswith(".py") and not Path(app).is_file():
        p.error(f"no app at {app}")
    if app.endswith(".py"):
        _python_text(p, app)
    if args.waves_file and Path(args.waves_file).suffix != ".fst":
        # (written as FST whatever its name, and its GTKWave save file goes beside it as NAME.gtkw:
        # --waves-file w.gtkw was the waveform overwritten by its own save file)
        p.error(f"--waves-file {args.waves_file}: the waveform is FST (its save file goes beside it as .gtkw): "
                "give a .fst file")
    if args.stats_json and Path(args.stats_json).is_dir():
        p.error(f"--stats-json wants a file, not the folder {args.stats_json}")
    # everything the run will write is checked now, not after the run
    outputs = [(opt, path) for opt, path in (("--trace", args.trace), ("--stats-json", args.stats_json),
                                             ("--waves-file", args.waves_file)) if path]
    for opt, path in outputs:
        _writable_file(p, opt, Path(path))
    _distinct_outputs(p, app, outputs)
    if args.crash_dir:
        _writable_dir(p, "--crash-dir", Path(args.crash_dir))
    if args.sim != "model" or args.trace or args.waves or args.waves_file:
        _writable_dir(p, "GPUCOSIM_BUILD" if os.environ.get("GPUCOSIM_BUILD") else "the build folder",
                      default_build_dir())
    waves = None
    if args.waves or args.waves_file:
        stem = Path(app.split(":")[0]).stem if app.endswith(".py") else app.split(":")[0].rsplit(".", 1)[-1]
        waves = args.waves_file or str(default_build_dir() / "waves" / f"{stem}-{args.sim}.fst")
    # (the drivers read $GPUCOSIM_LOG as they load, and warn of a bad one "GPUCOSIM_LOG is
    # ignored": loaded with it hidden, so the usage error below refusing it is the one line)
    env_log = os.environ.pop("GPUCOSIM_LOG", None)
    try:
        from kmd_model import log as kmd_log
    finally:
        if env_log is not None:
            os.environ[kmd_log.ENV] = env_log
    if args.log:
        try:
            kmd_log.parse(args.log)
        except ValueError as e:
            p.error(f"--log: {str(e).split(': ', 1)[-1]}")
    elif env_log:
        try:
            kmd_log.parse(env_log)
        except ValueError as e:
            p.error(f"{e} (in the environment)")
        kmd_log.configure(env_log)  # (what loading the drivers with it would have done)
    # the drivers' and the testbench's settings, read deep inside the run (the simulator's
    # build, the app's umd.open): a bad one is a usage error now, not a traceback then
    if args.sim != "model":
        from testbench.sim import clock_mode

        try:
            clock_mode()
        except ValueError as e:
            p.error(f"{e} (in the environment)")
        for var in ("COCOTB_LOG_LEVEL", "GPI_LOG_LEVEL"):  # (cocotb's ValueError in the simulator: "crashed or hung")
            level = os.environ.get(var, "")
            if level and level.upper() not in COCOTB_LEVELS:
                p.error(f"{var}={level!r}: choose {', '.join(COCOTB_LEVELS)} (in the environment)")
        from .trace.hwtrace import HWTRACE_ENV, monitors_wanted

        try:
            monitors_wanted()
        except ValueError as e:
            p.error(f"{HWTRACE_ENV}={os.environ[HWTRACE_ENV]!r}: {e} (in the environment)")
    from .run.stops import stop_grace

    if args.timeout:
        try:
            stop_grace()
        except ValueError as e:
            p.error(f"{e} (in the environment)")
    from umd.submit import ENV as ASYNC_ENV

    if os.environ.get(ASYNC_ENV, "0") not in ("0", "1"):
        p.error(f"{ASYNC_ENV}={os.environ[ASYNC_ENV]!r}: choose 0 or 1 (in the environment)")
    return RunOptions(app=app, backend=args.sim, args=app_args, trace=args.trace, waves=waves, log=args.log,
                      stats=args.stats, stats_json=args.stats_json, crash_dir=args.crash_dir, kmd=_kmd_params(p, args.kmd),
                      dma=not args.no_dma, data_width=args.data_width, queues=True, timeout=args.timeout,
                      prog=p.prog)


def cmd_run(p, args, app_args: list[str]) -> int:
    from .run.launch import LaunchError, run_app

    opts = _run_options(p, args, getattr(args, "app", DEMO), app_args)
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

    from .dump import DumpError, parse, parse_text
    from .inputs import InputError

    base = args.base
    if args.dwords and args.files:
        p.error("give FILE or --dwords, not both")
    if not args.dwords and not args.files:
        p.error("nothing to disassemble: give FILE, - for stdin, or --dwords HEX...")
    if args.files.count("-") > 1:
        p.error("- (stdin) can be read once")
    sources: list[tuple[str, list]] = []  # (FILE, its dumps), every one read before any is listed
    for name in args.files or ["--dwords"]:
        try:
            if args.dwords:
                dumps = parse_text(" ".join(args.dwords), "--dwords", base)
            else:
                dumps = parse(_read_input(p, name), "stdin" if name == "-" else name, base)
        except (DumpError, InputError) as e:
            p.error(str(e))
        if args.only:
            dumps = [d for d in dumps if args.only in d.name]
        sources.append((name, dumps))
    if args.only and not any(dumps for _, dumps in sources):
        p.error(f"no dump named like {args.only!r}")
    for k, (name, dumps) in enumerate(sources):
        if len(sources) > 1:  # (as head(1) heads several files)
            print(f"{chr(10) if k else ''}==> {name} <==")
        for i, d in enumerate(dumps):
            if len(dumps) > 1 or d.name not in ("dump", "--dwords", "stdin", name):
                if i:
                    print()
                print(d.name if "dwords" in d.name else f"{d.name} ({len(d.dwords)} dwords)" if "0x" in d.name
                      else f"{d.name} ({len(d.dwords)} dwords at {d.base:#x})")
            # the copy engine's ring and IBs hold SDMA packets, not PM4 (spec/sdma/codec.py)
            codec = sdma if args.sdma or "sdma" in d.name.lower() else pm4
            print(codec.listing(d.dwords, d.base, verbose=args.verbose, max_data=args.max_data))
    return 0


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
    if args.value is None:
        print(regmap.describe(reg))
        return 0
    print(regmap.decode(reg, args.value, index))
    return 0


def cmd_plot(p, args) -> int:
    from .trace.plot import PlotError, picture_path_problem, plot

    if problem := picture_path_problem(args.output):
        p.error(f"-o {problem}")
    _writable_file(p, "-o", Path(args.output))
    if args.start is not None and args.end is not None and args.end <= args.start:
        p.error(f"--to {args.end} is not after --from {args.start}")
    try:
        out = plot(args.trace, args.output, start=args.start, end=args.end, title=args.title)
    except PlotError as e:
        p.error(str(e))
    print(f"gpucosim: wrote {out}")
    return 0


def _python_text(p: argparse.ArgumentParser, app: str) -> None:
    """APP.py is Python source: text, UTF-8 unless a coding line says otherwise (a binary
    file given by mistake was a SyntaxError whose excerpt printed its bytes)."""
    try:
        data = Path(app).read_bytes()
    except OSError as e:
        p.error(f"cannot read {app}: {e.strerror}")
    if re.search(rb"^[ \t\f]*#.*?coding[:=]", b"\n".join(data.splitlines()[:2]), flags=re.M):
        return  # (PEP 263: Python reads it in its own encoding)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        p.error(f"{app} is not a Python file: byte {e.start} is not UTF-8 text")
    if "\0" in text:
        p.error(f"{app} is not a Python file: it holds NUL bytes")


def _distinct_outputs(p: argparse.ArgumentParser, app: str, outputs: list[tuple[str, str]]) -> None:
    """No output names the app's own source, nor another output's file: the run wrote over
    them (`--trace app.py` replaced the app with its timeline; of --trace and --stats-json
    on one file the figures were lost)."""
    source = _app_source(app)
    seen: dict[Path, str] = {}
    for opt, path in outputs:
        where = Path(path).resolve()
        if source is not None and where == source:
            p.error(f"{opt} {path} is the app's own source: the run would write over it")
        if where in seen:
            p.error(f"{seen[where]} and {opt} name one file ({path}): give each its own")
        seen[where] = opt


def _app_source(app: str) -> Path | None:
    """The file APP runs from, when it is one (APP.py, or a module's .py)."""
    if app.endswith(".py"):
        return Path(app).resolve()
    import importlib.util

    try:
        spec = importlib.util.find_spec(app.partition(":")[0])
    except (ImportError, ValueError, OSError):
        return None  # (not there: the launcher says so)
    origin = getattr(spec, "origin", None)
    return Path(origin).resolve() if origin and origin.endswith(".py") else None


def _writable_dir(p: argparse.ArgumentParser, what: str, path: Path) -> None:
    """`path` is, or can be made, a folder this process can write to; else a usage error."""
    if problem := folder_problem(path):
        p.error(f"{what}: {problem}")


def _writable_file(p: argparse.ArgumentParser, what: str, path: Path) -> None:
    """`path` can be written (its folder made if need be); else a usage error."""
    if path.is_dir():
        p.error(f"{what} wants a file, not the folder {path}")
    _writable_dir(p, what, path.parent if str(path.parent) else Path("."))
    if path.exists() and not os.access(path, os.W_OK):
        p.error(f"{what}: {path} is not writable")


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


def _main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    app_args: list[str] = []
    if argv and argv[0] in ("run", "sim") and "--" in argv:
        i = argv.index("--")
        argv, app_args = argv[:i], argv[i + 1:]
    ap = build_parser()
    if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        # (argparse said "the following arguments are required: SUBCOMMAND", not a word of the option)
        ap.error(f"unrecognized argument {argv[0]}: options follow a SUBCOMMAND (gpucosim SUBCOMMAND --help)")
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
                ap._subparsers._group_actions[0].choices["run"].error(  # type: ignore[union-attr]
                    f"unrecognized arguments before APP: {' '.join(unknown)}")
        app_args = unknown + app_args
    else:
        args, unknown = ap.parse_known_args(argv)
        if unknown:  # (named by the subcommand, as its other usage errors are: its --help is the one to read)
            ap._subparsers._group_actions[0].choices[args.command].error(  # type: ignore[union-attr]
                f"unrecognized arguments: {' '.join(unknown)}")
    sub = ap._subparsers._group_actions[0].choices[args.command]  # type: ignore[union-attr]
    if args.command in ("run", "sim"):
        return cmd_run(sub, args, app_args)
    return {"bench": cmd_bench, "disasm": cmd_disasm, "regs": cmd_regs, "plot": cmd_plot}[args.command](sub, args)


if __name__ == "__main__":
    sys.exit(main())
