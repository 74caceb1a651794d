/* The conformance runner's process side: start `quantum-runtime serve` as a child with a given
 * configuration on a free loopback port, wait for /readyz, stop it (SIGTERM, then SIGKILL after a
 * bound; also from a SIGINT/SIGTERM handler), and run the suite (suite.h) against a daemon into a
 * finished report. Also the two measurements `ledger evaluate` needs from a running daemon: the
 * serving engine's build names (GET /v1/backends engine.names) and a short decode throughput
 * sample (a streamed generation of a fixed number of tokens). docs/CONFORMANCE.md.
 *
 * Area prefix: qr_conf_. Blocking CLI code: never run on the daemon's event loop. */
#ifndef QR_CONFORMANCE_RUNNER_H
#define QR_CONFORMANCE_RUNNER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conformance/suite.h"
#include "core/err.h"

#define QR_CONF_READY_TIMEOUT_MS 60000u /* /readyz of a daemon this runner started */
#define QR_CONF_STOP_TIMEOUT_MS  10000u /* SIGTERM -> exit, then SIGKILL */
#define QR_CONF_MAX_DAEMONS      4u     /* started daemons the signal handler knows of */
#define QR_CONF_MAX_NAMES        4u     /* engine build names kept */
#define QR_CONF_NAME_MAX         64u

/* A daemon this process started. */
struct qr_conf_daemon {
    pid_t pid; /* 0: not running */
    uint16_t port;
    char url[48];        /* http://127.0.0.1:PORT */
    char log_path[4200]; /* its stdout and stderr */
};

/* Start `exe serve ARGS... --listen 127.0.0.1:<free port>` with the inherited environment, its
 * output in log_path (truncated), in its own process group, and wait (at most ready_ms) until
 * GET /readyz answers 200. A daemon that exits before it is ready is started again on another
 * port when its log says the port was taken (twice at most). args (borrowed, n_args strings) are
 * serve's options. On failure nothing is left running and diag says why (with the log's last
 * line). */
enum qr_err qr_conf_daemon_start(const char *exe, const char *const *args, size_t n_args,
                                 const char *log_path, unsigned ready_ms,
                                 struct qr_conf_daemon *out, struct qr_diag *diag);

/* SIGTERM, wait up to timeout_ms, then SIGKILL and reap. Safe on a stopped daemon. */
void qr_conf_daemon_stop(struct qr_conf_daemon *d, unsigned timeout_ms);

/* Install SIGINT/SIGTERM handlers that set *flag (borrowed; static storage) and send SIGTERM to
 * every daemon started and not yet stopped. */
void qr_conf_interrupt_install(volatile sig_atomic_t *flag);

/* One finished suite run. Strings malloc'd, owned by the struct (qr_conf_outcome_cleanup). */
struct qr_conf_outcome {
    char *json;     /* the report, quantum.runtime/conformance-report/v1alpha1 */
    char *markdown; /* the Markdown summary */
    unsigned n_pass, n_fail, n_skip;
    struct qr_conf_result *results; /* n entries, in case-table order */
    size_t n;
};

/* Probe the daemon at url about model, run every case, format the report. destructive: cases that
 * break the daemon's engine on purpose may run (qr_conf_ctx.destructive: the daemon was started
 * for this run, or the user allowed it). The report's
 * engine_version is the serving engine's most specific build name (the last of engine.names,
 * e.g. "b11669"; engine.version when there are none), so a record names one build; reasons cut
 * inside a UTF-8 sequence are trimmed to whole characters. QR_ERR_NOT_FOUND / QR_ERR_UPSTREAM as
 * qr_conf_probe (nothing was run). skip: qr_conf_ctx.skip. */
enum qr_err qr_conf_outcome_run(const char *url, const char *model, bool progress, bool destructive,
                                const char *skip, struct qr_conf_outcome *out,
                                struct qr_diag *diag);
void qr_conf_outcome_cleanup(struct qr_conf_outcome *o);

/* The engine behind one backend of a running daemon (GET /v1/backends). */
struct qr_conf_engine {
    char id[64], kind[32];
    char version[QR_CONF_NAME_MAX];
    char path[4096];
    char names[QR_CONF_MAX_NAMES][QR_CONF_NAME_MAX]; /* engine.names, in the daemon's order */
    size_t n_names;
};

/* backend: the backend id; NULL or "" = the default one (the first listed). QR_ERR_NOT_FOUND
 * when no such backend, QR_ERR_UPSTREAM when the daemon did not answer. */
enum qr_err qr_conf_engine_get(const char *url, const char *backend, struct qr_conf_engine *out,
                               struct qr_diag *diag);

/* The chat models (capabilities include "text") that the backend eng (its id or kind) serves
 * and whose artifact file the daemon found (a size_bytes in the OpenAI list), from GET
 * /v1/models, into out[0..max); returns how many were found (may exceed max). Names
 * longer than 127 bytes are skipped. QR_ERR_UPSTREAM in *err when the daemon did not answer. */
size_t qr_conf_chat_models(const char *url, const struct qr_conf_engine *eng, char (*out)[128],
                           size_t max, enum qr_err *err, struct qr_diag *diag);

/* One decode throughput sample: a streamed chat completion of model asking for gen_tokens tokens
 * (the scripted test model's [[long]] mode; reasoning off when think_off), tokens/s between the
 * first and the last text delta. QR_ERR_UPSTREAM when the request failed or fewer than 4 text
 * deltas came. */
enum qr_err qr_conf_decode_sample(const char *url, const char *model, unsigned gen_tokens,
                                  bool think_off, double *out_tps, struct qr_diag *diag);

#endif
