/*
 * The NCCL unique-id exchange of libmuster-nccl against a real musterd,
 * with no GPU (ncclGetUniqueId needs none): every rank of a generation
 * receives the same 128 bytes, a new generation a different id, a stale
 * generation's key is never read, and with several roots each id is made by
 * the first rank of its NCCL block and every rank sees the same ids.
 *
 * Ranks are threads with one handle each; they record what they got and
 * the main thread checks it (the harness counters are not thread-safe).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <muster/nccl.h>

#include "hclient.h"

#define MAX_ROOTS 3
#define PEER_TIMEOUT_MS 10000

static struct h_daemon d;

/* One rank of an exchange, run on its own thread with its own handle. */
struct peer {
    uint64_t gen;
    const char *name;
    int rank;
    int world;
    int nroots;
    uint32_t timeout_ms;
    int rc;
    int64_t elapsed_ms;
    ncclUniqueId ids[MAX_ROOTS];
    pthread_t thread;
    const char *url;   /* NULL: the daemon's default namespace */
};

/* Thread body: connect, exchange, record the outcome. */
static void *peer_main(void *arg)
{
    struct peer *p = arg;
    int err = 0;
    muster_t *m = muster_connect(p->url ? p->url : d.url, &err);
    int64_t t0 = h_now_ms();
    p->rc = m ? muster_nccl_exchange_ids(m, p->gen, p->name, p->rank, p->world, p->nroots, p->ids, p->timeout_ms)
              : err;
    p->elapsed_ms = h_now_ms() - t0;
    muster_close(m);
    return NULL;
}

/* Run the given ranks of one exchange at once and wait for all of them. */
static void peers_run(struct peer *ps, const int *ranks, int n, uint64_t gen, int world, int nroots)
{
    for (int i = 0; i < n; i++) {
        memset(&ps[i], 0, sizeof ps[i]);
        ps[i].gen = gen;
        ps[i].rank = ranks[i];
        ps[i].world = world;
        ps[i].nroots = nroots;
        ps[i].timeout_ms = PEER_TIMEOUT_MS;
        ps[i].rc = -1;
    }
    for (int i = 0; i < n; i++)
        if (pthread_create(&ps[i].thread, NULL, peer_main, &ps[i]) != 0)
            ps[i].thread = 0;
    for (int i = 0; i < n; i++)
        if (ps[i].thread)
            pthread_join(ps[i].thread, NULL);
}

/* Check every peer succeeded and holds the same nroots ids as the first. */
static void peers_agree(const struct peer *ps, int n, int nroots)
{
    for (int i = 0; i < n; i++) {
        CHECK_EQ(ps[i].rc, MUSTER_OK);
        CHECK_MEM(ps[i].ids, sizeof ps[i].ids[0] * (size_t)nroots, ps[0].ids, sizeof ps[0].ids[0] * (size_t)nroots);
    }
}

/* Whether an id holds anything (NCCL's ids start with 8 random bytes). */
static int id_set(const ncclUniqueId *id)
{
    static const ncclUniqueId zero;
    return memcmp(id, &zero, sizeof zero) != 0;
}

/* The id stored at key, checked to be exactly 128 bytes. */
static void stored_id(muster_t *m, const char *key, ncclUniqueId *out)
{
    void *v = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    CHECK_EQ(muster_get(m, key, 0, 0, &v, &len), MUSTER_OK);
    CHECK_EQ(len, sizeof *out);
    if (v && len == sizeof *out)
        memcpy(out, v, sizeof *out);
    muster_free(v);
}

/* Four ranks of one generation all receive the same 128-byte id. */
static void test_same_generation_same_id(void *arg)
{
    struct peer ps[4];
    const int ranks[4] = {3, 1, 0, 2};
    (void)arg;
    peers_run(ps, ranks, 4, 1, 4, 1);
    peers_agree(ps, 4, 1);
    CHECK(id_set(&ps[0].ids[0]));
}

/* A new generation gets a fresh id although the old generation's key is
 * still in the store, and both keys keep their own values. */
