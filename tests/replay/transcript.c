/* Transcript loading for qr-replay: turns the JSON transcript files into exchanges, checking
 * every key strictly so that a typo in a test fixture fails loudly at start-up instead of
 * silently changing what the fake upstream does. Numbers are read raw so that JSON bodies given
 * as objects are written back byte for byte as the transcript spells them. */
#include "replay.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yyjson.h>

#define CHUNKS_MAX   100000u
#define HEADERS_MAX  1000u
#define DELAY_MAX_MS (3600u * 1000u)

/* Where a parse error happened, for diagnostics. */
struct ctx {
    const char *file;
    size_t index;
    struct qr_diag *diag;
};

static char *dup_n(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p)
        abort();
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static enum qr_err bad(struct ctx *c, const char *what, const char *key)
{
    return qr_diag_set(c->diag, QR_ERR_INVALID, "cannot load '%s': exchange %zu: %s '%s'", c->file,
                       c->index, what, key);
}

/* Integer from a raw number value within [lo, hi]. */
static enum qr_err get_int(struct ctx *c, yyjson_val *v, const char *key, long lo, long hi,
                           long *out)
{
    if (!yyjson_is_raw(v))
        return bad(c, "expected an integer for", key);
    const char *s = yyjson_get_raw(v);
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || !end || *end || x < lo || x > hi)
        return bad(c, "integer out of range for", key);
    *out = x;
    return QR_OK;
}

static enum qr_err get_str(struct ctx *c, yyjson_val *v, const char *key, char **out,
                           size_t *out_len)
{
    if (!yyjson_is_str(v))
        return bad(c, "expected a string for", key);
    *out = dup_n(yyjson_get_str(v), yyjson_get_len(v));
    if (out_len)
        *out_len = yyjson_get_len(v);
    return QR_OK;
}

/* Body text: a string as is, any other JSON value serialized compactly. */
static enum qr_err get_body(struct ctx *c, yyjson_val *v, const char *key, char **out,
                            size_t *out_len)
{
    if (yyjson_is_str(v))
        return get_str(c, v, key, out, out_len);
    size_t n = 0;
    char *s = yyjson_val_write(v, YYJSON_WRITE_ALLOW_INVALID_UNICODE, &n);
    if (!s)
        return bad(c, "cannot serialize", key);
    *out = dup_n(s, n);
    *out_len = n;
    free(s);
    return QR_OK;
}

static bool is_tchar(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

static bool is_token(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!is_tchar((unsigned char) *s))
            return false;
    return true;
}

static bool has_crlf(const char *s, size_t n)
{
    return memchr(s, '\r', n) || memchr(s, '\n', n);
}

static enum qr_err parse_match(struct ctx *c, yyjson_val *m, struct qr_replay_exchange *ex)
{
    if (!yyjson_is_obj(m))
        return bad(c, "expected an object for", "match");
    size_t i, max;
    yyjson_val *k, *v;
    enum qr_err err = QR_OK;
    yyjson_obj_foreach(m, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (strcmp(key, "method") == 0) {
            if (!(err = get_str(c, v, key, &ex->method, NULL)) && !is_token(ex->method))
                err = bad(c, "not a method token in", key);
        } else if (strcmp(key, "path") == 0) {
            if (!(err = get_str(c, v, key, &ex->path, NULL)) && ex->path[0] != '/')
                err = bad(c, "path must start with '/' in", key);
        } else if (strcmp(key, "body_contains") == 0) {
            if (!(err = get_str(c, v, key, &ex->body_contains, &ex->body_contains_len)) &&
                !ex->body_contains_len)
                err = bad(c, "empty string in", key);
        } else if (strcmp(key, "times") == 0) {
            err = get_int(c, v, key, 1, LONG_MAX, &ex->times);
        } else {
            err = bad(c, "unknown key in match:", key);
        }
        if (err)
            return err;
    }
    return QR_OK;
}

static enum qr_err add_header(struct ctx *c, struct qr_replay_exchange *ex, const char *name,
                              yyjson_val *v)
{
    if (ex->n_headers >= HEADERS_MAX)
        return bad(c, "too many headers at", name);
    const char *val;
    size_t len;
    if (yyjson_is_str(v)) {
        val = yyjson_get_str(v);
        len = yyjson_get_len(v);
    } else if (yyjson_is_raw(v)) {
        val = yyjson_get_raw(v);
        len = strlen(val);
    } else {
        return bad(c, "header value must be a string, number or array of strings:", name);
    }
    if (has_crlf(val, len) || memchr(val, '\0', len))
        return bad(c, "CR, LF or NUL in the value of header", name);
    ex->headers = realloc(ex->headers, (ex->n_headers + 1) * sizeof(*ex->headers));
    if (!ex->headers)
        abort();
    ex->headers[ex->n_headers].name = dup_n(name, strlen(name));
    ex->headers[ex->n_headers].value = dup_n(val, len);
    ex->n_headers++;
    return QR_OK;
}

