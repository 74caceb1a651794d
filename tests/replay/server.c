/* The HTTP/1.1 side of qr-replay: a libevent listener, a minimal request parser (request line,
 * headers, Content-Length or chunked body, pipelining, keep-alive) and a player that writes the
 * matching exchange's status line, headers and chunks on timers, with the scripted faults. It
 * never sleeps, so stalled or slow exchanges do not hold up other connections. It deliberately
 * shares no code with the Runtime's own HTTP server, which is what it is used to test. */
#include "replay.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#define CHUNK_LINE_MAX    1024u
#define LINGER_MS         2000u
#define PENDING_INPUT_MAX (1024u * 1024u) /* unread input kept while a response plays */

enum conn_state {
    ST_HEAD,        /* waiting for a complete request head */
    ST_BODY_LENGTH, /* reading a Content-Length body */
    ST_CHUNK_SIZE,  /* chunked body: size line */
    ST_CHUNK_DATA,  /* chunked body: data */
    ST_CHUNK_CRLF,  /* chunked body: CRLF after data */
    ST_TRAILER,     /* chunked body: trailer lines up to the empty one */
    ST_RESPOND,     /* request complete, response playing */
    ST_LINGER,      /* closing: flush, half-close, drain input until EOF or timeout */
};

enum phase { PH_STALL, PH_HEAD, PH_CHUNKS, PH_END, PH_STALLED };

enum timer_use { T_NONE, T_ADVANCE, T_NEXT, T_LINGER };

struct conn {
    struct qr_replay_server *srv;
    struct bufferevent *bev;
    struct event *timer;
    enum timer_use timer_use;
    struct conn *prev, *next;
    enum conn_state st;
    bool peer_eof;
    bool shut; /* SHUT_WR done */

    /* the request being read */
    char *head; /* owned copy of the head; req slices point into it */
    struct qr_slice (*hdrs)[2];
    struct qr_replay_request req;
    struct qr_buf body;
    uint64_t body_left;
    size_t trailer_bytes;
    bool keep_alive;

    /* the response being played */
    struct qr_replay_exchange *ex;
    enum phase ph;
    size_t chunk_i;
    bool waited;
    bool head_only;   /* HEAD request or a status without a body */
    bool close_after; /* close the connection once the response is written */
};

struct qr_replay_server {
    struct event_base *base;
    struct evconnlistener *lis;
    struct event *sig_term, *sig_int;
    struct qr_replay_set *set;
    struct qr_replay_log *log;
    struct conn *conns;
};

static void process_input(struct conn *c);

/* ---- connection lifecycle ---------------------------------------------------------------- */

static void request_reset(struct conn *c)
{
    free(c->head);
    c->head = NULL;
    memset(&c->req, 0, sizeof(c->req));
    qr_buf_cleanup(&c->body);
    c->body_left = 0;
    c->trailer_bytes = 0;
    c->keep_alive = false;
    c->ex = NULL;
    c->ph = PH_STALL;
    c->chunk_i = 0;
    c->waited = false;
    c->head_only = false;
    c->close_after = false;
}

static void conn_free(struct conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        c->srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    request_reset(c);
    event_free(c->timer);
    bufferevent_free(c->bev);
    free(c->hdrs);
    free(c);
}

static void arm(struct conn *c, enum timer_use use, unsigned ms)
{
    struct timeval tv = {(time_t) (ms / 1000), (suseconds_t) (ms % 1000) * 1000};
    c->timer_use = use;
    evtimer_add(c->timer, &tv);
}

static void do_shutdown(struct conn *c)
{
    c->shut = true;
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    if (!c->peer_eof)
        bufferevent_enable(c->bev, EV_READ);
    arm(c, T_LINGER, c->peer_eof ? 0 : LINGER_MS);
}

/* Close gracefully: flush what is queued, send FIN, read until the peer closes (so unread input
 * does not turn the close into a reset that could destroy data the client has not read yet).
 * Never frees synchronously. */
static void begin_close(struct conn *c)
{
    if (c->st == ST_LINGER)
        return;
    c->st = ST_LINGER;
    evtimer_del(c->timer);
    c->timer_use = T_NONE;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
        do_shutdown(c);
}

