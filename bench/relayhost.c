/* muster-relayhost: many nodes' TCPStore relays in one process, for the storm harness
 * (bench/storm.sh).  Each relay is the one `muster run` hosts per node (run_relay_start:
 * its own thread, poll loop, libmuster handle (waits parked at musterd), a
 * listener on 127.0.0.1), started here without a launcher or workers.  The relays' ports
 * go to --ports-file ("127.0.0.1 PORT" per line, in order), then --ready-file is written;
 * the process holds them until SIGTERM, SIGINT or --hold seconds, stops them all and
 * prints one JSON object with the counters summed over its relays.
 *
 *   muster-relayhost --url muster://127.0.0.1:29600/job --gen 1 --count 1250 \
 *       --ports-file ports.txt --ready-file ready [--hold 600] */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "run_relay.h"

#define RELAYHOST_STACK (256u << 10) /* each relay thread's stack: its loop needs little */

/* The CLI's URL printer, which the relay calls only to name a store it cannot reach. */
void cli_url_redacted(const char *url, char *out, size_t n);

/* Write url without its query (where a token would be) into out. */
void cli_url_redacted(const char *url, char *out, size_t n)
{
    snprintf(out, n, "%.*s", (int)strcspn(url, "?"), url);
}

/* Print the usage and exit with status 2. */
static void relayhost_usage(void)
{
    fprintf(stderr, "usage: muster-relayhost --url URL --gen G --count K --ports-file FILE "
                    "[--ready-file FILE] [--hold SECONDS] [--max-conns N]\n");
    exit(2);
}

/* Write "ok" into path, so the script knows every relay is listening. */
static int relayhost_ready(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs("ok\n", f);
    return fclose(f);
}

/* Sum the relays' counters into one JSON object on stdout. */
static void relayhost_report(const struct run_relay *rs, unsigned n, unsigned started, double start_s, double stop_s)
{
    struct run_relay_stats t = {0};
    for (unsigned i = 0; i < n; i++) {
        const struct run_relay_stats *s = &rs[i].st;
        t.accepted += s->accepted, t.requests += s->requests, t.parked += s->parked;
        t.canceled += s->canceled, t.abandoned += s->abandoned, t.bad_request += s->bad_request;
        t.limit_conns += s->limit_conns, t.limit_output += s->limit_output, t.unsupported += s->unsupported;
        t.upstream_errors += s->upstream_errors, t.request_timeout += s->request_timeout;
    }
    printf("{\"relays\":%u,\"started\":%u,\"start_s\":%.3f,\"stop_s\":%.3f,\"accepted\":%" PRIu64
           ",\"requests\":%" PRIu64 ",\"parked\":%" PRIu64 ",\"canceled\":%" PRIu64 ",\"abandoned\":%" PRIu64
           ",\"bad_request\":%" PRIu64 ",\"limit_conns\":%" PRIu64 ",\"limit_output\":%" PRIu64
           ",\"unsupported\":%" PRIu64 ",\"upstream_errors\":%" PRIu64 ",\"request_timeout\":%" PRIu64 "}\n",
           n, started, start_s, stop_s, t.accepted, t.requests, t.parked, t.canceled, t.abandoned, t.bad_request,
           t.limit_conns, t.limit_output, t.unsupported, t.upstream_errors, t.request_timeout);
    fflush(stdout);
}

/* Start the relays, publish their ports, hold them until a signal or --hold, then stop them. */
int main(int argc, char **argv)
{
    const char *url = NULL, *ports = NULL, *ready = NULL;
    unsigned long long gen = 1;
    unsigned count = 0, max_conns = 4096, hold = 600;
    static const struct option opts[] = {
        {"url", required_argument, NULL, 'u'},        {"gen", required_argument, NULL, 'g'},
        {"count", required_argument, NULL, 'n'},      {"ports-file", required_argument, NULL, 'p'},
        {"ready-file", required_argument, NULL, 'r'}, {"hold", required_argument, NULL, 'h'},
        {"max-conns", required_argument, NULL, 'm'},  {NULL, 0, NULL, 0},
    };
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'u': url = optarg; break;
        case 'g': gen = strtoull(optarg, NULL, 10); break;
        case 'n': count = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'p': ports = optarg; break;
        case 'r': ready = optarg; break;
        case 'h': hold = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'm': max_conns = (unsigned)strtoul(optarg, NULL, 10); break;
        default: relayhost_usage();
        }
    }
    if (!url || !ports || count == 0 || count > 100000 || hold == 0)
        relayhost_usage();
    /* SIGTERM and SIGINT are taken by sigtimedwait below; the relays' threads block all signals. */
    sigset_t stopset;
    sigemptyset(&stopset);
    sigaddset(&stopset, SIGTERM);
    sigaddset(&stopset, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stopset, NULL);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RELAYHOST_STACK);
    pthread_setattr_default_np(&attr);

    struct run_relay_cfg cfg = {
        .lim = {.max_key = 8192, .max_value = UINT64_MAX, .max_keys = 131072, .max_request = 64u << 20},
        .max_conns = max_conns,
        .max_watches = 4096,
        .max_output = 64u << 20,
        .request_timeout_ms = 30000,
    };
    struct run_relay *rs = calloc(count, sizeof *rs);
    FILE *pf = fopen(ports, "w");
    if (!rs || !pf) {
        perror("muster-relayhost");
        return 1;
    }
    uint64_t t0 = clock_ns();
    unsigned started = 0;
    for (; started < count; started++) {
        if (run_relay_start(&rs[started], &cfg, url, gen) < 0) {
            run_relay_stop(&rs[started]);
            break;
        }
        fprintf(pf, "127.0.0.1 %u\n", rs[started].port);
    }
    double start_s = (double)(clock_ns() - t0) / 1e9;
    int rc = fclose(pf) != 0 || started < count;
    if (rc)
        fprintf(stderr, "muster-relayhost: started %u of %u relays\n", started, count);
    else if (ready && relayhost_ready(ready) < 0)
        rc = 1;
    if (!rc) {
        struct timespec ts = {.tv_sec = hold};
        while (sigtimedwait(&stopset, NULL, &ts) < 0 && errno == EINTR) {
        }
    }
    uint64_t t1 = clock_ns();
    for (unsigned i = 0; i < started; i++)
        run_relay_stop(&rs[i]);
    relayhost_report(rs, started, started, start_s, (double)(clock_ns() - t1) / 1e9);
    free(rs);
    return rc;
}
