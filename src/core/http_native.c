/* Native HTTP/1.1 upstream client for plain http:// engines (the local Ollama, llama-server,
 * MLX-LM, vLLM), on the daemon's libevent loop. It exists because libcurl's generality costs more
 * than the whole rest of the proxy hop: per request it re-parses the URL, formats headers, zeroes
 * buffers and polls pooled sockets for liveness. Here a request is one allocation (call, redacted
 * URL and formatted head together), one sendmsg of head + body, and one recv per readable event
 * into the connection's buffer, parsed in place and handed to the caller without copies.
 *
 * Connections are pooled per host:port (LIFO, 32 idle at most, 60 s idle timeout) and keep their
 * read event registered while idle, so a peer that closes is noticed and the socket is never
 * re-registered per request. A request that meets a pooled connection the peer has just closed
 * (EOF or reset before any response byte) is retried once on a fresh connection.
 *
 * Reentrancy follows http_client.c: user callbacks run only from our event callbacks with the
 * client's depth raised; cancel from inside a callback only marks the call and the outermost
 * event callback frees it; on_done runs only from the loop (a new call starts from a per-call
 * "kick" event, never inside qr_http_call_start). Error text mirrors the curl path's wording
 * ("couldn't connect to server", "timeout was reached") so callers and logs do not change. */
#include "core/http_native.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/http_parse.h"

#define HN_MAX_HEADER_BYTES (1024 * 1024) /* all response head bytes of one call, 1xx included */
#define HN_MAX_HEADERS      4096          /* header fields of one response head */
#define HN_MAX_IDLE         32            /* idle connections kept, all hosts together */
#define HN_IDLE_TIMEOUT_S   60
#define HN_READ_SIZE        (32 * 1024)  /* free space offered to each recv */
#define HN_CONNECT_DEFAULT  (300 * 1000) /* ms, libcurl's default connect timeout */
#define HN_MAX_ADDRS        4            /* resolved addresses tried in turn */
#define HN_STANDBY_MS       250          /* peer close this soon after a response: open a standby */

enum phase {
    PH_PENDING,    /* kick event queued: no connection yet */
    PH_CONNECTING, /* non-blocking connect in progress */
    PH_EXCHANGE,   /* request going out and/or response coming in */
    PH_DONE        /* on_done running or about to */
};

enum rstate { RS_HEAD, RS_BODY };

struct hn_conn;

/* One upstream host:port; its idle connections, most recently used first. Lives as long as the
 * client (a daemon talks to a handful of engines). */
struct hn_host {
    struct hn_host *next;
    struct hn_conn *idle;
    uint16_t port;
    size_t name_len;
    char name[]; /* as in the URL, without IPv6 brackets; NUL-terminated */
};

struct hn_conn {
    struct qr_http_native *client;
    struct hn_host *host;
    struct hn_conn *next, *prev; /* in host->idle while pooled */
    struct hn_call *call;        /* NULL while idle */
    int fd;
    struct event rev, wev, idle_timer;
    bool rev_on, wev_on, pooled;
    bool eof;         /* recv returned 0 */
    unsigned uses;    /* requests started on this connection */
    uint64_t done_ms; /* monotonic ms its last response ended; 0 for a standby never used */
    char *in;         /* received bytes [in_off, in_len) not yet consumed */
    size_t in_off, in_len, in_cap;
    struct qr_http_header *hdrs; /* response header slices into in, reused per response */
    size_t cap_hdrs;
};

struct hn_call {
    enum qr_http_impl impl; /* QR_HTTP_IMPL_NATIVE; must stay first */
    struct qr_http_native *client;
    struct hn_call *next, *prev;
    struct hn_host *host;
    struct hn_conn *conn;
    struct event kick, timer;
    enum phase phase;
    enum rstate rstate;
    enum qr_http_body_framing body_kind;
    bool head_req;      /* HEAD: a response never has a body */
    bool cancelled;     /* no callback may run any more; reaped at depth 0 */
    bool in_done;       /* on_done is running: cancel is a no-op */
    bool paused;        /* the consumer asked for a pause */
    bool want_resume;   /* kick must deliver held data and read again */
    bool retried;       /* the one retry on a fresh connection is spent */
    bool keep_alive;    /* the response allows reusing the connection */
    uint64_t remaining; /* QR_HTTP_FRAMING_LENGTH: body bytes still due */
    struct qr_http_chunked chunked;
    uint64_t rx;          /* response bytes received on the current connection */
    size_t head_scan;     /* bytes of the current head (from in_off) known to hold no end */
    size_t header_total;  /* head bytes seen, against HN_MAX_HEADER_BYTES */
    uint64_t deadline_ms; /* whole exchange, monotonic; 0 = none */
    uint64_t connect_deadline_ms;
    uint64_t timeout_ms;
    uint32_t connect_timeout_ms;
    uint64_t first_byte_timeout_ms; /* request sent -> first body byte; 0 = none */
    uint64_t idle_timeout_ms;       /* gap between body reads; 0 = none */
    uint64_t sent_ms;               /* monotonic ms the request was fully sent; 0 = not yet */
    uint64_t last_body_ms;          /* monotonic ms of the last body read (or resume) */
    bool body_seen;                 /* a response body byte has been delivered */
    struct sockaddr_storage addrs[HN_MAX_ADDRS];
    socklen_t addr_lens[HN_MAX_ADDRS];
    unsigned n_addrs, addr_i;
    const char *req; /* formatted head, in storage */
    size_t req_len;
    const char *body; /* borrowed from the caller until on_done/cancel */
    size_t body_len;
    size_t sent; /* bytes of head + body written on the current connection */
    qr_http_call_response_fn on_response;
    qr_http_call_data_fn on_data;
    qr_http_call_done_fn on_done;
    void *arg;
    struct qr_diag diag;
    const char *safe_url; /* scheme://host[:port]/path, in storage */
    char storage[];       /* safe_url NUL, then the request head */
};

struct qr_http_native {
    struct event_base *base;
    struct hn_call *calls;
    struct hn_host *hosts;
    unsigned n_idle;
    unsigned depth; /* our event callbacks on the stack; frees wait for 0 */
    bool need_reap;
};

