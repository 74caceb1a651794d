/* Backend descriptors (quantum.runtime/backend/v1alpha1) between JSON and struct: a strict,
 * size-capped parser that rejects unknown and duplicate members and enforces the contract's rules,
 * and a formatter whose output the parser reads back to the same struct. The shape and the rules
 * are documented in descriptor.h. */
#include "capability/descriptor.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

static const char *const kind_names[QR_CAP_KIND__COUNT] = {
    [QR_CAP_KIND_OLLAMA] = "ollama-adapter",
    [QR_CAP_KIND_LLAMACPP] = "llama.cpp",
    [QR_CAP_KIND_MLX] = "mlx",
    [QR_CAP_KIND_VLLM] = "vllm",
    [QR_CAP_KIND_EXTERNAL] = "external",
    [QR_CAP_KIND_OPENAI] = "openai-compatible",
};

static const char *const mode_names[QR_CAP_EXEC__COUNT] = {
    [QR_CAP_EXEC_EXTERNAL] = "external",
    [QR_CAP_EXEC_PROCESS] = "process",
    [QR_CAP_EXEC_LIBRARY] = "library",
};

static const char *const bstate_names[QR_CAP_BACKEND__COUNT] = {
    [QR_CAP_BACKEND_UNKNOWN] = "unknown",
    [QR_CAP_BACKEND_READY] = "ready",
    [QR_CAP_BACKEND_UNAVAILABLE] = "unavailable",
    [QR_CAP_BACKEND_DISABLED] = "disabled",
};

const char *qr_cap_backend_kind_str(enum qr_cap_backend_kind k)
{
    return (unsigned) k < QR_CAP_KIND__COUNT ? kind_names[k] : "";
}

const char *qr_cap_exec_mode_str(enum qr_cap_exec_mode m)
{
    return (unsigned) m < QR_CAP_EXEC__COUNT ? mode_names[m] : "";
}

const char *qr_cap_backend_state_str(enum qr_cap_backend_state s)
{
    return (unsigned) s < QR_CAP_BACKEND__COUNT ? bstate_names[s] : "unknown";
}

static const char *const source_detail = "declared by the backend descriptor";

/* ---- shared checks (parse and validate) ---- */

static enum qr_err bad(struct qr_diag *diag, enum qr_err err, const char *member, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static enum qr_err bad(struct qr_diag *diag, enum qr_err err, const char *member, const char *fmt,
                       ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    return qr_diag_set(diag, err, "invalid backend descriptor: '%s': %s", member, why);
}

static bool id_ok(const char *s, size_t n)
{
    if (n == 0 || n > QR_CAP_DESC_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
            return false;
    }
    return true;
}

static bool printable_ok(const char *s, size_t n, size_t max, bool allow_empty)
{
    if ((n == 0 && !allow_empty) || n > max)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] > 0x7e)
            return false;
    }
    return true;
}

static bool format_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > QR_CAP_DESC_FORMAT_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static enum qr_cap_state formats_state(size_t n_formats)
{
    return n_formats > 0 ? QR_CAP_CONDITIONAL : QR_CAP_UNKNOWN;
}

/* ---- parse ---- */

/* Index of s in names[n], or -1. */
static int enum_index(yyjson_val *v, const char *const *names, int n)
{
    if (!yyjson_is_str(v))
        return -1;
    struct qr_slice s = {yyjson_get_str(v), yyjson_get_len(v)};
    for (int i = 0; i < n; i++) {
        if (qr_slice_eq(s, names[i]))
            return i;
    }
    return -1;
}

/* A bounded copy of a yyjson string member into dst[max + 1] after checking it. */
static enum qr_err copy_str(yyjson_val *v, const char *member, char *dst, size_t max, bool is_id,
                            struct qr_diag *diag)
{
    if (!yyjson_is_str(v))
        return bad(diag, QR_ERR_INVALID, member, "must be a string");
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    if (n > max)
        return bad(diag, QR_ERR_INVALID, member, "longer than %zu bytes", max);
    if (is_id ? !id_ok(s, n) : !printable_ok(s, n, max, false))
        return bad(diag, QR_ERR_INVALID, member,
                   is_id ? "must match [a-z0-9][a-z0-9._-]*"
                         : "must be printable ASCII, non-empty");
    memcpy(dst, s, n);
    dst[n] = 0;
    return QR_OK;
}

