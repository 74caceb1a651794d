/* Calibration's pure parts and its place in the evidence store: the thread-count plan, the best
 * pick (ties to fewer threads), the fingerprint's stability, the class thresholds, the working-set
 * size, the total LLC from a made-up sysfs tree, the Result JSON, save/latest round trips and the
 * GET /v1/host fields; plus one small real bandwidth run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "gguf/gguf.h"
#include "host/calibrate.h"
#include "store/store.h"

static char root[256];

static void mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0700);
            *p = '/';
        }
    }
    mkdir(tmp, 0700);
}

static void put(const char *rel, const char *text)
{
    char path[PATH_MAX], dir[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void) state;
    snprintf(root, sizeof root, "/tmp/qr-calib-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
    (void) state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_plan(void **state)
{
    (void) state;
    uint32_t out[QR_CALIB_MAX_PLAN];
    const uint32_t budgets[] = {8, 4};
    /* 8 cores with SMT, both profile budgets below: 1, 4, 8, 16 */
    size_t n = qr_calib_plan(8, 16, budgets, 2, out, QR_CALIB_MAX_PLAN);
    assert_int_equal(n, 4);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 8);
    assert_int_equal(out[3], 16);
    /* 2 cores, no SMT: budgets above the CPUs are dropped, 1 and 2 stay, no duplicates */
    n = qr_calib_plan(2, 2, budgets, 2, out, QR_CALIB_MAX_PLAN);
    assert_int_equal(n, 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    /* one CPU, or nothing known: just 1 */
    assert_int_equal(qr_calib_plan(1, 1, NULL, 0, out, QR_CALIB_MAX_PLAN), 1);
    assert_int_equal(qr_calib_plan(0, 0, NULL, 0, out, QR_CALIB_MAX_PLAN), 1);
    assert_int_equal(out[0], 1);
    /* a quota of 2 CPUs on 8 cores: never more threads than CPUs */
    n = qr_calib_plan(8, 2, budgets, 2, out, QR_CALIB_MAX_PLAN);
    assert_int_equal(n, 2);
    assert_int_equal(out[1], 2);
    /* the cap holds */
    assert_int_equal(qr_calib_plan(8, 16, budgets, 2, out, 2), 2);
    assert_int_equal(out[1], 4);
}

static void test_best(void **state)
{
    (void) state;
    struct qr_calib_row rows[4] = {
        {.threads = 1, .ok = true, .decode_tps = 10.0},
        {.threads = 4, .ok = true, .decode_tps = 30.0},
        {.threads = 8, .ok = true, .decode_tps = 30.5}, /* within 2%: a tie, 4 wins */
        {.threads = 16, .ok = false, .decode_tps = 99.0},
    };
    assert_int_equal(qr_calib_best(rows, 4), 4);
    rows[2].decode_tps = 40.0; /* clearly better: 8 */
    assert_int_equal(qr_calib_best(rows, 4), 8);
    rows[0].ok = rows[1].ok = rows[2].ok = false;
    assert_int_equal(qr_calib_best(rows, 4), 0);
    assert_int_equal(qr_calib_best(rows, 0), 0);
}

static void test_fingerprint(void **state)
{
    (void) state;
    char a[17], b[17], c[17], d[17];
    const uint64_t gib = 1ull << 30;
    qr_calib_fingerprint("AMD EPYC", 8, 16, 64 * gib - (100u << 20), "0.7.0", a);
    qr_calib_fingerprint("AMD EPYC", 8, 16, 64 * gib - (300u << 20), "0.7.0", b);
    assert_int_equal(strlen(a), QR_CALIB_FINGERPRINT_LEN);
    assert_int_equal(strspn(a, "0123456789abcdef"), QR_CALIB_FINGERPRINT_LEN);
    assert_string_equal(a, b); /* memory rounded to GiB: a few MiB of kernel reserve is no change */
    qr_calib_fingerprint("AMD EPYC", 8, 16, 64 * gib - (100u << 20), "0.7.1", c);
    assert_string_not_equal(a, c); /* another engine is another calibration */
    qr_calib_fingerprint("AMD EPYC", 4, 16, 64 * gib - (100u << 20), "0.7.0", d);
    assert_string_not_equal(a, d); /* fewer usable cores too */
    /* stable across runs and builds: the same text always hashes the same */
    qr_calib_fingerprint("AMD EPYC", 8, 16, 64 * gib - (100u << 20), "0.7.0", b);
    assert_string_equal(a, b);
}

