/*
 * The launcher's policy (run_policy.h has the state diagram): restarts
 * within --max-restarts, re-forming on a membership change, stopping with a
 * grace period, finishing only once every node is done, and the exit
 * status.  Pure: events in, actions out; signal.h only for the numbers.
 *
 * Restarts: a failed worker or a lost member (the generation broke) stops
 * the local workers, leaves, re-joins and starts them again in the next
 * generation, at most --max-restarts times.  Both count as restarts on
 * every node, so all nodes of a job agree on how many failures they have
 * survived.  A node waiting to join while the world is below its maximum
 * size re-forms the world too, but a scale-up uses up no restart.
 *
 * Finishing: when every local worker has exited 0 the node adds itself to
 * the generation's done count and leaves only once all nodes have, because
 * a leave breaks the generation and would make a slower peer restart
 * workers that were about to succeed.
 *
 * In place (--recovery in-place): a broken generation does not stop the
 * workers.  The launcher joins its recovery round (the survivors keep
 * their order) and, once the next generation forms (musterd stores its
 * answer for the workers that run on: muster/world.h), starts only the
 * local ranks that failed (RUN_ACT_REPLACE).  A local worker
 * that failed breaks the generation for every node, because the
 * collective it was in cannot go on without it and no communicator takes
 * a new process in: so the node joins again (a join from a member breaks
 * its generation and enters the next round in one step), the other nodes
 * recover, and this node comes back as a newcomer, after the survivors,
 * with its living workers kept and a fresh process in the failed rank.
 * A user keeps every process that is alive, the world keeps its size,
 * and nothing waits for a spare.  A lost member outranks a local failure
 * within a turn: when both are noted (a peer died and our worker's
 * collective failed with it), this node is a survivor and recovers, and
 * the recovery replaces the failed worker.  Each recovery or re-join
 * counts as a restart, on every node as before; with none left, or when
 * the recovery fails (this node was excluded, too few nodes came), the
 * launcher falls back to stopping its workers as without the mode.  A
 * node waiting to join does not make an in-place world re-form: it is
 * admitted at the next recovery, as a standby is.
 */
#include "run_policy.h"

#include <signal.h>
#include <string.h>

/* Append one action (the table is sized for the longest sequence a step yields). */
static void run_policy_act(struct run_acts *out, enum run_act_kind kind, int arg)
{
    if (out->n < RUN_ACTS_MAX) {
        out->a[out->n].kind = kind;
        out->a[out->n].arg = arg;
        out->n++;
    }
}

/* End the launcher with status. */
static void run_policy_end(struct run_policy *p, int status, struct run_acts *out)
{
    p->state = RUN_ST_ENDED;
    p->exit_code = status;
    run_policy_act(out, RUN_ACT_EXIT, status);
}

/* Ask for a join (flags: RUN_JOIN_FIRST, RUN_JOIN_STANDBY) and wait for its answer in state st. */
static void run_policy_join_as(struct run_policy *p, enum run_state st, int flags, struct run_acts *out)
{
    p->state = st;
    p->answer = RUN_EV_TURN;
    run_policy_act(out, RUN_ACT_JOIN, flags);
}

/* Ask for a join (first: the launcher's first) and wait for its answer. */
static void run_policy_join(struct run_policy *p, int first, struct run_acts *out)
{
    run_policy_join_as(p, RUN_ST_JOINING, first ? RUN_JOIN_FIRST : 0, out);
}

/* The launcher's first join: as a spare with --standby. */
static void run_policy_first_join(struct run_policy *p, struct run_acts *out)
{
    if (!p->cfg.standby) {
        run_policy_join(p, 1, out);
        return;
    }
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_STANDBY);
    run_policy_join_as(p, RUN_ST_STANDBY, RUN_JOIN_FIRST | RUN_JOIN_STANDBY, out);
}

/* Leave the membership, if there is one to leave. */
static void run_policy_leave(struct run_policy *p, int finished, struct run_acts *out)
{
    if (!p->member)
        return;
    p->member = 0;
    run_policy_act(out, RUN_ACT_LEAVE, finished);
}

/* Whether this node's membership wants heartbeats: not once its generation is known broken (it stays
 * a member only to be known as a survivor when it joins again). */
