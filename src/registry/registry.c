/* The model registry: canonical models sorted by id, a sorted index of name keys (ids and aliases,
 * lowercased, ":latest" implied) so that every spelling of a name resolves the same way, the
 * problems found while loading, and the rules that join backend-reported names to existing
 * identities. Loading never fails on bad input: a bad file or a clashing manifest is recorded
 * (with both origins and the name) and skipped. */
#include "registry/registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "core/buf.h"
#include "core/builtin.h"

struct name_ent {
    char key[QR_REG_KEY_MAX];
    const char *name; /* as the manifest spells it (borrowed from the manifest) */
    struct qr_reg_model *m;
};

struct qr_registry {
    struct qr_reg_model **models; /* sorted by canonical id */
    size_t n, cap;
    struct name_ent *names; /* sorted by key */
    size_t n_names, cap_names;
    struct qr_reg_problem problems[QR_REG_MAX_PROBLEMS];
    size_t n_problems, n_problems_total;
};

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort(); /* small internal allocation (STYLE.md) */
    return q;
}

static char *xstrdup(const char *s)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        abort();
    return d;
}

struct qr_registry *qr_registry_new(void)
{
    struct qr_registry *r = calloc(1, sizeof(*r));
    if (!r)
        abort();
    return r;
}

static void model_free(struct qr_reg_model *m)
{
    qr_manifest_free(m->m);
    free(m->origin);
    for (size_t i = 0; i < m->n_files; i++) {
        free(m->files[i].path);
        free(m->files[i].uri);
    }
    free(m->files);
    for (size_t i = 0; i < m->n_remotes; i++) {
        free(m->remotes[i].backend);
        free(m->remotes[i].name);
        free(m->remotes[i].digest);
        free(m->remotes[i].architecture);
        free(m->remotes[i].parent);
    }
    free(m->remotes);
    free(m);
}

void qr_registry_free(struct qr_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        model_free(r->models[i]);
    free(r->models);
    free(r->names);
    for (size_t i = 0; i < r->n_problems; i++) {
        struct qr_reg_problem *p = &r->problems[i];
        free(p->origin);
        free(p->other);
        free(p->name);
        free(p->message);
    }
    free(r);
}

void qr_registry_problem(struct qr_registry *r, enum qr_reg_problem_kind kind, const char *origin,
                         const char *other, const char *name, const char *fmt, ...)
{
    r->n_problems_total++;
    if (r->n_problems >= QR_REG_MAX_PROBLEMS)
        return;
    struct qr_reg_problem *p = &r->problems[r->n_problems++];
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->kind = kind;
    p->origin = xstrdup(origin);
    p->other = xstrdup(other);
    p->name = xstrdup(name);
    p->message = xstrdup(msg);
}

const struct qr_reg_problem *qr_registry_problems(const struct qr_registry *r, size_t *n,
                                                  size_t *n_total)
{
    *n = r->n_problems;
    if (n_total)
        *n_total = r->n_problems_total;
    return r->problems;
}

/* ---- names ----------------------------------------------------------------------------------- */

bool qr_registry_name_key(const char *name, char out[QR_REG_KEY_MAX])
{
    if (!name || !qr_manifest_alias_valid(name))
        return false;
    size_t n = strlen(name);
    const char *seg = strrchr(name, '/');
    seg = seg ? seg + 1 : name;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        out[i] = (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
    }
    out[n] = 0;
    if (!strchr(seg, ':'))
        memcpy(out + n, ":latest", sizeof ":latest"); /* n <= 160: fits in QR_REG_KEY_MAX */
    return true;
}

/* Index of key in the sorted name table, or the insertion point with *found false. */
static size_t name_pos(const struct qr_registry *r, const char *key, bool *found)
{
    size_t lo = 0, hi = r->n_names;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->names[mid].key, key);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

static size_t model_pos(const struct qr_registry *r, const char *id, bool *found)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(r->models[mid]->m->id, id);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

const struct qr_reg_model *qr_registry_find(const struct qr_registry *r, const char *name)
{
    char key[QR_REG_KEY_MAX];
    bool found;
    if (!name || !*name)
        return NULL;
    size_t i = model_pos(r, name, &found); /* the canonical id as written, first */
    if (found)
        return r->models[i];
    if (!qr_registry_name_key(name, key))
        return NULL;
    i = name_pos(r, key, &found);
    return found ? r->names[i].m : NULL;
}

