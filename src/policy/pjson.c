/* Strict decoding helpers shared by the policy area's loaders (pjson.h). The data files are
 * treated as hostile even though the builtin ones ship with the binary: registry directories and
 * operators add more, and the fuzz targets feed arbitrary bytes through the same paths. */
#include "policy/pjson.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void qr_pj_init(struct qr_pj *p, const char *name, struct qr_diag *diag)
{
    p->diag = diag;
    p->name = name ? name : "<input>";
    p->prefix = NULL;
    p->path[0] = 0;
    p->path_len = 0;
}

static size_t push(struct qr_pj *p, const char *seg)
{
    size_t mark = p->path_len;
    size_t room = sizeof(p->path) - p->path_len;
    size_t n = strlen(seg);
    if (n >= room)
        n = room - 1; /* truncated: keep what fits */
    memcpy(p->path + p->path_len, seg, n);
    p->path_len += n;
    p->path[p->path_len] = 0;
    return mark;
}

size_t qr_pj_push_key(struct qr_pj *p, const char *key)
{
    char seg[QR_PJ_MAX_ID + 2];
    snprintf(seg, sizeof seg, "%s%s", p->path_len ? "." : "", key);
    return push(p, seg);
}

size_t qr_pj_push_idx(struct qr_pj *p, size_t i)
{
    char seg[32];
    snprintf(seg, sizeof seg, "[%zu]", i);
    return push(p, seg);
}

void qr_pj_pop(struct qr_pj *p, size_t mark)
{
    if (mark < sizeof(p->path)) {
        p->path_len = mark;
        p->path[mark] = 0;
    }
}

enum qr_err qr_pj_fail(struct qr_pj *p, const char *fmt, ...)
{
    if (p->diag) {
        char text[384];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        char head[160];
        if (p->prefix)
            snprintf(head, sizeof head, "%s", p->prefix);
        else
            snprintf(head, sizeof head, "cannot load '%s'", p->name);
        if (p->path_len)
            qr_diag_set(p->diag, QR_ERR_INVALID, "%s: %s: %s", head, p->path, text);
        else
            qr_diag_set(p->diag, QR_ERR_INVALID, "%s: %s", head, text);
    }
    return QR_ERR_INVALID;
}

enum qr_err qr_pj_parse(struct qr_pj *p, const char *json, size_t len, yyjson_doc **out)
{
    *out = NULL;
    if (!json)
        return qr_pj_fail(p, "no data");
    if (len > QR_PJ_MAX_FILE) {
        qr_pj_fail(p, "file of %zu bytes exceeds the %u byte cap", len, QR_PJ_MAX_FILE);
        return QR_ERR_TOO_LARGE;
    }
    yyjson_read_err err;
    /* yyjson may read but never writes the input without YYJSON_READ_INSITU */
    yyjson_doc *doc = yyjson_read_opts((char *) json, len, 0, NULL, &err);
    if (!doc)
        return qr_pj_fail(p, "invalid JSON at byte %zu: %s", err.pos, err.msg);
    *out = doc;
    return QR_OK;
}

