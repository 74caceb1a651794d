/* Engine discovery and version probe for the llama.cpp backend. The engine is an outside binary:
 * its --version output is parsed like any other hostile input (bounded read, bounded fields), and
 * the probe child cannot outlive its time budget (its process group is killed and reaped). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/llamacpp/engine.h"
#include "backend/llamacpp/spawn.h"

#define ENGINE_NAME     "llama-server"
#define PRIVATE_SUBPATH "/.deps/llama/bin/" ENGINE_NAME
#define PROBE_OUT_MAX   16384 /* bytes of --version output kept; the rest is drained */
#define MAX_PATH_DIRS   256   /* $PATH entries looked at */

const char *qr_llama_engine_source_str(enum qr_llama_engine_source s)
{
    switch (s) {
    case QR_LLAMA_ENGINE_CONFIGURED:
        return "configured";
    case QR_LLAMA_ENGINE_ON_PATH:
        return "path";
    case QR_LLAMA_ENGINE_PRIVATE:
        return "private";
    }
    return "unknown";
}

/* 0 when path is an executable regular file, else an errno value. */
static int check_exec(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EISDIR;
    if (access(path, X_OK) != 0)
        return errno;
    return 0;
}

static bool set_path(struct qr_llama_engine *out, const char *path, size_t len)
{
    if (len >= sizeof out->path)
        return false;
    memcpy(out->path, path, len);
    out->path[len] = '\0';
    return true;
}

static bool find_on_path(struct qr_llama_engine *out)
{
    const char *p = getenv("PATH");
    for (unsigned n = 0; p && *p && n < MAX_PATH_DIRS; n++) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t) (end - p) : strlen(p);
        char cand[QR_LLAMA_ENGINE_PATH_MAX];
        /* an empty or relative entry would make the engine depend on the cwd: skip it */
        if (len > 0 && p[0] == '/' && len + sizeof "/" ENGINE_NAME <= sizeof cand) {
            memcpy(cand, p, len);
            memcpy(cand + len, "/" ENGINE_NAME, sizeof "/" ENGINE_NAME);
            if (check_exec(cand) == 0 && set_path(out, cand, strlen(cand)))
                return true;
        }
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

enum qr_err qr_llama_engine_find(const char *configured, const char *prefix, struct qr_diag *diag,
                                 struct qr_llama_engine *out)
{
    memset(out, 0, sizeof *out);
    if (configured && *configured) {
        int e = check_exec(configured);
        if (e != 0)
            return qr_diag_set(diag, e == ENOENT ? QR_ERR_NOT_FOUND : QR_ERR_CONFIG,
                               "configured engine '%s' is not an executable file: %s", configured,
                               strerror(e));
        if (!set_path(out, configured, strlen(configured)))
            return qr_diag_set(diag, QR_ERR_CONFIG, "configured engine path is too long");
        out->source = QR_LLAMA_ENGINE_CONFIGURED;
        return QR_OK;
    }
    if (find_on_path(out)) {
        out->source = QR_LLAMA_ENGINE_ON_PATH;
        return QR_OK;
    }
    char cand[QR_LLAMA_ENGINE_PATH_MAX];
    if (prefix && *prefix) {
        int n = snprintf(cand, sizeof cand, "%s%s", prefix, PRIVATE_SUBPATH);
        if (n > 0 && (size_t) n < sizeof cand && check_exec(cand) == 0 &&
            set_path(out, cand, (size_t) n)) {
            out->source = QR_LLAMA_ENGINE_PRIVATE;
            return QR_OK;
        }
        return qr_diag_set(diag, QR_ERR_NOT_FOUND,
                           "no engine: '" ENGINE_NAME "' is not on PATH and '%s%s' is missing "
                           "(run scripts/setup)",
                           prefix, PRIVATE_SUBPATH);
    }
    return qr_diag_set(diag, QR_ERR_NOT_FOUND,
                       "no engine: '" ENGINE_NAME "' is not on PATH and no engine is configured");
}

/* ---- version parsing ---- */

static bool is_space(char c)
{
    return c == ' ' || c == '\t';
}

/* Copy s[0..n) into dst (cap bytes) when it fits and is printable ASCII. */
static bool copy_field(char *dst, size_t cap, const char *s, size_t n)
{
    if (n == 0 || n >= cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    memcpy(dst, s, n);
    dst[n] = '\0';
    return true;
}

static bool parse_u32(const char *s, size_t n, uint32_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 10)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t) (s[i] - '0');
    }
    if (v > UINT32_MAX)
        return false;
    *out = (uint32_t) v;
    return true;
}

