/* Tool-call assembly shared by the upstream decoders: turns what an upstream says about tool
 * calls (OpenAI stream deltas tied by an upstream index, or whole calls as Ollama and MLX send
 * them) into the canonical TOOL_BEGIN / TOOL_ARGS / TOOL_END events of contract/event.h.
 *
 * Rules:
 *  - A call's runtime index is assigned when its TOOL_BEGIN goes out, so indices are 0, 1, 2, ...
 *    in event order whatever the upstream numbered them.
 *  - TOOL_BEGIN waits until the name is known; argument fragments that arrive earlier are held
 *    (capped) and go out right after the TOOL_BEGIN.
 *  - The upstream id is kept byte for byte; a call without one gets qr_tool_id_make() once, at
 *    TOOL_BEGIN.
 *  - Delta calls stay open until qr_toolcalls_finish(), which ends every open call (and begins,
 *    with an empty name, any call whose name never came, so no argument bytes are lost).
 *  - A delta that carries a different non-empty id than the open call with its upstream index
 *    starts a new call (servers that repeat index 0 for every call).
 * All slices passed in are borrowed for the call; events are passed to fn and the first non-OK
 * result of fn is returned. */
#ifndef QR_STREAM_TOOLCALLS_H
#define QR_STREAM_TOOLCALLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contract/event.h"
#include "core/buf.h"

struct qr_tc_call {
    int64_t key;           /* upstream index; -1 for whole calls and deltas without one */
    struct qr_buf id;      /* upstream id, or the synthesized one after TOOL_BEGIN */
    struct qr_buf name;    /* known name (before TOOL_BEGIN) */
    struct qr_buf pending; /* argument bytes that came before the name */
    bool upstream_id;      /* id came from the upstream */
    bool has_args;         /* any argument byte seen */
    bool begun, ended;
    uint32_t index; /* runtime index, valid once begun */
    /* structural scan of the arguments so far: nesting depth, inside a string, after a
     * backslash, a closing bracket without an opener */
    uint32_t depth;
    bool in_str, esc, unbalanced;
};

struct qr_toolcalls {
    struct qr_tc_call *calls; /* owned, in order of first appearance */
    size_t n, cap;
    uint32_t n_begun; /* next runtime index */
    size_t max_calls; /* cap on calls per answer */
    size_t max_bytes; /* cap on one call's id, name and held arguments */
};

/* max_calls 0 = 1024; max_bytes 0 = 16 MiB. Allocates nothing. */
void qr_toolcalls_init(struct qr_toolcalls *t, size_t max_calls, size_t max_bytes);
void qr_toolcalls_cleanup(struct qr_toolcalls *t);

/* One OpenAI-style delta. key: the upstream index (< 0 when the delta has none: then a delta
 * with an id or a name starts a new call and one without continues the last call). Empty id,
 * name or args mean "not in this delta". QR_ERR_TOO_LARGE past the caps. */
enum qr_err qr_toolcalls_delta(struct qr_toolcalls *t, int64_t key, struct qr_slice id,
                               struct qr_slice name, struct qr_slice args, qr_event_fn fn,
                               void *arg);

/* One complete call (Ollama, MLX non-streamed, OpenAI non-streamed): a new call by arrival
 * order, TOOL_BEGIN + TOOL_ARGS (when args is not empty) + TOOL_END at once. */
enum qr_err qr_toolcalls_whole(struct qr_toolcalls *t, struct qr_slice id, struct qr_slice name,
                               struct qr_slice args, qr_event_fn fn, void *arg);

/* End of the answer: TOOL_BEGIN for calls still without a name (empty name), their held
 * arguments, and TOOL_END for every open call, in runtime index order. */
enum qr_err qr_toolcalls_finish(struct qr_toolcalls *t, qr_event_fn fn, void *arg);

/* Every call's arguments so far are structurally complete JSON (brackets balanced, strings
 * closed; no arguments at all counts as complete). False means an upstream cut a call short, e.g.
 * vLLM reporting finish_reason "tool_calls" after max_tokens (quirk 27). */
bool qr_toolcalls_complete(const struct qr_toolcalls *t);

/* Calls seen so far (begun or not). */
static inline size_t qr_toolcalls_count(const struct qr_toolcalls *t)
{
    return t->n;
}

#endif
