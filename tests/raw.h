/*
 * Raw-socket helpers for tests that speak the wire protocol by hand: send
 * arbitrary bytes, send framed ClientFrames packed with the generated
 * protobuf-c code, and read one ServerFrame under a timeout.  Used where
 * libmuster would hide what is being tested (pipelining, hostile input).
 */
#ifndef MUSTER_TEST_RAW_H
#define MUSTER_TEST_RAW_H

#include <stddef.h>
#include <stdint.h>

#include <muster/muster.h>

#include "muster.pb-c.h"

/* Why raw_recv() returned no frame. */
enum raw_why { RAW_OK = 0, RAW_TIMEOUT, RAW_EOF, RAW_BADFRAME };

/* Connect to 127.0.0.1:port; returns the fd or -1. */
int raw_connect(uint16_t port);
/* Connect to 127.0.0.1:port from source address src (another 127.x address; NULL: any); fd or -1. */
int raw_connect_from(uint16_t port, const char *src);
/* Write all n bytes; 0 on success, -1 when the peer is gone. */
int raw_send(int fd, const void *buf, size_t n);
/* Frame and send one ClientFrame. */
int raw_send_frame(int fd, const Muster__ClientFrame *f);
/* Wrap a Request in a ClientFrame and send it. */
int raw_send_request(int fd, Muster__Request *r);
/* Send Hello without reading the answer; 0, or -1 when the peer is gone. */
int raw_send_hello(int fd, const char *ns, const char *token);
/* Send Hello and read the answer: 0 on HelloReply, else the error status, or -1 on timeout/close. */
int raw_hello(int fd, const char *ns, const char *token);
/* Connect and complete a hello in namespace ns; returns the fd or -1. */
int raw_open(uint16_t port, const char *ns);
/* Read one ServerFrame within timeout_ms; NULL with *why set otherwise (why may be NULL). */
Muster__ServerFrame *raw_recv(int fd, int timeout_ms, enum raw_why *why);
/* Read frames until the peer closes; 1 when it closed within timeout_ms, else 0. */
int raw_await_close(int fd, int timeout_ms);
/* Free a frame from raw_recv(); NULL is fine. */
void raw_free(Muster__ServerFrame *f);

/* Send set key=value with request id. */
int raw_set(int fd, uint64_t id, const char *key, const void *value, size_t len);
/* Send get key (wait, timeout_ms) with request id. */
int raw_get(int fd, uint64_t id, const char *key, int wait, uint32_t timeout_ms);
/* Send ping with request id. */
int raw_ping(int fd, uint64_t id);
/* Read frames until a Response arrives (events are skipped); NULL on timeout/close. */
Muster__ServerFrame *raw_response(int fd, int timeout_ms);
/* Read one Response and return its status; -1 when none came. *id (may be NULL) gets its id. */
int raw_status(int fd, int timeout_ms, uint64_t *id);

#endif
