"""What `gpucosim run` (and `sim`, `plot`) check before anything runs, so that a mistake is
one usage error now rather than a traceback, or a lost output, at the end of a run: the
paths given (not empty, a name the system takes, outputs writable, none the app's own
source), the app (a Python file), the KMD parameters, and the settings read from the
environment. cli.py builds the parser and runs the subcommands with them.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import errno
import json
import os
import re
from pathlib import Path

from testbench.argtypes import file_write_problem, folder_problem, option_meant, parse_int
from testbench.simnames import BACKENDS, unknown_simulator

COCOTB_LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG", "TRACE", "NOTSET")  # (cocotb.logging's)


def run_option_names() -> list[str]:
    """`gpucosim run`'s own options (--trace, --stats, ...), as its parser has them."""
    from .cli import _add_run_options

    p = argparse.ArgumentParser(add_help=False)
    _add_run_options(p)
    return [o for a in p._actions for o in a.option_strings]


def option_hint(args: list[str]) -> str:
    """"did you mean --trace?" for the first of `args` that is an option spelt close to one
    of `gpucosim run`'s (--trce, -trace, --stat), else "": such an option is unknown to
    gpucosim and so went to the app, which said only that nobody knew it."""
    from kmd_model.log import MODULES

    names = run_option_names()
    for a in args:
        word = a.split("=", 1)[0]
        if word.startswith("-") and word.lstrip("-") in BACKENDS:
            # (`gpucosim sim --model`: a backend is --sim's value, not an option of its own)
            return f"did you mean --sim {word.lstrip('-')}?"
        if word.startswith("-") and word not in names:
            close = option_meant(word, names, cutoff=0.75)  # (`--tim`: --timeout, not --sim)
            if close:
                return f"did you mean {close}?"
        elif "=" in a and (word in MODULES or word == "all"):
            # (`--log ioctl=info ring=debug`: the second pair, after a space, went to the app)
            return f"did you mean --log {a}? (--log takes a comma list: ioctl=info,{a})"
    return ""


def path_arg(text: str) -> str:
    """A file or folder name: not empty (`--trace "$OUT"` with OUT unset ran with no timeline,
    and `disasm ""` said "cannot read : Is a directory"), and one the system can take."""
    if not text:
        raise argparse.ArgumentTypeError("an empty name (give a path)")
    if problem := name_problem(text):
        raise argparse.ArgumentTypeError(problem)
    return text


def output_arg(text: str) -> str:
    """A file to write: a path_arg, and not "-" (a file named "-" was written, where stdin's
    name suggests stdout; /dev/stdout is stdout)."""
    if text == "-":
        raise argparse.ArgumentTypeError("- is no file here: give a name (/dev/stdout for stdout)")
    return path_arg(text)


def name_problem(text: str) -> str | None:
    """Why the system refuses `text` as a path whatever is written there, or None: a name too
    long (pathlib's is_dir() and is_file() raised ENAMETOOLONG as a traceback, where a missing
    file is just False), or symbolic links in a loop."""
    shown = text if len(text) <= 60 else text[:30] + "..." + text[-20:]
    try:
        os.stat(text)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG:
            return f"{shown!r} ({len(text)} characters): {e.strerror}"
        if e.errno == errno.ELOOP:  # (a symlink to itself: Path.resolve's RuntimeError traceback)
            return f"{text}: {e.strerror}"
        if e.errno == errno.ENOENT and _too_long(text):
            # (stat stops at the first missing folder, so `d/<300 characters>/s.json` with no
            # `d` passed: the run made `d`, and the output failed after it)
            return f"{shown!r} ({len(text)} characters): {os.strerror(errno.ENAMETOOLONG)}"
    return None


def _too_long(text: str) -> bool:
    """Whether a component of `text`, or the whole, is longer than the file system of its
    nearest existing folder takes (NAME_MAX, PATH_MAX; 255 and 4096 where it does not say)."""
    folder = Path(text).parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent

    def limit(name: str, default: int) -> int:
        try:
            return os.pathconf(folder, name)
        except (OSError, ValueError):
            return default

    name_max, path_max = limit("PC_NAME_MAX", 255), limit("PC_PATH_MAX", 4096)
    raw = os.fsencode(text)
    return len(raw) >= path_max or any(len(part) > name_max for part in raw.split(os.fsencode(os.sep)))


