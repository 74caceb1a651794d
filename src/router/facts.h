/* Router-internal: what a model manifest declares and what its architecture contract proves,
 * extracted into plain values for the router (facts.c). This header deliberately does not include
 * capability/capability.h, and router.c does not include registry/manifest.h: the manifest's
 * capability bit names (QR_CAP_AUDIO, ...) and the contract's key names clash, so the one file
 * that reads manifests (facts.c) speaks in the router-local fact ids below, and router.c maps
 * them onto capability keys.
 *
 * Every string is borrowed from the registry's manifest and lives as long as the registry; every
 * detail string is static. Allocation-free. */
#ifndef QR_ROUTER_FACTS_H
#define QR_ROUTER_FACTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct qr_registry;
struct qr_reg_model;

/* Artifact classes (bits), see router.h. */
enum qr_route_art_class {
    QR_ROUTE_ART_GGUF = 1u << 0,     /* models:/file: GGUF, backend llama.cpp or gguf */
    QR_ROUTE_ART_OLLAMA = 1u << 1,   /* ollama:<tag>, an artifact's ollama member, ollama-adapter */
    QR_ROUTE_ART_HF = 1u << 2,       /* hf:<repo>, a huggingface member, vllm/mlx/safetensors */
    QR_ROUTE_ART_OPENAI = 1u << 3,   /* openai:<backend id>/<model id> (that backend only) */
    QR_ROUTE_ART_EXTERNAL = 1u << 4, /* backend external, profile:// (predecessor compatibility) */
};

/* Router-local ids of the model-side facts (mapped to capability keys in router.c). */
enum qr_rf_key {
    QR_RF_TEXT = 0,
    QR_RF_DENSE,
    QR_RF_MOE,
    QR_RF_TOTAL_EXPERTS,
    QR_RF_ACTIVE_EXPERTS,
    QR_RF_SHARED_EXPERTS,
    QR_RF_EXPERT_OFFLOAD,
    QR_RF_EXPERT_PARALLEL,
    QR_RF_MTP,
    QR_RF_DRAFT_MODEL,
    QR_RF_KV_OFFLOAD,
    QR_RF_PROMPT_CACHE,
    QR_RF_VISION,
    QR_RF_AUDIO,
    QR_RF_EMBEDDINGS,
    QR_RF_RERANKING,
    QR_RF_REASONING,
    QR_RF_TOOLS,
    QR_RF_TOOL_STREAMING,
    QR_RF_STRUCTURED,
    QR_RF_STREAM_REASONING,
    QR_RF_STREAM_TOOL_ARGS,
    QR_RF__COUNT
};

enum qr_rf_value { QR_RF_UNSTATED = 0, QR_RF_YES = 1, QR_RF_NO = 2 };

struct qr_rf_claim {
    uint8_t v;          /* enum qr_rf_value */
    const char *detail; /* static: which manifest field said it */
};

/* One way to serve an artifact: the artifact itself, or its Ollama tag / Hugging Face repo. */
struct qr_rf_view {
    const char *uri;            /* the manifest artifact's uri (identifies the artifact) */
    const char *served_name;    /* what the backend is asked for: tag, repo, openai id, or uri */
    const char *role;           /* NULL when unstated */
    const char *format;         /* NULL when unstated */
    const char *pin;            /* artifact backend value naming an engine ("llama.cpp", "vllm",
                                   "mlx", "ollama-adapter", "external"), or NULL */
    const char *openai_backend; /* OPENAI: the backend id of openai:<backend>/<id> (not
                                   NUL-terminated at the '/': length in openai_backend_len) */
    size_t openai_backend_len;
    unsigned cls; /* one enum qr_route_art_class bit */
};

#define QR_RF_MAX_VIEWS 192u /* 64 artifacts x (itself, ollama tag, hf repo) */

struct qr_rf_model {
    const char *id, *family, *variant;
    struct qr_rf_claim model[QR_RF__COUNT]; /* the manifest declares */
    struct qr_rf_claim file[QR_RF__COUNT];  /* model.architecture_contract (file-proved) */
    /* context */
    uint64_t native_max;
    const char *native_max_source;                                           /* static */
    bool ctx_backend_managed, ctx_override_supported, ctx_override_verified; /* manifest */
    size_t n_views;
    struct qr_rf_view views[QR_RF_MAX_VIEWS];
};

/* The model name resolves to (borrowed), or NULL. */
const struct qr_reg_model *qr_rf_find(const struct qr_registry *r, const char *name);

/* Extract the facts of m into out (caller storage, fully overwritten). Artifacts with role
 * "draft" or "projector" are not views. */
void qr_rf_extract(const struct qr_reg_model *m, struct qr_rf_model *out);

#endif
