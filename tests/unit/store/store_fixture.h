/* Shared by the evidence store tests: a temporary state directory per test, sample records and
 * direct SQLite access for checks behind the store's back. */
#ifndef QR_TEST_STORE_FIXTURE_H
#define QR_TEST_STORE_FIXTURE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"

struct fixture {
    char dir[64];
    char path[128];
};

static inline int fx_setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/qr-store-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, QR_STORE_FILE);
    *state = f;
    return 0;
}

static inline int fx_teardown(void **state)
{
    struct fixture *f = *state;
    DIR *d = opendir(f->dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char p[512];
            snprintf(p, sizeof(p), "%s/%s", f->dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* Names in the fixture directory that start with prefix. */
static inline int fx_count_files(const struct fixture *f, const char *prefix)
{
    int n = 0;
    DIR *d = opendir(f->dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            n++;
    if (d)
        closedir(d);
    return n;
}

static inline int64_t fx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline struct qr_store_crash fx_crash(int64_t t, const char *backend, const char *log)
{
    return (struct qr_store_crash){
        .time_ms = t,
        .backend_id = backend,
        .model = "qwen3-0.6b",
        .engine_version = "b6500",
        .pid = 4242,
        .signal = 9,
        .reason = "killed by signal 9",
        .log_tail = log,
    };
}

/* One integer from a SQL query on a private connection; -1 on any error. */
static inline int64_t fx_sql_int(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return v;
}

static inline int fx_sql_exec(const char *path, const char *sql)
{
    sqlite3 *db = NULL;
    int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc;
}

#endif
