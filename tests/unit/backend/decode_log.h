/* Test helper for the upstream decoders: run a body through qr_upstream_dec_* in a given
 * chunking, serialize every event into a text log (one line per event, bytes escaped), and check
 * the order contract on the way with qr_answer_add. Replaying the same body split at every byte
 * boundary and one byte at a time must give the identical log. Header-only, static. */
#ifndef QR_TEST_DECODE_LOG_H
#define QR_TEST_DECODE_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec.h"
#include "contract/event.h"

struct dlog {
    struct qr_buf log;
    struct qr_answer ans;
    enum qr_err contract; /* first qr_answer_add failure */
    int finals;           /* DONE + ERROR events */
    bool synth_ids;       /* replace synthesized call ids ("call_" + 24 hex) by "call_SYNTH" */
};

static void dlog_bytes(struct qr_buf *b, struct qr_slice s)
{
    qr_buf_append(b, "\"", 1);
    for (size_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char) s.ptr[i];
        if (c == '\n')
            qr_buf_puts(b, "\\n");
        else if (c == '"' || c == '\\')
            qr_buf_appendf(b, "\\%c", c);
        else if (c < 0x20)
            qr_buf_appendf(b, "\\x%02x", c);
        else
            qr_buf_append(b, &s.ptr[i], 1);
    }
    qr_buf_append(b, "\"", 1);
}

static bool dlog_is_synth(struct qr_slice id)
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

static enum qr_err dlog_fn(void *arg, const struct qr_event *ev)
{
    struct dlog *l = arg;
    struct qr_buf *b = &l->log;
    static const char *names[] = {"START",     "CONTENT",  "REASONING", "TOOL_BEGIN",
                                  "TOOL_ARGS", "TOOL_END", "USAGE",     "DONE",
                                  "ERROR",     "META",     "EMBEDDING", "RERANK"};
    qr_buf_puts(b, names[ev->type]);
    switch (ev->type) {
    case QR_EV_START:
        qr_buf_puts(b, " model=");
        dlog_bytes(b, ev->model);
        break;
    case QR_EV_CONTENT:
    case QR_EV_REASONING:
        qr_buf_puts(b, " ");
        dlog_bytes(b, ev->text);
        break;
    case QR_EV_TOOL_BEGIN:
        qr_buf_appendf(b, " %u id=", ev->index);
        if (l->synth_ids && dlog_is_synth(ev->id))
            qr_buf_puts(b, "SYNTH");
        else
            dlog_bytes(b, ev->id);
        qr_buf_puts(b, " name=");
        dlog_bytes(b, ev->name);
        break;
    case QR_EV_TOOL_ARGS:
        qr_buf_appendf(b, " %u ", ev->index);
        dlog_bytes(b, ev->text);
        break;
    case QR_EV_TOOL_END:
        qr_buf_appendf(b, " %u", ev->index);
        break;
    case QR_EV_USAGE:
        qr_buf_appendf(b,
                       " p=%lld c=%lld cached=%lld r=%lld total=%lld load=%lld pns=%lld ens=%lld",
                       (long long) ev->usage.prompt_tokens, (long long) ev->usage.completion_tokens,
                       (long long) ev->usage.cached_tokens, (long long) ev->usage.reasoning_tokens,
                       (long long) ev->usage.total_ns, (long long) ev->usage.load_ns,
                       (long long) ev->usage.prompt_ns, (long long) ev->usage.eval_ns);
        break;
    case QR_EV_DONE:
        qr_buf_appendf(b, " %s raw=", qr_finish_str(ev->finish));
        dlog_bytes(b, ev->raw_finish);
        l->finals++;
        break;
    case QR_EV_ERROR:
        qr_buf_appendf(b, " %d %.*s%s ", ev->status, (int) ev->code.len, ev->code.ptr,
                       ev->retryable ? " retry" : "");
        dlog_bytes(b, ev->message);
        l->finals++;
        break;
    case QR_EV_META:
        qr_buf_puts(b, " id=");
        dlog_bytes(b, ev->id);
        qr_buf_appendf(b, " slot=%lld", (long long) ev->slot_id);
        break;
    case QR_EV_EMBEDDING:
        qr_buf_appendf(b, " %u [", ev->index);
        for (size_t i = 0; i < ev->dims; i++)
            qr_buf_appendf(b, "%s%g", i ? "," : "", (double) ev->vec[i]);
        qr_buf_puts(b, "]");
        break;
    case QR_EV_RERANK:
        qr_buf_appendf(b, " %u %.17g", ev->index, ev->score);
        break;
    }
    qr_buf_puts(b, "\n");
    enum qr_err err = qr_answer_add(&l->ans, ev);
    if (err && !l->contract)
        l->contract = err;
    return QR_OK;
}

