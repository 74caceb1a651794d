/* Tests for the native llama.cpp backend adapter (src/backend/llamacpp/llamacpp.c) against the
 * REAL packaged llama-server (.deps/llama, from scripts/setup) on generated models: the scripted
 * chat model and its draft (qr-gen-scripted, exact texts in tests/fixtures/SCRIPT.md), llama-tiny
 * and bert-embed-tiny (qr-gen-fixtures). A stand-in engine that refuses to start is a shell
 * script in a temporary directory.
 *
 * Event callbacks only record; assertions run after the loop returns. Every wait is a loop run
 * bounded by a timer, so no case can hang. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/codec.h"
#include "backend/backend.h"
#include "backend/llamacpp/llamacpp.h"
#include "capability/descriptor.h"
#include "contract/event.h"
#include "contract/request.h"
#include "core/config.h"
#include "core/http_client.h"

#ifndef QR_TEST_GEN_FIXTURES
#error "QR_TEST_GEN_FIXTURES (path of qr-gen-fixtures) must be defined"
#endif
#ifndef QR_TEST_GEN_SCRIPTED
#error "QR_TEST_GEN_SCRIPTED (path of qr-gen-scripted) must be defined"
#endif

#define REPO_ROOT QR_TEST_CASES "/../.."
#define ENGINE    REPO_ROOT "/.deps/llama/bin/llama-server"
#define WAIT_MS   30000 /* generous bound for loads and answers: the CI box is 2 busy cores */

#define GREETING "Hallo! Ich bin das Skript-Modell. Grüße aus München: Straße, Größe, Übermaß."
#define WEATHER                                                                                      \
    "{\"city\": \"München\", \"street\": \"Königstraße 1\", \"days\": 3, \"temperature\": -4.5, " \
    "\"detailed\": true, \"metric\": false, \"tags\": [\"Größe\", \"Übermaß\", \"ß\"], "        \
    "\"location\": {\"lat\": 48.137, \"lon\": 11.575, \"country\": \"DE\"}, \"note\": null}"

struct fx {
    struct event_base *base;
    struct qr_http_client *http;
    struct qr_config cfg;
    struct qr_backend *b;
    char dir[64];
    char scripted[128], draft[128], tiny[128], embed[128], rerank[128], fail_sh[128];
    char fake_py[128], fake_violate[128], fake_badprops[128], fake_bigprops[128];
};

static struct fx F;
static bool have_engine;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the resolver: a fixed table ---- */

static struct qr_llamacpp_model models[8];
static size_t n_models;

static enum qr_err resolve(void *arg, struct qr_slice name, struct qr_llamacpp_model *out,
                           struct qr_diag *diag)
{
    for (size_t i = 0; i < n_models; i++) {
        if (qr_slice_eq(name, models[i].id)) {
            *out = models[i];
            return QR_OK;
        }
    }
    return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no such model in the test registry");
}

static void list(void *arg, void (*emit)(void *ctx, const struct qr_llamacpp_model *m), void *ctx)
{
    for (size_t i = 0; i < n_models; i++)
        emit(ctx, &models[i]);
}

/* ---- loop helpers ---- */

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    *(bool *) arg = true;
}

struct waiter {
    bool (*pred)(void *);
    void *arg;
};

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct waiter *w = arg;
    if (w->pred(w->arg))
        event_base_loopbreak(F.base);
}

/* Run the loop until pred(arg) holds or ms pass; returns pred's last value. */
static bool wait_for(bool (*pred)(void *), void *arg, int ms)
{
    bool expired = false;
    struct waiter w = {pred, arg};
    struct event *dl = evtimer_new(F.base, on_deadline, &expired);
    struct event *tick = event_new(F.base, -1, EV_PERSIST, on_tick, &w);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000}, tk = {0, 5000};
    evtimer_add(dl, &tv);
    evtimer_add(tick, &tk);
    while (!pred(arg) && !expired)
        event_base_loop(F.base, EVLOOP_ONCE);
    event_free(tick);
    event_free(dl);
    return pred(arg);
}

static bool never(void *arg)
{
    return false;
}

static void run_for(int ms)
{
    wait_for(never, NULL, ms);
}

/* ---- one request and what came back ---- */

struct run {
    struct qr_request req;
    struct qr_message msg;
    struct qr_part part;
    struct qr_tool tool;
    struct qr_tool tools[2];
    struct qr_part media;
    struct qr_slice inputs[2];
    struct qr_job *job;
    struct qr_answer ans;
    bool final;
    int64_t t_final;
    unsigned n_content;
    int first_content_seq, last_reasoning_seq, seq;
    /* act after this many content events (0: never) */
    unsigned kill_after;
    pid_t kill_pid;
    int64_t t_kill;
    unsigned stop_after; /* ask the test body to cancel */
    bool want_cancel;
};

static enum qr_err on_event(void *arg, const struct qr_event *ev)
{
    struct run *r = arg;
    r->seq++;
    if (ev->type == QR_EV_CONTENT) {
        r->n_content++;
        if (r->first_content_seq < 0)
            r->first_content_seq = r->seq;
        if (r->kill_after && r->n_content == r->kill_after && r->kill_pid > 0) {
            kill(r->kill_pid, SIGKILL);
            r->t_kill = now_ms();
        }
        if (r->stop_after && r->n_content == r->stop_after)
            r->want_cancel = true;
    }
    if (ev->type == QR_EV_REASONING)
        r->last_reasoning_seq = r->seq;
    enum qr_err e = qr_answer_add(&r->ans, ev);
    if (ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR) {
        r->final = true;
        r->t_final = now_ms();
        r->job = NULL;
    }
    return e;
}

static void run_init(struct run *r, const char *model, const char *text, enum qr_think_kind think)
{
    memset(r, 0, sizeof *r);
    qr_answer_init(&r->ans, 1 << 20);
    r->first_content_seq = -1;
    r->last_reasoning_seq = -1;
    r->req.protocol = QR_PROTO_OPENAI;
    r->req.op = QR_OP_CHAT;
    r->req.model = qr_slice_str(model);
    r->part.kind = QR_PART_TEXT;
    r->part.text = qr_slice_str(text);
    r->msg.role = QR_ROLE_USER;
    r->msg.parts = &r->part;
    r->msg.n_parts = 1;
    r->req.messages = &r->msg;
    r->req.n_messages = 1;
    r->req.think.kind = think;
    r->req.stream = true;
    r->req.stream_set = true;
}

static void run_cleanup(struct run *r)
{
    if (r->job)
        qr_job_cancel(r->job);
    qr_answer_cleanup(&r->ans);
}

static bool is_final(void *arg)
{
    return ((struct run *) arg)->final;
}

static bool wants_cancel(void *arg)
{
    struct run *r = arg;
    return r->want_cancel || r->final;
}

static enum qr_err submit(struct run *r, struct qr_api_error *err)
{
    memset(err, 0, sizeof *err);
    return qr_backend_submit(F.b, &r->req, on_event, r, &r->job, err);
}

/* Submit and wait for the final event; asserts it came. */
static void submit_wait(struct run *r)
{
    struct qr_api_error err;
    enum qr_err e = submit(r, &err);
    if (e)
        fail_msg("submit refused: %s", err.message);
    assert_true(wait_for(is_final, r, WAIT_MS));
}

static const char *buf_str(const struct qr_buf *b)
{
    return b->ptr ? b->ptr : "";
}

/* ---- helpers over the adapter ---- */

static bool loaded_row(const char *id, struct qr_llamacpp_loaded *out)
{
    struct qr_llamacpp_loaded rows[8];
    size_t n = qr_llamacpp_loaded_list(F.b, rows, 8);
    for (size_t i = 0; i < n && i < 8; i++) {
        if (strcmp(rows[i].model, id) == 0) {
            if (out)
                *out = rows[i];
            return true;
        }
    }
    return false;
}

static bool nothing_loaded(void *arg)
{
    return qr_llamacpp_loaded_list(F.b, NULL, 0) == 0;
}

static bool not_loaded(void *arg)
{
    return !loaded_row(arg, NULL);
}

static void unload_all(void)
{
    struct qr_llamacpp_loaded rows[8];
    size_t n = qr_llamacpp_loaded_list(F.b, rows, 8);
    for (size_t i = 0; i < n && i < 8; i++)
        qr_llamacpp_unload(F.b, rows[i].model, NULL, NULL);
    assert_true(wait_for(nothing_loaded, NULL, 10000));
}

