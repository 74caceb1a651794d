/* backend=llama.cpp model lifecycle end to end: the real daemon runs the real llama-server on
 * generated GGUF models (scripted-chat from qr-gen-scripted; bert-embed-tiny and a copy of it,
 * bert-embed-copy, known through a manifest in a temporary registry dir) and each case starts its
 * own daemon with the configuration it needs. Idle unload and reload: a short default keep_alive
 * unloads the model (its engine pid is gone) and the next request loads it again in a new process;
 * a per-request keep_alive (duration string, number of seconds, negative) overrides the default
 * and /api/ps expires_at follows it. The memory budget: sized from the daemon's own estimates so
 * that two models fit and three do not, loading the third unloads the least recently used idle
 * one; a model with a request in flight is never evicted, the newcomer gets 503
 * insufficient_memory naming the bytes while the busy stream goes on. An engine that exits when
 * asked to serve fails the first request with 503 model_load_failed naming the exit code and its
 * log line within 5 s (OpenAI and Ollama shapes), and the daemon stays healthy. /v1/loaded during
 * a load (an engine wrapper that waits 1 s before it execs the real one) shows the model
 * starting/loading with its pid, the queued request and no load time yet. Placement: a model
 * starts with its plan's engine arguments (/v1/loaded placement_plan and engine_args, the engine's
 * own /proc/PID/cmdline, and the real engine serves with them); a model whose plan does not fit
 * this host (the scripted model with llama_ctx 16 Mi: a 36 GiB KV cache) is refused with 507
 * insufficient_memory and the plan's numbers, and no engine process is started. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
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

#include <yyjson.h>

#include "harness.h"

static char models[64];   /* generated GGUF files (models_dir) */
static char registry[96]; /* the bert-embed-copy manifest (registry_dirs) */
static char engine[512];  /* the real llama-server the daemon discovers */

static const char GREETING[] =
    "Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß.";

static const char CHAT[] = "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\","
                           "\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":"
                           "false}}";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static double wall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

static yyjson_val *jpath(yyjson_val *v, const char *path)
{
    return yyjson_ptr_get(v, path);
}

static void post(uint16_t port, const char *target, const char *body, struct qr_t_resp *r)
{
    qr_t_request("POST", port, target, NULL, body, strlen(body), r);
}

static bool pid_alive(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int) pid);
    return pid > 0 && stat(path, &st) == 0;
}

static bool write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    ok = fclose(f) == 0 && ok;
    return ok && chmod(path, mode) == 0;
}

/* A daemon on the generated models with one thread and a ctx-token context per engine, plus the
 * settings in env ("NAME=value", up to 4). */
static void daemon_start_ctx(struct qr_child *d, const char *const *env, const char *ctx)
{
    char reg[160];
    snprintf(reg, sizeof reg, "QUANTUM_RUNTIME_REGISTRY_DIRS=%s", registry);
    const char *e[8] = {reg};
    for (size_t i = 0; env && env[i] && i < 4; i++)
        e[i + 1] = env[i];
    const char *const args[] = {
        "--backend", "llama.cpp", "--models-dir", models, "--llama-threads", "1", "--llama-ctx",
        ctx,         NULL};
    qr_t_daemon_start_args(d, 0, e, args);
}

static void daemon_start(struct qr_child *d, const char *const *env)
{
    daemon_start_ctx(d, env, "1024");
}

static void daemon_stop(struct qr_child *d)
{
    if (d->pid > 0)
        assert_int_equal(qr_t_stop(d, SIGTERM, 15000), 0);
    d->pid = 0;
}

/* ---- GET /v1/loaded and GET /api/ps ---- */

struct row {
    bool found;
    char state[32], expiry[16];
    pid_t pid;
    uint64_t bytes, queued, in_flight;
    int64_t load_ms, loading_ms;
    uint64_t threads;
    bool loading, loaded_at, expires_at; /* the times are not null */
};

