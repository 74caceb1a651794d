/* Calibration through the real binary and the real llama-server on a generated fixture
 * (llama-tiny.gguf): `quantum-runtime calibrate --json` measures every thread count of its plan
 * and the memory bandwidth over a working set far above the LLC, and stores the run; a daemon
 * started afterwards on the same state_dir reports `calibrated: true` from the store and gives
 * llama-server the calibrated thread count; POST /v1/host/calibrate answers the endpoint's
 * document, refuses a second concurrent run with 409, and its run survives a restart. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "harness.h"

static char dir[128], models[200], state[200], model[260];

static const char *str(yyjson_val *v)
{
    const char *s = yyjson_get_str(v);
    return s ? s : "";
}

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-calib-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    snprintf(model, sizeof model, "%s/llama-tiny.gguf", models);
    if (mkdir(models, 0700) != 0)
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_FIXTURES, models, "llama-tiny.gguf", NULL};
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

/* The calibration object of an endpoint document, checked for what every run must hold. */
static yyjson_val *check_document(yyjson_val *root)
{
    assert_non_null(yyjson_obj_get(root, "api_version"));
    assert_true(yyjson_is_obj(yyjson_obj_get(root, "host")));
    assert_true(yyjson_is_obj(yyjson_obj_get(root, "limits")));
    yyjson_val *cal = yyjson_obj_get(root, "calibration");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(cal, "schema_version")),
                        "quantum.runtime/host-calibration/v1alpha1");
    assert_int_equal(strlen(yyjson_get_str(yyjson_obj_get(cal, "host_fingerprint"))), 16);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(cal, "model")), model);
    /* one ok row per thread count of the plan, with both rates */
    yyjson_val *plan = yyjson_obj_get(cal, "plan");
    yyjson_val *samples = yyjson_obj_get(cal, "samples");
    assert_true(yyjson_arr_size(plan) >= 1);
    assert_int_equal(yyjson_arr_size(samples), yyjson_arr_size(plan));
    uint64_t best = yyjson_get_uint(yyjson_obj_get(cal, "best_threads"));
    bool best_in_plan = false;
    size_t i, max;
    yyjson_val *s;
    yyjson_arr_foreach(samples, i, max, s)
    {
        assert_true(yyjson_get_bool(yyjson_obj_get(s, "ok")));
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(s, "threads")),
                         yyjson_get_uint(yyjson_arr_get(plan, i)));
        assert_true(yyjson_get_num(yyjson_obj_get(s, "prefill_tokens_per_sec")) > 0);
        assert_true(yyjson_get_num(yyjson_obj_get(s, "decode_tokens_per_sec")) > 0);
        assert_true(yyjson_get_uint(yyjson_obj_get(s, "predicted_tokens")) > 0);
        best_in_plan = best_in_plan || yyjson_get_uint(yyjson_obj_get(s, "threads")) == best;
    }
    assert_true(best_in_plan);
    /* memory, not cache: at least 4x the LLC and 256 MiB unless memory is small */
    yyjson_val *m = yyjson_obj_get(cal, "memory");
    uint64_t ws = yyjson_get_uint(yyjson_obj_get(m, "working_set_bytes"));
    uint64_t llc = yyjson_get_uint(yyjson_obj_get(m, "llc_bytes"));
    uint64_t mem = yyjson_get_uint(
        yyjson_obj_get(yyjson_obj_get(yyjson_obj_get(root, "host"), "memory"), "available_bytes"));
    if (mem >= (4ull << 30))
        assert_true(ws >= (255ull << 20) && ws >= llc * 4u - 64u);
    assert_true(yyjson_get_num(yyjson_obj_get(m, "read_gbs")) > 0);
    assert_true(yyjson_get_num(yyjson_obj_get(m, "triad_gbs")) > 0);
    assert_non_null(yyjson_get_str(yyjson_obj_get(cal, "memory_bandwidth_class")));
    return cal;
}

