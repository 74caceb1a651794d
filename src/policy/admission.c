/* Admission (admission.h): the eight checks of the 0.3 line, in its order and with its ids, but
 * with the arithmetic fixed - memory tolerance for MemTotal, physical cores compared with
 * physical cores, quota and host bounds on every claim - and with every missing fact reported as
 * unknown. The decision looks only at mandatory checks: any fail rejects, else any unknown needs
 * operator evidence, else the model is admitted. */
#include "policy/admission.h"

#include "policy/pjson.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const char *qr_check_state_str(enum qr_check_state s)
{
    static const char *const n[] = {"pass", "fail", "unknown", "preference_miss", "advisory"};
    return (unsigned) s < QR_ARRAY_LEN(n) ? n[s] : "?";
}

const char *qr_admission_decision_str(enum qr_admission_decision d)
{
    static const char *const n[] = {"admitted", "rejected", "needs_operator_evidence"};
    return (unsigned) d < QR_ARRAY_LEN(n) ? n[d] : "?";
}

static const struct qr_admission_value av_unknown = {.kind = QR_AV_STR, .s = "unknown"};

static struct qr_admission_value av_u64(uint64_t u)
{
    return (struct qr_admission_value){.kind = QR_AV_U64, .u = u};
}

static struct qr_admission_value av_str(const char *s)
{
    return (struct qr_admission_value){.kind = QR_AV_STR, .s = s};
}

static struct qr_admission_value av_pair(const char *k1, uint64_t v1, const char *k2, uint64_t v2)
{
    return (struct qr_admission_value){.kind = QR_AV_PAIR, .k1 = k1, .v1 = v1, .k2 = k2, .v2 = v2};
}

static struct qr_admission_check *add(struct qr_admission_result *r, const char *id, bool mandatory)
{
    struct qr_admission_check *c = &r->checks[r->n_checks++];
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->mandatory = mandatory;
    return c;
}

#define DETAIL(c, ...) snprintf((c)->detail, sizeof((c)->detail), __VA_ARGS__)

static bool arch_unknown(const char *a)
{
    return !a || !*a || strcasecmp(a, "unknown") == 0;
}

static void check_arch(struct qr_admission_result *r, const struct qr_profile *p,
                       const struct qr_admission_model *m)
{
    struct qr_admission_check *c = add(r, "model.architecture_class", true);
    c->source = "model_manifest";
    c->required = av_str(qr_arch_class_str(p->architecture_class));
    c->observed = arch_unknown(m->architecture_class) ? av_unknown : av_str(m->architecture_class);
    if (p->architecture_class == QR_ARCH_ANY) {
        c->state = QR_CHECK_PASS;
    } else if (arch_unknown(m->architecture_class)) {
        c->state = QR_CHECK_UNKNOWN;
        DETAIL(c, "the model's architecture class is unknown; the profile requires %s",
               qr_arch_class_str(p->architecture_class));
    } else {
        bool eq = strcasecmp(m->architecture_class, qr_arch_class_str(p->architecture_class)) == 0;
        c->state = eq ? QR_CHECK_PASS : QR_CHECK_FAIL;
    }
}

/* minimum - minimum * tolerance / 1000, without overflow */
static uint64_t accepted_from(uint64_t min)
{
    uint64_t t = QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE;
    return min - (min / 1000 * t + (min % 1000) * t / 1000);
}

static void check_memory(struct qr_admission_result *r, const struct qr_profile *p,
                         const struct qr_host_facts *h)
{
    struct qr_admission_check *c = add(r, "hardware.memory.minimum_bytes", true);
    uint64_t min = p->memory_minimum_bytes, from = accepted_from(min);
    c->source = "host_profile";
    c->required = av_pair("minimum_bytes", min, "accepted_from_bytes", from);
    if (!h->memory_known) {
        c->state = QR_CHECK_UNKNOWN;
        c->observed = av_unknown;
        DETAIL(c, "the host's memory total is unknown");
        return;
    }
    uint64_t total = h->memory_total_bytes;
    c->observed = av_u64(total);
    double pct = min ? 100.0 * (double) total / (double) min : 0;
    if (total >= min) {
        c->state = QR_CHECK_PASS;
    } else if (total >= from) {
        c->state = QR_CHECK_PASS;
        DETAIL(c,
               "MemTotal is %.1f%% of the minimum: accepted within the %u.%u%% tolerance for "
               "memory the firmware and kernel reserve",
               pct, QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE / 10,
               QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE % 10);
    } else {
        c->state = QR_CHECK_FAIL;
        DETAIL(c, "MemTotal is %.1f%% of the minimum; at least %u.%u%% is required", pct,
               (1000 - QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE) / 10,
               (1000 - QR_ADMISSION_MEMORY_TOLERANCE_PERMILLE) % 10);
    }
}

