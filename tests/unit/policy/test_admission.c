/* Deployment profiles and admission: ember-production loads verbatim; the 0.3 line's admission
 * expectations still hold; and its arithmetic weak spots are fixed - a 64 GiB VM whose MemTotal
 * reads below 64 GiB is admitted within the stated tolerance, SMT siblings do not count as
 * physical cores, the cgroup quota bounds the budget, an operator's dedicated-core claim is
 * bounded by the host, and every missing fact is unknown, never assumed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/admission.h"

#define GIB (1024ull * 1024 * 1024)

static struct qr_profile_set *profiles(void)
{
    struct qr_diag d = {{0}};
    struct qr_profile_set *s;
    if (qr_profile_set_load_builtin(&s, &d) != QR_OK)
        fail_msg("%s", d.msg);
    return s;
}

static void test_ember_profile_loads(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    assert_int_equal(qr_profile_set_count(s), 2);
    const struct qr_profile *p = qr_profile_set_find(s, "  ember-production ");
    assert_non_null(p);
    assert_string_equal(p->display_name, "E.M.B.E.R. Production");
    assert_int_equal(p->tier, QR_TIER_PRODUCTION);
    assert_int_equal(p->memory_minimum_bytes, 64 * GIB);
    assert_true(p->ecc_required);
    assert_string_equal(p->preferred_memory_class, "ddr5");
    assert_int_equal(p->minimum_physical_cores, 8);
    assert_int_equal(p->reference_min_clock_mhz, 2600);
    assert_false(p->accelerator_required);
    assert_int_equal(p->architecture_class, QR_ARCH_MOE);
    assert_null(qr_profile_set_find(s, "ember"));
    yyjson_mut_doc *doc = qr_profile_set_render(s);
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "\"count\":2,\"profiles\":[{\"schema_version\":"
                                 "\"quantum.runtime/deployment-profile/v1alpha1\","
                                 "\"id\":\"ember-production\""));
    assert_non_null(strstr(json, "\"memory\":{\"minimum_bytes\":68719476736,\"ecc_required\":true,"
                                 "\"preferred_class\":\"ddr5\"}"));
    assert_non_null(strstr(json, "\"model\":{\"architecture_class\":\"moe\"}"));
    assert_null(p->target); /* verbatim 0.3 data: no target */
    free(json);
    yyjson_mut_doc_free(doc);
    qr_profile_set_free(s);
}

/* The Quantum CoreOS TCI profile: a profile like any other that targets Gemma 4 E4B. */
static void test_tci_profile_loads(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "quantum-coreos-tci");
    assert_non_null(p);
    assert_string_equal(p->target, "quantum-tci-gemma4-e4b");
    assert_int_equal(p->architecture_class, QR_ARCH_ANY);
    assert_int_equal(p->tier, QR_TIER_EXPERIMENTAL);
    assert_false(p->accelerator_required);
    assert_string_equal(qr_profile_set_at(s, 1)->id, "quantum-coreos-tci"); /* id order */
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_doc_set_root(doc, qr_profile_render(doc, p));
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "\"model\":{\"architecture_class\":\"any\","
                                 "\"target\":\"quantum-tci-gemma4-e4b\"}"));
    free(json);
    yyjson_mut_doc_free(doc);
    qr_profile_set_free(s);
}

#define PROFILE(hw, model)                                                                         \
    "{\"schema_version\":\"quantum.runtime/deployment-profile/v1alpha1\",\"id\":\"p\","            \
    "\"display_name\":\"P\",\"tier\":\"experimental\",\"hardware\":" hw ",\"model\":" model "}"
#define HW_OK                                                                                      \
    "{\"memory\":{\"minimum_bytes\":1,\"ecc_required\":false},\"cpu\":{"                           \
    "\"minimum_physical_cores\":1},\"accelerator\":{\"required\":true}}"

