/* Supervised llama-server processes for the native llama.cpp backend. Each qr_llama_proc turns a
 * plan into one engine child on a free loopback port with its own random API key, captures the
 * child's output into a bounded ring on the event loop, polls GET /health until the model is
 * loaded, and watches for the child's death through the supervisor's single SIGCHLD handler. A
 * death that was not asked for is a crash: it is reported with the exit code or signal and the
 * last log lines, then restarted with exponential backoff until too many crashes fall within the
 * window, when the proc is marked failed with the reason. The child runs in its own process group
 * so that stop (SIGTERM, then SIGKILL after a grace period) reaches whatever the engine wrapper
 * script execs. Nothing here blocks the loop except freeing a proc with a live child (SIGKILL
 * and reap). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "backend/llamacpp/proc.h"
#include "backend/llamacpp/spawn.h"
#include "core/http_client.h"
#include "core/log.h"

#define DEF_LOAD_TIMEOUT_MS 120000u
#define DEF_HEALTH_MS       50u
#define FAST_HEALTH_MS      10u   /* default polling for the first FAST_HEALTH_FOR_MS of a load */
#define FAST_HEALTH_FOR_MS  1000u /* (small models are ready in ~0.1 s: 50 ms polls cost 25 ms) */
#define MIN_HEALTH_MS       10u
#define DEF_STOP_GRACE_MS   5000u
#define DEF_RING_BYTES      (64u * 1024u)
#define MAX_RING_BYTES      (16u * 1024u * 1024u)
#define DEF_BACKOFF_MS      500u
#define DEF_BACKOFF_MAX_MS  30000u
#define DEF_MAX_CRASHES     5u
#define DEF_WINDOW_MS       60000u
#define MAX_CRASH_HISTORY   64u        /* crash times remembered (max_crashes is capped to this) */
#define MAX_BIND_RETRIES    5u         /* respawns on a new port after "couldn't bind" */
#define READ_CHUNK          16384      /* bytes per read(2) of the output pipe */
#define READS_PER_EVENT     8          /* then yield to the loop */
#define DRAIN_MAX           (1u << 20) /* output drained synchronously when the child is reaped */
#define HEALTH_TIMEOUT_MS   2000u
#define DEF_LIVE_MS         5000u /* READY: /health probe period */
#define DEF_LIVE_TIMEOUT_MS 5000u
#define DEF_LIVE_FAILURES   3u
#define REASON_TAIL_LINES   4u
#define REASON_TAIL_BYTES   480u
#define MAX_ARGV            (32 + QR_LLAMA_PLAN_MAX_EXTRA)
#define BIND_FAILURE        "couldn't bind"

struct qr_llama_sup {
    struct event_base *base;     /* borrowed */
    struct qr_http_client *http; /* borrowed */
    struct event *sigchld;       /* owned */
    struct qr_llama_proc *procs; /* list of live procs (owned by their callers) */
};

struct qr_llama_proc {
    struct qr_llama_sup *sup;
    struct qr_llama_proc *next;

    /* configuration (owned copies) */
    char *name;
    char *engine;
    char **args; /* plan arguments after argv[0], before --host/--port */
    size_t n_args;
    struct qr_llama_restart rs;
    uint32_t load_timeout_ms, health_ms, grace_ms;
    bool health_fast; /* default interval: poll every FAST_HEALTH_MS at first */
    bool polling_fast;
    uint32_t live_ms, live_timeout_ms, live_failures_max;
    qr_llama_proc_state_fn on_state;
    void *arg;

    /* the current child */
    enum qr_llama_proc_state state;
    pid_t pid;  /* > 0 while a child exists and has not been reaped */
    pid_t pgid; /* the last child's process group, for the sweep after reaping */
    int out_fd; /* read end of the output pipe, -1 when closed */
    struct event *out_ev, *health_timer, *deadline_timer, *restart_timer;
    struct qr_http_call *health_call;
    int health_status;
    bool health_ok; /* /health answered 200: next, prove the key (and that it is our engine) */
    uint16_t port;
    char url[32];
    char key[33];
    char key_env[48];
    bool stop_requested, timed_out;
    bool hung;              /* killed because it stopped answering /health while ready */
    unsigned live_failures; /* consecutive failed liveness probes */
    unsigned bind_retries;
    int64_t spawned_ms;

    /* exit delivered by the SIGCHLD sweep, handled in dispatch */
    bool exit_pending;
    int exit_status; /* wait status; -1 when unknown (reaped elsewhere) */

    /* history */
    int64_t crash_at[MAX_CRASH_HISTORY];
    unsigned n_crash_at;
    struct qr_llama_proc_stats stats;
    struct qr_llama_proc_exit last_exit;
    char reason[1024];

    /* output ring */
    char *ring;
    size_t ring_cap, ring_len, ring_head; /* head: next write position */
    uint64_t log_at_spawn;                /* stats.log_bytes when the child was spawned */

    /* re-entrancy: callbacks may free this proc */
    unsigned in_cb;
    bool free_pending;
};

/* Flags the runtime sets itself (or that would end the engine at once); refused as extra flags,
 * also in the --flag=value form. */
