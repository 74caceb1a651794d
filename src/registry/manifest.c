/* Model manifest validation. The manifest schema is one static field table (the same tree the
 * published JSON schema describes; tests/unit/registry/test_schema.c compares the two): a generic
 * walker checks types, required members, unknown members, duplicate keys, enums, string patterns,
 * lengths and ranges, building the JSON path of every value as it descends. Rules that relate two
 * fields (verified needs digests, experts only with moe, max >= min version, ...) run after the
 * walk on the validated document. Nothing here allocates in proportion to input beyond the capped
 * document itself. */
#include "registry/manifest.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yyjson.h>

/* ---- string checks -------------------------------------------------------------------------- */

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* first char from first_ok, then up to max-1 chars from the set */
static bool token_ok(const char *s, size_t max, bool (*first_ok)(char), const char *extra,
                     bool upper)
{
    size_t n = strlen(s);
    if (n == 0 || n > max || !first_ok(s[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        bool ok = upper ? is_alnum(c) : is_lower_alnum(c);
        if (!ok && !strchr(extra, c))
            return false;
    }
    return true;
}

bool qr_manifest_id_valid(const char *s)
{
    return token_ok(s, QR_MANIFEST_MAX_ID, is_lower_alnum, "._-", false);
}

bool qr_manifest_alias_valid(const char *s)
{
    return token_ok(s, QR_MANIFEST_MAX_ALIAS, is_alnum, "._:/-", true);
}

bool qr_manifest_label_valid(const char *s)
{
    return token_ok(s, 80, is_alnum, "._+-", true);
}

bool qr_manifest_digest_valid(const char *s)
{
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
        return false;
    for (size_t i = 7; i < 7 + 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    }
    return true;
}

/* A numeric identifier: digits, no leading zero unless it is "0". */
static bool numeric_ok(const char *p, size_t n)
{
    if (n == 0 || n > 18)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
    }
    return n == 1 || p[0] != '0';
}

static bool all_digits(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
    }
    return true;
}

/* Split "x.y.z[-pre]" into its three numbers and the prerelease (NULL when none). */
static bool semver_split(const char *s, unsigned long long core[3], const char **pre)
{
    const char *p = s;
    if (strlen(s) > 128)
        return false;
    for (int i = 0; i < 3; i++) {
        size_t n = strspn(p, "0123456789");
        if (!numeric_ok(p, n))
            return false;
        core[i] = strtoull(p, NULL, 10);
        p += n;
        if (i < 2 && *p++ != '.')
            return false;
    }
    *pre = NULL;
    if (*p == 0)
        return true;
    if (*p != '-' || !p[1])
        return false;
    *pre = ++p;
    while (*p) {
        size_t n = strcspn(p, ".");
        if (n == 0)
            return false; /* empty identifier */
        for (size_t i = 0; i < n; i++) {
            if (!is_alnum(p[i]) && p[i] != '-')
                return false;
        }
        if (all_digits(p, n) && !numeric_ok(p, n))
            return false;
        p += n;
        if (*p == '.' && !*++p)
            return false;
    }
    return true;
}

bool qr_manifest_semver_valid(const char *s)
{
    unsigned long long c[3];
    const char *pre;
    return semver_split(s, c, &pre);
}

static int cmp_ull(unsigned long long a, unsigned long long b)
{
    return a < b ? -1 : a > b;
}

static int cmp_prerelease(const char *a, const char *b)
{
    while (*a && *b) {
        size_t na = strcspn(a, "."), nb = strcspn(b, ".");
        bool da = all_digits(a, na), db = all_digits(b, nb);
        int c;
        if (da && db)
            c = cmp_ull(strtoull(a, NULL, 10), strtoull(b, NULL, 10));
        else if (da != db)
            c = da ? -1 : 1; /* numeric identifiers sort below alphanumeric ones */
        else {
            c = memcmp(a, b, na < nb ? na : nb);
            if (!c)
                c = cmp_ull(na, nb);
        }
        if (c)
            return c < 0 ? -1 : 1;
        a += na + (a[na] == '.');
        b += nb + (b[nb] == '.');
    }
    return *a ? 1 : *b ? -1 : 0; /* the longer prerelease wins a tie */
}

enum qr_err qr_manifest_semver_cmp(const char *a, const char *b, int *out)
{
    unsigned long long ca[3], cb[3];
    const char *pa, *pb;
    if (!semver_split(a, ca, &pa) || !semver_split(b, cb, &pb))
        return QR_ERR_INVALID;
    for (int i = 0; i < 3; i++) {
        int c = cmp_ull(ca[i], cb[i]);
        if (c) {
            *out = c;
            return QR_OK;
        }
    }
    if (!pa || !pb) /* a release is greater than its prereleases */
        *out = (!pa && pb) ? 1 : (pa && !pb) ? -1 : 0;
    else
        *out = cmp_prerelease(pa, pb);
    return QR_OK;
}

static bool no_space_or_ctl(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char) *s;
        if (c <= 0x20 || c == 0x7f)
            return false;
    }
    return true;
}

