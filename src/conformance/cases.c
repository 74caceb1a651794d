/* The conformance cases (cases.h) and their table: each one sends real requests to the daemon's
 * OpenAI route /v1/chat/completions and checks the answer against the contract, never against one
 * model's text: identity, UTF-8 round trip, reasoning framing, streamed vs whole content, tool
 * calls and their ids, parallel calls and tool results, JSON-schema output, the context limit and
 * multimodal negotiation. The tokenizer, cancellation and crash cases live in cases_engine.c, the
 * model metadata cases in cases_model.c; both are rows of the table here. Prompts carry the
 * scripted test model's magic words ([[json]], [[parallel]]) as plain text, which any other model
 * just reads. */
#include "conformance/cases.h"
#include "conformance/cases_engine.h"
#include "conformance/cases_model.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#define FAIL(...) (snprintf(reason, cap, __VA_ARGS__), QR_CONF_FAIL)

/* ---- request helpers ---- */

/* The model name as a JSON string literal (malloc'd). */
char *qr_conf_model_json(const struct qr_conf_ctx *c)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *v = d ? yyjson_mut_strcpy(d, c->model) : NULL;
    char *s = v ? yyjson_mut_val_write(v, 0, NULL) : NULL;
    yyjson_mut_doc_free(d);
    if (!s)
        abort();
    return s;
}

char *qr_conf_words(size_t n)
{
    char *text = malloc(n * 5 + 1);
    if (!text)
        abort();
    for (size_t i = 0; i < n; i++)
        memcpy(text + i * 5, "word ", 5);
    text[n * 5] = '\0';
    return text;
}

/* The reasoning switch: "none" off, "medium" on; nothing when reasoning.control is not claimed. */
const char *qr_conf_think(const struct qr_conf_ctx *c, bool on)
{
    if (!qr_conf_claims(c, "reasoning.control"))
        return "";
    return on ? "\"reasoning_effort\":\"medium\"," : "\"reasoning_effort\":\"none\",";
}

static void __attribute__((format(printf, 4, 0)))
vpost(const struct qr_conf_ctx *c, struct qr_conf_resp *r, const char *path, const char *fmt,
      va_list ap)
{
    char *m = qr_conf_model_json(c), *rest = NULL, *body = NULL;
    if (vasprintf(&rest, fmt, ap) < 0 || asprintf(&body, "{\"model\":%s,%s}", m, rest) < 0)
        abort();
    qr_conf_http(c, "POST", path, body, r);
    free(body);
    free(rest);
    free(m);
}

void qr_conf_post(const struct qr_conf_ctx *c, struct qr_conf_resp *r, const char *path,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpost(c, r, path, fmt, ap);
    va_end(ap);
}

/* POST /v1/chat/completions with {"model":M, <rest>} where rest is the members after model. */
void qr_conf_chat(const struct qr_conf_ctx *c, struct qr_conf_resp *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vpost(c, r, "/v1/chat/completions", fmt, ap);
    va_end(ap);
}

static bool has_tags(const char *s)
{
    return s && (strstr(s, "<think>") || strstr(s, "</think>"));
}

