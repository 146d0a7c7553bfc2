/* dispatch.c: fills one kernel table per level, once, from the CPU probe. A slot takes the last usable
 * implementation registered for it (folders register in the order ref, avx2, avx512, each best-last),
 * restricted to implementations whose level is at most the table's level: so AMPC_ISA and a context's
 * isa cap can only lower what runs. */
#include "kernels.h"

#include <pthread.h>

static struct ampc_kernels g_tables[AMPC_ISA_COUNT];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* All registries in ascending level order. */
static ampci_cvt_impl g_impls[64];
static size_t g_nimpls;

static void add_impls(const ampci_cvt_impl *list, size_t n) {
    for (size_t i = 0; i < n; i++) {
        AMPCI_ASSERT(g_nimpls < sizeof g_impls / sizeof g_impls[0]);
        g_impls[g_nimpls++] = list[i];
    }
}

bool ampci_cvt_impl_usable(const ampci_cvt_impl *impl) {
    if (impl->level > ampc_cpu()->best) return false;
    for (int i = 0; i < AMPCI_MAX_NEEDS; i++)
        if (impl->needs[i] != AMPC_CPU_SSE42 && !ampc_cpu_has(impl->needs[i])) return false;
    return true;
}

void ampci_kernels_fill_ref(struct ampc_kernels *k) {
    ampci_fill_ref_gemm(k);
    ampci_fill_ref_eltwise(k);
    ampci_fill_ref_norm(k);
    ampci_fill_ref_nn(k);
    ampci_fill_ref_conv(k);
    ampci_fill_ref_optim(k);
}

static const char *const g_slot_names[AMPCI_SLOT_COUNT] = {
    [AMPCI_SLOT_GEMM_F32] = "gemm_f32", [AMPCI_SLOT_GEMM_F16] = "gemm_f16", [AMPCI_SLOT_GEMM_BF16] = "gemm_bf16",
    [AMPCI_SLOT_GEMM_F32_BF16X1] = "gemm_f32_bf16x1", [AMPCI_SLOT_GEMM_F32_BF16X3] = "gemm_f32_bf16x3",
    [AMPCI_SLOT_UNARY] = "unary", [AMPCI_SLOT_BINARY] = "binary", [AMPCI_SLOT_SOFTMAX] = "softmax",
    [AMPCI_SLOT_LAYERNORM] = "layernorm", [AMPCI_SLOT_XENT] = "cross_entropy",
    [AMPCI_SLOT_EMBEDDING_BW] = "embedding_bw", [AMPCI_SLOT_IM2COL] = "im2col", [AMPCI_SLOT_COL2IM] = "col2im",
    [AMPCI_SLOT_MAXPOOL] = "maxpool", [AMPCI_SLOT_ATTENTION] = "attention", [AMPCI_SLOT_SGD] = "sgd",
    [AMPCI_SLOT_ADAMW] = "adamw", [AMPCI_SLOT_UNSCALE] = "unscale", [AMPCI_SLOT_SUMSQ] = "sumsq",
};

const char *ampci_slot_name(ampci_slot slot) {
    return slot >= 0 && slot < AMPCI_SLOT_COUNT ? g_slot_names[slot] : "?";
}

static void fill(struct ampc_kernels *k, ampc_isa level) {
    k->isa = level;
    ampci_kernels_fill_ref(k);
    if (level >= AMPC_ISA_AVX512 && ampc_cpu()->best >= AMPC_ISA_AVX512) ampci_fill_avx512(k);
    if (level >= AMPC_ISA_AMX && ampc_cpu()->best >= AMPC_ISA_AMX) ampci_fill_amx(k);
    k->impl[AMPCI_SLOT_GEMM_F32] = k->gemm_name[AMPC_DTYPE_F32];
    k->impl[AMPCI_SLOT_GEMM_F16] = k->gemm_name[AMPC_DTYPE_F16];
    k->impl[AMPCI_SLOT_GEMM_BF16] = k->gemm_name[AMPC_DTYPE_BF16];
    for (size_t i = 0; i < g_nimpls; i++) {
        const ampci_cvt_impl *im = &g_impls[i];
        if (im->level > level || !ampci_cvt_impl_usable(im)) continue;
        k->cvt[im->dst][im->src] = im->fn;
        k->cvt_name[im->dst][im->src] = im->name;
    }
}

static void init_tables(void) {
    add_impls(ampci_cvt_ref, ampci_cvt_ref_count);
    add_impls(ampci_cvt_avx2, ampci_cvt_avx2_count);
    add_impls(ampci_cvt_avx512, ampci_cvt_avx512_count);
    for (int l = AMPC_ISA_REF; l < AMPC_ISA_COUNT; l++) fill(&g_tables[l], (ampc_isa)l);
}

const ampci_cvt_impl *ampci_cvt_impls(size_t *count) {
    pthread_once(&g_once, init_tables);
    *count = g_nimpls;
    return g_impls;
}

const struct ampc_kernels *ampci_kernels(ampc_isa isa) {
    pthread_once(&g_once, init_tables);
    const ampc_cpu_info *cpu = ampc_cpu();
    if (isa == AMPC_ISA_AUTO || isa > cpu->chosen) isa = cpu->chosen;
    return &g_tables[isa];
}
