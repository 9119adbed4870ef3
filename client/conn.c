/*
 * Connections: create a handle, connect with retries under one deadline,
 * exchange the hello, and close.  Also the small accessors on a handle.
 *
 * Retries use exponential backoff with full jitter (a random sleep between
 * zero and the current step; the step starts at 50 ms, doubles, and stops
 * growing at 2 s), so a job's thousand workers started at once against a
 * daemon that is still coming up do not knock on it in lockstep.  Only
 * failures that may pass are retried: refused or lost connections, a hello
 * that times out, a server that is draining or at its connection limit.  A
 * rejected token or a protocol mismatch fails at once.
 *
 * With several endpoints (or ?failover=1) the handle looks for the leader of
 * a high-availability set: endpoints are tried in order from the last one
 * that worked, moving on at once when one fails and backing off only after
 * a whole pass failed.  Each connection is checked with one request after
 * the hello, because a standby accepts the hello and refuses only requests
 * (NOT_LEADER with the leader's address, which is tried next, even when the
 * URL does not list it).
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "tcpka.h"

#define CONN_BACKOFF_START_MS 50u
#define CONN_BACKOFF_CAP_MS 2000u
/* TCP liveness when the server names no heartbeat timeout: musterd's default one. */
#define CONN_DEFAULT_LIVENESS_MS 3000u

/* Next value of the handle's xorshift generator (jitter only; not crypto). */
static uint64_t conn_random(muster_t *m)
{
    uint64_t x = m->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    m->rng = x;
    return x;
}

/* Sleep ms milliseconds, but not past deadline. */
static void conn_sleep(uint32_t ms, uint64_t deadline)
{
    uint64_t wake = deadline_after(ms);
    if (wake > deadline)
        wake = deadline;
    int left;
    while ((left = deadline_left(wake)) > 0)
        poll(NULL, 0, left);
}

/* Close the socket and forget unsent and half-read bytes (not the stash or events). */
void conn_drop(muster_t *m)
{
    tls_close(m);
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    wire_reset_io(m);
}

/* Store what the hello reply says about the server. */
static int conn_take_reply(muster_t *m, const Muster__HelloReply *r)
{
    if (r->protocol_version != MUSTER_PROTOCOL_VERSION)
        return error_set(m, MUSTER_EPROTO, "server speaks protocol %u, this library %d", r->protocol_version,
                         MUSTER_PROTOCOL_VERSION);
    m->session_id = r->session_id;
    snprintf(m->server_version, sizeof m->server_version, "%s", r->server_version);
    if (r->limits) {
        m->limits.max_frame = r->limits->max_frame;
        m->limits.max_key = r->limits->max_key;
        m->limits.max_value = r->limits->max_value;
        m->limits.max_keys_per_request = r->limits->max_keys_per_request;
        m->limits.default_wait_timeout_ms = r->limits->default_wait_timeout_ms;
        m->limits.heartbeat_timeout_ms = r->limits->heartbeat_timeout_ms;
    }
    /* A server that vanishes without a FIN is noticed on the heartbeat's time scale, not the kernel's. */
    uint32_t hb = m->limits.heartbeat_timeout_ms ? m->limits.heartbeat_timeout_ms : CONN_DEFAULT_LIVENESS_MS;
    tcpka_set(m->fd, hb, hb);
    return MUSTER_OK;
}

/* Interpret the server's first frame: a hello reply, or a refusal. */
static int conn_first_frame(muster_t *m, const Muster__ServerFrame *f)
{
    if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY)
        return conn_take_reply(m, f->hello_reply);
    if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR)
        return error_set(m, error_from_status(f->error->status), "server refused the hello: %s",
                         f->error->message);
    if (f->frame_case == MUSTER__SERVER_FRAME__FRAME_RESPONSE && f->response->status != MUSTER__STATUS__OK)
        return error_set(m, error_from_status(f->response->status), "server refused the hello: %s",
                         f->response->error_message);
    return error_set(m, MUSTER_EPROTO, "server answered the hello with frame case %d", (int)f->frame_case);
}

