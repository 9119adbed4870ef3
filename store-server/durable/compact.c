/*
 * Snapshot and compaction.  The compactor never looks at the loop's
 * memory: it rebuilds the state from the files themselves - the current
 * snapshot plus the closed log segments it is asked to fold in - into
 * a private image (records.c) on its own thread, writes snapshot.tmp (begin record
 * naming the first segment it does not cover, every generation and key,
 * end record with the count), fsyncs it, renames it over the snapshot,
 * fsyncs the directory, records it in the MANIFEST, and only then deletes
 * the folded segments.  A crash at any point leaves either the old
 * snapshot with all its segments or the new one (leftover old segments are
 * deleted at the next start).
 * The price is memory: while it runs, the compactor holds a second copy of
 * the state.
 */
#include "compact.h"

#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "manifest.h"
#include "records.h"

/* Bytes gathered before a write to the snapshot file. */
#define COMPACT_CHUNK (1u << 20)

struct compactor {
    char *dir;
    struct manifest *mf;
    int efd;
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t want;       /* fold segments up to this one */
    uint64_t folded;     /* segments up to this one are in the snapshot */
    int running, stop;
    uint64_t n_done, n_failed;
};

/* The rebuilt state and the snapshot check while the old snapshot streams past. */
struct compact_state {
    struct records *img; /* this thread's own image, never the loop's state */
    struct compact_snap_check snap;
    int in_snapshot;
};

/* ------------------------------------------------------------ file names */

/* Format the path of log segment seq in dir. */
void compact_seg_path(const char *dir, uint64_t seq, char *buf, size_t n)
{
    snprintf(buf, n, "%s/log.%016" PRIx64, dir, seq);
}

/* Format the path of the snapshot (tmp: the one being written) in dir. */
void compact_snap_path(const char *dir, int tmp, char *buf, size_t n)
{
    snprintf(buf, n, "%s/snapshot%s", dir, tmp ? ".tmp" : "");
}

/* Order two segment numbers, for qsort. */
static int compact_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The log segment numbers in dir, ascending (*v malloc'd); 0, or -1 when dir cannot be read. */
int compact_segments(const char *dir, uint64_t **v, size_t *n)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    *v = NULL;
    *n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char *end;
        if (strncmp(e->d_name, "log.", 4) != 0 || strlen(e->d_name) != 20)
            continue;
        uint64_t seq = strtoull(e->d_name + 4, &end, 16);
        if (*end || seq == 0)
            continue;
        if (*n == cap) {
            uint64_t *nv = realloc(*v, (cap = cap ? cap * 2 : 16) * sizeof *nv);
            if (!nv) {
                closedir(d);
                return -1;
            }
            *v = nv;
        }
        (*v)[(*n)++] = seq;
    }
    closedir(d);
    if (*n) /* qsort of an empty, NULL array is undefined */
        qsort(*v, *n, sizeof **v, compact_cmp);
    return 0;
}

/* Check the snapshot's framing as its records stream past (see compact.h). */
int compact_snap_step(struct compact_snap_check *s, const struct prec *r)
{
    if (s->ended)
        return -1;
    if (r->kind == PREC_SNAP_BEGIN) {
        if (s->begun)
            return -1;
        s->begun = 1;
        s->next_seq = r->id;
        return 0;
    }
    if (!s->begun)
        return -1;
    if (r->kind == PREC_SNAP_END) {
        s->ended = 1;
        return r->id == s->count ? 0 : -1;
    }
    s->count++;
    return 0;
}

/* Fsync a directory so a rename or a new file in it is durable; 0 on success. */
int compact_sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* ------------------------------------------------------------ rebuilding */

/* Fold one record into the rebuilt state. */
static int compact_fold(void *arg, const struct prec *r)
{
    struct compact_state *st = arg;
    struct record rec;
    if (st->in_snapshot && compact_snap_step(&st->snap, r) != 0)
        return -1;
    if (!prec_record(r, &rec))
        return st->in_snapshot ? 0 : -1; /* a snapshot's begin or end */
    return records_apply(st->img, &rec, RECORD_REPLAY) == 0 ? 0 : -1;
}

