/* Request templates: the bytes of one request, packed once, with a request id and a key
 * number patched in per send, so the load generator costs a memcpy per request. */
#ifndef BENCH_TMPL_H
#define BENCH_TMPL_H

#include <stddef.h>
#include <stdint.h>

#define TMPL_NONE ((size_t)-1)
#define TMPL_DIGITS 8

/* Reply shapes: a native frame, or one of TCPStore's untagged replies. */
enum reply_kind { RK_NONE, RK_FRAME, RK_U8, RK_U32, RK_I64, RK_BYTES };

struct tmpl {
    uint8_t *buf;
    size_t len;
    size_t id_off;    /* 9-byte varint request id, or TMPL_NONE */
    size_t key_off;   /* TMPL_DIGITS decimal digits, or TMPL_NONE */
    uint8_t reply;    /* enum reply_kind */
};

/* Copy t to out (t->len bytes) with id and key number patched in. */
void tmpl_emit(const struct tmpl *t, uint8_t *out, uint64_t id, uint32_t keynum);
/* Locate the placeholder key digits in t (after packing); returns 0 or -1. */
int tmpl_find_key(struct tmpl *t, const char *key);
/* Free a template's bytes. */
void tmpl_free(struct tmpl *t);

#endif
