/*
 * Guessing tokens is slow: after a wrong token, hellos from that address
 * to a token-protected namespace are held for a growing time
 * (--auth-backoff) before their token is compared, one per wait, however
 * many connections ask at once.  The right token is not refused: its hello
 * is answered once the wait is over.  A hello whose wait would outlast
 * --hello-timeout is refused LIMIT with the wait.  Another address is not
 * held back, nor the same address's open namespaces.  The guesser connects
 * from 127.0.0.2, everyone else from 127.0.0.1.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hclient.h"
#include "raw.h"

#define T_BACKOFF_MS 100
#define T_BACKOFF_MAX_MS 800

/* Say hello to ns with token from src; 0, the refusal's muster_err, or -1.  msg (may be NULL) gets its words. */
static int t_hello_from(const struct h_daemon *d, const char *src, const char *ns, const char *token, char *msg,
                        size_t n)
{
    int fd = raw_connect_from(d->port, src), rc = -1;
    if (fd < 0 || raw_send_hello(fd, ns, token) != 0)
        goto out;
    Muster__ServerFrame *f = raw_recv(fd, 5000, NULL);
    if (f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_HELLO_REPLY)
        rc = 0;
    else if (f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR) {
        rc = (int)f->error->status;
        if (msg)
            snprintf(msg, n, "%s", f->error->message);
    }
    raw_free(f);
out:
    if (fd >= 0)
        close(fd);
    return rc;
}

/* One second of wrong guesses as fast as the answers come: only a handful have their token compared. */
static void t_guess_rate(const struct h_daemon *d)
{
    int judged = 0, other = 0;
    char msg[256] = "";
    int64_t t0 = h_now_ms();
    for (int i = 0; i < 20000 && h_now_ms() - t0 < 1000; i++) {
        int rc = t_hello_from(d, "127.0.0.2", "locked", "guess", msg, sizeof msg);
        judged += rc == MUSTER_EAUTH;
        other += rc != MUSTER_EAUTH;
    }
    printf("  1 s of guessing: %d tokens compared, %d other answers (last: %s)\n", judged, other, msg);
    /* Each hello is held out its wait: 100, 200, 400 and 800 ms fit about 4 comparisons into a second. */
    CHECK(judged >= 1 && judged <= 6);
    CHECK_EQ(other, 0);
}

/* Many guesses at once from one address are compared one per wait, not all when the wait ends. */
static void t_parallel_guesses(const struct h_daemon *d)
{
    enum { N = 12 };
    int fds[N], judged = 0, silent = 0;
    usleep((2 * T_BACKOFF_MAX_MS + 100) * 1000); /* quiet for the longest wait after its own: starts over */
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "locked", "guess", NULL, 0), MUSTER_EAUTH); /* a wait of 100 ms */
    for (int i = 0; i < N; i++) {
        fds[i] = raw_connect_from(d->port, "127.0.0.2");
        CHECK(fds[i] >= 0 && raw_send_hello(fds[i], "locked", "guess") == 0);
    }
    /* Waits of 200, 400 and 800 ms after the 100: about 3 more comparisons in 1.2 s. */
    usleep(1200 * 1000);
    for (int i = 0; i < N; i++) {
        Muster__ServerFrame *f = raw_recv(fds[i], 1, NULL);
        judged += f && f->frame_case == MUSTER__SERVER_FRAME__FRAME_ERROR && (int)f->error->status == MUSTER_EAUTH;
        silent += f == NULL;
        raw_free(f);
    }
    printf("  %d guesses at once: %d compared in 1.2 s, %d still held\n", N, judged, silent);
    CHECK(judged >= 1 && judged <= 4);
    CHECK(silent >= N - 4);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    usleep((T_BACKOFF_MAX_MS + 100) * 1000);
}

/* While 127.0.0.2 waits: another address, and 127.0.0.2's open namespaces, are served at once. */
static void t_others_unaffected(const struct h_daemon *d)
{
    int64_t t0 = h_now_ms();
    CHECK_EQ(t_hello_from(d, "127.0.0.1", "locked", "s3cret", NULL, 0), 0);
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "open", NULL, NULL, 0), 0);
    muster_t *m = hc_connect(d, "locked", "s3cret");
    if (m)
        CHECK_EQ(hc_set_str(m, "k", "v"), MUSTER_OK);
    muster_close(m);
    CHECK(h_now_ms() - t0 < 1000);
}

/* The right token from the guessing address is not refused: its one hello is answered within the wait. */
static void t_right_token_waits(const struct h_daemon *d)
{
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "locked", "guess", NULL, 0), MUSTER_EAUTH);
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "locked", "guess", NULL, 0), MUSTER_EAUTH); /* held, then judged */
    int64_t t0 = h_now_ms();
    CHECK_EQ(t_hello_from(d, "127.0.0.2", "locked", "s3cret", NULL, 0), 0);
    int64_t took = h_now_ms() - t0;
    printf("  the right token from the guessing address got in after %lld ms\n", (long long)took);
    CHECK(took >= 100 && took <= T_BACKOFF_MAX_MS + 300);
}

/* A wait longer than --hello-timeout is not held: the hello is refused LIMIT with the wait. */
static void t_wait_past_hello_timeout(void *arg)
{
    (void)arg;
    static const char *const args[] = {"--token", "locked=s3cret", "--auth-backoff", "2000", "--hello-timeout",
                                       "1000", NULL};
    struct h_daemon d;
    char msg[256] = "";
    if (h_start(&d, args) < 0)
        return;
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "locked", "guess", NULL, 0), MUSTER_EAUTH);
    CHECK_EQ(t_hello_from(&d, "127.0.0.2", "locked", "s3cret", msg, sizeof msg), MUSTER_ELIMIT);
    CHECK(strstr(msg, "retry in") != NULL);
    CHECK_EQ(h_stop(&d), 0);
}

/* Run the backoff tests against a daemon with one token-protected namespace. */
int main(void)
{
    static const char *const args[] = {"--token", "locked=s3cret", "--auth-backoff", "100", "--auth-backoff-max",
                                       "800", NULL};
    struct h_daemon d;
    h_init("auth_backoff", 60);
    if (h_start(&d, args) < 0)
        return h_finish();
    H_RUN(t_guess_rate, &d);
    H_RUN(t_others_unaffected, &d);
    H_RUN(t_parallel_guesses, &d);
    H_RUN(t_right_token_waits, &d);
    CHECK(h_stat(&d, "auth_throttled") >= 1);
    CHECK_EQ(h_stop(&d), 0);
    H_RUN(t_wait_past_hello_timeout, NULL);
    return h_finish();
}
