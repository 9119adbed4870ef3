/* Minimal JSON writer for the benchmark programs' stdout reports. */
#ifndef BENCH_JSON_H
#define BENCH_JSON_H

#include <stdint.h>
#include <stdio.h>

struct json {
    FILE *f;
    int depth;
    int first[16];  /* whether the next member at each depth is the first */
};

/* Start a top-level object on f. */
void json_begin(struct json *j, FILE *f);
/* Open a nested object member named key. */
void json_obj(struct json *j, const char *key);
/* Close the innermost object (the top-level one ends the document with a newline). */
void json_end(struct json *j);
/* A string member. */
void json_str(struct json *j, const char *key, const char *v);
/* An unsigned integer member. */
void json_u64(struct json *j, const char *key, uint64_t v);
/* A floating-point member (3 decimals; non-finite values become null). */
void json_dbl(struct json *j, const char *key, double v);
/* A boolean member. */
void json_bool(struct json *j, const char *key, int v);

#endif