static enum qr_err parse_state(yyjson_val *v, const char *member, enum qr_cap_state *out,
                               struct qr_diag *diag)
{
    if (!yyjson_is_str(v) ||
        qr_cap_state_parse((struct qr_slice){yyjson_get_str(v), yyjson_get_len(v)}, out) != QR_OK)
        return bad(diag, QR_ERR_INVALID, member,
                   "must be one of supported, unsupported, conditional, unknown");
    return QR_OK;
}

/* Shortened member name for messages (hostile keys are cut and may contain anything). */
static void member_name(char *dst, size_t cap, const char *prefix, yyjson_val *key)
{
    const char *k = yyjson_get_str(key);
    size_t n = yyjson_get_len(key);
    int shown = n > 64 ? 64 : (int) n;
    snprintf(dst, cap, "%s%.*s", prefix, shown, k);
    for (char *p = dst; *p; p++) {
        if (*p < 0x20 || *p > 0x7e || *p == '\'')
            *p = '?';
    }
}

static enum qr_err parse_formats(yyjson_val *v, struct qr_cap_descriptor *out, struct qr_diag *diag)
{
    const char *m = "capabilities.quantization_formats";
    if (!yyjson_is_arr(v))
        return bad(diag, QR_ERR_INVALID, m, "must be an array of strings");
    size_t n = yyjson_arr_size(v);
    if (n == 0)
        return bad(diag, QR_ERR_INVALID, m, "must not be empty (omit it instead)");
    if (n > QR_CAP_DESC_FORMATS_MAX)
        return bad(diag, QR_ERR_INVALID, m, "more than %d formats", QR_CAP_DESC_FORMATS_MAX);
    yyjson_val *it;
    size_t idx, max;
    yyjson_arr_foreach(v, idx, max, it)
    {
        if (!yyjson_is_str(it) || !format_name_ok(yyjson_get_str(it), yyjson_get_len(it)))
            return bad(diag, QR_ERR_INVALID, m, "item %zu must be a name of 1..%d [A-Za-z0-9._-]",
                       idx, QR_CAP_DESC_FORMAT_MAX);
        for (size_t j = 0; j < out->n_formats; j++) {
            if (strcmp(out->formats[j], yyjson_get_str(it)) == 0)
                return bad(diag, QR_ERR_INVALID, m, "duplicate format '%s'", out->formats[j]);
        }
        memcpy(out->formats[out->n_formats], yyjson_get_str(it), yyjson_get_len(it));
        out->formats[out->n_formats][yyjson_get_len(it)] = 0;
        out->n_formats++;
    }
    return QR_OK;
}

enum ctx_member { CTX_MANAGED, CTX_SUPPORTED, CTX_VERIFIED, CTX_NATIVE_MAX, CTX__COUNT };
static const char *const ctx_names[CTX__COUNT] = {"backend_managed", "override_supported",
                                                  "override_verified", "native_max"};

