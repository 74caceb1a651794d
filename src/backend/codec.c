/* Backend codecs, the shared half: dialect defaults, dispatch to the protocol encoders, and the
 * decoder core both upstream protocols run on. The core picks the framing from the HTTP status
 * and Content-Type (SSE, NDJSON, one JSON body, or an error body), keeps at most one partial
 * line or event (capped), hands each parsed chunk to the protocol file, and owns the order
 * contract of contract/event.h: START before anything, USAGE once just before DONE, and exactly
 * one DONE or ERROR. DONE needs a real finish: a finish reason, SSE [DONE] after output, or a
 * complete non-streamed body. A stream that ends early, is cut or times out becomes one ERROR;
 * a cancelled transfer becomes DONE(cancelled), because the client asked for it. */
#include "backend/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec_impl.h"
#include "stream/lines.h"

#define DEFAULT_MAX_EVENT ((size_t) 16 << 20)
#define DEFAULT_MAX_BODY  ((size_t) 64 << 20)
#define MAX_ERROR_BODY    ((size_t) 1 << 20)
#define MAX_ERROR_MSG     1024

void qr_dialect_default(struct qr_dialect *d, enum qr_upstream_proto proto)
{
    memset(d, 0, sizeof(*d));
    d->proto = proto;
    d->reasoning_field = proto == QR_UP_OPENAI ? "reasoning_content" : NULL;
    d->stream_usage = true;
    d->max_event_bytes = DEFAULT_MAX_EVENT;
    d->max_body_bytes = DEFAULT_MAX_BODY;
}

enum qr_err qr_upstream_encode(const struct qr_dialect *d, const struct qr_request *req,
                               struct qr_buf *out, const char **out_path, struct qr_api_error *err)
{
    switch (d->proto) {
    case QR_UP_OPENAI:
        return qr_openai_encode(d, req, out, out_path, err);
    case QR_UP_OLLAMA:
        return qr_ollama_encode(d, req, out, out_path, err);
    }
    return qr_api_error_set(err, QR_ERR_INTERNAL, 500, "internal_error", "",
                            "unknown upstream protocol %d", (int) d->proto);
}

enum qr_err qr_enc_write(yyjson_mut_doc *doc, struct qr_buf *out, struct qr_api_error *err)
{
    size_t len = 0;
    yyjson_write_err werr;
    char *s = yyjson_mut_write_opts(doc, 0, NULL, &len, &werr);
    if (!s)
        return qr_api_error_set(err, QR_ERR_INVALID, 400, "invalid_request", "",
                                "cannot encode the upstream request: %s", werr.msg);
    enum qr_err e = qr_buf_append(out, s, len);
    free(s);
    if (e)
        return qr_api_error_set(err, e, e == QR_ERR_TOO_LARGE ? 413 : 500,
                                e == QR_ERR_TOO_LARGE ? "request_too_large" : "internal_error", "",
                                "upstream request body too large");
    return QR_OK;
}

/* ---- JSON helpers ---- */

/* Raw number text into a NUL-terminated local copy. */
static bool raw_copy(yyjson_val *v, char *buf, size_t cap)
{
    const char *r = yyjson_get_raw(v);
    size_t n = yyjson_get_len(v);
    if (!r || n == 0 || n >= cap)
        return false;
    memcpy(buf, r, n);
    buf[n] = '\0';
    return true;
}

bool qr_json_f64(yyjson_val *v, double *out)
{
    if (yyjson_is_num(v)) {
        *out = yyjson_get_num(v);
        return true;
    }
    char buf[64], *end;
    if (!yyjson_is_raw(v) || !raw_copy(v, buf, sizeof(buf)))
        return false;
    *out = strtod(buf, &end);
    return *end == '\0';
}

bool qr_json_i64(yyjson_val *v, int64_t *out)
{
    if (yyjson_is_sint(v) || yyjson_is_uint(v)) {
        *out = yyjson_get_sint(v);
        return true;
    }
    const char *r = yyjson_is_raw(v) ? yyjson_get_raw(v) : NULL;
    size_t rn = r ? yyjson_get_len(v) : 0, neg = rn && r[0] == '-', i = neg;
    if (rn > neg && rn - neg <= 18) { /* plain integers (indexes, counts) without strtoll */
        int64_t x = 0;
        while (i < rn && r[i] >= '0' && r[i] <= '9')
            x = x * 10 + (r[i++] - '0');
        if (i == rn) {
            *out = neg ? -x : x;
            return true;
        }
    }
    char buf[64], *end;
    if (yyjson_is_raw(v) && raw_copy(v, buf, sizeof(buf))) {
        long long x = strtoll(buf, &end, 10);
        if (*end == '\0') {
            *out = x;
            return true;
        }
    }
    double d;
    if (!qr_json_f64(v, &d) || !(d >= -9.2e18 && d <= 9.2e18))
        return false;
    *out = (int64_t) d;
    return true;
}

