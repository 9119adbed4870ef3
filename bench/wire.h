/* The muster native protocol for the load generator: request templates packed with the
 * generated protobuf-c code, and an allocation-free scanner for ServerFrames. */
#ifndef BENCH_WIRE_H
#define BENCH_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loadgen.h"

/* Request ids live in [2^56, 2^63): their varint is always 9 bytes, so templates patch in place. */
#define WIRE_ID_BASE (1ull << 56)

/* Build the Hello template for namespace ns. */
int wire_hello(const char *ns, struct tmpl *t);
/* Build the template of one request; its key is spec->key followed by 8 patched digits. */
int wire_tmpl(const struct opspec *spec, struct tmpl *t);
/* Parse one ServerFrame at p; returns bytes consumed, 0 when incomplete, -1 when malformed. */
ssize_t wire_parse(const uint8_t *p, size_t n, struct reply *r);
/* Bytes of a frame that stops half way (out has room for 16); returns the count. */
size_t wire_stall(uint8_t *out);

#endif
