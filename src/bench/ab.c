/* The controlled A/B benchmark (ab.h): two arms of engine settings on the same prompt, runs
 * interleaved A, B, A, B, each on a freshly started engine (host/calibrate.h's engine session),
 * with the spread of every metric and the result stored as evidence. The prompt is made once, on
 * the first engine: a persona text of exactly N tokens (tokenized and cut by the engine itself) or
 * the workload's own text. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "core/buf.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/sizing.h"
#include "store/store.h"

#define WARMUP_TOKENS 1u
#define LOG_LINE      160

/* Persona filler: repeated and cut to the asked token count by the engine's tokenizer. */
static const char FILLER[] =
    "You are Ember, the keeper of the lighthouse at the edge of the northern sea. You speak "
    "calmly, remember every traveller by name, and describe the weather, the tides and the old "
    "stories of the coast in vivid detail. You never break character, you answer in full "
    "sentences, and you think carefully before you answer a question about the island. ";

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

void qr_bench_stats_compute(const double *v, size_t n, struct qr_bench_stats *out)
{
    double buf[QR_BENCH_MAX_REPS];
    size_t k = 0;
    for (size_t i = 0; i < n && k < QR_BENCH_MAX_REPS; i++) {
        if (isfinite(v[i]))
            buf[k++] = v[i];
    }
    out->n = k;
    if (k == 0) {
        out->median = out->min = out->max = out->mean = out->stddev = NAN;
        return;
    }
    qsort(buf, k, sizeof buf[0], cmp_double);
    out->min = buf[0];
    out->max = buf[k - 1];
    out->median = k % 2 ? buf[k / 2] : (buf[k / 2 - 1] + buf[k / 2]) / 2.0;
    double sum = 0, ss = 0;
    for (size_t i = 0; i < k; i++)
        sum += buf[i];
    out->mean = sum / (double) k;
    for (size_t i = 0; i < k; i++)
        ss += (buf[i] - out->mean) * (buf[i] - out->mean);
    out->stddev = k > 1 ? sqrt(ss / (double) (k - 1)) : 0.0;
}

/* ---- arms ---- */

static const struct {
    const char *key, *flag, *flag2; /* flag2: a second flag set to the same value */
    bool numeric;
} KNOBS[] = {
    {"ctx", "-c", NULL, true},
    {"batch", "-b", NULL, true},
    {"ubatch", "-ub", NULL, true},
    {"threads", "-t", "-tb", true},
    {"flash-attn", "-fa", NULL, false},
    {"cache-type-k", "-ctk", NULL, false},
    {"cache-type-v", "-ctv", NULL, false},
};

static int knob_index(const char *key)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(KNOBS); i++) {
        if (!strcmp(KNOBS[i].key, key))
            return (int) i;
    }
    return -1;
}

const char *qr_bench_knob_flag(const char *key)
{
    int i = knob_index(key);
    return i < 0 ? NULL : KNOBS[i].flag;
}

static bool value_ok(const char *v, bool numeric)
{
    size_t n = strlen(v);
    if (n == 0 || n > 47)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = v[i];
        bool digit = c >= '0' && c <= '9';
        if (numeric ? !digit
                    : !(digit || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                        c == '_' || c == '-'))
            return false;
    }
    return !numeric || strtoul(v, NULL, 10) > 0;
}

/* One KEY=VALUE into the arm. */
static enum qr_err parse_knob(const char *kv, size_t len, struct qr_bench_arm *a,
                              struct qr_diag *diag)
{
    char item[80];
    if (len == 0 || len >= sizeof item)
        return qr_diag_set(diag, QR_ERR_INVALID, "bad knob '%.*s': KEY=VALUE", (int) len, kv);
    memcpy(item, kv, len);
    item[len] = '\0';
    char *eq = strchr(item, '=');
    if (!eq)
        return qr_diag_set(diag, QR_ERR_INVALID, "bad knob '%s': KEY=VALUE", item);
    *eq = '\0';
    int k = knob_index(item);
    if (k < 0)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "unknown knob '%s' (ctx, batch, ubatch, threads, flash-attn, "
                           "cache-type-k, cache-type-v)",
                           item);
    if (!value_ok(eq + 1, KNOBS[k].numeric))
        return qr_diag_set(diag, QR_ERR_INVALID, "bad value '%.48s' for knob '%s'", eq + 1, item);
    for (size_t i = 0; i < a->n_knobs; i++) {
        if (!strcmp(a->knobs[i].key, item))
            return qr_diag_set(diag, QR_ERR_INVALID, "knob '%s' given twice", item);
    }
    if (a->n_knobs == QR_BENCH_MAX_KNOBS)
        return qr_diag_set(diag, QR_ERR_INVALID, "more than %u knobs", QR_BENCH_MAX_KNOBS);
    struct qr_bench_knob *kn = &a->knobs[a->n_knobs++];
    snprintf(kn->key, sizeof kn->key, "%.15s", item);
    snprintf(kn->value, sizeof kn->value, "%.47s", eq + 1);
    return QR_OK;
}

