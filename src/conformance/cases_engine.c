/* The conformance cases that reach past chat completions (cases_engine.h): the tokenizer round
 * trip and BOS/system-role handling through the daemon's /v1/tokenize and /v1/detokenize,
 * cancellation during decode and prefill (a streamed request cut with libcurl's write and progress
 * callbacks, then the slot shown free in GET /v1/loaded and by the next request), and the
 * destructive crash case (the engine pid from GET /v1/loaded killed with SIGKILL; the crash must be
 * reported clearly, counted in /v1/loaded and /v1/backends, and the next request served after the
 * restart). Checks are on the contract, never on one model's text. */
#include "conformance/cases_engine.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#define FAIL(...)       (snprintf(reason, cap, __VA_ARGS__), QR_CONF_FAIL)
#define PREFILL_CTX_MAX 262144 /* a longer slot would need a prompt too big to send */

/* ---- native helpers: /v1/tokenize, /v1/loaded, /v1/backends ---- */

/* The daemon has no tokenizer for the model: 404 (no such route) or 501 (not this backend). */
static bool no_tokenizer(struct qr_conf_resp *r, char *reason, size_t cap)
{
    if (r->status != 404 && r->status != 501)
        return false;
    char msg[200];
    if (!qr_conf_openai_error(r, msg, sizeof msg))
        snprintf(msg, sizeof msg, "%.120s", r->body);
    snprintf(reason, cap, "the daemon has no tokenizer endpoint for the model (%ld: %s)", r->status,
             msg);
    return true;
}

/* The model's row of GET /v1/loaded (doc in *out, free it), or NULL: matched by the name asked
 * for, the X-Quantum-Model seen, or the only row. */
yyjson_val *qr_conf_loaded_row(const struct qr_conf_ctx *c, yyjson_doc **out)
{
    struct qr_conf_resp r;
    qr_conf_http(c, "GET", "/v1/loaded", NULL, &r);
    *out = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    qr_conf_resp_cleanup(&r);
    yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(*out), "models");
    size_t i, max;
    yyjson_val *row;
    yyjson_arr_foreach(arr, i, max, row)
    {
        yyjson_val *m = yyjson_obj_get(row, "model");
        if (yyjson_equals_str(m, c->model) ||
            (c->model_header && yyjson_equals_str(m, c->model_header)))
            return row;
    }
    return yyjson_arr_size(arr) == 1 ? yyjson_arr_get_first(arr) : NULL;
}

/* A chat_template_caps flag of the engine evidence in the model's /v1/loaded row: 1 true, 0
 * false, -1 not reported. */
int qr_conf_engine_cap(const struct qr_conf_ctx *c, const char *flag)
{
    yyjson_doc *d = NULL;
    yyjson_val *row = qr_conf_loaded_row(c, &d);
    yyjson_val *v = yyjson_obj_get(yyjson_ptr_get(row, "/engine/chat_template_caps"), flag);
    int out = yyjson_is_bool(v) ? yyjson_get_bool(v) : -1;
    yyjson_doc_free(d);
    return out;
}

/* ---- tokenizer ---- */

/* umlauts, ß, capital ẞ (3 bytes), an emoji and a musical symbol (4 bytes each) */
static const char ROUNDTRIP[] = "Grüß Gott! Äpfel, Öl, Übermaß, Straße, GROẞ \xF0\x9F\x98\x80 "
                                "\xF0\x9D\x84\x9E Ende.";