static void check_cores(struct qr_admission_result *r, const struct qr_profile *p,
                        const struct qr_host_facts *h, const struct qr_operator_evidence *e)
{
    struct qr_admission_check *c = add(r, "hardware.cpu.minimum_physical_cores", true);
    uint64_t min = p->minimum_physical_cores, seen;
    c->required = av_u64(min);
    if (e->dedicated_physical_cores > 0) {
        uint64_t claim = (uint64_t) e->dedicated_physical_cores;
        c->source = "operator_evidence";
        if (!h->physical_cores_known) {
            c->state = QR_CHECK_UNKNOWN;
            c->observed = av_unknown;
            DETAIL(c,
                   "the operator claims %llu dedicated physical cores, but the host reports no "
                   "physical core count to bound the claim",
                   (unsigned long long) claim);
            return;
        }
        seen = claim;
        if (claim > h->physical_cores) {
            seen = h->physical_cores;
            DETAIL(c,
                   "the operator claims %llu dedicated physical cores; the host has %u: bounded "
                   "to %u",
                   (unsigned long long) claim, h->physical_cores, h->physical_cores);
        }
    } else if (h->physical_cores_known) {
        c->source = "host_topology";
        seen = h->physical_cores;
    } else {
        c->source = "host_topology";
        c->state = QR_CHECK_UNKNOWN;
        c->observed = av_unknown;
        DETAIL(c, "the host's physical core count is unknown");
        return;
    }
    c->observed = av_u64(seen);
    c->state = seen >= min ? QR_CHECK_PASS : QR_CHECK_FAIL;
}

/* Physical cores this process may run on, as a range: exact when reported, else at least
 * ceil(allowed CPUs / threads per core) and at most min(allowed CPUs, host physical cores). */
static bool allowed_physical(const struct qr_host_facts *h, uint64_t *lo, uint64_t *hi)
{
    if (h->physical_allowed_known) {
        *lo = *hi = h->physical_cores_allowed;
        return true;
    }
    if (h->logical_allowed_known && h->threads_per_core_known && h->threads_per_core > 0) {
        uint64_t la = h->logical_cpus_allowed;
        *lo = (la + h->threads_per_core - 1) / h->threads_per_core;
        *hi = la;
        if (h->physical_cores_known && h->physical_cores < *hi)
            *hi = h->physical_cores;
        if (*hi < *lo)
            *hi = *lo;
        return true;
    }
    return false;
}

static void check_budget(struct qr_admission_result *r, const struct qr_profile *p,
                         const struct qr_host_facts *h, const struct qr_operator_evidence *e)
{
    struct qr_admission_check *c = add(r, "hardware.cpu.runtime_budget", true);
    uint64_t min = p->minimum_physical_cores, lo = 0, hi = 0;
    bool have = allowed_physical(h, &lo, &hi);
    c->source = e->core_budget > 0 ? "operator_core_budget" : "process_affinity/cgroup";
    c->required = have ? av_pair("minimum", min, "maximum_physical", hi) : av_u64(min);
    c->observed = av_unknown;
    c->state = QR_CHECK_UNKNOWN;
    if (!have) {
        DETAIL(c, "the physical cores this process may run on are unknown (need the allowed "
                  "physical cores, or allowed CPUs and threads per core)");
        return;
    }
    if (!h->cpu_quota_known) {
        DETAIL(c, "the cgroup CPU quota is unknown");
        return;
    }
    uint64_t qcap = h->cpu_quota_cores > 0 ? (uint64_t) h->cpu_quota_cores : UINT64_MAX;
    /* the operator's budget, else the physical cores certainly available (lo) */
    uint64_t want = e->core_budget > 0 ? (uint64_t) e->core_budget : lo;
    if (want > hi) {
        c->state = QR_CHECK_FAIL;
        c->observed = av_u64(want);
        DETAIL(c, "the core budget of %llu exceeds the %llu physical cores this process may run on",
               (unsigned long long) want, (unsigned long long) hi);
        return;
    }
    uint64_t eff = want < qcap ? want : qcap;
    uint64_t best = e->core_budget > 0 ? eff : (hi < qcap ? hi : qcap);
    c->observed = av_u64(eff);
    if (eff < want)
        DETAIL(c, "the cgroup quota of %.2f cores limits the budget of %llu physical cores to %llu",
               h->cpu_quota_cores, (unsigned long long) want, (unsigned long long) eff);
    if (eff >= min && want <= lo) {
        c->state = QR_CHECK_PASS;
    } else if (best >= min) {
        /* it may or may not fit: the allowed CPUs could be whole cores or lone SMT siblings */
        c->state = QR_CHECK_UNKNOWN;
        DETAIL(c,
               "this process may run on %llu to %llu physical cores (%u allowed CPUs, %u threads "
               "per core); the exact count is needed",
               (unsigned long long) lo, (unsigned long long) hi, h->logical_cpus_allowed,
               h->threads_per_core);
    } else {
        c->state = QR_CHECK_FAIL;
    }
}

