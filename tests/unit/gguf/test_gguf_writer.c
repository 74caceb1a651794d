/* The GGUF writer and the reader together: every value type (scalars, arrays of each fixed-size
 * type, string arrays with empty, NUL-containing and non-UTF-8 strings, empty arrays) and tensors
 * of several types come back exactly, in order, with byte-identical data at aligned offsets; the
 * typed getters convert integers only where the value fits; the writer refuses bad keys, names,
 * alignments, shapes, sizes and duplicates with a sticky error; write_file + qr_gguf_open round
 * trip through the file system. */
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

static struct qr_gguf *open_buf(uint8_t *p, size_t n)
{
    struct qr_diag d = {{0}};
    struct qr_gguf *g = NULL;
    enum qr_err err = qr_gguf_open_mem(p, n, "rt.gguf", NULL, &d, &g);
    if (err)
        fail_msg("open: %s %s", qr_err_str(err), d.msg);
    return g;
}

static const struct qr_slice STRS[] = {
    {"", 0}, {"hello", 5}, {"a\0b", 3}, {"\xff\xfe not utf-8", 13}, {"Grüße", 7}};

static void test_round_trip_all_types(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    uint8_t u8 = 200;
    int8_t i8 = -5;
    uint16_t u16 = 65000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 3.5f;
    uint8_t b = 1;
    uint64_t u64 = 1ull << 63;
    int64_t i64 = INT64_MIN;
    double f64 = -1.25e300;
    assert_int_equal(qr_gguf_writer_add(w, "v.u8", QR_GGUF_U8, &u8), QR_OK);
    qr_gguf_writer_add(w, "v.i8", QR_GGUF_I8, &i8);
    qr_gguf_writer_add(w, "v.u16", QR_GGUF_U16, &u16);
    qr_gguf_writer_add(w, "v.i16", QR_GGUF_I16, &i16);
    qr_gguf_writer_add(w, "v.u32", QR_GGUF_U32, &u32);
    qr_gguf_writer_add(w, "v.i32", QR_GGUF_I32, &i32);
    qr_gguf_writer_add(w, "v.f32", QR_GGUF_F32, &f32);
    qr_gguf_writer_add(w, "v.bool", QR_GGUF_BOOL, &b);
    qr_gguf_writer_add_str(w, "v.str", QR_SLICE_LIT("Hallo Welt, schöne Grüße"));
    qr_gguf_writer_add(w, "v.u64", QR_GGUF_U64, &u64);
    qr_gguf_writer_add(w, "v.i64", QR_GGUF_I64, &i64);
    qr_gguf_writer_add(w, "v.f64", QR_GGUF_F64, &f64);
    qr_gguf_writer_add_u32(w, "general.alignment", 64);
    int16_t ai16[] = {-1, 2, -3};
    int32_t ai32[] = {7, -8};
    uint64_t au64[] = {0, UINT64_MAX};
    float af32[] = {0.5f, -0.25f, 1e30f};
    double af64[] = {2.5};
    uint8_t abool[] = {1, 0, 1};
    qr_gguf_writer_add_arr(w, "a.i16", QR_GGUF_I16, ai16, 3);
    qr_gguf_writer_add_arr(w, "a.i32", QR_GGUF_I32, ai32, 2);
    qr_gguf_writer_add_arr(w, "a.u64", QR_GGUF_U64, au64, 2);
    qr_gguf_writer_add_arr(w, "a.f32", QR_GGUF_F32, af32, 3);
    qr_gguf_writer_add_arr(w, "a.f64", QR_GGUF_F64, af64, 1);
    qr_gguf_writer_add_arr(w, "a.bool", QR_GGUF_BOOL, abool, 3);
    qr_gguf_writer_add_arr(w, "a.empty", QR_GGUF_U8, NULL, 0);
    qr_gguf_writer_add_arr_str(w, "a.str", STRS, QR_ARRAY_LEN(STRS));
    qr_gguf_writer_add_arr_str(w, "a.str_empty", NULL, 0);

    float wf32[6] = {1, 2, 3, 4, 5, 6};
    uint16_t wf16[4] = {0x3c00, 0x4000, 0xc000, 0x7bff};
    uint8_t q4[2 * 18];
    for (size_t i = 0; i < sizeof(q4); i++)
        q4[i] = (uint8_t) (i * 7);
    int32_t wi32[2 * 1 * 3 * 1];
    for (int i = 0; i < 6; i++)
        wi32[i] = -i;
    uint64_t d32[] = {3, 2}, d4[] = {4}, dq[] = {64}, di[] = {2, 1, 3, 1};
    assert_int_equal(qr_gguf_writer_add_tensor(w, "t.f32", QR_GGML_F32, 2, d32, wf32, 24), QR_OK);
    qr_gguf_writer_add_tensor(w, "t.f16", QR_GGML_F16, 1, d4, wf16, 8);
    qr_gguf_writer_add_tensor(w, "t.q4_0", QR_GGML_Q4_0, 1, dq, q4, sizeof(q4));
    qr_gguf_writer_add_tensor(w, "t.i32", QR_GGML_I32, 4, di, wi32, sizeof(wi32));
    qr_gguf_writer_add_tensor(w, "t.zero", QR_GGML_BF16, 1, d4, NULL, 0);

    struct qr_diag d = {{0}};
    uint8_t *buf;
    size_t n;
    assert_int_equal(qr_gguf_writer_finish(w, &d, &buf, &n), QR_OK);
    qr_gguf_writer_free(w);
    struct qr_gguf *g = open_buf(buf, n);

    assert_int_equal(qr_gguf_version(g), 3);
    assert_int_equal(qr_gguf_alignment(g), 64);
    assert_int_equal(qr_gguf_kv_count(g), 22);
    const char *order[] = {"v.u8", "v.i8", "v.u16", "v.i16", "v.u32", "v.i32", "v.f32", "v.bool"};
    for (size_t i = 0; i < QR_ARRAY_LEN(order); i++) {
        assert_true(qr_slice_eq(qr_gguf_kv_at(g, i)->key, order[i]));
        assert_int_equal(qr_gguf_kv_at(g, i)->type, i);
    }
    assert_int_equal(qr_gguf_find(g, "v.str")->type, QR_GGUF_STR);
    assert_int_equal(qr_gguf_find(g, "v.u64")->type, QR_GGUF_U64);
    assert_int_equal(qr_gguf_find(g, "v.f64")->type, QR_GGUF_F64);
    assert_null(qr_gguf_kv_at(g, 22));

    /* scalars back exactly */
    uint32_t ou32;
    int32_t oi32;
    uint64_t ou64;
    int64_t oi64;
    float of32;
    double of64;
    bool ob;
    struct qr_slice os;
    assert_int_equal(qr_gguf_get_u32(g, "v.u8", &ou32), QR_OK);
    assert_int_equal(ou32, 200);
    assert_int_equal(qr_gguf_get_i64(g, "v.i8", &oi64), QR_OK);
    assert_int_equal(oi64, -5);
    assert_int_equal(qr_gguf_get_u32(g, "v.u16", &ou32), QR_OK);
    assert_int_equal(ou32, 65000);
    assert_int_equal(qr_gguf_get_i32(g, "v.i16", &oi32), QR_OK);
    assert_int_equal(oi32, -30000);
    assert_int_equal(qr_gguf_get_u32(g, "v.u32", &ou32), QR_OK);
    assert_int_equal(ou32, 4000000000u);
    assert_int_equal(qr_gguf_get_i32(g, "v.i32", &oi32), QR_OK);
    assert_int_equal(oi32, -2000000000);
    assert_int_equal(qr_gguf_get_f32(g, "v.f32", &of32), QR_OK);
    assert_true(of32 == 3.5f);
    assert_int_equal(qr_gguf_get_bool(g, "v.bool", &ob), QR_OK);
    assert_true(ob);
    assert_int_equal(qr_gguf_get_str(g, "v.str", &os), QR_OK);
    assert_true(qr_slice_eq(os, "Hallo Welt, schöne Grüße"));
    assert_int_equal(qr_gguf_get_u64(g, "v.u64", &ou64), QR_OK);
    assert_true(ou64 == 1ull << 63);
    assert_int_equal(qr_gguf_get_i64(g, "v.i64", &oi64), QR_OK);
    assert_true(oi64 == INT64_MIN);
    assert_int_equal(qr_gguf_get_f64(g, "v.f64", &of64), QR_OK);
    assert_true(of64 == -1.25e300);

    /* conversions only where the value fits */
    assert_int_equal(qr_gguf_get_u32(g, "v.i8", &ou32), QR_ERR_INVALID);  /* negative */
    assert_int_equal(qr_gguf_get_u64(g, "v.i64", &ou64), QR_ERR_INVALID); /* negative */
    assert_int_equal(qr_gguf_get_i32(g, "v.u32", &oi32), QR_ERR_INVALID); /* > INT32_MAX */
    assert_int_equal(qr_gguf_get_i64(g, "v.u64", &oi64), QR_ERR_INVALID); /* > INT64_MAX */
    assert_int_equal(qr_gguf_get_i32(g, "v.i64", &oi32), QR_ERR_INVALID); /* < INT32_MIN */
    assert_int_equal(qr_gguf_get_i64(g, "v.u32", &oi64), QR_OK);          /* widening */
    assert_int_equal(oi64, 4000000000ll);
    assert_int_equal(qr_gguf_get_f64(g, "v.f32", &of64), QR_OK); /* widening */
    assert_true(of64 == 3.5);
    assert_int_equal(qr_gguf_get_f32(g, "v.f64", &of32), QR_ERR_INVALID); /* no narrowing */
    assert_int_equal(qr_gguf_get_u32(g, "v.f32", &ou32), QR_ERR_INVALID); /* no float->int */
    assert_int_equal(qr_gguf_get_bool(g, "v.u8", &ob), QR_ERR_INVALID);
    assert_int_equal(qr_gguf_get_str(g, "v.u8", &os), QR_ERR_INVALID);
    assert_int_equal(qr_gguf_get_u32(g, "a.i32", &ou32), QR_ERR_INVALID); /* array */
    assert_int_equal(qr_gguf_get_u32(g, "no.such", &ou32), QR_ERR_NOT_FOUND);

    /* arrays */
    const struct qr_gguf_kv *kv = qr_gguf_find(g, "a.i16");
    assert_int_equal(kv->arr_type, QR_GGUF_I16);
    assert_int_equal(qr_gguf_arr_len(kv), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(qr_gguf_arr_i64_at(kv, (uint64_t) i, &oi64), QR_OK);
        assert_int_equal(oi64, ai16[i]);
    }
    assert_int_equal(qr_gguf_arr_u64_at(kv, 0, &ou64), QR_ERR_INVALID); /* -1 */
    assert_int_equal(qr_gguf_arr_i64_at(kv, 3, &oi64), QR_ERR_NOT_FOUND);
    kv = qr_gguf_find(g, "a.i32");
    assert_int_equal(qr_gguf_arr_i64_at(kv, 1, &oi64), QR_OK);
    assert_int_equal(oi64, -8);
    kv = qr_gguf_find(g, "a.u64");
    assert_int_equal(qr_gguf_arr_u64_at(kv, 1, &ou64), QR_OK);
    assert_true(ou64 == UINT64_MAX);
    assert_int_equal(qr_gguf_arr_i64_at(kv, 1, &oi64), QR_ERR_INVALID);
    kv = qr_gguf_find(g, "a.f32");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(qr_gguf_arr_f64_at(kv, (uint64_t) i, &of64), QR_OK);
        assert_true(of64 == (double) af32[i]);
    }
    assert_int_equal(qr_gguf_arr_i64_at(kv, 0, &oi64), QR_ERR_INVALID);
    kv = qr_gguf_find(g, "a.f64");
    assert_int_equal(qr_gguf_arr_f64_at(kv, 0, &of64), QR_OK);
    assert_true(of64 == 2.5);
    kv = qr_gguf_find(g, "a.bool");
    assert_int_equal(kv->arr_type, QR_GGUF_BOOL);
    assert_int_equal(kv->val_len, 3);
    assert_memory_equal(kv->val, abool, 3);
    kv = qr_gguf_find(g, "a.empty");
    assert_int_equal(kv->type, QR_GGUF_ARR);
    assert_int_equal(qr_gguf_arr_len(kv), 0);
    kv = qr_gguf_find(g, "a.str");
    assert_int_equal(qr_gguf_arr_len(kv), QR_ARRAY_LEN(STRS));
    struct qr_gguf_arr_iter it;
    qr_gguf_arr_iter_init(kv, &it);
    for (size_t i = 0; i < QR_ARRAY_LEN(STRS); i++) {
        assert_true(qr_gguf_arr_iter_next(&it, &os));
        assert_int_equal(os.len, STRS[i].len);
        assert_true(os.len == 0 || memcmp(os.ptr, STRS[i].ptr, os.len) == 0);
        assert_int_equal(qr_gguf_arr_str_at(kv, i, &os), QR_OK);
        assert_int_equal(os.len, STRS[i].len);
    }
    assert_false(qr_gguf_arr_iter_next(&it, &os));
    assert_int_equal(qr_gguf_arr_str_at(qr_gguf_find(g, "a.i32"), 0, &os), QR_ERR_INVALID);
    qr_gguf_arr_iter_init(qr_gguf_find(g, "a.i32"), &it); /* not strings: empty walk */
    assert_false(qr_gguf_arr_iter_next(&it, &os));
    assert_int_equal(qr_gguf_arr_len(qr_gguf_find(g, "a.str_empty")), 0);
    assert_int_equal(qr_gguf_arr_len(qr_gguf_find(g, "v.u8")), 0);

    /* tensors: order, shapes, sizes, aligned offsets, byte-identical data */
    assert_int_equal(qr_gguf_tensor_count(g), 5);
    const struct qr_gguf_tensor *t = qr_gguf_tensor_at(g, 0);
    assert_true(qr_slice_eq(t->name, "t.f32"));
    assert_int_equal(t->type, QR_GGML_F32);
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->dims[0], 3);
    assert_int_equal(t->dims[1], 2);
    assert_int_equal(t->dims[2], 1);
    assert_int_equal(t->n_elements, 6);
    assert_int_equal(t->bytes, 24);
    assert_memory_equal(t->data, wf32, 24);
    t = qr_gguf_find_tensor(g, "t.f16");
    assert_int_equal(t->bytes, 8);
    assert_memory_equal(t->data, wf16, 8);
    t = qr_gguf_find_tensor(g, "t.q4_0");
    assert_int_equal(t->n_elements, 64);
    assert_int_equal(t->bytes, 36);
    assert_memory_equal(t->data, q4, 36);
    t = qr_gguf_find_tensor(g, "t.i32");
    assert_int_equal(t->n_dims, 4);
    assert_int_equal(t->dims[2], 3);
    assert_memory_equal(t->data, wi32, sizeof(wi32));
    t = qr_gguf_find_tensor(g, "t.zero");
    assert_int_equal(t->bytes, 8);
    for (size_t i = 0; i < 8; i++)
        assert_int_equal(t->data[i], 0);
    for (size_t i = 0; i < 5; i++) {
        t = qr_gguf_tensor_at(g, i);
        assert_int_equal(t->offset % 64, 0);
        assert_int_equal(t->file_offset % 64, 0);
        assert_ptr_equal(t->data, buf + t->file_offset);
    }
    assert_null(qr_gguf_tensor_at(g, 5));
    assert_null(qr_gguf_find_tensor(g, "t.none"));
    assert_int_equal(qr_gguf_data_bytes(g), 24 + 8 + 36 + 24 + 8);
    assert_int_equal(qr_gguf_file_size(g), n);
    qr_gguf_close(g);
    free(buf);
}

