/* The two measurements of a calibration (calibrate.h), as plain blocking code: the memory
 * bandwidth kernels on worker threads, and one engine run per thread count -- llama-server
 * spawned the backend's way (backend/llamacpp/spawn.h: own process group, LLAMA_* scrubbed, the
 * API key in its environment), polled for health and asked one /completion over a small blocking
 * HTTP/1.1 exchange on loopback, then stopped. Every wait is bounded by the caller's deadline and
 * checks the cancel flag at least every 50 ms. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <yyjson.h>

#include "backend/llamacpp/spawn.h"
#include "host/calibrate.h"

#define HTTP_MAX_BODY   (1u << 20) /* an answer larger than this is refused */
#define POLL_STEP_MS    50
#define STOP_GRACE_MS   3000
#define LOG_TAIL_BYTES  400
#define CALIB_CTX       "1024"
#define MAX_REPETITIONS 2u

/* The fixed prompt: plain English, a few hundred bytes, the same on every run. */
static const char PROMPT[] =
    "The quick brown fox jumps over the lazy dog. A calibration prompt measures how fast the "
    "engine reads a prompt and writes an answer on this machine. Memory bandwidth, cache sizes, "
    "the number of physical cores and the threads the engine uses all change the result, so the "
    "same text is used on every run and every thread count. The quick brown fox jumps over the "
    "lazy dog again, and the answer that follows is only counted, never read.";

int64_t qr_calib_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool cancelled(volatile sig_atomic_t *cancel)
{
    return cancel && *cancel;
}

/* ---- memory bandwidth ---- */

struct bw_job {
    double *a, *b, *c;
    size_t lo, hi; /* element range of this worker */
    int kernel;    /* 0 init, 1 read, 2 triad */
    uint64_t sum;
};

static void *bw_worker(void *arg)
{
    struct bw_job *j = arg;
    double *a = j->a, *b = j->b, *c = j->c;
    if (j->kernel == 0) {
        for (size_t i = j->lo; i < j->hi; i++) {
            a[i] = 1.0;
            b[i] = 2.0;
            c[i] = 0.5;
        }
    } else if (j->kernel == 1) {
        /* integer lanes vectorize without -ffast-math; the sum keeps the loads alive */
        /* over all three arrays (contiguous): the whole working set, not a third of it */
        const uint64_t *u = (const uint64_t *) a;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        size_t i = j->lo * 3u, hi = j->hi * 3u;
        for (; i + 4 <= hi; i += 4) {
            s0 += u[i];
            s1 += u[i + 1];
            s2 += u[i + 2];
            s3 += u[i + 3];
        }
        for (; i < hi; i++)
            s0 += u[i];
        j->sum = s0 + s1 + s2 + s3;
    } else {
        const double s = 3.0;
        for (size_t i = j->lo; i < j->hi; i++)
            a[i] = b[i] + s * c[i];
    }
    return NULL;
}

