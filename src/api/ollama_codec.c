/* Ollama native API codec. The decoder turns /api/chat, /api/generate, /api/embed and
 * /api/embeddings bodies into the canonical request the way Ollama's Go types accept them (stream
 * defaults to true, think and keep_alive forms, options typed per key, null = not sent), keeping
 * every field without a canonical slot as exact JSON in extras / extra_options, in order. The
 * encoder writes the canonical event stream as Ollama's NDJSON lines and the aggregate as one
 * JSON body; both go through the same line writers so that the whole body is exactly the
 * accumulation of the streamed lines. Text is escaped as Go's encoder does for invalid UTF-8
 * (one U+FFFD per bad byte); a UTF-8 sequence split across two events is held back until it is
 * complete, so a split character never turns into replacement characters in a stream. */
#include "api/ollama_codec.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yyjson.h>

#include "core/json_strict.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        enum qr_err try_err_ = (x);                                                                \
        if (try_err_)                                                                              \
            return try_err_;                                                                       \
    } while (0)

/* ======================================================================================== */
/* Decoder                                                                                   */
/* ======================================================================================== */

struct dec {
    struct qr_arena *a;
    const struct qr_decode_limits *lim;
    struct qr_api_error *err;
    struct qr_request *out;
};

static enum qr_err bad(struct dec *d, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum qr_err bad(struct dec *d, const char *param, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return qr_api_error_set(d->err, QR_ERR_INVALID, 400, "invalid_request", param, "%s", msg);
}

static enum qr_err too_large(struct dec *d, const char *what)
{
    return qr_api_error_set(d->err, QR_ERR_TOO_LARGE, 413, "request_too_large", "",
                            "request too large: %s", what);
}

static enum qr_err nomem(struct dec *d)
{
    return too_large(d, "it needs more memory than the per-request limit");
}

/* Not sent: absent or null (Go's decoder leaves the field unset for both). */
static bool absent(yyjson_val *v)
{
    return !v || yyjson_is_null(v);
}

static bool keyis(yyjson_val *k, const char *s)
{
    return yyjson_equals_str(k, s);
}

static enum qr_err dup_bytes(struct dec *d, const char *p, size_t n, struct qr_slice *out)
{
    *out = qr_arena_dup(d->a, p, n);
    return out->ptr ? QR_OK : nomem(d);
}

/* Exact JSON text of v (yyjson's compact writing of what it read; numbers too big for a double
 * or a 64-bit integer stay as their original text). */
static enum qr_err dup_json(struct dec *d, yyjson_val *v, struct qr_slice *out)
{
    size_t len = 0;
    char *s = yyjson_val_write(v, YYJSON_WRITE_NOFLAG, &len);
    if (!s)
        return nomem(d);
    enum qr_err err = dup_bytes(d, s, len, out);
    free(s);
    return err;
}

/* A string field: null leaves it empty (Go's decoder does the same), any other type is a 400. */
static enum qr_err get_str(struct dec *d, yyjson_val *v, const char *name, struct qr_slice *out)
{
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_str(v))
        return bad(d, name, "%s must be a string", name);
    return dup_bytes(d, yyjson_get_str(v), yyjson_get_len(v), out);
}

static enum qr_err get_bool(struct dec *d, yyjson_val *v, const char *name, bool *out)
{
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_bool(v))
        return bad(d, name, "%s must be a boolean", name);
    *out = yyjson_get_bool(v);
    return QR_OK;
}

static enum qr_err get_tristate(struct dec *d, yyjson_val *v, const char *name,
                                enum qr_tristate *out)
{
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_bool(v))
        return bad(d, name, "%s must be a boolean", name);
    *out = yyjson_get_bool(v) ? QR_TRUE : QR_FALSE;
    return QR_OK;
}

/* An integer the way Go's encoding/json fills an int from a JSON number: integers exactly,
 * reals truncated toward zero, anything out of the int64 range refused. */
static bool num_to_i64(yyjson_val *v, int64_t *out)
{
    if (yyjson_is_sint(v)) {
        *out = yyjson_get_sint(v);
        return true;
    }
    if (yyjson_is_uint(v)) {
        uint64_t u = yyjson_get_uint(v);
        if (u > (uint64_t) INT64_MAX)
            return false;
        *out = (int64_t) u;
        return true;
    }
    if (yyjson_is_real(v)) {
        double x = yyjson_get_real(v);
        if (!(x > -9223372036854775808.0 && x < 9223372036854775808.0))
            return false;
        *out = (int64_t) x;
        return true;
    }
    return false;
}

static enum qr_err get_opt_i64(struct dec *d, yyjson_val *v, const char *name,
                               struct qr_opt_i64 *out)
{
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_num(v) && !yyjson_is_raw(v))
        return bad(d, name, "%s must be an integer", name);
    if (!num_to_i64(v, &out->v))
        return bad(d, name, "%s is out of range", name);
    out->set = true;
    return QR_OK;
}

/* Standard base64 as Go's []byte decoding accepts it: the alphabet, '=' padding only at the end,
 * a multiple of 4 characters (CR and LF are skipped). */
static bool base64_ok(const char *s, size_t n)
{
    size_t count = 0, pad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c == '\r' || c == '\n')
            continue;
        if (c == '=') {
            pad++;
        } else if (pad || !((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '+' || c == '/')) {
            return false;
        }
        count++;
    }
    return pad <= 2 && count % 4 == 0;
}

static enum qr_err get_image(struct dec *d, yyjson_val *v, const char *name, struct qr_part *out)
{
    if (!yyjson_is_str(v))
        return bad(d, name, "%s must be a base64 string", name);
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    if (n >= 5 && !strncasecmp(s, "data:", 5))
        return bad(d, name, "%s must be plain base64 without a data: URL prefix", name);
    if (!base64_ok(s, n))
        return bad(d, name, "%s is not valid base64", name);
    out->kind = QR_PART_IMAGE;
    return dup_bytes(d, s, n, &out->data);
}

/* images: [base64, ...] into n parts starting at parts[0]. */
static enum qr_err get_images(struct dec *d, yyjson_val *arr, const char *name,
                              struct qr_part *parts)
{
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        char pname[64];
        snprintf(pname, sizeof(pname), "%s[%zu]", name, i);
        TRY(get_image(d, v, pname, &parts[i]));
    }
    return QR_OK;
}

/* format: "json", a JSON Schema object, "" / null / absent = none. */
static enum qr_err get_format(struct dec *d, yyjson_val *v)
{
    struct qr_format *f = &d->out->format;
    if (absent(v) || (yyjson_is_str(v) && yyjson_get_len(v) == 0))
        return QR_OK;
    if (yyjson_is_str(v) && yyjson_equals_str(v, "json")) {
        f->kind = QR_FORMAT_JSON;
        return QR_OK;
    }
    if (yyjson_is_obj(v)) {
        f->kind = QR_FORMAT_SCHEMA;
        return dup_json(d, v, &f->schema);
    }
    return bad(d, "format", "invalid format: expected \"json\" or a valid JSON schema");
}

