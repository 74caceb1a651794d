/* Client subcommands for a running daemon: `models`, `ps`, `show MODEL`, `run MODEL [PROMPT]`.
 * Each is one HTTP exchange (run adds a poll of /v1/loaded while the model loads) through the
 * project's upstream client (core/http_client.h) on a private event loop, so chunked answers and
 * streams are handled as the daemon sends them. The daemon is --host URL, else
 * $QUANTUM_RUNTIME_HOST, else derived from $QUANTUM_RUNTIME_LISTEN, else http://127.0.0.1:11450;
 * the bearer token --token, else $QUANTUM_RUNTIME_AUTH_TOKEN. Listings print a table, or the
 * daemon's JSON with --json. `run` streams POST /api/chat to stdout as tokens arrive, thinking
 * dimmed (SGR 2) only when stdout is a terminal and NO_COLOR is unset; SIGINT cancels the request
 * and exits 130. Exit codes: client.h, docs/CLI.md. */
#include "cli/client.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <yyjson.h>

#include "core/buf.h"
#include "core/http_client.h"

#define DEFAULT_HOST "http://127.0.0.1:11450"
/* a listing, a final record or one streamed line larger than this is refused */
#define BODY_MAX           ((size_t) 64 << 20)
#define PROMPT_MAX         ((size_t) 16 << 20)
#define CONNECT_TIMEOUT_MS 5000
#define LISTING_TIMEOUT_MS 120000
#define POLL_MS            250

struct opts {
    const char *cmd;
    char host[512]; /* base URL without a trailing slash */
    const char *token;
    const char *pos[2]; /* positional arguments */
    int n_pos;
    bool json, think_set, think, hide_thinking;
};

/* ---- arguments ---- */

/* why NULL: --help, the usage on stdout. */
static int usage(const char *cmd, const char *why)
{
    FILE *f = why ? stderr : stdout;
    if (why)
        fprintf(f, "quantum-runtime %s: %s\n", cmd, why);
    fprintf(f, "usage: quantum-runtime models|ps [--json] [--host URL] [--token T]\n"
               "       quantum-runtime show MODEL [--json] [--host URL] [--token T]\n"
               "       quantum-runtime run MODEL [PROMPT] [--think|--no-think] "
               "[--hide-thinking] [--json] [--host URL] [--token T]\n"
               "(docs/CLI.md)\n");
    return QR_CLI_EXIT_USAGE;
}

/* The base URL: host:port or a URL, as OLLAMA_HOST takes it; a wildcard listen address means
 * this host's loopback. */
static void set_host(struct opts *o, const char *h)
{
    const char *scheme = strstr(h, "://") ? "" : "http://";
    if (!strncmp(h, "0.0.0.0:", 8)) {
        h += 7;
        scheme = "http://127.0.0.1";
    } else if (!strncmp(h, "[::]:", 5)) {
        h += 4;
        scheme = "http://[::1]";
    }
    snprintf(o->host, sizeof o->host, "%s%s", scheme, h);
    size_t n = strlen(o->host);
    while (n && o->host[n - 1] == '/')
        o->host[--n] = '\0';
}

static int parse(const char *cmd, int argc, char **argv, int max_pos, bool run, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->cmd = cmd;
    const char *host = getenv("QUANTUM_RUNTIME_HOST");
    const char *listen = getenv("QUANTUM_RUNTIME_LISTEN");
    o->token = getenv("QUANTUM_RUNTIME_AUTH_TOKEN");
    if (!host || !host[0])
        host = listen && listen[0] ? listen : DEFAULT_HOST;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--host") || !strcmp(a, "--token")) {
            if (i + 1 >= argc || !argv[i + 1][0])
                return usage(cmd, "an option needs a value");
            if (!strcmp(a, "--host"))
                host = argv[++i];
            else
                o->token = argv[++i];
        } else if (run && (!strcmp(a, "--think") || !strcmp(a, "--no-think"))) {
            o->think_set = true;
            o->think = !strcmp(a, "--think");
        } else if (run && !strcmp(a, "--hide-thinking")) {
            o->hide_thinking = true;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(cmd, NULL);
            return -1;
        } else if (a[0] == '-' && a[1]) {
            char why[160];
            snprintf(why, sizeof why, "unknown option '%.100s'", a);
            return usage(cmd, why);
        } else if (o->n_pos < max_pos) {
            o->pos[o->n_pos++] = a;
        } else {
            char why[160];
            snprintf(why, sizeof why, "unexpected argument '%.100s'", a);
            return usage(cmd, why);
        }
    }
    set_host(o, host);
    return 0;
}

