/* Inline reasoning tags split out of a content stream. Outside the tag pair bytes are CONTENT,
 * inside they are REASONING, and the tags themselves are never emitted. Only the tag that can end
 * the current mode is recognised: outside, the opening tag (a second one after a close enters
 * reasoning again, because models do reopen); inside, the closing tag (a nested opening tag is
 * reasoning text, and a stray closing tag outside is content). The held bytes are always a proper
 * prefix of the current mode's tag, so they are equal to that tag's first n_held bytes: when later
 * bytes show they are not a tag, they are emitted from the tag string itself and re-scanned from
 * their second byte, which keeps the state to the fixed buffer and makes a split at any byte give
 * the same result. Output is coalesced: runs that are adjacent in memory and of the same kind go
 * out as one event, so one feed call gives one event per run rather than one per byte; empty runs
 * are never emitted. With strip_leading_ws, whitespace between a closing tag and the first
 * content byte after it is dropped (every close, not only the first). */
#include "stream/think.h"

#include <string.h>

/* The run being gathered for the consumer, and the first error it returned. */
struct emitter {
    struct qr_think_split *s;
    qr_event_fn fn;
    void *arg;
    enum qr_event_type type;
    const char *ptr;
    size_t len;
    enum qr_err err;
};

static void flush_run(struct emitter *e)
{
    if (e->len == 0 || e->err)
        return;
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = e->type;
    ev.text = (struct qr_slice){e->ptr, e->len};
    e->err = e->fn(e->arg, &ev);
    e->len = 0;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Text of the current mode. p must stay valid until the feed call returns. */
static void emit_text(struct emitter *e, const char *p, size_t n)
{
    struct qr_think_split *s = e->s;
    enum qr_event_type type = s->inside ? QR_EV_REASONING : QR_EV_CONTENT;
    if (type == QR_EV_CONTENT && s->eating_ws) {
        while (n && is_ws(*p)) {
            p++;
            n--;
        }
        if (n == 0)
            return;
        s->eating_ws = false;
    }
    if (n == 0 || e->err)
        return;
    if (e->len && e->type == type && e->ptr + e->len == p) {
        e->len += n;
        return;
    }
    flush_run(e);
    e->type = type;
    e->ptr = p;
    e->len = n;
}

static const char *cur_tag(const struct qr_think_split *s, size_t *len)
{
    *len = s->inside ? s->close_len : s->open_len;
    return s->inside ? s->close : s->open;
}

static void switch_mode(struct qr_think_split *s)
{
    if (s->inside) {
        s->inside = false;
        s->eating_ws = s->strip_leading_ws;
    } else {
        s->inside = true;
        s->seen_open = true;
        s->eating_ws = false;
    }
}

/* Scan p[0..n) with nothing held; a tag prefix that ends the segment is held for later bytes. */
static void scan(struct emitter *e, const char *p, size_t n)
{
    struct qr_think_split *s = e->s;
    size_t i = 0, run = 0;
    while (i < n && !e->err) {
        size_t tlen;
        const char *tag = cur_tag(s, &tlen);
        const char *q = memchr(p + i, tag[0], n - i);
        if (!q)
            break;
        size_t j = (size_t) (q - p), avail = n - j;
        if (avail >= tlen && memcmp(q, tag, tlen) == 0) {
            emit_text(e, p + run, j - run);
            switch_mode(s);
            i = run = j + tlen;
            continue;
        }
        if (avail < tlen && memcmp(q, tag, avail) == 0) {
            emit_text(e, p + run, j - run);
            memcpy(s->held, q, avail);
            s->n_held = avail;
            return;
        }
        i = j + 1;
    }
    emit_text(e, p + run, n - run);
}

enum qr_err qr_think_init(struct qr_think_split *s, const char *open, const char *close,
                          bool start_inside)
{
    memset(s, 0, sizeof(*s));
    if (!open || !close)
        return QR_ERR_INVALID;
    size_t ol = strlen(open), cl = strlen(close);
    if (ol == 0 || ol > QR_THINK_TAG_MAX || cl == 0 || cl > QR_THINK_TAG_MAX)
        return QR_ERR_INVALID;
    memcpy(s->open, open, ol + 1);
    memcpy(s->close, close, cl + 1);
    s->open_len = ol;
    s->close_len = cl;
    s->inside = start_inside;
    s->seen_open = start_inside;
    s->strip_leading_ws = true;
    return QR_OK;
}

enum qr_err qr_think_feed(struct qr_think_split *s, const char *p, size_t n, qr_event_fn fn,
                          void *arg)
{
    struct emitter e = {.s = s, .fn = fn, .arg = arg};
    while (n && !e.err) {
        if (s->n_held == 0) {
            scan(&e, p, n);
            break;
        }
        /* Resolve the held prefix against the new bytes. */
        size_t tlen;
        const char *tag = cur_tag(s, &tlen);
        size_t need = tlen - s->n_held, take = n < need ? n : need, k = 0;
        while (k < take && p[k] == tag[s->n_held + k])
            k++;
        if (k == take) {
            if (take == need) {
                s->n_held = 0;
                switch_mode(s);
            } else {
                memcpy(s->held + s->n_held, p, take);
                s->n_held += take;
            }
            p += take;
            n -= take;
            continue;
        }
        /* Not this tag: its first byte is text, the rest may still begin a tag. */
        size_t held = s->n_held;
        s->n_held = 0;
        emit_text(&e, tag, 1);
        scan(&e, tag + 1, held - 1);
    }
    flush_run(&e);
    return e.err;
}

enum qr_err qr_think_flush(struct qr_think_split *s, qr_event_fn fn, void *arg)
{
    struct emitter e = {.s = s, .fn = fn, .arg = arg};
    size_t tlen;
    const char *tag = cur_tag(s, &tlen);
    size_t held = s->n_held;
    s->n_held = 0;
    emit_text(&e, tag, held);
    flush_run(&e);
    return e.err;
}