static void test_class_and_working_set(void **state)
{
    (void) state;
    assert_string_equal(qr_calib_class(0), "unknown");
    assert_string_equal(qr_calib_class(NAN), "unknown");
    assert_string_equal(qr_calib_class(12.0), "low");
    assert_string_equal(qr_calib_class(QR_CALIB_CLASS_MEDIUM_GBS), "medium");
    assert_string_equal(qr_calib_class(60.0), "medium");
    assert_string_equal(qr_calib_class(QR_CALIB_CLASS_HIGH_GBS), "high");
    const uint64_t mib = 1u << 20, gib = 1ull << 30;
    assert_true(qr_calib_working_set(32 * mib, 64 * gib) == 256 * mib); /* the floor */
    assert_true(qr_calib_working_set(256 * mib, 64 * gib) == 1 * gib);  /* 4x a big L3 */
    assert_true(qr_calib_working_set(2 * gib, 64 * gib) == 4 * gib);    /* the cap */
    assert_true(qr_calib_working_set(0, 512 * mib) == 128 * mib);       /* small memory */
    assert_true(qr_calib_working_set(0, 32 * mib) == 16 * mib);         /* the minimum */
}

static void test_llc_from_sysfs(void **state)
{
    (void) state;
    /* 4 CPUs, two L3 instances of 16 MiB (0-1, 2-3); L1i is not the LLC; cpu2 offline (no cache
     * directory) still counts its instance through cpu3 */
    static const char *const lists[] = {"0-1", "0-1", "2-3", "2-3"};
    for (int cpu = 0; cpu < 4; cpu++) {
        if (cpu == 2)
            continue;
        char rel[128];
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index0/level", cpu);
        put(rel, "1\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index0/type", cpu);
        put(rel, "Instruction\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index0/size", cpu);
        put(rel, "32K\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index1/level", cpu);
        put(rel, "3\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index1/type", cpu);
        put(rel, "Unified\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index1/size", cpu);
        put(rel, "16384K\n");
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/cache/index1/shared_cpu_list", cpu);
        put(rel, lists[cpu]);
    }
    put("sys/devices/system/cpu/cpu2/online", "0\n");
    char sys[300];
    snprintf(sys, sizeof sys, "%s/sys", root);
    struct qr_host_roots r = {.sys = sys};
    assert_true(qr_calib_llc_bytes(&r) == 32ull << 20);
    snprintf(sys, sizeof sys, "%s/nothing", root);
    assert_true(qr_calib_llc_bytes(&r) == 0);
}

static void fill_result(struct qr_calib_result *r, const char *engine, bool with_rows)
{
    memset(r, 0, sizeof *r);
    r->started_ms = 1760000000000;
    r->finished_ms = 1760000004321;
    snprintf(r->id.cpu_model, sizeof r->id.cpu_model, "Test CPU");
    r->id.physical_cores = 2;
    r->id.logical_cpus = 4;
    r->id.memory_total = 8ull << 30;
    snprintf(r->id.engine_version, sizeof r->id.engine_version, "%s", engine);
    qr_calib_fingerprint(r->id.cpu_model, 2, 4, r->id.memory_total, engine, r->id.fingerprint);
    r->bw = (struct qr_calib_bandwidth){.working_set_bytes = 256u << 20,
                                        .llc_bytes = 32u << 20,
                                        .threads = 2,
                                        .passes = 3,
                                        .read_gbs = 30.5,
                                        .triad_gbs = 28.25};
    r->n_plan = qr_calib_plan(2, 4, NULL, 0, r->plan, QR_CALIB_MAX_PLAN);
    if (with_rows) {
        snprintf(r->model, sizeof r->model, "/models/tiny.gguf");
        r->rows[0] = (struct qr_calib_row){
            .threads = 1, .ok = true, .prefill_tps = 100, .decode_tps = 20, .repetitions = 1};
        r->rows[1] = (struct qr_calib_row){
            .threads = 2, .ok = true, .prefill_tps = 190, .decode_tps = 35, .repetitions = 2};
        r->rows[2] = (struct qr_calib_row){.threads = 4, .ok = false};
        snprintf(r->rows[2].error, sizeof r->rows[2].error, "engine not healthy in time");
        r->n_rows = 3;
        r->best_threads = qr_calib_best(r->rows, r->n_rows);
    }
}

