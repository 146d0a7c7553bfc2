/* train.c: `ampc train`: one run of one model in one precision, with the JSONL log of design.md §4, a
 * progress line (a live line on a terminal, plain lines otherwise) and a closing summary on stdout. */
#include "cli.h"
#include "run.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define MAX_OPTS 64

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc train [options]\n\n"
               "Trains one model in one precision: FP32, or BF16/FP16 autocast (FP32 master weights, loss\n"
               "scaling for FP16). Writes one JSON object per optimizer step with --log, and evaluates at the\n"
               "end (test accuracy for images, validation loss for text).\n\n"
               "Examples:\n"
               "  ampc train --layers 2 --d-model 128 --heads 4 --context 64 --steps 300\n"
               "  ampc train --model cnn --data fashion-mnist --precision fp16 --epochs 3 --log cnn.jsonl\n"
               "  ampc train --data text:book.txt --precision bf16 --fp32-ops gelu --steps 2000\n\n");
}

static void print_summary(const run_config *cfg, const run_output *o) {
    const run_result *r = &o->r;
    printf("%s: %lld steps, final train loss %.4f, eval loss %.4f", cfg->label, (long long)r->n, r->final_train_loss,
           r->eval_loss);
    if (r->eval_accuracy == r->eval_accuracy) printf(", eval accuracy %.2f%%", 100 * r->eval_accuracy);
    printf(", skipped %lld, final scale %g, peak memory %.1f MiB, %.0f %s\n", (long long)r->skipped_steps,
           r->final_scale, (double)r->peak_bytes / (1 << 20), r->throughput, r->throughput_unit);
}

int cmd_train(int argc, char **argv) {
    const char *prog = "ampc train";
    run_config cfg = {0};
    int prec = PREC_BF16;
    const char *log_path = NULL;
    cli_opt opts[MAX_OPTS];
    int n = run_options(&cfg, opts, MAX_OPTS - 2);
    opts[n++] = (cli_opt){.name = "precision", .kind = CLI_CHOICE, .out = &prec, .choices = precision_names,
                          .defval = "bf16", .help = "fp32, or autocast in bf16 / fp16"};
    opts[n++] = (cli_opt){.name = "log", .kind = CLI_STRING, .out = &log_path, .metavar = "FILE.jsonl",
                          .help = "one JSON object per step, then a final one"};
    bool seen[MAX_OPTS] = {false};
    cli_parse_out po = {.seen = seen};
    int rc = cli_parse_or_exit(prog, usage, opts, (size_t)n, argc, argv, 0, NULL, &po);
    if (rc < 0) rc = run_finish_options(prog, &cfg, opts, n, seen);
    if (rc >= 0) return rc;
    cfg.prec = (precision)prec;
    cfg.label = precision_names[prec];
    ampc_dataset *ds = NULL;
    if ((rc = run_open_data(prog, &cfg, &ds))) return rc;
    FILE *log = NULL;
    if (log_path && !(log = fopen(log_path, "w"))) {
        fprintf(stderr, "%s: --log: cannot write '%s': %s\n", prog, log_path, strerror(errno));
        ampc_dataset_free(ds);
        return CLI_EXIT_FAIL;
    }
    run_output out;
    rc = run_training(prog, &cfg, ds, log, &out);
    if (!rc) print_summary(&cfg, &out);
    if (log && fclose(log) != 0 && !rc) {
        fprintf(stderr, "%s: --log: writing '%s' failed: %s\n", prog, log_path, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    run_output_free(&out);
    ampc_dataset_free(ds);
    return rc;
}
