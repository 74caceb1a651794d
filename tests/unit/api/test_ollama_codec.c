/* Ollama codec: every request field decodes into its canonical slot (or into extras in order),
 * Ollama's forms of think / keep_alive / options are accepted or refused exactly, and the encoder
 * writes the exact NDJSON lines and whole bodies -- the whole body being the accumulation of the
 * streamed lines, checked both literally and by re-parsing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yyjson.h>

#include "api/ollama_codec.h"

#define NOW 1700000000123456789LL
#define TS  "2023-11-14T22:13:20.123456789Z"
#define H   "{\"model\":\"m1\",\"created_at\":\"" TS "\","

/* ---- decoder helpers ---- */

struct dcase {
    struct qr_arena arena;
    struct qr_request req;
    struct qr_api_error err;
};

static enum qr_err dec(struct dcase *c, enum qr_op op, bool legacy, const char *json)
{
    qr_arena_cleanup(&c->arena);
    qr_arena_init(&c->arena, 1 << 20);
    memset(&c->err, 0, sizeof(c->err));
    return qr_ollama_decode(op, legacy, qr_slice_str(json), NULL, &c->arena, &c->req, &c->err);
}

static void expect_400(enum qr_op op, const char *json, const char *msg_part)
{
    struct dcase c = {0};
    enum qr_err err = dec(&c, op, false, json);
    if (err != QR_ERR_INVALID || c.err.status != 400 || !strstr(c.err.message, msg_part)) {
        fprintf(stderr, "body %s: err %d status %d message '%s', want 400 with '%s'\n", json, err,
                c.err.status, c.err.message, msg_part);
        fail();
    }
    assert_string_equal(c.err.code, "invalid_request");
    qr_arena_cleanup(&c.arena);
}

static void assert_slice(struct qr_slice s, const char *want)
{
    if (!qr_slice_eq(s, want)) {
        fprintf(stderr, "got '%.*s', want '%s'\n", (int) s.len, s.ptr ? s.ptr : "", want);
        fail();
    }
}

/* ---- decoder ---- */

static const char chat_full[] =
    "{\"model\":\"llama3\",\"messages\":["
    "{\"role\":\"SYSTEM\",\"content\":\"be brief\"},"
    "{\"role\":\"user\",\"content\":\"hi\",\"images\":[\"aGVsbG8=\",\"aGk=\"]},"
    "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"hmm\",\"tool_calls\":["
    "{\"id\":\"call_1\",\"function\":{\"index\":0,\"name\":\"get_weather\","
    "\"arguments\":{\"city\":\"Paris\",\"n\":1.5,\"big\":123456789012345678901234567890}}},"
    "{\"function\":{\"name\":\"noop\",\"arguments\":{}}}]},"
    "{\"role\":\"tool\",\"content\":\"sunny\",\"tool_name\":\"get_weather\","
    "\"tool_call_id\":\"call_1\"}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
    "\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"city\"]}}}],"
    "\"format\":{\"type\":\"object\"},\"think\":\"high\",\"keep_alive\":\"5m\",\"stream\":false,"
    "\"options\":{\"temperature\":0.2,\"top_k\":40,\"top_p\":0.9,\"min_p\":0.05,\"typical_p\":1,"
    "\"repeat_penalty\":1.1,\"presence_penalty\":0.5,\"frequency_penalty\":0.25,\"seed\":-7,"
    "\"repeat_last_n\":64,\"num_keep\":4,\"num_predict\":128,\"num_ctx\":8192,"
    "\"stop\":[\"\\n\\n\",\"END\"],\"num_gpu\":99,\"mirostat\":0,\"custom\":{\"x\":[1,\"y\"]},"
    "\"temperature_unused\":null},"
    "\"truncate\":false,\"shift\":true,\"logprobs\":true,\"top_logprobs\":3,"
    "\"_debug_render_only\":false,\"zzz\":{\"a\":[1,2]}}";