static void arm_label(struct qr_bench_arm *a)
{
    if (!a->override) {
        snprintf(a->label, sizeof a->label, "native");
        return;
    }
    size_t off = (size_t) snprintf(a->label, sizeof a->label, "override:");
    for (size_t i = 0; i < a->n_knobs && off < sizeof a->label; i++)
        off += (size_t) snprintf(a->label + off, sizeof a->label - off, "%s%s=%s", i ? "," : "",
                                 a->knobs[i].key, a->knobs[i].value);
}

enum qr_err qr_bench_arms_parse(const char *spec, uint32_t ctx, struct qr_bench_arm out[2],
                                struct qr_diag *diag)
{
    memset(out, 0, 2 * sizeof out[0]);
    if (!spec || strncmp(spec, "native,override", 15) || (spec[15] && spec[15] != ':'))
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "bad --ab '%.64s': native,override[:KEY=VALUE[,KEY=VALUE...]]",
                           spec ? spec : "");
    if (ctx == 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "the override's context must be > 0");
    out[1].override = true;
    if (spec[15] == ':') {
        const char *p = spec + 16;
        for (;;) {
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t) (c - p) : strlen(p);
            enum qr_err err = parse_knob(p, len, &out[1], diag);
            if (err)
                return err;
            if (!c)
                break;
            p = c + 1;
        }
    }
    bool has_ctx = false;
    for (size_t i = 0; i < out[1].n_knobs; i++)
        has_ctx = has_ctx || !strcmp(out[1].knobs[i].key, "ctx");
    if (!has_ctx) { /* the context override, first */
        if (out[1].n_knobs == QR_BENCH_MAX_KNOBS)
            return qr_diag_set(diag, QR_ERR_INVALID, "more than %u knobs", QR_BENCH_MAX_KNOBS);
        memmove(&out[1].knobs[1], &out[1].knobs[0], out[1].n_knobs * sizeof out[1].knobs[0]);
        snprintf(out[1].knobs[0].key, sizeof out[1].knobs[0].key, "ctx");
        snprintf(out[1].knobs[0].value, sizeof out[1].knobs[0].value, "%u", ctx);
        out[1].n_knobs++;
    }
    arm_label(&out[0]);
    arm_label(&out[1]);
    return QR_OK;
}

size_t qr_bench_arm_args(const struct qr_bench_arm *a, const char **out, size_t cap)
{
    size_t n = 0;
    if (cap < 3)
        return 0;
    out[n++] = "-np";
    out[n++] = "1";
    for (size_t i = 0; i < a->n_knobs && n + 5 <= cap; i++) {
        int k = knob_index(a->knobs[i].key);
        if (k < 0)
            continue;
        out[n++] = KNOBS[k].flag;
        out[n++] = a->knobs[i].value;
        if (KNOBS[k].flag2) {
            out[n++] = KNOBS[k].flag2;
            out[n++] = a->knobs[i].value;
        }
    }
    out[n] = NULL;
    return n;
}

/* ---- metrics ---- */

static const char *const METRICS[QR_BENCH_N_METRICS] = {"decode_tps", "prefill_tps", "ttft_ms",
                                                        "rss_bytes",  "hwm_bytes",   "kv_bytes"};

const char *qr_bench_metric_name(size_t i)
{
    return i < QR_BENCH_N_METRICS ? METRICS[i] : NULL;
}

double qr_bench_metric_value(const struct qr_bench_sample *s, size_t i)
{
    if (!s->ok)
        return NAN;
    switch (i) {
    case 0:
        return s->decode_tps;
    case 1:
        return s->prefill_tps;
    case 2:
        return s->ttft_ms;
    case 3:
        return s->rss_bytes ? (double) s->rss_bytes : NAN;
    case 4:
        return s->hwm_bytes ? (double) s->hwm_bytes : NAN;
    case 5:
        return s->kv_bytes ? (double) s->kv_bytes : NAN;
    default:
        return NAN;
    }
}

