/*
 * libmuster-nccl: rebuild the communicator in place after a recovery round
 * (muster_nccl_comm_recover).  nccl_plan.c decides; this file carries the
 * plan out: stop the parent's work (revoke, or an aborting shrink), shrink
 * or grow or re-initialise, and release the parent in the order NCCL
 * documents for that path (include/muster/nccl.h has the table).
 *
 * ncclCommRevoke (2.28.7), ncclCommShrink (2.27), ncclCommGrow and
 * ncclCommGetUniqueId (2.29) are never referenced at link time: they are
 * looked up in the libnccl already loaded, so this library still loads
 * against an NCCL that lacks them, and the version and symbols found decide.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "deadline.h"
#include "keys.h"
#include "nccl_int.h"
#include "nccl_plan.h"

_Static_assert(MUSTER_NCCL_PATH_SHRINK == NCCL_PLAN_SHRINK && MUSTER_NCCL_PATH_GROW == NCCL_PLAN_GROW &&
                   MUSTER_NCCL_PATH_INIT == NCCL_PLAN_INIT,
               "muster_nccl_path and nccl_plan.h agree");

/* Flags as nccl.h 2.28 spells them, for headers that predate them. */
#ifndef NCCL_SHRINK_DEFAULT
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01
#endif
#ifndef NCCL_REVOKE_DEFAULT
#define NCCL_REVOKE_DEFAULT 0x00
#endif

/* Room for the announcement key. */
#define NCCL_RECOVER_KEY_MAX 256

typedef ncclResult_t (*nccl_recover_revoke_fn)(ncclComm_t, int);
typedef ncclResult_t (*nccl_recover_shrink_fn)(ncclComm_t, int *, int, ncclComm_t *, ncclConfig_t *, int);
typedef ncclResult_t (*nccl_recover_grow_fn)(ncclComm_t, int, const ncclUniqueId *, int, ncclComm_t *,
                                             ncclConfig_t *);
typedef ncclResult_t (*nccl_recover_getid_fn)(ncclComm_t, ncclUniqueId *);

/* The loaded NCCL: its version and the optional calls it has. */
struct nccl_recover_rt {
    int version;
    nccl_recover_revoke_fn revoke;
    nccl_recover_shrink_fn shrink;
    nccl_recover_grow_fn grow;
    nccl_recover_getid_fn getid;
};

/* What the new rank 0 announces: the path it took ("grow" or "init") and the id for it. */
struct nccl_recover_note {
    char path[8];
    ncclUniqueId id;
};

/* Find the optional calls in the libnccl that ncclGetVersion came from: a
 * handle to that very library (RTLD_NOLOAD), since RTLD_DEFAULT misses a
 * libnccl loaded with RTLD_LOCAL (Python's ctypes, for one). */
static void nccl_recover_runtime(struct nccl_recover_rt *rt)
{
    Dl_info info;
    void *lib = NULL;
    memset(rt, 0, sizeof *rt);
    if (ncclGetVersion(&rt->version) != ncclSuccess)
        rt->version = 0;
    if (dladdr((void *)(uintptr_t)ncclGetVersion, &info) && info.dli_fname)
        lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!lib)
        return;
    /* POSIX leaves data-to-function pointer casts to the platform; glibc makes them exact. */
    *(void **)&rt->revoke = dlsym(lib, "ncclCommRevoke");
    *(void **)&rt->shrink = dlsym(lib, "ncclCommShrink");
    *(void **)&rt->grow = dlsym(lib, "ncclCommGrow");
    *(void **)&rt->getid = dlsym(lib, "ncclCommGetUniqueId");
    /* The library stays loaded: this library needs it (DT_NEEDED), so the pointers stay valid. */
    dlclose(lib);
}

/* Wait for a shrink's child: NCCL stores it into *child only when its init
 * has ended, so until then the job's state is read on the parent. */
