/* Keys that differ only after a NUL byte, written and checked over TCPStore's wire (tests of keys as bytes). */
#ifndef MUSTER_TEST_HBKEYS_H
#define MUSTER_TEST_HBKEYS_H

#include <stddef.h>

/* A key given with its length (it may hold NUL bytes). */
struct bkey {
    const char *k;
    size_t len;
};

/* "rank\0/7", "rank", "rank\0" and "rank\0/gone": four keys a NUL-cut store would mix up. */
extern const struct bkey HBK_NUL, HBK_PLAIN, HBK_TRAIL, HBK_GONE;

/* Send a TCPStore request of type with one key and an optional value. */
void hbk_send_key(int fd, int type, struct bkey k, const char *val);
/* Round trip a ping, so everything sent before it has been handled (and, held replies, made durable). */
void hbk_sync(int fd);
/* Set the four keys on fd (HBK_GONE then deleted) and sync; what hbk_expect_all checks. */
void hbk_write_all(int fd);
/* Check that key k holds want (NULL: absent) through CHECK and GET. */
void hbk_expect(int fd, struct bkey k, const char *want);
/* Check what hbk_write_all left, on the TCPStore listener at port. */
void hbk_expect_all(unsigned port);

#endif
