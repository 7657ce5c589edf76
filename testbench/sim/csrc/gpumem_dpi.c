/* DPI-C exports of the shared-file memory for Verilator (see testbench/sim/hdl/axi_mem.v).
 *
 * The types follow Verilator's DPI mapping: longint -> long long, int -> int.
 * Verilator's make rules compile this file (and gpumem.c) with the C++ compiler, so
 * it is written to be both C and C++; the functions have C linkage either way, which
 * is what Verilator's generated Vtop__Dpi.h declares.
 */
#include "gpumem.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
