/* The client subcommands (src/cli/client.c) through the real binary against the real daemon
 * running the real llama-server on the scripted model (qr-gen-scripted, tests/fixtures/SCRIPT.md):
 * `models`, `ps` and `show` print their tables and the daemon's JSON with --json; `run` streams
 * the script's exact greeting, its thinking plain without a terminal and dimmed (SGR 2) on a
 * pseudo-terminal unless NO_COLOR is set; SIGINT during an endless answer exits 130 at once; the
 * exit codes for an unreachable daemon (3), an unknown model (4), a usage error (2) and a missing
 * token (1) are the documented ones (docs/CLI.md); a slow model load shows one line per phase on
 * stderr, or a spinner cleared before the answer on a terminal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <yyjson.h>

#include "harness.h"

extern char **environ;

static struct qr_child daemon_;
static char models[64];
static char host[64];

static const char GREETING[] =
    "Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß.";
static const char REASONING[] = "Der Nutzer grüßt. Ich antworte kurz: 2+2=4.\n";
static const char ANSWER[] = "Die Antwort ist 4. Schöne Grüße!";

struct cli_out {
    int rc; /* exit status, 128+signal, -1 on timeout */
    char out[65536], err[65536];
    size_t out_len, err_len;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1e6;
}

/* In the child: a clean QUANTUM_RUNTIME_* environment, then env ("NAME=value", may be NULL). */
static void child_env(const char *const *env)
{
    for (char **e = environ; *e;) {
        if (!strncmp(*e, "QUANTUM_RUNTIME_", 16) || !strncmp(*e, "NO_COLOR=", 9)) {
            char name[256];
            size_t n = strcspn(*e, "=");
            snprintf(name, sizeof name, "%.*s", (int) n, *e);
            unsetenv(name);
        } else {
            e++;
        }
    }
    for (const char *const *e = env; e && *e; e++)
        putenv((char *) *e);
}

static void exec_cli(const char *const *args)
{
    char *argv[16];
    size_t n = 0;
    argv[n++] = QR_TEST_DAEMON;
    for (const char *const *a = args; *a && n < 15; a++)
        argv[n++] = (char *) *a;
    argv[n] = NULL;
    execv(argv[0], argv);
    _exit(127);
}

static int wait_exit(pid_t pid, double deadline)
{
    int st;
    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(2000);
    }
}

/* Run the CLI with stdin from `in` (NULL: empty), stdout and stderr captured apart; with
 * sigint_after > 0 SIGINT is sent once stdout holds that many bytes. Bounded by 60 s. */
static void cli_run(const char *const *args, const char *const *env, const char *in,
                    size_t sigint_after, struct cli_out *o)
{
    int pin[2], pout[2], perr[2];
    assert_int_equal(pipe(pin), 0);
    assert_int_equal(pipe(pout), 0);
    assert_int_equal(pipe(perr), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        child_env(env);
        exec_cli(args);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    if (in && write(pin[1], in, strlen(in)) != (ssize_t) strlen(in))
        fail_msg("cannot write stdin");
    close(pin[1]);
    memset(o, 0, sizeof *o);
    double deadline = now_ms() + 60000;
    bool open_out = true, open_err = true, sent = false;
    while ((open_out || open_err) && now_ms() < deadline) {
        struct pollfd p[2] = {{open_out ? pout[0] : -1, POLLIN, 0},
                              {open_err ? perr[0] : -1, POLLIN, 0}};
        if (poll(p, 2, 100) <= 0)
            continue;
        if (p[0].revents) {
            ssize_t r = read(pout[0], o->out + o->out_len, sizeof o->out - 1 - o->out_len);
            open_out = r > 0;
            o->out_len += r > 0 ? (size_t) r : 0;
        }
        if (p[1].revents) {
            ssize_t r = read(perr[0], o->err + o->err_len, sizeof o->err - 1 - o->err_len);
            open_err = r > 0;
            o->err_len += r > 0 ? (size_t) r : 0;
        }
        if (sigint_after && !sent && o->out_len >= sigint_after) {
            kill(pid, SIGINT);
            sent = true;
            deadline = now_ms() + 5000; /* it must end promptly */
        }
    }
    close(pout[0]);
    close(perr[0]);
    o->rc = wait_exit(pid, deadline);
}

/* Run the CLI on a pseudo-terminal (stdin, stdout and stderr); everything it wrote in o->out. */
static void cli_run_pty(const char *const *args, const char *const *env, struct cli_out *o)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    assert_true(pid >= 0);
    if (pid == 0) {
        child_env(env);
        exec_cli(args);
    }
    memset(o, 0, sizeof *o);
    double deadline = now_ms() + 60000;
    while (now_ms() < deadline) {
        struct pollfd p = {master, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(master, o->out + o->out_len, sizeof o->out - 1 - o->out_len);
        if (r <= 0)
            break; /* EIO once the child has exited */
        o->out_len += (size_t) r;
    }
    close(master);
    o->rc = wait_exit(pid, deadline);
}

static void cli(const char *const *args, struct cli_out *o)
{
    const char *const env[] = {host, NULL};
    cli_run(args, env, NULL, 0, o);
}

static int setup(void **state)
{
    snprintf(models, sizeof models, "/tmp/qr-test-cli-%d-XXXXXX", (int) getpid());
    if (!mkdtemp(models))
        return -1;
    char *out = NULL;
    char *gen[] = {QR_TEST_GEN_SCRIPTED, models, NULL};
    if (qr_t_run(gen, NULL, 60000, &out) != 0) {
        fprintf(stderr, "qr-gen-scripted failed: %s\n", out ? out : "");
        free(out);
        return -1;
    }
    free(out);
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    qr_t_daemon_start_args(&daemon_, 0, NULL, args);
    snprintf(host, sizeof host, "QUANTUM_RUNTIME_HOST=http://127.0.0.1:%u",
             (unsigned) daemon_.port);
    return 0;
}

static int teardown(void **state)
{
    if (daemon_.pid > 0)
        qr_t_stop(&daemon_, SIGTERM, 10000);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", models);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", models);
    return 0;
}

