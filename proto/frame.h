/* Frame codec shared by musterd and libmuster: 4-byte big-endian length + one message. */
#ifndef MUSTER_FRAME_H
#define MUSTER_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "muster.pb-c.h"

#define FRAME_HDR 4

/* Read the body length from a 4-byte header. */
uint32_t frame_len(const uint8_t *hdr);
/* Write a body length as a 4-byte header. */
void frame_put_len(uint8_t *hdr, uint32_t len);
/* Bytes a message takes on the wire, header included. */
size_t frame_size(const ProtobufCMessage *msg);
/* Write header + packed message into buf (frame_size bytes); returns the size. */
size_t frame_pack(const ProtobufCMessage *msg, uint8_t *buf);

/* One row of the status table: wire status / public error code. */
struct status_row {
    int code;
    const char *name;     /* "TIMEOUT" */
    const char *message;  /* "operation timed out" */
    int retryable;
};

/* The row for code, or NULL when the code is unknown. */
const struct status_row *status_find(int code);
/* The status table and its length, for tests that walk it. */
const struct status_row *status_table(size_t *n);

#endif