static void test_result_json(void **state)
{
    (void) state;
    struct qr_calib_result *r = malloc(sizeof *r);
    fill_result(r, "0.7.0", true);
    char *s = qr_calib_result_write(r);
    assert_non_null(s);
    yyjson_doc *d = yyjson_read(s, strlen(s), 0);
    yyjson_val *o = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(o, "schema_version")),
                        "quantum.runtime/host-calibration/v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(o, "measured_at")),
                        "2025-10-09T08:53:24.321Z");
    assert_int_equal(yyjson_get_int(yyjson_obj_get(o, "duration_ms")), 4321);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(o, "best_threads")), 2);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(o, "memory_bandwidth_class")), "medium");
    assert_true(yyjson_get_uint(yyjson_obj_get(o, "memory_read_bytes_per_sec")) == 30500000000ull);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(o, "host_fingerprint")), r->id.fingerprint);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(o, "model")), "/models/tiny.gguf");
    yyjson_val *plan = yyjson_obj_get(o, "plan");
    assert_int_equal(yyjson_arr_size(plan), 3);
    yyjson_val *samples = yyjson_obj_get(o, "samples");
    assert_int_equal(yyjson_arr_size(samples), 3);
    yyjson_val *s1 = yyjson_arr_get(samples, 1);
    assert_true(yyjson_get_num(yyjson_obj_get(s1, "decode_tokens_per_sec")) == 35.0);
    yyjson_val *s2 = yyjson_arr_get(samples, 2);
    assert_false(yyjson_get_bool(yyjson_obj_get(s2, "ok")));
    assert_true(yyjson_is_null(yyjson_obj_get(s2, "decode_tokens_per_sec")));
    assert_string_equal(yyjson_get_str(yyjson_obj_get(s2, "error")), "engine not healthy in time");
    yyjson_doc_free(d);
    free(s);
    /* a host-only run: model null, no samples, best 0 */
    fill_result(r, "0.7.0", false);
    s = qr_calib_result_write(r);
    d = yyjson_read(s, strlen(s), 0);
    o = yyjson_doc_get_root(d);
    assert_true(yyjson_is_null(yyjson_obj_get(o, "model")));
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(o, "samples")), 0);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(o, "best_threads")), 0);
    yyjson_doc_free(d);
    free(s);
    free(r);
}

static void test_store_round_trip(void **state)
{
    (void) state;
    char dir[300], path[400];
    snprintf(dir, sizeof dir, "%s/state", root);
    mkdirs(dir);
    snprintf(path, sizeof path, "%s/%s", dir, QR_STORE_FILE);
    struct qr_store *s = NULL;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_store_open(path, NULL, &s, NULL, &diag), QR_OK);
    struct qr_calib_result *r = malloc(sizeof *r);
    fill_result(r, "0.7.0", true);
    char fp[17];
    snprintf(fp, sizeof fp, "%s", r->id.fingerprint);
    int64_t id = 0;
    assert_int_equal(qr_calib_save(s, r, &id, &diag), QR_OK);
    assert_true(id > 0);
    /* a newer host-only run: the newest overall, but not one with a decode rate */
    fill_result(r, "0.7.0", false);
    r->finished_ms += 60000;
    assert_int_equal(qr_calib_save(s, r, NULL, &diag), QR_OK);
    char *json = NULL;
    uint32_t threads = 0;
    int64_t when = 0;
    assert_int_equal(qr_calib_latest(s, fp, "0.7.0", true, &json, &threads, &when, &diag), QR_OK);
    assert_int_equal(threads, 2);
    assert_true(when == 1760000004321);
    assert_non_null(strstr(json, "\"best_threads\":2"));
    free(json);
    json = NULL;
    assert_int_equal(qr_calib_latest(s, fp, "0.7.0", false, &json, &threads, &when, &diag), QR_OK);
    assert_true(when == 1760000064321);
    assert_non_null(strstr(json, "\"model\":null"));
    free(json);
    /* another engine version: nothing */
    assert_int_equal(qr_calib_latest(s, fp, "0.8.0", false, NULL, NULL, NULL, &diag),
                     QR_ERR_NOT_FOUND);
    qr_store_close(s);
    /* reopened (a restart): still there, and the /v1/host document says so */
    assert_int_equal(qr_store_open(path, NULL, &s, NULL, &diag), QR_OK);
    assert_int_equal(qr_calib_latest(s, fp, "0.7.0", true, NULL, &threads, NULL, &diag), QR_OK);
    assert_int_equal(threads, 2);
    qr_store_close(s);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, o);
    yyjson_mut_obj_add_bool(doc, o, "calibrated", false);
    yyjson_mut_obj_add_null(doc, o, "last_calibration");
    fill_result(r, "0.7.0", false);
    qr_calib_document_last(doc, dir, &r->id);
    assert_true(yyjson_mut_get_bool(yyjson_mut_obj_get(o, "calibrated")));
    yyjson_mut_val *last = yyjson_mut_obj_get(o, "last_calibration");
    assert_true(yyjson_mut_is_obj(last));
    assert_string_equal(yyjson_mut_get_str(yyjson_mut_obj_get(last, "host_fingerprint")), fp);
    yyjson_mut_doc_free(doc);
    /* an empty state dir: stays false, and no store file is created */
    doc = yyjson_mut_doc_new(NULL);
    o = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, o);
    yyjson_mut_obj_add_bool(doc, o, "calibrated", false);
    snprintf(dir, sizeof dir, "%s/empty", root);
    mkdirs(dir);
    qr_calib_document_last(doc, dir, &r->id);
    assert_false(yyjson_mut_get_bool(yyjson_mut_obj_get(o, "calibrated")));
    snprintf(path, sizeof path, "%s/%s", dir, QR_STORE_FILE);
    assert_int_not_equal(access(path, F_OK), 0);
    yyjson_mut_doc_free(doc);
    free(r);
}

