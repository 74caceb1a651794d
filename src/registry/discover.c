/* Discovery of GGUF files in the models directory (docs/REGISTRY.md "Discovery"). Each *.gguf
 * file is hashed (streamed through the project's sha256, cached by path, size and mtime in an
 * optional cache file so a restart does not rehash) and then, in this order: joined to the one
 * model whose manifest states its digest; joined to the one model whose manifest names its
 * models: (or file:) URI; or turned into a new model whose manifest is generated from the
 * architecture contract qr_gguf_arch_derive reads from the file, and validated like any other.
 * A digest stated by two models, or a file at a manifest's URI with another digest, is a
 * conflict: recorded, not joined, not added. */
#include "registry/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/buf.h"
#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "gguf/sha256.h"

#define CACHE_MAGIC     "qr-sha256-cache v1"
#define CACHE_MAX_LINES 65536u
#define PATH_MAX_BYTES  4096u

/* ---- sha256 of a file and its cache ---------------------------------------------------------- */

enum qr_err qr_registry_file_sha256(const char *path, char out[72], struct qr_diag *diag)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    struct stat st;
    if (fd < 0)
        return qr_diag_set(diag, QR_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': not a regular file", path);
    }
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = malloc(CHUNK);
    if (!buf)
        abort();
    struct qr_sha256 s;
    qr_sha256_init(&s);
    enum qr_err e = QR_OK;
    for (;;) {
        ssize_t k = read(fd, buf, CHUNK);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            e = qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
            break;
        }
        if (k == 0)
            break;
        qr_sha256_update(&s, buf, (size_t) k);
    }
    free(buf);
    close(fd);
    if (e)
        return e;
    uint8_t dg[QR_SHA256_LEN];
    char hex[QR_SHA256_HEX];
    qr_sha256_final(&s, dg);
    qr_sha256_hex(dg, hex);
    snprintf(out, 72, "sha256:%s", hex);
    return QR_OK;
}

struct cache_ent {
    char *path;
    uint64_t size;
    long long mtime_s, mtime_ns;
    char sha[72];
    bool used; /* seen in this walk: kept when the cache is rewritten */
};

struct cache {
    struct cache_ent *e;
    size_t n;
    bool dirty;
};

static void cache_load(struct cache *c, const char *path)
{
    FILE *f = path ? fopen(path, "re") : NULL;
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    bool first = true;
    while ((len = getline(&line, &cap, f)) > 0 && c->n < CACHE_MAX_LINES) {
        if (line[len - 1] == '\n')
            line[--len] = 0;
        if (first) {
            first = false;
            if (strcmp(line, CACHE_MAGIC) != 0)
                break; /* another format: ignored, rewritten */
            continue;
        }
        char sha[72];
        unsigned long long size;
        long long s, ns;
        int off = 0;
        if (len > (ssize_t) PATH_MAX_BYTES + 128 ||
            sscanf(line, "%71s %llu %lld %lld %n", sha, &size, &s, &ns, &off) != 4 || off <= 0 ||
            !line[off] || !qr_manifest_digest_valid(sha))
            continue; /* a damaged line costs one rehash */
        c->e = realloc(c->e, (c->n + 1) * sizeof(*c->e));
        if (!c->e)
            abort();
        struct cache_ent *x = &c->e[c->n++];
        x->path = strdup(line + off);
        if (!x->path)
            abort();
        x->size = size;
        x->mtime_s = s;
        x->mtime_ns = ns;
        snprintf(x->sha, sizeof x->sha, "%s", sha);
        x->used = false;
    }
    free(line);
    fclose(f);
}

/* Rewrite the cache (entries of files seen in this walk only) through a temporary file. */
static void cache_save(struct cache *c, const char *path)
{
    if (!path || !c->dirty)
        return;
    struct qr_buf tmp;
    qr_buf_init(&tmp, PATH_MAX_BYTES + 16);
    if (qr_buf_appendf(&tmp, "%s.tmp", path))
        return;
    FILE *f = fopen(tmp.ptr, "we");
    if (f) {
        fprintf(f, "%s\n", CACHE_MAGIC);
        for (size_t i = 0; i < c->n; i++) {
            const struct cache_ent *x = &c->e[i];
            if (x->used && !strchr(x->path, '\n'))
                fprintf(f, "%s %llu %lld %lld %s\n", x->sha, (unsigned long long) x->size,
                        x->mtime_s, x->mtime_ns, x->path);
        }
        if (fclose(f) == 0)
            (void) rename(tmp.ptr, path);
        else
            (void) unlink(tmp.ptr);
    }
    qr_buf_cleanup(&tmp);
}

