/* The Runtime's HTTP/1.1 server: an evconnlistener accepts, each connection is one bufferevent
 * driven by a small state machine (idle -> head -> request -> [discard] -> idle, or -> linger ->
 * closed), the head is parsed by core/http_parse.c, and each request goes to the one handler as
 * soon as its head is complete. The server owns every limit (header bytes and count, connection
 * count, header/read/idle/write timeouts, input held per connection) and answers its own errors
 * in the Runtime's JSON error shape, so nothing libevent-specific ever reaches a client. Work
 * that would free a request under the handler's feet (end of response, abort) is deferred to a
 * per-connection "kick" event, so a handler never re-enters itself and a request is only freed
 * from a callback of the loop. See http_server.h for the contract with handlers. */
#include "core/http_server.h"

#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "core/http_parse.h"
#include "core/log.h"

/* Defaults for options left at 0. */
#define DEF_MAX_HEADER_BYTES  (16 * 1024)
#define DEF_MAX_HEADERS       100
#define DEF_MAX_CONNECTIONS   1024
#define DEF_HEADER_TIMEOUT_MS 10000
#define DEF_READ_TIMEOUT_MS   30000
#define DEF_IDLE_TIMEOUT_MS   60000
#define DEF_WRITE_TIMEOUT_MS  30000
#define DEF_OUT_HIGH_WATER    (256 * 1024)

#define DISCARD_MAX      (64 * 1024) /* unread body we skip to keep a connection */
#define MIN_READ_HIGH    (64 * 1024) /* input held per connection, at least */
#define LINGER_MS        1000        /* after the last response, drain input this long */
#define LINGER_MAX_BYTES (1024 * 1024)
#define RESP_HEADERS_MAX (32 * 1024) /* headers added by qr_http_resp_header */
#define ACCEPT_RETRY_MS  100         /* pause after accept() fails (EMFILE) */

enum conn_state {
    C_IDLE,    /* keep-alive, nothing of the next head received: idle timer */
    C_HEAD,    /* receiving a head: header timer */
    C_REQ,     /* a request is being served (by the handler or a server error) */
    C_DISCARD, /* skipping the unread body of the previous request */
    C_LINGER,  /* last response written, write side shut: draining input until EOF */
};

enum body_state {
    B_NONE,    /* no body declared */
    B_UNREAD,  /* declared, the handler has not asked for it */
    B_READING, /* qr_http_req_read_body in progress */
    B_DONE,    /* read completely */
    B_FAILED,  /* read_body failed; see body_left / chunk for what remains on the wire */
    B_DROPPED, /* the response started while reading: the rest is discarded or the conn closed */
};

struct conn {
    struct qr_http_server *srv;
    struct conn *prev, *next;
    struct bufferevent *bev;
    struct event *timer; /* header, idle or linger timer */
    struct event *kick;  /* deferred work: end of response, abort */
    enum conn_state state;
    struct qr_http_req *req;     /* current request, owned */
    struct qr_http_header *hdrs; /* parser scratch, max_headers entries, owned */
    char peer[64];
    uint64_t head_start_us;
    size_t scanned; /* input bytes already looked at for a complete line */
    uint64_t discard_left;
    size_t linger_bytes;
    bool over_limit;  /* accepted past max_connections: answer 503 after the head */
    bool close_after; /* close once the current response is written */
    bool close_now;   /* the kick closes the connection */
    bool write_armed; /* EV_WRITE enabled: output left over after a direct write */
    bool eof;         /* the client shut its write side */
};

struct qr_http_req {
    struct qr_http_server *srv;
    struct conn *conn;
    char id[25];
    char *mem; /* owned: the head bytes, NUL-terminated pieces; the path copy */
    const char *method, *target, *path, *query;
    struct qr_http_header *headers; /* owned array, slices into mem */
    size_t nheaders;
    int minor;
    bool is_head;
    bool handled; /* given to the handler: counts in in_flight */
    struct qr_http_framing fr;
    uint64_t start_us;
    /* body */
    enum body_state body;
    uint64_t body_left; /* Content-Length bytes still on the wire */
    size_t body_max;
    struct qr_http_chunked chunk;
    struct qr_buf body_buf;
    qr_http_body_fn body_cb;
    void *body_arg;
    bool sent_continue;
    /* response */
    struct qr_buf extra; /* header lines from qr_http_resp_header */
    int status;
    bool started, ended, aborted, logged, chunked_out, no_body, want_drain;
    int64_t out_left; /* Content-Length bytes still to write, -1 when not length-delimited */
    uint64_t bytes_in, bytes_out;
    qr_http_close_fn close_cb;
    void *close_arg;
    qr_http_drain_fn drain_cb;
    void *drain_arg;
};

struct qr_http_server {
    struct event_base *base;
    struct evconnlistener *listener;
    struct event *accept_retry;
    struct qr_http_server_opts opts; /* defaults filled in; host not kept */
    size_t read_high;
    uint16_t port;
    bool accepting;
    unsigned nconns, in_flight;
    struct conn *conns;
};

static void conn_close(struct conn *c);
static void process_input(struct conn *c);
static void go_idle(struct conn *c);

