/*
 * libFuzzer target for the world-change answer's parser (proto/answer.c),
 * the text every worker reads from the store: any input either fails, or
 * yields lists no longer than the text allows whose ranks add up, and the
 * answer formatted again parses back to the same lists.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "answer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort unless a and b hold the same answer. */
static void fuzz_answer_same(const struct answer *a, const struct answer *b)
{
    if (a->generation != b->generation || a->previous != b->previous || a->nodes != b->nodes ||
        a->world != b->world || a->n_members != b->n_members || a->n_excluded != b->n_excluded)
        abort();
    for (size_t i = 0; i < a->n_members; i++)
        if (strcmp(a->members[i].id, b->members[i].id) != 0 || a->members[i].old_rank != b->members[i].old_rank ||
            a->members[i].rank_start != b->members[i].rank_start)
            abort();
    for (size_t i = 0; i < a->n_excluded; i++)
        if (strcmp(a->excluded[i].id, b->excluded[i].id) != 0 || a->excluded[i].old_rank != b->excluded[i].old_rank)
            abort();
}

/* Parse one input, check what it yields, and round-trip it. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct answer a, b;
    char *text = NULL;
    size_t len = 0;
    uint64_t ranks = 0;
    if (answer_parse((const char *)data, size, &a, NULL) != 0)
        return 0;
    if (a.n_members * 14 > size || a.n_excluded * 9 > size)
        abort();   /* more entries than the text can hold: the parser trusted a count */
    for (size_t i = 0; i < a.n_members; i++) {
        if (strlen(a.members[i].id) == 0 || strlen(a.members[i].id) > ANSWER_ID_MAX)
            abort();
        ranks += a.members[i].local_world_size;
    }
    if (a.n_members && ranks != a.world)
        abort();
    if (answer_format(a.generation, a.previous, a.nodes, a.world, a.members, a.n_members, a.excluded, a.n_excluded,
                      &text, &len) == 0) {
        if (answer_parse(text, len, &b, NULL) != 0)
            abort();
        fuzz_answer_same(&a, &b);
        answer_free(&b);
        free(text);
    }
    answer_free(&a);
    return 0;
}
