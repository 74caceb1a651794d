/* The application object: binds the listener, creates the upstream client and the configured
 * backend, and owns the process-level behaviour of the daemon -- the access log, SIGTERM/SIGINT
 * graceful shutdown (stop accepting, let in-flight streams finish up to shutdown_timeout, then
 * close) and SIGHUP reload of the reloadable settings. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <event2/event.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/llamacpp_glue.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "backend/ollama/ollama.h"
#include "build_info.h"
#include "core/http_client.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/sdnotify.h"

#define SHUTDOWN_TICK_MS 50

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void access_log(const struct qr_http_access *r, void *arg)
{
    QR_LOG(QR_LOG_INFO, "request", QR_LF_S("request_id", r->request_id),
           QR_LF_S("method", r->method), QR_LF_S("path", r->path), QR_LF_N("status", r->status),
           QR_LF_N("duration_us", r->duration_us), QR_LF_N("bytes_in", r->bytes_in),
           QR_LF_N("bytes_out", r->bytes_out), QR_LF_S("peer", r->peer),
           QR_LF_B("aborted", r->aborted));
}

static void apply_logging(const struct qr_config *cfg)
{
    static const char *const levels[] = {"debug", "info", "warn", "error"};
    enum qr_log_level lv = QR_LOG_INFO;
    for (int i = 0; i < 4; i++) {
        if (!strcmp(cfg->log_level, levels[i]))
            lv = (enum qr_log_level) i;
    }
    qr_log_setup(lv, strcmp(cfg->log_format, "text") ? QR_LOG_JSON : QR_LOG_TEXT);
}

/* Every proxied request holds two descriptors (client and upstream), and the server accepts up
 * to twice max_connections before it stops answering 503: raise the soft RLIMIT_NOFILE toward the
 * hard limit so that max_connections can really be served. Many systems start services with a
 * soft limit of 1024, and then 1,000 concurrent streams fail with 502 (EMFILE on the upstream
 * connect) and paused accepts (bench/run-load-bench, docs/PERFORMANCE.md "Load"). */
static void raise_nofile(uint64_t max_connections)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    rlim_t want = (rlim_t) max_connections * 4 + 256;
    if (rl.rlim_cur >= want)
        return;
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (rl.rlim_cur > old && setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl.rlim_cur = old;
    if (rl.rlim_cur < want)
        QR_LOG(QR_LOG_WARN, "open-file limit below what max_connections needs",
               QR_LF_N("limit", rl.rlim_cur), QR_LF_N("wanted", want));
}

static void shutdown_tick(evutil_socket_t fd, short what, void *arg)
{
    struct qr_app *app = arg;
    unsigned n = qr_http_server_in_flight(app->http);
    if (n == 0) {
        QR_LOG0(QR_LOG_INFO, "shutdown complete: no request in flight");
        event_base_loopexit(app->base, NULL);
        return;
    }
    if (mono_us() >= app->shutdown_deadline_us) {
        unsigned ended = qr_api_infer_cancel_all(app);
        for (size_t i = 0; i < app->n_backends; i++) /* the passthrough's byte-for-byte streams */
            ended += qr_ollama_end_all(app->backends[i].b,
                                       "the server is shutting down (shutdown_timeout passed)");
        QR_LOG(QR_LOG_WARN, "shutdown timeout: closing requests still in flight",
               QR_LF_N("in_flight", n), QR_LF_N("ended_cancelled", ended));
        /* a moment for the cancelled ends to reach their clients */
        struct timeval grace = {0, ended ? 200000 : 0};
        event_base_loopexit(app->base, &grace);
        return;
    }
    struct timeval tv = {0, SHUTDOWN_TICK_MS * 1000};
    evtimer_add(app->shutdown_tick, &tv);
}

/* With several backends the router chooses among them by state, so each is probed in the
 * background: one that is not ready every HEALTH_TICK_MS, every one each HEALTH_ALL_TICKS ticks. A
 * single backend keeps the request-driven behaviour (its requests reach it whatever its state). */
#define HEALTH_TICK_MS   2000
#define HEALTH_ALL_TICKS 5
#define HEALTH_PROBE_MS  3000

static void health_done(struct qr_backend *b, enum qr_err err, const struct qr_diag *diag,
                        void *arg)
{
    struct qr_app_backend *ab = arg;
    ab->probing = false;
    if (err == QR_ERR_CANCELLED)
        return;
    QR_LOG(QR_LOG_DEBUG, "backend health", QR_LF_S("backend", qr_backend_id(b)),
           QR_LF_S("state", qr_backend_state_str(b->state)),
           QR_LF_S("detail", err && diag ? diag->msg : ""));
}

