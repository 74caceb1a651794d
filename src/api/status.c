/* The status page and what it shows that no other route keeps: the last routing decisions
 * (route, model, chosen backend, reason or refusal) and per-second throughput (requests, tokens
 * out) of canonical-contract inference, recorded by small hooks in infer.c into fixed ring
 * buffers and answered as GET /v1/status. The page itself (data/status/index.html, compiled in
 * by cmake/embed_status.cmake) is served at /status and at / to requests preferring HTML; every
 * other request to / gets Ollama's probe answer, which Ollama clients check for. The page's data
 * comes from authenticated routes only (docs/API.md "GET /status"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/status.h"
#include "build_info.h"
#include "core/http_server.h"
#include "core/timefmt.h"

/* gen/status_page.c (cmake/embed_status.cmake) */
extern const char qr_status_page_html[];
extern const size_t qr_status_page_html_len;

struct sample {
    int64_t sec; /* the epoch second this slot holds, 0 when never used */
    uint64_t requests;
    uint64_t tokens_out;
};

static struct qr_status_decision decisions[QR_STATUS_DECISIONS];
static size_t n_decisions, next_decision;
static struct sample samples[QR_STATUS_SECONDS];

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void copy_cut(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* The slot of the current second, cleared when it last held an older second. */
static struct sample *current_sample(void)
{
    int64_t sec = wall_ms() / 1000;
    struct sample *s = &samples[(size_t) (sec % QR_STATUS_SECONDS)];
    if (s->sec != sec)
        *s = (struct sample){.sec = sec};
    return s;
}

void qr_status_note_decision(const char *route, const char *model, const char *backend,
                             bool refused, int status, const char *reason)
{
    struct qr_status_decision *d = &decisions[next_decision];
    d->time_ms = wall_ms();
    copy_cut(d->route, sizeof(d->route), route);
    copy_cut(d->model, sizeof(d->model), model);
    copy_cut(d->backend, sizeof(d->backend), backend);
    d->refused = refused;
    d->status = status;
    copy_cut(d->reason, sizeof(d->reason), reason);
    next_decision = (next_decision + 1) % QR_STATUS_DECISIONS;
    if (n_decisions < QR_STATUS_DECISIONS)
        n_decisions++;
    current_sample()->requests++;
}

void qr_status_note_tokens(int64_t n)
{
    if (n > 0)
        current_sample()->tokens_out += (uint64_t) n;
}

void qr_status_reset(void)
{
    memset(decisions, 0, sizeof(decisions));
    memset(samples, 0, sizeof(samples));
    n_decisions = next_decision = 0;
}

bool qr_status_decision_at(size_t i, struct qr_status_decision *out)
{
    if (i >= n_decisions)
        return false;
    size_t k = (next_decision + QR_STATUS_DECISIONS - 1 - i) % QR_STATUS_DECISIONS;
    *out = decisions[k];
    return true;
}

static void add_time(yyjson_mut_doc *doc, yyjson_mut_val *o, int64_t ms)
{
    char buf[48];
    qr_rfc3339_ms(ms, buf, sizeof(buf));
    yyjson_mut_obj_add_int(doc, o, "time_ms", ms);
    yyjson_mut_obj_add_strcpy(doc, o, "time", buf);
}

static void add_decisions(yyjson_mut_doc *doc, yyjson_mut_val *root)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, root, "decisions");
    struct qr_status_decision d;
    for (size_t i = 0; qr_status_decision_at(i, &d); i++) {
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        add_time(doc, o, d.time_ms);
        yyjson_mut_obj_add_strcpy(doc, o, "route", d.route);
        yyjson_mut_obj_add_strcpy(doc, o, "model", d.model);
        if (d.backend[0])
            yyjson_mut_obj_add_strcpy(doc, o, "backend", d.backend);
        else
            yyjson_mut_obj_add_null(doc, o, "backend");
        yyjson_mut_obj_add_str(doc, o, "outcome", d.refused ? "refused" : "routed");
        if (d.refused)
            yyjson_mut_obj_add_int(doc, o, "status", d.status);
        else
            yyjson_mut_obj_add_null(doc, o, "status");
        yyjson_mut_obj_add_strcpy(doc, o, "reason", d.reason);
    }
}