static void test_profile_validation(void **state)
{
    (void) state;
    static const struct {
        const char *json, *msg;
    } cases[] = {
        {PROFILE("{\"memory\":{\"minimum_bytes\":1,\"ecc_required\":false,\"speed\":1},\"cpu\":{"
                 "\"minimum_physical_cores\":1},\"accelerator\":{\"required\":true}}",
                 "{\"architecture_class\":\"moe\"}"),
         "hardware.memory: unknown field 'speed'"},
        {PROFILE("{\"memory\":{\"minimum_bytes\":0,\"ecc_required\":false},\"cpu\":{"
                 "\"minimum_physical_cores\":1},\"accelerator\":{\"required\":true}}",
                 "{\"architecture_class\":\"moe\"}"),
         "hardware.memory.minimum_bytes: 0 is outside"},
        {PROFILE("{\"memory\":{\"minimum_bytes\":1,\"ecc_required\":false},\"cpu\":{"
                 "\"minimum_physical_cores\":0},\"accelerator\":{\"required\":true}}",
                 "{\"architecture_class\":\"moe\"}"),
         "hardware.cpu.minimum_physical_cores: 0 is outside"},
        {PROFILE("{\"memory\":{\"minimum_bytes\":1,\"ecc_required\":false},\"cpu\":{"
                 "\"minimum_physical_cores\":1}}",
                 "{\"architecture_class\":\"moe\"}"),
         "hardware.accelerator: required"},
        {PROFILE(HW_OK, "{\"architecture_class\":\"hybrid\"}"),
         "model.architecture_class: 'hybrid' is not dense, moe or any"},
        {PROFILE(HW_OK, "{}"), "model.architecture_class: required"},
        {PROFILE(HW_OK, "{\"architecture_class\":\"any\",\"target\":7}"),
         "model.target: expected a string"},
        {PROFILE(HW_OK, "{\"architecture_class\":\"any\",\"target\":\"a b\"}"),
         "model.target: 'a b' is not a model name"},
        {PROFILE(HW_OK, "{\"architecture_class\":\"any\",\"target\":\"\"}"), "model.target"},
        {PROFILE(HW_OK, "{\"architecture_class\":\"any\",\"model\":\"x\"}"),
         "model: unknown field 'model'"},
        {"{\"schema_version\":\"quantum.runtime/deployment-profile/v1alpha1\",\"id\":\"p\","
         "\"display_name\":\"P\",\"tier\":\"gold\",\"hardware\":" HW_OK
         ",\"model\":{\"architecture_class\":\"any\"}}",
         "tier: 'gold' is not production"},
    };
    struct qr_profile_set *s;
    assert_int_equal(qr_profile_set_new(&s), QR_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct qr_diag d = {{0}};
        if (qr_profile_set_add(s, "p.json", cases[i].json, strlen(cases[i].json), &d) !=
                QR_ERR_INVALID ||
            !strstr(d.msg, cases[i].msg))
            fail_msg("case %zu: got '%s', want '%s'", i, d.msg, cases[i].msg);
    }
    struct qr_diag d;
    const char *ok = PROFILE(HW_OK, "{\"architecture_class\":\"MoE\"}");
    assert_int_equal(qr_profile_set_add(s, "p.json", ok, strlen(ok), &d), QR_OK);
    assert_int_equal(qr_profile_set_at(s, 0)->architecture_class, QR_ARCH_MOE);
    assert_null(qr_profile_set_at(s, 0)->target);
    assert_int_equal(qr_profile_set_add(s, "q.json", ok, strlen(ok), &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "duplicate profile id 'p'"));
    qr_profile_set_free(s);
}

/* The 0.3 line's test host: 20 physical = 20 logical cores, 96 GiB. */
static struct qr_host_facts host_20(void)
{
    return (struct qr_host_facts){.physical_cores_known = true,
                                  .physical_cores = 20,
                                  .physical_allowed_known = true,
                                  .physical_cores_allowed = 20,
                                  .logical_allowed_known = true,
                                  .logical_cpus_allowed = 20,
                                  .threads_per_core_known = true,
                                  .threads_per_core = 1,
                                  .cpu_quota_known = true,
                                  .cpu_quota_cores = 0,
                                  .memory_known = true,
                                  .memory_total_bytes = 96 * GIB,
                                  .accelerators_known = true};
}

static const struct qr_admission_model moe = {"ember-coreui", "moe"};

static enum qr_check_state state_of(const struct qr_admission_result *r, const char *id)
{
    const struct qr_admission_check *c = qr_admission_find(r, id);
    if (!c)
        fail_msg("no check '%s'", id);
    return c->state;
}

