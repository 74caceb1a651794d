/* `quantum-runtime bench --model X --ab native,override[:KEY=VALUE,...] [--ctx N] [--reps N]
 * [--prompt-tokens N] [--gen-tokens N] [--workload FILE] [--threads N] [--budget-ms N]
 * [--threshold-pct P] [--no-progress] [--json] [OPTIONS]`: the controlled A/B of the backend-native
 * context against an override (bench/ab.h), stored in the evidence store of the configured
 * state_dir, followed by the regression guard's verdict on the stored evidence (bench/guard.h).
 * `quantum-runtime bench --guard --model X [--threshold-pct P] [--json] [OPTIONS]` prints the
 * guard's verdict alone. X is a GGUF file (the evidence is keyed by its real path) or a registry
 * name (keyed by the canonical id). OPTIONS are the daemon's settings (--state-dir,
 * --llama-server, --config, ...), read with the same precedence as `serve`.
 *
 * A progress line goes to stderr only when stderr is a terminal. SIGINT/SIGTERM stop the run (the
 * engine too) and nothing is stored. Exit 0; 3 when the guard does not verify the override (after
 * a run too: the numbers are still printed and stored); 1 when the run or the store failed; 2 on a
 * usage or configuration error; 130 when interrupted. docs/BENCHMARK-AB.md. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/catalog.h"
#include "bench/ab.h"
#include "bench/guard.h"
#include "core/config.h"
#include "core/log.h"
#include "placement/placement.h"
#include "registry/manifest.h"
#include "registry/registry.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */
#include "store/store.h"

extern char **environ;

int qr_cli_bench(int argc, char **argv); /* the CLI table in main.c */

#define EXIT_NOT_VERIFIED 3

static volatile sig_atomic_t g_cancel;

static void on_signal(int sig)
{
    (void) sig;
    g_cancel = 1;
}

struct opts {
    const char *model, *ab, *workload;
    unsigned long ctx, reps, prompt_tokens, gen_tokens, threads, budget_ms;
    double threshold;
    bool json, no_progress, guard_only;
};

/* The backend the runs measure: the managed llama-server, or the configured Ollama when the
 * backend setting says ollama explicitly (--backend ollama, QUANTUM_RUNTIME_BACKEND=ollama, or
 * the config file). */
static const char *g_backend = QR_BENCH_BACKEND;
static const char *g_ollama_url; /* Ollama mode: its URL */

static void draw_progress(void *arg, const char *arm, unsigned done, unsigned total)
{
    (void) arg;
    fprintf(stderr, "\rbench run %u/%u %-40.40s", done < total ? done + 1 : total, total, arm);
    if (done >= total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr,
            "bench: %s '%s' (usage: bench --model X --ab native,override[:KEY=VALUE,...] [--ctx "
            "N] [--reps N] [--prompt-tokens N] [--gen-tokens N] [--workload FILE] [--threads N] "
            "[--budget-ms N] [--threshold-pct P] [--json] [OPTIONS] | bench --guard --model X "
            "[--threshold-pct P] [--json] [OPTIONS]; --backend ollama measures the configured "
            "Ollama)\n",
            what, arg);
    return 2;
}

static bool num(const char *v, unsigned long max, unsigned long *out)
{
    char *end;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (errno || *end || end == v || v[0] == '-' || n > max)
        return false;
    *out = n;
    return true;
}

/* One option with a value; 0 handled, 2 usage error, -1 not ours. */
static int take_value(struct opts *o, const char *a, const char *v)
{
    struct {
        const char *name;
        unsigned long *dst, max;
    } nums[] = {
        {"--ctx", &o->ctx, 1u << 24},
        {"--reps", &o->reps, QR_BENCH_MAX_REPS},
        {"--prompt-tokens", &o->prompt_tokens, QR_BENCH_MAX_TOKENS},
        {"--gen-tokens", &o->gen_tokens, QR_BENCH_MAX_TOKENS},
        {"--threads", &o->threads, 4096},
        {"--budget-ms", &o->budget_ms, 86400000},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(nums); i++) {
        if (!strcmp(a, nums[i].name))
            return num(v, nums[i].max, nums[i].dst) ? 0 : usage_error("bad value for", a);
    }
    if (!strcmp(a, "--model"))
        o->model = v;
    else if (!strcmp(a, "--ab"))
        o->ab = v;
    else if (!strcmp(a, "--workload"))
        o->workload = v;
    else if (!strcmp(a, "--threshold-pct")) {
        char *end;
        o->threshold = strtod(v, &end);
        if (*end || end == v || !isfinite(o->threshold) || o->threshold < 0 || o->threshold > 100)
            return usage_error("bad value for", a);
    } else
        return -1;
    return 0;
}

