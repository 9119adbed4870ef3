/*
 * Corpus replay: runs every file of the given files and directories through
 * a fuzz target's LLVMFuzzerTestOneInput, without libFuzzer, so the corpus
 * is exercised by the normal suite under any compiler and sanitizer.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs larger than this are not replayed (the targets cap their own input). */
#define REPLAY_MAX (1u << 20)

/* Feed one file to the target; returns 1 when it was replayed, 0 when unreadable. */
static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    size_t n;
    if (!f)
        return 0;
    buf = malloc(REPLAY_MAX);
    n = buf ? fread(buf, 1, REPLAY_MAX, f) : 0;
    fclose(f);
    if (!buf)
        return 0;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    return 1;
}

/* Feed every regular file of a directory; returns how many were replayed. */
static int replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];
    int n = 0;
    if (!d)
        return 0;
    while ((e = readdir(d))) {
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            n += replay_file(path);
    }
    closedir(d);
    return n;
}

/* Replay every argument (file or directory); fail when nothing was replayed. */
int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: not found\n", argv[i]);
            return 1;
        }
        n += S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]);
    }
    printf("replayed %d inputs\n", n);
    return n > 0 ? 0 : 1;
}
