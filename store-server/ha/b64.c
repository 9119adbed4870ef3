/*
 * Base64 for etcd's JSON gateway, which carries keys and values in it.
 * Written here rather than taken from libcrypto so that musterd links no
 * OpenSSL at all unless its TLS module is loaded (see tls.c).
 */
#include "b64.h"

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Encode n bytes of p into out, padded with '=' and NUL-terminated. */
void b64_encode(char *out, const void *p, size_t n)
{
    const uint8_t *in = p;
    size_t i = 0;
    for (; i + 2 < n; i += 3, out += 4) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[0] = b64_alphabet[v >> 18];
        out[1] = b64_alphabet[v >> 12 & 63];
        out[2] = b64_alphabet[v >> 6 & 63];
        out[3] = b64_alphabet[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
        out[0] = b64_alphabet[v >> 18];
        out[1] = b64_alphabet[v >> 12 & 63];
        out[2] = i + 1 < n ? b64_alphabet[v >> 6 & 63] : '=';
        out[3] = '=';
        out += 4;
    }
    *out = 0;
}

/* The 6-bit value of a base64 character, or -1. */
static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decode len characters (a multiple of 4; '=' only at the end) into out; the byte count, or -1. */
long b64_decode(uint8_t *out, const char *s, size_t len)
{
    if (len % 4)
        return -1;
    long got = 0;
    for (size_t i = 0; i < len; i += 4) {
        int pad = (s[i + 3] == '=') + (s[i + 3] == '=' && s[i + 2] == '=');
        if (pad && i + 4 != len)
            return -1;
        uint32_t v = 0;
        for (int k = 0; k < 4; k++) {
            int d = k >= 4 - pad ? 0 : b64_value(s[i + k]);
            if (d < 0)
                return -1;
            v = v << 6 | (uint32_t)d;
        }
        out[got++] = (uint8_t)(v >> 16);
        if (pad < 2)
            out[got++] = (uint8_t)(v >> 8);
        if (pad < 1)
            out[got++] = (uint8_t)v;
    }
    return got;
}
