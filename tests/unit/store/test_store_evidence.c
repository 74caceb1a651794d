/* Evidence store: the engine's capability evidence (engine_evidence, schema v2) - records that
 * survive a reopen, the newest observation per (backend, model, artifact, engine version) with its
 * count, refused records that leave the store unchanged - the crash count behind a bounded crash
 * list, and the migration of a version 1 file that keeps its crash records. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

static struct qr_store_evidence ev(int64_t t, const char *model, const char *engine, bool tools)
{
    return (struct qr_store_evidence){
        .time_ms = t,
        .backend_id = "llama.cpp",
        .model = model,
        .artifact = "sha256:00ff",
        .engine_version = engine,
        .supports_tools = tools,
        .supports_parallel_tool_calls = tools,
        .supports_system_role = true,
        .vision = false,
        .audio = false,
        .n_ctx_slot = 1024,
        .build_info = "b11669-Debian",
        .facts_json = "{\"chat_template_caps\":{\"supports_tools\":false}}",
    };
}

/* One row per load: only the newest 64 per key are kept; other keys are untouched. */
static void test_evidence_pruned_per_key(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_evidence other = ev(1, "plain-chat", "0.7.0", false);
    assert_int_equal(qr_store_evidence_add(s, &other, NULL, &d), QR_OK);
    for (int i = 0; i < 100; i++) {
        struct qr_store_evidence e = ev(1000 + i, "scripted-chat", "0.7.0", true);
        e.n_ctx_slot = 1000 + i;
        assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_OK);
    }
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_evidence *rows = NULL;
    size_t n = 0;
    struct qr_store_filter flt = {.model = "scripted-chat"};
    assert_int_equal(qr_store_evidence_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 64);
    assert_int_equal(rows[0].n_ctx_slot, 1099);  /* the newest */
    assert_int_equal(rows[63].n_ctx_slot, 1036); /* the oldest kept */
    assert_int_equal(qr_store_evidence_latest(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].observations, 64);
    flt = (struct qr_store_filter){.model = "plain-chat"};
    assert_int_equal(qr_store_evidence_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_evidence_roundtrip_and_latest(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    int64_t id[4] = {0};
    struct qr_store_evidence e0 = ev(1000, "scripted-chat", "0.7.0", true);
    struct qr_store_evidence e1 = ev(2000, "plain-chat", "0.7.0", false);
    struct qr_store_evidence e2 = ev(3000, "scripted-chat", "0.7.0", true);
    e2.n_ctx_slot = 2048;
    e2.vision = true;
    struct qr_store_evidence e3 = ev(4000, "scripted-chat", "0.8.0", false);
    e3.build_info = NULL; /* stored as "" */
    assert_int_equal(qr_store_evidence_add(s, &e0, &id[0], &d), QR_OK);
    assert_int_equal(qr_store_evidence_add(s, &e1, &id[1], &d), QR_OK);
    assert_int_equal(qr_store_evidence_add(s, &e2, &id[2], &d), QR_OK);
    assert_int_equal(qr_store_evidence_add(s, &e3, &id[3], &d), QR_OK);
    assert_true(id[0] > 0 && id[1] > id[0] && id[2] > id[1] && id[3] > id[2]);
    qr_store_close(s);

    s = open_ok(f, NULL);
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_evidence *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_evidence_list(s, NULL, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 4);
    assert_int_equal(rows[0].id, id[3]); /* newest first */
    assert_string_equal(rows[0].build_info, "");
    assert_int_equal(rows[3].id, id[0]);
    assert_int_equal(rows[3].time_ms, 1000);
    assert_string_equal(rows[3].backend_id, "llama.cpp");
    assert_string_equal(rows[3].model, "scripted-chat");
    assert_string_equal(rows[3].artifact, "sha256:00ff");
    assert_string_equal(rows[3].engine_version, "0.7.0");
    assert_true(rows[3].supports_tools);
    assert_true(rows[3].supports_parallel_tool_calls);
    assert_true(rows[3].supports_system_role);
    assert_false(rows[3].vision);
    assert_false(rows[3].audio);
    assert_int_equal(rows[3].n_ctx_slot, 1024);
    assert_string_equal(rows[3].build_info, "b11669-Debian");
    assert_string_equal(rows[3].facts_json, "{\"chat_template_caps\":{\"supports_tools\":false}}");
    assert_int_equal(rows[3].observations, 0); /* set by *_latest only */

    /* the newest observation of scripted-chat on 0.7.0 */
    struct qr_store_filter flt = {
        .backend_id = "llama.cpp", .model = "scripted-chat", .engine_version = "0.7.0", .limit = 1};
    assert_int_equal(qr_store_evidence_list(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].id, id[2]);

    /* one row per key, newest first, with the key's count */
    flt = (struct qr_store_filter){.backend_id = "llama.cpp"};
    assert_int_equal(qr_store_evidence_latest(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 3);
    assert_int_equal(rows[0].id, id[3]);
    assert_int_equal(rows[0].observations, 1);
    assert_int_equal(rows[1].id, id[2]);
    assert_int_equal(rows[1].observations, 2);
    assert_int_equal(rows[1].n_ctx_slot, 2048);
    assert_true(rows[1].vision);
    assert_int_equal(rows[2].id, id[1]);
    assert_string_equal(rows[2].model, "plain-chat");
    assert_false(rows[2].supports_tools);
    assert_int_equal(rows[2].observations, 1);
    /* since_ms bounds the rows and the counts alike */
    flt = (struct qr_store_filter){.engine_version = "0.7.0", .since_ms = 1500};
    assert_int_equal(qr_store_evidence_latest(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].id, id[2]);
    assert_int_equal(rows[0].observations, 1);
    flt = (struct qr_store_filter){.backend_id = "ollama"};
    assert_int_equal(qr_store_evidence_latest(s, &flt, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 0);
    /* a filter field the table has no column for is refused */
    flt = (struct qr_store_filter){.host_fingerprint = "x"};
    assert_int_equal(qr_store_evidence_latest(s, &flt, &a, &rows, &n, &d), QR_ERR_INVALID);

    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.evidence, 4);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

static void test_invalid_evidence_refused(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_evidence e = ev(0, "m", "0.7.0", true);
    e.n_ctx_slot = 0;
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_ERR_INVALID);
    assert_int_equal(qr_store_last_fault(s), QR_STORE_FAULT_CONSTRAINT);
    e = ev(0, "m", "0.7.0", true);
    e.facts_json = "{not json";
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_ERR_INVALID);
    e = ev(0, "m", "0.7.0", true);
    e.artifact = NULL;
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "'artifact'"));
    e = ev(0, NULL, "0.7.0", true);
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_ERR_INVALID);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM engine_evidence"), 0);
    /* time 0 is now */
    e = ev(0, "m", "0.7.0", true);
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_OK);
    assert_true(fx_sql_int(f->path, "SELECT min(time_ms) FROM engine_evidence") > 1700000000000);
    qr_store_close(s);
}

