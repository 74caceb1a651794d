/* The upstream ledger: the builtin file keeps the 0.3 entries, records the packaged llama.cpp
 * (0.7.0, build b11669) as observed-unpinned, and every seed block cites a source; validation
 * rejects non-key capabilities and loose `tested` entries with the JSON path; the block query
 * matches by backend kind, version range, family/model, hardware class and conditions, reports
 * "uncertain" where a fact is unknown, and names a tested alternative; latest-known-good is the
 * newest tested entry per backend kind. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/ledger.h"

static struct qr_ledger *builtin(void)
{
    struct qr_diag d = {{0}};
    struct qr_ledger *l;
    if (qr_ledger_load_builtin(&d, &l) != QR_OK)
        fail_msg("%s", d.msg);
    return l;
}

static const struct qr_ledger_entry *entry(const struct qr_ledger *l, const char *id)
{
    for (size_t i = 0; i < qr_ledger_entry_count(l); i++)
        if (strcmp(qr_ledger_entry_at(l, i)->id, id) == 0)
            return qr_ledger_entry_at(l, i);
    return NULL;
}

static void test_builtin_entries(void **state)
{
    (void) state;
    struct qr_ledger *l = builtin();
    assert_int_equal(qr_ledger_entry_count(l), 3);
    assert_string_equal(qr_ledger_entry_at(l, 0)->id, "llama-cpp-debian-0.7.0-b11669");
    const struct qr_ledger_entry *o = entry(l, "ollama-adoption-observed-2026-09-04");
    assert_non_null(o);
    assert_int_equal(o->status, QR_LEDGER_OBSERVED_UNPINNED);
    assert_int_equal(o->n_enabled, 4);
    assert_int_equal(o->n_disabled, 1);
    const struct qr_ledger_entry *a = entry(l, "llama-cpp-direct-adapter-observed-2026-09-05");
    assert_non_null(a);
    for (size_t i = 0; i < a->n_enabled; i++) /* 0.3 weak spot: untested placements */
        assert_true(strcmp(a->enabled_capabilities[i], "placement.gpu") != 0 &&
                    strcmp(a->enabled_capabilities[i], "placement.hybrid") != 0);
    const struct qr_ledger_entry *e = entry(l, "llama-cpp-debian-0.7.0-b11669");
    assert_int_equal(e->status, QR_LEDGER_OBSERVED_UNPINNED);
    assert_string_equal(e->backend_kind, "llama.cpp");
    assert_string_equal(e->tested_ref, "b11669");
    assert_int_equal(e->n_engine_versions, 2);
    assert_string_equal(e->engine_versions[0], "0.7.0");
    assert_non_null(strstr(e->provenance, "0.7.0 (build 11669, commit Debian)"));
    assert_int_equal(e->n_family_notes, 3);
    /* nothing is tested yet: no latest known good (as in 0.3) */
    const struct qr_ledger_entry *lkg[4];
    assert_int_equal(qr_ledger_latest_known_good(l, lkg, 4), 0);
    /* /v1/upstreams: the 0.3 shape plus blocks; latest_known_good is an empty list */
    yyjson_mut_doc *doc = qr_ledger_render(l);
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "{\"api_version\":\"v1alpha1\",\"schema_version\":"
                                 "\"quantum.runtime/upstream-ledger/v1alpha1\",\"entries\":[{"));
    assert_non_null(strstr(json, "],\"latest_known_good\":[],\"blocks\":[{"));
    free(json);
    yyjson_mut_doc_free(doc);
    /* every seed block cites where it came from */
    assert_true(qr_ledger_block_count(l) >= 6);
    for (size_t i = 0; i < qr_ledger_block_count(l); i++) {
        const struct qr_ledger_block *b = qr_ledger_block_at(l, i);
        assert_true(b->n_sources >= 1);
        assert_true(qr_ledger_capability_known(b->capability));
        if (i)
            assert_true(strcmp(qr_ledger_block_at(l, i - 1)->id, b->id) < 0);
    }
    qr_ledger_free(l);
}

