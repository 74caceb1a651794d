/* Ollama model descriptions: the /api/show parser (hostile input: the body is capped before it
 * is read, every kept string is length-checked and charset-checked, every number range-checked,
 * arrays are walked only up to a fixed count) and the adapter's per-model cache with its waiters.
 * One /api/show at a time per model; requests arriving meanwhile queue on the entry. */
#include "backend/ollama/show.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "backend/codec.h"
#include "backend/job.h"
#include "core/log.h"

#define MAX_CAPS_SEEN   64u          /* capabilities[] entries looked at */
#define MAX_LEVELS_SEEN 16u          /* thinking.values entries looked at */
#define MAX_CONTEXT     (1ull << 32) /* larger context lengths are not believed */
#define MAX_EXPERTS     (1ull << 20)

/* ======================================================================================== */
/* Parser                                                                                    */
/* ======================================================================================== */

static const struct {
    const char *name;
    uint32_t bit;
} cap_names[] = {
    {"completion", QR_OLLAMA_CAP_COMPLETION}, {"tools", QR_OLLAMA_CAP_TOOLS},
    {"insert", QR_OLLAMA_CAP_INSERT},         {"vision", QR_OLLAMA_CAP_VISION},
    {"embedding", QR_OLLAMA_CAP_EMBEDDING},   {"thinking", QR_OLLAMA_CAP_THINKING},
};

static bool str_is(yyjson_val *v, const char *s)
{
    size_t n = strlen(s);
    return yyjson_is_str(v) && yyjson_get_len(v) == n && memcmp(yyjson_get_str(v), s, n) == 0;
}

static void parse_caps(yyjson_val *arr, struct qr_ollama_show *out)
{
    if (!yyjson_is_arr(arr))
        return;
    out->has_caps = true;
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        if (i >= MAX_CAPS_SEEN)
            break;
        for (size_t k = 0; k < QR_ARRAY_LEN(cap_names); k++) {
            if (str_is(v, cap_names[k].name))
                out->caps |= cap_names[k].bit;
        }
    }
}

/* thinking: {"values":[false,true] | ["low","medium","high"], "default": ...} */
static void parse_thinking(yyjson_val *t, struct qr_ollama_show *out)
{
    yyjson_val *vals = yyjson_obj_get(t, "values");
    if (!yyjson_is_obj(t) || !yyjson_is_arr(vals))
        return;
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(vals, i, max, v)
    {
        if (i >= MAX_LEVELS_SEEN)
            break;
        if (str_is(v, "low"))
            out->think_levels |= QR_THINK_LEVEL_LOW;
        else if (str_is(v, "medium"))
            out->think_levels |= QR_THINK_LEVEL_MEDIUM;
        else if (str_is(v, "high"))
            out->think_levels |= QR_THINK_LEVEL_HIGH;
    }
}

/* An architecture name usable as a key prefix: [A-Za-z0-9_.-], 1..63 bytes. */
static bool arch_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof(((struct qr_ollama_show *) 0)->arch))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* model_info["<arch>.<key>"] as a positive integer <= cap; 0 otherwise. */
static uint64_t info_u64(yyjson_val *info, const char *arch, const char *key, uint64_t cap)
{
    char name[128];
    snprintf(name, sizeof(name), "%s.%s", arch, key);
    yyjson_val *v = yyjson_obj_get(info, name);
    uint64_t x = 0;
    if (yyjson_is_uint(v))
        x = yyjson_get_uint(v);
    else if (yyjson_is_sint(v) && yyjson_get_sint(v) > 0)
        x = (uint64_t) yyjson_get_sint(v);
    return x <= cap ? x : 0;
}

static void parse_info(yyjson_val *info, struct qr_ollama_show *out)
{
    if (!yyjson_is_obj(info))
        return;
    yyjson_val *a = yyjson_obj_get(info, "general.architecture");
    if (!yyjson_is_str(a) || !arch_ok(yyjson_get_str(a), yyjson_get_len(a)))
        return;
    memcpy(out->arch, yyjson_get_str(a), yyjson_get_len(a));
    out->arch[yyjson_get_len(a)] = '\0';
    out->context_length = info_u64(info, out->arch, "context_length", MAX_CONTEXT);
    out->expert_count = info_u64(info, out->arch, "expert_count", MAX_EXPERTS);
    out->expert_used_count = info_u64(info, out->arch, "expert_used_count", MAX_EXPERTS);
    if (out->expert_used_count > out->expert_count)
        out->expert_used_count = out->expert_count ? out->expert_count : 0;
}