/* Oldest first, one per second of the window ending with the current second, zeros included. */
static void add_throughput(yyjson_mut_doc *doc, yyjson_mut_val *root)
{
    yyjson_mut_val *t = yyjson_mut_obj_add_obj(doc, root, "throughput");
    yyjson_mut_obj_add_int(doc, t, "interval_s", 1);
    yyjson_mut_obj_add_int(doc, t, "window_s", QR_STATUS_SECONDS);
    int64_t now = wall_ms() / 1000;
    yyjson_mut_obj_add_int(doc, t, "end_s", now);
    yyjson_mut_val *req = yyjson_mut_obj_add_arr(doc, t, "requests");
    yyjson_mut_val *tok = yyjson_mut_obj_add_arr(doc, t, "tokens_out");
    uint64_t total_req = 0, total_tok = 0;
    for (int64_t sec = now - QR_STATUS_SECONDS + 1; sec <= now; sec++) {
        const struct sample *s = &samples[(size_t) (sec % QR_STATUS_SECONDS)];
        bool live = s->sec == sec;
        yyjson_mut_arr_add_uint(doc, req, live ? s->requests : 0);
        yyjson_mut_arr_add_uint(doc, tok, live ? s->tokens_out : 0);
        total_req += live ? s->requests : 0;
        total_tok += live ? s->tokens_out : 0;
    }
    yyjson_mut_obj_add_uint(doc, t, "total_requests", total_req);
    yyjson_mut_obj_add_uint(doc, t, "total_tokens_out", total_tok);
}

void qr_api_status(struct qr_app *app, struct qr_http_req *req)
{
    (void) app;
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    if (!root) {
        yyjson_mut_doc_free(doc);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(doc, root, "version", QR_VERSION);
    add_time(doc, root, wall_ms());
    yyjson_mut_obj_add_int(doc, root, "decisions_max", QR_STATUS_DECISIONS);
    add_decisions(doc, root);
    add_throughput(doc, root);
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* ---- the page ---- */

/* One media range of an Accept header: its type and q (1 when absent, 0 when malformed). */
static void media_range(const char *p, size_t n, char *type, size_t cap, double *q)
{
    size_t i = 0;
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    size_t start = i;
    while (i < n && p[i] != ';' && p[i] != ' ' && p[i] != '\t')
        i++;
    size_t tl = i - start < cap - 1 ? i - start : cap - 1;
    memcpy(type, p + start, tl);
    type[tl] = '\0';
    *q = 1.0;
    for (; i < n; i++) {
        if (p[i] != ';')
            continue;
        size_t j = i + 1;
        while (j < n && (p[j] == ' ' || p[j] == '\t'))
            j++;
        if (j + 1 < n && (p[j] == 'q' || p[j] == 'Q') && p[j + 1] == '=') {
            char num[16];
            size_t k = 0;
            for (j += 2; j < n && k < sizeof(num) - 1 && p[j] != ';' && p[j] != ' '; j++)
                num[k++] = p[j];
            num[k] = '\0';
            char *end;
            double v = strtod(num, &end);
            *q = (end != num && v >= 0 && v <= 1) ? v : 0;
        }
    }
}

bool qr_status_accept_prefers_html(const char *accept)
{
    if (!accept)
        return false;
    double html = 0, other = 0;
    const char *p = accept;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t) (comma - p) : strlen(p);
        char type[64];
        double q;
        media_range(p, n, type, sizeof(type), &q);
        if (!strcasecmp(type, "text/html"))
            html = q > html ? q : html;
        else if (!strcasecmp(type, "text/plain") || !strcmp(type, "*/*") ||
                 !strcasecmp(type, "text/*"))
            other = q > other ? q : other;
        p += n + (comma ? 1 : 0);
    }
    return html > 0 && html >= other;
}

void qr_api_status_page(struct qr_app *app, struct qr_http_req *req)
{
    (void) app;
    qr_http_resp_header(req, "X-Quantum-Runtime-Version", QR_VERSION);
    qr_http_resp_header(req, "Vary", "Accept");
    bool page = !strcmp(qr_http_req_path(req), "/status") ||
                qr_status_accept_prefers_html(qr_http_req_header(req, "Accept"));
    if (!page) {
        static const char text[] = "Ollama is running";
        qr_http_resp_send(req, 200, "text/plain; charset=utf-8", text, sizeof(text) - 1);
        return;
    }
    qr_http_resp_header(req, "Cache-Control", "no-cache");
    qr_http_resp_header(req, "X-Content-Type-Options", "nosniff");
    qr_http_resp_header(req, "X-Frame-Options", "DENY");
    qr_http_resp_header(req, "Referrer-Policy", "no-referrer");
    qr_http_resp_header(req, "Content-Security-Policy",
                        "default-src 'none'; script-src 'unsafe-inline'; style-src "
                        "'unsafe-inline'; connect-src 'self'; img-src 'self' data:; "
                        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    qr_http_resp_send(req, 200, "text/html; charset=utf-8", qr_status_page_html,
                      qr_status_page_html_len);
}
