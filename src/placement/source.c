/* The placement planner's inputs from the real world and its one answer document: the discovered
 * host as a struct qr_placement_host, a GGUF file sized into a struct qr_placement_model, the
 * ledger's verified flags, a POST /v1/placement body parsed (unknown fields refused), and the
 * document both POST /v1/placement and `quantum-runtime plan --json` answer. */
#include "placement/placement.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <yyjson.h>

#include "gguf/arch.h"
#include "gguf/gguf.h"
#include "host/profile.h"
#include "policy/ledger.h"
#include "registry/manifest.h"
#include "registry/registry.h"

#define MAX_CTX      (1ull << 24) /* 16 Mi cells: beyond every model's context */
#define MAX_PARALLEL 256u
#define MAX_THREADS  4096u
#define DEFAULT_CTX  4096u /* when neither the request nor the file states one */

void qr_placement_host_from_profile(const struct qr_host_profile *p, const struct qr_host_limits *l,
                                    struct qr_placement_host *h)
{
    memset(h, 0, sizeof *h);
    h->physical_cores = l->physical_cores_allowed ? l->physical_cores_allowed : p->physical_cores;
    h->logical_cpus = l->effective_logical_cpus ? l->effective_logical_cpus : p->logical_cores;
    if (!h->physical_cores)
        h->physical_cores = 1;
    if (!h->logical_cpus)
        h->logical_cpus = h->physical_cores;
    h->ram_total = p->memory_total;
    h->ram_available = p->memory_available;
    h->ram_limit = l->memory_max_bytes;
    for (size_t i = 0; i < p->n_numa && h->n_numa < QR_PLACEMENT_MAX_NUMA; i++) {
        int cpus = qr_host_cpu_list_count(p->numa[i].cpu_list);
        h->numa[h->n_numa++] = (struct qr_placement_numa){
            .id = p->numa[i].id,
            .cpus = cpus > 0 ? (uint32_t) cpus : 0,
            .memory_bytes = p->numa[i].memory_bytes,
        };
    }
    for (size_t i = 0; i < p->n_accel && h->n_accel < QR_PLACEMENT_MAX_ACCEL; i++) {
        struct qr_placement_accel *a = &h->accel[h->n_accel++];
        snprintf(a->name, sizeof a->name, "%s %s", p->accel[i].vendor, p->accel[i].device);
        a->vram_bytes = p->accel[i].vram_bytes;
    }
}

void qr_placement_host_locate_file(struct qr_placement_host *h, const char *path)
{
    h->model_on_nvme = false;
    h->model_device[0] = '\0';
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    char link[64], real[PATH_MAX];
    snprintf(link, sizeof link, "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
    if (!realpath(link, real))
        return; /* not a block device (overlay, tmpfs, NFS): not NVMe */
    const char *base = strrchr(real, '/');
    base = base ? base + 1 : real;
    size_t n = strnlen(base, sizeof h->model_device - 1);
    memcpy(h->model_device, base, n);
    h->model_device[n] = '\0';
    h->model_on_nvme = strstr(real, "/nvme/") != NULL || !strncmp(h->model_device, "nvme", 4);
}

bool qr_placement_host_refresh_memory(struct qr_placement_host *h, const char *path)
{
    FILE *f = fopen(path ? path : "/proc/meminfo", "r");
    if (!f)
        return false;
    unsigned long long kb = 0;
    bool avail = false;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1 && kb && kb < UINT64_MAX / 1024)
            h->ram_total = (uint64_t) kb * 1024u;
        else if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1 && kb < UINT64_MAX / 1024) {
            h->ram_available = (uint64_t) kb * 1024u;
            avail = true;
        }
    }
    fclose(f);
    return avail;
}

