/* The rerank client codec. Decoding: a good request fills query, documents (inputs), top_n and
 * return_documents, unknown keys become extras in order; every bad field is a 400 naming it
 * (missing/empty query, documents not an array of strings, empty or too many documents, top_n
 * below 1 or not an integer, bad return_documents, stream true, model missing), bad JSON is
 * invalid_json and an exhausted arena 413. Encoding: scores aggregated from RERANK events come
 * out sorted by score (ties by index), cut to top_n, with the documents when asked, the client's
 * model name and the usage; the OpenAI encoder gives the same bytes for a rerank request. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai_codec.h"
#include "api/rerank_codec.h"

struct fx {
    struct qr_arena arena;
    struct qr_request req;
    struct qr_api_error err;
};

static enum qr_err decode_lim(struct fx *f, const char *body, const struct qr_decode_limits *lim,
                              size_t arena_cap)
{
    qr_arena_init(&f->arena, arena_cap);
    memset(&f->err, 0, sizeof(f->err));
    return qr_rerank_decode(qr_slice_str(body), lim, &f->arena, &f->req, &f->err);
}

static enum qr_err decode(struct fx *f, const char *body)
{
    return decode_lim(f, body, NULL, 1 << 20);
}

static void assert_slice(struct qr_slice s, const char *want)
{
    assert_non_null(s.ptr);
    assert_int_equal(s.len, strlen(want));
    assert_memory_equal(s.ptr, want, s.len);
    assert_int_equal(s.ptr[s.len], '\0');
}

/* ---- decoding ---- */

static void test_decode_good(void **state)
{
    struct fx f;
    assert_int_equal(decode(&f, "{\"model\":\"bge\",\"query\":\"Hauptstadt?\",\"documents\":"
                                "[\"Berlin\",\"\",\"Straße\"],\"top_n\":2,\"return_documents\":"
                                "true,\"truncate\":true,\"meta\":{\"a\":[1,2.50]},"
                                "\"stream\":false}"),
                     QR_OK);
    struct qr_request *r = &f.req;
    assert_int_equal(r->op, QR_OP_RERANK);
    assert_int_equal(r->protocol, QR_PROTO_OPENAI);
    assert_false(r->stream);
    assert_slice(r->model, "bge");
    assert_slice(r->query, "Hauptstadt?");
    assert_int_equal(r->n_inputs, 3);
    assert_slice(r->inputs[0], "Berlin");
    assert_slice(r->inputs[1], ""); /* an empty document is a document */
    assert_slice(r->inputs[2], "Straße");
    assert_true(r->top_n.set);
    assert_int_equal(r->top_n.v, 2);
    assert_int_equal(r->return_documents, QR_TRUE);
    assert_int_equal(r->n_extras, 2);
    assert_slice(r->extras[0].key, "truncate");
    assert_slice(r->extras[0].json, "true");
    assert_slice(r->extras[1].key, "meta");
    assert_slice(r->extras[1].json, "{\"a\":[1,2.50]}"); /* numbers as the client wrote them */
    qr_arena_cleanup(&f.arena);

    /* null means not sent; 3.0 is an integer; top_n above the count is fine */
    assert_int_equal(decode(&f, "{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],"
                                "\"top_n\":null,\"return_documents\":null,\"stream\":null}"),
                     QR_OK);
    assert_false(f.req.top_n.set);
    assert_int_equal(f.req.return_documents, QR_UNSET);
    qr_arena_cleanup(&f.arena);
    assert_int_equal(decode(&f, "{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],"
                                "\"top_n\":3.0,\"return_documents\":false}"),
                     QR_OK);
    assert_int_equal(f.req.top_n.v, 3);
    assert_int_equal(f.req.return_documents, QR_FALSE);
    qr_arena_cleanup(&f.arena);
}