/* The response is completely queued: close, or go back to reading the next request. */
static void finish_response(struct conn *c)
{
    bool input_left = evbuffer_get_length(bufferevent_get_input(c->bev)) > 0;
    if (c->close_after || !c->keep_alive || (c->peer_eof && !input_left)) {
        begin_close(c);
        return;
    }
    request_reset(c);
    c->st = ST_HEAD;
    arm(c, T_NEXT, 0); /* pipelined input, without recursing */
}

/* ---- writing ----------------------------------------------------------------------------- */

static void out_printf(struct conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void out_printf(struct conn *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    evbuffer_add_vprintf(bufferevent_get_output(c->bev), fmt, ap);
    va_end(ap);
}

static void out_write(struct conn *c, const char *p, size_t n)
{
    if (n)
        bufferevent_write(c->bev, p, n);
}

/* A complete response generated by the replay server itself (errors, control endpoints). */
static void send_simple(struct conn *c, int status, const char *body, size_t len, bool close)
{
    if (close)
        c->close_after = true;
    out_printf(c,
               "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n%s\r\n",
               status, qr_replay_reason(status), len,
               c->close_after || !c->keep_alive ? "Connection: close\r\n" : "");
    if (!c->req.method.len || !qr_slice_eq(c->req.method, "HEAD"))
        out_write(c, body, len);
    finish_response(c);
}

/* Answer {"replay_error": msg} and log msg on stderr. */
static void send_error(struct conn *c, int status, bool close, const char *msg)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    qr_buf_puts(&b, "{\"replay_error\":\"");
    qr_buf_append_json_str(&b, msg, strlen(msg));
    qr_buf_puts(&b, "\"}");
    if (!b.ptr)
        abort();
    fprintf(stderr, "qr-replay: %d %s\n", status, msg);
    c->st = ST_RESPOND;
    send_simple(c, status, b.ptr, b.len, close);
    qr_buf_cleanup(&b);
}

static bool ex_has_header(const struct qr_replay_exchange *ex, const char *name)
{
    for (size_t i = 0; i < ex->n_headers; i++)
        if (strcasecmp(ex->headers[i].name, name) == 0)
            return true;
    return false;
}

/* True when a comma-separated header value holds token (case-insensitive). */
static bool has_token(struct qr_slice v, const char *token)
{
    size_t n = strlen(token), i = 0;
    while (i < v.len) {
        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t' || v.ptr[i] == ','))
            i++;
        size_t s = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v.ptr[e - 1] == ' ' || v.ptr[e - 1] == '\t'))
            e--;
        if (e - s == n && qr_slice_eq_nocase((struct qr_slice){v.ptr + s, n}, token))
            return true;
    }
    return false;
}

static void write_head(struct conn *c)
{
    const struct qr_replay_exchange *ex = c->ex;
    bool no_body = ex->status < 200 || ex->status == 204 || ex->status == 304;
    out_printf(c, "HTTP/%s %d %s\r\n", ex->http10 ? "1.0" : "1.1", ex->status,
               ex->reason ? ex->reason : qr_replay_reason(ex->status));
    for (size_t i = 0; i < ex->n_headers; i++) {
        out_printf(c, "%s: %s\r\n", ex->headers[i].name, ex->headers[i].value);
        if (strcasecmp(ex->headers[i].name, "Connection") == 0 &&
            has_token(qr_slice_str(ex->headers[i].value), "close"))
            c->close_after = true;
    }
    bool announce_close = c->close_after || !c->keep_alive;
    /* faults and close-delimited bodies close without saying so, as a crashing upstream would */
    if (ex->framing == QR_REPLAY_CLOSE || ex->fault != QR_REPLAY_FAULT_NONE || ex->http10)
        c->close_after = true;
    if (!no_body && ex->framing == QR_REPLAY_CHUNKED && !ex_has_header(ex, "Transfer-Encoding"))
        out_printf(c, "Transfer-Encoding: chunked\r\n");
    if (!no_body && ex->framing == QR_REPLAY_LENGTH && !ex_has_header(ex, "Content-Length")) {
        size_t total = 0;
        for (size_t i = 0; i < ex->n_chunks; i++)
            total += ex->chunks[i].len;
        /* close_mid_body: announce one byte more than will come */
        out_printf(c, "Content-Length: %zu\r\n",
                   total + (ex->fault == QR_REPLAY_FAULT_CLOSE_MID_BODY));
    }
    if (announce_close && !ex_has_header(ex, "Connection"))
        out_printf(c, "Connection: close\r\n");
    out_printf(c, "\r\n");
    if (no_body)
        c->head_only = true;
}

