/* The hardened GGUF reader against hostile files: one test per failure class, each built from a
 * valid writer output by patching bytes, each asserting the error code and that the message names
 * the stage (header, kv N 'key', tensor info N 'name', tensor 'name' data, data section). Also:
 * truncation at every offset of a small valid file is an error (each prefix in its own heap block
 * so ASan sees any overread), caps apply before allocation, version 2 is accepted, the file path
 * entry point maps and unmaps, and a 262,144-token vocabulary is walked lazily. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"

/* ---- a small valid file and patch helpers ---- */

struct file {
    uint8_t *p;
    size_t n;
};

/* Keys: general.architecture (str), general.alignment (u32 32), test.k1 / test.k2 (u8),
 * test.tokens (3 strings), test.scores (2 f32). Tensors: blk.0.q F16 [8] at 0, blk.0.k Q8_0 [32]
 * at 32, tok.weight F32 [4,2] at 96; tok.weight ends exactly at the end of the file. */
static struct file small_file(void)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("llama"));
    qr_gguf_writer_add_u32(w, "general.alignment", 32);
    uint8_t one = 1, two = 2;
    qr_gguf_writer_add(w, "test.k1", QR_GGUF_U8, &one);
    qr_gguf_writer_add(w, "test.k2", QR_GGUF_U8, &two);
    struct qr_slice toks[] = {QR_SLICE_LIT("a"), QR_SLICE_LIT("bc"), QR_SLICE_LIT("<s>")};
    qr_gguf_writer_add_arr_str(w, "test.tokens", toks, 3);
    float scores[] = {1.0f, 2.0f};
    qr_gguf_writer_add_arr(w, "test.scores", QR_GGUF_F32, scores, 2);
    uint8_t data[64];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t) i;
    uint64_t d8[] = {8}, d32[] = {32}, d42[] = {4, 2};
    assert_int_equal(qr_gguf_writer_add_tensor(w, "blk.0.q", QR_GGML_F16, 1, d8, data, 16), QR_OK);
    assert_int_equal(qr_gguf_writer_add_tensor(w, "blk.0.k", QR_GGML_Q8_0, 1, d32, data, 34),
                     QR_OK);
    assert_int_equal(qr_gguf_writer_add_tensor(w, "tok.weight", QR_GGML_F32, 2, d42, data, 32),
                     QR_OK);
    struct file f;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_writer_finish(w, &d, &f.p, &f.n), QR_OK);
    qr_gguf_writer_free(w);
    return f;
}

/* Offset just past the length-prefixed string s (a key or tensor name) in f. */
static size_t after(const struct file *f, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 8; i + n <= f->n; i++) {
        uint64_t len;
        memcpy(&len, f->p + i - 8, 8);
        if (len == n && memcmp(f->p + i, s, n) == 0)
            return i + n;
    }
    fail_msg("'%s' not in the file", s);
    return 0;
}

static void put32(struct file *f, size_t at, uint32_t v)
{
    memcpy(f->p + at, &v, 4); /* little-endian host */
}

static void put64(struct file *f, size_t at, uint64_t v)
{
    memcpy(f->p + at, &v, 8);
}

/* Open f, expect err and a message containing each of the given substrings. */
static void expect_fail(const struct file *f, enum qr_err want, const char *s1, const char *s2)
{
    struct qr_diag d = {{0}};
    struct qr_gguf *g = (struct qr_gguf *) 1;
    enum qr_err err = qr_gguf_open_mem(f->p, f->n, "x.gguf", NULL, &d, &g);
    if (err != want || !strstr(d.msg, "cannot open 'x.gguf': ") || (s1 && !strstr(d.msg, s1)) ||
        (s2 && !strstr(d.msg, s2)))
        fail_msg("got %s '%s', want %s with '%s' and '%s'", qr_err_str(err), d.msg,
                 qr_err_str(want), s1 ? s1 : "", s2 ? s2 : "");
    assert_null(g);
}