size_t qr_registry_count(const struct qr_registry *r)
{
    return r->n;
}

const struct qr_reg_model *qr_registry_at(const struct qr_registry *r, size_t i)
{
    return i < r->n ? r->models[i] : NULL;
}

/* ---- adding ---------------------------------------------------------------------------------- */

static const char *name_role(const struct qr_reg_model *m, const char *name)
{
    return strcmp(m->m->id, name) == 0 ? "id" : "alias";
}

/* Every name of m must be free (or already m's own). On a clash, record it and fail. */
static enum qr_err check_names(struct qr_registry *r, const struct qr_reg_model *m,
                               struct qr_diag *diag)
{
    const struct qr_manifest *mf = m->m;
    for (size_t i = 0; i <= mf->n_aliases; i++) {
        const char *name = i == 0 ? mf->id : mf->aliases[i - 1];
        char key[QR_REG_KEY_MAX];
        bool found;
        if (!qr_registry_name_key(name, key))
            return qr_diag_set(diag, QR_ERR_INTERNAL, "'%s': unusable name '%s'", m->origin, name);
        size_t pos = name_pos(r, key, &found);
        if (!found)
            continue;
        const struct name_ent *e = &r->names[pos];
        qr_registry_problem(r, QR_REG_NAME_CLASH, m->origin, e->m->origin, name,
                            "'%s': %s '%s' of model '%s' clashes with %s '%s' of model '%s' "
                            "from '%s'; not added",
                            m->origin, i == 0 ? "id" : "alias", name, mf->id,
                            name_role(e->m, e->name), e->name, e->m->m->id, e->m->origin);
        return qr_diag_set(diag, QR_ERR_INVALID,
                           "'%s': %s '%s' clashes with %s '%s' of model '%s' from '%s'", m->origin,
                           i == 0 ? "id" : "alias", name, name_role(e->m, e->name), e->name,
                           e->m->m->id, e->m->origin);
    }
    return QR_OK;
}

static void add_name(struct qr_registry *r, struct qr_reg_model *m, const char *name)
{
    char key[QR_REG_KEY_MAX];
    bool found;
    if (!qr_registry_name_key(name, key))
        return;
    size_t pos = name_pos(r, key, &found);
    if (found)
        return; /* the model's own second spelling ("x" and "x:latest") */
    if (r->n_names == r->cap_names) {
        r->cap_names = r->cap_names ? r->cap_names * 2 : 16;
        r->names = xrealloc(r->names, r->cap_names * sizeof(*r->names));
    }
    memmove(&r->names[pos + 1], &r->names[pos], (r->n_names - pos) * sizeof(*r->names));
    memcpy(r->names[pos].key, key, sizeof key);
    r->names[pos].name = name;
    r->names[pos].m = m;
    r->n_names++;
}

/* Take mf into the registry (on failure mf is freed and the problem recorded). */
static enum qr_err add_manifest(struct qr_registry *r, struct qr_manifest *mf, const char *origin,
                                enum qr_reg_source source, struct qr_diag *diag,
                                struct qr_reg_model **out)
{
    struct qr_reg_model *m = calloc(1, sizeof(*m));
    if (!m)
        abort();
    m->m = mf;
    m->source = source;
    m->origin = xstrdup(origin);
    enum qr_err e = QR_OK;
    if (r->n >= QR_REG_MAX_MODELS) {
        e = qr_diag_set(diag, QR_ERR_TOO_LARGE, "'%s': registry is full (%u models)", origin,
                        QR_REG_MAX_MODELS);
        qr_registry_problem(r, QR_REG_BAD_FILE, origin, NULL, mf->id, "%s", diag->msg);
    } else {
        e = check_names(r, m, diag);
    }
    if (e) {
        model_free(m);
        return e;
    }
    bool found;
    size_t pos = model_pos(r, mf->id, &found);
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->models = xrealloc(r->models, r->cap * sizeof(*r->models));
    }
    memmove(&r->models[pos + 1], &r->models[pos], (r->n - pos) * sizeof(*r->models));
    r->models[pos] = m;
    r->n++;
    add_name(r, m, mf->id);
    for (size_t i = 0; i < mf->n_aliases; i++)
        add_name(r, m, mf->aliases[i]);
    if (out)
        *out = m;
    return QR_OK;
}

