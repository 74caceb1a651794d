/* The native llama.cpp backend adapter: canonical requests run on llama-server processes the
 * Runtime starts itself. A model is resolved through the configured resolver, its process (one
 * per artifact and engine configuration, see proc.h) is found or loaded on demand while the
 * request waits in a bounded queue, and the request then goes to the process as an
 * OpenAI-compatible request through backend/job.h, always streamed and always with a token limit.
 * Processes stay resident for their keep-alive (per request, Ollama semantics, else the default
 * idle TTL) and within a memory budget that unloads the least recently used idle process first.
 * A process that dies fails its requests in flight with an error naming the crash; the
 * supervisor's backoff restart serves the next ones. docs/LLAMACPP.md has the rules. */
#include "backend/llamacpp/llamacpp.h"

#include "backend/llamacpp/evidence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <event2/event.h>
#include <yyjson.h>

#include "backend/codec.h"
#include "backend/job.h"
#include "build_info.h"
#include "capability/descriptor.h"
#include "core/log.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/sizing.h"
#include "host/profile.h"

#define DEFAULT_TTL_MS   300000
#define DEFAULT_CTX      4096
#define DEFAULT_QUEUE    64
#define DEFAULT_LOAD_MS  120000
#define DEFAULT_GRACE_MS 300
#define PROBE_TIMEOUT_MS 10000
#define MAX_MODEL_ID     255
#define MAX_PATH_ARG     (QR_LLAMA_PLAN_MAX_ARG - 1)
#define STOP_GRACE_MS    5000
#define PROPS_TIMEOUT_MS 5000

/* The engine's message for a prompt longer than a slot (400 exceed_context_size_error). */
#define ENGINE_CTX_EXCEEDED "exceeds the available context size"

struct lp;
struct llamacpp;
struct later;
struct props_req;

/* One request on the adapter: queued until its process is ready, then one HTTP job. */
struct ljob {
    struct lp *p;
    struct ljob *prev, *next; /* in p->queue or p->running */
    bool running;             /* in p->running (else p->queue) */
    struct qr_job *handle;    /* what the caller holds */
    struct qr_request req;    /* the caller's request (borrowed parts), streamed, with a limit */
    qr_event_fn fn;
    void *arg;
    struct qr_job *inner; /* the HTTP job while it runs */
    bool started;         /* START went to fn */
    bool paused;
    /* what the client asked for and the engine does not enforce (docs/LLAMACPP.md) */
    struct qr_tool only_tool; /* a named tool_choice: the one tool the engine is offered */
    struct qr_slice named;    /* that tool's name (borrowed from the request); empty otherwise */
    bool single_call;         /* parallel_tool_calls:false: only call index 0 is delivered */
    unsigned dropped;         /* calls withheld under single_call */
    /* a broken transfer's ERROR, held for crash_grace_ms to be named by the crash report */
    struct event *hold_timer;
    bool held;
    /* a load request (Ollama's empty generate/chat): no HTTP job; START + DONE "load" once the
     * process serves, delivered from done_timer so that submit never calls back synchronously */
    bool load_only;
    struct event *done_timer;
    int held_status;
    char held_code[64];
    char held_msg[768];
};

struct jlist {
    struct ljob *head, *tail;
    unsigned n;
};

/* One model process (loaded, loading, restarting or stopping). */
struct lp {
    struct llamacpp *a;
    struct lp *next;
    char *id, *gguf, *draft, *spec, *mmproj;
    enum qr_llamacpp_mode mode;
    uint32_t native_ctx, ctx, parallel, threads;
    struct qr_llama_proc *proc;
    struct jlist queue, running;
    struct event *idle_timer;
    struct event *reap_timer;
    uint64_t bytes, weight_bytes, kv_bytes, compute_bytes;
    int64_t keep_ms; /* after the last request; < 0 forever */
    int64_t loaded_at_ms, last_used_ms, expires_at_ms;
    int64_t load_ms;
    bool served;    /* became ready since this load began */
    bool unloading; /* stop asked: neither matched nor counted against the budget */
    bool unload_when_idle;
    unsigned crashes;
    char reason[512];
    struct props_req *props_req; /* GET /props in flight for the current child */
    struct qr_llamacpp_props props;
    uint64_t requests, refused, tool_calls_dropped;
    pid_t last_pid; /* the newest child seen, for the crash record */
    /* the placement plan applied at start (its args are the process's extra flags); NULL when
     * the file could not be sized (plan_note says why) */
    struct qr_placement_plan *plan;
    char plan_note[256];
};

struct llamacpp {
    struct qr_backend base;
    struct qr_llama_sup *sup;
    bool configured;
    bool engine_ok;
    struct qr_llama_engine engine;
    char engine_err[512];
    struct qr_llamacpp_options o; /* engine_path / prefix point at the copies below */
    char *engine_path, *prefix;
    struct qr_placement_host host; /* discovered (or given) once by configure */
    bool host_given;               /* o.host: planned as given, memory not read again */
    struct lp *procs;
    struct later *laters; /* probe / list answers not delivered yet */
};

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

static struct timeval tv_ms(int64_t ms)
{
    return (struct timeval){(time_t) (ms / 1000), (suseconds_t) ((ms % 1000) * 1000)};
}

static char *dup_or_null(const char *s)
{
    if (!s || !s[0])
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort(); /* small internal allocation (STYLE.md) */
    return d;
}

