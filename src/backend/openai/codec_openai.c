/* OpenAI-compatible upstream codec (llama-server, vLLM, MLX-LM, SGLang, ...): the canonical
 * request as a /v1/chat/completions, /v1/completions, /v1/embeddings or /v1/rerank body, and one
 * streamed chunk or whole body of the answer as canonical events (framing and the order contract
 * live in backend/codec.c).
 *
 * Encoding decisions (wire-protocols.md B-D, quirk table E):
 *  - model: the dialect's upstream_model, else the client's name (quirk 32).
 *  - developer -> "system" (llama-server, vLLM and MLX all take system).
 *  - content: one text part -> a string; nothing -> "" (or null when the client sent null);
 *    anything else -> an array of parts (text / image_url with a data: URI or the URL /
 *    input_audio), so several text parts keep their boundaries.
 *  - assistant reasoning of earlier turns goes under the dialect's reasoning_field.
 *  - tool calls: arguments as a JSON string of the exact text; a call without an id (Ollama
 *    clients) gets a deterministic synthesized id, and a tool result that names only its tool
 *    is linked to the earliest unanswered call of that name in the latest assistant turn.
 *  - repeat_penalty is sent twice: "repeat_penalty" (llama-server) and "repetition_penalty"
 *    (vLLM, MLX); each server ignores the other's spelling. typical_p, repeat_last_n and n_keep
 *    use llama-server's names (other servers ignore them).
 *  - think: OFF -> chat_template_kwargs.enable_thinking=false; ON -> enable_thinking=true;
 *    LEVEL -> reasoning_effort + enable_thinking=true; UNSET -> nothing.
 *  - stream always explicit; stream_options only when streaming and the dialect asks for usage
 *    (vLLM rejects it on non-streamed requests, quirk 26).
 *  - temperature / max_tokens: the client's; else the dialect's explicit defaults when it has
 *    them (mlx_lm.server: greedy and 512 tokens otherwise, quirk 36; docs/DIALECTS.md).
 *  - an operation the dialect does not offer (MLX: embeddings, rerank): 422
 *    capability_unsupported before anything is sent.
 *  - context_len and keep_alive are the Runtime's admission/lifecycle limits: not sent.
 *  - extras of an OpenAI client pass through unchanged (a client chat_template_kwargs object is
 *    merged with the think switch; model, messages, prompt, input, stream and stream_options are
 *    never overridden). Extras and extra_options of an Ollama client cannot be expressed:
 *    422 capability_unsupported naming the field (truncate/shift and null values excepted).
 *  - n > 1 and logprobs: 422 (the canonical event stream carries one choice and no logprobs).
 *  - An Ollama /api/generate without raw (the prompt is templated as a user turn by Ollama) goes
 *    to /v1/chat/completions as [system?, user]; raw prompts, suffixes and OpenAI completions go
 *    to /v1/completions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/codec_impl.h"

/* ======================================================================================== */
/* Encoder (shared helpers: codec_impl.h)                                                   */
/* ======================================================================================== */

static enum qr_err unsupported(struct enc *e, const char *param, const char *what)
{
    return qr_api_error_set(e->err, QR_ERR_INVALID, 422, "capability_unsupported", param,
                            "%s cannot be sent to an OpenAI-compatible backend", what);
}

/* FNV-1a 64 of s. */
static uint64_t fnv(struct qr_slice s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < s.len; i++)
        h = (h ^ (unsigned char) s.ptr[i]) * 0x100000001b3ULL;
    return h;
}

/* Deterministic id for a history tool call the client sent without one: "call_" + 24 hex, the
 * shape of qr_tool_id_make(). */
static void synth_id(size_t msg, size_t call, struct qr_slice name, char out[32])
{
    snprintf(out, 32, "call_%04x%04x%016llx", (unsigned) (msg & 0xffff), (unsigned) (call & 0xffff),
             (unsigned long long) fnv(name));
}

static const char *image_mime(const struct qr_part *p)
{
    if (p->mime.len)
        return NULL; /* use the client's */
    static const struct {
        const char *prefix, *mime;
    } sniff[] = {{"iVBORw0KGgo", "image/png"},
                 {"/9j/", "image/jpeg"},
                 {"R0lGOD", "image/gif"},
                 {"UklGR", "image/webp"},
                 {"Qk", "image/bmp"}};
    for (size_t i = 0; i < QR_ARRAY_LEN(sniff); i++) {
        size_t n = strlen(sniff[i].prefix);
        if (p->data.len >= n && memcmp(p->data.ptr, sniff[i].prefix, n) == 0)
            return sniff[i].mime;
    }
    return "image/png";
}

static yyjson_mut_val *image_part(struct enc *e, const struct qr_part *p)
{
    yyjson_mut_val *o = yyjson_mut_obj(e->doc), *iu = yyjson_mut_obj(e->doc);
    if (!o || !iu || !yyjson_mut_obj_add_str(e->doc, o, "type", "image_url"))
        return NULL;
    const char *m = image_mime(p);
    struct qr_slice mime = m ? qr_slice_str(m) : p->mime;
    struct qr_buf b;
    qr_buf_init(&b, 0);
    if (qr_buf_puts(&b, "data:") || qr_buf_append(&b, mime.ptr, mime.len) ||
        qr_buf_puts(&b, ";base64,") || qr_buf_append(&b, p->data.ptr, p->data.len)) {
        qr_buf_cleanup(&b);
        return NULL;
    }
    yyjson_mut_val *url = yyjson_mut_strncpy(e->doc, b.ptr, b.len);
    qr_buf_cleanup(&b);
    if (!put(e, iu, "url", url))
        return NULL;
    if (p->detail.len && !put(e, iu, "detail", str(e, p->detail)))
        return NULL;
    return put(e, o, "image_url", iu) ? o : NULL;
}