static void check_ecc(struct qr_admission_result *r, const struct qr_host_facts *h,
                      const struct qr_operator_evidence *e)
{
    struct qr_admission_check *c = add(r, "hardware.memory.ecc", true);
    c->required = av_str("ecc");
    if (e->ecc_set && !e->ecc_verified) {
        c->state = QR_CHECK_FAIL;
        c->source = "operator_evidence";
        c->observed = av_str("absent");
    } else if (h->ecc == QR_ECC_ABSENT) {
        c->state = QR_CHECK_FAIL;
        c->source = "host_profile";
        c->observed = av_str("absent");
        if (e->ecc_set)
            DETAIL(c, "the operator states ECC, but the host reports memory without ECC");
    } else if (h->ecc == QR_ECC_PRESENT) {
        c->state = QR_CHECK_PASS;
        c->source = "host_profile";
        c->observed = av_str("ecc");
    } else if (e->ecc_set) {
        c->state = QR_CHECK_PASS;
        c->source = "operator_evidence";
        c->observed = av_str("ecc");
    } else {
        c->state = QR_CHECK_UNKNOWN;
        c->source = "operator_evidence";
        c->observed = av_unknown;
        DETAIL(c, "neither the host nor the operator says whether the memory has ECC");
    }
}

static void check_class(struct qr_admission_result *r, const struct qr_profile *p,
                        const struct qr_operator_evidence *e)
{
    struct qr_admission_check *c = add(r, "hardware.memory.preferred_class", false);
    c->source = "operator_evidence";
    c->required = av_str(p->preferred_memory_class);
    if (!e->memory_class) {
        c->state = QR_CHECK_UNKNOWN;
        c->observed = av_unknown;
    } else {
        c->observed = av_str(e->memory_class);
        c->state = strcasecmp(e->memory_class, p->preferred_memory_class) == 0
                       ? QR_CHECK_PASS
                       : QR_CHECK_PREFERENCE_MISS;
    }
}

static void check_accel(struct qr_admission_result *r, const struct qr_profile *p,
                        const struct qr_host_facts *h)
{
    struct qr_admission_check *c = add(r, "hardware.accelerator.required", p->accelerator_required);
    c->source = "host_profile";
    c->required = (struct qr_admission_value){.kind = QR_AV_U64, .u = p->accelerator_required};
    c->observed = h->accelerators_known ? av_u64(h->accelerators) : av_unknown;
    if (!p->accelerator_required)
        c->state = QR_CHECK_PASS;
    else if (!h->accelerators_known)
        c->state = QR_CHECK_UNKNOWN;
    else
        c->state = h->accelerators > 0 ? QR_CHECK_PASS : QR_CHECK_FAIL;
}

