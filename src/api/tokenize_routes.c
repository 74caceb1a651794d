/* POST /v1/tokenize and POST /v1/detokenize: the model's own tokenizer, served by the engine that
 * serves the model (docs/API.md "POST /v1/tokenize"). Only backend=llama.cpp has one: the model is
 * loaded as a chat request would load it, then its llama-server process is asked (POST
 * /apply-template renders chat messages exactly as a chat request would, POST /tokenize and
 * /detokenize, GET /props for the BOS/EOS texts, whose ids come from tokenizing them, GET
 * /v1/models for the vocabulary size a token id must stay below). Every other backend answers
 * 501 tokenizer_unavailable: nothing is guessed. Bodies are native bodies (64 KiB, unknown fields
 * refused, every bad field named in a 400 invalid_tokenize_request). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "api/api.h"
#include "api/catalog.h"
#include "api/codec.h"
#include "backend/backend.h"
#include "backend/job.h"
#include "backend/llamacpp/llamacpp.h"
#include "core/http_server.h"
#include "core/json_strict.h"
#include "router/router.h"

#define TOK_BODY_MAX      (64u * 1024u) /* as every native POST body */
#define TOK_UPSTREAM_MAX  (16u << 20)   /* an engine answer: pieces of 64 KiB of text fit */
#define TOK_TIMEOUT_MS    30000u        /* one engine call */
#define TOK_MODEL_MAX     512u
#define TOK_SPECIAL_MAX   256u /* bytes of a BOS/EOS text */
#define TOK_MAX_TOKEN_IDS 65536u

enum tok_kind { TOK_TOKENIZE, TOK_DETOKENIZE };

/* What the engine is asked next; each answer moves one step on. */
enum tok_step {
    STEP_LOAD,
    STEP_TEMPLATE,
    STEP_TOKENIZE,
    STEP_PROPS,
    STEP_SPECIAL,
    STEP_VOCAB,
    STEP_DETOK
};

/* One request in flight. req is NULL once the client went away: the engine call under way
 * finishes into nothing and frees the record. */
struct tok {
    struct qr_app *app;
    struct qr_http_req *req;
    struct qr_job *job; /* the load, until its final event */
    enum tok_kind kind;
    enum tok_step step;
    yyjson_doc *in;      /* the client's body */
    yyjson_val *root;    /* its object */
    struct qr_request r; /* the load request (model points into name) */
    char name[TOK_MODEL_MAX];
    char id[TOK_MODEL_MAX]; /* canonical id: the process's name */
    char base_url[64];
    char key[128];
    bool add_special, with_pieces;
    char *prompt; /* the rendered chat prompt (messages), malloc'd */
    size_t prompt_len;
    yyjson_doc *tokens; /* the engine's /tokenize answer */
    char bos[TOK_SPECIAL_MAX], eos[TOK_SPECIAL_MAX];
    int64_t bos_id, eos_id; /* -1: unknown */
};

static void tok_free(struct tok *t)
{
    yyjson_doc_free(t->in);
    yyjson_doc_free(t->tokens);
    free(t->prompt);
    free(t);
}

static void tok_fail(struct tok *t, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Answer an error (when the client is still there) and free. */
static void tok_fail(struct tok *t, int status, const char *code, const char *fmt, ...)
{
    if (t->req) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        qr_http_req_set_close_cb(t->req, NULL, NULL);
        qr_api_send_error(t->req, status, code, msg);
    }
    tok_free(t);
}

static void client_gone(struct qr_http_req *req, void *arg)
{
    (void) req;
    struct tok *t = arg;
    t->req = NULL;
    if (t->step == STEP_LOAD && t->job) {
        qr_job_cancel(t->job); /* the process goes on loading; only this waiter is forgotten */
        tok_free(t);
    }
    /* otherwise an engine call is under way: its callback frees */
}

/* ---- the body ---- */