/* --- URL -------------------------------------------------------------------------------------- */

struct hn_url {
    const char *host; /* as written, IPv6 brackets included (for the Host header) */
    size_t host_len;
    const char *name; /* without brackets (for the pool and the resolver) */
    size_t name_len;
    uint16_t port;
    bool port_given;
    const char *target; /* path and query; empty means "/" */
    size_t target_len;
    size_t safe_len; /* url[0..safe_len) is scheme://authority/path */
};

static bool is_reg_name_char(unsigned char ch)
{
    return isalnum(ch) || ch == '.' || ch == '-' || ch == '_';
}

/* Dot segments ("/./", "/../", a trailing "/." or "/..") would be squashed by curl. */
static bool has_dot_segment(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != '/' || i + 1 >= n || p[i + 1] != '.')
            continue;
        size_t j = i + 2;
        if (j < n && p[j] == '.')
            j++;
        if (j == n || p[j] == '/')
            return true;
    }
    return false;
}

static bool url_parse(const char *url, struct hn_url *u)
{
    if (strncasecmp(url, "http://", 7) != 0)
        return false;
    const char *a = url + 7;
    size_t alen = strcspn(a, "/?#");
    if (memchr(a, '@', alen))
        return false; /* userinfo: curl turns it into Basic auth */
    const char *end = a + alen, *p = a;
    if (*p == '[') {
        const char *close = memchr(p, ']', alen);
        if (!close || close == p + 1)
            return false;
        for (const char *q = p + 1; q < close; q++)
            if (!isxdigit((unsigned char) *q) && *q != ':' && *q != '.')
                return false; /* zone ids and the like: curl */
        u->name = p + 1;
        u->name_len = (size_t) (close - p - 1);
        p = close + 1;
    } else {
        u->name = p;
        while (p < end && is_reg_name_char((unsigned char) *p))
            p++;
        u->name_len = (size_t) (p - u->name);
        if (u->name_len == 0)
            return false;
    }
    u->host = a;
    u->host_len = (size_t) (p - a);
    u->port = 80;
    u->port_given = false;
    if (p < end) {
        if (*p != ':' || p + 1 == end || end - p > 6)
            return false;
        unsigned long port = 0;
        for (const char *q = p + 1; q < end; q++) {
            if (!isdigit((unsigned char) *q))
                return false;
            port = port * 10 + (unsigned long) (*q - '0');
        }
        if (port == 0 || port > 65535)
            return false;
        u->port = (uint16_t) port;
        u->port_given = true;
        u->host_len = (size_t) (end - a);
    }
    if (*end == '?')
        return false; /* "http://h?q": curl inserts the "/" */
    u->target = end;
    u->target_len = strcspn(end, "#");
    for (size_t i = 0; i < u->target_len; i++)
        if ((unsigned char) end[i] <= 0x20 || (unsigned char) end[i] >= 0x7f)
            return false; /* curl would percent-encode or refuse */
    size_t path_len = strcspn(end, "?#");
    if (has_dot_segment(end, path_len))
        return false;
    u->safe_len = (size_t) (end - url) + path_len;
    return true;
}

/* The native client resolves on the event loop (getaddrinfo blocks), so it only takes hosts
 * that resolve without a network round trip: IP literals and "localhost". A host name goes to
 * libcurl, whose resolver runs off the loop: a slow DNS server never stalls the daemon. */
static bool resolves_locally(const char *name, size_t len)
{
    char buf[INET6_ADDRSTRLEN + 1];
    unsigned char addr[sizeof(struct in6_addr)];
    if (len == 9 && strncasecmp(name, "localhost", 9) == 0)
        return true;
    if (len >= sizeof(buf))
        return false;
    memcpy(buf, name, len);
    buf[len] = '\0';
    return inet_pton(AF_INET, buf, addr) == 1 || inet_pton(AF_INET6, buf, addr) == 1;
}

bool qr_http_native_url_supported(const char *url)
{
    struct hn_url u;
    return url && url_parse(url, &u) && resolves_locally(u.name, u.name_len);
}

/* --- small helpers ---------------------------------------------------------------------------- */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static struct timeval ms_tv(uint64_t ms)
{
    return (struct timeval){(time_t) (ms / 1000), (suseconds_t) ((ms % 1000) * 1000)};
}

static void lower_first(char *s)
{
    s[0] = (char) tolower((unsigned char) s[0]);
}

static void enter(struct qr_http_native *c)
{
    c->depth++;
}

static void call_destroy(struct hn_call *call);

/* Leave one of our event callbacks; the outermost one frees what was cancelled meanwhile. */
static void leave(struct qr_http_native *c)
{
    if (--c->depth != 0)
        return;
    while (c->need_reap) {
        c->need_reap = false;
        struct hn_call *next;
        for (struct hn_call *call = c->calls; call; call = next) {
            next = call->next;
            if (call->cancelled)
                call_destroy(call);
        }
    }
}

/* --- connections ------------------------------------------------------------------------------ */

static void rev_set(struct hn_conn *conn, bool on)
{
    if (on == conn->rev_on)
        return;
    if (on)
        conn->rev_on = event_add(&conn->rev, NULL) == 0;
    else {
        event_del(&conn->rev);
        conn->rev_on = false;
    }
}

static void wev_set(struct hn_conn *conn, bool on)
{
    if (on == conn->wev_on)
        return;
    if (on)
        conn->wev_on = event_add(&conn->wev, NULL) == 0;
    else {
        event_del(&conn->wev);
        conn->wev_on = false;
    }
}

static void pool_unlink(struct hn_conn *conn)
{
    if (!conn->pooled)
        return;
    if (conn->prev)
        conn->prev->next = conn->next;
    else
        conn->host->idle = conn->next;
    if (conn->next)
        conn->next->prev = conn->prev;
    conn->next = conn->prev = NULL;
    conn->pooled = false;
    conn->client->n_idle--;
    evtimer_del(&conn->idle_timer);
}

static void conn_close(struct hn_conn *conn)
{
    pool_unlink(conn);
    rev_set(conn, false);
    wev_set(conn, false);
    if (conn->fd >= 0)
        close(conn->fd);
    free(conn->in);
    free(conn->hdrs);
    free(conn);
}