static void write_chunk(struct conn *c, const struct qr_replay_chunk *ch)
{
    if (c->ex->framing != QR_REPLAY_CHUNKED) {
        out_write(c, ch->data, ch->len);
    } else if (ch->len) { /* an empty chunk would read as the end of the body */
        out_printf(c, "%zx\r\n", ch->len);
        out_write(c, ch->data, ch->len);
        out_write(c, "\r\n", 2);
    }
}

static void end_body(struct conn *c)
{
    switch (c->ex->fault) {
    case QR_REPLAY_FAULT_STALL_AFTER_CHUNKS:
        c->ph = PH_STALLED;
        return;
    case QR_REPLAY_FAULT_MALFORMED_CHUNK:
        out_write(c, "zz\r\n", 4);
        begin_close(c);
        return;
    case QR_REPLAY_FAULT_CLOSE_MID_BODY:
        begin_close(c);
        return;
    default:
        if (c->ex->framing == QR_REPLAY_CHUNKED && !c->head_only)
            out_write(c, "0\r\n\r\n", 5);
        finish_response(c);
        return;
    }
}

/* Play the exchange from the current phase until it must wait for a timer or is done. */
static void advance(struct conn *c)
{
    const struct qr_replay_exchange *ex = c->ex;
    for (;;) {
        switch (c->ph) {
        case PH_STALL:
            c->ph = PH_HEAD;
            if (ex->stall_ms && ex->fault != QR_REPLAY_FAULT_STALL_FOREVER) {
                arm(c, T_ADVANCE, ex->stall_ms);
                return;
            }
            break;
        case PH_HEAD:
            if (ex->fault == QR_REPLAY_FAULT_CLOSE_BEFORE_HEADERS) {
                begin_close(c);
                return;
            }
            if (ex->fault == QR_REPLAY_FAULT_STALL_FOREVER) {
                c->ph = PH_STALLED;
                return;
            }
            write_head(c);
            c->ph = PH_CHUNKS;
            break;
        case PH_CHUNKS:
            if (c->head_only || c->chunk_i == ex->n_chunks) {
                c->ph = PH_END;
                break;
            }
            if (ex->chunks[c->chunk_i].delay_ms && !c->waited) {
                c->waited = true;
                arm(c, T_ADVANCE, ex->chunks[c->chunk_i].delay_ms);
                return;
            }
            c->waited = false;
            write_chunk(c, &ex->chunks[c->chunk_i++]);
            break;
        case PH_END:
            end_body(c);
            return;
        case PH_STALLED:
            return;
        }
    }
}

/* ---- control endpoints ------------------------------------------------------------------- */

static void send_exchanges(struct conn *c)
{
    struct qr_replay_set *set = c->srv->set;
    struct qr_buf b;
    qr_buf_init(&b, 0);
    qr_buf_puts(&b, "[");
    for (size_t i = 0; i < set->n; i++) {
        qr_buf_puts(&b, i ? ",\n{\"name\":\"" : "{\"name\":\"");
        qr_buf_append_json_str(&b, set->v[i].name, strlen(set->v[i].name));
        qr_buf_puts(&b, "\",\"source\":\"");
        qr_buf_append_json_str(&b, set->v[i].source, strlen(set->v[i].source));
        qr_buf_appendf(&b, "\",\"served\":%ld,\"times\":%ld}", set->v[i].served, set->v[i].times);
    }
    qr_buf_puts(&b, "]");
    if (!b.ptr)
        abort();
    send_simple(c, 200, b.ptr, b.len, false);
    qr_buf_cleanup(&b);
}

