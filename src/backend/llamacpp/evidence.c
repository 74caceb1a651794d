/* The llama.cpp engine's own evidence about a process (GET /props: chat template capabilities,
 * modalities, one slot's context) and the admission of canonical requests against it: fail
 * closed where the engine would silently drop what the client asked for (tools to a template
 * without tool syntax, media without the modality) and where a request needs more context than
 * a slot has. docs/LLAMACPP.md "The engine's evidence and failing closed" has the rules. */
#include "backend/llamacpp/evidence.h"

#include <stdio.h>
#include <string.h>

#include "api/codec.h"
#include "capability/capability.h"
#include "contract/request.h"

static const char *const TCAP_NAMES[QR_LLAMACPP_TCAP__COUNT] = {
    [QR_LLAMACPP_TCAP_TOOLS] = "supports_tools",
    [QR_LLAMACPP_TCAP_TOOL_CALLS] = "supports_tool_calls",
    [QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS] = "supports_parallel_tool_calls",
    [QR_LLAMACPP_TCAP_PRESERVE_REASONING] = "supports_preserve_reasoning",
    [QR_LLAMACPP_TCAP_REASONING_EFFORT] = "supports_reasoning_effort",
    [QR_LLAMACPP_TCAP_OBJECT_ARGUMENTS] = "supports_object_arguments",
    [QR_LLAMACPP_TCAP_STRING_CONTENT] = "supports_string_content",
    [QR_LLAMACPP_TCAP_SYSTEM_ROLE] = "supports_system_role",
    [QR_LLAMACPP_TCAP_TYPED_CONTENT] = "supports_typed_content",
};

const char *qr_llamacpp_tcap_name(enum qr_llamacpp_tcap c)
{
    return (unsigned) c < QR_LLAMACPP_TCAP__COUNT ? TCAP_NAMES[c] : "";
}

/* A positive count that fits 32 bits. */
static bool json_u32(yyjson_val *v, uint32_t *out)
{
    if (yyjson_is_uint(v) && yyjson_get_uint(v) >= 1 && yyjson_get_uint(v) <= UINT32_MAX) {
        *out = (uint32_t) yyjson_get_uint(v);
        return true;
    }
    if (yyjson_is_sint(v) && yyjson_get_sint(v) >= 1 && yyjson_get_sint(v) <= UINT32_MAX) {
        *out = (uint32_t) yyjson_get_sint(v);
        return true;
    }
    return false;
}

/* Copy a JSON string (valid UTF-8: the reader checks) into dst: control bytes replaced,
 * truncated on a character boundary. Not a string: "". */
static void copy_clean(char *dst, size_t cap, yyjson_val *v)
{
    const char *src = yyjson_get_str(v);
    size_t n = src ? yyjson_get_len(v) : 0, o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        unsigned char c = (unsigned char) src[i];
        dst[o++] = c < 0x20 || c == 0x7f ? '?' : (char) c;
    }
    if (o < n) { /* truncated: drop a partial character at the end */
        size_t k = o;
        while (k && ((unsigned char) dst[k - 1] & 0xC0) == 0x80)
            k--;
        if (k && (unsigned char) dst[k - 1] >= 0xC0)
            o = k - 1;
    }
    dst[o] = '\0';
}