/* input_audio.format from a MIME type: audio/wav, audio/x-wav -> wav; audio/mpeg -> mp3. */
static struct qr_slice audio_format(struct qr_slice mime)
{
    if (mime.len == 0)
        return qr_slice_str("wav");
    const char *slash = memchr(mime.ptr, '/', mime.len);
    struct qr_slice sub =
        slash ? (struct qr_slice){slash + 1, mime.len - (size_t) (slash + 1 - mime.ptr)} : mime;
    if (qr_slice_eq_nocase(sub, "x-wav") || qr_slice_eq_nocase(sub, "wave") ||
        qr_slice_eq_nocase(sub, "vnd.wave"))
        return qr_slice_str("wav");
    if (qr_slice_eq_nocase(sub, "mpeg") || qr_slice_eq_nocase(sub, "mp3"))
        return qr_slice_str("mp3");
    return sub;
}

static enum qr_err content_parts(struct enc *e, const struct qr_part *parts, size_t n, bool null_ok,
                                 yyjson_mut_val **out)
{
    if (n == 0) {
        *out = null_ok ? yyjson_mut_null(e->doc) : yyjson_mut_str(e->doc, "");
        return *out ? QR_OK : nomem(e);
    }
    if (n == 1 && parts[0].kind == QR_PART_TEXT) {
        *out = str(e, parts[0].text);
        return *out ? QR_OK : nomem(e);
    }
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr)
        return nomem(e);
    for (size_t i = 0; i < n; i++) {
        const struct qr_part *p = &parts[i];
        yyjson_mut_val *o = NULL;
        if (p->kind == QR_PART_TEXT) {
            o = yyjson_mut_obj(e->doc);
            if (!o || !yyjson_mut_obj_add_str(e->doc, o, "type", "text") ||
                !put(e, o, "text", str(e, p->text)))
                return nomem(e);
        } else if (p->kind == QR_PART_IMAGE) {
            /* The engine would fetch a URL itself: a client could make it reach any host the
             * engine sees (SSRF). Only inline data goes upstream. */
            if (p->is_url)
                return unsupported(e, "messages",
                                   "an image given by URL (the engine would fetch it; send it "
                                   "inline as a data: URL)");
            if (!(o = image_part(e, p)))
                return nomem(e);
        } else {
            if (p->is_url)
                return unsupported(e, "messages", "audio given by URL");
            o = yyjson_mut_obj(e->doc);
            yyjson_mut_val *ia = yyjson_mut_obj(e->doc);
            if (!o || !ia || !yyjson_mut_obj_add_str(e->doc, o, "type", "input_audio") ||
                !put(e, ia, "data", str(e, p->data)) ||
                !put(e, ia, "format", str(e, audio_format(p->mime))) ||
                !put(e, o, "input_audio", ia))
                return nomem(e);
        }
        if (!yyjson_mut_arr_append(arr, o))
            return nomem(e);
    }
    *out = arr;
    return QR_OK;
}

/* The latest assistant turn's calls, for linking tool results that carry only a tool name. */
struct pending {
    size_t msg;     /* index of the assistant message */
    bool *answered; /* per call; owned */
    size_t n;
};

static void call_id(const struct qr_request *req, size_t m, size_t j, char buf[32],
                    struct qr_slice *out)
{
    const struct qr_tool_call *c = &req->messages[m].tool_calls[j];
    if (c->id.len) {
        *out = c->id;
        return;
    }
    synth_id(m, j, c->name, buf);
    *out = qr_slice_str(buf);
}

static bool slice_same(struct qr_slice a, struct qr_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* The id a tool result answers: its own, else the first unanswered call of the same name (or
 * of any name when it names none) in the latest assistant turn, else a synthesized one. */
static struct qr_slice link_result(const struct qr_request *req, size_t m, struct pending *pd,
                                   char buf[32])
{
    const struct qr_message *msg = &req->messages[m];
    struct qr_slice id;
    for (size_t j = 0; j < pd->n; j++) {
        if (pd->answered[j])
            continue;
        call_id(req, pd->msg, j, buf, &id);
        const struct qr_tool_call *c = &req->messages[pd->msg].tool_calls[j];
        bool match = msg->tool_call_id.len
                         ? slice_same(id, msg->tool_call_id)
                         : msg->tool_name.len == 0 || slice_same(c->name, msg->tool_name);
        if (match) {
            pd->answered[j] = true;
            return msg->tool_call_id.len ? msg->tool_call_id : id;
        }
    }
    if (msg->tool_call_id.len)
        return msg->tool_call_id;
    synth_id(m, 0xffff, msg->tool_name, buf);
    return qr_slice_str(buf);
}

static enum qr_err assistant_calls(struct enc *e, size_t m, yyjson_mut_val *o)
{
    const struct qr_message *msg = &e->req->messages[m];
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr)
        return nomem(e);
    for (size_t j = 0; j < msg->n_tool_calls; j++) {
        const struct qr_tool_call *c = &msg->tool_calls[j];
        char buf[32];
        struct qr_slice id;
        call_id(e->req, m, j, buf, &id);
        yyjson_mut_val *tc = yyjson_mut_obj(e->doc), *fn = yyjson_mut_obj(e->doc);
        struct qr_slice args = c->arguments.len ? c->arguments : qr_slice_str("{}");
        if (!tc || !fn || !put(e, tc, "id", str(e, id)) ||
            !yyjson_mut_obj_add_str(e->doc, tc, "type", "function") ||
            !put(e, fn, "name", str(e, c->name)) || !put(e, fn, "arguments", str(e, args)) ||
            !put(e, tc, "function", fn) || !yyjson_mut_arr_append(arr, tc))
            return nomem(e);
    }
    return put(e, o, "tool_calls", arr) ? QR_OK : nomem(e);
}