static void handle_control(struct conn *c)
{
    const struct qr_replay_request *r = &c->req;
    bool get = qr_slice_eq(r->method, "GET"), post = qr_slice_eq(r->method, "POST");
    if (get && qr_slice_eq(r->path, "/__replay/requests")) {
        struct qr_buf b;
        qr_buf_init(&b, 0);
        if (qr_replay_log_format(c->srv->log, &b)) {
            send_error(c, 500, false, "cannot render the request log");
            return;
        }
        send_simple(c, 200, b.ptr, b.len, false);
        qr_buf_cleanup(&b);
    } else if (post && qr_slice_eq(r->path, "/__replay/reset")) {
        qr_replay_log_clear(c->srv->log);
        qr_replay_set_reset(c->srv->set);
        send_simple(c, 200, "{\"reset\":true}", 14, false);
    } else if (get && qr_slice_eq(r->path, "/__replay/exchanges")) {
        send_exchanges(c);
    } else {
        char msg[256];
        snprintf(msg, sizeof(msg), "no control endpoint %.*s %.*s", (int) r->method.len,
                 r->method.ptr, (int) (r->path.len > 200 ? 200 : r->path.len), r->path.ptr);
        send_error(c, 404, false, msg);
    }
}

/* ---- request parsing --------------------------------------------------------------------- */

static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool all_tchar(struct qr_slice s)
{
    for (size_t i = 0; i < s.len; i++)
        if (!is_tchar((unsigned char) s.ptr[i]))
            return false;
    return s.len > 0;
}

/* Next CRLF-terminated line of [*p, end); false at the end. */
static bool next_line(char **p, char *end, struct qr_slice *out)
{
    if (*p >= end)
        return false;
    char *q = memmem(*p, (size_t) (end - *p), "\r\n", 2);
    if (!q)
        q = end;
    *out = (struct qr_slice){*p, (size_t) (q - *p)};
    *p = q + 2;
    return true;
}

static const char *parse_request_line(struct conn *c, struct qr_slice line)
{
    const char *sp1 = memchr(line.ptr, ' ', line.len);
    if (!sp1)
        return "malformed request line";
    const char *rest = sp1 + 1, *end = line.ptr + line.len;
    const char *sp2 = memchr(rest, ' ', (size_t) (end - rest));
    if (!sp2)
        return "malformed request line";
    c->req.method = (struct qr_slice){line.ptr, (size_t) (sp1 - line.ptr)};
    struct qr_slice target = {rest, (size_t) (sp2 - rest)};
    c->req.version = (struct qr_slice){sp2 + 1, (size_t) (end - sp2 - 1)};
    if (!all_tchar(c->req.method))
        return "bad method";
    if (!qr_slice_eq(c->req.version, "HTTP/1.1") && !qr_slice_eq(c->req.version, "HTTP/1.0"))
        return "unsupported HTTP version";
    if (!target.len || target.ptr[0] != '/')
        return "request target must be in origin form";
    for (size_t i = 0; i < target.len; i++) {
        unsigned char ch = (unsigned char) target.ptr[i];
        if (ch <= 0x20 || ch == 0x7f)
            return "bad byte in request target";
    }
    const char *q = memchr(target.ptr, '?', target.len);
    c->req.path = (struct qr_slice){target.ptr, q ? (size_t) (q - target.ptr) : target.len};
    c->req.query = q ? (struct qr_slice){q + 1, (size_t) (target.ptr + target.len - q - 1)}
                     : (struct qr_slice){"", 0};
    c->keep_alive = qr_slice_eq(c->req.version, "HTTP/1.1");
    return NULL;
}

static const char *parse_header_line(struct conn *c, struct qr_slice line)
{
    if (line.len && (line.ptr[0] == ' ' || line.ptr[0] == '\t'))
        return "obsolete header line folding";
    const char *colon = memchr(line.ptr, ':', line.len);
    if (!colon)
        return "header line without colon";
    struct qr_slice name = {line.ptr, (size_t) (colon - line.ptr)};
    if (!all_tchar(name))
        return "bad header name";
    const char *v = colon + 1, *e = line.ptr + line.len;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    for (const unsigned char *p = (const unsigned char *) v; p < (const unsigned char *) e; p++)
        if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
            return "control byte in header value";
    if (c->req.n_headers >= QR_REPLAY_HEADERS_MAX)
        return "too many header lines";
    c->hdrs[c->req.n_headers][0] = name;
    c->hdrs[c->req.n_headers][1] = (struct qr_slice){v, (size_t) (e - v)};
    c->req.n_headers++;
    return NULL;
}