/* clang-format off */
static const char *const managed_flags[] = {
    "-m", "--model", "-a", "--alias", "--host", "--port", "--api-key", "--api-key-file",
    "-c", "--ctx-size", "-np", "--parallel", "-t", "--threads", "-tb", "--threads-batch",
    "--embedding", "--embeddings", "--rerank", "--reranking", "-md", "--model-draft",
    "--spec-draft-model", "--spec-type", "--mmproj", "-h", "--help", "--version", "--reuse-port",
    "--log-file", "--jinja", "--no-jinja", "--reasoning-format",
};
/* clang-format on */

static const char *const spec_types[] = {
    "draft-simple", "draft-eagle3", "draft-mtp",     "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k",  "ngram-map-k4v", "ngram-mod",    "ngram-cache",
};

const char *qr_llama_proc_state_str(enum qr_llama_proc_state s)
{
    switch (s) {
    case QR_LLAMA_PROC_IDLE:
        return "idle";
    case QR_LLAMA_PROC_STARTING:
        return "starting";
    case QR_LLAMA_PROC_LOADING:
        return "loading";
    case QR_LLAMA_PROC_READY:
        return "ready";
    case QR_LLAMA_PROC_STOPPING:
        return "stopping";
    case QR_LLAMA_PROC_EXITED:
        return "exited";
    case QR_LLAMA_PROC_CRASHED:
        return "crashed";
    case QR_LLAMA_PROC_FAILED:
        return "failed";
    }
    return "unknown";
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timeval tv_ms(uint32_t ms)
{
    return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

static void really_free(struct qr_llama_proc *p);
static void on_health_tick(evutil_socket_t fd, short what, void *arg);

/* Report a transition. Returns false when the callback freed p (p is gone: return at once). */
static bool notify(struct qr_llama_proc *p, enum qr_llama_proc_state st, const char *reason)
{
    p->state = st;
    if (reason != p->reason)
        snprintf(p->reason, sizeof p->reason, "%s", reason);
    QR_LOG(st == QR_LLAMA_PROC_CRASHED || st == QR_LLAMA_PROC_FAILED ? QR_LOG_WARN : QR_LOG_INFO,
           "llama.cpp engine state", QR_LF_S("engine", p->name),
           QR_LF_S("state", qr_llama_proc_state_str(st)), QR_LF_N("pid", p->pid),
           QR_LF_N("port", p->port), QR_LF_S("reason", p->reason));
    if (!p->on_state)
        return true;
    p->in_cb++;
    p->on_state(p, st, p->reason, p->arg);
    p->in_cb--;
    if (p->free_pending && p->in_cb == 0) {
        really_free(p);
        return false;
    }
    return !p->free_pending;
}

/* ---- output ring ---- */

static void ring_put(struct qr_llama_proc *p, const char *data, size_t n)
{
    p->stats.log_bytes += n;
    if (n >= p->ring_cap) {
        data += n - p->ring_cap;
        n = p->ring_cap;
    }
    size_t first = p->ring_cap - p->ring_head;
    if (first > n)
        first = n;
    memcpy(p->ring + p->ring_head, data, first);
    memcpy(p->ring, data + first, n - first);
    p->ring_head = (p->ring_head + n) % p->ring_cap;
    p->ring_len = p->ring_len + n > p->ring_cap ? p->ring_cap : p->ring_len + n;
}

/* Byte i of the ring's logical content (0 = oldest kept). */
static char ring_at(const struct qr_llama_proc *p, size_t i)
{
    return p->ring[(p->ring_head + p->ring_cap - p->ring_len + i) % p->ring_cap];
}

/* Logical index of the first byte the current (or last) child wrote that the ring still holds. */
static size_t ring_spawn_start(const struct qr_llama_proc *p)
{
    uint64_t since = p->stats.log_bytes - p->log_at_spawn;
    return since < p->ring_len ? p->ring_len - (size_t) since : 0;
}

/* The tail of the ring's content from logical index first on; see qr_llama_proc_tail. */
static size_t tail_from(const struct qr_llama_proc *p, size_t first, unsigned max_lines, char *out,
                        size_t cap)
{
    if (cap == 0)
        return 0;
    size_t end = p->ring_len;
    while (end > first && ring_at(p, end - 1) == '\n')
        end--;
    size_t start = end;
    unsigned lines = 0;
    while (start > first && end - start < cap - 1) {
        if (ring_at(p, start - 1) == '\n' && max_lines && ++lines == max_lines)
            break;
        start--;
    }
    for (size_t i = start; i < end; i++)
        out[i - start] = ring_at(p, i);
    out[end - start] = '\0';
    return end - start;
}

size_t qr_llama_proc_tail(const struct qr_llama_proc *p, unsigned max_lines, char *out, size_t cap)
{
    return tail_from(p, 0, max_lines, out, cap);
}

/* True when needle occurs in the output captured since the current child was spawned. */
static bool ring_since_spawn_has(const struct qr_llama_proc *p, const char *needle)
{
    size_t nl = strlen(needle);
    for (size_t i = ring_spawn_start(p); i + nl <= p->ring_len; i++) {
        size_t k = 0;
        while (k < nl && ring_at(p, i + k) == needle[k])
            k++;
        if (k == nl)
            return true;
    }
    return false;
}

/* Read what the pipe has (at most max bytes). Returns false at EOF or on error. */
static bool read_output(struct qr_llama_proc *p, size_t max)
{
    char buf[READ_CHUNK];
    size_t got = 0;
    while (got < max) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n > 0) {
            ring_put(p, buf, (size_t) n);
            got += (size_t) n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 && errno == EAGAIN;
    }
    return true;
}

static void close_output(struct qr_llama_proc *p)
{
    if (p->out_ev) {
        event_free(p->out_ev);
        p->out_ev = NULL;
    }
    if (p->out_fd >= 0) {
        close(p->out_fd);
        p->out_fd = -1;
    }
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
    struct qr_llama_proc *p = arg;
    if (!read_output(p, (size_t) READ_CHUNK * READS_PER_EVENT))
        close_output(p);
}

/* ---- plan -> argv ---- */

static bool is_managed_flag(const char *a)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(managed_flags); i++) {
        size_t n = strlen(managed_flags[i]);
        if (strncmp(a, managed_flags[i], n) == 0 && (a[n] == '\0' || a[n] == '='))
            return true;
    }
    return false;
}