static bool pid_gone(pid_t pid)
{
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static struct qr_llamacpp_options base_options(const char *engine)
{
    struct qr_llamacpp_options o = {
        .engine_path = engine,
        .prefix = REPO_ROOT,
        .idle_ttl_ms = 60000,
        .ctx = 4096, /* the [[long]] loop runs for seconds before the context is full */
        .parallel = 1,
        .threads = 1,
        .load_timeout_ms = WAIT_MS,
        .restart = {.backoff_initial_ms = 100, .backoff_max_ms = 400, .max_crashes = 5},
        .resolve = resolve,
        .list = list,
    };
    return o;
}

/* ---- fixture ---- */

/* The stand-in engine: llama-server's command line and endpoints, behaviour chosen by the model
 * file's name. violate: a tool-capable template whose chat answer always calls get_weather,
 * whatever it was offered (and it records the request body next to the model); badprops: /props
 * is not JSON; bigprops: /props is larger than the cap. Chat without tools answers "ok". */
static const char FAKE_ENGINE[] =
    "#!/usr/bin/env python3\n"
    "import http.server, json, sys\n"
    "if '--version' in sys.argv:\n"
    "    sys.stderr.write('version: 0.7.0 (build 11669, commit Debian)\\n'); sys.exit(0)\n"
    "a = sys.argv; model = a[a.index('-m') + 1]; port = int(a[a.index('--port') + 1])\n"
    "ctx = int(a[a.index('-c') + 1]) if '-c' in a else 4096\n"
    "mode = model.rsplit('/', 1)[-1].split('.')[0]\n"
    "def sse(chunks):\n"
    "    return ''.join('data: ' + json.dumps({'choices': [c]}) + '\\n\\n' for c in chunks) + "
    "'data: [DONE]\\n\\n'\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    protocol_version = 'HTTP/1.1'\n"
    "    def send(self, code, body, ctype='application/json'):\n"
    "        b = body.encode() if isinstance(body, str) else body\n"
    "        self.send_response(code); self.send_header('Content-Type', ctype)\n"
    "        self.send_header('Content-Length', str(len(b))); self.end_headers(); "
    "self.wfile.write(b)\n"
    "    def do_GET(self):\n"
    "        if self.path.startswith('/props'):\n"
    "            if mode == 'badprops': return self.send(200, 'not json')\n"
    "            if mode == 'bigprops': return self.send(200, '{\"x\":\"' + 'a' * (5 << 20) + "
    "'\"}')\n"
    "            return self.send(200, json.dumps({'chat_template_caps': {'supports_tools': True},"
    " 'modalities': {'vision': False, 'audio': False}, 'total_slots': 1, 'build_info': 'fake',"
    " 'model_path': model, 'default_generation_settings': {'n_ctx': ctx}}))\n"
    "        return self.send(200, '{\"status\":\"ok\",\"data\":[]}')\n"
    "    def do_POST(self):\n"
    "        body = self.rfile.read(int(self.headers.get('Content-Length', 0)))\n"
    "        open(model + '.req', 'wb').write(body)\n"
    "        req = json.loads(body)\n"
    "        start = {'index': 0, 'delta': {'role': 'assistant', 'content': None}}\n"
    "        if req.get('tools'):\n"
    "            call = {'index': 0, 'id': 'fakecall0', 'type': 'function',\n"
    "                    'function': {'name': 'get_weather', 'arguments': '{}'}}\n"
    "            out = [start, {'index': 0, 'delta': {'tool_calls': [call]}},\n"
    "                   {'index': 0, 'delta': {}, 'finish_reason': 'tool_calls'}]\n"
    "        else:\n"
    "            out = [start, {'index': 0, 'delta': {'content': 'ok'}},\n"
    "                   {'index': 0, 'delta': {}, 'finish_reason': 'stop'}]\n"
    "        self.send(200, sse(out), 'text/event-stream')\n"
    "    def log_message(self, *args): pass\n"
    "http.server.ThreadingHTTPServer(('127.0.0.1', port), H).serve_forever()\n";

static int group_setup(void **state)
{
    have_engine = access(ENGINE, X_OK) == 0;
    snprintf(F.dir, sizeof F.dir, "/tmp/qr-llamabk-XXXXXX");
    if (!mkdtemp(F.dir))
        return -1;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "'%s' '%s' >/dev/null && '%s' '%s' llama-tiny.gguf "
             "bert-embed-tiny.gguf bert-rerank-tiny.gguf >/dev/null",
             QR_TEST_GEN_SCRIPTED, F.dir, QR_TEST_GEN_FIXTURES, F.dir);
    if (system(cmd) != 0)
        return -1;
    snprintf(F.scripted, sizeof F.scripted, "%s/scripted.gguf", F.dir);
    snprintf(F.draft, sizeof F.draft, "%s/scripted-draft.gguf", F.dir);
    snprintf(F.tiny, sizeof F.tiny, "%s/llama-tiny.gguf", F.dir);
    snprintf(F.embed, sizeof F.embed, "%s/bert-embed-tiny.gguf", F.dir);
    snprintf(F.rerank, sizeof F.rerank, "%s/bert-rerank-tiny.gguf", F.dir);
    snprintf(F.fail_sh, sizeof F.fail_sh, "%s/fail-engine.sh", F.dir);
    FILE *f = fopen(F.fail_sh, "w");
    if (!f)
        return -1;
    fputs("#!/bin/sh\nif [ \"$1\" = --version ]; then\n"
          "  echo 'version: 0.7.0 (build 11669, commit Debian)' >&2; exit 0\nfi\n"
          "echo 'fail-engine: refusing to start' >&2\nexit 3\n",
          f);
    fclose(f);
    chmod(F.fail_sh, 0755);
    /* a stand-in engine that misbehaves on purpose (python3, installed by scripts/setup) */
    snprintf(F.fake_py, sizeof F.fake_py, "%s/fake-engine.py", F.dir);
    f = fopen(F.fake_py, "w");
    if (!f)
        return -1;
    fputs(FAKE_ENGINE, f);
    fclose(f);
    chmod(F.fake_py, 0755);
    snprintf(F.fake_violate, sizeof F.fake_violate, "%s/violate.bin", F.dir);
    snprintf(F.fake_badprops, sizeof F.fake_badprops, "%s/badprops.bin", F.dir);
    snprintf(F.fake_bigprops, sizeof F.fake_bigprops, "%s/bigprops.bin", F.dir);
    const char *fakes[] = {F.fake_violate, F.fake_badprops, F.fake_bigprops};
    for (size_t i = 0; i < 3; i++) {
        f = fopen(fakes[i], "w");
        if (!f)
            return -1;
        fputs("not a model\n", f);
        fclose(f);
    }

    n_models = 0;
    models[n_models++] = (struct qr_llamacpp_model){
        .id = "test/scripted", .gguf_path = F.scripted, .mode = QR_LLAMACPP_CHAT};
    models[n_models++] = (struct qr_llamacpp_model){.id = "test/scripted-spec",
                                                    .gguf_path = F.scripted,
                                                    .draft_path = F.draft,
                                                    .mode = QR_LLAMACPP_CHAT};
    models[n_models++] = (struct qr_llamacpp_model){
        .id = "test/llama-tiny", .gguf_path = F.tiny, .mode = QR_LLAMACPP_CHAT};
    models[n_models++] = (struct qr_llamacpp_model){
        .id = "test/bert-embed", .gguf_path = F.embed, .mode = QR_LLAMACPP_EMBED};
    models[n_models++] = (struct qr_llamacpp_model){
        .id = "test/bert-rerank", .gguf_path = F.rerank, .mode = QR_LLAMACPP_RERANK};
    models[n_models++] =
        (struct qr_llamacpp_model){.id = "fake/violate", .gguf_path = F.fake_violate};
    models[n_models++] =
        (struct qr_llamacpp_model){.id = "fake/badprops", .gguf_path = F.fake_badprops};
    models[n_models++] =
        (struct qr_llamacpp_model){.id = "fake/bigprops", .gguf_path = F.fake_bigprops};

    F.base = event_base_new();
    struct qr_diag d = {{0}};
    if (!F.base || qr_http_client_new(F.base, &d, &F.http) != QR_OK)
        return -1;
    F.cfg.upstream_timeout_ms = 60000;
    struct qr_backend_env env = {F.base, F.http, &F.cfg, NULL};
    if (qr_backend_new(&qr_backend_llamacpp, &env, &d, &F.b) != QR_OK)
        return -1;
    if (have_engine) {
        struct qr_llamacpp_options o = base_options(ENGINE);
        if (qr_llamacpp_configure(F.b, &o, &d) != QR_OK) {
            fprintf(stderr, "configure: %s\n", d.msg);
            return -1;
        }
    }
    return 0;
}

static int group_teardown(void **state)
{
    qr_backend_free(F.b);
    qr_http_client_free(F.http);
    event_base_free(F.base);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", F.dir);
    return system(cmd) == 0 ? 0 : -1;
}

#define NEED_ENGINE()                                                                              \
    do {                                                                                           \
        if (!have_engine)                                                                          \
            skip();                                                                                \
    } while (0)

/* ---- describe, probe, list ---- */

struct probe_res {
    bool done;
    enum qr_err err;
    size_t n_models;
    bool has_embed;
};

static void on_probe(struct qr_backend *b, enum qr_err err, const struct qr_diag *d, void *arg)
{
    struct probe_res *r = arg;
    r->err = err;
    r->done = true;
}

static void on_models(struct qr_backend *b, enum qr_err err, const struct qr_backend_model *m,
                      size_t n, const struct qr_diag *d, void *arg)
{
    struct probe_res *r = arg;
    r->err = err;
    r->n_models = n;
    for (size_t i = 0; i < n; i++)
        r->has_embed |= strcmp(m[i].id, "test/bert-embed") == 0 && m[i].size_bytes > 0;
    r->done = true;
}