/* Parse the body framing headers into c; returns an error text and sets *status, or NULL. */
static const char *parse_framing(struct conn *c, int *status, bool *chunked, bool *expect)
{
    bool has_len = false;
    uint64_t len = 0;
    *chunked = false;
    *expect = false;
    *status = 400;
    for (size_t i = 0; i < c->req.n_headers; i++) {
        struct qr_slice n = c->hdrs[i][0], v = c->hdrs[i][1];
        if (qr_slice_eq_nocase(n, "Content-Length")) {
            uint64_t x = 0;
            if (!v.len || v.len > 19)
                return "bad Content-Length";
            for (size_t k = 0; k < v.len; k++) {
                if (v.ptr[k] < '0' || v.ptr[k] > '9')
                    return "bad Content-Length";
                x = x * 10 + (uint64_t) (v.ptr[k] - '0');
            }
            if (has_len && x != len)
                return "conflicting Content-Length headers";
            has_len = true;
            len = x;
        } else if (qr_slice_eq_nocase(n, "Transfer-Encoding")) {
            if (*chunked || !qr_slice_eq_nocase(v, "chunked")) {
                *status = 501;
                return "unsupported Transfer-Encoding";
            }
            *chunked = true;
        } else if (qr_slice_eq_nocase(n, "Connection")) {
            if (has_token(v, "close"))
                c->keep_alive = false;
            else if (has_token(v, "keep-alive"))
                c->keep_alive = true;
        } else if (qr_slice_eq_nocase(n, "Expect") && qr_slice_eq_nocase(v, "100-continue")) {
            *expect = true;
        }
    }
    if (has_len && *chunked)
        return "both Content-Length and Transfer-Encoding";
    if (len > QR_REPLAY_BODY_MAX) {
        *status = 413;
        return "request body over the 256 MiB cap";
    }
    c->body_left = len;
    return NULL;
}

static void request_complete(struct conn *c);

/* Parse a complete head of n bytes (ending in CRLF CRLF) taken from the input. */
static void handle_head(struct conn *c, size_t n)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    c->head = malloc(n + 1);
    if (!c->head)
        abort();
    evbuffer_remove(in, c->head, n);
    c->head[n] = '\0';
    if (!c->hdrs && !(c->hdrs = calloc(QR_REPLAY_HEADERS_MAX, sizeof(*c->hdrs))))
        abort();
    c->req.headers = c->hdrs;
    if (memchr(c->head, '\0', n)) {
        send_error(c, 400, true, "NUL byte in request head");
        return;
    }
    char *p = c->head, *end = c->head + n - 4;
    struct qr_slice line = {NULL, 0};
    const char *err = NULL;
    next_line(&p, end, &line);
    err =
        memchr(line.ptr, '\n', line.len) ? "bare LF in request head" : parse_request_line(c, line);
    while (!err && next_line(&p, end, &line))
        err = memchr(line.ptr, '\n', line.len) ? "bare LF in request head"
                                               : parse_header_line(c, line);
    int status = 400;
    bool chunked = false, expect = false;
    if (!err)
        err = parse_framing(c, &status, &chunked, &expect);
    if (err) {
        send_error(c, status, true, err);
        return;
    }
    qr_buf_init(&c->body, QR_REPLAY_BODY_MAX);
    if (expect && (chunked || c->body_left))
        out_printf(c, "HTTP/1.1 100 Continue\r\n\r\n");
    c->st = chunked ? ST_CHUNK_SIZE : c->body_left ? ST_BODY_LENGTH : ST_RESPOND;
    if (c->st == ST_RESPOND)
        request_complete(c);
}

/* Step result of the input state machine. */
enum step { STEP_MORE, STEP_WAIT };

