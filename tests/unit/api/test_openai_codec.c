/* The OpenAI client codec. Decoding: every field lands in its canonical slot, "not sent" stays
 * distinct from false/off, tool-call arguments keep their exact JSON text, data URIs are split,
 * unknown keys become extras in order with their exact JSON, and every refusal carries the right
 * status, code and param path. Encoding: a full event sequence gives exactly the SSE text
 * openai-node's stream helper accepts, the same events aggregated give exactly the matching
 * non-streamed body, errors mid-stream end with an error event and [DONE], include_usage adds
 * "usage":null and the usage chunk, embeddings come as floats or little-endian float32 base64. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "api/openai_codec.h"

/* ---- helpers ---- */

struct dec_fixture {
    struct qr_arena arena;
    struct qr_request req;
    struct qr_api_error err;
};

static enum qr_err decode_lim(struct dec_fixture *f, enum qr_op op, const char *body,
                              const struct qr_decode_limits *lim)
{
    qr_arena_init(&f->arena, 1 << 20);
    memset(&f->err, 0, sizeof(f->err));
    return qr_openai_decode(op, qr_slice_str(body), lim, &f->arena, &f->req, &f->err);
}

static enum qr_err decode(struct dec_fixture *f, enum qr_op op, const char *body)
{
    return decode_lim(f, op, body, NULL);
}

static void assert_slice(struct qr_slice s, const char *want)
{
    assert_non_null(s.ptr);
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len);
    assert_int_equal(s.ptr[s.len], '\0');
}

static void assert_extra(const struct qr_extra *x, const char *key, const char *json)
{
    assert_slice(x->key, key);
    assert_slice(x->json, json);
}

/* ---- decoding ---- */

static const char chat_full[] =
    "{\"model\":\"m1\",\"messages\":["
    "{\"role\":\"developer\",\"content\":\"dev\"},"
    "{\"role\":\"system\",\"content\":\"sys\",\"name\":\"s1\"},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"look\"},"
    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0=\","
    "\"detail\":\"high\"}},"
    "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x.test/a.jpg\"}},"
    "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"}}]},"
    "{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"thought\",\"tool_calls\":["
    "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\","
    "\"arguments\":\"{\\\"a\\\": 1.50, \\\"b\\\":[true]}\"}},"
    "{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"noargs\","
    "\"arguments\":\"\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"42\"},"
    "{\"role\":\"assistant\",\"content\":\"ok\",\"reasoning\":\"r2\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\",\"description\":\"d\","
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\","
    "\"minimum\":1.50}}},\"strict\":true}}],"
    "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get\"}},"
    "\"parallel_tool_calls\":false,"
    "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"out\","
    "\"schema\":{\"type\":\"object\"},\"strict\":true}},"
    "\"reasoning_effort\":\"high\",\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,"
    "\"seed\":-7,\"presence_penalty\":0.1,\"frequency_penalty\":-0.2,\"repetition_penalty\":1.1,"
    "\"stop\":[\"a\",\"b\"],\"max_tokens\":10,\"max_completion_tokens\":20,\"n\":1,"
    "\"stream\":false,\"stream_options\":{\"include_usage\":true},\"logprobs\":true,"
    "\"top_logprobs\":3,\"user\":\"u1\",\"metadata\":{\"k\":\"v\"},\"store\":false,"
    "\"chat_template_kwargs\":{\"enable_thinking\":false,\"x\":1.0e2}}";

static void check_messages(const struct qr_request *r)
{
    assert_int_equal(r->n_messages, 6);
    const struct qr_message *m = r->messages;
    assert_int_equal(m[0].role, QR_ROLE_DEVELOPER);
    assert_int_equal(m[0].n_parts, 1);
    assert_slice(m[0].parts[0].text, "dev");
    assert_int_equal(m[1].role, QR_ROLE_SYSTEM);
    assert_slice(m[1].name, "s1");

    assert_int_equal(m[2].role, QR_ROLE_USER);
    assert_int_equal(m[2].n_parts, 4);
    assert_int_equal(m[2].parts[0].kind, QR_PART_TEXT);
    assert_slice(m[2].parts[0].text, "look");
    assert_int_equal(m[2].parts[1].kind, QR_PART_IMAGE);
    assert_false(m[2].parts[1].is_url);
    assert_slice(m[2].parts[1].mime, "image/png");
    assert_slice(m[2].parts[1].data, "iVBORw0=");
    assert_slice(m[2].parts[1].detail, "high");
    assert_true(m[2].parts[2].is_url);
    assert_slice(m[2].parts[2].data, "https://x.test/a.jpg");
    assert_int_equal(m[2].parts[2].detail.len, 0);
    assert_int_equal(m[2].parts[3].kind, QR_PART_AUDIO);
    assert_slice(m[2].parts[3].data, "UklGRg==");
    assert_slice(m[2].parts[3].mime, "audio/wav");

    assert_int_equal(m[3].role, QR_ROLE_ASSISTANT);
    assert_true(m[3].content_null);
    assert_int_equal(m[3].n_parts, 0);
    assert_slice(m[3].reasoning, "thought");
    assert_int_equal(m[3].n_tool_calls, 2);
    assert_slice(m[3].tool_calls[0].id, "call_1");
    assert_slice(m[3].tool_calls[0].name, "get");
    assert_slice(m[3].tool_calls[0].arguments, "{\"a\": 1.50, \"b\":[true]}"); /* verbatim */
    assert_slice(m[3].tool_calls[1].arguments, "{}");

    assert_int_equal(m[4].role, QR_ROLE_TOOL);
    assert_slice(m[4].tool_call_id, "call_1");
    assert_slice(m[4].parts[0].text, "42");
    assert_false(m[5].content_null);
    assert_slice(m[5].reasoning, "r2");
}