void qr_bench_arm_stats(const struct qr_bench_result *r, size_t arm, size_t metric,
                        struct qr_bench_stats *out)
{
    double v[QR_BENCH_MAX_REPS];
    size_t n = r->reps < QR_BENCH_MAX_REPS ? r->reps : QR_BENCH_MAX_REPS;
    for (size_t i = 0; i < n; i++)
        v[i] = qr_bench_metric_value(&r->samples[arm][i], metric);
    qr_bench_stats_compute(v, n, out);
}

/* ---- one run ---- */

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* VmRSS and VmHWM of pid, bytes (0 when unreadable). */
static void proc_memory(pid_t pid, uint64_t *rss, uint64_t *hwm)
{
    char path[64], line[128];
    snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
    *rss = *hwm = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
            *rss = kb * 1024u;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1)
            *hwm = kb * 1024u;
    }
    fclose(f);
}

struct run {
    const struct qr_bench_opts *o;
    struct qr_bench_result *r;
    int64_t deadline;
    char *system_text; /* owned: the system prompt, made on the first engine */
    const char *user_text;
    struct qr_gguf *g; /* owned, for KV sizing */
    struct qr_arch arch;
    bool arch_ok;
};

/* POST/GET one JSON exchange; *out parsed (caller frees) when the status is 200. */
static enum qr_err call_json(const struct run *run, const struct qr_calib_engine *e,
                             const char *method, const char *path, const char *body,
                             yyjson_doc **out, struct qr_diag *diag)
{
    int status = 0;
    char *resp = NULL;
    size_t len = 0;
    enum qr_err err = qr_calib_engine_call(e, method, path, body, run->deadline, run->o->cancel,
                                           &status, &resp, &len, diag);
    if (err)
        return err;
    *out = status == 200 ? yyjson_read(resp, len, 0) : NULL;
    if (!*out)
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "%s %s answered %d: %.120s", method, path, status,
                          resp);
    free(resp);
    return err;
}

/* A persona text of exactly n tokens of this engine's tokenizer (tokenize, cut, detokenize). */
static enum qr_err make_prompt(struct run *run, const struct qr_calib_engine *e, uint32_t n,
                               struct qr_diag *diag)
{
    size_t reps = (size_t) n * 2u / (sizeof FILLER / 4u) + 1u; /* >= 2 bytes per token */
    enum qr_err err = QR_OK;
    for (int attempt = 0; attempt < 4 && !err && !run->system_text; attempt++, reps *= 4u) {
        size_t flen = sizeof FILLER - 1u, cap = flen * reps + 1u;
        char *text = malloc(cap);
        if (!text)
            abort();
        for (size_t i = 0; i < reps; i++)
            memcpy(text + i * flen, FILLER, flen);
        text[flen * reps] = '\0';
        yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
        yyjson_mut_val *o = yyjson_mut_obj(d);
        yyjson_mut_doc_set_root(d, o);
        yyjson_mut_obj_add_strn(d, o, "content", text, flen * reps);
        char *body = yyjson_mut_write(d, 0, NULL);
        yyjson_doc *tok = NULL, *det = NULL;
        err = body ? call_json(run, e, "POST", "/tokenize", body, &tok, diag) : QR_ERR_NOMEM;
        free(body);
        free(text);
        yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(tok), "tokens");
        if (!err && yyjson_arr_size(arr) >= n) {
            yyjson_mut_doc *d2 = yyjson_mut_doc_new(NULL);
            yyjson_mut_val *o2 = yyjson_mut_obj(d2), *ta = yyjson_mut_arr(d2);
            yyjson_mut_doc_set_root(d2, o2);
            for (uint32_t i = 0; i < n; i++)
                yyjson_mut_arr_add_uint(d2, ta, yyjson_get_uint(yyjson_arr_get(arr, i)));
            yyjson_mut_obj_add_val(d2, o2, "tokens", ta);
            char *b2 = yyjson_mut_write(d2, 0, NULL);
            err = b2 ? call_json(run, e, "POST", "/detokenize", b2, &det, diag) : QR_ERR_NOMEM;
            const char *s = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(det), "content"));
            if (!err && s && (run->system_text = strdup(s)) == NULL)
                abort();
            free(b2);
            yyjson_mut_doc_free(d2);
        }
        yyjson_doc_free(tok);
        yyjson_doc_free(det);
        yyjson_mut_doc_free(d);
    }
    if (!err && !run->system_text)
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "cannot make a prompt of %u tokens", n);
    return err;
}

