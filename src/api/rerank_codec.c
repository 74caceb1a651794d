/* The rerank client codec: decodes POST /v1/rerank and /rerank bodies into the canonical request
 * and encodes the aggregate of the RERANK events into the list answer llama-server, Jina and
 * Cohere clients read. The body is hostile input: it is parsed once with yyjson (numbers as raw
 * text, so an integer is told from a float exactly), every field is type-checked before anything
 * is copied, the document count is capped before the documents are allocated, and every refusal
 * is a 400 in the OpenAI error shape naming the offending field in "param". The answer is built
 * with yyjson (doubles written shortest round-trip), sorted by score with ties broken by index so
 * the output is deterministic. */
#include "api/rerank_codec.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "core/json_strict.h"

/* ---- decoding ---- */

struct rdec {
    struct qr_arena *a;
    size_t max_docs;
    struct qr_api_error *err;
};

static enum qr_err bad(struct rdec *d, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum qr_err bad(struct rdec *d, const char *param, const char *fmt, ...)
{
    char msg[sizeof(d->err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return qr_api_error_set(d->err, QR_ERR_INVALID, 400, "invalid_request", param, "%s", msg);
}

static enum qr_err too_large(struct rdec *d)
{
    return qr_api_error_set(d->err, QR_ERR_TOO_LARGE, 413, "request_too_large", "",
                            "request needs more memory than one request may use");
}

static bool key_is(yyjson_val *k, const char *s)
{
    size_t n = strlen(s);
    return yyjson_get_len(k) == n && memcmp(yyjson_get_str(k), s, n) == 0;
}

static enum qr_err dup_val(struct rdec *d, yyjson_val *v, struct qr_slice *out)
{
    *out = qr_arena_dup(d->a, yyjson_get_str(v), yyjson_get_len(v));
    return out->ptr ? QR_OK : too_large(d);
}

/* A required, non-empty string. */
static enum qr_err dec_text(struct rdec *d, yyjson_val *v, const char *param, struct qr_slice *out)
{
    if (!yyjson_is_str(v))
        return bad(d, param, "'%s' must be a string", param);
    if (yyjson_get_len(v) == 0)
        return bad(d, param, "'%s' must not be empty", param);
    return dup_val(d, v, out);
}

static enum qr_err dec_documents(struct rdec *d, yyjson_val *v, struct qr_request *r)
{
    if (!yyjson_is_arr(v))
        return bad(d, "documents", "'documents' must be an array of strings");
    size_t n = yyjson_arr_size(v);
    if (n == 0)
        return bad(d, "documents", "'documents' must not be empty");
    if (n > d->max_docs)
        return bad(d, "documents", "too many documents (%zu, at most %zu)", n, d->max_docs);
    size_t i, max;
    yyjson_val *it;
    yyjson_arr_foreach(v, i, max, it)
    {
        if (!yyjson_is_str(it)) {
            char param[48];
            snprintf(param, sizeof(param), "documents[%zu]", i);
            return bad(d, param, "'%s' must be a string", param);
        }
    }
    r->inputs = qr_arena_array(d->a, n, sizeof(*r->inputs));
    if (!r->inputs)
        return too_large(d);
    yyjson_arr_foreach(v, i, max, it)
    {
        enum qr_err rc = dup_val(d, it, &r->inputs[i]);
        if (rc)
            return rc;
    }
    r->n_inputs = n;
    r->input_is_list = true;
    return QR_OK;
}

/* top_n: an integer >= 1. Numbers are raw text; yyjson checked their syntax. */
static enum qr_err dec_top_n(struct rdec *d, yyjson_val *v, struct qr_request *r)
{
    char buf[64];
    size_t n = yyjson_get_len(v);
    if (!yyjson_is_raw(v) || n == 0 || n >= sizeof(buf))
        return bad(d, "top_n", "'top_n' must be an integer");
    memcpy(buf, yyjson_get_raw(v), n);
    buf[n] = '\0';
    double x = strtod(buf, NULL);
    if (x != floor(x) || !isfinite(x))
        return bad(d, "top_n", "'top_n' must be an integer");
    if (x < 1)
        return bad(d, "top_n", "'top_n' must be at least 1");
    r->top_n.set = true;
    r->top_n.v = x > (double) INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t) x;
    return QR_OK;
}

static enum qr_err dec_extra(struct rdec *d, yyjson_val *k, yyjson_val *v, struct qr_request *r)
{
    struct qr_extra *x = &r->extras[r->n_extras];
    enum qr_err rc = dup_val(d, k, &x->key);
    if (rc)
        return rc;
    size_t len = 0;
    char *s = yyjson_val_write(v, YYJSON_WRITE_NOFLAG, &len);
    if (!s)
        return too_large(d);
    x->json = qr_arena_dup(d->a, s, len);
    free(s);
    if (!x->json.ptr)
        return too_large(d);
    r->n_extras++;
    return QR_OK;
}

/* One top-level member. *seen collects the required keys (bit 0 model, 1 query, 2 documents). */
static enum qr_err dec_member(struct rdec *d, yyjson_val *k, yyjson_val *v, struct qr_request *r,
                              unsigned *seen)
{
    if (key_is(k, "model")) {
        *seen |= 1u;
        return dec_text(d, v, "model", &r->model);
    }
    if (key_is(k, "query")) {
        *seen |= 2u;
        return dec_text(d, v, "query", &r->query);
    }
    if (key_is(k, "documents")) {
        *seen |= 4u;
        return dec_documents(d, v, r);
    }
    if (key_is(k, "top_n"))
        return yyjson_is_null(v) ? QR_OK : dec_top_n(d, v, r);
    if (key_is(k, "return_documents")) {
        if (yyjson_is_null(v))
            return QR_OK;
        if (!yyjson_is_bool(v))
            return bad(d, "return_documents", "'return_documents' must be a boolean");
        r->return_documents = yyjson_get_bool(v) ? QR_TRUE : QR_FALSE;
        return QR_OK;
    }
    if (key_is(k, "stream")) {
        if (yyjson_is_null(v) || yyjson_is_false(v))
            return QR_OK;
        if (!yyjson_is_bool(v))
            return bad(d, "stream", "'stream' must be a boolean");
        return bad(d, "stream", "rerank answers are not streamed: 'stream' must be false");
    }
    return dec_extra(d, k, v, r);
}

static enum qr_err dec_root(struct rdec *d, yyjson_val *root, struct qr_request *r)
{
    r->extras = qr_arena_array(d->a, yyjson_obj_size(root), sizeof(*r->extras));
    if (!r->extras)
        return too_large(d);
    unsigned seen = 0;
    yyjson_obj_iter it;
    yyjson_obj_iter_init(root, &it);
    yyjson_val *k;
    while ((k = yyjson_obj_iter_next(&it))) {
        enum qr_err rc = dec_member(d, k, yyjson_obj_iter_get_val(k), r, &seen);
        if (rc)
            return rc;
    }
    if (!(seen & 1u))
        return bad(d, "model", "'model' is required");
    if (!(seen & 2u))
        return bad(d, "query", "'query' is required");
    if (!(seen & 4u))
        return bad(d, "documents", "'documents' is required");
    return QR_OK;
}

enum qr_err qr_rerank_decode(struct qr_slice body, const struct qr_decode_limits *lim,
                             struct qr_arena *a, struct qr_request *out, struct qr_api_error *err)
{
    struct rdec d = {.a = a, .max_docs = QR_RERANK_MAX_DOCUMENTS, .err = err};
    if (lim && lim->max_inputs < d.max_docs)
        d.max_docs = lim->max_inputs;
    memset(out, 0, sizeof(*out));
    out->protocol = QR_PROTO_OPENAI;
    out->op = QR_OP_RERANK;

    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) (uintptr_t) body.ptr, body.len,
                                       YYJSON_READ_NUMBER_AS_RAW, NULL, &rerr);
    if (!doc) {
        if (rerr.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION)
            return too_large(&d);
        return qr_api_error_set(err, QR_ERR_PARSE, 400, "invalid_json", "",
                                "request body is not valid JSON: %s at byte %zu", rerr.msg,
                                rerr.pos);
    }
    yyjson_val *root = yyjson_doc_get_root(doc);
    char why[128];
    enum qr_err rc = !yyjson_is_obj(root) ? bad(&d, "", "request body must be a JSON object")
                     : !qr_json_strict_ok(root, why, sizeof why)
                         ? bad(&d, "", "request body refused: %s", why)
                         : dec_root(&d, root, out);
    yyjson_doc_free(doc);
    return rc;
}

