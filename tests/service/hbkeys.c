/* Keys that differ only after a NUL byte, over TCPStore's wire; see hbkeys.h. */
#include "hbkeys.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "../tcpstore/tswire.h"

/* How long one reply may take. */
#define HBK_MS 5000

const struct bkey HBK_NUL = {"rank\0/7", 7}, HBK_PLAIN = {"rank", 4}, HBK_TRAIL = {"rank\0", 5},
                  HBK_GONE = {"rank\0/gone", 10};

/* Send a TCPStore request of type with one key and an optional value. */
void hbk_send_key(int fd, int type, struct bkey k, const char *val)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, (uint8_t)type);
    tsw_u64(&b, k.len);
    tsw_raw(&b, k.k, k.len);
    if (val) {
        tsw_u64(&b, strlen(val));
        tsw_raw(&b, val, strlen(val));
    }
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
}

/* Round trip a ping, so everything sent before it has been handled (and, held replies, made durable). */
void hbk_sync(int fd)
{
    struct tsw_buf b = {0};
    uint8_t echo[4], want[4] = {7, 0, 0, 0};
    tsw_u8(&b, TSW_PING);
    tsw_u32(&b, 7);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    CHECK_EQ(tsw_read(fd, echo, sizeof echo, HBK_MS), 0);
    CHECK_MEM(echo, sizeof echo, want, sizeof want);
}

/* Set the four keys on fd (HBK_GONE then deleted) and sync. */
void hbk_write_all(int fd)
{
    hbk_send_key(fd, TSW_SET, HBK_NUL, "seven");
    hbk_send_key(fd, TSW_SET, HBK_PLAIN, "zero");
    hbk_send_key(fd, TSW_SET, HBK_TRAIL, "trailing");
    hbk_send_key(fd, TSW_SET, HBK_GONE, "doomed");
    hbk_send_key(fd, TSW_DELETE_KEY, HBK_GONE, NULL);
    int ok = 0;
    CHECK_EQ(tsw_i64(fd, HBK_MS, &ok), 1);
    hbk_sync(fd);
}

/* Check that key k holds want (NULL: absent) through CHECK and GET. */
void hbk_expect(int fd, struct bkey k, const char *want)
{
    struct tsw_buf b = {0};
    tsw_u8(&b, TSW_CHECK);
    tsw_u64(&b, 1);
    tsw_u64(&b, k.len);
    tsw_raw(&b, k.k, k.len);
    CHECK_EQ(tsw_send(fd, &b), 0);
    tsw_free(&b);
    CHECK_EQ(tsw_byte(fd, HBK_MS), want ? 0 : 1); /* READY, NOT_READY */
    if (!want)
        return;
    hbk_send_key(fd, TSW_GET, k, NULL);
    size_t len = 0;
    char *v = tsw_blob(fd, HBK_MS, &len);
    CHECK(v != NULL);
    if (v)
        CHECK_MEM(v, len, want, strlen(want));
    free(v);
}

/* Check what hbk_write_all left, on the TCPStore listener at port. */
void hbk_expect_all(unsigned port)
{
    int fd = tsw_open((uint16_t)port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    hbk_expect(fd, HBK_NUL, "seven");
    hbk_expect(fd, HBK_PLAIN, "zero");
    hbk_expect(fd, HBK_TRAIL, "trailing");
    hbk_expect(fd, HBK_GONE, NULL);
    close(fd);
}
