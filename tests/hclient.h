/*
 * libmuster helpers for integration tests: connect a handle to a test
 * daemon, counting a failed connect as a failed check.
 */
#ifndef MUSTER_TEST_HCLIENT_H
#define MUSTER_TEST_HCLIENT_H

#include <muster/muster.h>

#include "harness.h"

/* Connect to d in namespace ns (NULL = default) with token (NULL = none); NULL on failure. */
muster_t *hc_connect(const struct h_daemon *d, const char *ns, const char *token);
/* As hc_connect, also returning the error code in *err and not counting a failure. */
muster_t *hc_try_connect(const struct h_daemon *d, const char *ns, const char *token, int *err);
/* Set a NUL-terminated string value; returns the error code. */
int hc_set_str(muster_t *m, const char *key, const char *value);
/* Non-blocking get, checked against an expected string (NULL = expect not found). */
void hc_expect(muster_t *m, const char *key, const char *want, const char *file, int line);

/* Check that key holds exactly the string want (NULL: absent). */
#define HC_EXPECT(m, key, want) hc_expect((m), (key), (want), __FILE__, __LINE__)

#endif
