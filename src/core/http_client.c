/* Upstream HTTP client: libcurl's multi-socket API driven by the daemon's libevent loop (the
 * "hiper" pattern). curl tells us which sockets to watch (socket callback -> one struct event per
 * socket) and when to wake it (timer callback -> one timer event); our events hand readiness back
 * through curl_multi_socket_action, after which finished transfers are collected with
 * curl_multi_info_read. Every exchange is one easy handle in the shared multi handle, so idle
 * connections are pooled and reused. Three rules keep the callbacks safe: nothing is freed while
 * curl or a user callback is on the stack (cancel marks the call, the outermost event callback
 * reaps it); curl is never re-entered from its own callbacks (handles are added and resumed from a
 * per-call "kick" event); and on_done only ever runs from the event loop. curl's types and codes
 * stay inside this file: callers see qr_err values and diag text with credentials removed.
 *
 * Plain http:// calls go to the native client (http_native.c) instead, which costs a fraction of
 * libcurl per request; https:// (and URLs the native client does not take) stay here.
 * qr_http_client_set_curl_only (configuration key http_client=curl) sends every call through
 * libcurl, for A/B measurements and as a fallback. */
#include "core/http_client.h"
#include "core/http_native.h"

#include <ctype.h>
#include <curl/curl.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HC_MAX_HEADER_BYTES (1024 * 1024) /* all response header lines of one call */
#define HC_MAX_HEADERS      4096          /* header fields of the final response */
#define HC_MAX_CONNECTS     32L           /* idle connections kept in the pool */
#define HC_SPARE_EASY       16            /* easy handles kept for reuse */
#define HC_MAX_METHOD       32

enum call_state {
    CALL_PENDING, /* easy handle built, not yet in the multi handle (kick event pending) */
    CALL_ACTIVE,  /* in the multi handle */
    CALL_DONE     /* finished; on_done running or about to */
};

/* One response header field, as offsets into the call's header buffer (which may move). */
struct hdr_ent {
    size_t name_off, name_len;
    size_t value_off, value_len;
};

/* One socket curl asked us to watch. */
struct sock {
    struct sock *next, *prev;
    struct event ev;
    bool added;
};

struct qr_http_call {
    enum qr_http_impl impl; /* QR_HTTP_IMPL_CURL; must stay first (see http_native.h) */
    struct qr_http_client *client;
    struct qr_http_call *next, *prev;
    CURL *easy;
    struct curl_slist *req_headers;
    struct event *kick; /* deferred add_handle and resume */
    char *safe_url;     /* the URL without userinfo, query or fragment, for diag text */
    enum call_state state;
    bool in_multi;
    bool cancelled;     /* no callback may run any more; reaped at depth 0 */
    bool in_done;       /* on_done is running: cancel is a no-op */
    bool paused;        /* the consumer asked for a pause */
    bool curl_paused;   /* curl knows it is paused (returned PAUSE or curl_easy_pause) */
    bool want_resume;   /* kick must unpause curl */
    bool in_head;       /* between a status line and the blank line ending its header section */
    bool headers_done;  /* the final (non-1xx) header section is complete */
    bool response_sent; /* on_response has run (or was due and skipped) */
    int status;
    enum qr_err fail_err; /* set when we made curl abort: the real reason */
    /* Phase bounds curl has no option for (first body byte, idle gap), on our own timer. */
    struct event *ptimer; /* NULL when neither bound is set */
    uint32_t connect_timeout_ms;
    uint64_t timeout_ms;
    uint64_t first_byte_timeout_ms; /* request sent -> first body byte; 0 = none */
    uint64_t idle_timeout_ms;       /* gap between body chunks; 0 = none */
    uint64_t sent_ms;               /* monotonic ms the request went out; 0 = not yet */
    uint64_t last_body_ms;          /* monotonic ms of the last body chunk (or resume) */
    bool body_seen;                 /* a response body byte has arrived */
    size_t header_total;            /* raw header bytes seen, against HC_MAX_HEADER_BYTES */
    struct qr_buf hbuf;             /* names and values of the current header section */
    struct hdr_ent *hdrs;
    size_t n_hdrs, cap_hdrs;
    qr_http_call_response_fn on_response;
    qr_http_call_data_fn on_data;
    qr_http_call_done_fn on_done;
    void *arg;
    struct qr_diag diag;
    char errbuf[CURL_ERROR_SIZE];
};

struct qr_http_client {
    struct event_base *base;
    CURLM *multi;
    struct event *timer;
    struct qr_http_call *calls;
    struct sock *socks;
    unsigned depth; /* our event callbacks on the stack; frees wait for 0 */
    bool need_reap;
    CURL *spare[HC_SPARE_EASY]; /* reset easy handles kept for reuse: curl_easy_init is costly */
    unsigned n_spare;
    struct qr_http_native *native; /* plain http:// calls */
    bool curl_only;                /* qr_http_client_set_curl_only: every call through libcurl */
};

