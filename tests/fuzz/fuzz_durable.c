/*
 * libFuzzer target for the durable format: the bytes of a data directory
 * (MANIFEST, snapshot, log segments; framing in store-server/durable/precord.c,
 * record body in proto/record.proto) are written to a scratch directory
 * and recovered by the daemon's own loader (recover.c).
 *
 * Recovery may refuse or load, never crash; and when it loads, nothing was
 * lost silently: a segment it shortened without keeping the cut bytes (a
 * torn tail) has no intact record at or after the cut, every other segment
 * is whole, and without --repair-log every segment the MANIFEST names was
 * there.  Cut bytes kept by --repair-log must be exactly the bytes cut.
 * A directory that loaded then goes through a real start (persist.c: the
 * MANIFEST rewritten, a new segment, compaction into a new snapshot on the
 * compactor thread), is closed, and is recovered once more: each load must
 * succeed and hold the same keys, values and generations.
 *
 * Input: a flags byte, then the files' bytes separated by "@@@@": the
 * MANIFEST (flag 2), the snapshot (flag 4), then (flags >> 3) & 3 log
 * segments numbered from 1 (from 2 with flag 0x20).  Flag 1 recovers with
 * --repair-log; flag 0x80 rewrites every record checksum that can be
 * located, so the mutated bodies reach the decoder.
 */
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "compact.h"
#include "frame.h"
#include "keyspace.h"
#include "manifest.h"
#include "ns.h"
#include "persist.h"
#include "precord.h"
#include "rdzv.h"
#include "recover.h"
#include "daemon.h"
#include "server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs above this are skipped. */
#define DF_MAX_INPUT (256u * 1024)
/* Log segments one input may hold. */
#define DF_MAX_SEGS 3
/* How long to wait for the compactor (ms) before giving up on the round trip. */
#define DF_COMPACT_WAIT_MS 5000

/* The scratch data directory (made once per process, emptied for every input). */
static char df_dir[128];

/* One file of the input. */
struct df_file {
    const uint8_t *p;
    size_t n;
    int present;
    uint64_t seq; /* log segments */
};

struct df_input {
    int repair;
    struct df_file manifest, snapshot, seg[DF_MAX_SEGS];
    size_t nseg;
    uint8_t *owned; /* bytes rewritten by the checksum fix-up */
};

