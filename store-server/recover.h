/* Recovery of a data directory at start: snapshot, then log segments, torn tails cut, damage refused. */
#ifndef MUSTERD_RECOVER_H
#define MUSTERD_RECOVER_H

#include <stdint.h>

struct server;
struct prec;

/* Replay dir (snapshot, then segments) into srv; *first gets the first segment the snapshot does not
 * cover (0: no snapshot), *last the newest segment replayed (0: none).  With repair, damage and missing
 * files are accepted and what is dropped is logged.  0 or an exit status (EX_DATAERR for bad data). */
int recover_dir(struct server *srv, const char *dir, int repair, uint64_t *first, uint64_t *last);
/* Apply one data record (set, delete, generation) to srv; whether it was refused (its namespace or a
 * limit). */
int recover_apply_one(struct server *srv, const struct prec *r);

#endif