static enum step step_head(struct conn *c, struct evbuffer *in)
{
    /* tolerate CRLFs before a request line (RFC 9112 2.2) */
    while (evbuffer_get_length(in) >= 2) {
        const unsigned char *p = evbuffer_pullup(in, 2);
        if (p[0] != '\r' || p[1] != '\n')
            break;
        evbuffer_drain(in, 2);
    }
    struct evbuffer_ptr pos = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (pos.pos < 0) {
        if (evbuffer_get_length(in) > QR_REPLAY_HEAD_MAX) {
            send_error(c, 431, true, "request head over the 64 KiB cap");
            return STEP_WAIT;
        }
        if (c->peer_eof)
            begin_close(c);
        return STEP_WAIT;
    }
    if ((size_t) pos.pos + 4 > QR_REPLAY_HEAD_MAX) {
        send_error(c, 431, true, "request head over the 64 KiB cap");
        return STEP_WAIT;
    }
    handle_head(c, (size_t) pos.pos + 4);
    return STEP_MORE;
}

/* Move up to body_left bytes of input into the body. */
static enum step take_body(struct conn *c, struct evbuffer *in)
{
    size_t avail = evbuffer_get_length(in);
    size_t n = avail < c->body_left ? avail : (size_t) c->body_left;
    if (!n)
        return STEP_WAIT;
    enum qr_err err = qr_buf_append(&c->body, evbuffer_pullup(in, (ssize_t) n), n);
    evbuffer_drain(in, n);
    c->body_left -= n;
    if (err) {
        send_error(c, 413, true, "request body over the 256 MiB cap");
        return STEP_WAIT;
    }
    return STEP_MORE;
}

/* Take one CRLF-terminated line of at most CHUNK_LINE_MAX bytes; 1 = got it, 0 = need more,
 * -1 = error (already answered). */
static int take_line(struct conn *c, struct evbuffer *in, char *out, size_t *out_len)
{
    size_t eol_len = 0;
    struct evbuffer_ptr pos = evbuffer_search_eol(in, NULL, &eol_len, EVBUFFER_EOL_CRLF_STRICT);
    if (pos.pos < 0) {
        if (evbuffer_get_length(in) <= CHUNK_LINE_MAX)
            return 0;
        send_error(c, 400, true, "chunk size or trailer line too long");
        return -1;
    }
    if ((size_t) pos.pos > CHUNK_LINE_MAX) {
        send_error(c, 400, true, "chunk size or trailer line too long");
        return -1;
    }
    evbuffer_remove(in, out, (size_t) pos.pos);
    out[pos.pos] = '\0';
    evbuffer_drain(in, eol_len);
    *out_len = (size_t) pos.pos;
    return 1;
}

static enum step step_chunk_size(struct conn *c, struct evbuffer *in)
{
    char line[CHUNK_LINE_MAX + 1];
    size_t n = 0;
    int r = take_line(c, in, line, &n);
    if (r <= 0)
        return STEP_WAIT;
    uint64_t size = 0;
    size_t i = 0;
    for (; i < n && i < 16; i++) {
        char ch = line[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0)
            break;
        size = size * 16 + (uint64_t) d;
    }
    if (!i || (i < n && line[i] != ';' && line[i] != ' ' && line[i] != '\t')) {
        send_error(c, 400, true, "bad chunk size line");
        return STEP_WAIT;
    }
    if (size > QR_REPLAY_BODY_MAX - c->body.len) {
        send_error(c, 413, true, "request body over the 256 MiB cap");
        return STEP_WAIT;
    }
    c->body_left = size;
    c->st = size ? ST_CHUNK_DATA : ST_TRAILER;
    return STEP_MORE;
}

static enum step step_trailer(struct conn *c, struct evbuffer *in)
{
    char line[CHUNK_LINE_MAX + 1];
    size_t n = 0;
    int r = take_line(c, in, line, &n);
    if (r <= 0)
        return STEP_WAIT;
    c->trailer_bytes += n + 2;
    if (c->trailer_bytes > QR_REPLAY_HEAD_MAX) {
        send_error(c, 431, true, "request trailers over the 64 KiB cap");
        return STEP_WAIT;
    }
    if (n == 0) {
        c->st = ST_RESPOND;
        request_complete(c);
    }
    return STEP_MORE;
}