/* ---- the valid file itself ---- */

static void test_valid_small_file(void **state)
{
    struct file f = small_file();
    struct qr_diag d = {{0}};
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", NULL, &d, &g), QR_OK);
    assert_int_equal(qr_gguf_version(g), 3);
    assert_int_equal(qr_gguf_alignment(g), 32);
    assert_int_equal(qr_gguf_kv_count(g), 6);
    assert_int_equal(qr_gguf_tensor_count(g), 3);
    assert_int_equal(qr_gguf_data_bytes(g), 16 + 34 + 32);
    const struct qr_gguf_tensor *t = qr_gguf_find_tensor(g, "tok.weight");
    assert_non_null(t);
    assert_int_equal(t->offset, 96);
    assert_int_equal(t->file_offset + t->bytes, f.n);
    assert_int_equal(qr_gguf_data_offset(g) % 32, 0);
    const struct qr_gguf_kv *kv = qr_gguf_find(g, "test.tokens");
    struct qr_slice s;
    assert_int_equal(qr_gguf_arr_str_at(kv, 2, &s), QR_OK);
    assert_true(qr_slice_eq(s, "<s>"));
    assert_int_equal(qr_gguf_arr_str_at(kv, 3, &s), QR_ERR_NOT_FOUND);
    qr_gguf_close(g);
    free(f.p);
}

static void test_truncation_at_every_offset(void **state)
{
    struct file f = small_file();
    for (size_t n = 0; n < f.n; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, f.p, n);
        struct qr_diag d = {{0}};
        struct qr_gguf *g;
        enum qr_err err = qr_gguf_open_mem(p, n, "x.gguf", NULL, &d, &g);
        if (err != QR_ERR_PARSE || !strstr(d.msg, "cannot open 'x.gguf': "))
            fail_msg("prefix of %zu bytes: %s '%s'", n, qr_err_str(err), d.msg);
        free(p);
    }
    free(f.p);
}

static void test_tiny_files(void **state)
{
    /* CVE-2024-39720: a file of only the magic */
    struct file f = {(uint8_t *) "GGUF", 4};
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x4]", "version");
    f = (struct file){(uint8_t *) "", 0};
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x0]", "magic");
}

/* ---- header ---- */

static void test_header_magic_version_endianness(void **state)
{
    struct file f = small_file();
    memcpy(f.p, "GGUX", 4);
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x0]", "bad magic");
    memcpy(f.p, "FUGG", 4);
    expect_fail(&f, QR_ERR_PARSE, "header", "big-endian");
    memcpy(f.p, "GGUF", 4);
    const uint8_t be3[4] = {0, 0, 0, 3};
    memcpy(f.p + 4, be3, 4);
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x4]", "big-endian");
    put32(&f, 4, 1);
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x4]", "version 1 is not supported");
    put32(&f, 4, 4);
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x4]", "unsupported GGUF version 4");
    put32(&f, 4, 0);
    expect_fail(&f, QR_ERR_PARSE, "header", "unsupported GGUF version 0");
    /* v2 has the same layout as v3 for little-endian files */
    put32(&f, 4, 2);
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", NULL, NULL, &g), QR_OK);
    assert_int_equal(qr_gguf_version(g), 2);
    qr_gguf_close(g);
    free(f.p);
}

