/* Applying model policies to requests: exactly which knobs reach the engine, which are stripped
 * (with class and reason) and what the Runtime honours instead; the experimental gate; required
 * and known-good fills; the context rules; several policies at once; no policy at all. The
 * CoreUI request of the 0.3 line (num_ctx, num_predict, ...) is the regression case: 0.3
 * forwarded every knob although its own policy marked them blocked-unverified. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/apply.h"

static struct qr_policy_set *builtin(void)
{
    struct qr_diag d;
    struct qr_policy_set *s;
    assert_int_equal(qr_policy_set_load_builtin(&s, &d), QR_OK);
    return s;
}

static const struct qr_policy *gemma(struct qr_policy_set *s)
{
    const struct qr_policy *p = qr_policy_set_find(s, "gemma4-ollama-turin-minimal");
    assert_non_null(p);
    return p;
}

/* A request as the CoreUI client sends it through /api/chat. */
static struct qr_slice stop_list[1];
static struct qr_extra extras[2];

static void coreui_request(struct qr_request *r)
{
    memset(r, 0, sizeof(*r));
    r->sampling.temperature = (struct qr_opt_f64){true, 0.7};
    r->sampling.top_k = (struct qr_opt_i64){true, 40};
    r->sampling.min_p = (struct qr_opt_f64){true, 0.05};
    r->sampling.seed = (struct qr_opt_i64){true, 42};
    r->sampling.repeat_penalty = (struct qr_opt_f64){true, 1.1};
    r->max_tokens = (struct qr_opt_i64){true, 256};
    r->context_len = (struct qr_opt_i64){true, 8192};
    stop_list[0] = QR_SLICE_LIT("</end>");
    r->stop = stop_list;
    r->n_stop = 1;
    extras[0] = (struct qr_extra){QR_SLICE_LIT("num_thread"), QR_SLICE_LIT("8")};
    extras[1] = (struct qr_extra){QR_SLICE_LIT("num_batch"), QR_SLICE_LIT("512")};
    r->extra_options = extras;
    r->n_extra_options = 2;
}

/* The names with a given action, comma-joined in decision order. */
static const char *names(const struct qr_policy_effective *e, enum qr_knob_action a)
{
    static char buf[512];
    buf[0] = 0;
    for (size_t i = 0; i < e->n_decisions; i++) {
        if (e->decisions[i].action != a)
            continue;
        if (buf[0])
            strcat(buf, ",");
        strcat(buf, e->decisions[i].name);
    }
    return buf;
}

static void test_coreui_unverified_knobs_stripped(void **state)
{
    (void) state;
    struct qr_policy_set *s = builtin();
    const struct qr_policy *p = gemma(s);
    struct qr_request r;
    coreui_request(&r);
    static struct qr_policy_effective e;
    struct qr_diag d;
    assert_int_equal(qr_policy_apply(&r, &p, 1, false, &e, &d), QR_OK);
    /* exactly these reach the engine ... */
    assert_string_equal(names(&e, QR_KNOB_FORWARD), "temperature,top_k");
    assert_string_equal(names(&e, QR_KNOB_FILL), "");
    assert_string_equal(names(&e, QR_KNOB_OVERRIDE), "");
    /* ... and exactly these are kept off the fast path */
    assert_string_equal(names(&e, QR_KNOB_STRIP),
                        "min_p,repeat_penalty,seed,stop,num_predict,num_ctx,num_thread,num_batch");
    assert_true(e.sampling.temperature.set);
    assert_true(e.sampling.temperature.v == 0.7);
    assert_int_equal(e.sampling.top_k.v, 40);
    assert_false(e.sampling.min_p.set);
    assert_false(e.sampling.seed.set);
    assert_false(e.sampling.repeat_penalty.set);
    assert_false(e.sampling.top_p.set); /* known-good, but this policy does not fill */
    assert_false(e.max_tokens.set);
    assert_false(e.context_len.set);
    assert_false(e.forward_stop);
    assert_false(e.extra_forward[0]);
    assert_false(e.extra_forward[1]);
    /* what the Runtime honours itself */
    assert_true(e.runtime_max_tokens.set);
    assert_int_equal(e.runtime_max_tokens.v, 256);
    assert_true(e.admission_context.set);
    assert_int_equal(e.admission_context.v, 8192);
    assert_true(e.runtime_stop);
    const struct qr_knob_decision *k = qr_policy_effective_find(&e, "num_predict");
    assert_int_equal(k->cls, QR_PARAM_UNVERIFIED);
    assert_int_equal(k->honour, QR_HONOUR_COUNT_TOKENS);
    assert_string_equal(k->policy_id, "gemma4-ollama-turin-minimal");
    assert_non_null(strstr(k->reason, "counts completion tokens"));
    k = qr_policy_effective_find(&e, "max_tokens"); /* the alias finds the same decision */
    assert_string_equal(k->name, "num_predict");
    k = qr_policy_effective_find(&e, "num_ctx");
    assert_int_equal(k->honour, QR_HONOUR_ADMISSION_LIMIT);
    assert_non_null(strstr(k->reason, "admission limit"));
    k = qr_policy_effective_find(&e, "stop");
    assert_int_equal(k->honour, QR_HONOUR_STOP_SCAN);
    k = qr_policy_effective_find(&e, "seed");
    assert_int_equal(k->honour, QR_HONOUR_NONE);
    k = qr_policy_effective_find(&e, "min_p"); /* not named by the policy */
    assert_int_equal(k->cls, QR_PARAM_UNVERIFIED);
    assert_non_null(strstr(k->reason, "not named by the policy"));
    k = qr_policy_effective_find(&e, "num_batch");
    assert_int_equal(k->knob, -1);
    assert_null(qr_policy_effective_find(&e, "top_p"));
    assert_string_equal(e.renderer, "gemma4");
    assert_string_equal(e.parser, "gemma4");
    qr_policy_set_free(s);
}

