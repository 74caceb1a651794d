/* libFuzzer target for the rerank request decoder (POST /v1/rerank, /rerank). The whole input is
 * the body; the decode runs in an arena capped at 1 MiB. A success must give a rerank request
 * with a model, a non-empty query and 1..QR_RERANK_MAX_DOCUMENTS documents, all NUL-terminated
 * arena copies, top_n unset or >= 1, and must encode a ranking over every document into an answer
 * whose result count respects top_n; a refusal must carry a 400 or 413, a code and a message, and
 * encode as an OpenAI error body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai_codec.h"
#include "api/rerank_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_slice(struct qr_slice s)
{
    if (s.len && (!s.ptr || s.ptr[s.len] != '\0'))
        abort();
}

static void check_request(const struct qr_request *r)
{
    if (r->protocol != QR_PROTO_OPENAI || r->op != QR_OP_RERANK || r->stream)
        abort();
    if (r->model.len == 0 || r->query.len == 0 || !r->model.ptr || !r->query.ptr)
        abort();
    check_slice(r->model);
    check_slice(r->query);
    if (r->n_inputs == 0 || r->n_inputs > QR_RERANK_MAX_DOCUMENTS || !r->inputs)
        abort();
    for (size_t i = 0; i < r->n_inputs; i++) {
        if (!r->inputs[i].ptr)
            abort();
        check_slice(r->inputs[i]);
    }
    if (r->top_n.set && r->top_n.v < 1)
        abort();
    for (size_t i = 0; i < r->n_extras; i++) {
        check_slice(r->extras[i].key);
        if (r->extras[i].json.len == 0)
            abort();
    }
}

/* Score every document (descending by index, so the encoder must sort) and count the results. */
static void check_answer(const struct qr_request *r)
{
    struct qr_answer a;
    qr_answer_init(&a, 0);
    struct qr_event ev = {.type = QR_EV_START};
    if (qr_answer_add(&a, &ev))
        abort();
    for (size_t i = 0; i < r->n_inputs; i++) {
        memset(&ev, 0, sizeof(ev));
        ev.type = QR_EV_RERANK;
        ev.index = (uint32_t) i;
        ev.score = (double) i * 0.5 - 3;
        if (qr_answer_add(&a, &ev))
            abort();
    }
    memset(&ev, 0, sizeof(ev));
    ev.type = QR_EV_DONE;
    if (qr_answer_add(&a, &ev))
        abort();
    struct qr_openai_enc e;
    qr_openai_enc_init(&e, r, NULL);
    struct qr_buf out;
    qr_buf_init(&out, 0);
    if (qr_openai_enc_answer(&e, &a, &out) != QR_OK || out.len == 0)
        abort();
    size_t want = r->n_inputs;
    if (r->top_n.set && (uint64_t) r->top_n.v < want)
        want = (size_t) r->top_n.v;
    size_t got = 0;
    for (const char *p = out.ptr; (p = strstr(p, "\"relevance_score\":")); p++)
        got++;
    if (got != want) /* inside escaped texts the key reads \"relevance_score\": and never matches */
        abort();
    qr_buf_cleanup(&out);
    qr_answer_cleanup(&a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct qr_slice body = {(const char *) data, size};
    struct qr_arena arena;
    qr_arena_init(&arena, 1 << 20);
    struct qr_request req;
    struct qr_api_error err;
    memset(&err, 0, sizeof(err));
    enum qr_err rc = qr_rerank_decode(body, NULL, &arena, &req, &err);
    if (rc == QR_OK) {
        check_request(&req);
        check_answer(&req);
    } else {
        if (err.status != 400 && err.status != 413)
            abort();
        if (!err.code[0] || !err.message[0])
            abort();
        struct qr_buf out;
        qr_buf_init(&out, 0);
        qr_openai_error_body(&err, &out);
        if (out.len == 0)
            abort();
        qr_buf_cleanup(&out);
    }
    qr_arena_cleanup(&arena);
    return 0;
}
