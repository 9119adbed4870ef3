/* Durability (--data-dir): an append-only log of every keyspace change and generation, recovered at start. */
#ifndef MUSTERD_PERSIST_H
#define MUSTERD_PERSIST_H

#include <stddef.h>
#include <stdint.h>

struct server;
struct ns;
struct conn;
struct evbuffer;

/* Lock the data directory, recover its state into the server and start the writer; 0 or an exit status.
 * A no-op without --data-dir. */
int persist_open(struct server *srv);
/* Write out every record still queued, stop the helper threads and free; safe when never opened. */
void persist_close(struct server *srv);
/* Whether state has been recovered (always true without --data-dir). */
int persist_ready(const struct server *srv);
/* Log a keyspace change of ns (deleted, or key now holds val). */
void persist_key(struct ns *ns, int deleted, const char *key, size_t klen, const uint8_t *val, size_t vlen);
/* Log that ns's generation counter reached gen. */
void persist_generation(struct ns *ns, uint64_t gen);
/* Where c's next frame goes: out, or c's held buffer while logged state is not yet durable. */
struct evbuffer *persist_output(struct conn *c, struct evbuffer *out);
/* Whether c has frames held back until the log catches up. */
int persist_holding(const struct conn *c);
/* Forget c's held frames (the connection is being freed). */
void persist_conn_gone(struct conn *c);

#endif
