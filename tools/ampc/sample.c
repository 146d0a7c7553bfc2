/* sample.c: `ampc sample`: text from a trained GPT checkpoint. The model is rebuilt from the configuration
 * the checkpoint records and its parameters loaded (as --resume does, without the optimizer); the prompt
 * becomes token ids (a byte-level model's bytes, or ids given as such: llm.c's tokenizer file decodes but
 * cannot encode, it has no BPE merges); then one token at a time the model reads the last `context` ids
 * (a sliding window), the last position's logits come to the host through ampc_tensor_copy_to, and the
 * next id is drawn there from softmax(logits / T) over the K most likely ids (T = 0: the most likely) with
 * the counter-based RNG, so a seed gives the same text on every run, device and thread count. Everything
 * the user gave is checked before the first token: a mistake is one line and no text. */
#include "cli.h"
#include "decode.h"
#include "run.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLE_STREAM 0x73616d70u /* "samp": the RNG stream of the draws (counter = the token's index) */

typedef struct id_list {
    int64_t *ids;
    int64_t n;
} id_list;

typedef struct sample_cli {
    const char *checkpoint, *prompt, *tokenizer;
    id_list prompt_ids;
    int64_t tokens, top_k, seed, threads;
    double temperature;
    ampc_device device;
} sample_cli;

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc sample --checkpoint FILE [--prompt TEXT | --prompt-ids 1,2,3] [--tokens N]\n"
               "                   [--temperature T] [--top-k K] [--seed S] [--tokenizer FILE] [--device DEV]\n\n"
               "Continues a prompt with a GPT trained by `ampc train --checkpoint FILE`: the model configuration\n"
               "and parameters come from the checkpoint. Each new token is drawn from softmax(logits / T) over the\n"
               "K most likely tokens (K = 0: all of them; T = 0: always the most likely) with ampc's counter-based\n"
               "RNG from --seed, so the same seed prints the same text. The model reads the last `context` tokens\n"
               "(a sliding window) and runs in FP32; a model kept in BF16 or FP16 (--param-dtype) runs under\n"
               "autocast in that dtype. Only the continuation is printed, with a line feed at the end.\n\n"
               "A byte-level model (vocabulary 256) takes the prompt as text and prints bytes as text, escaping\n"
               "control bytes and broken UTF-8 as \\xNN (and a backslash as \\\\). Another model takes token ids\n"
               "(--prompt-ids) and prints ids separated by spaces, or text with --tokenizer, llm.c's tokenizer\n"
               "file (gpt2_tokenizer.bin: it decodes, but has no BPE merges to encode text). Without a prompt a\n"
               "byte-level model starts from a line feed, a token model from the end-of-text token of a version-2\n"
               "tokenizer file. A prompt longer than the context keeps its last `context` tokens (a note says so).\n\n"
               "Examples:\n"
               "  ampc train --layers 2 --d-model 64 --heads 4 --context 64 --steps 300 --checkpoint run.st\n"
               "  ampc sample --checkpoint run.st --prompt '12+34=' --tokens 40 --temperature 0.8 --top-k 20\n"
               "  ampc sample --checkpoint gpt2.st --prompt-ids 50256,464 --tokenizer gpt2_tokenizer.bin\n\n");
}

/* --prompt-ids 15496,11,995: non-negative ids (checked against the vocabulary once the model is known). */
static bool parse_ids(const char *v, void *out, char *why, size_t why_size) {
    id_list *l = out;
    size_t cap = 1 + strlen(v) / 2;
    free(l->ids);
    l->ids = malloc(cap * sizeof *l->ids), l->n = 0;
    for (const char *p = v; l->ids && *p;) {
        char *end = (char *)p;
        long long x = *p >= '0' && *p <= '9' ? strtoll(p, &end, 10) : -1;
        if (x < 0 || x >= INT32_MAX || (*end && *end != ',') || (*end == ',' && !end[1])) break;
        l->ids[l->n++] = x;
        p = *end ? end + 1 : end;
        if (!*p) return true;
    }
    snprintf(why, why_size, "comma-separated token ids (integers from 0)");
    return false;
}

/* `ampc sample: <message>` on stderr; the usage status. */
__attribute__((format(printf, 1, 2))) static int usage_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ampc sample: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

/* The index of the largest logit (the first among equal ones; NaN never wins). */
static int64_t argmax(const float *l, int64_t V) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (l[i] > l[best] || l[best] != l[best]) best = i;
    return best;
}

