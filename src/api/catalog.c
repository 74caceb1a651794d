/* Loading the daemon's catalog (catalog.h): the model registry from builtin manifests, the
 * configured registry directories and GGUF discovery in models_dir (sha256 cache under state_dir),
 * the builtin model policies and deployment profiles plus those of each registry directory's
 * policies/ and deployment-profiles/ subdirectories, and the builtin upstream ledger merged with
 * the local one (<state_dir>/upstream-ledger.local.json). Nothing here is fatal but a bad local
 * ledger at start-up (fail closed: its blocks must not be silently dropped): every other bad file
 * is logged, listed as a problem, and skipped. */
#include "api/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yyjson.h>

#include "backend/backend.h"
#include "core/buf.h"
#include "core/fsutil.h"
#include "core/log.h"
#include "policy/ledger.h"
#include "policy/policy.h"
#include "policy/profile.h"
#include "registry/registry.h"

#define MAX_DATA_FILE (1024u * 1024u) /* one policy or profile file */
#define MAX_DIR_FILES 256u            /* policy or profile files read from one directory */

static char *xstrdup(const char *s)
{
    char *r = strdup(s ? s : "");
    if (!r)
        abort();
    return r;
}

static void add_problem(struct qr_catalog *c, const char *origin, const char *message)
{
    QR_LOG(QR_LOG_WARN, "catalog: file skipped", QR_LF_S("origin", origin),
           QR_LF_S("problem", message));
    if (c->n_problems >= QR_CATALOG_MAX_PROBLEMS)
        return;
    if (!c->problems) {
        c->problems = calloc(QR_CATALOG_MAX_PROBLEMS, sizeof(*c->problems));
        if (!c->problems)
            abort();
    }
    c->problems[c->n_problems].origin = xstrdup(origin);
    c->problems[c->n_problems].message = xstrdup(message);
    c->n_problems++;
}

/* Keep a file name alive for as long as the sets that borrow it. */
static const char *keep_name(struct qr_catalog *c, const char *name)
{
    char **n = realloc(c->names, (c->n_names + 1) * sizeof(*n));
    if (!n)
        abort();
    c->names = n;
    c->names[c->n_names] = xstrdup(name);
    return c->names[c->n_names++];
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The *.json files directly in dir, sorted; NULL (and *n 0) when dir does not exist. */
static char **list_json(const char *dir, size_t *n)
{
    *n = 0;
    DIR *dh = opendir(dir);
    if (!dh)
        return NULL;
    char **names = NULL;
    struct dirent *de;
    while ((de = readdir(dh)) && *n < MAX_DIR_FILES) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len < 6 || strcmp(de->d_name + len - 5, ".json"))
            continue;
        char **g = realloc(names, (*n + 1) * sizeof(*g));
        if (!g)
            abort();
        names = g;
        names[(*n)++] = xstrdup(de->d_name);
    }
    closedir(dh);
    if (*n)
        qsort(names, *n, sizeof(*names), cmp_str);
    return names;
}

static char *read_small(const char *path, size_t *len, struct qr_diag *diag)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        qr_diag_set(diag, QR_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    if ((uint64_t) st.st_size > MAX_DATA_FILE) {
        qr_diag_set(diag, QR_ERR_TOO_LARGE, "'%s' is larger than 1 MiB", path);
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    char *buf = f ? malloc((size_t) st.st_size + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t) st.st_size, f) : 0;
    if (f)
        fclose(f);
    if (!buf || got != (size_t) st.st_size) {
        free(buf);
        qr_diag_set(diag, QR_ERR_IO, "cannot read '%s'", path);
        return NULL;
    }
    buf[got] = '\0';
    *len = got;
    return buf;
}

enum data_kind { D_POLICY, D_PROFILE };

