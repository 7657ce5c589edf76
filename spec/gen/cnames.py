"""The names a generated C header defines, each with what it names and the spec it comes
from, so that a spec which would make one name say two things is refused (one line, which
`python -m spec.gen.generate` turns into exit status 2): a name defined twice, or a field's
prefix (of its _SHIFT, _MASK ... macros) that is also a name of its own. A driver includes
both headers (gpucosim_regs.h, gpucosim_packets.h), so the packets header's names start from
the registers header's (`CNames(..., after=regs_names)`): their names share one namespace."""

from __future__ import annotations


class CNames:
    def __init__(self, label: str = "C header", src: str = "spec/regs.rdl", width: int = 40,
                 after: "CNames | None" = None):
        self.label, self.src, self.width = label, src, width  # (the messages' header, a name's spec, the alignment)
        self.what: dict[str, tuple[str, str]] = dict(after.what) if after else {}  # name -> (what, source)
        # (prefix, field, source): every field's prefix, the other header's too
        self.fields: list[tuple[str, str, str]] = list(after.fields) if after else []

    def add(self, name: str, what: str, src: str | None = None) -> None:
        """Take `name` (a function-like macro's without its arguments) for `what`."""
        name, src = name.split("(")[0], src or self.src
        if name in self.what:
            raise ValueError(f"{self.label}: {name} would name both {self.what[name][0]} and {what}; "
                             f"rename one in {self._where(self.what[name][1], src)}")
        self.what[name] = (what, src)

    def define(self, name: str, value: str, what: str, comment: str = "", src: str | None = None) -> str:
        """`#define name value /* comment */`, aligned, `name` taken for `what` (from `src`)."""
        self.add(name, what, src)
        line = f"#define {name:<{self.width}} {value}"
        return f"{line}  /* {comment} */" if comment else line

    def field(self, prefix: str, field: str, src: str | None = None) -> None:
        """`prefix` begins field `field`'s macros: no name may be exactly it (check())."""
        self.fields.append((prefix, field, src or self.src))

    def check(self) -> None:
        """Once every name is in: no field's prefix is itself a name."""
        for prefix, field, src in self.fields:
            if prefix in self.what:
                what, other = self.what[prefix]
                raise ValueError(f"{self.label}: {prefix} would be both {what} and the prefix of field {field}'s "
                                 f"macros ({prefix}_SHIFT ...); rename one in {self._where(other, src)}")

    @staticmethod
    def _where(a: str, b: str) -> str:
        return a if a == b else f"{a} or {b}"
