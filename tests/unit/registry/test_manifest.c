/* Manifest validation: every builtin manifest parses; a manifest using every optional field
 * parses; then one mutation per rule of the schema (patterns, lengths, ranges, enums, required
 * and unknown fields at every level, cross-field rules) must fail with the JSON path and reason
 * the table expects; SemVer precedence; malformed JSON, trailing data, duplicate keys and the
 * size cap. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "core/builtin.h"
#include "registry/manifest.h"
#include "manifest_fixture.h"
#include "schema_check.h"

static void test_builtins_parse(void **state)
{
    (void) state;
    const struct qr_builtin_file *f;
    size_t n;
    qr_builtin_under("models/", &f, &n);
    assert_true(n >= 4);
    for (size_t i = 0; i < n; i++) {
        struct qr_manifest *m;
        struct qr_diag d = {{0}};
        if (qr_manifest_parse(f[i].data, f[i].len, &d, &m) != QR_OK)
            fail_msg("%s: %s", f[i].path, d.msg);
        /* the file is named after the canonical id */
        char want[200];
        snprintf(want, sizeof want, "models/%s.json", m->id);
        assert_string_equal(f[i].path, want);
        qr_manifest_free(m);
    }
}

static void test_ember_fields(void **state)
{
    (void) state;
    const struct qr_builtin_file *f = qr_builtin_find("models/ember-coreui.json");
    assert_non_null(f);
    struct qr_manifest *m;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_manifest_parse(f->data, f->len, &d, &m), QR_OK);
    assert_string_equal(m->id, "ember-coreui");
    assert_string_equal(m->backend, "ollama-adapter");
    assert_int_equal(m->n_aliases, 1);
    assert_string_equal(m->aliases[0], "ember-coreui:latest");
    assert_int_equal(m->n_artifacts, 1);
    assert_string_equal(m->artifacts[0].uri, "ollama:ember-coreui:latest");
    assert_null(m->artifacts[0].sha256);
    assert_int_equal(m->caps, QR_MANIFEST_CAP_TEXT | QR_MANIFEST_CAP_VISION |
                                  QR_MANIFEST_CAP_THINKING | QR_MANIFEST_CAP_REASONING_CONTROL);
    assert_string_equal(m->install, "external");
    assert_string_equal(m->architecture_class, "unknown");
    qr_manifest_free(m);
}

static void test_rich_parses(void **state)
{
    (void) state;
    struct qr_manifest *m;
    struct qr_diag d = {{0}};
    if (qr_manifest_parse(RICH, strlen(RICH), &d, &m) != QR_OK)
        fail_msg("%s", d.msg);
    assert_string_equal(m->id, "rich-moe");
    assert_int_equal(m->n_artifacts, 3);
    assert_string_equal(m->artifacts[0].sha256, "sha256:" HEX64);
    assert_string_equal(m->artifacts[1].ollama_tag, "rich:latest");
    assert_string_equal(m->artifacts[1].ollama_digest, "sha256:" HEX64B);
    assert_true(m->caps & QR_MANIFEST_CAP_TOOL_STREAMING);
    qr_manifest_free(m);
}

/* One mutation of RICH: set pointer to value (JSON text), or remove it when value is NULL. */
struct mut {
    const char *ptr, *value, *want;
};

