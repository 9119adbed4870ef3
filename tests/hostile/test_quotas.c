/*
 * The quotas a shared server puts on each job and each request, and what
 * happens when the process runs out of descriptors: --max-keys-per-ns and
 * --max-bytes-per-ns refuse a new key with LIMIT (an overwrite within the
 * quota still works, other namespaces are untouched, nothing stored is
 * lost), --max-keys-per-request refuses a request naming more keys, each
 * counted once per refusal; --max-namespaces, --max-watches, --max-waiters and
 * --max-frame (on a reply) refuse what would pass them, counted; --max-sources forgets the oldest addresses'
 * failures, counted; and a daemon out of file descriptors pauses accepting
 * (accept_emfile), keeps serving the connections it has, and takes new ones
 * again once descriptors come back.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

#define T_KEYS 8
#define T_BYTES 4096
#define T_PER_REQUEST 4

/* A namespace at --max-keys-per-ns: a new key is refused and counted; an overwrite, a delete and a key
 * in the freed slot work; every stored value is still there; another namespace has its own quota. */
static void t_keys_per_ns(struct h_daemon *d)
{
    muster_t *a = hc_connect(d, "quota-a", NULL), *b = hc_connect(d, "quota-b", NULL);
    if (!a || !b)
        goto out;
    char key[16];
    for (int i = 0; i < T_KEYS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(hc_set_str(a, key, key), MUSTER_OK);
    }
    long long before = h_stat(d, "limit_keys_per_ns");
    CHECK_EQ(hc_set_str(a, "one-more", "x"), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(d, "limit_keys_per_ns"), before + 1);
    CHECK_EQ(hc_set_str(a, "k0", "again"), MUSTER_OK); /* an overwrite adds no key */
    HC_EXPECT(a, "k0", "again");
    for (int i = 1; i < T_KEYS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        HC_EXPECT(a, key, key);
    }
    HC_EXPECT(a, "one-more", NULL);
    int deleted = 0;
    CHECK_EQ(muster_delete(a, "k1", &deleted, 3000), MUSTER_OK);
    CHECK_EQ(deleted, 1);
    CHECK_EQ(hc_set_str(a, "one-more", "x"), MUSTER_OK);
    for (int i = 0; i < T_KEYS; i++) {
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(hc_set_str(b, key, "b"), MUSTER_OK);
    }
    CHECK_EQ(h_stat(d, "limit_keys_per_ns"), before + 1);
out:
    muster_close(a);
    muster_close(b);
}

/* Queued values count as keys of their namespace: at --max-keys-per-ns (keys and queued values together) a
 * push is refused and counted, the queue keeps what it had, and a pop frees a slot. */
static void t_queue_quota(struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "quota-q", NULL);
    uint64_t len = 0, before = 0;
    void *val = NULL;
    size_t vlen = 0;
    if (!m)
        return;
    CHECK_EQ(hc_set_str(m, "a-key", "v"), MUSTER_OK);
    for (int i = 1; i < T_KEYS; i++)
        CHECK_EQ(muster_queue_push(m, "q", "x", 1, &len, 3000), MUSTER_OK);
    long long over = h_stat(d, "limit_keys_per_ns");
    CHECK_EQ(muster_queue_push(m, "q", "y", 1, &len, 3000), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(d, "limit_keys_per_ns"), over + 1);
    CHECK_EQ(muster_queue_len(m, "q", &len, 3000), MUSTER_OK);
    CHECK_EQ(len, T_KEYS - 1);
    CHECK_EQ(muster_queue_pop(m, "q", &before, &val, &vlen, 3000), MUSTER_OK);
    muster_free(val);
    CHECK_EQ(muster_queue_push(m, "q", "y", 1, &len, 3000), MUSTER_OK);
    muster_close(m);
}

/* A namespace at --max-bytes-per-ns: a value that would pass it is refused and counted, the stored
 * values stay whole, and a smaller overwrite fits. */
