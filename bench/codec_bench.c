/* Translation cost of the canonical contract, measured in-process:
 *   1. per chunk: an upstream OpenAI SSE content chunk (llama-server shape) decoded into events
 *      and encoded for the client as OpenAI SSE and as Ollama NDJSON;
 *   2. per request: decoding a chat request of ~2k tokens, ~128k tokens and 1 MiB.
 * Every figure is printed next to a floor measured in the same run on the same bytes: parsing the
 * JSON with yyjson and writing an equivalent JSON object (the least any JSON translator does),
 * as a ratio. Usage: codec_bench [--chunks N] [--json FILE]. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yyjson.h>

#include "api/codec.h"
#include "api/ollama_codec.h"
#include "api/openai_codec.h"
#include "backend/codec.h"
#include "contract/event.h"
#include "core/arena.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* ---- per-chunk translation ---- */

struct sink {
    enum qr_protocol proto;
    union {
        struct qr_openai_enc oa;
        struct qr_ollama_enc ol;
    } enc;
    struct qr_buf out;
    size_t bytes;
};

static enum qr_err sink_event(void *arg, const struct qr_event *ev)
{
    struct sink *k = arg;
    enum qr_err err = k->proto == QR_PROTO_OPENAI ? qr_openai_enc_event(&k->enc.oa, ev, &k->out)
                                                  : qr_ollama_enc_event(&k->enc.ol, ev, &k->out);
    k->bytes += k->out.len;
    k->out.len = 0; /* as if written to the socket */
    return err;
}

static char *make_stream(size_t chunks, size_t *out_len, size_t *chunk_len)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    const char *one = "data: {\"id\":\"chatcmpl-up1\",\"object\":\"chat.completion.chunk\","
                      "\"created\":1700000000,\"model\":\"qwen3:0.6b\",\"choices\":[{\"index\":0,"
                      "\"delta\":{\"content\":\" Grüße\"},\"finish_reason\":null}]}\n\n";
    *chunk_len = strlen(one);
    qr_buf_puts(&b, "data: {\"id\":\"chatcmpl-up1\",\"object\":\"chat.completion.chunk\","
                    "\"created\":1700000000,\"model\":\"qwen3:0.6b\",\"choices\":[{\"index\":0,"
                    "\"delta\":{\"role\":\"assistant\",\"content\":null},"
                    "\"finish_reason\":null}]}\n\n");
    for (size_t i = 0; i < chunks; i++)
        qr_buf_puts(&b, one);
    qr_buf_puts(&b, "data: {\"id\":\"chatcmpl-up1\",\"object\":\"chat.completion.chunk\","
                    "\"created\":1700000000,\"model\":\"qwen3:0.6b\",\"choices\":[{\"index\":0,"
                    "\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    *out_len = b.len;
    return qr_buf_take(&b, NULL);
}

static double translate(enum qr_protocol proto, const struct qr_request *req, const char *stream,
                        size_t len, size_t feed, size_t *bytes_out)
{
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    struct sink k;
    memset(&k, 0, sizeof(k));
    k.proto = proto;
    qr_buf_init(&k.out, 0);
    struct qr_enc_env env = {.now_ns = 1700000000000000000LL, .resp_id = "chatcmpl-bench"};
    if (proto == QR_PROTO_OPENAI)
        qr_openai_enc_init(&k.enc.oa, req, &env);
    else
        qr_ollama_enc_init(&k.enc.ol, req, &env);
    struct qr_upstream_dec *dec;
    if (qr_upstream_dec_new(&d, req, 200, QR_SLICE_LIT("text/event-stream"), &dec))
        abort();
    double t0 = now_s();
    for (size_t off = 0; off < len; off += feed)
        qr_upstream_dec_feed(dec, stream + off, off + feed > len ? len - off : feed, sink_event,
                             &k);
    qr_upstream_dec_finish(dec, QR_OK, sink_event, &k);
    double t = now_s() - t0;
    qr_upstream_dec_free(dec);
    if (proto == QR_PROTO_OLLAMA)
        qr_ollama_enc_cleanup(&k.enc.ol);
    qr_buf_cleanup(&k.out);
    *bytes_out = k.bytes;
    return t;
}

