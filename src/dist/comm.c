/* comm.c: the MPI side of data parallelism. A handle owns a duplicate of the caller's communicator (so
 * our traffic never meets theirs) with MPI_ERRORS_RETURN, 2-byte datatypes and F32-accumulating sum ops
 * for BF16/F16 (OpenMPI 4.1 has no 16-bit float types). Every collective is issued non-blocking and
 * waited for against a deadline, so a rank that died shows up as a named error within timeout_s instead
 * of a hang. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool ampc_dist_available(void) { return true; }

const char *ampc_dist_library(void) {
    static char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    if (!lib[0]) {
        int len = 0;
        MPI_Get_library_version(lib, &len);
        lib[strcspn(lib, "\n,")] = '\0'; /* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4" */
    }
    return lib;
}

double ampci_dist_now(void) { return MPI_Wtime(); }

ampc_status ampci_dist_mpi_fail(const ampc_dist *d, int err, const char *what) {
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return ampci_fail(AMPC_STATUS_DIST, "rank %d: %s failed: %s (another rank may have died)", d ? d->rank : -1, what,
                      msg);
}

/* Polls for up to SPIN_S (a collective between ranks in step answers within microseconds to a few
 * milliseconds, and sleeping would add the sleep to every step), then sleeps between polls, so a rank
 * that waits long (for a rank that is saving, or gone) leaves its core to others. */
#define SPIN_S 0.001
ampc_status ampci_dist_wait(ampc_dist *d, MPI_Request *req, const char *what) {
    double start = MPI_Wtime(), deadline = start + d->timeout;
    for (long polls = 0;; polls++) {
        int done = 0, err = MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (err != MPI_SUCCESS) return ampci_dist_mpi_fail(d, err, what);
        if (done) return AMPC_OK;
        if (polls % 64 || MPI_Wtime() - start < SPIN_S) continue;
        if (MPI_Wtime() > deadline)
            return ampci_fail(AMPC_STATUS_DIST,
                              "rank %d: %s did not complete within %g s: another rank has died or stopped answering",
                              d->rank, what, d->timeout);
        nanosleep(&(struct timespec){0, 50000}, NULL);
    }
}

ampc_status ampci_dist_complete(ampc_dist *d, int err, MPI_Request *req, const char *what) {
    return err != MPI_SUCCESS ? ampci_dist_mpi_fail(d, err, what) : ampci_dist_wait(d, req, what);
}

/* ---- 16-bit sums: widen both operands, add in F32, round once ---- */

static void sum16(void *in, void *inout, int *len, ampc_dtype dt) {
    enum { C = 1024 };
    float a[C], b[C];
    const uint16_t *x = in;
    uint16_t *y = inout;
    for (int i = 0; i < *len; i += C) {
        size_t n = (size_t)(*len - i < C ? *len - i : C);
        ampc_convert(a, AMPC_DTYPE_F32, x + i, dt, n);
        ampc_convert(b, AMPC_DTYPE_F32, y + i, dt, n);
        for (size_t k = 0; k < n; k++) b[k] += a[k];
        ampc_convert(y + i, dt, b, AMPC_DTYPE_F32, n);
    }
}
static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    sum16(in, inout, len, AMPC_DTYPE_BF16);
}
static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *t) {
    (void)t;
    sum16(in, inout, len, AMPC_DTYPE_F16);
}

MPI_Datatype ampci_dist_type(const ampc_dist *d, ampc_dtype dt) {
    switch (dt) {
    case AMPC_DTYPE_F32: return MPI_FLOAT;
    case AMPC_DTYPE_F64: return MPI_DOUBLE;
    case AMPC_DTYPE_I64: return MPI_INT64_T;
    case AMPC_DTYPE_I32: return MPI_INT32_T;
    case AMPC_DTYPE_U8: return MPI_UINT8_T;
    case AMPC_DTYPE_BF16: return d->bf16;
    case AMPC_DTYPE_F16: return d->f16;
    default: return MPI_DATATYPE_NULL;
    }
}

MPI_Op ampci_dist_sum(const ampc_dist *d, ampc_dtype dt) {
    return dt == AMPC_DTYPE_BF16 ? d->sum_bf16 : dt == AMPC_DTYPE_F16 ? d->sum_f16 : MPI_SUM;
}

/* ---- the handle ---- */

static ampc_status start(ampc_dist *d, const ampc_dist_params *p) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return ampci_fail(AMPC_STATUS_DIST, "ampc_dist_new: MPI_Init_thread failed");
        d->finalize = true;
    }
    MPI_Comm base = p->comm ? *(const MPI_Comm *)p->comm : MPI_COMM_WORLD;
    int err = MPI_Comm_dup(base, &d->comm);
    if (err != MPI_SUCCESS) return ampci_dist_mpi_fail(d, err, "ampc_dist_new: MPI_Comm_dup");
    MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(d->comm, &d->rank);
    MPI_Comm_size(d->comm, &d->size);
    MPI_Comm node; /* the ranks sharing this machine: they share its cores */
    if (MPI_Comm_split_type(d->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &d->local_size);
        MPI_Comm_free(&node);
    } else {
        d->local_size = 1;
    }
    MPI_Type_contiguous(2, MPI_BYTE, &d->bf16);
    MPI_Type_commit(&d->bf16);
    MPI_Type_contiguous(2, MPI_BYTE, &d->f16);
    MPI_Type_commit(&d->f16);
    MPI_Op_create(sum_bf16, 1, &d->sum_bf16);
    MPI_Op_create(sum_f16, 1, &d->sum_f16);
    return AMPC_OK;
}

