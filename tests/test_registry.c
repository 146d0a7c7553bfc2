/* test_registry.c: the kernel registry itself. Every entry's name is ampc_k_<op>_<dtypes>__<isa>[_<x>]
 * with the op and dtypes of its slot and key and the isa of the folder whose table holds it (so a name
 * can never belong to another kernel); names are unique; every cell has exactly one ref entry, usable on
 * any CPU; the fixed rule's choice (AMPC_KERNEL_CHOICE=rule, which main sets: test_tune checks the
 * measured choice) in every cell at every level is the one the kernel folders made
 * before the registry existed (written out below from the CPU's features, so the test holds on an AMX
 * Xeon, on an AMD EPYC with AVX512-BF16 and no AMX, on plain AVX-512 or AVX2, and under every AMPC_ISA
 * cap, which CTest applies); the resolved tables hold the chosen functions; and the public introspection
 * (ampc_kernel_slot_name/impl, ampc_convert_kernel_name, ampc_kernel_describe) names registered kernels. */
#include "kernel_check.h"

#include <stdlib.h>

static const char *const unary_ops[AMPCI_UNARY_COUNT] = {"neg",     "exp",  "log",      "sqrt",     "tanh",
                                                         "sigmoid", "relu", "gelu_erf", "gelu_tanh"};
static const char *const binary_ops[AMPCI_BINARY_COUNT] = {"add", "sub", "mul", "div"};

static const char *dt(ampc_dtype d) {
    static const char *const names[] = {"f32", "f16", "bf16", "f64", "i32", "i64", "u8"};
    return (unsigned)d < AMPC_DTYPE_COUNT ? names[d] : "?";
}

/* The name's part before "__": ampc_k_<op>_<dtypes>, from the slot and the key alone. */
static void expected_op(const ampci_kernel *e, char *buf, size_t size) {
    static const char *const fixed[AMPCI_SLOT_COUNT] = {[AMPCI_SLOT_GEMM_F32_BF16X1] = "gemm_f32_bf16x1",
                                                        [AMPCI_SLOT_GEMM_F32_BF16X3] = "gemm_f32_bf16x3",
                                                        [AMPCI_SLOT_SOFTMAX] = "softmax_f32",
                                                        [AMPCI_SLOT_SOFTMAX_BW] = "softmax_bw_f32",
                                                        [AMPCI_SLOT_LAYERNORM] = "layernorm_f32",
                                                        [AMPCI_SLOT_LAYERNORM_BW] = "layernorm_bw_f32",
                                                        [AMPCI_SLOT_XENT] = "xent_f32",
                                                        [AMPCI_SLOT_XENT_BW] = "xent_bw_f32",
                                                        [AMPCI_SLOT_EMBEDDING_BW] = "embedding_bw_f32",
                                                        [AMPCI_SLOT_COL2IM] = "col2im_f32",
                                                        [AMPCI_SLOT_MAXPOOL] = "maxpool_f32",
                                                        [AMPCI_SLOT_MAXPOOL_BW] = "maxpool_bw_f32",
                                                        [AMPCI_SLOT_ATTENTION] = "attention",
                                                        [AMPCI_SLOT_ATTENTION_BW] = "attention_bw",
                                                        [AMPCI_SLOT_SGD] = "sgd_f32",
                                                        [AMPCI_SLOT_ADAMW] = "adamw_f32",
                                                        [AMPCI_SLOT_RANGE] = "range_f32",
                                                        [AMPCI_SLOT_QUANT8] = "quant8_f32"};
    switch (e->slot) {
    case AMPCI_SLOT_CONVERT: snprintf(buf, size, "ampc_k_cvt_%s%s", dt(e->dtype), dt(e->src)); return;
    case AMPCI_SLOT_GEMM: snprintf(buf, size, "ampc_k_gemm_%sf32", dt(e->dtype)); return;
    case AMPCI_SLOT_UNARY: snprintf(buf, size, "ampc_k_%s_f32", unary_ops[e->op]); return;
    case AMPCI_SLOT_UNARY_BW: snprintf(buf, size, "ampc_k_%s_bw_f32", unary_ops[e->op]); return;
    case AMPCI_SLOT_BINARY: snprintf(buf, size, "ampc_k_%s_f32", binary_ops[e->op]); return;
    case AMPCI_SLOT_IM2COL: snprintf(buf, size, "ampc_k_im2col_%s", dt(e->dtype)); return;
    case AMPCI_SLOT_UNSCALE: snprintf(buf, size, "ampc_k_unscale_%s", dt(e->dtype)); return;
    case AMPCI_SLOT_SUMSQ: snprintf(buf, size, "ampc_k_sumsq_%s", dt(e->dtype)); return;
    case AMPCI_SLOT_COLSUM: snprintf(buf, size, "ampc_k_colsum_%s", dt(e->dtype)); return;
    default: snprintf(buf, size, "ampc_k_%s", fixed[e->slot] ? fixed[e->slot] : "?"); return;
    }
}

