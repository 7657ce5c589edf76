"""The KMD and UMD checks, run on the RTL under each simulator.

The modules of driver_checks.MODULES (KMD, UMD, security, hardware contract) run their
`check_*(dev)` bodies on the reference model; here the same bodies run against the command
processor under cocotb (the other CHECKS lists: driver_checks.ELSEWHERE says where, or why not):
ioctls, CS checker, fences across the 2^32 wrap (600 jobs), WAIT_REG_MEM released by a
later write, hardware errors with recovery, IB chaining, batching, API versions.

Every check runs on Verilator. On Icarus make test runs driver_checks.ICARUS_SUBSET, one
check of each module, in one session; `make test ICARUS=all` ($GPUCOSIM_ICARUS=all) runs every
check there too, split into shards (tests/cosim/driver_checks.py): one simulator session per
shard, each its own xdist group, so Icarus's slow sessions run on both workers at once instead
of holding one. Verilator's session also runs driver_checks.SLOW_CHECKS on slow, stalling memory.
"""

import re
from pathlib import Path

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from tests.cosim import driver_checks

from tests.conftest import shared_run


def _params(simulators=None, scope=None):
    if scope is None:
        try:
            scope = driver_checks.icarus_scope()
        except ValueError:
            scope = "subset"  # tests/conftest.py's pytest_configure reports the bad $GPUCOSIM_ICARUS in one line
    for s in sim.selected_simulators() if simulators is None else simulators:
        for k, names in driver_checks.sessions(s, scope):
            if s == "verilator" and k == "0":  # and on slow, stalling memory, the few that assumed fast
                names = names + list(driver_checks.slow_checks())
            for name in names:
                yield pytest.param(s, k, names, name, id=f"{s}-{name}",
                                   marks=pytest.mark.xdist_group(f"rtl_drivers-{s}-{k}"))


@pytest.mark.parametrize("simulator_name, shard, names, name", list(_params()))
def test_driver_check_on_rtl(simulator_name, shard, names, name):
    reason = sim.unavailable_reason(simulator_name)
    if reason:
        pytest.skip(reason)
    driver_checks.memory_settings(name)  # a bad $GPUCOSIM_DRIVER_MEM: its one line, not a failure per check
    res = shared_run(f"drivers-{simulator_name}-{shard}",
                     lambda: sim.run(gpu_design(64), simulator_name, "tests.cosim.cocotb_drivers", testcase=names,
                                     tag=f"drivers{shard}"))
    failed = [msg for n, msg in res.failures if n == name]
    assert not failed, f"{name} on {simulator_name}: {failed[0]}\n" + res.explain()
    assert name in res.passed, f"{name} did not run on {simulator_name}\n" + res.explain()


def test_icarus_subset_runs_one_check_of_every_module():
    """make test's Icarus session runs ICARUS_SUBSET: each module of MODULES has its one check
    there, a check of that module, and nothing else is collected on Icarus; ICARUS=all collects
    every check on Icarus, and Verilator every check (and the slow-memory ones) either way."""
    every = driver_checks.all_checks()
    missing = [m for m in driver_checks.MODULES if m not in driver_checks.ICARUS_SUBSET]
    assert not missing, f"add one check of each to driver_checks.ICARUS_SUBSET: {', '.join(missing)}"
    stale = sorted(set(driver_checks.ICARUS_SUBSET) - set(driver_checks.MODULES))
    assert not stale, f"driver_checks.ICARUS_SUBSET names modules not in MODULES: {', '.join(stale)}"
    wrong = [f"{m}: {c}" for m, c in driver_checks.ICARUS_SUBSET.items() if c not in driver_checks.checks_of_module(m)]
    assert not wrong, "driver_checks.ICARUS_SUBSET names checks its modules do not have:\n" + "\n".join(wrong)

    def collected(scope):
        got = {}
        for p in _params(("verilator", "icarus"), scope):
            s, label, _, name = p.values
            got.setdefault(s, []).append(name)
            assert p.marks[0].args == (f"rtl_drivers-{s}-{label}",)
        return got
    sub, full = collected("subset"), collected("all")
    assert sub["icarus"] == [c for c in every if c in set(driver_checks.ICARUS_SUBSET.values())]
    assert len(sub["icarus"]) == len(driver_checks.MODULES)
    assert sorted(full["icarus"]) == sorted(every)
    assert sub["verilator"] == full["verilator"]
    assert sorted(full["verilator"]) == sorted([*every, *driver_checks.slow_checks()])