/* think: true / false / "high" / "medium" / "low"; null and absent stay UNSET. */
static enum qr_err get_think(struct dec *d, yyjson_val *v)
{
    struct qr_think *t = &d->out->think;
    if (absent(v))
        return QR_OK;
    if (yyjson_is_bool(v)) {
        t->kind = yyjson_get_bool(v) ? QR_THINK_ON : QR_THINK_OFF;
        return QR_OK;
    }
    if (yyjson_is_str(v) && (yyjson_equals_str(v, "high") || yyjson_equals_str(v, "medium") ||
                             yyjson_equals_str(v, "low"))) {
        t->kind = QR_THINK_LEVEL;
        return dup_bytes(d, yyjson_get_str(v), yyjson_get_len(v), &t->level);
    }
    if (yyjson_is_str(v))
        return bad(d, "think",
                   "invalid think value: \"%.64s\" (must be \"high\", \"medium\", \"low\", true, "
                   "or false)",
                   yyjson_get_str(v));
    return bad(d, "think", "think must be a boolean or \"high\", \"medium\", \"low\"");
}

/* Go's time.ParseDuration: [-+]?([0-9]*(\.[0-9]*)?unit)+ with units ns us µs μs ms s m h, or a
 * bare "0". Result in ns; false on a syntax error or overflow. */
static bool go_duration(const char *s, size_t n, bool *neg, uint64_t *out)
{
    static const struct {
        const char *u;
        uint64_t ns;
    } units[] = {{"ns", 1},       {"us", 1000},      {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000},
                 {"ms", 1000000}, {"s", 1000000000}, {"m", 60000000000},  {"h", 3600000000000}};
    const uint64_t lim = (uint64_t) 1 << 63;
    size_t i = 0;
    uint64_t total = 0;
    *neg = false;
    if (n && (s[0] == '-' || s[0] == '+')) {
        *neg = s[0] == '-';
        i++;
    }
    if (n - i == 1 && s[i] == '0') {
        *out = 0;
        return true;
    }
    if (i == n)
        return false;
    while (i < n) {
        uint64_t v = 0, f = 0;
        double scale = 1;
        bool pre = false, post = false, foverflow = false;
        if (!(s[i] == '.' || (s[i] >= '0' && s[i] <= '9')))
            return false;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, pre = true) {
            if (v > lim / 10)
                return false;
            v = v * 10 + (uint64_t) (s[i] - '0');
            if (v > lim)
                return false;
        }
        if (i < n && s[i] == '.') {
            for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, post = true) {
                if (foverflow || f > (lim - 1) / 10) {
                    foverflow = true;
                    continue;
                }
                uint64_t y = f * 10 + (uint64_t) (s[i] - '0');
                if (y > lim) {
                    foverflow = true;
                    continue;
                }
                f = y;
                scale *= 10;
            }
        }
        if (!pre && !post)
            return false;
        size_t u0 = i;
        while (i < n && s[i] != '.' && !(s[i] >= '0' && s[i] <= '9'))
            i++;
        if (i == u0)
            return false; /* missing unit */
        uint64_t unit = 0;
        for (size_t k = 0; k < QR_ARRAY_LEN(units); k++) {
            if (strlen(units[k].u) == i - u0 && !memcmp(units[k].u, s + u0, i - u0))
                unit = units[k].ns;
        }
        if (!unit || v > lim / unit)
            return false;
        v *= unit;
        if (f > 0) {
            v += (uint64_t) ((double) f * ((double) unit / scale));
            if (v > lim)
                return false;
        }
        total += v;
        if (total > lim)
            return false;
    }
    if (!*neg && total > lim - 1)
        return false;
    *out = total;
    return true;
}

/* keep_alive: number of seconds (fractional; negative = forever) or a Go duration string
 * (negative = forever); null/absent = not set. A value too large for int64 ms counts as forever. */
static enum qr_err get_keep_alive(struct dec *d, yyjson_val *v)
{
    struct qr_keep_alive *k = &d->out->keep_alive;
    if (absent(v))
        return QR_OK;
    if (yyjson_is_raw(v)) { /* a number beyond double/int64: forever either way */
        k->forever = true;
    } else if (yyjson_is_num(v)) {
        double secs = yyjson_get_num(v);
        if (secs < 0 || secs * 1000.0 >= 9.2e15)
            k->forever = true;
        else
            k->ms = (int64_t) (secs * 1000.0);
    } else if (yyjson_is_str(v)) {
        bool neg;
        uint64_t ns;
        if (!go_duration(yyjson_get_str(v), yyjson_get_len(v), &neg, &ns))
            return bad(d, "keep_alive",
                       "invalid keep_alive \"%.64s\": a number of seconds or a duration with a "
                       "unit (\"5m\", \"1.5h\", \"-1m\")",
                       yyjson_get_str(v));
        if (neg && ns > 0)
            k->forever = true;
        else
            k->ms = (int64_t) (ns / 1000000);
    } else {
        return bad(d, "keep_alive", "keep_alive must be a number of seconds or a duration string");
    }
    k->set = true;
    return dup_json(d, v, &k->raw);
}

/* ---- options ---- */

enum okind { O_F64, O_I64, O_STOP, O_X_INT, O_X_BOOL };

#define RQ(m) offsetof(struct qr_request, m)
static const struct {
    const char *key;
    enum okind kind;
    size_t off;
} opt_table[] = {
    {"temperature", O_F64, RQ(sampling.temperature)},
    {"top_p", O_F64, RQ(sampling.top_p)},
    {"min_p", O_F64, RQ(sampling.min_p)},
    {"typical_p", O_F64, RQ(sampling.typical_p)},
    {"repeat_penalty", O_F64, RQ(sampling.repeat_penalty)},
    {"presence_penalty", O_F64, RQ(sampling.presence_penalty)},
    {"frequency_penalty", O_F64, RQ(sampling.frequency_penalty)},
    {"top_k", O_I64, RQ(sampling.top_k)},
    {"seed", O_I64, RQ(sampling.seed)},
    {"repeat_last_n", O_I64, RQ(sampling.repeat_last_n)},
    {"num_keep", O_I64, RQ(sampling.num_keep)},
    {"num_predict", O_I64, RQ(max_tokens)},
    {"num_ctx", O_I64, RQ(context_len)},
    {"stop", O_STOP, 0},
    /* known to Ollama, no canonical slot: type-checked, then kept in extra_options */
    {"num_batch", O_X_INT, 0},
    {"num_gpu", O_X_INT, 0},
    {"main_gpu", O_X_INT, 0},
    {"num_thread", O_X_INT, 0},
    {"use_mmap", O_X_BOOL, 0},
};
#undef RQ

static enum qr_err opt_stop(struct dec *d, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (yyjson_is_str(v)) {
        r->stop = qr_arena_array(d->a, 1, sizeof(*r->stop));
        if (!r->stop)
            return nomem(d);
        r->n_stop = 1;
        return dup_bytes(d, yyjson_get_str(v), yyjson_get_len(v), &r->stop[0]);
    }
    if (!yyjson_is_arr(v))
        return bad(d, "options.stop", "option \"stop\" must be of type array of strings");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_stop)
        return bad(d, "options.stop", "option \"stop\" has more than %zu entries",
                   d->lim->max_stop);
    r->stop = qr_arena_array(d->a, n ? n : 1, sizeof(*r->stop));
    if (!r->stop)
        return nomem(d);
    r->n_stop = 0;
    size_t i, max;
    yyjson_val *s;
    yyjson_arr_foreach(v, i, max, s)
    {
        if (!yyjson_is_str(s))
            return bad(d, "options.stop", "option \"stop\" must be of type array of strings");
        TRY(dup_bytes(d, yyjson_get_str(s), yyjson_get_len(s), &r->stop[r->n_stop++]));
    }
    return QR_OK;
}

