/* libFuzzer target for the OpenAI request decoder. The first byte picks the operation (chat,
 * completions, embeddings), the rest is the body. The decode runs in an arena capped at 1 MiB.
 * A success must give a request whose counts respect the limits and whose strings are
 * NUL-terminated arena copies, and whose model encodes into an error-free answer; a refusal must
 * carry a 4xx status, a code and a message, and encode as an OpenAI error body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/openai_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_slice(struct qr_slice s)
{
    if (s.len && (!s.ptr || s.ptr[s.len] != '\0'))
        abort();
}

static void check_request(const struct qr_request *r, const struct qr_decode_limits *lim)
{
    if (r->protocol != QR_PROTO_OPENAI || r->model.len == 0)
        abort();
    check_slice(r->model);
    if (r->n_messages > lim->max_messages || r->n_tools > lim->max_tools ||
        r->n_stop > lim->max_stop || r->n_inputs > lim->max_inputs)
        abort();
    if (r->op == QR_OP_CHAT && r->n_messages == 0)
        abort();
    if (r->include_usage && !r->stream)
        abort();
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct qr_message *m = &r->messages[i];
        for (size_t j = 0; j < m->n_parts; j++) {
            check_slice(m->parts[j].text);
            check_slice(m->parts[j].data);
            check_slice(m->parts[j].mime);
        }
        for (size_t j = 0; j < m->n_tool_calls; j++) {
            /* arguments are never empty: "" became "{}" */
            if (m->tool_calls[j].arguments.len == 0)
                abort();
            check_slice(m->tool_calls[j].arguments);
        }
        if (m->role == QR_ROLE_TOOL && !m->tool_call_id.ptr)
            abort();
    }
    for (size_t i = 0; i < r->n_tools; i++)
        check_slice(r->tools[i].parameters);
    for (size_t i = 0; i < r->n_extras; i++) {
        check_slice(r->extras[i].key);
        if (r->extras[i].json.len == 0)
            abort();
    }
    if (r->n_choices.set && r->n_choices.v != 1)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    enum qr_op op = (enum qr_op)(data[0] % 3);
    struct qr_slice body = {(const char *) data + 1, size - 1};
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    lim.max_stop = 4;
    struct qr_arena arena;
    qr_arena_init(&arena, 1 << 20);
    struct qr_request req;
    struct qr_api_error err;
    memset(&err, 0, sizeof(err));
    struct qr_buf out;
    qr_buf_init(&out, 0);

    enum qr_err rc = qr_openai_decode(op, body, &lim, &arena, &req, &err);
    if (rc == QR_OK) {
        check_request(&req, &lim);
        struct qr_enc_env env = {.now_ns = 1700000000000000000LL, .resp_id = "chatcmpl-fuzz"};
        struct qr_openai_enc e;
        qr_openai_enc_init(&e, &req, &env);
        struct qr_answer a;
        memset(&a, 0, sizeof(a));
        a.finish = QR_FINISH_STOP;
        if (qr_openai_enc_answer(&e, &a, &out) != QR_OK || out.len == 0)
            abort();
    } else {
        if (err.status != 400 && err.status != 413 && err.status != 422)
            abort();
        if (!err.code[0] || !err.message[0])
            abort();
        qr_openai_error_body(&err, &out);
        if (out.len == 0)
            abort();
    }
    qr_buf_cleanup(&out);
    qr_arena_cleanup(&arena);
    return 0;
}
