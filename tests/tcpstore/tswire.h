/*
 * Byte-level helpers for tests of musterd's TCPStore listener: start a
 * daemon with the listener, build requests byte by byte (little-endian u64
 * lengths, as torch sends them), and read untagged replies under a timeout.
 */
#ifndef MUSTER_TEST_TSWIRE_H
#define MUSTER_TEST_TSWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "harness.h"

/* VALIDATE-era type bytes. */
enum {
    TSW_VALIDATE = 0,
    TSW_SET = 1,
    TSW_COMPARE_SET = 2,
    TSW_GET = 3,
    TSW_ADD = 4,
    TSW_CHECK = 5,
    TSW_WAIT = 6,
    TSW_GETNUMKEYS = 7,
    TSW_DELETE_KEY = 8,
    TSW_APPEND = 9,
    TSW_MULTI_GET = 10,
    TSW_MULTI_SET = 11,
    TSW_CANCEL_WAIT = 12,
    TSW_PING = 13,
    TSW_QUEUE_PUSH = 14,
    TSW_QUEUE_POP = 15,
    TSW_QUEUE_LEN = 16,
    TSW_LIST_KEYS = 17,
    TSW_BARRIER = 18,
};

/* Old-numbering type bytes (torch 1.x-2.0, no handshake). */
enum {
    TSW_OLD_SET = 0,
    TSW_OLD_COMPARE_SET = 1,
    TSW_OLD_GET = 2,
    TSW_OLD_ADD = 3,
    TSW_OLD_CHECK = 4,
    TSW_OLD_WAIT = 5,
    TSW_OLD_GETNUMKEYS = 6,
    TSW_OLD_WATCH_KEY = 7,
    TSW_OLD_DELETE_KEY = 8,
    TSW_OLD_APPEND = 9,
    TSW_OLD_MULTI_GET = 10,
    TSW_OLD_MULTI_SET = 11,
    TSW_OLD_CANCEL_WAIT = 12,
};

/* A request being built. */
struct tsw_buf {
    uint8_t *p;
    size_t n, cap;
};

/* Start musterd with a TCPStore listener (plus extra, NULL-terminated, may be NULL); its port or 0. */
uint16_t tsw_start(struct h_daemon *d, const char *const *extra);
/* Connect to the listener; fd or -1. */
int tsw_connect(uint16_t port);
/* Connect and send the VALIDATE handshake; fd or -1. */
int tsw_open(uint16_t port);

/* Append a byte, a little-endian u32 / u64, a length-prefixed string, or raw bytes. */
void tsw_u8(struct tsw_buf *b, uint8_t v);
void tsw_u32(struct tsw_buf *b, uint32_t v);
void tsw_u64(struct tsw_buf *b, uint64_t v);
void tsw_str(struct tsw_buf *b, const char *s);
void tsw_raw(struct tsw_buf *b, const void *p, size_t n);
/* Send the buffer and empty it; 0 on success. */
int tsw_send(int fd, struct tsw_buf *b);
/* Free the buffer. */
void tsw_free(struct tsw_buf *b);

/* Send one request: type byte then strings (NULL-terminated list); 0 on success. */
int tsw_req(int fd, int type, ...);

/* Read exactly n bytes within timeout_ms; 0 on success. */
int tsw_read(int fd, void *buf, size_t n, int timeout_ms);
/* Send a WAIT of one key; 0, or -1 when the peer is gone. */
int tsw_send_wait(int fd, const char *key);
/* Read one byte reply; -1 when none came. */
int tsw_byte(int fd, int timeout_ms);
/* Read a little-endian i64 reply; *ok says whether it came. */
int64_t tsw_i64(int fd, int timeout_ms, int *ok);
/* Read a length-prefixed value into a malloc'd NUL-terminated buffer; NULL when none came. */
char *tsw_blob(int fd, int timeout_ms, size_t *len);
/* 1 when nothing at all arrives within ms (and the connection is still open). */
int tsw_quiet(int fd, int ms);
/* 1 when the server closes the connection within ms (any bytes before EOF are discarded). */
int tsw_closed(int fd, int ms);

#endif
