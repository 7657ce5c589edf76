"""The hand-written docs name only registers, fields, enum values, packets and IH fields
that exist: every `REG.FIELD` and every backquoted register-style NAME in the prose is
checked against the register map (spec/regs.rdl, via kmd_model.regs), the packet table
and the IH entry. (The generated references and sections are checked by
tests/spec/test_generated.py: `make check-gen`.) The commands in the docs' code blocks and
those quoted inline name make targets, variables, modules, subcommands, options and apps
that exist (the tutorial's are run: tests/tools/examples/test_tutorial.py), and every backquoted path
from the repository's top is there."""

from __future__ import annotations

import glob
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kmd_model import regs
from spec import ih, packets
from spec.sdma import packets as sdma_packets

ROOT = Path(__file__).resolve().parents[2]
PROSE = ["README.md", "docs/hardware.md", "docs/architecture.md", "docs/tutorial.md", "docs/verification.md"]

REGISTERS = {c.NAME: {f.name for f in c.FIELDS} for c in (*regs.REGISTERS, *regs.MODEL_ONLY_REGISTERS)}
PACKETS = {p.name: {f.name for f in p.fields} for p in (*packets.PACKETS, *sdma_packets.SDMA_PACKETS)}


def _known() -> set[str]:
    k = set(REGISTERS) | {f for fs in REGISTERS.values() for f in fs}
    k |= {m.name for m in regs.CpError} | {m.name for m in regs.IbLevel}
    k |= set(PACKETS) | {f for fs in PACKETS.values() for f in fs} | {"TYPE2_FILLER"}
    k |= {v for p in (*packets.PACKETS, *sdma_packets.SDMA_PACKETS) for f in p.fields for v in f.values}
    k |= {f.name for f in ih.FIELDS} | {s.name for s in ih.Source}
    # a 64-bit address register pair named without its _LO/_HI ("CP_ERROR_ADDR")
    k |= {n[:-3] for n in REGISTERS if n.endswith("_LO") and n[:-3] + "_HI" in REGISTERS}
    return k


def _code_names() -> set[str]:
    """Upper-case names the Python code defines or reads from the environment."""
    out = set()
    for py in ROOT.glob("*/**/*.py"):
        if ".venv" in py.parts or "build" in py.parts:
            continue
        text = py.read_text()
        # (every target of a chained assignment: `FAILED_KEPT = RING_KEPT = ...` defines both)
        for chain in re.findall(r"^\s*((?:[A-Z][A-Z0-9_]+\s*=\s*)*[A-Z][A-Z0-9_]+)\s*[:=]", text, flags=re.M):
            out |= {n.strip() for n in chain.split("=")}
        out |= set(re.findall(r"""environ(?:\.get)?\s*[\[(]\s*["']([A-Z][A-Z0-9_]+)["']""", text))
    return out


def _prose(path: str) -> str:
    text = (ROOT / path).read_text()
    return re.sub(r"<!-- BEGIN generated.*?<!-- END generated[^>]*-->", "", text, flags=re.S)


def problems(text: str) -> list[str]:
    known, code = _known(), _code_names()
    bad = []
    for m in re.finditer(r"\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)\.([A-Z][A-Z0-9_]*)\b", text):
        a, b = m.groups()
        if a in REGISTERS and b not in REGISTERS[a]:
            bad.append(f"{m.group(0)}: {a} has no field {b}")
        elif a in PACKETS and b not in PACKETS[a]:
            bad.append(f"{m.group(0)}: packet {a} has no field {b}")
        elif a not in REGISTERS and a not in PACKETS:
            bad.append(f"{m.group(0)}: no register or packet {a}")
    for m in re.finditer(r"`([A-Z][A-Z0-9]*_[A-Z0-9_]+)`", text):
        name = m.group(1)
        if name not in known and name not in code:
            bad.append(f"`{name}`: not a register, field, enum value, packet or IH field, nor a name in the code")
    return bad


@pytest.mark.parametrize("path", PROSE)
def test_prose_names_exist(path):
    bad = problems(_prose(path))
    assert not bad, f"{path} names what does not exist:\n" + "\n".join(bad)