static void test_experimental_gate_forwards_unverified(void **state)
{
    (void) state;
    struct qr_policy_set *s = builtin();
    const struct qr_policy *p = gemma(s);
    struct qr_request r;
    coreui_request(&r);
    static struct qr_policy_effective e;
    assert_int_equal(qr_policy_apply(&r, &p, 1, true, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_STRIP), "");
    assert_string_equal(names(&e, QR_KNOB_FORWARD),
                        "temperature,top_k,min_p,repeat_penalty,seed,"
                        "stop,num_predict,num_ctx,num_thread,num_batch");
    assert_true(qr_policy_effective_find(&e, "seed")->experimental);
    assert_false(qr_policy_effective_find(&e, "temperature")->experimental);
    assert_true(qr_policy_effective_find(&e, "num_ctx")->experimental);
    assert_int_equal(e.context_len.v, 8192);
    assert_int_equal(e.max_tokens.v, 256);
    assert_int_equal(e.sampling.seed.v, 42);
    assert_true(e.forward_stop);
    assert_false(e.runtime_stop);
    assert_false(e.runtime_max_tokens.set);
    assert_true(e.extra_forward[0] && e.extra_forward[1]);
    qr_policy_set_free(s);
}

static void test_no_policy_forwards_as_sent(void **state)
{
    (void) state;
    struct qr_request r;
    coreui_request(&r);
    static struct qr_policy_effective e;
    assert_int_equal(qr_policy_apply(&r, NULL, 0, false, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_STRIP), "");
    assert_int_equal(e.n_decisions, 10);
    assert_int_equal(qr_policy_effective_find(&e, "seed")->cls, QR_PARAM_NONE);
    assert_int_equal(e.context_len.v, 8192);
    assert_false(e.context_over_limit);
}

#define POLICY(id, extra, ctx, params)                                                             \
    "{\"schema_version\":\"quantum.runtime/model-policy/v1alpha1\",\"id\":\"" id "\","             \
    "\"model_family\":\"fam\",\"variants\":[\"*\"],\"backend_kind\":\"llama.cpp\","                \
    "\"hardware_class\":\"*\"," extra "\"context\":" ctx ",\"parameters\":[" params "],"           \
    "\"validation\":{\"observed_date\":\"2026-11-30\",\"sources\":[\"test\"]}}"

#define CTX_UNVERIFIED                                                                             \
    "{\"backend_managed\":true,\"override_supported\":true,\"override_verified\":false}"
#define CTX_VERIFIED                                                                               \
    "{\"backend_managed\":false,\"override_supported\":true,\"override_verified\":true,"           \
    "\"native_max\":32768,\"requested_limit\":16384}"
#define CTX_NONE                                                                                   \
    "{\"backend_managed\":true,\"override_supported\":false,\"override_verified\":false}"

static const struct qr_policy *load(struct qr_policy_set **s, const char *json)
{
    struct qr_diag d = {{0}};
    if (!*s)
        assert_int_equal(qr_policy_set_new(s), QR_OK);
    if (qr_policy_set_add(*s, "t.json", json, strlen(json), &d) != QR_OK)
        fail_msg("%s", d.msg);
    return qr_policy_set_at(*s, qr_policy_set_count(*s) - 1);
}

