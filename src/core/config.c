/* Configuration table and its parsers. Each row of `keys` names a setting once: its file key,
 * environment variable, flag, type, default, limits, whether it is secret or reloadable, and its
 * help text. Everything else (defaults, env/file/flag parsing, --help, check-config, reload) is
 * generated from the table, so a new setting is one row plus one struct field. */
#include "core/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/buf.h"
#include "core/config_backends.h"

enum type { T_STR, T_URL, T_ENUM, T_DURATION, T_BYTES, T_UINT, T_BOOL, T_PATH, T_PATHS, T_LISTEN };

#define F_SECRET     1u
#define F_RELOADABLE 2u

struct key_def {
    const char *key; /* file key; flag is "--" + key with '_' -> '-' */
    const char *env;
    enum type type;
    size_t offset;
    const char *def; /* NULL: computed (paths) */
    uint64_t min, max;
    const char *const *choices;
    unsigned flags;
    const char *help;
};

static const char *const backend_choices[] = {"ollama", "openai", "llama.cpp", NULL};
static const char *const http_client_choices[] = {"native", "curl", NULL};
static const char *const reasoning_choices[] = {"reasoning_content", "reasoning", NULL};
static const char *const dialect_choices[] = {"auto",         "vllm",    "mlx-lm",
                                              "llama-server", "generic", NULL};
static const char *const log_format_choices[] = {"json", "text", NULL};
static const char *const prefer_choices[] = {"auto", "cpu", "hybrid", "gpu", NULL};
static const char *const log_level_choices[] = {"debug", "info", "warn", "error", NULL};

#define OFF(f) offsetof(struct qr_config, f)
#define MIB    (1024ull * 1024ull)
#define HOUR   (3600ull * 1000ull)

