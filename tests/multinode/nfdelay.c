/*
 * nfdelay: hold every packet of one NFQUEUE for a fixed time, then let it
 * go, in arrival order.  The multinode test's stand-in for netem's delay
 * (this kernel has no netem): each network namespace sends its output
 * through `iptables -j NFQUEUE --queue-bypass` to one nfdelay, so a link
 * gets that much one-way latency.  Runs until SIGTERM or SIGINT, then lets
 * everything held go.
 * Usage: nfdelay QUEUE DELAY_MS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* Packets held at once; past this a packet goes at once (the test's traffic is far below it). */
#define NFDELAY_MAX 65536

/* The packets held: ids and when each may go, a ring in arrival order. */
static struct {
    uint32_t id[NFDELAY_MAX];
    int64_t due[NFDELAY_MAX];
    unsigned head, n;
} held;
static int64_t delay_ms;
static volatile sig_atomic_t stop;

/* Monotonic milliseconds. */
static int64_t nfdelay_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Queue callback: hold the packet (or let it go now when the ring is full). */
static int nfdelay_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *arg)
{
    (void)msg, (void)arg;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph)
        return 0;
    uint32_t id = ntohl(ph->packet_id);
    if (held.n == NFDELAY_MAX)
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    unsigned at = (held.head + held.n++) % NFDELAY_MAX;
    held.id[at] = id;
    held.due[at] = nfdelay_now() + delay_ms;
    return 0;
}

/* Let every held packet whose time came go (all of them when all is set). */
static void nfdelay_release(struct nfq_q_handle *qh, int all)
{
    int64_t now = nfdelay_now();
    while (held.n && (all || held.due[held.head] <= now)) {
        nfq_set_verdict(qh, held.id[held.head], NF_ACCEPT, 0, NULL);
        held.head = (held.head + 1) % NFDELAY_MAX;
        held.n--;
    }
}

/* Signal handler: finish the loop. */
static void nfdelay_stop(int sig)
{
    (void)sig;
    stop = 1;
}

/* Open the queue and hold packets until told to stop; exit status 0, or 1 when the queue cannot open. */
int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nfdelay QUEUE DELAY_MS\n");
        return 64;
    }
    delay_ms = atoll(argv[2]);
    struct nfq_handle *h = nfq_open();
    struct nfq_q_handle *qh = h ? nfq_create_queue(h, (uint16_t)atoi(argv[1]), nfdelay_packet, NULL) : NULL;
    if (!qh || nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) {
        fprintf(stderr, "nfdelay: cannot open queue %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    nfq_set_queue_maxlen(qh, NFDELAY_MAX);
    signal(SIGTERM, nfdelay_stop);
    signal(SIGINT, nfdelay_stop);
    int fd = nfq_fd(h);
    static char buf[65536];
    printf("nfdelay: queue %s, %lld ms\n", argv[1], (long long)delay_ms);
    fflush(stdout);
    while (!stop) {
        int wait = held.n ? (int)(held.due[held.head] - nfdelay_now()) : 100;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, wait < 0 ? 0 : wait) > 0) {
            ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (n > 0)
                nfq_handle_packet(h, buf, (int)n);
        }
        nfdelay_release(qh, 0);
    }
    nfdelay_release(qh, 1);
    nfq_destroy_queue(qh);
    nfq_close(h);
    return 0;
}