static bool str_eq(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

const char *qr_llamacpp_mode_str(enum qr_llamacpp_mode m)
{
    switch (m) {
    case QR_LLAMACPP_EMBED:
        return "embed";
    case QR_LLAMACPP_RERANK:
        return "rerank";
    default:
        return "chat";
    }
}

/* ---- job lists ---- */

static void jl_push(struct jlist *l, struct ljob *j)
{
    j->prev = l->tail;
    j->next = NULL;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    l->n++;
}

static void jl_unlink(struct jlist *l, struct ljob *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        l->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        l->tail = j->prev;
    j->prev = j->next = NULL;
    l->n--;
}

static bool lp_idle(const struct lp *p)
{
    return p->queue.n == 0 && p->running.n == 0;
}

/* ---- admission against the engine's evidence (evidence.h) ---- */

static bool slice_same(struct qr_slice a, struct qr_slice b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static bool slice_has(struct qr_slice s, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; s.ptr && i + n <= s.len; i++) {
        if (memcmp(s.ptr + i, needle, n) == 0)
            return true;
    }
    return false;
}

/* One slot's context: the engine's own figure once known, else the plan. */
static uint32_t lp_slot_ctx(const struct lp *p)
{
    return p->props.valid ? p->props.n_ctx_slot
                          : qr_llamacpp_slot_ctx(p->ctx, p->parallel, p->native_ctx);
}

static enum qr_err lp_admit(const struct lp *p, const struct qr_request *r,
                            struct qr_api_error *err)
{
    return qr_llamacpp_admit(p->id, &p->props, r, lp_slot_ctx(p), p->ctx, p->parallel, err);
}

/* ---- lifecycle of a process ---- */

static void lp_unload(struct lp *p);

/* Arm the idle unload of an idle, ready process for its keep-alive. */
static void lp_maybe_idle(struct lp *p)
{
    if (p->unloading || !lp_idle(p))
        return;
    enum qr_llama_proc_state st = qr_llama_proc_state(p->proc);
    if (st != QR_LLAMA_PROC_READY && st != QR_LLAMA_PROC_CRASHED)
        return;
    int64_t keep = p->unload_when_idle ? 0 : p->keep_ms;
    if (keep < 0) {
        evtimer_del(p->idle_timer);
        p->expires_at_ms = -1;
        return;
    }
    struct timeval tv = tv_ms(keep);
    evtimer_add(p->idle_timer, &tv);
    p->expires_at_ms = wall_ms() + keep;
}

static void lp_busy(struct lp *p)
{
    evtimer_del(p->idle_timer);
    p->expires_at_ms = 0;
}

static void on_idle(evutil_socket_t fd, short what, void *arg)
{
    struct lp *p = arg;
    if (!lp_idle(p) || p->unloading)
        return;
    QR_LOG(QR_LOG_INFO, "llama.cpp model idle, unloading", QR_LF_S("model", p->id),
           QR_LF_N("keep_alive_ms", p->unload_when_idle ? 0 : p->keep_ms));
    lp_unload(p);
}

static void ljob_free(struct ljob *j)
{
    if (j->hold_timer)
        event_free(j->hold_timer);
    if (j->done_timer)
        event_free(j->done_timer);
    qr_job_free_custom(j->handle);
    free(j);
}

/* The job is over (final event delivered, consumer gone or cancelled): unlink and free it. */
static void ljob_end(struct ljob *j)
{
    struct lp *p = j->p;
    if (j->running) {
        jl_unlink(&p->running, j);
        p->last_used_ms = wall_ms();
    } else {
        jl_unlink(&p->queue, j);
    }
    ljob_free(j);
    lp_maybe_idle(p);
}

/* Deliver START (unless sent) and one ERROR to the caller; the job then ends. */
static void ljob_fail(struct ljob *j, int status, const char *code, bool retryable, const char *msg)
{
    if (j->inner) {
        qr_job_cancel(j->inner);
        j->inner = NULL;
    }
    struct qr_event ev = {.type = QR_EV_START};
    bool ok = true;
    if (!j->started) {
        ev.name = qr_slice_str(qr_backend_llamacpp.id);
        ev.model = qr_slice_str(j->p->id);
        j->started = true;
        ok = j->fn(j->arg, &ev) == QR_OK;
    }
    if (ok) {
        memset(&ev, 0, sizeof ev);
        ev.type = QR_EV_ERROR;
        ev.status = status;
        ev.code = qr_slice_str(code);
        ev.message = qr_slice_str(msg);
        ev.retryable = retryable;
        j->fn(j->arg, &ev);
    }
    ljob_end(j);
}

static void fail_list(struct jlist *l, int status, const char *code, bool retryable,
                      const char *msg)
{
    while (l->head)
        ljob_fail(l->head, status, code, retryable, msg);
}

/* Is the engine process gone (or a zombie nobody reaped yet)? A loaded machine can deliver the
 * supervisor's exit report later than the grace; the process table already knows. */
static bool proc_dead(pid_t pid)
{
    if (pid <= 0)
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static void on_hold(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    struct ljob *j = arg;
    struct lp *p = j->p;
    if (p->proc && proc_dead(qr_llama_proc_pid(p->proc))) {
        char msg[600];
        snprintf(msg, sizeof msg,
                 "llama.cpp engine for model '%.200s' crashed: its process ended mid-answer",
                 p->id);
        ljob_fail(j, 502, "engine_crashed", true, msg);
        return;
    }
    ljob_fail(j, j->held_status, j->held_code, true, j->held_msg);
}

/* Between the HTTP job and the caller: hold a broken transfer's ERROR until the crash report can
 * name it, and end the job after its final event. */
static enum qr_err ljob_relay(void *arg, const struct qr_event *ev)
{
    struct ljob *j = arg;
    struct lp *p = j->p;
    if (ev->type == QR_EV_START)
        j->started = true;
    bool tool_ev =
        ev->type == QR_EV_TOOL_BEGIN || ev->type == QR_EV_TOOL_ARGS || ev->type == QR_EV_TOOL_END;
    if (j->single_call && tool_ev && ev->index > 0) {
        /* parallel_tool_calls:false, which the engine does not enforce: only call 0 goes out */
        if (ev->type == QR_EV_TOOL_BEGIN)
            j->dropped++;
        return QR_OK;
    }
    if (ev->type == QR_EV_TOOL_BEGIN && j->named.len && !slice_same(ev->name, j->named)) {
        /* the engine was offered only the named tool; a call to another never reaches the
         * client */
        char msg[700];
        snprintf(msg, sizeof msg,
                 "model '%s' called the tool '%.*s' although tool_choice names '%.*s'; the call "
                 "was not delivered",
                 p->id, (int) (ev->name.len > 200 ? 200 : ev->name.len),
                 ev->name.ptr ? ev->name.ptr : "", (int) (j->named.len > 200 ? 200 : j->named.len),
                 j->named.ptr);
        QR_LOG(QR_LOG_WARN, "llama.cpp engine ignored a named tool_choice",
               QR_LF_S("model", p->id));
        struct qr_event e = {.type = QR_EV_ERROR,
                             .status = 502,
                             .code = QR_SLICE_LIT("tool_choice_violated"),
                             .message = qr_slice_str(msg)};
        j->fn(j->arg, &e);
        j->inner = NULL; /* the non-OK answer stops it; it frees itself */
        ljob_end(j);
        return QR_ERR_CANCELLED;
    }
    struct qr_event mapped;
    char cmsg[900];
    if (ev->type == QR_EV_ERROR && ev->status == 400 &&
        slice_has(ev->message, ENGINE_CTX_EXCEEDED)) {
        /* the engine's exceed_context_size_error: the prompt does not fit one slot */
        snprintf(cmsg, sizeof cmsg,
                 "model '%s': the prompt does not fit the context of its llama.cpp process (%u "
                 "tokens per slot): %.*s",
                 p->id, lp_slot_ctx(p), (int) (ev->message.len > 600 ? 600 : ev->message.len),
                 ev->message.ptr);
        mapped = *ev;
        mapped.status = 422;
        mapped.code = QR_SLICE_LIT("context_exceeded");
        mapped.message = qr_slice_str(cmsg);
        mapped.retryable = false;
        ev = &mapped;
    }
    if (ev->type == QR_EV_DONE && j->dropped) {
        p->tool_calls_dropped += j->dropped;
        QR_LOG(QR_LOG_WARN,
               "llama.cpp engine returned more than one tool call under "
               "parallel_tool_calls:false; only the first was delivered",
               QR_LF_S("model", p->id), QR_LF_N("dropped", j->dropped));
    }
    if (ev->type == QR_EV_ERROR && (ev->status == 502 || ev->status == 504) && !p->unloading &&
        qr_llama_proc_state(p->proc) == QR_LLAMA_PROC_READY && !j->held) {
        j->inner = NULL; /* it frees itself once this returns */
        j->held = true;
        j->held_status = ev->status;
        snprintf(j->held_code, sizeof j->held_code, "%.*s", (int) ev->code.len, ev->code.ptr);
        snprintf(j->held_msg, sizeof j->held_msg, "%.*s", (int) ev->message.len, ev->message.ptr);
        j->hold_timer = evtimer_new(p->a->base.env.base, on_hold, j);
        if (!j->hold_timer)
            abort();
        struct timeval tv = tv_ms(p->a->o.crash_grace_ms);
        evtimer_add(j->hold_timer, &tv);
        return QR_OK;
    }
    enum qr_err e = j->fn(j->arg, ev);
    if (ev->type == QR_EV_DONE || ev->type == QR_EV_ERROR || e) {
        j->inner = NULL; /* after a final event or a consumer failure it frees itself */
        ljob_end(j);
    }
    return e;
}

/* A load request's answer: the model is loaded (and its evidence known). */
static void on_loaded(evutil_socket_t fd, short what, void *arg)
{
    struct ljob *j = arg;
    struct qr_event ev = {.type = QR_EV_START};
    ev.name = qr_slice_str(qr_backend_llamacpp.id);
    ev.model = qr_slice_str(j->p->id);
    j->started = true;
    if (j->fn(j->arg, &ev) == QR_OK) {
        memset(&ev, 0, sizeof ev);
        ev.type = QR_EV_DONE;
        ev.finish = QR_FINISH_NONE;
        ev.raw_finish = qr_slice_str("load");
        j->fn(j->arg, &ev);
    }
    ljob_end(j);
}

/* Send j to its ready process. */
static enum qr_err ljob_start(struct ljob *j, struct qr_api_error *err)
{
    struct lp *p = j->p;
    if (j->load_only) {
        j->done_timer = evtimer_new(p->a->base.env.base, on_loaded, j);
        if (!j->done_timer)
            return qr_api_error_set(err, QR_ERR_NOMEM, 500, "internal_error", "", "out of memory");
        struct timeval now = {0, 0};
        evtimer_add(j->done_timer, &now);
        return QR_OK;
    }
    struct qr_dialect d;
    qr_dialect_default(&d, QR_UP_OPENAI);
    d.upstream_model = p->id;
    enum qr_err e =
        qr_job_start_http(&p->a->base, &d, qr_llama_proc_base_url(p->proc),
                          qr_llama_proc_api_key(p->proc), &j->req, ljob_relay, j, &j->inner, err);
    if (e)
        return e;
    p->requests++;
    if (j->paused)
        qr_job_pause(j->inner);
    return QR_OK;
}

/* The process is ready and its evidence known: every queued request is admitted against the
 * evidence (START + ERROR when refused) and goes to it. */
static void lp_drain(struct lp *p)
{
    while (p->queue.head) {
        struct ljob *j = p->queue.head;
        struct qr_api_error err = {0};
        if (lp_admit(p, &j->req, &err)) {
            p->refused++;
            ljob_fail(j, err.status, err.code, false, err.message);
            continue;
        }
        jl_unlink(&p->queue, j);
        jl_push(&p->running, j);
        j->running = true;
        if (ljob_start(j, &err))
            ljob_fail(j, err.status ? err.status : 502, err.code[0] ? err.code : "upstream_error",
                      true, err.message);
    }
}

/* GET /props of the current child; p NULL once the child or the process it asked went away. */
struct props_req {
    struct lp *p;
};

static void lp_props_detach(struct lp *p)
{
    if (p->props_req) {
        p->props_req->p = NULL; /* the fetch frees it when it answers */
        p->props_req = NULL;
    }
    p->props.pending = false;
}

static bool lp_serving(const struct lp *p)
{
    return qr_llama_proc_state(p->proc) == QR_LLAMA_PROC_READY && !p->props_req;
}

static void on_props(enum qr_err err, int status, struct qr_slice body, const struct qr_diag *diag,
                     void *arg)
{
    struct props_req *r = arg;
    struct lp *p = r->p;
    free(r);
    if (!p)
        return;
    p->props_req = NULL;
    p->props.pending = false;
    if (err == QR_ERR_CANCELLED)
        return; /* the backend is being freed */
    struct qr_diag d = {{0}};
    if (err)
        qr_diag_set(&d, err, "%s", diag && diag->msg[0] ? diag->msg : qr_err_str(err));
    else if (status != 200)
        qr_diag_set(&d, QR_ERR_UPSTREAM, "answered HTTP %d", status);
    else
        qr_llamacpp_props_parse(body.ptr, body.len, &p->props, &d);
    if (!p->props.valid) {
        memset(&p->props, 0, sizeof p->props);
        snprintf(p->props.error, sizeof p->props.error, "GET /props: %.200s", d.msg);
        QR_LOG(QR_LOG_WARN,
               "llama.cpp engine gave no capability evidence; tools and media are "
               "refused on this model",
               QR_LF_S("model", p->id), QR_LF_S("reason", p->props.error));
    } else {
        QR_LOG(QR_LOG_INFO, "llama.cpp engine evidence", QR_LF_S("model", p->id),
               QR_LF_N("supports_tools", p->props.caps[QR_LLAMACPP_TCAP_TOOLS]),
               QR_LF_N("vision", p->props.vision), QR_LF_N("audio", p->props.audio),
               QR_LF_N("n_ctx_slot", p->props.n_ctx_slot),
               QR_LF_S("build_info", p->props.build_info));
        if (p->a->o.on_evidence) {
            struct qr_llamacpp_observed ob = {p->id, p->gguf, p->a->engine.version, &p->props};
            p->a->o.on_evidence(p->a->o.evidence_arg, &ob);
        }
    }
    lp_drain(p);
    lp_maybe_idle(p);
}

/* The child is ready: ask it for its evidence; the queue drains with the answer. */
static void lp_props_fetch(struct lp *p)
{
    lp_props_detach(p);
    struct props_req *r = calloc(1, sizeof *r);
    if (!r)
        abort();
    r->p = p;
    p->props_req = r;
    p->props.pending = true;
    enum qr_err e = qr_fetch(&p->a->base, qr_llama_proc_base_url(p->proc), "/props",
                             qr_llama_proc_api_key(p->proc), PROPS_TIMEOUT_MS,
                             QR_LLAMACPP_PROPS_MAX_BYTES, on_props, r);
    if (e) {
        struct qr_diag d;
        qr_diag_set(&d, e, "cannot ask the engine: %s", qr_err_str(e));
        on_props(e, 0, (struct qr_slice){"", 0}, &d, r);
    }
}

/* The record itself: its process (killed and reaped when still running), timers and strings. */
static void lp_free(struct lp *p)
{
    qr_llama_proc_free(p->proc);
    event_free(p->idle_timer);
    event_free(p->reap_timer);
    free(p->id);
    free(p->gguf);
    free(p->draft);
    free(p->spec);
    free(p->mmproj);
    free(p->plan);
    free(p);
}

static void lp_destroy(struct lp *p)
{
    lp_props_detach(p);
    struct llamacpp *a = p->a;
    for (struct lp **pp = &a->procs; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    fail_list(&p->queue, 503, "model_unloaded", true, "the model was unloaded");
    fail_list(&p->running, 503, "model_unloaded", true, "the model was unloaded");
    lp_free(p);
}

static void on_reap(evutil_socket_t fd, short what, void *arg)
{
    lp_destroy(arg);
}

static void lp_reap_later(struct lp *p)
{
    struct timeval tv = {0, 0};
    evtimer_add(p->reap_timer, &tv);
}

/* Stop the process; the record goes once it has exited. */
static void lp_unload(struct lp *p)
{
    p->unloading = true;
    evtimer_del(p->idle_timer);
    p->expires_at_ms = 0;
    enum qr_llama_proc_state st = qr_llama_proc_state(p->proc);
    if (st == QR_LLAMA_PROC_IDLE || st == QR_LLAMA_PROC_EXITED) {
        lp_reap_later(p);
        return;
    }
    qr_llama_proc_stop(p->proc); /* may report EXITED at once (from CRASHED or FAILED) */
}

/* Hand one crash to the daemon's hook (the evidence store). */
static void lp_report_crash(struct lp *p, struct qr_llama_proc *proc, bool failed,
                            const char *reason)
{
    struct llamacpp *a = p->a;
    if (!a->o.on_crash)
        return;
    struct qr_llama_proc_exit ex;
    qr_llama_proc_last_exit(proc, &ex);
    char tail[4096];
    qr_llama_proc_tail(proc, 20, tail, sizeof tail);
    struct qr_llamacpp_crash c = {
        .model = p->id,
        .engine_version = a->engine.version,
        .pid = p->last_pid > 0 ? p->last_pid : -1,
        .signaled = ex.valid && ex.signaled,
        .code = ex.valid && !ex.signaled ? ex.code : 0,
        .sig = ex.valid && ex.signaled ? ex.sig : 0,
        .failed = failed,
        .reason = reason ? reason : "",
        .log_tail = tail,
    };
    a->o.on_crash(a->o.crash_arg, &c);
}

static void on_proc_state(struct qr_llama_proc *proc, enum qr_llama_proc_state st,
                          const char *reason, void *arg)
{
    struct lp *p = arg;
    snprintf(p->reason, sizeof p->reason, "%s", reason ? reason : "");
    if (qr_llama_proc_pid(proc) > 0)
        p->last_pid = qr_llama_proc_pid(proc);
    if (st == QR_LLAMA_PROC_CRASHED || st == QR_LLAMA_PROC_FAILED)
        lp_report_crash(p, proc, st == QR_LLAMA_PROC_FAILED, reason);
    char msg[900];
    switch (st) {
    case QR_LLAMA_PROC_READY: {
        struct qr_llama_proc_stats s;
        qr_llama_proc_stats(proc, &s);
        p->load_ms = s.ready_after_ms;
        p->served = true;
        QR_LOG(QR_LOG_INFO, "llama.cpp model ready", QR_LF_S("model", p->id),
               QR_LF_N("load_ms", p->load_ms), QR_LF_N("queued", p->queue.n));
        lp_props_fetch(p); /* the queue drains once the evidence is in */
        break;
    }
    case QR_LLAMA_PROC_CRASHED:
    case QR_LLAMA_PROC_FAILED:
        lp_props_detach(p);
        p->crashes++;
        if (p->unloading)
            break;
        snprintf(msg, sizeof msg, "llama.cpp engine for model '%s' crashed: %s", p->id,
                 reason ? reason : "");
        QR_LOG(QR_LOG_WARN, "llama.cpp engine crashed", QR_LF_S("model", p->id),
               QR_LF_S("reason", reason));
        fail_list(&p->running, 502, "engine_crashed", true, msg);
        if (!p->served || st == QR_LLAMA_PROC_FAILED) {
            /* the load itself failed (or the restarts gave up): nothing will serve the queue */
            snprintf(msg, sizeof msg, "cannot load model '%s': %s", p->id, reason ? reason : "");
            fail_list(&p->queue, 503, "model_load_failed", false, msg);
        }
        if (!p->served)
            lp_unload(p); /* a model that does not load is not retried in the background */
        break;
    case QR_LLAMA_PROC_EXITED:
        lp_props_detach(p);
        p->unloading = true;
        lp_reap_later(p);
        break;
    default:
        break;
    }
}

/* ---- memory sizing and the budget ---- */

static void size_one(const char *path, uint32_t ctx, uint32_t parallel, uint64_t *w, uint64_t *k,
                     uint64_t *c)
{
    struct qr_gguf *g = NULL;
    struct qr_diag d = {{0}};
    struct qr_arch *arch = calloc(1, sizeof *arch);
    if (!arch)
        abort();
    struct qr_sizing *s = calloc(1, sizeof *s);
    if (!s)
        abort();
    if (qr_gguf_open(path, NULL, &d, &g) == QR_OK && qr_gguf_arch_derive(g, arch, &d) == QR_OK) {
        struct qr_sizing_params sp;
        qr_sizing_params_init(&sp, ctx ? ctx : 1);
        sp.n_seq = parallel ? parallel : 1;
        sp.kv_unified = false; /* an explicit -np N clears it */
        if (qr_gguf_size_engine(g, arch, &sp, s, &d) == QR_OK ||
            s->weight_bytes) { /* weights are known even when the KV part is not */
            *w += s->weight_bytes;
            *k += s->eng.kv_bytes;
            *c += s->eng.compute_bytes;
        }
    } else {
        struct stat st; /* not a GGUF the reader takes: count the file itself */
        if (stat(path, &st) == 0)
            *w += (uint64_t) st.st_size;
    }
    qr_gguf_close(g);
    free(s);
    free(arch);
}

/* The context the engine allocates its KV cache for: the whole -c. llama-server caps a slot at the
 * training context only after the context was created (0.7.0: "the slot context (65536) exceeds
 * the training context of the model (32768) - capping", with the cache for 65536 allocated and a
 * -c the host cannot hold failing in create_context), so the cap does not shrink the memory. */
static uint32_t lp_sized_ctx(const struct lp *p)
{
    return p->ctx;
}

static void lp_size(struct lp *p)
{
    uint32_t ctx = lp_sized_ctx(p);
    size_one(p->gguf, ctx, p->parallel, &p->weight_bytes, &p->kv_bytes, &p->compute_bytes);
    if (p->draft)
        size_one(p->draft, ctx, p->parallel, &p->weight_bytes, &p->kv_bytes, &p->compute_bytes);
    struct stat st;
    if (p->mmproj && stat(p->mmproj, &st) == 0)
        p->weight_bytes += (uint64_t) st.st_size;
    p->bytes = p->weight_bytes + p->kv_bytes + p->compute_bytes;
}

/* ---- the placement plan (placement/placement.h) ---- */

/* Plan p's model on the host for its context, slots and threads into p->plan. A plan that does
 * not fit refuses the load with its numbers (507 insufficient_memory) before anything starts. A
 * file the sizing cannot read, or whose KV cache it cannot size (decision unsized), is started as
 * before without placement flags, and the note says why: the engine judges such a file itself. */
static enum qr_err lp_plan(struct lp *p, struct qr_api_error *err)
{
    struct llamacpp *a = p->a;
    struct qr_placement_model m;
    struct qr_diag d = {{0}};
    if (qr_placement_model_from_file(p->gguf, lp_sized_ctx(p), p->parallel, &m, &d)) {
        snprintf(p->plan_note, sizeof p->plan_note, "not planned: %.240s", d.msg);
        return QR_OK;
    }
    struct qr_placement_host h = a->host;
    if (!a->host_given) /* the topology stays; what is free now does not */
        qr_placement_host_refresh_memory(&h, NULL);
    qr_placement_host_locate_file(&h, p->gguf);
    struct qr_placement_request r = {.threads = p->threads,
                                     .verified = a->o.verified,
                                     .prefer = a->o.prefer,
                                     .allow_acceleration = a->o.allow_acceleration,
                                     .allow_nvme_cold_tier = a->o.allow_nvme_cold_tier};
    p->plan = malloc(sizeof *p->plan);
    if (!p->plan)
        abort();
    if (qr_placement_plan(&h, &m, &r, p->plan, &d)) /* a byte count that overflows */
        return qr_api_error_set(err, QR_ERR_TOO_LARGE, 507, "insufficient_memory", "model",
                                "cannot load model '%s': %s", p->id, d.msg);
    if (p->plan->decision == QR_PLACEMENT_CAPACITY_EXCEEDED) {
        QR_LOG(QR_LOG_WARN, "llama.cpp placement refused the model", QR_LF_S("model", p->id),
               QR_LF_S("reason", p->plan->reason));
        return qr_api_error_set(err, QR_ERR_TOO_LARGE, 507, "insufficient_memory", "model",
                                "cannot load model '%s' on this host: %s", p->id, p->plan->reason);
    }
    if (!p->plan->fits)
        snprintf(p->plan_note, sizeof p->plan_note, "started without placement flags: %s",
                 p->plan->reason);
    return QR_OK;
}

/* The plan's flags for the process (argv words borrowed from p->plan; -t stays plan.threads). */
static size_t lp_plan_args(const struct lp *p, const char **argv, size_t max)
{
    return p->plan && p->plan->fits
               ? qr_placement_engine_args(p->plan, QR_PLACEMENT_ARGS_NO_THREADS, argv, max)
               : 0;
}

/* A process that holds memory now (unloading ones are about to give theirs back). */
static bool lp_resident(const struct lp *p)
{
    if (p->unloading)
        return false;
    enum qr_llama_proc_state st = qr_llama_proc_state(p->proc);
    return st != QR_LLAMA_PROC_IDLE && st != QR_LLAMA_PROC_EXITED && st != QR_LLAMA_PROC_FAILED;
}

/* Unload least recently used idle processes until need more bytes fit the budget. */
static enum qr_err make_room(struct llamacpp *a, const struct lp *np, struct qr_api_error *err)
{
    uint64_t budget = a->o.memory_budget;
    if (!budget)
        return QR_OK;
    if (np->bytes > budget)
        return qr_api_error_set(
            err, QR_ERR_TOO_LARGE, 507, "insufficient_memory", "model",
            "model '%s' needs %llu bytes (weights %llu + KV %llu + compute "
            "%llu) but the llama.cpp memory budget is %llu bytes",
            np->id, (unsigned long long) np->bytes, (unsigned long long) np->weight_bytes,
            (unsigned long long) np->kv_bytes, (unsigned long long) np->compute_bytes,
            (unsigned long long) budget);
    for (;;) {
        uint64_t used = 0;
        struct lp *victim = NULL;
        for (struct lp *p = a->procs; p; p = p->next) {
            if (!lp_resident(p))
                continue;
            used += p->bytes;
            if (lp_idle(p) && (!victim || p->last_used_ms < victim->last_used_ms))
                victim = p;
        }
        if (used + np->bytes <= budget)
            return QR_OK;
        if (!victim) {
            char busy[256] = "";
            size_t o = 0;
            for (struct lp *p = a->procs; p && o < sizeof busy - 1; p = p->next) {
                if (lp_resident(p))
                    o += (size_t) snprintf(busy + o, sizeof busy - o, "%s'%s' %llu", o ? ", " : "",
                                           p->id, (unsigned long long) p->bytes);
                if (o >= sizeof busy)
                    o = sizeof busy - 1;
            }
            return qr_api_error_set(err, QR_ERR_BUSY, 503, "insufficient_memory", "model",
                                    "model '%s' needs %llu bytes but only %llu of the llama.cpp "
                                    "memory budget of %llu bytes are free; busy models hold the "
                                    "rest (%s)",
                                    np->id, (unsigned long long) np->bytes,
                                    (unsigned long long) (used < budget ? budget - used : 0),
                                    (unsigned long long) budget, busy);
        }
        QR_LOG(QR_LOG_INFO, "llama.cpp memory budget: unloading the least recently used model",
               QR_LF_S("model", victim->id), QR_LF_S("for", np->id),
               QR_LF_N("bytes", victim->bytes));
        lp_unload(victim);
    }
}

/* ---- finding and loading a process ---- */

static bool lp_matches(const struct lp *p, const struct qr_llamacpp_model *m)
{
    return !p->unloading && str_eq(p->id, m->id) && str_eq(p->gguf, m->gguf_path) &&
           str_eq(p->draft, m->draft_path) && str_eq(p->spec, m->spec_type) &&
           str_eq(p->mmproj, m->mmproj) && p->mode == m->mode;
}

static struct lp *lp_find(struct llamacpp *a, const struct qr_llamacpp_model *m)
{
    for (struct lp *p = a->procs; p; p = p->next) {
        if (lp_matches(p, m))
            return p;
    }
    return NULL;
}

/* The applied plan at info: decision, reason with its numbers, and the flags the engine got. */
static void lp_log_plan(const struct lp *p, const char *const *extra, size_t n_extra)
{
    char args[QR_PLACEMENT_MAX_ARGS * QR_PLACEMENT_ARG] = "";
    size_t o = 0;
    for (size_t i = 0; i < n_extra && o < sizeof args; i++)
        o += (size_t) snprintf(args + o, sizeof args - o, "%s%s", i ? " " : "", extra[i]);
    const char *decision = p->plan ? qr_placement_decision_name(p->plan->decision) : "none";
    const char *reason = p->plan && p->plan->fits ? p->plan->reason : p->plan_note;
    const char *shown = args; /* QR_LF_S tests its value for NULL */
    QR_LOG(QR_LOG_INFO, "llama.cpp placement applied", QR_LF_S("model", p->id),
           QR_LF_S("decision", decision), QR_LF_S("reason", reason), QR_LF_S("args", shown),
           QR_LF_N("total_bytes", p->plan ? p->plan->total : 0), QR_LF_N("threads", p->threads));
}

static enum qr_err lp_new(struct llamacpp *a, const struct qr_llamacpp_model *m,
                          struct qr_api_error *err, struct lp **out)
{
    struct lp *p = calloc(1, sizeof *p);
    if (!p)
        abort();
    p->a = a;
    p->id = dup_or_null(m->id);
    p->gguf = dup_or_null(m->gguf_path);
    p->draft = dup_or_null(m->draft_path);
    p->spec = dup_or_null(m->spec_type);
    p->mmproj = dup_or_null(m->mmproj);
    p->mode = m->mode;
    p->native_ctx = m->native_ctx;
    p->ctx = a->o.ctx;
    p->parallel = a->o.parallel;
    p->threads = a->o.threads;
    p->keep_ms = a->o.idle_ttl_ms;
    p->load_ms = -1;
    p->idle_timer = evtimer_new(a->base.env.base, on_idle, p);
    p->reap_timer = evtimer_new(a->base.env.base, on_reap, p);
    if (!p->idle_timer || !p->reap_timer)
        abort();
    lp_size(p);
    const char *extra[QR_PLACEMENT_MAX_ARGS];
    size_t n_extra = 0;
    enum qr_err e = lp_plan(p, err);
    if (e)
        goto fail;
    n_extra = lp_plan_args(p, extra, QR_PLACEMENT_MAX_ARGS);
    struct qr_llama_proc_opts po = {
        .name = p->id,
        .engine_path = a->engine.path,
        .plan = {.model_path = p->gguf,
                 .alias = p->id,
                 .ctx = p->ctx,
                 .parallel = p->parallel,
                 .threads = p->threads,
                 .threads_batch = p->threads,
                 .embeddings = p->mode == QR_LLAMACPP_EMBED,
                 .rerank = p->mode == QR_LLAMACPP_RERANK,
                 .draft_model = p->draft,
                 .spec_type = p->spec,
                 .mmproj = p->mmproj,
                 .extra = n_extra ? extra : NULL,
                 .n_extra = n_extra},
        .restart = a->o.restart,
        .load_timeout_ms = a->o.load_timeout_ms,
        .stop_grace_ms = STOP_GRACE_MS,
        .on_state = on_proc_state,
        .arg = p,
    };
    struct qr_diag d = {{0}};
    e = qr_llama_proc_new(a->sup, &po, &d, &p->proc);
    if (e) {
        qr_api_error_set(err, e, 500, "model_load_failed", "model", "cannot load model '%s': %s",
                         p->id, d.msg);
        goto fail;
    }
    e = make_room(a, p, err);
    if (e)
        goto fail;
    p->loaded_at_ms = wall_ms();
    p->last_used_ms = p->loaded_at_ms;
    p->next = a->procs;
    a->procs = p;
    e = qr_llama_proc_start(p->proc, &d);
    if (e) {
        a->procs = p->next;
        qr_api_error_set(err, e, 503, "model_load_failed", "model", "cannot load model '%s': %s",
                         p->id, d.msg);
        goto fail;
    }
    QR_LOG(QR_LOG_INFO, "llama.cpp loading model", QR_LF_S("model", p->id),
           QR_LF_S("gguf", p->gguf), QR_LF_N("bytes", p->bytes), QR_LF_N("ctx", p->ctx),
           QR_LF_N("parallel", p->parallel));
    lp_log_plan(p, extra, n_extra);
    *out = p;
    return QR_OK;
fail:
    lp_free(p);
    return e;
}

/* ---- the custom job handle ---- */

static void ljob_cancel(void *impl)
{
    struct ljob *j = impl;
    if (j->inner) {
        qr_job_cancel(j->inner); /* closes the stream: the engine frees the slot */
        j->inner = NULL;
    }
    ljob_end(j);
}

static void ljob_pause(void *impl, bool paused)
{
    struct ljob *j = impl;
    j->paused = paused;
    if (j->inner) {
        if (paused)
            qr_job_pause(j->inner);
        else
            qr_job_resume(j->inner);
    }
}

static const struct qr_job_ops ljob_ops = {.cancel = ljob_cancel, .pause = ljob_pause};

/* ---- vtable ---- */

static enum qr_err check_model(const struct qr_llamacpp_model *m, struct qr_slice name,
                               struct qr_api_error *err)
{
    if (!m->id || !m->id[0] || strlen(m->id) > MAX_MODEL_ID || !m->gguf_path || !m->gguf_path[0] ||
        strlen(m->gguf_path) > MAX_PATH_ARG)
        return qr_api_error_set(err, QR_ERR_INTERNAL, 500, "internal_error", "model",
                                "the model resolver gave no usable id or file for '%.*s'",
                                (int) name.len, name.ptr);
    return QR_OK;
}

/* The work a process mode serves: chat generates, embed embeds, rerank ranks. */
static const char *mode_work(enum qr_llamacpp_mode mode)
{
    return mode == QR_LLAMACPP_EMBED    ? "embeddings"
           : mode == QR_LLAMACPP_RERANK ? "reranking"
                                        : "generation";
}

/* A request goes only to a process started for its kind of work: embeddings to --embedding,
 * rerank to --rerank, chat and completions to a generating one. */
static enum qr_err check_op(const struct qr_request *req, const struct qr_llamacpp_model *m,
                            struct qr_api_error *err)
{
    enum qr_llamacpp_mode want = req->op == QR_OP_EMBED    ? QR_LLAMACPP_EMBED
                                 : req->op == QR_OP_RERANK ? QR_LLAMACPP_RERANK
                                                           : QR_LLAMACPP_CHAT;
    if (m->mode == want)
        return QR_OK;
    return qr_api_error_set(err, QR_ERR_INVALID, 422, "capability_unsupported", "model",
                            "model '%s' is a %s model: it serves %s, not %s requests", m->id,
                            qr_llamacpp_mode_str(m->mode), mode_work(m->mode), mode_work(want));
}

static enum qr_err submit(struct llamacpp *a, const struct qr_request *req, bool load_only,
                          qr_event_fn fn, void *arg, struct qr_job **out, struct qr_api_error *err)
{
    if (!a->configured || !a->engine_ok)
        return qr_api_error_set(err, QR_ERR_UNAVAILABLE, 503, "backend_unavailable", "",
                                "the llama.cpp backend is not available: %s",
                                a->configured ? a->engine_err : "not configured");
    struct qr_llamacpp_model m = {0};
    struct qr_diag d = {{0}};
    enum qr_err e = a->o.resolve(a->o.resolver_arg, req->model, &m, &d);
    if (e)
        return qr_api_error_set(err, QR_ERR_NOT_FOUND, 404, "model_not_found", "model",
                                "model '%.*s' not found%s%s", (int) req->model.len, req->model.ptr,
                                d.msg[0] ? ": " : "", d.msg);
    if ((e = check_model(&m, req->model, err)) || (e = check_op(req, &m, err)) ||
        (e = qr_llamacpp_check_tool_choice(req, err)))
        return e;
    struct lp *p = lp_find(a, &m);
    enum qr_llama_proc_state st = p ? qr_llama_proc_state(p->proc) : QR_LLAMA_PROC_IDLE;
    if (p && st == QR_LLAMA_PROC_FAILED)
        return qr_api_error_set(err, QR_ERR_UNAVAILABLE, 503, "model_failed", "model",
                                "model '%s' is marked failed (unload it to retry): %s", p->id,
                                p->reason);
    /* admission: against the engine's evidence when the process serves, else the context
     * against the plan now (nothing is loaded for a request that cannot fit) and the rest once
     * the evidence is in (lp_drain) */
    if (p && lp_serving(p))
        e = lp_admit(p, req, err);
    else if (p)
        e = qr_llamacpp_check_context(p->id, req, lp_slot_ctx(p), p->ctx, p->parallel,
                                      p->props.valid, err);
    else
        e = qr_llamacpp_check_context(m.id, req,
                                      qr_llamacpp_slot_ctx(a->o.ctx, a->o.parallel, m.native_ctx),
                                      a->o.ctx, a->o.parallel, false, err);
    if (e) {
        if (p)
            p->refused++;
        return e;
    }
    if (p && !lp_serving(p) && p->queue.n >= a->o.max_queue)
        return qr_api_error_set(err, QR_ERR_BUSY, 503, "queue_full", "model",
                                "model '%s' is loading and %u requests already wait for it", p->id,
                                p->queue.n);
    if (!p && (e = lp_new(a, &m, err, &p)))
        return e;
    struct ljob *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    j->p = p;
    j->fn = fn;
    j->arg = arg;
    j->req = *req;
    j->load_only = load_only;
    j->single_call = req->parallel_tool_calls == QR_FALSE;
    if (req->tool_choice.kind == QR_TOOL_CHOICE_FUNCTION) {
        /* the engine does not enforce a named tool_choice: offer it only that tool and require
         * a call (the equivalent for a single tool); a call to any other is refused in relay */
        for (size_t i = 0; i < req->n_tools; i++) {
            if (slice_same(req->tools[i].name, req->tool_choice.name))
                j->only_tool = req->tools[i];
        }
        j->named = req->tool_choice.name;
        j->req.tools = &j->only_tool;
        j->req.n_tools = 1;
        j->req.tool_choice.kind = QR_TOOL_CHOICE_REQUIRED;
        j->req.tool_choice.name = (struct qr_slice){"", 0};
    }
    if (req->op != QR_OP_EMBED && req->op != QR_OP_RERANK) {
        /* the engine cancels only a streamed request on disconnect; bound every generation */
        j->req.stream = true;
        j->req.stream_set = true;
        if (!j->req.max_tokens.set || j->req.max_tokens.v <= 0) {
            j->req.max_tokens.set = true;
            j->req.max_tokens.v =
                a->o.max_tokens > 0 ? a->o.max_tokens : (int64_t) (p->ctx / p->parallel);
        }
    }
    j->handle = qr_job_new_custom(&ljob_ops, j);
    if (!j->handle)
        abort();
    if (req->keep_alive.set)
        p->keep_ms = req->keep_alive.forever ? -1 : req->keep_alive.ms;
    p->unload_when_idle = false;
    lp_busy(p);
    if (lp_serving(p)) {
        if ((e = ljob_start(j, err))) {
            qr_job_free_custom(j->handle);
            free(j);
            lp_maybe_idle(p);
            return e;
        }
        jl_push(&p->running, j);
        j->running = true;
    } else {
        jl_push(&p->queue, j);
    }
    *out = j->handle;
    return QR_OK;
}

/* An image or audio part given by URL: llama-server would fetch it itself (its media download),
 * so a client could make the engine reach any host it can see (SSRF). Only inline data goes to
 * the engine; NULL when there is no URL part. */
static const struct qr_part *media_url(const struct qr_request *req)
{
    for (size_t i = 0; i < req->n_messages; i++) {
        const struct qr_message *m = &req->messages[i];
        for (size_t k = 0; k < m->n_parts; k++)
            if ((m->parts[k].kind == QR_PART_IMAGE || m->parts[k].kind == QR_PART_AUDIO) &&
                m->parts[k].is_url)
                return &m->parts[k];
    }
    for (size_t i = 0; i < req->n_images; i++)
        if (req->images[i].is_url)
            return &req->images[i];
    return NULL;
}

static enum qr_err ll_submit(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                             void *arg, struct qr_job **out, struct qr_api_error *err)
{
    if (media_url(req))
        return qr_api_error_set(err, QR_ERR_INVALID, 422, "capability_unsupported", "messages",
                                "an image or audio part given by URL is not fetched for the "
                                "llama.cpp backend: send it inline as a data: URL (base64)");
    return submit((struct llamacpp *) b, req, false, fn, arg, out, err);
}

enum qr_err qr_llamacpp_load(struct qr_backend *b, const struct qr_request *req, qr_event_fn fn,
                             void *arg, struct qr_job **out, struct qr_api_error *err)
{
    if (req->op != QR_OP_CHAT && req->op != QR_OP_COMPLETION && req->op != QR_OP_EMBED)
        return qr_api_error_set(err, QR_ERR_INVALID, 400, "invalid_request", "",
                                "a load request is a chat, generate or embed request");
    return submit((struct llamacpp *) b, req, true, fn, arg, out, err);
}

static enum qr_err ll_open(struct qr_backend *b, struct qr_diag *diag)
{
    struct llamacpp *a = (struct llamacpp *) b;
    snprintf(a->engine_err, sizeof a->engine_err, "not configured");
    return qr_llama_sup_new(b->env.base, b->env.http, diag, &a->sup);
}

static void later_cancel_all(struct llamacpp *a);

static void ll_close(struct qr_backend *b)
{
    struct llamacpp *a = (struct llamacpp *) b;
    later_cancel_all(a);
    while (a->procs) {
        struct lp *p = a->procs;
        /* no events after the backend is freed: the callers' handles die with it */
        while (p->queue.head || p->running.head) {
            struct ljob *j = p->queue.head ? p->queue.head : p->running.head;
            if (j->inner)
                qr_job_cancel(j->inner);
            j->inner = NULL;
            jl_unlink(j->running ? &p->running : &p->queue, j);
            ljob_free(j);
        }
        lp_destroy(p);
    }
    qr_llama_sup_free(a->sup);
    free(a->engine_path);
    free(a->prefix);
}

/* The host every load is planned on, discovered here once (topology, NUMA, accelerators, cgroup
 * limits; the free memory is read again per load), or the given one. */
static void configure_host(struct llamacpp *a, const struct qr_placement_host *given)
{
    a->host_given = given != NULL;
    if (given) {
        a->host = *given;
        return;
    }
    struct qr_host_profile *hp = malloc(sizeof *hp);
    struct qr_host_limits *hl = malloc(sizeof *hl);
    if (!hp || !hl)
        abort();
    qr_host_discover(NULL, hp, hl);
    qr_placement_host_from_profile(hp, hl, &a->host);
    QR_LOG(QR_LOG_INFO, "llama.cpp placement host",
           QR_LF_N("physical_cores", a->host.physical_cores),
           QR_LF_N("logical_cpus", a->host.logical_cpus), QR_LF_N("ram_total", a->host.ram_total),
           QR_LF_N("ram_limit", a->host.ram_limit), QR_LF_N("numa_nodes", a->host.n_numa),
           QR_LF_N("accelerators", a->host.n_accel));
    free(hl);
    free(hp);
}

enum qr_err qr_llamacpp_configure(struct qr_backend *b, const struct qr_llamacpp_options *o,
                                  struct qr_diag *diag)
{
    struct llamacpp *a = (struct llamacpp *) b;
    if (b->vt != &qr_backend_llamacpp)
        return qr_diag_set(diag, QR_ERR_INTERNAL, "not a llama.cpp backend");
    if (!o->resolve)
        return qr_diag_set(diag, QR_ERR_CONFIG, "llama.cpp backend: no model resolver");
    free(a->engine_path);
    free(a->prefix);
    a->o = *o;
    a->engine_path = dup_or_null(o->engine_path);
    a->prefix = dup_or_null(o->prefix);
    a->o.engine_path = a->engine_path;
    a->o.prefix = a->prefix;
    a->o.host = NULL; /* copied below, not kept */
    configure_host(a, o->host);
    if (a->o.idle_ttl_ms == 0)
        a->o.idle_ttl_ms = DEFAULT_TTL_MS;
    if (a->o.idle_ttl_ms < 0)
        a->o.idle_ttl_ms = -1;
    if (!a->o.ctx)
        a->o.ctx = DEFAULT_CTX;
    if (!a->o.parallel)
        a->o.parallel = 1;
    if (!a->o.load_timeout_ms)
        a->o.load_timeout_ms = DEFAULT_LOAD_MS;
    if (!a->o.max_queue)
        a->o.max_queue = DEFAULT_QUEUE;
    if (!a->o.crash_grace_ms)
        a->o.crash_grace_ms = DEFAULT_GRACE_MS;
    a->configured = true;
    a->engine_ok = false;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_llama_engine_find(a->engine_path, a->prefix, &d, &a->engine);
    if (!e)
        e = qr_llama_engine_probe(&a->engine, PROBE_TIMEOUT_MS, &d);
    b->state = e ? QR_BACKEND_UNAVAILABLE : QR_BACKEND_READY;
    b->state_since_ms = wall_ms();
    if (e) {
        snprintf(a->engine_err, sizeof a->engine_err, "%s", d.msg);
        return qr_diag_set(diag, e, "%s", d.msg);
    }
    a->engine_ok = true;
    a->engine_err[0] = '\0';
    QR_LOG(QR_LOG_INFO, "llama.cpp engine found", QR_LF_S("path", a->engine.path),
           QR_LF_S("source", qr_llama_engine_source_str(a->engine.source)),
           QR_LF_S("version", a->engine.version), QR_LF_N("build", a->engine.build));
    return QR_OK;
}

const struct qr_llama_engine *qr_llamacpp_engine(const struct qr_backend *b)
{
    const struct llamacpp *a = (const struct llamacpp *) b;
    return a->engine_ok ? &a->engine : NULL;
}

/* ---- probe and model list: answered later on the loop ---- */

struct later {
    struct llamacpp *a;
    struct later *next;
    struct event *ev;
    qr_backend_probe_fn probe_cb;
    qr_models_fn models_cb;
    void *arg;
};

struct model_rows {
    struct qr_backend_model *rows;
    size_t n, cap;
    char **owned;
    size_t n_owned;
};

static const char *keep_str(struct model_rows *r, const char *s)
{
    char *d = strdup(s ? s : "");
    char **o = realloc(r->owned, (r->n_owned + 1) * sizeof *o);
    if (!d || !o)
        abort();
    r->owned = o;
    r->owned[r->n_owned++] = d;
    return d;
}

static void add_row(void *ctx, const struct qr_llamacpp_model *m)
{
    struct model_rows *r = ctx;
    if (!m->id || !m->id[0])
        return;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 16;
        struct qr_backend_model *nr = realloc(r->rows, cap * sizeof *nr);
        if (!nr)
            abort();
        r->rows = nr;
        r->cap = cap;
    }
    struct stat st;
    r->rows[r->n++] = (struct qr_backend_model){
        .id = keep_str(r, m->id),
        .owned_by = "llama.cpp",
        .size_bytes = m->gguf_path && stat(m->gguf_path, &st) == 0 ? (int64_t) st.st_size : -1,
        .digest = "",
        .family = "",
        .context_length = m->native_ctx ? (int64_t) m->native_ctx : -1,
    };
}

static void later_unlink(struct later *l)
{
    for (struct later **pp = &l->a->laters; *pp; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            return;
        }
    }
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
    struct later *l = arg;
    struct llamacpp *a = l->a;
    struct qr_diag d = {{0}};
    later_unlink(l);
    event_free(l->ev);
    if (l->probe_cb) {
        enum qr_err e = QR_OK;
        if (!a->engine_ok)
            e = qr_diag_set(&d, QR_ERR_UNAVAILABLE, "llama.cpp engine unavailable: %s",
                            a->engine_err);
        l->probe_cb(&a->base, e, &d, l->arg);
    } else {
        struct model_rows r = {0};
        if (a->o.list)
            a->o.list(a->o.resolver_arg, add_row, &r);
        for (struct lp *p = a->procs; p; p = p->next) { /* loaded ones the list lacks */
            bool found = false;
            for (size_t i = 0; i < r.n && !found; i++)
                found = strcmp(r.rows[i].id, p->id) == 0;
            if (!found && !p->unloading)
                add_row(&r, &(struct qr_llamacpp_model){
                                .id = p->id, .gguf_path = p->gguf, .native_ctx = p->native_ctx});
        }
        l->models_cb(&a->base, QR_OK, r.rows, r.n, &d, l->arg);
        for (size_t i = 0; i < r.n_owned; i++)
            free(r.owned[i]);
        free(r.owned);
        free(r.rows);
    }
    free(l);
}

static enum qr_err later(struct llamacpp *a, qr_backend_probe_fn pcb, qr_models_fn mcb, void *arg)
{
    struct later *l = calloc(1, sizeof *l);
    if (!l)
        return QR_ERR_NOMEM;
    *l = (struct later){.a = a, .probe_cb = pcb, .models_cb = mcb, .arg = arg};
    l->ev = evtimer_new(a->base.env.base, on_later, l);
    if (!l->ev) {
        free(l);
        return QR_ERR_NOMEM;
    }
    struct timeval tv = {0, 0};
    evtimer_add(l->ev, &tv);
    l->next = a->laters;
    a->laters = l;
    return QR_OK;
}

/* Backend free: every answer not delivered yet is delivered as cancelled. */
static void later_cancel_all(struct llamacpp *a)
{
    struct qr_diag d;
    qr_diag_set(&d, QR_ERR_CANCELLED, "the runtime is shutting down");
    while (a->laters) {
        struct later *l = a->laters;
        a->laters = l->next;
        event_free(l->ev);
        if (l->probe_cb)
            l->probe_cb(&a->base, QR_ERR_CANCELLED, &d, l->arg);
        else
            l->models_cb(&a->base, QR_ERR_CANCELLED, NULL, 0, &d, l->arg);
        free(l);
    }
}

static enum qr_err ll_probe(struct qr_backend *b, uint32_t timeout_ms, qr_backend_probe_fn cb,
                            void *arg)
{
    return later((struct llamacpp *) b, cb, NULL, arg);
}

static enum qr_err ll_list_models(struct qr_backend *b, uint32_t timeout_ms, qr_models_fn cb,
                                  void *arg)
{
    return later((struct llamacpp *) b, NULL, cb, arg);
}

/* ---- descriptor ---- */

void qr_llamacpp_descriptor(const struct qr_backend *b, struct qr_cap_descriptor *d)
{
    const struct llamacpp *a = (const struct llamacpp *) b;
    /* What the packaged engine does through this adapter (llamacpp.md Q2/Q4): conditional where
     * the model decides (its template, its file, a declared projector or draft), unsupported
     * where the adapter passes no knob yet (expert/KV placement), unknown where nothing was
     * verified. */
    static const struct {
        enum qr_cap_key key;
        enum qr_cap_state state;
    } rows[] = {
        {QR_CAP_INFERENCE_TEXT, QR_CAP_CONDITIONAL}, /* not for embed/rerank artifacts */
        {QR_CAP_ARCH_DENSE, QR_CAP_SUPPORTED},
        {QR_CAP_ARCH_MOE, QR_CAP_SUPPORTED},
        {QR_CAP_MOE_EXPERT_OFFLOAD, QR_CAP_UNSUPPORTED},
        {QR_CAP_MOE_EXPERT_PARALLEL, QR_CAP_UNSUPPORTED},
        {QR_CAP_SPEC_MTP, QR_CAP_UNKNOWN},
        {QR_CAP_SPEC_DRAFT_MODEL, QR_CAP_CONDITIONAL},
        {QR_CAP_CACHE_KV_OFFLOAD, QR_CAP_UNSUPPORTED},
        {QR_CAP_CACHE_PROMPT_CACHE, QR_CAP_SUPPORTED},
        {QR_CAP_VISION, QR_CAP_CONDITIONAL},
        {QR_CAP_AUDIO, QR_CAP_CONDITIONAL},
        {QR_CAP_EMBEDDINGS, QR_CAP_CONDITIONAL},
        {QR_CAP_RERANKING, QR_CAP_CONDITIONAL},
        {QR_CAP_REASONING_CONTROL, QR_CAP_CONDITIONAL},
        {QR_CAP_TOOLS_CALLING, QR_CAP_CONDITIONAL},
        {QR_CAP_TOOLS_STREAMING, QR_CAP_CONDITIONAL},
        {QR_CAP_STRUCTURED_OUTPUT, QR_CAP_CONDITIONAL},
        {QR_CAP_STREAM_CONTENT, QR_CAP_SUPPORTED},
        {QR_CAP_STREAM_REASONING, QR_CAP_CONDITIONAL},
        {QR_CAP_STREAM_TOOL_ARGS, QR_CAP_CONDITIONAL},
        {QR_CAP_PLACE_CPU, QR_CAP_SUPPORTED},
        {QR_CAP_PLACE_GPU, QR_CAP_UNKNOWN},
        {QR_CAP_PLACE_HYBRID, QR_CAP_UNKNOWN},
        {QR_CAP_CONTEXT_OVERRIDE, QR_CAP_SUPPORTED}, /* -c from the plan */
    };
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "%s", qr_backend_llamacpp.id);
    d->kind = QR_CAP_KIND_LLAMACPP;
    snprintf(d->adapter_version, sizeof d->adapter_version, "%s", QR_VERSION);
    d->execution_mode = QR_CAP_EXEC_PROCESS;
    d->state = !a->configured ? QR_CAP_BACKEND_UNKNOWN
               : a->engine_ok ? QR_CAP_BACKEND_READY
                              : QR_CAP_BACKEND_UNAVAILABLE;
    for (size_t i = 0; i < QR_ARRAY_LEN(rows); i++)
        d->caps[rows[i].key] = rows[i].state;
    snprintf(d->formats[0], sizeof d->formats[0], "gguf");
    d->n_formats = 1;
    d->caps[QR_CAP_QUANT_FORMATS] = QR_CAP_CONDITIONAL;
    d->backend_managed = false; /* the Runtime sets the context (-c) */
    d->override_verified = false;
}

