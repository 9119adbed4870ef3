/*
 * Unit tests of musterd's protobuf-c-free get and add path and join answers
 * (store-server/native/fastpath.c) against protobuf-c itself: replies are
 * the bytes protobuf-c packs, and every frame the fast decoder takes (valid
 * ones and thousands of mutated ones) is one protobuf-c decodes to the same
 * request; what it declines goes to protobuf-c's path in the daemon.
 */
#include <stdlib.h>
#include <string.h>

#include "fastpath.h"
#include "harness.h"
#include "muster.pb-c.h"

/* Pack ServerFrame{response{id, result}} with protobuf-c into buf (big enough); its size. */
static size_t tf_pack_reply(uint8_t *buf, uint64_t id, ProtobufCMessage *result, int rcase)
{
    Muster__Response r = MUSTER__RESPONSE__INIT;
    r.id = id;
    r.result_case = (Muster__Response__ResultCase)rcase;
    r.get = (Muster__GetRes *)result; /* a union: the member that rcase names */
    Muster__ServerFrame f = MUSTER__SERVER_FRAME__INIT;
    f.frame_case = MUSTER__SERVER_FRAME__FRAME_RESPONSE;
    f.response = &r;
    return protobuf_c_message_pack(&f.base, buf);
}

/* Check that fastpath writes the reply protobuf-c writes for (id, result). */
static void tf_same_reply(uint64_t id, ProtobufCMessage *result, int rcase)
{
    static uint8_t want[70000], got[70000];
    size_t n = tf_pack_reply(want, id, result, rcase);
    size_t m = fastpath_reply_size(id, result);
    CHECK_EQ(m, n);
    if (m != n || m > sizeof got)
        return;
    memset(got, 0xa5, m);
    fastpath_reply_pack(got, id, result);
    CHECK_MEM(got, m, want, n);
}

/* GetRes, AddRes and SetRes replies match protobuf-c's bytes across ids, values and lengths. */
static void t_replies(void *unused)
{
    static const uint64_t ids[] = {0, 1, 127, 128, 16383, 16384, 1ull << 35, 1ull << 63, UINT64_MAX};
    static const int64_t adds[] = {0, 1, -1, 127, 128, 300, INT64_MAX, INT64_MIN, -128};
    static const size_t lens[] = {0, 1, 64, 127, 128, 16383, 16384, 65536};
    static uint8_t data[65536];
    (void)unused;
    memset(data, 'v', sizeof data);
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        Muster__SetRes s = MUSTER__SET_RES__INIT;
        tf_same_reply(ids[i], &s.base, MUSTER__RESPONSE__RESULT_SET);
        for (size_t j = 0; j < sizeof adds / sizeof adds[0]; j++) {
            Muster__AddRes a = MUSTER__ADD_RES__INIT;
            a.value = adds[j];
            tf_same_reply(ids[i], &a.base, MUSTER__RESPONSE__RESULT_ADD);
        }
        for (size_t j = 0; j < sizeof lens / sizeof lens[0]; j++) {
            Muster__GetRes g = MUSTER__GET_RES__INIT;
            g.value.data = data;
            g.value.len = lens[j];
            tf_same_reply(ids[i], &g.base, MUSTER__RESPONSE__RESULT_GET);
        }
    }
    Muster__DeleteRes d = MUSTER__DELETE_RES__INIT;
    CHECK_EQ(fastpath_reply_size(1, &d.base), 0);
    CHECK_EQ(fastpath_reply_size(1, NULL), 0);
}

/* A join's answer without members matches protobuf-c's bytes: zero and full fields, a newcomer's old
 * rank (UINT32_MAX), ids and causes empty, short and past one length byte, 0 to 3 excluded members; one
 * with a member list is left to protobuf-c. */