static int run_policy_beating(const struct run_policy *p)
{
    return p->member && !(p->state == RUN_ST_STOPPING && p->cause == RUN_CAUSE_LOST);
}

/* Ask for a heartbeat when one is due. */
static void run_policy_beat(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (!run_policy_beating(p) || now < p->next_beat)
        return;
    /* Until the answer says otherwise; an answer that never comes must not make every turn ask again. */
    p->next_beat = now + p->every;
    run_policy_act(out, RUN_ACT_HEARTBEAT, 0);
}

/* Begin stopping the workers with sig for cause. */
static void run_policy_stop(struct run_policy *p, enum run_cause cause, int sig, uint64_t now, struct run_acts *out)
{
    p->state = RUN_ST_STOPPING;
    p->cause = cause;
    p->stop_sig = sig;
    p->stop_nsig = p->nsig;
    p->stop_failure = p->failure;
    p->deadline = now + p->cfg.grace_ms;
    run_policy_act(out, RUN_ACT_SIGNAL, sig);
}

/* A signal reached the launcher while workers run or finish: pass it on to them, then end. */
static void run_policy_on_signal(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_SIGNAL);
    /* The membership is left after the stop: until then the workers are still this node's. */
    run_policy_stop(p, RUN_CAUSE_SIGNAL, p->sig, now, out);
}

/* This generation broke or failed: when this node's worker failed, leave first, so the other nodes
 * learn of it now and not after our grace period, then stop the workers.  Otherwise stay a member until
 * the re-join: to grow, a join from a member breaks its generation and enters the next round in one
 * step, so the round cannot close without this node; after another node's loss, musterd then knows
 * this node as a survivor of the broken generation, and the round closes as soon as every survivor is
 * back instead of waiting for its last call. */
static void run_policy_break(struct run_policy *p, enum run_cause cause, uint64_t now, struct run_acts *out)
{
    if (cause == RUN_CAUSE_FAILED)
        run_policy_act(out, RUN_ACT_REPORT, 0);
    if (cause != RUN_CAUSE_GROW && cause != RUN_CAUSE_LOST)
        run_policy_leave(p, 0, out);
    run_policy_stop(p, cause, SIGTERM, now, out);
}

/* Every node of the generation is done: record it, leave as finished and end with 0. */
static void run_policy_finished(struct run_policy *p, struct run_acts *out)
{
    run_policy_act(out, RUN_ACT_COMPLETE, 0);
    run_policy_leave(p, 1, out);
    run_policy_act(out, RUN_ACT_RELEASE, 0);
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_FINISHED);
    run_policy_end(p, 0, out);
}

/* Drop the done key's watch, if one is held. */
static void run_policy_unwatch(struct run_policy *p, struct run_acts *out)
{
    if (!p->watching)
        return;
    p->watching = 0;
    run_policy_act(out, RUN_ACT_UNWATCH, 0);
}

/* The workers are gone (or given up on): end, or join the next generation. */
static void run_policy_after_stop(struct run_policy *p, struct run_acts *out)
{
    if (p->cause == RUN_CAUSE_SIGNAL) {
        run_policy_leave(p, 0, out);
        run_policy_act(out, RUN_ACT_RELEASE, 0);
        /* A worker's own failure says more than the signal; a worker the signal ended says the same. */
        run_policy_end(p, p->failure ? p->failure : 128 + p->stop_sig, out);
        return;
    }
    run_policy_act(out, RUN_ACT_RELEASE, 0);
    if (p->cause == RUN_CAUSE_END) {
        run_policy_leave(p, 0, out);
        run_policy_end(p, p->answer_status, out);
        return;
    }
    if (p->sig) {
        /* A signal during a restart's stop ends the launcher instead of the restart. */
        run_policy_end(p, 128 + p->sig, out);
        return;
    }
    if (p->cause != RUN_CAUSE_GROW) {
        if ((uint32_t)p->restarts >= p->cfg.max_restarts) {
            run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_NO_RESTARTS);
            run_policy_leave(p, 0, out);
            /* The status of the failure that began the stop, not of the workers the stop ended. */
            run_policy_end(p, p->stop_failure ? p->stop_failure : 1, out);
            return;
        }
        p->restarts++;
        run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_RESTART);
    }
    run_policy_join(p, 0, out);
}

