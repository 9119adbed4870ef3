/*
 * Integration tests of every key-value op through libmuster against a real
 * musterd: exact values back, binary safety, TCPStore add and compare_set
 * rules, multi ops, append, list paging, ping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hclient.h"

/* set then get returns the exact bytes, including NULs and an empty value. */
static void t_set_get(muster_t *m)
{
    static const unsigned char bin[] = {0, 1, 2, 0xff, 0, '\n', 0x80, 0};
    void *v = NULL;
    size_t n = 99;
    CHECK_EQ(muster_set(m, "kv/a", "alpha", 5, 0), MUSTER_OK);
    HC_EXPECT(m, "kv/a", "alpha");
    CHECK_EQ(muster_set(m, "kv/a", "beta", 4, 0), MUSTER_OK);
    HC_EXPECT(m, "kv/a", "beta");
    CHECK_EQ(muster_set(m, "kv/bin", bin, sizeof bin, 0), MUSTER_OK);
    CHECK_EQ(muster_get(m, "kv/bin", 0, 0, &v, &n), MUSTER_OK);
    CHECK_MEM(v, n, bin, sizeof bin);
    muster_free(v);
    v = NULL;
    CHECK_EQ(muster_set(m, "kv/empty", "", 0, 0), MUSTER_OK);
    CHECK_EQ(muster_get(m, "kv/empty", 0, 0, &v, &n), MUSTER_OK);
    CHECK_EQ(n, 0);
    CHECK(v != NULL && ((char *)v)[0] == 0);
    muster_free(v);
    HC_EXPECT(m, "kv/absent", NULL);
}

/* A one-mebibyte value round-trips unchanged. */
static void t_large_value(muster_t *m)
{
    size_t len = 1u << 20;
    unsigned char *big = malloc(len);
    void *v = NULL;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        big[i] = (unsigned char)(i * 131 + (i >> 9));
    CHECK_EQ(muster_set(m, "kv/big", big, len, 0), MUSTER_OK);
    CHECK_EQ(muster_get(m, "kv/big", 0, 0, &v, &n), MUSTER_OK);
    CHECK_MEM(v, n, big, len);
    muster_free(v);
    free(big);
}

/* add counts from zero, stores decimal text, and refuses text and overflow. */
static void t_add(muster_t *m)
{
    int64_t r = 0;
    CHECK_EQ(muster_add(m, "kv/n", 5, &r, 0), MUSTER_OK);
    CHECK_EQ(r, 5);
    CHECK_EQ(muster_add(m, "kv/n", -7, &r, 0), MUSTER_OK);
    CHECK_EQ(r, -2);
    HC_EXPECT(m, "kv/n", "-2");
    CHECK_EQ(muster_add(m, "kv/n", 0, NULL, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "kv/text", "12abc"), MUSTER_OK);
    CHECK_EQ(muster_add(m, "kv/text", 1, &r, 0), MUSTER_ENOTNUM);
    HC_EXPECT(m, "kv/text", "12abc");
    CHECK_EQ(hc_set_str(m, "kv/max", "9223372036854775806"), MUSTER_OK);
    CHECK_EQ(muster_add(m, "kv/max", 1, &r, 0), MUSTER_OK);
    CHECK(r == INT64_MAX);
    CHECK_EQ(muster_add(m, "kv/max", 1, &r, 0), MUSTER_EOVERFLOW);
    HC_EXPECT(m, "kv/max", "9223372036854775807");
    CHECK_EQ(muster_add(m, "kv/max", INT64_MIN, &r, 0), MUSTER_OK);
    CHECK_EQ(r, -1);
}

