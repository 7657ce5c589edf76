"""The driver checks on a device whose addresses all have a high dword: 8 GiB of memory
(GTT lies above 4 GiB) and a 3-level VM (39-bit virtual addresses) whose user range
starts above 4 GiB.

Every other model test runs on 64 MiB with a 2-level VM (1 GiB of virtual addresses),
where every address's high dword is 0, so an address put together or taken apart wrongly
(`hi << 33`, `hi >> 32`, a high dword dropped) goes unseen in the KMD's checker and
timeout diagnosis, the UMD's packets, the page tables and the CP alike. Here the clients'
virtual addresses (what their packets name), the shadow copies' kernel range and the
physical memory behind them (what the kernel's own packets and the page tables name) all
sit above 4 GiB, so ADDR_HI, IB_BASE_HI, SRC_ADDR_HI and DST_ADDR_HI are non-zero in every
packet a check builds. The model's memory is sparse: 8 GiB costs only the pages touched.

The three security checks about limits (held flushes, out of memory, exact limits) and the
uAPI check that fills VRAM are left out: they are about counts, not addresses, and take seconds each; so are the checks
that assert the default VM's layout (2 levels of page tables, the user range's bottom at
1 MiB) or a trace line's width, which this device changes on purpose.
"""

from __future__ import annotations

import importlib

import pytest

import kmd_model
from kmd_model.mm import vm as kmd_vm
from kmd_model.uapi import Domain
from testbench.refmodel import RefModel

from tests.cosim import driver_checks
from ..test_kmd_ioctl import Client

MEM_SIZE = 8 << 30
VM_LEVELS = 3
VA_BOTTOM = (4 << 30) + kmd_vm.VA_RESERVED_BOTTOM  # the VM's user range starts above 4 GiB


@pytest.fixture(autouse=True)
def _high_va(monkeypatch):
    monkeypatch.setattr(kmd_vm, "VA_RESERVED_BOTTOM", VA_BOTTOM)


def _device() -> RefModel:
    return RefModel(mem_size=MEM_SIZE, vm_levels=VM_LEVELS)
SLOW = ("security__check_held_cp_flushes", "security__check_out_of_memory", "security__check_limits_exact",
        "kmd_uapi_contract__check_open_with_vram_full")  # (zero-fills 4 GiB of VRAM here: 10 s)
