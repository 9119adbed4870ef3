/* The op table of the native protocol and the dispatcher that runs its generic checks. */
#ifndef MUSTERD_OPS_H
#define MUSTERD_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "muster.pb-c.h"
#include "oplist.h"

struct conn;

/* Handle one request whose generic checks passed; answer through conn_reply (now or later). */
typedef void (*op_handler)(struct conn *c, Muster__Request *req);

/* What a generic field check verifies. */
enum op_check {
    OPC_NONE,
    OPC_KEY,    /* char *: non-empty, <= --max-key */
    OPC_PREFIX, /* char *: may be empty, <= --max-key */
    OPC_KEYS,   /* repeated string: 1..--max-keys-per-request keys, each an OPC_KEY */
    OPC_VALUE,  /* bytes: <= --max-value */
    OPC_VALUES, /* repeated bytes: <= --max-keys-per-request values, each an OPC_VALUE */
};

/* One field check: kind, the field's offset in the op's message, and for repeated fields the
 * offset of the array (off holds the count). */
struct op_field {
    enum op_check kind;
    uint16_t off;
    uint16_t off2;
    const char *what; /* field name for messages */
};

#define OPS_MAX_FIELDS 3
/* Table slots: Request op cases are below this. */
#define OPS_SLOTS 64

/* One op: name and flags (OPL_ bits) from the op list (proto/oplist.h), handler and checks from ops.c. */
struct op_row {
    const char *name;
    op_handler fn;
    unsigned flags;
    struct op_field fields[OPS_MAX_FIELDS];
};

/* The row for a Request op case, or NULL. */
const struct op_row *ops_row(unsigned op_case);
/* The name of an op case, or NULL when the table has no row for it. */
const char *ops_name(unsigned op_case);
/* Run generic checks and the handler for one request from c, taken off the wire at monotonic time t0 (ns):
 * the op's latency runs from t0 to the handler's return. */
void ops_dispatch(struct conn *c, Muster__Request *req, uint64_t t0);

#endif