static const struct key_def keys[QR_CFG__COUNT] = {
    [QR_CFG_LISTEN] = {"listen", "QUANTUM_RUNTIME_LISTEN", T_LISTEN, OFF(listen), "127.0.0.1:11450",
                       0, 0, NULL, 0,
                       "host:port to serve on; a non-loopback address needs auth_token"},
    [QR_CFG_BACKEND] = {"backend", "QUANTUM_RUNTIME_BACKEND", T_ENUM, OFF(backend), "ollama", 0, 0,
                        backend_choices, 0,
                        "engine behind the APIs: ollama, openai (an OpenAI-compatible server), or "
                        "llama.cpp (the Runtime runs llama-server itself)"},
    [QR_CFG_OLLAMA_URL] = {"ollama_url", "QUANTUM_RUNTIME_OLLAMA_URL", T_URL, OFF(ollama_url),
                           "http://127.0.0.1:11434", 0, 0, NULL, 0,
                           "base URL of the Ollama daemon that /api/* is forwarded to"},
    [QR_CFG_OLLAMA_PASSTHROUGH] = {"ollama_passthrough", "QUANTUM_RUNTIME_OLLAMA_PASSTHROUGH",
                                   T_BOOL, OFF(ollama_passthrough), "false", 0, 0, NULL,
                                   F_RELOADABLE,
                                   "Ollama chat/generate/embed requests for models no policy "
                                   "governs are forwarded to the default Ollama byte for byte "
                                   "instead of through the canonical contract"},
    [QR_CFG_OPENAI_URL] = {"openai_url", "QUANTUM_RUNTIME_OPENAI_URL", T_URL, OFF(openai_url),
                           "http://127.0.0.1:8080", 0, 0, NULL, 0,
                           "base URL of the OpenAI-compatible engine (llama-server, vLLM, "
                           "MLX-LM) when backend=openai"},
    [QR_CFG_OPENAI_API_KEY] = {"openai_api_key", "QUANTUM_RUNTIME_OPENAI_API_KEY", T_STR,
                               OFF(openai_api_key), "", 0, 4096, NULL, F_SECRET,
                               "bearer key sent to the OpenAI-compatible engine only"},
    [QR_CFG_OPENAI_REASONING_FIELD] = {"openai_reasoning_field",
                                       "QUANTUM_RUNTIME_OPENAI_REASONING_FIELD", T_ENUM,
                                       OFF(openai_reasoning_field), "reasoning_content", 0, 0,
                                       reasoning_choices, 0,
                                       "field the engine reads assistant reasoning from in "
                                       "history (vLLM >= 0.16 and MLX: reasoning)"},
    [QR_CFG_OPENAI_DIALECT] = {"openai_dialect", "QUANTUM_RUNTIME_OPENAI_DIALECT", T_ENUM,
                               OFF(openai_dialect), "auto", 0, 0, dialect_choices, 0,
                               "dialect profile of the OpenAI-compatible engine (data/dialects): "
                               "auto (probe /version, /props, /health), vllm, mlx-lm, "
                               "llama-server or generic; an explicit openai_reasoning_field "
                               "overrides its reasoning field"},
    [QR_CFG_HTTP_CLIENT] = {"http_client", "QUANTUM_RUNTIME_HTTP_CLIENT", T_ENUM, OFF(http_client),
                            "native", 0, 0, http_client_choices, 0,
                            "upstream HTTP client for http:// engines: native or curl (https:// "
                            "always uses curl)"},
    [QR_CFG_UPSTREAM_TIMEOUT] = {"upstream_timeout", "QUANTUM_RUNTIME_UPSTREAM_TIMEOUT", T_DURATION,
                                 OFF(upstream_timeout_ms), "15m", 1, 24 * HOUR, NULL, F_RELOADABLE,
                                 "bound on one upstream exchange, streamed body included"},
    [QR_CFG_UPSTREAM_CONNECT_TIMEOUT] = {"upstream_connect_timeout",
                                         "QUANTUM_RUNTIME_UPSTREAM_CONNECT_TIMEOUT", T_DURATION,
                                         OFF(upstream_connect_timeout_ms), "10s", 1, 24 * HOUR,
                                         NULL, F_RELOADABLE,
                                         "bound on connecting to the engine for one request"},
    [QR_CFG_UPSTREAM_FIRST_TOKEN_TIMEOUT] = {"upstream_first_token_timeout",
                                             "QUANTUM_RUNTIME_UPSTREAM_FIRST_TOKEN_TIMEOUT",
                                             T_DURATION, OFF(upstream_first_token_timeout_ms), "5m",
                                             1, 24 * HOUR, NULL, F_RELOADABLE,
                                             "bound from a streamed request being sent to the "
                                             "first byte of its answer body (prompt processing)"},
    [QR_CFG_UPSTREAM_IDLE_TIMEOUT] = {"upstream_idle_timeout",
                                      "QUANTUM_RUNTIME_UPSTREAM_IDLE_TIMEOUT", T_DURATION,
                                      OFF(upstream_idle_timeout_ms), "2m", 1, 24 * HOUR, NULL,
                                      F_RELOADABLE,
                                      "longest gap between two chunks of a streamed answer"},
    [QR_CFG_MAX_REQUEST_BYTES] = {"max_request_bytes", "QUANTUM_RUNTIME_MAX_REQUEST_BYTES", T_BYTES,
                                  OFF(max_request_bytes), "134217728", MIB, 4096 * MIB, NULL,
                                  F_RELOADABLE, "request body cap (413 above it); at least 1 MiB"},
    [QR_CFG_ALLOW_MODEL_MUTATION] = {"allow_model_mutation", "QUANTUM_RUNTIME_ALLOW_MODEL_MUTATION",
                                     T_BOOL, OFF(allow_model_mutation), "false", 0, 0, NULL,
                                     F_RELOADABLE,
                                     "allow /api/pull, /api/create, /api/copy, /api/delete"},
    [QR_CFG_AUTH_TOKEN] =
        {"auth_token", "QUANTUM_RUNTIME_AUTH_TOKEN", T_STR, OFF(auth_token), "", 0, 4096, NULL,
         F_SECRET | F_RELOADABLE,
         "bearer token required on every route but /healthz, /readyz, / and /status"},
    [QR_CFG_STATE_DIR] =
        {"state_dir", "QUANTUM_RUNTIME_STATE_DIR", T_PATH, OFF(state_dir), NULL, 0, 0, NULL, 0,
         "evidence store and runtime state (default: $STATE_DIRECTORY, "
         "/var/lib/quantum-runtime as root, else $XDG_STATE_HOME/quantum-runtime)"},
    [QR_CFG_MODELS_DIR] = {"models_dir", "QUANTUM_RUNTIME_MODELS_DIR", T_PATH, OFF(models_dir),
                           NULL, 0, 0, NULL, 0,
                           "directory searched for GGUF models (default: <state_dir>/models)"},
    [QR_CFG_REGISTRY_DIRS] = {"registry_dirs", "QUANTUM_RUNTIME_REGISTRY_DIRS", T_PATHS,
                              OFF(registry_dirs), "", 0, 16384, NULL, F_RELOADABLE,
                              "directories of extra model manifests (NAME.json), ':'-separated; "
                              "policies/ and deployment-profiles/ below each add those"},
    [QR_CFG_HASH_MODELS] = {"hash_models", "QUANTUM_RUNTIME_HASH_MODELS", T_BOOL, OFF(hash_models),
                            "true", 0, 0, NULL, F_RELOADABLE,
                            "sha256 every GGUF file found in models_dir (cached in "
                            "<state_dir>/sha256-cache) so files join manifests by digest"},
    [QR_CFG_HARDWARE_CLASS] = {"hardware_class", "QUANTUM_RUNTIME_HARDWARE_CLASS", T_STR,
                               OFF(hardware_class), "", 0, 128, NULL, F_RELOADABLE,
                               "the host's hardware class for model policies and the upstream "
                               "ledger (e.g. amd-epyc-turin-cpu); empty = unknown"},
    [QR_CFG_POLICY_EXPERIMENTAL] = {"policy_experimental", "QUANTUM_RUNTIME_POLICY_EXPERIMENTAL",
                                    T_BOOL, OFF(policy_experimental), "false", 0, 0, NULL,
                                    F_RELOADABLE,
                                    "experimental gate: knobs a model policy marks unverified "
                                    "reach the engine (logged; never known-bad ones)"},
    [QR_CFG_LLAMA_SERVER] = {"llama_server", "QUANTUM_RUNTIME_LLAMA_SERVER", T_STR,
                             OFF(llama_server), "", 0, 4096, NULL, 0,
                             "llama-server binary when backend=llama.cpp (default: PATH, then "
                             ".deps/llama/bin of the repository the binary was built in)"},
    [QR_CFG_LLAMA_CTX] = {"llama_ctx", "QUANTUM_RUNTIME_LLAMA_CTX", T_UINT, OFF(llama_ctx), "4096",
                          64, 16777216, NULL, 0,
                          "total context (-c) of each llama-server process, shared by its slots"},
    [QR_CFG_LLAMA_PARALLEL] = {"llama_parallel", "QUANTUM_RUNTIME_LLAMA_PARALLEL", T_UINT,
                               OFF(llama_parallel), "1", 1, 256, NULL, 0,
                               "parallel slots (-np) of each llama-server process"},
    [QR_CFG_LLAMA_THREADS] = {"llama_threads", "QUANTUM_RUNTIME_LLAMA_THREADS", T_UINT,
                              OFF(llama_threads), "0", 0, 1024, NULL, 0,
                              "threads (-t, -tb) of each llama-server process; 0 = engine default"},
    [QR_CFG_MEMORY_BUDGET] = {"memory_budget", "QUANTUM_RUNTIME_MEMORY_BUDGET", T_BYTES,
                              OFF(memory_budget), "0", 0, 0, NULL, 0,
                              "bytes all loaded llama.cpp models may take (LRU unload beyond); "
                              "0 = 80% of MemTotal"},
    [QR_CFG_PLACEMENT_PREFER] = {"placement_prefer", "QUANTUM_RUNTIME_PLACEMENT_PREFER", T_ENUM,
                                 OFF(placement_prefer), "auto", 0, 0, prefer_choices, 0,
                                 "llama.cpp placement preference: auto (CPU/RAM first, hybrid only "
                                 "when RAM does not fit), cpu, hybrid or gpu (docs/PLACEMENT.md)"},
    [QR_CFG_PLACEMENT_ACCELERATION] = {"placement_acceleration",
                                       "QUANTUM_RUNTIME_PLACEMENT_ACCELERATION", T_BOOL,
                                       OFF(placement_acceleration), "false", 0, 0, NULL, 0,
                                       "an accelerator (GPU) may take layers of llama.cpp models "
                                       "when the plan chooses hybrid or gpu"},
    [QR_CFG_PLACEMENT_NVME_COLD_TIER] = {"placement_nvme_cold_tier",
                                         "QUANTUM_RUNTIME_PLACEMENT_NVME_COLD_TIER", T_BOOL,
                                         OFF(placement_nvme_cold_tier), "false", 0, 0, NULL, 0,
                                         "an MoE model's routed experts may be paged from NVMe "
                                         "when RAM does not hold them (explicit cold tier; never "
                                         "KV or dense weights)"},
    [QR_CFG_KEEP_ALIVE] = {"keep_alive", "QUANTUM_RUNTIME_KEEP_ALIVE", T_DURATION,
                           OFF(keep_alive_ms), "5m", 0, 8760 * HOUR, NULL, 0,
                           "how long a llama.cpp model stays loaded after its last request when "
                           "the request names no keep_alive; 0 = unload when idle"},
    [QR_CFG_LOG_FORMAT] = {"log_format", "QUANTUM_RUNTIME_LOG_FORMAT", T_ENUM, OFF(log_format),
                           "json", 0, 0, log_format_choices, F_RELOADABLE,
                           "log lines as json or key=value text"},
    [QR_CFG_LOG_LEVEL] = {"log_level", "QUANTUM_RUNTIME_LOG_LEVEL", T_ENUM, OFF(log_level), "info",
                          0, 0, log_level_choices, F_RELOADABLE, "lowest level logged"},
    [QR_CFG_MAX_CONNECTIONS] = {"max_connections", "QUANTUM_RUNTIME_MAX_CONNECTIONS", T_UINT,
                                OFF(max_connections), "1024", 1, 65535, NULL, 0,
                                "open client connections; more get 503 server_busy"},
    [QR_CFG_MAX_QUEUE] = {"max_queue", "QUANTUM_RUNTIME_MAX_QUEUE", T_UINT, OFF(max_queue), "512",
                          1, 65535, NULL, F_RELOADABLE,
                          "inference requests one backend admits at once (running or waiting at "
                          "the engine); more get 503 queue_full with Retry-After"},
    [QR_CFG_MAX_REQUESTS] = {"max_requests", "QUANTUM_RUNTIME_MAX_REQUESTS", T_UINT,
                             OFF(max_requests), "2048", 1, 1048576, NULL, F_RELOADABLE,
                             "inference requests admitted across all backends; more get 503 "
                             "queue_full with Retry-After"},
    [QR_CFG_MAX_HEADER_BYTES] = {"max_header_bytes", "QUANTUM_RUNTIME_MAX_HEADER_BYTES", T_BYTES,
                                 OFF(max_header_bytes), "1048576", 4096, 16 * MIB, NULL, 0,
                                 "request line + headers cap (431 above it)"},
    [QR_CFG_HEADER_TIMEOUT] = {"header_timeout", "QUANTUM_RUNTIME_HEADER_TIMEOUT", T_DURATION,
                               OFF(header_timeout_ms), "10s", 1, HOUR, NULL, 0,
                               "time allowed to send the request head (408 after it)"},
    [QR_CFG_READ_TIMEOUT] = {"read_timeout", "QUANTUM_RUNTIME_READ_TIMEOUT", T_DURATION,
                             OFF(read_timeout_ms), "60s", 1, HOUR, NULL, 0,
                             "longest pause while a request body is sent (408 after it)"},
    [QR_CFG_IDLE_TIMEOUT] = {"idle_timeout", "QUANTUM_RUNTIME_IDLE_TIMEOUT", T_DURATION,
                             OFF(idle_timeout_ms), "2m", 1, 24 * HOUR, NULL, 0,
                             "idle keep-alive connections are closed after this"},
    [QR_CFG_SHUTDOWN_TIMEOUT] = {"shutdown_timeout", "QUANTUM_RUNTIME_SHUTDOWN_TIMEOUT", T_DURATION,
                                 OFF(shutdown_timeout_ms), "15s", 1, HOUR, NULL, 0,
                                 "on SIGTERM, how long in-flight requests may still run"},
};

