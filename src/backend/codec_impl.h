/* Private to the backend codecs (codec.c, openai/codec_openai.c, ollama/codec_ollama.c): the
 * decoder state shared by both upstream protocols and the helpers the protocol files use to
 * emit canonical events. codec.c owns framing (SSE, NDJSON, whole body, error body), the order
 * contract (START first, USAGE once, exactly one DONE or ERROR) and the finish rules; the
 * protocol files only interpret one parsed JSON chunk or body at a time. */
#ifndef QR_BACKEND_CODEC_IMPL_H
#define QR_BACKEND_CODEC_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include <yyjson.h>

#include "backend/codec.h"
#include "stream/think.h"
#include "stream/toolcalls.h"

enum qr_dec_mode {
    QR_DEC_SSE = 0,     /* text/event-stream: OpenAI chunks */
    QR_DEC_LINES = 1,   /* application/x-ndjson: Ollama chunks */
    QR_DEC_WHOLE = 2,   /* one JSON body */
    QR_DEC_ERRBODY = 3, /* non-2xx: the error body, reported at finish */
};

struct qr_upstream_dec {
    const struct qr_dialect *d;   /* borrowed */
    const struct qr_request *req; /* borrowed */
    int status;
    enum qr_dec_mode mode;
    struct qr_buf in;   /* unconsumed bytes: a partial line, the whole body or the error body */
    size_t in_max;      /* cap on in */
    bool in_truncated;  /* error body: bytes past the cap were dropped */
    struct qr_buf data; /* SSE: the data lines of the event being gathered */
    bool data_any;      /* SSE: the event has a data field */
    bool event_error;   /* SSE: "event: error" */

    bool started;     /* START went out */
    bool terminal;    /* DONE or ERROR went out (or the consumer failed): nothing more */
    bool output_seen; /* content, reasoning or a tool call went out */
    bool done_marker; /* SSE [DONE] or Ollama done:true seen */
    bool finish_seen; /* the upstream gave a finish reason */
    enum qr_finish finish;
    char raw_finish[64];
    struct qr_buf context; /* Ollama generate's final "context" array (raw JSON), "" none */
    struct qr_usage usage;
    bool have_usage;
    struct qr_usage usage_fb; /* counts derived from llama-server timings, used when missing */
    bool id_sent, slot_sent;  /* META parts already reported */
    char model[256];
    struct qr_toolcalls tc;
    struct qr_think_split think;
    bool think_on;

    qr_event_fn fn; /* of the current feed/finish call */
    void *arg;
    enum qr_err fn_err; /* first failure of fn */
};

/* Streamed chunks whose parse fits this block are parsed in it, one after the other. */
#define QR_DEC_POOL_BYTES (16 * 1024)

/* yyjson read flags for upstream bodies: numbers stay raw text so tool arguments are written
 * back exactly. */
#define QR_DEC_READ_FLAGS YYJSON_READ_NUMBER_AS_RAW

/* ---- JSON helpers (numbers may be raw text) ---- */
bool qr_json_i64(yyjson_val *v, int64_t *out);
bool qr_json_f64(yyjson_val *v, double *out);
/* Non-empty string value as a slice ({"",0} otherwise). */
struct qr_slice qr_json_str(yyjson_val *v);
/* Serialize v (keys in order, raw numbers verbatim); caller frees. NULL on failure. */
char *qr_json_write(yyjson_val *v, size_t *len);