static enum qr_err add_json(struct qr_registry *r, const char *json, size_t len, const char *origin,
                            enum qr_reg_source source, struct qr_diag *diag,
                            struct qr_reg_model **out)
{
    struct qr_manifest *mf;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_manifest_parse(json, len, &d, &mf);
    if (e) {
        qr_registry_problem(r, QR_REG_BAD_FILE, origin, NULL, NULL, "'%s': %s", origin, d.msg);
        return qr_diag_set(diag, e, "'%s': %s", origin, d.msg);
    }
    return add_manifest(r, mf, origin, source, diag, out);
}

enum qr_err qr_registry_add_json(struct qr_registry *r, const char *json, size_t len,
                                 const char *origin, enum qr_reg_source source,
                                 struct qr_diag *diag, const struct qr_reg_model **out)
{
    struct qr_reg_model *m = NULL;
    enum qr_err e = add_json(r, json, len, origin, source, diag, &m);
    if (out)
        *out = m;
    return e;
}

enum qr_err qr_registry_load_builtin(struct qr_registry *r)
{
    const struct qr_builtin_file *f;
    size_t n;
    qr_builtin_under("models/", &f, &n);
    for (size_t i = 0; i < n; i++) {
        char origin[300];
        struct qr_diag d;
        snprintf(origin, sizeof origin, "builtin:%s", f[i].path);
        (void) add_json(r, f[i].data, f[i].len, origin, QR_REG_BUILTIN, &d, NULL);
    }
    return QR_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Read a regular file of at most max bytes into a malloc'ed buffer. */
static enum qr_err read_small(const char *path, size_t max, char **out, size_t *len,
                              struct qr_diag *d)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block */
    struct stat st;
    char *buf = NULL;
    enum qr_err e = QR_OK;
    if (fd < 0)
        return qr_diag_set(d, QR_ERR_IO, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        e = qr_diag_set(d, QR_ERR_IO, "not a regular file");
        goto fail;
    }
    if ((uint64_t) st.st_size > max) {
        e = qr_diag_set(d, QR_ERR_TOO_LARGE, "%lld bytes, above the cap of %zu",
                        (long long) st.st_size, max);
        goto fail;
    }
    buf = malloc(max + 1);
    if (!buf)
        abort();
    size_t got = 0;
    while (got <= max) {
        ssize_t k = read(fd, buf + got, max + 1 - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            e = qr_diag_set(d, QR_ERR_IO, "cannot read: %s", strerror(errno));
            goto fail;
        }
        if (k == 0)
            break;
        got += (size_t) k;
    }
    if (got > max) {
        e = qr_diag_set(d, QR_ERR_TOO_LARGE, "above the cap of %zu bytes", max);
        goto fail;
    }
    close(fd);
    *out = buf;
    *len = got;
    return QR_OK;
fail:
    free(buf);
    close(fd);
    return e;
}

enum qr_err qr_registry_load_dir(struct qr_registry *r, const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh) {
        qr_registry_problem(r, QR_REG_BAD_FILE, dir, NULL, NULL,
                            "cannot open registry directory '%s': %s", dir, strerror(errno));
        return QR_ERR_NOT_FOUND;
    }
    char **names = NULL;
    size_t n = 0, skipped = 0;
    struct dirent *de;
    while ((de = readdir(dh))) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        if (n >= QR_REG_MAX_FILES) {
            skipped++;
            continue;
        }
        names = xrealloc(names, (n + 1) * sizeof(*names));
        names[n++] = xstrdup(de->d_name);
    }
    closedir(dh);
    if (skipped)
        qr_registry_problem(r, QR_REG_BAD_FILE, dir, NULL, NULL,
                            "'%s': %zu manifest files past the cap of %u were not read", dir,
                            skipped, QR_REG_MAX_FILES);
    if (n)
        qsort(names, n, sizeof(*names), cmp_str);
    for (size_t i = 0; i < n; i++) {
        struct qr_buf path;
        qr_buf_init(&path, 8192);
        if (qr_buf_appendf(&path, "%s/%s", dir, names[i]) == QR_OK) {
            char *data = NULL;
            size_t len = 0;
            struct qr_diag d = {{0}};
            if (read_small(path.ptr, QR_MANIFEST_MAX_BYTES, &data, &len, &d) == QR_OK) {
                (void) add_json(r, data, len, path.ptr, QR_REG_FILE, &d, NULL);
                free(data);
            } else {
                qr_registry_problem(r, QR_REG_BAD_FILE, path.ptr, NULL, NULL, "'%s': %s", path.ptr,
                                    d.msg);
            }
        }
        qr_buf_cleanup(&path);
        free(names[i]);
    }
    free(names);
    return QR_OK;
}

