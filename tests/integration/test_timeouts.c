/* Per-phase upstream timeouts end to end: the real daemon in front of qr-replay, each bound set to
 * a few hundred milliseconds, each failure with its own code in the API's error shape.
 *
 * - first token: the engine sends nothing (stall before the status line): 504 with
 *   upstream_first_token_timeout, in Ollama's shape and OpenAI's;
 * - idle: the engine sends one line and stalls: the answer has started, so it ends with an
 *   in-stream error carrying upstream_idle_timeout (NDJSON line for Ollama, SSE event for OpenAI);
 * - total: a stream whose last chunk comes after the total bound (in-stream upstream_timeout), and
 *   a non-streamed answer that comes after it (504 upstream_timeout);
 * - retries: one OpenAI backend with two replicas (both qr-replay). A replica that fails before any
 *   byte is retried on the other; one that sent a chunk and then stalls is not (the other never
 *   sees the request, as its /__replay/requests shows).
 *
 * - connect: backend=openai at a loopback listener whose accept queue is full (the SYN is
 *   dropped, nothing leaves the host): 504 upstream_connect_timeout.
 *
 * - the first token and idle cases again with http_client=curl.
 *
 * Windows here are looser than the unit tests' (two processes, sanitizers, a shared machine). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "harness.h"

#define BOUND_MS 300 /* first token, idle and (second daemon) total bound */
#define EARLY_MS 20
#define LATE_MS  300

static struct qr_child replay, daemon_;

static int setup(void **state)
{
    (void) state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&replay);
    static const char *const env[] = {"QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT=300ms",
                                      "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=300ms",
                                      "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=10s", NULL};
    qr_t_daemon_start(&daemon_, replay.port, env);
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    assert_int_equal(qr_t_stop(&daemon_, SIGTERM, 10000), 0);
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

static void post(uint16_t port, const char *path, const char *body, struct qr_t_resp *r)
{
    static const char *const h[] = {"Content-Type: application/json", NULL};
    qr_t_request("POST", port, path, h, body, strlen(body), r);
}

static void assert_within(double took_ms, double bound_ms)
{
    print_message("took %.0f ms for a %.0f ms bound\n", took_ms, bound_ms);
    if (took_ms < bound_ms - EARLY_MS || took_ms > bound_ms + LATE_MS)
        fail_msg("took %.0f ms for a %.0f ms bound", took_ms, bound_ms);
}

static void assert_has(const char *body, const char *needle)
{
    if (!body || !strstr(body, needle))
        fail_msg("'%s' not in: %s", needle, body ? body : "(null)");
}

/* --- first token ------------------------------------------------------------------------------ */

static void test_first_token_timeout(void **state)
{
    (void) state;
    struct qr_t_resp r;
    /* Ollama API (streams by default): 504 in Ollama's shape, the code in the message */
    post(daemon_.port, "/api/chat",
         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"slow-headers\"}]}", &r);
    assert_int_equal(r.status, 504);
    assert_has(r.body, "{\"error\":\"");
    assert_has(r.body, "upstream_first_token_timeout");
    assert_within(r.total_ms, BOUND_MS);
    qr_t_resp_free(&r);

    /* OpenAI API, streamed: 504 in OpenAI's shape with the code */
    post(daemon_.port, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"slow-headers\"}]}",
         &r);
    assert_int_equal(r.status, 504);
    assert_has(r.body, "\"code\":\"upstream_first_token_timeout\"");
    assert_within(r.total_ms, BOUND_MS);
    qr_t_resp_free(&r);
}

/* --- idle ------------------------------------------------------------------------------------- */

static void test_idle_timeout_ndjson(void **state)
{
    (void) state;
    struct qr_t_resp r;
    post(daemon_.port, "/api/chat",
         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"stall-me\"}]}", &r);
    assert_int_equal(r.status, 200); /* the answer had started */
    assert_has(r.body, "Let me think");
    assert_has(r.body, "{\"error\":\"");
    assert_has(r.body, "upstream_idle_timeout");
    assert_null(strstr(r.body, "\"done\":true"));
    assert_true(r.first_byte_ms >= 0);
    assert_within(r.total_ms - r.first_byte_ms, BOUND_MS);
    qr_t_resp_free(&r);
}

