/*
 * muster-loadgen: one process holding up to ~16,000 connections to a musterd, a TCPStore
 * server or musterd's TCPStore listener, driving them closed-loop or pipelined (load),
 * filling keys (fill), all-at-once rendezvous (storm) or idle/parked (idle).  Prints one
 * JSON object on stdout; progress and errors go to stderr.
 */
#include "loadgen.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "frame.h"
#include "tsproto.h"
#include "wire.h"

/* Option value types. */
enum opt_type { OT_STR, OT_UINT, OT_U64, OT_DBL };

/* One command-line option: --name VALUE stored at offset in struct lg_cfg. */
struct opt_row {
    const char *name;
    enum opt_type type;
    size_t off;
    const char *help;
};

#define CFG(f) offsetof(struct lg_cfg, f)

/* The options table; defaults are in loadgen_defaults(). */
static const struct opt_row opt_rows[] = {
    {"host", OT_STR, CFG(host), "server IPv4 address (127.0.0.1)"},
    {"port", OT_UINT, CFG(port), "server port (required)"},
    {"proto", OT_STR, CFG(proto_name), "native | tcpstore (probe the numbering) | tcpstore-new | tcpstore-old | raw (idle only)"},
    {"mode", OT_STR, CFG(mode), "load | fill | storm | idle"},
    {"op", OT_STR, CFG(op_name), "set get add wait check ping barrier join none (load: get; storm: barrier)"},
    {"conns", OT_UINT, CFG(conns), "connections, one simulated client each (1)"},
    {"depth", OT_UINT, CFG(depth), "requests in flight per connection: 1 = closed loop (1)"},
    {"sources", OT_UINT, CFG(sources), "loopback source addresses 127.0.0.1..N to spread ports (1)"},
    {"requests", OT_U64, CFG(requests), "stop after this many requests in total (load: 200000)"},
    {"duration", OT_DBL, CFG(duration), "stop issuing after this many seconds (10)"},
    {"timeout", OT_DBL, CFG(timeout), "hard limit in seconds for the whole run (60)"},
    {"hold", OT_DBL, CFG(hold), "idle: seconds to hold the connections (5)"},
    {"keys", OT_UINT, CFG(keys), "distinct keys (load: 1000; fill: keys to write)"},
    {"value-size", OT_UINT, CFG(value_size), "value bytes for set and fill (64); storm id bytes (128)"},
    {"key-prefix", OT_STR, CFG(key_prefix), "key prefix; 8 digits follow (/OP/; storm: /stormPID/)"},
    {"namespace", OT_STR, CFG(ns), "native namespace (bench-PID)"},
    {"stall", OT_UINT, CFG(stall), "load: extra connections that stop half way through a request (0)"},
    {"floor", OT_UINT, CFG(floor), "storm against muster-floord (answers at once, canned value): skip the id check (0/1)"},
    {"server-pid", OT_UINT, CFG(server_pid), "read this process's CPU time around the measured window"},
    {"ready-file", OT_STR, CFG(ready_file), "write a line here once every connection is up"},
    {"burst", OT_UINT, CFG(burst), "idle: after holding, every connection sends one request (0/1)"},
    {"seed", OT_UINT, CFG(seed), "random seed for key choice (1)"},
    {"op-timeout-ms", OT_UINT, CFG(timeout_ms), "server-side timeout of blocking ops (30000)"},
};

static volatile sig_atomic_t loadgen_stop;

/* Stop-signal handler: the modes poll lg_stopped(). */
static void loadgen_on_signal(int sig)
{
    (void)sig;
    loadgen_stop = 1;
}

/* Stop-signal flag: set by SIGINT/SIGTERM/SIGUSR1. */
int lg_stopped(void)
{
    return loadgen_stop;
}

/* Default configuration. */
static void loadgen_defaults(struct lg_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->proto_name = "native";
    c->mode = "load";
    c->conns = 1;
    c->depth = 1;
    c->sources = 1;
    c->duration = 10;
    c->timeout = 60;
    c->hold = 5;
    c->seed = 1;
    c->timeout_ms = 30000;
}

