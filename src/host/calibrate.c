/* Calibration (calibrate.h): the plan, the best pick, the fingerprint and the class (pure), the
 * host identity behind the fingerprint, the orchestration of one run within its time budget, the
 * Result document and its place in the evidence store. The measurements themselves are in
 * calib_engine.c. */
#include "host/calibrate.h"

#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <yyjson.h>

#include "backend/llamacpp/engine.h"
#include "core/arena.h"
#include "gguf/sha256.h"
#include "store/store.h"

#define PROBE_TIMEOUT_MS  5000u
#define PREFIX_LEVELS     8u
#define MAX_LLC_INSTANCES 256u
#define GIB               (UINT64_C(1) << 30)

/* ---- pure parts ---- */

size_t qr_calib_plan(uint32_t physical, uint32_t logical, const uint32_t *budgets, size_t n_budgets,
                     uint32_t *out, size_t cap)
{
    physical = physical ? physical : 1;
    logical = logical ? logical : 1;
    if (physical > logical)
        physical = logical; /* a quota below the cores: never more threads than CPUs */
    uint32_t cand[QR_CALIB_MAX_PLAN + 64];
    size_t n = 0;
    cand[n++] = 1;
    cand[n++] = physical;
    if (logical > physical)
        cand[n++] = logical;
    for (size_t i = 0; i < n_budgets && n < QR_ARRAY_LEN(cand); i++)
        if (budgets[i] >= 1 && budgets[i] <= logical)
            cand[n++] = budgets[i];
    /* insertion sort, then unique */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && cand[k - 1] > cand[k]; k--) {
            uint32_t t = cand[k];
            cand[k] = cand[k - 1];
            cand[k - 1] = t;
        }
    size_t w = 0;
    for (size_t i = 0; i < n && w < cap; i++)
        if (w == 0 || out[w - 1] != cand[i])
            out[w++] = cand[i];
    return w;
}

uint32_t qr_calib_best(const struct qr_calib_row *rows, size_t n)
{
    double top = 0;
    for (size_t i = 0; i < n; i++)
        if (rows[i].ok && rows[i].decode_tps > top)
            top = rows[i].decode_tps;
    if (top <= 0)
        return 0;
    uint32_t best = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].ok || rows[i].decode_tps < top * (1.0 - QR_CALIB_TIE_PCT / 100.0))
            continue;
        if (best == 0 || rows[i].threads < best)
            best = rows[i].threads;
    }
    return best;
}

void qr_calib_fingerprint(const char *cpu_model, uint32_t physical, uint32_t logical,
                          uint64_t memory_total, const char *engine_version, char *out)
{
    char text[512];
    int n = snprintf(text, sizeof text, "cpu=%s\ncores=%u/%u\nmemory_gib=%" PRIu64 "\nengine=%s\n",
                     cpu_model ? cpu_model : "", physical, logical, (uint64_t) (memory_total / GIB),
                     engine_version ? engine_version : "");
    size_t len = n < 0 ? 0 : (size_t) n >= sizeof text ? sizeof text - 1 : (size_t) n;
    uint8_t digest[QR_SHA256_LEN];
    qr_sha256(text, len, digest);
    char hex[QR_SHA256_HEX];
    qr_sha256_hex(digest, hex);
    memcpy(out, hex, QR_CALIB_FINGERPRINT_LEN);
    out[QR_CALIB_FINGERPRINT_LEN] = '\0';
}

const char *qr_calib_class(double read_gbs)
{
    if (!(read_gbs > 0))
        return "unknown";
    if (read_gbs >= QR_CALIB_CLASS_HIGH_GBS)
        return "high";
    if (read_gbs >= QR_CALIB_CLASS_MEDIUM_GBS)
        return "medium";
    return "low";
}

uint64_t qr_calib_working_set(uint64_t llc_bytes, uint64_t memory_available)
{
    uint64_t ws = llc_bytes * 4u;
    if (ws < QR_CALIB_MIN_WORKING_SET)
        ws = QR_CALIB_MIN_WORKING_SET;
    if (ws > QR_CALIB_MAX_WORKING_SET)
        ws = QR_CALIB_MAX_WORKING_SET;
    if (memory_available && ws > memory_available / 4u)
        ws = memory_available / 4u;
    if (ws < (16u << 20))
        ws = 16u << 20;
    return ws;
}