static void test_new_generation_new_id(void *arg)
{
    struct peer g1[2], g2[2];
    const int ranks[2] = {0, 1};
    ncclUniqueId k1, k2;
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    peers_run(g1, ranks, 2, 10, 2, 1);
    peers_agree(g1, 2, 1);
    peers_run(g2, ranks, 2, 11, 2, 1);
    peers_agree(g2, 2, 1);
    CHECK(memcmp(&g1[0].ids[0], &g2[0].ids[0], sizeof g1[0].ids[0]) != 0);
    stored_id(m, "nccl/10/world/id/0", &k1);
    stored_id(m, "nccl/11/world/id/0", &k2);
    CHECK_MEM(&k1, sizeof k1, &g1[0].ids[0], sizeof k1);
    CHECK_MEM(&k2, sizeof k2, &g2[0].ids[0], sizeof k2);
    muster_close(m);
}

/* Leftover ids of an older generation, of a later one and of another
 * communicator name do not leak into this generation's exchange. */
static void test_stale_keys_never_read(void *arg)
{
    struct peer ps[3];
    const int ranks[3] = {2, 0, 1};
    ncclUniqueId junk;
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    memset(&junk, 0xab, sizeof junk);
    CHECK_EQ(muster_set(m, "nccl/20/world/id/0", &junk, sizeof junk, 0), MUSTER_OK);
    CHECK_EQ(muster_set(m, "nccl/22/world/id/0", &junk, sizeof junk, 0), MUSTER_OK);
    CHECK_EQ(muster_set(m, "nccl/21/other/id/0", &junk, sizeof junk, 0), MUSTER_OK);
    peers_run(ps, ranks, 3, 21, 3, 1);
    peers_agree(ps, 3, 1);
    CHECK(memcmp(&ps[0].ids[0], &junk, sizeof junk) != 0);
    CHECK(id_set(&ps[0].ids[0]));
    muster_close(m);
}

/* Check that exactly nroots id keys exist for (gen, "world") and that they
 * hold pairwise different ids equal to ids[]. */
static void roots_in_store(uint64_t gen, int nroots, const ncclUniqueId *ids)
{
    char prefix[64], **keys = NULL;
    size_t n = 0;
    int more = 0;
    muster_t *m = hc_connect(&d, NULL, NULL);
    snprintf(prefix, sizeof prefix, "nccl/%llu/world/id/", (unsigned long long)gen);
    CHECK_EQ(muster_list(m, prefix, NULL, 0, &keys, &n, &more, 0), MUSTER_OK);
    CHECK_EQ(n, nroots);
    CHECK_EQ(more, 0);
    for (int k = 0; k < nroots; k++) {
        char key[80];
        ncclUniqueId got;
        snprintf(key, sizeof key, "%s%d", prefix, k);
        stored_id(m, key, &got);
        CHECK_MEM(&got, sizeof got, &ids[k], sizeof got);
        for (int j = 0; j < k; j++)
            CHECK(memcmp(&ids[j], &ids[k], sizeof got) != 0);
    }
    muster_free_list((void **)keys, n);
    muster_close(m);
}

/* World 300 with 3 roots: ranks 0, 100 and 200 own the roots and finish on
 * their own; then ranks across every block see the same 3 ids. */
static void test_three_roots_of_300(void *arg)
{
    struct peer owners[3], others[8];
    const int own[3] = {200, 0, 100};
    const int rest[8] = {1, 99, 101, 150, 199, 201, 250, 299};
    (void)arg;
    peers_run(owners, own, 3, 30, 300, 3);
    peers_agree(owners, 3, 3);
    peers_run(others, rest, 8, 30, 300, 3);
    peers_agree(others, 8, 3);
    CHECK_MEM(others[0].ids, sizeof others[0].ids, owners[0].ids, sizeof owners[0].ids);
    roots_in_store(30, 3, owners[0].ids);
}