static const struct {
    const char *body;
    const char *code;
    const char *param;
    const char *msg; /* a substring of the message */
} bad_cases[] = {
    {"{\"query\":\"q\",\"documents\":[\"a\"]}", "invalid_request", "model", "'model' is required"},
    {"{\"model\":\"\",\"query\":\"q\",\"documents\":[\"a\"]}", "invalid_request", "model",
     "must not be empty"},
    {"{\"model\":7,\"query\":\"q\",\"documents\":[\"a\"]}", "invalid_request", "model",
     "must be a string"},
    {"{\"model\":null,\"query\":\"q\",\"documents\":[\"a\"]}", "invalid_request", "model",
     "must be a string"},
    {"{\"model\":\"m\",\"documents\":[\"a\"]}", "invalid_request", "query", "'query' is required"},
    {"{\"model\":\"m\",\"query\":\"\",\"documents\":[\"a\"]}", "invalid_request", "query",
     "must not be empty"},
    {"{\"model\":\"m\",\"query\":[\"q\"],\"documents\":[\"a\"]}", "invalid_request", "query",
     "must be a string"},
    {"{\"model\":\"m\",\"query\":\"q\"}", "invalid_request", "documents",
     "'documents' is required"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[]}", "invalid_request", "documents",
     "must not be empty"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":\"a\"}", "invalid_request", "documents",
     "an array of strings"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":null}", "invalid_request", "documents",
     "an array of strings"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\",1]}", "invalid_request", "documents[1]",
     "must be a string"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[{\"text\":\"a\"}]}", "invalid_request",
     "documents[0]", "must be a string"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":0}", "invalid_request",
     "top_n", "at least 1"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":-3}", "invalid_request",
     "top_n", "at least 1"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":1.5}", "invalid_request",
     "top_n", "an integer"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":\"2\"}", "invalid_request",
     "top_n", "an integer"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":1e999}", "invalid_request",
     "top_n", "an integer"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"top_n\":true}", "invalid_request",
     "top_n", "an integer"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"return_documents\":\"yes\"}",
     "invalid_request", "return_documents", "a boolean"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"stream\":true}", "invalid_request",
     "stream", "not streamed"},
    {"{\"model\":\"m\",\"query\":\"q\",\"documents\":[\"a\"],\"stream\":1}", "invalid_request",
     "stream", "a boolean"},
    {"[1,2]", "invalid_request", "", "JSON object"},
    {"{\"model\":\"m\",", "invalid_json", "", "not valid JSON"},
    {"", "invalid_json", "", "not valid JSON"},
};

static void test_decode_bad(void **state)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(bad_cases); i++) {
        struct fx f;
        enum qr_err rc = decode(&f, bad_cases[i].body);
        if (rc == QR_OK || strcmp(f.err.param, bad_cases[i].param) ||
            !strstr(f.err.message, bad_cases[i].msg))
            fprintf(stderr, "case %zu %s: %d %s %s: %s\n", i, bad_cases[i].body, f.err.status,
                    f.err.code, f.err.param, f.err.message);
        assert_int_not_equal(rc, QR_OK);
        assert_int_equal(f.err.status, 400);
        assert_string_equal(f.err.code, bad_cases[i].code);
        assert_string_equal(f.err.param, bad_cases[i].param);
        assert_non_null(strstr(f.err.message, bad_cases[i].msg));
        /* the OpenAI error shape */
        struct qr_buf b;
        qr_buf_init(&b, 0);
        qr_openai_error_body(&f.err, &b);
        assert_non_null(strstr(b.ptr, "\"type\":\"invalid_request_error\""));
        qr_buf_cleanup(&b);
        qr_arena_cleanup(&f.arena);
    }
}

/* A body with n documents "d". */
static char *docs_body(size_t n)
{
    size_t cap = 64 + n * 4;
    char *b = malloc(cap);
    assert_non_null(b);
    size_t at = (size_t) snprintf(b, cap, "{\"model\":\"m\",\"query\":\"q\",\"documents\":[");
    for (size_t i = 0; i < n; i++)
        at += (size_t) snprintf(b + at, cap - at, "%s\"d\"", i ? "," : "");
    snprintf(b + at, cap - at, "]}");
    return b;
}