enum qr_err qr_ollama_show_parse(const char *body, size_t len, struct qr_ollama_show *out,
                                 struct qr_diag *diag)
{
    memset(out, 0, sizeof(*out));
    if (len > QR_OLLAMA_SHOW_MAX_BODY)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "answer of %zu bytes is larger than allowed",
                           len);
    yyjson_read_err re;
    yyjson_doc *doc = yyjson_read_opts((char *) (body ? body : ""), len, 0, NULL, &re);
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (!yyjson_is_obj(root)) {
        yyjson_doc_free(doc);
        return qr_diag_set(diag, QR_ERR_PARSE, "answer is not a JSON object%s%s", doc ? "" : ": ",
                           doc ? "" : re.msg);
    }
    parse_caps(yyjson_obj_get(root, "capabilities"), out);
    parse_thinking(yyjson_obj_get(root, "thinking"), out);
    parse_info(yyjson_obj_get(root, "model_info"), out);
    yyjson_doc_free(doc);
    return QR_OK;
}

/* ======================================================================================== */
/* Cache                                                                                     */
/* ======================================================================================== */

enum entry_state { E_FETCHING = 0, E_READY = 1, E_FAILED = 2 };

struct qr_ollama_show_wait {
    struct qr_ollama_show_wait *next;
    struct entry *e;
    qr_ollama_show_fn cb;
    void *arg;
};

struct entry {
    struct entry *next;
    struct qr_ollama_shows *c;
    char *model;
    size_t model_len;
    enum entry_state st;
    int64_t at_ms; /* when READY/FAILED was reached */
    struct qr_ollama_show show;
    char why[sizeof(((struct qr_diag *) 0)->msg)];
    struct qr_ollama_show_wait *waiters; /* in arrival order */
    bool answering;                      /* fetched() is calling the waiters */
    char digest[80];                     /* as /api/tags last listed it; "" unknown */
};

struct qr_ollama_shows {
    struct qr_backend *b;
    struct entry *head;
    size_t n;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct qr_ollama_shows *qr_ollama_shows_new(struct qr_backend *b)
{
    struct qr_ollama_shows *c = calloc(1, sizeof(*c));
    if (c)
        c->b = b;
    return c;
}

static void entry_free(struct entry *e)
{
    while (e->waiters) { /* NEVER: waiters are answered or unwaited first */
        struct qr_ollama_show_wait *w = e->waiters;
        e->waiters = w->next;
        free(w);
    }
    free(e->model);
    free(e);
}

static void entry_unlink(struct entry *e)
{
    struct entry **pp = &e->c->head;
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->next;
        e->c->n--;
    }
}

void qr_ollama_shows_free(struct qr_ollama_shows *c)
{
    if (!c)
        return;
    while (c->head) {
        struct entry *e = c->head;
        c->head = e->next;
        entry_free(e);
    }
    free(c);
}

static struct entry *find(struct qr_ollama_shows *c, struct qr_slice model)
{
    for (struct entry *e = c->head; e; e = e->next) {
        if (e->model_len == model.len && memcmp(e->model, model.ptr, model.len) == 0)
            return e;
    }
    return NULL;
}

/* Make room for one more entry: drop the least recently refreshed one nobody waits for. */
static bool make_room(struct qr_ollama_shows *c)
{
    if (c->n < QR_OLLAMA_SHOW_MAX_MODELS)
        return true;
    struct entry *old = NULL;
    for (struct entry *e = c->head; e; e = e->next) {
        if (e->st != E_FETCHING && !e->waiters && !e->answering && (!old || e->at_ms < old->at_ms))
            old = e;
    }
    if (!old)
        return false;
    entry_unlink(old);
    entry_free(old);
    return true;
}

