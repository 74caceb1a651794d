/* Request -> required capabilities: every field of struct qr_request that implies a capability
 * maps to it (text, tools, tool history, tool_choice, stream combinations, think, format, image
 * and audio parts in messages and in generate "images", embeddings), and the fields that do not
 * imply one add nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "capability/capability.h"
#include "contract/request.h"

/* The canonical names of s joined by ',' in sorted order. */
static const char *names(struct qr_cap_set s)
{
    static char buf[1024];
    enum qr_cap_key keys[QR_CAP__COUNT];
    size_t n = qr_cap_set_sorted(s, keys);
    buf[0] = 0;
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(buf, ",");
        strcat(buf, qr_cap_key_name(keys[i]));
    }
    return buf;
}

static struct qr_part text_part = {.kind = QR_PART_TEXT, .text = {"hi", 2}};
static struct qr_tool tool = {.name = {"get_weather", 11}};

static void chat(struct qr_request *r, struct qr_message *m, size_t n)
{
    memset(r, 0, sizeof(*r));
    r->op = QR_OP_CHAT;
    r->messages = m;
    r->n_messages = n;
}

static void test_plain_chat_and_completion(void **state)
{
    (void) state;
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &text_part, .n_parts = 1};
    struct qr_request r;
    chat(&r, &m, 1);
    assert_string_equal(names(qr_cap_required(&r)), "inference.text");
    r.stream = true;
    r.stream_set = true;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,streaming.content");

    memset(&r, 0, sizeof(r));
    r.op = QR_OP_COMPLETION;
    r.prompt = (struct qr_slice){"once", 4};
    assert_string_equal(names(qr_cap_required(&r)), "inference.text");

    /* fields that imply nothing */
    r.context_len = (struct qr_opt_i64){true, 32768};
    r.max_tokens = (struct qr_opt_i64){true, 16};
    r.sampling.temperature = (struct qr_opt_f64){true, 0.2};
    r.keep_alive.set = true;
    r.logprobs = QR_TRUE;
    r.suffix = (struct qr_slice){"end", 3};
    r.raw = true;
    r.parallel_tool_calls = QR_TRUE;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text");

    assert_true(qr_cap_set_empty(qr_cap_required(NULL)));
}

static void test_tools(void **state)
{
    (void) state;
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &text_part, .n_parts = 1};
    struct qr_request r;
    chat(&r, &m, 1);
    r.tools = &tool;
    r.n_tools = 1;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
    r.stream = true;
    assert_string_equal(names(qr_cap_required(&r)),
                        "inference.text,streaming.content,streaming.tool_arguments,"
                        "tools.calling,tools.streaming");
    /* tool_choice none: no call can come, so no tool capability at all */
    r.tool_choice.kind = QR_TOOL_CHOICE_NONE;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,streaming.content");
    r.tool_choice.kind = QR_TOOL_CHOICE_AUTO;
    r.stream = false;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
    /* required / a named function without tools still needs tool calling (fail closed) */
    r.n_tools = 0;
    r.tools = NULL;
    r.tool_choice.kind = QR_TOOL_CHOICE_REQUIRED;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
    r.tool_choice = (struct qr_tool_choice){QR_TOOL_CHOICE_FUNCTION, {"f", 1}};
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
}

static void test_tool_history(void **state)
{
    (void) state;
    struct qr_tool_call call = {.id = {"call_1", 6}, .name = {"f", 1}, .arguments = {"{}", 2}};
    struct qr_message m[3] = {
        {.role = QR_ROLE_USER, .parts = &text_part, .n_parts = 1},
        {.role = QR_ROLE_ASSISTANT, .tool_calls = &call, .n_tool_calls = 1},
        {.role = QR_ROLE_TOOL, .parts = &text_part, .n_parts = 1, .tool_call_id = {"call_1", 6}},
    };
    struct qr_request r;
    chat(&r, m, 3);
    r.stream = true;
    /* the template must render the earlier calls, but no new call streams */
    assert_string_equal(names(qr_cap_required(&r)),
                        "inference.text,streaming.content,tools.calling");
    chat(&r, &m[2], 1); /* a tool result alone */
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
    chat(&r, &m[1], 1); /* an assistant tool call alone */
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,tools.calling");
}