/* Send the hello and read the reply before deadline. */
static int conn_hello(muster_t *m, uint64_t deadline)
{
    Muster__Hello hello = MUSTER__HELLO__INIT;
    hello.protocol_version = MUSTER_PROTOCOL_VERSION;
    hello.namespace_ = m->url.ns;
    hello.token = m->url.token;
    hello.client_name = m->client_name;
    hello.credential = m->credential;
    hello.generation = m->url.generation;
    Muster__ClientFrame f = MUSTER__CLIENT_FRAME__INIT;
    f.frame_case = MUSTER__CLIENT_FRAME__FRAME_HELLO;
    f.hello = &hello;
    int rc = wire_send_frame(m, &f, deadline);
    Muster__ServerFrame *reply = NULL;
    if (rc == MUSTER_OK)
        rc = wire_read_frame(m, deadline, WIRE_MAX_HELLO_FRAME, &reply);
    if (rc == MUSTER_OK) {
        rc = conn_first_frame(m, reply);
        muster__server_frame__free_unpacked(reply, NULL);
    }
    return rc;
}

/* Ask one request of a fresh connection to learn whether it serves (a
 * standby answers NOT_LEADER, recorded as the redirect); a muster_err. */
static int conn_probe(muster_t *m, uint64_t deadline)
{
    Muster__NumKeysReq op = MUSTER__NUM_KEYS_REQ__INIT;
    Muster__Request req = MUSTER__REQUEST__INIT;
    req.op_case = MUSTER__REQUEST__OP_NUM_KEYS;
    req.num_keys = &op;
    uint64_t id = 0;
    Muster__Response *resp = NULL;
    int rc = wire_queue(m, &req, &id);
    if (rc == MUSTER_OK)
        rc = wire_flush(m, deadline);
    if (rc == MUSTER_OK)
        rc = wire_wait(m, id, deadline, &resp);
    if (rc == MUSTER_OK)
        rc = wire_check(m, resp, req.op_case);
    wire_free(resp);
    if (rc == MUSTER_ENOTLEADER)
        m->has_redirect = url_parse_endpoint(m->last_error, &m->redirect) == 0;
    return rc;
}

/* One connect + hello attempt before deadline. */
static int conn_attempt(muster_t *m, uint64_t deadline)
{
    char why[256];
    conn_drop(m);
    m->broken = 0;
    m->fd = sock_connect(m->url.host, m->url.port, deadline, why, sizeof why);
    m->connect_final = m->fd == -2;
    if (m->fd < 0) {
        m->fd = -1;
        return error_set(m, MUSTER_ECONN, "cannot reach %s port %u: %s", m->url.host, (unsigned)m->url.port, why);
    }
    int rc = m->url.tls ? tls_connect(m, deadline, why, sizeof why) : MUSTER_OK;
    if (rc != MUSTER_OK) {
        conn_drop(m);
        return error_set(m, rc, "%s", why);
    }
    m->tls_refused = 0;
    rc = conn_hello(m, deadline);
    if (rc != MUSTER_OK && m->tls_refused)
        rc = error_set(m, MUSTER_EAUTH, "TLS: the server refused this client (certificate missing or not trusted)");
    if (rc == MUSTER_OK && m->url.failover)
        rc = conn_probe(m, deadline);
    if (rc != MUSTER_OK) {
        conn_drop(m);
        m->broken = rc;
    }
    return rc;
}

/* Whether a failed attempt is worth repeating before the deadline. */
static int conn_retryable(int rc)
{
    return rc == MUSTER_ECONN || rc == MUSTER_ETIMEDOUT || rc == MUSTER_ESHUTDOWN || rc == MUSTER_ELIMIT ||
           rc == MUSTER_ENOTLEADER;
}

/* Point m->url.host/port at the next target: the redirect when one is to be
 * followed (counted in *hops), else the endpoint at m->ep_cur.  Returns 1
 * for a redirect. */
static int conn_target(muster_t *m, unsigned *hops)
{
    const muster_endpoint *e = &m->url.endpoints[m->ep_cur];
    int follow = m->has_redirect && *hops < CONN_MAX_REDIRECTS;
    if (follow) {
        e = &m->redirect;
        (*hops)++;
    }
    m->has_redirect = 0;
    memmove(m->url.host, e->host, sizeof m->url.host);
    m->url.port = e->port;
    return follow;
}