/* World 7 with 3 roots (blocks of 3, 2, 2): the owners are 0, 3 and 5. */
static void test_uneven_blocks(void *arg)
{
    struct peer owners[3], others[4];
    const int own[3] = {0, 3, 5};
    const int rest[4] = {1, 2, 4, 6};
    (void)arg;
    peers_run(owners, own, 3, 31, 7, 3);
    peers_agree(owners, 3, 3);
    peers_run(others, rest, 4, 31, 7, 3);
    peers_agree(others, 4, 3);
    CHECK_MEM(others[0].ids, sizeof others[0].ids, owners[0].ids, sizeof owners[0].ids);
    roots_in_store(31, 3, owners[0].ids);
}

/* A rank whose root owner never comes times out near its deadline and
 * leaves no key behind. */
static void test_missing_owner_times_out(void *arg)
{
    struct peer p[1];
    const int rank[1] = {1};
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    *p = (struct peer){.gen = 40, .rank = rank[0], .world = 2, .nroots = 1, .timeout_ms = 300, .rc = -1};
    peer_main(p);
    CHECK_EQ(p->rc, MUSTER_ETIMEDOUT);
    CHECK(p->elapsed_ms >= 250 && p->elapsed_ms < 3000);
    HC_EXPECT(m, "nccl/40/world/id/0", NULL);
    muster_close(m);
}

/* A rank waiting for an id gives up soon after the generation's broken key
 * appears (musterd sets it when a member is lost: here the only member
 * leaves), long before its deadline; a rank arriving after the break
 * publishes nothing. */
static void test_broken_generation_cancels(void *arg)
{
    struct peer waiter, late;
    const int rank[1] = {1};
    muster_t *m = hc_connect(&d, "brk", NULL), *member = hc_connect(&d, "brk", NULL);
    muster_rdzv_opts o = {.node_id = "node-b", .local_world_size = 2, .min_nodes = 1, .max_nodes = 1};
    muster_assignment *a = NULL;
    char url[160];
    int64_t t_break;
    (void)arg;
    h_url(&d, "brk", NULL, url, sizeof url);
    CHECK_EQ(muster_rdzv_join(member, &o, &a, 5000), MUSTER_OK);
    uint64_t gen = a ? a->generation : 1;
    waiter = (struct peer){.gen = gen, .rank = rank[0], .world = 2, .nroots = 1, .timeout_ms = 8000, .rc = -1,
                           .url = url};
    CHECK_EQ(pthread_create(&waiter.thread, NULL, peer_main, &waiter), 0);
    /* Let the waiter park on the id before the generation breaks; if it
     * has not, the check before waiting catches the key just the same. */
    struct timespec ts = {0, 250000000L};
    nanosleep(&ts, NULL);
    t_break = h_now_ms();
    CHECK_EQ(muster_rdzv_leave(member, 0), MUSTER_OK);
    pthread_join(waiter.thread, NULL);
    CHECK_EQ(waiter.rc, MUSTER_ECANCELED);
    printf("  broken key to cancel: %lld ms\n", (long long)(h_now_ms() - t_break));
    CHECK(h_now_ms() - t_break < 2000);
    late = (struct peer){.gen = gen, .rank = 0, .world = 2, .nroots = 1, .timeout_ms = 8000, .rc = -1, .url = url};
    peer_main(&late);
    CHECK_EQ(late.rc, MUSTER_ECANCELED);
    HC_EXPECT(m, "nccl/1/world/id/0", NULL);
    muster_assignment_free(a);
    muster_close(member);
    muster_close(m);
}

/* An id key someone wrote before its root is refused by the root, never adopted: a forged id would
 * make every rank bootstrap to an address the writer chose. */
static void test_preseeded_id_refused(void *arg)
{
    struct peer root;
    ncclUniqueId forged;
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    memset(&forged, 0x5a, sizeof forged);
    CHECK_EQ(muster_set(m, "nccl/30/world/id/0", &forged, sizeof forged, 0), MUSTER_OK);
    root = (struct peer){.gen = 30, .rank = 0, .world = 1, .nroots = 1, .timeout_ms = 4000, .rc = -1};
    peer_main(&root);
    CHECK_EQ(root.rc, MUSTER_EFORBIDDEN);
    CHECK(memcmp(&root.ids[0], &forged, sizeof forged) != 0);
    muster_close(m);
}

