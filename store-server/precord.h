/* Durable records: the framing (length, crc32, body) shared by the log segments and the snapshot. */
#ifndef MUSTERD_PRECORD_H
#define MUSTERD_PRECORD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "muster.pb-c.h"

struct evbuffer;

/* What a record says.  The body after the kind and namespace is a packed Request whose op
 * carries the data: set (key, value), delete (key), rdzv_heartbeat (generation); the snapshot's
 * first and last records use ping and carry the next segment / the record count in the id. */
enum prec_kind { PREC_SET = 1, PREC_DEL = 2, PREC_GEN = 3, PREC_SNAP_BEGIN = 4, PREC_SNAP_END = 5 };

/* Bytes of a record header: big-endian body length, then the body's zlib crc32. */
#define PREC_HDR 8
/* The largest body a reader accepts (a value, its key and framing). */
#define PREC_MAX_BODY (UINT32_C(1) << 30)

/* A decoded record: kind, namespace (NUL-terminated) and the unpacked request (caller frees). */
struct prec {
    enum prec_kind kind;
    char ns[256];
    Muster__Request *req;
};

/* What reading one record found. */
enum prec_read { PREC_OK, PREC_EOF, PREC_TORN, PREC_CORRUPT };

/* Append one framed record to out; 0, or -1 when memory ran out. */
int prec_put(struct evbuffer *out, enum prec_kind kind, const char *ns, size_t nslen, uint64_t id, const char *key,
             size_t klen, const uint8_t *val, size_t vlen, uint64_t gen);
/* Read the next record from fp into *r: OK, EOF at a record boundary, TORN (short or bad checksum at
 * the end of the file) or CORRUPT (undecodable although its checksum matched). */
enum prec_read prec_get(FILE *fp, struct prec *r);
/* Free what prec_get allocated in r. */
void prec_free(struct prec *r);
/* Call fn on each record of path; returns 0, 1 when the file ends in a torn record (*good gets the
 * offset after the last whole record), or -1 with why filled when it cannot be read or is corrupt. */
int prec_read_file(const char *path, int (*fn)(void *arg, const struct prec *r), void *arg, long *good, char *why,
                   size_t whylen);

#endif