/* scheme ":" rest; models:<relative path> and file://<absolute path> are checked further. */
static const char *uri_check(const char *s)
{
    size_t n = strlen(s);
    if (n < 3 || n > QR_MANIFEST_MAX_URI)
        return "not a URI of 3..2048 bytes";
    if (!no_space_or_ctl(s))
        return "URI contains whitespace or control characters";
    size_t k = 0;
    if (!isalpha((unsigned char) s[0]))
        return "URI has no scheme";
    while (isalnum((unsigned char) s[k]) || s[k] == '+' || s[k] == '.' || s[k] == '-')
        k++;
    if (s[k] != ':' || !s[k + 1])
        return "URI has no scheme";
    if (k == 6 && !strncasecmp(s, "models", 6)) {
        const char *p = s + 7;
        if (*p == '/' || strchr(p, '\\'))
            return "models: URI must be a relative path";
        while (*p) {
            size_t m = strcspn(p, "/");
            if (m == 0 || (m == 1 && p[0] == '.') || (m == 2 && !strncmp(p, "..", 2)))
                return "models: URI has an empty, '.' or '..' segment";
            p += m + (p[m] == '/');
        }
    } else if (k == 4 && !strncasecmp(s, "file", 4)) {
        if (strncmp(s + 5, "///", 3) != 0)
            return "file: URI must be file:///absolute/path";
    }
    return NULL;
}

static bool http_url_ok(const char *s)
{
    const char *p = !strncmp(s, "https://", 8) ? s + 8 : !strncmp(s, "http://", 7) ? s + 7 : NULL;
    return p && *p && *p != '/' && strlen(s) <= QR_MANIFEST_MAX_URI && no_space_or_ctl(s);
}

static bool digits_in(const char *p, int n, int lo, int hi)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (p[i] - '0');
    }
    return v >= lo && v <= hi;
}

static bool rfc3339_ok(const char *s)
{
    /* YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM) */
    if (strlen(s) < 20 || strlen(s) > 40)
        return false;
    if (!digits_in(s, 4, 0, 9999) || s[4] != '-' || !digits_in(s + 5, 2, 1, 12) || s[7] != '-' ||
        !digits_in(s + 8, 2, 1, 31) || (s[10] != 'T' && s[10] != 't') ||
        !digits_in(s + 11, 2, 0, 23) || s[13] != ':' || !digits_in(s + 14, 2, 0, 59) ||
        s[16] != ':' || !digits_in(s + 17, 2, 0, 60))
        return false;
    const char *p = s + 19;
    if (*p == '.') {
        size_t n = strspn(++p, "0123456789");
        if (n == 0)
            return false;
        p += n;
    }
    if ((*p == 'Z' || *p == 'z') && !p[1])
        return true;
    return (*p == '+' || *p == '-') && digits_in(p + 1, 2, 0, 23) && p[3] == ':' &&
           digits_in(p + 4, 2, 0, 59) && !p[6];
}

static bool hf_part(const char *p, size_t n)
{
    if (n == 0 || n > 96 || !is_alnum(p[0]))
        return false;
    for (size_t i = 1; i < n; i++) {
        if (!is_alnum(p[i]) && !strchr("._-", p[i]))
            return false;
    }
    return true;
}

static bool hf_repo_ok(const char *s)
{
    const char *slash = strchr(s, '/');
    return slash && hf_part(s, (size_t) (slash - s)) && hf_part(slash + 1, strlen(slash + 1));
}

static bool text_ok(const char *s)
{
    bool blank = true;
    for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            return false;
        if (*p != ' ')
            blank = false;
    }
    return !blank;
}

/* ---- the schema ------------------------------------------------------------------------------ */

/* clang-format off */
#define REQ true
#define OPT false
#define F_STR(n, r, ck, lo, hi) {n, QR_MF_STR, r, ck, lo, hi, NULL, NULL}
#define F_ENUM(n, r, e)         {n, QR_MF_STR, r, 0, 0, 0, e, NULL}
#define F_INT(n, r, lo, hi)     {n, QR_MF_INT, r, 0, lo, hi, NULL, NULL}
#define F_NUM(n, r, lo, hi)     {n, QR_MF_NUM, r, 0, lo, hi, NULL, NULL}
#define F_BOOL(n, r)            {n, QR_MF_BOOL, r, 0, 0, 0, NULL, NULL}
#define F_OBJ(n, r, t)          {n, QR_MF_OBJ, r, 0, 0, 0, NULL, t}
#define F_ARR(n, r, lo, hi, it) {n, QR_MF_ARR, r, 0, lo, hi, NULL, it}
#define F_END                   {NULL, QR_MF_OBJ, false, 0, 0, 0, NULL, NULL}
/* clang-format on */
#define BIG          1e15
#define LABEL(n, r)  F_STR(n, r, QR_CK_LABEL, 1, 80)
#define DIGEST(n, r) F_STR(n, r, QR_CK_DIGEST, 71, 71)

static const char *const E_SCHEMA[] = {QR_MANIFEST_SCHEMA, NULL};
static const char *const E_BACKEND[] = {"ollama-adapter", "llama.cpp",   "mlx",      "vllm",
                                        "gguf",           "safetensors", "external", NULL};
static const char *const E_ARCH_CLASS[] = {"dense", "moe", "unknown", "", NULL};
static const char *const E_FFN[] = {"dense", "moe", "unknown", NULL};
static const char *const E_INSTALL[] = {"external", "available", "installed", NULL};
static const char *const E_VERIFY[] = {"unverified", "verified", "failed", NULL};
static const char *const E_LIFECYCLE[] = {"active", "deprecated", "blocked", NULL};
static const char *const E_SYSTEM_ROLE[] = {"supported", "merged_into_user", "unsupported",
                                            "unknown", NULL};
static const char *const E_POOLING[] = {"none", "mean", "cls", "last", "rank", NULL};
static const char *const E_IN[] = {"text", "image", "audio", "video", NULL};
static const char *const E_OUT[] = {"text", "embedding", "score", NULL};
static const char *const E_MARKERS[] = {"chatml",
                                        "hermes-tools",
                                        "think-tags",
                                        "tool-response-tags",
                                        "inst-tags",
                                        "start-of-turn",
                                        "header-ids",
                                        "channels",
                                        "generation-prompt",
                                        "mentions-tools",
                                        NULL};

