/* Ollama native upstream codec: the canonical request as an /api/chat, /api/generate or
 * /api/embed body, and one NDJSON line or whole body of the answer as canonical events (framing
 * and the order contract live in backend/codec.c). Facts from wire-protocols.md A.
 *
 * Encoding decisions:
 *  - content is one string: text parts joined with "\n" (as vLLM joins them); images go to
 *    "images" as base64; image URLs and audio cannot be expressed (422).
 *  - assistant history: "thinking", and tool_calls with the arguments object inserted as the
 *    exact JSON text (422 when it is not an object); ids kept when the client had them.
 *  - tool results: tool_name from the message, else from the earlier assistant call whose id
 *    it answers; tool_call_id kept.
 *  - tool_choice: auto/unset send the tools, none sends none, required / a named function
 *    cannot be expressed (422). parallel_tool_calls and tool strictness are hints Ollama has no
 *    field for: not sent.
 *  - think (quirks 7, 8), from what the adapter put in the dialect out of /api/show:
 *      model capabilities known: always sent. Unset -> true on a model listing "thinking", false
 *      otherwise; true or a level on a model without it -> 422 capability_unsupported (before
 *      anything is sent); a level (OpenAI's minimal -> low, xhigh and max -> high) goes as the
 *      string only when the model's thinking.values list it, else as true; false -> false.
 *      not known (/api/show failed): false/true/the level as sent (Ollama validates them
 *      itself), unset not sent (Ollama then applies the very rule above itself).
 *  - options carry the sampling slots, num_predict (max_tokens), stop, then the client's other
 *    Ollama options unchanged; num_ctx (context_len) only when the dialect says a model policy
 *    forwards it (it reloads the model, quirk 13; otherwise the adapter admits the request
 *    against the model's context length). keep_alive is the client's raw value.
 *  - extras of an Ollama client pass through unchanged; extras of an OpenAI client are refused
 *    (422) except the bookkeeping ones (user, metadata, store, service_tier, ...) and nulls.
 *  - n > 1, logprobs, echo and token-array inputs: 422.
 *  - rerank: 422 capability_unsupported (Ollama has no rerank API).
 *  - An OpenAI /v1/completions request is a raw prompt: sent with "raw": true. */
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
                            "%s cannot be sent to an Ollama backend", what);
}

static bool slice_same(struct qr_slice a, struct qr_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* content string and images array of one message (or of a generate request). */
static enum qr_err parts(struct enc *e, const struct qr_part *p, size_t n, yyjson_mut_val *obj,
                         const char *text_key)
{
    struct qr_buf text;
    qr_buf_init(&text, 0);
    yyjson_mut_val *images = NULL;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (p[i].kind == QR_PART_AUDIO) {
            qr_buf_cleanup(&text);
            return unsupported(e, "messages", "audio input");
        }
        if (p[i].kind == QR_PART_IMAGE) {
            if (p[i].is_url) {
                qr_buf_cleanup(&text);
                return unsupported(e, "messages", "an image given by URL");
            }
            if (e->d->think_known && !e->d->vision_capable) {
                qr_buf_cleanup(&text);
                struct qr_slice m =
                    e->d->upstream_model ? qr_slice_str(e->d->upstream_model) : e->req->model;
                return qr_api_error_set(e->err, QR_ERR_INVALID, 422, "capability_unsupported",
                                        "messages",
                                        "model '%.*s' cannot serve multimodal.vision (its Ollama "
                                        "capabilities do not list 'vision')",
                                        (int) (m.len < 200 ? m.len : 200), m.ptr ? m.ptr : "");
            }
            if (!images && !(images = yyjson_mut_arr(e->doc)))
                goto nomem;
            if (!yyjson_mut_arr_append(images, str(e, p[i].data)))
                goto nomem;
            continue;
        }
        if ((!first && qr_buf_append(&text, "\n", 1)) ||
            qr_buf_append(&text, p[i].text.ptr, p[i].text.len))
            goto nomem;
        first = false;
    }
    if (text_key &&
        !put(e, obj, text_key, yyjson_mut_strncpy(e->doc, text.ptr ? text.ptr : "", text.len)))
        goto nomem;
    qr_buf_cleanup(&text);
    if (images && !put(e, obj, "images", images))
        return nomem(e);
    return QR_OK;
nomem:
    qr_buf_cleanup(&text);
    return nomem(e);
}