enum qr_err qr_placement_model_from_file(const char *path, uint64_t n_ctx, uint64_t n_seq,
                                         struct qr_placement_model *out, struct qr_diag *diag)
{
    memset(out, 0, sizeof *out);
    struct qr_gguf *g = NULL;
    struct qr_arch *a = calloc(1, sizeof *a);
    if (!a)
        return qr_diag_set(diag, QR_ERR_NOMEM, "out of memory");
    enum qr_err err = qr_gguf_open(path, NULL, diag, &g);
    if (!err)
        err = qr_gguf_arch_derive(g, a, diag);
    if (err)
        goto done;
    if (!n_ctx)
        n_ctx = a->context_length.known && a->context_length.v ? a->context_length.v : DEFAULT_CTX;
    if (n_ctx > MAX_CTX)
        n_ctx = MAX_CTX;
    struct qr_sizing_params sp;
    qr_sizing_params_init(&sp, n_ctx);
    if (n_seq) { /* an explicit -np N: one stream per slot, as llama-server does */
        sp.n_seq = n_seq;
        sp.kv_unified = false;
    }
    struct qr_sizing s;
    err = qr_gguf_size_engine(g, a, &sp, &s, diag);
    if (err && err != QR_ERR_TOO_LARGE)
        goto done;
    for (unsigned c = 0; c < QR_SIZING_CLASS_COUNT; c++)
        out->cls[c] = s.cls[c].bytes;
    out->n_layers = a->block_count.known ? a->block_count.v : 0;
    out->leading_dense = a->leading_dense_block_count.known ? a->leading_dense_block_count.v : 0;
    out->expert_count = a->expert_count.known ? a->expert_count.v : 0;
    out->expert_used = a->expert_used_count.known ? a->expert_used_count.v : 0;
    out->no_cache = s.eng.no_cache;
    out->kv_known = !err && s.kv == QR_SIZING_KV_KNOWN;
    out->kv_unknown = out->kv_known ? NULL : qr_sizing_kv_name(s.kv);
    out->kv_bytes_f16 = s.eng.kv_bytes;
    out->compute_known = s.eng.compute_known;
    out->compute_bytes = s.eng.compute_bytes;
    out->n_ctx = n_ctx;
    out->n_seq = sp.n_seq;
    const struct qr_arch_u64 *dims[] = {&a->head_dim_k, &a->head_dim_v, &a->head_dim_k_swa,
                                        &a->head_dim_v_swa};
    for (size_t i = 0; i < QR_ARRAY_LEN(dims); i++)
        out->kv_head_dims[i] = dims[i]->known ? dims[i]->v : 0;
    err = QR_OK;
done:
    qr_gguf_close(g);
    free(a);
    return err;
}

static bool main_gguf(const struct qr_manifest_artifact *a)
{
    bool gguf =
        a->backend ? !strcmp(a->backend, "llama.cpp") : a->format && !strcmp(a->format, "gguf");
    return gguf && (!a->role || !strcmp(a->role, "inference") || !strcmp(a->role, "embedding") ||
                    !strcmp(a->role, "reranking"));
}

/* The readable file of artifact a of m into out: its URI under models_dir, else a discovered
 * file joined under that URI. */
static bool artifact_path(const struct qr_reg_model *m, const struct qr_manifest_artifact *a,
                          const char *models_dir, char *out, size_t cap)
{
    char *path = NULL;
    struct qr_diag d = {{0}};
    bool ok = qr_registry_resolve_uri(models_dir, a->uri, &path, &d) == QR_OK &&
              access(path, R_OK) == 0 && strlen(path) < cap;
    if (ok)
        memcpy(out, path, strlen(path) + 1);
    free(path);
    for (size_t i = 0; !ok && i < m->n_files; i++) {
        ok = m->files[i].uri && !strcmp(m->files[i].uri, a->uri) &&
             access(m->files[i].path, R_OK) == 0 && strlen(m->files[i].path) < cap;
        if (ok)
            memcpy(out, m->files[i].path, strlen(m->files[i].path) + 1);
    }
    return ok;
}

enum qr_err qr_placement_resolve_model(const struct qr_registry *reg, const char *models_dir,
                                       const char *name, char *out, size_t cap,
                                       struct qr_diag *diag)
{
    const struct qr_reg_model *m = reg ? qr_registry_find(reg, name) : NULL;
    if (!m)
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' is not in the registry", name);
    for (size_t i = 0; m->source != QR_REG_BACKEND && i < m->m->n_artifacts; i++) {
        const struct qr_manifest_artifact *a = &m->m->artifacts[i];
        if (main_gguf(a))
            return artifact_path(m, a, models_dir ? models_dir : "", out, cap)
                       ? QR_OK
                       : qr_diag_set(diag, QR_ERR_NOT_FOUND,
                                     "the GGUF artifact '%s' of model '%s' is not readable under "
                                     "models_dir",
                                     a->uri, m->m->id);
    }
    return qr_diag_set(diag, QR_ERR_NOT_FOUND, "model '%s' has no llama.cpp GGUF artifact", name);
}

static bool listed(const char *const *v, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], key))
            return true;
    return false;
}

