/* The conformance suite through the real binaries. On the scripted model (qr-gen-scripted) served
 * by the real daemon with backend=llama.cpp, `quantum-runtime conformance --json --report F` exits
 * 0, every case that ran passed, the report follows quantum.runtime/conformance-report/v1alpha1
 * (the same document on stdout and in the file, the Markdown table has one row per case), and the
 * identity, unicode, reasoning, streaming, tools and structured-output cases ran rather than being
 * skipped. The suite can fail: behind a daemon with backend=openai whose upstream (qr-replay on a
 * transcript written here) leaks <think> tags into content, the reasoning-off and streaming cases
 * fail with the leak as their reason, cases whose capabilities the model does not claim are
 * skipped with that reason, and the exit status is 1. Usage errors exit 2. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "conformance/cases.h"
#include "conformance/suite.h"
#include "harness.h"
#include "conformance/record.h"
#include "core/arena.h"
#include "store/store.h"

static char dir[128], models[200];
static struct qr_child daemon_;

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-conf-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    if (mkdir(models, 0700) != 0)
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "qr-gen-scripted failed: %s\n", out ? out : "");
    free(out);
    if (rc != 0)
        return -1;
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    qr_t_daemon_start_args(&daemon_, 0, NULL, args);
    return 0;
}

static int teardown(void **st)
{
    (void) st;
    if (daemon_.pid > 0)
        qr_t_stop(&daemon_, SIGTERM, 10000);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Run the suite; *out is its stdout+stderr (malloc'd). */
static int run_suite(const char *model, uint16_t port, const char *report, const char *md,
                     char **out)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) port);
    char *argv[] = {QR_TEST_DAEMON, "conformance",   "--model",    (char *) model, "--url",  url,
                    "--report",     (char *) report, "--markdown", (char *) md,    "--json", NULL};
    return qr_t_run(argv, NULL, 90000, out);
}

static yyjson_doc *read_report(const char *path)
{
    size_t len = 0;
    char *text = qr_t_read_file(path, &len);
    assert_non_null(text);
    yyjson_doc *d = yyjson_read(text, len, 0);
    free(text);
    assert_non_null(d);
    return d;
}

/* The report's shape; returns the case object with this id (NULL when absent). */
static yyjson_val *find_case(yyjson_val *root, const char *id)
{
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(yyjson_obj_get(root, "cases"), i, max, c)
    {
        if (yyjson_equals_str(yyjson_obj_get(c, "id"), id))
            return c;
    }
    return NULL;
}

static void check_shape(yyjson_val *root, const char *model, uint16_t port)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) port);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "schema_version")),
                        "quantum.runtime/conformance-report/v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), model);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "url")), url);
    yyjson_val *ev = yyjson_obj_get(root, "engine_version");
    assert_true(yyjson_is_str(ev) || yyjson_is_null(ev));
    yyjson_val *hc = yyjson_obj_get(root, "host_class");
    assert_true(yyjson_is_str(hc) || yyjson_is_null(hc));
    const char *started = yyjson_get_str(yyjson_obj_get(root, "started_at"));
    assert_non_null(started);
    assert_int_equal(strlen(started), 20); /* 2026-01-01T00:00:00Z */
    assert_int_equal(started[19], 'Z');
    assert_true(yyjson_is_uint(yyjson_obj_get(root, "duration_ms")));
    yyjson_val *sum = yyjson_obj_get(root, "summary");
    uint64_t passed = yyjson_get_uint(yyjson_obj_get(sum, "passed"));
    uint64_t failed = yyjson_get_uint(yyjson_obj_get(sum, "failed"));
    uint64_t skipped = yyjson_get_uint(yyjson_obj_get(sum, "skipped"));
    yyjson_val *cases = yyjson_obj_get(root, "cases");
    assert_true(yyjson_arr_size(cases) >= 9);
    assert_int_equal(passed + failed + skipped, yyjson_arr_size(cases));
    uint64_t n[3] = {0};
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(cases, i, max, c)
    {
        assert_non_null(yyjson_get_str(yyjson_obj_get(c, "id")));
        assert_true(yyjson_arr_size(yyjson_obj_get(c, "needs")) >= 1);
        const char *s = yyjson_get_str(yyjson_obj_get(c, "status"));
        assert_non_null(s);
        n[0] += !strcmp(s, "pass");
        n[1] += !strcmp(s, "fail");
        n[2] += !strcmp(s, "skip");
        const char *reason = yyjson_get_str(yyjson_obj_get(c, "reason"));
        assert_non_null(reason);
        if (strcmp(s, "pass")) /* a failure or a skip always says why */
            assert_true(strlen(reason) > 0);
        assert_true(yyjson_is_num(yyjson_obj_get(c, "ms")));
        assert_true(yyjson_get_num(yyjson_obj_get(c, "ms")) >= 0);
    }
    assert_int_equal(n[0], passed);
    assert_int_equal(n[1], failed);
    assert_int_equal(n[2], skipped);
}