/* Remove every file of the scratch directory. */
static void df_empty(void)
{
    DIR *d = opendir(df_dir);
    char path[512];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(path, sizeof path, "%s/%s", df_dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
}

/* Remove the scratch directory at exit. */
static void df_cleanup(void)
{
    df_empty();
    rmdir(df_dir);
}

/* Make the scratch directory, on tmpfs when there is one (fsync is then cheap). */
static void df_init(void)
{
    const char *tmp = getenv("TMPDIR");
    if (df_dir[0])
        return;
    snprintf(df_dir, sizeof df_dir, "%s/fuzz-durable-XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                                                                 : tmp && *tmp && strlen(tmp) < 64 ? tmp : "/tmp");
    if (!mkdtemp(df_dir))
        abort();
    atexit(df_cleanup);
}

/* Write a file of the scratch directory; aborts when it cannot. */
static void df_write(const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    FILE *fp;
    snprintf(path, sizeof path, "%s/%s", df_dir, name);
    fp = fopen(path, "wb");
    if (!fp || (n && fwrite(p, 1, n, fp) != n) || fclose(fp) != 0)
        abort();
}

/* Read a whole file; NULL when it is not there (*n its size). */
static uint8_t *df_read(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    struct stat sb;
    uint8_t *p;
    if (!fp)
        return NULL;
    if (fstat(fileno(fp), &sb) != 0 || !(p = malloc((size_t)sb.st_size + 1)))
        abort();
    *n = fread(p, 1, (size_t)sb.st_size, fp);
    fclose(fp);
    return p;
}

/* Rewrite the checksum of every record whose length fits, walking record by record. */
static void df_fix_crcs(uint8_t *p, size_t n)
{
    for (size_t at = 0; n - at >= PREC_HDR;) {
        uint32_t len = frame_len(p + at);
        if (len > n - at - PREC_HDR)
            return;
        frame_put_len(p + at + 4, (uint32_t)crc32(0L, p + at + PREC_HDR, (uInt)len));
        at += PREC_HDR + len;
    }
}

/* Split the input into files; 0, or -1 when it is not one. */
static int df_parse(const uint8_t *data, size_t size, struct df_input *in)
{
    struct df_file *order[2 + DF_MAX_SEGS];
    size_t nfiles = 0;
    uint8_t flags;
    memset(in, 0, sizeof *in);
    if (size < 1 || size > DF_MAX_INPUT)
        return -1;
    flags = data[0];
    in->repair = flags & 1;
    in->nseg = (flags >> 3) & 3;
    in->manifest.present = (flags & 2) != 0;
    in->snapshot.present = (flags & 4) != 0;
    if (in->manifest.present)
        order[nfiles++] = &in->manifest;
    if (in->snapshot.present)
        order[nfiles++] = &in->snapshot;
    for (size_t i = 0; i < in->nseg; i++) {
        in->seg[i].present = 1;
        in->seg[i].seq = i + (flags & 0x20 ? 2 : 1);
        order[nfiles++] = &in->seg[i];
    }
    if (!(in->owned = malloc(size)))
        abort();
    memcpy(in->owned, data + 1, size - 1);
    const uint8_t *p = in->owned, *end = in->owned + size - 1;
    for (size_t i = 0; i < nfiles; i++) {
        const uint8_t *sep = p < end ? memmem(p, (size_t)(end - p), "@@@@", 4) : NULL;
        const uint8_t *stop = sep && i + 1 < nfiles ? sep : end;
        order[i]->p = p;
        order[i]->n = (size_t)(stop - p);
        p = stop < end ? stop + 4 : end;
    }
    if (flags & 0x80) {
        if (in->snapshot.present)
            df_fix_crcs((uint8_t *)in->snapshot.p, in->snapshot.n);
        for (size_t i = 0; i < in->nseg; i++)
            df_fix_crcs((uint8_t *)in->seg[i].p, in->seg[i].n);
    }
    return 0;
}

/* Write the input's files into the emptied scratch directory. */
static void df_populate(const struct df_input *in)
{
    char name[64];
    df_empty();
    if (in->manifest.present)
        df_write("MANIFEST", in->manifest.p, in->manifest.n);
    if (in->snapshot.present)
        df_write("snapshot", in->snapshot.p, in->snapshot.n);
    for (size_t i = 0; i < in->nseg; i++) {
        snprintf(name, sizeof name, "log.%016" PRIx64, in->seg[i].seq);
        df_write(name, in->seg[i].p, in->seg[i].n);
    }
}

/* The kept copy of what --repair-log cut from segment seq (path.dropped.<time>), or NULL. */
static uint8_t *df_dropped(uint64_t seq, size_t *n)
{
    DIR *d = opendir(df_dir);
    char prefix[64], path[512];
    uint8_t *p = NULL;
    snprintf(prefix, sizeof prefix, "log.%016" PRIx64 ".dropped.", seq);
    for (struct dirent *e; d && !p && (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", df_dir, e->d_name);
        p = df_read(path, n);
    }
    if (d)
        closedir(d);
    return p;
}

/* Abort if an intact record starts at any offset from 'from' on in the n bytes at p. */
static void df_no_record_after(const uint8_t *p, size_t n, size_t from)
{
    for (size_t o = from; o < n; o++) {
        size_t at = o;
        struct prec r;
        if (prec_next(p, n, &at, &r) == PREC_OK)
            abort(); /* the loader dropped a valid record, and said nothing */
    }
}

/* Check one original segment against what recovery left of it (see the top of this file). */
static void df_check_segment(const struct df_input *in, const struct df_file *f)
{
    char path[512];
    size_t n = 0, kn = 0;
    uint8_t *now, *kept;
    compact_seg_path(df_dir, f->seq, path, sizeof path);
    now = df_read(path, &n);
    kept = df_dropped(f->seq, &kn);
    if (kept && !in->repair)
        abort(); /* only --repair-log keeps cut bytes */
    if (!now) {
        /* Set aside whole by --repair-log (after a cut in an earlier segment). */
        if (!kept || kn != f->n || memcmp(kept, f->p, kn) != 0)
            abort();
    } else if (n > f->n || memcmp(now, f->p, n) != 0) {
        abort(); /* recovery only ever cuts a segment short */
    } else if (n < f->n && kept) {
        if (kn != f->n - n || memcmp(kept, f->p + n, kn) != 0)
            abort(); /* the kept bytes are exactly the bytes cut */
    } else if (n < f->n) {
        df_no_record_after(f->p, f->n, n);
    }
    free(now);
    free(kept);
}

/* Check what an accepted recovery did to the directory. */
static void df_check_accepted(const struct df_input *in, const struct recover_span *span, int have_man,
                              const struct manifest_data *man)
{
    for (size_t i = 0; i < in->nseg; i++)
        if (in->seg[i].seq >= span->snap_next)
            df_check_segment(in, &in->seg[i]);
    if (in->repair || have_man != 1)
        return;
    /* Without --repair-log, everything the MANIFEST names was there. */
    if (man->snap_next && (!in->snapshot.present || span->snap_next < man->snap_next))
        abort();
    uint64_t from = man->first > span->snap_next ? man->first : span->snap_next;
    for (uint64_t seq = from ? from : 1; seq && seq <= man->last; seq++) { /* segments are numbered from 1 */
        int found = 0;
        for (size_t i = 0; i < in->nseg; i++)
            found |= in->seg[i].seq == seq;
        if (!found)
            abort();
    }
}

/* An order-independent digest of a server's keys, values and generations. */
struct df_digest {
    uint64_t sum, keys;
    const char *ns;
};

/* FNV-1a over n bytes, continuing from h. */
static uint64_t df_fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Add one key of the namespace being walked to the digest. */
static int df_digest_key(void *arg, const struct ks_entry *e)
{
    struct df_digest *d = arg;
    uint64_t h = df_fnv(0xcbf29ce484222325ull, d->ns, strlen(d->ns) + 1);
    h = df_fnv(h, &e->klen, sizeof e->klen);
    h = df_fnv(h, e->key, e->klen);
    d->sum += df_fnv(h, ks_val(e), e->vlen);
    d->keys++;
    return 0;
}

/* Add one namespace (its keys and generation) to the digest. */
static void df_digest_ns(struct ns *ns, void *arg)
{
    struct df_digest *d = arg;
    uint64_t gen = rdzv_generation(ns);
    d->ns = ns->name;
    ks_each(&ns->ks, df_digest_key, d);
    if (gen)
        d->sum += df_fnv(df_fnv(0x84222325cbf29ce4ull, ns->name, strlen(ns->name)), &gen, sizeof gen);
}

/* Start a server (no listener) with a quiet log; recovery options follow argv's first entries. */
static void df_server(struct server *srv, int repair, int with_dir)
{
    char *argv[] = {"musterd-fuzz", "--log-file", "/dev/null", "--log-level", "error", "--fsync", "never",
                    "--data-dir", df_dir, "--repair-log", NULL};
    int argc = with_dir ? 9 + repair : 7;
    if (daemon_init(srv, argc, argv) != -1)
        abort();
}

/* The digest of srv's state. */
static struct df_digest df_state(struct server *srv)
{
    struct df_digest d = {0, 0, NULL};
    ns_each(srv, df_digest_ns, &d);
    return d;
}

/* Start for real on the recovered directory, let compaction finish, close, recover again: same state. */
static void df_round_trip(int repair, struct df_digest want)
{
    struct server srv;
    struct recover_span span;
    struct df_digest got;
    df_server(&srv, repair, 1);
    if (persist_open(&srv) != 0)
        abort(); /* a directory that loaded once loads again */
    got = df_state(&srv);
    if (got.sum != want.sum || got.keys != want.keys)
        abort();
    for (int ms = 0; persist_compacting(&srv) && ms < DF_COMPACT_WAIT_MS; ms++) {
        struct timespec ts = {0, 1000000};
        event_base_loop(srv.base, EVLOOP_NONBLOCK);
        nanosleep(&ts, NULL);
    }
    daemon_fini(&srv);
    df_server(&srv, 0, 0);
    if (recover_dir(&srv, df_dir, 0, &span) != 0)
        abort(); /* what a start and a compaction left is whole */
    got = df_state(&srv);
    if (got.sum != want.sum || got.keys != want.keys)
        abort();
    daemon_fini(&srv);
}

/* Recover one input's directory and check the outcome. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct df_input in;
    struct server srv;
    struct recover_span span;
    struct manifest_data man;
    char why[256];
    int have_man, rc;
    if (df_parse(data, size, &in) != 0)
        return 0;
    df_init();
    df_populate(&in);
    have_man = manifest_read(df_dir, &man, why, sizeof why);
    df_server(&srv, in.repair, 0);
    rc = recover_dir(&srv, df_dir, in.repair, &span);
    if (rc == 0) {
        struct df_digest d = df_state(&srv);
        df_check_accepted(&in, &span, have_man, &man);
        daemon_fini(&srv);
        df_round_trip(in.repair, d);
    } else {
        daemon_fini(&srv);
    }
    free(in.owned);
    return 0;
}