struct qr_slice qr_json_str(yyjson_val *v)
{
    if (!yyjson_is_str(v) || yyjson_get_len(v) == 0)
        return (struct qr_slice){"", 0};
    return (struct qr_slice){yyjson_get_str(v), yyjson_get_len(v)};
}

char *qr_json_write(yyjson_val *v, size_t *len)
{
    return yyjson_val_write(v, 0, len);
}

/* ---- events ---- */

enum qr_err qr_dec_emit(struct qr_upstream_dec *dec, struct qr_event *ev)
{
    if (dec->terminal)
        return dec->fn_err;
    if (!dec->started && ev->type != QR_EV_START) {
        enum qr_err err = qr_dec_start(dec, (struct qr_slice){"", 0});
        if (err || dec->terminal)
            return err;
    }
    switch (ev->type) {
    case QR_EV_CONTENT:
    case QR_EV_REASONING:
    case QR_EV_TOOL_BEGIN:
    case QR_EV_TOOL_ARGS:
        dec->output_seen = true;
        break;
    case QR_EV_DONE:
    case QR_EV_ERROR:
        dec->terminal = true;
        break;
    default:
        break;
    }
    enum qr_err err = dec->fn(dec->arg, ev);
    if (err) {
        dec->fn_err = err;
        dec->terminal = true;
    }
    return err;
}

/* A qr_event_fn over the decoder, for the think splitter and the tool-call assembler. */
enum qr_err qr_dec_relay(void *arg, const struct qr_event *ev)
{
    struct qr_event copy = *ev;
    return qr_dec_emit(arg, &copy);
}

enum qr_err qr_dec_start(struct qr_upstream_dec *dec, struct qr_slice model)
{
    if (dec->started)
        return QR_OK;
    size_t n = model.len < sizeof(dec->model) - 1 ? model.len : sizeof(dec->model) - 1;
    while (n < model.len && n > 0 && ((unsigned char) model.ptr[n] & 0xC0) == 0x80)
        n--; /* do not cut a UTF-8 sequence */
    if (n)
        memcpy(dec->model, model.ptr, n);
    dec->model[n] = '\0';
    dec->started = true;
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_START;
    ev.model = (struct qr_slice){dec->model, n};
    ev.name = (struct qr_slice){"", 0};
    return qr_dec_emit(dec, &ev);
}

enum qr_err qr_dec_content(struct qr_upstream_dec *dec, struct qr_slice text)
{
    if (text.len == 0 || dec->terminal)
        return dec->fn_err;
    if (dec->think_on)
        return qr_think_feed(&dec->think, text.ptr, text.len, qr_dec_relay, dec);
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_CONTENT;
    ev.text = text;
    return qr_dec_emit(dec, &ev);
}

enum qr_err qr_dec_reasoning(struct qr_upstream_dec *dec, struct qr_slice text)
{
    if (text.len == 0)
        return dec->fn_err;
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_REASONING;
    ev.text = text;
    return qr_dec_emit(dec, &ev);
}

enum qr_err qr_dec_meta(struct qr_upstream_dec *dec, struct qr_slice id, int64_t slot)
{
    bool send_id = id.len && !dec->id_sent;
    bool send_slot = slot >= 0 && !dec->slot_sent;
    if (!send_id && !send_slot)
        return dec->fn_err;
    dec->id_sent |= send_id;
    dec->slot_sent |= send_slot;
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_META;
    ev.id = send_id ? id : (struct qr_slice){"", 0};
    ev.slot_id = send_slot ? slot : -1;
    qr_usage_init(&ev.usage);
    return qr_dec_emit(dec, &ev);
}

void qr_dec_set_finish(struct qr_upstream_dec *dec, enum qr_finish f, struct qr_slice raw)
{
    dec->finish_seen = true;
    dec->finish = f;
    size_t n = raw.len < sizeof(dec->raw_finish) - 1 ? raw.len : sizeof(dec->raw_finish) - 1;
    if (n)
        memcpy(dec->raw_finish, raw.ptr, n);
    dec->raw_finish[n] = '\0';
}

