/*
 * Unit tests of the reserved key names (proto/keys.h): each name is the one
 * users, stored data and older peers know, spelled out here independently
 * of the header, and the NCCL id recogniser accepts exactly those keys.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "keys.h"

/* The rendezvous keys musterd sets. */
static void t_rdzv(void *unused)
{
    char buf[64];
    (void)unused;
    CHECK_STR(KEYS_RDZV_GENERATION, "muster/rdzv/generation");
    CHECK_EQ(keys_rdzv_broken(buf, sizeof buf, 7), (int)strlen("muster/rdzv/7/broken"));
    CHECK_STR(buf, "muster/rdzv/7/broken");
    keys_rdzv_broken(buf, sizeof buf, UINT64_MAX);
    CHECK_STR(buf, "muster/rdzv/18446744073709551615/broken");
}

/* The NCCL unique id keys libmuster-nccl writes. */
static void t_nccl_id(void *unused)
{
    char buf[128];
    (void)unused;
    keys_nccl_id(buf, sizeof buf, 3, "world", 0);
    CHECK_STR(buf, "nccl/3/world/id/0");
    keys_nccl_id(buf, sizeof buf, 12345678901ull, "tp.group-2", 15);
    CHECK_STR(buf, "nccl/12345678901/tp.group-2/id/15");
    /* A recovery's announcement is an id key too (musterd reports it published). */
    keys_nccl_recover(buf, sizeof buf, 7, "world");
    CHECK_STR(buf, "nccl/7/world/id/recover");
}

/* musterd counts a key as a published id exactly when it is nccl/<...>/id/<...>. */
static void t_nccl_recognise(void *unused)
{
    static const struct {
        const char *key;
        int is_id;
        uint64_t gen;
    } cases[] = {
        {"nccl/3/world/id/0", 1, 3},
        {"nccl/42/x/id/7", 1, 42},
        {"nccl/9/id/", 1, 9},
        {"nccl/x/id/1", 1, 0},
        {"nccl/", 0, 0},
        {"nccl", 0, 0},
        {"nccl/3/world/ids", 0, 0},
        {"nccl/3/world", 0, 0},
        {"NCCL/3/world/id/0", 0, 0},
        {"x/nccl/3/world/id/0", 0, 0},
        {"muster/rdzv/3/broken", 0, 0},
    };
    (void)unused;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t gen = 99;
        int is_id = keys_nccl_id_generation(cases[i].key, strlen(cases[i].key), &gen);
        CHECK_EQ(is_id, cases[i].is_id);
        if (is_id && cases[i].is_id)
            CHECK_EQ(gen, cases[i].gen);
        if (!is_id)
            CHECK_EQ(gen, 99);
    }
}

/* The keys of `muster run` and its relay. */
static void t_run(void *unused)
{
    char buf[64];
    (void)unused;
    keys_run_done(buf, sizeof buf, 2);
    CHECK_STR(buf, "muster/run/2/done");
    keys_torch_prefix(buf, sizeof buf, 5);
    CHECK_STR(buf, "torch/5/");
}

/* The names the Python torchrun backend takes from the extension. */
static void t_torchrun(void *unused)
{
    (void)unused;
    CHECK_STR(KEYS_TORCHRUN_CLOSED, "muster/torchrun/closed");
    CHECK_STR(KEYS_TORCHRUN_STORE_PREFIX, "torch.rendezvous.");
}

/* Run the reserved key name tests. */
int main(void)
{
    h_init("unit-keys", 30);
    H_RUN(t_rdzv, NULL);
    H_RUN(t_nccl_id, NULL);
    H_RUN(t_nccl_recognise, NULL);
    H_RUN(t_run, NULL);
    H_RUN(t_torchrun, NULL);
    return h_finish();
}
