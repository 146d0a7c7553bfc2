/* choices.c: kernel choices as text, and a context's own table. A checkpoint records the kernel of every
 * cell that has a choice (ampci_kernels_format, the metadata key ampc.kernels), because GEMM and attention
 * candidates differ in their last bits and the measurement may choose differently in another process or
 * on another day; a restore runs the recorded kernels where they are usable (ampci_kernels_recorded), in
 * a copy of the context's table that the context owns, so the resumed run continues bit for bit. */
#include "kernels.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls fn for every cell with a choice at k's level, in registry order. */
static void each_cell(const struct ampc_kernels *k, void (*fn)(void *arg, ampci_slot slot, int key), void *arg) {
    bool done[AMPCI_SLOT_COUNT][AMPCI_KEY_COUNT] = {{false}};
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        ampci_slot slot = all[i]->slot;
        int key = ampci_kernel_key(all[i]);
        if (!done[slot][key] && ampci_cell_has_choice(k->isa, slot, key)) fn(arg, slot, key);
        done[slot][key] = true;
    }
}

/* ---- format ---- */

typedef struct out {
    const struct ampc_kernels *k;
    char *buf;
    size_t size;
    int len;
} out;

static void put(out *o, const char *s) {
    size_t used = (size_t)o->len < o->size ? (size_t)o->len : o->size;
    int w = o->buf ? snprintf(o->buf + used, o->size - used, "%s", s) : (int)strlen(s);
    o->len += w > 0 ? w : 0;
}

static const char *name_or_none(const ampci_kernel *e) { return e ? e->name : "-"; }

static void format_cell(void *arg, ampci_slot slot, int key) {
    out *o = arg;
    int g = ampci_gemm_cell(slot, key);
    if (o->len) put(o, ";");
    put(o, ampci_cell_name(slot, key)), put(o, "=");
    if (g < 0) return put(o, name_or_none(o->k->chosen[slot][key]));
    const ampci_kernel *const *by = o->k->by_size[g];
    bool same = by[0] == by[1] && by[1] == by[2];
    for (int c = 0; c < (same ? 1 : AMPCI_SIZE_CLASSES); c++) put(o, c ? "," : ""), put(o, name_or_none(by[c]));
}

int ampci_kernels_format(const ampc_ctx *ctx, char *buf, size_t size) {
    const struct ampc_kernels *k = ctx->kernels;
    out o = {k, buf, size, 0};
    if (size) buf[0] = '\0';
    each_cell(k, format_cell, &o);
    return o.len;
}

/* ---- parse and apply ---- */

/* The cell called `name`, false when no entry has it. */
static bool find_cell(const char *name, ampci_slot *slot, int *key) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ampci_cell_name(all[i]->slot, ampci_kernel_key(all[i])), name))
            return *slot = all[i]->slot, *key = ampci_kernel_key(all[i]), true;
    return false;
}

/* The recorded kernel `name` for cell (slot, key) at level, or why it cannot run here. */
static const char *resolve(const char *name, ampci_slot slot, int key, ampc_isa level, const ampci_kernel **e) {
    *e = NULL;
    if (!strcmp(name, "-")) return ampci_split_cell(slot) ? NULL : "\"-\" (none) is for the split F32 GEMMs only";
    *e = ampci_kernel_find(name);
    if (!*e) return "this build has no such kernel";
    if ((*e)->slot != slot || ampci_kernel_key(*e) != key || (*e)->role != AMPCI_ROLE_KERNEL)
        return "not for this cell";
    if (!ampci_kernel_usable(*e)) return "this CPU lacks what it needs";
    if ((*e)->level > level) return "above the context's kernel level";
    return NULL;
}

typedef struct apply {
    const ampc_ctx *ctx;
    struct ampc_kernels *k;
    int skipped;     /* entries that cannot run here */
    char first[320]; /* the first of them, said */
} apply;

