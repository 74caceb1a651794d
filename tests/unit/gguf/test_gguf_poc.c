/* The GGUF PoC classes (docs/TESTING.md "Fuzzing", anchor 7) as committed fuzz seeds: each seed
 * in tests/fuzz/corpus/fuzz_gguf named here is opened by the reader and must be refused with the
 * stated error code and a message naming the stage and the reason; the block_count > 512 seeds
 * open (the reader has no opinion on counts) and the architecture layer refuses the count. The
 * replay test fuzz_gguf_corpus runs the same files through the fuzz harness's checks; this test
 * pins what each one must produce, so a seed that silently stops hitting its class fails here.
 * Truncation at every offset is test_gguf_reader's test_truncation_at_every_offset. Also the
 * allocation bound of anchor 8 on the reader's tables (a header of many tiny entries). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"

#define CORPUS QR_TEST_CASES "/../fuzz/corpus/fuzz_gguf/"

struct seed {
    const char *name;
    enum qr_err err;
    const char *stage; /* substring naming where */
    const char *why;   /* substring naming what */
};

static const struct seed refused[] = {
    /* n_kv / n_tensors overflow */
    {"n-kv-huge", QR_ERR_TOO_LARGE, "header [offset 0x10]", "key count"},
    {"n-kv-u64max", QR_ERR_TOO_LARGE, "header [offset 0x10]", "exceeds the cap of 65536"},
    {"n-tensors-huge", QR_ERR_TOO_LARGE, "header [offset 0x8]", "tensor count"},
    {"n-tensors-u64max", QR_ERR_TOO_LARGE, "header [offset 0x8]", "exceeds the cap of 262144"},
    /* dims overflow, incl. (INT64_MAX, 2, 1, 1) */
    {"dims-overflow", QR_ERR_TOO_LARGE, "tensor info 2 'tok.weight'", "element count overflows"},
    {"dims-4d-int64max", QR_ERR_TOO_LARGE, "tensor info 0 'tok.weight'", "element count overflows"},
    {"dims-4d-wrap", QR_ERR_TOO_LARGE, "tensor info 0 'tok.weight'", "element count overflows"},
    /* ne = 0 */
    {"dim-zero", QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "dimension 0 is zero"},
    {"dim-zero-4d", QR_ERR_PARSE, "tensor info 0 'tok.weight'", "dimension 2 is zero"},
    {"n-dims-0", QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "n_dims 0 is not in [1, 4]"},
    {"n-dims-5", QR_ERR_PARSE, "tensor info 1 'blk.0.k'", "n_dims 5 is not in [1, 4]"},
    /* alignment 0 and 0x80000000 */
    {"align-0", QR_ERR_PARSE, "kv 1 'general.alignment'", "alignment 0 is not a power of two"},
    {"align-2p31", QR_ERR_PARSE, "kv 1 'general.alignment'",
     "alignment 2147483648 is not a power of two"},
    {"align-3", QR_ERR_PARSE, "kv 1 'general.alignment'", "not a power of two"},
    /* element-type confusion */
    {"arr-elem-type-confusion", QR_ERR_TOO_LARGE, "kv 5 'test.scores'", "string 0 length"},
    {"arr-nested", QR_ERR_PARSE, "kv 5 'test.scores'", "nested arrays"},
    {"value-type-unknown", QR_ERR_PARSE, "kv 2 'test.k1'", "unknown value type 13"},
    {"type-u32max", QR_ERR_PARSE, "tensor info 0 'tok.weight'", "unknown tensor type 4294967295"},
    {"type-removed", QR_ERR_PARSE, "tensor info 2 'tok.weight'", "removed tensor type"},
    /* string length near UINT64_MAX */
    {"str-len-huge", QR_ERR_TOO_LARGE, "kv 0 'general.architecture'", "exceeds the cap"},
    {"str-len-u64max", QR_ERR_TOO_LARGE, "kv 0 'general.architecture'",
     "length 18446744073709551615 exceeds the cap"},
    {"key-len-u64max", QR_ERR_TOO_LARGE, "kv 0 [offset 0x18]", "key length"},
    {"arr-str-len-u64max", QR_ERR_TOO_LARGE, "kv 0 'tokenizer.ggml.tokens'",
     "string 0 length 18446744073709551615"},
    {"arr-len-huge", QR_ERR_TOO_LARGE, "kv 4 'test.tokens'", "array length"},
    /* truncation (every offset: test_gguf_reader) */
    {"magic-only", QR_ERR_PARSE, "header [offset 0x4]", "runs past the end"},
    {"truncated-header", QR_ERR_PARSE, "header [offset 0x10]", "runs past the end"},
    {"truncated-kv", QR_ERR_PARSE, "header", "cannot fit"},
    {"truncated-data", QR_ERR_PARSE, "tensor 'tok.weight' data", "run past the end"},
    /* duplicate keys and tensor names */
    {"dup-key", QR_ERR_PARSE, "kv 3 'test.k1'", "duplicate key"},
    {"dup-tensor", QR_ERR_PARSE, "tensor info 1 'blk.0.q'", "duplicate tensor name"},
    /* offsets */
    {"offset-wrap", QR_ERR_PARSE, "tensor 'blk.0.k' data", "run past the end"},
    {"overlap", QR_ERR_PARSE, "tensor 'tok.weight' data", "overlaps tensor 'blk.0.k'"},
};

