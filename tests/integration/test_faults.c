/* Fault tests for the daemon over loopback: upstreams that cut their answer in every way qr-replay
 * scripts (tests/cases/replay-faults) through each adapter path, a disk that fills while a record
 * is stored, an evidence store locked or corrupt when the daemon starts, SIGTERM with 100 streams
 * in flight and SIGHUP during traffic. Every client sees either a whole answer or an explicit
 * error in its API's shape (never a short success), the daemon keeps serving, and no stored
 * record is lost (docs/RELIABILITY.md "Faults"). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <dirent.h>
#include <sqlite3.h>
#include <yyjson.h>

#include "harness.h"

static struct qr_child replay;

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start_dir(&replay, QR_TEST_CASES "/replay-faults");
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* A daemon on the replay server: backend "ollama" (canonical or passthrough) or "openai". */
static void start_daemon(struct qr_child *d, const char *backend, bool passthrough,
                         const char *const *more_env, const char *const *args)
{
    static char oa_url[96];
    snprintf(oa_url, sizeof oa_url, "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", replay.port);
    const char *env[16] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=5s"};
    size_t n = 1;
    if (!strcmp(backend, "openai")) {
        env[n++] = "QUANTUM_RUNTIME_BACKEND=openai";
        env[n++] = oa_url;
    }
    if (passthrough)
        env[n++] = "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true";
    for (const char *const *e = more_env; e && *e && n < 15; e++)
        env[n++] = *e;
    env[n] = NULL;
    qr_t_daemon_start_args(d, replay.port, env, args);
}

static void chat(uint16_t port, const char *path, const char *marker, bool stream,
                 struct qr_t_resp *r)
{
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    char body[256];
    snprintf(
        body, sizeof body,
        "{\"model\":\"m\",\"stream\":%s,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}",
        stream ? "true" : "false", marker);
    qr_t_request("POST", port, path, hdrs, body, strlen(body), r);
}

/* ---- 1. upstream cuts its answer ---- */

/* A whole JSON error answer: 502 in the API's shape (OpenAI's object on /v1, Ollama's string on
 * /api -- or, on the passthrough path, the Runtime's {"error":{"code","message"}}). */
static void assert_whole_error(const struct qr_t_resp *r, const char *path, const char *what)
{
    if (r->status != 502)
        fprintf(stderr, "%s %s: status %ld body %s\n", what, path, r->status,
                r->body ? r->body : "");
    assert_int_equal(r->status, 502);
    assert_int_equal(r->curl_rc, CURLE_OK);
    char *ct = qr_t_header(r, "Content-Type");
    assert_non_null(ct);
    assert_non_null(strstr(ct, "application/json"));
    free(ct);
    yyjson_doc *doc = yyjson_read(r->body, r->body_len, 0);
    assert_non_null(doc);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    if (!strncmp(path, "/v1/", 4)) {
        assert_true(yyjson_is_obj(err));
        assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "code")), "upstream_error");
        assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "type")), "server_error");
        assert_true(yyjson_get_len(yyjson_obj_get(err, "message")) > 0);
    } else if (yyjson_is_obj(err)) {
        assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "code")), "upstream_error");
        assert_true(yyjson_get_len(yyjson_obj_get(err, "message")) > 0);
    } else {
        assert_true(yyjson_get_len(err) > 0);
    }
    yyjson_doc_free(doc);
}

/* A stream that started and was then cut upstream: it ends with an error event in the API's
 * shape and never as if complete (no done:true line, no finish_reason, nothing after [DONE]). */
