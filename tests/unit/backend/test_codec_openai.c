/* OpenAI-compatible upstream codec: request bodies as llama-server, vLLM and MLX take them
 * (exact JSON text), every 422 path, and the decoder on realistic transcripts of each server
 * (llama-server reasoning + timings + tool deltas, vLLM reasoning-key eras, error event then
 * [DONE], first tool delta without arguments, arguments with finish_reason in one chunk, MLX
 * empty keys on every delta + whole tool calls + keepalive comments, error bodies of each
 * shape). Every stream is re-fed split at every byte boundary and one byte at a time and must
 * give the identical event log; every log passes the order contract (qr_answer_add). */
#include "decode_log.h"

#include "backend/codec.h"
#include "backend/openai/profile.h"

#define S(x) ((struct qr_slice){(x), sizeof(x) - 1})
#define SSE  "text/event-stream"
#define JSON "application/json"

static bool print_logs(void)
{
    return getenv("QR_PRINT_LOGS") != NULL;
}

static void dialect(struct qr_dialect *d)
{
    qr_dialect_default(d, QR_UP_OPENAI);
}

static void chat_req(struct qr_request *r, bool stream)
{
    memset(r, 0, sizeof(*r));
    r->protocol = QR_PROTO_OPENAI;
    r->op = QR_OP_CHAT;
    r->model = S("m");
    r->stream = stream;
}

/* Decode body with all splits; compare with the expected log. */
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
/* Decoder: llama-server                                                                     */
/* ---------------------------------------------------------------------------------------- */

#define LS_HEAD "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":"
#define LS_TAIL                                                                                    \
    "}],\"created\":1764669065,\"id\":\"chatcmpl-Ab9\",\"model\":\"scripted\","                    \
    "\"system_fingerprint\":\"b11669-Debian\",\"object\":\"chat.completion.chunk\"}\n\n"

static void test_llama_reasoning_content_usage_timings(void **state)
{
    static const char body[] = LS_HEAD
        "{\"role\":\"assistant\",\"content\":null}" LS_TAIL LS_HEAD
        "{\"reasoning_content\":\"Der\"}" LS_TAIL LS_HEAD
        "{\"reasoning_content\":\" Nutzer grüßt. Ich antworte kurz: 2+2=4.\\n\"}" LS_TAIL LS_HEAD
        "{\"content\":\"Die Antwort ist 4. \"}" LS_TAIL LS_HEAD
        "{\"content\":\"Schöne Grüße! \\ud83d\\udc4b 🎉\"}" LS_TAIL
        "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],"
        "\"created\":1764669065,\"id\":\"chatcmpl-Ab9\",\"model\":\"scripted\","
        "\"object\":\"chat.completion.chunk\"}\n\n"
        "data: "
        "{\"choices\":[],\"created\":1764669065,\"id\":\"chatcmpl-Ab9\",\"model\":\"scripted\","
        "\"object\":\"chat.completion.chunk\",\"usage\":{\"completion_tokens\":21,"
        "\"prompt_tokens\":30,\"total_tokens\":51,\"prompt_tokens_details\":{\"cached_tokens\":8}},"
        "\"timings\":{\"cache_n\":8,\"prompt_n\":22,\"prompt_ms\":12.5,\"prompt_per_token_ms\":0."
        "568,"
        "\"prompt_per_second\":1760.0,\"predicted_n\":21,\"predicted_ms\":40.25,"
        "\"predicted_per_token_ms\":1.9,\"predicted_per_second\":521.7}}\n\n"
        "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, "text/event-stream; charset=utf-8", body, QR_OK,
           "START model=\"scripted\"\n"
           "META id=\"chatcmpl-Ab9\" slot=-1\n"
           "REASONING \"Der\"\n"
           "REASONING \" Nutzer grüßt. Ich antworte kurz: 2+2=4.\\n\"\n"
           "CONTENT \"Die Antwort ist 4. \"\n"
           "CONTENT \"Schöne Grüße! 👋 🎉\"\n"
           "USAGE p=30 c=21 cached=8 r=-1 total=-1 load=-1 pns=12500000 ens=40250000\n"
           "DONE stop raw=\"stop\"\n");
}

/* Without include_usage llama-server puts timings on the finish chunk: counts come from them. */
static void test_llama_tool_deltas_timings_only(void **state)
{
    static const char body[] =
        LS_HEAD "{\"role\":\"assistant\",\"content\":null}" LS_TAIL LS_HEAD
                "{\"tool_calls\":[{\"index\":0,\"id\":\"Xy7kQ2mN9pL4rT8vW1zB3cD5fG6hJ0aS\","
                "\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\"}}"
                "]}" LS_TAIL LS_HEAD "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":"
                "\"\\\"city\\\": \\\"Mü\"}}]}" LS_TAIL LS_HEAD
                "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"nchen\\\", "
                "\\\"days\\\": 3}\"}}]}" LS_TAIL LS_HEAD
                "{\"tool_calls\":[{\"index\":1,\"id\":\"Qw3eR5tY7uI9oP1aS2dF4gH6jK8lZ0xC\","
                "\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"arguments\":\"{"
                "\\\"timezone\\\"\"}}]}" LS_TAIL LS_HEAD
                "{\"tool_calls\":[{\"index\":1,\"function\":{\"arguments\":\": "
                "\\\"Europe/Berlin\\\"}\"}}]}" LS_TAIL
                "data: {\"choices\":[{\"finish_reason\":\"tool_calls\",\"index\":0,\"delta\":{}}],"
                "\"created\":1764669065,\"id\":\"chatcmpl-Ab9\",\"model\":\"scripted\","
                "\"object\":\"chat.completion.chunk\",\"timings\":{\"cache_n\":0,\"prompt_n\":40,"
                "\"prompt_ms\":3.0,\"predicted_n\":33,\"predicted_ms\":20.0}}\n\n"
                "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    struct qr_answer a;
    char *log = dlog_check_splits(&d, &r, 200, SSE, body, QR_OK, &a);
    if (print_logs())
        fprintf(stderr, "%s", log);
    assert_string_equal(
        log, "START model=\"scripted\"\n"
             "META id=\"chatcmpl-Ab9\" slot=-1\n"
             "TOOL_BEGIN 0 id=\"Xy7kQ2mN9pL4rT8vW1zB3cD5fG6hJ0aS\" name=\"get_weather\"\n"
             "TOOL_ARGS 0 \"{\"\n"
             "TOOL_ARGS 0 \"\\\"city\\\": \\\"Mü\"\n"
             "TOOL_ARGS 0 \"nchen\\\", \\\"days\\\": 3}\"\n"
             "TOOL_BEGIN 1 id=\"Qw3eR5tY7uI9oP1aS2dF4gH6jK8lZ0xC\" name=\"get_time\"\n"
             "TOOL_ARGS 1 \"{\\\"timezone\\\"\"\n"
             "TOOL_ARGS 1 \": \\\"Europe/Berlin\\\"}\"\n"
             "TOOL_END 0\n"
             "TOOL_END 1\n"
             "USAGE p=40 c=33 cached=0 r=-1 total=-1 load=-1 pns=3000000 ens=20000000\n"
             "DONE tool_calls raw=\"tool_calls\"\n");
    assert_int_equal(a.n_calls, 2);
    assert_string_equal(a.calls[0].arguments.ptr, "{\"city\": \"München\", \"days\": 3}");
    assert_string_equal(a.calls[1].arguments.ptr, "{\"timezone\": \"Europe/Berlin\"}");
    assert_int_equal(a.finish, QR_FINISH_TOOL_CALLS);
    qr_answer_cleanup(&a);
    free(log);
}