static enum qr_err parse_context(yyjson_val *v, struct qr_cap_descriptor *out, struct qr_diag *diag)
{
    if (!yyjson_is_obj(v))
        return bad(diag, QR_ERR_INVALID, "capabilities.context", "must be an object");
    unsigned seen = 0;
    char m[128];
    yyjson_val *key, *val;
    size_t idx, max;
    yyjson_obj_foreach(v, idx, max, key, val)
    {
        member_name(m, sizeof(m), "capabilities.context.", key);
        int i = enum_index(key, ctx_names, CTX__COUNT);
        if (i < 0)
            return bad(diag, QR_ERR_INVALID, m, "unknown member");
        if (seen & (1u << i))
            return bad(diag, QR_ERR_INVALID, m, "duplicate member");
        seen |= 1u << i;
        enum qr_err err = QR_OK;
        switch ((enum ctx_member) i) {
        case CTX_MANAGED:
        case CTX_VERIFIED:
            if (!yyjson_is_bool(val))
                return bad(diag, QR_ERR_INVALID, m, "must be a boolean");
            *(i == CTX_MANAGED ? &out->backend_managed : &out->override_verified) =
                yyjson_get_bool(val);
            break;
        case CTX_SUPPORTED:
            err = parse_state(val, m, &out->caps[QR_CAP_CONTEXT_OVERRIDE], diag);
            break;
        case CTX_NATIVE_MAX:
            if (yyjson_is_uint(val) && yyjson_get_uint(val) <= INT64_MAX)
                out->native_max = (int64_t) yyjson_get_uint(val);
            else if (yyjson_is_sint(val) && yyjson_get_sint(val) >= 0)
                out->native_max = yyjson_get_sint(val);
            else
                return bad(diag, QR_ERR_INVALID, m, "must be an integer >= 0");
            break;
        default:
            break;
        }
        if (err)
            return err;
    }
    for (int i = 0; i < CTX__COUNT; i++) {
        if (i != CTX_NATIVE_MAX && !(seen & (1u << i))) {
            snprintf(m, sizeof(m), "capabilities.context.%s", ctx_names[i]);
            return bad(diag, QR_ERR_INVALID, m, "missing");
        }
    }
    return QR_OK;
}

static enum qr_err parse_caps(yyjson_val *v, struct qr_cap_descriptor *out, struct qr_diag *diag)
{
    if (!yyjson_is_obj(v))
        return bad(diag, QR_ERR_INVALID, "capabilities", "must be an object");
    uint64_t seen = 0;
    char m[128];
    yyjson_val *key, *val;
    size_t idx, max;
    yyjson_obj_foreach(v, idx, max, key, val)
    {
        member_name(m, sizeof(m), "capabilities.", key);
        struct qr_slice name = {yyjson_get_str(key), yyjson_get_len(key)};
        /* "context" takes the slot of context.override, whose field lives inside it; the
         * flat spelling "context.override_supported" is not a member */
        bool is_ctx = qr_slice_eq(name, "context");
        enum qr_cap_key k = is_ctx ? QR_CAP_CONTEXT_OVERRIDE : qr_cap_key_parse_field(name);
        const struct qr_cap_info *info = qr_cap_info(k);
        if (!info || (info->field_kind == QR_CAP_FIELD_CONTEXT) != is_ctx)
            return bad(diag, QR_ERR_INVALID, m, "unknown member");
        if (seen & (UINT64_C(1) << k))
            return bad(diag, QR_ERR_INVALID, m, "duplicate member");
        seen |= UINT64_C(1) << k;
        enum qr_err err = info->field_kind == QR_CAP_FIELD_CONTEXT ? parse_context(val, out, diag)
                          : info->field_kind == QR_CAP_FIELD_LIST
                              ? parse_formats(val, out, diag)
                              : parse_state(val, m, &out->caps[k], diag);
        if (err)
            return err;
    }
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        const struct qr_cap_info *info = qr_cap_info((enum qr_cap_key) k);
        if (info->legacy && !(seen & (UINT64_C(1) << k))) {
            snprintf(m, sizeof(m), "capabilities.%s",
                     info->field_kind == QR_CAP_FIELD_CONTEXT ? "context" : info->field);
            return bad(diag, QR_ERR_INVALID, m, "missing");
        }
    }
    out->caps[QR_CAP_QUANT_FORMATS] = formats_state(out->n_formats);
    return QR_OK;
}

enum top_member {
    T_CONTRACT,
    T_ID,
    T_KIND,
    T_VERSION,
    T_MODE,
    T_STATE,
    T_ENDPOINT,
    T_CAPS,
    T_DIALECT, /* optional, informational: the OpenAI adapter's dialect profile (DIALECTS.md) */
    T__N
};
static const char *const top_names[T__N] = {
    "contract_version", "id",           "kind",   "adapter_version", "execution_mode", "state",
    "endpoint",         "capabilities", "dialect"};

