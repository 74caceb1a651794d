/* libFuzzer target for the Ollama codec. The first byte picks the route (bits 0-1: chat,
 * generate, embed; bit 2: legacy /api/embeddings); the rest is the request body, decoded with a
 * 1 MiB arena. A decoded request must be self-consistent (model set, every exact-JSON slice
 * parses, tool-call arguments are objects); a refusal must be a 400 or 413 with a message. The
 * same bytes are then streamed through the encoder as content/reasoning split at a point taken
 * from the first byte: every line must be one valid JSON object ending in "\n", and the streamed
 * text must equal the whole answer's text (invalid UTF-8 included). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <yyjson.h>

#include "api/ollama_codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(struct qr_slice s, bool want_obj)
{
    if (!s.ptr || s.ptr[s.len] != '\0')
        abort();
    yyjson_doc *d = yyjson_read_opts((char *) s.ptr, s.len, YYJSON_READ_BIGNUM_AS_RAW, NULL, NULL);
    if (!d || (want_obj && !yyjson_is_obj(yyjson_doc_get_root(d))))
        abort();
    yyjson_doc_free(d);
}

static void check_request(const struct qr_request *r, enum qr_op op)
{
    if (r->protocol != QR_PROTO_OLLAMA || r->op != op || r->model.len == 0)
        abort();
    for (size_t i = 0; i < r->n_messages; i++) {
        const struct qr_message *m = &r->messages[i];
        if (m->role > QR_ROLE_TOOL)
            abort();
        for (size_t j = 0; j < m->n_tool_calls; j++)
            check_json(m->tool_calls[j].arguments, true);
        for (size_t j = 0; j < m->n_parts; j++) {
            if (m->parts[j].kind == QR_PART_IMAGE && m->parts[j].data.len >= 5 &&
                !strncmp(m->parts[j].data.ptr, "data:", 5))
                abort();
        }
    }
    for (size_t i = 0; i < r->n_tools; i++) {
        if (r->tools[i].parameters.len)
            check_json(r->tools[i].parameters, true);
    }
    for (size_t i = 0; i < r->n_extras; i++)
        check_json(r->extras[i].json, false);
    for (size_t i = 0; i < r->n_extra_options; i++)
        check_json(r->extra_options[i].json, false);
    if (r->keep_alive.set)
        check_json(r->keep_alive.raw, false);
    if (r->format.kind == QR_FORMAT_SCHEMA)
        check_json(r->format.schema, true);
    if (r->think.kind == QR_THINK_LEVEL && !qr_slice_eq(r->think.level, "low") &&
        !qr_slice_eq(r->think.level, "medium") && !qr_slice_eq(r->think.level, "high"))
        abort();
    if (r->keep_alive.set && !r->keep_alive.forever && r->keep_alive.ms < 0)
        abort();
    if (op == QR_OP_EMBED && r->stream)
        abort();
}

/* Append the text field of every line (content or response, and thinking) to the two buffers. */
static void collect_lines(const char *p, size_t n, bool chat, struct qr_buf *content,
                          struct qr_buf *thinking)
{
    while (n) {
        const char *nl = memchr(p, '\n', n);
        if (!nl)
            abort();
        yyjson_doc *d = yyjson_read(p, (size_t) (nl - p), 0);
        if (!d)
            abort();
        yyjson_val *root = yyjson_doc_get_root(d);
        yyjson_val *msg = chat ? yyjson_obj_get(root, "message") : root;
        yyjson_val *c = yyjson_obj_get(msg, chat ? "content" : "response");
        yyjson_val *t = yyjson_obj_get(msg, "thinking");
        if (!yyjson_is_str(c))
            abort();
        qr_buf_append(content, yyjson_get_str(c), yyjson_get_len(c));
        if (t)
            qr_buf_append(thinking, yyjson_get_str(t), yyjson_get_len(t));
        yyjson_doc_free(d);
        n -= (size_t) (nl - p) + 1;
        p = nl + 1;
    }
}

