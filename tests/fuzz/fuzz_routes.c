/* libFuzzer target for the request bodies of the routes whose decoders live inline in their route
 * handlers (the api route files): /v1/route, /v1/admission, /v1/placement, /v1/benchmark-plan,
 * /v1/tokenize, /v1/detokenize, /api/show, and, to the decoders' end, the inference routes. The
 * real daemon (qr_app_init with backend=openai at a closed loopback port, a fresh state_dir) runs
 * in this process on 127.0.0.1:<ephemeral>; each input is one POST: the first byte picks the
 * route, the rest is the body. The event loop is stepped from here until the answer is complete.
 * Every answer must be an HTTP status other than 500 (a 5xx only from the missing upstream or
 * engine: 501, 502, 503, 504) and an error status must carry a JSON body with an "error" member.
 *
 * Seeds in corpus/fuzz_routes: a well-formed body per route and hostile ones (not an object,
 * duplicate keys, deep nesting, NUL, wrong types). */
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/event.h>
#include <yyjson.h>

#include "api/api.h"
#include "core/http_server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const paths[] = {
    "/v1/route",      "/v1/admission",        "/v1/placement",  "/v1/benchmark-plan",
    "/v1/tokenize",   "/v1/detokenize",       "/api/show",      "/api/chat",
    "/api/generate",  "/v1/chat/completions", "/v1/embeddings", "/v1/rerank",
    "/v1/completions"};

static struct event_base *base;
static struct qr_app app;
static struct qr_config cfg;
static uint16_t port;

static char state[] = "/tmp/qr-fuzz-routes-XXXXXX";

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void) st;
    (void) flag;
    (void) ftw;
    return remove(path);
}

static void remove_state(void)
{
    nftw(state, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void start(void)
{
    if (!mkdtemp(state))
        abort();
    atexit(remove_state);
    static char env_state[128];
    snprintf(env_state, sizeof env_state, "QUANTUM_RUNTIME_STATE_DIR=%s", state);
    static char *envp[] = {env_state, "HOME=/nonexistent-fuzz-home", NULL};
    static char *argv[] = {"--listen=127.0.0.1:0", "--backend=openai",
                           "--openai-url=http://127.0.0.1:9", "--log-level=error"};
    struct qr_diag d = {{0}};
    if (qr_config_load(&cfg, 4, argv, envp, &d) != QR_OK) {
        fprintf(stderr, "fuzz_routes: config: %s\n", d.msg);
        abort();
    }
    base = event_base_new();
    app.envp = envp;
    if (!base || qr_app_init(&app, base, &cfg, &d) != QR_OK) {
        fprintf(stderr, "fuzz_routes: cannot start: %s\n", d.msg);
        abort();
    }
    port = qr_http_server_port(app.http);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* Send the request, step the loop until the server closed the connection; the answer in *out. */
static size_t exchange(const char *head, size_t hlen, const uint8_t *body, size_t blen, char *out,
                       size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0)
        abort();
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0 && errno != EINPROGRESS)
        abort();
    size_t sent = 0, got = 0, total = hlen + blen;
    double deadline = now_ms() + 10000;
    for (;;) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        while (sent < total) {
            const void *p =
                sent < hlen ? (const void *) (head + sent) : (const void *) (body + (sent - hlen));
            size_t n = sent < hlen ? hlen - sent : total - sent;
            ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            sent += (size_t) w;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 1) > 0) {
            ssize_t r = recv(fd, out + got, cap - 1 - got, 0);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
                break; /* closed (or reset after a refused body): the answer is what came */
            if (r > 0)
                got += (size_t) r;
            if (got == cap - 1)
                break;
        }
        if (now_ms() > deadline) {
            fprintf(stderr, "fuzz_routes: no complete answer in 10 s\n");
            abort();
        }
    }
    close(fd);
    out[got] = '\0';
    return got;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!base)
        start();
    if (size < 1 || size > 65536)
        return 0;
    const char *path = paths[data[0] % (sizeof paths / sizeof paths[0])];
    char head[512];
    int hlen = snprintf(head, sizeof head,
                        "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                        path, size - 1);
    static char out[1 << 20];
    size_t n = exchange(head, (size_t) hlen, data + 1, size - 1, out, sizeof out);
    int status = 0;
    if (n < 12 || sscanf(out, "HTTP/1.%*d %d", &status) != 1) {
        fprintf(stderr, "fuzz_routes: %s: no HTTP answer (%zu bytes)\n", path, n);
        abort();
    }
    if (getenv("QR_FUZZ_VERBOSE")) /* what a seed gets */
        fprintf(stderr, "%s -> %.300s\n", path,
                strstr(out, "\r\n\r\n") ? strstr(out, "\r\n\r\n") + 4 : out);
    if (status == 500 || status < 200 || status > 504) {
        fprintf(stderr, "fuzz_routes: %s: status %d\n%.2000s\n", path, status, out);
        abort();
    }
    if (status >= 400) {
        const char *b = strstr(out, "\r\n\r\n");
        yyjson_doc *doc = b ? yyjson_read(b + 4, strlen(b + 4), 0) : NULL;
        if (!doc || !yyjson_obj_get(yyjson_doc_get_root(doc), "error")) {
            fprintf(stderr, "fuzz_routes: %s: %d without an error body\n%.2000s\n", path, status,
                    out);
            abort();
        }
        yyjson_doc_free(doc);
    }
    return 0;
}
