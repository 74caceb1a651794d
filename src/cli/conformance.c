/* `quantum-runtime conformance --model M (--url URL | --backend B [--engine PATH]) [--report F]
 * [--markdown F] [--json] [--allow-destructive] [--skip IDS] [OPTIONS]`: run the conformance suite
 * (src/conformance/) through a daemon's own API and write its report. With --url the daemon is one
 * already running; without, this command starts `quantum-runtime serve` itself (this binary) with
 * the same configuration (OPTIONS are serve's, read with the same precedence; --backend B;
 * --engine PATH becomes --llama-server PATH) on a free loopback port, waits for /readyz, and
 * stops it afterwards (also on SIGINT). The report is stored as a conformance record (kind
 * "manual") in the evidence store of the daemon's state_dir; with --url only when --state-dir or
 * --config says which one. Cases that break the daemon's engine on purpose (crash.restart) run
 * against a daemon started here, and against --url only with --allow-destructive.
 * stdout: the JSON report with --json, else one line per case; progress on stderr only when it
 * is a terminal. Exit 0 when every case that ran passed, 1 when one failed (or the daemon could
 * not describe the model, or the report could not be written or stored), 2 on a usage or
 * configuration error, 130 when interrupted. docs/CONFORMANCE.md. */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "conformance/cases.h"
#include "conformance/record.h"
#include "conformance/runner.h"
#include "core/config.h"
#include "store/store.h"

extern char **environ;

int qr_cli_conformance(int argc, char **argv); /* the CLI table in main.c */

#define EXIT_USAGE 2

static volatile sig_atomic_t g_interrupted;

struct opts {
    const char *model, *url, *backend, *engine, *report, *markdown, *skip;
    bool json, allow_destructive;
    const char **rest; /* serve options, in order */
    int n_rest;
    bool names_state; /* rest has --state-dir or --config */
};

static int usage(const char *why)
{
    fprintf(stderr,
            "quantum-runtime conformance: %s\n"
            "usage: quantum-runtime conformance --model M (--url URL | --backend B [--engine PATH])"
            " [--report FILE] [--markdown FILE] [--json] [--allow-destructive] [--skip ID,...] "
            "[serve options]\n",
            why);
    return EXIT_USAGE;
}

/* "llamacpp" is the ledger's spelling of serve's "llama.cpp". */
static const char *backend_name(const char *b)
{
    return b && !strcmp(b, "llamacpp") ? "llama.cpp" : b;
}

static int parse(int argc, char **argv, struct opts *o)
{
    o->rest = calloc((size_t) argc + 1, sizeof *o->rest);
    if (!o->rest)
        abort();
    for (int i = 0; i < argc; i++) { /* argv: what follows the command name */
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--model")      ? &o->model
                            : !strcmp(a, "--url")      ? &o->url
                            : !strcmp(a, "--backend")  ? &o->backend
                            : !strcmp(a, "--engine")   ? &o->engine
                            : !strcmp(a, "--report")   ? &o->report
                            : !strcmp(a, "--markdown") ? &o->markdown
                            : !strcmp(a, "--skip")     ? &o->skip
                                                       : NULL;
        if (slot) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return usage("an option needs a value");
            *slot = argv[++i];
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--allow-destructive")) {
            o->allow_destructive = true;
        } else if (!strncmp(a, "--", 2) && a[2]) {
            o->names_state |= !strncmp(a, "--state-dir", 11) || !strncmp(a, "--config", 8);
            o->rest[o->n_rest++] = a; /* a serve option; its value follows as is */
        } else if (o->n_rest > 0) {
            o->rest[o->n_rest++] = a;
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown argument '%.100s'", a);
            return usage(msg);
        }
    }
    if (!o->model)
        return usage("--model is required");
    for (const char *p = o->skip; p && *p;) { /* every --skip id names a case */
        size_t len = strcspn(p, ",");
        bool known = false;
        for (size_t i = 0; i < qr_conf_n_cases() && !known; i++) {
            const char *id = qr_conf_case_get(i)->id;
            known = strlen(id) == len && !memcmp(id, p, len);
        }
        if (!known) {
            char msg[160];
            snprintf(msg, sizeof msg, "--skip: no case '%.*s'", (int) (len < 80 ? len : 80), p);
            return usage(msg);
        }
        p += len + (p[len] == ',');
    }
    if (!o->url && !o->backend)
        return usage("--url of a running daemon, or --backend to start one, is required");
    if (o->url && o->engine)
        return usage("--engine needs a daemon started by this command: drop --url");
    if (o->url && strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))
        return usage("--url must start with http:// or https://");
    o->backend = backend_name(o->backend);
    return 0;
}

static bool write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    bool ok = f && fputs(text, f) >= 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (!ok)
        fprintf(stderr, "quantum-runtime conformance: cannot write '%s'\n", path);
    return ok;
}

/* serve's options for the daemon: rest, then --backend and --llama-server. */
static const char **serve_args(const struct opts *o, size_t *n)
{
    const char **a = calloc((size_t) o->n_rest + 5, sizeof *a);
    if (!a)
        abort();
    size_t k = 0;
    for (int i = 0; i < o->n_rest; i++)
        a[k++] = o->rest[i];
    if (o->backend) {
        a[k++] = "--backend";
        a[k++] = o->backend;
    }
    if (o->engine) {
        a[k++] = "--llama-server";
        a[k++] = o->engine;
    }
    *n = k;
    return a;
}

