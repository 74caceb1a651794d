/* Request dispatch: every request passes the same gate in the same order -- Host check (DNS
 * rebinding guard on loopback binds), public health routes, bearer auth, then the route table --
 * so no route can forget a check and unauthenticated callers learn nothing about which routes
 * exist. Also the JSON answer helpers shared by all routes. */
#include <string.h>
#include <strings.h>

#include <arpa/inet.h>
#include <yyjson.h>

#include "api/api.h"
#include "api/metrics.h"
#include "api/status.h"
#include "build_info.h"
#include "core/http_server.h"

#define R_PUBLIC 1u /* no auth (health probes) */
#define R_OPENAI 2u /* OpenAI route: errors in the OpenAI shape */
#define R_PREFIX 4u /* path is a prefix ("/v1/models/" + id) */

struct route {
    const char *path;
    const char *method; /* GET routes also answer HEAD */
    unsigned flags;
    void (*fn)(struct qr_app *app, struct qr_http_req *req);
};

static const struct route routes[] = {
    {"/healthz", "GET", R_PUBLIC, qr_api_healthz},
    {"/readyz", "GET", R_PUBLIC, qr_api_readyz},
    /* the page shell and Ollama's "Ollama is running" probe answer carry no data: the page's
       data comes from the routes below, with the token (api/status.c) */
    {"/", "GET", R_PUBLIC, qr_api_status_page},
    {"/status", "GET", R_PUBLIC, qr_api_status_page},
    {"/v1/status", "GET", 0, qr_api_status},
    {"/v1/runtime", "GET", 0, qr_api_runtime},
    {"/v1/capabilities", "GET", 0, qr_api_capabilities},
    {"/v1/chat/completions", "POST", R_OPENAI, qr_api_openai_chat},
    {"/v1/completions", "POST", R_OPENAI, qr_api_openai_completions},
    {"/v1/embeddings", "POST", R_OPENAI, qr_api_openai_embeddings},
    {"/v1/rerank", "POST", R_OPENAI, qr_api_openai_rerank},
    {"/rerank", "POST", R_OPENAI, qr_api_openai_rerank},
    {"/v1/models", "GET", R_OPENAI, qr_api_openai_models},
    {"/v1/models/", "GET", R_OPENAI | R_PREFIX, qr_api_openai_models},
    {"/v1/backends", "GET", 0, qr_api_backends},
    {"/v1/loaded", "GET", 0, qr_api_loaded},
    {"/v1/route", "POST", 0, qr_api_route},
    {"/v1/model-policies", "GET", 0, qr_api_model_policies},
    {"/v1/upstreams", "GET", 0, qr_api_upstreams},
    {"/v1/deployment-profiles", "GET", 0, qr_api_deployment_profiles},
    {"/v1/admission", "POST", 0, qr_api_admission},
    {"/v1/host", "GET", 0, qr_api_host},
    {"/v1/host/calibrate", "POST", 0, qr_api_host_calibrate},
    {"/v1/placement", "POST", 0, qr_api_placement},
    {"/v1/benchmark-plan", "POST", 0, qr_api_benchmark_plan},
    {"/v1/tokenize", "POST", 0, qr_api_tokenize},
    {"/v1/detokenize", "POST", 0, qr_api_detokenize},
    {"/metrics", "GET", 0, qr_api_metrics},
};

size_t qr_api_route_count(void)
{
    return QR_ARRAY_LEN(routes);
}

bool qr_api_route_at(size_t i, struct qr_api_route_info *out)
{
    if (i >= QR_ARRAY_LEN(routes))
        return false;
    *out = (struct qr_api_route_info){.path = routes[i].path,
                                      .method = routes[i].method,
                                      .open = (routes[i].flags & R_PUBLIC) != 0,
                                      .openai = (routes[i].flags & R_OPENAI) != 0,
                                      .prefix = (routes[i].flags & R_PREFIX) != 0};
    return true;
}

static bool route_matches(const struct route *r, const char *path)
{
    if (r->flags & R_PREFIX)
        return strncmp(path, r->path, strlen(r->path)) == 0;
    return strcmp(path, r->path) == 0;
}

static const struct route *find_route(const char *path)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(routes); i++) {
        if (route_matches(&routes[i], path))
            return &routes[i];
    }
    return NULL;
}

/* Errors on OpenAI paths use the OpenAI shape, so OpenAI clients can read them. */
static bool openai_style(const char *path)
{
    const struct route *r = find_route(path);
    return r && (r->flags & R_OPENAI);
}

static void common_headers(struct qr_http_req *req)
{
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
}

