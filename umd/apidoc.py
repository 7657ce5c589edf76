"""docs/api.md, the UMD's API reference, from the UMD's own docstrings (`make gen` writes it,
spec/gen/generate.py; tests/spec/test_generated.py fails when it is stale).

It lists every entry point of every API version's dispatch table (umd/api.py), with the
versions that have it, and every public attribute and method of the objects an app holds:
the Device, its Queues, Buffers, Events and Timestamps, the errors. The text is the
docstrings', so help() and the page say the same thing; an entry point, attribute or
method without one is refused (ValueError naming it), so a new call cannot ship without
its documentation.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

from . import api, args, errors, events, memory
from . import runtime as rt
from .queue import Queue

# The objects an app holds, in the order the page shows them (Device and Queue: their
# entry points come from the dispatch tables, not the class).
CLASSES = (rt.Device, Queue, memory.Buffer, events.Event, events.Timestamp)
ERRORS = (errors.UmdError, errors.GpuError, errors.GpuTimeout, errors.SubmitError, errors.OutOfMemory,
          errors.DeviceLost, errors.QueueBanned, errors.NotPermitted)
# umd's module-level values: what each is (they have no docstring of their own)
CONSTANTS = {
    "LATEST": "the newest API version: what `umd.open()` opens without `api_version`",
    "DEFAULT_TIMEOUT": "GPU cycles every wait waits unless told otherwise (`Event.wait`, `Queue.finish`, "
                       "`Queue.download`, `Queue.timeout`, `Queue.close`)",
    "TABLES": "each API version's `DispatchTable`, by version",
}
# A `**keywords` of an entry point that only catches a later version's keywords, to name
# them in its TypeError (umd/queue/create.py): not something the call takes.
LATER_KEYWORDS = {"later", "v3"}


def _doc(obj: Any, name: str) -> str:
    d = inspect.cleandoc(obj) if isinstance(obj, str) else inspect.getdoc(obj)
    if not d or not d.strip():
        raise ValueError(f"docs/api.md: {name} has no docstring: say what it does and takes (umd/apidoc.py)")
    return d.strip()


def _md(text: str) -> str:
    """A docstring as Markdown: `<` outside code spans is text, not an HTML tag ("<compare>"
    vanished), and a line is no heading or quote by accident."""
    out = []
    for line in text.splitlines():
        parts = line.split("`")
        parts[::2] = [p.replace("<", "&lt;") for p in parts[::2]]  # (the even parts are outside `...`)
        line = "`".join(parts)
        if re.match(r"\s{0,3}(#|>)", line):
            line = "\\" + line.lstrip()
        out.append(line)
    return "\n".join(out)


def _ann(a: Any) -> str:
    s = a if isinstance(a, str) else getattr(a, "__name__", str(a))
    while len(s) > 1 and s[0] == s[-1] and s[0] in "'\"":  # ("'Buffer'": a string annotation quoted again)
        s = s[1:-1]
    return re.sub(r"\b(rt|np)\.(?=[A-Z])", "", s)


def signature(fn: Callable, shown: str, method: bool = True) -> str:
    """`shown(args) -> result`, as an app calls it: no self, none of the UMD's own (`_call`,
    `_owner`) and no catch-all of later versions' keywords."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())[1 if method else 0:]
    out, star = [], False
    for p in params:
        if p.name.startswith("_") or (p.kind is p.VAR_KEYWORD and p.name in LATER_KEYWORDS):
            continue
        if p.kind is p.KEYWORD_ONLY and not star:
            out.append("*")
            star = True
        text = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "") + p.name
        star = star or p.kind is p.VAR_POSITIONAL
        if p.annotation is not p.empty:
            text += f": {_ann(p.annotation)}"
        if p.default is not p.empty:
            text += (" = " if p.annotation is not p.empty else "=") + repr(p.default)
        out.append(text)
    ret = f" -> {_ann(sig.return_annotation)}" if sig.return_annotation is not sig.empty else ""
    return f"{shown}({', '.join(out)}){ret}"


def _versions(vs: list[int]) -> str:
    every = sorted(api.TABLES)
    if vs == every:
        return "every API version"
    if vs == every[every.index(vs[0]):]:
        return f"API version {vs[0]} on" if len(vs) > 1 else f"API version {vs[0]}"
    return "API version" + ("s " if len(vs) > 1 else " ") + ", ".join(map(str, vs))


def _entry_points(kind: str) -> list[str]:
    """Each entry point of `kind` (Device, Queue), as the tables serve it: one section per
    function behind it, with the versions it serves."""
    keys: list[str] = []
    for t in api.TABLES.values():
        keys += [k for k in t.entries if k.startswith(kind + ".") and k not in keys]
    lines = []
    for key in keys:
        served: list[tuple[Callable, list[int]]] = []
        for v, t in api.TABLES.items():
            fn = t.entries.get(key)
            if fn is None:
                continue
            for f, vs in served:
                if f is fn:
                    vs.append(v)
                    break
            else:
                served.append((fn, [v]))
        lines.append(f"### `{key}`\n")
        for fn, vs in served:
            lines.append(f"```python\n{signature(fn, key)}\n```\n")
            # ("API v2 (memset): ..." says the version the line before says: the alias stays)
            text = re.sub(r"^API v\d+(?: \(([^)]*)\))?: ", lambda m: f"({m.group(1)}) " if m.group(1) else "",
                          _doc(fn, key))
            lines.append(f"*{_versions(vs)}.* " + _md(text[:1].upper() + text[1:]) + "\n")
    return lines


MUTMUT_MARK = "\u01c1"  # (ǁ: mutmut names its copies x<mark><class><mark><method>__mutmut_<n>)


