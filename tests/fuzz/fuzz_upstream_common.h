/* Shared body of fuzz_upstream_sse.c and fuzz_upstream_ndjson.c (define PROTO and
 * STREAM_CTYPE before including). See those files for the input layout and the checks. */
#ifndef QR_FUZZ_UPSTREAM_COMMON_H
#define QR_FUZZ_UPSTREAM_COMMON_H

#include <stdbool.h>
#include <stdio.h>

struct flog {
    struct qr_buf log;
    struct qr_answer ans;
    int finals;
    bool broken; /* contract violation or an event after the final one */
};

static bool synth_like(struct qr_slice id)
{
    if (id.len != 29 || memcmp(id.ptr, "call_", 5) != 0)
        return false;
    for (size_t i = 5; i < 29; i++) {
        char c = id.ptr[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
    }
    return true;
}

static void put_slice(struct qr_buf *b, struct qr_slice s)
{
    qr_buf_appendf(b, "%zu:", s.len);
    if (s.len)
        qr_buf_append(b, s.ptr, s.len);
}

static enum qr_err flog_fn(void *arg, const struct qr_event *ev)
{
    struct flog *l = arg;
    struct qr_buf *b = &l->log;
    if (l->finals)
        l->broken = true;
    qr_buf_appendf(b, "%d ", (int) ev->type);
    switch (ev->type) {
    case QR_EV_START:
        put_slice(b, ev->model);
        break;
    case QR_EV_CONTENT:
    case QR_EV_REASONING:
        put_slice(b, ev->text);
        break;
    case QR_EV_TOOL_BEGIN:
        qr_buf_appendf(b, "%u ", ev->index);
        put_slice(b, synth_like(ev->id) ? (struct qr_slice){"S", 1} : ev->id);
        put_slice(b, ev->name);
        break;
    case QR_EV_TOOL_ARGS:
        qr_buf_appendf(b, "%u ", ev->index);
        put_slice(b, ev->text);
        break;
    case QR_EV_TOOL_END:
        qr_buf_appendf(b, "%u", ev->index);
        break;
    case QR_EV_USAGE:
        qr_buf_appendf(b, "%lld %lld %lld %lld %lld %lld %lld %lld",
                       (long long) ev->usage.prompt_tokens, (long long) ev->usage.completion_tokens,
                       (long long) ev->usage.cached_tokens, (long long) ev->usage.reasoning_tokens,
                       (long long) ev->usage.total_ns, (long long) ev->usage.load_ns,
                       (long long) ev->usage.prompt_ns, (long long) ev->usage.eval_ns);
        break;
    case QR_EV_DONE:
        qr_buf_appendf(b, "%d ", (int) ev->finish);
        put_slice(b, ev->raw_finish);
        l->finals++;
        break;
    case QR_EV_ERROR:
        qr_buf_appendf(b, "%d %d ", ev->status, ev->retryable);
        put_slice(b, ev->code);
        put_slice(b, ev->message);
        l->finals++;
        break;
    case QR_EV_META:
        put_slice(b, ev->id);
        qr_buf_appendf(b, " %lld", (long long) ev->slot_id);
        break;
    case QR_EV_EMBEDDING:
        qr_buf_appendf(b, "%u %zu", ev->index, ev->dims);
        if (ev->dims)
            qr_buf_append(b, ev->vec, ev->dims * sizeof(float));
        break;
    case QR_EV_RERANK:
        qr_buf_appendf(b, "%u %.17g", ev->index, ev->score);
        break;
    }
    qr_buf_append(b, "\n", 1);
    enum qr_err err = qr_answer_add(&l->ans, ev);
    if (err == QR_ERR_INTERNAL)
        l->broken = true;
    return QR_OK;
}

/* Decode body with cuts every `step` bytes after `first` (step 0: only at first). */
static void run(struct flog *l, const struct qr_dialect *d, const struct qr_request *req,
                int status, const char *ct, const char *body, size_t len, size_t first, size_t step,
                enum qr_err transport)
{
    memset(l, 0, sizeof(*l));
    qr_buf_init(&l->log, 0);
    qr_answer_init(&l->ans, 0);
    struct qr_upstream_dec *dec;
    if (qr_upstream_dec_new(d, req, status, qr_slice_str(ct), &dec) != QR_OK)
        abort();
    size_t pos = 0, cut = first;
    while (pos < len) {
        size_t end = cut > pos && cut < len ? cut : len;
        qr_upstream_dec_feed(dec, body + pos, end - pos, flog_fn, l);
        pos = end;
        cut = step ? pos + step : len;
    }
    qr_upstream_dec_finish(dec, transport, flog_fn, l);
    qr_upstream_dec_free(dec);
    if (l->broken || l->finals != 1) {
        fprintf(stderr, "%s after:\n%.*s\n", l->broken ? "contract broken" : "not one final event",
                (int) l->log.len, l->log.ptr ? l->log.ptr : "");
        abort();
    }
}

static void flog_cleanup(struct flog *l)
{
    qr_buf_cleanup(&l->log);
    qr_answer_cleanup(&l->ans);
}

static bool same(const struct flog *a, const struct flog *b)
{
    if (a->log.len == b->log.len &&
        (a->log.len == 0 || !memcmp(a->log.ptr, b->log.ptr, a->log.len)))
        return true;
    fprintf(stderr, "event logs differ:\n%.*s\n---- vs ----\n%.*s\n", (int) a->log.len,
            a->log.ptr ? a->log.ptr : "", (int) b->log.len, b->log.ptr ? b->log.ptr : "");
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    uint8_t flags = data[0];
    size_t split = (size_t) data[1] | (size_t) data[2] << 8;
    const char *body = (const char *) data + 3;
    size_t len = size - 3;

    struct qr_dialect d;
    qr_dialect_default(&d, PROTO);
    if (flags & 1) {
        d.think_open = "<think>";
        d.think_close = "</think>";
        d.think_start_inside = flags & 0x80;
    }
    if (flags & 0x10) {
        d.max_event_bytes = 64;
        d.max_body_bytes = 256;
    }
    static const enum qr_err endings[4] = {QR_OK, QR_ERR_UPSTREAM, QR_ERR_UPSTREAM_TIMEOUT,
                                           QR_ERR_CANCELLED};
    enum qr_err transport = endings[(flags >> 2) & 3];
    int status = flags & 0x20 ? 400 + (split % 200) : 200;
    const char *ct = flags & 0x40 ? "application/json" : STREAM_CTYPE;
    struct qr_request req;
    memset(&req, 0, sizeof(req));
    req.op = (flags & 0x42) == 0x42 ? QR_OP_EMBED : QR_OP_CHAT;
    req.stream = (flags & 2) != 0;
    /* a JSON answer to a non-streamed request with an odd split: a rerank of three documents */
    struct qr_slice docs[3] = {{"a", 1}, {"b", 1}, {"c", 1}};
    if ((flags & 0x42) == 0x40 && (split & 1)) {
        req.op = QR_OP_RERANK;
        req.inputs = docs;
        req.n_inputs = 3;
        req.query = (struct qr_slice){"q", 1};
    }

    struct flog whole, two, bytes;
    run(&whole, &d, &req, status, ct, body, len, len, 0, transport);
    run(&two, &d, &req, status, ct, body, len, len ? split % len : 0, 0, transport);
    if (!same(&whole, &two))
        abort();
    if (len <= 4096) {
        run(&bytes, &d, &req, status, ct, body, len, 1, 1, transport);
        if (!same(&whole, &bytes))
            abort();
        flog_cleanup(&bytes);
    }
    flog_cleanup(&whole);
    flog_cleanup(&two);
    return 0;
}

#endif
