/*
 * libmuster rendezvous: agree with other nodes of a job on a generation,
 * node ranks and global ranks.  The daemon decides; see proto/muster.proto.
 *
 * A node joins with muster_rdzv_join(); the call returns when the round
 * closes (max_nodes joined, or min_nodes and last_call_ms passed) with an
 * assignment every member received at the same moment.  Membership lasts
 * while the handle's connection is open and heartbeats arrive within the
 * server's heartbeat timeout (muster_rdzv_heartbeat_interval() says how
 * often to send one).  Heartbeats are the CALLER's job: the library starts
 * no threads.  Call muster_rdzv_heartbeat() from your loop, and poll
 * muster_fd() for readability to receive membership events through
 * muster_next_event() (MUSTER_EVENT_MEMBER_LOST, MUSTER_EVENT_NODE_WAITING).
 *
 * One handle holds at most one membership.  Use a separate handle for
 * key-value traffic that may block, so a long wait does not delay a
 * heartbeat.
 *
 * Rounds: the first joiner of a round sets its min_nodes, max_nodes and
 * last_call_ms; a later joiner with other min/max, or with a node id already
 * in the round, gets MUSTER_ECONFLICT.  A round never closes while a
 * generation of the job runs: a node joining then waits, and the members get
 * MUSTER_EVENT_NODE_WAITING (generation = theirs, node_id = the newcomer).
 * A join from a member of the running generation ends that generation (the
 * others get MUSTER_EVENT_MEMBER_LOST naming it) and enters the next round
 * in the same step, which is how members re-form.  Nodes are ranked in byte
 * order of node_id.
 *
 * Recovery without restarting: when a generation breaks, its survivors
 * may call muster_rdzv_recover() instead of joining again.  The daemon
 * forms the next generation once every survivor has called it (or at its
 * --recovery-timeout, excluding the absent), keeping the survivors' order
 * from the broken generation (old ranks in old_node_rank), then newcomers,
 * then standbys, and lists the excluded members with their causes; every
 * node receives the same generation, order and excluded list.  A member
 * that was excluded gets MUSTER_EEXCLUDED and may only join again as a
 * newcomer.  A member that sees a peer fail before the daemon does says so
 * with muster_rdzv_report().  A node that joins with opts.standby set waits
 * as a spare: it never counts for min_nodes or max_nodes and is admitted,
 * longest waiting first, when a round has room.
 *
 * Keys: the daemon sets muster/rdzv/generation (the latest generation, in
 * decimal) when a round closes, and muster/rdzv/<generation>/broken (the
 * lost node's id) when a generation breaks, so processes that are not
 * members (workers) can wait for or watch them.
 */
#ifndef MUSTER_RDZV_H
#define MUSTER_RDZV_H

#include <muster/muster.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct muster_member {
    char node_id[128];
    uint32_t node_rank;
    uint32_t rank_start;
    uint32_t local_world_size;
    uint32_t old_node_rank;     /* recovery: its rank in previous_generation; UINT32_MAX for a newcomer */
} muster_member;

/* A member of the previous generation that a recovery left out, and why. */
typedef struct muster_excluded {
    char node_id[128];
    uint32_t old_node_rank;
    char cause[192];            /* "closed its connection", "missed its heartbeats", "reported failed by ..." */
} muster_excluded;

/* What a round decided.  Free with muster_assignment_free(). */
typedef struct muster_assignment {
    uint64_t generation;
    char node_id[128];          /* this node's id */
    uint32_t node_rank;
    uint32_t num_nodes;
    uint32_t rank_start;        /* global rank of this node's local rank 0 */
    uint32_t local_world_size;
    uint32_t world_size;
    size_t n_members;           /* 0 unless the join set want_members */
    muster_member *members;     /* ordered by node_rank; NULL unless the join set want_members */
    uint64_t previous_generation; /* recovery: the generation this one replaces; 0 otherwise */
    uint32_t old_node_rank;     /* recovery: this node's rank in it; UINT32_MAX otherwise */
    size_t n_excluded;          /* recovery: members of previous_generation left out */
    muster_excluded *excluded;  /* NULL when none */
    char credential[40];        /* this node's credential: a connection that presents it (libmuster sends
                                   $MUSTER_CREDENTIAL in its hello; `muster run` sets it for its workers)
                                   may write the keys of the generations this node is a live member of,
                                   nccl/<g>/ and muster/run/<g>/, which others may not ("" when none) */
} muster_assignment;