/* Print the options table. */
static void loadgen_usage(FILE *f)
{
    fprintf(f, "usage: muster-loadgen --port PORT [options]\n");
    for (size_t i = 0; i < sizeof opt_rows / sizeof opt_rows[0]; i++)
        fprintf(f, "  --%-14s %s\n", opt_rows[i].name, opt_rows[i].help);
}

/* Store one option value; returns 0 or -1. */
static int loadgen_set(struct lg_cfg *cfg, const struct opt_row *o, const char *v)
{
    char *end = NULL;
    void *p = (char *)cfg + o->off;
    errno = 0;
    switch (o->type) {
    case OT_STR:
        *(const char **)p = v;
        return 0;
    case OT_UINT:
        *(unsigned *)p = (unsigned)strtoul(v, &end, 10);
        break;
    case OT_U64:
        *(uint64_t *)p = strtoull(v, &end, 10);
        break;
    case OT_DBL:
        *(double *)p = strtod(v, &end);
        break;
    }
    return errno || !end || *end ? -1 : 0;
}

/* Parse argv into cfg; returns 0, or 2 for a usage error. */
static int loadgen_parse(struct lg_cfg *cfg, int argc, char **argv)
{
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--help")) {
            loadgen_usage(stdout);
            exit(0);
        }
        const struct opt_row *o = NULL;
        for (size_t k = 0; k < sizeof opt_rows / sizeof opt_rows[0]; k++)
            if (!strncmp(argv[i], "--", 2) && !strcmp(argv[i] + 2, opt_rows[k].name))
                o = &opt_rows[k];
        if (!o || i + 1 >= argc || loadgen_set(cfg, o, argv[i + 1]) < 0) {
            fprintf(stderr, "muster-loadgen: bad option %s\n", argv[i]);
            return 2;
        }
    }
    return cfg->port ? 0 : 2;
}

static const char *const op_names[OP_COUNT] = {"set", "get", "add", "wait", "check", "ping", "barrier", "join", "none"};

/* Name of an op, for output. */
const char *lg_op_name(enum lg_op op)
{
    return op < OP_COUNT ? op_names[op] : "?";
}

/* Map an op name to its enum, or OP_COUNT. */
static enum lg_op loadgen_op(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (!strcmp(name, op_names[i]))
            return (enum lg_op)i;
    return OP_COUNT;
}

/* Ask the server which TCPStore numbering it speaks, over a throw-away connection. */
static enum lg_proto loadgen_probe(const struct lg_cfg *cfg)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)cfg->port)};
    inet_pton(AF_INET, cfg->host, &a.sin_addr);
    int old = -1;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
        old = tsproto_probe(fd, 300);
    if (fd >= 0)
        close(fd);
    fprintf(stderr, "muster-loadgen: TCPStore numbering probe: %s\n",
            old == 1 ? "old (torch 1.13)" : old == 0 ? "VALIDATE era" : "failed");
    return old == 1 ? PROTO_TS_OLD : PROTO_TS_NEW;
}

/* Resolve protocol and op names; returns 0 or 2. */
static int loadgen_resolve(struct lg_cfg *cfg)
{
    if (!strcmp(cfg->proto_name, "native"))
        cfg->proto = PROTO_NATIVE;
    else if (!strcmp(cfg->proto_name, "tcpstore-new"))
        cfg->proto = PROTO_TS_NEW;
    else if (!strcmp(cfg->proto_name, "tcpstore-old"))
        cfg->proto = PROTO_TS_OLD;
    else if (!strcmp(cfg->proto_name, "tcpstore"))
        cfg->proto = PROTO_TS_AUTO;
    else if (!strcmp(cfg->proto_name, "raw") && !strcmp(cfg->mode, "idle") && !cfg->burst)
        cfg->proto = PROTO_RAW; /* bare TCP connections, for any server's per-connection memory */
    else
        return 2;
    const char *op = cfg->op_name ? cfg->op_name : !strcmp(cfg->mode, "storm") ? "barrier" : !strcmp(cfg->mode, "idle") ? "none" : "get";
    cfg->op = loadgen_op(op);
    if (cfg->op == OP_COUNT)
        return 2;
    if (cfg->proto == PROTO_TS_AUTO)
        cfg->proto = loadgen_probe(cfg);
    if (!cfg->key_prefix) {
        /* One key space per op, so that an add never meets a value written by set. */
        static char prefix[64];
        if (!strcmp(cfg->mode, "storm"))
            snprintf(prefix, sizeof prefix, "/storm%d/", (int)getpid());
        else
            snprintf(prefix, sizeof prefix, "/%s/", op);
        cfg->key_prefix = prefix;
    }
    if (cfg->depth == 0 || cfg->depth > 4096 || cfg->conns == 0)
        return 2;
    if (cfg->sources == 0 || cfg->sources > 250)
        return 2;
    return 0;
}

