/* Prefix watches, the native front end's part: the watch and unwatch ops, and the Event{watch} a write
 * or delete of a matching key pushes to the watching connection (the registry is core/watch.c). */
#ifndef MUSTERD_OP_WATCH_H
#define MUSTERD_OP_WATCH_H

#include <stddef.h>

#include "keyspace.h"
#include "muster.pb-c.h"

struct ns;
struct conn;

/* watch: start pushing events for keys with the prefix (an op table row). */
void watch_op_watch(struct conn *c, Muster__Request *req);
/* unwatch: stop one of this connection's watches (an op table row). */
void watch_op_unwatch(struct conn *c, Muster__Request *req);
/* Drop every watch of a closing connection. */
void watch_conn_closed(struct conn *c);

#endif
