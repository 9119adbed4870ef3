/*
 * Shared harness of the multi-connection fuzz targets (fuzz_conns.c,
 * fuzz_tcpstore.c): an in-process server without listeners, a few client
 * sockets handed to one of its accept functions through socketpairs, and
 * the loop turned by hand, so one input runs a whole interleaving in a few
 * milliseconds and ends with every connection closed and the server's
 * books checked.
 */
#ifndef MUSTER_FUZZ_NET_H
#define MUSTER_FUZZ_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "daemon.h"
#include "server.h"

/* Client connections one input may hold open at once. */
#define FZ_CONNS 4
/* Received bytes a client keeps unparsed; beyond this they are dropped (a flood of events). */
#define FZ_INBUF (256u * 1024)

/* What a server's accept function looks like (conn_accept, tcpstore_accept). */
typedef void (*fz_accept_fn)(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen);

/* One client's end of its socketpair and what it received. */
struct fz_client {
    int fd;        /* -1 when closed (a later use opens a fresh connection) */
    int deaf;      /* stopped reading: the server's output to it backs up */
    int eof;       /* the server closed its side */
    int lost;      /* received bytes were dropped unparsed: the stream can no longer be followed */
    int generation; /* how many connections this slot has opened */
    uint8_t *in;   /* received, not yet consumed by the target */
    size_t nin;
};

/* The harness: server, accept function, clients, and the target's parser of received bytes. */
struct fz_net {
    struct server srv;
    fz_accept_fn accept;
    struct fz_client c[FZ_CONNS];
    /* Consume what client i received (f->c[i].in, nin); returns bytes taken. */
    size_t (*consume)(struct fz_net *f, int i);
    void *arg;
};

/* Start a server from argv (argc entries, argv[0] a name) and clear the clients; aborts on failure. */
void fz_init(struct fz_net *f, int argc, char **argv, fz_accept_fn accept);
/* Connect client i when it is closed; returns its fd (-1 when a socketpair cannot be made). */
int fz_open(struct fz_net *f, int i);
/* Close client i's end (the server sees EOF); a no-op when closed. */
void fz_close(struct fz_net *f, int i);
/* Shut client i's write side (the server sees EOF, replies can still arrive). */
void fz_shutdown(struct fz_net *f, int i);
/* Send len bytes as client i, turning the loop while the socket is full; returns the bytes sent (fewer when
 * it stayed full or the server closed). */
size_t fz_send(struct fz_net *f, int i, const void *buf, size_t len);
/* Turn the loop and read every listening client until nothing moves for a few turns (or turns run out). */
void fz_pump(struct fz_net *f, int turns);
/* Sleep ms, then pump, so timers (deadlines, last calls) fire. */
void fz_tick(struct fz_net *f, int ms);
/* Close every client and turn the loop until the server freed every connection; 0, or -1 when some remain. */
int fz_close_all(struct fz_net *f);
/* Free the server and the clients' buffers. */
void fz_fini(struct fz_net *f);

#endif
