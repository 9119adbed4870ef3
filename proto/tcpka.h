/* TCP liveness settings shared by daemon and client: keepalive probes and TCP_USER_TIMEOUT. */
#ifndef MUSTER_TCPKA_H
#define MUSTER_TCPKA_H

#include <stdint.h>

/* Make fd notice a vanished peer within about ms when idle (keepalive probes), and give up on data
 * unacknowledged for user_ms (TCP_USER_TIMEOUT); ms 0 leaves fd as it is.  0, or -1 (errno). */
int tcpka_set(int fd, uint32_t ms, uint32_t user_ms);

#endif