static void test_decode_chat_full(void **state)
{
    struct dec_fixture f;
    assert_int_equal(decode(&f, QR_OP_CHAT, chat_full), QR_OK);
    const struct qr_request *r = &f.req;
    assert_int_equal(r->protocol, QR_PROTO_OPENAI);
    assert_int_equal(r->op, QR_OP_CHAT);
    assert_slice(r->model, "m1");
    check_messages(r);

    assert_int_equal(r->n_tools, 1);
    assert_slice(r->tools[0].name, "get");
    assert_slice(r->tools[0].description, "d");
    assert_slice(r->tools[0].parameters,
                 "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"number\","
                 "\"minimum\":1.50}}}");
    assert_true(r->tools[0].strict);
    assert_int_equal(r->tool_choice.kind, QR_TOOL_CHOICE_FUNCTION);
    assert_slice(r->tool_choice.name, "get");
    assert_int_equal(r->parallel_tool_calls, QR_FALSE);
    assert_int_equal(r->format.kind, QR_FORMAT_SCHEMA);
    assert_slice(r->format.schema, "{\"type\":\"object\"}");
    assert_slice(r->format.name, "out");
    assert_true(r->format.strict);
    assert_int_equal(r->think.kind, QR_THINK_LEVEL);
    assert_slice(r->think.level, "high");

    const struct qr_sampling *s = &r->sampling;
    assert_true(s->temperature.set && s->temperature.v == 0.5);
    assert_true(s->top_p.set && s->top_p.v == 0.9);
    assert_true(s->top_k.set && s->top_k.v == 40);
    assert_true(s->min_p.set && s->min_p.v == 0.05);
    assert_true(s->seed.set && s->seed.v == -7);
    assert_true(s->presence_penalty.set && s->presence_penalty.v == 0.1);
    assert_true(s->frequency_penalty.set && s->frequency_penalty.v == -0.2);
    assert_true(s->repeat_penalty.set && s->repeat_penalty.v == 1.1);
    assert_false(s->typical_p.set);
    assert_int_equal(r->n_stop, 2);
    assert_slice(r->stop[1], "b");
    assert_true(r->max_tokens.set);
    assert_int_equal(r->max_tokens.v, 20); /* max_completion_tokens wins */
    assert_true(r->n_choices.set);
    assert_true(r->stream_set);
    assert_false(r->stream);
    assert_false(r->include_usage); /* stream_options without stream */
    assert_int_equal(r->logprobs, QR_TRUE);
    assert_int_equal(r->top_logprobs.v, 3);

    assert_int_equal(r->n_extras, 4);
    assert_extra(&r->extras[0], "user", "\"u1\"");
    assert_extra(&r->extras[1], "metadata", "{\"k\":\"v\"}");
    assert_extra(&r->extras[2], "store", "false");
    assert_extra(&r->extras[3], "chat_template_kwargs", "{\"enable_thinking\":false,\"x\":1.0e2}");
    qr_arena_cleanup(&f.arena);
}

static void test_decode_chat_not_sent(void **state)
{
    struct dec_fixture f;
    assert_int_equal(
        decode(&f, QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\"}]}"),
        QR_OK);
    const struct qr_request *r = &f.req;
    assert_false(r->stream_set);
    assert_false(r->stream);
    assert_int_equal(r->think.kind, QR_THINK_UNSET);
    assert_int_equal(r->tool_choice.kind, QR_TOOL_CHOICE_UNSET);
    assert_int_equal(r->parallel_tool_calls, QR_UNSET);
    assert_int_equal(r->logprobs, QR_UNSET);
    assert_int_equal(r->format.kind, QR_FORMAT_NONE);
    assert_false(r->max_tokens.set);
    assert_false(r->sampling.temperature.set);
    assert_false(r->sampling.seed.set);
    assert_false(r->n_choices.set);
    assert_int_equal(r->n_extras, 0);
    assert_int_equal(r->n_stop, 0);
    assert_int_equal(r->messages[0].n_parts, 1); /* "" is one empty text part */
    assert_slice(r->messages[0].parts[0].text, "");
    qr_arena_cleanup(&f.arena);

    /* null means not sent, also for stream and reasoning_effort */
    assert_int_equal(decode(&f, QR_OP_CHAT,
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                            "\"stream\":null,\"reasoning_effort\":null,\"stop\":null,"
                            "\"temperature\":null,\"tools\":null,\"seed\":null}"),
                     QR_OK);
    assert_false(f.req.stream_set);
    assert_int_equal(f.req.think.kind, QR_THINK_UNSET);
    assert_false(f.req.sampling.temperature.set);
    assert_int_equal(f.req.n_extras, 0);
    qr_arena_cleanup(&f.arena);
}

static void test_decode_chat_variants(void **state)
{
    struct dec_fixture f;
    assert_int_equal(decode(&f, QR_OP_CHAT,
                            "{\"stream\":true,\"stream_options\":{\"include_usage\":true},"
                            "\"reasoning_effort\":\"none\",\"stop\":\"END\",\"max_tokens\":7,"
                            "\"model\":\"m\",\"tool_choice\":\"required\","
                            "\"response_format\":{\"type\":\"json_object\"},"
                            "\"messages\":[{\"role\":\"user\",\"content\":[]}],\"seed\":12.0}"),
                     QR_OK);
    assert_true(f.req.stream && f.req.stream_set && f.req.include_usage);
    assert_int_equal(f.req.think.kind, QR_THINK_OFF);
    assert_int_equal(f.req.n_stop, 1);
    assert_slice(f.req.stop[0], "END");
    assert_int_equal(f.req.max_tokens.v, 7);
    assert_int_equal(f.req.tool_choice.kind, QR_TOOL_CHOICE_REQUIRED);
    assert_int_equal(f.req.format.kind, QR_FORMAT_JSON);
    assert_int_equal(f.req.messages[0].n_parts, 0);
    assert_int_equal(f.req.sampling.seed.v, 12);
    qr_arena_cleanup(&f.arena);

    assert_int_equal(
        decode(&f, QR_OP_CHAT,
               "{\"model\":\"m\",\"reasoning_effort\":\"minimal\",\"messages\":["
               "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"function\":"
               "{\"name\":\"f\",\"arguments\":\"[1, 2]\"}}]},"
               "{\"role\":\"user\",\"content\":\"go\"}],\"stream\":false,"
               "\"stream_options\":{\"include_usage\":true},\"tool_choice\":\"none\"}"),
        QR_OK);
    assert_int_equal(f.req.think.kind, QR_THINK_LEVEL);
    assert_slice(f.req.think.level, "minimal");
    assert_true(f.req.messages[0].content_null); /* absent content on assistant */
    assert_slice(f.req.messages[0].tool_calls[0].arguments, "[1, 2]");
    assert_int_equal(f.req.tool_choice.kind, QR_TOOL_CHOICE_NONE);
    assert_true(f.req.stream_set);
    assert_false(f.req.include_usage);
    qr_arena_cleanup(&f.arena);
}