/* ---- one exchange on a private loop ---- */

struct xfer {
    struct event_base *base;
    struct qr_http_client *client;
    struct qr_http_call *call;
    char url[1024];
    int status; /* 0 until the response head */
    bool done, interrupted, stream;
    enum qr_err err;
    struct qr_diag diag;
    struct qr_buf body; /* the whole body, or the unfinished line of a stream */
    /* called per complete NDJSON line of a 200 answer when stream is set; false aborts */
    bool (*on_line)(struct xfer *x, const char *line, size_t len);
    void (*on_first_byte)(struct xfer *x);
    void *arg;
    bool got_byte, primary; /* primary: its end stops the loop */
};

static bool xfer_response(struct qr_http_call *call, int status, const struct qr_http_header *h,
                          size_t n, void *arg)
{
    struct xfer *x = arg;
    x->status = status;
    return true;
}

static bool xfer_data(struct qr_http_call *call, const char *data, size_t len, void *arg)
{
    struct xfer *x = arg;
    if (!x->got_byte) {
        x->got_byte = true;
        if (x->on_first_byte)
            x->on_first_byte(x);
    }
    if (qr_buf_append(&x->body, data, len)) {
        qr_diag_set(&x->diag, QR_ERR_TOO_LARGE, "the answer is larger than %zu bytes", BODY_MAX);
        return false;
    }
    if (!x->stream || x->status != 200 || !x->on_line)
        return true;
    size_t start = 0;
    for (size_t i = 0; i < x->body.len; i++) {
        if (x->body.ptr[i] != '\n')
            continue;
        if (i > start && !x->on_line(x, x->body.ptr + start, i - start))
            return false;
        start = i + 1;
    }
    if (start) {
        memmove(x->body.ptr, x->body.ptr + start, x->body.len - start);
        x->body.len -= start;
        x->body.ptr[x->body.len] = '\0';
    }
    return true;
}

static void xfer_done(struct qr_http_call *call, enum qr_err err, const struct qr_diag *diag,
                      void *arg)
{
    struct xfer *x = arg;
    x->call = NULL;
    x->done = true;
    if (!x->err)
        x->err = err;
    if (err && diag && !x->diag.msg[0])
        snprintf(x->diag.msg, sizeof x->diag.msg, "%s", diag->msg);
    if (x->primary)
        event_base_loopbreak(x->base);
}

static enum qr_err xfer_start(struct xfer *x, const struct opts *o, const char *method,
                              const char *path, const char *body, uint64_t timeout_ms)
{
    snprintf(x->url, sizeof x->url, "%s%s", o->host, path);
    char auth[600] = "";
    struct qr_http_header h[3];
    size_t n = 0;
    h[n++] = (struct qr_http_header){qr_slice_str("Accept"), qr_slice_str("application/json")};
    if (body)
        h[n++] =
            (struct qr_http_header){qr_slice_str("Content-Type"), qr_slice_str("application/json")};
    if (o->token && o->token[0]) {
        snprintf(auth, sizeof auth, "Bearer %s", o->token);
        h[n++] = (struct qr_http_header){qr_slice_str("Authorization"), qr_slice_str(auth)};
    }
    x->status = 0;
    x->done = x->got_byte = false;
    x->err = QR_OK;
    x->diag.msg[0] = '\0';
    qr_buf_cleanup(&x->body);
    qr_buf_init(&x->body, BODY_MAX);
    struct qr_http_call_opts co = {
        .method = method,
        .url = x->url,
        .headers = h,
        .n_headers = n,
        .body = body ? qr_slice_str(body) : (struct qr_slice){0},
        .connect_timeout_ms = CONNECT_TIMEOUT_MS,
        .timeout_ms = timeout_ms,
        .on_response = xfer_response,
        .on_data = xfer_data,
        .on_done = xfer_done,
        .arg = x,
    };
    enum qr_err err = qr_http_call_start(x->client, &co, &x->diag, &x->call);
    if (err) {
        x->err = err;
        x->done = true;
    }
    return err;
}