/* Build the template for one request in the configured protocol; returns 0 or -1. */
int lg_tmpl(const struct lg *lg, const struct opspec *spec, struct tmpl *t)
{
    if (lg->cfg.proto == PROTO_NATIVE)
        return wire_tmpl(spec, t);
    return tsproto_tmpl(spec, lg->cfg.proto != PROTO_TS_NEW, t);
}

/* Queue the bytes of t on c and track the reply it expects. */
static int lg_queue(struct lg *lg, struct lconn *c, const struct tmpl *t, uint64_t id, uint32_t keynum)
{
    (void)lg;
    uint8_t *p = lnet_reserve(c, t->len);
    if (!p)
        return -1;
    tmpl_emit(t, p, id, keynum);
    if (t->reply != RK_NONE) {
        struct slot *s = lnet_push(c);
        s->sent_ns = clock_ns();
        s->id = id;
        s->kind = t->reply;
    }
    return 0;
}

/* Pack the handshake's frames once: hello (native), or validate + ping (torch 2.x numbering). */
static int lg_handshake_tmpls(struct lg *lg)
{
    lg->nhs = 0;
    if (lg->cfg.proto == PROTO_NATIVE)
        return wire_hello(lg->cfg.ns, &lg->hs[lg->nhs++]);
    if (tsproto_tmpl_cmd(TS_VALIDATE, 0, NULL, NULL, 0, &lg->hs[lg->nhs++]) < 0)
        return -1;
    return tsproto_tmpl_cmd(TS_PING, 0, NULL, NULL, 0, &lg->hs[lg->nhs++]);
}

/* Queue c's handshake; returns 1 when a reply is expected, 0 when c is ready at once. */
int lg_handshake(struct lg *lg, struct lconn *c)
{
    if (lg->cfg.proto == PROTO_TS_OLD || lg->cfg.proto == PROTO_RAW)
        return 0; /* torch 1.13 clients send nothing before their first command */
    if (lg->nhs < 0 && lg_handshake_tmpls(lg) < 0)
        return -1;
    for (int i = 0; i < lg->nhs; i++)
        if (lg_queue(lg, c, &lg->hs[i], 0, 0) < 0)
            return -1;
    return 1;
}

/* Queue one request from template t on c and track it; returns 0 or -1. */
int lg_send(struct lg *lg, struct lconn *c, const struct tmpl *t, uint32_t keynum)
{
    uint64_t id = t->id_off != TMPL_NONE ? WIRE_ID_BASE + ++c->next_id : 0;
    return lg_queue(lg, c, t, id, keynum);
}

/* Move the in-flight slot with request id `id` to the head of c's ring: blocking ops are
 * answered when they complete, so replies may overtake each other. */
static void lg_match_id(struct lg *lg, struct lconn *c, uint64_t id)
{
    for (uint32_t i = c->head; i != c->tail; i++) {
        struct slot *s = &c->ring[i & c->ringmask];
        if (s->id != id)
            continue;
        struct slot tmp = *s;
        *s = c->ring[c->head & c->ringmask];
        c->ring[c->head & c->ringmask] = tmp;
        return;
    }
    lg->st.bad_replies++;
}

