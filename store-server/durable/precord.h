/* Durable records: the framing (length, crc32, body) shared by the log segments, the snapshot and the
 * --ha log and snapshots, and telling a torn tail from damage. */
#ifndef MUSTERD_PRECORD_H
#define MUSTERD_PRECORD_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;
struct record;

/* What a record says: set (key, value), delete (key), generation (gen), drop (the namespace, its keys and
 * counter, is gone); a snapshot's first record (begin: id = the first segment it does not cover) and last
 * (end: id = the records between). */
enum prec_kind { PREC_SET = 1, PREC_DEL = 2, PREC_GEN = 3, PREC_SNAP_BEGIN = 4, PREC_SNAP_END = 5, PREC_DROP = 6 };

/* Bytes of a record header: big-endian body length, then the body's zlib crc32. */
#define PREC_HDR 8
/* The largest body a reader accepts (a value, its key and framing). */
#define PREC_MAX_BODY (UINT32_C(1) << 30)

/* A decoded record.  key and val point into the decoded message (valid until prec_free); a key may
 * hold any byte, NUL included. */
struct prec {
    enum prec_kind kind;
    char ns[256]; /* NUL-terminated */
    const char *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
    uint64_t gen, id;
    void *msg;    /* the unpacked body (prec_free frees it) */
    int legacy;   /* the body was the first format's wire Request */
};

/* What reading one record found: OK; EOF at a record boundary; BAD (cut short, impossible length or
 * checksum mismatch: torn or damaged, prec_tail_torn tells which); CORRUPT (undecodable although its
 * checksum matched). */
enum prec_read { PREC_OK, PREC_EOF, PREC_BAD, PREC_CORRUPT };

/* Append one framed record to out; 0, or -1 when memory ran out. */
int prec_put(struct evbuffer *out, enum prec_kind kind, const char *ns, size_t nslen, uint64_t id, const char *key,
             size_t klen, const uint8_t *val, size_t vlen, uint64_t gen);
/* Append r as one framed record (id: the log's number for it, 0 in a snapshot); 0, or -1 when memory ran
 * out or r is out of bounds. */
int prec_put_record(struct evbuffer *out, uint64_t id, const struct record *r);
/* View p as a record (pointing into p, valid until prec_free); whether p is one (set, delete, generation,
 * drop), not a snapshot's framing. */
int prec_record(const struct prec *p, struct record *r);
/* Read the record at *at of the n bytes at p into *r, moving *at past it when OK. */
enum prec_read prec_next(const uint8_t *p, size_t n, size_t *at, struct prec *r);
/* Whether a bad record at offset at of the n bytes at p is a torn tail (see precord.c). */
int prec_tail_torn(const uint8_t *p, size_t n, size_t at);
/* Free what prec_next allocated in r. */
void prec_free(struct prec *r);

/* How reading a file ended (prec_read_file). */
struct prec_end {
    long at;         /* offset of the torn or damaged record (the bytes before it are whole records) */
    long long size;  /* the file's size */
    char why[256];   /* what was found, for a message */
};
/* Call fn on each record of path.  0: all read; 1: it ends in a torn record at end->at; -1: it cannot
 * be read, or is damaged (end->at >= 0: from there on) or fn refused a record, with end->why filled. */
int prec_read_file(const char *path, int (*fn)(void *arg, const struct prec *r), void *arg, struct prec_end *end);

#endif