/* --- process-wide init ------------------------------------------------------------------------ */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* --- small helpers ---------------------------------------------------------------------------- */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static bool is_ows(char ch)
{
    return ch == ' ' || ch == '\t';
}

static struct qr_slice trim(const char *p, size_t n)
{
    while (n && is_ows(*p)) {
        p++;
        n--;
    }
    while (n && (is_ows(p[n - 1]) || p[n - 1] == '\r' || p[n - 1] == '\n'))
        n--;
    return (struct qr_slice){p, n};
}

/* scheme://host[:port]/path of url: userinfo, query and fragment may carry credentials. */
static char *redact_url(const char *url)
{
    const char *sep = strstr(url, "://");
    const char *auth = sep ? sep + 3 : url;
    size_t auth_len = strcspn(auth, "/?#");
    const char *at = memrchr(auth, '@', auth_len);
    const char *host = at ? at + 1 : auth;
    const char *path = auth + auth_len;
    size_t path_len = strcspn(path, "?#");
    struct qr_buf b;

    qr_buf_init(&b, 0);
    if (qr_buf_append(&b, url, (size_t) (auth - url)) != QR_OK ||
        qr_buf_append(&b, host, (size_t) (path - host)) != QR_OK ||
        qr_buf_append(&b, path, path_len) != QR_OK)
        return NULL;
    return qr_buf_take(&b, NULL);
}

static bool is_tchar(unsigned char ch)
{
    return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static enum qr_err check_request(const struct qr_http_call_opts *o, struct qr_diag *diag)
{
    size_t n = strlen(o->method);
    if (n == 0 || n > HC_MAX_METHOD)
        return qr_diag_set(diag, QR_ERR_INVALID, "bad upstream method '%.32s'", o->method);
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char) o->method[i]))
            return qr_diag_set(diag, QR_ERR_INVALID, "bad upstream method '%.32s'", o->method);
    if (o->body.len && !o->body.ptr)
        return qr_diag_set(diag, QR_ERR_INVALID, "upstream request body without bytes");
    if (strncasecmp(o->url, "http://", 7) != 0 && strncasecmp(o->url, "https://", 8) != 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "bad upstream url: not an http(s) url");
    for (size_t i = 0; i < o->n_headers; i++) {
        const struct qr_http_header *h = &o->headers[i];
        bool bad = h->name.len == 0 || (h->value.len && !h->value.ptr);
        for (size_t k = 0; !bad && k < h->name.len; k++)
            bad = !is_tchar((unsigned char) h->name.ptr[k]);
        for (size_t k = 0; !bad && k < h->value.len; k++)
            bad = h->value.ptr[k] == '\r' || h->value.ptr[k] == '\n' || h->value.ptr[k] == '\0';
        if (bad)
            return qr_diag_set(diag, QR_ERR_INVALID, "bad upstream request header '%.*s'",
                               (int) (h->name.len > 64 ? 64 : h->name.len),
                               h->name.ptr ? h->name.ptr : "");
    }
    return QR_OK;
}

/* Record why we made curl abort (first reason wins); curl's own code then means nothing. */
static void set_fail(struct qr_http_call *call, enum qr_err err, const char *what)
{
    if (call->fail_err != QR_OK)
        return;
    call->fail_err = err;
    qr_diag_set(&call->diag, err, "upstream '%s': %s", call->safe_url, what);
}

static void enter(struct qr_http_client *c)
{
    c->depth++;
}

static void call_destroy(struct qr_http_call *call);

/* Leave one of our event callbacks; the outermost one frees what was cancelled meanwhile. */
static void leave(struct qr_http_client *c)
{
    if (--c->depth != 0)
        return;
    while (c->need_reap) {
        c->need_reap = false;
        struct qr_http_call *next;
        for (struct qr_http_call *call = c->calls; call; call = next) {
            next = call->next;
            if (call->cancelled)
                call_destroy(call);
        }
    }
}

/* --- response head ---------------------------------------------------------------------------- */

static void head_reset(struct qr_http_call *call, const char *line, size_t n)
{
    const char *sp = memchr(line, ' ', n);
    int status = -1;
    if (sp) {
        size_t rest = n - (size_t) (sp - line);
        while (rest && *sp == ' ') {
            sp++;
            rest--;
        }
        if (rest >= 3 && isdigit((unsigned char) sp[0]) && isdigit((unsigned char) sp[1]) &&
            isdigit((unsigned char) sp[2]) && (rest == 3 || sp[3] == ' '))
            status = (sp[0] - '0') * 100 + (sp[1] - '0') * 10 + (sp[2] - '0');
    }
    call->status = status;
    call->in_head = true;
    call->headers_done = false;
    call->n_hdrs = 0;
    call->hbuf.len = 0;
}