/* Make the listed endpoint equal to the one just reached (if any) the place to start next time. */
static void conn_remember(muster_t *m)
{
    for (size_t i = 0; i < m->url.n_endpoints; i++)
        if (m->url.endpoints[i].port == m->url.port && strcmp(m->url.endpoints[i].host, m->url.host) == 0)
            m->ep_cur = i;
}

/* Connect and say hello before deadline, trying the URL's endpoints (and
 * redirects) with backoff; the socket only, stash and events are kept. */
int conn_establish(muster_t *m, uint64_t deadline)
{
    uint32_t step = CONN_BACKOFF_START_MS;
    unsigned hops = 0;
    size_t failed = 0;
    char refusal[sizeof m->last_error] = "";
    for (unsigned attempt = 1;; attempt++) {
        int redirected = conn_target(m, &hops);
        int rc = conn_attempt(m, deadline);
        if (rc == MUSTER_OK) {
            conn_remember(m);
            m->broken = 0;
            m->conn_gen++;
            log_emit(m, MUSTER_LOG_DEBUG, "connected to %s:%u (session %llu, server %s)", m->url.host,
                     (unsigned)m->url.port, (unsigned long long)m->session_id, m->server_version);
            return MUSTER_OK;
        }
        /* A server's LIMIT answer (full, or out of namespaces) is kept: when the deadline then ends an
         * attempt mid-way, the caller learns it was refused rather than "cannot connect". */
        if (rc == MUSTER_ELIMIT)
            memcpy(refusal, m->last_error, sizeof refusal);
        if (!conn_retryable(rc) || (m->connect_final && m->url.n_endpoints == 1) || deadline_left(deadline) == 0) {
            if (refusal[0] && (rc == MUSTER_ETIMEDOUT || rc == MUSTER_ECONN)) {
                memcpy(m->last_error, refusal, sizeof refusal);
                rc = MUSTER_ELIMIT;
            }
            log_emit(m, MUSTER_LOG_ERROR, "%s", m->last_error);
            /* Any transport failure that outlasted the deadline reads "cannot connect". */
            return rc == MUSTER_ETIMEDOUT ? MUSTER_ECONN : rc;
        }
        if (strncmp(m->last_error, "cannot reach ", 13) == 0) /* the error names the target already */
            log_emit(m, MUSTER_LOG_INFO, "attempt %u: %s; %s", attempt, m->last_error,
                     m->has_redirect ? "following" : "retrying");
        else
            log_emit(m, MUSTER_LOG_INFO, "attempt %u to reach %s port %u: %s; %s", attempt, m->url.host,
                     (unsigned)m->url.port, m->last_error, m->has_redirect ? "following" : "retrying");
        if (m->has_redirect && hops < CONN_MAX_REDIRECTS)
            continue;
        /* A failed redirect does not count against the listed endpoints. */
        if (!redirected)
            m->ep_cur = (m->ep_cur + 1) % m->url.n_endpoints;
        /* Back off after a whole pass failed, or when nobody leads right now. */
        if (++failed < m->url.n_endpoints && rc != MUSTER_ENOTLEADER)
            continue;
        failed = 0;
        hops = 0;
        conn_sleep((uint32_t)(conn_random(m) % (step + 1u)), deadline);
        step = step * 2 > CONN_BACKOFF_CAP_MS ? CONN_BACKOFF_CAP_MS : step * 2;
    }
}