static bool probe_done(void *arg)
{
    return ((struct probe_res *) arg)->done;
}

static void test_describe_probe_list(void **state)
{
    NEED_ENGINE();
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *obj = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, obj);
    qr_backend_describe(F.b, doc, obj);
    size_t len;
    char *json = yyjson_mut_write(doc, 0, &len);
    struct qr_cap_descriptor d;
    struct qr_diag diag = {{0}};
    if (qr_cap_descriptor_parse(json, len, &diag, &d) != QR_OK)
        fail_msg("descriptor invalid: %s\n%s", diag.msg, json);
    free(json);
    yyjson_mut_doc_free(doc);
    assert_string_equal(d.id, "llama.cpp");
    assert_int_equal(d.kind, QR_CAP_KIND_LLAMACPP);
    assert_int_equal(d.execution_mode, QR_CAP_EXEC_PROCESS);
    assert_int_equal(d.state, QR_CAP_BACKEND_READY);
    assert_int_equal(d.caps[QR_CAP_STREAM_CONTENT], QR_CAP_SUPPORTED);
    assert_int_equal(d.caps[QR_CAP_PLACE_CPU], QR_CAP_SUPPORTED);
    assert_int_equal(d.caps[QR_CAP_TOOLS_CALLING], QR_CAP_CONDITIONAL);
    assert_int_equal(d.caps[QR_CAP_VISION], QR_CAP_CONDITIONAL);
    assert_int_equal(d.caps[QR_CAP_EMBEDDINGS], QR_CAP_CONDITIONAL);
    assert_int_equal(d.caps[QR_CAP_SPEC_DRAFT_MODEL], QR_CAP_CONDITIONAL);
    assert_true(qr_cap_descriptor_has_format(&d, "gguf"));
    assert_non_null(qr_llamacpp_engine(F.b));
    assert_string_equal(qr_llamacpp_engine(F.b)->version, "0.7.0");

    struct probe_res pr = {0};
    assert_int_equal(qr_backend_probe(F.b, 1000, on_probe, &pr), QR_OK);
    assert_false(pr.done); /* answered later, on the loop */
    assert_true(wait_for(probe_done, &pr, 2000));
    assert_int_equal(pr.err, QR_OK);
    assert_int_equal(F.b->state, QR_BACKEND_READY);

    memset(&pr, 0, sizeof pr);
    assert_int_equal(F.b->vt->list_models(F.b, 1000, on_models, &pr), QR_OK);
    assert_true(wait_for(probe_done, &pr, 2000));
    assert_int_equal(pr.err, QR_OK);
    assert_int_equal(pr.n_models, n_models);
    assert_true(pr.has_embed);
}

static void test_unknown_model_refused(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "no/such-model", "hi", QR_THINK_OFF);
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_NOT_FOUND);
    assert_int_equal(err.status, 404);
    assert_non_null(strstr(err.message, "'no/such-model'"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 0);
    /* a chat request to an embedding model is refused too, before anything loads */
    run_init(&r, "test/bert-embed", "hi", QR_THINK_OFF);
    assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
    assert_non_null(strstr(err.message, "embed"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 0);
    run_cleanup(&r);
}

/* ---- load on demand, chat, reasoning, tools, embeddings ---- */

static void test_load_on_demand_greeting(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    int64_t t0 = now_ms();
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_OK);
    /* queued while the process loads */
    struct qr_llamacpp_loaded row = {0};
    assert_true(loaded_row("test/scripted", &row));
    assert_int_equal(row.queued, 1);
    assert_int_not_equal(row.state, QR_LLAMA_PROC_READY);
    assert_true(row.bytes > 5000000 && row.weight_bytes > 0 && row.kv_bytes > 0);
    assert_true(wait_for(is_final, &r, WAIT_MS));
    int64_t t1 = now_ms();
    assert_false(r.ans.failed);
    assert_true(r.ans.done);
    assert_string_equal(buf_str(&r.ans.content), GREETING);
    assert_int_equal(r.ans.finish, QR_FINISH_STOP);
    assert_true(loaded_row("test/scripted", &row));
    assert_int_equal(row.state, QR_LLAMA_PROC_READY);
    assert_true(row.pid > 0 && row.port > 0);
    assert_int_equal(row.in_flight + row.queued, 0);
    assert_true(row.expires_at_ms > 0); /* the default idle TTL runs */
    print_message("load on demand: ready after %lld ms, first answer after %lld ms\n",
                  (long long) row.load_ms, (long long) (t1 - t0));
    run_cleanup(&r);

    /* the second request finds the process */
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    submit_wait(&r);
    assert_string_equal(buf_str(&r.ans.content), GREETING);
    struct qr_llamacpp_loaded again = {0};
    assert_true(loaded_row("test/scripted", &again));
    assert_int_equal(again.pid, row.pid);
    run_cleanup(&r);

    /* the loaded list as JSON */
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *arr = yyjson_mut_arr(doc);
    assert_int_equal(qr_llamacpp_loaded_json(F.b, doc, arr), QR_OK);
    assert_int_equal(yyjson_mut_arr_size(arr), 1);
    yyjson_mut_val *o = yyjson_mut_arr_get_first(arr);
    assert_string_equal(yyjson_mut_get_str(yyjson_mut_obj_get(o, "state")), "ready");
    assert_int_equal(yyjson_mut_get_sint(yyjson_mut_obj_get(o, "pid")), row.pid);
    yyjson_mut_doc_free(doc);
}

static void test_reasoning_then_content(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "test/scripted", "Hallo", QR_THINK_ON);
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_string_equal(buf_str(&r.ans.reasoning), "Der Nutzer grüßt. Ich antworte kurz: 2+2=4.\n");
    assert_string_equal(buf_str(&r.ans.content), "Die Antwort ist 4. Schöne Grüße!");
    assert_true(r.last_reasoning_seq > 0 && r.first_content_seq > r.last_reasoning_seq);
    run_cleanup(&r);
}

static void test_tool_call(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "test/scripted", "Wie ist das Wetter?", QR_THINK_OFF);
    r.tool.name = qr_slice_str("get_weather");
    r.tool.description = qr_slice_str("weather");
    r.tool.parameters = qr_slice_str("{\"type\":\"object\"}");
    r.req.tools = &r.tool;
    r.req.n_tools = 1;
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_int_equal(r.ans.finish, QR_FINISH_TOOL_CALLS);
    assert_int_equal(r.ans.n_calls, 1);
    assert_int_equal(r.ans.calls[0].id.len, 32);
    assert_string_equal(buf_str(&r.ans.calls[0].name), "get_weather");
    assert_string_equal(buf_str(&r.ans.calls[0].arguments), WEATHER);
    assert_true(r.ans.calls[0].ended);
    run_cleanup(&r);
}

static void test_draft_model(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "test/scripted-spec", "Hallo", QR_THINK_OFF);
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_string_equal(buf_str(&r.ans.content), GREETING);
    struct qr_llamacpp_loaded a = {0}, b = {0};
    assert_true(loaded_row("test/scripted-spec", &a));
    assert_true(loaded_row("test/scripted", &b));
    assert_int_not_equal(a.pid, b.pid); /* another engine configuration: another process */
    assert_true(a.weight_bytes > b.weight_bytes); /* the draft counts */
    run_cleanup(&r);
}

static void test_embeddings(void **state)
{
    NEED_ENGINE();
    struct run r;
    run_init(&r, "test/bert-embed", "", QR_THINK_UNSET);
    r.req.op = QR_OP_EMBED;
    r.req.stream = false;
    r.inputs[0] = qr_slice_str("hello world");
    r.inputs[1] = qr_slice_str("zweiter Text");
    r.req.inputs = r.inputs;
    r.req.n_inputs = 2;
    r.req.input_is_list = true;
    submit_wait(&r);
    if (r.ans.failed)
        fail_msg("embeddings failed: %s", buf_str(&r.ans.error_message));
    assert_int_equal(r.ans.n_vectors, 2);
    assert_true(r.ans.dims[0] > 0 && r.ans.dims[0] == r.ans.dims[1]);
    bool differ = false;
    for (size_t i = 0; i < r.ans.dims[0]; i++)
        differ |= r.ans.vectors[0][i] != r.ans.vectors[1][i];
    assert_true(differ);
    run_cleanup(&r);
}

/* Rerank goes only to a --rerank process, and only rerank goes there: every other pairing is
 * refused before anything loads, naming the model and reranking. */