static void standby_open(struct hn_conn *closing);

/* A pooled connection became readable: the peer closed it (or sent bytes nobody asked for). */
static void on_idle_read(struct hn_conn *conn)
{
    char b[64];
    ssize_t n = recv(conn->fd, b, sizeof(b), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0)
        standby_open(conn);
    conn_close(conn);
}

static void on_idle_timer(evutil_socket_t fd, short what, void *arg)
{
    conn_close(arg);
}

static bool pool_put(struct hn_conn *conn)
{
    struct qr_http_native *c = conn->client;
    if (c->n_idle >= HN_MAX_IDLE)
        return false;
    struct timeval tv = {HN_IDLE_TIMEOUT_S, 0};
    conn->in_off = conn->in_len = 0;
    conn->done_ms = mono_ms();
    conn->next = conn->host->idle;
    conn->prev = NULL;
    if (conn->next)
        conn->next->prev = conn;
    conn->host->idle = conn;
    conn->pooled = true;
    c->n_idle++;
    evtimer_add(&conn->idle_timer, &tv);
    wev_set(conn, false);
    rev_set(conn, true); /* stays registered: no epoll_ctl per request */
    return true;
}

static void on_conn_read(evutil_socket_t fd, short what, void *arg);
static void on_conn_write(evutil_socket_t fd, short what, void *arg);

/* The peer closed an idle connection right after its response, as llama-server does after every
 * streamed answer: connect a replacement now and pool it, so that the next request to this host
 * does not pay a TCP connect before its first byte. Only for such closes (not for idle timeouts,
 * and not for a standby that was never used), and only while the host has no other idle
 * connection. The pool treats it like any other: a standby that turns out dead is noticed by its
 * read event, and a request meeting it is retried once on a fresh connection (uses starts at 1). */
static void standby_open(struct hn_conn *closing)
{
    struct qr_http_native *c = closing->client;
    struct sockaddr_storage sa;
    socklen_t len = sizeof(sa);
    if (!closing->done_ms || mono_ms() - closing->done_ms > HN_STANDBY_MS ||
        closing->host->idle != closing || closing->next ||
        getpeername(closing->fd, (struct sockaddr *) &sa, &len) != 0)
        return;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *) &sa, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return;
    }
    struct hn_conn *conn = calloc(1, sizeof(*conn));
    if (!conn)
        abort(); /* a small fixed allocation */
    conn->client = c;
    conn->host = closing->host;
    conn->fd = fd;
    conn->uses = 1;
    event_assign(&conn->rev, c->base, fd, EV_READ | EV_PERSIST, on_conn_read, conn);
    event_assign(&conn->wev, c->base, fd, EV_WRITE | EV_PERSIST, on_conn_write, conn);
    evtimer_assign(&conn->idle_timer, c->base, on_idle_timer, conn);
    if (!pool_put(conn)) {
        conn_close(conn);
        return;
    }
    conn->done_ms = 0; /* never used: its own close opens nothing */
}

static struct hn_conn *pool_take(struct hn_host *h)
{
    struct hn_conn *conn = h->idle;
    if (conn)
        pool_unlink(conn);
    return conn;
}

/* --- call completion -------------------------------------------------------------------------- */

/* Deliver the outcome and free the call. Runs only from our event callbacks (depth > 0). */
static void finish(struct hn_call *call, enum qr_err err)
{
    struct hn_conn *conn = call->conn;

    call->phase = PH_DONE;
    evtimer_del(&call->timer);
    event_del(&call->kick);
    if (conn) {
        bool reuse = err == QR_OK && call->keep_alive && !conn->eof &&
                     conn->in_off == conn->in_len && call->sent == call->req_len + call->body_len;
        call->conn = NULL;
        conn->call = NULL;
        /* back to the pool before on_done, so a call started from on_done can reuse it */
        if (!reuse || !pool_put(conn))
            conn_close(conn);
    }
    call->in_done = true;
    if (call->on_done)
        call->on_done((struct qr_http_call *) call, err, &call->diag, call->arg);
    call_destroy(call);
}