static enum qr_err one_message(struct enc *e, size_t m, struct pending *pd, yyjson_mut_val *arr)
{
    const struct qr_message *msg = &e->req->messages[m];
    yyjson_mut_val *o = yyjson_mut_obj(e->doc), *content;
    const char *role = msg->role == QR_ROLE_DEVELOPER ? "system" : qr_role_str(msg->role);
    if (!o || !yyjson_mut_obj_add_str(e->doc, o, "role", role))
        return nomem(e);
    bool null_ok = msg->role == QR_ROLE_ASSISTANT && msg->content_null;
    TRY(content_parts(e, msg->parts, msg->n_parts, null_ok, &content));
    if (!put(e, o, "content", content))
        return nomem(e);
    if (msg->name.len && !put(e, o, "name", str(e, msg->name)))
        return nomem(e);
    if (msg->role == QR_ROLE_ASSISTANT) {
        if (msg->reasoning.len && e->d->reasoning_field && e->d->reasoning_field[0] &&
            !put(e, o, e->d->reasoning_field, str(e, msg->reasoning)))
            return nomem(e);
        if (msg->n_tool_calls)
            TRY(assistant_calls(e, m, o));
        free(pd->answered);
        pd->answered = calloc(msg->n_tool_calls + 1, sizeof(bool));
        if (!pd->answered)
            return nomem(e);
        pd->msg = m;
        pd->n = msg->n_tool_calls;
    } else if (msg->role == QR_ROLE_TOOL) {
        char buf[32];
        struct qr_slice id = link_result(e->req, m, pd, buf);
        if (!put(e, o, "tool_call_id", str(e, id)))
            return nomem(e);
    }
    return yyjson_mut_arr_append(arr, o) ? QR_OK : nomem(e);
}

static enum qr_err messages(struct enc *e, yyjson_mut_val *root)
{
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr || !put(e, root, "messages", arr))
        return nomem(e);
    struct pending pd = {0, NULL, 0};
    enum qr_err err = QR_OK;
    for (size_t m = 0; m < e->req->n_messages && !err; m++)
        err = one_message(e, m, &pd, arr);
    free(pd.answered);
    return err;
}

/* Ollama /api/generate (templated): [system?, user(prompt + images)]. */
static enum qr_err generate_messages(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr || !put(e, root, "messages", arr))
        return nomem(e);
    if (r->system.len) {
        yyjson_mut_val *o = yyjson_mut_obj(e->doc);
        if (!o || !yyjson_mut_obj_add_str(e->doc, o, "role", "system") ||
            !put(e, o, "content", str(e, r->system)) || !yyjson_mut_arr_append(arr, o))
            return nomem(e);
    }
    struct qr_part *parts = calloc(r->n_images + 1, sizeof(*parts));
    if (!parts)
        return nomem(e);
    parts[0].kind = QR_PART_TEXT;
    parts[0].text = r->prompt;
    for (size_t i = 0; i < r->n_images; i++)
        parts[i + 1] = r->images[i];
    yyjson_mut_val *o = yyjson_mut_obj(e->doc), *content = NULL;
    enum qr_err err = o && yyjson_mut_obj_add_str(e->doc, o, "role", "user") ? QR_OK : nomem(e);
    if (!err)
        err = content_parts(e, parts, r->n_images + 1, false, &content);
    free(parts);
    if (!err && (!put(e, o, "content", content) || !yyjson_mut_arr_append(arr, o)))
        err = nomem(e);
    return err;
}

static enum qr_err tools(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    if (r->n_tools) {
        yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
        if (!arr || !put(e, root, "tools", arr))
            return nomem(e);
        for (size_t i = 0; i < r->n_tools; i++) {
            const struct qr_tool *t = &r->tools[i];
            yyjson_mut_val *o = yyjson_mut_obj(e->doc), *fn = yyjson_mut_obj(e->doc);
            if (!o || !fn || !yyjson_mut_obj_add_str(e->doc, o, "type", "function") ||
                !put(e, fn, "name", str(e, t->name)) ||
                (t->description.len && !put(e, fn, "description", str(e, t->description))) ||
                (t->parameters.len && !put(e, fn, "parameters", raw(e, t->parameters))) ||
                (t->strict && !yyjson_mut_obj_add_bool(e->doc, fn, "strict", true)) ||
                !put(e, o, "function", fn) || !yyjson_mut_arr_append(arr, o))
                return nomem(e);
        }
    }
    yyjson_mut_val *tc = NULL;
    switch (r->tool_choice.kind) {
    case QR_TOOL_CHOICE_UNSET:
        break;
    case QR_TOOL_CHOICE_AUTO:
        tc = yyjson_mut_str(e->doc, "auto");
        break;
    case QR_TOOL_CHOICE_NONE:
        tc = yyjson_mut_str(e->doc, "none");
        break;
    case QR_TOOL_CHOICE_REQUIRED:
        tc = yyjson_mut_str(e->doc, "required");
        break;
    case QR_TOOL_CHOICE_FUNCTION: {
        tc = yyjson_mut_obj(e->doc);
        yyjson_mut_val *fn = yyjson_mut_obj(e->doc);
        if (!tc || !fn || !yyjson_mut_obj_add_str(e->doc, tc, "type", "function") ||
            !put(e, fn, "name", str(e, r->tool_choice.name)) || !put(e, tc, "function", fn))
            return nomem(e);
        break;
    }
    }
    if (r->tool_choice.kind != QR_TOOL_CHOICE_UNSET && !put(e, root, "tool_choice", tc))
        return nomem(e);
    if (r->parallel_tool_calls != QR_UNSET &&
        !yyjson_mut_obj_add_bool(e->doc, root, "parallel_tool_calls",
                                 r->parallel_tool_calls == QR_TRUE))
        return nomem(e);
    return QR_OK;
}