static const struct qr_manifest_field ITEM_ALIAS[] = {F_STR("[]", REQ, QR_CK_ALIAS, 1, 160)};
static const struct qr_manifest_field ITEM_ID[] = {F_STR("[]", REQ, QR_CK_ID, 1, 128)};
static const struct qr_manifest_field ITEM_LABEL[] = {LABEL("[]", REQ)};
static const struct qr_manifest_field ITEM_IN[] = {F_ENUM("[]", REQ, E_IN)};
static const struct qr_manifest_field ITEM_OUT[] = {F_ENUM("[]", REQ, E_OUT)};
static const struct qr_manifest_field ITEM_MARKER[] = {F_ENUM("[]", REQ, E_MARKERS)};

static const struct qr_manifest_field T_SOURCE[] = {
    LABEL("provider", REQ), F_STR("reference", REQ, QR_CK_TEXT, 1, 300),
    F_STR("revision", REQ, QR_CK_TEXT, 1, 200), F_END};
static const struct qr_manifest_field T_BACKEND[] = {F_ENUM("type", REQ, E_BACKEND), F_END};
static const struct qr_manifest_field T_OLLAMA[] = {F_STR("tag", REQ, QR_CK_ALIAS, 1, 160),
                                                    DIGEST("digest", OPT), F_END};
static const struct qr_manifest_field T_HF[] = {F_STR("repo", REQ, QR_CK_HF_REPO, 3, 193),
                                                F_STR("revision", OPT, QR_CK_TEXT, 1, 200),
                                                F_STR("file", OPT, QR_CK_TEXT, 1, 300), F_END};
static const struct qr_manifest_field T_ARTIFACT[] = {
    F_STR("uri", REQ, QR_CK_URI, 3, QR_MANIFEST_MAX_URI),
    DIGEST("sha256", OPT),
    F_ENUM("backend", OPT, E_BACKEND),
    LABEL("format", OPT),
    LABEL("role", OPT),
    F_INT("size_bytes", OPT, 0, BIG),
    F_OBJ("ollama", OPT, T_OLLAMA),
    F_OBJ("huggingface", OPT, T_HF),
    F_END};
static const struct qr_manifest_field ITEM_ARTIFACT[] = {F_OBJ("[]", REQ, T_ARTIFACT)};

static const struct qr_manifest_field T_EXPERTS[] = {
    F_INT("total", REQ, 1, 1e6), F_INT("active", REQ, 1, 1e6), F_INT("shared", OPT, 0, 1e6), F_END};
static const struct qr_manifest_field T_CTX_POLICY[] = {
    F_INT("native_max", OPT, 0, 1e8), F_BOOL("backend_managed", OPT),
    F_BOOL("override_supported", OPT), F_BOOL("override_verified", OPT), F_END};

/* model.architecture_contract: names follow `quantum-runtime inspect --json` (its dotted keys
 * become nested objects); docs/REGISTRY.md lists the mapping. */
static const struct qr_manifest_field T_PARAMS[] = {F_INT("total", OPT, 0, BIG),
                                                    F_INT("active", OPT, 0, BIG), F_END};
static const struct qr_manifest_field T_ATTENTION[] = {
    F_INT("head_count", OPT, 1, 1e6),         F_INT("head_count_kv", OPT, 1, 1e6),
    F_INT("key_length", OPT, 1, 1e6),         F_INT("value_length", OPT, 1, 1e6),
    F_INT("sliding_window", OPT, 1, 1e9),     F_INT("sliding_layers", OPT, 0, 65536),
    F_INT("shared_kv_layers", OPT, 0, 65536), F_BOOL("causal", OPT),
    F_INT("kv_lora_rank", OPT, 1, 1e6),       F_END};
static const struct qr_manifest_field T_SCALING[] = {LABEL("type", OPT),
                                                     F_NUM("factor", OPT, 0, 1e6), F_END};
static const struct qr_manifest_field T_ROPE[] = {F_NUM("freq_base", OPT, 0, 1e12),
                                                  F_INT("dimension_count", OPT, 1, 1e6),
                                                  F_OBJ("scaling", OPT, T_SCALING), F_END};
static const struct qr_manifest_field T_EXT_CTX[] = {LABEL("name", REQ),
                                                     F_INT("context_length", REQ, 1, 1e8),
                                                     LABEL("rope_scaling_type", OPT),
                                                     F_NUM("rope_scaling_factor", OPT, 0, 1e6),
                                                     F_BOOL("verified", OPT),
                                                     F_END};
static const struct qr_manifest_field ITEM_EXT_CTX[] = {F_OBJ("[]", REQ, T_EXT_CTX)};
static const struct qr_manifest_field T_TOKENIZER[] = {LABEL("model", OPT), LABEL("pre", OPT),
                                                       DIGEST("sha256", OPT), F_END};
static const struct qr_manifest_field T_TEMPLATE[] = {
    DIGEST("sha256", OPT), F_INT("bytes", OPT, 0, 1e9), LABEL("name", OPT),
    F_ARR("markers", OPT, 0, 16, ITEM_MARKER), F_END};
static const struct qr_manifest_field T_MODALITIES[] = {
    F_ARR("input", OPT, 1, 4, ITEM_IN), F_ARR("output", OPT, 1, 3, ITEM_OUT), F_END};
static const struct qr_manifest_field T_PROJECTOR[] = {
    F_BOOL("required", REQ), LABEL("type", OPT), DIGEST("sha256", OPT),
    F_STR("uri", OPT, QR_CK_URI, 3, QR_MANIFEST_MAX_URI), F_END};
static const struct qr_manifest_field T_SPEC[] = {
    F_BOOL("mtp", OPT), F_INT("nextn_predict_layers", OPT, 0, 64),
    F_ARR("draft_models", OPT, 0, 16, ITEM_ID), F_END};