static bool bad(struct qr_http_req *req, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static bool bad(struct qr_http_req *req, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    qr_api_send_error(req, 400, "invalid_tokenize_request", msg);
    return false;
}

static bool parse_model(struct qr_http_req *req, yyjson_val *v, struct tok *t)
{
    const char *m = yyjson_get_str(v);
    if (!m)
        return bad(req, "'model' must be a string");
    if (!m[0] || yyjson_get_len(v) >= sizeof t->name)
        return bad(req, "'model' must be a non-empty name shorter than %u bytes", TOK_MODEL_MAX);
    snprintf(t->name, sizeof t->name, "%s", m);
    return true;
}

/* Chat messages as a chat request has them: objects with a string role. The engine's template
 * judges the rest. */
static bool check_messages(struct qr_http_req *req, yyjson_val *v)
{
    if (!yyjson_is_arr(v) || !yyjson_arr_size(v))
        return bad(req, "'messages' must be a non-empty array of chat messages");
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(v, i, max, m)
    {
        yyjson_val *role = yyjson_obj_get(m, "role");
        if (!yyjson_is_obj(m) || !yyjson_is_str(role) || !yyjson_get_len(role))
            return bad(req, "'messages[%zu]' must be an object with a string 'role'", i);
    }
    return true;
}

static bool parse_tokenize(struct qr_http_req *req, struct tok *t)
{
    bool special_set = false, have_model = false;
    yyjson_val *content = NULL, *messages = NULL;
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(t->root, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (!strcmp(key, "model")) {
            if (!parse_model(req, v, t))
                return false;
            have_model = true;
        } else if (!strcmp(key, "content")) {
            if (!yyjson_is_str(v))
                return bad(req, "'content' must be a string");
            content = v;
        } else if (!strcmp(key, "messages")) {
            if (!check_messages(req, v))
                return false;
            messages = v;
        } else if (!strcmp(key, "add_special")) {
            if (!yyjson_is_bool(v))
                return bad(req, "'add_special' must be a boolean");
            t->add_special = yyjson_get_bool(v);
            special_set = true;
        } else if (!strcmp(key, "with_pieces")) {
            if (!yyjson_is_bool(v))
                return bad(req, "'with_pieces' must be a boolean");
            t->with_pieces = yyjson_get_bool(v);
        } else {
            return bad(req, "unknown field '%.200s'", key);
        }
    }
    if (!have_model)
        return bad(req, "'model' is required");
    if (!content == !messages)
        return bad(req, "exactly one of 'content' and 'messages' is required");
    /* messages: what a chat request feeds the engine (the rendered prompt, special tokens added
     * as the engine adds them to a chat prompt); content: the text alone */
    if (!special_set)
        t->add_special = messages != NULL;
    return true;
}

static bool parse_detokenize(struct qr_http_req *req, struct tok *t)
{
    bool have_model = false, have_tokens = false;
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(t->root, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (!strcmp(key, "model")) {
            if (!parse_model(req, v, t))
                return false;
            have_model = true;
        } else if (!strcmp(key, "tokens")) {
            if (!yyjson_is_arr(v))
                return bad(req, "'tokens' must be an array of token ids");
            if (yyjson_arr_size(v) > TOK_MAX_TOKEN_IDS)
                return bad(req, "'tokens' has more than %u ids", TOK_MAX_TOKEN_IDS);
            size_t j, jmax;
            yyjson_val *id;
            yyjson_arr_foreach(v, j, jmax, id)
            {
                if (!yyjson_is_int(id) || yyjson_get_sint(id) < 0 ||
                    yyjson_get_sint(id) > INT32_MAX)
                    return bad(req, "'tokens[%zu]' must be a token id (an integer >= 0)", j);
            }
            have_tokens = true;
        } else {
            return bad(req, "unknown field '%.200s'", key);
        }
    }
    if (!have_model)
        return bad(req, "'model' is required");
    if (!have_tokens)
        return bad(req, "'tokens' is required");
    return true;
}

/* ---- which backend serves the name ---- */

/* The backend a chat request for name would go to: the router's choice for a registry manifest
 * (no capability required), else the backend that reported the name or the default one. */
static struct qr_backend *serving_backend(struct qr_app *app, const char *name)
{
    struct qr_catalog_model cm;
    qr_catalog_model_find(app->catalog, name, &cm);
    if (cm.known != QR_KNOWN_MANIFEST)
        return qr_api_backend_for_name(app, name);
    struct qr_route_backend rb[QR_BACKENDS_MAX];
    struct qr_router_env env;
    qr_api_route_env(app, rb, &env);
    struct qr_route_query q = {.model = name};
    struct qr_route_plan plan;
    struct qr_diag diag = {{0}};
    (void) qr_router_plan(&env, &q, &plan, &diag);
    struct qr_backend *b = plan.status == QR_ROUTE_OK ? qr_api_backend_find(app, plan.backend_id)
                                                      : qr_api_backend_for_name(app, name);
    qr_route_plan_cleanup(&plan);
    return b;
}

/* ---- engine calls ---- */

static void on_engine(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                      void *arg);

static void engine_post(struct tok *t, enum tok_step step, const char *path, const char *json)
{
    t->step = step;
    size_t len = strlen(json);
    enum qr_err e =
        qr_fetch_post(t->app->managed, t->base_url, path, t->key, (struct qr_slice){json, len},
                      TOK_TIMEOUT_MS, TOK_UPSTREAM_MAX, on_engine, t);
    if (e)
        tok_fail(t, 502, "engine_error", "cannot ask the engine of model '%s': %s", t->id,
                 qr_err_str(e));
}

/* Write d (taken: freed here; NULL after an allocation failure) and post it. */
static void post_doc(struct tok *t, enum tok_step step, const char *path, yyjson_mut_doc *d)
{
    char *json = d ? yyjson_mut_write(d, 0, NULL) : NULL;
    yyjson_mut_doc_free(d);
    if (!json) {
        tok_fail(t, 500, "out_of_memory", "out of memory");
        return;
    }
    engine_post(t, step, path, json);
    free(json);
}

/* text borrowed until the call is posted (len bytes: a client's text may hold NUL). */
static void ask_tokenize(struct tok *t, const char *text, size_t len, bool add_special, bool pieces,
                         enum tok_step step)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (o) {
        yyjson_mut_doc_set_root(d, o);
        yyjson_mut_obj_add_strn(d, o, "content", text, len);
        yyjson_mut_obj_add_bool(d, o, "add_special", add_special);
        yyjson_mut_obj_add_bool(d, o, "parse_special", true);
        yyjson_mut_obj_add_bool(d, o, "with_pieces", pieces);
    }
    post_doc(t, step, "/tokenize", o ? d : (yyjson_mut_doc_free(d), NULL));
}

