"""docs/uapi.md, the KMD's user API as a page, from kmd_model/uapi.py itself (`make gen`
writes it, spec/gen/generate.py; tests/spec/test_generated.py fails when it is stale).

uapi.py plays amdgpu_drm.h's part: its docstrings and its comments are the contract (what
each field means, which errno a mistake gets). The page shows them without the Python:
each request with its number, the structure it takes and the one it returns; each
structure's fields with their types, defaults and comments; each enum's values. The
source is read with `ast` and `tokenize` (a field's meaning is its comment: a class has no
per-field docstrings), so the page says what the header says, word for word. A structure,
enum or request the page cannot place (no docstring or comment on a structure, a request
with no argument structure) is refused (ValueError naming it).
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import io
import re
import tokenize
from pathlib import Path

from . import uapi

SOURCE = Path(uapi.__file__)


def _comments(text: str) -> dict[int, str]:
    """Line number -> the comment on it (without '#')."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string[1:].strip()
    return out


def _meaning(lines: list[str], comments: dict[int, str], node: ast.stmt, prev_end: int, used: set[int]) -> str:
    """A field's or member's comment: the comment-only lines right above it that the
    statement before did not take, the one on its own line(s), and the comment-only lines
    after that continue it: all of them, unless they lead a statement of the block with no
    comment of its own, which then takes them (but for those a parenthesis left open
    needs)."""
    def comment_only(n: int) -> bool:
        return n in comments and lines[n - 1].lstrip().startswith("#")
    parts = [comments[n] for n in range(prev_end + 1, node.lineno) if comment_only(n) and n not in used]
    parts += [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
    if node.end_lineno in comments:
        block = []
        n = node.end_lineno + 1
        while n <= len(lines) and comment_only(n):
            block.append(n)
            n += 1
        after = lines[n - 1] if n <= len(lines) else ""
        indent = len(lines[node.lineno - 1]) - len(lines[node.lineno - 1].lstrip())
        # (a block right above a statement of the block that has no comment of its own is its
        # comment; above one with its own, it goes on with this one's, as ResetStatus.GUILTY's)
        leads_next = after.strip() and len(after) - len(after.lstrip()) == indent and n not in comments
        text = " ".join(parts)
        for b in block:
            if leads_next and text.count("(") <= text.count(")"):
                break
            text += " " + comments[b]
            parts.append(comments[b])
            used.add(b)
    return " ".join(parts)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|").replace("<", "&lt;")


def _md(text: str) -> str:
    out = []
    for line in text.splitlines():
        parts = line.split("`")
        parts[::2] = [p.replace("<", "&lt;") for p in parts[::2]]
        out.append("`".join(parts))
    return "\n".join(out)


def _class_section(cls: type, node: ast.ClassDef, lines: list[str], comments: dict[int, str]) -> list[str]:
    doc = ast.get_docstring(node)
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    out = [f"### `{cls.__name__}`\n"]
    if doc:
        out.append(_md(doc) + "\n")
    if dataclasses.is_dataclass(cls):
        rows, prev, used = [], node.body[0].end_lineno if doc else node.lineno, set()
        for s in body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                f = {f.name: f for f in dataclasses.fields(cls)}[s.target.id]
                if f.default is not dataclasses.MISSING:
                    d = f.default
                    default = f"`{d.name}`" if isinstance(d, enum.Enum) and d.name else f"`{d!r}`"
                    if isinstance(d, enum.Flag) and not isinstance(d, bool):
                        default = f"`{ast.get_source_segment(''.join(lines), s.value)}`"
                elif f.default_factory is not dataclasses.MISSING:
                    default = f"`{ast.get_source_segment(''.join(lines), s.value)}`".replace(
                        "`field(default_factory=list)`", "`[]`").replace("`field(default_factory=dict)`", "`{}`")
                else:
                    default = "(required)"
                ann = ast.get_source_segment("".join(lines), s.annotation)
                rows.append(f"| `{f.name}` | `{ann}` | {default} | {_cell(_meaning(lines, comments, s, prev, used))} |")
            prev = s.end_lineno
        if not doc and not any(r.rstrip(" |").rsplit("|", 1)[1].strip() for r in rows):
            raise ValueError(f"docs/uapi.md: {cls.__name__} has no docstring and no field says what it is "
                             "(kmd_model/uapi.py)")
        out += ["| field | type | default | what it is |", "|---|---|---|---|", *rows, ""]
    elif issubclass(cls, enum.Enum):
        rows, prev, used = [], node.body[0].end_lineno if doc else node.lineno, set()
        for s in body:
            if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
                m = cls[s.targets[0].id]
                v = m.value
                shown = f"`{v:#x}`" if issubclass(cls, enum.Flag) or cls is uapi.Request or cls is uapi.InfoQuery else f"`{v}`"
                rows.append(f"| `{m.name}` | {shown} | {_cell(_meaning(lines, comments, s, prev, used))} |")
            prev = s.end_lineno
        out += ["| name | value | what it is |", "|---|---|---|", *rows, ""]
    return out


def render(header: str) -> str:
    """docs/uapi.md's text; `header` the generated files' line (spec/gen/generate.py)."""
    text = SOURCE.read_text()
    lines = text.splitlines(keepends=True)
    comments = _comments(text)
    tree = ast.parse(text)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    # the header's sections, by its "# ---- NAME" lines
    sections = [(n, comments[n].strip("- ").strip()) for n in sorted(comments)
                if re.fullmatch(r"-{20,} \w+", comments[n])]
    doc = ast.get_docstring(tree) or ""
    title, _, rest = doc.partition("\n\n")
    out = [f"<!-- {header} -->\n", "# The KMD's uAPI\n",
           f"{_md(title)} This page is kmd_model/uapi.py's docstrings and comments, word for word, "
           "without the Python: a UMD includes the module (`from kmd_model import uapi`) and calls "
           "`file.ioctl(request, args)` on a file `kmd_model.open_render_node()` opened; what a request "
           "answers comes back, a refusal is raised as `uapi.KmdError` (errno and a one-line message).\n",
           _md(rest) + "\n",
           f"Driver: `{uapi.KMD_NAME}`, version `{'.'.join(map(str, uapi.KMD_VERSION))}` (INFO FW_VERSION's "
           "`kmd_version`): the major version goes up when a request changes, the minor one when requests or "
           "flags are added.\n",
           "## Requests\n",
           "| request | number | takes | answers |", "|---|---|---|---|"]
    for r in uapi.Request:
        if r not in uapi.ARGS:
            raise ValueError(f"docs/uapi.md: request {r.name} has no argument structure in uapi.ARGS")
        if r is uapi.Request.INFO:
            answer = "by `query`: " + ", ".join(f"{q.name} `{c.__name__}`" for q, c in uapi.INFO_OUT.items())
        elif r not in uapi.OUT:
            raise ValueError(f"docs/uapi.md: request {r.name} says nothing of what it answers: uapi.OUT")
        else:
            answer = f"[`{uapi.OUT[r].__name__}`](#{uapi.OUT[r].__name__.lower()})" if uapi.OUT[r] else "nothing (None)"
        args = uapi.ARGS[r].__name__
        out.append(f"| `{r.name}` | `{r.value:#04x}` | [`{args}`](#{args.lower()}) | {answer} |")
    out.append("")
    shown = set()
    bounds = [n for n, _ in sections] + [len(lines) + 1]
    for i, (line, name) in enumerate(sections):
        out.append(f"## {name[:1].upper() + name[1:]}\n")
        for cname, node in classes.items():
            if bounds[i] < node.lineno < bounds[i + 1]:
                out += _class_section(getattr(uapi, cname), node, lines, comments)
                shown.add(cname)
    out.append("## The other structures\n")
    for cname, node in classes.items():
        if cname not in shown and cname != "Request":  # (the table of requests above)
            out += _class_section(getattr(uapi, cname), node, lines, comments)
    return "\n".join(out).rstrip() + "\n"