static void health_tick(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    struct qr_app *app = arg;
    if (app->shutting_down)
        return;
    bool all = ++app->health_ticks % HEALTH_ALL_TICKS == 0;
    for (size_t i = 0; i < app->n_backends; i++) {
        struct qr_app_backend *ab = &app->backends[i];
        if (ab->probing || (!all && ab->b->state == QR_BACKEND_READY))
            continue;
        ab->probing = qr_backend_probe(ab->b, HEALTH_PROBE_MS, health_done, ab) == QR_OK;
    }
    struct timeval tv = {HEALTH_TICK_MS / 1000, (HEALTH_TICK_MS % 1000) * 1000};
    evtimer_add(app->health_tick, &tv);
}

void qr_app_shutdown(struct qr_app *app)
{
    if (app->shutting_down)
        return;
    app->shutting_down = true;
    qr_sdnotify_send("STOPPING=1\nSTATUS=shutting down", NULL);
    app->shutdown_deadline_us = mono_us() + app->cfg->shutdown_timeout_ms * 1000u;
    QR_LOG(QR_LOG_INFO, "shutting down: no longer accepting connections",
           QR_LF_N("in_flight", qr_http_server_in_flight(app->http)),
           QR_LF_N("timeout_ms", app->cfg->shutdown_timeout_ms));
    qr_http_server_stop_accepting(app->http);
    shutdown_tick(-1, 0, app);
}

void qr_app_reload(struct qr_app *app)
{
    struct qr_diag warn = {{0}}, diag = {{0}};
    if (qr_config_reload(app->cfg, app->argc, app->argv, app->envp, &warn, &diag)) {
        QR_LOG(QR_LOG_ERROR, "reload refused: configuration invalid, keeping the running one",
               QR_LF_S("error", diag.msg));
        return;
    }
    apply_logging(app->cfg);
    /* the catalog is rebuilt as a whole; the running one stays if that cannot be done */
    struct qr_catalog *fresh = NULL;
    if (qr_catalog_load(app->cfg, app->catalog, &fresh)) {
        QR_LOG0(QR_LOG_ERROR, "reload: cannot rebuild the catalog, keeping the running one");
    } else {
        qr_catalog_free(app->catalog);
        app->catalog = fresh;
        qr_api_refresh_backend_models(app);
        qr_api_guard_refresh(app); /* A/B runs stored since the start count now */
    }
    if (warn.msg[0])
        QR_LOG(QR_LOG_WARN, "reload: these settings changed but need a restart",
               QR_LF_S("keys", warn.msg));
    QR_LOG(QR_LOG_INFO, "configuration reloaded",
           QR_LF_B("model_mutation", app->cfg->allow_model_mutation),
           QR_LF_B("auth", app->cfg->auth_token[0] != '\0'));
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct qr_app *app = arg;
    if (sig == SIGHUP) {
        qr_app_reload(app);
        return;
    }
    if (app->shutting_down) {
        QR_LOG0(QR_LOG_WARN, "second signal: exiting now");
        event_base_loopexit(app->base, NULL);
        return;
    }
    qr_app_shutdown(app);
}

static void startup_probe_done(struct qr_backend *b, enum qr_err err, const struct qr_diag *diag,
                               void *arg)
{
    if (err)
        QR_LOG(QR_LOG_WARN, "backend not ready yet", QR_LF_S("backend", qr_backend_id(b)),
               QR_LF_S("detail", diag->msg));
    else
        QR_LOG(QR_LOG_INFO, "backend ready", QR_LF_S("backend", qr_backend_id(b)));
}

enum qr_err qr_app_init(struct qr_app *app, struct event_base *base, struct qr_config *cfg,
                        struct qr_diag *diag)
{
    enum qr_err err;
    app->base = base;
    app->cfg = cfg;
    apply_logging(cfg);
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(cfg->max_connections);

