/* `quantum-runtime calibrate [--model FILE] [--budget-ms N] [--memory-only] [--no-progress]
 * [--json] [OPTIONS]`: measure memory bandwidth and the engine's prefill/decode tokens/s per thread
 * count (host/calibrate.h), store the run in the evidence store of the configured state_dir (as the
 * daemon opens it) and print a summary, or with --json the POST /v1/host/calibrate document
 * {"api_version","host","limits","calibration"}. OPTIONS are the daemon's settings (--state-dir,
 * --llama-server, --config, ...), read with the same precedence as `serve`. Without --model the
 * run uses <state_dir>/calibration.gguf, generated there on first use (host/calib_model.c);
 * --memory-only skips the engine.
 *
 * A progress bar goes to stderr only when stderr is a terminal. SIGINT/SIGTERM stop the run (the
 * engine it started is stopped too) and nothing is stored. Exit 0; 1 when the run or the store
 * failed; 2 on a usage or configuration error; 130 when interrupted. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/config.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "host/calibrate.h"
#include "host/profile.h"
#include "policy/profile.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */
#include "store/store.h"

extern char **environ;

int qr_cli_calibrate(int argc, char **argv); /* the CLI table in main.c */

static volatile sig_atomic_t g_cancel;

static void on_signal(int sig)
{
    (void) sig;
    g_cancel = 1;
}