static void cache_cleanup(struct cache *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->e[i].path);
    free(c->e);
}

static enum qr_err file_digest(struct cache *c, const char *path, const struct stat *st,
                               char out[72], struct qr_diag *d)
{
    for (size_t i = 0; i < c->n; i++) {
        struct cache_ent *x = &c->e[i];
        if (!strcmp(x->path, path)) {
            if (x->size == (uint64_t) st->st_size && x->mtime_s == (long long) st->st_mtim.tv_sec &&
                x->mtime_ns == (long long) st->st_mtim.tv_nsec) {
                x->used = true;
                memcpy(out, x->sha, 72);
                return QR_OK;
            }
            x->used = false; /* stale: replaced below */
            x->path[0] = 0;
        }
    }
    enum qr_err e = qr_registry_file_sha256(path, out, d);
    if (e)
        return e;
    c->e = realloc(c->e, (c->n + 1) * sizeof(*c->e));
    if (!c->e)
        abort();
    struct cache_ent *x = &c->e[c->n++];
    x->path = strdup(path);
    if (!x->path)
        abort();
    x->size = (uint64_t) st->st_size;
    x->mtime_s = (long long) st->st_mtim.tv_sec;
    x->mtime_ns = (long long) st->st_mtim.tv_nsec;
    memcpy(x->sha, out, 72);
    x->used = true;
    c->dirty = true;
    return QR_OK;
}

/* ---- models: URIs ---------------------------------------------------------------------------- */

/* Percent-encode a relative path: bytes outside [A-Za-z0-9._~/-] become %XX. */
static enum qr_err uri_encode(struct qr_buf *b, const char *rel)
{
    enum qr_err e = qr_buf_puts(b, "models:");
    for (const unsigned char *p = (const unsigned char *) rel; !e && *p; p++) {
        bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || strchr("._~/-", *p);
        e = plain ? qr_buf_append(b, p, 1) : qr_buf_appendf(b, "%%%02X", *p);
    }
    return e;
}

static int hexval(char c)
{
    return (c >= '0' && c <= '9')   ? c - '0'
           : (c >= 'a' && c <= 'f') ? c - 'a' + 10
           : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                    : -1;
}

enum qr_err qr_registry_resolve_uri(const char *models_dir, const char *uri, char **out,
                                    struct qr_diag *diag)
{
    *out = NULL;
    struct qr_buf b;
    qr_buf_init(&b, PATH_MAX_BYTES);
    const char *p;
    if (!strncmp(uri, "file:///", 8)) {
        p = uri + 7;
    } else if (!strncmp(uri, "models:", 7) && models_dir && *models_dir) {
        p = uri + 7;
        if (*p == '/' || qr_buf_appendf(&b, "%s/", models_dir))
            goto bad;
    } else {
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': not a models: or file: URI", uri);
    }
    size_t seg_start = b.len;
    for (; *p; p++) {
        char c = *p;
        if (c == '%') {
            int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
            if (lo < 0 || (hi == 0 && lo == 0))
                goto bad;
            c = (char) (hi * 16 + lo);
            p += 2;
        }
        if (c == '/') {
            size_t n = b.len - seg_start;
            if (n && ((n == 1 && b.ptr[seg_start] == '.') ||
                      (n == 2 && !memcmp(b.ptr + seg_start, "..", 2))))
                goto bad;
            seg_start = b.len + 1;
        }
        if (qr_buf_append(&b, &c, 1))
            goto bad;
    }
    size_t n = b.len - seg_start;
    if (!b.ptr || n == 0 || (n == 1 && b.ptr[seg_start] == '.') ||
        (n == 2 && !memcmp(b.ptr + seg_start, "..", 2)))
        goto bad;
    *out = qr_buf_take(&b, NULL);
    return QR_OK;
bad:
    qr_buf_cleanup(&b);
    return qr_diag_set(diag, QR_ERR_INVALID, "'%s': not a resolvable file URI", uri);
}

