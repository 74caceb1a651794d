/* The GGUF writer: builds a GGUF v3 file in memory from metadata and tensors, for the fixture
 * generator and the tests. Metadata entries are serialized as they are added (so a 262,144-entry
 * string array is one growing byte buffer, not a list of objects); tensors are kept as a table of
 * shapes plus copied data and laid out at finish, each at an offset aligned to general.alignment
 * (default 32). It uses the reader's definitions (value type sizes, the ggml block table,
 * qr_ggml_nbytes) so that what it writes is exactly what the reader accepts. Errors are sticky:
 * the first failure is kept and reported by finish. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

struct wtensor {
    char *name;
    uint32_t type, n_dims;
    uint64_t dims[QR_GGUF_MAX_DIMS];
    uint64_t bytes;
    uint8_t *data; /* owned copy, or NULL for zeros */
};

struct bytes {
    uint8_t *p;
    size_t len, cap;
};

struct qr_gguf_writer {
    struct bytes kv; /* serialized entries */
    char **keys;     /* owned copies, for the duplicate check */
    size_t n_kv, keys_cap;
    struct wtensor *t;
    size_t n_t, t_cap;
    uint32_t alignment;
    enum qr_err err; /* first error, sticky */
    struct qr_diag diag;
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort(); /* small internal allocations abort on OOM (STYLE.md) */
    return q;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

static void put(struct bytes *b, const void *p, size_t n)
{
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put_u32(struct bytes *b, uint32_t v)
{
    uint8_t x[4] = {(uint8_t) v, (uint8_t) (v >> 8), (uint8_t) (v >> 16), (uint8_t) (v >> 24)};
    put(b, x, 4);
}

static void put_u64(struct bytes *b, uint64_t v)
{
    put_u32(b, (uint32_t) v);
    put_u32(b, (uint32_t) (v >> 32));
}

static void put_str(struct bytes *b, const char *p, size_t n)
{
    put_u64(b, n);
    put(b, p, n);
}

/* One host value of a fixed-size type, little-endian. */
static void put_scalar(struct bytes *b, enum qr_gguf_type type, const void *val)
{
    switch (qr_gguf_type_size(type)) {
    case 1:
        put(b, val, 1);
        break;
    case 2: {
        uint16_t v;
        memcpy(&v, val, 2);
        uint8_t x[2] = {(uint8_t) v, (uint8_t) (v >> 8)};
        put(b, x, 2);
        break;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, val, 4);
        put_u32(b, v);
        break;
    }
    default: {
        uint64_t v;
        memcpy(&v, val, 8);
        put_u64(b, v);
        break;
    }
    }
}

static enum qr_err set_err(struct qr_gguf_writer *w, enum qr_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum qr_err set_err(struct qr_gguf_writer *w, enum qr_err err, const char *fmt, ...)
{
    if (w->err)
        return w->err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->diag.msg, sizeof(w->diag.msg), fmt, ap);
    va_end(ap);
    w->err = err;
    return err;
}

static bool printable(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n == 0 || n > max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((uint8_t) s[i] < 0x20 || (uint8_t) s[i] > 0x7e)
            return false;
    return true;
}

struct qr_gguf_writer *qr_gguf_writer_new(void)
{
    struct qr_gguf_writer *w = xrealloc(NULL, sizeof(*w));
    memset(w, 0, sizeof(*w));
    w->alignment = QR_GGUF_DEFAULT_ALIGNMENT;
    return w;
}

void qr_gguf_writer_free(struct qr_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++)
        free(w->keys[i]);
    free(w->keys);
    for (size_t i = 0; i < w->n_t; i++) {
        free(w->t[i].name);
        free(w->t[i].data);
    }
    free(w->t);
    free(w->kv.p);
    free(w);
}

/* Key check and header of an entry: key and value type. */
static enum qr_err begin_kv(struct qr_gguf_writer *w, const char *key, enum qr_gguf_type type)
{
    if (w->err)
        return w->err;
    struct qr_gguf_limits lim;
    qr_gguf_limits_default(&lim);
    if (!key || !printable(key, (size_t) lim.max_key_len))
        return set_err(w, QR_ERR_INVALID, "gguf writer: key '%s' is not 1..%llu printable ASCII",
                       key ? key : "(null)", (unsigned long long) lim.max_key_len);
    if (strcmp(key, QR_GGUF_KEY_ALIGNMENT) == 0 && type != QR_GGUF_U32)
        return set_err(w, QR_ERR_INVALID, "gguf writer: %s must be a u32", QR_GGUF_KEY_ALIGNMENT);
    if ((uint32_t) type >= QR_GGUF_TYPE_COUNT)
        return set_err(w, QR_ERR_INVALID, "gguf writer: key '%s': invalid value type %u", key,
                       (unsigned) type);
    if (w->n_kv == w->keys_cap) {
        w->keys_cap = w->keys_cap ? 2 * w->keys_cap : 16;
        w->keys = xrealloc(w->keys, w->keys_cap * sizeof(*w->keys));
    }
    w->keys[w->n_kv++] = xstrdup(key);
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, (uint32_t) type);
    return QR_OK;
}