/* Split argv into our options and the daemon's (rest). 0, or 2 on a usage error. */
static int parse(int argc, char **argv, struct opts *o, char **rest, int *n_rest)
{
    for (int i = 0, r; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--no-progress"))
            o->no_progress = true;
        else if (!strcmp(a, "--guard"))
            o->guard_only = true;
        else if (i + 1 < argc && (r = take_value(o, a, argv[i + 1])) >= 0) {
            if (r != 0)
                return r;
            i++;
        } else if (!strcmp(a, "--model") || !strcmp(a, "--ab") || !strcmp(a, "--workload"))
            return usage_error("missing value for", a);
        else
            rest[(*n_rest)++] = argv[i];
    }
    if (!o->model)
        return usage_error("missing", "--model");
    if (!o->guard_only && !o->ab)
        return usage_error("missing", "--ab");
    return 0;
}

/* --model as a file (key: its real path) or a registry name (key: the canonical id). */
static int resolve_model(const struct qr_config *cfg, const char *model, char *path, size_t cap,
                         char *key, size_t kcap)
{
    struct stat st;
    if (stat(model, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!realpath(model, path))
            snprintf(path, cap, "%s", model);
        snprintf(key, kcap, "%s", path);
        return 0;
    }
    struct qr_catalog *cat = NULL;
    struct qr_diag d = {{0}};
    int rc = 0;
    if (qr_catalog_load(cfg, NULL, &cat)) {
        fprintf(stderr, "bench: out of memory\n");
        rc = 1;
    } else if (qr_placement_resolve_model(cat->registry, cfg->models_dir, model, path, cap, &d)) {
        fprintf(stderr, "bench: %s\n", d.msg);
        rc = 1;
    } else {
        const struct qr_reg_model *m = qr_registry_find(cat->registry, model);
        snprintf(key, kcap, "%s", m && m->m && m->m->id ? m->m->id : model);
    }
    qr_catalog_free(cat);
    return rc;
}

static int resolve_ollama_key(const struct qr_config *cfg, const char *model, char *key,
                              size_t kcap)
{
    struct qr_catalog *cat = NULL;
    if (qr_catalog_load(cfg, NULL, &cat)) {
        fprintf(stderr, "bench: out of memory\n");
        return 1;
    }
    const struct qr_reg_model *m = qr_registry_find(cat->registry, model);
    snprintf(key, kcap, "%s", m && m->m && m->m->id ? m->m->id : model);
    qr_catalog_free(cat);
    return 0;
}

static enum qr_err open_store(const char *state_dir, bool create, struct qr_store **out,
                              struct qr_diag *diag)
{
    char path[PATH_MAX];
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", state_dir, QR_STORE_FILE) >= (int) sizeof path)
        return qr_diag_set(diag, QR_ERR_INVALID, "state_dir too long");
    if (!create && access(path, F_OK) != 0)
        return QR_OK; /* nothing stored yet: no evidence, and no store created for it */
    if (create) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", state_dir);
        for (char *p = dir + 1; *p; p++) {
            if (*p == '/') {
                *p = '\0';
                mkdir(dir, 0700);
                *p = '/';
            }
        }
        mkdir(dir, 0700);
    }
    return qr_store_open(path, NULL, out, NULL, diag);
}

/* A number, or null when it is not finite (JSON has no NaN). */
static void add_real(yyjson_mut_doc *d, yyjson_mut_val *o, const char *k, double v)
{
    if (isfinite(v))
        yyjson_mut_obj_add_real(d, o, k, v);
    else
        yyjson_mut_obj_add_null(d, o, k);
}

