/* The controlled A/B benchmark through the real binary and the real llama-server on two generated
 * fixtures of different families, one dense (llama-tiny) and one MoE (gemma4moe-tiny):
 * `quantum-runtime bench --ab native,override --reps 2` reports both arms with every metric and
 * its spread (the override's smaller context shows in the engine's n_ctx and the KV footprint),
 * stores one bench row per metric keyed by the model with the host fingerprint and engine version,
 * and its exit status follows the guard's verdict on that evidence; `bench --guard` reads the
 * same verdict back, and fails closed for a model without evidence; a workload file (thinking on,
 * a token-count persona) drives the MoE run. POST /v1/benchmark-plan answers the predecessor's
 * shape with the Gemma 4 matrix, another family's matrix, 404 and 400. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "bench/guard.h"
#include "core/arena.h"
#include "harness.h"
#include "store/store.h"

static char dir[128], models[200], state[200], dense[260], moe[260], workload[260];

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-bench-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(dense, sizeof dense, "%s/llama-tiny.gguf", models);
    snprintf(moe, sizeof moe, "%s/gemma4moe-tiny.gguf", models);
    snprintf(workload, sizeof workload, "%s/w.json", dir);
    if (mkdir(models, 0700) != 0)
        return -1;
    FILE *f = fopen(workload, "w");
    if (!f)
        return -1;
    fputs("{\"schema_version\":\"quantum.runtime/bench-workload/v1alpha1\",\"name\":\"ember-tiny\","
          "\"system_prompt_tokens\":40,\"think\":true,\"answer_tokens\":12}\n",
          f);
    fclose(f);
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_FIXTURES, models, "llama-tiny.gguf", "gemma4moe-tiny.gguf", NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "qr-gen-fixtures failed: %s\n", out ? out : "");
    free(out);
    return rc == 0 ? 0 : -1;
}

static int teardown(void **st)
{
    (void) st;
    char cmd[200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Run the CLI; the JSON document on stdout parsed (log lines may precede it). */
static yyjson_doc *run_json(char **argv, int *rc)
{
    char *out = NULL;
    *rc = qr_t_run(argv, NULL, 60000, &out);
    char *start = out && out[0] == '{' ? out : out ? strstr(out, "\n{\n") : NULL;
    if (start && start != out)
        start++;
    yyjson_doc *doc = start ? yyjson_read(start, strlen(start), 0) : NULL;
    if (!doc)
        fprintf(stderr, "bench (rc %d): %s\n", *rc, out ? out : "");
    free(out);
    return doc;
}

static double num(yyjson_val *o, const char *k)
{
    return yyjson_get_num(yyjson_obj_get(o, k));
}

/* One arm of the report: reps ok samples with every metric, and its stats. */
static void check_arm(yyjson_val *arm, const char *label, uint64_t n_ctx, uint32_t gen)
{
    assert_string_equal(yyjson_get_str(yyjson_obj_get(arm, "label")), label);
    yyjson_val *samples = yyjson_obj_get(arm, "samples");
    assert_int_equal(yyjson_arr_size(samples), 2);
    size_t i, max;
    yyjson_val *s;
    yyjson_arr_foreach(samples, i, max, s)
    {
        if (!yyjson_get_bool(yyjson_obj_get(s, "ok")))
            fail_msg("%s rep %zu: %s", label, i, yyjson_get_str(yyjson_obj_get(s, "error")));
        assert_true(num(s, "decode_tps") > 0 && num(s, "prefill_tps") > 0);
        assert_true(num(s, "ttft_ms") > 0);
        assert_true(num(s, "rss_bytes") > (1u << 20) && num(s, "hwm_bytes") >= num(s, "rss_bytes"));
        assert_true(num(s, "kv_bytes") > 0);
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(s, "n_ctx")), n_ctx);
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(s, "gen_tokens")), gen);
    }
    yyjson_val *st = yyjson_obj_get(yyjson_obj_get(arm, "stats"), "decode_tps");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(st, "n")), 2);
    assert_true(num(st, "min") <= num(st, "median") && num(st, "median") <= num(st, "max"));
    assert_true(num(st, "stddev") >= 0);
}