enum qr_err qr_gguf_writer_add(struct qr_gguf_writer *w, const char *key, enum qr_gguf_type type,
                               const void *val)
{
    if (!w->err && qr_gguf_type_size(type) == 0)
        return set_err(w, QR_ERR_INVALID, "gguf writer: key '%s': %s is not a scalar type",
                       key ? key : "(null)", qr_gguf_type_name(type));
    if (!w->err && key && strcmp(key, QR_GGUF_KEY_ALIGNMENT) == 0) {
        uint32_t a;
        if (type != QR_GGUF_U32)
            return set_err(w, QR_ERR_INVALID, "gguf writer: %s must be a u32",
                           QR_GGUF_KEY_ALIGNMENT);
        memcpy(&a, val, 4);
        if (a == 0 || (a & (a - 1)) || a > QR_GGUF_MAX_ALIGNMENT)
            return set_err(w, QR_ERR_INVALID,
                           "gguf writer: alignment %u is not a power of two in [1, %u]", a,
                           QR_GGUF_MAX_ALIGNMENT);
        w->alignment = a;
    }
    enum qr_err err = begin_kv(w, key, type);
    if (err)
        return err;
    put_scalar(&w->kv, type, val);
    return QR_OK;
}

enum qr_err qr_gguf_writer_add_u32(struct qr_gguf_writer *w, const char *key, uint32_t v)
{
    return qr_gguf_writer_add(w, key, QR_GGUF_U32, &v);
}

enum qr_err qr_gguf_writer_add_i32(struct qr_gguf_writer *w, const char *key, int32_t v)
{
    return qr_gguf_writer_add(w, key, QR_GGUF_I32, &v);
}

enum qr_err qr_gguf_writer_add_u64(struct qr_gguf_writer *w, const char *key, uint64_t v)
{
    return qr_gguf_writer_add(w, key, QR_GGUF_U64, &v);
}

enum qr_err qr_gguf_writer_add_f32(struct qr_gguf_writer *w, const char *key, float v)
{
    return qr_gguf_writer_add(w, key, QR_GGUF_F32, &v);
}

enum qr_err qr_gguf_writer_add_bool(struct qr_gguf_writer *w, const char *key, bool v)
{
    uint8_t b = v ? 1 : 0;
    return qr_gguf_writer_add(w, key, QR_GGUF_BOOL, &b);
}

enum qr_err qr_gguf_writer_add_str(struct qr_gguf_writer *w, const char *key, struct qr_slice v)
{
    enum qr_err err = begin_kv(w, key, QR_GGUF_STR);
    if (err)
        return err;
    put_str(&w->kv, v.ptr, v.len);
    return QR_OK;
}

enum qr_err qr_gguf_writer_add_arr(struct qr_gguf_writer *w, const char *key,
                                   enum qr_gguf_type elem_type, const void *elems, size_t n)
{
    size_t esz = qr_gguf_type_size(elem_type);
    if (!w->err && esz == 0)
        return set_err(w, QR_ERR_INVALID, "gguf writer: key '%s': arrays of %s need another call",
                       key ? key : "(null)", qr_gguf_type_name(elem_type));
    enum qr_err err = begin_kv(w, key, QR_GGUF_ARR);
    if (err)
        return err;
    put_u32(&w->kv, (uint32_t) elem_type);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        put_scalar(&w->kv, elem_type, (const uint8_t *) elems + i * esz);
    return QR_OK;
}

enum qr_err qr_gguf_writer_add_arr_str(struct qr_gguf_writer *w, const char *key,
                                       const struct qr_slice *items, size_t n)
{
    enum qr_err err = begin_kv(w, key, QR_GGUF_ARR);
    if (err)
        return err;
    put_u32(&w->kv, QR_GGUF_STR);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++)
        put_str(&w->kv, items[i].ptr, items[i].len);
    return QR_OK;
}