static enum qr_err parse_member(enum top_member t, yyjson_val *val, struct qr_cap_descriptor *out,
                                struct qr_diag *diag)
{
    const char *m = top_names[t];
    int i;
    switch (t) {
    case T_CONTRACT:
        if (!yyjson_is_str(val) ||
            !qr_slice_eq((struct qr_slice){yyjson_get_str(val), yyjson_get_len(val)},
                         QR_CAP_CONTRACT))
            return bad(diag, QR_ERR_INVALID, m, "must be \"%s\"", QR_CAP_CONTRACT);
        return QR_OK;
    case T_ID:
        return copy_str(val, m, out->id, QR_CAP_DESC_ID_MAX, true, diag);
    case T_VERSION:
        return copy_str(val, m, out->adapter_version, QR_CAP_DESC_VERSION_MAX, false, diag);
    case T_ENDPOINT:
        return copy_str(val, m, out->endpoint, QR_CAP_DESC_ENDPOINT_MAX, false, diag);
    case T_KIND:
        if ((i = enum_index(val, kind_names, QR_CAP_KIND__COUNT)) < 0)
            return bad(diag, QR_ERR_INVALID, m, "unknown kind");
        out->kind = (enum qr_cap_backend_kind) i;
        return QR_OK;
    case T_MODE:
        if ((i = enum_index(val, mode_names, QR_CAP_EXEC__COUNT)) < 0)
            return bad(diag, QR_ERR_INVALID, m, "must be one of external, process, library");
        out->execution_mode = (enum qr_cap_exec_mode) i;
        return QR_OK;
    case T_STATE:
        if ((i = enum_index(val, bstate_names, QR_CAP_BACKEND__COUNT)) < 0)
            return bad(diag, QR_ERR_INVALID, m,
                       "must be one of ready, unknown, unavailable, disabled");
        out->state = (enum qr_cap_backend_state) i;
        return QR_OK;
    case T_CAPS:
        return parse_caps(val, out, diag);
    case T_DIALECT:
        return yyjson_is_obj(val) ? QR_OK : bad(diag, QR_ERR_INVALID, m, "must be an object");
    default:
        return bad(diag, QR_ERR_INTERNAL, m, "unhandled member");
    }
}

enum qr_err qr_cap_descriptor_parse(const char *json, size_t len, struct qr_diag *diag,
                                    struct qr_cap_descriptor *out)
{
    memset(out, 0, sizeof(*out));
    if (len > QR_CAP_DESC_MAX_BYTES)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE,
                           "invalid backend descriptor: %zu bytes (limit %d)", len,
                           QR_CAP_DESC_MAX_BYTES);
    if (!json || len == 0)
        return qr_diag_set(diag, QR_ERR_PARSE, "invalid backend descriptor: empty document");
    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) json, len, YYJSON_READ_NOFLAG, NULL, &rerr);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_PARSE, "invalid backend descriptor: %s at byte %zu",
                           rerr.msg ? rerr.msg : "malformed JSON", rerr.pos);
    enum qr_err err = QR_OK;
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (!yyjson_is_obj(root)) {
        err = qr_diag_set(diag, QR_ERR_INVALID, "invalid backend descriptor: not a JSON object");
        goto fail;
    }
    unsigned seen = 0;
    char m[128];
    yyjson_val *key, *val;
    size_t idx, max;
    yyjson_obj_foreach(root, idx, max, key, val)
    {
        int t = enum_index(key, top_names, T__N);
        member_name(m, sizeof(m), "", key);
        if (t < 0) {
            err = bad(diag, QR_ERR_INVALID, m, "unknown member");
            goto fail;
        }
        if (seen & (1u << t)) {
            err = bad(diag, QR_ERR_INVALID, m, "duplicate member");
            goto fail;
        }
        seen |= 1u << t;
        if ((err = parse_member((enum top_member) t, val, out, diag)) != QR_OK)
            goto fail;
    }
    for (int t = 0; t < T__N; t++) {
        if (t != T_ENDPOINT && t != T_DIALECT && !(seen & (1u << t))) {
            err = bad(diag, QR_ERR_INVALID, top_names[t], "missing");
            goto fail;
        }
    }
    yyjson_doc_free(doc);
    return qr_cap_descriptor_validate(out, diag);

