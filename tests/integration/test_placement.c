/* Placement plans through the real binary on generated fixtures (a dense and two MoE families):
 * POST /v1/placement by path and by registry name answers the predecessor's document with a plan
 * that fits (200), a refusal with its numbers (422), and 400/404 for bad requests;
 * `quantum-runtime plan --json` answers the same document and exits 3 when refused; and every
 * plan's engine arguments are flags the installed llama-server lists in --help and that the
 * engine's llama-completion runs the model with; after a calibration stored in the daemon's
 * state_dir, POST /v1/placement answers it as "calibration" and plans its best thread count unless
 * the body gives threads. (The plan applied when the llama.cpp backend starts a model is tested
 * in test_llamacpp_lifecycle.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "harness.h"

static char models[PATH_MAX];
static struct qr_child daemon_;

static const char *const FIXTURES[] = {"llama-tiny.gguf", "qwen3moe-tiny.gguf",
                                       "gemma4moe-tiny.gguf"};

static int setup(void **state)
{
    (void) state;
    snprintf(models, sizeof models, "/tmp/qr-placement-XXXXXX");
    if (!mkdtemp(models))
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_FIXTURES, models, (char *) FIXTURES[0], (char *) FIXTURES[1],
                   (char *) FIXTURES[2], NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    free(out);
    if (rc != 0)
        return -1;
    char env_models[PATH_MAX + 40], env_state[PATH_MAX + 48];
    snprintf(env_models, sizeof env_models, "QUANTUM_RUNTIME_MODELS_DIR=%s", models);
    snprintf(env_state, sizeof env_state, "QUANTUM_RUNTIME_STATE_DIR=%s/daemon-state", models);
    const char *env[] = {env_models, env_state, NULL};
    qr_t_daemon_start(&daemon_, 0, env);
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    int rc = qr_t_stop(&daemon_, SIGTERM, 10000);
    for (size_t i = 0; i < sizeof FIXTURES / sizeof FIXTURES[0]; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s/%s", models, FIXTURES[i]);
        unlink(p);
    }
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", models);
    if (system(cmd) != 0)
        return -1;
    return rc == 0 ? 0 : -1;
}

static yyjson_doc *post(const char *body, long want_status)
{
    struct qr_t_resp r;
    qr_t_request("POST", daemon_.port, "/v1/placement", NULL, body, strlen(body), &r);
    if (r.status != want_status)
        fprintf(stderr, "POST /v1/placement %s: %ld %s\n", body, r.status, r.body);
    assert_int_equal(r.status, want_status);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    qr_t_resp_free(&r);
    return doc;
}

static const char *str_at(yyjson_val *root, const char *ptr)
{
    const char *s = yyjson_get_str(yyjson_ptr_get(root, ptr));
    assert_non_null(s);
    return s;
}

/* The document every fitting plan answers. */
static void check_fits(yyjson_val *root, const char *path)
{
    assert_string_equal(str_at(root, "/api_version"), "v1alpha1");
    assert_string_equal(str_at(root, "/placement_schema"),
                        "quantum.runtime/placement-plan/v1alpha1");
    assert_string_equal(str_at(root, "/host/schema_version"),
                        "quantum.runtime/host-profile/v1alpha1");
    assert_string_equal(str_at(root, "/limits/schema_version"),
                        "quantum.runtime/host-limits/v1alpha1");
    assert_true(yyjson_is_null(yyjson_obj_get(root, "calibration")));
    assert_non_null(strstr(str_at(root, "/model/path"), path));
    assert_string_equal(str_at(root, "/plan/schema_version"),
                        "quantum.runtime/placement-plan/v1alpha1");
    assert_string_equal(str_at(root, "/plan/decision"), "cpu_only"); /* tiny model: RAM fits */
    assert_true(yyjson_get_bool(yyjson_ptr_get(root, "/plan/fits")));
    yyjson_val *args = yyjson_ptr_get(root, "/plan/engine/args");
    assert_true(yyjson_arr_size(args) >= 4);
    assert_string_equal(yyjson_get_str(yyjson_arr_get(args, 0)), "-t");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(args, 2)), "-ngl");
    assert_string_equal(yyjson_get_str(yyjson_arr_get(args, 3)), "0");
    uint64_t threads = yyjson_get_uint(yyjson_ptr_get(root, "/plan/threads/count"));
    uint64_t eff = yyjson_get_uint(yyjson_ptr_get(root, "/limits/effective_logical_cpus"));
    assert_true(threads >= 1 && threads <= eff);
    assert_string_equal(str_at(root, "/plan/requires_backend_capabilities/0"), "placement.cpu");
    uint64_t w = yyjson_get_uint(yyjson_ptr_get(root, "/plan/memory/weights_bytes"));
    uint64_t a = yyjson_get_uint(yyjson_ptr_get(root, "/plan/ram/assigned_bytes"));
    assert_true(w > 0 && a > w);
}