static void t_join_replies(void *unused)
{
    (void)unused;
    static const uint64_t ids[] = {0, 1, 300, UINT64_MAX};
    static char longid[201];
    memset(longid, 'n', sizeof longid - 1);
    const char *strs[] = {NULL, "", "n7", longid};
    unsigned cases = 0;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        for (unsigned shape = 0; shape < 4 * 4 * 4; shape++) {
            Muster__Excluded xv[3], *xp[3];
            for (int k = 0; k < 3; k++) {
                muster__excluded__init(&xv[k]);
                xv[k].node_id = (char *)strs[(shape + (unsigned)k) % 4];
                xv[k].old_node_rank = k == 1 ? UINT32_MAX : (uint32_t)k * 200;
                xv[k].cause = (char *)strs[(shape / 4 + (unsigned)k) % 4];
                xp[k] = &xv[k];
            }
            Muster__Assignment a = MUSTER__ASSIGNMENT__INIT;
            int full = shape % 2;
            a.generation = full ? UINT64_MAX - shape : 0;
            a.node_rank = full ? 4095 : 0;
            a.num_nodes = full ? 4096 : shape;
            a.rank_start = full ? 32760 : 0;
            a.local_world_size = 8;
            a.world_size = full ? UINT32_MAX : 8;
            a.node_id = (char *)strs[shape % 4];
            a.previous_generation = shape / 16;
            a.old_node_rank = shape % 3 == 0 ? UINT32_MAX : shape % 3 == 1 ? 0 : 127;
            a.n_excluded = shape / 16;
            a.excluded = a.n_excluded ? xp : NULL;
            a.credential = (char *)strs[(shape / 2) % 4];
            Muster__RdzvJoinRes r = MUSTER__RDZV_JOIN_RES__INIT;
            r.assignment = &a;
            tf_same_reply(ids[i], &r.base, MUSTER__RESPONSE__RESULT_RDZV_JOIN);
            cases++;
        }
    CHECK_EQ(cases, 4 * 64);
    Muster__Member mb = MUSTER__MEMBER__INIT, *mp = &mb;
    Muster__Assignment a = MUSTER__ASSIGNMENT__INIT;
    a.n_members = 1;
    a.members = &mp;
    Muster__RdzvJoinRes r = MUSTER__RDZV_JOIN_RES__INIT;
    r.assignment = &a;
    CHECK_EQ(fastpath_reply_size(1, &r.base), 0); /* a member list is spliced in by op_rdzv.c */
}

/* Pack ClientFrame{request} with protobuf-c into buf; its size. */
static size_t tf_pack_request(uint8_t *buf, Muster__Request *req)
{
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_REQUEST;
    f.request = req;
    return protobuf_c_message_pack(&f.base, buf);
}

/* When fastpath takes the n bytes at p, protobuf-c decodes them to the same request without a NUL in the
 * key; returns whether fastpath took them. */
static int tf_agree(const uint8_t *p, size_t n)
{
    struct fastpath_req fr;
    if (!fastpath_decode(p, n, &fr))
        return 0;
    Muster__ClientFrame *f = muster__client_frame__unpack(NULL, n, p);
    CHECK(f != NULL);
    if (!f)
        return 1;
    CHECK_EQ(f->frame_case, MUSTER__CLIENT_FRAME__FRAME_REQUEST);
    Muster__Request *r = f->request;
    CHECK_EQ(r->base.n_unknown_fields, 0);
    CHECK_EQ(r->id, fr.req.id);
    CHECK_EQ(r->op_case, fr.req.op_case);
    if (r->op_case == MUSTER__REQUEST__OP_GET) {
        CHECK_STR(r->get->key, fr.req.get->key);
        CHECK_EQ(r->get->wait, fr.req.get->wait);
        CHECK_EQ(r->get->timeout_ms, fr.req.get->timeout_ms);
        CHECK_EQ(r->get->base.n_unknown_fields, 0);
    } else if (r->op_case == MUSTER__REQUEST__OP_ADD) {
        CHECK_STR(r->add->key, fr.req.add->key);
        CHECK_EQ(r->add->delta, fr.req.add->delta);
        CHECK_EQ(r->add->base.n_unknown_fields, 0);
    }
    muster__client_frame__free_unpacked(f, NULL);
    return 1;
}

/* Fill req (with its get and add) as the i-th sample request; key is its key buffer. */
static void tf_sample(unsigned i, Muster__Request *req, Muster__GetReq *g, Muster__AddReq *a, char *key)
{
    static const uint64_t ids[] = {0, 1, 300, 1ull << 40, UINT64_MAX};
    static const int64_t deltas[] = {0, 1, -1, 1000, INT64_MIN, INT64_MAX};
    size_t klen = (i * 37) % 260;
    for (size_t k = 0; k < klen; k++)
        key[k] = (char)('a' + (i + k) % 26);
    key[klen] = '\0';
    req->id = ids[i % 5];
    if (i % 2) {
        g->key = key;
        g->wait = (i / 2) % 2;
        g->timeout_ms = (uint32_t)(i * 977u);
        req->op_case = MUSTER__REQUEST__OP_GET;
        req->get = g;
    } else {
        a->key = key;
        a->delta = deltas[i % 6];
        req->op_case = MUSTER__REQUEST__OP_ADD;
        req->add = a;
    }
}

