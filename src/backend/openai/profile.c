/* OpenAI-compatible dialect profiles: the builtin data/dialects/<name>.json files parsed strictly
 * (they are hostile input like every data file: unknown keys, wrong types, oversized strings and
 * lists are rejected with the JSON path), the reasoning field of a version era, the mapping of a
 * profile onto the encoder's struct qr_dialect, and dialect detection from probe answers. */
#include "backend/openai/profile.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "core/builtin.h"
#include "policy/pjson.h"

const char *const qr_openai_dialects[] = {"vllm", "mlx-lm", "llama-server", "generic", NULL};

static const char *const reasoning_fields[] = {"reasoning", "reasoning_content", NULL};
static const char *const healthy_names[] = {"2xx", "status_ok", NULL};
static const char *const guided_names[] = {"structured_outputs", "response_format", "none", NULL};
/* unsupported_ops names, indexed by enum qr_op */
static const char *const op_names[] = {"chat", "completions", "embeddings", "rerank", NULL};

static bool copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= cap)
        return false;
    memcpy(dst, src ? src : "", n);
    dst[n] = 0;
    return true;
}

/* A string field copied into dst (cap bytes); absent leaves dst "" unless required. */
static enum qr_err str_field(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                             char *dst, size_t cap)
{
    const char *s;
    enum qr_err err = qr_pj_str(p, obj, key, required, cap - 1, &s);
    if (err == QR_OK && s)
        copy(dst, cap, s);
    return err;
}

static enum qr_err enum_field(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                              const char *const *names, int *out)
{
    const char *s;
    enum qr_err err = qr_pj_str(p, obj, key, required, QR_PJ_MAX_ID, &s);
    if (err || !s)
        return err;
    int i = qr_pj_lookup(s, names);
    if (i < 0) {
        size_t mark = qr_pj_push_key(p, key);
        err = qr_pj_fail(p, "unknown value '%s'", s);
        qr_pj_pop(p, mark);
        return err;
    }
    *out = i;
    return QR_OK;
}

/* A path: starts with '/', printable, no spaces, no "..", no query. */
static enum qr_err path_field(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                              char *dst, size_t cap)
{
    enum qr_err err = str_field(p, obj, key, required, dst, cap);
    if (err || !dst[0])
        return err;
    bool ok = dst[0] == '/' && !strstr(dst, "..");
    for (const char *c = dst; ok && *c; c++)
        ok = isgraph((unsigned char) *c) && *c != '?' && *c != '#' && *c != '%';
    if (ok)
        return QR_OK;
    size_t mark = qr_pj_push_key(p, key);
    err = qr_pj_fail(p, "expected an absolute path without '..', '?', '#', '%%' or spaces");
    qr_pj_pop(p, mark);
    return err;
}

static bool version_ok(const char *s)
{
    if (!isdigit((unsigned char) s[0]))
        return false;
    for (; *s; s++) {
        if (!isdigit((unsigned char) *s) && *s != '.')
            return false;
    }
    return true;
}

static enum qr_err parse_eras(struct qr_pj *p, yyjson_val *root, struct qr_oa_profile *out)
{
    static const char *const keys[] = {"min_version", "reasoning_field", NULL};
    yyjson_val *arr;
    size_t n;
    enum qr_err err = qr_pj_array(p, root, "reasoning_eras", false, QR_OA_MAX_ERAS, &arr, &n);
    if (err || !arr)
        return err;
    size_t mark = qr_pj_push_key(p, "reasoning_eras");
    for (size_t i = 0; i < n; i++) {
        yyjson_val *e = yyjson_arr_get(arr, i);
        struct qr_oa_era *era = &out->eras[i];
        size_t m2 = qr_pj_push_idx(p, i);
        int f = 0;
        if ((err = qr_pj_object(p, e, keys)) ||
            (err = str_field(p, e, "min_version", true, era->min_version,
                             sizeof(era->min_version))) ||
            (err = enum_field(p, e, "reasoning_field", true, reasoning_fields, &f)))
            return err;
        if (!version_ok(era->min_version))
            return qr_pj_fail(p, "min_version '%s' is not a dotted number", era->min_version);
        if (i > 0 && qr_openai_version_cmp(era->min_version, out->eras[i - 1].min_version) >= 0)
            return qr_pj_fail(p, "eras must be newest first");
        copy(era->reasoning_field, sizeof(era->reasoning_field), reasoning_fields[f]);
        qr_pj_pop(p, m2);
    }
    out->n_eras = n;
    qr_pj_pop(p, mark);
    return QR_OK;
}

