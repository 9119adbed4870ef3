/*
 * TLS listeners.  Each --tls-listen address accepts connections that speak
 * the same framed protocol inside TLS (1.2 or later), through libevent's
 * bufferevent_openssl, so conn.c handles them like any other connection.
 * --tls-cert and --tls-key name the server's certificate chain and key;
 * with --tls-ca, clients must present a certificate signed by that CA and
 * a connection without one fails its handshake (counted as
 * tls_handshake_failures).  The handshake runs inside the hello timeout.
 * Plain --listen addresses stay available for trusted networks.
 *
 * Everything that calls OpenSSL lives in a separate module, musterd-tls.so
 * (tls_mod.c), loaded here only when --tls-listen is given.  Linked in, the
 * OpenSSL libraries alone were about 1.7 MiB of an idle daemon's 5.1 MiB
 * resident set (relocation and start-up pages of libcrypto and libssl),
 * paid by every daemon whether or not it serves TLS; see docs/service.md.
 */
#include "tls.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "listener.h"
#include "log.h"
#include "server.h"
#include "tls_mod.h"

#ifndef MUSTER_TLS_MODULE_DIR
#define MUSTER_TLS_MODULE_DIR "/usr/local/lib/muster"
#endif

struct tls {
    void *dl;                 /* the loaded module (never unloaded) */
    const struct tls_mod *mod;
    void *ctx;                /* the module's server context */
    struct listener **listeners;
    size_t n;
};

/* Write the directory of the running binary into dir; 0, or -1 when it cannot be read. */
static int tls_exe_dir(char *dir, size_t n)
{
    ssize_t len = readlink("/proc/self/exe", dir, n - 1);
    if (len <= 0)
        return -1;
    dir[len] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash)
        return -1;
    *slash = 0;
    return 0;
}

/* Open the module at dir/TLS_MOD_FILE; the handle, or NULL with the loader's reason in why. */
static void *tls_dlopen(const char *dir, char *why, size_t n)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", dir, TLS_MOD_FILE);
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *e = dlerror();
        snprintf(why, n, "%.480s", e ? e : path);
    }
    return dl;
}

/* Load the module from beside the binary (a build tree), else the install directory; 0 or EX_UNAVAILABLE. */
static int tls_load(struct tls *t)
{
    char dir[PATH_MAX], why[2][512] = {"no binary directory", ""};
    if (tls_exe_dir(dir, sizeof dir) == 0)
        t->dl = tls_dlopen(dir, why[0], sizeof why[0]);
    if (!t->dl)
        t->dl = tls_dlopen(MUSTER_TLS_MODULE_DIR, why[1], sizeof why[1]);
    if (!t->dl) {
        log_msg(LOG_ERROR, "--tls-listen needs the TLS module %s, which did not load (%s; %s)", TLS_MOD_FILE,
                why[0], why[1]);
        return EX_UNAVAILABLE;
    }
    t->mod = dlsym(t->dl, TLS_MOD_SYMBOL);
    if (!t->mod || t->mod->abi != TLS_MOD_ABI) {
        log_msg(LOG_ERROR, "%s is not a TLS module of this musterd (interface %d, expected %d)", TLS_MOD_FILE,
                t->mod ? t->mod->abi : -1, TLS_MOD_ABI);
        t->mod = NULL;
        return EX_UNAVAILABLE;
    }
    return 0;
}


/* Load the certificate, key and CA and bind every --tls-listen address, whose connections go to
 * accept; 0 or an exit status. */
int tls_start(struct server *srv, listener_accept_fn accept)
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
    int rc = tls_load(t);
    if (rc)
        return rc;
    char err[512];
    if (!(t->ctx = t->mod->ctx_new(o->tls_cert, o->tls_key, o->tls_ca, err, sizeof err))) {
        log_msg(LOG_ERROR, "%s", err);
        return EX_CONFIG;
    }
    for (size_t i = 0; i < o->tls_listen.n; i++) {
        rc = listener_open_with(srv, o->tls_listen.v[i], accept, &t->listeners[i]);
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
        t->mod->ctx_free(t->ctx); /* connections still open hold their own reference */
    /* The module stays loaded: TLS connections freed after this still run its libraries' code. */
    free(t);
    srv->tls = NULL;
}

/* A server-side TLS bufferevent around an accepted socket; NULL on failure (fd closed). */
struct bufferevent *tls_bufferevent(struct server *srv, int fd)
{
    return srv->tls->mod->bev_new(srv->tls->ctx, srv->base, fd);
}

/* A connection's bufferevent reported an error: count and log a TLS failure (a refused certificate). */
void tls_note_error(struct server *srv, struct bufferevent *bev, const char *peer)
{
    char err[256];
    if (!srv->tls || !srv->tls->mod || !srv->tls->mod->bev_error(bev, err, sizeof err))
        return;
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