def test_icarus_scope_setting():
    assert driver_checks.icarus_scope("") == driver_checks.icarus_scope(" subset ") == "subset"
    assert driver_checks.icarus_scope("all") == "all"
    for bad in ("ALL", "full", "all,subset", "1"):
        with pytest.raises(ValueError) as ei:
            driver_checks.icarus_scope(bad)
        assert str(ei.value) == (f"GPUCOSIM_ICARUS={bad!r}: choose all (every driver check on Icarus) or subset "
                                 "(one check of each module, make test's), or leave it empty")


def test_shards_hold_every_check_once():
    every = list(driver_checks.all_checks())
    for s in ("verilator", "icarus"):
        split = driver_checks.shards(s)
        assert len(split) == driver_checks.SHARDS[s]
        assert sorted(c for part in split for c in part) == sorted(every)
    heavy = [c for c in driver_checks.ICARUS_SECONDS if c in every]
    assert len(heavy) >= 10, "the cost table names checks that no longer exist: update ICARUS_SECONDS"
    two_longest = sorted(heavy, key=lambda c: -driver_checks.ICARUS_SECONDS[c])[:2]
    a, b = ([k for k, part in enumerate(driver_checks.shards("icarus")) if c in part] for c in two_longest)
    assert a != b, "the two longest checks share an Icarus shard"


def test_every_check_has_its_icarus_time():
    """The shards are balanced on driver_checks.ICARUS_SECONDS; a check missing from it counted
    as short, and check_a_hang_on_one_cp_queue (about 11 s) was missing: every check has its
    measured figure, and every figure names a check that exists."""
    every = driver_checks.all_checks()
    missing = [c for c in every if c not in driver_checks.ICARUS_SECONDS]
    assert not missing, f"measure on Icarus and add to driver_checks.ICARUS_SECONDS: {', '.join(missing)}"
    stale = [c for c in driver_checks.ICARUS_SECONDS if c not in every]
    assert not stale, f"driver_checks.ICARUS_SECONDS names checks that no longer exist: {', '.join(stale)}"


def test_every_check_list_runs_on_the_rtl_or_says_why_not():
    """Every test module with a `CHECKS` list is in driver_checks.MODULES (its checks run
    here) or ELSEWHERE (with where they run instead, or why not on the RTL): test_kmd_checker's
    and test_kmd_ih's ran on the model alone, unnoticed, while cocotb_drivers.py said every
    list ran on the RTL."""
    tests = Path(__file__).resolve().parents[1]
    lists = {".".join(p.relative_to(tests).with_suffix("").parts) for p in tests.glob("*/**/test_*.py")
             if re.search(r"^CHECKS\b", p.read_text(), re.M)}
    both = set(driver_checks.MODULES) & set(driver_checks.ELSEWHERE)
    assert not both, f"in both driver_checks.MODULES and ELSEWHERE: {', '.join(sorted(both))}"
    neither = sorted(lists - set(driver_checks.MODULES) - set(driver_checks.ELSEWHERE))
    assert not neither, (f"CHECKS lists that run nowhere on the RTL: {', '.join(neither)}: add each to "
                         "driver_checks.MODULES, or to ELSEWHERE with why not")
    gone = sorted((set(driver_checks.MODULES) | set(driver_checks.ELSEWHERE)) - lists)
    assert not gone, f"driver_checks names modules with no CHECKS list: {', '.join(gone)}"


def test_slow_memory_settings():
    """GPUCOSIM_DRIVER_MEM: slow:SEED gives each check its own memory, in the stated ranges,
    the same at every call; anything else is one line naming the variable."""
    a, b = driver_checks.memory_settings("x__check_a", "slow:3"), driver_checks.memory_settings("x__check_b", "slow:3")
    assert a == driver_checks.memory_settings("x__check_a", " slow:3 ") != b
    assert driver_checks.memory_settings("x__check_a", "slow") == driver_checks.slow_memory("x__check_a", 1)
    assert driver_checks.memory_settings("x__check_a", "") == {}
    lo, hi = driver_checks.SLOW_LATENCY
    plo, phi = driver_checks.SLOW_STALL
    for seed in range(20):
        m = driver_checks.slow_memory("x__check_a", seed)
        assert lo <= m["rd_latency"] <= hi and lo <= m["wr_latency"] <= hi
        assert sorted(m["stall"]) == sorted(("aw", "w", "b", "ar", "r"))
        assert all(plo <= p <= phi for p in m["stall"].values())
    for bad in ("fast", "slow:", "slow:-1", "slow:x", "slow:1:2", "slow:\u00b2", "SLOW"):
        with pytest.raises(ValueError) as ei:
            driver_checks.memory_settings("x", bad)
        assert str(ei.value) == (f"GPUCOSIM_DRIVER_MEM={bad!r}: choose slow or slow:SEED (SEED a non-negative "
                                 "integer), or leave it empty")
    assert set(driver_checks.SLOW_CHECKS) <= set(driver_checks.all_checks())