void qr_dec_add_usage(struct qr_upstream_dec *dec, const struct qr_usage *u)
{
#define MERGE(f)                                                                                   \
    if (u->f >= 0) {                                                                               \
        dec->usage.f = u->f;                                                                       \
        dec->have_usage = true;                                                                    \
    }
    MERGE(prompt_tokens)
    MERGE(completion_tokens)
    MERGE(cached_tokens)
    MERGE(reasoning_tokens)
    MERGE(total_ns)
    MERGE(load_ns)
    MERGE(prompt_ns)
    MERGE(eval_ns)
#undef MERGE
}

void qr_dec_add_usage_fallback(struct qr_upstream_dec *dec, const struct qr_usage *u)
{
#define MERGE(f)                                                                                   \
    if (u->f >= 0)                                                                                 \
        dec->usage_fb.f = u->f;
    MERGE(prompt_tokens)
    MERGE(completion_tokens)
    MERGE(cached_tokens)
    MERGE(reasoning_tokens)
    MERGE(total_ns)
    MERGE(load_ns)
    MERGE(prompt_ns)
    MERGE(eval_ns)
#undef MERGE
}

/* Copy s into out (cap bytes), cut at a UTF-8 boundary, invalid bytes replaced by '?', control
 * bytes by spaces. Returns the length. */
static size_t clean_text(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0, i = 0;
    while (i < n && o + 4 < cap) {
        unsigned char c = (unsigned char) s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        bool ok = len > 0 && i + len <= n && !(len == 2 && c < 0xC2);
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char) s[i + k] & 0xC0) == 0x80;
        if (!ok) {
            out[o++] = '?';
            i++;
            continue;
        }
        if (len == 1 && c < 0x20)
            out[o++] = ' ';
        else
            memcpy(out + o, s + i, len), o += len;
        i += len;
    }
    out[o] = '\0';
    return o;
}

enum qr_err qr_dec_fail(struct qr_upstream_dec *dec, int status, const char *code, bool retryable,
                        struct qr_slice message)
{
    if (dec->terminal)
        return dec->fn_err;
    char msg[MAX_ERROR_MSG + 8];
    size_t n = clean_text(message.ptr, message.len, msg, sizeof(msg));
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_ERROR;
    ev.status = status;
    ev.code = qr_slice_str(code);
    ev.message = (struct qr_slice){msg, n};
    ev.retryable = retryable;
    return qr_dec_emit(dec, &ev);
}

struct qr_slice qr_dec_error_message(yyjson_val *root)
{
    if (yyjson_is_str(root))
        return qr_json_str(root);
    if (!yyjson_is_obj(root))
        return (struct qr_slice){"", 0};
    yyjson_val *e = yyjson_obj_get(root, "error");
    if (yyjson_is_str(e))
        return qr_json_str(e);
    if (yyjson_is_obj(e)) {
        struct qr_slice m = qr_json_str(yyjson_obj_get(e, "message"));
        if (m.len)
            return m;
    }
    struct qr_slice m = qr_json_str(yyjson_obj_get(root, "message"));
    if (m.len)
        return m;
    yyjson_val *detail = yyjson_obj_get(root, "detail");
    if (yyjson_is_str(detail))
        return qr_json_str(detail);
    if (yyjson_is_arr(detail))
        return qr_json_str(yyjson_obj_get(yyjson_arr_get_first(detail), "msg"));
    return (struct qr_slice){"", 0};
}

enum qr_err qr_dec_fail_payload(struct qr_upstream_dec *dec, yyjson_val *v)
{
    struct qr_slice m = qr_dec_error_message(v);
    if (m.len == 0)
        m = qr_slice_str("upstream reported an error");
    return qr_dec_fail(dec, 502, "upstream_error", false, m);
}

static enum qr_err fail_text(struct qr_upstream_dec *dec, const char *msg)
{
    return qr_dec_fail(dec, 502, "upstream_error", false, qr_slice_str(msg));
}

enum qr_err qr_dec_embedding(struct qr_upstream_dec *dec, uint32_t index, yyjson_val *v)
{
    if (!yyjson_is_arr(v))
        return fail_text(dec, "upstream embedding is not an array");
    size_t n = yyjson_arr_size(v);
    float *vec = malloc(n ? n * sizeof(float) : 1);
    if (!vec)
        return fail_text(dec, "out of memory for an upstream embedding");
    size_t i, max;
    yyjson_val *x;
    yyjson_arr_foreach(v, i, max, x)
    {
        double d;
        if (!qr_json_f64(x, &d)) {
            free(vec);
            return fail_text(dec, "upstream embedding holds a non-number");
        }
        vec[i] = (float) d;
    }
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_EMBEDDING;
    ev.index = index;
    ev.vec = vec;
    ev.dims = n;
    enum qr_err err = qr_dec_emit(dec, &ev);
    free(vec);
    return err;
}

