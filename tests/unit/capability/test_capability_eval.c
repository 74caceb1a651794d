/* Evaluation of a candidate's evidence: the rule table (blocks fail closed, conditional resolved
 * by the model side and never read as supported, backend-only keys, model/file contradictions,
 * conformance as evidence and strict mode), every claim recorded as a reason in source order,
 * deterministic output, requirement checks, and an end-to-end case with the predecessor's
 * Ollama descriptor table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "capability/capability.h"
#include "capability/descriptor.h"

#define S    QR_CAP_SUPPORTED
#define U    QR_CAP_UNSUPPORTED
#define C    QR_CAP_CONDITIONAL
#define K    QR_CAP_UNKNOWN
#define NONE 9 /* no claim */

static enum qr_cap_state eval_one(enum qr_cap_key key, int backend, int model, int file)
{
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    if (backend != NONE)
        qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, key, (enum qr_cap_state) backend, "b");
    if (model != NONE)
        qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, key, (enum qr_cap_state) model, "m");
    if (file != NONE)
        qr_cap_evidence_set(&ev, QR_CAP_SRC_FILE, key, (enum qr_cap_state) file, "f");
    struct qr_cap_eval e;
    qr_cap_evaluate_key(&ev, key, &e);
    assert_int_equal(e.key, key);
    assert_false(e.verified);
    assert_non_null(e.rule);
    return e.state;
}

/* backend x model side, for a key the model bears on (multimodal.vision) */
static void test_rule_table_model_key(void **state)
{
    (void) state;
    static const struct {
        int backend, model, want;
    } rows[] = {
        /* backend unsupported wins */
        {U, S, U},
        {U, U, U},
        {U, C, U},
        {U, K, U},
        {U, NONE, U},
        /* backend supported: any model not contradicting */
        {S, S, S},
        {S, K, S},
        {S, NONE, S},
        {S, U, U},
        {S, C, C},
        /* conditional is resolved by the model side, never read as supported */
        {C, S, S},
        {C, U, U},
        {C, K, K},
        {C, NONE, K},
        {C, C, C},
        /* backend unknown or silent */
        {K, S, K},
        {K, U, U},
        {K, K, K},
        {K, C, K},
        {NONE, S, K},
        {NONE, NONE, K},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        enum qr_cap_state got = eval_one(QR_CAP_VISION, rows[i].backend, rows[i].model, NONE);
        if ((int) got != rows[i].want)
            fail_msg("row %zu: backend %d model %d -> %s, want %s", i, rows[i].backend,
                     rows[i].model, qr_cap_state_str(got),
                     qr_cap_state_str((enum qr_cap_state) rows[i].want));
        /* the file proving the same thing as the manifest declares changes nothing */
        if (rows[i].model != NONE)
            assert_int_equal(eval_one(QR_CAP_VISION, rows[i].backend, NONE, rows[i].model), got);
    }
}

/* keys the model side does not bear on take the backend's state; model claims are not
 * consulted (nor listed) there */
static void test_backend_only_keys(void **state)
{
    (void) state;
    assert_false(qr_cap_info(QR_CAP_STREAM_CONTENT)->model_side);
    assert_false(qr_cap_info(QR_CAP_PLACE_CPU)->model_side);
    assert_false(qr_cap_info(QR_CAP_CONTEXT_OVERRIDE)->model_side);
    static const int backends[] = {S, U, C, K};
    for (size_t i = 0; i < 4; i++) {
        for (int m = 0; m < 4; m++) {
            assert_int_equal(eval_one(QR_CAP_STREAM_CONTENT, backends[i], m, NONE), backends[i]);
            assert_int_equal(eval_one(QR_CAP_PLACE_GPU, backends[i], NONE, m), backends[i]);
        }
    }
    assert_int_equal(eval_one(QR_CAP_PLACE_CPU, NONE, S, S), K);

    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, QR_CAP_PLACE_GPU, C, "needs a GPU");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_PLACE_GPU, S, "ignored");
    struct qr_cap_eval e;
    qr_cap_evaluate_key(&ev, QR_CAP_PLACE_GPU, &e);
    assert_int_equal(e.state, C);
    assert_int_equal(e.n_reasons, 1);
    assert_int_equal(e.reasons[0].source, QR_CAP_SRC_BACKEND);
    assert_string_equal(e.rule, "the backend's condition lies outside the model evidence");
    /* conditional never satisfies */
    assert_false(qr_cap_eval_satisfies(&e, false));
}