static const struct qr_manifest_field T_QUANT[] = {F_INT("file_type", OPT, 0, 1024),
                                                   LABEL("file_type_name", OPT),
                                                   F_ARR("formats", OPT, 0, 32, ITEM_LABEL), F_END};
static const struct qr_manifest_field T_CACHE[] = {
    F_BOOL("kv_offload", OPT), F_BOOL("prompt_cache", OPT),
    F_ARR("kv_types", OPT, 0, 32, ITEM_LABEL), F_END};
static const struct qr_manifest_field T_OFFLOAD[] = {F_BOOL("expert_offload", OPT),
                                                     F_BOOL("layer_offload", OPT), F_END};
static const struct qr_manifest_field T_CONTRACT[] = {
    LABEL("architecture", OPT),
    F_ENUM("ffn", OPT, E_FFN),
    F_INT("block_count", OPT, 1, 65536),
    F_INT("embedding_length", OPT, 1, 1e7),
    F_INT("context_length", OPT, 1, 1e8),
    F_INT("vocab_size", OPT, 1, 1e8),
    F_OBJ("params", OPT, T_PARAMS),
    F_INT("expert_count", OPT, 1, 4096),
    F_INT("expert_used_count", OPT, 1, 4096),
    F_INT("expert_shared_count", OPT, 0, 4096),
    F_INT("leading_dense_block_count", OPT, 0, 65536),
    F_OBJ("attention", OPT, T_ATTENTION),
    F_OBJ("rope", OPT, T_ROPE),
    F_ARR("extended_context", OPT, 0, 16, ITEM_EXT_CTX),
    F_OBJ("tokenizer", OPT, T_TOKENIZER),
    F_INT("bos_token_id", OPT, 0, 1e8),
    F_INT("eos_token_id", OPT, 0, 1e8),
    F_BOOL("add_bos_token", OPT),
    F_BOOL("add_eos_token", OPT),
    F_ENUM("system_role", OPT, E_SYSTEM_ROLE),
    F_OBJ("chat_template", OPT, T_TEMPLATE),
    F_ENUM("pooling", OPT, E_POOLING),
    F_OBJ("modalities", OPT, T_MODALITIES),
    F_OBJ("projector", OPT, T_PROJECTOR),
    F_OBJ("speculative", OPT, T_SPEC),
    F_OBJ("quantization", OPT, T_QUANT),
    F_OBJ("cache", OPT, T_CACHE),
    F_OBJ("offload", OPT, T_OFFLOAD),
    F_END};

static const struct qr_manifest_field T_MODEL[] = {LABEL("architecture", REQ),
                                                   LABEL("parameter_class", REQ),
                                                   LABEL("quantization", REQ),
                                                   F_INT("context_window", REQ, 1, 1e7),
                                                   F_ENUM("architecture_class", OPT, E_ARCH_CLASS),
                                                   F_NUM("total_parameters_b", OPT, 0, 1e6),
                                                   F_NUM("active_parameters_b", OPT, 0, 1e6),
                                                   F_OBJ("experts", OPT, T_EXPERTS),
                                                   F_OBJ("context_policy", OPT, T_CTX_POLICY),
                                                   F_OBJ("architecture_contract", OPT, T_CONTRACT),
                                                   F_END};

static const struct qr_manifest_field T_CAPS[] = {F_BOOL("text", REQ),
                                                  F_BOOL("vision", REQ),
                                                  F_BOOL("audio", REQ),
                                                  F_BOOL("embeddings", REQ),
                                                  F_BOOL("tools", REQ),
                                                  F_BOOL("thinking", REQ),
                                                  F_BOOL("reranking", OPT),
                                                  F_BOOL("tool_streaming", OPT),
                                                  F_BOOL("reasoning_control", OPT),
                                                  F_BOOL("structured_output", OPT),
                                                  F_END};
static const struct qr_manifest_field T_COMPAT[] = {
    F_STR("min_runtime_version", REQ, QR_CK_SEMVER, 5, 128),
    F_STR("max_runtime_version", OPT, QR_CK_SEMVER, 5, 128), F_END};
static const struct qr_manifest_field T_PERSONA[] = {F_STR("package", REQ, QR_CK_ID, 1, 128),
                                                     F_STR("version", REQ, QR_CK_SEMVER, 5, 128),
                                                     DIGEST("sha256", OPT), F_END};
static const struct qr_manifest_field T_STATE[] = {F_ENUM("install", REQ, E_INSTALL),
                                                   F_ENUM("verification", REQ, E_VERIFY),
                                                   F_ENUM("lifecycle", REQ, E_LIFECYCLE), F_END};
static const struct qr_manifest_field T_PROV[] = {
    F_STR("publisher", REQ, QR_CK_TEXT, 1, 200), F_STR("source_url", OPT, QR_CK_HTTP_URL, 0, 2048),
    F_STR("license_ref", OPT, QR_CK_NONE, 0, 160),
    F_STR("retrieved_at", OPT, QR_CK_RFC3339, 20, 40), F_END};

static const struct qr_manifest_field T_ROOT[] = {
    F_ENUM("schema_version", REQ, E_SCHEMA),
    F_STR("id", REQ, QR_CK_ID, 1, 128),
    F_STR("display_name", REQ, QR_CK_TEXT, 1, 160),
    F_ARR("aliases", OPT, 0, QR_MANIFEST_MAX_ALIASES, ITEM_ALIAS),
    F_OBJ("source", REQ, T_SOURCE),
    F_OBJ("backend", REQ, T_BACKEND),
    F_ARR("artifacts", REQ, 1, QR_MANIFEST_MAX_ARTIFACT, ITEM_ARTIFACT),
    F_OBJ("model", REQ, T_MODEL),
    F_OBJ("capabilities", REQ, T_CAPS),
    F_OBJ("compatibility", REQ, T_COMPAT),
    F_OBJ("persona", OPT, T_PERSONA),
    F_OBJ("state", REQ, T_STATE),
    F_OBJ("provenance", REQ, T_PROV),
    F_END};