/* The floor: yyjson parse of each chunk's JSON + one yyjson write of a chunk-sized object. */
static double json_floor(const char *stream, size_t len)
{
    double t0 = now_s();
    const char *p = stream, *end = stream + len;
    size_t sink = 0;
    while (p < end) {
        const char *nl = memmem(p, (size_t) (end - p), "\n\n", 2);
        if (!nl)
            break;
        if (!strncmp(p, "data: {", 7)) {
            yyjson_doc *doc = yyjson_read(p + 6, (size_t) (nl - p - 6), 0);
            yyjson_mut_doc *m = yyjson_doc_mut_copy(doc, NULL);
            size_t n = 0;
            char *w = yyjson_mut_write(m, 0, &n);
            sink += n;
            free(w);
            yyjson_mut_doc_free(m);
            yyjson_doc_free(doc);
        }
        p = nl + 2;
    }
    double t = now_s() - t0;
    if (sink == 0)
        abort();
    return t;
}

/* ---- request decoding ---- */

static char *make_request(size_t target_bytes, size_t *out_len)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    qr_buf_puts(&b, "{\"model\":\"qwen3:0.6b\",\"stream\":true,\"messages\":[{\"role\":\"system\","
                    "\"content\":\"You are a helpful assistant.\"}");
    static const char para[] =
        "Die Straße führt über den Fluß nach München; dort gibt es Grüße und 😀 für alle. "
        "The quick brown fox jumps over the lazy dog while tokens keep flowing in. ";
    int turn = 0;
    while (b.len < target_bytes) {
        qr_buf_appendf(&b, ",{\"role\":\"%s\",\"content\":\"", turn++ % 2 ? "assistant" : "user");
        for (int i = 0; i < 8 && b.len < target_bytes; i++)
            qr_buf_puts(&b, para);
        qr_buf_puts(&b, "\"}");
    }
    qr_buf_puts(&b, "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":"
                    "\"string\"}}}}}],\"temperature\":0.7}");
    *out_len = b.len;
    return qr_buf_take(&b, NULL);
}

static double decode_once(enum qr_protocol proto, const char *body, size_t len)
{
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_request req;
    struct qr_api_error err;
    struct qr_decode_limits lim;
    qr_decode_limits_default(&lim);
    struct qr_slice s = {body, len};
    double t0 = now_s();
    enum qr_err rc = proto == QR_PROTO_OPENAI
                         ? qr_openai_decode(QR_OP_CHAT, s, &lim, &a, &req, &err)
                         : qr_ollama_decode(QR_OP_CHAT, false, s, &lim, &a, &req, &err);
    double t = now_s() - t0;
    if (rc) {
        fprintf(stderr, "decode failed: %s\n", err.message);
        exit(1);
    }
    qr_arena_cleanup(&a);
    return t;
}

static double parse_once(const char *body, size_t len)
{
    double t0 = now_s();
    yyjson_doc *doc = yyjson_read(body, len, 0);
    double t = now_s() - t0;
    yyjson_doc_free(doc);
    return t;
}

