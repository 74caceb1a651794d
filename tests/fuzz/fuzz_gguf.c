/* libFuzzer target for the hardened GGUF reader. Any input must open cleanly or fail with a
 * parse/size error and a "cannot open" message, never crash or read outside the input. When it
 * opens, everything is walked (every key with every getter, every array element, every tensor)
 * and checked: views lie inside the input, tensors are in bounds, aligned and disjoint, and
 * lookups by name find the same entry. Then the file is written again with the writer and read
 * back, and every key, value and tensor must come back byte-identical (writer∘reader round trip
 * on whatever the fuzzer found valid).
 *
 * A file that opens is also derived (gguf/arch.c: refused counts such as block_count > 512 are
 * never "known") and sized for llama-server's defaults (the memory estimator, gguf/sizing.c).
 *
 * Allocation bound (anchor 8): under ASan the allocator hooks count what the reader holds while
 * qr_gguf_open_mem runs; the peak must stay <= 2 x input size + 1 MiB (never above 256 MiB). A
 * parse slower than 100 ms is reported on stderr (aborts with QR_FUZZ_SLOW_ABORT=1 set).
 *
 * Seeds in corpus/fuzz_gguf: valid files (all value types, tensors of several types, v2) and one
 * file per corruption class (truncation, huge counts and lengths, bad alignment, zero and
 * overflowing dims incl. (INT64_MAX, 2, 1, 1), element-type confusion, removed tensor types,
 * duplicates, overlap, block_count > 512). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/sizing.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QR_FUZZ_COUNT_ALLOC 1
#endif
#elif defined(__SANITIZE_ADDRESS__)
#define QR_FUZZ_COUNT_ALLOC 1
#endif

#ifdef QR_FUZZ_COUNT_ALLOC
/* From the sanitizer runtime (gcc's and clang's; declared here: gcc ships no header for it). */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

/* Bytes allocated and not yet freed while counting, and their peak. Single-threaded. */
static bool counting;
static uint64_t live, peak;

static void on_malloc(const volatile void *p, size_t n)
{
    (void) p;
    if (!counting)
        return;
    live += n;
    if (live > peak)
        peak = live;
}

static void on_free(const volatile void *p)
{
    if (!counting || !p)
        return;
    size_t n = __sanitizer_get_allocated_size(p);
    live = n > live ? 0 : live - n;
}

static void count_start(void)
{
    static bool installed;
    if (!installed)
        installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
    live = peak = 0;
    counting = installed;
}

static void count_stop(size_t size)
{
    counting = false;
    uint64_t bound = 2 * (uint64_t) size + (1u << 20);
    if (peak > bound || peak > (256u << 20)) {
        fprintf(stderr, "fuzz_gguf: reader allocated %llu bytes for a %zu-byte input\n",
                (unsigned long long) peak, size);
        abort();
    }
}
#else
static void count_start(void)
{
}

static void count_stop(size_t size)
{
    (void) size;
}
#endif

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

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

/* The contract and the memory estimate: derive never fails on a file that opened unless its
 * architecture name is unusable; refused counts stay unknown; sizing fails only on overflow. */
static void size_model(const struct qr_gguf *g)
{
    static struct qr_arch a;
    static struct qr_sizing sz;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_gguf_arch_derive(g, &a, &d);
    if (err != QR_OK) {
        if (err != QR_ERR_INVALID || d.msg[0] == '\0')
            abort();
        return;
    }
    if (a.block_count.known && a.block_count.v > QR_ARCH_MAX_BLOCKS)
        abort();
    struct qr_sizing_params p;
    qr_sizing_params_init(&p, 4096);
    err = qr_gguf_size_engine(g, &a, &p, &sz, &d);
    if (err != QR_OK && err != QR_ERR_TOO_LARGE)
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
    double t0 = now_ms();
    count_start();
    enum qr_err err = qr_gguf_open_mem(data, size, "fuzz.gguf", NULL, &d, &g);
    count_stop(size);
    double took = now_ms() - t0;
    if (took > 100.0) {
        fprintf(stderr, "fuzz_gguf: slow input: %.1f ms to parse %zu bytes\n", took, size);
        if (getenv("QR_FUZZ_SLOW_ABORT"))
            abort();
    }
    if (getenv("QR_FUZZ_VERBOSE")) /* what a seed does */
        fprintf(stderr, "%s: %s\n", qr_err_str(err), err ? d.msg : "opened");
    if (err != QR_OK) {
        if (g || (err != QR_ERR_PARSE && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "cannot open 'fuzz.gguf': ", 25) != 0)
            abort();
        return 0;
    }
    for (size_t i = 0; i < qr_gguf_kv_count(g); i++)
        walk_kv(g, qr_gguf_kv_at(g, i));
    walk_tensors(g);
    size_model(g);
    round_trip(g);
    qr_gguf_close(g);
    return 0;
}
