/*
 * Reserved key names: every key that musterd, libmuster-nccl, the muster
 * CLI or the Python package writes or recognises by its name.  Each name
 * is spelled here and nowhere else in the sources (tests/check_keys.sh
 * checks that), so a reader finds them all in one place and a rename
 * cannot miss a side.
 *
 *   key                                     written by          read by
 *   muster/rdzv/generation                  musterd (a round)   users, tests
 *   muster/rdzv/<generation>/broken         musterd             libmuster-nccl
 *   muster/rdzv/<generation>/answer         musterd (a round)   workers (muster_world_next); written
 *                                                               before muster/rdzv/generation
 *   nccl/<generation>/<comm>/id/<root>      libmuster-nccl      libmuster-nccl; musterd
 *                                                               logs an id_published event
 *   nccl/<generation>/<comm>/unhealthy      libmuster-nccl      libmuster-nccl (with the barrier
 *                                                               nccl/<generation>/<comm>/vote)
 *   nccl/<generation>/<comm>/shrink_failed  libmuster-nccl      libmuster-nccl (with the barrier
 *                                                               nccl/<generation>/<comm>/shrunk)
 *   muster/run/<generation>/done            muster run          muster run (every node)
 *   torch/<generation>/...                  muster run's relay  the relay (torch's keys)
 *   muster.torch/<generation>/...           muster.torch        its process groups (in place)
 *   muster/torchrun/closed                  muster.torchrun     muster.torchrun
 *   torch.rendezvous.<run>.<generation>...  muster.torchrun     muster.torchrun (a PrefixStore)
 *
 * Only musterd writes under muster/rdzv/; nccl/<generation>/ and
 * muster/run/<generation>/ are written only by members of that generation
 * and the workers their launchers started (store-server/server/keyrules.c).
 *
 * The names are stored data (keys outlive a daemon in --data-dir and in
 * etcd) and what users and older clients see, so none of them may change.
 * Header only: the daemon, both libraries, the CLI and the Python extension
 * include it without linking anything.
 */
#ifndef MUSTER_PROTO_KEYS_H
#define MUSTER_PROTO_KEYS_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The latest generation of a namespace's rendezvous, in decimal (set when a round closes). */
#define KEYS_RDZV_GENERATION "muster/rdzv/generation"
/* Set (to the lost node's id) when a generation breaks; the argument is the generation. */
#define KEYS_RDZV_BROKEN_FMT "muster/rdzv/%" PRIu64 "/broken"
/* What every key musterd alone writes begins with. */
#define KEYS_RDZV_PREFIX "muster/rdzv/"
/* The world-change answer of a generation (proto/answer.h has its text form); the argument is the
 * generation.  musterd writes it once, in the loop turn that forms the generation, before the
 * generation key, so a worker that has seen the generation can read it at once. */
#define KEYS_RDZV_ANSWER_FMT "muster/rdzv/%" PRIu64 "/answer"
/* Where libmuster-nccl publishes a communicator's unique ids: nccl/<generation>/... */
#define KEYS_NCCL_PREFIX "nccl/"
/* What marks a key under KEYS_NCCL_PREFIX as a unique id. */
#define KEYS_NCCL_ID_MARK "/id/"
/* The key of root's unique id of communicator comm: generation, comm, root. */
#define KEYS_NCCL_ID_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s" KEYS_NCCL_ID_MARK "%d"
/* The recovery announcement of communicator comm in a generation formed by a
 * recovery round: the path its new rank 0 took and the id that goes with it. */
#define KEYS_NCCL_RECOVER_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s" KEYS_NCCL_ID_MARK "recover"
/* Before a shrink in a generation formed by a recovery, each survivor of communicator comm whose old
 * communicator holds an error counts itself here, then arrives at the barrier of that name below; the
 * barrier's release answers with this key, so every survivor learns at once whether all can shrink. */
#define KEYS_NCCL_UNHEALTHY_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s/unhealthy"
/* The survivors' barrier of that vote (a barrier name, not a key): generation, comm. */
#define KEYS_NCCL_VOTE_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s/vote"
/* After the shrink, each survivor whose shrink failed counts itself here (the others, still waiting
 * for the shrunk communicator, see the key and give up on it), then every survivor arrives at the
 * barrier below, whose release answers with this count: all keep the shrunk communicator, or all
 * re-initialise from the announcement KEYS_NCCL_REINIT_FMT. */