/* Add every NAME.json of dir/sub to the policy or profile set. */
static void load_data_dir(struct qr_catalog *c, const char *dir, const char *sub,
                          enum data_kind kind)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    size_t n;
    char **names = list_json(path, &n);
    for (size_t i = 0; i < n; i++) {
        char file[4400];
        snprintf(file, sizeof(file), "%s/%s", path, names[i]);
        struct qr_diag diag = {{0}};
        size_t len = 0;
        char *json = read_small(file, &len, &diag);
        const char *kept = json ? keep_name(c, file) : NULL;
        enum qr_err err = !json ? QR_ERR_IO
                          : kind == D_POLICY
                              ? qr_policy_set_add(c->policies, kept, json, len, &diag)
                              : qr_profile_set_add(c->profiles, kept, json, len, &diag);
        if (err)
            add_problem(c, file, diag.msg);
        free(json);
        free(names[i]);
    }
    free(names);
}

static void load_builtins(struct qr_catalog *c)
{
    struct qr_diag diag = {{0}};
    if (qr_policy_set_load_builtin(&c->policies, &diag)) {
        add_problem(c, "builtin:policies/", diag.msg);
        if (qr_policy_set_new(&c->policies))
            abort();
    }
    diag.msg[0] = '\0';
    if (qr_profile_set_load_builtin(&c->profiles, &diag)) {
        add_problem(c, "builtin:deployment-profiles/", diag.msg);
        if (qr_profile_set_new(&c->profiles))
            abort();
    }
    diag.msg[0] = '\0';
    if (qr_ledger_load_builtin(&diag, &c->ledger)) {
        add_problem(c, "builtin:upstream-ledger.json", diag.msg);
        c->ledger = NULL;
    }
}

/* Merge the local ledger text json (len bytes, kept by c when it merges) into c->ledger. */
static enum qr_err merge_local(struct qr_catalog *c, const char *path, char *json, size_t len,
                               struct qr_diag *diag)
{
    struct qr_ledger *local = NULL, *merged = NULL;
    enum qr_err err = qr_ledger_parse_local(path, json, len, diag, &local);
    if (err)
        return err;
    if (!c->ledger) { /* the builtin one failed (a problem already): the local blocks still hold */
        c->ledger = local;
    } else {
        struct qr_ledger *builtin = c->ledger;
        c->ledger = NULL;
        if ((err = qr_ledger_merge(builtin, local, path, diag, &merged))) {
            /* both were taken: rebuild the builtin one alone */
            struct qr_diag d2 = {{0}};
            if (qr_ledger_load_builtin(&d2, &c->ledger))
                c->ledger = NULL;
            return err;
        }
        c->ledger = merged;
    }
    c->ledger_local_json = json;
    c->ledger_local_len = len;
    return QR_OK;
}

/* <state_dir>/upstream-ledger.local.json, when it exists. A bad file fails closed: at start-up
 * the error is returned; on reload the previous local text is merged again and the bad file is a
 * problem. */
static enum qr_err load_local_ledger(struct qr_catalog *c, const struct qr_config *cfg,
                                     const struct qr_catalog *prev)
{
    char path[4200];
    struct stat st;
    if (!cfg->state_dir ||
        snprintf(path, sizeof path, "%s/%s", cfg->state_dir, QR_LEDGER_LOCAL_FILE) >=
            (int) sizeof path ||
        (stat(path, &st) != 0 && errno == ENOENT))
        return QR_OK;
    const char *where = path; /* for the log fields */
    struct qr_diag diag = {{0}};
    size_t len = 0;
    char *json = read_small(path, &len, &diag);
    enum qr_err err = json ? merge_local(c, path, json, len, &diag) : QR_ERR_IO;
    if (err == QR_OK) {
        QR_LOG(QR_LOG_INFO, "local upstream ledger merged", QR_LF_S("path", where),
               QR_LF_N("entries", qr_ledger_entry_count(c->ledger)),
               QR_LF_N("blocks", qr_ledger_block_count(c->ledger)));
        return QR_OK;
    }
    free(json);
    if (!prev) {
        QR_LOG(QR_LOG_ERROR, "the local upstream ledger is invalid: refusing to start",
               QR_LF_S("path", where), QR_LF_S("error", diag.msg));
        return QR_ERR_CONFIG;
    }
    QR_LOG(QR_LOG_ERROR, "reload: the local upstream ledger is invalid; keeping the previous one",
           QR_LF_S("path", where), QR_LF_S("error", diag.msg));
    add_problem(c, path, diag.msg);
    if (prev->ledger_local_json) {
        char *keep = malloc(prev->ledger_local_len + 1);
        if (!keep)
            abort();
        memcpy(keep, prev->ledger_local_json, prev->ledger_local_len + 1);
        struct qr_diag d2 = {{0}};
        if (merge_local(c, path, keep, prev->ledger_local_len, &d2)) {
            free(keep); /* it merged before: only an allocation can fail now */
            QR_LOG(QR_LOG_ERROR, "reload: the previous local ledger no longer merges",
                   QR_LF_S("error", d2.msg));
        }
    }
    return QR_OK;
}