const struct qr_manifest_field *qr_manifest_schema(void)
{
    return T_ROOT;
}

/* ---- the walker ------------------------------------------------------------------------------ */

struct path {
    char s[256];
    size_t len;
};

static size_t path_push(struct path *p, const char *name, long idx)
{
    size_t old = p->len;
    int n;
    if (idx >= 0)
        n = snprintf(p->s + p->len, sizeof p->s - p->len, "[%ld]", idx);
    else
        n = snprintf(p->s + p->len, sizeof p->s - p->len, "%s%s", p->len ? "." : "", name);
    if (n > 0)
        p->len = p->len + (size_t) n < sizeof p->s ? p->len + (size_t) n : sizeof p->s - 1;
    return old;
}

static void path_pop(struct path *p, size_t old)
{
    p->len = old;
    p->s[old] = 0;
}

static enum qr_err bad(struct qr_diag *d, const struct path *p, const char *what)
{
    return qr_diag_set(d, QR_ERR_INVALID, "%s: %s", p->len ? p->s : "(root)", what);
}

static const char *KIND_NAME[] = {"an object",  "an array", "a string",
                                  "an integer", "a number", "a boolean"};

static enum qr_err check_str(const struct qr_manifest_field *f, yyjson_val *v, const struct path *p,
                             struct qr_diag *d)
{
    const char *s = yyjson_get_str(v);
    size_t n = yyjson_get_len(v);
    char msg[160];
    if (strlen(s) != n)
        return bad(d, p, "contains a NUL character");
    if (f->enums) {
        for (const char *const *e = f->enums; *e; e++) {
            if (!strcmp(*e, s))
                return QR_OK;
        }
        return bad(d, p, "not an allowed value");
    }
    bool pattern = f->check == QR_CK_ID || f->check == QR_CK_ALIAS || f->check == QR_CK_LABEL ||
                   f->check == QR_CK_DIGEST || f->check == QR_CK_SEMVER ||
                   f->check == QR_CK_HF_REPO ||
                   f->check == QR_CK_RFC3339; /* the pattern bounds the length and says why */
    if (!pattern && ((double) n < f->min || (double) n > f->max)) {
        snprintf(msg, sizeof msg, "length %zu outside %.0f..%.0f", n, f->min, f->max);
        return bad(d, p, msg);
    }
    const char *err = NULL;
    switch (f->check) {
    case QR_CK_TEXT:
        err = text_ok(s) ? NULL : "blank or contains control characters";
        break;
    case QR_CK_ID:
        err = qr_manifest_id_valid(s) ? NULL : "not a canonical id ([a-z0-9][a-z0-9._-]{0,127})";
        break;
    case QR_CK_ALIAS:
        err = qr_manifest_alias_valid(s) ? NULL : "not an alias ([A-Za-z0-9][A-Za-z0-9._:/-]*)";
        break;
    case QR_CK_LABEL:
        err = qr_manifest_label_valid(s) ? NULL : "not a label ([A-Za-z0-9][A-Za-z0-9._+-]*)";
        break;
    case QR_CK_DIGEST:
        err = qr_manifest_digest_valid(s) ? NULL : "not a sha256 digest";
        break;
    case QR_CK_SEMVER:
        err = qr_manifest_semver_valid(s) ? NULL : "not a semantic version";
        break;
    case QR_CK_URI:
        err = uri_check(s);
        break;
    case QR_CK_HTTP_URL:
        err = http_url_ok(s) ? NULL : "not an absolute http(s) URL";
        break;
    case QR_CK_RFC3339:
        err = rfc3339_ok(s) ? NULL : "not an RFC 3339 date-time";
        break;
    case QR_CK_HF_REPO:
        err = hf_repo_ok(s) ? NULL : "not a Hugging Face repository (owner/name)";
        break;
    default:
        if (f->check == QR_CK_NONE) {
            for (const char *q = s; *q; q++) {
                if ((unsigned char) *q < 0x20)
                    err = "contains control characters";
            }
        }
        break;
    }
    return err ? bad(d, p, err) : QR_OK;
}

static enum qr_err check_number(const struct qr_manifest_field *f, yyjson_val *v,
                                const struct path *p, struct qr_diag *d)
{
    double x;
    if (f->kind == QR_MF_INT) {
        if (!yyjson_is_int(v))
            return bad(d, p, "not an integer");
        x = yyjson_is_sint(v) ? (double) yyjson_get_sint(v) : (double) yyjson_get_uint(v);
    } else {
        x = yyjson_get_num(v);
    }
    if (!(x >= f->min && x <= f->max)) {
        char msg[96];
        snprintf(msg, sizeof msg, "outside %.17g..%.17g", f->min, f->max);
        return bad(d, p, msg);
    }
    return QR_OK;
}

static enum qr_err walk(const struct qr_manifest_field *f, yyjson_val *v, struct path *p,
                        struct qr_diag *d);