/* ---- the manifest generated from a file ------------------------------------------------------ */

static bool label_of(struct qr_slice s, char *out, size_t cap)
{
    if (!s.ptr || s.len == 0 || s.len >= cap || s.len > 80)
        return false;
    memcpy(out, s.ptr, s.len);
    out[s.len] = 0;
    return qr_manifest_label_valid(out);
}

/* Canonical id from a file name: docs/REGISTRY.md "Discovery". */
static void id_from_name(const char *base, char *out, size_t cap)
{
    size_t n = strlen(base), o = 0;
    if (n > 5 && !strcasecmp(base + n - 5, ".gguf"))
        n -= 5;
    bool dash = false;
    for (size_t i = 0; i < n && o + 1 < cap && o < QR_MANIFEST_MAX_ID; i++) {
        char c = base[i];
        if (c >= 'A' && c <= 'Z')
            c = (char) (c - 'A' + 'a');
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) {
            if (dash)
                continue;
            c = '-';
        }
        dash = c == '-' && !ok;
        if (o == 0 && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            continue; /* the first character must be a letter or digit */
        out[o++] = c;
    }
    out[o] = 0;
    if (!o)
        snprintf(out, cap, "model");
}

static void put_u64(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *k,
                    const struct qr_arch_u64 *v, uint64_t lo, uint64_t hi)
{
    if (v->known && v->v >= lo && v->v <= hi)
        yyjson_mut_obj_add_uint(doc, o, k, v->v);
}

static void put_f64(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *k,
                    const struct qr_arch_f64 *v, double lo, double hi)
{
    if (v->known && isfinite(v->v) && v->v >= lo && v->v <= hi)
        yyjson_mut_obj_add_real(doc, o, k, v->v);
}

static void put_label(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *k,
                      const struct qr_arch_str *v)
{
    char buf[96];
    if (v->known && label_of(v->v, buf, sizeof buf))
        yyjson_mut_obj_add_strcpy(doc, o, k, buf);
}

static void put_attention(yyjson_mut_doc *doc, yyjson_mut_val *c, const struct qr_arch *a)
{
    yyjson_mut_val *at = yyjson_mut_obj_add_obj(doc, c, "attention");
    if (a->head_count.known && a->head_count.max >= 1 && a->head_count.max <= 1000000)
        yyjson_mut_obj_add_uint(doc, at, "head_count", a->head_count.max);
    if (a->head_count_kv.known && a->head_count_kv.max >= 1 &&
        (!a->head_count.known || a->head_count_kv.max <= a->head_count.max) &&
        a->head_count.max <= 1000000)
        yyjson_mut_obj_add_uint(doc, at, "head_count_kv", a->head_count_kv.max);
    put_u64(doc, at, "key_length", &a->head_dim_k, 1, 1000000);
    put_u64(doc, at, "value_length", &a->head_dim_v, 1, 1000000);
    put_u64(doc, at, "sliding_window", &a->sliding_window, 1, 1000000000);
    if (a->sliding_window_pattern.known && a->sliding_window_pattern.n_swa <= 65536)
        yyjson_mut_obj_add_uint(doc, at, "sliding_layers", a->sliding_window_pattern.n_swa);
    put_u64(doc, at, "shared_kv_layers", &a->shared_kv_layers, 0, 65536);
    if (a->causal.known)
        yyjson_mut_obj_add_bool(doc, at, "causal", a->causal.v);
    put_u64(doc, at, "kv_lora_rank", &a->kv_lora_rank, 1, 1000000);
}