static void test_rerank(void **state)
{
    NEED_ENGINE();
    static const struct {
        const char *model;
        enum qr_op op;
    } wrong[] = {
        {"test/bert-rerank", QR_OP_CHAT},
        {"test/bert-rerank", QR_OP_EMBED},
        {"test/scripted", QR_OP_RERANK},
        {"test/bert-embed", QR_OP_RERANK},
    };
    struct run r;
    for (size_t i = 0; i < QR_ARRAY_LEN(wrong); i++) {
        run_init(&r, wrong[i].model, "hi", QR_THINK_UNSET);
        r.req.op = wrong[i].op;
        r.req.stream = wrong[i].op == QR_OP_CHAT;
        r.inputs[0] = qr_slice_str("x");
        r.req.inputs = r.inputs;
        r.req.n_inputs = 1;
        r.req.query = qr_slice_str("q");
        struct qr_api_error err;
        assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
        assert_int_equal(err.status, 422);
        assert_string_equal(err.code, "capability_unsupported");
        assert_non_null(strstr(err.message, wrong[i].model));
        assert_non_null(strstr(err.message, "reranking"));
        assert_null(qr_llamacpp_find_proc(F.b, "test/bert-rerank"));
        run_cleanup(&r);
    }
    run_init(&r, "test/bert-rerank", "", QR_THINK_UNSET);
    r.req.op = QR_OP_RERANK;
    r.req.stream = false;
    r.req.query = qr_slice_str("hauptstadt");
    r.inputs[0] = qr_slice_str("Berlin ist die Hauptstadt");
    r.inputs[1] = qr_slice_str("Katzen schlafen");
    r.req.inputs = r.inputs;
    r.req.n_inputs = 2;
    submit_wait(&r);
    if (r.ans.failed)
        fail_msg("rerank failed: %s", buf_str(&r.ans.error_message));
    assert_true(r.ans.done);
    assert_int_equal(r.ans.n_ranked, 2);
    assert_true(r.ans.scores[0].set && r.ans.scores[1].set);
    assert_true(r.ans.has_usage && r.ans.usage.prompt_tokens > 0);
    run_cleanup(&r);
}

/* ---- lifecycle ---- */

static void test_keep_alive_zero_unloads_and_reloads(void **state)
{
    NEED_ENGINE();
    unload_all();
    struct run r;
    run_init(&r, "test/llama-tiny", "hello", QR_THINK_UNSET);
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    r.req.keep_alive = (struct qr_keep_alive){.set = true, .ms = 0};
    submit_wait(&r);
    assert_false(r.ans.failed);
    struct qr_llamacpp_loaded row = {0};
    struct qr_llama_proc *pp = qr_llamacpp_find_proc(F.b, "test/llama-tiny");
    pid_t pid = pp ? qr_llama_proc_pid(pp) : -1;
    int64_t t0 = now_ms();
    assert_true(wait_for(not_loaded, "test/llama-tiny", 10000));
    int64_t gone = now_ms() - t0;
    if (pid > 0) {
        for (int i = 0; i < 200 && !pid_gone(pid); i++)
            usleep(10000);
        assert_true(pid_gone(pid));
    }
    print_message("keep_alive 0: unloaded %lld ms after the answer\n", (long long) gone);
    run_cleanup(&r);

    /* the next request loads it again */
    run_init(&r, "test/llama-tiny", "hello", QR_THINK_UNSET);
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_true(loaded_row("test/llama-tiny", &row));
    assert_int_not_equal(row.pid, pid);
    assert_true(row.expires_at_ms > 0);
    run_cleanup(&r);

    /* a keep_alive duration: still there before it runs out, gone after */
    run_init(&r, "test/llama-tiny", "hello", QR_THINK_UNSET);
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    r.req.keep_alive = (struct qr_keep_alive){.set = true, .ms = 400};
    submit_wait(&r);
    assert_false(r.ans.failed);
    int64_t t_done = now_ms();
    assert_true(loaded_row("test/llama-tiny", &row));
    assert_true(row.expires_at_ms > 0);
    run_for(150);
    assert_true(loaded_row("test/llama-tiny", NULL));
    assert_true(wait_for(not_loaded, "test/llama-tiny", 5000));
    int64_t ttl = now_ms() - t_done;
    print_message("keep_alive 400 ms: unloaded after %lld ms\n", (long long) ttl);
    assert_true(ttl >= 390);
    run_cleanup(&r);

    /* a negative keep_alive keeps it loaded: no expiry */
    run_init(&r, "test/llama-tiny", "hello", QR_THINK_UNSET);
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    r.req.keep_alive = (struct qr_keep_alive){.set = true, .forever = true};
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_true(loaded_row("test/llama-tiny", &row));
    assert_int_equal(row.expires_at_ms, -1);
    run_cleanup(&r);

    /* unload now through the API */
    bool deferred = true;
    assert_int_equal(qr_llamacpp_unload(F.b, "test/llama-tiny", &deferred, NULL), QR_OK);
    assert_false(deferred);
    assert_true(wait_for(not_loaded, "test/llama-tiny", 10000));
    struct qr_diag d = {{0}};
    assert_int_equal(qr_llamacpp_unload(F.b, "test/llama-tiny", NULL, &d), QR_ERR_NOT_FOUND);
}

static void load_one(const char *id, const char *text)
{
    struct run r;
    run_init(&r, id, text, QR_THINK_OFF);
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    submit_wait(&r);
    if (r.ans.failed)
        fail_msg("%s failed: %s", id, buf_str(&r.ans.error_message));
    run_cleanup(&r);
    usleep(2000); /* distinct last-used times */
}

static void reconfigure_budget(uint64_t budget)
{
    struct qr_llamacpp_options o = base_options(ENGINE);
    o.memory_budget = budget;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
}

static void test_budget_lru_eviction(void **state)
{
    NEED_ENGINE();
    unload_all();
    load_one("test/scripted", "Hallo");
    load_one("test/llama-tiny", "hi");
    load_one("test/scripted-spec", "Hallo");
    struct qr_llamacpp_loaded s = {0}, t = {0}, sp = {0};
    assert_true(loaded_row("test/scripted", &s));
    assert_true(loaded_row("test/llama-tiny", &t));
    assert_true(loaded_row("test/scripted-spec", &sp));
    unload_all();

    /* room for scripted + llama-tiny or scripted + scripted-spec, not for all three */
    assert_true(sp.bytes > s.bytes && sp.bytes + 1000 > t.bytes);
    reconfigure_budget(s.bytes + sp.bytes + 1000);
    load_one("test/scripted", "Hallo");
    load_one("test/llama-tiny", "hi");
    /* scripted is the least recently used, but busy (the script's endless mode, so it cannot end
     * on its own before the check): it must stay */
    struct run busy;
    run_init(&busy, "test/scripted", "[[long]] zähle", QR_THINK_OFF);
    busy.req.max_tokens = (struct qr_opt_i64){true, 100000};
    busy.stop_after = 3;
    struct qr_api_error err;
    assert_int_equal(submit(&busy, &err), QR_OK);
    assert_true(wait_for(wants_cancel, &busy, WAIT_MS));
    assert_false(busy.final);
    pid_t busy_pid = qr_llama_proc_pid(qr_llamacpp_find_proc(F.b, "test/scripted"));
    /* scripted-spec needs the room: llama-tiny (idle) goes, scripted (busy) stays. The choice is
     * made inside submit, while the stream of scripted runs. */
    struct run spec;
    run_init(&spec, "test/scripted-spec", "Hallo", QR_THINK_OFF);
    assert_int_equal(submit(&spec, &err), QR_OK);
    assert_false(busy.final);
    assert_true(loaded_row("test/scripted", &s));
    assert_int_equal(s.state, QR_LLAMA_PROC_READY);
    assert_int_equal(s.in_flight, 1);
    assert_true(loaded_row("test/llama-tiny", &t));
    assert_int_equal(t.state, QR_LLAMA_PROC_STOPPING);
    assert_true(wait_for(is_final, &spec, WAIT_MS));
    assert_false(spec.ans.failed);
    assert_string_equal(buf_str(&spec.ans.content), GREETING);
    assert_true(wait_for(not_loaded, "test/llama-tiny", 10000));
    assert_true(loaded_row("test/scripted", &s));
    assert_int_equal(s.pid, busy_pid);
    assert_true(loaded_row("test/scripted-spec", NULL));
    assert_false(busy.ans.failed); /* the busy stream was never disturbed */
    run_cleanup(&busy);
    run_cleanup(&spec);

    /* a model larger than the whole budget is refused naming the sizes */
    unload_all();
    reconfigure_budget(sp.bytes / 2);
    struct run r;
    run_init(&r, "test/scripted-spec", "Hallo", QR_THINK_OFF);
    assert_int_not_equal(submit(&r, &err), QR_OK);
    assert_non_null(strstr(err.message, "needs"));
    assert_non_null(strstr(err.message, "budget"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 0);
    run_cleanup(&r);
    reconfigure_budget(0);
}

/* ---- crash and cancel ---- */

static bool proc_ready(void *arg)
{
    struct qr_llama_proc *p = qr_llamacpp_find_proc(F.b, arg);
    return p && qr_llama_proc_state(p) == QR_LLAMA_PROC_READY;
}

static void test_kill_mid_stream(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    assert_true(wait_for(proc_ready, "test/scripted", WAIT_MS));
    struct qr_llama_proc *proc = qr_llamacpp_find_proc(F.b, "test/scripted");
    pid_t pid = qr_llama_proc_pid(proc);
    struct run r;
    run_init(&r, "test/scripted", "[[long]] zähle", QR_THINK_OFF);
    r.req.max_tokens = (struct qr_opt_i64){true, 100000};
    r.kill_after = 5;
    r.kill_pid = pid;
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_OK);
    assert_true(wait_for(is_final, &r, WAIT_MS));
    assert_true(r.t_kill > 0);
    assert_true(r.ans.failed);
    assert_false(r.ans.done);
    int64_t after = r.t_final - r.t_kill;
    print_message("kill -9 mid-stream: ERROR %lld ms after the kill: %s\n", (long long) after,
                  buf_str(&r.ans.error_message));
    assert_true(after < 1000);
    assert_non_null(strstr(buf_str(&r.ans.error_message), "crashed"));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "signal 9"));
    assert_string_equal(buf_str(&r.ans.error_code), "engine_crashed");
    run_cleanup(&r);

    /* the next request is served after the restart */
    int64_t t0 = now_ms();
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_string_equal(buf_str(&r.ans.content), GREETING);
    struct qr_llamacpp_loaded row = {0};
    assert_true(loaded_row("test/scripted", &row));
    assert_int_not_equal(row.pid, pid);
    assert_int_equal(row.crashes, 1);
    print_message("restart: next answer %lld ms after the crash report\n",
                  (long long) (now_ms() - t0));
    run_cleanup(&r);
}

