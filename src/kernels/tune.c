/* tune.c: the measurement of the kernel candidates and the pick among them (tune.h). Which cells have a
 * choice, which shapes represent them, how the rounds run (interleaved, so a neighbour's burst of load
 * hits every candidate alike; medians, so one slow round does not decide), and how the fastest is picked
 * with a small margin in favour of the fixed rule's choice, so that a near tie does not flip between
 * processes for nothing. The timer is a parameter: tune_work.c runs the kernels, tests inject numbers. */
#include "tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MIN_ROUNDS 3
#define MAX_ROUNDS 15
#define SHAPE_SECONDS 4e-3 /* rounds go on past the minimum while a shape has taken less than this */
#define WARM_DROP_SEC 5e-4

ampci_size_class ampci_gemm_size_class(int64_t M, int64_t N, int64_t K) {
    double work = (double)M * (double)N * (double)K;
    return work < 0x1p22 ? AMPCI_SIZE_SMALL : work < 0x1p26 ? AMPCI_SIZE_MEDIUM : AMPCI_SIZE_LARGE;
}

const char *ampci_size_class_name(int c) {
    static const char *const names[AMPCI_SIZE_CLASSES] = {"small", "medium", "large"};
    return c >= 0 && c < AMPCI_SIZE_CLASSES ? names[c] : NULL;
}

/* The GEMM shapes, two a class: square-ish ones and the default GPT's projection (2048 tokens, d 384)
 * with its weight gradient (a transposed), the shapes `ampc bench gemm` reports. */
static const ampci_tune_shape gemm_shapes[] = {
    {64, 64, 64, false, AMPCI_SIZE_SMALL, 0},     {128, 128, 128, false, AMPCI_SIZE_SMALL, 0},
    {256, 256, 256, false, AMPCI_SIZE_MEDIUM, 0}, {384, 128, 512, true, AMPCI_SIZE_MEDIUM, 0},
    {2048, 384, 384, false, AMPCI_SIZE_LARGE, 0}, {384, 384, 2048, true, AMPCI_SIZE_LARGE, 0},
};

int ampci_tune_shapes(ampci_slot slot, int key, ampci_tune_shape *out) {
    if (ampci_gemm_cell(slot, key) < 0) return out[0] = (ampci_tune_shape){1, 1, 1, false, 0, 1.0}, 1;
    int n = (int)(sizeof gemm_shapes / sizeof gemm_shapes[0]);
    for (int i = 0; i < n; i++) {
        out[i] = gemm_shapes[i];
        out[i].work = (double)out[i].m * (double)out[i].n * (double)out[i].k;
    }
    return n;
}

/* ---- which cells ---- */

static ampci_cell_times *cell_of(ampci_tune_times *t, ampci_slot slot, int key) {
    for (int i = 0; i < t->ncells; i++)
        if (t->cell[i].slot == slot && t->cell[i].key == key) return &t->cell[i];
    return NULL;
}

/* A split F32 cell also times the F32 GEMM's candidates, in the same rounds: what "none" costs. */
static void add_f32(ampci_tune_times *t) {
    const ampci_cell_times *f32 = cell_of(t, AMPCI_SLOT_GEMM, AMPC_DTYPE_F32);
    for (int i = 0; f32 && i < t->ncells; i++) {
        ampci_cell_times *c = &t->cell[i];
        if (!ampci_split_cell(c->slot)) continue;
        AMPCI_ASSERT(c->n + f32->n <= AMPCI_TUNE_MAX_CAND);
        for (int j = 0; j < f32->n; j++) c->cand[c->n++] = f32->cand[j];
    }
}