static const struct mut MUTS[] = {
    /* top level */
    {"/schema_version", "\"quantum.runtime/model-manifest/v1\"", "schema_version: not an allowed"},
    {"/id", "\"Rich\"", "id: not a canonical id"},
    {"/id", "\"-rich\"", "id: not a canonical id"},
    {"/id", "\"\"", "id: not a canonical id"},
    {"/id", "7", "id: not a string"},
    {"/display_name", "\"   \"", "display_name: blank"},
    {"/display_name", "\"a\\u0001b\"", "display_name: blank or contains control"},
    {"/aliases/0", "\"rich moe\"", "aliases[0]: not an alias"},
    {"/aliases/1", "\"rich:latest\"", "aliases[1]: duplicates item 0"},
    {"/aliases/0", "\"rich-moe\"", "aliases[0]: equals the canonical id"},
    {"/extra", "1", "extra: unknown field"},
    {"/id", NULL, "id: required field missing"},
    {"/provenance", NULL, "provenance: required field missing"},
    {"/persona/package", "\"Persona\"", "persona.package: not a canonical id"},
    {"/persona/version", "\"01.0.0\"", "persona.version: not a semantic version"},
    {"/persona/version", "\"1.0.0-01\"", "persona.version: not a semantic version"},
    {"/persona/version", "\"1.0.0-a..b\"", "persona.version: not a semantic version"},
    {"/persona/version", "\"1.0\"", "persona.version: not a semantic version"},
    {"/persona/extra", "true", "persona.extra: unknown field"},
    /* source and backend */
    {"/source/provider", "\"-x\"", "source.provider: not a label"},
    {"/source/extra", "1", "source.extra: unknown field"},
    {"/source/revision", NULL, "source.revision: required field missing"},
    {"/backend/type", "\"ollama\"", "backend.type: not an allowed value"},
    /* artifacts */
    {"/artifacts", "[]", "artifacts: 0 items"},
    {"/artifacts/1/sha256", "\"sha256:ABC\"", "artifacts[1].sha256: not a sha256 digest"},
    {"/artifacts/0/sha256", "\"sha256:" HEX64 "0\"", "artifacts[0].sha256: not a sha256 digest"},
    {"/artifacts/0/uri", "\"no-scheme\"", "artifacts[0].uri: URI has no scheme"},
    {"/artifacts/0/uri", "\"models:a b.gguf\"", "artifacts[0].uri: URI contains whitespace"},
    {"/artifacts/0/uri", "\"models:../x.gguf\"", "artifacts[0].uri: models: URI has an empty"},
    {"/artifacts/0/uri", "\"models:/x.gguf\"",
     "artifacts[0].uri: models: URI must be a relative path"},
    {"/artifacts/0/uri", "\"file:x.gguf\"", "artifacts[0].uri: file: URI must be"},
    {"/artifacts/0/backend", "\"llamacpp\"", "artifacts[0].backend: not an allowed value"},
    {"/artifacts/0/size_bytes", "-1", "artifacts[0].size_bytes: outside"},
    {"/artifacts/0/size_bytes", "1.5", "artifacts[0].size_bytes: not an integer"},
    {"/artifacts/0/extra", "1", "artifacts[0].extra: unknown field"},
    {"/artifacts/1/ollama/tag", "\"bad tag\"", "artifacts[1].ollama.tag: not an alias"},
    {"/artifacts/1/ollama/extra", "1", "artifacts[1].ollama.extra: unknown field"},
    {"/artifacts/2/huggingface/repo", "\"noslash\"",
     "artifacts[2].huggingface.repo: not a Hugging"},
    {"/artifacts/2", "{\"uri\":\"models:rich-q4.gguf\",\"backend\":\"llama.cpp\"}",
     "artifacts[2]: same backend and uri as artifacts[0]"},
    /* model */
    {"/model/context_window", "0", "model.context_window: outside"},
    {"/model/context_window", "10000001", "model.context_window: outside"},
    {"/model/context_window", "\"8192\"", "model.context_window: not an integer"},
    {"/model/architecture_class", "\"hybrid\"", "model.architecture_class: not an allowed"},
    {"/model/active_parameters_b", "31", "model.active_parameters_b: above total_parameters_b"},
    {"/model/architecture_class", "\"dense\"", "model.experts: only allowed with"},
    {"/model/experts/active", "9", "model.experts.active: above experts.total"},
    {"/model/experts/shared", "9", "model.experts.shared: above experts.total"},
    {"/model/experts/total", NULL, "model.experts.total: required field missing"},
    {"/model/context_policy/override_supported", "false",
     "model.context_policy.override_verified: requires override_supported"},
    {"/model/extra", "1", "model.extra: unknown field"},
    /* model.architecture_contract */
    {"/model/architecture_contract/extra", "1", "model.architecture_contract.extra: unknown"},
    {"/model/architecture_contract/ffn", "\"dense\"",
     "model.architecture_contract.expert_count: only allowed when ffn is moe"},
    {"/model/architecture_contract/expert_used_count", "9",
     "model.architecture_contract.expert_used_count: above expert_count"},
    {"/model/architecture_contract/params/active", "2000",
     "model.architecture_contract.params.active: above params.total"},
    {"/model/architecture_contract/attention/head_count_kv", "64",
     "model.architecture_contract.attention.head_count_kv: above"},
    {"/model/architecture_contract/attention/extra", "1",
     "model.architecture_contract.attention.extra: unknown field"},
    {"/model/architecture_contract/extended_context/0/context_length", "4096",
     "model.architecture_contract.extended_context[0].context_length: not above"},
    {"/model/architecture_contract/extended_context/1/name", "\"yarn-4x\"",
     "model.architecture_contract.extended_context[1].name: duplicates"},
    {"/model/architecture_contract/chat_template/sha256", "\"abc\"",
     "model.architecture_contract.chat_template.sha256: not a sha256"},
    {"/model/architecture_contract/chat_template/markers/0", "\"jinja\"",
     "model.architecture_contract.chat_template.markers[0]: not an allowed value"},
    {"/model/architecture_contract/modalities/input", "[]",
     "model.architecture_contract.modalities.input: 0 items"},
    {"/model/architecture_contract/projector/required", NULL,
     "model.architecture_contract.projector.required: required field missing"},
    {"/model/architecture_contract/speculative/nextn_predict_layers", "0",
     "model.architecture_contract.speculative.mtp: true but nextn_predict_layers is 0"},
    {"/model/architecture_contract/system_role", "\"maybe\"",
     "model.architecture_contract.system_role: not an allowed value"},
    {"/model/architecture_contract/rope/freq_base", "-1",
     "model.architecture_contract.rope.freq_base: outside"},
    {"/model/architecture_contract/leading_dense_block_count", "99",
     "model.architecture_contract.leading_dense_block_count: above block_count"},
    {"/model/architecture_class", "\"\"", "model.experts: only allowed with"},
    /* capabilities, compatibility, state, provenance */
    {"/capabilities/tools", "false", "capabilities.tool_streaming: requires tools"},
    {"/capabilities/text", "1", "capabilities.text: not a boolean"},
    {"/capabilities/thinking", NULL, "capabilities.thinking: required field missing"},
    {"/capabilities/extra", "true", "capabilities.extra: unknown field"},
    {"/compatibility/max_runtime_version", "\"0.4.0-alpha.0\"",
     "compatibility.max_runtime_version: below min_runtime_version"},
    {"/compatibility/max_runtime_version", "\"0.4.0-alpha\"",
     "compatibility.max_runtime_version: below min_runtime_version"},
    {"/state/verification", "\"failed\"",
     "state.lifecycle: 'active' is not allowed when verification failed"},
    {"/state/install", "\"pulled\"", "state.install: not an allowed value"},
    {"/state/verification", "\"verified\"", "artifacts[1].sha256: required when"},
    {"/provenance/source_url", "\"ftp://x\"", "provenance.source_url: not an absolute http"},
    {"/provenance/retrieved_at", "\"2026-13-01T00:00:00Z\"", "provenance.retrieved_at: not an RFC"},
    {"/provenance/license_ref", "\"" HEX64 HEX64 HEX64 "\"", "provenance.license_ref: length 192"},
};

