/*
 * TCP liveness.  Without it a peer that vanishes (power loss, a cut link,
 * a black-holed route: no FIN, no RST) leaves an idle connection open for
 * the kernel's defaults, about 2 h 11 min, and one with unacknowledged
 * data retransmitting for about 15 min.  Both ends derive the settings
 * from the rendezvous heartbeat timeout, so the socket gives up on a lost
 * peer on the same time scale as the heartbeats do: the first probe after
 * half the timeout, then two more a quarter apart.
 */
#include "tcpka.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

/* Make fd notice a vanished peer within about ms when idle (keepalive probes), and give up on data
 * unacknowledged for user_ms (TCP_USER_TIMEOUT); ms 0 leaves fd as it is.  0, or -1 (errno). */
int tcpka_set(int fd, uint32_t ms, uint32_t user_ms)
{
    if (!ms)
        return 0;
    int on = 1, idle = (int)(ms / 2000), intvl = (int)(ms / 4000), cnt = 2;
    unsigned user = user_ms;
    idle = idle < 1 ? 1 : idle;
    intvl = intvl < 1 ? 1 : intvl;
    if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl) != 0 ||
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt) != 0)
        return -1;
    return user_ms ? setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user, sizeof user) : 0;
}