/* Arguments must be a JSON object: Ollama types them as one. */
static bool is_object(struct qr_slice json)
{
    yyjson_doc *doc =
        yyjson_read_opts((char *) json.ptr, json.len, YYJSON_READ_NUMBER_AS_RAW, NULL, NULL);
    bool ok = doc && yyjson_is_obj(yyjson_doc_get_root(doc));
    yyjson_doc_free(doc);
    return ok;
}

static enum qr_err assistant_calls(struct enc *e, size_t m, yyjson_mut_val *o)
{
    const struct qr_message *msg = &e->req->messages[m];
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr || !put(e, o, "tool_calls", arr))
        return nomem(e);
    for (size_t j = 0; j < msg->n_tool_calls; j++) {
        const struct qr_tool_call *c = &msg->tool_calls[j];
        struct qr_slice args = c->arguments.len ? c->arguments : qr_slice_str("{}");
        if (!is_object(args)) {
            char param[96];
            snprintf(param, sizeof(param), "messages[%zu].tool_calls[%zu].function.arguments", m,
                     j);
            return unsupported(e, param, "tool-call arguments that are not a JSON object");
        }
        yyjson_mut_val *tc = yyjson_mut_obj(e->doc), *fn = yyjson_mut_obj(e->doc);
        if (!tc || !fn || (c->id.len && !put(e, tc, "id", str(e, c->id))) ||
            !put(e, fn, "name", str(e, c->name)) || !put(e, fn, "arguments", raw(e, args)) ||
            !put(e, tc, "function", fn) || !yyjson_mut_arr_append(arr, tc))
            return nomem(e);
    }
    return QR_OK;
}

/* The tool name a result answers, found by its tool_call_id in earlier assistant turns. */
static struct qr_slice name_for_id(const struct qr_request *req, size_t m, struct qr_slice id)
{
    for (size_t k = m; k-- > 0;) {
        const struct qr_message *a = &req->messages[k];
        for (size_t j = 0; a->role == QR_ROLE_ASSISTANT && j < a->n_tool_calls; j++) {
            if (slice_same(a->tool_calls[j].id, id))
                return a->tool_calls[j].name;
        }
    }
    return (struct qr_slice){"", 0};
}

static enum qr_err one_message(struct enc *e, size_t m, yyjson_mut_val *arr)
{
    const struct qr_message *msg = &e->req->messages[m];
    if (msg->name.len)
        return unsupported(e, "messages", "a message participant name");
    yyjson_mut_val *o = yyjson_mut_obj(e->doc);
    const char *role = msg->role == QR_ROLE_DEVELOPER ? "system" : qr_role_str(msg->role);
    if (!o || !yyjson_mut_obj_add_str(e->doc, o, "role", role))
        return nomem(e);
    TRY(parts(e, msg->parts, msg->n_parts, o, "content"));
    if (msg->role == QR_ROLE_ASSISTANT) {
        if (msg->reasoning.len && !put(e, o, "thinking", str(e, msg->reasoning)))
            return nomem(e);
        if (msg->n_tool_calls)
            TRY(assistant_calls(e, m, o));
    } else if (msg->role == QR_ROLE_TOOL) {
        struct qr_slice name = msg->tool_name.len      ? msg->tool_name
                               : msg->tool_call_id.len ? name_for_id(e->req, m, msg->tool_call_id)
                                                       : (struct qr_slice){"", 0};
        if (name.len && !put(e, o, "tool_name", str(e, name)))
            return nomem(e);
        if (msg->tool_call_id.len && !put(e, o, "tool_call_id", str(e, msg->tool_call_id)))
            return nomem(e);
    }
    return yyjson_mut_arr_append(arr, o) ? QR_OK : nomem(e);
}

static enum qr_err messages(struct enc *e, yyjson_mut_val *root)
{
    yyjson_mut_val *arr = yyjson_mut_arr(e->doc);
    if (!arr || !put(e, root, "messages", arr))
        return nomem(e);
    for (size_t m = 0; m < e->req->n_messages; m++)
        TRY(one_message(e, m, arr));
    return QR_OK;
}