/* GET /slots of the process: true when no slot is processing (*busy_out: any slot busy). */
struct slots {
    bool done;
    int status;
    struct qr_buf body;
};

static bool s_resp(struct qr_http_call *c, int status, const struct qr_http_header *h, size_t n,
                   void *arg)
{
    ((struct slots *) arg)->status = status;
    return true;
}

static bool s_data(struct qr_http_call *c, const char *d, size_t n, void *arg)
{
    return qr_buf_append(&((struct slots *) arg)->body, d, n) == QR_OK;
}

static void s_done(struct qr_http_call *c, enum qr_err err, const struct qr_diag *d, void *arg)
{
    ((struct slots *) arg)->done = true;
}

static bool slots_done(void *arg)
{
    return ((struct slots *) arg)->done;
}

/* 1: a slot processes, 0: all idle, -1: no answer */
static int slot_busy(struct qr_llama_proc *p)
{
    char url[128], auth[128];
    snprintf(url, sizeof url, "%s/slots", qr_llama_proc_base_url(p));
    snprintf(auth, sizeof auth, "Bearer %s", qr_llama_proc_api_key(p));
    struct qr_http_header h[1] = {{QR_SLICE_LIT("Authorization"), qr_slice_str(auth)}};
    struct slots s = {0};
    qr_buf_init(&s.body, 1 << 20);
    struct qr_http_call_opts o = {.method = "GET",
                                  .url = url,
                                  .headers = h,
                                  .n_headers = 1,
                                  .connect_timeout_ms = 2000,
                                  .timeout_ms = 2000,
                                  .on_response = s_resp,
                                  .on_data = s_data,
                                  .on_done = s_done,
                                  .arg = &s};
    struct qr_http_call *call;
    struct qr_diag d;
    int res = -1;
    if (qr_http_call_start(F.http, &o, &d, &call) != QR_OK)
        goto out;
    if (!wait_for(slots_done, &s, 3000)) {
        qr_http_call_cancel(call);
        goto out;
    }
    if (s.status != 200)
        goto out;
    yyjson_doc *doc = yyjson_read(s.body.ptr, s.body.len, 0);
    yyjson_val *arr = yyjson_doc_get_root(doc), *it;
    size_t i, max;
    res = yyjson_is_arr(arr) ? 0 : -1;
    yyjson_arr_foreach(arr, i, max, it) if (yyjson_get_bool(yyjson_obj_get(it, "is_processing")))
        res = 1;
    yyjson_doc_free(doc);
out:
    qr_buf_cleanup(&s.body);
    return res;
}

static void test_cancel_frees_slot(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    struct qr_llama_proc *proc = qr_llamacpp_find_proc(F.b, "test/scripted");
    assert_non_null(proc);
    struct run r;
    run_init(&r, "test/scripted", "[[long]] zähle", QR_THINK_OFF);
    r.req.max_tokens = (struct qr_opt_i64){true, 100000};
    r.stop_after = 20;
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_OK);
    assert_true(wait_for(wants_cancel, &r, WAIT_MS));
    assert_false(r.final);
    assert_int_equal(slot_busy(proc), 1); /* decoding when we cancel */
    int64_t t0 = now_ms();
    qr_job_cancel(r.job);
    r.job = NULL;
    int busy = 1;
    while (busy != 0 && now_ms() - t0 < 3000) {
        busy = slot_busy(proc);
        if (busy)
            run_for(20);
    }
    int64_t idle_after = now_ms() - t0;
    print_message("cancel mid-decode: slot idle %lld ms after qr_job_cancel\n",
                  (long long) idle_after);
    assert_int_equal(busy, 0);
    assert_true(idle_after < 1000);
    assert_false(r.final); /* no event after cancel */
    struct qr_llamacpp_loaded row = {0};
    assert_true(loaded_row("test/scripted", &row));
    assert_int_equal(row.in_flight, 0);
    run_cleanup(&r);
}

/* A transfer that breaks while its process lives on (here: the engine is stopped and the
 * upstream times out) keeps its own error, delivered after the crash grace. */
static void test_broken_transfer_without_crash(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    struct qr_llama_proc *proc = qr_llamacpp_find_proc(F.b, "test/scripted");
    assert_non_null(proc);
    pid_t pid = qr_llama_proc_pid(proc);
    uint64_t saved = F.cfg.upstream_timeout_ms;
    F.cfg.upstream_timeout_ms = 800;
    struct run r;
    run_init(&r, "test/scripted", "[[long]] zähle", QR_THINK_OFF);
    r.req.max_tokens = (struct qr_opt_i64){true, 100000};
    r.stop_after = 5;
    struct qr_api_error err;
    int64_t t0 = now_ms();
    assert_int_equal(submit(&r, &err), QR_OK);
    assert_true(wait_for(wants_cancel, &r, WAIT_MS));
    assert_false(r.final);
    kill(pid, SIGSTOP);
    assert_true(wait_for(is_final, &r, 5000));
    kill(pid, SIGCONT);
    F.cfg.upstream_timeout_ms = saved;
    assert_true(r.ans.failed);
    assert_string_equal(buf_str(&r.ans.error_code), "upstream_timeout");
    print_message("broken transfer: ERROR %lld ms after submit (timeout 800 + grace 300)\n",
                  (long long) (r.t_final - t0));
    assert_true(r.t_final - t0 >= 800 + 300 - 20);
    assert_true(proc_ready("test/scripted"));
    struct qr_llamacpp_loaded row = {0};
    assert_true(loaded_row("test/scripted", &row));
    assert_int_equal(row.in_flight, 0);
    run_cleanup(&r);
    unload_all();
}

/* Requests waiting for a load are bounded. */
static void test_load_queue_bounded(void **state)
{
    NEED_ENGINE();
    unload_all();
    struct qr_llamacpp_options o = base_options(ENGINE);
    o.max_queue = 1;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    struct run a, b;
    run_init(&a, "test/llama-tiny", "hi", QR_THINK_UNSET);
    run_init(&b, "test/llama-tiny", "hi", QR_THINK_UNSET);
    a.req.max_tokens = b.req.max_tokens = (struct qr_opt_i64){true, 4};
    struct qr_api_error err;
    assert_int_equal(submit(&a, &err), QR_OK);
    assert_int_equal(submit(&b, &err), QR_ERR_BUSY);
    assert_int_equal(err.status, 503);
    assert_string_equal(err.code, "queue_full");
    assert_true(wait_for(is_final, &a, WAIT_MS));
    assert_false(a.ans.failed);
    /* once ready, requests go straight to the engine */
    assert_int_equal(submit(&b, &err), QR_OK);
    assert_true(wait_for(is_final, &b, WAIT_MS));
    assert_false(b.ans.failed);
    run_cleanup(&a);
    run_cleanup(&b);
    o.max_queue = 0;
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
}

/* Is there a word w followed by next in argv? */
static bool argv_pair(const char *const *argv, size_t n, const char *w, const char *next)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (!strcmp(argv[i], w) && !strcmp(argv[i + 1], next))
            return true;
    }
    return false;
}

/* The placement plan on a given host (option host): two NUMA nodes and an accelerator whose
 * memory is unknown give --numa distribute and --device none besides -ngl 0, and the real engine
 * serves with them; a host with too little RAM refuses the load with the numbers and starts
 * nothing. The daemon always discovers the real host; only a test can hand one in. */