/* ---- host facts ---- */

static uint64_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s)
        return 0;
    if (*end == 'K')
        v <<= 10;
    else if (*end == 'M')
        v <<= 20;
    else if (*end == 'G')
        v <<= 30;
    return v;
}

uint64_t qr_calib_llc_bytes(const struct qr_host_roots *roots)
{
    const char *sys = roots && roots->sys ? roots->sys : "/sys";
    char path[PATH_MAX], buf[256];
    /* the highest level of cpu0 names the LLC index */
    int best_level = 0;
    char best_index[32] = "";
    for (int i = 0; i < 16; i++) {
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu0/cache/index%d/level", sys, i);
        if (!qr_host_read_file(path, buf, sizeof buf))
            break;
        int level = atoi(buf);
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu0/cache/index%d/type", sys, i);
        if (qr_host_read_file(path, buf, sizeof buf) && !strcmp(buf, "Instruction"))
            continue;
        if (level > best_level) {
            best_level = level;
            snprintf(best_index, sizeof best_index, "index%d", i);
        }
    }
    if (!best_level)
        return 0;
    /* every online CPU's instance of that level, counted once per shared_cpu_list */
    char(*lists)[128] = calloc(MAX_LLC_INSTANCES, sizeof *lists);
    if (!lists)
        return 0;
    size_t n_lists = 0;
    uint64_t total = 0;
    for (int cpu = 0; cpu < (int) QR_HOST_MAX_CPUS; cpu++) {
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cache/%s/size", sys, cpu,
                 best_index);
        if (!qr_host_read_file(path, buf, sizeof buf)) {
            snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", sys, cpu);
            if (access(path, F_OK) != 0)
                break; /* past the last CPU */
            continue;  /* offline CPU: no cache directory */
        }
        uint64_t size = parse_size(buf);
        char list[128];
        snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/cache/%s/shared_cpu_list", sys,
                 cpu, best_index);
        if (!qr_host_read_file(path, list, sizeof list))
            snprintf(list, sizeof list, "cpu%d", cpu);
        bool seen = false;
        for (size_t i = 0; i < n_lists && !seen; i++)
            seen = !strcmp(lists[i], list);
        if (seen)
            continue;
        if (n_lists < MAX_LLC_INSTANCES)
            snprintf(lists[n_lists++], sizeof *lists, "%s", list);
        total += size;
    }
    free(lists);
    return total;
}

void qr_calib_find_prefix(char *out, size_t cap)
{
    out[0] = '\0';
    char dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0)
        return;
    dir[n] = '\0';
    for (unsigned level = 0; level < PREFIX_LEVELS; level++) {
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir)
            return;
        *slash = '\0';
        char probe[PATH_MAX + 64];
        snprintf(probe, sizeof probe, "%s/.deps/llama/bin/llama-server", dir);
        if (access(probe, X_OK) == 0) {
            snprintf(out, cap, "%s", dir);
            return;
        }
    }
}

void qr_calib_identity(const struct qr_host_roots *roots, const char *engine_path,
                       const char *prefix, const char *engine_version,
                       struct qr_calib_identity *out)
{
    memset(out, 0, sizeof *out);
    struct qr_host_profile *p = malloc(sizeof *p);
    struct qr_host_limits *l = malloc(sizeof *l);
    if (p && l) {
        qr_host_discover(roots, p, l);
        snprintf(out->cpu_model, sizeof out->cpu_model, "%s", p->model_name);
        out->physical_cores =
            l->physical_cores_allowed ? l->physical_cores_allowed : p->physical_cores;
        out->logical_cpus = l->effective_logical_cpus;
        if (out->physical_cores > out->logical_cpus)
            out->physical_cores = out->logical_cpus; /* a quota below the cores */
        out->memory_total = p->memory_total;
        out->memory_available = p->memory_available;
        if (l->memory_max_bytes && l->memory_max_bytes < out->memory_available)
            out->memory_available = l->memory_max_bytes;
    }
    free(p);
    free(l);
    if (engine_version) {
        snprintf(out->engine_version, sizeof out->engine_version, "%s",
                 *engine_version ? engine_version : "unknown");
        qr_calib_fingerprint(out->cpu_model, out->physical_cores, out->logical_cpus,
                             out->memory_total, out->engine_version, out->fingerprint);
        return;
    }
    char pre[PATH_MAX];
    if (!prefix) {
        qr_calib_find_prefix(pre, sizeof pre);
        prefix = pre[0] ? pre : NULL;
    }
    struct qr_llama_engine e;
    memset(&e, 0, sizeof e);
    snprintf(out->engine_version, sizeof out->engine_version, "unknown");
    if (qr_llama_engine_find(engine_path && *engine_path ? engine_path : NULL, prefix, NULL, &e) ==
        QR_OK) {
        snprintf(out->engine_path, sizeof out->engine_path, "%s", e.path);
        if (qr_llama_engine_probe(&e, PROBE_TIMEOUT_MS, NULL) == QR_OK && e.version[0])
            snprintf(out->engine_version, sizeof out->engine_version, "%s", e.version);
    }
    qr_calib_fingerprint(out->cpu_model, out->physical_cores, out->logical_cpus, out->memory_total,
                         out->engine_version, out->fingerprint);
}