/* The key fields hold only what the slot's key uses (see ampci_slot). */
static void check_key(const ampci_kernel *e) {
    bool by_dtype = e->slot == AMPCI_SLOT_GEMM || e->slot == AMPCI_SLOT_IM2COL || e->slot == AMPCI_SLOT_UNSCALE ||
                    e->slot == AMPCI_SLOT_SUMSQ || e->slot == AMPCI_SLOT_COLSUM;
    bool by_op = e->slot == AMPCI_SLOT_UNARY || e->slot == AMPCI_SLOT_UNARY_BW || e->slot == AMPCI_SLOT_BINARY;
    int ops = e->slot == AMPCI_SLOT_BINARY ? AMPCI_BINARY_COUNT : AMPCI_UNARY_COUNT;
    if (e->slot == AMPCI_SLOT_CONVERT) {
        if (e->dtype == e->src || e->op != 0) FAILF("%s: conversion key %d <- %d", e->name, e->dtype, e->src);
    } else if (by_dtype) {
        if (e->dtype > AMPC_DTYPE_BF16 || e->src != e->dtype || e->op != 0) FAILF("%s: dtype key", e->name);
    } else if (by_op) {
        if (e->dtype != AMPC_DTYPE_F32 || e->src != e->dtype || e->op < 0 || e->op >= ops) FAILF("%s: op key", e->name);
    } else if (e->dtype != AMPC_DTYPE_F32 || e->src != e->dtype || e->op != 0) {
        FAILF("%s: a one-cell slot with a key", e->name);
    }
}

/* One folder's table: names, levels, keys. */
static void check_folder(const ampci_kernel *table, size_t n, const char *isa, ampc_isa level) {
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *e = &table[i];
        char op[64];
        expected_op(e, op, sizeof op);
        const char *tag = strstr(e->name, "__");
        if (!tag || strncmp(e->name, op, (size_t)(tag - e->name)) != 0 || strlen(op) != (size_t)(tag - e->name))
            FAILF("%s: expected %s__%s...", e->name, op, isa);
        tag += 2;
        if (strncmp(tag, isa, strlen(isa)) != 0) FAILF("%s: in the %s folder's table", e->name, isa);
        if (e->level != level) FAILF("%s: level %s, its folder's is %s", e->name, ampc_isa_name(e->level), isa);
        if ((e->needs & AMPCI_FEAT(AVX512_BF16)) && strcmp(tag, "avx512bf16") != 0)
            FAILF("%s: needs AVX512-BF16, its name does not say so", e->name);
        if (e->role == AMPCI_ROLE_EMULATION) FAILF("%s: an emulation in the library's registry", e->name);
        check_key(e);
    }
}

static void test_names_and_folders(void **state) {
    (void)state;
    check_folder(ampci_kernels_ref, ampci_kernels_ref_count, "ref", AMPC_ISA_REF);
    check_folder(ampci_kernels_avx2, ampci_kernels_avx2_count, "avx2", AMPC_ISA_AVX2);
    check_folder(ampci_kernels_avx512, ampci_kernels_avx512_count, "avx512", AMPC_ISA_AVX512);
    check_folder(ampci_kernels_amx, ampci_kernels_amx_count, "amx", AMPC_ISA_AMX);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    assert_int_equal(n, ampci_kernels_ref_count + ampci_kernels_avx2_count + ampci_kernels_avx512_count +
                            ampci_kernels_amx_count);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(all[i]->name, all[j]->name) == 0) FAILF("%s is registered twice", all[i]->name);
    for (size_t i = 0; i < n; i++) assert_ptr_equal(ampci_kernel_find(all[i]->name), all[i]);
    /* the device is the registry's outer key: the ISA folders are the CPU device's ladder */
    for (size_t i = 0; i < n; i++)
        if (all[i]->device != AMPC_DEVICE_CPU) FAILF("%s is registered for device %d", all[i]->name, all[i]->device);
}