static enum qr_err tools(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    switch (r->tool_choice.kind) {
    case QR_TOOL_CHOICE_REQUIRED:
        return unsupported(e, "tool_choice", "tool_choice \"required\"");
    case QR_TOOL_CHOICE_FUNCTION:
        return unsupported(e, "tool_choice", "a forced tool_choice function");
    case QR_TOOL_CHOICE_NONE:
        return QR_OK; /* no tools: the model cannot call one */
    default:
        break;
    }
    if (r->n_tools == 0)
        return QR_OK;
    if (e->d->think_known && !e->d->tools_capable) {
        struct qr_slice m = e->d->upstream_model ? qr_slice_str(e->d->upstream_model) : r->model;
        return qr_api_error_set(e->err, QR_ERR_INVALID, 422, "capability_unsupported", "tools",
                                "model '%.*s' cannot serve tools.calling (its Ollama capabilities "
                                "do not list 'tools')",
                                (int) (m.len < 200 ? m.len : 200), m.ptr ? m.ptr : "");
    }
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
            !put(e, o, "function", fn) || !yyjson_mut_arr_append(arr, o))
            return nomem(e);
    }
    return QR_OK;
}

static enum qr_err format(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_format *f = &e->req->format;
    if (f->kind == QR_FORMAT_JSON)
        return yyjson_mut_obj_add_str(e->doc, root, "format", "json") ? QR_OK : nomem(e);
    if (f->kind == QR_FORMAT_SCHEMA)
        return put(e, root, "format", raw(e, f->schema)) ? QR_OK : nomem(e);
    return QR_OK;
}

/* The level the client asked for in Ollama's three (OpenAI's extra levels mapped), as a
 * QR_THINK_LEVEL_* bit; 0 for a string that is none of them. */
static unsigned level_bit(struct qr_slice lv, const char **name)
{
    if (qr_slice_eq(lv, "minimal") || qr_slice_eq(lv, "low")) {
        *name = "low";
        return QR_THINK_LEVEL_LOW;
    }
    if (qr_slice_eq(lv, "medium")) {
        *name = "medium";
        return QR_THINK_LEVEL_MEDIUM;
    }
    if (qr_slice_eq(lv, "high") || qr_slice_eq(lv, "xhigh") || qr_slice_eq(lv, "max")) {
        *name = "high";
        return QR_THINK_LEVEL_HIGH;
    }
    *name = NULL;
    return 0;
}

/* think, always explicit once the model's capabilities are known (quirks 7 and 8; the table is
 * in the file comment and docs/API.md). */
static enum qr_err think(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_dialect *d = e->d;
    const struct qr_think *t = &e->req->think;
    bool wants = t->kind == QR_THINK_ON || t->kind == QR_THINK_LEVEL;
    if (d->think_known && !d->think_capable && wants) {
        struct qr_slice m = d->upstream_model ? qr_slice_str(d->upstream_model) : e->req->model;
        return qr_api_error_set(e->err, QR_ERR_INVALID, 422, "capability_unsupported", "think",
                                "model '%.*s' does not support thinking (its Ollama capabilities "
                                "do not list 'thinking')",
                                (int) (m.len < 200 ? m.len : 200), m.ptr ? m.ptr : "");
    }
    bool ok;
    switch (t->kind) {
    case QR_THINK_UNSET:
        if (!d->think_known)
            return QR_OK; /* nothing known: Ollama's own default, the same rule as below */
        ok = yyjson_mut_obj_add_bool(e->doc, root, "think", d->think_capable);
        break;
    case QR_THINK_LEVEL: {
        const char *name;
        unsigned bit = level_bit(t->level, &name);
        if (!d->think_known) /* levels unknown: the client's level, Ollama validates it */
            ok = put(e, root, "think", name ? yyjson_mut_str(e->doc, name) : str(e, t->level));
        else if (bit && (d->think_levels & bit))
            ok = yyjson_mut_obj_add_str(e->doc, root, "think", name);
        else
            ok = yyjson_mut_obj_add_bool(e->doc, root, "think", true);
        break;
    }
    default:
        ok = yyjson_mut_obj_add_bool(e->doc, root, "think", t->kind == QR_THINK_ON);
        break;
    }
    return ok ? QR_OK : nomem(e);
}

static enum qr_err keep_alive(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_keep_alive *k = &e->req->keep_alive;
    if (!k->set)
        return QR_OK;
    yyjson_mut_val *v;
    if (k->raw.len) {
        v = raw(e, k->raw);
    } else if (k->forever) {
        v = yyjson_mut_sint(e->doc, -1);
    } else {
        char buf[40];
        snprintf(buf, sizeof(buf), "%lldms", (long long) k->ms);
        v = yyjson_mut_strcpy(e->doc, buf);
    }
    return put(e, root, "keep_alive", v) ? QR_OK : nomem(e);
}

