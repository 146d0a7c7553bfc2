/* tune.h: kernels chosen by measurement. Once per process, before the first kernel table is filled, the
 * candidates of every cell that has a choice are timed on representative shapes (tune.c: the rounds and
 * the pick; tune_work.c: the operands and the timed calls), or their times are read from the cache file of
 * this CPU and library version (tune_cache.c: the file, its lock, the environment switches). dispatch.c
 * turns the times into each level's choices. Everything here is internal to the kernels floor and to
 * tests (tests/test_tune.c drives the rounds and the cache with a fake timer). */
#ifndef AMPC_TUNE_H
#define AMPC_TUNE_H

#include "kernels.h"

#define AMPCI_TUNE_MAX_CAND 16   /* candidates of one cell (as dispatch.c's MAX_CANDIDATES) */
#define AMPCI_TUNE_MAX_CELLS 96  /* cells with a choice */
#define AMPCI_TUNE_MAX_SHAPES 8  /* representative shapes of one cell */
#define AMPCI_TUNE_MARGIN 0.03   /* the rule's pick keeps its place unless another is this much faster */
#define AMPCI_TUNE_DROP 1.5      /* after the minimum rounds, a candidate this much slower stops running */
#define AMPCI_TUNE_SKIP 4.0      /* this much slower on a smaller shape: not run on larger ones ... */
#define AMPCI_TUNE_SKIP_SEC 5e-3 /* ... when one call there would take longer than this */

/* ---- size classes: the GEMM cells choose per class, since AMX's fixed costs lose on small products ---- */

typedef enum ampci_size_class { AMPCI_SIZE_SMALL = 0, AMPCI_SIZE_MEDIUM, AMPCI_SIZE_LARGE } ampci_size_class;
/* M*N*K below 2^22 multiply-adds is small (up to about 160^3), below 2^26 medium (about 400^3), else large. */
AMPCI_HIDDEN ampci_size_class ampci_gemm_size_class(int64_t M, int64_t N, int64_t K);
/* "small", "medium", "large"; NULL past the end. */
AMPCI_HIDDEN const char *ampci_size_class_name(int c);

/* One representative shape of a cell. GEMM: m, n, k (ta: a stored transposed), work = m n k; other cells
 * have one shape (work 1), whose sizes tune_work.c fixes. */
typedef struct ampci_tune_shape {
    int64_t m, n, k;
    bool ta;
    int cls; /* its size class (0 for cells without classes) */
    double work;
} ampci_tune_shape;
/* The cell's shapes, smaller first; returns how many. */
AMPCI_HIDDEN int ampci_tune_shapes(ampci_slot slot, int key, ampci_tune_shape *out);

/* ---- the measured times ---- */

/* One cell: its candidates (every usable KERNEL entry, any level: one measurement serves every table; a
 * split F32 cell's also the F32 GEMM's, timed in the same rounds: what "none" costs there) and per class
 * the sum over the class's shapes of each one's median seconds per call. INFINITY: not timed (it failed,
 * or was far slower on a smaller shape). */
typedef struct ampci_cell_times {
    ampci_slot slot;
    int key;
    int nclass; /* AMPCI_SIZE_CLASSES for GEMM cells, else 1 */
    int n;
    const ampci_kernel *cand[AMPCI_TUNE_MAX_CAND];
    double sec[AMPCI_TUNE_MAX_CAND][AMPCI_SIZE_CLASSES];
} ampci_cell_times;

typedef struct ampci_tune_times {
    int ncells;
    ampci_cell_times cell[AMPCI_TUNE_MAX_CELLS];
    double seconds; /* what the measurement took */
} ampci_tune_times;

/* The cells to measure, with their candidates and no times yet: every cell with two or more usable
 * KERNEL candidates, and every split F32 cell with one (it races the F32 GEMM). */
AMPCI_HIDDEN void ampci_tune_cells(ampci_tune_times *t);
/* The times of e in cell (slot, key), or NULL when it was not measured there. */
AMPCI_HIDDEN const double *ampci_tune_sec(const ampci_tune_times *t, ampci_slot slot, int key, const ampci_kernel *e);
AMPCI_HIDDEN const ampci_cell_times *ampci_tune_cell(const ampci_tune_times *t, ampci_slot slot, int key);

/* What is timed. prepare makes shape s of a cell current (operands written once, outside the timing);
 * time runs e once on it and returns the seconds, < 0 when the kernel failed; done frees what prepare
 * made. tune_work.c's real one runs the kernels on a scratch context; tests pass fake ones. */
