/*
 * Unit tests of the one status table (proto/status.c): every public error
 * code of muster.h has a row with a real name and message, and every wire
 * Status of muster.proto maps to the row of the same number and name.
 */
#include <stdio.h>
#include <string.h>

#include <muster/muster.h>

#include "frame.h"
#include "harness.h"

/* Every code of enum muster_err, as written in include/muster/muster.h. */
static const int status_codes[] = {
    MUSTER_OK,        MUSTER_ENOTFOUND, MUSTER_ETIMEDOUT, MUSTER_EBADREQ,    MUSTER_EUNKNOWNOP, MUSTER_EAUTH,
    MUSTER_ELIMIT,    MUSTER_ESHUTDOWN, MUSTER_ENOTNUM,   MUSTER_EOVERFLOW,  MUSTER_ESTALE,     MUSTER_ENOTMEMBER,
    MUSTER_ECONFLICT, MUSTER_EINTERNAL, MUSTER_ENOTLEADER, MUSTER_EEXCLUDED, MUSTER_EFORBIDDEN, MUSTER_EINVAL,    MUSTER_ECONN,      MUSTER_EPROTO,     MUSTER_ENOMEM,
    MUSTER_EURL,      MUSTER_ENCCL,     MUSTER_ECANCELED,
};
#define N_CODES (sizeof status_codes / sizeof status_codes[0])

/* Every enum code has a row with a non-placeholder name and message. */
static void t_every_code_has_row(void *unused)
{
    (void)unused;
    for (size_t i = 0; i < N_CODES; i++) {
        const struct status_row *r = status_find(status_codes[i]);
        CHECK(r != NULL);
        if (!r)
            continue;
        CHECK_EQ(r->code, status_codes[i]);
        CHECK(r->name && strlen(r->name) >= 2);
        CHECK(r->message && strlen(r->message) >= 5);
        CHECK(strstr(r->message, "unknown") == NULL || status_codes[i] == MUSTER_EUNKNOWNOP);
    }
}

/* The table has no rows beyond the enum, and no two rows share a code, name or message. */
static void t_table_unique(void *unused)
{
    size_t n;
    const struct status_row *t = status_table(&n);
    (void)unused;
    CHECK_EQ(n, N_CODES);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            CHECK(t[i].code != t[j].code);
            CHECK(strcmp(t[i].name, t[j].name) != 0);
            CHECK(strcmp(t[i].message, t[j].message) != 0);
        }
    }
}

/* Every wire Status value has the row of the same number, named as in the proto. */
static void t_wire_status_matches(void *unused)
{
    const ProtobufCEnumDescriptor *d = &muster__status__descriptor;
    (void)unused;
    CHECK(d->n_values >= 14);
    for (unsigned i = 0; i < d->n_values; i++) {
        const struct status_row *r = status_find(d->values[i].value);
        CHECK(r != NULL);
        if (r)
            CHECK_STR(r->name, d->values[i].name);
    }
}

/* Unknown codes have no row. */
static void t_unknown_code(void *unused)
{
    (void)unused;
    CHECK(status_find(-1) == NULL);
    CHECK(status_find(17) == NULL);
    CHECK(status_find(99) == NULL);
    CHECK(status_find(107) == NULL);
}

/* The codes the header documents as retryable are retryable; the rest of the wire codes are not. */
static void t_retryable(void *unused)
{
    static const int yes[] = {MUSTER_ETIMEDOUT, MUSTER_ECONN, MUSTER_ESHUTDOWN, MUSTER_ESTALE, MUSTER_ENOTLEADER};
    static const int no[] = {MUSTER_OK,    MUSTER_ENOTFOUND, MUSTER_EBADREQ, MUSTER_EAUTH,
                             MUSTER_ELIMIT, MUSTER_EINVAL,   MUSTER_EURL,    MUSTER_EINTERNAL};
    (void)unused;
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        CHECK(status_find(yes[i]) && status_find(yes[i])->retryable);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        CHECK(status_find(no[i]) && !status_find(no[i])->retryable);
}

/* Every "NAME = VALUE," line of enum muster_err in the installed header has a row. */
static void t_header_enum(const char *header)
{
    char line[512];
    int in_enum = 0, seen = 0;
    size_t n;
    FILE *f = fopen(header, "r");
    CHECK(f != NULL);
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char name[64];
        int value;
        if (strstr(line, "typedef enum muster_err"))
            in_enum = 1;
        else if (in_enum && strstr(line, "} muster_err;"))
            break;
        else if (in_enum && sscanf(line, " %63[A-Z_] = %d,", name, &value) == 2) {
            seen++;
            CHECK(status_find(value) != NULL);
            if (!status_find(value))
                printf("  %s = %d has no row in the status table\n", name, value);
        }
    }
    fclose(f);
    status_table(&n);
    CHECK_EQ(seen, (int)n);
}

/* Run the status table tests; argv[1] is include/muster/muster.h. */
int main(int argc, char **argv)
{
    h_init("unit-status", 30);
    if (argc > 1)
        H_RUN(t_header_enum, argv[1]);
    H_RUN(t_every_code_has_row, NULL);
    H_RUN(t_table_unique, NULL);
    H_RUN(t_wire_status_matches, NULL);
    H_RUN(t_unknown_code, NULL);
    H_RUN(t_retryable, NULL);
    return h_finish();
}