/* A non-streamed answer: its parsed document, or NULL with reason filled. */
static yyjson_doc *whole(struct qr_conf_resp *r, char *reason, size_t cap)
{
    if (r->status != 200) {
        snprintf(reason, cap, "status %ld: %.160s", r->status, r->error[0] ? r->error : r->body);
        return NULL;
    }
    yyjson_doc *d = yyjson_read(r->body, r->len, 0);
    if (!d || !yyjson_is_obj(yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message"))) {
        snprintf(reason, cap, "answer is not a chat completion: %.120s", r->body);
        yyjson_doc_free(d);
        return NULL;
    }
    return d;
}

static const char *msg_str(yyjson_doc *d, const char *field)
{
    yyjson_val *m = yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message");
    return yyjson_get_str(yyjson_obj_get(m, field));
}

/* reasoning_content (llama.cpp, vLLM before 0.11) or reasoning (vLLM, MLX) */
static const char *reasoning_of(yyjson_val *obj)
{
    const char *s = yyjson_get_str(yyjson_obj_get(obj, "reasoning_content"));
    return s ? s : yyjson_get_str(yyjson_obj_get(obj, "reasoning"));
}

/* ---- SSE ---- */

#define MAX_CALLS 8

struct growing {
    char *p;
    size_t len;
};

static void grow_add(struct growing *g, const char *s, size_t n)
{
    char *q = realloc(g->p, g->len + n + 1);
    if (!q)
        abort();
    memcpy(q + g->len, s, n);
    g->len += n;
    q[g->len] = '\0';
    g->p = q;
}

struct stream {
    struct growing content, reasoning;
    struct {
        char id[128], name[128];
        struct growing args;
        bool id_changed;
    } calls[MAX_CALLS];
    size_t n_calls;
    unsigned chunks;
    bool done;          /* data: [DONE] seen */
    bool tag_in_delta;  /* a content delta carried <think> or </think> */
    bool wrong_model;   /* a chunk named another model */
    bool both_in_delta; /* one delta carried content and reasoning text that content repeats */
    char error[160];    /* an error event, or a chunk that is not JSON */
};

static void stream_free(struct stream *s)
{
    free(s->content.p);
    free(s->reasoning.p);
    for (size_t i = 0; i < MAX_CALLS; i++)
        free(s->calls[i].args.p);
}

static void stream_tool_delta(struct stream *s, yyjson_val *tcs)
{
    size_t i, max;
    yyjson_val *t;
    yyjson_arr_foreach(tcs, i, max, t)
    {
        yyjson_val *ix = yyjson_obj_get(t, "index");
        uint64_t k = yyjson_is_uint(ix) ? yyjson_get_uint(ix) : 0;
        if (k >= MAX_CALLS) {
            snprintf(s->error, sizeof s->error, "tool call index %llu", (unsigned long long) k);
            continue;
        }
        if (k + 1 > s->n_calls)
            s->n_calls = k + 1;
        const char *id = yyjson_get_str(yyjson_obj_get(t, "id"));
        if (id && id[0]) {
            if (s->calls[k].id[0] && strcmp(s->calls[k].id, id))
                s->calls[k].id_changed = true;
            snprintf(s->calls[k].id, sizeof s->calls[k].id, "%s", id);
        }
        yyjson_val *fn = yyjson_obj_get(t, "function");
        const char *name = yyjson_get_str(yyjson_obj_get(fn, "name"));
        if (name && name[0])
            snprintf(s->calls[k].name, sizeof s->calls[k].name, "%s", name);
        yyjson_val *a = yyjson_obj_get(fn, "arguments");
        if (yyjson_is_str(a))
            grow_add(&s->calls[k].args, yyjson_get_str(a), yyjson_get_len(a));
    }
}

static void stream_chunk(struct stream *s, const struct qr_conf_ctx *c, const char *json, size_t n)
{
    yyjson_doc *d = yyjson_read(json, n, 0);
    yyjson_val *root = yyjson_doc_get_root(d);
    if (!yyjson_is_obj(root)) {
        snprintf(s->error, sizeof s->error, "chunk is not JSON: %.80s", json);
        yyjson_doc_free(d);
        return;
    }
    s->chunks++;
    yyjson_val *err = yyjson_obj_get(root, "error");
    const char *emsg = yyjson_get_str(yyjson_obj_get(err, "message"));
    if (err)
        snprintf(s->error, sizeof s->error, "error event: %.120s", emsg ? emsg : "(no message)");
    if (!yyjson_equals_str(yyjson_obj_get(root, "model"), c->model) && !err)
        s->wrong_model = true;
    yyjson_val *delta = yyjson_ptr_get(root, "/choices/0/delta");
    yyjson_val *content = yyjson_obj_get(delta, "content");
    const char *r = reasoning_of(delta);
    if (yyjson_is_str(content)) {
        if (has_tags(yyjson_get_str(content)))
            s->tag_in_delta = true;
        if (r && r[0] && yyjson_get_len(content) && strstr(yyjson_get_str(content), r))
            s->both_in_delta = true;
        grow_add(&s->content, yyjson_get_str(content), yyjson_get_len(content));
    }
    if (r)
        grow_add(&s->reasoning, r, strlen(r));
    stream_tool_delta(s, yyjson_obj_get(delta, "tool_calls"));
    yyjson_doc_free(d);
}

/* Parse an SSE body (data: lines; comments and other fields ignored). false: not 200. */
static bool stream_parse(struct stream *s, const struct qr_conf_ctx *c, struct qr_conf_resp *r,
                         char *reason, size_t cap)
{
    memset(s, 0, sizeof *s);
    if (r->status != 200) {
        snprintf(reason, cap, "streamed: status %ld: %.160s", r->status,
                 r->error[0] ? r->error : r->body);
        return false;
    }
    char *line = r->body;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t) (nl - line) : strlen(line);
        if (n && line[n - 1] == '\r')
            n--;
        if (n >= 5 && !strncmp(line, "data:", 5)) {
            const char *v = line + 5;
            size_t vn = n - 5;
            if (vn && *v == ' ')
                v++, vn--;
            if (vn == 6 && !strncmp(v, "[DONE]", 6))
                s->done = true;
            else
                stream_chunk(s, c, v, vn);
        }
        line = nl ? nl + 1 : NULL;
    }
    if (!s->content.p)
        grow_add(&s->content, "", 0);
    if (!s->reasoning.p)
        grow_add(&s->reasoning, "", 0);
    return true;
}

/* ---- identity ---- */

static enum qr_conf_status model_header(struct qr_conf_ctx *c, struct qr_conf_resp *r, char *reason,
                                        size_t cap)
{
    if (!r->model_header)
        return QR_CONF_PASS;
    if (!c->model_header) {
        c->model_header = strdup(r->model_header);
        return QR_CONF_PASS;
    }
    if (strcmp(c->model_header, r->model_header))
        return FAIL("X-Quantum-Model changed from '%.60s' to '%.60s'", c->model_header,
                    r->model_header);
    return QR_CONF_PASS;
}

static enum qr_conf_status case_identity(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    enum qr_conf_status st = QR_CONF_PASS;
    for (int i = 0; i < 3 && st == QR_CONF_PASS; i++) {
        struct qr_conf_resp r;
        qr_conf_chat(
            c, &r,
            "%s\"stream\":%s,\"max_tokens\":32,\"temperature\":0,\"seed\":7,\"messages\":[{"
            "\"role\":\"user\",\"content\":\"Say hello.\"}]",
            qr_conf_think(c, false), i == 2 ? "true" : "false");
        if (i < 2) {
            yyjson_doc *d = whole(&r, reason, cap);
            const char *m = yyjson_get_str(yyjson_obj_get(yyjson_doc_get_root(d), "model"));
            if (!d)
                st = QR_CONF_FAIL;
            else if (!m || strcmp(m, c->model))
                st = FAIL("asked for '%.60s', answered by '%.60s'", c->model, m ? m : "(none)");
            yyjson_doc_free(d);
        } else {
            struct stream s;
            if (!stream_parse(&s, c, &r, reason, cap))
                st = QR_CONF_FAIL;
            else if (s.wrong_model || !s.chunks)
                st = FAIL("a streamed chunk does not name model '%.60s'", c->model);
            stream_free(&s);
        }
        if (st == QR_CONF_PASS)
            st = model_header(c, &r, reason, cap);
        qr_conf_resp_cleanup(&r);
    }
    if (st == QR_CONF_PASS)
        snprintf(reason, cap, "model '%.60s' in 3 answers%s", c->model,
                 c->model_header ? ", X-Quantum-Model constant" : "");
    return st;
}

