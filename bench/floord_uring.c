/*
 * muster-floord-uring: the floor through io_uring.  muster-floord's work (the same replies,
 * floorproto.c) with its system calls batched: every connection keeps one multishot receive
 * in the ring, filling buffers the kernel takes from a ring of provided buffers; replies go
 * out as sends; and one io_uring_enter per loop turn submits all of them, runs the deferred
 * completions (one issuer, task work deferred to it) and waits for the next.  The kernel's TCP work per request is the same; what
 * goes is one recvfrom and one write per request and the epoll_wait, which is what a server
 * making one read and one write per request cannot shed.  Its requests per CPU-second under
 * muster-loadgen (bench/cpu_per_op.sh) say how far past muster-floord an I/O layer of that
 * kind could take a server on this kernel.
 *
 *   muster-floord-uring --port-file PATH     (listens on 127.0.0.1, port chosen by the kernel)
 */
#include <errno.h>
#include <liburing.h>
#include <sys/mman.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "floorproto.h"

/* Submission and completion entries; a connection has at most two operations in the ring. */
#define URING_ENTRIES 4096
/* Provided receive buffers (a power of two) and their size; group id. */
#define URING_BUFS 1024
#define URING_BUF_SIZE 4096
#define URING_BGID 1

/* The provided buffers and the ring the kernel takes them from. */
static struct io_uring_buf_ring *uring_br;
static uint8_t *uring_bufs;

/* What a completion is about: the low bits of its user_data (connections are 8-byte aligned). */
enum uring_op { URING_ACCEPT = 1, URING_RECV = 2, URING_SEND = 3 };

/* A connection: a receive always in the ring, a send while output is unsent. */
struct uring_conn {
    int fd;
    uint32_t rlen;   /* bytes of a partial frame at the start of rbuf */
    uint32_t wlen;   /* output in wbuf; the first wsent bytes of it are in the ring or sent */
    uint32_t wsent;
    int sending;
    int recving;
    int closing;
    uint8_t rbuf[FLOOR_BUF];
    uint8_t wbuf[FLOOR_BUF];
};

/* A submission entry, submitting what is queued when the ring is full; NULL when none can be had. */
static struct io_uring_sqe *uring_sqe(struct io_uring *ring)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
    if (!sqe && io_uring_submit(ring) >= 0)
        sqe = io_uring_get_sqe(ring);
    return sqe;
}

/* Queue an accept on the listener. */
static void uring_accept(struct io_uring *ring, int lfd)
{
    struct io_uring_sqe *sqe = uring_sqe(ring);
    if (!sqe)
        return;
    io_uring_prep_accept(sqe, lfd, NULL, NULL, 0);
    io_uring_sqe_set_data64(sqe, URING_ACCEPT);
}

/* Queue c's multishot receive: it stays in the ring, one completion per buffer filled. */
static void uring_recv(struct io_uring *ring, struct uring_conn *c)
{
    struct io_uring_sqe *sqe = uring_sqe(ring);
    if (!sqe)
        return;
    io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = URING_BGID;
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | URING_RECV);
    c->recving = 1;
}

/* Give buffer bid back to the kernel. */
static void uring_buf_return(unsigned bid)
{
    io_uring_buf_ring_add(uring_br, uring_bufs + (size_t)bid * URING_BUF_SIZE, URING_BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(URING_BUFS), 0);
    io_uring_buf_ring_advance(uring_br, 1);
}

/* Register the provided buffers; 0, or a negative errno. */
static int uring_bufs_setup(struct io_uring *ring)
{
    size_t rsize = URING_BUFS * sizeof(struct io_uring_buf);
    void *r = mmap(NULL, rsize, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    uring_bufs = malloc((size_t)URING_BUFS * URING_BUF_SIZE);
    if (r == MAP_FAILED || !uring_bufs)
        return -ENOMEM;
    uring_br = r;
    io_uring_buf_ring_init(uring_br);
    struct io_uring_buf_reg reg = {.ring_addr = (uint64_t)(uintptr_t)r, .ring_entries = URING_BUFS, .bgid = URING_BGID};
    int rc = io_uring_register_buf_ring(ring, &reg, 0);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < URING_BUFS; i++)
        uring_buf_return(i);
    return 0;
}

/* Queue a send of c's unsent output, unless one is in the ring. */
static void uring_send(struct io_uring *ring, struct uring_conn *c)
{
    if (c->sending || c->wsent == c->wlen)
        return;
    struct io_uring_sqe *sqe = uring_sqe(ring);
    if (!sqe)
        return;
    io_uring_prep_send(sqe, c->fd, c->wbuf + c->wsent, c->wlen - c->wsent, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)c | URING_SEND);
    c->sending = 1;
}

/* Close c once nothing of it is left in the ring. */
static void uring_close(struct uring_conn *c)
{
    c->closing = 1;
    if (c->recving || c->sending)
        return;
    close(c->fd);
    free(c);
}