static char *mutate(const struct mut *m)
{
    yyjson_doc *base = yyjson_read(RICH, strlen(RICH), 0);
    assert_non_null(base);
    yyjson_mut_doc *doc = yyjson_doc_mut_copy(base, NULL);
    yyjson_doc_free(base);
    if (m->value) {
        yyjson_doc *v = yyjson_read(m->value, strlen(m->value), 0);
        assert_non_null(v);
        yyjson_mut_val *mv = yyjson_val_mut_copy(doc, yyjson_doc_get_root(v));
        yyjson_doc_free(v);
        if (!yyjson_mut_doc_ptr_set(doc, m->ptr, mv))
            fail_msg("cannot set %s", m->ptr);
    } else if (!yyjson_mut_doc_ptr_remove(doc, m->ptr)) {
        fail_msg("cannot remove %s", m->ptr);
    }
    char *json = yyjson_mut_write(doc, 0, NULL);
    yyjson_mut_doc_free(doc);
    return json;
}

static void test_rules(void **state)
{
    (void) state;
    for (size_t i = 0; i < sizeof MUTS / sizeof MUTS[0]; i++) {
        char *json = mutate(&MUTS[i]);
        struct qr_manifest *m = NULL;
        struct qr_diag d = {{0}};
        enum qr_err e = qr_manifest_parse(json, strlen(json), &d, &m);
        if (e != QR_ERR_INVALID || !strstr(d.msg, MUTS[i].want))
            fail_msg("case %zu (%s): got %s '%s', want '%s'", i, MUTS[i].ptr, qr_err_str(e), d.msg,
                     MUTS[i].want);
        assert_null(m);
        free(json);
    }
}