static void on_sigint(evutil_socket_t fd, short what, void *arg)
{
    struct xfer *x = arg;
    x->interrupted = true;
    if (x->call) {
        qr_http_call_cancel(x->call);
        x->call = NULL;
    }
    event_base_loopbreak(x->base);
}

struct session {
    struct event_base *base;
    struct qr_http_client *client;
    struct event *sigint;
    struct xfer main;
};

static int session_open(struct session *s)
{
    memset(s, 0, sizeof *s);
    struct qr_diag d = {{0}};
    s->base = event_base_new();
    if (!s->base || qr_http_client_new(s->base, &d, &s->client)) {
        fprintf(stderr, "quantum-runtime: cannot create the HTTP client: %s\n", d.msg);
        if (s->base)
            event_base_free(s->base);
        s->base = NULL;
        return QR_CLI_EXIT_FAILED;
    }
    s->main.base = s->base;
    s->main.client = s->client;
    s->main.primary = true;
    qr_buf_init(&s->main.body, BODY_MAX);
    s->sigint = evsignal_new(s->base, SIGINT, on_sigint, &s->main);
    if (!s->sigint || event_add(s->sigint, NULL)) {
        fprintf(stderr, "quantum-runtime: cannot watch SIGINT\n");
        return QR_CLI_EXIT_FAILED;
    }
    return 0;
}

static void session_close(struct session *s)
{
    if (s->main.call)
        qr_http_call_cancel(s->main.call);
    qr_buf_cleanup(&s->main.body);
    if (s->sigint)
        event_free(s->sigint);
    if (s->client)
        qr_http_client_free(s->client);
    if (s->base)
        event_base_free(s->base);
}

/* The error text of a daemon answer in either API's shape, else the body itself. */
static void print_daemon_error(const struct opts *o, const struct xfer *x)
{
    yyjson_doc *d = yyjson_read(x->body.ptr ? x->body.ptr : "", x->body.len, 0);
    yyjson_val *e = yyjson_obj_get(yyjson_doc_get_root(d), "error");
    const char *msg =
        yyjson_is_str(e) ? yyjson_get_str(e) : yyjson_get_str(yyjson_obj_get(e, "message"));
    if (!msg)
        msg = x->body.len ? x->body.ptr : "(no body)";
    fprintf(stderr, "quantum-runtime %s: the daemon answered %d: %s\n", o->cmd, x->status, msg);
    if (x->status == 401)
        fprintf(stderr, "quantum-runtime %s: pass --token or set QUANTUM_RUNTIME_AUTH_TOKEN\n",
                o->cmd);
    yyjson_doc_free(d);
}

/* The exit status for a finished exchange; prints why it failed. model_404: a 404 means the
 * model is unknown (not a missing route). */
static int xfer_status(const struct opts *o, const struct xfer *x, bool model_404)
{
    if (x->interrupted) {
        fprintf(stderr, "quantum-runtime %s: interrupted\n", o->cmd);
        return QR_CLI_EXIT_INTERRUPTED;
    }
    if (!x->status) {
        bool reach = x->err == QR_ERR_UPSTREAM || x->err == QR_ERR_UPSTREAM_CONNECT_TIMEOUT;
        fprintf(stderr, "quantum-runtime %s: cannot reach the daemon at %s: %s\n", o->cmd, o->host,
                x->diag.msg[0] ? x->diag.msg : qr_err_str(x->err));
        return reach ? QR_CLI_EXIT_UNREACHABLE : QR_CLI_EXIT_FAILED;
    }
    if (x->status >= 300) {
        print_daemon_error(o, x);
        return x->status == 404 && model_404 ? QR_CLI_EXIT_NOT_FOUND : QR_CLI_EXIT_FAILED;
    }
    if (x->err) {
        fprintf(stderr, "quantum-runtime %s: the answer broke off: %s\n", o->cmd,
                x->diag.msg[0] ? x->diag.msg : qr_err_str(x->err));
        return QR_CLI_EXIT_FAILED;
    }
    return QR_CLI_EXIT_OK;
}

