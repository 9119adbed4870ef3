/*
 * One UTF-8 decoder for everything that shows names clients chose (the
 * daemon's status outputs, store-server/escape.c; the CLI's terminal text,
 * client/cli/cli.c), so both agree on what is a valid, printable character.
 * Header only, libc free: included by the daemon and the CLI alike.
 */
#ifndef MUSTER_PROTO_UTF8_H
#define MUSTER_PROTO_UTF8_H

#include <stddef.h>

/* The length (1..4) of the valid UTF-8 character at p (NUL-terminated), its code point in *cp; 0 when p
 * starts no valid character (a stray or truncated byte, an overlong form, a surrogate, beyond U+10FFFF). */
static inline size_t utf8_decode(const unsigned char *p, unsigned *cp)
{
    static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
    size_t k = 0;
    if (p[0] < 0x80) {
        *cp = p[0];
        return 1;
    }
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        k = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        k = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        k = 4;
    unsigned v = k == 2 ? p[0] & 0x1fu : k == 3 ? p[0] & 0x0fu : p[0] & 0x07u;
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3fu);
    }
    if (k == 0 || v < least[k] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return k;
}

/* Whether a code point is a control character: C0, DEL or C1 (which some terminals obey). */
static inline int utf8_control(unsigned cp)
{
    return cp < 0x20 || (cp >= 0x7f && cp < 0xa0);
}

#endif