static const char *status_of(yyjson_val *root, const char *id)
{
    yyjson_val *c = find_case(root, id);
    if (!c)
        fail_msg("case '%s' is not in the report", id);
    return yyjson_get_str(yyjson_obj_get(c, "status"));
}

static void test_scripted_passes(void **st)
{
    (void) st;
    char report[260], md[260];
    snprintf(report, sizeof report, "%s/report.json", dir);
    snprintf(md, sizeof md, "%s/report.md", dir);
    char *out = NULL;
    int rc = run_suite("scripted-chat", daemon_.port, report, md, &out);
    if (rc != 0)
        fprintf(stderr, "conformance (rc %d): %s\n", rc, out ? out : "");
    assert_int_equal(rc, 0);
    /* stdout (--json) is the same document as the file */
    yyjson_doc *d = read_report(report);
    yyjson_val *root = yyjson_doc_get_root(d);
    yyjson_doc *o = yyjson_read(out, strlen(out), 0);
    assert_non_null(o);
    assert_true(yyjson_equals(yyjson_doc_get_root(o), root));
    yyjson_doc_free(o);
    check_shape(root, "scripted-chat", daemon_.port);
    yyjson_val *sum = yyjson_obj_get(root, "summary");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(sum, "failed")), 0);
    /* ... and the tokenizer, parallel tool calls and cancellation */
    static const char *const MUST_RUN[] = {
        "identity",         "unicode",       "reasoning.off",     "reasoning.on",
        "streaming",        "tools",         "structured_output", "tokenizer.roundtrip",
        "context.at_limit", "tokenizer.bos", "tools.parallel",    "cancel.decode",
        "cancel.prefill"};
    for (size_t i = 0; i < sizeof MUST_RUN / sizeof MUST_RUN[0]; i++) {
        const char *s = status_of(root, MUST_RUN[i]);
        if (strcmp(s, "pass"))
            fail_msg("case '%s' is %s: %s", MUST_RUN[i], s,
                     yyjson_get_str(yyjson_obj_get(find_case(root, MUST_RUN[i]), "reason")));
    }
    /* --url without --allow-destructive: the crash case is skipped with the reason */
    assert_string_equal(status_of(root, "crash.restart"), "skip");
    assert_non_null(strstr(
        yyjson_get_str(yyjson_obj_get(find_case(root, "crash.restart"), "reason")), "destructive"));
    /* the engine that served it, from /v1/backends */
    assert_true(yyjson_is_str(yyjson_obj_get(root, "engine_version")));
    /* the scripted model claims no vision: the image is refused, not answered */
    assert_string_equal(status_of(root, "multimodal.refused"), "pass");
    yyjson_val *tools = find_case(root, "tools");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(yyjson_obj_get(tools, "needs"), 0)),
                        "tools.calling");
    /* the Markdown table: one row per case with its status */
    size_t len = 0;
    char *m = qr_t_read_file(md, &len);
    assert_non_null(m);
    assert_non_null(strstr(m, "| case | needs | status | ms | reason |"));
    assert_non_null(strstr(m, "| tools | tools.calling, tools.streaming | pass |"));
    assert_non_null(strstr(m, "| identity | inference.text | pass |"));
    free(m);
    yyjson_doc_free(d);
    free(out);
}

