"""Collect the device-independent driver checks (`CHECKS` lists) of the KMD/UMD tests, and
turn one into a cocotb test that runs it on the RTL."""

import importlib
import os
import random

# "<folder of tests/>.<module>": a check goes by its module's name alone (below), wherever
# the module lives, so the cocotb tests' names stay put when a file moves between folders
MODULES = ("kmd.test_kmd_ioctl", "kmd_sched.test_kmd_fence", "kmd_sched.test_kmd_reset", "kmd.test_kmd_vm",
           "kmd_sched.test_kmd_queues", "umd.test_umd_queues",
           "umd.test_umd_api", "umd.test_umd_batching", "umd.test_umd_cmdbuf", "umd.test_umd_memory",
           "umd.test_umd_runtime", "umd.test_umd_transfer", "umd.test_umd_lost_failures",
           "security.test_security_toctou", "security.test_security_checker", "security.test_security_mappings",
           "security.test_security_umd", "security.test_security_ioctl", "spec.test_amd_conformance",
           "security.test_vm_isolation", "model.test_contract_driver", "model.test_contract_engines",
           "model.test_contract_vm", "model.test_contract_control", "model.test_contract_bare_metal",
           "kmd.test_kmd_uapi_contract",
           "kmd.test_kmd_uapi_contract_cs")


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


# The memory every check runs on. Real memory is slow and stalls: a driver that works only
# on the memory model's fast default (2 cycles, never a stall) is broken. $GPUCOSIM_DRIVER_MEM
# selects, for every check of a run:
#   unset or ""   the default memory;
#   slow[:SEED]   slow, stalling memory: each check draws its own read and write latency in
#                 SLOW_LATENCY and a stall probability in SLOW_STALL for each AXI channel, from
#                 (SEED, the check's name) alone (SEED 1 if not given), so a failing check
#                 replays alone with the same memory.
MEM_ENV = "GPUCOSIM_DRIVER_MEM"
SLOW_LATENCY = (3, 60)  # cycles, both ends included
SLOW_STALL = (0.1, 0.7)  # per-cycle probability that a channel withholds READY/VALID


def slow_memory(name: str, seed: int = 1) -> dict:
    """testbench.memory.configure()'s arguments of slow, stalling memory for check `name`."""
    from testbench.memory import CHANNELS

    rng = random.Random(f"gpucosim-driver-mem/{seed}/{name}")
    return {"rd_latency": rng.randint(*SLOW_LATENCY), "wr_latency": rng.randint(*SLOW_LATENCY),
            "stall": {ch: round(rng.uniform(*SLOW_STALL), 3) for ch in CHANNELS},
            "seed": rng.randrange(1, 1 << 31)}


def memory_settings(name: str, spec: str | None = None) -> dict:
    """The memory of check `name` under `spec` ($GPUCOSIM_DRIVER_MEM when None): configure()'s
    arguments, {} for the default memory. A spec it does not know is a one-line ValueError."""
    spec = (os.environ.get(MEM_ENV, "") if spec is None else spec).strip()
    if not spec:
        return {}
    kind, colon, seed = spec.partition(":")
    if kind == "slow" and (not colon or seed.isascii() and seed.isdigit()):
        return slow_memory(name, int(seed or 1))
    raise ValueError(f"{MEM_ENV}={spec!r}: choose slow or slow:SEED (SEED a non-negative integer), or leave it empty")


# Checks that make test also runs on slow, stalling memory (Verilator, 64 bits, in the one
# session of the others: 0.85 s for the four), as "<check>__slow_memory" with
# slow_memory(check, SLOW_SEED). Each assumed fast memory once and failed so with these
# settings: a snapshot of the ring taken before bind()'s padding NOP had run (cs_checker,
# reserved_bits), the IB test's IH entry read within bind() (bind_and_info), 10 worker jobs
# within a job timeout (the two-queue hang). A suffix, not a prefix: cocotb's runner selects
# a test by the end of its name, so "slow__<check>" ran in every session that ran <check>.
# `GPUCOSIM_DRIVER_MEM=slow:SEED` runs every check on such memory.
SLOW_CHECKS = ("kmd_ioctl__check_bind_and_info", "kmd_ioctl__check_cs_checker",
               "kmd_queues__check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works",
               "security__check_reserved_bits_refused")
