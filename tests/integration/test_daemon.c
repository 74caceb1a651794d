/* The real binary as an operator meets it: the CLI (version, check-config, exit codes), SIGHUP
 * reload, the connection limit, the header timeout, and the access log. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "build_info.h"
#include "gguf/gguf.h"
#include "harness.h"

static struct qr_child replay;

static int setup(void **state)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    qr_t_replay_start(&replay);
    return 0;
}

static int teardown(void **state)
{
    qr_t_stop(&replay, SIGTERM, 5000);
    curl_global_cleanup();
    return 0;
}

static int run(const char *const *env, char **out, const char *a1, const char *a2, const char *a3)
{
    char *argv[] = {QR_TEST_DAEMON, (char *) a1, (char *) a2, (char *) a3, NULL};
    return qr_t_run(argv, env, 20000, out);
}

static void test_version(void **state)
{
    char *out;
    assert_int_equal(run(NULL, &out, "version", NULL, NULL), 0);
    char want[64];
    snprintf(want, sizeof(want), "Quantum Runtime %s (", QR_VERSION);
    assert_memory_equal(out, want, strlen(want));
    assert_string_equal(out + strlen(out) - 2, ")\n");
    assert_non_null(strstr(out, ", "));
    assert_ptr_equal(strchr(out, '\n'), out + strlen(out) - 1); /* exactly one line */
    free(out);
    assert_int_equal(run(NULL, &out, "-version", NULL, NULL), 0); /* predecessor spelling */
    assert_memory_equal(out, want, strlen(want));
    free(out);
    assert_int_equal(run(NULL, &out, "version", "--json", NULL), 0);
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "version")),
                        QR_VERSION);
    yyjson_doc_free(doc);
    free(out);
}

static void test_check_config(void **state)
{
    char *out;
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=very-secret-value", NULL};
    assert_int_equal(run(env, &out, "check-config", NULL, NULL), 0);
    assert_non_null(strstr(out, "listen=127.0.0.1:11450 (default)"));
    assert_non_null(strstr(out, "auth_token=<redacted> (env)"));
    assert_non_null(strstr(out, "auth=true"));
    assert_null(strstr(out, "very-secret-value"));
    free(out);

    assert_int_equal(run(env, &out, "check-config", "--json", NULL), 0);
    assert_null(strstr(out, "very-secret-value"));
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "valid")));
    yyjson_val *t = yyjson_obj_get(yyjson_obj_get(root, "config"), "upstream_timeout");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(t, "milliseconds")), 900000);
    yyjson_doc_free(doc);
    free(out);

    static const char *const bad[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=abc", NULL};
    assert_int_equal(run(bad, &out, "check-config", NULL, NULL), 2);
    assert_non_null(strstr(out, "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT: 'abc' is not a duration"));
    free(out);
    assert_int_equal(run(NULL, &out, "check-config", "--listen", "nohost"), 2);
    assert_non_null(strstr(out, "--listen: 'nohost' is not host:port"));
    free(out);
}

static void test_serve_refuses_bad_setups(void **state)
{
    char *out;
    static const char *const open_bind[] = {"QUANTUM_RUNTIME_LISTEN=0.0.0.0:0", NULL};
    assert_int_equal(run(open_bind, &out, "serve", NULL, NULL), 2);
    assert_non_null(strstr(out, "QUANTUM_RUNTIME_AUTH_TOKEN: required when listening on the "
                                "non-loopback address '0.0.0.0:0'"));
    free(out);

    /* a port already taken: exit 1 naming the address */
    char env_listen[64];
    snprintf(env_listen, sizeof(env_listen), "QUANTUM_RUNTIME_LISTEN=127.0.0.1:%u", replay.port);
    const char *const taken[] = {env_listen, NULL};
    assert_int_equal(run(taken, &out, "serve", NULL, NULL), 1);
    assert_non_null(strstr(out, "cannot bind"));
    free(out);

    assert_int_equal(run(NULL, &out, "no-such-command", NULL, NULL), 2);
    assert_non_null(strstr(out, "unknown command 'no-such-command'"));
    free(out);
    assert_int_equal(run(NULL, &out, "serve", "--bogus", NULL), 2);
    assert_non_null(strstr(out, "unknown option '--bogus'"));
    free(out);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_sighup_reload(void **state)
{
    char path[] = "/tmp/qr-reload-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    write_file(path, "{\"allow_model_mutation\":false}");
    const char *const args[] = {"--config", path, NULL};
    struct qr_child d;
    qr_t_daemon_start_args(&d, replay.port, NULL, args);
    struct qr_t_resp r;
    qr_t_request("DELETE", d.port, "/api/delete", NULL, "{\"model\":\"x\"}", 13, &r);
    assert_int_equal(r.status, 403);
    qr_t_resp_free(&r);

    write_file(path, "{\"allow_model_mutation\":true,\"max_connections\":7}");
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !qr_t_log_contains(&d, "configuration reloaded"); i++)
        usleep(10000);
    assert_true(qr_t_log_contains(&d, "need a restart"));
    qr_t_request("DELETE", d.port, "/api/delete", NULL, "{\"model\":\"x\"}", 13, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);

    /* an invalid file is refused and the running configuration stays */
    write_file(path, "{\"allow_model_mutation\":\"perhaps\"}");
    kill(d.pid, SIGHUP);
    for (int i = 0; i < 500 && !qr_t_log_contains(&d, "reload refused"); i++)
        usleep(10000);
    assert_true(qr_t_log_contains(&d, "reload refused"));
    qr_t_request("DELETE", d.port, "/api/delete", NULL, "{\"model\":\"x\"}", 13, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    unlink(path);
}

static int connect_port(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *) &a, sizeof(a)), 0);
    return fd;
}