static enum qr_err parse_headers(struct ctx *c, yyjson_val *h, struct qr_replay_exchange *ex)
{
    if (!yyjson_is_obj(h))
        return bad(c, "expected an object for", "headers");
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(h, i, max, k, v)
    {
        const char *name = yyjson_get_str(k);
        if (!is_token(name))
            return bad(c, "not a header name token:", name);
        enum qr_err err = QR_OK;
        if (yyjson_is_arr(v)) {
            size_t j, jmax;
            yyjson_val *e;
            yyjson_arr_foreach(v, j, jmax, e)
            {
                if (!yyjson_is_str(e))
                    return bad(c, "header value array must hold strings:", name);
                if ((err = add_header(c, ex, name, e)))
                    return err;
            }
        } else if ((err = add_header(c, ex, name, v))) {
            return err;
        }
    }
    return QR_OK;
}

/* Chunk bytes from "data" (raw string), "ndjson" (value + "\n") or "sse" ("data: " value
 * "\n\n"); ndjson and sse values that are strings are used as they are, others serialized. */
static enum qr_err chunk_data(struct ctx *c, const char *key, yyjson_val *v,
                              struct qr_replay_chunk *ch)
{
    if (key[0] == 'd')
        return get_str(c, v, key, &ch->data, &ch->len);
    char *s = NULL;
    size_t n = 0;
    enum qr_err err = get_body(c, v, key, &s, &n);
    if (err)
        return err;
    struct qr_buf b;
    qr_buf_init(&b, 0);
    if (key[0] == 's')
        qr_buf_puts(&b, "data: ");
    qr_buf_append(&b, s, n);
    qr_buf_puts(&b, key[0] == 's' ? "\n\n" : "\n");
    free(s);
    if (!b.ptr)
        abort();
    ch->data = qr_buf_take(&b, &ch->len);
    return QR_OK;
}

/* One chunk: {"data"|"ndjson"|"sse": ..., "delay_ms": N}. */
static enum qr_err parse_chunk(struct ctx *c, yyjson_val *o, struct qr_replay_chunk *ch)
{
    if (!yyjson_is_obj(o))
        return bad(c, "expected an object in", "chunks");
    size_t i, max, kinds = 0;
    yyjson_val *k, *v;
    enum qr_err err = QR_OK;
    yyjson_obj_foreach(o, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (strcmp(key, "delay_ms") == 0) {
            long d = 0;
            err = get_int(c, v, key, 0, DELAY_MAX_MS, &d);
            ch->delay_ms = (unsigned) d;
        } else if (strcmp(key, "data") == 0 || strcmp(key, "ndjson") == 0 ||
                   strcmp(key, "sse") == 0) {
            err = kinds++ ? bad(c, "a chunk needs exactly one of data, ndjson, sse; extra", key)
                          : chunk_data(c, key, v, ch);
        } else {
            err = bad(c, "unknown key in chunk:", key);
        }
        if (err)
            return err;
    }
    if (!kinds)
        return bad(c, "a chunk needs one of data, ndjson, sse in", "chunks");
    return QR_OK;
}

static enum qr_err parse_chunks(struct ctx *c, yyjson_val *a, struct qr_replay_exchange *ex)
{
    if (!yyjson_is_arr(a))
        return bad(c, "expected an array for", "chunks");
    size_t n = yyjson_arr_size(a);
    if (n > CHUNKS_MAX)
        return bad(c, "too many entries in", "chunks");
    ex->chunks = calloc(n ? n : 1, sizeof(*ex->chunks));
    if (!ex->chunks)
        abort();
    size_t i, max;
    yyjson_val *v;
    yyjson_arr_foreach(a, i, max, v)
    {
        ex->n_chunks = i + 1; /* so cleanup frees what parse_chunk set */
        enum qr_err err = parse_chunk(c, v, &ex->chunks[i]);
        if (err)
            return err;
    }
    return QR_OK;
}

static enum qr_err parse_enum(struct ctx *c, yyjson_val *v, const char *key,
                              const char *const *names, size_t n, int *out)
{
    if (yyjson_is_str(v))
        for (size_t i = 0; i < n; i++)
            if (strcmp(yyjson_get_str(v), names[i]) == 0) {
                *out = (int) i;
                return QR_OK;
            }
    return bad(c, "unknown value for", key);
}

static const char *const framing_names[] = {"chunked", "length", "close"};
static const char *const fault_names[] = {"none",           "close_before_headers",
                                          "close_mid_body", "malformed_chunk",
                                          "stall_forever",  "stall_after_chunks"};