enum qr_err qr_dec_done(struct qr_upstream_dec *dec)
{
    enum qr_err err;
    if (dec->terminal)
        return dec->fn_err;
    if (dec->think_on && (err = qr_think_flush(&dec->think, qr_dec_relay, dec)))
        return err;
    if (dec->terminal)
        return dec->fn_err;
    err = qr_toolcalls_finish(&dec->tc, qr_dec_relay, dec);
    if (err == QR_ERR_TOO_LARGE || err == QR_ERR_NOMEM)
        return fail_text(dec, "upstream tool call too large");
    if (err || dec->terminal)
        return dec->fn_err;
    struct qr_usage fb = dec->usage_fb;
    if (dec->usage.prompt_tokens >= 0)
        fb.prompt_tokens = -1;
    if (dec->usage.completion_tokens >= 0)
        fb.completion_tokens = -1;
    if (dec->usage.cached_tokens >= 0)
        fb.cached_tokens = -1;
    if (dec->usage.reasoning_tokens >= 0)
        fb.reasoning_tokens = -1;
    if (dec->usage.total_ns >= 0)
        fb.total_ns = -1;
    if (dec->usage.load_ns >= 0)
        fb.load_ns = -1;
    if (dec->usage.prompt_ns >= 0)
        fb.prompt_ns = -1;
    if (dec->usage.eval_ns >= 0)
        fb.eval_ns = -1;
    qr_dec_add_usage(dec, &fb);
    struct qr_event ev;
    if (dec->have_usage) {
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_USAGE;
        ev.usage = dec->usage;
        if ((err = qr_dec_emit(dec, &ev)))
            return err;
    }
    enum qr_finish f = dec->finish_seen ? dec->finish : QR_FINISH_STOP;
    if (f == QR_FINISH_STOP && qr_toolcalls_count(&dec->tc) > 0)
        f = QR_FINISH_TOOL_CALLS;
    /* "tool_calls" over arguments cut mid-JSON: the generation ran out (quirk 27). */
    if (f == QR_FINISH_TOOL_CALLS && !qr_toolcalls_complete(&dec->tc))
        f = QR_FINISH_LENGTH;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_DONE;
    ev.finish = f;
    ev.raw_finish = qr_slice_str(dec->raw_finish);
    ev.context = (struct qr_slice){dec->context.ptr, dec->context.len};
    return qr_dec_emit(dec, &ev);
}

/* ---- decoder lifecycle and framing ---- */

/* Content-Type media type (parameters stripped) equal to s, case-insensitive. */
static bool ctype_is(struct qr_slice ct, const char *s)
{
    size_t n = 0;
    while (n < ct.len && ct.ptr[n] != ';')
        n++;
    while (n > 0 && (ct.ptr[n - 1] == ' ' || ct.ptr[n - 1] == '\t'))
        n--;
    size_t b = 0;
    while (b < n && (ct.ptr[b] == ' ' || ct.ptr[b] == '\t'))
        b++;
    return qr_slice_eq_nocase((struct qr_slice){ct.ptr + b, n - b}, s);
}

static bool ctype_json(struct qr_slice ct)
{
    if (ctype_is(ct, "application/json"))
        return true;
    size_t n = 0;
    while (n < ct.len && ct.ptr[n] != ';' && ct.ptr[n] != ' ')
        n++;
    return n >= 5 && qr_slice_eq_nocase((struct qr_slice){ct.ptr + n - 5, 5}, "+json");
}

static enum qr_dec_mode pick_mode(const struct qr_dialect *d, const struct qr_request *req,
                                  int status, struct qr_slice ct)
{
    if (status < 200 || status > 299)
        return QR_DEC_ERRBODY;
    if (ctype_is(ct, "text/event-stream"))
        return QR_DEC_SSE;
    if (ctype_is(ct, "application/x-ndjson") || ctype_is(ct, "application/ndjson") ||
        ctype_is(ct, "application/jsonl"))
        return QR_DEC_LINES;
    if (ctype_json(ct))
        return QR_DEC_WHOLE;
    /* Unknown or absent: what was asked for. */
    if (req->stream && req->op != QR_OP_EMBED)
        return d->proto == QR_UP_OPENAI ? QR_DEC_SSE : QR_DEC_LINES;
    return QR_DEC_WHOLE;
}

