/* The data directory's MANIFEST: which snapshot and which log segments it must contain. */
#ifndef MUSTERD_MANIFEST_H
#define MUSTERD_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

/* What the directory must hold: a snapshot whose begin record names snap_next (0: no snapshot), and
 * every segment from first to last. */
struct manifest_data {
    uint64_t snap_next, first, last;
};

struct manifest;

/* Read dir's MANIFEST into *m: 1 read, 0 there is none, -1 unreadable or malformed (why filled). */
int manifest_read(const char *dir, struct manifest_data *m, char *why, size_t whylen);
/* The live manifest of dir, starting from m, written at once; NULL on failure (errno set). */
struct manifest *manifest_open(const char *dir, const struct manifest_data *m);
/* A new segment seq was created (the writer thread); 0, or an errno. */
int manifest_set_last(struct manifest *mf, uint64_t seq);
/* A snapshot covering every segment before next is in place (the compactor thread); 0, or an errno. */
int manifest_set_snapshot(struct manifest *mf, uint64_t next);
/* Free; NULL is fine. */
void manifest_close(struct manifest *mf);

#endif
