"""Deliberately broken copies of the RTL: every property must catch at least one.

A mutant is one textual edit of one RTL module (`old` → `new`, which must match exactly
once). `applied()` loads the edited source as a fresh copy of that module and, while the
harness elaborates, points every `rtl` module that uses the original (its module object
or a name it exported) at the copy; the files on disk are never touched. When the RTL
changes so that `old` no longer matches, the mutant fails with its name: update it.

`make formal` runs every mutant (a BMC of its group at the group's depth) and requires
that each one fails and that the properties it `kills` are among the failures;
tests/test_formal.py runs a few of them in `make test`, and checks that every assert of
the table is killed by some mutant.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import types
from dataclasses import dataclass


class MutantError(RuntimeError):
    pass


@dataclass(frozen=True)
class Mutant:
    name: str
    group: str
    module: str          # dotted module name, e.g. "rtl.bus"
    old: str
    new: str
    kills: tuple         # property names (of `group`) that must fail
    says: str            # the bug it plants
    depth: int = 0       # BMC depth (0: the group's)
    fast: bool = False   # run in `make test`

    def source(self) -> str:
        orig = importlib.import_module(self.module)
        text = open(orig.__file__).read()
        n = text.count(self.old)
        if n != 1:
            raise MutantError(f"mutant {self.name}: the text to replace occurs {n} times in "
                              f"{self.module} (expected once): update formal/mutants.py")
        return text.replace(self.old, self.new)

    @contextlib.contextmanager
    def applied(self):
        orig = importlib.import_module(self.module)
        spec = importlib.util.spec_from_loader(self.module, loader=None, origin=orig.__file__)
        copy = importlib.util.module_from_spec(spec)
        copy.__file__ = orig.__file__
        copy.__package__ = orig.__package__
        exec(compile(self.source(), f"{orig.__file__} (mutant {self.name})", "exec"), copy.__dict__)
        exported = {id(v): k for k, v in vars(orig).items()
                    if isinstance(v, (type, types.FunctionType)) and getattr(v, "__module__", None) == self.module}
        saved = []
        for mod in list(sys.modules.values()):
            if mod is None or mod is orig or not getattr(mod, "__name__", "").startswith(("rtl", "formal")):
                continue
            for k, v in list(vars(mod).items()):
                if v is orig:
                    saved.append((mod, k, v))
                    setattr(mod, k, copy)
                elif id(v) in exported and exported[id(v)] in vars(copy):
                    saved.append((mod, k, v))
                    setattr(mod, k, getattr(copy, exported[id(v)]))
        try:
            yield copy
        finally:
            for mod, k, v in saved:
                setattr(mod, k, v)


MUTANTS: list[Mutant] = [
    # ---------------------------------------------------------------- AXI4-Lite slave
    Mutant("bridge_b_drops", "axil", "rtl.bus",
           "with m.If(b_valid & bus.bready):\n            m.d.sync += b_valid.eq(0)",
           "with m.If(b_valid):\n            m.d.sync += b_valid.eq(0)",
           ("b_held",), "BVALID drops after one cycle whether or not BREADY was high", fast=True),
]


def by_name(name: str) -> Mutant:
    for mu in MUTANTS:
        if mu.name == name:
            return mu
    raise KeyError(f"no mutant {name!r}")
