/* load_bench: an open-loop HTTP/1.1 load generator and a many-streams holder over raw loopback
 * TCP sockets, for bench/run-load-bench (bench/README.md). Like proxy_bench it depends on libc
 * and pthreads only, on purpose: the tool that judges the runtime must not share its HTTP code.
 *
 * Open loop (--rate R): request i is scheduled at t0 + i/R and goes to connection i mod N; a
 * connection sends its next request at its scheduled time, or as soon as its previous response
 * has ended when it is late. Latency counts from the SCHEDULED time to the last byte of the
 * response, so queueing in the server (or in the client) is not hidden (no coordinated omission).
 * The first --warmup seconds of the schedule are sent but not counted. --sweep repeats the run at
 * rising rates and reports the highest rate that was sustained (achieved >= 99% of offered, no
 * error, p99 within --p99-bound-ms; a step that misses only the p99 bound is run twice).
 *
 * Streams (--streams C): one thread polls C sockets, each sending one request (a slow stream in
 * the benchmark) and reading its whole response, the starts spread over --ramp-ms. With
 * --rss-pid it samples that process's VmRSS before, during (peak) and after, and reports the
 * memory per stream. Every stream must end with a 2xx and, with --expect-bytes, that body size.
 *
 * Responses are framed by Content-Length, chunked encoding or connection close with an
 * incremental parser. Output: one JSON line on stdout; progress and errors on stderr. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RBUF_SIZE    (16 * 1024) /* per connection; the head must fit, the body streams through */
#define BODY_MAX     (1u << 20)  /* request body file */
#define CONNS_MAX    4096
#define STREAMS_MAX  60000
#define THREADS_MAX  16
#define ERR_SHOW_MAX 5
#define SWEEP_MAX    32 /* steps */
#define NS           1000000000LL

struct opts {
    const char *host, *method, *path, *body_file, *content_type;
    int port, conns, threads, expect_status;
    double rate, duration_s, warmup_s, p99_bound_ms, max_rate;
    bool sweep;
    int sweep_steps;
    long streams, ramp_ms, settle_ms, timeout_ms;
    int rss_pid;
    long long expect_bytes; /* -1: any */
};

enum pstate { P_HEAD, P_LEN, P_CHUNK_SIZE, P_CHUNK_DATA, P_CHUNK_END, P_TRAILER, P_CLOSE };
enum cstate { C_IDLE, C_CONNECTING, C_SENDING, C_READING, C_DONE };

struct conn {
    int fd;
    enum cstate st;
    enum pstate ps;
    size_t sent;
    char *buf; /* owned, RBUF_SIZE */
    size_t len;
    long long remain;
    int status;
    bool close;
    unsigned long long body_bytes;
    int64_t t_sched, t_send, t_first;
    long next_i; /* open loop: the next request number of this connection */
};

struct shared {
    const struct opts *o;
    const char *req; /* borrowed */
    size_t req_len;
    struct sockaddr_in sa;
    int64_t t0;
    long n_total;    /* scheduled requests (warm-up included) */
    long first_meas; /* first measured request number */
};

struct worker {
    const struct shared *sh;
    int index; /* thread number */
    long n_done, errors, dropped;
    int64_t *lat_ns, *svc_ns, *late_ns; /* owned; measured requests of this thread */
    long cap;
    int64_t t_last_done;
    char errmsg[160];
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * NS + ts.tv_nsec;
}

static void die(const char *what, const char *arg)
{
    fprintf(stderr, "load_bench: %s '%s'\n", what, arg);
    exit(2);
}

/* ---- connection ------------------------------------------------------------------------- */

static int conn_open(struct conn *c, const struct sockaddr_in *sa, bool nonblock)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *) sa, sizeof(*sa)) != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!nonblock)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    c->len = 0;
    return 0;
}

static void conn_close(struct conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
}

static void conn_reset_parser(struct conn *c)
{
    c->ps = P_HEAD;
    c->sent = 0;
    c->remain = 0;
    c->status = 0;
    c->close = false;
    c->body_bytes = 0;
    c->t_first = 0;
}

/* ---- incremental response parser -------------------------------------------------------- */

static bool has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= n; i++)
        if (strncasecmp(v + i, tok, tl) == 0)
            return true;
    return false;
}

static void header_line(struct conn *c, const char *p, size_t n, long long *clen, bool *chunked)
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
        c->close = has_token(v, vl, "close");
    }
}