static void guard_json(yyjson_mut_doc *d, yyjson_mut_val *root, const char *model,
                       const struct qr_calib_identity *id, const struct qr_guard_evidence *ev,
                       const struct qr_guard_decision *g)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(d, root, "guard");
    yyjson_mut_obj_add_strcpy(d, o, "model", model);
    yyjson_mut_obj_add_str(d, o, "backend", g_backend);
    yyjson_mut_obj_add_strcpy(d, o, "engine_version", id->engine_version);
    yyjson_mut_obj_add_strcpy(d, o, "host_fingerprint", id->fingerprint);
    yyjson_mut_obj_add_str(d, o, "verdict", qr_guard_verdict_str(g->verdict));
    yyjson_mut_obj_add_bool(d, o, "override_verified", g->override_verified);
    yyjson_mut_obj_add_real(d, o, "threshold_pct", g->threshold_pct);
    add_real(d, o, "decode_delta_pct", round(g->delta_pct * 100) / 100);
    if (ev->found) {
        yyjson_mut_val *e = yyjson_mut_obj_add_obj(d, o, "evidence");
        yyjson_mut_obj_add_int(d, e, "row_id", ev->row_id);
        yyjson_mut_obj_add_int(d, e, "time_ms", ev->time_ms);
        yyjson_mut_obj_add_strcpy(d, e, "override", ev->override_label);
        add_real(d, e, "native_decode_median", ev->native_median);
        add_real(d, e, "override_decode_median", ev->override_median);
        add_real(d, e, "native_decode_stddev", ev->native_stddev);
        add_real(d, e, "override_decode_stddev", ev->override_stddev);
        yyjson_mut_obj_add_uint(d, e, "native_n", ev->native_n);
        yyjson_mut_obj_add_uint(d, e, "override_n", ev->override_n);
    } else {
        yyjson_mut_obj_add_null(d, o, "evidence");
    }
    yyjson_mut_obj_add_strcpy(d, o, "reason", g->reason);
}

static void guard_text(const char *model, const struct qr_calib_identity *id,
                       const struct qr_guard_evidence *ev, const struct qr_guard_decision *g)
{
    printf("guard: model %s, backend %s, engine %s, host %s\n", model, g_backend,
           id->engine_version, id->fingerprint);
    if (ev->found)
        printf("guard: evidence run %lld: native decode median %.2f tok/s (stddev %.2f, n=%zu), "
               "%s %.2f tok/s (stddev %.2f, n=%zu)\n",
               (long long) ev->row_id, ev->native_median, ev->native_stddev, ev->native_n,
               ev->override_label, ev->override_median, ev->override_stddev, ev->override_n);
    printf("guard: %s (override_verified=%s, threshold %.2f%%): %s\n",
           qr_guard_verdict_str(g->verdict), g->override_verified ? "true" : "false",
           g->threshold_pct, g->reason);
}

static void print_stats_line(const char *arm, const char *metric, const struct qr_bench_stats *s)
{
    bool bytes = strstr(metric, "bytes") != NULL;
    double k = bytes ? 1.0 / 1048576.0 : 1.0;
    printf("  %-28.28s %-12s median %10.2f  min %10.2f  max %10.2f  stddev %8.2f%s (n=%zu)\n", arm,
           metric, s->median * k, s->min * k, s->max * k, s->stddev * k, bytes ? " MiB" : "", s->n);
}

static void print_summary(const struct qr_bench_result *r)
{
    printf("model: %s (%s)\n", r->model_key, r->model_path);
    printf("host fingerprint: %s, engine %s\n", r->id.fingerprint, r->id.engine_version);
    printf("workload: %s, think %s, prompt %u tokens, answer %u tokens, %u reps per arm "
           "(interleaved A,B,A,B; a fresh engine per run)\n",
           r->workload,
           !r->think_set ? "template default"
           : r->think    ? "on"
                         : "off",
           r->prompt_tokens_target, r->gen_tokens, r->reps);
    printf("kv footprint: %s\n", r->kv_source);
    for (size_t m = 0; m < QR_BENCH_N_METRICS; m++) {
        for (size_t a = 0; a < 2; a++) {
            struct qr_bench_stats s;
            qr_bench_arm_stats(r, a, m, &s);
            print_stats_line(r->arms[a].label, qr_bench_metric_name(m), &s);
        }
    }
    for (size_t a = 0; a < 2; a++) {
        for (uint32_t i = 0; i < r->reps; i++) {
            if (!r->samples[a][i].ok)
                printf("  %s rep %u failed: %s\n", r->arms[a].label, i, r->samples[a][i].error);
        }
    }
}

