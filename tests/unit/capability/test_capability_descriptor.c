/* The v1alpha1 descriptor codec: the predecessor's Ollama and llama.cpp descriptor tables parse to
 * the documented states, format back byte-identically, the struct round-trips, the Runtime's own
 * adapters describe themselves validly, and every rule rejects with a message naming the member
 * (unknown/duplicate/missing members, ids, enums, states, formats, context rules, sizes). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "capability/descriptor.h"
#include "core/config.h"

#define S QR_CAP_SUPPORTED
#define U QR_CAP_UNSUPPORTED
#define C QR_CAP_CONDITIONAL
#define K QR_CAP_UNKNOWN

/* The predecessor's Ollama descriptor (reference §3.1), in the formatter's member order. */
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

/* The predecessor's llama.cpp descriptor, members in another order and pretty-printed. */
static const char llamacpp_json[] =
    "{\n  \"id\": \"llama.cpp\", \"kind\": \"llama.cpp\", \"execution_mode\": \"external\",\n"
    "  \"state\": \"unknown\", \"adapter_version\": \"0.3.0\",\n"
    "  \"contract_version\": \"quantum.runtime/backend/v1alpha1\",\n"
    "  \"capabilities\": {\n"
    "    \"context\": {\"override_verified\": false, \"backend_managed\": true,\n"
    "                \"override_supported\": \"unsupported\"},\n"
    "    \"quantization_formats\": [\"gguf\"],\n"
    "    \"text\": \"supported\", \"architecture.dense\": \"conditional\",\n"
    "    \"architecture.moe\": \"conditional\", \"moe.expert_offload\": \"conditional\",\n"
    "    \"moe.expert_parallel\": \"unknown\", \"speculative.mtp\": \"unknown\",\n"
    "    \"speculative.draft_model\": \"conditional\", \"cache.kv_offload\": \"supported\",\n"
    "    \"cache.prompt_cache\": \"conditional\", \"multimodal.vision\": \"unsupported\",\n"
    "    \"multimodal.audio\": \"unsupported\", \"embeddings\": \"conditional\",\n"
    "    \"reranking\": \"unsupported\", \"reasoning_control\": \"unsupported\",\n"
    "    \"tools.calling\": \"unsupported\", \"tools.streaming\": \"unsupported\",\n"
    "    \"structured_output\": \"unsupported\", \"streaming.content\": \"supported\",\n"
    "    \"streaming.reasoning\": \"conditional\", \"streaming.tool_arguments\": \"unsupported\",\n"
    "    \"placement.cpu\": \"supported\", \"placement.gpu\": \"conditional\",\n"
    "    \"placement.hybrid\": \"conditional\"\n  }\n}\n";

static const enum qr_cap_state ollama_states[QR_CAP__COUNT] = {
    [QR_CAP_INFERENCE_TEXT] = C,
    [QR_CAP_ARCH_DENSE] = C,
    [QR_CAP_ARCH_MOE] = C,
    [QR_CAP_MOE_TOTAL_EXPERTS] = K,
    [QR_CAP_MOE_ACTIVE_EXPERTS] = K,
    [QR_CAP_MOE_SHARED_EXPERTS] = K,
    [QR_CAP_MOE_EXPERT_OFFLOAD] = C,
    [QR_CAP_MOE_EXPERT_PARALLEL] = K,
    [QR_CAP_QUANT_FORMATS] = K,
    [QR_CAP_SPEC_MTP] = C,
    [QR_CAP_SPEC_DRAFT_MODEL] = C,
    [QR_CAP_CACHE_KV_OFFLOAD] = C,
    [QR_CAP_CACHE_PROMPT_CACHE] = C,
    [QR_CAP_VISION] = C,
    [QR_CAP_AUDIO] = C,
    [QR_CAP_EMBEDDINGS] = C,
    [QR_CAP_RERANKING] = K,
    [QR_CAP_REASONING_CONTROL] = C,
    [QR_CAP_TOOLS_CALLING] = C,
    [QR_CAP_TOOLS_STREAMING] = K,
    [QR_CAP_STRUCTURED_OUTPUT] = C,
    [QR_CAP_STREAM_CONTENT] = S,
    [QR_CAP_STREAM_REASONING] = C,
    [QR_CAP_STREAM_TOOL_ARGS] = K,
    [QR_CAP_PLACE_CPU] = S,
    [QR_CAP_PLACE_GPU] = C,
    [QR_CAP_PLACE_HYBRID] = C,
    [QR_CAP_CONTEXT_OVERRIDE] = C,
};