def kmd_params(p: argparse.ArgumentParser, items: list[str]) -> dict:
    from kmd_model.core.kmd import KmdParams

    known = {f.name: f for f in dataclasses.fields(KmdParams)}
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            p.error(f"--kmd wants KEY=VALUE, not {item!r}")
        if key not in known:
            like = difflib.get_close_matches(key, sorted(known), n=1)
            p.error(f"--kmd: unknown KMD parameter {key!r}" + (f": did you mean {like[0]}?" if like else "")
                    + f" (known: {', '.join(sorted(known))})")
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
            kind = {bool: "boolean (1/0, true/false)", float: "number",
                    int: "integer (decimal or 0x hex)"}[type(default)]
            p.error(f"--kmd {key}: {text!r} is not a{'n' if kind[0] == 'i' else ''} {kind}")
        out[key] = value
    try:
        KmdParams(**out)
    except ValueError as e:
        p.error(f"--kmd: {e}")
    return out


def run_options(p: argparse.ArgumentParser, args, app: str, app_args: list[str]):
    from .run.session import RunOptions, default_build_dir

    if args.log is not None:
        # (`--log ""` or `--log ,` set no level and said nothing: a spec lost to an unset
        # shell variable, `--log "$LOG"`, passed unnoticed)
        empty = next((spec for spec in args.log if not any(s.strip() for s in spec.split(","))), None)
        if empty is not None:
            p.error(f"--log: {empty!r} names no module=level pair (e.g. ioctl=info,ring=debug, or one level "
                    "for all: info)")
        args.log = ",".join(spec for spec in args.log if spec)

    if args.sim is None:
        env = os.environ.get("SIM", "").strip()
        if env and env not in BACKENDS:
            p.error(f"SIM={env!r} (from the environment): {unknown_simulator(env, BACKENDS)} (or give --sim)")
        args.sim = env or "verilator"
    if args.sim == "model" and (args.waves or args.waves_file):
        opt = "--waves" if args.waves else "--waves-file (a waveform)"  # (the one the user typed)
        p.error(f"{opt} needs a simulator: use --sim verilator or --sim icarus")
    if args.no_dma and args.sim != "model":
        p.error("--no-dma applies to the reference model (--sim model): the RTL always has its DMA engine")
    if args.rtl_engines and args.sim != "model":
        p.error("--rtl-engines applies to the reference model (--sim model): the RTL has only its own engines")
    if args.rtl_engines and args.no_dma:
        p.error("--rtl-engines and --no-dma contradict each other: the RTL has a DMA engine (give one of them)")
    if (app.endswith(".py") or os.sep in app) and (problem := name_problem(app)):
        p.error(f"APP {problem}")
    if app.endswith(".py") and not Path(app).is_file():
        from .run.app import no_app_file

        p.error(no_app_file(app))
    if app.endswith(".py"):
        python_text(p, app)
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
        writable_file(p, opt, Path(path))
    distinct_outputs(p, app, outputs)
    for opt, path in outputs:
        if opt != "--waves-file":  # (an .fst: checked above)
            json_or_new(p, opt, path)
    if args.crash_dir:  # (made by the first crash report: a run with none leaves no folder)
        writable_dir(p, "--crash-dir", Path(args.crash_dir), make=False)
    if args.sim != "model" or args.trace or args.waves or args.waves_file:
        # (checked where it would be made, not made: the simulator's build and the waveform's
        # writer make it; a run refused after these checks left an empty build folder)
        writable_dir(p, "GPUCOSIM_BUILD" if os.environ.get("GPUCOSIM_BUILD") else "the build folder",
                      default_build_dir(), make=False)
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
    from .run.stops import stop_grace, stop_refire

    try:
        stop_refire()
        if args.timeout:
            stop_grace()
    except ValueError as e:
        p.error(f"{e} (in the environment)")
    from umd.submit import ENV as ASYNC_ENV

    if os.environ.get(ASYNC_ENV, "0") not in ("0", "1"):
        p.error(f"{ASYNC_ENV}={os.environ[ASYNC_ENV]!r}: choose 0 or 1 (in the environment)")
    return RunOptions(app=app, backend=args.sim, args=app_args, trace=args.trace, waves=waves, log=args.log,
                      stats=args.stats, stats_json=args.stats_json, crash_dir=args.crash_dir, kmd=kmd_params(p, args.kmd),
                      dma=not args.no_dma, data_width=args.data_width, queues=True, timeout=args.timeout,
                      prog=p.prog)