static void test_cli_then_daemon(void **st)
{
    (void) st;
    char *out = NULL;
    /* a memory-only run first: stored, no engine rows, never a thread count */
    char *mem[] = {QR_TEST_DAEMON, "calibrate",   "--memory-only", "--json", "--log-level",
                   "error",        "--state-dir", state,           NULL};
    assert_int_equal(qr_t_run(mem, NULL, 30000, &out), 0);
    yyjson_doc *mdoc = yyjson_read(out, strlen(out), 0);
    assert_non_null(mdoc);
    yyjson_val *mcal = yyjson_obj_get(yyjson_doc_get_root(mdoc), "calibration");
    assert_true(yyjson_is_null(yyjson_obj_get(mcal, "model")));
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(mcal, "samples")), 0);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(mcal, "best_threads")), 0);
    assert_true(yyjson_get_num(yyjson_obj_get(yyjson_obj_get(mcal, "memory"), "read_gbs")) > 0);
    yyjson_doc_free(mdoc);
    free(out);
    out = NULL;
    char *argv[] = {QR_TEST_DAEMON, "calibrate", "--json",      "--budget-ms", "15000",
                    "--model",      model,       "--state-dir", state,         NULL};
    int rc = qr_t_run(argv, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "calibrate: %s\n", out ? out : "");
    assert_int_equal(rc, 0);
    /* the JSON document is on stdout; the store's one-line log records may precede it */
    char *start = strstr(out, "\n{\n");
    start = out[0] == '{' && out[1] == '\n' ? out : start ? start + 1 : NULL;
    assert_non_null(start);
    yyjson_doc *doc = yyjson_read(start, strlen(start), 0);
    assert_non_null(doc);
    yyjson_val *cal = check_document(yyjson_doc_get_root(doc));
    char fp[32], measured[48];
    snprintf(fp, sizeof fp, "%s", str(yyjson_obj_get(cal, "host_fingerprint")));
    snprintf(measured, sizeof measured, "%s", str(yyjson_obj_get(cal, "measured_at")));
    unsigned best = (unsigned) yyjson_get_uint(yyjson_obj_get(cal, "best_threads"));
    yyjson_doc_free(doc);
    free(out);

    /* a daemon on the same state_dir: calibrated from the store, and the engine's threads */
    const char *args[] = {"--state-dir",  state,  "--backend", "llama.cpp",
                          "--models-dir", models, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, 0, NULL, args);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/host", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "calibrated")));
    yyjson_val *last = yyjson_obj_get(root, "last_calibration");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(last, "host_fingerprint")), fp);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(last, "measured_at")), measured);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    char needle[96];
    snprintf(needle, sizeof needle, "\"threads\":%u,\"source\":\"calibrated ", best);
    assert_true(qr_t_log_contains(&d, needle));
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

struct post {
    uint16_t port;
    struct qr_t_resp resp;
};

static void *post_thread(void *arg)
{
    struct post *p = arg;
    char body[400];
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"budget_ms\":10000}", model);
    const char *h[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", p->port, "/v1/host/calibrate", h, body, strlen(body), &p->resp);
    return NULL;
}

static void test_endpoint_and_restart(void **st)
{
    (void) st;
    const char *args[] = {"--state-dir", state, "--models-dir", models, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, 0, NULL, args);
    struct post p = {.port = d.port};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, post_thread, &p), 0);
    /* while it runs: a second one is refused in the Runtime's error shape, /v1/host answers */
    struct qr_t_resp r;
    int tries = 0;
    do {
        usleep(50000);
        qr_t_request("POST", d.port, "/v1/host/calibrate", NULL, NULL, 0, &r);
        if (r.status != 409)
            qr_t_resp_free(&r);
    } while (r.status != 409 && ++tries < 20);
    assert_int_equal(r.status, 409);
    assert_non_null(strstr(r.body, "\"code\":\"calibration_running\""));
    qr_t_resp_free(&r);
    qr_t_request("GET", d.port, "/v1/host", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(p.resp.status, 200);
    yyjson_doc *doc = yyjson_read(p.resp.body, p.resp.body_len, 0);
    assert_non_null(doc);
    yyjson_val *cal = check_document(yyjson_doc_get_root(doc));
    char measured[48];
    snprintf(measured, sizeof measured, "%s", str(yyjson_obj_get(cal, "measured_at")));
    yyjson_doc_free(doc);
    qr_t_resp_free(&p.resp);
    /* a model outside models_dir is refused */
    const char *bad = "{\"model\":\"/etc/passwd\"}";
    qr_t_request("POST", d.port, "/v1/host/calibrate", NULL, bad, strlen(bad), &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "invalid_calibration_request"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    /* restart: the endpoint's run is the newest in the store */
    qr_t_daemon_start_args(&d, 0, NULL, args);
    qr_t_request("GET", d.port, "/v1/host", NULL, NULL, 0, &r);
    doc = yyjson_read(r.body, r.body_len, 0);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "calibrated")));
    assert_string_equal(
        yyjson_get_str(yyjson_obj_get(yyjson_obj_get(root, "last_calibration"), "measured_at")),
        measured);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_then_daemon),
        cmocka_unit_test(test_endpoint_and_restart),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