enum qr_err qr_admission_evaluate(const struct qr_profile *p, const struct qr_admission_model *m,
                                  const struct qr_host_facts *h,
                                  const struct qr_operator_evidence *e,
                                  struct qr_admission_result *out, struct qr_diag *diag)
{
    static const struct qr_operator_evidence none = {0};
    memset(out, 0, sizeof(*out));
    if (!p || !m || !h)
        return qr_diag_set(diag, QR_ERR_INVALID, "admission needs a profile, a model and a host");
    if (!e)
        e = &none;
    if (e->dedicated_physical_cores < 0 || e->core_budget < 0)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "operator evidence: dedicated_physical_cores and core_budget must not "
                           "be negative");
    out->profile_id = p->id;
    out->canonical_model_id = m->canonical_id;
    check_arch(out, p, m);
    check_memory(out, p, h);
    check_cores(out, p, h, e);
    check_budget(out, p, h, e);
    if (p->ecc_required)
        check_ecc(out, h, e);
    if (p->preferred_memory_class)
        check_class(out, p, e);
    check_accel(out, p, h);
    if (p->reference_min_clock_mhz > 0) {
        struct qr_admission_check *c = add(out, "hardware.cpu.reference_clock_mhz", false);
        c->state = QR_CHECK_ADVISORY;
        c->source = "profile_reference";
        c->required = av_u64(p->reference_min_clock_mhz);
        c->observed = av_str("not_used_for_admission");
    }
    bool fail = false, unknown = false;
    for (size_t i = 0; i < out->n_checks; i++) {
        if (!out->checks[i].mandatory)
            continue;
        fail |= out->checks[i].state == QR_CHECK_FAIL;
        unknown |= out->checks[i].state == QR_CHECK_UNKNOWN;
    }
    out->decision = fail ? QR_REJECTED : unknown ? QR_NEEDS_OPERATOR_EVIDENCE : QR_ADMITTED;
    return QR_OK;
}

enum qr_err qr_admission_request_parse(const char *json, size_t len,
                                       struct qr_admission_request *out, struct qr_diag *diag)
{
    static const char *const keys[] = {"profile", "model", "operator_evidence", NULL};
    static const char *const ev_keys[] = {"ecc_verified", "memory_class",
                                          "dedicated_physical_cores", "core_budget", NULL};
    struct qr_pj pj;
    uint64_t u = 0;
    bool set = false;
    enum qr_err err;
    memset(out, 0, sizeof(*out));
    qr_pj_init(&pj, "admission request", diag);
    pj.prefix = "invalid admission request";
    if (len > 64 * 1024) {
        qr_pj_fail(&pj, "body of %zu bytes exceeds 65536", len);
        return QR_ERR_TOO_LARGE;
    }
    if ((err = qr_pj_parse(&pj, json, len, &out->doc)) != QR_OK)
        return err;
    yyjson_val *root = yyjson_doc_get_root(out->doc);
    if ((err = qr_pj_object(&pj, root, keys)) != QR_OK ||
        (err = qr_pj_str(&pj, root, "profile", true, QR_PJ_MAX_ID, &out->profile)) != QR_OK ||
        (err = qr_pj_str(&pj, root, "model", true, QR_PJ_MAX_TEXT, &out->model)) != QR_OK)
        goto fail;
    yyjson_val *ev = yyjson_obj_get(root, "operator_evidence");
    if (!ev || yyjson_is_null(ev))
        return QR_OK;
    struct qr_operator_evidence *e = &out->evidence;
    qr_pj_push_key(&pj, "operator_evidence");
    if ((err = qr_pj_object(&pj, ev, ev_keys)) != QR_OK)
        goto fail;
    yyjson_val *ecc = yyjson_obj_get(ev, "ecc_verified");
    if (ecc && !yyjson_is_null(ecc) &&
        (err = qr_pj_bool(&pj, ev, "ecc_verified", false, &e->ecc_verified, &e->ecc_set)) != QR_OK)
        goto fail;
    if ((err = qr_pj_str(&pj, ev, "memory_class", false, QR_PJ_MAX_ID, &e->memory_class)) !=
            QR_OK ||
        (err = qr_pj_u64(&pj, ev, "dedicated_physical_cores", false, 0, 1u << 20, &u, &set)) !=
            QR_OK)
        goto fail;
    e->dedicated_physical_cores = set ? (int64_t) u : 0;
    if ((err = qr_pj_u64(&pj, ev, "core_budget", false, 0, 1u << 20, &u, &set)) != QR_OK)
        goto fail;
    e->core_budget = set ? (int64_t) u : 0;
    return QR_OK;
fail:
    qr_admission_request_cleanup(out);
    return err;
}

