/* A scripted HTTP/1.1 test server on the test's own event loop (raw evconnlistener and
 * bufferevents, so a test can send exact bytes, space chunks out with timers, cut a body mid-chunk
 * or never answer). Shared by the upstream-client tests (test_http_client.c, test_http_native.c);
 * header-only because each test is its own executable. */
#ifndef QR_TEST_SCRIPTED_SERVER_H
#define QR_TEST_SCRIPTED_SERVER_H

/* --- scripted test server --------------------------------------------------------------------- */

struct tconn;
typedef void (*treq_fn)(struct tconn *tc);

struct tsrv {
    struct event_base *base;
    struct evconnlistener *lis;
    uint16_t port;
    treq_fn on_request;
    int n_accepted;
    int n_requests;
    int n_conns;
    int n_late_chunks; /* h_stream's second chunk has been sent */
    char last_method[16];
    char last_target[256];
    struct qr_buf last_head; /* request line + header lines of the last request */
    struct qr_buf last_body;
    struct tconn *conns;
};

struct tconn {
    struct tsrv *srv;
    struct tconn *next, *prev;
    struct bufferevent *bev;
    struct event *timer;
    treq_fn timer_fn;
    int step;
    bool close_after_write;
    bool in_body;
    size_t body_need;
    char target[256];
};

static void tconn_free(struct tconn *tc)
{
    struct tsrv *s = tc->srv;
    if (tc->timer)
        event_free(tc->timer);
    bufferevent_free(tc->bev);
    if (tc->prev)
        tc->prev->next = tc->next;
    else
        s->conns = tc->next;
    if (tc->next)
        tc->next->prev = tc->prev;
    s->n_conns--;
    free(tc);
}

static void tsend(struct tconn *tc, const char *s)
{
    bufferevent_write(tc->bev, s, strlen(s));
}

static void tsendf(struct tconn *tc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tsendf(struct tconn *tc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    evbuffer_add_vprintf(bufferevent_get_output(tc->bev), fmt, ap);
    va_end(ap);
}

/* Close once everything queued has gone out. */
static void tclose_after_flush(struct tconn *tc)
{
    if (evbuffer_get_length(bufferevent_get_output(tc->bev)) == 0)
        tconn_free(tc);
    else
        tc->close_after_write = true;
}

static void ttimer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct tconn *tc = arg;
    tc->timer_fn(tc);
}

static void tlater(struct tconn *tc, int ms, treq_fn fn)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (!tc->timer)
        tc->timer = evtimer_new(tc->srv->base, ttimer_cb, tc);
    tc->timer_fn = fn;
    evtimer_add(tc->timer, &tv);
}