/* The fetch's end: record the outcome and answer every waiter. */
static void fetched(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                    void *arg)
{
    struct entry *e = arg;
    struct qr_diag d = {{0}};
    if (err == QR_OK && status != 200) {
        yyjson_doc *doc = yyjson_read(body.ptr, body.len, 0);
        const char *m = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "error"));
        err = qr_diag_set(&d, QR_ERR_UPSTREAM, "POST /api/show for '%.200s' answered %d%s%.200s",
                          e->model, status, m ? ": " : "", m ? m : "");
        yyjson_doc_free(doc);
    } else if (err == QR_OK) {
        struct qr_diag pd = {{0}};
        if ((err = qr_ollama_show_parse(body.ptr, body.len, &e->show, &pd)) != QR_OK)
            qr_diag_set(&d, err, "POST /api/show for '%.200s': %s", e->model, pd.msg);
    } else {
        qr_diag_set(&d, err, "POST /api/show for '%.200s' failed: %s", e->model,
                    diag && diag->msg[0] ? diag->msg : qr_err_str(err));
    }
    e->st = err ? E_FAILED : E_READY;
    e->at_ms = mono_ms();
    snprintf(e->why, sizeof(e->why), "%s", d.msg);
    if (err && err != QR_ERR_CANCELLED)
        QR_LOG(QR_LOG_WARN, "ollama model description failed", QR_LF_S("model", e->model),
               QR_LF_S("error", d.msg));
    else if (!err)
        QR_LOG(QR_LOG_DEBUG, "ollama model described", QR_LF_S("model", e->model),
               QR_LF_S("architecture", e->show.arch),
               QR_LF_N("context_length", e->show.context_length),
               QR_LF_B("thinking", (e->show.caps & QR_OLLAMA_CAP_THINKING) != 0));
    /* a callback may start work or unwait another waiter: answer them one at a time from the
     * list, with the entry kept out of reach of forget and eviction meanwhile */
    e->answering = true;
    while (e->waiters) {
        struct qr_ollama_show_wait *w = e->waiters;
        e->waiters = w->next;
        w->cb(w->arg, err, err ? NULL : &e->show, &d);
        free(w);
    }
    e->answering = false;
    if (err == QR_ERR_CANCELLED) { /* shutting down: never cache that */
        entry_unlink(e);
        entry_free(e);
    }
}

static enum qr_err start_fetch(struct entry *e, const char *base_url, struct qr_diag *diag)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    if (!root || !yyjson_mut_obj_add_strncpy(doc, root, "model", e->model, e->model_len)) {
        yyjson_mut_doc_free(doc);
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    }
    yyjson_mut_doc_set_root(doc, root);
    size_t len = 0;
    char *json = yyjson_mut_write(doc, 0, &len);
    yyjson_mut_doc_free(doc);
    if (!json)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    uint32_t timeout = QR_OLLAMA_SHOW_TIMEOUT_MS;
    uint64_t up = e->c->b->env.config->upstream_timeout_ms;
    if (up && up < timeout)
        timeout = (uint32_t) up;
    enum qr_err err =
        qr_fetch_post(e->c->b, base_url, "/api/show", NULL, (struct qr_slice){json, len}, timeout,
                      QR_OLLAMA_SHOW_MAX_BODY, fetched, e);
    free(json);
    if (err)
        return qr_diag_set(diag, err, "cannot ask the Ollama backend to describe '%.200s': %s",
                           e->model, qr_err_str(err));
    e->st = E_FETCHING;
    return QR_OK;
}

enum qr_ollama_show_state qr_ollama_show_get(struct qr_ollama_shows *c, struct qr_slice model,
                                             const char *base_url, qr_ollama_show_fn cb, void *arg,
                                             struct qr_ollama_show *out, struct qr_diag *diag,
                                             struct qr_ollama_show_wait **out_wait)
{
    *out_wait = NULL;
    if (model.len == 0 || model.len > QR_OLLAMA_SHOW_MAX_NAME) {
        qr_diag_set(diag, QR_ERR_INVALID, "model name of %zu bytes is not described", model.len);
        return QR_OLLAMA_SHOW_FAILED;
    }
    int64_t now = mono_ms();
    struct entry *e = find(c, model);
    if (e && e->st == E_READY && now - e->at_ms < QR_OLLAMA_SHOW_TTL_MS) {
        *out = e->show;
        return QR_OLLAMA_SHOW_HIT;
    }
    if (e && e->st == E_FAILED && now - e->at_ms < QR_OLLAMA_SHOW_RETRY_MS) {
        qr_diag_set(diag, QR_ERR_UPSTREAM, "%s", e->why);
        return QR_OLLAMA_SHOW_FAILED;
    }
    if (!e) {
        if (!make_room(c)) {
            qr_diag_set(diag, QR_ERR_BUSY, "%u model descriptions are already on the way",
                        QR_OLLAMA_SHOW_MAX_MODELS);
            return QR_OLLAMA_SHOW_FAILED;
        }
        e = calloc(1, sizeof(*e));
        if (!e || !(e->model = malloc(model.len + 1))) {
            free(e);
            qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
            return QR_OLLAMA_SHOW_FAILED;
        }
        memcpy(e->model, model.ptr, model.len);
        e->model[model.len] = '\0';
        e->model_len = model.len;
        e->c = c;
        e->st = E_FAILED;
        e->next = c->head;
        c->head = e;
        c->n++;
    }
    if (e->st != E_FETCHING && start_fetch(e, base_url, diag) != QR_OK) {
        e->st = E_FAILED; /* a stale description is not kept alive by a failed refresh */
        e->at_ms = now;
        snprintf(e->why, sizeof(e->why), "%s", diag->msg);
        return QR_OLLAMA_SHOW_FAILED;
    }
    struct qr_ollama_show_wait *w = calloc(1, sizeof(*w));
    if (!w) {
        qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
        return QR_OLLAMA_SHOW_FAILED; /* the fetch goes on and fills the entry */
    }
    w->e = e;
    w->cb = cb;
    w->arg = arg;
    struct qr_ollama_show_wait **tail = &e->waiters;
    while (*tail)
        tail = &(*tail)->next;
    *tail = w;
    *out_wait = w;
    return QR_OLLAMA_SHOW_PENDING;
}

