/* OpenAI-compatible adapter: any engine that serves /v1/chat/completions (llama-server, vLLM,
 * MLX-LM, SGLang, ...), local or remote. Requests go through the canonical contract and the
 * OpenAI upstream codec; dialect differences (reasoning field, usage, explicit defaults,
 * operations not offered) are data: a profile from data/dialects (profile.h), configured with
 * openai_dialect or, for `auto`, chosen by probing GET /version (vLLM, its version picks the
 * reasoning-field era), GET /props (llama-server), GET /health {"status":"ok"} (mlx_lm.server),
 * else generic. Detection runs in the readiness probe until it reaches the server once; requests
 * before that use the generic profile. Readiness is then the profile's health path. Design and
 * fields: docs/DIALECTS.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "api/codec.h"
#include "backend/backend.h"
#include "backend/codec.h"
#include "backend/job.h"
#include "backend/openai/metrics.h"
#include "backend/openai/openai.h"
#include "backend/openai/profile.h"
#include "backend/openai/replicated.h"
#include "backend/replicas.h"
#include "core/log.h"

#define PROBE_BODY_MAX 4096 /* /version, /health bodies kept for detection */

struct oa_backend {
    struct qr_backend base;    /* first: the instance is a qr_backend */
    struct qr_oa_profile prof; /* in use (generic while `auto` has not decided) */
    bool decided;              /* prof is the configured or the probed one */
    bool version_known;        /* version was asked for (or the profile has no version path) */
    bool detecting;            /* a probe is running detection */
    unsigned serial;           /* bumped whenever detection replaces prof */
    char version[QR_OA_MAX_VERSION]; /* "" unknown */
    char why[320];
    struct qr_oa_replicas *replicas; /* several urls: balanced (replicated.h); NULL for one */
    /* the last GET <metrics_path> after a successful probe (profiles with one: vLLM) */
    struct qr_oa_metrics metrics;
    bool metrics_have, metrics_fetching;
    int64_t metrics_at; /* wall clock ms */
    char metrics_url[QR_REPLICA_URL_MAX];
    char metrics_error[200];
    /* the names of the last successful /v1/models (listed_models_only profiles) */
    char **listed;
    size_t n_listed;
    bool listed_known;
};

static struct oa_backend *oa(struct qr_backend *b)
{
    return (struct oa_backend *) b;
}

static const char *key(const struct qr_backend *b)
{
    return b->env.spec ? b->env.spec->api_key : b->env.config->openai_api_key;
}

static const char *url(const struct qr_backend *b)
{
    return qr_backend_url(b);
}

/* Where probes and model lists go: an admitted replica (the first URL when every one is
 * ejected, so the answer says why), or the one URL. */
static const char *live_url(struct qr_backend *b)
{
    struct oa_backend *ob = (struct oa_backend *) b;
    const char *u = ob->replicas ? qr_oa_replicas_probe_url(ob->replicas) : NULL;
    return u ? u : url(b);
}

/* The dialect setting ("auto" when unset, e.g. a hand-built config). */
static const char *setting(const struct qr_backend *b)
{
    const char *s = b->env.spec ? b->env.spec->dialect : b->env.config->openai_dialect;
    return s && s[0] ? s : "auto";
}

/* An explicit reasoning field wins over the profile; NULL when none was configured. */
static const char *reasoning_override(const struct qr_backend *b)
{
    if (b->env.spec)
        return b->env.spec->reasoning_field;
    const struct qr_config *c = b->env.config;
    return c->source[QR_CFG_OPENAI_REASONING_FIELD] != QR_SRC_DEFAULT ? c->openai_reasoning_field
                                                                      : NULL;
}

static void log_choice(struct oa_backend *ob)
{
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    qr_openai_profile_apply(&ob->prof, ob->version, reasoning_override(&ob->base), &d);
    char buf[32] = "";
    const char *temp = buf;
    if (d.default_temperature_set)
        snprintf(buf, sizeof(buf), "%g", d.default_temperature);
    QR_LOG(QR_LOG_INFO, "openai dialect chosen", QR_LF_S("setting", setting(&ob->base)),
           QR_LF_S("dialect", ob->prof.name), QR_LF_S("version", ob->version),
           QR_LF_S("reasoning_field", d.reasoning_field), QR_LF_S("why", ob->why),
           QR_LF_S("default_temperature", temp),
           QR_LF_N("default_max_tokens", d.default_max_tokens));
}