typedef struct ranked {
    float v;
    int32_t i;
} ranked;

static int by_logit(const void *a, const void *b) { /* descending, then by id: a total order */
    const ranked *x = a, *y = b;
    return x->v > y->v ? -1 : x->v < y->v ? 1 : (x->i > y->i) - (x->i < y->i);
}

/* Token `index` of the continuation: softmax(l / T) over the top K (all when K is 0 or >= V), drawn with
 * u = 53 random bits of the RNG block (seed, SAMPLE_STREAM, index). r holds V entries of scratch. */
static int64_t pick(const float *l, int64_t V, double T, int64_t K, uint64_t seed, int64_t index, ranked *r) {
    int64_t best = argmax(l, V);
    if (T == 0) return best;
    int64_t n = K > 0 && K < V ? K : V;
    for (int64_t i = 0; i < V; i++) r[i] = (ranked){l[i] == l[i] ? l[i] : -INFINITY, (int32_t)i};
    if (n < V) qsort(r, (size_t)V, sizeof *r, by_logit);
    double sum = 0, top = l[best];
    for (int64_t i = 0; i < n; i++) sum += exp(((double)r[i].v - top) / T);
    uint32_t w[4];
    ampc_rng_block(seed, SAMPLE_STREAM, (uint64_t)index, w);
    double u = ((double)(w[0] >> 5) * 67108864.0 + (double)(w[1] >> 6)) / 9007199254740992.0, acc = 0;
    for (int64_t i = 0; i < n; i++)
        if ((acc += exp(((double)r[i].v - top) / T)) > u * sum) return r[i].i;
    return r[n - 1].i; /* rounding left u * sum above the last partial sum */
}

/* One generated token on stdout: text through the escaping writer, or its id. */
static void emit(const decode_tokenizer *tk, decode_text *w, int64_t id, int64_t V, bool first) {
    if (tk->vocab) { /* an id past the file's vocabulary (GPT-2's padding rows) shows as <|id|> */
        char unknown[32];
        int len = snprintf(unknown, sizeof unknown, "<|%lld|>", (long long)id);
        if ((uint64_t)id < tk->vocab) decode_text_put(w, tk->bytes + tk->off[id], tk->off[id + 1] - tk->off[id]);
        else decode_text_put(w, (const unsigned char *)unknown, (size_t)len);
    } else if (V == 256) {
        unsigned char b = (unsigned char)id;
        decode_text_put(w, &b, 1);
    } else {
        printf("%s%lld", first ? "" : " ", (long long)id);
    }
    fflush(stdout);
}

/* The prompt as ids, checked against the model: -1 to go on, else the exit status (after one line). */
static int encode(const sample_cli *c, const decode_tokenizer *tk, int64_t V, id_list *out) {
    if (c->prompt && V != 256)
        return usage_fail("--prompt takes text for a byte-level model (vocabulary 256); this model's vocabulary is "
                          "%lld: give the prompt as token ids with --prompt-ids 1,2,3 (llm.c's tokenizer file has no "
                          "BPE merges to encode text)",
                          (long long)V);
    if (c->prompt) {
        size_t n = strlen(c->prompt);
        out->ids = malloc(n * sizeof *out->ids), out->n = (int64_t)n;
        for (size_t i = 0; out->ids && i < n; i++) out->ids[i] = (unsigned char)c->prompt[i];
    } else if (c->prompt_ids.ids) {
        for (int64_t i = 0; i < c->prompt_ids.n; i++)
            if (c->prompt_ids.ids[i] >= V)
                return usage_fail("--prompt-ids: id %lld is not below the model's vocabulary; accepted: ids 0..%lld",
                                  (long long)c->prompt_ids.ids[i], (long long)V - 1);
        out->ids = malloc((size_t)c->prompt_ids.n * sizeof *out->ids), out->n = c->prompt_ids.n;
        if (out->ids) memcpy(out->ids, c->prompt_ids.ids, (size_t)out->n * sizeof *out->ids);
    } else if (V == 256 || (tk->has_eot && tk->eot < V)) {
        out->ids = malloc(sizeof *out->ids), out->n = 1;
        if (out->ids) out->ids[0] = V == 256 ? '\n' : tk->eot;
    } else {
        return usage_fail("a model with a vocabulary of %lld needs a first token: give --prompt-ids (or a version-2 "
                          "--tokenizer file, whose end-of-text token starts the text)",
                          (long long)V);
    }
    if (!out->ids) return fprintf(stderr, "ampc sample: out of memory\n"), CLI_EXIT_FAIL;
    return -1;
}