static void draw_progress(void *arg, const char *stage, unsigned done, unsigned total)
{
    (void) arg;
    unsigned width = 30, fill = total ? done * width / total : 0;
    char bar[64];
    for (unsigned i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = '\0';
    fprintf(stderr, "\rcalibrate [%s] %u/%u %-16s", bar, done, total, stage);
    if (done >= total)
        fprintf(stderr, "\n");
    fflush(stderr);
}

/* The builtin deployment profiles' core budgets (minimum_physical_cores), up to cap. */
static size_t profile_budgets(uint32_t *out, size_t cap)
{
    struct qr_profile_set *set = NULL;
    if (qr_profile_set_load_builtin(&set, NULL) != QR_OK)
        return 0;
    size_t n = 0;
    for (size_t i = 0; i < qr_profile_set_count(set) && n < cap; i++) {
        uint64_t c = qr_profile_set_at(set, i)->minimum_physical_cores;
        if (c > 0 && c <= QR_HOST_MAX_CPUS)
            out[n++] = (uint32_t) c;
    }
    qr_profile_set_free(set);
    return n;
}

/* The default model, generated once into the state directory: weights of about the bandwidth
 * working set (at least 4x the LLC and 256 MiB), at most 1 GiB. 0, or 1 with a message. */
static int write_default_model(const char *state_dir, const char *path)
{
    struct qr_host_profile *p = malloc(sizeof *p);
    struct qr_host_limits *l = malloc(sizeof *l);
    if (!p || !l) {
        free(p);
        free(l);
        fprintf(stderr, "calibrate: out of memory\n");
        return 1;
    }
    qr_host_discover(NULL, p, l);
    uint64_t bytes = qr_calib_working_set(qr_calib_llc_bytes(NULL), p->memory_available);
    free(p);
    free(l);
    if (bytes > (1ull << 30))
        bytes = 1ull << 30;
    qr_mkdir_p(state_dir, false);
    fprintf(stderr, "calibrate: writing the default model '%s' (%u layers, about %llu MiB)\n", path,
            qr_calib_model_layers(bytes), (unsigned long long) (bytes >> 20));
    struct qr_diag d = {{0}};
    if (qr_calib_model_write(path, bytes, &d)) {
        fprintf(stderr, "calibrate: %s\n", d.msg);
        return 1;
    }
    return 0;
}

static enum qr_err store_result(const char *state_dir, const struct qr_calib_result *r,
                                int64_t *out_id, struct qr_diag *diag)
{
    char path[PATH_MAX];
    qr_mkdir_p(state_dir, false);
    if (snprintf(path, sizeof path, "%s/%s", state_dir, QR_STORE_FILE) >= (int) sizeof path)
        return qr_diag_set(diag, QR_ERR_INVALID, "state_dir too long");
    struct qr_store *s = NULL;
    enum qr_err err = qr_store_open(path, NULL, &s, NULL, diag);
    if (!err)
        err = qr_calib_save(s, r, out_id, diag);
    qr_store_close(s);
    return err;
}

static void print_summary(const struct qr_calib_result *r, const char *state_dir, int64_t id)
{
    printf("host fingerprint: %s\n", r->id.fingerprint);
    printf("cpu: %s, %u physical cores / %u logical CPUs usable, %.1f GiB memory\n",
           r->id.cpu_model[0] ? r->id.cpu_model : "unknown", r->id.physical_cores,
           r->id.logical_cpus, (double) r->id.memory_total / (double) (1u << 30));
    printf("engine: %s (%s)\n", r->id.engine_version,
           r->id.engine_path[0] ? r->id.engine_path : "not found");
    printf("memory: read %.1f GB/s, triad %.1f GB/s, class %s (working set %.0f MiB, LLC %.0f "
           "MiB, %u threads, %u passes)\n",
           r->bw.read_gbs, r->bw.triad_gbs, qr_calib_class(r->bw.read_gbs),
           (double) r->bw.working_set_bytes / 1048576.0, (double) r->bw.llc_bytes / 1048576.0,
           r->bw.threads, r->bw.passes);
    if (r->model[0])
        printf("model: %s\n", r->model);
    for (size_t i = 0; i < r->n_rows; i++) {
        const struct qr_calib_row *row = &r->rows[i];
        if (row->ok)
            printf("threads %3u: prefill %8.1f tok/s, decode %8.1f tok/s (load %lld ms)%s\n",
                   row->threads, row->prefill_tps, row->decode_tps, (long long) row->load_ms,
                   row->threads == r->best_threads ? "  <- best" : "");
        else
            printf("threads %3u: failed: %s\n", row->threads, row->error);
    }
    if (r->best_threads)
        printf("best thread count: %u\n", r->best_threads);
    for (size_t i = 0; i < r->n_warnings; i++)
        printf("warning: %s\n", r->warnings[i]);
    if (id > 0)
        printf("stored: %s/%s (calibration run %lld)\n", state_dir, QR_STORE_FILE, (long long) id);
}

static void print_json(const struct qr_calib_result *r)
{
    yyjson_mut_doc *doc = qr_host_document(NULL, QR_ROUTE_API_VERSION);
    yyjson_mut_val *root = doc ? yyjson_mut_doc_get_root(doc) : NULL;
    if (!root) {
        fprintf(stderr, "calibrate: out of memory\n");
        yyjson_mut_doc_free(doc);
        return;
    }
    /* the endpoint's shape: api_version, host, limits, calibration */
    static const char *const drop[] = {"host_schema", "limits_schema", "calibration_schema",
                                       "calibrated", "last_calibration"};
    for (size_t i = 0; i < QR_ARRAY_LEN(drop); i++)
        yyjson_mut_obj_remove_key(root, drop[i]);
    yyjson_mut_val *cal = yyjson_mut_obj_add_obj(doc, root, "calibration");
    char *s = cal && qr_calib_result_json(r, doc, cal) == QR_OK
                  ? yyjson_mut_write(doc, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL)
                  : NULL;
    if (s)
        printf("%s\n", s);
    else
        fprintf(stderr, "calibrate: out of memory\n");
    free(s);
    yyjson_mut_doc_free(doc);
}

static int usage_error(const char *what, const char *arg)
{
    fprintf(stderr,
            "calibrate: %s '%s' (usage: calibrate [--model FILE] [--budget-ms N] "
            "[--memory-only] [--no-progress] [--json] [OPTIONS])\n",
            what, arg);
    return 2;
}

int qr_cli_calibrate(int argc, char **argv)
{
    bool json = false, no_progress = false, memory_only = false;
    const char *model = NULL;
    unsigned long budget = 0;
    char **rest = calloc((size_t) argc + 1, sizeof *rest);
    int n_rest = 0, rc = 1;
    if (!rest)
        return 1;
    for (int i = 0; i < argc; i++) { /* argv: what follows the command name */
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--no-progress")) {
            no_progress = true;
        } else if (!strcmp(a, "--memory-only")) {
            memory_only = true;
        } else if (!strcmp(a, "--model") || !strcmp(a, "--budget-ms")) {
            if (i + 1 >= argc) {
                free(rest);
                return usage_error("missing value for", a);
            }
            const char *v = argv[++i];
            char *end;
            if (a[2] == 'm') {
                model = v;
            } else {
                errno = 0;
                budget = strtoul(v, &end, 10);
                if (errno || *end || end == v || budget > QR_CALIB_MAX_BUDGET_MS) {
                    free(rest);
                    return usage_error("bad --budget-ms", v);
                }
            }
        } else {
            rest[n_rest++] = argv[i];
        }
    }
    struct qr_config cfg;
    struct qr_diag diag = {{0}};
    if (qr_config_load(&cfg, n_rest, rest, environ, &diag)) {
        fprintf(stderr, "calibrate: invalid configuration: %s\n", diag.msg);
        free(rest);
        return 2;
    }
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    enum qr_log_level lv = QR_LOG_INFO;
    for (int i = 0; i < 4; i++)
        if (!strcmp(cfg.log_level, levels[i]))
            lv = (enum qr_log_level) i;
    qr_log_setup(lv, strcmp(cfg.log_format, "text") ? QR_LOG_JSON : QR_LOG_TEXT);
    char dflt[PATH_MAX];
    if (!model && !memory_only) {
        snprintf(dflt, sizeof dflt, "%s/calibration.gguf", cfg.state_dir);
        model = dflt;
        if (access(dflt, R_OK) != 0 && (rc = write_default_model(cfg.state_dir, dflt)) != 0) {
            qr_config_cleanup(&cfg);
            free(rest);
            return rc;
        }
    }
    uint32_t budgets[16];
    struct qr_calib_opts o = {
        .engine_path = cfg.llama_server,
        .model = model,
        .budget_ms = (uint32_t) budget,
        .budgets = budgets,
        .n_budgets = profile_budgets(budgets, QR_ARRAY_LEN(budgets)),
        .cancel = &g_cancel,
        .progress = !no_progress && isatty(STDERR_FILENO) ? draw_progress : NULL,
    };
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct qr_calib_result *r = malloc(sizeof *r);
    enum qr_err err = r ? qr_calib_run(&o, r, &diag) : QR_ERR_NOMEM;
    int64_t id = 0;
    if (err == QR_ERR_CANCELLED) {
        fprintf(stderr, "\ncalibrate: interrupted, nothing stored\n");
        rc = 130;
    } else if (err) {
        fprintf(stderr, "calibrate: %s\n", r ? diag.msg : "out of memory");
    } else {
        enum qr_err serr = store_result(cfg.state_dir, r, &id, &diag);
        if (json)
            print_json(r);
        else
            print_summary(r, cfg.state_dir, id);
        if (serr)
            fprintf(stderr, "calibrate: cannot store the result: %s\n", diag.msg);
        rc = serr ? 1 : 0;
    }
    free(r);
    qr_config_cleanup(&cfg);
    free(rest);
    return rc;
}
