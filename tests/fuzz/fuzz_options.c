/*
 * libFuzzer target for musterd's configuration: the options table
 * (store-server/server/options.c, with the same rows as the release build), the
 * MUSTER_* environment twins, and the --token / --token-file pairs
 * (store-server/server/ns.c).
 *
 * An input is text in up to three sections separated by lines holding
 * only "%": argv entries, one a line; environment entries NAME=VALUE (only
 * MUSTER_* names are set); and the token file's bytes, given with
 * --token-file when the section is there.
 *
 * Checked: parsing ends in an exit status or goes on with a configuration
 * that satisfies every relation the table promises (computed without
 * overflow); --print-config masks every token; and when the tokens load,
 * every line of the token file, read whole, was a valid pair, and each
 * namespace takes the token its last pair gave it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "ns.h"
#include "options.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs above this are skipped: length alone finds nothing more. */
#define OF_MAX_INPUT 8192
/* argv and environment entries used per input. */
#define OF_MAX_ARGS 64
/* Namespace/token pairs followed per input. */
#define OF_MAX_PAIRS 128

/* The token file the third section is written to (made once per process). */
static char of_token_path[64];

/* Remove the token file at exit. */
static void of_cleanup(void)
{
    if (of_token_path[0])
        unlink(of_token_path);
}

/* Make the token file's path; aborts when no temporary file can be made. */
static void of_init(void)
{
    const char *dir = getenv("TMPDIR");
    int fd;
    if (of_token_path[0])
        return;
    snprintf(of_token_path, sizeof of_token_path, "%.40s/fuzz-tokens-XXXXXX", dir && *dir ? dir : "/tmp");
    if ((fd = mkstemp(of_token_path)) < 0)
        abort();
    close(fd);
    atexit(of_cleanup);
    log_open(NULL, LOG_ERROR);
}

/* Cut text into '\n'-separated lines in place; returns how many (at most max) went into v. */
static size_t of_lines(char *text, char *end, char **v, size_t max)
{
    size_t n = 0;
    while (text < end && n < max) {
        char *nl = memchr(text, '\n', (size_t)(end - text));
        v[n++] = text;
        if (!nl)
            break;
        *nl = 0;
        text = nl + 1;
    }
    return n;
}

/* One namespace's expected token. */
struct of_pair {
    char *ns, *token;
};

/* Record ns -> token (a later pair replaces an earlier one); 0, or -1 when the table is full. */
static int of_expect(struct of_pair *p, size_t *n, char *ns, char *token)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp(p[i].ns, ns) == 0) {
            p[i].token = token;
            return 0;
        }
    }
    if (*n == OF_MAX_PAIRS)
        return -1;
    p[*n].ns = ns;
    p[(*n)++].token = token;
    return 0;
}

/* Whether c separates words in the token file. */
static int of_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Read the token file's bytes as whole lines: 1 when every line is blank, a comment ('#' first) or two
 * words "NS TOKEN" without NUL bytes (recorded in p), 0 when one is not, -1 when there are too many to
 * follow.  This is what the file says, however long its lines. */
static int of_token_lines(char *text, size_t len, struct of_pair *p, size_t *n)
{
    for (char *line = text, *end = text + len; line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line)), *stop = nl ? nl : end, *c = line, *w[2];
        size_t nw = 0;
        while (c < stop && of_space(*c))
            c++;
        if (c == stop || *c == '#') {
            line = stop + 1;
            continue;
        }
        if (memchr(line, 0, (size_t)(stop - line)))
            return 0;
        while (c < stop) {
            if (nw == 2)
                return 0;
            w[nw++] = c;
            while (c < stop && !of_space(*c))
                c++;
            *c = 0; /* a space or the line's end: the word is a C string now */
            if (c < stop)
                c++;
            while (c < stop && of_space(*c))
                c++;
        }
        line = stop + 1;
        if (nw != 2)
            return 0;
        if (of_expect(p, n, w[0], w[1]) != 0)
            return -1;
    }
    return 1;
}

/* Abort unless a parsed configuration satisfies what options.c promises of it. */
static void of_check_relations(const struct options *o)
{
    typedef unsigned __int128 u128;
    if (o->listen.n == 0 || o->log_level_num < 0 || o->log_level_num > 3)
        abort();
    if ((u128)o->max_frame < (u128)o->max_value + o->max_key + 1024)
        abort();
    if (o->pre_hello_max_frame < 64 || o->pre_hello_max_frame > o->max_frame || o->max_output < o->max_frame)
        abort();
    if (o->max_buffer_memory && (u128)o->max_buffer_memory < (u128)o->max_frame + o->max_output)
        abort();
    if (!o->max_key || !o->max_keys_per_request || !o->max_connections)
        abort();
    if (!o->wait_timeout || o->max_wait_timeout < o->wait_timeout || o->auth_backoff_max < o->auth_backoff)
        abort();
    if (strcmp(o->fsync, "always") && strcmp(o->fsync, "everysec") && strcmp(o->fsync, "never"))
        abort();
    if (o->tls_listen.n && (!*o->tls_cert || !*o->tls_key))
        abort();
    for (size_t i = 0; i < o->token.n; i++)
        if (!strchr(o->token.v[i], '='))
            abort();
}

