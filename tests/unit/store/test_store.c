/* Evidence store: creation with the documented settings, typed records that survive a close and
 * reopen, filters and newest-first order, refused records that leave the store unchanged, stats,
 * backup while open. Fault behaviour is in test_store_faults.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <math.h>
#include <sys/wait.h>

#include "store_fixture.h"

static struct qr_store *open_ok(const struct fixture *f, struct qr_store_open_info *info)
{
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_store_open(f->path, NULL, &s, info, &d);
    if (err)
        fail_msg("open: %s", d.msg);
    assert_non_null(s);
    return s;
}

static void test_open_creates_wal_store(void **state)
{
    struct fixture *f = *state;
    struct qr_store_open_info info;
    struct qr_store *s = open_ok(f, &info);
    assert_true(info.created);
    assert_false(info.recreated);
    assert_int_equal(info.schema_found, 0);
    assert_string_equal(qr_store_path(s), f->path);

    struct qr_store_stats st;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.schema_version, QR_STORE_SCHEMA_VERSION);
    assert_int_equal(st.crashes, 0);
    assert_true(st.db_bytes > 0);
    assert_string_equal(st.journal_mode, "wal");
    assert_int_equal(st.synchronous, 2); /* FULL */

    /* WAL is persistent in the file: a second connection sees it */
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *q = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &q, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    assert_string_equal((const char *) sqlite3_column_text(q, 0), "wal");
    sqlite3_finalize(q);
    sqlite3_close(db);
    qr_store_close(s);

    s = open_ok(f, &info);
    assert_false(info.created);
    assert_int_equal(info.schema_found, QR_STORE_SCHEMA_VERSION);
    qr_store_close(s);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM schema_version"),
                     QR_STORE_SCHEMA_VERSION);
}

static void test_empty_file_is_a_new_store(void **state)
{
    struct fixture *f = *state;
    int fd = open(f->path, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    close(fd);
    struct qr_store_open_info info;
    struct qr_store *s = open_ok(f, &info);
    assert_true(info.created);
    assert_false(info.recreated);
    qr_store_close(s);
}

static void test_missing_directory_is_io_error(void **state)
{
    struct fixture *f = *state;
    char p[256];
    snprintf(p, sizeof(p), "%s/no/such/dir/evidence.db", f->dir);
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_store_open(p, NULL, &s, &info, &d), QR_ERR_IO);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_IO);
    assert_non_null(strstr(d.msg, p));
}

static void test_directory_path_is_io_error(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(mkdir(f->path, 0700), 0);
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = QR_STORE_RECREATE_CORRUPT};
    assert_int_equal(qr_store_open(f->path, &o, &s, &info, &d), QR_ERR_IO);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_IO);
    assert_non_null(strstr(d.msg, "not a regular file"));
    assert_int_equal(rmdir(f->path), 0); /* left where it was */
}

/* Two processes writing at once (the daemon and a `calibrate` run): the busy timeout serialises
 * them and every record of both lands. */
static void test_two_writer_processes(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30);
        struct qr_store *c = NULL;
        struct qr_diag cd = {{0}};
        if (qr_store_open(f->path, NULL, &c, NULL, &cd))
            _exit(2);
        for (int i = 0; i < 100; i++) {
            struct qr_store_crash r = fx_crash(1000 + i, "child", "x");
            if (qr_store_crash_add(c, &r, NULL, &cd))
                _exit(3);
        }
        qr_store_close(c);
        _exit(0);
    }
    struct qr_diag d = {{0}};
    for (int i = 0; i < 100; i++) {
        struct qr_store_crash r = fx_crash(2000 + i, "parent", "x");
        assert_int_equal(qr_store_crash_add(s, &r, NULL, &d), QR_OK);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.crashes, 200);
    qr_store_close(s);
}