static void assert_stream_error(const struct qr_t_resp *r, const char *path, const char *what)
{
    if (r->status != 200 || !r->body)
        fprintf(stderr, "%s %s: status %ld\n", what, path, r->status);
    assert_int_equal(r->status, 200);
    assert_non_null(r->body);
    if (!strncmp(path, "/v1/", 4)) {
        const char *ev = strstr(r->body, "\n\ndata: {\"error\":{");
        if (!ev)
            fprintf(stderr, "%s %s: no error event in %s\n", what, path, r->body);
        assert_non_null(ev);
        assert_null(strstr(r->body, "\"finish_reason\":\"stop\""));
        const char *done = strstr(r->body, "data: [DONE]");
        assert_true(!done || done > ev); /* [DONE] only after the error event */
        yyjson_doc *doc = yyjson_read(ev + 8, strcspn(ev + 8, "\n"), 0);
        assert_non_null(doc);
        yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
        assert_true(yyjson_get_len(yyjson_obj_get(err, "message")) > 0);
        yyjson_doc_free(doc);
        return;
    }
    assert_null(strstr(r->body, "\"done\":true"));
    /* the last line is Ollama's in-band {"error":"..."} */
    size_t len = r->body_len;
    while (len && r->body[len - 1] == '\n')
        len--;
    size_t start = len;
    while (start && r->body[start - 1] != '\n')
        start--;
    yyjson_doc *doc = yyjson_read(r->body + start, len - start, 0);
    if (!doc)
        fprintf(stderr, "%s %s: last line is not JSON: %s\n", what, path, r->body + start);
    assert_non_null(doc);
    assert_true(yyjson_get_len(yyjson_obj_get(yyjson_doc_get_root(doc), "error")) > 0);
    yyjson_doc_free(doc);
}

static void assert_serves(const struct qr_child *d)
{
    assert_int_equal(kill(d->pid, 0), 0);
    struct qr_t_resp r;
    chat(d->port, "/api/chat", "qrf-ok-s", true, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.curl_rc, CURLE_OK);
    assert_non_null(strstr(r.body, "\"done\":true"));
    qr_t_resp_free(&r);
    chat(d->port, "/v1/chat/completions", "qrf-ok-n", false, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"finish_reason\":\"stop\""));
    qr_t_resp_free(&r);
}

/* Every fault x both client routes x streamed and not, on one daemon. */
static void cut_matrix(struct qr_child *d, const char *label)
{
    static const char *const faults[] = {"trunc", "malformed", "cbh", "mid"};
    static const char *const paths[] = {"/api/chat", "/v1/chat/completions"};
    for (size_t f = 0; f < 4; f++) {
        for (size_t p = 0; p < 2; p++) {
            for (int s = 0; s < 2; s++) {
                char marker[32], what[96];
                snprintf(marker, sizeof marker, "qrf-%s-%s", faults[f], s ? "s" : "n");
                snprintf(what, sizeof what, "%s %s", label, marker);
                struct qr_t_resp r;
                chat(d->port, paths[p], marker, s, &r);
                /* a cut before the head is a whole error even for a streamed request */
                if (!s || !strcmp(faults[f], "cbh"))
                    assert_whole_error(&r, paths[p], what);
                else
                    assert_stream_error(&r, paths[p], what);
                qr_t_resp_free(&r);
            }
        }
        assert_serves(d); /* still up after each fault */
    }
}