static size_t ask(const struct qr_ledger *l, const char *cap, const char *kind,
                  const char *const *vers, size_t n_vers, const char *family, const char *hw,
                  const char *const *cond, size_t n_cond, struct qr_ledger_hit *out)
{
    struct qr_ledger_query q = {cap, kind, NULL, vers, n_vers, family, NULL, hw, cond, n_cond};
    return qr_ledger_blocked(l, &q, out, 8);
}

static const char *const b11669[] = {"0.7.0", "b11669"};

static void test_llamacpp_build_blocks(void **state)
{
    (void) state;
    struct qr_ledger *l = builtin();
    struct qr_ledger_hit h[8];
    const char *none_off[] = {"reasoning_format=none", "think=off"};
    assert_int_equal(
        ask(l, "reasoning.control", "llama.cpp", b11669, 2, "gemma4", "linux-cpu", none_off, 2, h),
        1);
    assert_string_equal(h[0].block->id, "llamacpp-b11669-reasoning-none-think-off-leak");
    assert_true(h[0].certain);
    assert_null(h[0].alternative);
    /* the default reasoning format: the condition does not hold, nothing blocks */
    assert_int_equal(ask(l, "reasoning.control", "llama.cpp", b11669, 2, "gemma4", "linux-cpu",
                         none_off + 1, 1, h),
                     0);
    /* another build of llama.cpp is not this build */
    const char *other[] = {"b11700"};
    assert_int_equal(
        ask(l, "reasoning.control", "llama.cpp", other, 1, "gemma4", "linux-cpu", none_off, 2, h),
        0);
    /* unknown engine version: the block may apply - reported, but not as certain */
    assert_int_equal(
        ask(l, "reasoning.control", "llama.cpp", NULL, 0, "gemma4", "linux-cpu", none_off, 2, h),
        1);
    assert_false(h[0].certain);
    const char *par[] = {"parallel_tool_calls=false", "tool_choice=function"};
    assert_int_equal(
        ask(l, "tools.calling", "llama.cpp", b11669, 2, "qwen3", "linux-cpu", par, 2, h), 2);
    assert_string_equal(h[0].block->id, "llamacpp-b11669-named-tool-choice-ignored");
    assert_string_equal(h[1].block->id, "llamacpp-b11669-parallel-false-ignored");
    assert_int_equal(
        ask(l, "tools.calling", "llama.cpp", b11669, 2, "qwen3", "linux-cpu", NULL, 0, h), 0);
    qr_ledger_free(l);
}

static void test_version_range_and_hardware(void **state)
{
    (void) state;
    struct qr_ledger *l = builtin();
    struct qr_ledger_hit h[8];
    const char *cond[] = {"stream", "reasoning_format=none"};
    const char *old[] = {"b9000"}, *first[] = {"b9211"};
    assert_int_equal(
        ask(l, "streaming.reasoning", "llama.cpp", old, 1, "x", "linux-cpu", cond, 2, h), 0);
    assert_int_equal(
        ask(l, "streaming.reasoning", "llama.cpp", first, 1, "x", "linux-cpu", cond, 2, h), 1);
    assert_string_equal(h[0].block->id, "llamacpp-b9211-stream-reasoning-none-strips-think");
    assert_int_equal(
        ask(l, "streaming.reasoning", "llama.cpp", b11669, 2, "x", "linux-cpu", cond, 2, h), 1);
    /* MoE expert offload crashes on CUDA only */
    assert_int_equal(
        ask(l, "moe.expert_offload", "llama.cpp", b11669, 2, "qwen3moe", "linux-cpu", NULL, 0, h),
        0);
    assert_int_equal(ask(l, "moe.expert_offload", "llama.cpp", b11669, 2, "qwen3moe",
                         "nvidia-cuda-gpu", NULL, 0, h),
                     1);
    assert_true(h[0].certain);
    assert_int_equal(
        ask(l, "moe.expert_offload", "llama.cpp", b11669, 2, "qwen3moe", NULL, NULL, 0, h), 1);
    assert_false(h[0].certain);
    /* family-specific: qwen3 on Ollama with think=off */
    const char *off[] = {"think=off"};
    assert_int_equal(ask(l, "reasoning.control", "ollama-adapter", NULL, 0, "qwen3",
                         "amd-epyc-turin-cpu", off, 1, h),
                     1);
    assert_true(h[0].certain); /* the block is for every version */
    assert_int_equal(ask(l, "reasoning.control", "ollama-adapter", NULL, 0, "gemma4",
                         "amd-epyc-turin-cpu", off, 1, h),
                     0);
    qr_ledger_free(l);
}

