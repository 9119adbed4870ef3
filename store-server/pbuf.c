/*
 * Oneof members through descriptors: the op table and the reply path name
 * a sub-message by field number or by its type instead of a switch over
 * every case, so adding an op to the proto needs no code here.
 */
#include "pbuf.h"

#include <stdint.h>

/* The sub-message held by msg's oneof member with field number id, or NULL. */
ProtobufCMessage *pbuf_oneof_get(const ProtobufCMessage *msg, unsigned id)
{
    const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(msg->descriptor, id);
    if (!f || f->type != PROTOBUF_C_TYPE_MESSAGE || !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
        return NULL;
    const char *base = (const char *)msg;
    if (*(const uint32_t *)(base + f->quantifier_offset) != id)
        return NULL;
    return *(ProtobufCMessage *const *)(base + f->offset);
}

/* Put sub into the oneof member of msg whose type is sub's type; -1 when msg has no such member. */
int pbuf_oneof_set(ProtobufCMessage *msg, const ProtobufCMessage *sub)
{
    const ProtobufCMessageDescriptor *d = msg->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE || f->descriptor != sub->descriptor ||
            !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
            continue;
        char *base = (char *)msg;
        *(uint32_t *)(base + f->quantifier_offset) = f->id;
        *(const ProtobufCMessage **)(base + f->offset) = sub;
        return 0;
    }
    return -1;
}