enum qr_conf_status qr_conf_case_tok_roundtrip(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_post(c, &r, "/v1/tokenize", "\"content\":\"%s\"", ROUNDTRIP);
    if (no_tokenizer(&r, reason, cap)) {
        qr_conf_resp_cleanup(&r);
        return QR_CONF_SKIP;
    }
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    yyjson_val *toks = yyjson_obj_get(yyjson_doc_get_root(d), "tokens");
    yyjson_val *count = yyjson_obj_get(yyjson_doc_get_root(d), "count");
    char *ids = yyjson_is_arr(toks) ? yyjson_val_write(toks, 0, NULL) : NULL;
    if (r.status != 200)
        st = FAIL("/v1/tokenize answered %ld: %.140s", r.status, r.error[0] ? r.error : r.body);
    else if (!ids || !yyjson_arr_size(toks))
        st = FAIL("/v1/tokenize gave no tokens: %.120s", r.body);
    else if (yyjson_get_uint(count) != yyjson_arr_size(toks))
        st = FAIL("/v1/tokenize count %llu differs from %zu tokens",
                  (unsigned long long) yyjson_get_uint(count), yyjson_arr_size(toks));
    size_t n = yyjson_arr_size(toks);
    qr_conf_resp_cleanup(&r);
    if (st == QR_CONF_PASS) {
        qr_conf_post(c, &r, "/v1/detokenize", "\"tokens\":%s", ids);
        yyjson_doc *dd = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
        yyjson_val *content = yyjson_obj_get(yyjson_doc_get_root(dd), "content");
        if (r.status != 200)
            st = FAIL("/v1/detokenize answered %ld: %.140s", r.status,
                      r.error[0] ? r.error : r.body);
        else if (!yyjson_is_str(content))
            st = FAIL("/v1/detokenize gave no content: %.120s", r.body);
        else if (yyjson_get_len(content) != sizeof ROUNDTRIP - 1 ||
                 memcmp(yyjson_get_str(content), ROUNDTRIP, sizeof ROUNDTRIP - 1))
            st = FAIL("round trip changed the text: %zu bytes in, %zu out: '%.100s'",
                      sizeof ROUNDTRIP - 1, yyjson_get_len(content), yyjson_get_str(content));
        else
            snprintf(reason, cap, "%zu bytes -> %zu tokens -> the same %zu bytes",
                     sizeof ROUNDTRIP - 1, n, sizeof ROUNDTRIP - 1);
        yyjson_doc_free(dd);
        qr_conf_resp_cleanup(&r);
    }
    free(ids);
    yyjson_doc_free(d);
    return st;
}

#define SYSTEM_MARK "Antworte knapp, Kennung QR-SYS-7."

enum qr_conf_status qr_conf_case_tok_bos(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_post(c, &r, "/v1/tokenize",
                 "\"messages\":[{\"role\":\"system\",\"content\":\"" SYSTEM_MARK "\"},{\"role\":"
                 "\"user\",\"content\":\"Hallo!\"}]");
    if (no_tokenizer(&r, reason, cap)) {
        qr_conf_resp_cleanup(&r);
        return QR_CONF_SKIP;
    }
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    yyjson_val *root = yyjson_doc_get_root(d);
    yyjson_val *toks = yyjson_obj_get(root, "tokens");
    const char *prompt = yyjson_get_str(yyjson_obj_get(root, "prompt"));
    yyjson_val *bos = yyjson_obj_get(root, "bos_token_id");
    size_t lead = 0;
    while (yyjson_is_int(bos) && lead < yyjson_arr_size(toks) &&
           yyjson_get_sint(yyjson_arr_get(toks, lead)) == yyjson_get_sint(bos))
        lead++;
    if (r.status != 200)
        st = FAIL("/v1/tokenize (messages) answered %ld: %.140s", r.status,
                  r.error[0] ? r.error : r.body);
    else if (!prompt || !yyjson_arr_size(toks))
        st = FAIL("/v1/tokenize (messages) gave no prompt or no tokens: %.120s", r.body);
    else if (lead > 1)
        st = FAIL("the chat prompt the engine receives starts with %zu BOS tokens (id %lld)", lead,
                  (long long) yyjson_get_sint(bos));
    qr_conf_resp_cleanup(&r);
    if (st == QR_CONF_PASS) {
        char bos_note[80];
        if (yyjson_is_int(bos))
            snprintf(bos_note, sizeof bos_note, "%zu BOS (id %lld) at the start", lead,
                     (long long) yyjson_get_sint(bos));
        else
            snprintf(bos_note, sizeof bos_note, "the engine names no BOS token");
        if (strstr(prompt, SYSTEM_MARK))
            snprintf(reason, cap, "%zu tokens, %s; the system prompt is in the rendered prompt",
                     yyjson_arr_size(toks), bos_note);
        else if (qr_conf_engine_cap(c, "supports_system_role") == 0)
            snprintf(reason, cap,
                     "%zu tokens, %s; no system role, reported by the engine evidence "
                     "(supports_system_role false)",
                     yyjson_arr_size(toks), bos_note);
        else
            st = FAIL("the system prompt is missing from the rendered prompt and the daemon does "
                      "not report supports_system_role false: %.80s",
                      prompt);
    }
    yyjson_doc_free(d);
    return st;
}

