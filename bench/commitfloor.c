/* commitfloor: what a durable small-file commit costs at the least on this
 * machine, to put hubd's small-file rows beside. One thread does for N
 * files of 4 KiB, in groups of G, only what a commit must for a DONE to
 * mean "on disk": create the file, write it, then per group one syncfs
 * for the data, a link into a two-letter folder per file, an fsync of
 * each folder that got one (or, with `syncfs`, one more syncfs for all
 * the names, as hubd does for a group spread over many folders), one
 * SQLite transaction (WAL, synchronous FULL) for the group's rows, and
 * the temporary names unlinked. No network, no hashing, no thread
 * hand-offs.
 *
 *   commitfloor DIR N G [fsync|syncfs]
 *
 * DIR is made (it must not exist) on the file system to measure; prints
 * one JSON object: files per second and CPU us per file (this process:
 * user + system, the kernel's work on its behalf included). */
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    fprintf(stderr, "commitfloor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

static void exec_sql(sqlite3 *db, const char *sql)
{
    char *err = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
        fprintf(stderr, "commitfloor: %s: %s\n", sql, err ? err : "?");
        exit(1);
    }
}

static void fsync_dir(int dir, const char *rel)
{
    int fd = openat(dir, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd))
        die(rel);
    close(fd);
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && (!strcmp(argv[4], "fsync") || !strcmp(argv[4], "syncfs")))) {
        fprintf(stderr, "usage: commitfloor DIR N G [fsync|syncfs]\n");
        return 2;
    }
    int names_syncfs = argc == 5 && !strcmp(argv[4], "syncfs");
    unsigned n = (unsigned)strtoul(argv[2], NULL, 10), g = (unsigned)strtoul(argv[3], NULL, 10);
    if (n < 1 || g < 1 || g > 4096) {
        fprintf(stderr, "commitfloor: N at least 1, G 1-4096\n");
        return 2;
    }
    if (mkdir(argv[1], 0755))
        die(argv[1]);
    int dir = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0 || mkdirat(dir, "tmp", 0700) || mkdirat(dir, "blobs", 0755))
        die("layout");
    for (unsigned i = 0; i < 256; i++) {
        char rel[16];
        snprintf(rel, sizeof rel, "blobs/%02x", i);
        if (mkdirat(dir, rel, 0755))
            die(rel);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/floor.db", argv[1]);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK)
        die("sqlite3_open");
    exec_sql(db, "PRAGMA journal_mode=WAL");
    exec_sql(db, "PRAGMA synchronous=FULL");
    exec_sql(db, "CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size INTEGER) WITHOUT ROWID");
    exec_sql(db, "CREATE TABLE entries (url TEXT PRIMARY KEY, sha256 TEXT, seq INTEGER)");
    exec_sql(db, "CREATE INDEX entries_seq ON entries(seq)");
    sqlite3_stmt *blob, *entry;
    if (sqlite3_prepare_v2(db, "INSERT INTO blobs VALUES (?1, 4096)", -1, &blob, NULL) ||
        sqlite3_prepare_v2(db, "INSERT INTO entries VALUES (?1, ?2, ?3)", -1, &entry, NULL))
        die("prepare");
    char data[4096];
    int *fds = calloc(g, sizeof *fds);
    char(*names)[80] = calloc(g, sizeof *names);
    if (!fds || !names)
        die("calloc");
    srand(1);
    double t0 = now_s(), c0 = cpu_s();
    for (unsigned done = 0; done < n;) {
        unsigned k = n - done < g ? n - done : g;
        for (unsigned i = 0; i < k; i++) {
            char rel[64];
            snprintf(rel, sizeof rel, "tmp/%u.part", done + i);
            fds[i] = openat(dir, rel, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
            for (size_t b = 0; b < sizeof data; b += sizeof(int)) {
                int r = rand();
                memcpy(data + b, &r, sizeof r);
            }
            if (fds[i] < 0 || pwrite(fds[i], data, sizeof data, 0) != (ssize_t)sizeof data)
                die(rel);
            /* A name of 64 hex digits, spread over the folders as digests are. */
            snprintf(names[i], sizeof names[i], "%02x%062x", (unsigned)rand() & 0xff, done + i);
        }
        if (syncfs(dir))
            die("syncfs");
        char seen[256] = {0};
        for (unsigned i = 0; i < k; i++) {
            char tmp[64], rel[96];
            snprintf(tmp, sizeof tmp, "tmp/%u.part", done + i);
            snprintf(rel, sizeof rel, "blobs/%.2s/%s", names[i], names[i]);
            if (fchmod(fds[i], 0444) || linkat(dir, tmp, dir, rel, 0))
                die(rel);
            close(fds[i]);
        }
        if (names_syncfs && syncfs(dir))
            die("syncfs");
        for (unsigned i = 0; i < k && !names_syncfs; i++) {
            unsigned f = (unsigned)strtoul((char[]){names[i][0], names[i][1], 0}, NULL, 16);
            if (!seen[f]) {
                char rel[16];
                snprintf(rel, sizeof rel, "blobs/%.2s", names[i]);
                fsync_dir(dir, rel);
                seen[f] = 1;
            }
        }
        exec_sql(db, "BEGIN");
        for (unsigned i = 0; i < k; i++) {
            char url[128];
            snprintf(url, sizeof url, "http://127.0.0.1/m%u", done + i);
            sqlite3_bind_text(blob, 1, names[i], -1, SQLITE_STATIC);
            sqlite3_bind_text(entry, 1, url, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(entry, 2, names[i], -1, SQLITE_STATIC);
            sqlite3_bind_int64(entry, 3, done + i);
            if (sqlite3_step(blob) != SQLITE_DONE || sqlite3_step(entry) != SQLITE_DONE)
                die("insert");
            sqlite3_reset(blob);
            sqlite3_reset(entry);
        }
        exec_sql(db, "COMMIT");
        for (unsigned i = 0; i < k; i++) {
            char tmp[64];
            snprintf(tmp, sizeof tmp, "tmp/%u.part", done + i);
            if (unlinkat(dir, tmp, 0))
                die(tmp);
        }
        done += k;
    }
    double wall = now_s() - t0, cpu = cpu_s() - c0;
    printf("{\"files\": %u, \"group\": %u, \"names\": \"%s\", \"per_s\": %.0f, "
           "\"cpu_us_each\": %.0f}\n",
           n, g, names_syncfs ? "syncfs" : "fsync", n / wall, cpu / n * 1e6);
    sqlite3_finalize(blob);
    sqlite3_finalize(entry);
    sqlite3_close(db);
    free(fds);
    free(names);
    return 0;
}