    struct qr_http_server_opts opts = {
        .host = cfg->listen_host,
        .port = cfg->listen_port,
        .max_header_bytes = cfg->max_header_bytes,
        .max_headers = 128,
        .max_connections = (unsigned) cfg->max_connections,
        .header_timeout_ms = (uint32_t) cfg->header_timeout_ms,
        .read_timeout_ms = (uint32_t) cfg->read_timeout_ms,
        .idle_timeout_ms = (uint32_t) cfg->idle_timeout_ms,
        .write_timeout_ms = (uint32_t) cfg->read_timeout_ms,
        .out_high_water = 256 * 1024,
        .handler = qr_api_dispatch,
        .handler_arg = app,
        .access_fn = access_log,
        .access_arg = app,
    };
    if ((err = qr_http_client_new(base, diag, &app->client)))
        goto fail;
    qr_http_client_set_curl_only(app->client, strcmp(cfg->http_client, "curl") == 0);
    for (size_t i = 0; i < cfg->n_backends && i < QR_BACKENDS_MAX; i++) {
        const struct qr_backend_spec *spec = &cfg->backends[i];
        struct qr_backend_env env = {
            .base = base, .http = app->client, .config = cfg, .spec = spec};
        const struct qr_backend_vtable *vt = !strcmp(spec->kind, "llamacpp") ? &qr_backend_llamacpp
                                             : !strcmp(spec->kind, "openai") ? &qr_backend_openai
                                                                             : &qr_backend_ollama;
        if ((err = qr_backend_new(vt, &env, diag, &app->backends[i].b)))
            goto fail;
        app->n_backends = i + 1;
        if (vt == &qr_backend_llamacpp)
            app->managed = app->backends[i].b;
    }
    app->backend = app->n_backends ? app->backends[0].b : NULL;
    if ((err = qr_catalog_load(cfg, NULL, &app->catalog))) {
        qr_diag_set(diag, err, "cannot load the model catalog");
        goto fail;
    }
    /* the runtime runs llama-server itself: resolver over the catalog, crashes into the store */
    if (app->managed && (err = qr_api_llamacpp_init(app, diag)))
        goto fail;
    qr_api_descriptor_init(app);
    qr_api_guard_refresh(app);
    if ((err = qr_http_server_new(base, &opts, diag, &app->http)))
        goto fail;
    app->sig_term = evsignal_new(base, SIGTERM, on_signal, app);
    app->sig_int = evsignal_new(base, SIGINT, on_signal, app);
    app->sig_hup = evsignal_new(base, SIGHUP, on_signal, app);
    app->shutdown_tick = evtimer_new(base, shutdown_tick, app);
    if (!app->sig_term || !app->sig_int || !app->sig_hup || !app->shutdown_tick) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot create signal events");
        goto fail;
    }
    evsignal_add(app->sig_term, NULL);
    evsignal_add(app->sig_int, NULL);
    evsignal_add(app->sig_hup, NULL);
    QR_LOG(QR_LOG_INFO, "quantum-runtime listening", QR_LF_S("version", QR_VERSION),
           QR_LF_S("listen", cfg->listen), QR_LF_N("port", qr_http_server_port(app->http)),
           QR_LF_S("backend", app->backend->vt->kind), QR_LF_N("backends", app->n_backends),
           QR_LF_B("model_mutation", cfg->allow_model_mutation),
           QR_LF_B("auth", cfg->auth_token[0] != '\0'));
    for (size_t i = 0; i < app->n_backends; i++)
        qr_backend_probe(app->backends[i].b, 3000, startup_probe_done, NULL);
    if (app->n_backends > 1) {
        app->health_tick = evtimer_new(base, health_tick, app);
        if (!app->health_tick) {
            err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot create the health timer");
            goto fail;
        }
        struct timeval tv = {HEALTH_TICK_MS / 1000, (HEALTH_TICK_MS % 1000) * 1000};
        evtimer_add(app->health_tick, &tv);
    }
    qr_api_refresh_backend_models(app);
    return QR_OK;
fail:
    qr_app_cleanup(app);
    return err;
}

void qr_app_cleanup(struct qr_app *app)
{
    if (app->sig_term)
        event_free(app->sig_term);
    if (app->sig_int)
        event_free(app->sig_int);
    if (app->sig_hup)
        event_free(app->sig_hup);
    if (app->shutdown_tick)
        event_free(app->shutdown_tick);
    if (app->health_tick)
        event_free(app->health_tick);
    app->health_tick = NULL;
    /* The server first: in-flight requests get their close callbacks and cancel their calls. */
    if (app->http)
        qr_http_server_free(app->http);
    for (size_t i = 0; i < app->n_backends; i++)
        qr_backend_free(app->backends[i].b);
    qr_api_llamacpp_cleanup(app); /* after the backend: its last crashes are recorded */
    if (app->client)
        qr_http_client_free(app->client);
    qr_catalog_free(app->catalog);
    for (size_t i = 0; i < app->n_backends; i++) {
        free(app->backends[i].desc);
        app->backends[i] = (struct qr_app_backend){0};
    }
    app->n_backends = 0;
    app->managed = NULL;
    app->catalog = NULL;
    app->sig_term = app->sig_int = app->sig_hup = app->shutdown_tick = NULL;
    app->http = NULL;
    app->backend = NULL;
    app->client = NULL;
}
