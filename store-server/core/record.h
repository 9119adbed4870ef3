/* The record: one change of state (a key set or deleted, a generation counter raised, a namespace dropped), as
 * the state emits it, the data directory and the etcd log keep it (precord.c encodes it) and replay applies
 * it (records.c). */
#ifndef MUSTERD_RECORD_H
#define MUSTERD_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* What a record says; the numbers are those of the kind byte on disk and in etcd (precord.h). */
enum record_kind {
    RECORD_SET = 1, /* key now holds val (its whole value: records carry resulting state) */
    RECORD_DEL = 2, /* key is gone */
    RECORD_GEN = 3, /* the namespace's rendezvous generation counter reached gen */
    RECORD_DROP = 6, /* the namespace is gone: its keys and its generation counter (4, 5: snapshot framing) */
};

/* Where a change applied through records_apply came from, as the sink is told. */
enum record_origin {
    RECORD_LOCAL,   /* made here: a request, the daemon's own rendezvous keys */
    RECORD_REPLAY,  /* replayed from the data directory at start (or rebuilt by compaction) */
    RECORD_REPLICA, /* delivered by the --ha log or snapshot (a standby following the leader) */
};

/* One record.  Nothing is owned: the pointers stay valid only during the call that passes it. */
struct record {
    enum record_kind kind;
    const char *ns;     /* the namespace's name, NUL-terminated ("" is read as "default") */
    const char *key;    /* SET, DEL: any bytes, NUL included, never empty */
    size_t klen;
    const uint8_t *val; /* SET: the value (may be empty) */
    size_t vlen;
    uint64_t gen;       /* GEN: the counter's value */
};

/* Called with each record of a walk (records_dump); non-zero stops the walk and is returned. */
typedef int (*record_fn)(void *arg, const struct record *r);

/* Where the live state's records go, synchronously, at the moment of the change: before anyone is told
 * of it.  from says whether the change was made here or is being replayed or replicated. */
struct record_sink {
    void (*take)(void *arg, const struct record *r, enum record_origin from);
    void *arg;
};

#endif