static enum qr_err head_add(struct qr_http_call *call, const char *line, size_t n)
{
    if (is_ows(line[0])) { /* obsolete line folding: continue the previous value */
        struct qr_slice more = trim(line, n);
        if (call->n_hdrs == 0 || more.len == 0)
            return QR_OK;
        struct hdr_ent *last = &call->hdrs[call->n_hdrs - 1];
        if (qr_buf_append(&call->hbuf, " ", 1) != QR_OK ||
            qr_buf_append(&call->hbuf, more.ptr, more.len) != QR_OK)
            return QR_ERR_NOMEM;
        last->value_len += 1 + more.len;
        return QR_OK;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return QR_OK; /* not a field line: ignored */
    struct qr_slice name = trim(line, (size_t) (colon - line));
    struct qr_slice value = trim(colon + 1, n - (size_t) (colon + 1 - line));
    if (name.len == 0)
        return QR_OK;
    if (call->n_hdrs == HC_MAX_HEADERS)
        return QR_ERR_TOO_LARGE;
    if (call->n_hdrs == call->cap_hdrs) {
        size_t cap = call->cap_hdrs ? call->cap_hdrs * 2 : 16;
        struct hdr_ent *h = realloc(call->hdrs, cap * sizeof(*h));
        if (!h)
            return QR_ERR_NOMEM;
        call->hdrs = h;
        call->cap_hdrs = cap;
    }
    struct hdr_ent *e = &call->hdrs[call->n_hdrs];
    e->name_off = call->hbuf.len;
    e->name_len = name.len;
    e->value_off = call->hbuf.len + name.len;
    e->value_len = value.len;
    if (qr_buf_append(&call->hbuf, name.ptr, name.len) != QR_OK ||
        qr_buf_append(&call->hbuf, value.ptr, value.len) != QR_OK)
        return QR_ERR_NOMEM;
    call->n_hdrs++;
    return QR_OK;
}

/* CURLOPT_HEADERFUNCTION: one line per call, status lines and blank lines included, for every
 * response (1xx interim ones too) and for trailers. Only the final header section is kept. */
static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct qr_http_call *call = ud;
    size_t len = size * nmemb;

    if (call->cancelled || call->fail_err != QR_OK)
        return 0;
    if (call->response_sent)
        return len; /* trailers: not part of the response head */
    if (len > HC_MAX_HEADER_BYTES - call->header_total) {
        set_fail(call, QR_ERR_UPSTREAM, "response header section larger than 1048576 bytes");
        return 0;
    }
    call->header_total += len;
    size_t n = len;
    while (n && (ptr[n - 1] == '\r' || ptr[n - 1] == '\n'))
        n--;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        head_reset(call, ptr, n);
    } else if (n == 0) {
        if (call->in_head && !(call->status >= 100 && call->status < 200))
            call->headers_done = true;
        call->in_head = false;
    } else if (call->in_head) {
        enum qr_err err = head_add(call, ptr, n);
        if (err == QR_ERR_TOO_LARGE)
            set_fail(call, QR_ERR_UPSTREAM, "more than 4096 response header fields");
        else if (err != QR_OK)
            set_fail(call, err, "out of memory for response headers");
        if (err != QR_OK)
            return 0;
    }
    return len;
}

/* Run on_response once. False when the call must stop (callback refused, cancelled, no memory);
 * fail_err then says why unless the call was cancelled. */
static bool deliver_response(struct qr_http_call *call)
{
    struct qr_http_header *h = NULL;
    int status = call->status;

    call->response_sent = true;
    if (!call->on_response)
        return true;
    if (status <= 0) {
        long code = 0;
        curl_easy_getinfo(call->easy, CURLINFO_RESPONSE_CODE, &code);
        status = (int) code;
    }
    if (call->n_hdrs) {
        h = calloc(call->n_hdrs, sizeof(*h));
        if (!h) {
            set_fail(call, QR_ERR_NOMEM, "out of memory for response headers");
            return false;
        }
        for (size_t i = 0; i < call->n_hdrs; i++) {
            const struct hdr_ent *e = &call->hdrs[i];
            h[i].name = (struct qr_slice){call->hbuf.ptr + e->name_off, e->name_len};
            h[i].value = (struct qr_slice){call->hbuf.ptr + e->value_off, e->value_len};
        }
    }
    bool ok = call->on_response(call, status, h, call->n_hdrs, call->arg);
    free(h);
    if (!ok && !call->cancelled)
        set_fail(call, QR_ERR_CANCELLED, "cancelled by the response callback");
    return ok && !call->cancelled;
}

/* --- phase bounds ----------------------------------------------------------------------------- */