/* Parse the head at buf[0..head_len). Returns the new state (or -1). */
static int parse_head(struct conn *c, const char *method, size_t head_len)
{
    const char *p = c->buf, *end = c->buf + head_len - 2;
    if (head_len < 12 || memcmp(p, "HTTP/1.", 7) != 0)
        return -1;
    c->status = atoi(p + 9);
    c->close = p[7] == '0';
    long long clen = -1;
    bool chunked = false;
    const char *line = memchr(p, '\n', head_len) + 1;
    while (line < end) {
        const char *nl = memchr(line, '\n', (size_t) (end + 2 - line));
        size_t n = (size_t) (nl - line);
        header_line(c, line, n && line[n - 1] == '\r' ? n - 1 : n, &clen, &chunked);
        line = nl + 1;
    }
    if (c->status < 200 && c->status != 101)
        return P_HEAD; /* 1xx: the real head follows */
    if (strcmp(method, "HEAD") == 0 || c->status == 204 || c->status == 304)
        return P_LEN; /* remain 0 */
    if (chunked)
        return P_CHUNK_SIZE;
    if (clen >= 0) {
        c->remain = clen;
        return P_LEN;
    }
    c->close = true;
    return P_CLOSE;
}

/* Consume what buf holds. 1: the response ended; 0: more needed; -1: malformed. Leftover
 * bytes (a pipelined answer would be one) stay at the start of buf. */
static int parse(struct conn *c, const char *method)
{
    size_t pos = 0;
    int rc = 0;
    for (;;) {
        char *p = c->buf + pos, *nl;
        size_t avail = c->len - pos;
        if (c->ps == P_HEAD) {
            char *end = memmem(p, avail, "\r\n\r\n", 4);
            if (!end) {
                if (c->len == RBUF_SIZE)
                    rc = -1;
                break;
            }
            size_t hl = (size_t) (end - p) + 4;
            memmove(c->buf, p, c->len - pos); /* parse_head reads from buf[0] */
            c->len -= pos;
            pos = 0;
            int st = parse_head(c, method, hl);
            if (st < 0) {
                rc = -1;
                break;
            }
            pos = hl;
            c->ps = (enum pstate) st;
            if (c->ps == P_LEN && c->remain == 0) {
                rc = 1;
                break;
            }
        } else if (c->ps == P_LEN || c->ps == P_CHUNK_DATA) {
            size_t k = avail < (unsigned long long) c->remain ? avail : (size_t) c->remain;
            pos += k;
            c->remain -= (long long) k;
            c->body_bytes += k;
            if (c->remain > 0)
                break;
            if (c->ps == P_LEN) {
                rc = 1;
                break;
            }
            c->ps = P_CHUNK_END;
        } else if (c->ps == P_CLOSE) {
            c->body_bytes += avail;
            pos += avail;
            break;
        } else {
            if (!(nl = memchr(p, '\n', avail))) {
                if (avail > 4096)
                    rc = -1;
                break;
            }
            size_t n = (size_t) (nl - p);
            bool empty = n == 0 || (n == 1 && p[0] == '\r');
            pos += n + 1;
            if (c->ps == P_CHUNK_SIZE) {
                char *e;
                errno = 0;
                unsigned long long size = strtoull(p, &e, 16);
                if (e == p || errno || size > (1ull << 40)) {
                    rc = -1;
                    break;
                }
                c->remain = (long long) size;
                c->ps = size ? P_CHUNK_DATA : P_TRAILER;
            } else if (c->ps == P_CHUNK_END) {
                if (!empty) {
                    rc = -1;
                    break;
                }
                c->ps = P_CHUNK_SIZE;
            } else if (empty) { /* P_TRAILER */
                rc = 1;
                break;
            }
        }
    }
    memmove(c->buf, c->buf + pos, c->len - pos);
    c->len -= pos;
    return rc;
}

/* Read what the socket has and parse. 1: response done; 0: more; -1: error (errmsg set). */
static int conn_read(struct conn *c, const char *method, char *errmsg, size_t errlen)
{
    for (;;) {
        if (c->len == RBUF_SIZE) {
            snprintf(errmsg, errlen, "response head larger than %d bytes", RBUF_SIZE);
            return -1;
        }
        ssize_t k = recv(c->fd, c->buf + c->len, RBUF_SIZE - c->len, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k < 0) {
            snprintf(errmsg, errlen, "recv: %s", strerror(errno));
            return -1;
        }
        if (k == 0) {
            if (c->ps == P_CLOSE)
                return 1;
            snprintf(errmsg, errlen, "connection closed mid-response (%llu body bytes)",
                     c->body_bytes);
            return -1;
        }
        if (!c->t_first)
            c->t_first = now_ns();
        c->len += (size_t) k;
        int rc = parse(c, method);
        if (rc < 0) {
            snprintf(errmsg, errlen, "malformed response");
            return -1;
        }
        if (rc == 1)
            return 1;
    }
}

