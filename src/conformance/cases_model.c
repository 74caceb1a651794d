/* The model metadata cases (cases_model.h): canonical metadata in the daemon's two views, dense vs
 * MoE metadata against the file the placement plan sizes, expert routing requirements negotiated
 * by the model's own class, quantization format negotiation, and speculative decoding set up or
 * refused. Nothing here knows a model family: every fact comes from the daemon's answers (the
 * manifest it serves, its Ollama view, its router's plans, its placement plans, its processes),
 * and each check compares two of them. */
#include "conformance/cases_model.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <yyjson.h>

#define FAIL(...) (snprintf(reason, cap, __VA_ARGS__), QR_CONF_FAIL)
#define SKIP(...) (snprintf(reason, cap, __VA_ARGS__), QR_CONF_SKIP)

/* The context a placement plan is asked for: small, so no model's KV cache makes it refuse. */
#define PLAN_CONTEXT 512

/* ---- requests ---- */

/* A JSON document's text from a one-level object builder; aborts on OOM (CLI code). */
static char *write_doc(yyjson_mut_doc *d)
{
    char *s = d ? yyjson_mut_write(d, 0, NULL) : NULL;
    yyjson_mut_doc_free(d);
    if (!s)
        abort();
    return s;
}

/* {"model": M} plus, when key is not NULL, "capabilities": [key]. */
static char *route_body(const struct qr_conf_ctx *c, const char *key)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (!o)
        abort();
    yyjson_mut_doc_set_root(d, o);
    yyjson_mut_obj_add_str(d, o, "model", c->model);
    if (key) {
        yyjson_mut_val *a = yyjson_mut_obj_add_arr(d, o, "capabilities");
        yyjson_mut_arr_add_str(d, a, key);
    }
    return write_doc(d);
}

/* The answer parsed whatever its status (error bodies are read too); NULL when not JSON. */
static yyjson_doc *call(const struct qr_conf_ctx *c, const char *method, const char *path,
                        const char *body, long *status)
{
    struct qr_conf_resp r;
    qr_conf_http(c, method, path, body, &r);
    *status = r.status;
    yyjson_doc *d = yyjson_read(r.body, r.len, 0);
    qr_conf_resp_cleanup(&r);
    return d;
}

static const char *sget(yyjson_val *v, const char *ptr)
{
    return yyjson_get_str(yyjson_ptr_get(v, ptr));
}

/* A non-negative integer at ptr; false when absent or not one. */
static bool uget(yyjson_val *v, const char *ptr, uint64_t *out)
{
    yyjson_val *x = yyjson_ptr_get(v, ptr);
    if (yyjson_is_uint(x)) {
        *out = yyjson_get_uint(x);
        return true;
    }
    if (yyjson_is_sint(x) && yyjson_get_sint(x) >= 0) {
        *out = (uint64_t) yyjson_get_sint(x);
        return true;
    }
    return false;
}

/* ---- what the daemon says about the model ---- */

struct view {
    yyjson_doc *model; /* GET /v1/models/{M} when 200 */
    yyjson_doc *show;  /* POST /api/show {"model": M} when 200 */
    long model_status, show_status;
    yyjson_val *manifest; /* the manifest's "model" object (architecture, experts, ...) */
    yyjson_val *contract; /* its architecture_contract, or NULL */
    yyjson_val *info;     /* /api/show model_info, or NULL */
};

static void view_load(const struct qr_conf_ctx *c, struct view *v)
{
    memset(v, 0, sizeof *v);
    char path[600], *esc = curl_easy_escape(NULL, c->model, 0);
    if (!esc)
        abort();
    snprintf(path, sizeof path, "/v1/models/%s", esc);
    curl_free(esc);
    v->model = call(c, "GET", path, NULL, &v->model_status);
    if (v->model_status != 200) {
        yyjson_doc_free(v->model);
        v->model = NULL;
    }
    char *body = route_body(c, NULL);
    v->show = call(c, "POST", "/api/show", body, &v->show_status);
    free(body);
    if (v->show_status != 200) {
        yyjson_doc_free(v->show);
        v->show = NULL;
    }
    v->manifest = yyjson_ptr_get(yyjson_doc_get_root(v->model), "/model/model");
    v->contract = yyjson_obj_get(v->manifest, "architecture_contract");
    v->info = yyjson_obj_get(yyjson_doc_get_root(v->show), "model_info");
}

static void view_free(struct view *v)
{
    yyjson_doc_free(v->model);
    yyjson_doc_free(v->show);
}