/* One buffered exchange; on success *out is the parsed body (owned by the caller). */
static int fetch_json(struct session *s, const struct opts *o, const char *method, const char *path,
                      const char *body, bool model_404, yyjson_doc **out)
{
    *out = NULL;
    if (!xfer_start(&s->main, o, method, path, body, LISTING_TIMEOUT_MS))
        event_base_dispatch(s->base);
    int rc = xfer_status(o, &s->main, model_404);
    if (rc)
        return rc;
    *out = yyjson_read(s->main.body.ptr ? s->main.body.ptr : "", s->main.body.len, 0);
    if (!*out) {
        fprintf(stderr, "quantum-runtime %s: the daemon's answer is not JSON\n", o->cmd);
        return QR_CLI_EXIT_FAILED;
    }
    return 0;
}

static void print_raw(const struct xfer *x)
{
    fwrite(x->body.ptr ? x->body.ptr : "", 1, x->body.len, stdout);
    if (!x->body.len || x->body.ptr[x->body.len - 1] != '\n')
        putchar('\n');
}

/* ---- tables ---- */

#define TABLE_COLS 6

/* Rows of cells printed with each column as wide as its widest cell (UTF-8 aware). */
struct table {
    size_t n_cols, n_rows, cap;
    char **cells; /* n_rows * n_cols, owned */
};

static void table_add(struct table *t, const char *const *row)
{
    if (t->n_rows == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->cells = realloc(t->cells, t->cap * t->n_cols * sizeof *t->cells);
        if (!t->cells)
            abort();
    }
    for (size_t c = 0; c < t->n_cols; c++) {
        t->cells[t->n_rows * t->n_cols + c] = strdup(row[c] ? row[c] : "");
        if (!t->cells[t->n_rows * t->n_cols + c])
            abort();
    }
    t->n_rows++;
}

static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char) *s & 0xC0) != 0x80;
    return w;
}

static void table_print_free(struct table *t)
{
    size_t width[TABLE_COLS] = {0};
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++) {
        size_t w = text_width(t->cells[i]);
        if (w > width[i % t->n_cols])
            width[i % t->n_cols] = w;
    }
    for (size_t r = 0; r < t->n_rows; r++) {
        for (size_t c = 0; c < t->n_cols; c++) {
            const char *cell = t->cells[r * t->n_cols + c];
            bool last = c + 1 == t->n_cols;
            printf("%s", cell);
            for (size_t pad = text_width(cell); !last && pad < width[c] + 3; pad++)
                putchar(' ');
        }
        putchar('\n');
    }
    for (size_t i = 0; i < t->n_rows * t->n_cols; i++)
        free(t->cells[i]);
    free(t->cells);
}

static const char *jstr(yyjson_val *o, const char *key, const char *dflt)
{
    const char *s = yyjson_get_str(yyjson_obj_get(o, key));
    return s && s[0] ? s : dflt;
}

static void fmt_size(char *buf, size_t n, double bytes)
{
    if (bytes <= 0)
        snprintf(buf, n, "-");
    else if (bytes >= 1e9)
        snprintf(buf, n, "%.1f GB", bytes / 1e9);
    else if (bytes >= 1e6)
        snprintf(buf, n, "%.1f MB", bytes / 1e6);
    else
        snprintf(buf, n, "%.0f KB", bytes / 1e3);
}

/* ---- models ---- */

/* CAPABILITIES: the keys of capability_states; STATE: how many of them are in each state. */
static void capability_cells(yyjson_val *states, struct qr_buf *caps, char *state, size_t n)
{
    static const char *const names[] = {"verified", "declared", "refuted", "blocked"};
    unsigned count[4] = {0};
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(states, i, max, k, v)
    {
        if (caps->len && qr_buf_puts(caps, ","))
            abort();
        const char *st = jstr(v, "state", "declared");
        /* a key in any state but declared carries it: tools.calling(verified) */
        if (qr_buf_puts(caps, yyjson_get_str(k)) ||
            (strcmp(st, "declared") && qr_buf_appendf(caps, "(%s)", st)))
            abort();
        for (size_t j = 0; j < 4; j++)
            count[j] += !strcmp(st, names[j]);
    }
    state[0] = '\0';
    for (size_t j = 0; j < 4; j++) {
        if (!count[j])
            continue;
        size_t used = strlen(state);
        snprintf(state + used, n - used, "%s%u %s", used ? ", " : "", count[j], names[j]);
    }
    if (!caps->len && qr_buf_puts(caps, "-"))
        abort();
    if (!state[0])
        snprintf(state, n, "-");
}

