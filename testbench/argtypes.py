"""argparse types for the campaigns' command lines (difftest, mutate): a bad count or share
is a usage error naming the option, before any simulator is built or started."""

from __future__ import annotations

import argparse
from typing import Callable


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


def fraction(text: str) -> float:
    """A share in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], not {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], not {text}")
    return v


def positive_float(text: str) -> float:
    """A positive number (minutes, a budget)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return v