static bool known_spec_type(const char *t)
{
    for (size_t i = 0; i < QR_ARRAY_LEN(spec_types); i++)
        if (strcmp(t, spec_types[i]) == 0)
            return true;
    return false;
}

static enum qr_err check_str(const char *what, const char *s, bool required, struct qr_diag *diag)
{
    if (!s || !*s)
        return required ? qr_diag_set(diag, QR_ERR_INVALID, "engine plan has no %s", what) : QR_OK;
    size_t n = strnlen(s, QR_LLAMA_PLAN_MAX_ARG);
    if (n >= QR_LLAMA_PLAN_MAX_ARG)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "engine plan %s is longer than %d bytes", what,
                           QR_LLAMA_PLAN_MAX_ARG - 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
            return qr_diag_set(diag, QR_ERR_INVALID, "engine plan %s has a control character",
                               what);
    return QR_OK;
}

static enum qr_err validate_plan(const struct qr_llama_plan *pl, struct qr_diag *diag)
{
    enum qr_err err;
    if ((err = check_str("model path", pl->model_path, true, diag)) != QR_OK ||
        (err = check_str("alias", pl->alias, false, diag)) != QR_OK ||
        (err = check_str("draft model", pl->draft_model, false, diag)) != QR_OK ||
        (err = check_str("mmproj", pl->mmproj, false, diag)) != QR_OK ||
        (err = check_str("spec type", pl->spec_type, false, diag)) != QR_OK)
        return err;
    if (pl->ctx > (1u << 24) || pl->parallel > 1024 || pl->threads > 4096 ||
        pl->threads_batch > 4096)
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "engine plan number out of range (ctx %u, parallel %u, threads %u/%u)",
                           pl->ctx, pl->parallel, pl->threads, pl->threads_batch);
    if (pl->spec_type && *pl->spec_type && !known_spec_type(pl->spec_type))
        return qr_diag_set(diag, QR_ERR_INVALID, "engine plan spec type '%s' is not known",
                           pl->spec_type);
    if (pl->n_extra > QR_LLAMA_PLAN_MAX_EXTRA)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "engine plan has more than %d extra flags",
                           QR_LLAMA_PLAN_MAX_EXTRA);
    if (pl->n_extra && !pl->extra)
        return qr_diag_set(diag, QR_ERR_INVALID, "engine plan extra flags missing");
    for (size_t i = 0; i < pl->n_extra; i++) {
        if ((err = check_str("extra flag", pl->extra[i], true, diag)) != QR_OK)
            return err;
        if (is_managed_flag(pl->extra[i]))
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "engine plan extra flag '%s' is set by the runtime itself",
                               pl->extra[i]);
    }
    return QR_OK;
}

static void push(char **args, size_t *n, const char *s)
{
    char *c = strdup(s);
    if (!c)
        abort(); /* small internal allocation (STYLE.md) */
    args[(*n)++] = c;
}

static void push_u32(char **args, size_t *n, const char *flag, uint32_t v)
{
    char num[16];
    if (!v)
        return;
    snprintf(num, sizeof num, "%u", v);
    push(args, n, flag);
    push(args, n, num);
}

/* The plan's part of argv (owned strings). */
static char **build_args(const struct qr_llama_plan *pl, size_t *out_n)
{
    char **args = calloc(MAX_ARGV, sizeof *args);
    if (!args)
        abort();
    size_t n = 0;
    push(args, &n, "-m");
    push(args, &n, pl->model_path);
    if (pl->alias && *pl->alias) {
        push(args, &n, "-a");
        push(args, &n, pl->alias);
    }
    push_u32(args, &n, "-c", pl->ctx);
    push_u32(args, &n, "-np", pl->parallel);
    push_u32(args, &n, "-t", pl->threads);
    push_u32(args, &n, "-tb", pl->threads_batch);
    if (pl->embeddings)
        push(args, &n, "--embeddings");
    if (pl->rerank)
        push(args, &n, "--rerank");
    if (pl->draft_model && *pl->draft_model) {
        push(args, &n, "--spec-draft-model");
        push(args, &n, pl->draft_model);
    }
    /* a draft model alone does not speculate on this engine: draft-simple unless told */
    const char *spec = pl->spec_type && *pl->spec_type       ? pl->spec_type
                       : pl->draft_model && *pl->draft_model ? "draft-simple"
                                                             : NULL;
    if (spec) {
        push(args, &n, "--spec-type");
        push(args, &n, spec);
    }
    if (pl->mmproj && *pl->mmproj) {
        push(args, &n, "--mmproj");
        push(args, &n, pl->mmproj);
    }
    push(args, &n, "--no-webui");
    if (!pl->embeddings && !pl->rerank) {
        /* stated, not left to the build's defaults: templates through jinja (tools need it) and
         * reasoning split into reasoning_content; never "none", which leaks the generation
         * prompt's empty think block into content when thinking is off */
        push(args, &n, "--jinja");
        push(args, &n, "--reasoning-format");
        push(args, &n, "deepseek");
    }
    for (size_t i = 0; i < pl->n_extra; i++)
        push(args, &n, pl->extra[i]);
    *out_n = n;
    return args;
}