static void test_cut_upstream_ollama_canonical(void **state)
{
    (void) state;
    struct qr_child d;
    start_daemon(&d, "ollama", false, NULL, NULL);
    cut_matrix(&d, "canonical");
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* Passthrough: a streamed cut gets Ollama's error line before the HTTP-level cut; a whole answer
 * is held until it ended, so a cut one is a 502 and never a short 200. */
static void test_cut_upstream_ollama_passthrough(void **state)
{
    (void) state;
    struct qr_child d;
    start_daemon(&d, "ollama", true, NULL, NULL);
    cut_matrix(&d, "passthrough");
    /* the passthrough path is the one taken: the replay server saw the client's body verbatim */
    struct qr_t_resp r;
    chat(d.port, "/api/chat", "qrf-ok-n", false, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.curl_rc, CURLE_OK);
    assert_string_equal(r.body,
                        "{\"model\":\"m\",\"created_at\":\"2026-01-01T00:00:00Z\",\"message\":"
                        "{\"role\":\"assistant\",\"content\":\"Fine.\"},\"done\":true,"
                        "\"done_reason\":\"stop\",\"eval_count\":2}");
    char *cl = qr_t_header(&r, "Content-Length");
    assert_non_null(cl);
    assert_int_equal(atoi(cl), (int) r.body_len);
    free(cl);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

static void test_cut_upstream_openai(void **state)
{
    (void) state;
    struct qr_child d;
    start_daemon(&d, "openai", false, NULL, NULL);
    cut_matrix(&d, "openai");
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* ---- evidence store helpers ---- */

static void make_tmpdir(char *dir, size_t cap, const char *what)
{
    snprintf(dir, cap, "/tmp/qr-faults-%s-%d-XXXXXX", what, (int) getpid());
    assert_non_null(mkdtemp(dir));
}

static void rm_rf(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* `calibrate --memory-only` into state_dir (one calibration_run record), optionally under a file
 * size limit of fsize_blocks x 512 bytes with SIGXFSZ ignored (writes past it fail with EFBIG,
 * as on a full disk). Returns the exit status; *out: its output. */
static int run_calibrate(const char *state_dir, int fsize_blocks, char **out)
{
    char script[200];
    snprintf(script, sizeof script, "trap '' XFSZ; %s%d; exec \"$0\" \"$@\"",
             fsize_blocks > 0 ? "ulimit -f " : ": ", fsize_blocks);
    /* no --json: the output file is under the limit too, and must keep the error line */
    char *argv[] = {
        "/bin/sh",     "-c",    script,        QR_TEST_DAEMON,     "calibrate", "--memory-only",
        "--log-level", "error", "--state-dir", (char *) state_dir, NULL};
    *out = NULL;
    return qr_t_run(argv, NULL, 60000, out);
}

/* Rows in a table of the store, -1 when it cannot be read; integrity_check's answer in ok. */
static int count_rows(const char *db_path, const char *table, bool *ok)
{
    sqlite3 *db = NULL;
    int n = -1;
    *ok = false;
    if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
        goto done;
    sqlite3_busy_timeout(db, 2000);
    char sql[128];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    st = NULL;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        *ok = !strcmp((const char *) sqlite3_column_text(st, 0), "ok");
    sqlite3_finalize(st);
done:
    sqlite3_close(db);
    return n;
}

/* ---- 2. disk full while a record is stored ---- */

static void test_disk_full_keeps_earlier_records(void **state)
{
    (void) state;
    char dir[128], db[200];
    make_tmpdir(dir, sizeof dir, "full");
    snprintf(db, sizeof db, "%s/evidence.db", dir);
    char *out = NULL;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(run_calibrate(dir, 0, &out), 0);
        free(out);
    }
    bool ok = false;
    assert_int_equal(count_rows(db, "calibration_run", &ok), 2);
    assert_true(ok);
    struct stat before;
    assert_int_equal(stat(db, &before), 0);

    /* 8 and 16 blocks (4-16 KiB, whether the shell counts 512- or 1024-byte blocks): below the
     * main file's size, so nothing may grow, and below the 32 KiB WAL index -- the record cannot
     * be written */
    const int limits[] = {8, 16};
    for (size_t i = 0; i < 2; i++) {
        int rc = run_calibrate(dir, limits[i], &out);
        if (rc != 1)
            fprintf(stderr, "calibrate under ulimit -f %d: rc %d: %s\n", limits[i], rc, out);
        assert_int_equal(rc, 1); /* a clear failure, not a signal or a sanitizer report */
        assert_non_null(strstr(out, "cannot store the result"));
        assert_non_null(strstr(out, db)); /* names the file */
        assert_null(strstr(out, "Sanitizer"));
        free(out);
        assert_int_equal(count_rows(db, "calibration_run", &ok), 2);
        assert_true(ok);
    }
    /* space is back: the next record lands next to the earlier ones */
    assert_int_equal(run_calibrate(dir, 0, &out), 0);
    free(out);
    assert_int_equal(count_rows(db, "calibration_run", &ok), 3);
    assert_true(ok);
    rm_rf(dir);
}

/* Does a file name in dir contain needle? */
static bool dir_has(const char *dir, const char *needle)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    struct dirent *e;
    bool found = false;
    while ((e = readdir(dp)))
        found |= strstr(e->d_name, needle) != NULL;
    closedir(dp);
    return found;
}

/* The daemon's own calibration (POST /v1/host/calibrate, a child writing the default model and
 * then the record) under a 64 KiB file-size limit: a 500 calibration_failed that says why (the
 * child's error, or the signal that killed it -- not its last progress line), the daemon serves
 * on, and the earlier record is intact. */
static void test_daemon_calibration_on_full_disk(void **state)
{
    (void) state;
    char dir[128], db[200];
    make_tmpdir(dir, sizeof dir, "dfull");
    snprintf(db, sizeof db, "%s/evidence.db", dir);
    char *out = NULL;
    assert_int_equal(run_calibrate(dir, 0, &out), 0);
    free(out);

    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 64 * 1024;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN); /* inherited: EFBIG instead of a signal */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    const char *const args[] = {"--state-dir", dir, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, 0, NULL, args);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, prev);

    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/v1/host/calibrate", hdrs, "{}", 2, &r);
    assert_int_equal(r.status, 500);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *err = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(err, "code")), "calibration_failed");
    const char *msg = yyjson_get_str(yyjson_obj_get(err, "message"));
    assert_non_null(msg);
    if (!strstr(msg, "File too large") && !strstr(msg, "killed by signal"))
        fail_msg("calibration_failed does not say why: %s", msg);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    bool ok = false;
    assert_int_equal(count_rows(db, "calibration_run", &ok), 1);
    assert_true(ok);
    assert_false(dir_has(dir, ".tmp-")); /* the killed child's partial model is removed */
    rm_rf(dir);
}