/* Run the input state machine as far as the buffered input allows. */
static void process_input(struct conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    enum step s = STEP_MORE;
    while (s == STEP_MORE) {
        switch (c->st) {
        case ST_HEAD:
            s = step_head(c, in);
            break;
        case ST_BODY_LENGTH:
            s = take_body(c, in);
            if (s == STEP_MORE && !c->body_left) {
                c->st = ST_RESPOND;
                request_complete(c);
            }
            break;
        case ST_CHUNK_SIZE:
            s = step_chunk_size(c, in);
            break;
        case ST_CHUNK_DATA:
            s = take_body(c, in);
            if (s == STEP_MORE && !c->body_left)
                c->st = ST_CHUNK_CRLF;
            break;
        case ST_CHUNK_CRLF:
            if (evbuffer_get_length(in) < 2) {
                s = STEP_WAIT;
            } else if (memcmp(evbuffer_pullup(in, 2), "\r\n", 2) != 0) {
                send_error(c, 400, true, "missing CRLF after chunk data");
                s = STEP_WAIT;
            } else {
                evbuffer_drain(in, 2);
                c->st = ST_CHUNK_SIZE;
            }
            break;
        case ST_TRAILER:
            s = step_trailer(c, in);
            break;
        case ST_RESPOND:
            /* a pipelined request waits until this response is done */
            if (evbuffer_get_length(in) > PENDING_INPUT_MAX) {
                c->close_after = true;
                bufferevent_disable(c->bev, EV_READ);
            }
            s = STEP_WAIT;
            break;
        case ST_LINGER:
            evbuffer_drain(in, evbuffer_get_length(in));
            s = STEP_WAIT;
            break;
        }
        if (s == STEP_MORE && c->st == ST_RESPOND)
            s = STEP_WAIT;
    }
}

/* The request is complete: record it and start answering. */
static void request_complete(struct conn *c)
{
    struct qr_replay_request *r = &c->req;
    r->body = (struct qr_slice){c->body.ptr ? c->body.ptr : "", c->body.len};
    if (r->path.len >= 10 && memcmp(r->path.ptr, "/__replay/", 10) == 0) {
        handle_control(c);
        return;
    }
    struct qr_replay_exchange *ex = qr_replay_set_find(c->srv->set, r->method, r->path, r->body);
    if (qr_replay_log_add(c->srv->log, r, ex ? ex->name : NULL))
        fprintf(stderr, "qr-replay: request log full or out of memory; request not recorded\n");
    if (!ex) {
        char msg[320];
        snprintf(msg, sizeof(msg), "no exchange matches %.*s %.*s", (int) r->method.len,
                 r->method.ptr, (int) (r->path.len > 256 ? 256 : r->path.len), r->path.ptr);
        send_error(c, 404, false, msg);
        return;
    }
    ex->served++;
    c->ex = ex;
    c->ph = PH_STALL;
    c->head_only = qr_slice_eq(r->method, "HEAD");
    advance(c);
}

/* ---- libevent callbacks ------------------------------------------------------------------ */

static void on_read(struct bufferevent *bev, void *arg)
{
    process_input(arg);
}

static void on_write(struct bufferevent *bev, void *arg)
{
    struct conn *c = arg;
    if (c->st == ST_LINGER && !c->shut)
        do_shutdown(c);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    struct conn *c = arg;
    if (what & BEV_EVENT_ERROR) {
        conn_free(c);
        return;
    }
    if (!(what & BEV_EVENT_EOF))
        return;
    c->peer_eof = true;
    switch (c->st) {
    case ST_RESPOND:
        /* a half-closed client may still read the answer; a stalled one is gone */
        if (c->ph == PH_STALLED)
            conn_free(c);
        return;
    case ST_LINGER:
        if (c->shut)
            conn_free(c);
        return;
    case ST_HEAD:
        if (evbuffer_get_length(bufferevent_get_input(bev)) == 0) {
            conn_free(c);
            return;
        }
        process_input(c); /* a final request without more data coming */
        return;
    default: /* EOF inside a request body */
        conn_free(c);
        return;
    }
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct conn *c = arg;
    enum timer_use use = c->timer_use;
    c->timer_use = T_NONE;
    switch (use) {
    case T_ADVANCE:
        if (c->st == ST_RESPOND)
            advance(c);
        break;
    case T_NEXT:
        if (c->st == ST_HEAD)
            process_input(c);
        break;
    case T_LINGER:
        conn_free(c);
        break;
    case T_NONE:
        break;
    }
}