static enum qr_err options(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    const struct qr_sampling *s = &r->sampling;
    yyjson_mut_doc *doc = e->doc;
    yyjson_mut_val *o = yyjson_mut_obj(doc);
    bool ok = o != NULL;
#define F64(field, key)                                                                            \
    if (s->field.set)                                                                              \
        ok = ok && yyjson_mut_obj_add_real(doc, o, key, s->field.v);
#define I64(field, key)                                                                            \
    if (s->field.set)                                                                              \
        ok = ok && yyjson_mut_obj_add_sint(doc, o, key, s->field.v);
    F64(temperature, "temperature")
    F64(top_p, "top_p")
    I64(top_k, "top_k")
    F64(min_p, "min_p")
    F64(typical_p, "typical_p")
    F64(repeat_penalty, "repeat_penalty")
    F64(presence_penalty, "presence_penalty")
    F64(frequency_penalty, "frequency_penalty")
    I64(seed, "seed")
    I64(repeat_last_n, "repeat_last_n")
    I64(num_keep, "num_keep")
#undef F64
#undef I64
    if (r->max_tokens.set)
        ok = ok && yyjson_mut_obj_add_sint(doc, o, "num_predict", r->max_tokens.v);
    if (r->context_len.set && e->d->send_num_ctx)
        ok = ok && yyjson_mut_obj_add_sint(doc, o, "num_ctx", r->context_len.v);
    if (r->n_stop) {
        yyjson_mut_val *arr = yyjson_mut_arr(doc);
        ok = ok && arr && put(e, o, "stop", arr);
        for (size_t i = 0; ok && i < r->n_stop; i++)
            ok = yyjson_mut_arr_append(arr, str(e, r->stop[i]));
    }
    for (size_t i = 0; ok && i < r->n_extra_options; i++) {
        const struct qr_extra *x = &r->extra_options[i];
        ok =
            yyjson_mut_obj_add(o, yyjson_mut_strncpy(doc, x->key.ptr, x->key.len), raw(e, x->json));
    }
    if (!ok)
        return nomem(e);
    if (yyjson_mut_obj_size(o) && !put(e, root, "options", o))
        return nomem(e);
    return QR_OK;
}

static bool key_in(struct qr_slice k, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (qr_slice_eq(k, list[i]))
            return true;
    }
    return false;
}

static enum qr_err extras(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    static const char *const fixed[] = {"model",  "messages", "prompt",    "input",
                                        "stream", "options",  "format",    "think",
                                        "tools",  "images",   "keep_alive"};
    static const char *const openai_ignored[] = {"user",
                                                 "metadata",
                                                 "store",
                                                 "service_tier",
                                                 "safety_identifier",
                                                 "prompt_cache_key",
                                                 "prompt_cache_retention"};
    for (size_t i = 0; i < r->n_extras; i++) {
        const struct qr_extra *x = &r->extras[i];
        if (qr_slice_eq(x->json, "null") || key_in(x->key, fixed, QR_ARRAY_LEN(fixed)))
            continue;
        char param[80], what[120];
        snprintf(param, sizeof(param), "%.*s", (int) x->key.len, x->key.ptr);
        if (r->protocol == QR_PROTO_OPENAI) {
            if (key_in(x->key, openai_ignored, QR_ARRAY_LEN(openai_ignored)))
                continue;
            snprintf(what, sizeof(what), "OpenAI field '%.*s'", (int) x->key.len, x->key.ptr);
            return unsupported(e, param, what);
        }
        if ((qr_slice_eq(x->key, "logprobs") && !qr_slice_eq(x->json, "false")) ||
            (qr_slice_eq(x->key, "top_logprobs") && !qr_slice_eq(x->json, "0")))
            return unsupported(e, param, "logprobs");
        if (!yyjson_mut_obj_add(root, yyjson_mut_strncpy(e->doc, x->key.ptr, x->key.len),
                                raw(e, x->json)))
            return nomem(e);
    }
    return QR_OK;
}