/* --- small helpers --- */

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static struct timeval ms_tv(uint32_t ms)
{
    return (struct timeval){.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
}

static void set_timer(struct conn *c, uint32_t ms)
{
    struct timeval tv = ms_tv(ms);
    evtimer_add(c->timer, &tv);
}

/* Read timeout on the bufferevent only while a body is being read or discarded. */
static void set_read_timeout(struct conn *c, bool on)
{
    struct timeval r = ms_tv(c->srv->opts.read_timeout_ms);
    struct timeval w = ms_tv(c->srv->opts.write_timeout_ms);
    bufferevent_set_timeouts(c->bev, on ? &r : NULL, &w);
}

static const char *reason_phrase(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 206:
        return "Partial Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 499:
        return "Client Closed Request";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

/* 12 bytes from a per-thread pool refilled by getrandom(); a clock-seeded splitmix64 stands in
 * only if the kernel refuses, so an id is never left unset. */
void qr_http_make_request_id(char out[25])
{
    static _Thread_local unsigned char pool[480];
    static _Thread_local size_t avail;
    static const char hex[] = "0123456789abcdef";
    if (avail < 12) {
        size_t got = 0;
        while (got < sizeof(pool)) {
            ssize_t n = getrandom(pool + got, sizeof(pool) - got, 0);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t) n;
        }
        if (got < sizeof(pool)) {
            static _Thread_local uint64_t x;
            x ^= now_us();
            for (size_t i = got; i < sizeof(pool); i++) {
                uint64_t z = (x += 0x9e3779b97f4a7c15u);
                z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
                z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
                pool[i] = (unsigned char) (z ^ (z >> 31));
            }
        }
        avail = sizeof(pool);
    }
    const unsigned char *p = pool + sizeof(pool) - avail;
    for (int i = 0; i < 12; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[24] = '\0';
    avail -= 12;
}

/* --- requests --- */

static struct qr_http_req *req_new(struct conn *c)
{
    struct qr_http_req *req = calloc(1, sizeof(*req));
    if (!req)
        abort();
    req->srv = c->srv;
    req->conn = c;
    qr_http_make_request_id(req->id);
    req->method = req->target = req->path = "";
    req->minor = 1;
    req->start_us = c->head_start_us ? c->head_start_us : now_us();
    req->out_left = -1;
    qr_buf_init(&req->extra, RESP_HEADERS_MAX);
    return req;
}

/* Write the access record (once), release the request, and update the in-flight count. */
static void req_release(struct qr_http_req *req)
{
    struct qr_http_server *s = req->srv;
    if (!req->logged && s->opts.access_fn) {
        req->logged = true;
        struct qr_http_access rec = {
            .request_id = req->id,
            .method = req->method,
            .path = req->path,
            .peer = req->conn ? req->conn->peer : "",
            .status = req->started ? req->status : 0,
            .bytes_in = req->bytes_in,
            .bytes_out = req->bytes_out,
            .duration_us = now_us() - req->start_us,
            .aborted = req->aborted,
        };
        s->opts.access_fn(&rec, s->opts.access_arg);
    }
    if (req->handled)
        s->in_flight--;
    qr_buf_cleanup(&req->body_buf);
    qr_buf_cleanup(&req->extra);
    free(req->headers);
    free(req->mem);
    free(req);
}

/* Whether the connection may stay open after this request's response, given its body; sets
 * *out_discard to the unread body bytes to skip first. */
static bool body_allows_keep(const struct qr_http_req *req, uint64_t *out_discard)
{
    *out_discard = 0;
    switch (req->body) {
    case B_NONE:
    case B_DONE:
        return true;
    case B_READING:
    case B_UNREAD:
    case B_FAILED:
    case B_DROPPED:
        break;
    }
    if (req->fr.chunked)
        return false; /* remaining size unknown */
    if (req->fr.expect_continue && !req->sent_continue)
        return false; /* the client may never send the body it announced */
    if (req->body_left > DISCARD_MAX)
        return false;
    *out_discard = req->body_left;
    return true;
}

/* --- the connection state machine --- */

static void begin_linger(struct conn *c)
{
    if (c->eof) {
        conn_close(c);
        return;
    }
    c->state = C_LINGER;
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
    set_read_timeout(c, false);
    bufferevent_enable(c->bev, EV_READ);
    set_timer(c, LINGER_MS);
    process_input(c);
}

/* The current response is completely written: log, free, and move on. */
static void response_done(struct conn *c)
{
    struct qr_http_req *req = c->req;
    uint64_t discard = 0;
    bool keep =
        !c->close_after && !req->aborted && c->srv->accepting && body_allows_keep(req, &discard);
    bool aborted = req->aborted;
    c->req = NULL;
    req_release(req);
    if (aborted) {
        conn_close(c);
        return;
    }
    if (!keep) {
        begin_linger(c);
        return;
    }
    if (discard) {
        c->state = C_DISCARD;
        c->discard_left = discard;
        set_read_timeout(c, true);
        process_input(c);
        return;
    }
    go_idle(c);
}

static void go_idle(struct conn *c)
{
    c->state = C_IDLE;
    c->scanned = 0;
    c->head_start_us = 0;
    set_read_timeout(c, false);
    bufferevent_enable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) == 0) {
        if (c->eof) {
            conn_close(c);
            return;
        }
        set_timer(c, c->srv->opts.idle_timeout_ms);
        return;
    }
    process_input(c);
}