static void test_required_and_known_good_fill(void **state)
{
    (void) state;
    struct qr_policy_set *s = NULL;
    const struct qr_policy *p =
        load(&s, POLICY("fill", "\"fill_known_good\":true,", CTX_UNVERIFIED,
                        "{\"name\":\"temperature\",\"class\":\"required\",\"value\":1.0},"
                        "{\"name\":\"top_k\",\"class\":\"known-good\",\"value\":64},"
                        "{\"name\":\"num_batch\",\"class\":\"required\",\"value\":512},"
                        "{\"name\":\"mirostat\",\"class\":\"known-bad\"}"));
    struct qr_request r = {0};
    static struct qr_policy_effective e;
    /* nothing sent: required and known-good values are filled in */
    assert_int_equal(qr_policy_apply(&r, &p, 1, false, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_FILL), "temperature,top_k,num_batch");
    assert_true(e.sampling.temperature.set && e.sampling.temperature.v == 1.0);
    assert_true(e.sampling.top_k.set && e.sampling.top_k.v == 64);
    assert_int_equal(yyjson_get_sint(qr_policy_effective_find(&e, "num_batch")->policy_value), 512);
    /* a different required value is overridden; the same one is forwarded */
    r.sampling.temperature = (struct qr_opt_f64){true, 0.2};
    r.sampling.top_k = (struct qr_opt_i64){true, 10};
    struct qr_extra ex[] = {{QR_SLICE_LIT("mirostat"), QR_SLICE_LIT("2")}};
    r.extra_options = ex;
    r.n_extra_options = 1;
    assert_int_equal(qr_policy_apply(&r, &p, 1, true, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_OVERRIDE), "temperature");
    assert_string_equal(names(&e, QR_KNOB_FORWARD), "top_k");
    assert_string_equal(names(&e, QR_KNOB_STRIP), "mirostat"); /* known-bad beats the gate */
    assert_string_equal(names(&e, QR_KNOB_FILL), "num_batch");
    assert_true(e.sampling.temperature.v == 1.0);
    assert_int_equal(e.sampling.top_k.v, 10);
    assert_false(e.extra_forward[0]);
    assert_non_null(strstr(qr_policy_effective_find(&e, "mirostat")->reason, "known-bad"));
    r.sampling.temperature.v = 1.0;
    assert_int_equal(qr_policy_apply(&r, &p, 1, false, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_FORWARD), "temperature,top_k");
    qr_policy_set_free(s);
}

static void test_context_rules(void **state)
{
    (void) state;
    struct qr_policy_set *s = NULL;
    const struct qr_policy *verified =
        load(&s, POLICY("a-verified", "", CTX_VERIFIED,
                        "{\"name\":\"num_ctx\",\"class\":\"known-good\"}"));
    struct qr_request r = {0};
    r.context_len = (struct qr_opt_i64){true, 8192};
    static struct qr_policy_effective e;
    /* verified override: forwarded, within the limit */
    assert_int_equal(qr_policy_apply(&r, &verified, 1, false, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_FORWARD), "num_ctx");
    assert_int_equal(e.context_len.v, 8192);
    assert_int_equal(e.context_limit, 16384);
    assert_false(e.context_over_limit);
    r.context_len.v = 20000;
    assert_int_equal(qr_policy_apply(&r, &verified, 1, false, &e, NULL), QR_OK);
    assert_true(e.context_over_limit);
    /* known-good class but the override is not verified: admission limit, unless gated */
    const struct qr_policy *unverified =
        load(&s, POLICY("b-unverified", "", CTX_UNVERIFIED,
                        "{\"name\":\"num_ctx\",\"class\":\"known-good\"}"));
    assert_int_equal(qr_policy_apply(&r, &unverified, 1, false, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_STRIP), "num_ctx");
    assert_int_equal(e.admission_context.v, 20000);
    assert_non_null(strstr(qr_policy_effective_find(&e, "num_ctx")->reason, "not verified"));
    assert_int_equal(qr_policy_apply(&r, &unverified, 1, true, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_FORWARD), "num_ctx");
    assert_true(qr_policy_effective_find(&e, "num_ctx")->experimental);
    /* no override support: stripped even with the gate */
    const struct qr_policy *none =
        load(&s, POLICY("c-none", "", CTX_NONE, "{\"name\":\"num_ctx\",\"class\":\"unverified\"}"));
    assert_int_equal(qr_policy_apply(&r, &none, 1, true, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_STRIP), "num_ctx");
    assert_non_null(strstr(qr_policy_effective_find(&e, "num_ctx")->reason, "does not support"));
    assert_int_equal(qr_policy_effective_find(&e, "num_ctx")->honour, QR_HONOUR_ADMISSION_LIMIT);
    /* a required context that may not be forwarded is not filled in */
    const struct qr_policy *req =
        load(&s, POLICY("d-req", "", CTX_UNVERIFIED,
                        "{\"name\":\"num_ctx\",\"class\":\"required\",\"value\":4096}"));
    struct qr_request empty = {0};
    assert_int_equal(qr_policy_apply(&empty, &req, 1, false, &e, NULL), QR_OK);
    assert_int_equal(e.n_decisions, 0);
    assert_false(e.context_len.set);
    qr_policy_set_free(s);
}

