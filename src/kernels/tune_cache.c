/* tune_cache.c: the process's kernel measurement and its cache (tune.h). The switches AMPC_KERNEL_CHOICE
 * (measure, the default, or rule: the fixed rule of dispatch.c) and AMPC_KERNEL_CACHE (on, off, refresh);
 * the cache file, one per CPU and library build, $XDG_CACHE_HOME/ampc/kernels-<version>-<build>-<hash>.txt
 * (else ~/.cache/ampc/), a text file of measured times that names the library version, the build, the CPU
 * (vendor, brand, family/model/stepping, usable features) and the registry it was measured with, and
 * ends with a line count; a file that does not match in every respect is ignored with a warning and
 * measured again. Concurrent first processes serialise on an flock of PATH.lock and the later ones read
 * what the first wrote, so they all choose alike; the file is replaced atomically (PATH.tmp, rename). */
#include "tune.h"

#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT_LINE "ampc kernel times 2" /* in the hashed header: another format, another file */

#if defined(__SANITIZE_ADDRESS__)
#define BUILD_KIND "asan" /* sanitised code runs at other speeds: its own file */
#elif defined(__OPTIMIZE__)
#define BUILD_KIND "opt"
#else
#define BUILD_KIND "debug"
#endif

/* ---- the switches ---- */

bool ampci_tune_parse_mode(const char *v, ampci_tune_mode *out) {
    *out = AMPCI_TUNE_MEASURE;
    if (!v || !*v || !strcmp(v, "measure")) return true;
    if (!strcmp(v, "rule")) return *out = AMPCI_TUNE_RULE, true;
    return false;
}

bool ampci_tune_parse_cache(const char *v, ampci_tune_cache *out) {
    *out = AMPCI_CACHE_ON;
    if (!v || !*v || !strcmp(v, "on")) return true;
    if (!strcmp(v, "off")) return *out = AMPCI_CACHE_OFF, true;
    if (!strcmp(v, "refresh")) return *out = AMPCI_CACHE_REFRESH, true;
    return false;
}

/* ---- the signature ---- */

static uint64_t fnv(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* "vendor|brand|family-model-stepping|usable features|best level" */
static void cpu_line(char *buf, size_t size) {
    const ampc_cpu_info *cpu = ampc_cpu();
    unsigned a = 0, b, c, d;
    __get_cpuid(1, &a, &b, &c, &d);
    snprintf(buf, size, "%s|%s|%x|%x|%s", cpu->vendor, cpu->brand, a, ampci_feature_set(false),
             ampc_isa_name(cpu->best));
}

/* A hash of the candidates' names: a build with other kernels has another file. */
static uint64_t registry_hash(void) {
    size_t n;
    const ampci_kernel *const *all = ampci_registry(&n);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        if (all[i]->role == AMPCI_ROLE_KERNEL) h = fnv(fnv(h, all[i]->name), ";");
    return h;
}

/* The header lines a file must begin with. */
static void header(char *buf, size_t size) {
    char cpu[256];
    cpu_line(cpu, sizeof cpu);
    snprintf(buf, size, FORMAT_LINE "\nversion %s\nbuild %s\ncpu %s\nregistry %016llx\n", ampc_version(), BUILD_KIND,
             cpu, (unsigned long long)registry_hash());
}

/* mkdir -p; true when dir exists afterwards. */
static bool make_dirs(char *dir) {
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(dir, 0700);
        *p = '/';
    }
    struct stat st;
    return (mkdir(dir, 0700) == 0 || errno == EEXIST) && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

bool ampci_tune_cache_path(const char *dir, char *path, size_t size, char *note, size_t note_size) {
    char d[400];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir) snprintf(d, sizeof d, "%s", dir);
    else if (xdg && xdg[0] == '/') snprintf(d, sizeof d, "%s/ampc", xdg);
    else if (home && home[0] == '/') snprintf(d, sizeof d, "%s/.cache/ampc", home);
    else return snprintf(note, note_size, "no cache: neither $XDG_CACHE_HOME nor $HOME is set"), false;
    if (!make_dirs(d)) return snprintf(note, note_size, "no cache: cannot create %s (%s)", d, strerror(errno)), false;
    char h[512];
    header(h, sizeof h);
    snprintf(path, size, "%s/kernels-%s-%s-%016llx.txt", d, ampc_version(), BUILD_KIND,
             (unsigned long long)fnv(0xcbf29ce484222325ull, h));
    note[0] = '\0';
    return true;
}