static void put_contract(yyjson_mut_doc *doc, yyjson_mut_val *md, const struct qr_arch *a,
                         unsigned caps)
{
    static const char *const FFN[] = {"unknown", "dense", "moe"};
    yyjson_mut_val *c = yyjson_mut_obj_add_obj(doc, md, "architecture_contract");
    put_label(doc, c, "architecture", &a->architecture);
    yyjson_mut_obj_add_str(doc, c, "ffn", FFN[a->ffn]);
    put_u64(doc, c, "block_count", &a->block_count, 1, 65536);
    put_u64(doc, c, "embedding_length", &a->embedding_length, 1, 10000000);
    put_u64(doc, c, "context_length", &a->context_length, 1, 100000000);
    put_u64(doc, c, "vocab_size", &a->vocab_size, 1, 100000000);
    if (a->params_total.known) {
        yyjson_mut_val *p = yyjson_mut_obj_add_obj(doc, c, "params");
        yyjson_mut_obj_add_uint(doc, p, "total", a->params_total.v);
        if (a->params_active.known && a->params_active.v <= a->params_total.v)
            yyjson_mut_obj_add_uint(doc, p, "active", a->params_active.v);
    }
    if (a->ffn == QR_ARCH_FFN_MOE && a->expert_count.known && a->expert_count.v <= 4096) {
        uint64_t ec = a->expert_count.v;
        put_u64(doc, c, "expert_count", &a->expert_count, 1, 4096);
        put_u64(doc, c, "expert_used_count", &a->expert_used_count, 1, ec);
        put_u64(doc, c, "expert_shared_count", &a->expert_shared_count, 0, ec);
    }
    if (a->block_count.known)
        put_u64(doc, c, "leading_dense_block_count", &a->leading_dense_block_count, 0,
                a->block_count.v);
    put_attention(doc, c, a);
    yyjson_mut_val *rope = yyjson_mut_obj_add_obj(doc, c, "rope");
    put_f64(doc, rope, "freq_base", &a->rope_freq_base, 0, 1e12);
    put_u64(doc, rope, "dimension_count", &a->rope_dimension_count, 1, 1000000);
    if (a->rope_scaling_type.known || a->rope_scaling_factor.known) {
        yyjson_mut_val *sc = yyjson_mut_obj_add_obj(doc, rope, "scaling");
        put_label(doc, sc, "type", &a->rope_scaling_type);
        put_f64(doc, sc, "factor", &a->rope_scaling_factor, 0, 1e6);
    }
    yyjson_mut_val *tk = yyjson_mut_obj_add_obj(doc, c, "tokenizer");
    put_label(doc, tk, "model", &a->tokenizer_model);
    put_label(doc, tk, "pre", &a->tokenizer_pre);
    put_u64(doc, c, "bos_token_id", &a->bos_token_id, 0, 100000000);
    put_u64(doc, c, "eos_token_id", &a->eos_token_id, 0, 100000000);
    if (a->add_bos_token.known)
        yyjson_mut_obj_add_bool(doc, c, "add_bos_token", a->add_bos_token.v);
    if (a->chat_template_known) {
        yyjson_mut_val *t = yyjson_mut_obj_add_obj(doc, c, "chat_template");
        char hex[QR_SHA256_HEX], dg[72];
        qr_sha256_hex(a->chat_template_sha256, hex);
        snprintf(dg, sizeof dg, "sha256:%s", hex);
        yyjson_mut_obj_add_strcpy(doc, t, "sha256", dg);
        if (a->chat_template_len <= 1000000000)
            yyjson_mut_obj_add_uint(doc, t, "bytes", a->chat_template_len);
        yyjson_mut_val *mk = yyjson_mut_obj_add_arr(doc, t, "markers");
        for (unsigned i = 0; i < QR_ARCH_TPL_MARKER_COUNT; i++) {
            if (a->chat_template_markers & (1u << i) && qr_arch_marker_name(1u << i))
                yyjson_mut_arr_add_str(doc, mk, qr_arch_marker_name(1u << i));
        }
    }
    const char *pool = a->pooling_type.known ? qr_arch_pooling_name(a->pooling_type.v) : NULL;
    if (pool)
        yyjson_mut_obj_add_str(doc, c, "pooling", pool);
    yyjson_mut_val *mo = yyjson_mut_obj_add_obj(doc, c, "modalities");
    yyjson_mut_arr_add_str(doc, yyjson_mut_obj_add_arr(doc, mo, "input"), "text");
    yyjson_mut_arr_add_str(doc, yyjson_mut_obj_add_arr(doc, mo, "output"),
                           caps & QR_MANIFEST_CAP_RERANKING    ? "score"
                           : caps & QR_MANIFEST_CAP_EMBEDDINGS ? "embedding"
                                                               : "text");
    if (a->nextn_predict_layers.known && a->nextn_predict_layers.v <= 64) {
        yyjson_mut_val *sp = yyjson_mut_obj_add_obj(doc, c, "speculative");
        yyjson_mut_obj_add_bool(doc, sp, "mtp", a->nextn_predict_layers.v > 0);
        yyjson_mut_obj_add_uint(doc, sp, "nextn_predict_layers", a->nextn_predict_layers.v);
    }
    if (a->file_type.known && a->file_type.v <= 1024) {
        yyjson_mut_val *q = yyjson_mut_obj_add_obj(doc, c, "quantization");
        yyjson_mut_obj_add_uint(doc, q, "file_type", a->file_type.v);
        const char *fn = qr_arch_file_type_name(a->file_type.v);
        if (fn)
            yyjson_mut_obj_add_str(doc, q, "file_type_name", fn);
        yyjson_mut_arr_add_str(doc, yyjson_mut_obj_add_arr(doc, q, "formats"), "gguf");
    }
}