static void fail(struct hn_call *call, enum qr_err err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(struct hn_call *call, enum qr_err err, const char *fmt, ...)
{
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    qr_diag_set(&call->diag, err, "upstream '%s': %s", call->safe_url, what);
    finish(call, err);
}

static void fail_errno(struct hn_call *call, const char *what, int e)
{
    char detail[128];
    snprintf(detail, sizeof(detail), "%s", strerror(e));
    lower_first(detail);
    fail(call, QR_ERR_UPSTREAM, "%s (%s)", what, detail);
}

/* --- connecting ------------------------------------------------------------------------------- */

static bool send_more(struct hn_call *call);

/* Fill call->addrs: numeric literals directly, names through the resolver (IPv4 first, since
 * "localhost" engines usually listen on 127.0.0.1 only). */
static int resolve(struct hn_call *call)
{
    struct hn_host *h = call->host;
    struct sockaddr_in *sin = (struct sockaddr_in *) &call->addrs[0];
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *) &call->addrs[0];

    call->n_addrs = call->addr_i = 0;
    memset(&call->addrs[0], 0, sizeof(call->addrs[0]));
    if (inet_pton(AF_INET, h->name, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(h->port);
        call->addr_lens[0] = sizeof(*sin);
        call->n_addrs = 1;
        return 0;
    }
    if (inet_pton(AF_INET6, h->name, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(h->port);
        call->addr_lens[0] = sizeof(*sin6);
        call->n_addrs = 1;
        return 0;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", h->port);
    int rc = getaddrinfo(h->name, port, &hints, &res);
    if (rc != 0)
        return rc;
    for (int family = 0; family < 2; family++)
        for (struct addrinfo *ai = res; ai && call->n_addrs < HN_MAX_ADDRS; ai = ai->ai_next) {
            if (ai->ai_family != (family == 0 ? AF_INET : AF_INET6) ||
                ai->ai_addrlen > sizeof(call->addrs[0]))
                continue;
            memcpy(&call->addrs[call->n_addrs], ai->ai_addr, ai->ai_addrlen);
            call->addr_lens[call->n_addrs++] = ai->ai_addrlen;
        }
    freeaddrinfo(res);
    return call->n_addrs ? 0 : EAI_NONAME;
}

/* The four deadlines of a call, in the order on_call_timer reports them when several passed. */
enum deadline { DL_CONNECT, DL_FIRST_BYTE, DL_IDLE, DL_TOTAL, DL__COUNT };

/* Fill at[] with the deadlines that apply now (0 = none); the time a consumer keeps the call
 * paused counts against neither the first byte nor the idle bound. */
static void deadlines(const struct hn_call *call, uint64_t at[DL__COUNT])
{
    bool live = call->phase == PH_EXCHANGE && !call->paused;
    at[DL_CONNECT] = call->phase == PH_CONNECTING ? call->connect_deadline_ms : 0;
    at[DL_FIRST_BYTE] = live && call->first_byte_timeout_ms && call->sent_ms && !call->body_seen
                            ? call->sent_ms + call->first_byte_timeout_ms
                            : 0;
    at[DL_IDLE] = live && call->idle_timeout_ms && call->body_seen
                      ? call->last_body_ms + call->idle_timeout_ms
                      : 0;
    at[DL_TOTAL] = call->deadline_ms;
}

static void arm_timer(struct hn_call *call)
{
    uint64_t dl[DL__COUNT], at = 0;
    deadlines(call, dl);
    for (int i = 0; i < DL__COUNT; i++)
        if (dl[i] && (!at || dl[i] < at))
            at = dl[i];
    if (!at) {
        evtimer_del(&call->timer);
        return;
    }
    uint64_t now = mono_ms();
    struct timeval tv = ms_tv(at > now ? at - now : 0);
    evtimer_add(&call->timer, &tv);
}

static void conn_failed(struct hn_call *call, int e);

/* Connected (or connect failed) on call->conn: start sending. False when the call finished. */
static bool connected(struct hn_call *call)
{
    struct hn_conn *conn = call->conn;
    int e = 0;
    socklen_t len = sizeof(e);
    if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &e, &len) != 0)
        e = errno;
    if (e != 0) {
        conn_failed(call, e);
        return false;
    }
    wev_set(conn, false);
    call->phase = PH_EXCHANGE;
    call->rstate = RS_HEAD;
    if (!call->paused)
        rev_set(conn, true);
    return send_more(call);
}

/* Open a fresh connection to the next address. False when the call finished (failed). */
static bool conn_open(struct hn_call *call)
{
    struct qr_http_native *c = call->client;
    int e = 0;

    while (call->addr_i < call->n_addrs) {
        unsigned i = call->addr_i++;
        int fd = socket(call->addrs[i].ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            e = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (connect(fd, (struct sockaddr *) &call->addrs[i], call->addr_lens[i]) != 0 &&
            errno != EINPROGRESS) {
            e = errno;
            close(fd);
            continue;
        }
        struct hn_conn *conn = calloc(1, sizeof(*conn));
        if (!conn)
            abort(); /* a small fixed allocation */
        conn->client = c;
        conn->host = call->host;
        conn->fd = fd;
        conn->uses = 1;
        event_assign(&conn->rev, c->base, fd, EV_READ | EV_PERSIST, on_conn_read, conn);
        event_assign(&conn->wev, c->base, fd, EV_WRITE | EV_PERSIST, on_conn_write, conn);
        evtimer_assign(&conn->idle_timer, c->base, on_idle_timer, conn);
        conn->call = call;
        call->conn = conn;
        call->phase = PH_CONNECTING;
        call->sent = 0;
        call->sent_ms = 0;
        call->rx = 0;
        call->connect_deadline_ms = mono_ms() + call->connect_timeout_ms;
        arm_timer(call);
        wev_set(conn, true); /* writable = connected (or failed: SO_ERROR says) */
        return true;
    }
    char detail[128];
    snprintf(detail, sizeof(detail), "%s", strerror(e ? e : ECONNREFUSED));
    lower_first(detail);
    fail(call, QR_ERR_UPSTREAM, "couldn't connect to server (failed to connect to %s port %u: %s)",
         call->host->name, call->host->port, detail);
    return false;
}

/* The connect on call->conn failed with e: try the next address, or fail the call. */
static void conn_failed(struct hn_call *call, int e)
{
    struct hn_conn *conn = call->conn;
    call->conn = NULL;
    conn->call = NULL;
    conn_close(conn);
    if (call->addr_i < call->n_addrs) {
        conn_open(call);
        return;
    }
    char detail[128];
    snprintf(detail, sizeof(detail), "%s", strerror(e));
    lower_first(detail);
    fail(call, QR_ERR_UPSTREAM, "couldn't connect to server (failed to connect to %s port %u: %s)",
         call->host->name, call->host->port, detail);
}

/* Retry on a fresh connection after a pooled one turned out closed. False when the call ended. */
static bool retry(struct hn_call *call)
{
    struct hn_conn *conn = call->conn;
    call->conn = NULL;
    conn->call = NULL;
    conn_close(conn);
    call->retried = true;
    call->rstate = RS_HEAD;
    call->head_scan = 0;
    call->header_total = 0;
    int rc = resolve(call);
    if (rc != 0) {
        fail(call, QR_ERR_UPSTREAM, "couldn't resolve host name (%s)", gai_strerror(rc));
        return false;
    }
    return conn_open(call);
}

/* May this failure on the current connection be retried on a fresh one? */
static bool can_retry(const struct hn_call *call)
{
    return call->conn->uses > 1 && call->rx == 0 && !call->retried;
}

/* Write what is left of head + body. False when the call finished (failed or retried and failed);
 * true when all is sent or the rest waits for writability. */
static bool send_more(struct hn_call *call)
{
    struct hn_conn *conn = call->conn;
    size_t total = call->req_len + call->body_len;

    while (call->sent < total) {
        struct iovec iov[2];
        int n = 0;
        if (call->sent < call->req_len)
            iov[n++] =
                (struct iovec){(void *) (call->req + call->sent), call->req_len - call->sent};
        size_t boff = call->sent > call->req_len ? call->sent - call->req_len : 0;
        if (call->body_len > boff)
            iov[n++] = (struct iovec){(void *) (call->body + boff), call->body_len - boff};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t) n};
        ssize_t w = sendmsg(conn->fd, &m, MSG_NOSIGNAL);
        if (w > 0) {
            call->sent += (size_t) w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            wev_set(conn, true);
            return true;
        }
        int e = w < 0 ? errno : EPIPE;
        if ((e == EPIPE || e == ECONNRESET) && can_retry(call))
            return retry(call);
        fail_errno(call, "failed sending data to the peer", e);
        return false;
    }
    wev_set(conn, false);
    if (!call->sent_ms) { /* the first byte bound starts now */
        call->sent_ms = mono_ms();
        if (call->first_byte_timeout_ms)
            arm_timer(call);
    }
    return true;
}