static void on_accept(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                      int salen, void *arg)
{
    struct qr_replay_server *srv = arg;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)); /* chunks leave when written */
    struct conn *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->srv = srv;
    c->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(srv->base, on_timer, c);
    if (!c->bev || !c->timer)
        abort();
    qr_buf_init(&c->body, QR_REPLAY_BODY_MAX);
    c->st = ST_HEAD;
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void on_accept_error(struct evconnlistener *lis, void *arg)
{
    int e = EVUTIL_SOCKET_ERROR();
    fprintf(stderr, "qr-replay: accept failed: %s\n", evutil_socket_error_to_string(e));
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct qr_replay_server *srv = arg;
    event_base_loopbreak(srv->base);
}

/* ---- server ------------------------------------------------------------------------------ */

/* "a.b.c.d:port" or "[v6]:port"; port 0 means any (libevent's parser refuses 0). */
static int parse_addr(const char *s, struct sockaddr_storage *ss, int *len)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t) (colon - s) >= sizeof(host))
        return -1;
    memcpy(host, s, (size_t) (colon - s));
    host[colon - s] = '\0';
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || !colon[1] || *end || port < 0 || port > 65535)
        return -1;
    memset(ss, 0, sizeof(*ss));
    size_t hl = strlen(host);
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *) ss;
        host[hl - 1] = '\0';
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t) port);
        *len = (int) sizeof(*a);
        return evutil_inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : -1;
    }
    struct sockaddr_in *a = (struct sockaddr_in *) ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t) port);
    *len = (int) sizeof(*a);
    return evutil_inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

enum qr_err qr_replay_server_new(struct qr_replay_set *set, struct qr_replay_log *log,
                                 const char *listen_addr, struct qr_replay_server **out,
                                 int *out_port, struct qr_diag *diag)
{
    struct sockaddr_storage ss;
    int sslen = 0;
    if (parse_addr(listen_addr, &ss, &sslen) != 0)
        return qr_diag_set(diag, QR_ERR_CONFIG, "cannot parse listen address '%s'", listen_addr);

    struct qr_replay_server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        abort();
    srv->set = set;
    srv->log = log;
    enum qr_err err = QR_OK;
    if (!(srv->base = event_base_new())) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot create the event base");
        goto fail;
    }
    srv->lis = evconnlistener_new_bind(srv->base, on_accept, srv,
                                       LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 128,
                                       (struct sockaddr *) &ss, sslen);
    if (!srv->lis) {
        err =
            qr_diag_set(diag, QR_ERR_IO, "cannot listen on '%s': %s", listen_addr, strerror(errno));
        goto fail;
    }
    evconnlistener_set_error_cb(srv->lis, on_accept_error);
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (getsockname(evconnlistener_get_fd(srv->lis), (struct sockaddr *) &bound, &blen) != 0) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot read the bound port: %s", strerror(errno));
        goto fail;
    }
    *out_port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *) &bound)->sin6_port)
                                            : ntohs(((struct sockaddr_in *) &bound)->sin_port);
    srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
    srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
    if (!srv->sig_term || !srv->sig_int || evsignal_add(srv->sig_term, NULL) ||
        evsignal_add(srv->sig_int, NULL)) {
        err = qr_diag_set(diag, QR_ERR_IO, "cannot install signal handlers");
        goto fail;
    }
    *out = srv;
    return QR_OK;
fail:
    qr_replay_server_free(srv);
    return err;
}

enum qr_err qr_replay_server_run(struct qr_replay_server *srv)
{
    return event_base_dispatch(srv->base) < 0 ? QR_ERR_IO : QR_OK;
}

void qr_replay_server_free(struct qr_replay_server *srv)
{
    if (!srv)
        return;
    while (srv->conns)
        conn_free(srv->conns);
    if (srv->sig_term)
        event_free(srv->sig_term);
    if (srv->sig_int)
        event_free(srv->sig_int);
    if (srv->lis)
        evconnlistener_free(srv->lis);
    if (srv->base)
        event_base_free(srv->base);
    free(srv);
}
