/* Evidence store under faults (issue 10 "Under faults"): disk full while writing, a file locked by
 * another connection or process, a corrupt or truncated file at start, a file from a newer schema,
 * and a writer killed with SIGKILL mid-loop. In every case no committed record is lost and the
 * file still passes integrity_check. Every wait is bounded. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include "store_fixture.h"

static struct qr_store *open_ok(const char *path, unsigned flags, unsigned busy_ms)
{
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = flags, .busy_timeout_ms = busy_ms};
    if (qr_store_open(path, &o, &s, NULL, &d))
        fail_msg("open: %s", d.msg);
    return s;
}

static int64_t count_crashes(struct qr_store *s)
{
    struct qr_store_stats st;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    return st.crashes;
}

/* Read a whole file (at most 1 MiB) into buf; its length. */
static size_t slurp(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    return n;
}

/* A closed store at f->path holding n crash records with ~size-byte log tails. */
static void make_store(const struct fixture *f, int n, size_t size)
{
    struct qr_store *s = open_ok(f->path, 0, 0);
    char *log = malloc(size + 1);
    memset(log, 'l', size);
    log[size] = '\0';
    struct qr_diag d = {{0}};
    for (int i = 0; i < n; i++) {
        struct qr_store_crash c = fx_crash(i + 1, "llamacpp", log);
        assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    }
    free(log);
    qr_store_close(s); /* last connection: the WAL is checkpointed into the file */
}

/* --- disk full ---------------------------------------------------------------------------- */

static void test_disk_full_keeps_earlier_records(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f->path, 0, 0);
    struct qr_diag d = {{0}};
    char log[3000];
    memset(log, 'x', sizeof(log) - 1);
    log[sizeof(log) - 1] = '\0';
    for (int i = 0; i < 5; i++) {
        struct qr_store_crash c = fx_crash(i + 1, "llamacpp", log);
        assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    }
    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    int64_t cap = 0;
    assert_int_equal(qr_store_limit_pages(s, st.page_count + 3, &cap, &d), QR_OK);
    assert_int_equal(cap, st.page_count + 3);

    int ok = 5;
    enum qr_err err = QR_OK;
    for (int i = 0; i < 1000 && !err; i++) {
        struct qr_store_crash c = fx_crash(100 + i, "llamacpp", log);
        err = qr_store_crash_add(s, &c, NULL, &d);
        if (!err)
            ok++;
    }
    assert_int_equal(err, QR_ERR_IO);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_FULL);
    assert_non_null(strstr(d.msg, f->path));
    assert_non_null(strstr(d.msg, "full"));
    assert_true(ok > 5); /* some fitted before the cap */

    /* the failed write left nothing half-done; the store still reads and checks clean */
    assert_int_equal(count_crashes(s), ok);
    assert_int_equal(qr_store_check(s, &d), QR_OK);
    /* a second failure is the same failure, not a different one */
    struct qr_store_crash c = fx_crash(9999, "llamacpp", log);
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_ERR_IO);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_FULL);

    /* space comes back: writes work again */
    assert_int_equal(qr_store_limit_pages(s, 0, NULL, &d), QR_OK);
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    qr_store_close(s);

    s = open_ok(f->path, 0, 0);
    assert_int_equal(count_crashes(s), ok + 1);
    assert_int_equal(qr_store_check(s, &d), QR_OK);
    qr_store_close(s);
}

/* A write that fails inside its transaction (here a trigger behind the store's back aborts the
 * INSERT) is rolled back whole: the next write starts a clean transaction. */