static void test_placement_given_host(void **state)
{
    NEED_ENGINE();
    unload_all();
    struct qr_placement_host h = {
        .physical_cores = 2, .logical_cpus = 2, .n_numa = 2, .n_accel = 1};
    h.ram_total = 64 * QR_PLACEMENT_GIB;
    h.ram_available = 60 * QR_PLACEMENT_GIB;
    h.numa[0] =
        (struct qr_placement_numa){.id = 0, .cpus = 1, .memory_bytes = 32 * QR_PLACEMENT_GIB};
    h.numa[1] =
        (struct qr_placement_numa){.id = 1, .cpus = 1, .memory_bytes = 32 * QR_PLACEMENT_GIB};
    snprintf(h.accel[0].name, sizeof h.accel[0].name, "NVIDIA card0"); /* VRAM unknown */
    struct qr_llamacpp_options o = base_options(ENGINE);
    o.host = &h;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    load_one("test/llama-tiny", "hi");
    struct qr_llamacpp_loaded row = {0};
    assert_true(loaded_row("test/llama-tiny", &row));
    assert_int_equal(row.state, QR_LLAMA_PROC_READY);
    assert_true(row.planned);
    assert_string_equal(row.plan_decision, "cpu_only");
    assert_int_equal(row.plan_threads, 1); /* the process's threads */
    const char *pa[QR_PLACEMENT_MAX_ARGS];
    for (size_t i = 0; i < row.plan_n_args; i++)
        pa[i] = row.plan_args[i];
    assert_true(argv_pair(pa, row.plan_n_args, "-ngl", "0"));
    assert_true(argv_pair(pa, row.plan_n_args, "--device", "none"));
    assert_true(argv_pair(pa, row.plan_n_args, "--numa", "distribute"));
    size_t n = 0;
    const char *const *argv = qr_llama_proc_args(qr_llamacpp_find_proc(F.b, "test/llama-tiny"), &n);
    assert_true(argv_pair(argv, n, "--numa", "distribute"));
    assert_true(argv_pair(argv, n, "--device", "none"));
    assert_true(argv_pair(argv, n, "-t", "1"));
    unload_all();

    /* 4 GiB of RAM, 512 MiB free: the reserve (1 GiB) leaves nothing */
    struct qr_placement_host small = {.physical_cores = 1, .logical_cpus = 1};
    small.ram_total = 4 * QR_PLACEMENT_GIB;
    small.ram_available = QR_PLACEMENT_GIB / 2;
    o.host = &small;
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    struct run r;
    run_init(&r, "test/llama-tiny", "hi", QR_THINK_UNSET);
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_TOO_LARGE);
    print_message("refused: %d %s: %s\n", err.status, err.code, err.message);
    assert_int_equal(err.status, 507);
    assert_string_equal(err.code, "insufficient_memory");
    assert_non_null(strstr(err.message, "cannot load model 'test/llama-tiny' on this host: does "
                                        "not fit: needs "));
    assert_non_null(strstr(err.message, "0 B usable (available 512.0 MiB, reserve 1.00 GiB)"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 0); /* nothing started */
    run_cleanup(&r);
    o.host = NULL;
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
}

static void test_engine_fails_to_start(void **state)
{
    struct qr_backend *keep = F.b;
    struct qr_backend_env env = {F.base, F.http, &F.cfg, NULL};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_backend_new(&qr_backend_llamacpp, &env, &d, &F.b), QR_OK);
    /* unconfigured: refused, unavailable */
    struct run r;
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_UNAVAILABLE);
    struct qr_llamacpp_options o = base_options(F.fail_sh);
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    int64_t t0 = now_ms();
    assert_int_equal(submit(&r, &err), QR_OK);
    assert_true(wait_for(is_final, &r, 10000));
    assert_true(r.ans.failed);
    print_message("failing engine: error after %lld ms: %s\n", (long long) (now_ms() - t0),
                  buf_str(&r.ans.error_message));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "cannot load model 'test/scripted'"));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "code 3"));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "refusing to start"));
    assert_true(wait_for(nothing_loaded, NULL, 5000));
    run_cleanup(&r);

    /* an engine that is not there: configure fails, the backend says why */
    o.engine_path = "/nonexistent/llama-server";
    assert_int_not_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    assert_int_equal(F.b->state, QR_BACKEND_UNAVAILABLE);
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    assert_int_equal(submit(&r, &err), QR_ERR_UNAVAILABLE);
    assert_non_null(strstr(err.message, "/nonexistent/llama-server"));
    run_cleanup(&r);
    /* a probe still pending when the backend is freed is answered as cancelled */
    struct probe_res pr = {0};
    assert_int_equal(qr_backend_probe(F.b, 1000, on_probe, &pr), QR_OK);
    qr_backend_free(F.b);
    F.b = keep;
    assert_true(pr.done);
    assert_int_equal(pr.err, QR_ERR_CANCELLED);
}

/* ---- the engine's evidence (GET /props) and failing closed on it ---- */

static void test_props_parse_hostile(void **state)
{
    struct qr_llamacpp_props pr;
    struct qr_diag d = {{0}};
    static const char *const bad[] = {
        "",
        "not json",
        "[1,2]",
        "{\"default_generation_settings\":{\"n_ctx\":512}}", /* no caps */
        "{\"chat_template_caps\":[],\"default_generation_settings\":{\"n_ctx\":512}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{}}", /* no n_ctx */
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":0}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":-5}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":4294967296}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":\"512\"}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":512.5}}",
        "{\"chat_template_caps\":{},\"default_generation_settings\":{\"n_ctx\":512}", /* cut */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&pr, 0xAB, sizeof pr);
        if (qr_llamacpp_props_parse(bad[i], strlen(bad[i]), &pr, &d) != QR_ERR_PARSE)
            fail_msg("accepted: %s", bad[i]);
        assert_false(pr.valid);
        assert_false(pr.caps[QR_LLAMACPP_TCAP_TOOLS]);
        assert_int_equal(pr.n_ctx_slot, 0);
    }
    /* only a JSON true counts; a long path is cut on a character boundary; control bytes go */
    char body[4096];
    char path[1400];
    size_t o = 0;
    while (o + 2 < 1100)
        o += (size_t) snprintf(path + o, sizeof path - o, "ß");
    snprintf(body, sizeof body,
             "{\"chat_template_caps\":{\"supports_tools\":\"true\",\"supports_system_role\":true,"
             "\"supports_parallel_tool_calls\":1},\"modalities\":{\"vision\":true,\"audio\":null},"
             "\"default_generation_settings\":{\"n_ctx\":2048},\"total_slots\":2,"
             "\"build_info\":\"b1\\u0007x\",\"model_path\":\"%s\"}",
             path);
    assert_int_equal(qr_llamacpp_props_parse(body, strlen(body), &pr, &d), QR_OK);
    assert_true(pr.valid);
    assert_false(pr.caps[QR_LLAMACPP_TCAP_TOOLS]);
    assert_false(pr.caps[QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS]);
    assert_true(pr.caps[QR_LLAMACPP_TCAP_SYSTEM_ROLE]);
    assert_true(pr.vision);
    assert_false(pr.audio);
    assert_int_equal(pr.n_ctx_slot, 2048);
    assert_int_equal(pr.total_slots, 2);
    assert_string_equal(pr.build_info, "b1?x");
    size_t pl = strlen(pr.model_path);
    assert_true(pl > 1000 && pl < sizeof pr.model_path && pl % 2 == 0); /* whole "ß" only */
    assert_string_equal(qr_llamacpp_tcap_name(QR_LLAMACPP_TCAP_TOOLS), "supports_tools");
    /* larger than the cap: refused before parsing */
    assert_int_equal(qr_llamacpp_props_parse(body, QR_LLAMACPP_PROPS_MAX_BYTES + 1, &pr, &d),
                     QR_ERR_PARSE);
}

