/*
 * The TCPStore wire codec, shared by musterd's TCPStore listener
 * (store-server/tcpstore/tcpstore*.c) and the relay of `muster run`
 * (client/launcher/run_relay*.c): the two numberings, each op's request grammar,
 * the incremental request decoder with its limits, and reply encoding.
 * Each side keeps its own dispatch, connections and counters; this file has
 * no dependency but libc, so the launcher links it without the daemon's libevent.
 */
#ifndef MUSTER_TSCODEC_H
#define MUSTER_TSCODEC_H

#include <stddef.h>
#include <stdint.h>

/* The VALIDATE handshake's magic; on the wire (little-endian) CE F7 85 3C. */
#define TS_MAGIC 0x3C85F7CEu
/* Bytes that identify the VALIDATE era: the type byte 0 and the magic. */
#define TS_HANDSHAKE_LEN 5
/* Fields of the longest grammar (compare_set: key, expected, desired). */
#define TS_MAX_FIELDS 3

/* Operations.  A VALIDATE-era type byte is its op's value (0..18); the
 * older numbering is mapped by tscodec_op. */
enum ts_op {
    TS_VALIDATE,
    TS_SET,
    TS_COMPARE_SET,
    TS_GET,
    TS_ADD,
    TS_CHECK,
    TS_WAIT,
    TS_GETNUMKEYS,
    TS_DELETE_KEY,
    TS_APPEND,
    TS_MULTI_GET,
    TS_MULTI_SET,
    TS_CANCEL_WAIT,
    TS_PING,
    TS_QUEUE_PUSH,
    TS_QUEUE_POP,
    TS_QUEUE_LEN,
    TS_LIST_KEYS,
    TS_BARRIER,
    TS_WATCH_KEY, /* old numbering only */
    TS_NOPS
};

/* Which numbering a connection speaks, known from its first bytes. */
enum ts_era { TS_ERA_UNKNOWN, TS_ERA_VALIDATE, TS_ERA_LEGACY };

/* The one-byte answers (CheckResponseType, WaitResponseType). */
enum { TS_READY = 0, TS_NOT_READY = 1, TS_STOP_WAITING = 0, TS_WAIT_CANCELED = 1 };

/* The first byte of a WATCH_KEY answer or callback frame (torch 1.x's WatchResponseType). */
enum { TS_KEY_UPDATED = 0, TS_KEY_CREATED = 1, TS_KEY_DELETED = 2, TS_KEY_CALLBACK_REGISTERED = 3 };

/* A length-prefixed string taken from a request: malloc'd, NUL-terminated (len excludes the NUL). */
struct ts_blob {
    uint8_t *p;
    size_t len;
};

/* A request being decoded, then handled; strings are the request's own (a handler may take them). */
struct ts_req {
    int op;         /* enum ts_op; -1 before the type byte is taken */
    uint8_t code;   /* the type byte as sent */
    unsigned field; /* next field of the op's grammar */
    int have_len;   /* the current string's length has been taken */
    uint64_t len;   /* that length */
    uint64_t bytes; /* request bytes taken so far */
    uint32_t u32;
    int64_t i64;
    struct ts_blob b[TS_MAX_FIELDS]; /* the single KEY / VALUE fields, in order */
    unsigned nb;
    size_t n;       /* list length (KEYS) or pairs (PAIRS) */
    size_t got;     /* list strings taken (a pair counts two) */
    char **keys;    /* list keys */
    size_t *klens;
    uint8_t **vals; /* list values (PAIRS) */
    size_t *vlens;
};

/* The bounds a request is decoded under; each that trips is its own error. */
struct tscodec_limits {
    uint64_t max_key;     /* bytes of one key */
    uint64_t max_value;   /* bytes of one value (UINT64_MAX: only max_request bounds it) */
    uint64_t max_keys;    /* keys (or pairs) of one list */
    uint64_t max_request; /* bytes of one request, type byte and lengths included */
};

/* What a decoding step did. */
enum tscodec_result { TSC_MORE, TSC_DONE, TSC_ERROR };

/* Why a request was refused: each side counts them under its own names. */
enum tscodec_err {
    TSC_ERR_NONE,
    TSC_ERR_BAD,     /* a type byte the numbering does not have */
    TSC_ERR_KEY,     /* a key over max_key */
    TSC_ERR_VALUE,   /* a value over max_value */
    TSC_ERR_KEYS,    /* a list over max_keys */
    TSC_ERR_REQUEST, /* the request over max_request */
    TSC_ERR_NOMEM,
};