static void test_decode_completion(void **state)
{
    struct dec_fixture f;
    assert_int_equal(decode(&f, QR_OP_COMPLETION,
                            "{\"model\":\"m\",\"prompt\":\"Once\",\"suffix\":\"end\",\"echo\":true,"
                            "\"logprobs\":2,\"max_tokens\":5,\"temperature\":0,\"stop\":[\"\\n\"],"
                            "\"best_of\":1,\"stream\":true,\"n\":1}"),
                     QR_OK);
    const struct qr_request *r = &f.req;
    assert_int_equal(r->op, QR_OP_COMPLETION);
    assert_slice(r->prompt, "Once");
    assert_slice(r->suffix, "end");
    assert_true(r->echo);
    assert_int_equal(r->logprobs, QR_TRUE);
    assert_int_equal(r->top_logprobs.v, 2);
    assert_int_equal(r->max_tokens.v, 5);
    assert_true(r->sampling.temperature.set);
    assert_slice(r->stop[0], "\n");
    assert_true(r->stream);
    assert_int_equal(r->n_extras, 1);
    assert_extra(&r->extras[0], "best_of", "1");
    qr_arena_cleanup(&f.arena);

    assert_int_equal(decode(&f, QR_OP_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"only\"]}"),
                     QR_OK);
    assert_slice(f.req.prompt, "only");
    assert_false(f.req.max_tokens.set);
    assert_int_equal(f.req.logprobs, QR_UNSET);
    qr_arena_cleanup(&f.arena);
}

static void test_decode_embed(void **state)
{
    struct dec_fixture f;
    assert_int_equal(decode(&f, QR_OP_EMBED, "{\"model\":\"e\",\"input\":\"hello\"}"), QR_OK);
    assert_int_equal(f.req.n_inputs, 1);
    assert_false(f.req.input_is_list);
    assert_slice(f.req.inputs[0], "hello");
    assert_int_equal(f.req.encoding, QR_EMBED_FLOAT);
    assert_false(f.req.dimensions.set);
    qr_arena_cleanup(&f.arena);

    assert_int_equal(
        decode(&f, QR_OP_EMBED,
               "{\"model\":\"e\",\"input\":[\"a\",\"b\"],\"encoding_format\":\"base64\","
               "\"dimensions\":256,\"user\":\"u\"}"),
        QR_OK);
    assert_int_equal(f.req.n_inputs, 2);
    assert_true(f.req.input_is_list);
    assert_slice(f.req.inputs[1], "b");
    assert_int_equal(f.req.encoding, QR_EMBED_BASE64);
    assert_int_equal(f.req.dimensions.v, 256);
    assert_int_equal(f.req.n_extras, 1);
    assert_extra(&f.req.extras[0], "user", "\"u\"");
    qr_arena_cleanup(&f.arena);

    assert_int_equal(decode(&f, QR_OP_EMBED, "{\"model\":\"e\",\"input\":[1, 2,3]}"), QR_OK);
    assert_slice(f.req.input_tokens, "[1,2,3]");
    assert_false(f.req.input_is_list);
    assert_int_equal(f.req.n_inputs, 0);
    qr_arena_cleanup(&f.arena);

    assert_int_equal(decode(&f, QR_OP_EMBED, "{\"model\":\"e\",\"input\":[[1],[2,3]]}"), QR_OK);
    assert_slice(f.req.input_tokens, "[[1],[2,3]]");
    assert_true(f.req.input_is_list);
    qr_arena_cleanup(&f.arena);
}

struct err_case {
    enum qr_op op;
    const char *body;
    int status;
    const char *code;
    const char *param;
};

#define MSG_U    "{\"role\":\"user\",\"content\":\"x\"}"
#define CHAT_PRE "{\"model\":\"m\",\"messages\":[" MSG_U "]"