enum qr_err qr_llamacpp_props_parse(const char *body, size_t len, struct qr_llamacpp_props *out,
                                    struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (len > QR_LLAMACPP_PROPS_MAX_BYTES)
        return qr_diag_set(diag, QR_ERR_PARSE, "answer of %zu bytes is larger than %u", len,
                           QR_LLAMACPP_PROPS_MAX_BYTES);
    yyjson_doc *doc = yyjson_read(body, len, 0);
    yyjson_val *root = yyjson_doc_get_root(doc);
    enum qr_err e = QR_OK;
    if (!yyjson_is_obj(root)) {
        e = qr_diag_set(diag, QR_ERR_PARSE, "answer is not a JSON object");
        goto out;
    }
    yyjson_val *caps = yyjson_obj_get(root, "chat_template_caps");
    if (!yyjson_is_obj(caps)) {
        e = qr_diag_set(diag, QR_ERR_PARSE, "answer has no chat_template_caps object");
        goto out;
    }
    for (int i = 0; i < QR_LLAMACPP_TCAP__COUNT; i++)
        out->caps[i] = yyjson_is_true(yyjson_obj_get(caps, TCAP_NAMES[i])); /* only true counts */
    yyjson_val *mod = yyjson_obj_get(root, "modalities");
    out->vision = yyjson_is_true(yyjson_obj_get(mod, "vision"));
    out->video = yyjson_is_true(yyjson_obj_get(mod, "video"));
    out->audio = yyjson_is_true(yyjson_obj_get(mod, "audio"));
    yyjson_val *dgs = yyjson_obj_get(root, "default_generation_settings");
    if (!json_u32(yyjson_obj_get(dgs, "n_ctx"), &out->n_ctx_slot)) {
        e = qr_diag_set(diag, QR_ERR_PARSE,
                        "answer has no usable default_generation_settings.n_ctx");
        goto out;
    }
    if (!json_u32(yyjson_obj_get(root, "total_slots"), &out->total_slots))
        out->total_slots = 0;
    copy_clean(out->build_info, sizeof out->build_info, yyjson_obj_get(root, "build_info"));
    copy_clean(out->model_path, sizeof out->model_path, yyjson_obj_get(root, "model_path"));
    out->valid = true;
out:
    yyjson_doc_free(doc);
    if (e)
        memset(out, 0, sizeof *out);
    return e;
}

/* ---- admission ---- */

