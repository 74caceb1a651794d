/* The local ledger overlay (qr_ledger_parse_local, qr_ledger_merge): a local file of blocks only
 * is valid, its entries and blocks join the builtin ones in id order marked local (rendered
 * "origin": "local"), a local tested entry becomes the latest known good when it is newer, a local
 * block citing conformance evidence is enforced by the block query, an id present in both is an
 * error naming the id and the file, and an invalid local file names its JSON path. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/ledger.h"

#define HEAD "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\","
#define TESTED(id, ver, at)                                                                        \
    "{\"id\":\"" id "\",\"project\":\"llama.cpp\",\"backend_kind\":\"llama.cpp\","                 \
    "\"source_url\":\"https://github.com/ggml-org/llama.cpp\",\"status\":\"tested\","              \
    "\"tested_ref\":\"" ver "\",\"engine_versions\":[\"" ver "\"],\"observed_at\":\"" at           \
    "\",\"license_ref\":\"MIT\"}"
#define BLOCK(id, cap)                                                                             \
    "{\"id\":\"" id "\",\"backend_kind\":\"llama.cpp\",\"engine_versions\":[\"0.7.0\"],"           \
    "\"model_family\":\"*\",\"hardware_class\":\"*\",\"capability\":\"" cap "\","                  \
    "\"reason\":\"conformance case reasoning.on failed\","                                         \
    "\"sources\":[\"evidence:conformance/12\"]}"

static struct qr_ledger *builtin(void)
{
    struct qr_diag d = {{0}};
    struct qr_ledger *l = NULL;
    if (qr_ledger_load_builtin(&d, &l) != QR_OK)
        fail_msg("%s", d.msg);
    return l;
}

static struct qr_ledger *local(const char *json, struct qr_diag *d)
{
    struct qr_ledger *l = NULL;
    memset(d, 0, sizeof(*d));
    if (qr_ledger_parse_local("/state/upstream-ledger.local.json", json, strlen(json), d, &l))
        return NULL;
    return l;
}

static void test_merge_entries_blocks_and_latest_known_good(void **state)
{
    (void) state;
    struct qr_diag d;
    struct qr_ledger *b = builtin();
    size_t n_entries = qr_ledger_entry_count(b), n_blocks = qr_ledger_block_count(b);
    const struct qr_ledger_entry *lkg[8];
    assert_int_equal(qr_ledger_latest_known_good(b, lkg, 8), 0); /* nothing tested builtin */
    struct qr_ledger *l =
        local(HEAD "\"entries\":[" TESTED("zz-local-llama-b11669", "b11669",
                                          "2026-12-02T22:00:00Z") "],"
                                                                  "\"blocks\":[" BLOCK(
                                                                      "aa-local-reasoning",
                                                                      "reasoning.control") "]}",
              &d);
    if (!l)
        fail_msg("%s", d.msg);
    assert_true(qr_ledger_entry_at(l, 0)->local);
    assert_true(qr_ledger_block_at(l, 0)->local);
    struct qr_ledger *m = NULL;
    assert_int_equal(qr_ledger_merge(b, l, "/state/upstream-ledger.local.json", &d, &m), QR_OK);
    assert_int_equal(qr_ledger_entry_count(m), n_entries + 1);
    assert_int_equal(qr_ledger_block_count(m), n_blocks + 1);
    /* id order over both; the local block sorts first, the local entry last */
    assert_string_equal(qr_ledger_block_at(m, 0)->id, "aa-local-reasoning");
    assert_true(qr_ledger_block_at(m, 0)->local);
    assert_false(qr_ledger_block_at(m, 1)->local);
    assert_string_equal(qr_ledger_entry_at(m, n_entries)->id, "zz-local-llama-b11669");
    for (size_t i = 1; i < qr_ledger_entry_count(m); i++)
        assert_true(strcmp(qr_ledger_entry_at(m, i - 1)->id, qr_ledger_entry_at(m, i)->id) < 0);
    /* latest known good over both */
    assert_int_equal(qr_ledger_latest_known_good(m, lkg, 8), 1);
    assert_string_equal(lkg[0]->id, "zz-local-llama-b11669");
    /* the local block is enforced for the running build, not for another */
    const char *run[] = {"0.7.0", "b11669"}, *other[] = {"0.8.0"};
    struct qr_ledger_query q = {.capability = "reasoning.control",
                                .backend_kind = "llama.cpp",
                                .engine_versions = run,
                                .n_engine_versions = 2,
                                .model_family = "llama",
                                .hardware_class = "linux-cpu"};
    struct qr_ledger_hit h[4];
    assert_int_equal(qr_ledger_blocked(m, &q, h, 4), 1);
    assert_string_equal(h[0].block->id, "aa-local-reasoning");
    assert_true(h[0].certain);
    assert_string_equal(h[0].block->sources[0], "evidence:conformance/12");
    q.engine_versions = other;
    q.n_engine_versions = 1;
    assert_int_equal(qr_ledger_blocked(m, &q, h, 4), 0);
    /* /v1/upstreams: origin on every entry and block */
    yyjson_mut_doc *doc = qr_ledger_render(m);
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "{\"id\":\"aa-local-reasoning\",\"origin\":\"local\""));
    assert_non_null(strstr(json, "{\"id\":\"zz-local-llama-b11669\",\"origin\":\"local\""));
    assert_non_null(
        strstr(json, "{\"id\":\"llama-cpp-debian-0.7.0-b11669\",\"origin\":\"builtin\""));
    assert_non_null(strstr(json, "\"latest_known_good\":[{\"id\":\"zz-local-llama-b11669\""));
    free(json);
    yyjson_mut_doc_free(doc);
    qr_ledger_free(m);
}

