"""Collect the device-independent driver checks (`CHECKS` lists) of the KMD/UMD tests, and
turn one into a cocotb test that runs it on the RTL."""

import importlib
import os
import random

# "<folders under tests/>.<module>": a check goes by its module's name alone (below), wherever
# the module lives, so the cocotb tests' names stay put when a file moves between folders
MODULES = ("kmd.test_kmd_ioctl", "kmd.test_kmd_checker", "kmd_sched.test_kmd_fence", "kmd_sched.reset.test_kmd_reset",
           "kmd_sched.test_kmd_ih", "kmd.memory.test_kmd_vm", "kmd_sched.queues.test_kmd_queues_scheduling",
           "kmd_sched.queues.test_kmd_queues_resets", "kmd_sched.queues.test_kmd_queues_full_reset",
           "kmd_sched.queues.test_kmd_queues_stuck", "kmd_sched.queues.test_kmd_queues_not_stuck",
           "umd.submission.test_umd_queues", "umd.api.test_umd_api", "umd.submission.test_umd_batching",
           "umd.submission.test_umd_cmdbuf", "umd.memory.test_umd_memory", "umd.api.test_umd_runtime",
           "umd.memory.test_umd_transfer", "umd.failures.test_umd_lost_failures", "security.cs.test_security_toctou",
           "security.cs.test_security_checker", "security.memory.test_security_mappings",
           "security.limits.test_security_umd", "security.cs.test_security_ioctl", "spec.amd.test_amd_conformance",
           "security.memory.test_vm_isolation", "model.contract.test_contract_driver",
           "model.contract.test_contract_dma", "model.contract.test_contract_bus_errors",
           "model.contract.test_contract_release_mem_and_ih",
           "model.contract.engines.test_contract_sdma_packets", "model.contract.engines.test_contract_sdma_errors",
           "model.contract.engines.test_contract_cp_queues", "model.contract.engines.test_contract_both_engines",
           "model.contract.test_contract_vm", "model.contract.test_contract_vm_tlb",
           "model.contract.test_contract_vm_sdma_and_vmid_0", "model.contract.control.test_contract_resets",
           "model.contract.control.test_contract_halts", "model.contract.control.test_contract_rings",
           "model.contract.control.test_contract_ih_ring", "model.contract.control.test_contract_edges",
           "model.contract.engines.test_contract_packet_edges",
           "model.contract.test_contract_bare_metal", "model.contract.test_contract_bare_metal_three_rings",
           "model.contract.test_contract_csr", "kmd.uapi.test_kmd_uapi_contract",
           "kmd.uapi.test_kmd_uapi_contract_cs",
           "model.contract.engines.test_contract_sdma_check_order", "kmd.uapi.test_kmd_uapi_info",
           "model.contract.control.test_contract_fetch_bounds", "model.contract.control.test_contract_write_back_bits",
           "model.contract.engines.test_contract_listed_values_act")

# Every other test module with a `CHECKS` list, and why its checks are not among the above
# (tests/cosim/test_rtl_drivers.py fails on a list in neither: two ran on the model alone,
# unnoticed, while this module's docstring said every list ran on the RTL).
ELSEWHERE = {
    "umd.submission.test_umd_async": "on the RTL in a session of their own: tests/cosim/cocotb_async.py",
    "model.refmodel.test_model_cp_queues": "on the RTL in a session of their own: tests/cosim/cocotb_cp_queues.py",
    "model.refmodel.test_model_sdma": "on the RTL in a session of their own: tests/cosim/cocotb_sdma.py",
    "kmd.memory.test_high_memory": "the checks above again, on a model with memory and VAs above 4 GiB (the RTL's "
                            "memory model holds 64 MiB)",
}


# Files split by concept whose checks keep the name of the file they came from (the cocotb
# tests, the Icarus times below and tests/kmd/memory/test_high_memory.py's lists name them so)
SPLIT = {"test_kmd_queues_scheduling": "kmd_queues", "test_kmd_queues_resets": "kmd_queues",
         "test_kmd_queues_full_reset": "kmd_queues", "test_kmd_queues_stuck": "kmd_queues",
         "test_kmd_queues_not_stuck": "kmd_queues",
         "test_contract_sdma_packets": "contract_engines", "test_contract_sdma_errors": "contract_engines",
         "test_contract_cp_queues": "contract_engines", "test_contract_both_engines": "contract_engines",
         "test_contract_resets": "contract_control", "test_contract_halts": "contract_control",
         "test_contract_rings": "contract_control", "test_contract_ih_ring": "contract_control",
         "test_contract_edges": "contract_control",
         "test_contract_packet_edges": "contract_engines", "test_contract_sdma_check_order": "contract_engines",
         "test_contract_fetch_bounds": "contract_control", "test_contract_write_back_bits": "contract_control",
         "test_contract_listed_values_act": "contract_engines",
         "test_contract_dma": "contract_driver", "test_contract_bus_errors": "contract_driver",
         "test_contract_release_mem_and_ih": "contract_driver",
         "test_contract_vm_tlb": "contract_vm", "test_contract_vm_sdma_and_vmid_0": "contract_vm",
         "test_contract_bare_metal_three_rings": "contract_bare_metal"}


def _group(mod_name: str) -> str:
    """The name a module's checks go by: its own, except the security suite's, which is one
    file split by concept and keeps one name (security__check_*), and those of SPLIT (the
    name of the file they were split from)."""
    name = mod_name.rpartition(".")[2]
    if name in SPLIT:
        return SPLIT[name]
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