void qr_placement_verified_from_ledger(const struct qr_ledger *l, struct qr_placement_verified *v)
{
    memset(v, 0, sizeof *v);
    for (size_t i = 0; l && i < qr_ledger_entry_count(l); i++) {
        const struct qr_ledger_entry *e = qr_ledger_entry_at(l, i);
        if (strcmp(e->backend_kind, "llama.cpp") || e->status == QR_LEDGER_BLOCKED)
            continue;
        const char *const *on = (const char *const *) e->enabled_capabilities;
        const char *const *bad = (const char *const *) e->broken_capabilities;
#define VERIFIED(key) (listed(on, e->n_enabled, key) && !listed(bad, e->n_broken, key))
        v->hybrid |= VERIFIED("placement.hybrid");
        v->expert_offload |= VERIFIED("moe.expert_offload");
        v->kv_offload |= VERIFIED("cache.kv_offload");
#undef VERIFIED
    }
}

/* ---- POST /v1/placement body ---- */

static enum qr_err get_uint(yyjson_val *v, const char *k, uint64_t max, uint64_t *out,
                            struct qr_diag *diag)
{
    if (!yyjson_is_uint(v) || yyjson_get_uint(v) > max)
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s' must be an integer from 0 to %llu", k,
                           (unsigned long long) max);
    *out = yyjson_get_uint(v);
    return QR_OK;
}

static enum qr_err get_bool(yyjson_val *v, const char *k, bool *out, struct qr_diag *diag)
{
    if (!yyjson_is_bool(v))
        return qr_diag_set(diag, QR_ERR_INVALID, "'%s' must be true or false", k);
    *out = yyjson_get_bool(v);
    return QR_OK;
}

/* One member of the body into q; *accel set when allow_acceleration was given. */
static enum qr_err query_field(const char *k, yyjson_val *v, struct qr_placement_query *q,
                               int *accel, struct qr_diag *diag)
{
    uint64_t u = 0;
    enum qr_err err = QR_OK;
    if (!strcmp(k, "model") || !strcmp(k, "path")) {
        if (!yyjson_is_str(v) || !yyjson_get_len(v) || yyjson_get_len(v) >= PATH_MAX)
            return qr_diag_set(diag, QR_ERR_INVALID, "'%s' must be a non-empty string", k);
        *(k[0] == 'm' ? &q->model : &q->path) = yyjson_get_str(v);
    } else if (!strcmp(k, "context")) {
        err = get_uint(v, k, MAX_CTX, &q->n_ctx, diag);
    } else if (!strcmp(k, "parallel")) {
        err = get_uint(v, k, MAX_PARALLEL, &q->n_seq, diag);
    } else if (!strcmp(k, "threads")) {
        if (!(err = get_uint(v, k, MAX_THREADS, &u, diag)))
            q->req.threads = (uint32_t) u;
    } else if (!strcmp(k, "reserve_ram_bytes")) {
        err = get_uint(v, k, UINT64_MAX / 4, &q->req.reserve_ram_bytes, diag);
    } else if (!strcmp(k, "prefer")) {
        if (!qr_placement_prefer_parse(yyjson_get_str(v), &q->req.prefer))
            return qr_diag_set(diag, QR_ERR_INVALID, "'prefer' must be auto, cpu, hybrid or gpu");
    } else if (!strcmp(k, "kv_type")) {
        if (!qr_placement_kv_type_parse(yyjson_get_str(v), &q->req.kv_type))
            return qr_diag_set(diag, QR_ERR_INVALID,
                               "'kv_type' must be f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, "
                               "q5_0 or q5_1");
    } else if (!strcmp(k, "allow_acceleration")) {
        bool b = false;
        if (!(err = get_bool(v, k, &b, diag)))
            *accel = b;
    } else if (!strcmp(k, "allow_nvme_cold_tier")) {
        err = get_bool(v, k, &q->req.allow_nvme_cold_tier, diag);
    } else {
        return qr_diag_set(diag, QR_ERR_INVALID, "unknown field '%s'", k);
    }
    return err;
}

enum qr_err qr_placement_query_parse(yyjson_doc *doc, struct qr_placement_query *q,
                                     struct qr_diag *diag)
{
    /* filled by the caller: what the ledger verified, and the configuration's defaults */
    struct qr_placement_request defaults = q->req;
    memset(q, 0, sizeof *q);
    q->req.verified = defaults.verified;
    q->req.prefer = defaults.prefer;
    q->req.allow_nvme_cold_tier = defaults.allow_nvme_cold_tier;
    yyjson_val *root = yyjson_doc_get_root(doc);
    if (!yyjson_is_obj(root))
        return qr_diag_set(diag, QR_ERR_INVALID, "the body must be a JSON object");
    int accel = -1; /* not given */
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, i, max, k, v)
    {
        enum qr_err err = query_field(yyjson_get_str(k), v, q, &accel, diag);
        if (err)
            return err;
    }
    if (!q->model == !q->path)
        return qr_diag_set(diag, QR_ERR_INVALID, "give exactly one of 'model' and 'path'");
    bool split =
        q->req.prefer == QR_PLACEMENT_PREFER_HYBRID || q->req.prefer == QR_PLACEMENT_PREFER_GPU;
    if (split && accel == 0)
        return qr_diag_set(diag, QR_ERR_INVALID, "'prefer' %s needs allow_acceleration",
                           qr_placement_prefer_name(q->req.prefer));
    /* asking for a split is asking for acceleration; otherwise the configuration's choice */
    q->req.allow_acceleration = accel < 0 ? split || defaults.allow_acceleration : accel == 1;
    return QR_OK;
}

