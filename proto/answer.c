/* The world-change answer's text form (answer.h): one writer (musterd), many readers (workers). */
#include "answer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line: what the text is, and the version of its layout. */
#define ANSWER_MAGIC "muster-answer 2\n"
/* The shortest member line ("m 0 0 1 - 1 a\n") and excluded line ("x 0 1 a \n"): a count announced by
 * the header is bounded by the bytes left divided by these, so hostile text cannot make the parser
 * reserve more than its own size. */
#define ANSWER_MIN_MEMBER 14
#define ANSWER_MIN_EXCLUDED 9

/* A growing output buffer. */
struct answer_buf {
    char *p;
    size_t n, cap;
    int bad;
};

/* Append len bytes of s to b (b->bad set when memory runs out). */
static void answer_put(struct answer_buf *b, const char *s, size_t len)
{
    if (b->bad)
        return;
    if (b->n + len + 1 > b->cap) {
        size_t want = (b->cap ? b->cap * 2 : 256) + len + 1;
        char *grown = realloc(b->p, want);
        if (!grown) {
            b->bad = 1;
            return;
        }
        b->p = grown;
        b->cap = want;
    }
    memcpy(b->p + b->n, s, len);
    b->n += len;
    b->p[b->n] = '\0';
}

/* Append v in decimal, then the character after (by hand, not snprintf: a recovery of 4,096 nodes wrote
 * 12,288 numbers on the daemon's one thread, in the turn that answers them). */
static void answer_put_num(struct answer_buf *b, uint64_t v, char after)
{
    char buf[24];
    size_t i = sizeof buf;
    buf[--i] = after;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    answer_put(b, buf + i, sizeof buf - i);
}

/* Append a node id with its length in front; -1 when it is empty or too long. */
static int answer_put_id(struct answer_buf *b, const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > ANSWER_ID_MAX)
        return -1;
    answer_put_num(b, n, ' ');
    answer_put(b, id, n);
    return 0;
}

/* Append a cause to the end of its line, newlines and carriage returns turned into spaces. */
static void answer_put_cause(struct answer_buf *b, const char *cause)
{
    for (const char *c = cause ? cause : ""; *c && !b->bad; c++)
        answer_put(b, *c == '\n' || *c == '\r' ? " " : c, 1);
}

/* Format an answer. */
int answer_format(uint64_t generation, uint64_t previous, uint32_t nodes, uint32_t world,
                  const struct answer_member *members, size_t n_members, const struct answer_excluded *excluded,
                  size_t n_excluded, char **out, size_t *len)
{
    struct answer_buf b = {0};
    char line[160];
    int k = snprintf(line, sizeof line,
                     ANSWER_MAGIC "generation %" PRIu64 " previous %" PRIu64 " nodes %" PRIu32 " world %" PRIu32
                                  " members %zu excluded %zu\n",
                     generation, previous, nodes, world, n_members, n_excluded);
    int bad = 0;
    answer_put(&b, line, (size_t)k);
    for (size_t i = 0; i < n_members && !bad; i++) {
        const struct answer_member *m = &members[i];
        answer_put(&b, "m ", 2); /* "m RANK START LWS OLD|- LEN ID" */
        answer_put_num(&b, m->node_rank, ' ');
        answer_put_num(&b, m->rank_start, ' ');
        answer_put_num(&b, m->local_world_size, ' ');
        if (m->old_rank == ANSWER_NO_RANK)
            answer_put(&b, "- ", 2);
        else
            answer_put_num(&b, m->old_rank, ' ');
        bad |= answer_put_id(&b, m->id);
        answer_put(&b, "\n", 1);
    }
    for (size_t i = 0; i < n_excluded && !bad; i++) {
        answer_put(&b, "x ", 2);
        answer_put_num(&b, excluded[i].old_rank, ' ');
        bad |= answer_put_id(&b, excluded[i].id);
        answer_put(&b, " ", 1);
        answer_put_cause(&b, excluded[i].cause);
        answer_put(&b, "\n", 1);
    }
    if (bad || b.bad) {
        free(b.p);
        return -1;
    }
    *out = b.p;
    *len = b.n;
    return 0;
}