/* JOINING: act on the join's answer; a signal before it ends the launcher, since no worker runs. */
static void run_policy_joining(struct run_policy *p, struct run_acts *out)
{
    if (p->answer == RUN_EV_JOINED) {
        p->state = RUN_ST_STARTING;
        p->started = 0;
        run_policy_act(out, RUN_ACT_START, 0);
    } else if (p->answer == RUN_EV_JOIN_FAILED) {
        run_policy_end(p, p->answer_status, out);
    } else if (p->answer == RUN_EV_COMPLETED) {
        run_policy_end(p, 0, out);
    } else if (p->sig) {
        /* The effects layer's signal handler does the same while the join blocks (run_effects.c). */
        run_policy_end(p, 128 + p->sig, out);
    }
}

/* All local workers exited 0: end at once alone, else add this node to the done count and wait. */
static void run_policy_finish(struct run_policy *p, struct run_acts *out)
{
    if (p->num_nodes <= 1) {
        run_policy_finished(p, out);
        return;
    }
    p->state = RUN_ST_FINISHING;
    p->done = 0;
    run_policy_act(out, RUN_ACT_WATCH, 1);
}

/* Whether a restart is left for a recovery in place. */
static int run_policy_can_recover(const struct run_policy *p)
{
    return p->cfg.in_place && (uint32_t)p->restarts < p->cfg.max_restarts;
}

/* In place: the generation broke; join its recovery round while the workers run on. */
static void run_policy_recover(struct run_policy *p, struct run_acts *out)
{
    run_policy_unwatch(p, out);
    p->state = RUN_ST_RECOVERING;
    p->answer = RUN_EV_TURN;
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_RECOVER);
    run_policy_act(out, RUN_ACT_RECOVER, 0);
}

/* In place: a local worker failed; join again (breaking the generation for all) while the others run on. */
static void run_policy_rejoin(struct run_policy *p, struct run_acts *out)
{
    run_policy_act(out, RUN_ACT_REPORT, 0);
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_REPLACE);
    run_policy_join_as(p, RUN_ST_REJOINING, 0, out);
}

/* RUNNING in place: a lost member before a failed worker (the header says why); growing waits.  Each
 * heartbeat also arms the recovery (a no-op once armed), so that a break is agreed in the daemon's turn. */
static void run_policy_running_in_place(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (p->lost) {
        run_policy_recover(p, out);
    } else if (p->failure) {
        run_policy_rejoin(p, out);
    } else if (p->running == 0) {
        run_policy_finish(p, out);
    } else {
        int due = run_policy_beating(p) && now >= p->next_beat;
        run_policy_beat(p, now, out);
        if (due)
            run_policy_act(out, RUN_ACT_ARM, 0);
    }
}

/* RUNNING: decide on what this turn noted, in the order the header gives. */
static void run_policy_running(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (!p->sig && run_policy_can_recover(p))
        run_policy_running_in_place(p, now, out);
    else if (p->sig)
        run_policy_on_signal(p, now, out);
    else if (p->failure)
        run_policy_break(p, RUN_CAUSE_FAILED, now, out);
    else if (p->grow)
        run_policy_break(p, RUN_CAUSE_GROW, now, out);
    else if (p->lost)
        run_policy_break(p, RUN_CAUSE_LOST, now, out);
    else if (p->running == 0)
        run_policy_finish(p, out);
    else
        run_policy_beat(p, now, out);
}

/* FINISHING: end once every node is done; a signal or a broken generation still counts. */
static void run_policy_finishing(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (p->sig) {
        run_policy_unwatch(p, out);
        run_policy_on_signal(p, now, out);
    } else if (p->done >= (int64_t)p->num_nodes) {
        run_policy_unwatch(p, out);
        run_policy_finished(p, out);
    } else if (p->lost && run_policy_can_recover(p)) {
        /* The workers are done; the node recovers with none running and finishes in the next generation. */
        run_policy_recover(p, out);
    } else if (p->lost) {
        run_policy_unwatch(p, out);
        run_policy_break(p, RUN_CAUSE_LOST, now, out);
    } else if (!p->watching) {
        /* The server dropped the watch (its output was left unread): watch and read the count again. */
        run_policy_act(out, RUN_ACT_WATCH, 0);
    } else {
        run_policy_beat(p, now, out);
    }
}