static int nccl_recover_child(ncclComm_t parent, ncclComm_t *child, uint64_t deadline, struct nccl_watch *w)
{
    for (;;) {
        ncclComm_t c = __atomic_load_n(child, __ATOMIC_ACQUIRE);
        ncclResult_t state = ncclInProgress;
        if (c)
            return nccl_settle(c, deadline, w);
        if (ncclCommGetAsyncError(parent, &state) != ncclSuccess || (state != ncclInProgress && state != ncclSuccess))
            return MUSTER_ENCCL;
        if (state == ncclSuccess && !__atomic_load_n(child, __ATOMIC_ACQUIRE))
            return MUSTER_ENCCL;   /* the job ended and left no communicator */
        if (deadline_now() >= deadline)
            return MUSTER_ETIMEDOUT;
        int cut = w ? nccl_watch_poll(w) : MUSTER_OK;
        if (cut != MUSTER_OK)
            return cut;   /* the generation ended, or another survivor's shrink failed */
        nccl_sleep_us(1000);
    }
}

/* Stop the parent's work, shrink it to the survivors and release it; *out
 * is the shrunk communicator or NULL.  The parent is gone afterwards. */
static int nccl_recover_shrink(const struct nccl_recover_rt *rt, ncclComm_t parent, struct nccl_plan *plan,
                               const char *name, uint64_t deadline, struct nccl_watch *w, ncclComm_t *out)
{
    ncclConfig_t config = nccl_config(name);
    ncclComm_t child = NULL;
    int drained = 0, rc = MUSTER_OK;
    ncclResult_t res;

    if (plan->revoke) {
        res = rt->revoke(parent, NCCL_REVOKE_DEFAULT);
        /* Drain before shrinking: a shrink over a revoke still in flight blocks. */
        rc = res == ncclSuccess || res == ncclInProgress ? nccl_settle(parent, deadline, w) : MUSTER_ENCCL;
        drained = rc == MUSTER_OK;
        if (rc == MUSTER_ENCCL)
            rc = MUSTER_OK;   /* the revoke failed: the aborting shrink below still stops the work */
    }
    if (rc == MUSTER_OK) {
        res = rt->shrink(parent, plan->excluded, plan->n_excluded, &child, &config,
                         drained ? NCCL_SHRINK_DEFAULT : NCCL_SHRINK_ABORT);
        rc = res == ncclSuccess || res == ncclInProgress ? nccl_recover_child(parent, &child, deadline, w)
                                                         : MUSTER_ENCCL;
    }
    /* Only now may the parent go: the child's init ran over its bootstrap.
     * After a drained revoke, destroy is local; otherwise (an aborting
     * shrink, or a failure) only abort is safe, as it waits for no peer. */
    if (drained && rc == MUSTER_OK)
        rc = ncclCommDestroy(parent) == ncclSuccess ? MUSTER_OK : MUSTER_ENCCL;
    else
        ncclCommAbort(parent);
    child = __atomic_load_n(&child, __ATOMIC_ACQUIRE);
    if (rc != MUSTER_OK && child) {
        ncclCommAbort(child);
        child = NULL;
    }
    plan->revoke = drained;
    *out = child;
    return rc;
}

/* One vote of the survivors: a survivor that is bad counts itself under key, then every survivor arrives
 * at barrier bar, whose release answers with the count; *all_ok when nobody counted itself.  The
 * barrier is entered in slices so that a broken generation ends the wait. */
static int nccl_recover_vote(muster_t *m, int bad, const char *key, const char *bar, int n, uint64_t deadline,
                             struct nccl_watch *w, int *all_ok)
{
    void *val = NULL;
    int rc = MUSTER_OK;
    *all_ok = 0;
    if (bad)
        rc = muster_add(m, key, 1, NULL, nccl_left_ms(deadline));
    for (int first = 1; rc == MUSTER_OK || rc == MUSTER_ETIMEDOUT; first = 0) {
        uint32_t slice = nccl_left_ms(deadline);
        if (!first && (deadline_now() >= deadline || nccl_watch_poll(w) == MUSTER_ECANCELED)) {
            rc = deadline_now() >= deadline ? MUSTER_ETIMEDOUT : MUSTER_ECANCELED;
            break;
        }
        if (slice > w->check_ms)
            slice = w->check_ms;
        rc = muster_barrier_fetch(m, bar, (uint32_t)n, key, &val, NULL, NULL, slice ? slice : 1);
        if (rc != MUSTER_ETIMEDOUT)
            break;
    }
    muster_free(val);
    if (rc == MUSTER_ENOTFOUND) {
        *all_ok = 1;   /* nobody counted itself */
        return MUSTER_OK;
    }
    return rc;
}

