/* doctor_markdown.c: report.md of `ampc doctor --report DIR` (doctor_report.c writes the files and draws
 * heatmap.svg): what was run, the recommended command lines with one sentence on why, the verdict counts
 * and a table per group of sites (every verdict from ampc_stats_advise, never re-derived here) and how to
 * read the heat map, with the numbers of the windows it draws. Fixed formats only, so the bytes depend
 * only on the statistics and the run's description. */
#include "doctor_report_util.h"

#include <math.h>
#include <stdio.h>

static const char *or_dash(const char *s) { return s && s[0] ? s : "-"; }

/* A table cell's text: '|' would end the cell, '<' and '&' could open HTML, a newline the row. */
static void md_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '|': fputs("\\|", f); break;
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '`': fputc('\'', f); break;
        case '\n': fputc(' ', f); break;
        default: fputc(*s, f);
        }
    }
}

/* A code span: its text is shown as is (no entities), only '|' still needs escaping inside a table. */
static void md_code(FILE *f, const char *s) {
    if (!s[0]) return;
    fputc('`', f);
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else fputc(*s == '`' ? '\'' : *s == '\n' ? ' ' : *s, f);
    }
    fputc('`', f);
}

static void md_num(FILE *f, double v) {
    if (v == 0) fputs("-", f);
    else fprintf(f, "%.3g", v);
}

/* The short verdict ("safe", "scale 2^4", "unsafe", "kept fp32"); long adds the reason. */
static void md_verdict(FILE *f, const ampc_stats *st, int i, ampc_format fmt, bool long_form) {
    ampc_stats_advice a;
    if (ampc_stats_advise(st, i, fmt, &a) != AMPC_OK) {
        fputs("?", f);
        return;
    }
    if (a.verdict == AMPC_VERDICT_UNSAFE) fputs("**unsafe**", f);
    else if (a.verdict == AMPC_VERDICT_NEEDS_SCALING) fprintf(f, "scale 2^%d", a.scale_log2);
    else fputs(ampc_stats_verdict_name(a.verdict), f);
    if (long_form && a.why[0]) {
        fputs(": ", f);
        md_text(f, a.why);
    }
}

static void md_role(FILE *f, const ampc_stats_entry *e) {
    fputs(ampc_stats_role_name(e->role), f);
    if (e->role != AMPC_STATS_PARAM_GRAD || !e->param[0]) return;
    fputc(' ', f);
    md_code(f, e->param);
}

/* One table: a row per site of the given role, in statistics order. */
static void md_table(FILE *f, const ampc_stats *st, const char *title, ampc_stats_role role) {
    int n = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) n += ampc_stats_get(st, i)->role == role;
    if (!n) return;
    fprintf(f, "### %s (%d)\n\n", title, n);
    fputs("| module | op | role | amax | smallest non-zero | zeros | FP16 | BF16 | FP8-E4M3 | FP8-E5M2 |\n", f);
    fputs("|---|---|---|---:|---:|---:|---|---|---|---|\n", f);
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *e = ampc_stats_get(st, i);
        if (e->role != role) continue;
        fputs("| ", f);
        md_code(f, e->module[0] ? e->module : "(top level)");
        fputs(" | ", f);
        md_code(f, e->op);
        fputs(" | ", f);
        md_role(f, e);
        fputs(" | ", f);
        md_num(f, e->amax);
        fputs(" | ", f);
        md_num(f, e->min_nonzero);
        fprintf(f, " | %.1f%% | ", e->count ? 100.0 * (double)e->zeros / (double)e->count : 0.0);
        md_verdict(f, st, i, AMPC_FORMAT_FP16, true);
        static const ampc_format rest[] = {AMPC_FORMAT_BF16, AMPC_FORMAT_FP8_E4M3, AMPC_FORMAT_FP8_E5M2};
        for (int k = 0; k < 3; k++) {
            fputs(" | ", f);
            md_verdict(f, st, i, rest[k], false);
        }
        fputs(" |\n", f);
    }
    fputs("\n", f);
}