enum qr_err qr_gguf_writer_add_tensor(struct qr_gguf_writer *w, const char *name, uint32_t type,
                                      uint32_t n_dims, const uint64_t *dims, const void *data,
                                      size_t len)
{
    if (w->err)
        return w->err;
    struct qr_gguf_limits lim;
    qr_gguf_limits_default(&lim);
    if (!name || !printable(name, (size_t) lim.max_name_len))
        return set_err(w, QR_ERR_INVALID,
                       "gguf writer: tensor name '%s' is not 1..%llu printable ASCII",
                       name ? name : "(null)", (unsigned long long) lim.max_name_len);
    uint64_t bytes;
    enum qr_err err = qr_ggml_nbytes(type, n_dims, dims, &bytes);
    if (err)
        return set_err(w, err, "gguf writer: tensor '%s': bad type %u or shape for it", name, type);
    if (!(data == NULL && len == 0) && len != bytes)
        return set_err(w, QR_ERR_INVALID, "gguf writer: tensor '%s': %zu bytes given, %llu needed",
                       name, len, (unsigned long long) bytes);
    if (w->n_t == w->t_cap) {
        w->t_cap = w->t_cap ? 2 * w->t_cap : 16;
        w->t = xrealloc(w->t, w->t_cap * sizeof(*w->t));
    }
    struct wtensor *t = &w->t[w->n_t++];
    memset(t, 0, sizeof(*t));
    t->name = xstrdup(name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < QR_GGUF_MAX_DIMS; d++)
        t->dims[d] = d < n_dims ? dims[d] : 1;
    t->bytes = bytes;
    if (data) {
        t->data = xrealloc(NULL, (size_t) bytes);
        memcpy(t->data, data, (size_t) bytes);
    }
    return QR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The first duplicate among n names (sorted copy of the pointers), or NULL. */
static const char *find_dup(char **names, size_t n, size_t stride)
{
    const char *dup = NULL;
    char **v = xrealloc(NULL, n * sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = *(char **) ((char *) names + i * stride);
    qsort(v, n, sizeof(*v), cmp_str);
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(v[i - 1], v[i]) == 0)
            dup = v[i];
    free(v);
    return dup;
}

static uint64_t align_up(uint64_t x, uint64_t a)
{
    return x + (a - x % a) % a;
}

enum qr_err qr_gguf_writer_finish(struct qr_gguf_writer *w, struct qr_diag *diag, uint8_t **out,
                                  size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    const char *dup;
    if (!w->err && w->n_kv > 1 && (dup = find_dup(w->keys, w->n_kv, sizeof(char *))))
        set_err(w, QR_ERR_INVALID, "gguf writer: duplicate key '%s'", dup);
    if (!w->err && w->n_t > 1 && (dup = find_dup(&w->t[0].name, w->n_t, sizeof(struct wtensor))))
        set_err(w, QR_ERR_INVALID, "gguf writer: duplicate tensor name '%s'", dup);
    if (w->err)
        return qr_diag_set(diag, w->err, "%s", w->diag.msg);

    /* Header, metadata and tensor infos; data offsets assigned in order, each aligned. */
    struct bytes h = {0};
    put(&h, QR_GGUF_MAGIC, 4);
    put_u32(&h, QR_GGUF_VERSION);
    put_u64(&h, w->n_t);
    put_u64(&h, w->n_kv);
    put(&h, w->kv.p ? w->kv.p : (const uint8_t *) "", w->kv.len);
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        const struct wtensor *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(&h, t->dims[d]);
        put_u32(&h, t->type);
        put_u64(&h, off);
        off = align_up(off + t->bytes, w->alignment);
    }
    uint64_t data_off = align_up(h.len, w->alignment);
    uint64_t total = data_off + off;
    uint8_t *buf = calloc(1, (size_t) total ? (size_t) total : 1);
    if (!buf) {
        free(h.p);
        return qr_diag_set(diag, QR_ERR_NOMEM, "gguf writer: out of memory for %llu bytes",
                           (unsigned long long) total);
    }
    memcpy(buf, h.p, h.len);
    free(h.p);
    off = data_off;
    for (size_t i = 0; i < w->n_t; i++) {
        if (w->t[i].data)
            memcpy(buf + off, w->t[i].data, (size_t) w->t[i].bytes);
        off = align_up(off + w->t[i].bytes, w->alignment);
    }
    *out = buf;
    *out_len = (size_t) total;
    return QR_OK;
}

enum qr_err qr_gguf_writer_write_file(struct qr_gguf_writer *w, const char *path,
                                      struct qr_diag *diag)
{
    uint8_t *buf;
    size_t len;
    enum qr_err err = qr_gguf_writer_finish(w, diag, &buf, &len);
    if (err)
        return err;
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(buf);
        return qr_diag_set(diag, QR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    }
    bool ok = fwrite(buf, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    free(buf);
    if (!ok)
        return qr_diag_set(diag, QR_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    return QR_OK;
}
