"""build/mutate.json and the table: scores per module, and every survivor with its reason.

score = killed / (mutants run - equivalent survivors). A survivor listed in
survivors.toml carries its argument ("equivalent: ..." leaves the denominator,
"accepted: ..." stays in it); any other survivor is "test to add".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..pipes import write_whole
from .survivors import Arguments


@dataclass
class Tally:
    mutants: int = 0  # generated (Python) or curated (RTL)
    run: int = 0
    killed: int = 0
    equivalent: int = 0  # survivors argued equivalent
    accepted: int = 0  # survivors argued and accepted
    unargued: int = 0  # survivors with no argument: a test to add
    not_run: int = 0  # chosen but left for lack of time
    skipped: int = 0  # not chosen (sample) or left out (logging), or listed and not run

    @property
    def score(self) -> float | None:
        d = self.run - self.equivalent
        return round(self.killed / d, 4) if d > 0 else None

    def add(self, o: "Tally") -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(o, k))

    def as_dict(self) -> dict:
        return {**{k: getattr(self, k) for k in self.__dataclass_fields__}, "score": self.score}


@dataclass
class Outcome:
    """One mutant's result, whichever layer it comes from."""

    layer: str  # "python" or "rtl"
    module: str
    key: str
    diff: str
    verdict: str  # "killed", "survived", "not run", "skipped"
    detail: str = ""  # how it was killed, or what ran
    function: str = ""


@dataclass
class Report:
    args: Arguments
    outcomes: list[Outcome] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def tallies(self, layer: str | None = None) -> dict[str, Tally]:
        out: dict[str, Tally] = {}
        for o in self.outcomes:
            if layer and o.layer != layer:
                continue
            t = out.setdefault(o.module, Tally())
            t.mutants += 1
            if o.verdict == "skipped":
                t.skipped += 1
            elif o.verdict == "not run":
                t.not_run += 1
            else:
                t.run += 1
                if o.verdict == "killed":
                    t.killed += 1
                else:
                    a = self.args.find(o.key)
                    if a is None:
                        t.unargued += 1
                    elif a.kind == "equivalent":
                        t.equivalent += 1
                    else:
                        t.accepted += 1
        return out

    def total(self, layer: str | None = None) -> Tally:
        t = Tally()
        for x in self.tallies(layer).values():
            t.add(x)
        return t

    def survivors(self) -> list[dict]:
        out = []
        for o in self.outcomes:
            if o.verdict != "survived":
                continue
            a = self.args.find(o.key)
            out.append({"layer": o.layer, "module": o.module, "function": o.function, "key": o.key,
                        "diff": o.diff, "reason": a.reason if a else "test to add"})
        return out

    def stale_arguments(self) -> list[str]:
        """Entries of survivors.toml whose mutant ran and was killed: the argument is wrong now."""
        killed = {o.key for o in self.outcomes if o.verdict == "killed"}
        return sorted(a.key for a in self.args.entries if a.key in killed)

    def unused_arguments(self) -> list[str]:
        """Entries of survivors.toml that match no Python mutant at all (every mutant of the
        modules run is in the outcomes, sampled or not): the code they argue about changed;
        drop or rewrite them. Only the modules run are judged: a --modules run knows nothing
        of the others' mutants."""
        keys = {o.key for o in self.outcomes if o.layer == "python"}
        if not keys:
            return []
        functions = {k.split(": ", 1)[0] for k in keys}
        modules = {o.module for o in self.outcomes if o.layer == "python"}
        return sorted(a.key for a in self.args.entries
                      if a.key.split("::", 1)[0] in modules and a.key not in keys and a.key not in functions)

    def as_dict(self) -> dict:
        layers = sorted({o.layer for o in self.outcomes})
        py, total = self.total("python"), self.total()
        return {
            **self.meta,
            "score": total.score,
            "layers": {layer: self.total(layer).as_dict() for layer in layers},
            "modules": {m: t.as_dict() for layer in layers for m, t in sorted(self.tallies(layer).items())},
            "python_score": py.score,
            "rtl_score": self.total("rtl").score,
            "survivors": self.survivors(),
            "stale_arguments": self.stale_arguments(),
            "unused_arguments": self.unused_arguments(),
        }

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_whole(path, json.dumps(self.as_dict(), indent=1) + "\n")  # (^C or a full disk left half a report)

    def table(self) -> str:
        lines = [f"{'module':34s} {'mutants':>7s} {'run':>5s} {'killed':>6s} {'equiv':>5s} {'accept':>6s} "
                 f"{'todo':>4s} {'left':>4s} {'score':>6s}"]

        def row(name: str, t: Tally) -> str:
            sc = f"{t.score:.3f}" if t.score is not None else "-"
            return (f"{name:34s} {t.mutants:7d} {t.run:5d} {t.killed:6d} {t.equivalent:5d} {t.accepted:6d} "
                    f"{t.unargued:4d} {t.not_run:4d} {sc:>6s}")

        for layer in sorted({o.layer for o in self.outcomes}):
            for m, t in sorted(self.tallies(layer).items()):
                lines.append(row(m, t))
            lines.append(row(f"[{layer}]", self.total(layer)))
        lines.append(row("[overall]", self.total()))
        lines.append("(run: mutants run; equiv/accept: survivors argued in testbench/mutate/survivors.toml; "
                     "todo: survivors without an argument; left: chosen but not run for lack of time)")
        todo = [s for s in self.survivors() if s["reason"] == "test to add"]
        if todo:
            lines.append(f"\nsurvivors with no argument yet ({len(todo)}): a test to add, or an argument")
            for s in todo:
                lines.append(f"  {s['key']}")
        stale = self.stale_arguments()
        if stale:
            lines.append(f"\nargued survivors that were killed (remove them from survivors.toml): {len(stale)}")
            lines += [f"  {k}" for k in stale]
        unused = self.unused_arguments()
        if unused:
            lines.append(f"\narguments that match no mutant any more (the code changed): {len(unused)}")
            lines += [f"  {k}" for k in unused]
        return "\n".join(lines)