static enum qr_err get_options(struct dec *d, yyjson_val *obj)
{
    struct qr_request *r = d->out;
    if (absent(obj))
        return QR_OK;
    if (!yyjson_is_obj(obj))
        return bad(d, "options", "options must be an object");
    /* A repeated "options" object merges into the first, as Go's decoding into a map does. */
    struct qr_extra *prev = r->extra_options;
    r->extra_options =
        qr_arena_array(d->a, r->n_extra_options + yyjson_obj_size(obj) + 1, sizeof(*prev));
    if (!r->extra_options)
        return nomem(d);
    if (r->n_extra_options)
        memcpy(r->extra_options, prev, r->n_extra_options * sizeof(*prev));
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(obj, i, max, k, v)
    {
        size_t t = QR_ARRAY_LEN(opt_table);
        for (size_t j = 0; j < QR_ARRAY_LEN(opt_table) && t == QR_ARRAY_LEN(opt_table); j++) {
            if (keyis(k, opt_table[j].key))
                t = j;
        }
        char *base = (char *) r;
        enum okind kind = t < QR_ARRAY_LEN(opt_table) ? opt_table[t].kind : O_X_BOOL;
        const char *key = t < QR_ARRAY_LEN(opt_table) ? opt_table[t].key : "";
        char param[64];
        snprintf(param, sizeof(param), "options.%s", key);
        if (t < QR_ARRAY_LEN(opt_table) && absent(v))
            continue; /* Go's Options.FromMap skips nulls */
        if (t < QR_ARRAY_LEN(opt_table) && kind == O_F64) {
            if (!yyjson_is_num(v))
                return bad(d, param, "option \"%s\" must be of type float", key);
            struct qr_opt_f64 *o = (struct qr_opt_f64 *) (base + opt_table[t].off);
            o->set = true;
            o->v = yyjson_get_num(v);
            continue;
        }
        if (t < QR_ARRAY_LEN(opt_table) && (kind == O_I64 || kind == O_X_INT)) {
            int64_t x;
            if (!yyjson_is_num(v) && !yyjson_is_raw(v))
                return bad(d, param, "option \"%s\" must be of type integer", key);
            if (!num_to_i64(v, &x))
                return bad(d, param, "option \"%s\" is out of range", key);
            if (x < 1 && opt_table[t].off == offsetof(struct qr_request, context_len))
                return bad(d, param, "option \"%s\" must be at least 1", key); /* issue 10 */
            if (kind == O_I64) {
                struct qr_opt_i64 *o = (struct qr_opt_i64 *) (base + opt_table[t].off);
                o->set = true;
                o->v = x;
                continue;
            }
        }
        if (t < QR_ARRAY_LEN(opt_table) && kind == O_STOP) {
            TRY(opt_stop(d, v));
            continue;
        }
        if (t < QR_ARRAY_LEN(opt_table) && kind == O_X_BOOL && !yyjson_is_bool(v))
            return bad(d, param, "option \"%s\" must be of type boolean", key);
        struct qr_extra *x = &r->extra_options[r->n_extra_options++];
        TRY(dup_bytes(d, yyjson_get_str(k), yyjson_get_len(k), &x->key));
        TRY(dup_json(d, v, &x->json));
    }
    return QR_OK;
}

static enum qr_err add_extra(struct dec *d, yyjson_val *k, yyjson_val *v)
{
    struct qr_extra *x = &d->out->extras[d->out->n_extras++];
    TRY(dup_bytes(d, yyjson_get_str(k), yyjson_get_len(k), &x->key));
    return dup_json(d, v, &x->json);
}

/* ---- chat messages and tools ---- */

static enum qr_err get_role(struct dec *d, yyjson_val *v, const char *pname, enum qr_role *out)
{
    static const struct {
        const char *name;
        enum qr_role role;
    } roles[] = {{"system", QR_ROLE_SYSTEM},
                 {"user", QR_ROLE_USER},
                 {"assistant", QR_ROLE_ASSISTANT},
                 {"tool", QR_ROLE_TOOL}};
    if (!yyjson_is_str(v))
        return bad(d, pname, "%s must be one of \"system\", \"user\", \"assistant\", \"tool\"",
                   pname);
    struct qr_slice s = {yyjson_get_str(v), yyjson_get_len(v)};
    for (size_t i = 0; i < QR_ARRAY_LEN(roles); i++) {
        if (qr_slice_eq_nocase(s, roles[i].name)) {
            *out = roles[i].role;
            return QR_OK;
        }
    }
    return bad(d, pname,
               "invalid role \"%.32s\" in %s: must be one of \"system\", \"user\", "
               "\"assistant\", \"tool\"",
               s.ptr, pname);
}

static enum qr_err get_tool_call(struct dec *d, yyjson_val *tc, const char *pname,
                                 struct qr_tool_call *out)
{
    char name[192];
    if (!yyjson_is_obj(tc))
        return bad(d, pname, "%s must be an object", pname);
    snprintf(name, sizeof(name), "%s.id", pname);
    TRY(get_str(d, yyjson_obj_get(tc, "id"), name, &out->id));
    yyjson_val *fn = yyjson_obj_get(tc, "function");
    snprintf(name, sizeof(name), "%s.function", pname);
    if (!yyjson_is_obj(fn))
        return bad(d, name, "%s must be an object", name);
    yyjson_val *idx = yyjson_obj_get(fn, "index");
    snprintf(name, sizeof(name), "%s.function.index", pname);
    if (!absent(idx) && !yyjson_is_int(idx))
        return bad(d, name, "%s must be an integer", name);
    snprintf(name, sizeof(name), "%s.function.name", pname);
    TRY(get_str(d, yyjson_obj_get(fn, "name"), name, &out->name));
    yyjson_val *args = yyjson_obj_get(fn, "arguments");
    snprintf(name, sizeof(name), "%s.function.arguments", pname);
    if (absent(args))
        return dup_bytes(d, "{}", 2, &out->arguments);
    if (!yyjson_is_obj(args))
        return bad(d, name, "%s must be a JSON object", name);
    return dup_json(d, args, &out->arguments);
}

static enum qr_err get_message(struct dec *d, yyjson_val *m, size_t idx, struct qr_message *out)
{
    char pname[64], name[160];
    snprintf(pname, sizeof(pname), "messages[%zu]", idx);
    if (!yyjson_is_obj(m))
        return bad(d, pname, "%s must be an object", pname);
    snprintf(name, sizeof(name), "%s.role", pname);
    yyjson_val *role = yyjson_obj_get(m, "role");
    if (absent(role))
        return bad(d, name, "%s is required", name);
    TRY(get_role(d, role, name, &out->role));