static void t_bytes_per_ns(struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "quota-bytes", NULL);
    if (!m)
        return;
    char *big = malloc(1000);
    if (!big)
        abort();
    memset(big, 'v', 1000);
    char key[16];
    for (int i = 0; i < 4; i++) { /* 4 x (2 + 1000) bytes: within 4096 */
        snprintf(key, sizeof key, "b%d", i);
        CHECK_EQ(muster_set(m, key, big, 1000, 3000), MUSTER_OK);
    }
    long long before = h_stat(d, "limit_bytes_per_ns");
    CHECK_EQ(muster_set(m, "b4", big, 1000, 3000), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(d, "limit_bytes_per_ns"), before + 1);
    for (int i = 0; i < 4; i++) {
        void *v = NULL;
        size_t len = 0;
        snprintf(key, sizeof key, "b%d", i);
        CHECK_EQ(muster_get(m, key, 0, 3000, &v, &len), MUSTER_OK);
        CHECK(v && len == 1000 && memcmp(v, big, 1000) == 0);
        muster_free(v);
    }
    CHECK_EQ(muster_set(m, "b0", "small", 5, 3000), MUSTER_OK);
    CHECK_EQ(muster_set(m, "b4", big, 900, 3000), MUSTER_OK); /* room made by the smaller b0 */
    free(big);
    muster_close(m);
}

/* A request naming more than --max-keys-per-request keys is refused and counted; one at the bound works. */
static void t_keys_per_request(struct h_daemon *d)
{
    muster_t *m = hc_connect(d, "quota-req", NULL);
    if (!m)
        return;
    const char *keys[T_PER_REQUEST + 1] = {"r0", "r1", "r2", "r3", "r4"};
    for (int i = 0; i <= T_PER_REQUEST; i++)
        CHECK_EQ(hc_set_str(m, keys[i], keys[i]), MUSTER_OK);
    void *values[T_PER_REQUEST + 1] = {0};
    size_t lens[T_PER_REQUEST + 1] = {0};
    long long before = h_stat(d, "limit_keys_per_request");
    CHECK_EQ(muster_multi_get(m, keys, T_PER_REQUEST + 1, 0, values, lens, 3000), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(d, "limit_keys_per_request"), before + 1);
    CHECK_EQ(muster_multi_get(m, keys, T_PER_REQUEST, 0, values, lens, 3000), MUSTER_OK);
    for (int i = 0; i < T_PER_REQUEST; i++) {
        CHECK(values[i] && lens[i] == 2 && memcmp(values[i], keys[i], 2) == 0);
        muster_free(values[i]);
    }
    muster_close(m);
}

/* Failed hellos from more addresses than --max-sources: the oldest addresses' records are forgotten,
 * counted, and a client with the right token is still served. */
static void t_sources(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--max-sources", "2", "--token", "closed=s3cret", NULL};
    if (h_start(&d, extra) != 0)
        return;
    static const char *const srcs[] = {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"};
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
        int fd = raw_connect_from(d.port, srcs[i]);
        CHECK(fd >= 0);
        if (fd >= 0)
            CHECK_EQ(raw_hello(fd, "closed", "wrong"), MUSTER_EAUTH);
        close(fd);
        /* An address with an open connection is not forgotten: let the close be seen first. */
        for (int64_t end = h_now_ms() + 3000; h_now_ms() < end && h_stat(&d, "connections_current") != 0;)
            usleep(2000);
    }
    CHECK_EQ(h_stat(&d, "auth_failed"), 4);
    CHECK_EQ(h_stat(&d, "sources_evicted"), 2);
    muster_t *m = hc_connect(&d, "closed", "s3cret");
    CHECK(m && hc_set_str(m, "in", "yes") == MUSTER_OK);
    muster_close(m);
    CHECK_EQ(h_stop(&d), 0);
}