static enum qr_err walk_obj(const struct qr_manifest_field *t, yyjson_val *v, struct path *p,
                            struct qr_diag *d)
{
    yyjson_obj_iter it;
    yyjson_val *k;
    size_t nt = 0;
    while (t[nt].name)
        nt++;
    uint64_t seen = 0; /* tables have fewer than 64 members */
    if (NEVER(nt >= 64))
        return bad(d, p, "schema table too large");
    yyjson_obj_iter_init(v, &it);
    while ((k = yyjson_obj_iter_next(&it))) {
        const char *name = yyjson_get_str(k);
        size_t i = 0;
        while (i < nt && strcmp(t[i].name, name) != 0)
            i++;
        size_t old = path_push(p, name, -1);
        if (i == nt || strlen(name) != yyjson_get_len(k)) {
            enum qr_err e = bad(d, p, "unknown field");
            return e;
        }
        if (seen & (1ull << i))
            return bad(d, p, "duplicate key");
        seen |= 1ull << i;
        enum qr_err e = walk(&t[i], yyjson_obj_iter_get_val(k), p, d);
        if (e)
            return e;
        path_pop(p, old);
    }
    for (size_t i = 0; i < nt; i++) {
        if (t[i].required && !(seen & (1ull << i))) {
            size_t old = path_push(p, t[i].name, -1);
            enum qr_err e = bad(d, p, "required field missing");
            path_pop(p, old);
            return e;
        }
    }
    return QR_OK;
}

static enum qr_err walk_arr(const struct qr_manifest_field *f, yyjson_val *v, struct path *p,
                            struct qr_diag *d)
{
    size_t n = yyjson_arr_size(v);
    if ((double) n < f->min || (double) n > f->max) {
        char msg[96];
        snprintf(msg, sizeof msg, "%zu items, outside %.0f..%.0f", n, f->min, f->max);
        return bad(d, p, msg);
    }
    for (size_t i = 0; i < n; i++) {
        yyjson_val *item = yyjson_arr_get(v, i);
        size_t old = path_push(p, NULL, (long) i);
        enum qr_err e = walk(f->sub, item, p, d);
        if (e)
            return e;
        /* string items are unique (uniqueItems) */
        for (size_t j = 0; yyjson_is_str(item) && j < i; j++) {
            if (yyjson_equals(yyjson_arr_get(v, j), item)) {
                char msg[64];
                snprintf(msg, sizeof msg, "duplicates item %zu", j);
                return bad(d, p, msg);
            }
        }
        path_pop(p, old);
    }
    return QR_OK;
}

static enum qr_err walk(const struct qr_manifest_field *f, yyjson_val *v, struct path *p,
                        struct qr_diag *d)
{
    bool ok;
    switch (f->kind) {
    case QR_MF_OBJ:
        ok = yyjson_is_obj(v);
        break;
    case QR_MF_ARR:
        ok = yyjson_is_arr(v);
        break;
    case QR_MF_STR:
        ok = yyjson_is_str(v);
        break;
    case QR_MF_INT:
    case QR_MF_NUM:
        ok = yyjson_is_num(v);
        break;
    default:
        ok = yyjson_is_bool(v);
        break;
    }
    if (!ok) {
        char msg[40];
        snprintf(msg, sizeof msg, "not %s", KIND_NAME[f->kind]);
        return bad(d, p, msg);
    }
    switch (f->kind) {
    case QR_MF_OBJ:
        return walk_obj(f->sub, v, p, d);
    case QR_MF_ARR:
        return walk_arr(f, v, p, d);
    case QR_MF_STR:
        return check_str(f, v, p, d);
    case QR_MF_INT:
    case QR_MF_NUM:
        return check_number(f, v, p, d);
    default:
        return QR_OK;
    }
}

/* ---- cross-field rules ----------------------------------------------------------------------- */

static yyjson_val *at(yyjson_val *o, const char *k)
{
    return yyjson_obj_get(o, k);
}

static const char *str_at(yyjson_val *o, const char *k)
{
    return yyjson_get_str(yyjson_obj_get(o, k));
}

static bool bool_at(yyjson_val *o, const char *k)
{
    return yyjson_get_bool(yyjson_obj_get(o, k));
}

static enum qr_err fail(struct qr_diag *d, const char *path, const char *what)
{
    return qr_diag_set(d, QR_ERR_INVALID, "%s: %s", path, what);
}

static enum qr_err rules_aliases(yyjson_val *root, struct qr_diag *d)
{
    yyjson_val *al = at(root, "aliases");
    const char *id = str_at(root, "id");
    for (size_t i = 0; i < yyjson_arr_size(al); i++) {
        const char *a = yyjson_get_str(yyjson_arr_get(al, i));
        if (!strcmp(a, id))
            return qr_diag_set(d, QR_ERR_INVALID, "aliases[%zu]: equals the canonical id", i);
    }
    return QR_OK;
}

static enum qr_err rules_artifacts(yyjson_val *root, bool verified, struct qr_diag *d)
{
    yyjson_val *arts = at(root, "artifacts");
    size_t n = yyjson_arr_size(arts);
    for (size_t i = 0; i < n; i++) {
        yyjson_val *a = yyjson_arr_get(arts, i);
        if (verified && !at(a, "sha256"))
            return qr_diag_set(d, QR_ERR_INVALID,
                               "artifacts[%zu].sha256: required when state.verification is "
                               "verified",
                               i);
        const char *b = str_at(a, "backend"), *u = str_at(a, "uri");
        for (size_t j = 0; j < i; j++) {
            yyjson_val *o = yyjson_arr_get(arts, j);
            const char *ob = str_at(o, "backend");
            if (!strcmp(u, str_at(o, "uri")) && ((!b && !ob) || (b && ob && !strcmp(b, ob))))
                return qr_diag_set(d, QR_ERR_INVALID,
                                   "artifacts[%zu]: same backend and uri as artifacts[%zu]", i, j);
        }
    }
    return QR_OK;
}