/* ---- ports and keys ---- */

/* A port the kernel considers free on 127.0.0.1 right now (the engine may still lose a race for
 * it: see the bind retry). */
static enum qr_err pick_port(uint16_t *out, struct qr_diag *diag)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot pick a port: socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *) &sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *) &sa, &len) != 0) {
        int e = errno;
        close(fd);
        return qr_diag_set(diag, QR_ERR_IO, "cannot pick a port on 127.0.0.1: %s", strerror(e));
    }
    close(fd);
    *out = ntohs(sa.sin_port);
    return QR_OK;
}

static enum qr_err new_key(char out[33], struct qr_diag *diag)
{
    unsigned char rnd[16];
    size_t got = 0;
    while (got < sizeof rnd) {
        ssize_t n = getrandom(rnd + got, sizeof rnd - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return qr_diag_set(diag, QR_ERR_IO, "cannot make an engine api key: getrandom: %s",
                               strerror(errno));
        got += (size_t) n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof rnd; i++) {
        out[2 * i] = hex[rnd[i] >> 4];
        out[2 * i + 1] = hex[rnd[i] & 15];
    }
    out[32] = '\0';
    return QR_OK;
}

/* ---- health ---- */

static void cancel_health(struct qr_llama_proc *p)
{
    if (p->health_call) {
        qr_http_call_cancel(p->health_call);
        p->health_call = NULL;
    }
    if (p->health_timer)
        evtimer_del(p->health_timer);
}

static bool on_health_response(struct qr_http_call *call, int status,
                               const struct qr_http_header *h, size_t n, void *arg)
{
    struct qr_llama_proc *p = arg;
    p->health_status = status;
    return true;
}

static bool on_health_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    return true; /* the body says nothing the status does not */
}

static void became_ready(struct qr_llama_proc *p)
{
    cancel_health(p);
    evtimer_del(p->deadline_timer);
    /* from now on the same timer probes liveness: a hung engine (alive, not answering) is
     * killed and goes the crash way */
    p->live_failures = 0;
    struct timeval lv = tv_ms(p->live_ms);
    evtimer_add(p->health_timer, &lv);
    p->bind_retries = 0;
    p->stats.ready_after_ms = mono_ms() - p->spawned_ms;
    char why[96];
    snprintf(why, sizeof why, "/health answered 200 and the key was accepted after %lld ms",
             (long long) p->stats.ready_after_ms);
    notify(p, QR_LLAMA_PROC_READY, why);
}

/* A liveness probe's outcome while READY. live_failures_max failures in a row: SIGKILL the
 * group; the reaped child is a crash ("hung") and restarts like any other. */
static void live_result(struct qr_llama_proc *p, bool ok, enum qr_err err, const struct qr_diag *d)
{
    if (ok) {
        p->live_failures = 0;
        return;
    }
    p->live_failures++;
    char status[32];
    snprintf(status, sizeof status, "answered %d", p->health_status);
    const char *what = err != QR_OK ? (d && d->msg[0] ? d->msg : qr_err_str(err)) : status;
    QR_LOG(QR_LOG_WARN, "llama.cpp engine failed a liveness probe", QR_LF_S("engine", p->name),
           QR_LF_N("failures", p->live_failures), QR_LF_S("error", what));
    if (p->live_failures < p->live_failures_max || p->pid <= 0 || p->hung)
        return;
    p->hung = true;
    evtimer_del(p->health_timer);
    qr_llama_spawn_kill(p->pid, SIGKILL);
}

static void on_health_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *d,
                           void *arg)
{
    struct qr_llama_proc *p = arg;
    p->health_call = NULL;
    if (p->state == QR_LLAMA_PROC_READY) {
        live_result(p, err == QR_OK && p->health_status == 200, err, d);
        return;
    }
    if (p->state != QR_LLAMA_PROC_STARTING && p->state != QR_LLAMA_PROC_LOADING)
        return;
    if (err != QR_OK)
        return; /* not listening yet: the next tick asks again */
    if (p->health_ok) {
        /* 200 with our key: our engine. 401: another process answers on the port our child is
         * about to fail to bind; its exit ("couldn't bind") respawns it on a new port. */
        if (p->health_status == 200)
            became_ready(p);
        return;
    }
    if (p->health_status == 200) {
        p->health_ok = true;
        on_health_tick(-1, 0, p); /* the key check at once */
    } else if (p->health_status == 503 && p->state == QR_LLAMA_PROC_STARTING) {
        notify(p, QR_LLAMA_PROC_LOADING, "/health answered 503: loading the model");
    }
}