/* model_info["<arch>.<suffix>"] as an integer. */
static bool info_u64(const struct view *v, const char *arch, const char *suffix, uint64_t *out)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    yyjson_val *x = yyjson_obj_get(v->info, key);
    if (!yyjson_is_uint(x))
        return false;
    *out = yyjson_get_uint(x);
    return true;
}

/* A label the daemon reports, "" for absent and for the registry's "unknown". */
static const char *known(const char *s)
{
    return s && strcmp(s, "unknown") ? s : "";
}

/* ---- metadata ---- */

/* Two reports of one number: equal when both are there. n counts the comparisons made. */
static bool agree_u64(bool have_a, uint64_t a, bool have_b, uint64_t b, unsigned *n)
{
    if (!have_a || !have_b)
        return true;
    (*n)++;
    return a == b;
}

static enum qr_conf_status meta_model_view(const struct view *v, const char *model, int64_t *ctx,
                                           unsigned *n, char *reason, size_t cap)
{
    yyjson_val *root = yyjson_doc_get_root(v->model);
    const char *arch = sget(v->manifest, "/architecture");
    if (!arch || !arch[0])
        return FAIL("GET /v1/models/%.60s names no model.architecture", model);
    const char *ac_arch = known(sget(v->contract, "/architecture"));
    if (ac_arch[0] && known(arch)[0] && strcmp(arch, ac_arch))
        return FAIL("model.architecture '%.40s' but architecture_contract.architecture '%.40s'",
                    arch, ac_arch);
    (*n)++;
    yyjson_val *cl = yyjson_obj_get(root, "context_length");
    if (cl && !(yyjson_is_int(cl) && yyjson_get_sint(cl) > 0))
        return FAIL("GET /v1/models/%.60s: context_length is not a positive integer", model);
    *ctx = cl ? yyjson_get_sint(cl) : -1;
    uint64_t a, b;
    bool ha = uget(v->contract, "/context_length", &a);
    if (ha && *ctx > 0 && a != (uint64_t) *ctx)
        return FAIL("context_length %lld but architecture_contract.context_length %llu",
                    (long long) *ctx, (unsigned long long) a);
    *n += ha && *ctx > 0;
    static const char *const EXP[][2] = {
        {"/experts/total", "/expert_count"},
        {"/experts/active", "/expert_used_count"},
        {"/experts/shared", "/expert_shared_count"},
    };
    for (size_t i = 0; i < sizeof EXP / sizeof EXP[0]; i++) {
        ha = uget(v->manifest, EXP[i][0], &a);
        bool hb = uget(v->contract, EXP[i][1], &b);
        if (!agree_u64(ha, a, hb, b, n))
            return FAIL("model%s %llu but architecture_contract%s %llu", EXP[i][0],
                        (unsigned long long) a, EXP[i][1], (unsigned long long) b);
    }
    if (uget(v->contract, "/params/total", &a) && uget(v->contract, "/params/active", &b) && b > a)
        return FAIL("architecture_contract.params: active %llu above total %llu",
                    (unsigned long long) b, (unsigned long long) a);
    return QR_CONF_PASS;
}

