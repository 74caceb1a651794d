/* The OpenAI client codec, decoding half (encoding: openai_encode.c). Decoding walks one yyjson
 * document (numbers read as raw text so that schemas and extras keep the client's exact numbers)
 * and copies what the canonical request needs into the request's arena; every refusal names the
 * JSON path of the offending field in "param". Encoding writes the JSON by hand into a qr_buf with
 * a sticky error, because the chunk shapes are fixed and small and the bytes must be exactly what
 * openai-node's stream helper accepts (wire-protocols.md B.4/B.5, quirk rows 20-23): a role chunk
 * first, tool calls opened with id/type/name/arguments:"" and continued by argument fragments, one
 * finish_reason chunk, an optional usage chunk with "choices":[], then [DONE]; a failure is one
 * error event then [DONE].
 *
 * Decisions (also in openai_codec.h):
 * - A string content is one TEXT part (also when empty); an array gives its parts in order.
 *   Assistant content null or absent sets content_null. Other roles need content.
 * - Reasoning of an earlier assistant turn: reasoning_content, else reasoning.
 * - Tool-call arguments are a JSON string in the wire format; its content must parse as JSON and
 *   is kept verbatim ("" becomes "{}"). An assistant's tool_calls count is capped by max_tools.
 * - response_format json_schema without "schema" is QR_FORMAT_JSON (any JSON object).
 * - max_completion_tokens wins over max_tokens; both must be >= 0.
 * - include_usage holds only when stream is true. stream_options keys other than include_usage
 *   (include_obfuscation) describe response padding the Runtime does not send and are ignored.
 * - Unknown keys inside messages and content parts are ignored (the contract has no slot); the
 *   deprecated function role and function_call are refused.
 * - A tool call that ends without argument bytes is sent as arguments "{}" in both encodings. */
#include "api/openai_codec.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "core/http_server.h"
#include "core/json_strict.h"

/* ---------------------------------------------------------------------------------------------
 * Decoding
 * ------------------------------------------------------------------------------------------- */

struct dec {
    enum qr_op op;
    struct qr_arena *a;
    const struct qr_decode_limits *lim;
    struct qr_api_error *err;
};

#define PATH_MAX_LEN 64