static void test_decode_chat_full(void **state)
{
    struct dcase c = {0};
    assert_int_equal(dec(&c, QR_OP_CHAT, false, chat_full), QR_OK);
    struct qr_request *r = &c.req;
    assert_int_equal(r->protocol, QR_PROTO_OLLAMA);
    assert_int_equal(r->op, QR_OP_CHAT);
    assert_slice(r->model, "llama3");
    assert_int_equal(r->n_messages, 4);

    struct qr_message *m = r->messages;
    assert_int_equal(m[0].role, QR_ROLE_SYSTEM); /* lower-cased */
    assert_int_equal(m[0].n_parts, 1);
    assert_int_equal(m[0].parts[0].kind, QR_PART_TEXT);
    assert_slice(m[0].parts[0].text, "be brief");

    assert_int_equal(m[1].role, QR_ROLE_USER);
    assert_int_equal(m[1].n_parts, 3); /* text, then the images */
    assert_slice(m[1].parts[0].text, "hi");
    assert_int_equal(m[1].parts[1].kind, QR_PART_IMAGE);
    assert_slice(m[1].parts[1].data, "aGVsbG8=");
    assert_false(m[1].parts[1].is_url);
    assert_slice(m[1].parts[2].data, "aGk=");

    assert_int_equal(m[2].role, QR_ROLE_ASSISTANT);
    assert_int_equal(m[2].n_parts, 0); /* "" content */
    assert_slice(m[2].reasoning, "hmm");
    assert_int_equal(m[2].n_tool_calls, 2);
    assert_slice(m[2].tool_calls[0].id, "call_1");
    assert_slice(m[2].tool_calls[0].name, "get_weather");
    assert_slice(m[2].tool_calls[0].arguments,
                 "{\"city\":\"Paris\",\"n\":1.5,\"big\":123456789012345678901234567890}");
    assert_int_equal(m[2].tool_calls[1].id.len, 0);
    assert_slice(m[2].tool_calls[1].arguments, "{}");

    assert_int_equal(m[3].role, QR_ROLE_TOOL);
    assert_slice(m[3].parts[0].text, "sunny");
    assert_slice(m[3].tool_name, "get_weather");
    assert_slice(m[3].tool_call_id, "call_1");

    assert_int_equal(r->n_tools, 1);
    assert_slice(r->tools[0].name, "get_weather");
    assert_slice(r->tools[0].description, "d");
    assert_slice(r->tools[0].parameters, "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                                         "\"string\"}},\"required\":[\"city\"]}");

    assert_int_equal(r->format.kind, QR_FORMAT_SCHEMA);
    assert_slice(r->format.schema, "{\"type\":\"object\"}");
    assert_int_equal(r->think.kind, QR_THINK_LEVEL);
    assert_slice(r->think.level, "high");
    assert_true(r->keep_alive.set);
    assert_false(r->keep_alive.forever);
    assert_int_equal(r->keep_alive.ms, 300000);
    assert_slice(r->keep_alive.raw, "\"5m\"");
    assert_false(r->stream);
    assert_true(r->stream_set);

    const struct qr_sampling *s = &r->sampling;
    assert_true(s->temperature.set);
    assert_true(s->temperature.v == 0.2);
    assert_true(s->top_p.set && s->top_p.v == 0.9);
    assert_true(s->min_p.set && s->min_p.v == 0.05);
    assert_true(s->typical_p.set && s->typical_p.v == 1.0);
    assert_true(s->repeat_penalty.set && s->repeat_penalty.v == 1.1);
    assert_true(s->presence_penalty.set && s->presence_penalty.v == 0.5);
    assert_true(s->frequency_penalty.set && s->frequency_penalty.v == 0.25);
    assert_true(s->top_k.set && s->top_k.v == 40);
    assert_true(s->seed.set && s->seed.v == -7);
    assert_true(s->repeat_last_n.set && s->repeat_last_n.v == 64);
    assert_true(s->num_keep.set && s->num_keep.v == 4);
    assert_true(r->max_tokens.set && r->max_tokens.v == 128);
    assert_true(r->context_len.set && r->context_len.v == 8192);
    assert_int_equal(r->n_stop, 2);
    assert_slice(r->stop[0], "\n\n");
    assert_slice(r->stop[1], "END");

    /* options without a slot, in order, exact JSON */
    assert_int_equal(r->n_extra_options, 4);
    assert_slice(r->extra_options[0].key, "num_gpu");
    assert_slice(r->extra_options[0].json, "99");
    assert_slice(r->extra_options[1].key, "mirostat");
    assert_slice(r->extra_options[1].json, "0");
    assert_slice(r->extra_options[2].key, "custom");
    assert_slice(r->extra_options[2].json, "{\"x\":[1,\"y\"]}");
    assert_slice(r->extra_options[3].key, "temperature_unused");
    assert_slice(r->extra_options[3].json, "null");

    /* top-level fields without a slot, in order */
    static const char *const keys[] = {"truncate",           "shift", "logprobs", "top_logprobs",
                                       "_debug_render_only", "zzz"};
    static const char *const vals[] = {"false", "true", "true", "3", "false", "{\"a\":[1,2]}"};
    assert_int_equal(r->n_extras, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_slice(r->extras[i].key, keys[i]);
        assert_slice(r->extras[i].json, vals[i]);
    }
    assert_int_equal(r->logprobs, QR_UNSET); /* kept in extras, not duplicated */
    qr_arena_cleanup(&c.arena);
}

static void test_decode_chat_defaults(void **state)
{
    struct dcase c = {0};
    /* absent messages = a load request; absent stream = streaming; absent think = UNSET */
    assert_int_equal(dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\"}"), QR_OK);
    assert_int_equal(c.req.n_messages, 0);
    assert_true(c.req.stream);
    assert_false(c.req.stream_set);
    assert_int_equal(c.req.think.kind, QR_THINK_UNSET);
    assert_int_equal(c.req.format.kind, QR_FORMAT_NONE);
    assert_false(c.req.keep_alive.set);
    assert_int_equal(c.req.n_extras, 0);
    assert_false(c.req.sampling.temperature.set);

    assert_int_equal(
        dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\",\"messages\":[],\"stream\":true}"), QR_OK);
    assert_int_equal(c.req.n_messages, 0);
    assert_true(c.req.stream);
    assert_true(c.req.stream_set);

    /* null = not sent */
    assert_int_equal(dec(&c, QR_OP_CHAT, false,
                         "{\"model\":\"m\",\"messages\":null,\"stream\":null,\"think\":null,"
                         "\"keep_alive\":null,\"format\":null,\"options\":null}"),
                     QR_OK);
    assert_true(c.req.stream);
    assert_false(c.req.stream_set);
    assert_int_equal(c.req.think.kind, QR_THINK_UNSET);
    assert_false(c.req.keep_alive.set);

    /* content absent / null = "" as in Ollama; format "" = none; format "json" */
    assert_int_equal(dec(&c, QR_OP_CHAT, false,
                         "{\"model\":\"m\",\"format\":\"\",\"messages\":[{\"role\":\"assistant\"},"
                         "{\"role\":\"user\",\"content\":null}]}"),
                     QR_OK);
    assert_int_equal(c.req.n_messages, 2);
    assert_int_equal(c.req.messages[0].n_parts, 0);
    assert_int_equal(c.req.format.kind, QR_FORMAT_NONE);
    assert_int_equal(dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\",\"format\":\"json\"}"), QR_OK);
    assert_int_equal(c.req.format.kind, QR_FORMAT_JSON);
    qr_arena_cleanup(&c.arena);
}

