/* attention_amx_emu.c: the AMX attention kernel (kernels/amx/attention_amx.c) built as an emulation, as
 * test_amx.c builds the AMX GEMMs: AMPCI_AMX_EMULATE turns its tile instructions into amx_tile.h's C
 * emulation and its vector layer (kernels/avx512/attention_vec.h) into portable C, and names its entry points
 * ampc_k_attention__amx_emu and ampc_k_attention_bw__amx_emu (BF16 on the emulated tiles, other dtypes
 * through the ref kernel). test_amx's emulated table lists them; test_attention_fast runs them against the
 * ref kernel and, where AMX runs, against the native kernel bit for bit. Compiled without ISA flags, so it
 * runs on any x86-64. */
#define AMPCI_AMX_EMULATE 1
#include "kernels/amx/attention_amx.c"