/* JSON paths for error params; truncation of a very deep path is fine (the cap is the field's). */
static void pathf(char *dst, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pathf(char *dst, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

static enum qr_err bad(struct dec *d, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum qr_err bad(struct dec *d, const char *param, const char *fmt, ...)
{
    char msg[sizeof(d->err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return qr_api_error_set(d->err, QR_ERR_INVALID, 400, "invalid_request", param, "%s", msg);
}

static enum qr_err unsupported(struct dec *d, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum qr_err unsupported(struct dec *d, const char *param, const char *fmt, ...)
{
    char msg[sizeof(d->err->message)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return qr_api_error_set(d->err, QR_ERR_INVALID, 422, "capability_unsupported", param, "%s",
                            msg);
}

static enum qr_err too_large(struct dec *d)
{
    return qr_api_error_set(d->err, QR_ERR_TOO_LARGE, 413, "request_too_large", "",
                            "request needs more memory than one request may use");
}

static enum qr_err wrong_type(struct dec *d, const char *param, const char *what)
{
    return bad(d, param, "'%s' must be %s", param, what);
}

static bool key_is(yyjson_val *k, const char *s)
{
    size_t n = strlen(s);
    return yyjson_get_len(k) == n && memcmp(yyjson_get_str(k), s, n) == 0;
}

static bool str_is(yyjson_val *v, const char *s)
{
    return yyjson_is_str(v) && key_is(v, s);
}

static enum qr_err dup(struct dec *d, const char *s, size_t n, struct qr_slice *out)
{
    *out = qr_arena_dup(d->a, s, n);
    return out->ptr ? QR_OK : too_large(d);
}

static enum qr_err dup_val(struct dec *d, yyjson_val *v, struct qr_slice *out)
{
    return dup(d, yyjson_get_str(v), yyjson_get_len(v), out);
}

/* A required string. */
static enum qr_err get_str(struct dec *d, yyjson_val *v, const char *param, struct qr_slice *out)
{
    if (!yyjson_is_str(v))
        return wrong_type(d, param, "a string");
    return dup_val(d, v, out);
}

/* An optional string: absent or null leaves out untouched. */
static enum qr_err opt_str(struct dec *d, yyjson_val *v, const char *param, struct qr_slice *out)
{
    if (!v || yyjson_is_null(v))
        return QR_OK;
    return get_str(d, v, param, out);
}

/* The value as exact JSON text (numbers as written, the rest minified) in the arena. */
static enum qr_err json_text(struct dec *d, yyjson_val *v, struct qr_slice *out)
{
    size_t len = 0;
    char *s = yyjson_val_write(v, YYJSON_WRITE_NOFLAG, &len);
    if (!s)
        return too_large(d);
    enum qr_err rc = dup(d, s, len, out);
    free(s);
    return rc;
}

/* Numbers are raw text (YYJSON_READ_NUMBER_AS_RAW); yyjson has checked their syntax. */
static bool raw_copy(yyjson_val *v, char *buf, size_t cap)
{
    size_t n = yyjson_get_len(v);
    if (!yyjson_is_raw(v) || n == 0 || n >= cap)
        return false;
    memcpy(buf, yyjson_get_raw(v), n);
    buf[n] = '\0';
    return true;
}

static enum qr_err get_f64(struct dec *d, yyjson_val *v, const char *param, struct qr_opt_f64 *out)
{
    if (!v || yyjson_is_null(v)) /* absent or null: not sent */
        return QR_OK;
    char buf[128];
    if (!raw_copy(v, buf, sizeof(buf)))
        return wrong_type(d, param, "a number");
    errno = 0;
    double x = strtod(buf, NULL);
    if (errno == ERANGE && isinf(x))
        return bad(d, param, "'%s' is out of range", param);
    out->set = true;
    out->v = x;
    return QR_OK;
}

static enum qr_err get_i64(struct dec *d, yyjson_val *v, const char *param, struct qr_opt_i64 *out)
{
    if (!v || yyjson_is_null(v))
        return QR_OK;
    char buf[128];
    if (!raw_copy(v, buf, sizeof(buf)))
        return wrong_type(d, param, "an integer");
    errno = 0;
    if (!strpbrk(buf, ".eE")) {
        long long x = strtoll(buf, NULL, 10);
        if (errno == ERANGE)
            return bad(d, param, "'%s' is out of range", param);
        out->set = true;
        out->v = x;
        return QR_OK;
    }
    double x = strtod(buf, NULL); /* 100.0 is an integer too */
    if (!(x >= -9007199254740992.0 && x <= 9007199254740992.0) || x != floor(x))
        return wrong_type(d, param, "an integer");
    out->set = true;
    out->v = (int64_t) x;
    return QR_OK;
}

static enum qr_err get_bool(struct dec *d, yyjson_val *v, const char *param, bool *out,
                            bool *out_set)
{
    if (!v || yyjson_is_null(v))
        return QR_OK;
    if (!yyjson_is_bool(v))
        return wrong_type(d, param, "a boolean");
    *out = yyjson_get_bool(v);
    if (out_set)
        *out_set = true;
    return QR_OK;
}

static enum qr_err get_tri(struct dec *d, yyjson_val *v, const char *param, enum qr_tristate *out)
{
    bool b = false, set = false;
    enum qr_err rc = get_bool(d, v, param, &b, &set);
    if (rc == QR_OK && set)
        *out = b ? QR_TRUE : QR_FALSE;
    return rc;
}

/* JSON text of a tool call's arguments string: must parse; "" is "{}". */
static enum qr_err check_args(struct dec *d, yyjson_val *v, const char *param, struct qr_slice *out)
{
    if (!yyjson_is_str(v))
        return wrong_type(d, param, "a string containing JSON");
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    if (n == 0)
        return dup(d, "{}", 2, out);
    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) (uintptr_t) s, n, YYJSON_READ_NOFLAG, NULL, &rerr);
    if (!doc)
        return bad(d, param, "'%s' is not valid JSON: %s at byte %zu", param, rerr.msg, rerr.pos);
    yyjson_doc_free(doc);
    return dup(d, s, n, out);
}

/* ---- content parts ---- */

/* "data:<mime>;base64,<data>" -> mime + data; http(s) URLs kept as URLs. */
static enum qr_err dec_image_url(struct dec *d, yyjson_val *url, const char *param,
                                 struct qr_part *p)
{
    if (!yyjson_is_str(url))
        return wrong_type(d, param, "a string");
    const char *s = yyjson_get_str(url);
    size_t n = yyjson_get_len(url);
    if (n >= 5 && strncasecmp(s, "data:", 5) == 0) {
        const char *comma = memchr(s, ',', n);
        if (!comma)
            return bad(d, param, "'%s' is a data URI without ','", param);
        const char *meta = s + 5;
        size_t mlen = (size_t) (comma - meta);
        if (mlen < 7 || strncasecmp(meta + mlen - 7, ";base64", 7) != 0)
            return bad(d, param, "'%s' must be a base64 data URI", param);
        mlen -= 7;
        const char *semi = memchr(meta, ';', mlen); /* drop parameters such as charset */
        if (semi)
            mlen = (size_t) (semi - meta);
        enum qr_err rc = dup(d, meta, mlen, &p->mime);
        if (rc)
            return rc;
        return dup(d, comma + 1, n - (size_t) (comma + 1 - s), &p->data);
    }
    if ((n > 7 && strncasecmp(s, "http://", 7) == 0) ||
        (n > 8 && strncasecmp(s, "https://", 8) == 0)) {
        p->is_url = true;
        return dup(d, s, n, &p->data);
    }
    return bad(d, param, "'%s' must be an http(s) URL or a base64 data URI", param);
}

static const char *audio_mime(yyjson_val *fmt)
{
    if (str_is(fmt, "mp3"))
        return "audio/mpeg";
    return NULL;
}

static enum qr_err dec_part(struct dec *d, yyjson_val *v, const char *base, struct qr_part *p)
{
    char param[PATH_MAX_LEN];
    if (!yyjson_is_obj(v))
        return wrong_type(d, base, "an object");
    yyjson_val *type = yyjson_obj_get(v, "type");
    pathf(param, sizeof(param), "%s.type", base);
    if (!yyjson_is_str(type))
        return wrong_type(d, param, "a string");
    if (str_is(type, "text")) {
        p->kind = QR_PART_TEXT;
        pathf(param, sizeof(param), "%s.text", base);
        return get_str(d, yyjson_obj_get(v, "text"), param, &p->text);
    }
    if (str_is(type, "image_url")) {
        p->kind = QR_PART_IMAGE;
        yyjson_val *iu = yyjson_obj_get(v, "image_url");
        pathf(param, sizeof(param), "%s.image_url", base);
        if (!yyjson_is_obj(iu))
            return wrong_type(d, param, "an object");
        pathf(param, sizeof(param), "%s.image_url.url", base);
        enum qr_err rc = dec_image_url(d, yyjson_obj_get(iu, "url"), param, p);
        if (rc)
            return rc;
        pathf(param, sizeof(param), "%s.image_url.detail", base);
        return opt_str(d, yyjson_obj_get(iu, "detail"), param, &p->detail);
    }
    if (str_is(type, "input_audio")) {
        p->kind = QR_PART_AUDIO;
        yyjson_val *ia = yyjson_obj_get(v, "input_audio");
        pathf(param, sizeof(param), "%s.input_audio", base);
        if (!yyjson_is_obj(ia))
            return wrong_type(d, param, "an object");
        pathf(param, sizeof(param), "%s.input_audio.data", base);
        enum qr_err rc = get_str(d, yyjson_obj_get(ia, "data"), param, &p->data);
        if (rc)
            return rc;
        yyjson_val *fmt = yyjson_obj_get(ia, "format");
        pathf(param, sizeof(param), "%s.input_audio.format", base);
        if (!yyjson_is_str(fmt))
            return wrong_type(d, param, "a string");
        const char *m = audio_mime(fmt);
        if (m)
            return dup(d, m, strlen(m), &p->mime);
        char mime[128];
        int ml = snprintf(mime, sizeof(mime), "audio/%.*s", (int) yyjson_get_len(fmt),
                          yyjson_get_str(fmt));
        if (ml < 0 || (size_t) ml >= sizeof(mime))
            return bad(d, param, "'%s' is too long", param);
        return dup(d, mime, (size_t) ml, &p->mime);
    }
    pathf(param, sizeof(param), "%s.type", base);
    return bad(d, param, "content part type '%.64s' is not supported", yyjson_get_str(type));
}

static enum qr_err dec_content(struct dec *d, yyjson_val *v, size_t i, struct qr_message *m)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "messages[%zu].content", i);
    if (!v || yyjson_is_null(v)) {
        if (m->role == QR_ROLE_ASSISTANT) {
            m->content_null = true;
            return QR_OK;
        }
        if (!v)
            return bad(d, param, "'%s' is required", param);
        return wrong_type(d, param, "a string or an array of content parts");
    }
    if (yyjson_is_str(v)) {
        m->parts = qr_arena_alloc(d->a, sizeof(*m->parts));
        if (!m->parts)
            return too_large(d);
        m->n_parts = 1;
        m->parts[0].kind = QR_PART_TEXT;
        return dup_val(d, v, &m->parts[0].text);
    }
    if (!yyjson_is_arr(v))
        return wrong_type(d, param, "a string, an array of content parts or null");
    size_t n = yyjson_arr_size(v);
    m->parts = qr_arena_array(d->a, n, sizeof(*m->parts));
    if (!m->parts)
        return too_large(d);
    m->n_parts = n;
    size_t j, jmax;
    yyjson_val *part;
    yyjson_arr_foreach(v, j, jmax, part)
    {
        char base[PATH_MAX_LEN];
        pathf(base, sizeof(base), "messages[%zu].content[%zu]", i, j);
        enum qr_err rc = dec_part(d, part, base, &m->parts[j]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- messages ---- */

static enum qr_err dec_role(struct dec *d, yyjson_val *v, size_t i, enum qr_role *out)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "messages[%zu].role", i);
    if (!v)
        return bad(d, param, "'%s' is required", param);
    if (!yyjson_is_str(v))
        return wrong_type(d, param, "a string");
    static const struct {
        const char *name;
        enum qr_role role;
    } roles[] = {
        {"system", QR_ROLE_SYSTEM},       {"user", QR_ROLE_USER},
        {"assistant", QR_ROLE_ASSISTANT}, {"tool", QR_ROLE_TOOL},
        {"developer", QR_ROLE_DEVELOPER},
    };
    for (size_t k = 0; k < QR_ARRAY_LEN(roles); k++)
        if (str_is(v, roles[k].name)) {
            *out = roles[k].role;
            return QR_OK;
        }
    if (str_is(v, "function"))
        return bad(d, param, "role 'function' (deprecated) is not supported: use 'tool'");
    return bad(d, param, "'%s' must be one of developer, system, user, assistant, tool", param);
}

static enum qr_err dec_tool_call(struct dec *d, yyjson_val *v, size_t i, size_t j,
                                 struct qr_tool_call *tc)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu]", i, j);
    if (!yyjson_is_obj(v))
        return wrong_type(d, param, "an object");
    yyjson_val *type = yyjson_obj_get(v, "type");
    if (type && !yyjson_is_null(type) && !str_is(type, "function")) {
        pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu].type", i, j);
        if (!yyjson_is_str(type))
            return wrong_type(d, param, "a string");
        return unsupported(d, param, "tool call type '%.64s' is not supported",
                           yyjson_get_str(type));
    }
    pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu].id", i, j);
    enum qr_err rc = opt_str(d, yyjson_obj_get(v, "id"), param, &tc->id);
    if (rc)
        return rc;
    yyjson_val *fn = yyjson_obj_get(v, "function");
    pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu].function", i, j);
    if (!fn)
        return bad(d, param, "'%s' is required", param);
    if (!yyjson_is_obj(fn))
        return wrong_type(d, param, "an object");
    pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu].function.name", i, j);
    rc = get_str(d, yyjson_obj_get(fn, "name"), param, &tc->name);
    if (rc)
        return rc;
    pathf(param, sizeof(param), "messages[%zu].tool_calls[%zu].function.arguments", i, j);
    yyjson_val *args = yyjson_obj_get(fn, "arguments");
    if (!args)
        return dup(d, "{}", 2, &tc->arguments);
    return check_args(d, args, param, &tc->arguments);
}