/* ---- unicode ---- */

static enum qr_conf_status case_unicode(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s\"max_tokens\":48,\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":"
        "\"Grüß Gott! Äpfel, Öl, Übermaß, Straße \xF0\x9F\x98\x80 — antworte kurz.\"}]",
        qr_conf_think(c, false));
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = NULL;
    /* the raw bytes first: yyjson would refuse invalid UTF-8 with a less precise message */
    if (r.status == 200 && !qr_conf_utf8_valid(r.body, r.len))
        st = FAIL("the answer is not valid UTF-8");
    else if (!(d = whole(&r, reason, cap)))
        st = QR_CONF_FAIL;
    else {
        const char *content = msg_str(d, "content");
        const char *rs = reasoning_of(yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message"));
        if (!content && !rs)
            st = FAIL("no content and no reasoning in the answer");
        else if ((content && !qr_conf_utf8_valid(content, strlen(content))) ||
                 (rs && !qr_conf_utf8_valid(rs, strlen(rs))))
            st = FAIL("decoded text is not valid UTF-8");
        else
            snprintf(reason, cap,
                     "umlauts, ß and a 4-byte emoji accepted; %zu bytes of valid UTF-8",
                     content ? strlen(content) : 0);
    }
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* ---- reasoning ---- */

static enum qr_conf_status case_reasoning_off(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s\"max_tokens\":64,\"temperature\":0,\"seed\":7,\"messages\":[{\"role\":\"user\","
        "\"content\":\"Hello, who are you?\"}]",
        qr_conf_think(c, false));
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = whole(&r, reason, cap);
    const char *content = d ? msg_str(d, "content") : NULL;
    if (!d)
        st = QR_CONF_FAIL;
    else if (!content || !content[0])
        st = FAIL("reasoning off returned empty content");
    else if (has_tags(content))
        st = FAIL("a think tag leaked into content: %.80s", content);
    else
        snprintf(reason, cap, "%zu bytes of content, no think tags%s", strlen(content),
                 qr_conf_claims(c, "reasoning.control") ? " (reasoning_effort none)" : "");
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

static enum qr_conf_status case_reasoning_on(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s\"max_tokens\":128,\"temperature\":0,\"seed\":7,\"messages\":[{\"role\":\"user\","
        "\"content\":\"Hello! What is 2+2?\"}]",
        qr_conf_think(c, true));
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = whole(&r, reason, cap);
    const char *content = d ? msg_str(d, "content") : NULL;
    const char *rs =
        d ? reasoning_of(yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message")) : NULL;
    if (!d)
        st = QR_CONF_FAIL;
    else if (has_tags(content))
        st = FAIL("a think tag leaked into content: %.80s", content);
    else if (has_tags(rs))
        st = FAIL("think tags left inside the reasoning field");
    else if (content && rs && strlen(rs) >= 8 && strstr(content, rs))
        st = FAIL("the reasoning text is repeated in content");
    else if ((!content || !content[0]) && (!rs || !rs[0]))
        st = FAIL("reasoning on returned neither content nor reasoning");
    else
        snprintf(reason, cap, "%zu bytes of reasoning kept apart from %zu bytes of content",
                 rs ? strlen(rs) : 0, content ? strlen(content) : 0);
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* ---- streaming ---- */

static enum qr_conf_status case_streaming(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    static const char REQ[] = "%s\"stream\":%s,\"max_tokens\":96,\"temperature\":0,\"seed\":42,"
                              "\"messages\":[{\"role\":\"user\",\"content\":\"Greet me briefly."
                              "\"}]";
    bool on = qr_conf_claims(c, "reasoning.control");
    struct qr_conf_resp w, s;
    qr_conf_chat(c, &w, REQ, qr_conf_think(c, on), "false");
    qr_conf_chat(c, &s, REQ, qr_conf_think(c, on), "true");
    enum qr_conf_status st = QR_CONF_PASS;
    struct stream ss;
    bool parsed = false;
    yyjson_doc *d = whole(&w, reason, cap);
    const char *content = d ? msg_str(d, "content") : NULL;
    if (!d)
        st = QR_CONF_FAIL;
    else if (!(parsed = stream_parse(&ss, c, &s, reason, cap)))
        st = QR_CONF_FAIL;
    else if (ss.error[0])
        st = FAIL("stream: %s", ss.error);
    else if (!ss.done)
        st = FAIL("the stream ended without data: [DONE]");
    else if (ss.tag_in_delta)
        st = FAIL("a content delta carries a think tag");
    else if (ss.both_in_delta ||
             (ss.reasoning.len >= 8 && strstr(ss.content.p, ss.reasoning.p) != NULL))
        st = FAIL("reasoning deltas appear in content deltas");
    else if (strcmp(ss.content.p, content ? content : ""))
        st = FAIL("streamed content (%zu bytes) differs from the whole answer (%zu bytes)",
                  ss.content.len, content ? strlen(content) : 0);
    else
        snprintf(reason, cap, "%u chunks; content (%zu bytes) equals the whole answer%s", ss.chunks,
                 ss.content.len, ss.reasoning.len ? ", reasoning kept in its own deltas" : "");
    if (parsed)
        stream_free(&ss);
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&w);
    qr_conf_resp_cleanup(&s);
    return st;
}

/* ---- tool calls ---- */

static const char TOOLS[] =
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":"
    "\"Current weather for a city\",\"parameters\":{\"type\":\"object\"}}}],";
static const char TOOL_ASK[] = "{\"role\":\"user\",\"content\":\"What is the weather in "
                               "München? Call get_weather.\"}";

/* One call's checks: non-empty id, the offered name, arguments a JSON object. */
static enum qr_conf_status check_call(const char *form, const char *id, const char *name,
                                      const char *args, size_t args_len, char *reason, size_t cap)
{
    if (!id || !id[0])
        return FAIL("%s tool call without an id", form);
    if (!name || strcmp(name, "get_weather"))
        return FAIL("%s tool call names '%.60s', not an offered tool", form, name ? name : "");
    yyjson_doc *a = args ? yyjson_read(args, args_len, 0) : NULL;
    bool obj = yyjson_is_obj(yyjson_doc_get_root(a));
    yyjson_doc_free(a);
    if (!obj)
        return FAIL("%s tool call arguments are not a JSON object: %.80s", form,
                    args ? args : "(none)");
    return QR_CONF_PASS;
}

static enum qr_conf_status tools_whole(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(c, &r, "%s%s\"temperature\":0,\"max_tokens\":512,\"messages\":[%s]",
                 qr_conf_think(c, false), TOOLS, TOOL_ASK);
    yyjson_doc *d = whole(&r, reason, cap);
    enum qr_conf_status st = d ? QR_CONF_PASS : QR_CONF_FAIL;
    yyjson_val *tcs =
        d ? yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message/tool_calls") : NULL;
    if (d && !yyjson_arr_size(tcs))
        st = FAIL("a tools request got no tool_calls: %.80s", r.body);
    size_t i, max;
    yyjson_val *t;
    yyjson_arr_foreach(tcs, i, max, t)
    {
        if (st != QR_CONF_PASS)
            break;
        yyjson_val *a = yyjson_ptr_get(t, "/function/arguments");
        st = check_call("whole", yyjson_get_str(yyjson_obj_get(t, "id")),
                        yyjson_get_str(yyjson_ptr_get(t, "/function/name")), yyjson_get_str(a),
                        yyjson_get_len(a), reason, cap);
    }
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

static enum qr_conf_status case_tools(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    enum qr_conf_status st = tools_whole(c, reason, cap);
    if (st != QR_CONF_PASS)
        return st;
    /* streamed: the id stays the same across the call's fragments, arguments assemble */
    struct qr_conf_resp r;
    qr_conf_chat(c, &r,
                 "%s%s\"stream\":true,\"temperature\":0,\"max_tokens\":512,\"messages\":[%s]",
                 qr_conf_think(c, false), TOOLS, TOOL_ASK);
    struct stream s;
    if (!stream_parse(&s, c, &r, reason, cap)) {
        qr_conf_resp_cleanup(&r);
        return QR_CONF_FAIL;
    }
    qr_conf_resp_cleanup(&r);
    if (s.error[0])
        st = FAIL("stream: %s", s.error);
    else if (!s.n_calls)
        st = FAIL("a streamed tools request got no tool_calls");
    for (size_t i = 0; i < s.n_calls && st == QR_CONF_PASS; i++) {
        if (s.calls[i].id_changed)
            st = FAIL("streamed tool call %zu changed its id between fragments", i);
        else
            st = check_call("streamed", s.calls[i].id, s.calls[i].name, s.calls[i].args.p,
                            s.calls[i].args.len, reason, cap);
    }
    if (st != QR_CONF_PASS) {
        stream_free(&s);
        return st;
    }
    /* the tool result turn, linked by the streamed call's id */
    yyjson_mut_doc *m = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *id = yyjson_mut_strcpy(m, s.calls[0].id);
    yyjson_mut_val *args = yyjson_mut_strcpy(m, s.calls[0].args.p);
    char *idj = yyjson_mut_val_write(id, 0, NULL), *argj = yyjson_mut_val_write(args, 0, NULL);
    if (!idj || !argj)
        abort();
    qr_conf_chat(
        c, &r,
        "%s%s\"temperature\":0,\"max_tokens\":64,\"messages\":[%s,{\"role\":\"assistant\","
        "\"content\":\"\",\"tool_calls\":[{\"id\":%s,\"type\":\"function\",\"function\":{"
        "\"name\":\"get_weather\",\"arguments\":%s}}]},{\"role\":\"tool\",\"tool_call_id\":%s,"
        "\"content\":\"{\\\"temperature_c\\\": 21, \\\"sky\\\": \\\"sunny\\\"}\"}]",
        qr_conf_think(c, false), TOOLS, TOOL_ASK, idj, argj, idj);
    if (r.status != 200)
        st = FAIL("the tool result turn (tool_call_id from the stream) answered %ld: %.120s",
                  r.status, r.error[0] ? r.error : r.body);
    else
        snprintf(reason, cap, "%zu streamed call(s), id '%.40s' kept; tool result turn accepted",
                 s.n_calls, s.calls[0].id);
    free(idj);
    free(argj);
    yyjson_mut_doc_free(m);
    qr_conf_resp_cleanup(&r);
    stream_free(&s);
    return st;
}

/* ---- structured output ---- */

/* A person record: every type the validator knows, all required. */
static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":"
    "\"integer\"},\"email\":{\"type\":[\"string\",\"null\"]},\"active\":{\"type\":\"boolean\"},"
    "\"scores\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}},\"address\":{\"type\":"
    "\"object\",\"properties\":{\"street\":{\"type\":\"string\"},\"city\":{\"type\":\"string\"}},"
    "\"required\":[\"street\",\"city\"],\"additionalProperties\":false}},\"required\":[\"name\","
    "\"age\",\"email\",\"active\",\"scores\",\"address\"],\"additionalProperties\":false}";

static bool type_is(yyjson_val *v, const char *t)
{
    if (!strcmp(t, "object"))
        return yyjson_is_obj(v);
    if (!strcmp(t, "array"))
        return yyjson_is_arr(v);
    if (!strcmp(t, "string"))
        return yyjson_is_str(v);
    if (!strcmp(t, "integer"))
        return yyjson_is_int(v);
    if (!strcmp(t, "number"))
        return yyjson_is_num(v);
    if (!strcmp(t, "boolean"))
        return yyjson_is_bool(v);
    if (!strcmp(t, "null"))
        return yyjson_is_null(v);
    return false;
}

/* The subset of JSON Schema the case needs: type (string or list), properties, required,
 * additionalProperties false, items. path names the value in the failure text. */
static bool validate(yyjson_val *schema, yyjson_val *v, const char *path, char *reason, size_t cap)
{
    yyjson_val *t = yyjson_obj_get(schema, "type");
    bool ok = !t;
    if (yyjson_is_str(t))
        ok = type_is(v, yyjson_get_str(t));
    size_t i, max;
    yyjson_val *x, *k;
    yyjson_arr_foreach(t, i, max, x) ok = ok || type_is(v, yyjson_get_str(x));
    if (!ok) {
        snprintf(reason, cap, "'%s' has the wrong type", path);
        return false;
    }
    yyjson_val *props = yyjson_obj_get(schema, "properties");
    if (yyjson_is_obj(v)) {
        yyjson_arr_foreach(yyjson_obj_get(schema, "required"), i, max, x)
        {
            if (!yyjson_obj_get(v, yyjson_get_str(x))) {
                snprintf(reason, cap, "'%s' lacks required key '%s'", path, yyjson_get_str(x));
                return false;
            }
        }
        bool closed = yyjson_is_false(yyjson_obj_get(schema, "additionalProperties"));
        yyjson_obj_foreach(v, i, max, k, x)
        {
            char sub[128];
            snprintf(sub, sizeof sub, "%.60s.%.60s", path, yyjson_get_str(k));
            yyjson_val *ps = yyjson_obj_get(props, yyjson_get_str(k));
            if (!ps && closed) {
                snprintf(reason, cap, "'%s' is not allowed", sub);
                return false;
            }
            if (ps && !validate(ps, x, sub, reason, cap))
                return false;
        }
    }
    yyjson_val *items = yyjson_obj_get(schema, "items");
    if (yyjson_is_arr(v) && items) {
        yyjson_arr_foreach(v, i, max, x)
        {
            char sub[128];
            snprintf(sub, sizeof sub, "%.100s[%zu]", path, i);
            if (!validate(items, x, sub, reason, cap))
                return false;
        }
    }
    return true;
}

static enum qr_conf_status case_structured(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s\"temperature\":0,\"max_tokens\":256,\"response_format\":{\"type\":\"json_schema\","
        "\"json_schema\":{\"name\":\"person\",\"strict\":true,\"schema\":%s}},\"messages\":[{"
        "\"role\":\"user\",\"content\":\"Return a person record as JSON. [[json]]\"}]",
        qr_conf_think(c, false), SCHEMA);
    enum qr_conf_status st = QR_CONF_PASS;
    yyjson_doc *d = whole(&r, reason, cap);
    const char *content = d ? msg_str(d, "content") : NULL;
    yyjson_doc *j = content ? yyjson_read(content, strlen(content), 0) : NULL;
    yyjson_doc *s = yyjson_read(SCHEMA, sizeof SCHEMA - 1, 0);
    if (!d)
        st = QR_CONF_FAIL;
    else if (!j)
        st = FAIL("content is not JSON: %.100s", content ? content : "(none)");
    else if (!validate(yyjson_doc_get_root(s), yyjson_doc_get_root(j), "$", reason, cap))
        st = QR_CONF_FAIL;
    else
        snprintf(reason, cap, "%zu bytes of JSON valid against the schema", strlen(content));
    yyjson_doc_free(s);
    yyjson_doc_free(j);
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* ---- context limit ---- */

#define CONTEXT_MAX_TESTED 262144 /* a longer context would need a prompt too big to send */

/* An OpenAI error body: {"error": {"message": "<non-empty>", ...}} */
bool qr_conf_openai_error(const struct qr_conf_resp *r, char *msg, size_t cap)
{
    yyjson_doc *d = yyjson_read(r->body, r->len, 0);
    const char *m = yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), "/error/message"));
    bool ok = m && m[0];
    snprintf(msg, cap, "%s", ok ? m : "");
    yyjson_doc_free(d);
    return ok;
}