/* The first byte and idle deadlines that apply now (0 = none). The time the consumer keeps the call
 * paused counts against neither. */
static uint64_t phase_deadline(const struct qr_http_call *call, enum qr_err *which)
{
    if (call->paused || call->state != CALL_ACTIVE)
        return 0;
    if (!call->body_seen && call->sent_ms && call->first_byte_timeout_ms) {
        *which = QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT;
        return call->sent_ms + call->first_byte_timeout_ms;
    }
    if (call->body_seen && call->idle_timeout_ms) {
        *which = QR_ERR_UPSTREAM_IDLE_TIMEOUT;
        return call->last_body_ms + call->idle_timeout_ms;
    }
    return 0;
}

/* (Re)arm the phase timer for the deadline that applies now. Safe inside curl's callbacks. */
static void phase_arm(struct qr_http_call *call)
{
    enum qr_err which = QR_OK;
    uint64_t at = call->ptimer ? phase_deadline(call, &which) : 0;
    if (!call->ptimer)
        return;
    if (!at) {
        evtimer_del(call->ptimer);
        return;
    }
    uint64_t now = mono_ms();
    uint64_t ms = at > now ? at - now : 0;
    struct timeval tv = {(time_t) (ms / 1000), (suseconds_t) ((ms % 1000) * 1000)};
    evtimer_add(call->ptimer, &tv);
}

/* CURLOPT_PREREQFUNCTION: the connection is up and the request is about to go out. */
static int on_prereq(void *ud, char *primary_ip, char *local_ip, int primary_port, int local_port)
{
    struct qr_http_call *call = ud;
    (void) primary_ip, (void) local_ip, (void) primary_port, (void) local_port;
    call->sent_ms = mono_ms();
    phase_arm(call);
    return CURL_PREREQFUNC_OK;
}

/* --- response body ---------------------------------------------------------------------------- */

/* CURLOPT_WRITEFUNCTION: each body chunk as curl decodes it. A pause asked for inside a callback
 * takes effect here, by handing curl back the chunk with CURL_WRITEFUNC_PAUSE (curl keeps it and
 * delivers it again after the resume); a chunk on_data has seen is always consumed. */
static size_t on_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct qr_http_call *call = ud;
    size_t len = size * nmemb;

    if (call->cancelled || call->fail_err != QR_OK)
        return 0;
    if (!call->paused && !call->response_sent && !deliver_response(call))
        return 0;
    if (len) { /* the first byte bound ends; the idle bound restarts */
        bool first = !call->body_seen;
        call->body_seen = true;
        if (call->ptimer) {
            call->last_body_ms = mono_ms();
            if (first)
                phase_arm(call); /* later, the timer re-arms itself from last_body_ms */
        }
    }
    if (call->paused) {
        call->curl_paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    if (len == 0 || !call->on_data)
        return len;
    bool ok = call->on_data(call, ptr, len, call->arg);
    if (!ok || call->cancelled) {
        if (!call->cancelled)
            set_fail(call, QR_ERR_CANCELLED, "cancelled by the data callback");
        return 0;
    }
    return len;
}

/* --- completion ------------------------------------------------------------------------------- */

static enum qr_err map_result(struct qr_http_call *call, CURLcode res)
{
    if (call->fail_err != QR_OK)
        return call->fail_err;
    if (res == CURLE_OK)
        return QR_OK;

    enum qr_err err = res == CURLE_OPERATION_TIMEDOUT ? QR_ERR_UPSTREAM_TIMEOUT : QR_ERR_UPSTREAM;
    /* No request went out: curl's connect bound fired, unless the whole-exchange one is shorter. */
    if (err == QR_ERR_UPSTREAM_TIMEOUT && !call->sent_ms && call->connect_timeout_ms &&
        (!call->timeout_ms || call->connect_timeout_ms < call->timeout_ms))
        err = QR_ERR_UPSTREAM_CONNECT_TIMEOUT;
    char what[128], detail[CURL_ERROR_SIZE];
    snprintf(what, sizeof(what), "%s", curl_easy_strerror(res));
    what[0] = (char) tolower((unsigned char) what[0]);

    /* curl's error buffer is usually more specific; drop a repeat of the generic text. */
    snprintf(detail, sizeof(detail), "%s", call->errbuf);
    size_t n = strlen(detail), w = strlen(what);
    while (n && isspace((unsigned char) detail[n - 1]))
        detail[--n] = '\0';
    if (n >= w + 2 && strcasecmp(detail + n - w, what) == 0 && detail[n - w - 2] == ':') {
        n -= w + 2;
        detail[n] = '\0';
    }
    detail[0] = (char) tolower((unsigned char) detail[0]);
    if (n == 0 || strcasecmp(detail, what) == 0)
        return qr_diag_set(&call->diag, err, "upstream '%s': %s", call->safe_url, what);
    return qr_diag_set(&call->diag, err, "upstream '%s': %s (%s)", call->safe_url, what, detail);
}