/* ---- encoding ---- */

struct ranked {
    uint32_t index;
    double score;
};

/* Descending score; equal scores by ascending index (qsort is not stable). */
static int ranked_cmp(const void *pa, const void *pb)
{
    const struct ranked *x = pa, *y = pb;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static enum qr_err write_doc(yyjson_mut_doc *doc, struct qr_buf *out)
{
    size_t len = 0;
    char *s = yyjson_mut_write(doc, 0, &len);
    if (!s) {
        qr_buf_cleanup(out);
        return QR_ERR_NOMEM;
    }
    enum qr_err err = qr_buf_append(out, s, len);
    if (!err)
        err = qr_buf_append(out, "\n", 1);
    free(s);
    return err;
}

/* results[] from the sorted list, cut to top_n. */
static bool add_results(yyjson_mut_doc *doc, yyjson_mut_val *root, const struct qr_request *req,
                        const struct ranked *list, size_t n)
{
    size_t keep = n;
    if (req->top_n.set && req->top_n.v >= 1 && (uint64_t) req->top_n.v < keep)
        keep = (size_t) req->top_n.v;
    yyjson_mut_val *results = yyjson_mut_obj_add_arr(doc, root, "results");
    if (!results)
        return false;
    for (size_t i = 0; i < keep; i++) {
        yyjson_mut_val *r = yyjson_mut_arr_add_obj(doc, results);
        if (!r || !yyjson_mut_obj_add_uint(doc, r, "index", list[i].index) ||
            !yyjson_mut_obj_add_real(doc, r, "relevance_score", list[i].score))
            return false;
        if (req->return_documents != QR_TRUE)
            continue;
        struct qr_slice t = req->inputs[list[i].index];
        yyjson_mut_val *d = yyjson_mut_obj_add_obj(doc, r, "document");
        if (!d || !yyjson_mut_obj_add_strn(doc, d, "text", t.ptr ? t.ptr : "", t.len))
            return false;
    }
    return true;
}

enum qr_err qr_rerank_enc_answer(struct qr_slice model, const struct qr_request *req,
                                 const struct qr_answer *a, struct qr_buf *out)
{
    if (a->n_scores > req->n_inputs) {
        qr_buf_cleanup(out);
        return QR_ERR_INVALID;
    }
    struct ranked *list = malloc((a->n_ranked ? a->n_ranked : 1) * sizeof(*list));
    if (!list) {
        qr_buf_cleanup(out);
        return QR_ERR_NOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < a->n_scores && n < a->n_ranked; i++) {
        if (a->scores[i].set)
            list[n++] = (struct ranked){(uint32_t) i, a->scores[i].score};
    }
    qsort(list, n, sizeof(*list), ranked_cmp);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    bool ok = root != NULL;
    if (ok) {
        yyjson_mut_doc_set_root(doc, root);
        int64_t p = a->has_usage && a->usage.prompt_tokens > 0 ? a->usage.prompt_tokens : 0;
        yyjson_mut_val *usage;
        ok = yyjson_mut_obj_add_str(doc, root, "object", "list") &&
             yyjson_mut_obj_add_strn(doc, root, "model", model.ptr ? model.ptr : "", model.len) &&
             add_results(doc, root, req, list, n) &&
             (usage = yyjson_mut_obj_add_obj(doc, root, "usage")) != NULL &&
             yyjson_mut_obj_add_int(doc, usage, "prompt_tokens", p) &&
             yyjson_mut_obj_add_int(doc, usage, "total_tokens", p);
    }
    free(list);
    enum qr_err err = ok ? write_doc(doc, out) : QR_ERR_NOMEM;
    if (!ok)
        qr_buf_cleanup(out);
    yyjson_mut_doc_free(doc);
    return err;
}
