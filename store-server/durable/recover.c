/*
 * Recovery of a data directory, before any listener opens.  The snapshot,
 * if any, must be intact, or the daemon refuses to start; then the segments
 * it does not cover are replayed in order.  Only a torn record at the very
 * end of the newest segment - what a crash in the middle of an append
 * leaves (precord.c says how it is told from damage) - is cut off, with a
 * log line; damage anywhere else refuses to start with EX_DATAERR, naming
 * the file and the offset, because the records behind it were acknowledged
 * and cutting them off would lose them silently.
 *
 * --repair-log is the deliberate way past damage: the log is cut at the
 * first damage (a consistent prefix of the history), the bytes cut off and
 * every later segment are kept beside it as *.dropped.<time> files, and
 * each drop is logged with its file, offset and size.
 *
 * Missing files: the MANIFEST (manifest.c) says which snapshot and which
 * segments the directory must hold.  A snapshot it names that is absent or
 * older, or a segment missing from the range it names (or a hole between
 * the segments present), refuses to start, naming what is missing;
 * --repair-log accepts the loss and logs it.  A directory without a
 * MANIFEST (written before there was one) is checked for holes only.
 */
#include "recover.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "compact.h"
#include "log.h"
#include "manifest.h"
#include "precord.h"
#include "records.h"
#include "server.h"

/* What replay tracks: the server, the snapshot check while reading it, and totals. */
struct recover {
    struct server *srv;
    const char *dir;
    int repair;
    int have_man;             /* the directory has a MANIFEST ... */
    struct manifest_data man; /* ... saying this */
    struct compact_snap_check snap;
    int in_snapshot;
    uint64_t records, skipped;
};

/* Apply one recovered record to the live state (prec_read_file callback). */
static int recover_apply(void *arg, const struct prec *r)
{
    struct recover *rc = arg;
    struct record rec;
    if (rc->in_snapshot && compact_snap_step(&rc->snap, r) != 0)
        return -1;
    if (!prec_record(r, &rec))
        return rc->in_snapshot ? 0 : -1; /* a snapshot's begin or end */
    rc->records++;
    /* A limit lowered since the write can refuse it now: keep going, but say so. */
    if (records_apply(records_live(rc->srv), &rec, RECORD_REPLAY) != 0)
        rc->skipped++;
    return 0;
}

/* Something the directory must hold is missing: refuse (EX_DATAERR), or with --repair-log log the loss
 * and go on (0). */
