/* Rendezvous internals shared by rdzv.c (rounds, generations), rdzv_node.c (a connection's node: joins,
 * leaves, heartbeats) and rdzv_recover.c (recovery rounds, standbys, reports): the state's structs and the
 * helpers they use.  Not for other files. */
#ifndef MUSTERD_RDZV_INT_H
#define MUSTERD_RDZV_INT_H

#include <stddef.h>
#include <stdint.h>
#include <uthash.h>

#include "core.h"
#include "rdzv.h"

/* Where a node's parked join waits. */
enum rdzv_queue {
    RDZV_Q_NONE = 0, /* nothing parked */
    RDZV_Q_ROUND,    /* the open round (rz->round) */
    RDZV_Q_RECOVER,  /* the recovery round of the latest generation (rz->rec) */
    RDZV_Q_STANDBY,  /* the standbys (rz->standbys) */
};

/* The steps of forming a generation, timed apart for the log (musterd's share of a recovery): checking
 * ids, taking the nodes out of their queues, making them members, storing the answer and the generation
 * key, and queueing every node's reply. */
enum rdzv_form_step {
    RDZV_FORM_IDS,
    RDZV_FORM_QUEUES,
    RDZV_FORM_MEMBERS,
    RDZV_FORM_ANSWER,
    RDZV_FORM_REPLIES,
    RDZV_FORM_STEPS
};

/* A rank that no generation gave (a newcomer's old rank). */
#define RDZV_NO_RANK UINT32_MAX
/* A node credential's length: 128 random bits in hex. */
#define RDZV_CRED_LEN 32
/* The longest cause kept for an excluded member. */
#define RDZV_CAUSE_MAX 191

/* One owner's rendezvous state: a pending join and/or a membership. */
struct rdzv_node {
    struct rdzv_node *prev, *next; /* every node of the namespace */
    struct rdzv_owner owner;
    struct rdzv *rz;
    char id[RDZV_ID_MAX + 1];
    uint32_t lws;
    int want_members;              /* its join asked for the member list */
    int joining;                   /* parked in one of the queues */
    enum rdzv_queue queue;         /* which one */
    uint64_t seq;                  /* when it was parked (arrival order, the longest-waiting first) */
    uint64_t join_id;              /* the parked request */
    struct core_timer *join_timer;
    uint32_t armed_ms;             /* an armed recovery's timeout_ms, counted from the break */
    uint64_t generation;           /* of its latest membership; 0 = never a member */
    uint32_t node_rank, rank_start;
    uint32_t old_rank;             /* its rank in the generation before (recovery rounds), or RDZV_NO_RANK */
    int lost;                      /* lost from its generation (excluded: rz->gone says why) */
    int broke;                     /* its loss is what broke that generation (the first loss) */
    uint64_t told_gen;             /* the generation whose break it was told (MEMBER_LOST, once each) */
    uint64_t seen_ms;              /* wall-clock time of its last join or heartbeat (for timeouts' words) */
    char suspect_by[RDZV_ID_MAX + 1]; /* the member whose report of it awaits a second vote ("" none) */
    struct core_timer *hb_timer;
    UT_hash_handle hh_round;       /* in rz->round_ids while in the open round */
    char cred[RDZV_CRED_LEN + 1];  /* its credential, made when it first becomes a member ("" before) */
    UT_hash_handle hh_cred;        /* in rz->creds once it has one */
};

/* A growable array of node pointers. */
struct rdzv_set {
    struct rdzv_node **v;
    size_t n, cap;
};

/* A member of the latest generation that was lost, and why. */
struct rdzv_gone {
    char id[RDZV_ID_MAX + 1];
    uint32_t old_rank;
    int broke; /* the loss that broke the generation; later ones are survivors that went after it */
    char cause[RDZV_CAUSE_MAX + 1];
};