static void test_post_by_path(void **state)
{
    (void) state;
    char body[PATH_MAX + 128];
    snprintf(body, sizeof body,
             "{\"path\":\"%s/qwen3moe-tiny.gguf\",\"context\":512,\"parallel\":2}", models);
    yyjson_doc *doc = post(body, 200);
    yyjson_val *root = yyjson_doc_get_root(doc);
    check_fits(root, "qwen3moe-tiny.gguf");
    assert_int_equal(yyjson_get_uint(yyjson_ptr_get(root, "/plan/sizing/parallel")), 2);
    assert_int_equal(yyjson_get_uint(yyjson_ptr_get(root, "/plan/sizing/context")), 512);
    assert_true(yyjson_get_uint(yyjson_ptr_get(root, "/plan/sizing/experts")) > 0);
    yyjson_doc_free(doc);
}

static void test_post_by_name(void **state)
{
    (void) state;
    yyjson_doc *doc = post("{\"model\":\"llama-tiny\",\"context\":256}", 200);
    yyjson_val *root = yyjson_doc_get_root(doc);
    check_fits(root, "llama-tiny.gguf");
    assert_string_equal(str_at(root, "/model/name"), "llama-tiny");
    yyjson_doc_free(doc);
}

static void test_post_refused_with_numbers(void **state)
{
    (void) state;
    char body[PATH_MAX + 128];
    snprintf(body, sizeof body,
             "{\"path\":\"%s/gemma4moe-tiny.gguf\",\"reserve_ram_bytes\":4611686018427387903}",
             models);
    yyjson_doc *doc = post(body, 422);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(str_at(root, "/plan/decision"), "capacity_exceeded");
    assert_false(yyjson_get_bool(yyjson_ptr_get(root, "/plan/fits")));
    assert_non_null(strstr(str_at(root, "/plan/reason"), "does not fit: needs "));
    assert_int_equal(yyjson_arr_size(yyjson_ptr_get(root, "/plan/engine/args")), 0);
    assert_string_equal(str_at(root, "/plan/classes/0/tier"), "unplaced");
    yyjson_doc_free(doc);
}