static unsigned caps_of(const struct qr_arch *a)
{
    const char *pool = a->pooling_type.known ? qr_arch_pooling_name(a->pooling_type.v) : NULL;
    unsigned caps = 0;
    if (pool && !strcmp(pool, "rank"))
        caps |= QR_MANIFEST_CAP_RERANKING;
    else if (pool && strcmp(pool, "none") != 0)
        caps |= QR_MANIFEST_CAP_EMBEDDINGS;
    else
        caps |= QR_MANIFEST_CAP_TEXT;
    if ((caps & QR_MANIFEST_CAP_TEXT) && a->chat_template_known) {
        if (a->chat_template_markers & QR_ARCH_TPL_HERMES_TOOLS)
            caps |= QR_MANIFEST_CAP_TOOLS;
        if (a->chat_template_markers & QR_ARCH_TPL_THINK)
            caps |= QR_MANIFEST_CAP_THINKING;
    }
    return caps;
}

static void display_name(const struct qr_gguf *g, const char *base, char *out, size_t cap)
{
    struct qr_slice s;
    snprintf(out, cap, "%.160s", base);
    if (qr_gguf_get_str(g, "general.name", &s) != QR_OK || s.len == 0 || s.len > 160 ||
        s.len >= cap)
        return;
    bool blank = true;
    for (size_t i = 0; i < s.len; i++) {
        if (s.ptr[i] < 0x20 || s.ptr[i] > 0x7e)
            return; /* printable ASCII only; otherwise the file name */
        blank &= s.ptr[i] == ' ';
    }
    if (!blank)
        snprintf(out, cap, "%.*s", (int) s.len, s.ptr);
}