static enum qr_err dec_tool_calls(struct dec *d, yyjson_val *v, size_t i, struct qr_message *m)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "messages[%zu].tool_calls", i);
    if (!v || yyjson_is_null(v))
        return QR_OK;
    if (m->role != QR_ROLE_ASSISTANT)
        return bad(d, param, "only assistant messages carry tool_calls");
    if (!yyjson_is_arr(v))
        return wrong_type(d, param, "an array");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_tools)
        return bad(d, param, "too many tool calls in '%s' (%zu, at most %zu)", param, n,
                   d->lim->max_tools);
    m->tool_calls = qr_arena_array(d->a, n, sizeof(*m->tool_calls));
    if (!m->tool_calls)
        return too_large(d);
    m->n_tool_calls = n;
    size_t j, jmax;
    yyjson_val *tc;
    yyjson_arr_foreach(v, j, jmax, tc)
    {
        enum qr_err rc = dec_tool_call(d, tc, i, j, &m->tool_calls[j]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

static enum qr_err dec_message(struct dec *d, yyjson_val *v, size_t i, struct qr_message *m)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "messages[%zu]", i);
    if (!yyjson_is_obj(v))
        return wrong_type(d, param, "an object");
    enum qr_err rc = dec_role(d, yyjson_obj_get(v, "role"), i, &m->role);
    if (rc)
        return rc;
    yyjson_val *fc = yyjson_obj_get(v, "function_call");
    if (fc && !yyjson_is_null(fc)) {
        pathf(param, sizeof(param), "messages[%zu].function_call", i);
        return bad(d, param, "'function_call' (deprecated) is not supported: use 'tool_calls'");
    }
    rc = dec_content(d, yyjson_obj_get(v, "content"), i, m);
    if (rc)
        return rc;
    pathf(param, sizeof(param), "messages[%zu].name", i);
    rc = opt_str(d, yyjson_obj_get(v, "name"), param, &m->name);
    if (rc)
        return rc;
    rc = dec_tool_calls(d, yyjson_obj_get(v, "tool_calls"), i, m);
    if (rc)
        return rc;
    /* reasoning_content (DeepSeek, llama.cpp, vLLM <= 0.11) first, then reasoning (vLLM >= 0.16) */
    struct qr_slice rc_text = {0}, r_text = {0};
    pathf(param, sizeof(param), "messages[%zu].reasoning_content", i);
    rc = opt_str(d, yyjson_obj_get(v, "reasoning_content"), param, &rc_text);
    if (rc)
        return rc;
    pathf(param, sizeof(param), "messages[%zu].reasoning", i);
    rc = opt_str(d, yyjson_obj_get(v, "reasoning"), param, &r_text);
    if (rc)
        return rc;
    m->reasoning = rc_text.len ? rc_text : r_text;
    yyjson_val *tcid = yyjson_obj_get(v, "tool_call_id");
    pathf(param, sizeof(param), "messages[%zu].tool_call_id", i);
    if (m->role == QR_ROLE_TOOL && (!tcid || yyjson_is_null(tcid)))
        return bad(d, param, "'%s' is required for role 'tool'", param);
    return opt_str(d, tcid, param, &m->tool_call_id);
}