static const char *source_name(enum qr_config_source s)
{
    static const char *names[] = {"default", "file", "env", "flag"};
    return names[s];
}

/* ---- value parsers ---- */

static char *trim_dup(const char *s)
{
    while (*s && isspace((unsigned char) *s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char) s[n - 1]))
        n--;
    char *r = strndup(s, n);
    if (!r)
        abort();
    return r;
}

/* Go-style durations: one or more <number><unit>, units ns us µs ms s m h; "0" alone is 0. */
enum qr_err qr_config_parse_duration_ms(const char *s, uint64_t *out_ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"ms", 1},
                 {"s", 1000},  {"m", 60000}, {"h", 3600000}};
    if (!s || !*s)
        return QR_ERR_CONFIG;
    if (strcmp(s, "0") == 0) {
        *out_ms = 0;
        return QR_OK;
    }
    double total = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char) *p) && *p != '.')
            return QR_ERR_CONFIG;
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || v < 0)
            return QR_ERR_CONFIG;
        p = end;
        size_t best = 0;
        double mult = -1;
        for (size_t i = 0; i < QR_ARRAY_LEN(units); i++) {
            size_t n = strlen(units[i].unit);
            if (n > best && strncmp(p, units[i].unit, n) == 0) {
                best = n;
                mult = units[i].ms;
            }
        }
        if (mult < 0)
            return QR_ERR_CONFIG;
        p += best;
        total += v * mult;
        if (total > 1e15)
            return QR_ERR_CONFIG;
    }
    *out_ms = (uint64_t) (total + 0.5);
    if (*out_ms == 0 && total > 0)
        *out_ms = 1;
    return QR_OK;
}

