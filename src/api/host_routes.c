/* GET /v1/host: the host profile and limits (host/profile.h), discovered on every call, with the
 * newest stored calibration for this host and engine (`calibrated`, `last_calibration`).
 *
 * POST /v1/host/calibrate: one calibration (host/calibrate.h) without blocking the event loop. It
 * runs as a child process, this binary's `calibrate --json` with the daemon's state_dir and engine
 * (so the child stores the run in the same evidence store), whose output the loop reads through a
 * pipe; the answer goes out when the child exits. One at a time per daemon: a second request while
 * one runs is 409 calibration_running. The child is bounded by its budget plus a grace period, and
 * stopped (SIGTERM, then SIGKILL) when the client goes away or the bound passes; the engine it
 * started dies with it (the spawn recipe's parent-death signal). docs/CALIBRATION.md. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <yyjson.h>

#include "api/api.h"
#include "backend/llamacpp/spawn.h"
#include "core/http_server.h"
#include "host/calibrate.h"
#include "host/profile.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

#define CAL_BODY_MAX      (64u << 10)
#define CAL_OUT_MAX       (4u << 20)
#define CAL_GRACE_MS      30000u /* beyond the budget: engine start-up, store, answer */
#define CAL_KILL_GRACE_MS 5000u  /* SIGTERM -> SIGKILL */
#define CAL_REAP_STEP_MS  20u
#define CAL_DEFAULT_MS    60000u /* the endpoint's default budget */

/* The engine version, probed once per daemon (a fork, so not on every GET). */
static char g_engine_version[64];

static void identity(const struct qr_app *app, struct qr_calib_identity *id)
{
    if (!g_engine_version[0]) {
        qr_calib_identity(NULL, app->cfg->llama_server, NULL, NULL, id);
        snprintf(g_engine_version, sizeof g_engine_version, "%s", id->engine_version);
        return;
    }
    qr_calib_identity(NULL, NULL, NULL, g_engine_version, id);
}