/* ---- cancellation ---- */

struct cut {
    unsigned content_chunks; /* data: lines with non-empty content seen */
    unsigned want_chunks;    /* decode: close after this many; 0: prefill */
    double upload_done_ms;   /* prefill: when the body was sent (0 before) */
    size_t bytes;            /* body bytes received */
    bool cut;                /* we closed the connection */
    long status;             /* the answer's status when it came to an end by itself */
    char line[512];
    size_t line_len;
};

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static size_t cut_write(char *p, size_t size, size_t n, void *ud)
{
    struct cut *k = ud;
    size_t len = size * n;
    k->bytes += len;
    if (!k->want_chunks) { /* prefill: nothing may arrive before we close */
        k->cut = true;
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (p[i] != '\n') {
            if (k->line_len + 1 < sizeof k->line)
                k->line[k->line_len++] = p[i];
            continue;
        }
        k->line[k->line_len] = '\0';
        const char *v = strstr(k->line, "\"content\":\"");
        if (!strncmp(k->line, "data:", 5) && v && v[11] != '"')
            k->content_chunks++;
        k->line_len = 0;
    }
    if (k->content_chunks >= k->want_chunks) {
        k->cut = true;
        return 0;
    }
    return len;
}

static int cut_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                        curl_off_t ulnow)
{
    (void) dltotal, (void) dlnow;
    struct cut *k = ud;
    if (k->want_chunks || ultotal <= 0 || ulnow < ultotal)
        return 0;
    if (k->upload_done_ms == 0)
        k->upload_done_ms = mono_ms();
    /* the daemon has the body and handed it to the engine: close mid-prefill */
    if (mono_ms() - k->upload_done_ms >= 100) {
        k->cut = true;
        return 1;
    }
    return 0;
}

/* POST a streamed chat body and close the connection as k says. Returns the curl result. */
static CURLcode post_and_cut(const struct qr_conf_ctx *c, const char *body, struct cut *k)
{
    char url[1024];
    size_t ul = strlen(c->url);
    while (ul && c->url[ul - 1] == '/')
        ul--;
    snprintf(url, sizeof url, "%.*s/v1/chat/completions", (int) ul, c->url);
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !hdr)
        abort();
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen(body));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cut_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, k);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, cut_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms > 0 ? c->timeout_ms : 120000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
    CURLcode rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &k->status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h); /* the connection closes here */
    return rc;
}

#define FREE_WITHIN_MS   10000 /* the daemon drops the cut request's slot within this */
#define FOLLOW_WITHIN_MS 30000 /* a small request after the cut is answered within this */

/* After a cut: the model's /v1/loaded row (when the daemon has one) shows nothing in flight
 * within FREE_WITHIN_MS, and a small request is answered 200 within FOLLOW_WITHIN_MS (one stuck
 * slot would hold it). what names the cut in reasons. */
