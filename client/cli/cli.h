/*
 * The muster CLI: shared types for the verb table (muster.c), the verb
 * handlers (cmd_*.c) and the helpers they share (cli.c).
 *
 * A verb is one row of the table: its name, usage line, help text, the
 * number of positional arguments it takes, its own options, and a handler.
 * Generic code parses options and checks argument counts from the row, so a
 * handler starts with validated arguments.  A verb flagged VERB_RAW (a
 * launcher that takes a command line) gets its arguments unparsed.
 */
#ifndef MUSTER_CLI_H
#define MUSTER_CLI_H

#include <stddef.h>
#include <stdint.h>

#include <muster/muster.h>

/* Exit statuses, the CLI's contract with scripts. */
enum cli_exit {
    CLI_OK = 0,       /* success */
    CLI_NO = 1,       /* a negative answer: absent key, check false, cas not swapped */
    CLI_USAGE = 2,    /* bad command line or URL */
    CLI_TIMEOUT = 3,  /* a deadline passed */
    CLI_CONNECT = 4,  /* cannot connect, or the connection was lost */
    CLI_ERROR = 5,    /* anything else */
};

/* Most options one verb may declare. */
#define VERB_MAX_OPTS 4

/* The handler parses its own arguments (cli_args.raw_*), e.g. a launcher's command line. */
#define VERB_RAW 1u

/* One option of a verb; arg NULL means a flag without a value. */
struct verb_opt {
    const char *name;     /* long name, without "--" */
    char short_name;      /* 0 when none */
    const char *arg;      /* placeholder shown in help ("FILE"), or NULL */
    const char *help;
};

/* Arguments after option parsing. */
struct cli_args {
    int argc;                       /* positional arguments */
    char **argv;
    const char *opt[VERB_MAX_OPTS]; /* value per verb option ("1" for a flag), NULL when absent */
    int raw_argc;                   /* everything after the verb name, unparsed */
    char **raw_argv;
};

struct cli;

/* One row of the verb table. */
struct verb {
    const char *name;
    const char *usage;    /* arguments part of the usage line */
    const char *help;     /* one line for `muster --help`, and the verb's own help */
    int min_args;
    int max_args;         /* -1 = no limit */
    unsigned flags;
    struct verb_opt opts[VERB_MAX_OPTS];
    int (*run)(struct cli *c, const struct cli_args *a);
};

/* Global state of one CLI invocation. */
struct cli {
    const char *url;         /* --url; NULL = $MUSTER_URL, else the default */
    uint32_t timeout_ms;     /* --timeout; 0 = the URL's or the library default */
    int timeout_set;         /* --timeout was given (watch uses it as an overall limit) */
    int verbose;
    const struct verb *verb; /* the verb being run */
    muster_t *m;             /* connected on first use by cli_connect */
    char last_log[256];      /* last error-level diagnostic from the library */
};

/* ------------------------------------------------------------------ cli.c */

/* Connect on first use; CLI_OK with *m, or an exit status after printing why. */
int cli_connect(struct cli *c, muster_t **m);
/* Describe a store URL without its token: "HOST:PORT[/NAMESPACE]", or for text that does not parse,
 * the text before its query (where a token would be). */
void cli_url_redacted(const char *url, char *out, size_t n);
/* The exit status for a library error code. */
int cli_exit_code(int err);
/* Print "muster: VERB: reason" for err on c's handle and return its exit status. */
int cli_fail(struct cli *c, int err);
/* Print "muster: VERB: message" and return status. */
int cli_error(struct cli *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Milliseconds on the monotonic clock (deadlines of waits, heartbeats, grace periods). */
uint64_t cli_now_ms(void);
/* Parse a decimal uint32 (strict: digits only, in range) into *out; 0 on success. */
int cli_parse_u32(const char *s, uint32_t *out);
/* Parse a decimal int64 (optional sign) into *out; 0 on success. */
int cli_parse_i64(const char *s, int64_t *out);
/* Read all of path ("-" = stdin) into a malloc'd buffer; 0 on success. */
int cli_read_file(const char *path, void **data, size_t *len);
/* Write len bytes to path ("-" or NULL = stdout); 0 on success. */
int cli_write_file(const char *path, const void *data, size_t len);
/* Print len bytes to stdout with non-printable bytes as \xNN escapes. */
void cli_print_escaped(const void *data, size_t len);
/* Print text for a terminal: lines and tabs kept, valid printable UTF-8 as it is, every other byte
 * (ESC, BEL, a carriage return, C1 controls, invalid UTF-8) as \xNN. */
void cli_print_text(const char *s);

/* --------------------------------------------------------------- cmd_kv.c */

int cmd_kv_set(struct cli *c, const struct cli_args *a);
int cmd_kv_get(struct cli *c, const struct cli_args *a);
int cmd_kv_add(struct cli *c, const struct cli_args *a);
int cmd_kv_cas(struct cli *c, const struct cli_args *a);
int cmd_kv_del(struct cli *c, const struct cli_args *a);
int cmd_kv_check(struct cli *c, const struct cli_args *a);
int cmd_kv_keys(struct cli *c, const struct cli_args *a);
int cmd_kv_num_keys(struct cli *c, const struct cli_args *a);
int cmd_kv_queue_push(struct cli *c, const struct cli_args *a);
int cmd_kv_queue_pop(struct cli *c, const struct cli_args *a);
int cmd_kv_queue_len(struct cli *c, const struct cli_args *a);

/* ------------------------------------------------------------- cmd_sync.c */

int cmd_sync_wait(struct cli *c, const struct cli_args *a);
int cmd_sync_barrier(struct cli *c, const struct cli_args *a);
int cmd_sync_watch(struct cli *c, const struct cli_args *a);
int cmd_sync_ping(struct cli *c, const struct cli_args *a);

/* ----------------------------------------------------------- cmd_status.c */

int cmd_status(struct cli *c, const struct cli_args *a);

/* -------------------------------------------------------------- cmd_run.c */

int cmd_run(struct cli *c, const struct cli_args *a);

#endif
