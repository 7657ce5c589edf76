"""argparse for the project's command lines (gpucosim, python -m testbench.*, python -m fpga*):
the parser whose usage errors are one line, and the types of the campaigns' options
(difftest, mutate): a bad count or share is a usage error naming the option, before any
simulator is built or started."""

from __future__ import annotations

import argparse
from typing import Callable


class OneLineParser(argparse.ArgumentParser):
    """argparse.ArgumentParser whose usage errors are one line, `PROG: error: MESSAGE`, exit
    status 2: argparse prints the whole usage block first, which pushes the line that says
    what is wrong out of sight (the usage is what --help is for). Subcommand parsers are of
    the same class (add_subparsers takes the parent's)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {' '.join(str(message).split())}\n")


def int_at_least(lo: int) -> Callable[[str], int]:
    """An integer >= lo (a count, an index, a number of jobs)."""

    def parse(text: str) -> int:
        try:
            v = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, not {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo}, not {text}")
        return v

    parse.__name__ = f"integer >= {lo}"  # (argparse names the type in some messages)
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