/* /api/show against /v1/models/{M} (arch and ctx from there; "" / -1 when that view is absent). */
static enum qr_conf_status meta_show_view(const struct view *v, const char *arch, int64_t ctx,
                                          unsigned *n, char *reason, size_t cap)
{
    yyjson_val *root = yyjson_doc_get_root(v->show);
    const char *raw = yyjson_get_str(yyjson_obj_get(v->info, "general.architecture"));
    if (!raw || !raw[0])
        return FAIL("POST /api/show names no model_info general.architecture");
    const char *ga = known(raw), *family = known(sget(root, "/details/family"));
    if (arch[0] && ga[0] && strcmp(arch, ga))
        return FAIL("GET /v1/models says architecture '%.40s', /api/show model_info '%.40s'", arch,
                    ga);
    if (!arch[0])
        arch = ga;
    if (family[0] && arch[0] && strcmp(family, arch))
        return FAIL("/api/show details.family '%.40s' but architecture '%.40s'", family, arch);
    *n += (ga[0] != 0) + (family[0] != 0);
    uint64_t a, b;
    bool ha = info_u64(v, arch, "context_length", &a);
    if (ha && a == 0)
        return FAIL("/api/show model_info %s.context_length is 0", arch);
    if (!agree_u64(ha, a, ctx > 0, (uint64_t) ctx, n))
        return FAIL("GET /v1/models says context_length %lld, /api/show %s.context_length %llu",
                    (long long) ctx, arch, (unsigned long long) a);
    static const char *const EXP[][2] = {
        {"expert_count", "/experts/total"},
        {"expert_used_count", "/experts/active"},
        {"expert_shared_count", "/experts/shared"},
    };
    for (size_t i = 0; i < sizeof EXP / sizeof EXP[0]; i++) {
        ha = info_u64(v, arch, EXP[i][0], &a);
        bool hb = uget(v->manifest, EXP[i][1], &b);
        if (!agree_u64(ha, a, hb, b, n))
            return FAIL("/api/show %s.%s %llu but the manifest's model%s %llu", arch, EXP[i][0],
                        (unsigned long long) a, EXP[i][1], (unsigned long long) b);
    }
    static const char *const LABELS[][2] = {
        {"/details/quantization_level", "/quantization"},
        {"/details/parameter_size", "/parameter_class"},
    };
    for (size_t i = 0; i < sizeof LABELS / sizeof LABELS[0]; i++) {
        const char *sa = known(sget(root, LABELS[i][0])),
                   *sb = known(sget(v->manifest, LABELS[i][1]));
        if (!sa[0] || !sb[0])
            continue;
        /* parameter_size is the rounded total_parameters_b where the manifest states one */
        if (i == 1 && yyjson_get_num(yyjson_ptr_get(v->manifest, "/total_parameters_b")) > 0)
            continue;
        if (strcmp(sa, sb))
            return FAIL("/api/show %s '%.40s' but the manifest's model%s '%.40s'", LABELS[i][0] + 1,
                        sa, LABELS[i][1], sb);
        (*n)++;
    }
    return QR_CONF_PASS;
}

enum qr_conf_status qr_conf_case_metadata(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct view v;
    view_load(c, &v);
    enum qr_conf_status st = QR_CONF_PASS;
    unsigned n = 0;
    int64_t ctx = -1;
    if (!v.model && !v.show)
        st = SKIP("the daemon describes '%.60s' in neither GET /v1/models/{id} (%ld) nor POST "
                  "/api/show (%ld)",
                  c->model, v.model_status, v.show_status);
    if (st == QR_CONF_PASS && v.model)
        st = meta_model_view(&v, c->model, &ctx, &n, reason, cap);
    const char *arch = v.model ? known(sget(v.manifest, "/architecture")) : "";
    if (st == QR_CONF_PASS && v.show)
        st = meta_show_view(&v, arch, ctx, &n, reason, cap);
    if (st == QR_CONF_PASS) {
        if (!arch[0])
            arch = known(yyjson_get_str(yyjson_obj_get(v.info, "general.architecture")));
        char cbuf[32] = "unknown";
        if (ctx > 0)
            snprintf(cbuf, sizeof cbuf, "%lld", (long long) ctx);
        snprintf(reason, cap, "architecture '%.40s', context %s; %u facts agree across %s",
                 arch[0] ? arch : "unknown", cbuf, n,
                 v.model && v.show ? "GET /v1/models/{id} and POST /api/show"
                 : v.model         ? "GET /v1/models/{id} (/api/show not available)"
                                   : "POST /api/show (GET /v1/models/{id} not available)");
    }
    view_free(&v);
    return st;
}

/* ---- dense vs MoE ---- */

enum klass { K_UNKNOWN, K_DENSE, K_MOE };

/* The model's class by the manifest's architecture_class and its contract's ffn. */
static enum klass class_of(const struct view *v, char *reason, size_t cap, bool *conflict)
{
    const char *cls = known(sget(v->manifest, "/architecture_class"));
    const char *ffn = known(sget(v->contract, "/ffn"));
    enum klass a = !strcmp(cls, "moe") ? K_MOE : !strcmp(cls, "dense") ? K_DENSE : K_UNKNOWN;
    enum klass b = !strcmp(ffn, "moe") ? K_MOE : !strcmp(ffn, "dense") ? K_DENSE : K_UNKNOWN;
    *conflict = a && b && a != b;
    if (*conflict)
        snprintf(reason, cap, "architecture_class '%s' but architecture_contract.ffn '%s'", cls,
                 ffn);
    return a ? a : b;
}

/* Expert counts: the manifest's, else its contract's, else /api/show's. */
struct experts {
    bool have_total, have_used, have_shared;
    uint64_t total, used, shared;
};