/* An upstream that leaks <think> tags into content, whole and streamed. */
static const char LEAK[] =
    "[{\"name\":\"models\",\"match\":{\"method\":\"GET\",\"path\":\"/v1/models\"},\"response\":{"
    "\"headers\":{\"Content-Type\":\"application/json\"},\"body\":{\"object\":\"list\",\"data\":"
    "[{\"id\":\"leaky-chat\",\"object\":\"model\",\"created\":1767225600,\"owned_by\":\"test\"}]}"
    "}},\n"
    "{\"name\":\"chat-stream\",\"match\":{\"method\":\"POST\",\"path\":\"/v1/chat/completions\","
    "\"body_contains\":\"\\\"stream\\\":true\"},\"response\":{\"headers\":{\"Content-Type\":"
    "\"text/event-stream\"},\"chunks\":[{\"sse\":{\"id\":\"c1\",\"object\":"
    "\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"leaky-chat\",\"choices\":[{"
    "\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"<think>secret plan</think>\"},"
    "\"finish_reason\":null}]}},{\"sse\":{\"id\":\"c1\",\"object\":\"chat.completion.chunk\","
    "\"created\":1767225600,\"model\":\"leaky-chat\",\"choices\":[{\"index\":0,\"delta\":{"
    "\"content\":\"Hallo!\"},\"finish_reason\":null}]}},{\"sse\":{\"id\":\"c1\",\"object\":"
    "\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"leaky-chat\",\"choices\":[{"
    "\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}},{\"sse\":\"[DONE]\"}]}},\n"
    "{\"name\":\"chat\",\"match\":{\"method\":\"POST\",\"path\":\"/v1/chat/completions\"},"
    "\"response\":{\"headers\":{\"Content-Type\":\"application/json\"},\"body\":{\"id\":\"c2\","
    "\"object\":\"chat.completion\",\"created\":1767225600,\"model\":\"leaky-chat\",\"choices\":"
    "[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":\"<think>secret plan</think>"
    "Hallo!\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":"
    "5,\"total_tokens\":10}}}}]\n";

static void test_leaking_upstream_fails(void **st)
{
    (void) st;
    char tdir[200], tfile[260];
    snprintf(tdir, sizeof tdir, "%s/leak", dir);
    snprintf(tfile, sizeof tfile, "%s/leak.json", tdir);
    assert_int_equal(mkdir(tdir, 0700), 0);
    FILE *f = fopen(tfile, "w");
    assert_non_null(f);
    assert_true(fputs(LEAK, f) >= 0);
    assert_int_equal(fclose(f), 0);
    struct qr_child up, d;
    qr_t_replay_start_dir(&up, tdir);
    char url[96];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", (unsigned) up.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url, NULL};
    qr_t_daemon_start(&d, 0, env);

    char report[260], md[260];
    snprintf(report, sizeof report, "%s/leak-report.json", dir);
    snprintf(md, sizeof md, "%s/leak-report.md", dir);
    char *out = NULL;
    int rc = run_suite("leaky-chat", d.port, report, md, &out);
    assert_int_equal(rc, 1);
    yyjson_doc *doc = read_report(report);
    yyjson_val *root = yyjson_doc_get_root(doc);
    check_shape(root, "leaky-chat", d.port);
    assert_true(yyjson_get_uint(yyjson_obj_get(yyjson_obj_get(root, "summary"), "failed")) >= 2);
    /* the leak is caught whole and streamed, and named in the reason */
    assert_string_equal(status_of(root, "reasoning.off"), "fail");
    const char *why = yyjson_get_str(yyjson_obj_get(find_case(root, "reasoning.off"), "reason"));
    assert_non_null(strstr(why, "<think>"));
    assert_string_equal(status_of(root, "streaming"), "fail");
    /* identity holds: the upstream names the model asked for */
    assert_string_equal(status_of(root, "identity"), "pass");
    /* what the model does not claim is skipped with the reason */
    assert_string_equal(status_of(root, "tools"), "skip");
    const char *skip = yyjson_get_str(yyjson_obj_get(find_case(root, "tools"), "reason"));
    assert_non_null(strstr(skip, "does not claim 'tools.calling'"));
    assert_string_equal(status_of(root, "reasoning.on"), "skip");
    yyjson_doc_free(doc);
    free(out);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&up, SIGTERM, 10000), 0);
}

