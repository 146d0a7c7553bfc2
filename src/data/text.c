/* text.c: character language-modelling data sets. A text file (gzip or plain) or the built-in corpus is
 * held as bytes, the tokens themselves (vocabulary 256, no tokenizer to version), and cut once into a
 * training part and the validation tail, so the validation text never overlaps what the model trains on. */
#include "data.h"

#include <math.h>
#include <stdlib.h>

/* Validation bytes: round(len * frac), halves up. One IEEE double multiply and add (no contraction in
 * this build), so the split is the same on every machine. */
static size_t val_bytes(size_t len, double frac) { return (size_t)floor((double)len * frac + 0.5); }

ampc_status ampci_text_open(const char *fn, const char *path, double val_fraction, ampc_dataset *ds) {
    ds->kind = path ? AMPC_DATA_TEXT : AMPC_DATA_BUILTIN;
    ds->task = AMPC_TASK_CHAR_LM;
    const char *what = path ? path : "the built-in corpus";
    ampc_status s = path ? ampci_read_file(fn, path, AMPC_DATA_MAX_BYTES, &ds->text, &ds->len)
                         : ampci_builtin_text(fn, &ds->text, &ds->len);
    if (s != AMPC_OK) return s;
    if (ds->len == 0)
        return ampci_fail(AMPC_STATUS_FORMAT, "%s: %s is empty; a text data set needs at least 2 bytes", fn, what);
    size_t val = val_bytes(ds->len, val_fraction);
    if (val == 0 || val >= ds->len)
        return ampci_fail(AMPC_STATUS_FORMAT,
                          "%s: %s is too short: %zu bytes with val_fraction %g leave %zu "
                          "training and %zu validation bytes; both splits need at least 1",
                          fn, what, ds->len, val_fraction, ds->len - (val < ds->len ? val : ds->len), val);
    ds->split_at = ds->len - val;
    return AMPC_OK;
}

const uint8_t *ampc_dataset_text(const ampc_dataset *ds, ampc_split split, size_t *len) {
    if (len) *len = 0;
    if (!ds || ds->task != AMPC_TASK_CHAR_LM || (unsigned)split >= AMPC_SPLIT_COUNT) return NULL;
    if (len) *len = split == AMPC_SPLIT_TRAIN ? ds->split_at : ds->len - ds->split_at;
    return split == AMPC_SPLIT_TRAIN ? ds->text : ds->text + ds->split_at;
}