/* Server-wide bounds: past --max-namespaces a new job's hello is refused with LIMIT, past --max-watches
 * and --max-waiters a watch or a parked get is, and a reply that would pass --max-frame is answered
 * LIMIT instead; each counted, and the jobs already there keep working.  A client refused LIMIT at
 * hello until its connect deadline reports LIMIT, not "cannot connect". */
static void t_server_wide(void *arg)
{
    (void)arg;
    struct h_daemon d;
    const char *extra[] = {"--max-namespaces", "3", "--max-watches", "2", "--max-waiters", "2",
                           "--max-value", "40K", "--max-key", "1K", "--max-frame", "48K", NULL};
    if (h_start(&d, extra) != 0)
        return;
    muster_t *jobs[3] = {0};
    char ns[16];
    for (int i = 0; i < 3; i++) {
        snprintf(ns, sizeof ns, "job%d", i);
        jobs[i] = hc_connect(&d, ns, NULL);
    }
    int err = MUSTER_OK;
    muster_t *extra_job = hc_try_connect(&d, "job3", NULL, &err);
    if (!(!extra_job && err == MUSTER_ELIMIT))
        printf("  job3: handle %p, %s\n", (void *)extra_job, muster_strerror(err));
    CHECK(!extra_job && err == MUSTER_ELIMIT);
    muster_close(extra_job);
    CHECK(h_stat(&d, "limit_namespaces") >= 1); /* once per hello: the client retries until its deadline */
    if (!jobs[0] || !jobs[1] || !jobs[2])
        goto out;
    uint64_t wid = 0;
    CHECK_EQ(muster_watch(jobs[0], "a/", &wid, 3000), MUSTER_OK);
    CHECK_EQ(muster_watch(jobs[1], "b/", &wid, 3000), MUSTER_OK);
    CHECK_EQ(muster_watch(jobs[2], "c/", &wid, 3000), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(&d, "limit_watches"), 1);
    /* One parked get from each of two addresses in two namespaces (each may hold half), then a third. */
    int fd = raw_connect_from(d.port, "127.0.0.2"), fd2 = raw_connect_from(d.port, "127.0.0.3");
    CHECK(fd >= 0 && fd2 >= 0 && raw_hello(fd, "job1", NULL) == 0 && raw_hello(fd2, "job2", NULL) == 0);
    CHECK_EQ(raw_get(fd, 1, "never/1", 1, 60000), 0);
    CHECK_EQ(raw_get(fd2, 2, "never/2", 1, 60000), 0);
    usleep(100000);
    CHECK_EQ(raw_get(fd2, 3, "never/3", 1, 60000), 0);
    uint64_t id = 0;
    CHECK_EQ(raw_status(fd2, 3000, &id), MUSTER_ELIMIT); /* the third: the two before it stay parked */
    CHECK_EQ(id, 3);
    CHECK_EQ(h_stat(&d, "limit_waiters"), 1);
    close(fd);
    close(fd2);
    char *big = malloc(40 * 1024);
    if (!big)
        abort();
    memset(big, 'z', 40 * 1024);
    CHECK_EQ(muster_set(jobs[2], "big1", big, 40 * 1024, 3000), MUSTER_OK);
    CHECK_EQ(muster_set(jobs[2], "big2", big, 40 * 1024, 3000), MUSTER_OK);
    free(big);
    const char *keys[2] = {"big1", "big2"};
    void *values[2] = {0};
    size_t lens[2] = {0};
    CHECK_EQ(muster_multi_get(jobs[2], keys, 2, 0, values, lens, 3000), MUSTER_ELIMIT);
    CHECK_EQ(h_stat(&d, "limit_response"), 1);
    CHECK_EQ(muster_multi_get(jobs[2], keys, 1, 0, values, lens, 3000), MUSTER_OK);
    CHECK(values[0] && lens[0] == 40 * 1024);
    muster_free(values[0]);
    CHECK_EQ(hc_set_str(jobs[0], "still", "here"), MUSTER_OK);
    HC_EXPECT(jobs[0], "still", "here");
out:
    for (int i = 0; i < 3; i++)
        muster_close(jobs[i]);
    CHECK_EQ(h_stop(&d), 0);
}