/* One pass of kernel over all workers; seconds, or -1 when a thread could not start. */
static double bw_pass(struct bw_job *jobs, uint32_t n, int kernel, uint64_t *sum)
{
    pthread_t tid[256];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint32_t started = 0;
    bool ok = true;
    for (uint32_t i = 0; i < n; i++) {
        jobs[i].kernel = kernel;
        if (i + 1 < n && pthread_create(&tid[i], NULL, bw_worker, &jobs[i]) != 0) {
            ok = false;
            break;
        }
        if (i + 1 < n)
            started++;
    }
    if (ok)
        bw_worker(&jobs[n - 1]); /* the calling thread is the last worker */
    for (uint32_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!ok)
        return -1;
    for (uint32_t i = 0; sum && i < n; i++)
        *sum += jobs[i].sum;
    return (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
}

enum qr_err qr_calib_bandwidth(uint64_t working_set, uint32_t threads, uint32_t budget_ms,
                               volatile sig_atomic_t *cancel, struct qr_calib_bandwidth *out,
                               struct qr_diag *diag)
{
    int64_t t_start = qr_calib_now_ms();
    memset(out, 0, sizeof *out);
    if (threads == 0)
        threads = 1;
    if (threads > 256)
        threads = 256;
    size_t n = (size_t) (working_set / 3u / sizeof(double));
    if (n < 1024)
        return qr_diag_set(diag, QR_ERR_INVALID, "bandwidth working set %llu bytes is too small",
                           (unsigned long long) working_set);
    size_t bytes = n * sizeof(double);
    double *a = mmap(NULL, bytes * 3u, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot map %llu bytes for the bandwidth test",
                           (unsigned long long) bytes * 3u);
    double *b = a + n, *c = b + n;
    struct bw_job jobs[256];
    for (uint32_t i = 0; i < threads; i++) {
        jobs[i] = (struct bw_job){
            a, b, c, n / threads * i, i + 1 == threads ? n : n / threads * (i + 1), 0, 0};
    }
    out->working_set_bytes = (uint64_t) bytes * 3u;
    out->threads = threads;
    enum qr_err err = QR_OK;
    /* first touch by the workers that will read it (NUMA-local pages) */
    if (bw_pass(jobs, threads, 0, NULL) < 0) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot start the bandwidth threads");
        goto done;
    }
    /* best of 3 to 5 passes of each kernel, alternating, more while the budget allows */
    int64_t deadline = t_start + budget_ms;
    for (uint32_t pass = 0; pass < 5; pass++) {
        if (cancelled(cancel)) {
            err = qr_diag_set(diag, QR_ERR_CANCELLED, "calibration cancelled");
            goto done;
        }
        uint64_t sum = 0;
        double tr = bw_pass(jobs, threads, 1, &sum);
        double tt = bw_pass(jobs, threads, 2, NULL);
        if (tr <= 0 || tt <= 0)
            break;
        out->checksum ^= sum;
        /* read: every byte of the set once; triad: STREAM's count, two reads and one write */
        double r = (double) bytes * 3.0 / tr / 1e9, t = (double) bytes * 3.0 / tt / 1e9;
        out->read_gbs = r > out->read_gbs ? r : out->read_gbs;
        out->triad_gbs = t > out->triad_gbs ? t : out->triad_gbs;
        out->passes = pass + 1;
        int64_t now = qr_calib_now_ms(), per = (now - t_start) / (pass + 1);
        if (pass + 1 >= 3 && now + per > deadline)
            break; /* at least three passes: the first can still pay for page faults */
    }
done:
    munmap(a, bytes * 3u);
    out->duration_ms = qr_calib_now_ms() - t_start;
    return err;
}

/* ---- a small blocking HTTP/1.1 client for loopback ---- */

struct http_answer {
    int status;
    char *body; /* malloc'd, NUL-terminated */
    size_t len;
};

static int remaining(int64_t deadline)
{
    int64_t left = deadline - qr_calib_now_ms();
    return left <= 0 ? 0 : left > POLL_STEP_MS ? POLL_STEP_MS : (int) left;
}

/* Decode a chunked body in place; false when malformed. */
static bool dechunk(char *p, size_t len, size_t *out_len)
{
    size_t r = 0, w = 0;
    for (;;) {
        char *end = NULL;
        unsigned long sz = strtoul(p + r, &end, 16);
        if (end == p + r)
            return false;
        char *crlf = memmem(end, len - (size_t) (end - p), "\r\n", 2);
        if (!crlf)
            return false;
        r = (size_t) (crlf - p) + 2;
        if (sz == 0)
            break;
        if (sz > len - r)
            return false;
        memmove(p + w, p + r, sz);
        w += sz;
        r += sz + 2;
        if (r > len)
            return false;
    }
    p[w] = '\0';
    *out_len = w;
    return true;
}