static void test_usage_errors(void **st)
{
    (void) st;
    char *out = NULL;
    char *no_url[] = {QR_TEST_DAEMON, "conformance", "--model", "x", NULL};
    assert_int_equal(qr_t_run(no_url, NULL, 10000, &out), 2);
    assert_non_null(strstr(out, "--url"));
    free(out);
    char *bad[] = {QR_TEST_DAEMON, "conformance",        "--model", "x",
                   "--url",        "http://127.0.0.1:1", "--bogus", NULL};
    assert_int_equal(qr_t_run(bad, NULL, 10000, &out), 2);
    free(out);
    char *skip[] = {
        QR_TEST_DAEMON, "conformance",        "--model", "x", "--url", "http://127.0.0.1:1",
        "--skip",       "tools,no.such.case", NULL};
    assert_int_equal(qr_t_run(skip, NULL, 10000, &out), 2);
    assert_non_null(strstr(out, "--skip: no case 'no.such.case'"));
    free(out);
    /* a daemon that is not there: no report, exit 1 */
    char *down[] = {QR_TEST_DAEMON, "conformance",        "--model", "x",
                    "--url",        "http://127.0.0.1:1", NULL};
    assert_int_equal(qr_t_run(down, NULL, 10000, &out), 1);
    free(out);
}

/* ---- helper C: /v1/tokenize, /v1/detokenize and the destructive cases ---- */

static yyjson_doc *post_json(uint16_t port, const char *path, const char *body, long *status)
{
    struct qr_t_resp r;
    const char *const hdr[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", port, path, hdr, body, strlen(body), &r);
    *status = r.status;
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    if (!d)
        fail_msg("%s answered %ld with no JSON: %s", path, r.status, r.body);
    qr_t_resp_free(&r);
    return d;
}

/* A 400 invalid_tokenize_request whose message names want. */
static void expect_400(uint16_t port, const char *path, const char *body, const char *want)
{
    long st = 0;
    yyjson_doc *d = post_json(port, path, body, &st);
    yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(d), "error");
    const char *msg = yyjson_get_str(yyjson_obj_get(e, "message"));
    if (st != 400 || !msg || !strstr(msg, want))
        fail_msg("%s %s: %ld '%s', wanted 400 naming '%s'", path, body, st, msg ? msg : "", want);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "invalid_tokenize_request");
    yyjson_doc_free(d);
}

static const char UMLAUTS[] = "Grüß Gott, Straße, GROẞ \xF0\x9F\x98\x80!";