/* ---- 3. evidence store locked or corrupt at start ---- */

/* Start a daemon on state_dir; /v1/backends and /v1/host (which read the store) still answer,
 * within a bound, and inference is served. */
static void start_on_state(struct qr_child *d, const char *state_dir)
{
    const char *const args[] = {"--state-dir", state_dir, NULL};
    start_daemon(d, "ollama", false, NULL, args);
    struct qr_t_resp r;
    double t0 = now_ms();
    qr_t_request("GET", d->port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    qr_t_request("GET", d->port, "/v1/host", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_true(now_ms() - t0 < 5000);
    assert_serves(d);
}

/* The store's writer in the daemon: backend llama.cpp opens the store at start (no engine is
 * started without a request). It starts, logs the store as unavailable, and answers. */
static void llama_on_state(const char *state_dir)
{
    char models[260];
    snprintf(models, sizeof models, "%s/no-models", state_dir);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=llama.cpp", NULL};
    const char *const args[] = {"--state-dir", state_dir, "--models-dir", models, NULL};
    struct qr_child d;
    double t0 = now_ms();
    qr_t_daemon_start_args(&d, 0, env, args);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_true(now_ms() - t0 < 10000);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(
        qr_t_log_contains(&d, "evidence store unavailable: engine crashes are logged only"));
}

static char *read_all(const char *path, size_t *len)
{
    char *b = qr_t_read_file(path, len);
    assert_non_null(b);
    return b;
}

/* Only evidence.db (and SQLite's -wal/-shm) in dir: nothing moved aside, nothing new. */
static void assert_nothing_moved(const char *dir)
{
    DIR *dp = opendir(dir);
    assert_non_null(dp);
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (e->d_name[0] == '.')
            continue;
        if (strstr(e->d_name, ".corrupt-"))
            fprintf(stderr, "moved aside: %s\n", e->d_name);
        assert_null(strstr(e->d_name, ".corrupt-"));
    }
    closedir(dp);
}

static void test_corrupt_store_at_start_left_untouched(void **state)
{
    (void) state;
    char dir[128], db[200], good[200];
    make_tmpdir(dir, sizeof dir, "corrupt");
    snprintf(db, sizeof db, "%s/evidence.db", dir);
    snprintf(good, sizeof good, "%s/good", dir);
    mkdir(good, 0700);
    char *out = NULL;
    assert_int_equal(run_calibrate(good, 0, &out), 0);
    free(out);
    char gdb[260];
    snprintf(gdb, sizeof gdb, "%s/evidence.db", good);
    size_t glen = 0;
    char *gbytes = read_all(gdb, &glen);
    assert_true(glen >= 3 * 4096);

    char garbage[5000];
    for (size_t i = 0; i < sizeof garbage; i++)
        garbage[i] = (char) (i * 131u + 7u);
    const char text[] = "this is not a database\n";
    struct {
        const char *name;
        const char *bytes;
        size_t len;
    } cases[] = {
        {"garbage", garbage, sizeof garbage},
        {"not-sqlite", text, sizeof text - 1},
        {"truncated-mid-page", gbytes, glen - 1000},
        {"truncated-on-page", gbytes, 2 * 4096},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(db, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(cases[i].bytes, 1, cases[i].len, f), cases[i].len);
        fclose(f);
        struct qr_child d;
        start_on_state(&d, dir);
        assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
        if (!qr_t_log_contains(&d, "evidence store is corrupt, refusing to open it"))
            fprintf(stderr, "%s: no corrupt-store log line\n", cases[i].name);
        assert_true(qr_t_log_contains(&d, "evidence store is corrupt, refusing to open it"));
        /* every reader's log line names the cause (/v1/host's open passes no diagnostic) */
        char no_cause[300];
        snprintf(no_cause, sizeof no_cause, "refusing to open it\",\"path\":\"%s\",\"detail\":\"\"",
                 db);
        assert_false(qr_t_log_contains(&d, no_cause));
        llama_on_state(dir);
        size_t len = 0;
        char *now = read_all(db, &len);
        assert_int_equal(len, cases[i].len);
        assert_memory_equal(now, cases[i].bytes, len); /* byte for byte */
        free(now);
        assert_nothing_moved(dir);
    }
    free(gbytes);
    rm_rf(dir);
}

/* A child holding the store with an exclusive lock (locking_mode=EXCLUSIVE + BEGIN EXCLUSIVE
 * with a pending write) until the parent closes `release`. */
static pid_t hold_exclusive(const char *db_path, int *release)
{
    int ready[2], rel[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0); /* the daemon must not inherit them */
    assert_int_equal(pipe2(rel, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(ready[0]);
        close(rel[1]);
        sqlite3 *db = NULL;
        char c = 'x';
        if (sqlite3_open(db_path, &db) == SQLITE_OK &&
            sqlite3_exec(db,
                         "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE;"
                         "CREATE TABLE lock_probe(x); INSERT INTO lock_probe VALUES(1);",
                         NULL, NULL, NULL) == SQLITE_OK)
            c = 'r';
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        while (read(rel[0], &c, 1) > 0) {
        }
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(0);
    }
    close(ready[1]);
    close(rel[0]);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    assert_int_equal(c, 'r');
    *release = rel[1];
    return pid;
}

static void test_locked_store_at_start(void **state)
{
    (void) state;
    char dir[128], db[200];
    make_tmpdir(dir, sizeof dir, "locked");
    snprintf(db, sizeof db, "%s/evidence.db", dir);
    char *out = NULL;
    assert_int_equal(run_calibrate(dir, 0, &out), 0);
    free(out);
    int release = -1;
    pid_t holder = hold_exclusive(db, &release);
    struct qr_child d;
    start_on_state(&d, dir); /* serves while the store is locked: reads give up after a bound */
    assert_true(qr_t_log_contains(&d, "the evidence store does not open"));
    llama_on_state(dir); /* gives up after the store's 2 s busy timeout, then serves */
    close(release);
    int st = 0;
    assert_int_equal(waitpid(holder, &st, 0), holder);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the lock is gone: the daemon reads the store again, and the record is still there */
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    bool ok = false;
    assert_int_equal(count_rows(db, "calibration_run", &ok), 1);
    assert_true(ok);
    assert_nothing_moved(dir);
    rm_rf(dir);
}

/* ---- many raw streaming clients on poll() ---- */

struct client {
    int fd;
    bool sse;
    bool closed;
    char req[512];
    size_t req_len, sent;
    char *buf;
    size_t len, cap;
};

/* Connect (non-blocking) and queue the request; c->fd is -1 when the connection is refused. */
static void client_open_maybe(struct client *c, uint16_t port, bool sse, const char *marker)
{
    memset(c, 0, sizeof(*c));
    c->sse = sse;
    char body[200];
    int blen = snprintf(body, sizeof body,
                        "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                        "\"content\":\"%s\"}]}",
                        marker);
    c->req_len = (size_t) snprintf(c->req, sizeof c->req,
                                   "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                   "application/json\r\nContent-Length: %d\r\nConnection: "
                                   "close\r\n\r\n%s",
                                   sse ? "/v1/chat/completions" : "/api/chat", blen, body);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    assert_true(c->fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = connect(c->fd, (struct sockaddr *) &a, sizeof a);
    if (rc != 0 && errno != EINPROGRESS) {
        close(c->fd);
        c->fd = -1;
    }
}

static void client_open(struct client *c, uint16_t port, bool sse, const char *marker)
{
    client_open_maybe(c, port, sse, marker);
    assert_true(c->fd >= 0);
}

/* Drive every client until all closed or the deadline; returns how many are still open. */
static size_t pump(struct client *cs, size_t n, double until_ms)
{
    struct pollfd pf[128];
    assert_true(n <= 128);
    for (;;) {
        size_t open = 0;
        for (size_t i = 0; i < n; i++) {
            pf[i].fd = cs[i].closed ? -1 : cs[i].fd;
            pf[i].events = POLLIN | (cs[i].sent < cs[i].req_len ? POLLOUT : 0);
            pf[i].revents = 0;
            open += !cs[i].closed;
        }
        double left = until_ms - now_ms();
        if (!open || left <= 0)
            return open;
        if (poll(pf, n, (int) left + 1) < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        for (size_t i = 0; i < n; i++) {
            struct client *c = &cs[i];
            if (!pf[i].revents)
                continue;
            if ((pf[i].revents & POLLOUT) && c->sent < c->req_len) {
                ssize_t w = send(c->fd, c->req + c->sent, c->req_len - c->sent, MSG_NOSIGNAL);
                if (w > 0)
                    c->sent += (size_t) w;
            }
            if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (c->len + 4096 + 1 > c->cap) {
                    c->cap = (c->cap + 4096) * 2;
                    c->buf = realloc(c->buf, c->cap);
                    assert_non_null(c->buf);
                }
                ssize_t r = recv(c->fd, c->buf + c->len, c->cap - c->len - 1, 0);
                if (r > 0) {
                    c->len += (size_t) r;
                    c->buf[c->len] = '\0';
                } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
                    close(c->fd);
                    c->closed = true;
                }
            }
        }
    }
}

enum outcome { O_BAD, O_COMPLETE, O_ERROR_EVENT };

/* De-chunk the body of a whole response; *terminated: the 0-chunk was seen. NULL when a chunk
 * header is malformed. The payload is malloc'd, NUL-terminated. */
static char *dechunk(const char *p, const char *end, size_t *out_len, bool *terminated)
{
    char *out = malloc((size_t) (end - p) + 1);
    size_t n = 0;
    *terminated = false;
    while (p < end) {
        const char *eol = strstr(p, "\r\n");
        if (!eol || eol >= end)
            break; /* cut inside a chunk-size line */
        char *num_end;
        unsigned long sz = strtoul(p, &num_end, 16);
        if (num_end == p) {
            free(out);
            return NULL;
        }
        p = eol + 2;
        if (sz == 0) {
            *terminated = true;
            break;
        }
        size_t take = (size_t) (end - p) < sz ? (size_t) (end - p) : sz;
        memcpy(out + n, p, take);
        n += take;
        p += take;
        if (take < sz)
            break;
        p += 2;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

/* Classify one client's bytes: a whole stream, or one that ends with an error event; anything
 * else (a line or event cut in the middle, invalid JSON, a cut without an error) is O_BAD. */
static enum outcome classify(const struct client *c, char *why, size_t cap)
{
    const char *head_end = c->buf ? strstr(c->buf, "\r\n\r\n") : NULL;
    if (!head_end || strncmp(c->buf, "HTTP/1.1 200", 12)) {
        snprintf(why, cap, "no 200 head: %.80s", c->buf ? c->buf : "(nothing)");
        return O_BAD;
    }
    bool terminated = false;
    size_t n = 0;
    char *body = dechunk(head_end + 4, c->buf + c->len, &n, &terminated);
    if (!body) {
        snprintf(why, cap, "malformed chunk framing");
        return O_BAD;
    }
    enum outcome o = O_BAD;
    bool saw_error = false, saw_finish = false, saw_done_marker = false, last_error = false;
    const char *sep = c->sse ? "\n\n" : "\n";
    size_t seplen = strlen(sep);
    const char *p = body;
    snprintf(why, cap, "ends without completing or an error event");
    while (*p) {
        const char *e = strstr(p, sep);
        if (!e) {
            snprintf(why, cap, "cut mid-%s: %.60s", c->sse ? "event" : "line", p);
            goto done;
        }
        const char *json = p;
        size_t jlen = (size_t) (e - p);
        if (c->sse) {
            if (strncmp(p, "data: ", 6)) {
                snprintf(why, cap, "not a data event: %.60s", p);
                goto done;
            }
            json += 6;
            jlen -= 6;
            if (jlen == 6 && !strncmp(json, "[DONE]", 6)) {
                saw_done_marker = true;
                p = e + seplen;
                continue;
            }
        }
        yyjson_doc *doc = yyjson_read(json, jlen, 0);
        if (!doc) {
            snprintf(why, cap, "not JSON: %.60s", json);
            goto done;
        }
        yyjson_val *root = yyjson_doc_get_root(doc);
        last_error = yyjson_obj_get(root, "error") != NULL;
        saw_error |= last_error;
        if (c->sse) {
            yyjson_val *fr =
                yyjson_obj_get(yyjson_arr_get(yyjson_obj_get(root, "choices"), 0), "finish_reason");
            saw_finish |= yyjson_is_str(fr);
        } else {
            saw_finish |= yyjson_get_bool(yyjson_obj_get(root, "done"));
        }
        yyjson_doc_free(doc);
        p = e + seplen;
    }
    if (c->sse ? saw_error : last_error)
        o = O_ERROR_EVENT;
    else if (terminated && saw_finish && (!c->sse || saw_done_marker))
        o = O_COMPLETE;
done:
    free(body);
    return o;
}

static void clients_free(struct client *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!cs[i].closed)
            close(cs[i].fd);
        free(cs[i].buf);
    }
}

/* Every client has its response head (its stream is in flight at the engine). */
static bool all_started(const struct client *cs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!cs[i].buf || !strstr(cs[i].buf, "\r\n\r\n"))
            return false;
    }
    return true;
}