static enum qr_err parse_health(struct qr_pj *p, yyjson_val *root, struct qr_oa_profile *out)
{
    static const char *const keys[] = {"path", "healthy", NULL};
    yyjson_val *h = yyjson_obj_get(root, "health");
    size_t mark = qr_pj_push_key(p, "health");
    if (!h)
        return qr_pj_fail(p, "required");
    int healthy = 0;
    enum qr_err err;
    if ((err = qr_pj_object(p, h, keys)) ||
        (err = path_field(p, h, "path", true, out->health_path, sizeof(out->health_path))) ||
        (err = enum_field(p, h, "healthy", true, healthy_names, &healthy)))
        return err;
    out->healthy = (enum qr_oa_healthy) healthy;
    qr_pj_pop(p, mark);
    return QR_OK;
}

static enum qr_err parse_defaults(struct qr_pj *p, yyjson_val *root, struct qr_oa_profile *out)
{
    static const char *const keys[] = {"temperature", "max_tokens", NULL};
    yyjson_val *d = yyjson_obj_get(root, "defaults");
    if (!d)
        return QR_OK;
    size_t mark = qr_pj_push_key(p, "defaults");
    enum qr_err err = qr_pj_object(p, d, keys);
    if (err)
        return err;
    yyjson_val *t = yyjson_obj_get(d, "temperature");
    if (t) {
        double v = yyjson_is_num(t) ? yyjson_get_num(t) : -1;
        size_t m2 = qr_pj_push_key(p, "temperature");
        if (!yyjson_is_num(t) || !isfinite(v) || v < 0 || v > 2)
            return qr_pj_fail(p, "expected a number in [0, 2]");
        qr_pj_pop(p, m2);
        out->default_temperature_set = true;
        out->default_temperature = v;
    }
    uint64_t mt = 0;
    bool present = false;
    if ((err = qr_pj_u64(p, d, "max_tokens", false, 1, 1u << 24, &mt, &present)))
        return err;
    out->default_max_tokens = present ? (int64_t) mt : 0;
    qr_pj_pop(p, mark);
    return QR_OK;
}

static enum qr_err parse_ops(struct qr_pj *p, yyjson_val *root, struct qr_oa_profile *out)
{
    const char **ops = NULL;
    size_t n = 0;
    enum qr_err err =
        qr_pj_strs(p, root, "unsupported_ops", false, true, 4, QR_PJ_MAX_ID, &ops, &n);
    for (size_t i = 0; err == QR_OK && i < n; i++) {
        int op = qr_pj_lookup(ops[i], op_names);
        if (op < 0) {
            size_t mark = qr_pj_push_key(p, "unsupported_ops");
            err = qr_pj_fail(p, "unknown operation '%s' (chat, completions, embeddings, rerank)",
                             ops[i]);
            qr_pj_pop(p, mark);
        } else {
            out->ops_unsupported |= 1u << (unsigned) op;
        }
    }
    free(ops);
    return err;
}