/* --- response --------------------------------------------------------------------------------- */

/* Run on_response. False when the call ended (refused: finished with CANCELLED; or cancelled). */
static bool deliver_response(struct hn_call *call, int status, size_t n_hdrs)
{
    if (!call->on_response)
        return true;
    bool ok = call->on_response((struct qr_http_call *) call, status, call->conn->hdrs, n_hdrs,
                                call->arg);
    if (call->cancelled)
        return false;
    if (!ok) {
        fail(call, QR_ERR_CANCELLED, "cancelled by the response callback");
        return false;
    }
    return true;
}

/* Run on_data. False when the call ended. */
static bool deliver_data(struct hn_call *call, const char *p, size_t n)
{
    if (n == 0)
        return true;
    if (!call->body_seen) { /* the first byte bound ends, the idle bound starts */
        call->body_seen = true;
        call->last_body_ms = mono_ms();
        if (call->first_byte_timeout_ms || call->idle_timeout_ms)
            arm_timer(call);
    }
    if (!call->on_data)
        return true;
    bool ok = call->on_data((struct qr_http_call *) call, p, n, call->arg);
    if (call->cancelled)
        return false;
    if (!ok) {
        fail(call, QR_ERR_CANCELLED, "cancelled by the data callback");
        return false;
    }
    return true;
}

/* Decide the body framing of the final (unfolded) head. False: malformed (call failed). */
static bool set_framing(struct hn_call *call, const struct qr_http_response_head *h)
{
    enum qr_http_perr perr;
    call->body_kind = qr_http_response_framing(h->status, call->head_req, h->minor_version, h,
                                               &call->remaining, &perr);
    if (call->body_kind == QR_HTTP_FRAMING_ERROR) {
        fail(call, QR_ERR_UPSTREAM, "invalid content-length in the response");
        return false;
    }
    if (call->body_kind == QR_HTTP_FRAMING_CHUNKED)
        qr_http_chunked_init(&call->chunked);
    call->keep_alive = qr_http_response_keep_alive(h->minor_version, h, call->body_kind);
    return true;
}

/* Parse the complete head buf[0..end) into conn->hdrs, growing the array (16, doubling) up to
 * HN_MAX_HEADERS fields, then join obs-fold lines in place. -1 on error (*perr says which). */
static int parse_fields(struct hn_conn *conn, char *buf, size_t end,
                        struct qr_http_response_head *h, enum qr_http_perr *perr)
{
    for (;;) {
        h->headers = conn->hdrs;
        int rc = qr_http_parse_response_head(buf, end, h, conn->cap_hdrs, perr);
        if (rc > 0)
            break;
        if (*perr != QR_HTTP_PERR_TOO_MANY_HEADERS || conn->cap_hdrs == HN_MAX_HEADERS)
            return -1;
        size_t cap = conn->cap_hdrs ? conn->cap_hdrs * 2 : 16;
        if (cap > HN_MAX_HEADERS)
            cap = HN_MAX_HEADERS;
        struct qr_http_header *n = realloc(conn->hdrs, cap * sizeof(*n));
        if (!n)
            abort(); /* bounded by HN_MAX_HEADERS */
        conn->hdrs = n;
        conn->cap_hdrs = cap;
    }
    qr_http_response_head_unfold(buf, h);
    return 0;
}

enum step { STEP_MORE, STEP_WAIT, STEP_ENDED };

/* Parse one response head if it is complete. STEP_MORE: a head was consumed (1xx skipped, or the
 * final one delivered); STEP_WAIT: need more bytes; STEP_ENDED: the call finished. */
static enum step parse_head(struct hn_call *call)
{
    struct hn_conn *conn = call->conn;
    char *buf = conn->in + conn->in_off;
    size_t avail = conn->in_len - conn->in_off;

    /* find the empty line; head_scan remembers how far earlier reads got */
    size_t end = qr_http_response_head_end(buf, avail, &call->head_scan);
    if (end == 0) {
        if (avail > HN_MAX_HEADER_BYTES - call->header_total) {
            fail(call, QR_ERR_UPSTREAM, "response header section larger than 1048576 bytes");
            return STEP_ENDED;
        }
        return STEP_WAIT;
    }
    if (end > HN_MAX_HEADER_BYTES - call->header_total) {
        fail(call, QR_ERR_UPSTREAM, "response header section larger than 1048576 bytes");
        return STEP_ENDED;
    }
    call->header_total += end;
    call->head_scan = 0;

    struct qr_http_response_head head;
    enum qr_http_perr perr;
    if (parse_fields(conn, buf, end, &head, &perr) < 0) {
        if (perr == QR_HTTP_PERR_TOO_MANY_HEADERS)
            fail(call, QR_ERR_UPSTREAM, "more than 4096 response header fields");
        else
            fail(call, QR_ERR_UPSTREAM, "unsupported or malformed response status line");
        return STEP_ENDED;
    }
    conn->in_off += end;
    if (head.status == 101) {
        fail(call, QR_ERR_UPSTREAM, "unexpected 101 switching protocols");
        return STEP_ENDED;
    }
    if (head.status < 200)
        return STEP_MORE; /* interim response: skipped */
    if (!set_framing(call, &head))
        return STEP_ENDED;
    call->rstate = RS_BODY;
    if (!deliver_response(call, head.status, head.num_headers))
        return STEP_ENDED;
    if (call->body_kind == QR_HTTP_FRAMING_NONE ||
        (call->body_kind == QR_HTTP_FRAMING_LENGTH && call->remaining == 0)) {
        finish(call, QR_OK);
        return STEP_ENDED;
    }
    return STEP_MORE;
}

