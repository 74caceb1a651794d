/* The registry as JSON: the `/v1/models` summary list and the `/v1/models/{id}` full manifest
 * (../shared/reference/upstream-go-runtime.md §1.1 shapes, kept compatible), built as yyjson
 * mutable documents for the HTTP layer to write. Capabilities are listed by their hyphenated
 * names in sorted order, as the predecessor's list did. */
#include "registry/registry.h"

#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

static void add_summary(yyjson_mut_doc *doc, yyjson_mut_val *arr, const struct qr_reg_model *m)
{
    const struct qr_manifest *mf = m->m;
    yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, arr);
    yyjson_mut_obj_add_strcpy(doc, o, "id", mf->id);
    yyjson_mut_obj_add_strcpy(doc, o, "display_name", mf->display_name);
    if (mf->n_aliases) {
        yyjson_mut_val *al = yyjson_mut_obj_add_arr(doc, o, "aliases");
        for (size_t i = 0; i < mf->n_aliases; i++)
            yyjson_mut_arr_add_strcpy(doc, al, mf->aliases[i]);
    }
    yyjson_mut_obj_add_strcpy(doc, o, "backend", mf->backend);
    /* the bit order is the alphabetical order of the names (manifest.h) */
    yyjson_mut_val *caps = yyjson_mut_obj_add_arr(doc, o, "capabilities");
    for (unsigned i = 0; i < QR_CAP_COUNT; i++) {
        if (mf->caps & (1u << i))
            yyjson_mut_arr_add_strcpy(doc, caps, qr_manifest_cap_name(1u << i));
    }
    yyjson_mut_val *st = yyjson_mut_obj_add_obj(doc, o, "state");
    yyjson_mut_obj_add_strcpy(doc, st, "install", mf->install);
    yyjson_mut_obj_add_strcpy(doc, st, "verification", mf->verification);
    yyjson_mut_obj_add_strcpy(doc, st, "lifecycle", mf->lifecycle);
}

void *qr_registry_list_json(const struct qr_registry *r)
{
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    if (!doc)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_strcpy(doc, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_strcpy(doc, root, "schema_version", QR_MANIFEST_SCHEMA);
    size_t n = qr_registry_count(r);
    yyjson_mut_obj_add_uint(doc, root, "count", n);
    yyjson_mut_val *arr = yyjson_mut_obj_add_arr(doc, root, "models");
    for (size_t i = 0; i < n; i++)
        add_summary(doc, arr, qr_registry_at(r, i));
    return doc;
}

static const char *const SOURCE[] = {"builtin", "file", "gguf", "backend"};

static void add_discovered(yyjson_mut_doc *doc, yyjson_mut_val *root, const struct qr_reg_model *m)
{
    yyjson_mut_val *d = yyjson_mut_obj_add_obj(doc, root, "discovered");
    yyjson_mut_obj_add_strcpy(doc, d, "source", SOURCE[m->source]);
    /* a registry-directory path is operator configuration, not shown to clients */
    yyjson_mut_obj_add_strcpy(doc, d, "origin",
                              m->source == QR_REG_FILE ? "registry-directory" : m->origin);
    yyjson_mut_val *files = yyjson_mut_obj_add_arr(doc, d, "files");
    for (size_t i = 0; i < m->n_files; i++) {
        yyjson_mut_val *f = yyjson_mut_arr_add_obj(doc, files);
        yyjson_mut_obj_add_strcpy(doc, f, "uri", m->files[i].uri);
        if (m->files[i].sha256[0])
            yyjson_mut_obj_add_strcpy(doc, f, "sha256", m->files[i].sha256);
        else
            yyjson_mut_obj_add_null(doc, f, "sha256");
        yyjson_mut_obj_add_uint(doc, f, "size_bytes", m->files[i].size);
    }
    yyjson_mut_val *bk = yyjson_mut_obj_add_arr(doc, d, "backends");
    for (size_t i = 0; i < m->n_remotes; i++) {
        yyjson_mut_val *b = yyjson_mut_arr_add_obj(doc, bk);
        yyjson_mut_obj_add_strcpy(doc, b, "backend", m->remotes[i].backend);
        yyjson_mut_obj_add_strcpy(doc, b, "name", m->remotes[i].name);
        if (m->remotes[i].digest)
            yyjson_mut_obj_add_strcpy(doc, b, "digest", m->remotes[i].digest);
        else
            yyjson_mut_obj_add_null(doc, b, "digest");
        /* what else the backend reported, where a generated manifest's values came from */
        if (m->remotes[i].architecture)
            yyjson_mut_obj_add_strcpy(doc, b, "architecture", m->remotes[i].architecture);
        if (m->remotes[i].context_length > 0)
            yyjson_mut_obj_add_int(doc, b, "context_length", m->remotes[i].context_length);
    }
}

enum qr_err qr_registry_model_json(const struct qr_registry *r, const char *identifier, void **out)
{
    *out = NULL;
    const struct qr_reg_model *m = qr_registry_find(r, identifier);
    if (!m)
        return QR_ERR_NOT_FOUND;
    yyjson_mut_doc *doc = yyjson_mut_doc_new(NULL);
    if (!doc)
        return QR_ERR_NOMEM;
    yyjson_mut_val *root = yyjson_mut_obj(doc);
    yyjson_mut_doc_set_root(doc, root);
    yyjson_mut_obj_add_strcpy(doc, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_strcpy(doc, root, "schema_version", QR_MANIFEST_SCHEMA);
    yyjson_mut_obj_add_strcpy(doc, root, "requested_identifier", identifier);
    yyjson_mut_val *copy = yyjson_val_mut_copy(doc, (yyjson_val *) qr_manifest_root(m->m));
    if (!copy) {
        yyjson_mut_doc_free(doc);
        return QR_ERR_NOMEM;
    }
    yyjson_mut_obj_add_val(doc, root, "model", copy);
    add_discovered(doc, root, m);
    *out = doc;
    return QR_OK;
}

char *qr_registry_json_write(const void *mut_doc, size_t *len)
{
    return yyjson_mut_write((const yyjson_mut_doc *) mut_doc, 0, len);
}