typedef struct ampci_tune_ops {
    bool (*prepare)(void *user, ampci_slot slot, int key, const ampci_tune_shape *s);
    double (*time)(void *user, const ampci_kernel *e);
    void (*done)(void *user);
    void *user;
} ampci_tune_ops;

/* Times every cell of t (from ampci_tune_cells): one untimed call each on the cell's first shape, then
 * per shape rounds that call every candidate once, in rotating order; at least 3 rounds and up to 15
 * while the shape has taken less than 4 ms; a candidate AMPCI_TUNE_DROP slower than the best median
 * stops early, one AMPCI_TUNE_SKIP slower on the previous shape skips the larger ones whose predicted
 * call exceeds AMPCI_TUNE_SKIP_SEC, and one that fails is not run again in the cell. */
AMPCI_HIDDEN void ampci_tune_measure(ampci_tune_times *t, const ampci_tune_ops *ops);
/* The real timer (tune_work.c): a scratch context of one thread, operands freed at done. */
AMPCI_HIDDEN double ampci_tune_now(void); /* seconds on the monotonic clock */
AMPCI_HIDDEN ampc_status ampci_tune_work_new(ampci_tune_ops *out);
AMPCI_HIDDEN void ampci_tune_work_free(ampci_tune_ops *ops);

/* The pick among n times (INFINITY: not timed): the fastest, except that `pref` (the rule's pick, or -1)
 * stays unless another is more than AMPCI_TUNE_MARGIN faster; ties go to the later index (the rule's
 * order, best last). -1 when none was timed. *second: the fastest of the others (-1: none). */
AMPCI_HIDDEN int ampci_tune_pick(const double *sec, int n, int pref, int *second);

/* ---- the process's choice: mode, source, cache (tune_cache.c) ---- */

typedef enum ampci_tune_mode { AMPCI_TUNE_MEASURE = 0, AMPCI_TUNE_RULE } ampci_tune_mode;
typedef enum ampci_tune_source {
    AMPCI_TUNE_FROM_RULE = 0, /* AMPC_KERNEL_CHOICE=rule, or no cell has a choice */
    AMPCI_TUNE_FROM_MEASURED, /* this process measured */
    AMPCI_TUNE_FROM_CACHE,    /* read from the cache file */
} ampci_tune_source;
typedef enum ampci_tune_cache { AMPCI_CACHE_ON = 0, AMPCI_CACHE_OFF, AMPCI_CACHE_REFRESH } ampci_tune_cache;

typedef struct ampci_tune_state {
    ampci_tune_mode mode;
    ampci_tune_source source;
    ampci_tune_cache cache;
    char path[512]; /* the cache file ("" when there is none) */
    char note[768]; /* why there is no cache, or what went wrong with it ("" when fine) */
    bool written;   /* this process wrote the cache file */
    ampci_tune_times times;
} ampci_tune_state;

/* Parses AMPC_KERNEL_CHOICE (NULL or "" = measure) and AMPC_KERNEL_CACHE (NULL or "" = on): false for an
 * unknown value, *out then the default. */
AMPCI_HIDDEN bool ampci_tune_parse_mode(const char *v, ampci_tune_mode *out);
AMPCI_HIDDEN bool ampci_tune_parse_cache(const char *v, ampci_tune_cache *out);
/* The process's state: the first call reads the environment (an unknown value warns once, on stderr, and
 * the default applies) and, measuring, reads the cache or measures and writes it. */
AMPCI_HIDDEN const ampci_tune_state *ampci_tune(void);

/* The cache file for this CPU and library build under dir ($XDG_CACHE_HOME/ampc, else ~/.cache/ampc when
 * dir is NULL): false when there is no such folder to use (note says why). */
AMPCI_HIDDEN bool ampci_tune_cache_path(const char *dir, char *path, size_t size, char *note, size_t note_size);
/* Reads the file into t (whose cells ampci_tune_cells set): false, with the reason in note, when it is
 * missing, corrupt, incomplete or for another build or CPU. */
AMPCI_HIDDEN bool ampci_tune_cache_read(const char *path, ampci_tune_times *t, char *note, size_t note_size);
/* Writes t atomically (PATH.tmp, then rename). */
AMPCI_HIDDEN bool ampci_tune_cache_write(const char *path, const ampci_tune_times *t, char *note, size_t note_size);
/* Fills *st the way a process does: from the cache at path (unless refresh) or, under an exclusive lock
 * on PATH.lock, by reading it again (another process may have measured meanwhile) or measuring with ops
 * and writing it. path "" = no cache. */
AMPCI_HIDDEN void ampci_tune_load(ampci_tune_state *st, const char *path, const ampci_tune_ops *ops);

#endif