static void test_empty_file_and_no_tensors(void **state)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    uint8_t *buf;
    size_t n;
    assert_int_equal(qr_gguf_writer_finish(w, NULL, &buf, &n), QR_OK);
    qr_gguf_writer_free(w);
    assert_int_equal(n, 32); /* 24-byte header padded to 32 */
    struct qr_gguf *g = open_buf(buf, n);
    assert_int_equal(qr_gguf_kv_count(g), 0);
    assert_int_equal(qr_gguf_tensor_count(g), 0);
    assert_null(qr_gguf_find(g, "general.architecture"));
    qr_gguf_close(g);
    /* without the trailing padding: still valid when there are no tensors */
    g = open_buf(buf, 24);
    qr_gguf_close(g);
    free(buf);
}

static void test_writer_errors(void **state)
{
    struct qr_diag d = {{0}};
    uint8_t *buf;
    size_t n;
    uint64_t dims[] = {4};
    struct {
        const char *what;
        enum qr_err err;
    } cases[] = {
        {"empty key", QR_ERR_INVALID},    {"control in key", QR_ERR_INVALID},
        {"alignment 3", QR_ERR_INVALID},  {"alignment type", QR_ERR_INVALID},
        {"tensor len", QR_ERR_INVALID},   {"block", QR_ERR_INVALID},
        {"removed type", QR_ERR_INVALID}, {"zero dim", QR_ERR_INVALID},
        {"dup key", QR_ERR_INVALID},      {"dup tensor", QR_ERR_INVALID},
        {"long name", QR_ERR_INVALID},    {"str type as scalar", QR_ERR_INVALID},
        {"overflow", QR_ERR_TOO_LARGE},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(cases); i++) {
        struct qr_gguf_writer *w = qr_gguf_writer_new();
        const char *c = cases[i].what;
        uint64_t zero[] = {0}, big[] = {1ull << 40, 1ull << 40};
        if (!strcmp(c, "empty key"))
            qr_gguf_writer_add_u32(w, "", 1);
        else if (!strcmp(c, "control in key"))
            qr_gguf_writer_add_u32(w, "a\tb", 1);
        else if (!strcmp(c, "alignment 3"))
            qr_gguf_writer_add_u32(w, "general.alignment", 3);
        else if (!strcmp(c, "alignment type"))
            qr_gguf_writer_add_u64(w, "general.alignment", 32);
        else if (!strcmp(c, "tensor len"))
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_F32, 1, dims, "abc", 3);
        else if (!strcmp(c, "block"))
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_Q4_K, 1, dims, NULL, 0);
        else if (!strcmp(c, "removed type"))
            qr_gguf_writer_add_tensor(w, "t", 4, 1, dims, NULL, 0);
        else if (!strcmp(c, "zero dim"))
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_F32, 1, zero, NULL, 0);
        else if (!strcmp(c, "dup key")) {
            qr_gguf_writer_add_u32(w, "k", 1);
            qr_gguf_writer_add_u32(w, "j", 1);
            qr_gguf_writer_add_str(w, "k", QR_SLICE_LIT("x"));
        } else if (!strcmp(c, "dup tensor")) {
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_F32, 1, dims, NULL, 0);
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_F32, 1, dims, NULL, 0);
        } else if (!strcmp(c, "long name"))
            qr_gguf_writer_add_tensor(
                w, "0123456789012345678901234567890123456789012345678901234567890123456789",
                QR_GGML_F32, 1, dims, NULL, 0);
        else if (!strcmp(c, "str type as scalar"))
            qr_gguf_writer_add(w, "k", QR_GGUF_STR, "x");
        else if (!strcmp(c, "overflow"))
            qr_gguf_writer_add_tensor(w, "t", QR_GGML_F32, 2, big, NULL, 0);
        /* sticky: a later valid add changes nothing */
        qr_gguf_writer_add_u32(w, "later", 1);
        d.msg[0] = 0;
        enum qr_err err = qr_gguf_writer_finish(w, &d, &buf, &n);
        if (err != cases[i].err || strncmp(d.msg, "gguf writer: ", 13) != 0)
            fail_msg("%s: got %s '%s'", c, qr_err_str(err), d.msg);
        assert_null(buf);
        qr_gguf_writer_free(w);
    }
}