/* ---- one run ---- */

static void add_warning(struct qr_calib_result *r, const char *text)
{
    if (r->n_warnings < QR_ARRAY_LEN(r->warnings))
        snprintf(r->warnings[r->n_warnings++], sizeof r->warnings[0], "%s", text);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void progress(const struct qr_calib_opts *o, const char *stage, unsigned done,
                     unsigned total)
{
    if (o->progress)
        o->progress(o->progress_arg, stage, done, total);
}

enum qr_err qr_calib_run(const struct qr_calib_opts *o, struct qr_calib_result *out,
                         struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    out->started_ms = wall_ms();
    int64_t t0 = qr_calib_now_ms();
    uint32_t budget = o->budget_ms ? o->budget_ms : QR_CALIB_DEFAULT_BUDGET_MS;
    budget = budget < QR_CALIB_MIN_BUDGET_MS   ? QR_CALIB_MIN_BUDGET_MS
             : budget > QR_CALIB_MAX_BUDGET_MS ? QR_CALIB_MAX_BUDGET_MS
                                               : budget;
    out->budget_ms = budget;
    out->n_predict = o->n_predict ? o->n_predict : QR_CALIB_DEFAULT_N_PREDICT;
    int64_t deadline = t0 + budget;
    qr_calib_identity(o->roots, o->engine_path, o->prefix, NULL, &out->id);
    bool engine = o->model && *o->model;
    if (engine)
        snprintf(out->model, sizeof out->model, "%s", o->model);
    if (engine && !out->id.engine_path[0])
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no llama-server found (set llama_server)");
    if (engine && access(o->model, R_OK) != 0)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "cannot read model '%s'", o->model);
    out->n_plan = qr_calib_plan(out->id.physical_cores, out->id.logical_cpus, o->budgets,
                                o->n_budgets, out->plan, QR_CALIB_MAX_PLAN);
    unsigned total = 1u + (engine ? (unsigned) out->n_plan : 0u);
    /* stage 1: memory, at most a fifth of the budget (all of it for a host-only run, max 10 s) */
    progress(o, "memory", 0, total);
    out->bw.llc_bytes = qr_calib_llc_bytes(o->roots);
    uint64_t ws = o->working_set
                      ? o->working_set
                      : qr_calib_working_set(out->bw.llc_bytes, out->id.memory_available);
    uint32_t bw_budget = engine ? budget / 5u : budget;
    if (bw_budget > 10000u)
        bw_budget = 10000u;
    uint64_t llc = out->bw.llc_bytes;
    enum qr_err err =
        qr_calib_bandwidth(ws, out->id.physical_cores, bw_budget, o->cancel, &out->bw, diag);
    out->bw.llc_bytes = llc;
    if (err)
        return err;
    if (!llc)
        add_warning(out, "last-level cache size unknown: working set is the 256 MiB minimum");
    else if (out->bw.working_set_bytes < llc * 4u)
        add_warning(out, "memory is small: working set below 4x the last-level cache");
    /* stage 2: one engine run per thread count, each with an equal share of what is left */
    for (size_t i = 0; engine && i < out->n_plan; i++) {
        char stage[32];
        snprintf(stage, sizeof stage, "threads %u", out->plan[i]);
        progress(o, stage, 1u + (unsigned) i, total);
        if (o->cancel && *o->cancel)
            return qr_diag_set(diag, QR_ERR_CANCELLED, "calibration cancelled");
        int64_t left = deadline - qr_calib_now_ms();
        if (left < 1000) {
            out->budget_exhausted = true;
            break;
        }
        int64_t row_deadline = qr_calib_now_ms() + left / (int64_t) (out->n_plan - i);
        struct qr_calib_row *row = &out->rows[out->n_rows++];
        if (qr_calib_engine_row(out->id.engine_path, o->model, out->plan[i], out->n_predict,
                                row_deadline, o->cancel, row) == QR_ERR_CANCELLED)
            return qr_diag_set(diag, QR_ERR_CANCELLED, "calibration cancelled");
    }
    if (out->budget_exhausted)
        add_warning(out, "time budget exhausted: not every thread count was measured");
    if (!engine)
        add_warning(out, "no model: memory bandwidth only (pass a GGUF model for tokens/s)");
    out->best_threads = qr_calib_best(out->rows, out->n_rows);
    if (engine && !out->best_threads)
        add_warning(out, "no thread count produced a measurement");
    progress(o, "done", total, total);
    out->finished_ms = wall_ms();
    return QR_OK;
}

