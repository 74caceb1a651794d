/* Ollama native upstream codec: /api/chat, /api/generate and /api/embed bodies (exact JSON
 * text) and every 422 path; the decoder on NDJSON transcripts (thinking lines, whole tool calls
 * with index 0 repeated and no ids, done_reason stop after tool calls, metrics, a mid-stream
 * {"error"} line, load replies, lines after done), whole bodies, embeddings and error bodies.
 * Every stream is re-fed split at every byte boundary and one byte at a time and must give the
 * identical event log; every log passes the order contract (qr_answer_add). */
#include "decode_log.h"

#include "backend/codec.h"

#define S(x)   ((struct qr_slice){(x), sizeof(x) - 1})
#define ND     "application/x-ndjson"
#define JSON   "application/json; charset=utf-8"
#define CREATE "\"created_at\":\"2026-12-02T09:51:05.123456789Z\""

static bool print_logs(void)
{
    return getenv("QR_PRINT_LOGS") != NULL;
}

static void dialect(struct qr_dialect *d)
{
    qr_dialect_default(d, QR_UP_OLLAMA);
}

static void chat_req(struct qr_request *r, bool stream)
{
    memset(r, 0, sizeof(*r));
    r->protocol = QR_PROTO_OLLAMA;
    r->op = QR_OP_CHAT;
    r->model = S("qwen3:8b");
    r->stream = stream;
    r->stream_set = true;
}

static void expect(const struct qr_dialect *d, const struct qr_request *r, int status,
                   const char *ct, const char *body, enum qr_err transport, const char *want)
{
    char *log = dlog_check_splits(d, r, status, ct, body, transport, NULL);
    if (print_logs() || strcmp(log, want) != 0)
        fprintf(stderr, "---- got:\n%s---- want:\n%s", log, want);
    assert_string_equal(log, want);
    free(log);
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder                                                                                   */
/* ---------------------------------------------------------------------------------------- */

#define LINE(msg)                                                                                  \
    "{\"model\":\"qwen3:8b\"," CREATE ",\"message\":{\"role\":\"assistant\"," msg                  \
    "},\"done\":false}\n"

static void test_thinking_content_metrics(void **state)
{
    static const char body[] = LINE("\"content\":\"\",\"thinking\":\"Der Nutzer \"")
        LINE("\"content\":\"\",\"thinking\":\"grüßt 👋.\"") LINE("\"content\":\"Straße, \"") LINE(
            "\"content\":\"Größe, Übermaß 🎉\"") "{\"model\":\"qwen3:8b\"," CREATE
                                                ",\"message\":{\"role\":\"assistant\",\"content\":"
                                                "\"\"},"
                                                "\"done\":true,\"done_reason\":\"stop\",\"total_"
                                                "duration\":5043500667,"
                                                "\"load_duration\":5025959,\"prompt_eval_count\":"
                                                "26,\"prompt_eval_duration\":325953000,"
                                                "\"eval_count\":290,\"eval_duration\":4709213000}"
                                                "\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, ND, body, QR_OK,
           "START model=\"qwen3:8b\"\n"
           "REASONING \"Der Nutzer \"\n"
           "REASONING \"grüßt 👋.\"\n"
           "CONTENT \"Straße, \"\n"
           "CONTENT \"Größe, Übermaß 🎉\"\n"
           "USAGE p=26 c=290 cached=-1 r=-1 total=5043500667 load=5025959 pns=325953000 "
           "ens=4709213000\n"
           "DONE stop raw=\"stop\"\n");
}

