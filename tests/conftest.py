"""Shared pytest plumbing: one parameter per simulator, and one simulator session shared by a
group of tests."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Callable, TypeVar

import pytest

from testbench import sim

T = TypeVar("T")
_shared: dict[str, object] = {}


def _simulators() -> list[str]:
    try:
        return sim.selected_simulators()
    except ValueError:
        return list(sim.SIMULATORS)  # pytest_configure reports the bad $SIM in one line


def pytest_configure(config):
    """A $SIM that names no simulator (`make test SIM=vcs`) is a usage error, one line, and
    so is a $GPUCOSIM_ICARUS that is neither all nor subset (tests/cosim/driver_checks.py)
    and a $GPUCOSIM_DIFFTEST that is neither full nor subset (tests/difftest/ci_plan.py).
    On an xdist worker, the run's durations are the controller's (`_known_durations`)."""
    from tests.cosim.driver_checks import icarus_scope
    from tests.difftest.ci_plan import difftest_scope

    try:
        sim.selected_simulators()
        icarus_scope()
        difftest_scope()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    global _durations
    given = getattr(config, "workerinput", {}).get(_WORKERINPUT_KEY)
    if given is not None:
        _durations = json.loads(given)


@pytest.fixture(autouse=True)
def _environment_as_it_was():
    """Each test leaves the process environment as it found it. A test that runs gpucosim in
    the worker's own process (cli.main(["run", ..., "--log", SPEC])) has the launcher set
    GPUCOSIM_LOG for the app; left behind, every later test's subprocess in that worker
    logged to its stderr (`[bus] read ID ...` where a test read the campaign's first line)."""
    own = "PYTEST_CURRENT_TEST"  # (pytest's, set at each phase)
    saved = {k: v for k, v in os.environ.items() if k != own}
    yield
    for k in [k for k in os.environ if k != own and k not in saved]:
        del os.environ[k]
    for k, v in saved.items():
        if os.environ.get(k) != v:
            os.environ[k] = v


@pytest.fixture(params=_simulators())
def simulator(request) -> str:
    """Each simulator test runs on Verilator and Icarus ($SIM narrows it)."""
    reason = sim.unavailable_reason(request.param)
    if reason:
        pytest.skip(reason)
    return request.param


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (loadgroup)
def pytest_collection_modifyitems(config, items):
    """A group's simulator session is per simulator (shared_run keys name it), so a test
    run on a simulator joins "<group>-<simulator>": Icarus's and Verilator's sessions of
    one group go to whichever workers are free instead of queueing on one."""
    for item in items:
        mark = item.get_closest_marker("xdist_group")
        params = getattr(getattr(item, "callspec", None), "params", {})
        simulator = params.get("simulator")
        if mark is None or simulator not in sim.SIMULATORS:
            continue
        group = mark.args[0] if mark.args else mark.kwargs.get("name", "default")
        if not group.endswith(f"-{simulator}"):
            item.add_marker(pytest.mark.xdist_group(f"{group}-{simulator}"), append=False)
    if getattr(config.option, "loadgroup", False):  # a worker of `--dist loadgroup` (xdist sets it)
        items[:] = longest_first(items)


# ------------------------------------------------------------------ the order of the work
# xdist hands the work units (a group, or one test) to the two workers in the order of
# the collection (`--no-loadscope-reorder`; its own order is by test count, not time). The
# longest units go first, so a long simulator session never ends the run alone while the
# other worker idles, and the many short model tests fill the end. The times are the
# last run's (build/test-durations.json, written at the end of every run), else the ones
# measured for the repository (tests/durations.json), else a guess by simulator.
DURATIONS = (sim.BUILD / "test-durations.json", Path(__file__).with_name("durations.json"))
_GUESS = {"icarus": 5.0, "verilator": 1.0}


def _read_durations() -> dict[str, float]:
    for path in DURATIONS:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return {}


# Read once per run, by the controller, and handed to every xdist worker: each worker
# orders its own collection, and xdist refuses a run whose workers collected different
# orders. Read by each worker from the file, a run that ended between two workers'
# collections (another pytest in the same tree writes the file at its end) gave them two
# orders: "Different tests were collected between gw0 and gw1".
_durations: dict[str, float] | None = None
_WORKERINPUT_KEY = "gpucosim_durations"


def _known_durations() -> dict[str, float]:
    global _durations
    if _durations is None:
        _durations = _read_durations()
    return _durations


@pytest.hookimpl(optionalhook=True)  # an xdist hook: on the controller, for each worker it starts
def pytest_configure_node(node) -> None:
    node.workerinput[_WORKERINPUT_KEY] = json.dumps(_known_durations())


def _unit(item) -> str:
    """The work unit xdist's loadgroup makes of a test: its groups, else the test alone."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "@" + "_".join(names) if names else item.nodeid


def _simulator(item) -> str | None:
    """The simulator a test runs on: its parameter (`simulator`, `simulator_name`...) or
    its group's suffix (the hook above names every simulator group "<group>-<simulator>")."""
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        if isinstance(value, str) and value in sim.SIMULATORS:
            return value
    for m in item.iter_markers("xdist_group"):
        name = str(m.args[0] if m.args else m.kwargs.get("name", ""))
        for s in sim.SIMULATORS:
            if name.endswith(f"-{s}") or f"-{s}-" in name or name.startswith(f"{s}_"):
                return s
    return None


# tests/durations.json keeps the tests of 0.3 s or more (build/test-durations.json, every
# test): a test left out of a file it has others in was measured, and short
_SHORT = 0.1


def longest_first(items: list) -> list:
    """`items` with their work units in order of expected time, longest first (a stable
    order: every worker computes the same, as xdist requires), except that the second
    unit does not need Verilator when the first does: the first Verilator session on a
    fresh clone builds the GPU model (about 25 s), and a second one would only wait for
    that build while the other worker could run an Icarus session."""
    known = _known_durations()
    measured_files = {k.split("::")[0] for k in known}
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)

    def cost(tests) -> float:
        # A session's cost lands on whichever of its tests runs first: when the tests of a
        # group change (the driver checks' shards are rebalanced), the group's own total
        # from the last run still says how long it is.
        total = 0.0
        for t in tests:
            nodeid = t.nodeid.split("@")[0]
            if nodeid in known:
                total += known[nodeid]
            elif nodeid.split("::")[0] in measured_files:
                total += _SHORT
            else:
                total += _GUESS.get(_simulator(t), 0.2)
        return max(total, known.get(_unit(tests[0]), 0.0))

    order = sorted(units.values(), key=cost, reverse=True)
    if order and any(_simulator(t) == "verilator" for t in order[0]):
        other = next((k for k, tests in enumerate(order) if all(_simulator(t) != "verilator" for t in tests)), None)
        if other is not None and other > 1:
            order.insert(1, order.pop(other))
    return [t for tests in order for t in tests]