/* Answer the whole frames c holds into its output (as many as it has room for: a pipelining client's
 * burst can fill it, and the rest waits for a send to complete) and send; 0, or -1 when c was closed. */
static int uring_answer(struct io_uring *ring, struct uring_conn *c)
{
    uint32_t used = 0;
    long wn = floor_answer(c->rbuf, c->rlen, c->wbuf + c->wlen, FLOOR_BUF - c->wlen, &used);
    if (wn < 0) {
        uring_close(c);
        return -1;
    }
    c->wlen += (uint32_t)wn;
    c->rlen -= used;
    memmove(c->rbuf, c->rbuf + used, c->rlen);
    uring_send(ring, c);
    return 0;
}

/* A receive completed with res bytes in a provided buffer (or an error, or the end of the multishot):
 * answer every whole frame, send, and receive again when the kernel ended the multishot. */
static void uring_on_recv(struct io_uring *ring, struct uring_conn *c, const struct io_uring_cqe *cqe)
{
    int res = cqe->res;
    if (!(cqe->flags & IORING_CQE_F_MORE))
        c->recving = 0;
    if (res > 0 && (cqe->flags & IORING_CQE_F_BUFFER)) {
        unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
        if (c->rlen + (uint32_t)res > FLOOR_BUF)
            res = -EMSGSIZE;
        else
            memcpy(c->rbuf + c->rlen, uring_bufs + (size_t)bid * URING_BUF_SIZE, (size_t)res);
        uring_buf_return(bid);
    }
    if (res == -ENOBUFS && !c->closing) { /* every buffer was in use: receive again */
        if (!c->recving)
            uring_recv(ring, c);
        return;
    }
    if (res <= 0 || c->closing) {
        uring_close(c);
        return;
    }
    c->rlen += (uint32_t)res;
    if (uring_answer(ring, c) == 0 && !c->recving)
        uring_recv(ring, c);
}

/* A send completed with res bytes (or an error): drop what went, send the rest. */
static void uring_on_send(struct io_uring *ring, struct uring_conn *c, int res)
{
    c->sending = 0;
    if (res < 0 || c->closing) {
        uring_close(c);
        return;
    }
    c->wsent += (uint32_t)res;
    if (c->wsent == c->wlen)
        c->wsent = c->wlen = 0;
    uring_send(ring, c);
    if (c->rlen && c->wlen == 0) /* frames that waited for room in the output */
        uring_answer(ring, c);
}

/* Take one completion. */
static void uring_complete(struct io_uring *ring, int lfd, const struct io_uring_cqe *cqe)
{
    uint64_t d = io_uring_cqe_get_data64(cqe);
    struct uring_conn *c = (struct uring_conn *)(uintptr_t)(d & ~(uint64_t)7);
    switch (d & 7) {
    case URING_ACCEPT:
        if (cqe->res >= 0 && (c = calloc(1, sizeof *c))) {
            c->fd = cqe->res;
            uring_recv(ring, c);
        } else if (cqe->res >= 0) {
            close(cqe->res);
        }
        uring_accept(ring, lfd);
        break;
    case URING_RECV:
        uring_on_recv(ring, c, cqe);
        break;
    case URING_SEND:
        uring_on_send(ring, c, cqe->res);
        break;
    }
}

/* Listen, write the port file, serve until a signal: one io_uring_enter per turn. */
int main(int argc, char **argv)
{
    if (floor_begin("muster-floord-uring", argc, argv) != 0)
        return 2;
    struct io_uring ring;
    /* One thread submits, and completions run when it enters the kernel: no task work interrupts it
     * (kernels before 6.1 lack the flags: then the plain setup). */
    int rc = io_uring_queue_init(URING_ENTRIES, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
    if (rc == -EINVAL)
        rc = io_uring_queue_init(URING_ENTRIES, &ring, 0);
    if (rc >= 0)
        rc = uring_bufs_setup(&ring);
    if (rc < 0) {
        fprintf(stderr, "muster-floord-uring: io_uring setup: %s\n", strerror(-rc));
        return 1;
    }
    int lfd = floor_listen("muster-floord-uring", argv[2], 0);
    if (lfd < 0)
        return 1;
    uring_accept(&ring, lfd);
    struct __kernel_timespec tick = {.tv_sec = 0, .tv_nsec = 200000000};
    while (!floor_stop) {
        struct io_uring_cqe *cqe;
        rc = io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &tick, NULL);
        if (rc < 0 && rc != -ETIME && rc != -EINTR) {
            fprintf(stderr, "muster-floord-uring: io_uring_submit_and_wait: %s\n", strerror(-rc));
            return 1;
        }
        unsigned head, n = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            uring_complete(&ring, lfd, cqe);
            n++;
        }
        io_uring_cq_advance(&ring, n);
    }
    io_uring_queue_exit(&ring);
    return 0;
}