/* The model is ready: the first engine call of the request. */
static void start_calls(struct tok *t)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (!o) {
        yyjson_mut_doc_free(d);
        tok_fail(t, 500, "out_of_memory", "out of memory");
        return;
    }
    yyjson_mut_doc_set_root(d, o);
    yyjson_val *msgs = yyjson_obj_get(t->root, "messages");
    if (t->kind == TOK_DETOKENIZE) {
        yyjson_mut_doc_free(d);
        t->step = STEP_VOCAB; /* the vocabulary size first: an id past it is the client's error */
        if (qr_fetch(t->app->managed, t->base_url, "/v1/models", t->key, TOK_TIMEOUT_MS,
                     TOK_UPSTREAM_MAX, on_engine, t))
            tok_fail(t, 500, "out_of_memory", "out of memory");
    } else if (msgs) {
        yyjson_mut_obj_add_val(d, o, "messages", yyjson_val_mut_copy(d, msgs));
        post_doc(t, STEP_TEMPLATE, "/apply-template", d);
    } else {
        yyjson_mut_doc_free(d);
        yyjson_val *content = yyjson_obj_get(t->root, "content");
        ask_tokenize(t, yyjson_get_str(content), yyjson_get_len(content), t->add_special,
                     t->with_pieces, STEP_TOKENIZE);
    }
}

/* The engine's error text: its {"error":{"message"}} or the start of the body. */
static void engine_message(struct qr_slice body, char *out, size_t cap)
{
    yyjson_doc *d = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    const char *m = yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), "/error/message"));
    snprintf(out, cap, "%.300s", m ? m : body.len ? body.ptr : "(empty)");
    yyjson_doc_free(d);
}

/* ---- the answers ---- */

/* Every id below the engine's vocabulary size (data[0].meta.n_vocab of its /v1/models; not
 * checked when it does not say), then /detokenize. */
static void on_vocab(struct tok *t, yyjson_val *root)
{
    yyjson_val *nv = yyjson_ptr_get(root, "/data/0/meta/n_vocab");
    yyjson_val *ids = yyjson_obj_get(t->root, "tokens");
    size_t i, max;
    yyjson_val *id;
    yyjson_arr_foreach(ids, i, max, id)
    {
        if (yyjson_is_int(nv) && yyjson_get_sint(id) >= yyjson_get_sint(nv)) {
            tok_fail(t, 400, "invalid_tokenize_request",
                     "'tokens[%zu]' (%lld) is not a token id of model '%s' (vocabulary of %lld)", i,
                     (long long) yyjson_get_sint(id), t->id, (long long) yyjson_get_sint(nv));
            return;
        }
    }
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    if (o) {
        yyjson_mut_doc_set_root(d, o);
        yyjson_mut_obj_add_val(d, o, "tokens", yyjson_val_mut_copy(d, ids));
    }
    post_doc(t, STEP_DETOK, "/detokenize", o ? d : (yyjson_mut_doc_free(d), NULL));
}