static uint8_t *slurp(const char *name, size_t *n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s", CORPUS, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open the seed '%s'", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    assert_true(len > 0 && len < 4096);
    uint8_t *p = malloc((size_t) len); /* its own heap block: ASan sees any overread */
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t) len, f), (size_t) len);
    fclose(f);
    *n = (size_t) len;
    return p;
}

static void test_poc_seeds_refused(void **state)
{
    (void) state;
    for (size_t i = 0; i < QR_ARRAY_LEN(refused); i++) {
        const struct seed *s = &refused[i];
        size_t n;
        uint8_t *p = slurp(s->name, &n);
        struct qr_diag d = {{0}};
        struct qr_gguf *g = (struct qr_gguf *) 1;
        enum qr_err err = qr_gguf_open_mem(p, n, "poc.gguf", NULL, &d, &g);
        if (err != s->err || g != NULL || !strstr(d.msg, "cannot open 'poc.gguf': ") ||
            !strstr(d.msg, s->stage) || !strstr(d.msg, s->why))
            fail_msg("%s: got %s '%s', want %s with '%s' and '%s'", s->name, qr_err_str(err), d.msg,
                     qr_err_str(s->err), s->stage, s->why);
        free(p);
    }
}

/* block_count > 512 (and a u64 count of UINT64_MAX): the file opens, the count is refused. */
static void test_block_count_seeds(void **state)
{
    (void) state;
    const char *names[] = {"block-count-600", "block-count-u64max"};
    const uint64_t want[] = {600, UINT64_MAX};
    for (size_t i = 0; i < QR_ARRAY_LEN(names); i++) {
        size_t n;
        uint8_t *p = slurp(names[i], &n);
        struct qr_diag d = {{0}};
        struct qr_gguf *g;
        assert_int_equal(qr_gguf_open_mem(p, n, "poc.gguf", NULL, &d, &g), QR_OK);
        struct qr_arch *a = calloc(1, sizeof *a);
        assert_non_null(a);
        assert_int_equal(qr_gguf_arch_derive(g, a, &d), QR_OK);
        assert_false(a->block_count.known);
        assert_true(a->n_invalid >= 1);
        assert_string_equal(a->invalid[0].field, "block_count");
        assert_true(a->invalid[0].value == want[i]);
        free(a);
        qr_gguf_close(g);
        free(p);
    }
}

/* n_kv minimal u8 entries "kNNNNN" = 1; as raw bytes (the writer would be slower) */
static uint8_t *many_keys(uint64_t n_kv, size_t *len)
{
    size_t per = 8 + 6 + 4 + 1;
    *len = 24 + (size_t) n_kv * per;
    uint8_t *p = malloc(*len), *q = p + 24;
    assert_non_null(p);
    uint32_t v3 = 3;
    uint64_t zero = 0, six = 6;
    memcpy(p, "GGUF", 4);
    memcpy(p + 4, &v3, 4);
    memcpy(p + 8, &zero, 8);
    memcpy(p + 16, &n_kv, 8);
    for (uint64_t i = 0; i < n_kv; i++, q += per) {
        char key[7];
        snprintf(key, sizeof key, "k%05u", (unsigned) i);
        uint32_t type = QR_GGUF_U8;
        memcpy(q, &six, 8);
        memcpy(q + 8, key, 6);
        memcpy(q + 14, &type, 4);
        q[18] = 1;
    }
    return p;
}

/* Anchor 8: the reader's tables stay within 2 x the file size + 1 MiB. 65,536 keys of 19 bytes
 * (1.2 MiB) would need 4 MiB of tables: refused before allocating; 20,000 keys still open. */
static void test_table_allocation_bound(void **state)
{
    (void) state;
    size_t n;
    uint8_t *p = many_keys(65536, &n);
    struct qr_diag d = {{0}};
    struct qr_gguf *g = (struct qr_gguf *) 1;
    assert_int_equal(qr_gguf_open_mem(p, n, "x.gguf", NULL, &d, &g), QR_ERR_TOO_LARGE);
    assert_null(g);
    assert_non_null(strstr(d.msg, "65536 keys and 0 tensors would take"));
    assert_non_null(strstr(d.msg, "more than 2 x the file size + 1 MiB"));
    free(p);
    p = many_keys(20000, &n);
    assert_int_equal(qr_gguf_open_mem(p, n, "x.gguf", NULL, &d, &g), QR_OK);
    assert_int_equal(qr_gguf_kv_count(g), 20000);
    qr_gguf_close(g);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_poc_seeds_refused),
        cmocka_unit_test(test_block_count_seeds),
        cmocka_unit_test(test_table_allocation_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