void qr_admission_request_cleanup(struct qr_admission_request *r)
{
    yyjson_doc_free(r->doc);
    memset(r, 0, sizeof(*r));
}

const struct qr_admission_check *qr_admission_find(const struct qr_admission_result *r,
                                                   const char *id)
{
    for (size_t i = 0; i < r->n_checks; i++)
        if (strcmp(r->checks[i].id, id) == 0)
            return &r->checks[i];
    return NULL;
}

static void add_value(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key,
                      const struct qr_admission_value *v)
{
    switch (v->kind) {
    case QR_AV_NONE:
        break;
    case QR_AV_U64:
        yyjson_mut_obj_add_uint(d, o, key, v->u);
        break;
    case QR_AV_STR:
        if (v->s)
            yyjson_mut_obj_add_strcpy(d, o, key, v->s);
        break;
    case QR_AV_PAIR: {
        yyjson_mut_val *p = yyjson_mut_obj_add_obj(d, o, key);
        yyjson_mut_obj_add_uint(d, p, v->k1, v->v1);
        yyjson_mut_obj_add_uint(d, p, v->k2, v->v2);
        break;
    }
    }
}

yyjson_mut_val *qr_admission_result_render(yyjson_mut_doc *d, const struct qr_admission_result *r)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, o, "schema_version", QR_ADMISSION_SCHEMA);
    yyjson_mut_obj_add_str(d, o, "decision", qr_admission_decision_str(r->decision));
    yyjson_mut_obj_add_strcpy(d, o, "profile_id", r->profile_id ? r->profile_id : "");
    yyjson_mut_obj_add_strcpy(d, o, "canonical_model_id",
                              r->canonical_model_id ? r->canonical_model_id : "");
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(d, o, "checks");
    for (size_t i = 0; i < r->n_checks; i++) {
        const struct qr_admission_check *c = &r->checks[i];
        yyjson_mut_val *e = yyjson_mut_arr_add_obj(d, arr);
        yyjson_mut_obj_add_str(d, e, "id", c->id);
        yyjson_mut_obj_add_bool(d, e, "mandatory", c->mandatory);
        yyjson_mut_obj_add_str(d, e, "state", qr_check_state_str(c->state));
        add_value(d, e, "required", &c->required);
        add_value(d, e, "observed", &c->observed);
        if (c->source)
            yyjson_mut_obj_add_str(d, e, "source", c->source);
        if (c->detail[0])
            yyjson_mut_obj_add_strcpy(d, e, "detail", c->detail);
    }
    return o;
}

static void add_fact(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, bool known, uint64_t v)
{
    if (known)
        yyjson_mut_obj_add_uint(d, o, key, v);
    else
        yyjson_mut_obj_add_str(d, o, key, "unknown");
}

yyjson_mut_doc *qr_admission_render(const struct qr_admission_result *r,
                                    const struct qr_host_facts *h)
{
    static const char *const ecc[] = {"unknown", "present", "absent"};
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    if (!d)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(d, root, "admission_schema", QR_ADMISSION_SCHEMA);
    yyjson_mut_val *host = yyjson_mut_obj_add_obj(d, root, "host");
    add_fact(d, host, "physical_cores", h->physical_cores_known, h->physical_cores);
    add_fact(d, host, "physical_cores_allowed", h->physical_allowed_known,
             h->physical_cores_allowed);
    add_fact(d, host, "logical_cpus_allowed", h->logical_allowed_known, h->logical_cpus_allowed);
    add_fact(d, host, "threads_per_core", h->threads_per_core_known, h->threads_per_core);
    if (h->cpu_quota_known)
        yyjson_mut_obj_add_real(d, host, "cpu_quota_cores", h->cpu_quota_cores);
    else
        yyjson_mut_obj_add_str(d, host, "cpu_quota_cores", "unknown");
    add_fact(d, host, "memory_total_bytes", h->memory_known, h->memory_total_bytes);
    yyjson_mut_obj_add_str(d, host, "ecc", (unsigned) h->ecc < 3 ? ecc[h->ecc] : "unknown");
    add_fact(d, host, "accelerators", h->accelerators_known, h->accelerators);
    yyjson_mut_obj_add_val(d, root, "result", qr_admission_result_render(d, r));
    return d;
}