static enum qr_conf_status case_context(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    if (c->context_length < 0) {
        snprintf(reason, cap, "the daemon reports no context_length for the model");
        return QR_CONF_SKIP;
    }
    if (c->context_length > CONTEXT_MAX_TESTED) {
        snprintf(reason, cap, "context_length %lld is above the %d this case sends",
                 (long long) c->context_length, CONTEXT_MAX_TESTED);
        return QR_CONF_SKIP;
    }
    /* one word per token at least in any tokenizer we know, plus a margin */
    size_t words = (size_t) c->context_length + 256;
    char *text = qr_conf_words(words);
    struct qr_conf_resp r;
    qr_conf_chat(c, &r, "%s\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]",
                 qr_conf_think(c, false), text);
    free(text);
    enum qr_conf_status st = QR_CONF_PASS;
    char msg[160];
    if (r.status == 200)
        st = FAIL("a prompt of %zu words over context %lld was answered 200", words,
                  (long long) c->context_length);
    else if (r.status < 400 || r.status > 499)
        st = FAIL("refused with status %ld, not a 4xx: %.100s", r.status,
                  r.error[0] ? r.error : r.body);
    else if (!qr_conf_openai_error(&r, msg, sizeof msg))
        st = FAIL("status %ld without an OpenAI error.message: %.100s", r.status, r.body);
    else
        snprintf(reason, cap, "%ld over context %lld: %.120s", r.status,
                 (long long) c->context_length, msg);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* ---- multimodal negotiation ---- */

static enum qr_conf_status case_multimodal(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    /* a 1x1 PNG */
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
        "\"text\":\"What is in this picture?\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
        "\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8B"
        "QDwAEhQGAhKmMIQAAAABJRU5ErkJggg==\"}}]}]",
        qr_conf_think(c, false));
    enum qr_conf_status st = QR_CONF_PASS;
    char msg[160];
    if (r.status == 200)
        st = FAIL("an image to a model without multimodal.vision was answered 200");
    else if (r.status < 400 || r.status > 499)
        st = FAIL("refused with status %ld, not a 4xx: %.100s", r.status,
                  r.error[0] ? r.error : r.body);
    else if (!qr_conf_openai_error(&r, msg, sizeof msg))
        st = FAIL("status %ld without an OpenAI error.message", r.status);
    else
        snprintf(reason, cap, "refused with %ld: %.120s", r.status, msg);
    qr_conf_resp_cleanup(&r);
    return st;
}