/* STOPPING: go on once all are reaped; SIGKILL after the grace period or at a second signal. */
static void run_policy_stopping(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (p->running == 0) {
        run_policy_after_stop(p, out);
    } else if (p->nsig != p->stop_nsig || now >= p->deadline) {
        run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_KILL);
        run_policy_act(out, RUN_ACT_SIGNAL, SIGKILL);
        p->state = RUN_ST_KILLING;
        p->deadline = now + p->cfg.kill_wait_ms;
    } else {
        run_policy_beat(p, now, out);
    }
}

/* KILLING: go on once all are reaped, or without the ones that would not die. */
static void run_policy_killing(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (p->running == 0 || now >= p->deadline)
        run_policy_after_stop(p, out);
}

/* RECOVERING, REJOINING: the next generation formed: count the restart and start the failed local ranks
 * (the workers that run on read their place in it from musterd's answer, muster/world.h); a failed answer stops the workers as without the mode. */
static void run_policy_moving(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    if (p->sig) {
        run_policy_on_signal(p, now, out);
    } else if (p->answer == RUN_EV_JOINED) {
        p->restarts++;
        p->state = RUN_ST_STARTING;
        p->started = 0;
        run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_RESTART);
        run_policy_act(out, RUN_ACT_REPLACE, 0);
    } else if (p->answer == RUN_EV_RECOVER_FAILED) {
        run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_FALLBACK);
        run_policy_break(p, RUN_CAUSE_LOST, now, out);
    } else if (p->answer == RUN_EV_JOIN_FAILED) {
        run_policy_break(p, RUN_CAUSE_END, now, out);
    }
}

/* The end of a loop turn: decide on what was noted, as the state says. */
static void run_policy_turn(struct run_policy *p, uint64_t now, struct run_acts *out)
{
    switch (p->state) {
    case RUN_ST_START:
        run_policy_first_join(p, out);
        break;
    case RUN_ST_JOINING:
    case RUN_ST_STANDBY:
        run_policy_joining(p, out);
        break;
    case RUN_ST_RECOVERING:
    case RUN_ST_REJOINING:
        run_policy_moving(p, now, out);
        break;
    case RUN_ST_STARTING:
        if (!p->started)
            break;
        p->state = RUN_ST_RUNNING;
        run_policy_running(p, now, out);
        break;
    case RUN_ST_RUNNING:
        run_policy_running(p, now, out);
        break;
    case RUN_ST_FINISHING:
        run_policy_finishing(p, now, out);
        break;
    case RUN_ST_STOPPING:
        run_policy_stopping(p, now, out);
        break;
    case RUN_ST_KILLING:
        run_policy_killing(p, now, out);
        break;
    case RUN_ST_ENDED:
        break;
    }
}

/* Note a join's success: the new generation's membership, with nothing of the last one's news. */
static void run_policy_on_joined(struct run_policy *p, const struct run_ev *ev)
{
    p->answer = RUN_EV_JOINED;
    p->member = 1;
    p->generation = ev->generation;
    p->num_nodes = ev->num_nodes;
    p->every = ev->every;
    p->next_beat = ev->now + ev->every;
    p->lost = p->grow = 0;
}

/* Note the start of this generation's workers. */
static void run_policy_on_started(struct run_policy *p, const struct run_ev *ev)
{
    p->started = 1;
    p->running = ev->count > 0 ? (int)ev->count : 0;
    /* A partial node is no use to the world: a worker that could not start counts as failed. */
    p->failure = ev->status;
    p->watching = 0;
    p->done = 0;
}

/* Note a member's loss; the first of a generation is said. */
static void run_policy_on_lost(struct run_policy *p, const struct run_ev *ev, struct run_acts *out)
{
    /* Once every node has finished, the others' leaves are the expected end, not a loss. */
    if (p->watching && p->done >= (int64_t)p->num_nodes)
        return;
    if (ev->generation != p->generation || p->lost)
        return;
    p->lost = 1;
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_LOST);
}