static void on_health_tick(evutil_socket_t fd, short what, void *arg)
{
    struct qr_llama_proc *p = arg;
    if (p->pid <= 0 || p->hung)
        return;
    bool live = p->state == QR_LLAMA_PROC_READY;
    if (!live && p->polling_fast && mono_ms() - p->spawned_ms >= FAST_HEALTH_FOR_MS) {
        p->polling_fast = false; /* a slow load: back to the normal interval */
        struct timeval hv = tv_ms(p->health_ms);
        evtimer_add(p->health_timer, &hv);
    }
    if (p->health_call)
        return; /* the probe in flight reports through its own timeout */
    char url[64], auth[48];
    bool keyed = p->health_ok && !live;
    snprintf(url, sizeof url, "%s%s", p->url, keyed ? "/v1/models" : "/health");
    snprintf(auth, sizeof auth, "Bearer %s", p->key);
    struct qr_http_header h = {QR_SLICE_LIT("Authorization"), qr_slice_str(auth)};
    struct qr_http_call_opts o = {
        .method = "GET",
        .url = url,
        .headers = &h,
        .n_headers = keyed ? 1 : 0,
        .connect_timeout_ms = live ? p->live_timeout_ms : HEALTH_TIMEOUT_MS,
        .timeout_ms = live ? p->live_timeout_ms : HEALTH_TIMEOUT_MS,
        .on_response = on_health_response,
        .on_data = on_health_data,
        .on_done = on_health_done,
        .arg = p,
    };
    p->health_status = 0;
    struct qr_diag d;
    if (qr_http_call_start(p->sup->http, &o, &d, &p->health_call) != QR_OK)
        p->health_call = NULL; /* try again next tick */
}

/* ---- spawning ---- */

static enum qr_err spawn_child(struct qr_llama_proc *p, struct qr_diag *diag)
{
    enum qr_err err;
    if ((err = pick_port(&p->port, diag)) != QR_OK || (err = new_key(p->key, diag)) != QR_OK)
        return err;
    snprintf(p->url, sizeof p->url, "http://127.0.0.1:%u", (unsigned) p->port);
    /* the key travels in the environment (owner-readable /proc/pid/environ), not in argv (world
     * readable /proc/pid/cmdline); llama-server reads LLAMA_API_KEY like --api-key */
    snprintf(p->key_env, sizeof p->key_env, "LLAMA_API_KEY=%s", p->key);
    char port[8];
    snprintf(port, sizeof port, "%u", (unsigned) p->port);
    char *argv[MAX_ARGV + 8];
    size_t n = 0;
    argv[n++] = p->engine;
    for (size_t i = 0; i < p->n_args; i++)
        argv[n++] = p->args[i];
    argv[n++] = "--host";
    argv[n++] = "127.0.0.1";
    argv[n++] = "--port";
    argv[n++] = port;
    argv[n] = NULL;
    const char *env[] = {p->key_env, NULL};

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot start '%s': pipe: %s", p->engine,
                           strerror(errno));
    /* only our end is non-blocking: the engine's writes must not fail with EAGAIN */
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot start '%s': fcntl: %s", p->engine,
                          strerror(errno));
        goto fail;
    }
    struct event *ev = event_new(p->sup->base, fds[0], EV_READ | EV_PERSIST, on_output, p);
    if (!ev) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot start '%s': no event", p->engine);
        goto fail;
    }
    pid_t pid;
    err = qr_llama_spawn(p->engine, argv, fds[1], env, diag, &pid);
    if (err != QR_OK) {
        event_free(ev);
        goto fail;
    }
    close(fds[1]);
    p->pid = p->pgid = pid;
    p->out_fd = fds[0];
    p->out_ev = ev;
    event_add(ev, NULL);
    p->stop_requested = p->timed_out = p->health_ok = p->hung = false;
    p->live_failures = 0;
    p->exit_pending = false;
    p->log_at_spawn = p->stats.log_bytes;
    p->spawned_ms = mono_ms();
    p->stats.ready_after_ms = -1;
    p->stats.spawns++;
    p->polling_fast = p->health_fast;
    struct timeval hv = tv_ms(p->polling_fast ? FAST_HEALTH_MS : p->health_ms),
                   lv = tv_ms(p->load_timeout_ms);
    evtimer_add(p->health_timer, &hv);
    evtimer_add(p->deadline_timer, &lv);
    return QR_OK;
fail:
    close(fds[0]);
    close(fds[1]);
    return err;
}

/* Forget the current child's endpoint (the key is a secret: wipe it). */
static void clear_endpoint(struct qr_llama_proc *p)
{
    p->url[0] = '\0';
    memset(p->key, 0, sizeof p->key);
    memset(p->key_env, 0, sizeof p->key_env);
    p->port = 0;
}

/* ---- exits, crashes, restarts ---- */

static void describe_status(int status, char *out, size_t cap)
{
    if (status == -1)
        snprintf(out, cap, "ended (status unknown: reaped elsewhere)");
    else if (WIFSIGNALED(status))
        snprintf(out, cap, "killed by signal %d (SIG%s)%s", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
                 WCOREDUMP(status) ? ", core dumped" : "");
    else
        snprintf(out, cap, "exited with code %d", WEXITSTATUS(status));
}

/* The last log lines of the last child on one line: newlines become " | ", other control bytes
 * '?'. */
