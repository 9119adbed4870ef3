/*
 * The recovery answer a `muster run --recovery in-place` launcher publishes
 * for its workers (proto/keys.h, KEYS_RUN_ANSWER_FMT), as text: the same
 * for every node of the generation, so each launcher may write it.
 *
 *     muster-answer 1
 *     generation G previous P nodes N world W excluded X
 *     m NODE_RANK RANK_START LOCAL_WORLD_SIZE OLD_NODE_RANK|- NODE_ID     (N lines, in node order)
 *     x OLD_NODE_RANK NODE_ID                                          (X lines)
 *
 * The node id ends its line (it may hold spaces, not a newline).  The
 * launcher formats it (run_effects.c); libmuster parses it back into the
 * assignment one node got (muster_run_answer, client/rdzv.c).  Pure C, no
 * store: the unit test links it alone.  Causes of exclusion are not kept.
 */
#ifndef MUSTER_RUN_ANSWER_H
#define MUSTER_RUN_ANSWER_H

#include <stddef.h>

#include <muster/rdzv.h>

/* Format a's shared part (it must list its members); *out is malloc'd text of *len bytes.  MUSTER_OK,
 * MUSTER_EINVAL (no members list, a node id holding a newline) or MUSTER_ENOMEM. */
int run_answer_format(const muster_assignment *a, char **out, size_t *len);
/* Parse text (len bytes) into the assignment node node_id got, members and excluded list included;
 * *out is freed with muster_assignment_free.  MUSTER_OK, MUSTER_EPROTO (not such a text),
 * MUSTER_EEXCLUDED (node_id is in the excluded list), MUSTER_ENOTFOUND (node_id is in neither list),
 * MUSTER_EINVAL or MUSTER_ENOMEM. */
int run_answer_parse(const char *text, size_t len, const char *node_id, muster_assignment **out);

#endif