static enum qr_err common_checks(struct enc *e)
{
    const struct qr_request *r = e->req;
    if (r->n_choices.set && r->n_choices.v != 1)
        return unsupported(e, "n", "n other than 1");
    if (r->logprobs == QR_TRUE || (r->top_logprobs.set && r->top_logprobs.v > 0))
        return unsupported(e, "logprobs", "logprobs");
    if (r->echo)
        return unsupported(e, "echo", "echo");
    if (r->input_tokens.len)
        return unsupported(e, "input", "token-array input");
    return QR_OK;
}

/* Fields every generating request carries after its own. */
static enum qr_err tail(struct enc *e, yyjson_mut_val *root)
{
    TRY(format(e, root));
    TRY(think(e, root));
    TRY(keep_alive(e, root));
    TRY(options(e, root));
    return yyjson_mut_obj_add_bool(e->doc, root, "stream", e->req->stream) ? QR_OK : nomem(e);
}

static enum qr_err encode_generate(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    bool rawp = r->raw || r->protocol == QR_PROTO_OPENAI;
    if (!put(e, root, "prompt", str(e, r->prompt)) ||
        (r->suffix.len && !put(e, root, "suffix", str(e, r->suffix))) ||
        (r->system.len && !put(e, root, "system", str(e, r->system))) ||
        (r->template_.len && !put(e, root, "template", str(e, r->template_))) ||
        (r->context.len && !put(e, root, "context", raw(e, r->context))) ||
        (rawp && !yyjson_mut_obj_add_bool(e->doc, root, "raw", true)))
        return nomem(e);
    TRY(parts(e, r->images, r->n_images, root, NULL));
    return tail(e, root);
}

static enum qr_err encode_embed(struct enc *e, yyjson_mut_val *root)
{
    const struct qr_request *r = e->req;
    yyjson_mut_val *in;
    if (!r->input_is_list && r->n_inputs == 1) {
        in = str(e, r->inputs[0]);
    } else {
        in = yyjson_mut_arr(e->doc);
        for (size_t i = 0; in && i < r->n_inputs; i++) {
            if (!yyjson_mut_arr_append(in, str(e, r->inputs[i])))
                return nomem(e);
        }
    }
    if (!put(e, root, "input", in))
        return nomem(e);
    if (r->truncate != QR_UNSET &&
        !yyjson_mut_obj_add_bool(e->doc, root, "truncate", r->truncate == QR_TRUE))
        return nomem(e);
    if (r->dimensions.set && !yyjson_mut_obj_add_sint(e->doc, root, "dimensions", r->dimensions.v))
        return nomem(e);
    TRY(keep_alive(e, root));
    return options(e, root);
}