/* ---- parallel tool calls ---- */

/* get_weather typed for every JSON type (all required, in the order the scripted model writes
 * them), and get_time. */
static const char WEATHER_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"street\":{\"type\":"
    "\"string\"},\"days\":{\"type\":\"integer\"},\"temperature\":{\"type\":\"number\"},"
    "\"detailed\":{\"type\":\"boolean\"},\"metric\":{\"type\":\"boolean\"},\"tags\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"string\"}},\"location\":{\"type\":\"object\",\"properties\":{"
    "\"lat\":{\"type\":\"number\"},\"lon\":{\"type\":\"number\"},\"country\":{\"type\":\"string\"}}"
    ","
    "\"required\":[\"lat\",\"lon\",\"country\"]},\"note\":{\"type\":\"null\"}},\"required\":["
    "\"city\",\"street\",\"days\",\"temperature\",\"detailed\",\"metric\",\"tags\",\"location\","
    "\"note\"]}";
static const char TIME_SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"timezone\":{\"type\":\"string\"},\"format\":{\"type\":"
    "\"string\"}},\"required\":[\"timezone\",\"format\"]}";
static const char PAR_ASK[] = "{\"role\":\"user\",\"content\":\"Wie ist das Wetter in München "
                              "und wie spät ist es in Berlin? Rufe beide Werkzeuge auf. "
                              "[[parallel]]\"}";