/* Answer with a server-generated error and close afterwards. req may be NULL (no head yet). */
static void server_error(struct conn *c, struct qr_http_req *req, int status, const char *code,
                         const char *msg)
{
    evtimer_del(c->timer);
    if (!req)
        req = req_new(c);
    c->req = req;
    c->state = C_REQ;
    c->close_after = true;
    qr_http_send_error(req, status, code, msg);
}

static const char *error_code_for(int status)
{
    switch (status) {
    case 431:
        return "request_header_fields_too_large";
    case 501:
        return "not_implemented";
    default:
        return "bad_request";
    }
}

/* Build the request from a complete head at p[0..consumed) and hand it to the handler. */
static void begin_request(struct conn *c, const char *p, size_t consumed,
                          const struct qr_http_head *head)
{
    struct qr_http_req *req = req_new(c);
    size_t tlen = head->target.len;
    req->mem = malloc(consumed + 1 + tlen + 1);
    req->headers = calloc(head->num_headers ? head->num_headers : 1, sizeof(*req->headers));
    if (!req->mem || !req->headers)
        abort();
    char *m = req->mem;
    memcpy(m, p, consumed);
    m[consumed] = '\0';
    /* Rebase every slice into the copy and NUL-terminate it in place: the byte after each piece
     * is a separator (SP, ':', OWS or CR) that nothing else points at. */
#define REBASE(sl) (m + ((sl).ptr - p))
    char *meth = REBASE(head->method), *tgt = REBASE(head->target);
    meth[head->method.len] = '\0';
    tgt[tlen] = '\0';
    req->method = meth;
    req->target = tgt;
    for (size_t i = 0; i < head->num_headers; i++) {
        char *n = REBASE(head->headers[i].name), *v = REBASE(head->headers[i].value);
        n[head->headers[i].name.len] = '\0';
        v[head->headers[i].value.len] = '\0';
        req->headers[i].name = (struct qr_slice){n, head->headers[i].name.len};
        req->headers[i].value = (struct qr_slice){v, head->headers[i].value.len};
    }
#undef REBASE
    req->nheaders = head->num_headers;
    char *path = m + consumed + 1;
    const char *q = memchr(tgt, '?', tlen);
    size_t plen = q ? (size_t) (q - tgt) : tlen;
    memcpy(path, tgt, plen);
    path[plen] = '\0';
    req->path = path;
    req->query = q ? q + 1 : NULL;
    req->minor = head->minor_version;
    req->is_head = strcmp(req->method, "HEAD") == 0;
    evbuffer_drain(bufferevent_get_input(c->bev), consumed);
    c->scanned = 0;

    /* Refusals that need the parsed head: framing, then the connection limit. */
    struct qr_http_head copy = *head;
    copy.headers = req->headers;
    enum qr_http_perr perr = qr_http_head_framing(&copy, &req->fr);
    if (perr) {
        int st = qr_http_perr_status(perr);
        server_error(c, req, st, error_code_for(st), qr_http_perr_str(perr));
        return;
    }
    req->body = (req->fr.chunked || req->fr.content_length) ? B_UNREAD : B_NONE;
    req->body_left = req->fr.content_length;
    qr_http_chunked_init(&req->chunk);
    if (c->over_limit) {
        server_error(c, req, 503, "server_busy", "too many open connections");
        return;
    }

    evtimer_del(c->timer);
    c->req = req;
    c->state = C_REQ;
    req->handled = true;
    c->srv->in_flight++;
    c->srv->opts.handler(req, c->srv->opts.handler_arg);
}

static void try_head(struct conn *c)
{
    struct qr_http_server *s = c->srv;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t len = evbuffer_get_length(in);
    if (len == 0)
        return;
    if (c->state == C_IDLE) {
        c->state = C_HEAD;
        c->head_start_us = now_us();
        set_timer(c, s->opts.header_timeout_ms);
    }
    const char *p = (const char *) evbuffer_pullup(in, -1);
    /* Re-parse only when a line may have ended: the head parser restarts from the beginning. */
    bool line_end = c->scanned == 0 || memchr(p + c->scanned, '\n', len - c->scanned) != NULL;
    c->scanned = len;
    struct qr_http_head head;
    enum qr_http_perr perr = QR_HTTP_PERR_NONE;
    long rc = QR_HTTP_PARSE_NEED_MORE;
    if (line_end)
        rc = qr_http_parse_request(p, len, c->hdrs, s->opts.max_headers, &head, &perr);
    if (rc == QR_HTTP_PARSE_ERROR) {
        int st = qr_http_perr_status(perr);
        server_error(c, NULL, st, error_code_for(st), qr_http_perr_str(perr));
        return;
    }
    if ((rc == QR_HTTP_PARSE_NEED_MORE && len > s->opts.max_header_bytes) ||
        (rc > 0 && (size_t) rc > s->opts.max_header_bytes)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request header section exceeds %zu bytes",
                 s->opts.max_header_bytes);
        server_error(c, NULL, 431, "request_header_fields_too_large", msg);
        return;
    }
    if (rc > 0)
        begin_request(c, p, (size_t) rc, &head);
}

