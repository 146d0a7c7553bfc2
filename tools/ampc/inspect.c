/* inspect.c: `ampc inspect FILE [--json]`: what a safetensors file holds. Any safetensors file gets its
 * metadata and tensor table; an ampc checkpoint is first checked like --resume checks it (format
 * version, payload checksum) and gets a summary of the run it continues: step, model, optimizer,
 * GradScaler, RNG, data cursor and the options it was started with. A file that fails a check gets one
 * error line naming the file and the field, and status 1. */
#include "cli.h"
#include "json.h"
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc inspect FILE [--json]\n\n"
               "Shows a safetensors file: its metadata and tensors (name, dtype, shape, bytes). For an ampc\n"
               "checkpoint it also checks the format version and payload checksum and summarises the run:\n"
               "step, model, optimizer, loss scaler, RNG, data position and the options of `ampc train`.\n\n");
}

static const char *meta(const ampc_safetensors *st, const char *key) {
    const char *v = ampc_safetensors_metadata(st, key);
    return v ? v : "?";
}

static bool is_state(const char *name) { return !strncmp(name, "optim.", 6) || !strncmp(name, "master.", 7); }

static void shape_text(const ampc_st_tensor *t, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && n < size; d++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

/* The options of train.args, one token per line, as one command line. */
static void args_line(const char *args, char *buf, size_t size) {
    size_t n = 0;
    for (const char *p = args; *p && n + 1 < size; p++) buf[n++] = *p == '\n' ? ' ' : *p;
    buf[n] = '\0';
}

static void summary_human(const ampc_safetensors *st) {
    char args[4096];
    ampc_model_config mc;
    printf("ampc checkpoint, format version %s, written by ampc %s, payload checksum ok (crc32 %s)\n",
           meta(st, "ampc.format_version"), meta(st, "ampc.version"), meta(st, "ampc.payload_crc32"));
    printf("step:       %s\n", meta(st, "ampc.step"));
    if (ampc_checkpoint_model_config(st, &mc) == AMPC_OK) {
        char d[256];
        run_describe_model(&mc, d, sizeof d);
        printf("model:      %s, parameters %s, seed %llu\n", d, ampc_dtype_name(mc.param_dtype),
               (unsigned long long)mc.seed);
    }
    if (ampc_safetensors_metadata(st, "ampc.optim.kind"))
        printf("optimizer:  %s, lr %s (base %s), %s steps\n", meta(st, "ampc.optim.kind"), meta(st, "ampc.optim.lr"),
               meta(st, "ampc.optim.base_lr"), meta(st, "ampc.optim.steps"));
    if (ampc_safetensors_metadata(st, "ampc.scaler.enabled"))
        printf("scaler:     %s, scale %s, growth tracker %s, hysteresis tracker %s, %s updates, %s skipped\n",
               !strcmp(meta(st, "ampc.scaler.enabled"), "true") ? "enabled" : "disabled", meta(st, "ampc.scaler.scale"),
               meta(st, "ampc.scaler.growth_tracker"), meta(st, "ampc.scaler.hysteresis_tracker"),
               meta(st, "ampc.scaler.steps"), meta(st, "ampc.scaler.skipped_steps"));
    if (ampc_safetensors_metadata(st, "ampc.rng.seed"))
        printf("rng:        seed %s, stream %s, counter %s\n", meta(st, "ampc.rng.seed"), meta(st, "ampc.rng.stream"),
               meta(st, "ampc.rng.counter"));
    if (ampc_safetensors_metadata(st, "ampc.data.epoch"))
        printf("data:       epoch %s, position %s of %s samples\n", meta(st, "ampc.data.epoch"),
               meta(st, "ampc.data.position"), meta(st, "ampc.data.samples"));
    if (ampc_safetensors_metadata(st, "train.data.size")) { /* token data: 2 bytes an id, headers left out */
        const char *spec = meta(st, "train.data");
        char tokens[64] = "";
        if (!strncmp(spec, "tokens:", 7))
            snprintf(tokens, sizeof tokens, " (%lld tokens)", strtoll(meta(st, "train.data.size"), NULL, 10) / 2);
        printf("trained on: %s, %s bytes%s, CRC-32 %s (checked by --resume)\n", spec, meta(st, "train.data.size"),
               tokens, meta(st, "train.data.crc32"));
    }
    if (ampc_safetensors_metadata(st, "train.checkpoint")) {
        const char *every = meta(st, "train.checkpoint_every");
        printf("saves:      %s (in the folder of the file resumed from), ", meta(st, "train.checkpoint"));
        if (strcmp(every, "0")) printf("every %s steps", every);
        else printf("at the end");
        printf(", keeping %s\n", meta(st, "train.keep"));
    }
    if (ampc_safetensors_metadata(st, "train.args")) {
        args_line(meta(st, "train.args"), args, sizeof args);
        printf("options:    %s\n", args);
    }
}

/* A model field (ampc.model.*) that only the other kind of model uses: a GPT's checkpoint holds the image
 * models' fields too, and theirs the GPT's (the configuration is written whole, most of it zero). */
static bool other_kinds_field(const char *kind, const char *key) {
    static const char *const gpt_fields[] = {"layers", "d_model", "heads", "context", "vocab", "dropout", NULL};
    static const char *const image_fields[] = {"classes", "hidden", "image_size", "in_channels", "in_features", NULL};
    if (!kind || strncmp(key, "ampc.model.", 11)) return false;
    const char *const *other = strcmp(kind, "gpt") ? gpt_fields : image_fields;
    for (int i = 0; other[i]; i++)
        if (!strcmp(key + 11, other[i])) return true;
    return false;
}

/* ampc.kernels, "slot=kernel;slot=kernel;...", one slot a line under the first. */
static void print_kernels(const char *v) {
    if (!*v) { /* none recorded (the ref level has no choices): the key alone */
        printf("  %-28s\n", "ampc.kernels");
        return;
    }
    bool first = true;
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ';');
        int len = (int)(e ? (size_t)(e - p) : strlen(p));
        if (first) printf("  %-28s %.*s\n", "ampc.kernels", len, p);
        else printf("%31s%.*s\n", "", len, p);
        first = false;
        p = e ? e + 1 : p + len;
    }
}

