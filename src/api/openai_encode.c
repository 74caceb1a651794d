/* The OpenAI client codec, encoding half: writes the JSON by hand into a qr_buf with a sticky
 * error, because the chunk shapes are fixed and small and the bytes must be exactly what
 * openai-node's stream helper accepts (wire-protocols.md B.4/B.5, quirk rows 20-23): a role chunk
 * first, tool calls opened with id/type/name/arguments:"" and continued by argument fragments, one
 * finish_reason chunk, an optional usage chunk with "choices":[], then [DONE]; a failure is one
 * error event then [DONE]. A tool call that ends without argument bytes is sent as arguments "{}"
 * in both encodings. The decoding half is openai_codec.c. */
#include "api/openai_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "api/rerank_codec.h"
#include "core/http_server.h"

/* A writer with a sticky error: after the first failed append (which freed the buffer) nothing
 * more is written. */
struct w {
    struct qr_buf *b;
    enum qr_err rc;
};

static void w_raw(struct w *w, const char *s, size_t n)
{
    if (w->rc == QR_OK)
        w->rc = qr_buf_append(w->b, s, n);
}

static void w_lit(struct w *w, const char *s)
{
    w_raw(w, s, strlen(s));
}

static void w_str(struct w *w, const char *s, size_t n)
{
    w_lit(w, "\"");
    if (w->rc == QR_OK)
        w->rc = qr_buf_append_json_str(w->b, s, n);
    w_lit(w, "\"");
}

static void w_slice(struct w *w, struct qr_slice s)
{
    w_str(w, s.ptr ? s.ptr : "", s.ptr ? s.len : 0);
}

