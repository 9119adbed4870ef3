/*
 * The world-change answer: what musterd decided when it formed a
 * generation, stored once under muster/rdzv/<generation>/answer
 * (proto/keys.h) in the same loop turn as, and before, the generation key.
 * Workers read it to learn their place in the new world
 * (include/muster/world.h).  Text, so an operator can read it with
 * `muster get`:
 *
 *     muster-answer 2
 *     generation G previous P nodes N world W members M excluded X
 *     m NODE_RANK RANK_START LOCAL_WORLD_SIZE OLD_NODE_RANK|- IDLEN NODE_ID     (M lines, node order)
 *     x OLD_NODE_RANK IDLEN NODE_ID CAUSE                                      (X lines)
 *
 * previous is 0 for a generation a plain round formed (nobody stays in
 * place: "no recovery"); such an answer lists no members (M = 0) and no
 * excluded nodes.  A recovery lists every member (M = N): survivors first,
 * in their order in P, with their rank in P; then newcomers and standbys
 * ("-").  Node ids are length-prefixed, so any byte but a NUL may appear in
 * one; a cause ends its line (the writer turns newlines into spaces).
 *
 * libc only: musterd's core formats it, libmuster parses it, and the fuzz
 * target feeds the parser hostile text.  The parser never allocates more
 * than the text's own size allows.
 */
#ifndef MUSTER_PROTO_ANSWER_H
#define MUSTER_PROTO_ANSWER_H

#include <stddef.h>
#include <stdint.h>

/* A node's old rank when it has none (a newcomer or an admitted standby). */
#define ANSWER_NO_RANK UINT32_MAX
/* The longest node id, in bytes. */
#define ANSWER_ID_MAX 127

/* One member of the new generation. */
struct answer_member {
    const char *id;
    uint32_t node_rank, rank_start, local_world_size;
    uint32_t old_rank; /* its node rank in the previous generation, or ANSWER_NO_RANK */
};

/* One member of the previous generation that the new one left out, and why. */
struct answer_excluded {
    const char *id;
    uint32_t old_rank;
    const char *cause;
};

/* A parsed answer; its strings point into store.  Free with answer_free. */
struct answer {
    uint64_t generation, previous;
    uint32_t nodes, world;
    size_t n_members, n_excluded;
    struct answer_member *members;
    struct answer_excluded *excluded;
    char *store;
};

/* Format an answer into *out (malloc'd, *len bytes, NUL-terminated); members: n_members (0 or nodes),
 * excluded: n_excluded.  0, or -1 when out of memory or an id is empty or too long. */
int answer_format(uint64_t generation, uint64_t previous, uint32_t nodes, uint32_t world,
                  const struct answer_member *members, size_t n_members, const struct answer_excluded *excluded,
                  size_t n_excluded, char **out, size_t *len);
/* Parse text (len bytes) into *a; 0, or -1 when it is not a well-formed answer (why: a static phrase,
 * may be NULL) or memory ran out.  On failure *a holds nothing to free. */
int answer_parse(const char *text, size_t len, struct answer *a, const char **why);
/* Free what answer_parse filled in; safe on a zeroed answer. */
void answer_free(struct answer *a);
/* The member whose id is id, or NULL. */
const struct answer_member *answer_member_of(const struct answer *a, const char *id);
/* The excluded entry whose id is id, or NULL. */
const struct answer_excluded *answer_excluded_of(const struct answer *a, const char *id);

#endif
