/*
 * muster: command-line client for musterd.
 *
 *     muster [--url URL] [--timeout MS] VERB ARGS...
 *
 * Two tables drive it: global options, and verbs (one row per verb: usage,
 * argument counts, options, handler, help).  Option parsing, argument-count
 * checks, `muster --help` and `muster VERB --help` are generic over the
 * rows.  Global options may also follow the verb (`muster get k --timeout
 * 100`).  A token that starts with '-' and a digit is an argument, not an
 * option, so `muster add counter -5` works; "--" ends options.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* One global option; arg NULL means a flag. */
struct global_opt {
    const char *name;
    char short_name;
    const char *arg;
    const char *help;
    int (*apply)(struct cli *c, const char *value);
};

/* Sentinel returned by option handlers that already printed help or a version. */
#define CLI_DONE (-1)

static int opt_url(struct cli *c, const char *v);
static int opt_timeout(struct cli *c, const char *v);
static int opt_verbose(struct cli *c, const char *v);
static int opt_help(struct cli *c, const char *v);
static int opt_version(struct cli *c, const char *v);

static const struct global_opt global_opts[] = {
    {"url", 'u', "URL", "store URL (default: $MUSTER_URL, else tcp://127.0.0.1:29600)", opt_url},
    {"timeout", 't', "MS", "deadline per call in milliseconds (default: the URL's, else 30000)", opt_timeout},
    {"verbose", 'v', NULL, "print the library's diagnostics to stderr", opt_verbose},
    {"help", 'h', NULL, "show help (after a verb: that verb's help)", opt_help},
    {"version", 'V', NULL, "print the version", opt_version},
};

/* The verb table.  A launcher adds its row here (flags VERB_RAW). */
static const struct verb verbs[] = {
    {"set", "KEY [VALUE | -f FILE | -]", "store a value (from the argument, a file, or stdin)", 1, 2, 0,
     {{"file", 'f', "FILE", "read the value from FILE"}}, cmd_kv_set},
    {"get", "KEY [--wait] [-o FILE]", "print a value, byte for byte (exit 1 when absent)", 1, 1, 0,
     {{"wait", 'w', NULL, "block until KEY exists (up to --timeout)"},
      {"output", 'o', "FILE", "write the value to FILE instead of stdout"}},
     cmd_kv_get},
    {"add", "KEY DELTA", "add DELTA to the integer at KEY (absent = 0) and print the sum", 2, 2, 0, {{0}},
     cmd_kv_add},
    {"cas", "KEY EXPECTED DESIRED", "compare-and-set; print the resulting value (exit 1 when not swapped)", 3,
     3, 0, {{0}}, cmd_kv_cas},
    {"del", "KEY", "delete KEY (exit 1 when it did not exist)", 1, 1, 0, {{0}}, cmd_kv_del},
    {"check", "KEY...", "exit 0 when every KEY exists, else 1", 1, -1, 0, {{0}}, cmd_kv_check},
    {"wait", "KEY...", "block until every KEY exists (up to --timeout)", 1, -1, 0, {{0}}, cmd_sync_wait},
    {"keys", "[PREFIX]", "list keys with PREFIX, one per line, in byte order", 0, 1, 0, {{0}}, cmd_kv_keys},
    {"num-keys", "", "print the number of keys in the namespace", 0, 0, 0, {{0}}, cmd_kv_num_keys},
    {"queue-push", "KEY VALUE", "append VALUE to KEY's queue (TCPStore's queues) and print its length", 2, 2, 0,
     {{0}}, cmd_kv_queue_push},
    {"queue-pop", "KEY [--wait]", "print the oldest value of KEY's queue and take it (exit 1 when empty)", 1, 1,
     0, {{"wait", 'w', NULL, "block until the queue has a value (up to --timeout)"}}, cmd_kv_queue_pop},
    {"queue-len", "KEY", "print the length of KEY's queue", 1, 1, 0, {{0}}, cmd_kv_queue_len},
    {"barrier", "NAME COUNT [--fetch KEY]", "block until COUNT callers reach barrier NAME; print the round", 2, 2,
     0, {{"fetch", 'f', "KEY", "print KEY's value at release instead, byte for byte (exit 1 when absent)"}},
     cmd_sync_barrier},
    {"watch", "PREFIX [--count N]", "print changes to keys with PREFIX as they happen", 1, 1, 0,
     {{"count", 'n', "N", "exit after N events"}}, cmd_sync_watch},
    {"ping", "[--count N]", "measure round trips to the server", 0, 0, 0,
     {{"count", 'c', "N", "send N pings (default 1)"}}, cmd_sync_ping},
    {"status", "[JOB] [--watch] [--json]", "show jobs, generations and members from musterd's --metrics-listen", 0,
     1, 0,
     {{"watch", 'w', NULL, "redraw every --interval until interrupted (or until --timeout)"},
      {"json", 'j', NULL, "print the daemon's JSON report (for scripts)"},
      {"metrics-url", 'm', "URL", "http://HOST:PORT of --metrics-listen (default: $MUSTER_METRICS_URL, else "
                                  "port 29601 of the store URL's host)"},
      {"interval", 'i', "MS", "refresh period of --watch (default 2000)"}},
     cmd_status},
    {"run", "[OPTIONS] PROG [ARGS...]", "start workers in a rendezvous world (see 'muster run --help')", 0, -1,
     VERB_RAW, {{0}}, cmd_run},
};