def test_the_check_bites():
    """A misspelt field, a field of the wrong register, an invented register are caught; real
    names, address pairs and code names are not."""
    text = ("`CP_ERROR.OPCOD` and STATUS.EOP and RB_DOORBEL.WPTR and `RB_DOORBEL`; fine: "
            "`CP_ERROR.OPCODE`, INT_STATUS.EOP, `CP_ERROR_ADDR`, `GPUCOSIM_LOG`, `IB_SIZE_ZERO`")
    assert problems(text) == [
        "CP_ERROR.OPCOD: CP_ERROR has no field OPCOD", "STATUS.EOP: STATUS has no field EOP",
        "RB_DOORBEL.WPTR: no register or packet RB_DOORBEL",
        "`RB_DOORBEL`: not a register, field, enum value, packet or IH field, nor a name in the code"]


def _sh_commands(path: str) -> list[str]:
    """The commands of a doc's sh blocks, comments dropped."""
    text = (ROOT / path).read_text()
    out = []
    for body in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        out += [line.split("#")[0].strip() for line in body.splitlines() if line.split("#")[0].strip()]
    return out


@pytest.mark.parametrize("path", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))])
def test_doc_commands_paste_as_they_are(path):
    """Each line of a doc's sh blocks is one plain command a reader can paste: no
    redirection, pipe or list, and no <placeholder> (README's `gpucosim disasm
    build/crash/<report>.txt` was a redirection from a file named `report`)."""
    for body in re.findall(r"```sh\n(.*?)```", (ROOT / path).read_text(), flags=re.S):
        for cmd in body.replace("\\\n", " ").splitlines():  # (a line continued with \ is one command)
            lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
            lex.whitespace_split, lex.commenters = True, "#"
            words = list(lex)
            assert not {"<", ">", "|", ";", "&", ">>", "&&", "||"} & set(words), (path, cmd)


def test_readme_commands_name_what_exists():
    """Every command in the README's sh blocks: a `make` target the Makefile has (with the
    variables it reads), a gpucosim command that runs (on the model: the simulators' runs
    are the tutorial's, tests/tools/examples/test_tutorial.py; in a build folder of its own, whose
    crash reports a pattern such as `build/crash/crash-gpu_error-*.txt` then names, expanded
    as a shell would), an app or file that is there."""
    makefile = (ROOT / "Makefile").read_text()
    cmds = _sh_commands("README.md")
    assert any(c.startswith("make ") for c in cmds) and any(c.startswith("gpucosim ") for c in cmds)
    with tempfile.TemporaryDirectory() as tmp:
        for cmd in cmds:
            argv = shlex.split(cmd)
            if argv[0] == "make":
                target = argv[1] if len(argv) > 1 and "=" not in argv[1] else "all"
                assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), f"{cmd}: no target {target}"
                for var in (a.split("=")[0] for a in argv[2:] if "=" in a):
                    reads = f"$({var})" in makefile or f"{var} ?=" in makefile
                    assert reads, f"{cmd}: the Makefile reads no {var}"
                continue
            if argv[:3] == ["python", "-m", "gpucosim"]:
                argv = argv[2:]
            assert argv[0] == "gpucosim", cmd
            if "--waves" in argv:  # a waveform needs a simulator
                assert (ROOT / argv[2]).exists() if argv[1] == "run" else True, cmd
                argv = argv[:2] + ["--help"]
            if argv[1] == "run" and "--help" not in argv:
                argv = [a for i, a in enumerate(argv) if a != "--sim" and argv[i - 1] != "--sim"] + ["--sim", "model"]
            argv = [a.replace("build/", f"{tmp}/") for a in argv]
            argv = [x for a in argv for x in (sorted(glob.glob(a)) if glob.has_magic(a) else [a])]  # (as sh does)
            r = subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                               env={**os.environ, "GPUCOSIM_PROGRESS": "0", "GPUCOSIM_BUILD": tmp})
            assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stderr[-2000:]}"


