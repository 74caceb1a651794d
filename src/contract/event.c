/* The canonical event stream's shared helpers and its aggregate. qr_answer_add is both the way a
 * non-streamed answer is built and the executable form of the order contract in event.h: the
 * first event is START; CONTENT, REASONING, TOOL_*, META, EMBEDDING and RERANK come after it and
 * before USAGE; USAGE comes at most once; then exactly one DONE or ERROR, and nothing after that.
 * A TOOL_BEGIN takes the next index (0, 1, ...) and needs an id; TOOL_ARGS and TOOL_END need a
 * begun call that has not ended; DONE needs every call ended (an ERROR may cut one short). Any
 * violation is QR_ERR_INTERNAL: a decoder bug, never an upstream's fault. Memory is bounded by
 * max_bytes (0 = no cap): content, reasoning, tool arguments, tool ids and names and embedding
 * floats count against it together (held), and the embedding slot table is capped by it too; the
 * one-off strings (model, finish reason, error text, upstream id) are each capped at max_bytes.
 * Rerank scores are kept by document index (each index once, finite); their slot table counts
 * against held like the embedding floats. Checks come before allocation. A failed allocation
 * leaves the buffer it hit empty and held consistent. Tool-call ids come from getrandom(2); only
 * if that fails, from a counter mixed with the clock. */
#include "contract/event.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

const char *qr_finish_str(enum qr_finish f)
{
    switch (f) {
    case QR_FINISH_STOP:
        return "stop";
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
    case QR_FINISH_NONE:
        break;
    }
    return "";
}

void qr_usage_init(struct qr_usage *u)
{
    u->prompt_tokens = -1;
    u->completion_tokens = -1;
    u->cached_tokens = -1;
    u->reasoning_tokens = -1;
    u->total_ns = -1;
    u->load_ns = -1;
    u->prompt_ns = -1;
    u->eval_ns = -1;
}

/* ---- tool-call ids ---- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fallback_bytes(unsigned char *out, size_t n)
{
    static atomic_uint_fast64_t counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = atomic_fetch_add(&counter, 1) ^ ((uint64_t) ts.tv_sec * 1000000000ULL) ^
                    (uint64_t) ts.tv_nsec ^ ((uint64_t) getpid() << 32);
    for (size_t i = 0; i < n; i += 8) {
        uint64_t r = splitmix64(&seed);
        for (size_t k = 0; k < 8 && i + k < n; k++)
            out[i + k] = (unsigned char) (r >> (8 * k));
    }
}

void qr_tool_id_make(char *out, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[12];
    ssize_t got;
    do {
        got = getrandom(rnd, sizeof(rnd), GRND_NONBLOCK);
    } while (got < 0 && errno == EINTR);
    if (got != (ssize_t) sizeof(rnd))
        fallback_bytes(rnd, sizeof(rnd));
    char id[30] = "call_";
    for (size_t i = 0; i < sizeof(rnd); i++) {
        id[5 + 2 * i] = hex[rnd[i] >> 4];
        id[6 + 2 * i] = hex[rnd[i] & 15];
    }
    id[29] = '\0';
    if (cap == 0)
        return;
    size_t n = cap - 1 < 29 ? cap - 1 : 29;
    memcpy(out, id, n);
    out[n] = '\0';
}

/* ---- the aggregate ---- */

void qr_answer_init(struct qr_answer *a, size_t max_bytes)
{
    memset(a, 0, sizeof(*a));
    a->max_bytes = max_bytes ? max_bytes : SIZE_MAX / 2;
    struct qr_buf *bufs[] = {&a->model,      &a->content,       &a->reasoning,   &a->raw_finish,
                             &a->error_code, &a->error_message, &a->upstream_id, &a->context};
    for (size_t i = 0; i < QR_ARRAY_LEN(bufs); i++)
        qr_buf_init(bufs[i], a->max_bytes);
    qr_usage_init(&a->usage);
    a->finish = QR_FINISH_NONE;
    a->slot_id = -1;
}

void qr_answer_cleanup(struct qr_answer *a)
{
    struct qr_buf *bufs[] = {&a->model,      &a->content,       &a->reasoning,   &a->raw_finish,
                             &a->error_code, &a->error_message, &a->upstream_id, &a->context};
    for (size_t i = 0; i < QR_ARRAY_LEN(bufs); i++)
        qr_buf_cleanup(bufs[i]);
    for (size_t i = 0; i < a->n_calls; i++) {
        qr_buf_cleanup(&a->calls[i].id);
        qr_buf_cleanup(&a->calls[i].name);
        qr_buf_cleanup(&a->calls[i].arguments);
    }
    free(a->calls);
    for (size_t i = 0; i < a->n_vectors; i++)
        free(a->vectors[i]);
    free(a->vectors);
    free(a->dims);
    free(a->scores);
    qr_answer_init(a, a->max_bytes);
}