static void experts_of(const struct view *v, struct experts *e)
{
    const char *arch = known(sget(v->manifest, "/architecture"));
    if (!arch[0])
        arch = known(yyjson_get_str(yyjson_obj_get(v->info, "general.architecture")));
    e->have_total = uget(v->manifest, "/experts/total", &e->total) ||
                    uget(v->contract, "/expert_count", &e->total) ||
                    info_u64(v, arch, "expert_count", &e->total);
    e->have_used = uget(v->manifest, "/experts/active", &e->used) ||
                   uget(v->contract, "/expert_used_count", &e->used) ||
                   info_u64(v, arch, "expert_used_count", &e->used);
    e->have_shared = uget(v->manifest, "/experts/shared", &e->shared) ||
                     uget(v->contract, "/expert_shared_count", &e->shared) ||
                     info_u64(v, arch, "expert_shared_count", &e->shared);
}

/* Weight bytes of one class in a placement plan; 0 when absent. */
static uint64_t plan_class_bytes(yyjson_val *plan, const char *name)
{
    size_t i, max;
    yyjson_val *k;
    yyjson_arr_foreach(yyjson_obj_get(plan, "classes"), i, max, k)
    {
        uint64_t b;
        if (yyjson_equals_str(yyjson_obj_get(k, "class"), name) && uget(k, "/bytes", &b))
            return b;
    }
    return 0;
}

/* The placement plan's sizing (read from the model's file) against the declared experts. *note
 * says what was compared, or why nothing was. */
static enum qr_conf_status moe_plan(const struct qr_conf_ctx *c, enum klass k,
                                    const struct experts *e, char *note, size_t note_cap,
                                    char *reason, size_t cap)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (!o)
        abort();
    yyjson_mut_doc_set_root(d, o);
    yyjson_mut_obj_add_str(d, o, "model", c->model);
    yyjson_mut_obj_add_uint(d, o, "context", PLAN_CONTEXT);
    char *body = write_doc(d);
    long st = 0;
    yyjson_doc *doc = call(c, "POST", "/v1/placement", body, &st);
    free(body);
    yyjson_val *plan = yyjson_obj_get(yyjson_doc_get_root(doc), "plan");
    uint64_t n_exp = 0, n_used = 0;
    enum qr_conf_status r = QR_CONF_PASS;
    if ((st != 200 && st != 422) || !uget(plan, "/sizing/experts", &n_exp)) {
        snprintf(note, note_cap, "; no placement plan to compare (POST /v1/placement: %ld)", st);
        goto done;
    }
    uget(plan, "/sizing/experts_used", &n_used);
    uint64_t exp_bytes = plan_class_bytes(plan, "experts");
    uint64_t shared_bytes =
        plan_class_bytes(plan, "shared_experts") + plan_class_bytes(plan, "ffn");
    if (k == K_DENSE && (n_exp || exp_bytes)) {
        r = FAIL("dense by its metadata, but the placement plan sizes %llu experts (%llu bytes) "
                 "from its file",
                 (unsigned long long) n_exp, (unsigned long long) exp_bytes);
    } else if (k == K_MOE && (n_exp != e->total || n_used != e->used)) {
        r = FAIL("the metadata says %llu experts (%llu used), the placement plan sizes %llu "
                 "(%llu used) from the file",
                 (unsigned long long) e->total, (unsigned long long) e->used,
                 (unsigned long long) n_exp, (unsigned long long) n_used);
    } else if (k == K_MOE && !exp_bytes) {
        r = FAIL("MoE by its metadata, but the placement plan has no expert weights");
    } else if (k == K_MOE && e->have_shared && e->shared && !shared_bytes) {
        r = FAIL("%llu shared experts declared, but the placement plan has no always-on FFN "
                 "weights (classes shared_experts, ffn)",
                 (unsigned long long) e->shared);
    } else if (k == K_MOE) {
        snprintf(note, note_cap,
                 "; the placement plan sizes %llu experts (%llu used), %llu bytes routed, %llu "
                 "bytes always on",
                 (unsigned long long) n_exp, (unsigned long long) n_used,
                 (unsigned long long) exp_bytes, (unsigned long long) shared_bytes);
    } else {
        snprintf(note, note_cap, "; the placement plan sizes no experts from the file");
    }
done:
    yyjson_doc_free(doc);
    return r;
}