/* How many sites get each verdict, per format. */
static void md_counts(FILE *f, const ampc_stats *st) {
    fputs("| format | safe | needs scaling | unsafe | kept fp32 |\n|---|---:|---:|---:|---:|\n", f);
    for (int j = 0; j < DOCTOR_NWIN; j++) {
        int c[AMPC_VERDICT_COUNT] = {0};
        ampc_stats_advice a;
        for (int i = 0; i < ampc_stats_count(st); i++)
            if (ampc_stats_advise(st, i, doctor_win_fmt[j], &a) == AMPC_OK && a.verdict < AMPC_VERDICT_COUNT)
                c[a.verdict]++;
        fprintf(f, "| %s | %d | %d | %d | %d |\n", doctor_fmt_name(doctor_win_fmt[j]), c[0], c[1], c[2], c[3]);
    }
    fputs("\n", f);
}

static void md_block(FILE *f, const char *cmd) {
    if (cmd && cmd[0]) fprintf(f, "```sh\n%s\n```\n\n", cmd);
}

/* One sentence on why: the unsafe sites and what stays FP32, the loss scale and what it buys. */
static void md_why(FILE *f, const ampc_stats *st, ampc_format fmt) {
    ampc_stats_recommendation r;
    if (ampc_stats_recommend(st, fmt, &r) != AMPC_OK) return;
    const char *name = doctor_fmt_name(fmt);
    if (r.unsafe_sites) {
        fprintf(f, "%d of %d sites %s unsafe in %s (their values, or the inputs they cast down, overflow or flush)",
                r.unsafe_sites, ampc_stats_count(st), r.unsafe_sites == 1 ? "is" : "are", name);
        if (r.fp32_modules[0]) fprintf(f, ", so `%s` stays FP32", r.fp32_modules);
        if (r.fp32_ops[0]) fprintf(f, "%s ops `%s` stay FP32", r.fp32_modules[0] ? " and the" : ", so the", r.fp32_ops);
    } else fprintf(f, "No site is unsafe in %s", name);
    double pct = 100 * r.normal_fraction;
    if (r.normal_fraction <= 0.999)
        fprintf(f,
                "; no single loss scale fits the gradients: the largest without overflow, 2^%d, keeps %.2f%% of their "
                "non-zero values normal.\n\n",
                r.scale_log2, pct);
    else if (r.scale_log2 > 0)
        fprintf(f,
                "; the gradients need a loss scale of 2^%d = %.0f to keep %.2f%% of their non-zero values normal.\n\n",
                r.scale_log2, ldexp(1.0, r.scale_log2), pct);
    else
        fprintf(f, "; the gradients need no loss scale (%.2f%% of their non-zero values are normal unscaled).\n\n",
                pct);
}

/* The share of the lowered gradients' non-zero values below 2^e (from their histograms). */
static double grads_below(const ampc_stats *st, double e) {
    double below = 0, all = 0;
    for (int i = 0; i < ampc_stats_count(st); i++) {
        const ampc_stats_entry *s = ampc_stats_get(st, i);
        if (s->role == AMPC_STATS_OUTPUT || !s->lowered) continue;
        for (int k = -127; k <= 127; k++) {
            double v = (double)doctor_in_binade(s, k);
            all += v;
            if (k < e) below += v;
        }
    }
    return all > 0 ? below / all : 0;
}

static void md_reading_fp16(FILE *f, const ampc_stats *st) {
    doctor_window h = doctor_get_window(0);
    char hmax[32];
    doctor_fmt_max(hmax, sizeof hmax, h.max);
    int lo = (int)lround(h.lo), sub = (int)lround(h.sub);
    fprintf(f,
            "The %s lines are FP16's window: normal numbers from 2^%d (%.3g) to %s (solid lines), subnormals down to "
            "2^%d (%.3g, dashed) with fewer significant bits, zero below that and infinity above %s. Forward values "
            "usually sit inside it. Gradients are much smaller: here %.1f%% of the lowered gradients' non-zero values "
            "lie below 2^%d and %.1f%% below 2^%d, where FP16 would round them to fewer bits or to zero. Multiplying "
            "the loss by 2^k multiplies every gradient by 2^k, which moves every backward row k columns to the right, "
            "into the window; the optimizer divides the factor out again in FP32 before the update.",
            h.color_name, lo, ldexp(1.0, lo), hmax, sub, ldexp(1.0, sub), hmax, 100 * grads_below(st, h.lo), lo,
            100 * grads_below(st, h.sub), sub);
    ampc_stats_recommendation r;
    if (ampc_stats_recommend(st, AMPC_FORMAT_FP16, &r) == AMPC_OK && r.scale_log2 > 0)
        fprintf(f, " The arrow shows the loss scale recommended here, 2^%d.", r.scale_log2);
    fputs("\n\n", f);
}