static const enum qr_cap_state llamacpp_states[QR_CAP__COUNT] = {
    [QR_CAP_INFERENCE_TEXT] = S,
    [QR_CAP_ARCH_DENSE] = C,
    [QR_CAP_ARCH_MOE] = C,
    [QR_CAP_MOE_TOTAL_EXPERTS] = K,
    [QR_CAP_MOE_ACTIVE_EXPERTS] = K,
    [QR_CAP_MOE_SHARED_EXPERTS] = K,
    [QR_CAP_MOE_EXPERT_OFFLOAD] = C,
    [QR_CAP_MOE_EXPERT_PARALLEL] = K,
    [QR_CAP_QUANT_FORMATS] = C,
    [QR_CAP_SPEC_MTP] = K,
    [QR_CAP_SPEC_DRAFT_MODEL] = C,
    [QR_CAP_CACHE_KV_OFFLOAD] = S,
    [QR_CAP_CACHE_PROMPT_CACHE] = C,
    [QR_CAP_VISION] = U,
    [QR_CAP_AUDIO] = U,
    [QR_CAP_EMBEDDINGS] = C,
    [QR_CAP_RERANKING] = U,
    [QR_CAP_REASONING_CONTROL] = U,
    [QR_CAP_TOOLS_CALLING] = U,
    [QR_CAP_TOOLS_STREAMING] = U,
    [QR_CAP_STRUCTURED_OUTPUT] = U,
    [QR_CAP_STREAM_CONTENT] = S,
    [QR_CAP_STREAM_REASONING] = C,
    [QR_CAP_STREAM_TOOL_ARGS] = U,
    [QR_CAP_PLACE_CPU] = S,
    [QR_CAP_PLACE_GPU] = C,
    [QR_CAP_PLACE_HYBRID] = C,
    [QR_CAP_CONTEXT_OVERRIDE] = U,
};

static void parse_ok(const char *json, struct qr_cap_descriptor *d)
{
    struct qr_diag diag = {{0}};
    enum qr_err err = qr_cap_descriptor_parse(json, strlen(json), &diag, d);
    if (err != QR_OK)
        fail_msg("parse failed (%d): %s", err, diag.msg);
}

static char *format_ok(const struct qr_cap_descriptor *d)
{
    struct qr_diag diag = {{0}};
    char *out = NULL;
    size_t len = 0;
    enum qr_err err = qr_cap_descriptor_format(d, &diag, &out, &len);
    if (err != QR_OK)
        fail_msg("format failed (%d): %s", err, diag.msg);
    assert_int_equal(strlen(out), len);
    return out;
}

static void test_ollama_table(void **state)
{
    (void) state;
    struct qr_cap_descriptor d;
    parse_ok(ollama_json, &d);
    assert_string_equal(d.id, "ollama");
    assert_int_equal(d.kind, QR_CAP_KIND_OLLAMA);
    assert_string_equal(d.adapter_version, "development");
    assert_int_equal(d.execution_mode, QR_CAP_EXEC_EXTERNAL);
    assert_int_equal(d.state, QR_CAP_BACKEND_UNKNOWN);
    assert_true(qr_cap_descriptor_routable(&d));
    assert_string_equal(d.endpoint, "");
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (d.caps[k] != ollama_states[k])
            fail_msg("%s: %s", qr_cap_key_name((enum qr_cap_key) k), qr_cap_state_str(d.caps[k]));
    }
    assert_int_equal(d.n_formats, 0);
    assert_true(d.backend_managed);
    assert_false(d.override_verified);
    assert_int_equal(d.native_max, 0);

    /* formatting gives the same bytes back, and the struct round-trips */
    char *out = format_ok(&d);
    assert_string_equal(out, ollama_json);
    struct qr_cap_descriptor d2;
    parse_ok(out, &d2);
    assert_memory_equal(&d, &d2, sizeof(d));
    free(out);
}