# Seconds each check takes on Icarus, only to balance the shards below: Icarus simulates
# about 10x slower than Verilator, so one Icarus session of every check held a whole xdist
# worker. Every check has its figure (tests/cosim/test_rtl_drivers.py fails on one without:
# a check left out counted as short, and check_a_hang_on_one_cp_queue, 6-9 s, was). Each
# check's REAL TIME in the shards' sim.log, the quicker of two make test runs of a fresh
# clone (7 December 2026, 354658b, the second on a quiet machine): the figures measured alone
# before (the median of three sessions, 4 December, and one session for each later check)
# had drifted to shards of 61, 80, 59 and 38 s; these give 59 s each. A new check needs its
# own figure (one session alone, from its sim.log) until the next such refresh.
ICARUS_SECONDS = {
    "kmd_ioctl__check_bind_and_info": 0.11, "kmd_ioctl__check_dispatch_errors": 0.09, "kmd_ioctl__check_gem": 0.10,
    "kmd_ioctl__check_gem_errors": 0.06, "kmd_ioctl__check_ctx": 0.09, "kmd_ioctl__check_cs_and_wait": 0.18,
    "kmd_ioctl__check_cs_errors": 0.08, "kmd_ioctl__check_cs_checker": 0.14, "kmd_ioctl__check_trace": 0.09,
    # (these eight: the median of three Icarus sessions of the eight, `-k kmd_checker__`, 4 December 2026)
    "kmd_checker__check_read_side": 0.13, "kmd_checker__check_ranges_at_the_end_of_a_bo": 0.40,
    "kmd_checker__check_lowest_bo_and_wrapped_addresses": 0.08, "kmd_checker__check_bad_packet_before_a_chain": 0.05,
    "kmd_checker__check_shared_chain_target": 0.45, "kmd_checker__check_job_limits_exact": 1.10,
    "kmd_checker__check_deepest_level_chain_rules": 0.20,
    "kmd_checker__check_shadow_layout_and_client_addresses": 2.26,
    "kmd_fence__check_fence_wrap": 18.52, "kmd_fence__check_fence_wrap_in_one_interrupt": 0.40,
    "kmd_fence__check_wait_reg_mem_released_later": 0.38, "kmd_fence__check_fallback_poll": 0.64,
    "kmd_fence__check_ring_full": 0.59, "kmd_fence__check_bo_kept_alive": 0.09,
    "kmd_reset__check_cp_error_recovery": 0.22, "kmd_reset__check_hw_errors_decoded": 0.47,
    "kmd_reset__check_timeout_recovery": 2.28,
    "kmd_reset__check_an_sdma_job_behind_the_cps_long_nop_is_not_taken_for_stuck": 6.85,
    "kmd_reset__check_sdma_queue_reset_behind_the_cps_long_nop_stays_a_queue_reset": 8.26,
    # (these two: the median of three Icarus sessions of the two, `-k kmd_ih__`, 4 December 2026;
    # 78-99 s: 1,101 jobs, each a CS ioctl, an interrupt and its handler)
    "kmd_ih__check_ih_ring_wraps_many_times": 5.30, "kmd_ih__check_ih_overflow": 1.37,
    "kmd_ih__check_one_interrupt_per_entry_though_the_write_back_is_late": 0.14,
    "kmd_vm__check_gem_va_errors": 0.05,
    "kmd_vm__check_page_tables_in_memory": 0.14, "kmd_vm__check_vmids": 0.45, "kmd_vm__check_vm_fault_reported": 0.12,
    "kmd_vm__check_close_releases_everything": 0.08, "kmd_queues__check_copy_ring_on_this_backend": 0.10,
    "kmd_queues__check_dependencies_bounce_between_rings_gpu_side": 0.12,
    "kmd_queues__check_amd_queue_reset_malformed": 0.15, "kmd_queues__check_amd_queue_reset_hang": 1.09,
    "kmd_queues__check_amd_queue_reset_bus_error": 0.28,
    "kmd_queues__check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job": 0.39,
    # (these two: one Icarus session of the two under a loaded machine, 6 December 2026: 5.7 and 18.3 s,
    # about 2.3x what the machine alone gives)
    "kmd_queues__check_a_queue_0_reset_while_queue_1_fills_keeps_queue_1s_transfers": 1.45,
    "kmd_queues__check_a_queue_0_reset_while_the_sdma_copies_stays_a_queue_reset": 9.18,
    "kmd_queues__check_gem_reset_stats_innocent_work_on_the_reset_ring_is_resubmitted": 1.65,
    "kmd_queues__check_high_priority_context_runs_on_the_cps_second_queue": 0.28,
    "kmd_queues__check_a_vm_fault_on_the_cps_second_queue_resets_that_queue_and_is_reported": 0.15,
    "kmd_queues__check_a_hang_on_one_cp_queue_is_found_while_the_other_queue_works": 5.11,
    "kmd_queues__check_an_unchecked_loop_on_one_cp_queue_is_reset_by_its_dwords_while_the_other_works": 5.93,
    "umd_queues__check_copy_queue_runs_on_the_copy_engine": 0.57,
    "umd_queues__check_pipeline_across_queues_waits_gpu_side": 0.15, "umd_queues__check_copy_pipeline_example": 0.42,
    "umd_api__check_versions": 0.16, "umd_api__check_defaults_and_help": 0.08, "umd_batching__check_batching": 8.01,
    "umd_batching__check_flush_by_dwords": 0.24, "umd_cmdbuf__check_chaining_on_device": 1.94,
    "umd_memory__check_buffers_at_virtual_addresses": 0.72, "umd_memory__check_slabs_and_cache_reuse": 0.13,
    "umd_memory__check_pools_off_costs_ioctls": 0.12, "umd_memory__check_zeroed_unless_asked": 0.05,
    "umd_memory__check_pools_example": 2.97, "umd_runtime__check_buffers_and_writes": 0.46,
    "umd_runtime__check_events_across_wrap": 23.47, "umd_runtime__check_wait_mem_released_later": 0.45,
    "umd_runtime__check_events_check_memory_first": 0.16, "umd_runtime__check_argument_errors": 0.06,
    "umd_runtime__check_gpu_error_decoded": 0.12, "umd_runtime__check_submit_refused": 0.09,
    "umd_runtime__check_timestamp_and_fill": 0.14, "umd_runtime__check_a_loop_of_signalled_ends_when_the_gpu_gets_there": 0.17, "umd_transfer__check_random_transfers": 14.21,
    "umd_transfer__check_split_and_raw": 0.23, "umd_transfer__check_transfer_errors": 0.09,
    "umd_transfer__check_fence_after_dma_sees_the_data": 2.57, "umd_transfer__check_transfers_under_backpressure": 5.72,
    "umd_transfer__check_raw_chain_under_write_latency": 0.51,
    "umd_lost_failures__check_a_copy_queues_failed_job_reaches_finish": 0.16,
    "security__check_toctou_cpu_rewrite": 0.28, "security__check_toctou_gpu_rewrite": 0.11,
    "security__check_fake_fence": 1.47, "security__check_innocent_not_blamed": 0.12,
    "security__check_reserved_bits_refused": 0.19, "security__check_cp_rules_refused": 0.05,
    "security__check_accepted_streams_run_clean": 0.85, "security__check_stale_mapping": 0.07,
    "security__check_no_stale_data": 0.06,
    # (hostile-11: 5.62, 5.79, 5.88 s in three Icarus sessions of it alone, 6 December 2026)
    "security__check_a_write_under_way_at_an_unmap_lands_before_the_page_is_handed_out": 0.70,
    "security__check_fence_wrap_from_top": 0.55,
    "security__check_fence_wrap_from_zero": 0.53, "security__check_held_cp_flushes": 7.93,
    "security__check_out_of_memory": 1.01, "security__check_limits_exact": 0.99,
    "security__check_hostile_ioctl_arguments": 0.09, "amd_conformance__check_amd_streams_run": 0.09,
    "amd_conformance__check_amd_differences_refused": 0.07, "amd_conformance__check_kmd_programs_like_amdgpu": 0.10,
    "amd_conformance__check_kmd_accepts_amd_streams": 0.12, "vm_isolation__check_hostile_reach_faults": 4.71,
    "vm_isolation__check_unmap_while_in_use": 0.13, "vm_isolation__check_remap_to_another_bo": 0.13,
    "vm_isolation__check_invalidation_races_dma": 5.58, "vm_isolation__check_close_while_dma_reads": 0.48,
    "contract_driver__check_ring_doorbell_and_writeback": 0.06, "contract_driver__check_doorbell_errors": 0.09,
    "contract_driver__check_ib_levels_and_chain": 0.13, "contract_driver__check_packet_checks": 0.14,
    "contract_driver__check_wait_reg_mem": 0.16, "contract_driver__check_release_mem_and_eop_entry": 0.05,
    "contract_driver__check_ih_ring_wrap_and_overflow": 0.12, "contract_driver__check_dma_data": 1.11,
    "contract_driver__check_cp_own_writes_fail_as_the_packet": 0.12,
    "contract_driver__check_dma_errors_and_counters": 0.09,
    "contract_driver__check_int_force_and_release_mem_alignment": 0.03,
    "contract_driver__check_packet_rules_in_ibs": 0.19, "contract_driver__check_ih_overflow_of_an_error_entry": 0.04,
    "contract_driver__check_every_listed_value_and_reserved_bit": 0.64,
    "contract_engines__check_sdma_ring_and_packets": 0.74, "contract_engines__check_sdma_errors": 0.09,
    "contract_engines__check_cp_queue_priority": 0.30,
    "contract_engines__check_entries_name_their_queue_and_vmid": 0.12,
    "contract_engines__check_sdma_vm_and_address_rules": 0.11,
    "contract_engines__check_every_sdma_listed_value_and_reserved_bit": 0.32,
    "contract_engines__check_sdma_entries_raise_no_event_bit": 0.04,
    "contract_vm__check_vm_translation_faults_and_invalidate": 0.31,
    "contract_vm__check_vm_fault_status_follows_the_stopped_queue": 0.08,
    "contract_vm__check_vm_entry_bits_and_walk_errors": 0.07,
    "contract_vm__check_vm_fault_addresses_at_page_edges": 0.09,
    "contract_vm__check_vm_new_tables_need_an_invalidation": 0.06,  # (one Icarus session alone, 6 December 2026)
    "contract_control__check_soft_reset_keeps_settings": 0.10, "contract_control__check_resets_keep_registers": 0.06,
    "contract_control__check_perf_clear_clears_every_counter": 0.05,
    "contract_control__check_ring_base_and_size_are_locked_while_enabled": 0.08,
    "contract_bare_metal__check_cp_ring_fence_and_eop": 0.29,
    "contract_bare_metal__check_sdma_ring_fence_and_trap": 0.16,
    "contract_bare_metal__check_cp_bad_packet_and_soft_reset": 0.06,
    "contract_bare_metal__check_sdma_bad_packet_and_queue_reset": 0.04,
    "contract_bare_metal__check_queue_resets_under_load_and_sdma_doorbell_error": 0.11,
    # (these four: one Icarus session each, 7 December 2026, load average 2.5)
    "contract_bare_metal__check_bring_up_all_three_rings_at_once_ih_overflow_and_shut_down": 0.79,
    "contract_bare_metal__check_every_cp_error_kind_on_queue_1_and_its_reset_while_queue_0_and_the_sdma_run": 0.43,
    "contract_bare_metal__check_shutdown_with_work_left_paused_then_reset_or_resumed": 0.37,
    "contract_bare_metal__check_soft_reset_with_all_three_rings_busy": 0.11,
    "contract_control__check_halts_stop_at_a_packet_boundary": 0.10,
    "contract_control__check_halted_shows_while_the_other_queue_is_stopped_by_an_error": 0.09,  # (alone, 6 Dec 2026)
    "contract_control__check_partial_doorbells_overflow_and_control_writes": 0.68,  # (alone, 6 Dec 2026)
    "contract_control__check_idle_reads_0_until_a_doorbell_is_taken": 0.41,
    "contract_control__check_ring_enable_pauses_at_a_packet_boundary": 0.15,
    # (4.6/5.7/7.5 s, load average 4.6 with a P&R running: 21 rounds of a 304-dword packet)
    "contract_control__check_ring_enable_cleared_mid_packet_pauses_at_a_packet_boundary": 4.45,
    # (0.29/0.26/0.33 s alone, 4 December, load average 3-5)
    "contract_control__check_rptr_write_back_address_is_locked_while_enabled": 0.29,
    # (0.163/0.159/0.154 s alone, 4 December, load average 4.4 with a P&R running)
    "contract_control__check_ih_wptr_write_back_address_is_locked_while_enabled": 0.22,
    # (1.12/0.57/0.57 s alone, 5 December, load average 2-3)
    "contract_control__check_ih_entry_in_hand_when_enable_is_cleared_finishes": 1.28,
    # (round 3, each from one Icarus session of the new checks, 6 December 2026, load average
    # 3-4 with a P&R and the bench running; the 4 MiB SDMA transfers are not run on Icarus)
    "contract_driver__check_dma_data_edges_and_counters": 0.52,  # (its 1 MiB fill not on Icarus)
    "contract_driver__check_timestamp_and_busy_counters": 0.75,
    "contract_engines__check_sdma_copy_fill_write_edges": 0.80,
    "contract_engines__check_sdma_poll_trap_errors_resets_and_doorbells": 2.47,  # (6.2 and 13.2)
    "contract_engines__check_cp_and_sdma_side_by_side": 3.71,
    "contract_engines__check_sdma_wrap_nop_halt_errors_and_cross_engine_waits": 2.37,
    "contract_control__check_ih_ring_with_both_engines_odd_rptrs_and_enable": 0.26,
    "contract_control__check_ring_and_ih_sizes_at_their_largest": 0.07,
    "contract_control__check_halted_holds_while_the_halted_cp_takes_a_doorbell_error_or_an_entry": 0.09,
    "contract_control__check_sdma_entry_waits_for_the_cp_packet_in_hand": 1.48,
    "kmd_queues__check_sdma_queue_reset_behind_the_cps_long_packet_stays_a_queue_reset": 1.68,  # (one Icarus run, 6 December 2026)
    "kmd_queues__check_an_sdma_job_behind_the_cps_long_packet_is_not_taken_for_stuck": 1.51,  # (one Icarus run, 6 December 2026)
    "kmd_queues__check_a_checked_job_of_long_fills_is_reset_by_the_time_rule": 4.16,  # (one Icarus run, 6 December 2026)
    "kmd_queues__check_a_high_poll_held_off_by_queue_0_s_transfers_is_not_taken_for_stuck": 6.10,  # (one Icarus run, 6 December 2026)
    # (one Icarus run each, 6 December 2026: 0.96 and 1.16 s)
    "kmd_queues__check_a_gfx_vm_fault_resets_queue_0_alone_and_an_innocent_sdma_job_is_not_run_again": 1.01,
    "kmd_queues__check_a_queue_0_reset_that_does_not_come_back_falls_to_the_full_reset": 1.20,
    "kmd_queues__check_a_cp_queue_reset_behind_the_other_queues_long_packet_stays_a_queue_reset": 3.59,  # (one run)
    "kmd_queues__check_a_flood_on_queue_1_does_not_turn_queue_0_s_reset_into_the_full_reset": 1.56,  # (one run)
    "kmd_queues__check_a_poll_released_behind_queue_1_s_flood_is_not_taken_for_stuck": 1.74,  # (one run)
    # (one Icarus run, 6 December 2026, beside the one above, which took 1.97 s there)
    "kmd_queues__check_a_poll_released_behind_queue_1_s_flood_with_a_later_poll_still_to_come_is_not_taken_for_stuck": 1.69,
    "contract_vm__check_cp_and_sdma_vm_faults_at_once": 0.03,
    # (one Icarus session of each group, 6 December 2026)
    "contract_vm__check_vm_invalidation_names_vmids_and_pages": 0.12,
    "contract_vm__check_vm_poll_remap_and_accesses_that_move_nothing": 0.10,
    "contract_vm__check_vm_fault_entries_of_both_queues_and_a_full_ih_ring": 0.06,
    "contract_vm__check_sdma_fetch_faults_at_page_edges_and_virtual_addresses": 0.06,
    "contract_vm__check_cp_queues_keep_their_vmids_across_turns_and_resets": 0.43,
    "contract_engines__check_queue_resets_at_once_halted_and_their_write_backs": 0.10,
    "contract_engines__check_equal_priority_turns_after_one_queue_ran_alone": 0.32,
    "contract_engines__check_transfers_keep_war_and_waw_order": 2.16,
    # (driver-writer-4: one Icarus session, 64-bit bus, 6 December 2026)
    "contract_engines__check_sdma_ring_size_above_20_and_the_longest_write_linear": 0.09,
    "contract_engines__check_sdma_poll_reads_are_16_interval_cycles_apart": 0.10,
    "contract_vm__check_vm_leaf_beyond_memory_is_a_bus_error_at_the_virtual_address": 0.11,
    "contract_vm__check_soft_reset_keeps_the_tlb_and_clears_the_fault": 0.07,
    "contract_vm__check_sdma_accesses_need_what_the_cps_do": 0.14,
    "contract_vm__check_vm_page_taken_away_while_polling_faults_the_poll": 0.17,
    "contract_vm__check_queue_resets_during_a_walk_leave_no_error": 0.42,
    "contract_control__check_ih_rptr_written_in_part_and_ahead_of_the_wptr": 0.04,
    "contract_vm__check_vmid_0_translated_moves_the_kernels_own_traffic": 0.06,
    "contract_engines__check_sdma_rptr_write_back_fails_as_the_packet": 0.03,
    "contract_vm__check_ih_entry_writes_that_fault_under_vmid_0": 0.05,
    "contract_vm__check_vm_permission_fault_keeps_its_leaf": 0.07,
    "contract_engines__check_sdma_halt_stops_inside_an_ib": 0.07,
    "contract_control__check_ih_ring_moved_and_resized_keeps_its_pointers": 0.07,
    "contract_vm__check_soft_reset_while_the_sdma_reports_an_error_leaves_no_entry": 5.33,  # (one run, loaded)
    # (driver-writer-11: one Icarus session each, 64-bit bus, loaded machine, 7 December 2026)
    "contract_control__check_every_register_reads_its_reset_value": 0.51,
    "contract_control__check_read_only_registers_ignore_whole_writes": 0.74,
    "contract_control__check_doorbells_that_move_nothing_and_rejected_ones": 1.46,
    "contract_engines__check_ib_size_every_bit_up_to_the_largest": 2.72,
    "contract_engines__check_count_fields_out_of_range": 2.67,
    "contract_control__check_ring_bases_and_write_back_addresses_reach_the_bus": 8.60,
    "contract_engines__check_packet_addresses_reach_the_bus": 10.31,
    "contract_control__check_soft_reset_returns_the_hardware_registers_to_their_reset_state": 0.87,
    "contract_control__check_rings_resized_and_moved_while_disabled_keep_their_pointers": 0.50,
    "contract_engines__check_every_header_type_and_unknown_opcodes": 1.85,
    "contract_control__check_every_vmid_has_its_own_tables": 3.64,
    "contract_engines__check_a_packet_whose_payload_cannot_be_fetched_is_not_counted": 2.97,
    "contract_engines__check_errors_inside_a_chained_ib": 1.49,
    "contract_engines__check_byte_counters_count_the_copy_engines_alone": 0.82,
    "contract_engines__check_byte_counters_count_no_refused_write": 0.97,
    "contract_engines__check_dwords_fetched_up_to_a_packet_error": 1.79,  # (driver-writer-13: more cases, queue 1)
    # (driver-writer-5: one Icarus session each, 64-bit bus, 6 December 2026)
    "contract_driver__check_release_mem_without_data_and_a_fill_value": 0.06,
    "contract_engines__check_queue_1_dma_status_and_queue_resets_during_it": 1.59,
    "contract_engines__check_queue_reset_while_each_packet_kind_runs": 1.26,
    "contract_engines__check_doorbell_errors_while_an_ib_waits": 0.51,
    "contract_engines__check_a_queue_stopped_at_any_point_of_its_parked_poll_shows_no_waiting": 7.16,
    "contract_engines__check_dma_raw_wait_and_reads_after_earlier_writes": 0.70,
    "contract_driver__check_chain_at_the_deepest_level_and_its_vmid": 0.10,
    "contract_engines__check_priority_written_while_both_queues_have_work_and_a_fast_poll": 0.72,
    "contract_driver__check_count_0x3fff_is_the_one_dword_form_of_nop_alone": 6.91,  # (16 K writes: 42 K cycles)
    "contract_engines__check_doorbell_error_of_the_queue_not_running_is_taken_at_once": 2.09,
    "contract_engines__check_poll_counters_count_each_queue_s_reads": 0.21,  # (one run, loaded)
    "kmd_queues__check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone": 1.21,  # (one run)
    # (driver-writer-6: one Icarus session each, 64-bit bus, 6 December 2026, load average 5-6)
    "contract_csr__check_every_offset_answers_as_registers_md_lists": 0.53,  # (0.91, 0.56)
    "contract_csr__check_bits_no_field_names_read_0": 0.28,  # (0.40, 0.65)
    "contract_csr__check_byte_writes_of_every_register_kind": 0.09,  # (0.11, 0.30)
    "contract_csr__check_irq_is_int_status_and_int_enable_bit_by_bit": 0.02,  # (0.06, 0.08)
    "contract_driver__check_slverr_and_decerr_inside_memory_for_every_access": 0.15,  # (0.34, 0.86, 1.35)
    "contract_engines__check_ih_entry_of_every_source_fills_its_fields_alone": 0.06,  # (0.16, 0.41)
    "contract_driver__check_dma_errors_name_the_faulting_burst_and_beat_at_every_bus_width": 0.22,
    "contract_control__check_error_address_and_offset_clear_with_the_error": 0.12,
    "contract_driver__check_the_smallest_ring_of_two_dwords": 0.03,  # (0.11, 0.38)
    "contract_control__check_tlb_and_dma_busy_counters": 0.09,
    "contract_driver__check_fetch_errors_only_where_the_parser_needs_a_dword": 0.08,  # (0.19 with the SDMA's, 0.26)
    "contract_control__check_timestamp_runs_on_through_perf_clear_and_soft_reset": 0.01,
    "contract_vm__check_vm_walks_and_leaves_in_memory_answering_slverr": 0.05,
    "contract_driver__check_write_data_error_inside_a_block": 0.08,  # (0.77, 0.28)
    "contract_driver__check_ih_entry_write_refused_in_its_middle": 0.04,
    # (driver-writer-7: one Icarus session each, 64-bit bus, 7 December 2026, alone)
    "contract_engines__check_write_linear_is_counted_once_its_last_dword_is_read": 0.14,
    "contract_driver__check_poll_interval_0_acts_as_1_and_counts_from_each_answer": 0.28,
    "contract_control__check_soft_reset_leaves_sdma_cntl_a_halted_sdma_stays_halted": 0.04,
    "contract_driver__check_a_transfer_whose_reads_and_writes_both_fail_reports_one": 0.06,
    "contract_control__check_counters_survive_every_reset_but_perf_clear": 0.08,
    "contract_control__check_tlb_counters_count_a_faulting_walk_and_no_faulting_hit": 0.17,
    "kmd_uapi_contract__check_open_and_info": 0.07, "kmd_uapi_contract__check_gem_create": 0.06,
    "kmd_uapi_contract__check_gem_handles_are_per_file": 0.05, "kmd_uapi_contract__check_gem_mmap": 0.05,
    "kmd_uapi_contract__check_gem_va": 0.06, "kmd_uapi_contract__check_close_gives_everything_back": 0.13,
    "kmd_uapi_contract__check_open_with_vram_full": 0.07,
    "kmd_uapi_contract__check_values_that_raise_when_their_type_is_asked": 0.05,
    "kmd_uapi_contract_cs__check_ctx": 0.09, "kmd_uapi_contract_cs__check_cs": 0.25,
    "kmd_uapi_contract_cs__check_cs_other_files_objects": 0.10, "kmd_uapi_contract_cs__check_waits": 0.21,
    "kmd_uapi_contract_cs__check_gem_va_as_the_gpu_sees_it": 0.26, "kmd_uapi_contract_cs__check_reset_status": 1.50,
    "kmd_uapi_contract_cs__check_dma_ring": 0.23,
    # (driver-writer-9: one Icarus session each, 64-bit bus, 7 December 2026, alone)
    "contract_csr__check_offsets_beyond_the_aperture_are_refused_not_aliased": 0.12,
    "contract_driver__check_the_packet_of_an_interrupt_finishes_after_its_entry": 0.74,
    "contract_driver__check_rptr_passes_a_transfer_before_its_data_idle_waits_for_it": 2.26,
    "contract_driver__check_release_mem_timestamp_is_taken_after_earlier_transfers": 2.04,
    "contract_driver__check_only_a_reset_ends_a_stopped_queue": 0.43,
    # (driver-writer-12: one Icarus session each, 64-bit bus, 7 December 2026, beside a Verilator build)
    "contract_engines__check_sdma_packet_checks_fail_in_their_documented_order": 1.51,
    "kmd_uapi_info__check_dev_info_is_what_the_registers_say": 0.28,
    "kmd_uapi_info__check_counters_are_the_perf_registers": 1.29,
    "contract_control__check_dwords_past_a_doorbell_run_as_written_before_the_next": 3.82,
    "contract_control__check_write_back_addresses_ignore_bits_1_0": 0.27,
    "contract_engines__check_cp_listed_values_act_as_documented": 1.01,
    "contract_engines__check_sdma_poll_regmem_compares_unsigned": 0.37,
    "contract_vm__check_tlb_holds_2_to_the_tlb_log2_pages_of_any_addresses": 0.42,
    # (driver-writer-13: one Icarus session each, 64-bit bus, 7 December 2026, beside Verilator runs)
    "contract_engines__check_sdma_dwords_fetched_up_to_a_packet_error": 1.05,
    "contract_control__check_errors_after_the_ring_wrapped_name_the_header_where_it_lies": 0.89,
    "contract_driver__check_busy_counters_count_a_held_queue_with_work_not_a_stopped_one": 2.71,
    "contract_control__check_a_dropped_entry_writes_no_wptr_write_back": 0.27,
    "contract_driver__check_poll_counters_count_a_faulting_read_and_none_beyond_the_bus": 0.29,
    "contract_engines__check_sdma_trap_enable_gates_the_trap_s_entry_alone": 0.39,
    "contract_vm__check_vm_faults_past_a_huge_page_s_end": 0.52,
    # (driver-writer-14: one Icarus session each, 64-bit bus, 7 December 2026)
    "contract_control__check_sdma_poll_timeout_and_error_entries_lost_disabled_dropped_full": 0.40,
    "contract_driver__check_stall_cycles_count_memory_waits_not_holds": 1.72,
    "contract_control__check_soft_reset_with_ih_rptr_left_ahead_drops_every_entry": 0.60,
    # (driver-writer-15: one Icarus session each, 64-bit bus, 7 December 2026, beside Verilator runs)
    "contract_vm__check_an_executable_page_is_fetched_not_read": 1.41,
    "contract_vm__check_vm_fault_status_shows_a_fault_beside_the_other_queue_s_other_error": 0.19,
    "contract_control__check_doorbells_during_a_reset_are_ignored": 2.27,
    "contract_vm__check_a_huge_page_s_executable_bit_gates_fetches_from_it": 1.05,
    "contract_vm__check_a_vmid_switched_off_is_physical_whatever_the_tlb_holds": 0.29,
    "contract_vm__check_an_invalidation_written_over_a_pending_one_replaces_it": 0.28,
    # (driver-writer-16: one Icarus session each, 64-bit bus, 7 December 2026, beside other runs)
    "contract_control__check_each_reset_changes_only_what_it_resets_in_the_whole_register_map": 5.17,
    "contract_control__check_a_halted_sdma_stopped_by_its_doorbell_shows_error_not_halted": 0.33,
}
SHORT_CHECK_SECONDS = 0.21  # a check not yet measured (the mean of the 109 under 0.9 s)
SHARDS = {"verilator": 1, "icarus": 4}  # simulator sessions per simulator, every check


