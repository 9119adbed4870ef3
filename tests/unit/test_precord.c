/*
 * Unit tests of the durable record framing (store-server/durable/precord.c): a
 * header announcing a body far larger than the bytes left is judged by
 * those bytes - a torn tail at the end of a file, damage when intact
 * records follow - and costs no allocation of the announced size (checked
 * under an address-space limit far below it, where sanitizers allow one).
 */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "precord.h"

/* Whether AddressSanitizer is on (gcc says so with a macro, clang with a feature test). */
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif

/* A header announcing a 1 GiB body (checksum zero). */
static const uint8_t t_huge[PREC_HDR] = {0x40, 0, 0, 0, 0, 0, 0, 0};

/* Count the records a read delivers. */
static int t_count(void *arg, const struct prec *r)
{
    (void)r;
    (*(int *)arg)++;
    return 0;
}

/* Write the bytes of b to a file in the test's directory; returns its path (static). */
static const char *t_write(struct evbuffer *b, const char *name)
{
    static char path[4096];
    size_t n = evbuffer_get_length(b);
    FILE *fp;
    snprintf(path, sizeof path, "%s/%s", h_tmpdir(), name);
    fp = fopen(path, "wb");
    if (!fp || fwrite(evbuffer_pullup(b, -1), 1, n, fp) != n || fclose(fp) != 0)
        abort();
    return path;
}

/* Append one set record. */
static void t_set(struct evbuffer *b, const char *key)
{
    CHECK_EQ(prec_put(b, PREC_SET, "job", 3, 1, key, strlen(key), (const uint8_t *)"v", 1, 0), 0);
}

/* A record, then a header announcing 1 GiB with a few bytes behind it: a torn tail at the header. */
static void t_huge_tail(void *unused)
{
    struct evbuffer *b = evbuffer_new();
    struct prec_end end;
    size_t first;
    int n = 0;
    (void)unused;
    t_set(b, "a");
    first = evbuffer_get_length(b);
    evbuffer_add(b, t_huge, sizeof t_huge);
    evbuffer_add(b, "short", 5);
    CHECK_EQ(prec_read_file(t_write(b, "huge-tail"), t_count, &n, &end), 1);
    CHECK_EQ(n, 1);
    CHECK_EQ(end.at, (long)first);
    /* The same bytes in memory (the --ha log's path). */
    size_t at = first;
    struct prec r;
    CHECK_EQ(prec_next(evbuffer_pullup(b, -1), evbuffer_get_length(b), &at, &r), PREC_BAD);
    CHECK(prec_tail_torn(evbuffer_pullup(b, -1), evbuffer_get_length(b), first));
    evbuffer_free(b);
}

/* A header announcing 1 GiB followed by intact records: damage, not a tail. */
static void t_huge_then_records(void *unused)
{
    struct evbuffer *b = evbuffer_new();
    struct prec_end end;
    int n = 0;
    (void)unused;
    evbuffer_add(b, t_huge, sizeof t_huge);
    t_set(b, "a");
    t_set(b, "b");
    CHECK_EQ(prec_read_file(t_write(b, "huge-then-records"), t_count, &n, &end), -1);
    CHECK_EQ(n, 0);
    CHECK_EQ(end.at, 0);
    CHECK(strstr(end.why, "intact records follow") != NULL);
    evbuffer_free(b);
}

/* Both reads again in a child whose address space could not hold the announced body. */
static void t_no_allocation(void *unused)
{
    (void)unused;
#ifdef T_ASAN
    printf("  (skipped under ASan: its shadow memory needs the address space)\n");
#else
    pid_t pid = fork();
    int status = 0;
    if (pid == 0) {
        struct rlimit rl = {256u << 20, 256u << 20};
        int fail = setrlimit(RLIMIT_AS, &rl) != 0;
        t_huge_tail(NULL);
        t_huge_then_records(NULL);
        _exit(fail || h_failures() ? 1 : 0);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#endif
}

/* Run the record framing tests. */
int main(void)
{
    h_init("unit-precord", 30);
    H_RUN(t_huge_tail, NULL);
    H_RUN(t_huge_then_records, NULL);
    H_RUN(t_no_allocation, NULL);
    return h_finish();
}
