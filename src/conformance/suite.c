/* The conformance runner: it asks a running daemon what it claims about one model, runs the case
 * table (cases.c) against the daemon's OpenAI API with blocking libcurl easy calls, skips the cases
 * whose capability keys are not claimed, and formats the report as JSON and Markdown. Claims come
 * from GET /v1/models/{M} (the manifest's capability booleans and any canonical keys), else POST
 * /api/show (its capability list), plus every key the serving backend's descriptor declares
 * "supported" (GET /v1/backends): "conditional" or "unknown" never counts as claimed. */
#include "conformance/suite.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "capability/capability.h"
#include "conformance/cases.h"

/* ---- HTTP ---- */

struct sink {
    char *p;
    size_t len, cap;
    bool over;
};

static size_t on_body(char *ptr, size_t size, size_t n, void *ud)
{
    struct sink *s = ud;
    size_t add = size * n;
    if (s->over || s->len + add + 1 > QR_CONF_MAX_BODY) {
        s->over = true;
        return 0;
    }
    if (s->len + add + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + add + 1)
            cap *= 2;
        char *q = realloc(s->p, cap);
        if (!q) {
            s->over = true;
            return 0;
        }
        s->p = q;
        s->cap = cap;
    }
    memcpy(s->p + s->len, ptr, add);
    s->len += add;
    s->p[s->len] = '\0';
    return add;
}

static size_t on_header(char *ptr, size_t size, size_t n, void *ud)
{
    struct qr_conf_resp *r = ud;
    size_t len = size * n;
    static const char name[] = "x-quantum-model:";
    if (len > sizeof name - 1 && !strncasecmp(ptr, name, sizeof name - 1)) {
        const char *v = ptr + sizeof name - 1;
        const char *end = ptr + len;
        while (v < end && (*v == ' ' || *v == '\t'))
            v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
            end--;
        free(r->model_header);
        r->model_header = strndup(v, (size_t) (end - v));
    }
    return len;
}

void qr_conf_http(const struct qr_conf_ctx *c, const char *method, const char *path,
                  const char *body, struct qr_conf_resp *out)
{
    memset(out, 0, sizeof *out);
    struct sink s = {0};
    char url[1024];
    size_t ul = strlen(c->url);
    while (ul && c->url[ul - 1] == '/')
        ul--;
    snprintf(url, sizeof url, "%.*s%s", (int) ul, c->url, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !hdr) {
        snprintf(out->error, sizeof out->error, "out of memory");
        goto done;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms > 0 ? c->timeout_ms : 120000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(body));
    }
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        snprintf(out->error, sizeof out->error, "%s %s: %s", method, path,
                 s.over ? "answer too large" : curl_easy_strerror(rc));
        goto done;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
done:
    curl_slist_free_all(hdr);
    if (h)
        curl_easy_cleanup(h);
    out->body = s.p ? s.p : strdup("");
    out->len = s.p ? s.len : 0;
    if (!out->body)
        abort();
}

void qr_conf_resp_cleanup(struct qr_conf_resp *r)
{
    free(r->body);
    free(r->model_header);
    memset(r, 0, sizeof *r);
}

/* ---- claims ---- */

static void claim(struct qr_conf_ctx *c, const char *name)
{
    enum qr_cap_key k = qr_cap_key_parse_any((struct qr_slice){name, strlen(name)});
    if (qr_cap_valid(k))
        c->claimed |= 1ull << k;
}

bool qr_conf_claims(const struct qr_conf_ctx *c, const char *name)
{
    enum qr_cap_key k = qr_cap_key_parse((struct qr_slice){name, strlen(name)});
    return qr_cap_valid(k) && (c->claimed >> k) & 1u;
}

/* Manifest booleans and Ollama capability words -> canonical keys. */
static const struct {
    const char *word, *key;
} WORDS[] = {
    {"text", "inference.text"},
    {"completion", "inference.text"},
    {"tools", "tools.calling"},
    {"tool_streaming", "tools.streaming"},
    {"thinking", "reasoning.control"},
    {"reasoning_control", "reasoning.control"},
    {"structured_output", "structured_output"},
    {"vision", "multimodal.vision"},
    {"audio", "multimodal.audio"},
    {"embeddings", "embeddings"},
    {"embedding", "embeddings"},
};

static void claim_word(struct qr_conf_ctx *c, const char *w)
{
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++) {
        if (!strcmp(WORDS[i].word, w)) {
            claim(c, WORDS[i].key);
            return;
        }
    }
    claim(c, w); /* a canonical key spelled as such */
}

