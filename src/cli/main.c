/* quantum-runtime: the command-line entry point. One table lists every subcommand with its
 * handler and help line; later subcommands are one row each. Subcommands that print data take
 * --json. Configuration errors exit 2, as the predecessor did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "api/api.h"
#include "build_info.h"
#include "cli/client.h"
#include "core/config.h"
#include "core/log.h"
#include "core/sdnotify.h"

extern char **environ;

#define EXIT_CONFIG 2

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *usage;
    const char *help;
};

static int cmd_serve(int argc, char **argv);
static int cmd_version(int argc, char **argv);
static int cmd_check_config(int argc, char **argv);
static int cmd_help(int argc, char **argv);
int qr_cli_inspect(int argc, char **argv);   /* src/cli/inspect.c */
int qr_cli_host(int argc, char **argv);      /* src/cli/host.c */
int qr_cli_calibrate(int argc, char **argv); /* src/cli/calibrate.c */
int qr_cli_plan(int argc, char **argv);      /* src/cli/plan.c */
int qr_cli_bench(int argc, char **argv);     /* src/cli/bench.c */

int qr_cli_conformance(int argc, char **argv); /* src/cli/conformance.c */
int qr_cli_ledger(int argc, char **argv);      /* src/cli/ledger.c */

static const struct command commands[] = {
    {"serve", cmd_serve, "serve [--config FILE] [OPTIONS]",
     "run the daemon (Ollama /api/*, native /v1/*, /healthz, /readyz)"},
    {"version", cmd_version, "version [--json]", "print the version, commit and build date"},
    {"check-config", cmd_check_config, "check-config [--json] [--config FILE] [OPTIONS]",
     "validate the configuration and print it with secrets redacted"},
    {"inspect", qr_cli_inspect, "inspect FILE|DIR [--ctx N] [--json] [ENGINE]",
     "print a model's architecture contract and memory sizing (a GGUF file, or a Hugging Face\n"
     "      config.json or the directory holding it)\n"
     "      ENGINE (llama-server's flags and defaults): --parallel N, --kv-unified|--no-kv-unified,"
     " --batch N, --ubatch N, --flash-attn on|off, --non-causal"},
    {"host", qr_cli_host, "host [--json]",
     "print the host profile and limits: CPUs, physical cores, NUMA, memory, storage,\n"
     "      accelerators, affinity, cgroup cpuset/quota/memory, virtualization (GET /v1/host)"},
    {"calibrate", qr_cli_calibrate,
     "calibrate [--model FILE] [--budget-ms N] [--memory-only] [--json] [OPTIONS]",
     "measure memory bandwidth and llama-server prefill/decode tokens/s per thread count and\n"
     "      store the run in the evidence store (POST /v1/host/calibrate); without --model a\n"
     "      generated <state_dir>/calibration.gguf; OPTIONS as for serve"},
    {"plan", qr_cli_plan,
     "plan --model NAME|FILE [--ctx N] [--parallel N] [--prefer auto|cpu|hybrid|gpu] [--json]",
     "print the placement plan for a model on this host without running it: tiers, memory,\n"
     "      threads, NUMA, llama-server arguments, or the refusal with its numbers (POST\n"
     "      /v1/placement); also --allow-acceleration, --allow-nvme-cold-tier, --kv-type T,\n"
     "      --threads N, --reserve-ram-bytes N, --config FILE. Exit 3 when the model does not fit"},
    {"bench", qr_cli_bench,
     "bench --model X --ab native,override[:KEY=VALUE,...] [--ctx N] [--reps N] [--json]",
     "controlled A/B of the engine's native context against an override (same prompt, runs\n"
     "      interleaved): TTFT, prefill/decode tok/s, RSS, KV with spread, stored as evidence;\n"
     "      also --prompt-tokens N, --gen-tokens N, --workload FILE, --threads N; --guard prints\n"
     "      the regression guard's verdict (docs/BENCHMARK-AB.md). Exit 3 when not verified"},
    {"conformance", qr_cli_conformance, "conformance --model M (--url URL|--backend B)",
     "run the conformance suite through a daemon's OpenAI API: each case passes, fails or is\n"
     "      skipped when the model does not claim its capabilities (docs/CONFORMANCE.md). Without\n"
     "      --url it starts `serve` itself with OPTIONS (--engine PATH: --llama-server PATH) and\n"
     "      stops it after; the report is stored as evidence in state_dir. Also --report FILE,\n"
     "      --markdown FILE, --json, --allow-destructive, --skip ID,... Exit 1 when a case failed"},
    {"ledger", qr_cli_ledger, "ledger evaluate|promote|show [OPTIONS]",
     "test-gated engine promotion (docs/CONFORMANCE.md): `evaluate --backend llamacpp --engine\n"
     "      PATH [--model M]` runs the suite and a decode measurement on the pinned and the\n"
     "      candidate llama-server side by side, stores both, writes a candidate entry and a\n"
     "      known-bad block per regression to <state_dir>/upstream-ledger.local.json (exit 1 on a\n"
     "      regression); `promote [--candidate ID]` marks it tested only when it passed all the\n"
     "      pinned build passed and decode is within the 5% guard; `show [--json]` lists it"},
    {"models", qr_cli_models, "models [--json] [--host URL] [--token T]",
     "list a running daemon's models (GET /v1/models): backend, capabilities and their states,\n"
     "      context. --host URL or $QUANTUM_RUNTIME_HOST (default from QUANTUM_RUNTIME_LISTEN,\n"
     "      else http://127.0.0.1:11450); --token or $QUANTUM_RUNTIME_AUTH_TOKEN (docs/CLI.md)"},
    {"ps", qr_cli_ps, "ps [--json] [--host URL] [--token T]",
     "list the models a running daemon has loaded (GET /api/ps): size, processor, until"},
    {"show", qr_cli_show, "show MODEL [--json] [--host URL] [--token T]",
     "describe a model (POST /api/show): architecture, parameters, context, capabilities"},
    {"run", qr_cli_run,
     "run MODEL [PROMPT] [--think|--no-think] [--hide-thinking] [--json] [--host URL]",
     "send one prompt (else stdin) to a running daemon (POST /api/chat) and stream the answer;\n"
     "      thinking dimmed on a terminal. Exit 3: daemon unreachable, 4: unknown model, 130:\n"
     "      interrupted"},
    {"help", cmd_help, "help", "show this help"},
};

