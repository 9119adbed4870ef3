/*
 * Unit tests of the store URL parser (muster_url_parse): accepted forms,
 * defaults, bracketed IPv6, query parameters, env:// and the environment
 * default, rejected input that must leave *out untouched, and URLs that
 * list several endpoints (their order, the limit, the failover default and
 * the message naming a bad endpoint).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <muster/muster.h>

#include "harness.h"

/* One accepted URL and the fields it must yield. */
struct url_ok {
    const char *text;
    const char *host;
    unsigned port;
    const char *ns;
    const char *token;
    const char *name;
    unsigned timeout_ms;
};

static const struct url_ok url_good[] = {
    {"tcp://127.0.0.1:29600", "127.0.0.1", 29600, "", "", "", 0},
    {"tcp://store.example.com", "store.example.com", MUSTER_DEFAULT_PORT, "", "", "", 0},
    {"tcp://h:1", "h", 1, "", "", "", 0},
    {"tcp://h:65535", "h", 65535, "", "", "", 0},
    {"tcp://h:1234/job-7", "h", 1234, "job-7", "", "", 0},
    {"tcp://[::1]:29601/ns", "::1", 29601, "ns", "", "", 0},
    {"tcp://[::1]", "::1", MUSTER_DEFAULT_PORT, "", "", "", 0},
    {"tcp://[2001:db8::7]:80", "2001:db8::7", 80, "", "", "", 0},
    {"tcp://h:5/ns?token=abc&timeout=5000&name=rank3", "h", 5, "ns", "abc", "rank3", 5000},
    {"tcp://h:5?token=abc", "h", 5, "", "abc", "", 0},
    {"tcp://h:5/ns?timeout=250", "h", 5, "ns", "", "", 250},
    {"tcp://h:5/ns?token=a%2Fb%3Dc%25", "h", 5, "ns", "a/b=c%", "", 0},
};

static const char *const url_bad[] = {
    "http://h:1",          "tcp:/h:1",        "tcp//h:1",           "tcp://",
    "tcp://:1",            "tcp://h:",        "tcp://h:0",          "tcp://h:65536",
    "tcp://h:-1",          "tcp://h:12ab",    "tcp://h:99999999999999999999",
    "tcp://[::1",          "tcp://[::1]x",    "tcp://[::1]:",       "tcp://[]:1",
    "tcp://h:1?timeout=abc", "tcp://h:1?timeout=-5", "tcp://h:1?token=%zz",
    "tcp://a,",            "tcp://,a",        "tcp://a,,b",         "tcp://a:1,b:0",
    "tcp://a,[::1",        "tcp://a?failover=2", "tcp://a?failover=1&failover=0",
    "tcp://a?generation=0", "tcp://a?generation=x", "tcp://a?generation=-1",
};

/* Parse text and compare every field with the expectation. */
static void url_expect_ok(const struct url_ok *c)
{
    muster_url u;
    int rc;
    memset(&u, 0x5a, sizeof u);
    rc = muster_url_parse(c->text, &u);
    CHECK_EQ(rc, MUSTER_OK);
    if (rc != MUSTER_OK) {
        printf("  url: %s\n", c->text);
        return;
    }
    CHECK_STR(u.host, c->host);
    CHECK_EQ(u.port, c->port);
    CHECK_STR(u.ns, c->ns);
    CHECK_STR(u.token, c->token);
    CHECK_STR(u.name, c->name);
    CHECK_EQ(u.timeout_ms, c->timeout_ms);
}

/* Parse text expecting MUSTER_EURL and *out unchanged. */
static void url_expect_bad(const char *text)
{
    muster_url u, before;
    int rc;
    memset(&u, 0xa5, sizeof u);
    before = u;
    rc = muster_url_parse(text, &u);
    CHECK_EQ(rc, MUSTER_EURL);
    CHECK(memcmp(&u, &before, sizeof u) == 0);
    if (rc != MUSTER_EURL)
        printf("  url accepted: %s\n", text);
}

/* Every accepted form yields the right fields. */
static void t_good(void *unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof url_good / sizeof url_good[0]; i++)
        url_expect_ok(&url_good[i]);
}

/* Every malformed form is refused without touching *out. */
static void t_bad(void *unused)
{
    (void)unused;
    for (size_t i = 0; i < sizeof url_bad / sizeof url_bad[0]; i++)
        url_expect_bad(url_bad[i]);
}

/* Fields longer than their buffers are refused, not truncated. */
static void t_overlong(void *unused)
{
    char big[600], text[800];
    (void)unused;
    memset(big, 'a', 300);
    big[300] = 0;
    snprintf(text, sizeof text, "tcp://%s:1", big);
    url_expect_bad(text);
    snprintf(text, sizeof text, "tcp://h:1/%s", big);
    url_expect_bad(text);
    snprintf(text, sizeof text, "tcp://h:1?token=%s", big);
    url_expect_bad(text);
    snprintf(text, sizeof text, "tcp://h:1?name=%s", big);
    url_expect_bad(text);
    memset(big, 'b', 200);
    big[200] = 0;
    snprintf(text, sizeof text, "tcp://%s:7", big);
    {
        muster_url u;
        CHECK_EQ(muster_url_parse(text, &u), MUSTER_OK);
        CHECK_EQ(strlen(u.host), 200);
    }
}

