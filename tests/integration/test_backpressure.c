/* Back-pressure end to end (docs/RELIABILITY.md "Back-pressure and the request queue"): the real
 * daemon in front of the replay server. A backend admits at most max_queue inference requests;
 * one more is answered at once with 503 + Retry-After in the route's error shape without
 * reaching the engine, and the count returns to zero whichever way the admitted requests end
 * (done, client gone, engine error). A client that stops reading a 32 MiB stream does not make
 * the daemon buffer it: the upstream is paused, and the whole answer still arrives. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

#define BIG_LINES  2048u  /* content lines of the large answer */
#define BIG_FILLER 16379u /* 'Q' bytes per line after a 5-digit index: 16 KiB of content */

static struct qr_child replay;
static char cases_dir[256];

static const char *const json_hdrs[] = {"Content-Type: application/json", NULL};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void copy_case(const char *name)
{
    char src[512], dst[512];
    snprintf(src, sizeof(src), "%s/replay-backpressure/%s", QR_TEST_CASES, name);
    snprintf(dst, sizeof(dst), "%s/%s", cases_dir, name);
    size_t len = 0;
    char *text = qr_t_read_file(src, &len);
    assert_non_null(text);
    FILE *f = fopen(dst, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    free(text);
}

/* The large answer: BIG_LINES content lines of 16 KiB ("%05u" index + 'Q' filler), no delays,
 * then the done line; generated here rather than committed (32 MiB). */
static void write_big_case(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/zz-big.json", cases_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    char *filler = malloc(BIG_FILLER + 1);
    assert_non_null(filler);
    memset(filler, 'Q', BIG_FILLER);
    filler[BIG_FILLER] = '\0';
    fprintf(f,
            "{\"name\":\"backpressure-big\",\"match\":{\"method\":\"POST\",\"path\":\"/api/chat\","
            "\"body_contains\":\"big-me\"},\"response\":{\"status\":200,\"headers\":"
            "{\"Content-Type\":\"application/x-ndjson\"},\"framing\":\"chunked\",\"chunks\":[");
    for (unsigned i = 0; i < BIG_LINES; i++)
        fprintf(f,
                "{\"ndjson\":{\"model\":\"m\",\"created_at\":\"2026-01-01T00:00:00.000000000Z\","
                "\"message\":{\"role\":\"assistant\",\"content\":\"%05u%s\"},\"done\":false}},",
                i, filler);
    fprintf(f,
            "{\"ndjson\":{\"model\":\"m\",\"created_at\":\"2026-01-01T00:00:01.000000000Z\","
            "\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,"
            "\"done_reason\":\"stop\",\"eval_count\":%u}}]}}\n",
            BIG_LINES);
    free(filler);
    assert_int_equal(fclose(f), 0);
}

/* The same answer from an OpenAI-compatible engine (backend=openai): SSE chunks, then [DONE]. */
static void write_big_sse_case(void)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/zz-big-sse.json", cases_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    char *filler = malloc(BIG_FILLER + 1);
    assert_non_null(filler);
    memset(filler, 'Q', BIG_FILLER);
    filler[BIG_FILLER] = '\0';
    fprintf(f, "{\"name\":\"backpressure-big-sse\",\"match\":{\"method\":\"POST\",\"path\":"
               "\"/v1/chat/completions\",\"body_contains\":\"big-me\"},\"response\":{\"status\":"
               "200,\"headers\":{\"Content-Type\":\"text/event-stream\"},\"framing\":\"chunked\","
               "\"chunks\":[");
    for (unsigned i = 0; i < BIG_LINES; i++)
        fprintf(f,
                "{\"sse\":{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
                "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%05u%s\"},"
                "\"finish_reason\":null}]}},",
                i, filler);
    fprintf(f, "{\"sse\":{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,"
               "\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
               "\"stop\"}]}},{\"sse\":\"[DONE]\"}]}}\n");
    free(filler);
    assert_int_equal(fclose(f), 0);
}

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    snprintf(cases_dir, sizeof(cases_dir), "/tmp/qr-backpressure-XXXXXX");
    assert_non_null(mkdtemp(cases_dir));
    const char *names[] = {"show.json",       "chat-hold.json", "chat-forever.json",
                           "chat-close.json", "chat-fail.json", "chat-fast.json"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        copy_case(names[i]);
    write_big_case();
    write_big_sse_case();
    qr_t_replay_start_dir(&replay, cases_dir);
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    qr_t_stop(&replay, SIGTERM, 5000);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cases_dir);
    assert_int_equal(system(cmd), 0);
    curl_global_cleanup();
    return 0;
}

