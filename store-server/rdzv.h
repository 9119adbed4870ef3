/* Server-side rendezvous: the op table's rdzv rows and the hooks the core calls. */
#ifndef MUSTERD_RDZV_H
#define MUSTERD_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "muster.pb-c.h"

struct conn;
struct ns;

/* The longest node id, in bytes (the client's fixed field holds this plus a NUL). */
#define RDZV_ID_MAX 127
/* Bounds on join parameters, so world sizes stay far from overflow. */
#define RDZV_MAX_NODES 1000000u
#define RDZV_MAX_LOCAL 1000000u

/* What a timeline event of a job records. */
enum rdzv_event_kind {
    RDZV_EV_JOINED,
    RDZV_EV_ASSIGNED,
    RDZV_EV_ID_PUBLISHED,
    RDZV_EV_FAILED,
    RDZV_EV_LEFT,
    RDZV_EV_COMPLETED,
};
/* Events kept per job (older ones are overwritten). */
#define RDZV_RING 64

/* One timeline event: wall-clock time, generation, kind and the node id or key it concerns. */
struct rdzv_event {
    uint64_t wall_ms;
    uint64_t generation;
    enum rdzv_event_kind kind;
    char what[RDZV_ID_MAX + 1];
};

/* A job's rendezvous summary for metrics and status pages. */
struct rdzv_info {
    uint64_t generation; /* latest formed; 0 = none */
    int running;
    int completed; /* every member of the latest generation left finished */
    size_t members, joining;
    uint32_t world_size;
    uint64_t failures;
};

/* One member of the latest generation, as reported by rdzv_each_member. */
typedef void (*rdzv_member_fn)(void *arg, const char *node_id, uint32_t node_rank, uint32_t rank_start,
                               uint32_t local_world_size);

/* Fill *out for ns; 0, or -1 when the job never used rendezvous. */
int rdzv_info(const struct ns *ns, struct rdzv_info *out);
/* Call fn for each member of ns's latest generation in rank order. */
void rdzv_each_member(const struct ns *ns, rdzv_member_fn fn, void *arg);
/* Call fn for each kept timeline event of ns, oldest first. */
void rdzv_each_event(const struct ns *ns, void (*fn)(void *arg, const struct rdzv_event *ev), void *arg);
/* Note a key write: an NCCL id key (nccl/<gen>/...) becomes an id-published event. */
void rdzv_note_key(struct ns *ns, const char *key, size_t klen);
/* Raise ns's generation counter to at least gen (recovery), so no number is reused. */
void rdzv_restore_generation(struct ns *ns, uint64_t gen);
/* The latest generation counter of ns (0 = none). */
uint64_t rdzv_generation(const struct ns *ns);

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
