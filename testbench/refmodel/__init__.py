"""The cycle-free reference model of the whole front end, as a `kmd_model.device.Device`.

Same observable behaviour as the RTL (docs/hardware.md is the contract): the register file
with SystemRDL access semantics (read from `kmd_model.regs`), ring + doorbell, the PM4
command processor (packet layouts and limits from `spec.packets`), the IH ring
(`spec.ih`), interrupts, errors, soft reset, HALT and the performance counters::

    dev = RefModel()                      # 64 MiB of memory, no DMA engine, like the RTL today
    dev.configure(error_window=(0x10000, 0x11000, "SLVERR"))
    ...drive it like any Device (mmio_write32 / mmio_read32 / mem / wait_irq)...
    snap = dev.snapshot()                 # registers, IH entries, memory digest (issue 5)

Time. There are no cycles: work runs to completion the moment it becomes possible, at the
current `now()`. Time moves only when the driver spends it: each MMIO access costs
`mmio_cycles` (the access takes effect at the end of that time), `delay(n)` costs n, and
`wait_irq` moves to the moment irq rises or to its timeout. A WAIT_REG_MEM that does not
hold when executed is re-polled on its POLL_INTERVAL grid as time passes (the first poll
is at once, then every max(1, POLL_INTERVAL) cycles). Memory changes only between Device
calls (the CPU) or by the engines, so a poll that fails stays failed until an engine moves
on (another wait holds, an SDMA poll gives up, the CP runs on) or the call returns (at its
end, or early at an irq): time jumps over the polls before that moment, never over one
after it, so every wait sees a write at its first poll after it, as on the RTL. The CP runs
at most `cp_burst` packets (CP_BURST_PACKETS, 65,536) at one instant, refilled at one
packet per cycle however long a call: far more than any finite stream needs, so only a loop
(an IB that CHAINs to itself, checker off) meets it; the CP then stays busy and runs on as
time passes (its next burst when it is full again, every `cp_burst` cycles, and what it
has gained when a call ends), so the call that rang the doorbell returns, as on the RTL;
`cp_burst=1` is a CP of one packet a cycle. Such a loop costs the model a packet a cycle:
`delay(10**6)` behind it runs 10**6 packets, about 2 s (the KMD's waits are steps of 20,000
cycles at most, `fallback_poll`).

Virtual memory (testbench/refmodel/mmu.py): every CP and DMA access is translated as the
MMU does (ring fetches, the rptr write-back and IH entries with VMID 0, an IB's packets
with the VMID its ring INDIRECT_BUFFER named), faults stop the CP with VM_FAULT exactly
where the RTL does: a fetched dword when the parser consumes it, a written block, a poll,
a DMA transfer's first failing byte (its page's first). PERF_TLB_* and PERF_WALK_CYCLES
depend on timing and read 0 here.

Bus errors. `configure(error_window=(base, limit, resp))`: every CP or DMA access whose
bytes touch [base, limit) answers resp; bytes at or beyond the memory size answer DECERR
(window first, as in testbench/sim/hdl/axi_mem.v). The RTL's memory model decides per bus
beat, so both agree exactly when the window is aligned to the bus width.

Counters. Exact (they count events, not cycles):
- PERF_DWORDS_FETCHED: the ring and IB dwords the parser consumed, headers and payloads
  (the model fetches nothing ahead, so this is what the RTL counts as popped dwords,
  prefetched-but-unused dwords excluded). A dword whose read faulted counts (it was
  consumed); after a write error in WRITE_DATA, the data dwords up to the end of the
  faulting 32-byte block count. PERF_Q0/Q1_DWORDS_FETCHED split it by the queue whose
  packet consumed the dword (cp/queues.py: what it grew by while queue 1's state was in place).
- PERF_PACKETS[i]: packets of spec.packets.PACKETS[i] whose checks passed, counted when
  they start executing (a WAIT_REG_MEM counts while it still waits, a WRITE_DATA whose
  write faults counts); a TYPE2 filler counts as a NOP.
- PERF_DMA_BYTES_READ/WRITTEN.
Approximations (the model has no cycles): PERF_BUSY_CYCLES = model cycles with
STATUS.IDLE = 0 (only WAIT_REG_MEM waits and a HALT with work pending take time here);
PERF_STALL_CYCLES = 0 (memory answers at once); PERF_DMA_BUSY_CYCLES = ceil(bytes / bus
bytes) per DMA_DATA, although no time passes during it.

`RefModel(trace=print)` reports every packet the CP starts, disassembled by spec.pm4
("IB1+0x0000: WRITE_DATA  dst_sel=MEMORY addr=0x00040000 data=[0x00000001]").
"""

from .device import DEFAULT_MEM_SIZE, DEFAULT_MMIO_CYCLES, DMA_MAX_BYTES, RefModel
from .snapshot import SNAPSHOT_SKIP, diff_snapshots, mem_diff, mem_digest, snapshot

__all__ = ["RefModel", "snapshot", "mem_digest", "mem_diff", "diff_snapshots", "SNAPSHOT_SKIP",
           "DEFAULT_MEM_SIZE", "DEFAULT_MMIO_CYCLES", "DMA_MAX_BYTES"]