/* the file and the manifest disagree: fail closed */
static void test_model_file_contradiction(void **state)
{
    (void) state;
    /* manifest says MoE, the file proves a dense model (no expert tensors) */
    assert_int_equal(eval_one(QR_CAP_ARCH_MOE, C, S, U), U);
    assert_int_equal(eval_one(QR_CAP_ARCH_MOE, C, U, S), U);
    /* the file proves what the manifest does not state */
    assert_int_equal(eval_one(QR_CAP_ARCH_MOE, C, NONE, S), S);
    assert_int_equal(eval_one(QR_CAP_ARCH_MOE, C, K, S), S);
    assert_int_equal(eval_one(QR_CAP_ARCH_MOE, C, C, S), S);
}

static void test_blocks_fail_closed(void **state)
{
    (void) state;
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    enum qr_cap_key k = QR_CAP_REASONING_CONTROL;
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, S, "declared");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, k, S, "manifest");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_FILE, k, S, "template");
    qr_cap_evidence_verify(&ev, k, "conformance run 12");
    struct qr_cap_eval e;
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, S);
    assert_true(e.verified);
    assert_true(qr_cap_eval_satisfies(&e, true));

    qr_cap_evidence_block(&ev, QR_CAP_SRC_POLICY, k, "experimental gate not set");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, U);
    assert_false(e.verified);
    assert_string_equal(e.rule, "blocked by policy");

    qr_cap_evidence_block(&ev, QR_CAP_SRC_LEDGER, k, "think=false returns empty content");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, U);
    assert_string_equal(e.rule, "blocked by the ledger");
    assert_false(qr_cap_eval_satisfies(&e, false));

    /* all six reasons, in source order, with the state each source gives */
    assert_int_equal(e.n_reasons, 6);
    static const enum qr_cap_source order[] = {QR_CAP_SRC_MODEL,   QR_CAP_SRC_FILE,
                                               QR_CAP_SRC_BACKEND, QR_CAP_SRC_CONFORMANCE,
                                               QR_CAP_SRC_LEDGER,  QR_CAP_SRC_POLICY};
    for (int i = 0; i < 6; i++)
        assert_int_equal(e.reasons[i].source, order[i]);
    assert_int_equal(e.reasons[3].state, S);
    assert_int_equal(e.reasons[4].state, U);
    assert_string_equal(e.reasons[4].detail, "think=false returns empty content");
    assert_string_equal(e.reasons[5].detail, "experimental gate not set");

    /* a block recorded with any state still reads as a block; a block from another source is
     * not a block */
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, S, NULL);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_LEDGER, k, S, "known bad");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, U);
    assert_int_equal(e.reasons[1].state, U);
    assert_string_equal(e.reasons[0].detail, ""); /* NULL detail reads as "" */
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, S, NULL);
    qr_cap_evidence_block(&ev, QR_CAP_SRC_MODEL, k, "not a block source");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, S);
    assert_int_equal(e.n_reasons, 1);
}

static void test_conformance(void **state)
{
    (void) state;
    struct qr_cap_evidence ev;
    struct qr_cap_eval e;
    enum qr_cap_key k = QR_CAP_TOOLS_CALLING;

    /* verified settles a conditional the model side leaves open */
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, C, NULL);
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, K);
    qr_cap_evidence_verify(&ev, k, "tool-call conformance passed");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, S);
    assert_true(e.verified);
    assert_string_equal(e.rule, "verified by conformance on this candidate");

    /* ... but never overrides an unsupported */
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, k, U, "no tool template");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, U);
    assert_false(e.verified);
    assert_string_equal(e.rule, "the model side does not support it");

    /* supported without conformance: satisfies, but not in strict mode */
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, C, NULL);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, k, S, NULL);
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, S);
    assert_false(e.verified);
    assert_string_equal(e.rule, "the backend's condition is met by the model side");
    assert_true(qr_cap_eval_satisfies(&e, false));
    assert_false(qr_cap_eval_satisfies(&e, true));

    /* a failed conformance run fails closed even where the backend claims support */
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, S, NULL);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_CONFORMANCE, k, U, "ids lost");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, U);
    assert_string_equal(e.rule, "conformance failed on this candidate");

    /* conformance "unknown"/"conditional" is recorded but decides nothing */
    qr_cap_evidence_set(&ev, QR_CAP_SRC_CONFORMANCE, k, K, "not run");
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, S);
    assert_false(e.verified);
    assert_int_equal(e.n_reasons, 3);

    /* out-of-range input to the setters is ignored */
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, QR_CAP_NOT_A_KEY, S, NULL);
    qr_cap_evidence_set(&ev, QR_CAP_SRC__COUNT, k, S, NULL);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_BACKEND, k, (enum qr_cap_state) 7, NULL);
    qr_cap_evaluate_key(&ev, k, &e);
    assert_int_equal(e.state, K);
    assert_int_equal(e.n_reasons, 0);
}