# make test runs every check on Verilator, and on Icarus only this subset: one check of each
# module of MODULES, the one with the smallest Icarus time above (the first of its CHECKS on a
# tie; chosen so, 7 December 2026). Every check on Icarus took about 495 s of the 2,230 s of
# worker time of a fresh clone's make test (four sessions: each check's second run, after
# Verilator's); these 53 run in one session. `make test ICARUS=all` ($GPUCOSIM_ICARUS=all)
# runs every check on Icarus in the four shards below (docs/verification.md). A module added to
# MODULES needs its entry here (tests/cosim/test_rtl_drivers.py fails without it).
ICARUS_ENV = "GPUCOSIM_ICARUS"
ICARUS_SUBSET = {
    "kmd.test_kmd_ioctl": "kmd_ioctl__check_gem_errors",
    "kmd.test_kmd_checker": "kmd_checker__check_bad_packet_before_a_chain",
    "kmd_sched.test_kmd_fence": "kmd_fence__check_bo_kept_alive",
    "kmd_sched.reset.test_kmd_reset": "kmd_reset__check_cp_error_recovery",
    "kmd_sched.test_kmd_ih": "kmd_ih__check_one_interrupt_per_entry_though_the_write_back_is_late",
    "kmd.memory.test_kmd_vm": "kmd_vm__check_gem_va_errors",
    "kmd_sched.queues.test_kmd_queues_scheduling": "kmd_queues__check_copy_ring_on_this_backend",
    "kmd_sched.queues.test_kmd_queues_resets": "kmd_queues__check_amd_queue_reset_malformed",
    "kmd_sched.queues.test_kmd_queues_full_reset":
        "kmd_queues__check_a_full_reset_takes_the_other_rings_pending_error_with_its_guilty_job",
    "kmd_sched.queues.test_kmd_queues_stuck":
        "kmd_queues__check_a_checked_job_of_long_fills_is_reset_by_the_time_rule",
    "kmd_sched.queues.test_kmd_queues_not_stuck":
        "kmd_queues__check_a_flood_of_polls_that_hold_at_once_on_queue_1_leaves_a_parked_job_alone",
    "umd.submission.test_umd_queues": "umd_queues__check_pipeline_across_queues_waits_gpu_side",
    "umd.api.test_umd_api": "umd_api__check_defaults_and_help",
    "umd.submission.test_umd_batching": "umd_batching__check_flush_by_dwords",
    "umd.submission.test_umd_cmdbuf": "umd_cmdbuf__check_chaining_on_device",
    "umd.memory.test_umd_memory": "umd_memory__check_zeroed_unless_asked",
    "umd.api.test_umd_runtime": "umd_runtime__check_argument_errors",
    "umd.memory.test_umd_transfer": "umd_transfer__check_transfer_errors",
    "umd.failures.test_umd_lost_failures": "umd_lost_failures__check_a_copy_queues_failed_job_reaches_finish",
    "security.cs.test_security_toctou": "security__check_toctou_gpu_rewrite",
    "security.cs.test_security_checker": "security__check_cp_rules_refused",
    "security.memory.test_security_mappings": "security__check_no_stale_data",
    "security.limits.test_security_umd": "security__check_fence_wrap_from_zero",
    "security.cs.test_security_ioctl": "security__check_hostile_ioctl_arguments",
    "spec.amd.test_amd_conformance": "amd_conformance__check_amd_differences_refused",
    "security.memory.test_vm_isolation": "vm_isolation__check_unmap_while_in_use",
    "model.contract.test_contract_driver": "contract_driver__check_the_smallest_ring_of_two_dwords",
    "model.contract.test_contract_dma":
        "contract_driver__check_a_transfer_whose_reads_and_writes_both_fail_reports_one",
    "model.contract.test_contract_bus_errors": "contract_driver__check_ih_entry_write_refused_in_its_middle",
    "model.contract.test_contract_release_mem_and_ih": "contract_driver__check_int_force_and_release_mem_alignment",
    "model.contract.engines.test_contract_sdma_packets":
        "contract_engines__check_sdma_ring_size_above_20_and_the_longest_write_linear",
    "model.contract.engines.test_contract_sdma_errors":
        "contract_engines__check_sdma_rptr_write_back_fails_as_the_packet",
    "model.contract.engines.test_contract_cp_queues":
        "contract_engines__check_queue_resets_at_once_halted_and_their_write_backs",
    "model.contract.engines.test_contract_both_engines":
        "contract_engines__check_ih_entry_of_every_source_fills_its_fields_alone",
    "model.contract.test_contract_vm": "contract_vm__check_cp_and_sdma_vm_faults_at_once",
    "model.contract.test_contract_vm_tlb": "contract_vm__check_vm_new_tables_need_an_invalidation",
    "model.contract.test_contract_vm_sdma_and_vmid_0": "contract_vm__check_ih_entry_writes_that_fault_under_vmid_0",
    "model.contract.control.test_contract_resets":
        "contract_control__check_timestamp_runs_on_through_perf_clear_and_soft_reset",
    "model.contract.control.test_contract_halts":
        "contract_control__check_halted_shows_while_the_other_queue_is_stopped_by_an_error",
    "model.contract.control.test_contract_rings": "contract_control__check_ring_and_ih_sizes_at_their_largest",
    "model.contract.control.test_contract_ih_ring":
        "contract_control__check_ih_rptr_written_in_part_and_ahead_of_the_wptr",
    "model.contract.control.test_contract_edges":
        "contract_control__check_rings_resized_and_moved_while_disabled_keep_their_pointers",
    "model.contract.engines.test_contract_packet_edges":
        "contract_engines__check_byte_counters_count_the_copy_engines_alone",
    "model.contract.test_contract_bare_metal": "contract_bare_metal__check_sdma_bad_packet_and_queue_reset",
    "model.contract.test_contract_bare_metal_three_rings":
        "contract_bare_metal__check_soft_reset_with_all_three_rings_busy",
    "model.contract.test_contract_csr": "contract_csr__check_irq_is_int_status_and_int_enable_bit_by_bit",
    "kmd.uapi.test_kmd_uapi_contract": "kmd_uapi_contract__check_gem_handles_are_per_file",
    "kmd.uapi.test_kmd_uapi_contract_cs": "kmd_uapi_contract_cs__check_ctx",
    "model.contract.engines.test_contract_sdma_check_order":
        "contract_engines__check_sdma_packet_checks_fail_in_their_documented_order",
    "kmd.uapi.test_kmd_uapi_info": "kmd_uapi_info__check_dev_info_is_what_the_registers_say",
    "model.contract.control.test_contract_fetch_bounds":
        "contract_control__check_dwords_past_a_doorbell_run_as_written_before_the_next",
    "model.contract.control.test_contract_write_back_bits":
        "contract_control__check_write_back_addresses_ignore_bits_1_0",
    "model.contract.engines.test_contract_listed_values_act":
        "contract_engines__check_sdma_poll_regmem_compares_unsigned",
}


