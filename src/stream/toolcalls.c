/* Tool-call assembly for the upstream decoders (see toolcalls.h for the rules). The state is
 * one small record per call: the upstream index it answers to, the id and name once known, and
 * the argument bytes held until the name arrives. Indices are handed out at TOOL_BEGIN, so the
 * events satisfy the order contract of contract/event.h by construction. */
#include "stream/toolcalls.h"

#include <stdlib.h>
#include <string.h>

void qr_toolcalls_init(struct qr_toolcalls *t, size_t max_calls, size_t max_bytes)
{
    memset(t, 0, sizeof(*t));
    t->max_calls = max_calls ? max_calls : 1024;
    t->max_bytes = max_bytes ? max_bytes : (size_t) 16 << 20;
}

void qr_toolcalls_cleanup(struct qr_toolcalls *t)
{
    for (size_t i = 0; i < t->n; i++) {
        qr_buf_cleanup(&t->calls[i].id);
        qr_buf_cleanup(&t->calls[i].name);
        qr_buf_cleanup(&t->calls[i].pending);
    }
    free(t->calls);
    qr_toolcalls_init(t, t->max_calls, t->max_bytes);
}

static enum qr_err call_new(struct qr_toolcalls *t, int64_t key, struct qr_tc_call **out)
{
    if (t->n >= t->max_calls)
        return QR_ERR_TOO_LARGE;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        struct qr_tc_call *p = realloc(t->calls, cap * sizeof(*p));
        if (!p)
            return QR_ERR_NOMEM;
        t->calls = p;
        t->cap = cap;
    }
    struct qr_tc_call *c = &t->calls[t->n++];
    memset(c, 0, sizeof(*c));
    c->key = key;
    qr_buf_init(&c->id, t->max_bytes + 32); /* room for a synthesized id */
    qr_buf_init(&c->name, t->max_bytes);
    qr_buf_init(&c->pending, t->max_bytes);
    *out = c;
    return QR_OK;
}

static enum qr_err emit(qr_event_fn fn, void *arg, enum qr_event_type type, uint32_t index,
                        struct qr_slice text)
{
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.index = index;
    ev.text = text;
    return fn(arg, &ev);
}

/* TOOL_BEGIN with the next runtime index, then the held arguments. */
static enum qr_err call_begin(struct qr_toolcalls *t, struct qr_tc_call *c, qr_event_fn fn,
                              void *arg)
{
    enum qr_err err;
    if (c->id.len == 0) {
        char id[32];
        qr_tool_id_make(id, sizeof(id));
        if ((err = qr_buf_puts(&c->id, id)))
            return err;
    }
    c->begun = true;
    c->index = t->n_begun++;
    struct qr_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_TOOL_BEGIN;
    ev.index = c->index;
    ev.id = (struct qr_slice){c->id.ptr, c->id.len};
    ev.name = (struct qr_slice){c->name.ptr ? c->name.ptr : "", c->name.len};
    if ((err = fn(arg, &ev)))
        return err;
    if (c->pending.len) {
        err = emit(fn, arg, QR_EV_TOOL_ARGS, c->index,
                   (struct qr_slice){c->pending.ptr, c->pending.len});
        qr_buf_cleanup(&c->pending);
    }
    return err;
}

/* Track brackets and strings of the argument text (not a validator: enough to see a cut). */
static void scan_args(struct qr_tc_call *c, struct qr_slice s)
{
    for (size_t i = 0; i < s.len; i++) {
        char ch = s.ptr[i];
        if (c->in_str) {
            if (c->esc)
                c->esc = false;
            else if (ch == '\\')
                c->esc = true;
            else if (ch == '"')
                c->in_str = false;
        } else if (ch == '"') {
            c->in_str = true;
        } else if (ch == '{' || ch == '[') {
            c->depth++;
        } else if (ch == '}' || ch == ']') {
            if (c->depth == 0)
                c->unbalanced = true;
            else
                c->depth--;
        }
    }
}