/* The stored rows of model: one per metric, with this host and engine. */
static void check_store(const char *model, const char *fp, const char *ver)
{
    char path[300];
    snprintf(path, sizeof path, "%s/evidence.db", state);
    struct qr_store *s = NULL;
    assert_int_equal(qr_store_open(path, NULL, &s, NULL, NULL), QR_OK);
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_store_filter f = {.name = QR_BENCH_AB_NAME, .model = model};
    struct qr_store_bench *rows = NULL;
    size_t n = 0;
    assert_int_equal(qr_store_bench_list(s, &f, &a, &rows, &n, NULL), QR_OK);
    assert_int_equal(n, QR_BENCH_N_METRICS);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(rows[i].variant_a, "native");
        assert_string_equal(rows[i].variant_b, "override:ctx=256");
        assert_non_null(strstr(rows[i].values_json, fp));
        assert_non_null(strstr(rows[i].values_json, ver));
    }
    struct qr_guard_evidence ev;
    assert_int_equal(qr_guard_evidence_find(s, model, "llamacpp", ver, fp, &ev, NULL), QR_OK);
    assert_true(ev.found);
    assert_int_equal(ev.native_n, 2);
    qr_arena_cleanup(&a);
    qr_store_close(s);
}

/* One fixture's A/B; returns the guard verdict it printed. */
static void bench_one(const char *model, bool with_workload)
{
    int rc;
    char *argv[] = {QR_TEST_DAEMON, "bench",
                    "--model",      (char *) model,
                    "--ab",         "native,override",
                    "--ctx",        "256",
                    "--reps",       "2",
                    "--json",       "--state-dir",
                    state,          "--prompt-tokens",
                    "48",           "--gen-tokens",
                    "16",           NULL,
                    NULL,           NULL};
    if (with_workload) { /* the workload's persona and answer length instead */
        argv[13] = "--workload";
        argv[14] = workload;
        argv[15] = NULL;
    }
    yyjson_doc *doc = run_json(argv, &rc);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *b = yyjson_obj_get(root, "benchmark");
    char real[PATH_MAX];
    assert_non_null(realpath(model, real));
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "schema_version")), QR_BENCH_AB_SCHEMA);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "model")), real);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "backend")), "llamacpp");
    const char *fp = yyjson_get_str(yyjson_obj_get(b, "host_fingerprint"));
    const char *ver = yyjson_get_str(yyjson_obj_get(b, "engine_version"));
    assert_int_equal(strlen(fp), 16);
    assert_string_not_equal(ver, "unknown");
    uint32_t gen = with_workload ? 12 : 16;
    if (with_workload) {
        assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "workload")), "ember-tiny");
        assert_true(yyjson_get_bool(yyjson_obj_get(b, "think")));
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(b, "prompt_tokens_target")), 40);
    }
    /* native: the engine's own context (the fixture's 512); override: -c 256 */
    check_arm(yyjson_obj_get(b, "a"), "native", 512, gen);
    check_arm(yyjson_obj_get(b, "b"), "override:ctx=256", 256, gen);
    double kv_a =
        num(yyjson_arr_get(yyjson_obj_get(yyjson_obj_get(b, "a"), "samples"), 0), "kv_bytes");
    double kv_b =
        num(yyjson_arr_get(yyjson_obj_get(yyjson_obj_get(b, "b"), "samples"), 0), "kv_bytes");
    assert_true(kv_b < kv_a);
    assert_true(yyjson_get_int(yyjson_obj_get(yyjson_obj_get(root, "stored"), "row_id")) > 0);
    /* the exit status is the guard's verdict on what was just stored */
    yyjson_val *g = yyjson_obj_get(root, "guard");
    const char *verdict = yyjson_get_str(yyjson_obj_get(g, "verdict"));
    /* which one depends on this machine's numbers; insufficient = verified but too noisy */
    assert_true(!strcmp(verdict, "verified") || !strcmp(verdict, "refused") ||
                !strcmp(verdict, "insufficient"));
    assert_int_equal(rc, strcmp(verdict, "verified") ? 3 : 0);
    yyjson_val *e = yyjson_obj_get(g, "evidence");
    struct qr_guard_evidence ev = {
        .found = true,
        .native_median = num(e, "native_decode_median"),
        .override_median = num(e, "override_decode_median"),
        .native_n = yyjson_get_uint(yyjson_obj_get(e, "native_n")),
        .override_n = yyjson_get_uint(yyjson_obj_get(e, "override_n")),
        .native_stddev = num(e, "native_decode_stddev"),
        .override_stddev = num(e, "override_decode_stddev"),
    };
    struct qr_guard_decision d;
    qr_guard_decide(&ev, 5.0, &d);
    assert_string_equal(qr_guard_verdict_str(d.verdict), verdict);
    check_store(real, fp, ver);

    /* bench --guard reads the same verdict back */
    char *gargv[] = {QR_TEST_DAEMON, "bench",       "--guard", "--model", (char *) model,
                     "--json",       "--state-dir", state,     NULL};
    int grc;
    yyjson_doc *gdoc = run_json(gargv, &grc);
    assert_non_null(gdoc);
    yyjson_val *gg = yyjson_obj_get(yyjson_doc_get_root(gdoc), "guard");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(gg, "verdict")), verdict);
    assert_int_equal(grc, rc);
    yyjson_doc_free(gdoc);
    yyjson_doc_free(doc);
}

