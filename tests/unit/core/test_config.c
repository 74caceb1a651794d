/* Configuration table: defaults, precedence (file < env < flag), validation messages that name
 * the key, Go-compatible durations and booleans, listen-address classification, reload. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"

static char *no_env[] = {"HOME=/home/tester", NULL};

static void test_defaults(void **state)
{
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 0, NULL, no_env, &d), QR_OK);
    assert_string_equal(c.listen, "127.0.0.1:11450");
    assert_string_equal(c.listen_host, "127.0.0.1");
    assert_int_equal(c.listen_port, 11450);
    assert_true(c.listen_loopback);
    assert_string_equal(c.backend, "ollama");
    assert_string_equal(c.ollama_url, "http://127.0.0.1:11434");
    assert_int_equal(c.upstream_timeout_ms, 15 * 60 * 1000);
    assert_int_equal(c.max_request_bytes, 134217728);
    assert_false(c.allow_model_mutation);
    assert_string_equal(c.auth_token, "");
    assert_int_equal(c.source[QR_CFG_LISTEN], QR_SRC_DEFAULT);
    if (geteuid() == 0)
        assert_string_equal(c.state_dir, "/var/lib/quantum-runtime");
    else
        assert_string_equal(c.state_dir, "/home/tester/.local/state/quantum-runtime");
    char want[512];
    snprintf(want, sizeof(want), "%s/models", c.state_dir);
    assert_string_equal(c.models_dir, want);
    qr_config_cleanup(&c);
}

static void test_systemd_state_directory(void **state)
{
    char *env[] = {"STATE_DIRECTORY=/var/lib/qr-svc:/other", NULL};
    struct qr_config c;
    assert_int_equal(qr_config_load(&c, 0, NULL, env, NULL), QR_OK);
    assert_string_equal(c.state_dir, "/var/lib/qr-svc");
    assert_string_equal(c.models_dir, "/var/lib/qr-svc/models");
    qr_config_cleanup(&c);
}

static void test_env_and_flags(void **state)
{
    char *env[] = {
        "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT= 90s ", "QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION=T",
        "QUANTUM_RUNTIME_MAX_REQUEST_BYTES=2MiB", "QUANTUM_RUNTIME_LISTEN=",
        "QUANTUM_RUNTIME_STATE_DIR=/srv/qr",      NULL};
    char *argv[] = {"--upstream-timeout", "1m30s", "--allow-model-mutation=false",
                    "--log-format=text"};
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 4, argv, env, &d), QR_OK);
    assert_int_equal(c.upstream_timeout_ms, 90000);
    assert_int_equal(c.source[QR_CFG_UPSTREAM_TIMEOUT], QR_SRC_FLAG);
    assert_false(c.allow_model_mutation); /* flag beats env */
    assert_int_equal(c.max_request_bytes, 2 * 1024 * 1024);
    assert_int_equal(c.source[QR_CFG_MAX_REQUEST_BYTES], QR_SRC_ENV);
    assert_string_equal(c.listen, "127.0.0.1:11450");    /* empty env = default */
    assert_string_equal(c.models_dir, "/srv/qr/models"); /* follows state_dir */
    assert_string_equal(c.log_format, "text");
    qr_config_cleanup(&c);
}

static void expect_error(char **env, int argc, char **argv, const char *needle)
{
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, argc, argv, env, &d), QR_ERR_CONFIG);
    if (!strstr(d.msg, needle))
        fail_msg("diag '%s' does not contain '%s'", d.msg, needle);
}

