/* The Gemma 4 reference profile end to end (docs/REGISTRY.md "Gemma 4 reference profile"): the
 * real daemon (backend llama.cpp, the real llama-server) serves the three profile fixtures that
 * qr-gen-fixtures writes (gemma4-e4b-tiny: edge shape, per-layer embeddings, shared KV, 128K;
 * gemma4-26b-a4b-tiny: routed + shared experts, 256K; gemma4-31b-tiny: dense, 256K), bound to
 * their sizes by the manifests tests/cases/gemma4-profile/gemma4-*-tiny.json. Each size is treated
 * by its own declared capabilities: before any engine runs, the router plans audio only for the
 * size whose manifest declares it and refuses it with 422 for the others (naming the model's own
 * "no"), an audio chat request to such a size is refused before any engine process starts, while
 * the declaring size gets as far as its engine (which has no audio encoder in a tiny fixture and
 * says so); each size reports its own context (131072 or 262144) in both metadata views; MoE is
 * planned only for the MoE size. Then `quantum-runtime conformance --json` runs against each
 * size: it exits 0, no case fails, and the metadata, moe.metadata, experts.config, quantization
 * and speculative cases pass with the size's own numbers in their reasons. */
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

/* One profile size: its manifest id, declared context, class and audio input. */
static const struct size {
    const char *id;
    unsigned long ctx;
    bool moe, audio;
} SIZES[] = {
    {"gemma4-e4b-tiny", 131072, false, true},
    {"gemma4-26b-a4b-tiny", 262144, true, false},
    {"gemma4-31b-tiny", 262144, false, false},
};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])

static const char LIAR[] =
    "{\"schema_version\": \"quantum.runtime/model-manifest/v1alpha1\", \"id\": \"gemma4-liar\","
    " \"display_name\": \"Declares 8 experts, the file has 4\", \"source\": {\"provider\": "
    "\"test\", \"reference\": \"test\", \"revision\": \"generated\"}, \"backend\": {\"type\": "
    "\"llama.cpp\"}, \"artifacts\": [{\"uri\": \"models:gemma4moe-tiny.gguf\", \"backend\": "
    "\"llama.cpp\", \"format\": \"gguf\", \"role\": \"inference\"}], \"model\": {\"architecture\": "
    "\"gemma4\", \"parameter_class\": \"tiny\", \"quantization\": \"mostly_f16\", "
    "\"context_window\": 512, \"architecture_class\": \"moe\", \"experts\": {\"total\": 8, "
    "\"active\": 2}}, \"capabilities\": {\"text\": true, \"vision\": false, \"audio\": false, "
    "\"embeddings\": false, \"tools\": false, \"thinking\": false}, \"compatibility\": "
    "{\"min_runtime_version\": \"0.4.0-alpha.1\"}, \"state\": {\"install\": \"available\", "
    "\"verification\": \"unverified\", \"lifecycle\": \"active\"}, \"provenance\": "
    "{\"publisher\": \"test\"}}\n";

static int setup(void **st)
{
    (void) st;
    snprintf(dir, sizeof dir, "/tmp/qr-test-g4-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(dir))
        return -1;
    snprintf(models, sizeof models, "%s/models", dir);
    if (mkdir(models, 0700) != 0)
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_FIXTURES,
                   models,
                   "gemma4-e4b-tiny.gguf",
                   "gemma4-26b-a4b-tiny.gguf",
                   "gemma4-31b-tiny.gguf",
                   "gemma4moe-tiny.gguf",
                   NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "qr-gen-fixtures failed: %s\n", out ? out : "");
    free(out);
    if (rc != 0)
        return -1;
    /* a manifest whose expert counts are not the file's (8 declared, 4 in gemma4moe-tiny) */
    char reg[220], path[260];
    snprintf(reg, sizeof reg, "%s/registry", dir);
    snprintf(path, sizeof path, "%s/gemma4-liar.json", reg);
    FILE *f = mkdir(reg, 0700) == 0 ? fopen(path, "w") : NULL;
    if (!f || fputs(LIAR, f) < 0 || fclose(f) != 0)
        return -1;
    char dirs[512];
    snprintf(dirs, sizeof dirs, "%s/gemma4-profile:%s", QR_TEST_CASES, reg);
    const char *const args[] = {"--backend",
                                "llama.cpp",
                                "--models-dir",
                                models,
                                "--registry-dirs",
                                dirs,
                                "--llama-threads",
                                "1",
                                "--llama-ctx",
                                "1024",
                                NULL};
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

/* One request; the answer's JSON (NULL when not JSON), its status in *status. */
static yyjson_doc *call(const char *method, const char *path, const char *body, long *status)
{
    struct qr_t_resp r;
    qr_t_request(method, daemon_.port, path, NULL, body, body ? strlen(body) : 0, &r);
    *status = r.status;
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    qr_t_resp_free(&r);
    return d;
}

static const char *str_at(yyjson_doc *d, const char *ptr)
{
    return yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), ptr));
}

