/*
 * Synchronisation verbs of the CLI: wait, barrier, watch, ping.  These
 * block, and every block is bounded by --timeout (the server enforces it for
 * wait and barrier); only `watch` without --timeout and --count runs until
 * interrupted, as a watch is meant to.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

/* Option indexes, matching the verb table rows in muster.c. */
enum { WATCH_OPT_COUNT = 0 };
enum { PING_OPT_COUNT = 0 };

/* How long watch waits per poll when no overall limit applies. */
#define SYNC_WATCH_SLICE_MS 1000u

/* wait KEY...: block until every key exists. */
int cmd_sync_wait(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int err = muster_wait(m, (const char *const *)a->argv, (size_t)a->argc, c->timeout_ms);
    return err ? cli_fail(c, err) : CLI_OK;
}

/* barrier NAME COUNT [--fetch KEY]: block until COUNT arrivals; prints the round, or KEY's value at release. */
int cmd_sync_barrier(struct cli *c, const struct cli_args *a)
{
    uint32_t count;
    if (cli_parse_u32(a->argv[1], &count) != 0 || count == 0)
        return cli_error(c, CLI_USAGE, "COUNT must be a positive integer, not '%s'", a->argv[1]);
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    uint64_t round = 0;
    const char *key = a->opt[0];
    void *val = NULL;
    size_t len = 0;
    int err = muster_barrier_fetch(m, a->argv[0], count, key, key ? &val : NULL, &len, &round, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    if (!key)
        printf("%" PRIu64 "\n", round);
    else if (cli_write_file(NULL, val, len) != 0)
        rc = cli_error(c, CLI_ERROR, "cannot write standard output");
    muster_free(val);
    return rc;
}

/* Print one watch event as a line ("set KEY VALUE" / "delete KEY"); returns 1 when it counts. */
static int sync_print_event(struct cli *c, const muster_event *ev)
{
    if (ev->kind == MUSTER_EVENT_SET) {
        fputs("set ", stdout);
        cli_print_escaped(ev->key, strlen(ev->key));
        putchar(' ');
        cli_print_escaped(ev->value, ev->value_len);
        putchar('\n');
    } else if (ev->kind == MUSTER_EVENT_DELETE) {
        fputs("delete ", stdout);
        cli_print_escaped(ev->key, strlen(ev->key));
        putchar('\n');
    } else if (ev->kind == MUSTER_EVENT_SHUTDOWN) {
        cli_error(c, 0, "server shutting down: %s", ev->reason);
        return -1;
    } else if (ev->kind == MUSTER_EVENT_WATCH_ENDED) {
        cli_error(c, 0, "the server ended the watch: output was not read fast enough, changes were missed");
        return -1;
    } else {
        return 0;
    }
    fflush(stdout);
    return 1;
}

/* Print events until count have been printed (0 = no limit) or the overall
 * --timeout passes (when given); returns an exit status. */
static int sync_watch_loop(struct cli *c, muster_t *m, uint32_t count)
{
    uint64_t deadline = cli_now_ms() + c->timeout_ms;
    uint32_t seen = 0;
    while (count == 0 || seen < count) {
        uint64_t now = cli_now_ms();
        if (c->timeout_set && now >= deadline)
            return cli_fail(c, MUSTER_ETIMEDOUT);
        uint64_t slice = SYNC_WATCH_SLICE_MS;
        if (c->timeout_set && deadline - now < slice)
            slice = deadline - now;
        muster_event *ev = NULL;
        int err = muster_next_event(m, &ev, (uint32_t)slice);
        if (err == MUSTER_ETIMEDOUT)
            continue;
        if (err)
            return cli_fail(c, err);
        int r = sync_print_event(c, ev);
        muster_event_free(ev);
        if (r < 0)
            return CLI_ERROR;
        seen += (uint32_t)r;
    }
    return CLI_OK;
}

/* Parse an optional --count N into *count (left alone when absent); CLI_OK or a usage error. */
static int sync_opt_count(struct cli *c, const char *n, uint32_t *count)
{
    if (n && (cli_parse_u32(n, count) != 0 || *count == 0))
        return cli_error(c, CLI_USAGE, "--count must be a positive integer, not '%s'", n);
    return CLI_OK;
}

/* watch PREFIX [--count N]: print changes under PREFIX as they happen. */
int cmd_sync_watch(struct cli *c, const struct cli_args *a)
{
    uint32_t count = 0;
    int rc = sync_opt_count(c, a->opt[WATCH_OPT_COUNT], &count);
    if (rc != CLI_OK)
        return rc;
    muster_t *m;
    rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    uint64_t id = 0;
    int err = muster_watch(m, a->argv[0], &id, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    /* Tell a script the watch is in place, so it can start changing keys. */
    fprintf(stderr, "muster: watch: watching '%s' (id %" PRIu64 ")\n", a->argv[0], id);
    return sync_watch_loop(c, m, count);
}

/* ping [--count N]: measure round trips to the server. */
int cmd_sync_ping(struct cli *c, const struct cli_args *a)
{
    uint32_t count = 1;
    int rc = sync_opt_count(c, a->opt[PING_OPT_COUNT], &count);
    if (rc != CLI_OK)
        return rc;
    muster_t *m;
    rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    for (uint32_t i = 1; i <= count; i++) {
        uint64_t rtt = 0;
        int err = muster_ping(m, &rtt, c->timeout_ms);
        if (err)
            return cli_fail(c, err);
        printf("pong: seq=%" PRIu32 " time=%.3f ms\n", i, (double)rtt / 1000.0);
        fflush(stdout);
    }
    return CLI_OK;
}