/* NULL and "" mean $MUSTER_URL, else the local default. */
static void t_env_default(void *unused)
{
    muster_url u;
    (void)unused;
    unsetenv("MUSTER_URL");
    CHECK_EQ(muster_url_parse(NULL, &u), MUSTER_OK);
    CHECK_STR(u.host, "127.0.0.1");
    CHECK_EQ(u.port, MUSTER_DEFAULT_PORT);
    CHECK_EQ(muster_url_parse("", &u), MUSTER_OK);
    CHECK_EQ(u.port, MUSTER_DEFAULT_PORT);
    setenv("MUSTER_URL", "tcp://10.0.0.9:4242/jobx", 1);
    CHECK_EQ(muster_url_parse(NULL, &u), MUSTER_OK);
    CHECK_STR(u.host, "10.0.0.9");
    CHECK_EQ(u.port, 4242);
    CHECK_STR(u.ns, "jobx");
    CHECK_EQ(muster_url_parse("", &u), MUSTER_OK);
    CHECK_STR(u.ns, "jobx");
    unsetenv("MUSTER_URL");
}

/* env:// reads MASTER_ADDR, MASTER_PORT and MUSTER_NAMESPACE, and needs MASTER_ADDR. */
static void t_env_scheme(void *unused)
{
    muster_url u;
    (void)unused;
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "1234", 1);
    setenv("MUSTER_NAMESPACE", "job-env", 1);
    CHECK_EQ(muster_url_parse("env://", &u), MUSTER_OK);
    CHECK_STR(u.host, "10.1.2.3");
    CHECK_EQ(u.port, 1234);
    CHECK_STR(u.ns, "job-env");
    setenv("MASTER_PORT", "70000", 1);
    url_expect_bad("env://");
    unsetenv("MASTER_ADDR");
    setenv("MASTER_PORT", "1234", 1);
    url_expect_bad("env://");
    unsetenv("MASTER_PORT");
    unsetenv("MUSTER_NAMESPACE");
}