/* A deployment profile's model.target must name a registry model (a problem, not fatal: /v1/route
 * then answers model_not_found for it). */
static void check_profile_targets(struct qr_catalog *c)
{
    for (size_t i = 0; i < qr_profile_set_count(c->profiles); i++) {
        const struct qr_profile *p = qr_profile_set_at(c->profiles, i);
        if (!p->target || qr_registry_find(c->registry, p->target))
            continue;
        char msg[400];
        snprintf(msg, sizeof(msg), "model.target: '%.200s' is not in the registry", p->target);
        add_problem(c, p->file ? p->file : p->id, msg);
    }
}

static void discover(struct qr_catalog *c, const struct qr_config *cfg)
{
    struct stat st;
    if (stat(cfg->models_dir, &st) != 0) {
        /* the default models directory need not exist; an explicit one must */
        if (cfg->source[QR_CFG_MODELS_DIR] != QR_SRC_DEFAULT)
            qr_registry_discover_gguf(
                c->registry,
                &(struct qr_discover_opts){.models_dir = cfg->models_dir, .no_hash = true});
        return;
    }
    char cache[4200];
    snprintf(cache, sizeof(cache), "%s/sha256-cache", cfg->state_dir);
    if (cfg->hash_models)
        qr_mkdir_p(cfg->state_dir, false);
    struct qr_discover_opts o = {
        .models_dir = cfg->models_dir,
        .cache_path = cfg->hash_models ? cache : NULL,
        .no_hash = !cfg->hash_models,
    };
    qr_registry_discover_gguf(c->registry, &o);
}

/* Report the previous registry's backend names again (a reload keeps what backends said). */
static void carry_remotes(struct qr_catalog *c, const struct qr_catalog *prev,
                          const struct qr_config *cfg)
{
    for (size_t i = 0; i < qr_registry_count(prev->registry); i++) {
        const struct qr_reg_model *m = qr_registry_at(prev->registry, i);
        for (size_t j = 0; j < m->n_remotes; j++) {
            const struct qr_reg_remote *rm = &m->remotes[j];
            struct qr_reg_remote_facts fx = {rm->architecture, rm->context_length, rm->parent};
            struct qr_diag d = {{0}};
            const struct qr_backend_spec *spec = qr_config_backend_find(cfg, rm->backend);
            bool ollama = spec ? !strcmp(spec->kind, "ollama") : !strcmp(rm->backend, "ollama");
            (void) qr_registry_add_remote(c->registry, rm->backend, ollama, rm->name, rm->digest,
                                          &fx, &d, NULL);
        }
    }
}