static void print_models(yyjson_doc *d)
{
    struct table t = {.n_cols = 5};
    table_add(&t, (const char *const[]){"NAME", "BACKEND", "CAPABILITIES", "CONTEXT", "STATE"});
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "data"), i, max, m)
    {
        struct qr_buf caps;
        qr_buf_init(&caps, 0);
        char state[128], ctx[32] = "-";
        capability_cells(yyjson_obj_get(m, "capability_states"), &caps, state, sizeof state);
        yyjson_val *cl = yyjson_obj_get(m, "context_length");
        if (yyjson_is_int(cl) && yyjson_get_sint(cl) > 0)
            snprintf(ctx, sizeof ctx, "%lld", (long long) yyjson_get_sint(cl));
        table_add(&t, (const char *const[]){jstr(m, "id", "?"), jstr(m, "backend", "-"), caps.ptr,
                                            ctx, state});
        qr_buf_cleanup(&caps);
    }
    table_print_free(&t);
}

int qr_cli_models(int argc, char **argv)
{
    struct opts o;
    int rc = parse("models", argc, argv, 0, false, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct session s;
    yyjson_doc *d = NULL;
    rc = session_open(&s);
    if (!rc)
        rc = fetch_json(&s, &o, "GET", "/v1/models", NULL, false, &d);
    if (!rc && o.json)
        print_raw(&s.main);
    else if (!rc)
        print_models(d);
    yyjson_doc_free(d);
    session_close(&s);
    return rc;
}

/* ---- ps ---- */

/* "4 minutes from now" from an RFC 3339 UTC time; "Forever" past year 9000. */
static void fmt_until(char *buf, size_t n, const char *when)
{
    struct tm tm = {0};
    if (!when || !strptime(when, "%Y-%m-%dT%H:%M:%S", &tm)) {
        snprintf(buf, n, "-");
        return;
    }
    if (tm.tm_year + 1900 >= 9000) {
        snprintf(buf, n, "Forever");
        return;
    }
    double left = difftime(timegm(&tm), time(NULL));
    if (left < 1)
        snprintf(buf, n, "Now");
    else if (left < 120)
        snprintf(buf, n, "%.0f seconds from now", left);
    else if (left < 7200)
        snprintf(buf, n, "%.0f minutes from now", left / 60);
    else
        snprintf(buf, n, "%.0f hours from now", left / 3600);
}

static void print_ps(yyjson_doc *ps, yyjson_doc *loaded)
{
    yyjson_val *lroot = yyjson_doc_get_root(loaded);
    struct table t = {.n_cols = 5};
    table_add(&t, (const char *const[]){"NAME", "BACKEND", "SIZE", "PROCESSOR", "UNTIL"});
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(ps), "models"), i, max, m)
    {
        double size = yyjson_get_num(yyjson_obj_get(m, "size"));
        double vram = yyjson_get_num(yyjson_obj_get(m, "size_vram"));
        char sz[32], proc[48], until[64];
        fmt_size(sz, sizeof sz, size);
        if (size <= 0 || vram <= 0)
            snprintf(proc, sizeof proc, "100%% CPU");
        else if (vram >= size)
            snprintf(proc, sizeof proc, "100%% GPU");
        else
            snprintf(proc, sizeof proc, "%.0f%%/%.0f%% CPU/GPU", 100 * (size - vram) / size,
                     100 * vram / size);
        const char *state = jstr(m, "state", "");
        if (!strcmp(state, "starting") || !strcmp(state, "loading"))
            snprintf(until, sizeof until, "Loading");
        else
            fmt_until(until, sizeof until, yyjson_get_str(yyjson_obj_get(m, "expires_at")));
        table_add(&t, (const char *const[]){jstr(m, "name", "?"), jstr(lroot, "backend", "-"), sz,
                                            proc, until});
    }
    table_print_free(&t);
}