static const struct err_case err_cases[] = {
    {QR_OP_CHAT, "", 400, "invalid_json", ""},
    {QR_OP_CHAT, "{\"model\":", 400, "invalid_json", ""},
    {QR_OP_CHAT, "{\"a\":1} x", 400, "invalid_json", ""},
    {QR_OP_CHAT, "[1]", 400, "invalid_request", ""},
    {QR_OP_CHAT, "{\"messages\":[" MSG_U "]}", 400, "invalid_request", "model"},
    {QR_OP_CHAT, "{\"model\":5,\"messages\":[" MSG_U "]}", 400, "invalid_request", "model"},
    {QR_OP_CHAT, "{\"model\":null,\"messages\":[" MSG_U "]}", 400, "invalid_request", "model"},
    {QR_OP_CHAT, "{\"model\":\"m\"}", 400, "invalid_request", "messages"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[]}", 400, "invalid_request", "messages"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":\"hi\"}", 400, "invalid_request", "messages"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[" MSG_U "," MSG_U "," MSG_U "," MSG_U "]}", 400,
     "invalid_request", "messages"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[5]}", 400, "invalid_request", "messages[0]"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}", 400, "invalid_request",
     "messages[0].role"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400,
     "invalid_request", "messages[0].role"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}", 400,
     "invalid_request", "messages[0].role"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", 400, "invalid_request",
     "messages[0].content"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[" MSG_U "," MSG_U ",{\"role\":\"user\",\"content\":7}]}", 400,
     "invalid_request", "messages[2].content"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":"
     "\"a\"},"
     "{\"type\":\"file\",\"file\":{}}]}]}",
     400, "invalid_request", "messages[0].content[1].type"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}"
     "]}]}",
     400, "invalid_request", "messages[0].content[0].text"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
     "\"image_url\":{\"url\":\"ftp://x/y.png\"}}]}]}",
     400, "invalid_request", "messages[0].content[0].image_url.url"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
     "\"image_url\":{\"url\":\"data:image/png,abc\"}}]}]}",
     400, "invalid_request", "messages[0].content[0].image_url.url"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[" MSG_U
     ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
     "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\"}}]}]}",
     400, "invalid_request", "messages[1].tool_calls[0].function.arguments"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[" MSG_U
     ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
     "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}]}",
     400, "invalid_request", "messages[1].tool_calls[0].function.arguments"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}",
     400, "invalid_request", "messages[0].tool_calls"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"42\"}]}", 400,
     "invalid_request", "messages[0].tool_call_id"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"function_call\":{\"name\":\"f\"}}]}",
     400, "invalid_request", "messages[0].function_call"},
    {QR_OP_CHAT, CHAT_PRE ",\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}]}", 422,
     "capability_unsupported", "tools[0].type"},
    {QR_OP_CHAT, CHAT_PRE ",\"tools\":[{\"type\":\"function\",\"function\":{}}]}", 400,
     "invalid_request", "tools[0].function.name"},
    {QR_OP_CHAT,
     CHAT_PRE
     ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":[]}}]}",
     400, "invalid_request", "tools[0].function.parameters"},
    {QR_OP_CHAT,
     CHAT_PRE
     ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a\"}},{\"type\":\"function\","
     "\"function\":{\"name\":\"b\"}},{\"type\":\"function\",\"function\":{\"name\":\"c\"}}]}",
     400, "invalid_request", "tools"},
    {QR_OP_CHAT, CHAT_PRE ",\"tool_choice\":{\"type\":\"allowed_tools\",\"allowed_tools\":{}}}",
     422, "capability_unsupported", "tool_choice.type"},
    {QR_OP_CHAT, CHAT_PRE ",\"tool_choice\":\"any\"}", 400, "invalid_request", "tool_choice"},
    {QR_OP_CHAT,
     CHAT_PRE ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":\"x\"}}}",
     400, "invalid_request", "response_format.json_schema.schema"},
    {QR_OP_CHAT, CHAT_PRE ",\"response_format\":{\"type\":\"grammar\"}}", 422,
     "capability_unsupported", "response_format.type"},
    {QR_OP_CHAT, CHAT_PRE ",\"reasoning_effort\":\"ultra\"}", 400, "invalid_request",
     "reasoning_effort"},
    {QR_OP_CHAT, CHAT_PRE ",\"temperature\":\"hot\"}", 400, "invalid_request", "temperature"},
    {QR_OP_CHAT, CHAT_PRE ",\"seed\":1.5}", 400, "invalid_request", "seed"},
    {QR_OP_CHAT, CHAT_PRE ",\"seed\":99999999999999999999}", 400, "invalid_request", "seed"},
    {QR_OP_CHAT, CHAT_PRE ",\"stream\":\"yes\"}", 400, "invalid_request", "stream"},
    {QR_OP_CHAT, CHAT_PRE ",\"stream_options\":{\"include_usage\":1}}", 400, "invalid_request",
     "stream_options.include_usage"},
    {QR_OP_CHAT, CHAT_PRE ",\"stop\":[\"a\",\"b\",\"c\"]}", 400, "invalid_request", "stop"},
    {QR_OP_CHAT, CHAT_PRE ",\"stop\":[\"a\",3]}", 400, "invalid_request", "stop[1]"},
    {QR_OP_CHAT, CHAT_PRE ",\"n\":2}", 422, "capability_unsupported", "n"},
    {QR_OP_CHAT, CHAT_PRE ",\"max_tokens\":-1}", 400, "invalid_request", "max_tokens"},
    {QR_OP_CHAT, CHAT_PRE ",\"max_completion_tokens\":true}", 400, "invalid_request",
     "max_completion_tokens"},
    {QR_OP_CHAT, CHAT_PRE ",\"logprobs\":1}", 400, "invalid_request", "logprobs"},
    {QR_OP_COMPLETION, "{\"model\":\"m\"}", 400, "invalid_request", "prompt"},
    {QR_OP_COMPLETION, "{\"model\":\"m\",\"prompt\":[1,2]}", 422, "capability_unsupported",
     "prompt"},
    {QR_OP_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", 422, "capability_unsupported",
     "prompt"},
    {QR_OP_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"logprobs\":true}", 400,
     "invalid_request", "logprobs"},
    {QR_OP_COMPLETION, "{\"model\":\"m\",\"prompt\":\"a\",\"n\":3}", 422, "capability_unsupported",
     "n"},
    {QR_OP_EMBED, "{\"model\":\"m\"}", 400, "invalid_request", "input"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":[]}", 400, "invalid_request", "input"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":[\"a\",1]}", 400, "invalid_request", "input[1]"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":[1,-2]}", 400, "invalid_request", "input"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":[[1],2]}", 400, "invalid_request", "input[1]"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":[\"a\",\"b\",\"c\"]}", 400, "invalid_request",
     "input"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":\"a\",\"encoding_format\":\"int8\"}", 400,
     "invalid_request", "encoding_format"},
    {QR_OP_EMBED, "{\"model\":\"m\",\"input\":\"a\",\"dimensions\":0}", 400, "invalid_request",
     "dimensions"},
    /* issue 10: references that point nowhere, duplicate keys, NUL characters */
    {QR_OP_CHAT,
     CHAT_PRE ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\"}}],"
              "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"nope\"}}}",
     400, "invalid_request", "tool_choice.function.name"},
    {QR_OP_CHAT,
     CHAT_PRE ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"get\"}}}", 400,
     "invalid_request", "tool_choice.function.name"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[" MSG_U
     ",{\"role\":\"tool\",\"tool_call_id\":\"call_9\",\"content\":\"x\"}]}",
     400, "invalid_request", "messages[1].tool_call_id"},
    {QR_OP_CHAT,
     "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":"
     "\"x\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
     "\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"{}\"}}]}]}",
     400, "invalid_request", "messages[0].tool_call_id"},
    {QR_OP_CHAT, "{\"model\":\"m\",\"model\":\"n\",\"messages\":[" MSG_U "]}", 400,
     "invalid_request", ""},
    {QR_OP_CHAT, "{\"model\":\"m\\u0000n\",\"messages\":[" MSG_U "]}", 400, "invalid_request", ""},
};

static void test_decode_errors(void **state)
{
    struct qr_decode_limits lim = {
        .max_messages = 3, .max_tools = 2, .max_stop = 2, .max_inputs = 2};
    for (size_t i = 0; i < QR_ARRAY_LEN(err_cases); i++) {
        const struct err_case *c = &err_cases[i];
        struct dec_fixture f;
        enum qr_err rc = decode_lim(&f, c->op, c->body, &lim);
        if (rc == QR_OK || f.err.status != c->status || strcmp(f.err.code, c->code) != 0 ||
            strcmp(f.err.param, c->param) != 0)
            fail_msg("case %zu (%s): rc %d status %d code '%s' param '%s' message '%s'", i, c->body,
                     rc, f.err.status, f.err.code, f.err.param, f.err.message);
        assert_true(f.err.message[0] != '\0');
        assert_int_equal(f.req.protocol, QR_PROTO_OPENAI);
        qr_arena_cleanup(&f.arena);
    }
}

static void test_decode_error_messages(void **state)
{
    struct dec_fixture f;
    assert_int_equal(decode(&f, QR_OP_CHAT, "{\"model\": tru}"), QR_ERR_PARSE);
    assert_non_null(strstr(f.err.message, "at byte 10"));
    qr_arena_cleanup(&f.arena);
    assert_int_equal(decode(&f, QR_OP_CHAT,
                            "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                            "\"content\":[{\"type\":\"text\",\"text\":1}]}]}"),
                     QR_ERR_INVALID);
    assert_string_equal(f.err.message, "'messages[0].content[0].text' must be a string");
    qr_arena_cleanup(&f.arena);

    /* the arena cap is the request's memory cap: 413, nothing leaks */
    qr_arena_init(&f.arena, 64);
    assert_int_equal(
        qr_openai_decode(QR_OP_CHAT, qr_slice_str(chat_full), NULL, &f.arena, &f.req, &f.err),
        QR_ERR_TOO_LARGE);
    assert_int_equal(f.err.status, 413);
    assert_string_equal(f.err.code, "request_too_large");
    qr_arena_cleanup(&f.arena);
}

/* ---- encoding ---- */

static const struct qr_enc_env env = {.now_ns = 1700000000000000000LL, .resp_id = "chatcmpl-test"};

static struct qr_event ev_of(enum qr_event_type type)
{
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.usage = (struct qr_usage){-1, -1, -1, -1, -1, -1, -1, -1};
    ev.slot_id = -1;
    return ev;
}

static struct qr_event ev_text(enum qr_event_type type, const char *text)
{
    struct qr_event ev = ev_of(type);
    ev.text = qr_slice_str(text);
    return ev;
}

static struct qr_event ev_tool(enum qr_event_type type, uint32_t index, const char *id,
                               const char *name, const char *args)
{
    struct qr_event ev = ev_of(type);
    ev.index = index;
    ev.id = qr_slice_str(id);
    ev.name = qr_slice_str(name);
    ev.text = qr_slice_str(args);
    return ev;
}

static struct qr_event ev_done(enum qr_finish finish)
{
    struct qr_event ev = ev_of(QR_EV_DONE);
    ev.finish = finish;
    return ev;
}

/* The full sequence: reasoning, content with multi-byte text, two interleaved parallel calls. */
static size_t full_events(struct qr_event *evs)
{
    size_t n = 0;
    evs[n] = ev_of(QR_EV_START);
    evs[n++].model = QR_SLICE_LIT("upstream-name");
    evs[n++] = ev_text(QR_EV_REASONING, "Let me think");
    evs[n++] = ev_text(QR_EV_CONTENT, "Gr\xc3\xbc\xc3\x9f"
                                      "e \xc3\x9f \xf0\x9f\x98\x80");
    evs[n++] = ev_tool(QR_EV_TOOL_BEGIN, 0, "call_a", "get_weather", "");
    evs[n++] = ev_tool(QR_EV_TOOL_ARGS, 0, "", "", "{\"city\":");
    evs[n++] = ev_tool(QR_EV_TOOL_BEGIN, 1, "call_b", "get_time", "");
    evs[n++] = ev_tool(QR_EV_TOOL_ARGS, 1, "", "", "{\"tz\":\"UTC\"}");
    evs[n++] = ev_tool(QR_EV_TOOL_ARGS, 0, "", "", "\"K\xc3\xb6ln\"}");
    evs[n++] = ev_tool(QR_EV_TOOL_END, 0, "", "", "");
    evs[n++] = ev_tool(QR_EV_TOOL_END, 1, "", "", "");
    evs[n] = ev_of(QR_EV_USAGE);
    evs[n].usage.prompt_tokens = 12;
    evs[n].usage.completion_tokens = 34;
    evs[n++].usage.cached_tokens = 5;
    evs[n++] = ev_done(QR_FINISH_TOOL_CALLS);
    return n;
}

static struct qr_request chat_req(bool include_usage)
{
    struct qr_request r;
    memset(&r, 0, sizeof(r));
    r.protocol = QR_PROTO_OPENAI;
    r.op = QR_OP_CHAT;
    r.model = QR_SLICE_LIT("m1");
    r.stream = true;
    r.stream_set = true;
    r.include_usage = include_usage;
    return r;
}

static void stream_all(struct qr_openai_enc *e, const struct qr_event *evs, size_t n,
                       struct qr_buf *out)
{
    for (size_t i = 0; i < n; i++)
        assert_int_equal(qr_openai_enc_event(e, &evs[i], out), QR_OK);
}

#define HEAD                                                                                       \
    "data: {\"id\":\"chatcmpl-test\",\"object\":\"chat.completion.chunk\",\"created\":1700000000," \
    "\"model\":\"m1\",\"choices\":["
#define D(delta)                                                                                   \
    HEAD "{\"index\":0,\"delta\":{" delta "},\"logprobs\":null,\"finish_reason\":null}]"
#define DF(reason)                                                                                 \
    HEAD "{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":\"" reason "\"}]"
#define END   "}\n\n"
#define END_U ",\"usage\":null}\n\n"

static const char full_stream_usage[] = D("\"role\":\"assistant\",\"content\":\"\"") END_U D(
    "\"reasoning_content\":\"Let me think\"") END_U D("\"content\":\"Gr\xc3\xbc\xc3\x9f"
                                                      "e \xc3\x9f \xf0\x9f\x98\x80\"")
    END_U D("\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":"
            "{\"name\":\"get_weather\",\"arguments\":\"\"}}]")
        END_U D("\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]")
            END_U D(
                "\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":"
                "{\"name\":\"get_time\",\"arguments\":\"\"}}]")
                END_U D("\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"tz\\\":"
                        "\\\"UTC\\\"}\"}}]") END_U D("\"tool_calls\":[{\"index\":0,\"function\":{"
                                                     "\"arguments\":\"\\\"K\xc3\xb6ln\\\"}\"}}]")
                    END_U DF("tool_calls") END_U HEAD
    "],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46,"
    "\"prompt_tokens_details\":{\"cached_tokens\":5}}}\n\n"
    "data: [DONE]\n\n";

static const char full_stream_plain[] = D("\"role\":\"assistant\",\"content\":\"\"") END D(
    "\"reasoning_content\":\"Let me think\"") END D("\"content\":\"Gr\xc3\xbc\xc3\x9f"
                                                    "e \xc3\x9f \xf0\x9f\x98\x80\"")
    END D("\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":"
          "{\"name\":\"get_weather\",\"arguments\":\"\"}}]")
        END D("\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]")
            END D(
                "\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":"
                "{\"name\":\"get_time\",\"arguments\":\"\"}}]")
                END D("\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\"{\\\"tz\\\":"
                      "\\\"UTC\\\"}\"}}]") END D("\"tool_calls\":[{\"index\":0,\"function\":{"
                                                 "\"arguments\":\"\\\"K\xc3\xb6ln\\\"}\"}}]")
                    END DF("tool_calls") END "data: [DONE]\n\n";

static const char full_answer[] =
    "{\"id\":\"chatcmpl-test\",\"object\":\"chat.completion\",\"created\":1700000000,"
    "\"model\":\"m1\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
    "\"content\":\"Gr\xc3\xbc\xc3\x9f"
    "e \xc3\x9f \xf0\x9f\x98\x80\","
    "\"reasoning_content\":\"Let me think\",\"tool_calls\":["
    "{\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
    "\"arguments\":\"{\\\"city\\\":\\\"K\xc3\xb6ln\\\"}\"}},"
    "{\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"get_time\","
    "\"arguments\":\"{\\\"tz\\\":\\\"UTC\\\"}\"}}]},"
    "\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],"
    "\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":34,\"total_tokens\":46,"
    "\"prompt_tokens_details\":{\"cached_tokens\":5}}}\n";

static void test_encode_stream_full(void **state)
{
    struct qr_event evs[16];
    size_t n = full_events(evs);
    for (int usage = 0; usage < 2; usage++) {
        struct qr_request req = chat_req(usage);
        struct qr_openai_enc e;
        qr_openai_enc_init(&e, &req, &env);
        struct qr_buf out;
        qr_buf_init(&out, 0);
        stream_all(&e, evs, n, &out);
        assert_string_equal(out.ptr, usage ? full_stream_usage : full_stream_plain);
        /* nothing after the end */
        struct qr_event more = ev_text(QR_EV_CONTENT, "late");
        size_t len = out.len;
        assert_int_equal(qr_openai_enc_event(&e, &more, &out), QR_OK);
        assert_int_equal(out.len, len);
        qr_buf_cleanup(&out);
    }
}

static void test_encode_answer_full(void **state)
{
    struct qr_event evs[16];
    size_t n = full_events(evs);
    struct qr_answer a;
    qr_answer_init(&a, 0);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(qr_answer_add(&a, &evs[i]), QR_OK);
    struct qr_request req = chat_req(false);
    req.stream = false;
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    assert_string_equal(out.ptr, full_answer);
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);
}

