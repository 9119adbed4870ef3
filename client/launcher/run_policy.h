/*
 * The launcher's policy: what `muster run` does next, as a state machine
 * with no I/O.  It is fed events (answers to its own actions, and what
 * happened: a worker exited, a member was lost, a signal came) and answers
 * with actions for the effects layer (run_effects.c) to perform.  It opens
 * no socket, starts no process, prints nothing and reads no clock: the time
 * comes with the RUN_EV_TURN event, and messages are notes (RUN_ACT_SAY)
 * that the effects layer words.  tests/unit/test_launcher_policy.c drives it
 * on a fake clock.
 *
 * Facts are noted as they come and decided on at the end of a loop turn
 * (RUN_EV_TURN), so what one turn read is weighed together, in this order:
 * a signal, a failed worker, a node waiting to join (grow), a lost member
 * or store, all workers done.  Growing comes before lost because the other
 * members' re-joins that grow the world also break the generation: a
 * launcher that reads both in one turn must not count a restart.
 *
 *   START --JOIN--> JOINING --JOINED, START--> STARTING --STARTED--> RUNNING
 *   JOINING --JOIN_FAILED / COMPLETED / signal--> ENDED
 *   RUNNING --all exited 0--> FINISHING (or ENDED with one node)
 *   RUNNING, FINISHING --signal / failure / grow / lost--> STOPPING
 *   FINISHING --every node done--> ENDED (exit 0)
 *   STOPPING --all reaped--> after the stop; --grace passed or a new signal--> KILLING
 *   KILLING --all reaped or kill wait passed--> after the stop
 *   after the stop: signal --> ENDED; restarts left or grow --> JOINING; else ENDED
 *
 * With --recovery in-place the workers of a broken generation keep running
 * (run_policy.c says why each way):
 *
 *   START --JOIN(standby)--> STANDBY --JOINED (admitted)--> STARTING
 *   RUNNING, FINISHING --lost, restarts left--> RECOVERING --JOINED--> STARTING (place, replace)
 *   RUNNING --a worker failed, restarts left--> REJOINING --JOINED--> STARTING (place, replace)
 *   RECOVERING --RECOVER_FAILED--> STOPPING (cause lost: re-formed the restart way)
 *   REJOINING --JOIN_FAILED--> STOPPING (cause end: ENDED with the join's status)
 *   RECOVERING, REJOINING --signal--> STOPPING (cause signal)
 */
#ifndef MUSTER_LAUNCHER_RUN_POLICY_H
#define MUSTER_LAUNCHER_RUN_POLICY_H

#include <stdint.h>

/* Most actions one event yields. */
#define RUN_ACTS_MAX 8

/* What the policy needs of the command line. */
struct run_policy_cfg {
    uint32_t max_restarts; /* --max-restarts */
    uint32_t max_nodes;    /* the upper bound of --nnodes: a smaller world grows when a node waits */
    uint32_t grace_ms;     /* --grace: from SIGTERM to SIGKILL */
    uint32_t kill_wait_ms; /* how long killed workers get to be reaped before the launcher goes on */
    int in_place;          /* --recovery in-place: survivors' workers keep running across generations */
    int standby;           /* --standby: the first join waits as a spare until a round admits it */
};

/* Where the launcher is. */
enum run_state {
    RUN_ST_START,     /* nothing done yet */
    RUN_ST_JOINING,   /* a join was asked for and has not been answered */
    RUN_ST_STARTING,  /* joined; the start of the workers has not been answered */
    RUN_ST_RUNNING,   /* this generation's workers run */
    RUN_ST_FINISHING, /* they all exited 0: waiting for every node of the generation to say so */
    RUN_ST_STOPPING,  /* they were signalled: waiting up to --grace for them to exit */
    RUN_ST_KILLING,   /* SIGKILL sent: waiting up to kill_wait_ms */
    RUN_ST_ENDED,     /* exit_code is the launcher's exit status */
    RUN_ST_STANDBY,   /* --standby: the first join waits as a spare until a round admits it */
    RUN_ST_RECOVERING, /* in place: the generation broke; the recovery round was joined, workers run on */
    RUN_ST_REJOINING, /* in place: a local worker failed; re-joining as a newcomer, the others run on */
};