/* Print the JSON document (root object). */
static void emit(yyjson_mut_doc *d)
{
    char *s = yyjson_mut_write(
        d, YYJSON_WRITE_PRETTY_TWO_SPACES | YYJSON_WRITE_ALLOW_INVALID_UNICODE, NULL);
    if (s)
        printf("%s\n", s);
    else
        fprintf(stderr, "bench: out of memory\n");
    free(s);
}

/* The guard on the store's evidence for key. Returns 0 verified, EXIT_NOT_VERIFIED, or 1. */
static int guard(const struct qr_config *cfg, struct qr_store *s, const char *key,
                 const struct qr_calib_identity *id, double threshold, yyjson_mut_doc *d,
                 yyjson_mut_val *root)
{
    struct qr_guard_evidence ev = {0};
    struct qr_diag diag = {{0}};
    if (s && qr_guard_evidence_find(s, key, g_backend, id->engine_version, id->fingerprint, &ev,
                                    &diag)) {
        fprintf(stderr, "bench: cannot read the evidence store: %s\n", diag.msg);
        return 1;
    }
    struct qr_guard_decision g;
    qr_guard_decide(&ev, threshold, &g);
    if (root)
        guard_json(d, root, key, id, &ev, &g);
    else
        guard_text(key, id, &ev, &g);
    (void) cfg;
    return g.override_verified ? 0 : EXIT_NOT_VERIFIED;
}

static int run_bench(const struct qr_config *cfg, const struct opts *o, const char *path,
                     const char *key, const struct qr_bench_workload *w)
{
    struct qr_bench_opts bo = {
        .engine_path = cfg->llama_server,
        .model_path = path,
        .model_key = key,
        .ollama_url = g_ollama_url,
        .arms_spec = o->ab,
        .ctx = (uint32_t) o->ctx,
        .reps = (uint32_t) o->reps,
        .prompt_tokens = (uint32_t) o->prompt_tokens,
        .gen_tokens = (uint32_t) o->gen_tokens,
        .threads = (uint32_t) o->threads,
        .workload = w,
        .budget_ms = (uint32_t) o->budget_ms,
        .cancel = &g_cancel,
        .progress = !o->no_progress && isatty(STDERR_FILENO) ? draw_progress : NULL,
    };
    struct qr_diag diag = {{0}};
    struct qr_bench_result *r = malloc(sizeof *r);
    if (!r)
        abort();
    enum qr_err err = qr_bench_ab_run(&bo, r, &diag);
    int rc = 1;
    struct qr_store *s = NULL;
    int64_t id = 0;
    if (err == QR_ERR_CANCELLED) {
        fprintf(stderr, "\nbench: interrupted, nothing stored\n");
        rc = 130;
    } else if (err) {
        fprintf(stderr, "bench: %s\n", diag.msg);
        rc = err == QR_ERR_INVALID ? 2 : 1;
    } else if (open_store(cfg->state_dir, true, &s, &diag) || qr_bench_ab_save(s, r, &id, &diag)) {
        fprintf(stderr, "bench: cannot store the result: %s\n", diag.msg);
    } else {
        yyjson_mut_doc *d = o->json ? yyjson_mut_doc_new(NULL) : NULL;
        yyjson_mut_val *root = d ? yyjson_mut_obj(d) : NULL;
        if (d) {
            yyjson_mut_doc_set_root(d, root);
            yyjson_mut_obj_add_str(d, root, "api_version", QR_ROUTE_API_VERSION);
            qr_bench_ab_json(r, d, yyjson_mut_obj_add_obj(d, root, "benchmark"));
            yyjson_mut_val *st = yyjson_mut_obj_add_obj(d, root, "stored");
            yyjson_mut_obj_add_strcpy(d, st, "store", qr_store_path(s));
            yyjson_mut_obj_add_int(d, st, "row_id", id);
        } else {
            print_summary(r);
            printf("stored: %s (bench rows from %lld)\n", qr_store_path(s), (long long) id);
        }
        rc = guard(cfg, s, r->model_key, &r->id, o->threshold, d, root);
        if (d)
            emit(d);
        yyjson_mut_doc_free(d);
    }
    qr_store_close(s);
    free(r);
    return rc;
}

