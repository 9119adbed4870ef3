/*
 * The world-change answer (proto/answer.h): when musterd forms a
 * generation it stores what it decided under muster/rdzv/<g>/answer, once,
 * in the same loop turn as the generation key and before it, so whoever has
 * seen the generation reads the answer at once and nobody else writes it.
 * A plain round's answer says "no recovery" (previous 0, no lists: O(1)
 * bytes); a recovery's lists every member and every excluded node with its
 * cause (O(nodes) bytes, once per generation).  The answer two generations
 * back is deleted then: no worker can still need it, since its own
 * generation's answer names the one it replaced.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "core.h"
#include "keys.h"
#include "rdzv_int.h"
#include "status.h"

/* Fill the answer's excluded list from the gone list of prev (*n entries; NULL when none or no memory). */
static struct answer_excluded *rdzv_answer_excluded(const struct rdzv *rz, uint64_t prev, size_t *n)
{
    struct answer_excluded *xv = NULL;
    *n = 0;
    if (!prev || rz->gone_gen != prev || rz->n_gone == 0 || !(xv = calloc(rz->n_gone, sizeof *xv)))
        return NULL;
    for (size_t i = 0; i < rz->n_gone; i++)
        xv[i] = (struct answer_excluded){rz->gone[i].id, rz->gone[i].old_rank, rz->gone[i].cause};
    *n = rz->n_gone;
    return xv;
}

/* Store the latest generation's answer (prev: the generation a recovery replaced, 0 for a plain round;
 * mv: its members, listed only for a recovery) and drop the one two generations back; a failure is
 * logged and counted by the keyspace, and the workers then time out reading it, naming the key. */
void rdzv_answer_publish(struct rdzv *rz, uint32_t world, uint64_t prev, const struct answer_member *mv)
{
    size_t nx = 0;
    struct answer_excluded *xv = rdzv_answer_excluded(rz, prev, &nx);
    char key[64], *text = NULL;
    size_t len = 0;
    int st = CORE_INTERNAL;
    if ((!prev || mv) && answer_format(rz->generation, prev, (uint32_t)rz->members.n, world, mv,
                                       prev ? rz->members.n : 0, xv, nx, &text, &len) == 0) {
        keys_rdzv_answer(key, sizeof key, rz->generation);
        st = ks_set(&rz->ns->ks, key, strlen(key), (uint8_t *)text, len, 1);
    }
    if (st != CORE_OK)
        core_log(rdzv_core(rz), CORE_LOG_WARN, "ns '%s': cannot store the answer of generation %" PRIu64
                 " (status %d)", rz->ns->name, rz->generation, st);
    if (rz->generation > 2) {
        keys_rdzv_answer(key, sizeof key, rz->generation - 2);
        ks_delete(&rz->ns->ks, key, strlen(key));
    }
    free(xv);
}

/* The members of the latest generation as the answer and the joins' replies list them, built once per
 * generation (NULL when memory ran out). */
struct answer_member *rdzv_answer_members(const struct rdzv *rz)
{
    size_t n = rz->members.n;
    struct answer_member *mv = calloc(n ? n : 1, sizeof *mv);
    for (size_t i = 0; mv && i < n; i++) {
        const struct rdzv_node *m = rz->members.v[i];
        mv[i] = (struct answer_member){m->id, m->node_rank, m->rank_start, m->lws, m->old_rank};
    }
    return mv;
}

/* The excluded members a recovery of prev lists (NULL with *n 0 when none). */
static struct rdzv_excluded *rdzv_answer_excluded_joins(const struct rdzv *rz, uint64_t prev, size_t *n)
{
    *n = 0;
    if (!prev || rz->gone_gen != prev || rz->n_gone == 0)
        return NULL;
    struct rdzv_excluded *ev = calloc(rz->n_gone, sizeof *ev);
    for (size_t i = 0; ev && i < rz->n_gone; i++)
        ev[i] = (struct rdzv_excluded){rz->gone[i].id, rz->gone[i].old_rank, rz->gone[i].cause, rz->gone[i].broke};
    *n = ev ? rz->n_gone : 0;
    return ev;
}

/* Answer each member of the new generation with its assignment.  Only joins that asked (want_members) get
 * the whole list, and those share it: the owner packs it once, on the first answer, in the formation's
 * shared slot, so n answers of an n-member list cost O(n) bytes, not O(n^2) (some GB at 10k nodes).  A
 * recovery's excluded list goes to all. */
void rdzv_answer_joins(struct rdzv *rz, uint32_t world, uint64_t prev, const struct answer_member *mv)
{
    size_t n = rz->members.n, nx = 0;
    struct rdzv_shared shared = {0};
    struct rdzv_excluded *xv = rdzv_answer_excluded_joins(rz, prev, &nx);
    for (size_t i = 0; i < n; i++) {
        struct rdzv_node *m = rz->members.v[i];
        if (!mv) {
            rdzv_reply(m, m->join_id, CORE_INTERNAL, "out of memory", NULL);
            continue;
        }
        struct rdzv_assignment a = {
            .generation = rz->generation,
            .node_rank = m->node_rank,
            .num_nodes = (uint32_t)n,
            .rank_start = m->rank_start,
            .local_world_size = m->lws,
            .world_size = world,
            .node_id = m->id,
            .n_members = m->want_members ? n : 0,
            .members = m->want_members ? mv : NULL,
            .previous_generation = prev,
            .old_node_rank = m->old_rank,
            .n_excluded = nx,
            .excluded = xv,
            .credential = m->cred,
            .shared = &shared,
        };
        rdzv_reply(m, m->join_id, CORE_OK, NULL, &a);
    }
    if (shared.release)
        shared.release(shared.p);
    free(xv);
}