/* ------------------------------------------------------------------ parse */

/* A cursor over the parser's own copy of the text. */
struct answer_cur {
    char *p, *end;
    const char *why;
};

/* Fail the parse with why; -1. */
static int answer_bad(struct answer_cur *c, const char *why)
{
    if (!c->why)
        c->why = why;
    return -1;
}

/* Read a decimal number of at most max followed by one space (or a newline when nl); 0 or -1. */
static int answer_num(struct answer_cur *c, uint64_t max, int nl, uint64_t *out)
{
    uint64_t v = 0;
    char *s = c->p;
    while (s < c->end && *s >= '0' && *s <= '9' && s - c->p < 20) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (max - d) / 10)
            return answer_bad(c, "a number is out of range");
        v = v * 10 + d;
        s++;
    }
    if (s == c->p || s >= c->end || *s != (nl ? '\n' : ' '))
        return answer_bad(c, "a number is malformed");
    c->p = s + 1;
    *out = v;
    return 0;
}

/* Expect the literal word lit (its trailing space included); 0 or -1. */
static int answer_word(struct answer_cur *c, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return answer_bad(c, "a line does not have the answer's layout");
    c->p += n;
    return 0;
}

/* Read a length-prefixed id, NUL-terminating it in place (over the separator after it, which must be
 * sep); 0 or -1. */
static int answer_id(struct answer_cur *c, char sep, const char **id)
{
    uint64_t n;
    if (answer_num(c, ANSWER_ID_MAX, 0, &n) != 0 || n == 0)
        return answer_bad(c, "a node id's length is malformed");
    if ((uint64_t)(c->end - c->p) <= n || c->p[n] != sep || memchr(c->p, '\0', n))
        return answer_bad(c, "a node id is cut or malformed");
    *id = c->p;
    c->p[n] = '\0';
    c->p += n + 1;
    return 0;
}

/* Parse member line i into m; rank is the first global rank it must start at. */
static int answer_member_line(struct answer_cur *c, size_t i, uint64_t *rank, struct answer_member *m)
{
    uint64_t nr, start, lws, old = ANSWER_NO_RANK;
    if (answer_word(c, "m ") || answer_num(c, UINT32_MAX, 0, &nr) || answer_num(c, UINT32_MAX, 0, &start) ||
        answer_num(c, UINT32_MAX, 0, &lws))
        return -1;
    if (c->end - c->p >= 2 && c->p[0] == '-' && c->p[1] == ' ')
        c->p += 2;
    else if (answer_num(c, UINT32_MAX - 1, 0, &old))
        return -1;
    if (answer_id(c, '\n', &m->id))
        return -1;
    if (nr != i || start != *rank || lws == 0)
        return answer_bad(c, "the members are not in node order with contiguous ranks");
    m->node_rank = (uint32_t)nr;
    m->rank_start = (uint32_t)start;
    m->local_world_size = (uint32_t)lws;
    m->old_rank = (uint32_t)old;
    *rank += lws;
    return 0;
}

/* Parse an excluded line into x. */
static int answer_excluded_line(struct answer_cur *c, struct answer_excluded *x)
{
    uint64_t old;
    if (answer_word(c, "x ") || answer_num(c, UINT32_MAX - 1, 0, &old) || answer_id(c, ' ', &x->id))
        return -1;
    char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
    if (!nl)
        return answer_bad(c, "an excluded line is cut");
    *nl = '\0';
    x->cause = c->p;
    x->old_rank = (uint32_t)old;
    c->p = nl + 1;
    return 0;
}

