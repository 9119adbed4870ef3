/* Recovery of a data directory at start: snapshot, then log segments, torn tails cut, damage refused. */
#ifndef MUSTERD_RECOVER_H
#define MUSTERD_RECOVER_H

#include <stdint.h>

struct server;

/* What recovery found: the first segment the snapshot does not cover (0: no snapshot), and the oldest and
 * newest segments replayed (0: none). */
struct recover_span {
    uint64_t snap_next, first, last;
};

/* Check dir against its MANIFEST and replay it (snapshot, then segments) into srv, filling *span.  With
 * repair, damage and missing files are accepted and what is lost is logged.  0 or an exit status
 * (EX_DATAERR for bad or missing data). */
int recover_dir(struct server *srv, const char *dir, int repair, struct recover_span *span);

#endif