/* Parallel calls on separate lines, all with function.index 0 and no ids; done_reason stop. */
static void test_whole_tool_calls_index0_no_ids(void **state)
{
    static const char body[] = LINE("\"content\":\"\",\"thinking\":\"Wetter und Zeit.\"") LINE(
        "\"content\":\"\",\"tool_calls\":[{\"function\":{\"index\":0,\"name\":\"get_weather\","
        "\"arguments\":{\"city\":\"München\",\"days\":3,\"temperature\":-4.50,\"tags\":[\"ß\"],"
        "\"location\":{\"lat\":48.137,\"lon\":11.575},\"note\":null}}}]")
        LINE(
            "\"content\":\"\",\"tool_calls\":[{\"function\":{\"index\":0,\"name\":\"get_time\","
            "\"arguments\":{\"timezone\":\"Europe/Berlin\",\"format\":\"24h\"}}}]") "{\"model\":"
                                                                                    "\"qwen3:"
                                                                                    "8b\"," CREATE
                                                                                    ",\"message\":{"
                                                                                    "\"role\":"
                                                                                    "\"assistant\","
                                                                                    "\"content\":"
                                                                                    "\"\"},"
                                                                                    "\"done\":true,"
                                                                                    "\"done_"
                                                                                    "reason\":"
                                                                                    "\"stop\","
                                                                                    "\"eval_"
                                                                                    "count\":40}\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    struct qr_answer a;
    char *log = dlog_check_splits(&d, &r, 200, ND, body, QR_OK, &a);
    if (print_logs())
        fprintf(stderr, "%s", log);
    assert_string_equal(
        log, "START model=\"qwen3:8b\"\n"
             "REASONING \"Wetter und Zeit.\"\n"
             "TOOL_BEGIN 0 id=SYNTH name=\"get_weather\"\n"
             "TOOL_ARGS 0 \"{\\\"city\\\":\\\"München\\\",\\\"days\\\":3,\\\"temperature\\\":-4.50,"
             "\\\"tags\\\":[\\\"ß\\\"],\\\"location\\\":{\\\"lat\\\":48.137,\\\"lon\\\":11.575},"
             "\\\"note\\\":null}\"\n"
             "TOOL_END 0\n"
             "TOOL_BEGIN 1 id=SYNTH name=\"get_time\"\n"
             "TOOL_ARGS 1 \"{\\\"timezone\\\":\\\"Europe/Berlin\\\",\\\"format\\\":\\\"24h\\\"}\"\n"
             "TOOL_END 1\n"
             "USAGE p=-1 c=40 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\n"
             "DONE tool_calls raw=\"stop\"\n");
    assert_int_equal(a.n_calls, 2);
    assert_memory_not_equal(a.calls[0].id.ptr, a.calls[1].id.ptr, 29); /* distinct ids */
    assert_int_equal(a.finish, QR_FINISH_TOOL_CALLS);
    qr_answer_cleanup(&a);
    free(log);
}

/* Recent servers: ids kept byte for byte; two calls on one line. */
static void test_tool_calls_with_ids(void **state)
{
    static const char body[] = LINE(
        "\"content\":\"\",\"tool_calls\":[{\"id\":\"call_k3x9q2ab\",\"function\":{\"index\":0,"
        "\"name\":\"a\",\"arguments\":{}}},{\"id\":\"call_p0o9i8u7\",\"function\":{\"index\":1,"
        "\"name\":\"b\",\"arguments\":{\"x\":1e2}}}]") "{\"model\":\"qwen3:8b\"," CREATE
                                                       ",\"message\":{\"role\":\"assistant\","
                                                       "\"content\":\"\"},"
                                                       "\"done\":true,\"done_reason\":\"length\"}"
                                                       "\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, ND, body, QR_OK,
           "START model=\"qwen3:8b\"\n"
           "TOOL_BEGIN 0 id=\"call_k3x9q2ab\" name=\"a\"\n"
           "TOOL_ARGS 0 \"{}\"\n"
           "TOOL_END 0\n"
           "TOOL_BEGIN 1 id=\"call_p0o9i8u7\" name=\"b\"\n"
           "TOOL_ARGS 1 \"{\\\"x\\\":1e2}\"\n"
           "TOOL_END 1\n"
           "DONE length raw=\"length\"\n");
}

static void test_mid_stream_error_line(void **state)
{
    static const char body[] =
        LINE("\"content\":\"Hallo\"") "{\"error\":\"an error was encountered while running the "
                                      "model: unexpected EOF\"}\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, ND, body, QR_OK,
           "START model=\"qwen3:8b\"\n"
           "CONTENT \"Hallo\"\n"
           "ERROR 502 upstream_error \"an error was encountered while running the model: "
           "unexpected EOF\"\n");
    /* An error line as the first line: nothing was started by the upstream. */
    expect(&d, &r, 200, ND, "{\"error\":\"model requires more system memory\"}\n", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"model requires more system memory\"\n");
}