enum qr_conf_status qr_conf_case_moe_metadata(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct view v;
    view_load(c, &v);
    bool conflict = false;
    enum klass k = v.model ? class_of(&v, reason, cap, &conflict) : K_UNKNOWN;
    struct experts e = {0};
    experts_of(&v, &e);
    enum qr_conf_status st = QR_CONF_PASS;
    char note[200] = "";
    if (!v.model)
        st = SKIP("GET /v1/models/{id} answered %ld: no architecture class to check",
                  v.model_status);
    else if (conflict)
        st = QR_CONF_FAIL;
    else if (k == K_UNKNOWN)
        st = SKIP("model '%.60s' is declared neither dense nor MoE (architecture_class '%.20s')",
                  c->model, known(sget(v.manifest, "/architecture_class")));
    else if (k == K_MOE && !(e.have_total && e.have_used))
        st = FAIL("MoE model '%.60s' reports no expert_count / expert_used_count", c->model);
    else if (k == K_MOE && !(e.total > e.used && e.used > 0))
        st = FAIL("MoE model '%.60s' reports %llu experts, %llu used: want count > used > 0",
                  c->model, (unsigned long long) e.total, (unsigned long long) e.used);
    else if (k == K_MOE && e.have_shared && e.shared > e.total)
        st = FAIL("MoE model '%.60s' reports %llu shared experts of %llu", c->model,
                  (unsigned long long) e.shared, (unsigned long long) e.total);
    else if (k == K_DENSE &&
             ((e.have_total && e.total) || (e.have_used && e.used) || (e.have_shared && e.shared)))
        st = FAIL("dense model '%.60s' reports experts (count %llu, used %llu, shared %llu)",
                  c->model, (unsigned long long) e.total, (unsigned long long) e.used,
                  (unsigned long long) e.shared);
    if (st == QR_CONF_PASS)
        st = moe_plan(c, k, &e, note, sizeof note, reason, cap);
    char shared[32] = "unstated";
    if (e.have_shared)
        snprintf(shared, sizeof shared, "%llu", (unsigned long long) e.shared);
    if (st == QR_CONF_PASS && k == K_MOE)
        snprintf(reason, cap, "MoE: %llu experts, %llu used, %s shared%s",
                 (unsigned long long) e.total, (unsigned long long) e.used, shared, note);
    else if (st == QR_CONF_PASS)
        snprintf(reason, cap, "dense: no expert counts in any view%s", note);
    view_free(&v);
    return st;
}

/* ---- negotiation through POST /v1/route ---- */

struct route {
    long status;
    bool ok;           /* 200 and plan.status "ok" */
    bool names_key;    /* a refusal whose plan.missing_capabilities holds the key */
    char message[160]; /* error.message of a refusal */
    char code[64];     /* error.code of a refusal */
    char artifact[32]; /* plan.artifact_kind of an accepted plan */
};

/* The string at ptr into dst ("" when absent), cut to fit. */
static void copy_at(char *dst, size_t cap, yyjson_val *root, const char *ptr)
{
    const char *s = sget(root, ptr);
    size_t n = s ? strlen(s) : 0;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(dst, s, n);
    dst[n] = '\0';
}

static void route_ask(const struct qr_conf_ctx *c, const char *key, struct route *out)
{
    memset(out, 0, sizeof *out);
    char *body = route_body(c, key);
    yyjson_doc *d = call(c, "POST", "/v1/route", body, &out->status);
    free(body);
    yyjson_val *root = yyjson_doc_get_root(d);
    out->ok = out->status == 200 && yyjson_equals_str(yyjson_ptr_get(root, "/plan/status"), "ok");
    copy_at(out->message, sizeof out->message, root, "/error/message");
    copy_at(out->code, sizeof out->code, root, "/error/code");
    copy_at(out->artifact, sizeof out->artifact, root, "/plan/artifact_kind");
    size_t i, max;
    yyjson_val *k;
    yyjson_arr_foreach(yyjson_ptr_get(root, "/plan/missing_capabilities"), i, max, k)
    {
        if (yyjson_equals_str(k, key))
            out->names_key = true;
    }
    yyjson_doc_free(d);
}

/* A clear refusal of key: a 4xx in the native error shape (code and message) whose plan names the
 * missing key. */
static enum qr_conf_status want_refused(const struct qr_conf_ctx *c, const char *key,
                                        const char *why, struct route *r, char *reason, size_t cap)
{
    route_ask(c, key, r);
    if (r->status < 400 || r->status > 499)
        return FAIL("POST /v1/route requiring '%s' (%s) answered %ld, want a 4xx refusal", key, why,
                    r->status);
    if (!r->message[0] || !r->code[0])
        return FAIL("POST /v1/route requiring '%s' refused with %ld but without the native "
                    "error.code and error.message",
                    key, r->status);
    if (!r->names_key)
        return FAIL("POST /v1/route requiring '%s' refused with %ld, but its plan does not name "
                    "'%s' missing: %.80s",
                    key, r->status, key, r->message);
    return QR_CONF_PASS;
}

