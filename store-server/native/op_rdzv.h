/* The native protocol's rendezvous ops: a connection owns a core rendezvous node and is answered through it. */
#ifndef MUSTERD_OP_RDZV_H
#define MUSTERD_OP_RDZV_H

#include "muster.pb-c.h"

struct conn;

/* rdzv_join: join the namespace's next round; answered when it closes (an op table row). */
void op_rdzv_join(struct conn *c, Muster__Request *req);
/* rdzv_leave: end this connection's membership (an op table row). */
void op_rdzv_leave(struct conn *c, Muster__Request *req);
/* rdzv_heartbeat: keep this connection's membership alive (an op table row). */
void op_rdzv_heartbeat(struct conn *c, Muster__Request *req);
/* rdzv_report: this member says another member of its generation failed (an op table row). */
void op_rdzv_report(struct conn *c, Muster__Request *req);
/* A connection is closing: drop its membership or parked join (c->rdzv). */
void op_rdzv_conn_closed(struct conn *c);

#endif
