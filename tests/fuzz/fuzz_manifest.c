/* libFuzzer target for model manifests. Any input must parse into a manifest or fail with a
 * parse, validation or size error and a message, never crash. A manifest that parses must hold
 * what the validator promises (id and aliases match their patterns, at least one artifact with a
 * URI, known enum values), must be accepted by a registry, resolve by its id and every alias, and
 * render in the `/v1/models` and `/v1/models/{id}` documents; the input is also tried as a model
 * name and as an artifact URI.
 *
 * Seeds in corpus/fuzz_manifest: the builtin manifests, a manifest using every field, and broken
 * ones (trailing data, duplicate keys, unknown fields, wrong types, bad digests and versions). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yyjson.h>

#include "registry/manifest.h"
#include "registry/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_manifest(const struct qr_manifest *m)
{
    if (!qr_manifest_id_valid(m->id) || !m->display_name || !m->backend || m->n_artifacts < 1 ||
        !m->install || !m->verification || !m->lifecycle || !m->caps)
        abort();
    for (size_t i = 0; i < m->n_aliases; i++) {
        if (!qr_manifest_alias_valid(m->aliases[i]) || !strcmp(m->aliases[i], m->id))
            abort();
    }
    for (size_t i = 0; i < m->n_artifacts; i++) {
        if (!m->artifacts[i].uri || strlen(m->artifacts[i].uri) < 3 ||
            (m->artifacts[i].sha256 && !qr_manifest_digest_valid(m->artifacts[i].sha256)))
            abort();
    }
    if (!strcmp(m->verification, "failed") && !strcmp(m->lifecycle, "active"))
        abort();
}

static void check_registry(const char *json, size_t len, const struct qr_manifest *m)
{
    struct qr_registry *r = qr_registry_new();
    struct qr_diag d;
    const struct qr_reg_model *rm;
    if (qr_registry_add_json(r, json, len, "fuzz", QR_REG_FILE, &d, &rm) != QR_OK)
        abort(); /* a valid manifest alone never clashes */
    if (qr_registry_find(r, m->id) != rm)
        abort();
    for (size_t i = 0; i < m->n_aliases; i++) {
        if (qr_registry_find(r, m->aliases[i]) != rm)
            abort();
    }
    void *doc = qr_registry_list_json(r);
    char *s = qr_registry_json_write(doc, NULL);
    if (!s)
        abort();
    free(s);
    yyjson_mut_doc_free(doc);
    if (qr_registry_model_json(r, m->id, &doc) != QR_OK)
        abort();
    s = qr_registry_json_write(doc, NULL);
    if (!s)
        abort();
    free(s);
    yyjson_mut_doc_free(doc);
    qr_registry_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *) data;
    struct qr_manifest *m = NULL;
    struct qr_diag d = {{0}};
    enum qr_err e = qr_manifest_parse(json, size, &d, &m);
    if (e != QR_OK) {
        if (m || (e != QR_ERR_PARSE && e != QR_ERR_INVALID && e != QR_ERR_TOO_LARGE) || !d.msg[0])
            abort();
    } else {
        check_manifest(m);
        check_registry(json, size, m);
        qr_manifest_free(m);
    }
    /* the input as a name and as a URI */
    if (size < 512) {
        char s[512], key[QR_REG_KEY_MAX], *path = NULL;
        memcpy(s, data, size);
        s[size] = 0;
        if (qr_registry_name_key(s, key) && strlen(key) >= QR_REG_KEY_MAX)
            abort();
        if (qr_registry_resolve_uri("/m", s, &path, &d) == QR_OK) {
            if (strncmp(path, "/", 1) != 0 || strstr(path, "/../") || strstr(path, "/./"))
                abort();
            free(path);
        }
    }
    return 0;
}
