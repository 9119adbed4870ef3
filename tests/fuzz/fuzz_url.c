/*
 * libFuzzer target for the store URL parser: any input either fails with
 * MUSTER_EURL leaving the output untouched, or yields NUL-terminated fields
 * and a usable port.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <muster/muster.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Abort unless a fixed-size field is NUL-terminated inside its buffer. */
static void fuzz_url_terminated(const char *field, size_t cap)
{
    if (!memchr(field, 0, cap))
        abort();
}

/* Parse one input and check the invariants of the result. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    muster_url u, before;
    char *text;
    int rc;
    /* "" means $MUSTER_URL: environment-dependent, so not a parser input. */
    if (size == 0 || size > 4096)
        return 0;
    text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    memset(&u, 0x5a, sizeof u);
    before = u;
    rc = muster_url_parse(text, &u);
    if (rc == MUSTER_OK) {
        fuzz_url_terminated(u.host, sizeof u.host);
        fuzz_url_terminated(u.ns, sizeof u.ns);
        fuzz_url_terminated(u.token, sizeof u.token);
        fuzz_url_terminated(u.name, sizeof u.name);
        if (!u.host[0] || u.port == 0)
            abort();
    } else if (rc != MUSTER_EURL || memcmp(&u, &before, sizeof u) != 0) {
        abort();
    }
    free(text);
    return 0;
}
