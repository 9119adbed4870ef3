/* The one place records map to state and back: apply a record, dump the state as records, and the sink
 * the live state emits its records through. */
#ifndef MUSTERD_RECORDS_H
#define MUSTERD_RECORDS_H

#include "record.h"

struct server;
struct stats;
struct records_img;

/* A state records apply to and are dumped from: the daemon's live namespaces (srv set: their keyspaces and
 * rendezvous generation counters), or a private image (namespaces of keys and a generation counter only:
 * no limits, no change hooks, no sink, safe on any one thread). */
struct records {
    struct server *srv;          /* the live namespaces, or NULL for an image */
    struct records_img *img;     /* an image's namespaces, in creation order */
    struct stats *img_stats;     /* an image's keyspace counters, never reported */
    enum record_origin img_applying; /* an image's records_apply origin (the live one's is the core's) */
};

/* The live state of srv (server.h holds it). */
struct records *records_live(struct server *srv);
/* A new, empty image; NULL when memory ran out. */
struct records *records_image_new(void);
/* Free an image; NULL is fine. */
void records_image_free(struct records *st);

/* Send the live state's records to sink from now on (NULL: nowhere).  The state code emits them through
 * core_emit at the change itself, before any reply or event reveals it. */
void records_sink(struct server *srv, const struct record_sink *sink);

/* Apply r to st (its namespace created on first use); records the change emits reach the sink marked from.
 * 0, or -1 when st refused it (a limit, or memory). */
int records_apply(struct records *st, const struct record *r, enum record_origin from);
/* Call fn with st as records: per namespace, its generation (when non-zero), then a SET per key.  fn must
 * not change st.  0, or the first non-zero return of fn (-1 when memory ran out). */
int records_dump(struct records *st, record_fn fn, void *arg);
/* Delete every key of st (namespaces and generation counters stay), as DEL records applied with from; 0, or
 * -1 when memory ran out and some keys are left. */
int records_clear(struct records *st, enum record_origin from);

#endif