SLOW_SEED = 1
SLOW_SUFFIX = "__slow_memory"


def slow_checks() -> dict:
    """{"module__check_name__slow_memory": (function, configure() arguments)} for SLOW_CHECKS."""
    every = all_checks()
    return {name + SLOW_SUFFIX: (every[name], slow_memory(name, SLOW_SEED)) for name in SLOW_CHECKS}


def cocotb_test(name: str, check, memory: dict | None = None):
    """A cocotb test running `check(dev)` on a freshly reset device, then unbinding the KMD.
    `memory`: testbench.memory.configure()'s arguments; None takes $GPUCOSIM_DRIVER_MEM's."""
    import cocotb

    import kmd_model
    from testbench.sim.cocotb_device import run_driver

    async def test(dut):
        def body(dev):
            try:
                check(dev)
            finally:
                kmd_model.unbind()
        mem = memory_settings(name) if memory is None else memory
        if mem:
            dut._log.info("%s: memory %s", name, mem)
        await run_driver(dut, body, **mem)
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
    # (alone, 4 December 2026, beside a make bench: two CHAIN loops run to their dword limit)
    "kmd_queues__check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works": 4.3,
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


def _main(argv=None) -> int:
    """`python -m tests.cosim.driver_checks`: run the driver checks on the RTL outside pytest,
    at any bus width and memory (make test runs them at 64 bits on the default memory)."""
    from testbench import sim
    from testbench.argtypes import OneLineParser
    from testbench.sim.design import gpu_design

    p = OneLineParser(prog="python -m tests.cosim.driver_checks", description=_main.__doc__)
    p.add_argument("--sim", default="verilator", choices=sim.SIMULATORS)
    p.add_argument("--data-width", type=int, default=64, choices=(32, 64, 128, 256))
    p.add_argument("--memory", default=None, metavar="SPEC",
                   help=f"slow or slow:SEED (default ${MEM_ENV}, else the default memory)")
    p.add_argument("-k", dest="match", default="", metavar="TEXT", help="only the checks whose name contains TEXT")
    args = p.parse_args(argv)
    try:
        memory_settings("", args.memory)
    except ValueError as e:
        p.error(str(e) if args.memory is None else f"--memory {args.memory!r}: " + str(e).partition(": ")[2])
    if args.memory is not None:
        os.environ[MEM_ENV] = args.memory  # the simulator's Python reads it
    # (the __slow_memory checks too, as make test runs them on Verilator)
    names = [n for n in [*all_checks(), *slow_checks()] if args.match in n]
    if not names:
        p.error(f"-k {args.match!r}: no check's name contains it")
    reason = sim.unavailable_reason(args.sim)
    if reason:
        print(reason)
        return 2
    res = sim.run(gpu_design(args.data_width), args.sim, "tests.cosim.cocotb_drivers", testcase=names,
                  tag="driver_checks")
    for n, msg in res.failures:
        print(f"FAILED {n}: {' '.join(msg.split())[:300]}")
    own = " (the __slow_memory checks: their own)" if any(n.endswith(SLOW_SUFFIX) for n in names) else ""
    print(f"{len(res.passed)} of {len(names)} checks passed ({args.sim}, {args.data_width}-bit bus, "
          f"memory {os.environ.get(MEM_ENV) or 'default'}{own}); log {res.log}")
    return 0 if len(res.passed) == len(names) and not res.failures else 1


if __name__ == "__main__":
    raise SystemExit(_main())