/* Store the report (kind manual); a line on out says whether and where. false on failure. */
static bool store(const char *state_dir, const char *json, FILE *out)
{
    struct qr_store *s = NULL;
    struct qr_diag d = {{0}};
    int64_t id = 0;
    enum qr_err err = qr_conf_store_open(state_dir, &s, &d);
    if (err == QR_OK)
        err = qr_conf_record_add(s, QR_CONF_KIND_MANUAL, json, &id, &d);
    qr_store_close(s);
    if (err != QR_OK) {
        fprintf(stderr, "quantum-runtime conformance: the report was not stored: %s\n", d.msg);
        return false;
    }
    fprintf(out, "stored: %s/%s (conformance run %lld, kind %s)\n", state_dir, QR_STORE_FILE,
            (long long) id, QR_CONF_KIND_MANUAL);
    return true;
}

static void print_lines(const struct qr_conf_outcome *r)
{
    for (size_t i = 0; i < r->n; i++)
        printf("%-20s %s %7.0f ms  %s\n", r->results[i].id,
               r->results[i].status == QR_CONF_PASS   ? "pass"
               : r->results[i].status == QR_CONF_FAIL ? "FAIL"
                                                      : "skip",
               r->results[i].ms, r->results[i].reason);
}

/* Run against url (or a daemon started here) and report; returns the exit status. */
static int run(const struct opts *o, const struct qr_config *cfg)
{
    bool tty = isatty(STDERR_FILENO) == 1;
    struct qr_conf_daemon dm = {0};
    struct qr_diag d = {{0}};
    const char *url = o->url;
    if (!url) {
        char exe[PATH_MAX], log[PATH_MAX];
        if (!realpath("/proc/self/exe", exe))
            snprintf(exe, sizeof exe, "/proc/self/exe");
        snprintf(log, sizeof log, "%s/conformance-daemon.log", cfg->state_dir);
        size_t n = 0;
        const char **args = serve_args(o, &n);
        qr_conf_interrupt_install(&g_interrupted);
        enum qr_err err =
            qr_conf_daemon_start(exe, args, n, log, QR_CONF_READY_TIMEOUT_MS, &dm, &d);
        free(args);
        if (err != QR_OK) {
            fprintf(stderr, "quantum-runtime conformance: cannot start the daemon: %s\n", d.msg);
            return g_interrupted ? 130 : 1;
        }
        if (tty)
            fprintf(stderr, "conformance: daemon pid %d at %s (log %s)\n", (int) dm.pid, dm.url,
                    log);
        url = dm.url;
    }
    struct qr_conf_outcome r;
    enum qr_err err =
        qr_conf_outcome_run(url, o->model, tty, !o->url || o->allow_destructive, o->skip, &r, &d);
    qr_conf_daemon_stop(&dm, QR_CONF_STOP_TIMEOUT_MS);
    if (g_interrupted) {
        fprintf(stderr, "quantum-runtime conformance: interrupted, nothing stored\n");
        qr_conf_outcome_cleanup(&r);
        return 130;
    }
    if (err != QR_OK) {
        fprintf(stderr, "quantum-runtime conformance: %s\n", d.msg);
        return 1;
    }
    bool ok = (!o->report || write_file(o->report, r.json)) &&
              (!o->markdown || write_file(o->markdown, r.markdown));
    if (ok && o->json) {
        fputs(r.json, stdout);
        fputc('\n', stdout);
    } else if (ok) {
        print_lines(&r);
    }
    FILE *msg = o->json ? stderr : stdout;
    if (cfg && (!o->url || o->names_state))
        ok = store(cfg->state_dir, r.json, msg) && ok;
    else if (!o->json) /* --json: stdout is the report alone */
        fprintf(msg,
                "not stored: the state_dir of the daemon at %s is not known (give "
                "--state-dir or --config to store the report)\n",
                o->url);
    unsigned failed = r.n_fail;
    qr_conf_outcome_cleanup(&r);
    return !ok || failed ? 1 : 0;
}

int qr_cli_conformance(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse(argc, argv, &o);
    struct qr_config cfg;
    bool have_cfg = false;
    if (!rc && (!o.url || o.n_rest > 0)) {
        size_t n = 0;
        const char **args = serve_args(&o, &n);
        struct qr_diag d = {{0}};
        if (qr_config_load(&cfg, (int) n, (char **) args, environ, &d)) {
            fprintf(stderr, "quantum-runtime conformance: invalid configuration: %s\n", d.msg);
            rc = EXIT_USAGE;
        }
        have_cfg = !rc;
        free(args);
    }
    if (!rc && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "quantum-runtime conformance: cannot initialise libcurl\n");
        rc = 1;
    } else if (!rc) {
        rc = run(&o, have_cfg ? &cfg : NULL);
        curl_global_cleanup();
    }
    if (have_cfg)
        qr_config_cleanup(&cfg);
    free(o.rest);
    return rc;
}
