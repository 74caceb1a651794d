/* proxy_bench: a closed-loop HTTP/1.1 load generator over raw loopback TCP sockets, used to measure
 * what the daemon's proxy path adds on top of the engine it fronts (bench/README.md). Each of C
 * threads owns one keep-alive connection and sends its share of N requests one after another; the
 * latency of a request is the time from the first byte written to the last byte of the response
 * read, framed by Content-Length, chunked encoding or connection close, on CLOCK_MONOTONIC. The
 * first W requests (split the same way) warm the connections and caches and are not counted.
 * Results go to stdout as one JSON object on one line, so scripts can read them with awk. It
 * depends on libc and pthreads only, on purpose: the tool that judges the runtime must not share
 * its HTTP code. Being closed-loop it under-reports tails under overload (coordinated omission);
 * it is meant for the sequential-latency and saturated-throughput cases, compared with the direct
 * engine in the same run. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define RBUF_SIZE    (256 * 1024) /* per connection receive buffer; responses may be larger */
#define HEAD_MAX     (64 * 1024)  /* response status line + headers */
#define BODY_MAX     (64u << 20)  /* request body file */
#define CONNS_MAX    1024
#define TIMEOUT_S    10 /* per socket read/write: a stalled server is an error, not a hang */
#define ERR_SHOW_MAX 5  /* first error messages printed to stderr */

struct opts {
    const char *host, *method, *path, *body_file, *content_type;
    int port, conns;
    long requests, warmup;
    int expect_status; /* 0: any 2xx */
};

/* What one response looked like, for the sanity fields of the report. */
struct resp {
    int status;
    size_t body_bytes;
    bool close; /* the server will close (or closed) the connection after it */
};

struct worker {
    const struct opts *o;
    const char *req; /* borrowed: the request bytes, shared by every worker */
    size_t req_len;
    long n_warm, n_meas; /* this worker's share */
    int64_t *lat_ns;     /* owned, n_meas entries, n_done filled */
    int64_t *ttfb_ns;    /* owned, time to the first response byte */
    long n_done, errors, reconnects;
    struct resp last;
    int fd;
    char *rbuf; /* owned, RBUF_SIZE */
    size_t rpos, rlen;
    char errmsg[160];
};

static pthread_barrier_t start_barrier;
static int64_t t_start_ns;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Print "proxy_bench: <what> '<arg>'" and exit 2 (bad usage or setup). */
static void die(const char *what, const char *arg)
{
    fprintf(stderr, "proxy_bench: %s '%s'\n", what, arg);
    exit(2);
}

/* ---- connection --------------------------------------------------------------------------- */

static int conn_open(struct worker *w)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) w->o->port)};
    if (inet_pton(AF_INET, w->o->host, &sa.sin_addr) != 1)
        die("not an IPv4 address", w->o->host);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    struct timeval tv = {.tv_sec = TIMEOUT_S};
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    w->fd = fd;
    w->rpos = w->rlen = 0;
    return 0;
}

static void conn_close(struct worker *w)
{
    if (w->fd >= 0)
        close(w->fd);
    w->fd = -1;
    w->rpos = w->rlen = 0;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t) k;
    }
    return 0;
}

/* Make at least one more byte available in rbuf[rpos..rlen). 0: ok, 1: EOF, -1: error. */
static int fill(struct worker *w)
{
    if (w->rpos == w->rlen) {
        w->rpos = w->rlen = 0;
    } else if (w->rlen == RBUF_SIZE) {
        memmove(w->rbuf, w->rbuf + w->rpos, w->rlen - w->rpos);
        w->rlen -= w->rpos;
        w->rpos = 0;
        if (w->rlen == RBUF_SIZE)
            return -1; /* a single token (header section) larger than the buffer */
    }
    for (;;) {
        ssize_t k = recv(w->fd, w->rbuf + w->rlen, RBUF_SIZE - w->rlen, 0);
        if (k > 0) {
            w->rlen += (size_t) k;
            return 0;
        }
        if (k == 0)
            return 1;
        if (errno != EINTR)
            return -1;
    }
}

/* ---- response parsing --------------------------------------------------------------------- */

static bool has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= n; i++)
        if (strncasecmp(v + i, tok, tl) == 0)
            return true;
    return false;
}

/* Parse one header line [p, p+n) into what framing needs. */
static void header_line(const char *p, size_t n, long long *clen, bool *chunked, bool *close)
{
    const char *colon = memchr(p, ':', n);
    if (!colon)
        return;
    size_t nl = (size_t) (colon - p);
    const char *v = colon + 1;
    size_t vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    if (nl == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
        char tmp[32];
        size_t k = vl < sizeof(tmp) - 1 ? vl : sizeof(tmp) - 1;
        memcpy(tmp, v, k);
        tmp[k] = '\0';
        *clen = strtoll(tmp, NULL, 10);
    } else if (nl == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
        *chunked = has_token(v, vl, "chunked");
    } else if (nl == 10 && strncasecmp(p, "Connection", 10) == 0) {
        *close = has_token(v, vl, "close");
    }
}