@pytest.mark.parametrize("path", ["docs/verification.md", "docs/formal.md", "docs/fpga.md"])
def test_doc_commands_name_targets_and_options_that_exist(path):
    """The sh blocks of the other docs: each `make` target and variable is the Makefile's,
    each `python -m MODULE --option` an option MODULE's --help lists (nothing heavy runs)."""
    makefile = (ROOT / "Makefile").read_text()
    helps: dict[str, str] = {}
    cmds = _sh_commands(path)
    assert cmds
    for cmd in cmds:
        argv = shlex.split(cmd)
        if argv[0] == "make":
            target = argv[1] if len(argv) > 1 and "=" not in argv[1] else "all"
            assert re.search(rf"^{re.escape(target)}:", makefile, flags=re.M), f"{path}: {cmd}: no target {target}"
            for var in (a.split("=")[0] for a in argv[2:] if "=" in a):
                reads = f"$({var})" in makefile or f"{var} ?=" in makefile
                assert reads, f"{path}: {cmd}: the Makefile reads no {var}"
            continue
        while argv and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", argv[0]):  # VAR=value before the command
            var = argv.pop(0).split("=")[0]
            assert subprocess.run(["git", "grep", "-q", "-w", var, "--", "*.py", "Makefile"], cwd=ROOT).returncode == 0, \
                f"{path}: {cmd}: no code reads {var}"
        if argv[0] == "pytest":  # the tests it names exist
            for a in (a for a in argv[1:] if not a.startswith("-")):
                assert (ROOT / a.split("::")[0]).exists(), f"{path}: {cmd}: no {a}"
            continue
        assert argv[:2] == ["python", "-m"], f"{path}: {cmd}"
        module = argv[2]
        if module not in helps:
            r = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0, f"{path}: python -m {module} --help: exit {r.returncode}\n{r.stderr[-1000:]}"
            helps[module] = r.stdout
        for opt in (a.split("=")[0] for a in argv[3:] if a.startswith("--")):
            assert re.search(rf"{re.escape(opt)}\b", helps[module]), f"{path}: {cmd}: python -m {module} has no {opt}"


# ------------------------------------------------------------------ commands inside the prose

def _inline_commands(path: str) -> list[str]:
    """The commands written inline in a doc's prose (`make ...`, `gpucosim ...`,
    `python -m ...` between backquotes, wrapped lines joined), outside its code blocks."""
    text = re.sub(r"```.*?```", "", (ROOT / path).read_text(), flags=re.S)
    spans = (" ".join(m.group(1).split()) for m in re.finditer(r"`([^`]+)`", text))
    return [s for s in spans if re.match(r"(make|gpucosim|python -m) \S", s)]