/* Send what is left of the request. 1: all sent; 0: would block; -1: error. */
static int conn_send(struct conn *c, const char *req, size_t req_len, char *errmsg, size_t errlen)
{
    while (c->sent < req_len) {
        ssize_t k = send(c->fd, req + c->sent, req_len - c->sent, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (k < 0) {
            snprintf(errmsg, errlen, "send: %s", strerror(errno));
            return -1;
        }
        c->sent += (size_t) k;
    }
    return 1;
}

static bool status_ok(const struct opts *o, int status)
{
    return o->expect_status ? status == o->expect_status : status >= 200 && status < 300;
}

/* ---- open loop -------------------------------------------------------------------------- */

static int64_t sched_ns(const struct shared *sh, long i)
{
    return sh->t0 + (int64_t) ((double) i * 1e9 / sh->o->rate);
}

/* One response finished (ok or not) on connection c of worker w. */
static void ol_finish(struct worker *w, struct conn *c, bool ok, int64_t t)
{
    const struct shared *sh = w->sh;
    long i = c->next_i;
    if (ok && !status_ok(sh->o, c->status)) {
        snprintf(w->errmsg, sizeof(w->errmsg), "unexpected status %d", c->status);
        ok = false;
    }
    if (i >= sh->first_meas) {
        if (ok) {
            w->lat_ns[w->n_done] = t - c->t_sched;
            w->svc_ns[w->n_done] = t - c->t_send;
            w->late_ns[w->n_done++] = c->t_send - c->t_sched;
            w->t_last_done = t;
        } else {
            w->errors++;
        }
    }
    if (!ok || c->close || c->len)
        conn_close(c); /* a broken or closing connection, or bytes nobody asked for */
    c->st = C_IDLE;
    c->next_i += sh->o->conns;
}

static void *ol_thread(void *arg)
{
    struct worker *w = arg;
    const struct shared *sh = w->sh;
    const struct opts *o = sh->o;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); /* wake at the scheduled time, not 50 us later */
    int nc = 0;
    struct conn *cs = calloc((size_t) o->conns, sizeof(*cs));
    struct pollfd *pfd = calloc((size_t) o->conns, sizeof(*pfd));
    int *pmap = calloc((size_t) o->conns, sizeof(*pmap));
    if (!cs || !pfd || !pmap)
        abort();
    for (int k = w->index; k < o->conns; k += o->threads) {
        struct conn *c = &cs[nc++];
        c->fd = -1;
        c->buf = malloc(RBUF_SIZE);
        if (!c->buf)
            abort();
        c->next_i = k;
        if (conn_open(c, &sh->sa, false) != 0)
            snprintf(w->errmsg, sizeof(w->errmsg), "connect: %s", strerror(errno));
    }
    /* Past the schedule's end, unfinished requests wait at most this long, then are dropped. */
    int64_t deadline = sched_ns(sh, sh->n_total) + (int64_t) (o->timeout_ms * 1000000);
    for (;;) {
        int64_t t = now_ns(), wake = INT64_MAX;
        int np = 0, live = 0;
        for (int k = 0; k < nc; k++) {
            struct conn *c = &cs[k];
            if (c->st == C_IDLE && c->next_i < sh->n_total) {
                int64_t s = sched_ns(sh, c->next_i);
                if (s > t) {
                    wake = s < wake ? s : wake;
                    live++;
                    continue;
                }
                conn_reset_parser(c);
                c->t_sched = s;
                c->t_send = t;
                if (c->fd < 0 && conn_open(c, &sh->sa, false) != 0) {
                    snprintf(w->errmsg, sizeof(w->errmsg), "connect: %s", strerror(errno));
                    ol_finish(w, c, false, t);
                    k--; /* its next request may be due too */
                    continue;
                }
                c->st = C_SENDING;
            }
            if (c->st == C_SENDING) {
                int rc = conn_send(c, sh->req, sh->req_len, w->errmsg, sizeof(w->errmsg));
                if (rc < 0) {
                    ol_finish(w, c, false, t);
                    k--;
                    continue;
                }
                if (rc == 1)
                    c->st = C_READING;
            }
            if (c->st == C_SENDING || c->st == C_READING) {
                pfd[np] = (struct pollfd){c->fd, c->st == C_SENDING ? POLLOUT : POLLIN, 0};
                pmap[np++] = k;
                live++;
            }
        }
        if (!live)
            break;
        if (t > deadline) {
            for (int k = 0; k < nc; k++) {
                struct conn *c = &cs[k];
                if (c->st == C_SENDING || c->st == C_READING)
                    conn_close(c);
                for (long i = c->next_i; i < sh->n_total; i += o->conns)
                    if (i >= sh->first_meas)
                        w->dropped++;
            }
            break;
        }
        int64_t until = wake < deadline ? wake : deadline;
        int64_t d = until > t ? until - t : 0;
        struct timespec ts = {(time_t) (d / NS), (long) (d % NS)};
        int n = ppoll(pfd, (nfds_t) np, &ts, NULL);
        if (n < 0 && errno != EINTR)
            die("ppoll failed:", strerror(errno));
        if (n <= 0)
            continue;
        for (int j = 0; j < np; j++) {
            if (!pfd[j].revents)
                continue;
            struct conn *c = &cs[pmap[j]];
            if (c->st == C_SENDING) {
                int rc = conn_send(c, sh->req, sh->req_len, w->errmsg, sizeof(w->errmsg));
                if (rc < 0)
                    ol_finish(w, c, false, now_ns());
                else if (rc == 1)
                    c->st = C_READING;
            }
            if (c->st == C_READING) {
                int rc = conn_read(c, o->method, w->errmsg, sizeof(w->errmsg));
                if (rc != 0)
                    ol_finish(w, c, rc == 1, now_ns());
            }
        }
    }
    for (int k = 0; k < nc; k++) {
        conn_close(&cs[k]);
        free(cs[k].buf);
    }
    free(cs);
    free(pfd);
    free(pmap);
    return NULL;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
    return (x > y) - (x < y);
}