/* compare_set follows TCPStore's four rules. */
static void t_compare_set(muster_t *m)
{
    void *v = NULL;
    size_t n = 0;
    int sw = -1;
    /* absent + empty expected: set */
    CHECK_EQ(muster_compare_set(m, "kv/cas", "", 0, "one", 3, &sw, &v, &n, 0), MUSTER_OK);
    CHECK_EQ(sw, 1);
    CHECK_MEM(v, n, "one", 3);
    muster_free(v);
    /* current == expected: set, returns desired */
    CHECK_EQ(muster_compare_set(m, "kv/cas", "one", 3, "two", 3, &sw, &v, &n, 0), MUSTER_OK);
    CHECK_EQ(sw, 1);
    CHECK_MEM(v, n, "two", 3);
    muster_free(v);
    /* mismatch: unchanged, returns current */
    CHECK_EQ(muster_compare_set(m, "kv/cas", "one", 3, "three", 5, &sw, &v, &n, 0), MUSTER_OK);
    CHECK_EQ(sw, 0);
    CHECK_MEM(v, n, "two", 3);
    muster_free(v);
    HC_EXPECT(m, "kv/cas", "two");
    /* absent + non-empty expected: no change, returns expected */
    CHECK_EQ(muster_compare_set(m, "kv/cas-absent", "x", 1, "y", 1, &sw, &v, &n, 0), MUSTER_OK);
    CHECK_EQ(sw, 0);
    CHECK_MEM(v, n, "x", 1);
    muster_free(v);
    HC_EXPECT(m, "kv/cas-absent", NULL);
    CHECK_EQ(muster_compare_set(m, "kv/cas", "two", 3, "z", 1, NULL, NULL, NULL, 0), MUSTER_OK);
    HC_EXPECT(m, "kv/cas", "z");
}

/* delete says whether the key existed; check and num_keys see it. */
static void t_delete_check_count(muster_t *m)
{
    const char *both[] = {"kv/d1", "kv/d2"};
    int deleted = -1, present = -1, rc;
    uint64_t before = 0, after = 0;
    CHECK_EQ(muster_num_keys(m, &before, 0), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "kv/d1", "1"), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "kv/d2", "2"), MUSTER_OK);
    CHECK_EQ(muster_num_keys(m, &after, 0), MUSTER_OK);
    CHECK_EQ(after, before + 2);
    CHECK_EQ(muster_check(m, both, 2, &present, 0), MUSTER_OK);
    CHECK_EQ(present, 1);
    CHECK_EQ(muster_delete(m, "kv/d1", &deleted, 0), MUSTER_OK);
    CHECK_EQ(deleted, 1);
    CHECK_EQ(muster_check(m, both, 2, &present, 0), MUSTER_OK);
    CHECK_EQ(present, 0);
    CHECK_EQ(muster_check(m, both + 1, 1, &present, 0), MUSTER_OK);
    CHECK_EQ(present, 1);
    /* The proto allows either answer for an absent key: deleted = false, or NOT_FOUND. */
    deleted = -1;
    rc = muster_delete(m, "kv/d1", &deleted, 0);
    CHECK(rc == MUSTER_OK ? deleted == 0 : rc == MUSTER_ENOTFOUND);
    CHECK_EQ(muster_num_keys(m, &after, 0), MUSTER_OK);
    CHECK_EQ(after, before + 1);
    HC_EXPECT(m, "kv/d1", NULL);
}

/* wait on keys that exist returns at once. */
static void t_wait_present(muster_t *m)
{
    const char *keys[] = {"kv/w1", "kv/w2"};
    int64_t t0;
    CHECK_EQ(hc_set_str(m, "kv/w1", "1"), MUSTER_OK);
    CHECK_EQ(hc_set_str(m, "kv/w2", "2"), MUSTER_OK);
    t0 = h_now_ms();
    CHECK_EQ(muster_wait(m, keys, 2, 5000), MUSTER_OK);
    CHECK(h_now_ms() - t0 < 2000);
}

/* multi_set is seen whole by multi_get, in key order; a missing key fails the whole get. */
static void t_multi(muster_t *m)
{
    const char *keys[] = {"kv/m1", "kv/m2", "kv/m3"};
    const void *vals[] = {"one", "", "three"};
    const size_t lens[] = {3, 0, 5};
    const char *keys_missing[] = {"kv/m1", "kv/m-absent"};
    void *out[3] = {0};
    size_t outl[3] = {0};
    CHECK_EQ(muster_multi_set(m, keys, vals, lens, 3, 0), MUSTER_OK);
    CHECK_EQ(muster_multi_get(m, keys, 3, 0, out, outl, 0), MUSTER_OK);
    for (int i = 0; i < 3; i++)
        CHECK_MEM(out[i], outl[i], vals[i], lens[i]);
    for (int i = 0; i < 3; i++)
        muster_free(out[i]);
    HC_EXPECT(m, "kv/m3", "three");
    memset(out, 0, sizeof out);
    CHECK_EQ(muster_multi_get(m, keys_missing, 2, 0, out, outl, 0), MUSTER_ENOTFOUND);
    for (int i = 0; i < 2; i++)
        muster_free(out[i]);
}

