/*
 * TLS for one handle: a context and session of its own (the library keeps
 * no global state), made after the TCP connect when the URL asks for TLS.
 * The server's certificate is verified against ?ca= (else the system's
 * CAs) and must name the URL's host; ?cert= and ?key= supply a client
 * certificate.  The socket stays non-blocking: reads and writes report
 * "would block" like recv/send, and tls_wait() polls only when OpenSSL
 * holds no decrypted bytes already.
 */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <sys/socket.h>
#include <time.h>

#include "internal.h"

/* Describe the oldest queued OpenSSL error into why, and clear the queue. */
static void tls_why(char *why, size_t n, const char *what)
{
    char err[200] = "";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, err, sizeof err);
    ERR_clear_error();
    snprintf(why, n, "%s%s%s", what, *err ? ": " : "", err);
}

/* Build the handle's client context from the URL; 0, or -1 with why filled. */
static int tls_context(muster_t *m, char *why, size_t n)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx) {
        tls_why(why, n, "cannot create a TLS context");
        return -1;
    }
    m->tls_ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    const muster_url *u = &m->url;
    int ok = *u->tls_ca ? SSL_CTX_load_verify_locations(ctx, u->tls_ca, NULL) : SSL_CTX_set_default_verify_paths(ctx);
    if (ok != 1) {
        tls_why(why, n, "cannot load the CA (ca=)");
        return -1;
    }
    if (*u->tls_cert && (SSL_CTX_use_certificate_chain_file(ctx, u->tls_cert) != 1 ||
                         SSL_CTX_use_PrivateKey_file(ctx, *u->tls_key ? u->tls_key : u->tls_cert,
                                                     SSL_FILETYPE_PEM) != 1)) {
        tls_why(why, n, "cannot load the client certificate (cert=, key=)");
        return -1;
    }
    return 0;
}

/* Make the session and tell it which name the server's certificate must carry; 0 or -1. */
static int tls_session(muster_t *m, char *why, size_t n)
{
    SSL *ssl = SSL_new(m->tls_ctx);
    if (!ssl || SSL_set_fd(ssl, m->fd) != 1) {
        SSL_free(ssl);
        tls_why(why, n, "cannot create a TLS session");
        return -1;
    }
    m->tls = ssl;
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    const char *host = m->url.host;
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    /* An address literal is checked against the certificate's IP names, a host name against its DNS names. */
    if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) {
        if (SSL_set_tlsext_host_name(ssl, host) != 1 || SSL_set1_host(ssl, host) != 1) {
            tls_why(why, n, "cannot set the server name");
            return -1;
        }
    }
    return 0;
}

/* Run the TLS handshake on m's connected socket before deadline; MUSTER_OK or an error with why filled. */
int tls_connect(muster_t *m, uint64_t deadline, char *why, size_t n)
{
    if (tls_context(m, why, n) != 0 || tls_session(m, why, n) != 0)
        return MUSTER_ECONN;
    for (;;) {
        int rc = SSL_connect(m->tls);
        if (rc == 1)
            return MUSTER_OK;
        int e = SSL_get_error(m->tls, rc);
        short ev = e == SSL_ERROR_WANT_READ ? POLLIN : e == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
        if (!ev) {
            long v = SSL_get_verify_result(m->tls);
            if (v != X509_V_OK)
                snprintf(why, n, "TLS: server certificate refused: %s", X509_verify_cert_error_string(v));
            else
                tls_why(why, n, "TLS handshake failed");
            /* A certificate either side refuses stays refused: not worth a retry. */
            return e == SSL_ERROR_SSL ? MUSTER_EAUTH : MUSTER_ECONN;
        }
        int rev = sock_wait(m->fd, ev, deadline);
        if (rev == 0) {
            snprintf(why, n, "TLS handshake timed out");
            return MUSTER_ETIMEDOUT;
        }
        if (rev < 0) {
            snprintf(why, n, "TLS handshake: %s", strerror(errno));
            return MUSTER_ECONN;
        }
    }
}

/* Run SSL_read (write 0), SSL_write (1) or SSL_shutdown (2) with SIGPIPE blocked in this thread: OpenSSL writes
 * with plain write(), and a library must not let a closed peer kill its caller.  A SIGPIPE it raised
 * is consumed before the mask is restored.  Returns what OpenSSL returned; errno is kept. */
static int tls_io(muster_t *m, int write, void *buf, size_t n)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    sigpending(&pending);
    int was_pending = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    errno = 0;
    int len = n > INT32_MAX ? INT32_MAX : (int)n;
    int rc = write == 2 ? SSL_shutdown(m->tls) : write ? SSL_write(m->tls, buf, len) : SSL_read(m->tls, buf, len);
    int saved = errno;
    if (saved == EPIPE && !was_pending) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return rc;
}

/* Send close_notify once, without waiting (the socket is closed right after). */
static void tls_io_shutdown(muster_t *m)
{
    char none[1];
    tls_io(m, 2, none, 0);
}

/* Free m's TLS session and context (before its socket is closed); safe without TLS. */
void tls_close(muster_t *m)
{
    if (m->tls && SSL_is_init_finished(m->tls))
        tls_io_shutdown(m);
    SSL_free(m->tls);
    SSL_CTX_free(m->tls_ctx);
    m->tls = NULL;
    m->tls_ctx = NULL;
}

/* Map a failed SSL_read/SSL_write to recv/send conventions: 0 for EOF, else -1 with errno. */
static ssize_t tls_fail(muster_t *m, int rc)
{
    int e = SSL_get_error(m->tls, rc);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0))
        return 0; /* closed, with or without close_notify */
    if (e != SSL_ERROR_SYSCALL) {
        m->tls_refused = 1; /* a TLS alert: the peer refused us, retrying will not help */
        errno = EPROTO;
    }
    return -1;
}

/* Read up to n bytes without waiting, like recv(MSG_DONTWAIT): bytes, 0 at EOF, -1 with errno. */
ssize_t tls_recv(muster_t *m, void *buf, size_t n)
{
    if (!m->tls)
        return recv(m->fd, buf, n, MSG_DONTWAIT);
    int rc = tls_io(m, 0, buf, n);
    return rc > 0 ? rc : tls_fail(m, rc);
}

/* Write up to n bytes without waiting, like send(MSG_DONTWAIT | MSG_NOSIGNAL). */
ssize_t tls_send(muster_t *m, const void *buf, size_t n)
{
    if (!m->tls)
        return send(m->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    int rc = tls_io(m, 1, (void *)buf, n);
    if (rc > 0)
        return rc;
    ssize_t r = tls_fail(m, rc);
    if (r == 0) {
        errno = EPIPE; /* a write that meets EOF failed */
        r = -1;
    }
    return r;
}

/* Whether OpenSSL holds decrypted bytes not yet read (0 without TLS). */
int tls_pending(const muster_t *m)
{
    return m->tls && SSL_pending(m->tls) > 0;
}

/* sock_wait for m's socket, answering POLLIN at once while OpenSSL holds decrypted bytes. */
int tls_wait(muster_t *m, short events, uint64_t deadline)
{
    if (m->tls && (events & POLLIN) && SSL_pending(m->tls) > 0)
        return POLLIN;
    return sock_wait(m->fd, events, deadline);
}