/* ---- digests and joins ----------------------------------------------------------------------- */

static bool model_states_digest(const struct qr_reg_model *m, const char *digest)
{
    const struct qr_manifest *mf = m->m;
    for (size_t i = 0; i < mf->n_artifacts; i++) {
        const struct qr_manifest_artifact *a = &mf->artifacts[i];
        if ((a->sha256 && !strcmp(a->sha256, digest)) ||
            (a->ollama_digest && !strcmp(a->ollama_digest, digest)))
            return true;
    }
    for (size_t i = 0; i < m->n_files; i++) {
        if (!strcmp(m->files[i].sha256, digest))
            return true;
    }
    for (size_t i = 0; i < m->n_remotes; i++) {
        if (m->remotes[i].digest && !strcmp(m->remotes[i].digest, digest))
            return true;
    }
    return false;
}

size_t qr_registry_find_digest_mut(struct qr_registry *r, const char *digest,
                                   struct qr_reg_model **out)
{
    size_t n = 0;
    if (out)
        *out = NULL;
    for (size_t i = 0; digest && *digest && i < r->n; i++) {
        if (!model_states_digest(r->models[i], digest))
            continue;
        if (n++ == 0 && out)
            *out = r->models[i];
    }
    return n;
}

size_t qr_registry_find_digest(const struct qr_registry *r, const char *digest,
                               const struct qr_reg_model **out)
{
    struct qr_reg_model *m;
    size_t n = qr_registry_find_digest_mut((struct qr_registry *) r, digest, &m);
    if (out)
        *out = m;
    return n;
}

struct qr_reg_model *qr_registry_find_uri_mut(struct qr_registry *r, const char *uri,
                                              const struct qr_manifest_artifact **art)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct qr_manifest *mf = r->models[i]->m;
        for (size_t j = 0; j < mf->n_artifacts; j++) {
            if (!strcmp(mf->artifacts[j].uri, uri)) {
                if (art)
                    *art = &mf->artifacts[j];
                return r->models[i];
            }
        }
    }
    return NULL;
}

void qr_registry_join_file(struct qr_reg_model *m, const char *path, const char *uri,
                           const char *sha256, uint64_t size)
{
    for (size_t i = 0; i < m->n_files; i++) {
        if (!strcmp(m->files[i].uri, uri))
            return;
    }
    m->files = xrealloc(m->files, (m->n_files + 1) * sizeof(*m->files));
    struct qr_reg_file *f = &m->files[m->n_files++];
    memset(f, 0, sizeof(*f));
    f->path = xstrdup(path);
    f->uri = xstrdup(uri);
    snprintf(f->sha256, sizeof f->sha256, "%s", sha256 ? sha256 : "");
    f->size = size;
}

static void join_remote(struct qr_reg_model *m, const char *backend, const char *name,
                        const char *digest, const struct qr_reg_remote_facts *facts)
{
    for (size_t i = 0; i < m->n_remotes; i++) {
        if (!strcmp(m->remotes[i].backend, backend) && !strcmp(m->remotes[i].name, name))
            return;
    }
    m->remotes = xrealloc(m->remotes, (m->n_remotes + 1) * sizeof(*m->remotes));
    struct qr_reg_remote *x = &m->remotes[m->n_remotes++];
    x->backend = xstrdup(backend);
    x->name = xstrdup(name);
    x->digest = xstrdup(digest);
    x->architecture = xstrdup(facts->architecture);
    x->context_length = facts->context_length;
    x->parent = xstrdup(facts->parent);
}

/* The facts worth keeping: a label-shaped architecture and a context length the manifest schema
 * admits (architecture_contract.context_length: 1 to 1e8); anything else counts as not reported. */