def _help(argv: tuple[str, ...], cache: dict) -> str | None:
    """`python -m ARGV --help`'s text, or None when it fails."""
    if argv not in cache:
        r = subprocess.run([sys.executable, "-m", *argv, "--help"], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
        cache[argv] = r.stdout if r.returncode == 0 else None
    return cache[argv]


def command_problems(cmd: str, makefile: str, helps: dict) -> list[str]:
    """What in an inline command does not exist: a make target or variable, a gpucosim
    subcommand, a module, an option (gpucosim's, the module's, or for `run` the app's: an
    option gpucosim does not know goes to the app), an app. Placeholders (APP, FILE,
    <...>, a|b) are not checked."""
    argv = shlex.split(cmd.replace("…", ""))
    if argv[0] == "make":
        target = argv[1] if len(argv) > 1 and "=" not in argv[1] else "all"
        if not re.search(rf"^{re.escape(target)}:", makefile, flags=re.M):
            return [f"{cmd}: no make target {target}"]
        return [f"{cmd}: the Makefile reads no {v}" for v in (a.split("=")[0] for a in argv[2:] if "=" in a)
                if f"$({v})" not in makefile and f"{v} ?=" not in makefile]
    if argv[0] == "gpucosim":
        if len(argv) == 1:
            return []
        tool = ("gpucosim", argv[1])
        rest = argv[2:]
    else:
        tool = (argv[2],)
        rest = argv[3:]
    text = _help(tool, helps)
    if text is None:
        return [f"{cmd}: `{' '.join(tool)} --help` fails"]
    app = None
    if tool == ("gpucosim", "run") and rest and rest[0].endswith(".py"):
        if not (ROOT / rest[0]).is_file():
            return [f"{cmd}: no app {rest[0]}"]
        app = (ROOT / rest[0]).read_text()
    bad, after = [], False
    for a in rest:
        if a == "--":
            after = True
            continue
        if not a.startswith("--"):
            continue
        opt = a.split("=")[0]
        ours = not after and re.search(rf"{re.escape(opt)}\b", text)
        if not ours and not (app is not None and f'"{opt}"' in app):
            bad.append(f"{cmd}: {opt} is an option of neither {' '.join(tool)}" +
                       (f" nor {rest[0]}" if app is not None else ""))
    return bad


DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("path", DOCS)
def test_inline_commands_name_what_exists(path):
    """The commands the prose quotes (`python -m testbench.difftest --multi`, `gpucosim run
    examples/async_submit.py --sim model -- --submits 300`, `make soak N=10000 JOBS=2` ...):
    the code blocks are checked above and the tutorial's are run by tests/tools/examples/test_tutorial.py,
    these were not checked at all."""
    makefile, helps = (ROOT / "Makefile").read_text(), {}
    bad = [p for cmd in _inline_commands(path) for p in command_problems(cmd, makefile, helps)]
    assert not bad, "\n".join(bad)


def test_the_inline_command_check_bites():
    makefile, helps = (ROOT / "Makefile").read_text(), {}
    assert _inline_commands("docs/architecture.md")  # (it finds some)
    cmds = ["make soak N=1 JOBZ=2", "make sok", "python -m testbench.difftst --sim model",
            "python -m testbench.difftest --mutli", "gpucosim run examples/async_submit.py --sim model -- --submit 3",
            "gpucosim run examples/hello.py --trce x", "gpucosim run examples/helo.py", "gpucosim dissasm",
            "gpucosim run APP --sim verilator|icarus|model", "gpucosim run examples/copy_pipeline.py --slots 1",
            "make formal SOLVER=…"]
    assert [p for c in cmds for p in command_problems(c, makefile, helps)] == [
        "make soak N=1 JOBZ=2: the Makefile reads no JOBZ", "make sok: no make target sok",
        "python -m testbench.difftst --sim model: `testbench.difftst --help` fails",
        "python -m testbench.difftest --mutli: --mutli is an option of neither testbench.difftest",
        "gpucosim run examples/async_submit.py --sim model -- --submit 3: --submit is an option of neither "
        "gpucosim run nor examples/async_submit.py",
        "gpucosim run examples/hello.py --trce x: --trce is an option of neither gpucosim run nor examples/hello.py",
        "gpucosim run examples/helo.py: no app examples/helo.py",
        "gpucosim dissasm: `gpucosim dissasm --help` fails"]


# ------------------------------------------------------------------ paths the prose names

TOP = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - {"build"}


def path_problems(text: str) -> list[str]:
    """Backquoted paths from the repository's top (`umd/winsys/pool.py`, `testbench/difftest/`,
    `tests/difftest/test_difftest.py::test_x`) that are not there: modules move (gpucosim/run/,
    umd/winsys/, spec/gen/ ...) and the prose keeps the old place."""
    bad = []
    for m in re.finditer(r"`([A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-/]*)(?:::\w+)?`", text):
        p = m.group(1)
        if p.split("/")[0] in TOP and not (ROOT / p).exists():
            bad.append(f"`{m.group(0).strip('`')}`: no {p}")
    return bad


@pytest.mark.parametrize("path", DOCS)
def test_paths_named_in_the_docs_exist(path):
    bad = path_problems((ROOT / path).read_text())
    assert not bad, f"{path} names paths that are not there:\n" + "\n".join(bad)


def test_the_path_check_bites():
    assert path_problems("`umd/ioctl.py`, `umd/winsys/ioctl.py`, `gen/generate.py` (under spec/), "
                         "`tests/spec/test_docs.py::test_x`, `tests/test_nope.py::test_x`, `build/crash/`") == [
        "`umd/ioctl.py`: no umd/ioctl.py", "`tests/test_nope.py::test_x`: no tests/test_nope.py"]