/* Deliver the outcome and free the call. Never runs inside curl (multi_info_read or kick). */
static void finish_call(struct qr_http_call *call, CURLcode res)
{
    struct qr_http_client *c = call->client;
    enum qr_err err = map_result(call, res);

    call->state = CALL_DONE;
    if (err == QR_OK && !call->response_sent && !deliver_response(call))
        err = call->fail_err;
    if (call->cancelled)
        return;           /* reaped by leave() */
    if (call->in_multi) { /* hand the connection back to the pool before on_done */
        curl_multi_remove_handle(c->multi, call->easy);
        call->in_multi = false;
    }
    call->in_done = true;
    if (call->on_done)
        call->on_done(call, err, &call->diag, call->arg);
    call_destroy(call);
}

static void check_done(struct qr_http_client *c)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(c->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURLcode res = msg->data.result;
        char *priv = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        struct qr_http_call *call = (struct qr_http_call *) priv;
        if (call && !call->cancelled && call->state == CALL_ACTIVE)
            finish_call(call, res);
    }
}

/* --- event loop glue -------------------------------------------------------------------------- */

static void drive(struct qr_http_client *c, curl_socket_t fd, int action)
{
    int running = 0;
    enter(c);
    curl_multi_socket_action(c->multi, fd, action, &running);
    check_done(c);
    leave(c);
}

static void on_sock_event(evutil_socket_t fd, short what, void *arg)
{
    int action =
        ((what & EV_READ) ? CURL_CSELECT_IN : 0) | ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    drive(arg, fd, action);
}

static void on_timer_event(evutil_socket_t fd, short what, void *arg)
{
    drive(arg, CURL_SOCKET_TIMEOUT, 0);
}

/* A call's phase timer: fail it if its first byte or idle deadline passed, else re-arm. Runs from
 * the loop, never inside curl, so finishing (which removes the easy handle) is allowed here. */
static void on_phase_timer(evutil_socket_t fd, short what, void *arg)
{
    struct qr_http_call *call = arg;
    struct qr_http_client *c = call->client;
    enum qr_err which = QR_OK;

    enter(c);
    uint64_t at = call->cancelled ? 0 : phase_deadline(call, &which);
    if (at && mono_ms() >= at) {
        char what_txt[160];
        if (which == QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT)
            snprintf(what_txt, sizeof(what_txt),
                     "timeout was reached (no response body within %llu milliseconds of the "
                     "request)",
                     (unsigned long long) call->first_byte_timeout_ms);
        else
            snprintf(what_txt, sizeof(what_txt),
                     "timeout was reached (response body stalled for %llu milliseconds)",
                     (unsigned long long) call->idle_timeout_ms);
        set_fail(call, which, what_txt);
        finish_call(call, CURLE_OPERATION_TIMEDOUT);
    } else if (!call->cancelled) {
        phase_arm(call);
    }
    leave(c);
}

static void sock_free(struct qr_http_client *c, struct sock *s)
{
    if (s->added)
        event_del(&s->ev);
    if (s->prev)
        s->prev->next = s->next;
    else
        c->socks = s->next;
    if (s->next)
        s->next->prev = s->prev;
    free(s);
}

/* CURLMOPT_SOCKETFUNCTION: watch fd for what curl asks, one persistent event per socket. */
static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct qr_http_client *c = userp;
    struct sock *s = socketp;

    if (what == CURL_POLL_REMOVE) {
        if (s)
            sock_free(c, s);
        return 0;
    }
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s)
            abort(); /* a few bytes per connection */
        s->next = c->socks;
        if (c->socks)
            c->socks->prev = s;
        c->socks = s;
        curl_multi_assign(c->multi, fd, s);
    } else if (s->added) {
        event_del(&s->ev);
        s->added = false;
    }
    short kind = EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
                 ((what & CURL_POLL_OUT) ? EV_WRITE : 0);
    if (kind == EV_PERSIST)
        return 0;
    event_assign(&s->ev, c->base, fd, kind, on_sock_event, c);
    s->added = event_add(&s->ev, NULL) == 0;
    return 0;
}