int qr_cli_ps(int argc, char **argv)
{
    struct opts o;
    int rc = parse("ps", argc, argv, 0, false, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct session s;
    yyjson_doc *ps = NULL, *loaded = NULL;
    rc = session_open(&s);
    if (!rc)
        rc = fetch_json(&s, &o, "GET", "/api/ps", NULL, false, &ps);
    if (!rc && o.json) {
        print_raw(&s.main);
    } else if (!rc) {
        /* the backend column only: a daemon that cannot answer /v1/loaded still lists */
        if (!xfer_start(&s.main, &o, "GET", "/v1/loaded", NULL, LISTING_TIMEOUT_MS))
            event_base_dispatch(s.base);
        if (s.main.status == 200 && !s.main.err)
            loaded = yyjson_read(s.main.body.ptr ? s.main.body.ptr : "", s.main.body.len, 0);
        print_ps(ps, loaded);
    }
    yyjson_doc_free(ps);
    yyjson_doc_free(loaded);
    session_close(&s);
    return rc;
}

/* ---- show ---- */

static void print_show(yyjson_doc *d)
{
    yyjson_val *root = yyjson_doc_get_root(d), *det = yyjson_obj_get(root, "details");
    yyjson_val *info = yyjson_obj_get(root, "model_info");
    const char *arch = jstr(info, "general.architecture", jstr(det, "family", "-"));
    printf("  Model\n");
    printf("    %-20s %s\n", "architecture", arch);
    printf("    %-20s %s\n", "parameters", jstr(det, "parameter_size", "-"));
    char key[160];
    static const char *const nums[][2] = {{"context_length", "context length"},
                                          {"embedding_length", "embedding length"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, nums[i][0]);
        yyjson_val *v = yyjson_obj_get(info, key);
        if (yyjson_is_int(v))
            printf("    %-20s %lld\n", nums[i][1], (long long) yyjson_get_sint(v));
    }
    printf("    %-20s %s\n", "quantization", jstr(det, "quantization_level", "-"));
    yyjson_val *caps = yyjson_obj_get(root, "capabilities");
    if (yyjson_arr_size(caps)) {
        printf("\n  Capabilities\n");
        size_t i, max;
        yyjson_val *c;
        yyjson_arr_foreach(caps, i, max, c) printf("    %s\n", yyjson_get_str(c));
    }
    yyjson_val *states =
        yyjson_obj_get(yyjson_obj_get(root, "quantum_runtime"), "capability_states");
    if (yyjson_obj_size(states)) {
        printf("\n  Capability states\n");
        size_t i, max;
        yyjson_val *k, *v;
        yyjson_obj_foreach(states, i, max, k, v)
        {
            const char *reason = jstr(v, "reason", jstr(v, "detail", NULL));
            printf("    %-28s %s%s%s\n", yyjson_get_str(k), jstr(v, "state", "-"),
                   reason ? ": " : "", reason ? reason : "");
        }
    }
}

int qr_cli_show(int argc, char **argv)
{
    struct opts o;
    int rc = parse("show", argc, argv, 1, false, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (o.n_pos != 1)
        return usage("show", "a MODEL is required");
    struct qr_buf body;
    qr_buf_init(&body, 0);
    if (qr_buf_puts(&body, "{\"model\":\"") ||
        qr_buf_append_json_str(&body, o.pos[0], strlen(o.pos[0])) || qr_buf_puts(&body, "\"}"))
        abort();
    struct session s;
    yyjson_doc *d = NULL;
    rc = session_open(&s);
    if (!rc)
        rc = fetch_json(&s, &o, "POST", "/api/show", body.ptr, true, &d);
    if (!rc && o.json)
        print_raw(&s.main);
    else if (!rc)
        print_show(d);
    yyjson_doc_free(d);
    qr_buf_cleanup(&body);
    session_close(&s);
    return rc;
}

/* ---- run ---- */

struct run_state {
    const struct opts *o;
    struct session *s;
    bool color, in_thinking, any_output, last_nl, thinking_nl;
    char error[512];
    /* model load progress */
    struct xfer poll;
    struct event *tick;
    struct timespec t0;
    bool tty_err, load_seen, drawn;
    char load_state[32];
    unsigned frame;
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) (t.tv_sec - t0->tv_sec) + (double) (t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void out_text(struct run_state *r, const char *s, size_t n)
{
    if (!n)
        return;
    fwrite(s, 1, n, stdout);
    r->any_output = true;
    r->last_nl = s[n - 1] == '\n';
}

static void end_thinking(struct run_state *r)
{
    if (!r->in_thinking)
        return;
    r->in_thinking = false;
    if (r->color)
        fputs("\x1b[0m", stdout);
    /* one blank line between the thinking and the answer */
    out_text(r, r->last_nl ? "\n" : "\n\n", r->last_nl ? 1 : 2);
}

static bool run_line(struct xfer *x, const char *line, size_t len)
{
    struct run_state *r = x->arg;
    yyjson_doc *d = yyjson_read(line, len, 0);
    yyjson_val *root = yyjson_doc_get_root(d);
    if (!yyjson_is_obj(root)) {
        snprintf(r->error, sizeof r->error, "the daemon sent a line that is not JSON");
        yyjson_doc_free(d);
        return false;
    }
    yyjson_val *err = yyjson_obj_get(root, "error");
    if (err) {
        const char *m = yyjson_is_str(err) ? yyjson_get_str(err)
                                           : yyjson_get_str(yyjson_obj_get(err, "message"));
        snprintf(r->error, sizeof r->error, "%s", m ? m : "error");
    }
    yyjson_val *msg = yyjson_obj_get(root, "message");
    yyjson_val *th = yyjson_obj_get(msg, "thinking"), *ct = yyjson_obj_get(msg, "content");
    if (yyjson_get_len(th) && !r->o->hide_thinking) {
        if (!r->in_thinking && r->color)
            fputs("\x1b[2m", stdout);
        r->in_thinking = true;
        out_text(r, yyjson_get_str(th), yyjson_get_len(th));
    }
    if (yyjson_get_len(ct)) {
        end_thinking(r);
        out_text(r, yyjson_get_str(ct), yyjson_get_len(ct));
    }
    if (yyjson_get_bool(yyjson_obj_get(root, "done")))
        end_thinking(r);
    fflush(stdout);
    yyjson_doc_free(d);
    return true;
}

/* The state of MODEL in a /v1/loaded answer ("" when not listed). */
static void loaded_state(const struct xfer *p, const char *model, char *out, size_t n)
{
    out[0] = '\0';
    yyjson_doc *d = yyjson_read(p->body.ptr ? p->body.ptr : "", p->body.len, 0);
    size_t i, max;
    yyjson_val *m;
    yyjson_arr_foreach(yyjson_obj_get(yyjson_doc_get_root(d), "models"), i, max, m)
    {
        if (!strcmp(jstr(m, "model", ""), model))
            snprintf(out, n, "%s", jstr(m, "state", ""));
    }
    yyjson_doc_free(d);
}

static void clear_progress(struct run_state *r)
{
    if (r->drawn)
        fputs("\r\x1b[K", stderr);
    r->drawn = false;
}

/* Before the first byte of the answer: poll /v1/loaded and show the model's load as a spinner
 * with the elapsed time (stderr is a terminal) or one line per state (it is not). */
static void run_tick(evutil_socket_t fd, short what, void *arg)
{
    struct run_state *r = arg;
    const char *model = r->o->pos[0];
    if (r->s->main.got_byte || r->s->main.done)
        return;
    if (r->poll.done && r->poll.status == 200) {
        char st[32];
        loaded_state(&r->poll, model, st, sizeof st);
        bool loading = !strcmp(st, "starting") || !strcmp(st, "loading");
        if (loading && strcmp(st, r->load_state)) {
            r->load_seen = true;
            if (!r->tty_err)
                fprintf(stderr, "quantum-runtime run: %s: %s\n", model, st);
        }
        snprintf(r->load_state, sizeof r->load_state, "%s", st);
    }
    if (!r->poll.call)
        xfer_start(&r->poll, r->o, "GET", "/v1/loaded", NULL, LISTING_TIMEOUT_MS);
    double t = since(&r->t0);
    if (r->tty_err && (r->load_seen || t >= 1.0)) {
        static const char spin[] = "|/-\\";
        bool loading = !strcmp(r->load_state, "starting") || !strcmp(r->load_state, "loading");
        fprintf(stderr, "\r\x1b[K%c %s %s (%.1fs)", spin[r->frame++ % 4],
                loading ? "loading" : "waiting for", model, t);
        if (loading)
            fprintf(stderr, ": %s", r->load_state);
        r->drawn = true;
    }
}

static void run_first_byte(struct xfer *x)
{
    struct run_state *r = x->arg;
    clear_progress(r);
    if (r->load_seen && !r->tty_err)
        fprintf(stderr, "quantum-runtime run: %s: loaded (%.1fs)\n", r->o->pos[0], since(&r->t0));
    if (r->poll.call) {
        qr_http_call_cancel(r->poll.call);
        r->poll.call = NULL;
    }
}

static char *read_prompt(const struct opts *o)
{
    if (o->n_pos == 2) {
        char *p = strdup(o->pos[1]);
        if (!p)
            abort();
        return p;
    }
    if (isatty(STDIN_FILENO))
        fprintf(stderr, "quantum-runtime run: reading the prompt from stdin (end with Ctrl-D)\n");
    struct qr_buf b;
    qr_buf_init(&b, PROMPT_MAX);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) {
        if (qr_buf_append(&b, chunk, n)) {
            fprintf(stderr, "quantum-runtime run: the prompt is larger than %zu bytes\n",
                    PROMPT_MAX);
            return NULL;
        }
    }
    while (b.len && (b.ptr[b.len - 1] == '\n' || b.ptr[b.len - 1] == '\r'))
        b.ptr[--b.len] = '\0';
    if (!b.len) {
        qr_buf_cleanup(&b);
        fprintf(stderr, "quantum-runtime run: the prompt is empty\n");
        return NULL;
    }
    return qr_buf_take(&b, NULL);
}

static char *chat_body(const struct opts *o, const char *prompt)
{
    struct qr_buf b;
    qr_buf_init(&b, 0);
    if (qr_buf_puts(&b, "{\"model\":\"") ||
        qr_buf_append_json_str(&b, o->pos[0], strlen(o->pos[0])) ||
        qr_buf_puts(&b, "\",\"messages\":[{\"role\":\"user\",\"content\":\"") ||
        qr_buf_append_json_str(&b, prompt, strlen(prompt)) ||
        qr_buf_appendf(&b, "\"}],\"stream\":%s", o->json ? "false" : "true") ||
        (o->think_set && qr_buf_appendf(&b, ",\"think\":%s", o->think ? "true" : "false")) ||
        qr_buf_puts(&b, "}"))
        abort();
    return qr_buf_take(&b, NULL);
}

static int run_exchange(struct session *s, struct run_state *r, const char *body)
{
    const struct opts *o = r->o;
    s->main.stream = !o->json;
    s->main.on_line = run_line;
    s->main.on_first_byte = run_first_byte;
    s->main.arg = r;
    r->poll = (struct xfer){.base = s->base, .client = s->client};
    qr_buf_init(&r->poll.body, BODY_MAX);
    r->tick = event_new(s->base, -1, EV_PERSIST, run_tick, r);
    struct timeval iv = {0, POLL_MS * 1000};
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    if (!r->tick || event_add(r->tick, &iv))
        abort();
    /* no overall timeout: a first load may take minutes; SIGINT ends it */
    if (!xfer_start(&s->main, o, "POST", "/api/chat", body, 0))
        event_base_dispatch(s->base);
    clear_progress(r);
    if (r->poll.call)
        qr_http_call_cancel(r->poll.call);
    event_free(r->tick);
    qr_buf_cleanup(&r->poll.body);
    if (r->in_thinking && r->color)
        fputs("\x1b[0m", stdout);
    if (r->any_output && !r->last_nl)
        putchar('\n');
    fflush(stdout);
    if (r->error[0] && s->main.status == 200 && !s->main.interrupted) {
        fprintf(stderr, "quantum-runtime run: %s\n", r->error); /* in the stream */
        return QR_CLI_EXIT_FAILED;
    }
    int rc = xfer_status(o, &s->main, true);
    if (!rc && o->json)
        print_raw(&s->main);
    return rc;
}

int qr_cli_run(int argc, char **argv)
{
    struct opts o;
    int rc = parse("run", argc, argv, 2, true, &o);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (o.n_pos < 1)
        return usage("run", "a MODEL is required");
    char *prompt = read_prompt(&o);
    if (!prompt)
        return QR_CLI_EXIT_USAGE;
    char *body = chat_body(&o, prompt);
    free(prompt);
    const char *nc = getenv("NO_COLOR");
    struct run_state r = {
        .o = &o,
        .color = isatty(STDOUT_FILENO) && !(nc && nc[0]),
        .tty_err = isatty(STDERR_FILENO),
        .last_nl = true,
    };
    struct session s;
    rc = session_open(&s);
    r.s = &s;
    if (!rc)
        rc = run_exchange(&s, &r, body);
    session_close(&s);
    free(body);
    return rc;
}