/* The row of model in GET /v1/loaded. */
static struct row loaded(uint16_t port, const char *model)
{
    struct row out = {0};
    struct qr_t_resp r;
    qr_t_request("GET", port, "/v1/loaded", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(jpath(yyjson_doc_get_root(d), "/models"), i, max, m)
    {
        if (strcmp(yyjson_get_str(yyjson_obj_get(m, "model")), model))
            continue;
        out.found = true;
        const char *s = yyjson_get_str(yyjson_obj_get(m, "state"));
        snprintf(out.state, sizeof out.state, "%s", s ? s : "");
        s = yyjson_get_str(yyjson_obj_get(m, "expiry"));
        snprintf(out.expiry, sizeof out.expiry, "%s", s ? s : "");
        out.pid = (pid_t) yyjson_get_sint(yyjson_obj_get(m, "pid"));
        out.bytes = yyjson_get_uint(yyjson_obj_get(m, "bytes"));
        out.queued = yyjson_get_uint(yyjson_obj_get(m, "queued"));
        out.in_flight = yyjson_get_uint(yyjson_obj_get(m, "in_flight"));
        out.load_ms = yyjson_get_sint(yyjson_obj_get(m, "load_ms"));
        out.loading_ms = yyjson_get_sint(yyjson_obj_get(m, "loading_ms"));
        out.threads = yyjson_get_uint(yyjson_obj_get(m, "threads"));
        out.loading = yyjson_get_bool(yyjson_obj_get(m, "loading"));
        out.loaded_at = yyjson_is_str(yyjson_obj_get(m, "loaded_at"));
        out.expires_at = yyjson_is_str(yyjson_obj_get(m, "expires_at"));
    }
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
    return out;
}

/* "2026-01-02T03:04:05.678Z" as wall-clock ms (-1 when it is not that form). */
static double rfc3339_ms(const char *s)
{
    struct tm tm = {0};
    int ms = 0;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                     &tm.tm_min, &tm.tm_sec, &ms) != 7)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (double) timegm(&tm) * 1000.0 + ms;
}

