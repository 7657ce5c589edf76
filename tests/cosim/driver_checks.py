"""Collect the device-independent driver checks (`CHECKS` lists) of the KMD/UMD tests, and
turn one into a cocotb test that runs it on the RTL."""

import importlib

# "<folder of tests/>.<module>": a check goes by its module's name alone (below), wherever
# the module lives, so the cocotb tests' names stay put when a file moves between folders
MODULES = ("kmd.test_kmd_ioctl", "kmd_sched.test_kmd_fence", "kmd_sched.test_kmd_reset", "kmd.test_kmd_vm",
           "kmd_sched.test_kmd_queues", "umd.test_umd_queues",
           "umd.test_umd_api", "umd.test_umd_batching", "umd.test_umd_cmdbuf", "umd.test_umd_memory",
           "umd.test_umd_runtime", "umd.test_umd_transfer",
           "security.test_security_toctou", "security.test_security_checker", "security.test_security_mappings",
           "security.test_security_umd", "security.test_security_ioctl", "spec.test_amd_conformance",
           "security.test_vm_isolation", "model.test_contract_driver", "model.test_contract_engines",
           "model.test_contract_vm", "model.test_contract_control")


def _group(mod_name: str) -> str:
    """The name a module's checks go by: its own, except the security suite's, which is one
    file split by concept and keeps one name (security__check_*: the cocotb tests, the
    Icarus times below and tests/kmd/test_high_memory.py's lists name them so)."""
    name = mod_name.rpartition(".")[2]
    return "security" if name.startswith("test_security_") else name[5:]


def all_checks() -> dict:
    """{"module__check_name": function} for every check, in a stable order."""
    out = {}
    for mod_name in MODULES:
        mod = importlib.import_module(f"tests.{mod_name}")
        for check in mod.CHECKS:
            out[f"{_group(mod_name)}__{check.__name__}"] = check
    return out


def cocotb_test(name: str, check):
    """A cocotb test running `check(dev)` on a freshly reset device, then unbinding the KMD."""
    import cocotb

    import kmd_model
    from testbench.sim.cocotb_device import run_driver

    async def test(dut):
        def body(dev):
            try:
                check(dev)
            finally:
                kmd_model.unbind()
        await run_driver(dut, body)
    test.__name__ = test.__qualname__ = name
    return cocotb.test()(test)


# Seconds each check takes on Icarus (the mean of two fresh-clone make test runs on 3
# December 2026, the third session, with the gated registers of testbench/sim/icarus_verilog.py;
# inside make test a check takes up to 1.7x its time alone, as builds share the cores),
# only to balance the shards below: Icarus simulates about 10x slower than Verilator, so
# one Icarus session of every check held a whole xdist worker. A check not listed counts
# SHORT_CHECK_SECONDS (the mean of the 70 that took under 0.9 s).
ICARUS_SECONDS = {
    "kmd_fence__check_fence_wrap": 14.1, "umd_transfer__check_random_transfers": 11.5,
    "umd_runtime__check_events_across_wrap": 10.3, "security__check_held_cp_flushes": 5.2,
    "umd_batching__check_batching": 4.4, "vm_isolation__check_hostile_reach_faults": 3.8,
    "umd_transfer__check_transfers_under_backpressure": 2.9, "kmd_reset__check_timeout_recovery": 2.2,
    "umd_transfer__check_fence_after_dma_sees_the_data": 2.0, "vm_isolation__check_invalidation_races_dma": 2.0,
    "umd_memory__check_pools_example": 1.7, "umd_cmdbuf__check_chaining_on_device": 0.9,
    # (the outside driver's checks over 0.85 s, one Icarus session of the 30 alone, 4 December 2026)
    "contract_engines__check_sdma_ring_and_packets": 1.2,
    "contract_driver__check_every_listed_value_and_reserved_bit": 1.0, "contract_driver__check_dma_data": 0.9,
}
SHORT_CHECK_SECONDS = 0.17
SHARDS = {"verilator": 1, "icarus": 4}  # simulator sessions per simulator


def shards(simulator: str) -> list[list[str]]:
    """Every check, split into SHARDS[simulator] lists of about equal Icarus time (longest
    first, each to the lightest shard), each list in all_checks() order. Deterministic, so
    every xdist worker computes the same split."""
    names = list(all_checks())
    n = SHARDS.get(simulator, 1)
    load, out = [0] * n, [[] for _ in range(n)]
    for name in sorted(names, key=lambda c: -ICARUS_SECONDS.get(c, SHORT_CHECK_SECONDS)):
        k = load.index(min(load))
        out[k].append(name)
        load[k] += ICARUS_SECONDS.get(name, SHORT_CHECK_SECONDS)
    order = {c: i for i, c in enumerate(names)}
    return [sorted(s, key=order.__getitem__) for s in out if s]