void qr_ollama_show_unwait(struct qr_ollama_show_wait *w)
{
    if (!w)
        return;
    struct qr_ollama_show_wait **pp = &w->e->waiters;
    while (*pp && *pp != w)
        pp = &(*pp)->next;
    if (*pp)
        *pp = w->next;
    free(w);
}

void qr_ollama_show_forget(struct qr_ollama_shows *c, struct qr_slice model)
{
    struct entry *e = find(c, model);
    if (!e || e->st == E_FETCHING || e->answering)
        return;
    entry_unlink(e);
    entry_free(e);
}

void qr_ollama_show_note_digest(struct qr_ollama_shows *c, struct qr_slice model,
                                const char *digest)
{
    struct entry *e = find(c, model);
    size_t n = digest ? strlen(digest) : 0;
    if (!e || n == 0 || n >= sizeof(e->digest))
        return;
    if (e->digest[0] && strcmp(e->digest, digest) && e->st != E_FETCHING && !e->answering) {
        QR_LOG(QR_LOG_INFO, "ollama model changed, description dropped", QR_LF_S("model", e->model),
               QR_LF_S("digest", digest));
        entry_unlink(e);
        entry_free(e);
        return;
    }
    memcpy(e->digest, digest, n + 1);
}

/* ======================================================================================== */
/* Context admission                                                                         */
/* ======================================================================================== */

enum qr_err qr_ollama_show_admit_context(const struct qr_request *req,
                                         const struct qr_ollama_show *show, const char *why,
                                         struct qr_api_error *err)
{
    if (!req->context_len.set || req->context_len.v <= 0)
        return QR_OK;
    int ml = (int) (req->model.len < 200 ? req->model.len : 200);
    const char *mp = req->model.ptr ? req->model.ptr : "";
    if (show && show->context_length) {
        if ((uint64_t) req->context_len.v <= show->context_length)
            return QR_OK;
        return qr_api_error_set(err, QR_ERR_INVALID, 422, "context_exceeded", "",
                                "model '%.*s': the requested context of %lld tokens exceeds the "
                                "limit of %llu tokens (Ollama model context length)",
                                ml, mp, (long long) req->context_len.v,
                                (unsigned long long) show->context_length);
    }
    if (req->context_len_forward)
        return QR_OK; /* a policy sends it as num_ctx: Ollama itself decides */
    return qr_api_error_set(err, QR_ERR_UNAVAILABLE, 503, "upstream_unavailable", "",
                            "model '%.*s': the requested context of %lld tokens cannot be checked "
                            "against the model's context length: %s",
                            ml, mp, (long long) req->context_len.v,
                            why && why[0] ? why : "the Ollama model description has none");
}

size_t qr_ollama_shows_each(const struct qr_ollama_shows *c,
                            void (*fn)(void *arg, const char *model,
                                       const struct qr_ollama_show *show),
                            void *arg)
{
    size_t n = 0;
    int64_t now = mono_ms();
    for (const struct entry *e = c ? c->head : NULL; e; e = e->next) {
        if (e->st != E_READY || !e->show.has_caps || now - e->at_ms > QR_OLLAMA_SHOW_TTL_MS)
            continue;
        fn(arg, e->model, &e->show);
        n++;
    }
    return n;
}