void qr_api_host(struct qr_app *app, struct qr_http_req *req)
{
    yyjson_mut_doc *doc = qr_host_document(NULL, QR_ROUTE_API_VERSION);
    struct qr_calib_identity *id = malloc(sizeof *id);
    if (!doc || !id) {
        yyjson_mut_doc_free(doc);
        free(id);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    identity(app, id);
    qr_calib_document_last(doc, app->cfg->state_dir, id);
    free(id);
    /* the configured hardware class (null when unset): conformance reports are keyed by it */
    yyjson_mut_val *lim = yyjson_mut_obj_get(yyjson_mut_doc_get_root(doc), "limits");
    const char *hw = app->cfg->hardware_class;
    if (lim && !(hw && hw[0] ? yyjson_mut_obj_add_strcpy(doc, lim, "hardware_class", hw)
                             : yyjson_mut_obj_add_null(doc, lim, "hardware_class"))) {
        yyjson_mut_doc_free(doc);
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    qr_api_send_json(req, 200, doc);
    yyjson_mut_doc_free(doc);
}

/* ---- POST /v1/host/calibrate ---- */

struct calib_job {
    struct qr_app *app;
    struct qr_http_req *req; /* NULL once the client went away */
    pid_t pid;               /* -1 once reaped */
    int fd;                  /* read end of the child's output; -1 when closed */
    struct event *ev_read, *ev_timer;
    char *out;
    size_t len;
    bool eof, timed_out, term_sent;
    int64_t kill_at_ms; /* SIGKILL after this (monotonic) once SIGTERM was sent */
    int status;         /* waitpid status once reaped */
};

static struct calib_job *g_job; /* the one running calibration, or NULL */

static void job_free(struct calib_job *j)
{
    if (j->ev_read)
        event_free(j->ev_read);
    if (j->ev_timer)
        event_free(j->ev_timer);
    if (j->fd >= 0)
        close(j->fd);
    free(j->out);
    if (g_job == j)
        g_job = NULL;
    free(j);
}

static void arm_timer(struct calib_job *j, uint32_t ms)
{
    struct timeval tv = {(time_t) (ms / 1000u), (suseconds_t) (ms % 1000u) * 1000};
    evtimer_add(j->ev_timer, &tv);
}

static void stop_child(struct calib_job *j)
{
    if (j->pid > 0 && !j->term_sent) {
        kill(j->pid, SIGTERM); /* the CLI stops its engine and exits */
        j->term_sent = true;
        j->kill_at_ms = qr_calib_now_ms() + CAL_KILL_GRACE_MS;
    }
}

/* The pretty JSON document in the child's output: from the first line that is exactly "{" (log
 * records are one-line objects). */
static yyjson_mut_doc *parse_output(const char *out, size_t len)
{
    const char *p = out;
    if (!(len >= 2 && out[0] == '{' && out[1] == '\n')) {
        p = memmem(out, len, "\n{\n", 3);
        p = p ? p + 1 : NULL;
    }
    if (!p)
        return NULL;
    yyjson_doc *d = yyjson_read(p, len - (size_t) (p - out), 0);
    yyjson_mut_doc *m = d ? yyjson_doc_mut_copy(d, NULL) : NULL;
    yyjson_doc_free(d);
    return m;
}

/* The child's last output line, for an error message (out may be NULL). */
static void last_line(const char *out, size_t len, char *msg, size_t cap)
{
    while (len && (out[len - 1] == '\n' || out[len - 1] == '\r'))
        len--;
    size_t start = len;
    while (start && out[start - 1] != '\n')
        start--;
    snprintf(msg, cap, "%.*s", (int) (len - start > 300 ? 300 : len - start), out + start);
}

/* The child is reaped: answer (when the client is still there) and free the job. */
static void finish(struct calib_job *j)
{
    struct qr_http_req *req = j->req;
    if (req) {
        qr_http_req_set_close_cb(req, NULL, NULL);
        char msg[400];
        last_line(j->out ? j->out : "", j->len, msg, sizeof msg);
        yyjson_mut_doc *doc = NULL;
        if (j->timed_out) {
            qr_api_send_error(req, 504, "calibration_timeout",
                              "calibration did not finish within its budget");
        } else if (WIFEXITED(j->status) && WEXITSTATUS(j->status) == 0 &&
                   (doc = parse_output(j->out, j->len)) != NULL) {
            qr_api_send_json(req, 200, doc);
        } else {
            char full[512];
            if (WIFSIGNALED(j->status)) /* e.g. the OOM killer: its last line is no reason */
                snprintf(full, sizeof full,
                         "calibration failed: the calibration process was killed by signal %d "
                         "(%s)%s%.300s",
                         WTERMSIG(j->status), strsignal(WTERMSIG(j->status)),
                         msg[0] ? "; its last output: " : "", msg);
            else
                snprintf(full, sizeof full, "calibration failed: %s",
                         msg[0] ? msg : "no output from the calibration process");
            qr_api_send_error(req, 500, "calibration_failed", full);
        }
        yyjson_mut_doc_free(doc);
    }
    job_free(j);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    struct calib_job *j = arg;
    if (j->pid > 0) {
        int st;
        pid_t r = waitpid(j->pid, &st, WNOHANG);
        if (r == j->pid || (r < 0 && errno == ECHILD)) {
            j->status = r == j->pid ? st : 0;
            /* a child killed while writing the default model (OOM killer, file-size limit)
             * leaves its temporary file (host/calib_model.c): up to 256 MiB, on a disk that may
             * be full */
            char tmp[PATH_MAX];
            if (r == j->pid && WIFSIGNALED(st) && j->app->cfg->state_dir &&
                snprintf(tmp, sizeof tmp, "%s/calibration.gguf.tmp-%d", j->app->cfg->state_dir,
                         (int) r) < (int) sizeof tmp)
                unlink(tmp);
            j->pid = -1;
        }
    }
    if (j->pid < 0 && (j->eof || j->term_sent)) {
        finish(j);
        return;
    }
    if (!j->term_sent && !j->eof) {
        /* the budget timer fired with the child still running */
        j->timed_out = true;
        stop_child(j);
    } else if (j->term_sent && qr_calib_now_ms() >= j->kill_at_ms && j->pid > 0) {
        kill(j->pid, SIGKILL);
    }
    arm_timer(j, CAL_REAP_STEP_MS);
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
    (void) what;
    struct calib_job *j = arg;
    char buf[8192];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n > 0) {
            if (j->len + (size_t) n > CAL_OUT_MAX)
                continue; /* drained, not kept: the document is refused as incomplete */
            char *p = realloc(j->out, j->len + (size_t) n + 1);
            if (!p)
                continue;
            j->out = p;
            memcpy(j->out + j->len, buf, (size_t) n);
            j->len += (size_t) n;
            j->out[j->len] = '\0';
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        break; /* EOF or error: the child is exiting */
    }
    j->eof = true;
    event_del(j->ev_read);
    close(j->fd);
    j->fd = -1;
    arm_timer(j, 0); /* reap on the timer, never a blocking wait on the loop */
}

static void on_close(struct qr_http_req *req, void *arg)
{
    (void) req;
    struct calib_job *j = arg;
    j->req = NULL;
    stop_child(j);
    arm_timer(j, CAL_REAP_STEP_MS);
}

/* The optional body {"model": FILE, "budget_ms": N}; model must be a regular file under
 * models_dir or <state_dir>/calibration.gguf (the API never hands the engine arbitrary paths). */
static bool parse_body(struct qr_app *app, struct qr_http_req *req, char *model, size_t cap,
                       uint32_t *budget)
{
    struct qr_slice b = qr_http_req_body(req);
    model[0] = '\0';
    *budget = CAL_DEFAULT_MS;
    if (!b.len)
        return true;
    yyjson_doc *d = yyjson_read(b.ptr, b.len, 0);
    yyjson_val *root = yyjson_doc_get_root(d);
    const char *err = !yyjson_is_obj(root) ? "body must be a JSON object" : NULL;
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        if (err)
            break;
        if (yyjson_equals_str(k, "model") && yyjson_is_str(v)) {
            snprintf(model, cap, "%s", yyjson_get_str(v));
        } else if (yyjson_equals_str(k, "budget_ms") && yyjson_is_uint(v) &&
                   yyjson_get_uint(v) >= QR_CALIB_MIN_BUDGET_MS &&
                   yyjson_get_uint(v) <= QR_CALIB_MAX_BUDGET_MS) {
            *budget = (uint32_t) yyjson_get_uint(v);
        } else {
            err = "fields: model (string), budget_ms (2000..900000)";
        }
    }
    yyjson_doc_free(d);
    char real[PATH_MAX], dir[PATH_MAX], state[PATH_MAX + 32];
    struct stat st;
    if (!err && model[0]) {
        snprintf(state, sizeof state, "%s/calibration.gguf", app->cfg->state_dir);
        bool under = realpath(model, real) && realpath(app->cfg->models_dir, dir) &&
                     !strncmp(real, dir, strlen(dir)) && real[strlen(dir)] == '/';
        char sreal[PATH_MAX];
        bool is_default = realpath(model, real) && realpath(state, sreal) && !strcmp(real, sreal);
        if (!(under || is_default) || stat(real, &st) != 0 || !S_ISREG(st.st_mode))
            err = "model must be a GGUF file under models_dir";
        else
            snprintf(model, cap, "%s", real);
    }
    if (err) {
        qr_api_send_error(req, 400, "invalid_calibration_request", err);
        return false;
    }
    return true;
}