static void body_finish(struct qr_http_req *req, enum qr_err err)
{
    struct conn *c = req->conn;
    qr_http_body_fn cb = req->body_cb;
    req->body_cb = NULL;
    req->body = err ? B_FAILED : B_DONE;
    set_read_timeout(c, false);
    if (err && req->fr.chunked)
        c->close_after = true; /* the rest of the framing is lost */
    if (cb)
        cb(req, err, req->body_arg);
}

/* Move body bytes from the input into the request's buffer. */
static void feed_body(struct qr_http_req *req)
{
    struct evbuffer *in = bufferevent_get_input(req->conn->bev);
    size_t len = evbuffer_get_length(in);
    if (req->body != B_READING || len == 0)
        return;
    if (!req->fr.chunked) {
        size_t take = (uint64_t) len < req->body_left ? len : (size_t) req->body_left;
        enum qr_err err = qr_buf_append(&req->body_buf, evbuffer_pullup(in, (ssize_t) take), take);
        evbuffer_drain(in, take);
        req->body_left -= take;
        req->bytes_in += take;
        if (err || req->body_left == 0)
            body_finish(req, err);
        return;
    }
    const char *p = (const char *) evbuffer_pullup(in, -1);
    size_t off = 0, used;
    struct qr_slice data;
    enum qr_http_chunked_rc rc;
    enum qr_err err = QR_OK;
    do {
        rc = qr_http_chunked_step(&req->chunk, p + off, len - off, &used, &data);
        off += used;
        if (data.len > req->body_max - req->body_buf.len) {
            err = QR_ERR_TOO_LARGE;
            break;
        }
        if (data.len && (err = qr_buf_append(&req->body_buf, data.ptr, data.len)))
            break;
        req->bytes_in += data.len;
    } while (rc == QR_HTTP_CHUNKED_MORE && used > 0 && off < len);
    evbuffer_drain(in, off);
    if (err)
        body_finish(req, err);
    else if (rc == QR_HTTP_CHUNKED_ERROR)
        body_finish(req, QR_ERR_PARSE);
    else if (rc == QR_HTTP_CHUNKED_DONE)
        body_finish(req, QR_OK);
}

static void process_input(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    switch (c->state) {
    case C_IDLE:
    case C_HEAD:
        try_head(c);
        break;
    case C_REQ:
        if (c->req && c->req->body == B_READING)
            feed_body(c->req);
        break;
    case C_DISCARD: {
        size_t len = evbuffer_get_length(in);
        size_t take = (uint64_t) len < c->discard_left ? len : (size_t) c->discard_left;
        evbuffer_drain(in, take);
        c->discard_left -= take;
        if (c->discard_left == 0)
            go_idle(c);
        break;
    }
    case C_LINGER:
        c->linger_bytes += evbuffer_get_length(in);
        evbuffer_drain(in, evbuffer_get_length(in));
        if (c->linger_bytes > LINGER_MAX_BYTES)
            conn_close(c);
        break;
    }
}

/* --- libevent callbacks --- */

static void conn_read_cb(struct bufferevent *bev, void *arg)
{
    process_input(arg);
}

static void conn_write_cb(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    struct qr_http_req *req = c->req;
    size_t out = evbuffer_get_length(bufferevent_get_output(bev));
    if (out == 0 && c->write_armed) {
        bufferevent_disable(bev, EV_WRITE);
        c->write_armed = false;
    }
    if (!req)
        return;
    if (req->ended) {
        if (out == 0)
            response_done(c);
        return;
    }
    if (req->want_drain && out <= c->srv->opts.out_high_water / 2) {
        req->want_drain = false;
        if (req->drain_cb)
            req->drain_cb(req, req->drain_arg);
    }
}

/* Write queued output now, from the kick, once per loop pass: most responses leave in one
 * writev without arming EV_WRITE (which would cost two epoll_ctl and a loop pass per response).
 * Only what the socket does not take at once is left to the bufferevent's write event. */
static void flush_out(struct conn *c)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (c->write_armed || evbuffer_get_length(out) == 0)
        return;
    /* A socket bufferevent keeps its output's start frozen so that only it drains the buffer;
     * it unfreezes around its own writes the same way. A write error is left for the
     * bufferevent to meet again and report through the event callback. */
    evbuffer_unfreeze(out, 1);
    evbuffer_write(out, bufferevent_getfd(c->bev));
    evbuffer_freeze(out, 1);
    if (evbuffer_get_length(out) > 0) {
        c->write_armed = true;
        bufferevent_enable(c->bev, EV_WRITE);
    }
}