enum qr_err qr_catalog_load(const struct qr_config *cfg, const struct qr_catalog *previous,
                            struct qr_catalog **out)
{
    struct qr_catalog *c = calloc(1, sizeof(*c));
    if (!c)
        return QR_ERR_NOMEM;
    c->registry = qr_registry_new();
    if (!c->registry) {
        free(c);
        return QR_ERR_NOMEM;
    }
    if (qr_registry_load_builtin(c->registry))
        goto nomem;
    static unsigned long generations;
    c->generation = ++generations;
    load_builtins(c);
    if (load_local_ledger(c, cfg, previous) != QR_OK) {
        qr_catalog_free(c);
        return QR_ERR_CONFIG;
    }
    /* registry directories, in the order configured */
    for (const char *p = cfg->registry_dirs; p && *p;) {
        size_t n = strcspn(p, ":");
        if (n) {
            char *dir = strndup(p, n);
            if (!dir)
                abort();
            (void) qr_registry_load_dir(c->registry, dir);
            load_data_dir(c, dir, "policies", D_POLICY);
            load_data_dir(c, dir, "deployment-profiles", D_PROFILE);
            free(dir);
        }
        p += n;
        if (*p == ':')
            p++;
    }
    discover(c, cfg);
    if (previous)
        carry_remotes(c, previous, cfg);
    check_profile_targets(c);
    size_t n_reg = 0, n_total = 0;
    const struct qr_reg_problem *pr = qr_registry_problems(c->registry, &n_reg, &n_total);
    for (size_t i = 0; i < n_reg; i++)
        QR_LOG(QR_LOG_WARN, "registry problem", QR_LF_S("origin", pr[i].origin),
               QR_LF_S("name", pr[i].name), QR_LF_S("problem", pr[i].message));
    QR_LOG(QR_LOG_INFO, "catalog loaded", QR_LF_N("models", qr_registry_count(c->registry)),
           QR_LF_N("policies", qr_policy_set_count(c->policies)),
           QR_LF_N("profiles", qr_profile_set_count(c->profiles)),
           QR_LF_N("ledger_entries", c->ledger ? qr_ledger_entry_count(c->ledger) : 0),
           QR_LF_N("problems", n_total + c->n_problems));
    *out = c;
    return QR_OK;
nomem:
    qr_catalog_free(c);
    return QR_ERR_NOMEM;
}

void qr_catalog_free(struct qr_catalog *c)
{
    if (!c)
        return;
    qr_registry_free(c->registry);
    qr_policy_set_free(c->policies);
    qr_profile_set_free(c->profiles);
    qr_ledger_free(c->ledger);
    free(c->ledger_local_json);
    for (size_t i = 0; i < c->n_problems; i++) {
        free(c->problems[i].origin);
        free(c->problems[i].message);
    }
    free(c->problems);
    for (size_t i = 0; i < c->n_names; i++)
        free(c->names[i]);
    free(c->names);
    for (size_t i = 0; i < c->n_refused; i++)
        free(c->refused[i]);
    free(c->refused);
    free(c);
}

void qr_catalog_join_backend(struct qr_catalog *c, const char *backend_id, bool kind_ollama,
                             const struct qr_backend_model *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].id || !rows[i].id[0] || qr_registry_find(c->registry, rows[i].id))
            continue;
        bool tried = false;
        for (size_t k = 0; k < c->n_refused && !tried; k++)
            tried = !strcmp(c->refused[k], rows[i].id);
        if (tried)
            continue; /* refused once (recorded then): every listing would refuse it again */
        struct qr_diag d = {{0}};
        const char *digest = rows[i].digest && rows[i].digest[0] ? rows[i].digest : NULL;
        /* what the backend states about the model (Ollama's family, vLLM's max_model_len) */
        struct qr_reg_remote_facts fx = {rows[i].family, rows[i].context_length, rows[i].parent};
        if (!qr_registry_add_remote(c->registry, backend_id, kind_ollama, rows[i].id, digest, &fx,
                                    &d, NULL))
            continue;
        QR_LOG(QR_LOG_WARN, "backend model not joined to the registry",
               QR_LF_S("backend", backend_id), QR_LF_S("name", rows[i].id),
               QR_LF_S("problem", d.msg));
        if (c->n_refused < QR_CATALOG_MAX_PROBLEMS) {
            char **g = realloc(c->refused, (c->n_refused + 1) * sizeof(*g));
            if (!g)
                abort();
            c->refused = g;
            c->refused[c->n_refused++] = xstrdup(rows[i].id);
        }
    }
}

