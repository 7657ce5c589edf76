"""The order make test hands work to its xdist workers (tests/conftest.py `longest_first`):
whole work units (an xdist group, or one test), the longest expected first."""

from __future__ import annotations

import pytest

from tests import conftest


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


def test_a_short_test_left_out_of_the_durations_is_not_guessed_long(monkeypatch):
    """tests/durations.json keeps only the tests of 0.3 s or more: a test it leaves out of a
    file it measured is short, not an unknown Icarus test (5 s). Guessed at 5 s, the 65
    one-check tests of an Icarus session group made it look like 5 minutes and go first."""
    monkeypatch.setattr(conftest, "_known_durations", lambda: {"tests/t_a.py::long": 6.0, "tests/t_b.py::x": 1.0})
    items = [_Item(f"tests/t_a.py::short{k}", "icarus_group-icarus", simulator="icarus") for k in range(12)]
    items += [_Item("tests/t_b.py::x"), _Item("tests/t_a.py::long")]
    got = [i.nodeid for i in conftest.longest_first(items)]
    assert got[0] == "tests/t_a.py::long" and got[1] == "tests/t_a.py::short0", got  # 6 s, then 12 x 0.1 s, then 1 s
    # a file with no measured test: its Icarus tests are guessed as before
    items = [_Item("tests/t_new.py::n", simulator="icarus"), _Item("tests/t_b.py::x")]
    assert [i.nodeid for i in conftest.longest_first(items)] == ["tests/t_new.py::n", "tests/t_b.py::x"]


def test_the_second_unit_does_not_wait_for_the_first_verilator_build(monkeypatch):
    """When the longest unit runs on Verilator (it builds the GPU model on a fresh clone),
    the next unit, which xdist starts at once on the other worker, is the longest that needs
    no Verilator: it would only wait for that build."""
    monkeypatch.setattr(conftest, "_known_durations",
                        lambda: {"v1": 40.0, "v2": 30.0, "i1": 25.0, "m": 1.0, "i2": 20.0})
    items = [_Item("m"), _Item("i2", "drivers-icarus-1", simulator="icarus"),
             _Item("v2", "scenarios-verilator", simulator="verilator"),
             _Item("i1", "drivers-icarus-0", simulator="icarus"), _Item("v1", "sdma-verilator", simulator="verilator")]
    assert [i.nodeid for i in conftest.longest_first(items)] == ["v1", "i1", "v2", "i2", "m"]
    # the longest first on Icarus: plain longest first
    monkeypatch.setattr(conftest, "_known_durations",
                        lambda: {"v1": 20.0, "v2": 30.0, "i1": 45.0, "m": 1.0, "i2": 20.0})
    assert [i.nodeid for i in conftest.longest_first(items)] == ["i1", "v2", "i2", "v1", "m"]


def test_a_group_keeps_its_measured_total_when_its_tests_change(monkeypatch):
    """The session's cost lands on whichever test of a group runs first. When the groups
    are redrawn (the driver checks' shards rebalanced), that test may now be in another
    group: each group's recorded total ("@<group>") still ranks it. Without it, two
    25-second Icarus shards of a fresh clone counted 2 s and started last."""
    monkeypatch.setattr(conftest, "_known_durations", lambda: {"tests/t.py::a": 25.0, "tests/t.py::m": 5.0,
                                                               "@shard-1": 24.0, "@shard-0": 26.0})
    items = [_Item("tests/t.py::m"), _Item("tests/t.py::b", "shard-1"), _Item("tests/t.py::c", "shard-1"),
             _Item("tests/t.py::a", "shard-0")]
    assert [i.nodeid for i in conftest.longest_first(items)] == ["tests/t.py::a", "tests/t.py::b", "tests/t.py::c",
                                                                 "tests/t.py::m"]


def test_the_times_kept_include_each_groups_total(monkeypatch):
    monkeypatch.setattr(conftest, "_times", {})
    for nodeid, d in (("tests/t.py::x[1]@g-icarus", 3.0), ("tests/t.py::x[2]@g-icarus", 0.5), ("tests/t.py::y", 1.0)):
        conftest.pytest_runtest_logreport(type("R", (), {"nodeid": nodeid, "duration": d})())
    assert conftest._times == {"tests/t.py::x[1]": 3.0, "tests/t.py::x[2]": 0.5, "@g-icarus": 3.5, "tests/t.py::y": 1.0}


def test_one_run_orders_by_one_reading_of_the_durations(monkeypatch, tmp_path):
    """Another pytest in the same tree that ends during this run rewrites the durations
    file: the order (and so every worker's collection, which xdist requires equal) stays
    the one read at the start, the controller's, handed to each worker."""
    path = tmp_path / "test-durations.json"
    monkeypatch.setattr(conftest, "DURATIONS", (path,))
    monkeypatch.setattr(conftest, "_durations", None, raising=False)
    items = [_Item("x"), _Item("y")]
    path.write_text('{"x": 1.0, "y": 2.0}')
    assert [i.nodeid for i in conftest.longest_first(items)] == ["y", "x"]
    path.write_text('{"x": 3.0, "y": 2.0}')  # a run in the same tree ended
    assert [i.nodeid for i in conftest.longest_first(items)] == ["y", "x"]

    node = type("Node", (), {"workerinput": {}})()
    conftest.pytest_configure_node(node)  # the controller starts a worker
    monkeypatch.setattr(conftest, "_durations", None, raising=False)  # the worker's own module
    conftest.pytest_configure(type("Config", (), {"workerinput": node.workerinput})())
    assert [i.nodeid for i in conftest.longest_first(items)] == ["y", "x"]  # not the file's x 3.0


def test_the_measured_times_name_files_that_exist():
    """tests/durations.json is keyed by node ID: a file moved or split without its keys left
    its times under a path no test has (its tests then ordered by a guess, the file's
    measured-and-short rule lost). Every key names a test file that is there."""
    import json
    from pathlib import Path

    root = Path(conftest.__file__).resolve().parents[1]
    known = json.loads(Path(conftest.DURATIONS[1]).read_text())
    files = {k.split("::")[0] for k in known if not k.startswith("@")}
    stale = sorted(f for f in files if not (root / f).is_file())
    assert not stale, "tests/durations.json names files that are not there (move their keys):\n" + "\n".join(stale)