static void tail_one_line(const struct qr_llama_proc *p, char *out, size_t cap)
{
    char raw[REASON_TAIL_BYTES];
    size_t n = tail_from(p, ring_spawn_start(p), REASON_TAIL_LINES, raw, sizeof raw);
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap; i++) {
        unsigned char c = (unsigned char) raw[i];
        if (c == '\n') {
            memcpy(out + k, " | ", 3);
            k += 3;
        } else if (c == '\r') {
            continue;
        } else {
            out[k++] = (c < 0x20 || c == 0x7f) ? '?' : (char) c;
        }
    }
    out[k] = '\0';
}

static void schedule_restart(struct qr_llama_proc *p, unsigned in_window)
{
    uint64_t delay = p->rs.backoff_initial_ms;
    for (unsigned i = 1; i < in_window && delay < p->rs.backoff_max_ms; i++)
        delay *= 2;
    if (delay > p->rs.backoff_max_ms)
        delay = p->rs.backoff_max_ms;
    struct timeval tv = tv_ms((uint32_t) delay);
    evtimer_add(p->restart_timer, &tv);
}

/* Count the crash now in the window; returns the number of crashes within it. */
static unsigned record_crash(struct qr_llama_proc *p)
{
    int64_t now = mono_ms();
    unsigned k = 0;
    for (unsigned i = 0; i < p->n_crash_at; i++)
        if (now - p->crash_at[i] < (int64_t) p->rs.window_ms)
            p->crash_at[k++] = p->crash_at[i];
    if (k == MAX_CRASH_HISTORY) {
        memmove(p->crash_at, p->crash_at + 1, (k - 1) * sizeof p->crash_at[0]);
        k--;
    }
    p->crash_at[k++] = now;
    p->n_crash_at = k;
    p->stats.crashes++;
    return k;
}

/* The child is gone unasked (or could not be spawned: status_text says why). */
static void crashed(struct qr_llama_proc *p, const char *what)
{
    const char *phase = p->state == QR_LLAMA_PROC_READY     ? "while ready"
                        : p->state == QR_LLAMA_PROC_LOADING ? "while loading"
                                                            : "while starting";
    char tail[REASON_TAIL_BYTES + 128];
    tail_one_line(p, tail, sizeof tail);
    unsigned n = record_crash(p);
    if (p->rs.disabled || n >= p->rs.max_crashes) {
        snprintf(p->reason, sizeof p->reason,
                 "engine '%s' failed: crashed %u time%s within %u %s (restart %s); last: %s %s; "
                 "log: %s",
                 p->name, n, n == 1 ? "" : "s",
                 p->rs.window_ms % 1000 ? p->rs.window_ms : p->rs.window_ms / 1000,
                 p->rs.window_ms % 1000 ? "ms" : "s", p->rs.disabled ? "disabled" : "limit reached",
                 what, phase, tail[0] ? tail : "(none)");
        notify(p, QR_LLAMA_PROC_FAILED, p->reason);
        return;
    }
    snprintf(p->reason, sizeof p->reason, "engine '%s' %s %s; log: %s", p->name, what, phase,
             tail[0] ? tail : "(none)");
    schedule_restart(p, n);
    notify(p, QR_LLAMA_PROC_CRASHED, p->reason);
}

static void handle_exit(struct qr_llama_proc *p, int status)
{
    /* the child is reaped: its last words are in the pipe (unless a straggler holds it open) */
    if (p->out_fd >= 0)
        read_output(p, DRAIN_MAX);
    close_output(p);
    cancel_health(p);
    evtimer_del(p->deadline_timer);
    /* stragglers of the group (the engine never forks, but a wrapper might) */
    if (p->pgid > 0)
        kill(-p->pgid, SIGKILL);
    p->pgid = 0;
    p->last_exit = (struct qr_llama_proc_exit){
        .valid = true,
        .signaled = status != -1 && WIFSIGNALED(status),
        .code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1,
        .sig = status != -1 && WIFSIGNALED(status) ? WTERMSIG(status) : 0,
    };
    char what[160];
    describe_status(status, what, sizeof what);
    clear_endpoint(p);
    if (p->stop_requested) {
        char why[200];
        snprintf(why, sizeof why, "stopped: %s", what);
        notify(p, QR_LLAMA_PROC_EXITED, why);
        return;
    }
    if (p->state == QR_LLAMA_PROC_STARTING && ring_since_spawn_has(p, BIND_FAILURE) &&
        p->bind_retries < MAX_BIND_RETRIES) {
        p->bind_retries++;
        QR_LOG(QR_LOG_WARN, "llama.cpp engine lost its port, respawning",
               QR_LF_S("engine", p->name), QR_LF_N("retry", p->bind_retries));
        struct qr_diag d;
        if (spawn_child(p, &d) == QR_OK)
            return;
        crashed(p, d.msg);
        return;
    }
    if (p->timed_out) {
        char t[200];
        snprintf(t, sizeof t, "was not ready within %u ms (killed)", p->load_timeout_ms);
        crashed(p, t);
        return;
    }
    if (p->hung) {
        char t[200];
        snprintf(t, sizeof t, "did not answer /health %u times in a row (hung, killed)",
                 p->live_failures);
        p->stats.hangs++;
        crashed(p, t);
        return;
    }
    crashed(p, what);
}