static void test_llamacpp_table(void **state)
{
    (void) state;
    struct qr_cap_descriptor d;
    parse_ok(llamacpp_json, &d);
    assert_string_equal(d.id, "llama.cpp");
    assert_int_equal(d.kind, QR_CAP_KIND_LLAMACPP);
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if (d.caps[k] != llamacpp_states[k])
            fail_msg("%s: %s", qr_cap_key_name((enum qr_cap_key) k), qr_cap_state_str(d.caps[k]));
    }
    assert_int_equal(d.n_formats, 1);
    assert_string_equal(d.formats[0], "gguf");
    assert_true(qr_cap_descriptor_has_format(&d, "gguf"));
    assert_false(qr_cap_descriptor_has_format(&d, "safetensors"));
    assert_false(qr_cap_descriptor_has_format(&d, NULL));

    /* canonical text: fixed order, compact; a second round is byte-identical */
    char *a = format_ok(&d);
    assert_non_null(strstr(a, "\"moe.expert_parallel\":\"unknown\","
                              "\"quantization_formats\":[\"gguf\"],\"speculative.mtp\""));
    struct qr_cap_descriptor d2;
    parse_ok(a, &d2);
    assert_memory_equal(&d, &d2, sizeof(d));
    char *b = format_ok(&d2);
    assert_string_equal(a, b);
    free(a);
    free(b);

    /* the evidence it gives */
    struct qr_cap_evidence ev;
    qr_cap_evidence_init(&ev);
    qr_cap_evidence_from_descriptor(&ev, &d);
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        assert_true(ev.claims[QR_CAP_SRC_BACKEND][k].set);
        assert_int_equal(ev.claims[QR_CAP_SRC_BACKEND][k].state, llamacpp_states[k]);
    }
}

static void test_extensions_round_trip(void **state)
{
    (void) state;
    struct qr_cap_descriptor d;
    parse_ok(ollama_json, &d);
    /* expert-count keys are emitted when known, omitted when unknown */
    d.caps[QR_CAP_MOE_TOTAL_EXPERTS] = S;
    d.caps[QR_CAP_MOE_SHARED_EXPERTS] = U;
    d.kind = QR_CAP_KIND_OPENAI;
    d.state = QR_CAP_BACKEND_READY;
    snprintf(d.endpoint, sizeof(d.endpoint), "http://127.0.0.1:8080");
    d.caps[QR_CAP_CONTEXT_OVERRIDE] = S;
    d.override_verified = true;
    d.native_max = 131072;
    snprintf(d.formats[0], sizeof(d.formats[0]), "gguf");
    snprintf(d.formats[1], sizeof(d.formats[1]), "Q4_K_M");
    d.n_formats = 2;
    d.caps[QR_CAP_QUANT_FORMATS] = C;
    char *out = format_ok(&d);
    assert_non_null(strstr(out, "\"kind\":\"openai-compatible\""));
    assert_non_null(strstr(out, "\"state\":\"ready\",\"endpoint\":\"http://127.0.0.1:8080\""));
    assert_non_null(strstr(out, "\"moe.total_experts\":\"supported\","
                                "\"moe.shared_experts\":\"unsupported\""));
    assert_null(strstr(out, "moe.active_experts"));
    assert_non_null(strstr(out, "\"quantization_formats\":[\"gguf\",\"Q4_K_M\"]"));
    assert_non_null(strstr(out, "\"override_verified\":true,\"native_max\":131072}"));
    struct qr_cap_descriptor d2;
    parse_ok(out, &d2);
    assert_memory_equal(&d, &d2, sizeof(d));
    free(out);

    /* validate catches what an adapter might fill in wrongly */
    struct qr_diag diag = {{0}};
    d2.caps[QR_CAP_QUANT_FORMATS] = S;
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    assert_non_null(strstr(diag.msg, "quantization.formats"));
    d2 = d;
    d2.caps[QR_CAP_CONTEXT_OVERRIDE] = C;
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    d2 = d;
    d2.id[0] = '-';
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    d2 = d;
    memset(d2.id, 'a', sizeof(d2.id)); /* no terminator inside the array */
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    d2 = d;
    d2.kind = QR_CAP_KIND__COUNT;
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    d2 = d;
    d2.caps[QR_CAP_VISION] = (enum qr_cap_state) 4;
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    d2 = d;
    d2.native_max = -1;
    char *never = NULL;
    size_t len = 0;
    assert_int_equal(qr_cap_descriptor_format(&d2, &diag, &never, &len), QR_ERR_INVALID);
    assert_null(never);
    d2 = d;
    snprintf(d2.formats[1], sizeof(d2.formats[1]), "gguf");
    assert_int_equal(qr_cap_descriptor_validate(&d2, &diag), QR_ERR_INVALID);
    assert_non_null(strstr(diag.msg, "duplicate format 'gguf'"));
}