/* Abort unless --print-config shows every token as NS=***. */
static void of_check_masked(const struct options *o)
{
    char *text = NULL, *line;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    if (!fp)
        abort();
    options_print_config(o, fp);
    fclose(fp);
    line = strstr(text, "\ntoken=");
    if (!line)
        abort();
    line += strlen("\ntoken=");
    for (size_t i = 0; i < o->token.n; i++) {
        size_t nslen = strcspn(o->token.v[i], "=");
        if ((i && *line++ != ',') || strncmp(line, o->token.v[i], nslen + 1) != 0 ||
            strncmp(line + nslen + 1, "***", 3) != 0)
            abort();
        line += nslen + 4;
    }
    if (strncmp(line, "  # ", 4) != 0)
        abort();
    free(text);
}

/* Load the tokens as the daemon does and compare with a whole-line reading of the file. */
static void of_check_tokens(struct server *srv, char *file, size_t flen, int have_file)
{
    static struct of_pair p[OF_MAX_PAIRS];
    static char *flags[OF_MAX_ARGS * 2];
    size_t n = 0, nf = 0;
    int ok = 1, rc;
    /* The --token pairs first (copies, cut at their first '='), then the file's lines. */
    for (size_t i = 0; i < srv->opt.token.n && ok > 0; i++) {
        if (nf == sizeof flags / sizeof flags[0]) {
            ok = -1; /* more than this input's checks follow */
            break;
        }
        char *t = flags[nf++] = strdup(srv->opt.token.v[i]), *eq = strchr(t, '=');
        *eq = 0;
        ok = of_expect(p, &n, t, eq + 1) == 0 ? 1 : -1;
    }
    if (have_file && ok > 0)
        ok = of_token_lines(file, flen, p, &n);
    rc = ns_tokens_load(srv);
    /* Accepting a file that holds a malformed line reads something other than what it says. */
    if (rc == 0 && ok == 0)
        abort();
    for (size_t i = 0; rc == 0 && ok > 0 && i < n; i++)
        if (!ns_configured(srv, p[i].ns) || !ns_token_ok(srv, p[i].ns, p[i].token))
            abort();
    for (size_t i = 0; i < nf; i++)
        free(flags[i]);
}

/* Split the input into argv, environment and token file; parse; check. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char *argv[2 * OF_MAX_ARGS + 4], *env[OF_MAX_ARGS];
    char *text, *end, *sect[3] = {NULL, NULL, NULL}, *stop[3] = {NULL, NULL, NULL}, *file = NULL, *copy = NULL;
    size_t nsect = 0, argc = 1, nenv = 0, flen = 0;
    struct server srv;
    int rc;
    if (size > OF_MAX_INPUT)
        return 0;
    of_init();
    text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    end = text + size;
    /* Sections end at a line holding only "%"; the token file keeps its bytes as they are. */
    sect[nsect++] = text;
    for (char *line = text; nsect < 3 && line < end;) {
        char *nl = memchr(line, '\n', (size_t)(end - line)), *next = nl ? nl + 1 : end;
        if (line[0] == '%' && line + 1 == (nl ? nl : end)) {
            stop[nsect - 1] = line;
            sect[nsect++] = next;
        }
        line = next;
    }
    stop[nsect - 1] = end;
    argv[0] = "musterd-fuzz";
    argc += of_lines(sect[0], stop[0], argv + 1, OF_MAX_ARGS);
    if (nsect > 1)
        nenv = of_lines(sect[1], stop[1], env, OF_MAX_ARGS);
    if (nsect > 2) {
        FILE *fp = fopen(of_token_path, "w");
        flen = (size_t)(end - sect[2]);
        if (!fp || fwrite(sect[2], 1, flen, fp) != flen || fclose(fp) != 0)
            abort();
        file = copy = malloc(flen + 1);
        memcpy(copy, sect[2], flen);
        argv[argc++] = "--token-file";
        argv[argc++] = of_token_path;
    }
    argv[argc] = NULL;
    for (size_t i = 0; i < nenv; i++) {
        char *eq = strchr(env[i], '=');
        if (strncmp(env[i], "MUSTER_", 7) != 0 || !eq) {
            env[i] = NULL;
            continue;
        }
        *eq = 0;
        if (setenv(env[i], eq + 1, 1) != 0)
            env[i] = NULL;
    }
    memset(&srv, 0, sizeof srv);
    rc = options_parse(&srv.opt, (int)argc, argv);
    if (rc == -1) {
        of_check_relations(&srv.opt);
        of_check_masked(&srv.opt);
        /* Tokens load only from this input's file (another path could name a device that never ends). */
        if (!*srv.opt.token_file || strcmp(srv.opt.token_file, of_token_path) == 0)
            of_check_tokens(&srv, file, flen, *srv.opt.token_file != 0);
    }
    ns_destroy_all(&srv);
    options_free(&srv.opt);
    for (size_t i = 0; i < nenv; i++)
        if (env[i])
            unsetenv(env[i]);
    free(copy);
    free(text);
    return 0;
}