static void test_header_counts(void **state)
{
    struct file f = small_file();
    put64(&f, 8, 1ull << 40); /* tensor count past the cap */
    expect_fail(&f, QR_ERR_TOO_LARGE, "header [offset 0x8]", "tensor count");
    put64(&f, 8, UINT64_MAX);
    expect_fail(&f, QR_ERR_TOO_LARGE, "header", "tensor count");
    put64(&f, 8, 100000); /* under the cap, more than the file can hold */
    expect_fail(&f, QR_ERR_PARSE, "header", "cannot fit");
    put64(&f, 8, 3);
    put64(&f, 16, 1ull << 40);
    expect_fail(&f, QR_ERR_TOO_LARGE, "header [offset 0x10]", "key count");
    put64(&f, 16, 60000);
    expect_fail(&f, QR_ERR_PARSE, "header [offset 0x10]", "keys cannot fit");
    /* tighter caps from the caller apply the same way */
    put64(&f, 16, 6);
    struct qr_gguf_limits lim;
    qr_gguf_limits_default(&lim);
    lim.max_kv = 5;
    struct qr_diag d = {{0}};
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", &lim, &d, &g), QR_ERR_TOO_LARGE);
    assert_non_null(strstr(d.msg, "key count 6 exceeds the cap of 5"));
    qr_gguf_limits_default(&lim);
    lim.max_tensors = 2;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", &lim, &d, &g), QR_ERR_TOO_LARGE);
    qr_gguf_limits_default(&lim);
    lim.max_arr_len = 2;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", &lim, &d, &g), QR_ERR_TOO_LARGE);
    assert_non_null(strstr(d.msg, "kv 4 'test.tokens'"));
    free(f.p);
}

/* ---- metadata ---- */

static void test_kv_huge_string_length(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "general.architecture") + 4; /* the value's length */
    put64(&f, at, UINT64_MAX - 8);
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 0 'general.architecture'", "exceeds the cap");
    put64(&f, at, 100000); /* under the cap, past the end */
    expect_fail(&f, QR_ERR_PARSE, "kv 0 'general.architecture'", "runs past the end");
    put64(&f, at, 5);
    /* the key length itself */
    put64(&f, after(&f, "test.k1") - 7 - 8, UINT64_MAX);
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 2 [offset", "key length");
    free(f.p);
}

static void test_kv_huge_array_count(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "test.tokens") + 8; /* type(4) + elem type(4) -> count */
    put64(&f, at, 1ull << 62);
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 4 'test.tokens'", "array length");
    put64(&f, at, 1000000);
    expect_fail(&f, QR_ERR_PARSE, "kv 4 'test.tokens'", "cannot fit");
    put64(&f, at, 3);
    /* a string element's length */
    put64(&f, at + 8, UINT64_MAX);
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 4 'test.tokens'", "string 0 length");
    put64(&f, at + 8, 4000);
    expect_fail(&f, QR_ERR_PARSE, "kv 4 'test.tokens'", "string 0 length 4000 runs past");
    put64(&f, at + 8, 1);
    at = after(&f, "test.scores") + 8;
    put64(&f, at, (UINT64_MAX / 4) + 2); /* count * 4 would wrap */
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 5 'test.scores'", "array length");
    struct qr_gguf_limits lim;
    qr_gguf_limits_default(&lim);
    lim.max_arr_len = UINT64_MAX;
    struct qr_diag d = {{0}};
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", &lim, &d, &g), QR_ERR_PARSE);
    assert_non_null(strstr(d.msg, "runs past the end"));
    free(f.p);
}

static void test_kv_types(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "test.k1");
    put32(&f, at, 13);
    expect_fail(&f, QR_ERR_PARSE, "kv 2 'test.k1'", "unknown value type 13");
    put32(&f, at, UINT32_MAX);
    expect_fail(&f, QR_ERR_PARSE, "kv 2 'test.k1'", "unknown value type");
    put32(&f, at, QR_GGUF_U8);
    at = after(&f, "test.scores") + 4; /* element type */
    put32(&f, at, 13);
    expect_fail(&f, QR_ERR_PARSE, "kv 5 'test.scores'", "unknown array element type 13");
    put32(&f, at, QR_GGUF_ARR);
    expect_fail(&f, QR_ERR_PARSE, "kv 5 'test.scores'", "nested arrays");
    /* element-type confusion: f32 data read as strings of length 0x40000000_3f800000 */
    put32(&f, at, QR_GGUF_STR);
    expect_fail(&f, QR_ERR_TOO_LARGE, "kv 5 'test.scores'", "string 0 length");
    put32(&f, at, QR_GGUF_F32);
    free(f.p);
}