static void test_decode_bounds(void **state)
{
    struct fx f;
    char *b = docs_body(QR_RERANK_MAX_DOCUMENTS);
    assert_int_equal(decode(&f, b), QR_OK);
    assert_int_equal(f.req.n_inputs, QR_RERANK_MAX_DOCUMENTS);
    qr_arena_cleanup(&f.arena);
    free(b);
    b = docs_body(QR_RERANK_MAX_DOCUMENTS + 1);
    assert_int_equal(decode(&f, b), QR_ERR_INVALID);
    assert_int_equal(f.err.status, 400);
    assert_string_equal(f.err.param, "documents");
    assert_non_null(strstr(f.err.message, "too many documents (1025, at most 1024)"));
    qr_arena_cleanup(&f.arena);
    free(b);
    /* a smaller configured cap wins */
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    lim.max_inputs = 2;
    b = docs_body(3);
    assert_int_equal(decode_lim(&f, b, &lim, 1 << 20), QR_ERR_INVALID);
    assert_non_null(strstr(f.err.message, "at most 2"));
    qr_arena_cleanup(&f.arena);
    /* the arena cap: 413 */
    assert_int_equal(decode_lim(&f, b, NULL, 64), QR_ERR_TOO_LARGE);
    assert_int_equal(f.err.status, 413);
    assert_string_equal(f.err.code, "request_too_large");
    qr_arena_cleanup(&f.arena);
    free(b);
}

/* ---- encoding ---- */

static void add(struct qr_answer *a, const struct qr_event *ev)
{
    assert_int_equal(qr_answer_add(a, ev), QR_OK);
}

/* START, RERANK for each (index, score), USAGE (prompt tokens p, when >= 0), DONE. */
static void answer_of(struct qr_answer *a, const double *scores, const uint32_t *idx, size_t n,
                      int64_t p)
{
    qr_answer_init(a, 0);
    struct qr_event ev = {.type = QR_EV_START};
    add(a, &ev);
    for (size_t i = 0; i < n; i++) {
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_RERANK;
        ev.index = idx[i];
        ev.score = scores[i];
        add(a, &ev);
    }
    if (p >= 0) {
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_USAGE;
        qr_usage_init(&ev.usage);
        ev.usage.prompt_tokens = p;
        add(a, &ev);
    }
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_DONE;
    ev.finish = QR_FINISH_STOP;
    add(a, &ev);
}

static char *encode(const struct qr_request *req, const struct qr_answer *a)
{
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_rerank_enc_answer(qr_slice_str("Mein-Modell"), req, a, &out), QR_OK);
    char *s = strndup(out.ptr, out.len);
    qr_buf_cleanup(&out);
    return s;
}

static void test_encode_sorted_cut_documents(void **state)
{
    struct qr_slice docs[4] = {qr_slice_str("Berlin"), qr_slice_str("Paris \"FR\""),
                               qr_slice_str("Katzen"), qr_slice_str("München")};
    struct qr_request req = {.op = QR_OP_RERANK, .inputs = docs, .n_inputs = 4};
    /* upstream order, one tie (indices 1 and 3), a negative score */
    const double scores[] = {0.25, -1.5, 0.25, 0.875};
    const uint32_t idx[] = {3, 0, 1, 2};
    struct qr_answer a;
    answer_of(&a, scores, idx, 4, 42);
    char *s = encode(&req, &a);
    assert_string_equal(s, "{\"object\":\"list\",\"model\":\"Mein-Modell\",\"results\":["
                           "{\"index\":2,\"relevance_score\":0.875},"
                           "{\"index\":1,\"relevance_score\":0.25},"
                           "{\"index\":3,\"relevance_score\":0.25},"
                           "{\"index\":0,\"relevance_score\":-1.5}],"
                           "\"usage\":{\"prompt_tokens\":42,\"total_tokens\":42}}\n");
    free(s);

    req.top_n = (struct qr_opt_i64){true, 2};
    req.return_documents = QR_TRUE;
    s = encode(&req, &a);
    assert_string_equal(s, "{\"object\":\"list\",\"model\":\"Mein-Modell\",\"results\":["
                           "{\"index\":2,\"relevance_score\":0.875,\"document\":{\"text\":"
                           "\"Katzen\"}},"
                           "{\"index\":1,\"relevance_score\":0.25,\"document\":{\"text\":"
                           "\"Paris \\\"FR\\\"\"}}],"
                           "\"usage\":{\"prompt_tokens\":42,\"total_tokens\":42}}\n");
    free(s);

    /* the OpenAI encoder hands a rerank answer to this codec: same bytes */
    struct qr_request oreq = req;
    oreq.model = qr_slice_str("Mein-Modell");
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, &oreq, NULL);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_openai_enc_answer(&e, &a, &out), QR_OK);
    s = encode(&req, &a);
    assert_int_equal(out.len, strlen(s));
    assert_memory_equal(out.ptr, s, out.len);
    free(s);
    qr_buf_cleanup(&out);

    req.top_n = (struct qr_opt_i64){true, 100}; /* more than there are: all */
    req.return_documents = QR_FALSE;
    s = encode(&req, &a);
    assert_non_null(strstr(s, "{\"index\":0,\"relevance_score\":-1.5}]"));
    free(s);
    qr_answer_cleanup(&a);
}