static void test_crash_count(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    for (int i = 0; i < 12; i++) {
        struct qr_store_crash c = fx_crash(1000 + i, i < 9 ? "llama.cpp" : "ollama", "");
        if (i % 2) {
            c.model = "other";
            c.signal = 0;
            c.exit_code = 1;
        }
        assert_int_equal(qr_store_crash_add(s, &c, NULL, &d), QR_OK);
    }
    int64_t n = -1;
    assert_int_equal(qr_store_crash_count(s, NULL, &n, &d), QR_OK);
    assert_int_equal(n, 12);
    struct qr_store_filter flt = {.backend_id = "llama.cpp", .limit = 2}; /* limit ignored */
    assert_int_equal(qr_store_crash_count(s, &flt, &n, &d), QR_OK);
    assert_int_equal(n, 9);
    flt = (struct qr_store_filter){.backend_id = "llama.cpp", .model = "other"};
    assert_int_equal(qr_store_crash_count(s, &flt, &n, &d), QR_OK);
    assert_int_equal(n, 4);
    flt = (struct qr_store_filter){.since_ms = 1010};
    assert_int_equal(qr_store_crash_count(s, &flt, &n, &d), QR_OK);
    assert_int_equal(n, 2);
    flt = (struct qr_store_filter){.engine_version = "none"};
    assert_int_equal(qr_store_crash_count(s, &flt, &n, &d), QR_OK);
    assert_int_equal(n, 0);
    flt = (struct qr_store_filter){.kind = "x"};
    assert_int_equal(qr_store_crash_count(s, &flt, &n, &d), QR_ERR_INVALID);

    /* the bounded list and the total together: the newest 10 of 12 */
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_store_crash *rows = NULL;
    size_t got = 0;
    flt = (struct qr_store_filter){.limit = 10};
    assert_int_equal(qr_store_crash_list(s, &flt, &a, &rows, &got, &d), QR_OK);
    assert_int_equal(got, 10);
    assert_int_equal(rows[0].time_ms, 1011);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

/* A version 1 file (before engine_evidence) is migrated at open; its crash records stay. */
static void test_migrates_version_1(void **state)
{
    struct fixture *f = *state;
    struct qr_store *s = open_ok(f, NULL);
    struct qr_diag d = {{0}};
    struct qr_store_crash c = fx_crash(1234, "llama.cpp", "last words");
    int64_t id = 0;
    assert_int_equal(qr_store_crash_add(s, &c, &id, &d), QR_OK);
    qr_store_close(s);
    /* back to what a version 1 build wrote */
    assert_int_equal(fx_sql_exec(f->path, "DROP TABLE engine_evidence; DELETE FROM schema_version "
                                          "WHERE version > 1"),
                     SQLITE_OK);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM sqlite_schema WHERE name = "
                                         "'engine_evidence'"),
                     0);

    struct qr_store_open_info info;
    s = open_ok(f, &info);
    assert_int_equal(info.schema_found, 1);
    assert_false(info.created);
    struct qr_store_stats st;
    assert_int_equal(qr_store_stats(s, &st, &d), QR_OK);
    assert_int_equal(st.schema_version, QR_STORE_SCHEMA_VERSION);
    assert_int_equal(st.crashes, 1);
    assert_int_equal(st.evidence, 0);
    struct qr_store_evidence e = ev(0, "m", "0.7.0", false);
    assert_int_equal(qr_store_evidence_add(s, &e, NULL, &d), QR_OK);
    assert_int_equal(qr_store_check(s, &d), QR_OK);
    qr_store_close(s);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM schema_version"),
                     QR_STORE_SCHEMA_VERSION);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM engine_crash WHERE reason = "
                                         "'killed by signal 9'"),
                     1);
    assert_int_equal(fx_sql_int(f->path, "SELECT count(*) FROM engine_evidence"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_evidence_roundtrip_and_latest, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_evidence_pruned_per_key, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_invalid_evidence_refused, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_crash_count, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_migrates_version_1, fx_setup, fx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
