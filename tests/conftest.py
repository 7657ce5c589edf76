"""Shared pytest plumbing: one parameter per simulator, and one simulator session shared by a
group of tests."""

from __future__ import annotations

import os
import pickle
from typing import Callable, TypeVar

import pytest

from testbench import sim

T = TypeVar("T")
_shared: dict[str, object] = {}


@pytest.fixture(params=sim.selected_simulators())
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