static void test_most_restrictive_policy_wins(void **state)
{
    (void) state;
    struct qr_policy_set *s = NULL;
    load(&s, POLICY("a", "\"unlisted_parameters\":\"optional\",", CTX_VERIFIED,
                    "{\"name\":\"seed\",\"class\":\"optional\"},"
                    "{\"name\":\"top_p\",\"class\":\"known-good\"}"));
    load(&s, POLICY("b", "\"unlisted_parameters\":\"optional\",", CTX_UNVERIFIED,
                    "{\"name\":\"seed\",\"class\":\"known-bad\"}"));
    const struct qr_policy *both[2] = {qr_policy_set_at(s, 0), qr_policy_set_at(s, 1)};
    struct qr_request r = {0};
    r.sampling.seed = (struct qr_opt_i64){true, 7};
    r.sampling.top_p = (struct qr_opt_f64){true, 0.9};
    r.sampling.min_p = (struct qr_opt_f64){true, 0.1};
    r.context_len = (struct qr_opt_i64){true, 1024};
    static struct qr_policy_effective e;
    assert_int_equal(qr_policy_apply(&r, both, 2, true, &e, NULL), QR_OK);
    assert_string_equal(names(&e, QR_KNOB_STRIP), "seed");
    const struct qr_knob_decision *k = qr_policy_effective_find(&e, "seed");
    assert_int_equal(k->cls, QR_PARAM_KNOWN_BAD);
    assert_string_equal(k->policy_id, "b");
    assert_int_equal(qr_policy_effective_find(&e, "min_p")->cls, QR_PARAM_OPTIONAL);
    /* one policy's unverified context override makes the merged context unverified */
    assert_false(e.context.override_verified);
    assert_true(qr_policy_effective_find(&e, "num_ctx")->experimental);
    assert_int_equal(e.n_policies, 2);
    qr_policy_set_free(s);
}

static void test_caps_and_render(void **state)
{
    (void) state;
    struct qr_policy_set *s = builtin();
    const struct qr_policy *p = gemma(s);
    struct qr_request r;
    coreui_request(&r);
    static struct qr_policy_effective e;
    struct qr_diag d;
    struct qr_extra many[QR_POLICY_MAX_EXTRAS + 1];
    memset(many, 0, sizeof(many));
    r.extra_options = many;
    r.n_extra_options = QR_POLICY_MAX_EXTRAS + 1;
    assert_int_equal(qr_policy_apply(&r, &p, 1, false, &e, &d), QR_ERR_TOO_LARGE);
    coreui_request(&r);
    assert_int_equal(qr_policy_apply(&r, &p, 1, false, &e, &d), QR_OK);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_doc_set_root(doc, qr_policy_effective_render(doc, &e));
    char *json = yyjson_mut_write(doc, 0, NULL);
    assert_non_null(strstr(json, "\"name\":\"num_predict\",\"class\":\"unverified\","
                                 "\"action\":\"strip\""));
    assert_non_null(strstr(json, "\"honoured_by_runtime\":\"count_tokens\""));
    assert_non_null(strstr(json, "\"runtime\":{\"max_tokens\":256,\"admission_context\":8192,"
                                 "\"stop_scan\":true"));
    free(json);
    yyjson_mut_doc_free(doc);
    qr_policy_set_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coreui_unverified_knobs_stripped),
        cmocka_unit_test(test_experimental_gate_forwards_unverified),
        cmocka_unit_test(test_no_policy_forwards_as_sent),
        cmocka_unit_test(test_required_and_known_good_fill),
        cmocka_unit_test(test_context_rules),
        cmocka_unit_test(test_most_restrictive_policy_wins),
        cmocka_unit_test(test_caps_and_render),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