/* ---- events (all return QR_OK, or the consumer's error once it failed) ---- */
enum qr_err qr_dec_emit(struct qr_upstream_dec *dec, struct qr_event *ev);
/* A qr_event_fn over the decoder (arg = dec), for the think splitter and tool-call assembler. */
enum qr_err qr_dec_relay(void *arg, const struct qr_event *ev);
/* START if not yet sent; the model is taken from the argument the first time (may be empty). */
enum qr_err qr_dec_start(struct qr_upstream_dec *dec, struct qr_slice model);
/* Content, through the think splitter when the dialect has one. Empty text is skipped. */
enum qr_err qr_dec_content(struct qr_upstream_dec *dec, struct qr_slice text);
enum qr_err qr_dec_reasoning(struct qr_upstream_dec *dec, struct qr_slice text);
/* META for the upstream response id and engine slot (-1 unknown), each reported once. */
enum qr_err qr_dec_meta(struct qr_upstream_dec *dec, struct qr_slice id, int64_t slot);
/* Record the finish reason (reported with DONE at the end). */
void qr_dec_set_finish(struct qr_upstream_dec *dec, enum qr_finish f, struct qr_slice raw);
/* Merge reported usage fields (>= 0 replaces). The fallback fills only what stays unreported. */
void qr_dec_add_usage(struct qr_upstream_dec *dec, const struct qr_usage *u);
void qr_dec_add_usage_fallback(struct qr_upstream_dec *dec, const struct qr_usage *u);
/* One ERROR (after START) and nothing more. */
enum qr_err qr_dec_fail(struct qr_upstream_dec *dec, int status, const char *code, bool retryable,
                        struct qr_slice message);
/* A mid-stream error payload: ERROR 502 "upstream_error" with the message found in v. */
enum qr_err qr_dec_fail_payload(struct qr_upstream_dec *dec, yyjson_val *v);
/* The message of any upstream error shape in root ({"error":{"message"}}, {"error":"..."},
 * {"message":...}, {"detail":...}); {"",0} when none. */
struct qr_slice qr_dec_error_message(yyjson_val *root);
/* One EMBEDDING event for the JSON array v (numbers). */
enum qr_err qr_dec_embedding(struct qr_upstream_dec *dec, uint32_t index, yyjson_val *v);
/* Emit the end: flush the splitter, end tool calls, USAGE, DONE with the recorded finish
 * (TOOL_CALLS when calls were seen and the upstream said stop). */
enum qr_err qr_dec_done(struct qr_upstream_dec *dec);

/* ---- protocol handlers ---- */
/* One streamed chunk (SSE data payload / NDJSON line), parsed. */
enum qr_err qr_openai_dec_chunk(struct qr_upstream_dec *dec, yyjson_val *root);
enum qr_err qr_ollama_dec_chunk(struct qr_upstream_dec *dec, yyjson_val *root);
/* A whole 2xx body, parsed. Record the finish with qr_dec_set_finish (or fail). */
enum qr_err qr_openai_dec_body(struct qr_upstream_dec *dec, yyjson_val *root);
enum qr_err qr_ollama_dec_body(struct qr_upstream_dec *dec, yyjson_val *root);

/* ---- encoders ---- */
enum qr_err qr_openai_encode(const struct qr_dialect *d, const struct qr_request *req,
                             struct qr_buf *out, const char **out_path, struct qr_api_error *err);
enum qr_err qr_ollama_encode(const struct qr_dialect *d, const struct qr_request *req,
                             struct qr_buf *out, const char **out_path, struct qr_api_error *err);

/* Shared encoder helper: write doc into out (QR_ERR_INVALID via err on a write failure). */
enum qr_err qr_enc_write(yyjson_mut_doc *doc, struct qr_buf *out, struct qr_api_error *err);

/* ---- encoder helpers shared by the protocol files (each file-static where used) ---- */

#define TRY(x)                                                                                     \
    do {                                                                                           \
        enum qr_err try_err_ = (x);                                                                \
        if (try_err_)                                                                              \
            return try_err_;                                                                       \
    } while (0)

struct enc {
    const struct qr_dialect *d;
    const struct qr_request *req;
    yyjson_mut_doc *doc;
    struct qr_api_error *err;
};

static inline enum qr_err nomem(struct enc *e)
{
    return qr_api_error_set(e->err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
}

static inline yyjson_mut_val *str(struct enc *e, struct qr_slice s)
{
    return yyjson_mut_strncpy(e->doc, s.ptr ? s.ptr : "", s.len);
}

static inline yyjson_mut_val *raw(struct enc *e, struct qr_slice s)
{
    return yyjson_mut_rawncpy(e->doc, s.ptr, s.len);
}

static inline bool put(struct enc *e, yyjson_mut_val *obj, const char *key, yyjson_mut_val *v)
{
    return v && yyjson_mut_obj_add_val(e->doc, obj, key, v);
}

#endif