static void check_encoder(const char *body, size_t len, uint8_t sel)
{
    struct qr_request req = {.op = (sel & 8) ? QR_OP_COMPLETION : QR_OP_CHAT};
    req.model = QR_SLICE_LIT("m");
    struct qr_enc_env env = {.now_ns = 1700000000123456789LL};
    struct qr_ollama_enc e;
    struct qr_answer ans;
    struct qr_buf out, whole;
    qr_ollama_enc_init(&e, &req, &env);
    qr_answer_init(&ans, 0);
    qr_buf_init(&out, 0);
    qr_buf_init(&whole, 0);
    size_t cut1 = len ? (size_t) (sel >> 4) % (len + 1) : 0;
    size_t cut2 = cut1 + (len - cut1) / 2;
    struct qr_event evs[] = {
        {.type = QR_EV_START},
        {.type = QR_EV_CONTENT, .text = {body, cut1}},
        {.type = QR_EV_REASONING, .text = {body + cut1, cut2 - cut1}},
        {.type = QR_EV_CONTENT, .text = {body + cut1, cut2 - cut1}},
        {.type = QR_EV_CONTENT, .text = {body + cut2, len - cut2}},
        {.type = QR_EV_DONE, .finish = QR_FINISH_STOP},
    };
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        if (qr_ollama_enc_event(&e, &evs[i], &out) != QR_OK ||
            qr_answer_add(&ans, &evs[i]) != QR_OK)
            abort();
    }
    if (qr_ollama_enc_answer(&e, &ans, &whole) != QR_OK || !whole.len)
        abort();
    bool chat = req.op == QR_OP_CHAT;
    struct qr_buf sc, st, wc, wt;
    qr_buf_init(&sc, 0);
    qr_buf_init(&st, 0);
    qr_buf_init(&wc, 0);
    qr_buf_init(&wt, 0);
    collect_lines(out.ptr, out.len, chat, &sc, &st);
    collect_lines(whole.ptr, whole.len, chat, &wc, &wt);
    if (sc.len != wc.len || st.len != wt.len || (sc.len && memcmp(sc.ptr, wc.ptr, sc.len)) ||
        (st.len && memcmp(st.ptr, wt.ptr, st.len)))
        abort();
    qr_buf_cleanup(&sc);
    qr_buf_cleanup(&st);
    qr_buf_cleanup(&wc);
    qr_buf_cleanup(&wt);

    /* the same bytes as one tool call's arguments: a whole line or a parse refusal */
    if (chat) {
        struct qr_ollama_enc t;
        struct qr_buf tl;
        qr_ollama_enc_init(&t, &req, &env);
        qr_buf_init(&tl, 0);
        struct qr_event b = {
            .type = QR_EV_TOOL_BEGIN, .id = QR_SLICE_LIT("call_1"), .name = QR_SLICE_LIT("f")};
        struct qr_event a1 = {.type = QR_EV_TOOL_ARGS, .text = {body, cut1}};
        struct qr_event a2 = {.type = QR_EV_TOOL_ARGS, .text = {body + cut1, len - cut1}};
        struct qr_event end = {.type = QR_EV_TOOL_END};
        if (qr_ollama_enc_event(&t, &b, &tl) || qr_ollama_enc_event(&t, &a1, &tl) ||
            qr_ollama_enc_event(&t, &a2, &tl))
            abort();
        enum qr_err rc = qr_ollama_enc_event(&t, &end, &tl);
        if (rc == QR_OK) {
            const char *nl = memchr(tl.ptr, '\n', tl.len);
            if (!nl || (size_t) (nl - tl.ptr) != tl.len - 1)
                abort();
            yyjson_doc *d = yyjson_read(tl.ptr, tl.len - 1, YYJSON_READ_BIGNUM_AS_RAW);
            if (!d)
                abort();
            yyjson_doc_free(d);
        } else if (rc != QR_ERR_PARSE) {
            abort();
        }
        qr_buf_cleanup(&tl);
        qr_ollama_enc_cleanup(&t);
    }
    qr_buf_cleanup(&out);
    qr_buf_cleanup(&whole);
    qr_answer_cleanup(&ans);
    qr_ollama_enc_cleanup(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t sel = data[0];
    enum qr_op op = (enum qr_op)((sel & 3) == 3 ? 0 : (sel & 3));
    bool legacy = (sel >> 2) & 1;
    struct qr_slice body = {(const char *) data + 1, size - 1};

    struct qr_arena a;
    qr_arena_init(&a, 1 << 20);
    struct qr_request req;
    struct qr_api_error err = {0};
    enum qr_err rc = qr_ollama_decode(op, legacy, body, NULL, &a, &req, &err);
    if (rc == QR_OK) {
        check_request(&req, op);
    } else if (!((rc == QR_ERR_INVALID && err.status == 400) ||
                 (rc == QR_ERR_TOO_LARGE && err.status == 413)) ||
               !err.message[0]) {
        abort();
    }
    qr_arena_cleanup(&a);
    check_encoder(body.ptr, body.len, sel);
    return 0;
}