/* Every cell: one ref entry, usable everywhere (an oracle exactly in the split slots, whose ref level runs
 * nothing); few enough entries for the dispatcher's candidate list. */
static void test_one_ref_per_cell(void **state) {
    (void)state;
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        int refs = 0, cell = 0;
        for (size_t j = 0; j < n; j++)
            if (ampci_same_cell(all[i], all[j])) cell++, refs += all[j]->level == AMPC_ISA_REF;
        if (refs != 1) FAILF("%s: its cell has %d ref entries", all[i]->name, refs);
        assert_true(cell <= 16);
        const ampci_kernel *r = ampci_kernel_ref(all[i]);
        assert_true(r->needs == 0 && r->slow_with == 0 && ampci_kernel_usable(r));
        bool split = r->slot == AMPCI_SLOT_GEMM_F32_BF16X1 || r->slot == AMPCI_SLOT_GEMM_F32_BF16X3;
        assert_int_equal(r->role, split ? AMPCI_ROLE_ORACLE : AMPCI_ROLE_KERNEL);
        if (all[i] != r) assert_int_equal(all[i]->role, AMPCI_ROLE_KERNEL);
    }
    /* every cell the library's ops use exists (the ref table fills every field but the split ones) */
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_REF);
    for (int d = AMPC_DTYPE_F32; d <= AMPC_DTYPE_BF16; d++) {
        assert_non_null(k->gemm[d]), assert_non_null(k->im2col[d]);
        assert_non_null(k->unscale[d]), assert_non_null(k->sumsq[d]);
        for (int s = AMPC_DTYPE_F32; s <= AMPC_DTYPE_BF16; s++) assert_true(s == d || k->cvt[d][s]);
    }
    for (int op = 0; op < AMPCI_UNARY_COUNT; op++) assert_true(k->unary[op] && k->unary_bw[op]);
    for (int op = 0; op < AMPCI_BINARY_COUNT; op++) assert_non_null(k->binary[op]);
    assert_true(k->softmax && k->softmax_bw && k->layernorm && k->layernorm_bw && k->xent && k->xent_bw);
    assert_true(k->embedding_bw && k->col2im && k->maxpool && k->maxpool_bw && k->attention && k->attention_bw);
    assert_true(k->sgd && k->adamw && k->range && k->quant8 && !k->gemm_f32_bf16x1 && !k->gemm_f32_bf16x3);
}

/* ---- the dispatch rule's choices ---- */

/* The isa tag of the entry each cell runs at level l, as the kernel folders chose before the registry
 * (NULL: none). The highest usable level wins; AVX512-BF16 kernels where the CPU has it; the one-pass F32
 * GEMM of AVX512-BF16 not on CPUs that report AMX (vdpbf16ps is slow there); nothing in the split slots
 * below the levels that speed them up; attention on the tiles at the AMX level. */
static const char *expected_tag(ampci_slot slot, int key, ampc_isa l) {
    bool bf16 = ampc_cpu_has(AMPC_CPU_AVX512_BF16), amx = l >= AMPC_ISA_AMX, avx512 = l >= AMPC_ISA_AVX512;
    const char *vec = avx512 ? "avx512" : "ref", *vec_bf16 = avx512 && bf16 ? "avx512bf16" : vec;
    switch (slot) {
    case AMPCI_SLOT_CONVERT:
        if (!avx512) return l == AMPC_ISA_AVX2 ? "avx2" : "ref";
        return key == AMPC_DTYPE_BF16 * AMPC_DTYPE_COUNT + AMPC_DTYPE_F32 ? vec_bf16 : vec;
    case AMPCI_SLOT_GEMM:
        if (key == AMPC_DTYPE_F16) return amx ? "amx_bf16x3" : vec;
        return key == AMPC_DTYPE_BF16 ? (amx ? "amx" : vec_bf16) : vec;
    case AMPCI_SLOT_GEMM_F32_BF16X1:
        return amx ? "amx" : avx512 && bf16 && !ampc_cpu()->cpuid[AMPC_CPU_AMX_BF16] ? "avx512bf16" : NULL;
    case AMPCI_SLOT_GEMM_F32_BF16X3: return amx ? "amx" : NULL;
    case AMPCI_SLOT_ATTENTION:
    case AMPCI_SLOT_ATTENTION_BW: return amx ? "amx" : vec_bf16;
    default: return vec;
    }
}