/* Plain text, no tools: content is a string, reasoning omitted, stop; a call without argument
 * bytes gets "{}" in both forms; usage unknown is zeros. */
static void test_encode_small_answers(void **state)
{
    struct qr_request req = chat_req(false);
    struct qr_openai_enc e;
    struct qr_buf out;
    struct qr_answer a;

    struct qr_event evs[] = {ev_of(QR_EV_START), ev_text(QR_EV_CONTENT, "hi \"you\"\n"),
                             ev_done(QR_FINISH_LENGTH)};
    qr_answer_init(&a, 0);
    for (size_t i = 0; i < QR_ARRAY_LEN(evs); i++)
        assert_int_equal(qr_answer_add(&a, &evs[i]), QR_OK);
    qr_openai_enc_init(&e, &req, &env);
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    assert_string_equal(out.ptr,
                        "{\"id\":\"chatcmpl-test\",\"object\":\"chat.completion\",\"created\":"
                        "1700000000,\"model\":\"m1\",\"choices\":[{\"index\":0,\"message\":"
                        "{\"role\":\"assistant\",\"content\":\"hi \\\"you\\\"\\n\"},"
                        "\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":"
                        "{\"prompt_tokens\":0,\"completion_tokens\":0,\"total_tokens\":0}}\n");
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);

    /* a call without argument bytes, upstream said "stop": */
    struct qr_event evs2[] = {ev_of(QR_EV_START), ev_tool(QR_EV_TOOL_BEGIN, 0, "call_x", "now", ""),
                              ev_tool(QR_EV_TOOL_END, 0, "", "", ""), ev_done(QR_FINISH_STOP)};
    qr_answer_init(&a, 0);
    for (size_t i = 0; i < QR_ARRAY_LEN(evs2); i++)
        assert_int_equal(qr_answer_add(&a, &evs2[i]), QR_OK);
    qr_openai_enc_init(&e, &req, &env);
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    assert_string_equal(out.ptr,
                        "{\"id\":\"chatcmpl-test\",\"object\":\"chat.completion\",\"created\":"
                        "1700000000,\"model\":\"m1\",\"choices\":[{\"index\":0,\"message\":"
                        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":"
                        "\"call_x\",\"type\":\"function\",\"function\":{\"name\":\"now\","
                        "\"arguments\":\"{}\"}}]},\"logprobs\":null,\"finish_reason\":"
                        "\"tool_calls\"}],\"usage\":{\"prompt_tokens\":0,\"completion_tokens\":0,"
                        "\"total_tokens\":0}}\n");
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);

    qr_openai_enc_init(&e, &req, &env);
    qr_buf_init(&out, 0);
    stream_all(&e, evs2, QR_ARRAY_LEN(evs2), &out);
    assert_string_equal(out.ptr, D("\"role\":\"assistant\",\"content\":\"\"") END D(
                                     "\"tool_calls\":[{\"index\":0,\"id\":\"call_x\",\"type\":"
                                     "\"function\",\"function\":{\"name\":\"now\",\"arguments\":"
                                     "\"\"}}]") END D("\"tool_calls\":[{\"index\":0,\"function\":"
                                                      "{\"arguments\":\"{}\"}}]")
                                     END DF("tool_calls") END "data: [DONE]\n\n");
    qr_buf_cleanup(&out);
}