/* Inside the parentheses: "build N, commit C" or "C". */
static bool parse_paren(const char *s, size_t n, struct qr_llama_engine *out)
{
    static const char b[] = "build ", c[] = "commit ";
    if (n > sizeof b - 1 && memcmp(s, b, sizeof b - 1) == 0) {
        const char *comma = memchr(s, ',', n);
        if (!comma)
            return false;
        const char *num = s + sizeof b - 1;
        if (!parse_u32(num, (size_t) (comma - num), &out->build))
            return false;
        const char *rest = comma + 1;
        const char *end = s + n;
        while (rest < end && is_space(*rest))
            rest++;
        if ((size_t) (end - rest) <= sizeof c - 1 || memcmp(rest, c, sizeof c - 1) != 0)
            return false;
        rest += sizeof c - 1;
        return copy_field(out->commit, sizeof out->commit, rest, (size_t) (end - rest));
    }
    return copy_field(out->commit, sizeof out->commit, s, n);
}

enum qr_err qr_llama_engine_parse_version(const char *text, size_t len, struct qr_llama_engine *out)
{
    static const char key[] = "version: ";
    const char *end = text + len;
    for (const char *line = text; line < end;) {
        const char *nl = memchr(line, '\n', (size_t) (end - line));
        const char *le = nl ? nl : end;
        if ((size_t) (le - line) > sizeof key - 1 && memcmp(line, key, sizeof key - 1) == 0) {
            const char *v = line + sizeof key - 1;
            const char *ve = v;
            while (ve < le && !is_space(*ve) && *ve != '\r')
                ve++;
            struct qr_llama_engine tmp = {0};
            if (!copy_field(tmp.version, sizeof tmp.version, v, (size_t) (ve - v)))
                return QR_ERR_PARSE;
            while (ve < le && is_space(*ve))
                ve++;
            if (ve < le && *ve == '(') {
                const char *close = memchr(ve, ')', (size_t) (le - ve));
                /* an unknown shape inside the parentheses keeps the version only */
                if (!close || !parse_paren(ve + 1, (size_t) (close - ve - 1), &tmp)) {
                    tmp.build = 0;
                    tmp.commit[0] = '\0';
                }
            }
            /* upstream builds print the build number as the version */
            if (tmp.build == 0)
                parse_u32(tmp.version, strlen(tmp.version), &tmp.build);
            memcpy(out->version, tmp.version, sizeof out->version);
            memcpy(out->commit, tmp.commit, sizeof out->commit);
            out->build = tmp.build;
            return QR_OK;
        }
        line = nl ? nl + 1 : end;
    }
    return QR_ERR_PARSE;
}

/* ---- the probe ---- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Read from fd until EOF or the deadline; keeps the first PROBE_OUT_MAX bytes. Returns false on
 * timeout. */
static bool read_until_eof(int fd, int64_t deadline, char *buf, size_t *len)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0)
            return false;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int) (left > 1000 ? 1000 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char tmp[4096];
        ssize_t n = read(fd, tmp, sizeof tmp);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return true;
        size_t room = PROBE_OUT_MAX - *len;
        size_t take = (size_t) n < room ? (size_t) n : room;
        memcpy(buf + *len, tmp, take);
        *len += take;
    }
}

/* Wait for pid until the deadline (polling; the probe is short). True when reaped. */
static bool reap_until(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno != EINTR)
            return true; /* ECHILD: somebody else reaped it */
        if (mono_ms() >= deadline)
            return false;
        struct timespec ts = {0, 5 * 1000000};
        nanosleep(&ts, NULL);
    }
}

enum qr_err qr_llama_engine_probe(struct qr_llama_engine *e, uint32_t timeout_ms,
                                  struct qr_diag *diag)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot probe '%s': pipe: %s", e->path,
                           strerror(errno));
    char *argv[] = {e->path, "--version", NULL};
    pid_t pid;
    enum qr_err err = qr_llama_spawn(e->path, argv, fds[1], NULL, diag, &pid);
    close(fds[1]);
    if (err != QR_OK) {
        close(fds[0]);
        return err;
    }
    char *out = malloc(PROBE_OUT_MAX);
    if (!out) {
        close(fds[0]);
        qr_llama_spawn_kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot probe '%s': out of memory", e->path);
    }
    size_t len = 0;
    int64_t deadline = mono_ms() + timeout_ms;
    bool eof = read_until_eof(fds[0], deadline, out, &len);
    close(fds[0]);
    int status = 0;
    bool reaped = eof && reap_until(pid, deadline, &status);
    if (!reaped) {
        qr_llama_spawn_kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        err = qr_diag_set(diag, QR_ERR_UPSTREAM_TIMEOUT,
                          "engine '%s' did not answer --version within %u ms", e->path, timeout_ms);
    } else if (WIFSIGNALED(status)) {
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "engine '%s' --version was killed by signal %d",
                          e->path, WTERMSIG(status));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        err = qr_diag_set(diag, QR_ERR_UPSTREAM, "engine '%s' --version exited with code %d",
                          e->path, WEXITSTATUS(status));
    } else if (qr_llama_engine_parse_version(out, len, e) != QR_OK) {
        err = qr_diag_set(diag, QR_ERR_PARSE, "engine '%s' --version printed no version line",
                          e->path);
    }
    free(out);
    return err;
}
