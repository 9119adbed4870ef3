/* The hot requests (get and add) decoded, and their OK replies and join answers encoded, without
 * protobuf-c's allocations: what protobuf-c would decode or pack, byte for byte, for the shapes it accepts. */
#ifndef MUSTERD_FASTPATH_H
#define MUSTERD_FASTPATH_H

#include <stddef.h>
#include <stdint.h>

#include "muster.pb-c.h"

/* Keys longer than this take the general path. */
#define FASTPATH_KEY_MAX 255

/* A Request decoded in place: req points at get or add, whose key is key. */
struct fastpath_req {
    Muster__Request req;
    Muster__GetReq get;
    Muster__AddReq add;
    char key[FASTPATH_KEY_MAX + 1];
};

/* Decode a ClientFrame body of len bytes holding only a Request{id, get | add} whose fields each appear
 * once and whose key has no NUL and at most FASTPATH_KEY_MAX bytes into out; 1 when it did, 0 when the
 * frame must take protobuf-c's path (anything else, including every malformed frame). */
int fastpath_decode(const uint8_t *body, size_t len, struct fastpath_req *out);

/* Packed size of ServerFrame{response{id, result}} (status OK, no message) when result is a GetRes,
 * AddRes, SetRes or a RdzvJoinRes whose assignment lists no members; 0 for any other result, which takes
 * protobuf-c's path. */
size_t fastpath_reply_size(uint64_t id, const ProtobufCMessage *result);

/* Pack that frame's body (fastpath_reply_size bytes) at p, as protobuf-c packs it. */
void fastpath_reply_pack(uint8_t *p, uint64_t id, const ProtobufCMessage *result);

#endif