static void test_errors_name_the_key(void **state)
{
    char *e1[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=15", NULL};
    expect_error(e1, 0, NULL, "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT: '15' is not a duration");
    char *e2[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=0", NULL};
    expect_error(e2, 0, NULL, "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT");
    char *e3[] = {"QUANTUM_RUNTIME_MAX_REQUEST_BYTES=1000", NULL};
    expect_error(e3, 0, NULL, "QUANTUM_RUNTIME_MAX_REQUEST_BYTES: '1000' is out of range");
    char *e4[] = {"QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION=yes", NULL};
    expect_error(e4, 0, NULL, "QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION: 'yes' is not a boolean");
    char *e5[] = {"QUANTUM_RUNTIME_OLLAMA_URL=http://user:pw@host:1", NULL};
    expect_error(e5, 0, NULL, "credentials in the URL are not allowed");
    char *e6[] = {"QUANTUM_RUNTIME_OLLAMA_URL=ftp://host", NULL};
    expect_error(e6, 0, NULL, "QUANTUM_RUNTIME_OLLAMA_URL");
    char *e7[] = {"QUANTUM_RUNTIME_BACKEND=vllm", NULL};
    expect_error(e7, 0, NULL, "QUANTUM_RUNTIME_BACKEND: 'vllm' is not one of: ollama");
    char *e8[] = {"QUANTUM_RUNTIME_LISTEN=0.0.0.0:11450", NULL};
    expect_error(e8, 0, NULL, "QUANTUM_RUNTIME_AUTH_TOKEN: required");
    char *e9[] = {"QUANTUM_RUNTIME_LISTEN=::1:80", NULL};
    expect_error(e9, 0, NULL, "QUANTUM_RUNTIME_LISTEN");
    char *a1[] = {"--no-such-flag"};
    expect_error(no_env, 1, a1, "unknown option '--no-such-flag'");
    char *a2[] = {"--listen"};
    expect_error(no_env, 1, a2, "--listen: a value is required");
    char *a3[] = {"--state-dir=relative/path"};
    expect_error(no_env, 1, a3, "--state-dir: 'relative/path' is not an absolute path");
}

static void test_non_loopback_with_token(void **state)
{
    char *env[] = {"QUANTUM_RUNTIME_LISTEN=0.0.0.0:9", "QUANTUM_RUNTIME_AUTH_TOKEN=s3cret", NULL};
    struct qr_config c;
    assert_int_equal(qr_config_load(&c, 0, NULL, env, NULL), QR_OK);
    assert_false(c.listen_loopback);
    assert_string_equal(c.auth_token, "s3cret");
    /* check-config never prints the secret */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    qr_config_print(&c, false, f);
    qr_config_print(&c, true, f);
    fclose(f);
    assert_null(strstr(buf, "s3cret"));
    assert_non_null(strstr(buf, "auth_token=<redacted> (env)"));
    assert_non_null(strstr(buf, "auth=true"));
    free(buf);
    qr_config_cleanup(&c);
}

static void test_durations(void **state)
{
    uint64_t ms;
    assert_int_equal(qr_config_parse_duration_ms("15m", &ms), QR_OK);
    assert_int_equal(ms, 900000);
    assert_int_equal(qr_config_parse_duration_ms("1h30m", &ms), QR_OK);
    assert_int_equal(ms, 5400000);
    assert_int_equal(qr_config_parse_duration_ms("1.5s", &ms), QR_OK);
    assert_int_equal(ms, 1500);
    assert_int_equal(qr_config_parse_duration_ms("250ms", &ms), QR_OK);
    assert_int_equal(ms, 250);
    assert_int_equal(qr_config_parse_duration_ms("0", &ms), QR_OK);
    assert_int_equal(ms, 0);
    assert_int_equal(qr_config_parse_duration_ms("10", &ms), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_duration_ms("-1s", &ms), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_duration_ms("5 m", &ms), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_duration_ms("5d", &ms), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_duration_ms("", &ms), QR_ERR_CONFIG);
}

static void test_bools_and_bytes(void **state)
{
    bool b;
    const char *yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    const char *no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(qr_config_parse_bool(yes[i], &b), QR_OK);
        assert_true(b);
        assert_int_equal(qr_config_parse_bool(no[i], &b), QR_OK);
        assert_false(b);
    }
    assert_int_equal(qr_config_parse_bool("yes", &b), QR_ERR_CONFIG);
    uint64_t n;
    assert_int_equal(qr_config_parse_bytes("1048576", &n), QR_OK);
    assert_int_equal(n, 1048576);
    assert_int_equal(qr_config_parse_bytes("128MiB", &n), QR_OK);
    assert_int_equal(n, 134217728);
    assert_int_equal(qr_config_parse_bytes("99999999999999999999", &n), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_bytes("17179869184G", &n), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_bytes("-1", &n), QR_ERR_CONFIG);
    assert_int_equal(qr_config_parse_bytes("12MB", &n), QR_ERR_CONFIG);
}

static void test_listen(void **state)
{
    struct {
        const char *in;
        enum qr_err err;
        const char *host;
        unsigned port;
        bool loopback;
    } cases[] = {
        {"127.0.0.1:11450", QR_OK, "127.0.0.1", 11450, true},
        {"127.9.9.9:1", QR_OK, "127.9.9.9", 1, true},
        {"localhost:80", QR_OK, "localhost", 80, true},
        {"LocalHost:80", QR_OK, "LocalHost", 80, true},
        {"[::1]:11450", QR_OK, "::1", 11450, true},
        {"[::]:11450", QR_OK, "::", 11450, false},
        {"0.0.0.0:0", QR_OK, "0.0.0.0", 0, false},
        {":11450", QR_OK, "", 11450, false},
        {"10.1.2.3:11450", QR_OK, "10.1.2.3", 11450, false},
        {"127.0.0.1", QR_ERR_CONFIG, NULL, 0, false},
        {"127.0.0.1:65536", QR_ERR_CONFIG, NULL, 0, false},
        {"127.0.0.1:-1", QR_ERR_CONFIG, NULL, 0, false},
        {"::1:80", QR_ERR_CONFIG, NULL, 0, false},
        {"[::1:80", QR_ERR_CONFIG, NULL, 0, false},
        {"a b:80", QR_ERR_CONFIG, NULL, 0, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *host = NULL;
        uint16_t port = 0;
        bool loop = false;
        enum qr_err err = qr_config_parse_listen(cases[i].in, &host, &port, &loop);
        assert_int_equal(err, cases[i].err);
        if (err)
            continue;
        assert_string_equal(host, cases[i].host);
        assert_int_equal(port, cases[i].port);
        assert_int_equal(loop, cases[i].loopback);
        free(host);
    }
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/qr-config-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
    close(fd);
    return path;
}

static void test_config_file(void **state)
{
    char *path = write_tmp("{\"listen\":\"127.0.0.1:9999\",\"max_request_bytes\":2097152,"
                           "\"allow_model_mutation\":true,\"upstream_timeout\":\"2m\"}");
    char *env[] = {"QUANTUM_RUNTIME_UPSTREAM_TIMEOUT=3m", NULL};
    char *argv[] = {"--config", path};
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 2, argv, env, &d), QR_OK);
    assert_int_equal(c.listen_port, 9999);
    assert_int_equal(c.source[QR_CFG_LISTEN], QR_SRC_FILE);
    assert_int_equal(c.max_request_bytes, 2097152);
    assert_true(c.allow_model_mutation);
    assert_int_equal(c.upstream_timeout_ms, 180000); /* env beats file */
    qr_config_cleanup(&c);
    unlink(path);
    free(path);

    char *bad1 = write_tmp("{\"lisen\":\"x\"}");
    char *a1[] = {"--config", bad1};
    expect_error(no_env, 2, a1, "key 'lisen' is not a known setting");
    char *bad2 = write_tmp("{\"allow_model_mutation\":\"maybe\"}");
    char *a2[] = {"--config", bad2};
    expect_error(no_env, 2, a2, "key 'allow_model_mutation': 'maybe' is not a boolean");
    char *bad3 = write_tmp("[1,2");
    char *a3[] = {"--config", bad3};
    expect_error(no_env, 2, a3, "is not valid JSON");
    char *bad4 = write_tmp("{\"max_connections\":true}");
    char *a4[] = {"--config", bad4};
    expect_error(no_env, 2, a4, "key 'max_connections' has the wrong type");
    char *a5[] = {"--config", "/nonexistent/qr.json"};
    expect_error(no_env, 2, a5, "--config: cannot open '/nonexistent/qr.json'");
    char *paths[] = {bad1, bad2, bad3, bad4};
    for (int i = 0; i < 4; i++) {
        unlink(paths[i]);
        free(paths[i]);
    }
}