/* Fill the handle's settings from the parsed URL and the options. */
static void conn_configure(muster_t *m, const muster_opts *o)
{
    m->default_timeout_ms = o->default_timeout_ms   ? o->default_timeout_ms
                            : m->url.timeout_ms     ? m->url.timeout_ms
                                                    : CALL_DEFAULT_TIMEOUT_MS;
    const char *name = o->client_name ? o->client_name : m->url.name[0] ? m->url.name : "libmuster";
    snprintf(m->client_name, sizeof m->client_name, "%s", name);
    /* A worker of `muster run` writes its generation's keys with its node's credential (docs/launcher.md). */
    const char *cred = getenv("MUSTER_CREDENTIAL");
    snprintf(m->credential, sizeof m->credential, "%s", cred ? cred : "");
    m->log_fn = o->log_fn;
    m->log_arg = o->log_arg;
    /* Seeded per handle so processes started together still jitter apart. */
    m->rng = (deadline_now() << 20) ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)m;
    m->rng |= 1;
}

/* Make the handle's lock, its condition (on the monotonic clock, as every
 * deadline is) and the eventfd that wakes a driving thread; a muster_err. */
static int conn_sync_init(muster_t *m)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return MUSTER_ENOMEM;
    int ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&m->cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok)
        return MUSTER_ENOMEM;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        pthread_cond_destroy(&m->cond);
        return MUSTER_ENOMEM;
    }
    m->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (m->wake_fd < 0) {
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->cond);
        return error_set(m, MUSTER_ENOMEM, "eventfd failed");
    }
    m->sync_ready = 1;
    return MUSTER_OK;
}

/* As muster_connect with explicit options (opts may be NULL). */
muster_t *muster_connect_opts(const char *url, const muster_opts *opts, int *err)
{
    muster_opts none;
    memset(&none, 0, sizeof none);
    const muster_opts *o = opts ? opts : &none;
    int tmp;
    err = err ? err : &tmp;
    muster_t *m = calloc(1, sizeof *m);
    if (!m) {
        *err = MUSTER_ENOMEM;
        return NULL;
    }
    m->fd = -1;
    m->wake_fd = -1;
    m->loop_fd = -1;
    char why[256];
    m->log_fn = o->log_fn;
    m->log_arg = o->log_arg;
    *err = conn_sync_init(m);
    if (*err == MUSTER_OK)
        *err = muster_url_parse_detail(url, &m->url, why, sizeof why);
    if (*err == MUSTER_EURL)
        log_emit(m, MUSTER_LOG_ERROR, "bad store URL: %s", why);
    if (*err == MUSTER_OK) {
        conn_configure(m, o);
        uint32_t budget = o->connect_timeout_ms ? o->connect_timeout_ms : m->default_timeout_ms;
        *err = conn_establish(m, deadline_after(budget));
    }
    if (*err != MUSTER_OK) {
        conn_free(m);
        return NULL;
    }
    return m;
}

/* Connect to the store at url with default options. */
muster_t *muster_connect(const char *url, int *err)
{
    return muster_connect_opts(url, NULL, err);
}

/* Free the handle and everything it holds, with no callback run (calls in flight must be gone). */
void conn_free(muster_t *m)
{
    conn_drop(m);
    wire_clear(m);
    event_clear(m);
    event_watch_clear(m);
    wire_free(m->armed_resp);
    if (m->sync_ready) {
        close(m->wake_fd);
        pthread_mutex_destroy(&m->lock);
        pthread_cond_destroy(&m->cond);
    }
    free(m);
}

/* The detail for the last failed call on m ("" when none). */
const char *muster_last_error(const muster_t *m)
{
    return m ? m->last_error : "";
}

/* 0 while m is usable, else the error that broke it. */
int muster_broken(const muster_t *m)
{
    return m ? m->broken : MUSTER_EINVAL;
}

/* The socket fd (-1 for NULL). */
int muster_fd(const muster_t *m)
{
    return m ? m->fd : -1;
}

/* The server's session id for this connection. */
uint64_t muster_session_id(const muster_t *m)
{
    return m ? m->session_id : 0;
}

/* The server's limit on value size, from the hello reply. */
uint32_t muster_max_value(const muster_t *m)
{
    return m ? m->limits.max_value : 0;
}

/* Free a buffer returned by the library. */
void muster_free(void *p)
{
    free(p);
}

/* Free an array of n buffers returned by the library, and the array. */
void muster_free_list(void **list, size_t n)
{
    if (!list)
        return;
    for (size_t i = 0; i < n; i++)
        free(list[i]);
    free(list);
}