/* ---- the file ---- */

static const char *class_name(const ampci_cell_times *c, int k) {
    return c->nclass == 1 ? "all" : ampci_size_class_name(k);
}

bool ampci_tune_cache_write(const char *path, const ampci_tune_times *t, char *note, size_t note_size) {
    char tmp[600], h[512];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return snprintf(note, note_size, "cannot write %s: %s", tmp, strerror(errno)), false;
    header(h, sizeof h);
    int lines = 0;
    fprintf(f,
            "%sseconds %.17g\n# cell, size class, seconds per call summed over the class's shapes (exact: the\n"
            "# processes that read them choose as the one that measured), kernel\n",
            h, t->seconds);
    for (int i = 0; i < t->ncells; i++) {
        const ampci_cell_times *c = &t->cell[i];
        for (int k = 0; k < c->nclass; k++)
            for (int j = 0; j < c->n; j++, lines++)
                fprintf(f, "%s %s %.17g %s\n", ampci_cell_name(c->slot, c->key), class_name(c, k), c->sec[j][k],
                        c->cand[j]->name);
    }
    fprintf(f, "end %d\n", lines);
    bool ok = !ferror(f);
    ok &= fclose(f) == 0;
    if (ok && rename(tmp, path) == 0) return true;
    snprintf(note, note_size, "cannot write %s: %s", path, strerror(errno));
    unlink(tmp);
    return false;
}

/* One data line into t; false when it names no measured cell, class or candidate. */
static bool read_line(ampci_tune_times *t, const char *line, bool set[][AMPCI_TUNE_MAX_CAND][AMPCI_SIZE_CLASSES]) {
    char cell[64], cls[16], name[128];
    double sec;
    if (sscanf(line, "%63s %15s %lf %127s", cell, cls, &sec, name) != 4 || !(sec >= 0)) return false;
    for (int i = 0; i < t->ncells; i++) {
        ampci_cell_times *c = &t->cell[i];
        if (strcmp(ampci_cell_name(c->slot, c->key), cell) != 0) continue;
        for (int k = 0; k < c->nclass; k++)
            for (int j = 0; j < c->n && !strcmp(class_name(c, k), cls); j++)
                if (!strcmp(c->cand[j]->name, name) && !set[i][j][k]) return c->sec[j][k] = sec, set[i][j][k] = true;
    }
    return false;
}

/* Every (cell, candidate, class) has its time. */
static bool complete(const ampci_tune_times *t, bool set[][AMPCI_TUNE_MAX_CAND][AMPCI_SIZE_CLASSES]) {
    for (int i = 0; i < t->ncells; i++)
        for (int j = 0; j < t->cell[i].n; j++)
            for (int k = 0; k < t->cell[i].nclass; k++)
                if (!set[i][j][k]) return false;
    return true;
}

static bool fail(char *note, size_t size, const char *why) { return snprintf(note, size, "%s", why), false; }

bool ampci_tune_cache_read(const char *path, ampci_tune_times *t, char *note, size_t note_size) {
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(note, note_size, "%s", errno == ENOENT ? "" : strerror(errno)), false;
    bool set[AMPCI_TUNE_MAX_CELLS][AMPCI_TUNE_MAX_CAND][AMPCI_SIZE_CLASSES];
    memset(set, 0, sizeof set);
    char h[512], line[512], want[512];
    header(want, sizeof want);
    size_t got = fread(h, 1, strlen(want), f);
    bool ok = got == strlen(want) && memcmp(h, want, got) == 0;
    if (!ok) fail(note, note_size, "written by another ampc version or build, or for another CPU");
    int lines = 0, end = -1;
    double seconds = -1;
    while (ok && end < 0 && fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (sscanf(line, "seconds %lf", &seconds) == 1) continue;
        if (sscanf(line, "end %d", &end) == 1) continue;
        if (!(ok = read_line(t, line, set))) fail(note, note_size, "corrupt: a line names no measured kernel");
        lines++;
    }
    if (ok && (end != lines || seconds < 0)) ok = fail(note, note_size, "corrupt: truncated");
    if (ok && !complete(t, set)) ok = fail(note, note_size, "incomplete: a kernel has no time");
    fclose(f);
    if (ok) t->seconds = seconds, note[0] = '\0';
    return ok;
}