def _members(cls: type, own_only: bool) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """(attributes, methods) an app reads or calls on `cls`: public properties and functions
    of the class and of its UMD bases (a Timestamp's are its own: it says it is an Event); the
    errors' module is `umd` itself (umd/errors.py names them so)."""
    chain = [cls] if own_only else [c for c in cls.__mro__ if c.__module__.split(".")[0] == "umd"]
    attrs: dict[str, Any] = {}
    methods: dict[str, Any] = {}
    for c in reversed(chain):
        for name, v in vars(c).items():
            # (mutmut's copies of a method, `xǁBufferǁfree__mutmut_1`, are the mutation
            # campaign's, not the class's: listed, every class it mutated failed its coverage pass)
            if name.startswith("_") or MUTMUT_MARK in name:
                continue
            if isinstance(v, property):
                attrs[name] = v
                methods.pop(name, None)
            elif inspect.isfunction(v):
                methods[name] = v
                attrs.pop(name, None)
    return sorted(attrs.items()), sorted(methods.items())


def _class(cls: type) -> list[str]:
    name = cls.__name__
    lines = [f"## `{name}`\n", _md(_doc(getattr(cls, "_own_doc", None) or cls, name)) + "\n"]
    sub = cls is events.Timestamp
    if sub:
        lines.append("A Timestamp is an Event (`wait()`, `signalled()` and the Event's attributes are its "
                     "too); what it has of its own, or otherwise:\n")
    if isinstance(getattr(cls, "_kind", None), str) and cls._kind:
        lines.append(f"Its calls are its API version's (`{name}`'s entry points in the version's "
                     f"`DispatchTable`): an older version has fewer, and a call it lacks is an "
                     f"AttributeError naming the version that has it.\n")
        lines += _entry_points(cls._kind)
    attrs, methods = _members(cls, own_only=sub)
    for m, fn in methods:
        lines.append(f"### `{name}.{m}`\n")
        lines.append(f"```python\n{signature(fn, f'{name}.{m}')}\n```\n")
        lines.append(_md(_doc(fn, f"{name}.{m}")) + "\n")
    if attrs:
        lines.append(f"### `{name}`'s attributes\n")
        lines.append("| attribute | what it is |\n|---|---|")
        for a, prop in attrs:
            text = " ".join(_md(_doc(prop, f"{name}.{a}")).split()).replace("|", "\\|")
            lines.append(f"| `{a}` | {text} |")
        lines.append("")
    if "__exit__" in vars(cls):
        lines.append("### `with`\n\n" + _md(_doc(vars(cls)["__exit__"], f"{name}.__exit__")) + "\n")
    return lines


def render(header: str) -> str:
    """docs/api.md's text; `header` the generated files' line (spec/gen/generate.py)."""
    import umd

    lines = [f"<!-- {header} -->\n", "# The UMD's API\n",
             "Every call an application makes on the user-mode driver, as `help()` shows it: the text "
             "is the UMD's own docstrings (umd/apidoc.py). The rules every call holds to (its waits' "
             "`timeout`, its mistakes' errors, empty transfers, closed objects) are in "
             "[architecture.md](architecture.md#the-umds-api-rules); "
             "[tutorial.md](tutorial.md) follows one request through every layer.\n",
             "An app names the API version it was written for, `umd.open(api_version=N)` (the newest "
             "without it), and gets that version's calls and defaults, whatever later versions change "
             "(umd/api.py):\n",
             "| version | flush threshold (commands) | what it changed | its new or changed calls |",
             "|---|---|---|---|"]
    prev: dict[str, Callable] = {}
    for v, t in api.TABLES.items():
        changed = [k for k, fn in t.entries.items() if prev.get(k) is not fn]
        shown = ", ".join(f"`{k}`" for k in changed) if prev else "the first: " + ", ".join(f"`{k}`" for k in changed)
        what = " ".join(_md(t.notes).split()).replace("|", "\\|")
        lines.append(f"| {v} | {t.flush_threshold} | {what} | {shown} |")
        prev = t.entries
    lines.append("")
    lines.append("## `umd`\n")
    lines.append("### `umd.open`\n")
    lines.append(f"```python\n{signature(umd.open, 'umd.open', method=False)}\n```\n")
    lines.append(_md(_doc(umd.open, "umd.open")) + "\n")
    lines.append("| value | what it is |\n|---|---|")
    for c, what in CONSTANTS.items():
        v = getattr(umd, c)
        shown = f"`{v!r}`" if isinstance(v, int) else f"versions {', '.join(map(str, v))}"
        lines.append(f"| `umd.{c}` | {shown}: {what} |")
    assert args.DEFAULT_TIMEOUT == umd.DEFAULT_TIMEOUT
    lines.append("")
    for cls in CLASSES:
        lines += _class(cls)
    lines.append("## Errors\n")
    lines.append("What the UMD raises for what went wrong on the GPU or in the kernel (an app's own mistake "
                 "in a call's arguments is Python's TypeError or ValueError naming the call). Each "
                 "pickles with its message and attributes, so a worker process can hand it back, and a "
                 "traceback names it as an app imports it (`umd.GpuError: ...`).\n")
    for e in ERRORS:
        bases = ", ".join(b.__name__ for b in e.__bases__)
        lines.append(f"### `{e.__name__}` ({bases})\n")
        lines.append(_md(_doc(e, e.__name__)) + "\n")
    lines += _class(api.DispatchTable)[:2]
    missing = set(umd.__all__) - {c.__name__ for c in CLASSES + ERRORS} - set(CONSTANTS) - {"open", "DispatchTable"}
    if missing:
        raise ValueError(f"docs/api.md: umd.{sorted(missing)[0]} is in umd.__all__ but not on the page (umd/apidoc.py)")
    return "\n".join(lines).rstrip() + "\n"
