/* Backend instances: creation through the vtable, the descriptor's common fields, and the probe
 * wrapper that keeps each instance's state (ready/unavailable) current from real probe results
 * instead of a hard-coded "unknown". */
#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

#include <yyjson.h>

#include "backend/job.h"
#include "build_info.h"

const char *qr_backend_state_str(enum qr_backend_state s)
{
    switch (s) {
    case QR_BACKEND_READY:
        return "ready";
    case QR_BACKEND_UNAVAILABLE:
        return "unavailable";
    case QR_BACKEND_DISABLED:
        return "disabled";
    default:
        return "unknown";
    }
}

static int64_t now_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

enum qr_err qr_backend_new(const struct qr_backend_vtable *vt, const struct qr_backend_env *env,
                           struct qr_diag *diag, struct qr_backend **out)
{
    if (vt->version != QR_BACKEND_VTABLE_V1 || vt->instance_size < sizeof(struct qr_backend))
        return qr_diag_set(diag, QR_ERR_INTERNAL, "backend '%s': unsupported vtable", vt->id);
    struct qr_backend *b = calloc(1, vt->instance_size);
    if (!b)
        return QR_ERR_NOMEM;
    b->vt = vt;
    b->env = *env;
    if (!b->env.spec && env->config) {
        /* an environment built without one: the configuration's entry of this adapter's kind */
        const char *kind = vt->id[0] == 'l' ? "llamacpp" : vt->id;
        for (size_t i = 0; i < env->config->n_backends && !b->env.spec; i++) {
            if (!strcmp(env->config->backends[i].kind, kind))
                b->env.spec = &env->config->backends[i];
        }
    }
    b->state = QR_BACKEND_UNKNOWN;
    b->state_since_ms = now_ms();
    enum qr_err err = vt->open ? vt->open(b, diag) : QR_OK;
    if (err) {
        free(b);
        return err;
    }
    *out = b;
    return QR_OK;
}

const char *qr_backend_id(const struct qr_backend *b)
{
    return b->env.spec ? b->env.spec->id : b->vt->id;
}

const char *qr_backend_url(const struct qr_backend *b)
{
    const struct qr_backend_spec *s = b->env.spec;
    if (s)
        return s->n_urls ? s->urls[0] : "";
    const struct qr_config *c = b->env.config;
    return !strcmp(b->vt->id, "openai")   ? c->openai_url
           : !strcmp(b->vt->id, "ollama") ? c->ollama_url
                                          : "";
}

void qr_backend_free(struct qr_backend *b)
{
    if (!b)
        return;
    qr_fetch_cancel_all(b);
    if (b->vt->close)
        b->vt->close(b);
    qr_job_free_orphans(b);
    free(b);
}

void qr_backend_describe(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    yyjson_mut_obj_add_str(doc, obj, "contract_version", QR_BACKEND_CONTRACT);
    yyjson_mut_obj_add_str(doc, obj, "id", qr_backend_id(b));
    yyjson_mut_obj_add_str(doc, obj, "kind", b->vt->kind);
    yyjson_mut_obj_add_str(doc, obj, "adapter_version", QR_VERSION);
    yyjson_mut_obj_add_str(doc, obj, "state", qr_backend_state_str(b->state));
    b->vt->describe(b, doc, obj);
}

struct probe_ctx {
    qr_backend_probe_fn cb;
    void *arg;
};

static void probe_done(struct qr_backend *b, enum qr_err err, const struct qr_diag *diag, void *arg)
{
    struct probe_ctx ctx = *(struct probe_ctx *) arg;
    free(arg);
    enum qr_backend_state s = err ? QR_BACKEND_UNAVAILABLE : QR_BACKEND_READY;
    if (s != b->state) {
        b->state = s;
        b->state_since_ms = now_ms();
    }
    ctx.cb(b, err, diag, ctx.arg);
}

enum qr_err qr_backend_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                             void *arg)
{
    struct probe_ctx *ctx = malloc(sizeof(*ctx));
    if (!ctx)
        return QR_ERR_NOMEM;
    ctx->cb = cb;
    ctx->arg = arg;
    enum qr_err err = b->vt->probe(b, timeout_ms, probe_done, ctx);
    if (err)
        free(ctx);
    return err;
}

/* ---- admission ---- */

static uint32_t admitted_total; /* over every backend instance; the loop is single-threaded */

uint32_t qr_backend_max_queue(const struct qr_backend *b)
{
    if (b->env.spec && b->env.spec->max_queue)
        return (uint32_t) b->env.spec->max_queue;
    return b->env.config && b->env.config->max_queue ? (uint32_t) b->env.config->max_queue : 512;
}

uint32_t qr_backend_connect_timeout_ms(const struct qr_backend *b)
{
    const struct qr_config *cfg = b->env.config;
    return cfg && cfg->upstream_connect_timeout_ms ? (uint32_t) cfg->upstream_connect_timeout_ms
                                                   : 10000;
}

static uint32_t max_requests(const struct qr_backend *b)
{
    return b->env.config && b->env.config->max_requests ? (uint32_t) b->env.config->max_requests
                                                        : 2048;
}

enum qr_admit qr_backend_admit(struct qr_backend *b)
{
    if (b->admitted >= qr_backend_max_queue(b))
        return QR_ADMIT_BACKEND_FULL;
    if (admitted_total >= max_requests(b))
        return QR_ADMIT_RUNTIME_FULL;
    b->admitted++;
    admitted_total++;
    return QR_ADMIT_OK;
}

void qr_backend_release(struct qr_backend *b)
{
    if (NEVER(!b->admitted || !admitted_total))
        return;
    b->admitted--;
    admitted_total--;
}

uint32_t qr_backend_admitted_total(void)
{
    return admitted_total;
}

void qr_backend_admit_message(const struct qr_backend *b, enum qr_admit a, char *out, size_t cap)
{
    if (a == QR_ADMIT_RUNTIME_FULL)
        snprintf(out, cap,
                 "server busy, please try again: the runtime has %u inference requests in "
                 "progress (max_requests)",
                 (unsigned) admitted_total);
    else
        snprintf(out, cap,
                 "server busy, please try again: backend '%s' has %u inference requests queued "
                 "(max_queue)",
                 qr_backend_id(b), (unsigned) b->admitted);
}