    /* content: a string, absent/null = "" as in Ollama's Go decoder */
    struct qr_slice content = {0};
    snprintf(name, sizeof(name), "%s.content", pname);
    TRY(get_str(d, yyjson_obj_get(m, "content"), name, &content));
    yyjson_val *images = yyjson_obj_get(m, "images");
    snprintf(name, sizeof(name), "%s.images", pname);
    if (!absent(images) && !yyjson_is_arr(images))
        return bad(d, name, "%s must be an array of base64 strings", name);
    size_t n_img = yyjson_arr_size(images), has_text = content.len > 0;
    out->parts = qr_arena_array(d->a, n_img + has_text + 1, sizeof(*out->parts));
    if (!out->parts)
        return nomem(d);
    if (has_text) {
        out->parts[0].kind = QR_PART_TEXT;
        out->parts[0].text = content;
    }
    if (n_img)
        TRY(get_images(d, images, name, out->parts + has_text));
    out->n_parts = has_text + n_img;

    snprintf(name, sizeof(name), "%s.thinking", pname);
    TRY(get_str(d, yyjson_obj_get(m, "thinking"), name, &out->reasoning));
    snprintf(name, sizeof(name), "%s.tool_name", pname);
    TRY(get_str(d, yyjson_obj_get(m, "tool_name"), name, &out->tool_name));
    snprintf(name, sizeof(name), "%s.tool_call_id", pname);
    TRY(get_str(d, yyjson_obj_get(m, "tool_call_id"), name, &out->tool_call_id));

    yyjson_val *tcs = yyjson_obj_get(m, "tool_calls");
    snprintf(name, sizeof(name), "%s.tool_calls", pname);
    if (absent(tcs))
        return QR_OK;
    if (!yyjson_is_arr(tcs))
        return bad(d, name, "%s must be an array", name);
    size_t n = yyjson_arr_size(tcs);
    if (n > d->lim->max_tools)
        return too_large(d, "too many tool calls in one message");
    out->tool_calls = qr_arena_array(d->a, n + 1, sizeof(*out->tool_calls));
    if (!out->tool_calls)
        return nomem(d);
    size_t i, max;
    yyjson_val *tc;
    yyjson_arr_foreach(tcs, i, max, tc)
    {
        snprintf(name, sizeof(name), "%s.tool_calls[%zu]", pname, i);
        TRY(get_tool_call(d, tc, name, &out->tool_calls[i]));
    }
    out->n_tool_calls = n;
    return QR_OK;
}

static enum qr_err get_messages(struct dec *d, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_arr(v))
        return bad(d, "messages", "messages must be an array");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_messages)
        return too_large(d, "too many messages");
    r->messages = qr_arena_array(d->a, n + 1, sizeof(*r->messages));
    if (!r->messages)
        return nomem(d);
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(v, i, max, m)
    {
        TRY(get_message(d, m, i, &r->messages[i]));
    }
    r->n_messages = n;
    return QR_OK;
}

static enum qr_err get_tool(struct dec *d, yyjson_val *t, size_t idx, struct qr_tool *out)
{
    char pname[64], name[160];
    snprintf(pname, sizeof(pname), "tools[%zu]", idx);
    if (!yyjson_is_obj(t))
        return bad(d, pname, "%s must be an object", pname);
    yyjson_val *type = yyjson_obj_get(t, "type");
    snprintf(name, sizeof(name), "%s.type", pname);
    if (!absent(type) && !yyjson_equals_str(type, "function"))
        return bad(d, name, "%s must be \"function\"", name);
    yyjson_val *fn = yyjson_obj_get(t, "function");
    snprintf(name, sizeof(name), "%s.function", pname);
    if (!yyjson_is_obj(fn))
        return bad(d, name, "%s must be an object", name);
    snprintf(name, sizeof(name), "%s.function.name", pname);
    TRY(get_str(d, yyjson_obj_get(fn, "name"), name, &out->name));
    snprintf(name, sizeof(name), "%s.function.description", pname);
    TRY(get_str(d, yyjson_obj_get(fn, "description"), name, &out->description));
    yyjson_val *params = yyjson_obj_get(fn, "parameters");
    snprintf(name, sizeof(name), "%s.function.parameters", pname);
    if (absent(params))
        return QR_OK;
    if (!yyjson_is_obj(params))
        return bad(d, name, "%s must be a JSON Schema object", name);
    return dup_json(d, params, &out->parameters);
}

static enum qr_err get_tools(struct dec *d, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (absent(v))
        return QR_OK;
    if (!yyjson_is_arr(v))
        return bad(d, "tools", "tools must be an array");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_tools)
        return too_large(d, "too many tools");
    r->tools = qr_arena_array(d->a, n + 1, sizeof(*r->tools));
    if (!r->tools)
        return nomem(d);
    size_t i, max;
    yyjson_val *t;
    yyjson_arr_foreach(v, i, max, t)
    {
        TRY(get_tool(d, t, i, &r->tools[i]));
    }
    r->n_tools = n;
    return QR_OK;
}

/* ---- embeddings ---- */

static enum qr_err get_input(struct dec *d, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (yyjson_is_str(v)) {
        r->inputs = qr_arena_array(d->a, 1, sizeof(*r->inputs));
        if (!r->inputs)
            return nomem(d);
        r->n_inputs = 1;
        return dup_bytes(d, yyjson_get_str(v), yyjson_get_len(v), &r->inputs[0]);
    }
    if (!yyjson_is_arr(v))
        return bad(d, "input",
                   "invalid input type: input must be a string or an array of "
                   "strings");
    size_t n = yyjson_arr_size(v);
    if (n > d->lim->max_inputs)
        return too_large(d, "too many inputs");
    r->inputs = qr_arena_array(d->a, n + 1, sizeof(*r->inputs));
    if (!r->inputs)
        return nomem(d);
    r->input_is_list = true;
    size_t i, max;
    yyjson_val *s;
    yyjson_arr_foreach(v, i, max, s)
    {
        if (!yyjson_is_str(s))
            return bad(d, "input", "invalid input type: input[%zu] must be a string", i);
        TRY(dup_bytes(d, yyjson_get_str(s), yyjson_get_len(s), &r->inputs[i]));
    }
    r->n_inputs = n;
    return QR_OK;
}

/* ---- top level ---- */

/* Fields shared by chat and generate (and keep_alive/options by the embeddings). Returns
 * QR_ERR__COUNT when key is not one of them. */
static enum qr_err common_field(struct dec *d, yyjson_val *k, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (keyis(k, "model")) {
        if (!absent(v) && !yyjson_is_str(v))
            return bad(d, "model", "model must be a string");
        return get_str(d, v, "model", &r->model);
    }
    if (keyis(k, "keep_alive"))
        return get_keep_alive(d, v);
    if (keyis(k, "options"))
        return get_options(d, v);
    if (r->op == QR_OP_EMBED)
        return QR_ERR__COUNT;
    if (keyis(k, "stream")) {
        if (absent(v))
            return QR_OK;
        if (!yyjson_is_bool(v))
            return bad(d, "stream", "stream must be a boolean");
        r->stream = yyjson_get_bool(v);
        r->stream_set = true;
        return QR_OK;
    }
    if (keyis(k, "format"))
        return get_format(d, v);
    if (keyis(k, "think"))
        return get_think(d, v);
    return QR_ERR__COUNT;
}