/* Consume body bytes from the buffer: at most one on_data. */
static enum step body_step(struct hn_call *call)
{
    struct hn_conn *conn = call->conn;
    const char *p = conn->in + conn->in_off;
    size_t avail = conn->in_len - conn->in_off;

    if (avail == 0)
        return STEP_WAIT;
    switch (call->body_kind) {
    case QR_HTTP_FRAMING_LENGTH: {
        size_t n = avail < call->remaining ? avail : (size_t) call->remaining;
        conn->in_off += n;
        call->remaining -= n;
        if (!deliver_data(call, p, n))
            return STEP_ENDED;
        if (call->remaining == 0) {
            finish(call, QR_OK);
            return STEP_ENDED;
        }
        return STEP_MORE;
    }
    case QR_HTTP_FRAMING_CHUNKED: {
        size_t used = 0;
        struct qr_slice data = {0};
        enum qr_http_chunked_rc rc = qr_http_chunked_step(&call->chunked, p, avail, &used, &data);
        if (rc == QR_HTTP_CHUNKED_ERROR) {
            fail(call, QR_ERR_UPSTREAM, "malformed chunked encoding in the response body");
            return STEP_ENDED;
        }
        conn->in_off += used;
        if (!deliver_data(call, data.ptr, data.len))
            return STEP_ENDED;
        if (rc == QR_HTTP_CHUNKED_DONE) {
            finish(call, QR_OK);
            return STEP_ENDED;
        }
        return used || data.len ? STEP_MORE : STEP_WAIT;
    }
    default: /* QR_HTTP_FRAMING_CLOSE */
        conn->in_off += avail;
        return deliver_data(call, p, avail) ? STEP_MORE : STEP_ENDED;
    }
}

/* The connection is at EOF and every received byte has been used. */
static void at_eof(struct hn_call *call)
{
    if (call->rstate == RS_HEAD) {
        if (call->rx == 0 && can_retry(call)) {
            retry(call);
            return;
        }
        if (call->rx == 0)
            fail(call, QR_ERR_UPSTREAM, "empty reply from server");
        else
            fail(call, QR_ERR_UPSTREAM, "connection closed before the end of the response head");
        return;
    }
    switch (call->body_kind) {
    case QR_HTTP_FRAMING_CLOSE:
        finish(call, QR_OK);
        return;
    case QR_HTTP_FRAMING_LENGTH:
        fail(call, QR_ERR_UPSTREAM, "transfer closed with %llu bytes remaining to read",
             (unsigned long long) call->remaining);
        return;
    default:
        fail(call, QR_ERR_UPSTREAM, "transfer closed with outstanding read data remaining");
        return;
    }
}

/* Use the received bytes until they run out, the call pauses, or it ends. False when the call
 * ended (freed: do not touch it). */
static bool process(struct hn_call *call)
{
    while (!call->cancelled) {
        if (call->paused)
            return true;
        enum step s = call->rstate == RS_HEAD ? parse_head(call) : body_step(call);
        if (s == STEP_ENDED)
            return false;
        if (s == STEP_WAIT) {
            struct hn_conn *conn = call->conn;
            if (conn->in_off == conn->in_len) {
                conn->in_off = conn->in_len = 0;
                /* Nothing buffered while a body streams: give the read buffer back, so a stream
                 * waiting for its next chunk holds no HN_READ_SIZE of its own (1,000 open streams
                 * would otherwise keep 32 MiB resident); the next read takes one again. */
                if (call->rstate != RS_HEAD && !conn->eof) {
                    free(conn->in);
                    conn->in = NULL;
                    conn->in_cap = 0;
                }
            }
            if (!conn->eof)
                return true;
            if (conn->in_off != conn->in_len) { /* truncated head or chunk framing */
                if (call->rstate == RS_HEAD)
                    fail(call, QR_ERR_UPSTREAM,
                         "connection closed before the end of the response head");
                else
                    fail(call, QR_ERR_UPSTREAM,
                         "transfer closed with outstanding read data remaining");
                return false;
            }
            at_eof(call);
            return false;
        }
    }
    return false;
}

/* Make room for a read of HN_READ_SIZE; the buffer only grows while a head is incomplete. */
static void in_reserve(struct hn_conn *conn)
{
    if (conn->in_cap - conn->in_len >= HN_READ_SIZE)
        return;
    if (conn->in_off) {
        memmove(conn->in, conn->in + conn->in_off, conn->in_len - conn->in_off);
        conn->in_len -= conn->in_off;
        conn->in_off = 0;
        if (conn->in_cap - conn->in_len >= HN_READ_SIZE)
            return;
    }
    size_t cap = conn->in_cap ? conn->in_cap : HN_READ_SIZE;
    while (cap - conn->in_len < HN_READ_SIZE)
        cap *= 2;
    char *p = realloc(conn->in, cap);
    if (!p)
        abort(); /* bounded by the head cap */
    conn->in = p;
    conn->in_cap = cap;
}

/* One recv for call, then process. Runs with depth raised. */
static void conn_read(struct hn_conn *conn, struct hn_call *call)
{
    in_reserve(conn);
    ssize_t n = recv(conn->fd, conn->in + conn->in_len, conn->in_cap - conn->in_len, 0);
    if (n < 0) {
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR)
            return;
        if (call->rstate == RS_HEAD && can_retry(call)) {
            retry(call);
            return;
        }
        fail_errno(call, "failure when receiving data from the peer", e);
        return;
    }
    if (n == 0) {
        conn->eof = true;
        rev_set(conn, false); /* level-triggered EOF would spin */
    }
    conn->in_len += (size_t) n;
    call->rx += (uint64_t) n;
    if (n > 0 && call->body_seen && call->idle_timeout_ms)
        call->last_body_ms = mono_ms(); /* the idle timer re-arms itself from this when it fires */
    process(call);
}

static void on_conn_read(evutil_socket_t fd, short what, void *arg)
{
    struct hn_conn *conn = arg;
    struct hn_call *call = conn->call;
    if (!call) {
        on_idle_read(conn);
        return;
    }
    struct qr_http_native *c = conn->client;
    enter(c);
    if (!call->cancelled && call->phase == PH_EXCHANGE)
        conn_read(conn, call);
    leave(c);
}