static bool tparse_head(struct tconn *tc, struct evbuffer *in)
{
    struct tsrv *s = tc->srv;
    struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
    if (end.pos < 0)
        return false;
    size_t n = (size_t) end.pos + 4;
    char *head = malloc(n + 1);
    evbuffer_remove(in, head, n);
    head[n] = '\0';
    qr_buf_cleanup(&s->last_head);
    qr_buf_append(&s->last_head, head, n);
    sscanf(head, "%15s %255s", s->last_method, tc->target);
    snprintf(s->last_target, sizeof(s->last_target), "%s", tc->target);
    tc->body_need = 0;
    for (char *line = strstr(head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n"))
        if (strncasecmp(line + 2, "Content-Length:", 15) == 0)
            tc->body_need = strtoul(line + 17, NULL, 10);
    free(head);
    tc->in_body = true;
    return true;
}

static void tread_cb(struct bufferevent *bev, void *arg)
{
    struct tconn *tc = arg;
    struct tsrv *s = tc->srv;
    struct evbuffer *in = bufferevent_get_input(bev);

    if (!tc->in_body && !tparse_head(tc, in))
        return;
    if (evbuffer_get_length(in) < tc->body_need)
        return;
    qr_buf_cleanup(&s->last_body);
    char *body = malloc(tc->body_need + 1);
    evbuffer_remove(in, body, tc->body_need);
    qr_buf_append(&s->last_body, body, tc->body_need);
    free(body);
    tc->in_body = false;
    tc->step = 0;
    s->n_requests++;
    s->on_request(tc); /* may free tc */
}

static void twrite_cb(struct bufferevent *bev, void *arg)
{
    struct tconn *tc = arg;
    if (tc->close_after_write)
        tconn_free(tc);
}

static void tevent_cb(struct bufferevent *bev, short what, void *arg)
{
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        tconn_free(arg);
}

static void taccept_cb(struct evconnlistener *lis, evutil_socket_t fd, struct sockaddr *sa,
                       int socklen, void *arg)
{
    struct tsrv *s = arg;
    struct tconn *tc = calloc(1, sizeof(*tc));
    tc->srv = s;
    tc->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    bufferevent_setcb(tc->bev, tread_cb, twrite_cb, tevent_cb, tc);
    bufferevent_enable(tc->bev, EV_READ | EV_WRITE);
    tc->next = s->conns;
    if (s->conns)
        s->conns->prev = tc;
    s->conns = tc;
    s->n_accepted++;
    s->n_conns++;
}

static void tsrv_start(struct tsrv *s, struct event_base *base)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    memset(s, 0, sizeof(*s));
    s->base = base;
    qr_buf_init(&s->last_head, 0);
    qr_buf_init(&s->last_body, 0);
    s->lis = evconnlistener_new_bind(base, taccept_cb, s, LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE,
                                     64, (struct sockaddr *) &sin, sizeof(sin));
    assert_non_null(s->lis);
    socklen_t len = sizeof(sin);
    getsockname(evconnlistener_get_fd(s->lis), (struct sockaddr *) &sin, &len);
    s->port = ntohs(sin.sin_port);
}

static void tsrv_stop(struct tsrv *s)
{
    while (s->conns)
        tconn_free(s->conns);
    evconnlistener_free(s->lis);
    qr_buf_cleanup(&s->last_head);
    qr_buf_cleanup(&s->last_body);
}

/* --- server scripts --------------------------------------------------------------------------- */

static void h_hello(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\n"
              "Content-Type: text/plain\r\n"
              "X-Mixed-Case:   Some Value  \r\n"
              "X-Empty:\r\n"
              "Content-Length: 11\r\n"
              "\r\n"
              "hello world");
}

static void h_echo(struct tconn *tc)
{
    struct qr_buf *b = &tc->srv->last_body;
    tsendf(tc, "HTTP/1.1 201 Created\r\nContent-Length: %zu\r\n\r\n", b->len);
    bufferevent_write(tc->bev, b->ptr ? b->ptr : "", b->len);
}

static void h_path(struct tconn *tc)
{
    tsendf(tc, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s", strlen(tc->target), tc->target);
}

static void h_stream_second(struct tconn *tc)
{
    tc->srv->n_late_chunks++;
    tsend(tc, "6\r\nsecond\r\n0\r\n\r\n");
}

static void h_stream(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
    tlater(tc, 200, h_stream_second);
}

static void h_endless_tick(struct tconn *tc)
{
    tsendf(tc, "6\r\ntick%02d\r\n", tc->step++ % 100);
    tlater(tc, 20, h_endless_tick);
}

static void h_endless(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    h_endless_tick(tc);
}

#define BIG_LEN (256 * 1024)

static char big_byte(size_t i)
{
    return (char) ('a' + (i * 7 + i / 26) % 26);
}

static void h_big(struct tconn *tc)
{
    char *body = malloc(BIG_LEN);
    for (size_t i = 0; i < BIG_LEN; i++)
        body[i] = big_byte(i);
    tsendf(tc, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", BIG_LEN);
    bufferevent_write(tc->bev, body, BIG_LEN);
    free(body);
}

static void h_404(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 24\r\n"
              "\r\n{\"error\":\"no such model\"}");
}

static void h_silent(struct tconn *tc)
{
}

static void h_cut(struct tconn *tc)
{
    tsend(tc,
          "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n10\r\nonly-half");
    tclose_after_flush(tc);
}

static void h_interim(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\n"
              "HTTP/1.1 200 OK\r\nX-Final: yes\r\nX-Folded: first\r\n  second\r\n"
              "Content-Length: 2\r\n\r\nok");
}

static void h_204(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 204 No Content\r\nX-Trace: abc\r\n\r\n");
}

static void h_huge_head(struct tconn *tc)
{
    tsend(tc, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 2000; i++)
        tsendf(tc, "X-Filler-%04d: %0600d\r\n", i, 0);
    tsend(tc, "Content-Length: 0\r\n\r\n");
}

/* --- client-side recorder --------------------------------------------------------------------- */

struct fx;

#endif