/* POST /v1/route for one size requiring one key: the status; *model_says is the model's own
 * claim ("supported"/"unsupported", "" when none) in the first rejection's reasons. */
static long route(const char *id, const char *key, char *model_says, size_t cap)
{
    char body[256];
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"capabilities\":[\"%s\"]}", id, key);
    long st = 0;
    yyjson_doc *d = call("POST", "/v1/route", body, &st);
    assert_non_null(d);
    snprintf(model_says, cap, "%s", "");
    if (st == 200) {
        assert_string_equal(str_at(d, "/plan/status"), "ok");
        assert_string_equal(str_at(d, "/plan/canonical_model_id"), id);
    } else {
        assert_int_equal(st, 422);
        assert_string_equal(str_at(d, "/error/code"), "no_compatible_backend");
        assert_string_equal(str_at(d, "/plan/missing_capabilities/0"), key);
        yyjson_val *r, *reasons = yyjson_ptr_get(yyjson_doc_get_root(d),
                                                 "/plan/rejected/0/failures/0/reasons");
        size_t i, max;
        yyjson_arr_foreach(reasons, i, max, r)
        {
            if (yyjson_equals_str(yyjson_obj_get(r, "source"), "model"))
                snprintf(model_says, cap, "%s", yyjson_get_str(yyjson_obj_get(r, "state")));
        }
    }
    yyjson_doc_free(d);
    return st;
}

/* Does GET /v1/loaded list a process for id? */
static bool loaded(const char *id)
{
    long st = 0;
    yyjson_doc *d = call("GET", "/v1/loaded", NULL, &st);
    assert_int_equal(st, 200);
    bool found = false;
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "models"), i, max, m)
    {
        found |= yyjson_equals_str(yyjson_obj_get(m, "model"), id);
    }
    yyjson_doc_free(d);
    return found;
}

/* Each size's own context in both views, and its own class and modalities in negotiation; runs
 * first, before any engine has reported on any model. */
