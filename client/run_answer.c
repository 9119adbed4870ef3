/* The text form of a recovery answer that `muster run --recovery in-place` publishes (run_answer.h). */
#include "run_answer.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line: what the text is, and the version of its layout. */
#define RUN_ANSWER_MAGIC "muster-answer 1"
/* The longest line: a member line's numbers and a node id. */
#define RUN_ANSWER_LINE_MAX (96 + sizeof((muster_member *)0)->node_id)

/* Append one formatted line to the buffer at *buf (used bytes *n of *cap); 0, or -1 when out of memory. */
static int run_answer_put(char **buf, size_t *n, size_t *cap, const char *line, size_t len)
{
    if (*n + len + 1 > *cap) {
        size_t want = (*cap ? *cap * 2 : 512) + len + 1;
        char *grown = realloc(*buf, want);
        if (!grown)
            return -1;
        *buf = grown;
        *cap = want;
    }
    memcpy(*buf + *n, line, len);
    *n += len;
    (*buf)[*n] = '\0';
    return 0;
}

/* Format the shared part of a recovery answer. */
int run_answer_format(const muster_assignment *a, char **out, size_t *len)
{
    char line[RUN_ANSWER_LINE_MAX], old[16];
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int k, bad = 0;

    if (!out || !len)
        return MUSTER_EINVAL;
    *out = NULL;
    *len = 0;
    if (!a || !a->members || a->n_members != a->num_nodes || (a->n_excluded && !a->excluded))
        return MUSTER_EINVAL;
    for (size_t i = 0; i < a->n_members; i++)
        bad |= strchr(a->members[i].node_id, '\n') != NULL;
    for (size_t i = 0; i < a->n_excluded; i++)
        bad |= strchr(a->excluded[i].node_id, '\n') != NULL;
    if (bad)
        return MUSTER_EINVAL;
    k = snprintf(line, sizeof line, RUN_ANSWER_MAGIC "\ngeneration %" PRIu64 " previous %" PRIu64
                 " nodes %" PRIu32 " world %" PRIu32 " excluded %zu\n",
                 a->generation, a->previous_generation, a->num_nodes, a->world_size, a->n_excluded);
    bad |= run_answer_put(&buf, &n, &cap, line, (size_t)k);
    for (size_t i = 0; i < a->n_members && !bad; i++) {
        const muster_member *mm = &a->members[i];
        if (mm->old_node_rank == UINT32_MAX)
            snprintf(old, sizeof old, "-");
        else
            snprintf(old, sizeof old, "%" PRIu32, mm->old_node_rank);
        k = snprintf(line, sizeof line, "m %" PRIu32 " %" PRIu32 " %" PRIu32 " %s %s\n", mm->node_rank,
                     mm->rank_start, mm->local_world_size, old, mm->node_id);
        bad |= run_answer_put(&buf, &n, &cap, line, (size_t)k);
    }
    for (size_t i = 0; i < a->n_excluded && !bad; i++) {
        k = snprintf(line, sizeof line, "x %" PRIu32 " %s\n", a->excluded[i].old_node_rank, a->excluded[i].node_id);
        bad |= run_answer_put(&buf, &n, &cap, line, (size_t)k);
    }
    if (bad) {
        free(buf);
        return MUSTER_ENOMEM;
    }
    *out = buf;
    *len = n;
    return MUSTER_OK;
}

/* Copy the rest of a line (the node id) into dst of cap bytes; 0, or -1 when empty or too long. */
static int run_answer_id(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n == 0 || n >= cap)
        return -1;
    memcpy(dst, src, n + 1);
    return 0;
}

/* Parse one member line (without its newline) into mm; 0 or -1. */
static int run_answer_member(const char *line, muster_member *mm)
{
    unsigned long long nr, start, lws;
    char old[16];
    int at = -1;
    if (sscanf(line, "m %llu %llu %llu %15s %n", &nr, &start, &lws, old, &at) != 4 || at < 0 ||
        nr > UINT32_MAX || start > UINT32_MAX || lws == 0 || lws > UINT32_MAX)
        return -1;
    mm->node_rank = (uint32_t)nr;
    mm->rank_start = (uint32_t)start;
    mm->local_world_size = (uint32_t)lws;
    if (strcmp(old, "-") == 0) {
        mm->old_node_rank = UINT32_MAX;
    } else {
        char *end = NULL;
        unsigned long long o = strtoull(old, &end, 10);
        if (*end || o >= UINT32_MAX)
            return -1;
        mm->old_node_rank = (uint32_t)o;
    }
    return run_answer_id(mm->node_id, sizeof mm->node_id, line + at);
}

