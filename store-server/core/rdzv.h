/* Rendezvous: rounds, generations and heartbeats per namespace; owners are told through callbacks. */
#ifndef MUSTERD_RDZV_H
#define MUSTERD_RDZV_H

#include <stddef.h>
#include <stdint.h>

#include "answer.h"

struct ns;
struct rdzv_node;
struct rdzv_excluded;

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
    RDZV_EV_LOST,            /* a further member lost after the break (the first is RDZV_EV_FAILED) */
    RDZV_EV_RECOVERY_OPENED, /* a survivor opened the broken generation's recovery round */
    RDZV_EV_EXCLUDED,        /* a recovery round closed without a member of the generation it replaces */
    RDZV_EV_RECOVERED,       /* a recovery round formed the next generation */
    RDZV_EV_RECOVERY_FAILED, /* a recovery round gave up (too few nodes at its deadline) */
};
/* Bytes kept of an event's cause (longer causes are cut). */
#define RDZV_EVENT_CAUSE 128
/* Events kept per job (older ones are overwritten). */
#define RDZV_RING 64

/* One timeline event: wall-clock time, generation, kind, the node id or key it concerns and why ("" when
 * the kind says it all). */
struct rdzv_event {
    uint64_t wall_ms;
    uint64_t generation;
    enum rdzv_event_kind kind;
    char what[RDZV_ID_MAX + 1];
    char cause[RDZV_EVENT_CAUSE];
};

/* A job's rendezvous summary for metrics and status pages. */
struct rdzv_info {
    uint64_t generation; /* latest formed; 0 = none */
    int running;
    int completed; /* every member of the latest generation left finished */
    size_t members, joining;
    uint32_t world_size;
    uint64_t failures;
    uint64_t formed;        /* generations formed since the daemon started */
    uint64_t recoveries;    /* of those, formed by a recovery round */
    size_t standbys;        /* parked standbys */
    int recovering;         /* the latest generation's recovery round is open */
    size_t recovery_joined; /* survivors parked in it */
    size_t armed;           /* members of the running generation that armed their recovery */
    uint64_t recovery_deadline_ms; /* wall-clock time it closes at the latest (0 when not open) */
};

/* A node as a status page shows it: a member of the latest generation, a joiner or a standby. */
struct rdzv_node_view {
    const char *node_id;
    const char *peer;          /* its owner's address, NULL when unknown */
    uint32_t node_rank, rank_start, local_world_size;
    uint32_t old_node_rank;    /* its rank in the generation a recovery replaced, or UINT32_MAX */
    uint64_t seen_ms;          /* wall-clock time of its last join or heartbeat */
    uint64_t seen_age_ms;      /* how long ago that was */
    int lost;                  /* lost from its generation */
    int broke;                 /* that loss broke the generation (lost later: it went after the break) */
    int recovering;            /* parked in the recovery round */
    int joining;               /* parked in the open round */
    int standby;               /* parked as a standby */
};

/* One member of the latest generation, as reported by rdzv_each_member. */
typedef void (*rdzv_member_fn)(void *arg, const char *node_id, uint32_t node_rank, uint32_t rank_start,
                               uint32_t local_world_size);

/* A node of a status page's list. */
typedef void (*rdzv_view_fn)(void *arg, const struct rdzv_node_view *v);

/* Fill *out for ns; 0, or -1 when the job never used rendezvous. */
int rdzv_info(const struct ns *ns, struct rdzv_info *out);
/* Whether ns's rendezvous is in use: a node (member, joiner, standby), a running generation or an open
 * recovery round.  A generation that broke or completed with no node left is not. */
int rdzv_in_use(const struct ns *ns);
/* Call fn for each member of ns's latest generation in rank order. */
void rdzv_each_member(const struct ns *ns, rdzv_member_fn fn, void *arg);
/* Call fn with a view of each member of ns's latest generation in rank order. */
void rdzv_each_member_view(const struct ns *ns, rdzv_view_fn fn, void *arg);
/* Call fn with a view of each node parked in ns's open round, in arrival order. */
void rdzv_each_joiner(const struct ns *ns, rdzv_view_fn fn, void *arg);
/* Call fn with a view of each parked standby of ns, longest waiting first. */
void rdzv_each_standby(const struct ns *ns, rdzv_view_fn fn, void *arg);
/* Call fn for each member lost from generation *gen (set to it; 0 when none) with its rank and cause:
 * the excluded list of that generation's recovery. */
void rdzv_each_gone(const struct ns *ns, uint64_t *gen, void (*fn)(void *arg, const struct rdzv_excluded *e),
                    void *arg);
/* Call fn for each kept timeline event of ns, oldest first. */
void rdzv_each_event(const struct ns *ns, void (*fn)(void *arg, const struct rdzv_event *ev), void *arg);
/* Note a key write: an NCCL id key (nccl/<gen>/...) becomes an id-published event. */
void rdzv_note_key(struct ns *ns, const char *key, size_t klen);
/* Raise ns's generation counter to at least gen (recovery), so no number is reused. */
void rdzv_restore_generation(struct ns *ns, uint64_t gen);
/* The latest generation counter of ns (0 = none). */
uint64_t rdzv_generation(const struct ns *ns);

/* Membership event kinds, the numbers of MembershipEvent.Kind on the wire (op_rdzv.c checks). */
enum rdzv_member_event { RDZV_MEMBER_LOST = 0, RDZV_NODE_WAITING = 1 };


/* A member of the generation a recovery replaced that the new one left out, and why. */
struct rdzv_excluded {
    const char *node_id;
    uint32_t old_node_rank;
    const char *cause;
    int broke_generation; /* its loss broke the generation; 0: a survivor that went after the break */
};