/* The chat completion body: system + user, exactly max_tokens generated, no prompt cache. */
static char *chat_body(const struct run *run, const char *system, const char *user,
                       uint32_t max_tokens)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = yyjson_mut_obj(d), *msgs = yyjson_mut_arr(d);
    yyjson_mut_doc_set_root(d, o);
    yyjson_mut_val *m = yyjson_mut_arr_add_obj(d, msgs);
    yyjson_mut_obj_add_str(d, m, "role", "system");
    yyjson_mut_obj_add_str(d, m, "content", system);
    m = yyjson_mut_arr_add_obj(d, msgs);
    yyjson_mut_obj_add_str(d, m, "role", "user");
    yyjson_mut_obj_add_str(d, m, "content", user);
    yyjson_mut_obj_add_val(d, o, "messages", msgs);
    yyjson_mut_obj_add_uint(d, o, "max_tokens", max_tokens);
    yyjson_mut_obj_add_bool(d, o, "ignore_eos", true);
    yyjson_mut_obj_add_bool(d, o, "cache_prompt", false);
    yyjson_mut_obj_add_real(d, o, "temperature", 0.0);
    yyjson_mut_obj_add_bool(d, o, "stream", false);
    if (run->r->think_set) {
        yyjson_mut_val *kw = yyjson_mut_obj_add_obj(d, o, "chat_template_kwargs");
        yyjson_mut_obj_add_bool(d, kw, "enable_thinking", run->r->think);
    }
    char *s = yyjson_mut_write(d, YYJSON_WRITE_ALLOW_INVALID_UNICODE, NULL);
    yyjson_mut_doc_free(d);
    return s;
}

static bool read_timings(yyjson_doc *doc, struct qr_bench_sample *s)
{
    yyjson_val *t = yyjson_obj_get(yyjson_doc_get_root(doc), "timings");
    double pms = yyjson_get_num(yyjson_obj_get(t, "prompt_ms"));
    double pps = yyjson_get_num(yyjson_obj_get(t, "prompt_per_second"));
    double dps = yyjson_get_num(yyjson_obj_get(t, "predicted_per_second"));
    double dtok = yyjson_get_num(yyjson_obj_get(t, "predicted_per_token_ms"));
    if (!(pps > 0 && dps > 0 && pms > 0 && isfinite(pps) && isfinite(dps)))
        return false;
    s->prefill_tps = pps;
    s->decode_tps = dps;
    s->ttft_ms = pms + (dtok > 0 && isfinite(dtok) ? dtok : 0.0);
    s->prompt_tokens = (uint32_t) yyjson_get_uint(yyjson_obj_get(t, "prompt_n"));
    s->gen_tokens = (uint32_t) yyjson_get_uint(yyjson_obj_get(t, "predicted_n"));
    return true;
}

/* KV bytes the engine allocates at n_ctx with -np 1 (GGUF sizing, gguf/sizing.h); 0 unknown. */
static uint64_t kv_bytes(const struct run *run, uint64_t n_ctx)
{
    if (!run->arch_ok || n_ctx == 0)
        return 0;
    struct qr_sizing_params p;
    qr_sizing_params_init(&p, n_ctx);
    p.n_seq = 1;
    p.kv_unified = false; /* an explicit -np clears it */
    struct qr_sizing *sz = malloc(sizeof *sz);
    if (!sz)
        abort();
    uint64_t v = qr_gguf_size_engine(run->g, &run->arch, &p, sz, NULL) == QR_OK &&
                         sz->kv == QR_SIZING_KV_KNOWN
                     ? sz->eng.kv_bytes
                     : 0;
    free(sz);
    return v;
}

/* The engine's context from /props (default_generation_settings.n_ctx). */
static uint64_t props_ctx(const struct run *run, const struct qr_calib_engine *e)
{
    yyjson_doc *doc = NULL;
    if (call_json(run, e, "GET", "/props", NULL, &doc, NULL))
        return 0;
    yyjson_val *root = yyjson_doc_get_root(doc);
    uint64_t n = yyjson_get_uint(
        yyjson_obj_get(yyjson_obj_get(root, "default_generation_settings"), "n_ctx"));
    yyjson_doc_free(doc);
    return n;
}

