/* The canonical inference request: what every client protocol decodes into and every backend
 * protocol encodes from. Nothing an agent needs is flattened: roles, content parts, assistant
 * reasoning, tool calls with ids and their arguments as the exact JSON text, tool results linked
 * by id (and by tool name, as Ollama sends them), "not sent" kept distinct from false/zero.
 *
 * Memory: a request and everything it points to live in one qr_arena (core/arena.h) owned by
 * whoever decoded it; slices are NUL-terminated arena copies. */
#ifndef QR_CONTRACT_REQUEST_H
#define QR_CONTRACT_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* Which API a request came in through (decides the answer's shape). */
enum qr_protocol {
    QR_PROTO_OLLAMA = 0, /* Ollama API routes */
    QR_PROTO_OPENAI = 1, /* OpenAI API routes */
};

enum qr_op {
    QR_OP_CHAT = 0,       /* /api/chat, /v1/chat/completions */
    QR_OP_COMPLETION = 1, /* /api/generate, /v1/completions: a prompt, no chat template roles */
    QR_OP_EMBED = 2,      /* /api/embed, /api/embeddings, /v1/embeddings */
    QR_OP_RERANK = 3,     /* /v1/rerank, /rerank: score documents against a query */
};

enum qr_role {
    QR_ROLE_SYSTEM = 0,
    QR_ROLE_USER = 1,
    QR_ROLE_ASSISTANT = 2,
    QR_ROLE_TOOL = 3,
    QR_ROLE_DEVELOPER = 4, /* OpenAI; backends without it get system */
};

enum qr_part_kind {
    QR_PART_TEXT = 0,
    QR_PART_IMAGE = 1,
    QR_PART_AUDIO = 2,
};

struct qr_part {
    enum qr_part_kind kind;
    struct qr_slice text; /* TEXT */
    /* IMAGE/AUDIO: either base64 bytes (no data: prefix) or a URL (is_url). */
    struct qr_slice data;
    bool is_url;
    struct qr_slice mime;   /* "image/png", "audio/wav"; empty when unknown */
    struct qr_slice detail; /* OpenAI image detail ("auto", "low", "high"); empty when unset */
};

struct qr_tool_call {
    struct qr_slice id; /* byte for byte from the client; empty when it sent none */
    struct qr_slice name;
    struct qr_slice arguments; /* the arguments object as exact JSON text ("{}" when empty) */
};

struct qr_message {
    enum qr_role role;
    struct qr_part *parts; /* content; may be empty */
    size_t n_parts;
    bool content_null;         /* OpenAI assistant content: null (vs "") */
    struct qr_slice reasoning; /* assistant reasoning/thinking of an earlier turn; empty if none */
    struct qr_tool_call *tool_calls;
    size_t n_tool_calls;
    struct qr_slice tool_call_id; /* role tool: the call this result answers */
    struct qr_slice tool_name;    /* role tool: the tool's name (Ollama tool_name) */
    struct qr_slice name;         /* OpenAI participant name */
};

struct qr_tool {
    struct qr_slice name;
    struct qr_slice description;
    struct qr_slice parameters; /* JSON Schema as exact JSON text; empty when not given */
    bool strict;                /* OpenAI function.strict */
};

enum qr_tool_choice_kind {
    QR_TOOL_CHOICE_UNSET = 0,
    QR_TOOL_CHOICE_AUTO = 1,
    QR_TOOL_CHOICE_NONE = 2,
    QR_TOOL_CHOICE_REQUIRED = 3,
    QR_TOOL_CHOICE_FUNCTION = 4, /* name set */
};

struct qr_tool_choice {
    enum qr_tool_choice_kind kind;
    struct qr_slice name;
};

enum qr_tristate { QR_UNSET = 0, QR_FALSE = 1, QR_TRUE = 2 };

enum qr_think_kind {
    QR_THINK_UNSET = 0, /* not sent: the backend's/model's default */
    QR_THINK_OFF = 1,
    QR_THINK_ON = 2,
    QR_THINK_LEVEL = 3, /* level set: "low" | "medium" | "high" (OpenAI reasoning_effort too) */
};

struct qr_think {
    enum qr_think_kind kind;
    struct qr_slice level;
};