/* --- helpers --- */

/* GET /v1/backends: the first backend's queue.depth (and max), or -1 when absent. */
static long queue_depth(uint16_t port, long *max)
{
    struct qr_t_resp r;
    qr_t_request("GET", port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *b0 = yyjson_arr_get_first(yyjson_obj_get(yyjson_doc_get_root(doc), "backends"));
    yyjson_val *q = yyjson_obj_get(b0, "queue");
    long depth = yyjson_is_uint(yyjson_obj_get(q, "depth"))
                     ? (long) yyjson_get_uint(yyjson_obj_get(q, "depth"))
                     : -1;
    if (max)
        *max = (long) yyjson_get_uint(yyjson_obj_get(q, "max"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    return depth;
}

/* Poll until the depth is want (bounded); returns the last value seen. */
static long wait_depth(uint16_t port, long want, int timeout_ms)
{
    double deadline = now_ms() + timeout_ms;
    long d;
    while ((d = queue_depth(port, NULL)) != want && now_ms() < deadline)
        usleep(20000);
    return d;
}

/* Requests the replay server saw for /api/chat since the last reset. */
static size_t upstream_chats(void)
{
    yyjson_doc *doc = qr_t_replay_requests(replay.port);
    assert_non_null(doc);
    size_t n = 0, i, max;
    yyjson_val *it;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, max, it)
    {
        const char *p = yyjson_get_str(yyjson_obj_get(it, "path"));
        n += p && !strcmp(p, "/api/chat");
    }
    yyjson_doc_free(doc);
    return n;
}

struct bg {
    uint16_t port;
    const char *target;
    const char *body;
    int raw_ms; /* > 0: a raw client that reads for this long, then goes away */
    struct qr_t_resp r;
    char *raw;
};

static void *bg_thread(void *arg)
{
    struct bg *b = arg;
    if (b->raw_ms > 0) {
        char req[1024];
        int n = snprintf(req, sizeof(req),
                         "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: %zu\r\n\r\n%s",
                         b->target, strlen(b->body), b->body);
        b->raw = qr_t_raw(b->port, req, (size_t) n, b->raw_ms);
    } else {
        qr_t_request("POST", b->port, b->target, json_hdrs, b->body, strlen(b->body), &b->r);
    }
    return NULL;
}

static const char *chat_body(const char *text)
{
    static char buf[4][256];
    static unsigned k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof(buf[0]),
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", text);
    return b;
}

static const char *openai_body(const char *text)
{
    static char buf[256];
    snprintf(buf, sizeof(buf),
             "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
             "\"%s\"}]}",
             text);
    return buf;
}

/* A 503 queue_full answer: Retry-After: 1, in time, and the route's exact error shape. */
static void assert_busy(const struct qr_t_resp *r, bool openai, const char *what)
{
    assert_int_equal(r->status, 503);
    char *ra = qr_t_header(r, "Retry-After");
    assert_non_null(ra);
    assert_string_equal(ra, "1");
    free(ra);
    printf("# 503 queue_full (%s) answered in %.3f ms\n", what, r->total_ms);
    assert_true(r->total_ms < 50.0);
    yyjson_doc *doc = yyjson_read(r->body, r->body_len, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc), *e = yyjson_obj_get(root, "error");
    assert_int_equal(yyjson_obj_size(root), 1);
    if (openai) {
        assert_true(yyjson_is_obj(e));
        assert_non_null(strstr(yyjson_get_str(yyjson_obj_get(e, "message")), "server busy"));
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "type")), "server_error");
        assert_string_equal(yyjson_get_str(yyjson_obj_get(e, "code")), "queue_full");
    } else {
        assert_true(yyjson_is_str(e)); /* Ollama's {"error":"..."} */
        assert_true(!strncmp(yyjson_get_str(e), "server busy, please try again", 29));
    }
    yyjson_doc_free(doc);
}