static bool int_at(yyjson_val *o, const char *k, uint64_t *out)
{
    yyjson_val *v = at(o, k);
    if (!v || !yyjson_is_uint(v))
        return false;
    *out = yyjson_get_uint(v);
    return true;
}

static enum qr_err rules_contract(yyjson_val *c, const char *arch_class, struct qr_diag *d)
{
    const char *P = "model.architecture_contract";
    const char *ffn = str_at(c, "ffn");
    uint64_t ec = 0, eu = 0, es = 0, pt = 0, pa = 0, hc = 0, hkv = 0, bc = 0, ld = 0, cl = 0;
    bool has_ec = int_at(c, "expert_count", &ec);
    if (ffn && strcmp(ffn, "moe") != 0 &&
        (has_ec || at(c, "expert_used_count") || at(c, "expert_shared_count")))
        return qr_diag_set(d, QR_ERR_INVALID, "%s.expert_count: only allowed when ffn is moe", P);
    if (ffn && arch_class && (!strcmp(arch_class, "dense") || !strcmp(arch_class, "moe")) &&
        strcmp(ffn, "unknown") != 0 && strcmp(ffn, arch_class) != 0)
        return qr_diag_set(d, QR_ERR_INVALID,
                           "%s.ffn: '%s' contradicts model.architecture_class '%s'", P, ffn,
                           arch_class);
    if (int_at(c, "expert_used_count", &eu) && has_ec && eu > ec)
        return qr_diag_set(d, QR_ERR_INVALID, "%s.expert_used_count: above expert_count", P);
    if (int_at(c, "expert_shared_count", &es) && has_ec && es > ec)
        return qr_diag_set(d, QR_ERR_INVALID, "%s.expert_shared_count: above expert_count", P);
    yyjson_val *pr = at(c, "params");
    if (int_at(pr, "total", &pt) && int_at(pr, "active", &pa) && pa > pt)
        return qr_diag_set(d, QR_ERR_INVALID, "%s.params.active: above params.total", P);
    yyjson_val *att = at(c, "attention");
    if (int_at(att, "head_count", &hc) && int_at(att, "head_count_kv", &hkv) && hkv > hc)
        return qr_diag_set(d, QR_ERR_INVALID,
                           "%s.attention.head_count_kv: above attention.head_count", P);
    if (int_at(c, "block_count", &bc) && int_at(c, "leading_dense_block_count", &ld) && ld > bc)
        return qr_diag_set(d, QR_ERR_INVALID, "%s.leading_dense_block_count: above block_count", P);
    bool has_cl = int_at(c, "context_length", &cl);
    yyjson_val *ext = at(c, "extended_context");
    for (size_t i = 0; i < yyjson_arr_size(ext); i++) {
        yyjson_val *e = yyjson_arr_get(ext, i);
        uint64_t el = 0;
        int_at(e, "context_length", &el);
        if (has_cl && el <= cl)
            return qr_diag_set(d, QR_ERR_INVALID,
                               "%s.extended_context[%zu].context_length: not above "
                               "context_length",
                               P, i);
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(str_at(e, "name"), str_at(yyjson_arr_get(ext, j), "name")))
                return qr_diag_set(d, QR_ERR_INVALID,
                                   "%s.extended_context[%zu].name: duplicates "
                                   "extended_context[%zu]",
                                   P, i, j);
        }
    }
    yyjson_val *sp = at(c, "speculative");
    uint64_t np;
    if (sp && bool_at(sp, "mtp") && int_at(sp, "nextn_predict_layers", &np) && np == 0)
        return qr_diag_set(d, QR_ERR_INVALID,
                           "%s.speculative.mtp: true but nextn_predict_layers is 0", P);
    return QR_OK;
}

static enum qr_err rules_model(yyjson_val *m, struct qr_diag *d)
{
    yyjson_val *tv = at(m, "total_parameters_b"), *av = at(m, "active_parameters_b");
    if (tv && av && yyjson_get_num(tv) > 0 && yyjson_get_num(av) > yyjson_get_num(tv))
        return fail(d, "model.active_parameters_b", "above total_parameters_b");
    const char *cls = str_at(m, "architecture_class");
    yyjson_val *ex = at(m, "experts");
    if (ex) {
        if (!cls || strcmp(cls, "moe") != 0)
            return fail(d, "model.experts", "only allowed with architecture_class moe");
        uint64_t t = 0, a = 0, s = 0;
        int_at(ex, "total", &t);
        int_at(ex, "active", &a);
        if (a > t)
            return fail(d, "model.experts.active", "above experts.total");
        if (int_at(ex, "shared", &s) && s > t)
            return fail(d, "model.experts.shared", "above experts.total");
    }
    yyjson_val *cp = at(m, "context_policy");
    if (cp && bool_at(cp, "override_verified") && !bool_at(cp, "override_supported"))
        return fail(d, "model.context_policy.override_verified", "requires override_supported");
    yyjson_val *c = at(m, "architecture_contract");
    return c ? rules_contract(c, cls, d) : QR_OK;
}