/* Read the status line and headers. Returns 0 and sets the framing, or -1. Skips 1xx. */
static int read_head(struct worker *w, struct resp *r, long long *clen, bool *chunked,
                     int64_t *ttfb)
{
    for (;;) {
        char *end;
        while (!(end = memmem(w->rbuf + w->rpos, w->rlen - w->rpos, "\r\n\r\n", 4))) {
            if (w->rlen - w->rpos > HEAD_MAX || fill(w) != 0)
                return -1;
            if (!*ttfb)
                *ttfb = now_ns();
        }
        if (!*ttfb)
            *ttfb = now_ns();
        char *p = w->rbuf + w->rpos;
        size_t head_len = (size_t) (end - p) + 4;
        if (head_len < 12 || memcmp(p, "HTTP/1.", 7) != 0)
            return -1;
        r->status = atoi(p + 9);
        r->close = p[7] == '0'; /* HTTP/1.0 closes unless told otherwise; good enough here */
        *clen = -1;
        *chunked = false;
        char *line = memchr(p, '\n', head_len) + 1;
        while (line < end) {
            char *nl = memchr(line, '\n', (size_t) (end + 2 - line));
            size_t n = (size_t) (nl - line);
            header_line(line, n && line[n - 1] == '\r' ? n - 1 : n, clen, chunked, &r->close);
            line = nl + 1;
        }
        w->rpos += head_len;
        if (r->status >= 200 || r->status == 101)
            return 0;
    }
}

/* Consume exactly n body bytes. */
static int read_n(struct worker *w, unsigned long long n, struct resp *r)
{
    while (n) {
        if (w->rpos == w->rlen && fill(w) != 0)
            return -1;
        size_t k = w->rlen - w->rpos;
        if (k > n)
            k = (size_t) n;
        w->rpos += k;
        n -= k;
        r->body_bytes += k;
    }
    return 0;
}

/* One CRLF-terminated line (chunk size or trailer); *out points into rbuf, valid until fill. */
static int read_line(struct worker *w, char **out, size_t *out_len)
{
    char *nl;
    while (!(nl = memchr(w->rbuf + w->rpos, '\n', w->rlen - w->rpos)))
        if (fill(w) != 0)
            return -1;
    *out = w->rbuf + w->rpos;
    *out_len = (size_t) (nl - *out);
    w->rpos += *out_len + 1;
    return 0;
}

static int read_chunked(struct worker *w, struct resp *r)
{
    char *line, *end;
    size_t n;
    for (;;) {
        if (read_line(w, &line, &n) != 0)
            return -1;
        errno = 0;
        unsigned long long size = strtoull(line, &end, 16);
        if (end == line || errno)
            return -1;
        if (size == 0)
            break;
        if (read_n(w, size, r) != 0)
            return -1;
        if (read_line(w, &line, &n) != 0 || (n > 1 || (n == 1 && line[0] != '\r')))
            return -1; /* the CRLF after the chunk data */
    }
    do { /* trailers, up to the empty line */
        if (read_line(w, &line, &n) != 0)
            return -1;
    } while (n > 1 || (n == 1 && line[0] != '\r'));
    return 0;
}

static int read_until_close(struct worker *w, struct resp *r)
{
    for (;;) {
        r->body_bytes += w->rlen - w->rpos;
        w->rpos = w->rlen;
        int k = fill(w);
        if (k == 1)
            return 0;
        if (k < 0)
            return -1;
    }
}

static int read_response(struct worker *w, struct resp *r, int64_t *ttfb)
{
    long long clen;
    bool chunked;
    memset(r, 0, sizeof(*r));
    if (read_head(w, r, &clen, &chunked, ttfb) != 0)
        return -1;
    bool no_body = strcmp(w->o->method, "HEAD") == 0 || r->status == 204 || r->status == 304;
    if (no_body)
        return 0;
    if (chunked)
        return read_chunked(w, r);
    if (clen >= 0)
        return read_n(w, (unsigned long long) clen, r);
    r->close = true;
    return read_until_close(w, r);
}

/* ---- the request loop --------------------------------------------------------------------- */

static bool status_ok(const struct opts *o, int status)
{
    return o->expect_status ? status == o->expect_status : status >= 200 && status < 300;
}