static void fast_chat_ok(uint16_t port)
{
    struct qr_t_resp r;
    const char *body = chat_body("again");
    qr_t_request("POST", port, "/api/chat", json_hdrs, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "fast"));
    assert_non_null(strstr(r.body, "\"done\":true"));
    qr_t_resp_free(&r);
}

/* --- a. the bound, its answer and its release --- */

/* max_queue=2: two requests held at the engine, the third refused at once on both APIs without
 * reaching the engine; when the held ones finish, requests are admitted again. */
static void test_queue_full_answers_503_fast(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_MAX_QUEUE=2",
                                      "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=10s", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    long max = 0;
    assert_int_equal(queue_depth(d.port, &max), 0);
    assert_int_equal(max, 2);
    fast_chat_ok(d.port); /* warm: the model's description is cached */
    assert_true(qr_t_replay_reset(replay.port));

    struct bg held[2] = {
        {.port = d.port, .target = "/api/chat", .body = chat_body("hold-me")},
        {.port = d.port, .target = "/v1/chat/completions", .body = openai_body("hold-me")}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, bg_thread, &held[i]);
    assert_int_equal(wait_depth(d.port, 2, 3000), 2);

    struct qr_t_resp r;
    const char *third = chat_body("third");
    qr_t_request("POST", d.port, "/api/chat", json_hdrs, third, strlen(third), &r);
    assert_busy(&r, false, "/api/chat");
    qr_t_resp_free(&r);
    const char *oa = openai_body("third");
    qr_t_request("POST", d.port, "/v1/chat/completions", json_hdrs, oa, strlen(oa), &r);
    assert_busy(&r, true, "/v1/chat/completions");
    qr_t_resp_free(&r);
    const char *emb = "{\"model\":\"m\",\"input\":\"third\"}";
    qr_t_request("POST", d.port, "/v1/embeddings", json_hdrs, emb, strlen(emb), &r);
    assert_busy(&r, true, "/v1/embeddings");
    qr_t_resp_free(&r);
    assert_int_equal(upstream_chats(), 2); /* the refused ones never reached the engine */
    assert_int_equal(queue_depth(d.port, NULL), 2);

    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(held[i].r.status, 200);
        assert_non_null(strstr(held[i].r.body, "held"));
        qr_t_resp_free(&held[i].r);
    }
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);
    fast_chat_ok(d.port);
    assert_int_equal(queue_depth(d.port, NULL), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* The count returns to zero when clients go away mid-stream, and after engine failures
 * (a cut stream, a 500 answer). */
static void test_queue_released_on_disconnect_and_errors(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_MAX_QUEUE=2",
                                      "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=10s", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    fast_chat_ok(d.port);

    struct bg gone[2] = {
        {.port = d.port, .target = "/api/chat", .body = chat_body("forever-me"), .raw_ms = 800},
        {.port = d.port,
         .target = "/v1/chat/completions",
         .body = openai_body("forever-me"),
         .raw_ms = 800}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, bg_thread, &gone[i]);
    assert_int_equal(wait_depth(d.port, 2, 3000), 2);
    struct qr_t_resp r;
    const char *third = chat_body("third");
    qr_t_request("POST", d.port, "/api/chat", json_hdrs, third, strlen(third), &r);
    assert_busy(&r, false, "/api/chat, clients streaming");
    qr_t_resp_free(&r);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_non_null(strstr(gone[i].raw, "waiting")); /* it was streaming when it left */
        free(gone[i].raw);
    }
    assert_int_equal(wait_depth(d.port, 0, 3000), 0);
    fast_chat_ok(d.port);

    /* engine failures: a stream cut mid-body, a 500 */
    const char *cut = chat_body("close-me");
    qr_t_request("POST", d.port, "/api/chat", json_hdrs, cut, strlen(cut), &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "{\"error\":"));
    qr_t_resp_free(&r);
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);
    const char *fail = chat_body("fail-me");
    qr_t_request("POST", d.port, "/api/chat", json_hdrs, fail, strlen(fail), &r);
    assert_true(r.status >= 500);
    qr_t_resp_free(&r);
    const char *fail_oa = openai_body("fail-me");
    qr_t_request("POST", d.port, "/v1/chat/completions", json_hdrs, fail_oa, strlen(fail_oa), &r);
    assert_true(r.status >= 500);
    qr_t_resp_free(&r);
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);
    /* both slots are free again: two held at once are admitted */
    struct bg held[2] = {{.port = d.port, .target = "/api/chat", .body = chat_body("hold-me")},
                         {.port = d.port, .target = "/api/chat", .body = chat_body("hold-me")}};
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, bg_thread, &held[i]);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(held[i].r.status, 200);
        qr_t_resp_free(&held[i].r);
    }
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* The Ollama passthrough (ollama_passthrough=true) is bounded too, in Ollama's own shape; and
 * max_requests bounds all backends together. */
