/* Data-driven translation cases: one directory per case under tests/cases/contract/, each a
 * client request, an upstream transcript and the expected client transcript, for every pair of
 * client protocol x backend protocol. The runner decodes the client request, encodes it for the
 * upstream (compared with upstream_request.json when present), decodes the upstream transcript
 * into canonical events and encodes them for the client -- with the transcript fed whole, split
 * in two at every byte boundary, and one byte at a time: every feeding must give the expected
 * output byte for byte.
 *
 * case.json: {"client":"openai"|"ollama", "op":"chat"|"completion"|"embed"|"rerank",
 *             "legacy_embeddings":false, "upstream":"openai"|"ollama",
 *             "upstream_status":200, "upstream_content_type":"text/event-stream",
 *             "transport":"ok"|"cut"|"timeout", "expected_status":200,
 *             "dialect":{"reasoning_field":..,"think_open":..,"think_close":..,
 *                        "think_start_inside":false, "stream_usage":true}}
 * Synthesized tool-call ids (call_ + 24 hex) are normalized to call_SYNTH<n> in order of first
 * appearance, so a case still checks that the streamed and the final form use the same id.
 * QR_UPDATE_GOLDEN=1 writes expected.txt from the whole-feed output (review it before commit). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/codec.h"
#include "api/ollama_codec.h"
#include "api/openai_codec.h"
#include "api/rerank_codec.h"
#include "backend/codec.h"
#include "contract/event.h"
#include "core/arena.h"

#define CASES QR_TEST_CASES "/contract"

static char *read_file(const char *dir, const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t) n + 1);
    size_t got = fread(buf, 1, (size_t) n, f);
    fclose(f);
    buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

struct spec {
    enum qr_protocol client;
    enum qr_op op;
    bool legacy;
    struct qr_dialect d;
    int up_status;
    const char *up_ctype;
    enum qr_err transport;
    int expected_status;
    yyjson_doc *doc;
};

static void load_spec(const char *dir, struct spec *s)
{
    char *text = read_file(dir, "case.json", NULL);
    if (!text)
        fail_msg("%s: no case.json", dir);
    s->doc = yyjson_read(text, strlen(text), YYJSON_READ_ALLOW_COMMENTS);
    free(text);
    yyjson_val *r = yyjson_doc_get_root(s->doc);
    if (!r)
        fail_msg("%s: case.json is not JSON", dir);
    const char *client = yyjson_get_str(yyjson_obj_get(r, "client"));
    const char *op = yyjson_get_str(yyjson_obj_get(r, "op"));
    const char *up = yyjson_get_str(yyjson_obj_get(r, "upstream"));
    const char *tr = yyjson_get_str(yyjson_obj_get(r, "transport"));
    s->client = client && !strcmp(client, "ollama") ? QR_PROTO_OLLAMA : QR_PROTO_OPENAI;
    s->op = !op || !strcmp(op, "chat")  ? QR_OP_CHAT
            : !strcmp(op, "completion") ? QR_OP_COMPLETION
            : !strcmp(op, "rerank")     ? QR_OP_RERANK
                                        : QR_OP_EMBED;
    s->legacy = yyjson_get_bool(yyjson_obj_get(r, "legacy_embeddings"));
    qr_dialect_default(&s->d, up && !strcmp(up, "ollama") ? QR_UP_OLLAMA : QR_UP_OPENAI);
    yyjson_val *d = yyjson_obj_get(r, "dialect");
    if (d) {
        const char *v;
        if ((v = yyjson_get_str(yyjson_obj_get(d, "reasoning_field"))))
            s->d.reasoning_field = v;
        if ((v = yyjson_get_str(yyjson_obj_get(d, "think_open"))))
            s->d.think_open = v;
        if ((v = yyjson_get_str(yyjson_obj_get(d, "think_close"))))
            s->d.think_close = v;
        if ((v = yyjson_get_str(yyjson_obj_get(d, "upstream_model"))))
            s->d.upstream_model = v;
        s->d.think_start_inside = yyjson_get_bool(yyjson_obj_get(d, "think_start_inside"));
        if (yyjson_obj_get(d, "stream_usage"))
            s->d.stream_usage = yyjson_get_bool(yyjson_obj_get(d, "stream_usage"));
    }
    yyjson_val *st = yyjson_obj_get(r, "upstream_status");
    s->up_status = st ? (int) yyjson_get_int(st) : 200;
    const char *ct = yyjson_get_str(yyjson_obj_get(r, "upstream_content_type"));
    s->up_ctype = ct ? ct : "application/json";
    s->transport = !tr || !strcmp(tr, "ok") ? QR_OK
                   : !strcmp(tr, "timeout") ? QR_ERR_UPSTREAM_TIMEOUT
                                            : QR_ERR_UPSTREAM;
    yyjson_val *es = yyjson_obj_get(r, "expected_status");
    s->expected_status = es ? (int) yyjson_get_int(es) : 200;
}

/* What the client receives: the same rules as api/infer.c. */
struct sink {
    const struct spec *spec;
    const struct qr_request *req;
    union {
        struct qr_openai_enc oa;
        struct qr_ollama_enc ol;
    } enc;
    struct qr_answer answer;
    struct qr_buf out;
    bool started;
    bool ended;
    int status;
};

