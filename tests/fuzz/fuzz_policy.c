/* libFuzzer target for the model-policy and deployment-profile loaders and the admission request
 * decoder. Any input must load or
 * fail with QR_ERR_INVALID / QR_ERR_TOO_LARGE and a "cannot load 'fuzz.json': " message, never
 * crash. A policy that loads must render to JSON that loads again as the same policy (same id,
 * classes and context), must match a target built from its own fields, and must apply to a
 * request carrying every knob without any knob both reaching the engine and being counted as
 * stripped. A profile that loads must render and be found by its id. An admission request that
 * decodes must evaluate against ember-production without error and render.
 *
 * Seeds in corpus/fuzz_policy: the builtin Gemma 4 policy, the 0.3 line's verbatim file,
 * ember-production, and one file per rejection class. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/admission.h"
#include "policy/apply.h"
#include "policy/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_err(enum qr_err err, const struct qr_diag *d)
{
    if ((err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) ||
        strncmp(d->msg, "cannot load 'fuzz.json': ", 25) != 0)
        abort();
}

static void apply_all_knobs(const struct qr_policy *p)
{
    static struct qr_slice stop[1] = {{"x", 1}};
    static struct qr_extra extras[2] = {{{"num_thread", 10}, {"4", 1}},
                                        {{"mirostat", 8}, {"1", 1}}};
    struct qr_request r;
    memset(&r, 0, sizeof(r));
    r.sampling.temperature = (struct qr_opt_f64){true, 0.5};
    r.sampling.top_p = (struct qr_opt_f64){true, 0.5};
    r.sampling.top_k = (struct qr_opt_i64){true, 5};
    r.sampling.seed = (struct qr_opt_i64){true, 1};
    r.max_tokens = (struct qr_opt_i64){true, 16};
    r.context_len = (struct qr_opt_i64){true, 1 << 20};
    r.stop = stop;
    r.n_stop = 1;
    r.extra_options = extras;
    r.n_extra_options = 2;
    static struct qr_policy_effective e;
    for (int gate = 0; gate < 2; gate++) {
        if (qr_policy_apply(&r, &p, 1, gate, &e, NULL) != QR_OK)
            abort();
        for (size_t i = 0; i < e.n_decisions; i++) {
            const struct qr_knob_decision *d = &e.decisions[i];
            if (!d->reason || (unsigned) d->action > QR_KNOB_STRIP)
                abort();
            if (d->cls == QR_PARAM_KNOWN_BAD && d->action != QR_KNOB_STRIP)
                abort();
            if (d->cls == QR_PARAM_UNVERIFIED && !gate && d->action != QR_KNOB_STRIP)
                abort();
        }
        if ((e.max_tokens.set && e.runtime_max_tokens.set) ||
            (e.context_len.set && e.admission_context.set) || (e.forward_stop && e.runtime_stop))
            abort();
    }
}

static void policy(const uint8_t *data, size_t size)
{
    struct qr_diag d = {{0}};
    struct qr_policy_set *s, *s2;
    if (qr_policy_set_new(&s) != QR_OK || qr_policy_set_new(&s2) != QR_OK)
        abort();
    enum qr_err err = qr_policy_set_add(s, "fuzz.json", (const char *) data, size, &d);
    if (err != QR_OK) {
        check_err(err, &d);
        if (qr_policy_set_count(s) != 0)
            abort();
        goto done;
    }
    const struct qr_policy *p = qr_policy_set_at(s, 0);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_doc_set_root(doc, qr_policy_render(doc, p));
    size_t len;
    char *json = yyjson_mut_write(doc, 0, &len);
    if (!json || qr_policy_set_add(s2, "again.json", json, len, &d) != QR_OK)
        abort();
    const struct qr_policy *q = qr_policy_set_at(s2, 0);
    if (strcmp(p->id, q->id) != 0 || p->n_params != q->n_params ||
        p->context.override_verified != q->context.override_verified || p->unlisted != q->unlisted)
        abort();
    for (size_t i = 0; i < p->n_params; i++)
        if (p->params[i].cls != q->params[i].cls || strcmp(p->params[i].name, q->params[i].name))
            abort();
    free(json);
    yyjson_mut_doc_free(doc);
    /* a target built from the policy's own fields matches it, unless its only variants are
     * unclassified too (impossible: validation keeps them disjoint) */
    struct qr_policy_target t = {p->model_family,  p->variants[0], p->backend_kind, NULL, 0,
                                 p->hardware_class};
    if (!p->n_engine_versions && !qr_policy_matches(p, &t))
        abort();
    apply_all_knobs(p);
    yyjson_mut_doc_free(qr_policy_set_render(s));
done:
    qr_policy_set_free(s2);
    qr_policy_set_free(s);
}

static void profile(const uint8_t *data, size_t size)
{
    struct qr_diag d = {{0}};
    struct qr_profile_set *s;
    if (qr_profile_set_new(&s) != QR_OK)
        abort();
    enum qr_err err = qr_profile_set_add(s, "fuzz.json", (const char *) data, size, &d);
    if (err != QR_OK) {
        check_err(err, &d);
    } else {
        const struct qr_profile *p = qr_profile_set_at(s, 0);
        if (qr_profile_set_find(s, p->id) != p)
            abort();
        yyjson_mut_doc_free(qr_profile_set_render(s));
    }
    qr_profile_set_free(s);
}

static void admission(const uint8_t *data, size_t size)
{
    static struct qr_profile_set *builtin;
    struct qr_diag d = {{0}};
    if (!builtin && qr_profile_set_load_builtin(&builtin, &d) != QR_OK)
        abort();
    struct qr_admission_request q;
    enum qr_err err = qr_admission_request_parse((const char *) data, size, &q, &d);
    if (err != QR_OK) {
        if ((err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) || q.doc ||
            strncmp(d.msg, "invalid admission request: ", 27) != 0)
            abort();
        return;
    }
    struct qr_host_facts h = {.physical_cores_known = true,
                              .physical_cores = 16,
                              .logical_allowed_known = true,
                              .logical_cpus_allowed = 24,
                              .threads_per_core_known = true,
                              .threads_per_core = 2,
                              .cpu_quota_known = true,
                              .cpu_quota_cores = 10.5,
                              .memory_known = true,
                              .memory_total_bytes = 66000000000ull};
    struct qr_admission_model m = {q.model, "moe"};
    struct qr_admission_result r;
    if (qr_admission_evaluate(qr_profile_set_at(builtin, 0), &m, &h, &q.evidence, &r, &d) !=
            QR_OK ||
        (unsigned) r.decision > QR_NEEDS_OPERATOR_EVIDENCE)
        abort();
    yyjson_mut_doc_free(qr_admission_render(&r, &h));
    qr_admission_request_cleanup(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    policy(data, size);
    profile(data, size);
    admission(data, size);
    return 0;
}
