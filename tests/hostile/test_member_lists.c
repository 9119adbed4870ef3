/*
 * A large round whose every node asks for the member list: n answers of an
 * n-member list are O(n^2) bytes when each is packed apart, queued in one
 * loop turn, before any is written (1.2 GB at 3,000 nodes, and whatever
 * clients do not read yet stays there, past --max-buffer-memory).  The
 * daemon now packs the list once and every answer sends it by reference,
 * counted once.  Every node must get its answer with the whole list, and
 * the daemon's peak memory grows by about one list and the connections.
 * MUSTER_TEST_NODES=N runs it at another size (bench/results/member-lists.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "raw.h"

/* Nodes in the round by default, and their ids' length (near RDZV_ID_MAX): a list of about 200 KB. */
#define T_NODES_DEFAULT 1500
#define T_ID_LEN 120

/* Nodes in the round (MUSTER_TEST_NODES, else T_NODES_DEFAULT). */
static int t_nodes = T_NODES_DEFAULT;

/* Node i's id: T_ID_LEN characters, ordered by i. */
static void t_id(int i, char *buf)
{
    int n = snprintf(buf, T_ID_LEN + 1, "node-%07d-", i % 10000000);
    memset(buf + n, 'x', T_ID_LEN - (size_t)n);
    buf[T_ID_LEN] = '\0';
}

/* Send node i's join (want_members) of a round of t_nodes; 0 or -1. */
static int t_join(int fd, int i)
{
    char id[T_ID_LEN + 1];
    t_id(i, id);
    Muster__RdzvJoinReq j = MUSTER__RDZV_JOIN_REQ__INIT;
    j.node_id = id;
    j.local_world_size = 1;
    j.min_nodes = j.max_nodes = (uint32_t)t_nodes;
    j.timeout_ms = 60000;
    j.want_members = 1;
    Muster__Request r = MUSTER__REQUEST__INIT;
    r.id = 7;
    r.op_case = MUSTER__REQUEST__OP_RDZV_JOIN;
    r.rdzv_join = &j;
    return raw_send_request(fd, &r);
}

/* Whether node i's answer is its place with the whole list, in id order. */
static int t_answer_ok(int fd, int i)
{
    Muster__ServerFrame *f = raw_response(fd, 20000);
    const Muster__Assignment *a = f && f->response->status == MUSTER__STATUS__OK && f->response->rdzv_join
                                      ? f->response->rdzv_join->assignment
                                      : NULL;
    int ok = a && a->node_rank == (uint32_t)i && a->n_members == (size_t)t_nodes && a->generation == 1;
    char id[T_ID_LEN + 1];
    for (size_t k = 0; ok && k < a->n_members; k++) {
        t_id((int)k, id);
        ok = strcmp(a->members[k]->node_id, id) == 0 && a->members[k]->node_rank == k &&
             a->members[k]->rank_start == k;
    }
    if (!ok && f)
        fprintf(stderr, "node %d: status %d, %zu members\n", i, f->response->status, a ? a->n_members : 0);
    raw_free(f);
    return ok;
}

/* The daemon's peak resident memory (VmHWM) in KiB; -1 when unknown. */
static long t_peak_kib(pid_t pid)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* t_nodes nodes all ask for the list: all answered in full, memory grows by one list, nothing over the budget. */
static void t_shared_lists(void *arg)
{
    struct h_daemon *d = arg;
    int *fds = calloc((size_t)t_nodes, sizeof *fds), opened = 0;
    long peak0 = t_peak_kib(d->pid);
    for (int i = 0; i < t_nodes; i++) {
        fds[i] = raw_open(d->port, "lists");
        opened += fds[i] >= 0 && t_join(fds[i], i) == 0;
    }
    CHECK_EQ(opened, t_nodes);
    for (int64_t end = h_now_ms() + 20000; h_stat(d, "rdzv_generations") < 1 && h_now_ms() < end;)
        h_nap(20);
    CHECK_EQ(h_stat(d, "rdzv_generations"), 1);
    /* Packed apart, the answers took n lists at once in the loop turn that formed the generation (about
     * 400 MB at 1,500); shared, one list and the connections' own state. */
    long grew = t_peak_kib(d->pid) - peak0;
    fprintf(stderr, "%d nodes: peak resident memory grew %ld KiB\n", t_nodes, grew);
    CHECK(peak0 > 0 && grew < 96 * 1024 * (long)t_nodes / T_NODES_DEFAULT);
    /* Every answer is queued now, none read: the total holds at most one list, not n. */
    long long held = h_stat(d, "buffer_bytes_current");
    fprintf(stderr, "buffered with every answer unread: %lld bytes\n", held);
    CHECK(held < (16 << 20));
    int answered = 0;
    for (int i = 0; i < t_nodes; i++)
        answered += fds[i] >= 0 && t_answer_ok(fds[i], i);
    CHECK_EQ(answered, t_nodes);
    CHECK_EQ(h_stat(d, "limit_buffer_memory"), 0);
    for (int i = 0; i < t_nodes; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
}

int main(void)
{
    const char *n = getenv("MUSTER_TEST_NODES");
    if (n && atoi(n) > 0)
        t_nodes = atoi(n);
    h_init("member_lists", 80);
    struct h_daemon d;
    const char *extra[] = {"--max-buffer-memory", "64M", "--max-connections", "20000", NULL};
    if (h_start(&d, extra) < 0)
        return h_finish();
    H_RUN(t_shared_lists, &d);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
