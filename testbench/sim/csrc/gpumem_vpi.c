/* VPI system tasks of the shared-file memory for Icarus (which has no DPI).
 *
 *   $gpumem_read(addr, data_reg)        data_reg = the words at addr (its width / 32 of them)
 *   $gpumem_write(addr, data, strb)     strobed write of data's words (strb: width / 8 bits)
 *   $gpumem_size(size_reg)              size_reg = memory size in bytes (64-bit reg)
 *   $gpumem_release                     drop the mapping (re-read $GPUCOSIM_MEM_FILE later)
 *
 * They are tasks writing an output argument, not functions, so iverilog needs no
 * size table at compile time and one call moves a whole bus beat (up to 256 bits).
 * The argument handles are looked up once per call site (compiletf) and kept as
 * the call's user data: the per-beat cost is one vpi_get_value per input and one
 * vpi_put_value.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vpi_user.h>

#include "gpumem.h"

#define MAX_ARGS 3
#define MAX_WORDS 8 /* 256-bit bus */

typedef struct {
    vpiHandle arg[MAX_ARGS];
    int nargs;
} call_args;

static call_args *args_of(int want, const char *name) {
    vpiHandle call = vpi_handle(vpiSysTfCall, NULL);
    call_args *a = (call_args *)vpi_get_userdata(call);
    vpiHandle it, h;
    if (a) return a;
    a = (call_args *)calloc(1, sizeof *a);
    it = vpi_iterate(vpiArgument, call);
    while (it && (h = vpi_scan(it)) != NULL) {
        if (a->nargs < MAX_ARGS) a->arg[a->nargs] = h;
        a->nargs++;
    }
    if (a->nargs != want) {
        vpi_printf("gpumem: %s takes %d argument(s), got %d\n", name, want, a->nargs);
        vpi_control(vpiFinish, 1);
    }
    vpi_put_userdata(call, a);
    return a;
}

static PLI_INT32 compile_read(PLI_BYTE8 *u) { (void)u; args_of(2, "$gpumem_read"); return 0; }
static PLI_INT32 compile_write(PLI_BYTE8 *u) { (void)u; args_of(3, "$gpumem_write"); return 0; }
static PLI_INT32 compile_size(PLI_BYTE8 *u) { (void)u; args_of(1, "$gpumem_size"); return 0; }

static unsigned long long get_u64(vpiHandle h) {
    s_vpi_value v;
    unsigned long long r;
    v.format = vpiVectorVal;
    vpi_get_value(h, &v);
    r = (unsigned)v.value.vector[0].aval & ~(unsigned)v.value.vector[0].bval;
    if (vpi_get(vpiSize, h) > 32)
        r |= (unsigned long long)((unsigned)v.value.vector[1].aval & ~(unsigned)v.value.vector[1].bval) << 32;
    return r;
}

static PLI_INT32 call_read(PLI_BYTE8 *u) {
    call_args *a = args_of(2, "$gpumem_read");
    s_vpi_vecval vec[MAX_WORDS];
    uint32_t words[MAX_WORDS];
    s_vpi_value v;
    unsigned n = (unsigned)vpi_get(vpiSize, a->arg[1]) / 32, i;
    (void)u;
    if (n > MAX_WORDS) n = MAX_WORDS;
    gpumem_read_words(get_u64(a->arg[0]), words, n);
    for (i = 0; i < n; i++) {
        vec[i].aval = (PLI_INT32)words[i];
        vec[i].bval = 0;
    }
    v.format = vpiVectorVal;
    v.value.vector = vec;
    vpi_put_value(a->arg[1], &v, NULL, vpiNoDelay);
    return 0;
}

static PLI_INT32 call_write(PLI_BYTE8 *u) {
    call_args *a = args_of(3, "$gpumem_write");
    uint32_t words[MAX_WORDS];
    s_vpi_value v;
    unsigned n = (unsigned)vpi_get(vpiSize, a->arg[1]) / 32, i;
    unsigned long long addr = get_u64(a->arg[0]);
    uint32_t strb = (uint32_t)get_u64(a->arg[2]);
    (void)u;
    if (n > MAX_WORDS) n = MAX_WORDS;
    if (strb == 0) return 0;
    v.format = vpiVectorVal;
    vpi_get_value(a->arg[1], &v);
    for (i = 0; i < n; i++) words[i] = (uint32_t)v.value.vector[i].aval;
    gpumem_write_words(addr, words, strb, n);
    return 0;
}

static PLI_INT32 call_size(PLI_BYTE8 *u) {
    call_args *a = args_of(1, "$gpumem_size");
    unsigned long long size = gpumem_size();
    s_vpi_vecval vec[2];
    s_vpi_value v;
    (void)u;
    vec[0].aval = (PLI_INT32)(uint32_t)size;
    vec[0].bval = 0;
    vec[1].aval = (PLI_INT32)(uint32_t)(size >> 32);
    vec[1].bval = 0;
    v.format = vpiVectorVal;
    v.value.vector = vec;
    vpi_put_value(a->arg[0], &v, NULL, vpiNoDelay);
    return 0;
}

static PLI_INT32 call_release(PLI_BYTE8 *u) {
    (void)u;
    gpumem_release();
    return 0;
}

static void register_task(const char *name, PLI_INT32 (*calltf)(PLI_BYTE8 *),
                          PLI_INT32 (*compiletf)(PLI_BYTE8 *)) {
    s_vpi_systf_data tf;
    memset(&tf, 0, sizeof tf);
    tf.type = vpiSysTask;
    tf.tfname = (PLI_BYTE8 *)name;
    tf.calltf = calltf;
    tf.compiletf = compiletf;
    vpi_register_systf(&tf);
}

static void gpumem_register(void) {
    register_task("$gpumem_read", call_read, compile_read);
    register_task("$gpumem_write", call_write, compile_write);
    register_task("$gpumem_size", call_size, compile_size);
    register_task("$gpumem_release", call_release, NULL);
}

void (*vlog_startup_routines[])(void) = {gpumem_register, NULL};