/* A refusal: its kind and the sentence a log or stderr shows. */
struct tscodec_error {
    enum tscodec_err code;
    char why[160];
};

/* A buffer the decoder reads through when the bytes are not one span (the daemon's evbuffer). */
struct tscodec_buf_ops {
    size_t (*len)(void *buf);                       /* bytes held */
    void (*copy)(void *buf, void *dst, size_t n);   /* copy n from the front, leaving them */
    void (*take)(void *buf, void *dst, size_t n);   /* move n from the front */
};

/* Request bytes to decode: a span (taken from its front), or else a buffer read through ops. */
struct tscodec_src {
    const uint8_t *p; /* the span, or NULL: read buf */
    size_t n;         /* bytes left in the span */
    void *buf;
    const struct tscodec_buf_ops *ops;
};

/* Where replies go: put appends n bytes to arg's output. */
struct tscodec_sink {
    void (*put)(void *arg, const void *p, size_t n);
    void *arg;
};

/* A growable byte buffer of replies; oom is set, and bytes dropped, once it cannot grow. */
struct tscodec_out {
    uint8_t *p;
    size_t len, cap;
    int oom;
};

/* The op of type byte code in era, or -1 when the numbering has no such code. */
int tscodec_op(enum ts_era era, uint8_t code);
/* The op's name, for messages ("?" out of range). */
const char *tscodec_name(int op);
/* Bytes src holds. */
size_t tscodec_avail(const struct tscodec_src *src);
/* Copy n bytes from the front of src without taking them (src holds at least n). */
void tscodec_peek(const struct tscodec_src *src, void *dst, size_t n);
/* Decide the numbering from src's first bytes into *era; 0 when known, else the bytes needed. */
size_t tscodec_detect(const struct tscodec_src *src, enum ts_era *era);
/* What a connection with a parked WAIT or BARRIER does with the next request at the front of src: the
 * rule every TCPStore server here keeps (the listener and the relay). */
enum tscodec_parked { TSC_PARKED_HOLD, TSC_PARKED_DECODE, TSC_PARKED_ABANDON };
/* HOLD: leave it unread until the park ends (VALIDATE-era clients send only CANCEL_WAIT behind a wait);
 * DECODE: CANCEL_WAIT goes ahead of the park; ABANDON: an old-numbering client (no CANCEL_WAIT, never
 * pipelining) that sends anything gave up on its wait, which is dropped without an answer, and the
 * request is decoded.  src holds at least one byte. */
enum tscodec_parked tscodec_parked_next(enum ts_era era, const struct tscodec_src *src);
/* Take request bytes from src into r; TSC_MORE sets *want (bytes src must hold), TSC_ERROR fills *err. */
enum tscodec_result tscodec_step(struct ts_req *r, enum ts_era era, const struct tscodec_limits *lim,
                                 struct tscodec_src *src, size_t *want, struct tscodec_error *err);
/* Free what a request holds and make it empty (op -1), ready for the next. */
void tscodec_reset(struct ts_req *r);

/* Write v little-endian into 8 bytes. */
void tscodec_le64(uint8_t *b, uint64_t v);
/* Send raw bytes. */
void tscodec_put(const struct tscodec_sink *s, const void *p, size_t n);
/* Send one byte. */
void tscodec_put_u8(const struct tscodec_sink *s, uint8_t v);
/* Send a little-endian u32 (PING's echo). */
void tscodec_put_u32(const struct tscodec_sink *s, uint32_t v);
/* Send a little-endian 64-bit integer. */
void tscodec_put_i64(const struct tscodec_sink *s, int64_t v);
/* Send a u64 length and the bytes. */
void tscodec_put_blob(const struct tscodec_sink *s, const void *p, size_t n);
/* Send a WATCH_KEY callback frame (the old numbering's, as torch 1.13's server sends it): its type says a
 * delete (deleted), or a write to a key that existed (was_present: KEY_UPDATED) or not (KEY_CREATED); then
 * the key, the old value and the new value, each a u64 length and bytes.  The listener and the relay both
 * send every frame through this. */
void tscodec_put_watch_frame(const struct tscodec_sink *s, int deleted, int was_present, const void *key,
                             size_t klen, const void *old, size_t olen, const void *new_, size_t nlen);
/* A sink that appends to o. */
struct tscodec_sink tscodec_out_sink(struct tscodec_out *o);
/* Append raw bytes to o. */
void tscodec_out_put(struct tscodec_out *o, const void *p, size_t n);

#endif
