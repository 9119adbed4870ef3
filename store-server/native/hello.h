/* Hello: version, namespace and token checks, the token backoff's held hellos, and HelloReply. */
#ifndef MUSTERD_HELLO_H
#define MUSTERD_HELLO_H

#include "muster.pb-c.h"

struct conn;

/* What became of a hello. */
enum { HELLO_DONE = 0, HELLO_HELD = 1, HELLO_REFUSED = 2 };

/* Handle the hello frame f: HELLO_HELD when c keeps f until its address's wait is over (its input
 * waits too), else HELLO_DONE (answered, f still the caller's). */
int hello_handle(struct conn *c, Muster__ClientFrame *f);
/* A connection closed: drop its held hello and the hello's timer. */
void hello_conn_closed(struct conn *c);

#endif
