/*
 * TLS listeners.  Each --tls-listen address accepts connections that speak
 * the same framed protocol inside TLS (1.2 or later), through libevent's
 * bufferevent_openssl, so conn.c handles them like any other connection.
 * --tls-cert and --tls-key name the server's certificate chain and key;
 * with --tls-ca, clients must present a certificate signed by that CA and
 * a connection without one fails its handshake (counted as
 * tls_handshake_failures).  The handshake runs inside the hello timeout.
 * Plain --listen addresses stay available for trusted networks.
 */
#include "tls.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "conn.h"
#include "listener.h"
#include "log.h"
#include "server.h"

struct tls {
    SSL_CTX *ctx;
    struct listener **listeners;
    size_t n;
};

/* Log the oldest queued OpenSSL error with a prefix, and clear the queue. */
static void tls_log_openssl(int level, const char *what)
{
    char err[256] = "unknown error";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, err, sizeof err);
    ERR_clear_error();
    log_msg(level, "%s: %s", what, err);
}

/* Build the server context from --tls-cert, --tls-key and --tls-ca; NULL after logging why. */
static SSL_CTX *tls_context(const struct options *o)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        tls_log_openssl(LOG_ERROR, "cannot create a TLS context");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A client that closes without close_notify has still just closed (OpenSSL 3 calls it an error). */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    const char *fail = NULL;
    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1)
        fail = "--tls-cert";
    else if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1)
        fail = "--tls-key";
    else if (SSL_CTX_check_private_key(ctx) != 1)
        fail = "--tls-key does not match --tls-cert";
    else if (*o->tls_ca && SSL_CTX_load_verify_locations(ctx, o->tls_ca, NULL) != 1)
        fail = "--tls-ca";
    if (fail) {
        tls_log_openssl(LOG_ERROR, fail);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (*o->tls_ca)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return ctx;
}

/* Accept callback of a TLS listener: a connection whose bufferevent speaks TLS. */
static void tls_accept(struct server *srv, int fd, const struct sockaddr *sa, socklen_t salen)
{
    conn_accept_tls(srv, fd, sa, salen);
}

/* Load the certificate, key and CA and bind every --tls-listen address; 0 or an exit status. */
int tls_start(struct server *srv)
{
    const struct options *o = &srv->opt;
    if (o->tls_listen.n == 0)
        return 0;
    struct tls *t = calloc(1, sizeof *t);
    if (!t || !(t->listeners = calloc(o->tls_listen.n, sizeof *t->listeners))) {
        free(t);
        return EX_OSERR;
    }
    srv->tls = t;
    if (!(t->ctx = tls_context(o)))
        return EX_CONFIG;
    for (size_t i = 0; i < o->tls_listen.n; i++) {
        int rc = listener_open_with(srv, o->tls_listen.v[i], tls_accept, &t->listeners[i]);
        if (rc)
            return rc;
        t->n++;
    }
    return 0;
}

/* Stop accepting on the TLS listeners (the drain). */
void tls_drain(struct server *srv)
{
    struct tls *t = srv->tls;
    for (size_t i = 0; t && i < t->n; i++) {
        listener_close(t->listeners[i]);
        t->listeners[i] = NULL;
    }
}

/* Free the TLS context and listeners; safe when never started. */
void tls_fini(struct server *srv)
{
    struct tls *t = srv->tls;
    if (!t)
        return;
    tls_drain(srv);
    free(t->listeners);
    if (t->ctx)
        SSL_CTX_free(t->ctx);
    free(t);
    srv->tls = NULL;
}

/* A server-side TLS bufferevent around an accepted socket; NULL on failure (fd closed). */
struct bufferevent *tls_bufferevent(struct server *srv, int fd)
{
    SSL *ssl = SSL_new(srv->tls->ctx);
    struct bufferevent *bev =
        ssl ? bufferevent_openssl_socket_new(srv->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE)
            : NULL;
    if (!bev) {
        if (ssl)
            SSL_free(ssl);
        close(fd);
        return NULL;
    }
    /* A peer that closes without close_notify has still only closed: EOF, not an error. */
    bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
    return bev;
}

/* A connection's bufferevent reported an error: count and log a TLS failure (a refused certificate). */
void tls_note_error(struct server *srv, struct bufferevent *bev, const char *peer)
{
    unsigned long e = srv->tls ? bufferevent_get_openssl_error(bev) : 0;
    if (!e)
        return;
    char err[256];
    ERR_error_string_n(e, err, sizeof err);
    while (bufferevent_get_openssl_error(bev))
        ; /* drain the rest of this connection's error queue */
    stats_inc(&srv->stats, STAT_TLS_HANDSHAKE_FAILURES);
    log_msg(LOG_INFO, "TLS connection from %s failed: %s", peer, err);
}

/* Write ", TLS on ADDR,... (client certificates required|not checked)" for the startup line. */
void tls_describe(const struct server *srv, char *buf, size_t n)
{
    const struct tls *t = srv->tls;
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; t && i < t->n && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? "," : "; TLS on ", listener_name(t->listeners[i]));
    if (t && t->n && used < n)
        snprintf(buf + used, n - used, " (client certificates %s)",
                 *srv->opt.tls_ca ? "required" : "not checked: token-authenticated only");
}