static enum qr_conf_status slot_freed(struct qr_conf_ctx *c, const char *what, char *reason,
                                      size_t cap)
{
    double t0 = mono_ms(), freed_ms = -1;
    bool have_row = false;
    for (;;) {
        yyjson_doc *d = NULL;
        yyjson_val *row = qr_conf_loaded_row(c, &d);
        yyjson_val *inf = yyjson_obj_get(row, "in_flight"), *q = yyjson_obj_get(row, "queued");
        have_row = yyjson_is_uint(inf);
        bool idle = have_row && !yyjson_get_uint(inf) && !yyjson_get_uint(q);
        yyjson_doc_free(d);
        if (!have_row || idle) {
            freed_ms = have_row ? mono_ms() - t0 : -1;
            break;
        }
        if (mono_ms() - t0 > FREE_WITHIN_MS)
            return FAIL("%s: GET /v1/loaded still shows a request in flight after %d ms", what,
                        FREE_WITHIN_MS);
        usleep(50000);
    }
    struct qr_conf_resp r;
    struct qr_conf_ctx bounded = *c;
    bounded.timeout_ms = FOLLOW_WITHIN_MS;
    double t1 = mono_ms();
    qr_conf_chat(
        &bounded, &r,
        "%s\"max_tokens\":8,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"Say hello.\"}]",
        qr_conf_think(c, false));
    double follow_ms = mono_ms() - t1;
    enum qr_conf_status st = QR_CONF_PASS;
    if (r.status != 200)
        st = FAIL("%s: the next small request was not answered within %d ms (%ld: %.100s)", what,
                  FOLLOW_WITHIN_MS, r.status, r.error[0] ? r.error : r.body);
    else if (have_row)
        snprintf(reason, cap,
                 "%s: no request in flight after %.0f ms; next request answered in "
                 "%.0f ms",
                 what, freed_ms, follow_ms);
    else
        snprintf(reason, cap, "%s: next request answered in %.0f ms (no slot state exposed)", what,
                 follow_ms);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* One slot's context: the engine's figure from /v1/loaded, else the model's context_length. */
static int64_t slot_context(const struct qr_conf_ctx *c)
{
    yyjson_doc *d = NULL;
    yyjson_val *row = qr_conf_loaded_row(c, &d);
    int64_t n = yyjson_get_sint(yyjson_ptr_get(row, "/engine/n_ctx_slot"));
    if (n <= 0)
        n = yyjson_get_sint(yyjson_obj_get(row, "ctx_per_slot"));
    yyjson_doc_free(d);
    return n > 0 ? n : c->context_length;
}

enum qr_conf_status qr_conf_case_cancel_decode(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    /* half a slot: far more than the chunks read, and admitted by any engine */
    int64_t ctx = slot_context(c);
    long max_tokens = ctx > 128 ? (long) (ctx / 2) : 2048;
    char *m = qr_conf_model_json(c), *body = NULL;
    if (asprintf(&body,
                 "{\"model\":%s,%s\"stream\":true,\"max_tokens\":%ld,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"Zähle ohne Ende. [[long]]\"}]}",
                 m, qr_conf_think(c, false), max_tokens) < 0)
        abort();
    struct cut k = {.want_chunks = 4};
    CURLcode rc = post_and_cut(c, body, &k);
    free(body);
    free(m);
    if (!k.cut && k.status != 200)
        return FAIL("the streamed request failed: status %ld, %s", k.status,
                    curl_easy_strerror(rc));
    if (!k.cut) {
        snprintf(reason, cap,
                 "the stream ended on its own after %u content chunks: nothing left to cancel",
                 k.content_chunks);
        return QR_CONF_SKIP;
    }
    char what[64];
    snprintf(what, sizeof what, "closed after %u content chunks", k.content_chunks);
    return slot_freed(c, what, reason, cap);
}

/* Tokens per "word " as the model's tokenizer counts them (2 when it cannot be asked). */
static double tokens_per_word(const struct qr_conf_ctx *c)
{
    char *text = qr_conf_words(64);
    struct qr_conf_resp r;
    qr_conf_post(c, &r, "/v1/tokenize", "\"content\":\"%s\"", text);
    free(text);
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    uint64_t n = yyjson_get_uint(yyjson_obj_get(yyjson_doc_get_root(d), "count"));
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return n ? (double) n / 64.0 : 2.0;
}

/* ---- the context limit, reached ---- */

/* The prompt tokens of a one-message chat of `words` words, as the engine receives it (POST
 * /v1/tokenize with messages): > 0, or 0 when the daemon could not say (r_status set). */
static uint64_t chat_tokens(const struct qr_conf_ctx *c, size_t words, long *r_status, char **body)
{
    char *text = qr_conf_words(words);
    struct qr_conf_resp r;
    qr_conf_post(c, &r, "/v1/tokenize", "\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]",
                 text);
    free(text);
    *r_status = r.status;
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    uint64_t n = yyjson_get_uint(yyjson_obj_get(yyjson_doc_get_root(d), "count"));
    yyjson_doc_free(d);
    if (body && r.status != 200) {
        *body = r.body;
        r.body = NULL;
    }
    qr_conf_resp_cleanup(&r);
    return n;
}

/* A prompt that fills one slot up to 16 tokens (measured with the model's own tokenizer, chat
 * template included) is admitted and answered: prefill at the limit works. The case past the
 * limit is context_limit (cases.c). */
enum qr_conf_status qr_conf_case_context_at_limit(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    int64_t ctx = slot_context(c);
    if (ctx <= 0) {
        snprintf(reason, cap, "the daemon reports no context size for the model");
        return QR_CONF_SKIP;
    }
    if (ctx > PREFILL_CTX_MAX) {
        snprintf(reason, cap, "a slot of %lld tokens is above the %d this case fills",
                 (long long) ctx, PREFILL_CTX_MAX);
        return QR_CONF_SKIP;
    }
    uint64_t target = (uint64_t) ctx - 16;
    long status = 0;
    char *err = NULL;
    size_t words = 16;
    uint64_t n = chat_tokens(c, words, &status, &err);
    if (!n) {
        struct qr_conf_resp r = {.status = status, .body = err ? err : strdup("")};
        r.len = strlen(r.body);
        bool none = no_tokenizer(&r, reason, cap);
        qr_conf_resp_cleanup(&r);
        if (none)
            return QR_CONF_SKIP;
        return FAIL("/v1/tokenize (messages) answered %ld", status);
    }
    /* each "word " adds about tokens_per_word tokens: aim, then step down until it fits */
    double tpw = tokens_per_word(c);
    for (int round = 0; round < 6 && (n > target || target - n > 8); round++) {
        long delta = (long) (((double) target - (double) n) / tpw);
        if (n > target && delta >= 0)
            delta = -1;
        if (delta == 0)
            break;
        words = (long) words + delta > 1 ? (size_t) ((long) words + delta) : 1;
        if (!(n = chat_tokens(c, words, &status, NULL)))
            return FAIL("/v1/tokenize (messages) answered %ld", status);
    }
    if (n > target)
        return FAIL("could not size a prompt under %llu tokens (%llu with %zu words)",
                    (unsigned long long) target, (unsigned long long) n, words);
    char *text = qr_conf_words(words);
    struct qr_conf_resp r;
    qr_conf_chat(c, &r, "\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]",
                 text);
    free(text);
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    yyjson_val *root = yyjson_doc_get_root(d);
    const char *fin = yyjson_get_str(yyjson_ptr_get(root, "/choices/0/finish_reason"));
    yyjson_val *pt = yyjson_ptr_get(root, "/usage/prompt_tokens");
    if (r.status != 200)
        st = FAIL("a prompt of %llu tokens in a %lld-token slot was refused with %ld: %.120s",
                  (unsigned long long) n, (long long) ctx, r.status, r.error[0] ? r.error : r.body);
    else if (!fin || (strcmp(fin, "stop") && strcmp(fin, "length")))
        st = FAIL("a prompt at the limit ended with finish_reason %s", fin ? fin : "(none)");
    else if (yyjson_is_uint(pt) && yyjson_get_uint(pt) != n)
        st = FAIL("usage.prompt_tokens %llu, but /v1/tokenize counted %llu for the same chat",
                  (unsigned long long) yyjson_get_uint(pt), (unsigned long long) n);
    else
        snprintf(reason, cap, "%llu prompt tokens in a %lld-token slot answered (%s)%s",
                 (unsigned long long) n, (long long) ctx, fin,
                 yyjson_is_uint(pt) ? "; usage.prompt_tokens equals /v1/tokenize" : "");
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

enum qr_conf_status qr_conf_case_cancel_prefill(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    int64_t ctx = slot_context(c);
    if (ctx <= 0) {
        snprintf(reason, cap, "the daemon reports no context size for the model");
        return QR_CONF_SKIP;
    }
    if (ctx > PREFILL_CTX_MAX)
        ctx = PREFILL_CTX_MAX;
    /* about three quarters of one slot: the longest prefill that is still admitted */
    size_t words = (size_t) ((double) ctx * 0.75 / tokens_per_word(c));
    if (words < 16)
        words = 16;
    char *text = qr_conf_words(words), *m = qr_conf_model_json(c), *body = NULL;
    if (asprintf(&body,
                 "{\"model\":%s,%s\"stream\":true,\"max_tokens\":16,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"%s\"}]}",
                 m, qr_conf_think(c, false), text) < 0)
        abort();
    free(text);
    free(m);
    struct cut k = {.want_chunks = 0};
    CURLcode rc = post_and_cut(c, body, &k);
    free(body);
    if (!k.cut)
        return FAIL("the request of %zu words ended before it could be cut (status %ld, %s)", words,
                    k.status, curl_easy_strerror(rc));
    if (k.status >= 400) { /* answered before any prefill: nothing was cancelled */
        snprintf(reason, cap, "a prompt of %zu words for a slot of %lld was refused with %ld",
                 words, (long long) ctx, k.status);
        return QR_CONF_SKIP;
    }
    char what[96];
    snprintf(what, sizeof what, "%zu-word prompt (slot %lld) closed %s", words, (long long) ctx,
             k.bytes ? "at the first answer byte" : "100 ms after the body was sent");
    return slot_freed(c, what, reason, cap);
}

/* ---- crash and restart ---- */

/* The serving backend's crashes.total of GET /v1/backends; -1 when not reported. */
static int64_t crash_total(const struct qr_conf_ctx *c)
{
    struct qr_conf_resp r;
    qr_conf_http(c, "GET", "/v1/backends", NULL, &r);
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    qr_conf_resp_cleanup(&r);
    int64_t total = -1;
    size_t i, max;
    yyjson_val *b;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "backends"), i, max, b)
    {
        yyjson_val *t = yyjson_ptr_get(b, "/crashes/total");
        bool mine = c->backend[0] ? (yyjson_equals_str(yyjson_obj_get(b, "id"), c->backend) ||
                                     yyjson_equals_str(yyjson_obj_get(b, "kind"), c->backend))
                                  : yyjson_is_int(t);
        if (mine && yyjson_is_int(t)) {
            total = yyjson_get_sint(t);
            break;
        }
    }
    yyjson_doc_free(d);
    return total;
}