/* Agree among the survivors whether every old communicator can be shrunk (*all_ok): NCCL refuses to
 * shrink one that holds an error (a proxy that saw the dead peer's socket close, an operation still in
 * progress), and a shrink some survivors cannot start leaves the others waiting for them.  An orphan
 * (no parent) and a parent holding an error both count as unable. */
static int nccl_recover_health(muster_t *m, ncclComm_t parent, const struct nccl_plan *plan, uint64_t generation,
                               const char *name, uint64_t deadline, struct nccl_watch *w, int *all_ok)
{
    char key[NCCL_RECOVER_KEY_MAX], bar[NCCL_RECOVER_KEY_MAX];
    ncclResult_t state = ncclInProgress;
    int bad = !parent || ncclCommGetAsyncError(parent, &state) != ncclSuccess || state != ncclSuccess;
    keys_nccl_unhealthy(key, sizeof key, generation, name);
    keys_nccl_vote(bar, sizeof bar, generation, name);
    return nccl_recover_vote(m, bad, key, bar, plan->shrunk_world, deadline, w, all_ok);
}

/* Fetch the new rank 0's announcement, in slices so that a broken generation ends the wait. */
static int nccl_recover_read(muster_t *m, const char *key, struct nccl_recover_note *note, uint64_t deadline,
                             struct nccl_watch *w)
{
    const char *keys[1] = {key};
    void *val = NULL;
    size_t len = 0;
    int rc = MUSTER_ETIMEDOUT;
    while (rc == MUSTER_ETIMEDOUT && deadline_now() < deadline) {
        uint32_t slice = nccl_left_ms(deadline);
        if (slice > w->check_ms)
            slice = w->check_ms;
        rc = muster_multi_get(m, keys, 1, 1, &val, &len, slice);
        if (rc == MUSTER_ESTALE)
            rc = MUSTER_ECANCELED;   /* musterd ended the wait: the generation broke */
        if (rc == MUSTER_ETIMEDOUT && nccl_watch_poll(w) == MUSTER_ECANCELED)
            rc = MUSTER_ECANCELED;
    }
    if (rc == MUSTER_OK) {
        if (len != sizeof *note)
            rc = MUSTER_EPROTO;   /* not an announcement: someone else wrote this key */
        else
            memcpy(note, val, sizeof *note);
    }
    muster_free(val);
    return rc;
}

/* Publish this process's announcement (rank 0) unless the key holds one, then read what the key holds. */
static int nccl_recover_note(muster_t *m, const char *key, struct nccl_recover_note *mine,
                             struct nccl_recover_note *got, uint64_t deadline, struct nccl_watch *w)
{
    if (mine) {
        int swapped = 0;
        int rc = muster_compare_set(m, key, "", 0, mine, sizeof *mine, &swapped, NULL, NULL, nccl_left_ms(deadline));
        if (rc != MUSTER_OK)
            return rc;
        if (!swapped)   /* the announcement is the new rank 0's alone: one found there is not its own */
            return muster_set_error(m, MUSTER_EFORBIDDEN, "'%s' held an announcement rank 0 did not write", key);
    }
    return nccl_recover_read(m, key, got, deadline, w);
}

/* Grow base (the shrunk survivors; NULL for a newcomer) to the new world with id; base is released. */
static int nccl_recover_grow(const struct nccl_recover_rt *rt, ncclComm_t base, const struct nccl_plan *plan,
                             const ncclUniqueId *id, const char *name, uint64_t deadline, struct nccl_watch *w,
                             ncclComm_t *out)
{
    ncclConfig_t config = nccl_config(name);
    ncclComm_t comm = NULL;
    /* Existing ranks pass rank -1 and only the root passes the id; new ranks pass both. */
    ncclResult_t res = base ? rt->grow(base, plan->world, plan->rank == 0 ? id : NULL, -1, &comm, &config)
                            : rt->grow(NULL, plan->world, id, plan->rank, &comm, &config);
    int rc = (res == ncclSuccess || res == ncclInProgress) && comm ? nccl_settle(comm, deadline, w) : MUSTER_ENCCL;
    if (rc != MUSTER_OK && comm)
        ncclCommAbort(comm);
    /* The shrunk communicator is healthy: finalize and destroy it (abort if that stalls). */
    if (base)
        muster_nccl_comm_destroy(base, rc == MUSTER_OK ? nccl_left_ms(deadline) : 1);
    *out = rc == MUSTER_OK ? comm : NULL;
    return rc;
}