/* CURLMOPT_TIMERFUNCTION: (re)arm or stop the one timer; it fires from the loop, never here. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    struct qr_http_client *c = userp;
    if (timeout_ms < 0) {
        evtimer_del(c->timer);
        return 0;
    }
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    evtimer_add(c->timer, &tv);
    return 0;
}

/* Per-call deferred work: join the multi handle, or unpause. curl may deliver the data it held
 * back from inside curl_easy_pause, so this too runs from the loop with depth raised. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct qr_http_call *call = arg;
    struct qr_http_client *c = call->client;

    enter(c);
    if (call->cancelled || call->state == CALL_DONE)
        goto out;
    if (call->state == CALL_PENDING) {
        CURLMcode mc = curl_multi_add_handle(c->multi, call->easy);
        if (mc != CURLM_OK) {
            set_fail(call, mc == CURLM_OUT_OF_MEMORY ? QR_ERR_NOMEM : QR_ERR_UPSTREAM,
                     curl_multi_strerror(mc));
            call->state = CALL_ACTIVE;
            finish_call(call, CURLE_FAILED_INIT);
            goto out;
        }
        call->in_multi = true;
        call->state = CALL_ACTIVE;
        /* Start the transfer in this loop pass rather than on curl's 0 ms timer in the next:
         * one epoll_wait fewer per request. Callbacks are fine here (depth is raised). */
        int running = 0;
        curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(c);
    } else if (call->want_resume && !call->paused) {
        call->want_resume = false;
        call->curl_paused = false;
        CURLcode rc = curl_easy_pause(call->easy, CURLPAUSE_CONT);
        if (rc != CURLE_OK && !call->cancelled && call->state == CALL_ACTIVE)
            finish_call(call, rc); /* a callback refused the held-back data, or curl failed */
    }
out:
    leave(c);
}

/* --- client ----------------------------------------------------------------------------------- */

enum qr_err qr_http_client_new(struct event_base *base, struct qr_diag *diag,
                               struct qr_http_client **out)
{
    struct qr_http_client *c = NULL;
    enum qr_err err = QR_ERR_NOMEM;

    *out = NULL;
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return qr_diag_set(diag, QR_ERR_INTERNAL, "cannot initialise libcurl: %s",
                           curl_easy_strerror(global_rc));
    c = calloc(1, sizeof(*c));
    if (!c)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the upstream client");
    c->base = base;
    c->multi = curl_multi_init();
    c->timer = evtimer_new(base, on_timer_event, c);
    if (!c->multi || !c->timer) {
        qr_diag_set(diag, QR_ERR_NOMEM, "cannot create the upstream client");
        goto fail;
    }
    if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK ||
        curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, HC_MAX_CONNECTS) != CURLM_OK) {
        err = qr_diag_set(diag, QR_ERR_INTERNAL, "cannot configure the upstream client");
        goto fail;
    }
    if ((err = qr_http_native_new(base, diag, &c->native)) != QR_OK)
        goto fail;
    *out = c;
    return QR_OK;
fail:
    if (c->timer)
        event_free(c->timer);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    free(c);
    return err;
}

void qr_http_client_free(struct qr_http_client *c)
{
    if (!c)
        return;
    if (NEVER(c->depth != 0))
        return; /* freed from inside one of its callbacks: leak rather than crash */
    qr_http_native_free(c->native);
    while (c->calls)
        call_destroy(c->calls);
    curl_multi_cleanup(c->multi); /* closes pooled connections */
    while (c->n_spare)
        curl_easy_cleanup(c->spare[--c->n_spare]);
    while (c->socks)
        sock_free(c, c->socks);
    event_free(c->timer);
    free(c);
}

unsigned qr_http_client_in_flight(const struct qr_http_client *c)
{
    unsigned n = c->native ? qr_http_native_in_flight(c->native) : 0;
    for (const struct qr_http_call *call = c->calls; call; call = call->next)
        n += !call->cancelled && call->state != CALL_DONE;
    return n;
}

/* --- call ------------------------------------------------------------------------------------- */

/* Free everything a call owns; the easy handle must be out of the multi handle. */
static void call_free(struct qr_http_call *call)
{
    struct qr_http_client *c = call->client;
    if (call->easy && c->n_spare < HC_SPARE_EASY) {
        curl_easy_reset(call->easy);
        c->spare[c->n_spare++] = call->easy;
    } else if (call->easy) {
        curl_easy_cleanup(call->easy);
    }
    curl_slist_free_all(call->req_headers);
    if (call->kick)
        event_free(call->kick);
    if (call->ptimer)
        event_free(call->ptimer);
    qr_buf_cleanup(&call->hbuf);
    free(call->hdrs);
    free(call->safe_url);
    free(call);
}

static void call_destroy(struct qr_http_call *call)
{
    struct qr_http_client *c = call->client;
    if (call->in_multi)
        curl_multi_remove_handle(c->multi, call->easy);
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    call_free(call);
}

static bool append_raw(struct qr_http_call *call, const char *line)
{
    struct curl_slist *l = curl_slist_append(call->req_headers, line);
    if (l)
        call->req_headers = l;
    return l != NULL;
}