/* Every usable KERNEL entry of every cell, in registry order, then the cells without a choice removed. */
void ampci_tune_cells(ampci_tune_times *t) {
    memset(t, 0, sizeof *t);
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    for (size_t i = 0; i < n; i++) {
        const ampci_kernel *e = all[i];
        if (e->role != AMPCI_ROLE_KERNEL || !ampci_kernel_usable(e)) continue;
        int key = ampci_kernel_key(e);
        ampci_cell_times *c = cell_of(t, e->slot, key);
        if (!c) {
            AMPCI_ASSERT(t->ncells < AMPCI_TUNE_MAX_CELLS);
            c = &t->cell[t->ncells++];
            *c = (ampci_cell_times){.slot = e->slot, .key = key, .nclass = ampci_gemm_cell(e->slot, key) >= 0 ? 3 : 1};
        }
        AMPCI_ASSERT(c->n < AMPCI_TUNE_MAX_CAND);
        c->cand[c->n++] = e;
    }
    add_f32(t);
    int kept = 0;
    for (int i = 0; i < t->ncells; i++)
        if (t->cell[i].n >= 2) t->cell[kept++] = t->cell[i];
    t->ncells = kept;
}

const ampci_cell_times *ampci_tune_cell(const ampci_tune_times *t, ampci_slot slot, int key) {
    return cell_of((ampci_tune_times *)t, slot, key);
}

const double *ampci_tune_sec(const ampci_tune_times *t, ampci_slot slot, int key, const ampci_kernel *e) {
    const ampci_cell_times *c = e ? ampci_tune_cell(t, slot, key) : NULL;
    for (int i = 0; c && i < c->n; i++)
        if (c->cand[i] == e) return c->sec[i];
    return NULL;
}

/* ---- the pick ---- */

int ampci_tune_pick(const double *sec, int n, int pref, int *second) {
    int best = -1;
    for (int i = 0; i < n; i++)
        if (isfinite(sec[i]) && (best < 0 || sec[i] <= sec[best])) best = i;
    if (best >= 0 && pref >= 0 && pref < n && isfinite(sec[pref]) && sec[pref] <= sec[best] * (1.0 + AMPCI_TUNE_MARGIN))
        best = pref;
    int other = -1;
    for (int i = 0; i < n; i++)
        if (i != best && isfinite(sec[i]) && (other < 0 || sec[i] <= sec[other])) other = i;
    if (second) *second = other;
    return best;
}

/* ---- the rounds ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

typedef struct race {
    int n;
    bool run[AMPCI_TUNE_MAX_CAND];   /* still running on this shape */
    int rounds[AMPCI_TUNE_MAX_CAND]; /* measured calls */
    double t[AMPCI_TUNE_MAX_CAND][MAX_ROUNDS];
} race;

/* One call of candidate i; a failure takes it out of the cell (run false, med INFINITY). */
static void call(const ampci_tune_ops *ops, const ampci_cell_times *c, race *r, int i, bool timed, double *spent) {
    double s = ops->time(ops->user, c->cand[i]);
    if (s < 0) {
        r->run[i] = false, r->rounds[i] = -1;
        return;
    }
    *spent += s;
    if (timed) r->t[i][r->rounds[i]++] = s;
}

/* After a round: candidates far slower than the best median stop. */
static void drop_slow(race *r, int round) {
    if (round + 1 < MIN_ROUNDS) return;
    double best = INFINITY, med[AMPCI_TUNE_MAX_CAND];
    for (int i = 0; i < r->n; i++) {
        med[i] = r->rounds[i] > 0 ? median(r->t[i], r->rounds[i]) : INFINITY;
        if (r->run[i] && med[i] < best) best = med[i];
    }
    for (int i = 0; i < r->n; i++)
        if (r->run[i] && med[i] > AMPCI_TUNE_DROP * best) r->run[i] = false;
}

/* The first shape of a cell starts with one untimed call each (code, TLB, AMX tile state); one that takes
 * AMPCI_TUNE_SKIP times the fastest's and longer than WARM_DROP_SEC stops at once, with that call as its
 * time (the ref attention would otherwise cost most of the measurement and cannot win). */