/* Replace the first occurrence of from in ollama_json with to. */
static char *mutate(const char *from, const char *to)
{
    const char *at = strstr(ollama_json, from);
    if (!at)
        fail_msg("fixture lacks '%s'", from);
    size_t n = strlen(ollama_json) - strlen(from) + strlen(to) + 1;
    char *out = malloc(n);
    size_t pre = (size_t) (at - ollama_json);
    memcpy(out, ollama_json, pre);
    strcpy(out + pre, to);
    strcat(out, at + strlen(from));
    return out;
}

static void test_rejections(void **state)
{
    (void) state;
    static const struct {
        const char *from, *to;
        enum qr_err err;
        const char *msg; /* substring of the diagnostic */
    } rows[] = {
        {"\"id\":\"ollama\"", "\"id\":\"Ollama\"", QR_ERR_INVALID, "'id': must match"},
        {"\"id\":\"ollama\"", "\"id\":\"-ollama\"", QR_ERR_INVALID, "'id'"},
        {"\"id\":\"ollama\"", "\"id\":\".x\"", QR_ERR_INVALID, "'id'"},
        {"\"id\":\"ollama\"", "\"id\":\"\"", QR_ERR_INVALID, "'id'"},
        {"\"id\":\"ollama\"", "\"id\":\"a b\"", QR_ERR_INVALID, "'id'"},
        {"\"id\":\"ollama\"", "\"id\":7", QR_ERR_INVALID, "'id': must be a string"},
        {"\"id\":\"ollama\"", "\"id\":\"ollama\",\"id\":\"x\"", QR_ERR_INVALID,
         "'id': duplicate member"},
        {"\"id\":\"ollama\",", "", QR_ERR_INVALID, "'id': missing"},
        {"quantum.runtime/backend/v1alpha1", "quantum.runtime/backend/v1", QR_ERR_INVALID,
         "'contract_version'"},
        {"\"kind\":\"ollama-adapter\"", "\"kind\":\"ollama\"", QR_ERR_INVALID,
         "'kind': unknown kind"},
        {"\"adapter_version\":\"development\"", "\"adapter_version\":\"\"", QR_ERR_INVALID,
         "'adapter_version'"},
        {"\"adapter_version\":\"development\"", "\"adapter_version\":\"dev\\nx\"", QR_ERR_INVALID,
         "'adapter_version'"},
        {"\"adapter_version\":\"development\"", "\"adapter_version\":\"d\\u0000\"", QR_ERR_INVALID,
         "'adapter_version'"},
        {"\"execution_mode\":\"external\"", "\"execution_mode\":\"remote\"", QR_ERR_INVALID,
         "'execution_mode'"},
        {"\"state\":\"unknown\"", "\"state\":\"Ready\"", QR_ERR_INVALID, "'state'"},
        {"\"state\":\"unknown\"", "\"state\":\"unknown\",\"extra\":1", QR_ERR_INVALID,
         "'extra': unknown member"},
        {"\"state\":\"unknown\"", "\"state\":\"unknown\",\"endpoint\":\"\"", QR_ERR_INVALID,
         "'endpoint'"},
        {"\"text\":\"conditional\"", "\"text\":\"yes\"", QR_ERR_INVALID,
         "'capabilities.text': must be one of"},
        {"\"text\":\"conditional\"", "\"text\":true", QR_ERR_INVALID, "'capabilities.text'"},
        {"\"text\":\"conditional\",", "", QR_ERR_INVALID, "'capabilities.text': missing"},
        {"\"text\":\"conditional\"", "\"inference.text\":\"conditional\"", QR_ERR_INVALID,
         "'capabilities.inference.text': unknown member"},
        {"\"text\":\"conditional\"", "\"text\":\"conditional\",\"text\":\"supported\"",
         QR_ERR_INVALID, "'capabilities.text': duplicate member"},
        {"\"reasoning_control\":\"conditional\"", "\"reasoning.control\":\"conditional\"",
         QR_ERR_INVALID, "'capabilities.reasoning.control': unknown member"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"future.magic\":\"supported\"",
         QR_ERR_INVALID, "'capabilities.future.magic': unknown member"},
        {"\"reranking\":\"unknown\"",
         "\"reranking\":\"unknown\",\"context.override_supported\":\"supported\"", QR_ERR_INVALID,
         "'capabilities.context.override_supported': unknown member"},
        {"\"reranking\":\"unknown\"",
         "\"reranking\":\"unknown\",\"quantization.formats\":\"supported\"", QR_ERR_INVALID,
         "unknown member"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"moe.total_experts\":\"x\"",
         QR_ERR_INVALID, "'capabilities.moe.total_experts'"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"quantization_formats\":[]",
         QR_ERR_INVALID, "must not be empty"},
        {"\"reranking\":\"unknown\"",
         "\"reranking\":\"unknown\",\"quantization_formats\":[\"gguf\",\"gguf\"]", QR_ERR_INVALID,
         "duplicate format 'gguf'"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"quantization_formats\":[\"\"]",
         QR_ERR_INVALID, "item 0"},
        {"\"reranking\":\"unknown\"",
         "\"reranking\":\"unknown\",\"quantization_formats\":[\"a/b\"]", QR_ERR_INVALID, "item 0"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"quantization_formats\":[1]",
         QR_ERR_INVALID, "item 0"},
        {"\"reranking\":\"unknown\"", "\"reranking\":\"unknown\",\"quantization_formats\":\"gguf\"",
         QR_ERR_INVALID, "must be an array"},
        {"\"reranking\":\"unknown\"",
         "\"reranking\":\"unknown\",\"quantization_formats\":[\"a\",\"b\",\"c\",\"d\",\"e\","
         "\"f\",\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\",\"p\",\"q\"]",
         QR_ERR_INVALID, "more than 16 formats"},
        {"\"override_verified\":false", "\"override_verified\":true", QR_ERR_INVALID,
         "true requires override_supported=supported"},
        {"\"override_verified\":false", "\"override_verified\":0", QR_ERR_INVALID,
         "'capabilities.context.override_verified': must be a boolean"},
        {",\"override_verified\":false", "", QR_ERR_INVALID,
         "'capabilities.context.override_verified': missing"},
        {"\"backend_managed\":true,", "", QR_ERR_INVALID, "backend_managed': missing"},
        {"\"override_supported\":\"conditional\"", "\"override_supported\":\"maybe\"",
         QR_ERR_INVALID, "override_supported"},
        {"\"override_verified\":false", "\"override_verified\":false,\"native_max\":-1",
         QR_ERR_INVALID, "'capabilities.context.native_max': must be an integer >= 0"},
        {"\"override_verified\":false", "\"override_verified\":false,\"native_max\":1.5",
         QR_ERR_INVALID, "native_max"},
        {"\"override_verified\":false", "\"override_verified\":false,\"native_max\":\"8\"",
         QR_ERR_INVALID, "native_max"},
        {"\"override_verified\":false",
         "\"override_verified\":false,\"native_max\":18446744073709551615", QR_ERR_INVALID,
         "native_max"},
        {"\"override_verified\":false", "\"override_verified\":false,\"max\":1", QR_ERR_INVALID,
         "'capabilities.context.max': unknown member"},
        {"\"override_verified\":false", "\"override_verified\":false,\"backend_managed\":true",
         QR_ERR_INVALID, "backend_managed': duplicate member"},
        {",\"context\":{\"backend_managed\":true,\"override_supported\":\"conditional\","
         "\"override_verified\":false}",
         "", QR_ERR_INVALID, "'capabilities.context': missing"},
        {"\"context\":{", "\"context\":[{", QR_ERR_PARSE, "invalid backend descriptor"},
        {"\"capabilities\":{", "\"capabilities\":[],\"x\":{", QR_ERR_INVALID,
         "'capabilities': must be an object"},
        {"}}}", "}}", QR_ERR_PARSE, "invalid backend descriptor"},
        {"}}}", "}}},", QR_ERR_PARSE, "invalid backend descriptor"},
        {"}}}", "}}}/*c*/", QR_ERR_PARSE, "invalid backend descriptor"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char *json = mutate(rows[i].from, rows[i].to);
        struct qr_cap_descriptor d;
        struct qr_diag diag = {{0}};
        enum qr_err err = qr_cap_descriptor_parse(json, strlen(json), &diag, &d);
        if (err != rows[i].err || !strstr(diag.msg, rows[i].msg))
            fail_msg("row %zu: err %d msg '%s', want %d '%s'", i, err, diag.msg, rows[i].err,
                     rows[i].msg);
        if (strncmp(diag.msg, "invalid backend descriptor: ", 28) != 0)
            fail_msg("row %zu: message '%s'", i, diag.msg);
        free(json);
    }
}

static void test_document_level(void **state)
{
    (void) state;
    struct qr_cap_descriptor d;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_cap_descriptor_parse("", 0, &diag, &d), QR_ERR_PARSE);
    assert_int_equal(qr_cap_descriptor_parse(NULL, 0, &diag, &d), QR_ERR_PARSE);
    assert_int_equal(qr_cap_descriptor_parse("[]", 2, &diag, &d), QR_ERR_INVALID);
    assert_string_equal(diag.msg, "invalid backend descriptor: not a JSON object");
    assert_int_equal(qr_cap_descriptor_parse("{}", 2, &diag, &d), QR_ERR_INVALID);
    assert_string_equal(diag.msg, "invalid backend descriptor: 'contract_version': missing");
    assert_int_equal(qr_cap_descriptor_parse("{\"a\":1}x", 8, &diag, &d), QR_ERR_PARSE);
    /* invalid UTF-8 */
    assert_int_equal(qr_cap_descriptor_parse("{\"\xff\":1}", 7, &diag, &d), QR_ERR_PARSE);
    /* the length counts, not a terminator: a prefix of a valid document is malformed */
    assert_int_equal(qr_cap_descriptor_parse(ollama_json, 40, &diag, &d), QR_ERR_PARSE);
    /* size cap before parsing */
    size_t big = QR_CAP_DESC_MAX_BYTES + 1;
    char *buf = malloc(big);
    memset(buf, ' ', big);
    memcpy(buf, ollama_json, sizeof(ollama_json) - 1);
    assert_int_equal(qr_cap_descriptor_parse(buf, big, &diag, &d), QR_ERR_TOO_LARGE);
    /* trailing whitespace within the cap is fine */
    assert_int_equal(qr_cap_descriptor_parse(buf, big - 1, &diag, &d), QR_OK);
    free(buf);
    /* a hostile member name is cut and sanitised in the message */
    static const char quote_nl[] = "{\"x'\\n\\u0001\":1}";
    assert_int_equal(qr_cap_descriptor_parse(quote_nl, strlen(quote_nl), &diag, &d),
                     QR_ERR_INVALID);
    assert_string_equal(diag.msg, "invalid backend descriptor: 'x\?\?\?': unknown member");
    char hostile[400];
    memset(hostile, 'x', sizeof(hostile));
    memcpy(hostile, "{\"", 2);
    memcpy(hostile + sizeof(hostile) - 4, "\":1}", 4);
    assert_int_equal(qr_cap_descriptor_parse(hostile, sizeof(hostile), &diag, &d), QR_ERR_INVALID);
    assert_true(strlen(diag.msg) < 140);
}