static void test_stream_end_rules(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    /* no done line: never a clean DONE */
    expect(&d, &r, 200, ND, LINE("\"content\":\"Hal\""), QR_OK,
           "START model=\"qwen3:8b\"\nCONTENT \"Hal\"\n"
           "ERROR 502 upstream_error \"upstream ended the stream without finishing\"\n");
    expect(&d, &r, 200, ND, LINE("\"content\":\"Hal\"") "{\"model\":\"qwen3:8b\",\"mess",
           QR_ERR_UPSTREAM,
           "START model=\"qwen3:8b\"\nCONTENT \"Hal\"\n"
           "ERROR 502 upstream_error \"upstream connection failed before finishing "
           "(upstream_error)\"\n");
    expect(&d, &r, 200, ND, LINE("\"content\":\"Hal\""), QR_ERR_CANCELLED,
           "START model=\"qwen3:8b\"\nCONTENT \"Hal\"\nDONE cancelled raw=\"\"\n");
    /* a final line without "\n", CRLF line ends, blank lines, lines after done ignored */
    static const char tail[] =
        "\r\n{\"model\":\"m\",\"message\":{\"content\":\"a\"},\"done\":false}\r\n\n"
        "{\"model\":\"m\",\"message\":{\"content\":\"\"},\"done\":true}\n"
        "{\"model\":\"m\",\"message\":{\"content\":\"ignored\"},\"done\":false}";
    expect(&d, &r, 200, ND, tail, QR_OK, "START model=\"m\"\nCONTENT \"a\"\nDONE stop raw=\"\"\n");
    expect(&d, &r, 200, ND, "{\"model\":\"m\",\"message\":{\"content\":\"a\"},\"done\":true}",
           QR_OK, "START model=\"m\"\nCONTENT \"a\"\nDONE stop raw=\"\"\n");
    /* malformed line */
    expect(&d, &r, 200, ND, "{\"model\":\"m\",\"message\":{\"content\":\"a\"}\n", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream sent malformed JSON\"\n");
    /* oversized line */
    d.max_event_bytes = 32;
    expect(&d, &r, 200, ND, LINE("\"content\":\"Hal\""), QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream event too large\"\n");
}

/* Generate lines (response / thinking), inline think tags through the splitter. */
static void test_generate_and_think_tags(void **state)
{
    static const char body[] =
        "{\"model\":\"deepseek-r1\"," CREATE ",\"response\":\"<think>\\nHm\",\"done\":false}\n"
        "{\"model\":\"deepseek-r1\"," CREATE ",\"response\":\"m</thi\",\"done\":false}\n"
        "{\"model\":\"deepseek-r1\"," CREATE ",\"response\":\"nk>\\n\\nBlau.\",\"done\":false}\n"
        "{\"model\":\"deepseek-r1\"," CREATE ",\"response\":\"\",\"done\":true,"
        "\"done_reason\":\"stop\",\"context\":[1,2,3],\"prompt_eval_count\":5,\"eval_count\":9}\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    d.think_open = "<think>";
    d.think_close = "</think>";
    chat_req(&r, true);
    r.op = QR_OP_COMPLETION;
    expect(&d, &r, 200, ND, body, QR_OK,
           "START model=\"deepseek-r1\"\n"
           "REASONING \"\\nHm\"\n"
           "REASONING \"m\"\n"
           "CONTENT \"Blau.\"\n"
           "USAGE p=5 c=9 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\n"
           "DONE stop raw=\"stop\"\n");
    static const char thinking[] =
        "{\"model\":\"gpt-oss\",\"response\":\"\",\"thinking\":\"abc\",\"done\":false}\n"
        "{\"model\":\"gpt-oss\",\"response\":\"x\",\"done\":true,\"done_reason\":\"stop\"}\n";
    dialect(&d);
    expect(&d, &r, 200, ND, thinking, QR_OK,
           "START model=\"gpt-oss\"\nREASONING \"abc\"\nCONTENT \"x\"\nDONE stop raw=\"stop\"\n");
}

static void test_whole_bodies(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, false);
    static const char chat[] =
        "{\"model\":\"qwen3:8b\"," CREATE ",\"message\":{\"role\":\"assistant\",\"content\":\"\","
        "\"thinking\":\"t\",\"tool_calls\":[{\"id\":\"call_aaaaaaaa\",\"function\":{\"index\":0,"
        "\"name\":\"f\",\"arguments\":{\"b\":2,\"a\":1}}},{\"function\":{\"index\":0,\"name\":"
        "\"g\","
        "\"arguments\":{}}}]},\"done\":true,\"done_reason\":\"stop\",\"total_duration\":10,"
        "\"prompt_eval_count\":3,\"eval_count\":4}";
    expect(&d, &r, 200, JSON, chat, QR_OK,
           "START model=\"qwen3:8b\"\n"
           "REASONING \"t\"\n"
           "TOOL_BEGIN 0 id=\"call_aaaaaaaa\" name=\"f\"\n"
           "TOOL_ARGS 0 \"{\\\"b\\\":2,\\\"a\\\":1}\"\n"
           "TOOL_END 0\n"
           "TOOL_BEGIN 1 id=SYNTH name=\"g\"\n"
           "TOOL_ARGS 1 \"{}\"\n"
           "TOOL_END 1\n"
           "USAGE p=3 c=4 cached=-1 r=-1 total=10 load=-1 pns=-1 ens=-1\n"
           "DONE tool_calls raw=\"stop\"\n");
    /* the load reply comes as JSON even for a streamed request */
    chat_req(&r, true);
    expect(&d, &r, 200, JSON,
           "{\"model\":\"qwen3:8b\"," CREATE
           ",\"message\":{\"role\":\"assistant\",\"content\":\"\"},"
           "\"done\":true,\"done_reason\":\"load\"}",
           QR_OK, "START model=\"qwen3:8b\"\nDONE stop raw=\"load\"\n");
    /* a streamed request answered without a Content-Type: NDJSON by what was asked */
    expect(&d, &r, 200, "", "{\"model\":\"m\",\"message\":{\"content\":\"a\"},\"done\":true}\n",
           QR_OK, "START model=\"m\"\nCONTENT \"a\"\nDONE stop raw=\"\"\n");
}