/* The generated manifest as JSON (malloc'ed), or NULL with d set. */
static char *gguf_manifest(const struct qr_gguf *g, const struct qr_arch *a, const char *base,
                           const char *uri, const char *sha, uint64_t size, size_t *len,
                           struct qr_diag *d)
{
    char id[QR_MANIFEST_MAX_ID + 1], name[200], label[96];
    id_from_name(base, id, sizeof id);
    display_name(g, base, name, sizeof name);
    unsigned caps = caps_of(a);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "schema_version", QR_MANIFEST_SCHEMA);
    yyjson_mut_obj_add_strcpy(doc, root, "id", id);
    yyjson_mut_obj_add_strcpy(doc, root, "display_name", name);
    yyjson_mut_val *src = yyjson_mut_obj_add_obj(doc, root, "source");
    yyjson_mut_obj_add_str(doc, src, "provider", "local");
    char ref[301];
    snprintf(ref, sizeof ref, "%.300s", uri);
    yyjson_mut_obj_add_strcpy(doc, src, "reference", ref);
    yyjson_mut_obj_add_strcpy(doc, src, "revision", sha[0] ? sha : "unresolved");
    yyjson_mut_obj_add_str(doc, yyjson_mut_obj_add_obj(doc, root, "backend"), "type", "llama.cpp");
    yyjson_mut_val *art =
        yyjson_mut_arr_add_obj(doc, yyjson_mut_obj_add_arr(doc, root, "artifacts"));
    yyjson_mut_obj_add_strcpy(doc, art, "uri", uri);
    if (sha[0])
        yyjson_mut_obj_add_strcpy(doc, art, "sha256", sha);
    yyjson_mut_obj_add_str(doc, art, "backend", "llama.cpp");
    yyjson_mut_obj_add_str(doc, art, "format", "gguf");
    yyjson_mut_obj_add_str(doc, art, "role", "inference");
    yyjson_mut_obj_add_uint(doc, art, "size_bytes", size);
    yyjson_mut_val *md = yyjson_mut_obj_add_obj(doc, root, "model");
    yyjson_mut_obj_add_strcpy(
        doc, md, "architecture",
        a->architecture.known && label_of(a->architecture.v, label, sizeof label) ? label
                                                                                  : "unknown");
    yyjson_mut_obj_add_str(doc, md, "parameter_class", "unspecified");
    const char *ft = a->file_type.known ? qr_arch_file_type_name(a->file_type.v) : NULL;
    yyjson_mut_obj_add_str(doc, md, "quantization", ft ? ft : "unspecified");
    /* the manifest's context_window is capped at 10,000,000; the contract keeps the file's */
    uint64_t ctx = a->context_length.v > 10000000 ? 10000000 : a->context_length.v;
    yyjson_mut_obj_add_uint(doc, md, "context_window", ctx);
    static const char *const CLS[] = {"unknown", "dense", "moe"};
    yyjson_mut_obj_add_str(doc, md, "architecture_class", CLS[a->ffn]);
    if (a->params_total.known) {
        yyjson_mut_obj_add_real(doc, md, "total_parameters_b", (double) a->params_total.v / 1e9);
        if (a->params_active.known && a->params_active.v <= a->params_total.v)
            yyjson_mut_obj_add_real(doc, md, "active_parameters_b",
                                    (double) a->params_active.v / 1e9);
    }
    if (a->ffn == QR_ARCH_FFN_MOE && a->expert_count.known && a->expert_used_count.known &&
        a->expert_count.v <= 4096 && a->expert_used_count.v <= a->expert_count.v &&
        a->expert_used_count.v >= 1) {
        yyjson_mut_val *ex = yyjson_mut_obj_add_obj(doc, md, "experts");
        yyjson_mut_obj_add_uint(doc, ex, "total", a->expert_count.v);
        yyjson_mut_obj_add_uint(doc, ex, "active", a->expert_used_count.v);
        put_u64(doc, ex, "shared", &a->expert_shared_count, 0, a->expert_count.v);
    }
    put_contract(doc, md, a, caps);
    yyjson_mut_val *cv = yyjson_mut_obj_add_obj(doc, root, "capabilities");
    for (unsigned i = 0; i < QR_CAP_COUNT; i++) {
        unsigned bit = 1u << i;
        bool required =
            !(bit & (QR_MANIFEST_CAP_RERANKING | QR_MANIFEST_CAP_TOOL_STREAMING |
                     QR_MANIFEST_CAP_REASONING_CONTROL | QR_MANIFEST_CAP_STRUCTURED_OUTPUT));
        if (required || (caps & bit))
            yyjson_mut_obj_add_bool(doc, cv, qr_manifest_cap_key(bit), (caps & bit) != 0);
    }
    yyjson_mut_obj_add_str(doc, yyjson_mut_obj_add_obj(doc, root, "compatibility"),
                           "min_runtime_version", "0.4.0-alpha.1");
    yyjson_mut_val *st = yyjson_mut_obj_add_obj(doc, root, "state");
    yyjson_mut_obj_add_str(doc, st, "install", "installed");
    yyjson_mut_obj_add_str(doc, st, "verification", "unverified");
    yyjson_mut_obj_add_str(doc, st, "lifecycle", "active");
    yyjson_mut_obj_add_str(doc, yyjson_mut_obj_add_obj(doc, root, "provenance"), "publisher",
                           "local file (discovered)");
    char *json = yyjson_mut_write(doc, 0, len);
    yyjson_mut_doc_free(doc);
    if (!json)
        qr_diag_set(d, QR_ERR_NOMEM, "cannot write the generated manifest");
    return json;
}

/* ---- the walk -------------------------------------------------------------------------------- */

struct walk {
    struct qr_registry *r;
    const struct qr_discover_opts *o;
    char **rel; /* relative paths found */
    size_t n, skipped;
    char *root; /* realpath of models_dir (owned; NULL: symlinked files are all refused) */
};