/* Is pid a llama-server process on this machine (a word of its command line names it; the engine
 * may run under a loader)? Never kill what is not the daemon's engine. */
static bool is_local_engine(pid_t pid)
{
    char path[64], cmd[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int) pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(cmd + i) + 1) {
        const char *base = strrchr(cmd + i, '/');
        if (!strcmp(base ? base + 1 : cmd + i, "llama-server"))
            return true;
    }
    return false;
}

static enum qr_conf_status small_request(struct qr_conf_ctx *c, struct qr_conf_resp *r)
{
    qr_conf_chat(
        c, r,
        "%s\"max_tokens\":8,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"Say hello.\"}]",
        qr_conf_think(c, false));
    return r->status == 200 ? QR_CONF_PASS : QR_CONF_FAIL;
}

/* The error code of a native or OpenAI error body, into out. */
static void error_code(const struct qr_conf_resp *r, char *out, size_t cap)
{
    yyjson_doc *d = yyjson_read(r->body, r->len, 0);
    yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(d), "error");
    const char *code = yyjson_get_str(yyjson_obj_get(e, "code"));
    if (!code)
        code = yyjson_get_str(yyjson_obj_get(e, "type"));
    snprintf(out, cap, "%s", code ? code : "");
    yyjson_doc_free(d);
}