static void test_negotiation_by_size(void **st)
{
    (void) st;
    for (size_t i = 0; i < N_SIZES; i++) {
        const struct size *z = &SIZES[i];
        char path[128], body[256], says[32];
        long status = 0;
        snprintf(path, sizeof path, "/v1/models/%s", z->id);
        yyjson_doc *d = call("GET", path, NULL, &status);
        assert_int_equal(status, 200);
        assert_int_equal(yyjson_get_uint(yyjson_obj_get(yyjson_doc_get_root(d), "context_length")),
                         z->ctx);
        assert_string_equal(str_at(d, "/model/model/architecture"), "gemma4");
        yyjson_doc_free(d);
        snprintf(body, sizeof body, "{\"model\":\"%s\"}", z->id);
        d = call("POST", "/api/show", body, &status);
        assert_int_equal(status, 200);
        assert_int_equal(yyjson_get_uint(yyjson_ptr_get(yyjson_doc_get_root(d),
                                                        "/model_info/gemma4.context_length")),
                         z->ctx);
        yyjson_doc_free(d);

        /* audio: planned only where declared; elsewhere refused by the model's own "no" */
        long a = route(z->id, "multimodal.audio", says, sizeof says);
        assert_int_equal(a, z->audio ? 200 : 422);
        if (!z->audio)
            assert_string_equal(says, "unsupported");
        assert_int_equal(route(z->id, "multimodal.vision", says, sizeof says), 200);
        assert_int_equal(route(z->id, "architecture.moe", says, sizeof says), z->moe ? 200 : 422);
        assert_int_equal(route(z->id, "architecture.dense", says, sizeof says), z->moe ? 422 : 200);
        /* every size declares tools, streamed tool calls, thinking and JSON output */
        assert_int_equal(route(z->id, "tools.calling", says, sizeof says), 200);
        assert_int_equal(route(z->id, "tools.streaming", says, sizeof says), 200);
        assert_int_equal(route(z->id, "reasoning.control", says, sizeof says), 200);
        assert_int_equal(route(z->id, "structured_output", says, sizeof says), 200);
    }

    /* an audio part to a size that does not declare audio: 422 before any engine starts */
    static const char AUDIO[] =
        "{\"model\":\"%s\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\",\"content\":[{"
        "\"type\":\"text\",\"text\":\"What do you hear?\"},{\"type\":\"input_audio\","
        "\"input_audio\":{\"data\":\"UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="
        "\",\"format\":\"wav\"}}]}]}";
    char body[512];
    long status = 0;
    snprintf(body, sizeof body, AUDIO, "gemma4-31b-tiny");
    yyjson_doc *d = call("POST", "/v1/chat/completions", body, &status);
    assert_int_equal(status, 422);
    assert_string_equal(str_at(d, "/error/code"), "capability_unsupported");
    assert_non_null(strstr(str_at(d, "/error/message"), "multimodal.audio"));
    yyjson_doc_free(d);
    assert_false(loaded("gemma4-31b-tiny"));
    /* an image by URL to a size that declares images: planned, but never handed to llama-server,
     * which would fetch it itself (a client-chosen URL): 422, and no engine starts */
    static const char IMAGE_URL[] =
        "{\"model\":\"gemma4-31b-tiny\",\"max_tokens\":4,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"What is this?\"},{\"type\":\"image_url\","
        "\"image_url\":{\"url\":\"http://127.0.0.1:9/x.png\"}}]}]}";
    d = call("POST", "/v1/chat/completions", IMAGE_URL, &status);
    assert_int_equal(status, 422);
    assert_string_equal(str_at(d, "/error/code"), "capability_unsupported");
    assert_non_null(strstr(str_at(d, "/error/message"), "given by URL is not fetched"));
    yyjson_doc_free(d);
    assert_false(loaded("gemma4-31b-tiny"));
    /* the size that declares audio is planned onto its engine, which has no audio encoder in a
     * tiny fixture and says so (llama.cpp /props): refused there, with the engine's reason */
    snprintf(body, sizeof body, AUDIO, "gemma4-e4b-tiny");
    d = call("POST", "/v1/chat/completions", body, &status);
    assert_int_equal(status, 422);
    assert_string_equal(str_at(d, "/error/code"), "capability_unsupported");
    assert_non_null(strstr(str_at(d, "/error/message"), "engine"));
    yyjson_doc_free(d);
    assert_true(loaded("gemma4-e4b-tiny"));
}

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

/* The case's reason when it passed; fails the test naming the case otherwise. */
static const char *passed(yyjson_val *root, const char *id)
{
    yyjson_val *c = find_case(root, id);
    if (!c)
        fail_msg("no case '%s' in the report", id);
    const char *s = yyjson_get_str(yyjson_obj_get(c, "status"));
    const char *why = yyjson_get_str(yyjson_obj_get(c, "reason"));
    if (!s || strcmp(s, "pass"))
        fail_msg("case '%s' on '%s': %s: %s", id, yyjson_get_str(yyjson_obj_get(root, "model")),
                 s ? s : "(none)", why ? why : "");
    return why;
}