static void conn_kick_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    if (c->close_now) {
        conn_close(c);
        return;
    }
    flush_out(c);
    struct qr_http_req *req = c->req;
    size_t out = evbuffer_get_length(bufferevent_get_output(c->bev));
    if (req && req->ended && out == 0) {
        response_done(c);
        return;
    }
    if (req && !req->ended && req->want_drain && out <= c->srv->opts.out_high_water / 2) {
        req->want_drain = false;
        if (req->drain_cb)
            req->drain_cb(req, req->drain_arg);
    }
}

static void conn_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    if (c->state == C_HEAD)
        server_error(c, NULL, 408, "request_timeout", "request header not received in time");
    else if (c->state == C_IDLE || c->state == C_LINGER)
        conn_close(c);
}

static void conn_event_cb(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    struct qr_http_req *req = c->req;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) && c->state == C_REQ && req &&
        req->body == B_READING) {
        /* Body read stalled: the handler loses the request, the client gets a 408. */
        req->body_cb = NULL;
        req->body = B_FAILED;
        c->close_after = true;
        qr_http_close_fn cb = req->close_cb;
        req->close_cb = NULL;
        if (cb)
            cb(req, req->close_arg);
        if (req->handled) {
            req->handled = false;
            c->srv->in_flight--;
        }
        if (!req->started)
            qr_http_send_error(req, 408, "request_timeout", "request body not received in time");
        else if (!req->ended) {
            req->aborted = true;
            c->close_now = true;
            event_active(c->kick, EV_TIMEOUT, 0);
        }
        return;
    }
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
        c->eof = true;
        if (c->state == C_REQ && req && req->ended) {
            /* The response is complete and being written: finish it, then close. */
            c->close_after = true;
            bufferevent_disable(bev, EV_READ);
            return;
        }
    }
    conn_close(c);
}