/* CRLF framing, several data lines in one event, an unknown event name, an id field. */
static void test_sse_framing_variants(void **state)
{
    static const char body[] =
        ": hello\r\n\r\n"
        "id: 1\r\nevent: message\r\n"
        "data: {\"model\":\"m1\",\"choices\":[{\"index\":0,\r\n"
        "data: \"delta\":{\"content\":\"a\\u00df\"}}]}\r\n\r\n"
        "retry: 10\r\rdata:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"b\"},"
        "\"finish_reason\":\"length\"}]}\r\r"
        "data: [DONE]";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"m1\"\n"
           "CONTENT \"aß\"\n"
           "CONTENT \"b\"\n"
           "DONE length raw=\"length\"\n");
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder: vLLM eras                                                                        */
/* ---------------------------------------------------------------------------------------- */

#define VL_HEAD                                                                                    \
    "data: {\"id\":\"chatcmpl-9f\",\"object\":\"chat.completion.chunk\",\"created\":1,"            \
    "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":"
#define VL_TAIL ",\"logprobs\":null,\"finish_reason\":null}]}\n\n"

/* >= 0.16: "reasoning" only; usage chunk with choices [] (key absent on normal chunks). */
static void test_vllm_reasoning_new_era(void **state)
{
    static const char body[] = VL_HEAD
        "{\"role\":\"assistant\",\"content\":\"\"}" VL_TAIL VL_HEAD
        "{\"reasoning\":\"Hmm, \"}" VL_TAIL VL_HEAD "{\"reasoning\":\"Größe.\"}" VL_TAIL VL_HEAD
        "{\"content\":\"Antwort\"}" VL_TAIL
        "data: {\"id\":\"chatcmpl-9f\",\"object\":\"chat.completion.chunk\",\"created\":1,"
        "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},"
        "\"logprobs\":null,\"finish_reason\":\"stop\",\"stop_reason\":null}]}\n\n"
        "data: {\"id\":\"chatcmpl-9f\",\"object\":\"chat.completion.chunk\",\"created\":1,"
        "\"model\":\"Qwen/Qwen3-8B\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,"
        "\"total_tokens\":14,\"completion_tokens\":5}}\n\n"
        "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"Qwen/Qwen3-8B\"\n"
           "META id=\"chatcmpl-9f\" slot=-1\n"
           "REASONING \"Hmm, \"\n"
           "REASONING \"Größe.\"\n"
           "CONTENT \"Antwort\"\n"
           "USAGE p=9 c=5 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\n"
           "DONE stop raw=\"stop\"\n");
}

/* 0.11-0.15: both keys carry the same text -- never doubled. usage: null on chunks (OpenAI). */
static void test_vllm_both_reasoning_keys_usage_null(void **state)
{
    static const char body[] =
        VL_HEAD "{\"reasoning\":\"x\",\"reasoning_content\":\"x\"},\"usage\":null" VL_TAIL VL_HEAD
                "{\"reasoning\":\"\",\"reasoning_content\":\"y\"}" VL_TAIL VL_HEAD
                "{\"content\":\"z\"}" VL_TAIL
                "data: {\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,\"delta\":{},"
                "\"finish_reason\":\"stop\"}],\"usage\":null}\n\n"
                "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"Qwen/Qwen3-8B\"\n"
           "META id=\"chatcmpl-9f\" slot=-1\n"
           "REASONING \"x\"\n"
           "REASONING \"y\"\n"
           "CONTENT \"z\"\n"
           "DONE stop raw=\"stop\"\n");
}

/* Mid-stream failure: an error event, then [DONE] -- one ERROR, nothing after it. */
static void test_vllm_error_event_then_done(void **state)
{
    static const char body[] = VL_HEAD
        "{\"content\":\"partial\"}" VL_TAIL
        "data: {\"error\":{\"message\":\"The decoder prompt (length 9000) is longer than the "
        "maximum model length of 8192.\",\"type\":\"BadRequestError\",\"param\":null,"
        "\"code\":400}}\n\n"
        "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"Qwen/Qwen3-8B\"\n"
           "META id=\"chatcmpl-9f\" slot=-1\n"
           "CONTENT \"partial\"\n"
           "ERROR 502 upstream_error \"The decoder prompt (length 9000) is longer than the "
           "maximum model length of 8192.\"\n");
    /* An "event: error" with a flat payload. */
    static const char body2[] = "event: error\ndata: {\"message\":\"engine dead\"}\n\n"
                                "data: [DONE]\n\n";
    expect(&d, &r, 200, SSE, body2, QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"engine dead\"\n");
}

/* First tool delta has no "arguments"; the last fragment rides with finish_reason. */
static void test_vllm_tool_deltas(void **state)
{
    static const char body[] = VL_HEAD
        "{\"role\":\"assistant\",\"content\":\"\"}" VL_TAIL VL_HEAD
        "{\"tool_calls\":[{\"index\":0,\"id\":\"chatcmpl-tool-5e0c1a\",\"type\":\"function\","
        "\"function\":{\"name\":\"get_weather\"}}]}" VL_TAIL VL_HEAD
        "{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \"}}]}" VL_TAIL
        "data: {\"id\":\"chatcmpl-9f\",\"model\":\"Qwen/Qwen3-8B\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Köln\\\"}\"}}]},"
        "\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"Qwen/Qwen3-8B\"\n"
           "META id=\"chatcmpl-9f\" slot=-1\n"
           "TOOL_BEGIN 0 id=\"chatcmpl-tool-5e0c1a\" name=\"get_weather\"\n"
           "TOOL_ARGS 0 \"{\\\"city\\\": \"\n"
           "TOOL_ARGS 0 \"\\\"Köln\\\"}\"\n"
           "TOOL_END 0\n"
           "DONE tool_calls raw=\"tool_calls\"\n");
}

/* Old vLLM reported "stop" after tool calls (vLLM #14951): normalized to tool_calls. "abort"
 * becomes cancelled with the raw reason kept. */
