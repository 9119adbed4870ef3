/* Standard base64 (RFC 4648, with padding), for etcd's JSON gateway. */
#ifndef MUSTERD_B64_H
#define MUSTERD_B64_H

#include <stddef.h>
#include <stdint.h>

/* Encode n bytes of p into out (4 * ((n + 2) / 3) + 1 bytes, NUL-terminated). */
void b64_encode(char *out, const void *p, size_t n);
/* Decode len characters of s into out (len / 4 * 3 bytes); the byte count, or -1 when malformed. */
long b64_decode(uint8_t *out, const char *s, size_t len);

#endif
