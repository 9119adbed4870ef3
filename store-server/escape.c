/*
 * Names that clients choose - namespaces, node ids, the causes of a report -
 * reach an operator's terminal (`muster status`, /v1/jobs?format=text), a
 * browser and scripts (the JSON) and Prometheus (/metrics label values).
 * Printed raw, an ESC sequence would retitle or recolour the terminal and a
 * newline would add a fake row or series.  Each output kind has one escaping
 * function here; all of them pass valid, printable UTF-8 through unchanged
 * and treat C1 controls (U+0080..U+009F, which some terminals obey) as
 * control characters.
 */
#include "escape.h"

#include <event2/buffer.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

/* Append s as a JSON string literal: quotes, backslashes and control characters escaped, a byte of
 * invalid UTF-8 as the text \xNN (as the JSON log writes it). */
void escape_json(struct evbuffer *b, const char *s)
{
    evbuffer_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned cp;
        size_t k = utf8_decode(p, &cp);
        if (k == 0) /* as the JSON log writes one: valid UTF-8, and different names stay distinct */
            evbuffer_add_printf(b, "\\\\x%02x", *p);
        else if (cp == '"' || cp == '\\')
            evbuffer_add_printf(b, "\\%c", (char)cp);
        else if (utf8_control(cp))
            evbuffer_add_printf(b, "\\u%04x", cp);
        else
            evbuffer_add(b, p, k);
        p += k ? k : 1;
    }
    evbuffer_add(b, "\"", 1);
}

/* The terminal-text form of the character at p (k bytes, code point cp; k 0 for an invalid byte) into
 * esc (at least 16 bytes); returns its length. */
static size_t escape_text_one(const unsigned char *p, size_t k, unsigned cp, char *esc)
{
    if (k == 0)
        return (size_t)snprintf(esc, 16, "\\x%02x", p[0]);
    if (cp == '\\' || cp == '\n' || cp == '\t' || cp == '\r')
        return (size_t)snprintf(esc, 16, "\\%c", cp == '\\' ? '\\' : cp == '\n' ? 'n' : cp == '\t' ? 't' : 'r');
    if (utf8_control(cp))
        return (size_t)snprintf(esc, 16, cp < 0x80 ? "\\x%02x" : "\\u%04x", cp);
    memcpy(esc, p, k);
    return k;
}

/* Write s into out (n bytes, NUL-terminated) as terminal text: backslash, control characters and
 * invalid UTF-8 as \\, \n, \t, \r, \xNN or \u00NN, cut before an escape or a character that would
 * not fit; returns the length written. */
size_t escape_text(char *out, size_t n, const char *s)
{
    size_t used = 0;
    if (n == 0)
        return 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned cp = 0;
        char esc[16];
        size_t k = utf8_decode(p, &cp);
        size_t el = escape_text_one(p, k, cp, esc);
        /* Cut whole: half an escape or half a character would itself be a control or invalid byte. */
        if (used + el >= n)
            break;
        memcpy(out + used, esc, el);
        used += el;
        p += k ? k : 1;
    }
    out[used] = '\0';
    return used;
}

/* Append s as a Prometheus label value (without its quotes): backslash, double quote and newline as
 * the exposition format escapes them; other control characters and invalid UTF-8 as the text \xNN
 * (an escaped backslash, so the value a scraper reads is that text). */
void escape_label(struct evbuffer *b, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned cp;
        size_t k = utf8_decode(p, &cp);
        /* The format defines no other escape, and a label value must be UTF-8. */
        if (k == 0)
            evbuffer_add_printf(b, "\\\\x%02x", p[0]);
        else if (cp == '\\' || cp == '"')
            evbuffer_add_printf(b, "\\%c", (char)cp);
        else if (cp == '\n')
            evbuffer_add(b, "\\n", 2);
        else if (utf8_control(cp))
            evbuffer_add_printf(b, cp < 0x80 ? "\\\\x%02x" : "\\\\u%04x", cp);
        else
            evbuffer_add(b, p, k);
        p += k ? k : 1;
    }
}