static void test_connection_limit_and_header_timeout(void **state)
{
    static const char *const env[] = {"QUANTUM_RUNTIME_MAX_CONNECTIONS=2",
                                      "QUANTUM_RUNTIME_HEADER_TIMEOUT=400ms", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    int a = connect_port(d.port), b = connect_port(d.port);
    usleep(100000); /* let the daemon accept both */
    const char *req = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    char *resp = qr_t_raw(d.port, req, strlen(req), 3000);
    assert_non_null(strstr(resp, "HTTP/1.1 503"));
    assert_non_null(strstr(resp, "\"code\":\"server_busy\""));
    assert_non_null(strstr(resp, "X-Quantum-Request-ID: "));
    free(resp);
    close(a);
    close(b);
    usleep(100000);
    /* a slow head: 408 in the error shape once the header timeout passes */
    const char *partial = "GET /healthz HTTP/1.1\r\nHost: 127";
    resp = qr_t_raw(d.port, partial, strlen(partial), 3000);
    assert_non_null(strstr(resp, "HTTP/1.1 408"));
    assert_non_null(strstr(resp, "\"code\":\"request_timeout\""));
    free(resp);
    /* and the daemon still serves */
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

static void test_access_log(void **state)
{
    static const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=log-secret-token", NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, replay.port, env);
    const char *const hdrs[] = {"Authorization: Bearer log-secret-token", NULL};
    struct qr_t_resp r;
    const char *body = "{\"model\":\"m\",\"prompt\":\"body-marker-xyz\"}";
    qr_t_request("POST", d.port, "/api/generate", hdrs, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    char *rid = qr_t_header(&r, "X-Quantum-Request-ID");
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    char *log = qr_t_read_file(d.log, NULL);
    char want[128];
    snprintf(want, sizeof(want),
             "\"request_id\":\"%s\",\"method\":\"POST\",\"path\":"
             "\"/api/generate\",\"status\":200",
             rid);
    assert_non_null(strstr(log, want));
    assert_null(strstr(log, "log-secret-token"));
    assert_null(strstr(log, "body-marker-xyz"));
    free(log);
    free(rid);
}

/* backend=openai: an OpenAI client's stream is translated, the engine's request id travels as a
 * header, and the engine gets its own key, never the client's token. */
static void test_openai_backend_translation(void **state)
{
    struct qr_child up;
    qr_t_replay_start_dir(&up, QR_TEST_CASES "/npm-replay");
    static const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai",
                                      "QUANTUM_RUNTIME_AUTH_TOKEN=client-token",
                                      "QUANTUM_RUNTIME_OPENAI_API_KEY=engine-key", NULL};
    char url[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", up.port);
    const char *const env2[] = {env[0], env[1], env[2], url, NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, 0, env2);
    const char *const hdrs[] = {"Authorization: Bearer client-token", NULL};
    const char *body = "{\"model\":\"npm-model\",\"stream\":true,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"plain-stream-please\"}]}";
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/v1/chat/completions", hdrs, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    char *uid = qr_t_header(&r, "X-Quantum-Upstream-Request-ID");
    assert_non_null(uid);
    assert_string_equal(uid, "chatcmpl-npmplain1");
    free(uid);
    assert_non_null(strstr(r.body, "data: [DONE]"));
    qr_t_resp_free(&r);
    qr_t_request("GET", up.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_non_null(strstr(r.body, "Bearer engine-key"));
    assert_null(strstr(r.body, "client-token"));
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    qr_t_stop(&up, SIGTERM, 5000);
}

/* backend=openai forwards rerank to the engine's /v1/rerank (query, documents, top_n) and answers
 * in the client's shape: sorted by score, cut to top_n, the documents echoed when asked, the
 * client's model name, usage; a bad body is a 400 that never reaches the engine. */
static void test_openai_backend_rerank(void **state)
{
    struct qr_child up;
    qr_t_replay_start_dir(&up, QR_TEST_CASES "/npm-replay");
    char url[96];
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OPENAI_URL=http://127.0.0.1:%u", up.port);
    const char *const env[] = {"QUANTUM_RUNTIME_BACKEND=openai", url, NULL};
    struct qr_child d;
    qr_t_daemon_start(&d, 0, env);
    const char *body = "{\"model\":\"npm-rerank\",\"query\":\"Hauptstadt\",\"documents\":"
                       "[\"Katzen\",\"Berlin\",\"Paris\"],\"top_n\":2,\"return_documents\":true}";
    struct qr_t_resp r;
    qr_t_request("POST", d.port, "/v1/rerank", NULL, body, strlen(body), &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body,
                        "{\"object\":\"list\",\"model\":\"npm-rerank\",\"results\":["
                        "{\"index\":1,\"relevance_score\":3.25,\"document\":{\"text\":\"Berlin\"}},"
                        "{\"index\":2,\"relevance_score\":0.5,\"document\":{\"text\":\"Paris\"}}],"
                        "\"usage\":{\"prompt_tokens\":17,\"total_tokens\":17}}\n");
    qr_t_resp_free(&r);
    const char *bad = "{\"model\":\"npm-rerank\",\"query\":\"q\"}";
    qr_t_request("POST", d.port, "/rerank", NULL, bad, strlen(bad), &r);
    assert_int_equal(r.status, 400);
    assert_non_null(strstr(r.body, "\"param\":\"documents\""));
    qr_t_resp_free(&r);
    qr_t_request("GET", up.port, "/__replay/requests", NULL, NULL, 0, &r);
    assert_non_null(strstr(r.body, "/v1/rerank"));
    assert_non_null(strstr(r.body, "\\\"query\\\":\\\"Hauptstadt\\\""));
    assert_non_null(strstr(r.body, "\\\"top_n\\\":2"));
    assert_null(strstr(r.body, "return_documents")); /* the Runtime echoes the documents itself */
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    qr_t_stop(&up, SIGTERM, 5000);
}

/* inspect: the architecture contract of a written file, text and JSON; bad input exits 1/2. */
static void test_inspect(void **state)
{
    char path[] = "/tmp/qr-inspect-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", qr_slice_str("toyarch"));
    qr_gguf_writer_add_u32(w, "toyarch.block_count", 2);
    qr_gguf_writer_add_u32(w, "toyarch.embedding_length", 8);
    qr_gguf_writer_add_u32(w, "toyarch.expert_count", 4);
    qr_gguf_writer_add_u32(w, "toyarch.expert_used_count", 1);
    uint64_t emb[2] = {8, 16}, exps[3] = {8, 4, 4};
    qr_gguf_writer_add_tensor(w, "token_embd.weight", 0, 2, emb, NULL, 0);
    qr_gguf_writer_add_tensor(w, "blk.0.ffn_up_exps.weight", 0, 3, exps, NULL, 0);
    struct qr_diag d;
    assert_int_equal(qr_gguf_writer_write_file(w, path, &d), QR_OK);
    qr_gguf_writer_free(w);
    char *out;
    assert_int_equal(run(NULL, &out, "inspect", path, "--json"), 0);
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    free(out);
    assert_int_equal(run(NULL, &out, "inspect", path, NULL), 0);
    assert_non_null(strstr(out, "toyarch"));
    free(out);
    yyjson_doc_free(doc);
    assert_int_equal(run(NULL, &out, "inspect", NULL, NULL), 2);
    free(out);
    assert_int_equal(run(NULL, &out, "inspect", "/nonexistent.gguf", NULL), 1);
    assert_non_null(strstr(out, "/nonexistent.gguf"));
    free(out);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_check_config),
        cmocka_unit_test(test_serve_refuses_bad_setups),
        cmocka_unit_test(test_sighup_reload),
        cmocka_unit_test(test_connection_limit_and_header_timeout),
        cmocka_unit_test(test_access_log),
        cmocka_unit_test(test_openai_backend_translation),
        cmocka_unit_test(test_openai_backend_rerank),
        cmocka_unit_test(test_inspect),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
