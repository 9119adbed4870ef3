/*
 * libmuster world: a worker's view of its job's world, across generations.
 *
 * musterd decides every world change.  When it forms a generation it
 * stores the whole answer (members in order with their old ranks, the
 * excluded with causes, standbys and newcomers) under
 * muster/rdzv/<generation>/answer, before the generation key and in the
 * same loop turn, once.  A worker started by `muster run` (with or without
 * --recovery in-place) opens a world handle and asks it, whenever its own
 * collective failed or it wants to look, what the world is now:
 *
 *     muster_world *w = muster_world_open(NULL, NULL, &err);     (MUSTER_URL etc.)
 *     const muster_world_change *c;
 *     muster_world_next(w, 60000, &c);       first call: the generation it was started into
 *     ... build the communicator (c->plan, c->carried), then muster_world_ready(w) ...
 *     loop: a collective fails, or muster_world_changed(w) says so:
 *     muster_world_next(w, 60000, &c);       the next generation, its rank and world in it
 *
 * muster_world_next waits on a watch of the generation key (no polling)
 * under its deadline, skips generations that formed while the worker was
 * busy (it answers the latest, counting what it skipped), and says how
 * this process joins: `carried` when it holds what it built for the
 * generation the new one replaces (a survivor that can shrink or grow its
 * communicator), else it is new to the world (a replaced worker, an
 * admitted standby, or a survivor whose rebuild failed) and builds afresh.
 * The decision is a pure state machine (client/world_sm.c) tested on a
 * fake clock in every order of events; this file's calls only feed it.
 *
 * Errors: MUSTER_EEXCLUDED (this node was left out: the cause is in
 * muster_world_error), MUSTER_ESTALE (the generation was formed by a plain
 * round, a restart: this worker's launcher stops it), MUSTER_ETIMEDOUT (no
 * new generation before the deadline), MUSTER_EPROTO (the answer key holds
 * something else).  muster_world_error() has the reason of the last
 * failure, and is empty after a success.
 */
#ifndef MUSTER_WORLD_H
#define MUSTER_WORLD_H

#include <muster/muster.h>
#include <muster/rdzv.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct muster_world muster_world;

/* What the world did, the same for every process of the new generation. */
typedef enum muster_world_plan {
    MUSTER_WORLD_INIT = 1,   /* build from scratch: a first generation, or nobody was only lost */
    MUSTER_WORLD_SHRINK = 2, /* only survivors, some excluded: shrink what the survivors hold */
    MUSTER_WORLD_GROW = 3    /* survivors and newcomers or standbys: grow, or re-init where it cannot */
} muster_world_plan;

/* One world change; valid until the next muster_world_next or muster_world_close. */
typedef struct muster_world_change {
    uint64_t generation;
    uint64_t previous_generation; /* the generation a recovery replaced; 0: formed by a plain round */
    uint64_t skipped;             /* generations formed since the last change and never answered */
    muster_world_plan plan;
    int rank;                     /* this process's rank in the new world */
    int world_size;
    int local_rank;
    int carried;                  /* 1: this process holds what it built for previous_generation */
    int previous_rank;            /* its rank there (carried only; else -1) */
    int previous_world_size;      /* that world's size (carried only; else 0) */
    uint32_t node_rank, num_nodes;
    uint32_t old_node_rank;       /* this node's rank in previous_generation; UINT32_MAX when new */
    size_t n_excluded;            /* nodes of previous_generation left out, with causes */
    const muster_excluded *excluded;
    const muster_assignment *assignment; /* the same as an assignment, members listed (recoveries) */
} muster_world_change;

/* Options for muster_world_open (NULL: every field from the environment `muster run` sets). */
typedef struct muster_world_opts {
    const char *node_id;       /* NULL: $MUSTER_NODE_ID */
    int local_rank;            /* -1: $LOCAL_RANK (default 0) */
    uint64_t generation;       /* 0: $MUSTER_GENERATION, the generation this process was started into */
} muster_world_opts;

#define MUSTER_WORLD_OPTS_INIT {NULL, -1, 0}

/* Open a world handle on its own connection to url (NULL: $MUSTER_URL) and watch the generation key;
 * NULL with *err set on failure (MUSTER_EINVAL: no node id or generation to start from).  It also
 * creates the file $MUSTER_WORLD_MARK names, if any: `muster run --recovery in-place` keeps a node's
 * workers in place at a loss only when each of them has opened the world. */
MUSTER_API muster_world *muster_world_open(const char *url, const muster_world_opts *opts, int *err);
/* Close the handle; NULL is a no-op. */
MUSTER_API void muster_world_close(muster_world *w);
/* Wait up to timeout_ms for the world this process is to be part of next: on the first call the
 * generation it was started into (or a later one), afterwards one newer than the last answered.
 * MUSTER_OK with *out set, or an error above.  A change not confirmed with muster_world_ready before
 * the next call counts as not built: the next change then has carried 0. */
MUSTER_API int muster_world_next(muster_world *w, uint32_t timeout_ms, const muster_world_change **out);
/* Confirm that this process has built what the last change asked for (its communicator). */
MUSTER_API void muster_world_ready(muster_world *w);
/* Whether a generation newer than the last answered one has formed (reads pending watch events only:
 * no wait, no request).  1 or 0. */
MUSTER_API int muster_world_changed(muster_world *w);
/* Wait up to timeout_ms on the watch for a generation newer than the last answered: 1 when one has
 * formed (muster_world_next then answers it), 0 when none did.  For a watcher thread; calls on one
 * handle must not overlap (take turns with a lock). */
MUSTER_API int muster_world_wait(muster_world *w, uint32_t timeout_ms);
/* The handle's connection (for store calls that belong to the world: NCCL ids, votes). */
MUSTER_API muster_t *muster_world_store(muster_world *w);
/* The reason of the last failure, "" after a success. */
MUSTER_API const char *muster_world_error(const muster_world *w);
/* The plan's name: "init", "shrink" or "grow". */
MUSTER_API const char *muster_world_plan_name(muster_world_plan plan);

#ifdef __cplusplus
}
#endif
#endif