static void test_upstream_expectations(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "ember-production");
    struct qr_host_facts h = host_20();
    struct qr_admission_result r;
    struct qr_diag d;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, NULL, &r, &d), QR_OK);
    assert_int_equal(r.decision, QR_NEEDS_OPERATOR_EVIDENCE);
    assert_int_equal(r.n_checks, 8);
    assert_int_equal(state_of(&r, "hardware.memory.ecc"), QR_CHECK_UNKNOWN);
    assert_int_equal(state_of(&r, "hardware.memory.preferred_class"), QR_CHECK_UNKNOWN);
    assert_int_equal(state_of(&r, "hardware.cpu.reference_clock_mhz"), QR_CHECK_ADVISORY);
    struct qr_operator_evidence ev = {.ecc_set = true,
                                      .ecc_verified = true,
                                      .memory_class = "DDR5",
                                      .dedicated_physical_cores = 20,
                                      .core_budget = 16};
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, &d), QR_OK);
    assert_int_equal(r.decision, QR_ADMITTED);
    assert_int_equal(state_of(&r, "hardware.memory.preferred_class"), QR_CHECK_PASS);
    assert_int_equal(qr_admission_find(&r, "hardware.cpu.runtime_budget")->observed.u, 16);
    struct qr_admission_model dense = {"dense-model", "dense"};
    assert_int_equal(qr_admission_evaluate(p, &dense, &h, &ev, &r, &d), QR_OK);
    assert_int_equal(r.decision, QR_REJECTED);
    ev.core_budget = 4;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, &d), QR_OK);
    assert_int_equal(r.decision, QR_REJECTED);
    assert_int_equal(state_of(&r, "hardware.cpu.runtime_budget"), QR_CHECK_FAIL);
    /* a non-mandatory preference miss does not reject */
    ev.core_budget = 16;
    ev.memory_class = "ddr4";
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, &d), QR_OK);
    assert_int_equal(r.decision, QR_ADMITTED);
    assert_int_equal(state_of(&r, "hardware.memory.preferred_class"), QR_CHECK_PREFERENCE_MISS);
    /* negative evidence is an error, not a decision */
    ev.dedicated_physical_cores = -1;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, &d), QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "must not be negative"));
    qr_profile_set_free(s);
}

static struct qr_operator_evidence full_evidence(void)
{
    return (struct qr_operator_evidence){
        .ecc_set = true, .ecc_verified = true, .memory_class = "ddr5"};
}

static void test_memory_tolerance_for_64g_vm(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "ember-production");
    struct qr_host_facts h = host_20();
    struct qr_operator_evidence ev = full_evidence();
    struct qr_admission_result r;
    /* a 64 GiB VM: MemTotal 65,861,340 kB (98.1%) */
    h.memory_total_bytes = 65861340ull * 1024;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    const struct qr_admission_check *c = qr_admission_find(&r, "hardware.memory.minimum_bytes");
    assert_int_equal(c->state, QR_CHECK_PASS);
    assert_non_null(strstr(c->detail, "98.1% of the minimum: accepted within the 3.0% tolerance"));
    assert_int_equal(c->required.v1, 64 * GIB);
    assert_int_equal(c->required.v2,
                     64 * GIB - 64 * GIB / 1000 * 30 - (64 * GIB % 1000) * 30 / 1000);
    assert_int_equal(r.decision, QR_ADMITTED);
    /* exactly the accepted floor passes, one byte less fails */
    h.memory_total_bytes = c->required.v2;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.minimum_bytes"), QR_CHECK_PASS);
    h.memory_total_bytes--;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.minimum_bytes"), QR_CHECK_FAIL);
    assert_int_equal(r.decision, QR_REJECTED);
    /* a 60 GiB machine is not a 64 GiB machine */
    h.memory_total_bytes = 60 * GIB;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.minimum_bytes"), QR_CHECK_FAIL);
    /* unknown memory is unknown */
    h.memory_known = false;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.minimum_bytes"), QR_CHECK_UNKNOWN);
    assert_int_equal(r.decision, QR_NEEDS_OPERATOR_EVIDENCE);
    qr_profile_set_free(s);
}

