/* Minimal JSON writer for the benchmark programs' stdout reports. */
#include "json.h"

#include <math.h>

/* Write the separator and the quoted key of the next member. */
static void json_key(struct json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = 0;
    fputc('"', j->f);
    for (const char *p = key; *p; p++)
        fputc(*p, j->f);
    fputs("\":", j->f);
}

/* Start a top-level object on f. */
void json_begin(struct json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = 1;
    fputc('{', f);
}

/* Open a nested object member named key. */
void json_obj(struct json *j, const char *key)
{
    json_key(j, key);
    fputc('{', j->f);
    if (j->depth < 15)
        j->depth++;
    j->first[j->depth] = 1;
}

/* Close the innermost object (the top-level one ends the document with a newline). */
void json_end(struct json *j)
{
    fputc('}', j->f);
    if (j->depth == 0)
        fputc('\n', j->f);
    else
        j->depth--;
}

/* A string member (control characters and quotes escaped). */
void json_str(struct json *j, const char *key, const char *v)
{
    json_key(j, key);
    fputc('"', j->f);
    for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(j->f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(j->f, "\\u%04x", *p);
        else
            fputc(*p, j->f);
    }
    fputc('"', j->f);
}

/* An unsigned integer member. */
void json_u64(struct json *j, const char *key, uint64_t v)
{
    json_key(j, key);
    fprintf(j->f, "%llu", (unsigned long long)v);
}

/* A floating-point member (3 decimals; non-finite values become null). */
void json_dbl(struct json *j, const char *key, double v)
{
    json_key(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.3f", v);
    else
        fputs("null", j->f);
}

/* A boolean member. */
void json_bool(struct json *j, const char *key, int v)
{
    json_key(j, key);
    fputs(v ? "true" : "false", j->f);
}