static void test_failed_write_rolls_back(void **state)
{
    struct fixture *f = *state;
    make_store(f, 2, 10);
    assert_int_equal(fx_sql_exec(f->path, "CREATE TRIGGER boom BEFORE INSERT ON engine_crash "
                                          "WHEN NEW.reason = 'boom' BEGIN "
                                          "SELECT RAISE(ABORT, 'refused by trigger'); END"),
                     SQLITE_OK);
    struct qr_store *s = open_ok(f->path, 0, 0);
    struct qr_diag d = {{0}};
    struct qr_store_crash c = fx_crash(10, "llamacpp", "x");
    c.reason = "boom";
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_ERR_INVALID);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_CONSTRAINT);
    assert_non_null(strstr(d.msg, "refused by trigger"));
    c.reason = "fine";
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    assert_int_equal(count_crashes(s), 3);
    qr_store_close(s);
}

/* --- locked ------------------------------------------------------------------------------- */

/* Another connection holds the write lock: a write gives up after the busy timeout with BUSY,
 * not a hang, and succeeds once the lock is gone. */
static void test_write_lock_held_elsewhere(void **state)
{
    struct fixture *f = *state;
    make_store(f, 3, 10);
    struct qr_store *s = open_ok(f->path, 0, 250);
    sqlite3 *other = NULL;
    assert_int_equal(sqlite3_open(f->path, &other), SQLITE_OK);
    assert_int_equal(sqlite3_exec(other, "BEGIN EXCLUSIVE", NULL, NULL, NULL), SQLITE_OK);

    struct qr_diag d = {{0}};
    struct qr_store_crash c = fx_crash(50, "llamacpp", "x");
    int64_t t0 = fx_now_ms();
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_ERR_BUSY);
    int64_t waited = fx_now_ms() - t0;
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_BUSY);
    assert_non_null(strstr(d.msg, f->path));
    assert_true(waited >= 200 && waited < 3000);
    assert_int_equal(count_crashes(s), 3); /* reads still work under WAL */

    assert_int_equal(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(other);
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    assert_int_equal(count_crashes(s), 4);
    qr_store_close(s);
}

/* Another process holds the file in exclusive locking mode: open fails with BUSY naming the file
 * within the busy timeout, and leaves the records alone. */
static void test_open_locked_by_other_process(void **state)
{
    struct fixture *f = *state;
    make_store(f, 4, 10);
    int ready[2], release[2];
    assert_int_equal(pipe(ready), 0);
    assert_int_equal(pipe(release), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(30); /* never outlive a broken parent */
        close(ready[0]);
        close(release[1]);
        sqlite3 *db = NULL;
        int rc = sqlite3_open(f->path, &db);
        rc = rc ? rc
                : sqlite3_exec(db, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE", NULL, NULL,
                               NULL);
        char c = rc == SQLITE_OK ? 'r' : 'e';
        if (write(ready[1], &c, 1) != 1)
            _exit(2);
        if (read(release[0], &c, 1) < 0) /* EOF when the parent closes its end */
            _exit(3);
        sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(db);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    struct pollfd p = {.fd = ready[0], .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    char c = 0;
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(c, 'r');

    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = QR_STORE_RECREATE_CORRUPT, .busy_timeout_ms = 300};
    int64_t t0 = fx_now_ms();
    enum qr_err err = qr_store_open(f->path, &o, &s, &info, &d);
    int64_t waited = fx_now_ms() - t0;
    close(release[1]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(ready[0]);
    assert_int_equal(err, QR_ERR_BUSY);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_BUSY);
    assert_false(info.recreated); /* locked is not corrupt: nothing moved aside */
    assert_non_null(strstr(d.msg, f->path));
    assert_true(waited >= 250 && waited < 5000);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(fx_count_files(f, QR_STORE_FILE ".corrupt-"), 0);

    s = open_ok(f->path, 0, 0);
    assert_int_equal(count_crashes(s), 4);
    qr_store_close(s);
}

/* --- corrupt at start --------------------------------------------------------------------- */

static void overwrite(const char *path, long off, const char *bytes, size_t n)
{
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, bytes, n, off), (ssize_t) n);
    close(fd);
}