static void test_decode_think(void **state)
{
    struct dcase c = {0};
    assert_int_equal(dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\",\"think\":false}"), QR_OK);
    assert_int_equal(c.req.think.kind, QR_THINK_OFF);
    assert_int_equal(dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\",\"think\":true}"), QR_OK);
    assert_int_equal(c.req.think.kind, QR_THINK_ON);
    static const char *const levels[] = {"low", "medium", "high"};
    for (size_t i = 0; i < 3; i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"think\":\"%s\"}", levels[i]);
        assert_int_equal(dec(&c, QR_OP_COMPLETION, false, body), QR_OK);
        assert_int_equal(c.req.think.kind, QR_THINK_LEVEL);
        assert_slice(c.req.think.level, levels[i]);
    }
    qr_arena_cleanup(&c.arena);
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"think\":\"max\"}", "invalid think value: \"max\"");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"think\":\"HIGH\"}", "invalid think value");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"think\":1}", "think must be");
}

static void test_decode_keep_alive(void **state)
{
    static const struct {
        const char *v;
        bool forever;
        int64_t ms;
    } ok[] = {
        {"300", false, 300000},
        {"1.5", false, 1500},
        {"0", false, 0},
        {"-1", true, 0},
        {"-0.5", true, 0},
        {"\"5m\"", false, 300000},
        {"\"1.5h\"", false, 5400000},
        {"\"2h45m\"", false, 9900000},
        {"\"300ms\"", false, 300},
        {"\"0\"", false, 0},
        {"\"-1m\"", true, 0},
        {"\"+10s\"", false, 10000},
        {"\"-0s\"", false, 0},
        {"\".5s\"", false, 500},
        {"\"1\\u00b5s\"", false, 0},
    };
    struct dcase c = {0};
    for (size_t i = 0; i < QR_ARRAY_LEN(ok); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"keep_alive\":%s}", ok[i].v);
        if (dec(&c, QR_OP_CHAT, false, body) != QR_OK) {
            fprintf(stderr, "keep_alive %s: %s\n", ok[i].v, c.err.message);
            fail();
        }
        assert_true(c.req.keep_alive.set);
        assert_int_equal(c.req.keep_alive.forever, ok[i].forever);
        if (!ok[i].forever)
            assert_int_equal(c.req.keep_alive.ms, ok[i].ms);
    }
    assert_int_equal(dec(&c, QR_OP_CHAT, false, "{\"model\":\"m\",\"keep_alive\":-1}"), QR_OK);
    assert_slice(c.req.keep_alive.raw, "-1");
    qr_arena_cleanup(&c.arena);

    static const char *const bad[] = {"\"300\"", "\"\"",   "\"5x\"",           "\"m\"",
                                      "\"-\"",   "\"1.\"", "\"99999999999h\"", "true",
                                      "[1]",     "{}"};
    for (size_t i = 0; i < QR_ARRAY_LEN(bad); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"keep_alive\":%s}", bad[i]);
        expect_400(QR_OP_CHAT, body, "keep_alive");
    }
    /* "1." is valid Go ("1.s" style needs a unit): check the unit rule separately */
    struct dcase c2 = {0};
    assert_int_equal(dec(&c2, QR_OP_CHAT, false, "{\"model\":\"m\",\"keep_alive\":\"1.s\"}"),
                     QR_OK);
    assert_int_equal(c2.req.keep_alive.ms, 1000);
    qr_arena_cleanup(&c2.arena);
}

static void test_decode_options_errors(void **state)
{
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"top_k\":\"40\"}}",
               "option \"top_k\" must be of type integer");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"temperature\":\"hot\"}}",
               "option \"temperature\" must be of type float");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"num_ctx\":true}}",
               "option \"num_ctx\" must be of type integer");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"num_ctx\":-1}}",
               "option \"num_ctx\" must be at least 1");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"stop\":5}}",
               "option \"stop\" must be of type array of strings");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"stop\":[\"a\",1]}}",
               "option \"stop\" must be of type array of strings");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"use_mmap\":\"yes\"}}",
               "option \"use_mmap\" must be of type boolean");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"num_gpu\":\"all\"}}",
               "option \"num_gpu\" must be of type integer");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"seed\":1e300}}",
               "option \"seed\" is out of range");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":[1]}", "options must be an object");

    struct dcase c = {0};
    /* Go fills ints from any JSON number (truncated); stop may be one string; null is skipped */
    assert_int_equal(dec(&c, QR_OP_CHAT, false,
                         "{\"model\":\"m\",\"options\":{\"top_k\":40.7,\"stop\":\"###\","
                         "\"typical_p\":null,\"temperature\":0}}"),
                     QR_OK);
    assert_int_equal(c.req.sampling.top_k.v, 40);
    assert_int_equal(c.req.n_stop, 1);
    assert_slice(c.req.stop[0], "###");
    assert_true(c.req.sampling.temperature.set);
    assert_true(c.req.sampling.temperature.v == 0.0);
    assert_int_equal(c.req.n_extra_options, 0);
    qr_arena_cleanup(&c.arena);
}

/* A repeated key is refused (issue 10): the passthrough path routes on the first "model" while Go
 * (Ollama) decodes the last, so two readers could see two requests. Was: a second "options" object
 * merged into the first (a fuzz finding on the merge itself). */
static void test_decode_repeated_options_merge(void **state)
{
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"options\":{\"num_gpu\":1,\"top_k\":5},"
               "\"options\":{\"num_batch\":64}}",
               "duplicate key 'options'");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"model\":\"n\"}", "duplicate key 'model'");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"options\":{\"seed\":1,\"seed\":2}}",
               "duplicate key 'seed'");
    expect_400(QR_OP_COMPLETION, "{\"model\":\"m\\u0000x\"}", "NUL character");
    (void) state;
}

