/* kernel_info.c: the public introspection of the kernels, what `ampc info` prints: the compute cells and
 * the kernel each runs at the process's level (ampc_kernel_slot_name/impl), the conversion kernels
 * (ampc_convert_kernel_name), every registry entry (ampc_kernel_describe) and how the kernels were chosen
 * (ampc_kernel_get_tuning, ampc_kernel_get_choice). It reads the resolved tables (dispatch.c) and the
 * measurement (tune.h), so it sits with choices.c at the top of the kernels floor. */
#include "tune.h"

#include <math.h>

/* The i-th compute cell (conversions have their own listing); its name, NULL past the end. */
static const char *compute_cell(int i, ampci_slot *slot, int *key) {
    const char *name;
    for (int c = 0; (name = ampci_cell_at(c, slot, key)) && i >= 0; c++)
        if (*slot != AMPCI_SLOT_CONVERT && i-- == 0) return name;
    return NULL;
}

const char *ampc_kernel_slot_name(int i) {
    ampci_slot slot;
    int key;
    return compute_cell(i, &slot, &key);
}

const char *ampc_kernel_slot_impl(int i) {
    ampci_slot slot;
    int key;
    if (!compute_cell(i, &slot, &key)) return NULL;
    const ampci_kernel *e = ampci_kernels(AMPC_ISA_AUTO)->chosen[slot][key];
    return e ? e->name : "-";
}

const char *ampc_convert_kernel_name(ampc_dtype dst_dtype, ampc_dtype src_dtype) {
    if ((unsigned)dst_dtype >= AMPC_DTYPE_COUNT || (unsigned)src_dtype >= AMPC_DTYPE_COUNT) return NULL;
    if (dst_dtype == src_dtype) return "memcpy";
    const ampci_kernel *e =
        ampci_kernels(AMPC_ISA_AUTO)->chosen[AMPCI_SLOT_CONVERT][dst_dtype * AMPC_DTYPE_COUNT + src_dtype];
    return e ? e->name : "generic";
}

/* e runs in its cell at the process's level (for a GEMM cell: in some size class). */
static bool runs(const ampci_kernel *e) {
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    int key = ampci_kernel_key(e), g = ampci_gemm_cell(e->slot, key);
    bool any = k->chosen[e->slot][key] == e;
    for (int c = 0; g >= 0 && c < AMPCI_SIZE_CLASSES; c++) any |= k->by_size[g][c] == e;
    return any;
}

bool ampc_kernel_describe(int i, ampc_kernel_desc *out) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    if (i < 0 || (size_t)i >= n || !out) return false;
    const ampci_kernel *e = all[i];
    int key = ampci_kernel_key(e);
    *out = (ampc_kernel_desc){.name = e->name,
                              .slot = ampci_cell_name(e->slot, key),
                              .level = e->level,
                              .needs = e->needs,
                              .usable = ampci_kernel_usable(e),
                              .candidate = e->role == AMPCI_ROLE_KERNEL,
                              .chosen = runs(e)};
    return true;
}

/* ---- how the kernels were chosen ---- */

void ampc_kernel_get_tuning(ampc_kernel_tuning *out) {
    static const char *const sources[] = {"rule", "measured", "cache"};
    if (!out) return;
    const ampci_tune_state *st = ampci_tune();
    int rows = 0;
    for (ampc_kernel_choice c; ampc_kernel_get_choice(rows, &c);) rows++;
    *out = (ampc_kernel_tuning){.mode = st->mode == AMPCI_TUNE_RULE ? "rule" : "measure",
                                .source = sources[st->source],
                                .cache_file = st->path,
                                .note = st->note,
                                .cache_written = st->written,
                                .seconds = st->source == AMPCI_TUNE_FROM_RULE ? 0 : st->times.seconds,
                                .choices = rows};
}

/* The i-th (cell, size class) with a choice at the process's level; the cell's name, NULL past the end. */
static const char *choice_row(int i, ampci_slot *slot, int *key, int *cls) {
    ampc_isa level = ampci_kernels(AMPC_ISA_AUTO)->isa;
    const char *name;
    for (int c = 0; (name = ampci_cell_at(c, slot, key)); c++) {
        if (!ampci_cell_has_choice(level, *slot, *key)) continue;
        int classes = ampci_gemm_cell(*slot, *key) >= 0 ? AMPCI_SIZE_CLASSES : 1;
        if (i < classes) return *cls = i, name;
        i -= classes;
    }
    return NULL;
}

bool ampc_kernel_get_choice(int i, ampc_kernel_choice *out) {
    ampci_slot slot;
    int key, cls;
    const char *name = i >= 0 && out ? choice_row(i, &slot, &key, &cls) : NULL;
    if (!name) return false;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    int g = ampci_gemm_cell(slot, key);
    ampci_choice ch = ampci_kernels_choose(k->isa, slot, key, cls);
    const ampci_kernel *e = g >= 0 ? k->by_size[g][cls] : k->chosen[slot][key];
    AMPCI_ASSERT(e == ch.kernel); /* the table holds what the choice says */
    *out = (ampc_kernel_choice){
        .slot = name,
        .size_class = g >= 0 ? ampci_size_class_name(cls) : "all",
        .kernel = e ? e->name : "-",
        .seconds = isfinite(ch.sec) ? ch.sec : 0,
        .runner_up = ch.second        ? ch.second->name
                     : ch.second_none ? "-"
                                      : NULL,
        .runner_up_seconds = isfinite(ch.second_sec) ? ch.second_sec : 0,
    };
    return true;
}