/* registry_dirs: ':'-separated absolute paths in env and flags, a string or an array in a file. */
static void test_registry_dirs(void **state)
{
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 0, NULL, no_env, &d), QR_OK);
    assert_string_equal(c.registry_dirs, "");
    assert_true(c.hash_models);
    qr_config_cleanup(&c);

    char *env[] = {"QUANTUM_RUNTIME_REGISTRY_DIRS=/etc/qr/models:/srv/models",
                   "QUANTUM_RUNTIME_HASH_MODELS=false", NULL};
    assert_int_equal(qr_config_load(&c, 0, NULL, env, &d), QR_OK);
    assert_string_equal(c.registry_dirs, "/etc/qr/models:/srv/models");
    assert_int_equal(c.source[QR_CFG_REGISTRY_DIRS], QR_SRC_ENV);
    assert_false(c.hash_models);
    qr_config_cleanup(&c);

    char *path = write_tmp("{\"registry_dirs\":[\"/a\",\"/b/c\"]}");
    char *argv[] = {"--config", path};
    assert_int_equal(qr_config_load(&c, 2, argv, no_env, &d), QR_OK);
    assert_string_equal(c.registry_dirs, "/a:/b/c");
    qr_config_cleanup(&c);
    unlink(path);
    free(path);

    char *bad_env[] = {"QUANTUM_RUNTIME_REGISTRY_DIRS=/ok:relative/dir", NULL};
    expect_error(bad_env, 0, NULL,
                 "QUANTUM_RUNTIME_REGISTRY_DIRS: 'relative/dir' is not an absolute path");
    char *bad = write_tmp("{\"registry_dirs\":[\"/a:b\"]}");
    char *a1[] = {"--config", bad};
    expect_error(no_env, 2, a1, "every item must be a path string without ':'");
    unlink(bad);
    free(bad);
    char *bad2 = write_tmp("{\"registry_dirs\":7}");
    char *a2[] = {"--config", bad2};
    expect_error(no_env, 2, a2, "has the wrong type (expected a string or an array of strings)");
    unlink(bad2);
    free(bad2);
}