static void test_decode_errors(void **state)
{
    expect_400(QR_OP_CHAT, "", "missing request body");
    expect_400(QR_OP_CHAT, "  \n", "missing request body");
    expect_400(QR_OP_CHAT, "{\"model\":", "invalid JSON at byte");
    expect_400(QR_OP_CHAT, "[1]", "request body must be a JSON object");
    expect_400(QR_OP_CHAT, "{\"messages\":[]}", "model is required");
    expect_400(QR_OP_CHAT, "{\"model\":\"\"}", "model is required");
    expect_400(QR_OP_CHAT, "{\"model\":5}", "model must be a string");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"messages\":{}}", "messages must be an array");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[5]}", "messages[0] must be an object");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}",
               "messages[0].role is required");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"robot\",\"content\":\"\"}]}",
               "invalid role \"robot\"");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"\"}]}",
               "invalid role");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}",
               "messages[0].content must be a string");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\",\"images\":"
               "[\"data:image/png;base64,aGk=\"]}]}",
               "without a data: URL prefix");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\",\"images\":"
               "[\"a*b=\"]}]}",
               "messages[0].images[0] is not valid base64");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":\"\","
               "\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
               "messages[0].tool_calls[0].function.arguments must be a JSON object");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":\"\","
               "\"tool_calls\":[{\"id\":\"x\"}]}]}",
               "messages[0].tool_calls[0].function must be an object");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"tools\":[{\"type\":\"web\",\"function\":{}}]}",
               "tools[0].type must be \"function\"");
    expect_400(QR_OP_CHAT,
               "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\","
               "\"parameters\":\"x\"}}]}",
               "tools[0].function.parameters must be a JSON Schema object");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"format\":\"xml\"}",
               "invalid format: expected \"json\" or a valid JSON schema");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"format\":5}", "invalid format");
    expect_400(QR_OP_CHAT, "{\"model\":\"m\",\"stream\":\"yes\"}", "stream must be a boolean");
}

static void test_decode_limits(void **state)
{
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    lim.max_messages = 1;
    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_request r;
    struct qr_api_error e = {0};
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                       "{\"role\":\"user\",\"content\":\"b\"}]}";
    assert_int_equal(qr_ollama_decode(QR_OP_CHAT, false, qr_slice_str(body), &lim, &a, &r, &e),
                     QR_ERR_TOO_LARGE);
    assert_int_equal(e.status, 413);
    qr_arena_cleanup(&a);

    /* the arena cap bounds what one request may allocate */
    qr_arena_init(&a, 64);
    memset(&e, 0, sizeof(e));
    assert_int_equal(qr_ollama_decode(QR_OP_CHAT, false, qr_slice_str(body), NULL, &a, &r, &e),
                     QR_ERR_TOO_LARGE);
    assert_int_equal(e.status, 413);
    qr_arena_cleanup(&a);
}

static void test_decode_generate(void **state)
{
    struct dcase c = {0};
    assert_int_equal(
        dec(&c, QR_OP_COMPLETION, false,
            "{\"model\":\"g\",\"prompt\":\"Why?\",\"suffix\":\"end\",\"system\":\"sys\","
            "\"template\":\"{{ .Prompt }}\",\"context\":[1,2,3],\"raw\":true,"
            "\"images\":[\"aGk=\"],\"format\":\"json\",\"think\":false,\"keep_alive\":0,"
            "\"options\":{\"num_predict\":-1},\"messages\":[],\"width\":64}"),
        QR_OK);
    struct qr_request *r = &c.req;
    assert_int_equal(r->op, QR_OP_COMPLETION);
    assert_slice(r->model, "g");
    assert_slice(r->prompt, "Why?");
    assert_slice(r->suffix, "end");
    assert_slice(r->system, "sys");
    assert_slice(r->template_, "{{ .Prompt }}");
    assert_slice(r->context, "[1,2,3]");
    assert_true(r->raw);
    assert_int_equal(r->n_images, 1);
    assert_int_equal(r->images[0].kind, QR_PART_IMAGE);
    assert_slice(r->images[0].data, "aGk=");
    assert_int_equal(r->format.kind, QR_FORMAT_JSON);
    assert_int_equal(r->think.kind, QR_THINK_OFF);
    assert_true(r->keep_alive.set);
    assert_int_equal(r->keep_alive.ms, 0);
    assert_false(r->keep_alive.forever);
    assert_true(r->max_tokens.set && r->max_tokens.v == -1);
    assert_true(r->stream);
    assert_false(r->stream_set);
    assert_int_equal(r->n_extras, 2); /* chat's messages and image generation's width */
    assert_slice(r->extras[0].key, "messages");
    assert_slice(r->extras[0].json, "[]");
    assert_slice(r->extras[1].key, "width");
    qr_arena_cleanup(&c.arena);
    expect_400(QR_OP_COMPLETION, "{\"model\":\"g\",\"prompt\":5}", "prompt must be a string");
    expect_400(QR_OP_COMPLETION, "{\"model\":\"g\",\"context\":[\"a\"]}",
               "context must be an array of integers");
    expect_400(QR_OP_COMPLETION, "{\"model\":\"g\",\"raw\":1}", "raw must be a boolean");
    expect_400(QR_OP_COMPLETION, "{\"model\":\"g\",\"images\":[\"data:x\"]}", "data: URL");
}