/* ---- expert routing configuration ---- */

enum qr_conf_status qr_conf_case_experts_config(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct view v;
    view_load(c, &v);
    bool conflict = false;
    enum klass k = v.model ? class_of(&v, reason, cap, &conflict) : K_UNKNOWN;
    view_free(&v);
    if (conflict)
        return QR_CONF_FAIL;
    if (k == K_UNKNOWN)
        return SKIP("model '%.60s' is declared neither dense nor MoE: no expert requirement "
                    "applies",
                    c->model);
    const char *own = k == K_MOE ? "architecture.moe" : "architecture.dense";
    const char *other = k == K_MOE ? "architecture.dense" : "architecture.moe";
    struct route ok, wrong, off;
    route_ask(c, own, &ok);
    if (!ok.ok)
        return FAIL("POST /v1/route requiring '%s' for a model declared %s answered %ld: %.100s",
                    own, k == K_MOE ? "MoE" : "dense", ok.status, ok.message);
    enum qr_conf_status st = want_refused(
        c, other, k == K_MOE ? "the model is MoE" : "the model is dense", &wrong, reason, cap);
    if (st != QR_CONF_PASS)
        return st;
    /* expert offload: a dense model has no experts to place; an MoE model only where the
     * backend does not declare it unsupported */
    yyjson_doc *bd = NULL;
    yyjson_val *b = qr_conf_backend_of(c, &bd);
    const char *state = sget(b, "/capabilities/moe.expert_offload");
    bool must_refuse = k == K_DENSE || (state && !strcmp(state, "unsupported"));
    char offload[96];
    snprintf(offload, sizeof offload, "%s", state ? state : "not declared");
    yyjson_doc_free(bd);
    if (must_refuse) {
        st = want_refused(c, "moe.expert_offload",
                          k == K_DENSE ? "a dense model has no experts" : "the backend cannot",
                          &off, reason, cap);
        if (st != QR_CONF_PASS)
            return st;
    } else {
        route_ask(c, "moe.expert_offload", &off);
        if (!off.ok && !(off.status >= 400 && off.status <= 499 && off.names_key && off.message[0]))
            return FAIL("POST /v1/route requiring 'moe.expert_offload' answered %ld without a "
                        "plan or a clear refusal: %.80s",
                        off.status, off.message);
    }
    snprintf(reason, cap,
             "'%s' planned; '%s' refused (%ld %s); 'moe.expert_offload' %s (backend: %s)", own,
             other, wrong.status, wrong.code, off.ok ? "planned" : "refused", offload);
    return QR_CONF_PASS;
}

/* ---- quantization ---- */

const char *const qr_conf_verifies_quantization[] = {"quantization.formats", NULL};

/* The format of the artifact the serving backend runs: the first main artifact (role inference or
 * none) whose backend is the serving one or unstated. */
static const char *artifact_format(const struct view *v, const char *backend)
{
    size_t i, max;
    yyjson_val *a;
    yyjson_arr_foreach(yyjson_ptr_get(yyjson_doc_get_root(v->model), "/model/artifacts"), i, max, a)
    {
        const char *role = sget(a, "/role"), *be = sget(a, "/backend");
        if (role && strcmp(role, "inference"))
            continue;
        if (be && backend[0] && strcmp(be, backend))
            continue;
        const char *f = sget(a, "/format");
        if (f && f[0])
            return f;
    }
    return NULL;
}

/* The first capability key the descriptor declares "unsupported", or NULL. */
static const char *first_unsupported(yyjson_val *b, char *buf, size_t cap)
{
    size_t i, max;
    yyjson_val *k, *s;
    yyjson_obj_foreach(yyjson_obj_get(b, "capabilities"), i, max, k, s)
    {
        if (yyjson_equals_str(s, "unsupported")) {
            snprintf(buf, cap, "%s", yyjson_get_str(k));
            return buf;
        }
    }
    return NULL;
}

static bool list_has(yyjson_val *arr, const char *s)
{
    size_t i, max;
    yyjson_val *x;
    yyjson_arr_foreach(arr, i, max, x)
    {
        if (yyjson_is_str(x) && !strcasecmp(yyjson_get_str(x), s))
            return true;
    }
    return false;
}

