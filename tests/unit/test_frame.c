/*
 * Unit tests of the frame codec (proto/frame.c): the 4-byte big-endian
 * length prefix and packing a message behind it.
 */
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "harness.h"

/* Lengths survive a put/read round trip and are laid out big-endian. */
static void t_len_roundtrip(void *unused)
{
    static const uint32_t lens[] = {0, 1, 255, 256, 65535, 65536, 0x01020304u, 0x7fffffffu, 0xffffffffu};
    uint8_t hdr[FRAME_HDR];
    (void)unused;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        frame_put_len(hdr, lens[i]);
        CHECK_EQ(frame_len(hdr), lens[i]);
    }
    frame_put_len(hdr, 0x01020304u);
    CHECK(hdr[0] == 1 && hdr[1] == 2 && hdr[2] == 3 && hdr[3] == 4);
}

/* A header read from raw bytes uses all four bytes, high byte first. */
static void t_len_from_bytes(void *unused)
{
    static const uint8_t ff[4] = {0xff, 0xff, 0xff, 0xff};
    static const uint8_t http[4] = {'G', 'E', 'T', ' '};
    static const uint8_t small[4] = {0, 0, 0, 7};
    (void)unused;
    CHECK_EQ(frame_len(ff), 0xffffffffu);
    CHECK_EQ(frame_len(http), 0x47455420u);
    CHECK_EQ(frame_len(small), 7);
}

/* A packed Hello frame carries its exact length and unpacks to the same fields. */
static void t_pack_hello(void *unused)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT, *back;
    Muster__Hello h = MUSTER__HELLO__INIT;
    uint8_t *buf;
    size_t n;
    (void)unused;
    h.protocol_version = 1;
    h.namespace_ = (char *)"job-7";
    h.token = (char *)"s3cret";
    h.client_name = (char *)"rank 3";
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &h;
    n = frame_size(&f.base);
    CHECK_EQ(n, FRAME_HDR + muster__client_frame__get_packed_size(&f));
    buf = malloc(n);
    CHECK_EQ(frame_pack(&f.base, buf), n);
    CHECK_EQ(frame_len(buf), n - FRAME_HDR);
    back = muster__client_frame__unpack(NULL, n - FRAME_HDR, buf + FRAME_HDR);
    CHECK(back != NULL);
    if (back) {
        CHECK_EQ(back->frame_case, MUSTER__CLIENT_FRAME__FRAME_HELLO);
        CHECK_EQ(back->hello->protocol_version, 1);
        CHECK_STR(back->hello->namespace_, "job-7");
        CHECK_STR(back->hello->token, "s3cret");
        CHECK_STR(back->hello->client_name, "rank 3");
        muster__client_frame__free_unpacked(back, NULL);
    }
    free(buf);
}

/* A request with binary bytes round-trips through a frame unchanged. */
static void t_pack_binary_request(void *unused)
{
    static const uint8_t val[] = {0, 1, 0xff, 0, '\n', 0x80};
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT, *back;
    Muster__Request r = MUSTER__REQUEST__INIT;
    Muster__SetReq s = MUSTER__SET_REQ__INIT;
    uint8_t buf[256];
    size_t n;
    (void)unused;
    s.key = (char *)"k";
    s.value.data = (uint8_t *)val;
    s.value.len = sizeof val;
    r.id = 0xfedcba9876543210ull;
    r.op_case = MUSTER__REQUEST__OP_SET;
    r.set = &s;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = &r;
    CHECK(frame_size(&f.base) <= sizeof buf);
    n = frame_pack(&f.base, buf);
    back = muster__client_frame__unpack(NULL, frame_len(buf), buf + FRAME_HDR);
    CHECK(back && back->frame_case == MUSTER__CLIENT_FRAME__FRAME_REQUEST);
    if (back) {
        CHECK(back->request->id == 0xfedcba9876543210ull);
        CHECK_EQ(back->request->op_case, MUSTER__REQUEST__OP_SET);
        CHECK_MEM(back->request->set->value.data, back->request->set->value.len, val, sizeof val);
        muster__client_frame__free_unpacked(back, NULL);
    }
    CHECK_EQ(n, FRAME_HDR + frame_len(buf));
}

/* An empty frame body is a valid (all-default) message: the length check, not unpack, must reject it. */
static void t_empty_body(void *unused)
{
    Muster__ClientFrame *f = muster__client_frame__unpack(NULL, 0, (const uint8_t *)"");
    (void)unused;
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ(f->frame_case, MUSTER__CLIENT_FRAME__FRAME__NOT_SET);
        muster__client_frame__free_unpacked(f, NULL);
    }
}

/* Run the frame codec tests. */
int main(void)
{
    h_init("unit-frame", 30);
    H_RUN(t_len_roundtrip, NULL);
    H_RUN(t_len_from_bytes, NULL);
    H_RUN(t_pack_hello, NULL);
    H_RUN(t_pack_binary_request, NULL);
    H_RUN(t_empty_body, NULL);
    return h_finish();
}