typedef struct model_run {
    ampc_ctx *ctx;
    ampc_model *model;
    ampc_model_config mc;
} model_run;

/* The checkpoint's GPT with its parameters: -1 to go on, else the exit status after one line. */
static int load(const sample_cli *c, const ampc_safetensors *ck, model_run *m) {
    if (ampc_ctx_new(&(ampc_ctx_params){.seed = (uint64_t)c->seed, .threads = (int)c->threads, .device = c->device},
                     &m->ctx) != AMPC_OK ||
        ampc_model_new(m->ctx, &m->mc, &m->model) != AMPC_OK ||
        ampc_checkpoint_restore(ck, &(ampc_checkpoint_state){.model = m->model}) != AMPC_OK)
        return cli_fail_lib("ampc sample", ampc_last_status());
    ampc_model_set_training(m->model, false); /* no dropout */
    return -1;
}

/* The logits of the next token after ids[0..n) (the last `context` of them), on the host in row. */
static bool next_logits(model_run *m, const int64_t *ids, int64_t n, float *row) {
    int64_t T = n < m->mc.context ? n : m->mc.context;
    ampc_tensor *in = ampc_tensor_from_buffer(m->ctx, AMPC_DTYPE_I64, 2, (int64_t[]){1, T}, ids + n - T,
                                              AMPC_DTYPE_I64);
    bool low = m->mc.param_dtype != AMPC_DTYPE_F32; /* 16-bit parameters: autocast in their dtype */
    bool ac = low && ampc_autocast_begin(m->ctx, &(ampc_autocast_params){.init = AMPC_PARAMS_INIT,
                                                                         .dtype = m->mc.param_dtype,
                                                                         .enabled = true}) == AMPC_OK;
    ampc_tensor *logits = (!low || ac) ? ampc_model_forward(m->model, in) : NULL;
    if (ac) ampc_autocast_end(m->ctx);
    ampc_tensor *last = ampc_tensor_slice(logits, 1, T - 1, T, 1); /* (1, 1, V): the last position */
    bool ok = last && ampc_tensor_copy_to(last, row, AMPC_DTYPE_F32) == AMPC_OK;
    ampc_ctx_step_end(m->ctx);
    return ok;
}

static int generate(const sample_cli *c, model_run *m, const decode_tokenizer *tk, const id_list *prompt) {
    int64_t C = m->mc.context, V = m->mc.vocab, keep = prompt->n < C ? prompt->n : C;
    if (keep < prompt->n)
        fprintf(stderr,
                "ampc sample: note: the prompt is %lld tokens, longer than the model's context of %lld; it "
                "keeps its last %lld\n",
                (long long)prompt->n, (long long)C, (long long)C);
    int64_t *ids = malloc((size_t)(keep + c->tokens) * sizeof *ids), n = keep;
    float *row = malloc((size_t)V * sizeof *row);
    ranked *scratch = malloc((size_t)V * sizeof *scratch);
    int rc = ids && row && scratch ? 0 : (fprintf(stderr, "ampc sample: out of memory\n"), CLI_EXIT_FAIL);
    if (!rc) memcpy(ids, prompt->ids + prompt->n - keep, (size_t)keep * sizeof *ids);
    decode_text w;
    decode_text_init(&w, stdout);
    ampc_no_grad_begin(m->ctx);
    for (int64_t i = 0; !rc && i < c->tokens; i++) {
        if (!next_logits(m, ids, n, row)) {
            fflush(stdout);
            rc = cli_fail_lib("ampc sample", ampc_last_status());
            break;
        }
        ids[n] = pick(row, V, c->temperature, c->top_k, (uint64_t)c->seed, i, scratch);
        emit(tk, &w, ids[n++], V, i == 0);
    }
    ampc_no_grad_end(m->ctx);
    if (tk->vocab || V == 256) decode_text_end(&w);
    else if (n > keep) putchar('\n');
    free(ids), free(row), free(scratch);
    return rc;
}