/* Tear the connection down now. An in-flight request gets its close callback first. */
static void conn_close(struct conn *c)
{
    struct qr_http_server *s = c->srv;
    struct qr_http_req *req = c->req;
    if (req) {
        c->req = NULL;
        if (!req->ended || evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
            req->aborted = true;
        if (!req->ended && req->close_cb) {
            qr_http_close_fn cb = req->close_cb;
            req->close_cb = NULL;
            req->body_cb = NULL;
            req->drain_cb = NULL;
            cb(req, req->close_arg);
        }
        req_release(req);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    event_free(c->timer);
    event_free(c->kick);
    bufferevent_free(c->bev);
    free(c->hdrs);
    free(c);
    s->nconns--;
}

static void format_peer(const struct sockaddr *sa, char *out, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *) sa;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        snprintf(out, n, "%s:%u", ip, ntohs(a->sin_port));
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *) sa;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        snprintf(out, n, "[%s]:%u", ip, ntohs(a->sin6_port));
    } else {
        snprintf(out, n, "unknown");
    }
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
                      void *arg)
{
    struct qr_http_server *s = arg;
    /* Past twice the limit nobody even gets a 503: the fd and memory are the thing to protect. */
    if (!s->accepting || s->nconns >= 2 * s->opts.max_connections + 16) {
        evutil_closesocket(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->srv = s;
    c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(s->base, conn_timer_cb, c);
    c->kick = event_new(s->base, -1, 0, conn_kick_cb, c);
    c->hdrs = calloc(s->opts.max_headers, sizeof(*c->hdrs));
    if (!c->bev || !c->timer || !c->kick || !c->hdrs)
        abort();
    format_peer(sa, c->peer, sizeof(c->peer));
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    c->over_limit = s->nconns > s->opts.max_connections;

    bufferevent_setcb(c->bev, conn_read_cb, conn_write_cb, conn_event_cb, c);
    bufferevent_setwatermark(c->bev, EV_READ, 0, s->read_high);
    bufferevent_setwatermark(c->bev, EV_WRITE, s->opts.out_high_water / 2, 0);
    set_read_timeout(c, false);
    /* EV_WRITE only while output waits (flush_out); new bufferevents start with it enabled */
    bufferevent_disable(c->bev, EV_WRITE);
    bufferevent_enable(c->bev, EV_READ);
    c->state = C_HEAD;
    c->head_start_us = now_us();
    set_timer(c, s->opts.header_timeout_ms);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
    struct qr_http_server *s = arg;
    if (s->accepting && s->listener)
        evconnlistener_enable(s->listener);
}

/* accept() failing (EMFILE, ENFILE, ENOMEM) leaves the listener readable: pause instead of
 * spinning, and try again shortly. */
static void accept_error_cb(struct evconnlistener *l, void *arg)
{
    struct qr_http_server *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    QR_LOG(QR_LOG_WARN, "http accept failed", QR_LF_S("error", evutil_socket_error_to_string(err)));
    evconnlistener_disable(l);
    struct timeval tv = ms_tv(ACCEPT_RETRY_MS);
    evtimer_add(s->accept_retry, &tv);
}

/* --- server --- */

static void fill_defaults(struct qr_http_server_opts *o)
{
    if (!o->max_header_bytes)
        o->max_header_bytes = DEF_MAX_HEADER_BYTES;
    if (!o->max_headers)
        o->max_headers = DEF_MAX_HEADERS;
    if (!o->max_connections)
        o->max_connections = DEF_MAX_CONNECTIONS;
    if (!o->header_timeout_ms)
        o->header_timeout_ms = DEF_HEADER_TIMEOUT_MS;
    if (!o->read_timeout_ms)
        o->read_timeout_ms = DEF_READ_TIMEOUT_MS;
    if (!o->idle_timeout_ms)
        o->idle_timeout_ms = DEF_IDLE_TIMEOUT_MS;
    if (!o->write_timeout_ms)
        o->write_timeout_ms = DEF_WRITE_TIMEOUT_MS;
    if (!o->out_high_water)
        o->out_high_water = DEF_OUT_HIGH_WATER;
}

enum qr_err qr_http_server_new(struct event_base *base, const struct qr_http_server_opts *opts,
                               struct qr_diag *diag, struct qr_http_server **out)
{
    enum qr_err err;
    struct addrinfo *ai = NULL;
    const char *host = opts->host && *opts->host ? opts->host : "127.0.0.1";
    *out = NULL;
    if (!base || !opts->handler)
        return qr_diag_set(diag, QR_ERR_CONFIG, "http server needs an event base and a handler");
    struct qr_http_server *s = calloc(1, sizeof(*s));
    if (!s)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the http server");
    s->base = base;
    s->opts = *opts;
    s->opts.host = NULL;
    fill_defaults(&s->opts);
    s->read_high =
        s->opts.max_header_bytes + 1 > MIN_READ_HIGH ? s->opts.max_header_bytes + 1 : MIN_READ_HIGH;
    s->accepting = true;

    /* A client closing mid-write must cost an EPIPE, not the process (writev raises SIGPIPE). */
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);

    char port[8];
    snprintf(port, sizeof(port), "%u", opts->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    int gai = getaddrinfo(host, port, &hints, &ai);
    if (gai != 0) {
        err = qr_diag_set(diag, QR_ERR_CONFIG, "cannot resolve '%s': %s", host, gai_strerror(gai));
        goto fail;
    }
    s->listener = evconnlistener_new_bind(
        base, accept_cb, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC, 511,
        ai->ai_addr, (int) ai->ai_addrlen);
    if (!s->listener) {
        int e = errno;
        err = qr_diag_set(diag, QR_ERR_IO, "cannot bind '%s:%u': %s", host, opts->port,
                          e == EADDRINUSE ? "address in use" : strerror(e));
        goto fail;
    }
    evconnlistener_set_error_cb(s->listener, accept_error_cb);
    s->accept_retry = evtimer_new(base, accept_retry_cb, s);
    if (!s->accept_retry) {
        err = qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the http server");
        goto fail;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(evconnlistener_get_fd(s->listener), (struct sockaddr *) &ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port
                                                 : ((struct sockaddr_in *) &ss)->sin_port);
    freeaddrinfo(ai);
    *out = s;
    return QR_OK;

fail:
    if (s->listener)
        evconnlistener_free(s->listener);
    if (ai)
        freeaddrinfo(ai);
    free(s);
    return err;
}

uint16_t qr_http_server_port(const struct qr_http_server *s)
{
    return s->port;
}

void qr_http_server_stop_accepting(struct qr_http_server *s)
{
    if (!s->accepting)
        return;
    s->accepting = false;
    /* Close the listening socket, so new connections are refused rather than left queued. */
    evconnlistener_free(s->listener);
    s->listener = NULL;
    evtimer_del(s->accept_retry);
    struct conn *next;
    for (struct conn *c = s->conns; c; c = next) {
        next = c->next;
        if (c->state == C_IDLE || c->state == C_HEAD || c->state == C_DISCARD)
            conn_close(c);
        else
            c->close_after = true;
    }
}

unsigned qr_http_server_in_flight(const struct qr_http_server *s)
{
    return s->in_flight;
}

unsigned qr_http_server_connections(const struct qr_http_server *s)
{
    return s->nconns;
}

void qr_http_server_free(struct qr_http_server *s)
{
    if (!s)
        return;
    s->accepting = false;
    while (s->conns)
        conn_close(s->conns);
    if (s->listener)
        evconnlistener_free(s->listener);
    if (s->accept_retry)
        event_free(s->accept_retry);
    free(s);
}

/* --- request accessors --- */

const char *qr_http_req_id(const struct qr_http_req *req)
{
    return req->id;
}

const char *qr_http_req_method(const struct qr_http_req *req)
{
    return req->method;
}

const char *qr_http_req_path(const struct qr_http_req *req)
{
    return req->path;
}

const char *qr_http_req_query(const struct qr_http_req *req)
{
    return req->query;
}

const char *qr_http_req_target(const struct qr_http_req *req)
{
    return req->target;
}

const char *qr_http_req_peer(const struct qr_http_req *req)
{
    return req->conn ? req->conn->peer : "";
}

int qr_http_req_minor_version(const struct qr_http_req *req)
{
    return req->minor;
}

const char *qr_http_req_header(const struct qr_http_req *req, const char *name)
{
    for (size_t i = 0; i < req->nheaders; i++) {
        if (qr_slice_eq_nocase(req->headers[i].name, name))
            return req->headers[i].value.ptr;
    }
    return NULL;
}

size_t qr_http_req_header_count(const struct qr_http_req *req)
{
    return req->nheaders;
}

const struct qr_http_header *qr_http_req_header_at(const struct qr_http_req *req, size_t i)
{
    return i < req->nheaders ? &req->headers[i] : NULL;
}

int64_t qr_http_req_content_length(const struct qr_http_req *req)
{
    return req->fr.chunked ? -1 : (int64_t) req->fr.content_length;
}

uint64_t qr_http_req_start_us(const struct qr_http_req *req)
{
    return req->start_us;
}

void qr_http_req_read_body(struct qr_http_req *req, size_t max, qr_http_body_fn cb, void *arg)
{
    struct conn *c = req->conn;
    if (req->body == B_NONE) {
        req->body = B_DONE;
        cb(req, QR_OK, arg);
        return;
    }
    if (req->body == B_DONE && !req->started) {
        /* read already (a route looked at it before passing the request on): deliver it again */
        cb(req, req->body_buf.len > max ? QR_ERR_TOO_LARGE : QR_OK, arg);
        return;
    }
    if (req->body == B_FAILED && !req->started && !req->fr.chunked &&
        req->fr.content_length > max) {
        /* refused unread as too large (a route peeked, then passed it on): the same answer */
        cb(req, QR_ERR_TOO_LARGE, arg);
        return;
    }
    if (req->body != B_UNREAD || req->started) {
        cb(req, QR_ERR_INTERNAL, arg);
        return;
    }
    if (!req->fr.chunked && req->fr.content_length > max) {
        req->body = B_FAILED;
        cb(req, QR_ERR_TOO_LARGE, arg);
        return;
    }
    req->body = B_READING;
    req->body_max = max;
    req->body_cb = cb;
    req->body_arg = arg;
    qr_buf_init(&req->body_buf, max ? max : 1);
    struct evbuffer *in = bufferevent_get_input(c->bev);
    if (req->fr.expect_continue && evbuffer_get_length(in) == 0) {
        bufferevent_write(c->bev, "HTTP/1.1 100 Continue\r\n\r\n", 25);
        event_active(c->kick, EV_TIMEOUT, 0);
        req->sent_continue = true;
    } else if (req->fr.expect_continue) {
        req->sent_continue = true; /* the client did not wait; it is sending anyway */
    }
    set_read_timeout(c, true);
    bufferevent_enable(c->bev, EV_READ);
    feed_body(req);
}

struct qr_slice qr_http_req_body(const struct qr_http_req *req)
{
    if (req->body != B_DONE || !req->body_buf.ptr)
        return (struct qr_slice){"", 0};
    return (struct qr_slice){req->body_buf.ptr, req->body_buf.len};
}

void qr_http_req_set_close_cb(struct qr_http_req *req, qr_http_close_fn cb, void *arg)
{
    req->close_cb = cb;
    req->close_arg = arg;
}

/* --- response --- */

static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char) *s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return true;
}

void qr_http_resp_header(struct qr_http_req *req, const char *name, const char *value)
{
    if (req->started || !is_token(name))
        return;
    /* The server owns framing and the request id. */
    if (!strcasecmp(name, "content-length") || !strcasecmp(name, "transfer-encoding") ||
        !strcasecmp(name, "connection") || !strcasecmp(name, "x-quantum-request-id"))
        return;
    for (const char *v = value; *v; v++) {
        unsigned char ch = (unsigned char) *v;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
            return; /* no header injection */
    }
    size_t need = strlen(name) + strlen(value) + 4;
    if (need > req->extra.max - req->extra.len) {
        QR_LOG(QR_LOG_WARN, "http response headers over cap", QR_LF_S("request_id", req->id),
               QR_LF_S("header", name));
        return;
    }
    (void) qr_buf_appendf(&req->extra, "%s: %s\r\n", name, value);
}

void qr_http_resp_start(struct qr_http_req *req, int status, int64_t content_length)
{
    struct conn *c = req->conn;
    if (NEVER(req->started))
        return;
    req->started = true;
    req->status = status;
    bool bodyless = status < 200 || status == 204 || status == 304;
    req->no_body = bodyless || req->is_head;
    req->chunked_out = content_length < 0 && !req->no_body && req->minor >= 1;
    req->out_left = content_length >= 0 && !req->no_body ? content_length : -1;
    if (req->body == B_READING) {
        /* Answered before the body was read: the rest is skipped (or the connection closed). */
        req->body = B_DROPPED;
        req->body_cb = NULL;
        set_read_timeout(c, false);
    }
    uint64_t discard;
    bool keep = req->fr.keep_alive && !c->close_after && c->srv->accepting &&
                body_allows_keep(req, &discard);
    if (content_length < 0 && !req->no_body && req->minor == 0)
        keep = false; /* close-delimited body */
    c->close_after = !keep;

    struct evbuffer *out = bufferevent_get_output(c->bev);
    evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, reason_phrase(status));
    if (req->extra.len)
        evbuffer_add(out, req->extra.ptr, req->extra.len);
    evbuffer_add_printf(out, "X-Quantum-Request-ID: %s\r\n", req->id);
    if (!bodyless && content_length >= 0)
        evbuffer_add_printf(out, "Content-Length: %" PRId64 "\r\n", content_length);
    else if (!bodyless && req->minor >= 1)
        evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
    if (!keep)
        evbuffer_add(out, "Connection: close\r\n", 19);
    else if (req->minor == 0)
        evbuffer_add(out, "Connection: keep-alive\r\n", 24);
    evbuffer_add(out, "\r\n", 2);
    qr_buf_cleanup(&req->extra);
    event_active(c->kick, EV_TIMEOUT, 0); /* the head leaves even before any body */
}

