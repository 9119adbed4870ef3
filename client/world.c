/*
 * libmuster world (muster/world.h): the driver of the worker's state
 * machine (world_sm.c).  It owns a connection with one watch on the
 * generation key, and feeds the machine what the store says: watch events,
 * the generation key and a generation's answer key.  Every wait is bounded
 * by the call's deadline; nothing here polls.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <muster/world.h>

#include "deadline.h"
#include "keys.h"
#include "world_sm.h"

struct muster_world {
    muster_t *m;
    uint64_t watch_id;
    struct wsm sm;
    char error[320];
};

/* Read a decimal environment variable into *out (fallback when unset; -1 when malformed). */
static int world_env(const char *name, long long fallback, long long *out)
{
    const char *s = getenv(name);
    char *end = NULL;
    if (!s || !*s) {
        *out = fallback;
        return 0;
    }
    errno = 0;
    *out = strtoll(s, &end, 10);
    return errno || *end || *out < 0 ? -1 : 0;
}

/* Read the generation key once and feed it; a muster status (ENOTFOUND: no generation yet is fine). */
static int world_read_generation(muster_world *w)
{
    void *v = NULL;
    size_t n = 0;
    int rc = muster_get(w->m, KEYS_RDZV_GENERATION, 0, 0, &v, &n);
    if (rc == MUSTER_OK)
        wsm_generation(&w->sm, deadline_now(), (uint64_t)keys_value_decimal(v, n));
    muster_free(v);
    return rc == MUSTER_ENOTFOUND ? MUSTER_OK : rc;
}

/* Watch the generation key, then read it (a generation formed before the watch is not missed). */
static int world_watch(muster_world *w)
{
    int rc = muster_watch(w->m, KEYS_RDZV_GENERATION, &w->watch_id, 0);
    return rc == MUSTER_OK ? world_read_generation(w) : rc;
}

/* Feed one pushed event; a watch the server ended is made again. */
static int world_event(muster_world *w, const muster_event *ev)
{
    if (ev->kind == MUSTER_EVENT_SET && ev->key && strcmp(ev->key, KEYS_RDZV_GENERATION) == 0)
        wsm_generation(&w->sm, deadline_now(), (uint64_t)keys_value_decimal(ev->value, ev->value_len));
    else if (ev->kind == MUSTER_EVENT_WATCH_ENDED)
        return world_watch(w);
    return MUSTER_OK;
}

/* Take pushed events, waiting at most wait_ms for the first; a muster status. */
static int world_drain(muster_world *w, uint32_t wait_ms)
{
    muster_event *ev = NULL;
    int rc = muster_next_event(w->m, &ev, wait_ms);
    while (rc == MUSTER_OK) {
        rc = world_event(w, ev);
        muster_event_free(ev);
        ev = NULL;
        if (rc == MUSTER_OK)
            rc = muster_next_event(w->m, &ev, 0);
    }
    return rc == MUSTER_ETIMEDOUT ? MUSTER_OK : rc;
}

/* Read the answer key the machine wants; a muster status. */
static int world_read_answer(muster_world *w)
{
    char key[64];
    void *v = NULL;
    size_t n = 0;
    uint64_t gen = w->sm.reading;
    keys_rdzv_answer(key, sizeof key, gen);
    int rc = muster_get(w->m, key, 0, 0, &v, &n);
    if (rc == MUSTER_OK) {
        wsm_answer(&w->sm, deadline_now(), gen, v, n);
    } else if (rc == MUSTER_ENOTFOUND) {
        /* Gone because newer generations formed, or never written: the key decides which. */
        rc = world_read_generation(w);
        if (rc == MUSTER_OK)
            wsm_answer(&w->sm, deadline_now(), gen, NULL, 0);
    }
    muster_free(v);
    return rc;
}

/* Tell `muster run --recovery in-place` that this process follows the world: its launcher names a file
 * in $MUSTER_WORLD_MARK and stays in place at a loss only when every worker of the node made it (a
 * plain script never does, and its node restarts instead).  A file that cannot be made is no error. */
static void world_mark(void)
{
    const char *path = getenv("MUSTER_WORLD_MARK");
    int fd = path && *path ? open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600) : -1;
    if (fd >= 0)
        close(fd);
}

