/*
 * Unit tests of the op list (proto/oplist.h) against the protocol and
 * libmuster: the list holds exactly the cases of Request's op oneof in the
 * generated descriptor, under the proto field names, and libmuster's
 * failover sends again exactly the ops the list marks OPL_RESEND (the same
 * twelve as before the list existed).  A new op added to the proto and not
 * to the list fails here.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "internal.h"
#include "muster.pb-c.h"
#include "oplist.h"

/* One op of the list. */
struct t_op {
    unsigned op;
    const char *name;
    unsigned flags;
};

#define T_LISTED(c, n, f) {MUSTER__REQUEST__OP_##c, #n, (f)},
static const struct t_op t_list[] = {OPLIST(T_LISTED)};
#undef T_LISTED
#define T_N (sizeof t_list / sizeof t_list[0])

/* The list's entry for op case c, or NULL. */
static const struct t_op *t_find(unsigned c)
{
    for (size_t i = 0; i < T_N; i++)
        if (t_list[i].op == c)
            return &t_list[i];
    return NULL;
}

/* Whether a Request field belongs to the op oneof. */
static int t_is_op(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

/* Every case of the proto's op oneof is in the list, under its field name. */
static void t_proto_in_list(void *unused)
{
    const ProtobufCMessageDescriptor *d = &muster__request__descriptor;
    unsigned ops = 0;
    (void)unused;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (!t_is_op(f))
            continue;
        ops++;
        const struct t_op *o = t_find(f->id);
        CHECK(o != NULL);
        if (!o) {
            printf("  op %s (%u) of muster.proto is missing from proto/oplist.h\n", f->name, f->id);
            continue;
        }
        CHECK_STR(o->name, f->name);
    }
    CHECK_EQ(ops, T_N);
}

/* Every op of the list is a case of the proto's op oneof, listed once. */
static void t_list_in_proto(void *unused)
{
    const ProtobufCMessageDescriptor *d = &muster__request__descriptor;
    (void)unused;
    for (size_t i = 0; i < T_N; i++) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, t_list[i].op);
        CHECK(f != NULL && t_is_op(f));
        if (f)
            CHECK_STR(f->name, t_list[i].name);
        CHECK(t_find(t_list[i].op) == &t_list[i]);
        CHECK(t_list[i].flags == (t_list[i].flags & (OPL_MUTATES | OPL_MAY_BLOCK | OPL_BEFORE_HELLO | OPL_RESEND)));
    }
}

/* libmuster sends again after a lost connection exactly the OPL_RESEND ops, and nothing else. */
static void t_failover_follows_list(void *unused)
{
    (void)unused;
    for (unsigned c = 0; c < 256; c++) {
        const struct t_op *o = t_find(c);
        CHECK_EQ(failover_idempotent((Muster__Request__OpCase)c), o && (o->flags & OPL_RESEND));
    }
}

/* The ops sent again are the thirteen libmuster documents (muster.h), spelled out here independently. */
static void t_resend_set(void *unused)
{
    static const unsigned resend[] = {
        MUSTER__REQUEST__OP_SET,       MUSTER__REQUEST__OP_GET,       MUSTER__REQUEST__OP_DELETE,
        MUSTER__REQUEST__OP_CHECK,     MUSTER__REQUEST__OP_WAIT,      MUSTER__REQUEST__OP_NUM_KEYS,
        MUSTER__REQUEST__OP_MULTI_GET, MUSTER__REQUEST__OP_MULTI_SET, MUSTER__REQUEST__OP_LIST,
        MUSTER__REQUEST__OP_PING,      MUSTER__REQUEST__OP_WATCH,     MUSTER__REQUEST__OP_UNWATCH,
        MUSTER__REQUEST__OP_QUEUE_LEN,
    };
    unsigned n = 0;
    (void)unused;
    for (size_t i = 0; i < T_N; i++)
        n += (t_list[i].flags & OPL_RESEND) != 0;
    CHECK_EQ(n, sizeof resend / sizeof resend[0]);
    for (size_t i = 0; i < sizeof resend / sizeof resend[0]; i++) {
        const struct t_op *o = t_find(resend[i]);
        CHECK(o && (o->flags & OPL_RESEND));
    }
}

/* Run the op list tests. */
int main(void)
{
    h_init("unit-oplist", 30);
    H_RUN(t_proto_in_list, NULL);
    H_RUN(t_list_in_proto, NULL);
    H_RUN(t_failover_follows_list, NULL);
    H_RUN(t_resend_set, NULL);
    return h_finish();
}