bool qr_http_resp_write(struct qr_http_req *req, const void *data, size_t len)
{
    struct conn *c = req->conn;
    if (NEVER(!req->started || req->ended))
        return false;
    struct evbuffer *out = bufferevent_get_output(c->bev);
    if (!req->no_body && len > 0) {
        if (req->out_left >= 0 && (uint64_t) len > (uint64_t) req->out_left) {
            QR_LOG(QR_LOG_WARN, "http response longer than its content-length",
                   QR_LF_S("request_id", req->id));
            len = (size_t) req->out_left;
        }
        if (req->chunked_out) { /* the chunk-size line, "%zx\r\n" without printf per chunk */
            char hex[2 * sizeof(size_t) + 2], *p = hex + sizeof(hex);
            size_t v = len;
            *--p = '\n';
            *--p = '\r';
            do {
                *--p = "0123456789abcdef"[v & 15];
                v >>= 4;
            } while (v);
            evbuffer_add(out, p, (size_t) (hex + sizeof(hex) - p));
        }
        evbuffer_add(out, data, len);
        if (req->chunked_out)
            evbuffer_add(out, "\r\n", 2);
        if (req->out_left >= 0)
            req->out_left -= (int64_t) len;
        req->bytes_out += len;
    }
    bool room = evbuffer_get_length(out) <= c->srv->opts.out_high_water;
    if (!room)
        req->want_drain = true;
    event_active(c->kick, EV_TIMEOUT, 0);
    return room;
}

