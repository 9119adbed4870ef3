/* The native protocol's barrier op: parks an arrival in the core and answers it on release. */
#ifndef MUSTERD_OP_SYNC_H
#define MUSTERD_OP_SYNC_H

#include "muster.pb-c.h"

struct conn;

/* The barrier op of the native protocol (an op table row). */
void op_sync_barrier(struct conn *c, Muster__Request *req);

#endif
