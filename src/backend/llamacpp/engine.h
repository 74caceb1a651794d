/* The llama.cpp engine binary: where it is and which build it is.
 *
 * Discovery order: the configured path, else `llama-server` on PATH, else the private Debian build
 * that scripts/setup unpacks under <prefix>/.deps/llama/bin. The version probe runs the binary with
 * `--version` (bounded in time and output) and parses its first line, e.g.
 * `version: 0.7.0 (build 11669, commit Debian)` (Debian) or `version: 4567 (abc1234)` (upstream).
 * Both calls are synchronous: they run once when the backend opens, not per request. */
#ifndef QR_BACKEND_LLAMACPP_ENGINE_H
#define QR_BACKEND_LLAMACPP_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define QR_LLAMA_ENGINE_PATH_MAX 4096

/* Where the engine was found. */
enum qr_llama_engine_source {
    QR_LLAMA_ENGINE_CONFIGURED = 0, /* the configured path */
    QR_LLAMA_ENGINE_ON_PATH = 1,    /* `llama-server` found on $PATH */
    QR_LLAMA_ENGINE_PRIVATE = 2,    /* <prefix>/.deps/llama/bin/llama-server */
};

/* One engine binary. All fields live in the struct (caller storage, nothing to free). */
struct qr_llama_engine {
    char path[QR_LLAMA_ENGINE_PATH_MAX]; /* as found (absolute unless configured relative) */
    enum qr_llama_engine_source source;
    char version[64]; /* "0.7.0"; "" until probed */
    uint32_t build;   /* 11669; 0 when unknown */
    char commit[64];  /* "Debian", "abc1234"; "" when unknown */
};

const char *qr_llama_engine_source_str(enum qr_llama_engine_source s);

/* Find the engine. configured: a path or NULL/"" (borrowed); a configured path that is not an
 * executable regular file is an error (no fallback: the operator asked for that one). prefix: the
 * directory holding .deps/ (the repository or install prefix), or NULL to skip the private build.
 * QR_ERR_NOT_FOUND when no candidate exists; diag names every place that was looked at. */
enum qr_err qr_llama_engine_find(const char *configured, const char *prefix, struct qr_diag *diag,
                                 struct qr_llama_engine *out);

/* Run `<e->path> --version` with at most timeout_ms wall time and 16 KiB of output, and fill
 * e->version, e->build and e->commit. The child gets its own process group and is killed (and
 * reaped) on timeout. Errors: QR_ERR_IO (cannot run), QR_ERR_UPSTREAM_TIMEOUT, QR_ERR_UPSTREAM
 * (non-zero exit or killed), QR_ERR_PARSE (no version line); diag names the path. */
enum qr_err qr_llama_engine_probe(struct qr_llama_engine *e, uint32_t timeout_ms,
                                  struct qr_diag *diag);

/* Parse `--version` output (len bytes, not NUL-terminated) into out->version/build/commit (other
 * fields untouched). Accepts `version: V (build N, commit C)` and `version: N (C)`. */
enum qr_err qr_llama_engine_parse_version(const char *text, size_t len,
                                          struct qr_llama_engine *out);

#endif