def python_text(p: argparse.ArgumentParser, app: str) -> None:
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


def distinct_outputs(p: argparse.ArgumentParser, app: str, outputs: list[tuple[str, str]]) -> None:
    """No output names the app's own source, nor another output's file: the run wrote over
    them (`--trace app.py` replaced the app with its timeline; of --trace and --stats-json
    on one file the figures were lost)."""
    source = app_source(app)
    seen: dict[Path, str] = {}
    for opt, path in outputs:
        where = Path(path).resolve()
        if source is not None and where == source:
            p.error(f"{opt} {path} is the app's own source: the run would write over it")
        if where in seen:
            p.error(f"{seen[where]} and {opt} name one file ({path}): give each its own")
        seen[where] = opt


# What an earlier run's outputs begin with: a timeline (gpucosim/trace/timeline.py, its
# first event names the CPU's process) and the figures of --stats-json (session.figures).
TIMELINE_HEAD = b'{"traceEvents":[{"ph":"M","name":"process_name","pid":1,"tid":0,"args":{"name":"CPU: app, UMD, KMD"}}'
FIGURES_KEYS = ("app", "backend", "exit_code", "cycles", "ioctls")
FIGURES_MAX_BYTES = 64 << 10


def _earlier_output(where: Path, head: bytes) -> bool:
    """Whether the file is a timeline or the figures an earlier `gpucosim run` wrote."""
    if head.startswith(TIMELINE_HEAD):
        return True
    if head[:1] != b"{" or where.stat().st_size > FIGURES_MAX_BYTES:
        return False
    try:
        doc = json.loads(where.read_bytes())
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and all(k in doc for k in FIGURES_KEYS)


def json_or_new(p: argparse.ArgumentParser, opt: str, path: str) -> None:
    """--trace and --stats-json write JSON over the file they name: a file that is not a
    timeline or the figures of an earlier run is refused. (With the flags in the wrong order,
    `--trace examples/hello.py examples/fill.py` replaced an example by a timeline, and
    `--stats-json README.md` the README; `--stats-json build/bench.json` or `--trace
    build/fpga.json` replaced `make bench`'s or `make fpga`'s records, a JSON file like any
    other.) A new or empty file, an earlier run's output and a stream or pipe are written as
    before."""
    from .run.outputs import is_ours

    where = Path(path)
    try:
        if not where.is_file() or where.stat().st_size == 0 or is_ours(path):
            return
        with open(where, "rb") as f:
            head = f.read(4096).lstrip()
        if _earlier_output(where, head):
            return
    except OSError:
        return  # (writable_file has said what is wrong with it)
    kind = "JSON of something else" if head[:1] in (b"{", b"[") else "not JSON"
    p.error(f"{opt} {path}: the file exists and is {kind} (not a timeline or figures of an earlier run): "
            "the run would write over it; give a new name, or remove the file first")


def app_source(app: str) -> Path | None:
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


def writable_dir(p: argparse.ArgumentParser, what: str, path: Path, make: bool = True) -> None:
    """`path` is, or can be made, a folder this process can write to; else a usage error.
    `make`: made now; else left to the writer, which makes it when it writes (the nearest
    folder that exists is checked)."""
    if problem := folder_problem(path, make=make):
        p.error(f"{what}: {problem}")


def writable_file(p: argparse.ArgumentParser, what: str, path: Path) -> None:
    """`path` can be written; else a usage error. Its folder is not made here: the run's
    writers make it when they write (Timeline.write, Session.write_figures, the launcher for
    a waveform), so a run refused after these checks, or failing, leaves no empty folders."""
    if path.is_dir():
        p.error(f"{what} wants a file, not the folder {path}")
    writable_dir(p, what, path.parent if str(path.parent) else Path("."), make=False)
    if path.exists() and (problem := file_write_problem(path)):
        p.error(f"{what}: {problem}")
