/*
 * The step encoding of the script fuzz targets (fuzz_conns.c,
 * fuzz_tcpstore.c), shared with the seed generator (gen_corpus.c).  A step
 * is four bytes: the connection (low 2 bits) and the action (the rest,
 * taken modulo the number of actions), then its arguments k, x and v; the
 * raw action then takes k & 31 more bytes to send as they are.
 */
#ifndef MUSTER_FUZZ_SCRIPT_H
#define MUSTER_FUZZ_SCRIPT_H

/* The first byte of a step: action a on connection c. */
#define FZ_STEP(c, a) ((unsigned char)(((a) << 2) | ((c) & 3)))

/* Native connections (fuzz_conns.c): hello, every op, then the connection-level actions. */
enum cf_action {
    CF_HELLO, CF_SET, CF_GET, CF_ADD, CF_CAS, CF_DELETE, CF_CHECK, CF_WAIT, CF_NUM_KEYS, CF_MULTI_GET,
    CF_MULTI_SET, CF_APPEND, CF_LIST, CF_PING, CF_BARRIER, CF_WATCH, CF_UNWATCH, CF_JOIN, CF_LEAVE,
    CF_HEARTBEAT, CF_CLOSE, CF_HALF_CLOSE, CF_DEAF, CF_TICK, CF_RAW, CF_BATCH, CF_NACTIONS
};

/* TCPStore connections (fuzz_tcpstore.c): actions 0-18 are the VALIDATE-era ops by type byte
 * (enum ts_op), then the connection-level actions. */
enum ta_action { TA_CLOSE = 19, TA_HALF_CLOSE, TA_DEAF, TA_TICK, TA_RAW, TA_BATCH, TA_NACTIONS };

#endif