static enum qr_err build_req_headers(struct qr_http_call *call, const struct qr_http_call_opts *o,
                                     bool has_body)
{
    struct qr_buf line;
    bool has_ctype = false;

    qr_buf_init(&line, 0);
    for (size_t i = 0; i < o->n_headers; i++) {
        const struct qr_http_header *h = &o->headers[i];
        bool empty = h->value.len == 0;
        has_ctype = has_ctype || qr_slice_eq_nocase(h->name, "content-type");
        line.len = 0;
        /* "Name;" is curl's spelling of a header with an empty value ("Name:" removes it). */
        if (qr_buf_append(&line, h->name.ptr, h->name.len) != QR_OK ||
            qr_buf_append(&line, empty ? ";" : ": ", empty ? 1 : 2) != QR_OK ||
            qr_buf_append(&line, h->value.ptr, h->value.len) != QR_OK ||
            !append_raw(call, line.ptr))
            goto fail;
    }
    qr_buf_cleanup(&line);
    /* No 100-continue round trip; no form-urlencoded Content-Type made up by curl. */
    if (!append_raw(call, "Expect:") ||
        (has_body && !has_ctype && !append_raw(call, "Content-Type:")))
        return QR_ERR_NOMEM;
    return QR_OK;
fail:
    qr_buf_cleanup(&line);
    return QR_ERR_NOMEM;
}

#define SETOPT(opt, val)                                                                           \
    do {                                                                                           \
        if ((rc = curl_easy_setopt(e, opt, val)) != CURLE_OK)                                      \
            goto fail;                                                                             \
    } while (0)

/* Method and body: POSTFIELDS (borrowed, binary-safe with an explicit size) whenever there is a
 * body or the method is one that carries one; CUSTOMREQUEST renames the method. */
static CURLcode set_method(struct qr_http_call *call, const struct qr_http_call_opts *o)
{
    CURL *e = call->easy;
    CURLcode rc = CURLE_OK;
    const char *m = o->method;
    bool post = strcmp(m, "POST") == 0;

    if (strcmp(m, "HEAD") == 0) {
        SETOPT(CURLOPT_NOBODY, 1L);
    } else if (o->body.len || post || strcmp(m, "PUT") == 0 || strcmp(m, "PATCH") == 0) {
        SETOPT(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) o->body.len);
        SETOPT(CURLOPT_POSTFIELDS, o->body.len ? o->body.ptr : "");
        if (!post)
            SETOPT(CURLOPT_CUSTOMREQUEST, m);
    } else {
        SETOPT(CURLOPT_HTTPGET, 1L);
        if (strcmp(m, "GET") != 0)
            SETOPT(CURLOPT_CUSTOMREQUEST, m);
    }
fail:
    return rc;
}

