/*
 * TLS end to end: a throwaway CA made by the test (mkcerts.sh), musterd with
 * a TLS listener requiring client certificates next to a plain one, and
 * libmuster over tls:// URLs.  A trusted client works (including a large
 * value and a blocking get woken from the plain side); a client without a
 * certificate, one whose certificate another CA signed, and one that does
 * not trust the server's CA are all refused, without retrying for the whole
 * deadline; the refusals are counted; the startup line says which
 * listener is unauthenticated.  A handshake that never finishes is closed
 * at the hello timeout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <muster/rdzv.h>

#include "hclient.h"
#include "hhttp.h"
#include "raw.h"

/* The daemon's --hello-timeout here: short, so a stalled handshake is closed soon. */
#define HELLO_MS 1500

static struct h_daemon d;
static char pki[4200];
static uint16_t tls_port;

/* Connect over TLS with the CA and client certificate named (NULL = none); the handle or NULL with *err. */
static muster_t *tls_connect_as(const char *ca, const char *cert, int *err)
{
    char url[12000];
    int n = snprintf(url, sizeof url, "tls://127.0.0.1:%u/secure?ca=%s/%s.pem", tls_port, pki, ca);
    if (cert)
        snprintf(url + n, sizeof url - (size_t)n, "&cert=%s/%s.pem&key=%s/%s.key", pki, cert, pki, cert);
    muster_opts o = {0};
    o.connect_timeout_ms = 5000;
    o.default_timeout_ms = 5000;
    return muster_connect_opts(url, &o, err);
}

/* A trusted client sets and reads back, large values included, and sees writes from the plain side. */
static void t_trusted(void *arg)
{
    (void)arg;
    int err = 0;
    muster_t *m = tls_connect_as("ca", "client", &err);
    CHECK_EQ(err, MUSTER_OK);
    if (!m)
        return;
    CHECK_EQ(hc_set_str(m, "k", "over tls"), MUSTER_OK);
    HC_EXPECT(m, "k", "over tls");
    size_t len = 3u << 20;
    char *big = malloc(len);
    for (size_t i = 0; i < len; i++)
        big[i] = (char)(i * 7 + (i >> 11));
    CHECK_EQ(muster_set(m, "big", big, len, 0), MUSTER_OK);
    void *v = NULL;
    size_t n = 0;
    CHECK_EQ(muster_get(m, "big", 0, 0, &v, &n), MUSTER_OK);
    CHECK_MEM(v, n, big, len);
    muster_free(v);
    free(big);
    muster_t *plain = hc_connect(&d, "secure", NULL);
    HC_EXPECT(plain, "k", "over tls");
    muster_close(plain);
    /* A join's member list is a block shared by reference: it goes through OpenSSL's buffers too. */
    muster_rdzv_opts o = {.node_id = "tls-node", .local_world_size = 2, .min_nodes = 1, .max_nodes = 1,
                          .want_members = 1};
    muster_assignment *a = NULL;
    CHECK_EQ(muster_rdzv_join(m, &o, &a, 5000), MUSTER_OK);
    CHECK(a && a->n_members == 1 && strcmp(a->members[0].node_id, "tls-node") == 0 &&
          a->members[0].local_world_size == 2 && a->world_size == 2);
    muster_assignment_free(a);
    muster_close(m);
}