static void test_tokenize_routes(void **st)
{
    (void) st;
    uint16_t port = daemon_.port;
    long code = 0;
    /* content: ids, count, pieces, the special ids the engine names */
    char body[512];
    snprintf(body, sizeof body,
             "{\"model\":\"scripted-chat\",\"content\":\"%s\",\"with_pieces\":true}", UMLAUTS);
    yyjson_doc *d = post_json(port, "/v1/tokenize", body, &code);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_int_equal(code, 200);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), "scripted-chat");
    yyjson_val *toks = yyjson_obj_get(root, "tokens");
    assert_true(yyjson_arr_size(toks) > 0);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(root, "count")), yyjson_arr_size(toks));
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(root, "pieces")), yyjson_arr_size(toks));
    assert_true(yyjson_is_false(yyjson_obj_get(root, "add_special")));
    assert_null(yyjson_obj_get(root, "prompt"));
    /* the scripted vocabulary: <|endoftext|> is BOS, <|im_end|> EOS (SCRIPT.md) */
    assert_true(yyjson_is_int(yyjson_obj_get(root, "bos_token_id")));
    assert_true(yyjson_is_int(yyjson_obj_get(root, "eos_token_id")));
    assert_int_not_equal(yyjson_get_sint(yyjson_obj_get(root, "bos_token_id")),
                         yyjson_get_sint(yyjson_obj_get(root, "eos_token_id")));
    /* detokenize: the same bytes back */
    char *ids = yyjson_val_write(toks, 0, NULL);
    assert_non_null(ids);
    char *dbody = NULL;
    assert_true(asprintf(&dbody, "{\"model\":\"scripted-chat\",\"tokens\":%s}", ids) > 0);
    yyjson_doc *dd = post_json(port, "/v1/detokenize", dbody, &code);
    assert_int_equal(code, 200);
    yyjson_val *content = yyjson_obj_get(yyjson_doc_get_root(dd), "content");
    assert_int_equal(yyjson_get_len(content), strlen(UMLAUTS));
    assert_memory_equal(yyjson_get_str(content), UMLAUTS, strlen(UMLAUTS));
    yyjson_doc_free(dd);
    free(dbody);
    free(ids);
    yyjson_doc_free(d);

    /* messages: the rendered chat prompt, tokenized as a chat request feeds it */
    d = post_json(port, "/v1/tokenize",
                  "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"system\",\"content\":"
                  "\"Sei knapp.\"},{\"role\":\"user\",\"content\":\"Hallo\"}]}",
                  &code);
    root = yyjson_doc_get_root(d);
    assert_int_equal(code, 200);
    const char *prompt = yyjson_get_str(yyjson_obj_get(root, "prompt"));
    assert_non_null(prompt);
    assert_non_null(strstr(prompt, "<|im_start|>system\nSei knapp.<|im_end|>"));
    assert_non_null(strstr(prompt, "<|im_start|>user\nHallo<|im_end|>"));
    assert_true(yyjson_is_true(yyjson_obj_get(root, "add_special")));
    /* <|im_start|> is one CONTROL token: parsed as special, the prompt starts with it, no BOS */
    toks = yyjson_obj_get(root, "tokens");
    int64_t bos = yyjson_get_sint(yyjson_obj_get(root, "bos_token_id"));
    assert_true(yyjson_arr_size(toks) > 10);
    assert_int_not_equal(yyjson_get_sint(yyjson_arr_get(toks, 0)), bos);
    yyjson_doc_free(d);

    /* bad bodies: 400 naming the field */
    expect_400(port, "/v1/tokenize", "{\"content\":\"x\"}", "'model' is required");
    expect_400(port, "/v1/tokenize", "{\"model\":\"scripted-chat\"}",
               "exactly one of 'content' and 'messages'");
    expect_400(port, "/v1/tokenize",
               "{\"model\":\"scripted-chat\",\"content\":\"x\",\"messages\":[{\"role\":\"user\","
               "\"content\":\"x\"}]}",
               "exactly one of 'content' and 'messages'");
    expect_400(port, "/v1/tokenize", "{\"model\":\"scripted-chat\",\"content\":7}",
               "'content' must be a string");
    expect_400(port, "/v1/tokenize", "{\"model\":\"scripted-chat\",\"messages\":[{\"c\":1}]}",
               "'messages[0]'");
    expect_400(port, "/v1/tokenize",
               "{\"model\":\"scripted-chat\",\"content\":\"x\",\"add_special\":\"yes\"}",
               "'add_special' must be a boolean");
    expect_400(port, "/v1/tokenize",
               "{\"model\":\"scripted-chat\",\"content\":\"x\",\"with_pieces\":1}",
               "'with_pieces' must be a boolean");
    expect_400(port, "/v1/tokenize", "{\"model\":\"scripted-chat\",\"content\":\"x\",\"n\":1}",
               "unknown field 'n'");
    expect_400(port, "/v1/tokenize", "not json", "JSON object");
    expect_400(port, "/v1/detokenize", "{\"model\":\"scripted-chat\"}", "'tokens' is required");
    expect_400(port, "/v1/detokenize", "{\"model\":\"scripted-chat\",\"tokens\":[1,-2]}",
               "'tokens[1]'");
    expect_400(port, "/v1/detokenize", "{\"model\":\"scripted-chat\",\"tokens\":[\"a\"]}",
               "'tokens[0]'");
    /* an id past the vocabulary is the client's error too, named with the vocabulary size */
    expect_400(port, "/v1/detokenize", "{\"model\":\"scripted-chat\",\"tokens\":[5,99999999]}",
               "'tokens[1]' (99999999) is not a token id");
    /* an unknown model is 404, as for a chat request */
    d = post_json(port, "/v1/tokenize", "{\"model\":\"no-such-model\",\"content\":\"x\"}", &code);
    assert_int_equal(code, 404);
    yyjson_doc_free(d);
    /* the native body limit */
    size_t big = 70 * 1024;
    char *huge = malloc(big + 64);
    assert_non_null(huge);
    int n = snprintf(huge, 64, "{\"model\":\"scripted-chat\",\"content\":\"");
    memset(huge + n, 'a', big);
    memcpy(huge + n + big, "\"}", 3);
    struct qr_t_resp r;
    const char *const hdr[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", port, "/v1/tokenize", hdr, huge, strlen(huge), &r);
    assert_int_equal(r.status, 413);
    qr_t_resp_free(&r);
    free(huge);
}