static enum qr_err openai_open(struct qr_backend *b, struct qr_diag *diag)
{
    struct oa_backend *ob = oa(b);
    const char *set = setting(b);
    bool is_auto = strcmp(set, "auto") == 0;
    enum qr_err err = qr_openai_profile_load(is_auto ? "generic" : set, &ob->prof, diag);
    if (err)
        return err;
    ob->decided = !is_auto;
    ob->version_known = ob->prof.version_path[0] == 0;
    const struct qr_backend_spec *spec = b->env.spec;
    if (spec && spec->n_urls > 1) {
        /* ob->prof is replaced in place when detection decides: its health_path stays valid */
        ob->replicas = qr_oa_replicas_new(b, (const char *const *) spec->urls, spec->n_urls,
                                          ob->prof.health_path, diag);
        if (!ob->replicas)
            return QR_ERR_CONFIG;
    }
    if (is_auto) {
        snprintf(ob->why, sizeof(ob->why),
                 "openai_dialect=auto: not probed yet (generic meanwhile)");
    } else {
        snprintf(ob->why, sizeof(ob->why), "openai_dialect=%s (configured)", set);
        log_choice(ob);
    }
    return QR_OK;
}

/* ---- probe: detection (auto), the version (profiles with a version path), health ---- */

enum step { S_VERSION, S_PROPS, S_DETECT_HEALTH, S_HEALTH };

struct probe {
    struct oa_backend *ob;
    const char *url; /* the replica (or the one URL) this probe asks */
    qr_backend_probe_fn cb;
    void *arg;
    uint32_t timeout_ms;
    enum step step;
    bool detect; /* this probe runs detection (auto) */
    struct qr_oa_probe_answers a;
    char version_body[PROBE_BODY_MAX];
    char health_body[PROBE_BODY_MAX];
};

static const char *step_path(const struct probe *p)
{
    switch (p->step) {
    case S_VERSION:
        return p->detect ? "/version" : p->ob->prof.version_path;
    case S_PROPS:
        return "/props";
    case S_DETECT_HEALTH:
        return "/health";
    case S_HEALTH:
        break;
    }
    return p->ob->prof.health_path;
}

static void step_done(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                      void *arg);

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void metrics_done(enum qr_err err, int status, struct qr_slice body,
                         const struct qr_diag *diag, void *arg)
{
    struct oa_backend *ob = arg;
    ob->metrics_fetching = false;
    if (err == QR_ERR_CANCELLED)
        return;
    if (err || status < 200 || status > 299) {
        snprintf(ob->metrics_error, sizeof ob->metrics_error, "%.180s",
                 err ? (diag ? diag->msg : qr_err_str(err)) : "status not 2xx");
        return;
    }
    qr_oa_metrics_parse(body, &ob->metrics);
    ob->metrics_have = true;
    ob->metrics_at = wall_ms();
    ob->metrics_error[0] = '\0';
}

/* After a successful probe: the engine's load and cache gauges (never part of readiness). */
static void fetch_metrics(struct oa_backend *ob, const char *url)
{
    if (!ob->prof.metrics_path[0] || ob->metrics_fetching)
        return;
    snprintf(ob->metrics_url, sizeof ob->metrics_url, "%s", url);
    ob->metrics_fetching =
        qr_fetch(&ob->base, ob->metrics_url, ob->prof.metrics_path, key(&ob->base), 2000,
                 QR_OA_METRICS_MAX_BYTES, metrics_done, ob) == QR_OK;
}

static void finish(struct probe *p, enum qr_err err, const struct qr_diag *diag)
{
    if (p->detect)
        p->ob->detecting = false;
    if (!err)
        fetch_metrics(p->ob, p->url);
    p->cb(&p->ob->base, err, diag, p->arg);
    free(p);
}