static void send_detokenized(struct tok *t, yyjson_val *root)
{
    yyjson_val *content = yyjson_obj_get(root, "content");
    if (!yyjson_is_str(content)) {
        tok_fail(t, 502, "engine_error", "the engine's /detokenize answer has no content");
        return;
    }
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    bool ok = o && yyjson_mut_obj_add_strcpy(d, o, "model", t->id) &&
              yyjson_mut_obj_add_strncpy(d, o, "content", yyjson_get_str(content),
                                         yyjson_get_len(content));
    if (!ok) {
        yyjson_mut_doc_free(d);
        tok_fail(t, 500, "out_of_memory", "out of memory");
        return;
    }
    yyjson_mut_doc_set_root(d, o);
    qr_http_req_set_close_cb(t->req, NULL, NULL);
    qr_api_send_json(t->req, 200, d);
    yyjson_mut_doc_free(d);
    tok_free(t);
}

static void send_tokens(struct tok *t)
{
    yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(t->tokens), "tokens");
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = d ? yyjson_mut_obj(d) : NULL;
    yyjson_mut_val *ids = NULL, *pieces = NULL;
    bool ok =
        o && yyjson_mut_obj_add_strcpy(d, o, "model", t->id) &&
        (ids = yyjson_mut_obj_add_arr(d, o, "tokens")) != NULL &&
        yyjson_mut_obj_add_uint(d, o, "count", yyjson_arr_size(arr)) &&
        yyjson_mut_obj_add_bool(d, o, "add_special", t->add_special) &&
        (!t->prompt || yyjson_mut_obj_add_strncpy(d, o, "prompt", t->prompt, t->prompt_len)) &&
        (!t->with_pieces || (pieces = yyjson_mut_obj_add_arr(d, o, "pieces")) != NULL) &&
        (t->bos_id < 0 || yyjson_mut_obj_add_sint(d, o, "bos_token_id", t->bos_id)) &&
        (t->eos_id < 0 || yyjson_mut_obj_add_sint(d, o, "eos_token_id", t->eos_id));
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        if (!ok)
            break;
        yyjson_val *id = yyjson_is_obj(v) ? yyjson_obj_get(v, "id") : v;
        ok = yyjson_mut_arr_add_sint(d, ids, yyjson_get_sint(id)) &&
             (!pieces ||
              yyjson_mut_arr_append(pieces, yyjson_val_mut_copy(d, yyjson_obj_get(v, "piece"))));
    }
    if (!ok) {
        yyjson_mut_doc_free(d);
        tok_fail(t, 500, "out_of_memory", "out of memory");
        return;
    }
    yyjson_mut_doc_set_root(d, o);
    qr_http_req_set_close_cb(t->req, NULL, NULL);
    qr_api_send_json(t->req, 200, d);
    yyjson_mut_doc_free(d);
    tok_free(t);
}

/* Every element an id (>= 0), or {"id", "piece"} when pieces were asked for. */
static bool tokens_valid(yyjson_val *arr, bool pieces)
{
    if (!yyjson_is_arr(arr))
        return false;
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(arr, i, max, v)
    {
        yyjson_val *id = pieces ? yyjson_obj_get(v, "id") : v;
        if (!yyjson_is_int(id) || yyjson_get_sint(id) < 0 ||
            (pieces && !yyjson_obj_get(v, "piece")))
            return false;
    }
    return true;
}

/* The BOS and EOS texts, each tokenized alone (special tokens parsed): a text that is exactly one
 * token whose piece is the text gives its id. */
static void take_special(struct tok *t, yyjson_val *root)
{
    yyjson_val *arr = yyjson_obj_get(root, "tokens");
    size_t n = yyjson_arr_size(arr), k = 0;
    const char *texts[2] = {t->bos, t->eos};
    int64_t *outs[2] = {&t->bos_id, &t->eos_id};
    /* same text: one token answers both */
    bool same = t->bos[0] && !strcmp(t->bos, t->eos);
    for (int w = 0; w < 2; w++) {
        if (!texts[w][0])
            continue;
        if (w == 1 && same) {
            t->eos_id = t->bos_id;
            break;
        }
        yyjson_val *e = yyjson_arr_get(arr, k++);
        yyjson_val *id = yyjson_obj_get(e, "id");
        if (k <= n && yyjson_is_int(id) && yyjson_equals_str(yyjson_obj_get(e, "piece"), texts[w]))
            *outs[w] = yyjson_get_sint(id);
    }
}