static void expect_corrupt_refused(const struct fixture *f, const char *what)
{
    static char before[1 << 20], after[1 << 20];
    size_t n0 = slurp(f->path, before, sizeof(before));
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_store_open(f->path, NULL, &s, &info, &d);
    if (err != QR_ERR_INVALID)
        fail_msg("%s: open gave %d (%s)", what, err, d.msg);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_CORRUPT);
    assert_non_null(strstr(d.msg, f->path));
    assert_non_null(strstr(d.msg, "corrupt"));
    /* refused means untouched: same bytes, nothing moved, no new store */
    size_t n1 = slurp(f->path, after, sizeof(after));
    assert_int_equal(n0, n1);
    assert_memory_equal(before, after, n0);
    assert_int_equal(fx_count_files(f, QR_STORE_FILE ".corrupt-"), 0);
}

static void expect_corrupt_recreated(const struct fixture *f)
{
    static char before[1 << 20], moved[1 << 20];
    size_t n0 = slurp(f->path, before, sizeof(before));
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = QR_STORE_RECREATE_CORRUPT};
    assert_int_equal(qr_store_open(f->path, &o, &s, &info, &d), QR_OK);
    assert_true(info.recreated);
    assert_true(info.created);
    assert_int_equal(info.fault, QR_STORE_FAULT_CORRUPT);
    char prefix[256];
    snprintf(prefix, sizeof(prefix), "%s.corrupt-", f->path);
    assert_int_equal(strncmp(info.moved_to, prefix, strlen(prefix)), 0);
    /* the damaged bytes are kept for inspection, the new store is empty and writable */
    size_t n1 = slurp(info.moved_to, moved, sizeof(moved));
    assert_int_equal(n0, n1);
    assert_memory_equal(before, moved, n0);
    assert_int_equal(count_crashes(s), 0);
    struct qr_store_crash c = fx_crash(1, "llamacpp", "x");
    assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    assert_int_equal(qr_store_check(s, &d), QR_OK);
    qr_store_close(s);
}

static void test_garbage_header(void **state)
{
    struct fixture *f = *state;
    make_store(f, 10, 100);
    char junk[100];
    memset(junk, 0xA5, sizeof(junk));
    overwrite(f->path, 0, junk, sizeof(junk));
    expect_corrupt_refused(f, "garbage header");
    expect_corrupt_recreated(f);
}

static void test_truncated_mid_page(void **state)
{
    struct fixture *f = *state;
    make_store(f, 40, 2000);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    assert_int_equal(truncate(f->path, st.st_size / 2 + 123), 0);
    expect_corrupt_refused(f, "truncated mid page");
    expect_corrupt_recreated(f);
}

/* Cut on a page boundary: the header looks fine, quick_check must notice the missing pages. */
static void test_truncated_on_page_boundary(void **state)
{
    struct fixture *f = *state;
    make_store(f, 40, 2000);
    struct stat st;
    assert_int_equal(stat(f->path, &st), 0);
    int64_t page = fx_sql_int(f->path, "PRAGMA page_size");
    assert_true(page >= 512);
    assert_int_equal(truncate(f->path, (st.st_size / 2 / page) * page), 0);
    expect_corrupt_refused(f, "truncated on a page boundary");
    expect_corrupt_recreated(f);
}

/* Junk over the pages after the schema page: the header is intact, quick_check finds it. */
static void test_garbage_inside(void **state)
{
    struct fixture *f = *state;
    make_store(f, 40, 2000);
    int64_t page = fx_sql_int(f->path, "PRAGMA page_size");
    static char junk[4 * 65536];
    memset(junk, 0x5A, sizeof(junk));
    overwrite(f->path, (long) page, junk, (size_t) (4 * page));
    expect_corrupt_refused(f, "garbage inside");
    expect_corrupt_recreated(f);
}

/* --- newer schema ------------------------------------------------------------------------- */

