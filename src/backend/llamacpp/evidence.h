/* The llama.cpp engine's own evidence about one process and the admission of canonical requests
 * against it (docs/LLAMACPP.md "The engine's evidence and failing closed").
 *
 * After a process is ready the adapter asks it GET /props; qr_llamacpp_props_parse turns the
 * answer (hostile input: size-capped, types checked, only a JSON true counts) into
 * struct qr_llamacpp_props. qr_llamacpp_admit refuses, with a client-facing error, a request the
 * process cannot serve as asked: tools to a template without tool syntax (the engine would drop
 * them silently), image/audio parts without the modality, a context larger than one slot. */
#ifndef QR_BACKEND_LLAMACPP_EVIDENCE_H
#define QR_BACKEND_LLAMACPP_EVIDENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"

struct qr_request;
struct qr_api_error;

/* The engine's own capability evidence about one process: GET /props (with the process's key)
 * after it became ready, parsed with a size cap (QR_LLAMACPP_PROPS_MAX_BYTES). Keys the engine
 * does not send read as false (fail closed). */
enum qr_llamacpp_tcap {
    QR_LLAMACPP_TCAP_TOOLS = 0,               /* chat_template_caps.supports_tools */
    QR_LLAMACPP_TCAP_TOOL_CALLS = 1,          /* supports_tool_calls */
    QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS = 2, /* supports_parallel_tool_calls */
    QR_LLAMACPP_TCAP_PRESERVE_REASONING = 3,  /* supports_preserve_reasoning */
    QR_LLAMACPP_TCAP_REASONING_EFFORT = 4,    /* supports_reasoning_effort */
    QR_LLAMACPP_TCAP_OBJECT_ARGUMENTS = 5,    /* supports_object_arguments */
    QR_LLAMACPP_TCAP_STRING_CONTENT = 6,      /* supports_string_content */
    QR_LLAMACPP_TCAP_SYSTEM_ROLE = 7,         /* supports_system_role */
    QR_LLAMACPP_TCAP_TYPED_CONTENT = 8,       /* supports_typed_content */
    QR_LLAMACPP_TCAP__COUNT
};

/* The engine's key, e.g. "supports_tools"; "" out of range. Static. */
const char *qr_llamacpp_tcap_name(enum qr_llamacpp_tcap c);

#define QR_LLAMACPP_PROPS_MAX_BYTES (4u << 20) /* /props answers larger than this are refused */

struct qr_llamacpp_props {
    bool valid;                         /* /props answered 200 with a usable body */
    bool pending;                       /* asked, no answer yet */
    char error[256];                    /* why not valid ("" before the first answer) */
    bool caps[QR_LLAMACPP_TCAP__COUNT]; /* chat_template_caps */
    bool vision, video, audio;          /* modalities */
    uint32_t n_ctx_slot;  /* default_generation_settings.n_ctx: the context of one slot */
    uint32_t total_slots; /* total_slots; 0 when not sent */
    char build_info[64];  /* e.g. "b11669-Debian" (control bytes replaced, truncated) */
    char model_path[1024];
};

/* Parse a /props body (hostile input: bounded, types checked) into *out. QR_ERR_PARSE with diag
 * when it is not a JSON object with chat_template_caps and default_generation_settings.n_ctx. */
enum qr_err qr_llamacpp_props_parse(const char *body, size_t len, struct qr_llamacpp_props *out,
                                    struct qr_diag *diag);

/* A named tool_choice must name an offered tool: 400 invalid_request otherwise. */
enum qr_err qr_llamacpp_check_tool_choice(const struct qr_request *r, struct qr_api_error *err);

/* The request's context_len (num_ctx) is an admission limit against one slot's context, never a
 * reason to start another process: 422 context_exceeded naming both numbers when larger.
 * measured: slot_ctx is the engine's figure (else the plan's). id borrowed. */
enum qr_err qr_llamacpp_check_context(const char *id, const struct qr_request *r, uint32_t slot_ctx,
                                      uint32_t ctx, uint32_t parallel, bool measured,
                                      struct qr_api_error *err);

/* One slot's planned context: ctx / parallel, capped at the model's training context (native,
 * 0 = unknown) as the engine caps it. */
uint32_t qr_llamacpp_slot_ctx(uint32_t ctx, uint32_t parallel, uint32_t native);

/* Fail closed on the evidence pr (all borrowed): tools (tool_choice not none) need
 * supports_tools, image parts modalities.vision, audio parts modalities.audio (422
 * capability_unsupported naming the capability key and the reason; without valid evidence the
 * reason is why there is none), then qr_llamacpp_check_context against slot_ctx. */
enum qr_err qr_llamacpp_admit(const char *id, const struct qr_llamacpp_props *pr,
                              const struct qr_request *r, uint32_t slot_ctx, uint32_t ctx,
                              uint32_t parallel, struct qr_api_error *err);

/* Add "engine": {valid, pending, error[, chat_template_caps{...}, modalities{...}, n_ctx_slot,
 * total_slots, build_info, model_path]} to obj (strings copied into doc). false on allocation
 * failure. */
bool qr_llamacpp_props_json(yyjson_mut_doc *doc, yyjson_mut_val *obj,
                            const struct qr_llamacpp_props *pr);

#endif