/* The response in buf (got bytes, NUL-terminated, malloc'd) into out; buf is taken. */
static enum qr_err http_parse(char *buf, size_t got, const char *what, struct http_answer *out,
                              struct qr_diag *diag)
{
    char *head_end = strstr(buf, "\r\n\r\n");
    int status = 0;
    if (!head_end || sscanf(buf, "HTTP/1.%*d %d", &status) != 1) {
        free(buf);
        return qr_diag_set(diag, QR_ERR_PARSE, "%s: malformed answer", what);
    }
    *head_end = '\0';
    bool chunked = strcasestr(buf, "\r\ntransfer-encoding: chunked") != NULL;
    char *b = head_end + 4;
    size_t len = got - (size_t) (b - buf);
    if (chunked && !dechunk(b, len, &len)) {
        free(buf);
        return qr_diag_set(diag, QR_ERR_PARSE, "%s: malformed chunked body", what);
    }
    memmove(buf, b, len);
    buf[len] = '\0';
    *out = (struct http_answer){status, buf, len};
    return QR_OK;
}

/* Send req (len bytes) on the connecting socket fd and read until the server closes, within the
 * deadline; *out_buf (malloc'd, NUL-terminated) receives what came back. */
static enum qr_err http_exchange(int fd, const char *req, size_t total, const char *what,
                                 int64_t deadline, volatile sig_atomic_t *cancel, char **out_buf,
                                 size_t *out_got, struct qr_diag *diag)
{
    size_t sent = 0, got = 0, bcap = 8192;
    char *buf = malloc(bcap + 1);
    enum qr_err err = buf ? QR_OK : qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    for (bool eof = false; !err && !eof;) {
        int wait = remaining(deadline);
        struct pollfd pfd = {fd, (short) (sent < total ? POLLOUT : POLLIN), 0};
        int pr = cancelled(cancel) || wait == 0 ? 0 : poll(&pfd, 1, wait);
        if (cancelled(cancel))
            err = qr_diag_set(diag, QR_ERR_CANCELLED, "calibration cancelled");
        else if (wait == 0)
            err = qr_diag_set(diag, QR_ERR_UPSTREAM_TIMEOUT, "%s: no answer in time", what);
        else if (pr < 0 && errno != EINTR)
            err = qr_diag_set(diag, QR_ERR_IO, "poll: %s", strerror(errno));
        if (err || pr <= 0)
            continue;
        if (sent < total) {
            ssize_t w = send(fd, req + sent, total - sent, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                err = qr_diag_set(diag, QR_ERR_UPSTREAM, "%s: %s", what, strerror(errno));
            sent += w > 0 ? (size_t) w : 0;
            continue;
        }
        if (got == bcap) { /* grow, up to the cap */
            char *nb = bcap < HTTP_MAX_BODY ? realloc(buf, bcap * 2 + 1) : NULL;
            if (!nb) {
                err = qr_diag_set(diag, QR_ERR_TOO_LARGE, "%s: answer over %u bytes", what,
                                  HTTP_MAX_BODY);
                continue;
            }
            buf = nb;
            bcap *= 2;
        }
        ssize_t r = recv(fd, buf + got, bcap - got, 0);
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            err = qr_diag_set(diag, QR_ERR_UPSTREAM, "%s: %s", what, strerror(errno));
        eof = r == 0;
        got += r > 0 ? (size_t) r : 0;
    }
    if (err) {
        free(buf);
        return err;
    }
    buf[got] = '\0';
    *out_buf = buf;
    *out_got = got;
    return QR_OK;
}

/* One request on a fresh loopback connection (Connection: close), the whole answer in out
 * (body malloc'd, caller frees). */
static enum qr_err http_call(uint16_t port, const char *method, const char *path, const char *key,
                             const char *body, int64_t deadline, volatile sig_atomic_t *cancel,
                             struct http_answer *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    char what[96];
    snprintf(what, sizeof what, "%s %s", method, path);
    size_t blen = body ? strlen(body) : 0, cap = blen + 512;
    char *req = malloc(cap), *buf = NULL;
    if (!req)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    int hl = snprintf(req, cap,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n"
                      "Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, port, key, blen);
    if (hl < 0 || (size_t) hl + blen >= cap) {
        free(req);
        return qr_diag_set(diag, QR_ERR_INTERNAL, "request head too long");
    }
    memcpy(req + hl, body ? body : "", blen);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    size_t got = 0;
    enum qr_err err = QR_OK;
    if (fd < 0)
        err = qr_diag_set(diag, QR_ERR_IO, "socket: %s", strerror(errno));
    else if (connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0 && errno != EINPROGRESS)
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "connect 127.0.0.1:%u: %s", port, strerror(errno));
    else
        err = http_exchange(fd, req, (size_t) hl + blen, what, deadline, cancel, &buf, &got, diag);
    if (!err)
        err = http_parse(buf, got, what, out, diag); /* takes buf */
    if (fd >= 0)
        close(fd);
    free(req);
    return err;
}

/* ---- one engine run ---- */

static enum qr_err pick_port(uint16_t *out, struct qr_diag *diag)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot pick a port: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    int rc = bind(fd, (struct sockaddr *) &sa, sizeof sa);
    if (rc == 0)
        rc = getsockname(fd, (struct sockaddr *) &sa, &sl);
    int e = errno;
    close(fd);
    if (rc != 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot pick a port: %s", strerror(e));
    *out = ntohs(sa.sin_port);
    return QR_OK;
}

/* Stop the engine: SIGTERM to its group, SIGKILL after the grace, reaped. */
static void stop_engine(pid_t pid)
{
    if (pid <= 0)
        return;
    qr_llama_spawn_kill(pid, SIGTERM);
    int64_t until = qr_calib_now_ms() + STOP_GRACE_MS;
    for (;;) {
        pid_t r = waitpid(pid, NULL, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return;
        if (qr_calib_now_ms() >= until)
            break;
        usleep(20000);
    }
    qr_llama_spawn_kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/* The last bytes of the engine's output, one line, into out. */
static void log_tail(int fd, char *out, size_t cap)
{
    out[0] = '\0';
    off_t end = lseek(fd, 0, SEEK_END);
    if (end <= 0 || cap < 2)
        return;
    off_t from = end > LOG_TAIL_BYTES ? end - LOG_TAIL_BYTES : 0;
    char buf[LOG_TAIL_BYTES + 1];
    ssize_t n = pread(fd, buf, (size_t) (end - from), from);
    if (n <= 0)
        return;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    char *last = strrchr(buf, '\n');
    snprintf(out, cap, "%s", last ? last + 1 : buf);
}

/* Parse the /completion answer's timings into the row (best of each rate). */
static bool read_timings(const char *body, size_t len, struct qr_calib_row *row)
{
    yyjson_doc *doc = yyjson_read(body, len, 0);
    yyjson_val *t = yyjson_obj_get(yyjson_doc_get_root(doc), "timings");
    yyjson_val *pps = yyjson_obj_get(t, "prompt_per_second");
    yyjson_val *dps = yyjson_obj_get(t, "predicted_per_second");
    bool ok = yyjson_is_num(pps) && yyjson_is_num(dps);
    if (ok) {
        double p = yyjson_get_num(pps), d = yyjson_get_num(dps);
        ok = isfinite(p) && isfinite(d) && p > 0 && d > 0;
        if (ok) {
            row->prefill_tps = p > row->prefill_tps ? p : row->prefill_tps;
            row->decode_tps = d > row->decode_tps ? d : row->decode_tps;
            row->prompt_tokens = (uint32_t) yyjson_get_uint(yyjson_obj_get(t, "prompt_n"));
            row->predicted_tokens = (uint32_t) yyjson_get_uint(yyjson_obj_get(t, "predicted_n"));
        }
    }
    yyjson_doc_free(doc);
    return ok;
}

/* Wait for GET /health 200 while the child lives. */
static enum qr_err wait_healthy(pid_t pid, uint16_t port, const char *key, int64_t deadline,
                                volatile sig_atomic_t *cancel, struct qr_diag *diag)
{
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return qr_diag_set(diag, QR_ERR_UPSTREAM, "engine exited during load (%s %d)",
                               WIFSIGNALED(st) ? "signal" : "code",
                               WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        if (cancelled(cancel))
            return qr_diag_set(diag, QR_ERR_CANCELLED, "calibration cancelled");
        if (qr_calib_now_ms() >= deadline)
            return qr_diag_set(diag, QR_ERR_UPSTREAM_TIMEOUT, "engine not healthy in time");
        struct http_answer a;
        int64_t step = qr_calib_now_ms() + 1000;
        if (http_call(port, "GET", "/health", key, NULL, step < deadline ? step : deadline, cancel,
                      &a, NULL) == QR_OK) {
            free(a.body);
            if (a.status == 200)
                return QR_OK;
        }
        usleep(POLL_STEP_MS * 1000);
    }
}

/* Spawn the engine and run the prompt(s): the row's rates, or err with diag. *pid receives the
 * child so that the caller stops it whatever happens. */
static enum qr_err run_row(const char *engine, const char *model, uint32_t threads,
                           uint32_t n_predict, int64_t deadline, volatile sig_atomic_t *cancel,
                           int log_fd, pid_t *pid, struct qr_calib_row *row, struct qr_diag *diag)
{
    uint16_t port = 0;
    enum qr_err err = pick_port(&port, diag);
    if (err)
        return err;
    unsigned char rnd[16];
    char key[40], key_env[64], port_s[8], t_s[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd)
        return qr_diag_set(diag, QR_ERR_IO, "no random bytes for the engine key");
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(key + 2 * i, 3, "%02x", rnd[i]);
    snprintf(key_env, sizeof key_env, "LLAMA_API_KEY=%s", key);
    snprintf(port_s, sizeof port_s, "%u", port);
    snprintf(t_s, sizeof t_s, "%u", threads);
    char *argv[] = {
        (char *) engine, "-m", (char *) model, "-c",     CALIB_CTX,   "-np",    "1",    "-t", t_s,
        "-tb",           t_s,  "--no-webui",   "--host", "127.0.0.1", "--port", port_s, NULL};
    const char *env[] = {key_env, NULL};
    int64_t t0 = qr_calib_now_ms();
    if ((err = qr_llama_spawn(engine, argv, log_fd, env, diag, pid)))
        return err;
    if ((err = wait_healthy(*pid, port, key, deadline, cancel, diag)))
        return err;
    row->load_ms = qr_calib_now_ms() - t0;
    char body[sizeof PROMPT + 256];
    snprintf(body, sizeof body,
             "{\"prompt\":\"%s\",\"n_predict\":%u,\"cache_prompt\":false,\"ignore_eos\":true,"
             "\"temperature\":0,\"stream\":false}",
             PROMPT, n_predict);
    for (uint32_t rep = 0; rep < MAX_REPETITIONS; rep++) {
        int64_t r0 = qr_calib_now_ms();
        struct http_answer a;
        if ((err = http_call(port, "POST", "/completion", key, body, deadline, cancel, &a, diag)))
            /* a second repetition that runs out of time is skipped; a cancel is a cancel */
            return rep && err != QR_ERR_CANCELLED ? QR_OK : err;
        bool ok = a.status == 200 && read_timings(a.body, a.len, row);
        int status = a.status;
        free(a.body);
        if (!ok)
            return qr_diag_set(diag, QR_ERR_UPSTREAM, "/completion answered %d without timings",
                               status);
        row->repetitions = rep + 1;
        int64_t took = qr_calib_now_ms() - r0;
        if (qr_calib_now_ms() + took * 2 > deadline)
            break;
    }
    return QR_OK;
}

enum qr_err qr_calib_engine_row(const char *engine_path, const char *model, uint32_t threads,
                                uint32_t n_predict, int64_t deadline_ms,
                                volatile sig_atomic_t *cancel, struct qr_calib_row *out)
{
    memset(out, 0, sizeof *out);
    out->threads = threads;
    int64_t t0 = qr_calib_now_ms();
    struct qr_diag d = {{0}};
    FILE *log = tmpfile(); /* the engine's output, for the error of a failed row */
    pid_t pid = -1;
    enum qr_err err = log ? run_row(engine_path, model, threads, n_predict, deadline_ms, cancel,
                                    fileno(log), &pid, out, &d)
                          : qr_diag_set(&d, QR_ERR_IO, "cannot create a log file");
    stop_engine(pid);
    out->ok = err == QR_OK && out->decode_tps > 0;
    if (!out->ok) {
        char tail[LOG_TAIL_BYTES + 1] = "";
        if (log && err != QR_ERR_CANCELLED)
            log_tail(fileno(log), tail, sizeof tail);
        snprintf(out->error, sizeof out->error, "%.120s%s%.120s", d.msg[0] ? d.msg : "no timings",
                 tail[0] ? ": " : "", tail);
    }
    if (log)
        fclose(log);
    out->duration_ms = qr_calib_now_ms() - t0;
    return err == QR_ERR_CANCELLED ? QR_ERR_CANCELLED : QR_OK;
}

/* ---- an engine session for other measurements (bench/ab.c) ---- */

enum qr_err qr_calib_engine_start(const char *engine, const char *model,
                                  const char *const *extra_args, int log_fd, int64_t deadline,
                                  volatile sig_atomic_t *cancel, struct qr_calib_engine *out,
                                  struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    out->pid = -1;
    enum qr_err err = pick_port(&out->port, diag);
    unsigned char rnd[16];
    if (err)
        return err;
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t) sizeof rnd)
        return qr_diag_set(diag, QR_ERR_IO, "no random bytes for the engine key");
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(out->key + 2 * i, 3, "%02x", rnd[i]);
    char key_env[64], port_s[8];
    snprintf(key_env, sizeof key_env, "LLAMA_API_KEY=%s", out->key);
    snprintf(port_s, sizeof port_s, "%u", out->port);
    char *argv[16 + QR_CALIB_ENGINE_MAX_ARGS];
    size_t n = 0;
    argv[n++] = (char *) engine;
    argv[n++] = "-m";
    argv[n++] = (char *) model;
    for (size_t i = 0; extra_args && extra_args[i] && i < QR_CALIB_ENGINE_MAX_ARGS; i++)
        argv[n++] = (char *) extra_args[i];
    const char *tail[] = {"--no-webui", "--host", "127.0.0.1", "--port", port_s, NULL};
    for (size_t i = 0; tail[i]; i++)
        argv[n++] = (char *) tail[i];
    argv[n] = NULL;
    const char *env[] = {key_env, NULL};
    int64_t t0 = qr_calib_now_ms();
    if ((err = qr_llama_spawn(engine, argv, log_fd, env, diag, &out->pid)))
        return err;
    if ((err = wait_healthy(out->pid, out->port, out->key, deadline, cancel, diag)))
        return err;
    out->load_ms = qr_calib_now_ms() - t0;
    return QR_OK;
}

enum qr_err qr_calib_engine_call(const struct qr_calib_engine *e, const char *method,
                                 const char *path, const char *body, int64_t deadline,
                                 volatile sig_atomic_t *cancel, int *out_status, char **out_body,
                                 size_t *out_len, struct qr_diag *diag)
{
    struct http_answer a;
    enum qr_err err = http_call(e->port, method, path, e->key, body, deadline, cancel, &a, diag);
    if (err)
        return err;
    *out_status = a.status;
    *out_body = a.body;
    *out_len = a.len;
    return QR_OK;
}

void qr_calib_engine_stop(struct qr_calib_engine *e)
{
    stop_engine(e->pid);
    e->pid = -1;
}
