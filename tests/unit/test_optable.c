/*
 * Unit tests of the daemon's op table (store-server/native/ops.c): every op case of
 * the generated Request descriptor has a row named like its proto field,
 * with a handler, every op of the op list (proto/oplist.h) has its row with
 * the list's name and flags, and the flags say what the protocol spec says.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "muster.pb-c.h"
#include "ops.h"

/* Whether a Request field belongs to the op oneof. */
static int t_is_op(const ProtobufCFieldDescriptor *f)
{
    return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) != 0;
}

/* Every op case has a row with the proto field's name and a handler. */
static void t_every_case_has_row(void *unused)
{
    const ProtobufCMessageDescriptor *d = &muster__request__descriptor;
    unsigned ops = 0;
    (void)unused;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const struct op_row *r;
        if (!t_is_op(f))
            continue;
        ops++;
        CHECK(f->id < OPS_SLOTS);
        r = ops_row(f->id);
        CHECK(r != NULL);
        if (!r) {
            printf("  no row for op %s (%u)\n", f->name, f->id);
            continue;
        }
        CHECK_STR(r->name, f->name);
        CHECK_STR(ops_name(f->id), f->name);
        CHECK(r->fn != NULL);
    }
    CHECK_EQ(ops, 23);
}

/* Cases that are not ops have no row. */
static void t_no_stray_rows(void *unused)
{
    const ProtobufCMessageDescriptor *d = &muster__request__descriptor;
    (void)unused;
    CHECK(ops_row(MUSTER__REQUEST__OP__NOT_SET) == NULL);
    for (unsigned c = 0; c < OPS_SLOTS; c++) {
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(d, c);
        if (!f || !t_is_op(f))
            CHECK(ops_row(c) == NULL && ops_name(c) == NULL);
    }
    CHECK(ops_row(OPS_SLOTS) == NULL);
    CHECK(ops_row(1000) == NULL);
}

/* Every op of the list has a row with a handler, and the row's name and flags are the list's. */
static void t_rows_from_list(void *unused)
{
#define T_LISTED(c, n, f) {MUSTER__REQUEST__OP_##c, #n, (f)},
    static const struct {
        unsigned op;
        const char *name;
        unsigned flags;
    } listed[] = {OPLIST(T_LISTED)};
#undef T_LISTED
    unsigned rows = 0;
    (void)unused;
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++) {
        const struct op_row *r = ops_row(listed[i].op);
        CHECK(r != NULL);
        if (!r) {
            printf("  no handler for listed op %s (%u)\n", listed[i].name, listed[i].op);
            continue;
        }
        CHECK_STR(r->name, listed[i].name);
        CHECK_EQ(r->flags, listed[i].flags);
    }
    for (unsigned c = 0; c < OPS_SLOTS; c++)
        rows += ops_row(c) != NULL;
    CHECK_EQ(rows, sizeof listed / sizeof listed[0]);
}

/* Flags follow the spec: only ping before hello; the blocking ops may block; writes mutate. */
static void t_flags(void *unused)
{
    static const unsigned blocking[] = {MUSTER__REQUEST__OP_GET, MUSTER__REQUEST__OP_WAIT,
                                        MUSTER__REQUEST__OP_MULTI_GET, MUSTER__REQUEST__OP_BARRIER,
                                        MUSTER__REQUEST__OP_RDZV_JOIN};
    static const unsigned writes[] = {MUSTER__REQUEST__OP_SET,    MUSTER__REQUEST__OP_ADD,
                                      MUSTER__REQUEST__OP_COMPARE_SET, MUSTER__REQUEST__OP_DELETE,
                                      MUSTER__REQUEST__OP_MULTI_SET, MUSTER__REQUEST__OP_APPEND};
    static const unsigned reads[] = {MUSTER__REQUEST__OP_GET, MUSTER__REQUEST__OP_CHECK,
                                     MUSTER__REQUEST__OP_NUM_KEYS, MUSTER__REQUEST__OP_LIST,
                                     MUSTER__REQUEST__OP_PING};
    (void)unused;
    for (unsigned c = 0; c < OPS_SLOTS; c++) {
        const struct op_row *r = ops_row(c);
        if (r)
            CHECK_EQ(!!(r->flags & OPL_BEFORE_HELLO), c == MUSTER__REQUEST__OP_PING);
    }
    for (size_t i = 0; i < sizeof blocking / sizeof blocking[0]; i++)
        CHECK(ops_row(blocking[i]) && (ops_row(blocking[i])->flags & OPL_MAY_BLOCK));
    for (size_t i = 0; i < sizeof writes / sizeof writes[0]; i++)
        CHECK(ops_row(writes[i]) && (ops_row(writes[i])->flags & OPL_MUTATES) &&
              !(ops_row(writes[i])->flags & OPL_MAY_BLOCK));
    for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++)
        CHECK(ops_row(reads[i]) && !(ops_row(reads[i])->flags & OPL_MUTATES));
}

/* Ops that name a key have a generic key check, so no handler sees an empty or oversize key. */
static void t_key_checks(void *unused)
{
    static const unsigned keyed[] = {MUSTER__REQUEST__OP_SET,    MUSTER__REQUEST__OP_GET,
                                     MUSTER__REQUEST__OP_ADD,    MUSTER__REQUEST__OP_COMPARE_SET,
                                     MUSTER__REQUEST__OP_DELETE, MUSTER__REQUEST__OP_APPEND,
                                     MUSTER__REQUEST__OP_BARRIER};
    static const unsigned multi[] = {MUSTER__REQUEST__OP_CHECK, MUSTER__REQUEST__OP_WAIT,
                                     MUSTER__REQUEST__OP_MULTI_GET, MUSTER__REQUEST__OP_MULTI_SET};
    (void)unused;
    for (size_t i = 0; i < sizeof keyed / sizeof keyed[0]; i++) {
        const struct op_row *r = ops_row(keyed[i]);
        CHECK(r && r->fields[0].kind == OPC_KEY);
    }
    for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
        const struct op_row *r = ops_row(multi[i]);
        CHECK(r && r->fields[0].kind == OPC_KEYS);
    }
}

/* Run the op table tests. */
int main(void)
{
    h_init("unit-optable", 30);
    H_RUN(t_every_case_has_row, NULL);
    H_RUN(t_no_stray_rows, NULL);
    H_RUN(t_rows_from_list, NULL);
    H_RUN(t_flags, NULL);
    H_RUN(t_key_checks, NULL);
    return h_finish();
}