static void test_encode_error_mid_stream(void **state)
{
    struct qr_request req = chat_req(true);
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_event err = ev_of(QR_EV_ERROR);
    err.status = 502;
    err.code = QR_SLICE_LIT("upstream_error");
    err.message = QR_SLICE_LIT("backend 'x' closed the \"stream\"");
    struct qr_event evs[] = {ev_of(QR_EV_START), ev_text(QR_EV_CONTENT, "par"), err,
                             ev_done(QR_FINISH_STOP)};
    stream_all(&e, evs, QR_ARRAY_LEN(evs), &out);
    assert_string_equal(out.ptr,
                        D("\"role\":\"assistant\",\"content\":\"\"") END_U D("\"content\":\"par\"")
                            END_U "data: {\"error\":{\"message\":\"backend 'x' closed the "
                                  "\\\"stream\\\"\",\"type\":\"server_error\",\"code\":"
                                  "\"upstream_error\",\"param\":null}}\n\ndata: [DONE]\n\n");
    qr_buf_cleanup(&out);
}

static void test_encode_cancelled_and_meta(void **state)
{
    struct qr_request req = chat_req(false);
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_event evs[] = {ev_of(QR_EV_START), ev_of(QR_EV_META), ev_text(QR_EV_CONTENT, ""),
                             ev_done(QR_FINISH_CANCELLED)};
    stream_all(&e, evs, QR_ARRAY_LEN(evs), &out);
    assert_string_equal(out.ptr, D("\"role\":\"assistant\",\"content\":\"\"") END DF("cancelled")
                                     END "data: [DONE]\n\n");
    qr_buf_cleanup(&out);
}