static void on_conn_write(evutil_socket_t fd, short what, void *arg)
{
    struct hn_conn *conn = arg;
    struct hn_call *call = conn->call;
    struct qr_http_native *c = conn->client;

    enter(c);
    if (!call || call->cancelled)
        wev_set(conn, false);
    else if (call->phase == PH_CONNECTING)
        connected(call);
    else if (call->phase == PH_EXCHANGE)
        send_more(call);
    leave(c);
}

/* --- per-call events -------------------------------------------------------------------------- */

/* Take a pooled connection or open one, then send. */
static void begin(struct hn_call *call)
{
    struct hn_conn *conn = pool_take(call->host);
    if (conn) {
        conn->call = call;
        conn->uses++;
        call->conn = conn;
        call->phase = PH_EXCHANGE;
        call->rstate = RS_HEAD;
        call->sent = 0;
        call->sent_ms = 0;
        call->rx = 0;
        if (call->paused)
            rev_set(conn, false);
        send_more(call);
        return;
    }
    int rc = resolve(call);
    if (rc != 0) {
        fail(call, QR_ERR_UPSTREAM, "couldn't resolve host name (%s)", gai_strerror(rc));
        return;
    }
    conn_open(call);
}

/* Deferred work: start the exchange, or deliver held data after a resume. */
static void on_kick(evutil_socket_t fd, short what, void *arg)
{
    struct hn_call *call = arg;
    struct qr_http_native *c = call->client;

    enter(c);
    if (call->cancelled || call->phase == PH_DONE)
        goto out;
    if (call->phase == PH_PENDING) {
        begin(call);
    } else if (call->want_resume && !call->paused) {
        call->want_resume = false;
        if (call->phase == PH_EXCHANGE && process(call) && !call->paused && !call->cancelled &&
            !call->conn->eof)
            rev_set(call->conn, true);
    }
out:
    leave(c);
}

static void on_call_timer(evutil_socket_t fd, short what, void *arg)
{
    struct hn_call *call = arg;
    struct qr_http_native *c = call->client;
    uint64_t now = mono_ms();

    enter(c);
    if (call->cancelled || call->phase == PH_DONE)
        goto out;
    uint64_t dl[DL__COUNT];
    int hit = -1; /* the earliest deadline that passed */
    deadlines(call, dl);
    for (int i = 0; i < DL__COUNT; i++)
        if (dl[i] && now >= dl[i] && (hit < 0 || dl[i] < dl[hit]))
            hit = i;
    switch (hit) {
    case DL_CONNECT:
        fail(call, QR_ERR_UPSTREAM_CONNECT_TIMEOUT,
             "timeout was reached (connection timed out after %u milliseconds)",
             call->connect_timeout_ms);
        break;
    case DL_FIRST_BYTE:
        fail(call, QR_ERR_UPSTREAM_FIRST_BYTE_TIMEOUT,
             "timeout was reached (no response body within %llu milliseconds of the request)",
             (unsigned long long) call->first_byte_timeout_ms);
        break;
    case DL_IDLE:
        fail(call, QR_ERR_UPSTREAM_IDLE_TIMEOUT,
             "timeout was reached (response body stalled for %llu milliseconds after %llu bytes "
             "received)",
             (unsigned long long) call->idle_timeout_ms, (unsigned long long) call->rx);
        break;
    case DL_TOTAL:
        fail(call, QR_ERR_UPSTREAM_TIMEOUT,
             "timeout was reached (operation timed out after %llu milliseconds with %llu bytes "
             "received)",
             (unsigned long long) call->timeout_ms, (unsigned long long) call->rx);
        break;
    default:
        arm_timer(call); /* fired early, or a phase ended: wait for the next deadline */
    }
out:
    leave(c);
}

/* --- client ----------------------------------------------------------------------------------- */

enum qr_err qr_http_native_new(struct event_base *base, struct qr_diag *diag,
                               struct qr_http_native **out)
{
    struct qr_http_native *c = calloc(1, sizeof(*c));
    *out = NULL;
    if (!c)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the upstream client");
    c->base = base;
    *out = c;
    return QR_OK;
}

void qr_http_native_free(struct qr_http_native *c)
{
    if (!c)
        return;
    if (NEVER(c->depth != 0))
        return; /* freed from inside one of its callbacks: leak rather than crash */
    while (c->calls)
        call_destroy(c->calls);
    while (c->hosts) {
        struct hn_host *h = c->hosts;
        c->hosts = h->next;
        while (h->idle)
            conn_close(h->idle);
        free(h);
    }
    free(c);
}

unsigned qr_http_native_in_flight(const struct qr_http_native *c)
{
    unsigned n = 0;
    for (const struct hn_call *call = c->calls; call; call = call->next)
        n += !call->cancelled && call->phase != PH_DONE;
    return n;
}

/* --- call ------------------------------------------------------------------------------------- */

static void call_destroy(struct hn_call *call)
{
    struct qr_http_native *c = call->client;
    event_del(&call->kick);
    evtimer_del(&call->timer);
    if (call->conn) { /* mid-exchange: the connection cannot be reused */
        call->conn->call = NULL;
        conn_close(call->conn);
    }
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    free(call);
}

static struct hn_host *host_get(struct qr_http_native *c, const struct hn_url *u)
{
    for (struct hn_host *h = c->hosts; h; h = h->next)
        if (h->port == u->port && h->name_len == u->name_len &&
            strncasecmp(h->name, u->name, u->name_len) == 0)
            return h;
    struct hn_host *h = calloc(1, sizeof(*h) + u->name_len + 1);
    if (!h)
        return NULL;
    h->port = u->port;
    h->name_len = u->name_len;
    memcpy(h->name, u->name, u->name_len);
    h->next = c->hosts;
    c->hosts = h;
    return h;
}

static bool is_framing_header(struct qr_slice name)
{
    return qr_slice_eq_nocase(name, "content-length") ||
           qr_slice_eq_nocase(name, "transfer-encoding");
}