static void test_passthrough_and_global_bound(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_MAX_QUEUE=1",
                                      "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true",
                                      "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=10s", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    assert_true(qr_t_replay_reset(replay.port));
    struct bg held = {.port = d.port, .target = "/api/chat", .body = chat_body("hold-me")};
    pthread_t t;
    pthread_create(&t, NULL, bg_thread, &held);
    assert_int_equal(wait_depth(d.port, 1, 3000), 1);
    struct qr_t_resp r;
    const char *second = chat_body("second");
    qr_t_request("POST", d.port, "/api/chat", json_hdrs, second, strlen(second), &r);
    assert_busy(&r, false, "/api/chat passthrough");
    qr_t_resp_free(&r);
    const char *gen = "{\"model\":\"m\",\"prompt\":\"second\"}";
    qr_t_request("POST", d.port, "/api/generate", json_hdrs, gen, strlen(gen), &r);
    assert_busy(&r, false, "/api/generate passthrough");
    qr_t_resp_free(&r);
    assert_int_equal(upstream_chats(), 1);
    pthread_join(t, NULL);
    assert_int_equal(held.r.status, 200);
    assert_non_null(strstr(held.r.body, "held"));
    qr_t_resp_free(&held.r);
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);

    /* a client that goes away mid-stream on the passthrough releases its place */
    struct bg gone = {
        .port = d.port, .target = "/api/chat", .body = chat_body("forever-me"), .raw_ms = 500};
    pthread_create(&t, NULL, bg_thread, &gone);
    assert_int_equal(wait_depth(d.port, 1, 3000), 1);
    pthread_join(t, NULL);
    assert_non_null(strstr(gone.raw, "waiting"));
    free(gone.raw);
    assert_int_equal(wait_depth(d.port, 0, 3000), 0);
    fast_chat_ok(d.port);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    /* max_requests=1 with a roomy max_queue: the second request is refused naming the bound */
    static const char *const env2[] = {"QUANTUM_RUNTIME_MAX_QUEUE=8",
                                       "QUANTUM_RUNTIME_MAX_REQUESTS=1",
                                       "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=10s", NULL};
    qr_t_daemon_start(&d, replay.port, env2);
    held = (struct bg){.port = d.port, .target = "/api/chat", .body = chat_body("hold-me")};
    pthread_create(&t, NULL, bg_thread, &held);
    assert_int_equal(wait_depth(d.port, 1, 3000), 1);
    const char *oa = openai_body("second");
    qr_t_request("POST", d.port, "/v1/chat/completions", json_hdrs, oa, strlen(oa), &r);
    assert_busy(&r, true, "/v1/chat/completions, max_requests");
    assert_non_null(strstr(r.body, "max_requests"));
    qr_t_resp_free(&r);
    pthread_join(t, NULL);
    assert_int_equal(held.r.status, 200);
    qr_t_resp_free(&held.r);
    assert_int_equal(wait_depth(d.port, 0, 2000), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* --- b. a slow reader --- */

static long rss_kib(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
    FILE *f = fopen(path, "r"); /* /proc files have no size: read, not stat */
    assert_non_null(f);
    char line[256];
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    assert_true(kib > 0);
    return kib;
}

/* Undo chunked framing in place; true when the terminating 0-chunk was seen. */
static bool dechunk(char *p, size_t len, size_t *out_len)
{
    size_t r = 0, w = 0;
    for (;;) {
        char *end;
        unsigned long n = strtoul(p + r, &end, 16);
        char *crlf = memmem(p + r, len - r, "\r\n", 2);
        if (!crlf || end > crlf)
            return false;
        r = (size_t) (crlf - p) + 2;
        if (n == 0) {
            *out_len = w;
            return true;
        }
        if (r + n + 2 > len)
            return false;
        memmove(p + w, p + r, n);
        w += n;
        r += n + 2;
    }
}

/* One request whose answer is the 32 MiB stream, over a raw socket that reads nothing for 2 s,
 * then slowly, then at full speed. The daemon's resident memory may not grow by anything near
 * the answer while nobody reads, and every content byte arrives, the last line included. */
static void slow_reader(const struct qr_child *d, const char *target, const char *body,
                        const char *last, const char *what)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    int small = 64 * 1024; /* keep the kernel's share small: what is measured is the daemon's */
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(d->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    long base = rss_kib(d->pid);
    char req[1024];
    int n = snprintf(req, sizeof(req),
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
                     target, strlen(body), body);
    assert_int_equal(write(fd, req, (size_t) n), n);
    long peak = base;
    double t0 = now_ms();
    while (now_ms() - t0 < 2000) { /* reads nothing */
        long v = rss_kib(d->pid);
        peak = v > peak ? v : peak;
        usleep(50000);
    }
    size_t cap = 48u << 20, got = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    double deadline = now_ms() + 60000;
    unsigned reads = 0;
    while (now_ms() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 1000) <= 0)
            continue;
        if (got + 65536 > cap)
            break;
        ssize_t r = read(fd, buf + got, 65536);
        if (r <= 0)
            break;
        got += (size_t) r;
        if (++reads < 256 && reads % 8 == 0)
            usleep(2000); /* slowly for the first 16 MiB or so */
    }
    close(fd);
    long growth = peak - base;
    printf("# slow reader %s: VmRSS %ld KiB before, peak %ld KiB while not reading (+%ld KiB); "
           "%zu bytes received in %.0f ms\n",
           what, base, peak, growth, got, now_ms() - t0);
    assert_true(growth < 8 * 1024); /* the answer is 32 MiB */

    char *head_end = memmem(buf, got, "\r\n\r\n", 4);
    assert_non_null(head_end);
    assert_true(!strncmp(buf, "HTTP/1.1 200", 12));
    size_t hlen = (size_t) (head_end - buf) + 4, blen = 0;
    assert_true(dechunk(buf + hlen, got - hlen, &blen));
    size_t q = 0;
    for (size_t i = 0; i < blen; i++)
        q += buf[hlen + i] == 'Q';
    assert_int_equal(q, (size_t) BIG_LINES * BIG_FILLER); /* every content byte */
    char idx[8];
    snprintf(idx, sizeof(idx), "%05u", BIG_LINES - 1);
    assert_non_null(memmem(buf + hlen, blen, idx, 5));
    assert_non_null(memmem(buf + hlen + blen - (blen > 512 ? 512 : blen), blen > 512 ? 512 : blen,
                           last, strlen(last)));
    free(buf);
}