static void warm_up(const ampci_tune_ops *ops, const ampci_cell_times *c, race *r) {
    double t[AMPCI_TUNE_MAX_CAND], spent = 0, best = INFINITY;
    for (int i = 0; i < r->n; i++) {
        t[i] = INFINITY, spent = 0;
        if (r->run[i]) call(ops, c, r, i, false, &spent), t[i] = r->run[i] ? spent : INFINITY;
        best = t[i] < best ? t[i] : best;
    }
    for (int i = 0; i < r->n; i++)
        if (r->run[i] && t[i] > AMPCI_TUNE_SKIP * best && t[i] > WARM_DROP_SEC)
            r->run[i] = false, r->t[i][0] = t[i], r->rounds[i] = 1;
}

/* Times one shape: out[i] = the median seconds of candidate i, INFINITY when it did not run or failed. */
static void race_shape(const ampci_tune_ops *ops, const ampci_cell_times *c, race *r, bool first, double *out) {
    double spent = 0;
    if (first) warm_up(ops, c, r);
    for (int round = 0; round < MAX_ROUNDS && (round < MIN_ROUNDS || spent < SHAPE_SECONDS); round++) {
        bool any = false;
        for (int j = 0; j < r->n; j++) {
            int i = (j + round) % r->n; /* rotating order: no candidate always runs first */
            if (r->run[i]) call(ops, c, r, i, true, &spent), any = true;
        }
        if (!any) break;
        drop_slow(r, round);
    }
    for (int i = 0; i < r->n; i++) out[i] = r->rounds[i] > 0 ? median(r->t[i], r->rounds[i]) : INFINITY;
}

/* Which candidates run on the next shape: not one that failed, nor one far slower on the previous shape
 * whose call there would be long (the ref GEMM on the large shapes). */
static void next_shape(race *r, const double *prev, bool failed[], double scale) {
    double best = INFINITY;
    for (int i = 0; i < r->n; i++) best = prev[i] < best ? prev[i] : best;
    for (int i = 0; i < r->n; i++) {
        failed[i] |= r->rounds[i] < 0;
        bool slow = isfinite(best) && prev[i] > AMPCI_TUNE_SKIP * best && prev[i] * scale > AMPCI_TUNE_SKIP_SEC;
        r->run[i] = !failed[i] && !slow && (isfinite(prev[i]) || !isfinite(best));
        r->rounds[i] = 0;
    }
}

static void measure_cell(ampci_cell_times *c, const ampci_tune_ops *ops) {
    ampci_tune_shape sh[AMPCI_TUNE_MAX_SHAPES];
    int ns = ampci_tune_shapes(c->slot, c->key, sh);
    race r = {.n = c->n};
    bool failed[AMPCI_TUNE_MAX_CAND] = {false};
    double prev[AMPCI_TUNE_MAX_CAND], med[AMPCI_TUNE_MAX_CAND];
    for (int i = 0; i < c->n; i++) {
        prev[i] = 0, r.run[i] = true;
        for (int k = 0; k < AMPCI_SIZE_CLASSES; k++) c->sec[i][k] = k < c->nclass ? 0 : INFINITY;
    }
    for (int s = 0; s < ns; s++) {
        if (s > 0) next_shape(&r, prev, failed, sh[s].work / sh[s - 1].work);
        bool ok = ops->prepare(ops->user, c->slot, c->key, &sh[s]);
        if (ok) race_shape(ops, c, &r, s == 0, med);
        for (int i = 0; i < c->n; i++) {
            prev[i] = ok ? med[i] : INFINITY;
            c->sec[i][sh[s].cls] += prev[i];
        }
    }
}

void ampci_tune_measure(ampci_tune_times *t, const ampci_tune_ops *ops) {
    for (int i = 0; i < t->ncells; i++) measure_cell(&t->cell[i], ops);
    if (ops->done) ops->done(ops->user);
}
