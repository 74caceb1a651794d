/* The key table (the 28 keys of DESIGN.md in order, 24 of them the predecessor's names, the four
 * descriptor field aliases), name <-> enum lookups that fail closed on anything else, key sets,
 * and the four state strings. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "capability/capability.h"

/* DESIGN.md "Capability contract", exactly as written there, in order. */
static const char *const design_keys[] = {
    "inference.text",
    "architecture.dense",
    "architecture.moe",
    "moe.total_experts",
    "moe.active_experts",
    "moe.shared_experts",
    "moe.expert_offload",
    "moe.expert_parallel",
    "quantization.formats",
    "speculative.mtp",
    "speculative.draft_model",
    "cache.kv_offload",
    "cache.prompt_cache",
    "multimodal.vision",
    "multimodal.audio",
    "embeddings",
    "reranking",
    "reasoning.control",
    "tools.calling",
    "tools.streaming",
    "structured_output",
    "streaming.content",
    "streaming.reasoning",
    "streaming.tool_arguments",
    "placement.cpu",
    "placement.gpu",
    "placement.hybrid",
    "context.override",
};

static void test_table_matches_design(void **state)
{
    (void) state;
    assert_int_equal(QR_CAP__COUNT, 28);
    assert_int_equal(sizeof(design_keys) / sizeof(design_keys[0]), QR_CAP__COUNT);
    int legacy = 0;
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        const struct qr_cap_info *info = qr_cap_info((enum qr_cap_key) k);
        assert_non_null(info);
        assert_int_equal(info->key, k);
        assert_string_equal(info->name, design_keys[k]);
        assert_string_equal(qr_cap_key_name((enum qr_cap_key) k), design_keys[k]);
        assert_non_null(info->field);
        assert_non_null(info->summary);
        legacy += info->legacy;
        /* every name round-trips */
        assert_int_equal(qr_cap_key_parse(qr_slice_str(design_keys[k])), k);
        assert_int_equal(qr_cap_key_parse_any(qr_slice_str(design_keys[k])), k);
        assert_int_equal(qr_cap_key_parse_field(qr_slice_str(info->field)), k);
    }
    /* the predecessor's "exactly 24 declared names" */
    assert_int_equal(legacy, 24);
    assert_false(qr_cap_info(QR_CAP_MOE_TOTAL_EXPERTS)->legacy);
    assert_false(qr_cap_info(QR_CAP_QUANT_FORMATS)->legacy);
    assert_null(qr_cap_info(QR_CAP_NOT_A_KEY));
    assert_null(qr_cap_info(QR_CAP__COUNT));
    assert_string_equal(qr_cap_key_name(QR_CAP_NOT_A_KEY), "not-a-key");
}

static void test_aliases(void **state)
{
    (void) state;
    static const struct {
        const char *field;
        enum qr_cap_key key;
    } aliases[] = {
        {"text", QR_CAP_INFERENCE_TEXT},
        {"reasoning_control", QR_CAP_REASONING_CONTROL},
        {"context.override_supported", QR_CAP_CONTEXT_OVERRIDE},
        {"quantization_formats", QR_CAP_QUANT_FORMATS},
    };
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        struct qr_slice s = qr_slice_str(aliases[i].field);
        assert_int_equal(qr_cap_key_parse_any(s), aliases[i].key);
        assert_int_equal(qr_cap_key_parse_field(s), aliases[i].key);
        /* an alias is not a canonical name, and the canonical name is not a field */
        assert_int_equal(qr_cap_key_parse(s), QR_CAP_NOT_A_KEY);
        struct qr_slice canon = qr_slice_str(qr_cap_key_name(aliases[i].key));
        assert_int_equal(qr_cap_key_parse_field(canon), QR_CAP_NOT_A_KEY);
    }
    /* exactly four names differ between field and canonical name */
    int differ = 0;
    for (int k = 0; k < QR_CAP__COUNT; k++)
        differ += strcmp(qr_cap_info((enum qr_cap_key) k)->field,
                         qr_cap_info((enum qr_cap_key) k)->name) != 0;
    assert_int_equal(differ, 4);
}

static void test_not_a_key(void **state)
{
    (void) state;
    static const char *const bad[] = {
        "",
        "Inference.text",
        "inference.text ",
        " inference.text",
        "inference",
        "thinking",
        "reasoning-control",
        "tool-streaming",
        "future.magic",
        "moe_expert_offload",
        "kv_cache_placement",
        "context",
        "inference.text\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(qr_cap_key_parse_any(qr_slice_str(bad[i])), QR_CAP_NOT_A_KEY);
        assert_int_equal(qr_cap_key_parse(qr_slice_str(bad[i])), QR_CAP_NOT_A_KEY);
    }
    /* embedded NUL: the length counts, not the terminator */
    struct qr_slice nul = {"embeddings\0x", 12};
    assert_int_equal(qr_cap_key_parse_any(nul), QR_CAP_NOT_A_KEY);
    assert_int_equal(qr_cap_key_parse_any((struct qr_slice){NULL, 0}), QR_CAP_NOT_A_KEY);
    assert_int_equal(qr_cap_key_parse_any((struct qr_slice){"embeddingsX", 10}), QR_CAP_EMBEDDINGS);
}