static enum qr_err dec_messages(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (!yyjson_is_arr(v))
        return wrong_type(d, "messages", "an array");
    size_t n = yyjson_arr_size(v);
    if (n == 0)
        return bad(d, "messages", "'messages' must not be empty");
    if (n > d->lim->max_messages)
        return bad(d, "messages", "too many messages (%zu, at most %zu)", n, d->lim->max_messages);
    r->messages = qr_arena_array(d->a, n, sizeof(*r->messages));
    if (!r->messages)
        return too_large(d);
    r->n_messages = n;
    size_t i, imax;
    yyjson_val *m;
    yyjson_arr_foreach(v, i, imax, m)
    {
        enum qr_err rc = dec_message(d, m, i, &r->messages[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- tools, tool_choice, response_format, reasoning_effort ---- */

static enum qr_err dec_tool(struct dec *d, yyjson_val *v, size_t i, struct qr_tool *t)
{
    char param[PATH_MAX_LEN];
    pathf(param, sizeof(param), "tools[%zu]", i);
    if (!yyjson_is_obj(v))
        return wrong_type(d, param, "an object");
    yyjson_val *type = yyjson_obj_get(v, "type");
    pathf(param, sizeof(param), "tools[%zu].type", i);
    if (!yyjson_is_str(type))
        return wrong_type(d, param, "a string");
    if (!str_is(type, "function"))
        return unsupported(d, param, "tool type '%.64s' is not supported", yyjson_get_str(type));
    yyjson_val *fn = yyjson_obj_get(v, "function");
    pathf(param, sizeof(param), "tools[%zu].function", i);
    if (!yyjson_is_obj(fn))
        return wrong_type(d, param, "an object");
    pathf(param, sizeof(param), "tools[%zu].function.name", i);
    enum qr_err rc = get_str(d, yyjson_obj_get(fn, "name"), param, &t->name);
    if (rc)
        return rc;
    if (t->name.len == 0)
        return bad(d, param, "'%s' must not be empty", param);
    pathf(param, sizeof(param), "tools[%zu].function.description", i);
    rc = opt_str(d, yyjson_obj_get(fn, "description"), param, &t->description);
    if (rc)
        return rc;
    yyjson_val *params = yyjson_obj_get(fn, "parameters");
    if (params && !yyjson_is_null(params)) {
        pathf(param, sizeof(param), "tools[%zu].function.parameters", i);
        if (!yyjson_is_obj(params))
            return wrong_type(d, param, "an object (JSON Schema)");
        rc = json_text(d, params, &t->parameters);
        if (rc)
            return rc;
    }
    pathf(param, sizeof(param), "tools[%zu].function.strict", i);
    return get_bool(d, yyjson_obj_get(fn, "strict"), param, &t->strict, NULL);
}

static enum qr_err dec_tools(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (!yyjson_is_arr(v))
        return wrong_type(d, "tools", "an array");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_tools)
        return bad(d, "tools", "too many tools (%zu, at most %zu)", n, d->lim->max_tools);
    r->tools = qr_arena_array(d->a, n, sizeof(*r->tools));
    if (!r->tools)
        return too_large(d);
    r->n_tools = n;
    size_t i, imax;
    yyjson_val *t;
    yyjson_arr_foreach(v, i, imax, t)
    {
        enum qr_err rc = dec_tool(d, t, i, &r->tools[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

static enum qr_err dec_tool_choice(struct dec *d, yyjson_val *v, struct qr_tool_choice *out)
{
    if (yyjson_is_str(v)) {
        if (str_is(v, "none"))
            out->kind = QR_TOOL_CHOICE_NONE;
        else if (str_is(v, "auto"))
            out->kind = QR_TOOL_CHOICE_AUTO;
        else if (str_is(v, "required"))
            out->kind = QR_TOOL_CHOICE_REQUIRED;
        else
            return bad(d, "tool_choice", "'tool_choice' must be none, auto, required or an object");
        return QR_OK;
    }
    if (!yyjson_is_obj(v))
        return wrong_type(d, "tool_choice", "a string or an object");
    yyjson_val *type = yyjson_obj_get(v, "type");
    if (!yyjson_is_str(type))
        return wrong_type(d, "tool_choice.type", "a string");
    if (!str_is(type, "function"))
        return unsupported(d, "tool_choice.type", "tool_choice type '%.64s' is not supported",
                           yyjson_get_str(type));
    yyjson_val *fn = yyjson_obj_get(v, "function");
    if (!yyjson_is_obj(fn))
        return wrong_type(d, "tool_choice.function", "an object");
    out->kind = QR_TOOL_CHOICE_FUNCTION;
    return get_str(d, yyjson_obj_get(fn, "name"), "tool_choice.function.name", &out->name);
}

static enum qr_err dec_response_format(struct dec *d, yyjson_val *v, struct qr_format *out)
{
    if (!yyjson_is_obj(v))
        return wrong_type(d, "response_format", "an object");
    yyjson_val *type = yyjson_obj_get(v, "type");
    if (!yyjson_is_str(type))
        return wrong_type(d, "response_format.type", "a string");
    if (str_is(type, "text")) {
        out->kind = QR_FORMAT_NONE;
        return QR_OK;
    }
    if (str_is(type, "json_object")) {
        out->kind = QR_FORMAT_JSON;
        return QR_OK;
    }
    if (!str_is(type, "json_schema"))
        return unsupported(d, "response_format.type",
                           "response_format type '%.64s' is not "
                           "supported",
                           yyjson_get_str(type));
    yyjson_val *js = yyjson_obj_get(v, "json_schema");
    if (!yyjson_is_obj(js))
        return wrong_type(d, "response_format.json_schema", "an object");
    enum qr_err rc =
        opt_str(d, yyjson_obj_get(js, "name"), "response_format.json_schema.name", &out->name);
    if (rc)
        return rc;
    rc = get_bool(d, yyjson_obj_get(js, "strict"), "response_format.json_schema.strict",
                  &out->strict, NULL);
    if (rc)
        return rc;
    yyjson_val *schema = yyjson_obj_get(js, "schema");
    if (!schema || yyjson_is_null(schema)) {
        out->kind = QR_FORMAT_JSON;
        return QR_OK;
    }
    if (!yyjson_is_obj(schema))
        return wrong_type(d, "response_format.json_schema.schema", "an object (JSON Schema)");
    out->kind = QR_FORMAT_SCHEMA;
    return json_text(d, schema, &out->schema);
}

static enum qr_err dec_reasoning_effort(struct dec *d, yyjson_val *v, struct qr_think *out)
{
    static const char *const levels[] = {"minimal", "low", "medium", "high", "xhigh", "max"};
    if (!yyjson_is_str(v))
        return wrong_type(d, "reasoning_effort", "a string");
    if (str_is(v, "none")) {
        out->kind = QR_THINK_OFF;
        return QR_OK;
    }
    for (size_t k = 0; k < QR_ARRAY_LEN(levels); k++)
        if (str_is(v, levels[k])) {
            out->kind = QR_THINK_LEVEL;
            return dup_val(d, v, &out->level);
        }
    return bad(d, "reasoning_effort",
               "'reasoning_effort' must be one of none, minimal, low, medium, high, xhigh, max");
}

static enum qr_err dec_stop(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (yyjson_is_str(v)) {
        r->stop = qr_arena_alloc(d->a, sizeof(*r->stop));
        if (!r->stop)
            return too_large(d);
        r->n_stop = 1;
        return dup_val(d, v, &r->stop[0]);
    }
    if (!yyjson_is_arr(v))
        return wrong_type(d, "stop", "a string or an array of strings");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_stop)
        return bad(d, "stop", "too many stop sequences (%zu, at most %zu)", n, d->lim->max_stop);
    r->stop = qr_arena_array(d->a, n, sizeof(*r->stop));
    if (!r->stop)
        return too_large(d);
    r->n_stop = n;
    size_t i, imax;
    yyjson_val *s;
    yyjson_arr_foreach(v, i, imax, s)
    {
        char param[PATH_MAX_LEN];
        pathf(param, sizeof(param), "stop[%zu]", i);
        enum qr_err rc = get_str(d, s, param, &r->stop[i]);
        if (rc)
            return rc;
    }
    return QR_OK;
}

/* ---- completions prompt, embeddings input ---- */

static enum qr_err dec_prompt(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (yyjson_is_str(v))
        return dup_val(d, v, &r->prompt);
    if (!yyjson_is_arr(v))
        return wrong_type(d, "prompt", "a string");
    size_t n = yyjson_arr_size(v);
    if (n == 0)
        return bad(d, "prompt", "'prompt' must not be empty");
    yyjson_val *first = yyjson_arr_get_first(v);
    if (n == 1 && yyjson_is_str(first))
        return dup_val(d, first, &r->prompt);
    if (yyjson_is_str(first) || yyjson_is_raw(first) || yyjson_is_arr(first))
        return unsupported(d, "prompt",
                           "only one text prompt per request is served "
                           "(no token arrays, no batches)");
    return wrong_type(d, "prompt", "a string");
}

static bool is_token(yyjson_val *v)
{
    char buf[32];
    if (!raw_copy(v, buf, sizeof(buf)))
        return false;
    return strspn(buf, "0123456789") == strlen(buf);
}

/* Validate an array of token ids (non-negative integers). */
static enum qr_err check_tokens(struct dec *d, yyjson_val *v, const char *param)
{
    size_t i, imax;
    yyjson_val *t;
    yyjson_arr_foreach(v, i, imax, t)
    {
        if (!is_token(t))
            return bad(d, param, "'%s' must be an array of token ids (non-negative integers)",
                       param);
    }
    return QR_OK;
}

static enum qr_err dec_input(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (yyjson_is_str(v)) {
        r->inputs = qr_arena_alloc(d->a, sizeof(*r->inputs));
        if (!r->inputs)
            return too_large(d);
        r->n_inputs = 1;
        return dup_val(d, v, &r->inputs[0]);
    }
    if (!yyjson_is_arr(v))
        return wrong_type(d, "input", "a string or an array");
    size_t n = yyjson_arr_size(v);
    if (n == 0)
        return bad(d, "input", "'input' must not be empty");
    if (n > d->lim->max_inputs)
        return bad(d, "input", "too many inputs (%zu, at most %zu)", n, d->lim->max_inputs);
    yyjson_val *first = yyjson_arr_get_first(v);
    size_t i, imax;
    yyjson_val *x;
    char param[PATH_MAX_LEN];
    if (yyjson_is_str(first)) {
        r->inputs = qr_arena_array(d->a, n, sizeof(*r->inputs));
        if (!r->inputs)
            return too_large(d);
        r->n_inputs = n;
        r->input_is_list = true;
        yyjson_arr_foreach(v, i, imax, x)
        {
            pathf(param, sizeof(param), "input[%zu]", i);
            enum qr_err rc = get_str(d, x, param, &r->inputs[i]);
            if (rc)
                return rc;
        }
        return QR_OK;
    }
    if (yyjson_is_arr(first)) {
        yyjson_arr_foreach(v, i, imax, x)
        {
            pathf(param, sizeof(param), "input[%zu]", i);
            if (!yyjson_is_arr(x))
                return wrong_type(d, param, "an array of token ids");
            enum qr_err rc = check_tokens(d, x, param);
            if (rc)
                return rc;
        }
        r->input_is_list = true;
    } else {
        enum qr_err rc = check_tokens(d, v, "input");
        if (rc)
            return rc;
    }
    return json_text(d, v, &r->input_tokens);
}

static enum qr_err dec_encoding(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (str_is(v, "float"))
        r->encoding = QR_EMBED_FLOAT;
    else if (str_is(v, "base64"))
        r->encoding = QR_EMBED_BASE64;
    else
        return bad(d, "encoding_format", "'encoding_format' must be float or base64");
    return QR_OK;
}

/* ---- top level ---- */

enum key {
    K_EXTRA = 0,
    K_MODEL,
    K_MESSAGES,
    K_TOOLS,
    K_TOOL_CHOICE,
    K_PARALLEL,
    K_RESPONSE_FORMAT,
    K_REASONING_EFFORT,
    K_MAX_COMPLETION_TOKENS,
    K_TOP_LOGPROBS,
    K_PROMPT,
    K_SUFFIX,
    K_ECHO,
    K_LOGPROBS,
    K_F64, /* a struct qr_opt_f64 in qr_sampling at .off */
    K_I64, /* a struct qr_opt_i64 in qr_sampling at .off */
    K_STOP,
    K_MAX_TOKENS,
    K_N,
    K_STREAM,
    K_STREAM_OPTIONS,
    K_INPUT,
    K_ENCODING,
    K_DIMENSIONS,
};

#define OPS_CHAT (1u << QR_OP_CHAT)
#define OPS_COMP (1u << QR_OP_COMPLETION)
#define OPS_EMB  (1u << QR_OP_EMBED)
#define OPS_GEN  (OPS_CHAT | OPS_COMP)

#define SAMP(f) offsetof(struct qr_sampling, f)

static const struct {
    const char *name;
    enum key key;
    unsigned ops;
    size_t off; /* K_F64, K_I64 */
} keys[] = {
    {"model", K_MODEL, OPS_CHAT | OPS_COMP | OPS_EMB, 0},
    {"messages", K_MESSAGES, OPS_CHAT, 0},
    {"tools", K_TOOLS, OPS_CHAT, 0},
    {"tool_choice", K_TOOL_CHOICE, OPS_CHAT, 0},
    {"parallel_tool_calls", K_PARALLEL, OPS_CHAT, 0},
    {"response_format", K_RESPONSE_FORMAT, OPS_CHAT, 0},
    {"reasoning_effort", K_REASONING_EFFORT, OPS_CHAT, 0},
    {"max_completion_tokens", K_MAX_COMPLETION_TOKENS, OPS_CHAT, 0},
    {"top_logprobs", K_TOP_LOGPROBS, OPS_CHAT, 0},
    {"prompt", K_PROMPT, OPS_COMP, 0},
    {"suffix", K_SUFFIX, OPS_COMP, 0},
    {"echo", K_ECHO, OPS_COMP, 0},
    {"logprobs", K_LOGPROBS, OPS_GEN, 0},
    {"temperature", K_F64, OPS_GEN, SAMP(temperature)},
    {"top_p", K_F64, OPS_GEN, SAMP(top_p)},
    {"top_k", K_I64, OPS_GEN, SAMP(top_k)},
    {"min_p", K_F64, OPS_GEN, SAMP(min_p)},
    {"seed", K_I64, OPS_GEN, SAMP(seed)},
    {"presence_penalty", K_F64, OPS_GEN, SAMP(presence_penalty)},
    {"frequency_penalty", K_F64, OPS_GEN, SAMP(frequency_penalty)},
    {"repetition_penalty", K_F64, OPS_GEN, SAMP(repeat_penalty)},
    {"stop", K_STOP, OPS_GEN, 0},
    {"max_tokens", K_MAX_TOKENS, OPS_GEN, 0},
    {"n", K_N, OPS_GEN, 0},
    {"stream", K_STREAM, OPS_GEN, 0},
    {"stream_options", K_STREAM_OPTIONS, OPS_GEN, 0},
    {"input", K_INPUT, OPS_EMB, 0},
    {"encoding_format", K_ENCODING, OPS_EMB, 0},
    {"dimensions", K_DIMENSIONS, OPS_EMB, 0},
};

/* The keys[] entry for k in op, or -1: an extra. */
static int find_key(enum qr_op op, yyjson_val *k)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(keys); i++)
        if ((keys[i].ops & (1u << op)) && key_is(k, keys[i].name))
            return (int) i;
    return -1;
}

/* What the top-level pass leaves for the final checks. */
struct seen {
    bool model, messages, prompt, input;
    struct qr_opt_i64 max_tokens, max_completion_tokens;
    bool include_usage;
};

static enum qr_err dec_nonneg(struct dec *d, yyjson_val *v, const char *param,
                              struct qr_opt_i64 *out, int64_t min)
{
    enum qr_err rc = get_i64(d, v, param, out);
    if (rc == QR_OK && out->set && out->v < min)
        return bad(d, param, "'%s' must be at least %" PRId64, param, min);
    return rc;
}

static enum qr_err dec_stream_options(struct dec *d, yyjson_val *v, struct seen *s)
{
    if (!yyjson_is_obj(v))
        return wrong_type(d, "stream_options", "an object");
    return get_bool(d, yyjson_obj_get(v, "include_usage"), "stream_options.include_usage",
                    &s->include_usage, NULL);
}

static enum qr_err dec_logprobs(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    if (d->op == QR_OP_CHAT)
        return get_tri(d, v, "logprobs", &r->logprobs);
    /* completions: an integer, the number of alternatives per token */
    struct qr_opt_i64 n = {0};
    enum qr_err rc = dec_nonneg(d, v, "logprobs", &n, 0);
    if (rc == QR_OK && n.set) {
        r->logprobs = QR_TRUE;
        r->top_logprobs = n;
    }
    return rc;
}

static enum qr_err dec_n(struct dec *d, yyjson_val *v, struct qr_request *r)
{
    enum qr_err rc = get_i64(d, v, "n", &r->n_choices);
    if (rc == QR_OK && r->n_choices.set && r->n_choices.v != 1)
        return unsupported(d, "n", "only n=1 is served (got %" PRId64 ")", r->n_choices.v);
    return rc;
}

static enum qr_err dec_key(struct dec *d, int ki, yyjson_val *v, struct qr_request *r,
                           struct seen *s)
{
    char *field = (char *) &r->sampling + keys[ki].off;
    switch (keys[ki].key) {
    case K_MODEL:
        s->model = true;
        if (!yyjson_is_str(v))
            return wrong_type(d, "model", "a string");
        if (yyjson_get_len(v) == 0)
            return bad(d, "model", "'model' must not be empty");
        return dup_val(d, v, &r->model);
    case K_MESSAGES:
        s->messages = true;
        return dec_messages(d, v, r);
    case K_TOOLS:
        return dec_tools(d, v, r);
    case K_TOOL_CHOICE:
        return dec_tool_choice(d, v, &r->tool_choice);
    case K_PARALLEL:
        return get_tri(d, v, "parallel_tool_calls", &r->parallel_tool_calls);
    case K_RESPONSE_FORMAT:
        return dec_response_format(d, v, &r->format);
    case K_REASONING_EFFORT:
        return dec_reasoning_effort(d, v, &r->think);
    case K_MAX_COMPLETION_TOKENS:
        return dec_nonneg(d, v, "max_completion_tokens", &s->max_completion_tokens, 0);
    case K_TOP_LOGPROBS:
        return dec_nonneg(d, v, "top_logprobs", &r->top_logprobs, 0);
    case K_PROMPT:
        s->prompt = true;
        return dec_prompt(d, v, r);
    case K_SUFFIX:
        return get_str(d, v, "suffix", &r->suffix);
    case K_ECHO:
        return get_bool(d, v, "echo", &r->echo, NULL);
    case K_LOGPROBS:
        return dec_logprobs(d, v, r);
    case K_F64:
        return get_f64(d, v, keys[ki].name, (struct qr_opt_f64 *) (void *) field);
    case K_I64:
        return get_i64(d, v, keys[ki].name, (struct qr_opt_i64 *) (void *) field);
    case K_STOP:
        return dec_stop(d, v, r);
    case K_MAX_TOKENS:
        return dec_nonneg(d, v, "max_tokens", &s->max_tokens, 0);
    case K_N:
        return dec_n(d, v, r);
    case K_STREAM:
        if (!yyjson_is_bool(v))
            return wrong_type(d, "stream", "a boolean");
        r->stream = yyjson_get_bool(v);
        r->stream_set = true;
        return QR_OK;
    case K_STREAM_OPTIONS:
        return dec_stream_options(d, v, s);
    case K_INPUT:
        s->input = true;
        return dec_input(d, v, r);
    case K_ENCODING:
        return dec_encoding(d, v, r);
    case K_DIMENSIONS:
        return dec_nonneg(d, v, "dimensions", &r->dimensions, 1);
    case K_EXTRA:
        break;
    }
    return QR_OK;
}

static enum qr_err dec_extra(struct dec *d, yyjson_val *k, yyjson_val *v, struct qr_request *r)
{
    struct qr_extra *x = &r->extras[r->n_extras];
    enum qr_err rc = dup_val(d, k, &x->key);
    if (rc == QR_OK)
        rc = json_text(d, v, &x->json);
    if (rc == QR_OK)
        r->n_extras++;
    return rc;
}

/* ---- references between tools, tool_choice and tool results (issue 10) ---- */

struct call_ref {
    struct qr_slice id;
    size_t msg; /* index of the assistant message that made the call */
};

static int cmp_bytes(struct qr_slice a, struct qr_slice b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

static int cmp_call_ref(const void *x, const void *y)
{
    const struct call_ref *a = x, *b = y;
    int c = cmp_bytes(a->id, b->id);
    return c ? c : (a->msg > b->msg) - (a->msg < b->msg);
}

/* The first (lowest message index) call with this id, or NULL. */
static const struct call_ref *find_call(const struct call_ref *refs, size_t n, struct qr_slice id)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_bytes(refs[mid].id, id) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && !cmp_bytes(refs[lo].id, id) ? &refs[lo] : NULL;
}

/* A named tool_choice must name a tool in 'tools'; a tool result's tool_call_id must answer a call
 * of an earlier assistant message. Sorted lookups: linear-logarithmic in the calls. */
static enum qr_err check_tool_refs(struct dec *d, const struct qr_request *r)
{
    if (r->tool_choice.kind == QR_TOOL_CHOICE_FUNCTION) {
        size_t i = 0;
        while (i < r->n_tools && cmp_bytes(r->tools[i].name, r->tool_choice.name))
            i++;
        if (i == r->n_tools)
            return bad(d, "tool_choice.function.name",
                       "'tool_choice' names tool '%.*s', which 'tools' does not define",
                       (int) (r->tool_choice.name.len > 64 ? 64 : r->tool_choice.name.len),
                       r->tool_choice.name.ptr);
    }
    size_t n = 0;
    for (size_t i = 0; i < r->n_messages; i++)
        n += r->messages[i].role == QR_ROLE_ASSISTANT ? r->messages[i].n_tool_calls : 0;
    struct call_ref *refs = qr_arena_array(d->a, n ? n : 1, sizeof(*refs));
    if (!refs)
        return too_large(d);
    n = 0;
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct qr_message *m = &r->messages[i];
        for (size_t j = 0; m->role == QR_ROLE_ASSISTANT && j < m->n_tool_calls; j++) {
            if (m->tool_calls[j].id.len)
                refs[n++] = (struct call_ref){m->tool_calls[j].id, i};
        }
    }
    qsort(refs, n, sizeof(*refs), cmp_call_ref);
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct qr_message *m = &r->messages[i];
        if (m->role != QR_ROLE_TOOL || !m->tool_call_id.len)
            continue;
        const struct call_ref *c = find_call(refs, n, m->tool_call_id);
        if (!c || c->msg > i) {
            char param[48];
            pathf(param, sizeof(param), "messages[%zu].tool_call_id", i);
            return bad(d, param, "'%s' '%.*s' answers no tool call of an earlier assistant message",
                       param, (int) (m->tool_call_id.len > 64 ? 64 : m->tool_call_id.len),
                       m->tool_call_id.ptr);
        }
    }
    return QR_OK;
}

static enum qr_err dec_root(struct dec *d, yyjson_val *root, struct qr_request *r)
{
    struct seen s = {0};
    r->extras = qr_arena_array(d->a, yyjson_obj_size(root), sizeof(*r->extras));
    if (!r->extras)
        return too_large(d);
    yyjson_obj_iter it;
    yyjson_obj_iter_init(root, &it);
    yyjson_val *k;
    while ((k = yyjson_obj_iter_next(&it))) {
        yyjson_val *v = yyjson_obj_iter_get_val(k);
        int ki = find_key(d->op, k);
        enum qr_err rc;
        if (ki < 0)
            rc = dec_extra(d, k, v, r);
        else if (yyjson_is_null(v) && keys[ki].key != K_MODEL)
            rc = QR_OK; /* null: not sent */
        else
            rc = dec_key(d, ki, v, r, &s);
        if (rc)
            return rc;
    }
    if (!s.model)
        return bad(d, "model", "'model' is required");
    if (d->op == QR_OP_CHAT && !s.messages)
        return bad(d, "messages", "'messages' is required");
    if (d->op == QR_OP_COMPLETION && !s.prompt)
        return bad(d, "prompt", "'prompt' is required");
    if (d->op == QR_OP_EMBED && !s.input)
        return bad(d, "input", "'input' is required");
    r->max_tokens = s.max_completion_tokens.set ? s.max_completion_tokens : s.max_tokens;
    r->include_usage = r->stream && s.include_usage;
    return d->op == QR_OP_CHAT ? check_tool_refs(d, r) : QR_OK;
}

enum qr_err qr_openai_decode(enum qr_op op, struct qr_slice body,
                             const struct qr_decode_limits *lim, struct qr_arena *a,
                             struct qr_request *out, struct qr_api_error *err)
{
    struct qr_decode_limits deflim;
    if (!lim) {
        qr_decode_limits_default(&deflim);
        lim = &deflim;
    }
    struct dec d = {.op = op, .a = a, .lim = lim, .err = err};
    memset(out, 0, sizeof(*out));
    out->protocol = QR_PROTO_OPENAI;
    out->op = op;
    if ((unsigned) op > QR_OP_EMBED)
        return qr_api_error_set(err, QR_ERR_INTERNAL, 500, "internal", "", "unknown operation");

    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) (uintptr_t) body.ptr, body.len,
                                       YYJSON_READ_NUMBER_AS_RAW, NULL, &rerr);
    if (!doc) {
        if (rerr.code == YYJSON_READ_ERROR_MEMORY_ALLOCATION)
            return too_large(&d);
        return qr_api_error_set(err, QR_ERR_PARSE, 400, "invalid_json", "",
                                "request body is not valid JSON: %s at byte %zu", rerr.msg,
                                rerr.pos);
    }
    enum qr_err rc;
    yyjson_val *root = yyjson_doc_get_root(doc);
    char why[128];
    if (!yyjson_is_obj(root))
        rc = bad(&d, "", "request body must be a JSON object");
    else if (!qr_json_strict_ok(root, why, sizeof why))
        rc = bad(&d, "", "request body refused: %s", why);
    else
        rc = dec_root(&d, root, out);
    yyjson_doc_free(doc);
    return rc;
}