#define N_VERBS (sizeof verbs / sizeof verbs[0])
#define N_GLOBAL (sizeof global_opts / sizeof global_opts[0])

/* Print one option line of a help text, in aligned columns. */
static void cli_print_opt(FILE *f, char short_name, const char *name, const char *arg, const char *help)
{
    char left[64];
    snprintf(left, sizeof left, "-%c, --%s%s%s", short_name, name, arg ? " " : "", arg ? arg : "");
    fprintf(f, "  %-20s %s\n", left, help);
}

/* Print the top-level help: usage, verbs, global options. */
static void cli_main_help(FILE *f)
{
    fprintf(f, "usage: muster [OPTIONS] VERB [ARGS...]\n\nverbs:\n");
    for (size_t i = 0; i < N_VERBS; i++)
        fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
    fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < N_GLOBAL; i++)
        cli_print_opt(f, global_opts[i].short_name, global_opts[i].name, global_opts[i].arg, global_opts[i].help);
    fprintf(f, "\n'muster VERB --help' describes a verb.  Exit status: 0 ok, 1 negative answer,\n"
               "2 usage, 3 timeout, 4 cannot connect, 5 other error.\n");
}

/* Print one verb's help: usage, description, options. */
static void cli_verb_help(const struct verb *v, FILE *f)
{
    fprintf(f, "usage: muster [OPTIONS] %s %s\n\n%s\n", v->name, v->usage, v->help);
    if (v->opts[0].name)
        fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < VERB_MAX_OPTS && v->opts[i].name; i++) {
        const struct verb_opt *o = &v->opts[i];
        cli_print_opt(f, o->short_name, o->name, o->arg, o->help);
    }
    fprintf(f, "\nglobal options (before or after the verb): --url URL, --timeout MS, --verbose\n");
}

/* Set the store URL. */
static int opt_url(struct cli *c, const char *v)
{
    c->url = v;
    return CLI_OK;
}

/* Set the per-call timeout. */
static int opt_timeout(struct cli *c, const char *v)
{
    if (cli_parse_u32(v, &c->timeout_ms) != 0 || c->timeout_ms == 0) {
        fprintf(stderr, "muster: --timeout needs a positive number of milliseconds, not '%s'\n", v);
        return CLI_USAGE;
    }
    c->timeout_set = 1;
    return CLI_OK;
}

/* Turn on diagnostics. */
static int opt_verbose(struct cli *c, const char *v)
{
    (void)v;
    c->verbose = 1;
    return CLI_OK;
}

/* Print help for the verb being parsed, or the top-level help. */
static int opt_help(struct cli *c, const char *v)
{
    (void)v;
    if (c->verb)
        cli_verb_help(c->verb, stdout);
    else
        cli_main_help(stdout);
    return CLI_DONE;
}

/* Print the version. */
static int opt_version(struct cli *c, const char *v)
{
    (void)c;
    (void)v;
    printf("muster %s\n", MUSTER_VERSION);
    return CLI_DONE;
}

/* Whether token is an option (not "-", not a negative number). */
static int cli_is_option(const char *t)
{
    return t[0] == '-' && t[1] != '\0' && !isdigit((unsigned char)t[1]);
}

/* Whether token names an option: "--name", "--name=...", or "-x". */
static int cli_opt_match(const char *t, const char *name, char short_name)
{
    if (t[1] != '-')
        return short_name && t[1] == short_name && t[2] == '\0';
    size_t n = strlen(name);
    return strncmp(t + 2, name, n) == 0 && (t[2 + n] == '\0' || t[2 + n] == '=');
}

