/* Escaping of names that clients chose (namespaces, node ids, causes) for each output that shows them:
 * JSON strings, terminal text and Prometheus label values. */
#ifndef MUSTERD_ESCAPE_H
#define MUSTERD_ESCAPE_H

#include <stddef.h>

struct evbuffer;

/* Append s as a JSON string literal: quotes, backslashes and control characters escaped, a byte of
 * invalid UTF-8 as the text \xNN (as the JSON log writes it). */
void escape_json(struct evbuffer *b, const char *s);
/* Write s into out (n bytes, NUL-terminated) as terminal text: backslash, control characters and
 * invalid UTF-8 as \\, \n, \t, \r, \xNN or \u00NN, cut before an escape or a character that would
 * not fit; returns the length written. */
size_t escape_text(char *out, size_t n, const char *s);
/* Append s as a Prometheus label value (without its quotes): backslash, double quote and newline as
 * the exposition format escapes them; other control characters and invalid UTF-8 as the text \xNN
 * (an escaped backslash, so the value a scraper reads is that text). */
void escape_label(struct evbuffer *b, const char *s);

#endif