static const char *const PROBLEM_KIND[] = {"bad_file", "name_clash", "digest_clash", "bad_remote"};

void qr_catalog_add_problems(const struct qr_catalog *c, void *vdoc, void *vobj)
{
    yyjson_mut_doc *doc = vdoc;
    yyjson_mut_val *obj = vobj;
    size_t n = 0, total = 0;
    const struct qr_reg_problem *pr = qr_registry_problems(c->registry, &n, &total);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, obj, "problems");
    for (size_t i = 0; i < n; i++) {
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        yyjson_mut_obj_add_str(doc, o, "kind", PROBLEM_KIND[pr[i].kind & 3]);
        yyjson_mut_obj_add_strcpy(doc, o, "origin", pr[i].origin);
        if (pr[i].other)
            yyjson_mut_obj_add_strcpy(doc, o, "other", pr[i].other);
        if (pr[i].name)
            yyjson_mut_obj_add_strcpy(doc, o, "name", pr[i].name);
        yyjson_mut_obj_add_strcpy(doc, o, "message", pr[i].message);
    }
    for (size_t i = 0; i < c->n_problems; i++) {
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
        yyjson_mut_obj_add_str(doc, o, "kind", "bad_file");
        yyjson_mut_obj_add_strcpy(doc, o, "origin", c->problems[i].origin);
        yyjson_mut_obj_add_strcpy(doc, o, "message", c->problems[i].message);
    }
    yyjson_mut_obj_add_uint(doc, obj, "problems_total", total + c->n_problems);
}

void qr_catalog_model_find(const struct qr_catalog *c, const char *name,
                           struct qr_catalog_model *out)
{
    memset(out, 0, sizeof(*out));
    const struct qr_reg_model *m = name && name[0] ? qr_registry_find(c->registry, name) : NULL;
    if (!m)
        return;
    out->known = m->source == QR_REG_BACKEND ? QR_KNOWN_BACKEND : QR_KNOWN_MANIFEST;
    out->canonical_id = m->m->id;
    out->architecture_class = m->m->architecture_class ? m->m->architecture_class : "";
    out->architecture = m->m->architecture;
}

bool qr_catalog_serves(const struct qr_reg_model *m, const struct qr_backend *b)
{
    if (m->source == QR_REG_BACKEND)
        return false; /* listed under the backend's own name */
    bool ollama = b->vt == &qr_backend_ollama;
    for (size_t i = 0; i < m->m->n_artifacts; i++) {
        const struct qr_manifest_artifact *a = &m->m->artifacts[i];
        if ((a->backend && !strcmp(a->backend, b->vt->kind)) ||
            (ollama && (a->ollama_tag || !strncmp(a->uri, "ollama:", 7))))
            return true;
    }
    return false;
}

const char *qr_catalog_served_name(const struct qr_reg_model *m, const struct qr_backend *b)
{
    for (size_t i = 0; b && i < m->n_remotes; i++) {
        if (!strcmp(m->remotes[i].backend, qr_backend_id(b)))
            return m->remotes[i].name; /* the name b itself reported */
    }
    if (b && b->vt == &qr_backend_ollama) {
        for (size_t i = 0; i < m->m->n_artifacts; i++) {
            const struct qr_manifest_artifact *a = &m->m->artifacts[i];
            if (a->ollama_tag)
                return a->ollama_tag;
            if (!strncmp(a->uri, "ollama:", 7) && a->uri[7])
                return a->uri + 7;
        }
    }
    return m->m->id;
}

const char *qr_catalog_reporter(const struct qr_catalog *c, const char *name, size_t i)
{
    const struct qr_reg_model *m = c ? qr_registry_find(c->registry, name) : NULL;
    return m && i < m->n_remotes ? m->remotes[i].backend : NULL;
}