static void test_encode_edges(void **state)
{
    struct qr_slice docs[3] = {qr_slice_str("a"), qr_slice_str("b"), qr_slice_str("c")};
    struct qr_request req = {.op = QR_OP_RERANK, .inputs = docs, .n_inputs = 3};
    struct qr_answer a;
    /* no usage reported, fewer results than documents */
    const double one[] = {1e-7};
    const uint32_t i2[] = {2};
    answer_of(&a, one, i2, 1, -1);
    char *s = encode(&req, &a);
    assert_string_equal(s, "{\"object\":\"list\",\"model\":\"Mein-Modell\",\"results\":["
                           "{\"index\":2,\"relevance_score\":1e-7}],"
                           "\"usage\":{\"prompt_tokens\":0,\"total_tokens\":0}}\n");
    free(s);
    qr_answer_cleanup(&a);
    /* a score for a document the request does not have: refused */
    const uint32_t i5[] = {5};
    answer_of(&a, one, i5, 1, 3);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    assert_int_equal(qr_rerank_enc_answer(qr_slice_str("m"), &req, &a, &out), QR_ERR_INVALID);
    assert_int_equal(out.len, 0);
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);
}

/* The aggregate keeps the contract: each index once, finite scores. */
static void test_answer_rerank_contract(void **state)
{
    struct qr_answer a;
    qr_answer_init(&a, 0);
    struct qr_event ev = {.type = QR_EV_START};
    add(&a, &ev);
    ev.type = QR_EV_RERANK;
    ev.index = 1;
    ev.score = 0.5;
    add(&a, &ev);
    assert_int_equal(qr_answer_add(&a, &ev), QR_ERR_INTERNAL); /* index 1 again */
    qr_answer_cleanup(&a);
    qr_answer_init(&a, 0);
    ev.type = QR_EV_START;
    add(&a, &ev);
    ev.type = QR_EV_RERANK;
    ev.score = NAN;
    assert_int_equal(qr_answer_add(&a, &ev), QR_ERR_INTERNAL);
    qr_answer_cleanup(&a);
    /* the slot table counts against max_bytes */
    qr_answer_init(&a, 64);
    ev.type = QR_EV_START;
    add(&a, &ev);
    ev.type = QR_EV_RERANK;
    ev.score = 1;
    ev.index = 1000;
    assert_int_equal(qr_answer_add(&a, &ev), QR_ERR_TOO_LARGE);
    ev.index = 0;
    add(&a, &ev);
    assert_int_equal(a.n_ranked, 1);
    qr_answer_cleanup(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_good),   cmocka_unit_test(test_decode_bad),
        cmocka_unit_test(test_decode_bounds), cmocka_unit_test(test_encode_sorted_cut_documents),
        cmocka_unit_test(test_encode_edges),  cmocka_unit_test(test_answer_rerank_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
