/* Snapshot and compaction of the data directory on a helper thread, and the directory's file names. */
#ifndef MUSTERD_COMPACT_H
#define MUSTERD_COMPACT_H

#include <stddef.h>
#include <stdint.h>

#include "precord.h"

struct compactor;

/* Format the path of log segment seq in dir. */
void compact_seg_path(const char *dir, uint64_t seq, char *buf, size_t n);
/* Format the path of the snapshot (tmp: the one being written) in dir. */
void compact_snap_path(const char *dir, int tmp, char *buf, size_t n);
/* The log segment numbers in dir, ascending (*v malloc'd); 0, or -1 when dir cannot be read. */
int compact_segments(const char *dir, uint64_t **v, size_t *n);
/* Check the snapshot's framing as its records stream past: begin first, end last with the right count.
 * Feed every record to compact_snap_step; it returns 0 to go on, -1 on a misplaced record. */
struct compact_snap_check {
    int begun, ended;
    uint64_t next_seq, count;
};
int compact_snap_step(struct compact_snap_check *s, const struct prec *r);
/* Fsync a directory so a rename or a new file in it is durable; 0 on success. */
int compact_sync_dir(const char *dir);

struct manifest;
/* Start the compaction thread for dir (whose MANIFEST is mf); efd is written once per finished snapshot.
 * NULL on failure. */
struct compactor *compact_start(const char *dir, int efd, struct manifest *mf);
/* Ask for segments up to and including seq to be folded into the snapshot (any thread). */
void compact_request(struct compactor *cp, uint64_t seq);
/* Whether a compaction is asked for or running. */
int compact_busy(struct compactor *cp);
/* Snapshots written so far, and failures. */
void compact_counts(struct compactor *cp, uint64_t *done, uint64_t *failed);
/* Stop the thread (an unfinished snapshot is abandoned) and free; NULL is a no-op. */
void compact_stop(struct compactor *cp);

#endif