static void test_decode_embed(void **state)
{
    struct dcase c = {0};
    assert_int_equal(dec(&c, QR_OP_EMBED, false,
                         "{\"model\":\"e\",\"input\":\"hello\",\"truncate\":false,"
                         "\"dimensions\":256,\"keep_alive\":\"10m\",\"options\":{\"num_ctx\":512},"
                         "\"stream\":true}"),
                     QR_OK);
    struct qr_request *r = &c.req;
    assert_int_equal(r->op, QR_OP_EMBED);
    assert_int_equal(r->n_inputs, 1);
    assert_false(r->input_is_list);
    assert_slice(r->inputs[0], "hello");
    assert_int_equal(r->truncate, QR_FALSE);
    assert_true(r->dimensions.set && r->dimensions.v == 256);
    assert_int_equal(r->keep_alive.ms, 600000);
    assert_int_equal(r->context_len.v, 512);
    assert_false(r->stream); /* embeddings are never streamed; "stream" is an extra here */
    assert_int_equal(r->n_extras, 1);

    assert_int_equal(dec(&c, QR_OP_EMBED, false, "{\"model\":\"e\",\"input\":[\"a\",\"\",\"c\"]}"),
                     QR_OK);
    assert_int_equal(c.req.n_inputs, 3);
    assert_true(c.req.input_is_list);
    assert_slice(c.req.inputs[2], "c");
    assert_int_equal(c.req.truncate, QR_UNSET);

    /* legacy /api/embeddings: prompt is the one input; "input" is not looked at */
    assert_int_equal(dec(&c, QR_OP_EMBED, true, "{\"model\":\"e\",\"prompt\":\"p\"}"), QR_OK);
    assert_int_equal(c.req.n_inputs, 1);
    assert_slice(c.req.inputs[0], "p");
    assert_int_equal(dec(&c, QR_OP_EMBED, true, "{\"model\":\"e\"}"), QR_OK);
    assert_int_equal(c.req.n_inputs, 0);
    qr_arena_cleanup(&c.arena);

    expect_400(QR_OP_EMBED, "{\"model\":\"e\"}", "input is required");
    expect_400(QR_OP_EMBED, "{\"model\":\"e\",\"input\":null}", "input is required");
    expect_400(QR_OP_EMBED, "{\"model\":\"e\",\"input\":[1]}", "invalid input type");
    expect_400(QR_OP_EMBED, "{\"model\":\"e\",\"input\":5}", "invalid input type");
    expect_400(QR_OP_EMBED, "{\"model\":\"e\",\"input\":\"x\",\"dimensions\":\"a\"}",
               "dimensions must be an integer");
    expect_400(QR_OP_EMBED, "{\"model\":\"e\",\"input\":\"x\",\"truncate\":\"no\"}",
               "truncate must be a boolean");
}

/* ---- encoder helpers ---- */

static struct qr_event ev_text(enum qr_event_type t, const char *s)
{
    return (struct qr_event){.type = t, .text = qr_slice_str(s)};
}

static struct qr_event ev_bytes(enum qr_event_type t, const char *s, size_t n, uint32_t index)
{
    return (struct qr_event){.type = t, .text = {s, n}, .index = index};
}

static struct qr_event ev_args(uint32_t index, const char *s)
{
    return ev_bytes(QR_EV_TOOL_ARGS, s, strlen(s), index);
}

static struct qr_event ev_begin(uint32_t index, const char *id, const char *name)
{
    return (struct qr_event){.type = QR_EV_TOOL_BEGIN,
                             .index = index,
                             .id = qr_slice_str(id),
                             .name = qr_slice_str(name)};
}

static struct qr_event ev_usage(void)
{
    struct qr_event ev = {.type = QR_EV_USAGE};
    qr_usage_init(&ev.usage);
    ev.usage.prompt_tokens = 12;
    ev.usage.completion_tokens = 34;
    ev.usage.total_ns = 5000000;
    ev.usage.load_ns = 0; /* Ollama omits zeros */
    ev.usage.prompt_ns = 1000;
    ev.usage.eval_ns = 2000;
    return ev;
}

/* Feed events to the streaming encoder and to the aggregator; return the NDJSON text. */
static char *run_stream(const struct qr_request *req, const struct qr_event *evs, size_t n,
                        struct qr_answer *ans)
{
    struct qr_enc_env env = {.now_ns = NOW};
    struct qr_ollama_enc e;
    qr_ollama_enc_init(&e, req, &env);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(qr_ollama_enc_event(&e, &evs[i], &out), QR_OK);
        if (ans)
            assert_int_equal(qr_answer_add(ans, &evs[i]), QR_OK);
    }
    qr_ollama_enc_cleanup(&e);
    char *s = out.ptr ? out.ptr : strdup("");
    return s;
}

static char *run_answer(const struct qr_request *req, const struct qr_answer *a, bool legacy,
                        enum qr_err want)
{
    struct qr_enc_env env = {.now_ns = NOW};
    struct qr_ollama_enc e;
    qr_ollama_enc_init(&e, req, &env);
    e.legacy_embeddings = legacy;
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_ollama_enc_answer(&e, a, &out), want);
    qr_ollama_enc_cleanup(&e);
    return out.ptr ? out.ptr : strdup("");
}

static void assert_text(const char *got, const char *want)
{
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "--- got:\n%s--- want:\n%s---\n", got, want);
        fail();
    }
}

/* Re-parse the NDJSON lines and accumulate them the way a client does; compare with the whole
 * body's fields. */