static void error_body(const struct sink *k, const struct qr_api_error *e, struct qr_buf *out)
{
    if (k->spec->client == QR_PROTO_OPENAI)
        qr_openai_error_body(e, out);
    else
        qr_ollama_error_line(e->message, out);
}

static void answer_error(struct sink *k, const struct qr_event *ev)
{
    struct qr_api_error e;
    qr_api_error_set(&e, QR_ERR_UPSTREAM, ev->status ? ev->status : 502,
                     ev->code.len ? ev->code.ptr : "upstream_error", "", "%.*s",
                     (int) ev->message.len, ev->message.ptr ? ev->message.ptr : "");
    k->out.len = 0;
    error_body(k, &e, &k->out);
    k->status = e.status;
    k->ended = true;
}

static enum qr_err sink_event(void *arg, const struct qr_event *ev)
{
    struct sink *k = arg;
    assert_false(k->ended);
    bool stream = k->req->stream && k->spec->op != QR_OP_EMBED;
    if (!stream) {
        enum qr_err err = qr_answer_add(&k->answer, ev);
        if (ev->type == QR_EV_ERROR) {
            answer_error(k, ev);
            return QR_OK;
        }
        assert_int_equal(err, QR_OK);
        if (ev->type == QR_EV_DONE) {
            err = k->spec->client == QR_PROTO_OPENAI
                      ? qr_openai_enc_answer(&k->enc.oa, &k->answer, &k->out)
                      : qr_ollama_enc_answer(&k->enc.ol, &k->answer, &k->out);
            assert_int_equal(err, QR_OK);
            k->status = 200;
            k->ended = true;
        }
        return QR_OK;
    }
    if (ev->type == QR_EV_ERROR && !k->started) {
        answer_error(k, ev);
        return QR_OK;
    }
    size_t before = k->out.len;
    enum qr_err err = k->spec->client == QR_PROTO_OPENAI
                          ? qr_openai_enc_event(&k->enc.oa, ev, &k->out)
                          : qr_ollama_enc_event(&k->enc.ol, ev, &k->out);
    assert_int_equal(err, QR_OK);
    if (ev->type != QR_EV_START && ev->type != QR_EV_META)
        k->started = true;
    (void) before;
    if (ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR) {
        k->status = 200;
        k->ended = true;
    }
    return QR_OK;
}