static enum qr_err parse_response_key(struct ctx *c, const char *key, yyjson_val *v,
                                      struct qr_replay_exchange *ex, bool *has_body)
{
    long x = 0;
    int e = 0;
    enum qr_err err;
    if (strcmp(key, "status") == 0) {
        err = get_int(c, v, key, 100, 999, &x);
        ex->status = (int) x;
    } else if (strcmp(key, "reason") == 0) {
        if (!(err = get_str(c, v, key, &ex->reason, NULL)) &&
            has_crlf(ex->reason, strlen(ex->reason)))
            err = bad(c, "CR or LF in", key);
    } else if (strcmp(key, "headers") == 0) {
        err = parse_headers(c, v, ex);
    } else if (strcmp(key, "version") == 0) {
        static const char *const versions[] = {"HTTP/1.1", "HTTP/1.0"};
        err = parse_enum(c, v, key, versions, 2, &e);
        ex->http10 = e == 1;
    } else if (strcmp(key, "framing") == 0) {
        err = parse_enum(c, v, key, framing_names, QR_ARRAY_LEN(framing_names), &e);
        ex->framing = (enum qr_replay_framing) e;
    } else if (strcmp(key, "fault") == 0) {
        err = parse_enum(c, v, key, fault_names, QR_ARRAY_LEN(fault_names), &e);
        ex->fault = (enum qr_replay_fault) e;
    } else if (strcmp(key, "stall_ms") == 0) {
        err = get_int(c, v, key, 0, DELAY_MAX_MS, &x);
        ex->stall_ms = (unsigned) x;
    } else if (strcmp(key, "body") == 0 || strcmp(key, "chunks") == 0) {
        if (*has_body)
            return bad(c, "give either body or chunks, not both; extra", key);
        *has_body = true;
        if (key[0] == 'c')
            return parse_chunks(c, v, ex);
        ex->chunks = calloc(1, sizeof(*ex->chunks));
        if (!ex->chunks)
            abort();
        ex->n_chunks = 1;
        err = get_body(c, v, key, &ex->chunks[0].data, &ex->chunks[0].len);
    } else {
        err = bad(c, "unknown key in response:", key);
    }
    return err;
}

static enum qr_err parse_response(struct ctx *c, yyjson_val *r, struct qr_replay_exchange *ex)
{
    if (!yyjson_is_obj(r))
        return bad(c, "expected an object for", "response");
    size_t i, max;
    yyjson_val *k, *v;
    bool has_body = false;
    yyjson_obj_foreach(r, i, max, k, v)
    {
        enum qr_err err = parse_response_key(c, yyjson_get_str(k), v, ex, &has_body);
        if (err)
            return err;
    }
    if (ex->fault == QR_REPLAY_FAULT_MALFORMED_CHUNK && ex->framing != QR_REPLAY_CHUNKED)
        return bad(c, "fault needs framing 'chunked':", "malformed_chunk");
    if (ex->fault == QR_REPLAY_FAULT_CLOSE_MID_BODY && ex->framing == QR_REPLAY_CLOSE)
        return bad(c, "fault means nothing with framing 'close':", "close_mid_body");
    return QR_OK;
}

static void exchange_cleanup(struct qr_replay_exchange *ex)
{
    free(ex->name);
    free(ex->source);
    free(ex->method);
    free(ex->path);
    free(ex->body_contains);
    free(ex->reason);
    for (size_t i = 0; i < ex->n_headers; i++) {
        free(ex->headers[i].name);
        free(ex->headers[i].value);
    }
    free(ex->headers);
    for (size_t i = 0; i < ex->n_chunks; i++)
        free(ex->chunks[i].data);
    free(ex->chunks);
    memset(ex, 0, sizeof(*ex));
}

static enum qr_err parse_exchange(struct ctx *c, yyjson_val *o, struct qr_replay_exchange *ex)
{
    memset(ex, 0, sizeof(*ex));
    ex->times = -1;
    ex->status = 200;
    ex->source = dup_n(c->file, strlen(c->file));
    enum qr_err err = QR_OK;
    bool has_response = false;
    if (!yyjson_is_obj(o)) {
        err = bad(c, "expected an object for", "exchange");
        goto fail;
    }
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(o, i, max, k, v)
    {
        const char *key = yyjson_get_str(k);
        if (strcmp(key, "name") == 0)
            err = get_str(c, v, key, &ex->name, NULL);
        else if (strcmp(key, "match") == 0)
            err = parse_match(c, v, ex);
        else if (strcmp(key, "response") == 0 && (has_response = true))
            err = parse_response(c, v, ex);
        else if (strcmp(key, "comment") == 0 || strcmp(key, "description") == 0)
            err = QR_OK; /* free text for the reader */
        else
            err = bad(c, "unknown key in exchange:", key);
        if (err)
            goto fail;
    }
    if (!has_response) {
        err = bad(c, "missing key", "response");
        goto fail;
    }
    if (!ex->name) {
        const char *base = strrchr(c->file, '/');
        struct qr_buf b;
        qr_buf_init(&b, 0);
        qr_buf_appendf(&b, "%s#%zu", base ? base + 1 : c->file, c->index);
        if (!b.ptr)
            abort();
        ex->name = qr_buf_take(&b, NULL);
    }
    return QR_OK;
fail:
    exchange_cleanup(ex);
    return err;
}