/* A non-negative integer with an optional binary suffix: KiB MiB GiB (or K M G). */
enum qr_err qr_config_parse_bytes(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char) *s))
        return QR_ERR_CONFIG;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return QR_ERR_CONFIG;
    uint64_t mult = 1;
    if (!strcmp(end, "K") || !strcmp(end, "KiB"))
        mult = 1024;
    else if (!strcmp(end, "M") || !strcmp(end, "MiB"))
        mult = MIB;
    else if (!strcmp(end, "G") || !strcmp(end, "GiB"))
        mult = 1024 * MIB;
    else if (*end)
        return QR_ERR_CONFIG;
    if (v > UINT64_MAX / mult)
        return QR_ERR_CONFIG;
    *out = (uint64_t) v * mult;
    return QR_OK;
}

/* Go's strconv.ParseBool spellings, so existing env files keep working. */
enum qr_err qr_config_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
    static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
    for (size_t i = 0; i < QR_ARRAY_LEN(yes); i++) {
        if (!strcmp(s, yes[i])) {
            *out = true;
            return QR_OK;
        }
        if (!strcmp(s, no[i])) {
            *out = false;
            return QR_OK;
        }
    }
    return QR_ERR_CONFIG;
}

static bool host_is_loopback(const char *host)
{
    if (!strcasecmp(host, "localhost"))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

enum qr_err qr_config_parse_listen(const char *s, char **out_host, uint16_t *out_port,
                                   bool *out_loopback)
{
    const char *colon = strrchr(s, ':');
    if (!colon || !colon[1])
        return QR_ERR_CONFIG;
    const char *hs = s, *he = colon;
    if (*hs == '[') {
        if (he - hs < 2 || he[-1] != ']')
            return QR_ERR_CONFIG;
        hs++;
        he--;
    } else if (memchr(hs, ':', (size_t) (he - hs))) {
        return QR_ERR_CONFIG; /* bare IPv6 needs brackets */
    }
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (errno || *end || port > 65535 || !isdigit((unsigned char) colon[1]))
        return QR_ERR_CONFIG;
    char *host = strndup(hs, (size_t) (he - hs));
    if (!host)
        abort();
    for (const char *p = host; *p; p++) {
        if (!isalnum((unsigned char) *p) && !strchr(".-:%_", *p)) {
            free(host);
            return QR_ERR_CONFIG;
        }
    }
    *out_loopback = *host && host_is_loopback(host);
    *out_port = (uint16_t) port;
    *out_host = host;
    return QR_OK;
}

enum qr_err qr_config_check_url(const char *s, struct qr_diag *diag)
{
    const char *rest;
    if (!strncmp(s, "http://", 7))
        rest = s + 7;
    else if (!strncmp(s, "https://", 8))
        rest = s + 8;
    else
        return qr_diag_set(diag, QR_ERR_CONFIG, "scheme must be http or https");
    size_t auth_len = strcspn(rest, "/?#");
    if (auth_len == 0)
        return qr_diag_set(diag, QR_ERR_CONFIG, "host is required");
    if (memchr(rest, '@', auth_len))
        return qr_diag_set(diag, QR_ERR_CONFIG, "credentials in the URL are not allowed");
    if (strchr(s, '#'))
        return qr_diag_set(diag, QR_ERR_CONFIG, "fragment is not allowed");
    for (const char *p = s; *p; p++) {
        if ((unsigned char) *p <= 0x20 || *p == 0x7f)
            return qr_diag_set(diag, QR_ERR_CONFIG, "whitespace or control characters");
    }
    if (rest[0] == ':')
        return qr_diag_set(diag, QR_ERR_CONFIG, "host is required");
    return QR_OK;
}

/* ---- applying one value ---- */

static void set_raw(struct qr_config *cfg, int k, const char *text)
{
    free(cfg->raw[k]);
    cfg->raw[k] = strdup(text);
    if (!cfg->raw[k])
        abort();
}

/* Parse text for key k into cfg; `who` names the key as the user wrote it. */
static enum qr_err apply(struct qr_config *cfg, int k, const char *text, const char *who,
                         enum qr_config_source src, struct qr_diag *diag)
{
    const struct key_def *d = &keys[k];
    char *base = (char *) cfg;
    struct qr_diag sub = {{0}};
    uint64_t u = 0;
    bool b = false;
    const char *shown = (d->flags & F_SECRET) ? "<redacted>" : text;

    switch (d->type) {
    case T_STR:
    case T_PATH:
        if (strlen(text) > (d->max ? d->max : 4096))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: value is longer than %u bytes", who,
                               (unsigned) (d->max ? d->max : 4096));
        if (d->type == T_PATH && text[0] != '/')
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not an absolute path", who, shown);
        break;
    case T_PATHS:
        if (strlen(text) > d->max)
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: value is longer than %u bytes", who,
                               (unsigned) d->max);
        for (const char *p = text; *p;) {
            size_t n = strcspn(p, ":");
            if (n && p[0] != '/')
                return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%.*s' is not an absolute path", who,
                                   (int) n, p);
            p += n;
            if (*p == ':')
                p++;
        }
        break;
    case T_URL:
        if (qr_config_check_url(text, &sub))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not a valid URL: %s", who, text,
                               sub.msg);
        break;
    case T_LISTEN: {
        char *host;
        uint16_t port;
        bool loop;
        if (qr_config_parse_listen(text, &host, &port, &loop))
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s: '%s' is not host:port (e.g. 127.0.0.1:11450, [::1]:11450)", who,
                               text);
        free(cfg->listen_host);
        cfg->listen_host = host;
        cfg->listen_port = port;
        cfg->listen_loopback = loop;
        break;
    }
    case T_ENUM: {
        bool ok = false;
        for (const char *const *c = d->choices; *c; c++)
            ok |= !strcmp(*c, text);
        if (!ok) {
            char list[128] = "";
            for (const char *const *c = d->choices; *c; c++) {
                strncat(list, *c, sizeof(list) - strlen(list) - 1);
                if (c[1])
                    strncat(list, ", ", sizeof(list) - strlen(list) - 1);
            }
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not one of: %s", who, text, list);
        }
        break;
    }
    case T_DURATION:
        if (qr_config_parse_duration_ms(text, &u))
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s: '%s' is not a duration (e.g. 15m, 30s, 500ms)", who, text);
        break;
    case T_BYTES:
        if (qr_config_parse_bytes(text, &u))
            return qr_diag_set(diag, QR_ERR_CONFIG,
                               "%s: '%s' is not a byte count (e.g. 134217728, 128MiB)", who, text);
        break;
    case T_UINT: {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (!isdigit((unsigned char) text[0]) || *end || errno)
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not a whole number", who, text);
        u = v;
        break;
    }
    case T_BOOL:
        if (qr_config_parse_bool(text, &b))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is not a boolean (true or false)",
                               who, text);
        break;
    }
    if (d->type == T_DURATION || d->type == T_BYTES || d->type == T_UINT) {
        if (u < d->min || (d->max && u > d->max))
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: '%s' is out of range (%s)", who, text,
                               d->type == T_DURATION ? "must be above 0 and at most the limit"
                                                     : "see --help for limits");
        *(uint64_t *) (base + d->offset) = u;
    } else if (d->type == T_BOOL) {
        *(bool *) (base + d->offset) = b;
        text = b ? "true" : "false";
    } else {
        char **slot = (char **) (base + d->offset);
        free(*slot);
        *slot = strdup(text);
        if (!*slot)
            abort();
    }
    set_raw(cfg, k, text);
    cfg->source[k] = src;
    return QR_OK;
}