/* ---- 4. SIGTERM with 100 streams in flight ---- */

#define N_TERM 100

/* SIGTERM once every stream has its head. bound_ms: the shutdown_timeout; the streams take about
 * 1 s, so with 10 s they all finish, and with 400 ms the bound ends them (in-band). */
static void sigterm_with_streams(int bound_ms)
{
    char timeout[64];
    snprintf(timeout, sizeof timeout, "QUANTUM_RUNTIME_SHUTDOWN_TIMEOUT=%dms", bound_ms);
    const char *const env[] = {timeout, NULL};
    const int exit_within_ms = bound_ms + 2000;
    struct qr_child d;
    start_daemon(&d, "ollama", false, env, NULL);
    static struct client cs[N_TERM];
    for (size_t i = 0; i < N_TERM; i++)
        client_open(&cs[i], d.port, i % 2 == 1, "qrf-slow");
    double t0 = now_ms();
    while (!all_started(cs, N_TERM) && now_ms() - t0 < 10000)
        pump(cs, N_TERM, now_ms() + 20);
    assert_true(all_started(cs, N_TERM));

    kill(d.pid, SIGTERM);
    double t_term = now_ms();
    pump(cs, N_TERM, now_ms() + 100);
    /* no longer accepting: a new client is refused, or at least never answered */
    struct client late;
    client_open_maybe(&late, d.port, false, "qrf-ok-s");
    if (late.fd >= 0) {
        pump(&late, 1, now_ms() + 500);
        assert_true(!late.buf || !strstr(late.buf, "HTTP/1.1 200"));
        clients_free(&late, 1);
    }
    assert_int_equal(pump(cs, N_TERM, t_term + exit_within_ms), 0);
    /* signal 0: only wait (a second SIGTERM would mean "exit now") */
    int rc = qr_t_stop(&d, 0, exit_within_ms - (int) (now_ms() - t_term));
    assert_int_equal(rc, 0);
    assert_true(now_ms() - t_term < exit_within_ms);

    size_t complete = 0, errors = 0;
    for (size_t i = 0; i < N_TERM; i++) {
        char why[160];
        enum outcome o = classify(&cs[i], why, sizeof why);
        if (o == O_BAD)
            fail_msg("client %zu (%s): %s", i, cs[i].sse ? "sse" : "ndjson", why);
        complete += o == O_COMPLETE;
        errors += o == O_ERROR_EVENT;
    }
    if (bound_ms >= 5000) {
        /* well inside the bound: every stream finishes */
        assert_int_equal(complete, N_TERM);
        assert_int_equal(errors, 0);
        assert_true(qr_t_log_contains(&d, "shutdown complete"));
    } else {
        /* the bound ended them: explicitly (cancelled or an error event), never cut */
        assert_int_equal(complete + errors, N_TERM);
        assert_true(qr_t_log_contains(&d, "shutdown timeout"));
        for (size_t i = 0; i < N_TERM; i++) {
            assert_null(strstr(cs[i].buf, "\"done_reason\":\"stop\""));
            assert_null(strstr(cs[i].buf, "\"finish_reason\":\"stop\""));
        }
    }
    clients_free(cs, N_TERM);
}