/* /api/ps of model: its expires_at minus now in ms (-1e18 when not listed); size into *size. */
static double ps_expires_in(uint16_t port, const char *model, uint64_t *size, char *raw, size_t cap)
{
    struct qr_t_resp r;
    qr_t_request("GET", port, "/api/ps", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    double in = -1e18;
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(jpath(yyjson_doc_get_root(d), "/models"), i, max, m)
    {
        if (strcmp(yyjson_get_str(yyjson_obj_get(m, "name")), model))
            continue;
        const char *at = yyjson_get_str(yyjson_obj_get(m, "expires_at"));
        assert_non_null(at);
        if (raw)
            snprintf(raw, cap, "%s", at);
        in = rfc3339_ms(at) - wall_now_ms();
        if (size)
            *size = yyjson_get_uint(yyjson_obj_get(m, "size"));
    }
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
    return in;
}

/* ms from from_ms until model is no longer in /v1/loaded (polled every 20 ms), -1 after
 * timeout_ms. */
static double wait_gone(uint16_t port, const char *model, double from_ms, int timeout_ms)
{
    while (now_ms() - from_ms < timeout_ms) {
        if (!loaded(port, model).found)
            return now_ms() - from_ms;
        usleep(20000);
    }
    return -1;
}

/* ms until pid is gone from /proc, -1 after timeout_ms. */
static double wait_pid_gone(pid_t pid, int timeout_ms)
{
    double from = now_ms();
    while (now_ms() - from < timeout_ms) {
        if (!pid_alive(pid))
            return now_ms() - from;
        usleep(10000);
    }
    return -1;
}

static void chat_ok(uint16_t port, const char *target, const char *body)
{
    struct qr_t_resp r;
    post(port, target, body, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    const char *text = yyjson_get_str(jpath(root, "/choices/0/message/content"));
    if (!text)
        text = yyjson_get_str(jpath(root, "/message/content")); /* Ollama's shape */
    assert_non_null(text);
    assert_string_equal(text, GREETING);
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

static void embed_ok(uint16_t port, const char *model)
{
    char body[160];
    snprintf(body, sizeof body, "{\"model\":\"%s\",\"input\":\"Hallo Welt\"}", model);
    struct qr_t_resp r;
    post(port, "/v1/embeddings", body, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(d);
    assert_int_equal(yyjson_arr_size(jpath(yyjson_doc_get_root(d), "/data/0/embedding")), 64);
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

/* ---- fixtures ---- */

static const char COPY_MANIFEST[] =
    "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"bert-embed-copy\","
    "\"display_name\":\"Copy of the tiny BERT embedding test model\","
    "\"source\":{\"provider\":\"quantum-runtime\",\"reference\":\"tests/fixtures/gen_fixtures.c\","
    "\"revision\":\"generated\"},\"backend\":{\"type\":\"llama.cpp\"},"
    "\"artifacts\":[{\"uri\":\"models:bert-embed-copy.gguf\",\"backend\":\"llama.cpp\","
    "\"format\":\"gguf\",\"role\":\"embedding\"}],"
    "\"model\":{\"architecture\":\"bert\",\"parameter_class\":\"tiny\",\"quantization\":"
    "\"unspecified\",\"context_window\":512,\"architecture_class\":\"dense\"},"
    "\"capabilities\":{\"text\":false,\"vision\":false,\"audio\":false,\"embeddings\":true,"
    "\"tools\":false,\"thinking\":false},"
    "\"compatibility\":{\"min_runtime_version\":\"0.4.0-alpha.1\"},"
    "\"state\":{\"install\":\"available\",\"verification\":\"unverified\",\"lifecycle\":"
    "\"active\"},\"provenance\":{\"publisher\":\"Quantum Runtime test fixtures\","
    "\"license_ref\":\"generated test data\"}}\n";

static bool run_tool(char *const argv[])
{
    char *out = NULL;
    int rc = qr_t_run(argv, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "%s failed (%d): %s\n", argv[0], rc, out ? out : "");
    free(out);
    return rc == 0;
}

static int setup(void **state)
{
    snprintf(models, sizeof models, "/tmp/qr-test-lifecycle-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(models))
        return -1;
    snprintf(registry, sizeof registry, "%s/registry", models);
    char *gen_s[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    char *gen_f[] = {QR_TEST_GEN_FIXTURES, models, "bert-embed-tiny.gguf", NULL};
    char from[160], to[160], manifest[160];
    snprintf(from, sizeof from, "%s/bert-embed-tiny.gguf", models);
    snprintf(to, sizeof to, "%s/bert-embed-copy.gguf", models);
    snprintf(manifest, sizeof manifest, "%s/bert-embed-copy.json", registry);
    char *cp[] = {"/bin/cp", from, to, NULL};
    if (!run_tool(gen_s) || !run_tool(gen_f) || !run_tool(cp) || mkdir(registry, 0755) != 0 ||
        !write_file(manifest, COPY_MANIFEST, 0644))
        return -1;
    /* the engine the daemon discovers, for the wrappers of the load cases */
    struct qr_child d;
    daemon_start(&d, NULL);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/backends", NULL, NULL, 0, &r);
    yyjson_doc *doc = r.status == 200 ? yyjson_read(r.body, r.body_len, 0) : NULL;
    const char *path = yyjson_get_str(jpath(yyjson_doc_get_root(doc), "/backends/0/engine/path"));
    snprintf(engine, sizeof engine, "%s", path ? path : "");
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    qr_t_stop(&d, SIGTERM, 15000);
    if (!engine[0]) {
        fprintf(stderr, "no llama-server found by the daemon\n");
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", models);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", models);
    return 0;
}

/* ---- a) idle unload and reload; per-request keep_alive ---- */

static void test_idle_unload_and_reload(void **state)
{
    struct qr_child d;
    const char *const env[] = {"QUANTUM_RUNTIME_KEEP_ALIVE=2s", NULL};
    daemon_start(&d, env);
    assert_false(loaded(d.port, "scripted-chat").found);

    /* loads on demand; listed in /v1/loaded and /api/ps with the default TTL of 2 s */
    chat_ok(d.port, "/v1/chat/completions", CHAT);
    double answered = now_ms();
    struct row a = loaded(d.port, "scripted-chat");
    uint64_t size = 0;
    double in = ps_expires_in(d.port, "scripted-chat", &size, NULL, 0);
    assert_true(a.found);
    assert_string_equal(a.state, "ready");
    assert_string_equal(a.expiry, "idle_ttl");
    assert_true(pid_alive(a.pid));
    assert_int_equal(size, a.bytes);
    assert_true(in > 1000 && in <= 2100);

    /* gone after the TTL: not listed, its process ended */
    double gone = wait_gone(d.port, "scripted-chat", answered, 10000);
    fprintf(stderr, "default keep_alive 2s: unloaded %.0f ms after the answer\n", gone);
    assert_true(gone >= 1500 && gone < 5000);
    assert_true(wait_pid_gone(a.pid, 2000) >= 0);
    assert_true(ps_expires_in(d.port, "scripted-chat", NULL, NULL, 0) < -1e17);

    /* the next request loads it again in a new process and answers (Ollama shape) */
    chat_ok(d.port, "/api/chat",
            "{\"model\":\"scripted-chat\",\"stream\":false,\"think\":false,\"keep_alive\":\"6s\","
            "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    answered = now_ms();
    struct row b = loaded(d.port, "scripted-chat");
    assert_true(b.found);
    assert_true(b.pid > 0 && b.pid != a.pid);
    assert_true(pid_alive(b.pid));
    /* keep_alive "6s" wins over the default: expires in ~6 s, still loaded after 3 s */
    in = ps_expires_in(d.port, "scripted-chat", NULL, NULL, 0);
    fprintf(stderr, "keep_alive \"6s\": /api/ps expires_at in %.0f ms\n", in);
    assert_true(in > 5000 && in <= 6100);
    while (now_ms() - answered < 3000) {
        struct row c = loaded(d.port, "scripted-chat");
        assert_true(c.found);
        assert_int_equal(c.pid, b.pid);
        usleep(100000);
    }

    /* keep_alive -1: never (year 9999 in /api/ps) */
    chat_ok(d.port, "/api/chat",
            "{\"model\":\"scripted-chat\",\"stream\":false,\"think\":false,\"keep_alive\":-1,"
            "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    char at[64] = "";
    ps_expires_in(d.port, "scripted-chat", NULL, at, sizeof at);
    assert_int_equal(strncmp(at, "9999-", 5), 0);
    assert_string_equal(loaded(d.port, "scripted-chat").expiry, "never");

    /* keep_alive 1 (a number of seconds): expires in ~1 s and unloads then */
    chat_ok(d.port, "/api/chat",
            "{\"model\":\"scripted-chat\",\"stream\":false,\"think\":false,\"keep_alive\":1,"
            "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    answered = now_ms();
    in = ps_expires_in(d.port, "scripted-chat", NULL, NULL, 0);
    assert_true(in > 0 && in <= 1100);
    gone = wait_gone(d.port, "scripted-chat", answered, 10000);
    fprintf(stderr, "keep_alive 1: unloaded %.0f ms after the answer\n", gone);
    assert_true(gone >= 500 && gone < 4000);
    assert_true(wait_pid_gone(b.pid, 2000) >= 0);
    daemon_stop(&d);
}

/* ---- b) the memory budget: LRU eviction, never a busy model ---- */

static uint64_t bytes_scripted, bytes_bert, bytes_copy;

/* The estimate of each model loaded alone (a budget that takes them all). */
static void test_budget_estimates(void **state)
{
    struct qr_child d;
    daemon_start(&d, NULL);
    chat_ok(d.port, "/v1/chat/completions", CHAT);
    embed_ok(d.port, "bert-embed-tiny");
    embed_ok(d.port, "bert-embed-copy");
    bytes_scripted = loaded(d.port, "scripted-chat").bytes;
    bytes_bert = loaded(d.port, "bert-embed-tiny").bytes;
    bytes_copy = loaded(d.port, "bert-embed-copy").bytes;
    uint64_t ps = 0;
    ps_expires_in(d.port, "bert-embed-copy", &ps, NULL, 0);
    fprintf(stderr, "estimates: scripted-chat %llu, bert-embed-tiny %llu, bert-embed-copy %llu\n",
            (unsigned long long) bytes_scripted, (unsigned long long) bytes_bert,
            (unsigned long long) bytes_copy);
    assert_true(bytes_scripted > 0 && bytes_bert > 0);
    assert_int_equal(bytes_copy, bytes_bert); /* the same file */
    assert_int_equal(ps, bytes_copy);
    daemon_stop(&d);
}

static void test_budget_lru_eviction(void **state)
{
    assert_true(bytes_scripted > 0 && bytes_bert > 0 && bytes_copy > 0);
    uint64_t total = bytes_scripted + bytes_bert + bytes_copy;
    uint64_t min = bytes_scripted < bytes_bert ? bytes_scripted : bytes_bert;
    uint64_t budget = total - min; /* every two fit (the largest pair), three do not */
    char env_budget[80];
    snprintf(env_budget, sizeof env_budget, "QUANTUM_RUNTIME_MEMORY_BUDGET=%llu",
             (unsigned long long) budget);
    const char *const env[] = {env_budget, NULL};
    struct qr_child d;
    daemon_start(&d, env);

    chat_ok(d.port, "/v1/chat/completions", CHAT); /* A */
    usleep(20000);
    embed_ok(d.port, "bert-embed-tiny"); /* B */
    struct row a = loaded(d.port, "scripted-chat"), b = loaded(d.port, "bert-embed-tiny");
    assert_true(a.found && b.found);
    assert_string_equal(a.state, "ready");
    assert_string_equal(b.state, "ready");
    usleep(20000);
    chat_ok(d.port, "/v1/chat/completions", CHAT); /* touch A: B is now the least recent */
    usleep(20000);
    assert_false(loaded(d.port, "bert-embed-copy").found);
    assert_true(loaded(d.port, "bert-embed-tiny").found);
    double asked = now_ms();
    embed_ok(d.port, "bert-embed-copy"); /* C needs room: B goes */
    double gone = wait_gone(d.port, "bert-embed-tiny", asked, 10000);
    assert_true(gone >= 0);
    assert_true(wait_pid_gone(b.pid, 2000) >= 0);
    struct row a2 = loaded(d.port, "scripted-chat"), c = loaded(d.port, "bert-embed-copy");
    assert_true(a2.found && c.found);
    assert_int_equal(a2.pid, a.pid); /* A stayed in its process */
    assert_true(pid_alive(a.pid));
    assert_string_equal(c.state, "ready");
    assert_true(qr_t_log_contains(&d, "least recently used"));
    uint64_t size_a = 0, size_c = 0;
    assert_true(ps_expires_in(d.port, "scripted-chat", &size_a, NULL, 0) > 0);
    assert_true(ps_expires_in(d.port, "bert-embed-copy", &size_c, NULL, 0) > 0);
    assert_true(ps_expires_in(d.port, "bert-embed-tiny", NULL, NULL, 0) < -1e17);
    assert_int_equal(size_a, bytes_scripted);
    assert_int_equal(size_c, bytes_copy);
    fprintf(stderr,
            "budget %llu: bert-embed-tiny evicted for bert-embed-copy, gone %.0f ms after the "
            "request\n",
            (unsigned long long) budget, gone);
    daemon_stop(&d);
}

/* A raw connection to port with the whole request sent. */
static int raw_post(uint16_t port, const char *target, const char *body)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof a), 0);
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      target, strlen(body));
    assert_int_equal(write(fd, head, (size_t) hn), hn);
    assert_int_equal(write(fd, body, strlen(body)), (ssize_t) strlen(body));
    return fd;
}

/* Read from fd until it has delivered at least want SSE events in all (*got counts them; buf
 * keeps the last bytes read), or timeout_ms. */
static void read_events(int fd, unsigned *got, unsigned want, int timeout_ms)
{
    char buf[16384];
    double deadline = now_ms() + timeout_ms;
    while (*got < want && now_ms() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf - 1);
        assert_true(n > 0);
        buf[n] = '\0';
        for (const char *p = buf; (p = strstr(p, "data: {")) != NULL; p++)
            (*got)++; /* an event split across reads is missed: a lower bound */
    }
}

static void test_budget_busy_not_evicted(void **state)
{
    assert_true(bytes_scripted > 0 && bytes_bert > 0);
    /* each fits alone, not both */
    uint64_t budget = bytes_scripted > bytes_bert ? bytes_scripted : bytes_bert;
    char env_budget[80];
    snprintf(env_budget, sizeof env_budget, "QUANTUM_RUNTIME_MEMORY_BUDGET=%llu",
             (unsigned long long) budget);
    const char *const env[] = {env_budget, NULL};
    struct qr_child d;
    daemon_start(&d, env);
    chat_ok(d.port, "/v1/chat/completions", CHAT);
    pid_t a = loaded(d.port, "scripted-chat").pid;

    int fd = raw_post(d.port, "/v1/chat/completions",
                      "{\"model\":\"scripted-chat\",\"stream\":true,\"max_tokens\":200000,"
                      "\"messages\":[{\"role\":\"user\",\"content\":\"[[long]]\"}],"
                      "\"chat_template_kwargs\":{\"enable_thinking\":false}}");
    unsigned events = 0;
    read_events(fd, &events, 5, 10000);
    assert_true(events >= 5);
    assert_int_equal(loaded(d.port, "scripted-chat").in_flight, 1);

    /* the newcomer is refused at once, naming the bytes; the busy model stays */
    struct qr_t_resp r;
    post(d.port, "/v1/embeddings", "{\"model\":\"bert-embed-tiny\",\"input\":\"x\"}", &r);
    fprintf(stderr, "newcomer while busy: %ld %s (%.0f ms)\n", r.status, r.body, r.total_ms);
    assert_int_equal(r.status, 503);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(jpath(root, "/error/code")), "insufficient_memory");
    const char *msg = yyjson_get_str(jpath(root, "/error/message"));
    assert_non_null(msg);
    char need[96], of[96];
    snprintf(need, sizeof need, "needs %llu bytes", (unsigned long long) bytes_bert);
    snprintf(of, sizeof of, "memory budget of %llu bytes", (unsigned long long) budget);
    assert_non_null(strstr(msg, need));
    assert_non_null(strstr(msg, of));
    assert_non_null(strstr(msg, "scripted-chat"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    assert_false(loaded(d.port, "bert-embed-tiny").found);

    /* ...and the busy stream goes on in the same process */
    unsigned more = 0;
    read_events(fd, &more, 20, 10000);
    assert_true(more >= 20);
    struct row row = loaded(d.port, "scripted-chat");
    assert_int_equal(row.pid, a);
    assert_int_equal(row.in_flight, 1);
    close(fd);

    /* once it is idle, the newcomer takes its place */
    double deadline = now_ms() + 5000;
    while (loaded(d.port, "scripted-chat").in_flight && now_ms() < deadline)
        usleep(10000);
    embed_ok(d.port, "bert-embed-tiny");
    assert_true(wait_gone(d.port, "scripted-chat", now_ms(), 10000) >= 0);
    assert_true(wait_pid_gone(a, 2000) >= 0);
    daemon_stop(&d);
}

/* ---- c) an engine that fails to start ---- */

static void test_engine_fails_to_start(void **state)
{
    char script[160], env_engine[200];
    snprintf(script, sizeof script, "%s/failing-llama-server", models);
    assert_true(write_file(script,
                           "#!/bin/sh\n"
                           "if [ \"$1\" = --version ]; then\n"
                           "  echo 'version: 0.7.0 (build 11669, commit Debian)' >&2\n"
                           "  exit 0\n"
                           "fi\n"
                           "echo 'error: fake engine refuses to serve' >&2\n"
                           "exit 1\n",
                           0755));
    snprintf(env_engine, sizeof env_engine, "QUANTUM_RUNTIME_LLAMA_SERVER=%s", script);
    const char *const env[] = {env_engine, NULL};
    struct qr_child d;
    daemon_start(&d, env);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/readyz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200); /* the probe is fine */
    qr_t_resp_free(&r);

    post(d.port, "/v1/chat/completions", CHAT, &r);
    fprintf(stderr, "failing engine, OpenAI: %ld in %.0f ms: %s\n", r.status, r.total_ms, r.body);
    assert_int_equal(r.status, 503);
    assert_true(r.total_ms < 5000);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(jpath(root, "/error/code")), "model_load_failed");
    const char *msg = yyjson_get_str(jpath(root, "/error/message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "exited with code 1"));
    assert_non_null(strstr(msg, "error: fake engine refuses to serve"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    post(d.port, "/api/chat",
         "{\"model\":\"scripted-chat\",\"think\":false,\"messages\":[{\"role\":\"user\","
         "\"content\":\"hi\"}]}",
         &r);
    fprintf(stderr, "failing engine, Ollama: %ld in %.0f ms: %s\n", r.status, r.total_ms, r.body);
    assert_int_equal(r.status, 503);
    assert_true(r.total_ms < 5000);
    doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    msg = yyjson_get_str(jpath(yyjson_doc_get_root(doc), "/error")); /* Ollama's shape */
    assert_non_null(msg);
    assert_non_null(strstr(msg, "exited with code 1"));
    assert_non_null(strstr(msg, "error: fake engine refuses to serve"));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    /* the daemon stays healthy and keeps no process for the model */
    qr_t_request("GET", d.port, "/readyz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_true(wait_gone(d.port, "scripted-chat", now_ms(), 5000) >= 0);
    daemon_stop(&d);
}

/* ---- d) /v1/loaded while a model loads ---- */

struct chat_run {
    uint16_t port;
    struct qr_t_resp r;
};

static void *chat_thread(void *arg)
{
    struct chat_run *c = arg;
    post(c->port, "/v1/chat/completions", CHAT, &c->r);
    return NULL;
}

static void test_loading_state(void **state)
{
    char script[160], text[1024], env_engine[200];
    snprintf(script, sizeof script, "%s/slow-llama-server", models);
    snprintf(text, sizeof text,
             "#!/bin/sh\n"
             "[ \"$1\" = --version ] || sleep 1\n"
             "exec '%s' \"$@\"\n",
             engine);
    assert_true(write_file(script, text, 0755));
    snprintf(env_engine, sizeof env_engine, "QUANTUM_RUNTIME_LLAMA_SERVER=%s", script);
    const char *const env[] = {env_engine, NULL};
    struct qr_child d;
    daemon_start(&d, env);

    struct chat_run c = {.port = d.port};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, chat_thread, &c), 0);
    struct row first = {0}, last = {0};
    char seen[128] = "";
    int64_t last_loading_ms = -1;
    double deadline = now_ms() + 20000;
    while (now_ms() < deadline) {
        struct row w = loaded(d.port, "scripted-chat");
        if (w.found) {
            if (!first.found)
                first = w;
            if (strcmp(w.state, last.state)) {
                strncat(seen, seen[0] ? " " : "", sizeof seen - strlen(seen) - 1);
                strncat(seen, w.state, sizeof seen - strlen(seen) - 1);
            }
            last = w;
            if (w.loading) { /* while it loads: the waiting request, no load time yet */
                assert_int_equal(w.queued, 1);
                assert_int_equal(w.in_flight, 0);
                assert_int_equal(w.load_ms, -1);
                assert_true(w.loading_ms >= 0 && w.loading_ms < 60000); /* elapsed so far */
                assert_true(w.loading_ms >= last_loading_ms);
                last_loading_ms = w.loading_ms;
                assert_true(w.loaded_at);
                assert_false(w.expires_at);
                assert_string_equal(w.expiry, "busy");
                assert_true(pid_alive(w.pid));
            }
            if (!strcmp(w.state, "ready"))
                break;
        }
        usleep(20000);
    }
    pthread_join(t, NULL);
    fprintf(stderr, "/v1/loaded during the load: %s; load_ms %lld, request %.0f ms\n", seen,
            (long long) loaded(d.port, "scripted-chat").load_ms, c.r.total_ms);
    assert_int_equal(c.r.status, 200);
    assert_non_null(strstr(c.r.body, "Hallo! Ich bin das Skript-Modell."));
    assert_true(c.r.total_ms >= 1000);
    qr_t_resp_free(&c.r);
    /* starting (the wrapper's second: no port yet) first, then loading or ready, nothing else */
    assert_true(first.found);
    assert_string_equal(first.state, "starting");
    assert_true(first.loading);
    assert_true(!strcmp(seen, "starting ready") || !strcmp(seen, "starting loading ready"));
    struct row done = loaded(d.port, "scripted-chat");
    assert_string_equal(done.state, "ready");
    assert_false(done.loading);
    assert_int_equal(done.pid, first.pid); /* the wrapper exec'd the engine */
    assert_true(done.load_ms >= 1000);
    assert_int_equal(done.loading_ms, -1);
    assert_true(last_loading_ms >= 0);
    assert_int_equal(done.threads, 1); /* --llama-threads 1 */
    daemon_stop(&d);
}

/* ---- e) placement: the plan's arguments applied, a model that does not fit refused ---- */

/* Is there a word equal to w followed by a word equal to next in arr (a JSON array of strings)? */
static bool has_pair(yyjson_val *arr, const char *w, const char *next)
{
    size_t n = yyjson_arr_size(arr);
    for (size_t i = 0; i + 1 < n; i++) {
        const char *a = yyjson_get_str(yyjson_arr_get(arr, i));
        const char *b = yyjson_get_str(yyjson_arr_get(arr, i + 1));
        if (a && b && !strcmp(a, w) && !strcmp(b, next))
            return true;
    }
    return false;
}

/* The same in a NUL-separated command line. */
static bool cmdline_has_pair(pid_t pid, const char *w, const char *next)
{
    char path[64], buf[16384];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int) pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        size_t next_at = i + strlen(buf + i) + 1;
        if (next_at < n && !strcmp(buf + i, w) && !strcmp(buf + next_at, next))
            return true;
    }
    return false;
}

/* Processes whose parent is pid (from /proc/N/stat). */
static unsigned children_of(pid_t pid)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "awk '$4 == %d' /proc/[0-9]*/stat 2>/dev/null | wc -l", (int) pid);
    FILE *p = popen(cmd, "r");
    unsigned n = 0;
    if (p) {
        if (fscanf(p, "%u", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n;
}

static void test_placement_applied(void **state)
{
    struct qr_child d;
    daemon_start(&d, NULL);
    chat_ok(d.port, "/v1/chat/completions", CHAT); /* the real engine serves with the flags */
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/loaded", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *m = jpath(yyjson_doc_get_root(doc), "/models/0");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "model")), "scripted-chat");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "state")), "ready");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "placement")), "cpu");
    yyjson_val *pl = yyjson_obj_get(m, "placement_plan");
    const char *decision = yyjson_get_str(yyjson_obj_get(pl, "decision"));
    const char *reason = yyjson_get_str(yyjson_obj_get(pl, "reason"));
    assert_non_null(decision);
    assert_non_null(reason);
    fprintf(stderr, "placement_plan: %s | %s | total %llu, usable %llu\n", decision ? decision : "",
            reason ? reason : "",
            (unsigned long long) yyjson_get_uint(yyjson_obj_get(pl, "total_bytes")),
            (unsigned long long) yyjson_get_uint(yyjson_obj_get(pl, "ram_usable_bytes")));
    assert_string_equal(decision, "cpu_only");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(pl, "strategy")), "cpu");
    assert_true(yyjson_get_bool(yyjson_obj_get(pl, "applied")));
    assert_true(yyjson_is_null(yyjson_obj_get(pl, "note")));
    assert_non_null(strstr(reason, "fits in RAM"));
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(pl, "threads")), 1); /* --llama-threads 1 */
    /* the plan's flags without -t (the backend sets -t/-tb itself) */
    yyjson_val *args = yyjson_obj_get(pl, "args");
    assert_true(has_pair(args, "-ngl", "0"));
    size_t i, max;
    yyjson_val *a;
    yyjson_arr_foreach(args, i, max, a)
    {
        assert_string_not_equal(yyjson_get_str(a), "-t");
    }
    /* what the process was spawned with, and what the engine's command line says */
    yyjson_val *eargs = yyjson_obj_get(m, "engine_args");
    assert_true(has_pair(eargs, "-ngl", "0"));
    assert_true(has_pair(eargs, "-t", "1"));
    assert_true(has_pair(eargs, "-a", "scripted-chat"));
    pid_t pid = (pid_t) yyjson_get_sint(yyjson_obj_get(m, "pid"));
    assert_true(cmdline_has_pair(pid, "-ngl", "0"));
    /* the plan's total has the engine allowance (256 MiB) the budget estimate does not */
    uint64_t bytes = yyjson_get_uint(yyjson_obj_get(m, "bytes"));
    uint64_t total = yyjson_get_uint(yyjson_obj_get(pl, "total_bytes"));
    assert_true(total > bytes && total < bytes + (512ull << 20));
    assert_true(yyjson_get_uint(yyjson_obj_get(pl, "ram_usable_bytes")) >= total);
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    assert_true(qr_t_log_contains(&d, "llama.cpp placement applied"));
    daemon_stop(&d);
}

static void test_placement_refused(void **state)
{
    const char *const env[] = {"QUANTUM_RUNTIME_MEMORY_BUDGET=1125899906842624", NULL};
    struct qr_child d;
    daemon_start_ctx(&d, env, "16777216");
    /* the plan this host gives it: skip where 16 Mi tokens of its KV cache fit in RAM */
    struct qr_t_resp r;
    post(d.port, "/v1/placement",
         "{\"model\":\"scripted-chat\",\"context\":16777216,\"parallel\":1}", &r);
    if (r.status == 200) {
        fprintf(stderr, "scripted-chat at 16 Mi tokens fits this host: %s\n", r.body);
        qr_t_resp_free(&r);
        daemon_stop(&d);
        skip();
    }
    assert_int_equal(r.status, 422);
    qr_t_resp_free(&r);
    unsigned before = children_of(d.pid);

    const char body[] = "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\","
                        "\"content\":\"hi\"}]}";
    post(d.port, "/v1/chat/completions", body, &r);
    fprintf(stderr, "refused, OpenAI: %ld in %.0f ms: %s\n", r.status, r.total_ms, r.body);
    assert_int_equal(r.status, 507);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(jpath(root, "/error/code")), "insufficient_memory");
    const char *msg = yyjson_get_str(jpath(root, "/error/message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "cannot load model 'scripted-chat' on this host: does not fit: "
                                "needs "));
    assert_non_null(strstr(msg, " usable (available "));
    assert_non_null(strstr(msg, "reserve "));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);

    post(d.port, "/api/chat",
         "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r);
    fprintf(stderr, "refused, Ollama: %ld: %s\n", r.status, r.body);
    assert_int_equal(r.status, 507);
    assert_non_null(strstr(r.body, "does not fit: needs "));
    qr_t_resp_free(&r);

    /* nothing was started: no process row, no engine child, the log says why */
    assert_false(loaded(d.port, "scripted-chat").found);
    assert_int_equal(children_of(d.pid), before);
    assert_true(qr_t_log_contains(&d, "llama.cpp placement refused the model"));
    assert_false(qr_t_log_contains(&d, "llama.cpp loading model"));
    qr_t_request("GET", d.port, "/readyz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    daemon_stop(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idle_unload_and_reload),
        cmocka_unit_test(test_budget_estimates),
        cmocka_unit_test(test_budget_lru_eviction),
        cmocka_unit_test(test_budget_busy_not_evicted),
        cmocka_unit_test(test_engine_fails_to_start),
        cmocka_unit_test(test_loading_state),
        cmocka_unit_test(test_placement_applied),
        cmocka_unit_test(test_placement_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
