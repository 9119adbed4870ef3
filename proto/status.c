/* The one status/error table: every wire status and client-side error, with its message. */
#include "frame.h"

#include <muster/muster.h>

/* Rows are ordered by code; wire statuses first, then client-side errors. */
static const struct status_row status_rows[] = {
    {MUSTER_OK, "OK", "success", 0},
    {MUSTER_ENOTFOUND, "NOT_FOUND", "key not found", 0},
    {MUSTER_ETIMEDOUT, "TIMEOUT", "deadline passed before the operation completed", 1},
    {MUSTER_EBADREQ, "BAD_REQUEST", "the server rejected the request as malformed or invalid", 0},
    {MUSTER_EUNKNOWNOP, "UNKNOWN_OP", "the server does not know this operation", 0},
    {MUSTER_EAUTH, "UNAUTHENTICATED", "not authenticated: missing hello or wrong token", 0},
    {MUSTER_ELIMIT, "LIMIT", "a server limit was exceeded (size, count or waiters)", 0},
    {MUSTER_ESHUTDOWN, "SHUTTING_DOWN", "the server is shutting down", 1},
    {MUSTER_ENOTNUM, "NOT_A_NUMBER", "the stored value is not a decimal integer", 0},
    {MUSTER_EOVERFLOW, "OVERFLOW", "the addition would overflow a 64-bit integer", 0},
    {MUSTER_ESTALE, "STALE_GENERATION", "the rendezvous generation has ended; join again", 1},
    {MUSTER_ENOTMEMBER, "NOT_MEMBER", "this connection is not a member of the job", 0},
    {MUSTER_ECONFLICT, "CONFLICT", "join parameters disagree with the open round", 0},
    {MUSTER_EINTERNAL, "INTERNAL", "internal server error", 0},
    {MUSTER_ENOTLEADER, "NOT_LEADER", "this server is a standby; the leader serves requests", 1},
    {MUSTER_EEXCLUDED, "EXCLUDED", "this node was excluded from its generation; join again as a newcomer", 0},
    {MUSTER_EFORBIDDEN, "FORBIDDEN", "this key belongs to the job's world: only musterd, or the generation's members and their workers, may write it", 0},
    {MUSTER_EINVAL, "CLIENT_EINVAL", "invalid argument", 0},
    {MUSTER_ECONN, "CLIENT_ECONN", "cannot connect to the store, or the connection was lost", 1},
    {MUSTER_EPROTO, "CLIENT_EPROTO", "the server sent a reply the client cannot parse", 0},
    {MUSTER_ENOMEM, "CLIENT_ENOMEM", "out of memory", 0},
    {MUSTER_EURL, "CLIENT_EURL", "the store URL is malformed", 0},
    {MUSTER_ENCCL, "CLIENT_ENCCL", "NCCL or CUDA reported an error", 0},
    {MUSTER_ECANCELED, "CLIENT_ECANCELED", "canceled by a membership change or by closing the handle", 1},
};

/* The row for code, or NULL when the code is unknown. */
const struct status_row *status_find(int code)
{
    for (size_t i = 0; i < sizeof status_rows / sizeof status_rows[0]; i++)
        if (status_rows[i].code == code)
            return &status_rows[i];
    return 0;
}

/* The status table and its length, for tests that walk it. */
const struct status_row *status_table(size_t *n)
{
    *n = sizeof status_rows / sizeof status_rows[0];
    return status_rows;
}
