"""Survivors that are argued, keyed by what the mutation changes (not by mutmut's numbers).

survivors.toml lists them, one table each:

    [[survivor]]
    module = "kmd_model/reset/stuck.py"
    function = "_unsatisfied"
    before = "if ap is None or ap // 4 >= len(mem32):"
    after = "if ap is None or ap / 4 >= len(mem32):"
    kind = "equivalent"            # or "accepted"
    why = "ap is ADDR_LO << 2 through 4 KiB pages, a multiple of 4: ap / 4 == ap // 4 exactly"

`before` / `after` are the changed lines, stripped (a list when the change spans several
lines, `after` empty when the line is removed). Without them the entry covers every
mutant of the function (dead code, text only a debugger sees). mutmut numbers mutants per function in
source order, so its names change whenever the function does; this key only changes when
the mutated line itself does. `equivalent`: no test can tell it from the original (the
program's behaviour is the same); it is left out of the score's denominator. `accepted`:
a real difference judged not worth a test (said why); it counts as a survivor.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from testbench.pipes import pipe_safe

LIST = Path(__file__).with_name("survivors.toml")
KINDS = ("equivalent", "accepted")


def _norm(lines) -> str:
    if isinstance(lines, str):
        lines = [lines]
    return " / ".join(re.sub(r"\s+", " ", ln.strip()) for ln in lines if ln.strip())


def key_of(module: str, function: str, before, after) -> str:
    """`module::function: before -> after`, whitespace-normalised."""
    return f"{module}::{function}: {_norm(before)} -> {_norm(after)}"


@dataclass(frozen=True)
class Argued:
    key: str  # key_of(...), or "module::function" for the whole function
    kind: str
    why: str

    @property
    def reason(self) -> str:
        return f"{self.kind}: {self.why}"


class Arguments:
    """The argued survivors, looked up by a mutant's key."""

    def __init__(self, entries: list[Argued]):
        self.entries = entries
        self._by_key = {a.key: a for a in entries}

    def __len__(self) -> int:
        return len(self.entries)

    def find(self, key: str) -> Argued | None:
        """The entry for this mutant: its own, else its function's."""
        a = self._by_key.get(key)
        if a is None:
            a = self._by_key.get(key.split(": ", 1)[0])
        return a


def load(path: Path = LIST) -> Arguments:
    """The list; a malformed entry is one precise error."""
    if not path.exists():
        return Arguments([])
    data = tomllib.loads(path.read_text())
    out: list[Argued] = []
    seen: set[str] = set()
    for i, e in enumerate(data.get("survivor", [])):
        where = f"{path.name}: survivor #{i + 1}"
        missing = [k for k in ("module", "function", "kind", "why") if k not in e]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        if ("before" in e) != ("after" in e):
            raise ValueError(f"{where}: give both before and after, or neither (the whole function)")
        if e["kind"] not in KINDS:
            raise ValueError(f"{where}: kind must be one of {', '.join(KINDS)}, not {e['kind']!r}")
        if "before" in e:
            k = key_of(e["module"], e["function"], e["before"], e["after"])
            if "occurrence" in e:
                k = f"{k} #{e['occurrence']}"
        else:
            k = f"{e['module']}::{e['function']}"
        if k in seen:
            raise ValueError(f"{where}: listed twice: {k}")
        seen.add(k)
        out.append(Argued(k, e["kind"], e["why"]))
    return Arguments(out)


def stub(module: str, function: str, diff: str) -> str:
    """A survivors.toml entry for a survivor (from build/mutate.json), to fill in."""
    def q(lines):
        lines = [ln.strip() for ln in lines if ln.strip()]
        if len(lines) == 1:
            return _toml_str(lines[0])
        return "[" + ", ".join(_toml_str(ln) for ln in lines) + "]"
    before = [ln[1:] for ln in diff.splitlines() if ln.startswith("-")]
    after = [ln[1:] for ln in diff.splitlines() if ln.startswith("+")]
    return "\n".join(["[[survivor]]", f"module = {_toml_str(module)}", f"function = {_toml_str(function)}",
                      f"before = {q(before) if before else chr(34) * 2}", f"after = {q(after) if after else chr(34) * 2}",
                      'kind = "equivalent"', 'why = ""', ""])


def _toml_str(s: str) -> str:
    if "'" not in s and "\n" not in s:
        return f"'{s}'"  # a literal string: no escapes to get wrong
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pipe_safe
def main(argv: list[str] | None = None) -> int:
    """python -m testbench.mutate.survivors [build/mutate.json]: survivors.toml stubs of the
    report's Python survivors that have neither a test nor an argument yet."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or args[:1] in (["-h"], ["--help"]):
        print("usage: python -m testbench.mutate.survivors [REPORT.json]  (default build/mutate.json)",
              file=sys.stdout if args[:1] in (["-h"], ["--help"]) else sys.stderr)
        return 0 if args[:1] in (["-h"], ["--help"]) else 2
    path = Path(args[0] if args else "build/mutate.json")
    try:
        survivors = json.loads(path.read_text())["survivors"]
    except OSError as e:
        print(f"survivors: cannot read {path}: {e.strerror} (run `make mutate` first)", file=sys.stderr)
        return 2
    except (ValueError, KeyError, TypeError):
        print(f"survivors: {path} is not a mutation report (build/mutate.json from `make mutate`)", file=sys.stderr)
        return 2
    for s in survivors:
        if s["reason"] == "test to add" and s["layer"] == "python":
            print(stub(s["module"], s["function"], s["diff"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