/* The value of option token t: after '=', else the next argument (advancing *i). */
static const char *cli_opt_value(const char *t, int argc, char **argv, int *i)
{
    const char *eq = t[1] == '-' ? strchr(t, '=') : NULL;
    if (eq)
        return eq + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

/* Apply a global option at argv[*i] if it is one: 1 when not a global option,
 * else an exit status (CLI_OK to continue, CLI_DONE when help was shown). */
static int cli_take_global(struct cli *c, int argc, char **argv, int *i)
{
    const char *t = argv[*i];
    for (size_t k = 0; k < N_GLOBAL; k++) {
        const struct global_opt *g = &global_opts[k];
        if (!cli_opt_match(t, g->name, g->short_name))
            continue;
        const char *val = g->arg ? cli_opt_value(t, argc, argv, i) : "1";
        if (!val) {
            fprintf(stderr, "muster: option --%s needs %s\n", g->name, g->arg);
            return CLI_USAGE;
        }
        return g->apply(c, val);
    }
    return 1;
}

/* Apply a verb option at argv[*i]; CLI_OK or CLI_USAGE. */
static int cli_take_verb_opt(struct cli *c, struct cli_args *a, int argc, char **argv, int *i)
{
    const struct verb *v = c->verb;
    const char *t = argv[*i];
    for (size_t k = 0; k < VERB_MAX_OPTS && v->opts[k].name; k++) {
        if (!cli_opt_match(t, v->opts[k].name, v->opts[k].short_name))
            continue;
        a->opt[k] = v->opts[k].arg ? cli_opt_value(t, argc, argv, i) : "1";
        if (!a->opt[k])
            return cli_error(c, CLI_USAGE, "option --%s needs %s", v->opts[k].name, v->opts[k].arg);
        return CLI_OK;
    }
    int rc = cli_take_global(c, argc, argv, i);
    if (rc == 1)
        return cli_error(c, CLI_USAGE, "unknown option '%s' (see 'muster %s --help')", t, v->name);
    return rc;
}

/* Parse a verb's arguments into *a and check their count against the row. */
static int cli_parse_verb(struct cli *c, int argc, char **argv, struct cli_args *a)
{
    const struct verb *v = c->verb;
    int opts_done = 0;
    for (int i = 0; i < argc; i++) {
        if (!opts_done && strcmp(argv[i], "--") == 0) {
            opts_done = 1;
        } else if (!opts_done && cli_is_option(argv[i])) {
            int rc = cli_take_verb_opt(c, a, argc, argv, &i);
            if (rc != CLI_OK)
                return rc;
        } else {
            a->argv[a->argc++] = argv[i];
        }
    }
    a->argv[a->argc] = NULL;
    if (a->argc < v->min_args || (v->max_args >= 0 && a->argc > v->max_args)) {
        cli_error(c, CLI_USAGE, "wrong number of arguments");
        fprintf(stderr, "usage: muster [OPTIONS] %s %s\n", v->name, v->usage);
        return CLI_USAGE;
    }
    return CLI_OK;
}

/* The verb row named name, or NULL. */
static const struct verb *cli_find_verb(const char *name)
{
    for (size_t i = 0; i < N_VERBS; i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

/* Parse global options up to the verb; returns the verb's index in argv, or -(exit status). */
static int cli_parse_globals(struct cli *c, int argc, char **argv)
{
    int i = 1;
    for (; i < argc && cli_is_option(argv[i]); i++) {
        int rc = cli_take_global(c, argc, argv, &i);
        if (rc == 1) {
            fprintf(stderr, "muster: unknown option '%s' (see 'muster --help')\n", argv[i]);
            return -CLI_USAGE;
        }
        if (rc != CLI_OK)
            return rc == CLI_DONE ? -CLI_OK : -rc;
    }
    if (i >= argc) {
        cli_main_help(stderr);
        return -CLI_USAGE;
    }
    return i;
}

/* Run the verb at argv[vi] with the arguments after it. */
static int cli_run_verb(struct cli *c, int argc, char **argv, int vi)
{
    c->verb = cli_find_verb(argv[vi]);
    if (!c->verb) {
        fprintf(stderr, "muster: unknown verb '%s' (see 'muster --help')\n", argv[vi]);
        return CLI_USAGE;
    }
    struct cli_args a;
    memset(&a, 0, sizeof a);
    a.raw_argc = argc - vi - 1;
    a.raw_argv = argv + vi + 1;
    if (c->verb->flags & VERB_RAW)
        return c->verb->run(c, &a);
    a.argv = calloc((size_t)a.raw_argc + 1, sizeof *a.argv);
    if (!a.argv)
        return cli_error(c, CLI_ERROR, "out of memory");
    int rc = cli_parse_verb(c, a.raw_argc, a.raw_argv, &a);
    if (rc == CLI_OK)
        rc = c->verb->run(c, &a);
    free(a.argv);
    return rc == CLI_DONE ? CLI_OK : rc;
}

/* Entry point: parse, run one verb, close, and exit with its status. */
int main(int argc, char **argv)
{
    struct cli c;
    memset(&c, 0, sizeof c);
    int vi = cli_parse_globals(&c, argc, argv);
    if (vi <= 0)
        return -vi;
    int rc = cli_run_verb(&c, argc, argv, vi);
    muster_close(c.m);
    if (fflush(stdout) != 0 && rc == CLI_OK)
        rc = CLI_ERROR;
    return rc;
}