/* A join's answer: the node's place in the new generation (members only when the join asked). */
/* What the answers of one formation share (the member list, packed once), made by the owner on the first
 * answer that needs it and released by the core after the last answer. */
struct rdzv_shared {
    void *p;
    void (*release)(void *p);
};

struct rdzv_assignment {
    uint64_t generation;
    uint32_t node_rank, num_nodes, rank_start, local_world_size, world_size;
    const char *node_id;
    size_t n_members;
    const struct answer_member *members; /* the world-change answer's own records (old_rank: the node's
                                            rank in the generation a recovery replaced, or UINT32_MAX) */
    uint64_t previous_generation; /* recovery: the generation replaced; 0 otherwise */
    uint32_t old_node_rank;       /* recovery: this node's rank in it; UINT32_MAX otherwise */
    size_t n_excluded;            /* recovery: its members left out */
    const struct rdzv_excluded *excluded;
    const char *credential;       /* the node's credential, for the workers its launcher starts */
    struct rdzv_shared *shared;   /* the formation's slot for what its answers share */
};

/* What a join asks for (the wire's RdzvJoinReq; rdzv_join clamps timeout_ms with core_timeout). */
struct rdzv_join_req {
    const char *node_id; /* "" for one the core makes up */
    uint32_t local_world_size, min_nodes, max_nodes, last_call_ms, timeout_ms;
    int want_members;
    int recover; /* join the latest generation's recovery round (this node was a member) */
    int standby; /* wait as a standby */
    int armed;   /* with recover, while the generation runs: park until it breaks (RdzvJoinReq.armed) */
};

/* How the core talks to whoever owns a node (a connection of the native protocol). */
struct rdzv_owner_ops {
    /* Join id is parked now (the owner's cancel calls rdzv_join_cancel(n)); 0, or -1 when it cannot be. */
    int (*park)(void *owner, uint64_t id, struct rdzv_node *n);
    /* Join id is no longer parked (an answer follows, unless the owner is going away). */
    void (*unpark)(void *owner, uint64_t id);
    /* Answer join id: OK with a, or an error status with msg. */
    void (*reply)(void *owner, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a);
    /* Tell the owner's node of a membership event (enum rdzv_member_event) of generation gen. */
    void (*event)(void *owner, int kind, uint64_t gen, const char *node_id);
    /* Whether the owner can still be answered. */
    int (*live)(void *owner);
    /* The owner's address as text, for status pages (may be NULL: unknown). */
    const char *(*peer)(void *owner);
};

/* The owner of a node: its callbacks, where it keeps its node pointer (cleared when the node is freed),
 * its session id (for made-up node ids) and its count of parked requests (or NULL). */
struct rdzv_owner {
    const struct rdzv_owner_ops *ops;
    void *arg;
    struct rdzv_node **slot;
    uint64_t session_id;
    struct core_share *share;
};

/* Join ns's next round for owner (its node made on first use, *owner->slot); the answer comes through
 * reply, maybe before this returns.  Not OK (msg filled): nothing was parked, the caller answers. */
int rdzv_join(struct ns *ns, const struct rdzv_owner *owner, const struct rdzv_join_req *j, uint64_t id,
              char *msg, size_t len);
/* Member n (not NULL) says member node_id of its generation failed (cause: free text): that member is
 * lost, as if its connection closed.  OK (*gen: the generation), or NOT_MEMBER / NOT_FOUND with msg
 * filled (counted). */
int rdzv_report(struct rdzv_node *n, const char *node_id, const char *cause, uint64_t *gen, char *msg, size_t len);
/* Whether a client may write key (klen bytes) in ns: CORE_OK, or CORE_FORBIDDEN with msg filled.  Keys
 * under muster/rdzv/ are musterd's alone; in a namespace that has formed a generation, nccl/<g>/ and
 * muster/run/<g>/ keys are written only by live members of generation g (own: the connection's node, may
 * be NULL) and by connections presenting such a member's credential (cred, "" or NULL for none). */
int rdzv_keys_may_write(const struct ns *ns, const struct rdzv_node *own, const char *cred, const char *key,
                        size_t klen, char *msg, size_t len);

/* The generation a connection waits for as a member (own: its node, may be NULL) or as a worker of one
 * (cred); 0 when neither is a live member of the latest generation. */
uint64_t rdzv_keys_member_generation(const struct ns *ns, const struct rdzv_node *own, const char *cred);
/* Whether generation gen of ns has formed and ended (broken, completed or replaced). */
int rdzv_generation_ended(const struct ns *ns, uint64_t gen);
/* The node whose loss broke generation gen, and its rank in it; 0, or -1 when that is not known. */
int rdzv_broken_by(const struct ns *ns, uint64_t gen, const char **node_id, uint32_t *rank);

/* End node n's membership (a parked join is answered NOT_MEMBER first); n is freed. */
void rdzv_leave(struct rdzv_node *n, int finished);
/* Keep n's membership of generation gen alive; OK, or NOT_MEMBER / STALE_GENERATION with msg filled. */
int rdzv_heartbeat(struct rdzv_node *n, uint64_t gen, char *msg, size_t len);
/* The owner dropped n's parked join (its connection is closing): n leaves the round silently. */
void rdzv_join_cancel(struct rdzv_node *n);
/* The owner is going away: n's parked join and membership end (breaking its generation); n is freed. */
void rdzv_node_gone(struct rdzv_node *n);
/* The server is draining: answer parked joins of ns with SHUTTING_DOWN. */
void rdzv_shutdown(struct ns *ns);
/* Free ns->rdzv (at exit), detaching any owner still pointing into it. */
void rdzv_ns_destroy(struct ns *ns);

#endif
