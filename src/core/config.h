/* The Runtime's configuration: one declarative table (config.c) drives defaults, validation,
 * environment variables (QUANTUM_RUNTIME_*), the optional JSON config file, command-line flags,
 * `--help`, `check-config` and SIGHUP reload.
 *
 * Precedence, lowest first: built-in default < config file < environment < command-line flag.
 * Every value remembers where it came from, so `check-config` can say so. */
#ifndef QR_CORE_CONFIG_H
#define QR_CORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

enum qr_config_source {
    QR_SRC_DEFAULT = 0,
    QR_SRC_FILE = 1,
    QR_SRC_ENV = 2,
    QR_SRC_FLAG = 3,
};

/* Table-driven keys; the order is the order of --help and check-config. */
enum qr_config_key {
    QR_CFG_LISTEN,
    QR_CFG_BACKEND,
    QR_CFG_OLLAMA_URL,
    QR_CFG_OLLAMA_PASSTHROUGH,
    QR_CFG_OPENAI_URL,
    QR_CFG_OPENAI_API_KEY,
    QR_CFG_OPENAI_REASONING_FIELD,
    QR_CFG_OPENAI_DIALECT,
    QR_CFG_HTTP_CLIENT,
    QR_CFG_UPSTREAM_TIMEOUT,
    QR_CFG_UPSTREAM_CONNECT_TIMEOUT,
    QR_CFG_UPSTREAM_FIRST_TOKEN_TIMEOUT,
    QR_CFG_UPSTREAM_IDLE_TIMEOUT,
    QR_CFG_MAX_REQUEST_BYTES,
    QR_CFG_ALLOW_MODEL_MUTATION,
    QR_CFG_AUTH_TOKEN,
    QR_CFG_STATE_DIR,
    QR_CFG_MODELS_DIR,
    QR_CFG_REGISTRY_DIRS,
    QR_CFG_HASH_MODELS,
    QR_CFG_HARDWARE_CLASS,
    QR_CFG_POLICY_EXPERIMENTAL,
    QR_CFG_LLAMA_SERVER,
    QR_CFG_LLAMA_CTX,
    QR_CFG_LLAMA_PARALLEL,
    QR_CFG_LLAMA_THREADS,
    QR_CFG_MEMORY_BUDGET,
    QR_CFG_PLACEMENT_PREFER,
    QR_CFG_PLACEMENT_ACCELERATION,
    QR_CFG_PLACEMENT_NVME_COLD_TIER,
    QR_CFG_KEEP_ALIVE,
    QR_CFG_LOG_FORMAT,
    QR_CFG_LOG_LEVEL,
    QR_CFG_MAX_CONNECTIONS,
    QR_CFG_MAX_QUEUE,
    QR_CFG_MAX_REQUESTS,
    QR_CFG_MAX_HEADER_BYTES,
    QR_CFG_HEADER_TIMEOUT,
    QR_CFG_READ_TIMEOUT,
    QR_CFG_IDLE_TIMEOUT,
    QR_CFG_SHUTDOWN_TIMEOUT,
    QR_CFG__COUNT
};

/* One backend the daemon runs requests on (docs/CONFIGURATION.md "Backends"). Without a
 * `backends` list in the config file there is exactly one, built from `backend` and its URL
 * settings, with the kind's name as id ("ollama", "openai", "llama.cpp"). Not reloadable. */
#define QR_BACKENDS_MAX    16u /* entries of `backends` */
#define QR_BACKEND_ID_MAX  32u /* bytes of an id, NUL excluded (registry remotes' limit) */
#define QR_BACKEND_URL_MAX 64u /* replicas of one entry */

struct qr_backend_parallelism { /* a multi-node deployment registered as one backend; 0 unknown */
    uint64_t tensor_parallel_size, pipeline_parallel_size, data_parallel_size, nodes;
    bool expert_parallel;
};

/* What an OpenAI-compatible server was started with that no endpoint reports (vLLM
 * --tool-call-parser, --enable-auto-tool-choice, --reasoning-parser): the operator's statement,
 * the backend's declared tool and reasoning capabilities. */
struct qr_backend_parsers {
    bool set;              /* the entry has "parsers": what is not named there is not there */
    char *tool_call;       /* NULL: none */
    bool auto_tool_choice; /* --enable-auto-tool-choice */
    char *reasoning;       /* NULL: none */
};

struct qr_backend_spec {
    char *id;    /* unique, [a-z0-9][a-z0-9._-]* */
    char *kind;  /* "llamacpp" | "ollama" | "openai" */
    char **urls; /* ollama: one; openai: 1..QR_BACKEND_URL_MAX replicas; llamacpp: none */
    size_t n_urls;
    char *dialect;         /* openai: auto|vllm|mlx-lm|llama-server|generic */
    char *reasoning_field; /* openai: "reasoning_content" | "reasoning"; NULL = the dialect's */
    char *api_key_env;     /* openai: the environment variable holding the upstream key; NULL */
    char *api_key;         /* secret: its value at load ("" none); never printed */
    struct qr_backend_parallelism parallelism;
    struct qr_backend_parsers parsers; /* openai only */
    uint64_t max_queue; /* this backend's admission bound; 0 = the global max_queue */
    bool listed;        /* false: the single backend built from `backend` (no `backends` list) */
};

struct qr_config {
    /* listen, split and classified */
    char *listen;
    char *listen_host; /* without brackets */
    uint16_t listen_port;
    bool listen_loopback;