/* Parse one excluded line into x; 0 or -1. */
static int run_answer_excluded(const char *line, muster_excluded *x)
{
    unsigned long long o;
    int at = -1;
    if (sscanf(line, "x %llu %n", &o, &at) != 1 || at < 0 || o >= UINT32_MAX)
        return -1;
    x->old_node_rank = (uint32_t)o;
    x->cause[0] = '\0';
    return run_answer_id(x->node_id, sizeof x->node_id, line + at);
}

/* Split the next line off *p (the newline becomes a NUL); NULL at the end. */
static char *run_answer_line(char **p)
{
    char *line = *p, *nl;
    if (!line || !*line)
        return NULL;
    nl = strchr(line, '\n');
    if (nl) {
        *nl = '\0';
        *p = nl + 1;
    } else {
        *p = NULL;
    }
    return line;
}

/* Parse the lines after the magic into a (which holds the shared part afterwards); 0 or -1. */
static int run_answer_body(char *p, muster_assignment *a)
{
    unsigned long long gen, prev, nodes, world, nx;
    char *line = run_answer_line(&p);
    uint64_t start = 0;
    if (!line || sscanf(line, "generation %llu previous %llu nodes %llu world %llu excluded %llu", &gen, &prev,
                        &nodes, &world, &nx) != 5)
        return -1;
    if (nodes == 0 || nodes > UINT32_MAX || world > UINT32_MAX || nx > UINT32_MAX || gen <= prev)
        return -1;
    a->generation = gen;
    a->previous_generation = prev;
    a->num_nodes = (uint32_t)nodes;
    a->world_size = (uint32_t)world;
    a->members = calloc((size_t)nodes, sizeof *a->members);
    a->excluded = nx ? calloc((size_t)nx, sizeof *a->excluded) : NULL;
    if (!a->members || (nx && !a->excluded))
        return -1;
    for (size_t i = 0; i < nodes; i++) {
        muster_member *mm = &a->members[i];
        line = run_answer_line(&p);
        if (!line || run_answer_member(line, mm) != 0 || mm->node_rank != i || mm->rank_start != start)
            return -1;
        start += mm->local_world_size;
        a->n_members++;
    }
    for (size_t i = 0; i < nx; i++) {
        line = run_answer_line(&p);
        if (!line || run_answer_excluded(line, &a->excluded[i]) != 0)
            return -1;
        a->n_excluded++;
    }
    return start == world && run_answer_line(&p) == NULL ? 0 : -1;
}

/* Free what run_answer_parse allocated, as muster_assignment_free does (this file links without libmuster). */
static void run_answer_free(muster_assignment *a)
{
    free(a->members);
    free(a->excluded);
    free(a);
}

/* Parse the text into the assignment node_id got. */
int run_answer_parse(const char *text, size_t len, const char *node_id, muster_assignment **out)
{
    const size_t mlen = sizeof RUN_ANSWER_MAGIC - 1;
    muster_assignment *a;
    char *copy;
    int rc = MUSTER_ENOTFOUND;

    if (!out)
        return MUSTER_EINVAL;
    *out = NULL;
    if (!text || !node_id)
        return MUSTER_EINVAL;
    if (len <= mlen || memcmp(text, RUN_ANSWER_MAGIC "\n", mlen + 1) != 0 || memchr(text, '\0', len))
        return MUSTER_EPROTO;
    copy = malloc(len + 1);
    a = calloc(1, sizeof *a);
    if (!copy || !a) {
        free(copy);
        free(a);
        return MUSTER_ENOMEM;
    }
    memcpy(copy, text, len);
    copy[len] = '\0';
    if (run_answer_body(copy + mlen + 1, a) != 0) {
        rc = MUSTER_EPROTO;
    } else {
        for (size_t i = 0; i < a->n_members && rc == MUSTER_ENOTFOUND; i++) {
            const muster_member *mm = &a->members[i];
            if (strcmp(mm->node_id, node_id) != 0)
                continue;
            memcpy(a->node_id, mm->node_id, sizeof a->node_id);
            a->node_rank = mm->node_rank;
            a->rank_start = mm->rank_start;
            a->local_world_size = mm->local_world_size;
            a->old_node_rank = mm->old_node_rank;
            rc = MUSTER_OK;
        }
        for (size_t i = 0; i < a->n_excluded && rc == MUSTER_ENOTFOUND; i++)
            if (strcmp(a->excluded[i].node_id, node_id) == 0)
                rc = MUSTER_EEXCLUDED;
    }
    free(copy);
    if (rc != MUSTER_OK) {
        run_answer_free(a);
        return rc;
    }
    *out = a;
    return MUSTER_OK;
}