static void test_dense(void **st)
{
    (void) st;
    bench_one(dense, false);
}

static void test_moe_workload(void **st)
{
    (void) st;
    bench_one(moe, true);
}

static void test_guard_no_evidence(void **st)
{
    (void) st;
    char other[300];
    snprintf(other, sizeof other, "%s/other.gguf", models);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", dense, other);
    assert_int_equal(system(cmd), 0);
    char *argv[] = {QR_TEST_DAEMON, "bench",       "--guard", "--model", other,
                    "--json",       "--state-dir", state,     NULL};
    int rc;
    yyjson_doc *doc = run_json(argv, &rc);
    assert_non_null(doc);
    yyjson_val *g = yyjson_obj_get(yyjson_doc_get_root(doc), "guard");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(g, "verdict")), "no_evidence");
    assert_false(yyjson_get_bool(yyjson_obj_get(g, "override_verified")));
    assert_true(yyjson_is_null(yyjson_obj_get(g, "evidence")));
    assert_int_equal(rc, 3);
    yyjson_doc_free(doc);
    /* usage errors exit 2 */
    char *bad[] = {QR_TEST_DAEMON, "bench", "--model", dense, "--ab", "native,override:mlock=1",
                   "--state-dir",  state,   NULL};
    char *out = NULL;
    assert_int_equal(qr_t_run(bad, NULL, 30000, &out), 2);
    assert_non_null(strstr(out, "unknown knob 'mlock'"));
    free(out);
}

static void post(uint16_t port, const char *body, long status, yyjson_doc **out)
{
    const char *h[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request("POST", port, "/v1/benchmark-plan", h, body, strlen(body), &r);
    if (r.status != status)
        fail_msg("POST %s: %ld %s", body, r.status, r.body ? r.body : "");
    *out = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(*out);
    qr_t_resp_free(&r);
}

/* An A/B run of a registry model (by name: its canonical id is the evidence's key) reaches the
 * daemon's router: at start the managed backend's models are judged by the guard from the store,
 * and the verdict is logged for each model with evidence. */
static void test_daemon_reads_guard(void **st)
{
    (void) st;
    char *argv[] = {QR_TEST_DAEMON,
                    "bench",
                    "--model",
                    "llama-tiny",
                    "--ab",
                    "native,override",
                    "--ctx",
                    "256",
                    "--reps",
                    "2",
                    "--prompt-tokens",
                    "48",
                    "--gen-tokens",
                    "16",
                    "--state-dir",
                    state,
                    "--models-dir",
                    models,
                    NULL};
    char *out = NULL;
    int rc = qr_t_run(argv, NULL, 60000, &out);
    if (rc != 0 && rc != 3)
        fail_msg("bench exited %d: %s", rc, out ? out : "");
    free(out);
    const char *args[] = {"--backend", "llama.cpp",        "--models-dir", models, "--state-dir",
                          state,       "--hardware-class", "linux-cpu",    NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, 0, NULL, args);
    bool seen = false;
    for (int i = 0; i < 100 && !seen; i++) {
        seen = qr_t_log_contains(&d, "\"msg\":\"context-override guard\",\"model\":\"llama-tiny\"");
        if (!seen)
            usleep(50 * 1000);
    }
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_true(seen);
}

/* The same A/B against whatever Ollama is configured (here a replay speaking Ollama's protocol:
 * the override arm's num_ctx answer decodes 20% slower): measured from Ollama's own metrics,
 * stored with backend "ollama" and its version, and refused by the guard. */
static void test_ollama_ab(void **st)
{
    (void) st;
    struct qr_child rp;
    qr_t_replay_start_dir(&rp, QR_TEST_CASES "/replay-ollama-bench");
    char url[96];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OLLAMA_URL=http://127.0.0.1:%u", rp.port);
    const char *env[] = {url, NULL};
    char *argv[] = {QR_TEST_DAEMON, "bench",       "--backend", "ollama",
                    "--model",      "llama3.2:1b", "--ab",      "native,override",
                    "--ctx",        "2048",        "--reps",    "3",
                    "--json",       "--state-dir", state,       NULL};
    char *out = NULL;
    int rc = qr_t_run(argv, env, 60000, &out);
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    if (!doc)
        fail_msg("bench exited %d: %s", rc, out);
    yyjson_val *root = yyjson_doc_get_root(doc), *b = yyjson_obj_get(root, "benchmark");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "backend")), "ollama");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "engine_version")), "0.12.6");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(b, "model")), "llama3.2:1b");
    yyjson_val *a = yyjson_obj_get(b, "a"), *o = yyjson_obj_get(b, "b");
    assert_true(num(yyjson_obj_get(yyjson_obj_get(a, "stats"), "decode_tps"), "median") == 64.0);
    assert_true(num(yyjson_obj_get(yyjson_obj_get(o, "stats"), "decode_tps"), "median") == 51.2);
    assert_string_equal(
        yyjson_get_str(yyjson_obj_get(yyjson_obj_get(o, "ollama_options"), "num_ctx")), "2048");
    yyjson_val *s0 = yyjson_arr_get(yyjson_obj_get(o, "samples"), 0);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(s0, "n_ctx")), 4096);
    assert_int_equal(yyjson_get_int(yyjson_obj_get(s0, "load_ms")), 300);
    yyjson_val *g = yyjson_obj_get(root, "guard");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(g, "verdict")), "refused");
    assert_int_equal(rc, 3);
    yyjson_doc_free(doc);
    free(out);
    /* bench --guard reads it back for the Ollama backend */
    char *gargv[] = {QR_TEST_DAEMON, "bench",  "--guard",     "--backend", "ollama", "--model",
                     "llama3.2:1b",  "--json", "--state-dir", state,       NULL};
    rc = qr_t_run(gargv, env, 30000, &out);
    assert_int_equal(rc, 3);
    assert_non_null(strstr(out, "\"verdict\": \"refused\""));
    free(out);
    assert_int_equal(qr_t_stop(&rp, SIGTERM, 5000), 0);
}