fail:
    yyjson_doc_free(doc);
    return err;
}

/* ---- validate ---- */

static bool bounded_strlen(const char *s, size_t max, size_t *out)
{
    const char *nul = memchr(s, 0, max + 1);
    if (!nul)
        return false;
    *out = (size_t) (nul - s);
    return true;
}

enum qr_err qr_cap_descriptor_validate(const struct qr_cap_descriptor *d, struct qr_diag *diag)
{
    size_t n;
    if (!bounded_strlen(d->id, QR_CAP_DESC_ID_MAX, &n) || !id_ok(d->id, n))
        return bad(diag, QR_ERR_INVALID, "id", "must match [a-z0-9][a-z0-9._-]*");
    if (!bounded_strlen(d->adapter_version, QR_CAP_DESC_VERSION_MAX, &n) ||
        !printable_ok(d->adapter_version, n, QR_CAP_DESC_VERSION_MAX, false))
        return bad(diag, QR_ERR_INVALID, "adapter_version", "must be printable ASCII, non-empty");
    if (!bounded_strlen(d->endpoint, QR_CAP_DESC_ENDPOINT_MAX, &n) ||
        !printable_ok(d->endpoint, n, QR_CAP_DESC_ENDPOINT_MAX, true))
        return bad(diag, QR_ERR_INVALID, "endpoint", "must be printable ASCII");
    if ((unsigned) d->kind >= QR_CAP_KIND__COUNT)
        return bad(diag, QR_ERR_INVALID, "kind", "unknown kind");
    if ((unsigned) d->execution_mode >= QR_CAP_EXEC__COUNT)
        return bad(diag, QR_ERR_INVALID, "execution_mode", "unknown mode");
    if ((unsigned) d->state >= QR_CAP_BACKEND__COUNT)
        return bad(diag, QR_ERR_INVALID, "state", "unknown state");
    for (int k = 0; k < QR_CAP__COUNT; k++) {
        if ((unsigned) d->caps[k] > QR_CAP_CONDITIONAL)
            return bad(diag, QR_ERR_INVALID, qr_cap_key_name((enum qr_cap_key) k), "not a state");
    }
    if (d->n_formats > QR_CAP_DESC_FORMATS_MAX)
        return bad(diag, QR_ERR_INVALID, "capabilities.quantization_formats", "too many formats");
    for (size_t i = 0; i < d->n_formats; i++) {
        if (!bounded_strlen(d->formats[i], QR_CAP_DESC_FORMAT_MAX, &n) ||
            !format_name_ok(d->formats[i], n))
            return bad(diag, QR_ERR_INVALID, "capabilities.quantization_formats",
                       "item %zu is not a format name", i);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(d->formats[i], d->formats[j]) == 0)
                return bad(diag, QR_ERR_INVALID, "capabilities.quantization_formats",
                           "duplicate format '%s'", d->formats[i]);
        }
    }
    if (d->caps[QR_CAP_QUANT_FORMATS] != formats_state(d->n_formats))
        return bad(diag, QR_ERR_INVALID, "quantization.formats",
                   "state must be conditional with formats listed, unknown without");
    if (d->native_max < 0)
        return bad(diag, QR_ERR_INVALID, "capabilities.context.native_max", "must be >= 0");
    if (d->override_verified && d->caps[QR_CAP_CONTEXT_OVERRIDE] != QR_CAP_SUPPORTED)
        return bad(diag, QR_ERR_INVALID, "capabilities.context.override_verified",
                   "true requires override_supported=supported");
    return QR_OK;
}

/* ---- format ---- */

