/* TCPStore's binary protocol for the load generator: both numberings, templates, replies. */
#ifndef BENCH_TSPROTO_H
#define BENCH_TSPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "loadgen.h"

/* TCPStore commands the generator uses (index into the command table). */
enum ts_cmd { TS_VALIDATE, TS_SET, TS_GET, TS_ADD, TS_CHECK, TS_WAIT, TS_NUMKEYS, TS_PING, TS_N };

/* Build the template of cmd for key text key (may be NULL) and an optional value. */
int tsproto_tmpl_cmd(enum ts_cmd cmd, int old, const char *key, const uint8_t *val, size_t vlen, struct tmpl *t);
/* Build the template of one request; its key is spec->key followed by 8 patched digits. */
int tsproto_tmpl(const struct opspec *spec, int old, struct tmpl *t);
/* Parse one reply of shape kind at p; returns bytes consumed, 0 when incomplete, -1 when bad. */
ssize_t tsproto_parse(int kind, const uint8_t *p, size_t n, struct reply *r);
/* Bytes of a request that stops half way (out has room for 16); returns the count. */
size_t tsproto_stall(int old, uint8_t *out);
/* Tell the numbering a connected socket's server speaks: 1 old, 0 VALIDATE era, -1 unknown. */
int tsproto_probe(int fd, int ms);

#endif
