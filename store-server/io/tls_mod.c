/*
 * The TLS module, musterd-tls.so: everything that touches OpenSSL, behind
 * the table in tls_mod.h.  musterd loads it only when --tls-listen is given
 * (tls.c), so a daemon without TLS never maps libssl or libcrypto.  The
 * connections it makes use libevent's bufferevent_openssl with TLS 1.2 or
 * later; with a CA bundle, a client without a certificate signed by it
 * fails its handshake.
 */
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <unistd.h>

#include "tls_mod.h"

/* Write the oldest queued OpenSSL error after a prefix into err, and clear the queue. */
static void tls_mod_error(const char *what, char *err, size_t n)
{
    char e[256] = "unknown error";
    unsigned long code = ERR_get_error();
    if (code)
        ERR_error_string_n(code, e, sizeof e);
    ERR_clear_error();
    snprintf(err, n, "%s: %s", what, e);
}

/* Load the chain, key and CA into ctx; the failing option's name, or NULL. */
static const char *tls_mod_load(SSL_CTX *ctx, const char *cert, const char *key, const char *ca)
{
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return "--tls-cert";
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
        return "--tls-key";
    if (SSL_CTX_check_private_key(ctx) != 1)
        return "--tls-key does not match --tls-cert";
    if (*ca && SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        return "--tls-ca";
    return NULL;
}

/* A server context from a PEM chain, key and optional CA bundle; NULL with err filled. */
static void *tls_mod_ctx_new(const char *cert, const char *key, const char *ca, char *err, size_t n)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        tls_mod_error("cannot create a TLS context", err, n);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* A client that closes without close_notify has still just closed (OpenSSL 3 calls it an error). */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    const char *fail = tls_mod_load(ctx, cert, key, ca);
    if (fail) {
        tls_mod_error(fail, err, n);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (*ca)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    return ctx;
}

/* Free a context from tls_mod_ctx_new. */
static void tls_mod_ctx_free(void *ctx)
{
    SSL_CTX_free(ctx);
}

/* A server-side TLS bufferevent around fd (the handshake runs as it reads); NULL with fd closed. */
static struct bufferevent *tls_mod_bev_new(void *ctx, struct event_base *base, int fd)
{
    SSL *ssl = SSL_new(ctx);
    struct bufferevent *bev =
        ssl ? bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE) : NULL;
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

/* The first TLS error queued on bev as text, the rest drained; 0 when there was none. */
static int tls_mod_bev_error(struct bufferevent *bev, char *err, size_t n)
{
    unsigned long e = bufferevent_get_openssl_error(bev);
    if (!e)
        return 0;
    ERR_error_string_n(e, err, n);
    while (bufferevent_get_openssl_error(bev))
        ; /* drain the rest of this connection's error queue */
    return 1;
}

/* The table musterd looks up by name (TLS_MOD_SYMBOL) after loading the module. */
__attribute__((visibility("default"))) const struct tls_mod tls_mod_ops = {
    .abi = TLS_MOD_ABI,
    .ctx_new = tls_mod_ctx_new,
    .ctx_free = tls_mod_ctx_free,
    .bev_new = tls_mod_bev_new,
    .bev_error = tls_mod_bev_error,
};