int qr_pj_lookup(const char *s, const char *const *names)
{
    for (int i = 0; s && names[i]; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

enum qr_err qr_pj_object(struct qr_pj *p, yyjson_val *v, const char *const *allowed)
{
    if (!yyjson_is_obj(v))
        return qr_pj_fail(p, "expected an object");
    size_t n = yyjson_obj_size(v);
    if (n > QR_PJ_MAX_KEYS)
        return qr_pj_fail(p, "object has %zu keys, more than %u", n, QR_PJ_MAX_KEYS);
    yyjson_obj_iter it;
    yyjson_obj_iter_init(v, &it);
    yyjson_val *k;
    const char *seen[QR_PJ_MAX_KEYS];
    size_t n_seen = 0;
    while ((k = yyjson_obj_iter_next(&it))) {
        const char *name = yyjson_get_str(k);
        if (qr_pj_lookup(name, allowed) < 0) {
            char shown[64];
            snprintf(shown, sizeof shown, "%s", name ? name : "");
            return qr_pj_fail(p, "unknown field '%s'", shown);
        }
        for (size_t i = 0; i < n_seen; i++)
            if (strcmp(seen[i], name) == 0)
                return qr_pj_fail(p, "duplicate field '%s'", name);
        seen[n_seen++] = name;
    }
    return QR_OK;
}

static bool is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return false;
    return true;
}

static enum qr_err check_str(struct qr_pj *p, yyjson_val *v, size_t max_len, const char **out)
{
    if (!yyjson_is_str(v))
        return qr_pj_fail(p, "expected a string");
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    if (n == 0 || is_blank(s, n))
        return qr_pj_fail(p, "must not be blank");
    if (n > max_len)
        return qr_pj_fail(p, "string of %zu bytes exceeds %zu", n, max_len);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
            return qr_pj_fail(p, "control character at byte %zu", i);
    *out = s;
    return QR_OK;
}

enum qr_err qr_pj_str(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                      size_t max_len, const char **out)
{
    *out = NULL;
    yyjson_val *v = yyjson_obj_get(obj, key);
    size_t mark = qr_pj_push_key(p, key);
    enum qr_err err = QR_OK;
    if (!v) {
        if (required)
            err = qr_pj_fail(p, "required");
    } else {
        err = check_str(p, v, max_len, out);
    }
    if (err == QR_OK)
        qr_pj_pop(p, mark);
    return err;
}

enum qr_err qr_pj_bool(struct qr_pj *p, yyjson_val *obj, const char *key, bool required, bool *out,
                       bool *present)
{
    yyjson_val *v = yyjson_obj_get(obj, key);
    if (present)
        *present = v != NULL;
    size_t mark = qr_pj_push_key(p, key);
    if (!v && required)
        return qr_pj_fail(p, "required");
    if (v && !yyjson_is_bool(v))
        return qr_pj_fail(p, "expected true or false");
    if (v)
        *out = yyjson_get_bool(v);
    qr_pj_pop(p, mark);
    return QR_OK;
}

enum qr_err qr_pj_u64(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                      uint64_t min, uint64_t max, uint64_t *out, bool *present)
{
    yyjson_val *v = yyjson_obj_get(obj, key);
    if (present)
        *present = v != NULL;
    size_t mark = qr_pj_push_key(p, key);
    if (!v) {
        if (required)
            return qr_pj_fail(p, "required");
        qr_pj_pop(p, mark);
        return QR_OK;
    }
    if (yyjson_is_sint(v) && yyjson_get_sint(v) < 0)
        return qr_pj_fail(p, "must not be negative");
    if (!yyjson_is_uint(v) && !yyjson_is_sint(v))
        return qr_pj_fail(p, "expected an integer");
    uint64_t u = yyjson_is_uint(v) ? yyjson_get_uint(v) : (uint64_t) yyjson_get_sint(v);
    if (u < min || u > max)
        return qr_pj_fail(p, "%llu is outside [%llu, %llu]", (unsigned long long) u,
                          (unsigned long long) min, (unsigned long long) max);
    *out = u;
    qr_pj_pop(p, mark);
    return QR_OK;
}

enum qr_err qr_pj_array(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                        size_t max, yyjson_val **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    yyjson_val *v = yyjson_obj_get(obj, key);
    size_t mark = qr_pj_push_key(p, key);
    if (!v) {
        if (required)
            return qr_pj_fail(p, "required");
        qr_pj_pop(p, mark);
        return QR_OK;
    }
    if (!yyjson_is_arr(v))
        return qr_pj_fail(p, "expected an array");
    if (yyjson_arr_size(v) > max)
        return qr_pj_fail(p, "%zu items, more than %zu", yyjson_arr_size(v), max);
    if (required && yyjson_arr_size(v) == 0)
        return qr_pj_fail(p, "must not be empty");
    *out = v;
    *n = yyjson_arr_size(v);
    qr_pj_pop(p, mark);
    return QR_OK;
}

enum qr_err qr_pj_strs(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                       bool unique, size_t max, size_t max_len, const char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    yyjson_val *arr;
    size_t count;
    enum qr_err err = qr_pj_array(p, obj, key, required, max, &arr, &count);
    if (err != QR_OK || count == 0)
        return err;
    const char **items = calloc(count, sizeof(*items));
    if (!items)
        return QR_ERR_NOMEM;
    size_t mark = qr_pj_push_key(p, key);
    for (size_t i = 0; i < count; i++) {
        size_t m2 = qr_pj_push_idx(p, i);
        err = check_str(p, yyjson_arr_get(arr, i), max_len, &items[i]);
        if (err != QR_OK)
            goto fail;
        for (size_t j = 0; unique && j < i; j++) {
            if (strcmp(items[j], items[i]) == 0) {
                err = qr_pj_fail(p, "duplicate '%s'", items[i]);
                goto fail;
            }
        }
        qr_pj_pop(p, m2);
    }
    qr_pj_pop(p, mark);
    *out = items;
    *n = count;
    return QR_OK;
fail:
    free(items);
    return err;
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int num(const char *s, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    return v;
}

static bool date_ok(const char *s)
{
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (!digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2))
        return false;
    int y = num(s, 4), m = num(s + 5, 2), d = num(s + 8, 2);
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return false;
    bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return !(m == 2 && d == 29 && !leap);
}

bool qr_pj_is_date(const char *s)
{
    return s && strlen(s) == 10 && date_ok(s);
}

bool qr_pj_is_rfc3339(const char *s)
{
    if (!s || strlen(s) < 20 || !date_ok(s) || (s[10] != 'T' && s[10] != 't'))
        return false;
    const char *t = s + 11;
    if (!digits(t, 2) || t[2] != ':' || !digits(t + 3, 2) || t[5] != ':' || !digits(t + 6, 2))
        return false;
    if (num(t, 2) > 23 || num(t + 3, 2) > 59 || num(t + 6, 2) > 60)
        return false;
    t += 8;
    if (*t == '.') {
        t++;
        size_t k = 0;
        while (t[k] >= '0' && t[k] <= '9')
            k++;
        if (k == 0 || k > 9)
            return false;
        t += k;
    }
    if ((*t == 'Z' || *t == 'z') && t[1] == 0)
        return true;
    if ((*t == '+' || *t == '-') && digits(t + 1, 2) && t[3] == ':' && digits(t + 4, 2) &&
        t[6] == 0)
        return num(t + 1, 2) <= 23 && num(t + 4, 2) <= 59;
    return false;
}