/* Untrusted clients and an untrusted server are refused at once, not after the whole deadline. */
static void t_refused(void *arg)
{
    (void)arg;
    static const struct {
        const char *ca, *cert, *why;
    } cases[] = {
        {"ca", NULL, "no client certificate"},
        {"ca", "intruder", "client certificate from another CA"},
        {"rogue", "client", "server certificate from a CA the client does not trust"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int err = 0;
        int64_t t0 = h_now_ms();
        muster_t *m = tls_connect_as(cases[i].ca, cases[i].cert, &err);
        CHECK(m == NULL);
        /* A refused certificate is a clear EAUTH at once, never a lost connection retried until the
         * connect timeout: the daemon lets its TLS alert reach the client instead of a reset. */
        CHECK_EQ(err, MUSTER_EAUTH);
        CHECK(h_now_ms() - t0 < 4000);
        if (m || err != MUSTER_EAUTH)
            printf("  case: %s (err %d after %lld ms)\n", cases[i].why, err, (long long)(h_now_ms() - t0));
        muster_close(m);
    }
    CHECK(h_stat(&d, "tls_handshake_failures") >= 2);
}

/* The TLS listener's port, from the startup line (bounded wait: it follows the port file). */
static uint16_t tls_port_from_log(void)
{
    for (int i = 0; i < 500; i++) {
        FILE *fp = fopen(d.log, "r");
        char line[2048];
        unsigned port = 0;
        while (fp && !port && fgets(line, sizeof line, fp)) {
            const char *p = strstr(line, "TLS on 127.0.0.1:");
            if (p)
                port = (unsigned)atoi(p + 17);
        }
        if (fp)
            fclose(fp);
        if (port)
            return (uint16_t)port;
        usleep(10000); /* the line is written right after the port file; only the file can be watched */
    }
    CHECK(!"startup line names the TLS listener");
    return 0;
}

/* tls:// and the TLS query parameters parse strictly. */
static void t_urls(void *arg)
{
    (void)arg;
    muster_url u;
    CHECK_EQ(muster_url_parse("tls://h:1/ns?ca=/a%20b.pem&cert=/c.pem&key=/k.pem", &u), MUSTER_OK);
    CHECK(u.tls);
    CHECK_STR(u.tls_ca, "/a b.pem");
    CHECK_STR(u.tls_cert, "/c.pem");
    CHECK_STR(u.tls_key, "/k.pem");
    CHECK_EQ(u.port, 1);
    CHECK_EQ(muster_url_parse("tcp://h/ns?tls=1", &u), MUSTER_OK);
    CHECK(u.tls);
    CHECK_EQ(muster_url_parse("tls://h/ns?tls=0", &u), MUSTER_OK);
    CHECK(!u.tls);
    CHECK_EQ(muster_url_parse("tcp://h/ns", &u), MUSTER_OK);
    CHECK(!u.tls);
    CHECK_EQ(muster_url_parse("tcp://h?tls=yes", &u), MUSTER_EURL);
    CHECK_EQ(muster_url_parse("tcp://h?ca=a&ca=b", &u), MUSTER_EURL);
}

/* A client that starts a TLS handshake and never finishes it is closed at --hello-timeout, not after the
 * slow-reader timeout on top (30 s by default), and counted. */
static void t_handshake_bound(void *arg)
{
    (void)arg;
    long long before = h_stat(&d, "hello_timeout");
    int fd = raw_connect(tls_port);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    const unsigned char start[] = {0x16, 0x03, 0x01, 0x02, 0x00}; /* a ClientHello record header, no body */
    CHECK_EQ(raw_send(fd, start, sizeof start), 0);
    int64_t t0 = h_now_ms();
    CHECK(raw_await_close(fd, HELLO_MS + 3000));
    CHECK(h_now_ms() - t0 < HELLO_MS + 3000);
    close(fd);
    CHECK_EQ(h_stat(&d, "hello_timeout"), before + 1);
}

/* Run every case against its own daemon(s); the exit status says whether all checks passed. */
int main(void)
{
    h_init("tls", 60);
    H_RUN(t_urls, NULL);
    const char *mk = getenv("MUSTER_TEST_MKCERTS");
    snprintf(pki, sizeof pki, "%s/pki", h_tmpdir());
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "mkdir -p %s && %s %s", pki, mk ? mk : "false", pki);
    if (!mk || system(cmd) != 0)
        h_skip("cannot make the test CA (MUSTER_TEST_MKCERTS, openssl)");
    char cert[4300], key[4300], ca[4300];
    snprintf(cert, sizeof cert, "%s/server.pem", pki);
    snprintf(key, sizeof key, "%s/server.key", pki);
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    const char *listen = "127.0.0.1:0";
    char hello_ms[16];
    snprintf(hello_ms, sizeof hello_ms, "%d", HELLO_MS);
    const char *extra[] = {"--tls-listen", listen, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca,
                           "--hello-timeout", hello_ms, NULL};
    if (h_start(&d, extra) == 0 && (tls_port = tls_port_from_log()) != 0) {
        H_RUN(t_trusted, NULL);
        H_RUN(t_refused, NULL);
        H_RUN(t_handshake_bound, NULL);
        CHECK_EQ(h_stop(&d), 0);
        FILE *fp = fopen(d.log, "r");
        char line[2048];
        int said = 0;
        while (fp && fgets(line, sizeof line, fp))
            said |= strstr(line, "(plain TCP, unauthenticated transport); TLS on 127.0.0.1:") != NULL &&
                    strstr(line, "(client certificates required)") != NULL;
        if (fp)
            fclose(fp);
        CHECK(said);
    }
    return h_finish();
}