enum qr_err qr_cap_descriptor_add(const struct qr_cap_descriptor *d, yyjson_mut_doc *doc,
                                  yyjson_mut_val *obj)
{
    yyjson_mut_val *caps = yyjson_mut_obj(doc);
    yyjson_mut_val *ctx = yyjson_mut_obj(doc);
    bool ok = caps && ctx &&
              yyjson_mut_obj_add_str(doc, obj, "contract_version", QR_CAP_CONTRACT) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "id", d->id) &&
              yyjson_mut_obj_add_str(doc, obj, "kind", qr_cap_backend_kind_str(d->kind)) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "adapter_version", d->adapter_version) &&
              yyjson_mut_obj_add_str(doc, obj, "execution_mode",
                                     qr_cap_exec_mode_str(d->execution_mode)) &&
              yyjson_mut_obj_add_str(doc, obj, "state", qr_cap_backend_state_str(d->state));
    if (ok && d->endpoint[0])
        ok = yyjson_mut_obj_add_strcpy(doc, obj, "endpoint", d->endpoint);
    for (int k = 0; ok && k < QR_CAP__COUNT; k++) {
        const struct qr_cap_info *info = qr_cap_info((enum qr_cap_key) k);
        if (info->field_kind == QR_CAP_FIELD_LIST && d->n_formats > 0) {
            yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, caps, info->field);
            for (size_t i = 0; arr && i < d->n_formats; i++)
                ok = ok && yyjson_mut_arr_add_strcpy(doc, arr, d->formats[i]);
            ok = ok && arr;
        } else if (info->field_kind == QR_CAP_FIELD_STATE && (info->legacy || d->caps[k])) {
            ok = yyjson_mut_obj_add_str(doc, caps, info->field, qr_cap_state_str(d->caps[k]));
        }
    }
    ok = ok && yyjson_mut_obj_add_bool(doc, ctx, "backend_managed", d->backend_managed) &&
         yyjson_mut_obj_add_str(doc, ctx, "override_supported",
                                qr_cap_state_str(d->caps[QR_CAP_CONTEXT_OVERRIDE])) &&
         yyjson_mut_obj_add_bool(doc, ctx, "override_verified", d->override_verified);
    if (ok && d->native_max > 0)
        ok = yyjson_mut_obj_add_int(doc, ctx, "native_max", d->native_max);
    ok = ok && yyjson_mut_obj_add_val(doc, caps, "context", ctx) &&
         yyjson_mut_obj_add_val(doc, obj, "capabilities", caps);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

enum qr_err qr_cap_descriptor_format(const struct qr_cap_descriptor *d, struct qr_diag *diag,
                                     char **out, size_t *out_len)
{
    enum qr_err err = qr_cap_descriptor_validate(d, diag);
    if (err)
        return err;
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    if (!root) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot format backend descriptor: out of memory");
        goto fail;
    }
    yyjson_mut_doc_set_root(doc, root);
    if ((err = qr_cap_descriptor_add(d, doc, root)) != QR_OK) {
        qr_diag_set(diag, err, "cannot format backend descriptor: out of memory");
        goto fail;
    }
    size_t len = 0;
    char *text = yyjson_mut_write(doc, YYJSON_WRITE_NOFLAG, &len);
    if (!text) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot format backend descriptor: out of memory");
        goto fail;
    }
    yyjson_mut_doc_free(doc);
    *out = text;
    *out_len = len;
    return QR_OK;

fail:
    yyjson_mut_doc_free(doc);
    return err;
}

/* ---- evidence ---- */

void qr_cap_evidence_from_descriptor(struct qr_cap_evidence *ev, const struct qr_cap_descriptor *d)
{
    for (int k = 0; k < QR_CAP__COUNT; k++)
        qr_cap_evidence_set(ev, QR_CAP_SRC_BACKEND, (enum qr_cap_key) k, d->caps[k], source_detail);
}

bool qr_cap_descriptor_has_format(const struct qr_cap_descriptor *d, const char *name)
{
    for (size_t i = 0; name && i < d->n_formats && i < QR_CAP_DESC_FORMATS_MAX; i++) {
        if (strcmp(d->formats[i], name) == 0)
            return true;
    }
    return false;
}