/* Rebuild the state of the snapshot plus segments up to upto; *next gets the old snapshot's next; 0 on success. */
static int compact_rebuild(struct compactor *cp, struct compact_state *st, uint64_t upto)
{
    char path[4096];
    struct prec_end end;
    compact_snap_path(cp->dir, 0, path, sizeof path);
    if (access(path, F_OK) == 0) {
        st->in_snapshot = 1;
        int rc = prec_read_file(path, compact_fold, st, &end);
        st->in_snapshot = 0;
        if (rc != 0 || !st->snap.ended) {
            log_msg(LOG_ERROR, "compaction: cannot read %s (%s)", path,
                    rc == 1 ? "cut short" : rc ? end.why : "no end record");
            return -1;
        }
    }
    for (uint64_t seq = st->snap.next_seq ? st->snap.next_seq : 1; seq <= upto; seq++) {
        compact_seg_path(cp->dir, seq, path, sizeof path);
        if (access(path, F_OK) != 0)
            continue;
        int rc = prec_read_file(path, compact_fold, st, &end);
        if (rc != 0) {
            log_msg(LOG_ERROR, "compaction: cannot read %s (%s)", path, rc == 1 ? "cut short" : end.why);
            return -1;
        }
        if (__atomic_load_n(&cp->stop, __ATOMIC_RELAXED))
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------- writing */

/* Write and empty b when it holds at least min bytes; 0, or -1 on a write error. */
static int compact_flush(struct evbuffer *b, int fd, size_t min)
{
    while (evbuffer_get_length(b) >= min && evbuffer_get_length(b) > 0)
        if (evbuffer_write(b, fd) < 0 && errno != EINTR)
            return -1;
    return 0;
}

/* Where compact_write's walk writes to. */
struct compact_walk {
    struct evbuffer *b;
    int fd;
    uint64_t count;
};

/* records_dump callback of compact_write: one record, flushed in chunks; non-zero on error. */
static int compact_put(void *arg, const struct record *r)
{
    struct compact_walk *w = arg;
    int rc = prec_put_record(w->b, 0, r);
    w->count++;
    return rc ? rc : compact_flush(w->b, w->fd, COMPACT_CHUNK);
}

/* Write the rebuilt state as a snapshot whose segments start at next; 0 on success. */
static int compact_write(struct compact_state *st, int fd, uint64_t next)
{
    struct compact_walk w = {evbuffer_new(), fd, 0};
    int rc = w.b ? prec_put(w.b, PREC_SNAP_BEGIN, "", 0, next, NULL, 0, NULL, 0, 0) : -1;
    /* The image walked here is this thread's own rebuild, never the loop's, so nothing changes under
     * the walk. */
    if (rc == 0)
        rc = records_dump(st->img, compact_put, &w);
    if (rc == 0)
        rc = prec_put(w.b, PREC_SNAP_END, "", 0, w.count, NULL, 0, NULL, 0, 0);
    if (rc == 0)
        rc = compact_flush(w.b, fd, 0);
    if (w.b)
        evbuffer_free(w.b);
    return rc == 0 && fsync(fd) == 0 ? 0 : -1;
}

/* Fold segments up to upto into a new snapshot and delete them; 0 on success. */
static int compact_run(struct compactor *cp, uint64_t upto)
{
    struct compact_state st;
    memset(&st, 0, sizeof st);
    char tmp[4096], snap[4096];
    compact_snap_path(cp->dir, 1, tmp, sizeof tmp);
    compact_snap_path(cp->dir, 0, snap, sizeof snap);
    int rc = (st.img = records_image_new()) ? compact_rebuild(cp, &st, upto) : -1;
    uint64_t first = st.snap.next_seq ? st.snap.next_seq : 1;
    if (rc == 0) {
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        rc = fd < 0 ? -1 : compact_write(&st, fd, upto + 1);
        if (fd >= 0)
            close(fd);
        if (rc != 0)
            log_msg(LOG_ERROR, "compaction: cannot write %s: %s", tmp, strerror(errno));
    }
    records_image_free(st.img);
    if (rc == 0 && (rename(tmp, snap) != 0 || compact_sync_dir(cp->dir) != 0))
        rc = -1;
    if (rc != 0) {
        unlink(tmp);
        return -1;
    }
    /* The MANIFEST names the new snapshot before the segments it replaces go: a crash in between leaves
     * more than the MANIFEST asks for, never less. */
    int err = manifest_set_snapshot(cp->mf, upto + 1);
    if (err) {
        log_msg(LOG_ERROR, "compaction: cannot update the MANIFEST: %s; the folded segments are kept", strerror(err));
        return -1;
    }
    for (uint64_t seq = first; seq <= upto; seq++) {
        compact_seg_path(cp->dir, seq, tmp, sizeof tmp);
        unlink(tmp);
    }
    log_msg(LOG_INFO, "snapshot written: log segments %" PRIu64 "..%" PRIu64 " compacted", first, upto);
    return 0;
}

/* ------------------------------------------------------------- thread */

/* The compactor thread: wait for a request, run it, report, until stopped. */
static void *compact_thread(void *arg)
{
    struct compactor *cp = arg;
    pthread_mutex_lock(&cp->mu);
    while (!cp->stop) {
        if (cp->want <= cp->folded) {
            pthread_cond_wait(&cp->cv, &cp->mu);
            continue;
        }
        uint64_t upto = cp->want;
        cp->running = 1;
        pthread_mutex_unlock(&cp->mu);
        int rc = compact_run(cp, upto);
        pthread_mutex_lock(&cp->mu);
        cp->running = 0;
        /* A failure is not retried until more segments close, so a full disk does not spin. */
        cp->folded = upto;
        if (rc == 0)
            cp->n_done++;
        else
            cp->n_failed++;
        uint64_t one = 1;
        if (write(cp->efd, &one, sizeof one) < 0 && errno != EAGAIN)
            log_msg(LOG_WARN, "compaction: cannot wake the loop: %s", strerror(errno));
    }
    pthread_mutex_unlock(&cp->mu);
    return NULL;
}

/* Start the compaction thread for dir (whose MANIFEST is mf); efd is written once per finished snapshot.
 * NULL on failure. */
struct compactor *compact_start(const char *dir, int efd, struct manifest *mf)
{
    struct compactor *cp = calloc(1, sizeof *cp);
    if (!cp || !(cp->dir = strdup(dir))) {
        free(cp);
        return NULL;
    }
    cp->efd = efd;
    cp->mf = mf;
    pthread_mutex_init(&cp->mu, NULL);
    pthread_cond_init(&cp->cv, NULL);
    if (pthread_create(&cp->th, NULL, compact_thread, cp) != 0) {
        compact_stop(cp);
        return NULL;
    }
    cp->started = 1;
    return cp;
}

/* Ask for segments up to and including seq to be folded into the snapshot (any thread). */
void compact_request(struct compactor *cp, uint64_t seq)
{
    pthread_mutex_lock(&cp->mu);
    if (seq > cp->want)
        cp->want = seq;
    pthread_cond_signal(&cp->cv);
    pthread_mutex_unlock(&cp->mu);
}

/* Whether a compaction is asked for or running. */
int compact_busy(struct compactor *cp)
{
    pthread_mutex_lock(&cp->mu);
    int busy = cp->running || cp->want > cp->folded;
    pthread_mutex_unlock(&cp->mu);
    return busy;
}

/* Snapshots written so far, and failures. */
void compact_counts(struct compactor *cp, uint64_t *done, uint64_t *failed)
{
    if (!cp)
        return;
    pthread_mutex_lock(&cp->mu);
    *done = cp->n_done;
    *failed = cp->n_failed;
    pthread_mutex_unlock(&cp->mu);
}

/* Stop the thread (an unfinished snapshot is abandoned) and free; NULL is a no-op. */
void compact_stop(struct compactor *cp)
{
    if (!cp)
        return;
    if (cp->started) {
        pthread_mutex_lock(&cp->mu);
        __atomic_store_n(&cp->stop, 1, __ATOMIC_RELAXED);
        pthread_cond_signal(&cp->cv);
        pthread_mutex_unlock(&cp->mu);
        pthread_join(cp->th, NULL);
    }
    pthread_mutex_destroy(&cp->mu);
    pthread_cond_destroy(&cp->cv);
    free(cp->dir);
    free(cp);
}