/* Descriptors the process pid has open, from /proc; -1 when unreadable. */
static int open_fds(pid_t pid)
{
    char cmd[64];
    snprintf(cmd, sizeof cmd, "ls /proc/%d/fd 2>/dev/null | wc -l", (int)pid);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1)
        n = -1;
    if (p)
        pclose(p);
    return n;
}

/* With its descriptors used up, the daemon counts accept_emfile and pauses accepting, still serves
 * the connections it has, and serves new clients once descriptors are free again. */
static void t_emfile(void *arg)
{
    (void)arg;
    enum { FLOOD = 12 };
    struct h_daemon d;
    const char *extra[] = {"--emfile-retry-ms", "50", NULL};
    if (h_start(&d, extra) != 0)
        return;
    int kept = raw_open(d.port, "fds");
    CHECK(kept >= 0);
    int used = open_fds(d.pid);
    CHECK(used > 0);
    /* Only the soft limit: raising it back needs no privilege. */
    struct rlimit old = {0, 0};
    int known = used > 0 && prlimit(d.pid, RLIMIT_NOFILE, NULL, &old) == 0;
    struct rlimit lim = {(rlim_t)used + 2, old.rlim_max};
    if (!known || prlimit(d.pid, RLIMIT_NOFILE, &lim, NULL) != 0) {
        printf("  not run: cannot lower the daemon's RLIMIT_NOFILE (prlimit: %s)\n", strerror(errno));
        close(kept);
        CHECK_EQ(h_stop(&d), 0);
        return;
    }
    int fds[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        fds[i] = raw_connect(d.port); /* the kernel completes the handshake; the daemon may not accept */
        if (fds[i] >= 0)
            raw_send_hello(fds[i], "fds", NULL);
    }
    h_nap(300);
    CHECK(h_stat(&d, "accept_emfile") >= 1);
    CHECK_EQ(raw_ping(kept, 1), 0); /* the connection it had is still served */
    CHECK_EQ(raw_status(kept, 3000, NULL), MUSTER_OK);
    for (int i = 0; i < FLOOD; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    CHECK_EQ(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0);
    int fresh = -1;
    for (int64_t end = h_now_ms() + 5000; fresh < 0 && h_now_ms() < end; h_nap(50))
        fresh = raw_open(d.port, "fds");
    CHECK(fresh >= 0);
    if (fresh >= 0) {
        CHECK_EQ(raw_ping(fresh, 1), 0);
        CHECK_EQ(raw_status(fresh, 3000, NULL), MUSTER_OK);
        close(fresh);
    }
    close(kept);
    CHECK_EQ(h_stop(&d), 0);
}

int main(void)
{
    h_init("quotas", 60);
    char keys[16], bytes[16], per_req[16];
    snprintf(keys, sizeof keys, "%d", T_KEYS);
    snprintf(bytes, sizeof bytes, "%d", T_BYTES);
    snprintf(per_req, sizeof per_req, "%d", T_PER_REQUEST);
    const char *args[] = {"--max-keys-per-ns", keys, "--max-bytes-per-ns", bytes, "--max-keys-per-request", per_req,
                          NULL};
    struct h_daemon d;
    if (h_start(&d, args) != 0)
        return h_finish();
    H_RUN(t_keys_per_ns, &d);
    H_RUN(t_queue_quota, &d);
    H_RUN(t_bytes_per_ns, &d);
    H_RUN(t_keys_per_request, &d);
    CHECK_EQ(h_stop(&d), 0);
    H_RUN(t_server_wide, NULL);
    H_RUN(t_sources, NULL);
    H_RUN(t_emfile, NULL);
    return h_finish();
}