/* qr_backend_describe wrote the common members; add the rest of the descriptor. */
static void ll_describe(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *obj)
{
    struct qr_cap_descriptor d;
    qr_llamacpp_descriptor(b, &d);
    yyjson_mut_val *tmp = yyjson_mut_obj(doc);
    if (!tmp || qr_cap_descriptor_add(&d, doc, tmp))
        return;
    static const char *const take[] = {"execution_mode", "capabilities"};
    for (size_t i = 0; i < QR_ARRAY_LEN(take); i++) {
        yyjson_mut_val *v = yyjson_mut_obj_remove_key(tmp, take[i]);
        if (v)
            yyjson_mut_obj_add_val(doc, obj, take[i], v);
    }
}

/* ---- loaded processes ---- */

static int port_of(const char *url)
{
    const char *c = strrchr(url, ':');
    return c && c[1] >= '0' && c[1] <= '9' ? atoi(c + 1) : 0;
}

static void fill_loaded(const struct lp *p, struct qr_llamacpp_loaded *r)
{
    memset(r, 0, sizeof *r);
    snprintf(r->model, sizeof r->model, "%s", p->id);
    snprintf(r->gguf_path, sizeof r->gguf_path, "%s", p->gguf);
    r->mode = p->mode;
    r->state = qr_llama_proc_state(p->proc);
    r->pid = qr_llama_proc_pid(p->proc);
    r->port = port_of(qr_llama_proc_base_url(p->proc));
    r->ctx = p->ctx;
    r->parallel = p->parallel;
    r->threads = p->threads;
    r->bytes = p->bytes;
    r->weight_bytes = p->weight_bytes;
    r->kv_bytes = p->kv_bytes;
    r->compute_bytes = p->compute_bytes;
    r->in_flight = p->running.n;
    r->queued = p->queue.n;
    r->loaded_at_ms = p->loaded_at_ms;
    r->load_ms = p->load_ms;
    r->loading_ms = r->state == QR_LLAMA_PROC_STARTING || r->state == QR_LLAMA_PROC_LOADING
                        ? wall_ms() - p->loaded_at_ms
                        : -1;
    r->last_used_ms = p->last_used_ms;
    r->expires_at_ms = p->expires_at_ms;
    r->crashes = p->crashes;
    snprintf(r->reason, sizeof r->reason, "%s", p->reason);
    r->requests = p->requests;
    r->refused = p->refused;
    r->tool_calls_dropped = p->tool_calls_dropped;
    r->props = p->props;
    r->planned = p->plan != NULL;
    snprintf(r->plan_note, sizeof r->plan_note, "%s", p->plan_note);
    r->plan_n_args = 0;
    if (!p->plan)
        return;
    snprintf(r->plan_decision, sizeof r->plan_decision, "%s",
             qr_placement_decision_name(p->plan->decision));
    snprintf(r->plan_strategy, sizeof r->plan_strategy, "%s",
             qr_placement_strategy_name(p->plan->strategy));
    snprintf(r->plan_reason, sizeof r->plan_reason, "%s", p->plan->reason);
    r->plan_total_bytes = p->plan->total;
    r->plan_ram_usable_bytes = p->plan->ram.usable;
    r->plan_threads = p->plan->threads;
    const char *argv[QR_PLACEMENT_MAX_ARGS];
    size_t n = lp_plan_args(p, argv, QR_PLACEMENT_MAX_ARGS);
    for (size_t i = 0; i < n; i++)
        snprintf(r->plan_args[i], sizeof r->plan_args[i], "%s", argv[i]);
    r->plan_n_args = n;
}