static void on_props(struct tok *t, yyjson_val *root)
{
    const char *b = yyjson_get_str(yyjson_obj_get(root, "bos_token"));
    const char *e = yyjson_get_str(yyjson_obj_get(root, "eos_token"));
    if (b && strlen(b) < sizeof t->bos)
        snprintf(t->bos, sizeof t->bos, "%s", b);
    if (e && strlen(e) < sizeof t->eos)
        snprintf(t->eos, sizeof t->eos, "%s", e);
    if (!t->bos[0] && !t->eos[0]) {
        send_tokens(t);
        return;
    }
    char both[2 * TOK_SPECIAL_MAX];
    snprintf(both, sizeof both, "%s%s", t->bos, !strcmp(t->bos, t->eos) ? "" : t->eos);
    ask_tokenize(t, both, strlen(both), false, true, STEP_SPECIAL);
}

static void on_engine(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                      void *arg)
{
    struct tok *t = arg;
    if (!t->req) { /* the client went away meanwhile */
        tok_free(t);
        return;
    }
    static const char *const WHAT[] = {"",          "/apply-template", "/tokenize",  "/props",
                                       "/tokenize", "/v1/models",      "/detokenize"};
    if (err) {
        tok_fail(t, qr_err_is_upstream_timeout(err) ? 504 : 502, "engine_error",
                 "the engine of model '%s' did not answer %s: %s", t->id, WHAT[t->step],
                 diag && diag->msg[0] ? diag->msg : qr_err_str(err));
        return;
    }
    if (status != 200) {
        char msg[400];
        engine_message(body, msg, sizeof msg);
        /* the engine refused what the client sent (a bad token id, a template error): 400 */
        tok_fail(t, status == 400 ? 400 : 502,
                 status == 400 ? "invalid_tokenize_request" : "engine_error",
                 "the engine of model '%s' answered %s with %d: %s", t->id, WHAT[t->step], status,
                 msg);
        return;
    }
    yyjson_doc *d = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    yyjson_val *root = yyjson_doc_get_root(d);
    if (!yyjson_is_obj(root)) {
        yyjson_doc_free(d);
        tok_fail(t, 502, "engine_error", "the engine's %s answer is not a JSON object",
                 WHAT[t->step]);
        return;
    }
    switch (t->step) {
    case STEP_TEMPLATE: {
        yyjson_val *p = yyjson_obj_get(root, "prompt");
        if (!yyjson_is_str(p) || !(t->prompt = malloc(yyjson_get_len(p) + 1))) {
            yyjson_doc_free(d);
            tok_fail(t, 502, "engine_error", "the engine's /apply-template answer has no prompt");
            return;
        }
        t->prompt_len = yyjson_get_len(p);
        memcpy(t->prompt, yyjson_get_str(p), t->prompt_len + 1);
        ask_tokenize(t, t->prompt, t->prompt_len, t->add_special, t->with_pieces, STEP_TOKENIZE);
        break;
    }
    case STEP_TOKENIZE:
        if (!tokens_valid(yyjson_obj_get(root, "tokens"), t->with_pieces)) {
            yyjson_doc_free(d);
            tok_fail(t, 502, "engine_error", "the engine's /tokenize answer has no token list");
            return;
        }
        t->tokens = d;
        d = NULL;
        t->step = STEP_PROPS;
        if (qr_fetch(t->app->managed, t->base_url, "/props", t->key, TOK_TIMEOUT_MS,
                     TOK_UPSTREAM_MAX, on_engine, t))
            send_tokens(t); /* the ids of BOS/EOS are a bonus: answer without them */
        break;
    case STEP_PROPS:
        on_props(t, root);
        break;
    case STEP_SPECIAL:
        take_special(t, root);
        send_tokens(t);
        break;
    case STEP_VOCAB:
        on_vocab(t, root);
        break;
    case STEP_DETOK:
        send_detokenized(t, root);
        break;
    case STEP_LOAD:
        break;
    }
    yyjson_doc_free(d);
}

/* ---- the load ---- */