static void test_model_and_project(void **state)
{
    (void) state;
    struct qr_ledger *l = builtin();
    struct qr_ledger_hit h[8];
    struct qr_ledger_query q = {.capability = "inference.text",
                                .backend_kind = "llama.cpp",
                                .model_family = "deepseek2",
                                .model = "deepseek-v3.1",
                                .hardware_class = "linux-cpu"};
    assert_int_equal(qr_ledger_blocked(l, &q, h, 8), 1);
    assert_string_equal(h[0].block->id, "llamacpp-deepseek-v3.1-double-bos");
    q.model = "deepseek-r1";
    assert_int_equal(qr_ledger_blocked(l, &q, h, 8), 0);
    const char *v073[] = {"0.7.3"};
    struct qr_ledger_query v = {.capability = "tools.calling",
                                .backend_kind = "openai-compatible",
                                .project = "vLLM",
                                .engine_versions = v073,
                                .n_engine_versions = 1,
                                .model_family = "qwen3",
                                .hardware_class = "linux-cuda"};
    assert_int_equal(qr_ledger_blocked(l, &v, h, 8), 1);
    assert_true(h[0].certain);
    assert_null(h[0].alternative); /* 0.7.2 is reported, not tested here */
    v.project = "MLX-LM";
    assert_int_equal(qr_ledger_blocked(l, &v, h, 8), 0);
    v.project = NULL;
    assert_int_equal(qr_ledger_blocked(l, &v, h, 8), 1);
    assert_false(h[0].certain);
    qr_ledger_free(l);
}

#define HEAD "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\","
#define ENTRY(id, kind, status, extra)                                                             \
    "{\"id\":\"" id "\",\"project\":\"p\",\"backend_kind\":\"" kind "\","                          \
    "\"source_url\":\"https://example.org/p\",\"status\":\"" status "\"" extra "}"
#define TESTED(id, kind, ver, at)                                                                  \
    ENTRY(id, kind, "tested",                                                                      \
          ",\"tested_ref\":\"" ver "\",\"engine_versions\":[\"" ver "\"],\"observed_at\":\"" at    \
          "\",\"license_ref\":\"MIT\"")

static struct qr_ledger *parse(const char *json, struct qr_diag *d)
{
    struct qr_ledger *l = NULL;
    memset(d, 0, sizeof(*d));
    qr_ledger_parse("l.json", json, strlen(json), d, &l);
    return l;
}