static void usable_facts(const struct qr_reg_remote_facts *in, struct qr_reg_remote_facts *out)
{
    out->architecture = NULL;
    out->context_length = 0;
    out->parent = NULL;
    if (!in)
        return;
    if (in->parent && in->parent[0] && strlen(in->parent) < 1024)
        out->parent = in->parent;
    if (in->architecture && qr_manifest_label_valid(in->architecture))
        out->architecture = in->architecture;
    if (in->context_length > 0 && in->context_length <= 100000000)
        out->context_length = in->context_length;
}

/* ---- backend-reported models ----------------------------------------------------------------- */

static bool norm_digest(const char *in, char out[72])
{
    const char *hex = !strncmp(in, "sha256:", 7) ? in + 7 : in;
    snprintf(out, 72, "sha256:%.64s", hex);
    return strlen(hex) == 64 && qr_manifest_digest_valid(out);
}

/* The digest a name is already bound to: a manifest artifact whose ollama.tag has the same key,
 * or an earlier report of the same name (any backend). NULL when unbound. */
static const char *bound_digest(const struct qr_registry *r, const char *key)
{
    char k2[QR_REG_KEY_MAX];
    for (size_t i = 0; i < r->n; i++) {
        const struct qr_reg_model *m = r->models[i];
        for (size_t j = 0; j < m->m->n_artifacts; j++) {
            const struct qr_manifest_artifact *a = &m->m->artifacts[j];
            if (a->ollama_tag && a->ollama_digest && qr_registry_name_key(a->ollama_tag, k2) &&
                !strcmp(k2, key))
                return a->ollama_digest;
        }
        for (size_t j = 0; j < m->n_remotes; j++) {
            const struct qr_reg_remote *x = &m->remotes[j];
            if (x->digest && qr_registry_name_key(x->name, k2) && !strcmp(k2, key))
                return x->digest;
        }
    }
    return NULL;
}

/* "<backend>.<key without :latest>", every character outside the id set as '-'. */
static void remote_id(const char *backend, const char *key, char *out, size_t cap)
{
    size_t n = strlen(key);
    if (n >= 7 && !strcmp(key + n - 7, ":latest"))
        n -= 7;
    int k = snprintf(out, cap, "%s.", backend);
    size_t o = k > 0 ? (size_t) k : 0;
    for (size_t i = 0; i < n && o + 1 < cap && o < QR_MANIFEST_MAX_ID; i++) {
        char c = key[i];
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        out[o++] = ok ? c : '-';
    }
    out[o] = 0;
}

static enum qr_err create_remote(struct qr_registry *r, const char *backend, bool ollama,
                                 const char *name, const char *key, const char *digest,
                                 const struct qr_reg_remote_facts *facts, struct qr_diag *diag,
                                 struct qr_reg_model **out);