static void next(struct probe *p, enum step s)
{
    p->step = s;
    enum qr_err err = qr_fetch(&p->ob->base, p->url, step_path(p), key(&p->ob->base), p->timeout_ms,
                               64 * 1024, step_done, p);
    if (err) {
        struct qr_diag d;
        qr_diag_set(&d, err, "cannot start GET %s", step_path(p));
        finish(p, err, &d);
    }
}

static void decide(struct probe *p)
{
    struct oa_backend *ob = p->ob;
    struct qr_oa_detection det;
    qr_openai_detect(&p->a, &det);
    struct qr_diag d = {{0}};
    struct qr_oa_profile prof;
    if (qr_openai_profile_load(det.dialect, &prof, &d)) {
        QR_LOG(QR_LOG_ERROR, "cannot load the probed dialect profile; keeping generic",
               QR_LF_S("dialect", det.dialect), QR_LF_S("error", d.msg));
        return;
    }
    ob->prof = prof;
    ob->serial++;
    ob->decided = true;
    ob->version_known = true;
    snprintf(ob->version, sizeof(ob->version), "%s", det.version);
    snprintf(ob->why, sizeof(ob->why), "openai_dialect=auto: %s", det.why);
    log_choice(ob);
}

static void keep_body(struct qr_slice body, char *dst, struct qr_slice *out)
{
    size_t n = body.len < PROBE_BODY_MAX ? body.len : 0; /* an oversized body is no answer */
    if (n)
        memcpy(dst, body.ptr, n);
    *out = (struct qr_slice){dst, n};
}

static void step_done(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                      void *arg)
{
    struct probe *p = arg;
    struct oa_backend *ob = p->ob;
    struct qr_diag d = {{0}};
    if (err) { /* unreachable, timed out or shutting down: nothing decided, retried next probe */
        qr_diag_set(&d, err, "GET %s: %s", step_path(p), diag ? diag->msg : qr_err_str(err));
        finish(p, err, &d);
        return;
    }
    switch (p->step) {
    case S_VERSION:
        p->a.version_status = status;
        keep_body(body, p->version_body, &p->a.version_body);
        if (!p->detect) { /* a configured profile: only its era */
            qr_openai_version_of(p->a.version_body, ob->version, sizeof(ob->version));
            ob->version_known = true;
            if (ob->version[0])
                log_choice(ob);
            next(p, S_HEALTH);
            return;
        }
        char v[QR_OA_MAX_VERSION];
        if (status >= 200 && status < 300 &&
            qr_openai_version_of(p->a.version_body, v, sizeof(v))) {
            decide(p);
            next(p, S_HEALTH);
            return;
        }
        next(p, S_PROPS);
        return;
    case S_PROPS:
        p->a.props_status = status;
        if (status >= 200 && status < 300) {
            decide(p);
            next(p, S_HEALTH);
            return;
        }
        next(p, S_DETECT_HEALTH);
        return;
    case S_DETECT_HEALTH:
        p->a.health_status = status;
        keep_body(body, p->health_body, &p->a.health_body);
        decide(p);
        next(p, S_HEALTH);
        return;
    case S_HEALTH:
        break;
    }
    if (qr_openai_profile_healthy(&ob->prof, status, body)) {
        finish(p, QR_OK, &d);
        return;
    }
    qr_diag_set(&d, QR_ERR_UPSTREAM, "GET %s answered %d%s", ob->prof.health_path, status,
                status >= 200 && status < 300 ? " without {\"status\":\"ok\"}" : "");
    finish(p, QR_ERR_UPSTREAM, &d);
}

static enum qr_err openai_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                                void *arg)
{
    struct oa_backend *ob = oa(b);
    struct probe *p = calloc(1, sizeof(*p));
    if (!p)
        return QR_ERR_NOMEM;
    p->ob = ob;
    p->cb = cb;
    p->arg = arg;
    p->timeout_ms = timeout_ms;
    enum step first = S_HEALTH;
    if (!ob->decided && !ob->detecting) {
        p->detect = true;
        ob->detecting = true;
        first = S_VERSION;
    } else if (ob->decided && !ob->version_known) {
        first = S_VERSION;
    }
    p->step = first;
    p->url = live_url(b);
    enum qr_err err =
        qr_fetch(b, p->url, step_path(p), key(b), timeout_ms, 64 * 1024, step_done, p);
    if (err) {
        if (p->detect)
            ob->detecting = false;
        free(p);
    }
    return err;
}