size_t qr_llamacpp_loaded_list(struct qr_backend *b, struct qr_llamacpp_loaded *out, size_t cap)
{
    struct llamacpp *a = (struct llamacpp *) b;
    size_t n = 0;
    for (struct lp *p = a->procs; p; p = p->next) {
        if (n < cap)
            fill_loaded(p, &out[n]);
        n++;
    }
    return n;
}

/* "placement_plan": the plan applied at start (null decision when the file was not planned). */
static bool add_plan(yyjson_mut_doc *doc, yyjson_mut_val *o, const struct qr_llamacpp_loaded *r)
{
    yyjson_mut_val *pl = yyjson_mut_obj_add_obj(doc, o, "placement_plan");
    if (!pl)
        return false;
    if (!r->planned)
        return yyjson_mut_obj_add_null(doc, pl, "decision") &&
               yyjson_mut_obj_add_bool(doc, pl, "applied", false) &&
               yyjson_mut_obj_add_strcpy(doc, pl, "note", r->plan_note);
    yyjson_mut_val *args = yyjson_mut_obj_add_arr(doc, pl, "args");
    bool ok = args != NULL;
    for (size_t i = 0; ok && i < r->plan_n_args; i++)
        ok = yyjson_mut_arr_add_strcpy(doc, args, r->plan_args[i]);
    return ok && yyjson_mut_obj_add_strcpy(doc, pl, "decision", r->plan_decision) &&
           yyjson_mut_obj_add_strcpy(doc, pl, "strategy", r->plan_strategy) &&
           yyjson_mut_obj_add_bool(doc, pl, "applied", r->plan_note[0] == '\0') &&
           yyjson_mut_obj_add_strcpy(doc, pl, "reason", r->plan_reason) &&
           (r->plan_note[0] ? yyjson_mut_obj_add_strcpy(doc, pl, "note", r->plan_note)
                            : yyjson_mut_obj_add_null(doc, pl, "note")) &&
           yyjson_mut_obj_add_uint(doc, pl, "total_bytes", r->plan_total_bytes) &&
           yyjson_mut_obj_add_uint(doc, pl, "ram_usable_bytes", r->plan_ram_usable_bytes) &&
           yyjson_mut_obj_add_uint(doc, pl, "threads", r->plan_threads);
}