static enum qr_err response_format(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_format *f = &e->req->format;
    if (f->kind == QR_FORMAT_NONE)
        return QR_OK;
    yyjson_mut_val *rf = yyjson_mut_obj(e->doc);
    if (!rf || !put(e, root, "response_format", rf))
        return nomem(e);
    if (f->kind == QR_FORMAT_JSON)
        return yyjson_mut_obj_add_str(e->doc, rf, "type", "json_object") ? QR_OK : nomem(e);
    yyjson_mut_val *js = yyjson_mut_obj(e->doc);
    struct qr_slice name = f->name.len ? f->name : qr_slice_str("response");
    if (!js || !yyjson_mut_obj_add_str(e->doc, rf, "type", "json_schema") ||
        !put(e, js, "name", str(e, name)) || !put(e, js, "schema", raw(e, f->schema)) ||
        !yyjson_mut_obj_add_bool(e->doc, js, "strict", f->strict) || !put(e, rf, "json_schema", js))
        return nomem(e);
    return QR_OK;
}

static enum qr_err think(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_think *t = &e->req->think;
    if (t->kind == QR_THINK_UNSET)
        return QR_OK;
    if (t->kind == QR_THINK_LEVEL && !put(e, root, "reasoning_effort", str(e, t->level)))
        return nomem(e);
    yyjson_mut_val *kw = yyjson_mut_obj(e->doc);
    if (!kw || !yyjson_mut_obj_add_bool(e->doc, kw, "enable_thinking", t->kind != QR_THINK_OFF) ||
        !put(e, root, "chat_template_kwargs", kw))
        return nomem(e);
    return QR_OK;
}

static enum qr_err sampling(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    const struct qr_sampling *s = &r->sampling;
    yyjson_mut_doc *doc = e->doc;
    bool ok = true;
#define F64(field, key)                                                                            \
    if (s->field.set)                                                                              \
        ok = ok && yyjson_mut_obj_add_real(doc, root, key, s->field.v);
#define I64(field, key)                                                                            \
    if (s->field.set)                                                                              \
        ok = ok && yyjson_mut_obj_add_sint(doc, root, key, s->field.v);
    if (s->temperature.set)
        ok = ok && yyjson_mut_obj_add_real(doc, root, "temperature", s->temperature.v);
    else if (e->d->default_temperature_set) /* the dialect's explicit default (quirk 36) */
        ok = ok && yyjson_mut_obj_add_real(doc, root, "temperature", e->d->default_temperature);
    F64(top_p, "top_p")
    I64(top_k, "top_k")
    F64(min_p, "min_p")
    F64(typical_p, "typical_p")
    F64(presence_penalty, "presence_penalty")
    F64(frequency_penalty, "frequency_penalty")
    F64(repeat_penalty, "repeat_penalty")
    F64(repeat_penalty, "repetition_penalty")
    I64(repeat_last_n, "repeat_last_n")
    I64(num_keep, "n_keep")
    I64(seed, "seed")
#undef F64
#undef I64
    if (r->n_stop) {
        yyjson_mut_val *arr = yyjson_mut_arr(doc);
        ok = ok && arr && put(e, root, "stop", arr);
        for (size_t i = 0; ok && i < r->n_stop; i++)
            ok = yyjson_mut_arr_append(arr, str(e, r->stop[i]));
    }
    if (r->max_tokens.set)
        ok = ok && yyjson_mut_obj_add_sint(doc, root, "max_tokens", r->max_tokens.v);
    else if (e->d->default_max_tokens > 0)
        ok = ok && yyjson_mut_obj_add_sint(doc, root, "max_tokens", e->d->default_max_tokens);
    return ok ? QR_OK : nomem(e);
}

static enum qr_err stream(struct enc *e, yyjson_mut_val *root)
{
    if (!yyjson_mut_obj_add_bool(e->doc, root, "stream", e->req->stream))
        return nomem(e);
    if (e->req->stream && e->d->stream_usage) {
        yyjson_mut_val *so = yyjson_mut_obj(e->doc);
        if (!so || !yyjson_mut_obj_add_bool(e->doc, so, "include_usage", true) ||
            !put(e, root, "stream_options", so))
            return nomem(e);
    }
    return QR_OK;
}

static bool key_is(struct qr_slice k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (qr_slice_eq(k, list[i]))
            return true;
    }
    return false;
}

/* chat_template_kwargs from the client, merged with the think switch already in root. */
static yyjson_mut_val *merge_kwargs(struct enc *e, yyjson_mut_val *ours, struct qr_slice json)
{
    yyjson_doc *cd =
        yyjson_read_opts((char *) json.ptr, json.len, YYJSON_READ_NUMBER_AS_RAW, NULL, NULL);
    if (!cd)
        return raw(e, json);
    yyjson_mut_val *v = yyjson_val_mut_copy(e->doc, yyjson_doc_get_root(cd));
    yyjson_doc_free(cd);
    yyjson_mut_val *mine = ours ? yyjson_mut_obj_get(ours, "enable_thinking") : NULL;
    if (v && yyjson_mut_is_obj(v) && mine && !yyjson_mut_obj_get(v, "enable_thinking"))
        yyjson_mut_obj_add_bool(e->doc, v, "enable_thinking", yyjson_mut_get_bool(mine));
    return v;
}