/* Parse the header line into a; 0 or -1. */
static int answer_header(struct answer_cur *c, struct answer *a, uint64_t *nm, uint64_t *nx)
{
    uint64_t nodes, world;
    if (answer_word(c, "generation ") || answer_num(c, UINT64_MAX, 0, &a->generation) ||
        answer_word(c, "previous ") || answer_num(c, UINT64_MAX, 0, &a->previous) || answer_word(c, "nodes ") ||
        answer_num(c, UINT32_MAX, 0, &nodes) || answer_word(c, "world ") || answer_num(c, UINT32_MAX, 0, &world) ||
        answer_word(c, "members ") || answer_num(c, UINT32_MAX, 0, nm) || answer_word(c, "excluded ") ||
        answer_num(c, UINT32_MAX, 1, nx))
        return -1;
    size_t left = (size_t)(c->end - c->p);
    if (a->generation == 0 || a->generation <= a->previous || nodes == 0)
        return answer_bad(c, "the header's generations or node count are impossible");
    if ((*nm != 0 && *nm != nodes) || (a->previous == 0 && (*nm != 0 || *nx != 0)))
        return answer_bad(c, "the header's counts disagree");
    if (*nm > left / ANSWER_MIN_MEMBER || *nx > left / ANSWER_MIN_EXCLUDED)
        return answer_bad(c, "the header announces more lines than the text holds");
    a->nodes = (uint32_t)nodes;
    a->world = (uint32_t)world;
    return 0;
}

/* Parse everything after the magic into a. */
static int answer_body(struct answer_cur *c, struct answer *a)
{
    uint64_t nm, nx, rank = 0;
    if (answer_header(c, a, &nm, &nx))
        return -1;
    a->members = nm ? calloc((size_t)nm, sizeof *a->members) : NULL;
    a->excluded = nx ? calloc((size_t)nx, sizeof *a->excluded) : NULL;
    if ((nm && !a->members) || (nx && !a->excluded))
        return answer_bad(c, "out of memory");
    for (; a->n_members < nm; a->n_members++)
        if (answer_member_line(c, a->n_members, &rank, &a->members[a->n_members]))
            return -1;
    for (; a->n_excluded < nx; a->n_excluded++)
        if (answer_excluded_line(c, &a->excluded[a->n_excluded]))
            return -1;
    if (nm && rank != a->world)
        return answer_bad(c, "the members' ranks do not add up to the world size");
    if (c->p != c->end)
        return answer_bad(c, "text follows the last line");
    return 0;
}

/* Parse text into *a. */
int answer_parse(const char *text, size_t len, struct answer *a, const char **why)
{
    const size_t mlen = sizeof ANSWER_MAGIC - 1;
    struct answer_cur c = {0};
    memset(a, 0, sizeof *a);
    if (!text || len < mlen || memcmp(text, ANSWER_MAGIC, mlen) != 0) {
        if (why)
            *why = "not a world-change answer (no 'muster-answer 2' line)";
        return -1;
    }
    if (!(a->store = malloc(len + 1))) {
        if (why)
            *why = "out of memory";
        return -1;
    }
    memcpy(a->store, text, len);
    a->store[len] = '\0';
    c.p = a->store + mlen;
    c.end = a->store + len;
    if (answer_body(&c, a) != 0) {
        if (why)
            *why = c.why ? c.why : "malformed";
        answer_free(a);
        return -1;
    }
    return 0;
}

/* Free what answer_parse filled in. */
void answer_free(struct answer *a)
{
    free(a->members);
    free(a->excluded);
    free(a->store);
    memset(a, 0, sizeof *a);
}

/* The member whose id is id. */
const struct answer_member *answer_member_of(const struct answer *a, const char *id)
{
    for (size_t i = 0; i < a->n_members; i++)
        if (strcmp(a->members[i].id, id) == 0)
            return &a->members[i];
    return NULL;
}

/* The excluded entry whose id is id. */
const struct answer_excluded *answer_excluded_of(const struct answer *a, const char *id)
{
    for (size_t i = 0; i < a->n_excluded; i++)
        if (strcmp(a->excluded[i].id, id) == 0)
            return &a->excluded[i];
    return NULL;
}