/* ---- the Result document ---- */

static bool add_time(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *key, int64_t ms)
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[32], t[48];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(t, sizeof t, "%s.%03dZ", base, (int) (ms % 1000));
    return yyjson_mut_obj_add_strcpy(doc, o, key, t);
}

static bool add_rate(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *key, double v)
{
    return v > 0 && isfinite(v) ? yyjson_mut_obj_add_real(doc, o, key, round(v * 100.0) / 100.0)
                                : yyjson_mut_obj_add_null(doc, o, key);
}

static bool add_row(yyjson_mut_doc *doc, yyjson_mut_val *arr, const struct qr_calib_row *r)
{
    yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
    bool ok = o && yyjson_mut_obj_add_uint(doc, o, "threads", r->threads) &&
              yyjson_mut_obj_add_bool(doc, o, "ok", r->ok) &&
              add_rate(doc, o, "prefill_tokens_per_sec", r->ok ? r->prefill_tps : 0) &&
              add_rate(doc, o, "decode_tokens_per_sec", r->ok ? r->decode_tps : 0) &&
              yyjson_mut_obj_add_uint(doc, o, "prompt_tokens", r->prompt_tokens) &&
              yyjson_mut_obj_add_uint(doc, o, "predicted_tokens", r->predicted_tokens) &&
              yyjson_mut_obj_add_uint(doc, o, "repetitions", r->repetitions) &&
              yyjson_mut_obj_add_int(doc, o, "load_ms", r->load_ms) &&
              yyjson_mut_obj_add_int(doc, o, "duration_ms", r->duration_ms);
    if (ok && r->error[0])
        ok = yyjson_mut_obj_add_strcpy(doc, o, "error", r->error);
    return ok;
}