static char *par_tools(void)
{
    char *s = NULL;
    if (asprintf(&s,
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                 "\"description\":\"Weather\",\"parameters\":%s}},{\"type\":\"function\","
                 "\"function\":{\"name\":\"get_time\",\"description\":\"Time\",\"parameters\":%s}"
                 "}],\"parallel_tool_calls\":true,",
                 WEATHER_SCHEMA, TIME_SCHEMA) < 0)
        abort();
    return s;
}

/* Every JSON type among the values of an object (one level down included). */
static unsigned types_in(yyjson_val *o)
{
    unsigned bits = 0;
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(o, i, max, k, v)
    {
        bits |= yyjson_is_str(v) ? 1u : 0;
        bits |= yyjson_is_int(v) ? 2u : 0;
        bits |= yyjson_is_real(v) ? 4u : 0;
        bits |= yyjson_is_bool(v) ? 8u : 0;
        bits |= yyjson_is_arr(v) ? 16u : 0;
        bits |= yyjson_is_obj(v) ? 32u : 0;
        bits |= yyjson_is_null(v) ? 64u : 0;
    }
    return bits;
}

/* One call: non-empty id, an offered name, arguments valid against that tool's schema; the
 * weather call carries every JSON type. args: the arguments text. */
static enum qr_conf_status par_check(const char *form, const char *id, const char *name,
                                     const char *args, size_t args_len, char *reason, size_t cap)
{
    if (!id || !id[0])
        return FAIL("%s: a tool call without an id", form);
    bool weather = name && !strcmp(name, "get_weather");
    if (!weather && !(name && !strcmp(name, "get_time")))
        return FAIL("%s: a tool call names '%.60s', not an offered tool", form, name ? name : "");
    yyjson_doc *a = args ? yyjson_read(args, args_len, 0) : NULL;
    const char *schema = weather ? WEATHER_SCHEMA : TIME_SCHEMA;
    yyjson_doc *s = yyjson_read(schema, strlen(schema), 0);
    char sub[QR_CONF_REASON_MAX] = "";
    enum qr_conf_status st = QR_CONF_PASS;
    if (!yyjson_is_obj(yyjson_doc_get_root(a)))
        st = FAIL("%s: %s arguments are not a JSON object: %.80s", form, name,
                  args ? args : "(none)");
    else if (!validate(yyjson_doc_get_root(s), yyjson_doc_get_root(a), "$", sub, sizeof sub))
        st = FAIL("%s: %s arguments do not match the offered schema: %s", form, name, sub);
    else if (weather && types_in(yyjson_doc_get_root(a)) != 127u)
        st = FAIL("%s: get_weather arguments lack a JSON type (string, integer, real, boolean, "
                  "array, object, null): %.80s",
                  form, args);
    yyjson_doc_free(s);
    yyjson_doc_free(a);
    return st;
}

struct par_call {
    char id[128], name[64];
    char *args; /* malloc'd */
};

static void par_calls_free(struct par_call *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i].args);
}