static void test_embeddings(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    expect(&d, &r, 200, JSON,
           "{\"model\":\"all-minilm\",\"embeddings\":[[0.010071029,-0.0017594862],[0.5,1]],"
           "\"total_duration\":14143917,\"load_duration\":1019500,\"prompt_eval_count\":8}",
           QR_OK,
           "START model=\"all-minilm\"\nEMBEDDING 0 [0.010071,-0.00175949]\nEMBEDDING 1 [0.5,1]\n"
           "USAGE p=8 c=-1 cached=-1 r=-1 total=14143917 load=1019500 pns=-1 ens=-1\n"
           "DONE stop raw=\"\"\n");
    expect(&d, &r, 200, JSON, "{\"embedding\":[1,2,3]}", QR_OK,
           "START model=\"\"\nEMBEDDING 0 [1,2,3]\nDONE stop raw=\"\"\n");
    expect(&d, &r, 200, JSON, "{\"embeddings\":[[1,\"x\"]]}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream embedding holds a "
           "non-number\"\n");
}

static void test_error_bodies(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 404, JSON,
           "{\"error\":\"model \\\"llama9\\\" not found, try pulling it first\"}", QR_OK,
           "START model=\"\"\nERROR 404 model_not_found \"model \\\"llama9\\\" not found, try "
           "pulling it first\"\n");
    expect(&d, &r, 400, JSON, "{\"error\":\"\\\"gemma3\\\" does not support thinking\"}", QR_OK,
           "START model=\"\"\nERROR 400 upstream_rejected \"\\\"gemma3\\\" does not support "
           "thinking\"\n");
    expect(&d, &r, 503, JSON,
           "{\"error\":\"server busy, please try again.  maximum pending "
           "requests exceeded\"}",
           QR_OK,
           "START model=\"\"\nERROR 503 upstream_unavailable retry \"upstream answered HTTP 503: "
           "server busy, please try again.  maximum pending requests exceeded\"\n");
    expect(&d, &r, 500, JSON, "{\"error\":\"llama runner process has terminated: signal: killed\"}",
           QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 500: llama runner "
           "process has terminated: signal: killed\"\n");
    expect(&d, &r, 499, JSON, "{\"error\":\"request canceled\"}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 499: request "
           "canceled\"\n");
}

/* ---------------------------------------------------------------------------------------- */
/* Encoder                                                                                   */
/* ---------------------------------------------------------------------------------------- */

static void enc_ok(const struct qr_dialect *d, const struct qr_request *r, const char *path,
                   const char *want)
{
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_api_error err = {0};
    const char *p = NULL;
    enum qr_err rc = qr_upstream_encode(d, r, &out, &p, &err);
    if (rc)
        fprintf(stderr, "encode failed: %d %s %s\n", err.status, err.code, err.message);
    assert_int_equal(rc, QR_OK);
    assert_string_equal(p, path);
    if (print_logs() || strcmp(out.ptr, want) != 0)
        fprintf(stderr, "---- got:\n%s\n---- want:\n%s\n", out.ptr, want);
    assert_string_equal(out.ptr, want);
    qr_buf_cleanup(&out);
}

static void enc_fail(const struct qr_dialect *d, const struct qr_request *r, const char *param)
{
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_api_error err = {0};
    const char *p = NULL;
    assert_int_not_equal(qr_upstream_encode(d, r, &out, &p, &err), QR_OK);
    if (print_logs())
        fprintf(stderr, "%d %s %s: %s\n", err.status, err.code, err.param, err.message);
    assert_int_equal(err.status, 422);
    assert_string_equal(err.code, "capability_unsupported");
    assert_string_equal(err.param, param);
    qr_buf_cleanup(&out);
}