/* Valid get and add frames are taken (unless the key is too long) and read as protobuf-c reads them. */
static void t_valid(void *unused)
{
    uint8_t buf[1024];
    char key[300];
    (void)unused;
    for (unsigned i = 0; i < 400; i++) {
        Muster__Request req = MUSTER__REQUEST__INIT;
        Muster__GetReq g = MUSTER__GET_REQ__INIT;
        Muster__AddReq a = MUSTER__ADD_REQ__INIT;
        tf_sample(i, &req, &g, &a, key);
        size_t n = tf_pack_request(buf, &req);
        CHECK_EQ(tf_agree(buf, n), strlen(key) <= FASTPATH_KEY_MAX);
    }
}

/* Every other op, a hello, repeated and unknown fields and a NUL in the key are declined. */
static void t_declined(void *unused)
{
    static const uint8_t set[] = {0x12, 0x07, 0x08, 0x01, 0x52, 0x03, 0x0a, 0x01, 'k'};
    static const uint8_t hello[] = {0x0a, 0x00};
    static const uint8_t two_ids[] = {0x12, 0x09, 0x08, 0x01, 0x08, 0x02, 0x62, 0x03, 0x0a, 0x01, 'k'};
    static const uint8_t two_ops[] = {0x12, 0x0a, 0x62, 0x03, 0x0a, 0x01, 'k', 0x5a, 0x03, 0x0a, 0x01, 'k'};
    static const uint8_t two_keys[] = {0x12, 0x08, 0x62, 0x06, 0x0a, 0x01, 'k', 0x0a, 0x01, 'j'};
    static const uint8_t unknown[] = {0x12, 0x07, 0x62, 0x05, 0x0a, 0x01, 'k', 0x20, 0x01};
    static const uint8_t nul[] = {0x12, 0x05, 0x62, 0x03, 0x0a, 0x01, 0x00};
    static const uint8_t no_op[] = {0x12, 0x02, 0x08, 0x01};
    static const uint8_t add_timeout[] = {0x12, 0x07, 0x62, 0x05, 0x0a, 0x01, 'k', 0x18, 0x01};
    const struct { const uint8_t *p; size_t n; } cases[] = {
        {set, sizeof set}, {hello, sizeof hello}, {two_ids, sizeof two_ids}, {two_ops, sizeof two_ops},
        {two_keys, sizeof two_keys}, {unknown, sizeof unknown}, {nul, sizeof nul}, {no_op, sizeof no_op},
        {add_timeout, sizeof add_timeout},
    };
    struct fastpath_req fr;
    (void)unused;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK_EQ(fastpath_decode(cases[i].p, cases[i].n, &fr), 0);
    static const uint8_t ok[] = {0x12, 0x05, 0x62, 0x03, 0x0a, 0x01, 'k'};
    CHECK_EQ(fastpath_decode(ok, sizeof ok, &fr), 1);
    CHECK_STR(fr.req.add->key, "k");
}

/* Mutated frames (bytes changed, cut, or inserted): whatever fastpath takes, protobuf-c reads the same. */
static void t_mutated(void *unused)
{
    uint8_t buf[1024], m[1100];
    char key[300];
    unsigned taken = 0;
    (void)unused;
    srand(35);
    for (unsigned i = 0; i < 40000; i++) {
        Muster__Request req = MUSTER__REQUEST__INIT;
        Muster__GetReq g = MUSTER__GET_REQ__INIT;
        Muster__AddReq a = MUSTER__ADD_REQ__INIT;
        tf_sample(i % 64, &req, &g, &a, key);
        size_t n = tf_pack_request(buf, &req), at = (size_t)rand() % n;
        memcpy(m, buf, n);
        switch (i % 3) {
        case 0: m[at] = (uint8_t)rand(); break;
        case 1: n = at; break;
        default:
            memmove(m + at + 1, m + at, n - at);
            m[at] = (uint8_t)rand();
            n++;
        }
        taken += (unsigned)tf_agree(m, n);
    }
    CHECK(taken > 0);
}

int main(void)
{
    h_init("unit-fastpath", 60);
    H_RUN(t_replies, NULL);
    H_RUN(t_join_replies, NULL);
    H_RUN(t_valid, NULL);
    H_RUN(t_declined, NULL);
    H_RUN(t_mutated, NULL);
    return h_finish();
}