/* The Runtime's own adapters describe themselves in a shape this codec accepts. */
static void check_adapter(const struct qr_backend_vtable *vt, enum qr_cap_backend_kind kind)
{
    char ollama_url[] = "http://127.0.0.1:11434", openai_url[] = "http://127.0.0.1:8080";
    struct qr_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.ollama_url = ollama_url;
    cfg.openai_url = openai_url;
    struct qr_backend_env env = {.config = &cfg};
    struct qr_backend *b = NULL;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_backend_new(vt, &env, &diag, &b), QR_OK);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *obj = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, obj);
    qr_backend_describe(b, doc, obj);
    size_t len = 0;
    char *json = yyjson_mut_write(doc, 0, &len);
    struct qr_cap_descriptor d;
    if (qr_cap_descriptor_parse(json, len, &diag, &d) != QR_OK)
        fail_msg("%s: %s in %s", vt->id, diag.msg, json);
    assert_string_equal(d.id, vt->id);
    assert_int_equal(d.kind, kind);
    assert_true(d.endpoint[0] != 0);
    assert_int_equal(d.caps[QR_CAP_STREAM_CONTENT], QR_CAP_SUPPORTED);
    free(json);
    yyjson_mut_doc_free(doc);
    qr_backend_free(b);
}

static void test_runtime_adapters(void **state)
{
    (void) state;
    check_adapter(&qr_backend_ollama, QR_CAP_KIND_OLLAMA);
    check_adapter(&qr_backend_openai, QR_CAP_KIND_OPENAI);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ollama_table),          cmocka_unit_test(test_llamacpp_table),
        cmocka_unit_test(test_extensions_round_trip), cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_document_level),        cmocka_unit_test(test_runtime_adapters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