static enum qr_err parse_root(struct qr_pj *p, yyjson_val *root, const char *expect_name,
                              struct qr_oa_profile *out)
{
    static const char *const keys[] = {"schema",          "name",
                                       "description",     "reasoning_field",
                                       "reasoning_eras",  "health",
                                       "version_path",    "metrics_path",
                                       "stream_usage",    "defaults",
                                       "unsupported_ops", "context_length_field",
                                       "guided_decoding", "listed_models_only",
                                       "ledger_project",  NULL};
    const char *schema, *desc;
    int rf = 0, gd = 2;
    enum qr_err err;
    if ((err = qr_pj_object(p, root, keys)) ||
        (err = qr_pj_str(p, root, "schema", true, QR_PJ_MAX_ID, &schema)))
        return err;
    if (strcmp(schema, QR_OA_PROFILE_SCHEMA) != 0)
        return qr_pj_fail(p, "unsupported schema '%s'", schema);
    if ((err = str_field(p, root, "name", true, out->name, sizeof(out->name))) ||
        (err = qr_pj_str(p, root, "description", false, QR_PJ_MAX_TEXT, &desc)))
        return err;
    if (qr_pj_lookup(out->name, qr_openai_dialects) < 0)
        return qr_pj_fail(p, "unknown dialect name '%s'", out->name);
    if (expect_name && strcmp(out->name, expect_name) != 0)
        return qr_pj_fail(p, "name '%s' does not match the file", out->name);
    if ((err = enum_field(p, root, "reasoning_field", true, reasoning_fields, &rf)))
        return err;
    copy(out->reasoning_field, sizeof(out->reasoning_field), reasoning_fields[rf]);
    out->stream_usage = true;
    if ((err = parse_eras(p, root, out)) || (err = parse_health(p, root, out)) ||
        (err = path_field(p, root, "version_path", false, out->version_path,
                          sizeof(out->version_path))) ||
        (err = path_field(p, root, "metrics_path", false, out->metrics_path,
                          sizeof(out->metrics_path))) ||
        (err = qr_pj_bool(p, root, "stream_usage", false, &out->stream_usage, NULL)) ||
        (err = parse_defaults(p, root, out)) || (err = parse_ops(p, root, out)) ||
        (err = str_field(p, root, "context_length_field", false, out->context_length_field,
                         sizeof(out->context_length_field))) ||
        (err = enum_field(p, root, "guided_decoding", false, guided_names, &gd)) ||
        (err = qr_pj_bool(p, root, "listed_models_only", false, &out->listed_models_only, NULL)) ||
        (err = str_field(p, root, "ledger_project", false, out->ledger_project,
                         sizeof(out->ledger_project))))
        return err;
    copy(out->guided_decoding, sizeof(out->guided_decoding), guided_names[gd]);
    return QR_OK;
}

enum qr_err qr_openai_profile_parse(const char *name, const char *json, size_t len,
                                    const char *expect_name, struct qr_oa_profile *out,
                                    struct qr_diag *diag)
{
    struct qr_pj p;
    qr_pj_init(&p, name, diag);
    memset(out, 0, sizeof(*out));
    yyjson_doc *doc = NULL;
    enum qr_err err = qr_pj_parse(&p, json, len, &doc);
    if (err == QR_OK)
        err = parse_root(&p, yyjson_doc_get_root(doc), expect_name, out);
    yyjson_doc_free(doc);
    if (err)
        memset(out, 0, sizeof(*out));
    return err;
}

enum qr_err qr_openai_profile_load(const char *dialect, struct qr_oa_profile *out,
                                   struct qr_diag *diag)
{
    char path[96];
    if (qr_pj_lookup(dialect, qr_openai_dialects) < 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "unknown openai dialect '%s'", dialect);
    snprintf(path, sizeof(path), "dialects/%s.json", dialect);
    const struct qr_builtin_file *f = qr_builtin_find(path);
    if (!f)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no builtin dialect profile '%s'", path);
    return qr_openai_profile_parse(path, f->data, f->len, dialect, out, diag);
}

/* The next number of a dotted version; *s moves past it and one '.'. Non-digits end it. */
static unsigned long next_num(const char **s)
{
    unsigned long v = 0;
    while (isdigit((unsigned char) **s)) {
        if (v < 100000000ul)
            v = v * 10 + (unsigned long) (**s - '0');
        (*s)++;
    }
    if (**s == '.' && isdigit((unsigned char) (*s)[1]))
        (*s)++;
    else
        while (**s)
            (*s)++; /* a suffix ("rc1", "+cu126", ".dev3") ends the comparison */
    return v;
}