/* Survivors of GROW: shrink, then the root asks the shrunk communicator for
 * a grow id and announces it; everyone grows. */
static int nccl_recover_survivor_grow(const struct nccl_recover_rt *rt, muster_t *m, ncclComm_t parent,
                                      struct nccl_plan *plan, const char *key, const char *name,
                                      uint64_t deadline, struct nccl_watch *w, ncclComm_t *out)
{
    struct nccl_recover_note mine, got;
    ncclComm_t base = NULL;
    int rc = nccl_recover_shrink(rt, parent, plan, name, deadline, w, &base);
    memset(&mine, 0, sizeof mine);
    if (rc == MUSTER_OK && plan->rank == 0) {
        memcpy(mine.path, "grow", 4);
        rc = rt->getid(base, &mine.id) == ncclSuccess ? MUSTER_OK : MUSTER_ENCCL;
    }
    if (rc == MUSTER_OK)
        rc = nccl_recover_note(m, key, plan->rank == 0 ? &mine : NULL, &got, deadline, w);
    if (rc == MUSTER_OK && memcmp(got.path, "grow", 5) != 0)
        rc = MUSTER_ECONFLICT;   /* rank 0 took another path: the job does not load one NCCL */
    if (rc != MUSTER_OK) {
        if (base)
            ncclCommAbort(base);
        return rc;
    }
    return nccl_recover_grow(rt, base, plan, &got.id, name, deadline, w, out);
}

/* INIT for everyone, and GROW for newcomers: the parent (if any) is
 * aborted, rank 0 announces a fresh id, and each follows the announcement. */
static int nccl_recover_fresh(const struct nccl_recover_rt *rt, muster_t *m, ncclComm_t parent,
                              struct nccl_plan *plan, const char *key, const char *name, uint64_t deadline,
                              struct nccl_watch *w, ncclComm_t *out)
{
    struct nccl_recover_note mine, got;
    int rc = MUSTER_OK;
    /* The parent is not needed again: abort stops its work and waits for no peer. */
    if (parent)
        ncclCommAbort(parent);
    memset(&mine, 0, sizeof mine);
    if (plan->rank == 0) {
        memcpy(mine.path, "init", 4);
        rc = ncclGetUniqueId(&mine.id) == ncclSuccess ? MUSTER_OK : MUSTER_ENCCL;
    }
    if (rc == MUSTER_OK)
        rc = nccl_recover_note(m, key, plan->rank == 0 ? &mine : NULL, &got, deadline, w);
    if (rc != MUSTER_OK)
        return rc;
    if (memcmp(got.path, "init", 5) == 0) {
        plan->path = NCCL_PLAN_INIT;
        return nccl_init(out, plan->world, plan->rank, 1, &got.id, name, deadline, w);
    }
    if (memcmp(got.path, "grow", 5) != 0)
        return MUSTER_EPROTO;   /* not an announcement this library writes */
    if (parent)
        return MUSTER_ECONFLICT;   /* rank 0 grows but this survivor planned INIT: not one NCCL */
    if (!rt->grow)
        return MUSTER_ECONFLICT;   /* rank 0 grows but this NCCL cannot */
    plan->path = NCCL_PLAN_GROW;
    return nccl_recover_grow(rt, NULL, plan, &got.id, name, deadline, w, out);
}

/* Make the device current: a survivor's is already current in its process (asking the parent, which may
 * hold an error, is avoided); a process new to the world chooses one as the plain init does. */
static int nccl_recover_device(muster_t *m, int carried, int local_rank, const muster_nccl_opts *opts)
{
    int dev = -1;
    if (!carried || (opts && opts->cuda_device >= 0))
        return nccl_set_device(local_rank, opts) == MUSTER_OK
                   ? MUSTER_OK
                   : muster_set_error(m, MUSTER_ENCCL, "cannot make a CUDA device current for local rank %d",
                                      local_rank);
    return cudaGetDevice(&dev) == cudaSuccess ? MUSTER_OK
                                              : muster_set_error(m, MUSTER_ENCCL, "no current CUDA device: %s",
                                                                 cudaGetErrorString(cudaGetLastError()));
}