/* The field of a table that the cell's chosen kernel must be in (the test's own map of slots to fields). */
static const void *field(const struct ampc_kernels *k, const ampci_kernel *e) {
    int d = e->dtype, op = e->op;
    switch (e->slot) {
    case AMPCI_SLOT_CONVERT: return (const void *)k->cvt[d][e->src];
    case AMPCI_SLOT_GEMM: return (const void *)k->gemm[d];
    case AMPCI_SLOT_GEMM_F32_BF16X1: return (const void *)k->gemm_f32_bf16x1;
    case AMPCI_SLOT_GEMM_F32_BF16X3: return (const void *)k->gemm_f32_bf16x3;
    case AMPCI_SLOT_UNARY: return (const void *)k->unary[op];
    case AMPCI_SLOT_UNARY_BW: return (const void *)k->unary_bw[op];
    case AMPCI_SLOT_BINARY: return (const void *)k->binary[op];
    case AMPCI_SLOT_SOFTMAX: return (const void *)k->softmax;
    case AMPCI_SLOT_SOFTMAX_BW: return (const void *)k->softmax_bw;
    case AMPCI_SLOT_LAYERNORM: return (const void *)k->layernorm;
    case AMPCI_SLOT_LAYERNORM_BW: return (const void *)k->layernorm_bw;
    case AMPCI_SLOT_XENT: return (const void *)k->xent;
    case AMPCI_SLOT_XENT_BW: return (const void *)k->xent_bw;
    case AMPCI_SLOT_EMBEDDING_BW: return (const void *)k->embedding_bw;
    case AMPCI_SLOT_IM2COL: return (const void *)k->im2col[d];
    case AMPCI_SLOT_COL2IM: return (const void *)k->col2im;
    case AMPCI_SLOT_MAXPOOL: return (const void *)k->maxpool;
    case AMPCI_SLOT_MAXPOOL_BW: return (const void *)k->maxpool_bw;
    case AMPCI_SLOT_ATTENTION: return (const void *)k->attention;
    case AMPCI_SLOT_ATTENTION_BW: return (const void *)k->attention_bw;
    case AMPCI_SLOT_SGD: return (const void *)k->sgd;
    case AMPCI_SLOT_ADAMW: return (const void *)k->adamw;
    case AMPCI_SLOT_UNSCALE: return (const void *)k->unscale[d];
    case AMPCI_SLOT_SUMSQ: return (const void *)k->sumsq[d];
    case AMPCI_SLOT_COLSUM: return (const void *)k->colsum[d];
    case AMPCI_SLOT_RANGE: return (const void *)k->range;
    case AMPCI_SLOT_QUANT8: return (const void *)k->quant8;
    default: FAILF("slot %d", (int)e->slot);
    }
    return NULL;
}

/* Every cell of the table of level l (each cell visited through its ref entry). */
static void check_level(ampc_isa l) {
    const struct ampc_kernels *k = ampci_kernels(l);
    ampc_isa eff = l < ampc_cpu()->chosen ? l : ampc_cpu()->chosen; /* AMPC_ISA and the CPU lower it */
    assert_int_equal(k->isa, eff);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *r = all[i];
        if (r->level != AMPC_ISA_REF) continue;
        int key = ampci_kernel_key(r);
        const char *tag = expected_tag(r->slot, key, eff);
        const ampci_kernel *got = k->chosen[r->slot][key];
        char want[96];
        snprintf(want, sizeof want, "%.*s__%s", (int)(strstr(r->name, "__") - r->name), r->name, tag ? tag : "");
        const char *cell = ampci_cell_name(r->slot, key);
        if (!tag && got) FAILF("level %s, %s: %s chosen, expected none", ampc_isa_name(eff), cell, got->name);
        if (tag && (!got || strcmp(got->name, want) != 0))
            FAILF("level %s, %s: %s chosen, expected %s", ampc_isa_name(eff), cell, got ? got->name : "none", want);
        const void *fn = got ? (const void *)got->fn.GEMM : NULL; /* any member: the same pointer */
        if (field(k, r) != fn) FAILF("level %s, %s: the table's field is not the chosen one", ampc_isa_name(eff), cell);
        if (got) assert_true(got->level <= eff && ampci_kernel_usable(got) && got->role == AMPCI_ROLE_KERNEL);
    }
}