enum qr_err qr_registry_add_remote(struct qr_registry *r, const char *backend_id, bool kind_ollama,
                                   const char *name, const char *digest,
                                   const struct qr_reg_remote_facts *facts, struct qr_diag *diag,
                                   const struct qr_reg_model **out)
{
    char key[QR_REG_KEY_MAX], dg[72] = "", origin[200];
    struct qr_reg_model *m = NULL;
    struct qr_reg_remote_facts fx;
    usable_facts(facts, &fx);
    if (out)
        *out = NULL;
    snprintf(origin, sizeof origin, "backend:%s", backend_id ? backend_id : "?");
    if (!backend_id || !qr_manifest_id_valid(backend_id) || strlen(backend_id) > 32) {
        qr_registry_problem(r, QR_REG_BAD_REMOTE, origin, NULL, NULL,
                            "backend id is not a canonical id of at most 32 bytes");
        return qr_diag_set(diag, QR_ERR_INVALID, "backend id is not a canonical id");
    }
    if (!qr_registry_name_key(name, key)) {
        qr_registry_problem(r, QR_REG_BAD_REMOTE, origin, NULL, NULL,
                            "'%s': reported model name is not a usable name", origin);
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': reported model name is not usable", origin);
    }
    if (digest && !norm_digest(digest, dg)) {
        qr_registry_problem(r, QR_REG_BAD_REMOTE, origin, NULL, name,
                            "'%s': model '%s' has a digest that is not sha256 hex", origin, name);
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': digest of '%s' is not sha256 hex", origin,
                           name);
    }
    const char *bound = dg[0] ? bound_digest(r, key) : NULL;
    if (bound && strcmp(bound, dg) != 0) {
        qr_registry_problem(r, QR_REG_DIGEST_CLASH, origin, NULL, name,
                            "'%s': model '%s' reported with digest %s, but the name is bound to "
                            "%s; not joined",
                            origin, name, dg, bound);
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': '%s' has digest %s, bound to %s", origin,
                           name, dg, bound);
    }
    size_t nd = dg[0] ? qr_registry_find_digest_mut(r, dg, &m) : 0;
    if (nd > 1) {
        qr_registry_problem(r, QR_REG_DIGEST_CLASH, origin, NULL, dg,
                            "'%s': digest %s of '%s' is stated by %zu models; not joined", origin,
                            dg, name, nd);
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': digest %s is stated by %zu models", origin,
                           dg, nd);
    }
    const struct qr_reg_model *named = qr_registry_find(r, name);
    if (m && named && named != m &&
        (named->source == QR_REG_BUILTIN || named->source == QR_REG_FILE)) {
        qr_registry_problem(r, QR_REG_DIGEST_CLASH, origin, named->origin, name,
                            "'%s': model '%s' is '%s' by name but its digest %s is stated by "
                            "'%s'; not joined",
                            origin, name, named->m->id, dg, m->m->id);
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s': '%s' names '%s', its digest '%s'", origin,
                           name, named->m->id, m->m->id);
    }
    if (!m) {
        const struct qr_reg_model *byname = named;
        if (byname && (byname->source == QR_REG_BUILTIN || byname->source == QR_REG_FILE))
            m = (struct qr_reg_model *) byname;
        /* the same backend reporting the same name again */
        for (size_t i = 0; !m && byname && i < byname->n_remotes; i++) {
            if (!strcmp(byname->remotes[i].backend, backend_id))
                m = (struct qr_reg_model *) byname;
        }
    }
    if (!m) {
        enum qr_err e = create_remote(r, backend_id, kind_ollama, name, key, dg, &fx, diag, &m);
        if (e)
            return e;
    }
    join_remote(m, backend_id, name, dg[0] ? dg : NULL, &fx);
    if (out)
        *out = m;
    return QR_OK;
}

/* A new model for a name no manifest states: a generated manifest, validated like any other. What
 * the backend reported (facts, already usable_facts) is stated; the rest is marked unknown. */
