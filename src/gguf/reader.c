/* The hardened GGUF reader: maps a model file read-only and turns its header, metadata and tensor
 * table into an index of views, treating the file as hostile. Every read goes through a cursor
 * that knows the bytes remaining; every count and length is checked against a cap and against
 * what the remaining bytes could possibly hold before anything is allocated (so a 4-byte file
 * cannot make us allocate gigabytes); element counts and byte sizes are overflow-checked products;
 * value and tensor types are checked before they are used to size anything; duplicates are found
 * with a hash set in O(n); tensor data must be aligned, inside the data section and must not
 * overlap. Arrays are walked once at open (to find where the next key starts and to check every
 * string length fits) but never copied: a 262,144-token vocabulary costs no memory after open.
 * Errors name the stage (header, kv N 'key', tensor info N 'name', tensor 'name' data, data
 * section) and the file offset. The format definitions (ggml type table) live here too. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"

/* ---------------------------------------------------------------------------------------------
 * Format definitions */

/* Block geometry per ggml type id, checked against ggml's type_traits (ggml.c) and the block
 * structs of ggml-common.h. Removed ids have no entry (name NULL). */
static const struct qr_ggml_type_info GGML_TYPES[QR_GGML_TYPE_COUNT] = {
    [QR_GGML_F32] = {"f32", 1, 4},
    [QR_GGML_F16] = {"f16", 1, 2},
    [QR_GGML_Q4_0] = {"q4_0", 32, 18},
    [QR_GGML_Q4_1] = {"q4_1", 32, 20},
    [QR_GGML_Q5_0] = {"q5_0", 32, 22},
    [QR_GGML_Q5_1] = {"q5_1", 32, 24},
    [QR_GGML_Q8_0] = {"q8_0", 32, 34},
    [QR_GGML_Q8_1] = {"q8_1", 32, 36},
    [QR_GGML_Q2_K] = {"q2_K", 256, 84},
    [QR_GGML_Q3_K] = {"q3_K", 256, 110},
    [QR_GGML_Q4_K] = {"q4_K", 256, 144},
    [QR_GGML_Q5_K] = {"q5_K", 256, 176},
    [QR_GGML_Q6_K] = {"q6_K", 256, 210},
    [QR_GGML_Q8_K] = {"q8_K", 256, 292},
    [QR_GGML_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [QR_GGML_IQ2_XS] = {"iq2_xs", 256, 74},
    [QR_GGML_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [QR_GGML_IQ1_S] = {"iq1_s", 256, 50},
    [QR_GGML_IQ4_NL] = {"iq4_nl", 32, 18},
    [QR_GGML_IQ3_S] = {"iq3_s", 256, 110},
    [QR_GGML_IQ2_S] = {"iq2_s", 256, 82},
    [QR_GGML_IQ4_XS] = {"iq4_xs", 256, 136},
    [QR_GGML_I8] = {"i8", 1, 1},
    [QR_GGML_I16] = {"i16", 1, 2},
    [QR_GGML_I32] = {"i32", 1, 4},
    [QR_GGML_I64] = {"i64", 1, 8},
    [QR_GGML_F64] = {"f64", 1, 8},
    [QR_GGML_IQ1_M] = {"iq1_m", 256, 56},
    [QR_GGML_BF16] = {"bf16", 1, 2},
    [QR_GGML_TQ1_0] = {"tq1_0", 256, 54},
    [QR_GGML_TQ2_0] = {"tq2_0", 256, 66},
    [QR_GGML_MXFP4] = {"mxfp4", 32, 17},
    [QR_GGML_NVFP4] = {"nvfp4", 64, 36},
    [QR_GGML_Q1_0] = {"q1_0", 128, 18},
    [QR_GGML_Q2_0] = {"q2_0", 64, 18},
};

static const uint8_t VTYPE_SIZE[QR_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
static const char *const VTYPE_NAME[QR_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};

size_t qr_gguf_type_size(uint32_t type)
{
    return type < QR_GGUF_TYPE_COUNT ? VTYPE_SIZE[type] : 0;
}

const char *qr_gguf_type_name(uint32_t type)
{
    return type < QR_GGUF_TYPE_COUNT ? VTYPE_NAME[type] : "invalid";
}

const struct qr_ggml_type_info *qr_ggml_type_get(uint32_t type)
{
    if (type >= QR_GGML_TYPE_COUNT || !GGML_TYPES[type].name)
        return NULL;
    return &GGML_TYPES[type];
}

static bool mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

enum qr_err qr_ggml_nbytes(uint32_t type, uint32_t n_dims, const uint64_t *dims, uint64_t *out)
{
    const struct qr_ggml_type_info *ti = qr_ggml_type_get(type);
    if (!ti || n_dims < 1 || n_dims > QR_GGUF_MAX_DIMS)
        return QR_ERR_INVALID;
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (dims[d] == 0 || dims[d] > (uint64_t) INT64_MAX)
            return QR_ERR_INVALID;
        if (!mul_u64(n, dims[d], &n) || n > (uint64_t) INT64_MAX)
            return QR_ERR_TOO_LARGE;
    }
    if (dims[0] % ti->blck)
        return QR_ERR_INVALID;
    if (!mul_u64(n / ti->blck, ti->bytes, out))
        return QR_ERR_TOO_LARGE;
    return QR_OK;
}

void qr_gguf_limits_default(struct qr_gguf_limits *out)
{
    out->max_kv = 65536;
    out->max_tensors = 262144;
    out->max_key_len = 65535;
    out->max_name_len = 64;
    out->max_str_len = 16u << 20;
    out->max_arr_len = 16u << 20;
}

/* ---------------------------------------------------------------------------------------------
 * The open file */

struct qr_gguf {
    const uint8_t *base;
    uint64_t size;
    bool mapped;
    uint32_t version, alignment;
    uint64_t data_off, data_bytes;
    struct qr_gguf_kv *kv;
    size_t n_kv;
    uint32_t *kv_hash; /* open addressing: index + 1, 0 = empty */
    size_t kv_hcap;    /* power of two >= 2 * n_kv */
    struct qr_gguf_tensor *t;
    size_t n_t;
    uint32_t *t_hash;
    size_t t_hcap;
};

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static inline uint64_t le64(const uint8_t *p)
{
    return (uint64_t) le32(p) | (uint64_t) le32(p + 4) << 32;
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t) p[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static size_t hash_cap(size_t n)
{
    size_t cap = 8;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

/* ---------------------------------------------------------------------------------------------
 * The cursor and error reporting */

enum stage { ST_HEADER, ST_KV, ST_TINFO, ST_TDATA, ST_LAYOUT };

struct rd {
    const uint8_t *base;
    uint64_t size, pos;
    const char *name;
    struct qr_diag *diag;
    const struct qr_gguf_limits *lim;
    enum stage stage;
    uint64_t idx;          /* key or tensor index for ST_KV / ST_TINFO */
    struct qr_slice sname; /* validated key or tensor name, once known */
};

#define NAME_SHOWN 96 /* at most this many bytes of a key or tensor name in a message */

static enum qr_err fail(struct rd *r, enum qr_err err, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static enum qr_err fail(struct rd *r, enum qr_err err, uint64_t off, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    int nl = (int) (r->sname.len > NAME_SHOWN ? NAME_SHOWN : r->sname.len);
    const char *nm = r->sname.ptr ? r->sname.ptr : "";
    unsigned long long o = off, i = r->idx;
    switch (r->stage) {
    case ST_KV:
        if (r->sname.ptr)
            return qr_diag_set(r->diag, err, "cannot open '%s': kv %llu '%.*s' [offset 0x%llx]: %s",
                               r->name, i, nl, nm, o, what);
        return qr_diag_set(r->diag, err, "cannot open '%s': kv %llu [offset 0x%llx]: %s", r->name,
                           i, o, what);
    case ST_TINFO:
        if (r->sname.ptr)
            return qr_diag_set(r->diag, err,
                               "cannot open '%s': tensor info %llu '%.*s' [offset 0x%llx]: %s",
                               r->name, i, nl, nm, o, what);
        return qr_diag_set(r->diag, err, "cannot open '%s': tensor info %llu [offset 0x%llx]: %s",
                           r->name, i, o, what);
    case ST_TDATA:
        return qr_diag_set(r->diag, err, "cannot open '%s': tensor '%.*s' data [offset 0x%llx]: %s",
                           r->name, nl, nm, o, what);
    case ST_LAYOUT:
        return qr_diag_set(r->diag, err, "cannot open '%s': data section [offset 0x%llx]: %s",
                           r->name, o, what);
    case ST_HEADER:
    default:
        return qr_diag_set(r->diag, err, "cannot open '%s': header [offset 0x%llx]: %s", r->name, o,
                           what);
    }
}

static inline uint64_t left(const struct rd *r)
{
    return r->size - r->pos;
}

/* n bytes at the cursor, or a truncation error naming field. */
static enum qr_err take(struct rd *r, uint64_t n, const char *field, const uint8_t **out)
{
    if (n > left(r))
        return fail(r, QR_ERR_PARSE, r->pos,
                    "%s (%llu bytes) runs past the end of the file (%llu bytes left)", field,
                    (unsigned long long) n, (unsigned long long) left(r));
    *out = r->base + r->pos;
    r->pos += n;
    return QR_OK;
}

static enum qr_err rd_u32(struct rd *r, const char *field, uint32_t *out)
{
    const uint8_t *p = NULL;
    enum qr_err err = take(r, 4, field, &p);
    if (err == QR_OK)
        *out = le32(p);
    return err;
}

static enum qr_err rd_u64(struct rd *r, const char *field, uint64_t *out)
{
    const uint8_t *p = NULL;
    enum qr_err err = take(r, 8, field, &p);
    if (err == QR_OK)
        *out = le64(p);
    return err;
}

/* A length-prefixed string: the length is checked against cap, then against the bytes left. */
static enum qr_err rd_str(struct rd *r, const char *field, uint64_t cap, struct qr_slice *out)
{
    uint64_t at = r->pos, len;
    enum qr_err err = rd_u64(r, field, &len);
    if (err)
        return err;
    if (len > cap)
        return fail(r, QR_ERR_TOO_LARGE, at, "%s length %llu exceeds the cap of %llu", field,
                    (unsigned long long) len, (unsigned long long) cap);
    if (len > left(r))
        return fail(r, QR_ERR_PARSE, at,
                    "%s length %llu runs past the end of the file (%llu bytes left)", field,
                    (unsigned long long) len, (unsigned long long) left(r));
    out->ptr = (const char *) r->base + r->pos;
    out->len = (size_t) len;
    r->pos += len;
    return QR_OK;
}

/* Keys and tensor names: non-empty, printable ASCII. */
static enum qr_err check_name(struct rd *r, const char *field, struct qr_slice s, uint64_t at)
{
    if (s.len == 0)
        return fail(r, QR_ERR_PARSE, at, "%s is empty", field);
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = (uint8_t) s.ptr[i];
        if (c < 0x20 || c > 0x7e)
            return fail(r, QR_ERR_PARSE, at + 8 + i, "%s has byte 0x%02x (not printable ASCII)",
                        field, c);
    }
    return QR_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Hash sets over names (keys and tensor names) */

static const struct qr_slice *name_of(const struct qr_gguf *g, bool tensors, uint32_t i)
{
    return tensors ? &g->t[i].name : &g->kv[i].key;
}

/* Slot for name: the slot holding it, or the empty slot where it belongs. */
static size_t hash_slot(const struct qr_gguf *g, bool tensors, const char *p, size_t n)
{
    const uint32_t *tab = tensors ? g->t_hash : g->kv_hash;
    size_t mask = (tensors ? g->t_hcap : g->kv_hcap) - 1;
    size_t s = (size_t) hash_bytes(p, n) & mask;
    while (tab[s]) {
        const struct qr_slice *o = name_of(g, tensors, tab[s] - 1);
        if (o->len == n && memcmp(o->ptr, p, n) == 0)
            return s;
        s = (s + 1) & mask;
    }
    return s;
}

/* Insert entry i; returns the index of an earlier entry with the same name, or -1. */
static long hash_insert(struct qr_gguf *g, bool tensors, uint32_t i)
{
    const struct qr_slice *nm = name_of(g, tensors, i);
    size_t s = hash_slot(g, tensors, nm->ptr, nm->len);
    uint32_t *tab = tensors ? g->t_hash : g->kv_hash;
    if (tab[s])
        return (long) tab[s] - 1;
    tab[s] = i + 1;
    return -1;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing: header */

static enum qr_err parse_header(struct rd *r, struct qr_gguf *g, uint64_t *n_t, uint64_t *n_kv)
{
    const uint8_t *p = NULL;
    enum qr_err err = take(r, 4, "magic", &p);
    if (err)
        return err;
    if (memcmp(p, "FUGG", 4) == 0)
        return fail(r, QR_ERR_PARSE, 0, "big-endian GGUF files are not supported");
    if (memcmp(p, QR_GGUF_MAGIC, 4) != 0)
        return fail(r, QR_ERR_PARSE, 0, "bad magic %02x %02x %02x %02x (not a GGUF file)", p[0],
                    p[1], p[2], p[3]);
    uint32_t v;
    if ((err = rd_u32(r, "version", &v)))
        return err;
    /* A big-endian file stores the version byte-swapped: 3 reads as 0x03000000. */
    if ((v & 0xffff) == 0 && v != 0)
        return fail(r, QR_ERR_PARSE, 4, "big-endian GGUF files are not supported (version 0x%08x)",
                    v);
    if (v == 1)
        return fail(r, QR_ERR_PARSE, 4, "GGUF version 1 is not supported (need 2 or 3)");
    if (v != 2 && v != 3)
        return fail(r, QR_ERR_PARSE, 4, "unsupported GGUF version %u (need 2 or 3)", v);
    g->version = v;
    uint64_t at_t = r->pos;
    if ((err = rd_u64(r, "tensor count", n_t)) || (err = rd_u64(r, "key count", n_kv)))
        return err;
    /* Tables index entries with u32 (hash slots hold index + 1), whatever the caller's caps. */
    if (*n_t > r->lim->max_tensors || *n_t >= UINT32_MAX)
        return fail(r, QR_ERR_TOO_LARGE, at_t, "tensor count %llu exceeds the cap of %llu",
                    (unsigned long long) *n_t, (unsigned long long) r->lim->max_tensors);
    if (*n_kv > r->lim->max_kv || *n_kv >= UINT32_MAX)
        return fail(r, QR_ERR_TOO_LARGE, at_t + 8, "key count %llu exceeds the cap of %llu",
                    (unsigned long long) *n_kv, (unsigned long long) r->lim->max_kv);
    /* Bound the tables by what the file can hold: a key takes >= 14 bytes (length, one byte,
     * type, a u8 value), a tensor info >= 33 (length, one byte, n_dims, one dim, type, offset). */
    uint64_t rest = left(r);
    if (*n_kv > rest / 14)
        return fail(r, QR_ERR_PARSE, at_t + 8, "%llu keys cannot fit in the %llu bytes left",
                    (unsigned long long) *n_kv, (unsigned long long) rest);
    rest -= *n_kv * 14;
    if (*n_t > rest / 33)
        return fail(r, QR_ERR_PARSE, at_t, "%llu tensor infos cannot fit in the %llu bytes left",
                    (unsigned long long) *n_t, (unsigned long long) rest);
    return QR_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing: metadata */

static enum qr_err parse_array(struct rd *r, struct qr_gguf_kv *kv)
{
    uint32_t et;
    uint64_t at = r->pos, n;
    enum qr_err err = rd_u32(r, "array element type", &et);
    if (err)
        return err;
    if (et >= QR_GGUF_TYPE_COUNT)
        return fail(r, QR_ERR_PARSE, at, "unknown array element type %u", et);
    if (et == QR_GGUF_ARR)
        return fail(r, QR_ERR_PARSE, at, "nested arrays are not supported");
    at = r->pos;
    if ((err = rd_u64(r, "array length", &n)))
        return err;
    if (n > r->lim->max_arr_len)
        return fail(r, QR_ERR_TOO_LARGE, at, "array length %llu exceeds the cap of %llu",
                    (unsigned long long) n, (unsigned long long) r->lim->max_arr_len);
    kv->arr_type = (enum qr_gguf_type) et;
    kv->arr_len = n;
    kv->val = r->base + r->pos;
    uint64_t start = r->pos;
    if (et != QR_GGUF_STR) {
        uint64_t esz = VTYPE_SIZE[et];
        if (n > left(r) / esz)
            return fail(r, QR_ERR_PARSE, at,
                        "array of %llu %s runs past the end of the file (%llu bytes left)",
                        (unsigned long long) n, VTYPE_NAME[et], (unsigned long long) left(r));
        r->pos += n * esz;
    } else {
        if (n > left(r) / 8)
            return fail(r, QR_ERR_PARSE, at,
                        "array of %llu strings cannot fit in the %llu bytes left",
                        (unsigned long long) n, (unsigned long long) left(r));
        uint64_t cap = r->lim->max_str_len;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t eat = r->pos;
            if (left(r) < 8)
                return fail(r, QR_ERR_PARSE, eat,
                            "string %llu of %llu runs past the end of the file",
                            (unsigned long long) i, (unsigned long long) n);
            uint64_t len = le64(r->base + r->pos);
            if (len > cap)
                return fail(
                    r, QR_ERR_TOO_LARGE, eat, "string %llu length %llu exceeds the cap of %llu",
                    (unsigned long long) i, (unsigned long long) len, (unsigned long long) cap);
            if (len > left(r) - 8)
                return fail(
                    r, QR_ERR_PARSE, eat,
                    "string %llu length %llu runs past the end of the file (%llu bytes left)",
                    (unsigned long long) i, (unsigned long long) len,
                    (unsigned long long) (left(r) - 8));
            r->pos += 8 + len;
        }
    }
    kv->val_len = r->pos - start;
    return QR_OK;
}

static enum qr_err parse_kv(struct rd *r, struct qr_gguf *g, uint64_t i)
{
    struct qr_gguf_kv *kv = &g->kv[i];
    r->stage = ST_KV;
    r->idx = i;
    r->sname = (struct qr_slice){NULL, 0};
    kv->file_offset = r->pos;
    enum qr_err err = rd_str(r, "key", r->lim->max_key_len, &kv->key);
    if (err || (err = check_name(r, "key", kv->key, kv->file_offset)))
        return err;
    r->sname = kv->key;
    uint32_t type;
    uint64_t at = r->pos;
    if ((err = rd_u32(r, "value type", &type)))
        return err;
    if (type >= QR_GGUF_TYPE_COUNT)
        return fail(r, QR_ERR_PARSE, at, "unknown value type %u", type);
    kv->type = (enum qr_gguf_type) type;
    if (type == QR_GGUF_ARR) {
        err = parse_array(r, kv);
    } else if (type == QR_GGUF_STR) {
        struct qr_slice s;
        err = rd_str(r, "string value", r->lim->max_str_len, &s);
        kv->val = (const uint8_t *) s.ptr;
        kv->val_len = s.len;
    } else {
        kv->val_len = VTYPE_SIZE[type];
        err = take(r, kv->val_len, "value", &kv->val);
    }
    if (err)
        return err;
    long dup = hash_insert(g, false, (uint32_t) i);
    if (dup >= 0)
        return fail(r, QR_ERR_PARSE, kv->file_offset, "duplicate key (first at offset 0x%llx)",
                    (unsigned long long) g->kv[dup].file_offset);
    return QR_OK;
}

static enum qr_err parse_alignment(struct rd *r, struct qr_gguf *g)
{
    g->alignment = QR_GGUF_DEFAULT_ALIGNMENT;
    const struct qr_gguf_kv *kv = qr_gguf_find(g, QR_GGUF_KEY_ALIGNMENT);
    if (!kv)
        return QR_OK;
    r->stage = ST_KV;
    r->idx = (uint64_t) (kv - g->kv);
    r->sname = kv->key;
    if (kv->type != QR_GGUF_U32)
        return fail(r, QR_ERR_PARSE, kv->file_offset, "alignment must be a u32 (is %s)",
                    VTYPE_NAME[kv->type]);
    uint32_t a = le32(kv->val);
    if (a == 0 || (a & (a - 1)) != 0 || a > QR_GGUF_MAX_ALIGNMENT)
        return fail(r, QR_ERR_PARSE, (uint64_t) (kv->val - g->base),
                    "alignment %u is not a power of two in [1, %u]", a, QR_GGUF_MAX_ALIGNMENT);
    g->alignment = a;
    return QR_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Parsing: tensor infos and data layout */

static enum qr_err parse_tensor_info(struct rd *r, struct qr_gguf *g, uint64_t i)
{
    struct qr_gguf_tensor *t = &g->t[i];
    r->stage = ST_TINFO;
    r->idx = i;
    r->sname = (struct qr_slice){NULL, 0};
    uint64_t at = r->pos;
    enum qr_err err = rd_str(r, "tensor name", r->lim->max_name_len, &t->name);
    if (err || (err = check_name(r, "tensor name", t->name, at)))
        return err;
    r->sname = t->name;
    at = r->pos;
    if ((err = rd_u32(r, "n_dims", &t->n_dims)))
        return err;
    if (t->n_dims < 1 || t->n_dims > QR_GGUF_MAX_DIMS)
        return fail(r, QR_ERR_PARSE, at, "n_dims %u is not in [1, %u]", t->n_dims,
                    QR_GGUF_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t d = 0; d < QR_GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if (d >= t->n_dims)
            continue;
        at = r->pos;
        if ((err = rd_u64(r, "dimension", &t->dims[d])))
            return err;
        if (t->dims[d] == 0)
            return fail(r, QR_ERR_PARSE, at, "dimension %u is zero", d);
        if (t->dims[d] > (uint64_t) INT64_MAX)
            return fail(r, QR_ERR_PARSE, at, "dimension %u (%llu) exceeds INT64_MAX", d,
                        (unsigned long long) t->dims[d]);
        if (!mul_u64(n, t->dims[d], &n) || n > (uint64_t) INT64_MAX)
            return fail(r, QR_ERR_TOO_LARGE, at, "element count overflows at dimension %u", d);
    }
    t->n_elements = n;
    at = r->pos;
    if ((err = rd_u32(r, "tensor type", &t->type)))
        return err;
    const struct qr_ggml_type_info *ti = qr_ggml_type_get(t->type);
    if (!ti)
        return fail(r, QR_ERR_PARSE, at, "%s tensor type %u",
                    t->type < QR_GGML_TYPE_COUNT ? "removed" : "unknown", t->type);
    if (t->dims[0] % ti->blck)
        return fail(r, QR_ERR_PARSE, at,
                    "first dimension %llu is not a multiple of the block size %u of type %s",
                    (unsigned long long) t->dims[0], ti->blck, ti->name);
    if (!mul_u64(n / ti->blck, ti->bytes, &t->bytes))
        return fail(r, QR_ERR_TOO_LARGE, at, "byte size of %llu %s elements overflows",
                    (unsigned long long) n, ti->name);
    if ((err = rd_u64(r, "data offset", &t->offset)))
        return err;
    long dup = hash_insert(g, true, (uint32_t) i);
    if (dup >= 0)
        return fail(r, QR_ERR_PARSE, at, "duplicate tensor name (first is tensor %ld)", dup);
    return QR_OK;
}

struct span {
    uint64_t off, end;
    uint32_t idx;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Data offsets aligned, inside the data section, not overlapping (sorted by offset). */
static enum qr_err check_layout(struct rd *r, struct qr_gguf *g)
{
    r->stage = ST_LAYOUT;
    uint64_t a = g->alignment, pos = r->pos;
    g->data_off = pos + (a - pos % a) % a;
    if (g->n_t == 0) {
        g->data_bytes = 0;
        return QR_OK;
    }
    if (g->data_off > r->size)
        return fail(r, QR_ERR_PARSE, pos,
                    "data section start 0x%llx (aligned to %u) is past the end of the file",
                    (unsigned long long) g->data_off, g->alignment);
    uint64_t room = r->size - g->data_off;
    struct span *sp = malloc(g->n_t * sizeof(*sp));
    if (!sp)
        return fail(r, QR_ERR_NOMEM, pos, "out of memory");
    enum qr_err err = QR_OK;
    for (size_t i = 0; i < g->n_t; i++) {
        struct qr_gguf_tensor *t = &g->t[i];
        r->stage = ST_TDATA;
        r->sname = t->name;
        uint64_t abs = t->offset <= UINT64_MAX - g->data_off ? g->data_off + t->offset : t->offset;
        if (t->offset % a) {
            err = fail(r, QR_ERR_PARSE, abs, "offset 0x%llx is not a multiple of the alignment %u",
                       (unsigned long long) t->offset, g->alignment);
            goto out;
        }
        if (t->bytes > room || t->offset > room - t->bytes) {
            err = fail(r, QR_ERR_PARSE, abs,
                       "%llu bytes run past the end of the file (data section ends at 0x%llx)",
                       (unsigned long long) t->bytes, (unsigned long long) r->size);
            goto out;
        }
        t->file_offset = g->data_off + t->offset;
        t->data = g->base + t->file_offset;
        sp[i] = (struct span){t->offset, t->offset + t->bytes, (uint32_t) i};
    }
    /* Writers lay tensors out in offset order; sort only when they did not. */
    bool sorted = true;
    for (size_t i = 1; i < g->n_t && sorted; i++)
        sorted = sp[i - 1].off <= sp[i].off;
    if (!sorted)
        qsort(sp, g->n_t, sizeof(*sp), span_cmp);
    uint64_t sum = sp[0].end - sp[0].off;
    for (size_t i = 1; i < g->n_t; i++) {
        if (sp[i].off < sp[i - 1].end) {
            const struct qr_gguf_tensor *t = &g->t[sp[i].idx], *p = &g->t[sp[i - 1].idx];
            r->sname = t->name;
            err = fail(r, QR_ERR_PARSE, t->file_offset, "overlaps tensor '%.*s'",
                       (int) (p->name.len > NAME_SHOWN ? NAME_SHOWN : p->name.len), p->name.ptr);
            goto out;
        }
        sum += sp[i].end - sp[i].off; /* disjoint spans inside the file: cannot overflow */
    }
    g->data_bytes = sum;
out:
    free(sp);
    return err;
}

/* ---------------------------------------------------------------------------------------------
 * Open and close */

static enum qr_err parse(struct qr_gguf *g, const char *name, const struct qr_gguf_limits *limits,
                         struct qr_diag *diag)
{
    struct qr_gguf_limits def;
    if (!limits) {
        qr_gguf_limits_default(&def);
        limits = &def;
    }
    struct rd r = {.base = g->base, .size = g->size, .name = name, .diag = diag, .lim = limits};
    uint64_t n_t, n_kv;
    enum qr_err err = parse_header(&r, g, &n_t, &n_kv);
    if (err)
        return err;
    /* Counts are capped and bounded by the file size above, so these sizes are small; and what the
     * tables below (with the span list of the data check) take stays within 2 x the file size +
     * 1 MiB, so a header of many tiny entries cannot make a small file expensive. Counts are
     * capped, so this cannot overflow. */
    uint64_t need = n_kv * sizeof(*g->kv) + hash_cap(n_kv) * sizeof(*g->kv_hash) +
                    n_t * (sizeof(*g->t) + sizeof(struct span)) +
                    hash_cap(n_t) * sizeof(*g->t_hash);
    if (need > 2 * g->size + (1u << 20))
        return fail(&r, QR_ERR_TOO_LARGE, r.pos,
                    "%llu keys and %llu tensors would take %llu bytes of tables, more than 2 x "
                    "the file size + 1 MiB",
                    (unsigned long long) n_kv, (unsigned long long) n_t, (unsigned long long) need);
    g->kv = calloc(n_kv ? n_kv : 1, sizeof(*g->kv));
    g->kv_hcap = hash_cap(n_kv);
    g->kv_hash = calloc(g->kv_hcap, sizeof(*g->kv_hash));
    g->t = calloc(n_t ? n_t : 1, sizeof(*g->t));
    g->t_hcap = hash_cap(n_t);
    g->t_hash = calloc(g->t_hcap, sizeof(*g->t_hash));
    if (!g->kv || !g->kv_hash || !g->t || !g->t_hash)
        return fail(&r, QR_ERR_NOMEM, r.pos, "out of memory for %llu keys and %llu tensors",
                    (unsigned long long) n_kv, (unsigned long long) n_t);
    for (uint64_t i = 0; i < n_kv; i++) {
        if ((err = parse_kv(&r, g, i)))
            return err;
        g->n_kv++;
    }
    if ((err = parse_alignment(&r, g)))
        return err;
    for (uint64_t i = 0; i < n_t; i++) {
        if ((err = parse_tensor_info(&r, g, i)))
            return err;
        g->n_t++;
    }
    return check_layout(&r, g);
}

enum qr_err qr_gguf_open_mem(const void *ptr, size_t len, const char *name,
                             const struct qr_gguf_limits *limits, struct qr_diag *diag,
                             struct qr_gguf **out)
{
    static const uint8_t empty[1];
    *out = NULL;
    struct qr_gguf *g = calloc(1, sizeof(*g));
    if (!g)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot open '%s': out of memory",
                           name ? name : "<memory>");
    g->base = len ? ptr : empty;
    g->size = len;
    enum qr_err err = parse(g, name ? name : "<memory>", limits, diag);
    if (err) {
        qr_gguf_close(g);
        return err;
    }
    *out = g;
    return QR_OK;
}

enum qr_err qr_gguf_open(const char *path, const struct qr_gguf_limits *limits,
                         struct qr_diag *diag, struct qr_gguf **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return qr_diag_set(diag, errno == ENOENT ? QR_ERR_NOT_FOUND : QR_ERR_IO,
                           "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': not a regular file", path);
    }
    void *map = NULL;
    size_t len = (size_t) st.st_size;
    if (len > 0) {
        map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            int e = errno;
            close(fd);
            return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': mmap: %s", path, strerror(e));
        }
    }
    close(fd);
    enum qr_err err = qr_gguf_open_mem(map, len, path, limits, diag, out);
    if (err) {
        if (map)
            munmap(map, len);
        return err;
    }
    (*out)->mapped = map != NULL;
    return QR_OK;
}

void qr_gguf_close(struct qr_gguf *g)
{
    if (!g)
        return;
    if (g->mapped)
        munmap((void *) g->base, (size_t) g->size);
    free(g->kv);
    free(g->kv_hash);
    free(g->t);
    free(g->t_hash);
    free(g);
}

/* ---------------------------------------------------------------------------------------------
 * Accessors */

uint32_t qr_gguf_version(const struct qr_gguf *g)
{
    return g->version;
}

uint32_t qr_gguf_alignment(const struct qr_gguf *g)
{
    return g->alignment;
}

uint64_t qr_gguf_data_offset(const struct qr_gguf *g)
{
    return g->data_off;
}

uint64_t qr_gguf_file_size(const struct qr_gguf *g)
{
    return g->size;
}

uint64_t qr_gguf_data_bytes(const struct qr_gguf *g)
{
    return g->data_bytes;
}

size_t qr_gguf_kv_count(const struct qr_gguf *g)
{
    return g->n_kv;
}

const struct qr_gguf_kv *qr_gguf_kv_at(const struct qr_gguf *g, size_t i)
{
    return i < g->n_kv ? &g->kv[i] : NULL;
}

const struct qr_gguf_kv *qr_gguf_find(const struct qr_gguf *g, const char *key)
{
    size_t s = hash_slot(g, false, key, strlen(key));
    return g->kv_hash[s] ? &g->kv[g->kv_hash[s] - 1] : NULL;
}

size_t qr_gguf_tensor_count(const struct qr_gguf *g)
{
    return g->n_t;
}

const struct qr_gguf_tensor *qr_gguf_tensor_at(const struct qr_gguf *g, size_t i)
{
    return i < g->n_t ? &g->t[i] : NULL;
}

const struct qr_gguf_tensor *qr_gguf_find_tensor(const struct qr_gguf *g, const char *name)
{
    size_t s = hash_slot(g, true, name, strlen(name));
    return g->t_hash[s] ? &g->t[g->t_hash[s] - 1] : NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Typed values. A scalar integer reads as (negative, magnitude-or-value) so that every
 * conversion can say exactly whether it fits. */

struct ival {
    bool neg;   /* a signed type holding a negative value: s is valid */
    int64_t s;  /* the value when neg */
    uint64_t u; /* the value when !neg */
};

static bool read_int(uint32_t type, const uint8_t *p, struct ival *v)
{
    int64_t s;
    switch (type) {
    case QR_GGUF_U8:
        v->u = p[0];
        return v->neg = false, true;
    case QR_GGUF_U16:
        v->u = (uint64_t) p[0] | (uint64_t) p[1] << 8;
        return v->neg = false, true;
    case QR_GGUF_U32:
        v->u = le32(p);
        return v->neg = false, true;
    case QR_GGUF_U64:
        v->u = le64(p);
        return v->neg = false, true;
    case QR_GGUF_I8:
        s = (int8_t) p[0];
        break;
    case QR_GGUF_I16:
        s = (int16_t) (uint16_t) ((uint16_t) p[0] | (uint16_t) p[1] << 8);
        break;
    case QR_GGUF_I32:
        s = (int32_t) le32(p);
        break;
    case QR_GGUF_I64:
        s = (int64_t) le64(p);
        break;
    default:
        return false;
    }
    v->neg = s < 0;
    v->s = s;
    v->u = s < 0 ? 0 : (uint64_t) s;
    return true;
}

static enum qr_err int_to_i64(uint32_t type, const uint8_t *p, int64_t *out)
{
    struct ival v;
    if (!read_int(type, p, &v))
        return QR_ERR_INVALID;
    if (v.neg) {
        *out = v.s;
        return QR_OK;
    }
    if (v.u > (uint64_t) INT64_MAX)
        return QR_ERR_INVALID;
    *out = (int64_t) v.u;
    return QR_OK;
}

static enum qr_err int_to_u64(uint32_t type, const uint8_t *p, uint64_t *out)
{
    struct ival v;
    if (!read_int(type, p, &v) || v.neg)
        return QR_ERR_INVALID;
    *out = v.u;
    return QR_OK;
}

static enum qr_err float_to_f64(uint32_t type, const uint8_t *p, double *out)
{
    if (type == QR_GGUF_F32) {
        uint32_t b = le32(p);
        float f;
        memcpy(&f, &b, sizeof(f));
        *out = f;
        return QR_OK;
    }
    if (type == QR_GGUF_F64) {
        uint64_t b = le64(p);
        memcpy(out, &b, sizeof(*out));
        return QR_OK;
    }
    return QR_ERR_INVALID;
}

enum qr_err qr_gguf_kv_i64(const struct qr_gguf_kv *kv, int64_t *out)
{
    return int_to_i64(kv->type, kv->val, out);
}

enum qr_err qr_gguf_kv_u64(const struct qr_gguf_kv *kv, uint64_t *out)
{
    return int_to_u64(kv->type, kv->val, out);
}

enum qr_err qr_gguf_kv_f64(const struct qr_gguf_kv *kv, double *out)
{
    return float_to_f64(kv->type, kv->val, out);
}

static const struct qr_gguf_kv *need_kv(const struct qr_gguf *g, const char *key, enum qr_err *err)
{
    const struct qr_gguf_kv *kv = qr_gguf_find(g, key);
    *err = kv ? QR_OK : QR_ERR_NOT_FOUND;
    return kv;
}

enum qr_err qr_gguf_get_u64(const struct qr_gguf *g, const char *key, uint64_t *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    return kv ? qr_gguf_kv_u64(kv, out) : err;
}

enum qr_err qr_gguf_get_i64(const struct qr_gguf *g, const char *key, int64_t *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    return kv ? qr_gguf_kv_i64(kv, out) : err;
}

enum qr_err qr_gguf_get_u32(const struct qr_gguf *g, const char *key, uint32_t *out)
{
    uint64_t v;
    enum qr_err err = qr_gguf_get_u64(g, key, &v);
    if (err)
        return err;
    if (v > UINT32_MAX)
        return QR_ERR_INVALID;
    *out = (uint32_t) v;
    return QR_OK;
}

enum qr_err qr_gguf_get_i32(const struct qr_gguf *g, const char *key, int32_t *out)
{
    int64_t v;
    enum qr_err err = qr_gguf_get_i64(g, key, &v);
    if (err)
        return err;
    if (v < INT32_MIN || v > INT32_MAX)
        return QR_ERR_INVALID;
    *out = (int32_t) v;
    return QR_OK;
}

enum qr_err qr_gguf_get_f64(const struct qr_gguf *g, const char *key, double *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    return kv ? qr_gguf_kv_f64(kv, out) : err;
}

enum qr_err qr_gguf_get_f32(const struct qr_gguf *g, const char *key, float *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    if (!kv)
        return err;
    if (kv->type != QR_GGUF_F32)
        return QR_ERR_INVALID;
    uint32_t b = le32(kv->val);
    memcpy(out, &b, sizeof(*out));
    return QR_OK;
}

enum qr_err qr_gguf_get_bool(const struct qr_gguf *g, const char *key, bool *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    if (!kv)
        return err;
    if (kv->type != QR_GGUF_BOOL)
        return QR_ERR_INVALID;
    *out = kv->val[0] != 0;
    return QR_OK;
}

enum qr_err qr_gguf_get_str(const struct qr_gguf *g, const char *key, struct qr_slice *out)
{
    enum qr_err err;
    const struct qr_gguf_kv *kv = need_kv(g, key, &err);
    if (!kv)
        return err;
    if (kv->type != QR_GGUF_STR)
        return QR_ERR_INVALID;
    *out = (struct qr_slice){(const char *) kv->val, (size_t) kv->val_len};
    return QR_OK;
}

/* ---------------------------------------------------------------------------------------------
 * Arrays: bounds were checked at open, so walking them here cannot leave the mapping. */

uint64_t qr_gguf_arr_len(const struct qr_gguf_kv *kv)
{
    return kv->type == QR_GGUF_ARR ? kv->arr_len : 0;
}

static const uint8_t *fixed_elem(const struct qr_gguf_kv *kv, uint64_t i, enum qr_err *err)
{
    if (kv->type != QR_GGUF_ARR || kv->arr_type == QR_GGUF_STR) {
        *err = QR_ERR_INVALID;
        return NULL;
    }
    if (i >= kv->arr_len) {
        *err = QR_ERR_NOT_FOUND;
        return NULL;
    }
    *err = QR_OK;
    return kv->val + i * VTYPE_SIZE[kv->arr_type];
}

enum qr_err qr_gguf_arr_i64_at(const struct qr_gguf_kv *kv, uint64_t i, int64_t *out)
{
    enum qr_err err;
    const uint8_t *p = fixed_elem(kv, i, &err);
    return p ? int_to_i64(kv->arr_type, p, out) : err;
}

enum qr_err qr_gguf_arr_u64_at(const struct qr_gguf_kv *kv, uint64_t i, uint64_t *out)
{
    enum qr_err err;
    const uint8_t *p = fixed_elem(kv, i, &err);
    return p ? int_to_u64(kv->arr_type, p, out) : err;
}

enum qr_err qr_gguf_arr_f64_at(const struct qr_gguf_kv *kv, uint64_t i, double *out)
{
    enum qr_err err;
    const uint8_t *p = fixed_elem(kv, i, &err);
    return p ? float_to_f64(kv->arr_type, p, out) : err;
}

void qr_gguf_arr_iter_init(const struct qr_gguf_kv *kv, struct qr_gguf_arr_iter *it)
{
    bool strs = kv->type == QR_GGUF_ARR && kv->arr_type == QR_GGUF_STR;
    it->p = kv->val;
    it->i = 0;
    it->n = strs ? kv->arr_len : 0;
}

bool qr_gguf_arr_iter_next(struct qr_gguf_arr_iter *it, struct qr_slice *out)
{
    if (it->i >= it->n)
        return false;
    uint64_t len = le64(it->p);
    *out = (struct qr_slice){(const char *) it->p + 8, (size_t) len};
    it->p += 8 + len;
    it->i++;
    return true;
}

enum qr_err qr_gguf_arr_str_at(const struct qr_gguf_kv *kv, uint64_t i, struct qr_slice *out)
{
    if (kv->type != QR_GGUF_ARR || kv->arr_type != QR_GGUF_STR)
        return QR_ERR_INVALID;
    if (i >= kv->arr_len)
        return QR_ERR_NOT_FOUND;
    struct qr_gguf_arr_iter it;
    qr_gguf_arr_iter_init(kv, &it);
    for (uint64_t k = 0; k < i; k++)
        it.p += 8 + le64(it.p);
    it.i = i;
    return qr_gguf_arr_iter_next(&it, out) ? QR_OK : QR_ERR_INTERNAL;
}
