/*
 * A real etcd cluster for tests: N members on loopback ports, each its own
 * process and data directory under the harness's temporary directory,
 * killed with the test program.
 */
#ifndef MUSTER_TEST_HETCD_H
#define MUSTER_TEST_HETCD_H

#include <stdint.h>
#include <sys/types.h>

/* The most members a test cluster has. */
#define HETCD_MAX 3

/* A running cluster. */
struct hetcd {
    int n;
    pid_t pid[HETCD_MAX];        /* 0 once stopped */
    uint16_t client_port[HETCD_MAX], peer_port[HETCD_MAX];
    char endpoints[128];         /* "127.0.0.1:P1,127.0.0.1:P2,..." */
};

/* Whether an etcd binary is on PATH (tests skip without one). */
int hetcd_available(void);
/* Start an n-member cluster and wait until every member answers /health (longer on a loaded machine;
 * started again on new ports when a member exits first); 0, or -1. */
int hetcd_start(struct hetcd *c, int n);
/* SIGKILL member i and reap it. */
void hetcd_kill(struct hetcd *c, int i);
/* Stop every member still running. */
void hetcd_stop(struct hetcd *c);

#endif