static void test_empty_evidence_is_unknown(void **state)
{
    (void) state;
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    struct qr_cap_result r;
    qr_cap_evaluate(&ev, &r);
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        assert_int_equal(r.keys[k].key, k);
        assert_int_equal(r.keys[k].state, K);
        assert_int_equal(r.keys[k].n_reasons, 0);
        assert_string_equal(r.keys[k].rule, "the backend does not declare it");
    }
    struct qr_cap_set req = QR_CAP_SET_EMPTY, missing;
    assert_true(qr_cap_result_satisfies(&r, req, true, &missing));
    assert_true(qr_cap_set_empty(missing));
    qr_cap_set_add(&req, QR_CAP_INFERENCE_TEXT);
    assert_false(qr_cap_result_satisfies(&r, req, false, &missing));
    assert_int_equal(missing.bits, req.bits);
    assert_false(qr_cap_result_satisfies(&r, req, false, NULL));
}

/* The predecessor's Ollama descriptor (reference §3.1) with a vision + reasoning model. */
static const char ollama_json[] =
    "{\"contract_version\":\"quantum.runtime/backend/v1alpha1\",\"id\":\"ollama\","
    "\"kind\":\"ollama-adapter\",\"adapter_version\":\"development\","
    "\"execution_mode\":\"external\",\"state\":\"unknown\",\"capabilities\":{"
    "\"text\":\"conditional\",\"architecture.dense\":\"conditional\","
    "\"architecture.moe\":\"conditional\",\"moe.expert_offload\":\"conditional\","
    "\"moe.expert_parallel\":\"unknown\",\"speculative.mtp\":\"conditional\","
    "\"speculative.draft_model\":\"conditional\",\"cache.kv_offload\":\"conditional\","
    "\"cache.prompt_cache\":\"conditional\",\"multimodal.vision\":\"conditional\","
    "\"multimodal.audio\":\"conditional\",\"embeddings\":\"conditional\","
    "\"reranking\":\"unknown\",\"reasoning_control\":\"conditional\","
    "\"tools.calling\":\"conditional\",\"tools.streaming\":\"unknown\","
    "\"structured_output\":\"conditional\",\"streaming.content\":\"supported\","
    "\"streaming.reasoning\":\"conditional\",\"streaming.tool_arguments\":\"unknown\","
    "\"placement.cpu\":\"supported\",\"placement.gpu\":\"conditional\","
    "\"placement.hybrid\":\"conditional\",\"context\":{\"backend_managed\":true,"
    "\"override_supported\":\"conditional\",\"override_verified\":false}}}";