static double pct_us(const int64_t *v, long n, double p)
{
    if (n == 0)
        return 0;
    long rank = (long) (p / 100.0 * (double) n + 0.999999);
    rank = rank < 1 ? 1 : rank > n ? n : rank;
    return (double) v[rank - 1] / 1000.0;
}

struct ol_result {
    double rate, achieved, p50, p90, p99, p999, max, svc_p50, svc_p99, late_p50, late_p99;
    long requests, completed, errors, dropped;
};

/* One open-loop run at o->rate; fills r and prints its JSON object (no newline) to f. */
static void ol_run(const struct opts *o, const struct shared *tmpl, struct ol_result *r)
{
    struct shared sh = *tmpl;
    sh.n_total = (long) ((o->warmup_s + o->duration_s) * o->rate + 0.5);
    sh.first_meas = (long) (o->warmup_s * o->rate + 0.5);
    long n_meas = sh.n_total - sh.first_meas;
    struct worker ws[THREADS_MAX] = {0};
    pthread_t tids[THREADS_MAX];
    sh.t0 = now_ns() + 50000000; /* 50 ms for the threads to connect */
    for (int t = 0; t < o->threads; t++) {
        ws[t].sh = &sh;
        ws[t].index = t;
        ws[t].cap = n_meas + 1;
        ws[t].lat_ns = malloc(sizeof(int64_t) * (size_t) ws[t].cap);
        ws[t].svc_ns = malloc(sizeof(int64_t) * (size_t) ws[t].cap);
        ws[t].late_ns = malloc(sizeof(int64_t) * (size_t) ws[t].cap);
        if (!ws[t].lat_ns || !ws[t].svc_ns || !ws[t].late_ns)
            abort();
        if (pthread_create(&tids[t], NULL, ol_thread, &ws[t]) != 0)
            die("cannot start thread", "pthread_create");
    }
    /* from the due time, from the send, and the send's delay past the due time */
    int64_t *lat = malloc(sizeof(int64_t) * (size_t) (n_meas + 1));
    int64_t *svc = malloc(sizeof(int64_t) * (size_t) (n_meas + 1));
    int64_t *late = malloc(sizeof(int64_t) * (size_t) (n_meas + 1));
    if (!lat || !svc || !late)
        abort();
    long n = 0, errors = 0, dropped = 0, shown = 0;
    int64_t t_last = 0;
    for (int t = 0; t < o->threads; t++) {
        pthread_join(tids[t], NULL);
        size_t sz = sizeof(int64_t) * (size_t) ws[t].n_done;
        memcpy(lat + n, ws[t].lat_ns, sz);
        memcpy(svc + n, ws[t].svc_ns, sz);
        memcpy(late + n, ws[t].late_ns, sz);
        n += ws[t].n_done;
        errors += ws[t].errors;
        dropped += ws[t].dropped;
        if (ws[t].t_last_done > t_last)
            t_last = ws[t].t_last_done;
        if ((ws[t].errors || ws[t].dropped) && shown++ < ERR_SHOW_MAX)
            fprintf(stderr, "load_bench: thread %d: %ld errors, %ld dropped, last: %s\n", t,
                    ws[t].errors, ws[t].dropped, ws[t].errmsg);
        free(ws[t].lat_ns);
        free(ws[t].svc_ns);
        free(ws[t].late_ns);
    }
    qsort(lat, (size_t) n, sizeof(*lat), cmp_i64);
    qsort(svc, (size_t) n, sizeof(*svc), cmp_i64);
    qsort(late, (size_t) n, sizeof(*late), cmp_i64);
    /* achieved: completions over the measured window, or over the time they really took */
    int64_t meas0 = sched_ns(&sh, sh.first_meas);
    double window = (double) (sched_ns(&sh, sh.n_total) - meas0) / 1e9;
    double took = (double) (t_last - meas0) / 1e9;
    double span = took > window ? took : window;
    *r = (struct ol_result){.rate = o->rate,
                            .achieved = span > 0 ? (double) n / span : 0,
                            .p50 = pct_us(lat, n, 50),
                            .p90 = pct_us(lat, n, 90),
                            .p99 = pct_us(lat, n, 99),
                            .p999 = pct_us(lat, n, 99.9),
                            .max = n ? (double) lat[n - 1] / 1000.0 : 0,
                            .svc_p50 = pct_us(svc, n, 50),
                            .svc_p99 = pct_us(svc, n, 99),
                            .late_p50 = pct_us(late, n, 50),
                            .late_p99 = pct_us(late, n, 99),
                            .requests = n_meas,
                            .completed = n,
                            .errors = errors,
                            .dropped = dropped};
    free(lat);
    free(svc);
    free(late);
}