/* ---- serving ---- */

static enum qr_err check_listed(struct oa_backend *ob, const struct qr_request *req,
                                struct qr_api_error *err);

static enum qr_err openai_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                                 void *arg, struct qr_job **out, struct qr_api_error *err)
{
    struct oa_backend *ob = oa(b);
    enum qr_err lerr = check_listed(ob, req, err);
    if (lerr)
        return lerr;
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    qr_openai_profile_apply(&ob->prof, ob->version, reasoning_override(b), &d);
    bool chat_like = req->op == QR_OP_CHAT || req->op == QR_OP_COMPLETION;
    if (chat_like && ((d.default_temperature_set && !req->sampling.temperature.set) ||
                      (d.default_max_tokens > 0 && !req->max_tokens.set)))
        QR_LOG(QR_LOG_DEBUG, "dialect defaults sent for what the client left unset",
               QR_LF_S("dialect", d.dialect_name),
               QR_LF_B("temperature", d.default_temperature_set && !req->sampling.temperature.set),
               QR_LF_B("max_tokens", d.default_max_tokens > 0 && !req->max_tokens.set));
    if (ob->replicas)
        return qr_oa_replicas_submit(ob->replicas, &d, key(b), req, fn, arg, out, err);
    return qr_job_start_http(b, &d, url(b), key(b), req, fn, arg, out, err);
}

/* One /v1/models entry; vLLM's max_model_len becomes the context length. */
static bool models_row(yyjson_val *m, struct qr_backend_model *r)
{
    const char *id = yyjson_get_str(yyjson_obj_get(m, "id"));
    if (!id)
        return false;
    yyjson_val *created = yyjson_obj_get(m, "created");
    yyjson_val *ctxlen = yyjson_obj_get(m, "max_model_len");
    const char *owner = yyjson_get_str(yyjson_obj_get(m, "owned_by"));
    r->id = id;
    r->created = yyjson_is_int(created) ? yyjson_get_sint(created) : 0;
    r->owned_by = owner ? owner : "";
    r->context_length = yyjson_is_int(ctxlen) ? yyjson_get_sint(ctxlen) : -1;
    /* vLLM lists a LoRA adapter with its base model as "parent" (quirk 30) */
    r->parent = yyjson_get_str(yyjson_obj_get(m, "parent"));
    return true;
}

static void listed_free(struct oa_backend *ob)
{
    for (size_t i = 0; i < ob->n_listed; i++)
        free(ob->listed[i]);
    free(ob->listed);
    ob->listed = NULL;
    ob->n_listed = 0;
}

struct list_ctx {
    qr_models_fn cb;
    void *arg;
};

/* Every successful list is kept (the names the server serves), then handed on. */
static void models_seen(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                        size_t n, const struct qr_diag *diag, void *arg)
{
    struct list_ctx lc = *(struct list_ctx *) arg;
    free(arg);
    struct oa_backend *ob = oa(b);
    if (!err) {
        char **names = calloc(n ? n : 1, sizeof(*names));
        size_t k = 0;
        for (size_t i = 0; names && i < n; i++) {
            if (!(names[k] = strdup(m[i].id)))
                break;
            k++;
        }
        if (names && k == n) {
            listed_free(ob);
            ob->listed = names;
            ob->n_listed = n;
            ob->listed_known = true;
        } else if (names) {
            for (size_t i = 0; i < k; i++)
                free(names[i]);
            free(names);
        }
    }
    lc.cb(b, err, m, n, diag, lc.arg);
}

static enum qr_err openai_list_models(struct qr_backend *b, uint32_t timeout_ms, qr_models_fn cb,
                                      void *arg)
{
    struct list_ctx *lc = malloc(sizeof(*lc));
    if (!lc)
        return QR_ERR_NOMEM;
    *lc = (struct list_ctx){cb, arg};
    enum qr_err err = qr_fetch_models(b, live_url(b), "/v1/models", key(b), timeout_ms, "data",
                                      models_row, models_seen, lc);
    if (err)
        free(lc);
    return err;
}