static char *put(char *p, const void *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* Format the request head at p (room computed by the caller); returns its end. */
static char *format_head(char *p, const struct qr_http_call_opts *o, const struct hn_url *u,
                         bool has_body)
{
    bool own_host = false;
    p = put(p, o->method, strlen(o->method));
    *p++ = ' ';
    p = u->target_len ? put(p, u->target, u->target_len) : put(p, "/", 1);
    p = put(p, " HTTP/1.1\r\n", 11);
    for (size_t i = 0; i < o->n_headers; i++)
        own_host = own_host || qr_slice_eq_nocase(o->headers[i].name, "host");
    if (!own_host) { /* the caller's Host wins, as with curl */
        p = put(p, "Host: ", 6);
        p = put(p, u->host,
                u->port_given && u->port == 80
                    ? (size_t) (u->name_len + (u->host[0] == '[' ? 2 : 0))
                    : u->host_len);
        p = put(p, "\r\n", 2);
    }
    for (size_t i = 0; i < o->n_headers; i++) {
        const struct qr_http_header *h = &o->headers[i];
        if (is_framing_header(h->name))
            continue; /* framing is ours */
        p = put(p, h->name.ptr, h->name.len);
        p = put(p, h->value.len ? ": " : ":", h->value.len ? 2 : 1);
        if (h->value.len)
            p = put(p, h->value.ptr, h->value.len);
        p = put(p, "\r\n", 2);
    }
    if (has_body)
        p += sprintf(p, "Content-Length: %zu\r\n", o->body.len);
    return put(p, "\r\n", 2);
}

enum qr_err qr_http_native_call_start(struct qr_http_native *c, const struct qr_http_call_opts *o,
                                      struct qr_diag *diag, struct qr_http_call **out)
{
    struct hn_url u;
    struct hn_host *host;

    *out = NULL;
    if (!url_parse(o->url, &u))
        return qr_diag_set(diag, QR_ERR_INVALID, "bad upstream url: not a plain http url");
    if (!(host = host_get(c, &u)))
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate an upstream call");
    bool head = strcmp(o->method, "HEAD") == 0;
    bool has_body = !head && (o->body.len || strcmp(o->method, "POST") == 0 ||
                              strcmp(o->method, "PUT") == 0 || strcmp(o->method, "PATCH") == 0);
    size_t room = strlen(o->method) + 1 + (u.target_len ? u.target_len : 1) + 11 + 6 + u.host_len +
                  2 + 40 /* Content-Length */ + 2;
    for (size_t i = 0; i < o->n_headers; i++)
        room += o->headers[i].name.len + 2 + o->headers[i].value.len + 2;
    struct hn_call *call = malloc(sizeof(*call) + u.safe_len + 1 + room);
    if (!call)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate an upstream call");
    memset(call, 0, sizeof(*call));
    call->impl = QR_HTTP_IMPL_NATIVE;
    call->client = c;
    call->host = host;
    call->head_req = head;
    call->on_response = o->on_response;
    call->on_data = o->on_data;
    call->on_done = o->on_done;
    call->arg = o->arg;
    call->body = o->body.len ? o->body.ptr : NULL;
    call->body_len = o->body.len;
    memcpy(call->storage, o->url, u.safe_len);
    call->storage[u.safe_len] = '\0';
    call->safe_url = call->storage;
    char *req = call->storage + u.safe_len + 1;
    call->req = req;
    call->req_len = (size_t) (format_head(req, o, &u, has_body) - req);
    call->timeout_ms = o->timeout_ms;
    call->connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : HN_CONNECT_DEFAULT;
    call->first_byte_timeout_ms = o->first_byte_timeout_ms;
    call->idle_timeout_ms = o->idle_timeout_ms;
    event_assign(&call->kick, c->base, -1, 0, on_kick, call);
    evtimer_assign(&call->timer, c->base, on_call_timer, call);
    if (o->timeout_ms) {
        call->deadline_ms = mono_ms() + o->timeout_ms;
        struct timeval tv = ms_tv(o->timeout_ms);
        evtimer_add(&call->timer, &tv);
    }
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    event_active(&call->kick, EV_TIMEOUT, 0); /* start from the loop, never inside start */
    *out = (struct qr_http_call *) call;
    return QR_OK;
}

void qr_http_native_call_pause(struct qr_http_call *pub)
{
    struct hn_call *call = (struct hn_call *) pub;
    if (call->cancelled || call->phase == PH_DONE || call->paused)
        return;
    call->paused = true;
    call->want_resume = false;
    if (call->conn && call->phase == PH_EXCHANGE)
        rev_set(call->conn, false); /* the upstream sees TCP back-pressure */
    if (call->phase == PH_EXCHANGE && (call->first_byte_timeout_ms || call->idle_timeout_ms))
        arm_timer(call); /* the pause does not count against the first byte or idle bound */
}

void qr_http_native_call_resume(struct qr_http_call *pub)
{
    struct hn_call *call = (struct hn_call *) pub;
    if (call->cancelled || call->phase == PH_DONE || !call->paused)
        return;
    call->paused = false;
    if (call->phase == PH_EXCHANGE) {   /* held data is delivered from the loop, in order */
        call->last_body_ms = mono_ms(); /* the idle bound restarts */
        if (call->sent_ms && !call->body_seen && call->first_byte_timeout_ms)
            call->sent_ms = call->last_body_ms;
        if (call->first_byte_timeout_ms || call->idle_timeout_ms)
            arm_timer(call);
        call->want_resume = true;
        event_active(&call->kick, EV_TIMEOUT, 0);
    } /* before the exchange, reading starts unpaused when the connection is ready */
}

void qr_http_native_call_cancel(struct qr_http_call *pub)
{
    struct hn_call *call = (struct hn_call *) pub;
    if (!call || call->cancelled || call->in_done)
        return;
    call->cancelled = true;
    event_del(&call->kick);
    evtimer_del(&call->timer);
    if (call->conn) { /* silence the connection until the reap closes it */
        rev_set(call->conn, false);
        wev_set(call->conn, false);
    }
    if (call->client->depth == 0)
        call_destroy(call);
    else
        call->client->need_reap = true; /* a callback is on the stack */
}