static yyjson_val *find_by(yyjson_val *arr, const char *key, const char *value)
{
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        const char *s = yyjson_get_str(yyjson_obj_get(v, key));
        if (s && !strcmp(s, value))
            return v;
    }
    return NULL;
}

/* The table row (line) that starts with name, copied into row; false when there is none. */
static bool table_row(const char *text, const char *name, char *row, size_t n)
{
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (!strncmp(l, name, strlen(name)) && l[strlen(name)] == ' ') {
            snprintf(row, n, "%.*s", (int) strcspn(l, "\n"), l);
            return true;
        }
    }
    return false;
}

/* ---- listings, before anything is loaded ---- */

static void test_models(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"models", NULL}, &o);
    assert_int_equal(o.rc, 0);
    assert_true(!strncmp(o.out, "NAME ", 5));
    assert_non_null(strstr(o.out, "BACKEND"));
    assert_non_null(strstr(o.out, "CAPABILITIES"));
    char row[1024];
    assert_true(table_row(o.out, "scripted-chat", row, sizeof row));
    assert_non_null(strstr(row, "llama.cpp"));

    cli((const char *const[]){"models", "--json", NULL}, &o);
    assert_int_equal(o.rc, 0);
    yyjson_doc *d = yyjson_read(o.out, o.out_len, 0);
    assert_non_null(d);
    yyjson_val *m = find_by(yyjson_obj_get(yyjson_doc_get_root(d), "data"), "id", "scripted-chat");
    assert_non_null(m);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(m, "backend")), "llama.cpp");
    yyjson_doc_free(d);
}

static void test_ps_empty(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"ps", NULL}, &o);
    assert_int_equal(o.rc, 0);
    assert_true(!strncmp(o.out, "NAME ", 5));
    assert_non_null(strstr(o.out, "PROCESSOR"));
    assert_null(strstr(o.out, "scripted-chat")); /* nothing loaded yet */
}

static void test_show(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"show", "scripted-chat", NULL}, &o);
    assert_int_equal(o.rc, 0);
    assert_non_null(strstr(o.out, "architecture"));
    assert_non_null(strstr(o.out, "Capabilities"));
    assert_non_null(strstr(o.out, "completion"));

    cli((const char *const[]){"show", "scripted-chat", "--json", NULL}, &o);
    assert_int_equal(o.rc, 0);
    yyjson_doc *d = yyjson_read(o.out, o.out_len, 0);
    assert_non_null(d);
    assert_true(yyjson_is_obj(yyjson_obj_get(yyjson_doc_get_root(d), "details")));
    yyjson_doc_free(d);

    cli((const char *const[]){"show", "no-such-model", NULL}, &o);
    assert_int_equal(o.rc, 4);
    assert_int_equal(o.out_len, 0);
    assert_non_null(strstr(o.err, "404"));
}

/* ---- run ---- */

static void test_run_plain(void **state)
{
    /* the first run loads the model: any load progress goes to stderr, never stdout */
    struct cli_out o;
    cli((const char *const[]){"run", "scripted-chat", "hi", "--no-think", NULL}, &o);
    assert_int_equal(o.rc, 0);
    char want[512];
    snprintf(want, sizeof want, "%s\n", GREETING);
    assert_string_equal(o.out, want);
    fprintf(stderr, "first run stderr: %s\n", o.err);

    /* the prompt from stdin, --host instead of the environment */
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/", (unsigned) daemon_.port);
    cli_run((const char *const[]){"run", "scripted-chat", "--no-think", "--host", url, NULL}, NULL,
            "hi\n", 0, &o);
    assert_int_equal(o.rc, 0);
    assert_string_equal(o.out, want);
    assert_int_equal(o.err_len, 0); /* loaded: no progress */
}