/* {"tools": true, "tools.calling": "supported", ...} or ["tools", ...] */
static void claim_from(struct qr_conf_ctx *c, yyjson_val *caps)
{
    size_t i, max;
    if (yyjson_is_arr(caps)) {
        yyjson_val *v;
        yyjson_arr_foreach(caps, i, max, v)
        {
            if (yyjson_is_str(v))
                claim_word(c, yyjson_get_str(v));
        }
        return;
    }
    yyjson_val *k, *v;
    yyjson_obj_foreach(caps, i, max, k, v)
    {
        if (yyjson_is_true(v) || yyjson_equals_str(v, "supported"))
            claim_word(c, yyjson_get_str(k));
    }
}

static yyjson_doc *get_json(const struct qr_conf_ctx *c, const char *method, const char *path,
                            const char *body, long *status)
{
    struct qr_conf_resp r;
    qr_conf_http(c, method, path, body, &r);
    *status = r.status;
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    qr_conf_resp_cleanup(&r);
    return d;
}

yyjson_val *qr_conf_backend_of(const struct qr_conf_ctx *c, yyjson_doc **doc)
{
    long st;
    *doc = get_json(c, "GET", "/v1/backends", NULL, &st);
    yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(*doc), "backends");
    size_t i, max;
    yyjson_val *b;
    yyjson_arr_foreach(arr, i, max, b)
    {
        /* the backend /v1/models named; without a name, the only one */
        bool mine = c->backend[0] ? (yyjson_equals_str(yyjson_obj_get(b, "id"), c->backend) ||
                                     yyjson_equals_str(yyjson_obj_get(b, "kind"), c->backend))
                                  : yyjson_arr_size(arr) == 1;
        if (mine)
            return b;
    }
    return NULL;
}

/* The serving backend's "supported" keys and its engine version. */
static void probe_backend(struct qr_conf_ctx *c)
{
    yyjson_doc *d = NULL;
    yyjson_val *b = qr_conf_backend_of(c, &d);
    if (b) {
        claim_from(c, yyjson_obj_get(b, "capabilities"));
        const char *v = yyjson_get_str(yyjson_obj_get(yyjson_obj_get(b, "engine"), "version"));
        if (v && !c->engine_version)
            c->engine_version = strdup(v);
    }
    yyjson_doc_free(d);
}

static void probe_host(struct qr_conf_ctx *c)
{
    long st;
    yyjson_doc *d = get_json(c, "GET", "/v1/host", NULL, &st);
    yyjson_val *root = yyjson_doc_get_root(d);
    const char *hw = yyjson_get_str(yyjson_ptr_get(root, "/limits/hardware_class"));
    if (!hw)
        hw = yyjson_get_str(yyjson_ptr_get(root, "/host/hardware_class"));
    if (hw && hw[0])
        c->host_class = strdup(hw);
    yyjson_doc_free(d);
}

enum qr_err qr_conf_probe(struct qr_conf_ctx *c, char *err, size_t err_cap)
{
    char path[512], *esc = curl_easy_escape(NULL, c->model, 0);
    if (!esc) {
        snprintf(err, err_cap, "out of memory");
        return QR_ERR_NOMEM;
    }
    snprintf(path, sizeof path, "/v1/models/%s", esc);
    curl_free(esc);
    long st = 0;
    yyjson_doc *d = get_json(c, "GET", path, NULL, &st);
    yyjson_val *root = yyjson_doc_get_root(d);
    if (root) {
        claim_from(c, yyjson_ptr_get(root, "/model/capabilities"));
        claim_from(c, yyjson_obj_get(root, "capabilities"));
        yyjson_val *cl = yyjson_obj_get(root, "context_length");
        if (yyjson_is_int(cl) && yyjson_get_sint(cl) > 0)
            c->context_length = yyjson_get_sint(cl);
        const char *b = yyjson_get_str(yyjson_obj_get(root, "backend"));
        if (b)
            snprintf(c->backend, sizeof c->backend, "%s", b);
        yyjson_doc_free(d);
    } else {
        /* Ollama's view of the same model */
        yyjson_mut_doc *m = yyjson_mut_doc_new(NULL);
        yyjson_mut_val *o = yyjson_mut_obj(m);
        yyjson_mut_doc_set_root(m, o);
        yyjson_mut_obj_add_str(m, o, "model", c->model);
        char *body = yyjson_mut_write(m, 0, NULL);
        yyjson_mut_doc_free(m);
        long st2 = 0;
        d = body ? get_json(c, "POST", "/api/show", body, &st2) : NULL;
        free(body);
        root = yyjson_doc_get_root(d);
        if (!root) {
            snprintf(err, err_cap, "cannot describe model '%s': GET %s answered %ld", c->model,
                     path, st);
            return st == 0 ? QR_ERR_UPSTREAM : QR_ERR_NOT_FOUND;
        }
        claim_from(c, yyjson_obj_get(root, "capabilities"));
        yyjson_doc_free(d);
    }
    probe_backend(c);
    probe_host(c);
    return QR_OK;
}