/* ---- the answer document ---- */

/* "calibration": the stored run's JSON as it was stored, or null. */
static bool add_calibration(yyjson_mut_doc *doc, yyjson_mut_val *root, const char *json)
{
    yyjson_doc *d = json ? yyjson_read(json, strlen(json), 0) : NULL;
    yyjson_mut_val *v = d ? yyjson_val_mut_copy(doc, yyjson_doc_get_root(d)) : NULL;
    yyjson_doc_free(d);
    return v ? yyjson_mut_obj_add_val(doc, root, "calibration", v)
             : yyjson_mut_obj_add_null(doc, root, "calibration");
}

static enum qr_err build(yyjson_mut_doc *doc, const struct qr_placement_query *q,
                         const char *api_version, const struct qr_host_profile *hp,
                         const struct qr_host_limits *hl, const struct qr_placement_model *m,
                         const struct qr_placement_plan *plan)
{
    yyjson_mut_val *root = yyjson_mut_obj(doc), *mo, *h, *l, *p;
    if (!root)
        return QR_ERR_NOMEM;
    yyjson_mut_doc_set_root(doc, root);
    bool ok =
        yyjson_mut_obj_add_strcpy(doc, root, "api_version", api_version) &&
        yyjson_mut_obj_add_str(doc, root, "placement_schema", QR_PLACEMENT_SCHEMA) &&
        (mo = yyjson_mut_obj_add_obj(doc, root, "model")) &&
        (q->model ? yyjson_mut_obj_add_strcpy(doc, mo, "name", q->model)
                  : yyjson_mut_obj_add_null(doc, mo, "name")) &&
        yyjson_mut_obj_add_strcpy(doc, mo, "path", q->path) &&
        (h = yyjson_mut_obj_add_obj(doc, root, "host")) && !qr_host_profile_json(hp, doc, h) &&
        (l = yyjson_mut_obj_add_obj(doc, root, "limits")) && !qr_host_limits_json(hl, doc, l) &&
        add_calibration(doc, root, q->calibration_json) &&
        (p = yyjson_mut_obj_add_obj(doc, root, "plan")) && !qr_placement_plan_json(plan, m, doc, p);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

enum qr_err qr_placement_document(const struct qr_placement_query *q, const char *api_version,
                                  yyjson_mut_doc **out, bool *fits, struct qr_diag *diag)
{
    *out = NULL;
    *fits = false;
    struct qr_host_profile *hp = malloc(sizeof *hp);
    struct qr_host_limits *hl = malloc(sizeof *hl);
    struct qr_placement_host *h = malloc(sizeof *h);
    struct qr_placement_plan *plan = malloc(sizeof *plan);
    struct qr_placement_model m;
    yyjson_mut_doc *doc = NULL;
    enum qr_err err = QR_ERR_NOMEM;
    if (!hp || !hl || !h || !plan) {
        qr_diag_set(diag, err, "out of memory");
        goto fail;
    }
    if ((err = qr_placement_model_from_file(q->path, q->n_ctx, q->n_seq, &m, diag)))
        goto fail;
    qr_host_discover(NULL, hp, hl);
    qr_placement_host_from_profile(hp, hl, h);
    qr_placement_host_locate_file(h, q->path);
    if ((err = qr_placement_plan(h, &m, &q->req, plan, diag)))
        goto fail;
    err = QR_ERR_NOMEM;
    if (!(doc = yyjson_mut_doc_new(NULL)) ||
        build(doc, q, api_version, hp, hl, &m, plan) != QR_OK) {
        qr_diag_set(diag, err, "out of memory");
        goto fail;
    }
    *fits = plan->fits;
    *out = doc;
    doc = NULL;
    err = QR_OK;
fail:
    yyjson_mut_doc_free(doc);
    free(plan);
    free(h);
    free(hl);
    free(hp);
    return err;
}