#define KEYS_NCCL_SHRINK_FAILED_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s/shrink_failed"
/* The survivors' barrier after the shrink (a barrier name, not a key): generation, comm. */
#define KEYS_NCCL_SHRUNK_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s/shrunk"
/* The new rank 0's announcement of a fresh id when the survivors fall back from a failed shrink. */
#define KEYS_NCCL_REINIT_FMT KEYS_NCCL_PREFIX "%" PRIu64 "/%s" KEYS_NCCL_ID_MARK "reinit"
/* What every key of a `muster run` generation begins with, before the generation. */
#define KEYS_RUN_PREFIX "muster/run/"
/* Counted up by each node of a `muster run` generation whose workers all succeeded. */
#define KEYS_RUN_DONE_FMT "muster/run/%" PRIu64 "/done"
/* Set (to the generation, in decimal) by each node of a `muster run` job whose
 * workers all finished: a launcher that arrives later runs nothing. */
#define KEYS_RUN_COMPLETED "muster/run/completed"
/* The prefix under which `muster run`'s relay keeps a generation's torch keys. */
#define KEYS_TORCH_PREFIX_FMT "torch/%" PRIu64 "/"
/* muster.torch in place: each generation's process groups meet under this prefix followed by
 * "<generation>/", never used by another generation (a PrefixStore over the native store). */
#define KEYS_TORCH_INPLACE_PREFIX "muster.torch/"
/* Set by the Python torchrun backend's set_closed(). */
#define KEYS_TORCHRUN_CLOSED "muster/torchrun/closed"
/* The Python torchrun backend's agent store prefix, followed by "<run>.<generation>". */
#define KEYS_TORCHRUN_STORE_PREFIX "torch.rendezvous."

/* Write generation's broken key into buf (n bytes); snprintf's result. */
static inline int keys_rdzv_broken(char *buf, size_t n, uint64_t generation)
{
    return snprintf(buf, n, KEYS_RDZV_BROKEN_FMT, generation);
}

/* Write generation's world-change answer key into buf (n bytes); snprintf's result. */
static inline int keys_rdzv_answer(char *buf, size_t n, uint64_t generation)
{
    return snprintf(buf, n, KEYS_RDZV_ANSWER_FMT, generation);
}

/* Write the key of root's unique id of communicator comm in generation into buf; snprintf's result. */
static inline int keys_nccl_id(char *buf, size_t n, uint64_t generation, const char *comm, int root)
{
    return snprintf(buf, n, KEYS_NCCL_ID_FMT, generation, comm, root);
}

/* Write the key of communicator comm's recovery announcement in generation into buf; snprintf's result. */
static inline int keys_nccl_recover(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_RECOVER_FMT, generation, comm);
}

/* Write the key of communicator comm's unhealthy count in generation into buf; snprintf's result. */
static inline int keys_nccl_unhealthy(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_UNHEALTHY_FMT, generation, comm);
}

/* Write the name of communicator comm's survivors' barrier in generation into buf; snprintf's result. */
static inline int keys_nccl_vote(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_VOTE_FMT, generation, comm);
}

/* Write the key of the survivors' count of failed shrinks of comm in generation into buf; snprintf's result. */
static inline int keys_nccl_shrink_failed(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_SHRINK_FAILED_FMT, generation, comm);
}

/* Write the name of comm's survivors' barrier after the shrink in generation into buf; snprintf's result. */
static inline int keys_nccl_shrunk(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_SHRUNK_FMT, generation, comm);
}

/* Write the key of comm's fallback announcement after a failed shrink in generation; snprintf's result. */
static inline int keys_nccl_reinit(char *buf, size_t n, uint64_t generation, const char *comm)
{
    return snprintf(buf, n, KEYS_NCCL_REINIT_FMT, generation, comm);
}

/* Whether key (klen bytes, NUL-terminated) names an NCCL unique id; its generation into *generation. */
static inline int keys_nccl_id_generation(const char *key, size_t klen, uint64_t *generation)
{
    const size_t plen = sizeof KEYS_NCCL_PREFIX - 1;
    if (klen <= plen || memcmp(key, KEYS_NCCL_PREFIX, plen) != 0 ||
        !memmem(key, klen, KEYS_NCCL_ID_MARK, sizeof KEYS_NCCL_ID_MARK - 1))
        return 0;
    *generation = strtoull(key + plen, NULL, 10);
    return 1;
}

/* The number a counter key holds as decimal text (the generation key, a done count): value is len bytes,
 * not NUL-terminated; 0 when it holds no number. */
static inline int64_t keys_value_decimal(const void *value, size_t len)
{
    char text[24];
    if (!value || len == 0 || len >= sizeof text)
        return 0;
    memcpy(text, value, len);
    text[len] = '\0';
    return strtoll(text, NULL, 10);
}

/* Write the done key of a `muster run` generation into buf; snprintf's result. */
static inline int keys_run_done(char *buf, size_t n, uint64_t generation)
{
    return snprintf(buf, n, KEYS_RUN_DONE_FMT, generation);
}

/* Write the relay's key prefix of a `muster run` generation into buf; snprintf's result. */
static inline int keys_torch_prefix(char *buf, size_t n, uint64_t generation)
{
    return snprintf(buf, n, KEYS_TORCH_PREFIX_FMT, generation);
}

#endif