static void test_write_file_and_open(void **state)
{
    char path[] = "/tmp/qr-gguf-w-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("llama"));
    uint64_t dims[] = {16, 4};
    float data[64];
    for (int i = 0; i < 64; i++)
        data[i] = (float) i / 8;
    qr_gguf_writer_add_tensor(w, "token_embd.weight", QR_GGML_F32, 2, dims, data, sizeof(data));
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_writer_write_file(w, path, &d), QR_OK);
    assert_int_equal(qr_gguf_writer_write_file(w, "/nonexistent/dir/x.gguf", &d), QR_ERR_IO);
    assert_non_null(strstr(d.msg, "cannot write '/nonexistent/dir/x.gguf'"));
    qr_gguf_writer_free(w);
    struct qr_gguf *g;
    assert_int_equal(qr_gguf_open(path, NULL, &d, &g), QR_OK);
    struct qr_slice arch;
    assert_int_equal(qr_gguf_get_str(g, "general.architecture", &arch), QR_OK);
    assert_true(qr_slice_eq(arch, "llama"));
    const struct qr_gguf_tensor *t = qr_gguf_find_tensor(g, "token_embd.weight");
    assert_non_null(t);
    assert_memory_equal(t->data, data, sizeof(data));
    qr_gguf_close(g);
    unlink(path);
}