static void assert_stream_matches_whole(const char *ndjson, const char *whole, bool chat)
{
    struct qr_buf content, thinking, calls;
    qr_buf_init(&content, 0);
    qr_buf_init(&thinking, 0);
    qr_buf_init(&calls, 0);
    qr_buf_puts(&calls, "[");
    const char *p = ndjson;
    int done_lines = 0;
    yyjson_doc *last = NULL;
    while (*p) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        yyjson_doc *d = yyjson_read(p, (size_t) (nl - p), 0);
        assert_non_null(d);
        yyjson_val *root = yyjson_doc_get_root(d);
        yyjson_val *msg = chat ? yyjson_obj_get(root, "message") : root;
        yyjson_val *c = yyjson_obj_get(msg, chat ? "content" : "response");
        assert_non_null(c); /* always present */
        qr_buf_append(&content, yyjson_get_str(c), yyjson_get_len(c));
        yyjson_val *t = yyjson_obj_get(msg, "thinking");
        if (t)
            qr_buf_append(&thinking, yyjson_get_str(t), yyjson_get_len(t));
        yyjson_val *tc = yyjson_obj_get(msg, "tool_calls");
        size_t i, max;
        yyjson_val *v;
        yyjson_arr_foreach(tc, i, max, v)
        {
            char *s = yyjson_val_write(v, 0, NULL);
            if (calls.len > 1)
                qr_buf_puts(&calls, ",");
            qr_buf_puts(&calls, s);
            free(s);
        }
        if (yyjson_get_bool(yyjson_obj_get(root, "done"))) {
            done_lines++;
            yyjson_doc_free(last);
            last = d;
        } else {
            yyjson_doc_free(d);
        }
        p = nl + 1;
    }
    qr_buf_puts(&calls, "]");
    assert_int_equal(done_lines, 1);
    yyjson_doc *w = yyjson_read(whole, strlen(whole), 0);
    assert_non_null(w);
    yyjson_val *root = yyjson_doc_get_root(w);
    yyjson_val *msg = chat ? yyjson_obj_get(root, "message") : root;
    yyjson_val *c = yyjson_obj_get(msg, chat ? "content" : "response");
    assert_string_equal(yyjson_get_str(c), content.ptr ? content.ptr : "");
    yyjson_val *t = yyjson_obj_get(msg, "thinking");
    assert_string_equal(t ? yyjson_get_str(t) : "", thinking.ptr ? thinking.ptr : "");
    yyjson_val *tc = yyjson_obj_get(msg, "tool_calls");
    char *s = tc ? yyjson_val_write(tc, 0, NULL) : strdup("[]");
    assert_string_equal(s, calls.ptr);
    free(s);
    /* same done_reason and metrics as the final streamed line */
    static const char *const keys[] = {"done_reason",       "total_duration",       "load_duration",
                                       "prompt_eval_count", "prompt_eval_duration", "eval_count",
                                       "eval_duration"};
    yyjson_val *lroot = yyjson_doc_get_root(last);
    for (size_t i = 0; i < QR_ARRAY_LEN(keys); i++)
        assert_true(yyjson_equals(yyjson_obj_get(lroot, keys[i]), yyjson_obj_get(root, keys[i])) ||
                    (!yyjson_obj_get(lroot, keys[i]) && !yyjson_obj_get(root, keys[i])));
    yyjson_doc_free(last);
    yyjson_doc_free(w);
    qr_buf_cleanup(&content);
    qr_buf_cleanup(&thinking);
    qr_buf_cleanup(&calls);
}

/* ---- encoder ---- */

static void test_encode_chat_full(void **state)
{
    struct qr_request req = {.protocol = QR_PROTO_OLLAMA, .op = QR_OP_CHAT};
    req.model = QR_SLICE_LIT("m1");
    struct qr_event evs[] = {
        {.type = QR_EV_START, .model = QR_SLICE_LIT("upstream"), .name = QR_SLICE_LIT("llamacpp")},
        ev_text(QR_EV_REASONING, "Let me think"),
        ev_text(QR_EV_REASONING, " more"),
        ev_text(QR_EV_CONTENT, "Gr\xc3\xbc\xc3\x9f"
                               "e \xc3\x9f \xf0\x9f"), /* emoji split */
        ev_text(QR_EV_CONTENT, "\x98\x80"),
        ev_begin(0, "call_a", "get_weather"),
        ev_args(0, "{\"city\":"),
        ev_args(0, " \"Paris \\\"centre\\\"\"}"),
        {.type = QR_EV_TOOL_END, .index = 0},
        ev_begin(1, "call_b", "get_time"),
        ev_args(1, "{\"tz\": \"CET\",\n"),
        ev_args(1, " \"n\": 1.50, \"big\": 123456789012345678901234567890}"),
        {.type = QR_EV_TOOL_END, .index = 1},
        ev_usage(),
        {.type = QR_EV_DONE, .finish = QR_FINISH_TOOL_CALLS},
    };
    const char *call_a = "{\"id\":\"call_a\",\"function\":{\"index\":0,\"name\":\"get_weather\","
                         "\"arguments\":{\"city\":\"Paris \\\"centre\\\"\"}}}";
    const char *call_b = "{\"id\":\"call_b\",\"function\":{\"index\":1,\"name\":\"get_time\","
                         "\"arguments\":{\"tz\":\"CET\",\"n\":1.50,"
                         "\"big\":123456789012345678901234567890}}}";
    const char *metrics = "\"total_duration\":5000000,\"prompt_eval_count\":12,"
                          "\"prompt_eval_duration\":1000,\"eval_count\":34,\"eval_duration\":2000}";
    char want[4096];
    snprintf(want, sizeof(want),
             H "\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"Let me "
               "think\"},\"done\":false}\n" H
               "\"message\":{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\" more\"},"
               "\"done\":false}\n" H
               "\"message\":{\"role\":\"assistant\",\"content\":\"Gr\xc3\xbc\xc3\x9f"
               "e \xc3\x9f \"},\"done\":false}\n" H
               "\"message\":{\"role\":\"assistant\",\"content\":\"\xf0\x9f\x98\x80\"},"
               "\"done\":false}\n" H
               "\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[%s]},"
               "\"done\":false}\n" H
               "\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[%s]},"
               "\"done\":false}\n" H "\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
               "\"done\":true,\"done_reason\":\"stop\",%s\n",
             call_a, call_b, metrics);

    struct qr_answer ans;
    qr_answer_init(&ans, 1 << 20);
    char *got = run_stream(&req, evs, QR_ARRAY_LEN(evs), &ans);
    assert_text(got, want);

    char want_whole[4096];
    snprintf(want_whole, sizeof(want_whole),
             H "\"message\":{\"role\":\"assistant\",\"content\":\"Gr\xc3\xbc\xc3\x9f"
               "e \xc3\x9f \xf0\x9f\x98\x80\",\"thinking\":\"Let me think more\","
               "\"tool_calls\":[%s,%s]},\"done\":true,\"done_reason\":\"stop\",%s\n",
             call_a, call_b, metrics);
    char *whole = run_answer(&req, &ans, false, QR_OK);
    assert_text(whole, want_whole);
    assert_stream_matches_whole(got, whole, true);
    free(got);
    free(whole);
    qr_answer_cleanup(&ans);
}