/* Append s to b, counted in held against max_bytes. */
static enum qr_err put_held(struct qr_answer *a, struct qr_buf *b, struct qr_slice s)
{
    if (s.len == 0)
        return QR_OK;
    if (!s.ptr)
        return QR_ERR_INTERNAL;
    if (s.len > a->max_bytes - a->held)
        return QR_ERR_TOO_LARGE;
    size_t before = b->len;
    enum qr_err err = qr_buf_append(b, s.ptr, s.len);
    if (err) {
        a->held -= before; /* the buffer was emptied */
        return err;
    }
    a->held += s.len;
    return QR_OK;
}

/* Replace a one-off string (capped by the buffer's own max). */
static enum qr_err put_once(struct qr_buf *b, struct qr_slice s)
{
    qr_buf_cleanup(b);
    if (s.len == 0)
        return QR_OK;
    if (!s.ptr)
        return QR_ERR_INTERNAL;
    return qr_buf_append(b, s.ptr, s.len);
}

/* Capacity of an array grown by grow_array: 4, then the next power of two. */
static size_t cap_for(size_t n)
{
    size_t c = 4;
    while (c < n)
        c = c > SIZE_MAX / 2 ? n : c * 2;
    return c;
}

/* Make *arr (n elements of sz bytes) hold want elements; new slots are zeroed. */
static enum qr_err grow_array(void **arr, size_t n, size_t want, size_t sz)
{
    size_t have = *arr ? cap_for(n) : 0;
    if (want <= have)
        return QR_OK;
    size_t cap = cap_for(want);
    if (cap > SIZE_MAX / sz)
        return QR_ERR_TOO_LARGE;
    char *p = realloc(*arr, cap * sz);
    if (!p)
        return QR_ERR_NOMEM;
    memset(p + have * sz, 0, (cap - have) * sz);
    *arr = p;
    return QR_OK;
}

static enum qr_err add_tool_begin(struct qr_answer *a, const struct qr_event *ev)
{
    if (ev->index != a->n_calls || ev->id.len == 0)
        return QR_ERR_INTERNAL;
    if (ev->id.len + ev->name.len < ev->id.len ||
        ev->id.len + ev->name.len > a->max_bytes - a->held)
        return QR_ERR_TOO_LARGE;
    void *arr = a->calls;
    enum qr_err err = grow_array(&arr, a->n_calls, a->n_calls + 1, sizeof(*a->calls));
    if (err)
        return err;
    a->calls = arr;
    struct qr_answer_call *c = &a->calls[a->n_calls];
    qr_buf_init(&c->id, a->max_bytes);
    qr_buf_init(&c->name, a->max_bytes);
    qr_buf_init(&c->arguments, a->max_bytes);
    c->ended = false;
    a->n_calls++;
    if ((err = put_held(a, &c->id, ev->id)) || (err = put_held(a, &c->name, ev->name)))
        return err;
    return QR_OK;
}

static enum qr_err add_embedding(struct qr_answer *a, const struct qr_event *ev)
{
    size_t idx = ev->index;
    if (ev->dims && !ev->vec)
        return QR_ERR_INTERNAL;
    if (idx < a->n_vectors && a->vectors[idx])
        return QR_ERR_INTERNAL; /* each index once */
    if (idx >= a->max_bytes / (sizeof(*a->vectors) + sizeof(*a->dims)))
        return QR_ERR_TOO_LARGE;
    if (ev->dims > (a->max_bytes - a->held) / sizeof(float))
        return QR_ERR_TOO_LARGE;
    size_t want = idx + 1 > a->n_vectors ? idx + 1 : a->n_vectors;
    void *v = a->vectors, *d = a->dims;
    enum qr_err err = grow_array(&v, a->n_vectors, want, sizeof(*a->vectors));
    a->vectors = v;
    if (!err)
        err = grow_array(&d, a->n_vectors, want, sizeof(*a->dims));
    a->dims = d;
    if (err)
        return err; /* both arrays keep capacity >= cap_for(n_vectors): still consistent */
    float *copy = malloc(ev->dims ? ev->dims * sizeof(float) : 1);
    if (!copy)
        return QR_ERR_NOMEM;
    if (ev->dims)
        memcpy(copy, ev->vec, ev->dims * sizeof(float));
    a->vectors[idx] = copy;
    a->dims[idx] = ev->dims;
    a->n_vectors = want;
    a->held += ev->dims * sizeof(float);
    return QR_OK;
}