/* ---- sources ---- */

static void default_dirs(char **state, char **models, char **envp)
{
    const char *sd = NULL, *xdg = NULL, *home = NULL;
    for (char **e = envp; e && *e; e++) {
        if (!strncmp(*e, "STATE_DIRECTORY=", 16))
            sd = *e + 16;
        else if (!strncmp(*e, "XDG_STATE_HOME=", 15))
            xdg = *e + 15;
        else if (!strncmp(*e, "HOME=", 5))
            home = *e + 5;
    }
    struct qr_buf b;
    qr_buf_init(&b, 8192);
    if (sd && sd[0] == '/') {
        /* systemd StateDirectory= may list several paths separated by ':' */
        qr_buf_append(&b, sd, strcspn(sd, ":"));
    } else if (geteuid() == 0) {
        qr_buf_puts(&b, "/var/lib/quantum-runtime");
    } else if (xdg && xdg[0] == '/') {
        qr_buf_appendf(&b, "%s/quantum-runtime", xdg);
    } else if (home && home[0] == '/') {
        qr_buf_appendf(&b, "%s/.local/state/quantum-runtime", home);
    } else {
        qr_buf_puts(&b, "/tmp/quantum-runtime");
    }
    if (!b.ptr)
        abort();
    *state = qr_buf_take(&b, NULL);
    qr_buf_init(&b, 8192);
    if (qr_buf_appendf(&b, "%s/models", *state))
        abort();
    *models = qr_buf_take(&b, NULL);
}