    char *backend; /* "ollama" | "openai" | "llama.cpp" */
    char *ollama_url;
    bool ollama_passthrough; /* Ollama chat/generate/embed forwarded byte for byte (ungoverned) */
    char *openai_url;
    char *openai_api_key; /* secret: sent to the OpenAI-compatible engine only */
    char *openai_reasoning_field;
    char *openai_dialect; /* "auto" | "vllm" | "mlx-lm" | "llama-server" | "generic" */
    char *http_client;    /* "native" | "curl" */
    uint64_t upstream_timeout_ms;
    uint64_t upstream_connect_timeout_ms;     /* connect to an engine (model calls) */
    uint64_t upstream_first_token_timeout_ms; /* request sent -> first body byte (streamed) */
    uint64_t upstream_idle_timeout_ms;        /* gap between two chunks of a streamed answer */
    uint64_t max_request_bytes;
    bool allow_model_mutation;
    char *auth_token; /* secret: never logged or printed */
    char *state_dir;
    char *models_dir;
    char *registry_dirs;  /* ':'-separated absolute directories of extra manifests, "" = none */
    bool hash_models;     /* sha256 of discovered GGUF files (cached under state_dir) */
    char *hardware_class; /* operator-declared host class for policy/ledger matching; "" unknown */
    bool policy_experimental; /* the experimental gate: unverified policy knobs reach the engine */
    /* backend=llama.cpp (the Runtime runs llama-server itself; docs/LLAMACPP.md) */
    char *llama_server;            /* engine binary; "" = discover (PATH, then <repo>/.deps) */
    uint64_t llama_ctx;            /* -c per process */
    uint64_t llama_parallel;       /* -np per process */
    uint64_t llama_threads;        /* -t/-tb; 0 = the engine's default */
    uint64_t memory_budget;        /* bytes resident engines may take; 0 = 80% of MemTotal */
    char *placement_prefer;        /* "auto" | "cpu" | "hybrid" | "gpu" (docs/PLACEMENT.md) */
    bool placement_acceleration;   /* an accelerator may take layers */
    bool placement_nvme_cold_tier; /* NVMe may page routed experts (explicit cold tier) */
    uint64_t keep_alive_ms;        /* default idle TTL of a loaded model */
    char *log_format;              /* "json" | "text" */
    char *log_level;               /* "debug" | "info" | "warn" | "error" */
    uint64_t max_connections;
    uint64_t max_queue;    /* inference requests one backend admits at once (503 above) */
    uint64_t max_requests; /* inference requests admitted across all backends */
    uint64_t max_header_bytes;
    uint64_t header_timeout_ms;
    uint64_t read_timeout_ms;
    uint64_t idle_timeout_ms;
    uint64_t shutdown_timeout_ms;

    struct qr_backend_spec *backends; /* owned; [0] is the default backend; never empty */
    size_t n_backends;
    char *config_file;        /* path given with --config, or NULL */
    char *raw[QR_CFG__COUNT]; /* canonical text of each value (owned), for printing and reload */
    enum qr_config_source source[QR_CFG__COUNT];
};

/* Load defaults, then the file named by --config (if any), then the environment (envp-style array,
 * NULL-terminated; pass `environ`), then the flags in argv[0..argc). Validates everything.
 * On error diag names the key as the user wrote it (env variable, flag or file key) and the
 * function returns QR_ERR_CONFIG; cfg is then cleaned up. Unknown flags are errors. */
enum qr_err qr_config_load(struct qr_config *cfg, int argc, char **argv, char **envp,
                           struct qr_diag *diag);

/* Re-read the same sources (file, environment, flags) into a fresh config and copy over the keys
 * marked reloadable; keys that changed but need a restart are listed in diag (warning text) and
 * left alone. Returns QR_ERR_CONFIG (cfg untouched) when the new configuration is invalid. */
enum qr_err qr_config_reload(struct qr_config *cfg, int argc, char **argv, char **envp,
                             struct qr_diag *warn, struct qr_diag *diag);

void qr_config_cleanup(struct qr_config *cfg);

/* The check-config report: text form (`key=value` lines plus the predecessor's summary line) or
 * JSON (`{"valid":true,"config":{key:{"value":..,"source":..,"env":..}}}`); secrets redacted. */
void qr_config_print(const struct qr_config *cfg, bool json, FILE *out);

/* Option help for --help, generated from the table. */
void qr_config_print_help(FILE *out);

/* Parsers shared with tests and other subsystems. All return QR_ERR_CONFIG on bad input. */
enum qr_err qr_config_parse_duration_ms(const char *s, uint64_t *out_ms);
enum qr_err qr_config_parse_bytes(const char *s, uint64_t *out);
enum qr_err qr_config_parse_bool(const char *s, bool *out);
/* host:port, [v6]:port, :port (all interfaces, i.e. not loopback). Hosts are copied into out_host
 * (caller frees). Loopback = "localhost" (any case) or a 127.0.0.0/8 or ::1 literal. */
enum qr_err qr_config_parse_listen(const char *s, char **out_host, uint16_t *out_port,
                                   bool *out_loopback);
/* The entry with this id, or NULL. */
const struct qr_backend_spec *qr_config_backend_find(const struct qr_config *cfg, const char *id);

/* http(s) URL with a host, no userinfo, no fragment. */
enum qr_err qr_config_check_url(const char *s, struct qr_diag *diag);

#endif