/* Take the next complete reply from c; 1 got one (its slot in *s), 0 need more bytes, -1 garbage. */
int lg_next_reply(struct lg *lg, struct lconn *c, struct reply *r, struct slot *s)
{
    for (;;) {
        const uint8_t *p = c->rbuf + c->roff;
        size_t n = c->rlen - c->roff;
        if (n == 0)
            return 0;
        if (c->head == c->tail && lg->cfg.proto != PROTO_NATIVE)
            return -1; /* TCPStore bytes nobody asked for */
        int kind = c->head == c->tail ? RK_FRAME : c->ring[c->head & c->ringmask].kind;
        ssize_t k = lg->cfg.proto == PROTO_NATIVE ? wire_parse(p, n, r) : tsproto_parse(kind, p, n, r);
        if (k <= 0)
            return (int)k;
        c->roff += (uint32_t)k;
        if (lg->cfg.proto == PROTO_NATIVE && r->frame == MUSTER__SERVER_FRAME__FRAME_EVENT)
            continue;
        if (c->head == c->tail)
            return -1;
        if (lg->cfg.proto == PROTO_NATIVE && r->frame == MUSTER__SERVER_FRAME__FRAME_RESPONSE)
            lg_match_id(lg, c, r->id);
        *s = c->ring[c->head & c->ringmask];
        c->head++;
        return 1;
    }
}

/* Server CPU seconds so far (utime + stime of cfg.server_pid), or 0 when unknown. */
double lg_server_cpu(const struct lg *lg)
{
    if (!lg->cfg.server_pid)
        return 0;
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", lg->cfg.server_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* Fields after the parenthesised command name: state is field 3, utime 14, stime 15. */
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* This process's CPU seconds so far. */
double lg_self_cpu(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* Mark the start of the measured window. */
void lg_window_begin(struct lg *lg)
{
    lg->srv_cpu0 = lg_server_cpu(lg);
    lg->self_cpu0 = lg_self_cpu();
    lg->t_begin = clock_ns();
}

/* Mark the end of the measured window. */
void lg_window_end(struct lg *lg)
{
    lg->t_end = clock_ns();
    lg->srv_cpu = lg_server_cpu(lg) - lg->srv_cpu0;
    lg->self_cpu = lg_self_cpu() - lg->self_cpu0;
}

/* Write the ready file (if configured) so a driving script knows the connections are up. */
void lg_ready(const struct lg *lg, const char *what)
{
    fprintf(stderr, "muster-loadgen: %s\n", what);
    if (!lg->cfg.ready_file)
        return;
    FILE *f = fopen(lg->cfg.ready_file, "w");
    if (f) {
        fprintf(f, "%s\n", what);
        fclose(f);
    }
}

/* Count a connection failure (err = errno value, 0 = closed by the peer). */
void lg_count_fail(struct lg *lg, struct lconn *c, int err)
{
    if (c->t_open == 0)
        lg->st.connect_errors++;
    else
        lg->st.closed++;
    if (lg->st.connect_errors + lg->st.closed <= 5)
        fprintf(stderr, "muster-loadgen: connection %u: %s\n", c->idx, err ? strerror(err) : "closed by server");
}

/* Mode table: name and entry point. */
static const struct {
    const char *name;
    int (*run)(struct lg *);
} mode_rows[] = {
    {"load", load_run},
    {"fill", fill_run},
    {"storm", storm_run},
    {"idle", idle_run},
};

/* Parse the command line, run the mode, return its exit code. */
int main(int argc, char **argv)
{
    static struct lg lg;
    loadgen_defaults(&lg.cfg);
    if (loadgen_parse(&lg.cfg, argc, argv) || loadgen_resolve(&lg.cfg)) {
        loadgen_usage(stderr);
        return 2;
    }
    char ns[64];
    if (!lg.cfg.ns) {
        snprintf(ns, sizeof ns, "bench-%d", (int)getpid());
        lg.cfg.ns = ns;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = loadgen_on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    hist_reset(&lg.hist);
    lg.nonce = (uint32_t)getpid();
    lg.nhs = -1;
    for (size_t i = 0; i < sizeof mode_rows / sizeof mode_rows[0]; i++) {
        if (strcmp(lg.cfg.mode, mode_rows[i].name))
            continue;
        int rc = mode_rows[i].run(&lg);
        for (int k = 0; k < lg.nhs; k++)
            tmpl_free(&lg.hs[k]);
        return rc;
    }
    loadgen_usage(stderr);
    return 2;
}