void qr_api_send_json(struct qr_http_req *req, int status, yyjson_mut_doc *doc)
{
    size_t len = 0;
    char *text = yyjson_mut_write(doc, 0, &len);
    if (!text) {
        qr_api_send_err(req, QR_ERR_NOMEM, "cannot encode the response");
        return;
    }
    char *body = realloc(text, len + 2);
    if (!body) {
        free(text);
        qr_api_send_err(req, QR_ERR_NOMEM, "cannot encode the response");
        return;
    }
    body[len++] = '\n';
    common_headers(req);
    qr_http_resp_header(req, "Cache-Control", "no-store");
    qr_http_resp_header(req, "X-Content-Type-Options", "nosniff");
    qr_http_resp_send(req, status, "application/json; charset=utf-8", body, len);
    free(body);
}

void qr_api_send_error(struct qr_http_req *req, int status, const char *code, const char *message)
{
    common_headers(req);
    qr_http_send_error(req, status, code, message);
}

void qr_api_send_err(struct qr_http_req *req, enum qr_err err, const char *message)
{
    qr_api_send_error(req, qr_err_http_status(err), qr_err_str(err), message);
}

bool qr_api_auth_ok(const char *authorization, const char *token)
{
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return false;
    const char *v = authorization + 7;
    while (*v == ' ' || *v == '\t')
        v++;
    size_t vlen = strlen(v);
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
        vlen--;
    /* Constant time in the token's length: every byte is compared whatever differs first. */
    size_t tlen = strlen(token);
    unsigned char diff = (unsigned char) (vlen != tlen);
    for (size_t i = 0; i < tlen; i++)
        diff |= (unsigned char) (token[i] ^ (i < vlen ? v[i] : (char) ~token[i]));
    return tlen > 0 && diff == 0;
}

bool qr_api_host_is_loopback_name(const char *host)
{
    char name[256];
    const char *end;
    if (host[0] == '[') {
        end = strchr(host, ']');
        if (!end || (end[1] && end[1] != ':'))
            return false;
        host++;
    } else {
        end = strchr(host, ':');
        if (!end)
            end = host + strlen(host);
    }
    size_t n = (size_t) (end - host);
    if (n == 0 || n >= sizeof(name))
        return false;
    memcpy(name, host, n);
    name[n] = '\0';
    if (!strcasecmp(name, "localhost") || !strcasecmp(name, "localhost."))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, name, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, name, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

static bool method_matches(const char *want, const char *got)
{
    return !strcmp(want, got) || (!strcmp(want, "GET") && !strcmp(got, "HEAD"));
}

static void send_405(struct qr_http_req *req, const struct route *r)
{
    qr_http_resp_header(req, "Allow", !strcmp(r->method, "GET") ? "GET, HEAD" : r->method);
    if (r->flags & R_OPENAI)
        qr_api_send_openai_error(req, 405, "method_not_allowed",
                                 "method not allowed on this route");
    else
        qr_api_send_err(req, QR_ERR_METHOD, "method not allowed on this route");
}

static void serve_route(struct qr_app *app, struct qr_http_req *req, const struct route *r)
{
    if (!method_matches(r->method, qr_http_req_method(req))) {
        send_405(req, r);
        return;
    }
    r->fn(app, req);
}

void qr_api_dispatch(struct qr_http_req *req, void *arg)
{
    struct qr_app *app = arg;
    const char *path = qr_http_req_path(req);

    if (app->cfg->listen_loopback) {
        const char *host = qr_http_req_header(req, "Host");
        if (host ? !qr_api_host_is_loopback_name(host) : qr_http_req_minor_version(req) >= 1) {
            qr_api_send_error(req, 403, "forbidden_host",
                              "the Host header must name a loopback address while the runtime "
                              "is bound to loopback");
            return;
        }
    }
    for (size_t i = 0; i < QR_ARRAY_LEN(routes); i++) {
        if ((routes[i].flags & R_PUBLIC) && !strcmp(path, routes[i].path)) {
            serve_route(app, req, &routes[i]);
            return;
        }
    }
    if (app->cfg->auth_token[0] &&
        !qr_api_auth_ok(qr_http_req_header(req, "Authorization"), app->cfg->auth_token)) {
        qr_http_resp_header(req, "WWW-Authenticate", "Bearer realm=\"Quantum Runtime\"");
        if (openai_style(path))
            qr_api_send_openai_error(req, 401, "invalid_api_key",
                                     "a valid bearer token is required");
        else
            qr_api_send_err(req, QR_ERR_UNAUTHORIZED, "a valid bearer token is required");
        return;
    }
    const struct route *r = find_route(path);
    if (r) {
        serve_route(app, req, r);
        return;
    }
    if (!strncmp(path, "/api/", 5) || !strcmp(path, "/api")) {
        qr_api_ollama(app, req);
        return;
    }
    qr_api_send_err(req, QR_ERR_NOT_FOUND, "no such route");
}
