"""The order make test hands work to its xdist workers (tests/conftest.py `longest_first`):
whole work units (an xdist group, or one test), the longest expected first."""

from __future__ import annotations

import pytest

from . import conftest


class _Item:
    def __init__(self, nodeid, group=None, simulator=None):
        self.nodeid = nodeid
        self._marks = [pytest.mark.xdist_group(group).mark] if group else []
        if simulator:
            self.callspec = type("C", (), {"params": {"simulator": simulator}})()

    def iter_markers(self, name):
        return iter(self._marks if name == "xdist_group" else [])


def test_units_stay_whole_and_go_longest_first(monkeypatch):
    monkeypatch.setattr(conftest, "_known_durations", lambda: {"a": 1.0, "g1": 30.0, "g2": 0.5, "h1": 2.0,
                                                                  "h2": 2.5, "z": 9.0})
    items = [_Item("a"), _Item("g1", "shard"), _Item("h1", "other"), _Item("z"), _Item("g2", "shard"),
             _Item("h2", "other"), _Item("new-icarus", simulator="icarus"), _Item("new-model")]
    got = [i.nodeid for i in conftest.longest_first(items)]
    # the group "shard" (30.5 s) whole and first, its tests in their order; then z 9, the
    # unknown Icarus test (guessed 5), the group "other" (4.5), a (1), the unknown model test
    assert got == ["g1", "g2", "z", "new-icarus", "h1", "h2", "a", "new-model"]


def test_this_run_is_in_that_order(request):
    """Under make test's `--dist loadgroup` the collection is in longest_first's order (and
    xdist keeps it: `--no-loadscope-reorder` in the Makefile)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("only on a worker of --dist loadgroup (make test)")
    assert request.config.getoption("loadscopereorder") is False, "make test must pass --no-loadscope-reorder"
    items = request.session.items
    assert [i.nodeid for i in conftest.longest_first(items)] == [i.nodeid for i in items]