static enum qr_err extras(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    if (r->n_extra_options) {
        struct qr_slice k = r->extra_options[0].key;
        char param[80], what[120];
        snprintf(param, sizeof(param), "options.%.*s", (int) k.len, k.ptr);
        snprintf(what, sizeof(what), "Ollama option '%.*s'", (int) k.len, k.ptr);
        return unsupported(e, param, what);
    }
    static const char *const fixed[] = {"model", "messages", "prompt",
                                        "input", "stream",   "stream_options"};
    static const char *const ollama_ignored[] = {"truncate", "shift"};
    for (size_t i = 0; i < r->n_extras; i++) {
        const struct qr_extra *x = &r->extras[i];
        bool is_null = qr_slice_eq(x->json, "null");
        if (r->protocol == QR_PROTO_OLLAMA) {
            if (is_null || key_is(x->key, ollama_ignored, QR_ARRAY_LEN(ollama_ignored)) ||
                (qr_slice_eq(x->key, "logprobs") && qr_slice_eq(x->json, "false")) ||
                (qr_slice_eq(x->key, "top_logprobs") && qr_slice_eq(x->json, "0")))
                continue;
            char param[80], what[120];
            snprintf(param, sizeof(param), "%.*s", (int) x->key.len, x->key.ptr);
            snprintf(what, sizeof(what), "Ollama field '%.*s'", (int) x->key.len, x->key.ptr);
            return unsupported(e, param, what);
        }
        if (key_is(x->key, fixed, QR_ARRAY_LEN(fixed)))
            continue;
        yyjson_mut_val *ours = yyjson_mut_obj_getn(root, x->key.ptr, x->key.len);
        yyjson_mut_val *v = qr_slice_eq(x->key, "chat_template_kwargs")
                                ? merge_kwargs(e, ours, x->json)
                                : raw(e, x->json);
        if (!v)
            return nomem(e);
        if (ours)
            yyjson_mut_obj_remove_keyn(root, x->key.ptr, x->key.len);
        if (!yyjson_mut_obj_add(root, yyjson_mut_strncpy(e->doc, x->key.ptr, x->key.len), v))
            return nomem(e);
    }
    return QR_OK;
}

static enum qr_err common_checks(struct enc *e)
{
    const struct qr_request *r = e->req;
    if ((unsigned) r->op < 32 && (e->d->ops_unsupported & (1u << (unsigned) r->op))) {
        static const char *const ops[] = {"chat", "completions", "embeddings", "rerank"};
        const char *op = (size_t) r->op < QR_ARRAY_LEN(ops) ? ops[r->op] : "this operation";
        return qr_api_error_set(e->err, QR_ERR_INVALID, 422, "capability_unsupported", "",
                                "%s: the backend's dialect '%s' does not offer it", op,
                                e->d->dialect_name ? e->d->dialect_name : "?");
    }
    if (r->n_choices.set && r->n_choices.v != 1)
        return unsupported(e, "n", "n other than 1");
    if (r->logprobs == QR_TRUE || (r->top_logprobs.set && r->top_logprobs.v > 0))
        return unsupported(e, "logprobs", "logprobs");
    return QR_OK;
}

static enum qr_err encode_chat(struct enc *e, yyjson_mut_val *root, bool from_generate)
{
    TRY(from_generate ? generate_messages(e, root) : messages(e, root));
    TRY(tools(e, root));
    TRY(response_format(e, root));
    TRY(think(e, root));
    TRY(sampling(e, root));
    return stream(e, root);
}

static enum qr_err encode_completion(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    if (r->template_.len)
        return unsupported(e, "template", "a prompt template override");
    if (r->context.len && !qr_slice_eq(r->context, "[]"))
        return unsupported(e, "context", "an Ollama context token array");
    if (r->system.len)
        return unsupported(e, "system", "a system prompt on a raw completion");
    if (r->n_images)
        return unsupported(e, "images", "images on a raw completion");
    if (r->n_tools)
        return unsupported(e, "tools", "tools on a completion");
    if (!put(e, root, "prompt", str(e, r->prompt)))
        return nomem(e);
    if (r->suffix.len && !put(e, root, "suffix", str(e, r->suffix)))
        return nomem(e);
    if (r->echo && !yyjson_mut_obj_add_bool(e->doc, root, "echo", true))
        return nomem(e);
    TRY(response_format(e, root));
    TRY(sampling(e, root));
    return stream(e, root);
}

static enum qr_err encode_embed(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    yyjson_mut_val *in;
    if (r->input_tokens.len) {
        in = raw(e, r->input_tokens);
    } else {
        in = yyjson_mut_arr(e->doc);
        for (size_t i = 0; in && i < r->n_inputs; i++) {
            if (!yyjson_mut_arr_append(in, str(e, r->inputs[i])))
                return nomem(e);
        }
    }
    if (!put(e, root, "input", in) ||
        !yyjson_mut_obj_add_str(e->doc, root, "encoding_format", "float"))
        return nomem(e);
    if (r->dimensions.set && !yyjson_mut_obj_add_sint(e->doc, root, "dimensions", r->dimensions.v))
        return nomem(e);
    return QR_OK;
}