static void test_encode_completion(void **state)
{
    struct qr_request req = chat_req(true);
    req.op = QR_OP_COMPLETION;
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_event usage = ev_of(QR_EV_USAGE);
    usage.usage.prompt_tokens = 3;
    usage.usage.completion_tokens = 4;
    usage.usage.reasoning_tokens = 2;
    struct qr_event evs[] = {ev_of(QR_EV_START), ev_text(QR_EV_REASONING, "hm"),
                             ev_text(QR_EV_CONTENT, "upon"), usage, ev_done(QR_FINISH_STOP)};
    stream_all(&e, evs, QR_ARRAY_LEN(evs), &out);
#define CH                                                                                         \
    "data: {\"id\":\"chatcmpl-test\",\"object\":\"text_completion\",\"created\":1700000000,"       \
    "\"model\":\"m1\",\"choices\":["
    assert_string_equal(
        out.ptr, CH
        "{\"text\":\"\",\"reasoning_content\":\"hm\",\"index\":0,\"logprobs\":null,"
        "\"finish_reason\":null}],\"usage\":null}\n\n" CH
        "{\"text\":\"upon\",\"index\":0,\"logprobs\":null,\"finish_reason\":null}],\"usage\":"
        "null}\n\n" CH "{\"text\":\"\",\"index\":0,\"logprobs\":null,\"finish_reason\":\"stop\"}],"
        "\"usage\":null}\n\n" CH "],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
        "\"total_tokens\":7,\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n\n"
        "data: [DONE]\n\n");
    qr_buf_cleanup(&out);

    struct qr_answer a;
    qr_answer_init(&a, 0);
    for (size_t i = 0; i < QR_ARRAY_LEN(evs); i++)
        assert_int_equal(qr_answer_add(&a, &evs[i]), QR_OK);
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    assert_string_equal(out.ptr, "{\"id\":\"chatcmpl-test\",\"object\":\"text_completion\","
                                 "\"created\":1700000000,\"model\":\"m1\",\"choices\":[{\"text\":"
                                 "\"upon\",\"reasoning_content\":\"hm\",\"index\":0,\"logprobs\":"
                                 "null,\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,"
                                 "\"completion_tokens\":4,\"total_tokens\":7,"
                                 "\"completion_tokens_details\":{\"reasoning_tokens\":2}}}\n");
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);
}