/* A list of endpoints keeps every one, in order, each with its own port. */
static void t_multi(void *unused)
{
    muster_url u;
    (void)unused;
    CHECK_EQ(muster_url_parse("tcp://a:29600,b:29601,[::1]:29602/ns?token=t", &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, 3);
    CHECK_STR(u.endpoints[0].host, "a");
    CHECK_EQ(u.endpoints[0].port, 29600);
    CHECK_STR(u.endpoints[1].host, "b");
    CHECK_EQ(u.endpoints[1].port, 29601);
    CHECK_STR(u.endpoints[2].host, "::1");
    CHECK_EQ(u.endpoints[2].port, 29602);
    CHECK_STR(u.host, "a"); /* the first endpoint, as before */
    CHECK_EQ(u.port, 29600);
    CHECK_STR(u.ns, "ns");
    CHECK_STR(u.token, "t");
    CHECK_EQ(u.failover, 1);
    CHECK_EQ(muster_url_parse("tls://a,b/ns", &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, 2);
    CHECK_EQ(u.endpoints[1].port, MUSTER_DEFAULT_PORT);
    CHECK_EQ(u.tls, 1);
    /* One endpoint: no failover unless asked for; several: on unless turned off. */
    CHECK_EQ(muster_url_parse("tcp://a:1", &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, 1);
    CHECK_EQ(u.failover, 0);
    CHECK_EQ(muster_url_parse("tcp://a:1?failover=1", &u), MUSTER_OK);
    CHECK_EQ(u.failover, 1);
    CHECK_EQ(muster_url_parse("tcp://a:1,b:2?failover=0", &u), MUSTER_OK);
    CHECK_EQ(u.failover, 0);
    /* A generation to follow: none unless given. */
    CHECK_EQ(u.generation, 0);
    CHECK_EQ(muster_url_parse("tcp://a:1/job?generation=42", &u), MUSTER_OK);
    CHECK_EQ(u.generation, 42);
}

/* At most MUSTER_URL_MAX_ENDPOINTS endpoints; errors name the bad one. */
static void t_multi_limits(void *unused)
{
    char text[512] = "tcp://";
    muster_url u;
    char why[256];
    (void)unused;
    for (int i = 0; i < MUSTER_URL_MAX_ENDPOINTS; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%sh%d:%d", i ? "," : "", i, 100 + i);
    CHECK_EQ(muster_url_parse(text, &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, MUSTER_URL_MAX_ENDPOINTS);
    CHECK_STR(u.endpoints[MUSTER_URL_MAX_ENDPOINTS - 1].host, "h7");
    strcat(text, ",h8:108");
    url_expect_bad(text);
    CHECK_EQ(muster_url_parse_detail(text, &u, why, sizeof why), MUSTER_EURL);
    CHECK(strstr(why, "more than 8 endpoints") != NULL);
    CHECK_EQ(muster_url_parse_detail("tcp://good:1,bad:0,x:2/ns", &u, why, sizeof why), MUSTER_EURL);
    CHECK(strstr(why, "endpoint 2 'bad:0'") != NULL);
    CHECK_EQ(muster_url_parse_detail("tcp://a:1,,b/ns", &u, why, sizeof why), MUSTER_EURL);
    CHECK(strstr(why, "endpoint 2 ''") != NULL);
    CHECK_EQ(muster_url_parse_detail("tcp://a:1/ns?token=secret&bogus=1", &u, why, sizeof why), MUSTER_EURL);
    CHECK(why[0] != '\0');
    CHECK(strstr(why, "secret") == NULL);
    CHECK_EQ(muster_url_parse_detail("tcp://a:1,b:2", &u, NULL, 0), MUSTER_OK);
}

/* MASTER_ADDR may list endpoints; MASTER_PORT is the port of those without one. */
static void t_env_multi(void *unused)
{
    muster_url u;
    (void)unused;
    setenv("MASTER_ADDR", "10.0.0.1,10.0.0.2:7000,::1,[fe80::1]:8", 1);
    setenv("MASTER_PORT", "1234", 1);
    CHECK_EQ(muster_url_parse("env://", &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, 4);
    CHECK_STR(u.endpoints[0].host, "10.0.0.1");
    CHECK_EQ(u.endpoints[0].port, 1234);
    CHECK_STR(u.endpoints[1].host, "10.0.0.2");
    CHECK_EQ(u.endpoints[1].port, 7000);
    CHECK_STR(u.endpoints[2].host, "::1");
    CHECK_EQ(u.endpoints[2].port, 1234);
    CHECK_STR(u.endpoints[3].host, "fe80::1");
    CHECK_EQ(u.endpoints[3].port, 8);
    CHECK_EQ(u.failover, 1);
    setenv("MASTER_ADDR", "10.0.0.1,", 1);
    url_expect_bad("env://");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    /* MUSTER_URL may list endpoints too. */
    setenv("MUSTER_URL", "tcp://a:1,b:2/j", 1);
    CHECK_EQ(muster_url_parse(NULL, &u), MUSTER_OK);
    CHECK_EQ(u.n_endpoints, 2);
    unsetenv("MUSTER_URL");
}

/* Run the URL parser tests. */
/* The reason names the bad part of the URL: an unknown, repeated or malformed query parameter by its
 * name (never its value: it may be a token), a namespace, a fragment. */
static void t_detail(void *arg)
{
    (void)arg;
    static const struct {
        const char *url, *want;
    } cases[] = {
        {"tcp://h:1/ns?timout=5", "query parameter 'timout' is unknown"},
        {"tcp://h:1/ns?token=a&token=b", "query parameter 'token' is given twice"},
        {"tcp://h:1/ns?timeout=soon", "query parameter 'timeout' must be a number of milliseconds"},
        {"tcp://h:1/ns?failover=2", "query parameter 'failover' must be 0 or 1"},
        {"tcp://h:1/ns?token=%zz", "query parameter 'token' is too long, holds %00 or a bad %-escape"},
        {"tcp://h:1/ns?s3cret", "a query parameter has no '='"},
        {"tcp://h:1/ns?", "nothing follows the '?'"},
        {"tcp://h:1/ns?timeout=5&", "the query ends in '&'"},
        {"tcp://h:1/a/b", "the namespace may hold only letters, digits, '-', '.' and '_' (one path segment)"},
        {"tcp://h:1/ns#top", "a store URL has no fragment ('#')"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        muster_url u;
        char why[256] = "";
        const char *url = cases[i].url, *want = cases[i].want;
        CHECK_EQ(muster_url_parse_detail(url, &u, why, sizeof why), MUSTER_EURL);
        if (!strstr(why, want))
            printf("  %s: \"%s\", want \"%s\"\n", url ? url : "", why, want ? want : "");
        CHECK(strstr(why, cases[i].want) != NULL);
        CHECK(strstr(why, "s3cret") == NULL && strstr(why, "%zz") == NULL);
    }
}

int main(void)
{
    h_init("unit-url", 30);
    H_RUN(t_good, NULL);
    H_RUN(t_bad, NULL);
    H_RUN(t_overlong, NULL);
    H_RUN(t_env_default, NULL);
    H_RUN(t_env_scheme, NULL);
    H_RUN(t_multi, NULL);
    H_RUN(t_multi_limits, NULL);
    H_RUN(t_env_multi, NULL);
    H_RUN(t_detail, NULL);
    return h_finish();
}