static void test_post_bad_requests(void **state)
{
    (void) state;
    static const struct {
        const char *body;
        long status;
        const char *code;
    } cases[] = {
        {"{\"model\":\"llama-tiny\",\"bogus\":1}", 400, "invalid_placement_request"},
        {"{\"model\":\"llama-tiny\",\"path\":\"/x.gguf\"}", 400, "invalid_placement_request"},
        {"{\"context\":512}", 400, "invalid_placement_request"},
        {"{\"model\":\"llama-tiny\",\"prefer\":\"tpu\"}", 400, "invalid_placement_request"},
        {"{\"model\":\"llama-tiny\",\"prefer\":\"gpu\",\"allow_acceleration\":false}", 400,
         "invalid_placement_request"},
        {"{\"model\":\"llama-tiny\",\"context\":-1}", 400, "invalid_placement_request"},
        {"[1]", 400, "invalid_placement_request"},
        {"not json", 400, "invalid_placement_request"},
        {"{\"path\":\"/etc/passwd\"}", 400, "invalid_placement_request"},
        {"{\"model\":\"no-such-model\"}", 404, "model_not_found"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        yyjson_doc *doc = post(cases[i].body, cases[i].status);
        yyjson_val *root = yyjson_doc_get_root(doc);
        assert_string_equal(str_at(root, "/error/code"), cases[i].code);
        yyjson_doc_free(doc);
    }
}

/* `plan --json` for a fixture: the parsed document (exit status checked against want). */
static yyjson_doc *cli_plan(const char *fixture, const char *extra, int want)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", models, fixture);
    char *argv[] = {QR_TEST_DAEMON,
                    "plan",
                    "--model",
                    path,
                    "--ctx",
                    "512",
                    "--json",
                    (char *) extra,
                    extra ? "4611686018427387903" : NULL,
                    NULL};
    char *out = NULL;
    int rc = qr_t_run(argv, NULL, 30000, &out);
    if (rc != want)
        fprintf(stderr, "plan %s: exit %d: %s\n", fixture, rc, out);
    assert_int_equal(rc, want);
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    free(out);
    return doc;
}

static void test_cli_plan(void **state)
{
    (void) state;
    yyjson_doc *doc = cli_plan("qwen3moe-tiny.gguf", NULL, 0);
    check_fits(yyjson_doc_get_root(doc), "qwen3moe-tiny.gguf");
    yyjson_doc_free(doc);
    doc = cli_plan("qwen3moe-tiny.gguf", "--reserve-ram-bytes", 3);
    assert_string_equal(str_at(yyjson_doc_get_root(doc), "/plan/decision"), "capacity_exceeded");
    yyjson_doc_free(doc);

    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/llama-tiny.gguf", models);
    char *text[] = {QR_TEST_DAEMON, "plan", "--model", path, NULL};
    char *out = NULL;
    assert_int_equal(qr_t_run(text, NULL, 30000, &out), 0);
    assert_non_null(strstr(out, "decision: cpu_only (cpu)"));
    assert_non_null(strstr(out, "engine args: -t "));
    free(out);
    /* by registry name (models_dir from the environment): stdout is the JSON document alone */
    char env_models[PATH_MAX + 40], env_state[PATH_MAX + 48];
    snprintf(env_models, sizeof env_models, "QUANTUM_RUNTIME_MODELS_DIR=%s", models);
    snprintf(env_state, sizeof env_state, "QUANTUM_RUNTIME_STATE_DIR=%s/state", models);
    const char *env[] = {env_models, env_state, NULL};
    char *byname[] = {QR_TEST_DAEMON, "plan", "--model", "qwen3moe-tiny", "--json", NULL};
    assert_int_equal(qr_t_run(byname, env, 30000, &out), 0);
    yyjson_doc *nd = yyjson_read(out, strlen(out), 0);
    assert_non_null(nd);
    assert_string_equal(str_at(yyjson_doc_get_root(nd), "/model/name"), "qwen3moe-tiny");
    yyjson_doc_free(nd);
    free(out);
    char *unknown[] = {QR_TEST_DAEMON, "plan", "--model", "no-such-model", NULL};
    assert_int_equal(qr_t_run(unknown, env, 30000, &out), 1);
    assert_non_null(strstr(out, "model 'no-such-model' is not in the registry"));
    free(out);
    char *bad[] = {QR_TEST_DAEMON, "plan", "--model", path, "--prefer", "tpu", NULL};
    assert_int_equal(qr_t_run(bad, NULL, 30000, &out), 2);
    free(out);
    char *missing[] = {QR_TEST_DAEMON, "plan", NULL};
    assert_int_equal(qr_t_run(missing, NULL, 30000, &out), 2);
    free(out);
}

