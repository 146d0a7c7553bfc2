/* info_devices.c: the devices part of `ampc info`: every device kind this build knows, whether it is built
 * and present, what it is (the CPU's brand, a GPU's name, capability, multiprocessors and memory), which
 * one --device selects, and what runs there (the CPU's kernel table; the guard device runs the CPU's
 * kernels on memory the host may not touch). */
#include "info_devices.h"

#include <stdio.h>

/* Every device to list: the CPU, the guard device, and each GPU present (one "cuda" row when none is). */
static int devices(ampc_device *out, int max) {
    int n = 0;
    out[n++] = (ampc_device){AMPC_DEVICE_CPU, 0};
    int gpus = ampc_device_count(AMPC_DEVICE_CUDA);
    for (int i = 0; i < (gpus ? gpus : 1) && n < max - 1; i++) out[n++] = (ampc_device){AMPC_DEVICE_CUDA, i};
    out[n++] = (ampc_device){AMPC_DEVICE_GUARD, 0};
    return n;
}

static bool same(ampc_device a, ampc_device b) { return a.kind == b.kind && a.index == b.index; }

static const char *state_text(const ampc_device_info *d) {
    return !d->built ? "not in this build" : !d->present ? "not present" : "present";
}

static const char *runs_text(ampc_device d) {
    switch (d.kind) {
    case AMPC_DEVICE_CPU: return "the kernels below";
    case AMPC_DEVICE_GUARD: return "the CPU's kernels, on memory the host may not touch (a test device)";
    default: return "CUDA kernels and cuBLASLt GEMMs";
    }
}

void info_print_devices(ampc_device selected) {
    ampc_device list[18];
    int n = devices(list, 18);
    printf("devices (--device; * marks the one selected)\n");
    for (int i = 0; i < n; i++) {
        ampc_device_info d;
        ampc_device_get_info(list[i], &d); /* fills d even for a device that is not built */
        char mem[64] = "";
        if (d.total_memory) snprintf(mem, sizeof mem, ", %.1f GiB", (double)d.total_memory / (1 << 30));
        printf("  %c %-7s %-17s %s%s\n", same(list[i], selected) ? '*' : ' ', d.name, state_text(&d),
               d.present ? d.description : "", d.present ? mem : "");
        if (d.present) printf("              runs %s\n", runs_text(list[i]));
    }
}

void info_json_devices(json_writer *w, ampc_device selected) {
    ampc_device list[18];
    int n = devices(list, 18);
    char name[32];
    json_kstr(w, "device", ampc_device_name(selected, name, sizeof name));
    json_key(w, "devices");
    json_arr_begin(w);
    for (int i = 0; i < n; i++) {
        ampc_device_info d;
        ampc_device_get_info(list[i], &d);
        json_obj_begin(w);
        json_kstr(w, "name", d.name);
        json_kstr(w, "kind", ampc_device_kind_name(d.device.kind));
        json_kbool(w, "built", d.built);
        json_kbool(w, "present", d.present);
        json_kstr(w, "description", d.present ? d.description : NULL);
        json_kbool(w, "host_memory", d.host_memory);
        json_kint(w, "units", d.units);
        if (d.capability_major) {
            snprintf(name, sizeof name, "%d.%d", d.capability_major, d.capability_minor);
            json_kstr(w, "capability", name);
        } else {
            json_knull(w, "capability");
        }
        json_kint(w, "total_memory", (int64_t)d.total_memory);
        json_kint(w, "free_memory", (int64_t)d.free_memory);
        json_kstr(w, "runs", d.present ? runs_text(list[i]) : NULL);
        json_obj_end(w);
    }
    json_arr_end(w);
}