/* Values on the edge that must pass. */
static void test_edges_accepted(void **state)
{
    (void) state;
    static const struct mut OK[] = {
        {"/id", "\"a\"", ""},
        {"/id", "\"0._-x\"", ""},
        {"/aliases/0", "\"A/b:c.d_e-f\"", ""},
        {"/artifacts/0/uri", "\"file:///srv/models/x.gguf\"", ""},
        {"/artifacts/0/uri", "\"models:sub/dir/x%20y.gguf\"", ""},
        {"/model/context_window", "10000000", ""},
        {"/model/architecture_class", "\"moe\"", ""},
        {"/compatibility/max_runtime_version", "\"0.4.0-alpha.1\"", ""},
        {"/compatibility/max_runtime_version", "\"0.4.0\"", ""},
        {"/provenance/retrieved_at", "\"2026-09-06T10:00:00.123+02:00\"", ""},
        {"/provenance/license_ref", "\"\"", ""},
        {"/capabilities/tool_streaming", "false", ""},
    };
    yyjson_doc *schema = schema_load();
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        char *json = mutate(&OK[i]);
        struct qr_manifest *m = NULL;
        struct qr_diag d = {{0}};
        if (qr_manifest_parse(json, strlen(json), &d, &m) != QR_OK)
            fail_msg("case %zu (%s): %s", i, OK[i].ptr, d.msg);
        qr_manifest_free(m);
        schema_check_json(schema, json, strlen(json), OK[i].ptr); /* accepted: fits the schema */
        free(json);
    }
    yyjson_doc_free(schema);
}

static void test_semver_order(void **state)
{
    (void) state;
    /* ascending by SemVer precedence (semver.org §11) */
    static const char *const ORDER[] = {
        "0.9.9",      "1.0.0-0",      "1.0.0-1",       "1.0.0-2",
        "1.0.0-10",   "1.0.0-alpha",  "1.0.0-alpha.1", "1.0.0-alpha.beta",
        "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",
        "1.0.0",      "1.0.1",        "1.1.0",         "2.0.0",
        "10.0.0",
    };
    size_t n = sizeof ORDER / sizeof ORDER[0];
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < n; j++) {
            int c = 99;
            assert_int_equal(qr_manifest_semver_cmp(ORDER[i], ORDER[j], &c), QR_OK);
            int want = i < j ? -1 : i > j;
            if ((c > 0) - (c < 0) != want)
                fail_msg("%s vs %s: %d", ORDER[i], ORDER[j], c);
        }
    }
    static const char *const BAD[] = {"1",      "1.0",      "1.0.0-",      "01.0.0",
                                      "1.00.0", "1.0.0-01", "1.0.0+build", "1.0.0-a_b",
                                      "v1.0.0", "1.0.0-.a", "1.0.0-a."};
    int c;
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        if (qr_manifest_semver_valid(BAD[i]))
            fail_msg("'%s' accepted", BAD[i]);
        assert_int_equal(qr_manifest_semver_cmp(BAD[i], "1.0.0", &c), QR_ERR_INVALID);
    }
}