/* A namespace's rendezvous state. */
struct rdzv {
    struct ns *ns;
    struct rdzv_node *nodes;   /* every node record */
    struct rdzv_set round;     /* the open round's joiners */
    struct rdzv_node *round_ids; /* the same joiners by id, so a join checks its id in O(1) */
    struct rdzv_node *creds;   /* nodes by credential, for the workers' writes (rdzv_keys.c) */
    uint32_t min, max, last_call_ms;
    struct core_timer *last_call;
    uint64_t generation;       /* the latest generation formed; 0 = none yet */
    uint32_t gen_min, gen_max, gen_last_call; /* the bounds that generation formed under */
    struct rdzv_set members;   /* that generation's members */
    size_t live_members;       /* of them, those not lost (a member that joins a round again is lost) */
    uint64_t broke_us;         /* when it broke (monotonic), for the recovery's timings */
    uint64_t told_us;          /* how long telling the break to the armed members took (rdzv_recover.c) */
    uint64_t form_us[RDZV_FORM_STEPS]; /* the last formation's steps, in microseconds (rdzv_form) */
    size_t round_members;      /* joiners of the open round that are members of that generation */
    int running;               /* the latest generation is running (not broken) */
    int completed;             /* every member of the latest generation left finished */
    uint64_t failures;         /* generations broken */
    uint64_t formed;           /* generations formed since the daemon started */
    uint64_t recoveries;       /* of those, formed by a recovery round */
    uint32_t world;            /* world size of the latest generation */
    uint64_t seq;              /* the last parked join's arrival number */
    struct rdzv_set standbys;  /* parked standbys, in arrival order */
    struct rdzv_set rec;       /* survivors parked in the latest generation's recovery round */
    int rec_open;              /* that round is open */
    int rec_closing;           /* it is being closed (losses then do not re-enter it) */
    size_t rec_missing;        /* survivors of the latest generation not in it (neither lost nor joined) */
    unsigned rec_extended;     /* times another loss extended it */
    int rec_short;             /* every survivor is in, but below min_nodes: it waits for newcomers */
    struct core_timer *rec_timer; /* its deadline */
    struct core_timer *rec_defer; /* the end of the turn of a break with armed members (rdzv_recover.c) */
    int rec_deferred;          /* that turn is not over: the round waits, its members' loss events too */
    uint64_t rec_deadline_ms;  /* that deadline as wall-clock time (for status pages) */
    uint64_t gone_gen;         /* the generation the gone list is about */
    struct rdzv_gone *gone;    /* its members lost so far, in order of loss */
    size_t n_gone, cap_gone;
    struct rdzv_event *ring;   /* the timeline, a ring of ring_cap events: allocated at the first event and
                                  doubled as it fills, up to RDZV_RING (most jobs record a handful) */
    size_t ring_cap, ring_next, ring_n;
};

/* Append a node to a set; 0, or -1 when memory ran out. */
int rdzv_set_add(struct rdzv_set *s, struct rdzv_node *n);
/* Remove a node from a set (order kept); a no-op when absent. */
void rdzv_set_del(struct rdzv_set *s, const struct rdzv_node *n);
/* The core of a namespace's rendezvous state. */
struct core *rdzv_core(const struct rdzv *rz);
/* Wall-clock milliseconds, from the core's hook when there is one. */
uint64_t rdzv_wall_ms(const struct rdzv *rz);
/* Record one timeline event in the job's ring (what: len bytes, may be NULL; cause may be NULL). */
void rdzv_event(struct rdzv *rz, enum rdzv_event_kind kind, uint64_t gen, const char *what, size_t len,
                const char *cause);
/* Arm a timer for ms milliseconds from now. */
void rdzv_arm(const struct rdzv *rz, struct core_timer *t, uint64_t ms);
/* Answer a node's join request id through its owner. */
void rdzv_reply(struct rdzv_node *n, uint64_t id, int status, const char *msg, const struct rdzv_assignment *a);
/* Tell a node's owner of a membership event. */
void rdzv_push(struct rdzv_node *to, int kind, uint64_t gen, const char *node_id);
/* The namespace's rendezvous state, created on first use; NULL when memory ran out. */
struct rdzv *rdzv_of(struct ns *ns);
/* The set a node's queue keeps its parked nodes in. */
struct rdzv_set *rdzv_queue_set(struct rdzv *rz, enum rdzv_queue q);
/* Take a node out of its queue and release its parked request (no reply here). */
void rdzv_unpark(struct rdzv_node *n);
/* Free a node record that is neither joining nor a live member (rdzv_node.c). */
void rdzv_node_free(struct rdzv_node *n);
/* Put node n into queue q with its request id and deadline; a core status with msg filled. */
int rdzv_park(struct rdzv_node *n, enum rdzv_queue q, const struct rdzv_join_req *j, uint64_t id, char *msg,
              size_t len);