_times: dict[str, float] = {}


def pytest_runtest_logreport(report) -> None:
    """Each test's time (setup, call, teardown), keyed by its node ID without xdist's group,
    and each group's total, keyed "@<group>" (xdist appends the group to the node ID)."""
    nodeid, _, group = report.nodeid.partition("@")
    for key in (nodeid, "@" + group) if group else (nodeid,):
        _times[key] = _times.get(key, 0.0) + report.duration


def pytest_sessionfinish(session, exitstatus) -> None:
    """The controller keeps this run's times, over the last run's, for the next run's order."""
    if hasattr(session.config, "workerinput") or not _times:
        return
    path = DURATIONS[0]
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known.update({k: round(v, 2) for k, v in _times.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(known, indent=0, sort_keys=True))


def shared_run(key: str, run: Callable[[], T]) -> T:
    """`run()` once per pytest run, for every test that asks by `key`: one simulator session
    serves a whole group of tests. pytest-xdist's loadgroup still hands a group's first
    tests to another worker at times, so the workers share the result through a file: the
    first to get there runs it, the others wait for it and read it."""
    uid = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if uid is None:  # no xdist: this process is the run
        if key not in _shared:
            _shared[key] = run()
        return _shared[key]  # type: ignore[return-value]
    path = sim.BUILD / "runs" / "shared" / f"{uid}-{key}.pickle"
    with sim._locked(path.with_suffix(".lock")):
        if not path.exists():
            result = run()
            path.write_bytes(pickle.dumps(result))
            return result
    return pickle.loads(path.read_bytes())