static CURLcode set_options(struct qr_http_call *call, const struct qr_http_call_opts *o)
{
    CURL *e = call->easy;
    CURLcode rc = CURLE_OK;

    SETOPT(CURLOPT_PRIVATE, (void *) call);
    SETOPT(CURLOPT_URL, o->url);
    SETOPT(CURLOPT_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SETOPT(CURLOPT_FOLLOWLOCATION, 0L);
    SETOPT(CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
    SETOPT(CURLOPT_NOSIGNAL, 1L);
    SETOPT(CURLOPT_TCP_NODELAY, 1L);
    SETOPT(CURLOPT_HTTP_CONTENT_DECODING, 0L); /* bytes are forwarded as the upstream sent them */
    SETOPT(CURLOPT_PROXY, "");                 /* no http_proxy from the environment */
    SETOPT(CURLOPT_ERRORBUFFER, call->errbuf);
    SETOPT(CURLOPT_HEADERFUNCTION, on_header);
    SETOPT(CURLOPT_HEADERDATA, (void *) call);
    SETOPT(CURLOPT_WRITEFUNCTION, on_write);
    SETOPT(CURLOPT_WRITEDATA, (void *) call);
    SETOPT(CURLOPT_HTTPHEADER, call->req_headers);
    SETOPT(CURLOPT_PREREQFUNCTION, on_prereq);
    SETOPT(CURLOPT_PREREQDATA, (void *) call);
    if (o->connect_timeout_ms)
        SETOPT(CURLOPT_CONNECTTIMEOUT_MS, (long) o->connect_timeout_ms);
    if (o->timeout_ms)
        SETOPT(CURLOPT_TIMEOUT_MS, o->timeout_ms > LONG_MAX ? LONG_MAX : (long) o->timeout_ms);
    rc = set_method(call, o);
fail:
    return rc;
}

#undef SETOPT

enum qr_err qr_http_call_start(struct qr_http_client *c, const struct qr_http_call_opts *o,
                               struct qr_diag *diag, struct qr_http_call **out)
{
    struct qr_http_call *call = NULL;
    enum qr_err err;
    CURLcode rc;

    *out = NULL;
    if (!o->method || !o->url)
        return qr_diag_set(diag, QR_ERR_INVALID, "upstream call without method or url");
    if ((err = check_request(o, diag)) != QR_OK)
        return err;
    if (strcmp(o->method, "HEAD") == 0 && o->body.len)
        return qr_diag_set(diag, QR_ERR_INVALID, "upstream HEAD request with a body");
    if (!c->curl_only && qr_http_native_url_supported(o->url))
        return qr_http_native_call_start(c->native, o, diag, out);
    call = calloc(1, sizeof(*call));
    if (!call)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate an upstream call");
    call->impl = QR_HTTP_IMPL_CURL;
    call->client = c;
    call->on_response = o->on_response;
    call->on_data = o->on_data;
    call->on_done = o->on_done;
    call->arg = o->arg;
    call->connect_timeout_ms = o->connect_timeout_ms;
    call->timeout_ms = o->timeout_ms;
    call->first_byte_timeout_ms = o->first_byte_timeout_ms;
    call->idle_timeout_ms = o->idle_timeout_ms;
    qr_buf_init(&call->hbuf, HC_MAX_HEADER_BYTES);
    err = QR_ERR_NOMEM;
    call->safe_url = redact_url(o->url);
    call->easy = c->n_spare ? c->spare[--c->n_spare] : curl_easy_init();
    call->kick = event_new(c->base, -1, 0, on_kick, call);
    if (o->first_byte_timeout_ms || o->idle_timeout_ms)
        call->ptimer = evtimer_new(c->base, on_phase_timer, call);
    if (!call->safe_url || !call->easy || !call->kick ||
        ((o->first_byte_timeout_ms || o->idle_timeout_ms) && !call->ptimer)) {
        qr_diag_set(diag, err, "cannot allocate an upstream call");
        goto fail;
    }
    bool has_body = o->body.len || strcmp(o->method, "POST") == 0 ||
                    strcmp(o->method, "PUT") == 0 || strcmp(o->method, "PATCH") == 0;
    if (build_req_headers(call, o, has_body && strcmp(o->method, "HEAD") != 0) != QR_OK) {
        qr_diag_set(diag, err, "cannot copy the headers of upstream '%s'", call->safe_url);
        goto fail;
    }
    if ((rc = set_options(call, o)) != CURLE_OK) {
        err = rc == CURLE_OUT_OF_MEMORY ? QR_ERR_NOMEM : QR_ERR_INTERNAL;
        qr_diag_set(diag, err, "cannot set up upstream '%s': %s", call->safe_url,
                    curl_easy_strerror(rc));
        goto fail;
    }
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    event_active(call->kick, EV_TIMEOUT, 0); /* join the multi handle from the loop */
    *out = call;
    return QR_OK;
fail:
    call_free(call);
    return err;
}

void qr_http_call_pause(struct qr_http_call *call)
{
    if (qr_http_call_impl(call) == QR_HTTP_IMPL_NATIVE) {
        qr_http_native_call_pause(call);
        return;
    }
    if (call->cancelled || call->state == CALL_DONE || call->paused)
        return;
    call->paused = true;
    call->want_resume = false;
    phase_arm(call); /* the pause counts against neither the first byte nor the idle bound */
    /* From the loop, stop reading now. Inside a callback curl must not be re-entered: the next
     * write callback answers CURL_WRITEFUNC_PAUSE instead. */
    if (call->state == CALL_ACTIVE && call->client->depth == 0 && !call->curl_paused &&
        curl_easy_pause(call->easy, CURLPAUSE_RECV) == CURLE_OK)
        call->curl_paused = true;
}

void qr_http_call_resume(struct qr_http_call *call)
{
    if (qr_http_call_impl(call) == QR_HTTP_IMPL_NATIVE) {
        qr_http_native_call_resume(call);
        return;
    }
    if (call->cancelled || call->state == CALL_DONE || !call->paused)
        return;
    call->paused = false;
    call->last_body_ms = mono_ms(); /* the idle bound restarts */
    if (call->sent_ms && !call->body_seen)
        call->sent_ms = call->last_body_ms;
    phase_arm(call);
    if (call->curl_paused) { /* curl may hand over held-back data at once: do it from the loop */
        call->want_resume = true;
        event_active(call->kick, EV_TIMEOUT, 0);
    }
}

void qr_http_call_cancel(struct qr_http_call *call)
{
    if (call && qr_http_call_impl(call) == QR_HTTP_IMPL_NATIVE) {
        qr_http_native_call_cancel(call);
        return;
    }
    if (!call || call->cancelled || call->in_done)
        return;
    call->cancelled = true;
    if (call->client->depth == 0)
        call_destroy(call);
    else
        call->client->need_reap = true; /* curl or a callback is on the stack */
}

void qr_http_client_set_curl_only(struct qr_http_client *c, bool on)
{
    c->curl_only = on;
}