static void test_props_captured(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    load_one("test/llama-tiny", "hi");
    struct qr_llamacpp_loaded s = {0}, t = {0};
    assert_true(loaded_row("test/scripted", &s));
    assert_true(loaded_row("test/llama-tiny", &t));
    assert_true(s.props.valid);
    assert_false(s.props.pending);
    assert_true(s.props.caps[QR_LLAMACPP_TCAP_TOOLS]);
    assert_true(s.props.caps[QR_LLAMACPP_TCAP_TOOL_CALLS]);
    assert_true(s.props.caps[QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS]);
    assert_true(s.props.caps[QR_LLAMACPP_TCAP_PRESERVE_REASONING]);
    assert_true(s.props.caps[QR_LLAMACPP_TCAP_SYSTEM_ROLE]);
    assert_false(s.props.vision);
    assert_false(s.props.audio);
    assert_int_equal(s.props.n_ctx_slot, 4096); /* -c 4096 -np 1 */
    assert_int_equal(s.props.total_slots, 1);
    assert_string_equal(s.props.model_path, F.scripted);
    assert_true(strncmp(s.props.build_info, "b", 1) == 0 && strlen(s.props.build_info) > 1);
    /* llama-tiny's template has no tool syntax */
    assert_true(t.props.valid);
    assert_false(t.props.caps[QR_LLAMACPP_TCAP_TOOLS]);
    assert_false(t.props.caps[QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS]);
    assert_true(t.props.caps[QR_LLAMACPP_TCAP_SYSTEM_ROLE]);
    print_message("/props: scripted supports_tools=%d parallel=%d n_ctx_slot=%u build %s; "
                  "llama-tiny supports_tools=%d\n",
                  s.props.caps[QR_LLAMACPP_TCAP_TOOLS],
                  s.props.caps[QR_LLAMACPP_TCAP_PARALLEL_TOOL_CALLS], s.props.n_ctx_slot,
                  s.props.build_info, t.props.caps[QR_LLAMACPP_TCAP_TOOLS]);

    /* the same in the loaded-model JSON */
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *arr = yyjson_mut_arr(doc);
    assert_int_equal(qr_llamacpp_loaded_json(F.b, doc, arr), QR_OK);
    size_t i, max;
    yyjson_mut_val *o;
    bool seen = false;
    yyjson_mut_arr_foreach(arr, i, max, o)
    {
        if (strcmp(yyjson_mut_get_str(yyjson_mut_obj_get(o, "model")), "test/scripted") != 0)
            continue;
        yyjson_mut_val *e = yyjson_mut_obj_get(o, "engine");
        assert_true(yyjson_mut_get_bool(yyjson_mut_obj_get(e, "valid")));
        yyjson_mut_val *caps = yyjson_mut_obj_get(e, "chat_template_caps");
        assert_true(yyjson_mut_get_bool(yyjson_mut_obj_get(caps, "supports_tools")));
        assert_true(
            yyjson_mut_is_false(yyjson_mut_obj_get(yyjson_mut_obj_get(e, "modalities"), "vision")));
        assert_int_equal(yyjson_mut_get_uint(yyjson_mut_obj_get(e, "n_ctx_slot")), 4096);
        seen = true;
    }
    assert_true(seen);
    yyjson_mut_doc_free(doc);
}

static void set_tools(struct run *r, bool both)
{
    r->tools[0] = (struct qr_tool){.name = QR_SLICE_LIT("get_weather"),
                                   .description = QR_SLICE_LIT("weather"),
                                   .parameters = QR_SLICE_LIT("{\"type\":\"object\"}")};
    r->tools[1] = (struct qr_tool){.name = QR_SLICE_LIT("get_time"),
                                   .description = QR_SLICE_LIT("time"),
                                   .parameters = QR_SLICE_LIT("{\"type\":\"object\"}")};
    r->req.tools = r->tools;
    r->req.n_tools = both ? 2 : 1;
}

/* Lines of the engine's own log that start a task: proof of whether a request reached it. */
static unsigned engine_tasks(const char *id)
{
    struct qr_llama_proc *p = qr_llamacpp_find_proc(F.b, id);
    static char tail[1 << 16];
    if (!p)
        return 0;
    qr_llama_proc_tail(p, 0, tail, sizeof tail);
    unsigned n = 0;
    for (const char *c = tail; (c = strstr(c, "launch_slot_")); c++)
        n++;
    return n;
}

/* The same once the engine's output of earlier requests has all been read: the log reaches the
 * ring through a pipe read on the loop, possibly after the answer did. */
static unsigned engine_tasks_settled(const char *id)
{
    unsigned n = engine_tasks(id);
    for (int i = 0; i < 40; i++) {
        run_for(100);
        unsigned again = engine_tasks(id);
        if (again == n)
            break;
        n = again;
    }
    return n;
}

static void test_tools_refused_without_tool_syntax(void **state)
{
    NEED_ENGINE();
    load_one("test/llama-tiny", "hi");
    struct qr_llamacpp_loaded before = {0}, after = {0};
    assert_true(loaded_row("test/llama-tiny", &before));
    unsigned tasks = engine_tasks_settled("test/llama-tiny");
    assert_true(tasks >= 1);
    struct run r;
    run_init(&r, "test/llama-tiny", "Wie ist das Wetter?", QR_THINK_UNSET);
    set_tools(&r, false);
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
    assert_int_equal(err.status, 422);
    assert_string_equal(err.code, "capability_unsupported");
    assert_non_null(strstr(err.message, "tools.calling"));
    assert_non_null(strstr(err.message, "no tool syntax"));
    assert_non_null(strstr(err.message, "silently drop the tools"));
    print_message("tools refused: %s\n", err.message);
    run_for(100);
    assert_true(loaded_row("test/llama-tiny", &after));
    assert_int_equal(after.requests, before.requests); /* never forwarded */
    assert_int_equal(after.refused, before.refused + 1);
    assert_int_equal(engine_tasks_settled("test/llama-tiny"), tasks);
    run_cleanup(&r);

    /* tool_choice none: the tools are not asked for, the request is served */
    run_init(&r, "test/llama-tiny", "hi", QR_THINK_UNSET);
    set_tools(&r, false);
    r.req.tool_choice.kind = QR_TOOL_CHOICE_NONE;
    r.req.max_tokens = (struct qr_opt_i64){true, 4};
    submit_wait(&r);
    assert_false(r.ans.failed);
    run_cleanup(&r);

    /* not loaded yet: it loads, the evidence decides, the queued request gets START + ERROR
     * and nothing reaches the engine */
    assert_int_equal(qr_llamacpp_unload(F.b, "test/llama-tiny", NULL, NULL), QR_OK);
    assert_true(wait_for(not_loaded, "test/llama-tiny", 10000));
    run_init(&r, "test/llama-tiny", "Wie ist das Wetter?", QR_THINK_UNSET);
    set_tools(&r, false);
    submit_wait(&r);
    assert_true(r.ans.failed);
    assert_int_equal(r.ans.error_status, 422);
    assert_string_equal(buf_str(&r.ans.error_code), "capability_unsupported");
    assert_non_null(strstr(buf_str(&r.ans.error_message), "tools.calling"));
    assert_true(loaded_row("test/llama-tiny", &after));
    assert_int_equal(after.requests, 0);
    assert_int_equal(after.refused, 1);
    assert_int_equal(engine_tasks_settled("test/llama-tiny"), 0);
    run_cleanup(&r);

    /* image and audio parts: the engine reports neither modality for the scripted model */
    load_one("test/scripted", "Hallo");
    static const enum qr_part_kind kinds[] = {QR_PART_IMAGE, QR_PART_AUDIO};
    static const char *const names[] = {"multimodal.vision", "multimodal.audio"};
    for (int k = 0; k < 2; k++) {
        run_init(&r, "test/scripted", "Was siehst du?", QR_THINK_OFF);
        r.media = (struct qr_part){.kind = kinds[k], .data = QR_SLICE_LIT("AAAA")};
        struct qr_part parts[2] = {r.part, r.media};
        r.msg.parts = parts;
        r.msg.n_parts = 2;
        assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
        assert_int_equal(err.status, 422);
        assert_string_equal(err.code, "capability_unsupported");
        assert_non_null(strstr(err.message, names[k]));
        run_cleanup(&r);
    }
}

static void test_parallel_false_delivers_one_call(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    /* the engine returns two calls for [[parallel]] (it does not enforce the flag) */
    struct run r;
    run_init(&r, "test/scripted", "Wetter und Uhrzeit [[parallel]]", QR_THINK_OFF);
    set_tools(&r, true);
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_int_equal(r.ans.n_calls, 2);
    run_cleanup(&r);

    struct qr_llamacpp_loaded before = {0}, after = {0};
    assert_true(loaded_row("test/scripted", &before));
    run_init(&r, "test/scripted", "Wetter und Uhrzeit [[parallel]]", QR_THINK_OFF);
    set_tools(&r, true);
    r.req.parallel_tool_calls = QR_FALSE;
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_true(r.ans.done);
    assert_int_equal(r.ans.finish, QR_FINISH_TOOL_CALLS);
    assert_int_equal(r.ans.n_calls, 1);
    assert_string_equal(buf_str(&r.ans.calls[0].name), "get_weather");
    assert_string_equal(buf_str(&r.ans.calls[0].arguments), WEATHER);
    assert_true(r.ans.calls[0].ended);
    assert_true(loaded_row("test/scripted", &after));
    assert_int_equal(after.tool_calls_dropped, before.tool_calls_dropped + 1);
    run_cleanup(&r);
}