/* Is flag listed in llama-server --help (as "-x," / "-x " / "--x" followed by a separator)? */
static bool listed(const char *help, const char *flag)
{
    size_t n = strlen(flag);
    for (const char *p = strstr(help, flag); p; p = strstr(p + 1, flag)) {
        bool start = p == help || p[-1] == ' ' || p[-1] == '\n';
        char c = p[n];
        if (start && (c == ',' || c == ' ' || c == '\n' || c == '='))
            return true;
    }
    return false;
}

/* Every plan's flags exist in the installed engine, and the engine runs the model with them. */
static void test_engine_accepts_plan_args(void **state)
{
    (void) state;
    char *help = NULL;
    char *hargv[] = {QR_TEST_LLAMA_BIN "/llama-server", "--help", NULL};
    if (access(hargv[0], X_OK) != 0)
        skip(); /* no engine here (scripts/setup not run) */
    assert_int_equal(qr_t_run(hargv, NULL, 30000, &help), 0);
    for (size_t f = 0; f < sizeof FIXTURES / sizeof FIXTURES[0]; f++) {
        yyjson_doc *doc = cli_plan(FIXTURES[f], NULL, 0);
        yyjson_val *args = yyjson_ptr_get(yyjson_doc_get_root(doc), "/plan/engine/args");
        char path[PATH_MAX + 64];
        snprintf(path, sizeof path, "%s/%s", models, FIXTURES[f]);
        char *argv[64] = {QR_TEST_LLAMA_BIN "/llama-completion",
                          "-m",
                          path,
                          "-c",
                          "512",
                          "-p",
                          "hi",
                          "-n",
                          "2",
                          "-no-cnv",
                          "--no-warmup"};
        size_t n = 11, i, max;
        yyjson_val *a;
        yyjson_arr_foreach(args, i, max, a)
        {
            const char *s = yyjson_get_str(a);
            if (s[0] == '-' && !(s[1] >= '0' && s[1] <= '9'))
                assert_true(listed(help, s));
            if (n < 62)
                argv[n++] = (char *) s;
        }
        argv[n] = NULL;
        char *out = NULL;
        int rc = qr_t_run(argv, NULL, 60000, &out);
        if (rc != 0)
            fprintf(stderr, "llama-completion %s: exit %d\n%s\n", FIXTURES[f], rc, out);
        assert_int_equal(rc, 0);
        free(out);
        yyjson_doc_free(doc);
    }
    free(help);
}

/* A calibration stored in the daemon's state_dir is the answer's "calibration", and its best
 * thread count is the plan's unless the body names one. Runs last: the cases above expect null. */