/* Quirk 32: a server that loads whatever "model" names is only sent the names it listed. */
static enum qr_err check_listed(struct oa_backend *ob, const struct qr_request *req,
                                struct qr_api_error *err)
{
    if (!ob->prof.listed_models_only)
        return QR_OK;
    const char *id = qr_backend_id(&ob->base);
    int len = req->model.len > 200 ? 200 : (int) req->model.len;
    if (!ob->listed_known)
        return qr_api_error_set(err, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "model",
                                "backend '%s' (%s) has not listed its models yet; only listed "
                                "models are sent to it",
                                id, ob->prof.name);
    for (size_t i = 0; i < ob->n_listed; i++) {
        if (qr_slice_eq(req->model, ob->listed[i]))
            return QR_OK;
    }
    return qr_api_error_set(err, QR_ERR_NOT_FOUND, 404, "model_not_found", "model",
                            "model '%.*s' is not one backend '%s' lists: a %s server loads "
                            "whatever 'model' names, so only the models it lists are sent to it",
                            len, req->model.ptr ? req->model.ptr : "", id, ob->prof.name);
}

/* "dialect": what was configured, what was probed, what was chosen and why, and the knobs. */
static void describe_dialect(struct oa_backend *ob, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    static const char *const ops[] = {"chat", "completions", "embeddings", "rerank"};
    const struct qr_oa_profile *p = &ob->prof;
    const char *override = reasoning_override(&ob->base);
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_strcpy(doc, o, "setting", setting(&ob->base));
    bool is_auto = strcmp(setting(&ob->base), "auto") == 0;
    yyjson_mut_obj_add_str(doc, o, "state",
                           !ob->decided ? "pending"
                           : is_auto    ? "probed"
                                        : "configured");
    if (ob->decided)
        yyjson_mut_obj_add_strcpy(doc, o, "chosen", p->name);
    else
        yyjson_mut_obj_add_null(doc, o, "chosen");
    yyjson_mut_obj_add_strcpy(doc, o, "in_use", p->name);
    if (ob->version[0])
        yyjson_mut_obj_add_strcpy(doc, o, "version", ob->version);
    else
        yyjson_mut_obj_add_null(doc, o, "version");
    if (ob->decided && p->ledger_project[0])
        yyjson_mut_obj_add_strcpy(doc, o, "ledger_project", p->ledger_project);
    else
        yyjson_mut_obj_add_null(doc, o, "ledger_project");
    yyjson_mut_obj_add_strcpy(doc, o, "why", ob->why);
    yyjson_mut_obj_add_strcpy(doc, o, "reasoning_field",
                              override ? override
                                       : qr_openai_profile_reasoning_field(p, ob->version));
    yyjson_mut_obj_add_str(doc, o, "reasoning_field_source",
                           override                      ? "configuration (openai_reasoning_field)"
                           : ob->version[0] && p->n_eras ? "profile era of the version"
                                                         : "profile");
    yyjson_mut_obj_add_strcpy(doc, o, "health_path", p->health_path);
    if (p->version_path[0])
        yyjson_mut_obj_add_strcpy(doc, o, "version_path", p->version_path);
    if (p->metrics_path[0])
        yyjson_mut_obj_add_strcpy(doc, o, "metrics_path", p->metrics_path);
    yyjson_mut_obj_add_bool(doc, o, "stream_usage", p->stream_usage);
    yyjson_mut_val *def = yyjson_mut_obj(doc);
    if (p->default_temperature_set)
        yyjson_mut_obj_add_real(doc, def, "temperature", p->default_temperature);
    if (p->default_max_tokens > 0)
        yyjson_mut_obj_add_sint(doc, def, "max_tokens", p->default_max_tokens);
    yyjson_mut_obj_add_val(doc, o, "defaults_when_unset", def);
    yyjson_mut_val *un = yyjson_mut_arr(doc);
    for (size_t i = 0; i < QR_ARRAY_LEN(ops); i++) {
        if (p->ops_unsupported & (1u << i))
            yyjson_mut_arr_add_str(doc, un, ops[i]);
    }
    yyjson_mut_obj_add_val(doc, o, "unsupported_ops", un);
    if (p->context_length_field[0])
        yyjson_mut_obj_add_strcpy(doc, o, "context_length_field", p->context_length_field);
    yyjson_mut_obj_add_strcpy(doc, o, "guided_decoding", p->guided_decoding);
    yyjson_mut_obj_add_bool(doc, o, "listed_models_only", p->listed_models_only);
    yyjson_mut_obj_add_val(doc, obj, "dialect", o);
}