/* The CoreUI request (tests/cases/ollama/coreui-chat-request.json) plus history. */
static void test_encode_chat(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    chat_req(&r, false);
    struct qr_part sys = {.kind = QR_PART_TEXT, .text = S("Reference system context")};
    struct qr_part user[3] = {{.kind = QR_PART_TEXT, .text = S("Was ist")},
                              {.kind = QR_PART_TEXT, .text = S("auf dem Bild?")},
                              {.kind = QR_PART_IMAGE, .data = S("iVBORw0KGgo=")}};
    struct qr_tool_call calls[2] = {{.id = S("call_1"),
                                     .name = S("get_weather"),
                                     .arguments = S("{\"city\":\"Köln\",\"t\":-4.50}")},
                                    {.name = S("get_time"), .arguments = S("")}};
    struct qr_part res = {.kind = QR_PART_TEXT, .text = S("21 °C")};
    struct qr_part res2 = {.kind = QR_PART_TEXT, .text = S("12:00")};
    struct qr_message msgs[5] = {
        {.role = QR_ROLE_DEVELOPER, .parts = &sys, .n_parts = 1},
        {.role = QR_ROLE_USER, .parts = user, .n_parts = 3},
        {.role = QR_ROLE_ASSISTANT,
         .reasoning = S("Werkzeuge."),
         .content_null = true,
         .tool_calls = calls,
         .n_tool_calls = 2},
        {.role = QR_ROLE_TOOL, .parts = &res, .n_parts = 1, .tool_call_id = S("call_1")},
        {.role = QR_ROLE_TOOL, .parts = &res2, .n_parts = 1, .tool_name = S("get_time")},
    };
    r.messages = msgs;
    r.n_messages = 5;
    struct qr_tool tools[1] = {
        {.name = S("get_weather"), .parameters = S("{\"type\":\"object\"}"), .strict = true}};
    r.tools = tools;
    r.n_tools = 1;
    r.tool_choice.kind = QR_TOOL_CHOICE_AUTO;
    r.parallel_tool_calls = QR_FALSE;
    r.format.kind = QR_FORMAT_JSON;
    r.think.kind = QR_THINK_ON;
    r.keep_alive.set = true;
    r.keep_alive.raw = S("\"15m\"");
    r.sampling.temperature = (struct qr_opt_f64){true, 1.0};
    r.sampling.top_p = (struct qr_opt_f64){true, 0.95};
    r.sampling.top_k = (struct qr_opt_i64){true, 64};
    r.sampling.repeat_last_n = (struct qr_opt_i64){true, 64};
    r.max_tokens = (struct qr_opt_i64){true, 6500};
    r.context_len = (struct qr_opt_i64){true, 32768};
    d.send_num_ctx = true; /* a model policy forwards num_ctx */
    struct qr_slice stop[2] = {S("a"), S("b")};
    r.stop = stop;
    r.n_stop = 2;
    struct qr_extra opts[2] = {{S("num_gpu"), S("99")}, {S("mirostat"), S("0")}};
    r.extra_options = opts;
    r.n_extra_options = 2;
    struct qr_extra ex[2] = {{S("truncate"), S("false")}, {S("shift"), S("true")}};
    r.extras = ex;
    r.n_extras = 2;
    enc_ok(
        &d, &r, "/api/chat",
        "{\"model\":\"qwen3:8b\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"Reference system context\"},"
        "{\"role\":\"user\",\"content\":\"Was ist\\nauf dem Bild?\",\"images\":[\"iVBORw0KGgo=\"]},"
        "{\"role\":\"assistant\",\"content\":\"\",\"thinking\":\"Werkzeuge.\",\"tool_calls\":["
        "{\"id\":\"call_1\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":"
        "\"Köln\",\"t\":-4.50}}},{\"function\":{\"name\":\"get_time\",\"arguments\":{}}}]},"
        "{\"role\":\"tool\",\"content\":\"21 °C\",\"tool_name\":\"get_weather\",\"tool_call_id\":"
        "\"call_1\"},"
        "{\"role\":\"tool\",\"content\":\"12:00\",\"tool_name\":\"get_time\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":"
        "{\"type\":\"object\"}}}],"
        "\"format\":\"json\",\"think\":true,\"keep_alive\":\"15m\","
        "\"options\":{\"temperature\":1.0,\"top_p\":0.95,\"top_k\":64,\"repeat_last_n\":64,"
        "\"num_predict\":6500,\"num_ctx\":32768,\"stop\":[\"a\",\"b\"],\"num_gpu\":99,"
        "\"mirostat\":0},"
        "\"stream\":false,\"truncate\":false,\"shift\":true}");
}