static void test_benchmark_plan(void **st)
{
    (void) st;
    const char *args[] = {"--state-dir", state, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, 0, NULL, args);
    yyjson_doc *doc;
    post(d.port, "{}", 200, &doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "benchmark_schema")),
                        "quantum.runtime/model-benchmark-plan/v1alpha1");
    assert_non_null(yyjson_get_str(yyjson_obj_get(root, "api_version")));
    assert_true(yyjson_is_null(yyjson_obj_get(root, "canonical_model_id")));
    uint64_t eff =
        yyjson_get_uint(yyjson_obj_get(yyjson_obj_get(root, "limits"), "effective_logical_cpus"));
    assert_true(eff >= 1);
    yyjson_val *plan = yyjson_obj_get(root, "plan");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(plan, "effective_host_cpus")), eff);
    assert_true(yyjson_arr_size(yyjson_obj_get(plan, "candidates")) >= 1);
    yyjson_val *m = yyjson_obj_get(plan, "matrix");
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(m, "variants")), 5);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "family")), "gemma4");
    yyjson_doc_free(doc);
    post(d.port, "{\"family\":\"qwen3\",\"variants\":[\"8b\",\"30b-a3b\"],\"ctx\":8192}", 200,
         &doc);
    m = yyjson_obj_get(yyjson_obj_get(yyjson_doc_get_root(doc), "plan"), "matrix");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "family")), "qwen3");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(yyjson_obj_get(m, "arms"), 1)),
                        "override:ctx=8192");
    yyjson_doc_free(doc);
    post(d.port, "{\"model\":\"no-such-model\"}", 404, &doc);
    yyjson_doc_free(doc);
    post(d.port, "{\"unknown\":1}", 400, &doc);
    yyjson_doc_free(doc);
    post(d.port, "{\"core_budget\":100000}", 400, &doc);
    yyjson_doc_free(doc);
    post(d.port, "{\"family\":\"llama\"}", 400, &doc);
    yyjson_doc_free(doc);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_moe_workload),
        cmocka_unit_test(test_guard_no_evidence),
        cmocka_unit_test(test_daemon_reads_guard),
        cmocka_unit_test(test_ollama_ab),
        cmocka_unit_test(test_benchmark_plan),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
