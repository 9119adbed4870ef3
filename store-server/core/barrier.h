/* Reusable named barriers per namespace: the count-th arrival releases its round. */
#ifndef MUSTERD_BARRIER_H
#define MUSTERD_BARRIER_H

#include <stddef.h>
#include <stdint.h>

struct ns;
struct core_timer;
struct barrier_arrival;

/* Called once per arrival with OK (round and arrival number filled), TIMEOUT or SHUTTING_DOWN;
 * the arrival is freed when it returns. */
typedef void (*barrier_done_fn)(struct barrier_arrival *a, int status, uint64_t round, uint32_t arrival);

struct barrier_arrival {
    struct barrier *b;
    barrier_done_fn done;
    void *owner;
    struct core_share *share; /* whom the arrival is charged to besides its namespace, or NULL */
    uint64_t id;
    uint32_t arrival; /* 1-based position in the round */
    uint32_t timeout_ms;
    struct core_timer *timer;
    struct barrier_arrival *prev, *next;
    char fetch[]; /* the key whose value the release answers with ("" for none) */
};

/* Arrive at barrier name of ns (fetch: a key, or NULL), parked in share (the owner's count of parked
 * requests, or NULL) and the namespace's.  Returns a core status; on OK *out is the parked arrival, or NULL
 * when this arrival released the round (done was already called for every arrival, this one too). */
int barrier_arrive(struct ns *ns, const char *name, size_t nlen, uint32_t count, uint32_t timeout_ms, const char *fetch,
                   barrier_done_fn done, void *owner, struct core_share *share, uint64_t id, struct barrier_arrival **out,
                   const char **why);
/* Take an arrival out of its round without calling done (its owner went away). */
void barrier_cancel(struct barrier_arrival *a);
/* Complete every parked arrival of ns with status (SHUTTING_DOWN on drain). */
void barrier_fail_all(struct ns *ns, int status);
/* Free every barrier of ns (at exit). */
void barrier_ns_destroy(struct ns *ns);
/* The parked arrivals of b's open round, in arrival order (linked through next). */
const struct barrier_arrival *barrier_arrivals(const struct barrier *b);
/* A barrier's name and the open round's expected and arrived counts (for a timeout's words). */
const char *barrier_name(const struct barrier *b, uint32_t *count, uint32_t *arrived);

#endif