static void test_think(void **state)
{
    (void) state;
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &text_part, .n_parts = 1};
    struct qr_request r;
    chat(&r, &m, 1);
    static const struct {
        enum qr_think_kind kind;
        bool stream;
        const char *want;
    } rows[] = {
        {QR_THINK_UNSET, false, "inference.text"},
        {QR_THINK_UNSET, true, "inference.text,streaming.content"},
        {QR_THINK_OFF, false, "inference.text,reasoning.control"},
        {QR_THINK_OFF, true, "inference.text,reasoning.control,streaming.content"},
        {QR_THINK_ON, false, "inference.text,reasoning.control"},
        {QR_THINK_ON, true,
         "inference.text,reasoning.control,streaming.content,streaming.reasoning"},
        {QR_THINK_LEVEL, false, "inference.text,reasoning.control"},
        {QR_THINK_LEVEL, true,
         "inference.text,reasoning.control,streaming.content,streaming.reasoning"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        r.think.kind = rows[i].kind;
        r.think.level =
            rows[i].kind == QR_THINK_LEVEL ? (struct qr_slice){"high", 4} : (struct qr_slice){0};
        r.stream = rows[i].stream;
        assert_string_equal(names(qr_cap_required(&r)), rows[i].want);
    }
}

static void test_format(void **state)
{
    (void) state;
    struct qr_request r;
    chat(&r, NULL, 0);
    r.format.kind = QR_FORMAT_JSON;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,structured_output");
    r.format.kind = QR_FORMAT_SCHEMA;
    r.format.schema = (struct qr_slice){"{\"type\":\"object\"}", 17};
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,structured_output");
    r.format.kind = QR_FORMAT_NONE;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text");
}

static void test_modalities(void **state)
{
    (void) state;
    struct qr_part parts[3] = {
        {.kind = QR_PART_TEXT, .text = {"what is this", 12}},
        {.kind = QR_PART_IMAGE, .data = {"iVBORw0K", 8}},
        {.kind = QR_PART_AUDIO, .data = {"UklGRg", 6}},
    };
    struct qr_message m[2] = {
        {.role = QR_ROLE_SYSTEM, .parts = parts, .n_parts = 1},
        {.role = QR_ROLE_USER, .parts = parts, .n_parts = 2},
    };
    struct qr_request r;
    chat(&r, m, 2);
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,multimodal.vision");
    m[1].n_parts = 3;
    assert_string_equal(names(qr_cap_required(&r)),
                        "inference.text,multimodal.audio,multimodal.vision");
    m[1].parts = &parts[2];
    m[1].n_parts = 1;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,multimodal.audio");

    /* Ollama generate "images" */
    memset(&r, 0, sizeof(r));
    r.op = QR_OP_COMPLETION;
    r.prompt = (struct qr_slice){"describe", 8};
    r.images = &parts[1];
    r.n_images = 1;
    assert_string_equal(names(qr_cap_required(&r)), "inference.text,multimodal.vision");
}

static void test_embeddings_and_endpoints(void **state)
{
    (void) state;
    struct qr_slice in = {"hello", 5};
    struct qr_request r;
    memset(&r, 0, sizeof(r));
    r.op = QR_OP_EMBED;
    r.inputs = &in;
    r.n_inputs = 1;
    assert_string_equal(names(qr_cap_required(&r)), "embeddings");
    r.stream = true; /* meaningless for embeddings: adds nothing */
    assert_string_equal(names(qr_cap_required(&r)), "embeddings");
    r.op = QR_OP_RERANK; /* reranking only, never inference.text or streaming */
    r.query = in;
    assert_string_equal(names(qr_cap_required(&r)), "reranking");

    assert_string_equal(names(qr_cap_required_for_endpoint(QR_CAP_EP_CHAT)), "inference.text");
    assert_string_equal(names(qr_cap_required_for_endpoint(QR_CAP_EP_COMPLETION)),
                        "inference.text");
    assert_string_equal(names(qr_cap_required_for_endpoint(QR_CAP_EP_EMBED)), "embeddings");
    assert_string_equal(names(qr_cap_required_for_endpoint(QR_CAP_EP_RERANK)), "reranking");
    assert_true(qr_cap_set_empty(qr_cap_required_for_endpoint((enum qr_cap_endpoint) 77)));
}

static void test_everything_at_once(void **state)
{
    (void) state;
    struct qr_part parts[2] = {{.kind = QR_PART_IMAGE}, {.kind = QR_PART_AUDIO}};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = parts, .n_parts = 2};
    struct qr_request r;
    chat(&r, &m, 1);
    r.tools = &tool;
    r.n_tools = 1;
    r.think.kind = QR_THINK_ON;
    r.format.kind = QR_FORMAT_JSON;
    r.stream = true;
    assert_string_equal(names(qr_cap_required(&r)),
                        "inference.text,multimodal.audio,multimodal.vision,reasoning.control,"
                        "streaming.content,streaming.reasoning,streaming.tool_arguments,"
                        "structured_output,tools.calling,tools.streaming");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_chat_and_completion),
        cmocka_unit_test(test_tools),
        cmocka_unit_test(test_tool_history),
        cmocka_unit_test(test_think),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_modalities),
        cmocka_unit_test(test_embeddings_and_endpoints),
        cmocka_unit_test(test_everything_at_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
