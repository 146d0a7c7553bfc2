/* text.c: character language-modelling data sets. A text file (gzip or plain) or the built-in corpus is
 * held as bytes, the tokens themselves (vocabulary 256, no tokenizer to version), and cut once into a
 * training part and the validation tail, so the validation text never overlaps what the model trains on.
 * The tail rule (ampci_split_tail) is shared with token files that come without a validation file, so a
 * text and its tokens split the same way. */
#include "data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ampc_status ampci_split_tail(const char *fn, const char *what, const char *unit, size_t n, double frac,
                             size_t *split_at) {
    /* One IEEE double multiply and add (no contraction in this build), so the split is the same on every
     * machine. */
    size_t val = (size_t)floor((double)n * frac + 0.5);
    if (val == 0 || val >= n)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s is too short: %zu %s with val_fraction %g leave %zu "
                          "training and %zu validation %s; both splits need at least 1",
                          fn, what, n, unit, frac, n - (val < n ? val : n), val, unit);
    *split_at = n - val;
    return AMPC_OK;
}

/* "text: a.txt (1000 bytes, the last 100 for validation), vocab 256" */
static ampc_status make_summary(const char *fn, const char *what, ampc_dataset *ds) {
    char buf[4400];
    snprintf(buf, sizeof buf, "%s%s (%zu bytes, the last %zu for validation), vocab %d%s",
             ds->kind == AMPC_DATA_TEXT ? "text: " : "", what, ds->len, ds->len - ds->split_at, ds->vocab,
             ds->vocab > 256 ? " (given; the bytes use 256)" : "");
    ds->summary = malloc(strlen(buf) + 1);
    if (!ds->summary) return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    memcpy(ds->summary, buf, strlen(buf) + 1);
    return AMPC_OK;
}

ampc_status ampci_text_open(const char *fn, const char *path, double val_fraction, int vocab, ampc_dataset *ds) {
    ds->kind = path ? AMPC_DATA_TEXT : AMPC_DATA_BUILTIN;
    ds->task = AMPC_TASK_CHAR_LM;
    const char *what = path ? path : "the built-in corpus";
    /* every byte value is an id the model must be able to predict, whether this text holds it or not */
    if (vocab && vocab < 256)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: vocab %d is too small for %s: byte-level data has 256 ids (one per byte value); "
                          "expected a vocab of at least 256, or 0 for 256",
                          fn, vocab, what);
    ampc_status s = path ? ampci_read_file(fn, path, AMPC_DATA_MAX_BYTES, &ds->text, &ds->len)
                         : ampci_builtin_text(fn, &ds->text, &ds->len);
    if (s != AMPC_OK) return s;
    if (ds->len == 0)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is empty; a text data set needs at least 2 bytes", fn, what);
    s = ampci_split_tail(fn, what, "bytes", ds->len, val_fraction, &ds->split_at);
    if (s != AMPC_OK) return s;
    ds->id_bytes = 1;
    ds->ids[AMPC_SPLIT_TRAIN] = ds->text, ds->n_ids[AMPC_SPLIT_TRAIN] = ds->split_at;
    ds->ids[AMPC_SPLIT_EVAL] = ds->text + ds->split_at, ds->n_ids[AMPC_SPLIT_EVAL] = ds->len - ds->split_at;
    ds->vocab = vocab ? vocab : 256;
    ds->max_id = 0;
    for (size_t i = 0; i < ds->len; i++)
        if (ds->text[i] > ds->max_id) ds->max_id = ds->text[i];
    return make_summary(fn, path ? path : "builtin (integer arithmetic)", ds);
}

const uint8_t *ampc_dataset_text(const ampc_dataset *ds, ampc_split split, size_t *len) {
    if (len) *len = 0;
    if (!ds || ds->task != AMPC_TASK_CHAR_LM || ds->id_bytes != 1 || (unsigned)split >= AMPC_SPLIT_COUNT) return NULL;
    if (len) *len = ds->n_ids[split];
    return ds->ids[split];
}

const void *ampc_dataset_ids(const ampc_dataset *ds, ampc_split split, size_t *count, int *id_bytes) {
    if (count) *count = 0;
    if (id_bytes) *id_bytes = 0;
    if (!ds || ds->task != AMPC_TASK_CHAR_LM || (unsigned)split >= AMPC_SPLIT_COUNT) return NULL;
    if (count) *count = ds->n_ids[split];
    if (id_bytes) *id_bytes = ds->id_bytes;
    return ds->ids[split];
}