enum qr_err qr_ollama_encode(const struct qr_dialect *d, const struct qr_request *req,
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
            *out_path = "/api/chat";
            if (!(rc = messages(&e, root)) && !(rc = tools(&e, root)))
                rc = tail(&e, root);
            break;
        case QR_OP_COMPLETION:
            *out_path = "/api/generate";
            rc = encode_generate(&e, root);
            break;
        case QR_OP_EMBED:
            *out_path = "/api/embed";
            rc = encode_embed(&e, root);
            break;
        case QR_OP_RERANK:
            rc = qr_api_error_set(err, QR_ERR_INVALID, 422, "capability_unsupported", "model",
                                  "model '%.*s': reranking cannot be sent to an Ollama backend "
                                  "(Ollama has no rerank API)",
                                  (int) (req->model.len < 200 ? req->model.len : 200),
                                  req->model.ptr ? req->model.ptr : "");
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

static int64_t i64_of(yyjson_val *v)
{
    int64_t x;
    return v && qr_json_i64(v, &x) && x >= 0 ? x : -1;
}

static void metrics(struct qr_upstream_dec *dec, yyjson_val *root)
{
    struct qr_usage u;
    qr_usage_init(&u);
    u.prompt_tokens = i64_of(yyjson_obj_get(root, "prompt_eval_count"));
    u.completion_tokens = i64_of(yyjson_obj_get(root, "eval_count"));
    u.total_ns = i64_of(yyjson_obj_get(root, "total_duration"));
    u.load_ns = i64_of(yyjson_obj_get(root, "load_duration"));
    u.prompt_ns = i64_of(yyjson_obj_get(root, "prompt_eval_duration"));
    u.eval_ns = i64_of(yyjson_obj_get(root, "eval_duration"));
    qr_dec_add_usage(dec, &u);
}

static enum qr_err tool_calls(struct qr_upstream_dec *dec, yyjson_val *arr)
{
    size_t i, max;
    yyjson_val *tc;
    yyjson_arr_foreach(arr, i, max, tc)
    {
        yyjson_val *fn = yyjson_obj_get(tc, "function");
        yyjson_val *a = yyjson_obj_get(fn, "arguments");
        struct qr_slice args = qr_slice_str("{}");
        char *owned = NULL;
        if (yyjson_is_str(a)) {
            args = (struct qr_slice){yyjson_get_str(a), yyjson_get_len(a)};
        } else if (a && !yyjson_is_null(a)) {
            size_t n;
            if (!(owned = qr_json_write(a, &n)))
                return QR_ERR_NOMEM;
            args = (struct qr_slice){owned, n};
        }
        enum qr_err err =
            qr_toolcalls_whole(&dec->tc, qr_json_str(yyjson_obj_get(tc, "id")),
                               qr_json_str(yyjson_obj_get(fn, "name")), args, qr_dec_relay, dec);
        free(owned);
        if (err)
            return err;
        if (dec->terminal)
            break;
    }
    return QR_OK;
}

static enum qr_finish map_done(struct qr_slice s)
{
    if (qr_slice_eq(s, "length"))
        return QR_FINISH_LENGTH;
    return QR_FINISH_STOP; /* stop, load, unload, connection_closed, unknown: raw kept */
}

enum qr_err qr_ollama_dec_chunk(struct qr_upstream_dec *dec, yyjson_val *root)
{
    if (dec->done_marker)
        return QR_OK; /* clients stop at done:true; so do we */
    TRY(qr_dec_start(dec, qr_json_str(yyjson_obj_get(root, "model"))));
    yyjson_val *m = yyjson_obj_get(root, "message");
    if (yyjson_is_obj(m)) {
        TRY(qr_dec_reasoning(dec, qr_json_str(yyjson_obj_get(m, "thinking"))));
        TRY(qr_dec_content(dec, qr_json_str(yyjson_obj_get(m, "content"))));
        yyjson_val *tcs = yyjson_obj_get(m, "tool_calls");
        if (yyjson_is_arr(tcs))
            TRY(tool_calls(dec, tcs));
    }
    TRY(qr_dec_reasoning(dec, qr_json_str(yyjson_obj_get(root, "thinking"))));
    TRY(qr_dec_content(dec, qr_json_str(yyjson_obj_get(root, "response"))));
    if (yyjson_get_bool(yyjson_obj_get(root, "done"))) {
        dec->done_marker = true;
        struct qr_slice why = qr_json_str(yyjson_obj_get(root, "done_reason"));
        qr_dec_set_finish(dec, map_done(why), why);
        metrics(dec, root);
        /* /api/generate's context tokens: handed back to an Ollama client unchanged */
        yyjson_val *ctx = yyjson_obj_get(root, "context");
        if (yyjson_is_arr(ctx)) {
            size_t n;
            char *json = qr_json_write(ctx, &n);
            if (!json)
                return QR_ERR_NOMEM;
            dec->context.len = 0;
            enum qr_err e = qr_buf_append(&dec->context, json, n);
            free(json);
            TRY(e);
        }
    }
    return dec->fn_err;
}

enum qr_err qr_ollama_dec_body(struct qr_upstream_dec *dec, yyjson_val *root)
{
    yyjson_val *many = yyjson_obj_get(root, "embeddings");
    yyjson_val *one = yyjson_obj_get(root, "embedding");
    if (!yyjson_is_arr(many) && !yyjson_is_arr(one))
        return qr_ollama_dec_chunk(dec, root);
    TRY(qr_dec_start(dec, qr_json_str(yyjson_obj_get(root, "model"))));
    if (yyjson_is_arr(many)) {
        size_t i, max;
        yyjson_val *v;
        yyjson_arr_foreach(many, i, max, v)
        {
            TRY(qr_dec_embedding(dec, (uint32_t) i, v));
            if (dec->terminal)
                return dec->fn_err;
        }
    } else {
        TRY(qr_dec_embedding(dec, 0, one));
    }
    metrics(dec, root);
    qr_dec_set_finish(dec, QR_FINISH_STOP, (struct qr_slice){"", 0});
    return dec->fn_err;
}
