/*
 * Key-value verbs of the CLI: set, get, add, cas, del, check, keys, num-keys,
 * and TCPStore's queues: queue-push, queue-pop, queue-len.
 * Values go to stdout byte for byte (no newline added), so `muster get`
 * is safe for binary data and `$(muster get k)` gives the value as set.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Option indexes, matching the verb table rows in muster.c. */
enum { SET_OPT_FILE = 0 };
enum { GET_OPT_WAIT = 0, GET_OPT_OUTPUT = 1 };

/* Keys per page asked of the server by `keys`. */
#define KV_PAGE 1000u

/* Resolve set's value source: VALUE, -f FILE, or "-" (stdin); 0 or an exit status. */
static int kv_set_value(struct cli *c, const struct cli_args *a, void **val, size_t *len, int *owned)
{
    const char *file = a->opt[SET_OPT_FILE];
    const char *pos = a->argc > 1 ? a->argv[1] : NULL;
    if (file && pos)
        return cli_error(c, CLI_USAGE, "give VALUE or -f FILE, not both");
    if (!file && !pos)
        return cli_error(c, CLI_USAGE, "missing VALUE (or -f FILE, or - for stdin)");
    *owned = 0;
    if (pos && strcmp(pos, "-") != 0) {
        *val = (void *)pos;
        *len = strlen(pos);
        return CLI_OK;
    }
    const char *path = file ? file : "-";
    if (cli_read_file(path, val, len) != 0)
        return cli_error(c, CLI_ERROR, "cannot read %s", strcmp(path, "-") ? path : "standard input");
    *owned = 1;
    return CLI_OK;
}

/* set KEY [VALUE | -f FILE | -]: store a value. */
int cmd_kv_set(struct cli *c, const struct cli_args *a)
{
    void *val = NULL;
    size_t len = 0;
    int owned = 0;
    int rc = kv_set_value(c, a, &val, &len, &owned);
    muster_t *m;
    if (rc == CLI_OK)
        rc = cli_connect(c, &m);
    if (rc == CLI_OK) {
        int err = muster_set(m, a->argv[0], val, len, c->timeout_ms);
        rc = err ? cli_fail(c, err) : CLI_OK;
    }
    if (owned)
        free(val);
    return rc;
}

/* get KEY [--wait] [-o FILE]: print a value. */
int cmd_kv_get(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    void *val;
    size_t len;
    int err = muster_get(m, a->argv[0], a->opt[GET_OPT_WAIT] != NULL, c->timeout_ms, &val, &len);
    if (err)
        return cli_fail(c, err);
    const char *out = a->opt[GET_OPT_OUTPUT];
    if (cli_write_file(out, val, len) != 0)
        rc = cli_error(c, CLI_ERROR, "cannot write %s", out ? out : "standard output");
    muster_free(val);
    return rc;
}

/* add KEY DELTA: add to an integer value and print the result. */
int cmd_kv_add(struct cli *c, const struct cli_args *a)
{
    int64_t delta, result;
    if (cli_parse_i64(a->argv[1], &delta) != 0)
        return cli_error(c, CLI_USAGE, "DELTA must be a 64-bit integer, not '%s'", a->argv[1]);
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int err = muster_add(m, a->argv[0], delta, &result, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    printf("%" PRId64 "\n", result);
    return CLI_OK;
}

/* cas KEY EXPECTED DESIRED: compare-and-set; prints the resulting value, exit 1 when not swapped. */
int cmd_kv_cas(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    const char *exp = a->argv[1], *des = a->argv[2];
    int swapped = 0;
    void *val;
    size_t len;
    int err = muster_compare_set(m, a->argv[0], exp, strlen(exp), des, strlen(des), &swapped, &val, &len,
                                 c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    if (cli_write_file(NULL, val, len) != 0)
        rc = cli_error(c, CLI_ERROR, "cannot write standard output");
    muster_free(val);
    return rc != CLI_OK ? rc : swapped ? CLI_OK : CLI_NO;
}

/* del KEY: delete a key; exit 1 when it did not exist. */
int cmd_kv_del(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int deleted = 0;
    int err = muster_delete(m, a->argv[0], &deleted, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    return deleted ? CLI_OK : cli_error(c, CLI_NO, "%s", muster_strerror(MUSTER_ENOTFOUND));
}

/* check KEY...: exit 0 when every key exists, 1 otherwise; prints nothing. */
int cmd_kv_check(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int present = 0;
    int err = muster_check(m, (const char *const *)a->argv, (size_t)a->argc, &present, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    return present ? CLI_OK : CLI_NO;
}

/* Print one page of keys and remember the last as the next page's start. */
static void kv_print_page(char **keys, size_t n, char **after)
{
    for (size_t i = 0; i < n; i++)
        printf("%s\n", keys[i]);
    if (n) {
        free(*after);
        *after = strdup(keys[n - 1]);
    }
}

/* keys [PREFIX]: print every key with the prefix, one per line, in byte order. */
int cmd_kv_keys(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    const char *prefix = a->argc ? a->argv[0] : "";
    char *after = NULL;
    int more = 1;
    /* Each page starts strictly after the previous one's last key, so the
     * walk ends; an empty page that claims more would not, and is refused. */
    while (more && rc == CLI_OK) {
        char **keys;
        size_t n;
        int err = muster_list(m, prefix, after, KV_PAGE, &keys, &n, &more, c->timeout_ms);
        if (err) {
            rc = cli_fail(c, err);
            break;
        }
        kv_print_page(keys, n, &after);
        muster_free_list((void **)keys, n);
        if (more && (n == 0 || !after))
            rc = cli_error(c, CLI_ERROR, "the server returned an empty page that claims more");
    }
    free(after);
    return rc;
}

/* num-keys: print the number of keys in the namespace. */
int cmd_kv_num_keys(struct cli *c, const struct cli_args *a)
{
    (void)a;
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    uint64_t count = 0;
    int err = muster_num_keys(m, &count, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    printf("%" PRIu64 "\n", count);
    return CLI_OK;
}

/* queue-push KEY VALUE: append to KEY's queue and print its length. */
int cmd_kv_queue_push(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    uint64_t len = 0;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int err = muster_queue_push(m, a->argv[0], a->argv[1], strlen(a->argv[1]), &len, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    printf("%" PRIu64 "\n", len);
    return CLI_OK;
}

/* queue-pop KEY [--wait]: print the oldest value, byte for byte, and take it; CLI_NO when the queue is empty. */
int cmd_kv_queue_pop(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    /* A blocking pop is TCPStore's: wait for the key (a non-empty queue makes it present), then pop. */
    const char *key = a->argv[0];
    int err = a->opt[0] ? muster_wait(m, &key, 1, c->timeout_ms) : MUSTER_OK;
    uint64_t before = 0;
    void *val = NULL;
    size_t len = 0;
    if (!err)
        err = muster_queue_pop(m, key, &before, &val, &len, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    if (!before)
        return CLI_NO;
    if (cli_write_file(NULL, val, len) != 0)
        rc = cli_error(c, CLI_ERROR, "cannot write standard output");
    muster_free(val);
    return rc;
}

/* queue-len KEY: print the length of KEY's queue. */
int cmd_kv_queue_len(struct cli *c, const struct cli_args *a)
{
    muster_t *m;
    uint64_t len = 0;
    int rc = cli_connect(c, &m);
    if (rc != CLI_OK)
        return rc;
    int err = muster_queue_len(m, a->argv[0], &len, c->timeout_ms);
    if (err)
        return cli_fail(c, err);
    printf("%" PRIu64 "\n", len);
    return CLI_OK;
}