static bool slice_same(struct qr_slice a, struct qr_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static bool req_has_part(const struct qr_request *r, enum qr_part_kind k)
{
    for (size_t i = 0; i < r->n_messages; i++) {
        for (size_t j = 0; j < r->messages[i].n_parts; j++) {
            if (r->messages[i].parts[j].kind == k)
                return true;
        }
    }
    for (size_t i = 0; i < r->n_images; i++) {
        if (r->images[i].kind == k)
            return true;
    }
    return false;
}

/* A named tool_choice must name an offered tool (the engine is then offered only that one). */
enum qr_err qr_llamacpp_check_tool_choice(const struct qr_request *r, struct qr_api_error *err)
{
    if (r->tool_choice.kind != QR_TOOL_CHOICE_FUNCTION)
        return QR_OK;
    for (size_t i = 0; i < r->n_tools; i++) {
        if (slice_same(r->tools[i].name, r->tool_choice.name))
            return QR_OK;
    }
    return qr_api_error_set(err, QR_ERR_INVALID, 400, "invalid_request", "tool_choice",
                            "tool_choice names the function '%.*s' but the request offers no tool "
                            "of that name",
                            (int) (r->tool_choice.name.len > 200 ? 200 : r->tool_choice.name.len),
                            r->tool_choice.name.ptr ? r->tool_choice.name.ptr : "");
}

enum qr_err qr_llamacpp_check_context(const char *id, const struct qr_request *r, uint32_t slot_ctx,
                                      uint32_t ctx, uint32_t parallel, bool measured,
                                      struct qr_api_error *err)
{
    if (!r->context_len.set || r->context_len.v <= (int64_t) slot_ctx)
        return QR_OK;
    return qr_api_error_set(err, QR_ERR_INVALID, 422, "context_exceeded", "",
                            "model '%s' was asked for a context of %lld tokens but its llama.cpp "
                            "process has %u tokens per slot (%s; -c %u shared by %u slots)",
                            id, (long long) r->context_len.v, slot_ctx,
                            measured ? "reported by the engine" : "planned", ctx, parallel);
}

static enum qr_err refuse_cap(struct qr_api_error *err, const char *id, enum qr_cap_key key,
                              const char *param, const char *why)
{
    return qr_api_error_set(err, QR_ERR_INVALID, 422, "capability_unsupported", param,
                            "model '%s' cannot serve %s: %s", id, qr_cap_key_name(key), why);
}

uint32_t qr_llamacpp_slot_ctx(uint32_t ctx, uint32_t parallel, uint32_t native)
{
    uint32_t s = ctx / (parallel ? parallel : 1);
    return native && native < s ? native : s;
}

enum qr_err qr_llamacpp_admit(const char *id, const struct qr_llamacpp_props *pr,
                              const struct qr_request *r, uint32_t slot_ctx, uint32_t ctx,
                              uint32_t parallel, struct qr_api_error *err)
{
    char why[400];
    if (!pr->valid)
        snprintf(why, sizeof why,
                 "the engine's capability evidence (GET /props) is unavailable: %s", pr->error);
    bool tools = r->n_tools > 0 && r->tool_choice.kind != QR_TOOL_CHOICE_NONE;
    if (tools && !(pr->valid && pr->caps[QR_LLAMACPP_TCAP_TOOLS]))
        return refuse_cap(err, id, QR_CAP_TOOLS_CALLING, "tools",
                          pr->valid ? "the model's chat template has no tool syntax; the engine "
                                      "would silently drop the tools (llama.cpp /props "
                                      "chat_template_caps.supports_tools is false)"
                                    : why);
    if (req_has_part(r, QR_PART_IMAGE) && !(pr->valid && pr->vision))
        return refuse_cap(err, id, QR_CAP_VISION, "messages",
                          pr->valid ? "the engine reports no image input for this model "
                                      "(llama.cpp /props modalities.vision is false)"
                                    : why);
    if (req_has_part(r, QR_PART_AUDIO) && !(pr->valid && pr->audio))
        return refuse_cap(err, id, QR_CAP_AUDIO, "messages",
                          pr->valid ? "the engine reports no audio input for this model "
                                      "(llama.cpp /props modalities.audio is false)"
                                    : why);
    return qr_llamacpp_check_context(id, r, slot_ctx, ctx, parallel, pr->valid, err);
}

/* ---- JSON ---- */

bool qr_llamacpp_props_json(yyjson_mut_doc *doc, yyjson_mut_val *o,
                            const struct qr_llamacpp_props *pr)
{
    yyjson_mut_val *e = yyjson_mut_obj(doc);
    if (!e || !yyjson_mut_obj_add_val(doc, o, "engine", e))
        return false;
    bool ok = yyjson_mut_obj_add_bool(doc, e, "valid", pr->valid) &&
              yyjson_mut_obj_add_bool(doc, e, "pending", pr->pending) &&
              yyjson_mut_obj_add_strcpy(doc, e, "error", pr->error);
    if (!ok || !pr->valid)
        return ok;
    yyjson_mut_val *caps = yyjson_mut_obj(doc), *mod = yyjson_mut_obj(doc);
    ok = caps && mod && yyjson_mut_obj_add_val(doc, e, "chat_template_caps", caps) &&
         yyjson_mut_obj_add_val(doc, e, "modalities", mod);
    for (int i = 0; ok && i < QR_LLAMACPP_TCAP__COUNT; i++)
        ok = yyjson_mut_obj_add_bool(doc, caps, TCAP_NAMES[i], pr->caps[i]);
    return ok && yyjson_mut_obj_add_bool(doc, mod, "vision", pr->vision) &&
           yyjson_mut_obj_add_bool(doc, mod, "video", pr->video) &&
           yyjson_mut_obj_add_bool(doc, mod, "audio", pr->audio) &&
           yyjson_mut_obj_add_uint(doc, e, "n_ctx_slot", pr->n_ctx_slot) &&
           yyjson_mut_obj_add_uint(doc, e, "total_slots", pr->total_slots) &&
           yyjson_mut_obj_add_strcpy(doc, e, "build_info", pr->build_info) &&
           yyjson_mut_obj_add_strcpy(doc, e, "model_path", pr->model_path);
}
