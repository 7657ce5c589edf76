"""What spec/pm4.py and spec/sdma/codec.py share in turning their packet tables into Python
at import time: the generated source compiled and run in the module's namespace, and an
IntEnum for each field whose values the table lists."""

from __future__ import annotations

import enum


def run_generated(lines: list[str], origin: str, ns: dict) -> str:
    """Compile and run the generated `lines` in the namespace `ns` (a module's globals);
    the source, for the module to keep where a reader can print it."""
    text = "\n".join(lines)
    exec(compile(text, f"<{origin} generated>", "exec"), ns)
    return text


def field_enums(packets, ns: dict, names: list, doc_prefix: str = "") -> None:
    """An IntEnum `PACKET_FIELD` for each field with listed values, put into the module's
    namespace `ns` and its `__all__` (`names`)."""
    for p in packets:
        for f in p.fields:
            if f.enum:
                cls = enum.IntEnum(f"{p.name}_{f.name}", [(e.name, e.value) for e in f.enum], module=ns["__name__"])
                cls.__doc__ = f"{doc_prefix}{p.name}.{f.name}{f.span}: {f.doc}"
                ns[cls.__name__] = cls
                names.append(cls.__name__)
