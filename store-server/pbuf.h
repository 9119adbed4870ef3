/* Generic access to protobuf-c oneof members through message descriptors. */
#ifndef MUSTERD_PBUF_H
#define MUSTERD_PBUF_H

#include <protobuf-c/protobuf-c.h>

/* The sub-message held by msg's oneof member with field number id, or NULL. */
ProtobufCMessage *pbuf_oneof_get(const ProtobufCMessage *msg, unsigned id);
/* Put sub into the oneof member of msg whose type is sub's type; -1 when msg has no such member. */
int pbuf_oneof_set(ProtobufCMessage *msg, const ProtobufCMessage *sub);

#endif