/* Decimal, as "%" PRId64 writes it; by hand because every streamed chunk carries "created". */
static void w_i64(struct w *w, int64_t v)
{
    char buf[24], *p = buf + sizeof(buf);
    uint64_t u = v < 0 ? (uint64_t) 0 - (uint64_t) v : (uint64_t) v;
    do {
        *--p = (char) ('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    w_raw(w, p, (size_t) (buf + sizeof(buf) - p));
}

/* The OpenAI finish_reason for a canonical one. */
static const char *finish_reason(enum qr_finish f, bool saw_tool_call)
{
    switch (f) {
    case QR_FINISH_NONE:
    case QR_FINISH_STOP:
        return saw_tool_call ? "tool_calls" : "stop";
    case QR_FINISH_LENGTH:
        return "length";
    case QR_FINISH_TOOL_CALLS:
        return "tool_calls";
    case QR_FINISH_CONTENT_FILTER:
        return "content_filter";
    case QR_FINISH_CANCELLED:
        return "cancelled";
    case QR_FINISH_ERROR:
        return "error";
    }
    return "stop";
}

static const char *error_type(int status)
{
    if (status == 401)
        return "authentication_error";
    if (status == 403)
        return "permission_error";
    if (status >= 400 && status < 500)
        return "invalid_request_error";
    return "server_error";
}

static int64_t count(int64_t v)
{
    return v < 0 ? 0 : v;
}

static void w_usage(struct w *w, const struct qr_usage *u, bool known)
{
    int64_t p = known ? count(u->prompt_tokens) : 0;
    int64_t c = known ? count(u->completion_tokens) : 0;
    w_lit(w, "{\"prompt_tokens\":");
    w_i64(w, p);
    w_lit(w, ",\"completion_tokens\":");
    w_i64(w, c);
    w_lit(w, ",\"total_tokens\":");
    w_i64(w, p + c);
    if (known && u->cached_tokens >= 0) {
        w_lit(w, ",\"prompt_tokens_details\":{\"cached_tokens\":");
        w_i64(w, u->cached_tokens);
        w_lit(w, "}");
    }
    if (known && u->reasoning_tokens >= 0) {
        w_lit(w, ",\"completion_tokens_details\":{\"reasoning_tokens\":");
        w_i64(w, u->reasoning_tokens);
        w_lit(w, "}");
    }
    w_lit(w, "}");
}

void qr_openai_enc_init(struct qr_openai_enc *e, const struct qr_request *req,
                        const struct qr_enc_env *env)
{
    memset(e, 0, sizeof(*e));
    e->op = req->op;
    e->include_usage = req->stream && req->include_usage;
    e->model = req->model;
    const char *prefix = req->op == QR_OP_COMPLETION ? "cmpl-" : "chatcmpl-";
    if (env && env->resp_id) {
        snprintf(e->id, sizeof(e->id), "%s", env->resp_id);
    } else {
        char hex[25];
        qr_http_make_request_id(hex);
        snprintf(e->id, sizeof(e->id), "%s%s", prefix, hex);
    }
    if (env) {
        e->created = env->now_ns / 1000000000;
    } else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        e->created = (int64_t) ts.tv_sec;
    }
    e->embed_base64 = req->encoding == QR_EMBED_BASE64;
    e->rerank = req->op == QR_OP_RERANK ? req : NULL;
    e->usage = (struct qr_usage){-1, -1, -1, -1, -1, -1, -1, -1};
}

/* ---- streaming ---- */

static void chunk_open(struct qr_openai_enc *e, struct w *w)
{
    w_lit(w, "data: {\"id\":");
    w_str(w, e->id, strlen(e->id));
    w_lit(w, e->op == QR_OP_COMPLETION ? ",\"object\":\"text_completion\",\"created\":"
                                       : ",\"object\":\"chat.completion.chunk\",\"created\":");
    w_i64(w, e->created);
    w_lit(w, ",\"model\":");
    w_slice(w, e->model);
    w_lit(w, ",\"choices\":[");
}

static void chunk_close(struct qr_openai_enc *e, struct w *w)
{
    w_lit(w, e->include_usage ? "],\"usage\":null}\n\n" : "]}\n\n");
}

/* One chat chunk whose choice has delta {<delta_body>} and finish_reason (NULL = null). */
static void chat_chunk_open(struct qr_openai_enc *e, struct w *w)
{
    chunk_open(e, w);
    w_lit(w, "{\"index\":0,\"delta\":{");
}

static void chat_chunk_close(struct qr_openai_enc *e, struct w *w, const char *finish)
{
    w_lit(w, "},\"logprobs\":null,\"finish_reason\":");
    if (finish) {
        w_lit(w, "\"");
        w_lit(w, finish);
        w_lit(w, "\"}");
    } else {
        w_lit(w, "null}");
    }
    chunk_close(e, w);
}

/* One completions chunk: text, optional reasoning_content, finish_reason (NULL = null). */
static void comp_chunk(struct qr_openai_enc *e, struct w *w, struct qr_slice text,
                       struct qr_slice reasoning, const char *finish)
{
    chunk_open(e, w);
    w_lit(w, "{\"text\":");
    w_slice(w, text);
    if (reasoning.len) {
        w_lit(w, ",\"reasoning_content\":");
        w_slice(w, reasoning);
    }
    w_lit(w, ",\"index\":0,\"logprobs\":null,\"finish_reason\":");
    if (finish) {
        w_lit(w, "\"");
        w_lit(w, finish);
        w_lit(w, "\"}");
    } else {
        w_lit(w, "null}");
    }
    chunk_close(e, w);
}

static void ensure_started(struct qr_openai_enc *e, struct w *w)
{
    if (e->started)
        return;
    e->started = true;
    if (e->op != QR_OP_CHAT)
        return;
    chat_chunk_open(e, w);
    w_lit(w, "\"role\":\"assistant\",\"content\":\"\"");
    chat_chunk_close(e, w, NULL);
}

static bool bit_get(const uint64_t *set, uint32_t i)
{
    return i < QR_OPENAI_MAX_TRACKED_CALLS && (set[i / 64] >> (i % 64)) & 1;
}

static void bit_set(uint64_t *set, uint32_t i)
{
    if (i < QR_OPENAI_MAX_TRACKED_CALLS)
        set[i / 64] |= (uint64_t) 1 << (i % 64);
}

static void tool_args_delta(struct qr_openai_enc *e, struct w *w, uint32_t index,
                            struct qr_slice frag)
{
    chat_chunk_open(e, w);
    w_lit(w, "\"tool_calls\":[{\"index\":");
    w_i64(w, index);
    w_lit(w, ",\"function\":{\"arguments\":");
    w_slice(w, frag);
    w_lit(w, "}}]");
    chat_chunk_close(e, w, NULL);
}

/* A call that got no argument bytes gets "{}", as the non-streamed answer says. */
static void close_call(struct qr_openai_enc *e, struct w *w, uint32_t index)
{
    if (bit_get(e->begun, index) && !bit_get(e->has_args, index)) {
        bit_set(e->has_args, index);
        tool_args_delta(e, w, index, QR_SLICE_LIT("{}"));
    }
}

static void enc_tool(struct qr_openai_enc *e, const struct qr_event *ev, struct w *w)
{
    if (e->op != QR_OP_CHAT)
        return; /* completions requests carry no tools */
    switch (ev->type) {
    case QR_EV_TOOL_BEGIN:
        e->saw_tool_call = true;
        bit_set(e->begun, ev->index);
        chat_chunk_open(e, w);
        w_lit(w, "\"tool_calls\":[{\"index\":");
        w_i64(w, ev->index);
        w_lit(w, ",\"id\":");
        w_slice(w, ev->id);
        w_lit(w, ",\"type\":\"function\",\"function\":{\"name\":");
        w_slice(w, ev->name);
        w_lit(w, ",\"arguments\":\"\"}}]");
        chat_chunk_close(e, w, NULL);
        break;
    case QR_EV_TOOL_ARGS:
        if (ev->text.len == 0)
            break;
        bit_set(e->has_args, ev->index);
        tool_args_delta(e, w, ev->index, ev->text);
        break;
    case QR_EV_TOOL_END:
        close_call(e, w, ev->index);
        break;
    default:
        break;
    }
}

static void enc_done(struct qr_openai_enc *e, const struct qr_event *ev, struct w *w)
{
    const char *finish = finish_reason(ev->finish, e->saw_tool_call);
    if (e->op == QR_OP_COMPLETION) {
        comp_chunk(e, w, QR_SLICE_LIT(""), (struct qr_slice){0}, finish);
    } else {
        for (uint32_t i = 0; i < QR_OPENAI_MAX_TRACKED_CALLS; i++)
            close_call(e, w, i);
        chat_chunk_open(e, w);
        chat_chunk_close(e, w, finish);
    }
    if (e->include_usage) {
        chunk_open(e, w);
        w_lit(w, "],\"usage\":");
        w_usage(w, &e->usage, e->has_usage);
        w_lit(w, "}\n\n");
    }
    w_lit(w, "data: [DONE]\n\n");
}

static void enc_error(const struct qr_event *ev, struct w *w)
{
    int status = ev->status ? ev->status : 500;
    w_lit(w, "data: {\"error\":{\"message\":");
    w_slice(w, ev->message);
    w_lit(w, ",\"type\":\"");
    w_lit(w, error_type(status));
    w_lit(w, "\",\"code\":");
    if (ev->code.len)
        w_slice(w, ev->code);
    else
        w_lit(w, "null");
    w_lit(w, ",\"param\":null}}\n\ndata: [DONE]\n\n");
}

enum qr_err qr_openai_enc_event(struct qr_openai_enc *e, const struct qr_event *ev,
                                struct qr_buf *out)
{
    struct w w = {out, QR_OK};
    if (e->finished)
        return QR_OK;
    switch (ev->type) {
    case QR_EV_START:
        ensure_started(e, &w);
        break;
    case QR_EV_CONTENT:
    case QR_EV_REASONING:
        if (ev->text.len == 0)
            break;
        ensure_started(e, &w);
        if (e->op == QR_OP_COMPLETION) {
            bool content = ev->type == QR_EV_CONTENT;
            comp_chunk(e, &w, content ? ev->text : QR_SLICE_LIT(""),
                       content ? (struct qr_slice){0} : ev->text, NULL);
            break;
        }
        chat_chunk_open(e, &w);
        w_lit(&w, ev->type == QR_EV_CONTENT ? "\"content\":" : "\"reasoning_content\":");
        w_slice(&w, ev->text);
        chat_chunk_close(e, &w, NULL);
        break;
    case QR_EV_TOOL_BEGIN:
    case QR_EV_TOOL_ARGS:
    case QR_EV_TOOL_END:
        ensure_started(e, &w);
        enc_tool(e, ev, &w);
        break;
    case QR_EV_USAGE:
        e->usage = ev->usage;
        e->has_usage = true;
        break;
    case QR_EV_DONE:
        ensure_started(e, &w);
        enc_done(e, ev, &w);
        e->finished = true;
        break;
    case QR_EV_ERROR:
        enc_error(ev, &w);
        e->finished = true;
        break;
    case QR_EV_META:
    case QR_EV_EMBEDDING:
    case QR_EV_RERANK:
        break;
    }
    return w.rc;
}

/* ---- non-streamed answers ---- */

static struct qr_slice buf_slice(const struct qr_buf *b)
{
    return (struct qr_slice){b->ptr ? b->ptr : "", b->ptr ? b->len : 0};
}

static void answer_head(struct qr_openai_enc *e, struct w *w, const char *object)
{
    w_lit(w, "{\"id\":");
    w_str(w, e->id, strlen(e->id));
    w_lit(w, ",\"object\":\"");
    w_lit(w, object);
    w_lit(w, "\",\"created\":");
    w_i64(w, e->created);
    w_lit(w, ",\"model\":");
    w_slice(w, e->model);
    w_lit(w, ",\"choices\":[");
}

static void answer_tail(struct w *w, const struct qr_answer *a, const char *finish)
{
    w_lit(w, ",\"logprobs\":null,\"finish_reason\":\"");
    w_lit(w, finish);
    w_lit(w, "\"}],\"usage\":");
    w_usage(w, &a->usage, a->has_usage);
    w_lit(w, "}\n");
}

static void answer_chat(struct qr_openai_enc *e, const struct qr_answer *a, struct w *w)
{
    answer_head(e, w, "chat.completion");
    w_lit(w, "{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
    if (a->content.len == 0 && a->n_calls > 0)
        w_lit(w, "null");
    else
        w_slice(w, buf_slice(&a->content));
    if (a->reasoning.len) {
        w_lit(w, ",\"reasoning_content\":");
        w_slice(w, buf_slice(&a->reasoning));
    }
    if (a->n_calls) {
        w_lit(w, ",\"tool_calls\":[");
        for (size_t i = 0; i < a->n_calls; i++) {
            const struct qr_answer_call *c = &a->calls[i];
            w_lit(w, i ? ",{\"id\":" : "{\"id\":");
            w_slice(w, buf_slice(&c->id));
            w_lit(w, ",\"type\":\"function\",\"function\":{\"name\":");
            w_slice(w, buf_slice(&c->name));
            w_lit(w, ",\"arguments\":");
            w_slice(w, c->arguments.len ? buf_slice(&c->arguments) : QR_SLICE_LIT("{}"));
            w_lit(w, "}}");
        }
        w_lit(w, "]");
    }
    w_lit(w, "}");
    answer_tail(w, a, finish_reason(a->finish, a->n_calls > 0));
}

static void answer_completion(struct qr_openai_enc *e, const struct qr_answer *a, struct w *w)
{
    answer_head(e, w, "text_completion");
    w_lit(w, "{\"text\":");
    w_slice(w, buf_slice(&a->content));
    if (a->reasoning.len) {
        w_lit(w, ",\"reasoning_content\":");
        w_slice(w, buf_slice(&a->reasoning));
    }
    w_lit(w, ",\"index\":0");
    answer_tail(w, a, finish_reason(a->finish, false));
}

static void w_base64_f32(struct w *w, const float *v, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char q[3];
    size_t nq = 0;
    char out[4];
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        for (int k = 0; k < 4; k++) { /* little-endian whatever the host */
            q[nq++] = (unsigned char) (bits >> (8 * k));
            if (nq < 3)
                continue;
            out[0] = tab[q[0] >> 2];
            out[1] = tab[((q[0] & 3) << 4) | (q[1] >> 4)];
            out[2] = tab[((q[1] & 15) << 2) | (q[2] >> 6)];
            out[3] = tab[q[2] & 63];
            w_raw(w, out, 4);
            nq = 0;
        }
    }
    if (nq) {
        if (nq == 1)
            q[1] = 0;
        out[0] = tab[q[0] >> 2];
        out[1] = tab[((q[0] & 3) << 4) | (q[1] >> 4)];
        out[2] = nq == 2 ? tab[(q[1] & 15) << 2] : '=';
        out[3] = '=';
        w_raw(w, out, 4);
    }
}

static void w_floats(struct w *w, const float *v, size_t n)
{
    char buf[32];
    for (size_t i = 0; i < n; i++) {
        if (i)
            w_lit(w, ",");
        if (!isfinite(v[i])) {
            w_lit(w, "null"); /* JSON has no NaN/Inf; base64 keeps the bits */
            continue;
        }
        int len = snprintf(buf, sizeof(buf), "%.9g", (double) v[i]);
        w_raw(w, buf, (size_t) len);
    }
}

static void answer_embed(struct qr_openai_enc *e, const struct qr_answer *a, bool base64,
                         struct w *w)
{
    w_lit(w, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < a->n_vectors; i++) {
        const float *v = a->vectors ? a->vectors[i] : NULL;
        size_t n = v && a->dims ? a->dims[i] : 0;
        w_lit(w,
              i ? ",{\"object\":\"embedding\",\"index\":" : "{\"object\":\"embedding\",\"index\":");
        w_i64(w, (int64_t) i);
        w_lit(w, ",\"embedding\":");
        if (base64) {
            w_lit(w, "\"");
            w_base64_f32(w, v, n);
            w_lit(w, "\"}");
        } else {
            w_lit(w, "[");
            w_floats(w, v, n);
            w_lit(w, "]}");
        }
    }
    w_lit(w, "],\"model\":");
    w_slice(w, e->model);
    int64_t p = a->has_usage ? count(a->usage.prompt_tokens) : 0;
    w_lit(w, ",\"usage\":{\"prompt_tokens\":");
    w_i64(w, p);
    w_lit(w, ",\"total_tokens\":");
    w_i64(w, p);
    w_lit(w, "}}\n");
}

enum qr_err qr_openai_enc_answer(struct qr_openai_enc *e, const struct qr_answer *a,
                                 struct qr_buf *out)
{
    struct w w = {out, QR_OK};
    switch (e->op) {
    case QR_OP_CHAT:
        answer_chat(e, a, &w);
        break;
    case QR_OP_COMPLETION:
        answer_completion(e, a, &w);
        break;
    case QR_OP_EMBED:
        answer_embed(e, a, e->embed_base64, &w);
        break;
    case QR_OP_RERANK:
        if (!e->rerank)
            return QR_ERR_INTERNAL;
        return qr_rerank_enc_answer(e->model, e->rerank, a, out);
    }
    return w.rc;
}

void qr_openai_error_body(const struct qr_api_error *err, struct qr_buf *out)
{
    struct w w = {out, QR_OK};
    int status = err->status ? err->status : 500;
    w_lit(&w, "{\"error\":{\"message\":");
    w_str(&w, err->message, strnlen(err->message, sizeof(err->message)));
    w_lit(&w, ",\"type\":\"");
    w_lit(&w, error_type(status));
    w_lit(&w, "\",\"param\":");
    size_t plen = strnlen(err->param, sizeof(err->param));
    if (plen)
        w_str(&w, err->param, plen);
    else
        w_lit(&w, "null");
    w_lit(&w, ",\"code\":");
    size_t clen = strnlen(err->code, sizeof(err->code));
    if (clen)
        w_str(&w, err->code, clen);
    else
        w_lit(&w, "null");
    w_lit(&w, "}}\n");
}

const char *qr_openai_stream_content_type(void)
{
    return "text/event-stream";
}

const char *qr_openai_json_content_type(void)
{
    return "application/json";
}
