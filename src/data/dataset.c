/* dataset.c: the public face of data sets: opening one of the four kinds with parameter checks, the
 * info accessor, names, and the CLI's "--data" spec parser (kept here so every front end spells the
 * kinds the same way). */
#include "data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const CLASS_NAMES[AMPCI_IMAGE_CLASSES] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

const char *ampc_data_kind_name(ampc_data_kind kind) {
    switch (kind) {
    case AMPC_DATA_BUILTIN: return "builtin";
    case AMPC_DATA_FASHION_MNIST: return "fashion-mnist";
    case AMPC_DATA_TEXT: return "text";
    case AMPC_DATA_TOKENS: return "tokens";
    default: return "?";
    }
}

const char *ampc_split_name(ampc_split split) {
    return split == AMPC_SPLIT_TRAIN ? "train" : split == AMPC_SPLIT_EVAL ? "eval" : "?";
}

static char *make_name(const ampc_dataset_params *p) {
    const char *base = p->kind == AMPC_DATA_BUILTIN  ? "builtin (integer arithmetic)"
                       : p->kind == AMPC_DATA_TEXT   ? "text:"
                       : p->kind == AMPC_DATA_TOKENS ? "tokens:"
                                                     : "fashion-mnist";
    const char *tail = p->kind == AMPC_DATA_TEXT || p->kind == AMPC_DATA_TOKENS ? p->path : "";
    size_t n = strlen(base) + strlen(tail) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s", base, tail);
    return s;
}

static ampc_status check_params(const char *fn, const ampc_dataset_params *p) {
    if ((unsigned)p->kind >= AMPC_DATA_KIND_COUNT)
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: kind %d is not an ampc_data_kind (builtin, fashion-mnist, "
                          "text, tokens)",
                          fn, (int)p->kind);
    if ((p->kind == AMPC_DATA_TEXT || p->kind == AMPC_DATA_TOKENS) && (!p->path || !p->path[0]))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: a %s data set needs a file (path is %s)", fn,
                          ampc_data_kind_name(p->kind), p->path ? "empty" : "NULL");
    if (p->vocab < 0 || (p->vocab && p->kind == AMPC_DATA_FASHION_MNIST))
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: vocab %d given for %s; expected 0, or a positive vocabulary for text and token data", fn,
                          p->vocab, ampc_data_kind_name(p->kind));
    if (p->kind != AMPC_DATA_FASHION_MNIST && !(p->val_fraction > 0 && p->val_fraction < 1))
        return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: val_fraction %g is outside (0, 1)", fn, p->val_fraction);
    return AMPC_OK;
}

ampc_status ampc_dataset_open(const ampc_dataset_params *params, ampc_dataset **out) {
    static const char fn[] = "ampc_dataset_open";
    if (!out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: out must not be NULL", fn);
    *out = NULL;
    ampc_dataset_params p = params ? *params : (ampc_dataset_params){0};
    if (p.val_fraction == 0) p.val_fraction = 0.1;
    ampc_status s = check_params(fn, &p);
    if (s != AMPC_OK) return s;
    ampc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds || !(ds->name = make_name(&p))) {
        free(ds);
        return ampci_fail(AMPC_STATUS_OOM, "%s: out of memory", fn);
    }
    if (p.kind == AMPC_DATA_FASHION_MNIST) s = ampci_fashion_open(fn, p.path, ds);
    else if (p.kind == AMPC_DATA_TOKENS) s = ampci_tokens_open(fn, p.path, p.val_fraction, p.vocab, ds);
    else s = ampci_text_open(fn, p.kind == AMPC_DATA_TEXT ? p.path : NULL, p.val_fraction, p.vocab, ds);
    if (s != AMPC_OK) {
        ampc_dataset_free(ds);
        return s;
    }
    *out = ds;
    return AMPC_OK;
}

void ampc_dataset_free(ampc_dataset *ds) {
    if (!ds) return;
    for (int s = 0; s < AMPC_SPLIT_COUNT; s++) free(ds->img_buf[s]), free(ds->lbl_buf[s]);
    free(ds->text);
    ampci_tokens_close(ds);
    free(ds->summary);
    free(ds->name);
    free(ds);
}

ampc_status ampc_dataset_get_info(const ampc_dataset *ds, ampc_dataset_info *out) {
    if (!ds || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "ampc_dataset_get_info: ds and out must not be NULL");
    memset(out, 0, sizeof *out);
    out->kind = ds->kind, out->task = ds->task, out->name = ds->name;
    if (ds->task == AMPC_TASK_IMAGE_CLASSIFICATION) {
        out->num_classes = AMPCI_IMAGE_CLASSES;
        out->input_ndim = 3;
        out->input_shape[0] = 1, out->input_shape[1] = out->input_shape[2] = AMPCI_IMAGE_SIDE;
        for (int s = 0; s < AMPC_SPLIT_COUNT; s++) out->split_size[s] = ds->count[s];
        out->max_id = -1;
        out->summary = ds->name;
    } else {
        out->num_classes = ds->vocab;
        out->input_ndim = 1; /* input_shape[0] = 0: T, chosen by the loader */
        for (int s = 0; s < AMPC_SPLIT_COUNT; s++) out->split_size[s] = (int64_t)ds->n_ids[s];
        out->max_id = ds->max_id;
        out->summary = ds->summary;
    }
    return AMPC_OK;
}

const char *ampc_dataset_class_name(const ampc_dataset *ds, int64_t cls) {
    if (!ds || ds->kind != AMPC_DATA_FASHION_MNIST || cls < 0 || cls >= AMPCI_IMAGE_CLASSES) return NULL;
    return CLASS_NAMES[cls];
}

/* "TRAIN" or "TRAIN,VAL", both non-empty */
static bool token_files_ok(const char *files) {
    const char *comma = strchr(files, ',');
    return files[0] && files[0] != ',' && (!comma || (comma[1] && !strchr(comma + 1, ',')));
}

ampc_status ampc_dataset_parse(const char *spec, ampc_dataset_params *out) {
    static const char fn[] = "ampc_dataset_parse";
    if (!spec || !out) return ampci_fail(AMPC_STATUS_INVALID_ARG, "%s: spec and out must not be NULL", fn);
    static const char fm[] = "fashion-mnist", tx[] = "text:", tk[] = "tokens:";
    if (strcmp(spec, "builtin") == 0) {
        out->kind = AMPC_DATA_BUILTIN, out->path = NULL;
    } else if (strcmp(spec, fm) == 0) {
        out->kind = AMPC_DATA_FASHION_MNIST, out->path = NULL;
    } else if (strncmp(spec, fm, sizeof fm - 1) == 0 && spec[sizeof fm - 1] == ':' && spec[sizeof fm]) {
        out->kind = AMPC_DATA_FASHION_MNIST, out->path = spec + sizeof fm;
    } else if (strncmp(spec, tx, sizeof tx - 1) == 0 && spec[sizeof tx - 1]) {
        out->kind = AMPC_DATA_TEXT, out->path = spec + sizeof tx - 1;
    } else if (strncmp(spec, tk, sizeof tk - 1) == 0 && token_files_ok(spec + sizeof tk - 1)) {
        out->kind = AMPC_DATA_TOKENS, out->path = spec + sizeof tk - 1;
    } else {
        return ampci_fail(AMPC_STATUS_INVALID_ARG,
                          "%s: unknown data set '%s'; expected builtin, fashion-mnist, "
                          "fashion-mnist:DIR, text:FILE or tokens:TRAIN[,VAL]",
                          fn, spec);
    }
    return AMPC_OK;
}