static void test_encode_error_mid_stream(void **state)
{
    struct qr_request req = {.op = QR_OP_CHAT, .model = QR_SLICE_LIT("m1")};
    struct qr_event evs[] = {
        {.type = QR_EV_START},
        ev_text(QR_EV_CONTENT, "a\n\"b\"\x01"),
        {.type = QR_EV_ERROR,
         .status = 502,
         .code = QR_SLICE_LIT("upstream_error"),
         .message = QR_SLICE_LIT("backend \"crashed\"")},
        {.type = QR_EV_DONE, .finish = QR_FINISH_STOP}, /* ignored: nothing after an error */
    };
    char *got = run_stream(&req, evs, QR_ARRAY_LEN(evs), NULL);
    assert_text(got, H "\"message\":{\"role\":\"assistant\",\"content\":\"a\\n\\\"b\\\"\\u0001\"},"
                       "\"done\":false}\n{\"error\":\"backend \\\"crashed\\\"\"}\n");
    free(got);

    /* cancelled: an error line, never a done line; the whole answer refuses */
    struct qr_event cancel[] = {
        {.type = QR_EV_START},
        ev_text(QR_EV_CONTENT, "x"),
        {.type = QR_EV_DONE, .finish = QR_FINISH_CANCELLED},
    };
    struct qr_answer ans;
    qr_answer_init(&ans, 0);
    got = run_stream(&req, cancel, QR_ARRAY_LEN(cancel), &ans);
    assert_text(got, H "\"message\":{\"role\":\"assistant\",\"content\":\"x\"},\"done\":false}\n"
                       "{\"error\":\"request cancelled\"}\n");
    free(got);
    free(run_answer(&req, &ans, false, QR_ERR_CANCELLED));
    qr_answer_cleanup(&ans);
}

static void test_encode_bad_tool_args(void **state)
{
    struct qr_request req = {.op = QR_OP_CHAT, .model = QR_SLICE_LIT("m1")};
    struct qr_enc_env env = {.now_ns = NOW};
    struct qr_ollama_enc e;
    struct qr_buf out;
    qr_buf_init(&out, 0);
    qr_ollama_enc_init(&e, &req, &env);
    struct qr_event b = ev_begin(0, "call_x", "f");
    struct qr_event args = ev_args(0, "[1,2]");
    struct qr_event end = {.type = QR_EV_TOOL_END, .index = 0};
    assert_int_equal(qr_ollama_enc_event(&e, &b, &out), QR_OK);
    assert_int_equal(qr_ollama_enc_event(&e, &args, &out), QR_OK);
    assert_int_equal(qr_ollama_enc_event(&e, &end, &out), QR_ERR_PARSE);
    assert_int_equal(out.len, 0);
    /* the caller can still end the stream in-band */
    struct qr_event err = {.type = QR_EV_ERROR, .message = QR_SLICE_LIT("bad output")};
    assert_int_equal(qr_ollama_enc_event(&e, &err, &out), QR_OK);
    assert_string_equal(out.ptr, "{\"error\":\"bad output\"}\n");
    qr_buf_cleanup(&out);
    qr_ollama_enc_cleanup(&e);

    /* truncated JSON and ARGS for an unknown index */
    qr_ollama_enc_init(&e, &req, &env);
    struct qr_event trunc = ev_args(0, "{\"a\":");
    assert_int_equal(qr_ollama_enc_event(&e, &b, &out), QR_OK);
    assert_int_equal(qr_ollama_enc_event(&e, &trunc, &out), QR_OK);
    assert_int_equal(qr_ollama_enc_event(&e, &end, &out), QR_ERR_PARSE);
    struct qr_event stray = ev_args(5, "{}");
    assert_int_equal(qr_ollama_enc_event(&e, &stray, &out), QR_ERR_INTERNAL);
    qr_ollama_enc_cleanup(&e);

    /* held bytes are capped */
    qr_ollama_enc_init(&e, &req, &env);
    size_t big = QR_OLLAMA_MAX_TOOL_BYTES + 1;
    char *huge = malloc(big);
    memset(huge, ' ', big);
    struct qr_event hv = ev_bytes(QR_EV_TOOL_ARGS, huge, big, 0);
    assert_int_equal(qr_ollama_enc_event(&e, &b, &out), QR_OK);
    assert_int_equal(qr_ollama_enc_event(&e, &hv, &out), QR_ERR_TOO_LARGE);
    free(huge);
    qr_ollama_enc_cleanup(&e);
    qr_buf_cleanup(&out);
}

static void test_encode_generate(void **state)
{
    struct qr_request req = {.op = QR_OP_COMPLETION, .model = QR_SLICE_LIT("m1")};
    struct qr_event evs[] = {
        {.type = QR_EV_START},
        ev_text(QR_EV_REASONING, "hmm"),
        ev_text(QR_EV_CONTENT, "Hi"),
        ev_text(QR_EV_CONTENT, " there\xff"), /* invalid byte: U+FFFD like Go */
        {.type = QR_EV_DONE, .finish = QR_FINISH_LENGTH},
    };
    struct qr_answer ans;
    qr_answer_init(&ans, 0);
    char *got = run_stream(&req, evs, QR_ARRAY_LEN(evs), &ans);
    assert_text(got, H "\"response\":\"\",\"thinking\":\"hmm\",\"done\":false}\n" H
                       "\"response\":\"Hi\",\"done\":false}\n" H
                       "\"response\":\" there\\ufffd\",\"done\":false}\n" H
                       "\"response\":\"\",\"done\":true,\"done_reason\":\"length\"}\n");
    char *whole = run_answer(&req, &ans, false, QR_OK);
    assert_text(whole, H "\"response\":\"Hi there\\ufffd\",\"thinking\":\"hmm\",\"done\":true,"
                         "\"done_reason\":\"length\"}\n");
    assert_stream_matches_whole(got, whole, false);
    free(got);
    free(whole);
    qr_answer_cleanup(&ans);

    /* a character cut off at the end is flushed before the done line */
    struct qr_event cut[] = {
        {.type = QR_EV_START},
        ev_text(QR_EV_CONTENT, "a\xe2\x82"),
        {.type = QR_EV_DONE, .finish = QR_FINISH_STOP},
    };
    qr_answer_init(&ans, 0);
    got = run_stream(&req, cut, QR_ARRAY_LEN(cut), &ans);
    assert_text(got, H "\"response\":\"a\",\"done\":false}\n" H
                       "\"response\":\"\\ufffd\\ufffd\",\"done\":false}\n" H
                       "\"response\":\"\",\"done\":true,\"done_reason\":\"stop\"}\n");
    whole = run_answer(&req, &ans, false, QR_OK);
    assert_stream_matches_whole(got, whole, false);
    free(got);
    free(whole);
    qr_answer_cleanup(&ans);
}