static void test_vllm_finish_mapping(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    static const char stop_after_tools[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    expect(&d, &r, 200, SSE, stop_after_tools, QR_OK,
           "START model=\"\"\nTOOL_BEGIN 0 id=\"a\" name=\"f\"\nTOOL_ARGS 0 \"{}\"\n"
           "TOOL_END 0\nDONE tool_calls raw=\"stop\"\n");
    static const char abort[] =
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"abort\"}]}"
        "\n\ndata: [DONE]\n\n";
    expect(&d, &r, 200, SSE, abort, QR_OK,
           "START model=\"\"\nCONTENT \"x\"\nDONE cancelled raw=\"abort\"\n");
    static const char odd[] =
        "data: "
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"},\"finish_reason\":\"eos_x\"}]}"
        "\n\ndata: [DONE]\n\n";
    expect(&d, &r, 200, SSE, odd, QR_OK,
           "START model=\"\"\nCONTENT \"x\"\nDONE stop raw=\"eos_x\"\n");
}

/* Quirk 27: vLLM rewrites the finish to "tool_calls" even when max_tokens cut the arguments;
 * arguments that stop mid-JSON make it length (raw reason kept). */
static void test_vllm_tool_calls_cut_is_length(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    static const char body[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"t\","
        "\"function\":{\"name\":\"f\"}}]}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":"
        "{\"arguments\":\"{\\\"city\\\": \\\"Mün\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"
        "data: [DONE]\n\n";
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"\"\nTOOL_BEGIN 0 id=\"t\" name=\"f\"\n"
           "TOOL_ARGS 0 \"{\\\"city\\\": \\\"Mün\"\nTOOL_END 0\n"
           "DONE length raw=\"tool_calls\"\n");
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder: MLX                                                                              */
/* ---------------------------------------------------------------------------------------- */

#define MLX_HEAD                                                                                   \
    "data: "                                                                                       \
    "{\"id\":\"chatcmpl-1b2c\",\"system_fingerprint\":\"0.31.1-0.29.0-macOS-applegpu_g15s\","      \
    "\"object\":\"chat.completion.chunk\",\"model\":\"mlx-community/Qwen3-4B-4bit\","              \
    "\"created\":1764669065,\"choices\":[{\"index\":0,"
#define MLX_DELTA(content, reasoning, calls)                                                       \
    MLX_HEAD "\"finish_reason\":null,\"delta\":{\"role\":\"assistant\",\"content\":\"" content     \
             "\",\"reasoning\":\"" reasoning "\",\"tool_calls\":[" calls "]}}]}\n\n"

static void test_mlx_stream_whole_tool_calls(void **state)
{
    static const char body[] =
        ": keepalive 1/3\n\n"
        ": keepalive 3/3\n\n" MLX_DELTA("", "Ich ", "") MLX_DELTA("", "denke.", "")
            MLX_DELTA("Okay", "", "") MLX_DELTA("", "",
                                                "{\"function\":{\"name\":\"get_weather\","
                                                "\"arguments\":\"{\\\"city\\\": \\\"Wien\\\"}\"},"
                                                "\"type\":\"function\",\"id\":\"0b7c7a8e-4f4e-4d7a-"
                                                "9c1e-2b8f8e6d1a11\",\"index\":0}")
                MLX_DELTA("", "",
                          "{\"function\":{\"name\":\"get_time\",\"arguments\":\"{}\"},"
                          "\"type\":\"function\",\"id\":\"5d1f9c3a-0e7b-4b8e-8d2f-9a6c4e1b7f22\","
                          "\"index\":1}") MLX_HEAD
        "\"finish_reason\":\"tool_calls\",\"delta\":{\"role\":\"assistant\",\"content\":\"\","
        "\"reasoning\":\"\",\"tool_calls\":[]}}]}\n\n"
        "data: "
        "{\"id\":\"chatcmpl-1b2c\",\"object\":\"chat.completion\",\"model\":\"mlx-community/"
        "Qwen3-4B-4bit\","
        "\"created\":1764669065,\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_"
        "tokens\":20,"
        "\"total_tokens\":70,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n"
        "data: [DONE]\n\n";
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    d.reasoning_field = "reasoning";
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"mlx-community/Qwen3-4B-4bit\"\n"
           "META id=\"chatcmpl-1b2c\" slot=-1\n"
           "REASONING \"Ich \"\n"
           "REASONING \"denke.\"\n"
           "CONTENT \"Okay\"\n"
           "TOOL_BEGIN 0 id=\"0b7c7a8e-4f4e-4d7a-9c1e-2b8f8e6d1a11\" name=\"get_weather\"\n"
           "TOOL_ARGS 0 \"{\\\"city\\\": \\\"Wien\\\"}\"\n"
           "TOOL_BEGIN 1 id=\"5d1f9c3a-0e7b-4b8e-8d2f-9a6c4e1b7f22\" name=\"get_time\"\n"
           "TOOL_ARGS 1 \"{}\"\n"
           "TOOL_END 0\n"
           "TOOL_END 1\n"
           "USAGE p=50 c=20 cached=0 r=-1 total=-1 load=-1 pns=-1 ens=-1\n"
           "DONE tool_calls raw=\"tool_calls\"\n");
}

/* Quirk 39: no [DONE] after a finish_reason is still complete; a stream without either is not;
 * [DONE] after output but without a finish_reason is a stop. */
static void test_mlx_stream_end_rules(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    static const char no_done[] = MLX_DELTA("Hallo", "", "") MLX_HEAD
        "\"finish_reason\":\"stop\",\"delta\":{\"role\":\"assistant\",\"content\":\"\","
        "\"reasoning\":\"\",\"tool_calls\":[]}}]}\n\n";
    expect(&d, &r, 200, SSE, no_done, QR_OK,
           "START model=\"mlx-community/Qwen3-4B-4bit\"\nMETA id=\"chatcmpl-1b2c\" slot=-1\n"
           "CONTENT \"Hallo\"\nDONE stop raw=\"stop\"\n");
    static const char cut[] = MLX_DELTA("Hallo", "", "");
    expect(&d, &r, 200, SSE, cut, QR_OK,
           "START model=\"mlx-community/Qwen3-4B-4bit\"\nMETA id=\"chatcmpl-1b2c\" slot=-1\n"
           "CONTENT \"Hallo\"\n"
           "ERROR 502 upstream_error \"upstream ended the stream without finishing\"\n");
    static const char done_only[] = MLX_DELTA("Hallo", "", "") "data: [DONE]\n\n";
    expect(&d, &r, 200, SSE, done_only, QR_OK,
           "START model=\"mlx-community/Qwen3-4B-4bit\"\nMETA id=\"chatcmpl-1b2c\" slot=-1\n"
           "CONTENT \"Hallo\"\nDONE stop raw=\"\"\n");
    static const char empty_done[] = ": keepalive 1/1\n\ndata: [DONE]\n\n";
    expect(&d, &r, 200, SSE, empty_done, QR_OK,
           "START model=\"\"\n"
           "ERROR 502 upstream_error \"upstream ended the stream without an answer\"\n");
    expect(&d, &r, 200, SSE, "", QR_OK,
           "START model=\"\"\n"
           "ERROR 502 upstream_error \"upstream ended the stream without finishing\"\n");
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder: transport endings                                                                */
/* ---------------------------------------------------------------------------------------- */

static void test_transport_endings(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    static const char part[] = VL_HEAD "{\"content\":\"ab\"}" VL_TAIL VL_HEAD "{\"content\":\"c";
    expect(&d, &r, 200, SSE, part, QR_ERR_UPSTREAM,
           "START model=\"Qwen/Qwen3-8B\"\nMETA id=\"chatcmpl-9f\" slot=-1\nCONTENT \"ab\"\n"
           "ERROR 502 upstream_error \"upstream connection failed before finishing "
           "(upstream_error)\"\n");
    expect(&d, &r, 200, SSE, part, QR_ERR_UPSTREAM_TIMEOUT,
           "START model=\"Qwen/Qwen3-8B\"\nMETA id=\"chatcmpl-9f\" slot=-1\nCONTENT \"ab\"\n"
           "ERROR 504 upstream_timeout \"upstream timed out before finishing "
           "(upstream_timeout)\"\n");
    expect(&d, &r, 200, SSE, "", QR_ERR_UPSTREAM_TIMEOUT,
           "START model=\"\"\nERROR 504 upstream_timeout retry \"upstream timed out before "
           "finishing (upstream_timeout)\"\n");
    expect(&d, &r, 200, SSE, part, QR_ERR_CANCELLED,
           "START model=\"Qwen/Qwen3-8B\"\nMETA id=\"chatcmpl-9f\" slot=-1\nCONTENT \"ab\"\n"
           "DONE cancelled raw=\"\"\n");
    /* A cut after the finish chunk only lost the usage chunk / [DONE]: the answer is whole. */
    static const char after_finish[] =
        VL_HEAD "{\"content\":\"ab\"}" VL_TAIL
                "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
                "data: {\"choices\":[],\"usage\":{\"prompt_tok";
    expect(&d, &r, 200, SSE, after_finish, QR_ERR_UPSTREAM,
           "START model=\"Qwen/Qwen3-8B\"\nMETA id=\"chatcmpl-9f\" slot=-1\nCONTENT \"ab\"\n"
           "DONE stop raw=\"stop\"\n");
    /* Tool calls open at a cut: ERROR, no TOOL_END, no DONE. */
    static const char tool_cut[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\","
        "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":\"}}]}}]}\n\n";
    expect(&d, &r, 200, SSE, tool_cut, QR_ERR_UPSTREAM,
           "START model=\"\"\nTOOL_BEGIN 0 id=\"a\" name=\"f\"\nTOOL_ARGS 0 \"{\\\"x\\\":\"\n"
           "ERROR 502 upstream_error \"upstream connection failed before finishing "
           "(upstream_error)\"\n");
}

static void test_malformed_and_oversized(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    expect(&d, &r, 200, SSE, "data: {\"choices\":[{\"index\":0,\n\ndata: [DONE]\n\n", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream sent malformed JSON\"\n");
    expect(&d, &r, 200, SSE, "data: [1,2]\n\n", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream sent a chunk that is not a "
           "JSON object\"\n");
    d.max_event_bytes = 64;
    static const char big[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"0123456789012345678901234567890"
        "123456789\"}}]}\n\n";
    expect(&d, &r, 200, SSE, big, QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream event too large\"\n");
    /* Many short data lines that add up past the cap. */
    static const char many[] = "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n"
                               "data: 0123456789\ndata: 0123456789\ndata: 0123456789\n\n";
    expect(&d, &r, 200, SSE, many, QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream event too large\"\n");
}

/* Regression: a partial line held across chunks was completed up to the next "\n" only, so
 * many short "\r"-terminated SSE lines after a split passed the event cap. */
static void test_cr_lines_after_split_stay_under_cap(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    d.max_event_bytes = 80;
    chat_req(&r, true);
    static const char body[] =
        ": keepalive 1/9\r: keepalive 2/9\r: keepalive 3/9\r: keepalive 4/9\r"
        ": keepalive 5/9\r: keepalive 6/9\r\r"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\r\r"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\r"
        ": x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r: x\r";
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"\"\nCONTENT \"a\"\nDONE stop raw=\"stop\"\n");
    /* The finish line (66 bytes) is too long for 64: every split reports it after the same
     * events (a blank line held as a pending "\r" is dispatched before the next line is read). */
    d.max_event_bytes = 64;
    expect(
        &d, &r, 200, SSE, body, QR_OK,
        "START model=\"\"\nCONTENT \"a\"\nERROR 502 upstream_error \"upstream event too large\"\n");
}

/* Inline think tags split across deltas go through the splitter. */
static void test_think_tags_in_content(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    d.think_open = "<think>";
    d.think_close = "</think>";
    chat_req(&r, true);
    static const char body[] =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"<thi\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"nk>Überlegung</th\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ink>\\n\\nAntwort <\"}}]}\n\n"
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"
        "data: [DONE]\n\n";
    expect(&d, &r, 200, SSE, body, QR_OK,
           "START model=\"\"\nREASONING \"Überlegung\"\nCONTENT \"Antwort \"\nCONTENT \"<\"\n"
           "DONE stop raw=\"stop\"\n");
}

/* ---------------------------------------------------------------------------------------- */
/* Decoder: whole bodies and error bodies                                                    */
/* ---------------------------------------------------------------------------------------- */

static void test_whole_bodies(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, false);
    static const char llama[] =
        "{\"choices\":[{\"finish_reason\":\"tool_calls\",\"index\":0,\"message\":{\"role\":"
        "\"assistant\",\"content\":\"\",\"reasoning_content\":\"Ich brauche das Wetter.\","
        "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
        "\"arguments\":\"{\\\"city\\\": \\\"München\\\", \\\"temperature\\\": -4.50}\"},"
        "\"id\":\"AbC123\"}]}}],\"created\":1,\"model\":\"scripted\",\"system_fingerprint\":"
        "\"b11669-Debian\",\"object\":\"chat.completion\",\"usage\":{\"completion_tokens\":40,"
        "\"prompt_tokens\":80,\"total_tokens\":120,\"prompt_tokens_details\":{\"cached_tokens\":64}"
        "},"
        "\"id\":\"chatcmpl-Zz\",\"timings\":{\"cache_n\":64,\"prompt_n\":16,\"prompt_ms\":1.5,"
        "\"predicted_n\":40,\"predicted_ms\":30.0}}";
    expect(&d, &r, 200, "application/json; charset=utf-8", llama, QR_OK,
           "START model=\"scripted\"\n"
           "META id=\"chatcmpl-Zz\" slot=-1\n"
           "REASONING \"Ich brauche das Wetter.\"\n"
           "TOOL_BEGIN 0 id=\"AbC123\" name=\"get_weather\"\n"
           "TOOL_ARGS 0 \"{\\\"city\\\": \\\"München\\\", \\\"temperature\\\": -4.50}\"\n"
           "TOOL_END 0\n"
           "USAGE p=80 c=40 cached=64 r=-1 total=-1 load=-1 pns=1500000 ens=30000000\n"
           "DONE tool_calls raw=\"tool_calls\"\n");
    /* MLX non-streamed: reasoning key, tool call without index, bare uuid id; vLLM's
     * object-typed arguments (non-standard) are serialized with key order kept. */
    static const char mlx[] =
        "{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion\",\"model\":\"default_model\","
        "\"created\":1,\"choices\":[{\"index\":0,\"finish_reason\":\"tool_calls\",\"message\":"
        "{\"role\":\"assistant\",\"content\":\"\",\"reasoning\":\"\",\"tool_calls\":["
        "{\"function\":{\"name\":\"a\",\"arguments\":\"{\\\"z\\\":1,\\\"a\\\":2}\"},\"type\":"
        "\"function\",\"id\":\"9b2e6a1c-2c3d-4e5f-8a9b-0c1d2e3f4a5b\"},"
        "{\"function\":{\"name\":\"b\",\"arguments\":{\"z\":1.50,\"a\":[true,null]}},\"type\":"
        "\"function\"}]}}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,"
        "\"total_tokens\":7}}";
    expect(&d, &r, 200, JSON, mlx, QR_OK,
           "START model=\"default_model\"\n"
           "META id=\"chatcmpl-1\" slot=-1\n"
           "TOOL_BEGIN 0 id=\"9b2e6a1c-2c3d-4e5f-8a9b-0c1d2e3f4a5b\" name=\"a\"\n"
           "TOOL_ARGS 0 \"{\\\"z\\\":1,\\\"a\\\":2}\"\n"
           "TOOL_END 0\n"
           "TOOL_BEGIN 1 id=SYNTH name=\"b\"\n"
           "TOOL_ARGS 1 \"{\\\"z\\\":1.50,\\\"a\\\":[true,null]}\"\n"
           "TOOL_END 1\n"
           "USAGE p=3 c=4 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\n"
           "DONE tool_calls raw=\"tool_calls\"\n");
    /* Text completion; native slot id. */
    static const char cmpl[] =
        "{\"id\":\"cmpl-7\",\"object\":\"text_completion\",\"model\":\"m\",\"id_slot\":3,"
        "\"choices\":[{\"index\":0,\"text\":\" world\",\"finish_reason\":\"length\"}]}";
    expect(&d, &r, 200, JSON, cmpl, QR_OK,
           "START model=\"m\"\nMETA id=\"cmpl-7\" slot=3\nCONTENT \" world\"\n"
           "DONE length raw=\"length\"\n");
    /* A 200 body that is an error (ollama-js does not notice these; we do). */
    expect(&d, &r, 200, JSON, "{\"error\":{\"message\":\"boom\"}}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"boom\"\n");
    expect(&d, &r, 200, JSON, "{\"object\":\"chat.completion\"}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answer has no choices\"\n");
    expect(&d, &r, 200, JSON, "", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered with an empty "
           "body\"\n");
    expect(&d, &r, 200, JSON, "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}}]}",
           QR_ERR_UPSTREAM,
           "START model=\"\"\nERROR 502 upstream_error retry \"upstream connection failed "
           "before finishing (upstream_error)\"\n");
    d.max_body_bytes = 16;
    expect(&d, &r, 200, JSON, "{\"choices\":[{\"index\":0,\"message\":{\"content\":\"x\"}}]}",
           QR_OK, "START model=\"\"\nERROR 502 upstream_error \"upstream body too large\"\n");
}

static void test_embeddings(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    static const char body[] =
        "{\"object\":\"list\",\"data\":[{\"object\":\"embedding\",\"index\":1,\"embedding\":"
        "[0.5,-1.25]},{\"object\":\"embedding\",\"index\":0,\"embedding\":[1e-3,2]}],"
        "\"model\":\"nomic\",\"usage\":{\"prompt_tokens\":7,\"total_tokens\":7}}";
    expect(&d, &r, 200, JSON, body, QR_OK,
           "START model=\"nomic\"\nEMBEDDING 0 [0.001,2]\nEMBEDDING 1 [0.5,-1.25]\n"
           "USAGE p=7 c=-1 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\nDONE stop raw=\"\"\n");
    expect(&d, &r, 200, JSON,
           "{\"data\":[{\"index\":0,\"embedding\":[1]},{\"index\":0,"
           "\"embedding\":[2]}]}",
           QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream embedding index repeated\"\n");
    expect(&d, &r, 200, JSON, "{\"data\":[{\"index\":5,\"embedding\":[1]}]}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream embedding index out of "
           "range\"\n");
    expect(&d, &r, 200, JSON, "{\"data\":[{\"index\":0,\"embedding\":\"AAAA\"}]}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream embedding is not an array\"\n");
}

static void rerank_req(struct qr_request *r, struct qr_slice *docs, size_t n)
{
    chat_req(r, false);
    r->op = QR_OP_RERANK;
    r->query = S("Hauptstadt");
    r->inputs = docs;
    r->n_inputs = n;
}

/* llama-server's rerank answer: events by index in the upstream's order, usage; hostile answers
 * (index out of range, repeated, not an integer, score missing / not a number / infinite, more
 * results than documents, no results, a streamed answer) fail the whole answer. */
static void test_rerank_decode(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    struct qr_slice docs[3] = {S("a"), S("b"), S("c")};
    dialect(&d);
    rerank_req(&r, docs, 3);
    expect(&d, &r, 200, JSON,
           "{\"model\":\"bert-rerank\",\"object\":\"list\",\"usage\":{\"prompt_tokens\":21,"
           "\"total_tokens\":21},\"results\":[{\"index\":2,\"relevance_score\":0.75},"
           "{\"index\":0,\"relevance_score\":-1.5e-3},{\"index\":1,\"relevance_score\":2}]}",
           QR_OK,
           "START model=\"bert-rerank\"\nRERANK 2 0.75\nRERANK 0 -0.0015\nRERANK 1 2\n"
           "USAGE p=21 c=-1 cached=-1 r=-1 total=-1 load=-1 pns=-1 ens=-1\nDONE stop raw=\"\"\n");
    /* the older /rerank spelling "score"; fewer results than documents (top_n) */
    expect(&d, &r, 200, JSON, "{\"results\":[{\"index\":1,\"score\":0.5}]}", QR_OK,
           "START model=\"\"\nRERANK 1 0.5\nDONE stop raw=\"\"\n");
    static const struct {
        const char *body, *why;
    } bad[] = {
        {"{\"results\":[{\"index\":3,\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[{\"index\":-1,\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[{\"index\":\"0\",\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[{\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[{\"index\":1.5,\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[{\"index\":1e300,\"relevance_score\":1}]}", "index out of range"},
        {"{\"results\":[7]}", "index out of range"},
        {"{\"results\":[{\"index\":0,\"relevance_score\":1},{\"index\":0,"
         "\"relevance_score\":2}]}",
         "index repeated"},
        {"{\"results\":[{\"index\":0,\"relevance_score\":\"high\"}]}",
         "score is not a finite number"},
        {"{\"results\":[{\"index\":0}]}", "score is not a finite number"},
        {"{\"results\":[{\"index\":0,\"relevance_score\":1e999}]}", "score is not a finite number"},
        {"{\"results\":[{\"index\":0,\"relevance_score\":null}]}", "score is not a finite number"},
        {"{\"results\":[{\"index\":0,\"relevance_score\":1},{\"index\":1,\"relevance_score\":1},"
         "{\"index\":2,\"relevance_score\":1},{\"index\":0,\"relevance_score\":1}]}",
         "sent more rerank results than documents"},
        {"{\"results\":{\"index\":0}}", "rerank answer has no results array"},
        {"{\"data\":[{\"index\":0,\"embedding\":[1]}]}", "rerank answer has no results array"},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(bad); i++) {
        char *log = dlog_check_splits(&d, &r, 200, JSON, bad[i].body, QR_OK, NULL);
        if (print_logs() || !strstr(log, bad[i].why) || !strstr(log, "ERROR 502 upstream_error"))
            fprintf(stderr, "---- %s:\n%s", bad[i].body, log);
        assert_non_null(strstr(log, "ERROR 502 upstream_error"));
        assert_non_null(strstr(log, bad[i].why));
        assert_null(strstr(log, "RERANK")); /* nothing of a bad answer goes out */
        free(log);
    }
    expect(&d, &r, 200, SSE, "data: {\"results\":[]}\n\n", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream streamed a rerank answer\"\n");
    /* an upstream without /v1/rerank */
    expect(&d, &r, 404, JSON, "{\"error\":{\"message\":\"File Not Found\"}}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 404: File Not "
           "Found\"\n");
}

static void test_error_bodies(void **state)
{
    struct qr_dialect d;
    struct qr_request r;
    dialect(&d);
    chat_req(&r, true);
    /* llama-server nested shape */
    expect(&d, &r, 400, JSON,
           "{\"error\":{\"code\":400,\"message\":\"request (15012 tokens) exceeds the available "
           "context size (2048 tokens), try increasing it\",\"type\":\"exceed_context_size_error\","
           "\"n_prompt_tokens\":15012,\"n_ctx\":2048}}",
           QR_OK,
           "START model=\"\"\nERROR 400 upstream_rejected \"request (15012 tokens) exceeds the "
           "available context size (2048 tokens), try increasing it\"\n");
    /* vLLM < 0.10.1 flat shape, unknown model */
    expect(&d, &r, 404, JSON,
           "{\"object\":\"error\",\"message\":\"The model `qwen` does not exist.\",\"type\":"
           "\"NotFoundError\",\"param\":null,\"code\":404}",
           QR_OK,
           "START model=\"\"\nERROR 404 model_not_found \"The model `qwen` does not exist.\"\n");
    /* Ollama string shape */
    expect(&d, &r, 404, JSON, "{\"error\":\"model 'llama9' not found\"}", QR_OK,
           "START model=\"\"\nERROR 404 model_not_found \"model 'llama9' not found\"\n");
    /* MLX: 404 for anything */
    expect(&d, &r, 404, JSON, "{\"error\":\"Only 'text' content type is supported.\"}", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 404: Only 'text' "
           "content type is supported.\"\n");
    /* MLX plain text */
    expect(&d, &r, 404, "application/json", "Not Found", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 404: Not "
           "Found\"\n");
    expect(
        &d, &r, 503, JSON,
        "{\"error\":{\"message\":\"Loading model\",\"type\":\"unavailable_error\",\"code\":503}}",
        QR_OK,
        "START model=\"\"\nERROR 503 upstream_unavailable retry \"upstream answered HTTP 503: "
        "Loading model\"\n");
    expect(&d, &r, 429, "text/plain", "slow down\n", QR_OK,
           "START model=\"\"\nERROR 503 upstream_unavailable retry \"upstream answered HTTP 429: "
           "slow down\"\n");
    expect(&d, &r, 500, "text/html", "", QR_OK,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 500\"\n");
    expect(&d, &r, 422, JSON,
           "{\"detail\":[{\"loc\":[\"body\",\"messages\"],\"msg\":\"Field required\",\"type\":"
           "\"missing\"}]}",
           QR_OK, "START model=\"\"\nERROR 400 upstream_rejected \"Field required\"\n");
    /* A cut error body still gives one mapped ERROR; control bytes are blanked. */
    expect(&d, &r, 500, "text/plain", "bad\tthing\x01", QR_ERR_UPSTREAM,
           "START model=\"\"\nERROR 502 upstream_error \"upstream answered HTTP 500: bad thing "
           "\"\n");
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

static void enc_fail(const struct qr_dialect *d, const struct qr_request *r, int status,
                     const char *code, const char *param)
{
    struct qr_buf out;
    qr_buf_init(&out, 0);
    struct qr_api_error err = {0};
    const char *p = NULL;
    assert_int_not_equal(qr_upstream_encode(d, r, &out, &p, &err), QR_OK);
    if (print_logs())
        fprintf(stderr, "%d %s %s: %s\n", err.status, err.code, err.param, err.message);
    assert_int_equal(err.status, status);
    assert_string_equal(err.code, code);
    assert_string_equal(err.param, param);
    qr_buf_cleanup(&out);
}

static void test_encode_chat_full(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    d.upstream_model = "qwen3-8b";
    struct qr_request r;
    chat_req(&r, true);
    r.protocol = QR_PROTO_OLLAMA; /* ids missing, tool results named: an Ollama client */
    struct qr_part sys = {.kind = QR_PART_TEXT, .text = S("Sei kurz.")};
    struct qr_part dev = {.kind = QR_PART_TEXT, .text = S("Nur Deutsch.")};
    struct qr_part user[2] = {{.kind = QR_PART_TEXT, .text = S("Wetter in Köln?")},
                              {.kind = QR_PART_IMAGE, .data = S("iVBORw0KGgoAAAA")}};
    struct qr_tool_call calls[2] = {
        {.name = S("get_weather"), .arguments = S("{\"city\":\"Köln\",\"days\":3}")},
        {.id = S("call_given"), .name = S("get_time"), .arguments = S("{}")}};
    struct qr_part res1 = {.kind = QR_PART_TEXT, .text = S("21 °C")};
    struct qr_part res2 = {.kind = QR_PART_TEXT, .text = S("12:00")};
    struct qr_message msgs[6] = {
        {.role = QR_ROLE_SYSTEM, .parts = &sys, .n_parts = 1},
        {.role = QR_ROLE_DEVELOPER, .parts = &dev, .n_parts = 1},
        {.role = QR_ROLE_USER, .parts = user, .n_parts = 2},
        {.role = QR_ROLE_ASSISTANT,
         .reasoning = S("Ich brauche Werkzeuge."),
         .tool_calls = calls,
         .n_tool_calls = 2},
        {.role = QR_ROLE_TOOL, .parts = &res2, .n_parts = 1, .tool_name = S("get_time")},
        {.role = QR_ROLE_TOOL, .parts = &res1, .n_parts = 1, .tool_name = S("get_weather")},
    };
    r.messages = msgs;
    r.n_messages = 6;
    struct qr_tool tools[1] = {{.name = S("get_weather"),
                                .description = S("Wetter"),
                                .parameters = S("{\"type\":\"object\",\"properties\":{\"city\":"
                                                "{\"type\":\"string\"}}}")}};
    r.tools = tools;
    r.n_tools = 1;
    r.tool_choice.kind = QR_TOOL_CHOICE_AUTO;
    r.parallel_tool_calls = QR_FALSE;
    r.format.kind = QR_FORMAT_SCHEMA;
    r.format.schema = S("{\"type\":\"object\"}");
    r.think.kind = QR_THINK_OFF;
    r.sampling.temperature = (struct qr_opt_f64){true, 0.7};
    r.sampling.top_k = (struct qr_opt_i64){true, 40};
    r.sampling.repeat_penalty = (struct qr_opt_f64){true, 1.1};
    r.sampling.seed = (struct qr_opt_i64){true, 42};
    struct qr_slice stop[1] = {S("</s>")};
    r.stop = stop;
    r.n_stop = 1;
    r.max_tokens = (struct qr_opt_i64){true, 256};
    r.context_len = (struct qr_opt_i64){true, 32768};
    r.keep_alive.set = true;
    r.keep_alive.raw = S("\"15m\"");
    struct qr_extra ex[1] = {{S("truncate"), S("true")}};
    r.extras = ex;
    r.n_extras = 1;
    char synth_w[32], synth_r[32];
    /* the deterministic id: msg 3, call 0, FNV-1a of the name */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *c = "get_weather"; *c; c++)
        h = (h ^ (unsigned char) *c) * 0x100000001b3ULL;
    snprintf(synth_w, sizeof(synth_w), "call_00030000%016llx", (unsigned long long) h);
    snprintf(synth_r, sizeof(synth_r), "%s", synth_w);
    char want[4096];
    snprintf(want, sizeof(want),
             "{\"model\":\"qwen3-8b\",\"messages\":["
             "{\"role\":\"system\",\"content\":\"Sei kurz.\"},"
             "{\"role\":\"system\",\"content\":\"Nur Deutsch.\"},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Wetter in Köln?\"},"
             "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,"
             "iVBORw0KGgoAAAA\"}}]},"
             "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"Ich brauche "
             "Werkzeuge.\",\"tool_calls\":[{\"id\":\"%s\",\"type\":\"function\",\"function\":"
             "{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Köln\\\",\\\"days\\\":"
             "3}\"}},{\"id\":\"call_given\",\"type\":\"function\",\"function\":{\"name\":"
             "\"get_time\",\"arguments\":\"{}\"}}]},"
             "{\"role\":\"tool\",\"content\":\"12:00\",\"tool_call_id\":\"call_given\"},"
             "{\"role\":\"tool\",\"content\":\"21 °C\",\"tool_call_id\":\"%s\"}],"
             "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
             "\"description\":\"Wetter\",\"parameters\":{\"type\":\"object\",\"properties\":"
             "{\"city\":{\"type\":\"string\"}}}}}],"
             "\"tool_choice\":\"auto\",\"parallel_tool_calls\":false,"
             "\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":"
             "\"response\",\"schema\":{\"type\":\"object\"},\"strict\":false}},"
             "\"chat_template_kwargs\":{\"enable_thinking\":false},"
             "\"temperature\":0.7,\"top_k\":40,\"repeat_penalty\":1.1,"
             "\"repetition_penalty\":1.1,\"seed\":42,\"stop\":[\"</s>\"],\"max_tokens\":256,"
             "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
             synth_w, synth_r);
    enc_ok(&d, &r, "/v1/chat/completions", want);
}

static void test_encode_openai_client(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    d.reasoning_field = "reasoning";
    struct qr_request r;
    chat_req(&r, false);
    struct qr_part u = {.kind = QR_PART_TEXT, .text = S("hi")};
    struct qr_part img = {
        .kind = QR_PART_IMAGE, .data = S("/9j/4AAQ"), .mime = S("image/jpeg"), .detail = S("low")};
    struct qr_part aud = {.kind = QR_PART_AUDIO, .data = S("UklGRg=="), .mime = S("audio/x-wav")};
    struct qr_part parts[3] = {u, img, aud};
    struct qr_tool_call call = {.id = S("c1"), .name = S("f"), .arguments = S("{\"a\":1}")};
    struct qr_part res = {.kind = QR_PART_TEXT, .text = S("ok")};
    struct qr_message msgs[3] = {
        {.role = QR_ROLE_USER, .parts = parts, .n_parts = 3, .name = S("bob")},
        {.role = QR_ROLE_ASSISTANT,
         .content_null = true,
         .reasoning = S("r"),
         .tool_calls = &call,
         .n_tool_calls = 1},
        {.role = QR_ROLE_TOOL, .parts = &res, .n_parts = 1, .tool_call_id = S("c1")},
    };
    r.messages = msgs;
    r.n_messages = 3;
    r.think.kind = QR_THINK_LEVEL;
    r.think.level = S("high");
    r.tool_choice.kind = QR_TOOL_CHOICE_FUNCTION;
    r.tool_choice.name = S("f");
    r.format.kind = QR_FORMAT_JSON;
    struct qr_extra ex[5] = {{S("chat_template_kwargs"), S("{\"custom\":1}")},
                             {S("top_k"), S("20")},
                             {S("stream"), S("true")},
                             {S("logit_bias"), S("{\"50256\":-100}")},
                             {S("user"), S("null")}};
    r.extras = ex;
    r.n_extras = 5;
    r.sampling.top_k = (struct qr_opt_i64){true, 40};
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\",\"messages\":["
           "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":"
           "\"image_url\",\"image_url\":{\"url\":\"data:image/jpeg;base64,/9j/4AAQ\",\"detail\":"
           "\"low\"}},"
           "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRg==\",\"format\":\"wav\"}}],"
           "\"name\":\"bob\"},"
           "{\"role\":\"assistant\",\"content\":null,\"reasoning\":\"r\",\"tool_calls\":[{\"id\":"
           "\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":"
           "\"{\\\"a\\\":1}\"}}]},"
           "{\"role\":\"tool\",\"content\":\"ok\",\"tool_call_id\":\"c1\"}],"
           "\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"f\"}},"
           "\"response_format\":{\"type\":\"json_object\"},\"reasoning_effort\":\"high\","
           "\"stream\":false,"
           "\"chat_template_kwargs\":{\"custom\":1,\"enable_thinking\":true},\"top_k\":20,"
           "\"logit_bias\":{\"50256\":-100},\"user\":null}");
}

static void test_encode_completion_and_embed(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    d.stream_usage = false;
    struct qr_request r;
    chat_req(&r, true);
    r.op = QR_OP_COMPLETION;
    r.prompt = S("Es war einmal");
    r.echo = true;
    r.max_tokens = (struct qr_opt_i64){true, 8};
    enc_ok(&d, &r, "/v1/completions",
           "{\"model\":\"m\",\"prompt\":\"Es war einmal\",\"echo\":true,\"max_tokens\":8,"
           "\"stream\":true}");
    /* Ollama /api/generate without raw: templated, so a chat turn. */
    chat_req(&r, false);
    r.protocol = QR_PROTO_OLLAMA;
    r.op = QR_OP_COMPLETION;
    r.prompt = S("Warum ist der Himmel blau?");
    r.system = S("Kurz.");
    struct qr_part img = {.kind = QR_PART_IMAGE, .data = S("/9j/4AAQ")};
    r.images = &img;
    r.n_images = 1;
    r.think.kind = QR_THINK_ON;
    enc_ok(
        &d, &r, "/v1/chat/completions",
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"Kurz.\"},{\"role\":"
        "\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Warum ist der Himmel blau?\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/jpeg;base64,/9j/4AAQ\"}}]}],"
        "\"chat_template_kwargs\":{\"enable_thinking\":true},\"stream\":false}");
    r.raw = true;
    r.n_images = 0;
    r.system = S("");
    enc_ok(&d, &r, "/v1/completions",
           "{\"model\":\"m\",\"prompt\":\"Warum ist der Himmel blau?\",\"stream\":false}");
    /* Embeddings: always a list, floats upstream. */
    chat_req(&r, false);
    r.op = QR_OP_EMBED;
    struct qr_slice in[2] = {S("a"), S("b")};
    r.inputs = in;
    r.n_inputs = 2;
    r.dimensions = (struct qr_opt_i64){true, 256};
    r.encoding = QR_EMBED_BASE64;
    enc_ok(&d, &r, "/v1/embeddings",
           "{\"model\":\"m\",\"input\":[\"a\",\"b\"],\"encoding_format\":\"float\","
           "\"dimensions\":256}");
    r.n_inputs = 0;
    r.input_tokens = S("[[1,2,3]]");
    enc_ok(&d, &r, "/v1/embeddings",
           "{\"model\":\"m\",\"input\":[[1,2,3]],\"encoding_format\":\"float\","
           "\"dimensions\":256}");
}

/* /v1/rerank: query, documents, top_n when set; return_documents stays with the Runtime; an
 * OpenAI client's extras pass through as for every other op. */
static void test_encode_rerank(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    struct qr_slice docs[2] = {S("Berlin"), S("Katzen \"und\" Hunde")};
    rerank_req(&r, docs, 2);
    r.return_documents = QR_TRUE;
    enc_ok(&d, &r, "/v1/rerank",
           "{\"model\":\"m\",\"query\":\"Hauptstadt\",\"documents\":[\"Berlin\","
           "\"Katzen \\\"und\\\" Hunde\"]}");
    r.top_n = (struct qr_opt_i64){true, 1};
    struct qr_extra ex[1] = {{S("truncate"), S("true")}};
    r.extras = ex;
    r.n_extras = 1;
    d.upstream_model = "bge-reranker";
    enc_ok(&d, &r, "/v1/rerank",
           "{\"model\":\"bge-reranker\",\"query\":\"Hauptstadt\",\"documents\":[\"Berlin\","
           "\"Katzen \\\"und\\\" Hunde\"],\"top_n\":1,\"truncate\":true}");
    r.protocol = QR_PROTO_OLLAMA;
    r.n_extras = 0;
    enc_fail(&d, &r, 422, "capability_unsupported", "documents");
}

static void test_encode_unsupported(void **state)
{
    struct qr_dialect d;
    dialect(&d);
    struct qr_request r;
    chat_req(&r, true);
    struct qr_extra opt[1] = {{S("num_gpu"), S("99")}};
    r.protocol = QR_PROTO_OLLAMA;
    r.extra_options = opt;
    r.n_extra_options = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "options.num_gpu");
    chat_req(&r, true);
    r.protocol = QR_PROTO_OLLAMA;
    struct qr_extra ex[1] = {{S("_debug_render_only"), S("true")}};
    r.extras = ex;
    r.n_extras = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "_debug_render_only");
    chat_req(&r, true);
    r.n_choices = (struct qr_opt_i64){true, 2};
    enc_fail(&d, &r, 422, "capability_unsupported", "n");
    chat_req(&r, true);
    r.logprobs = QR_TRUE;
    enc_fail(&d, &r, 422, "capability_unsupported", "logprobs");
    chat_req(&r, true);
    struct qr_part aud = {.kind = QR_PART_AUDIO, .data = S("https://a/b.wav"), .is_url = true};
    struct qr_message m = {.role = QR_ROLE_USER, .parts = &aud, .n_parts = 1};
    r.messages = &m;
    r.n_messages = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "messages");
    /* an image by URL would be fetched by the engine (SSRF): refused, never forwarded */
    chat_req(&r, true);
    struct qr_part url_img = {
        .kind = QR_PART_IMAGE, .data = S("http://10.0.0.1/x.png"), .is_url = true};
    struct qr_message um = {.role = QR_ROLE_USER, .parts = &url_img, .n_parts = 1};
    r.messages = &um;
    r.n_messages = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "messages");
    chat_req(&r, true);
    r.protocol = QR_PROTO_OLLAMA;
    r.op = QR_OP_COMPLETION;
    r.template_ = S("{{ .Prompt }}");
    enc_fail(&d, &r, 422, "capability_unsupported", "template");
    r.template_ = S("");
    r.context = S("[1,2]");
    enc_fail(&d, &r, 422, "capability_unsupported", "context");
    /* raw completions cannot carry a system prompt, images or tools */
    r.context = S("");
    r.raw = true;
    r.system = S("sys");
    enc_fail(&d, &r, 422, "capability_unsupported", "system");
    r.system = S("");
    struct qr_part img = {.kind = QR_PART_IMAGE, .data = S("AAAA")};
    r.images = &img;
    r.n_images = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "images");
    r.n_images = 0;
    struct qr_tool tool = {.name = S("f")};
    r.tools = &tool;
    r.n_tools = 1;
    enc_fail(&d, &r, 422, "capability_unsupported", "tools");
    /* an empty Ollama context array is no context */
    r.n_tools = 0;
    r.context = S("[]");
    enc_ok(&d, &r, "/v1/completions",
           "{\"model\":\"m\",\"prompt\":\"\",\"stream\":true,"
           "\"stream_options\":{\"include_usage\":true}}");
    /* Not failures: keep_alive, context_len, stream false without stream_options. */
    chat_req(&r, false);
    r.keep_alive.set = true;
    r.keep_alive.raw = S("0");
    r.context_len = (struct qr_opt_i64){true, 4096};
    enc_ok(&d, &r, "/v1/chat/completions", "{\"model\":\"m\",\"messages\":[],\"stream\":false}");
}