/* Form the next generation from the nodes in order (sorted by id first unless keep_order) and answer
 * them all; prev is the generation a recovery round replaces (0 otherwise). */
void rdzv_form(struct rdzv *rz, struct rdzv_set *nodes, int keep_order, uint64_t prev);
/* Take up to want standbys, longest waiting first, out of their queue into to; how many. */
size_t rdzv_take_standbys(struct rdzv *rz, struct rdzv_set *to, size_t want);
/* Decide what the open round does now: close, start or keep its last call, or wait. */
void rdzv_round_check(struct rdzv *rz);
/* Member lost of the latest generation (known as id) is gone for why: break the generation if it runs,
 * record the loss, tell the other members, and let a recovery round go on without it. */
void rdzv_lose(struct rdzv *rz, struct rdzv_node *lost, const char *id, const char *why);

/* Break the running generation: not running, counted, its heartbeats stopped, the broken key set. */
void rdzv_break(struct rdzv *rz, const char *id, const char *why);
/* Words for n's timed-out join: who joined the round, and which members of the generation before have
 * not come back, with when each was last seen (rdzv_view.c). */
void rdzv_who(const struct rdzv_node *n, char *buf, size_t len);

/* Give each node of nodes that has no credential yet its own (rdzv_keys.c). */
void rdzv_keys_credentials(const struct rdzv_set *nodes);
/* Forget node n's credential (it is being freed). */
void rdzv_keys_forget(struct rdzv_node *n);

/* Store the latest generation's world-change answer before its generation key (rdzv_answer.c); mv: its
 * members as rdzv_form listed them (NULL when memory ran out). */
void rdzv_answer_publish(struct rdzv *rz, uint32_t world, uint64_t prev, const struct answer_member *mv);
/* The members of the latest generation as the answer and the joins' replies list them, built once per
 * generation (NULL when memory ran out). */
struct answer_member *rdzv_answer_members(const struct rdzv *rz);
/* Answer each member of the new generation with its assignment (members share mv; NULL: out of memory). */
void rdzv_answer_joins(struct rdzv *rz, uint32_t world, uint64_t prev, const struct answer_member *mv);

/* Recovery rounds, losses, standbys and reports (rdzv_recover.c). */
/* Join the latest generation's recovery round for n; a core status with msg filled when not parked. */
int rdzv_recover_join(struct rdzv_node *n, const struct rdzv_join_req *j, uint64_t id, char *msg, size_t len);
/* Keep the open round's count of missing survivors: member n of the latest generation joined the round
 * (joined > 0), left it still a survivor (joined < 0), or was lost while not in it (joined 0). */
void rdzv_recover_moved(struct rdzv *rz, const struct rdzv_node *n, int joined);
/* Member lost of the latest generation was lost (why) while its recovery round may be open. */
void rdzv_recover_lost(struct rdzv *rz, struct rdzv_node *lost, const char *why);
/* The latest generation just broke: open its recovery round for the members that armed theirs. */
void rdzv_recover_open_armed(struct rdzv *rz);
/* A member that armed its recovery joins the plain round (j): its armed join is answered CONFLICT. */
void rdzv_recover_disarm(struct rdzv_node *n, const struct rdzv_join_req *j);
/* A node arrived that a recovery round could admit (a newcomer or a standby): it may close now. */
void rdzv_recover_check(struct rdzv *rz);
/* Free the recovery round's timer (at exit). */
void rdzv_recover_destroy(struct rdzv *rz);

#endif
