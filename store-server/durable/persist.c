/*
 * Durability.  With --data-dir, every keyspace change (whatever front end
 * made it, and the rendezvous keys the daemon publishes itself) and every
 * new generation number becomes a record (precord.c) in the current log
 * segment, log.<seq>.  Records are logged as resulting state (the key's
 * whole new value), so replay is idempotent and needs no op semantics.
 *
 * The loop never touches the disk.  It appends records to a staging
 * buffer; a kick event later in the same loop turn hands the batch to the
 * writer thread, which writes it, fsyncs per --fsync, and reports the last
 * durable record through an eventfd.  Meanwhile every frame the loop sends
 * goes to its connection's held buffer whenever some logged state is not
 * yet durable, and held frames go out, in order, once the writer has caught
 * up.  So nothing a client sees - its own acknowledgement, or another
 * client's write read back - can be lost by a crash.  Batches form
 * naturally while an fsync runs: group commit.
 *
 * Recovery (recover.c, before any listener opens) replays the snapshot and
 * the segments it does not cover; a new segment is started after it.  Compaction (compact.c) folds
 * closed segments into a new snapshot on its own thread.
 *
 * The records come from the live state through records.c's sink, which
 * this file is: the state emits each record at the change itself.  With
 * --ha, ha.c registers the etcd log as the replica: every record made here
 * is offered to it as well, and a record counts as durable only once both
 * the disk (when there is a data directory) and etcd have it; --ha without
 * --data-dir runs this file in memory-only mode (no directory, no threads)
 * just for the held replies.
 */
#include "persist.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>
#include <utlist.h>

#include "clock.h"
#include "compact.h"
#include "log.h"
#include "manifest.h"
#include "precord.h"
#include "records.h"
#include "recover.h"
#include "server.h"

enum persist_policy { FSYNC_ALWAYS, FSYNC_EVERYSEC, FSYNC_NEVER };

struct persist {
    struct server *srv;
    char *dir; /* NULL: memory only (--ha without --data-dir) */
    enum persist_policy policy;
    uint64_t compact_bytes;
    int lock_fd, efd;
    int ready, failed;
    struct persist_replica replica; /* --ha's etcd log, or zeroed */
    /* Loop side.  durable_lsn is the lower of the disk's and etcd's marks. */
    struct evbuffer *staging;
    uint64_t last_lsn, durable_lsn, disk_lsn, ha_lsn;
    int kicked;
    struct event *kick_ev, *done_ev;
    struct persist_hold *holders;
    uint64_t seen_fsyncs, seen_bytes, seen_snaps, seen_snap_fail;
    /* Shared with the writer, under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct evbuffer *queue;
    uint64_t queue_lsn, written_lsn, n_fsyncs, n_bytes;
    int stop, werr;
    /* Writer thread only. */
    pthread_t writer;
    int writer_started;
    int seg_fd;
    uint64_t seg_seq, seg_bytes, last_sync_ms, writer_fsyncs;
    int dirty;
    struct compactor *compact;
    struct manifest *mf; /* shared by the writer and the compactor (it has its own lock) */
};

/* ------------------------------------------------------------ writer thread */