void qr_openai_describe_dialect(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    if (!ALWAYS(b->vt == &qr_backend_openai))
        return;
    struct oa_backend *ob = oa(b);
    describe_dialect(ob, doc, obj);
    if (ob->replicas)
        qr_oa_replicas_describe(ob->replicas, doc, obj);
    const struct qr_backend_parsers *ps = b->env.spec ? &b->env.spec->parsers : NULL;
    if (ps && ps->set) {
        yyjson_mut_val *pv = yyjson_mut_obj_add_obj(doc, obj, "parsers");
        yyjson_mut_obj_add_str(doc, pv, "source", "configuration");
        if (ps->tool_call)
            yyjson_mut_obj_add_strcpy(doc, pv, "tool_call", ps->tool_call);
        yyjson_mut_obj_add_bool(doc, pv, "auto_tool_choice", ps->auto_tool_choice);
        if (ps->reasoning)
            yyjson_mut_obj_add_strcpy(doc, pv, "reasoning", ps->reasoning);
    }
    if (!ob->prof.metrics_path[0])
        return;
    yyjson_mut_val *mv = yyjson_mut_obj_add_obj(doc, obj, "metrics");
    yyjson_mut_obj_add_strcpy(doc, mv, "path", ob->prof.metrics_path);
    if (ob->metrics_error[0])
        yyjson_mut_obj_add_strcpy(doc, mv, "error", ob->metrics_error);
    if (!ob->metrics_have)
        return;
    yyjson_mut_obj_add_strcpy(doc, mv, "source", ob->metrics_url);
    yyjson_mut_obj_add_int(doc, mv, "fetched_at_ms", ob->metrics_at);
    const struct {
        const char *key;
        const struct qr_oa_metric *m;
    } rows[] = {
        {"requests_running", &ob->metrics.requests_running},
        {"requests_waiting", &ob->metrics.requests_waiting},
        {"kv_cache_usage", &ob->metrics.kv_cache_usage},
        {"preemptions_total", &ob->metrics.preemptions_total},
        {"prompt_tokens_total", &ob->metrics.prompt_tokens_total},
        {"generation_tokens_total", &ob->metrics.generation_tokens_total},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(rows); i++) {
        if (rows[i].m->seen)
            yyjson_mut_obj_add_real(doc, mv, rows[i].key, rows[i].m->v);
    }
}

const char *qr_openai_engine_version(const struct qr_backend *b)
{
    if (!ALWAYS(b->vt == &qr_backend_openai))
        return "";
    return ((const struct oa_backend *) b)->version;
}

unsigned qr_openai_dialect_serial(const struct qr_backend *b)
{
    if (!ALWAYS(b->vt == &qr_backend_openai))
        return 0;
    return ((const struct oa_backend *) b)->serial;
}

const char *qr_openai_ledger_project(const struct qr_backend *b)
{
    if (!ALWAYS(b->vt == &qr_backend_openai))
        return NULL;
    const struct oa_backend *ob = (const struct oa_backend *) b;
    return ob->decided && ob->prof.ledger_project[0] ? ob->prof.ledger_project : NULL;
}

static void openai_close(struct qr_backend *b)
{
    qr_oa_replicas_free(oa(b)->replicas);
    oa(b)->replicas = NULL;
    listed_free(oa(b));
}