/* "engine_args": the argv words the process was spawned with (before --host/--port). */
static bool add_engine_args(yyjson_mut_doc *doc, yyjson_mut_val *o,
                            const struct qr_llama_proc *proc)
{
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, o, "engine_args");
    size_t n = 0;
    const char *const *argv = proc ? qr_llama_proc_args(proc, &n) : NULL;
    for (size_t i = 0; arr && i < n; i++) {
        if (!yyjson_mut_arr_add_strcpy(doc, arr, argv[i]))
            return false;
    }
    return arr != NULL;
}

enum qr_err qr_llamacpp_loaded_json(struct qr_backend *b, yyjson_mut_doc *doc, yyjson_mut_val *arr)
{
    struct llamacpp *a = (struct llamacpp *) b;
    struct qr_llamacpp_loaded r;
    for (struct lp *p = a->procs; p; p = p->next) {
        fill_loaded(p, &r);
        yyjson_mut_val *o = yyjson_mut_obj(doc);
        bool ok = o && yyjson_mut_arr_append(arr, o);
        ok = ok && yyjson_mut_obj_add_strcpy(doc, o, "model", r.model) &&
             yyjson_mut_obj_add_strcpy(doc, o, "gguf", r.gguf_path) &&
             yyjson_mut_obj_add_str(doc, o, "mode", qr_llamacpp_mode_str(r.mode)) &&
             yyjson_mut_obj_add_str(doc, o, "state", qr_llama_proc_state_str(r.state)) &&
             yyjson_mut_obj_add_sint(doc, o, "pid", r.pid) &&
             yyjson_mut_obj_add_int(doc, o, "port", r.port) &&
             yyjson_mut_obj_add_uint(doc, o, "ctx", r.ctx) &&
             yyjson_mut_obj_add_uint(doc, o, "parallel", r.parallel) &&
             yyjson_mut_obj_add_uint(doc, o, "threads", r.threads) &&
             yyjson_mut_obj_add_uint(doc, o, "bytes", r.bytes) &&
             yyjson_mut_obj_add_uint(doc, o, "weight_bytes", r.weight_bytes) &&
             yyjson_mut_obj_add_uint(doc, o, "kv_bytes", r.kv_bytes) &&
             yyjson_mut_obj_add_uint(doc, o, "compute_bytes", r.compute_bytes) &&
             yyjson_mut_obj_add_uint(doc, o, "in_flight", r.in_flight) &&
             yyjson_mut_obj_add_uint(doc, o, "queued", r.queued) &&
             yyjson_mut_obj_add_sint(doc, o, "loaded_at_ms", r.loaded_at_ms) &&
             yyjson_mut_obj_add_sint(doc, o, "load_ms", r.load_ms) &&
             yyjson_mut_obj_add_sint(doc, o, "loading_ms", r.loading_ms) &&
             yyjson_mut_obj_add_sint(doc, o, "last_used_ms", r.last_used_ms) &&
             yyjson_mut_obj_add_sint(doc, o, "expires_at_ms", r.expires_at_ms) &&
             yyjson_mut_obj_add_uint(doc, o, "crashes", r.crashes) &&
             yyjson_mut_obj_add_strcpy(doc, o, "reason", r.reason) &&
             yyjson_mut_obj_add_uint(doc, o, "requests", r.requests) &&
             yyjson_mut_obj_add_uint(doc, o, "refused", r.refused) &&
             yyjson_mut_obj_add_uint(doc, o, "tool_calls_dropped", r.tool_calls_dropped) &&
             add_plan(doc, o, &r) && add_engine_args(doc, o, p->proc) &&
             qr_llamacpp_props_json(doc, o, &r.props);
        if (!ok)
            return QR_ERR_NOMEM;
    }
    return QR_OK;
}

