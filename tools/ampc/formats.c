/* formats.c: `ampc formats`, the table of floating-point formats ampc knows (FP32, TF32, BF16, FP16,
 * FP8-E4M3, FP8-E5M2) as ampc_format_get_info derives them: layout, range, precision, and whether the
 * conversion code reproduced every derived value. The exit status is 1 when any format failed that
 * check, so CI can run this command as a self-test of the numerics on each machine. */
#include "cli.h"
#include "json.h"

#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "Usage: ampc formats [--json]\n\n"
               "The floating-point formats of mixed-precision training: bits, exponent and mantissa bits,\n"
               "bias, largest finite value, smallest normal and subnormal values, epsilon, decimal digits and\n"
               "dynamic range. Values are computed from each format's definition and re-derived through\n"
               "ampc's conversion code; the exit status is 1 if the two disagree for any format.\n\n");
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

/* Hex digits of a bit pattern: TF32 (19 bits) lives in FP32's 32-bit layout. */
static int hex_width(const ampc_format_info *fi) { return fi->total_bits <= 8 ? 2 : fi->total_bits <= 16 ? 4 : 8; }

static void print_layout(const ampc_format_info *fis) {
    printf("%-9s %4s %4s %4s %5s %5s %5s %4s %11s %9s\n", "format", "bits", "exp", "man", "bias", "emin", "emax", "inf",
           "max bits", "verified");
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++) {
        const ampc_format_info *f = &fis[i];
        printf("%-9s %4d %4d %4d %5d %5d %5d %4s  0x%0*x%*s %9s\n", f->name, f->total_bits, f->exponent_bits,
               f->mantissa_bits, f->bias, f->emin, f->emax, yes_no(f->has_inf), hex_width(f),
               (unsigned)f->max_finite_bits, 8 - hex_width(f), "", f->verified ? "yes" : "NO");
    }
}

static void print_values(const ampc_format_info *fis) {
    printf("%-9s %12s %12s %12s %12s %7s %8s %8s\n", "format", "max finite", "min normal", "min subnorm", "epsilon",
           "digits", "decades", "normal");
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++) {
        const ampc_format_info *f = &fis[i];
        printf("%-9s %12.5e %12.5e %12.5e %12.5e %7.2f %8.2f %8.2f\n", f->name, f->max_finite, f->min_normal,
               f->min_subnormal, f->epsilon, f->decimal_digits, f->range_decades, f->normal_range_decades);
    }
}

static void print_human(const ampc_format_info *fis) {
    print_layout(fis);
    printf("\n");
    print_values(fis);
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++)
        if (!fis[i].verified) printf("\n%s NOT verified: %s\n", fis[i].name, fis[i].verify_note);
    printf("\nbits = sign + exponent + mantissa (stored fraction bits; precision is man + 1 bits). emin/emax:\n"
           "exponents of the smallest and largest normal binades. epsilon = 2^-man, the gap above 1.\n"
           "digits = (man + 1) * log10(2). decades = log10(max finite / min subnormal); normal =\n"
           "log10(max finite / min normal). FP8-E4M3 has no infinities: overflow gives NaN. TF32 is\n"
           "stored in FP32's layout, so its max bits are a 32-bit pattern.\n"
           "Every value is computed from the format's definition (exponent bits, mantissa bits, bias,\n"
           "infinities) and re-derived through ampc's conversion code; 'verified' says both agree.\n");
}

static void print_json(const ampc_format_info *fis, bool all_ok) {
    json_writer w;
    json_init(&w, stdout, true);
    json_obj_begin(&w);
    json_kstr(&w, "ampc_version", ampc_version());
    json_key(&w, "formats");
    json_arr_begin(&w);
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++) {
        const ampc_format_info *f = &fis[i];
        char bits[16];
        snprintf(bits, sizeof bits, "0x%0*x", hex_width(f), (unsigned)f->max_finite_bits);
        json_obj_begin(&w);
        json_kstr(&w, "name", f->name);
        json_kint(&w, "total_bits", f->total_bits);
        json_kint(&w, "exponent_bits", f->exponent_bits);
        json_kint(&w, "mantissa_bits", f->mantissa_bits);
        json_kint(&w, "bias", f->bias);
        json_kint(&w, "emin", f->emin);
        json_kint(&w, "emax", f->emax);
        json_kbool(&w, "has_inf", f->has_inf);
        json_knum(&w, "max_finite", f->max_finite);
        json_kstr(&w, "max_finite_bits", bits);
        json_knum(&w, "min_normal", f->min_normal);
        json_knum(&w, "min_subnormal", f->min_subnormal);
        json_knum(&w, "epsilon", f->epsilon);
        json_knum(&w, "decimal_digits", f->decimal_digits);
        json_knum(&w, "range_decades", f->range_decades);
        json_knum(&w, "normal_range_decades", f->normal_range_decades);
        json_kbool(&w, "verified", f->verified);
        json_kstr(&w, "verify_note", f->verified ? NULL : f->verify_note);
        json_obj_end(&w);
    }
    json_arr_end(&w);
    json_kbool(&w, "all_verified", all_ok);
    json_obj_end(&w);
    json_finish(&w);
}

int cmd_formats(int argc, char **argv) {
    const char *prog = "ampc formats";
    bool json;
    int rc = cli_parse_json_only(prog, usage, argc, argv, &json);
    if (rc >= 0) return rc;
    ampc_format_info fis[AMPC_FORMAT_COUNT];
    bool all_ok = true;
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++) {
        ampc_status s = ampc_format_get_info((ampc_format)i, &fis[i]);
        if (s != AMPC_OK) return cli_fail_lib(prog, s);
        all_ok = all_ok && fis[i].verified;
    }
    if (json) print_json(fis, all_ok);
    else print_human(fis);
    fflush(stdout);
    for (int i = 0; i < AMPC_FORMAT_COUNT; i++)
        if (!fis[i].verified) fprintf(stderr, "%s: %s not verified: %s\n", prog, fis[i].name, fis[i].verify_note);
    return all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}