/* A backend without a tokenizer endpoint refuses clearly, never guesses: backend=openai. */
static void test_tokenize_refused_elsewhere(void **st)
{
    (void) st;
    char tdir[200], tfile[260];
    snprintf(tdir, sizeof tdir, "%s/tok-openai", dir);
    snprintf(tfile, sizeof tfile, "%s/leak.json", tdir);
    assert_int_equal(mkdir(tdir, 0700), 0);
    FILE *f = fopen(tfile, "w");
    assert_non_null(f);
    assert_true(fputs(LEAK, f) >= 0);
    assert_int_equal(fclose(f), 0);
    struct qr_child up, d;
    qr_t_replay_start_dir(&up, tdir);
    char url[96];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", (unsigned) up.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url, NULL};
    qr_t_daemon_start(&d, 0, env);
    long code = 0;
    const char *paths[] = {"/v1/tokenize", "/v1/detokenize"};
    const char *bodies[] = {"{\"model\":\"leaky-chat\",\"content\":\"Grüß\"}",
                            "{\"model\":\"leaky-chat\",\"tokens\":[1,2]}"};
    for (int i = 0; i < 2; i++) {
        yyjson_doc *doc = post_json(d.port, paths[i], bodies[i], &code);
        yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(doc), "error");
        assert_int_equal(code, 501);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "tokenizer_unavailable");
        assert_non_null(
            strstr(yyjson_get_str(yyjson_obj_get(e, "message")), "has no tokenizer endpoint"));
        yyjson_doc_free(doc);
    }
    /* bad bodies are still 400 there */
    expect_400(d.port, "/v1/tokenize", "{\"model\":\"leaky-chat\"}", "exactly one of");
    /* the suite skips its tokenizer cases there, with the reason */
    char report[260], md[260];
    snprintf(report, sizeof report, "%s/tok-report.json", dir);
    snprintf(md, sizeof md, "%s/tok-report.md", dir);
    char *out = NULL;
    (void) run_suite("leaky-chat", d.port, report, md, &out);
    free(out);
    yyjson_doc *rep = read_report(report);
    yyjson_val *rr = yyjson_doc_get_root(rep);
    assert_string_equal(status_of(rr, "tokenizer.roundtrip"), "skip");
    assert_non_null(
        strstr(yyjson_get_str(yyjson_obj_get(find_case(rr, "tokenizer.roundtrip"), "reason")),
               "no tokenizer endpoint"));
    assert_string_equal(status_of(rr, "tokenizer.bos"), "skip");
    yyjson_doc_free(rep);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_int_equal(qr_t_stop(&up, SIGTERM, 10000), 0);
}