static enum qr_err chat_field(struct dec *d, yyjson_val *k, yyjson_val *v)
{
    if (keyis(k, "messages"))
        return get_messages(d, v);
    if (keyis(k, "tools"))
        return get_tools(d, v);
    return QR_ERR__COUNT;
}

static enum qr_err generate_field(struct dec *d, yyjson_val *k, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (keyis(k, "prompt"))
        return get_str(d, v, "prompt", &r->prompt);
    if (keyis(k, "suffix"))
        return get_str(d, v, "suffix", &r->suffix);
    if (keyis(k, "system"))
        return get_str(d, v, "system", &r->system);
    if (keyis(k, "template"))
        return get_str(d, v, "template", &r->template_);
    if (keyis(k, "raw"))
        return get_bool(d, v, "raw", &r->raw);
    if (keyis(k, "context")) {
        if (absent(v))
            return QR_OK;
        size_t i, max;
        yyjson_val *t;
        if (!yyjson_is_arr(v))
            return bad(d, "context", "context must be an array of integers");
        yyjson_arr_foreach(v, i, max, t)
        {
            if (!yyjson_is_int(t))
                return bad(d, "context", "context must be an array of integers");
        }
        return dup_json(d, v, &r->context);
    }
    if (keyis(k, "images")) {
        if (absent(v))
            return QR_OK;
        if (!yyjson_is_arr(v))
            return bad(d, "images", "images must be an array of base64 strings");
        size_t n = yyjson_arr_size(v);
        r->images = qr_arena_array(d->a, n + 1, sizeof(*r->images));
        if (!r->images)
            return nomem(d);
        TRY(get_images(d, v, "images", r->images));
        r->n_images = n;
        return QR_OK;
    }
    return QR_ERR__COUNT;
}

static enum qr_err embed_field(struct dec *d, bool legacy, yyjson_val *k, yyjson_val *v)
{
    struct qr_request *r = d->out;
    if (legacy) {
        if (!keyis(k, "prompt"))
            return QR_ERR__COUNT;
        struct qr_slice p = {0};
        TRY(get_str(d, v, "prompt", &p));
        r->n_inputs = 0;
        if (p.len == 0) /* Ollama answers an empty prompt with an empty embedding */
            return QR_OK;
        r->inputs = qr_arena_array(d->a, 1, sizeof(*r->inputs));
        if (!r->inputs)
            return nomem(d);
        r->inputs[0] = p;
        r->n_inputs = 1;
        return QR_OK;
    }
    if (keyis(k, "input")) {
        r->inputs = NULL;
        r->n_inputs = 0;
        r->input_is_list = false;
        if (absent(v))
            return QR_OK;
        return get_input(d, v);
    }
    if (keyis(k, "truncate"))
        return get_tristate(d, v, "truncate", &r->truncate);
    if (keyis(k, "dimensions"))
        return get_opt_i64(d, v, "dimensions", &r->dimensions);
    return QR_ERR__COUNT;
}

static enum qr_err decode_root(struct dec *d, enum qr_op op, bool legacy, yyjson_val *root)
{
    struct qr_request *r = d->out;
    if (!yyjson_is_obj(root))
        return bad(d, "", "request body must be a JSON object");
    r->extras = qr_arena_array(d->a, yyjson_obj_size(root) + 1, sizeof(*r->extras));
    if (!r->extras)
        return nomem(d);
    bool have_input = false;
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        enum qr_err e = common_field(d, k, v);
        if (e == QR_ERR__COUNT && op == QR_OP_CHAT)
            e = chat_field(d, k, v);
        else if (e == QR_ERR__COUNT && op == QR_OP_COMPLETION)
            e = generate_field(d, k, v);
        else if (e == QR_ERR__COUNT && op == QR_OP_EMBED)
            e = embed_field(d, legacy, k, v);
        if (e == QR_ERR__COUNT)
            e = add_extra(d, k, v);
        if (e)
            return e;
        if (op == QR_OP_EMBED && !legacy && keyis(k, "input") && !absent(v))
            have_input = true;
    }
    if (r->model.len == 0)
        return bad(d, "model", "model is required");
    if (op == QR_OP_EMBED && !legacy && !have_input)
        return bad(d, "input", "input is required");
    return QR_OK;
}

enum qr_err qr_ollama_decode(enum qr_op op, bool legacy_embeddings, struct qr_slice body,
                             const struct qr_decode_limits *lim, struct qr_arena *a,
                             struct qr_request *out, struct qr_api_error *err)
{
    struct qr_decode_limits dl;
    if (!lim) {
        qr_decode_limits_default(&dl);
        lim = &dl;
    }
    struct dec d = {.a = a, .lim = lim, .err = err, .out = out};
    memset(out, 0, sizeof(*out));
    out->protocol = QR_PROTO_OLLAMA;
    out->op = op;
    out->stream = op != QR_OP_EMBED; /* Ollama streams unless told otherwise */

    size_t ws = 0;
    while (ws < body.len && (body.ptr[ws] == ' ' || body.ptr[ws] == '\t' || body.ptr[ws] == '\n' ||
                             body.ptr[ws] == '\r'))
        ws++;
    if (ws == body.len)
        return bad(&d, "", "missing request body");

    yyjson_read_err rerr;
    yyjson_doc *doc =
        yyjson_read_opts((char *) body.ptr, body.len, YYJSON_READ_BIGNUM_AS_RAW, NULL, &rerr);
    if (!doc)
        return bad(&d, "", "invalid JSON at byte %zu: %s", rerr.pos,
                   rerr.msg ? rerr.msg : "parse error");
    char why[128];
    enum qr_err e = qr_json_strict_ok(yyjson_doc_get_root(doc), why, sizeof why)
                        ? decode_root(&d, op, legacy_embeddings, yyjson_doc_get_root(doc))
                        : bad(&d, "", "request body refused: %s", why);
    yyjson_doc_free(doc);
    return e;
}

/* ======================================================================================== */
/* Encoder                                                                                   */
/* ======================================================================================== */

/* Bytes viewed as the concatenation of two runs (a held UTF-8 tail + the next event's text). */
struct two {
    const char *a;
    size_t na;
    const char *b;
    size_t nb;
};

static unsigned char two_at(const struct two *t, size_t i)
{
    return (unsigned char) (i < t->na ? t->a[i] : t->b[i - t->na]);
}

static enum qr_err two_append(struct qr_buf *out, const struct two *t, size_t from, size_t to)
{
    if (from < t->na) {
        size_t end = to < t->na ? to : t->na;
        TRY(qr_buf_append(out, t->a + from, end - from));
        from = end;
    }
    if (from < to)
        TRY(qr_buf_append(out, t->b + (from - t->na), to - from));
    return QR_OK;
}

/* Length of the valid UTF-8 sequence at i (RFC 3629: no overlongs, no surrogates, <= U+10FFFF),
 * 0 when the byte there does not start one. */