static bool spawn_child(struct calib_job *j, const char *model, uint32_t budget, char *why,
                        size_t cap)
{
    const struct qr_config *cfg = j->app->cfg;
    char exe[PATH_MAX], budget_s[16];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(why, cap, "cannot find this executable: %s", strerror(errno));
        return false;
    }
    exe[n] = '\0';
    snprintf(budget_s, sizeof budget_s, "%u", budget);
    char *argv[16];
    size_t k = 0;
    argv[k++] = exe;
    argv[k++] = "calibrate";
    argv[k++] = "--json";
    argv[k++] = "--no-progress";
    argv[k++] = "--log-level";
    argv[k++] = "error";
    argv[k++] = "--budget-ms";
    argv[k++] = budget_s;
    argv[k++] = "--state-dir";
    argv[k++] = cfg->state_dir;
    if (cfg->llama_server[0]) {
        argv[k++] = "--llama-server";
        argv[k++] = cfg->llama_server;
    }
    if (model[0]) {
        argv[k++] = "--model";
        argv[k++] = (char *) model;
    }
    argv[k] = NULL;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        snprintf(why, cap, "pipe: %s", strerror(errno));
        return false;
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    struct qr_diag d = {{0}};
    enum qr_err err = qr_llama_spawn(exe, argv, fds[1], NULL, &d, &j->pid);
    close(fds[1]);
    j->fd = fds[0];
    if (err) {
        snprintf(why, cap, "%s", d.msg);
        return false;
    }
    return true;
}

static void on_body(struct qr_http_req *req, enum qr_err err, void *arg)
{
    struct qr_app *app = arg;
    if (err) {
        qr_api_send_err(req, err, "cannot read the request body");
        return;
    }
    if (g_job) { /* another request won the race while this body was read */
        qr_api_send_error(req, 409, "calibration_running", "a calibration is already running");
        return;
    }
    char model[PATH_MAX];
    uint32_t budget;
    if (!parse_body(app, req, model, sizeof model, &budget))
        return;
    struct calib_job *j = calloc(1, sizeof *j);
    if (!j) {
        qr_api_send_err(req, QR_ERR_NOMEM, "out of memory");
        return;
    }
    j->app = app;
    j->req = req;
    j->pid = -1;
    j->fd = -1;
    char why[512] = "";
    j->ev_timer = evtimer_new(app->base, on_tick, j);
    if (!j->ev_timer || !spawn_child(j, model, budget, why, sizeof why) ||
        !(j->ev_read = event_new(app->base, j->fd, EV_READ | EV_PERSIST, on_output, j)) ||
        event_add(j->ev_read, NULL) != 0) {
        if (j->pid > 0) {
            kill(j->pid, SIGKILL);
            waitpid(j->pid, NULL, 0);
        }
        job_free(j);
        char msg[600];
        snprintf(msg, sizeof msg, "cannot start the calibration: %s", why[0] ? why : "no event");
        qr_api_send_error(req, 500, "calibration_failed", msg);
        return;
    }
    g_job = j;
    qr_http_req_set_close_cb(req, on_close, j);
    arm_timer(j, budget + CAL_GRACE_MS);
}

void qr_api_host_calibrate(struct qr_app *app, struct qr_http_req *req)
{
    if (g_job) {
        qr_api_send_error(req, 409, "calibration_running", "a calibration is already running");
        return;
    }
    qr_http_req_read_body(req, CAL_BODY_MAX, on_body, app);
}