/* A key holding something that is not an id is reported, not used. */
static void test_foreign_value_rejected(void *arg)
{
    struct peer p;
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    CHECK_EQ(hc_set_str(m, "nccl/41/world/id/0", "not an id"), MUSTER_OK);
    p = (struct peer){.gen = 41, .rank = 1, .world = 2, .nroots = 1, .timeout_ms = 2000, .rc = -1};
    peer_main(&p);
    CHECK_EQ(p.rc, MUSTER_EPROTO);
    muster_close(m);
}

/* Arguments out of range are refused before anything is sent. */
static void test_bad_arguments(void *arg)
{
    ncclUniqueId ids[2];
    muster_t *m = hc_connect(&d, NULL, NULL);
    (void)arg;
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, NULL, 0, 4, 0, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, NULL, 0, 1, 2, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, NULL, 4, 4, 1, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, NULL, -1, 4, 1, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, NULL, 0, 4, 1, NULL, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, "a/b", 0, 4, 1, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(m, 1, "", 0, 4, 1, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_exchange_ids(NULL, 1, NULL, 0, 4, 1, ids, 100), MUSTER_EINVAL);
    CHECK_EQ(muster_nccl_comm_destroy(NULL, 0), MUSTER_OK);
    CHECK_EQ(muster_nccl_comm_wait(NULL, 0), MUSTER_EINVAL);
    muster_close(m);
}

/* One root up to 128 ranks, then one per 128 when NCCL has scalable init. */
static void test_nroots(void *arg)
{
    int v = 0, scalable;
    (void)arg;
    CHECK_EQ(ncclGetVersion(&v), ncclSuccess);
    scalable = v >= 22300;
    CHECK_EQ(muster_nccl_nroots(0), 1);
    CHECK_EQ(muster_nccl_nroots(1), 1);
    CHECK_EQ(muster_nccl_nroots(128), 1);
    CHECK_EQ(muster_nccl_nroots(129), scalable ? 2 : 1);
    CHECK_EQ(muster_nccl_nroots(300), scalable ? 3 : 1);
    CHECK_EQ(muster_nccl_nroots(1024), scalable ? 8 : 1);
}

/* Without a GPU the full init fails fast with MUSTER_ENCCL and publishes nothing. */
static void test_init_without_gpu(void *arg)
{
    int n = 0;
    ncclComm_t comm = (ncclComm_t)&n;
    muster_nccl_opts o = MUSTER_NCCL_OPTS_INIT;
    muster_t *m = hc_connect(&d, NULL, NULL);
    int64_t t0 = h_now_ms();
    (void)arg;
    if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
        printf("  (a CUDA device is present: the no-GPU case does not apply)\n");
        muster_close(m);
        return;
    }
    CHECK_EQ(muster_nccl_comm_init(m, 50, 0, 2, 0, &o, &comm, 5000), MUSTER_ENCCL);
    CHECK(comm == NULL);
    CHECK(h_now_ms() - t0 < 5000);
    HC_EXPECT(m, "nccl/50/world/id/0", NULL);
    muster_close(m);
}

int main(void)
{
    h_init("nccl_ids", 60);
    /* The ids name a loopback address, so the test needs no network. */
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    if (h_start(&d, NULL) != 0)
        return h_finish();
    H_RUN(test_same_generation_same_id, NULL);
    H_RUN(test_new_generation_new_id, NULL);
    H_RUN(test_stale_keys_never_read, NULL);
    H_RUN(test_three_roots_of_300, NULL);
    H_RUN(test_uneven_blocks, NULL);
    H_RUN(test_missing_owner_times_out, NULL);
    H_RUN(test_preseeded_id_refused, NULL);
    H_RUN(test_broken_generation_cancels, NULL);
    H_RUN(test_foreign_value_rejected, NULL);
    H_RUN(test_bad_arguments, NULL);
    H_RUN(test_nroots, NULL);
    H_RUN(test_init_without_gpu, NULL);
    return h_finish();
}