static void test_idle_timeout_sse(void **state)
{
    (void) state;
    struct qr_t_resp r;
    post(daemon_.port, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"stall-me\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "Let me think");
    assert_has(r.body, "data: {\"error\":{");
    assert_has(r.body, "\"code\":\"upstream_idle_timeout\"");
    assert_has(r.body, "data: [DONE]");
    assert_true(r.first_byte_ms >= 0);
    assert_within(r.total_ms - r.first_byte_ms, BOUND_MS);
    qr_t_resp_free(&r);
}

/* The same through libcurl (http_client=curl) */
static void test_curl_client(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_HTTP_CLIENT=curl",
                                      "QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT=300ms",
                                      "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=300ms", NULL};
    struct qr_child d;
    struct qr_t_resp r;
    qr_t_daemon_start(&d, replay.port, env);
    post(d.port, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"slow-headers\"}]}",
         &r);
    assert_int_equal(r.status, 504);
    assert_has(r.body, "\"code\":\"upstream_first_token_timeout\"");
    assert_within(r.total_ms, BOUND_MS);
    qr_t_resp_free(&r);
    post(d.port, "/api/chat",
         "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"stall-me\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "Let me think");
    assert_has(r.body, "upstream_idle_timeout");
    assert_within(r.total_ms - r.first_byte_ms, BOUND_MS);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* --- total ------------------------------------------------------------------------------------ */

static void test_total_timeout(void **state)
{
    (void) state;
    static const char *const env[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=300ms", NULL};
    struct qr_child d;
    struct qr_t_resp r;
    qr_t_daemon_start(&d, replay.port, env);

    /* streamed: two lines at once, the third 400 ms later: cut in-stream at the total bound */
    post(d.port, "/api/chat",
         "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "! How");
    assert_has(r.body, "upstream_timeout");
    assert_null(strstr(r.body, "upstream_idle_timeout"));
    assert_null(strstr(r.body, "can I help"));
    assert_within(r.total_ms, BOUND_MS);
    qr_t_resp_free(&r);

    /* not streamed, the answer 3 s late: 504 upstream_timeout before anything was sent */
    post(d.port, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":false,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"slow-headers\"}]}",
         &r);
    assert_int_equal(r.status, 504);
    assert_has(r.body, "\"code\":\"upstream_timeout\"");
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

/* --- connect --------------------------------------------------------------------------------- */

/* A loopback listener whose accept queue is full (listen(fd, 0) plus filler connections): the
 * kernel drops further SYNs, so a connect hangs until the client gives up. Nothing leaves the
 * host. */
struct full_listener {
    int lfd;
    int fillers[8];
    uint16_t port;
};

static void full_listener_open(struct full_listener *fl)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    fl->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fl->lfd >= 0);
    assert_int_equal(bind(fl->lfd, (struct sockaddr *) &sin, sizeof(sin)), 0);
    assert_int_equal(listen(fl->lfd, 0), 0);
    getsockname(fl->lfd, (struct sockaddr *) &sin, &len);
    fl->port = ntohs(sin.sin_port);
    for (size_t i = 0; i < sizeof(fl->fillers) / sizeof(fl->fillers[0]); i++) {
        fl->fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        assert_true(fl->fillers[i] >= 0);
        (void) connect(fl->fillers[i], (struct sockaddr *) &sin, sizeof(sin));
    }
    usleep(50 * 1000);
}

static void full_listener_close(struct full_listener *fl)
{
    for (size_t i = 0; i < sizeof(fl->fillers) / sizeof(fl->fillers[0]); i++)
        close(fl->fillers[i]);
    close(fl->lfd);
}

/* backend=openai at an address whose connect hangs: 504 upstream_connect_timeout */
static void test_connect_timeout(void **state)
{
    (void) state;
    struct full_listener fl;
    full_listener_open(&fl);
    char url[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", fl.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url,
                               "QUANTUM_RUNTIME_OPENAI_DIALECT=generic",
                               "QUANTUM_RUNTIME_UPSTREAM_CONNECT_TIMEOUT=300ms", NULL};
    struct qr_child d;
    struct qr_t_resp r;
    qr_t_daemon_start(&d, 0, env);
    post(d.port, "/v1/chat/completions",
         "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"hi\"}]}",
         &r);
    assert_int_equal(r.status, 504);
    assert_has(r.body, "\"code\":\"upstream_connect_timeout\"");
    assert_within(r.total_ms, BOUND_MS);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    full_listener_close(&fl);
}

/* --- no retry after the first byte ------------------------------------------------------------ */

static const char POOL_TRANSCRIPT[] =
    "[\n"
    "{\"name\":\"models\",\"match\":{\"method\":\"GET\",\"path\":\"/v1/models\"},\n"
    " \"response\":{\"headers\":{\"Content-Type\":\"application/json\"},\"framing\":\"length\",\n"
    "  \"body\":{\"object\":\"list\",\"data\":[{\"id\":\"pool-m\",\"object\":\"model\"}]}}},\n"
    "{\"name\":\"health\",\"match\":{\"method\":\"GET\",\"path\":\"/health\"},\n"
    " \"response\":{\"framing\":\"length\",\"body\":\"\"}},\n"
    "{\"name\":\"cut\",\"match\":{\"method\":\"POST\",\"path\":\"/v1/chat/completions\",\n"
    "  \"body_contains\":\"cut-after-first\"},\n"
    " \"response\":{\"headers\":{\"Content-Type\":\"text/event-stream\"},\"chunks\":[\n"
    "  {\"sse\":{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\n"
    "   \"model\":\"pool-m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\n"
    "   \"content\":\"partial answer\"},\"finish_reason\":null}]}}],\n"
    "  \"fault\":\"stall_after_chunks\"}},\n"
    "{\"name\":\"dead\",\"match\":{\"method\":\"POST\",\"path\":\"/v1/chat/completions\",\n"
    "  \"body_contains\":\"fail-before-bytes\"},\n"
    " \"response\":{\"fault\":\"close_before_headers\"}}\n"
    "]\n";

struct pool {
    char dir[128], cfg[192];
    struct qr_child a, b, d;
};

static void pool_start(struct pool *p)
{
    snprintf(p->dir, sizeof(p->dir), "/tmp/qr-timeouts-%ld", (long) getpid());
    mkdir(p->dir, 0700);
    char path[256];
    snprintf(path, sizeof(path), "%s/pool.json", p->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(POOL_TRANSCRIPT, f);
    fclose(f);
    qr_t_replay_start_dir(&p->a, p->dir);
    qr_t_replay_start_dir(&p->b, p->dir);
    snprintf(p->cfg, sizeof(p->cfg), "/tmp/qr-timeouts-%ld.json", (long) getpid());
    f = fopen(p->cfg, "w");
    assert_non_null(f);
    fprintf(f,
            "{\"backends\":[{\"id\":\"pool\",\"kind\":\"openai\",\"urls\":"
            "[\"http://127.0.0.1:%u\",\"http://127.0.0.1:%u\"],\"dialect\":\"generic\"}]}",
            p->a.port, p->b.port);
    fclose(f);
    static const char *const env[] = {"QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT=300ms",
                                      "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT=300ms", NULL};
    const char *args[] = {"--config", p->cfg, NULL};
    qr_t_daemon_start_args(&p->d, 0, env, args);
    for (int i = 0; i < 100; i++) { /* the model list joins the registry at start (bounded) */
        struct qr_t_resp r;
        qr_t_request("GET", p->d.port, "/v1/models", NULL, NULL, 0, &r);
        bool listed = r.body && strstr(r.body, "\"id\":\"pool-m\"");
        qr_t_resp_free(&r);
        if (listed)
            break;
        usleep(50 * 1000);
    }
}

static void pool_stop(struct pool *p)
{
    assert_int_equal(qr_t_stop(&p->d, SIGTERM, 10000), 0);
    qr_t_stop(&p->a, SIGTERM, 5000);
    qr_t_stop(&p->b, SIGTERM, 5000);
    char path[256];
    snprintf(path, sizeof(path), "%s/pool.json", p->dir);
    unlink(path);
    rmdir(p->dir);
    unlink(p->cfg);
}

/* Chat requests a replica received since its last reset. */
static size_t chats(uint16_t port)
{
    yyjson_doc *doc = qr_t_replay_requests(port);
    assert_non_null(doc);
    size_t n = 0, i, max;
    yyjson_val *r;
    yyjson_arr_foreach(yyjson_doc_get_root(doc), i, max, r)
    {
        const char *path = yyjson_get_str(yyjson_obj_get(r, "path"));
        n += path && !strcmp(path, "/v1/chat/completions");
    }
    yyjson_doc_free(doc);
    return n;
}

static void pool_reset(struct pool *p)
{
    assert_true(qr_t_replay_reset(p->a.port));
    assert_true(qr_t_replay_reset(p->b.port));
}

static void test_retry_only_before_first_byte(void **state)
{
    (void) state;
    struct pool p;
    struct qr_t_resp r;
    pool_start(&p);

    /* control: the first replica closes before any byte: the request is retried on the other */
    pool_reset(&p);
    post(p.d.port, "/v1/chat/completions",
         "{\"model\":\"pool-m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"fail-before-bytes\"}]}",
         &r);
    assert_true(r.status >= 500);
    /* each replica saw it (once, or twice where the client's pooled connection to it looked
     * closed before any response byte and the native client retried on a fresh one) */
    assert_true(chats(p.a.port) >= 1);
    assert_true(chats(p.b.port) >= 1);
    qr_t_resp_free(&r);

    /* SSE: one chunk reached the client, then the replica stalls: an in-stream idle error, and
     * the other replica never sees the request */
    pool_reset(&p);
    post(p.d.port, "/v1/chat/completions",
         "{\"model\":\"pool-m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"cut-after-first\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "partial answer");
    assert_has(r.body, "\"code\":\"upstream_idle_timeout\"");
    assert_int_equal(chats(p.a.port) + chats(p.b.port), 1);
    qr_t_resp_free(&r);

    /* NDJSON (the Ollama API over the same backend): the same */
    pool_reset(&p);
    post(p.d.port, "/api/chat",
         "{\"model\":\"pool-m\",\"messages\":[{\"role\":\"user\",\"content\":"
         "\"cut-after-first\"}]}",
         &r);
    assert_int_equal(r.status, 200);
    assert_has(r.body, "partial answer");
    assert_has(r.body, "upstream_idle_timeout");
    assert_null(strstr(r.body, "\"done\":true"));
    assert_int_equal(chats(p.a.port) + chats(p.b.port), 1);
    qr_t_resp_free(&r);

    pool_stop(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_token_timeout),
        cmocka_unit_test(test_idle_timeout_ndjson),
        cmocka_unit_test(test_idle_timeout_sse),
        cmocka_unit_test(test_curl_client),
        cmocka_unit_test(test_total_timeout),
        cmocka_unit_test(test_connect_timeout),
        cmocka_unit_test(test_retry_only_before_first_byte),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