static void test_slow_reader_does_not_grow_memory(void **state)
{
    (void) state;
    /* Under AddressSanitizer freed memory sits in a quarantine (256 MiB by default) and counts as
     * resident: the daemons of this test keep none, so VmRSS shows what is really held. */
    const char *old = getenv("ASAN_OPTIONS");
    char *saved = old ? strdup(old) : NULL;
    char opts[1024];
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=0", saved ? saved : "",
             saved && saved[0] ? ":" : "");
    assert_int_equal(setenv("ASAN_OPTIONS", opts, 1), 0);
    static const char *const env[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=60s", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    fast_chat_ok(d.port);
    slow_reader(&d, "/api/chat", chat_body("big-me"), "\"done\":true", "ollama /api/chat");
    slow_reader(&d, "/v1/chat/completions", openai_body("big-me"), "data: [DONE]",
                "openai /v1/chat/completions");
    assert_int_equal(queue_depth(d.port, NULL), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    static const char *const env2[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=60s",
                                       "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH=true", NULL};
    qr_t_daemon_start(&d, replay.port, env2);
    fast_chat_ok(d.port);
    slow_reader(&d, "/api/chat", chat_body("big-me"), "\"done\":true", "ollama passthrough");
    assert_int_equal(queue_depth(d.port, NULL), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    /* the libcurl upstream client pauses the same way as the native one */
    static const char *const env3[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=60s",
                                       "QUANTUM_RUNTIME_HTTP_CLIENT=curl", NULL};
    qr_t_daemon_start(&d, replay.port, env3);
    fast_chat_ok(d.port);
    slow_reader(&d, "/api/chat", chat_body("big-me"), "\"done\":true", "ollama, curl client");
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    /* an OpenAI-compatible engine (the OpenAI adapter), read by both client APIs */
    char url[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", replay.port);
    const char *const env4[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=60s",
                                "QUANTUM_RUNTIME_BACKEND=openai",
                                "QUANTUM_RUNTIME_OPENAI_DIALECT=generic", url, NULL};
    qr_t_daemon_start(&d, replay.port, env4);
    slow_reader(&d, "/v1/chat/completions", openai_body("big-me"), "data: [DONE]",
                "openai adapter, /v1/chat/completions");
    slow_reader(&d, "/api/chat", chat_body("big-me"), "\"done\":true", "openai adapter, /api/chat");
    assert_int_equal(queue_depth(d.port, NULL), 0);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    if (saved)
        setenv("ASAN_OPTIONS", saved, 1);
    else
        unsetenv("ASAN_OPTIONS");
    free(saved);
}

/* --- configuration --- */

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* max_queue is validated, shown in /v1/backends, reloaded on SIGHUP, and a backends entry's
 * own max_queue overrides it for that backend. */
static void test_max_queue_config(void **state)
{
    (void) state;
    static const char *const bad[] = {"QUANTUM_RUNTIME_MAX_QUEUE=0", NULL};
    char *argv[] = {QR_TEST_DAEMON, "check-config", NULL};
    char *out = NULL;
    assert_int_equal(qr_t_run(argv, bad, 10000, &out), 2);
    assert_non_null(strstr(out, "QUANTUM_RUNTIME_MAX_QUEUE"));
    free(out);

    char path[320];
    snprintf(path, sizeof(path), "%s/config.json", cases_dir);
    write_text(path, "{\"max_queue\":4,\"max_requests\":9}");
    const char *const args[] = {"--config", path, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, replay.port, NULL, args);
    long max = 0;
    assert_int_equal(queue_depth(d.port, &max), 0);
    assert_int_equal(max, 4);
    write_text(path, "{\"max_queue\":6,\"max_requests\":9}");
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !qr_t_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    assert_int_equal(queue_depth(d.port, &max), 0);
    assert_int_equal(max, 6);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    char cfg[512];
    snprintf(cfg, sizeof(cfg),
             "{\"max_queue\":4,\"backends\":[{\"id\":\"main\",\"kind\":\"ollama\",\"url\":"
             "\"http://127.0.0.1:%u\",\"max_queue\":3}]}",
             replay.port);
    write_text(path, cfg);
    qr_t_daemon_start_args(&d, replay.port, NULL, args);
    assert_int_equal(queue_depth(d.port, &max), 0);
    assert_int_equal(max, 3);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);

    write_text(path, "{\"backends\":[{\"id\":\"main\",\"kind\":\"ollama\",\"max_queue\":0}]}");
    char *argv2[] = {QR_TEST_DAEMON, "check-config", "--config", path, NULL};
    assert_int_equal(qr_t_run(argv2, NULL, 10000, &out), 2);
    assert_non_null(strstr(out, "max_queue must be a whole number from 1 to 65535"));
    free(out);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_queue_full_answers_503_fast),
        cmocka_unit_test(test_queue_released_on_disconnect_and_errors),
        cmocka_unit_test(test_passthrough_and_global_bound),
        cmocka_unit_test(test_slow_reader_does_not_grow_memory),
        cmocka_unit_test(test_max_queue_config),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