/* One request on the worker's connection, reconnecting first when needed. 0 ok, -1 failed. */
static int one_request(struct worker *w, int64_t *lat, int64_t *ttfb)
{
    if (w->fd < 0) {
        if (conn_open(w) != 0) {
            snprintf(w->errmsg, sizeof(w->errmsg), "connect: %s", strerror(errno));
            return -1;
        }
        w->reconnects++;
    }
    struct resp r;
    int64_t t0 = now_ns(), t_first = 0;
    errno = 0;
    int rc = send_all(w->fd, w->req, w->req_len);
    if (rc == 0)
        rc = read_response(w, &r, &t_first);
    int64_t t1 = now_ns();
    if (rc != 0) {
        snprintf(w->errmsg, sizeof(w->errmsg), "i/o or framing error: %s",
                 errno ? strerror(errno) : "malformed response");
        conn_close(w);
        return -1;
    }
    w->last = r;
    if (r.close)
        conn_close(w);
    if (!status_ok(w->o, r.status)) {
        snprintf(w->errmsg, sizeof(w->errmsg), "unexpected status %d", r.status);
        return -1;
    }
    *lat = t1 - t0;
    *ttfb = t_first - t0;
    return 0;
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    int64_t lat, ttfb;
    for (long i = 0; i < w->n_warm; i++)
        if (one_request(w, &lat, &ttfb) != 0)
            w->errors++;
    long warm_errors = w->errors; /* reported on stderr only, not counted */
    w->errors = 0;
    w->reconnects = 0;
    pthread_barrier_wait(&start_barrier);
    for (long i = 0; i < w->n_meas; i++) {
        if (one_request(w, &lat, &ttfb) != 0) {
            w->errors++;
            continue;
        }
        w->lat_ns[w->n_done] = lat;
        w->ttfb_ns[w->n_done++] = ttfb;
    }
    if (warm_errors)
        fprintf(stderr, "proxy_bench: %ld warm-up errors (%s)\n", warm_errors, w->errmsg);
    conn_close(w);
    return NULL;
}

/* ---- setup and report --------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open", path);
    char *buf = malloc(BODY_MAX);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, BODY_MAX, f);
    if (ferror(f) || !feof(f))
        die("read error or larger than 64 MiB:", path);
    fclose(f);
    *out_len = n;
    return buf;
}

static char *build_request(const struct opts *o, size_t *out_len)
{
    size_t body_len = 0;
    char *body = o->body_file ? read_file(o->body_file, &body_len) : NULL;
    size_t cap = 1024 + strlen(o->path) + strlen(o->host) + body_len;
    char *req = malloc(cap);
    if (!req)
        abort();
    int n = snprintf(req, cap,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: qr-proxy-bench\r\n"
                     "Accept: */*\r\n",
                     o->method, o->path, o->host, o->port);
    if (body)
        n += snprintf(req + n, cap - (size_t) n, "Content-Type: %s\r\nContent-Length: %zu\r\n",
                      o->content_type, body_len);
    n += snprintf(req + n, cap - (size_t) n, "\r\n");
    if (body)
        memcpy(req + n, body, body_len);
    free(body);
    *out_len = (size_t) n + body_len;
    return req;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n) in microseconds. */
static double pct_us(const int64_t *v, long n, double p)
{
    if (n == 0)
        return 0;
    long rank = (long) (p / 100.0 * (double) n + 0.999999);
    rank = rank < 1 ? 1 : rank > n ? n : rank;
    return (double) v[rank - 1] / 1000.0;
}

static void report(struct worker *ws, const struct opts *o, double wall_s)
{
    long n = 0, errors = 0, reconnects = 0;
    for (int i = 0; i < o->conns; i++)
        n += ws[i].n_done, errors += ws[i].errors, reconnects += ws[i].reconnects;
    int64_t *lat = malloc(sizeof(*lat) * (size_t) (n ? n : 1));
    int64_t *ttfb = malloc(sizeof(*ttfb) * (size_t) (n ? n : 1));
    if (!lat || !ttfb)
        abort();
    long k = 0;
    double sum = 0;
    for (int i = 0; i < o->conns; i++)
        for (long j = 0; j < ws[i].n_done; j++, k++) {
            lat[k] = ws[i].lat_ns[j];
            ttfb[k] = ws[i].ttfb_ns[j];
            sum += (double) lat[k];
        }
    qsort(lat, (size_t) n, sizeof(*lat), cmp_i64);
    qsort(ttfb, (size_t) n, sizeof(*ttfb), cmp_i64);
    printf("{\"requests\":%ld,\"errors\":%ld,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
           "\"max_us\":%.1f,\"mean_us\":%.1f,\"rps\":%.1f,\"wall_s\":%.4f,"
           "\"ttfb_p50_us\":%.1f,\"ttfb_p99_us\":%.1f,\"connections\":%d,\"reconnects\":%ld,"
           "\"status\":%d,\"body_bytes\":%zu}\n",
           n, errors, pct_us(lat, n, 50), pct_us(lat, n, 90), pct_us(lat, n, 99),
           n ? (double) lat[n - 1] / 1000.0 : 0, n ? sum / (double) n / 1000.0 : 0,
           wall_s > 0 ? (double) n / wall_s : 0, wall_s, pct_us(ttfb, n, 50), pct_us(ttfb, n, 99),
           o->conns, reconnects, ws[0].last.status, ws[0].last.body_bytes);
    free(lat);
    free(ttfb);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: proxy_bench --port P [--host 127.0.0.1] [--connections 1] [--requests 1000]\n"
            "                   [--warmup 100] [--method GET] [--path /api/version]\n"
            "                   [--body FILE] [--content-type application/json]\n"
            "                   [--expect-status CODE]\n"
            "Closed-loop HTTP/1.1 keep-alive load over loopback; prints one JSON line:\n"
            "requests errors p50_us p90_us p99_us max_us mean_us rps wall_s ttfb_p50_us\n"
            "ttfb_p99_us connections reconnects status body_bytes. N and W are totals split\n"
            "evenly over the connections. Exit 1 when any measured request failed.\n");
}