/* append creates, extends and reports the new length. */
static void t_append(muster_t *m)
{
    uint64_t len = 0;
    CHECK_EQ(muster_append(m, "kv/app", "ab", 2, &len, 0), MUSTER_OK);
    CHECK_EQ(len, 2);
    CHECK_EQ(muster_append(m, "kv/app", "\0cd", 3, &len, 0), MUSTER_OK);
    CHECK_EQ(len, 5);
    {
        void *v = NULL;
        size_t n = 0;
        CHECK_EQ(muster_get(m, "kv/app", 0, 0, &v, &n), MUSTER_OK);
        CHECK_MEM(v, n, "ab\0cd", 5);
        muster_free(v);
    }
}

/* list pages through a prefix in byte order with no key lost or repeated. */
static void t_list(muster_t *m)
{
    char key[32], after[64] = "";
    int seen = 0, more = 1, pages = 0, ordered = 1;
    for (int i = 0; i < 25; i++) {
        snprintf(key, sizeof key, "ls/%02d", i);
        CHECK_EQ(hc_set_str(m, key, "x"), MUSTER_OK);
    }
    CHECK_EQ(hc_set_str(m, "lt/other", "x"), MUSTER_OK);
    while (more && pages < 20) {
        char **keys = NULL;
        size_t n = 0;
        int rc = muster_list(m, "ls/", pages ? after : NULL, 10, &keys, &n, &more, 0);
        CHECK_EQ(rc, MUSTER_OK);
        if (rc != MUSTER_OK)
            break;
        CHECK(n <= 10);
        for (size_t i = 0; i < n; i++) {
            snprintf(key, sizeof key, "ls/%02d", seen);
            ordered &= strcmp(keys[i], key) == 0;
            seen++;
        }
        if (n)
            snprintf(after, sizeof after, "%s", keys[n - 1]);
        muster_free_list((void **)keys, n);
        pages++;
        more = more && n > 0;
    }
    CHECK_EQ(seen, 25);
    CHECK(ordered);
    CHECK_EQ(pages, 3);
}

/* ping answers with a round-trip time. */
static void t_ping(muster_t *m)
{
    uint64_t rtt = 0;
    CHECK_EQ(muster_ping(m, &rtt, 0), MUSTER_OK);
    CHECK(rtt < 2000000);
    CHECK_EQ(muster_ping(m, NULL, 0), MUSTER_OK);
}

/* Empty keys are refused by the server or the library, and the handle stays usable. */
static void t_bad_args(muster_t *m)
{
    int rc = muster_set(m, "", "x", 1, 0);
    CHECK(rc == MUSTER_EBADREQ || rc == MUSTER_EINVAL);
    CHECK_EQ(hc_set_str(m, "kv/after-bad", "ok"), MUSTER_OK);
    HC_EXPECT(m, "kv/after-bad", "ok");
}

/* Run the key-value tests against one daemon. */
int main(void)
{
    struct h_daemon d;
    muster_t *m;
    h_init("kv", 60);
    if (h_start(&d, NULL) < 0)
        return h_finish();
    m = hc_connect(&d, "kv", NULL);
    if (m) {
        H_RUN(t_set_get, m);
        H_RUN(t_large_value, m);
        H_RUN(t_add, m);
        H_RUN(t_compare_set, m);
        H_RUN(t_delete_check_count, m);
        H_RUN(t_wait_present, m);
        H_RUN(t_multi, m);
        H_RUN(t_append, m);
        H_RUN(t_list, m);
        H_RUN(t_ping, m);
        H_RUN(t_bad_args, m);
    }
    muster_close(m);
    CHECK_EQ(h_stop(&d), 0);
    return h_finish();
}
