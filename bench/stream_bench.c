/* stream_bench: one streamed OpenAI chat completion (SSE) over a raw loopback TCP socket, timed
 * per content delta. Used by bench/run-llama-bench to compare llama-server called directly with
 * the same engine called through `quantum-runtime serve` (bench/README.md).
 *
 * libc + pthreads only (no threads are needed today; linked like proxy_bench), deliberately
 * independent of the project library, so that the tool measuring the Runtime shares no HTTP or
 * JSON code with it.
 *
 *   stream_bench --port P [--host 127.0.0.1] [--path /v1/chat/completions] --body FILE
 *                [--key API_KEY] [--timeout-ms 120000] [--dump FILE]
 *
 * Sends one POST (Connection: close; --key, else $STREAM_BENCH_KEY, adds `Authorization: Bearer`),
 * reads the response (Content-Length, chunked or close; --dump writes the decoded body to FILE),
 * splits the SSE stream into `data:` events and counts the events that carry a non-empty
 * `"content":"..."` (not `reasoning_content`); for the scripted model each is one token. Prints
 * one JSON line:
 *
 *   {"status":200,"connect_us":..,"ttfb_us":..,"ttft_us":..,"total_us":..,"deltas":200,
 *    "content_bytes":..,"decode_s":..,"decode_tps":..,"itl_p50_us":..,"itl_p90_us":..,
 *    "itl_max_us":..,"finish":"length","done":1}
 *
 * Times are CLOCK_MONOTONIC from the first byte of the request written: ttfb = first response
 * byte, ttft = the read that completed the first content delta, decode = first to last content
 * delta, decode_tps = (deltas - 1) / decode_s, itl = gaps between consecutive content deltas.
 * Exit status 0 on a 2xx response with at least one content delta, 1 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec * 1e6 + (double) ts.tv_nsec / 1e3;
}

static void die(const char *msg)
{
    fprintf(stderr, "stream_bench: %s\n", msg);
    exit(2);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open --body file");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        die("out of memory");
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            if (!buf)
                die("out of memory");
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0)
            break;
        n += r;
    }
    fclose(f);
    *len = n;
    return buf;
}

/* growable byte buffer */
struct buf {
    char *p;
    size_t len, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p)
            die("out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_drop(struct buf *b, size_t n)
{
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = '\0';
}

/* ---- measurement state ---- */
static double t_sent, t_first_delta = -1, t_last_delta = -1;
static double *gaps;
static size_t ngaps, capgaps;
static long deltas;
static long content_bytes;
static char finish[32] = "";
static bool done_marker;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* One SSE event's data (NUL-terminated). t = when the read that completed it returned. */
static void on_event(const char *data, double t)
{
    if (!strcmp(data, "[DONE]")) {
        done_marker = true;
        return;
    }
    const char *fr = strstr(data, "\"finish_reason\":\"");
    if (fr) {
        fr += strlen("\"finish_reason\":\"");
        size_t n = strcspn(fr, "\"");
        if (n >= sizeof finish)
            n = sizeof finish - 1;
        memcpy(finish, fr, n);
        finish[n] = '\0';
    }
    /* `"content":"` with a quote before `content`, so `reasoning_content` does not match */
    const char *c = strstr(data, "\"content\":\"");
    if (!c)
        return;
    c += strlen("\"content\":\"");
    if (*c == '"')
        return; /* empty content */
    long n = 0;
    for (const char *q = c; *q && *q != '"'; q++) {
        if (*q == '\\' && q[1])
            q++, n++;
        n++;
    }
    content_bytes += n;
    if (t_first_delta < 0)
        t_first_delta = t;
    else {
        if (ngaps == capgaps) {
            capgaps = capgaps ? capgaps * 2 : 256;
            gaps = realloc(gaps, capgaps * sizeof *gaps);
            if (!gaps)
                die("out of memory");
        }
        gaps[ngaps++] = t - t_last_delta;
    }
    t_last_delta = t;
    deltas++;
}

/* Decoded body bytes -> SSE lines -> events. */
static struct buf sse, event, raw; /* raw: the first 1 KiB of the body, for error messages */
static FILE *dump;                 /* --dump: the whole decoded body */

static void sse_feed(const char *p, size_t n, double t)
{
    if (dump)
        fwrite(p, 1, n, dump);
    if (raw.len < 1024)
        buf_add(&raw, p, n < 1024 - raw.len ? n : 1024 - raw.len);
    buf_add(&sse, p, n);
    size_t start = 0;
    for (;;) {
        char *nl = memchr(sse.p + start, '\n', sse.len - start);
        if (!nl)
            break;
        size_t ll = (size_t) (nl - (sse.p + start));
        char *line = sse.p + start;
        if (ll && line[ll - 1] == '\r')
            ll--;
        if (ll == 0) { /* end of event */
            if (event.len) {
                on_event(event.p, t);
                event.len = 0;
                event.p[0] = '\0';
            }
        } else if (ll >= 5 && !strncmp(line, "data:", 5)) {
            size_t off = 5;
            if (off < ll && line[off] == ' ')
                off++;
            if (event.len)
                buf_add(&event, "\n", 1);
            buf_add(&event, line + off, ll - off);
        }
        start += (size_t) (nl - (sse.p + start)) + 1;
    }
    if (start)
        buf_drop(&sse, start);
}

int main(int argc, char **argv)
{
    const char *host = "127.0.0.1", *path = "/v1/chat/completions", *body_file = NULL, *key = NULL;
    int port = 0, timeout_ms = 120000;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--port") && v)
            port = atoi(v), i++;
        else if (!strcmp(a, "--host") && v)
            host = v, i++;
        else if (!strcmp(a, "--path") && v)
            path = v, i++;
        else if (!strcmp(a, "--body") && v)
            body_file = v, i++;
        else if (!strcmp(a, "--key") && v)
            key = v, i++;
        else if (!strcmp(a, "--timeout-ms") && v)
            timeout_ms = atoi(v), i++;
        else if (!strcmp(a, "--dump") && v) {
            if (!(dump = fopen(v, "wb")))
                die("cannot open --dump file");
            i++;
        } else {
            fprintf(stderr, "usage: stream_bench --port P [--host H] [--path P] --body FILE "
                            "[--key K] [--timeout-ms MS] [--dump FILE]\n");
            return 2;
        }
    }
    if (!key)
        key = getenv("STREAM_BENCH_KEY"); /* keeps the key out of the world-readable argv */
    if (port <= 0 || port > 65535 || !body_file)
        die("--port and --body are required");
    size_t body_len;
    char *body = read_file(body_file, &body_len);

    char head[1024];
    char auth[600] = "";
    if (key && *key) {
        if (strlen(key) > 500)
            die("--key too long");
        snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", key);
    }
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                      "Accept: text/event-stream\r\n%sContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      path, host, port, auth, body_len);
    if (hl <= 0 || (size_t) hl >= sizeof head)
        die("request head too long");
    struct buf req = {0};
    buf_add(&req, head, (size_t) hl);
    buf_add(&req, body, body_len);

    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port)};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        die("--host must be an IPv4 address");
    double t0 = now_us();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *) &sa, sizeof sa) != 0)
        die("connect failed");
    double connect_us = now_us() - t0;

    t_sent = now_us();
    size_t off = 0;
    while (off < req.len) {
        ssize_t w = write(fd, req.p + off, req.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write failed");
        off += (size_t) w;
    }

    /* read loop */
    struct buf in = {0};
    char rb[65536];
    double ttfb = -1;
    int status = 0;
    bool headers_done = false, chunked = false, have_len = false, eof = false, complete = false;
    long long content_len = 0, body_seen = 0;
    long long chunk_left = -1; /* chunked: bytes left in the current chunk; -1 = expect a size */
    bool chunk_crlf = false;   /* chunked: CRLF after chunk data pending */
    double deadline = t_sent + (double) timeout_ms * 1000.0;
    while (!complete && !eof) {
        int wait_ms = (int) ((deadline - now_us()) / 1000.0);
        if (wait_ms <= 0)
            die("timed out");
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, wait_ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            die("timed out");
        ssize_t r = read(fd, rb, sizeof rb);
        double t = now_us();
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("read failed");
        if (r == 0) {
            eof = true;
            break;
        }
        if (ttfb < 0)
            ttfb = t - t_sent;
        buf_add(&in, rb, (size_t) r);
        if (!headers_done) {
            char *end = strstr(in.p, "\r\n\r\n");
            if (!end)
                continue;
            *end = '\0';
            if (sscanf(in.p, "HTTP/1.%*d %d", &status) != 1)
                die("bad status line");
            for (char *line = strstr(in.p, "\r\n"); line; line = strstr(line, "\r\n")) {
                line += 2;
                if (!strncasecmp(line, "transfer-encoding:", 18) && strstr(line, "chunked"))
                    chunked = true;
                else if (!strncasecmp(line, "content-length:", 15))
                    have_len = true, content_len = atoll(line + 15);
            }
            headers_done = true;
            buf_drop(&in, (size_t) (end + 4 - in.p));
        }
        /* decode the body bytes in `in` */
        if (!chunked) {
            body_seen += (long long) in.len;
            sse_feed(in.p, in.len, t);
            in.len = 0;
            if (have_len && body_seen >= content_len)
                complete = true;
            continue;
        }
        for (;;) {
            if (chunk_crlf) {
                if (in.len < 2)
                    break;
                buf_drop(&in, 2);
                chunk_crlf = false;
            }
            if (chunk_left < 0) {
                char *nl = strstr(in.p, "\r\n");
                if (!nl)
                    break;
                chunk_left = strtoll(in.p, NULL, 16);
                buf_drop(&in, (size_t) (nl + 2 - in.p));
                if (chunk_left == 0) {
                    complete = true; /* trailers ignored; Connection: close */
                    break;
                }
            }
            if (in.len == 0)
                break;
            size_t take = in.len < (size_t) chunk_left ? in.len : (size_t) chunk_left;
            sse_feed(in.p, take, t);
            buf_drop(&in, take);
            chunk_left -= (long long) take;
            if (chunk_left == 0) {
                chunk_left = -1;
                chunk_crlf = true;
            }
        }
    }
    double total = now_us() - t_sent;
    if (sse.len) { /* a last line without its newline */
        sse_feed("\n\n", 2, now_us());
    } else if (event.len) {
        on_event(event.p, now_us());
    }
    close(fd);
    if (dump)
        fclose(dump);

    double decode_s = deltas > 1 ? (t_last_delta - t_first_delta) / 1e6 : 0;
    double tps = decode_s > 0 ? (double) (deltas - 1) / decode_s : 0;
    double p50 = 0, p90 = 0, mx = 0;
    if (ngaps) {
        qsort(gaps, ngaps, sizeof *gaps, cmp_double);
        p50 = gaps[(size_t) ((double) ngaps * 0.5 + 0.999999) - 1];
        p90 = gaps[(size_t) ((double) ngaps * 0.9 + 0.999999) - 1];
        mx = gaps[ngaps - 1];
    }
    printf("{\"status\":%d,\"connect_us\":%.1f,\"ttfb_us\":%.1f,\"ttft_us\":%.1f,\"total_us\":%.1f,"
           "\"deltas\":%ld,\"content_bytes\":%ld,\"decode_s\":%.6f,\"decode_tps\":%.3f,"
           "\"itl_p50_us\":%.1f,\"itl_p90_us\":%.1f,\"itl_max_us\":%.1f,\"finish\":\"%s\","
           "\"done\":%d}\n",
           status, connect_us, ttfb, t_first_delta >= 0 ? t_first_delta - t_sent : -1.0, total,
           deltas, content_bytes, decode_s, tps, p50, p90, mx, finish, done_marker ? 1 : 0);
    int rc = deltas > 0 ? 0 : 1;
    if (status < 200 || status > 299) {
        fprintf(stderr, "stream_bench: HTTP %d: %s\n", status, raw.p ? raw.p : "");
        rc = 1;
    }
    free(body);
    free(req.p);
    free(in.p);
    free(sse.p);
    free(event.p);
    free(raw.p);
    free(gaps);
    return rc;
}