static size_t utf8_len(const struct two *t, size_t i, size_t n)
{
    unsigned char c = two_at(t, i);
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (n - i < need)
        return 0;
    for (size_t k = 1; k < need; k++) {
        unsigned char x = two_at(t, i + k);
        if (x < (k == 1 ? lo : 0x80) || x > (k == 1 ? hi : 0xBF))
            return 0;
    }
    return need;
}

/* Bytes at the end of t that may still become a valid character with more input. A tail cut at
 * a lead byte changes nothing before it, so holding it back keeps streamed and whole output equal.
 */
static size_t utf8_open_tail(const struct two *t)
{
    size_t n = t->na + t->nb;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        unsigned char c = two_at(t, n - k);
        if (c >= 0x80 && c < 0xC0)
            continue;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        return c >= 0xC2 && c <= 0xF4 && need > k ? k : 0;
    }
    return 0;
}

/* Append t[0..n) as a quoted JSON string; invalid UTF-8 bytes become \ufffd one each. */
static enum qr_err json_str_two(struct qr_buf *out, const struct two *t, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    TRY(qr_buf_append(out, "\"", 1));
    size_t run = 0, i = 0;
    while (i < n) {
        unsigned char c = two_at(t, i);
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t l = utf8_len(t, i, n);
            if (l) {
                i += l;
                continue;
            }
        }
        TRY(two_append(out, t, run, i));
        char esc[8] = {'\\', 0};
        size_t elen = 2;
        if (c == '"' || c == '\\')
            esc[1] = (char) c;
        else if (c == '\n')
            esc[1] = 'n';
        else if (c == '\r')
            esc[1] = 'r';
        else if (c == '\t')
            esc[1] = 't';
        else if (c >= 0x80)
            memcpy(esc, "\\ufffd", (elen = 6));
        else {
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        TRY(qr_buf_append(out, esc, elen));
        run = ++i;
    }
    TRY(two_append(out, t, run, n));
    return qr_buf_append(out, "\"", 1);
}

static enum qr_err json_str(struct qr_buf *out, const char *p, size_t n)
{
    struct two t = {NULL, 0, p ? p : "", n};
    return json_str_two(out, &t, n);
}

static enum qr_err json_slice(struct qr_buf *out, struct qr_slice s)
{
    return json_str(out, s.ptr, s.len);
}

/* {"model":..,"created_at":"..", */
static enum qr_err line_head(const struct qr_ollama_enc *e, struct qr_buf *out)
{
    char ts[48];
    qr_format_rfc3339_ns(e->env.now_ns, ts, sizeof(ts));
    TRY(qr_buf_puts(out, "{\"model\":"));
    TRY(json_slice(out, e->req->model));
    return qr_buf_appendf(out, ",\"created_at\":\"%s\",", ts);
}

/* Check that args is one JSON object; write it with the whitespace between tokens removed (an
 * NDJSON line must not contain a newline), every other byte unchanged. Empty = {}. */
static enum qr_err args_check(const char *p, size_t n)
{
    if (n == 0)
        return QR_OK;
    yyjson_doc *doc = yyjson_read_opts((char *) p, n, YYJSON_READ_BIGNUM_AS_RAW, NULL, NULL);
    bool ok = doc && yyjson_is_obj(yyjson_doc_get_root(doc));
    yyjson_doc_free(doc);
    return ok ? QR_OK : QR_ERR_PARSE;
}

static enum qr_err args_write(struct qr_buf *out, const char *p, size_t n)
{
    if (n == 0)
        return qr_buf_puts(out, "{}");
    size_t run = 0;
    bool in_str = false, esc = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"') {
            in_str = true;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            TRY(qr_buf_append(out, p + run, i - run));
            run = i + 1;
        }
    }
    return qr_buf_append(out, p + run, n - run);
}

/* {"id":"..","function":{"index":i,"name":"..","arguments":{..}}} -- id omitted when empty. */
static enum qr_err tool_call_write(struct qr_buf *out, size_t index, struct qr_slice id,
                                   struct qr_slice name, struct qr_slice args)
{
    TRY(qr_buf_puts(out, "{"));
    if (id.len) {
        TRY(qr_buf_puts(out, "\"id\":"));
        TRY(json_slice(out, id));
        TRY(qr_buf_puts(out, ","));
    }
    TRY(qr_buf_appendf(out, "\"function\":{\"index\":%zu,\"name\":", index));
    TRY(json_slice(out, name));
    TRY(qr_buf_puts(out, ",\"arguments\":"));
    TRY(args_write(out, args.ptr, args.len));
    return qr_buf_puts(out, "}}");
}

/* Ollama's done_reason for a canonical finish; NULL = omit the key (unknown). */
static const char *done_reason(enum qr_finish f)
{
    switch (f) {
    case QR_FINISH_STOP:
    case QR_FINISH_TOOL_CALLS: /* Ollama has no "tool_calls" reason (wire-protocols A.3) */
        return "stop";
    case QR_FINISH_LENGTH:
        return "length";
    case QR_FINISH_CONTENT_FILTER:
        return "content_filter";
    case QR_FINISH_CANCELLED:
        return "cancelled";
    case QR_FINISH_ERROR:
        return "error";
    case QR_FINISH_NONE:
        break;
    }
    return NULL;
}

/* ,"done":true[,"done_reason":".."][,"context":[..]][,metrics]} -- metrics omitted when unknown
 * or 0 as Ollama's omitempty does; context: /api/generate's tokens as the engine gave them. */
static enum qr_err done_tail(struct qr_buf *out, enum qr_finish f, struct qr_slice context,
                             const struct qr_usage *u)
{
    TRY(qr_buf_puts(out, ",\"done\":true"));
    const char *r = done_reason(f);
    if (r)
        TRY(qr_buf_appendf(out, ",\"done_reason\":\"%s\"", r));
    if (context.len) {
        TRY(qr_buf_puts(out, ",\"context\":"));
        TRY(qr_buf_append(out, context.ptr, context.len));
    }
    if (u) {
        const struct {
            const char *key;
            int64_t v;
        } m[] = {{"total_duration", u->total_ns},         {"load_duration", u->load_ns},
                 {"prompt_eval_count", u->prompt_tokens}, {"prompt_eval_duration", u->prompt_ns},
                 {"eval_count", u->completion_tokens},    {"eval_duration", u->eval_ns}};
        for (size_t i = 0; i < QR_ARRAY_LEN(m); i++) {
            if (m[i].v > 0)
                TRY(qr_buf_appendf(out, ",\"%s\":%lld", m[i].key, (long long) m[i].v));
        }
    }
    return qr_buf_puts(out, "}\n");
}

enum qr_err qr_ollama_error_line(const char *message, struct qr_buf *out)
{
    TRY(qr_buf_puts(out, "{\"error\":"));
    TRY(json_str(out, message, message ? strlen(message) : 0));
    return qr_buf_puts(out, "}\n");
}

void qr_ollama_enc_init(struct qr_ollama_enc *e, const struct qr_request *req,
                        const struct qr_enc_env *env)
{
    memset(e, 0, sizeof(*e));
    e->req = req;
    if (env)
        e->env = *env;
    qr_usage_init(&e->usage);
}