enum qr_err qr_calib_result_json(const struct qr_calib_result *r, yyjson_mut_doc *doc,
                                 yyjson_mut_val *obj)
{
    const struct qr_calib_bandwidth *bw = &r->bw;
    bool ok = yyjson_mut_obj_add_str(doc, obj, "schema_version", QR_HOST_CALIBRATION_SCHEMA) &&
              add_time(doc, obj, "measured_at", r->finished_ms ? r->finished_ms : r->started_ms) &&
              yyjson_mut_obj_add_int(doc, obj, "duration_ms",
                                     r->finished_ms ? r->finished_ms - r->started_ms : 0) &&
              add_time(doc, obj, "started_at", r->started_ms) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "host_fingerprint", r->id.fingerprint) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "engine_version", r->id.engine_version);
    yyjson_mut_val *h = ok ? yyjson_mut_obj_add_obj(doc, obj, "host") : NULL;
    ok = h && yyjson_mut_obj_add_strcpy(doc, h, "cpu_model", r->id.cpu_model) &&
         yyjson_mut_obj_add_uint(doc, h, "physical_cores_usable", r->id.physical_cores) &&
         yyjson_mut_obj_add_uint(doc, h, "logical_cpus_usable", r->id.logical_cpus) &&
         yyjson_mut_obj_add_uint(doc, h, "memory_total_bytes", r->id.memory_total);
    ok = ok && (r->model[0] ? yyjson_mut_obj_add_strcpy(doc, obj, "model", r->model)
                            : yyjson_mut_obj_add_null(doc, obj, "model"));
    ok = ok && yyjson_mut_obj_add_uint(doc, obj, "best_threads", r->best_threads) &&
         yyjson_mut_obj_add_uint(doc, obj, "memory_read_bytes_per_sec",
                                 (uint64_t) (bw->read_gbs * 1e9)) &&
         yyjson_mut_obj_add_uint(doc, obj, "memory_triad_bytes_per_sec",
                                 (uint64_t) (bw->triad_gbs * 1e9)) &&
         yyjson_mut_obj_add_str(doc, obj, "memory_bandwidth_class", qr_calib_class(bw->read_gbs));
    yyjson_mut_val *m = ok ? yyjson_mut_obj_add_obj(doc, obj, "memory") : NULL;
    ok = m && add_rate(doc, m, "read_gbs", bw->read_gbs) &&
         add_rate(doc, m, "triad_gbs", bw->triad_gbs) &&
         yyjson_mut_obj_add_uint(doc, m, "working_set_bytes", bw->working_set_bytes) &&
         yyjson_mut_obj_add_uint(doc, m, "llc_bytes", bw->llc_bytes) &&
         yyjson_mut_obj_add_uint(doc, m, "threads", bw->threads) &&
         yyjson_mut_obj_add_uint(doc, m, "passes", bw->passes) &&
         yyjson_mut_obj_add_int(doc, m, "duration_ms", bw->duration_ms);
    yyjson_mut_val *plan = ok ? yyjson_mut_obj_add_arr(doc, obj, "plan") : NULL;
    ok = plan != NULL;
    for (size_t i = 0; ok && i < r->n_plan; i++)
        ok = yyjson_mut_arr_add_uint(doc, plan, r->plan[i]);
    yyjson_mut_val *samples = ok ? yyjson_mut_obj_add_arr(doc, obj, "samples") : NULL;
    ok = samples != NULL;
    for (size_t i = 0; ok && i < r->n_rows; i++)
        ok = add_row(doc, samples, &r->rows[i]);
    ok = ok && yyjson_mut_obj_add_uint(doc, obj, "n_predict", r->n_predict) &&
         yyjson_mut_obj_add_uint(doc, obj, "budget_ms", r->budget_ms) &&
         yyjson_mut_obj_add_bool(doc, obj, "budget_exhausted", r->budget_exhausted) &&
         yyjson_mut_obj_add_uint(doc, obj, "checksum", bw->checksum);
    if (ok && r->n_warnings) {
        yyjson_mut_val *w = yyjson_mut_obj_add_arr(doc, obj, "warnings");
        ok = w != NULL;
        for (size_t i = 0; ok && i < r->n_warnings; i++)
            ok = yyjson_mut_arr_add_strcpy(doc, w, r->warnings[i]);
    }
    return ok ? QR_OK : QR_ERR_NOMEM;
}

char *qr_calib_result_write(const struct qr_calib_result *r)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    char *s = NULL;
    if (root) {
        yyjson_mut_doc_set_root(doc, root);
        if (qr_calib_result_json(r, doc, root) == QR_OK)
            s = yyjson_mut_write(doc, 0, NULL);
    }
    yyjson_mut_doc_free(doc);
    return s;
}

/* ---- the evidence store ---- */

static const struct qr_calib_row *best_row(const struct qr_calib_result *r)
{
    for (size_t i = 0; r->best_threads && i < r->n_rows; i++)
        if (r->rows[i].ok && r->rows[i].threads == r->best_threads)
            return &r->rows[i];
    return NULL;
}