static void test_latest_known_good_and_alternative(void **state)
{
    (void) state;
    struct qr_diag d;
    /* clang-format off */
    static const char ledger[] = HEAD "\"entries\":["
        TESTED("oa-1", "openai-compatible", "0.7.2", "2026-10-01T00:00:00Z") ","
        TESTED("lc-old", "llama.cpp", "b9000", "2026-10-01T00:00:00Z") ","
        TESTED("lc-new", "llama.cpp", "b11669", "2026-11-01T12:00:00Z") ","
        ENTRY("lc-bad", "llama.cpp", "blocked", ",\"engine_versions\":[\"b10000\"]") ","
        ENTRY("old", "ollama-adapter", "planned", "") "],"
        "\"blocks\":[{\"id\":\"b\",\"backend_kind\":\"openai-compatible\","
        "\"engine_versions\":[\"0.7.3\"],\"model_family\":\"*\",\"hardware_class\":\"*\","
        "\"capability\":\"tools.calling\",\"reason\":\"r\",\"sources\":[\"s\"],"
        "\"alternative\":{\"backend_kind\":\"openai-compatible\","
        "\"engine_versions\":[\"<0.7.3\"]}}]}";
    /* clang-format on */
    struct qr_ledger *l = parse(ledger, &d);
    if (!l)
        fail_msg("%s", d.msg);
    const struct qr_ledger_entry *lkg[4];
    assert_int_equal(qr_ledger_latest_known_good(l, lkg, 4), 2);
    assert_string_equal(lkg[0]->id, "lc-new"); /* llama.cpp < openai-compatible */
    assert_string_equal(lkg[1]->id, "oa-1");
    struct qr_ledger_hit h[4];
    const char *v[] = {"0.7.3"};
    struct qr_ledger_query q = {.capability = "tools.calling",
                                .backend_kind = "openai-compatible",
                                .engine_versions = v,
                                .n_engine_versions = 1};
    assert_int_equal(qr_ledger_blocked(l, &q, h, 4), 1);
    assert_non_null(h[0].alternative);
    assert_string_equal(h[0].alternative->id, "oa-1");
    /* a blocked entry blocks every capability of that build */
    const char *bad[] = {"b10000"};
    struct qr_ledger_query e = {.capability = "embeddings",
                                .backend_kind = "llama.cpp",
                                .engine_versions = bad,
                                .n_engine_versions = 1};
    assert_int_equal(qr_ledger_blocked(l, &e, h, 4), 1);
    assert_null(h[0].block);
    assert_string_equal(h[0].entry->id, "lc-bad");
    assert_true(h[0].certain);
    e.engine_versions = v;
    assert_int_equal(qr_ledger_blocked(l, &e, h, 4), 0);
    e.n_engine_versions = 0;
    assert_int_equal(qr_ledger_blocked(l, &e, h, 4), 1);
    assert_false(h[0].certain);
    /* render: entries, latest_known_good, blocks */
    yyjson_mut_doc *doc = qr_ledger_render(l);
    size_t len;
    char *json = yyjson_mut_write(doc, 0, &len);
    yyjson_doc *back = yyjson_read(json, len, 0);
    yyjson_val *root = yyjson_doc_get_root(back);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "schema_version")), QR_LEDGER_SCHEMA);
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(root, "entries")), 5);
    yyjson_val *good = yyjson_obj_get(root, "latest_known_good");
    assert_int_equal(yyjson_arr_size(good), 2);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_arr_get(good, 0), "id")), "lc-new");
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(root, "blocks")), 1);
    yyjson_doc_free(back);
    free(json);
    yyjson_mut_doc_free(doc);
    qr_ledger_free(l);
}

#define ONE HEAD "\"entries\":[" ENTRY("a", "k", "planned", "") "],"