static void ol_print(FILE *f, const struct ol_result *r, const struct opts *o)
{
    fprintf(f,
            "{\"mode\":\"open\",\"rate\":%.1f,\"connections\":%d,\"duration_s\":%.3f,"
            "\"requests\":%ld,\"completed\":%ld,\"errors\":%ld,\"dropped\":%ld,"
            "\"achieved_rps\":%.1f,\"p50_us\":%.1f,\"p90_us\":%.1f,\"p99_us\":%.1f,"
            "\"p999_us\":%.1f,\"max_us\":%.1f,\"svc_p50_us\":%.1f,\"svc_p99_us\":%.1f,"
            "\"late_p50_us\":%.1f,\"late_p99_us\":%.1f}",
            r->rate, o->conns, o->duration_s, r->requests, r->completed, r->errors, r->dropped,
            r->achieved, r->p50, r->p90, r->p99, r->p999, r->max, r->svc_p50, r->svc_p99,
            r->late_p50, r->late_p99);
}

static bool ol_sustained(const struct ol_result *r, const struct opts *o)
{
    return r->errors == 0 && r->dropped == 0 && r->achieved >= 0.99 * r->rate &&
           r->p99 <= o->p99_bound_ms * 1000.0;
}

/* Double the rate while sustained, then bisect between the last sustained and the first not. */
static int sweep(struct opts *o, const struct shared *sh)
{
    struct ol_result steps[SWEEP_MAX], r;
    int ns = 0;
    double lo = 0, hi = 0, rate = o->rate;
    struct ol_result best = {0};
    while (ns < SWEEP_MAX) {
        o->rate = rate;
        ol_run(o, sh, &r);
        steps[ns++] = r;
        bool ok = ol_sustained(&r, o);
        if (!ok && ns < SWEEP_MAX && r.errors == 0 && r.dropped == 0 &&
            r.achieved >= 0.99 * r.rate) {
            /* only the p99 bound missed: one spike from a neighbour on a shared machine can do
             * that at any rate, so the step is run once more before it counts as a failure */
            fprintf(stderr, "load_bench: sweep %.0f rps: p99 %.1f us over the bound, again\n", rate,
                    r.p99);
            usleep(200000);
            ol_run(o, sh, &r);
            steps[ns++] = r;
            ok = ol_sustained(&r, o);
        }
        fprintf(stderr,
                "load_bench: sweep %.0f rps: achieved %.0f, p99 %.1f us, errors %ld, "
                "dropped %ld: %s\n",
                rate, r.achieved, r.p99, r.errors, r.dropped, ok ? "sustained" : "not sustained");
        if (ok) {
            lo = rate;
            best = r;
        } else {
            hi = rate;
        }
        if (hi == 0) {
            if (rate * 2 > o->max_rate)
                break;
            rate *= 2;
        } else {
            if (lo == 0 && rate / 2 >= 1 && hi / 2 >= 10)
                rate = hi / 2;
            else if (lo > 0 && (hi - lo) / lo > 0.05 && ns < o->sweep_steps)
                rate = (lo + hi) / 2;
            else
                break;
        }
        usleep(200000); /* let the servers settle between steps */
    }
    printf("{\"mode\":\"sweep\",\"connections\":%d,\"step_s\":%.3f,\"p99_bound_ms\":%.3f,"
           "\"max_rps\":%.1f,\"first_failed_rps\":%.1f,\"at_max\":",
           o->conns, o->duration_s, o->p99_bound_ms, lo, hi);
    ol_print(stdout, &best, o);
    printf(",\"steps\":[");
    for (int i = 0; i < ns; i++) {
        if (i)
            putchar(',');
        ol_print(stdout, &steps[i], o);
    }
    printf("]}\n");
    return lo > 0 ? 0 : 1;
}