/* Start, prompt (first time), warm up, measure, stop. */
static enum qr_err run_one(struct run *run, const struct qr_bench_arm *arm, int log_fd,
                           struct qr_calib_engine *e, struct qr_bench_sample *s,
                           struct qr_diag *diag)
{
    const char *args[QR_CALIB_ENGINE_MAX_ARGS + 1];
    size_t n = qr_bench_arm_args(arm, args, QR_ARRAY_LEN(args) - 4);
    bool own_threads = false;
    for (size_t i = 0; i < arm->n_knobs; i++)
        own_threads = own_threads || !strcmp(arm->knobs[i].key, "threads");
    char t[16];
    snprintf(t, sizeof t, "%u", run->o->threads);
    if (run->o->threads && !own_threads) { /* both arms alike */
        args[n++] = "-t";
        args[n++] = t;
        args[n++] = "-tb";
        args[n++] = t;
        args[n] = NULL;
    }
    enum qr_err err = qr_calib_engine_start(run->r->id.engine_path, run->o->model_path, args,
                                            log_fd, run->deadline, run->o->cancel, e, diag);
    if (err)
        return err;
    s->load_ms = e->load_ms;
    if (!run->system_text && (err = make_prompt(run, e, run->r->prompt_tokens_target, diag)))
        return err;
    s->n_ctx = props_ctx(run, e);
    s->kv_bytes = kv_bytes(run, s->n_ctx);
    yyjson_doc *doc = NULL;
    char *warm = chat_body(run, "You are a helpful assistant.", "Hello.", WARMUP_TOKENS);
    err = warm ? call_json(run, e, "POST", "/v1/chat/completions", warm, &doc, diag) : QR_ERR_NOMEM;
    free(warm);
    yyjson_doc_free(doc);
    doc = NULL;
    if (err)
        return err;
    char *body = chat_body(run, run->system_text, run->user_text, run->r->gen_tokens);
    int64_t t0 = qr_calib_now_ms();
    err = body ? call_json(run, e, "POST", "/v1/chat/completions", body, &doc, diag) : QR_ERR_NOMEM;
    s->wall_ms = (double) (qr_calib_now_ms() - t0);
    free(body);
    if (!err && !read_timings(doc, s))
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "the answer carries no timings");
    yyjson_doc_free(doc);
    if (!err)
        proc_memory(e->pid, &s->rss_bytes, &s->hwm_bytes);
    return err;
}

/* The last line of the engine's output, for a failed run's error. */
static void log_tail(FILE *log, char *out, size_t cap)
{
    char buf[LOG_LINE * 4 + 1];
    out[0] = '\0';
    if (fseek(log, 0, SEEK_END) != 0)
        return;
    long end = ftell(log);
    long from = end > (long) sizeof buf - 1 ? end - (long) sizeof buf + 1 : 0;
    if (end <= 0 || fseek(log, from, SEEK_SET) != 0)
        return;
    size_t n = fread(buf, 1, (size_t) (end - from), log);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *last = strrchr(buf, '\n');
    snprintf(out, cap, "%.*s", LOG_LINE, last ? last + 1 : buf);
}

/* Ollama: a prompt of about n words when no workload gives the text (Ollama has no /tokenize;
 * the answer's prompt_eval_count says how many tokens it was). */
static char *words(uint32_t n)
{
    static const char *const w[] = {"river",  "stone",   "lantern", "harbor", "meadow", "copper",
                                    "signal", "orchard", "violet",  "engine", "canyon", "pepper"};
    struct qr_buf b;
    qr_buf_init(&b, 0);
    for (uint32_t i = 0; i < n; i++)
        if (qr_buf_appendf(&b, "%s%s", i ? " " : "", w[(i * 7u) % 12u]))
            abort();
    return qr_buf_take(&b, NULL);
}

static enum qr_err measure_ollama(struct run *run, size_t arm, uint32_t rep, struct qr_diag *outer)
{
    const struct qr_bench_opts *o = run->o;
    struct qr_bench_sample *s = &run->r->samples[arm][rep];
    if (o->cancel && *o->cancel)
        return qr_diag_set(outer, QR_ERR_CANCELLED, "benchmark cancelled");
    const struct qr_bench_workload *w = o->workload;
    char *text = w ? NULL : words(run->r->prompt_tokens_target);
    struct qr_diag d = {{0}};
    enum qr_err err = qr_bench_ollama_measure(
        o->ollama_url, o->model_path, &run->r->arms[arm], w ? w->system_prompt : NULL,
        w ? run->user_text : text, run->r->gen_tokens, w ? (w->think ? 1 : 0) : -1, s, &d);
    free(text);
    if (err)
        snprintf(s->error, sizeof s->error, "%.190s", d.msg);
    return QR_OK;
}