static void test_run_thinking_plain(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"run", "scripted-chat", "hi", "--think", NULL}, &o);
    assert_int_equal(o.rc, 0);
    char want[512];
    snprintf(want, sizeof want, "%s\n%s\n", REASONING, ANSWER); /* blank line between */
    assert_string_equal(o.out, want);
    assert_null(strchr(o.out, '\x1b'));

    cli((const char *const[]){"run", "scripted-chat", "hi", "--think", "--hide-thinking", NULL},
        &o);
    assert_int_equal(o.rc, 0);
    snprintf(want, sizeof want, "%s\n", ANSWER);
    assert_string_equal(o.out, want);
}

static void test_run_thinking_tty(void **state)
{
    const char *const env[] = {host, NULL};
    struct cli_out o;
    cli_run_pty((const char *const[]){"run", "scripted-chat", "hi", "--think", NULL}, env, &o);
    assert_int_equal(o.rc, 0);
    const char *dim = strstr(o.out, "\x1b[2mDer Nutzer grüßt.");
    assert_non_null(dim);
    const char *reset = strstr(dim, "\x1b[0m");
    assert_non_null(reset);
    const char *answer = strstr(o.out, ANSWER);
    assert_non_null(answer);
    assert_true(reset < answer); /* the answer itself is not dimmed */

    const char *const nc[] = {host, "NO_COLOR=1", NULL};
    cli_run_pty((const char *const[]){"run", "scripted-chat", "hi", "--think", NULL}, nc, &o);
    assert_int_equal(o.rc, 0);
    assert_non_null(strstr(o.out, "Der Nutzer grüßt."));
    assert_non_null(strstr(o.out, ANSWER));
    assert_null(strstr(o.out, "\x1b[2m"));
}

static void test_run_json(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"run", "scripted-chat", "hi", "--no-think", "--json", NULL}, &o);
    assert_int_equal(o.rc, 0);
    yyjson_doc *d = yyjson_read(o.out, o.out_len, 0);
    assert_non_null(d);
    yyjson_val *root = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(yyjson_ptr_get(root, "/message/content")), GREETING);
    assert_true(yyjson_get_bool(yyjson_obj_get(root, "done")));
    yyjson_doc_free(d);
}

static void test_ps_loaded(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"ps", NULL}, &o);
    assert_int_equal(o.rc, 0);
    char row[1024];
    assert_true(table_row(o.out, "scripted-chat", row, sizeof row));
    assert_non_null(strstr(row, "llama.cpp"));
    assert_non_null(strstr(row, "100% CPU"));

    cli((const char *const[]){"ps", "--json", NULL}, &o);
    assert_int_equal(o.rc, 0);
    yyjson_doc *d = yyjson_read(o.out, o.out_len, 0);
    assert_non_null(d);
    assert_non_null(
        find_by(yyjson_obj_get(yyjson_doc_get_root(d), "models"), "name", "scripted-chat"));
    yyjson_doc_free(d);
}

static void test_run_interrupted(void **state)
{
    /* [[long]] never ends: SIGINT once text arrived cancels the request and exits 130 */
    const char *const env[] = {host, NULL};
    struct cli_out o;
    double t0 = now_ms();
    cli_run((const char *const[]){"run", "scripted-chat", "[[long]]", "--no-think", NULL}, env,
            NULL, 40, &o);
    assert_int_equal(o.rc, 130);
    assert_true(now_ms() - t0 < 30000);
    assert_non_null(strstr(o.out, "Zähle: eins"));
    assert_non_null(strstr(o.err, "interrupted"));
    /* the daemon is still serving */
    cli((const char *const[]){"run", "scripted-chat", "hi", "--no-think", NULL}, &o);
    assert_int_equal(o.rc, 0);
    assert_non_null(strstr(o.out, GREETING));
}

/* ---- exit codes ---- */

static void test_exit_codes(void **state)
{
    struct cli_out o;
    cli((const char *const[]){"run", "no-such-model", "hi", NULL}, &o);
    assert_int_equal(o.rc, 4);
    assert_int_equal(o.out_len, 0);

    cli((const char *const[]){"run", NULL}, &o);
    assert_int_equal(o.rc, 2);
    cli((const char *const[]){"models", "extra", NULL}, &o);
    assert_int_equal(o.rc, 2);
    cli((const char *const[]){"ps", "--bogus", NULL}, &o);
    assert_int_equal(o.rc, 2);
    cli((const char *const[]){"show", NULL}, &o);
    assert_int_equal(o.rc, 2);

    /* a closed loopback port: cannot reach the daemon */
    const char *const closed[] = {"QUANTUM_RUNTIME_HOST=127.0.0.1:1", NULL};
    cli_run((const char *const[]){"models", NULL}, closed, NULL, 0, &o);
    assert_int_equal(o.rc, 3);
    assert_non_null(strstr(o.err, "cannot reach the daemon at http://127.0.0.1:1"));
    cli_run((const char *const[]){"run", "scripted-chat", "hi", NULL}, closed, NULL, 0, &o);
    assert_int_equal(o.rc, 3);
}