static void test_kv_key_names(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "test.k2");
    f.p[at - 1] = '1';
    expect_fail(&f, QR_ERR_PARSE, "kv 3 'test.k1'", "duplicate key");
    f.p[at - 1] = '\n';
    expect_fail(&f, QR_ERR_PARSE, "kv 3 [offset", "not printable ASCII");
    f.p[at - 1] = (char) 0xc3;
    expect_fail(&f, QR_ERR_PARSE, "kv 3 [offset", "byte 0xc3");
    f.p[at - 1] = '2';
    free(f.p);
}

static void test_alignment(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "general.alignment") + 4;
    const uint32_t bad[] = {0, 3, 48, 1u << 31, 1u << 21, UINT32_MAX};
    for (size_t i = 0; i < QR_ARRAY_LEN(bad); i++) {
        put32(&f, at, bad[i]);
        expect_fail(&f, QR_ERR_PARSE, "kv 1 'general.alignment'", "not a power of two");
    }
    put32(&f, at, 64); /* valid, but the tensors were laid out for 32 */
    expect_fail(&f, QR_ERR_PARSE, "tensor 'blk.0.k' data", "not a multiple of the alignment 64");
    put32(&f, at, 16); /* valid and every offset is a multiple of 16; data start moves */
    struct qr_gguf *g;
    struct qr_diag d = {{0}};
    enum qr_err err = qr_gguf_open_mem(f.p, f.n, "x.gguf", NULL, &d, &g);
    if (err == QR_OK) {
        assert_int_equal(qr_gguf_alignment(g), 16);
        qr_gguf_close(g);
    } else {
        assert_non_null(strstr(d.msg, "data"));
    }
    put32(&f, at, 32);
    put32(&f, at - 4, QR_GGUF_I32);
    expect_fail(&f, QR_ERR_PARSE, "kv 1 'general.alignment'", "must be a u32 (is i32)");
    free(f.p);
}

/* ---- tensor infos ---- */

static void test_tensor_n_dims(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "blk.0.k");
    put32(&f, at, 0);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "n_dims 0 is not in [1, 4]");
    put32(&f, at, 5);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "n_dims 5");
    put32(&f, at, UINT32_MAX);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "n_dims");
    put32(&f, at, 1);
    put64(&f, at + 4, 0);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "dimension 0 is zero");
    free(f.p);
}

static void test_tensor_dims_overflow(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "tok.weight") + 4;
    put64(&f, at, (uint64_t) INT64_MAX); /* (INT64_MAX, 2): ggml_nelements overflow class */
    put64(&f, at + 8, 2);
    expect_fail(&f, QR_ERR_TOO_LARGE, "tensor info 2 'tok.weight'", "element count overflows");
    put64(&f, at, 1ull << 32);
    put64(&f, at + 8, 1ull << 32);
    expect_fail(&f, QR_ERR_TOO_LARGE, "tensor info 2 'tok.weight'", "overflows");
    put64(&f, at, 1ull << 63);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 2 'tok.weight'", "exceeds INT64_MAX");
    /* elements fit in int64 but bytes (x4 for f32) do not */
    put64(&f, at, 1ull << 31);
    put64(&f, at + 8, 1ull << 30);
    expect_fail(&f, QR_ERR_PARSE, "tensor 'tok.weight' data", "run past the end");
    put64(&f, at, 1ull << 62);
    put64(&f, at + 8, 1);
    expect_fail(&f, QR_ERR_TOO_LARGE, "tensor info 2 'tok.weight'", "byte size");
    free(f.p);
}

