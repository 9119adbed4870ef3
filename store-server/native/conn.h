/* Client connections: framing, hello, output with backpressure, parked request ids, replies and events. */
#ifndef MUSTERD_CONN_H
#define MUSTERD_CONN_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <uthash.h>

#include "conn_io.h"
#include "conn_life.h"
#include "core.h"
#include "frame.h"

struct server;
struct ns;
struct event;
struct rdzv_node;
struct source;
struct shared_bytes;

/* A request id parked on this connection (a blocking op); cancel frees its owner silently at close. */
struct conn_pending {
    UT_hash_handle hh;
    uint64_t id;
    void (*cancel)(void *arg);
    void *arg;
};

struct conn {
    struct conn_life life; /* first: socket, buffers, state, deadlines, the peer's address (conn_life.c) */
    struct server *srv;
    struct ns *ns; /* set by a successful hello */
    struct conn *prev, *next;
    /* Parked requests: the first in place (a member's join, a worker's wait: one at a time is the common
     * case, and a hash that empties frees its table, so each park and answer paid three allocations), the
     * others in the hash. */
    struct conn_pending first;
    int first_used;
    struct conn_pending *pending;
    int admitted;   /* counted in srv->nconns */
    size_t nwatches;
    struct core_share share; /* its parked requests, and its address's (--max-waiters-per-conn, -per-source) */
    struct source *src;      /* its address's entry (source.c), or NULL */
    struct rdzv_node *rdzv; /* rendezvous membership or parked join, owned by core/rdzv.c */
    Muster__ClientFrame *held; /* a hello waiting out its address's token backoff (hello.c) */
    struct event *held_ev;     /* when that wait ends */
    char name[64];
    char cred[40];          /* the rendezvous credential its hello presented ("" for none) */
    uint64_t follow_gen;    /* the generation whose break ends its waits (Hello.generation; 0 = none) */
};

/* The peer's address as text ("1.2.3.4:5" or "[::1]:5"), formatted on first use. */
const char *conn_peer(struct conn *c);

/* Take over an accepted socket; refuse it with a LIMIT error frame when over --max-connections. */
void conn_accept(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen);
/* As conn_accept, for a socket of a TLS listener (the handshake runs before the first frame). */
void conn_accept_tls(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen);
/* Send one ServerFrame whose body is head's bytes then tail's, the tail by reference; 0 on success. */
int conn_send_spliced(struct conn *c, const uint8_t *head, size_t hlen, struct shared_bytes *tail);
/* Pack one ServerFrame into the output buffer; 0 on success. */
int conn_send(struct conn *c, const Muster__ServerFrame *f);
/* Send one ServerFrame packed before (body: len bytes, the same for many connections); 0 on success. */
int conn_send_packed(struct conn *c, const uint8_t *body, size_t len);
/* Send Response{id, status, msg, result}; result (any *Res message, or NULL) picks the oneof case. */
void conn_reply(struct conn *c, uint64_t id, int status, const char *msg, const ProtobufCMessage *result);
/* Send an error Response whose message is formatted. */
void conn_replyf(struct conn *c, uint64_t id, int status, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Bytes queued for c and not yet written (including frames held for the log). */
size_t conn_output_len(const struct conn *c);
/* Push a server event (no request id). */
void conn_push_event(struct conn *c, const Muster__Event *ev);
/* Send ServerFrame{error{status, msg}}, then close once it is flushed. */
void conn_fail(struct conn *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Stop reading, flush what is queued, then close (used by the drain). */
void conn_finish(struct conn *c);
/* Close at once (freed on the next loop turn); parked requests are cancelled without replies. */
void conn_close(struct conn *c, const char *why);
/* Park request id with a cancel callback; -1 when the id is already pending or memory ran out. */
int conn_pending_add(struct conn *c, uint64_t id, void (*cancel)(void *arg), void *arg);
/* Forget parked request id (a no-op when it is not parked). */
void conn_pending_remove(struct conn *c, uint64_t id);
/* Whether request id is parked on c. */
int conn_pending_has(const struct conn *c, uint64_t id);
/* Whether frames can still be sent to c. */
int conn_live(const struct conn *c);
/* Free every connection at once, without replies (at exit). */
void conn_free_all(struct server *srv);

#endif
