/* Integration-test harness: start the real daemon and the real replay server as child processes
 * on ephemeral loopback ports, talk to them over HTTP with libcurl, and stop them with signals.
 * Every wait is bounded; children are killed at exit if a test fails half-way. */
#ifndef QR_TEST_HARNESS_H
#define QR_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct qr_child {
    pid_t pid;
    uint16_t port;
    char log[300]; /* stdout+stderr of the child */
    char dir[256]; /* scratch directory of the child */
};

/* Start qr-replay on the transcripts in tests/cases/replay; fills c->port. */
void qr_t_replay_start(struct qr_child *c);

/* Same, on another transcript directory. */
void qr_t_replay_start_dir(struct qr_child *c, const char *dir);

/* Start `quantum-runtime serve` with QUANTUM_RUNTIME_LISTEN=127.0.0.1:0, a private state dir,
 * QUANTUM_RUNTIME_OLLAMA_URL pointing at upstream_port (0: a closed port), plus env_extra
 * ("NAME=value", NULL-terminated, may be NULL). Waits until it logs its port. */
void qr_t_daemon_start(struct qr_child *c, uint16_t upstream_port, const char *const *env_extra);

/* Same, with extra command-line arguments after `serve` (NULL-terminated, may be NULL). */
void qr_t_daemon_start_args(struct qr_child *c, uint16_t upstream_port,
                            const char *const *env_extra, const char *const *args);

/* Run a command to completion (bounded by timeout_ms), capturing stdout+stderr into *out
 * (malloc'd). env_extra entries are added to the inherited environment. Returns the exit
 * status, or -1 on timeout. */
int qr_t_run(char *const argv[], const char *const *env_extra, int timeout_ms, char **out);

/* Send sig and wait up to timeout_ms for exit; returns the exit status (128+sig if killed by a
 * signal, -1 if it had to be SIGKILLed). */
int qr_t_stop(struct qr_child *c, int sig, int timeout_ms);

/* Does the child's log contain needle? */
bool qr_t_log_contains(const struct qr_child *c, const char *needle);

struct qr_t_resp {
    long status;
    int curl_rc;   /* CURLcode of the transfer */
    char *headers; /* raw response header block */
    char *body;    /* NUL-terminated */
    size_t body_len;
    double first_byte_ms; /* from request start to the first body byte (-1: none) */
    double total_ms;
    unsigned chunks; /* number of body deliveries */
};

/* One request. headers: "Name: value" strings, NULL-terminated (may be NULL). timeout 20 s. */
void qr_t_request(const char *method, uint16_t port, const char *target, const char *const *headers,
                  const char *body, size_t body_len, struct qr_t_resp *out);
void qr_t_resp_free(struct qr_t_resp *r);

/* Value of the first response header with this name (case-insensitive), malloc'd, or NULL. */
char *qr_t_header(const struct qr_t_resp *r, const char *name);

/* Raw exchange over a plain socket: send `raw`, read until the server closes or timeout_ms. */
char *qr_t_raw(uint16_t port, const char *raw, size_t len, int timeout_ms);

/* The replay server on port: forget the requests it recorded (true when it answered 200), and
 * every request it recorded, oldest first, as a parsed JSON array (tests/replay/README.md;
 * free with yyjson_doc_free; NULL when it did not answer with JSON). */
bool qr_t_replay_reset(uint16_t port);
struct yyjson_doc *qr_t_replay_requests(uint16_t port);

/* Read a whole file (test fixtures), NUL-terminated. */
char *qr_t_read_file(const char *path, size_t *out_len);

#endif
