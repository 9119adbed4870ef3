/*
 * MANIFEST: a few lines of text naming what the data directory must hold -
 * the snapshot (by the first segment it does not cover) and the range of
 * log segments after it.  Without it, a deleted snapshot or a deleted
 * oldest segment looked like a directory that never had them, and recovery
 * started silently with part of the state.  It is replaced atomically
 * (written to MANIFEST.tmp, fsynced, renamed over, directory fsynced)
 * whenever that changes: a new segment (the writer thread), a new snapshot
 * (the compactor thread, before it deletes the segments it folded), and at
 * every start.  Each change is made after the file it names exists, so a
 * crash between the two leaves a directory that holds more than its
 * manifest says, never less.
 */
#include "manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compact.h"

/* The first line, naming the format. */
#define MANIFEST_MAGIC "muster-data-dir 1"

struct manifest {
    pthread_mutex_t mu;
    char *dir;
    struct manifest_data m;
};

/* Read dir's MANIFEST into *m (see manifest.h). */
int manifest_read(const char *dir, struct manifest_data *m, char *why, size_t whylen)
{
    char path[4096], text[512];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    memset(m, 0, sizeof *m);
    FILE *fp = fopen(path, "re");
    if (!fp && errno == ENOENT)
        return 0;
    if (!fp) {
        snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = 0;
    char tail;
    /* Segments are numbered from 1, and every MANIFEST written names at least one: a first segment 0
     * is damage, and taken at its word it would excuse every missing segment before last. */
    if (sscanf(text, MANIFEST_MAGIC "\nsnapshot %" SCNx64 "\nsegments %" SCNx64 " %" SCNx64 "\n%c", &m->snap_next,
               &m->first, &m->last, &tail) != 3 ||
        m->first == 0 || m->first > m->last) {
        snprintf(why, whylen, "%s is malformed", path);
        return -1;
    }
    return 1;
}

/* Replace dir's MANIFEST with m: temp file, fsync, rename, fsync the directory; 0, or an errno. */
static int manifest_write(const char *dir, const struct manifest_data *m)
{
    char path[4096], tmp[4200], text[256];
    snprintf(path, sizeof path, "%s/MANIFEST", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int len = snprintf(text, sizeof text, MANIFEST_MAGIC "\nsnapshot %016" PRIx64 "\nsegments %016" PRIx64
                       " %016" PRIx64 "\n", m->snap_next, m->first, m->last);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno;
    int ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
    int err = ok ? 0 : errno ? errno : EIO;
    close(fd);
    if (!err && (rename(tmp, path) != 0 || compact_sync_dir(dir) != 0))
        err = errno ? errno : EIO;
    if (err)
        unlink(tmp);
    return err;
}

/* The live manifest of dir, starting from m, written at once; NULL on failure (errno set). */
struct manifest *manifest_open(const char *dir, const struct manifest_data *m)
{
    struct manifest *mf = calloc(1, sizeof *mf);
    int err = mf && (mf->dir = strdup(dir)) ? manifest_write(dir, m) : ENOMEM;
    if (err) {
        if (mf)
            free(mf->dir);
        free(mf);
        errno = err;
        return NULL;
    }
    pthread_mutex_init(&mf->mu, NULL);
    mf->m = *m;
    return mf;
}

/* Write mf with next in place of its data, keeping the old data when that fails; 0, or an errno. */
static int manifest_change(struct manifest *mf, const struct manifest_data *next)
{
    int err = manifest_write(mf->dir, next);
    if (!err)
        mf->m = *next;
    return err;
}

/* A new segment seq was created (the writer thread); 0, or an errno. */
int manifest_set_last(struct manifest *mf, uint64_t seq)
{
    pthread_mutex_lock(&mf->mu);
    struct manifest_data next = mf->m;
    next.last = seq;
    int err = manifest_change(mf, &next);
    pthread_mutex_unlock(&mf->mu);
    return err;
}

/* A snapshot covering every segment before next is in place (the compactor thread); 0, or an errno. */
int manifest_set_snapshot(struct manifest *mf, uint64_t next_seq)
{
    pthread_mutex_lock(&mf->mu);
    struct manifest_data next = mf->m;
    next.snap_next = next_seq;
    if (next.first < next_seq)
        next.first = next_seq;
    int err = manifest_change(mf, &next);
    pthread_mutex_unlock(&mf->mu);
    return err;
}

/* Free; NULL is fine. */
void manifest_close(struct manifest *mf)
{
    if (!mf)
        return;
    pthread_mutex_destroy(&mf->mu);
    free(mf->dir);
    free(mf);
}