static void test_newer_schema_refused(void **state)
{
    struct fixture *f = *state;
    make_store(f, 2, 10);
    assert_int_equal(fx_sql_exec(f->path, "INSERT INTO schema_version VALUES (99, 0)"), SQLITE_OK);
    struct qr_store *s = NULL;
    struct qr_store_open_info info;
    struct qr_diag d = {{0}};
    struct qr_store_opts o = {.flags = QR_STORE_RECREATE_CORRUPT};
    assert_int_equal(qr_store_open(f->path, &o, &s, &info, &d), QR_ERR_CONFIG);
    assert_null(s);
    assert_int_equal(info.fault, QR_STORE_FAULT_NEWER);
    assert_int_equal(info.schema_found, 99);
    assert_non_null(strstr(d.msg, f->path));
    assert_non_null(strstr(d.msg, "schema version 99 is newer"));
    assert_false(info.recreated);
    assert_int_equal(fx_count_files(f, QR_STORE_FILE ".corrupt-"), 0);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM engine_crash"), 2);
}

/* --- killed mid-write --------------------------------------------------------------------- */

/* Child: add crash records as fast as it can and report each committed id on fd. */
static void __attribute__((noreturn)) writer_child(const char *path, int fd, int round)
{
    alarm(30);
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    if (qr_store_open(path, NULL, &s, NULL, &d))
        _exit(2);
    char log[1500];
    memset(log, 'a' + round, sizeof(log) - 1);
    log[sizeof(log) - 1] = '\0';
    for (int i = 0; i < 100000; i++) {
        struct qr_store_crash c = fx_crash(round * 100000 + i + 1, "llamacpp", log);
        int64_t id = 0;
        if (qr_store_crash_add(s, &c, &id, &d))
            _exit(3);
        if (write(fd, &id, sizeof(id)) != (ssize_t) sizeof(id))
            _exit(4);
    }
    _exit(0);
}

static void test_kill9_mid_write_loses_nothing(void **state)
{
    struct fixture *f = *state;
    static int64_t committed[200000];
    size_t n_committed = 0;
    const int kill_after[] = {1, 17, 60};
    for (int round = 0; round < 3; round++) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(p[0]);
            writer_child(f->path, p[1], round);
        }
        close(p[1]);
        int seen = 0;
        bool killed = false;
        for (;;) {
            struct pollfd pf = {.fd = p[0], .events = POLLIN};
            int pr = poll(&pf, 1, 10000);
            assert_true(pr == 1); /* bounded: a stuck child fails the test */
            int64_t id;
            ssize_t r = read(p[0], &id, sizeof(id));
            if (r == 0)
                break; /* child gone and pipe drained */
            assert_int_equal(r, (ssize_t) sizeof(id));
            assert_true(n_committed < QR_ARRAY_LEN(committed));
            committed[n_committed++] = id;
            if (++seen == kill_after[round] && !killed) {
                kill(pid, SIGKILL);
                killed = true;
            }
        }
        close(p[0]);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        /* reopen after the kill: every reported commit is there, the file is sound */
        struct qr_store *s = open_ok(f->path, 0, 0);
        struct qr_diag d = {{0}};
        assert_int_equal(qr_store_check(s, &d), QR_OK);
        assert_true(count_crashes(s) >= (int64_t) n_committed);
        qr_store_close(s);
        for (size_t i = 0; i < n_committed; i++) {
            char sql[96];
            snprintf(sql, sizeof(sql), "SELECT count(*) FROM engine_crash WHERE id = %lld",
                     (long long) committed[i]);
            if (fx_sql_int(f->path, sql) != 1)
                fail_msg("committed record %lld lost after kill -9", (long long) committed[i]);
        }
    }
    assert_true(n_committed >= 1 + 17 + 60);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_disk_full_keeps_earlier_records, fx_setup,
                                        fx_teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_rolls_back, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_write_lock_held_elsewhere, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_open_locked_by_other_process, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_garbage_header, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_mid_page, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_truncated_on_page_boundary, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_garbage_inside, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_newer_schema_refused, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_kill9_mid_write_loses_nothing, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
