/* Integration-test harness: child processes, port discovery from their logs, libcurl requests
 * with first-byte timing, and raw socket exchanges. See harness.h. */
#include "harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <yyjson.h>

extern char **environ;

#define MAX_CHILDREN 16
static pid_t live[MAX_CHILDREN];

static void die(const char *what)
{
    fprintf(stderr, "harness: %s\n", what);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (live[i] > 0)
            kill(live[i], SIGKILL);
    }
    exit(1);
}

static void kill_children(void)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
        }
    }
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

char *qr_t_read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t) n + 1);
    size_t got = fread(buf, 1, (size_t) n, f);
    fclose(f);
    buf[got] = '\0';
    if (out_len)
        *out_len = got;
    return buf;
}

static void make_dir(struct qr_child *c, const char *tag)
{
    static bool registered;
    if (!registered) {
        atexit(kill_children);
        registered = true;
    }
    snprintf(c->dir, sizeof(c->dir), "/tmp/qr-test-%s-%d-XXXXXX", tag, (int) getpid());
    if (!mkdtemp(c->dir))
        die("mkdtemp failed");
    snprintf(c->log, sizeof(c->log), "%s/out.log", c->dir);
}

static void spawn(struct qr_child *c, char *const argv[], char *const envp[])
{
    pid_t pid = fork();
    if (pid < 0)
        die("fork failed");
    if (pid == 0) {
        int fd = open(c->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    c->pid = pid;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (live[i] <= 0) {
            live[i] = pid;
            break;
        }
    }
}

/* Wait until the file holds a port number after `key`, or die. */
static uint16_t wait_port(struct qr_child *c, const char *file, const char *key)
{
    double deadline = now_ms() + 20000;
    while (now_ms() < deadline) {
        char *text = qr_t_read_file(file, NULL);
        if (text) {
            char *p = key ? strstr(text, key) : text;
            if (p) {
                long port = strtol(p + (key ? strlen(key) : 0), NULL, 10);
                free(text);
                if (port > 0 && port < 65536)
                    return (uint16_t) port;
            } else {
                free(text);
            }
        }
        int st;
        if (waitpid(c->pid, &st, WNOHANG) == c->pid) {
            char *log = qr_t_read_file(c->log, NULL);
            fprintf(stderr, "child exited early; log:\n%s\n", log ? log : "(none)");
            free(log);
            die("child did not start");
        }
        usleep(10000);
    }
    die("timed out waiting for a child's port");
    return 0;
}

void qr_t_replay_start(struct qr_child *c)
{
    qr_t_replay_start_dir(c, QR_TEST_CASES "/replay");
}

void qr_t_replay_start_dir(struct qr_child *c, const char *dir)
{
    memset(c, 0, sizeof(*c));
    make_dir(c, "replay");
    char portfile[320], reqlog[320];
    snprintf(portfile, sizeof(portfile), "%s/port", c->dir);
    snprintf(reqlog, sizeof(reqlog), "%s/requests.jsonl", c->dir);
    char *argv[] = {QR_TEST_REPLAY, "--listen", "127.0.0.1:0", "--port-file", portfile,
                    "--log",        reqlog,     (char *) dir,  NULL};
    spawn(c, argv, environ);
    c->port = wait_port(c, portfile, NULL);
}

void qr_t_daemon_start(struct qr_child *c, uint16_t upstream_port, const char *const *env_extra)
{
    qr_t_daemon_start_args(c, upstream_port, env_extra, NULL);
}

void qr_t_daemon_start_args(struct qr_child *c, uint16_t upstream_port,
                            const char *const *env_extra, const char *const *args)
{
    memset(c, 0, sizeof(*c));
    make_dir(c, "daemon");
    static char listen[] = "QUANTUM_RUNTIME_LISTEN=127.0.0.1:0";
    char state[320], url[96];
    snprintf(state, sizeof(state), "QUANTUM_RUNTIME_STATE_DIR=%s/state", c->dir);
    /* port 9 (discard) on loopback: nothing listens there in a test sandbox */
    snprintf(url, sizeof(url), "QUANTUM_RUNTIME_OLLAMA_URL=http://127.0.0.1:%u",
             upstream_port ? upstream_port : 9);
    char *envp[128];
    size_t n = 0;
    for (char **e = environ; *e && n < 100; e++) {
        if (strncmp(*e, "QUANTUM_RUNTIME_", 16))
            envp[n++] = *e;
    }
    envp[n++] = listen;
    envp[n++] = state;
    envp[n++] = url;
    for (const char *const *e = env_extra; e && *e && n < 126; e++)
        envp[n++] = (char *) *e;
    envp[n] = NULL;
    char *argv[32] = {QR_TEST_DAEMON, "serve"};
    size_t a = 2;
    for (const char *const *p = args; p && *p && a < 31; p++)
        argv[a++] = (char *) *p;
    argv[a] = NULL;
    spawn(c, argv, envp);
    c->port = wait_port(c, c->log, "\"port\":");
}

int qr_t_stop(struct qr_child *c, int sig, int timeout_ms)
{
    if (c->pid <= 0)
        return -1;
    kill(c->pid, sig);
    double deadline = now_ms() + timeout_ms;
    int st = 0, rc = -1;
    for (;;) {
        pid_t r = waitpid(c->pid, &st, WNOHANG);
        if (r == c->pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (now_ms() > deadline) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
            rc = -1;
            break;
        }
        usleep(5000);
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (live[i] == c->pid)
            live[i] = 0;
    }
    c->pid = 0;
    return rc;
}

bool qr_t_log_contains(const struct qr_child *c, const char *needle)
{
    char *text = qr_t_read_file(c->log, NULL);
    bool found = text && strstr(text, needle);
    free(text);
    return found;
}

struct sink {
    struct qr_t_resp *r;
    size_t cap;
    size_t hlen, hcap;
    double start;
};

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = sz * n;
    if (s->r->first_byte_ms < 0)
        s->r->first_byte_ms = now_ms() - s->start;
    s->r->chunks++;
    if (s->r->body_len + len + 1 > s->cap) {
        s->cap = (s->r->body_len + len + 1) * 2;
        s->r->body = realloc(s->r->body, s->cap);
    }
    memcpy(s->r->body + s->r->body_len, p, len);
    s->r->body_len += len;
    s->r->body[s->r->body_len] = '\0';
    return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = sz * n;
    if (s->hlen + len + 1 > s->hcap) {
        s->hcap = (s->hlen + len + 1) * 2;
        s->r->headers = realloc(s->r->headers, s->hcap);
    }
    memcpy(s->r->headers + s->hlen, p, len);
    s->hlen += len;
    s->r->headers[s->hlen] = '\0';
    return len;
}

