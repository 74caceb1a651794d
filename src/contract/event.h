/* The canonical event stream: what every backend decoder produces and every client encoder
 * consumes. A non-streamed answer is the aggregate (qr_answer) of the same events, so streamed and
 * non-streamed output agree by construction.
 *
 * Order guaranteed by backend decoders:
 *   START, then any mix of CONTENT / REASONING / TOOL_BEGIN / TOOL_ARGS / TOOL_END / META,
 *   then USAGE (at most once, may be absent), then exactly one DONE or one ERROR.
 * Embeddings and rerank answers carry EMBEDDING / RERANK events in place of the generated ones;
 * each index (input or document position) comes at most once, RERANK scores are finite and come
 * in any order (the client encoder sorts them).
 * Tool calls: TOOL_BEGIN(index, id, name) precedes that index's TOOL_ARGS; TOOL_END(index) follows
 * its last TOOL_ARGS. Indices are assigned by the Runtime in order of first appearance (0, 1, 2,
 * ...), never copied from the upstream. Ids are the upstream's byte for byte; when it sent none
 * the decoder synthesizes one at TOOL_BEGIN and that id is used everywhere after.
 * TOOL_ARGS carry raw JSON text fragments of the arguments object; concatenated they form the exact
 * arguments JSON (never re-typed). All slices are borrowed for the duration of the callback. */
#ifndef QR_CONTRACT_EVENT_H
#define QR_CONTRACT_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"
#include "core/err.h"

enum qr_event_type {
    QR_EV_START = 0,
    QR_EV_CONTENT = 1,
    QR_EV_REASONING = 2,
    QR_EV_TOOL_BEGIN = 3,
    QR_EV_TOOL_ARGS = 4,
    QR_EV_TOOL_END = 5,
    QR_EV_USAGE = 6,
    QR_EV_DONE = 7,
    QR_EV_ERROR = 8,
    QR_EV_META = 9,       /* resumability metadata: request id, engine task/slot, cached tokens */
    QR_EV_EMBEDDING = 10, /* one vector (embeddings requests) */
    QR_EV_RERANK = 11,    /* one document's relevance score (rerank requests) */
};

enum qr_finish {
    QR_FINISH_NONE = 0, /* not known (yet) */
    QR_FINISH_STOP = 1,
    QR_FINISH_LENGTH = 2,
    QR_FINISH_TOOL_CALLS = 3,
    QR_FINISH_CONTENT_FILTER = 4,
    QR_FINISH_CANCELLED = 5,
    QR_FINISH_ERROR = 6,
};

const char *qr_finish_str(enum qr_finish f); /* "stop", "length", ... ("" for NONE) */

/* Usage: counts in tokens, durations in nanoseconds; -1 = not reported. */
struct qr_usage {
    int64_t prompt_tokens;
    int64_t completion_tokens;
    int64_t cached_tokens;
    int64_t reasoning_tokens;
    int64_t total_ns;
    int64_t load_ns;
    int64_t prompt_ns;
    int64_t eval_ns;
};

void qr_usage_init(struct qr_usage *u); /* all -1 */

struct qr_event {
    enum qr_event_type type;
    struct qr_slice text;       /* CONTENT, REASONING, TOOL_ARGS: the bytes */
    uint32_t index;             /* TOOL_*: runtime tool index; EMBEDDING: input index */
    struct qr_slice id;         /* TOOL_BEGIN: call id; META: upstream request id */
    struct qr_slice name;       /* TOOL_BEGIN: function name; START: backend id */
    struct qr_slice model;      /* START: model as the upstream named it (may be empty) */
    struct qr_usage usage;      /* USAGE; META: cached_tokens */
    enum qr_finish finish;      /* DONE */
    struct qr_slice raw_finish; /* DONE: the upstream's own reason string, e.g. "abort" */
    struct qr_slice context;    /* DONE: Ollama /api/generate's "context" token array (raw JSON),
                                   handed back to Ollama clients unchanged; empty when none */
    /* ERROR */
    int status;           /* HTTP status to use when nothing was sent yet (502, 504, 400...) */
    struct qr_slice code; /* machine-readable, e.g. "upstream_error" */
    struct qr_slice message;
    bool retryable;
    /* META */
    int64_t slot_id; /* engine slot / task id, -1 if unknown */
    /* EMBEDDING */
    const float *vec;
    size_t dims;
    /* RERANK: index is the document's position in the request's inputs; the relevance score is
     * finite, higher is more relevant */
    double score;
};

/* Event consumer. A non-QR_OK return stops the producer (which then returns that error). */
typedef enum qr_err (*qr_event_fn)(void *arg, const struct qr_event *ev);

/* ---- aggregate of an event stream (non-streamed answers, tests) ---- */

struct qr_answer_call {
    struct qr_buf id;
    struct qr_buf name;
    struct qr_buf arguments;
    bool ended;
};

struct qr_answer_score {
    bool set;
    double score;
};

struct qr_answer {
    bool started;
    struct qr_buf model; /* from START */
    struct qr_buf content;
    struct qr_buf reasoning;
    struct qr_answer_call *calls; /* by runtime index */
    size_t n_calls;
    struct qr_usage usage;
    bool has_usage;
    enum qr_finish finish;
    struct qr_buf raw_finish;
    struct qr_buf context; /* DONE's context (raw JSON array), "" when none */
    bool done;
    bool failed; /* an ERROR event arrived */
    int error_status;
    struct qr_buf error_code;
    struct qr_buf error_message;
    bool error_retryable;
    int64_t slot_id;
    struct qr_buf upstream_id;
    float **vectors; /* EMBEDDING, by index */
    size_t *dims;
    size_t n_vectors;
    /* RERANK, by document index: scores[i].set for each index that came; n_scores slots (the
     * highest index seen + 1), n_ranked of them set */
    struct qr_answer_score *scores;
    size_t n_scores;
    size_t n_ranked;
    size_t max_bytes; /* cap on text held (content + reasoning + arguments) */
    size_t held;
};

void qr_answer_init(struct qr_answer *a, size_t max_bytes);
void qr_answer_cleanup(struct qr_answer *a);
/* A qr_event_fn: arg is the struct qr_answer. Enforces the order contract above (QR_ERR_INTERNAL
 * on a violation, QR_ERR_TOO_LARGE past max_bytes). */
enum qr_err qr_answer_add(void *arg, const struct qr_event *ev);

/* Synthesize a tool-call id: "call_" + 24 lowercase hex from the random pool. out >= 30 bytes. */
void qr_tool_id_make(char *out, size_t cap);

#endif
