/* error.c: status names and the thread-local "last error" every failing call fills in. Messages are
 * formatted once, at the failure, so the caller can print them after unwinding a whole call chain. */
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char tl_message[1024];
static _Thread_local ampc_status tl_status = AMPC_OK;

const char *ampc_version(void) {
    return AMPCI_STR(AMPC_VERSION_MAJOR) "." AMPCI_STR(AMPC_VERSION_MINOR) "." AMPCI_STR(AMPC_VERSION_PATCH);
}

const char *ampc_status_str(ampc_status s) {
    switch (s) {
    case AMPC_OK: return "AMPC_OK";
    case AMPC_STATUS_INVALID_ARG: return "AMPC_STATUS_INVALID_ARG";
    case AMPC_STATUS_SHAPE: return "AMPC_STATUS_SHAPE";
    case AMPC_STATUS_DTYPE: return "AMPC_STATUS_DTYPE";
    case AMPC_STATUS_OOM: return "AMPC_STATUS_OOM";
    case AMPC_STATUS_IO: return "AMPC_STATUS_IO";
    case AMPC_STATUS_FORMAT: return "AMPC_STATUS_FORMAT";
    case AMPC_STATUS_UNSUPPORTED: return "AMPC_STATUS_UNSUPPORTED";
    case AMPC_STATUS_STATE: return "AMPC_STATUS_STATE";
    case AMPC_STATUS_DIST: return "AMPC_STATUS_DIST";
    }
    return "AMPC_STATUS_UNKNOWN";
}

const char *ampc_last_error(void) { return tl_message; }
ampc_status ampc_last_status(void) { return tl_status; }

void ampc_clear_error(void) {
    tl_message[0] = '\0';
    tl_status = AMPC_OK;
}

ampc_status ampci_vfail(ampc_status s, const char *fmt, va_list ap) {
    /* Format into a scratch buffer first: fmt's arguments may point into tl_message itself. */
    char buf[sizeof tl_message];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* one line whatever user text it quotes (a newline in a file name or glob must not split it) */
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    memcpy(tl_message, buf, sizeof buf);
    tl_status = s;
    return s;
}

ampc_status ampci_fail(ampc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampci_vfail(s, fmt, ap);
    va_end(ap);
    return s;
}

void *ampci_fail_null(ampc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ampci_vfail(s, fmt, ap);
    va_end(ap);
    return NULL;
}

void *ampci_null_input(const char *fn, const char *what) {
    if (tl_status == AMPC_OK) ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: %s is NULL", fn, what);
    return NULL;
}

ampc_status ampci_check_params_init(const char *fn, uint32_t init, const char *maker) {
    if (init == AMPC_PARAMS_INIT) return AMPC_OK;
    return ampci_fail(AMPC_STATUS_INVALID_ARG,
                      "%s: params were not made by %s() (init is 0x%x): a struct written field by field reads "
                      "enabled = false; start from %s(), or pass NULL",
                      fn, maker, (unsigned)init, maker);
}

void ampci_assert_fail(const char *what, const char *file, int line) {
    fprintf(stderr, "ampc: internal error (a library bug): %s failed at %s:%d\n", what, file, line);
    abort();
}