static int find_key_by_name(const char *name)
{
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        if (!strcmp(keys[k].key, name))
            return k;
    }
    return -1;
}

static enum qr_err load_file(struct qr_config *cfg, const char *path, struct qr_diag *diag)
{
    yyjson_read_err rerr;
    struct stat st;
    if (stat(path, &st) != 0)
        return qr_diag_set(diag, QR_ERR_CONFIG, "--config: cannot open '%s': %s", path,
                           strerror(errno));
    if (st.st_size > (off_t) MIB)
        return qr_diag_set(diag, QR_ERR_CONFIG, "--config: '%s' is larger than 1 MiB", path);
    yyjson_doc *doc = yyjson_read_file(path, 0, NULL, &rerr);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_CONFIG, "--config: '%s' is not valid JSON: %s at byte %zu",
                           path, rerr.msg, rerr.pos);
    enum qr_err err = QR_OK;
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (!yyjson_is_obj(root)) {
        err = qr_diag_set(diag, QR_ERR_CONFIG, "--config: '%s' must hold a JSON object", path);
        goto done;
    }
    size_t idx, max;
    yyjson_val *kv, *val;
    yyjson_obj_foreach(root, idx, max, kv, val)
    {
        const char *name = yyjson_get_str(kv);
        int k = find_key_by_name(name);
        char who[160], num[32];
        snprintf(who, sizeof(who), "%s: key '%s'", path, name);
        if (k < 0 && !strcmp(name, "backends")) {
            if ((err = qr_cfg_backends_parse(cfg, val, who, diag)))
                goto done;
            continue;
        }
        if (k < 0) {
            err = qr_diag_set(diag, QR_ERR_CONFIG, "%s is not a known setting", who);
            goto done;
        }
        const char *text = NULL;
        struct qr_buf list;
        qr_buf_init(&list, MIB);
        if (yyjson_is_str(val)) {
            text = yyjson_get_str(val);
        } else if (yyjson_is_arr(val) && keys[k].type == T_PATHS) {
            /* a list key may also be a JSON array of strings */
            size_t ai, amax;
            yyjson_val *item;
            yyjson_arr_foreach(val, ai, amax, item)
            {
                if (!yyjson_is_str(item) || strchr(yyjson_get_str(item), ':')) {
                    qr_buf_cleanup(&list);
                    err = qr_diag_set(diag, QR_ERR_CONFIG,
                                      "%s: every item must be a path string without ':'", who);
                    goto done;
                }
                qr_buf_appendf(&list, "%s%s", ai ? ":" : "", yyjson_get_str(item));
            }
            text = list.ptr ? list.ptr : "";
        } else if (yyjson_is_bool(val) && keys[k].type == T_BOOL) {
            text = yyjson_get_bool(val) ? "true" : "false";
        } else if (yyjson_is_uint(val) && (keys[k].type == T_BYTES || keys[k].type == T_UINT)) {
            snprintf(num, sizeof(num), "%llu", (unsigned long long) yyjson_get_uint(val));
            text = num;
        } else {
            err = qr_diag_set(diag, QR_ERR_CONFIG, "%s has the wrong type (expected %s)", who,
                              keys[k].type == T_BOOL ? "true or false"
                              : keys[k].type == T_BYTES || keys[k].type == T_UINT
                                  ? "a whole number or a string"
                              : keys[k].type == T_PATHS ? "a string or an array of strings"
                                                        : "a string");
            goto done;
        }
        char *t = trim_dup(text);
        qr_buf_cleanup(&list);
        err = apply(cfg, k, t, who, QR_SRC_FILE, diag);
        free(t);
        if (err)
            goto done;
    }
done:
    yyjson_doc_free(doc);
    return err;
}

static enum qr_err load_env(struct qr_config *cfg, char **envp, struct qr_diag *diag)
{
    for (char **e = envp; e && *e; e++) {
        if (strncmp(*e, "QUANTUM_RUNTIME_", 16))
            continue;
        const char *eq = strchr(*e, '=');
        if (!eq)
            continue;
        for (int k = 0; k < QR_CFG__COUNT; k++) {
            size_t n = strlen(keys[k].env);
            if ((size_t) (eq - *e) != n || strncmp(*e, keys[k].env, n))
                continue;
            char *t = trim_dup(eq + 1);
            enum qr_err err = *t ? apply(cfg, k, t, keys[k].env, QR_SRC_ENV, diag) : QR_OK;
            free(t);
            if (err)
                return err;
        }
    }
    return QR_OK;
}

/* Flag name of key k: "--" + key with '_' as '-'. */
static void flag_name(int k, char *out, size_t cap)
{
    snprintf(out, cap, "--%s", keys[k].key);
    for (char *p = out; *p; p++) {
        if (*p == '_')
            *p = '-';
    }
}