/* Why the workers are being stopped. */
enum run_cause {
    RUN_CAUSE_NONE,
    RUN_CAUSE_SIGNAL,
    RUN_CAUSE_FAILED,
    RUN_CAUSE_GROW,
    RUN_CAUSE_LOST,
    RUN_CAUSE_END, /* a re-join failed while workers ran: end with its status once they are stopped */
};

/* What an event says; the fields of struct run_ev each kind reads are named after it. */
enum run_ev_kind {
    RUN_EV_TURN,         /* now: the end of a loop turn, when decisions are made */
    RUN_EV_JOINED,       /* now, generation, num_nodes, every: the join's answer */
    RUN_EV_JOIN_FAILED,  /* status: the join failed; the launcher ends with status */
    RUN_EV_COMPLETED,    /* the first join found the job completed: nothing to run */
    RUN_EV_STARTED,      /* count workers run; status: a worker that could not start, or 0 */
    RUN_EV_BEAT,         /* now, every, stale: a heartbeat's answer (stale: the generation ended) */
    RUN_EV_WATCHING,     /* the generation's done key is watched */
    RUN_EV_DONE_COUNT,   /* count: the nodes of the generation that are done */
    RUN_EV_WORKER_EXIT,  /* local_rank, status (shell convention: 128+signal when killed) */
    RUN_EV_MEMBER_LOST,  /* generation: a member of it was lost */
    RUN_EV_NODE_WAITING, /* generation: a node waits to join it */
    RUN_EV_BROKEN,       /* the store connection, the private musterd or a store call failed */
    RUN_EV_WATCH_ENDED,  /* the server dropped the done key's watch */
    RUN_EV_SIGNAL,       /* sig: SIGINT or SIGTERM reached the launcher */
    RUN_EV_RECOVER_FAILED, /* status: the recovery round left this node out, timed out or could not be asked */
    RUN_EV_NOT_STAYING,  /* in place: a worker never opened the world (a plain script): recover by restart */
};

/* One event. */
struct run_ev {
    enum run_ev_kind kind;
    uint64_t now;        /* monotonic ms */
    uint64_t generation;
    uint32_t num_nodes;
    uint32_t every;      /* heartbeat interval, ms */
    int64_t count;
    int status;
    int local_rank;
    int sig;
    int stale;
};

/* What the effects layer is asked to do; each answer it owes is named. */
enum run_act_kind {
    RUN_ACT_JOIN,      /* arg RUN_JOIN_FIRST: the first join, which first asks whether the job completed;
                        * RUN_JOIN_STANDBY: as a spare; answer JOINED, JOIN_FAILED or COMPLETED */
    RUN_ACT_START,     /* start the relay and the workers; answer STARTED, then WORKER_EXIT as they exit */
    RUN_ACT_HEARTBEAT, /* answer BEAT, and BROKEN when it failed */
    RUN_ACT_WATCH,     /* watch the done key and add arg (1: this node is done, 0: read it); answer WATCHING
                        * and DONE_COUNT, or BROKEN */
    RUN_ACT_UNWATCH,   /* drop the done key's watch */
    RUN_ACT_REPORT,    /* a worker failed: show the generation's failed workers */
    RUN_ACT_LEAVE,     /* end the membership; arg 1: finished (every local worker succeeded) */
    RUN_ACT_SIGNAL,    /* send signal arg to every running worker's process group */
    RUN_ACT_RELEASE,   /* pass on the workers' last output, free them and stop the relay */
    RUN_ACT_COMPLETE,  /* record that the job completed */
    RUN_ACT_SAY,       /* print note arg (enum run_note) */
    RUN_ACT_EXIT,      /* the launcher ends with status arg */
    RUN_ACT_RECOVER,   /* join the broken generation's recovery round; answer JOINED or RECOVER_FAILED */
    RUN_ACT_REPLACE,   /* start the local ranks that failed, tell the others their new ranks; answer STARTED */
    RUN_ACT_ARM,       /* in place: arm this node's recovery of the running generation (no answer) */
};