/* llama-server's and vLLM's /v1/rerank: query, documents, top_n. return_documents is not sent:
 * the client encoder adds the texts it already holds. */
static enum qr_err encode_rerank(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    if (r->protocol != QR_PROTO_OPENAI)
        return unsupported(e, "documents", "a rerank request from this client protocol");
    yyjson_mut_val *docs = yyjson_mut_arr(e->doc);
    for (size_t i = 0; docs && i < r->n_inputs; i++) {
        if (!yyjson_mut_arr_append(docs, str(e, r->inputs[i])))
            return nomem(e);
    }
    if (!put(e, root, "query", str(e, r->query)) || !put(e, root, "documents", docs))
        return nomem(e);
    if (r->top_n.set && !yyjson_mut_obj_add_sint(e->doc, root, "top_n", r->top_n.v))
        return nomem(e);
    return QR_OK;
}

enum qr_err qr_openai_encode(const struct qr_dialect *d, const struct qr_request *req,
                             struct qr_buf *out, const char **out_path, struct qr_api_error *err)
{
    struct enc e = {d, req, yyjson_mut_doc_new(NULL), err};
    if (!e.doc)
        return nomem(&e);
    yyjson_mut_val *root = yyjson_mut_obj(e.doc);
    yyjson_mut_doc_set_root(e.doc, root);
    struct qr_slice model = d->upstream_model ? qr_slice_str(d->upstream_model) : req->model;
    enum qr_err rc = root && put(&e, root, "model", str(&e, model)) ? QR_OK : nomem(&e);
    if (!rc)
        rc = common_checks(&e);
    if (!rc) {
        switch (req->op) {
        case QR_OP_CHAT:
            *out_path = "/v1/chat/completions";
            rc = encode_chat(&e, root, false);
            break;
        case QR_OP_COMPLETION:
            if (req->protocol == QR_PROTO_OLLAMA && !req->raw && req->suffix.len == 0 &&
                req->template_.len == 0) {
                *out_path = "/v1/chat/completions";
                rc = (req->context.len && !qr_slice_eq(req->context, "[]"))
                         ? unsupported(&e, "context", "an Ollama context token array")
                         : encode_chat(&e, root, true);
            } else {
                *out_path = "/v1/completions";
                rc = encode_completion(&e, root);
            }
            break;
        case QR_OP_EMBED:
            *out_path = "/v1/embeddings";
            rc = encode_embed(&e, root);
            break;
        case QR_OP_RERANK:
            *out_path = "/v1/rerank";
            rc = encode_rerank(&e, root);
            break;
        default:
            rc = qr_api_error_set(err, QR_ERR_INVALID, 400, "invalid_request", "",
                                  "unknown operation");
        }
    }
    if (!rc)
        rc = extras(&e, root);
    if (!rc)
        rc = qr_enc_write(e.doc, out, err);
    yyjson_mut_doc_free(e.doc);
    return rc;
}

/* ======================================================================================== */
/* Decoder                                                                                   */
/* ======================================================================================== */

static enum qr_finish map_finish(struct qr_slice s)
{
    if (qr_slice_eq(s, "stop") || qr_slice_eq(s, "eos") || qr_slice_eq(s, "end_turn"))
        return QR_FINISH_STOP;
    if (qr_slice_eq(s, "length") || qr_slice_eq(s, "max_tokens"))
        return QR_FINISH_LENGTH;
    if (qr_slice_eq(s, "tool_calls") || qr_slice_eq(s, "function_call"))
        return QR_FINISH_TOOL_CALLS;
    if (qr_slice_eq(s, "content_filter"))
        return QR_FINISH_CONTENT_FILTER;
    if (qr_slice_eq(s, "abort") || qr_slice_eq(s, "cancelled"))
        return QR_FINISH_CANCELLED;
    if (qr_slice_eq(s, "error"))
        return QR_FINISH_ERROR;
    return QR_FINISH_STOP;
}

static int64_t i64_of(yyjson_val *v)
{
    int64_t x;
    return v && qr_json_i64(v, &x) && x >= 0 ? x : -1;
}

static int64_t ms_to_ns(yyjson_val *v)
{
    double ms;
    if (!v || !qr_json_f64(v, &ms) || !(ms >= 0 && ms < 9.0e12))
        return -1;
    return (int64_t) (ms * 1e6 + 0.5);
}

static void usage_of(struct qr_upstream_dec *dec, yyjson_val *u, yyjson_val *timings)
{
    struct qr_usage x;
    if (yyjson_is_obj(u)) {
        qr_usage_init(&x);
        x.prompt_tokens = i64_of(yyjson_obj_get(u, "prompt_tokens"));
        x.completion_tokens = i64_of(yyjson_obj_get(u, "completion_tokens"));
        x.cached_tokens =
            i64_of(yyjson_obj_get(yyjson_obj_get(u, "prompt_tokens_details"), "cached_tokens"));
        x.reasoning_tokens = i64_of(
            yyjson_obj_get(yyjson_obj_get(u, "completion_tokens_details"), "reasoning_tokens"));
        qr_dec_add_usage(dec, &x);
    }
    if (yyjson_is_obj(timings)) {
        qr_usage_init(&x);
        x.prompt_ns = ms_to_ns(yyjson_obj_get(timings, "prompt_ms"));
        x.eval_ns = ms_to_ns(yyjson_obj_get(timings, "predicted_ms"));
        qr_dec_add_usage(dec, &x);
        /* Counts from timings only where usage does not say: prompt_n excludes cached tokens. */
        qr_usage_init(&x);
        int64_t pn = i64_of(yyjson_obj_get(timings, "prompt_n"));
        int64_t cn = i64_of(yyjson_obj_get(timings, "cache_n"));
        x.prompt_tokens = pn >= 0 ? pn + (cn > 0 ? cn : 0) : -1;
        x.cached_tokens = cn;
        x.completion_tokens = i64_of(yyjson_obj_get(timings, "predicted_n"));
        qr_dec_add_usage_fallback(dec, &x);
    }
}

