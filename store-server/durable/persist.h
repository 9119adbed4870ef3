/* Durability (--data-dir): an append-only log of every keyspace change and generation, recovered at start. */
#ifndef MUSTERD_PERSIST_H
#define MUSTERD_PERSIST_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct record;
struct evbuffer;
struct bufferevent;

/* A connection's output held back until the log is durable; one per connection of any front end
 * (zero-initialised, then left to persist.c). */
struct persist_hold {
    struct evbuffer *held;
    uint64_t lsn;                     /* the log record its frames wait for */
    struct bufferevent *bev;          /* where they go once it is durable */
    struct evbuffer *out;             /* or, without a bufferevent, this buffer ... */
    void (*kick)(struct persist_hold *h); /* ... whose owner is told after frames were added */
    int fd;                           /* ... and whose socket is shut down when its frames are forsaken */
    struct persist_hold *prev, *next; /* the server's holders; prev set exactly while listed */
};

/* A replica of the log (--ha: the etcd log, ha.c): offered each record made here with its log number; it
 * confirms them through persist_replicated, and replies wait for that too. */
struct persist_replica {
    /* Take record r numbered lsn: 1 taken (to be confirmed), 0 not replicated from here now, -1 out of
     * memory. */
    int (*take)(void *arg, uint64_t lsn, const struct record *r);
    /* Whether records it took are still unconfirmed. */
    int (*pending)(void *arg);
    void *arg;
};

/* Lock the data directory, recover its state into the server and start the writer, taking the live
 * state's records from then on (records_sink); 0 or an exit status.  Without --data-dir: a no-op, or with
 * --ha a memory-only log that only holds replies for etcd. */
int persist_open(struct server *srv);
/* Write out every record still queued, stop the helper threads and free; safe when never opened. */
void persist_close(struct server *srv);
/* Whether state has been recovered (always true without --data-dir). */
int persist_ready(const struct server *srv);
/* Offer every record logged from now on to rep as well (NULL: to none).  A no-op without a log. */
void persist_replica(struct server *srv, const struct persist_replica *rep);
/* Whether a compaction is asked for or running (a test waits for it before closing). */
int persist_compacting(const struct server *srv);
/* etcd confirmed every record up to lsn (--ha: the leader's log append); replies waiting for them go. */
void persist_replicated(struct server *srv, uint64_t lsn);
/* --ha lost leadership with records etcd will not confirm: frames waiting for them are never sent, every
 * other frame goes out from now on. */
void persist_forsake(struct server *srv);
/* Where a connection's next frame goes: bev's output (h->out when bev is NULL), or h's held buffer
 * while logged state is not yet durable.  Every front end sends through this, so no reply can
 * reveal state a crash could lose. */
struct evbuffer *persist_output(struct server *srv, struct persist_hold *h, struct bufferevent *bev);
/* Whether h has frames held back until the log catches up. */
int persist_holding(const struct persist_hold *h);
/* Whether h holds frames that can never go out: the log failed, or etcd will not confirm them. */
int persist_held_for_good(const struct server *srv, const struct persist_hold *h);
/* Forget h's held frames (its connection is being freed). */
void persist_hold_drop(struct server *srv, struct persist_hold *h);

#endif