static void openai_describe(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    /* What an arbitrary OpenAI-compatible engine can do depends on the engine, its flags and
     * the model: conditional until conformance verifies it; unknown where nothing is known. */
    static const struct {
        const char *key, *state;
    } rows[] = {
        {"text", "conditional"},
        {"architecture.dense", "conditional"},
        {"architecture.moe", "conditional"},
        {"moe.expert_offload", "unknown"},
        {"moe.expert_parallel", "unknown"},
        {"speculative.mtp", "unknown"},
        {"speculative.draft_model", "unknown"},
        {"cache.kv_offload", "unknown"},
        {"cache.prompt_cache", "conditional"},
        {"multimodal.vision", "conditional"},
        {"multimodal.audio", "conditional"},
        {"embeddings", "conditional"},
        {"reranking", "conditional"}, /* forwarded to /v1/rerank (llama-server, vLLM) */
        {"reasoning_control", "conditional"},
        {"tools.calling", "conditional"},
        {"tools.streaming", "conditional"},
        {"structured_output", "conditional"},
        {"streaming.content", "supported"},
        {"streaming.reasoning", "conditional"},
        {"streaming.tool_arguments", "conditional"},
        {"placement.cpu", "unknown"},
        {"placement.gpu", "unknown"},
        {"placement.hybrid", "unknown"},
    };
    const struct qr_oa_profile *prof = &oa(b)->prof;
    /* the server's parsers as the operator stated them (no endpoint reports them): tools and
     * reasoning are declared by them, supported or not */
    const struct qr_backend_parsers *ps = b->env.spec ? &b->env.spec->parsers : NULL;
    bool ps_set = ps && ps->set;
    bool ps_tools = ps_set && ps->tool_call && ps->auto_tool_choice;
    bool ps_reasoning = ps_set && ps->reasoning;
    yyjson_mut_obj_add_str(doc, obj, "execution_mode", "external");
    yyjson_mut_obj_add_strcpy(doc, obj, "endpoint", url(b));
    yyjson_mut_val *caps = yyjson_mut_obj(doc);
    for (size_t i = 0; i < QR_ARRAY_LEN(rows); i++) {
        const char *state = rows[i].state;
        if ((strcmp(rows[i].key, "embeddings") == 0 &&
             (prof->ops_unsupported & (1u << QR_OP_EMBED))) ||
            (strcmp(rows[i].key, "reranking") == 0 &&
             (prof->ops_unsupported & (1u << QR_OP_RERANK))))
            state = "unsupported"; /* the dialect does not offer it (codec refuses with 422) */
        if (!strcmp(rows[i].key, "structured_output") && !strcmp(prof->guided_decoding, "none"))
            state = "unsupported"; /* the server ignores response_format (mlx_lm.server, D.8):
                                      refused before it is asked, never answered as free text */
        if (ps_set &&
            (!strcmp(rows[i].key, "tools.calling") || !strcmp(rows[i].key, "tools.streaming") ||
             !strcmp(rows[i].key, "streaming.tool_arguments")))
            state = ps_tools ? "supported" : "unsupported";
        if (ps_set && (!strcmp(rows[i].key, "reasoning_control") ||
                       !strcmp(rows[i].key, "streaming.reasoning")))
            state = ps_reasoning ? "supported" : "unsupported";
        yyjson_mut_obj_add_str(doc, caps, rows[i].key, state);
    }
    yyjson_mut_val *ctx = yyjson_mut_obj(doc);
    yyjson_mut_obj_add_bool(doc, ctx, "backend_managed", true);
    yyjson_mut_obj_add_str(doc, ctx, "override_supported", "unknown");
    yyjson_mut_obj_add_bool(doc, ctx, "override_verified", false);
    yyjson_mut_obj_add_val(doc, caps, "context", ctx);
    yyjson_mut_obj_add_val(doc, obj, "capabilities", caps);
    describe_dialect(oa(b), doc, obj);
}

const struct qr_backend_vtable qr_backend_openai = {
    .version = QR_BACKEND_VTABLE_V1,
    .id = "openai",
    .kind = "openai-compatible",
    .instance_size = sizeof(struct oa_backend),
    .open = openai_open,
    .close = openai_close,
    .describe = openai_describe,
    .probe = openai_probe,
    .proxy = NULL,
    .submit = openai_submit,
    .list_models = openai_list_models,
};