static void skip(apply *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(apply *a, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (a->skipped++ == 0) vsnprintf(a->first, sizeof a->first, fmt, ap);
    va_end(ap);
}

/* One "cell=kernel[,kernel,kernel]" entry into a->k, or skipped. */
static void apply_entry(apply *a, char *entry) {
    char *eq = strchr(entry, '=');
    ampci_slot slot;
    int key;
    bool found = eq && (*eq = '\0', find_cell(entry, &slot, &key));
    if (eq) *eq = '=';
    if (!found) return skip(a, "\"%.60s\" names no cell of this build", entry);
    const ampci_kernel *by[AMPCI_SIZE_CLASSES] = {NULL};
    int classes = ampci_gemm_cell(slot, key) >= 0 ? AMPCI_SIZE_CLASSES : 1, n = 0;
    const char *why = NULL, *bad = eq + 1;
    for (char *name = eq + 1, *next; name && !why; name = next, n++) {
        if ((next = strchr(name, ','))) *next++ = '\0';
        why = n == classes ? "more kernels than size classes" : resolve(name, slot, key, a->k->isa, &by[n]);
        bad = name;
    }
    if (!why && n != 1 && n != classes) why = "one kernel, or one per size class, expected";
    if (why) return skip(a, "%.80s for %s: %s", bad, ampci_cell_name(slot, key), why);
    for (int c = n; c < AMPCI_SIZE_CLASSES; c++) by[c] = by[0];
    ampci_kernels_set(a->k, slot, key, by, AMPCI_TABLE_CTX);
}

/* The GEMM cells of a context's table dispatch through ctx->kernels (never a level's table). */
static void own_dispatchers(struct ampc_kernels *k) {
    static const struct {
        ampci_slot slot;
        int key;
    } gemm[AMPCI_GEMM_CELLS] = {{AMPCI_SLOT_GEMM, AMPC_DTYPE_F32},
                                {AMPCI_SLOT_GEMM, AMPC_DTYPE_F16},
                                {AMPCI_SLOT_GEMM, AMPC_DTYPE_BF16},
                                {AMPCI_SLOT_GEMM_F32_BF16X1, 0},
                                {AMPCI_SLOT_GEMM_F32_BF16X3, 0}};
    for (int g = 0; g < AMPCI_GEMM_CELLS; g++) {
        AMPCI_ASSERT(ampci_gemm_cell(gemm[g].slot, gemm[g].key) == g);
        ampci_kernels_set(k, gemm[g].slot, gemm[g].key, k->by_size[g], AMPCI_TABLE_CTX);
    }
}

ampc_status ampci_kernels_recorded(const ampc_ctx *ctx, const char *what, const char *choices,
                                   struct ampc_kernels **out) {
    *out = NULL;
    struct ampc_kernels *k = malloc(sizeof *k);
    char *text = strdup(choices);
    if (!k || !text) return free(k), free(text), ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", what);
    *k = *ctx->kernels;
    apply a = {ctx, k, 0, ""};
    for (char *entry = text, *next; entry && *entry; entry = next) {
        if ((next = strchr(entry, ';'))) *next++ = '\0';
        apply_entry(&a, entry);
    }
    free(text);
    if (a.skipped) /* one line, however many: a checkpoint from another CPU names dozens */
        ampci_log(ctx, AMPC_LOG_WARN,
                  "%s: %d of the recorded kernels cannot run here (the first: %s); this context's own choice "
                  "runs instead, so results may differ in their last bits from the recorded run",
                  what, a.skipped, a.first);
    const struct ampc_kernels *now = ctx->kernels;
    if (!memcmp(k->chosen, now->chosen, sizeof k->chosen) && !memcmp(k->by_size, now->by_size, sizeof k->by_size)) {
        free(k); /* the context runs these already */
        return AMPC_OK;
    }
    own_dispatchers(k);
    *out = k;
    return AMPC_OK;
}

void ampci_kernels_adopt(ampc_ctx *ctx, struct ampc_kernels *k) {
    free(ctx->own_kernels);
    ctx->own_kernels = k;
    ctx->kernels = k ? k : ampci_kernels(ctx->isa);
}