/* A symlinked GGUF is served only when it resolves to a regular file inside models_dir: a link
 * that points outside would let anyone who can write into models_dir expose any file. */
static bool link_inside(struct walk *w, const char *full)
{
    char *rp = realpath(full, NULL);
    size_t n = w->root ? strlen(w->root) : 0;
    struct stat st;
    bool ok = rp && n && !strncmp(rp, w->root, n) && rp[n] == '/' && stat(rp, &st) == 0 &&
              S_ISREG(st.st_mode);
    if (!ok)
        qr_registry_problem(w->r, QR_REG_BAD_FILE, full, NULL, NULL,
                            "'%s': a symlink that resolves outside models_dir '%s'; not served",
                            full, w->o->models_dir);
    free(rp);
    return ok;
}

static bool is_gguf(const char *name)
{
    size_t n = strlen(name);
    return n > 5 && !strcasecmp(name + n - 5, ".gguf");
}

static void walk_dir(struct walk *w, const char *rel, unsigned depth)
{
    struct qr_buf dir;
    qr_buf_init(&dir, PATH_MAX_BYTES);
    if (qr_buf_appendf(&dir, "%s%s%s", w->o->models_dir, *rel ? "/" : "", rel))
        return;
    DIR *dh = opendir(dir.ptr);
    struct dirent *de;
    while (dh && (de = readdir(dh))) {
        if (de->d_name[0] == '.')
            continue;
        struct qr_buf sub, full;
        qr_buf_init(&sub, PATH_MAX_BYTES);
        qr_buf_init(&full, PATH_MAX_BYTES);
        struct stat st;
        if (qr_buf_appendf(&sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name) ||
            qr_buf_appendf(&full, "%s/%s", dir.ptr, de->d_name) || lstat(full.ptr, &st) != 0) {
            /* too long or vanished: not a model */
        } else if (S_ISDIR(st.st_mode) && depth < QR_REG_MAX_DEPTH) {
            walk_dir(w, sub.ptr, depth + 1); /* symlinked directories are not followed */
        } else if (is_gguf(de->d_name) &&
                   (S_ISREG(st.st_mode) || (S_ISLNK(st.st_mode) && link_inside(w, full.ptr)))) {
            if (w->n >= QR_REG_MAX_FILES) {
                w->skipped++;
            } else {
                w->rel = realloc(w->rel, (w->n + 1) * sizeof(*w->rel));
                if (!w->rel)
                    abort();
                w->rel[w->n++] = qr_buf_take(&sub, NULL);
            }
        }
        qr_buf_cleanup(&sub);
        qr_buf_cleanup(&full);
    }
    if (dh)
        closedir(dh);
    qr_buf_cleanup(&dir);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Join by digest, then by URI; true when the file was joined or refused (conflict). */
static bool join_existing(struct qr_registry *r, const char *path, const char *uri, const char *sha,
                          uint64_t size)
{
    struct qr_reg_model *m = NULL;
    size_t n = sha[0] ? qr_registry_find_digest_mut(r, sha, &m) : 0;
    if (n > 1) {
        qr_registry_problem(r, QR_REG_DIGEST_CLASH, path, NULL, sha,
                            "'%s': digest %s is stated by %zu models; not joined", path, sha, n);
        return true;
    }
    if (n == 0) {
        const struct qr_manifest_artifact *art = NULL;
        m = qr_registry_find_uri_mut(r, uri, &art);
        char *rp = m ? NULL : realpath(path, NULL);
        if (rp) {
            struct qr_buf fu;
            qr_buf_init(&fu, PATH_MAX_BYTES + 8);
            if (qr_buf_appendf(&fu, "file://%s", rp) == QR_OK)
                m = qr_registry_find_uri_mut(r, fu.ptr, &art);
            qr_buf_cleanup(&fu);
            free(rp);
        }
        if (m && art->sha256 && sha[0] && strcmp(art->sha256, sha) != 0) {
            qr_registry_problem(r, QR_REG_DIGEST_CLASH, path, m->origin, sha,
                                "'%s': digest %s differs from %s that model '%s' from '%s' "
                                "states for '%s'; not joined",
                                path, sha, art->sha256, m->m->id, m->origin, art->uri);
            return true;
        }
    }
    if (m)
        qr_registry_join_file(m, path, uri, sha, size);
    return m != NULL;
}

static void discover_one(struct qr_registry *r, struct cache *c, const char *models_dir,
                         const char *rel, bool no_hash)
{
    struct qr_buf path, uri;
    qr_buf_init(&path, PATH_MAX_BYTES);
    qr_buf_init(&uri, PATH_MAX_BYTES * 3);
    struct qr_gguf *g = NULL;
    struct qr_diag d = {{0}};
    char sha[72] = "";
    struct stat st;
    if (qr_buf_appendf(&path, "%s/%s", models_dir, rel) || uri_encode(&uri, rel))
        goto done;
    if (stat(path.ptr, &st) != 0 || !S_ISREG(st.st_mode)) {
        qr_registry_problem(r, QR_REG_BAD_FILE, path.ptr, NULL, NULL,
                            "'%s': not a readable regular file", path.ptr);
        goto done;
    }
    if (!no_hash && file_digest(c, path.ptr, &st, sha, &d) != QR_OK) {
        qr_registry_problem(r, QR_REG_BAD_FILE, path.ptr, NULL, NULL, "%s", d.msg);
        goto done;
    }
    if (join_existing(r, path.ptr, uri.ptr, sha, (uint64_t) st.st_size))
        goto done;
    struct qr_arch a;
    if (qr_gguf_open(path.ptr, NULL, &d, &g) != QR_OK || qr_gguf_arch_derive(g, &a, &d) != QR_OK) {
        qr_registry_problem(r, QR_REG_BAD_FILE, path.ptr, NULL, NULL, "%s", d.msg);
        goto done;
    }
    if (a.architecture.known && qr_slice_eq(a.architecture.v, "clip"))
        goto done; /* a projector: a companion of a model, not a model */
    if (!a.context_length.known || a.context_length.v == 0) {
        qr_registry_problem(r, QR_REG_BAD_FILE, path.ptr, NULL, NULL,
                            "'%s': the file states no context length; not added", path.ptr);
        goto done;
    }
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    size_t len;
    char *json = gguf_manifest(g, &a, base, uri.ptr, sha, (uint64_t) st.st_size, &len, &d);
    const struct qr_reg_model *m = NULL;
    if (json && qr_registry_add_json(r, json, len, path.ptr, QR_REG_GGUF, &d, &m) == QR_OK)
        qr_registry_join_file((struct qr_reg_model *) m, path.ptr, uri.ptr, sha,
                              (uint64_t) st.st_size);
    free(json);
done:
    qr_gguf_close(g);
    qr_buf_cleanup(&path);
    qr_buf_cleanup(&uri);
}

enum qr_err qr_registry_discover_gguf(struct qr_registry *r, const struct qr_discover_opts *o)
{
    DIR *probe = o->models_dir ? opendir(o->models_dir) : NULL;
    if (!probe) {
        qr_registry_problem(r, QR_REG_BAD_FILE, o->models_dir ? o->models_dir : "(none)", NULL,
                            NULL, "cannot open models directory '%s'",
                            o->models_dir ? o->models_dir : "(none)");
        return QR_ERR_NOT_FOUND;
    }
    closedir(probe);
    struct walk w = {r, o, NULL, 0, 0, realpath(o->models_dir, NULL)};
    walk_dir(&w, "", 0);
    free(w.root);
    if (w.skipped)
        qr_registry_problem(r, QR_REG_BAD_FILE, o->models_dir, NULL, NULL,
                            "'%s': %zu GGUF files past the cap of %u were not read", o->models_dir,
                            w.skipped, QR_REG_MAX_FILES);
    if (w.n)
        qsort(w.rel, w.n, sizeof(*w.rel), cmp_str);
    struct cache c = {NULL, 0, false};
    if (!o->no_hash)
        cache_load(&c, o->cache_path);
    for (size_t i = 0; i < w.n; i++) {
        discover_one(r, &c, o->models_dir, w.rel[i], o->no_hash);
        free(w.rel[i]);
    }
    free(w.rel);
    cache_save(&c, o->cache_path);
    cache_cleanup(&c);
    return QR_OK;
}