static struct lp *find_loaded(struct llamacpp *a, const char *id)
{
    for (struct lp *p = a->procs; p; p = p->next) {
        if (!p->unloading && strcmp(p->id, id) == 0)
            return p;
    }
    if (!a->configured || !a->o.resolve)
        return NULL;
    struct qr_llamacpp_model m = {0};
    struct qr_diag d = {{0}};
    if (a->o.resolve(a->o.resolver_arg, qr_slice_str(id), &m, &d) || !m.id)
        return NULL;
    for (struct lp *p = a->procs; p; p = p->next) {
        if (!p->unloading && strcmp(p->id, m.id) == 0)
            return p;
    }
    return NULL;
}

enum qr_err qr_llamacpp_unload(struct qr_backend *b, const char *id, bool *out_deferred,
                               struct qr_diag *diag)
{
    struct llamacpp *a = (struct llamacpp *) b;
    struct lp *p = find_loaded(a, id);
    if (out_deferred)
        *out_deferred = false;
    if (!p)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' is not loaded", id);
    if (!lp_idle(p)) {
        p->unload_when_idle = true;
        if (out_deferred)
            *out_deferred = true;
        return QR_OK;
    }
    lp_unload(p);
    return QR_OK;
}

struct qr_llama_proc *qr_llamacpp_find_proc(struct qr_backend *b, const char *id)
{
    struct lp *p = find_loaded((struct llamacpp *) b, id);
    return p ? p->proc : NULL;
}

const struct qr_backend_vtable qr_backend_llamacpp = {
    .version = QR_BACKEND_VTABLE_V1,
    .id = "llama.cpp",
    .kind = "llama.cpp",
    .instance_size = sizeof(struct llamacpp),
    .open = ll_open,
    .close = ll_close,
    .describe = ll_describe,
    .probe = ll_probe,
    .proxy = NULL,
    .submit = ll_submit,
    .list_models = ll_list_models,
};
