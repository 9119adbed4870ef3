/*
 * The floor servers' share of the native protocol (muster-floord, muster-floord-uring): just
 * enough for muster-loadgen.  A Hello gets a canned HelloReply, every Request gets
 * Response{id, get{64-byte value}} (the same bytes musterd sends for a get); and the
 * listener both serve on.
 */
#ifndef MUSTER_BENCH_FLOORPROTO_H
#define MUSTER_BENCH_FLOORPROTO_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes read per wakeup, and the most one connection may have unsent or half received. */
#define FLOOR_BUF 16384
#define FLOOR_VALUE 64

/* Append one reply frame for a request frame body; returns bytes written or 0 when out of room. */
size_t floor_reply(uint8_t *out, size_t room, const uint8_t *body, uint32_t blen);
/* Answer the whole frames at in[0..have) into out (room bytes); *used: the input bytes taken.  The
 * bytes written, or -1 for a frame over FLOOR_BUF (the connection is to be dropped). */
long floor_answer(const uint8_t *in, uint32_t have, uint8_t *out, size_t room, uint32_t *used);
/* Set by SIGTERM or SIGINT once floor_begin ran: the server's loop ends. */
extern volatile sig_atomic_t floor_stop;

/* Check prog's command line (--port-file PATH), ignore SIGPIPE and stop on SIGTERM/SIGINT (floor_stop);
 * 0, or 2 after printing the usage. */
int floor_begin(const char *prog, int argc, char **argv);
/* Listen on 127.0.0.1 (nonblocking: nb), port from the kernel, TCP_NODELAY, and write the port to
 * path; the socket, or -1 (said on stderr as prog). */
int floor_listen(const char *prog, const char *path, int nb);

#endif