void qr_conf_ctx_cleanup(struct qr_conf_ctx *c)
{
    free(c->engine_version);
    free(c->host_class);
    free(c->model_header);
    c->engine_version = c->host_class = c->model_header = NULL;
}

/* ---- UTF-8 ---- */

bool qr_conf_utf8_valid(const char *str, size_t len)
{
    const unsigned char *s = (const unsigned char *) str;
    size_t i = 0;
    while (i < len) {
        unsigned char b = s[i];
        size_t n;
        uint32_t cp, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if ((b & 0xE0) == 0xC0) {
            n = 1, cp = b & 0x1F, min = 0x80;
        } else if ((b & 0xF0) == 0xE0) {
            n = 2, cp = b & 0x0F, min = 0x800;
        } else if ((b & 0xF8) == 0xF0) {
            n = 3, cp = b & 0x07, min = 0x10000;
        } else {
            return false;
        }
        if (len - i <= n) /* truncated sequence */
            return false;
        for (size_t j = 1; j <= n; j++) {
            if ((s[i + j] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += n + 1;
    }
    return true;
}

/* ---- runner ---- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

bool qr_conf_id_listed(const char *list, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        if (len == n && !memcmp(p, id, n))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* The progress bar on a terminal: "conformance [####......] i/N case ...", overwritten by the
 * case's outcome line when it ends. */
static void draw_bar(size_t done, size_t n, const char *id)
{
    enum { WIDTH = 30 };
    char bar[WIDTH + 1];
    size_t fill = n ? done * WIDTH / n : 0;
    for (size_t i = 0; i < WIDTH; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[WIDTH] = '\0';
    fprintf(stderr, "\rconformance [%s] %zu/%zu %-22s ...", bar, done + 1, n, id);
    fflush(stderr);
}

void qr_conf_run(struct qr_conf_ctx *c, struct qr_conf_result *results, bool progress)
{
    size_t n = qr_conf_n_cases();
    for (size_t i = 0; i < n; i++) {
        const struct qr_conf_case *k = qr_conf_case_get(i);
        struct qr_conf_result *r = &results[i];
        memset(r, 0, sizeof *r);
        r->id = k->id;
        r->needs = k->needs;
        r->verifies = k->verifies;
        double t0 = now_ms();
        const char *missing = NULL;
        for (const char *const *need = k->needs; *need && !missing; need++)
            missing = qr_conf_claims(c, *need) ? NULL : *need;
        if (progress) /* the bar while case i/N runs, then its outcome on that line */
            draw_bar(i, n, k->id);
        if (qr_conf_id_listed(c->skip, k->id)) {
            r->status = QR_CONF_SKIP;
            snprintf(r->reason, sizeof r->reason, "not selected (--skip)");
        } else if (missing) {
            r->status = QR_CONF_SKIP;
            snprintf(r->reason, sizeof r->reason, "model '%s' does not claim '%s'", c->model,
                     missing);
        } else if (k->unless && qr_conf_claims(c, k->unless)) {
            r->status = QR_CONF_SKIP;
            snprintf(r->reason, sizeof r->reason, "model '%s' claims '%s'", c->model, k->unless);
        } else {
            r->status = k->run(c, r->reason, sizeof r->reason);
        }
        r->ms = now_ms() - t0;
        if (progress)
            fprintf(stderr, "\r\033[Kconformance: [%zu/%zu] %-22s %s (%.0f ms)%s%s\n", i + 1, n,
                    k->id,
                    r->status == QR_CONF_PASS   ? "pass"
                    : r->status == QR_CONF_FAIL ? "FAIL"
                                                : "skip",
                    r->ms, r->reason[0] ? ": " : "", r->reason);
    }
}

/* ---- report ---- */

static const char *status_name(enum qr_conf_status s)
{
    return s == QR_CONF_PASS ? "pass" : s == QR_CONF_FAIL ? "fail" : "skip";
}

char *qr_conf_report_json(const struct qr_conf_ctx *c, const struct qr_conf_result *results,
                          size_t n, const char *started_at, double duration_ms)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = d ? yyjson_mut_obj(d) : NULL;
    if (!root) {
        yyjson_mut_doc_free(d);
        return NULL;
    }
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "schema_version", QR_CONF_REPORT_SCHEMA);
    yyjson_mut_obj_add_strcpy(d, root, "model", c->model);
    yyjson_mut_obj_add_strcpy(d, root, "url", c->url);
    if (c->backend[0])
        yyjson_mut_obj_add_strcpy(d, root, "backend", c->backend);
    else
        yyjson_mut_obj_add_null(d, root, "backend");
    if (c->engine_version)
        yyjson_mut_obj_add_strcpy(d, root, "engine_version", c->engine_version);
    else
        yyjson_mut_obj_add_null(d, root, "engine_version");
    if (c->host_class)
        yyjson_mut_obj_add_strcpy(d, root, "host_class", c->host_class);
    else
        yyjson_mut_obj_add_null(d, root, "host_class");
    yyjson_mut_obj_add_strcpy(d, root, "started_at", started_at);
    yyjson_mut_obj_add_uint(d, root, "duration_ms", (uint64_t) (duration_ms + 0.5));
    unsigned cnt[3] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[results[i].status]++;
    yyjson_mut_val *sum = yyjson_mut_obj_add_obj(d, root, "summary");
    yyjson_mut_obj_add_uint(d, sum, "passed", cnt[QR_CONF_PASS]);
    yyjson_mut_obj_add_uint(d, sum, "failed", cnt[QR_CONF_FAIL]);
    yyjson_mut_obj_add_uint(d, sum, "skipped", cnt[QR_CONF_SKIP]);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(d, root, "cases");
    for (size_t i = 0; i < n; i++) {
        const struct qr_conf_result *r = &results[i];
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(d, arr);
        yyjson_mut_obj_add_str(d, o, "id", r->id);
        yyjson_mut_val *needs = yyjson_mut_obj_add_arr(d, o, "needs");
        for (const char *const *k = r->needs; *k; k++)
            yyjson_mut_arr_add_str(d, needs, *k);
        /* only what the model claims is verified or refuted by this run */
        yyjson_mut_val *ver = yyjson_mut_obj_add_arr(d, o, "verifies");
        for (const char *const *k = r->verifies; k && *k; k++)
            if (r->status != QR_CONF_SKIP && qr_conf_claims(c, *k))
                yyjson_mut_arr_add_str(d, ver, *k);
        yyjson_mut_obj_add_str(d, o, "status", status_name(r->status));
        yyjson_mut_obj_add_strcpy(d, o, "reason", r->reason);
        yyjson_mut_obj_add_real(d, o, "ms", (double) (long) (r->ms * 10.0 + 0.5) / 10.0);
    }
    char *out = yyjson_mut_write(d, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL);
    yyjson_mut_doc_free(d);
    return out;
}

/* Markdown table cells: '|' and newlines would break the row. */
static void md_cell(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", f);
        else
            fputc(*s == '\n' ? ' ' : *s, f);
    }
}

char *qr_conf_report_markdown(const struct qr_conf_ctx *c, const struct qr_conf_result *results,
                              size_t n, const char *started_at, double duration_ms)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    unsigned cnt[3] = {0};
    for (size_t i = 0; i < n; i++)
        cnt[results[i].status]++;
    fprintf(f, "# Conformance: `%s`\n\n", c->model);
    fprintf(f, "- url: %s\n- engine version: %s\n- host class: %s\n- started: %s\n", c->url,
            c->engine_version ? c->engine_version : "unknown",
            c->host_class ? c->host_class : "unknown", started_at);
    fprintf(f, "- duration: %.0f ms\n- passed %u, failed %u, skipped %u\n\n", duration_ms,
            cnt[QR_CONF_PASS], cnt[QR_CONF_FAIL], cnt[QR_CONF_SKIP]);
    fputs("| case | needs | status | ms | reason |\n|---|---|---|---:|---|\n", f);
    for (size_t i = 0; i < n; i++) {
        const struct qr_conf_result *r = &results[i];
        fprintf(f, "| %s | ", r->id);
        for (const char *const *k = r->needs; *k; k++)
            fprintf(f, "%s%s", k == r->needs ? "" : ", ", *k);
        fprintf(f, " | %s | %.0f | ", status_name(r->status), r->ms);
        md_cell(f, r->reason);
        fputs(" |\n", f);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