int qr_openai_version_cmp(const char *a, const char *b)
{
    const char *x = a ? a : "", *y = b ? b : "";
    while (*x || *y) {
        unsigned long u = next_num(&x), v = next_num(&y);
        if (u != v)
            return u < v ? -1 : 1;
    }
    return 0;
}

const char *qr_openai_profile_reasoning_field(const struct qr_oa_profile *p, const char *version)
{
    if (version && isdigit((unsigned char) version[0])) {
        for (size_t i = 0; i < p->n_eras; i++) {
            if (qr_openai_version_cmp(version, p->eras[i].min_version) >= 0)
                return p->eras[i].reasoning_field;
        }
    }
    return p->reasoning_field;
}

void qr_openai_profile_apply(const struct qr_oa_profile *p, const char *version,
                             const char *reasoning_override, struct qr_dialect *d)
{
    d->reasoning_field =
        reasoning_override ? reasoning_override : qr_openai_profile_reasoning_field(p, version);
    d->stream_usage = p->stream_usage;
    d->dialect_name = p->name;
    d->default_temperature_set = p->default_temperature_set;
    d->default_temperature = p->default_temperature;
    d->default_max_tokens = p->default_max_tokens;
    d->ops_unsupported = p->ops_unsupported;
}

/* ---- probing ---- */

static bool is_2xx(int status)
{
    return status >= 200 && status < 300;
}

bool qr_openai_version_of(struct qr_slice body, char *out, size_t n)
{
    out[0] = 0;
    if (!body.len || body.len > 4096)
        return false;
    yyjson_doc *doc = yyjson_read(body.ptr, body.len, 0);
    const char *v = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "version"));
    bool ok = v && v[0] && strlen(v) < n;
    for (const char *c = v; ok && *c; c++)
        ok = isgraph((unsigned char) *c) && *c != '"' && *c != '\\';
    if (ok)
        copy(out, n, v);
    yyjson_doc_free(doc);
    return ok;
}

static bool status_ok(struct qr_slice body)
{
    if (!body.len || body.len > 4096)
        return false;
    yyjson_doc *doc = yyjson_read(body.ptr, body.len, 0);
    const char *s = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "status"));
    bool ok = s && strcmp(s, "ok") == 0;
    yyjson_doc_free(doc);
    return ok;
}

void qr_openai_detect(const struct qr_oa_probe_answers *a, struct qr_oa_detection *out)
{
    memset(out, 0, sizeof(*out));
    const char *pick = "generic";
    if (is_2xx(a->version_status) &&
        qr_openai_version_of(a->version_body, out->version, sizeof(out->version))) {
        pick = "vllm";
        snprintf(out->why, sizeof(out->why), "GET /version answered version '%s'", out->version);
    } else if (is_2xx(a->props_status)) {
        pick = "llama-server";
        snprintf(out->why, sizeof(out->why),
                 "GET /version answered %d without a version, GET /props answered %d",
                 a->version_status, a->props_status);
    } else if (is_2xx(a->health_status) && status_ok(a->health_body)) {
        pick = "mlx-lm";
        snprintf(out->why, sizeof(out->why),
                 "GET /version answered %d, GET /props %d, GET /health {\"status\":\"ok\"}",
                 a->version_status, a->props_status);
    } else {
        snprintf(out->why, sizeof(out->why),
                 "GET /version answered %d, GET /props %d, GET /health %d: no known dialect",
                 a->version_status, a->props_status, a->health_status);
    }
    copy(out->dialect, sizeof(out->dialect), pick);
}

bool qr_openai_profile_healthy(const struct qr_oa_profile *p, int status, struct qr_slice body)
{
    if (!is_2xx(status))
        return false;
    return p->healthy == QR_OA_HEALTHY_2XX || status_ok(body);
}