def icarus_scope(spec: str | None = None) -> str:
    """Which driver checks run on Icarus under `spec` ($GPUCOSIM_ICARUS when None): "subset"
    (unset, empty or "subset": ICARUS_SUBSET) or "all". Anything else is a one-line ValueError."""
    spec = (os.environ.get(ICARUS_ENV, "") if spec is None else spec).strip()
    if spec in ("", "subset"):
        return "subset"
    if spec == "all":
        return "all"
    raise ValueError(f"{ICARUS_ENV}={spec!r}: choose all (every driver check on Icarus) or subset "
                     "(one check of each module, make test's), or leave it empty")


def checks_of_module(mod_name: str) -> list[str]:
    """The names all_checks() gives the checks of module `mod_name` (an entry of MODULES)."""
    mod = importlib.import_module(f"tests.{mod_name}")
    return [f"{_group(mod_name)}__{check.__name__}" for check in mod.CHECKS]


def sessions(simulator: str, scope: str | None = None) -> list[tuple[str, list[str]]]:
    """The simulator sessions that run the checks on `simulator`: (label, check names) each.
    Every check, in shards(simulator), except on Icarus under the "subset" scope (`scope`, or
    $GPUCOSIM_ICARUS's): ICARUS_SUBSET in one session, labelled "subset"."""
    if simulator == "icarus" and (scope or icarus_scope()) == "subset":
        # (in all_checks() order; a name that is no check is left out here, and named by the test)
        chosen = set(ICARUS_SUBSET.values())
        return [("subset", [c for c in all_checks() if c in chosen])]
    return [(str(k), names) for k, names in enumerate(shards(simulator))]


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


def _simulator(text: str) -> str:
    """--sim's value: a simulator, or the simulator layer's one line (argparse's "invalid
    choice" worded it otherwise than every other --sim)."""
    import argparse

    from testbench import sim

    if text not in sim.SIMULATORS:
        raise argparse.ArgumentTypeError(sim.unknown_simulator(text))
    return text


def _main(argv=None) -> int:
    """`python -m tests.cosim.driver_checks`: run the driver checks on the RTL outside pytest,
    at any bus width and memory (make test runs them at 64 bits on the default memory)."""
    from testbench import sim
    from testbench.argtypes import OneLineParser
    from testbench.sim.design import gpu_design

    p = OneLineParser(prog="python -m tests.cosim.driver_checks", description=_main.__doc__)
    p.add_argument("--sim", default="verilator", type=_simulator, metavar="{" + ",".join(sim.SIMULATORS) + "}")
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