static long parse_long(const char *s, const char *opt, long lo, long hi)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || !end || *end || v < lo || v > hi)
        die("bad value for", opt);
    return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){"127.0.0.1", "GET", "/api/version", NULL, "application/json",
                       0,           1,     1000,           100,  0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc)
            die("option needs a value (see --help):", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--port"))
            o->port = (int) parse_long(v, a, 1, 65535);
        else if (!strcmp(a, "--host"))
            o->host = v;
        else if (!strcmp(a, "--connections"))
            o->conns = (int) parse_long(v, a, 1, CONNS_MAX);
        else if (!strcmp(a, "--requests"))
            o->requests = parse_long(v, a, 1, 100000000);
        else if (!strcmp(a, "--warmup"))
            o->warmup = parse_long(v, a, 0, 100000000);
        else if (!strcmp(a, "--method"))
            o->method = v;
        else if (!strcmp(a, "--path"))
            o->path = v;
        else if (!strcmp(a, "--body"))
            o->body_file = v;
        else if (!strcmp(a, "--content-type"))
            o->content_type = v;
        else if (!strcmp(a, "--expect-status"))
            o->expect_status = (int) parse_long(v, a, 100, 999);
        else
            die("unknown option (see --help):", a);
    }
    if (!o->port)
        die("missing required option", "--port");
    if (o->path[0] != '/' || strpbrk(o->path, " \r\n") || strpbrk(o->method, " \r\n"))
        die("bad --path or --method", o->path);
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_args(argc, argv, &o);
    size_t req_len;
    char *req = build_request(&o, &req_len);
    struct worker *ws = calloc((size_t) o.conns, sizeof(*ws));
    pthread_t *tids = calloc((size_t) o.conns, sizeof(*tids));
    if (!ws || !tids)
        abort();
    pthread_barrier_init(&start_barrier, NULL, (unsigned) o.conns + 1);
    for (int i = 0; i < o.conns; i++) {
        struct worker *w = &ws[i];
        w->o = &o;
        w->req = req;
        w->req_len = req_len;
        w->fd = -1;
        w->n_meas = o.requests / o.conns + (i < o.requests % o.conns);
        w->n_warm = o.warmup / o.conns + (i < o.warmup % o.conns);
        w->lat_ns = malloc(sizeof(int64_t) * (size_t) (w->n_meas ? w->n_meas : 1));
        w->ttfb_ns = malloc(sizeof(int64_t) * (size_t) (w->n_meas ? w->n_meas : 1));
        w->rbuf = malloc(RBUF_SIZE);
        if (!w->lat_ns || !w->ttfb_ns || !w->rbuf)
            abort();
        if (pthread_create(&tids[i], NULL, worker_run, w) != 0)
            die("cannot start thread", "pthread_create");
    }
    pthread_barrier_wait(&start_barrier);
    t_start_ns = now_ns();
    for (int i = 0; i < o.conns; i++)
        pthread_join(tids[i], NULL);
    double wall_s = (double) (now_ns() - t_start_ns) / 1e9;
    report(ws, &o, wall_s);
    long errors = 0;
    for (int i = 0, shown = 0; i < o.conns; i++) {
        errors += ws[i].errors;
        if (ws[i].errors && shown++ < ERR_SHOW_MAX)
            fprintf(stderr, "proxy_bench: connection %d: %ld errors, last: %s\n", i, ws[i].errors,
                    ws[i].errmsg);
        free(ws[i].lat_ns);
        free(ws[i].ttfb_ns);
        free(ws[i].rbuf);
    }
    pthread_barrier_destroy(&start_barrier);
    free(ws);
    free(tids);
    free(req);
    return errors ? 1 : 0;
}