static void test_smt_siblings_are_not_cores(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "ember-production");
    struct qr_operator_evidence ev = full_evidence();
    struct qr_admission_result r;
    /* 4 cores x 2 threads: 8 logical CPUs. 0.3 counted 8 "cores" and admitted. */
    struct qr_host_facts h = {.physical_cores_known = true,
                              .physical_cores = 4,
                              .logical_allowed_known = true,
                              .logical_cpus_allowed = 8,
                              .threads_per_core_known = true,
                              .threads_per_core = 2,
                              .cpu_quota_known = true,
                              .memory_known = true,
                              .memory_total_bytes = 96 * GIB,
                              .accelerators_known = true};
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.minimum_physical_cores"), QR_CHECK_FAIL);
    const struct qr_admission_check *c = qr_admission_find(&r, "hardware.cpu.runtime_budget");
    assert_int_equal(c->state, QR_CHECK_FAIL);
    assert_int_equal(c->observed.u, 4);
    assert_int_equal(c->required.v2, 4);
    /* affinity: 12 of 32 CPUs -> 6 (all siblings paired) to 12 physical cores: a budget of 8
     * may or may not fit, one of 13 cannot */
    h.physical_cores = 16;
    h.logical_cpus_allowed = 12;
    ev.core_budget = 8;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    c = qr_admission_find(&r, "hardware.cpu.runtime_budget");
    assert_int_equal(c->state, QR_CHECK_UNKNOWN);
    assert_non_null(strstr(c->detail, "6 to 12 physical cores"));
    assert_int_equal(r.decision, QR_NEEDS_OPERATOR_EVIDENCE);
    ev.core_budget = 13;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    c = qr_admission_find(&r, "hardware.cpu.runtime_budget");
    assert_int_equal(c->state, QR_CHECK_FAIL);
    assert_non_null(strstr(c->detail, "exceeds the 12 physical cores"));
    ev.core_budget = 6; /* certainly available, but below the minimum */
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.runtime_budget"), QR_CHECK_FAIL);
    ev.core_budget = 8;
    /* allowed physical reported directly */
    h.physical_allowed_known = true;
    h.physical_cores_allowed = 10;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.runtime_budget"), QR_CHECK_PASS);
    assert_int_equal(r.decision, QR_ADMITTED);
    /* the cgroup quota bounds the budget */
    h.cpu_quota_cores = 6.5;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    c = qr_admission_find(&r, "hardware.cpu.runtime_budget");
    assert_int_equal(c->state, QR_CHECK_FAIL);
    assert_int_equal(c->observed.u, 6);
    assert_non_null(strstr(c->detail, "cgroup quota of 6.50 cores"));
    /* an unknown quota is unknown, not "no quota" */
    h.cpu_quota_known = false;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.runtime_budget"), QR_CHECK_UNKNOWN);
    assert_int_equal(r.decision, QR_NEEDS_OPERATOR_EVIDENCE);
    qr_profile_set_free(s);
}

static void test_claims_bounded_and_unknowns(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "ember-production");
    struct qr_host_facts h = host_20();
    struct qr_operator_evidence ev = full_evidence();
    struct qr_admission_result r;
    ev.dedicated_physical_cores = 64;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    const struct qr_admission_check *c =
        qr_admission_find(&r, "hardware.cpu.minimum_physical_cores");
    assert_int_equal(c->observed.u, 20);
    assert_string_equal(c->source, "operator_evidence");
    assert_non_null(strstr(c->detail, "claims 64 dedicated physical cores; the host has 20"));
    /* a claim the host cannot bound is unknown */
    h.physical_cores_known = false;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.minimum_physical_cores"), QR_CHECK_UNKNOWN);
    ev.dedicated_physical_cores = 0;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.cpu.minimum_physical_cores"), QR_CHECK_UNKNOWN);
    /* ECC: the host's "absent" beats an operator's claim; the host's "present" needs no claim */
    h = host_20();
    h.ecc = QR_ECC_ABSENT;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.ecc"), QR_CHECK_FAIL);
    assert_int_equal(r.decision, QR_REJECTED);
    h.ecc = QR_ECC_PRESENT;
    struct qr_operator_evidence none = {.memory_class = "ddr5"};
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &none, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.ecc"), QR_CHECK_PASS);
    assert_int_equal(r.decision, QR_ADMITTED);
    none.ecc_set = true; /* operator says no ECC */
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, &none, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "hardware.memory.ecc"), QR_CHECK_FAIL);
    /* unknown model architecture is unknown */
    struct qr_admission_model unk = {"m", "unknown"};
    assert_int_equal(qr_admission_evaluate(p, &unk, &h, &ev, &r, NULL), QR_OK);
    assert_int_equal(state_of(&r, "model.architecture_class"), QR_CHECK_UNKNOWN);
    assert_int_equal(r.decision, QR_NEEDS_OPERATOR_EVIDENCE);
    qr_profile_set_free(s);
}