/* Tool-call arguments: a string as is, an object (non-standard servers) serialized. */
static enum qr_err with_args(yyjson_val *a, struct qr_slice *out, char **owned)
{
    *owned = NULL;
    *out = (struct qr_slice){"", 0};
    if (yyjson_is_str(a)) {
        *out = (struct qr_slice){yyjson_get_str(a), yyjson_get_len(a)};
    } else if (yyjson_is_obj(a) || yyjson_is_arr(a)) {
        size_t n;
        *owned = qr_json_write(a, &n);
        if (!*owned)
            return QR_ERR_NOMEM;
        *out = (struct qr_slice){*owned, n};
    }
    return QR_OK;
}

static enum qr_err tool_calls(struct qr_upstream_dec *dec, yyjson_val *arr, bool whole)
{
    size_t i, max;
    yyjson_val *tc;
    yyjson_arr_foreach(arr, i, max, tc)
    {
        if (!yyjson_is_obj(tc))
            continue;
        yyjson_val *fn = yyjson_obj_get(tc, "function");
        struct qr_slice id = qr_json_str(yyjson_obj_get(tc, "id"));
        struct qr_slice name = qr_json_str(yyjson_obj_get(fn, "name"));
        struct qr_slice args;
        char *owned;
        TRY(with_args(yyjson_obj_get(fn, "arguments"), &args, &owned));
        enum qr_err err;
        if (whole) {
            if (!yyjson_obj_get(fn, "arguments"))
                args = qr_slice_str("{}");
            err = qr_toolcalls_whole(&dec->tc, id, name, args, qr_dec_relay, dec);
        } else {
            int64_t key;
            yyjson_val *ix = yyjson_obj_get(tc, "index");
            if (!ix || !qr_json_i64(ix, &key) || key < 0)
                key = -1;
            err = qr_toolcalls_delta(&dec->tc, key, id, name, args, qr_dec_relay, dec);
        }
        free(owned);
        if (err)
            return err;
        if (dec->terminal)
            break;
    }
    return QR_OK;
}

/* A delta (streamed) or a message (whole): reasoning, content, tool calls. */
static enum qr_err message(struct qr_upstream_dec *dec, yyjson_val *m, bool whole)
{
    /* vLLM 0.11-0.15 send both names with the same text: take one, never both. */
    struct qr_slice r = qr_json_str(yyjson_obj_get(m, "reasoning_content"));
    if (r.len == 0)
        r = qr_json_str(yyjson_obj_get(m, "reasoning"));
    TRY(qr_dec_reasoning(dec, r));
    TRY(qr_dec_content(dec, qr_json_str(yyjson_obj_get(m, "content"))));
    TRY(qr_dec_content(dec, qr_json_str(yyjson_obj_get(m, "refusal"))));
    yyjson_val *tcs = yyjson_obj_get(m, "tool_calls");
    if (yyjson_is_arr(tcs))
        TRY(tool_calls(dec, tcs, whole));
    return dec->fn_err;
}

/* choices[] entry for choice 0 (the first when none says its index). */
static yyjson_val *choice0(yyjson_val *choices)
{
    size_t i, max;
    yyjson_val *c;
    yyjson_arr_foreach(choices, i, max, c)
    {
        int64_t ix;
        yyjson_val *v = yyjson_obj_get(c, "index");
        if (!v || (qr_json_i64(v, &ix) && ix == 0))
            return c;
    }
    return NULL;
}

static enum qr_err chunk_or_body(struct qr_upstream_dec *dec, yyjson_val *root, bool whole)
{
    TRY(qr_dec_start(dec, qr_json_str(yyjson_obj_get(root, "model"))));
    int64_t slot = i64_of(yyjson_obj_get(root, "id_slot"));
    if (slot < 0)
        slot = i64_of(yyjson_obj_get(root, "slot_id"));
    TRY(qr_dec_meta(dec, qr_json_str(yyjson_obj_get(root, "id")), slot));
    yyjson_val *choices = yyjson_obj_get(root, "choices");
    if (whole && !yyjson_is_arr(choices))
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("upstream answer has no choices"));
    yyjson_val *c = yyjson_is_arr(choices) ? choice0(choices) : NULL;
    if (yyjson_is_obj(c)) {
        yyjson_val *m = yyjson_obj_get(c, whole ? "message" : "delta");
        if (!yyjson_is_obj(m))
            m = yyjson_obj_get(c, whole ? "delta" : "message");
        if (yyjson_is_obj(m))
            TRY(message(dec, m, whole));
        TRY(qr_dec_content(dec, qr_json_str(yyjson_obj_get(c, "text"))));
        struct qr_slice fr = qr_json_str(yyjson_obj_get(c, "finish_reason"));
        if (fr.len)
            qr_dec_set_finish(dec, map_finish(fr), fr);
    }
    usage_of(dec, yyjson_obj_get(root, "usage"), yyjson_obj_get(root, "timings"));
    return dec->fn_err;
}