enum qr_conf_status qr_conf_case_quantization(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct view v;
    view_load(c, &v);
    yyjson_doc *bd = NULL;
    yyjson_val *b = qr_conf_backend_of(c, &bd);
    yyjson_val *formats = yyjson_ptr_get(b, "/capabilities/quantization_formats");
    char be[64], fbuf[64] = "", quant[64] = "", unsup[96] = "";
    snprintf(be, sizeof be, "%s", sget(b, "/id") ? sget(b, "/id") : c->backend);
    const char *fmt = v.model ? artifact_format(&v, be) : NULL;
    snprintf(fbuf, sizeof fbuf, "%s", fmt ? fmt : "");
    snprintf(quant, sizeof quant, "%s", known(sget(v.manifest, "/quantization")));
    bool listed = fmt && list_has(formats, fmt);
    const char *lacking = first_unsupported(b, unsup, sizeof unsup);
    enum qr_conf_status st = QR_CONF_PASS;
    if (!v.model)
        st = SKIP("GET /v1/models/{id} answered %ld: no artifact format to negotiate",
                  v.model_status);
    else if (!b)
        st = SKIP("GET /v1/backends does not describe the serving backend '%.60s'", c->backend);
    else if (!yyjson_arr_size(formats))
        st = SKIP("backend '%.60s' lists no quantization formats", be);
    else if (!fmt)
        st = SKIP("the artifact backend '%.60s' serves names no format", be);
    yyjson_doc_free(bd);
    view_free(&v);
    if (st != QR_CONF_PASS)
        return st;
    struct route r;
    if (!listed) {
        st = want_refused(c, "quantization.formats", "the artifact's format is not listed", &r,
                          reason, cap);
        if (st == QR_CONF_PASS)
            st = FAIL("the artifact's format '%.30s' is not one backend '%.60s' lists", fbuf, be);
        return st;
    }
    route_ask(c, "quantization.formats", &r);
    if (!r.ok)
        return FAIL("format '%.30s' is listed by backend '%.60s', but POST /v1/route requiring "
                    "'quantization.formats' answered %ld: %.80s",
                    fbuf, be, r.status, r.message);
    if (r.artifact[0] && strcasecmp(r.artifact, fbuf))
        return FAIL("the plan runs a '%.30s' artifact, the model's is '%.30s'", r.artifact, fbuf);
    struct route no;
    if (lacking) {
        st = want_refused(c, lacking, "the backend declares it unsupported", &no, reason, cap);
        if (st != QR_CONF_PASS)
            return st;
    }
    snprintf(reason, cap, "'%.30s' (%.30s) is listed by '%.40s' and planned%s%.60s%s", fbuf,
             quant[0] ? quant : "quantization unstated", be,
             lacking ? "; unsupported '" : "; the backend declares nothing unsupported",
             lacking ? lacking : "", lacking ? "' refused with its name" : "");
    return QR_CONF_PASS;
}

/* ---- speculative decoding ---- */

const char *const qr_conf_verifies_speculative[] = {"speculative.draft_model", "speculative.mtp",
                                                    NULL};

/* Does the model declare a speculative setup: a draft artifact, draft models or MTP? */
static bool declares_speculation(const struct view *v, char *what, size_t cap)
{
    size_t i, max;
    yyjson_val *a;
    yyjson_arr_foreach(yyjson_ptr_get(yyjson_doc_get_root(v->model), "/model/artifacts"), i, max, a)
    {
        if (yyjson_equals_str(yyjson_obj_get(a, "role"), "draft")) {
            snprintf(what, cap, "draft artifact '%.80s'", sget(a, "/uri") ? sget(a, "/uri") : "");
            return true;
        }
    }
    if (yyjson_arr_size(yyjson_ptr_get(v->contract, "/speculative/draft_models"))) {
        snprintf(what, cap, "draft models");
        return true;
    }
    if (yyjson_is_true(yyjson_ptr_get(v->contract, "/speculative/mtp"))) {
        snprintf(what, cap, "multi-token prediction");
        return true;
    }
    return false;
}

/* The model's process row in GET /v1/loaded: does an engine argument name a draft or a
 * speculation type? *rows: the number of rows for the model. */