/* Remove --json from argv (in place) and report whether it was there. */
static bool take_json_flag(int *argc, char **argv)
{
    bool found = false;
    int w = 0;
    for (int i = 0; i < *argc; i++) {
        if (!strcmp(argv[i], "--json"))
            found = true;
        else
            argv[w++] = argv[i];
    }
    *argc = w;
    return found;
}

static void usage(FILE *out)
{
    fprintf(out, "Quantum Runtime %s -- engine-neutral local inference runtime\n\n", QR_VERSION);
    fprintf(out, "usage: quantum-runtime <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < QR_ARRAY_LEN(commands); i++)
        fprintf(out, "  %-48s %s\n", commands[i].usage, commands[i].help);
    fprintf(out, "\noptions (serve, check-config); each also reads its environment variable and "
                 "the --config JSON file key:\n");
    fprintf(out, "  %-26s %s\n", "--config FILE", "JSON object of the settings below (file keys)");
    qr_config_print_help(out);
    fprintf(out, "\nprecedence: flag > environment > config file > default. "
                 "Bad configuration exits 2.\n");
}

static int cmd_help(int argc, char **argv)
{
    usage(stdout);
    return 0;
}

static int cmd_version(int argc, char **argv)
{
    bool json = take_json_flag(&argc, argv);
    if (argc > 0) {
        fprintf(stderr, "quantum-runtime version: unexpected argument '%s'\n", argv[0]);
        return EXIT_CONFIG;
    }
    if (json)
        printf("{\"name\":\"Quantum Runtime\",\"version\":\"%s\",\"commit\":\"%s\","
               "\"build_date\":\"%s\"}\n",
               QR_VERSION, QR_COMMIT, QR_BUILD_DATE);
    else
        printf("Quantum Runtime %s (%s, %s)\n", QR_VERSION, QR_COMMIT, QR_BUILD_DATE);
    return 0;
}

static bool wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    }
    return false;
}