/* Create and open segment seq for appending; the fd, or -1. */
static int persist_seg_open(const char *dir, uint64_t seq)
{
    char path[4096];
    compact_seg_path(dir, seq, path, sizeof path);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0 && compact_sync_dir(dir) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Write all of b to the segment; 0, or an errno. */
static int persist_write_all(struct persist *p, struct evbuffer *b)
{
    while (evbuffer_get_length(b) > 0) {
        int n = evbuffer_write(b, p->seg_fd);
        if (n < 0 && errno != EINTR)
            return errno ? errno : EIO;
        if (n > 0) {
            p->seg_bytes += (uint64_t)n;
            p->dirty = 1;
        }
    }
    return 0;
}

/* Fsync the segment when the policy asks now; 0, or an errno. */
static int persist_maybe_sync(struct persist *p, int force)
{
    uint64_t now = clock_now_ms();
    int due = p->policy == FSYNC_ALWAYS || (p->policy == FSYNC_EVERYSEC && now - p->last_sync_ms >= 1000);
    if (!p->dirty || (!due && !force))
        return 0;
    if (fdatasync(p->seg_fd) != 0)
        return errno;
    p->dirty = 0;
    p->last_sync_ms = now;
    p->writer_fsyncs++;
    pthread_mutex_lock(&p->mu);
    p->n_fsyncs++;
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* Close a full segment, open the next one and hand the closed ones to the compactor; 0, or an errno. */
static int persist_rotate(struct persist *p)
{
    if (p->seg_bytes < p->compact_bytes || compact_busy(p->compact))
        return 0;
    int rc = persist_maybe_sync(p, 1);
    if (rc)
        return rc;
    int fd = persist_seg_open(p->dir, p->seg_seq + 1);
    if (fd < 0)
        return errno ? errno : EIO;
    if ((rc = manifest_set_last(p->mf, p->seg_seq + 1)) != 0) {
        close(fd);
        return rc;
    }
    close(p->seg_fd);
    p->seg_fd = fd;
    p->seg_bytes = 0;
    compact_request(p->compact, p->seg_seq++);
    return 0;
}

/* Write one batch taken from the queue and make it durable per policy; 0, or an errno. */
static int persist_batch(struct persist *p, struct evbuffer *batch, uint64_t lsn)
{
    size_t len = evbuffer_get_length(batch);
    int rc = persist_write_all(p, batch);
    if (!rc)
        rc = persist_maybe_sync(p, 0);
    if (!rc)
        rc = persist_rotate(p);
    pthread_mutex_lock(&p->mu);
    if (!rc) {
        p->written_lsn = lsn;
        p->n_bytes += len;
    } else {
        p->werr = rc;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* Wake the loop (the eventfd's counter only needs to become non-zero). */
static void persist_wake_loop(struct persist *p)
{
    uint64_t one = 1;
    ssize_t n = write(p->efd, &one, sizeof one);
    (void)n; /* a full counter already wakes the loop */
}

/* Wait (mu held) for work; with unsynced everysec writes, no later than a second after the last fsync. */
static void persist_writer_idle(struct persist *p)
{
    if (p->policy != FSYNC_EVERYSEC || !p->dirty) {
        pthread_cond_wait(&p->cv, &p->mu);
        return;
    }
    /* The deadline is the last fsync plus a second, not "a second from now": a timer restarted by every
     * batch let a write made just after an fsync wait almost two seconds for the next one. */
    uint64_t due = p->last_sync_ms + 1000;
    struct timespec ts = {(time_t)(due / 1000), (long)(due % 1000) * 1000000};
    pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    pthread_mutex_unlock(&p->mu);
    uint64_t before = p->writer_fsyncs;
    int rc = persist_maybe_sync(p, 0);
    if (p->writer_fsyncs != before)
        persist_wake_loop(p); /* so the fsync counter moves without waiting for the next write */
    pthread_mutex_lock(&p->mu);
    p->werr = p->werr ? p->werr : rc;
}

/* The writer: take batches as the loop hands them over, until told to stop with nothing left. */
static void *persist_writer(void *arg)
{
    struct persist *p = arg;
    struct evbuffer *batch = evbuffer_new();
    pthread_mutex_lock(&p->mu);
    while (batch && !p->werr && (!p->stop || evbuffer_get_length(p->queue) > 0)) {
        if (evbuffer_get_length(p->queue) == 0) {
            persist_writer_idle(p);
            continue;
        }
        evbuffer_add_buffer(batch, p->queue);
        uint64_t lsn = p->queue_lsn;
        pthread_mutex_unlock(&p->mu);
        persist_batch(p, batch, lsn);
        persist_wake_loop(p);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    if (batch)
        evbuffer_free(batch);
    if (p->seg_fd >= 0 && p->dirty && fdatasync(p->seg_fd) != 0)
        log_msg(LOG_ERROR, "final fsync of the log failed: %s", strerror(errno));
    return NULL;
}

/* --------------------------------------------------------------- loop side */

/* Release held frames of every connection whose frames are all durable now. */
static void persist_release(struct persist *p)
{
    struct persist_hold *h, *tmp;
    DL_FOREACH_SAFE(p->holders, h, tmp)
    {
        if (h->lsn > p->durable_lsn)
            continue;
        DL_DELETE(p->holders, h);
        h->prev = h->next = NULL;
        /* A closing connection's output is disabled: adding to it is harmless. */
        evbuffer_add_buffer(h->bev ? bufferevent_get_output(h->bev) : h->out, h->held);
        if (!h->bev && h->kick)
            h->kick(h);
    }
}

/* Move the durable mark to the lower of the disk's and etcd's, releasing replies that became durable. */
static void persist_advance(struct persist *p)
{
    uint64_t lsn = p->disk_lsn < p->ha_lsn ? p->disk_lsn : p->ha_lsn;
    if (lsn > p->durable_lsn) {
        p->durable_lsn = lsn;
        persist_release(p);
    }
}

/* Whether the replica has records it took and has not confirmed yet. */
static int persist_replica_pending(const struct persist *p)
{
    return p->replica.pending && p->replica.pending(p->replica.arg);
}

/* etcd confirmed every record up to lsn (the leader's log append). */
void persist_replicated(struct server *srv, uint64_t lsn)
{
    struct persist *p = srv->persist;
    /* Records etcd was not asked for that came after lsn are covered once nothing waits for etcd. */
    if (p && !persist_replica_pending(p))
        lsn = p->last_lsn;
    if (p && lsn > p->ha_lsn) {
        p->ha_lsn = lsn;
        persist_advance(p);
    }
}

/* Never send what waits for records etcd will not confirm (--ha: leadership was lost with them): the
 * connections holding such frames keep them for good and are shut down, so their clients learn at once
 * that nothing they are waiting for was acknowledged; every other frame goes out from now on.  The daemon
 * serves nothing after this (ha.c refuses every request), so later frames reveal none of that state. */
void persist_forsake(struct server *srv)
{
    struct persist *p = srv->persist;
    if (!p)
        return;
    for (struct persist_hold *h = p->holders; h; h = h->next) {
        if (h->lsn <= p->durable_lsn)
            continue;
        h->lsn = UINT64_MAX;
        /* The connection sees the end of its stream and closes itself the usual way. */
        evutil_socket_t fd = h->bev ? bufferevent_getfd(h->bev) : h->out ? h->fd : -1;
        if (fd >= 0)
            shutdown(fd, SHUT_RDWR);
    }
    p->ha_lsn = p->last_lsn;
    persist_advance(p);
}

/* Stop acknowledging: state holds a change that can never be made durable; the daemon drains. */
static void persist_fail(struct persist *p, const char *ns, const char *what)
{
    stats_inc(&p->srv->stats, STAT_PERSIST_ERRORS);
    log_msg(LOG_ERROR, "persist: %s logging a change of namespace '%s'", what, ns);
    p->failed = 1;
    server_fail(p->srv, EX_OSERR, "cannot log a change");
}

/* Copy the helper threads' counters into the server's (the loop owns those). */
static void persist_take_counts(struct persist *p, uint64_t fsyncs, uint64_t bytes)
{
    struct stats *st = &p->srv->stats;
    uint64_t snaps = 0, snap_fail = 0;
    compact_counts(p->compact, &snaps, &snap_fail);
    stats_add(st, STAT_PERSIST_FSYNCS, fsyncs - p->seen_fsyncs);
    stats_add(st, STAT_PERSIST_BYTES, bytes - p->seen_bytes);
    stats_add(st, STAT_PERSIST_SNAPSHOTS, snaps - p->seen_snaps);
    stats_add(st, STAT_PERSIST_ERRORS, snap_fail - p->seen_snap_fail);
    p->seen_fsyncs = fsyncs;
    p->seen_bytes = bytes;
    p->seen_snaps = snaps;
    p->seen_snap_fail = snap_fail;
}

/* The writer (or compactor) reported: advance the durable mark, release replies, or fail. */
static void persist_done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    struct persist *p = arg;
    uint64_t junk;
    if (read(fd, &junk, sizeof junk) < 0 && errno != EAGAIN)
        log_msg(LOG_WARN, "persist: eventfd read: %s", strerror(errno));
    pthread_mutex_lock(&p->mu);
    uint64_t lsn = p->written_lsn, fsyncs = p->n_fsyncs, bytes = p->n_bytes;
    int werr = p->werr;
    pthread_mutex_unlock(&p->mu);
    persist_take_counts(p, fsyncs, bytes);
    if (werr && !p->failed) {
        /* Nothing more can be made durable: held replies are never sent, and the daemon drains. */
        p->failed = 1;
        stats_inc(&p->srv->stats, STAT_PERSIST_ERRORS);
        log_msg(LOG_ERROR, "cannot write the log in %s: %s; unacknowledged writes are dropped, shutting down",
                p->dir, strerror(werr));
        server_fail(p->srv, EX_IOERR, "data directory write failed");
        return;
    }
    if (lsn > p->disk_lsn) {
        p->disk_lsn = lsn;
        persist_advance(p);
    }
}

/* Hand the staged records to the writer (runs once per loop turn that logged something). */
static void persist_kick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct persist *p = arg;
    p->kicked = 0;
    pthread_mutex_lock(&p->mu);
    evbuffer_add_buffer(p->queue, p->staging);
    p->queue_lsn = p->last_lsn;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Append one record to the staging buffer (and offer it to the replica unless it came from there) and make
 * sure the writer gets it this turn. */
static void persist_append(struct persist *p, const struct record *r, int from_replica)
{
    uint64_t lsn = p->last_lsn + 1;
    /* Without the record the change cannot be made durable: stop acknowledging anything. */
    if (p->dir && prec_put_record(p->staging, lsn, r) != 0) {
        persist_fail(p, r->ns, "out of memory");
        return;
    }
    int sent = from_replica || !p->replica.take ? 0 : p->replica.take(p->replica.arg, lsn, r);
    if (sent < 0) {
        persist_fail(p, r->ns, "out of memory replicating");
        return;
    }
    p->last_lsn = lsn;
    /* A record etcd is not asked for (no leader here, or it came from etcd) waits for the disk only:
     * nothing earlier is waiting for etcd then, as a leader that loses etcd with changes unconfirmed
     * drains. */
    if (!sent && !persist_replica_pending(p))
        p->ha_lsn = lsn;
    if (!p->dir) {
        p->disk_lsn = lsn;
        persist_advance(p);
        return;
    }
    stats_inc(&p->srv->stats, STAT_PERSIST_RECORDS);
    if (!p->kicked) {
        p->kicked = 1;
        event_active(p->kick_ev, EV_TIMEOUT, 1);
    }
}

/* The records sink: log a change of the live state; a replicated one goes to disk but not back to etcd, a
 * replayed one is in the data directory already. */
static void persist_take(void *arg, const struct record *r, enum record_origin from)
{
    if (from != RECORD_REPLAY)
        persist_append(arg, r, from == RECORD_REPLICA);
}

/* Offer every record logged from now on to rep as well (NULL: to none). */
void persist_replica(struct server *srv, const struct persist_replica *rep)
{
    if (srv->persist)
        srv->persist->replica = rep ? *rep : (struct persist_replica){0};
}

/* Where a connection's next frame goes: bev's output, or h's held buffer while not yet durable. */
struct evbuffer *persist_output(struct server *srv, struct persist_hold *h, struct bufferevent *bev)
{
    struct persist *p = srv->persist;
    struct evbuffer *out = bev ? bufferevent_get_output(bev) : h->out;
    if (!p || (p->last_lsn <= p->durable_lsn && !persist_holding(h)))
        return out;
    if (!h->held && !(h->held = evbuffer_new()))
        return out; /* out of memory: degrade to not waiting rather than losing the frame */
    if (!persist_holding(h))
        DL_APPEND(p->holders, h);
    h->bev = bev;
    if (h->lsn != UINT64_MAX) /* forsaken: held for good */
        h->lsn = p->last_lsn;
    stats_inc(&srv->stats, STAT_PERSIST_HELD);
    return h->held;
}

/* Whether h has frames held back until the log catches up. */
int persist_holding(const struct persist_hold *h)
{
    /* utlist keeps head->prev at the tail, so prev is set exactly while h is listed. */
    return h->prev != NULL;
}

/* Whether h holds frames that can never go out: the log failed, or etcd will not confirm them. */
int persist_held_for_good(const struct server *srv, const struct persist_hold *h)
{
    return persist_holding(h) && (srv->persist->failed || h->lsn == UINT64_MAX);
}

/* Forget h's held frames (its connection is being freed). */
void persist_hold_drop(struct server *srv, struct persist_hold *h)
{
    if (persist_holding(h))
        DL_DELETE(srv->persist->holders, h);
    h->prev = h->next = NULL;
    if (h->held)
        evbuffer_free(h->held);
    h->held = NULL;
}

/* Whether state has been recovered (always true without --data-dir). */
int persist_ready(const struct server *srv)
{
    return !srv->persist || srv->persist->ready;
}

/* Whether a compaction is asked for or running (a test waits for it before closing). */
int persist_compacting(const struct server *srv)
{
    return srv->persist && srv->persist->compact && compact_busy(srv->persist->compact);
}

/* ----------------------------------------------------------------- recovery */

/* Create (if needed) and lock the data directory; 0 or an exit status. */
static int persist_lock_dir(struct persist *p)
{
    if (mkdir(p->dir, 0700) != 0 && errno != EEXIST) {
        log_msg(LOG_ERROR, "cannot create data directory %s: %s", p->dir, strerror(errno));
        return EX_CANTCREAT;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/LOCK", p->dir);
    p->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (p->lock_fd < 0) {
        log_msg(LOG_ERROR, "cannot open %s: %s", path, strerror(errno));
        return EX_CANTCREAT;
    }
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        log_msg(LOG_ERROR, "data directory %s is in use by another musterd", p->dir);
        return EX_TEMPFAIL;
    }
    return 0;
}

/* Make the loop's events and the shared buffers; 0 on success. */
static int persist_loop_init(struct persist *p)
{
    p->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    p->staging = evbuffer_new();
    p->queue = evbuffer_new();
    if (p->efd < 0 || !p->staging || !p->queue)
        return -1;
    p->kick_ev = event_new(p->srv->base, -1, 0, persist_kick_cb, p);
    p->done_ev = event_new(p->srv->base, p->efd, EV_READ | EV_PERSIST, persist_done_cb, p);
    if (!p->kick_ev || !p->done_ev || event_add(p->done_ev, NULL) != 0)
        return -1;
    pthread_mutex_init(&p->mu, NULL);
    /* The writer's deadlines are on the monotonic clock (clock_now_ms, CLOCK_MONOTONIC). */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->cv, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

/* Open the segment after what recovery found, record the directory's contents in its MANIFEST, and start
 * the writer and compactor; 0 or an exit status. */
static int persist_start_threads(struct persist *p, const struct recover_span *span)
{
    /* Never below the snapshot's next segment: lower numbers count as already compacted. */
    p->seg_seq = span->last + 1 > span->snap_next ? span->last + 1 : span->snap_next;
    if ((p->seg_fd = persist_seg_open(p->dir, p->seg_seq)) < 0) {
        log_msg(LOG_ERROR, "cannot create a log segment in %s: %s", p->dir, strerror(errno));
        return EX_CANTCREAT;
    }
    struct manifest_data man = {span->snap_next, span->first ? span->first : p->seg_seq, p->seg_seq};
    if (!(p->mf = manifest_open(p->dir, &man))) {
        log_msg(LOG_ERROR, "cannot write the MANIFEST in %s: %s", p->dir, strerror(errno));
        return EX_CANTCREAT;
    }
    p->last_sync_ms = clock_now_ms();
    if (!(p->compact = compact_start(p->dir, p->efd, p->mf)) ||
        pthread_create(&p->writer, NULL, persist_writer, p) != 0) {
        log_msg(LOG_ERROR, "cannot start the log threads");
        return EX_OSERR;
    }
    p->writer_started = 1;
    /* Fold what recovery replayed into a snapshot now, so restarts stay fast. */
    if (span->last)
        compact_request(p->compact, span->last);
    return 0;
}

/* Lock the data directory, recover its state into the server and start the writer; 0 or an exit status. */
int persist_open(struct server *srv)
{
    const struct options *o = &srv->opt;
    int memory_only = !o->data_dir || !*o->data_dir;
    /* --ha holds replies until etcd has their records (its log registers as the replica in ha_open). */
    if (memory_only && (!o->ha || !*o->ha))
        return 0;
    struct persist *p = calloc(1, sizeof *p);
    if (!p || (!memory_only && !(p->dir = strdup(o->data_dir)))) {
        free(p);
        return EX_OSERR;
    }
    srv->persist = p;
    p->srv = srv;
    p->lock_fd = p->efd = p->seg_fd = -1;
    if (memory_only) {
        /* Only the held replies are needed: they wait for etcd (ha.c). */
        p->ready = 1;
        if (!(p->staging = evbuffer_new()))
            return EX_OSERR;
        records_sink(srv, &(struct record_sink){persist_take, p});
        return 0;
    }
    p->policy = strcmp(o->fsync, "always") == 0 ? FSYNC_ALWAYS : strcmp(o->fsync, "never") == 0 ? FSYNC_NEVER
                                                                                              : FSYNC_EVERYSEC;
    p->compact_bytes = o->compact_bytes;
    if (persist_loop_init(p) != 0)
        return EX_OSERR;
    struct recover_span span;
    int rc = persist_lock_dir(p);
    if (!rc)
        rc = recover_dir(srv, p->dir, o->repair_log, &span);
    if (!rc)
        rc = persist_start_threads(p, &span);
    p->ready = rc == 0;
    /* Changes are logged from here on; the replayed ones are in the directory already. */
    if (!rc)
        records_sink(srv, &(struct record_sink){persist_take, p});
    return rc;
}

/* Write out every record still queued, stop the helper threads and free; safe when never opened. */
void persist_close(struct server *srv)
{
    struct persist *p = srv->persist;
    if (!p)
        return;
    records_sink(srv, NULL);
    if (p->writer_started) {
        pthread_mutex_lock(&p->mu);
        evbuffer_add_buffer(p->queue, p->staging);
        p->queue_lsn = p->last_lsn;
        p->stop = 1;
        pthread_cond_signal(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pthread_join(p->writer, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    }
    compact_stop(p->compact);
    manifest_close(p->mf);
    while (p->holders)
        persist_hold_drop(srv, p->holders);
    if (p->kick_ev)
        event_free(p->kick_ev);
    if (p->done_ev)
        event_free(p->done_ev);
    if (p->staging)
        evbuffer_free(p->staging);
    if (p->queue)
        evbuffer_free(p->queue);
    if (p->seg_fd >= 0)
        close(p->seg_fd);
    if (p->efd >= 0)
        close(p->efd);
    if (p->lock_fd >= 0)
        close(p->lock_fd); /* releases the flock */
    free(p->dir);
    free(p);
    srv->persist = NULL;
}
