/* Frame codec: the 4-byte big-endian length prefix around one protobuf message. */
#include "frame.h"

/* Read the body length from a 4-byte header. */
uint32_t frame_len(const uint8_t *hdr)
{
    return ((uint32_t)hdr[0] << 24) | ((uint32_t)hdr[1] << 16) | ((uint32_t)hdr[2] << 8) | hdr[3];
}

/* Write a body length as a 4-byte header. */
void frame_put_len(uint8_t *hdr, uint32_t len)
{
    hdr[0] = (uint8_t)(len >> 24);
    hdr[1] = (uint8_t)(len >> 16);
    hdr[2] = (uint8_t)(len >> 8);
    hdr[3] = (uint8_t)len;
}

/* Bytes a message takes on the wire, header included. */
size_t frame_size(const ProtobufCMessage *msg)
{
    return FRAME_HDR + protobuf_c_message_get_packed_size(msg);
}

/* Write header + packed message into buf (frame_size bytes); returns the size. */
size_t frame_pack(const ProtobufCMessage *msg, uint8_t *buf)
{
    size_t n = protobuf_c_message_pack(msg, buf + FRAME_HDR);
    frame_put_len(buf, (uint32_t)n);
    return FRAME_HDR + n;
}
