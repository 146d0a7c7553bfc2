/* ckpt.h: checkpoint files as `ampc train` keeps them. --checkpoint FILE always names the newest
 * checkpoint. With --keep N > 1 every save is also kept as STEM-stepS.EXT (FILE = STEM.EXT; S the step,
 * zero-padded to 8 digits so names sort by step), FILE being a second link to the newest, and all but
 * the newest N of those are deleted. Each file appears by an atomic rename, so a crash at any moment
 * leaves FILE either the previous checkpoint or the new one. */
#ifndef AMPC_CLI_CKPT_H
#define AMPC_CLI_CKPT_H

#include "ampc.h"

/* Data parallel: saves become ampc_dist_checkpoint_save, called by every rank (rank 0 writes, links and
 * prunes, and says what failed); NULL: one process. */
void ckpt_set_dist(ampc_dist *d);

/* Saves state; 1 after printing `prog: --checkpoint: ...` on stderr. */
int ckpt_save(const char *prog, const char *path, int64_t keep, const ampc_checkpoint_state *state);

/* Saves state as ckpt_save does; when that fails (a full disk, a directory that went away), writes it to
 * a rescue file in $TMPDIR (or /tmp), named ampc-rescue-PID-NAME after FILE's name, so the state held in
 * memory is not lost with the destination. Returns 0 when saved at path, 1 when saved only to the rescue
 * file (its name in rescue), 2 when nothing could be saved; every failure is printed. */
int ckpt_save_or_rescue(const char *prog, const char *path, int64_t keep, const ampc_checkpoint_state *state,
                        char *rescue, size_t size);

/* STEM-stepS.EXT for path = STEM.EXT (EXT: the last extension of the file name, or none). */
void ckpt_step_name(const char *path, int64_t step, char *buf, size_t size);
/* How many numbered copies of path there are (the newest's step in *newest, when any and not NULL). */
size_t ckpt_numbered_count(const char *path, int64_t *newest);

#endif