/* The suite in process, destructive cases allowed (as when the runner started the daemon): every
 * case of helper C's passes on the scripted model, crash.restart included -- the engine is killed
 * with SIGKILL, the next request is served by a new process and both /v1/loaded and /v1/backends
 * count the crash. Runs last: it kills the engine. */
static void test_scripted_destructive(void **st)
{
    (void) st;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) daemon_.port);
    struct qr_conf_ctx c = {.url = url,
                            .model = "scripted-chat",
                            .context_length = -1,
                            .timeout_ms = 60000,
                            .destructive = true};
    char err[256] = "";
    assert_int_equal(qr_conf_probe(&c, err, sizeof err), QR_OK);
    size_t n = qr_conf_n_cases();
    struct qr_conf_result *res = calloc(n, sizeof *res);
    assert_non_null(res);
    qr_conf_run(&c, res, false);
    static const char *const MINE[] = {"tokenizer.roundtrip", "tokenizer.bos",  "tools.parallel",
                                       "cancel.decode",       "cancel.prefill", "crash.restart"};
    for (size_t k = 0; k < sizeof MINE / sizeof MINE[0]; k++) {
        const struct qr_conf_result *r = NULL;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(res[i].id, MINE[k]))
                r = &res[i];
        if (!r)
            fail_msg("case '%s' is not in the table", MINE[k]);
        if (r->status != QR_CONF_PASS)
            fail_msg("case '%s' is %s: %s", MINE[k], r->status == QR_CONF_FAIL ? "fail" : "skip",
                     r->reason);
        print_message("%s: %s (%.0f ms)\n", r->id, r->reason, r->ms);
    }
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(res[i].id, "crash.restart"))
            assert_non_null(strstr(res[i].reason, "served again"));
        if (!strcmp(res[i].id, "tools.parallel"))
            assert_non_null(strstr(res[i].reason, "ids stable"));
    }
    free(res);
    qr_conf_ctx_cleanup(&c);
}

/* The newest stored conformance record of state_dir sd (kind manual), or fail. */
static void check_stored(const char *sd, const char *engine)
{
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_conf_store_open(sd, &s, &d), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.kind = "manual", .model = "scripted-chat"};
    struct qr_store_conformance *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_conformance_list(s, &f, &a, &rows, &n, &d), QR_OK);
    assert_int_equal(n, 1);
    assert_string_equal(rows[0].backend_id, "llama.cpp");
    assert_string_equal(rows[0].engine_version, engine);
    yyjson_doc *r = yyjson_read(rows[0].report_json, strlen(rows[0].report_json), 0);
    assert_non_null(r);
    yyjson_val *sum = yyjson_obj_get(yyjson_doc_get_root(r), "summary");
    assert_int_equal(rows[0].n_pass, (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "passed")));
    assert_int_equal(rows[0].n_fail, (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "failed")));
    assert_int_equal(rows[0].n_skip, (int64_t) yyjson_get_uint(yyjson_obj_get(sum, "skipped")));
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(r), "engine_version")),
                        engine);
    yyjson_doc_free(r);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

/* Without --url the command starts the daemon itself (same options as serve), runs the suite,
 * stops it, and stores the report (kind manual) in that daemon's state_dir. */
