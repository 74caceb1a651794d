/* The A/B benchmark against the configured Ollama (`quantum-runtime bench --backend ollama`): the
 * same arms and report as the llama.cpp runs (ab.c), measured from Ollama's own answer. Native
 * sends no num_ctx (Ollama's context for the model); override sends options.num_ctx (Ollama then
 * reloads the model at that size, which the load time shows). Prefill and decode tokens/s come
 * from prompt_eval_count/prompt_eval_duration and eval_count/eval_duration, TTFT from
 * load_duration + prompt_eval_duration; the model's memory and context from GET /api/ps (`size`,
 * `context_length` where the daemon reports it). The KV footprint is not reported by Ollama.
 * Blocking libcurl exchanges, bounded; a CLI path, never on the daemon's event loop. */
#include <curl/curl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "bench/ab.h"
#include "core/buf.h"

#define OL_TIMEOUT_MS 600000L /* one measured request: a big model's load plus its answer */
#define OL_MAX_BODY   (4u << 20)

static size_t sink(char *p, size_t sz, size_t n, void *arg)
{
    struct qr_buf *b = arg;
    return qr_buf_append(b, p, sz * n) == QR_OK ? sz * n : 0;
}

/* One JSON exchange with the Ollama at url; *out parsed on a 2xx answer. */
static enum qr_err ol_call(const char *url, const char *path, const char *body, long timeout_ms,
                           yyjson_doc **out, struct qr_diag *diag)
{
    *out = NULL;
    char full[2048];
    size_t ulen = strlen(url);
    while (ulen && url[ulen - 1] == '/')
        ulen--;
    snprintf(full, sizeof full, "%.*s%s", (int) (ulen < 1500 ? ulen : 1500), url, path);
    CURL *c = curl_easy_init();
    if (!c)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot create a curl handle");
    struct qr_buf b;
    qr_buf_init(&b, OL_MAX_BODY);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, full);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    enum qr_err err = QR_OK;
    if (rc != CURLE_OK)
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "%s: %s", path, curl_easy_strerror(rc));
    else if (status < 200 || status > 299)
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "%s: status %ld: %.120s", path, status,
                          b.ptr ? b.ptr : "");
    else if (!(*out = yyjson_read(b.ptr ? b.ptr : "", b.len, 0)))
        err = qr_diag_set(diag, QR_ERR_PARSE, "%s: the answer is not JSON", path);
    qr_buf_cleanup(&b);
    return err;
}

static double num(yyjson_val *o, const char *k)
{
    yyjson_val *v = yyjson_obj_get(o, k);
    return yyjson_is_num(v) ? yyjson_get_num(v) : NAN;
}

enum qr_err qr_bench_ollama_version(const char *url, char *out, size_t cap, struct qr_diag *diag)
{
    yyjson_doc *doc;
    enum qr_err err = ol_call(url, "/api/version", NULL, 10000, &doc, diag);
    if (err)
        return err;
    const char *v = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(doc), "version"));
    snprintf(out, cap, "%s", v && v[0] ? v : "unknown");
    yyjson_doc_free(doc);
    return QR_OK;
}

enum qr_err qr_bench_ollama_measure(const char *url, const char *model,
                                    const struct qr_bench_arm *arm, const char *system,
                                    const char *prompt, uint32_t gen_tokens, int think,
                                    struct qr_bench_sample *s, struct qr_diag *diag)
{
    memset(s, 0, sizeof *s);
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(d), *opt = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "model", model);
    if (system)
        yyjson_mut_obj_add_str(d, root, "system", system);
    yyjson_mut_obj_add_str(d, root, "prompt", prompt);
    yyjson_mut_obj_add_bool(d, root, "stream", false);
    if (think >= 0)
        yyjson_mut_obj_add_bool(d, root, "think", think != 0);
    yyjson_mut_obj_add_uint(d, opt, "num_predict", gen_tokens);
    yyjson_mut_obj_add_real(d, opt, "temperature", 0.0);
    yyjson_mut_obj_add_int(d, opt, "seed", 1);
    for (size_t i = 0; arm->override && i < arm->n_knobs; i++) {
        if (!strcmp(arm->knobs[i].key, "ctx"))
            yyjson_mut_obj_add_uint(d, opt, "num_ctx", strtoull(arm->knobs[i].value, NULL, 10));
        else if (!strcmp(arm->knobs[i].key, "batch"))
            yyjson_mut_obj_add_uint(d, opt, "num_batch", strtoull(arm->knobs[i].value, NULL, 10));
        else if (!strcmp(arm->knobs[i].key, "threads"))
            yyjson_mut_obj_add_uint(d, opt, "num_thread", strtoull(arm->knobs[i].value, NULL, 10));
        else {
            yyjson_mut_doc_free(d);
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "knob '%s' has no Ollama option (ctx, batch, threads)",
                               arm->knobs[i].key);
        }
    }
    yyjson_mut_obj_add_val(d, root, "options", opt);
    char *body = yyjson_mut_write(d, 0, NULL);
    yyjson_mut_doc_free(d);
    if (!body)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    yyjson_doc *ans;
    enum qr_err err = ol_call(url, "/api/generate", body, OL_TIMEOUT_MS, &ans, diag);
    free(body);
    if (err)
        return err;
    yyjson_val *a = yyjson_doc_get_root(ans);
    double pc = num(a, "prompt_eval_count"), pd = num(a, "prompt_eval_duration");
    double ec = num(a, "eval_count"), ed = num(a, "eval_duration"), ld = num(a, "load_duration");
    double td = num(a, "total_duration");
    s->prompt_tokens = isfinite(pc) ? (uint32_t) pc : 0;
    s->gen_tokens = isfinite(ec) ? (uint32_t) ec : 0;
    s->prefill_tps = pc > 0 && pd > 0 ? pc / (pd / 1e9) : NAN;
    s->decode_tps = ec > 0 && ed > 0 ? ec / (ed / 1e9) : NAN;
    s->ttft_ms = (isfinite(ld) ? ld : 0) / 1e6 + (isfinite(pd) ? pd : NAN) / 1e6;
    s->wall_ms = isfinite(td) ? td / 1e6 : NAN;
    s->load_ms = isfinite(ld) ? (int64_t) (ld / 1e6) : -1;
    yyjson_doc_free(ans);
    if (!isfinite(s->decode_tps))
        return qr_diag_set(diag, QR_ERR_UPSTREAM,
                           "/api/generate: no eval_count/eval_duration in the answer");
    /* the loaded model's memory and context as the daemon reports them */
    yyjson_doc *ps;
    if (ol_call(url, "/api/ps", NULL, 10000, &ps, diag) == QR_OK) {
        yyjson_val *m, *list = yyjson_obj_get(yyjson_doc_get_root(ps), "models");
        size_t i, max;
        yyjson_arr_foreach(list, i, max, m)
        {
            const char *name = yyjson_get_str(yyjson_obj_get(m, "name"));
            const char *mod = yyjson_get_str(yyjson_obj_get(m, "model"));
            if ((name && !strcmp(name, model)) || (mod && !strcmp(mod, model))) {
                double size = num(m, "size"), ctx = num(m, "context_length");
                s->rss_bytes = s->hwm_bytes = size > 0 ? (uint64_t) size : 0;
                s->n_ctx = ctx > 0 ? (uint64_t) ctx : 0;
                break;
            }
        }
        yyjson_doc_free(ps);
    }
    diag->msg[0] = '\0';
    s->ok = true;
    return QR_OK;
}