static size_t max_event(const struct qr_upstream_dec *dec)
{
    return dec->d->max_event_bytes ? dec->d->max_event_bytes : DEFAULT_MAX_EVENT;
}

enum qr_err qr_upstream_dec_new(const struct qr_dialect *d, const struct qr_request *req,
                                int status, struct qr_slice content_type,
                                struct qr_upstream_dec **out)
{
    struct qr_upstream_dec *dec = calloc(1, sizeof(*dec));
    if (!dec)
        return QR_ERR_NOMEM;
    dec->d = d;
    dec->req = req;
    dec->status = status;
    dec->mode = pick_mode(d, req, status, content_type);
    size_t ev_max = max_event(dec);
    switch (dec->mode) {
    case QR_DEC_SSE:
    case QR_DEC_LINES:
        dec->in_max = ev_max + 2; /* a partial line and a pending "\r" */
        break;
    case QR_DEC_WHOLE:
        dec->in_max = d->max_body_bytes ? d->max_body_bytes : DEFAULT_MAX_BODY;
        break;
    case QR_DEC_ERRBODY:
        dec->in_max = MAX_ERROR_BODY;
        break;
    }
    qr_buf_init(&dec->in, dec->in_max);
    qr_buf_init(&dec->data, ev_max);
    qr_buf_init(&dec->context, ev_max);
    qr_usage_init(&dec->usage);
    qr_usage_init(&dec->usage_fb);
    qr_toolcalls_init(&dec->tc, 0, ev_max);
    if (d->think_open && d->think_open[0]) {
        if (qr_think_init(&dec->think, d->think_open, d->think_close ? d->think_close : "",
                          d->think_start_inside) != QR_OK) {
            free(dec);
            return QR_ERR_CONFIG;
        }
        dec->think_on = true;
    }
    *out = dec;
    return QR_OK;
}

void qr_upstream_dec_free(struct qr_upstream_dec *dec)
{
    if (!dec)
        return;
    qr_buf_cleanup(&dec->in);
    qr_buf_cleanup(&dec->data);
    qr_buf_cleanup(&dec->context);
    qr_toolcalls_cleanup(&dec->tc);
    free(dec);
}

/* An "error" key that counts (openai-node: any truthy value). */
static bool truthy(yyjson_val *v)
{
    if (!v || yyjson_is_null(v) || (yyjson_is_bool(v) && !yyjson_get_bool(v)))
        return false;
    return !(yyjson_is_str(v) && yyjson_get_len(v) == 0);
}

/* One parse block per thread, shared by every decoder: a chunk's document lives only inside
 * handle_json, so streams waiting for their next chunk hold no block of their own. A nested
 * parse (an event callback that decodes another answer) finds it busy and uses malloc. */
static _Thread_local _Alignas(16) char dec_pool[QR_DEC_POOL_BYTES];
static _Thread_local bool dec_pool_busy;

/* Parse one chunk; small ones (every token of a stream) into the shared block (*pooled set). */
static yyjson_doc *read_chunk(const char *p, size_t n, bool *pooled)
{
    yyjson_read_err rerr;
    yyjson_alc alc;
    *pooled = false;
    if (!dec_pool_busy && yyjson_read_max_memory_usage(n, QR_DEC_READ_FLAGS) <= QR_DEC_POOL_BYTES &&
        yyjson_alc_pool_init(&alc, dec_pool, QR_DEC_POOL_BYTES)) {
        yyjson_doc *doc = yyjson_read_opts((char *) p, n, QR_DEC_READ_FLAGS, &alc, &rerr);
        if (doc || rerr.code != YYJSON_READ_ERROR_MEMORY_ALLOCATION) {
            *pooled = doc != NULL;
            dec_pool_busy = *pooled;
            return doc;
        }
    }
    return yyjson_read_opts((char *) p, n, QR_DEC_READ_FLAGS, NULL, &rerr);
}