void qr_ollama_enc_cleanup(struct qr_ollama_enc *e)
{
    for (size_t i = 0; i < e->n_calls; i++) {
        qr_buf_cleanup(&e->calls[i].id);
        qr_buf_cleanup(&e->calls[i].name);
        qr_buf_cleanup(&e->calls[i].args);
    }
    free(e->calls);
    e->calls = NULL;
    e->n_calls = 0;
    e->held = 0;
}

/* One content (ch 0) or thinking (ch 1) line for t's first n bytes. */
static enum qr_err text_line(const struct qr_ollama_enc *e, int ch, const struct two *t, size_t n,
                             struct qr_buf *out)
{
    static const struct two empty = {NULL, 0, "", 0};
    bool chat = e->req->op == QR_OP_CHAT;
    TRY(line_head(e, out));
    TRY(qr_buf_puts(out,
                    chat ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"response\":"));
    TRY(json_str_two(out, ch == 0 ? t : &empty, ch == 0 ? n : 0));
    if (ch == 1) {
        TRY(qr_buf_puts(out, ",\"thinking\":"));
        TRY(json_str_two(out, t, n));
    }
    return qr_buf_puts(out, chat ? "},\"done\":false}\n" : ",\"done\":false}\n");
}

/* A CONTENT/REASONING event: the held tail plus the new text, minus a new open UTF-8 tail. */
static enum qr_err on_text(struct qr_ollama_enc *e, int ch, struct qr_slice text,
                           struct qr_buf *out)
{
    struct two t = {e->carry[ch], e->n_carry[ch], text.ptr ? text.ptr : "", text.len};
    size_t total = t.na + t.nb, keep = utf8_open_tail(&t);
    char tail[4];
    for (size_t i = 0; i < keep; i++)
        tail[i] = (char) two_at(&t, total - keep + i);
    if (total > keep)
        TRY(text_line(e, ch, &t, total - keep, out));
    memcpy(e->carry[ch], tail, keep);
    e->n_carry[ch] = (unsigned char) keep;
    return QR_OK;
}

/* Lines for what is still held at the end (a cut-off character: written as U+FFFD). */
static enum qr_err flush_carry(struct qr_ollama_enc *e, struct qr_buf *out)
{
    for (int ch = 1; ch >= 0; ch--) {
        if (!e->n_carry[ch])
            continue;
        struct two t = {e->carry[ch], e->n_carry[ch], "", 0};
        e->n_carry[ch] = 0;
        TRY(text_line(e, ch, &t, t.na, out));
    }
    return QR_OK;
}

static enum qr_err call_slot(struct qr_ollama_enc *e, uint32_t index, bool create,
                             struct qr_ollama_call **out)
{
    if (index >= QR_OLLAMA_MAX_TOOL_CALLS)
        return QR_ERR_TOO_LARGE;
    if (index >= e->n_calls) {
        if (!create)
            return QR_ERR_INTERNAL;
        struct qr_ollama_call *c = realloc(e->calls, (index + 1) * sizeof(*c));
        if (!c)
            return QR_ERR_NOMEM;
        for (size_t i = e->n_calls; i <= index; i++) {
            memset(&c[i], 0, sizeof(c[i]));
            qr_buf_init(&c[i].id, 0);
            qr_buf_init(&c[i].name, 0);
            qr_buf_init(&c[i].args, QR_OLLAMA_MAX_TOOL_BYTES);
        }
        e->calls = c;
        e->n_calls = index + 1;
    }
    *out = &e->calls[index];
    if (!create && !(*out)->begun)
        return QR_ERR_INTERNAL;
    return QR_OK;
}

static enum qr_err hold(struct qr_ollama_enc *e, struct qr_buf *b, struct qr_slice s)
{
    if (s.len > QR_OLLAMA_MAX_TOOL_BYTES - e->held)
        return QR_ERR_TOO_LARGE;
    e->held += s.len;
    return qr_buf_append(b, s.ptr ? s.ptr : "", s.len);
}