static void test_bandwidth_small(void **state)
{
    (void) state;
    struct qr_calib_bandwidth bw;
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_calib_bandwidth(16u << 20, 2, 300, NULL, &bw, &diag), QR_OK);
    assert_true(bw.passes >= 1 && bw.passes <= 5);
    assert_true(bw.read_gbs > 0 && bw.triad_gbs > 0);
    assert_int_equal(bw.threads, 2);
    assert_true(bw.working_set_bytes > (15u << 20) && bw.working_set_bytes <= (16u << 20));
    volatile sig_atomic_t cancel = 1;
    assert_int_equal(qr_calib_bandwidth(16u << 20, 1, 300, &cancel, &bw, &diag), QR_ERR_CANCELLED);
    assert_int_equal(qr_calib_bandwidth(1024, 1, 300, NULL, &bw, &diag), QR_ERR_INVALID);
}

static void test_default_model(void **state)
{
    (void) state;
    assert_int_equal(qr_calib_model_layers(0), 1);
    assert_int_equal(qr_calib_model_layers(256ull << 20), 8); /* 32 MiB per layer */
    assert_int_equal(qr_calib_model_layers(1ull << 40), 64);  /* the cap */
    char path[300];
    snprintf(path, sizeof path, "%s/cal.gguf", root);
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_calib_model_write(path, 1, &diag), QR_OK);
    struct qr_gguf *g = NULL;
    assert_int_equal(qr_gguf_open(path, NULL, &diag, &g), QR_OK);
    uint32_t blocks = 0, embd = 0;
    assert_int_equal(qr_gguf_get_u32(g, "llama.block_count", &blocks), QR_OK);
    assert_int_equal(qr_gguf_get_u32(g, "llama.embedding_length", &embd), QR_OK);
    assert_int_equal(blocks, 1);
    assert_int_equal(embd, 1024);
    /* token_embd, output_norm, output + 9 per layer */
    assert_int_equal(qr_gguf_tensor_count(g), 3 + 9);
    assert_non_null(qr_gguf_find_tensor(g, "blk.0.ffn_down.weight"));
    qr_gguf_close(g);
    /* no temporary file left behind */
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmp-%d", path, (int) getpid());
    assert_int_not_equal(access(tmp, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_best),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_class_and_working_set),
        cmocka_unit_test(test_llc_from_sysfs),
        cmocka_unit_test(test_result_json),
        cmocka_unit_test(test_store_round_trip),
        cmocka_unit_test(test_bandwidth_small),
        cmocka_unit_test(test_default_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