/* The whole form: exactly two valid calls with distinct ids into k[2]. */
static enum qr_conf_status par_whole(struct qr_conf_ctx *c, const char *tools, struct par_call *k,
                                     char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(c, &r, "%s%s\"temperature\":0,\"max_tokens\":512,\"messages\":[%s]",
                 qr_conf_think(c, false), tools, PAR_ASK);
    yyjson_doc *d = whole(&r, reason, cap);
    enum qr_conf_status st = d ? QR_CONF_PASS : QR_CONF_FAIL;
    yyjson_val *tcs =
        d ? yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/message/tool_calls") : NULL;
    if (d && yyjson_arr_size(tcs) != 2)
        st = FAIL("[[parallel]] with two tools gave %zu tool calls, not 2: %.100s",
                  yyjson_arr_size(tcs), r.body);
    for (size_t i = 0; st == QR_CONF_PASS && i < 2; i++) {
        yyjson_val *t = yyjson_arr_get(tcs, i);
        yyjson_val *a = yyjson_ptr_get(t, "/function/arguments");
        const char *id = yyjson_get_str(yyjson_obj_get(t, "id"));
        const char *name = yyjson_get_str(yyjson_ptr_get(t, "/function/name"));
        st = par_check("whole", id, name, yyjson_get_str(a), yyjson_get_len(a), reason, cap);
        if (st == QR_CONF_PASS) {
            snprintf(k[i].id, sizeof k[i].id, "%s", id);
            snprintf(k[i].name, sizeof k[i].name, "%s", name);
            k[i].args = strndup(yyjson_get_str(a), yyjson_get_len(a));
        }
    }
    if (st == QR_CONF_PASS && !strcmp(k[0].id, k[1].id))
        st = FAIL("the two parallel calls share the id '%.60s'", k[0].id);
    if (st == QR_CONF_PASS && !strcmp(k[0].name, k[1].name))
        st = FAIL("both parallel calls name '%s'", k[0].name);
    const char *fin =
        d ? yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/finish_reason"))
          : NULL;
    if (st == QR_CONF_PASS && (!fin || strcmp(fin, "tool_calls")))
        st = FAIL("two tool calls ended with finish_reason %s, not tool_calls",
                  fin ? fin : "(none)");
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    return st;
}

static bool same_json(const char *a, const char *b)
{
    yyjson_doc *x = a ? yyjson_read(a, strlen(a), 0) : NULL;
    yyjson_doc *y = b ? yyjson_read(b, strlen(b), 0) : NULL;
    bool eq = x && y && yyjson_equals(yyjson_doc_get_root(x), yyjson_doc_get_root(y));
    yyjson_doc_free(x);
    yyjson_doc_free(y);
    return eq;
}

/* Streamed: the same two calls (names, assembled arguments, in order), ids stable and distinct. */
static enum qr_conf_status par_streamed(struct qr_conf_ctx *c, const char *tools,
                                        const struct par_call *k, char *reason, size_t cap)
{
    struct qr_conf_resp r;
    qr_conf_chat(c, &r,
                 "%s%s\"stream\":true,\"temperature\":0,\"max_tokens\":512,\"messages\":[%s]",
                 qr_conf_think(c, false), tools, PAR_ASK);
    struct stream s;
    if (!stream_parse(&s, c, &r, reason, cap)) {
        qr_conf_resp_cleanup(&r);
        return QR_CONF_FAIL;
    }
    qr_conf_resp_cleanup(&r);
    enum qr_conf_status st = QR_CONF_PASS;
    if (s.error[0])
        st = FAIL("stream: %s", s.error);
    else if (s.n_calls != 2)
        st = FAIL("streamed: %zu tool calls, not 2", s.n_calls);
    for (size_t i = 0; st == QR_CONF_PASS && i < 2; i++) {
        if (s.calls[i].id_changed)
            st = FAIL("streamed tool call %zu changed its id between fragments", i);
        else
            st = par_check("streamed", s.calls[i].id, s.calls[i].name, s.calls[i].args.p,
                           s.calls[i].args.len, reason, cap);
        if (st == QR_CONF_PASS && strcmp(s.calls[i].name, k[i].name))
            st = FAIL("streamed call %zu is '%s', the whole answer's is '%s'", i, s.calls[i].name,
                      k[i].name);
        if (st == QR_CONF_PASS && !same_json(s.calls[i].args.p, k[i].args))
            st = FAIL("streamed call %zu (%s) assembled other arguments than the whole answer: "
                      "%.80s",
                      i, k[i].name, s.calls[i].args.p);
    }
    if (st == QR_CONF_PASS && !strcmp(s.calls[0].id, s.calls[1].id))
        st = FAIL("the two streamed calls share the id '%.60s'", s.calls[0].id);
    stream_free(&s);
    return st;
}