enum qr_format_kind {
    QR_FORMAT_NONE = 0,
    QR_FORMAT_JSON = 1,   /* any JSON object (Ollama "json", OpenAI json_object) */
    QR_FORMAT_SCHEMA = 2, /* schema set */
};

struct qr_format {
    enum qr_format_kind kind;
    struct qr_slice schema; /* exact JSON text */
    struct qr_slice name;   /* OpenAI json_schema.name; empty otherwise */
    bool strict;
};

struct qr_opt_f64 {
    bool set;
    double v;
};

struct qr_opt_i64 {
    bool set;
    int64_t v;
};

struct qr_sampling {
    struct qr_opt_f64 temperature, top_p, min_p, typical_p;
    struct qr_opt_f64 repeat_penalty, presence_penalty, frequency_penalty;
    struct qr_opt_i64 top_k, seed, repeat_last_n, num_keep;
};

/* A field the canonical model has no slot for but must not drop: name and exact JSON value.
 * Backend encoders pass through what their protocol can carry and refuse the rest. */
struct qr_extra {
    struct qr_slice key;
    struct qr_slice json;
};

enum qr_embed_encoding { QR_EMBED_FLOAT = 0, QR_EMBED_BASE64 = 1 };

struct qr_keep_alive {
    bool set;
    bool forever;        /* negative value: keep loaded */
    int64_t ms;          /* when set and not forever; 0 = unload after this request */
    struct qr_slice raw; /* the client's JSON value, to pass to an Ollama upstream unchanged */
};

struct qr_request {
    enum qr_protocol protocol;
    enum qr_op op;
    struct qr_slice model; /* as the client named it */

    /* chat */
    struct qr_message *messages;
    size_t n_messages;

    /* completion (generate / completions) */
    struct qr_slice prompt;
    struct qr_slice suffix;
    struct qr_slice system;    /* Ollama generate "system" */
    struct qr_slice template_; /* Ollama generate "template" */
    struct qr_slice context;   /* Ollama generate "context" (deprecated token array), exact JSON */
    bool raw;                  /* Ollama generate "raw": no templating */
    struct qr_part *images;    /* Ollama generate "images" (IMAGE parts) */
    size_t n_images;
    bool echo; /* OpenAI completions "echo" */

    /* embeddings */
    struct qr_slice *inputs; /* text inputs */
    size_t n_inputs;
    bool input_is_list;           /* the client sent an array (answer with a list even for one) */
    struct qr_slice input_tokens; /* OpenAI token-array input, exact JSON; empty if text */
    struct qr_opt_i64 dimensions;
    enum qr_embed_encoding encoding;
    enum qr_tristate truncate;

    /* rerank: the documents travel in inputs/n_inputs (one text each, in the client's order;
     * a result's index is a position in that list) */
    struct qr_slice query;
    struct qr_opt_i64 top_n;           /* results to keep (>= 1); unset: every document */
    enum qr_tristate return_documents; /* TRUE: each result carries its document's text */

    /* tools */
    struct qr_tool *tools;
    size_t n_tools;
    struct qr_tool_choice tool_choice;
    enum qr_tristate parallel_tool_calls;

    /* generation controls */
    struct qr_think think;
    struct qr_format format;
    struct qr_sampling sampling;
    struct qr_slice *stop;
    size_t n_stop;
    struct qr_opt_i64 max_tokens;  /* num_predict / max_tokens / max_completion_tokens */
    struct qr_opt_i64 context_len; /* requested context (num_ctx): an admission limit */
    bool context_len_forward;      /* a model policy sends context_len to the engine as its
                                      context size (Ollama num_ctx); otherwise never sent */
    struct qr_keep_alive keep_alive;
    struct qr_opt_i64 n_choices; /* OpenAI n; only 1 is served */

    /* streaming */
    bool stream;
    bool stream_set;    /* the client sent "stream" */
    bool include_usage; /* OpenAI stream_options.include_usage */
    enum qr_tristate logprobs;
    struct qr_opt_i64 top_logprobs;

    /* everything else the client sent that has no slot above, in order */
    struct qr_extra *extras; /* top-level body fields */
    size_t n_extras;
    struct qr_extra *extra_options; /* Ollama options.* without a slot (num_gpu, num_batch, ...) */
    size_t n_extra_options;
};

const char *qr_role_str(enum qr_role r);

#endif