static enum qr_err create_remote(struct qr_registry *r, const char *backend, bool ollama,
                                 const char *name, const char *key, const char *digest,
                                 const struct qr_reg_remote_facts *facts, struct qr_diag *diag,
                                 struct qr_reg_model **out)
{
    char id[QR_MANIFEST_MAX_ID + 40], alias[QR_REG_KEY_MAX + 40], uri[QR_REG_KEY_MAX + 64];
    char origin[200], display[200];
    remote_id(backend, key, id, sizeof id);
    snprintf(alias, sizeof alias, "%s/%s", backend, name);
    snprintf(uri, sizeof uri, ollama ? "ollama:%s" : "openai:%s/%s", ollama ? name : backend, name);
    snprintf(origin, sizeof origin, "backend:%s", backend);
    snprintf(display, sizeof display, "%.120s (%.32s)", name, backend);
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_str(doc, root, "schema_version", QR_MANIFEST_SCHEMA);
    yyjson_mut_obj_add_str(doc, root, "id", id);
    yyjson_mut_obj_add_str(doc, root, "display_name", display);
    yyjson_mut_val *al = yyjson_mut_obj_add_arr(doc, root, "aliases");
    if (strlen(alias) <= QR_MANIFEST_MAX_ALIAS)
        yyjson_mut_arr_add_str(doc, al, alias);
    char probe[QR_REG_KEY_MAX];
    bool found = false;
    if (qr_registry_name_key(name, probe))
        name_pos(r, probe, &found);
    if (!found)
        yyjson_mut_arr_add_str(doc, al, name);
    else
        qr_registry_problem(r, QR_REG_NAME_CLASH, origin, qr_registry_find(r, name)->origin, name,
                            "'%s': name '%s' is taken by model '%s'; the new model '%s' is "
                            "reachable as '%s' only",
                            origin, name, qr_registry_find(r, name)->m->id, id, alias);
    yyjson_mut_val *src = yyjson_mut_obj_add_obj(doc, root, "source");
    yyjson_mut_obj_add_str(doc, src, "provider", ollama ? "ollama" : "openai-compatible");
    yyjson_mut_obj_add_str(doc, src, "reference", name);
    yyjson_mut_obj_add_str(doc, src, "revision", digest[0] ? digest : "unresolved");
    yyjson_mut_val *be = yyjson_mut_obj_add_obj(doc, root, "backend");
    yyjson_mut_obj_add_str(doc, be, "type", ollama ? "ollama-adapter" : "external");
    yyjson_mut_val *arts = yyjson_mut_obj_add_arr(doc, root, "artifacts");
    yyjson_mut_val *a = yyjson_mut_arr_add_obj(doc, arts);
    yyjson_mut_obj_add_str(doc, a, "uri", uri);
    yyjson_mut_obj_add_str(doc, a, "backend", ollama ? "ollama-adapter" : "external");
    yyjson_mut_obj_add_str(doc, a, "role", "inference");
    if (ollama) {
        yyjson_mut_val *ol = yyjson_mut_obj_add_obj(doc, a, "ollama");
        yyjson_mut_obj_add_str(doc, ol, "tag", name);
        if (digest[0])
            yyjson_mut_obj_add_str(doc, ol, "digest", digest);
    }
    yyjson_mut_val *md = yyjson_mut_obj_add_obj(doc, root, "model");
    yyjson_mut_obj_add_str(doc, md, "architecture",
                           facts->architecture ? facts->architecture : "unknown");
    yyjson_mut_obj_add_str(doc, md, "parameter_class", "unspecified");
    yyjson_mut_obj_add_str(doc, md, "quantization", "unspecified");
    /* context_window is required: without a reported length it is a placeholder (2048), and no
     * architecture_contract says otherwise (/api/show then states no context length) */
    int64_t ctx = facts->context_length;
    uint64_t window = ctx <= 0 ? 2048 : (uint64_t) ctx; /* the schema caps it at 10,000,000 */
    yyjson_mut_obj_add_uint(doc, md, "context_window", window > 10000000 ? 10000000 : window);
    yyjson_mut_obj_add_str(doc, md, "architecture_class", "unknown");
    yyjson_mut_val *cp = yyjson_mut_obj_add_obj(doc, md, "context_policy");
    yyjson_mut_obj_add_bool(doc, cp, "backend_managed", true);
    if (ctx > 0) {
        yyjson_mut_val *ac = yyjson_mut_obj_add_obj(doc, md, "architecture_contract");
        yyjson_mut_obj_add_uint(doc, ac, "context_length", (uint64_t) ctx);
    }
    yyjson_mut_val *caps = yyjson_mut_obj_add_obj(doc, root, "capabilities");
    static const char *const CAPS[] = {"vision", "audio", "embeddings", "tools", "thinking"};
    yyjson_mut_obj_add_bool(doc, caps, "text", true);
    for (size_t i = 0; i < QR_ARRAY_LEN(CAPS); i++)
        yyjson_mut_obj_add_bool(doc, caps, CAPS[i], false);
    yyjson_mut_val *co = yyjson_mut_obj_add_obj(doc, root, "compatibility");
    yyjson_mut_obj_add_str(doc, co, "min_runtime_version", "0.4.0-alpha.1");
    yyjson_mut_val *st = yyjson_mut_obj_add_obj(doc, root, "state");
    yyjson_mut_obj_add_str(doc, st, "install", "external");
    yyjson_mut_obj_add_str(doc, st, "verification", "unverified");
    yyjson_mut_obj_add_str(doc, st, "lifecycle", "active");
    yyjson_mut_val *pv = yyjson_mut_obj_add_obj(doc, root, "provenance");
    yyjson_mut_obj_add_str(doc, pv, "publisher", origin);
    size_t len;
    char *json = yyjson_mut_write(doc, 0, &len);
    yyjson_mut_doc_free(doc);
    if (!json)
        abort();
    enum qr_err e = add_json(r, json, len, origin, QR_REG_BACKEND, diag, out);
    free(json);
    return e;
}