/* The line for one complete tool call (chat only; /api/generate has no tool calls). */
static enum qr_err emit_call(struct qr_ollama_enc *e, size_t index, struct qr_buf *out)
{
    struct qr_ollama_call *c = &e->calls[index];
    c->emitted = true;
    if (e->req->op != QR_OP_CHAT)
        return QR_OK;
    TRY(args_check(c->args.ptr, c->args.len));
    TRY(line_head(e, out));
    TRY(qr_buf_puts(out, "\"message\":{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":["));
    TRY(tool_call_write(out, index, (struct qr_slice){c->id.ptr, c->id.len},
                        (struct qr_slice){c->name.ptr, c->name.len},
                        (struct qr_slice){c->args.ptr, c->args.len}));
    return qr_buf_puts(out, "]},\"done\":false}\n");
}

/* The final line(s). finished is set only once they are written, so that after a failure here
 * the caller can still end the stream with an ERROR event. */
static enum qr_err on_done(struct qr_ollama_enc *e, enum qr_finish f, struct qr_slice context,
                           struct qr_buf *out)
{
    if (f == QR_FINISH_CANCELLED || f == QR_FINISH_ERROR) { /* never a successful done line */
        TRY(qr_ollama_error_line(
            f == QR_FINISH_CANCELLED ? "request cancelled" : "generation failed", out));
        return QR_OK;
    }
    TRY(flush_carry(e, out));
    for (size_t i = 0; i < e->n_calls; i++) {
        if (e->calls[i].begun && !e->calls[i].emitted)
            TRY(emit_call(e, i, out));
    }
    TRY(line_head(e, out));
    if (e->req->op == QR_OP_CHAT)
        TRY(qr_buf_puts(out, "\"message\":{\"role\":\"assistant\",\"content\":\"\"}"));
    else
        TRY(qr_buf_puts(out, "\"response\":\"\""));
    if (e->req->op == QR_OP_CHAT)
        context = (struct qr_slice){NULL, 0}; /* a generate-only field */
    return done_tail(out, f, context, e->has_usage ? &e->usage : NULL);
}

static enum qr_err on_error(const struct qr_event *ev, struct qr_buf *out)
{
    struct qr_slice m = ev->message.len ? ev->message : ev->code;
    if (!m.len)
        m = QR_SLICE_LIT("upstream error");
    TRY(qr_buf_puts(out, "{\"error\":"));
    TRY(json_slice(out, m));
    return qr_buf_puts(out, "}\n");
}

enum qr_err qr_ollama_enc_event(struct qr_ollama_enc *e, const struct qr_event *ev,
                                struct qr_buf *out)
{
    struct qr_ollama_call *c;
    if (e->finished || e->req->op == QR_OP_EMBED)
        return QR_OK; /* nothing follows a done or error line; embeddings are never streamed */
    switch (ev->type) {
    case QR_EV_CONTENT:
        return on_text(e, 0, ev->text, out);
    case QR_EV_REASONING:
        return on_text(e, 1, ev->text, out);
    case QR_EV_TOOL_BEGIN:
        TRY(call_slot(e, ev->index, true, &c));
        if (c->begun)
            return QR_ERR_INTERNAL;
        c->begun = true;
        TRY(hold(e, &c->id, ev->id));
        return hold(e, &c->name, ev->name);
    case QR_EV_TOOL_ARGS:
        TRY(call_slot(e, ev->index, false, &c));
        if (c->emitted)
            return QR_ERR_INTERNAL;
        return hold(e, &c->args, ev->text);
    case QR_EV_TOOL_END:
        TRY(call_slot(e, ev->index, false, &c));
        if (c->emitted)
            return QR_ERR_INTERNAL;
        return emit_call(e, ev->index, out);
    case QR_EV_USAGE:
        e->usage = ev->usage;
        e->has_usage = true;
        return QR_OK;
    case QR_EV_DONE:
    case QR_EV_ERROR:
        TRY(ev->type == QR_EV_DONE ? on_done(e, ev->finish, ev->context, out) : on_error(ev, out));
        e->finished = true;
        qr_ollama_enc_cleanup(e);
        return QR_OK;
    case QR_EV_START:
    case QR_EV_META:
    case QR_EV_EMBEDDING:
    case QR_EV_RERANK: /* the Ollama API has no rerank route */
        return QR_OK;
    }
    return QR_OK;
}

static enum qr_err embed_vec(struct qr_buf *out, const float *v, size_t dims)
{
    TRY(qr_buf_puts(out, "["));
    for (size_t i = 0; i < dims; i++) {
        if (!isfinite(v[i]))
            return QR_ERR_UPSTREAM;
        char num[32];
        size_t n = qr_fmt_float32(num, v[i]);
        if (i)
            TRY(qr_buf_puts(out, ","));
        TRY(qr_buf_append(out, num, n));
    }
    return qr_buf_puts(out, "]");
}

static enum qr_err embed_answer(struct qr_ollama_enc *e, const struct qr_answer *a,
                                struct qr_buf *out)
{
    for (size_t i = 0; i < a->n_vectors; i++) {
        if (!a->vectors[i] && a->dims[i])
            return QR_ERR_UPSTREAM;
        for (size_t j = 0; j < a->dims[i]; j++) {
            if (!isfinite(a->vectors[i][j]))
                return QR_ERR_UPSTREAM;
        }
    }
    if (e->legacy_embeddings) {
        TRY(qr_buf_puts(out, "{\"embedding\":"));
        if (a->n_vectors)
            TRY(embed_vec(out, a->vectors[0], a->dims[0]));
        else
            TRY(qr_buf_puts(out, "[]"));
        return qr_buf_puts(out, "}\n");
    }
    TRY(qr_buf_puts(out, "{\"model\":"));
    TRY(json_slice(out, e->req->model));
    TRY(qr_buf_puts(out, ",\"embeddings\":["));
    for (size_t i = 0; i < a->n_vectors; i++) {
        if (i)
            TRY(qr_buf_puts(out, ","));
        TRY(embed_vec(out, a->vectors[i], a->dims[i]));
    }
    TRY(qr_buf_puts(out, "]"));
    if (a->has_usage) {
        const struct qr_usage *u = &a->usage;
        if (u->total_ns > 0)
            TRY(qr_buf_appendf(out, ",\"total_duration\":%lld", (long long) u->total_ns));
        if (u->load_ns > 0)
            TRY(qr_buf_appendf(out, ",\"load_duration\":%lld", (long long) u->load_ns));
        if (u->prompt_tokens > 0)
            TRY(qr_buf_appendf(out, ",\"prompt_eval_count\":%lld", (long long) u->prompt_tokens));
    }
    return qr_buf_puts(out, "}\n");
}

enum qr_err qr_ollama_enc_answer(struct qr_ollama_enc *e, const struct qr_answer *a,
                                 struct qr_buf *out)
{
    if (a->failed)
        return QR_ERR_UPSTREAM;
    if (a->finish == QR_FINISH_CANCELLED)
        return QR_ERR_CANCELLED;
    if (a->finish == QR_FINISH_ERROR)
        return QR_ERR_UPSTREAM;
    if (e->req->op == QR_OP_EMBED)
        return embed_answer(e, a, out);
    bool chat = e->req->op == QR_OP_CHAT;
    size_t n_calls = chat ? a->n_calls : 0;
    for (size_t i = 0; i < n_calls; i++)
        TRY(args_check(a->calls[i].arguments.ptr, a->calls[i].arguments.len));
    TRY(line_head(e, out));
    TRY(qr_buf_puts(out,
                    chat ? "\"message\":{\"role\":\"assistant\",\"content\":" : "\"response\":"));
    TRY(json_str(out, a->content.ptr, a->content.len));
    if (a->reasoning.len) {
        TRY(qr_buf_puts(out, ",\"thinking\":"));
        TRY(json_str(out, a->reasoning.ptr, a->reasoning.len));
    }
    if (n_calls) {
        TRY(qr_buf_puts(out, ",\"tool_calls\":["));
        for (size_t i = 0; i < n_calls; i++) {
            const struct qr_answer_call *c = &a->calls[i];
            if (i)
                TRY(qr_buf_puts(out, ","));
            TRY(tool_call_write(out, i, (struct qr_slice){c->id.ptr, c->id.len},
                                (struct qr_slice){c->name.ptr, c->name.len},
                                (struct qr_slice){c->arguments.ptr, c->arguments.len}));
        }
        TRY(qr_buf_puts(out, "]"));
    }
    if (chat)
        TRY(qr_buf_puts(out, "}"));
    struct qr_slice context = {a->context.ptr, chat ? 0 : a->context.len};
    return done_tail(out, a->finish, context, a->has_usage ? &a->usage : NULL);
}

enum qr_err qr_ollama_enc_load(struct qr_ollama_enc *e, bool unload, struct qr_buf *out)
{
    const char *reason = unload ? "unload" : "load";
    if (e->req->op == QR_OP_EMBED) {
        if (e->legacy_embeddings)
            return qr_buf_puts(out, "{\"embedding\":[]}\n");
        TRY(qr_buf_puts(out, "{\"model\":"));
        TRY(json_slice(out, e->req->model));
        return qr_buf_puts(out, ",\"embeddings\":[]}\n");
    }
    TRY(line_head(e, out));
    if (e->req->op == QR_OP_CHAT)
        TRY(qr_buf_puts(out, "\"message\":{\"role\":\"assistant\",\"content\":\"\"}"));
    else
        TRY(qr_buf_puts(out, "\"response\":\"\""));
    return qr_buf_appendf(out, ",\"done\":true,\"done_reason\":\"%s\"}\n", reason);
}

void qr_ollama_error_body(const struct qr_api_error *err, const char *request_id,
                          struct qr_buf *out)
{
    const char *code = err && err->code[0] ? err->code : "internal_error";
    const char *msg = err ? err->message : "internal error";
    if (qr_buf_puts(out, "{\"error\":{\"code\":") || json_str(out, code, strlen(code)) ||
        qr_buf_puts(out, ",\"message\":") || json_str(out, msg, strlen(msg)))
        return;
    if (request_id && request_id[0]) {
        if (qr_buf_puts(out, ",\"request_id\":") || json_str(out, request_id, strlen(request_id)))
            return;
    }
    qr_buf_puts(out, "}}\n");
}