LAYOUT = ("kmd_ioctl__check_bind_and_info", "kmd_ioctl__check_trace", "kmd_vm__check_page_tables_in_memory",
          "kmd_vm__check_vm_fault_reported", "kmd_vm__check_close_releases_everything",
          "vm_isolation__check_unmap_while_in_use",
          # the outside driver's checks that read the default build's layout: 64 MiB of
          # memory (DECERR beyond it), the 2-level VM's 30-bit reach and its root's indexing
          "contract_driver__check_cp_own_writes_fail_as_the_packet",
          "contract_driver__check_dma_errors_and_counters",
          "contract_engines__check_sdma_vm_and_address_rules",
          "contract_engines__check_sdma_entries_raise_no_event_bit",
          "contract_control__check_soft_reset_keeps_settings",
          "contract_vm__check_vm_translation_faults_and_invalidate",
          "contract_vm__check_vm_fault_status_follows_the_stopped_queue",
          "contract_vm__check_vm_entry_bits_and_walk_errors", "contract_vm__check_vm_fault_addresses_at_page_edges",
          "contract_vm__check_vm_new_tables_need_an_invalidation",
          "contract_driver__check_dma_data_edges_and_counters",
          "contract_engines__check_sdma_poll_trap_errors_resets_and_doorbells",
          "contract_engines__check_sdma_wrap_nop_halt_errors_and_cross_engine_waits",
          "contract_vm__check_cp_and_sdma_vm_faults_at_once",
          # (6 December, evening: they build VMID 1's two-level tables, map_vmid1)
          "contract_vm__check_vm_invalidation_names_vmids_and_pages",
          "contract_vm__check_vm_poll_remap_and_accesses_that_move_nothing",
          "contract_vm__check_vm_fault_entries_of_both_queues_and_a_full_ih_ring",
          "contract_vm__check_sdma_fetch_faults_at_page_edges_and_virtual_addresses",
          "contract_vm__check_cp_queues_keep_their_vmids_across_turns_and_resets",
          # (driver-writer-4: VMID 1's two-level tables, map_vmid1; a leaf beyond 64 MiB)
          "contract_vm__check_vm_leaf_beyond_memory_is_a_bus_error_at_the_virtual_address",
          "contract_vm__check_soft_reset_keeps_the_tlb_and_clears_the_fault",
          "contract_vm__check_sdma_accesses_need_what_the_cps_do",
          "contract_vm__check_vm_page_taken_away_while_polling_faults_the_poll",
          "contract_vm__check_queue_resets_during_a_walk_leave_no_error",
          "contract_vm__check_vmid_0_translated_moves_the_kernels_own_traffic",
          "contract_engines__check_sdma_rptr_write_back_fails_as_the_packet",
          "contract_vm__check_ih_entry_writes_that_fault_under_vmid_0",
          "contract_vm__check_vm_permission_fault_keeps_its_leaf",
          "contract_vm__check_soft_reset_while_the_sdma_reports_an_error_leaves_no_entry",
          # (driver-writer-6's: memory beyond 64 MiB, error windows and walks of the 2-level VM;
          # and the poll counters' read beyond memory)
          "contract_engines__check_ih_entry_of_every_source_fills_its_fields_alone",
          "contract_vm__check_vm_walks_and_leaves_in_memory_answering_slverr",
          "contract_control__check_tlb_and_dma_busy_counters",
          "contract_csr__check_byte_writes_of_every_register_kind",
          "contract_engines__check_poll_counters_count_each_queue_s_reads",
          # (driver-writer-7: VMID 1's two-level tables, map_vmid1)
          "contract_control__check_counters_survive_every_reset_but_perf_clear",
          "contract_control__check_tlb_counters_count_a_faulting_walk_and_no_faulting_hit",
          # (driver-writer-9: VMID 1's two-level tables, map_vmid1)
          "contract_driver__check_only_a_reset_ends_a_stopped_queue",
          # (driver-writer-11: the default build's VM_CAPS (2 levels), DECERR at 64 MiB, VMID
          # 1..15's two-level tables)
          "contract_control__check_every_register_reads_its_reset_value",
          "contract_control__check_read_only_registers_ignore_whole_writes",
          "contract_control__check_soft_reset_returns_the_hardware_registers_to_their_reset_state",
          "contract_control__check_ring_bases_and_write_back_addresses_reach_the_bus",
          "contract_control__check_every_vmid_has_its_own_tables",
          "contract_engines__check_packet_addresses_reach_the_bus",
          "contract_engines__check_a_packet_whose_payload_cannot_be_fetched_is_not_counted",
          "contract_engines__check_errors_inside_a_chained_ib",
          # (driver-writer-12: VMID 1's two-level tables, map_vmid1)
          "contract_vm__check_tlb_holds_2_to_the_tlb_log2_pages_of_any_addresses",
          # (driver-writer-13: DECERR at 64 MiB and VMID 1's two-level tables, map_vmid1)
          "contract_driver__check_poll_counters_count_a_faulting_read_and_none_beyond_the_bus",
          "contract_vm__check_vm_faults_past_a_huge_page_s_end",
          # (7 December: DECERR at 64 MiB and VMID 1's two-level tables, map_vmid1)
          "contract_engines__check_byte_counters_count_no_refused_write",
          # (driver-writer-15: VMID 1's two-level tables, map_vmid1)
          "contract_vm__check_an_executable_page_is_fetched_not_read",
          "contract_vm__check_vm_fault_status_shows_a_fault_beside_the_other_queue_s_other_error",
          "contract_vm__check_a_huge_page_s_executable_bit_gates_fetches_from_it",
          "contract_vm__check_a_vmid_switched_off_is_physical_whatever_the_tlb_holds",
          "contract_vm__check_an_invalidation_written_over_a_pending_one_replaces_it",
          # (driver-writer-16: DECERR at 2^40 and VMID 1's two-level tables, map_vmid1)
          "contract_control__check_each_reset_changes_only_what_it_resets_in_the_whole_register_map")


def _checks() -> dict:
    out = {n: c for n, c in driver_checks.all_checks().items() if n not in SLOW + LAYOUT}
    for mod_name in ("kmd_sched.test_kmd_ih",):  # not on the RTL yet (driver_checks.ELSEWHERE says why)
        mod = importlib.import_module(f"tests.{mod_name}")
        out.update({f"{driver_checks._group(mod_name)}__{c.__name__}": c for c in mod.CHECKS})
    return out


CHECKS = _checks()


def test_addresses_lie_above_4_gib():
    """The premise: a client's buffers have VAs with a non-zero high dword, and so have the
    shadow copies' kernel range and the kernel's GTT buffers in memory; VRAM stays below
    4 GiB (a page table's entry is 64 bits wherever it points)."""
    kmd = kmd_model.bind(_device())
    c = Client()
    gtt, vram = c.bo(0x1000, Domain.GTT), c.bo(0x1000, Domain.VRAM)
    assert gtt.addr >> 32 and vram.addr >> 32 and c.f.vm.va_start == VA_BOTTOM
    assert c.phys(gtt) >> 32 and c.phys(gtt) + 0x1000 <= MEM_SIZE and not c.phys(vram) >> 32
    assert kmd.kernel_va >> 32 and kmd.wb_bo.gpu_addr >> 32 and kmd.ring.gpu_addr >> 32


@pytest.mark.parametrize("name", list(CHECKS))
def test_check_above_4_gib(name):
    CHECKS[name](_device())