bool qr_toolcalls_complete(const struct qr_toolcalls *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const struct qr_tc_call *c = &t->calls[i];
        if (c->has_args && (c->depth || c->in_str || c->unbalanced))
            return false;
    }
    return true;
}

static enum qr_err call_args(struct qr_tc_call *c, struct qr_slice args, qr_event_fn fn, void *arg)
{
    if (args.len == 0)
        return QR_OK;
    c->has_args = true;
    scan_args(c, args);
    if (c->begun)
        return emit(fn, arg, QR_EV_TOOL_ARGS, c->index, args);
    return qr_buf_append(&c->pending, args.ptr, args.len);
}

/* The call a delta belongs to, or NULL when it starts a new one. */
static struct qr_tc_call *find_call(struct qr_toolcalls *t, int64_t key, struct qr_slice id,
                                    struct qr_slice name)
{
    if (t->n == 0)
        return NULL;
    struct qr_tc_call *c = NULL;
    if (key < 0) {
        if (id.len || name.len)
            return NULL;
        c = &t->calls[t->n - 1];
    } else {
        for (size_t i = t->n; i-- > 0;) {
            if (t->calls[i].key == key) {
                c = &t->calls[i];
                break;
            }
        }
    }
    if (!c || c->ended)
        return NULL;
    if (id.len && c->upstream_id && (c->id.len != id.len || memcmp(c->id.ptr, id.ptr, id.len) != 0))
        return NULL;
    return c;
}

enum qr_err qr_toolcalls_delta(struct qr_toolcalls *t, int64_t key, struct qr_slice id,
                               struct qr_slice name, struct qr_slice args, qr_event_fn fn,
                               void *arg)
{
    enum qr_err err;
    struct qr_tc_call *c = find_call(t, key, id, name);
    if (!c && (err = call_new(t, key < 0 ? -1 : key, &c)))
        return err;
    if (!c->begun) {
        if (id.len && !c->upstream_id) {
            if ((err = qr_buf_append(&c->id, id.ptr, id.len)))
                return err;
            c->upstream_id = true;
        }
        if (name.len && c->name.len == 0 && (err = qr_buf_append(&c->name, name.ptr, name.len)))
            return err;
        if (c->name.len && (err = call_begin(t, c, fn, arg)))
            return err;
    }
    return call_args(c, args, fn, arg);
}

enum qr_err qr_toolcalls_whole(struct qr_toolcalls *t, struct qr_slice id, struct qr_slice name,
                               struct qr_slice args, qr_event_fn fn, void *arg)
{
    struct qr_tc_call *c;
    enum qr_err err = call_new(t, -1, &c);
    if (err)
        return err;
    if (id.len) {
        if ((err = qr_buf_append(&c->id, id.ptr, id.len)))
            return err;
        c->upstream_id = true;
    }
    if (name.len && (err = qr_buf_append(&c->name, name.ptr, name.len)))
        return err;
    if ((err = call_begin(t, c, fn, arg)) || (err = call_args(c, args, fn, arg)))
        return err;
    c->ended = true;
    return emit(fn, arg, QR_EV_TOOL_END, c->index, (struct qr_slice){"", 0});
}

enum qr_err qr_toolcalls_finish(struct qr_toolcalls *t, qr_event_fn fn, void *arg)
{
    enum qr_err err;
    for (size_t i = 0; i < t->n; i++) {
        if (!t->calls[i].begun && (err = call_begin(t, &t->calls[i], fn, arg)))
            return err;
    }
    /* Runtime indices follow TOOL_BEGIN order; end in that order. */
    for (uint32_t idx = 0; idx < t->n_begun; idx++) {
        for (size_t i = 0; i < t->n; i++) {
            struct qr_tc_call *c = &t->calls[i];
            if (c->index != idx || !c->begun || c->ended)
                continue;
            c->ended = true;
            if ((err = emit(fn, arg, QR_EV_TOOL_END, idx, (struct qr_slice){"", 0})))
                return err;
        }
    }
    return QR_OK;
}