static void test_blocks_only_file(void **state)
{
    (void) state;
    struct qr_diag d;
    struct qr_ledger *l = local(HEAD "\"blocks\":[" BLOCK("x", "tools.calling") "]}", &d);
    if (!l)
        fail_msg("%s", d.msg);
    assert_int_equal(qr_ledger_entry_count(l), 0);
    assert_int_equal(qr_ledger_block_count(l), 1);
    struct qr_ledger *m = NULL;
    assert_int_equal(qr_ledger_merge(builtin(), l, "f", &d, &m), QR_OK);
    qr_ledger_free(m);
    /* the builtin form still requires entries */
    struct qr_ledger *b = NULL;
    const char *json = HEAD "\"blocks\":[" BLOCK("x", "tools.calling") "]}";
    assert_int_equal(qr_ledger_parse("b.json", json, strlen(json), &d, &b), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "entries: required"));
}

static void test_duplicate_ids(void **state)
{
    (void) state;
    struct qr_diag d;
    /* an entry id the builtin ledger has */
    struct qr_ledger *l = local(HEAD "\"entries\":[" TESTED("llama-cpp-debian-0.7.0-b11669",
                                                            "b11669", "2026-12-02T22:00:00Z") "]}",
                                &d);
    if (!l)
        fail_msg("%s", d.msg);
    struct qr_ledger *m = (struct qr_ledger *) 1;
    assert_int_equal(qr_ledger_merge(builtin(), l, "/s/upstream-ledger.local.json", &d, &m),
                     QR_ERR_INVALID);
    assert_null(m);
    assert_string_equal(d.msg, "'/s/upstream-ledger.local.json': entries: id "
                               "'llama-cpp-debian-0.7.0-b11669' is also in the builtin ledger");
    /* a block id the builtin ledger has */
    struct qr_ledger *b = builtin();
    char json[2048];
    snprintf(json, sizeof json,
             HEAD
             "\"blocks\":[{\"id\":\"%s\",\"backend_kind\":\"llama.cpp\","
             "\"model_family\":\"*\",\"hardware_class\":\"*\",\"capability\":\"tools.calling\","
             "\"reason\":\"r\",\"sources\":[\"evidence:conformance/3\"]}]}",
             qr_ledger_block_at(b, 0)->id);
    l = local(json, &d);
    if (!l)
        fail_msg("%s", d.msg);
    char want[400];
    snprintf(want, sizeof want, "'f.json': blocks: id '%s' is also in the builtin ledger",
             qr_ledger_block_at(b, 0)->id);
    assert_int_equal(qr_ledger_merge(b, l, "f.json", &d, &m), QR_ERR_INVALID);
    assert_string_equal(d.msg, want);
    /* a duplicate inside the local file itself */
    assert_null(local(
        HEAD "\"blocks\":[" BLOCK("x", "tools.calling") "," BLOCK("x", "embeddings") "]}", &d));
    assert_non_null(strstr(d.msg, "blocks[1]: duplicate id 'x'"));
}

static void test_bad_local_file_names_path(void **state)
{
    (void) state;
    struct qr_diag d;
    assert_null(local(HEAD "\"blocks\":[" BLOCK("x", "reasoning.controls") "]}", &d));
    assert_string_equal(d.msg, "cannot load '/state/upstream-ledger.local.json': "
                               "blocks[0].capability: 'reasoning.controls' is not a capability "
                               "key of quantum.runtime/upstream-ledger/v1alpha1");
    assert_null(local("{\"schema_version\":\"quantum.runtime/upstream-ledger/v9\"}", &d));
    assert_non_null(strstr(d.msg, "schema_version"));
    assert_null(local(HEAD "\"blocks\":[", &d));
    assert_non_null(strstr(d.msg, "/state/upstream-ledger.local.json"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_entries_blocks_and_latest_known_good),
        cmocka_unit_test(test_blocks_only_file),
        cmocka_unit_test(test_duplicate_ids),
        cmocka_unit_test(test_bad_local_file_names_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
