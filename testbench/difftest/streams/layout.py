"""Where a difftest stream puts things in GPU memory.

Every stream uses the same small memory (MEM_SIZE, on both backends) split into regions
with one job each, so the generator can reason about hazards without tracking bytes:
command buffers are never written by packets, DMA destinations are never touched by
anything else, semaphores are written only by the CPU or by the one packet meant to
release them. Addresses at or above MEM_SIZE answer DECERR on both backends.
"""

from __future__ import annotations

MEM_SIZE = 4 << 20  # small: a full-memory compare costs ~2 ms

RPTR_WB = 0x0000_8000  # RB_RPTR write-back dword (its own 32-byte block)
IH_WPTR_WB = 0x0000_8040  # IH_WPTR write-back dword (its own 32-byte block)
RING_REGION = (0x0001_0000, 0x0002_0000)  # the ring: up to 2^12 dwords at any 256-byte offset
IH_REGION = (0x0002_0000, 0x0003_0000)  # the IH ring: up to 2^8 entries at any 256-byte offset
IB_REGION = (0x0004_0000, 0x000C_0000)  # indirect buffers
DATA_REGION = (0x0010_0000, 0x0018_0000)  # WRITE_DATA / RELEASE_MEM destinations (overlaps allowed)
DMA_DST_REGION = (0x0018_0000, 0x0020_0000)  # DMA destinations: fresh blocks, touched by nothing else
SRC_REGION = (0x0020_0000, 0x0024_0000)  # random bytes, read-only: DMA sources
SEM_REGION = (0x0024_0000, 0x0025_0000)  # WAIT_REG_MEM semaphores, one fresh dword per wait
FAULT_REGION = (0x0030_0000, 0x0031_0000)  # bus-error windows for writes, fences and polls
CANARY_REGION = (0x0032_0000, 0x0033_0000)  # written only by packets that must never run
PT_REGION = (0x0034_0000, 0x0038_0000)  # page tables of streams whose IBs run under a VMID (vm.py)
VM_FAULT_REGION = (0x0038_0000, 0x003A_0000)  # the vm_fault class's pages (unmapped, read-only ...)
RECOVERY = 0x003F_0000  # the good submission after a soft reset writes here

# Regions that hold commands: a packet writing there would change commands the RTL may
# already have prefetched (undefined by docs/hardware.md), so raw streams avoid it.
COMMAND_REGIONS = (RING_REGION, IB_REGION)

assert RECOVERY + 0x100 <= MEM_SIZE