/* The tool result turn: both calls and two role:tool results linked by tool_call_id. */
static enum qr_conf_status par_results(struct qr_conf_ctx *c, const char *tools,
                                       const struct par_call *k, char *reason, size_t cap)
{
    yyjson_mut_doc *m = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *arr = yyjson_mut_arr(m);
    for (size_t i = 0; i < 2; i++) {
        yyjson_mut_val *t = yyjson_mut_arr_add_obj(m, arr);
        yyjson_mut_obj_add_strcpy(m, t, "id", k[i].id);
        yyjson_mut_obj_add_str(m, t, "type", "function");
        yyjson_mut_val *fn = yyjson_mut_obj_add_obj(m, t, "function");
        yyjson_mut_obj_add_strcpy(m, fn, "name", k[i].name);
        yyjson_mut_obj_add_strcpy(m, fn, "arguments", k[i].args);
    }
    yyjson_mut_val *id0 = yyjson_mut_strcpy(m, k[0].id), *id1 = yyjson_mut_strcpy(m, k[1].id);
    char *calls = yyjson_mut_val_write(arr, 0, NULL);
    char *i0 = yyjson_mut_val_write(id0, 0, NULL), *i1 = yyjson_mut_val_write(id1, 0, NULL);
    if (!calls || !i0 || !i1)
        abort();
    bool w0 = !strcmp(k[0].name, "get_weather");
    static const char WRES[] = "{\\\"temperature_c\\\": 21, \\\"sky\\\": \\\"sunny\\\"}";
    static const char TRES[] = "{\\\"time\\\": \\\"14:05\\\"}";
    struct qr_conf_resp r;
    qr_conf_chat(
        c, &r,
        "%s%s\"temperature\":0,\"max_tokens\":64,\"messages\":[%s,{\"role\":\"assistant\","
        "\"content\":\"\",\"tool_calls\":%s},{\"role\":\"tool\",\"tool_call_id\":%s,\"content\":"
        "\"%s\"},{\"role\":\"tool\",\"tool_call_id\":%s,\"content\":\"%s\"}]",
        qr_conf_think(c, false), tools, PAR_ASK, calls, i0, w0 ? WRES : TRES, i1, w0 ? TRES : WRES);
    yyjson_doc *d = whole(&r, reason, cap);
    const char *content = d ? msg_str(d, "content") : NULL;
    const char *fin =
        d ? yyjson_get_str(yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/finish_reason"))
          : NULL;
    enum qr_conf_status st = QR_CONF_PASS;
    if (!d)
        st = QR_CONF_FAIL;
    else if (!content || !content[0])
        st = FAIL("the answer to two tool results has no content: %.100s", r.body);
    else if (!fin || strcmp(fin, "stop"))
        st = FAIL("the answer to two tool results ended with '%s', not 'stop'", fin ? fin : "");
    yyjson_doc_free(d);
    qr_conf_resp_cleanup(&r);
    free(calls);
    free(i0);
    free(i1);
    yyjson_mut_doc_free(m);
    return st;
}

static enum qr_conf_status case_tools_parallel(struct qr_conf_ctx *c, char *reason, size_t cap)
{
    if (qr_conf_engine_cap(c, "supports_parallel_tool_calls") == 0) {
        snprintf(reason, cap,
                 "the engine evidence says the model's template has no parallel tool "
                 "calls (supports_parallel_tool_calls false)");
        return QR_CONF_SKIP;
    }
    char *tools = par_tools();
    struct par_call k[2];
    memset(k, 0, sizeof k);
    enum qr_conf_status st = par_whole(c, tools, k, reason, cap);
    bool streamed = qr_conf_claims(c, "tools.streaming");
    if (st == QR_CONF_PASS && streamed)
        st = par_streamed(c, tools, k, reason, cap);
    if (st == QR_CONF_PASS)
        st = par_results(c, tools, k, reason, cap);
    if (st == QR_CONF_PASS)
        snprintf(reason, cap,
                 "%s + %s with distinct ids, arguments valid (every JSON type)%s; two tool "
                 "results answered with content, finish stop",
                 k[0].name, k[1].name,
                 streamed ? "; streamed: same calls, ids stable"
                          : "; streamed part skipped (tools.streaming not claimed)");
    par_calls_free(k, 2);
    free(tools);
    return st;
}

/* ---- the table ---- */

static const char *const NEED_TEXT[] = {"inference.text", NULL};
static const char *const NEED_REASONING[] = {"inference.text", "reasoning.control", NULL};
static const char *const NEED_STREAM[] = {"inference.text", "streaming.content", NULL};
static const char *const NEED_TOOLS[] = {"tools.calling", "tools.streaming", NULL};
static const char *const NEED_SO[] = {"structured_output", NULL};
static const char *const NEED_TOOLS_CALL[] = {"tools.calling", NULL};

static const char *const VER_TEXT[] = {"inference.text", NULL};
static const char *const VER_REASONING[] = {"reasoning.control", NULL};
static const char *const VER_STREAM[] = {"streaming.content", "streaming.reasoning", NULL};
static const char *const VER_TOOLS[] = {"tools.calling", "tools.streaming",
                                        "streaming.tool_arguments", NULL};
static const char *const VER_SO[] = {"structured_output", NULL};
static const char *const VER_STREAM_CONTENT[] = {"streaming.content", NULL};

static const struct qr_conf_case CASES[] = {
    {"identity", NEED_TEXT, NULL, case_identity, VER_TEXT},
    {"unicode", NEED_TEXT, NULL, case_unicode, VER_TEXT},
    {"reasoning.off", NEED_TEXT, NULL, case_reasoning_off, VER_TEXT},
    {"reasoning.on", NEED_REASONING, NULL, case_reasoning_on, VER_REASONING},
    {"streaming", NEED_STREAM, NULL, case_streaming, VER_STREAM},
    {"tools", NEED_TOOLS, NULL, case_tools, VER_TOOLS},
    {"structured_output", NEED_SO, NULL, case_structured, VER_SO},
    {"context_limit", NEED_TEXT, NULL, case_context, NULL},
    {"context.at_limit", NEED_TEXT, NULL, qr_conf_case_context_at_limit, NULL},
    {"multimodal.refused", NEED_TEXT, "multimodal.vision", case_multimodal, NULL},
    {"tokenizer.roundtrip", NEED_TEXT, NULL, qr_conf_case_tok_roundtrip, VER_TEXT},
    {"tokenizer.bos", NEED_TEXT, NULL, qr_conf_case_tok_bos, VER_TEXT},
    {"tools.parallel", NEED_TOOLS_CALL, NULL, case_tools_parallel, VER_TOOLS},
    {"cancel.decode", NEED_STREAM, NULL, qr_conf_case_cancel_decode, VER_STREAM_CONTENT},
    {"cancel.prefill", NEED_STREAM, NULL, qr_conf_case_cancel_prefill, VER_STREAM_CONTENT},
    /* model metadata (cases_model.c) */
    {"metadata", NEED_TEXT, NULL, qr_conf_case_metadata, NULL},
    {"moe.metadata", NEED_TEXT, NULL, qr_conf_case_moe_metadata, NULL},
    {"experts.config", NEED_TEXT, NULL, qr_conf_case_experts_config, NULL},
    {"quantization", NEED_TEXT, NULL, qr_conf_case_quantization, qr_conf_verifies_quantization},
    {"speculative", NEED_TEXT, NULL, qr_conf_case_speculative, qr_conf_verifies_speculative},
    {"crash.restart", NEED_TEXT, NULL, qr_conf_case_crash_restart, NULL},
};

size_t qr_conf_n_cases(void)
{
    return sizeof CASES / sizeof CASES[0];
}

const struct qr_conf_case *qr_conf_case_get(size_t i)
{
    return i < qr_conf_n_cases() ? &CASES[i] : NULL;
}