/* ---- the process ---- */

static void measure(ampci_tune_state *st, const ampci_tune_ops *ops) {
    double t0 = ampci_tune_now();
    ampci_tune_measure(&st->times, ops);
    st->times.seconds = ampci_tune_now() - t0;
    st->source = AMPCI_TUNE_FROM_MEASURED;
}

void ampci_tune_load(ampci_tune_state *st, const char *path, const ampci_tune_ops *ops) {
    char why[160] = "";
    snprintf(st->path, sizeof st->path, "%s", path);
    st->written = false;
    if (!path[0]) return measure(st, ops);
    if (st->cache != AMPCI_CACHE_REFRESH && ampci_tune_cache_read(path, &st->times, why, sizeof why)) {
        st->source = AMPCI_TUNE_FROM_CACHE;
        return;
    }
    char lock[600];
    snprintf(lock, sizeof lock, "%s.lock", path);
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) flock(fd, LOCK_EX); /* the first process measures; the others wait, then read its file */
    if (fd >= 0 && st->cache != AMPCI_CACHE_REFRESH && ampci_tune_cache_read(path, &st->times, why, sizeof why)) {
        st->source = AMPCI_TUNE_FROM_CACHE;
    } else {
        if (why[0])
            ampci_log(NULL, AMPC_LOG_WARN, "kernel cache %s ignored (%s); measuring the kernels again", path, why);
        measure(st, ops);
        if (fd < 0) snprintf(st->note, sizeof st->note, "cache not written: %s: %s", lock, strerror(errno));
        else st->written = ampci_tune_cache_write(path, &st->times, st->note, sizeof st->note);
    }
    if (fd >= 0) close(fd); /* releases the lock */
}

static ampci_tune_state g_state;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void env_switches(ampci_tune_state *st) {
    const char *mode = getenv("AMPC_KERNEL_CHOICE"), *cache = getenv("AMPC_KERNEL_CACHE");
    if (!ampci_tune_parse_mode(mode, &st->mode))
        ampci_log(NULL, AMPC_LOG_WARN, "AMPC_KERNEL_CHOICE='%s' ignored: expected measure or rule", mode);
    if (!ampci_tune_parse_cache(cache, &st->cache))
        ampci_log(NULL, AMPC_LOG_WARN, "AMPC_KERNEL_CACHE='%s' ignored: expected on, off or refresh", cache);
}

/* A cell has a choice at the process's level (AMPC_ISA=ref leaves none: nothing to measure). */
static bool any_choice(const ampci_tune_times *t) {
    for (int i = 0; i < t->ncells; i++)
        if (ampci_cell_has_choice(AMPC_ISA_AUTO, t->cell[i].slot, t->cell[i].key)) return true;
    return false;
}

/* Measuring must not disturb the caller's thread-local error. */
static void init(void) {
    ampci_tune_state *st = &g_state;
    env_switches(st);
    ampci_tune_cells(&st->times);
    if (st->mode == AMPCI_TUNE_RULE) return; /* source: rule */
    if (!any_choice(&st->times)) {
        snprintf(st->note, sizeof st->note, "nothing to measure: no slot has two candidates at kernel level %s",
                 ampc_isa_name(ampc_cpu()->chosen));
        return;
    }
    char path[512] = "";
    if (st->cache != AMPCI_CACHE_OFF) ampci_tune_cache_path(NULL, path, sizeof path, st->note, sizeof st->note);
    else snprintf(st->note, sizeof st->note, "no cache: AMPC_KERNEL_CACHE=off");
    ampc_status last = ampc_last_status();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", last != AMPC_OK ? ampc_last_error() : "");
    ampci_tune_ops ops;
    if (ampci_tune_work_new(&ops) != AMPC_OK) {
        snprintf(st->note, sizeof st->note, "not measured: out of memory (the rule chose)");
    } else {
        ampci_tune_load(st, path, &ops);
        ampci_tune_work_free(&ops);
    }
    if (last == AMPC_OK) ampc_clear_error();
    else ampci_fail(last, "%s", msg);
}

const ampci_tune_state *ampci_tune(void) {
    pthread_once(&g_once, init);
    return &g_state;
}