static void test_calibration_in_plan(void **state)
{
    (void) state;
    char path[PATH_MAX + 64], state_dir[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/llama-tiny.gguf", models);
    snprintf(state_dir, sizeof state_dir, "%s/daemon-state", models);
    if (access(QR_TEST_LLAMA_BIN "/llama-server", X_OK) != 0)
        skip(); /* no engine here (scripts/setup not run) */
    char *argv[] = {
        QR_TEST_DAEMON, "calibrate", "--json",      "--budget-ms", "15000",         "--model", path,
        "--state-dir",  state_dir,   "--log-level", "error",       "--no-progress", NULL};
    char *out = NULL;
    int rc = qr_t_run(argv, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "calibrate: %s\n", out ? out : "");
    assert_int_equal(rc, 0);
    free(out);
    yyjson_doc *doc = post("{\"model\":\"llama-tiny\",\"context\":256}", 200);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *cal = yyjson_obj_get(root, "calibration");
    assert_true(yyjson_is_obj(cal));
    assert_string_equal(str_at(root, "/calibration/schema_version"),
                        "quantum.runtime/host-calibration/v1alpha1");
    assert_non_null(strstr(str_at(root, "/calibration/model"), "llama-tiny.gguf"));
    uint64_t best = yyjson_get_uint(yyjson_obj_get(cal, "best_threads"));
    uint64_t planned = yyjson_get_uint(yyjson_ptr_get(root, "/plan/threads/count"));
    fprintf(stderr, "calibrated best_threads %llu, planned %llu\n", (unsigned long long) best,
            (unsigned long long) planned);
    assert_true(best >= 1);
    assert_int_equal(planned, best);
    assert_string_equal(str_at(root, "/plan/engine/args/0"), "-t");
    char want[48];
    snprintf(want, sizeof want, "%llu", (unsigned long long) best);
    assert_string_equal(str_at(root, "/plan/engine/args/1"), want);
    /* taken from the calibration, not from the host's cores */
    snprintf(want, sizeof want, "threads %llu: given", (unsigned long long) best);
    bool given = false;
    size_t i, max;
    yyjson_val *line;
    yyjson_arr_foreach(yyjson_ptr_get(root, "/plan/reasons"), i, max, line)
    {
        given = given || !strncmp(yyjson_get_str(line), want, strlen(want));
    }
    assert_true(given);
    yyjson_doc_free(doc);
    /* a given count wins */
    doc = post("{\"model\":\"llama-tiny\",\"context\":256,\"threads\":1}", 200);
    root = yyjson_doc_get_root(doc);
    assert_true(yyjson_is_obj(yyjson_obj_get(root, "calibration")));
    assert_int_equal(yyjson_get_uint(yyjson_ptr_get(root, "/plan/threads/count")), 1);
    yyjson_doc_free(doc);
}

/* The placement_* settings are the defaults of what a /v1/placement body does not say, as they
 * are of every engine start: prefer hybrid with acceleration allowed plans hybrid first (CPU here:
 * no accelerator, said as a warning); a body's own prefer wins; prefer gpu without acceleration is
 * a configuration error. */
static void test_placement_settings(void **state)
{
    (void) state;
    char env_models[PATH_MAX + 40], env_state[PATH_MAX + 48];
    snprintf(env_models, sizeof env_models, "QUANTUM_RUNTIME_MODELS_DIR=%s", models);
    snprintf(env_state, sizeof env_state, "QUANTUM_RUNTIME_STATE_DIR=%s/daemon-state2", models);
    const char *env[] = {env_models, env_state, "QUANTUM_RUNTIME_PLACEMENT_PREFER=hybrid",
                         "QUANTUM_RUNTIME_PLACEMENT_ACCELERATION=true", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, 0, env);
    char body[PATH_MAX + 128];
    snprintf(body, sizeof body, "{\"path\":\"%s/llama-tiny.gguf\"}", models);
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/v1/placement", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "prefer hybrid: no accelerator"));
    qr_t_resp_free(&r);
    snprintf(body, sizeof body, "{\"path\":\"%s/llama-tiny.gguf\",\"prefer\":\"cpu\"}", models);
    qr_t_request("POST", d.port, "/v1/placement", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_null(strstr(r.body, "prefer hybrid"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    /* the default daemon: CPU first, no preference to report */
    snprintf(body, sizeof body, "{\"path\":\"%s/llama-tiny.gguf\"}", models);
    yyjson_doc *doc = post(body, 200);
    yyjson_val *w = yyjson_ptr_get(yyjson_doc_get_root(doc), "/plan/warnings"), *it;
    size_t i, max;
    yyjson_arr_foreach(w, i, max, it)
    {
        assert_null(strstr(yyjson_get_str(it), "prefer"));
    }
    yyjson_doc_free(doc);
    char *out = NULL;
    char *argv[] = {QR_TEST_DAEMON, "check-config", NULL};
    const char *bad[] = {"QUANTUM_RUNTIME_PLACEMENT_PREFER=gpu", NULL};
    assert_int_equal(qr_t_run(argv, bad, 10000, &out), 2);
    assert_non_null(strstr(out, "placement_prefer: 'gpu' needs placement_acceleration=true"));
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_post_by_path),
        cmocka_unit_test(test_post_by_name),
        cmocka_unit_test(test_post_refused_with_numbers),
        cmocka_unit_test(test_post_bad_requests),
        cmocka_unit_test(test_cli_plan),
        cmocka_unit_test(test_engine_accepts_plan_args),
        cmocka_unit_test(test_calibration_in_plan),
        cmocka_unit_test(test_placement_settings),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
