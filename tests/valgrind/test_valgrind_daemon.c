/* The daemon under valgrind's memcheck, start to serve to stop: `quantum-runtime serve` runs
 * inside valgrind (--leak-check=full, definite and indirect leaks count as errors, --track-fds,
 * the llama-server child not traced) with (a) backend=ollama in front of qr-replay and (b)
 * backend=llama.cpp managing the generated scripted model. Each gets a model list, a whole and a
 * streamed chat with their exact answers and an error request in the API's own shape, then SIGTERM:
 * the daemon must exit 0 (valgrind's --error-exitcode=99 turns any error into 99), report
 * "ERROR SUMMARY: 0 errors" and hold no descriptor at exit that it opened itself. Registered only
 * in builds without sanitizers (tests/CMakeLists.txt). docs/RELIABILITY.md "Sanitizers, TSan and
 * valgrind". */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

extern char **environ;

static struct qr_child replay, running; /* running: the daemon under valgrind of a test */
static char work[64];

static const char GREETING[] =
    "Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß.";

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

/* The daemon under valgrind, its output (valgrind's report included) in vg->log. Waits up to 60 s
 * for the listening line: valgrind makes start-up some 20-30 times slower. */
static void vg_start(struct qr_child *vg, const char *tag, const char *const *env_extra,
                     const char *const *args)
{
    memset(vg, 0, sizeof *vg);
    snprintf(vg->dir, sizeof vg->dir, "%s/%s", work, tag);
    assert_int_equal(mkdir(vg->dir, 0700), 0);
    snprintf(vg->log, sizeof vg->log, "%s/out.log", vg->dir);
    char state[320];
    snprintf(state, sizeof state, "QUANTUM_RUNTIME_STATE_DIR=%s/state", vg->dir);
    char *envp[128];
    size_t n = 0;
    for (char **e = environ; *e && n < 100; e++)
        if (strncmp(*e, "QUANTUM_RUNTIME_", 16))
            envp[n++] = *e;
    envp[n++] = "QUANTUM_RUNTIME_LISTEN=127.0.0.1:0";
    envp[n++] = state;
    for (const char *const *e = env_extra; e && *e && n < 126; e++)
        envp[n++] = (char *) *e;
    envp[n] = NULL;
    char *argv[32] = {QR_TEST_VALGRIND,
                      "--error-exitcode=99",
                      "--leak-check=full",
                      "--errors-for-leak-kinds=definite,indirect",
                      "--track-fds=yes",
                      "--trace-children=no",
                      "--suppressions=" QR_TEST_VALGRIND_SUPP,
                      QR_TEST_DAEMON,
                      "serve"};
    size_t a = 9;
    for (const char *const *p = args; p && *p && a < 31; p++)
        argv[a++] = (char *) *p;
    argv[a] = NULL;
    vg->pid = fork();
    assert_true(vg->pid >= 0);
    if (vg->pid == 0) {
        int fd = open(vg->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(127);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    double deadline = now_ms() + 60000;
    while (now_ms() < deadline) {
        char *text = qr_t_read_file(vg->log, NULL);
        char *p = text ? strstr(text, "\"port\":") : NULL;
        long port = p ? strtol(p + 7, NULL, 10) : 0;
        free(text);
        if (port > 0 && port < 65536) {
            vg->port = (uint16_t) port;
            return;
        }
        int st;
        if (waitpid(vg->pid, &st, WNOHANG) == vg->pid) {
            vg->pid = 0;
            fail_msg("the daemon under valgrind exited early; see %s", vg->log);
        }
        usleep(20000);
    }
    fail_msg("the daemon under valgrind did not listen within 60 s; see %s", vg->log);
}

/* SIGTERM, exit status 0, and valgrind's report clean: no error, no descriptor the daemon opened
 * still open at exit (inherited ones are the test's, not the daemon's). */
static void vg_stop_clean(struct qr_child *vg)
{
    int rc = qr_t_stop(vg, SIGTERM, 30000);
    char *log = qr_t_read_file(vg->log, NULL);
    assert_non_null(log);
    if (rc != 0 || !strstr(log, "ERROR SUMMARY: 0 errors"))
        fprintf(stderr, "valgrind log (%s):\n%s\n", vg->log, log);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(log, "ERROR SUMMARY: 0 errors"));
    assert_non_null(strstr(log, "FILE DESCRIPTORS:"));
    for (char *p = strstr(log, "Open file descriptor "); p;
         p = strstr(p + 1, "Open file descriptor ")) {
        char *next = strstr(p + 1, "Open file descriptor ");
        char *inh = strstr(p, "<inherited from parent>");
        if (!inh || (next && inh > next)) {
            fprintf(stderr, "descriptor left open by the daemon:\n%.400s\n", p);
            fail();
        }
    }
    free(log);
}

static int setup(void **state)
{
    snprintf(work, sizeof work, "/tmp/qr-test-valgrind-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(work))
        return -1;
    char models[96], *out = NULL;
    snprintf(models, sizeof models, "%s/models", work);
    if (mkdir(models, 0700) != 0)
        return -1;
    char *gen[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    int rc = qr_t_run(gen, NULL, 60000, &out);
    if (rc != 0)
        fprintf(stderr, "qr-gen-scripted failed: %s\n", out ? out : "");
    free(out);
    if (rc != 0)
        return -1;
    qr_t_replay_start(&replay);
    return 0;
}

static int teardown(void **state)
{
    if (running.pid > 0) /* a test that failed half-way */
        qr_t_stop(&running, SIGKILL, 5000);
    if (replay.pid > 0)
        qr_t_stop(&replay, SIGTERM, 5000);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", work);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", work);
    return 0;
}

static void req(struct qr_child *vg, const char *method, const char *target, const char *body,
                long status, const char *expect)
{
    const char *const hdrs[] = {"Content-Type: application/json", NULL};
    struct qr_t_resp r;
    qr_t_request(method, vg->port, target, hdrs, body, body ? strlen(body) : 0, &r);
    if (r.status != status || !strstr(r.body, expect))
        fprintf(stderr, "%s %s: %ld %s\n", method, target, r.status, r.body);
    assert_int_equal(r.status, status);
    assert_non_null(strstr(r.body, expect));
    qr_t_resp_free(&r);
}

static void test_ollama_backend(void **state)
{
    char url[96];
    snprintf(url, sizeof url, "QUANTUM_RUNTIME_OLLAMA_URL=http://127.0.0.1:%u", replay.port);
    const char *const env[] = {url, NULL};
    vg_start(&running, "ollama", env, NULL);
    static const char CHAT[] =
        "{\"model\":\"llama3.2:1b\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[256];
    req(&running, "GET", "/api/tags", NULL, 200, "\"name\":\"llama3.2:1b\"");
    snprintf(body, sizeof body, "%s,\"stream\":true}", CHAT);
    req(&running, "POST", "/api/chat", body, 200, "\"done\":true");
    snprintf(body, sizeof body, "%s,\"stream\":false}", CHAT);
    req(&running, "POST", "/api/chat", body, 200, "\"content\":\"Hello! How can I help?\"");
    snprintf(body, sizeof body, "%s}", CHAT);
    req(&running, "POST", "/v1/chat/completions", body, 200,
        "\"content\":\"Hello! How can I help?\"");
    req(&running, "POST", "/v1/chat/completions", "{\"model\":", 400, "\"code\":\"invalid_json\"");
    vg_stop_clean(&running);
}

static void test_llamacpp_backend(void **state)
{
    char models[96];
    snprintf(models, sizeof models, "%s/models", work);
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    vg_start(&running, "llamacpp", NULL, args);
    static const char CHAT[] = "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\","
                               "\"content\":\"hi\"}],\"chat_template_kwargs\":{\"enable_thinking\":"
                               "false}";
    char body[512], expect[256];
    req(&running, "GET", "/v1/models", NULL, 200, "\"id\":\"scripted-chat\"");
    snprintf(body, sizeof body, "%s}", CHAT);
    snprintf(expect, sizeof expect, "\"content\":\"%s\"", GREETING);
    req(&running, "POST", "/v1/chat/completions", body, 200, expect);
    snprintf(body, sizeof body, "%s,\"stream\":true}", CHAT);
    req(&running, "POST", "/v1/chat/completions", body, 200, "data: [DONE]");
    req(&running, "POST", "/api/chat",
        "{\"model\":\"scripted-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
        "\"think\":false,\"stream\":true}",
        200, "\"done\":true");
    req(&running, "POST", "/v1/chat/completions",
        "{\"model\":\"nope\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", 404,
        "\"code\":\"model_not_found\"");
    vg_stop_clean(&running);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ollama_backend),
        cmocka_unit_test(test_llamacpp_backend),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