static void test_named_tool_choice(void **state)
{
    NEED_ENGINE();
    load_one("test/scripted", "Hallo");
    /* the script calls get_weather; the client names get_time: the engine is offered only
     * get_time, so whatever it calls, no call to another tool reaches the client */
    struct run r;
    run_init(&r, "test/scripted", "Wie ist das Wetter?", QR_THINK_OFF);
    set_tools(&r, true);
    r.req.tool_choice = (struct qr_tool_choice){QR_TOOL_CHOICE_FUNCTION, QR_SLICE_LIT("get_time")};
    r.req.max_tokens = (struct qr_opt_i64){true, 300};
    submit_wait(&r);
    print_message("named tool_choice get_time on a get_weather script: %s, %zu call(s), first "
                  "'%s' %s, finish %s %s\n",
                  r.ans.failed ? "error" : "done", r.ans.n_calls,
                  r.ans.n_calls ? buf_str(&r.ans.calls[0].name) : "-",
                  r.ans.n_calls ? buf_str(&r.ans.calls[0].arguments) : "",
                  qr_finish_str(r.ans.finish), buf_str(&r.ans.error_code));
    if (r.ans.failed)
        assert_string_equal(buf_str(&r.ans.error_code), "tool_choice_violated");
    else
        assert_true(r.ans.n_calls >= 1);
    for (size_t i = 0; i < r.ans.n_calls; i++)
        assert_string_equal(buf_str(&r.ans.calls[i].name), "get_time");
    run_cleanup(&r);

    /* naming get_weather: the script's own call comes back unchanged */
    run_init(&r, "test/scripted", "Wie ist das Wetter?", QR_THINK_OFF);
    set_tools(&r, true);
    r.req.tool_choice =
        (struct qr_tool_choice){QR_TOOL_CHOICE_FUNCTION, QR_SLICE_LIT("get_weather")};
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_int_equal(r.ans.n_calls, 1);
    assert_string_equal(buf_str(&r.ans.calls[0].name), "get_weather");
    assert_string_equal(buf_str(&r.ans.calls[0].arguments), WEATHER);
    run_cleanup(&r);

    /* a name the request does not offer is refused before anything is sent */
    run_init(&r, "test/scripted", "Wie ist das Wetter?", QR_THINK_OFF);
    set_tools(&r, false);
    r.req.tool_choice = (struct qr_tool_choice){QR_TOOL_CHOICE_FUNCTION, QR_SLICE_LIT("get_time")};
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
    assert_int_equal(err.status, 400);
    assert_non_null(strstr(err.message, "'get_time'"));
    run_cleanup(&r);
}

static void test_context_admission(void **state)
{
    NEED_ENGINE();
    unload_all();
    /* not loaded: refused against the plan (-c 4096 -np 1), nothing starts */
    struct run r;
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    r.req.context_len = (struct qr_opt_i64){true, 8192};
    struct qr_api_error err;
    assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
    assert_int_equal(err.status, 422);
    assert_string_equal(err.code, "context_exceeded");
    assert_non_null(strstr(err.message, "8192"));
    assert_non_null(strstr(err.message, "4096"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 0);
    print_message("context admission: %s\n", err.message);
    run_cleanup(&r);
    /* what fits is served, by the same process */
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    r.req.context_len = (struct qr_opt_i64){true, 4096};
    submit_wait(&r);
    assert_false(r.ans.failed);
    assert_string_equal(buf_str(&r.ans.content), GREETING);
    run_cleanup(&r);
    /* loaded: refused against the engine's own figure */
    run_init(&r, "test/scripted", "Hallo", QR_THINK_OFF);
    r.req.context_len = (struct qr_opt_i64){true, 4097};
    assert_int_equal(submit(&r, &err), QR_ERR_INVALID);
    assert_string_equal(err.code, "context_exceeded");
    assert_non_null(strstr(err.message, "reported by the engine"));
    assert_int_equal(qr_llamacpp_loaded_list(F.b, NULL, 0), 1);
    run_cleanup(&r);
}

static void test_engine_context_exceeded(void **state)
{
    NEED_ENGINE();
    unload_all();
    struct qr_llamacpp_options o = base_options(ENGINE);
    o.ctx = 256;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
    static char prompt[5000];
    size_t n = 0;
    while (n + 12 < sizeof prompt)
        n += (size_t) snprintf(prompt + n, sizeof prompt - n, "hallo welt ");
    struct run r;
    run_init(&r, "test/scripted", prompt, QR_THINK_OFF);
    r.req.max_tokens = (struct qr_opt_i64){true, 8};
    submit_wait(&r);
    assert_true(r.ans.failed);
    assert_false(r.ans.done);
    print_message("engine context error: %d %s: %s\n", r.ans.error_status,
                  buf_str(&r.ans.error_code), buf_str(&r.ans.error_message));
    assert_int_equal(r.ans.error_status, 422);
    assert_string_equal(buf_str(&r.ans.error_code), "context_exceeded");
    assert_non_null(strstr(buf_str(&r.ans.error_message), "exceeds the available context size"));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "256 tokens per slot"));
    assert_false(r.ans.error_retryable);
    run_cleanup(&r);
    unload_all();
    o = base_options(ENGINE);
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);
}

static bool have_python(void)
{
    return access("/usr/bin/python3", X_OK) == 0 || access("/usr/local/bin/python3", X_OK) == 0;
}

/* What the Runtime guarantees when the engine misbehaves: a call to a tool other than the named
 * one never reaches the client; without usable evidence tools are refused. */
static void test_fake_engine_guards(void **state)
{
    if (!have_python()) /* scripts/setup installs python3 (setup.lock): never skipped silently */
        fail_msg("python3 not found: run scripts/setup");
    struct qr_backend *keep = F.b;
    struct qr_backend_env env = {F.base, F.http, &F.cfg, NULL};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_backend_new(&qr_backend_llamacpp, &env, &d, &F.b), QR_OK);
    struct qr_llamacpp_options o = base_options(F.fake_py);
    assert_int_equal(qr_llamacpp_configure(F.b, &o, &d), QR_OK);

    /* named tool_choice: the engine is offered only get_time with tool_choice "required" */
    struct run r;
    run_init(&r, "fake/violate", "Wetter?", QR_THINK_OFF);
    set_tools(&r, true);
    r.req.tool_choice = (struct qr_tool_choice){QR_TOOL_CHOICE_FUNCTION, QR_SLICE_LIT("get_time")};
    submit_wait(&r);
    print_message("fake engine calls get_weather under tool_choice get_time: %d %s: %s\n",
                  r.ans.error_status, buf_str(&r.ans.error_code), buf_str(&r.ans.error_message));
    assert_true(r.ans.failed);
    assert_int_equal(r.ans.n_calls, 0); /* the wrong call was not delivered */
    assert_string_equal(buf_str(&r.ans.error_code), "tool_choice_violated");
    assert_non_null(strstr(buf_str(&r.ans.error_message), "'get_weather'"));
    assert_non_null(strstr(buf_str(&r.ans.error_message), "'get_time'"));
    char path[160], sent[4096] = "";
    snprintf(path, sizeof path, "%s.req", F.fake_violate);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(sent, 1, sizeof sent - 1, f);
    fclose(f);
    sent[n] = '\0';
    yyjson_doc *doc = yyjson_read(sent, n, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *tools = yyjson_obj_get(root, "tools");
    assert_int_equal(yyjson_arr_size(tools), 1);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(
                            yyjson_obj_get(yyjson_arr_get_first(tools), "function"), "name")),
                        "get_time");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "tool_choice")), "required");
    yyjson_doc_free(doc);
    run_cleanup(&r);

    /* /props that is not JSON, or too large: tools are refused naming why, text is served */
    static const char *const bad[] = {"fake/badprops", "fake/bigprops"};
    for (int i = 0; i < 2; i++) {
        run_init(&r, bad[i], "Wetter?", QR_THINK_OFF);
        set_tools(&r, false);
        submit_wait(&r);
        assert_true(r.ans.failed);
        assert_string_equal(buf_str(&r.ans.error_code), "capability_unsupported");
        assert_non_null(strstr(buf_str(&r.ans.error_message), "tools.calling"));
        assert_non_null(strstr(buf_str(&r.ans.error_message), "GET /props"));
        print_message("%s: %s\n", bad[i], buf_str(&r.ans.error_message));
        run_cleanup(&r);
        struct qr_llamacpp_loaded row = {0};
        assert_true(loaded_row(bad[i], &row));
        assert_false(row.props.valid);
        assert_int_equal(row.requests, 0);
        run_init(&r, bad[i], "hi", QR_THINK_OFF);
        submit_wait(&r);
        assert_false(r.ans.failed);
        assert_string_equal(buf_str(&r.ans.content), "ok");
        run_cleanup(&r);
    }
    qr_backend_free(F.b);
    F.b = keep;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_describe_probe_list),
        cmocka_unit_test(test_unknown_model_refused),
        cmocka_unit_test(test_load_on_demand_greeting),
        cmocka_unit_test(test_reasoning_then_content),
        cmocka_unit_test(test_tool_call),
        cmocka_unit_test(test_draft_model),
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_rerank),
        cmocka_unit_test(test_keep_alive_zero_unloads_and_reloads),
        cmocka_unit_test(test_budget_lru_eviction),
        cmocka_unit_test(test_kill_mid_stream),
        cmocka_unit_test(test_cancel_frees_slot),
        cmocka_unit_test(test_broken_transfer_without_crash),
        cmocka_unit_test(test_load_queue_bounded),
        cmocka_unit_test(test_props_parse_hostile),
        cmocka_unit_test(test_props_captured),
        cmocka_unit_test(test_tools_refused_without_tool_syntax),
        cmocka_unit_test(test_parallel_false_delivers_one_call),
        cmocka_unit_test(test_named_tool_choice),
        cmocka_unit_test(test_context_admission),
        cmocka_unit_test(test_engine_context_exceeded),
        cmocka_unit_test(test_fake_engine_guards),
        cmocka_unit_test(test_placement_given_host),
        cmocka_unit_test(test_engine_fails_to_start),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