static void test_choices(void **state) {
    (void)state;
    const ampc_cpu_info *cpu = ampc_cpu();
    printf("  CPU: best %s, chosen %s%s%s\n", ampc_isa_name(cpu->best), ampc_isa_name(cpu->chosen),
           ampc_cpu_has(AMPC_CPU_AVX512_BF16) ? ", AVX512-BF16" : "", cpu->cpuid[AMPC_CPU_AMX_BF16] ? ", AMX" : "");
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) check_level((ampc_isa)l);
    assert_ptr_equal(ampci_kernels(AMPC_ISA_AUTO), ampci_kernels(cpu->chosen));
}

/* The candidates are what the rule chose from: the chosen one is among them. */
static void test_candidates(void **state) {
    (void)state;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *cand[16], *e = all[i];
        int key = ampci_kernel_key(e);
        size_t nc = ampci_candidates(AMPC_ISA_AUTO, e->slot, key, cand, 16);
        bool found = k->chosen[e->slot][key] == NULL;
        for (size_t c = 0; c < nc; c++) {
            found |= cand[c] == k->chosen[e->slot][key];
            assert_true(ampci_same_cell(cand[c], e) && cand[c]->level <= k->isa && ampci_kernel_usable(cand[c]));
        }
        if (!found) FAILF("%s: the chosen kernel is not a candidate", ampci_cell_name(e->slot, key));
    }
}

/* ---- the public introspection ---- */

static void test_public(void **state) {
    (void)state;
    const struct ampc_kernels *k = ampci_kernels(AMPC_ISA_AUTO);
    int rows = 0;
    bool softmax = false, gemm_bf16 = false;
    for (int i = 0; ampc_kernel_slot_name(i); i++, rows++) {
        const char *slot = ampc_kernel_slot_name(i), *impl = ampc_kernel_slot_impl(i);
        assert_non_null(impl);
        softmax |= strcmp(slot, "softmax") == 0, gemm_bf16 |= strcmp(slot, "gemm_bf16") == 0;
        if (strcmp(impl, "-") == 0) continue;
        const ampci_kernel *e = ampci_kernel_find(impl);
        if (!e) FAILF("slot %s names %s, which is not registered", slot, impl);
        assert_ptr_equal(k->chosen[e->slot][ampci_kernel_key(e)], e);
        assert_string_equal(ampci_cell_name(e->slot, ampci_kernel_key(e)), slot);
    }
    assert_true(softmax && gemm_bf16 && rows >= 19);
    assert_null(ampc_kernel_slot_impl(rows));
    for (int d = AMPC_DTYPE_F32; d <= AMPC_DTYPE_BF16; d++)
        for (int s = AMPC_DTYPE_F32; s <= AMPC_DTYPE_BF16; s++)
            if (s != d) assert_non_null(ampci_kernel_find(ampc_convert_kernel_name((ampc_dtype)d, (ampc_dtype)s)));
    assert_string_equal(ampc_convert_kernel_name(AMPC_DTYPE_F16, AMPC_DTYPE_F16), "memcpy");
    assert_string_equal(ampc_convert_kernel_name(AMPC_DTYPE_F64, AMPC_DTYPE_F32), "generic");
    assert_null(ampc_convert_kernel_name(AMPC_DTYPE_COUNT, AMPC_DTYPE_F32));
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    ampc_kernel_desc d;
    for (size_t i = 0; i < n; i++) {
        assert_true(ampc_kernel_describe((int)i, &d));
        const ampci_kernel *e = all[i];
        assert_string_equal(d.name, e->name);
        assert_string_equal(d.slot, ampci_cell_name(e->slot, ampci_kernel_key(e)));
        assert_true(d.level == e->level && d.needs == e->needs && d.usable == ampci_kernel_usable(e));
        assert_true(d.candidate == (e->role == AMPCI_ROLE_KERNEL));
        assert_true(d.chosen == (k->chosen[e->slot][ampci_kernel_key(e)] == e));
    }
    assert_false(ampc_kernel_describe((int)n, &d));
    assert_false(ampc_kernel_describe(-1, &d));
}

int main(void) {
    setenv("AMPC_KERNEL_CHOICE", "rule", 1); /* before the first table is filled */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_folders),
        cmocka_unit_test(test_one_ref_per_cell),
        cmocka_unit_test(test_choices),
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_public),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