static void test_encode_openai_client(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    d.upstream_model = "llama3.2:3b";
    struct qr_request r;
    chat_req(&r, true);
    r.protocol = QR_PROTO_OPENAI;
    struct qr_part u = {.kind = QR_PART_TEXT, .text = S("hi")};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &u, .n_parts = 1};
    r.messages = &m;
    r.n_messages = 1;
    struct qr_tool tools[1] = {{.name = S("f")}};
    r.tools = tools;
    r.n_tools = 1;
    r.tool_choice.kind = QR_TOOL_CHOICE_NONE;
    r.format.kind = QR_FORMAT_SCHEMA;
    r.format.schema = S("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}}");
    r.format.name = S("x");
    r.think.kind = QR_THINK_LEVEL;
    r.think.level = S("minimal");
    r.include_usage = true;
    struct qr_extra ex[3] = {{S("user"), S("\"u1\"")},
                             {S("metadata"), S("{\"a\":\"b\"}")},
                             {S("logit_bias"), S("null")}};
    r.extras = ex;
    r.n_extras = 3;
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"llama3.2:3b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"format\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}}},"
           "\"think\":\"low\",\"stream\":true}");
    /* keep_alive computed when no raw text */
    r.keep_alive.set = true;
    r.keep_alive.forever = true;
    r.n_extras = 0;
    r.format.kind = QR_FORMAT_NONE;
    r.think.kind = QR_THINK_OFF;
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"llama3.2:3b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"think\":false,\"keep_alive\":-1,\"stream\":true}");
    r.keep_alive.forever = false;
    r.keep_alive.ms = 90000;
    r.think.kind = QR_THINK_UNSET;
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"llama3.2:3b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"keep_alive\":\"90000ms\",\"stream\":true}");
}

static void test_encode_generate_embed(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    chat_req(&r, true);
    r.op = QR_OP_COMPLETION;
    r.prompt = S("def fib(");
    r.suffix = S("return x");
    r.system = S("sys");
    r.context = S("[1,2,3]");
    struct qr_part img = {.kind = QR_PART_IMAGE, .data = S("AAAA")};
    r.images = &img;
    r.n_images = 1;
    r.sampling.seed = (struct qr_opt_i64){true, 7};
    enc_ok(&d, &r, "/api/generate",
           "{\"model\":\"qwen3:8b\",\"prompt\":\"def fib(\",\"suffix\":\"return x\",\"system\":"
           "\"sys\",\"context\":[1,2,3],\"images\":[\"AAAA\"],\"options\":{\"seed\":7},"
           "\"stream\":true}");
    /* OpenAI /v1/completions: a raw prompt */
    chat_req(&r, false);
    r.protocol = QR_PROTO_OPENAI;
    r.op = QR_OP_COMPLETION;
    r.prompt = S("Es war");
    enc_ok(&d, &r, "/api/generate",
           "{\"model\":\"qwen3:8b\",\"prompt\":\"Es war\",\"raw\":true,\"stream\":false}");
    /* embeddings: a single string stays a string; a list stays a list */
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    struct qr_slice in[2] = {S("a"), S("b")};
    r.inputs = in;
    r.n_inputs = 1;
    r.truncate = QR_FALSE;
    r.dimensions = (struct qr_opt_i64){true, 64};
    r.keep_alive.set = true;
    r.keep_alive.raw = S("0");
    enc_ok(&d, &r, "/api/embed",
           "{\"model\":\"qwen3:8b\",\"input\":\"a\",\"truncate\":false,\"dimensions\":64,"
           "\"keep_alive\":0}");
    r.input_is_list = true;
    r.n_inputs = 2;
    r.truncate = QR_UNSET;
    r.dimensions.set = false;
    r.keep_alive.set = false;
    r.context_len = (struct qr_opt_i64){true, 512};
    /* num_ctx is an admission limit (quirk 13): not sent unless a policy forwards it */
    enc_ok(&d, &r, "/api/embed", "{\"model\":\"qwen3:8b\",\"input\":[\"a\",\"b\"]}");
    d.send_num_ctx = true;
    enc_ok(&d, &r, "/api/embed",
           "{\"model\":\"qwen3:8b\",\"input\":[\"a\",\"b\"],\"options\":{\"num_ctx\":512}}");
}

/* Quirk 13: a client's num_ctx reaches Ollama only when the dialect says a policy forwards it;
 * the other options are unaffected. */