static int cmd_check_config(int argc, char **argv)
{
    bool json = take_json_flag(&argc, argv);
    if (wants_help(argc, argv))
        return cmd_help(0, NULL);
    struct qr_config cfg;
    struct qr_diag diag = {{0}};
    if (qr_config_load(&cfg, argc, argv, environ, &diag)) {
        if (json)
            printf("{\"valid\":false,\"error\":\"%s\"}\n", diag.msg); /* diag has no quotes */
        fprintf(stderr, "quantum-runtime: invalid configuration: %s\n", diag.msg);
        return EXIT_CONFIG;
    }
    qr_config_print(&cfg, json, stdout);
    qr_config_cleanup(&cfg);
    return 0;
}

static int cmd_serve(int argc, char **argv)
{
    if (wants_help(argc, argv))
        return cmd_help(0, NULL);
    struct qr_config cfg;
    struct qr_diag diag = {{0}};
    if (qr_config_load(&cfg, argc, argv, environ, &diag)) {
        fprintf(stderr, "quantum-runtime: invalid configuration: %s\n", diag.msg);
        return EXIT_CONFIG;
    }
    /* The changelist folds an event_del + event_add of one fd within a loop pass into nothing,
     * which saves epoll_ctl calls on every proxied request. */
    struct event_config *ecfg = event_config_new();
    if (ecfg)
        event_config_set_flag(ecfg, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = ecfg ? event_base_new_with_config(ecfg) : NULL;
    if (ecfg)
        event_config_free(ecfg);
    if (!base) {
        fprintf(stderr, "quantum-runtime: cannot create the event loop\n");
        qr_config_cleanup(&cfg);
        return 1;
    }
    struct qr_app app = {.argc = argc, .argv = argv, .envp = environ};
    int rc = 0;
    if (qr_app_init(&app, base, &cfg, &diag)) {
        QR_LOG(QR_LOG_ERROR, "cannot start", QR_LF_S("error", diag.msg));
        fprintf(stderr, "quantum-runtime: cannot start: %s\n", diag.msg);
        rc = 1;
    } else {
        /* systemd (Type=notify): ready once listening with the backends open; the watchdog pets
         * from this loop, so a hung loop gets the service restarted (core/sdnotify.h) */
        struct qr_sdnotify_watchdog *wd = NULL;
        if (qr_sdnotify_send("READY=1\nSTATUS=serving", &diag) ||
            qr_sdnotify_watchdog_start(base, &diag, &wd))
            QR_LOG(QR_LOG_WARN, "systemd notification failed", QR_LF_S("error", diag.msg));
        event_base_dispatch(base);
        qr_sdnotify_watchdog_free(wd);
        rc = app.exit_code;
        qr_app_cleanup(&app);
        QR_LOG0(QR_LOG_INFO, "stopped");
    }
    event_base_free(base);
    qr_config_cleanup(&cfg);
    return rc;
}

int main(int argc, char **argv)
{
    /* The predecessor's flag forms keep working: -version, -check-config. Flags without a
     * command mean serve. */
    const char *name = "serve";
    int first = 1;
    if (argc > 1) {
        const char *a = argv[1];
        first = 2;
        if (!strcmp(a, "-version") || !strcmp(a, "--version"))
            name = "version";
        else if (!strcmp(a, "-check-config") || !strcmp(a, "--check-config"))
            name = "check-config";
        else if (!strcmp(a, "-h") || !strcmp(a, "--help"))
            name = "help";
        else if (a[0] == '-')
            first = 1;
        else
            name = a;
    }
    for (size_t i = 0; i < QR_ARRAY_LEN(commands); i++) {
        if (!strcmp(commands[i].name, name))
            return commands[i].fn(argc - first, argv + first);
    }
    fprintf(stderr, "quantum-runtime: unknown command '%s'\n\n", name);
    usage(stderr);
    return EXIT_CONFIG;
}