/* Each dialect profile's body for one request with an assistant reasoning turn in history and
 * no sampling: vLLM's era picks the reasoning field (an explicit field wins), MLX gets explicit
 * temperature and max_tokens (quirk 36) unless the client gave them, and refuses embeddings
 * and rerank before sending. */
static void profile_dialect(const char *name, const char *version, const char *override,
                            struct qr_oa_profile *p, struct qr_dialect *d)
{
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_openai_profile_load(name, p, &diag), QR_OK);
    dialect(d);
    qr_openai_profile_apply(p, version, override, d);
}

/* clang-format off */
#define HIST_MSGS(field)                                                                           \
    "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","               \
    "\"content\":\"Hallo\",\"" field "\":\"Greet back.\"},{\"role\":\"user\",\"content\":"       \
    "\"more\"}]"

static void test_encode_dialect_profiles(void **state)
{
    struct qr_part hi = {.kind = QR_PART_TEXT, .text = S("hi")};
    struct qr_part hallo = {.kind = QR_PART_TEXT, .text = S("Hallo")};
    struct qr_part more = {.kind = QR_PART_TEXT, .text = S("more")};
    struct qr_message msgs[3] = {
        {.role = QR_ROLE_USER, .parts = &hi, .n_parts = 1},
        {.role = QR_ROLE_ASSISTANT, .parts = &hallo, .n_parts = 1, .reasoning = S("Greet back.")},
        {.role = QR_ROLE_USER, .parts = &more, .n_parts = 1}};
    struct qr_request r;
    chat_req(&r, false);
    r.messages = msgs;
    r.n_messages = 3;
    struct qr_oa_profile p;
    struct qr_dialect d;

    static const struct {
        const char *dialect, *version, *override, *field;
    } eras[] = {
        {"vllm", "0.16.0", NULL, "reasoning"},
        {"vllm", "0.17.1", NULL, "reasoning"},
        {"vllm", "0.15.1", NULL, "reasoning_content"},
        {"vllm", "0.11.0", NULL, "reasoning_content"},
        {"vllm", NULL, NULL, "reasoning"},
        {"vllm", "0.16.0", "reasoning_content", "reasoning_content"},
        {"vllm", "0.13.0", "reasoning", "reasoning"},
        {"llama-server", NULL, NULL, "reasoning_content"},
        {"generic", NULL, NULL, "reasoning_content"},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(eras); i++) {
        profile_dialect(eras[i].dialect, eras[i].version, eras[i].override, &p, &d);
        char want[512];
        snprintf(want, sizeof(want), "{\"model\":\"m\"," HIST_MSGS("%s") ",\"stream\":false}",
                 eras[i].field);
        enc_ok(&d, &r, "/v1/chat/completions", want);
    }

    /* MLX: explicit defaults when the client gave none (reasoning under "reasoning") */
    profile_dialect("mlx-lm", NULL, NULL, &p, &d);
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\"," HIST_MSGS("reasoning") ",\"temperature\":0.8,\"max_tokens\":8192,"
           "\"stream\":false}");
    r.stream = true; /* streamed: stream_options exactly {"include_usage":true} (quirk 39) */
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\"," HIST_MSGS("reasoning") ",\"temperature\":0.8,\"max_tokens\":8192,"
           "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    r.stream = false;
    /* the client's values win, each on its own */
    r.sampling.temperature = (struct qr_opt_f64){.set = true, .v = 0.25};
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\"," HIST_MSGS("reasoning") ",\"temperature\":0.25,\"max_tokens\":8192,"
           "\"stream\":false}");
    r.sampling.temperature.set = false;
    r.max_tokens = (struct qr_opt_i64){.set = true, .v = 64};
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\"," HIST_MSGS("reasoning") ",\"temperature\":0.8,\"max_tokens\":64,"
           "\"stream\":false}");
    r.sampling.temperature = (struct qr_opt_f64){.set = true, .v = 0};
    enc_ok(&d, &r, "/v1/chat/completions",
           "{\"model\":\"m\"," HIST_MSGS("reasoning") ",\"temperature\":0.0,\"max_tokens\":64,"
           "\"stream\":false}");
    r.sampling.temperature.set = false;
    r.max_tokens.set = false;
    /* a completion gets them too */
    struct qr_request c;
    memset(&c, 0, sizeof(c));
    c.protocol = QR_PROTO_OPENAI;
    c.op = QR_OP_COMPLETION;
    c.model = S("m");
    c.prompt = S("Es war einmal");
    enc_ok(&d, &c, "/v1/completions",
           "{\"model\":\"m\",\"prompt\":\"Es war einmal\",\"temperature\":0.8,"
           "\"max_tokens\":8192,\"stream\":false}");
    /* no embeddings, no rerank on mlx_lm.server: 422 before anything is sent */
    struct qr_slice in[1] = {S("x")};
    struct qr_request e;
    memset(&e, 0, sizeof(e));
    e.protocol = QR_PROTO_OPENAI;
    e.op = QR_OP_EMBED;
    e.model = S("m");
    e.inputs = in;
    e.n_inputs = 1;
    enc_fail(&d, &e, 422, "capability_unsupported", "");
    e.op = QR_OP_RERANK;
    e.query = S("q");
    enc_fail(&d, &e, 422, "capability_unsupported", "");
    /* vLLM embeds, and adds no defaults */
    profile_dialect("vllm", "0.16.0", NULL, &p, &d);
    e.op = QR_OP_EMBED;
    enc_ok(&d, &e, "/v1/embeddings",
           "{\"model\":\"m\",\"input\":[\"x\"],\"encoding_format\":\"float\"}");
}
/* clang-format on */

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_reasoning_content_usage_timings),
        cmocka_unit_test(test_llama_tool_deltas_timings_only),
        cmocka_unit_test(test_sse_framing_variants),
        cmocka_unit_test(test_vllm_reasoning_new_era),
        cmocka_unit_test(test_vllm_both_reasoning_keys_usage_null),
        cmocka_unit_test(test_vllm_error_event_then_done),
        cmocka_unit_test(test_vllm_tool_deltas),
        cmocka_unit_test(test_vllm_finish_mapping),
        cmocka_unit_test(test_vllm_tool_calls_cut_is_length),
        cmocka_unit_test(test_mlx_stream_whole_tool_calls),
        cmocka_unit_test(test_mlx_stream_end_rules),
        cmocka_unit_test(test_transport_endings),
        cmocka_unit_test(test_malformed_and_oversized),
        cmocka_unit_test(test_cr_lines_after_split_stay_under_cap),
        cmocka_unit_test(test_think_tags_in_content),
        cmocka_unit_test(test_whole_bodies),
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_rerank_decode),
        cmocka_unit_test(test_encode_rerank),
        cmocka_unit_test(test_error_bodies),
        cmocka_unit_test(test_encode_chat_full),
        cmocka_unit_test(test_encode_openai_client),
        cmocka_unit_test(test_encode_completion_and_embed),
        cmocka_unit_test(test_encode_unsupported),
        cmocka_unit_test(test_encode_dialect_profiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