static void md_reading_others(FILE *f, const ampc_stats *st) {
    doctor_window b = doctor_get_window(1), e4 = doctor_get_window(2), e5 = doctor_get_window(3);
    char bmax[32], scale[96] = "it needs no loss scale";
    doctor_fmt_max(bmax, sizeof bmax, b.max);
    int lo = 0, hi = 0;
    bool covers = !doctor_data_range(st, &lo, &hi) || (lo >= b.sub && hi + 1 <= b.hi);
    ampc_stats_recommendation r;
    if (ampc_stats_recommend(st, AMPC_FORMAT_BF16, &r) == AMPC_OK && r.scale_log2 != 0)
        snprintf(scale, sizeof scale, "even so its gradients want a scale of 2^%d here", r.scale_log2);
    fprintf(f,
            "BF16 (%s) keeps FP32's 8 exponent bits: normal from 2^%d to %s, so its window %s and %s; it pays with 8 "
            "significant bits instead of FP16's 11, a matter of precision, not range. The FP8 formats are narrower "
            "still, FP8-E4M3 (%s, normal 2^%d to %.6g) and FP8-E5M2 (%s, normal 2^%d to %.6g), their edges dotted: "
            "they need a per-tensor scale, which the FP8 columns of the tables give.\n",
            b.color_name, (int)lround(b.lo), bmax,
            covers ? "covers every column shown" : "does not cover every column shown (see its verdicts)", scale,
            e4.color_name, (int)lround(e4.lo), e4.max, e5.color_name, (int)lround(e5.lo), e5.max);
}

static void md_reading(FILE *f, const ampc_stats *st) {
    fputs("Each row is one tensor (a site: module, op and role), each column one binade of |x|, a factor of two; "
          "the darker the cell, the larger the share of that tensor's non-zero values in it (log scale, white: "
          "none). Forward outputs come first, then the gradients. Grey labels mark tensors that stay FP32 under "
          "autocast; the two columns on the right repeat the FP16 and BF16 verdicts.\n\n",
          f);
    md_reading_fp16(f, st);
    md_reading_others(f, st);
}

static void md_run(FILE *f, const doctor_meta *m, const ampc_stats *st) {
    fprintf(f, "# Numerics doctor: %s\n\n## What was run\n\n", or_dash(m->model));
    fprintf(f, "- Model: %s\n- Data: %s\n- Steps: %lld in FP32, with range statistics on %d sites\n", or_dash(m->model),
            or_dash(m->data), (long long)m->steps, ampc_stats_count(st));
    if (m->command && m->command[0]) fprintf(f, "- Command: `%s`\n", m->command);
    if (m->step_seconds > 0)
        fprintf(f, "- Cost of the statistics: %.3g ms a step, on top of %.3g ms without them (%.1f%% more)\n\n",
                1e3 * m->stats_seconds, 1e3 * (m->step_seconds - m->stats_seconds), 100 * doctor_stats_overhead(m));
    else fputs("- Cost of the statistics: not measured\n\n", f);
}

void doctor_write_markdown(FILE *f, const doctor_meta *m, const ampc_stats *st) {
    md_run(f, m, st);
    fputs("## Recommendation\n\nFP16:\n\n", f);
    md_block(f, m->recommended);
    md_why(f, st, AMPC_FORMAT_FP16);
    if (m->bf16_command && m->bf16_command[0]) {
        fputs("BF16:\n\n", f);
        md_block(f, m->bf16_command);
        md_why(f, st, AMPC_FORMAT_BF16);
    }
    if (m->fp8_command && m->fp8_command[0]) {
        fputs("FP8 (linear and matmul layers in E4M3 with E5M2 gradients, delayed per-tensor scaling; the FP8 "
              "columns below judge their outputs and gradients):\n\n",
              f);
        md_block(f, m->fp8_command);
    }
    fputs("## Verdicts\n\n", f);
    md_counts(f, st);
    fputs("FP16 verdicts come with their reason; `scale 2^k` means the values need a scale of 2^k to stay in the "
          "format's range (the loss scale for gradients, a per-tensor scale for FP8).\n\n",
          f);
    md_table(f, st, "Forward: op outputs", AMPC_STATS_OUTPUT);
    md_table(f, st, "Backward: output gradients", AMPC_STATS_GRAD);
    md_table(f, st, "Backward: parameter gradients", AMPC_STATS_PARAM_GRAD);
    fputs("## The heat map\n\n![Where the values live](heatmap.svg)\n\n", f);
    md_reading(f, st);
}