static void test_crash_records_survive_reopen(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    int64_t id1 = 0, id2 = 0, id3 = 0;
    struct qr_store_crash c1 = fx_crash(1000, "llamacpp", "line 1\nsegfault\n");
    struct qr_store_crash c2 = fx_crash(2000, "ollama", "");
    c2.signal = 0;
    c2.exit_code = 3;
    c2.reason = "exited with status 3";
    struct qr_store_crash c3 = fx_crash(3000, "llamacpp", "oom");
    assert_int_equal(qr_store_crash_add(s, &c1, &id1, &d), QR_OK);
    assert_int_equal(qr_store_crash_add(s, &c2, &id2, &d), QR_OK);
    assert_int_equal(qr_store_crash_add(s, &c3, &id3, &d), QR_OK);
    assert_true(id1 > 0 && id2 > id1 && id3 > id2);
    qr_store_close(s);

    s = open_ok(f, NULL);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_crash_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].id, id3); /* newest first */
    assert_int_equal(rows[1].id, id2);
    assert_int_equal(rows[2].id, id1);
    assert_int_equal(rows[2].time_ms, 1000);
    assert_string_equal(rows[2].backend_id, "llamacpp");
    assert_string_equal(rows[2].model, "qwen3-0.6b");
    assert_string_equal(rows[2].engine_version, "b6500");
    assert_int_equal(rows[2].pid, 4242);
    assert_int_equal(rows[2].signal, 9);
    assert_string_equal(rows[2].reason, "killed by signal 9");
    assert_string_equal(rows[2].log_tail, "line 1\nsegfault\n");
    assert_int_equal(rows[1].signal, 0);
    assert_int_equal(rows[1].exit_code, 3);

    struct qr_store_filter flt = {.backend_id = "llamacpp", .limit = 1};
    assert_int_equal(qr_store_crash_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, id3);
    flt = (struct qr_store_filter){.since_ms = 1500};
    assert_int_equal(qr_store_crash_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 2);
    flt = (struct qr_store_filter){.backend_id = "none"};
    assert_int_equal(qr_store_crash_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 0);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_time_zero_means_now(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_crash c = fx_crash(0, "llamacpp", "x");
    time_t before = time(NULL);
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_crash_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_true(rows[0].time_ms >= (int64_t) before * 1000);
    assert_true(rows[0].time_ms <= ((int64_t) time(NULL) + 1) * 1000);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_calibration_roundtrip(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_calibration c = {
        .time_ms = 10,
        .host_fingerprint = "host-a",
        .engine_version = "b6500",
        .model = "gemma4-e2b",
        .threads = 8,
        .prefill_tps = 412.5,
        .decode_tps = 24.75,
        .mem_bw_gbs = NAN,
        .raw_json = "{\"runs\":[1,2,3]}",
    };
    assert_int_equal(qr_store_calibration_add(s, &c, NULL, &d), QR_OK);
    c.time_ms = 20;
    c.threads = 16;
    assert_int_equal(qr_store_calibration_add(s, &c, NULL, &d), QR_OK);
    struct qr_store_calibration host_only = {.time_ms = 30,
                                             .host_fingerprint = "host-a",
                                             .engine_version = "none",
                                             .threads = 8,
                                             .prefill_tps = NAN,
                                             .decode_tps = NAN,
                                             .mem_bw_gbs = 71.5,
                                             .raw_json = "{}"};
    assert_int_equal(qr_store_calibration_add(s, &host_only, NULL, &d), QR_OK);
    c.host_fingerprint = "host-b";
    assert_int_equal(qr_store_calibration_add(s, &c, NULL, &d), QR_OK);
    qr_store_close(s);

    s = open_ok(f, NULL);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_calibration *rows = NULL;
    size_t n = 0;
    struct qr_store_filter flt = {.host_fingerprint = "host-a", .model = "gemma4-e2b"};
    assert_int_equal(qr_store_calibration_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].threads, 16);
    assert_int_equal(rows[1].threads, 8);
    assert_true(rows[1].prefill_tps == 412.5);
    assert_true(rows[1].decode_tps == 24.75);
    assert_true(isnan(rows[1].mem_bw_gbs));
    assert_string_equal(rows[1].raw_json, "{\"runs\":[1,2,3]}");
    assert_string_equal(rows[1].engine_version, "b6500");

    flt = (struct qr_store_filter){.host_fingerprint = "host-a", .limit = 1};
    assert_int_equal(qr_store_calibration_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_null(rows[0].model);
    assert_true(rows[0].mem_bw_gbs == 71.5);
    assert_true(isnan(rows[0].decode_tps));
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_conformance_roundtrip(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_conformance c = {
        .time_ms = 5,
        .backend_id = "llamacpp",
        .kind = "pinned",
        .engine_version = "b6500",
        .model = "qwen3",
        .hardware_class = "cpu-x86_64-avx2",
        .n_pass = 40,
        .n_fail = 1,
        .n_skip = 3,
        .report_json = "{\"cases\":[]}",
    };
    assert_int_equal(qr_store_conformance_add(s, &c, NULL, &d), QR_OK);
    c.time_ms = 6;
    c.kind = "candidate";
    c.engine_version = "b6600";
    c.n_fail = 0;
    assert_int_equal(qr_store_conformance_add(s, &c, NULL, &d), QR_OK);
    qr_store_close(s);

    s = open_ok(f, NULL);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_conformance *rows = NULL;
    size_t n = 0;
    struct qr_store_filter flt = {.backend_id = "llamacpp", .kind = "pinned"};
    assert_int_equal(qr_store_conformance_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].engine_version, "b6500");
    assert_string_equal(rows[0].hardware_class, "cpu-x86_64-avx2");
    assert_int_equal(rows[0].n_pass, 40);
    assert_int_equal(rows[0].n_fail, 1);
    assert_int_equal(rows[0].n_skip, 3);
    flt = (struct qr_store_filter){.engine_version = "b6600"};
    assert_int_equal(qr_store_conformance_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].kind, "candidate");
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_bench_roundtrip(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_bench b = {
        .time_ms = 7,
        .name = "context-ab",
        .model = "gemma4-e4b",
        .variant_a = "native",
        .variant_b = "override",
        .metric = "decode_tps",
        .values_json = "{\"a\":[24.7,25.1],\"b\":[19.2,19.9]}",
    };
    int64_t id = 0;
    assert_int_equal(qr_store_bench_add(s, &b, &id, &d), QR_OK);
    b.name = "other";
    b.model = NULL;
    assert_int_equal(qr_store_bench_add(s, &b, NULL, &d), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_bench *rows = NULL;
    size_t n = 0;
    struct qr_store_filter flt = {.name = "context-ab"};
    assert_int_equal(qr_store_bench_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, id);
    assert_string_equal(rows[0].model, "gemma4-e4b");
    assert_string_equal(rows[0].variant_a, "native");
    assert_string_equal(rows[0].variant_b, "override");
    assert_string_equal(rows[0].metric, "decode_tps");
    assert_string_equal(rows[0].values_json, "{\"a\":[24.7,25.1],\"b\":[19.2,19.9]}");
    assert_int_equal(qr_store_bench_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 2);
    assert_null(rows[0].model);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

/* Every refused record names its field, says why, and leaves the tables as they were. */
static void test_invalid_records_refused(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_crash c = fx_crash(1, "llamacpp", "x");
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);

    c.backend_id = NULL;
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_ERR_INVALID);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_CONSTRAINT);
    assert_non_null(strstr(d.msg, "'backend_id'"));

    char *big = malloc(QR_STORE_MAX_TEXT + 2);
    memset(big, 'm', QR_STORE_MAX_TEXT + 1);
    big[QR_STORE_MAX_TEXT + 1] = '\0';
    c = fx_crash(1, "llamacpp", "x");
    c.model = big;
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_ERR_TOO_LARGE);
    assert_non_null(strstr(d.msg, "'model'"));
    free(big);

    struct qr_store_calibration cal = {.host_fingerprint = "h",
                                       .engine_version = "v",
                                       .threads = 4,
                                       .prefill_tps = NAN,
                                       .decode_tps = NAN,
                                       .mem_bw_gbs = NAN,
                                       .raw_json = "{\"truncated\": "};
    assert_int_equal(qr_store_calibration_add(s, &cal, NULL, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'raw_json' is not JSON"));
    cal.raw_json = "{}";
    cal.threads = 0;
    assert_int_equal(qr_store_calibration_add(s, &cal, NULL, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'threads'"));
    cal.threads = 4;
    cal.decode_tps = -1;
    assert_int_equal(qr_store_calibration_add(s, &cal, NULL, &d), QR_ERR_INVALID);
    cal.decode_tps = INFINITY;
    assert_int_equal(qr_store_calibration_add(s, &cal, NULL, &d), QR_ERR_INVALID);

    struct qr_store_conformance conf = {.backend_id = "b",
                                        .kind = "k",
                                        .engine_version = "v",
                                        .model = "m",
                                        .hardware_class = "h",
                                        .n_pass = -1,
                                        .report_json = "{}"};
    assert_int_equal(qr_store_conformance_add(s, &conf, NULL, &d), QR_ERR_INVALID);
    struct qr_store_bench b = {
        .name = "n", .variant_a = "a", .variant_b = "b", .metric = "m", .values_json = NULL};
    assert_int_equal(qr_store_bench_add(s, &b, NULL, &d), QR_ERR_INVALID);

    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.crashes, 1);
    assert_int_equal(st.calibrations, 0);
    assert_int_equal(st.conformance_runs, 0);
    assert_int_equal(st.bench_results, 0);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_NONE);
    qr_store_close(s);
}

static void test_filter_field_must_apply(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t n = 7;
    struct qr_store_filter flt = {.host_fingerprint = "h"};
    assert_int_equal(qr_store_crash_list(s, &flt, &a, &rows, &n, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'host_fingerprint'"));
    assert_int_equal(n, 0);
    struct qr_store_bench *brows = NULL;
    flt = (struct qr_store_filter){.backend_id = "llamacpp"};
    assert_int_equal(qr_store_bench_list(s, &flt, &a, &brows, &n, &d), QR_ERR_INVALID);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

/* A log tail keeps only its last QR_STORE_MAX_LOG_TAIL bytes, cut on a character boundary. */
static void test_log_tail_bounded(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    size_t len = 3 * QR_STORE_MAX_LOG_TAIL + 1; /* odd: the cut lands inside a character */
    char *log = malloc(len + 8);
    for (size_t i = 0; i + 1 < len; i += 2)
        memcpy(log + i, "\xc3\x9f", 2); /* U+00DF, two bytes each */
    log[len - 1] = 'Z';
    log[len] = '\0';
    struct qr_store_crash c = fx_crash(1, "llamacpp", log);
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_crash_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    size_t got = strlen(rows[0].log_tail);
    assert_int_equal(got, QR_STORE_MAX_LOG_TAIL - 1);
    assert_int_equal((unsigned char) rows[0].log_tail[0], 0xc3);
    assert_int_equal(rows[0].log_tail[got - 1], 'Z');
    assert_memory_equal(rows[0].log_tail, log + len - got, got);
    qr_arena_cleanup(&a);
    free(log);
    qr_store_close(s);
}

static void test_arena_cap_reported(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    char log[2048];
    memset(log, 'l', sizeof(log) - 1);
    log[sizeof(log) - 1] = '\0';
    for (int i = 0; i < 20; i++) {
        struct qr_store_crash c = fx_crash(i + 1, "llamacpp", log);
        assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    }
    struct qr_arena a;
    qr_arena_init(&a, 8192);
    struct qr_store_crash *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_crash_list(s, NULL, &a, &rows, &n, &d), QR_ERR_NOMEM);
    assert_int_equal(n, 0);
    assert_null(rows);
    qr_arena_cleanup(&a);
    qr_arena_init(&a, 1 << 20);
    assert_int_equal(qr_store_crash_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 20);
    assert_int_equal(rows[0].time_ms, 20);
    assert_int_equal(rows[19].time_ms, 1);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_stats_and_backup(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    for (int i = 0; i < 3; i++) {
        struct qr_store_crash c = fx_crash(i + 1, "llamacpp", "x");
        assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    }
    struct qr_store_bench b = {
        .name = "n", .variant_a = "a", .variant_b = "b", .metric = "m", .values_json = "[1]"};
    assert_int_equal(qr_store_bench_add(s, &b, NULL, &d), QR_OK);
    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.crashes, 3);
    assert_int_equal(st.bench_results, 1);
    assert_int_equal(st.calibrations, 0);
    assert_int_equal(st.conformance_runs, 0);
    assert_true(st.page_size >= 512);
    assert_true(st.page_count >= 6); /* sqlite_schema + 4 tables + schema_version + indexes */
    assert_true(st.wal_bytes > 0);   /* commits sit in the WAL until a checkpoint */
    assert_int_equal(qr_store_check(s, &d), QR_OK);

    char backup[256];
    snprintf(backup, sizeof(backup), "%s/backup.db", f->dir);
    assert_int_equal(qr_store_backup(s, backup, &d), QR_OK);
    assert_int_equal(qr_store_backup(s, backup, &d), QR_ERR_INVALID); /* never overwrites */
    qr_store_close(s);

    struct qr_store *copy = NULL;
    assert_int_equal(qr_store_open(backup, NULL, &copy, NULL, &d), QR_OK);
    assert_int_equal(qr_store_stats(copy, &st, &d), QR_OK);
    assert_int_equal(st.crashes, 3);
    assert_int_equal(st.bench_results, 1);
    qr_store_close(copy);
}

/* A SQLite file that is not an evidence store is refused and left alone. */
static void test_foreign_database_refused(void **state)
{
    struct fixture *f = *state;
    assert_int_equal(fx_sql_exec(f->path, "CREATE TABLE t (x); INSERT INTO t VALUES (1)"),
                     SQLITE_OK);
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = QR_STORE_RECREATE_CORRUPT};
    assert_int_equal(qr_store_open(f->path, &o, &s, &info, &d), QR_ERR_INVALID);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_FOREIGN);
    assert_non_null(strstr(d.msg, "not an evidence store"));
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM t"), 1);
    assert_int_equal(fx_count_files(f, QR_STORE_FILE ".corrupt-"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_creates_wal_store, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_empty_file_is_a_new_store, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_missing_directory_is_io_error, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_directory_path_is_io_error, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_two_writer_processes, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_crash_records_survive_reopen, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_time_zero_means_now, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_calibration_roundtrip, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_conformance_roundtrip, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_bench_roundtrip, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_records_refused, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_filter_field_must_apply, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_log_tail_bounded, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_arena_cap_reported, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_stats_and_backup, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_database_refused, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
