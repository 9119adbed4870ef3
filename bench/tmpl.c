/* Request templates: the bytes of one request, packed once, with a request id and a key
 * number patched in per send, so the load generator costs a memcpy per request. */
#include "tmpl.h"

#include <stdlib.h>
#include <string.h>

/* Copy t to out (t->len bytes) with id and key number patched in. */
void tmpl_emit(const struct tmpl *t, uint8_t *out, uint64_t id, uint32_t keynum)
{
    memcpy(out, t->buf, t->len);
    if (t->id_off != TMPL_NONE) {
        /* Ids are kept in [2^56, 2^63) so that their varint is always 9 bytes. */
        uint8_t *p = out + t->id_off;
        for (int i = 0; i < 8; i++, id >>= 7)
            p[i] = (uint8_t)(0x80u | (id & 0x7fu));
        p[8] = (uint8_t)(id & 0x7fu);
    }
    if (t->key_off != TMPL_NONE) {
        uint8_t *p = out + t->key_off + TMPL_DIGITS;
        for (int i = 0; i < TMPL_DIGITS; i++, keynum /= 10)
            *--p = (uint8_t)('0' + keynum % 10);
    }
}

/* Locate the placeholder key digits in t (after packing); returns 0 or -1. */
int tmpl_find_key(struct tmpl *t, const char *key)
{
    size_t klen = strlen(key);
    const uint8_t *hit = memmem(t->buf, t->len, key, klen);
    if (!hit || klen < TMPL_DIGITS)
        return -1;
    t->key_off = (size_t)(hit - t->buf) + klen - TMPL_DIGITS;
    return 0;
}

/* Free a template's bytes. */
void tmpl_free(struct tmpl *t)
{
    free(t->buf);
    t->buf = NULL;
    t->len = 0;
}
