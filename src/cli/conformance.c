/* `quantum-runtime conformance --model M --url URL [--report F] [--markdown F] [--json]`: run the
 * conformance suite (src/conformance/) against a running daemon's own API and write its report.
 * stdout: the JSON report with --json, else one line per case; progress on stderr only when it is
 * a terminal. Exit 0 when every case that ran passed, 1 when one failed (or the daemon could not
 * describe the model), 2 on a usage error. docs/CONFORMANCE.md. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "conformance/cases.h"
#include "conformance/suite.h"

int qr_cli_conformance(int argc, char **argv); /* the CLI table in main.c */

#define EXIT_USAGE 2

struct opts {
    const char *model, *url, *report, *markdown;
    bool json;
};

static int usage(const char *why)
{
    fprintf(stderr,
            "quantum-runtime conformance: %s\n"
            "usage: quantum-runtime conformance --model M --url URL [--report FILE] "
            "[--markdown FILE] [--json]\n",
            why);
    return EXIT_USAGE;
}

static int parse(int argc, char **argv, struct opts *o)
{
    for (int i = 0; i < argc; i++) { /* argv: what follows the command name */
        const char *a = argv[i];
        const char **slot = !strcmp(a, "--model")      ? &o->model
                            : !strcmp(a, "--url")      ? &o->url
                            : !strcmp(a, "--report")   ? &o->report
                            : !strcmp(a, "--markdown") ? &o->markdown
                                                       : NULL;
        if (slot) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return usage("an option needs a value");
            *slot = argv[++i];
        } else if (!strcmp(a, "--json")) {
            o->json = true;
        } else {
            char msg[160];
            snprintf(msg, sizeof msg, "unknown argument '%.100s'", a);
            return usage(msg);
        }
    }
    if (!o->model || !o->url)
        return usage("--model and --url are required");
    if (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))
        return usage("--url must start with http:// or https://");
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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

int qr_cli_conformance(int argc, char **argv)
{
    struct opts o = {0};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "quantum-runtime conformance: cannot initialise libcurl\n");
        return 1;
    }
    char started[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    double t0 = now_ms();
    struct qr_conf_ctx c = {
        .url = o.url, .model = o.model, .context_length = -1, .timeout_ms = 120000};
    char err[256];
    if (qr_conf_probe(&c, err, sizeof err) != QR_OK) {
        fprintf(stderr, "quantum-runtime conformance: %s\n", err);
        qr_conf_ctx_cleanup(&c);
        curl_global_cleanup();
        return 1;
    }
    size_t n = qr_conf_n_cases();
    struct qr_conf_result *res = calloc(n, sizeof *res);
    if (!res)
        abort();
    qr_conf_run(&c, res, isatty(STDERR_FILENO) == 1);
    double ms = now_ms() - t0;
    char *json = qr_conf_report_json(&c, res, n, started, ms);
    char *md = qr_conf_report_markdown(&c, res, n, started, ms);
    bool ok = json && md;
    if (ok && o.report)
        ok = write_file(o.report, json);
    if (ok && o.markdown)
        ok = write_file(o.markdown, md);
    unsigned failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += res[i].status == QR_CONF_FAIL;
    if (ok && o.json) {
        fputs(json, stdout);
        fputc('\n', stdout);
    } else if (ok) {
        for (size_t i = 0; i < n; i++)
            printf("%-20s %s %7.0f ms  %s\n", res[i].id,
                   res[i].status == QR_CONF_PASS   ? "pass"
                   : res[i].status == QR_CONF_FAIL ? "FAIL"
                                                   : "skip",
                   res[i].ms, res[i].reason);
    }
    free(json);
    free(md);
    free(res);
    qr_conf_ctx_cleanup(&c);
    curl_global_cleanup();
    return !ok || failed ? 1 : 0;
}