/* ---- streams ---------------------------------------------------------------------------- */

static long rss_kib(int pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtol(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static void raise_nofile(long want)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur != RLIM_INFINITY && (long) rl.rlim_cur < want) {
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || (long) rl.rlim_max >= want ? (rlim_t) want
                                                                                 : rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur != RLIM_INFINITY && (long) rl.rlim_cur < want) {
        char msg[64];
        snprintf(msg, sizeof(msg), "%ld < %ld", (long) rl.rlim_cur, want);
        die("RLIMIT_NOFILE too low for --streams:", msg);
    }
}

static int streams_run(const struct opts *o, const struct shared *sh)
{
    long C = o->streams;
    raise_nofile(C + 64);
    struct conn *cs = calloc((size_t) C, sizeof(*cs));
    struct pollfd *pfd = calloc((size_t) C, sizeof(*pfd));
    long *pmap = calloc((size_t) C, sizeof(*pmap));
    int64_t *ttfb = calloc((size_t) C, sizeof(*ttfb)), *dur = calloc((size_t) C, sizeof(*dur));
    if (!cs || !pfd || !pmap || !ttfb || !dur)
        abort();
    for (long k = 0; k < C; k++) {
        cs[k].fd = -1;
        cs[k].st = C_IDLE;
        cs[k].buf = malloc(RBUF_SIZE);
        if (!cs[k].buf)
            abort();
    }
    char errmsg[160] = "";
    long rss_idle = o->rss_pid ? rss_kib(o->rss_pid, "VmRSS") : -1, rss_peak = rss_idle;
    long rss_all_open = -1, started = 0, done = 0, errors = 0, short_bodies = 0, open = 0;
    long peak_open = 0, n_ok = 0;
    unsigned long long bmin = ~0ull, bmax = 0;
    int64_t t0 = now_ns(), next_sample = t0;
    int64_t ramp = (int64_t) o->ramp_ms * 1000000, timeout = (int64_t) o->timeout_ms * 1000000;
    while (done < C) {
        int64_t t = now_ns();
        /* start the streams due by now */
        while (started < C && t0 + (C > 1 ? ramp * started / (C - 1) : 0) <= t) {
            struct conn *c = &cs[started++];
            conn_reset_parser(c);
            c->t_sched = c->t_send = t;
            if (conn_open(c, &sh->sa, true) != 0) {
                snprintf(errmsg, sizeof(errmsg), "connect: %s", strerror(errno));
                c->st = C_DONE;
                errors++;
                done++;
                continue;
            }
            c->st = C_CONNECTING;
            open++;
        }
        if (open > peak_open)
            peak_open = open;
        if (o->rss_pid && t >= next_sample) {
            long v = rss_kib(o->rss_pid, "VmRSS");
            if (v > rss_peak)
                rss_peak = v;
            if (started == C && open == C && rss_all_open < 0)
                rss_all_open = v;
            next_sample = t + 20000000;
        }
        long np = 0;
        for (long k = 0; k < started; k++) {
            struct conn *c = &cs[k];
            if (c->st == C_DONE)
                continue;
            if (t - c->t_send > timeout) {
                snprintf(errmsg, sizeof(errmsg), "stream %ld timed out after %ld ms", k,
                         o->timeout_ms);
                conn_close(c);
                c->st = C_DONE;
                errors++;
                done++;
                open--;
                continue;
            }
            pfd[np] = (struct pollfd){c->fd, c->st == C_READING ? POLLIN : POLLOUT, 0};
            pmap[np++] = k;
        }
        int64_t wait = started < C ? 1000000 : 20000000;
        struct timespec ts = {0, (long) wait};
        int n = ppoll(pfd, (nfds_t) np, &ts, NULL);
        if (n < 0 && errno != EINTR)
            die("ppoll failed:", strerror(errno));
        for (long j = 0; n > 0 && j < np; j++) {
            if (!pfd[j].revents)
                continue;
            long k = pmap[j];
            struct conn *c = &cs[k];
            int rc = 0;
            if (c->st == C_CONNECTING) {
                int err = 0;
                socklen_t el = sizeof(err);
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) {
                    snprintf(errmsg, sizeof(errmsg), "connect: %s", strerror(err));
                    rc = -1;
                } else {
                    c->st = C_SENDING;
                }
            }
            if (rc == 0 && c->st == C_SENDING) {
                rc = conn_send(c, sh->req, sh->req_len, errmsg, sizeof(errmsg));
                if (rc == 1) {
                    c->st = C_READING;
                    rc = 0;
                }
            }
            if (rc == 0 && c->st == C_READING && (pfd[j].revents & (POLLIN | POLLHUP | POLLERR)))
                rc = conn_read(c, o->method, errmsg, sizeof(errmsg));
            if (rc == 0)
                continue;
            int64_t te = now_ns();
            bool ok = rc == 1 && status_ok(o, c->status);
            if (rc == 1 && !ok)
                snprintf(errmsg, sizeof(errmsg), "stream %ld: unexpected status %d", k, c->status);
            if (ok && o->expect_bytes >= 0 &&
                c->body_bytes != (unsigned long long) o->expect_bytes) {
                snprintf(errmsg, sizeof(errmsg), "stream %ld: %llu body bytes, expected %lld", k,
                         c->body_bytes, o->expect_bytes);
                short_bodies++;
                ok = false;
            }
            if (ok) {
                ttfb[n_ok] = c->t_first - c->t_send;
                dur[n_ok++] = te - c->t_send;
                bmin = c->body_bytes < bmin ? c->body_bytes : bmin;
                bmax = c->body_bytes > bmax ? c->body_bytes : bmax;
            } else {
                errors++;
                if (errors <= ERR_SHOW_MAX)
                    fprintf(stderr, "load_bench: %s\n", errmsg);
            }
            conn_close(c);
            c->st = C_DONE;
            done++;
            open--;
        }
    }
    double wall_s = (double) (now_ns() - t0) / 1e9;
    long rss_after = -1, hwm = -1;
    if (o->rss_pid) {
        usleep((useconds_t) o->settle_ms * 1000);
        rss_after = rss_kib(o->rss_pid, "VmRSS");
        hwm = rss_kib(o->rss_pid, "VmHWM");
    }
    qsort(ttfb, (size_t) n_ok, sizeof(*ttfb), cmp_i64);
    qsort(dur, (size_t) n_ok, sizeof(*dur), cmp_i64);
    printf("{\"mode\":\"streams\",\"streams\":%ld,\"completed\":%ld,\"errors\":%ld,"
           "\"short_bodies\":%ld,\"peak_open\":%ld,\"wall_s\":%.3f,\"ttfb_p50_us\":%.1f,"
           "\"ttfb_p99_us\":%.1f,\"dur_p50_ms\":%.1f,\"dur_max_ms\":%.1f,"
           "\"body_bytes_min\":%llu,\"body_bytes_max\":%llu,\"rss_idle_kib\":%ld,"
           "\"rss_all_open_kib\":%ld,\"rss_peak_kib\":%ld,\"rss_after_kib\":%ld,"
           "\"vmhwm_kib\":%ld,\"kib_per_stream\":%.2f}\n",
           C, n_ok, errors, short_bodies, peak_open, wall_s, pct_us(ttfb, n_ok, 50),
           pct_us(ttfb, n_ok, 99), pct_us(dur, n_ok, 50) / 1000.0,
           n_ok ? (double) dur[n_ok - 1] / 1e6 : 0, n_ok ? bmin : 0, bmax, rss_idle, rss_all_open,
           rss_peak, rss_after, hwm,
           o->rss_pid && rss_idle >= 0 ? (double) (rss_peak - rss_idle) / (double) C : 0);
    if (errmsg[0] && errors > ERR_SHOW_MAX)
        fprintf(stderr, "load_bench: %ld errors in all, last: %s\n", errors, errmsg);
    for (long k = 0; k < C; k++) {
        conn_close(&cs[k]);
        free(cs[k].buf);
    }
    free(cs);
    free(pfd);
    free(pmap);
    free(ttfb);
    free(dur);
    return errors ? 1 : 0;
}

