/*
 * Only the world may write the world: who may write the keys that carry a
 * job's world change.  muster/rdzv/... is musterd's alone (generation,
 * broken, answer).  In a namespace whose jobs use rendezvous, the keys of a
 * generation g, nccl/<g>/... (unique ids, votes, announcements) and
 * muster/run/<g>/..., are written only by the live members of g and by the
 * workers their launchers started, which present the member's credential
 * in their hello.  Anyone else is refused FORBIDDEN, naming the rule, so a
 * client of the namespace can no longer pre-seed the next generation's id
 * (every rank would bootstrap to an address the writer chose), forge an
 * answer or set the generation to 999.  A namespace that never formed a
 * generation has no world: its nccl/ keys are plain keys (a job that
 * numbers its own generations without rendezvous).
 *
 * Credentials: 128 random bits per node, made when the node first becomes a
 * member, the same for its life in the job (a survivor's workers keep
 * theirs across generations), dropped when the node record is freed.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core.h"
#include "keys.h"
#include "rdzv_int.h"
#include "status.h"

/* Make n's credential the hex of raw (RDZV_CRED_LEN / 2 random bytes), drawing again while it would repeat
 * one in use; raw NULL: draw at once.  By table, not snprintf: 16 "%02x" formats per node were a third of a
 * 4,096-node generation's forming. */
static void rdzv_keys_credential_from(struct rdzv_node *n, const unsigned char *raw)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char own[RDZV_CRED_LEN / 2];
    struct rdzv_node *dup = NULL;
    do {
        if (!raw || dup) {
            if (getrandom(own, sizeof own, 0) != (ssize_t)sizeof own) {
                n->cred[0] = '\0';
                return; /* no credential: its workers cannot write the generation's keys, the node itself can */
            }
            raw = own;
        }
        for (size_t i = 0; i < sizeof own; i++) {
            n->cred[2 * i] = hex[raw[i] >> 4];
            n->cred[2 * i + 1] = hex[raw[i] & 15];
        }
        n->cred[RDZV_CRED_LEN] = '\0';
        HASH_FIND(hh_cred, n->rz->creds, n->cred, RDZV_CRED_LEN, dup);
    } while (dup);
    HASH_ADD(hh_cred, n->rz->creds, cred, RDZV_CRED_LEN, n);
}

/* Give each node of nodes that has no credential yet its own, with the random bits of all of them from one
 * getrandom call (a call per node cost a 4,096-node generation a millisecond or more). */
void rdzv_keys_credentials(const struct rdzv_set *nodes)
{
    size_t need = 0, each = RDZV_CRED_LEN / 2;
    for (size_t i = 0; i < nodes->n; i++)
        need += !nodes->v[i]->cred[0];
    if (need == 0)
        return;
    unsigned char *raw = malloc(need * each);
    /* Above 256 bytes a signal may cut the read short: the nodes then draw one by one. */
    if (raw && getrandom(raw, need * each, 0) != (ssize_t)(need * each)) {
        free(raw);
        raw = NULL;
    }
    for (size_t i = 0, k = 0; i < nodes->n; i++)
        if (!nodes->v[i]->cred[0])
            rdzv_keys_credential_from(nodes->v[i], raw ? raw + each * k++ : NULL);
    free(raw);
}

/* Forget node n's credential. */
void rdzv_keys_forget(struct rdzv_node *n)
{
    if (n->cred[0])
        HASH_DELETE(hh_cred, n->rz->creds, n);
    n->cred[0] = '\0';
}

/* The generation a key of a generation names (nccl/<g>/, muster/run/<g>/); 0 when it names none. */
static uint64_t rdzv_keys_generation(const char *key, size_t klen)
{
    static const char *const prefixes[] = {KEYS_NCCL_PREFIX, KEYS_RUN_PREFIX};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; i++) {
        size_t plen = strlen(prefixes[i]), d = plen;
        uint64_t g = 0;
        if (klen <= plen || memcmp(key, prefixes[i], plen) != 0)
            continue;
        while (d < klen && d - plen < 20 && key[d] >= '0' && key[d] <= '9')
            g = g * 10 + (uint64_t)(key[d++] - '0');
        if (d > plen && d < klen && key[d] == '/')
            return g ? g : UINT64_MAX;   /* generation 0 never forms: nobody may write it */
    }
    return 0;
}

/* Whether a client may write key. */
int rdzv_keys_may_write(const struct ns *ns, const struct rdzv_node *own, const char *cred, const char *key,
                        size_t klen, char *msg, size_t len)
{
    const size_t rlen = sizeof KEYS_RDZV_PREFIX - 1;
    const struct rdzv *rz = ns->rdzv;
    const struct rdzv_node *by = own;
    if (klen >= rlen && memcmp(key, KEYS_RDZV_PREFIX, rlen) == 0) {
        snprintf(msg, len, "keys under '%s' are written by musterd alone", KEYS_RDZV_PREFIX);
        return CORE_FORBIDDEN;
    }
    uint64_t g = rdzv_keys_generation(key, klen);
    if (!g || !rz || !rz->generation)
        return CORE_OK;
    if ((!by || by->generation != g || by->lost) && cred && cred[0])
        HASH_FIND(hh_cred, rz->creds, cred, strnlen(cred, RDZV_CRED_LEN + 1), by);
    if (by && by->generation == g && !by->lost)
        return CORE_OK;
    snprintf(msg, len, "keys of generation %" PRIu64 " are written only by its live members and the workers their "
             "launchers started ($MUSTER_CREDENTIAL); this connection is %s", g == UINT64_MAX ? 0 : g,
             by ? "of a node that is not a live member of it" : cred && cred[0] ? "holding an unknown credential"
                                                                             : "neither");
    return CORE_FORBIDDEN;
}

/* The generation a connection waits for as a member or as a member's worker. */
uint64_t rdzv_keys_member_generation(const struct ns *ns, const struct rdzv_node *own, const char *cred)
{
    const struct rdzv *rz = ns->rdzv;
    const struct rdzv_node *by = own;
    if (!rz || !rz->running)
        return 0;
    if ((!by || by->generation != rz->generation || by->lost) && cred && cred[0])
        HASH_FIND(hh_cred, rz->creds, cred, strnlen(cred, RDZV_CRED_LEN + 1), by);
    return by && by->generation == rz->generation && !by->lost ? rz->generation : 0;
}

/* Whether generation gen of ns has formed and ended (broken, completed or replaced). */
int rdzv_generation_ended(const struct ns *ns, uint64_t gen)
{
    const struct rdzv *rz = ns->rdzv;
    return rz && gen && (gen < rz->generation || (gen == rz->generation && !rz->running));
}

/* The node whose loss broke generation gen. */
int rdzv_broken_by(const struct ns *ns, uint64_t gen, const char **node_id, uint32_t *rank)
{
    const struct rdzv *rz = ns->rdzv;
    if (!rz || rz->gone_gen != gen || rz->n_gone == 0)
        return -1;
    *node_id = rz->gone[0].id;
    *rank = rz->gone[0].old_rank;
    return 0;
}
