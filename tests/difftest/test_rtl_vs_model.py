"""The RTL and the reference model agree on every scenario of tests/difftest/scenarios.py.

The model's behaviour is pinned value by value in tests/model/refmodel/test_refmodel_*.py; here each
scenario (every packet kind, IB nesting and CHAIN, a ring wrap with a straddling packet,
WAIT_REG_MEM released by a later write, every error class with its IH entry, bus errors
on fetch/write/poll/fence/write-back/IH) runs on the RTL under each simulator, and every
observation must equal the model's.
"""

import json

import pytest

from testbench import sim
from testbench.sim.design import gpu_design
from testbench.refmodel import RefModel
from tests.difftest import scenarios

from tests.conftest import shared_run

# all scenarios of a simulator run in one simulator process: keep them on one xdist worker
pytestmark = pytest.mark.xdist_group("rtl_vs_model")


def rtl_observations(simulator: str, tmp_path_factory) -> dict:
    """Run all scenarios once per simulator (one simulator process) and per pytest run."""
    def run() -> dict:
        out = tmp_path_factory.mktemp(f"scenarios-{simulator}")
        res = sim.run(gpu_design(64), simulator, "tests.difftest.cocotb_scenarios", tag="scenarios",
                      extra_env={"SCENARIO_OUT": str(out)})
        obs = {}
        for name in scenarios.SCEN:
            p = out / f"{name}.json"
            obs[name] = json.loads(p.read_text()) if p.exists() else None
        return {"obs": obs, "res": res}

    return shared_run(f"scenarios-{simulator}", run)


@pytest.mark.parametrize("name", list(scenarios.SCEN))
def test_rtl_matches_model(simulator, name, tmp_path_factory):
    got = rtl_observations(simulator, tmp_path_factory)
    rtl = got["obs"][name]
    assert rtl is not None, f"scenario {name} did not finish on {simulator}:\n" + got["res"].explain()
    model = json.loads(json.dumps(scenarios.run(name, RefModel())))
    diffs = {k: (model[k], rtl[k]) for k in model if model[k] != rtl[k]}
    assert not diffs, "\n".join(f"{k}: model {m!r}\n{' ' * len(k)}  rtl   {r!r}" for k, (m, r) in diffs.items())
    # and what must hold whatever the model says
    assert rtl["idle"], "the CP did not go idle"
    if rtl["error"][0]:
        assert rtl["after_reset"] == {"error": [0, 0, 0, 0, 0], "marker": 0x600D, "rptr": 5}, \
            "no clean recovery after soft reset"
    if name in {f"wait_{fn.lower()}" for fn in scenarios.WAIT_FUNCTIONS}:
        blocked = name != "wait_always"
        assert rtl["scratch"] == (0 if blocked else 0x5EE), "the wait did not hold the marker back"
        assert rtl["mem"][0] == 0x5EE, "the wait was never released"


def test_the_group_is_per_simulator(simulator, request):
    """tests/conftest.py splits this module's xdist group by simulator, so the Icarus and
    Verilator sessions can run on both workers at once."""
    assert request.node.get_closest_marker("xdist_group").args[0] == f"rtl_vs_model-{simulator}"
    if getattr(request.config.option, "loadgroup", False):  # a worker of make test's `-n 2 --dist loadgroup`
        # pytest-xdist puts the group into the node ID, which is what its scheduler groups by;
        # pytest 9.2 silently drops that (pytest-dev/pytest-xdist#1386: see pyproject.toml)
        assert request.node.nodeid.endswith(f"-{simulator}"), request.node.nodeid
