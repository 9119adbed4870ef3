/*
 * libmuster helpers for integration tests: connect to the test daemon and
 * check values with file:line reporting.
 */
#include "hclient.h"

#include <stdio.h>
#include <string.h>

/* As hc_connect, also returning the error code in *err and not counting a failure. */
muster_t *hc_try_connect(const struct h_daemon *d, const char *ns, const char *token, int *err)
{
    char url[512];
    muster_opts o = {0};
    o.connect_timeout_ms = 5000;
    o.default_timeout_ms = 10000;
    o.client_name = "muster-test";
    h_url(d, ns, token, url, sizeof url);
    return muster_connect_opts(url, &o, err);
}

/* Connect to d in namespace ns (NULL = default) with token (NULL = none); NULL on failure. */
muster_t *hc_connect(const struct h_daemon *d, const char *ns, const char *token)
{
    int err = 0;
    muster_t *m = hc_try_connect(d, ns, token, &err);
    CHECK(m != NULL);
    if (!m)
        printf("  connect to %s ns=%s: %s\n", d->url, ns ? ns : "", muster_strerror(err));
    return m;
}

/* Set a NUL-terminated string value; returns the error code. */
int hc_set_str(muster_t *m, const char *key, const char *value)
{
    return muster_set(m, key, value, strlen(value), 0);
}

/* Check that key holds exactly the string want (NULL: absent). */
void hc_expect(muster_t *m, const char *key, const char *want, const char *file, int line)
{
    void *v = NULL;
    size_t n = 0;
    int rc = muster_get(m, key, 0, 0, &v, &n);
    if (!want) {
        h_check_eq(rc, MUSTER_ENOTFOUND, file, line, "get status", "MUSTER_ENOTFOUND");
    } else {
        h_check_eq(rc, MUSTER_OK, file, line, "get status", "MUSTER_OK");
        if (rc == MUSTER_OK)
            h_check_mem(v, n, want, strlen(want), file, line, key, want);
    }
    muster_free(v);
}