enum qr_err qr_openai_dec_chunk(struct qr_upstream_dec *dec, yyjson_val *root)
{
    if (dec->req->op == QR_OP_RERANK)
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("upstream streamed a rerank answer"));
    return chunk_or_body(dec, root, false);
}

struct emb {
    int64_t index;
    yyjson_val *vec;
};

static int emb_cmp(const void *a, const void *b)
{
    const struct emb *x = a, *y = b;
    return x->index < y->index ? -1 : x->index > y->index;
}

static enum qr_err embeddings(struct qr_upstream_dec *dec, yyjson_val *root, yyjson_val *data)
{
    TRY(qr_dec_start(dec, qr_json_str(yyjson_obj_get(root, "model"))));
    size_t n = yyjson_arr_size(data);
    struct emb *list = calloc(n + 1, sizeof(*list));
    if (!list)
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("out of memory for upstream embeddings"));
    size_t i, max;
    yyjson_val *it;
    const char *bad = NULL;
    yyjson_arr_foreach(data, i, max, it)
    {
        yyjson_val *ix = yyjson_obj_get(it, "index");
        list[i].index = (int64_t) i;
        if (ix && (!qr_json_i64(ix, &list[i].index) || list[i].index < 0 ||
                   (uint64_t) list[i].index >= n))
            bad = "upstream embedding index out of range";
        list[i].vec = yyjson_obj_get(it, "embedding");
    }
    if (!bad) {
        qsort(list, n, sizeof(*list), emb_cmp);
        for (i = 1; i < n; i++) {
            if (list[i].index == list[i - 1].index)
                bad = "upstream embedding index repeated";
        }
    }
    enum qr_err err = QR_OK;
    if (bad)
        err = qr_dec_fail(dec, 502, "upstream_error", false, qr_slice_str(bad));
    for (i = 0; !bad && !err && !dec->terminal && i < n; i++)
        err = qr_dec_embedding(dec, (uint32_t) list[i].index, list[i].vec);
    free(list);
    TRY(err);
    usage_of(dec, yyjson_obj_get(root, "usage"), NULL);
    qr_dec_set_finish(dec, QR_FINISH_STOP, (struct qr_slice){"", 0});
    return dec->fn_err;
}

/* A result's document index: an integral number naming one of n documents, else -1. */
static int64_t rerank_index(yyjson_val *it, size_t n)
{
    double x;
    if (!yyjson_is_obj(it) || !qr_json_f64(yyjson_obj_get(it, "index"), &x) || x != floor(x) ||
        !(x >= 0 && x < (double) n))
        return -1;
    return (int64_t) x;
}

/* A result's score member: relevance_score, or "score" (llama-server's older /rerank shape). */
static yyjson_val *rerank_score(yyjson_val *it)
{
    yyjson_val *v = yyjson_obj_get(it, "relevance_score");
    return v ? v : yyjson_obj_get(it, "score");
}

/* Why one result is unusable (NULL: it is fine, and its index is marked in seen). */
static const char *rerank_check(yyjson_val *it, size_t n, bool *seen)
{
    int64_t ix = rerank_index(it, n);
    double score;
    if (ix < 0)
        return "upstream rerank index out of range";
    if (seen[ix])
        return "upstream rerank index repeated";
    if (!qr_json_f64(rerank_score(it), &score) || !isfinite(score))
        return "upstream rerank score is not a finite number";
    seen[ix] = true;
    return NULL;
}

/* A rerank answer: results[] of {index, relevance_score}. Every index must name one of the
 * request's documents, once; every score must be a finite number. Anything else fails the whole
 * answer before any score goes out: a partial ranking would silently mislead. */
static enum qr_err rerank_results(struct qr_upstream_dec *dec, yyjson_val *root)
{
    TRY(qr_dec_start(dec, qr_json_str(yyjson_obj_get(root, "model"))));
    yyjson_val *results = yyjson_obj_get(root, "results");
    if (!yyjson_is_arr(results))
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("upstream rerank answer has no results array"));
    size_t n_docs = dec->req->n_inputs;
    if (yyjson_arr_size(results) > n_docs)
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("upstream sent more rerank results than documents"));
    bool *seen = calloc(n_docs + 1, sizeof(*seen));
    if (!seen)
        return qr_dec_fail(dec, 502, "upstream_error", false,
                           qr_slice_str("out of memory for upstream rerank results"));
    const char *bad = NULL;
    size_t i, max;
    yyjson_val *it;
    yyjson_arr_foreach(results, i, max, it)
    {
        if (!bad)
            bad = rerank_check(it, n_docs, seen);
    }
    free(seen);
    if (bad)
        return qr_dec_fail(dec, 502, "upstream_error", false, qr_slice_str(bad));
    yyjson_arr_foreach(results, i, max, it)
    {
        struct qr_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_RERANK;
        ev.index = (uint32_t) rerank_index(it, n_docs);
        qr_json_f64(rerank_score(it), &ev.score);
        TRY(qr_dec_emit(dec, &ev));
        if (dec->terminal)
            break;
    }
    usage_of(dec, yyjson_obj_get(root, "usage"), NULL);
    qr_dec_set_finish(dec, QR_FINISH_STOP, (struct qr_slice){"", 0});
    return dec->fn_err;
}

enum qr_err qr_openai_dec_body(struct qr_upstream_dec *dec, yyjson_val *root)
{
    if (dec->req->op == QR_OP_RERANK)
        return rerank_results(dec, root);
    yyjson_val *data = yyjson_obj_get(root, "data");
    if (yyjson_is_arr(data))
        return embeddings(dec, root, data);
    return chunk_or_body(dec, root, true);
}