void qr_http_resp_set_drain_cb(struct qr_http_req *req, qr_http_drain_fn cb, void *arg)
{
    req->drain_cb = cb;
    req->drain_arg = arg;
}

void qr_http_resp_end(struct qr_http_req *req)
{
    struct conn *c = req->conn;
    if (NEVER(!req->started || req->ended))
        return;
    req->ended = true;
    req->drain_cb = NULL;
    if (req->chunked_out)
        bufferevent_write(c->bev, "0\r\n\r\n", 5);
    if (req->out_left > 0) {
        /* Fewer bytes than announced: the client must not take this as a complete body. */
        req->aborted = true;
        c->close_after = true;
    }
    event_active(c->kick, EV_TIMEOUT, 0);
}

void qr_http_resp_abort(struct qr_http_req *req)
{
    struct conn *c = req->conn;
    if (req->ended)
        return;
    req->ended = true;
    req->aborted = true;
    req->close_cb = NULL;
    req->drain_cb = NULL;
    req->body_cb = NULL;
    /* What was already queued still goes out (the client sees the stream so far); then the
     * connection closes without a terminating chunk. The write timeout bounds a stuck client. */
    c->close_after = true;
    event_active(c->kick, EV_TIMEOUT, 0);
}

void qr_http_resp_send(struct qr_http_req *req, int status, const char *content_type,
                       const void *body, size_t len)
{
    if (content_type)
        qr_http_resp_header(req, "Content-Type", content_type);
    qr_http_resp_start(req, status, (int64_t) len);
    if (len)
        qr_http_resp_write(req, body, len);
    qr_http_resp_end(req);
}

bool qr_http_resp_started(const struct qr_http_req *req)
{
    return req->started;
}

void qr_http_send_error(struct qr_http_req *req, int status, const char *code, const char *message)
{
    if (req->started) {
        /* Too late for an error response: cut the one in progress so it cannot look whole. */
        qr_http_resp_abort(req);
        return;
    }
    struct qr_buf b;
    qr_buf_init(&b, 0);
    code = code ? code : "";
    message = message ? message : "";
    enum qr_err err = qr_buf_puts(&b, "{\"error\":{\"code\":\"");
    if (!err)
        err = qr_buf_append_json_str(&b, code, strlen(code));
    if (!err)
        err = qr_buf_puts(&b, "\",\"message\":\"");
    if (!err)
        err = qr_buf_append_json_str(&b, message, strlen(message));
    if (!err)
        err = qr_buf_appendf(&b, "\",\"request_id\":\"%s\"}}\n", req->id);
    if (err)
        abort(); /* a few hundred bytes: out of memory here is not recoverable */
    qr_http_resp_header(req, "Cache-Control", "no-store");
    qr_http_resp_header(req, "X-Content-Type-Options", "nosniff");
    qr_http_resp_send(req, status, "application/json; charset=utf-8", b.ptr, b.len);
    qr_buf_cleanup(&b);
}