static void test_self_started_daemon(void **st)
{
    (void) st;
    char sd[260], report[260], log[300];
    snprintf(sd, sizeof sd, "%s/self-state", dir);
    snprintf(report, sizeof report, "%s/self-report.json", dir);
    snprintf(log, sizeof log, "%s/conformance-daemon.log", sd);
    char *argv[] = {QR_TEST_DAEMON,
                    "conformance",
                    "--backend",
                    "llamacpp",
                    "--model",
                    "scripted-chat",
                    "--report",
                    report,
                    "--models-dir",
                    models,
                    "--state-dir",
                    sd,
                    "--llama-threads",
                    "1",
                    "--llama-ctx",
                    "1024",
                    NULL};
    char *out = NULL;
    int rc = qr_t_run(argv, NULL, 120000, &out);
    if (rc != 0 && rc != 1)
        fprintf(stderr, "conformance (rc %d): %s\n", rc, out ? out : "");
    assert_true(rc == 0 || rc == 1);
    assert_non_null(strstr(out, "identity "));
    assert_non_null(strstr(out, "stored: "));
    free(out);
    yyjson_doc *d = read_report(report);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(status_of(root, "identity"), "pass");
    assert_string_equal(status_of(root, "reasoning.on"), "pass");
    /* a daemon started for the run may be broken on purpose: the destructive case ran */
    assert_string_not_equal(status_of(root, "crash.restart"), "skip");
    /* the engine's most specific build name, not the shared package version */
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "engine_version")), "b11669");
    assert_int_equal(strncmp(yyjson_get_str(yyjson_obj_get(root, "url")), "http://127.0.0.1:", 17),
                     0);
    yyjson_doc_free(d);
    check_stored(sd, "b11669");
    /* the daemon it started was stopped in order */
    char *text = qr_t_read_file(log, NULL);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"msg\":\"stopped\""));
    free(text);
}

/* With --url the state_dir of the daemon is only known when given: stored then, not otherwise. */
static void test_url_storing(void **st)
{
    (void) st;
    char url[64], sd[260];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) daemon_.port);
    snprintf(sd, sizeof sd, "%s/url-state", dir);
    char *bare[] = {QR_TEST_DAEMON, "conformance", "--model", "scripted-chat", "--url", url, NULL};
    char *out = NULL;
    int rc = qr_t_run(bare, NULL, 90000, &out);
    assert_true(rc == 0 || rc == 1);
    assert_non_null(strstr(out, "not stored"));
    free(out);
    char *named[] = {QR_TEST_DAEMON,
                     "conformance",
                     "--model",
                     "scripted-chat",
                     "--url",
                     url,
                     "--state-dir",
                     sd,
                     NULL};
    rc = qr_t_run(named, NULL, 90000, &out);
    assert_true(rc == 0 || rc == 1);
    assert_non_null(strstr(out, "stored: "));
    free(out);
    check_stored(sd, "b11669");
    /* --engine needs a daemon this command starts */
    char *both[] = {QR_TEST_DAEMON, "conformance", "--model", "x", "--url", url,
                    "--engine",     "/bin/true",   NULL};
    assert_int_equal(qr_t_run(both, NULL, 10000, &out), 2);
    free(out);
    /* a bad serve option is a configuration error */
    char *bad[] = {QR_TEST_DAEMON, "conformance", "--model", "x", "--backend",
                   "llama.cpp",    "--llama-ctx", "many",    NULL};
    assert_int_equal(qr_t_run(bad, NULL, 10000, &out), 2);
    assert_non_null(strstr(out, "invalid configuration"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_scripted_passes),
        cmocka_unit_test(test_leaking_upstream_fails),
        cmocka_unit_test(test_self_started_daemon),
        cmocka_unit_test(test_url_storing),
        cmocka_unit_test(test_tokenize_routes),
        cmocka_unit_test(test_tokenize_refused_elsewhere),
        /* last: it kills the scripted model's engine */
        cmocka_unit_test(test_scripted_destructive),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