static enum qr_err add_score(struct qr_answer *a, const struct qr_event *ev)
{
    size_t idx = ev->index;
    if (!isfinite(ev->score))
        return QR_ERR_INTERNAL;
    if (idx < a->n_scores && a->scores[idx].set)
        return QR_ERR_INTERNAL; /* each index once */
    size_t want = idx + 1 > a->n_scores ? idx + 1 : a->n_scores;
    size_t grow = (want - a->n_scores) * sizeof(*a->scores);
    if (idx >= a->max_bytes / sizeof(*a->scores) || grow > a->max_bytes - a->held)
        return QR_ERR_TOO_LARGE;
    void *s = a->scores;
    enum qr_err err = grow_array(&s, a->n_scores, want, sizeof(*a->scores));
    a->scores = s;
    if (err)
        return err;
    a->scores[idx].set = true;
    a->scores[idx].score = ev->score;
    a->n_scores = want;
    a->n_ranked++;
    a->held += grow;
    return QR_OK;
}

/* Fields the event reports (>= 0) replace what is known; -1 leaves it. */
static void merge_usage(struct qr_usage *to, const struct qr_usage *from)
{
#define MERGE(f)                                                                                   \
    if (from->f >= 0)                                                                              \
        to->f = from->f;
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

static enum qr_err add_final(struct qr_answer *a, const struct qr_event *ev)
{
    enum qr_err err;
    if (ev->type == QR_EV_DONE) {
        if ((unsigned) ev->finish > QR_FINISH_ERROR)
            return QR_ERR_INTERNAL;
        for (size_t i = 0; i < a->n_calls; i++) {
            if (!a->calls[i].ended)
                return QR_ERR_INTERNAL;
        }
        a->done = true;
        a->finish = ev->finish;
        if (ev->context.len && (err = put_once(&a->context, ev->context)))
            return err;
        return put_once(&a->raw_finish, ev->raw_finish);
    }
    a->failed = true;
    a->error_status = ev->status;
    a->error_retryable = ev->retryable;
    if ((err = put_once(&a->error_code, ev->code)))
        return err;
    return put_once(&a->error_message, ev->message);
}

enum qr_err qr_answer_add(void *arg, const struct qr_event *ev)
{
    struct qr_answer *a = arg;
    if (!a || !ev || a->done || a->failed)
        return QR_ERR_INTERNAL;
    if (!a->started) {
        if (ev->type != QR_EV_START)
            return QR_ERR_INTERNAL;
        a->started = true;
        return put_once(&a->model, ev->model);
    }
    /* After USAGE only the final event may come. */
    if (a->has_usage && ev->type != QR_EV_DONE && ev->type != QR_EV_ERROR)
        return QR_ERR_INTERNAL;
    switch (ev->type) {
    case QR_EV_CONTENT:
        return put_held(a, &a->content, ev->text);
    case QR_EV_REASONING:
        return put_held(a, &a->reasoning, ev->text);
    case QR_EV_TOOL_BEGIN:
        return add_tool_begin(a, ev);
    case QR_EV_TOOL_ARGS:
    case QR_EV_TOOL_END:
        if (ev->index >= a->n_calls || a->calls[ev->index].ended)
            return QR_ERR_INTERNAL;
        if (ev->type == QR_EV_TOOL_END) {
            a->calls[ev->index].ended = true;
            return QR_OK;
        }
        return put_held(a, &a->calls[ev->index].arguments, ev->text);
    case QR_EV_USAGE:
        merge_usage(&a->usage, &ev->usage);
        a->has_usage = true;
        return QR_OK;
    case QR_EV_META:
        if (ev->slot_id >= 0)
            a->slot_id = ev->slot_id;
        if (ev->usage.cached_tokens >= 0)
            a->usage.cached_tokens = ev->usage.cached_tokens;
        return ev->id.len ? put_once(&a->upstream_id, ev->id) : QR_OK;
    case QR_EV_EMBEDDING:
        return add_embedding(a, ev);
    case QR_EV_RERANK:
        return add_score(a, ev);
    case QR_EV_DONE:
    case QR_EV_ERROR:
        return add_final(a, ev);
    case QR_EV_START:
        break;
    }
    return QR_ERR_INTERNAL; /* a second START or an unknown type */
}