static void test_ollama_candidate(void **state)
{
    (void) state;
    struct qr_cap_descriptor d;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_cap_descriptor_parse(ollama_json, sizeof(ollama_json) - 1, &diag, &d),
                     QR_OK);
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_from_descriptor(&ev, &d);
    /* the manifest of a model with text, vision, thinking; no audio */
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_INFERENCE_TEXT, S, "manifest text=true");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_VISION, S, "manifest vision=true");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_AUDIO, U, "manifest audio=false");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_REASONING_CONTROL, S, "thinking=true");
    struct qr_cap_result r;
    qr_cap_evaluate(&ev, &r);

    /* the predecessor's test: [inference.text, multimodal.vision] routes, audio does not */
    struct qr_cap_set req = QR_CAP_SET_EMPTY, missing;
    qr_cap_set_add(&req, QR_CAP_INFERENCE_TEXT);
    qr_cap_set_add(&req, QR_CAP_VISION);
    assert_true(qr_cap_result_satisfies(&r, req, false, &missing));
    assert_false(qr_cap_result_satisfies(&r, req, true, &missing)); /* nothing verified */
    assert_int_equal(missing.bits, req.bits);
    assert_true(qr_cap_evidence_satisfies(&ev, req, false, NULL));
    qr_cap_set_add(&req, QR_CAP_AUDIO);
    assert_false(qr_cap_result_satisfies(&r, req, false, &missing));
    assert_int_equal(qr_cap_set_count(missing), 1);
    assert_true(qr_cap_set_has(missing, QR_CAP_AUDIO));
    struct qr_cap_set missing2;
    assert_false(qr_cap_evidence_satisfies(&ev, req, false, &missing2));
    assert_int_equal(missing2.bits, missing.bits);
    /* verify the two routable keys: strict mode passes for them only */
    qr_cap_evidence_verify(&ev, QR_CAP_INFERENCE_TEXT, "conformance text");
    qr_cap_evidence_verify(&ev, QR_CAP_VISION, "conformance vision");
    qr_cap_set_remove(&req, QR_CAP_AUDIO);
    assert_true(qr_cap_evidence_satisfies(&ev, req, true, &missing2));
    assert_true(qr_cap_set_empty(missing2));
    qr_cap_set_add(&req, QR_CAP_REASONING_CONTROL);
    assert_false(qr_cap_evidence_satisfies(&ev, req, true, &missing2));
    assert_int_equal(qr_cap_set_count(missing2), 1);
    assert_true(qr_cap_set_has(missing2, QR_CAP_REASONING_CONTROL));
    qr_cap_set_remove(&req, QR_CAP_REASONING_CONTROL);
    qr_cap_evidence_init(&ev); /* rebuild for the checks below */
    qr_cap_evidence_from_descriptor(&ev, &d);
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_INFERENCE_TEXT, S, "manifest text=true");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_VISION, S, "manifest vision=true");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_AUDIO, U, "manifest audio=false");
    qr_cap_evidence_set(&ev, QR_CAP_SRC_MODEL, QR_CAP_REASONING_CONTROL, S, "thinking=true");
    qr_cap_evaluate(&ev, &r);

    /* the weak spot: conditional is not supported unless the model side resolves it */
    assert_int_equal(r.keys[QR_CAP_EMBEDDINGS].state, K);
    assert_int_equal(r.keys[QR_CAP_TOOLS_CALLING].state, K);
    assert_int_equal(r.keys[QR_CAP_TOOLS_STREAMING].state, K);
    assert_int_equal(r.keys[QR_CAP_STREAM_CONTENT].state, S);
    assert_int_equal(r.keys[QR_CAP_PLACE_CPU].state, S);
    assert_int_equal(r.keys[QR_CAP_PLACE_GPU].state, C);
    assert_int_equal(r.keys[QR_CAP_CONTEXT_OVERRIDE].state, C);
    assert_int_equal(r.keys[QR_CAP_QUANT_FORMATS].state, K); /* no formats listed */
    assert_int_equal(r.keys[QR_CAP_REASONING_CONTROL].state, S);
    assert_int_equal(r.keys[QR_CAP_VISION].n_reasons, 2);
    assert_string_equal(r.keys[QR_CAP_VISION].reasons[1].detail,
                        "declared by the backend descriptor");
    assert_int_equal(r.keys[QR_CAP_VISION].reasons[1].state, C);

    /* deterministic: evaluating again gives the same bytes */
    struct qr_cap_result r2;
    memset(&r2, 0xa5, sizeof(r2));
    qr_cap_evaluate(&ev, &r2);
    assert_memory_equal(&r, &r2, sizeof(r));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rule_table_model_key),
        cmocka_unit_test(test_backend_only_keys),
        cmocka_unit_test(test_model_file_contradiction),
        cmocka_unit_test(test_blocks_fail_closed),
        cmocka_unit_test(test_conformance),
        cmocka_unit_test(test_empty_evidence_is_unknown),
        cmocka_unit_test(test_ollama_candidate),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