static int recover_lost(struct recover *rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int recover_lost(struct recover *rc, const char *fmt, ...)
{
    char what[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (rc->repair) {
        log_msg(LOG_WARN, "repair: accepting the loss: %s", what);
        return 0;
    }
    log_msg(LOG_ERROR,
            "data directory %s is incomplete: %s: refusing to start; restore the directory from a backup, or start "
            "once with --repair-log to accept the loss",
            rc->dir, what);
    return EX_DATAERR;
}

/* Check that every segment from need to newest is among the n in seqs (ascending); 0 or an exit status. */
static int recover_check_range(struct recover *rc, const uint64_t *seqs, size_t n, uint64_t need, uint64_t newest)
{
    size_t i = 0;
    for (uint64_t seq = need; seq && seq <= newest;) {
        while (i < n && seqs[i] < seq)
            i++;
        if (i < n && seqs[i] == seq) {
            seq++;
            continue;
        }
        /* A run of missing segments, up to the next one present. */
        uint64_t end = i < n && seqs[i] <= newest ? seqs[i] - 1 : newest;
        char path[4096];
        compact_seg_path(rc->dir, seq, path, sizeof path);
        int err = end == seq ? recover_lost(rc, "log segment %s is missing (segments %016" PRIx64 "..%016" PRIx64
                                            " must all exist)", path, need, newest)
                             : recover_lost(rc, "log segments %s to %016" PRIx64 " are missing (segments %016" PRIx64
                                            "..%016" PRIx64 " must all exist)", path, end, need, newest);
        if (err)
            return err;
        seq = end + 1;
    }
    return 0;
}

/* Load the snapshot if there is one; *next gets the first segment it does not cover; 0 or an exit status. */
static int recover_snapshot(struct recover *rc, uint64_t *next)
{
    char path[4096];
    compact_snap_path(rc->dir, 0, path, sizeof path);
    *next = 0;
    if (access(path, F_OK) != 0)
        return rc->have_man && rc->man.snap_next ? recover_lost(rc, "snapshot %s is missing", path) : 0;
    struct prec_end end;
    rc->in_snapshot = 1;
    int r = prec_read_file(path, recover_apply, rc, &end);
    rc->in_snapshot = 0;
    if (r == 1)
        snprintf(end.why, sizeof end.why, "cut short at offset %ld", end.at);
    if (r == 0 && !rc->snap.ended)
        snprintf(end.why, sizeof end.why, "no end record"), r = -1;
    if (r != 0) {
        log_msg(LOG_ERROR,
                "snapshot %s is corrupt (%s): refusing to start; restore the directory from a backup, or move the "
                "snapshot away and start with --repair-log to recover from the log segments alone (state they do "
                "not cover is then lost)",
                path, end.why);
        return EX_DATAERR;
    }
    *next = rc->snap.next_seq;
    if (rc->have_man && *next < rc->man.snap_next)
        return recover_lost(rc, "snapshot %s is older than the one the MANIFEST names (it covers the segments "
                            "before %" PRIu64 ", not before %" PRIu64 ")", path, *next, rc->man.snap_next);
    return 0;
}

/* The name a dropped file or tail is kept under: path.dropped.<unix time>. */
static void recover_dropped_name(const char *path, char *buf, size_t n)
{
    snprintf(buf, n, "%s.dropped.%lld", path, (long long)time(NULL));
}

/* Copy bytes [from, size) of path into a new file beside it, synced; 0 or -1. */
static int recover_keep_tail(const char *path, long from, long long size, const char *to)
{
    int in = open(path, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int ok = in >= 0 && out >= 0;
    char buf[65536];
    for (off_t off = from; ok && off < size;) {
        ssize_t n = pread(in, buf, sizeof buf, off);
        ok = n > 0 && write(out, buf, (size_t)n) == n;
        off += n > 0 ? n : 0;
    }
    ok = ok && fsync(out) == 0;
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return ok ? 0 : -1;
}

/* Cut a torn tail off the newest segment at end->at, saying so. */
static int recover_cut_tail(const char *path, const struct prec_end *end)
{
    log_msg(LOG_WARN, "log %s ends in a torn record (a crash during a write): dropping %lld bytes after offset %ld",
            path, end->size - end->at, end->at);
    if (truncate(path, end->at) != 0) {
        log_msg(LOG_ERROR, "cannot truncate %s: %s", path, strerror(errno));
        return EX_IOERR;
    }
    return 0;
}

/* --repair-log: cut the segment at the damage, keeping the cut bytes beside it; 0 or an exit status. */
static int recover_cut_damage(const char *path, const struct prec_end *end)
{
    char kept[4200];
    recover_dropped_name(path, kept, sizeof kept);
    if (recover_keep_tail(path, end->at, end->size, kept) != 0 || truncate(path, end->at) != 0) {
        log_msg(LOG_ERROR, "repair: cannot cut %s at offset %ld: %s", path, end->at, strerror(errno));
        return EX_IOERR;
    }
    log_msg(LOG_WARN, "repair: log %s: %s; dropped bytes %ld..%lld (%lld bytes, kept in %s)", path, end->why, end->at,
            end->size, end->size - end->at, kept);
    return 0;
}

/* --repair-log: set the segments after a cut aside, so the history stays a prefix; 0 or an exit status. */
static int recover_drop_later(const char *dir, const uint64_t *seqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char path[4096], kept[4200];
        compact_seg_path(dir, seqs[i], path, sizeof path);
        recover_dropped_name(path, kept, sizeof kept);
        struct stat sb;
        long long size = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
        if (rename(path, kept) != 0) {
            log_msg(LOG_ERROR, "repair: cannot rename %s: %s", path, strerror(errno));
            return EX_IOERR;
        }
        log_msg(LOG_WARN, "repair: dropped log segment %s (%lld bytes, after the cut; kept as %s)", path, size,
                kept);
    }
    return compact_sync_dir(dir) == 0 ? 0 : EX_IOERR;
}

/* Replay one segment; *stop is set when the log ends here (a repair cut it); 0 or an exit status. */
static int recover_segment(struct recover *rc, const uint64_t *seqs, size_t i, size_t n, int *stop)
{
    char path[4096];
    compact_seg_path(rc->dir, seqs[i], path, sizeof path);
    struct prec_end end;
    int r = prec_read_file(path, recover_apply, rc, &end);
    if (r == 0)
        return 0;
    if (r == 1 && i + 1 == n)
        return recover_cut_tail(path, &end);
    if (r == 1)
        snprintf(end.why, sizeof end.why, "record cut short at offset %ld, and later segments exist", end.at);
    if (!rc->repair || end.at < 0) {
        log_msg(LOG_ERROR,
                "log segment %s is damaged: %s: refusing to start; restore the directory from a backup, or start "
                "once with --repair-log to cut the log at offset %ld (the records after it are then lost)",
                path, end.why, end.at);
        return EX_DATAERR;
    }
    *stop = 1;
    int err = recover_cut_damage(path, &end);
    return err ? err : recover_drop_later(rc->dir, seqs + i + 1, n - i - 1);
}

/* Replay the segments from span->snap_next on (older ones are leftovers of a finished compaction), after
 * checking none is missing; 0 or an exit status. */
static int recover_segments(struct recover *rc, struct recover_span *span)
{
    uint64_t *seqs = NULL;
    size_t n = 0;
    if (compact_segments(rc->dir, &seqs, &n) != 0) {
        log_msg(LOG_ERROR, "cannot list %s: %s", rc->dir, strerror(errno));
        return EX_IOERR;
    }
    /* What must exist: from the snapshot's next segment (or the MANIFEST's first, or the oldest present)
     * to the MANIFEST's last (or the newest present, when that is newer: a crash after creating it). */
    uint64_t need = span->snap_next, newest = n ? seqs[n - 1] : 0;
    if (rc->have_man && rc->man.first > need)
        need = rc->man.first;
    if (!need && n)
        need = seqs[0];
    if (rc->have_man && rc->man.last > newest)
        newest = rc->man.last;
    int err = recover_check_range(rc, seqs, n, need, newest), stop = 0;
    for (size_t i = 0; i < n && !err && !stop; i++) {
        if (seqs[i] < span->snap_next) {
            char path[4096];
            compact_seg_path(rc->dir, seqs[i], path, sizeof path);
            unlink(path);
            continue;
        }
        err = recover_segment(rc, seqs, i, n, &stop);
        if (!span->first)
            span->first = seqs[i];
        span->last = seqs[i];
    }
    free(seqs);
    return err;
}

/* Read the MANIFEST into rc; 0 or an exit status. */
static int recover_manifest(struct recover *rc)
{
    char why[512];
    rc->have_man = manifest_read(rc->dir, &rc->man, why, sizeof why);
    if (rc->have_man < 0) {
        rc->have_man = 0;
        if (!rc->repair) {
            log_msg(LOG_ERROR, "%s: refusing to start; restore the directory from a backup, or start once with "
                    "--repair-log to go on without it", why);
            return EX_DATAERR;
        }
        log_msg(LOG_WARN, "repair: %s; going on without it", why);
    }
    return 0;
}

/* Check dir against its MANIFEST and replay it into srv (see recover.h). */
int recover_dir(struct server *srv, const char *dir, int repair, struct recover_span *span)
{
    struct recover rc = {.srv = srv, .dir = dir, .repair = repair};
    uint64_t t0 = clock_now_ms();
    char tmp[4096];
    compact_snap_path(dir, 1, tmp, sizeof tmp);
    unlink(tmp); /* an abandoned snapshot */
    memset(span, 0, sizeof *span);
    int err = recover_manifest(&rc);
    if (!err)
        err = recover_snapshot(&rc, &span->snap_next);
    if (!err)
        err = recover_segments(&rc, span);
    if (!err)
        log_msg(LOG_INFO, "recovered %" PRIu64 " records from %s in %" PRIu64 " ms%s", rc.records, dir,
                clock_now_ms() - t0, rc.skipped ? " (some refused by current limits)" : "");
    if (rc.skipped)
        log_msg(LOG_WARN, "%" PRIu64 " recovered records were refused by the current limits", rc.skipped);
    return err;
}