typedef struct muster_rdzv_opts {
    const char *node_id;        /* at most 127 bytes; NULL/"" = server-chosen, unique in the round */
    uint32_t local_world_size;  /* >= 1 */
    uint32_t min_nodes;         /* >= 1 */
    uint32_t max_nodes;         /* >= min_nodes */
    uint32_t last_call_ms;      /* wait after min is reached for more nodes (0: close at min) */
    int want_members;           /* nonzero: the assignment lists every member (O(nodes) bytes per
                                   joiner, O(nodes^2) per round); 0: only this node's own place */
    int standby;                /* nonzero: wait as a standby (never counted for min/max) */
} muster_rdzv_opts;

/* Join the job's next round and wait (up to timeout_ms, server-enforced)
 * for its assignment; *out is caller-owned (muster_assignment_free). */
MUSTER_API int muster_rdzv_join(muster_t *m, const muster_rdzv_opts *opts, muster_assignment **out,
                                uint32_t timeout_ms);
/* Join the recovery round of the generation this handle was a member of (it broke) and wait for the
 * agreed next generation; opts gives local_world_size and want_members (min/max are the generation's).
 * MUSTER_EEXCLUDED: this node was left out, or its handle failed over to a new connection (join again as
 * a newcomer); MUSTER_ECONFLICT: the generation still runs; MUSTER_ETIMEDOUT: too few nodes to go on. */
MUSTER_API int muster_rdzv_recover(muster_t *m, const muster_rdzv_opts *opts, muster_assignment **out,
                                   uint32_t timeout_ms);
/* Arm this member's recovery while its generation runs: the recover join is sent now and parks at the
 * daemon until the generation breaks, where it counts as this node's join of the recovery round (timeout_ms
 * then counts from the break).  Returns at once (MUSTER_ENOTMEMBER: not a member; MUSTER_ECONN: the
 * connection is down); arming twice for one generation is a no-op.  After MUSTER_EVENT_MEMBER_LOST,
 * muster_rdzv_recover takes the armed call's answer instead of sending a join: when every survivor
 * armed, the daemon agrees in the turn of the break and each survivor's recovery costs one message.
 * muster_rdzv_join, leave and finish drop an armed recovery. */
MUSTER_API int muster_rdzv_arm(muster_t *m, const muster_rdzv_opts *opts, uint32_t timeout_ms);
/* Report that member node_id of this handle's generation failed (cause: free text, may be NULL).  A vote:
 * the generation breaks and that member is excluded once a second member reports it, or it reports
 * itself, or its heartbeats have been silent for half the heartbeat timeout; until then the vote is held
 * and nothing changes (muster.proto, RdzvReportReq).  MUSTER_ENOTFOUND: no such member. */
MUSTER_API int muster_rdzv_report(muster_t *m, const char *node_id, const char *cause, uint32_t timeout_ms);
/* Tell the server this member is alive; MUSTER_ESTALE when its generation broke,
 * MUSTER_ENOTMEMBER when this handle never joined (or left). */
MUSTER_API int muster_rdzv_heartbeat(muster_t *m, uint64_t generation, uint32_t timeout_ms);
/* How often to heartbeat (a third of the server's heartbeat timeout), in ms. */
MUSTER_API uint32_t muster_rdzv_heartbeat_interval(const muster_t *m);
/* Leave the job; the generation, if running, breaks for the others.
 * MUSTER_ENOTMEMBER when this handle never joined. */
MUSTER_API int muster_rdzv_leave(muster_t *m, uint32_t timeout_ms);
/* Leave the job having finished its work: the generation does not break, and
 * once every member has finished it counts as completed, not failed.
 * MUSTER_ENOTMEMBER when this handle never joined. */
MUSTER_API int muster_rdzv_finish(muster_t *m, uint32_t timeout_ms);
/* The part of generation's world-change answer (musterd stores it when it forms a generation, see
 * muster/world.h) that node node_id got, members and excluded list with causes included, for a
 * generation formed by a recovery round.  Waits up to timeout_ms for the key (0: not at all).  *out is
 * caller-owned (muster_assignment_free).  MUSTER_ENOTFOUND: the generation was formed by a plain round
 * (no recovery), or has not formed yet; MUSTER_EEXCLUDED: the recovery left this node out (or it is not
 * a member); MUSTER_EPROTO: the key holds something else.  muster_world_next is the whole worker side. */
MUSTER_API int muster_run_answer(muster_t *m, uint64_t generation, const char *node_id, muster_assignment **out,
                                 uint32_t timeout_ms);
/* Free an assignment; NULL is a no-op. */
MUSTER_API void muster_assignment_free(muster_assignment *a);

#ifdef __cplusplus
}
#endif
#endif