enum qr_err qr_calib_save(struct qr_store *s, const struct qr_calib_result *r, int64_t *out_id,
                          struct qr_diag *diag)
{
    char *json = qr_calib_result_write(r);
    if (!json)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    const struct qr_calib_row *b = best_row(r);
    struct qr_store_calibration rec = {
        .time_ms = r->finished_ms ? r->finished_ms : r->started_ms,
        .host_fingerprint = r->id.fingerprint,
        .engine_version = r->id.engine_version,
        .model = r->model[0] ? r->model : NULL,
        .threads = (int) (b               ? b->threads
                          : r->bw.threads ? r->bw.threads
                                          : 1),
        .prefill_tps = b ? b->prefill_tps : NAN,
        .decode_tps = b ? b->decode_tps : NAN,
        .mem_bw_gbs = r->bw.read_gbs > 0 ? r->bw.read_gbs : NAN,
        .raw_json = json,
    };
    enum qr_err err = qr_store_calibration_add(s, &rec, out_id, diag);
    free(json);
    return err;
}

enum qr_err qr_calib_latest(struct qr_store *s, const char *fingerprint, const char *engine_version,
                            bool need_engine, char **out_json, uint32_t *out_threads,
                            int64_t *out_time_ms, struct qr_diag *diag)
{
    struct qr_arena a;
    qr_arena_init(&a, 8u << 20);
    struct qr_store_filter f = {
        .host_fingerprint = fingerprint, .engine_version = engine_version, .limit = 32};
    struct qr_store_calibration *rows = NULL;
    size_t n = 0;
    enum qr_err err = qr_store_calibration_list(s, &f, &a, &rows, &n, diag);
    const struct qr_store_calibration *hit = NULL;
    for (size_t i = 0; !err && i < n && !hit; i++)
        if (!need_engine || (rows[i].model && isfinite(rows[i].decode_tps)))
            hit = &rows[i];
    if (!err && !hit)
        err = qr_diag_set(diag, QR_ERR_NOT_FOUND, "no calibration for host '%s' and engine '%s'",
                          fingerprint, engine_version);
    if (!err && out_json && !(*out_json = strdup(hit->raw_json ? hit->raw_json : "null")))
        err = qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    if (!err && out_threads)
        *out_threads = (uint32_t) hit->threads;
    if (!err && out_time_ms)
        *out_time_ms = hit->time_ms;
    qr_arena_cleanup(&a);
    return err;
}

uint32_t qr_calib_stored_threads(struct qr_store *s, const char *engine_path, const char *prefix,
                                 char *why, size_t why_len)
{
    if (!s)
        return 0;
    struct qr_calib_identity *id = malloc(sizeof *id);
    if (!id)
        return 0;
    qr_calib_identity(NULL, engine_path, prefix, NULL, id);
    uint32_t threads = 0;
    int64_t when = 0;
    if (qr_calib_latest(s, id->fingerprint, id->engine_version, true, NULL, &threads, &when,
                        NULL) == QR_OK &&
        threads > 0) {
        time_t t = (time_t) (when / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        char at[32];
        strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (why && why_len)
            snprintf(why, why_len, "calibrated %s (host %s, engine %s)", at, id->fingerprint,
                     id->engine_version);
    } else {
        threads = 0;
    }
    free(id);
    return threads;
}

void qr_calib_document_last(yyjson_mut_doc *doc, const char *state_dir,
                            const struct qr_calib_identity *id)
{
    yyjson_mut_val *root = yyjson_mut_doc_get_root(doc);
    char path[PATH_MAX];
    if (!root || !state_dir ||
        snprintf(path, sizeof path, "%s/%s", state_dir, QR_STORE_FILE) >= (int) sizeof path ||
        access(path, R_OK) != 0)
        return; /* never create a store only to find it empty */
    struct qr_store *s = NULL;
    struct qr_store_opts so = {.busy_timeout_ms = 500};
    char *json = NULL;
    if (qr_store_open(path, &so, &s, NULL, NULL) == QR_OK &&
        qr_calib_latest(s, id->fingerprint, id->engine_version, false, &json, NULL, NULL, NULL) ==
            QR_OK) {
        yyjson_doc *d = yyjson_read(json, strlen(json), 0);
        yyjson_mut_val *v = d ? yyjson_val_mut_copy(doc, yyjson_doc_get_root(d)) : NULL;
        if (v) {
            yyjson_mut_obj_put(root, yyjson_mut_strcpy(doc, "calibrated"),
                               yyjson_mut_bool(doc, true));
            yyjson_mut_obj_put(root, yyjson_mut_strcpy(doc, "last_calibration"), v);
        }
        yyjson_doc_free(d);
    }
    free(json);
    qr_store_close(s);
}
