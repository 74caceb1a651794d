/* Model manifests `quantum.runtime/model-manifest/v1alpha1` (docs/REGISTRY.md): parse and
 * validate one manifest document with every rule of the schema
 * (schema/model-manifest-v1alpha1.schema.json), unknown fields rejected at every level, duplicate
 * keys and trailing data rejected, every string and array capped. Each error names the JSON path
 * of the offending field: `artifacts[1].sha256: not a sha256 digest`.
 *
 * A parsed manifest keeps the validated yyjson document (the full manifest, rendered as-is by
 * `/v1/models/{id}`) and a few fields extracted for lookups; every string it exposes is borrowed
 * from that document and lives as long as the manifest. */
#ifndef QR_REGISTRY_MANIFEST_H
#define QR_REGISTRY_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define QR_MANIFEST_SCHEMA       "quantum.runtime/model-manifest/v1alpha1"
#define QR_MANIFEST_MAX_BYTES    (256u * 1024u) /* one manifest document */
#define QR_MANIFEST_MAX_ID       128u           /* canonical id bytes */
#define QR_MANIFEST_MAX_ALIAS    160u           /* alias bytes */
#define QR_MANIFEST_MAX_ALIASES  64u
#define QR_MANIFEST_MAX_ARTIFACT 64u
#define QR_MANIFEST_MAX_URI      2048u

/* Capability booleans of the manifest, as bits; qr_manifest_cap_name gives the hyphenated name
 * the `/v1/models` list uses. The bit order is the alphabetical order of those names. */
enum qr_manifest_cap {
    QR_MANIFEST_CAP_AUDIO = 1u << 0,
    QR_MANIFEST_CAP_EMBEDDINGS = 1u << 1,
    QR_MANIFEST_CAP_REASONING_CONTROL = 1u << 2,
    QR_MANIFEST_CAP_RERANKING = 1u << 3,
    QR_MANIFEST_CAP_STRUCTURED_OUTPUT = 1u << 4,
    QR_MANIFEST_CAP_TEXT = 1u << 5,
    QR_MANIFEST_CAP_THINKING = 1u << 6,
    QR_MANIFEST_CAP_TOOL_STREAMING = 1u << 7,
    QR_MANIFEST_CAP_TOOLS = 1u << 8,
    QR_MANIFEST_CAP_VISION = 1u << 9,
};
#define QR_CAP_COUNT 10u

/* Static hyphenated name of one capability bit ("tool-streaming"), or NULL. */
const char *qr_manifest_cap_name(unsigned bit);
/* Static manifest key of one capability bit ("tool_streaming"), or NULL. */
const char *qr_manifest_cap_key(unsigned bit);

struct qr_manifest_artifact {
    const char *uri;           /* always set */
    const char *sha256;        /* "sha256:<64 hex>" or NULL */
    const char *backend;       /* backend enum value or NULL */
    const char *format, *role; /* labels or NULL */
    const char *ollama_tag;    /* artifacts[].ollama.tag or NULL */
    const char *ollama_digest; /* artifacts[].ollama.digest or NULL */
};

struct qr_manifest {
    void *doc; /* owned: the validated yyjson_doc (yyjson_doc *) */
    const char *id, *display_name;
    const char *backend;            /* backend.type */
    const char *architecture;       /* model.architecture */
    const char *architecture_class; /* model.architecture_class, "" when absent */
    const char *install, *verification, *lifecycle;
    size_t n_aliases;
    const char **aliases; /* owned array of borrowed strings */
    size_t n_artifacts;
    struct qr_manifest_artifact *artifacts; /* owned array */
    unsigned caps;                          /* enum qr_manifest_cap bits that are true */
};

/* Parse and validate len bytes of JSON (borrowed; copied) into a new manifest. QR_ERR_TOO_LARGE
 * above QR_MANIFEST_MAX_BYTES, QR_ERR_PARSE for malformed JSON (diag names the byte offset),
 * QR_ERR_INVALID for a rule violation (diag: "PATH: what"). On success *out is owned by the
 * caller (qr_manifest_free). */
enum qr_err qr_manifest_parse(const char *json, size_t len, struct qr_diag *diag,
                              struct qr_manifest **out);

void qr_manifest_free(struct qr_manifest *m);

/* The manifest's root yyjson_val (borrowed, as void * to keep yyjson out of this header). */
const void *qr_manifest_root(const struct qr_manifest *m);

/* Patterns of §3.2 (NUL-terminated input). */
bool qr_manifest_id_valid(const char *s);
bool qr_manifest_alias_valid(const char *s);
bool qr_manifest_label_valid(const char *s);
bool qr_manifest_digest_valid(const char *s);
bool qr_manifest_semver_valid(const char *s);

/* SemVer precedence of two valid versions into *out (<0, 0, >0); QR_ERR_INVALID when either is
 * not a valid version. Build metadata is not part of the pattern. */
enum qr_err qr_manifest_semver_cmp(const char *a, const char *b, int *out);

/* The schema as the validator knows it, for the schema/code drift test: a field table. */
enum qr_mf_kind { QR_MF_OBJ, QR_MF_ARR, QR_MF_STR, QR_MF_INT, QR_MF_NUM, QR_MF_BOOL };

/* String checks; the schema file names the pattern ones as $defs (id, alias, label, ...). */
enum qr_mf_check {
    QR_CK_NONE = 0,
    QR_CK_TEXT,     /* non-blank text, no control characters */
    QR_CK_ID,       /* $defs/id */
    QR_CK_ALIAS,    /* $defs/alias (also Ollama name:tag) */
    QR_CK_LABEL,    /* $defs/label */
    QR_CK_DIGEST,   /* $defs/digest: sha256:<64 lowercase hex> */
    QR_CK_SEMVER,   /* $defs/semver: x.y.z[-pre], no leading zeros, no empty identifiers */
    QR_CK_URI,      /* $defs/uri: scheme:rest; models: relative, file:/// absolute */
    QR_CK_HTTP_URL, /* absolute http(s) URL */
    QR_CK_RFC3339,  /* date-time */
    QR_CK_HF_REPO,  /* owner/name */
};

struct qr_manifest_field {
    const char *name; /* NULL ends a table; the item spec of an array has name "[]" */
    enum qr_mf_kind kind;
    bool required;
    int check;                           /* string check (manifest.c), or 0 */
    double min, max;                     /* numbers: value range; strings: length; arrays: items */
    const char *const *enums;            /* NULL-terminated allowed values, or NULL */
    const struct qr_manifest_field *sub; /* OBJ: member table; ARR: one item spec */
};

/* The root member table (static, borrowed). */
const struct qr_manifest_field *qr_manifest_schema(void);

#endif