/* Note a node waiting to join: the world grows when it is below its maximum. */
static void run_policy_on_waiting(struct run_policy *p, const struct run_ev *ev, struct run_acts *out)
{
    if (ev->generation != p->generation || p->num_nodes >= p->cfg.max_nodes || p->grow || p->cfg.in_place)
        return;
    p->grow = 1;
    run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_GROW);
}

/* Note a heartbeat's answer. */
static void run_policy_on_beat(struct run_policy *p, const struct run_ev *ev, struct run_acts *out)
{
    p->every = ev->every;
    p->next_beat = ev->now + ev->every;
    if (ev->stale && !p->lost) {
        p->lost = 1;
        run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_ENDED);
    }
}

/* Note a worker's exit; the first failure is the generation's. */
static void run_policy_on_exit(struct run_policy *p, const struct run_ev *ev)
{
    if (p->running > 0)
        p->running--;
    if (ev->status != 0 && !p->failure)
        p->failure = ev->status;
}

/* Start a policy in RUN_ST_START; its first RUN_EV_TURN asks for the first join. */
void run_policy_init(struct run_policy *p, const struct run_policy_cfg *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->state = RUN_ST_START;
}

/* Feed one event; out gets the actions it yields (out->n is 0 when none). */
void run_policy_step(struct run_policy *p, const struct run_ev *ev, struct run_acts *out)
{
    out->n = 0;
    switch (ev->kind) {
    case RUN_EV_TURN:
        run_policy_turn(p, ev->now, out);
        break;
    case RUN_EV_JOINED:
        run_policy_on_joined(p, ev);
        break;
    case RUN_EV_JOIN_FAILED:
    case RUN_EV_COMPLETED:
    case RUN_EV_RECOVER_FAILED:
        p->answer = ev->kind;
        p->answer_status = ev->status;
        break;
    case RUN_EV_STARTED:
        run_policy_on_started(p, ev);
        break;
    case RUN_EV_BEAT:
        run_policy_on_beat(p, ev, out);
        break;
    case RUN_EV_WATCHING:
        p->watching = 1;
        break;
    case RUN_EV_DONE_COUNT:
        p->done = ev->count;
        break;
    case RUN_EV_WORKER_EXIT:
        run_policy_on_exit(p, ev);
        break;
    case RUN_EV_MEMBER_LOST:
        run_policy_on_lost(p, ev, out);
        break;
    case RUN_EV_NODE_WAITING:
        run_policy_on_waiting(p, ev, out);
        break;
    case RUN_EV_BROKEN:
        p->lost = 1;
        break;
    case RUN_EV_NOT_STAYING:
        /* A worker that does not follow the world cannot stay: this node recovers as without the mode,
         * from now on, and says so once. */
        if (p->cfg.in_place) {
            p->cfg.in_place = 0;
            run_policy_act(out, RUN_ACT_SAY, RUN_NOTE_NOT_STAYING);
        }
        break;
    case RUN_EV_WATCH_ENDED:
        p->watching = 0;
        break;
    case RUN_EV_SIGNAL:
        p->sig = ev->sig;
        p->nsig++;
        break;
    }
}

/* The monotonic ms of the next timed decision (heartbeat, grace, kill wait), UINT64_MAX when none. */
uint64_t run_policy_wake(const struct run_policy *p)
{
    uint64_t at = UINT64_MAX;
    int beats = p->state == RUN_ST_RUNNING || p->state == RUN_ST_FINISHING || p->state == RUN_ST_STOPPING;
    if (beats && run_policy_beating(p))
        at = p->next_beat;
    if ((p->state == RUN_ST_STOPPING || p->state == RUN_ST_KILLING) && p->deadline < at)
        at = p->deadline;
    return at;
}

/* The name of a state, for messages and tests. */
const char *run_policy_state_name(enum run_state s)
{
    static const char *const names[] = {"start",    "joining", "starting", "running",    "finishing", "stopping",
                                        "killing",  "ended",   "standby",  "recovering", "rejoining"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}
