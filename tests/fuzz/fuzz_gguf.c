/* libFuzzer target for the hardened GGUF reader. Any input must open cleanly or fail with a
 * parse/size error and a "cannot open" message, never crash or read outside the input. When it
 * opens, everything is walked (every key with every getter, every array element, every tensor)
 * and checked: views lie inside the input, tensors are in bounds, aligned and disjoint, and
 * lookups by name find the same entry. Then the file is written again with the writer and read
 * back, and every key, value and tensor must come back byte-identical (writer∘reader round trip
 * on whatever the fuzzer found valid).
 *
 * Seeds in corpus/fuzz_gguf: valid files (all value types, tensors of several types, v2) and one
 * file per corruption class (truncation, huge counts and lengths, bad alignment, zero and
 * overflowing dims, element-type confusion, removed tensor types, duplicates, overlap). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *lo, *hi;

static void in_input(const void *p, uint64_t n)
{
    const uint8_t *q = p;
    if (n == 0)
        return;
    if (q < lo || q > hi || n > (uint64_t) (hi - q))
        abort();
}

static void walk_kv(const struct qr_gguf *g, const struct qr_gguf_kv *kv)
{
    in_input(kv->key.ptr, kv->key.len);
    in_input(kv->val, kv->val_len);
    if (qr_gguf_find(g, "") != NULL)
        abort();
    char key[128];
    if (kv->key.len < sizeof(key)) {
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        if (qr_gguf_find(g, key) != kv)
            abort();
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f32;
        double f64;
        bool b;
        struct qr_slice s;
        (void) qr_gguf_get_u32(g, key, &u32);
        (void) qr_gguf_get_i32(g, key, &i32);
        (void) qr_gguf_get_u64(g, key, &u64);
        (void) qr_gguf_get_i64(g, key, &i64);
        (void) qr_gguf_get_f32(g, key, &f32);
        (void) qr_gguf_get_f64(g, key, &f64);
        (void) qr_gguf_get_bool(g, key, &b);
        if (qr_gguf_get_str(g, key, &s) == QR_OK)
            in_input(s.ptr, s.len);
    }
    uint64_t n = qr_gguf_arr_len(kv);
    if (kv->type != QR_GGUF_ARR)
        return;
    if (kv->arr_type == QR_GGUF_STR) {
        struct qr_gguf_arr_iter it;
        struct qr_slice s, last = {0};
        uint64_t count = 0;
        qr_gguf_arr_iter_init(kv, &it);
        while (qr_gguf_arr_iter_next(&it, &s)) {
            in_input(s.ptr, s.len);
            last = s;
            count++;
        }
        if (count != n)
            abort();
        if (n > 0) {
            struct qr_slice at;
            if (qr_gguf_arr_str_at(kv, n - 1, &at) != QR_OK || at.ptr != last.ptr ||
                at.len != last.len)
                abort();
        }
    } else {
        for (uint64_t i = 0; i < n && i < 4096; i++) {
            int64_t i64;
            uint64_t u64;
            double f64;
            (void) qr_gguf_arr_i64_at(kv, i, &i64);
            (void) qr_gguf_arr_u64_at(kv, i, &u64);
            (void) qr_gguf_arr_f64_at(kv, i, &f64);
        }
    }
}

static void walk_tensors(const struct qr_gguf *g)
{
    size_t n = qr_gguf_tensor_count(g);
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, i);
        in_input(t->name.ptr, t->name.len);
        in_input(t->data, t->bytes);
        uint64_t bytes;
        if (t->n_dims < 1 || t->n_dims > 4 || t->bytes == 0 ||
            qr_ggml_nbytes(t->type, t->n_dims, t->dims, &bytes) != QR_OK || bytes != t->bytes ||
            t->offset % qr_gguf_alignment(g) != 0 ||
            t->file_offset != qr_gguf_data_offset(g) + t->offset)
            abort();
        sum += t->bytes;
        char name[80];
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        if (qr_gguf_find_tensor(g, name) != t)
            abort();
        /* quadratic disjointness check, bounded */
        for (size_t j = 0; j < i && n <= 256; j++) {
            const struct qr_gguf_tensor *u = qr_gguf_tensor_at(g, j);
            if (t->offset < u->offset + u->bytes && u->offset < t->offset + t->bytes)
                abort();
        }
    }
    if (sum != qr_gguf_data_bytes(g))
        abort();
}