static void test_type_table(void **state)
{
    /* spot checks against ggml's block structs */
    assert_int_equal(qr_ggml_type_get(QR_GGML_Q4_K)->blck, 256);
    assert_int_equal(qr_ggml_type_get(QR_GGML_Q4_K)->bytes, 144);
    assert_int_equal(qr_ggml_type_get(QR_GGML_Q6_K)->bytes, 210);
    assert_int_equal(qr_ggml_type_get(QR_GGML_Q8_0)->bytes, 34);
    assert_int_equal(qr_ggml_type_get(QR_GGML_MXFP4)->bytes, 17);
    assert_int_equal(qr_ggml_type_get(QR_GGML_BF16)->bytes, 2);
    size_t valid = 0;
    for (uint32_t i = 0; i < QR_GGML_TYPE_COUNT + 5; i++)
        valid += qr_ggml_type_get(i) != NULL;
    assert_int_equal(valid, QR_GGML_TYPE_COUNT - 8);
    uint64_t dims[] = {512, 3}, out;
    assert_int_equal(qr_ggml_nbytes(QR_GGML_Q4_K, 2, dims, &out), QR_OK);
    assert_int_equal(out, 2 * 3 * 144);
    assert_int_equal(qr_gguf_type_size(QR_GGUF_F64), 8);
    assert_int_equal(qr_gguf_type_size(QR_GGUF_STR), 0);
    assert_string_equal(qr_gguf_type_name(99), "invalid");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_all_types),
        cmocka_unit_test(test_empty_file_and_no_tensors),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_write_file_and_open),
        cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
