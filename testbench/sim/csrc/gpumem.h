/* gpumem: the storage core of the AXI memory model (testbench/sim/hdl/axi_mem.v).
 *
 * The memory is a file mapped MAP_SHARED both here (inside the simulator, through
 * DPI-C on Verilator or VPI on Icarus) and by Python (testbench/memory.py, a numpy
 * memmap), so the drivers and the RTL see the same bytes with no Python per beat.
 * The file is named by $GPUCOSIM_MEM_FILE and mapped lazily on first access; its
 * size is the memory size. Byte order is little-endian: byte lane i of a word is
 * address + i, as on the AXI bus.
 */
#ifndef GPUMEM_H
#define GPUMEM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUMEM_ENV "GPUCOSIM_MEM_FILE"

/* Size of the memory in bytes; maps the file on first use (aborts if it cannot). */
uint64_t gpumem_size(void);

/* Drop the mapping; the next access maps $GPUCOSIM_MEM_FILE again. The HDL calls
 * this in reset, so each cocotb test can bring its own memory file. */
void gpumem_release(void);

/* 32-bit little-endian read at a byte address (4-aligned by the callers). Words
 * not wholly inside the memory read as 0. */
uint32_t gpumem_rd32(uint64_t addr);

/* Write the bytes of `data` whose bit in `strb` (4 bits, bit i = byte i) is set.
 * Bytes outside the memory are dropped. */
void gpumem_wr32(uint64_t addr, uint32_t data, uint32_t strb);

/* Whole-bus-word helpers: `nwords` 32-bit words starting at `addr`; `strb` holds
 * 4 bits per word, word 0 in the low nibble (so up to 8 words = 256 bits). */
void gpumem_read_words(uint64_t addr, uint32_t *data, unsigned nwords);
void gpumem_write_words(uint64_t addr, const uint32_t *data, uint32_t strb, unsigned nwords);

#ifdef __cplusplus
}
#endif

#endif