/* Write what was read with the writer and read it back: same keys, values, tensors. */
static void round_trip(const struct qr_gguf *g)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    size_t nk = qr_gguf_kv_count(g);
    char key[70000];
    for (size_t i = 0; i < nk; i++) {
        const struct qr_gguf_kv *kv = qr_gguf_kv_at(g, i);
        memcpy(key, kv->key.ptr, kv->key.len);
        key[kv->key.len] = 0;
        if (kv->type == QR_GGUF_STR) {
            qr_gguf_writer_add_str(w, key, (struct qr_slice){(const char *) kv->val, kv->val_len});
        } else if (kv->type == QR_GGUF_ARR && kv->arr_type == QR_GGUF_STR) {
            struct qr_slice *items = malloc((kv->arr_len ? kv->arr_len : 1) * sizeof(*items));
            struct qr_gguf_arr_iter it;
            size_t k = 0;
            qr_gguf_arr_iter_init(kv, &it);
            while (qr_gguf_arr_iter_next(&it, &items[k]))
                k++;
            qr_gguf_writer_add_arr_str(w, key, items, k);
            free(items);
        } else if (kv->type == QR_GGUF_ARR) {
            /* elements are little-endian on disk and the host is little-endian */
            qr_gguf_writer_add_arr(w, key, kv->arr_type, kv->val, kv->arr_len);
        } else {
            uint8_t v[8];
            memcpy(v, kv->val, kv->val_len);
            qr_gguf_writer_add(w, key, kv->type, v);
        }
    }
    for (size_t i = 0; i < qr_gguf_tensor_count(g); i++) {
        const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, i);
        char name[80];
        memcpy(name, t->name.ptr, t->name.len);
        name[t->name.len] = 0;
        qr_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->dims, t->data, t->bytes);
    }
    uint8_t *buf;
    size_t len;
    struct qr_diag d;
    if (qr_gguf_writer_finish(w, &d, &buf, &len) != QR_OK)
        abort();
    qr_gguf_writer_free(w);
    struct qr_gguf *h;
    if (qr_gguf_open_mem(buf, len, "rt", NULL, &d, &h) != QR_OK)
        abort();
    if (qr_gguf_kv_count(h) != nk || qr_gguf_tensor_count(h) != qr_gguf_tensor_count(g) ||
        qr_gguf_alignment(h) != qr_gguf_alignment(g))
        abort();
    for (size_t i = 0; i < nk; i++) {
        const struct qr_gguf_kv *a = qr_gguf_kv_at(g, i), *b = qr_gguf_kv_at(h, i);
        if (a->key.len != b->key.len || memcmp(a->key.ptr, b->key.ptr, a->key.len) != 0 ||
            a->type != b->type || a->arr_type != b->arr_type || a->arr_len != b->arr_len ||
            a->val_len != b->val_len || memcmp(a->val, b->val, a->val_len) != 0)
            abort();
    }
    for (size_t i = 0; i < qr_gguf_tensor_count(g); i++) {
        const struct qr_gguf_tensor *a = qr_gguf_tensor_at(g, i), *b = qr_gguf_tensor_at(h, i);
        if (a->type != b->type || a->n_dims != b->n_dims ||
            memcmp(a->dims, b->dims, sizeof(a->dims)) != 0 || a->bytes != b->bytes ||
            memcmp(a->data, b->data, a->bytes) != 0)
            abort();
    }
    qr_gguf_close(h);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_diag d = {{0}};
    struct qr_gguf *g = NULL;
    lo = data;
    hi = data + size;
    enum qr_err err = qr_gguf_open_mem(data, size, "fuzz.gguf", NULL, &d, &g);
    if (err != QR_OK) {
        if (g || (err != QR_ERR_PARSE && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "cannot open 'fuzz.gguf': ", 25) != 0)
            abort();
        return 0;
    }
    for (size_t i = 0; i < qr_gguf_kv_count(g); i++)
        walk_kv(g, qr_gguf_kv_at(g, i));
    walk_tensors(g);
    round_trip(g);
    qr_gguf_close(g);
    return 0;
}
