/*
 * Namespaces: one per job or tenant, created by the first hello that names
 * it and kept for the life of the process.  Each owns a keyspace whose
 * change hook fans out to the namespace's waiters and watchers.  Tokens
 * come from --token / --token-file; a namespace without one is open.
 */
#include "ns.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "log.h"
#include "persist.h"
#include "rdzv.h"
#include "server.h"
#include "waiters.h"
#include "watch.h"

/* A namespace's required token. */
struct token {
    UT_hash_handle hh;
    char *ns;
    char *token;
};

/* Record that namespace ns requires token (a later pair replaces an earlier one); 0 on success. */
static int ns_token_add(struct server *srv, const char *ns, size_t nslen, const char *token)
{
    struct token *t = NULL;
    HASH_FIND(hh, srv->tokens, ns, nslen, t);
    if (!t) {
        if (!(t = calloc(1, sizeof *t)) || !(t->ns = strndup(ns, nslen))) {
            free(t);
            return -1;
        }
        HASH_ADD_KEYPTR(hh, srv->tokens, t->ns, nslen, t);
    }
    free(t->token);
    return (t->token = strdup(token)) ? 0 : -1;
}

/* Parse the lines of a token file ("NS TOKEN", '#' comments); 0, or -1 after logging why. */
static int ns_token_file(struct server *srv, const char *path)
{
    FILE *fp = fopen(path, "re");
    if (!fp) {
        log_msg(LOG_ERROR, "cannot read token file %s: %s", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, fp)) {
        lineno++;
        char *save = NULL, *ns = strtok_r(line, " \t\r\n", &save);
        if (!ns || ns[0] == '#')
            continue;
        char *tok = strtok_r(NULL, " \t\r\n", &save);
        if (!tok || strtok_r(NULL, " \t\r\n", &save)) {
            log_msg(LOG_ERROR, "%s:%d: expected 'NAMESPACE TOKEN'", path, lineno);
            rc = -1;
        } else {
            rc = ns_token_add(srv, ns, strlen(ns), tok);
        }
    }
    fclose(fp);
    return rc;
}

/* Load the --token and --token-file pairs; 0, or -1 after logging why. */
int ns_tokens_load(struct server *srv)
{
    const struct strlist *l = &srv->opt.token;
    for (size_t i = 0; i < l->n; i++) {
        const char *eq = strchr(l->v[i], '=');
        if (ns_token_add(srv, l->v[i], (size_t)(eq - l->v[i]), eq + 1) != 0)
            return -1;
    }
    if (srv->opt.token_file && *srv->opt.token_file)
        return ns_token_file(srv, srv->opt.token_file);
    return 0;
}

/* Compare two strings in time that depends only on their lengths; 1 when equal. */
static int ns_ct_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t diff = la ^ lb;
    for (size_t i = 0; i < lb; i++)
        diff |= (size_t)((unsigned char)(i < la ? a[i] : 0) ^ (unsigned char)b[i]);
    return diff == 0;
}

/* Whether token opens namespace name (constant-time compare; open namespaces take any token). */
int ns_token_ok(struct server *srv, const char *name, const char *token)
{
    struct token *t = NULL;
    HASH_FIND_STR(srv->tokens, name, t);
    return !t || ns_ct_equal(token ? token : "", t->token);
}

/* The keyspace change hook: wake the key's waiters, then tell watchers. */
static void ns_on_change(void *arg, enum ks_change what, const char *key, size_t klen, const struct ks_entry *e)
{
    struct ns *ns = arg;
    persist_key(ns, what == KS_DELETE, key, klen, e ? ks_val(e) : NULL, e ? e->vlen : 0);
    rdzv_note_key(ns, key, klen);
    watch_notify(ns, what, key, klen, e);
    if (what == KS_SET)
        waiters_key_set(ns, key, klen);
    if (ns->ext_hook)
        ns->ext_hook(ns->ext_arg, what, key, klen, e);
}

/* The namespace called name, or NULL. */
struct ns *ns_find(struct server *srv, const char *name)
{
    struct ns *ns = NULL;
    HASH_FIND_STR(srv->namespaces, name, ns);
    return ns;
}

/* The namespace called name, created on first use; NULL with *status LIMIT or INTERNAL. */
struct ns *ns_get(struct server *srv, const char *name, int *status)
{
    struct ns *ns = ns_find(srv, name);
    if (ns)
        return ns;
    if (srv->stats.c[STAT_NAMESPACES] >= srv->opt.max_namespaces) {
        stats_inc(&srv->stats, STAT_LIMIT_NAMESPACES);
        *status = MUSTER__STATUS__LIMIT;
        return NULL;
    }
    size_t len = strlen(name);
    if (!(ns = calloc(1, sizeof *ns + len + 1))) {
        *status = MUSTER__STATUS__INTERNAL;
        return NULL;
    }
    memcpy(ns->name, name, len);
    ns->srv = srv;
    const struct options *o = &srv->opt;
    ks_init(&ns->ks, o->max_keys_per_ns, o->max_bytes_per_ns, o->max_value, &srv->stats, ns_on_change, ns);
    HASH_ADD(hh, srv->namespaces, name[0], len, ns);
    stats_inc(&srv->stats, STAT_NAMESPACES);
    log_msg(LOG_INFO, "namespace '%s' created", ns->name);
    return ns;
}

/* Call fn on every namespace. */
void ns_each(struct server *srv, void (*fn)(struct ns *ns, void *arg), void *arg)
{
    struct ns *ns, *tmp;
    HASH_ITER(hh, srv->namespaces, ns, tmp)
        fn(ns, arg);
}

/* Free every namespace and the token table. */
void ns_destroy_all(struct server *srv)
{
    struct ns *ns, *tmp;
    HASH_ITER(hh, srv->namespaces, ns, tmp) {
        HASH_DEL(srv->namespaces, ns);
        rdzv_ns_destroy(ns);
        waiters_ns_destroy(ns);
        barrier_ns_destroy(ns);
        watch_ns_destroy(ns);
        ks_fini(&ns->ks);
        free(ns);
    }
    struct token *t, *tt;
    HASH_ITER(hh, srv->tokens, t, tt) {
        HASH_DEL(srv->tokens, t);
        free(t->ns);
        free(t->token);
        free(t);
    }
}