static void test_encode_embed(void **state)
{
    struct qr_request req = {.op = QR_OP_EMBED, .model = QR_SLICE_LIT("e1")};
    static const float v0[] = {0.5f, -1.25f, 0.1f};
    static const float v1[] = {1.0f, 0.0f};
    struct qr_event evs[] = {
        {.type = QR_EV_START},
        {.type = QR_EV_EMBEDDING, .index = 0, .vec = v0, .dims = 3},
        {.type = QR_EV_EMBEDDING, .index = 1, .vec = v1, .dims = 2},
        {.type = QR_EV_USAGE},
        {.type = QR_EV_DONE, .finish = QR_FINISH_STOP},
    };
    qr_usage_init(&evs[3].usage);
    evs[3].usage.prompt_tokens = 7;
    evs[3].usage.total_ns = 900;
    struct qr_answer ans;
    qr_answer_init(&ans, 0);
    char *got = run_stream(&req, evs, QR_ARRAY_LEN(evs), &ans);
    assert_string_equal(got, ""); /* nothing streams for embeddings */
    free(got);
    char *whole = run_answer(&req, &ans, false, QR_OK);
    assert_text(whole, "{\"model\":\"e1\",\"embeddings\":[[0.5,-1.25,0.1],[1,0]],"
                       "\"total_duration\":900,\"prompt_eval_count\":7}\n");
    free(whole);
    whole = run_answer(&req, &ans, true, QR_OK);
    assert_text(whole, "{\"embedding\":[0.5,-1.25,0.1]}\n");
    free(whole);
    qr_answer_cleanup(&ans);

    qr_answer_init(&ans, 0);
    whole = run_answer(&req, &ans, true, QR_OK);
    assert_text(whole, "{\"embedding\":[]}\n");
    free(whole);
    whole = run_answer(&req, &ans, false, QR_OK);
    assert_text(whole, "{\"model\":\"e1\",\"embeddings\":[]}\n");
    free(whole);
    qr_answer_cleanup(&ans);
}

static void test_error_body_and_load(void **state)
{
    struct qr_api_error e = {0};
    qr_api_error_set(&e, QR_ERR_INVALID, 400, "invalid_request", "model", "model is \"required\"");
    struct qr_buf b;
    qr_buf_init(&b, 0);
    qr_ollama_error_body(&e, "req-1", &b);
    assert_string_equal(b.ptr, "{\"error\":{\"code\":\"invalid_request\",\"message\":\"model is "
                               "\\\"required\\\"\",\"request_id\":\"req-1\"}}\n");
    qr_buf_cleanup(&b);
    qr_ollama_error_body(&e, NULL, &b);
    assert_string_equal(b.ptr, "{\"error\":{\"code\":\"invalid_request\",\"message\":\"model is "
                               "\\\"required\\\"\"}}\n");
    qr_buf_cleanup(&b);

    struct qr_request req = {.op = QR_OP_CHAT, .model = QR_SLICE_LIT("m1")};
    struct qr_enc_env env = {.now_ns = NOW};
    struct qr_ollama_enc enc;
    qr_ollama_enc_init(&enc, &req, &env);
    assert_int_equal(qr_ollama_enc_load(&enc, false, &b), QR_OK);
    assert_string_equal(b.ptr, H "\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
                                 "\"done\":true,\"done_reason\":\"load\"}\n");
    qr_buf_cleanup(&b);
    req.op = QR_OP_COMPLETION;
    assert_int_equal(qr_ollama_enc_load(&enc, true, &b), QR_OK);
    assert_string_equal(b.ptr, H "\"response\":\"\",\"done\":true,\"done_reason\":\"unload\"}\n");
    qr_buf_cleanup(&b);
    qr_ollama_enc_cleanup(&enc);
    assert_string_equal(QR_OLLAMA_CT_STREAM, "application/x-ndjson");
    assert_string_equal(QR_OLLAMA_CT_JSON, "application/json; charset=utf-8");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_chat_full),
        cmocka_unit_test(test_decode_chat_defaults),
        cmocka_unit_test(test_decode_think),
        cmocka_unit_test(test_decode_keep_alive),
        cmocka_unit_test(test_decode_options_errors),
        cmocka_unit_test(test_decode_repeated_options_merge),
        cmocka_unit_test(test_decode_errors),
        cmocka_unit_test(test_decode_limits),
        cmocka_unit_test(test_decode_generate),
        cmocka_unit_test(test_decode_embed),
        cmocka_unit_test(test_encode_chat_full),
        cmocka_unit_test(test_encode_error_mid_stream),
        cmocka_unit_test(test_encode_bad_tool_args),
        cmocka_unit_test(test_encode_generate),
        cmocka_unit_test(test_encode_embed),
        cmocka_unit_test(test_error_body_and_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