/* The checks and loads in the order of their cost: -1 to go on with *ck open and tk read. */
static int prepare(const sample_cli *c, ampc_safetensors **ck, decode_tokenizer *tk, ampc_model_config *mc) {
    char why[256];
    if (!c->checkpoint) return usage_fail("--checkpoint FILE is required (a checkpoint of `ampc train`)");
    if (c->prompt && c->prompt_ids.ids) return usage_fail("--prompt and --prompt-ids both given; give one");
    if (c->tokenizer && !decode_tokenizer_read(c->tokenizer, tk, why, sizeof why)) {
        fprintf(stderr, "ampc sample: --tokenizer %s: %s\n", c->tokenizer, why);
        return CLI_EXIT_FAIL;
    }
    if (ampc_checkpoint_open(c->checkpoint, ck) != AMPC_OK || ampc_checkpoint_model_config(*ck, mc) != AMPC_OK)
        return cli_fail_lib("ampc sample", ampc_last_status());
    if (mc->kind == AMPC_MODEL_GPT) return -1;
    fprintf(stderr, "ampc sample: %s holds a %s model; ampc sample continues text with a GPT (--model gpt)\n",
            c->checkpoint, ampc_model_kind_name(mc->kind));
    return CLI_EXIT_FAIL;
}

int cmd_sample(int argc, char **argv) {
    sample_cli c = {.tokens = 256, .temperature = 1.0, .seed = 1337};
    const cli_opt opts[] = {
        CLI_OPT(.name = "checkpoint", .kind = CLI_STRING, .out = &c.checkpoint, .metavar = "FILE",
                .help = "a checkpoint of `ampc train` (a GPT's)"),
        CLI_OPT(.name = "prompt", .kind = CLI_STRING, .out = &c.prompt, .metavar = "TEXT",
                .help = "the text to continue (byte-level models)"),
        CLI_OPT(.name = "prompt-ids", .kind = CLI_CUSTOM, .out = &c.prompt_ids, .parse = parse_ids, .metavar = "IDS",
                .accepts = "comma-separated token ids", .help = "the prompt as token ids (1,2,3)"),
        CLI_OPT(.name = "tokens", .kind = CLI_INT, .out = &c.tokens, .imin = 1, .imax = 1 << 24, .metavar = "N",
                .defval = "256", .help = "tokens to generate"),
        CLI_OPT(.name = "temperature", .kind = CLI_DOUBLE, .out = &c.temperature, .dmin = 0, .dmax = 1e6,
                .metavar = "T", .defval = "1", .help = "softmax temperature; 0 = always the most likely token"),
        CLI_OPT(.name = "top-k", .kind = CLI_INT, .out = &c.top_k, .imin = 0, .imax = INT32_MAX, .metavar = "K",
                .defval = "0", .help = "draw among the K most likely tokens; 0 = all"),
        CLI_OPT(.name = "seed", .kind = CLI_INT, .out = &c.seed, .imin = 0, .imax = INT64_MAX, .defval = "1337",
                .help = "seed of the draws"),
        CLI_OPT(.name = "tokenizer", .kind = CLI_STRING, .out = &c.tokenizer, .metavar = "FILE",
                .help = "llm.c's tokenizer file: print token models' output as text"),
        CLI_OPT(.name = "device", .kind = CLI_CUSTOM, .out = &c.device, .parse = run_parse_device, .metavar = "DEV",
                .accepts = "cpu, cuda, cuda:N or guard", .defval = "cpu", .help = "where the model runs"),
        CLI_OPT(.name = "threads", .kind = CLI_INT, .out = &c.threads, .imin = 0, .imax = 1024, .defval = "0",
                .help = "worker threads; 0 = all online CPUs"),
    };
    cli_parse_out po = {0};
    int rc = cli_parse_or_exit("ampc sample", usage, opts, sizeof opts / sizeof opts[0], argc, argv, 0, NULL, &po);
    ampc_safetensors *ck = NULL;
    decode_tokenizer tk = {0};
    model_run m = {0};
    id_list prompt = {0};
    if (rc < 0) rc = prepare(&c, &ck, &tk, &m.mc);
    if (rc < 0) rc = encode(&c, &tk, m.mc.vocab, &prompt);
    if (rc < 0) rc = load(&c, ck, &m);
    if (rc < 0) rc = generate(&c, &m, &tk, &prompt);
    ampc_model_free(m.model);
    ampc_ctx_free(m.ctx);
    ampc_safetensors_free(ck);
    decode_tokenizer_free(&tk);
    free(prompt.ids), free(c.prompt_ids.ids);
    return rc;
}