void qr_t_request(const char *method, uint16_t port, const char *target, const char *const *headers,
                  const char *body, size_t body_len, struct qr_t_resp *out)
{
    memset(out, 0, sizeof(*out));
    out->first_byte_ms = -1;
    out->body = calloc(1, 1);
    out->headers = calloc(1, 1);
    struct sink s = {.r = out, .cap = 1, .hcap = 1, .start = now_ms()};
    CURL *h = curl_easy_init();
    char url[2048];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u%s", port, target);
    struct curl_slist *hl = curl_slist_append(NULL, "Expect:");
    for (const char *const *p = headers; p && *p; p++)
        hl = curl_slist_append(hl, *p);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (!strcmp(method, "HEAD"))
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) body_len);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &s);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    out->curl_rc = (int) curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    out->total_ms = now_ms() - s.start;
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);
}

void qr_t_resp_free(struct qr_t_resp *r)
{
    free(r->body);
    free(r->headers);
    memset(r, 0, sizeof(*r));
}

char *qr_t_header(const struct qr_t_resp *r, const char *name)
{
    size_t n = strlen(name);
    for (const char *line = r->headers; line && *line;) {
        const char *eol = strstr(line, "\r\n");
        if (!eol)
            break;
        if ((size_t) (eol - line) > n && line[n] == ':' && !strncasecmp(line, name, n)) {
            const char *v = line + n + 1;
            while (*v == ' ')
                v++;
            return strndup(v, (size_t) (eol - v));
        }
        line = eol + 2;
    }
    return NULL;
}

char *qr_t_raw(uint16_t port, const char *raw, size_t len, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *) &a, sizeof(a)) != 0)
        die("raw connect failed");
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, raw + off, len - off);
        if (w <= 0)
            break;
        off += (size_t) w;
    }
    size_t cap = 4096, got = 0;
    char *buf = malloc(cap);
    double deadline = now_ms() + timeout_ms;
    while (now_ms() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int left = (int) (deadline - now_ms());
        if (poll(&pfd, 1, left > 0 ? left : 0) <= 0)
            break;
        if (got + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(fd, buf + got, cap - got - 1);
        if (r <= 0)
            break;
        got += (size_t) r;
    }
    buf[got] = '\0';
    close(fd);
    return buf;
}

int qr_t_run(char *const argv[], const char *const *env_extra, int timeout_ms, char **out)
{
    struct qr_child c;
    memset(&c, 0, sizeof(c));
    make_dir(&c, "run");
    char *envp[128];
    size_t n = 0;
    for (char **e = environ; *e && n < 100; e++) {
        if (strncmp(*e, "QUANTUM_RUNTIME_", 16))
            envp[n++] = *e;
    }
    for (const char *const *e = env_extra; e && *e && n < 126; e++)
        envp[n++] = (char *) *e;
    envp[n] = NULL;
    spawn(&c, argv, envp);
    double deadline = now_ms() + timeout_ms;
    int st = 0, rc = -1;
    for (;;) {
        if (waitpid(c.pid, &st, WNOHANG) == c.pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (now_ms() > deadline) {
            kill(c.pid, SIGKILL);
            waitpid(c.pid, &st, 0);
            break;
        }
        usleep(2000);
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (live[i] == c.pid)
            live[i] = 0;
    }
    *out = qr_t_read_file(c.log, NULL);
    if (!*out)
        *out = calloc(1, 1);
    return rc;
}

bool qr_t_replay_reset(uint16_t port)
{
    struct qr_t_resp r;
    qr_t_request("POST", port, "/__replay/reset", NULL, "", 0, &r);
    bool ok = r.status == 200;
    qr_t_resp_free(&r);
    return ok;
}

yyjson_doc *qr_t_replay_requests(uint16_t port)
{
    struct qr_t_resp r;
    qr_t_request("GET", port, "/__replay/requests", NULL, NULL, 0, &r);
    yyjson_doc *doc = r.status == 200 ? yyjson_read(r.body, r.body_len, 0) : NULL;
    qr_t_resp_free(&r);
    return doc;
}
