"""Collect the device-independent driver checks (`CHECKS` lists) of the KMD/UMD tests, and
turn one into a cocotb test that runs it on the RTL."""

import importlib

MODULES = ("test_kmd_ioctl", "test_kmd_fence", "test_kmd_reset", "test_kmd_vm", "test_kmd_queues", "test_umd_queues",
           "test_umd_api", "test_umd_batching", "test_umd_cmdbuf", "test_umd_memory", "test_umd_runtime",
           "test_umd_transfer",
           "test_security", "test_amd_conformance", "test_vm_isolation")


def all_checks() -> dict:
    """{"module__check_name": function} for every check, in a stable order."""
    out = {}
    for mod_name in MODULES:
        mod = importlib.import_module(f"tests.{mod_name}")
        for check in mod.CHECKS:
            out[f"{mod_name[5:]}__{check.__name__}"] = check
    return out


def cocotb_test(name: str, check):
    """A cocotb test running `check(dev)` on a freshly reset device, then unbinding the KMD."""
    import cocotb

    import kmd_model
    from testbench.cocotb_device import run_driver

    async def test(dut):
        def body(dev):
            try:
                check(dev)
            finally:
                kmd_model.unbind()
        await run_driver(dut, body)
    test.__name__ = test.__qualname__ = name
    return cocotb.test()(test)