static void test_sets(void **state)
{
    (void) state;
    struct qr_cap_set s = QR_CAP_SET_EMPTY;
    assert_true(qr_cap_set_empty(s));
    qr_cap_set_add(&s, QR_CAP_TOOLS_CALLING);
    qr_cap_set_add(&s, QR_CAP_INFERENCE_TEXT);
    qr_cap_set_add(&s, QR_CAP_CONTEXT_OVERRIDE);
    qr_cap_set_add(&s, QR_CAP_INFERENCE_TEXT);
    qr_cap_set_add(&s, QR_CAP_NOT_A_KEY); /* ignored */
    qr_cap_set_add(&s, QR_CAP__COUNT);    /* ignored */
    assert_int_equal(qr_cap_set_count(s), 3);
    assert_true(qr_cap_set_has(s, QR_CAP_TOOLS_CALLING));
    assert_false(qr_cap_set_has(s, QR_CAP_EMBEDDINGS));
    assert_false(qr_cap_set_has(s, QR_CAP_NOT_A_KEY));

    enum qr_cap_key keys[QR_CAP__COUNT];
    assert_int_equal(qr_cap_set_sorted(s, keys), 3);
    assert_int_equal(keys[0], QR_CAP_CONTEXT_OVERRIDE);
    assert_int_equal(keys[1], QR_CAP_INFERENCE_TEXT);
    assert_int_equal(keys[2], QR_CAP_TOOLS_CALLING);

    struct qr_cap_set t = QR_CAP_SET_EMPTY;
    qr_cap_set_add(&t, QR_CAP_INFERENCE_TEXT);
    assert_int_equal(qr_cap_set_count(qr_cap_set_minus(s, t)), 2);
    assert_int_equal(qr_cap_set_count(qr_cap_set_union(s, t)), 3);
    qr_cap_set_remove(&s, QR_CAP_TOOLS_CALLING);
    assert_false(qr_cap_set_has(s, QR_CAP_TOOLS_CALLING));

    /* the full set sorts into byte order */
    struct qr_cap_set all = QR_CAP_SET_EMPTY;
    for (int k = 0; k < QR_CAP__COUNT; k++)
        qr_cap_set_add(&all, (enum qr_cap_key) k);
    assert_int_equal(qr_cap_set_sorted(all, keys), QR_CAP__COUNT);
    for (int i = 1; i < QR_CAP__COUNT; i++)
        assert_true(strcmp(qr_cap_key_name(keys[i - 1]), qr_cap_key_name(keys[i])) < 0);
    assert_int_equal(keys[0], QR_CAP_ARCH_DENSE);
}

static void test_set_parse(void **state)
{
    (void) state;
    struct qr_slice names[] = {QR_SLICE_LIT("multimodal.vision"), QR_SLICE_LIT("text"),
                               QR_SLICE_LIT("inference.text")};
    struct qr_cap_set s = {0};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_cap_set_parse(names, 3, &d, &s), QR_OK);
    assert_int_equal(qr_cap_set_count(s), 2);
    assert_true(qr_cap_set_has(s, QR_CAP_VISION));

    struct qr_slice bad[] = {QR_SLICE_LIT("inference.text"), QR_SLICE_LIT("future.magic")};
    s.bits = 7;
    assert_int_equal(qr_cap_set_parse(bad, 2, &d, &s), QR_ERR_INVALID);
    assert_string_equal(d.msg, "unknown capability 'future.magic'");
    assert_int_equal(s.bits, 7); /* untouched on failure */

    struct qr_slice empty[] = {QR_SLICE_LIT("")};
    assert_int_equal(qr_cap_set_parse(empty, 1, &d, &s), QR_ERR_INVALID);
    assert_string_equal(d.msg, "unknown capability ''");

    char longname[300];
    memset(longname, 'x', sizeof(longname));
    struct qr_slice huge[] = {{longname, sizeof(longname)}};
    assert_int_equal(qr_cap_set_parse(huge, 1, &d, &s), QR_ERR_INVALID);
    assert_true(strlen(d.msg) < 100);

    assert_int_equal(qr_cap_set_parse(names, 257, &d, &s), QR_ERR_TOO_LARGE);
    assert_int_equal(qr_cap_set_parse(NULL, 0, &d, &s), QR_OK);
    assert_true(qr_cap_set_empty(s));
}

static void test_states(void **state)
{
    (void) state;
    assert_int_equal(QR_CAP_UNKNOWN, 0);
    static const char *const names[] = {"supported", "unsupported", "conditional", "unknown"};
    for (size_t i = 0; i < 4; i++) {
        enum qr_cap_state s = QR_CAP_UNKNOWN;
        assert_int_equal(qr_cap_state_parse(qr_slice_str(names[i]), &s), QR_OK);
        assert_string_equal(qr_cap_state_str(s), names[i]);
    }
    static const char *const bad[] = {"", "Supported", "supported ", "yes", "true", "partial"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        enum qr_cap_state s = QR_CAP_CONDITIONAL;
        assert_int_equal(qr_cap_state_parse(qr_slice_str(bad[i]), &s), QR_ERR_INVALID);
        assert_int_equal(s, QR_CAP_CONDITIONAL);
    }
    assert_string_equal(qr_cap_state_str((enum qr_cap_state) 99), "unknown");
    assert_string_equal(qr_cap_source_str(QR_CAP_SRC_FILE), "file");
    assert_string_equal(qr_cap_source_str(QR_CAP_SRC_CONFORMANCE), "conformance");
    assert_string_equal(qr_cap_source_str((enum qr_cap_source) 42), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_design),
        cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_not_a_key),
        cmocka_unit_test(test_sets),
        cmocka_unit_test(test_set_parse),
        cmocka_unit_test(test_states),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
