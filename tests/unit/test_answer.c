/*
 * Unit tests of the world-change answer's text form (proto/answer.c): what
 * musterd writes parses back the same, whatever bytes a node id holds, and
 * text that is not an answer (cut, reordered, counts the text cannot hold,
 * numbers out of range) is refused with a reason and no allocation beyond
 * its own size.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"
#include "harness.h"

/* Format, then parse into *a; the text is freed. */
static int roundtrip(uint64_t gen, uint64_t prev, uint32_t nodes, uint32_t world, const struct answer_member *mv,
                     size_t nm, const struct answer_excluded *xv, size_t nx, struct answer *a)
{
    char *text = NULL;
    size_t len = 0;
    if (answer_format(gen, prev, nodes, world, mv, nm, xv, nx, &text, &len) != 0)
        return -1;
    int rc = answer_parse(text, len, a, NULL);
    free(text);
    return rc;
}

/* A recovery: survivors, a newcomer whose id holds a space and a newline, an excluded node with a
 * multi-line cause; every field comes back. */
static void t_roundtrip(void *unused)
{
    (void)unused;
    struct answer_member mv[] = {{"n0", 0, 0, 2, 0}, {"n 2", 1, 2, 2, 2}, {"new\nline", 2, 4, 1, ANSWER_NO_RANK}};
    struct answer_excluded xv[] = {{"n1", 1, "closed its\nconnection"}};
    struct answer a;
    char *text = NULL;
    size_t len = 0;
    /* The layout itself (readers of older versions parse it): numbers in decimal, ids after their length. */
    CHECK_EQ(answer_format(5, 4, 3, 5, mv, 3, xv, 1, &text, &len), 0);
    CHECK_STR(text, "muster-answer 2\ngeneration 5 previous 4 nodes 3 world 5 members 3 excluded 1\n"
                    "m 0 0 2 0 2 n0\nm 1 2 2 2 3 n 2\nm 2 4 1 - 8 new\nline\nx 1 2 n1 closed its connection\n");
    CHECK_EQ(len, strlen(text));
    free(text);
    CHECK_EQ(roundtrip(5, 4, 3, 5, mv, 3, xv, 1, &a), 0);
    CHECK_EQ(a.generation, 5);
    CHECK_EQ(a.previous, 4);
    CHECK_EQ(a.n_members, 3);
    CHECK_STR(a.members[1].id, "n 2");
    CHECK_STR(a.members[2].id, "new\nline");
    CHECK_EQ(a.members[2].old_rank, ANSWER_NO_RANK);
    CHECK_EQ(a.members[1].rank_start, 2);
    CHECK_STR(a.excluded[0].cause, "closed its connection");
    CHECK(answer_member_of(&a, "new\nline") == &a.members[2]);
    CHECK(answer_excluded_of(&a, "n1") == &a.excluded[0]);
    CHECK(answer_member_of(&a, "n1") == NULL);
    answer_free(&a);
    /* A plain round: no lists, O(1) bytes whatever the job's size. */
    CHECK_EQ(roundtrip(1, 0, 100000, 800000, NULL, 0, NULL, 0, &a), 0);
    CHECK_EQ(a.nodes, 100000);
    CHECK_EQ(a.n_members, 0);
    answer_free(&a);
    /* The writer refuses ids the reader could not take back. */
    struct answer_member empty[] = {{"", 0, 0, 1, 0}};
    text = NULL;
    CHECK_EQ(answer_format(2, 1, 1, 1, empty, 1, NULL, 0, &text, &len), -1);
}

/* Parse text, expecting a refusal whose reason holds want. */
static void refused(const char *text, const char *want)
{
    struct answer a;
    const char *why = NULL;
    CHECK_EQ(answer_parse(text, strlen(text), &a, &why), -1);
    CHECK(why != NULL && strstr(why, want) != NULL);
    if (why && !strstr(why, want))
        printf("'%s' gave: %s\n", text, why);
    CHECK(a.members == NULL && a.store == NULL);
}

/* Hostile and broken texts. */
static void t_refusals(void *unused)
{
    (void)unused;
    refused("", "not a world-change answer");
    refused("muster-answer 1\ngeneration 2 previous 1 nodes 1 world 1 excluded 0\n", "not a world-change answer");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 1 members 1 excluded 0\n", "more lines");
    /* A count that would make the reader reserve terabytes is bounded by the text's own size. */
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 4000000000 world 1 members 4000000000 excluded 0\n"
            "m 0 0 1 0 1 a\n", "more lines");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 1 members 1 excluded 4000000000\n"
            "m 0 0 1 0 1 a\n", "more lines");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 1 members 1 excluded 0\nm 0 0 1 0 9 a\n", "cut");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 2 world 2 members 2 excluded 0\n"
            "m 1 0 1 0 1 a\nm 0 1 1 1 1 b\n", "node order");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 5 members 1 excluded 0\nm 0 0 1 0 1 a\n",
            "add up");
    refused("muster-answer 2\ngeneration 2 previous 2 nodes 1 world 1 members 0 excluded 0\n", "impossible");
    refused("muster-answer 2\ngeneration 2 previous 0 nodes 1 world 1 members 1 excluded 0\nm 0 0 1 - 1 a\n",
            "disagree");
    refused("muster-answer 2\ngeneration 99999999999999999999 previous 1 nodes 1 world 1 members 0 excluded 0\n",
            "out of range");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 1 members 0 excluded 0\nextra\n", "follows");
    refused("muster-answer 2\ngeneration 2 previous 1 nodes 1 world 1 members 1 excluded 0\nm 0 0 1 0 200 a\n",
            "out of range");   /* an id longer than any node id */
}

int main(void)
{
    h_init("answer", 30);
    H_RUN(t_roundtrip, NULL);
    H_RUN(t_refusals, NULL);
    return h_finish();
}
