"""argparse for the project's command lines (gpucosim, python -m testbench.*, python -m fpga*):
the parser whose usage errors are one line, and the types of the campaigns' options
(difftest, mutate): a bad count or share is a usage error naming the option, before any
simulator is built or started."""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from pathlib import Path
from typing import Callable


UNRECOGNIZED = "unrecognized arguments: "  # (argparse's words, before the arguments)
REQUIRED = "the following arguments are required: "


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose usage errors are one line, `PROG: error: MESSAGE`, exit
    status 2: argparse prints the whole usage block first, which pushes the line that says
    what is wrong out of sight (the usage is what --help is for). Subcommand parsers are of
    the same class (add_subparsers takes the parent's)."""

    def __init__(self, *args, options_in_errors: bool = False, **kwargs):
        """`options_in_errors`: an unrecognized argument's error ends with the options there
        are, as the usage line has them (`(usage: memcpy [-h] [--seed SEED])`), and the one
        meant when it is spelt close to one (`--sedd 3: did you mean --seed?`): for a small
        program's few options (the examples'), where "unrecognized arguments: --sedd 3" was
        all, and --help the only way to find what it takes."""
        super().__init__(*args, **kwargs)
        self.options_in_errors = options_in_errors

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        self._words = list(sys.argv[1:] if args is None else args)  # (for error(): what was typed)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):  # type: ignore[override]
        message = " ".join(str(message).split())
        if self.options_in_errors and message.startswith(REQUIRED) and (unknown := self._unknown_options()):
            # (`plot t.json --out x.png` said "the following arguments are required: -o/--output":
            # the option typed, not abbreviated here, was not a word of it)
            message = UNRECOGNIZED + " ".join(unknown)
        if self.options_in_errors and message.startswith(UNRECOGNIZED):
            message += self._options_hint(message[len(UNRECOGNIZED):].split())
        self.exit(2, f"{self.prog}: error: {message}\n")

    def _names(self) -> list[str]:
        return [o for a in self._actions for o in a.option_strings]

    def _unknown_options(self) -> list[str]:
        """The words typed that look like an option (not a negative number) and are none."""
        words = getattr(self, "_words", [])
        words = words[:words.index("--")] if "--" in words else words
        names = self._names()
        return [w for w in words if len(w) > 1 and w[0] == "-" and not w[1].isdigit()
                and w.split("=", 1)[0] not in names]

    def _options_hint(self, words: list[str]) -> str:
        names = self._names()
        meant = ""
        for word in words:
            if word.startswith("-") and (close := option_meant(word, names, cutoff=0.7)):
                meant = f": did you mean {close}?"
                break
        return f"{meant} ({' '.join(self.format_usage().split())})"


def option_meant(word: str, names: list[str], cutoff: float) -> str | None:
    """The option a mistyped `word` (`--x` or `--x=value`) meant: the one it begins, as an
    abbreviation (the project's commands take none: `--data` for --data-width; difflib's
    closest was another, `--max` was "did you mean --sdma?"), of several the one spelt nearly
    so (--stat: --stats), else "A or B" (--t: --trace or --timeout);
    else the one spelt closest (difflib at `cutoff`: --trce, --sedd); None when none is."""
    word = word.split("=", 1)[0]
    if word.startswith("--") and len(word) > 2:
        begun = list(dict.fromkeys(n for n in names if n.startswith(word) and n != word))
        if len(begun) > 1:  # (--stat: --stats, spelt nearly so, rather than --stats or --stats-json)
            begun = difflib.get_close_matches(word, begun, n=1, cutoff=cutoff) or begun
        if begun:
            return " or ".join(begun)
    close = difflib.get_close_matches(word, names, n=1, cutoff=cutoff)
    return close[0] if close else None


NOT_AN_INTEGER = "must be an integer (decimal or 0x hex)"


def parse_int(text: str) -> int:
    """The one integer syntax of the project's command lines, for counts, sizes, addresses,
    cycles and register values alike: decimal or 0x hex (0o and 0b, and `_` between digits, as
    Python writes them; leading zeros are decimal, not octal). ValueError otherwise, and for
    more digits than any option needs (Python's own limit was a message about 4300 digits)."""
    t = text.strip()
    if not t.isascii() or len(t) > 100:  # (int() takes other scripts' digits: "٣" was 3)
        raise ValueError(text)
    try:
        return int(t, 0)
    except ValueError:
        return int(t, 10)  # ("010" is ten; "0x" and "1e3" are refused here too)


def integer_in(lo: int | None = None, hi: int | None = None, *, multiple: int = 1,
               bits: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer (parse_int) in [lo, hi], a multiple of `multiple`; `bits`:
    hi is the largest value of that many bits, said so in its message. Each refusal is one
    line naming what was given: `argument --base: must be a multiple of 4, not 0x2`."""

    def parse(text: str) -> int:
        try:
            v = parse_int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{NOT_AN_INTEGER}, not {text!r}") from None
        if lo is not None and v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, not {text}")
        if hi is not None and v > hi:
            limit = f"fit in {bits} bits (at most {hi:#x})" if bits else f"be at most {hi}"
            raise argparse.ArgumentTypeError(f"must {limit}, not {text}")
        if v % multiple:
            raise argparse.ArgumentTypeError(f"must be a multiple of {multiple}, not {text}")
        return v

    parse.__name__ = "integer"  # (argparse names the type in some messages)
    return parse


def int_at_least(lo: int) -> Callable[[str], int]:
    """An integer >= lo (a count, an index, a number of jobs)."""
    return integer_in(lo)


def int_one_of(values: tuple[int, ...]) -> Callable[[str], int]:
    """One of `values` (a bus width), written in any form parse_int takes."""

    def parse(text: str) -> int:
        try:
            v = parse_int(text)
        except ValueError:
            v = None
        if v not in values:
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(map(str, values))}")
        return v

    parse.__name__ = "integer"
    return parse


def real_in(ok: Callable[[float], bool], what: str) -> Callable[[str], float]:
    """A number for which `ok` holds; `what` says which ("a number in (0, 1]")."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if v != v or not ok(v):  # (NaN: not a number, or a "nan" typed in)
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return v

    return parse


fraction = real_in(lambda v: 0 < v <= 1, "a number in (0, 1]")  # a share
positive_float = real_in(lambda v: 0 < v < float("inf"), "a positive number")  # minutes, a budget


def folder_problem(path: Path, make: bool = True) -> str | None:
    """Why `path` is not, and cannot be made, a folder this process can write in (one line,
    for `OPTION: ...`), or None. Checked by making a file there and removing it: os.access
    says yes to root everywhere, /proc included. `make`: the folder is made now (the run
    writes there without making it); else nothing is made, and the nearest folder that
    exists is the one checked (a report written at a run's end makes its folders then: a
    run that failed before left them empty)."""
    if not make:
        there = next((d for d in (path, *path.parents) if d.exists() or d.is_symlink()), Path("."))
        if not there.is_dir():
            return f"{there} is a file, not a folder"
        path = there
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return f"{path} is a file, not a folder"
    except OSError as e:
        return f"cannot create {path}: {e.strerror}"
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        return f"cannot write in {path}: {e.strerror}"
    return None


def file_write_problem(path: Path) -> str | None:
    """Why this process cannot write the existing file `path` (one line: `cannot write PATH:
    the OS's words`), or None. A regular file is opened for appending and closed, its bytes
    and times untouched: the OS answers for the write itself. os.access asks the permission
    bits for the real uid, and root passes them (CAP_DAC_OVERRIDE) where the write may still
    fail (a root-squashed NFS share, a FUSE mount, a security module's refusal); the message
    said "Permission denied" whatever the cause. Anything else (a FIFO, a device, which an
    open may block on or act on) is asked of os.access, as before."""
    import os
    import stat

    try:
        regular = stat.S_ISREG(path.stat().st_mode)
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    if not regular:
        return None if os.access(path, os.W_OK) else f"cannot write {path}: Permission denied"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return f"cannot write {path}: {e.strerror}"
    os.close(fd)
    return None


def report_file_problem(path: Path | str, what: str) -> str | None:
    """Why a run cannot end by writing its JSON report to `path` (one line, for `-o: ...`), or
    None: found before the run, not after its minutes or hours. A folder; a path under a file;
    a file that is not `what` (an earlier report: a JSON object), which the run would write
    over (`-o README.md`); an earlier report this process cannot write; a folder that takes
    no file. Makes no folder: the run makes them
    when it writes the report. An empty name (`-o ""`, which Path reads as ".") is none."""
    if str(path) == "":
        return "an empty name (give a path)"
    path = Path(path)
    if path.is_dir():
        return f"{path} is a folder; name the JSON file to write"
    blocker = next((d for d in path.parents if d.exists() and not d.is_dir()), None)
    if blocker is not None:
        return f"{blocker} is a file, not a folder"
    if path.exists():
        try:
            ok = isinstance(json.loads(path.read_text()), dict)
        except (OSError, UnicodeDecodeError, ValueError):
            ok = False
        if not ok:
            return (f"{path}: the file exists and is not {what} (a JSON object): the run would write over it; "
                    "give a new name, or remove the file first")
        return file_write_problem(path)  # (written over in place: its folder's answer is not its own)
    return folder_problem(path.parent, make=False)


def script_takes_no_arguments(prog: str, doc: str | None) -> None:
    """For an example without options run by python (`python examples/hello.py`): --help
    prints what it is (its docstring's first paragraph) and exits 0; any other argument is
    a one-line usage error, exit status 2, as `gpucosim run` says it of such an app (they
    were ignored: `--help`, or a mistyped `--sim model`, ran the whole example)."""
    ap = OneLineParser(prog=prog, description=" ".join((doc or "").split("\n\n")[0].split()),
                       epilog=f"It takes no arguments; `gpucosim run examples/{prog}.py --sim model` runs it on "
                              "the reference model, `--sim verilator` on the RTL.")
    args = sys.argv[1:]
    if args and args != ["-h"] and args != ["--help"]:
        ap.error(f"{prog} takes no arguments, not {' '.join(args)} ({' '.join(ap.format_usage().split())}; "
                 f"`gpucosim run --help` lists the options of a run, --sim among them)")
    ap.parse_args(args)