static enum qr_err on_load(void *arg, const struct qr_event *ev)
{
    struct tok *t = arg;
    if (ev->type != QR_EV_DONE && ev->type != QR_EV_ERROR)
        return QR_OK;
    t->job = NULL; /* the job frees itself after its final event */
    if (ev->type == QR_EV_ERROR) {
        char code[64];
        if (ev->code.len)
            snprintf(code, sizeof code, "%.*s", (int) ev->code.len, ev->code.ptr);
        else
            snprintf(code, sizeof code, "model_load_failed");
        tok_fail(t, ev->status ? ev->status : 502, code, "%.*s", (int) ev->message.len,
                 ev->message.ptr ? ev->message.ptr : "");
        return QR_OK;
    }
    struct qr_llama_proc *p = qr_llamacpp_find_proc(t->app->managed, t->name);
    if (!p || qr_llama_proc_state(p) != QR_LLAMA_PROC_READY) {
        tok_fail(t, 503, "model_not_ready",
                 "model '%s' is not ready on its engine (it was unloaded or crashed meanwhile)",
                 t->name);
        return QR_OK;
    }
    snprintf(t->id, sizeof t->id, "%s", qr_llama_proc_name(p));
    snprintf(t->base_url, sizeof t->base_url, "%s", qr_llama_proc_base_url(p));
    snprintf(t->key, sizeof t->key, "%s", qr_llama_proc_api_key(p));
    start_calls(t);
    return QR_OK;
}

static void serve(struct qr_http_req *req, enum qr_err err, void *arg, enum tok_kind kind)
{
    struct qr_app *app = arg;
    if (!qr_api_body_ok(req, err))
        return;
    struct tok *t = calloc(1, sizeof *t);
    if (!t) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    t->app = app;
    t->req = req;
    t->kind = kind;
    t->bos_id = t->eos_id = -1;
    struct qr_slice body = qr_http_req_body(req);
    t->in = yyjson_read(body.ptr ? body.ptr : "", body.len, 0);
    t->root = yyjson_doc_get_root(t->in);
    char why[128];
    if (!yyjson_is_obj(t->root)) {
        bad(req, "the body must be a JSON object");
        tok_free(t);
        return;
    }
    if (!qr_json_strict_ok(t->root, why, sizeof why)) {
        bad(req, "%s", why);
        tok_free(t);
        return;
    }
    if (!(kind == TOK_TOKENIZE ? parse_tokenize(req, t) : parse_detokenize(req, t))) {
        tok_free(t);
        return;
    }
    struct qr_backend *b = serving_backend(app, t->name);
    if (!b || b != app->managed || !app->llama) {
        char msg[800];
        snprintf(msg, sizeof msg,
                 "model '%s' is served by backend '%s', which has no tokenizer endpoint "
                 "(only llama.cpp exposes the model's tokenizer)",
                 t->name, b ? qr_backend_id(b) : "none");
        qr_api_send_error(req, 501, "tokenizer_unavailable", msg);
        tok_free(t);
        return;
    }
    t->r.protocol = QR_PROTO_OPENAI;
    t->r.op = QR_OP_CHAT;
    t->r.model = (struct qr_slice){t->name, strlen(t->name)};
    struct qr_api_error e = {0};
    if (qr_llamacpp_load(app->managed, &t->r, on_load, t, &t->job, &e)) {
        qr_api_send_error(req, e.status ? e.status : 500, e.code[0] ? e.code : "engine_error",
                          e.message);
        tok_free(t);
        return;
    }
    /* DONE comes from the loop, also for a model already loaded: t lives until then */
    t->step = STEP_LOAD;
    qr_http_req_set_close_cb(req, client_gone, t);
}

static void tokenize_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    serve(req, err, arg, TOK_TOKENIZE);
}

static void detokenize_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    serve(req, err, arg, TOK_DETOKENIZE);
}

static size_t body_cap(const struct qr_app *app)
{
    return app->cfg->max_request_bytes < TOK_BODY_MAX ? (size_t) app->cfg->max_request_bytes
                                                      : TOK_BODY_MAX;
}

void qr_api_tokenize(struct qr_app *app, struct qr_http_req *req)
{
    qr_http_req_read_body(req, body_cap(app), tokenize_body, app);
}

void qr_api_detokenize(struct qr_app *app, struct qr_http_req *req)
{
    qr_http_req_read_body(req, body_cap(app), detokenize_body, app);
}
