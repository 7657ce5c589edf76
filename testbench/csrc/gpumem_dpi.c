/* DPI-C exports of the shared-file memory for Verilator (see testbench/hdl/axi_mem.v).
 *
 * The types follow Verilator's DPI mapping: longint -> long long, int -> int.
 * This file is plain C; Verilator's generated header declares the same functions
 * with extern "C", so they link by name.
 */
#include "gpumem.h"

long long gpumem_dpi_size(void);
void gpumem_dpi_release(void);
int gpumem_dpi_rd32(long long addr);
void gpumem_dpi_wr32(long long addr, int data, int strb);

long long gpumem_dpi_size(void) { return (long long)gpumem_size(); }

void gpumem_dpi_release(void) { gpumem_release(); }

int gpumem_dpi_rd32(long long addr) { return (int)gpumem_rd32((uint64_t)addr); }

void gpumem_dpi_wr32(long long addr, int data, int strb) {
    gpumem_wr32((uint64_t)addr, (uint32_t)data, (uint32_t)strb);
}