/* Open a world handle. */
muster_world *muster_world_open(const char *url, const muster_world_opts *opts, int *err)
{
    muster_world_opts o = MUSTER_WORLD_OPTS_INIT;
    long long local, gen, rank, world;
    int rc = MUSTER_OK;
    if (opts)
        o = *opts;
    const char *node = o.node_id ? o.node_id : getenv("MUSTER_NODE_ID");
    if (world_env("LOCAL_RANK", 0, &local) || world_env("MUSTER_GENERATION", 0, &gen) ||
        world_env("RANK", -1, &rank) || world_env("WORLD_SIZE", -1, &world) || !node || !*node ||
        strlen(node) > ANSWER_ID_MAX || (o.generation == 0 && gen == 0)) {
        if (err)
            *err = MUSTER_EINVAL;   /* started outside `muster run`, or by one that set no generation */
        return NULL;
    }
    muster_world *w = calloc(1, sizeof *w);
    if (!w) {
        if (err)
            *err = MUSTER_ENOMEM;
        return NULL;
    }
    wsm_init(&w->sm, node, o.local_rank >= 0 ? o.local_rank : (int)local, o.generation ? o.generation : (uint64_t)gen,
             (int)rank, (int)world);
    w->m = muster_connect(url, &rc);
    if (w->m)
        rc = world_watch(w);
    if (rc != MUSTER_OK) {
        muster_world_close(w);
        if (err)
            *err = rc;
        return NULL;
    }
    world_mark();
    return w;
}

/* Close the handle. */
void muster_world_close(muster_world *w)
{
    if (!w)
        return;
    if (w->m)
        muster_close(w->m);
    wsm_fini(&w->sm);
    free(w);
}

/* Wait for the next world. */
int muster_world_next(muster_world *w, uint32_t timeout_ms, const muster_world_change **out)
{
    int rc = MUSTER_OK;
    if (!w || !out)
        return MUSTER_EINVAL;
    *out = NULL;
    wsm_begin(&w->sm, deadline_now(), timeout_ms);
    while (w->sm.act != WSM_DONE && rc == MUSTER_OK) {
        if (w->sm.act == WSM_READ) {
            rc = world_read_answer(w);
        } else {
            uint64_t now = deadline_now();
            rc = world_drain(w, w->sm.deadline > now ? (uint32_t)(w->sm.deadline - now) : 0);
            wsm_tick(&w->sm, deadline_now());
        }
    }
    if (rc != MUSTER_OK) {
        snprintf(w->error, sizeof w->error, "waiting for the next generation: %s%s%s", muster_strerror(rc),
                 *muster_last_error(w->m) ? ": " : "", muster_last_error(w->m));
        w->sm.act = WSM_IDLE;
        return rc;
    }
    snprintf(w->error, sizeof w->error, "%s", w->sm.why);
    w->sm.act = WSM_IDLE;
    if (w->sm.status == MUSTER_OK)
        *out = &w->sm.change;
    return w->sm.status;
}

/* Confirm the last change was built. */
void muster_world_ready(muster_world *w)
{
    if (w)
        wsm_ready(&w->sm);
}

/* Whether a newer generation formed. */
int muster_world_changed(muster_world *w)
{
    if (!w)
        return 0;
    world_drain(w, 0);
    return w->sm.latest > (w->sm.answered ? w->sm.answered : w->sm.start);
}

/* Wait on the watch for a newer generation. */
int muster_world_wait(muster_world *w, uint32_t timeout_ms)
{
    uint64_t end = deadline_now() + timeout_ms;
    for (;;) {
        if (muster_world_changed(w))
            return 1;
        uint64_t now = deadline_now();
        if (!w || now >= end || world_drain(w, (uint32_t)(end - now)) != MUSTER_OK)
            return muster_world_changed(w);
    }
}

/* The handle's connection. */
muster_t *muster_world_store(muster_world *w)
{
    return w ? w->m : NULL;
}

/* The reason of the last failure. */
const char *muster_world_error(const muster_world *w)
{
    return w ? w->error : "";
}

/* The plan's name. */
const char *muster_world_plan_name(muster_world_plan plan)
{
    return plan == MUSTER_WORLD_SHRINK ? "shrink" : plan == MUSTER_WORLD_GROW ? "grow" : "init";
}