static void test_sigterm_with_100_streams(void **state)
{
    (void) state;
    sigterm_with_streams(10000);
}

static void test_sigterm_bound_with_100_streams(void **state)
{
    (void) state;
    sigterm_with_streams(400);
}

/* ---- 5. SIGHUP during traffic ---- */

#define N_HUP 30

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static size_t count_in_log(const struct qr_child *d, const char *needle)
{
    char *text = qr_t_read_file(d->log, NULL);
    size_t n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(text);
    return n;
}

/* Wait for the n-th occurrence of needle in the log, pumping the clients meanwhile. */
static void wait_log(const struct qr_child *d, const char *needle, size_t n, struct client *cs,
                     size_t ncs)
{
    double t0 = now_ms();
    while (count_in_log(d, needle) < n && now_ms() - t0 < 5000)
        pump(cs, ncs, now_ms() + 10);
    assert_true(count_in_log(d, needle) >= n);
}

/* A request served while the streams run; access-log lines for /healthz show the log level
 * in force (info: logged, warn: not). */
static void served_between(uint16_t port)
{
    struct qr_t_resp r;
    qr_t_request("GET", port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    chat(port, "/v1/chat/completions", "qrf-ok-s", true, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "data: [DONE]"));
    qr_t_resp_free(&r);
}

