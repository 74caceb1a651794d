/* OpenAI-compatible dialect profiles: what the OpenAI adapter must know about one server family
 * (vLLM, mlx_lm.server, llama-server, generic) as data, data/dialects/<name>.json (schema in
 * docs/DIALECTS.md), plus the pure half of choosing one by probing: the answers of GET /version,
 * GET /props and GET /health in, the dialect and the why out. The adapter (openai.c) does the
 * HTTP; the encoder sees only struct qr_dialect. */
#ifndef QR_BACKEND_OPENAI_PROFILE_H
#define QR_BACKEND_OPENAI_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/codec.h"
#include "core/err.h"

#define QR_OA_PROFILE_SCHEMA "quantum.runtime/openai-dialect/v1alpha1"
#define QR_OA_MAX_ERAS       8
#define QR_OA_MAX_NAME       32
#define QR_OA_MAX_PATH       128
#define QR_OA_MAX_VERSION    64

/* The dialect names, in the order of the openai_dialect setting (without "auto"). */
extern const char *const qr_openai_dialects[]; /* NULL-terminated */

enum qr_oa_healthy {
    QR_OA_HEALTHY_2XX = 0,       /* any 2xx (vLLM: empty 200; llama-server: 503 while loading) */
    QR_OA_HEALTHY_STATUS_OK = 1, /* 2xx with a JSON body {"status":"ok"} (mlx_lm.server) */
};

/* From min_version on (inclusive), the server reads assistant reasoning under reasoning_field. */
struct qr_oa_era {
    char min_version[QR_OA_MAX_VERSION];
    char reasoning_field[QR_OA_MAX_NAME];
};

/* One parsed profile; self-contained (no pointers into the JSON). */
struct qr_oa_profile {
    char name[QR_OA_MAX_NAME];
    char reasoning_field[QR_OA_MAX_NAME];  /* when the version is unknown or before every era */
    struct qr_oa_era eras[QR_OA_MAX_ERAS]; /* newest first */
    size_t n_eras;
    char health_path[QR_OA_MAX_PATH];
    enum qr_oa_healthy healthy;
    char version_path[QR_OA_MAX_PATH]; /* "" = the server has none */
    char metrics_path[QR_OA_MAX_PATH]; /* "" = none; recorded in the descriptor */
    bool stream_usage;
    bool default_temperature_set; /* sent when the client gave no temperature */
    double default_temperature;
    int64_t default_max_tokens;                /* sent when the client gave none; 0 = nothing */
    unsigned ops_unsupported;                  /* bit (1u << enum qr_op) */
    char context_length_field[QR_OA_MAX_NAME]; /* "" = none; e.g. "max_model_len" */
    char guided_decoding[QR_OA_MAX_NAME]; /* "structured_outputs" | "response_format" | "none" */
    bool listed_models_only; /* only names the server's /v1/models lists are sent (quirk 32:
                                mlx_lm.server loads whatever repository "model" names) */
    char ledger_project[QR_OA_MAX_NAME]; /* the engine project as the upstream ledger spells it
                                            ("vLLM"); "" = unknown (ledger blocks naming a
                                            project then match as uncertain) */
};

/* Parse one profile file strictly (unknown or duplicate keys, wrong types, out-of-range values,
 * a name other than expect_name when it is non-NULL: QR_ERR_INVALID with diag naming the file and
 * JSON path). name is the file name used in messages. */
enum qr_err qr_openai_profile_parse(const char *name, const char *json, size_t len,
                                    const char *expect_name, struct qr_oa_profile *out,
                                    struct qr_diag *diag);

/* The builtin profile dialects/<dialect>.json. */
enum qr_err qr_openai_profile_load(const char *dialect, struct qr_oa_profile *out,
                                   struct qr_diag *diag);

/* Compare dotted versions numerically ("0.16.0" > "0.9.2"; a suffix such as "rc1" or "+cu126"
 * ends the number part); <0, 0, >0. */
int qr_openai_version_cmp(const char *a, const char *b);

/* The reasoning field for version (NULL or "" = unknown: the profile's own field). */
const char *qr_openai_profile_reasoning_field(const struct qr_oa_profile *p, const char *version);

/* Fill d (already qr_dialect_default'ed) from p. version may be NULL; reasoning_override, when
 * non-NULL, wins over the profile's field (an explicit openai_reasoning_field). d borrows from p
 * and reasoning_override. */
void qr_openai_profile_apply(const struct qr_oa_profile *p, const char *version,
                             const char *reasoning_override, struct qr_dialect *d);

/* ---- probing (pure) ---- */

/* What the server answered; status 0 = not asked or no HTTP answer. Bodies borrowed. */
struct qr_oa_probe_answers {
    int version_status;
    struct qr_slice version_body;
    int props_status;
    int health_status;
    struct qr_slice health_body;
};

struct qr_oa_detection {
    char dialect[QR_OA_MAX_NAME];
    char version[QR_OA_MAX_VERSION]; /* "" when none was read */
    char why[256];
};

/* /version 2xx with a JSON string "version" -> vllm (version kept); else /props 2xx ->
 * llama-server; else /health 2xx with {"status":"ok"} -> mlx-lm; else generic. */
void qr_openai_detect(const struct qr_oa_probe_answers *a, struct qr_oa_detection *out);

/* The "version" string of a /version body, copied into out (cap n); false when there is none. */
bool qr_openai_version_of(struct qr_slice body, char *out, size_t n);

/* True when status/body are healthy under p's rule. */
bool qr_openai_profile_healthy(const struct qr_oa_profile *p, int status, struct qr_slice body);

#endif