static void test_encode_num_ctx_only_when_forwarded(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    chat_req(&r, false);
    struct qr_part u = {.kind = QR_PART_TEXT, .text = S("hi")};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &u, .n_parts = 1};
    r.messages = &m;
    r.n_messages = 1;
    r.context_len = (struct qr_opt_i64){true, 8192};
    r.sampling.temperature = (struct qr_opt_f64){true, 0.5};
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"qwen3:8b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"options\":{\"temperature\":0.5},\"stream\":false}");
    r.sampling.temperature.set = false;
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"qwen3:8b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"stream\":false}");
    d.send_num_ctx = true;
    enc_ok(&d, &r, "/api/chat",
           "{\"model\":\"qwen3:8b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
           "\"options\":{\"num_ctx\":8192},\"stream\":false}");
}

/* Quirks 7 and 8: the think decision table. Each row: what /api/show said (known, capable,
 * levels), what the client asked, and the think member sent ("" = none) or a 422. */
static void test_think_decision_table(void **state)
{
    static const struct {
        bool known, capable;
        unsigned levels;
        enum qr_think_kind kind;
        const char *level;
        const char *want; /* NULL: 422 capability_unsupported, param think */
    } rows[] = {
        /* the model thinks: unset becomes an explicit true */
        {true, true, 0, QR_THINK_UNSET, NULL, ",\"think\":true"},
        {true, true, 0, QR_THINK_ON, NULL, ",\"think\":true"},
        {true, true, 0, QR_THINK_OFF, NULL, ",\"think\":false"},
        /* levels only where thinking.values lists them, else true */
        {true, true, 0, QR_THINK_LEVEL, "high", ",\"think\":true"},
        {true, true, QR_THINK_LEVEL_LOW | QR_THINK_LEVEL_MEDIUM | QR_THINK_LEVEL_HIGH,
         QR_THINK_LEVEL, "high", ",\"think\":\"high\""},
        {true, true, QR_THINK_LEVEL_LOW | QR_THINK_LEVEL_MEDIUM | QR_THINK_LEVEL_HIGH,
         QR_THINK_LEVEL, "minimal", ",\"think\":\"low\""},
        {true, true, QR_THINK_LEVEL_LOW | QR_THINK_LEVEL_MEDIUM | QR_THINK_LEVEL_HIGH,
         QR_THINK_LEVEL, "xhigh", ",\"think\":\"high\""},
        {true, true, QR_THINK_LEVEL_LOW, QR_THINK_LEVEL, "medium", ",\"think\":true"},
        {true, true, QR_THINK_LEVEL_LOW, QR_THINK_LEVEL, "banana", ",\"think\":true"},
        /* the model does not think: unset becomes false, asking for it is refused */
        {true, false, 0, QR_THINK_UNSET, NULL, ",\"think\":false"},
        {true, false, 0, QR_THINK_OFF, NULL, ",\"think\":false"},
        {true, false, 0, QR_THINK_ON, NULL, NULL},
        {true, false, QR_THINK_LEVEL_HIGH, QR_THINK_LEVEL, "high", NULL},
        /* nothing known (/api/show failed): as sent, unset left to Ollama's own default */
        {false, false, 0, QR_THINK_UNSET, NULL, ""},
        {false, false, 0, QR_THINK_ON, NULL, ",\"think\":true"},
        {false, false, 0, QR_THINK_OFF, NULL, ",\"think\":false"},
        {false, false, 0, QR_THINK_LEVEL, "max", ",\"think\":\"high\""},
        {false, false, 0, QR_THINK_LEVEL, "medium", ",\"think\":\"medium\""},
    };
    struct qr_part u = {.kind = QR_PART_TEXT, .text = S("hi")};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &u, .n_parts = 1};
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct qr_dialect d;
        dialect(&d);
        d.think_known = rows[i].known;
        d.think_capable = rows[i].capable;
        d.think_levels = rows[i].levels;
        struct qr_request r;
        chat_req(&r, true);
        r.messages = &m;
        r.n_messages = 1;
        r.think.kind = rows[i].kind;
        if (rows[i].level)
            r.think.level = (struct qr_slice){rows[i].level, strlen(rows[i].level)};
        if (!rows[i].want) {
            struct qr_buf out;
            qr_buf_init(&out, 0);
            struct qr_api_error err = {0};
            const char *p = NULL;
            assert_int_equal(qr_upstream_encode(&d, &r, &out, &p, &err), QR_ERR_INVALID);
            assert_int_equal(err.status, 422);
            assert_string_equal(err.code, "capability_unsupported");
            assert_string_equal(err.param, "think");
            assert_non_null(strstr(err.message, "'qwen3:8b' does not support thinking"));
            qr_buf_cleanup(&out);
            continue;
        }
        char want[256];
        snprintf(want, sizeof(want),
                 "{\"model\":\"qwen3:8b\",\"messages\":[{\"role\":\"user\",\"content\":"
                 "\"hi\"}]%s,\"stream\":true}",
                 rows[i].want);
        enc_ok(&d, &r, "/api/chat", want);
    }
    /* generate carries think too; embed never does */
    struct qr_dialect d;
    dialect(&d);
    d.think_known = true;
    d.think_capable = true;
    struct qr_request r;
    chat_req(&r, false);
    r.op = QR_OP_COMPLETION;
    r.prompt = S("x");
    enc_ok(&d, &r, "/api/generate",
           "{\"model\":\"qwen3:8b\",\"prompt\":\"x\",\"think\":true,\"stream\":false}");
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    struct qr_slice in[1] = {S("a")};
    r.inputs = in;
    r.n_inputs = 1;
    enc_ok(&d, &r, "/api/embed", "{\"model\":\"qwen3:8b\",\"input\":\"a\"}");
}