/* Fill the plan's input from the world change; the parent's shape is the change's, never the parent's own
 * (a communicator holding an error fails ncclCommCount). */
static void nccl_recover_input(struct nccl_plan_in *in, const struct nccl_recover_rt *rt,
                               const muster_world_change *c, int carried)
{
    memset(in, 0, sizeof *in);
    in->version = rt->version;
    in->have_revoke = rt->revoke != NULL;
    in->have_shrink = rt->shrink != NULL;
    in->have_grow = rt->grow && rt->getid;
    in->recovery = c->assignment;
    in->local_rank = c->local_rank;
    in->parent_nranks = carried ? c->previous_world_size : 0;
    in->parent_rank = carried ? c->previous_rank : -1;
}

/* Words for a failed step of the recovery, with NCCL's own detail when NCCL failed. */
static int nccl_recover_fail(muster_t *m, int rc, const char *step, const struct nccl_plan *plan, uint64_t gen)
{
    char detail[256];
    if (rc == MUSTER_OK)
        return rc;
    /* NCCL's own words, else what the failed store call said. */
    snprintf(detail, sizeof detail, "%s", rc == MUSTER_ENCCL ? ncclGetLastError(NULL) : muster_last_error(m));
    return muster_set_error(m, rc, "generation %llu, rank %d of %d (%s): %s: %s%s%s", (unsigned long long)gen,
                            plan->rank, plan->world, nccl_plan_path_name(plan->path), step, muster_strerror(rc),
                            *detail ? ": " : "", detail);
}

/* Shrink, then agree on the outcome: the health vote can pass and a shrink still fail (a proxy that
 * sees the dead peer's socket close after the vote).  A survivor whose shrink failed counts itself,
 * which also ends the others' wait for the shrunk communicator (the watch's abort key); when any
 * failed, every survivor lets its shrunk communicator go and all re-initialise from a fresh id. */
static int nccl_recover_shrink_or_init(const struct nccl_recover_rt *rt, muster_t *m, ncclComm_t parent,
                                       struct nccl_plan *plan, uint64_t gen, const char *name, uint64_t deadline,
                                       struct nccl_watch *w, ncclComm_t *comm)
{
    char failed[NCCL_RECOVER_KEY_MAX], bar[NCCL_RECOVER_KEY_MAX], key[NCCL_RECOVER_KEY_MAX];
    int all_ok = 0, rc;
    keys_nccl_shrink_failed(failed, sizeof failed, gen, name);
    keys_nccl_shrunk(bar, sizeof bar, gen, name);
    snprintf(w->abort_key, sizeof w->abort_key, "%s", failed);
    rc = nccl_recover_shrink(rt, parent, plan, name, deadline, w, comm);
    w->abort_key[0] = '\0';
    if (rc == MUSTER_ECANCELED || rc == MUSTER_ETIMEDOUT)
        return rc;   /* the world moved on, or time ran out: a fallback would not be agreed either */
    rc = nccl_recover_vote(m, rc != MUSTER_OK, failed, bar, plan->world, deadline, w, &all_ok);
    if (rc != MUSTER_OK || all_ok)
        return rc;
    if (*comm) {
        ncclCommAbort(*comm);
        *comm = NULL;
    }
    plan->path = NCCL_PLAN_INIT;
    plan->revoke = 0;
    keys_nccl_reinit(key, sizeof key, gen, name);
    return nccl_recover_fresh(rt, m, NULL, plan, key, name, deadline, w, comm);
}