static void test_validation_errors(void **state)
{
    (void) state;
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {HEAD "\"entries\":[" ENTRY(
             "a", "k", "observed-unpinned",
             ",\"enabled_capabilities\":[\"inference.text\",\"tools.call\"]") "]}",
         "entries[0].enabled_capabilities[1]: 'tools.call' is not a capability key"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "observed-unpinned",
                                    ",\"enabled_capabilities\":[\"embeddings\"],"
                                    "\"broken_capabilities\":[\"embeddings\"]") "]}",
         "broken_capabilities[0]: 'embeddings' is also listed as enabled"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "tested", ",\"tested_ref\":\"v1\"") "]}",
         "entries[0]: a tested entry needs observed_at"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "tested",
                                    ",\"tested_ref\":\"v1\",\"observed_at\":"
                                    "\"2026-01-01T00:00:00Z\",\"license_ref\":\"MIT\"") "]}",
         "entries[0]: a tested entry needs engine_versions"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "shipped", "") "]}",
         "entries[0].status: 'shipped' is not tested"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "planned", ",\"observed_at\":\"2026-01-01\"") "]}",
         "entries[0].observed_at: '2026-01-01' is not an RFC 3339 time"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "planned", ",\"engine_versions\":[\">=1\"]") "]}",
         "entries[0].engine_versions[0]: '>=1' is not an exact version name"},
        {HEAD "\"entries\":[{\"id\":\"a\",\"project\":\"p\",\"backend_kind\":\"k\","
              "\"source_url\":\"http://x\",\"status\":\"planned\"}]}",
         "entries[0].source_url: 'http://x' is not an absolute https URL"},
        {HEAD
         "\"entries\":[" ENTRY("a", "k", "planned", "") "," ENTRY("a", "k", "planned", "") "]}",
         "entries[1]: duplicate id 'a'"},
        {HEAD "\"entries\":[]}", "entries: must not be empty"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "planned", ",\"colour\":1") "]}",
         "entries[0]: unknown field 'colour'"},
        {ONE "\"blocks\":[{\"id\":\"b\","
             "\"backend_kind\":\"k\",\"model_family\":\"*\",\"hardware_class\":\"*\","
             "\"capability\":\"tools.calling\",\"reason\":\"r\"}]}",
         "blocks[0].sources: required"},
        {ONE "\"blocks\":[{\"id\":\"b\","
             "\"backend_kind\":\"k\",\"model_family\":\"*\",\"hardware_class\":\"*\","
             "\"capability\":\"tool_calls\",\"reason\":\"r\",\"sources\":[\"s\"]}]}",
         "blocks[0].capability: 'tool_calls' is not a capability key"},
        {ONE "\"blocks\":[{\"id\":\"b\","
             "\"backend_kind\":\"k\",\"engine_versions\":[\">>1\"],\"model_family\":\"*\","
             "\"hardware_class\":\"*\",\"capability\":\"embeddings\",\"reason\":\"r\","
             "\"sources\":[\"s\"]}]}",
         "blocks[0].engine_versions[0]: '>>1' is not a version constraint"},
        {ONE "\"blocks\":[{\"id\":\"b\","
             "\"backend_kind\":\"k\",\"model_family\":\"*\",\"model\":\"m\","
             "\"hardware_class\":\"*\",\"capability\":\"embeddings\",\"reason\":\"r\","
             "\"sources\":[\"s\"]}]}",
         "blocks[0]: a block naming a model must name its model_family"},
        {ONE "\"blocks\":[{\"id\":\"b\","
             "\"backend_kind\":\"k\",\"model_family\":\"*\",\"hardware_class\":\"*\","
             "\"capability\":\"embeddings\",\"reason\":\"r\",\"sources\":[\"s\"],"
             "\"alternative\":{\"note\":\"n\"}}]}",
         "blocks[0].alternative.backend_kind: required"},
        {HEAD "\"entries\":[" ENTRY("a", "k", "planned", "") "],\"extra\":[]}",
         "cannot load 'l.json': unknown field 'extra'"},
        {"{\"schema_version\":\"quantum.runtime/upstream-ledger/v2\",\"entries\":[]}",
         "schema_version: 'quantum.runtime/upstream-ledger/v2' is not"},
        {"", "invalid JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct qr_diag d;
        struct qr_ledger *l = parse(cases[i].json, &d);
        if (l || !strstr(d.msg, cases[i].msg))
            fail_msg("case %zu: got '%s', want '%s'", i, d.msg, cases[i].msg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_entries),
        cmocka_unit_test(test_llamacpp_build_blocks),
        cmocka_unit_test(test_version_range_and_hardware),
        cmocka_unit_test(test_model_and_project),
        cmocka_unit_test(test_latest_known_good_and_alternative),
        cmocka_unit_test(test_validation_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