static enum qr_err measure(struct run *run, size_t arm, uint32_t rep, struct qr_diag *outer)
{
    if (run->o->ollama_url)
        return measure_ollama(run, arm, rep, outer);
    struct qr_bench_sample *s = &run->r->samples[arm][rep];
    memset(s, 0, sizeof *s);
    struct qr_diag d = {{0}};
    struct qr_calib_engine e = {.pid = -1};
    FILE *log = tmpfile();
    enum qr_err err = log ? run_one(run, &run->r->arms[arm], fileno(log), &e, s, &d)
                          : qr_diag_set(&d, QR_ERR_IO, "cannot create a log file");
    qr_calib_engine_stop(&e);
    s->ok = err == QR_OK;
    if (!s->ok) {
        char tail[LOG_LINE + 1] = "";
        if (log && err != QR_ERR_CANCELLED)
            log_tail(log, tail, sizeof tail);
        snprintf(s->error, sizeof s->error, "%.110s%s%.80s", d.msg, tail[0] ? ": " : "", tail);
    }
    if (log)
        fclose(log);
    if (err == QR_ERR_CANCELLED)
        return qr_diag_set(outer, err, "benchmark cancelled");
    return QR_OK;
}

static enum qr_err prepare(const struct qr_bench_opts *o, struct qr_bench_result *r,
                           struct run *run, struct qr_diag *diag)
{
    if (!o->model_path || !*o->model_path)
        return qr_diag_set(diag, QR_ERR_INVALID, "no model to run");
    enum qr_err err = qr_bench_arms_parse(o->arms_spec ? o->arms_spec : "native,override",
                                          o->ctx ? o->ctx : QR_BENCH_DEFAULT_CTX, r->arms, diag);
    if (err)
        return err;
    r->reps = o->reps ? o->reps : QR_BENCH_DEFAULT_REPS;
    if (r->reps > QR_BENCH_MAX_REPS)
        return qr_diag_set(diag, QR_ERR_INVALID, "at most %u repetitions", QR_BENCH_MAX_REPS);
    const struct qr_bench_workload *w = o->workload;
    r->prompt_tokens_target = w                  ? w->system_prompt_tokens
                              : o->prompt_tokens ? o->prompt_tokens
                                                 : QR_BENCH_DEFAULT_PROMPT;
    r->gen_tokens = o->gen_tokens ? o->gen_tokens : w ? w->answer_tokens : QR_BENCH_DEFAULT_GEN;
    if (r->prompt_tokens_target > QR_BENCH_MAX_TOKENS || r->gen_tokens > QR_BENCH_MAX_TOKENS)
        return qr_diag_set(diag, QR_ERR_INVALID, "token counts are at most %u",
                           QR_BENCH_MAX_TOKENS);
    r->think = w && w->think;
    r->think_set = w != NULL;
    r->threads = o->threads;
    snprintf(r->workload, sizeof r->workload, "%s", w ? w->name : "default");
    snprintf(r->model_path, sizeof r->model_path, "%s", o->model_path);
    snprintf(r->model_key, sizeof r->model_key, "%s",
             o->model_key && *o->model_key ? o->model_key : o->model_path);
    if (w && w->system_prompt && (run->system_text = strdup(w->system_prompt)) == NULL)
        abort();
    run->user_text = w ? w->user_prompt : "Continue the scene.";
    if (o->ollama_url) {
        /* the configured Ollama: no file, no engine process; its version keys the evidence */
        snprintf(r->backend, sizeof r->backend, "ollama");
        char version[64];
        if ((err = qr_bench_ollama_version(o->ollama_url, version, sizeof version, diag)))
            return err;
        r->kv_source = "not reported by Ollama";
        qr_calib_identity(NULL, NULL, NULL, version, &r->id);
        return QR_OK;
    }
    snprintf(r->backend, sizeof r->backend, "%s", QR_BENCH_BACKEND);
    struct qr_diag gd = {{0}};
    if ((err = qr_gguf_open(o->model_path, NULL, &gd, &run->g)))
        return qr_diag_set(diag, err, "%s", gd.msg);
    run->arch_ok = qr_gguf_arch_derive(run->g, &run->arch, NULL) == QR_OK;
    r->kv_source = run->arch_ok ? "gguf-sizing at the engine's /props n_ctx (-np 1)" : "unknown";
    qr_calib_identity(NULL, o->engine_path, NULL, NULL, &r->id);
    if (!r->id.engine_path[0])
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no llama-server found");
    return QR_OK;
}