/* Carry the plan out: the vote, then the path. */
static int nccl_recover_run(const struct nccl_recover_rt *rt, muster_t *m, ncclComm_t parent, struct nccl_plan *plan,
                            uint64_t gen, const char *name, uint64_t deadline, struct nccl_watch *w, ncclComm_t *comm)
{
    char key[NCCL_RECOVER_KEY_MAX];
    int rc = MUSTER_OK;
    keys_nccl_recover(key, sizeof key, gen, name);
    if ((plan->survivor || plan->orphan) && plan->path != NCCL_PLAN_INIT) {
        int all_ok = 0;
        rc = nccl_recover_health(m, parent, plan, gen, name, deadline, w, &all_ok);
        if (rc != MUSTER_OK) {
            if (parent)
                ncclCommAbort(parent);
            return nccl_recover_fail(m, rc, "the survivors' health vote", plan, gen);
        }
        if (!all_ok) {
            plan->path = NCCL_PLAN_INIT;   /* one cannot shrink: every survivor re-initialises */
            plan->revoke = 0;
        }
    }
    if (plan->path == NCCL_PLAN_SHRINK)
        rc = nccl_recover_shrink_or_init(rt, m, parent, plan, gen, name, deadline, w, comm);
    else if (plan->path == NCCL_PLAN_GROW && parent)
        rc = nccl_recover_survivor_grow(rt, m, parent, plan, key, name, deadline, w, comm);
    else
        rc = nccl_recover_fresh(rt, m, parent, plan, key, name, deadline, w, comm);
    return nccl_recover_fail(m, rc, plan->path == NCCL_PLAN_SHRINK ? "ncclCommShrink" : "the rebuild", plan, gen);
}

/* Check the input, plan, and carry the plan out under one deadline. */
int muster_nccl_comm_recover(muster_t *m, ncclComm_t parent, const muster_world_change *change,
                             const muster_nccl_opts *opts, ncclComm_t *comm, muster_nccl_recovery *info,
                             uint32_t timeout_ms)
{
    const char *name = opts && opts->comm_name ? opts->comm_name : MUSTER_NCCL_DEFAULT_NAME;
    uint64_t deadline = nccl_deadline(timeout_ms);
    struct nccl_plan_in in;
    struct nccl_plan plan;
    struct nccl_recover_rt rt;
    struct nccl_watch w;
    int rc, carried;

    if (info)
        memset(info, 0, sizeof *info);
    if (comm)
        *comm = NULL;
    if (!comm || !m)
        return m ? muster_set_error(m, MUSTER_EINVAL, "no place for the communicator (comm is NULL)") : MUSTER_EINVAL;
    if (!change || !change->assignment || !change->previous_generation)
        return muster_set_error(m, MUSTER_EINVAL, "not a recovery's world change (a first generation is built "
                                "with muster_nccl_comm_init)");
    if (!nccl_name_ok(name))
        return muster_set_error(m, MUSTER_EINVAL, "bad communicator name '%s'", name);
    carried = change->carried && parent != NULL;
    if (parent && !carried) {
        ncclCommAbort(parent);   /* not the previous generation's: it can only be let go */
        parent = NULL;
    }
    muster_set_error(m, MUSTER_OK, NULL);
    nccl_recover_runtime(&rt);
    nccl_recover_input(&in, &rt, change, carried);
    rc = nccl_plan_make(&in, &plan);
    if (rc != MUSTER_OK) {
        if (parent)
            ncclCommAbort(parent);
        return muster_set_error(m, rc, "generation %llu: the answer and this process's previous rank %d of %d "
                                "do not make a plan", (unsigned long long)change->generation,
                                change->previous_rank, change->previous_world_size);
    }
    rc = nccl_recover_device(m, carried, change->local_rank, opts);
    nccl_watch_init(&w, m, opts ? opts->events : NULL, change->generation, plan.world);
    if (rc != MUSTER_OK) {
        /* Still arrive at the survivors' vote (as unhealthy), so nobody waits there for this process. */
        char why[256];
        int all_ok = 0;
        snprintf(why, sizeof why, "%s", muster_last_error(m));
        if (parent)
            ncclCommAbort(parent);
        if ((plan.survivor || plan.orphan) && plan.path != NCCL_PLAN_INIT)
            nccl_recover_health(m, NULL, &plan, change->generation, name, deadline, &w, &all_ok);
        muster_set_error(m, rc, "%s", why);
    } else {
        rc = nccl_recover_run(&rt, m, parent, &plan, change->generation, name, deadline, &w, comm);
    }
    if (rc == MUSTER_OK && info) {
        info->rank = plan.rank;
        info->world_size = plan.world;
        info->path = (muster_nccl_path)plan.path;
        info->revoked = plan.revoke;
        info->n_excluded = plan.n_excluded;
    }
    if (rc == MUSTER_OK)
        muster_set_error(m, MUSTER_OK, NULL);
    nccl_plan_free(&plan);
    return rc;
}