static void set_push(struct qr_replay_set *set, const struct qr_replay_exchange *ex)
{
    if (set->n == set->cap) {
        set->cap = set->cap ? set->cap * 2 : 16;
        set->v = realloc(set->v, set->cap * sizeof(*set->v));
        if (!set->v)
            abort();
    }
    set->v[set->n++] = *ex;
}

static enum qr_err load_file(struct qr_replay_set *set, const char *path, struct qr_diag *diag)
{
    yyjson_read_err rerr;
    yyjson_read_flag flags =
        YYJSON_READ_ALLOW_COMMENTS | YYJSON_READ_ALLOW_TRAILING_COMMAS | YYJSON_READ_NUMBER_AS_RAW;
    yyjson_doc *doc = yyjson_read_file(path, flags, NULL, &rerr);
    if (!doc)
        return qr_diag_set(diag, QR_ERR_INVALID, "cannot load '%s': %s at byte %zu", path, rerr.msg,
                           rerr.pos);
    yyjson_val *root = yyjson_doc_get_root(doc);
    struct ctx c = {path, 0, diag};
    enum qr_err err = QR_OK;
    struct qr_replay_exchange ex;
    if (yyjson_is_arr(root)) {
        size_t i, max;
        yyjson_val *v;
        yyjson_arr_foreach(root, i, max, v)
        {
            c.index = i;
            if ((err = parse_exchange(&c, v, &ex)))
                break;
            set_push(set, &ex);
        }
    } else if (!(err = parse_exchange(&c, root, &ex))) {
        set_push(set, &ex);
    }
    yyjson_doc_free(doc);
    return err;
}

static int json_name(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return d->d_name[0] != '.' && n > 5 && strcmp(d->d_name + n - 5, ".json") == 0;
}

enum qr_err qr_replay_set_load(struct qr_replay_set *set, const char *path, struct qr_diag *diag)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return load_file(set, path, diag);

    struct dirent **names = NULL;
    int n = scandir(path, &names, json_name, alphasort);
    if (n < 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    enum qr_err err = QR_OK;
    for (int i = 0; i < n; i++) {
        if (!err) {
            struct qr_buf p;
            qr_buf_init(&p, 0);
            qr_buf_appendf(&p, "%s/%s", path, names[i]->d_name);
            if (!p.ptr)
                abort();
            err = load_file(set, p.ptr, diag);
            qr_buf_cleanup(&p);
        }
        free(names[i]);
    }
    free(names);
    return err;
}

void qr_replay_set_init(struct qr_replay_set *set)
{
    memset(set, 0, sizeof(*set));
}

void qr_replay_set_cleanup(struct qr_replay_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        exchange_cleanup(&set->v[i]);
    free(set->v);
    memset(set, 0, sizeof(*set));
}

static bool matches(const struct qr_replay_exchange *ex, struct qr_slice method,
                    struct qr_slice path, struct qr_slice body)
{
    if (ex->times >= 0 && ex->served >= ex->times)
        return false;
    if (ex->method && !qr_slice_eq(method, ex->method))
        return false;
    if (ex->path && !qr_slice_eq(path, ex->path))
        return false;
    if (ex->body_contains &&
        !memmem(body.ptr ? body.ptr : "", body.len, ex->body_contains, ex->body_contains_len))
        return false;
    return true;
}

struct qr_replay_exchange *qr_replay_set_find(struct qr_replay_set *set, struct qr_slice method,
                                              struct qr_slice path, struct qr_slice body)
{
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < set->n; i++) {
            struct qr_replay_exchange *ex = &set->v[i];
            if ((ex->body_contains != NULL) == (pass == 0) && matches(ex, method, path, body))
                return ex;
        }
    return NULL;
}

void qr_replay_set_reset(struct qr_replay_set *set)
{
    for (size_t i = 0; i < set->n; i++)
        set->v[i].served = 0;
}

const char *qr_replay_reason(int status)
{
    static const struct {
        int status;
        const char *text;
    } table[] = {
        {100, "Continue"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {206, "Partial Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {304, "Not Modified"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {411, "Length Required"},
        {413, "Content Too Large"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {431, "Request Header Fields Too Large"},
        {499, "Client Closed Request"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    for (size_t i = 0; i < QR_ARRAY_LEN(table); i++)
        if (table[i].status == status)
            return table[i].text;
    return "Unknown";
}