static double best_of(double (*fn)(enum qr_protocol, const char *, size_t), enum qr_protocol p,
                      const char *body, size_t len, int reps)
{
    double best = 1e9;
    for (int i = 0; i < reps; i++) {
        double t = fn(p, body, len);
        if (t < best)
            best = t;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t chunks = 20000;
    const char *json_out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chunks") && i + 1 < argc)
            chunks = strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_out = argv[++i];
    }
    /* a chat request to translate for */
    size_t rlen;
    char *rbody = make_request(200, &rlen);
    struct qr_arena a;
    qr_arena_init(&a, 0);
    struct qr_request req;
    struct qr_api_error e;
    struct qr_slice rs = {rbody, rlen};
    if (qr_openai_decode(QR_OP_CHAT, rs, NULL, &a, &req, &e)) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    size_t len, clen, bytes_oa = 0, bytes_ol = 0;
    char *stream = make_stream(chunks, &len, &clen);
    double floor_best = 1e9, oa_best = 1e9, ol_best = 1e9, oa_small = 1e9;
    for (int round = 0; round < 5; round++) {
        double f = json_floor(stream, len);
        double o = translate(QR_PROTO_OPENAI, &req, stream, len, 16384, &bytes_oa);
        req.protocol = QR_PROTO_OLLAMA;
        double l = translate(QR_PROTO_OLLAMA, &req, stream, len, 16384, &bytes_ol);
        req.protocol = QR_PROTO_OPENAI;
        double s = translate(QR_PROTO_OPENAI, &req, stream, len, clen, &bytes_oa);
        floor_best = f < floor_best ? f : floor_best;
        oa_best = o < oa_best ? o : oa_best;
        ol_best = l < ol_best ? l : ol_best;
        oa_small = s < oa_small ? s : oa_small;
    }
    double per_floor = floor_best / (double) chunks * 1e6;
    double per_oa = oa_best / (double) chunks * 1e6;
    double per_ol = ol_best / (double) chunks * 1e6;
    double per_oa_small = oa_small / (double) chunks * 1e6;
    printf("per-chunk translation, %zu chunks of %zu bytes, best of 5 (us per chunk)\n", chunks,
           clen);
    printf("  floor: yyjson parse + write      %7.3f\n", per_floor);
    printf("  SSE -> OpenAI SSE  (16 KiB reads) %7.3f  ratio %.2f\n", per_oa, per_oa / per_floor);
    printf("  SSE -> OpenAI SSE  (1 chunk/read) %7.3f  ratio %.2f\n", per_oa_small,
           per_oa_small / per_floor);
    printf("  SSE -> Ollama NDJSON (16 KiB)     %7.3f  ratio %.2f\n", per_ol, per_ol / per_floor);

    static const struct {
        const char *name;
        size_t bytes;
    } sizes[] = {
        {"chat-2k-tokens", 8 * 1024}, {"chat-128k-tokens", 512 * 1024}, {"body-1MiB", 1024 * 1024}};
    double dec[3][3];
    printf("request decode, best of 20 (ms)\n");
    for (int i = 0; i < 3; i++) {
        size_t n;
        char *body = make_request(sizes[i].bytes, &n);
        double p = 1e9;
        for (int r = 0; r < 20; r++) {
            double t = parse_once(body, n);
            p = t < p ? t : p;
        }
        double o = best_of(decode_once, QR_PROTO_OPENAI, body, n, 20);
        double l = best_of(decode_once, QR_PROTO_OLLAMA, body, n, 20);
        dec[i][0] = p * 1e3;
        dec[i][1] = o * 1e3;
        dec[i][2] = l * 1e3;
        printf("  %-17s %8zu bytes  yyjson parse %7.3f  openai %7.3f (x%.2f)  ollama %7.3f "
               "(x%.2f)\n",
               sizes[i].name, n, dec[i][0], dec[i][1], dec[i][1] / dec[i][0], dec[i][2],
               dec[i][2] / dec[i][0]);
        free(body);
    }
    if (json_out) {
        FILE *f = fopen(json_out, "w");
        if (f) {
            fprintf(f,
                    "{\"chunks\":%zu,\"chunk_bytes\":%zu,\"floor_us\":%.4f,\"openai_us\":%.4f,"
                    "\"openai_one_chunk_reads_us\":%.4f,\"ollama_us\":%.4f,\"decode_ms\":{",
                    chunks, clen, per_floor, per_oa, per_oa_small, per_ol);
            for (int i = 0; i < 3; i++)
                fprintf(f, "%s\"%s\":{\"yyjson\":%.4f,\"openai\":%.4f,\"ollama\":%.4f}",
                        i ? "," : "", sizes[i].name, dec[i][0], dec[i][1], dec[i][2]);
            fprintf(f, "}}\n");
            fclose(f);
        }
    }
    qr_arena_cleanup(&a);
    free(stream);
    free(rbody);
    return 0;
}