static void on_restart(evutil_socket_t fd, short what, void *arg)
{
    struct qr_llama_proc *p = arg;
    if (p->state != QR_LLAMA_PROC_CRASHED)
        return;
    struct qr_diag d;
    enum qr_err err = spawn_child(p, &d);
    if (err != QR_OK) {
        crashed(p, d.msg);
        return;
    }
    p->stats.restarts++;
    char why[64];
    snprintf(why, sizeof why, "restart %u after a crash", p->stats.restarts);
    notify(p, QR_LLAMA_PROC_STARTING, why);
}

/* Load timeout (STARTING/LOADING) or stop grace (STOPPING): SIGKILL the group. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct qr_llama_proc *p = arg;
    if (p->pid <= 0)
        return;
    if (p->state != QR_LLAMA_PROC_STOPPING)
        p->timed_out = true;
    qr_llama_spawn_kill(p->pid, SIGKILL);
}

/* ---- the supervisor ---- */

static void dispatch_exits(struct qr_llama_sup *s)
{
    for (;;) {
        struct qr_llama_proc *p = s->procs;
        while (p && !p->exit_pending)
            p = p->next;
        if (!p)
            return;
        p->exit_pending = false;
        handle_exit(p, p->exit_status); /* may free p or other procs: rescan from the head */
    }
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    struct qr_llama_sup *s = arg;
    for (struct qr_llama_proc *p = s->procs; p; p = p->next) {
        if (p->pid <= 0)
            continue;
        int st = 0;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid || (r < 0 && errno == ECHILD)) {
            p->exit_status = r == p->pid ? st : -1;
            p->exit_pending = true;
            p->pid = -1;
        }
    }
    dispatch_exits(s);
}

enum qr_err qr_llama_sup_new(struct event_base *base, struct qr_http_client *http,
                             struct qr_diag *diag, struct qr_llama_sup **out)
{
    struct qr_llama_sup *s = calloc(1, sizeof *s);
    if (!s)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the engine supervisor");
    s->base = base;
    s->http = http;
    s->sigchld = evsignal_new(base, SIGCHLD, on_sigchld, s);
    if (!s->sigchld || evsignal_add(s->sigchld, NULL) != 0) {
        if (s->sigchld)
            event_free(s->sigchld);
        free(s);
        return qr_diag_set(diag, QR_ERR_IO, "cannot install the SIGCHLD handler");
    }
    *out = s;
    return QR_OK;
}

void qr_llama_sup_free(struct qr_llama_sup *s)
{
    if (!s)
        return;
    while (s->procs) {
        s->procs->in_cb = 0;
        really_free(s->procs);
    }
    event_free(s->sigchld);
    free(s);
}

/* ---- one proc ---- */

enum qr_err qr_llama_proc_new(struct qr_llama_sup *s, const struct qr_llama_proc_opts *o,
                              struct qr_diag *diag, struct qr_llama_proc **out)
{
    enum qr_err err;
    if ((err = check_str("engine path", o->engine_path, true, diag)) != QR_OK ||
        (err = check_str("name", o->name, false, diag)) != QR_OK ||
        (err = validate_plan(&o->plan, diag)) != QR_OK)
        return err;
    if (o->log_ring_bytes > MAX_RING_BYTES)
        return qr_diag_set(diag, QR_ERR_TOO_LARGE, "engine log ring over %u bytes", MAX_RING_BYTES);
    struct qr_llama_proc *p = calloc(1, sizeof *p);
    if (!p)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate an engine process");
    p->sup = s;
    p->pid = -1;
    p->out_fd = -1;
    p->name = strdup(o->name && *o->name ? o->name : o->plan.model_path);
    p->engine = strdup(o->engine_path);
    p->ring_cap = o->log_ring_bytes ? o->log_ring_bytes : DEF_RING_BYTES;
    p->ring = malloc(p->ring_cap);
    p->health_timer = event_new(s->base, -1, EV_PERSIST, on_health_tick, p);
    p->deadline_timer = evtimer_new(s->base, on_deadline, p);
    p->restart_timer = evtimer_new(s->base, on_restart, p);
    if (!p->name || !p->engine || !p->ring || !p->health_timer || !p->deadline_timer ||
        !p->restart_timer) {
        really_free(p);
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate an engine process");
    }
    p->args = build_args(&o->plan, &p->n_args);
    p->rs = o->restart;
    if (!p->rs.backoff_initial_ms)
        p->rs.backoff_initial_ms = DEF_BACKOFF_MS;
    if (!p->rs.backoff_max_ms)
        p->rs.backoff_max_ms = DEF_BACKOFF_MAX_MS;
    if (p->rs.backoff_max_ms < p->rs.backoff_initial_ms)
        p->rs.backoff_max_ms = p->rs.backoff_initial_ms;
    if (!p->rs.max_crashes)
        p->rs.max_crashes = DEF_MAX_CRASHES;
    if (p->rs.max_crashes > MAX_CRASH_HISTORY)
        p->rs.max_crashes = MAX_CRASH_HISTORY;
    if (!p->rs.window_ms)
        p->rs.window_ms = DEF_WINDOW_MS;
    p->load_timeout_ms = o->load_timeout_ms ? o->load_timeout_ms : DEF_LOAD_TIMEOUT_MS;
    p->health_ms = o->health_interval_ms ? o->health_interval_ms : DEF_HEALTH_MS;
    p->health_fast = !o->health_interval_ms;
    if (p->health_ms < MIN_HEALTH_MS)
        p->health_ms = MIN_HEALTH_MS;
    p->grace_ms = o->stop_grace_ms ? o->stop_grace_ms : DEF_STOP_GRACE_MS;
    p->live_ms = o->liveness_interval_ms ? o->liveness_interval_ms : DEF_LIVE_MS;
    if (p->live_ms < MIN_HEALTH_MS)
        p->live_ms = MIN_HEALTH_MS;
    p->live_timeout_ms = o->liveness_timeout_ms ? o->liveness_timeout_ms : DEF_LIVE_TIMEOUT_MS;
    p->live_failures_max = o->liveness_failures ? o->liveness_failures : DEF_LIVE_FAILURES;
    p->on_state = o->on_state;
    p->arg = o->arg;
    p->stats.ready_after_ms = -1;
    snprintf(p->reason, sizeof p->reason, "not started");
    p->next = s->procs;
    s->procs = p;
    *out = p;
    return QR_OK;
}