static int guard_only(const struct qr_config *cfg, const struct opts *o, const char *key)
{
    struct qr_calib_identity *id = malloc(sizeof *id);
    if (!id)
        abort();
    struct qr_store *s = NULL;
    struct qr_diag diag = {{0}};
    int rc = 1;
    if (g_ollama_url) {
        char version[64];
        if (qr_bench_ollama_version(g_ollama_url, version, sizeof version, &diag)) {
            fprintf(stderr, "bench: cannot ask Ollama for its version: %s\n", diag.msg);
            free(id);
            return 1;
        }
        qr_calib_identity(NULL, NULL, NULL, version, id);
    } else {
        qr_calib_identity(NULL, cfg->llama_server, NULL, NULL, id);
    }
    if (open_store(cfg->state_dir, false, &s, &diag)) {
        fprintf(stderr, "bench: cannot open the evidence store: %s\n", diag.msg);
    } else {
        yyjson_mut_doc *d = o->json ? yyjson_mut_doc_new(NULL) : NULL;
        yyjson_mut_val *root = d ? yyjson_mut_obj(d) : NULL;
        if (d) {
            yyjson_mut_doc_set_root(d, root);
            yyjson_mut_obj_add_str(d, root, "api_version", QR_ROUTE_API_VERSION);
        }
        rc = guard(cfg, s, key, id, o->threshold, d, root);
        if (d)
            emit(d);
        yyjson_mut_doc_free(d);
    }
    qr_store_close(s);
    free(id);
    return rc;
}

int qr_cli_bench(int argc, char **argv)
{
    struct opts o = {.threshold = QR_GUARD_DEFAULT_THRESHOLD_PCT};
    char **rest = calloc((size_t) argc + 1, sizeof *rest);
    int n_rest = 0, rc;
    if (!rest)
        abort();
    if ((rc = parse(argc, argv, &o, rest, &n_rest)) != 0) {
        free(rest);
        return rc;
    }
    struct qr_config cfg;
    struct qr_diag diag = {{0}};
    if (qr_config_load(&cfg, n_rest, rest, environ, &diag)) {
        fprintf(stderr, "bench: invalid configuration: %s\n", diag.msg);
        free(rest);
        return 2;
    }
    /* the log writes to stdout: keep info lines out of the report */
    qr_log_setup(QR_LOG_ERROR, strcmp(cfg.log_format, "text") ? QR_LOG_JSON : QR_LOG_TEXT);
    struct qr_bench_workload w = {0};
    char path[PATH_MAX], key[PATH_MAX];
    if (cfg.source[QR_CFG_BACKEND] != QR_SRC_DEFAULT && !strcmp(cfg.backend, "ollama")) {
        /* the configured Ollama: the model is its name there; the evidence is keyed by the
         * registry's canonical id when the name resolves */
        g_backend = "ollama";
        g_ollama_url = cfg.ollama_url;
        snprintf(path, sizeof path, "%s", o.model);
        rc = resolve_ollama_key(&cfg, o.model, key, sizeof key);
    } else {
        rc = resolve_model(&cfg, o.model, path, sizeof path, key, sizeof key);
    }
    if (!rc && o.workload && qr_bench_workload_load(o.workload, &w, &diag)) {
        fprintf(stderr, "bench: %s\n", diag.msg);
        rc = 2;
    }
    if (!rc) {
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        rc = o.guard_only ? guard_only(&cfg, &o, key)
                          : run_bench(&cfg, &o, path, key, o.workload ? &w : NULL);
    }
    qr_bench_workload_cleanup(&w);
    qr_config_cleanup(&cfg);
    free(rest);
    return rc;
}