ampc_status ampc_dist_new(const ampc_dist_params *params, ampc_dist **out) {
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_new: out must not be NULL");
    *out = NULL;
    ampc_dist_params p = params ? *params : (ampc_dist_params){0};
    if (p.timeout_s == 0) p.timeout_s = 300;
    if (!(p.timeout_s > 0))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_new: timeout_s %g; expected > 0", p.timeout_s);
    ampc_dist *d = calloc(1, sizeof *d);
    if (!d) return ampci_fail(AMPC_STATUS_OOM, "ampc_dist_new: out of memory");
    d->comm = MPI_COMM_NULL;
    d->timeout = p.timeout_s;
    const char *t = getenv("AMPC_TEST_DIST_NO_AGREEMENT");
    d->no_agreement = t && *t && strcmp(t, "0") != 0;
    ampc_status s = start(d, &p);
    if (s != AMPC_OK) {
        ampc_dist_free(d);
        return s;
    }
    *out = d;
    return AMPC_OK;
}

void ampc_dist_free(ampc_dist *d) {
    if (!d) return;
    ampci_dist_detach(d);
    if (d->comm != MPI_COMM_NULL) {
        MPI_Op_free(&d->sum_bf16), MPI_Op_free(&d->sum_f16);
        MPI_Type_free(&d->bf16), MPI_Type_free(&d->f16);
        MPI_Comm_free(&d->comm);
    }
    int fin = 0;
    MPI_Finalized(&fin);
    if (d->finalize && !fin) MPI_Finalize();
    free(d);
}

ampc_status ampc_dist_set_timeout(ampc_dist *d, double timeout_s) {
    if (!d || !(timeout_s > 0))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_set_timeout: timeout %g s; expected > 0", timeout_s);
    d->timeout = timeout_s;
    return AMPC_OK;
}

int ampc_dist_rank(const ampc_dist *d) { return d ? d->rank : 0; }
int ampc_dist_world_size(const ampc_dist *d) { return d ? d->size : 1; }
int ampc_dist_local_size(const ampc_dist *d) { return d ? d->local_size : 1; }

/* Collectives move at most INT_MAX elements per call. */
#define MAX_COUNT (1 << 30)

ampc_status ampc_dist_broadcast(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, int root) {
    static const char fn[] = "ampc_dist_broadcast";
    if (!d || (!buf && n > 0) || n < 0 || root < 0 || root >= d->size || (unsigned)dt >= AMPC_DTYPE_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: bad arguments (n %lld, root %d)", fn, (long long)n, root);
    size_t es = ampc_dtype_size(dt);
    for (int64_t at = 0; at < n; at += MAX_COUNT) {
        int c = (int)(n - at < MAX_COUNT ? n - at : MAX_COUNT);
        MPI_Request r;
        int err = MPI_Ibcast((char *)buf + (size_t)at * es, c, ampci_dist_type(d, dt), root, d->comm, &r);
        ampc_status s = ampci_dist_complete(d, err, &r, fn);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

ampc_status ampc_dist_allreduce(ampc_dist *d, void *buf, int64_t n, ampc_dtype dt, ampc_dist_op op) {
    static const char fn[] = "ampc_dist_allreduce";
    if (!d || (!buf && n > 0) || n < 0 || (unsigned)op > AMPC_DIST_MIN)
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: bad arguments (n %lld, op %d)", fn, (long long)n, (int)op);
    bool half = dt == AMPC_DTYPE_BF16 || dt == AMPC_DTYPE_F16;
    if (!(dt == AMPC_DTYPE_F32 || dt == AMPC_DTYPE_F64 || dt == AMPC_DTYPE_I64 || half) ||
        (half && op != AMPC_DIST_SUM))
        return ampci_fail(AMPC_STATUS_DTYPE,
                          "%s: %s %s is not supported; expected F32, F64 or I64 (BF16, F16: sum only)", fn,
                          ampc_dtype_name(dt),
                          op == AMPC_DIST_SUM   ? "sum"
                          : op == AMPC_DIST_MAX ? "max"
                                                : "min");
    MPI_Op mop = op == AMPC_DIST_MAX ? MPI_MAX : op == AMPC_DIST_MIN ? MPI_MIN : ampci_dist_sum(d, dt);
    size_t es = ampc_dtype_size(dt);
    for (int64_t at = 0; at < n; at += MAX_COUNT) {
        int c = (int)(n - at < MAX_COUNT ? n - at : MAX_COUNT);
        MPI_Request r;
        int err = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + (size_t)at * es, c, ampci_dist_type(d, dt), mop, d->comm,
                                 &r);
        ampc_status s = ampci_dist_complete(d, err, &r, fn);
        if (s != AMPC_OK) return s;
    }
    return AMPC_OK;
}

ampc_status ampc_dist_barrier(ampc_dist *d) {
    if (!d) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dist_barrier: d is NULL");
    MPI_Request r;
    int err = MPI_Ibarrier(d->comm, &r);
    return ampci_dist_complete(d, err, &r, "ampc_dist_barrier");
}

ampc_status ampc_dist_agree(ampc_dist *d, ampc_status mine) {
    if (!d) return mine;
    int64_t v = mine == AMPC_OK ? d->size : d->rank; /* the lowest failing rank, or size */
    ampc_status s = ampc_dist_allreduce(d, &v, 1, AMPC_DTYPE_I64, AMPC_DIST_MIN);
    if (s != AMPC_OK) return s;
    if (v == d->size) return AMPC_OK;
    if (mine != AMPC_OK) return mine; /* its own message stands */
    return ampci_fail(AMPC_STATUS_DIST, "rank %lld failed (its message says why)", (long long)v);
}

void ampc_dist_abort(ampc_dist *d, int code) {
    fflush(stdout), fflush(stderr);
    MPI_Abort(d ? d->comm : MPI_COMM_WORLD, code);
}
