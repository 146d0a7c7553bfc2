/* info_devices.h: the devices section of `ampc info` (info_devices.c). */
#ifndef AMPC_CLI_INFO_DEVICES_H
#define AMPC_CLI_INFO_DEVICES_H

#include "ampc.h"
#include "json.h"

/* The device table, `selected` marked. */
void info_print_devices(ampc_device selected);
/* "device" and "devices" keys of the JSON object being written. */
void info_json_devices(json_writer *w, ampc_device selected);

#endif
