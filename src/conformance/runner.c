/* The conformance runner's process side (runner.h): a daemon started for one run and stopped
 * after it, the suite run into a finished report, and the two measurements ledger evaluation takes
 * from a running daemon (engine build names, decode tokens/s). A started daemon runs in its own
 * process group with PR_SET_PDEATHSIG, so neither a terminal's SIGINT nor this process dying
 * leaves it half-stopped: the runner's own handler forwards SIGTERM, and stop escalates to
 * SIGKILL of the whole group (the daemon's engines included) after a bound. */
#include "conformance/runner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

#include "conformance/cases.h"
#include "core/fsutil.h"

/* ---- the started daemons, for the signal handler ---- */

static volatile pid_t g_pids[QR_CONF_MAX_DAEMONS];
static volatile sig_atomic_t *g_flag;

static void on_interrupt(int sig)
{
    (void) sig;
    if (g_flag)
        *g_flag = 1;
    for (size_t i = 0; i < QR_CONF_MAX_DAEMONS; i++)
        if (g_pids[i] > 0)
            kill(g_pids[i], SIGTERM);
}

void qr_conf_interrupt_install(volatile sig_atomic_t *flag)
{
    g_flag = flag;
    struct sigaction sa = {.sa_handler = on_interrupt};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void track(pid_t pid, bool add)
{
    for (size_t i = 0; i < QR_CONF_MAX_DAEMONS; i++) {
        if (add && g_pids[i] == 0) {
            g_pids[i] = pid;
            return;
        }
        if (!add && g_pids[i] == pid)
            g_pids[i] = 0;
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long) (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- starting and stopping ---- */

/* A port the kernel considers free on 127.0.0.1 now (the daemon may still lose a race for it). */
static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    uint16_t port = 0;
    if (bind(fd, (struct sockaddr *) &a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *) &a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The last non-empty line of the log (at most cap-1 bytes of it). */
static void log_tail(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[2048];
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t) sizeof buf - 1 ? end - (off_t) sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    const char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    size_t len = strlen(line) < cap ? strlen(line) : cap - 1;
    memcpy(out, line, len);
    out[len] = '\0';
}

static pid_t spawn(const char *exe, const char *const *args, size_t n_args, const char *listen,
                   const char *log_path, struct qr_diag *diag)
{
    size_t argc = n_args + 4;
    char **argv = calloc(argc + 1, sizeof *argv);
    if (!argv)
        abort();
    size_t k = 0;
    argv[k++] = (char *) exe;
    argv[k++] = "serve";
    for (size_t i = 0; i < n_args; i++)
        argv[k++] = (char *) args[i];
    argv[k++] = "--listen";
    argv[k++] = (char *) listen;
    argv[k] = NULL;
    qr_mkdir_p(log_path, true);
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(argv);
        qr_diag_set(diag, QR_ERR_IO, "cannot write the daemon log '%s': %s", log_path,
                    strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0)
            dup2(in, STDIN_FILENO);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execv(exe, argv);
        dprintf(STDERR_FILENO, "cannot run '%s': %s\n", exe, strerror(errno));
        _exit(127);
    }
    close(fd);
    free(argv);
    if (pid < 0) {
        qr_diag_set(diag, QR_ERR_IO, "cannot start a daemon: %s", strerror(errno));
        return -1;
    }
    setpgid(pid, pid); /* also from here: no window where the group is the caller's */
    track(pid, true);
    return pid;
}

/* 1 ready, 0 exited (status in *st), -1 timed out. */
static int wait_ready(struct qr_conf_daemon *d, unsigned ready_ms, int *st, char *last, size_t cap)
{
    struct qr_conf_ctx c = {.url = d->url, .timeout_ms = 2000};
    double deadline = now_ms() + ready_ms;
    while (now_ms() < deadline) {
        if (waitpid(d->pid, st, WNOHANG) == d->pid)
            return 0;
        struct qr_conf_resp r;
        qr_conf_http(&c, "GET", "/readyz", NULL, &r);
        if (r.status == 200) {
            qr_conf_resp_cleanup(&r);
            return 1;
        }
        if (r.status)
            snprintf(last, cap, "GET /readyz answered %ld: %.160s", r.status, r.body);
        qr_conf_resp_cleanup(&r);
        sleep_ms(100);
    }
    return -1;
}

enum qr_err qr_conf_daemon_start(const char *exe, const char *const *args, size_t n_args,
                                 const char *log_path, unsigned ready_ms,
                                 struct qr_conf_daemon *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    snprintf(out->log_path, sizeof out->log_path, "%s", log_path);
    for (int attempt = 0; attempt < 3; attempt++) {
        uint16_t port = free_port();
        if (!port)
            return qr_diag_set(diag, QR_ERR_IO, "no free port on 127.0.0.1");
        char listen[32];
        snprintf(listen, sizeof listen, "127.0.0.1:%u", (unsigned) port);
        pid_t pid = spawn(exe, args, n_args, listen, log_path, diag);
        if (pid < 0)
            return QR_ERR_IO;
        out->pid = pid;
        out->port = port;
        snprintf(out->url, sizeof out->url, "http://%s", listen);
        int st = 0;
        char last[256] = "", tail[320];
        int ready = wait_ready(out, ready_ms, &st, last, sizeof last);
        if (ready == 1)
            return QR_OK;
        if (ready < 0) {
            qr_conf_daemon_stop(out, QR_CONF_STOP_TIMEOUT_MS);
            log_tail(log_path, tail, sizeof tail);
            return qr_diag_set(diag, QR_ERR_TIMEOUT,
                               "the daemon was not ready within %u ms (%s); its log '%s' ends: %s",
                               ready_ms, last[0] ? last : "no answer", log_path, tail);
        }
        track(pid, false);
        out->pid = 0;
        log_tail(log_path, tail, sizeof tail);
        bool taken =
            strstr(tail, "in use") || strstr(tail, "cannot listen") || strstr(tail, "bind");
        if (!taken || attempt == 2)
            return qr_diag_set(diag, QR_ERR_UPSTREAM,
                               "the daemon exited (%s %d) before it was ready; its log '%s' ends: "
                               "%s",
                               WIFSIGNALED(st) ? "signal" : "status",
                               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), log_path, tail);
    }
    return QR_ERR_UPSTREAM;
}

void qr_conf_daemon_stop(struct qr_conf_daemon *d, unsigned timeout_ms)
{
    if (d->pid <= 0)
        return;
    kill(d->pid, SIGTERM);
    double deadline = now_ms() + timeout_ms;
    int st;
    bool gone = false;
    while (!gone && now_ms() < deadline) {
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        gone = r == d->pid || (r < 0 && errno == ECHILD);
        if (!gone)
            sleep_ms(20);
    }
    if (!gone) {
        kill(-d->pid, SIGKILL); /* the group: the daemon and any engine it left */
        kill(d->pid, SIGKILL);
        waitpid(d->pid, &st, 0);
    }
    track(d->pid, false);
    d->pid = 0;
}

/* ---- one suite run ---- */

/* Cut s back to whole UTF-8 characters when its end is a truncated sequence (a reason formatted
 * with %.80s can end inside one), so the report stays valid JSON text. */
static void trim_utf8(char *s)
{
    size_t n = strlen(s);
    if (qr_conf_utf8_valid(s, n))
        return;
    size_t back = 0;
    while (back < 4 && back < n && ((unsigned char) s[n - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back < n && ((unsigned char) s[n - 1 - back] & 0xC0) == 0xC0)
        s[n - 1 - back] = '\0';
    if (!qr_conf_utf8_valid(s, strlen(s))) /* invalid elsewhere: replace every high byte */
        for (char *p = s; *p; p++)
            if ((unsigned char) *p >= 0x80)
                *p = '?';
}

enum qr_err qr_conf_outcome_run(const char *url, const char *model, bool progress, bool destructive,
                                const char *skip, struct qr_conf_outcome *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    char started[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    double t0 = now_ms();
    struct qr_conf_ctx c = {.url = url,
                            .model = model,
                            .context_length = -1,
                            .timeout_ms = 120000,
                            .destructive = destructive,
                            .skip = skip};
    char err[256];
    enum qr_err e = qr_conf_probe(&c, err, sizeof err);
    if (e != QR_OK) {
        qr_conf_ctx_cleanup(&c);
        return qr_diag_set(diag, e, "%s", err);
    }
    struct qr_conf_engine eng;
    struct qr_diag d2 = {{0}};
    if (qr_conf_engine_get(url, c.backend, &eng, &d2) == QR_OK && eng.n_names) {
        free(c.engine_version);
        c.engine_version = strdup(eng.names[eng.n_names - 1]);
        if (!c.engine_version)
            abort();
    }
    out->n = qr_conf_n_cases();
    out->results = calloc(out->n, sizeof *out->results);
    if (!out->results)
        abort();
    qr_conf_run(&c, out->results, progress);
    for (size_t i = 0; i < out->n; i++) {
        trim_utf8(out->results[i].reason);
        out->n_pass += out->results[i].status == QR_CONF_PASS;
        out->n_fail += out->results[i].status == QR_CONF_FAIL;
        out->n_skip += out->results[i].status == QR_CONF_SKIP;
    }
    double ms = now_ms() - t0;
    out->json = qr_conf_report_json(&c, out->results, out->n, started, ms);
    out->markdown = qr_conf_report_markdown(&c, out->results, out->n, started, ms);
    qr_conf_ctx_cleanup(&c);
    if (!out->json || !out->markdown) {
        qr_conf_outcome_cleanup(out);
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot format the report");
    }
    return QR_OK;
}

void qr_conf_outcome_cleanup(struct qr_conf_outcome *o)
{
    free(o->json);
    free(o->markdown);
    free(o->results);
    memset(o, 0, sizeof *o);
}

/* ---- what a running daemon says ---- */

static yyjson_doc *get_doc(const char *url, const char *path, struct qr_diag *diag)
{
    struct qr_conf_ctx c = {.url = url, .timeout_ms = 20000};
    struct qr_conf_resp r;
    qr_conf_http(&c, "GET", path, NULL, &r);
    yyjson_doc *d = r.status == 200 ? yyjson_read(r.body, r.len, 0) : NULL;
    if (!d && r.status == 0)
        qr_diag_set(diag, QR_ERR_UPSTREAM, "%s", r.error);
    else if (!d)
        qr_diag_set(diag, QR_ERR_UPSTREAM, "GET %s answered %ld%s", path, r.status,
                    r.status == 200 ? " without JSON" : "");
    qr_conf_resp_cleanup(&r);
    return d;
}

static void copy_str(char *dst, size_t cap, yyjson_val *v)
{
    const char *s = yyjson_get_str(v);
    snprintf(dst, cap, "%s", s && strlen(s) < cap ? s : "");
}

enum qr_err qr_conf_engine_get(const char *url, const char *backend, struct qr_conf_engine *out,
                               struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    yyjson_doc *d = get_doc(url, "/v1/backends", diag);
    if (!d)
        return QR_ERR_UPSTREAM;
    yyjson_val *arr = yyjson_obj_get(yyjson_doc_get_root(d), "backends");
    yyjson_val *pick = NULL, *b;
    size_t i, max;
    yyjson_arr_foreach(arr, i, max, b)
    {
        bool mine = backend && backend[0]
                        ? yyjson_equals_str(yyjson_obj_get(b, "id"), backend) ||
                              yyjson_equals_str(yyjson_obj_get(b, "kind"), backend)
                        : yyjson_is_true(yyjson_obj_get(b, "default")) || !pick;
        if (mine && (!pick || !(backend && backend[0])))
            pick = b;
        if (mine && backend && backend[0])
            break;
    }
    if (!pick) {
        yyjson_doc_free(d);
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "the daemon at %s has no backend '%s'", url,
                           backend ? backend : "");
    }
    copy_str(out->id, sizeof out->id, yyjson_obj_get(pick, "id"));
    copy_str(out->kind, sizeof out->kind, yyjson_obj_get(pick, "kind"));
    yyjson_val *e = yyjson_obj_get(pick, "engine");
    copy_str(out->version, sizeof out->version, yyjson_obj_get(e, "version"));
    copy_str(out->path, sizeof out->path, yyjson_obj_get(e, "path"));
    yyjson_val *n;
    yyjson_arr_foreach(yyjson_obj_get(e, "names"), i, max, n)
    {
        const char *s = yyjson_get_str(n);
        if (s && s[0] && strlen(s) < QR_CONF_NAME_MAX && out->n_names < QR_CONF_MAX_NAMES)
            snprintf(out->names[out->n_names++], QR_CONF_NAME_MAX, "%s", s);
    }
    yyjson_doc_free(d);
    return QR_OK;
}

/* Does the OpenAI list (data) name id with a size_bytes, i.e. an artifact file the daemon found?
 * A manifest whose GGUF is not in models_dir cannot run on the managed engine. */
static bool has_file(yyjson_val *data, const char *id)
{
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(data, i, max, m)
    {
        if (yyjson_equals_str(yyjson_obj_get(m, "id"), id))
            return yyjson_is_uint(yyjson_obj_get(m, "size_bytes"));
    }
    return false;
}

size_t qr_conf_chat_models(const char *url, const struct qr_conf_engine *eng, char (*out)[128],
                           size_t max, enum qr_err *err, struct qr_diag *diag)
{
    *err = QR_OK;
    yyjson_doc *d = get_doc(url, "/v1/models", diag);
    if (!d) {
        *err = QR_ERR_UPSTREAM;
        return 0;
    }
    size_t n = 0, i, max_i, j, max_j;
    yyjson_val *m, *cap;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "models"), i, max_i, m)
    {
        yyjson_val *b = yyjson_obj_get(m, "backend");
        const char *id = yyjson_get_str(yyjson_obj_get(m, "id"));
        if (!id || strlen(id) >= 128 ||
            !((eng->id[0] && yyjson_equals_str(b, eng->id)) ||
              (eng->kind[0] && yyjson_equals_str(b, eng->kind))))
            continue;
        bool text = false;
        yyjson_arr_foreach(yyjson_obj_get(m, "capabilities"), j, max_j, cap)
        {
            text |= yyjson_equals_str(cap, "text");
        }
        if (!text || !has_file(yyjson_obj_get(yyjson_doc_get_root(d), "data"), id))
            continue;
        if (n < max)
            snprintf(out[n], 128, "%s", id);
        n++;
    }
    yyjson_doc_free(d);
    return n;
}

/* ---- decode throughput ---- */

struct stream {
    char *line;
    size_t len, cap;
    unsigned deltas;
    double first, last;
    bool over;
};

static void on_line(struct stream *s, const char *line, size_t len)
{
    if (len < 6 || memcmp(line, "data: ", 6) != 0 || (len >= 12 && !memcmp(line + 6, "[DONE]", 6)))
        return;
    yyjson_doc *d = yyjson_read(line + 6, len - 6, 0);
    yyjson_val *delta = yyjson_ptr_get(yyjson_doc_get_root(d), "/choices/0/delta");
    static const char *const keys[] = {"content", "reasoning_content", "reasoning"};
    bool text = false;
    for (size_t i = 0; i < 3 && !text; i++) {
        const char *v = yyjson_get_str(yyjson_obj_get(delta, keys[i]));
        text = v && v[0];
    }
    yyjson_doc_free(d);
    if (!text)
        return;
    double t = now_ms();
    if (!s->deltas++)
        s->first = t;
    s->last = t;
}

static size_t on_stream(char *ptr, size_t size, size_t n, void *ud)
{
    struct stream *s = ud;
    size_t add = size * n;
    for (size_t i = 0; i < add; i++) {
        if (ptr[i] == '\n') {
            size_t l = s->len;
            while (l && s->line[l - 1] == '\r')
                l--;
            if (s->line)
                on_line(s, s->line, l);
            s->len = 0;
            continue;
        }
        if (s->len + 1 >= s->cap) {
            if (s->cap >= (1u << 20)) { /* one event line larger than 1 MiB */
                s->over = true;
                return 0;
            }
            size_t cap = s->cap ? s->cap * 2 : 4096;
            char *q = realloc(s->line, cap);
            if (!q)
                abort();
            s->line = q;
            s->cap = cap;
        }
        s->line[s->len++] = ptr[i];
    }
    return add;
}

enum qr_err qr_conf_decode_sample(const char *url, const char *model, unsigned gen_tokens,
                                  bool think_off, double *out_tps, struct qr_diag *diag)
{
    *out_tps = 0;
    yyjson_mut_doc *m = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *o = m ? yyjson_mut_obj(m) : NULL;
    if (!o)
        abort();
    yyjson_mut_doc_set_root(m, o);
    yyjson_mut_obj_add_str(m, o, "model", model);
    yyjson_mut_obj_add_bool(m, o, "stream", true);
    yyjson_mut_obj_add_uint(m, o, "max_tokens", gen_tokens);
    yyjson_mut_obj_add_real(m, o, "temperature", 0);
    yyjson_mut_obj_add_int(m, o, "seed", 1);
    if (think_off)
        yyjson_mut_obj_add_str(m, o, "reasoning_effort", "none");
    yyjson_mut_val *msgs = yyjson_mut_obj_add_arr(m, o, "messages");
    yyjson_mut_val *u = yyjson_mut_arr_add_obj(m, msgs);
    yyjson_mut_obj_add_str(m, u, "role", "user");
    yyjson_mut_obj_add_str(m, u, "content", "Tell a long story about the sea. [[long]]");
    char *body = yyjson_mut_write(m, 0, NULL);
    yyjson_mut_doc_free(m);
    if (!body)
        abort();
    char full[1024];
    snprintf(full, sizeof full, "%s/v1/chat/completions", url);
    struct stream s = {0};
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    if (!h || !hdr)
        abort();
    curl_easy_setopt(h, CURLOPT_URL, full);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 300000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    free(body);
    free(s.line);
    if (rc != CURLE_OK || status != 200)
        return qr_diag_set(diag, QR_ERR_UPSTREAM, "decode sample of '%s': %s", model,
                           rc != CURLE_OK ? curl_easy_strerror(rc) : "not answered 200");
    if (s.deltas < 4 || !(s.last > s.first))
        return qr_diag_set(diag, QR_ERR_UPSTREAM,
                           "decode sample of '%s': only %u text deltas streamed", model, s.deltas);
    *out_tps = (double) (s.deltas - 1) / ((s.last - s.first) / 1000.0);
    return QR_OK;
}
