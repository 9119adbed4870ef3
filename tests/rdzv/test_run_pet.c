/*
 * `muster run PROG` configured only by torchrun's PET_* variables, as a job
 * operator (Kubeflow's PyTorchJob, TrainJob) starts it: real launchers of
 * the built CLI against the test's own musterd, with no option on their
 * command line.  Two nodes through PET_RDZV_ENDPOINT/PET_RDZV_ID (the
 * namespace) whose ranks follow PET_NODE_RANK; the static backend's
 * PET_MASTER_ADDR/PORT as the store with a flag winning over its variable;
 * a bad variable refused before any round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hclient.h"
#include "hrun.h"

/* Each worker records what it was told and leaves a key in the job's namespace. */
static const char pet_worker[] =
    "echo \"$GROUP_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MUSTER_NODE_ID $TORCHELASTIC_RUN_ID "
    "$TORCHELASTIC_MAX_RESTARTS\" > \"$OUT/w.$RANK\"\n"
    "\"$MUSTER\" set \"pet/$RANK\" \"$MUSTER_NODE_ID\" || exit 9\n";

/* The variables every case sets or clears. */
static const char *const pet_vars[] = {"PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_RDZV_BACKEND",
                                       "PET_RDZV_ENDPOINT", "PET_RDZV_ID", "PET_MAX_RESTARTS", "PET_RDZV_CONF",
                                       "PET_MASTER_ADDR", "PET_MASTER_PORT", NULL};

/* Clear every PET_* variable of the test's own environment (the launchers inherit it). */
static void pet_clear(void)
{
    for (int i = 0; pet_vars[i]; i++)
        unsetenv(pet_vars[i]);
}

/* Two nodes formed from PET_* alone: PET_RDZV_ENDPOINT is musterd, PET_RDZV_ID the namespace, and
 * PET_NODE_RANK orders the nodes (node rank 0 starts second and still gets ranks 0 and 1). */
static void t_two_nodes(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher la, lb;
    char ep[64], buf[4096];
    hr_fresh_out("pet2");
    if (h_start(&d, NULL) < 0)
        return;
    const char *w = hr_script("pet.sh", pet_worker);
    snprintf(ep, sizeof ep, "127.0.0.1:%u", d.port);
    setenv("PET_NNODES", "2", 1);
    setenv("PET_NPROC_PER_NODE", "2", 1);
    setenv("PET_RDZV_BACKEND", "c10d", 1);
    setenv("PET_RDZV_ENDPOINT", ep, 1);
    setenv("PET_RDZV_ID", "petjob", 1);
    setenv("PET_MAX_RESTARTS", "1", 1);
    setenv("PET_RDZV_CONF", "join_timeout=30,last_call_timeout=0,read_timeout=60", 1);
    setenv("PET_MASTER_ADDR", "127.0.0.1", 1); /* the operator's, for torch's own store: not used */
    setenv("PET_MASTER_PORT", "1", 1);
    setenv("PET_NODE_RANK", "1", 1);
    hr_launch(&la, "pet2-a", (const char *[]){w, NULL});
    setenv("PET_NODE_RANK", "0", 1);
    hr_launch(&lb, "pet2-b", (const char *[]){w, NULL});
    pet_clear();
    CHECK_EQ(hr_finish(&la, 30000), 0);
    CHECK_EQ(hr_finish(&lb, 30000), 0);
    CHECK_STR(hr_out_file("w.0", buf, sizeof buf), "0 4 2 node-000000 petjob 1\n");
    CHECK_STR(hr_out_file("w.1", buf, sizeof buf), "0 4 2 node-000000 petjob 1\n");
    CHECK_STR(hr_out_file("w.2", buf, sizeof buf), "1 4 2 node-000001 petjob 1\n");
    CHECK_STR(hr_out_file("w.3", buf, sizeof buf), "1 4 2 node-000001 petjob 1\n");
    /* The keys are in the job's namespace. */
    muster_t *m = hc_connect(&d, "petjob", NULL);
    if (m) {
        HC_EXPECT(m, "pet/0", "node-000000");
        HC_EXPECT(m, "pet/3", "node-000001");
    }
    muster_close(m);
    hr_slurp(la.err, buf, sizeof buf);
    CHECK(strstr(buf, "from torchrun's environment:") != NULL);
    CHECK(strstr(buf, "--rdzv-endpoint 127.0.0.1:") != NULL);
    CHECK(strstr(buf, "--rdzv-id petjob ($PET_RDZV_ID)") != NULL);
    CHECK(strstr(buf, "--last-call 0 ($PET_RDZV_CONF)") != NULL);
    hr_show(&la, before);
    hr_show(&lb, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* torchrun's static backend (no PET_RDZV_BACKEND, no endpoint): PET_MASTER_ADDR:PET_MASTER_PORT is the
 * store; --nproc-per-node on the command line wins over PET_NPROC_PER_NODE. */
static void t_static_master(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct h_daemon d;
    struct hr_launcher l;
    char port[16], buf[4096];
    hr_fresh_out("petstatic");
    if (h_start(&d, NULL) < 0)
        return;
    const char *w = hr_script("pet.sh", pet_worker);
    snprintf(port, sizeof port, "%u", d.port);
    setenv("PET_NNODES", "1", 1);
    setenv("PET_NPROC_PER_NODE", "3", 1);
    setenv("PET_NODE_RANK", "0", 1);
    setenv("PET_MASTER_ADDR", "127.0.0.1", 1);
    setenv("PET_MASTER_PORT", port, 1);
    hr_launch(&l, "petstatic", (const char *[]){"--nproc-per-node", "1", w, NULL});
    pet_clear();
    CHECK_EQ(hr_finish(&l, 30000), 0);
    CHECK_STR(hr_out_file("w.0", buf, sizeof buf), "0 1 1 node-000000 default 0\n");
    CHECK(!hr_await_file("w.1", 0));
    muster_t *m = hc_connect(&d, NULL, NULL);
    if (m)
        HC_EXPECT(m, "pet/0", "node-000000");
    muster_close(m);
    hr_show(&l, before);
    CHECK_EQ(h_stop(&d), 0);
}

/* A variable torchrun would refuse ends the launcher with the usage status before any round. */
static void t_bad_variable(void *arg)
{
    (void)arg;
    int before = h_failures();
    struct hr_launcher l;
    char buf[4096];
    hr_fresh_out("petbad");
    setenv("PET_NNODES", "two", 1);
    setenv("PET_RDZV_ENDPOINT", "127.0.0.1:1", 1); /* port 1: a round would fail to connect (exit 4) */
    hr_launch(&l, "petbad", (const char *[]){"true", NULL});
    pet_clear();
    CHECK_EQ(hr_finish(&l, 10000), 2);
    CHECK(strstr(hr_slurp(l.err, buf, sizeof buf), "bad value for $PET_NNODES: two") != NULL);
    hr_show(&l, before);
}

int main(void)
{
    h_init("rdzv_run_pet", 120);
    hr_cli = getenv("MUSTER_TEST_CLI");
    if (!hr_cli || !*hr_cli)
        h_skip("MUSTER_TEST_CLI is not set");
    pet_clear();
    H_RUN(t_two_nodes, NULL);
    H_RUN(t_static_master, NULL);
    H_RUN(t_bad_variable, NULL);
    return h_finish();
}