/* backend=llama.cpp and its settings: defaults, env and flag forms, ranges. */
static void test_llamacpp_keys(void **state)
{
    struct qr_config c;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&c, 0, NULL, no_env, &d), QR_OK);
    assert_string_equal(c.llama_server, "");
    assert_int_equal(c.llama_ctx, 4096);
    assert_int_equal(c.llama_parallel, 1);
    assert_int_equal(c.llama_threads, 0);
    assert_int_equal(c.memory_budget, 0);
    assert_int_equal(c.keep_alive_ms, 5 * 60 * 1000);
    qr_config_cleanup(&c);

    char *env[] = {"QUANTUM_RUNTIME_BACKEND=llama.cpp", "QUANTUM_RUNTIME_MEMORY_BUDGET=2GiB",
                   "QUANTUM_RUNTIME_KEEP_ALIVE=0", NULL};
    char *argv[] = {"--llama-server",
                    "/opt/llama/llama-server",
                    "--llama-ctx",
                    "1024",
                    "--llama-parallel=2",
                    "--llama-threads",
                    "1"};
    assert_int_equal(qr_config_load(&c, 7, argv, env, &d), QR_OK);
    assert_string_equal(c.backend, "llama.cpp");
    assert_string_equal(c.llama_server, "/opt/llama/llama-server");
    assert_int_equal(c.llama_ctx, 1024);
    assert_int_equal(c.llama_parallel, 2);
    assert_int_equal(c.llama_threads, 1);
    assert_int_equal(c.memory_budget, 2ull << 30);
    assert_int_equal(c.keep_alive_ms, 0);
    qr_config_cleanup(&c);

    char *bad[] = {"--llama-parallel", "0"};
    assert_int_equal(qr_config_load(&c, 2, bad, no_env, &d), QR_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "--llama-parallel"));
    char *bad_backend[] = {"QUANTUM_RUNTIME_BACKEND=llamacpp", NULL};
    assert_int_equal(qr_config_load(&c, 0, NULL, bad_backend, &d), QR_ERR_CONFIG);
    assert_non_null(strstr(d.msg, "llama.cpp"));
}

static void test_reload(void **state)
{
    char *path = write_tmp("{\"allow_model_mutation\":false,\"listen\":\"127.0.0.1:1111\"}");
    char *argv[] = {"--config", path};
    struct qr_config c;
    assert_int_equal(qr_config_load(&c, 2, argv, no_env, NULL), QR_OK);
    FILE *f = fopen(path, "w");
    fputs("{\"allow_model_mutation\":true,\"listen\":\"127.0.0.1:2222\"}", f);
    fclose(f);
    struct qr_diag warn = {{0}}, d = {{0}};
    assert_int_equal(qr_config_reload(&c, 2, argv, no_env, &warn, &d), QR_OK);
    assert_true(c.allow_model_mutation);   /* reloadable */
    assert_int_equal(c.listen_port, 1111); /* needs a restart */
    assert_string_equal(warn.msg, "listen");
    f = fopen(path, "w");
    fputs("{\"allow_model_mutation\":\"nope\"}", f);
    fclose(f);
    assert_int_equal(qr_config_reload(&c, 2, argv, no_env, &warn, &d), QR_ERR_CONFIG);
    assert_true(c.allow_model_mutation); /* untouched */
    qr_config_cleanup(&c);
    unlink(path);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_systemd_state_directory),
        cmocka_unit_test(test_env_and_flags),
        cmocka_unit_test(test_errors_name_the_key),
        cmocka_unit_test(test_non_loopback_with_token),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_bools_and_bytes),
        cmocka_unit_test(test_listen),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_registry_dirs),
        cmocka_unit_test(test_llamacpp_keys),
        cmocka_unit_test(test_reload),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