static void test_conformance_by_size(void **st)
{
    (void) st;
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) daemon_.port);
    for (size_t i = 0; i < N_SIZES; i++) {
        const struct size *z = &SIZES[i];
        char *out = NULL, report[256];
        snprintf(report, sizeof report, "%s/report-%s.json", dir, z->id);
        /* random weights never form a tool call or finish a JSON document: the cases that judge
         * generated output are not selected; negotiation of those keys is checked above */
        char *argv[] = {QR_TEST_DAEMON,
                        "conformance",
                        "--model",
                        (char *) z->id,
                        "--url",
                        url,
                        "--report",
                        report,
                        "--skip",
                        "tools,tools.parallel,structured_output",
                        NULL};
        int rc = qr_t_run(argv, NULL, 120000, &out);
        size_t len = 0;
        char *text = qr_t_read_file(report, &len);
        yyjson_doc *d = text ? yyjson_read(text, len, 0) : NULL;
        free(text);
        if (!d)
            fail_msg("conformance on '%s' (rc %d) wrote no report: %s", z->id, rc, out ? out : "");
        yyjson_val *root = yyjson_doc_get_root(d);
        size_t k, max;
        yyjson_val *c;
        yyjson_arr_foreach(yyjson_obj_get(root, "cases"), k, max, c)
        {
            if (yyjson_equals_str(yyjson_obj_get(c, "status"), "fail"))
                fail_msg("case '%s' failed on '%s': %s", yyjson_get_str(yyjson_obj_get(c, "id")),
                         z->id, yyjson_get_str(yyjson_obj_get(c, "reason")));
        }
        assert_int_equal(rc, 0);
        assert_int_equal(yyjson_get_uint(yyjson_ptr_get(root, "/summary/failed")), 0);
        yyjson_arr_foreach(yyjson_obj_get(root, "cases"), k, max, c)
        {
            const char *id = yyjson_get_str(yyjson_obj_get(c, "id"));
            if (strcmp(id, "tools") && strcmp(id, "tools.parallel") &&
                strcmp(id, "structured_output"))
                continue;
            assert_string_equal(yyjson_get_str(yyjson_obj_get(c, "status")), "skip");
            assert_string_equal(yyjson_get_str(yyjson_obj_get(c, "reason")),
                                "not selected (--skip)");
            assert_int_equal(yyjson_get_len(yyjson_obj_get(c, "verifies")), 0);
        }
        assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "model")), z->id);
        assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "backend")), "llama.cpp");

        char want[96];
        snprintf(want, sizeof want, "architecture 'gemma4', context %lu;", z->ctx);
        assert_non_null(strstr(passed(root, "metadata"), want));
        const char *moe = passed(root, "moe.metadata");
        if (z->moe) {
            assert_non_null(strstr(moe, "MoE: 4 experts, 2 used, 1 shared"));
            assert_non_null(strstr(moe, "the placement plan sizes 4 experts (2 used)"));
        } else {
            assert_non_null(strstr(moe, "dense: no expert counts"));
            assert_non_null(strstr(moe, "the placement plan sizes no experts"));
        }
        assert_non_null(strstr(passed(root, "experts.config"),
                               z->moe ? "'architecture.moe' planned; 'architecture.dense' refused"
                                      : "'architecture.dense' planned; 'architecture.moe' "
                                        "refused"));
        assert_non_null(strstr(passed(root, "quantization"), "'gguf' (mostly_f16) is listed"));
        assert_non_null(strstr(passed(root, "speculative"), "no draft or MTP declared"));
        snprintf(want, sizeof want, "over context %lu", z->ctx);
        assert_non_null(strstr(passed(root, "context_limit"), want));
        passed(root, "identity");
        passed(root, "streaming");
        yyjson_doc_free(d);
        free(out);
    }
}

/* The case can fail: declared expert counts that are not the file's are caught. */
static void test_moe_metadata_catches_a_lie(void **st)
{
    (void) st;
    char url[64], report[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u", (unsigned) daemon_.port);
    snprintf(report, sizeof report, "%s/report-liar.json", dir);
    char *out = NULL;
    char *argv[] = {QR_TEST_DAEMON, "conformance", "--model", "gemma4-liar", "--url", url,
                    "--report",     report,        NULL};
    int rc = qr_t_run(argv, NULL, 120000, &out);
    free(out);
    assert_int_equal(rc, 1);
    size_t len = 0;
    char *text = qr_t_read_file(report, &len);
    yyjson_doc *d = text ? yyjson_read(text, len, 0) : NULL;
    free(text);
    assert_non_null(d);
    yyjson_val *c = find_case(yyjson_doc_get_root(d), "moe.metadata");
    assert_non_null(c);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(c, "status")), "fail");
    const char *why = yyjson_get_str(yyjson_obj_get(c, "reason"));
    assert_non_null(strstr(why, "the metadata says 8 experts (2 used), the placement plan sizes "
                                "4 (2 used) from the file"));
    yyjson_doc_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_negotiation_by_size),
        cmocka_unit_test(test_conformance_by_size),
        cmocka_unit_test(test_moe_metadata_catches_a_lie),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
