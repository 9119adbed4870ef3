/* Server-side rendezvous: the op table's rdzv rows and the hooks the core calls. */
#ifndef MUSTERD_RDZV_H
#define MUSTERD_RDZV_H

#include "muster.pb-c.h"

struct conn;
struct ns;

/* The longest node id, in bytes (the client's fixed field holds this plus a NUL). */
#define RDZV_ID_MAX 127
/* Bounds on join parameters, so world sizes stay far from overflow. */
#define RDZV_MAX_NODES 1000000u
#define RDZV_MAX_LOCAL 1000000u

/* rdzv_join: join the namespace's next round; answer later with conn_reply (an op table row). */
void rdzv_op_join(struct conn *c, Muster__Request *req);
/* rdzv_leave: end this connection's membership (an op table row). */
void rdzv_op_leave(struct conn *c, Muster__Request *req);
/* rdzv_heartbeat: keep this connection's membership alive (an op table row). */
void rdzv_op_heartbeat(struct conn *c, Muster__Request *req);
/* A connection is closing: drop its membership or parked join (c->rdzv). */
void rdzv_conn_closed(struct conn *c);
/* The server is draining: answer parked joins of ns with SHUTTING_DOWN. */
void rdzv_shutdown(struct ns *ns);
/* Free ns->rdzv (at exit), detaching any connection still pointing into it. */
void rdzv_ns_destroy(struct ns *ns);

#endif
