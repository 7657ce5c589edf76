"""The simulators' names, `gpucosim run`'s backends (the simulators and the reference model),
and the one wording every entry point gives a name that is none of them: `gpucosim run
--sim` and its $SIM (`make sim SIM=`), `make test SIM=` (tests/conftest.py), the difftest's
--sim, the driver checks' --sim, make bench's --speed-sims. They were worded five ways ("is
not a backend", "unknown simulator ...; choose from", "is not a simulator: choose verilator
and/or icarus", ...). Kept apart from testbench/sim/ so that gpucosim's usage errors need not
import the simulator layer."""

from __future__ import annotations

import difflib
from typing import Sequence

SIMULATORS = ("verilator", "icarus")
BACKENDS = (*SIMULATORS, "model")


def choices(names: Sequence[str] = SIMULATORS, lists: bool = False) -> str:
    """"verilator, icarus or model"; with `lists`, ", or a comma list of them" after it."""
    said = f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]
    return said + (", or a comma list of them" if lists else "")


def unknown_simulator(name: str, names: Sequence[str] = SIMULATORS, lists: bool = False) -> str:
    """Why `name` is none of `names` (the simulators, or BACKENDS where the model runs too), in
    one line naming them, with the closest as a guess; `lists`: a comma list is taken too."""
    if name == "model" and "model" not in names:
        return f"'model' is the reference model, not a simulator: choose {choices(names, lists)}"
    close = difflib.get_close_matches(name.lower(), names, n=1, cutoff=0.6)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return f"unknown simulator {name!r}{guess}: choose {choices(names, lists)}"


def no_simulator(given: str, names: Sequence[str] = SIMULATORS) -> str:
    """A comma list that names none (`SIM=,`, `--sim ''`)."""
    return f"{given!r} names no simulator: choose {choices(names, lists=True)}"


def given_twice(name: str) -> str:
    return f"{name} is given twice"