enum qr_err qr_bench_ab_run(const struct qr_bench_opts *o, struct qr_bench_result *out,
                            struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    out->started_ms = wall_ms();
    struct run run = {.o = o, .r = out};
    uint32_t budget = o->budget_ms ? o->budget_ms : QR_BENCH_DEFAULT_BUDGET_MS;
    run.deadline = qr_calib_now_ms() + budget;
    enum qr_err err = prepare(o, out, &run, diag);
    unsigned total = out->reps * 2u, done = 0;
    /* interleaved A, B, A, B: drift of the machine hits both arms alike */
    for (uint32_t rep = 0; !err && rep < out->reps; rep++) {
        for (size_t arm = 0; !err && arm < 2; arm++) {
            if (o->progress)
                o->progress(o->progress_arg, out->arms[arm].label, done, total);
            err = measure(&run, arm, rep, diag);
            done++;
        }
    }
    if (!err && o->progress)
        o->progress(o->progress_arg, "done", done, total);
    free(run.system_text);
    qr_gguf_close(run.g);
    out->finished_ms = wall_ms();
    return err;
}

/* ---- JSON and the store ---- */

static void add_num(yyjson_mut_doc *d, yyjson_mut_val *o, const char *k, double v)
{
    if (isfinite(v))
        yyjson_mut_obj_add_real(d, o, k, round(v * 1000.0) / 1000.0);
    else
        yyjson_mut_obj_add_null(d, o, k);
}

static void add_stats(yyjson_mut_doc *d, yyjson_mut_val *o, const struct qr_bench_stats *s)
{
    yyjson_mut_obj_add_uint(d, o, "n", s->n);
    add_num(d, o, "median", s->median);
    add_num(d, o, "min", s->min);
    add_num(d, o, "max", s->max);
    add_num(d, o, "mean", s->mean);
    add_num(d, o, "stddev", s->stddev);
}

static void add_sample(yyjson_mut_doc *d, yyjson_mut_val *arr, const struct qr_bench_sample *s,
                       uint32_t rep)
{
    yyjson_mut_val *o = yyjson_mut_arr_add_obj(d, arr);
    yyjson_mut_obj_add_uint(d, o, "rep", rep);
    yyjson_mut_obj_add_bool(d, o, "ok", s->ok);
    for (size_t m = 0; m < QR_BENCH_N_METRICS; m++)
        add_num(d, o, METRICS[m], qr_bench_metric_value(s, m));
    add_num(d, o, "wall_ms", s->ok ? s->wall_ms : NAN);
    yyjson_mut_obj_add_uint(d, o, "prompt_tokens", s->prompt_tokens);
    yyjson_mut_obj_add_uint(d, o, "gen_tokens", s->gen_tokens);
    yyjson_mut_obj_add_uint(d, o, "n_ctx", s->n_ctx);
    yyjson_mut_obj_add_int(d, o, "load_ms", s->load_ms);
    if (!s->ok)
        yyjson_mut_obj_add_strcpy(d, o, "error", s->error);
}

/* The identity members every stored row and the report share. */
static void add_identity(const struct qr_bench_result *r, yyjson_mut_doc *d, yyjson_mut_val *o)
{
    yyjson_mut_obj_add_str(d, o, "schema_version", QR_BENCH_AB_SCHEMA);
    yyjson_mut_obj_add_strcpy(d, o, "host_fingerprint", r->id.fingerprint);
    yyjson_mut_obj_add_strcpy(d, o, "engine_version", r->id.engine_version);
    yyjson_mut_obj_add_strcpy(d, o, "backend", r->backend[0] ? r->backend : QR_BENCH_BACKEND);
    yyjson_mut_obj_add_strcpy(d, o, "model", r->model_key);
    yyjson_mut_obj_add_strcpy(d, o, "model_path", r->model_path);
    yyjson_mut_obj_add_strcpy(d, o, "workload", r->workload);
    if (r->think_set)
        yyjson_mut_obj_add_bool(d, o, "think", r->think);
    else
        yyjson_mut_obj_add_null(d, o, "think"); /* the chat template's default */
    yyjson_mut_obj_add_uint(d, o, "prompt_tokens_target", r->prompt_tokens_target);
    yyjson_mut_obj_add_uint(d, o, "gen_tokens", r->gen_tokens);
    yyjson_mut_obj_add_uint(d, o, "reps", r->reps);
    yyjson_mut_obj_add_uint(d, o, "threads", r->threads);
    yyjson_mut_obj_add_str(d, o, "order",
                           !strcmp(r->backend, "ollama")
                               ? "interleaved A,B,A,B; Ollama keeps the model loaded (a changed "
                                 "num_ctx reloads it: load_ms)"
                               : "interleaved A,B,A,B; a fresh engine per run");
    yyjson_mut_obj_add_str(d, o, "kv_source", r->kv_source ? r->kv_source : "unknown");
}

