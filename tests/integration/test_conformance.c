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

#include "harness.h"

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
    static const char *const MUST_RUN[] = {"identity",         "unicode",   "reasoning.off",
                                           "reasoning.on",     "streaming", "tools",
                                           "structured_output"};
    for (size_t i = 0; i < sizeof MUST_RUN / sizeof MUST_RUN[0]; i++) {
        const char *s = status_of(root, MUST_RUN[i]);
        if (strcmp(s, "pass"))
            fail_msg("case '%s' is %s: %s", MUST_RUN[i], s,
                     yyjson_get_str(yyjson_obj_get(find_case(root, MUST_RUN[i]), "reason")));
    }
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
    /* a daemon that is not there: no report, exit 1 */
    char *down[] = {QR_TEST_DAEMON, "conformance",        "--model", "x",
                    "--url",        "http://127.0.0.1:1", NULL};
    assert_int_equal(qr_t_run(down, NULL, 10000, &out), 1);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors),
        cmocka_unit_test(test_scripted_passes),
        cmocka_unit_test(test_leaking_upstream_fails),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
