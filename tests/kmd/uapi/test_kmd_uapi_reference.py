"""docs/uapi.md, the KMD's uAPI as a page (kmd_model/uapidoc.py, written by `make gen` from
kmd_model/uapi.py): each request with the structure it takes and the one it answers, every
structure's fields with their comments, every enum. What each request answers
(`uapi.OUT`) is checked against the driver itself, request by request. (The page being up
to date is tests/spec/test_generated.py's.)"""

from __future__ import annotations

import ast
import dataclasses
import enum
import re
from pathlib import Path

import pytest

import kmd_model
from kmd_model import uapi, uapidoc
from kmd_model.uapi import CtxOp, InfoQuery, Request, VaOp
from spec import pm4
from spec.gen import generate
from testbench.refmodel import RefModel

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "uapi.md").read_text()


def _section(name: str) -> str:
    return PAGE.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]


def test_every_request_is_in_the_table_with_what_it_takes_and_answers():
    table = PAGE.split("## Requests\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `(0x[0-9a-f]+)` \| ", table, re.M)
    assert rows == [(r.name, f"{r.value:#04x}") for r in Request]
    for r in Request:
        row = PAGE.split(f"| `{r.name}` | `{r.value:#04x}` | ", 1)[1].split("\n", 1)[0]
        assert f"[`{uapi.ARGS[r].__name__}`]" in row, row
        if r is Request.INFO:
            assert all(f"{q.name} `{c.__name__}`" in row for q, c in uapi.INFO_OUT.items()), row
        else:
            assert (f"[`{uapi.OUT[r].__name__}`]" if uapi.OUT[r] else "nothing (None)") in row, row


def test_what_each_request_answers_is_what_the_page_says():
    """uapi.OUT (and INFO_OUT) against the driver: one valid call of each request on the
    model, whose answer is of the class the page names (None for GEM_CLOSE and GEM_VA)."""
    kmd_model.bind(RefModel())
    f = kmd_model.open_render_node()
    got = {}

    def io(req, args):
        out = f.ioctl(req, args)
        got.setdefault(req, []).append(out)
        return out

    info = io(Request.INFO, uapi.InfoArgs(InfoQuery.DEV_INFO))
    h = io(Request.GEM_CREATE, uapi.GemCreateArgs(0x1000)).handle
    view = io(Request.GEM_MMAP, uapi.GemMmapArgs(h)).view.view("<u4")
    va = info.va_start
    rwx = uapi.VmFlags.READABLE | uapi.VmFlags.WRITEABLE | uapi.VmFlags.EXECUTABLE
    io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.MAP, va, 0, 0x1000, rwx))
    ctx = io(Request.CTX, uapi.CtxArgs(CtxOp.ALLOC)).ctx_id
    view[:8] = pm4.pad(8)
    seq = io(Request.CS, uapi.CsArgs(ctx, [uapi.CsChunkIb(8, handle=h)])).seq
    io(Request.WAIT_CS, uapi.WaitCsArgs(ctx, seq, 200_000))
    io(Request.GEM_WAIT_IDLE, uapi.GemWaitIdleArgs(h, 200_000))
    io(Request.CTX, uapi.CtxArgs(CtxOp.QUERY_STATE, ctx))
    io(Request.GEM_VA, uapi.GemVaArgs(h, VaOp.UNMAP, va, 0, 0x1000))
    io(Request.GEM_CLOSE, uapi.GemCloseArgs(h))
    assert set(got) == set(Request) - {Request.INFO} | {Request.INFO}
    for req, outs in got.items():
        if req is Request.INFO:
            continue
        want = uapi.OUT[req]
        assert all((o is None) if want is None else type(o) is want for o in outs), (req, outs)
    for q, cls in uapi.INFO_OUT.items():
        assert type(f.ioctl(Request.INFO, uapi.InfoArgs(q))) is cls, q
    f.close()


@pytest.mark.parametrize("cls", [c for c in vars(uapi).values() if isinstance(c, type) and c.__module__ == uapi.__name__
                                 and dataclasses.is_dataclass(c)], ids=lambda c: c.__name__)
def test_every_field_of_every_structure_has_its_row(cls):
    rows = re.findall(r"^\| `(\w+)` \| `([^`]+)` \| ", _section(cls.__name__), re.M)
    assert [n for n, _ in rows] == [f.name for f in dataclasses.fields(cls)]
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    assert all(t == hints[n] for n, t in rows), rows


@pytest.mark.parametrize("cls", [c for c in vars(uapi).values() if isinstance(c, type) and c.__module__ == uapi.__name__
                                 and issubclass(c, enum.Enum) and c is not Request], ids=lambda c: c.__name__)
def test_every_value_of_every_enum_has_its_row(cls):
    rows = re.findall(r"^\| `(\w+)` \| `(-?(?:0x)?[0-9a-f]+)` \| ", _section(cls.__name__), re.M)
    assert {n: int(v, 0) for n, v in rows} == {m.name: int(m.value) for m in cls}


def test_a_comment_belongs_to_the_field_it_describes():
    """A field's meaning is its comment: the one on its line, the lines that go on with it,
    and a block right above a field with no comment of its own."""
    src = ("class C:\n"
           "    a: int = 0  # starts here (and goes on\n"
           "    # to this line)\n"
           "    # and this one, a field with its own comment following\n"
           "    b: int = 0  # b's own\n"
           "    # what c is, above it\n"
           "    c: int = 0\n"
           "    d: int = 0  # d's own, then a block before a blank line\n"
           "    # still d's\n"
           "\n"
           "    e: int = 0\n")
    lines = src.splitlines(keepends=True)
    comments = uapidoc._comments(src)
    body = ast.parse(src).body[0].body
    used: set[int] = set()
    got, prev = [], 1
    for s in body:
        got.append(uapidoc._meaning(lines, comments, s, prev, used))
        prev = s.end_lineno
    assert got == ["starts here (and goes on to this line) and this one, a field with its own comment following",
                   "b's own", "what c is, above it", "d's own, then a block before a blank line still d's", ""]
    assert "| `error` | `HwErrorInfo | None` | `None` | what made it guilty" in PAGE.replace("\\|", "|")
    assert "(every ring's first step: gfx, gfx_high, sdma0)" in _section("ResetStatus").split("`INNOCENT`")[0]


def test_a_request_the_page_cannot_place_is_refused(monkeypatch):
    monkeypatch.delitem(uapi.OUT, Request.GEM_VA)
    with pytest.raises(ValueError, match=r"^docs/uapi\.md: request GEM_VA says nothing of what it answers: uapi\.OUT$"):
        generate.render_uapi_md()
    monkeypatch.setitem(uapi.OUT, Request.GEM_VA, None)
    monkeypatch.delitem(uapi.ARGS, Request.CS)
    with pytest.raises(ValueError, match=r"^docs/uapi\.md: request CS has no argument structure in uapi\.ARGS$"):
        generate.render_uapi_md()
