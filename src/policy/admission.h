/* Admission, schema quantum.runtime/admission-result/v1alpha1: may this model run under this
 * deployment profile on this host? Every check says pass / fail / unknown / preference_miss /
 * advisory with what was required, what was observed and where the observation came from;
 * missing evidence is `unknown` (decision needs_operator_evidence), never assumed.
 *
 * Compared with the 0.3 line: memory is accepted from 97% of the profile minimum (MemTotal never
 * shows all installed RAM, so a 64 GiB VM reads below 64 GiB), the CPU budget counts physical
 * cores against a physical-core minimum (SMT siblings are not cores; when only allowed CPUs and
 * threads per core are known, the physical count is a range and an answer that depends on where
 * in it the truth lies is unknown) and is bounded by the cgroup quota, and an operator's
 * dedicated-core claim is bounded by what the host reports.
 *
 * The host facts are an input (host discovery lands later): each fact carries a known flag. */
#ifndef QR_POLICY_ADMISSION_H
#define QR_POLICY_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"
#include "policy/profile.h"

#define QR_ADMISSION_SCHEMA "quantum.runtime/admission-result/v1alpha1"

/* Memory tolerance: MemTotal >= minimum - minimum * 30 / 1000 (97% of it) passes. */
#define QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE 30u

enum qr_ecc_fact { QR_ECC_UNKNOWN = 0, QR_ECC_PRESENT = 1, QR_ECC_ABSENT = 2 };

struct qr_host_facts {
    bool physical_cores_known;
    uint32_t physical_cores; /* physical cores of the whole host */
    bool physical_allowed_known;
    uint32_t
        physical_cores_allowed; /* distinct physical cores holding a CPU this process may use */
    bool logical_allowed_known;
    uint32_t logical_cpus_allowed; /* CPUs in affinity and cpuset */
    bool threads_per_core_known;
    uint32_t threads_per_core;
    bool cpu_quota_known;
    double cpu_quota_cores; /* cgroup cpu.max as cores; 0 = no quota */
    bool memory_known;
    uint64_t memory_total_bytes; /* MemTotal */
    enum qr_ecc_fact ecc;
    bool accelerators_known;
    uint32_t accelerators;
};

/* What an operator states (POST /v1/admission "operator_evidence"); unset fields are unknown. */
struct qr_operator_evidence {
    bool ecc_set;
    bool ecc_verified;
    const char *memory_class;         /* borrowed; NULL = unset */
    int64_t dedicated_physical_cores; /* 0 = unset; negative is an error */
    int64_t core_budget;              /* physical cores the Runtime may use; 0 = unset */
};

struct qr_admission_model {
    const char *canonical_id;       /* borrowed */
    const char *architecture_class; /* "dense", "moe"; NULL/"unknown" = unknown */
};

/* A POST /v1/admission body: {"profile","model","operator_evidence":{"ecc_verified",
 * "memory_class","dedicated_physical_cores","core_budget"}}, unknown fields rejected. */
struct qr_admission_request {
    yyjson_doc *doc;     /* owned: the strings below point into it */
    const char *profile; /* profile id */
    const char *model;   /* model id or alias, as the client named it */
    struct qr_operator_evidence evidence;
};

/* Decode a request body (at most 64 KiB). Errors (QR_ERR_INVALID, QR_ERR_TOO_LARGE) read
 * "invalid admission request: <path>: <text>". On success release with
 * qr_admission_request_cleanup. */
enum qr_err qr_admission_request_parse(const char *json, size_t len,
                                       struct qr_admission_request *out, struct qr_diag *diag);
void qr_admission_request_cleanup(struct qr_admission_request *r);

enum qr_check_state {
    QR_CHECK_PASS = 0,
    QR_CHECK_FAIL = 1,
    QR_CHECK_UNKNOWN = 2,
    QR_CHECK_PREFERENCE_MISS = 3,
    QR_CHECK_ADVISORY = 4,
};

enum qr_admission_decision {
    QR_ADMITTED = 0,
    QR_REJECTED = 1,
    QR_NEEDS_OPERATOR_EVIDENCE = 2,
};

const char *qr_check_state_str(enum qr_check_state s);               /* "pass", "fail", ... */
const char *qr_admission_decision_str(enum qr_admission_decision d); /* "admitted", ... */

/* A required/observed value: nothing, a number, a string, or a two-number object. */
struct qr_admission_value {
    enum { QR_AV_NONE = 0, QR_AV_U64, QR_AV_STR, QR_AV_PAIR } kind;
    uint64_t u;
    const char *s; /* static or borrowed */
    const char *k1, *k2;
    uint64_t v1, v2;
};

struct qr_admission_check {
    const char *id; /* static */
    bool mandatory;
    enum qr_check_state state;
    struct qr_admission_value required, observed;
    const char *source; /* static; NULL when none */
    char detail[256];
};

#define QR_ADMISSION_MAX_CHECKS 8u

struct qr_admission_result {
    enum qr_admission_decision decision;
    const char *profile_id;         /* borrowed */
    const char *canonical_model_id; /* borrowed */
    struct qr_admission_check checks[QR_ADMISSION_MAX_CHECKS];
    size_t n_checks;
};

/* Run the checks. Fails (QR_ERR_INVALID, diag) on a negative operator count or a missing
 * profile; out is caller storage and borrows from profile, model and evidence. */
enum qr_err qr_admission_evaluate(const struct qr_profile *profile,
                                  const struct qr_admission_model *model,
                                  const struct qr_host_facts *host,
                                  const struct qr_operator_evidence *evidence,
                                  struct qr_admission_result *out, struct qr_diag *diag);

const struct qr_admission_check *qr_admission_find(const struct qr_admission_result *r,
                                                   const char *id);

/* The result object ({"schema_version","decision","profile_id","canonical_model_id","checks"}). */
yyjson_mut_val *qr_admission_result_render(yyjson_mut_doc *doc,
                                           const struct qr_admission_result *r);

/* The POST /v1/admission body: {"api_version","admission_schema","host":{facts},"result"}.
 * Owned by the caller (yyjson_mut_doc_free); NULL when out of memory. */
yyjson_mut_doc *qr_admission_render(const struct qr_admission_result *r,
                                    const struct qr_host_facts *host);

#endif