static void test_tensor_types(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "tok.weight") + 4 + 16; /* type after 2 dims */
    put32(&f, at, QR_GGML_TYPE_COUNT);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 2 'tok.weight'", "unknown tensor type 43");
    put32(&f, at, UINT32_MAX);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 2 'tok.weight'", "unknown tensor type");
    const uint32_t removed[] = {4, 5, 31, 32, 33, 36, 37, 38};
    for (size_t i = 0; i < QR_ARRAY_LEN(removed); i++) {
        assert_null(qr_ggml_type_get(removed[i]));
        put32(&f, at, removed[i]);
        expect_fail(&f, QR_ERR_PARSE, "tensor info 2 'tok.weight'", "removed tensor type");
    }
    put32(&f, at, QR_GGML_Q8_0); /* dims[0] = 4, block 32 */
    expect_fail(&f, QR_ERR_PARSE, "tensor info 2 'tok.weight'",
                "first dimension 4 is not a multiple of the block size 32 of type q8_0");
    put32(&f, at, QR_GGML_F32);
    free(f.p);
}

static void test_tensor_names(void **state)
{
    struct file f = small_file();
    size_t at = after(&f, "blk.0.k");
    f.p[at - 1] = 'q';
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 'blk.0.q'", "duplicate tensor name");
    f.p[at - 1] = 0;
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1 [offset", "not printable");
    f.p[at - 1] = 'k';
    put64(&f, at - 7 - 8, 65); /* past the spec's 64 */
    expect_fail(&f, QR_ERR_TOO_LARGE, "tensor info 1 [offset", "tensor name length 65");
    put64(&f, at - 7 - 8, 0);
    expect_fail(&f, QR_ERR_PARSE, "tensor info 1", NULL);
    free(f.p);
}

/* ---- tensor data layout ---- */

static void test_tensor_offsets(void **state)
{
    struct file f = small_file();
    size_t at_k = after(&f, "blk.0.k") + 4 + 8 + 4; /* offset field */
    put64(&f, at_k, 33);
    expect_fail(&f, QR_ERR_PARSE, "tensor 'blk.0.k' data", "not a multiple of the alignment 32");
    put64(&f, at_k, 1ull << 20);
    expect_fail(&f, QR_ERR_PARSE, "tensor 'blk.0.k' data", "run past the end of the file");
    put64(&f, at_k, UINT64_MAX - 31); /* aligned, offset + bytes wraps */
    expect_fail(&f, QR_ERR_PARSE, "tensor 'blk.0.k' data", "run past the end of the file");
    put64(&f, at_k, 0); /* same offset as blk.0.q */
    expect_fail(&f, QR_ERR_PARSE, "data [offset", "overlaps tensor 'blk.0.");
    put64(&f, at_k, 32);
    /* out of offset order (the sorting path): blk.0.q at 96 overlaps tok.weight */
    size_t at_q = after(&f, "blk.0.q") + 4 + 8 + 4;
    put64(&f, at_q, 96);
    expect_fail(&f, QR_ERR_PARSE, "data [offset", "overlaps tensor");
    put64(&f, at_q, 64); /* out of order, disjoint: valid */
    put64(&f, at_k, 0);
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", NULL, NULL, &g), QR_OK);
    assert_int_equal(qr_gguf_data_bytes(g), 16 + 34 + 32);
    qr_gguf_close(g);
    put64(&f, at_q, 0);
    put64(&f, at_k, 32);
    /* tok.weight at 64: blk.0.k (34 bytes at 32) runs into it */
    size_t at_t = after(&f, "tok.weight") + 4 + 16 + 4;
    put64(&f, at_t, 32); /* the same offset as blk.0.k */
    expect_fail(&f, QR_ERR_PARSE, "data [offset", "overlaps tensor");
    put64(&f, at_t, 64);
    expect_fail(&f, QR_ERR_PARSE, "data [offset", "overlaps tensor 'blk.0.k'");
    free(f.p);
}

static void test_data_section_past_end(void **state)
{
    struct file f = small_file();
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "x.gguf", NULL, NULL, &g), QR_OK);
    size_t data_off = (size_t) qr_gguf_data_offset(g);
    qr_gguf_close(g);
    size_t header_end = after(&f, "tok.weight") + 4 + 16 + 4 + 8;
    assert_true(header_end < data_off); /* there is padding before the data */
    struct file cut = {f.p, header_end};
    expect_fail(&cut, QR_ERR_PARSE, "data section", "past the end");
    free(f.p);
}