/* Replace synthesized ids with call_SYNTH<n>, numbered by first appearance. */
static char *normalize_ids(const char *in)
{
    char seen[16][30];
    int n_seen = 0;
    size_t len = strlen(in);
    char *out = malloc(len + 1), *w = out;
    for (size_t i = 0; i < len;) {
        if (!strncmp(in + i, "call_", 5) && i + 29 <= len) {
            bool hex = true;
            for (int k = 0; k < 24 && hex; k++)
                hex = isxdigit((unsigned char) in[i + 5 + k]) &&
                      !isupper((unsigned char) in[i + 5 + k]);
            if (hex && !isalnum((unsigned char) in[i + 29])) {
                int id = -1;
                for (int k = 0; k < n_seen; k++) {
                    if (!memcmp(seen[k], in + i, 29))
                        id = k;
                }
                if (id < 0 && n_seen < 16) {
                    memcpy(seen[n_seen], in + i, 29);
                    id = n_seen++;
                }
                w += sprintf(w, "call_SYNTH%d", id + 1);
                i += 29;
                continue;
            }
        }
        *w++ = in[i++];
    }
    *w = '\0';
    return out;
}

/* Run the upstream transcript through decoder -> client encoder, fed in pieces of the given
 * sizes (split_at: two pieces at that offset; step: pieces of that size). */
static char *run_feed(const struct spec *s, const struct qr_request *req, const char *up,
                      size_t up_len, size_t split_at, size_t step, int *status)
{
    struct sink k;
    memset(&k, 0, sizeof(k));
    k.spec = s;
    k.req = req;
    qr_answer_init(&k.answer, 64u << 20);
    qr_buf_init(&k.out, 0);
    struct qr_enc_env env = {.now_ns = 1700000000123456789LL, .resp_id = "chatcmpl-test"};
    if (s->client == QR_PROTO_OPENAI)
        qr_openai_enc_init(&k.enc.oa, req, &env);
    else
        qr_ollama_enc_init(&k.enc.ol, req, &env);
    struct qr_upstream_dec *dec;
    assert_int_equal(qr_upstream_dec_new(&s->d, req, s->up_status, qr_slice_str(s->up_ctype), &dec),
                     QR_OK);
    size_t off = 0;
    while (off < up_len && !k.ended) {
        size_t n = step ? step : (off < split_at ? split_at - off : up_len - off);
        if (n > up_len - off)
            n = up_len - off;
        qr_upstream_dec_feed(dec, up + off, n, sink_event, &k);
        off += n;
    }
    if (!k.ended)
        qr_upstream_dec_finish(dec, s->transport, sink_event, &k);
    qr_upstream_dec_free(dec);
    assert_true(k.ended);
    *status = k.status;
    char *text = normalize_ids(k.out.ptr ? k.out.ptr : "");
    qr_buf_cleanup(&k.out);
    qr_answer_cleanup(&k.answer);
    return text;
}

static void check_upstream_request(const char *dir, const struct qr_buf *body)
{
    char *want = read_file(dir, "upstream_request.json", NULL);
    if (!want && getenv("QR_UPDATE_GOLDEN")) {
        char path[2100];
        snprintf(path, sizeof(path), "%s/upstream_request.json", dir);
        FILE *f = fopen(path, "wb");
        fwrite(body->ptr, 1, body->len, f);
        fclose(f);
        return;
    }
    if (!want)
        fail_msg("%s: no upstream_request.json (QR_UPDATE_GOLDEN=1 writes it)", dir);
    yyjson_doc *a = yyjson_read(want, strlen(want), 0);
    yyjson_doc *b = yyjson_read(body->ptr, body->len, 0);
    assert_non_null(a);
    assert_non_null(b);
    if (!yyjson_equals(yyjson_doc_get_root(a), yyjson_doc_get_root(b)))
        fail_msg("%s: upstream request differs\nwant: %s\ngot:  %.*s", dir, want, (int) body->len,
                 body->ptr);
    yyjson_doc_free(a);
    yyjson_doc_free(b);
    free(want);
}