static void print_human(const ampc_safetensors *st, bool checkpoint) {
    size_t bytes;
    ampc_safetensors_data(st, &bytes);
    printf("file:       %s (%d tensors, %.2f MiB of data)\n", ampc_safetensors_name(st), ampc_safetensors_count(st),
           (double)bytes / (1 << 20));
    if (checkpoint) summary_human(st);
    int nm = ampc_safetensors_metadata_count(st), other = 0;
    const char *kind = ampc_safetensors_metadata(st, "ampc.model.kind");
    for (int i = 0; i < nm; i++) {
        const char *k, *v;
        ampc_safetensors_metadata_at(st, i, &k, &v);
        other += other_kinds_field(kind, k);
    }
    printf("\nmetadata (%d", nm - other);
    if (other) printf("; %d field%s that only other kinds of model use not shown", other, other == 1 ? "" : "s");
    printf("):\n");
    for (int i = 0; i < nm; i++) {
        const char *k, *v;
        char line[4096];
        ampc_safetensors_metadata_at(st, i, &k, &v);
        if (other_kinds_field(kind, k)) continue;
        if (!strcmp(k, "ampc.kernels")) { /* slot=kernel;...: one per line, not one line of 2,500 columns */
            print_kernels(v);
            continue;
        }
        args_line(v, line, sizeof line); /* train.args holds one token per line */
        printf("  %-28s %s\n", k, line);
    }
    printf("\n%-44s %-6s %-18s %s\n", "tensor", "dtype", "shape", "bytes");
    int64_t params = 0;
    for (int i = 0; i < ampc_safetensors_count(st); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(st, i);
        char sh[160];
        shape_text(t, sh, sizeof sh);
        printf("%-44s %-6s %-18s %llu\n", t->name, t->dtype_name, sh, (unsigned long long)(t->end - t->begin));
        if (!is_state(t->name)) params += t->numel;
    }
    printf("\n%lld model parameters (tensors other than optim.* and master.*)\n", (long long)params);
}

static void print_json(const ampc_safetensors *st, bool checkpoint) {
    json_writer w;
    json_init(&w, stdout, true);
    json_obj_begin(&w);
    json_kstr(&w, "file", ampc_safetensors_name(st));
    json_kbool(&w, "ampc_checkpoint", checkpoint);
    if (checkpoint) json_kstr(&w, "checksum", "ok");
    size_t bytes;
    ampc_safetensors_data(st, &bytes);
    json_kint(&w, "data_bytes", (int64_t)bytes);
    json_key(&w, "metadata");
    json_obj_begin(&w);
    for (int i = 0; i < ampc_safetensors_metadata_count(st); i++) {
        const char *k, *v;
        ampc_safetensors_metadata_at(st, i, &k, &v);
        json_kstr(&w, k, v);
    }
    json_obj_end(&w);
    json_key(&w, "tensors");
    json_arr_begin(&w);
    for (int i = 0; i < ampc_safetensors_count(st); i++) {
        const ampc_st_tensor *t = ampc_safetensors_tensor(st, i);
        json_obj_begin(&w);
        json_kstr(&w, "name", t->name);
        json_kstr(&w, "dtype", t->dtype_name);
        json_key(&w, "shape");
        json_arr_begin(&w);
        for (int d = 0; d < t->ndim; d++) json_int(&w, t->shape[d]);
        json_arr_end(&w);
        json_key(&w, "data_offsets");
        json_arr_begin(&w);
        json_uint(&w, t->begin), json_uint(&w, t->end);
        json_arr_end(&w);
        json_obj_end(&w);
    }
    json_arr_end(&w);
    json_obj_end(&w);
    json_finish(&w);
}

int cmd_inspect(int argc, char **argv) {
    const char *prog = "ampc inspect";
    bool json = false;
    char *pos[1];
    cli_opt opts[] = {CLI_OPT(.name = "json", .kind = CLI_FLAG, .out = &json, .help = "machine-readable output")};
    cli_parse_out po = {.pos = pos};
    int rc = cli_parse_or_exit(prog, usage, opts, 1, argc, argv, 1, "the file", &po);
    if (rc >= 0) return rc;
    if (po.npos != 1) {
        fprintf(stderr, "%s: expected one FILE (a .safetensors file or ampc checkpoint)\n", prog);
        return CLI_EXIT_USAGE;
    }
    ampc_safetensors *st;
    if (ampc_safetensors_read(pos[0], &st) != AMPC_OK) return cli_fail_lib(prog, ampc_last_status());
    bool checkpoint = ampc_safetensors_metadata(st, "ampc.format") != NULL;
    if (checkpoint) { /* the checks --resume makes: version and checksum */
        ampc_safetensors_free(st);
        if (ampc_checkpoint_open(pos[0], &st) != AMPC_OK) return cli_fail_lib(prog, ampc_last_status());
    }
    if (json) print_json(st, checkpoint);
    else print_human(st, checkpoint);
    ampc_safetensors_free(st);
    return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