static void test_sighup_during_traffic(void **state)
{
    (void) state;
    char path[] = "/tmp/qr-faults-hup-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_text(path, "{\"log_level\":\"info\"}");
    const char *const args[] = {"--config", path, NULL};
    struct qr_child d;
    start_daemon(&d, "ollama", false, NULL, args);
    static struct client cs[N_HUP];
    for (size_t i = 0; i < N_HUP; i++)
        client_open(&cs[i], d.port, i % 3 == 0, "qrf-slow");
    pump(cs, N_HUP, now_ms() + 100);
    const char *ver = "\"path\":\"/healthz\"";

    served_between(d.port); /* info: logged */
    size_t logged = count_in_log(&d, ver);
    assert_int_equal(logged, 1);

    /* a plain reload, nothing changed */
    kill(d.pid, SIGHUP);
    wait_log(&d, "configuration reloaded", 1, cs, N_HUP);
    served_between(d.port);
    assert_int_equal(count_in_log(&d, ver), 2);

    /* a changed reloadable value: info lines stop */
    write_text(path, "{\"log_level\":\"warn\"}");
    kill(d.pid, SIGHUP);
    pump(cs, N_HUP, now_ms() + 300); /* nothing to wait for in the log: info is off now */
    served_between(d.port);
    assert_int_equal(count_in_log(&d, ver), 2);

    /* an invalid file is refused; the warn level stays in force */
    write_text(path, "{\"log_level\":\"loud\"}");
    kill(d.pid, SIGHUP);
    wait_log(&d, "reload refused", 1, cs, N_HUP);
    served_between(d.port);
    assert_int_equal(count_in_log(&d, ver), 2);

    /* back to info */
    write_text(path, "{\"log_level\":\"info\"}");
    kill(d.pid, SIGHUP);
    wait_log(&d, "configuration reloaded", 2, cs, N_HUP);
    served_between(d.port);
    assert_int_equal(count_in_log(&d, ver), 3);

    assert_int_equal(pump(cs, N_HUP, now_ms() + 10000), 0);
    for (size_t i = 0; i < N_HUP; i++) {
        char why[160];
        enum outcome o = classify(&cs[i], why, sizeof why);
        if (o != O_COMPLETE)
            fail_msg("client %zu (%s): %s", i, cs[i].sse ? "sse" : "ndjson", why);
    }
    clients_free(cs, N_HUP);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cut_upstream_ollama_canonical),
        cmocka_unit_test(test_cut_upstream_ollama_passthrough),
        cmocka_unit_test(test_cut_upstream_openai),
        cmocka_unit_test(test_disk_full_keeps_earlier_records),
        cmocka_unit_test(test_daemon_calibration_on_full_disk),
        cmocka_unit_test(test_corrupt_store_at_start_left_untouched),
        cmocka_unit_test(test_locked_store_at_start),
        cmocka_unit_test(test_sigterm_with_100_streams),
        cmocka_unit_test(test_sigterm_bound_with_100_streams),
        cmocka_unit_test(test_sighup_during_traffic),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