static void run_case(const char *dir)
{
    struct spec s;
    memset(&s, 0, sizeof(s));
    load_spec(dir, &s);
    size_t req_len, up_len;
    char *req_text = read_file(dir, "request.json", &req_len);
    char *up = read_file(dir, "upstream.txt", &up_len);
    char *want = read_file(dir, "expected.txt", NULL);
    assert_non_null(req_text);
    struct qr_arena arena;
    qr_arena_init(&arena, 64u << 20);
    struct qr_request req;
    struct qr_api_error err = {0};
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    struct qr_slice body = {req_text, req_len};
    enum qr_err rc = s.op == QR_OP_RERANK ? qr_rerank_decode(body, &lim, &arena, &req, &err)
                     : s.client == QR_PROTO_OPENAI
                         ? qr_openai_decode(s.op, body, &lim, &arena, &req, &err)
                         : qr_ollama_decode(s.op, s.legacy, body, &lim, &arena, &req, &err);
    char *got;
    int status;
    if (rc) {
        struct qr_buf b;
        qr_buf_init(&b, 0);
        if (s.client == QR_PROTO_OPENAI)
            qr_openai_error_body(&err, &b);
        else
            qr_ollama_error_line(err.message, &b);
        got = strdup(b.ptr ? b.ptr : "");
        status = err.status;
        qr_buf_cleanup(&b);
    } else {
        struct qr_buf enc;
        qr_buf_init(&enc, 0);
        const char *path = NULL;
        rc = qr_upstream_encode(&s.d, &req, &enc, &path, &err);
        if (rc) {
            struct qr_buf b;
            qr_buf_init(&b, 0);
            if (s.client == QR_PROTO_OPENAI)
                qr_openai_error_body(&err, &b);
            else
                qr_ollama_error_line(err.message, &b);
            got = strdup(b.ptr ? b.ptr : "");
            status = err.status;
            qr_buf_cleanup(&b);
        } else {
            check_upstream_request(dir, &enc);
            assert_non_null(up);
            got = run_feed(&s, &req, up, up_len, 0, 0, &status);
            /* every split point and byte-by-byte must agree with the whole feed */
            for (size_t at = 1; at < up_len; at++) {
                int st2;
                char *other = run_feed(&s, &req, up, up_len, at, 0, &st2);
                if (strcmp(other, got) || st2 != status)
                    fail_msg("%s: output differs when the transcript is split at byte %zu\n"
                             "whole: %s\nsplit: %s",
                             dir, at, got, other);
                free(other);
            }
            int st3;
            char *bytes = run_feed(&s, &req, up, up_len, 0, 1, &st3);
            if (strcmp(bytes, got) || st3 != status)
                fail_msg("%s: output differs when fed byte by byte", dir);
            free(bytes);
        }
        qr_buf_cleanup(&enc);
    }
    if (getenv("QR_UPDATE_GOLDEN") && (!want || strcmp(want, got))) {
        char path[2100];
        snprintf(path, sizeof(path), "%s/expected.txt", dir);
        FILE *f = fopen(path, "wb");
        fputs(got, f);
        fclose(f);
        printf("updated %s (status %d)\n", path, status);
    } else {
        if (!want)
            fail_msg("%s: no expected.txt (QR_UPDATE_GOLDEN=1 writes it)", dir);
        if (strcmp(want, got))
            fail_msg("%s: client output differs\nwant: %s\ngot:  %s", dir, want, got);
        if (status != s.expected_status)
            fail_msg("%s: status %d, expected %d", dir, status, s.expected_status);
    }
    free(got);
    free(want);
    free(up);
    free(req_text);
    qr_arena_cleanup(&arena);
    yyjson_doc_free(s.doc);
}

static void test_all_cases(void **state)
{
    DIR *d = opendir(CASES);
    assert_non_null(d);
    struct dirent *e;
    int n = 0;
    char *names[512];
    while ((e = readdir(d)) && n < 512) {
        if (e->d_name[0] != '.' && e->d_type == DT_DIR)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s/%s", CASES, names[i]);
        run_case(dir);
        free(names[i]);
    }
    printf("contract cases: %d\n", n);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_cases)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
