"""docs/api.md, the UMD's API reference (umd/apidoc.py, written by `make gen`): every call an
app makes, in every API version, and every attribute of what it holds, is on the page,
from the docstring help() shows; a call or attribute without one is refused, so none
ships undocumented. (The page being up to date is tests/spec/test_generated.py's.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import umd
from spec.gen import generate
from umd import apidoc, events

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "api.md").read_text()


def _sections(page: str) -> set[str]:
    return set(re.findall(r"^#+ `([^`]+)`", page, re.M))


def _attribute_rows(page: str, cls: str) -> set[str]:
    block = page.split(f"### `{cls}`'s attributes\n", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"^\| `(\w+)` \|", block, re.M))


def test_every_call_of_every_version_has_its_section():
    """(The calls are the dispatch tables', not the classes' methods: help(umd.Queue) once
    listed none of them.)"""
    keys = {k for t in umd.TABLES.values() for k in t.entries}
    assert len(keys) >= 19
    missing = keys - _sections(PAGE)
    assert not missing, f"calls not on docs/api.md: {sorted(missing)}"
    for name in ("umd.open", "Event.wait", "Event.signalled", "Buffer.map", "Buffer.free", "Queue.seq_done"):
        assert name in _sections(PAGE)


@pytest.mark.parametrize("cls", [umd.Device, umd.Queue, umd.Buffer, umd.Event, umd.Timestamp])
def test_every_attribute_an_app_reads_is_in_its_table(cls):
    own = {n for c in cls.__mro__ if c.__module__.startswith("umd.") for n, v in vars(c).items()
           if isinstance(v, property) and not n.startswith("_")}
    if cls is umd.Timestamp:  # (its table holds what it adds or changes; the Event's are Event's)
        own = {n for n, v in vars(cls).items() if isinstance(v, property) and not n.startswith("_")}
    assert own, cls
    assert _attribute_rows(PAGE, cls.__name__) == own


def test_every_error_and_value_of_umd_is_on_the_page():
    for name in umd.__all__:
        assert f"`{name}`" in PAGE or f"`umd.{name}`" in PAGE, name
    for err in (umd.GpuError, umd.QueueBanned, umd.OutOfMemory):
        assert f"### `{err.__name__}` ({', '.join(b.__name__ for b in err.__bases__)})" in PAGE
    assert f"| `umd.DEFAULT_TIMEOUT` | `{umd.DEFAULT_TIMEOUT}`:" in PAGE


def test_each_version_shows_the_signature_it_serves():
    """Device.queue takes engine= from version 2 and async_submit= in version 3: each
    version's own function, with the versions it serves; none of the UMD's own arguments
    (`_owner`, `_call`) or the catch-all that names a later version's keywords."""
    queue = PAGE.split("### `Device.queue`\n", 1)[1].split("\n### ", 1)[0]
    sigs = re.findall(r"```python\n(.*)\n```\n\n\*([^*]+)\.\*", queue)
    assert [v for _, v in sigs] == ["API version 1", "API version 2", "API version 3"]
    assert "engine" not in sigs[0][0] and "engine: str = 'gfx'" in sigs[1][0] and "async_submit" in sigs[2][0]
    assert not re.search(r"\b_\w+[:=]|\*\*(later|v3)\b", PAGE)
    assert "Buffer.map() -> ndarray" in PAGE or "Buffer.map() -> np.ndarray" in PAGE
    fill = PAGE.split("### `Queue.fill`\n", 1)[1].split("\n### ", 1)[0]
    assert "*API version 2 on.* (memset) fill `size` bytes" in fill


def test_a_comparison_in_a_docstring_is_text_not_an_html_tag():
    """Queue.wait_mem's "(dword & mask) <compare> ref": Markdown took <compare> for a tag
    and showed nothing."""
    assert "&lt;compare> ref" in PAGE and "<compare>" not in PAGE
    assert apidoc._md("a <b> `x <y>` c\n# not a heading\n> nor a quote") == \
        "a &lt;b> `x <y>` c\n\\# not a heading\n\\> nor a quote"


def test_a_call_without_a_docstring_is_refused(monkeypatch):
    def queue_frobnicate(self, n: int) -> None:
        pass
    t = umd.TABLES[umd.LATEST]
    monkeypatch.setitem(t.entries, "Queue.frobnicate", queue_frobnicate)
    with pytest.raises(ValueError, match=r"^docs/api\.md: Queue\.frobnicate has no docstring: say what it does"):
        generate.render_api_md()
    queue_frobnicate.__doc__ = "Frobnicate `n` times."
    assert "### `Queue.frobnicate`\n\n```python\nQueue.frobnicate(n: int) -> None\n```\n\n" \
           f"*API version {umd.LATEST}.* Frobnicate `n` times." in generate.render_api_md()


def test_an_attribute_without_a_docstring_is_refused(monkeypatch):
    monkeypatch.setattr(events.Event, "colour", property(lambda self: "red"), raising=False)
    with pytest.raises(ValueError, match=r"^docs/api\.md: Event\.colour has no docstring"):
        generate.render_api_md()


def test_the_mutation_campaigns_copies_of_a_method_are_not_the_classs(monkeypatch):
    """mutmut puts its copies of each method it mutates on the class, without a docstring
    (`xǁBufferǁfree__mutmut_1`): the page refused them, and with it every campaign that
    mutated a UMD class's module failed its coverage pass (make mutate)."""
    def copy(self):
        pass
    for name in ("x\u01c1Buffer\u01c1free__mutmut_1", "x\u01c1Buffer\u01c1free__mutmut_orig"):
        monkeypatch.setattr(umd.Buffer, name, copy, raising=False)
    page = generate.render_api_md()
    assert "mutmut" not in page and "### `Buffer.free`" in page


def test_a_new_name_of_umd_must_reach_the_page(monkeypatch):
    monkeypatch.setattr(umd, "__all__", [*umd.__all__, "Frobnicator"])
    with pytest.raises(ValueError, match=r"^docs/api\.md: umd\.Frobnicator is in umd\.__all__ but not on the page"):
        generate.render_api_md()


def test_make_gen_says_an_undocumented_call_in_one_line(tmp_path):
    """The generator's own run (--check: it would write nothing either way): exit 2, one line
    naming the call."""
    code = ("import sys, umd\n"
            "umd.TABLES[umd.LATEST].entries['Device.frob'] = lambda self: None\n"
            "from spec.gen import generate\n"
            "sys.exit(generate.main(['--check']))\n")
    before = (ROOT / "docs" / "api.md").read_text()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == ["python -m spec.gen.generate: error: docs/api.md: Device.frob has no "
                                     "docstring: say what it does and takes (umd/apidoc.py)"]
    assert r.stdout == "" and (ROOT / "docs" / "api.md").read_text() == before