/* ---- setup ------------------------------------------------------------------------------ */

static char *read_body(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot open", path);
    char *buf = malloc(BODY_MAX);
    if (!buf)
        abort();
    size_t n = fread(buf, 1, BODY_MAX, f);
    if (ferror(f) || !feof(f))
        die("read error or larger than 1 MiB:", path);
    fclose(f);
    *out_len = n;
    return buf;
}

static char *build_request(const struct opts *o, size_t *out_len)
{
    size_t body_len = 0;
    char *body = o->body_file ? read_body(o->body_file, &body_len) : NULL;
    size_t cap = 1024 + strlen(o->path) + strlen(o->host) + strlen(o->method) +
                 strlen(o->content_type) + body_len;
    char *req = malloc(cap);
    if (!req)
        abort();
    int n = snprintf(req, cap,
                     "%s %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: qr-load-bench\r\n"
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

static void usage(FILE *f)
{
    fprintf(f,
            "usage: load_bench --port P [--host 127.0.0.1] [--method GET] [--path /api/version]\n"
            "                  [--body FILE] [--content-type application/json]\n"
            "                  [--expect-status CODE] [--timeout-ms 10000]\n"
            "  open loop: --rate R [--connections 8] [--threads 1] [--duration 5] [--warmup 1]\n"
            "             [--sweep [--max-rate 1000000] [--p99-bound-ms 10] [--sweep-steps 12]]\n"
            "  streams:   --streams C [--ramp-ms 500] [--rss-pid PID] [--settle-ms 500]\n"
            "             [--expect-bytes N]\n"
            "Open loop: request i is due at i/R s and goes to connection i mod N; latency counts\n"
            "from the due time. Streams: one thread holds C requests open at once (poll).\n"
            "Prints one JSON line; exit 1 on any error (sweep: when no rate was sustained).\n");
}

static double parse_num(const char *s, const char *opt, double lo, double hi)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || !end || *end || !(v >= lo && v <= hi))
        die("bad value for", opt);
    return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.host = "127.0.0.1",
                       .method = "GET",
                       .path = "/api/version",
                       .content_type = "application/json",
                       .conns = 8,
                       .threads = 1,
                       .duration_s = 5,
                       .warmup_s = 1,
                       .p99_bound_ms = 10,
                       .max_rate = 1000000,
                       .sweep_steps = 12,
                       .ramp_ms = 500,
                       .settle_ms = 500,
                       .timeout_ms = 10000,
                       .expect_bytes = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--sweep")) {
            o->sweep = true;
            continue;
        }
        if (i + 1 >= argc)
            die("option needs a value (see --help):", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--port"))
            o->port = (int) parse_num(v, a, 1, 65535);
        else if (!strcmp(a, "--host"))
            o->host = v;
        else if (!strcmp(a, "--method"))
            o->method = v;
        else if (!strcmp(a, "--path"))
            o->path = v;
        else if (!strcmp(a, "--body"))
            o->body_file = v;
        else if (!strcmp(a, "--content-type"))
            o->content_type = v;
        else if (!strcmp(a, "--expect-status"))
            o->expect_status = (int) parse_num(v, a, 100, 999);
        else if (!strcmp(a, "--timeout-ms"))
            o->timeout_ms = (long) parse_num(v, a, 1, 3600000);
        else if (!strcmp(a, "--rate"))
            o->rate = parse_num(v, a, 0.1, 1e7);
        else if (!strcmp(a, "--connections"))
            o->conns = (int) parse_num(v, a, 1, CONNS_MAX);
        else if (!strcmp(a, "--threads"))
            o->threads = (int) parse_num(v, a, 1, THREADS_MAX);
        else if (!strcmp(a, "--duration"))
            o->duration_s = parse_num(v, a, 0.01, 3600);
        else if (!strcmp(a, "--warmup"))
            o->warmup_s = parse_num(v, a, 0, 3600);
        else if (!strcmp(a, "--max-rate"))
            o->max_rate = parse_num(v, a, 1, 1e7);
        else if (!strcmp(a, "--p99-bound-ms"))
            o->p99_bound_ms = parse_num(v, a, 0.001, 60000);
        else if (!strcmp(a, "--sweep-steps"))
            o->sweep_steps = (int) parse_num(v, a, 1, SWEEP_MAX);
        else if (!strcmp(a, "--streams"))
            o->streams = (long) parse_num(v, a, 1, STREAMS_MAX);
        else if (!strcmp(a, "--ramp-ms"))
            o->ramp_ms = (long) parse_num(v, a, 0, 600000);
        else if (!strcmp(a, "--rss-pid"))
            o->rss_pid = (int) parse_num(v, a, 1, 1 << 30);
        else if (!strcmp(a, "--settle-ms"))
            o->settle_ms = (long) parse_num(v, a, 0, 60000);
        else if (!strcmp(a, "--expect-bytes"))
            o->expect_bytes = (long long) parse_num(v, a, 0, 1e15);
        else
            die("unknown option (see --help):", a);
    }
    if (!o->port)
        die("missing required option", "--port");
    if (!o->rate == !o->streams)
        die("give exactly one of --rate and --streams", "");
    if (o->threads > o->conns)
        o->threads = o->conns;
    if (o->path[0] != '/' || strpbrk(o->path, " \r\n") || strpbrk(o->method, " \r\n"))
        die("bad --path or --method", o->path);
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_args(argc, argv, &o);
    signal(SIGPIPE, SIG_IGN);
    struct shared sh = {.o = &o};
    sh.req = build_request(&o, &sh.req_len);
    sh.sa = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons((uint16_t) o.port)};
    if (inet_pton(AF_INET, o.host, &sh.sa.sin_addr) != 1)
        die("not an IPv4 address", o.host);
    int rc;
    if (o.streams) {
        rc = streams_run(&o, &sh);
    } else if (o.sweep) {
        rc = sweep(&o, &sh);
    } else {
        struct ol_result r;
        ol_run(&o, &sh, &r);
        ol_print(stdout, &r, &o);
        putchar('\n');
        rc = r.errors || r.dropped ? 1 : 0;
    }
    free((char *) sh.req);
    return rc;
}