static void test_encode_ids(void **state)
{
    struct qr_request req = chat_req(false);
    struct qr_enc_env env2 = {.now_ns = 1700000000999999999LL, .resp_id = NULL};
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env2);
    assert_int_equal(strlen(e.id), strlen("chatcmpl-") + 24);
    assert_int_equal(strncmp(e.id, "chatcmpl-", 9), 0);
    assert_int_equal(strspn(e.id + 9, "0123456789abcdef"), 24);
    assert_int_equal(e.created, 1700000000);
    req.op = QR_OP_COMPLETION;
    qr_openai_enc_init(&e, &req, &env2);
    assert_int_equal(strncmp(e.id, "cmpl-", 5), 0);
    assert_int_equal(strlen(e.id), 5 + 24);
}

static void embed_answer(bool base64, const char *want)
{
    struct qr_request req;
    memset(&req, 0, sizeof(req));
    req.op = QR_OP_EMBED;
    req.model = QR_SLICE_LIT("e1");
    req.encoding = base64 ? QR_EMBED_BASE64 : QR_EMBED_FLOAT;
    struct qr_answer a;
    qr_answer_init(&a, 0);
    struct qr_event start = ev_of(QR_EV_START);
    assert_int_equal(qr_answer_add(&a, &start), QR_OK);
    static const float v0[] = {1.0f, -2.5f};
    static const float v1[] = {0.1f};
    struct qr_event em = ev_of(QR_EV_EMBEDDING);
    em.index = 1;
    em.vec = v1;
    em.dims = 1;
    assert_int_equal(qr_answer_add(&a, &em), QR_OK);
    em.index = 0;
    em.vec = v0;
    em.dims = 2;
    assert_int_equal(qr_answer_add(&a, &em), QR_OK);
    struct qr_event usage = ev_of(QR_EV_USAGE);
    usage.usage.prompt_tokens = 9;
    assert_int_equal(qr_answer_add(&a, &usage), QR_OK);
    struct qr_event done = ev_done(QR_FINISH_STOP);
    assert_int_equal(qr_answer_add(&a, &done), QR_OK);

    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    assert_string_equal(out.ptr, want);
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);
}

static void test_encode_embeddings(void **state)
{
    embed_answer(false, "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                        "\"embedding\":[1,-2.5]},{\"object\":\"embedding\",\"index\":1,"
                        "\"embedding\":[0.100000001]}],\"model\":\"e1\",\"usage\":"
                        "{\"prompt_tokens\":9,\"total_tokens\":9}}\n");
    /* [1.0, -2.5] as little-endian float32: 00 00 80 3f 00 00 20 c0 */
    embed_answer(true, "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":0,"
                       "\"embedding\":\"AACAPwAAIMA=\"},{\"object\":\"embedding\",\"index\":1,"
                       "\"embedding\":\"zczMPQ==\"}],\"model\":\"e1\",\"usage\":"
                       "{\"prompt_tokens\":9,\"total_tokens\":9}}\n");
}

static void error_body(int status, const char *code, const char *param, const char *msg,
                       const char *want)
{
    struct qr_api_error err;
    qr_api_error_set(&err, QR_ERR_INVALID, status, code, param, "%s", msg);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    qr_openai_error_body(&err, &out);
    assert_string_equal(out.ptr, want);
    qr_buf_cleanup(&out);
}

static void test_error_body(void **state)
{
    error_body(400, "invalid_request", "messages[2].content", "'x' must be \"y\"",
               "{\"error\":{\"message\":\"'x' must be \\\"y\\\"\",\"type\":"
               "\"invalid_request_error\",\"param\":\"messages[2].content\",\"code\":"
               "\"invalid_request\"}}\n");
    error_body(404, "model_not_found", "", "model 'm' not found",
               "{\"error\":{\"message\":\"model 'm' not found\",\"type\":\"invalid_request_error\","
               "\"param\":null,\"code\":\"model_not_found\"}}\n");
    error_body(401, "unauthorized", "", "no",
               "{\"error\":{\"message\":\"no\",\"type\":\"authentication_error\",\"param\":null,"
               "\"code\":\"unauthorized\"}}\n");
    error_body(503, "", "", "busy",
               "{\"error\":{\"message\":\"busy\",\"type\":\"server_error\",\"param\":null,"
               "\"code\":null}}\n");
    assert_string_equal(qr_openai_stream_content_type(), "text/event-stream");
    assert_string_equal(qr_openai_json_content_type(), "application/json");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_chat_full),
        cmocka_unit_test(test_decode_chat_not_sent),
        cmocka_unit_test(test_decode_chat_variants),
        cmocka_unit_test(test_decode_completion),
        cmocka_unit_test(test_decode_embed),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_decode_error_messages),
        cmocka_unit_test(test_encode_stream_full),
        cmocka_unit_test(test_encode_answer_full),
        cmocka_unit_test(test_encode_small_answers),
        cmocka_unit_test(test_encode_error_mid_stream),
        cmocka_unit_test(test_encode_cancelled_and_meta),
        cmocka_unit_test(test_encode_completion),
        cmocka_unit_test(test_encode_ids),
        cmocka_unit_test(test_encode_embeddings),
        cmocka_unit_test(test_error_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