static void test_request_parse(void **state)
{
    (void) state;
    struct qr_admission_request q;
    struct qr_diag d = {{0}};
    const char *ok = "{\"profile\":\"ember-production\",\"model\":\"ember-coreui:latest\","
                     "\"operator_evidence\":{\"ecc_verified\":true,\"memory_class\":\"ddr5\","
                     "\"dedicated_physical_cores\":20,\"core_budget\":16}}";
    assert_int_equal(qr_admission_request_parse(ok, strlen(ok), &q, &d), QR_OK);
    assert_string_equal(q.profile, "ember-production");
    assert_string_equal(q.model, "ember-coreui:latest");
    assert_true(q.evidence.ecc_set && q.evidence.ecc_verified);
    assert_string_equal(q.evidence.memory_class, "ddr5");
    assert_int_equal(q.evidence.dedicated_physical_cores, 20);
    assert_int_equal(q.evidence.core_budget, 16);
    qr_admission_request_cleanup(&q);
    const char *null_ecc = "{\"profile\":\"p\",\"model\":\"m\",\"operator_evidence\":"
                           "{\"ecc_verified\":null}}";
    assert_int_equal(qr_admission_request_parse(null_ecc, strlen(null_ecc), &q, &d), QR_OK);
    assert_false(q.evidence.ecc_set);
    qr_admission_request_cleanup(&q);
    static const struct {
        const char *json, *msg;
    } bad[] = {
        {"{\"profile\":\"p\",\"model\":\"m\",\"operator_evidence\":{\"core_budget\":-2}}",
         "invalid admission request: operator_evidence.core_budget: must not be negative"},
        {"{\"profile\":\"p\",\"model\":\"m\",\"operator_evidence\":{\"ecc\":true}}",
         "invalid admission request: operator_evidence: unknown field 'ecc'"},
        {"{\"profile\":\"p\",\"model\":\"m\",\"extra\":1}",
         "invalid admission request: unknown field 'extra'"},
        {"{\"model\":\"m\"}", "invalid admission request: profile: required"},
        {"{\"profile\":\"p\",\"model\":\"m\",\"operator_evidence\":{\"ecc_verified\":1}}",
         "operator_evidence.ecc_verified: expected true or false"},
        {"{", "invalid admission request: invalid JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (qr_admission_request_parse(bad[i].json, strlen(bad[i].json), &q, &d) !=
                QR_ERR_INVALID ||
            !strstr(d.msg, bad[i].msg))
            fail_msg("case %zu: got '%s', want '%s'", i, d.msg, bad[i].msg);
        assert_null(q.doc);
    }
}

static void test_render(void **state)
{
    (void) state;
    struct qr_profile_set *s = profiles();
    const struct qr_profile *p = qr_profile_set_find(s, "ember-production");
    struct qr_host_facts h = host_20();
    h.memory_total_bytes = 65861340ull * 1024;
    h.cpu_quota_known = false;
    struct qr_admission_result r;
    assert_int_equal(qr_admission_evaluate(p, &moe, &h, NULL, &r, NULL), QR_OK);
    yyjson_mut_doc *doc = qr_admission_render(&r, &h);
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "\"admission_schema\":\"quantum.runtime/admission-result/"
                                 "v1alpha1\""));
    assert_non_null(strstr(json, "\"cpu_quota_cores\":\"unknown\""));
    assert_non_null(strstr(json, "\"decision\":\"needs_operator_evidence\",\"profile_id\":"
                                 "\"ember-production\",\"canonical_model_id\":\"ember-coreui\""));
    assert_non_null(strstr(json, "{\"id\":\"hardware.memory.minimum_bytes\",\"mandatory\":true,"
                                 "\"state\":\"pass\",\"required\":{\"minimum_bytes\":68719476736,"
                                 "\"accepted_from_bytes\":66657892434},\"observed\":67442012160,"
                                 "\"source\":\"host_profile\",\"detail\":"));
    assert_non_null(strstr(json, "{\"id\":\"hardware.memory.ecc\",\"mandatory\":true,\"state\":"
                                 "\"unknown\",\"required\":\"ecc\",\"observed\":\"unknown\""));
    assert_non_null(strstr(json, "\"observed\":\"not_used_for_admission\""));
    free(json);
    yyjson_mut_doc_free(doc);
    qr_profile_set_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ember_profile_loads),
        cmocka_unit_test(test_tci_profile_loads),
        cmocka_unit_test(test_profile_validation),
        cmocka_unit_test(test_upstream_expectations),
        cmocka_unit_test(test_memory_tolerance_for_64g_vm),
        cmocka_unit_test(test_smt_siblings_are_not_cores),
        cmocka_unit_test(test_claims_bounded_and_unknowns),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