enum qr_err qr_llama_proc_start(struct qr_llama_proc *p, struct qr_diag *diag)
{
    switch (p->state) {
    case QR_LLAMA_PROC_STARTING:
    case QR_LLAMA_PROC_LOADING:
    case QR_LLAMA_PROC_READY:
    case QR_LLAMA_PROC_STOPPING:
        return qr_diag_set(diag, QR_ERR_BUSY, "engine '%s' is already %s", p->name,
                           qr_llama_proc_state_str(p->state));
    default:
        break;
    }
    if (p->pid > 0 || p->exit_pending)
        return qr_diag_set(diag, QR_ERR_BUSY, "engine '%s' has a child not yet reaped", p->name);
    enum qr_err err = spawn_child(p, diag);
    if (err != QR_OK)
        return err;
    evtimer_del(p->restart_timer);
    p->n_crash_at = 0;
    p->bind_retries = 0;
    char why[64];
    snprintf(why, sizeof why, "spawned pid %d", (int) p->pid);
    notify(p, QR_LLAMA_PROC_STARTING, why);
    return QR_OK;
}

void qr_llama_proc_stop(struct qr_llama_proc *p)
{
    switch (p->state) {
    case QR_LLAMA_PROC_IDLE:
    case QR_LLAMA_PROC_EXITED:
    case QR_LLAMA_PROC_STOPPING:
        return;
    case QR_LLAMA_PROC_CRASHED:
    case QR_LLAMA_PROC_FAILED:
        evtimer_del(p->restart_timer);
        notify(p, QR_LLAMA_PROC_EXITED, "stopped");
        return;
    default:
        break;
    }
    cancel_health(p);
    evtimer_del(p->deadline_timer);
    p->stop_requested = true;
    if (p->pid > 0) {
        qr_llama_spawn_kill(p->pid, SIGTERM);
        struct timeval tv = tv_ms(p->grace_ms);
        evtimer_add(p->deadline_timer, &tv);
    }
    char why[64];
    snprintf(why, sizeof why, "SIGTERM sent, SIGKILL after %u ms", p->grace_ms);
    notify(p, QR_LLAMA_PROC_STOPPING, why);
}

static void really_free(struct qr_llama_proc *p)
{
    struct qr_llama_sup *s = p->sup;
    for (struct qr_llama_proc **pp = &s->procs; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    if (p->pid > 0) {
        qr_llama_spawn_kill(p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    if (p->health_call)
        qr_http_call_cancel(p->health_call);
    close_output(p);
    if (p->health_timer)
        event_free(p->health_timer);
    if (p->deadline_timer)
        event_free(p->deadline_timer);
    if (p->restart_timer)
        event_free(p->restart_timer);
    for (size_t i = 0; i < p->n_args; i++)
        free(p->args[i]);
    free(p->args);
    clear_endpoint(p);
    free(p->ring);
    free(p->engine);
    free(p->name);
    free(p);
}

void qr_llama_proc_free(struct qr_llama_proc *p)
{
    if (!p)
        return;
    if (p->in_cb) {
        p->free_pending = true;
        return;
    }
    really_free(p);
}

/* ---- accessors ---- */

enum qr_llama_proc_state qr_llama_proc_state(const struct qr_llama_proc *p)
{
    return p->state;
}

const char *qr_llama_proc_name(const struct qr_llama_proc *p)
{
    return p->name;
}

const char *qr_llama_proc_base_url(const struct qr_llama_proc *p)
{
    return p->url;
}

const char *qr_llama_proc_api_key(const struct qr_llama_proc *p)
{
    return p->key;
}

pid_t qr_llama_proc_pid(const struct qr_llama_proc *p)
{
    return p->pid > 0 ? p->pid : -1;
}

const char *const *qr_llama_proc_args(const struct qr_llama_proc *p, size_t *n)
{
    *n = p->n_args;
    return (const char *const *) p->args;
}

const char *qr_llama_proc_reason(const struct qr_llama_proc *p)
{
    return p->reason;
}

void qr_llama_proc_last_exit(const struct qr_llama_proc *p, struct qr_llama_proc_exit *out)
{
    *out = p->last_exit;
}

void qr_llama_proc_stats(const struct qr_llama_proc *p, struct qr_llama_proc_stats *out)
{
    *out = p->stats;
}