static void dlog_init(struct dlog *l)
{
    memset(l, 0, sizeof(*l));
    qr_buf_init(&l->log, 0);
    qr_buf_puts(&l->log, "");
    qr_answer_init(&l->ans, 0);
    l->synth_ids = true;
}

static void dlog_cleanup(struct dlog *l)
{
    qr_buf_cleanup(&l->log);
    qr_answer_cleanup(&l->ans);
}

/* Decode body cut at the given offsets (ascending), then finish with transport. */
static void dlog_run(struct dlog *l, const struct qr_dialect *d, const struct qr_request *req,
                     int status, const char *ctype, const char *body, size_t len,
                     const size_t *cuts, size_t n_cuts, enum qr_err transport)
{
    struct qr_upstream_dec *dec = NULL;
    assert_int_equal(qr_upstream_dec_new(d, req, status, qr_slice_str(ctype), &dec), QR_OK);
    size_t pos = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        if (end > pos)
            assert_int_equal(qr_upstream_dec_feed(dec, body + pos, end - pos, dlog_fn, l), QR_OK);
        pos = end;
    }
    assert_int_equal(qr_upstream_dec_finish(dec, transport, dlog_fn, l), QR_OK);
    qr_upstream_dec_free(dec);
}

/* Decode in one piece, check the contract and exactly one final event, then check that every
 * two-piece split and one byte at a time give the same log. Returns the log (caller frees) and
 * fills *ans_out when not NULL (caller cleans up). */
static char *dlog_check_splits(const struct qr_dialect *d, const struct qr_request *req, int status,
                               const char *ctype, const char *body, enum qr_err transport,
                               struct qr_answer *ans_out)
{
    size_t len = strlen(body);
    struct dlog ref;
    dlog_init(&ref);
    dlog_run(&ref, d, req, status, ctype, body, len, NULL, 0, transport);
    if (ref.contract)
        fprintf(stderr, "contract violation %d in:\n%s", ref.contract, ref.log.ptr);
    assert_int_equal(ref.contract, QR_OK);
    assert_int_equal(ref.finals, 1);
    for (size_t cut = 1; cut < len; cut++) {
        struct dlog l;
        dlog_init(&l);
        dlog_run(&l, d, req, status, ctype, body, len, &cut, 1, transport);
        if (strcmp(l.log.ptr, ref.log.ptr) != 0)
            fprintf(stderr, "split at %zu differs:\n%s\n--- vs whole ---\n%s", cut, l.log.ptr,
                    ref.log.ptr);
        assert_string_equal(l.log.ptr, ref.log.ptr);
        assert_int_equal(l.contract, QR_OK);
        dlog_cleanup(&l);
    }
    size_t *cuts = malloc((len + 1) * sizeof(*cuts));
    for (size_t i = 0; i + 1 < len; i++)
        cuts[i] = i + 1;
    struct dlog one;
    dlog_init(&one);
    dlog_run(&one, d, req, status, ctype, body, len, cuts, len ? len - 1 : 0, transport);
    free(cuts);
    assert_string_equal(one.log.ptr, ref.log.ptr);
    dlog_cleanup(&one);
    char *out = qr_buf_take(&ref.log, NULL);
    if (ans_out)
        *ans_out = ref.ans;
    else
        qr_answer_cleanup(&ref.ans);
    return out;
}

#endif