static void add_arm(const struct qr_bench_result *r, size_t a, int metric, yyjson_mut_doc *d,
                    yyjson_mut_val *parent, const char *key)
{
    yyjson_mut_val *o = yyjson_mut_obj_add_obj(d, parent, key);
    yyjson_mut_obj_add_strcpy(d, o, "label", r->arms[a].label);
    if (!strcmp(r->backend, "ollama")) {
        /* what the arm sent in /api/generate's options (Ollama's names) */
        yyjson_mut_val *ov = yyjson_mut_obj_add_obj(d, o, "ollama_options");
        static const char *const names[][2] = {
            {"ctx", "num_ctx"}, {"batch", "num_batch"}, {"threads", "num_thread"}};
        for (size_t i = 0; r->arms[a].override && i < r->arms[a].n_knobs; i++)
            for (size_t k = 0; k < 3; k++)
                if (!strcmp(r->arms[a].knobs[i].key, names[k][0]))
                    yyjson_mut_obj_add_strcpy(d, ov, names[k][1], r->arms[a].knobs[i].value);
    } else {
        yyjson_mut_val *args = yyjson_mut_obj_add_arr(d, o, "engine_args");
        const char *av[QR_CALIB_ENGINE_MAX_ARGS + 1];
        size_t n = qr_bench_arm_args(&r->arms[a], av, QR_ARRAY_LEN(av));
        for (size_t i = 0; i < n; i++)
            yyjson_mut_arr_add_strcpy(d, args, av[i]);
    }
    yyjson_mut_val *st = yyjson_mut_obj_add_obj(d, o, "stats");
    for (size_t m = 0; m < QR_BENCH_N_METRICS; m++) {
        if (metric >= 0 && (size_t) metric != m)
            continue;
        struct qr_bench_stats s;
        qr_bench_arm_stats(r, a, m, &s);
        add_stats(d, yyjson_mut_obj_add_obj(d, st, METRICS[m]), &s);
    }
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(d, o, "samples");
    for (uint32_t i = 0; i < r->reps && i < QR_BENCH_MAX_REPS; i++)
        add_sample(d, arr, &r->samples[a][i], i);
}

/* Override's median decode against native's, percent (NAN when either is missing). */
static double decode_delta(const struct qr_bench_result *r)
{
    struct qr_bench_stats a, b;
    qr_bench_arm_stats(r, 0, 0, &a);
    qr_bench_arm_stats(r, 1, 0, &b);
    return a.n && b.n && a.median > 0 ? (b.median - a.median) / a.median * 100.0 : NAN;
}

static enum qr_err fill(const struct qr_bench_result *r, int metric, yyjson_mut_doc *d,
                        yyjson_mut_val *obj)
{
    add_identity(r, d, obj);
    yyjson_mut_obj_add_int(d, obj, "started_ms", r->started_ms);
    yyjson_mut_obj_add_int(d, obj, "duration_ms", r->finished_ms - r->started_ms);
    add_arm(r, 0, metric, d, obj, "a");
    add_arm(r, 1, metric, d, obj, "b");
    add_num(d, obj, "decode_delta_pct", decode_delta(r));
    return yyjson_mut_obj_size(obj) > 0 ? QR_OK : QR_ERR_NOMEM;
}

enum qr_err qr_bench_ab_json(const struct qr_bench_result *r, struct yyjson_mut_doc *doc,
                             struct yyjson_mut_val *obj)
{
    return fill(r, -1, doc, obj);
}

enum qr_err qr_bench_ab_save(struct qr_store *s, const struct qr_bench_result *r, int64_t *out_id,
                             struct qr_diag *diag)
{
    for (size_t m = 0; m < QR_BENCH_N_METRICS; m++) {
        yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
        yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
        if (!o) {
            yyjson_mut_doc_free(d);
            return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
        }
        yyjson_mut_doc_set_root(d, o);
        fill(r, (int) m, d, o);
        yyjson_mut_obj_add_str(d, o, "metric", METRICS[m]);
        char *json = yyjson_mut_write(d, YYJSON_WRITE_ALLOW_INVALID_UNICODE, NULL);
        yyjson_mut_doc_free(d);
        if (!json)
            return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
        struct qr_store_bench b = {
            .time_ms = r->finished_ms,
            .name = QR_BENCH_AB_NAME,
            .model = r->model_key,
            .variant_a = r->arms[0].label,
            .variant_b = r->arms[1].label,
            .metric = METRICS[m],
            .values_json = json,
        };
        int64_t id = 0;
        enum qr_err err = qr_store_bench_add(s, &b, &id, diag);
        free(json);
        if (err)
            return err;
        if (m == 0 && out_id)
            *out_id = id;
    }
    return QR_OK;
}