/* ---- the path entry point, and a big vocabulary walked lazily ---- */

static void test_open_path(void **state)
{
    struct qr_diag d = {{0}};
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open("/nonexistent/x.gguf", NULL, &d, &g), QR_ERR_NOT_FOUND);
    assert_non_null(strstr(d.msg, "cannot open '/nonexistent/x.gguf'"));
    assert_int_equal(qr_gguf_open("/", NULL, &d, &g), QR_ERR_IO);
    char path[] = "/tmp/qr-gguf-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(qr_gguf_open(path, NULL, &d, &g), QR_ERR_PARSE); /* empty */
    struct file f = small_file();
    FILE *fp = fopen(path, "wb");
    assert_int_equal(fwrite(f.p, 1, f.n, fp), f.n);
    fclose(fp);
    assert_int_equal(qr_gguf_open(path, NULL, &d, &g), QR_OK);
    assert_int_equal(qr_gguf_tensor_count(g), 3);
    assert_memory_equal(qr_gguf_find_tensor(g, "blk.0.q")->data, f.p + qr_gguf_data_offset(g), 16);
    qr_gguf_close(g);
    unlink(path);
    free(f.p);
}

static void test_big_vocab_lazy(void **state)
{
    enum { N = 262144 };
    char(*text)[12] = malloc(N * sizeof(*text));
    struct qr_slice *toks = malloc(N * sizeof(*toks));
    for (size_t i = 0; i < N; i++) {
        int n = snprintf(text[i], sizeof(text[i]), "t%zu", i);
        toks[i] = (struct qr_slice){text[i], (size_t) n};
    }
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, N);
    struct file f;
    assert_int_equal(qr_gguf_writer_finish(w, NULL, &f.p, &f.n), QR_OK);
    qr_gguf_writer_free(w);
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open_mem(f.p, f.n, "v.gguf", NULL, NULL, &g), QR_OK);
    const struct qr_gguf_kv *kv = qr_gguf_find(g, "tokenizer.ggml.tokens");
    assert_int_equal(qr_gguf_arr_len(kv), N);
    struct qr_gguf_arr_iter it;
    struct qr_slice s;
    size_t i = 0;
    qr_gguf_arr_iter_init(kv, &it);
    while (qr_gguf_arr_iter_next(&it, &s)) {
        if (s.len != toks[i].len || memcmp(s.ptr, toks[i].ptr, s.len) != 0)
            fail_msg("token %zu differs", i);
        /* views into the caller's buffer: nothing was copied */
        assert_true((const uint8_t *) s.ptr > f.p && (const uint8_t *) s.ptr < f.p + f.n);
        i++;
    }
    assert_int_equal(i, N);
    assert_int_equal(qr_gguf_arr_str_at(kv, N - 1, &s), QR_OK);
    assert_true(qr_slice_eq(s, "t262143"));
    qr_gguf_close(g);
    free(f.p);
    free(toks);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_small_file),
        cmocka_unit_test(test_truncation_at_every_offset),
        cmocka_unit_test(test_tiny_files),
        cmocka_unit_test(test_header_magic_version_endianness),
        cmocka_unit_test(test_header_counts),
        cmocka_unit_test(test_kv_huge_string_length),
        cmocka_unit_test(test_kv_huge_array_count),
        cmocka_unit_test(test_kv_types),
        cmocka_unit_test(test_kv_key_names),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_tensor_n_dims),
        cmocka_unit_test(test_tensor_dims_overflow),
        cmocka_unit_test(test_tensor_types),
        cmocka_unit_test(test_tensor_names),
        cmocka_unit_test(test_tensor_offsets),
        cmocka_unit_test(test_data_section_past_end),
        cmocka_unit_test(test_open_path),
        cmocka_unit_test(test_big_vocab_lazy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