/* The llama-server the daemon found, behind a wrapper that takes 2 s to start it. */
static void slow_engine(char *path, size_t n)
{
    struct qr_t_resp r;
    qr_t_request("GET", daemon_.port, "/v1/backends", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *d = yyjson_read(r.body, r.body_len, 0);
    const char *engine =
        yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), "/backends/0/engine/path"));
    assert_non_null(engine);
    snprintf(path, n, "%s/slow-llama-server", models);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n[ \"$1\" = --version ] || sleep 2\nexec '%s' \"$@\"\n",
            engine ? engine : "");
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, 0755), 0);
    yyjson_doc_free(d);
    qr_t_resp_free(&r);
}

static void test_token_and_load_progress(void **state)
{
    /* a daemon that wants a token and loads slowly */
    char engine[200], env_engine[260];
    slow_engine(engine, sizeof engine);
    snprintf(env_engine, sizeof env_engine, "QUANTUM_RUNTIME_LLAMA_SERVER=%s", engine);
    struct qr_child d;
    const char *const env[] = {"QUANTUM_RUNTIME_AUTH_TOKEN=s3cret", env_engine, NULL};
    const char *const args[] = {
        "--backend", "llama.cpp",   "--models-dir", models, "--llama-threads",
        "1",         "--llama-ctx", "1024",         NULL};
    qr_t_daemon_start_args(&d, 0, env, args);
    char h[64];
    snprintf(h, sizeof h, "QUANTUM_RUNTIME_HOST=127.0.0.1:%u", (unsigned) d.port);

    /* without the token: exit 1 naming the variable; with --token or the variable: served */
    const char *const no_token[] = {h, NULL};
    struct cli_out o;
    cli_run((const char *const[]){"models", NULL}, no_token, NULL, 0, &o);
    assert_int_equal(o.rc, 1);
    assert_non_null(strstr(o.err, "401"));
    assert_non_null(strstr(o.err, "QUANTUM_RUNTIME_AUTH_TOKEN"));
    cli_run((const char *const[]){"models", "--token", "s3cret", NULL}, no_token, NULL, 0, &o);
    assert_int_equal(o.rc, 0);
    assert_true(table_row(o.out, "scripted-chat", (char[1024]){0}, 1024));

    /* the first run waits for the load: one plain line per phase on stderr, the answer alone on
     * stdout */
    const char *const with_env[] = {h, env[0], NULL};
    cli_run((const char *const[]){"run", "scripted-chat", "hi", "--no-think", NULL}, with_env, NULL,
            0, &o);
    assert_int_equal(o.rc, 0);
    char want[512];
    snprintf(want, sizeof want, "%s\n", GREETING);
    assert_string_equal(o.out, want);
    assert_non_null(strstr(o.err, "quantum-runtime run: scripted-chat: starting\n"));
    assert_non_null(strstr(o.err, "quantum-runtime run: scripted-chat: loaded ("));

    /* unloaded again, on a terminal: a spinner line that is cleared before the answer */
    struct qr_t_resp r;
    const char *const auth[] = {"Authorization: Bearer s3cret", NULL};
    const char unload[] = "{\"model\":\"scripted-chat\",\"keep_alive\":0}";
    qr_t_request("POST", d.port, "/api/generate", auth, unload, strlen(unload), &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);
    cli_run_pty((const char *const[]){"run", "scripted-chat", "hi", "--no-think", NULL}, with_env,
                &o);
    assert_int_equal(o.rc, 0);
    const char *spin = strstr(o.out, " loading scripted-chat (");
    assert_non_null(spin);
    const char *clear = strstr(spin, "\r\x1b[K");
    assert_non_null(clear);
    assert_true(clear < strstr(o.out, GREETING));
    qr_t_stop(&d, SIGTERM, 10000);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_models),
        cmocka_unit_test(test_ps_empty),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_run_plain),
        cmocka_unit_test(test_run_thinking_plain),
        cmocka_unit_test(test_run_thinking_tty),
        cmocka_unit_test(test_run_json),
        cmocka_unit_test(test_ps_loaded),
        cmocka_unit_test(test_run_interrupted),
        cmocka_unit_test(test_exit_codes),
        cmocka_unit_test(test_token_and_load_progress),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