static void test_patterns(void **state)
{
    (void) state;
    char big[200];
    memset(big, 'a', sizeof big);
    big[128] = 0;
    assert_true(qr_manifest_id_valid(big));
    big[128] = 'a';
    big[129] = 0;
    assert_false(qr_manifest_id_valid(big));
    memset(big, 'a', sizeof big);
    big[160] = 0;
    assert_true(qr_manifest_alias_valid(big));
    big[160] = 'a';
    big[161] = 0;
    assert_false(qr_manifest_alias_valid(big));
    assert_false(qr_manifest_id_valid("a:b"));
    assert_false(qr_manifest_id_valid("aB"));
    assert_true(qr_manifest_alias_valid("hf.co/Org/Repo:Q4_K_M"));
    assert_false(qr_manifest_alias_valid("/x"));
    assert_true(qr_manifest_label_valid("q4_k_m+x"));
    assert_false(qr_manifest_label_valid("a b"));
    assert_true(qr_manifest_digest_valid("sha256:" HEX64));
    assert_false(qr_manifest_digest_valid("sha256:" HEX64_UPPER));
    assert_false(qr_manifest_digest_valid("sha512:" HEX64));
}

static void expect_fail(const char *json, size_t len, enum qr_err want, const char *msg)
{
    struct qr_manifest *m = NULL;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_manifest_parse(json, len, &d, &m);
    if (e != want || !strstr(d.msg, msg))
        fail_msg("got %s '%s', want %s '%s'", qr_err_str(e), d.msg, qr_err_str(want), msg);
    assert_null(m);
}

static void test_malformed(void **state)
{
    (void) state;
    size_t n = strlen(RICH);
    char *buf = malloc(QR_MANIFEST_MAX_BYTES + 2);
    assert_non_null(buf);
    /* trailing data after the document */
    memcpy(buf, RICH, n);
    memcpy(buf + n, " {}", 3);
    expect_fail(buf, n + 3, QR_ERR_PARSE, "not JSON at byte");
    /* truncated */
    expect_fail(RICH, n - 1, QR_ERR_PARSE, "not JSON");
    /* comments, trailing commas, NaN are not JSON */
    expect_fail("{\"id\":1,}", 9, QR_ERR_PARSE, "not JSON");
    expect_fail("[NaN]", 5, QR_ERR_PARSE, "not JSON");
    /* not an object */
    expect_fail("[]", 2, QR_ERR_INVALID, "(root): not an object");
    /* duplicate key: the second "id" */
    const char *dup = "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\","
                      "\"id\":\"a\",\"id\":\"b\"}";
    expect_fail(dup, strlen(dup), QR_ERR_INVALID, "id: duplicate key");
    /* an embedded NUL in a key and in a value */
    const char *nul = "{\"id\\u0000x\":1}";
    expect_fail(nul, strlen(nul), QR_ERR_INVALID, "unknown field");
    /* the size cap: whitespace-padded valid manifest one byte over */
    memset(buf, ' ', QR_MANIFEST_MAX_BYTES + 1);
    memcpy(buf, RICH, n);
    expect_fail(buf, QR_MANIFEST_MAX_BYTES + 1, QR_ERR_TOO_LARGE, "above the cap");
    struct qr_manifest *m = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_manifest_parse(buf, QR_MANIFEST_MAX_BYTES, &d, &m), QR_OK);
    qr_manifest_free(m);
    free(buf);
}

static void test_cap_names(void **state)
{
    (void) state;
    const char *prev = "";
    for (unsigned i = 0; i < QR_CAP_COUNT; i++) {
        const char *n = qr_manifest_cap_name(1u << i);
        assert_non_null(n);
        assert_true(strcmp(prev, n) < 0); /* bit order is sorted name order */
        prev = n;
        assert_non_null(qr_manifest_cap_key(1u << i));
    }
    assert_null(qr_manifest_cap_name(1u << QR_CAP_COUNT));
    assert_string_equal(qr_manifest_cap_name(QR_MANIFEST_CAP_TOOL_STREAMING), "tool-streaming");
    assert_string_equal(qr_manifest_cap_key(QR_MANIFEST_CAP_TOOL_STREAMING), "tool_streaming");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtins_parse), cmocka_unit_test(test_ember_fields),
        cmocka_unit_test(test_rich_parses),    cmocka_unit_test(test_rules),
        cmocka_unit_test(test_edges_accepted), cmocka_unit_test(test_semver_order),
        cmocka_unit_test(test_patterns),       cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_cap_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