/* RUN_ACT_JOIN's arg, bit by bit. */
#define RUN_JOIN_FIRST 1
#define RUN_JOIN_STANDBY 2

/* Messages the policy asks for; the effects layer words them. */
enum run_note {
    RUN_NOTE_LOST,        /* this generation broke: a member was lost */
    RUN_NOTE_GROW,        /* a node waits to join: re-forming to grow the world */
    RUN_NOTE_ENDED,       /* the heartbeat says this generation has ended */
    RUN_NOTE_SIGNAL,      /* got a signal: stopping the workers */
    RUN_NOTE_KILL,        /* workers still run after the grace period: SIGKILL */
    RUN_NOTE_NO_RESTARTS, /* --max-restarts used up: giving up */
    RUN_NOTE_RESTART,     /* restart `restarts` of --max-restarts */
    RUN_NOTE_FINISHED,    /* every worker of every node finished */
    RUN_NOTE_RECOVER,     /* in place: joining the recovery round, workers keep running */
    RUN_NOTE_REPLACE,     /* in place: re-joining to replace the failed worker, the others keep running */
    RUN_NOTE_FALLBACK,    /* in place: the recovery failed; restarting the workers instead */
    RUN_NOTE_STANDBY,     /* --standby: waiting as a spare until a round admits this node */
    RUN_NOTE_NOT_STAYING, /* in place, but a worker does not follow the world: restarting instead (once) */
};

/* One action. */
struct run_act {
    enum run_act_kind kind;
    int arg;
};

/* The actions one event yields, to be performed in order. */
struct run_acts {
    int n;
    struct run_act a[RUN_ACTS_MAX];
};

/* The policy's whole state; the effects layer may read it (restarts, running, generation). */
struct run_policy {
    struct run_policy_cfg cfg;
    enum run_state state;
    enum run_cause cause;   /* STOPPING, KILLING: why */
    int exit_code;          /* ENDED */
    int restarts;           /* restarts used */
    /* The membership. */
    int member;             /* joined and not left: heartbeats are due */
    uint64_t generation;
    uint32_t num_nodes;
    uint32_t every;
    uint64_t next_beat;     /* monotonic ms */
    /* Noted since they were last decided on. */
    enum run_ev_kind answer; /* JOINING, STANDBY, RECOVERING, REJOINING: JOINED, JOIN_FAILED, COMPLETED or
                              * RECOVER_FAILED once answered, else TURN */
    int answer_status;
    int started;            /* STARTING: the start was answered */
    int lost;               /* the generation broke (a member, the store, a heartbeat) */
    int grow;               /* a node waits to join and the world may grow */
    int sig;                /* the last signal */
    int nsig;               /* signals so far */
    /* This generation's workers. */
    int running;
    int failure;            /* status of the first worker that failed, 0 while none */
    /* Finishing. */
    int watching;
    int64_t done;
    /* Stopping. */
    uint64_t deadline;      /* STOPPING: end of --grace; KILLING: end of the kill wait */
    int stop_sig;           /* the signal the stop sent */
    int stop_nsig;          /* nsig when the stop began: a later signal kills at once */
    int stop_failure;       /* failure when the stop began: the exit status if no restart is left */
};

/* Start a policy in RUN_ST_START; its first RUN_EV_TURN asks for the first join. */
void run_policy_init(struct run_policy *p, const struct run_policy_cfg *cfg);
/* Feed one event; out gets the actions it yields (out->n is 0 when none). */
void run_policy_step(struct run_policy *p, const struct run_ev *ev, struct run_acts *out);
/* The monotonic ms of the next timed decision (heartbeat, grace, kill wait), UINT64_MAX when none. */
uint64_t run_policy_wake(const struct run_policy *p);
/* The name of a state, for messages and tests. */
const char *run_policy_state_name(enum run_state s);

#endif
