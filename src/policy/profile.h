/* Deployment profiles, schema quantum.runtime/deployment-profile/v1alpha1: what an application
 * deployment (e.g. E.M.B.E.R. production) demands of its host and model - memory minimum and ECC,
 * physical cores, accelerator, model architecture class. Profiles are data
 * (data/deployment-profiles/, compiled in) and are never a Runtime default; policy/admission.h
 * checks a host against one. Rules: docs/POLICY.md "Deployment profiles and admission".
 *
 * Ownership: a qr_profile_set owns its profiles and the documents their strings point into;
 * pointers handed out are borrowed until qr_profile_set_free. */
#ifndef QR_POLICY_PROFILE_H
#define QR_POLICY_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"

#define QR_PROFILE_SCHEMA "quantum.runtime/deployment-profile/v1alpha1"
#define QR_PROFILE_MAX    64u

enum qr_profile_tier {
    QR_TIER_PRODUCTION = 0,
    QR_TIER_COMPATIBILITY = 1,
    QR_TIER_EXPERIMENTAL = 2,
};

enum qr_arch_class {
    QR_ARCH_ANY = 0,
    QR_ARCH_DENSE = 1,
    QR_ARCH_MOE = 2,
};

const char *qr_profile_tier_str(enum qr_profile_tier t); /* "production", ... */
const char *qr_arch_class_str(enum qr_arch_class c);     /* "any", "dense", "moe" */

struct qr_profile {
    const char *id;
    const char *display_name;
    enum qr_profile_tier tier;
    const char *description; /* NULL when absent */
    uint64_t memory_minimum_bytes;
    bool ecc_required;
    const char *preferred_memory_class; /* NULL when absent */
    uint64_t minimum_physical_cores;
    uint64_t reference_min_clock_mhz; /* 0 when absent */
    bool has_reference_clock;
    bool accelerator_required;
    enum qr_arch_class architecture_class;
    const char *target; /* model.target: canonical id or alias the profile deploys; NULL = none
                           (the request names the model). Resolved by the caller's registry */
    const char *file;
};

struct qr_profile_set;

enum qr_err qr_profile_set_new(struct qr_profile_set **out);
void qr_profile_set_free(struct qr_profile_set *s);

/* Parse, validate and add one profile file. name is borrowed and kept as `file` (it must outlive
 * the set); json is copied. Pointers from qr_profile_set_at/find stay valid until the next add.
 * Unknown fields, trailing JSON and duplicate ids are rejected with the JSON path in diag; on error
 * the set is unchanged. */
enum qr_err qr_profile_set_add(struct qr_profile_set *s, const char *name, const char *json,
                               size_t len, struct qr_diag *diag);

/* A set with every builtin profile (data/deployment-profiles/). */
enum qr_err qr_profile_set_load_builtin(struct qr_profile_set **out, struct qr_diag *diag);

/* Profiles in id order. */
size_t qr_profile_set_count(const struct qr_profile_set *s);
const struct qr_profile *qr_profile_set_at(const struct qr_profile_set *s, size_t i);

/* The profile with this id (surrounding spaces ignored), or NULL. */
const struct qr_profile *qr_profile_set_find(const struct qr_profile_set *s, const char *id);

yyjson_mut_val *qr_profile_render(yyjson_mut_doc *doc, const struct qr_profile *p);

/* The /v1/deployment-profiles body: {"api_version","schema_version","count","profiles"}.
 * Owned by the caller (yyjson_mut_doc_free); NULL when out of memory. */
yyjson_mut_doc *qr_profile_set_render(const struct qr_profile_set *s);

#endif
