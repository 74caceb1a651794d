/* Benchmark workload files (workload.h): the shape of a downstream request replayed by
 * `quantum-runtime bench --workload FILE`. Strict, field by field, every error naming the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "bench/workload.h"

#define DEFAULT_USER_PROMPT "Continue the scene."

static const char *const FIELDS[] = {"schema_version",       "name",        "system_prompt",
                                     "system_prompt_tokens", "user_prompt", "think",
                                     "answer_tokens",        "notes"};

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static enum qr_err count(yyjson_val *v, const char *what, const char *key, uint32_t *out,
                         struct qr_diag *diag)
{
    if (!yyjson_is_uint(v) || yyjson_get_uint(v) < 1 || yyjson_get_uint(v) > QR_BENCH_MAX_TOKENS)
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: %s: an integer from 1 to %u", what, key,
                           QR_BENCH_MAX_TOKENS);
    *out = (uint32_t) yyjson_get_uint(v);
    return QR_OK;
}

static enum qr_err text(yyjson_val *v, const char *what, const char *key, char **out,
                        struct qr_diag *diag)
{
    if (!yyjson_is_str(v) || yyjson_get_len(v) == 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: %s: a non-empty string", what, key);
    *out = strdup(yyjson_get_str(v));
    if (!*out)
        abort(); /* small internal allocation (STYLE.md) */
    return QR_OK;
}

/* Unknown and duplicate members. */
static enum qr_err check_keys(yyjson_val *root, const char *what, struct qr_diag *diag)
{
    bool seen[QR_ARRAY_LEN(FIELDS)] = {false};
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        size_t f = 0;
        while (f < QR_ARRAY_LEN(FIELDS) && strcmp(FIELDS[f], yyjson_get_str(k)))
            f++;
        if (f == QR_ARRAY_LEN(FIELDS))
            return qr_diag_set(diag, QR_ERR_INVALID, "%s: unknown field '%.64s'", what,
                               yyjson_get_str(k));
        if (seen[f])
            return qr_diag_set(diag, QR_ERR_INVALID, "%s: duplicate field '%s'", what, FIELDS[f]);
        seen[f] = true;
    }
    return QR_OK;
}

static enum qr_err parse_root(yyjson_val *root, const char *what, struct qr_bench_workload *out,
                              struct qr_diag *diag)
{
    enum qr_err err = check_keys(root, what, diag);
    if (err)
        return err;
    yyjson_val *v = yyjson_obj_get(root, "schema_version");
    if (!yyjson_equals_str(v, QR_BENCH_WORKLOAD_SCHEMA))
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: schema_version: must be '%s'", what,
                           QR_BENCH_WORKLOAD_SCHEMA);
    v = yyjson_obj_get(root, "name");
    if (!yyjson_is_str(v) || !name_ok(yyjson_get_str(v)))
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: name: 1-63 of [A-Za-z0-9._-]", what);
    snprintf(out->name, sizeof out->name, "%s", yyjson_get_str(v));
    yyjson_val *sp = yyjson_obj_get(root, "system_prompt");
    yyjson_val *st = yyjson_obj_get(root, "system_prompt_tokens");
    if (!sp == !st)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "%s: exactly one of system_prompt and system_prompt_tokens", what);
    if (sp && (err = text(sp, what, "system_prompt", &out->system_prompt, diag)))
        return err;
    if (st && (err = count(st, what, "system_prompt_tokens", &out->system_prompt_tokens, diag)))
        return err;
    v = yyjson_obj_get(root, "user_prompt");
    if (v && (err = text(v, what, "user_prompt", &out->user_prompt, diag)))
        return err;
    v = yyjson_obj_get(root, "think");
    if (v && !yyjson_is_bool(v))
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: think: a boolean", what);
    out->think = yyjson_get_bool(v);
    v = yyjson_obj_get(root, "answer_tokens");
    if (!v)
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: answer_tokens: required", what);
    if ((err = count(v, what, "answer_tokens", &out->answer_tokens, diag)))
        return err;
    v = yyjson_obj_get(root, "notes");
    if (v && !yyjson_is_str(v))
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: notes: a string", what);
    if (!out->user_prompt) {
        out->user_prompt = strdup(DEFAULT_USER_PROMPT);
        if (!out->user_prompt)
            abort();
    }
    return QR_OK;
}

enum qr_err qr_bench_workload_parse(const char *text_, size_t len, const char *what,
                                    struct qr_bench_workload *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    if (len > QR_BENCH_WORKLOAD_MAX)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "%s: larger than %u bytes", what,
                           QR_BENCH_WORKLOAD_MAX);
    yyjson_read_err re;
    yyjson_doc *doc = yyjson_read_opts((char *) text_, len, 0, NULL, &re);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_INVALID, "%s: not valid JSON at byte %zu: %s", what, re.pos,
                           re.msg);
    yyjson_val *root = yyjson_doc_get_root(doc);
    enum qr_err err = yyjson_is_obj(root)
                          ? parse_root(root, what, out, diag)
                          : qr_diag_set(diag, QR_ERR_INVALID, "%s: not a JSON object", what);
    yyjson_doc_free(doc);
    return err;
}

enum qr_err qr_bench_workload_load(const char *path, struct qr_bench_workload *out,
                                   struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "cannot open '%s'", path);
    char *buf = malloc(QR_BENCH_WORKLOAD_MAX + 1);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, QR_BENCH_WORKLOAD_MAX + 1, f);
    bool bad = ferror(f) != 0;
    fclose(f);
    char what[300];
    snprintf(what, sizeof what, "'%.280s'", path);
    enum qr_err err = bad ? qr_diag_set(diag, QR_ERR_IO, "cannot read %s", what)
                          : qr_bench_workload_parse(buf, n, what, out, diag);
    free(buf);
    return err;
}

void qr_bench_workload_cleanup(struct qr_bench_workload *w)
{
    if (!w)
        return;
    free(w->system_prompt);
    free(w->user_prompt);
    w->system_prompt = w->user_prompt = NULL;
}