static bool loaded_with_draft(const struct qr_conf_ctx *c, size_t *rows)
{
    long st = 0;
    yyjson_doc *d = call(c, "GET", "/v1/loaded", NULL, &st);
    bool found = false;
    size_t i, max, j, jmax;
    yyjson_val *m, *arg;
    *rows = 0;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "models"), i, max, m)
    {
        if (!yyjson_equals_str(yyjson_obj_get(m, "model"), c->model))
            continue;
        (*rows)++;
        yyjson_arr_foreach(yyjson_obj_get(m, "engine_args"), j, jmax, arg)
        {
            if (yyjson_is_str(arg) &&
                (strstr(yyjson_get_str(arg), "draft") || strstr(yyjson_get_str(arg), "spec")))
                found = true;
        }
    }
    yyjson_doc_free(d);
    return found;
}

static enum qr_conf_status spec_served(struct qr_conf_ctx *c, const char *what, char *reason,
                                       size_t cap)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (!o)
        abort();
    yyjson_mut_doc_set_root(d, o);
    yyjson_mut_obj_add_str(d, o, "model", c->model);
    yyjson_mut_obj_add_uint(d, o, "max_tokens", 16);
    yyjson_mut_obj_add_uint(d, o, "temperature", 0);
    yyjson_mut_val *msgs = yyjson_mut_obj_add_arr(d, o, "messages");
    yyjson_mut_val *m = yyjson_mut_arr_add_obj(d, msgs);
    yyjson_mut_obj_add_str(d, m, "role", "user");
    yyjson_mut_obj_add_str(d, m, "content", "Say hello.");
    char *body = write_doc(d);
    struct qr_conf_resp r;
    qr_conf_http(c, "POST", "/v1/chat/completions", body, &r);
    free(body);
    long status = r.status;
    char err[120];
    snprintf(err, sizeof err, "%.110s", r.error[0] ? r.error : r.body);
    qr_conf_resp_cleanup(&r);
    if (status != 200)
        return FAIL("a model with %s was not served: %ld %s", what, status, err);
    size_t rows = 0;
    bool draft = loaded_with_draft(c, &rows);
    if (rows && !draft)
        return FAIL("a model with %s was served, but its process in GET /v1/loaded was started "
                    "without a speculative setup (no draft or spec argument in engine_args)",
                    what);
    struct route plan;
    route_ask(c, "speculative.draft_model", &plan);
    if (!plan.ok && strstr(what, "draft"))
        return FAIL("a model with %s is served with it, but POST /v1/route refuses "
                    "'speculative.draft_model': negotiation does not count the declared setup",
                    what);
    snprintf(reason, cap, "%s: served; %s; POST /v1/route requiring 'speculative.draft_model': %s",
             what,
             rows ? "the engine process runs with it (engine_args)"
                  : "the backend shows no engine process",
             plan.ok ? "planned" : "refused (MTP only, no draft)");
    return QR_CONF_PASS;
}

enum qr_conf_status qr_conf_case_speculative(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct view v;
    view_load(c, &v);
    char what[128] = "";
    bool declared = v.model && declares_speculation(&v, what, sizeof what);
    long mst = v.model_status;
    view_free(&v);
    if (!declared && mst != 200 && !qr_conf_claims(c, "speculative.draft_model") &&
        !qr_conf_claims(c, "speculative.mtp"))
        return SKIP("GET /v1/models/{id} answered %ld: the model's speculative setup is unknown",
                    mst);
    if (declared)
        return spec_served(c, what, reason, cap);
    const char *claimed = qr_conf_claims(c, "speculative.draft_model") ? "speculative.draft_model"
                          : qr_conf_claims(c, "speculative.mtp")       ? "speculative.mtp"
                                                                       : NULL;
    if (claimed) { /* the backend speculates for any model: negotiable, and served */
        struct route r;
        route_ask(c, claimed, &r);
        if (!r.ok)
            return FAIL("'%s' is claimed for '%.60s', but POST /v1/route requiring it answered "
                        "%ld: %.80s",
                        claimed, c->model, r.status, r.message);
        snprintf(what, sizeof what, "'%s' claimed by the backend", claimed);
        return spec_served(c, what, reason, cap);
    }
    /* not declared: asking for it must be refused, never planned as if it were there */
    struct route d, m;
    enum qr_conf_status st =
        want_refused(c, "speculative.draft_model", "no draft declared", &d, reason, cap);
    if (st == QR_CONF_PASS)
        st = want_refused(c, "speculative.mtp", "no MTP declared", &m, reason, cap);
    if (st == QR_CONF_PASS)
        snprintf(reason, cap,
                 "no draft or MTP declared: POST /v1/route refuses 'speculative.draft_model' "
                 "(%ld) and 'speculative.mtp' (%ld) by name; chat requests carry no speculation "
                 "switch",
                 d.status, m.status);
    return st;
}
