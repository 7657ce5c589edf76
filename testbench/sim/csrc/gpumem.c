/* gpumem: shared-file storage for the AXI memory model; see gpumem.h. */
#include "gpumem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static uint8_t *g_base;  /* NULL until mapped */
static uint64_t g_size;

static void gpumem_fail(const char *what, const char *path) {
    fprintf(stderr,
            "gpumem: %s%s%s%s\n"
            "gpumem: the AXI memory model needs $" GPUMEM_ENV " to name an existing, non-empty\n"
            "gpumem: file; create it with testbench.memory.SharedMemory() and call its\n"
            "gpumem: export_env() before the first bus access (i.e. before releasing reset).\n",
            what, path ? " '" : "", path ? path : "", path ? "'" : "");
    if (errno) fprintf(stderr, "gpumem: (%s)\n", strerror(errno));
    fflush(stderr);
    abort();
}

static void gpumem_map(void) {
    const char *path = getenv(GPUMEM_ENV);
    struct stat st;
    int fd;
    void *p;

    errno = 0;
    if (path == NULL || path[0] == '\0') gpumem_fail("$" GPUMEM_ENV " is not set", NULL);
    fd = open(path, O_RDWR);
    if (fd < 0) gpumem_fail("cannot open", path);
    if (fstat(fd, &st) != 0) gpumem_fail("cannot stat", path);
    if (st.st_size <= 0) { errno = 0; gpumem_fail("memory file is empty:", path); }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) gpumem_fail("cannot mmap", path);
    close(fd); /* the mapping stays valid */
    g_base = (uint8_t *)p;
    g_size = (uint64_t)st.st_size;
}

uint64_t gpumem_size(void) {
    if (!g_base) gpumem_map();
    return g_size;
}

void gpumem_release(void) {
    if (g_base) munmap(g_base, (size_t)g_size);
    g_base = NULL;
    g_size = 0;
}

static inline int in_range(uint64_t addr, uint64_t n) {
    return addr < g_size && n <= g_size - addr;
}

uint32_t gpumem_rd32(uint64_t addr) {
    uint32_t v;
    if (!g_base) gpumem_map();
    if (!in_range(addr, 4)) return 0;
    memcpy(&v, g_base + addr, 4); /* little-endian host: byte i -> bits 8i+7:8i */
    return v;
}

void gpumem_wr32(uint64_t addr, uint32_t data, uint32_t strb) {
    uint8_t *p;
    unsigned i;
    if (!g_base) gpumem_map();
    strb &= 0xf;
    if (strb == 0 || !in_range(addr, 4)) return;
    p = g_base + addr;
    if (strb == 0xf) {
        memcpy(p, &data, 4);
        return;
    }
    for (i = 0; i < 4; i++)
        if (strb & (1u << i)) p[i] = (uint8_t)(data >> (8 * i));
}

void gpumem_read_words(uint64_t addr, uint32_t *data, unsigned nwords) {
    if (!g_base) gpumem_map();
    if (in_range(addr, 4ull * nwords)) {
        memcpy(data, g_base + addr, 4u * nwords);
        return;
    }
    for (unsigned i = 0; i < nwords; i++) data[i] = gpumem_rd32(addr + 4ull * i);
}

void gpumem_write_words(uint64_t addr, const uint32_t *data, uint32_t strb, unsigned nwords) {
    for (unsigned i = 0; i < nwords; i++) gpumem_wr32(addr + 4ull * i, data[i], strb >> (4 * i));
}