#define RESTART_WITHIN_MS 60000

enum qr_conf_status qr_conf_case_crash_restart(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    if (!c->destructive) {
        snprintf(reason, cap,
                 "destructive case; run with a daemon the suite started or --allow-destructive");
        return QR_CONF_SKIP;
    }
    struct qr_conf_resp r;
    enum qr_conf_status st = small_request(c, &r);
    if (st != QR_CONF_PASS) {
        st = FAIL("the model does not answer before the crash (%ld: %.100s)", r.status,
                  r.error[0] ? r.error : r.body);
        qr_conf_resp_cleanup(&r);
        return st;
    }
    qr_conf_resp_cleanup(&r);
    yyjson_doc *d = NULL;
    yyjson_val *row = qr_conf_loaded_row(c, &d);
    pid_t pid = (pid_t) yyjson_get_sint(yyjson_obj_get(row, "pid"));
    int64_t crashes0 = yyjson_get_sint(yyjson_obj_get(row, "crashes"));
    yyjson_doc_free(d);
    if (pid <= 0) {
        snprintf(reason, cap, "the daemon exposes no engine pid for the model (GET /v1/loaded)");
        return QR_CONF_SKIP;
    }
    if (!is_local_engine(pid)) {
        snprintf(reason, cap, "pid %d is not a llama-server process on this machine", (int) pid);
        return QR_CONF_SKIP;
    }
    int64_t total0 = crash_total(c);
    if (kill(pid, SIGKILL) != 0)
        return FAIL("cannot kill the engine (pid %d): %s", (int) pid, strerror(errno));
    /* served after the restart; on the way only a clear crash code is acceptable */
    double t0 = mono_ms(), served_ms = -1;
    char seen[64] = "";
    while (mono_ms() - t0 < RESTART_WITHIN_MS) {
        if (small_request(c, &r) == QR_CONF_PASS) {
            served_ms = mono_ms() - t0;
            qr_conf_resp_cleanup(&r);
            break;
        }
        char code[64];
        error_code(&r, code, sizeof code);
        if (strcmp(code, "engine_crashed") && strcmp(code, "model_loading") &&
            strcmp(code, "backend_unavailable")) {
            st = FAIL("after the kill a request got %ld '%s' (not engine_crashed): %.100s",
                      r.status, code, r.error[0] ? r.error : r.body);
            qr_conf_resp_cleanup(&r);
            return st;
        }
        snprintf(seen, sizeof seen, "%s", code);
        qr_conf_resp_cleanup(&r);
        usleep(200000);
    }
    if (served_ms < 0)
        return FAIL("no request was served within %d ms of killing the engine (pid %d)",
                    RESTART_WITHIN_MS, (int) pid);
    row = qr_conf_loaded_row(c, &d);
    pid_t pid2 = (pid_t) yyjson_get_sint(yyjson_obj_get(row, "pid"));
    int64_t crashes1 = yyjson_get_sint(yyjson_obj_get(row, "crashes"));
    yyjson_doc_free(d);
    if (pid2 == pid || pid2 <= 0)
        return FAIL("GET /v1/loaded still names pid %d after the restart", (int) pid2);
    if (row && crashes1 < crashes0 + 1)
        return FAIL("GET /v1/loaded counts %lld crashes, %lld before the kill",
                    (long long) crashes1, (long long) crashes0);
    int64_t total1 = crash_total(c);
    for (int i = 0; total0 >= 0 && total1 < total0 + 1 && i < 50; i++) {
        usleep(100000); /* the crash record is written as the crash is reported */
        total1 = crash_total(c);
    }
    if (total0 < 0)
        return FAIL("GET /v1/backends reports no crash count (crashes.total) for the backend");
    if (total1 < total0 + 1)
        return FAIL("GET /v1/backends crashes.total is %lld, %lld before the kill",
                    (long long) total1, (long long) total0);
    snprintf(reason, cap,
             "killed pid %d; served again after %.0f ms by pid %d%s%s; crashes.total %lld -> %lld",
             (int) pid, served_ms, (int) pid2, seen[0] ? ", on the way: " : "", seen,
             (long long) total0, (long long) total1);
    return QR_CONF_PASS;
}