/* Ollama has no rerank API: a rerank request is refused, never sent anywhere. */
static void test_encode_rerank_refused(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    struct qr_slice docs[1] = {S("a")};
    chat_req(&r, false);
    r.op = QR_OP_RERANK;
    r.protocol = QR_PROTO_OPENAI;
    r.query = S("q");
    r.inputs = docs;
    r.n_inputs = 1;
    enc_fail(&d, &r, "model");
}

static void test_encode_unsupported(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    struct qr_part url = {.kind = QR_PART_IMAGE, .data = S("https://x/y.png"), .is_url = true};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &url, .n_parts = 1};
    chat_req(&r, true);
    r.messages = &m;
    r.n_messages = 1;
    enc_fail(&d, &r, "messages");
    struct qr_part aud = {.kind = QR_PART_AUDIO, .data = S("UklGRg==")};
    m.parts = &aud;
    enc_fail(&d, &r, "messages");
    struct qr_part t = {.kind = QR_PART_TEXT, .text = S("x")};
    m.parts = &t;
    m.name = S("bob");
    enc_fail(&d, &r, "messages");
    chat_req(&r, true);
    r.tool_choice.kind = QR_TOOL_CHOICE_REQUIRED;
    enc_fail(&d, &r, "tool_choice");
    r.tool_choice.kind = QR_TOOL_CHOICE_FUNCTION;
    r.tool_choice.name = S("f");
    enc_fail(&d, &r, "tool_choice");
    chat_req(&r, true);
    r.protocol = QR_PROTO_OPENAI;
    struct qr_extra lb[1] = {{S("logit_bias"), S("{\"1\":2}")}};
    r.extras = lb;
    r.n_extras = 1;
    enc_fail(&d, &r, "logit_bias");
    chat_req(&r, true);
    r.n_choices = (struct qr_opt_i64){true, 3};
    enc_fail(&d, &r, "n");
    chat_req(&r, true);
    r.logprobs = QR_TRUE;
    enc_fail(&d, &r, "logprobs");
    chat_req(&r, true);
    struct qr_extra lp[1] = {{S("logprobs"), S("true")}};
    r.extras = lp;
    r.n_extras = 1;
    enc_fail(&d, &r, "logprobs");
    chat_req(&r, false);
    r.protocol = QR_PROTO_OPENAI;
    r.op = QR_OP_COMPLETION;
    r.echo = true;
    enc_fail(&d, &r, "echo");
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    r.input_tokens = S("[[1,2]]");
    enc_fail(&d, &r, "input");
    /* arguments that are not an object */
    struct qr_tool_call bad = {.id = S("c"), .name = S("f"), .arguments = S("\"oops\"")};
    struct qr_message a = {.role = QR_ROLE_ASSISTANT, .tool_calls = &bad, .n_tool_calls = 1};
    chat_req(&r, false);
    r.messages = &a;
    r.n_messages = 1;
    enc_fail(&d, &r, "messages[0].tool_calls[0].function.arguments");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thinking_content_metrics),
        cmocka_unit_test(test_whole_tool_calls_index0_no_ids),
        cmocka_unit_test(test_tool_calls_with_ids),
        cmocka_unit_test(test_mid_stream_error_line),
        cmocka_unit_test(test_stream_end_rules),
        cmocka_unit_test(test_generate_and_think_tags),
        cmocka_unit_test(test_whole_bodies),
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_error_bodies),
        cmocka_unit_test(test_encode_chat),
        cmocka_unit_test(test_encode_openai_client),
        cmocka_unit_test(test_encode_generate_embed),
        cmocka_unit_test(test_encode_num_ctx_only_when_forwarded),
        cmocka_unit_test(test_think_decision_table),
        cmocka_unit_test(test_encode_unsupported),
        cmocka_unit_test(test_encode_rerank_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