static enum qr_err handle_json(struct qr_upstream_dec *dec, const char *p, size_t n)
{
    bool pooled;
    yyjson_doc *doc = read_chunk(p, n, &pooled);
    if (!doc)
        return fail_text(dec, "upstream sent malformed JSON");
    yyjson_val *root = yyjson_doc_get_root(doc);
    enum qr_err err;
    if (!yyjson_is_obj(root))
        err = fail_text(dec, "upstream sent a chunk that is not a JSON object");
    else if (dec->event_error || truthy(yyjson_obj_get(root, "error")))
        err = qr_dec_fail_payload(dec, root);
    else if (dec->d->proto == QR_UP_OPENAI)
        err = qr_openai_dec_chunk(dec, root);
    else
        err = qr_ollama_dec_chunk(dec, root);
    yyjson_doc_free(doc);
    if (pooled)
        dec_pool_busy = false;
    if (err == QR_ERR_TOO_LARGE || err == QR_ERR_NOMEM)
        return fail_text(dec, "upstream tool call too large");
    return dec->fn_err;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* SSE: an event is complete (blank line or end of stream). */
static enum qr_err sse_dispatch(struct qr_upstream_dec *dec)
{
    bool any = dec->data_any, evr = dec->event_error;
    dec->data_any = false;
    if (!any) {
        dec->event_error = false;
        if (evr)
            return fail_text(dec, "upstream reported an error");
        return QR_OK;
    }
    const char *p = dec->data.ptr ? dec->data.ptr : "";
    size_t n = dec->data.len;
    while (n && is_ws(*p))
        p++, n--;
    while (n && is_ws(p[n - 1]))
        n--;
    enum qr_err err;
    if (n == 6 && memcmp(p, "[DONE]", 6) == 0) {
        dec->done_marker = true;
        if (evr)
            err = fail_text(dec, "upstream reported an error");
        else if (dec->finish_seen)
            err = qr_dec_done(dec);
        else if (dec->output_seen) /* MLX and friends: [DONE] is the finish (quirk 39) */
            err = qr_dec_done(dec);
        else
            err = fail_text(dec, "upstream ended the stream without an answer");
    } else if (n == 0) {
        err = QR_OK;
    } else {
        err = handle_json(dec, p, n);
    }
    dec->event_error = false;
    if (dec->data.ptr)
        dec->data.len = 0, dec->data.ptr[0] = '\0';
    return err;
}

static enum qr_err sse_line(struct qr_upstream_dec *dec, struct qr_slice line)
{
    struct qr_sse_field f;
    qr_sse_field_parse(line, &f);
    switch (f.kind) {
    case QR_SSE_BLANK:
        return sse_dispatch(dec);
    case QR_SSE_COMMENT:
        return QR_OK;
    case QR_SSE_FIELD:
        break;
    }
    if (qr_slice_eq(f.name, "event")) {
        dec->event_error = qr_slice_eq(f.value, "error");
        return QR_OK;
    }
    if (!qr_slice_eq(f.name, "data"))
        return QR_OK;
    enum qr_err err = QR_OK;
    if (dec->data_any)
        err = qr_buf_append(&dec->data, "\n", 1);
    if (!err)
        err = qr_buf_append(&dec->data, f.value.ptr, f.value.len);
    dec->data_any = true;
    if (err)
        return fail_text(dec, "upstream event too large");
    return QR_OK;
}

static enum qr_err ndjson_line(struct qr_upstream_dec *dec, struct qr_slice line)
{
    const char *p = line.ptr;
    size_t n = line.len;
    while (n && is_ws(*p))
        p++, n--;
    if (n == 0 || dec->done_marker)
        return QR_OK;
    return handle_json(dec, p, n);
}

static enum qr_err on_line(struct qr_upstream_dec *dec, struct qr_slice line)
{
    return dec->mode == QR_DEC_SSE ? sse_line(dec, line) : ndjson_line(dec, line);
}

/* Lines from buf; returns bytes consumed (the rest is a partial line), or SIZE_MAX after an
 * ERROR (too long) or when the consumer stopped. */
static size_t scan_lines(struct qr_upstream_dec *dec, const char *buf, size_t len, bool final)
{
    size_t pos = 0;
    bool cr = dec->mode == QR_DEC_SSE;
    while (!dec->terminal) {
        struct qr_slice line;
        size_t used;
        enum qr_line_status st =
            qr_line_next(buf + pos, len - pos, max_event(dec), cr, final, &line, &used);
        if (st == QR_LINE_NEED_MORE)
            return pos;
        if (st == QR_LINE_TOO_LONG) {
            fail_text(dec, "upstream event too large");
            return SIZE_MAX;
        }
        pos += used;
        on_line(dec, line);
    }
    return SIZE_MAX;
}

static enum qr_err feed_lines(struct qr_upstream_dec *dec, const char *p, size_t n)
{
    while (n && !dec->terminal) {
        if (dec->in.len == 0) {
            size_t used = scan_lines(dec, p, n, false);
            if (used == SIZE_MAX)
                break;
            if (used < n && qr_buf_append(&dec->in, p + used, n - used))
                return fail_text(dec, "upstream event too large");
            break;
        }
        if (dec->mode == QR_DEC_SSE && dec->in.ptr[dec->in.len - 1] == '\r') {
            /* The held line ended in "\r": the next byte decides whether it was "\r\n". */
            if (*p == '\n') {
                if (qr_buf_append(&dec->in, "\n", 1))
                    return fail_text(dec, "upstream event too large");
                p++;
                n--;
            }
            if (scan_lines(dec, dec->in.ptr, dec->in.len, true) == SIZE_MAX)
                break;
            dec->in.len = 0;
            continue;
        }
        /* Complete the held partial line with bytes up to and including the next terminator
         * ("\n"; for SSE also "\r" and "\r\n"), so the held bytes stay one line. */
        size_t take = 0;
        while (take < n && p[take] != '\n' && !(dec->mode == QR_DEC_SSE && p[take] == '\r'))
            take++;
        if (take < n)
            take += take + 1 < n && p[take] == '\r' && p[take + 1] == '\n' ? 2 : 1;
        if (qr_buf_append(&dec->in, p, take))
            return fail_text(dec, "upstream event too large");
        p += take;
        n -= take;
        size_t used = scan_lines(dec, dec->in.ptr, dec->in.len, false);
        if (used == SIZE_MAX)
            break;
        memmove(dec->in.ptr, dec->in.ptr + used, dec->in.len - used);
        dec->in.len -= used;
        dec->in.ptr[dec->in.len] = '\0';
    }
    return dec->fn_err;
}

enum qr_err qr_upstream_dec_feed(struct qr_upstream_dec *dec, const char *p, size_t n,
                                 qr_event_fn fn, void *arg)
{
    dec->fn = fn;
    dec->arg = arg;
    if (dec->terminal || n == 0)
        return dec->fn_err;
    switch (dec->mode) {
    case QR_DEC_SSE:
    case QR_DEC_LINES:
        return feed_lines(dec, p, n);
    case QR_DEC_WHOLE:
        if (qr_buf_append(&dec->in, p, n))
            return fail_text(dec, "upstream body too large");
        return QR_OK;
    case QR_DEC_ERRBODY:
        if (dec->in_truncated)
            return QR_OK;
        if (n > dec->in_max - dec->in.len) {
            n = dec->in_max - dec->in.len;
            dec->in_truncated = true;
        }
        if (n && qr_buf_append(&dec->in, p, n))
            dec->in_truncated = true;
        return QR_OK;
    }
    return QR_OK;
}

static enum qr_err finish_whole(struct qr_upstream_dec *dec)
{
    yyjson_read_err rerr;
    const char *p = dec->in.ptr ? dec->in.ptr : "";
    yyjson_doc *doc = yyjson_read_opts((char *) p, dec->in.len, QR_DEC_READ_FLAGS, NULL, &rerr);
    if (!doc)
        return fail_text(dec, dec->in.len ? "upstream sent malformed JSON"
                                          : "upstream answered with an empty body");
    yyjson_val *root = yyjson_doc_get_root(doc);
    enum qr_err err;
    if (!yyjson_is_obj(root))
        err = fail_text(dec, "upstream answer is not a JSON object");
    else if (truthy(yyjson_obj_get(root, "error")))
        err = qr_dec_fail_payload(dec, root);
    else if (dec->d->proto == QR_UP_OPENAI)
        err = qr_openai_dec_body(dec, root);
    else
        err = qr_ollama_dec_body(dec, root);
    yyjson_doc_free(doc);
    if (err == QR_ERR_TOO_LARGE || err == QR_ERR_NOMEM)
        return fail_text(dec, "upstream tool call too large");
    if (dec->terminal)
        return dec->fn_err;
    if (!dec->finish_seen)
        qr_dec_set_finish(dec, QR_FINISH_STOP, (struct qr_slice){"", 0});
    return qr_dec_done(dec);
}

static bool mentions_missing_model(struct qr_slice m)
{
    char low[MAX_ERROR_MSG + 1];
    size_t n = m.len < MAX_ERROR_MSG ? m.len : MAX_ERROR_MSG;
    for (size_t i = 0; i < n; i++) {
        char c = m.ptr[i];
        low[i] = c >= 'A' && c <= 'Z' ? (char) (c + 32) : c == '\0' ? ' ' : c;
    }
    low[n] = '\0';
    return strstr(low, "model") &&
           (strstr(low, "not found") || strstr(low, "does not exist") || strstr(low, "no such"));
}

/* A non-2xx answer: one ERROR with the status mapped for the client. */
static enum qr_err finish_errbody(struct qr_upstream_dec *dec)
{
    const char *p = dec->in.ptr ? dec->in.ptr : "";
    size_t n = dec->in.len;
    yyjson_doc *doc = yyjson_read_opts((char *) p, n, 0, NULL, NULL);
    struct qr_slice m = doc ? qr_dec_error_message(yyjson_doc_get_root(doc)) : (struct qr_slice){0};
    if (!doc) {
        while (n && is_ws(*p))
            p++, n--;
        while (n && is_ws(p[n - 1]))
            n--;
        m = (struct qr_slice){p, n};
    }
    int st = dec->status, out;
    const char *code;
    bool retry = false;
    if (st == 400 || st == 413 || st == 422) {
        out = 400;
        code = "upstream_rejected";
    } else if (st == 404 && mentions_missing_model(m)) {
        out = 404;
        code = "model_not_found";
    } else if (st == 429 || st == 503) {
        out = 503;
        code = "upstream_unavailable";
        retry = true;
    } else {
        out = 502;
        code = "upstream_error";
    }
    char msg[MAX_ERROR_MSG + 64];
    if (out == 400 || out == 404) {
        if (m.len == 0)
            snprintf(msg, sizeof(msg), "upstream answered HTTP %d", st);
        else
            snprintf(msg, sizeof(msg), "%.*s",
                     (int) (m.len < MAX_ERROR_MSG ? m.len : MAX_ERROR_MSG), m.ptr);
    } else {
        snprintf(msg, sizeof(msg), "upstream answered HTTP %d%s%.*s", st, m.len ? ": " : "",
                 (int) (m.len < MAX_ERROR_MSG ? m.len : MAX_ERROR_MSG), m.ptr ? m.ptr : "");
    }
    enum qr_err err = qr_dec_fail(dec, out, code, retry, qr_slice_str(msg));
    yyjson_doc_free(doc);
    return err;
}

/* Clean end of a stream: the last unterminated line and event, then DONE or ERROR. */
static enum qr_err finish_stream(struct qr_upstream_dec *dec)
{
    if (dec->in.len && scan_lines(dec, dec->in.ptr, dec->in.len, true) == SIZE_MAX)
        return dec->fn_err;
    dec->in.len = 0;
    if (dec->mode == QR_DEC_SSE && !dec->terminal && (dec->data_any || dec->event_error))
        sse_dispatch(dec);
    if (dec->terminal)
        return dec->fn_err;
    if (dec->finish_seen)
        return qr_dec_done(dec);
    return fail_text(dec, "upstream ended the stream without finishing");
}

enum qr_err qr_upstream_dec_finish(struct qr_upstream_dec *dec, enum qr_err transport,
                                   qr_event_fn fn, void *arg)
{
    dec->fn = fn;
    dec->arg = arg;
    if (dec->terminal)
        return dec->fn_err;
    if (transport == QR_ERR_CANCELLED) {
        qr_dec_set_finish(dec, QR_FINISH_CANCELLED, (struct qr_slice){"", 0});
        return qr_dec_done(dec);
    }
    if (dec->mode == QR_DEC_ERRBODY)
        return finish_errbody(dec);
    if (transport != QR_OK) {
        bool streaming = dec->mode == QR_DEC_SSE || dec->mode == QR_DEC_LINES;
        if (streaming && dec->finish_seen) /* only a trailing usage chunk or [DONE] was lost */
            return qr_dec_done(dec);
        char msg[160];
        bool timeout = qr_err_is_upstream_timeout(transport);
        snprintf(msg, sizeof(msg), "%s (%s)",
                 timeout ? "upstream timed out before finishing"
                         : "upstream connection failed before finishing",
                 qr_err_str(transport));
        /* each timeout phase keeps its own code (qr_err_str), in-stream as before the answer */
        return qr_dec_fail(dec, timeout ? 504 : 502,
                           timeout ? qr_err_str(transport) : "upstream_error", !dec->output_seen,
                           qr_slice_str(msg));
    }
    if (dec->mode == QR_DEC_WHOLE)
        return finish_whole(dec);
    return finish_stream(dec);
}