/* Flags: --name=value, --name value; a bool flag alone means true. --config FILE was read first. */
static enum qr_err load_flags(struct qr_config *cfg, int argc, char **argv, struct qr_diag *diag)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t) (eq - a) : strlen(a);
        if (!strncmp(a, "--config", nlen) && nlen == 8) {
            if (!eq)
                i++;
            continue;
        }
        int k = -1;
        char fname[64];
        for (int j = 0; j < QR_CFG__COUNT && k < 0; j++) {
            flag_name(j, fname, sizeof(fname));
            if (strlen(fname) == nlen && !strncmp(a, fname, nlen))
                k = j;
        }
        if (k < 0)
            return qr_diag_set(diag, QR_ERR_CONFIG, "unknown option '%.*s' (see --help)",
                               (int) nlen, a);
        const char *val;
        if (eq)
            val = eq + 1;
        else if (keys[k].type == T_BOOL)
            val = "true";
        else if (i + 1 < argc)
            val = argv[++i];
        else
            return qr_diag_set(diag, QR_ERR_CONFIG, "%s: a value is required", fname);
        char *t = trim_dup(val);
        enum qr_err err = apply(cfg, k, t, fname, QR_SRC_FLAG, diag);
        free(t);
        if (err)
            return err;
    }
    return QR_OK;
}

static enum qr_err find_config_flag(int argc, char **argv, char **out, struct qr_diag *diag)
{
    *out = NULL;
    for (int i = 0; i < argc; i++) {
        const char *v = NULL;
        if (!strcmp(argv[i], "--config")) {
            if (i + 1 >= argc)
                return qr_diag_set(diag, QR_ERR_CONFIG, "--config: a file name is required");
            v = argv[i + 1];
        } else if (!strncmp(argv[i], "--config=", 9)) {
            v = argv[i] + 9;
        }
        if (v) {
            free(*out);
            *out = strdup(v);
            if (!*out)
                abort();
        }
    }
    return QR_OK;
}

/* Rules that span keys. */
static enum qr_err validate(struct qr_config *cfg, struct qr_diag *diag)
{
    if (!strcmp(cfg->placement_prefer, "gpu") && !cfg->placement_acceleration)
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "placement_prefer: 'gpu' needs placement_acceleration=true");
    if (!cfg->listen_loopback && !cfg->auth_token[0])
        return qr_diag_set(diag, QR_ERR_CONFIG,
                           "QUANTUM_RUNTIME_AUTH_TOKEN: required when listening on the "
                           "non-loopback address '%s'",
                           cfg->listen);
    return QR_OK;
}

enum qr_err qr_config_load(struct qr_config *cfg, int argc, char **argv, char **envp,
                           struct qr_diag *diag)
{
    memset(cfg, 0, sizeof(*cfg));
    enum qr_err err;
    char *state, *models;
    default_dirs(&state, &models, envp);
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        const char *def = keys[k].def;
        if (k == QR_CFG_STATE_DIR)
            def = state;
        else if (k == QR_CFG_MODELS_DIR)
            def = models;
        err = apply(cfg, k, def, keys[k].key, QR_SRC_DEFAULT, diag);
        if (ALWAYS(err == QR_OK) == 0)
            break;
    }
    free(state);
    free(models);
    bool models_explicit;
    if ((err = find_config_flag(argc, argv, &cfg->config_file, diag)))
        goto fail;
    if (cfg->config_file && (err = load_file(cfg, cfg->config_file, diag)))
        goto fail;
    if ((err = load_env(cfg, envp, diag)) || (err = load_flags(cfg, argc, argv, diag)))
        goto fail;
    /* models_dir follows state_dir unless it was set itself */
    models_explicit = cfg->source[QR_CFG_MODELS_DIR] != QR_SRC_DEFAULT;
    if (!models_explicit && cfg->source[QR_CFG_STATE_DIR] != QR_SRC_DEFAULT) {
        struct qr_buf b;
        qr_buf_init(&b, 8192);
        if (qr_buf_appendf(&b, "%s/models", cfg->state_dir))
            abort();
        apply(cfg, QR_CFG_MODELS_DIR, b.ptr, "models_dir", QR_SRC_DEFAULT, NULL);
        qr_buf_cleanup(&b);
    }
    if ((err = validate(cfg, diag)) || (err = qr_cfg_backends_finish(cfg, envp, diag)))
        goto fail;
    return QR_OK;
fail:
    qr_config_cleanup(cfg);
    return QR_ERR_CONFIG;
}