static enum qr_err rules(yyjson_val *root, struct qr_diag *d)
{
    enum qr_err e;
    yyjson_val *st = at(root, "state");
    bool verified = !strcmp(str_at(st, "verification"), "verified");
    if ((e = rules_aliases(root, d)))
        return e;
    if (verified && !strcasecmp(str_at(at(root, "source"), "revision"), "unresolved"))
        return fail(d, "source.revision", "'unresolved' is not allowed when verified");
    if ((e = rules_artifacts(root, verified, d)) || (e = rules_model(at(root, "model"), d)))
        return e;
    yyjson_val *caps = at(root, "capabilities");
    static const char *const ANY[] = {"text",
                                      "vision",
                                      "audio",
                                      "embeddings",
                                      "reranking",
                                      "tools",
                                      "thinking",
                                      "reasoning_control",
                                      "structured_output"};
    bool any = false;
    for (size_t i = 0; i < QR_ARRAY_LEN(ANY); i++)
        any |= bool_at(caps, ANY[i]);
    if (!any)
        return fail(d, "capabilities", "no capability is true");
    if (bool_at(caps, "tool_streaming") && !bool_at(caps, "tools"))
        return fail(d, "capabilities.tool_streaming", "requires tools");
    yyjson_val *co = at(root, "compatibility");
    const char *maxv = str_at(co, "max_runtime_version");
    int c = 0;
    if (maxv && qr_manifest_semver_cmp(maxv, str_at(co, "min_runtime_version"), &c) == QR_OK &&
        c < 0)
        return fail(d, "compatibility.max_runtime_version", "below min_runtime_version");
    if (!strcmp(str_at(st, "verification"), "failed") && !strcmp(str_at(st, "lifecycle"), "active"))
        return fail(d, "state.lifecycle", "'active' is not allowed when verification failed");
    return QR_OK;
}

/* ---- parse ----------------------------------------------------------------------------------- */

static const char *const CAP_NAMES[QR_CAP_COUNT][2] = {
    {"audio", "audio"},
    {"embeddings", "embeddings"},
    {"reasoning-control", "reasoning_control"},
    {"reranking", "reranking"},
    {"structured-output", "structured_output"},
    {"text", "text"},
    {"thinking", "thinking"},
    {"tool-streaming", "tool_streaming"},
    {"tools", "tools"},
    {"vision", "vision"},
};

static int bit_index(unsigned bit)
{
    for (unsigned i = 0; i < QR_CAP_COUNT; i++) {
        if (bit == 1u << i)
            return (int) i;
    }
    return -1;
}

const char *qr_manifest_cap_name(unsigned bit)
{
    int i = bit_index(bit);
    return i < 0 ? NULL : CAP_NAMES[i][0];
}

const char *qr_manifest_cap_key(unsigned bit)
{
    int i = bit_index(bit);
    return i < 0 ? NULL : CAP_NAMES[i][1];
}

static void extract(struct qr_manifest *m, yyjson_val *root)
{
    m->id = str_at(root, "id");
    m->display_name = str_at(root, "display_name");
    m->backend = str_at(at(root, "backend"), "type");
    yyjson_val *model = at(root, "model");
    m->architecture = str_at(model, "architecture");
    m->architecture_class = str_at(model, "architecture_class");
    if (!m->architecture_class)
        m->architecture_class = "";
    yyjson_val *st = at(root, "state");
    m->install = str_at(st, "install");
    m->verification = str_at(st, "verification");
    m->lifecycle = str_at(st, "lifecycle");
    yyjson_val *al = at(root, "aliases");
    m->n_aliases = yyjson_arr_size(al);
    m->aliases = calloc(m->n_aliases + 1, sizeof(*m->aliases));
    for (size_t i = 0; i < m->n_aliases; i++)
        m->aliases[i] = yyjson_get_str(yyjson_arr_get(al, i));
    yyjson_val *arts = at(root, "artifacts");
    m->n_artifacts = yyjson_arr_size(arts);
    m->artifacts = calloc(m->n_artifacts + 1, sizeof(*m->artifacts));
    for (size_t i = 0; i < m->n_artifacts; i++) {
        yyjson_val *a = yyjson_arr_get(arts, i);
        struct qr_manifest_artifact *x = &m->artifacts[i];
        x->uri = str_at(a, "uri");
        x->sha256 = str_at(a, "sha256");
        x->backend = str_at(a, "backend");
        x->format = str_at(a, "format");
        x->role = str_at(a, "role");
        x->ollama_tag = str_at(at(a, "ollama"), "tag");
        x->ollama_digest = str_at(at(a, "ollama"), "digest");
    }
    yyjson_val *caps = at(root, "capabilities");
    for (unsigned i = 0; i < QR_CAP_COUNT; i++) {
        if (bool_at(caps, CAP_NAMES[i][1]))
            m->caps |= 1u << i;
    }
    if (!m->aliases || !m->artifacts)
        abort(); /* small internal allocation (STYLE.md) */
}

enum qr_err qr_manifest_parse(const char *json, size_t len, struct qr_diag *diag,
                              struct qr_manifest **out)
{
    *out = NULL;
    if (len > QR_MANIFEST_MAX_BYTES)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "manifest of %zu bytes is above the cap of %u",
                           len, QR_MANIFEST_MAX_BYTES);
    yyjson_read_err rerr;
    yyjson_doc *doc = yyjson_read_opts((char *) json, len, 0, NULL, &rerr);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_PARSE, "not JSON at byte %zu: %s", rerr.pos, rerr.msg);
    yyjson_val *root = yyjson_doc_get_root(doc);
    struct path p = {{0}, 0};
    struct qr_manifest_field rootf = {"", QR_MF_OBJ, true, 0, 0, 0, NULL, T_ROOT};
    enum qr_err e = walk(&rootf, root, &p, diag);
    if (!e)
        e = rules(root, diag);
    if (e) {
        yyjson_doc_free(doc);
        return e;
    }
    struct qr_manifest *m = calloc(1, sizeof(*m));
    if (!m)
        abort();
    m->doc = doc;
    extract(m, root);
    *out = m;
    return QR_OK;
}

void qr_manifest_free(struct qr_manifest *m)
{
    if (!m)
        return;
    yyjson_doc_free(m->doc);
    free(m->aliases);
    free(m->artifacts);
    free(m);
}

const void *qr_manifest_root(const struct qr_manifest *m)
{
    return yyjson_doc_get_root((yyjson_doc *) m->doc);
}