enum qr_err qr_config_reload(struct qr_config *cfg, int argc, char **argv, char **envp,
                             struct qr_diag *warn, struct qr_diag *diag)
{
    struct qr_config fresh;
    if (qr_config_load(&fresh, argc, argv, envp, diag))
        return QR_ERR_CONFIG;
    struct qr_buf w;
    qr_buf_init(&w, sizeof(warn->msg));
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        if (!strcmp(cfg->raw[k], fresh.raw[k]))
            continue;
        if (!(keys[k].flags & F_RELOADABLE)) {
            qr_buf_appendf(&w, "%s%s", w.len ? ", " : "", keys[k].key);
            continue;
        }
        char *base = (char *) cfg, *fbase = (char *) &fresh;
        const struct key_def *d = &keys[k];
        if (d->type == T_DURATION || d->type == T_BYTES || d->type == T_UINT)
            *(uint64_t *) (base + d->offset) = *(uint64_t *) (fbase + d->offset);
        else if (d->type == T_BOOL)
            *(bool *) (base + d->offset) = *(bool *) (fbase + d->offset);
        else {
            char **slot = (char **) (base + d->offset), **fslot = (char **) (fbase + d->offset);
            char *tmp = *slot;
            *slot = *fslot;
            *fslot = tmp;
        }
        set_raw(cfg, k, fresh.raw[k]);
        cfg->source[k] = fresh.source[k];
    }
    if (!qr_cfg_backends_equal(cfg, &fresh))
        qr_buf_appendf(&w, "%s%s", w.len ? ", " : "", "backends");
    if (warn)
        snprintf(warn->msg, sizeof(warn->msg), "%s", w.ptr ? w.ptr : "");
    qr_buf_cleanup(&w);
    qr_config_cleanup(&fresh);
    return QR_OK;
}

void qr_config_cleanup(struct qr_config *cfg)
{
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        const struct key_def *d = &keys[k];
        if (d->type != T_DURATION && d->type != T_BYTES && d->type != T_UINT && d->type != T_BOOL) {
            char **slot = (char **) ((char *) cfg + d->offset);
            free(*slot);
            *slot = NULL;
        }
        free(cfg->raw[k]);
        cfg->raw[k] = NULL;
    }
    qr_cfg_backends_free(cfg);
    free(cfg->listen_host);
    free(cfg->config_file);
    cfg->listen_host = NULL;
    cfg->config_file = NULL;
}

/* URLs are shown without query strings, secrets as <redacted> or "" when unset. */
static const char *shown_value(const struct qr_config *cfg, int k, char *tmp, size_t cap)
{
    const char *v = cfg->raw[k];
    if (keys[k].flags & F_SECRET)
        return v[0] ? "<redacted>" : "";
    if (keys[k].type == T_URL) {
        snprintf(tmp, cap, "%.*s", (int) strcspn(v, "?"), v);
        return tmp;
    }
    return v;
}

void qr_config_print(const struct qr_config *cfg, bool json, FILE *out)
{
    char tmp[4200];
    if (!json) {
        for (int k = 0; k < QR_CFG__COUNT; k++)
            fprintf(out, "%s=%s (%s)\n", keys[k].key, shown_value(cfg, k, tmp, sizeof(tmp)),
                    source_name(cfg->source[k]));
        fprintf(out, "listen=%s backend=%s ollama=%s mutation=%s auth=%s\n", cfg->listen,
                cfg->backend, shown_value(cfg, QR_CFG_OLLAMA_URL, tmp, sizeof(tmp)),
                cfg->allow_model_mutation ? "true" : "false",
                cfg->auth_token[0] ? "true" : "false");
        qr_cfg_backends_print_text(cfg, out);
        return;
    }
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc), *c = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_bool(doc, root, "valid", true);
    if (cfg->config_file)
        yyjson_mut_obj_add_strcpy(doc, root, "config_file", cfg->config_file);
    yyjson_mut_obj_add_val(doc, root, "config", c);
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        yyjson_mut_val *e = yyjson_mut_obj(doc);
        const struct key_def *d = &keys[k];
        const char *v = shown_value(cfg, k, tmp, sizeof(tmp));
        if (d->type == T_BOOL)
            yyjson_mut_obj_add_bool(doc, e, "value",
                                    *(const bool *) ((const char *) cfg + d->offset));
        else if (d->type == T_BYTES || d->type == T_UINT)
            yyjson_mut_obj_add_uint(doc, e, "value",
                                    *(const uint64_t *) ((const char *) cfg + d->offset));
        else
            yyjson_mut_obj_add_strcpy(doc, e, "value", v);
        if (d->type == T_DURATION)
            yyjson_mut_obj_add_uint(doc, e, "milliseconds",
                                    *(const uint64_t *) ((const char *) cfg + d->offset));
        yyjson_mut_obj_add_str(doc, e, "source", source_name(cfg->source[k]));
        yyjson_mut_obj_add_str(doc, e, "env", d->env);
        if (d->flags & F_SECRET)
            yyjson_mut_obj_add_bool(doc, e, "secret", true);
        yyjson_mut_obj_add_bool(doc, e, "reloadable", (d->flags & F_RELOADABLE) != 0);
        yyjson_mut_obj_add_val(doc, c, d->key, e);
    }
    yyjson_mut_obj_add_bool(doc, root, "listen_loopback", cfg->listen_loopback);
    qr_cfg_backends_print_json(cfg, doc, root);
    char *text = yyjson_mut_write(doc, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL);
    if (text)
        fprintf(out, "%s\n", text);
    free(text);
    yyjson_mut_doc_free(doc);
}

void qr_config_print_help(FILE *out)
{
    char fname[64];
    for (int k = 0; k < QR_CFG__COUNT; k++) {
        const struct key_def *d = &keys[k];
        flag_name(k, fname, sizeof(fname));
        fprintf(out, "  %-26s %s\n  %-26s   env %s, file key \"%s\", default %s%s%s\n", fname,
                d->help, "", d->env, d->key,
                d->def ? (d->def[0] ? d->def : "(empty)") : "(see above)",
                (d->flags & F_RELOADABLE) ? ", reloaded on SIGHUP" : "",
                (d->flags & F_SECRET) ? ", secret" : "");
    }
}
