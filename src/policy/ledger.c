/* The upstream ledger (ledger.h): loading and validating the machine-readable record of tested
 * engine builds and known-bad blocks, the latest-known-good pick per backend kind, and the
 * fail-closed block query the router and the capability evaluator ask before they trust a
 * capability on a (backend kind, engine version, model, hardware) combination. The ledger is
 * stricter than the 0.3 line's: capabilities are contract keys (a typo is an error, not a silent
 * miss), a `tested` entry names its engine versions, and blocks must cite their sources. */
#include "policy/ledger.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/builtin.h"
#include "policy/pjson.h"
#include "policy/version.h"
#include "capability/capability.h"

struct qr_ledger {
    yyjson_doc *doc;
    yyjson_doc *local_doc; /* a merged ledger: the local file's document (strings borrowed) */
    struct qr_ledger_entry *entries; /* sorted by id */
    size_t n_entries;
    struct qr_ledger_block *blocks; /* sorted by id */
    size_t n_blocks;
};

static const char *const status_names[] = {"tested",  "candidate", "observed-unpinned",
                                           "blocked", "planned",   NULL};

const char *qr_ledger_status_str(enum qr_ledger_status s)
{
    return (unsigned) s < QR_ARRAY_LEN(status_names) - 1 ? status_names[s] : "?";
}

/* The contract's canonical key names (capability/capability.h), exactly. */
bool qr_ledger_capability_known(const char *key)
{
    return key && qr_cap_key_parse(qr_slice_str(key)) != QR_CAP_NOT_A_KEY;
}

/* --- loading -------------------------------------------------------------------------------- */

static void entry_cleanup(struct qr_ledger_entry *e)
{
    free(e->engine_versions);
    free(e->enabled_capabilities);
    free(e->broken_capabilities);
    free(e->disabled_capabilities);
    free(e->hardware_classes);
    free(e->family_notes);
}

static void block_cleanup(struct qr_ledger_block *b)
{
    free(b->engine_versions);
    free(b->when);
    free(b->alt_engine_versions);
    free(b->sources);
}

void qr_ledger_free(struct qr_ledger *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n_entries; i++)
        entry_cleanup(&l->entries[i]);
    for (size_t i = 0; i < l->n_blocks; i++)
        block_cleanup(&l->blocks[i]);
    free(l->entries);
    free(l->blocks);
    yyjson_doc_free(l->doc);
    yyjson_doc_free(l->local_doc);
    free(l);
}

static enum qr_err fail_at(struct qr_pj *pj, const char *key, size_t idx, const char *what,
                           const char *v)
{
    qr_pj_push_key(pj, key);
    if (idx != (size_t) -1)
        qr_pj_push_idx(pj, idx);
    return qr_pj_fail(pj, "'%s' %s", v, what);
}

static enum qr_err check_caps(struct qr_pj *pj, const char *key, const char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!qr_ledger_capability_known(v[i]))
            return fail_at(pj, key, i, "is not a capability key of " QR_LEDGER_SCHEMA, v[i]);
    return QR_OK;
}

/* An exact version name: a constraint with one clause and no operator. */
static bool plain_version(const char *s)
{
    return qr_version_constraint_valid(s) && !strpbrk(s, "<>= *");
}

static enum qr_err parse_family_notes(struct qr_pj *pj, yyjson_val *o, struct qr_ledger_entry *e)
{
    static const char *const keys[] = {"family", "note", NULL};
    yyjson_val *arr;
    size_t n;
    enum qr_err err = qr_pj_array(pj, o, "model_family_notes", false, 64, &arr, &n);
    if (err != QR_OK || n == 0)
        return err;
    e->family_notes = calloc(n, sizeof(*e->family_notes));
    if (!e->family_notes)
        return QR_ERR_NOMEM;
    e->n_family_notes = n;
    size_t mark = qr_pj_push_key(pj, "model_family_notes");
    for (size_t i = 0; i < n; i++) {
        yyjson_val *it = yyjson_arr_get(arr, i);
        size_t mi = qr_pj_push_idx(pj, i);
        if ((err = qr_pj_object(pj, it, keys)) != QR_OK ||
            (err = qr_pj_str(pj, it, "family", true, QR_PJ_MAX_ID, &e->family_notes[i].family)) !=
                QR_OK ||
            (err = qr_pj_str(pj, it, "note", true, QR_PJ_MAX_TEXT, &e->family_notes[i].note)) !=
                QR_OK)
            return err;
        qr_pj_pop(pj, mi);
    }
    qr_pj_pop(pj, mark);
    return QR_OK;
}

static enum qr_err parse_entry_fields(struct qr_pj *pj, yyjson_val *o, struct qr_ledger_entry *e)
{
    static const char *const keys[] = {"id",
                                       "project",
                                       "backend_kind",
                                       "source_url",
                                       "tested_ref",
                                       "engine_versions",
                                       "status",
                                       "observed_at",
                                       "enabled_capabilities",
                                       "broken_capabilities",
                                       "disabled_capabilities",
                                       "hardware_classes",
                                       "license_ref",
                                       "provenance",
                                       "model_family_notes",
                                       "notes",
                                       NULL};
    const char *status;
    enum qr_err err;
    if ((err = qr_pj_object(pj, o, keys)) != QR_OK ||
        (err = qr_pj_str(pj, o, "id", true, QR_PJ_MAX_ID, &e->id)) != QR_OK ||
        (err = qr_pj_str(pj, o, "project", true, QR_PJ_MAX_ID, &e->project)) != QR_OK ||
        (err = qr_pj_str(pj, o, "backend_kind", true, QR_PJ_MAX_ID, &e->backend_kind)) != QR_OK ||
        (err = qr_pj_str(pj, o, "source_url", true, 512, &e->source_url)) != QR_OK ||
        (err = qr_pj_str(pj, o, "tested_ref", false, QR_PJ_MAX_ID, &e->tested_ref)) != QR_OK ||
        (err = qr_pj_str(pj, o, "status", true, QR_PJ_MAX_ID, &status)) != QR_OK ||
        (err = qr_pj_str(pj, o, "observed_at", false, 40, &e->observed_at)) != QR_OK ||
        (err = qr_pj_str(pj, o, "license_ref", false, QR_PJ_MAX_TEXT, &e->license_ref)) != QR_OK ||
        (err = qr_pj_str(pj, o, "provenance", false, QR_PJ_MAX_TEXT, &e->provenance)) != QR_OK ||
        (err = qr_pj_str(pj, o, "notes", false, QR_PJ_MAX_TEXT, &e->notes)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "engine_versions", false, true, 16, QR_VERSION_MAX_LEN,
                          &e->engine_versions, &e->n_engine_versions)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "enabled_capabilities", false, true, 28, QR_PJ_MAX_ID,
                          &e->enabled_capabilities, &e->n_enabled)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "broken_capabilities", false, true, 28, QR_PJ_MAX_ID,
                          &e->broken_capabilities, &e->n_broken)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "disabled_capabilities", false, false, 64, QR_PJ_MAX_TEXT,
                          &e->disabled_capabilities, &e->n_disabled)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "hardware_classes", false, true, 64, QR_PJ_MAX_ID,
                          &e->hardware_classes, &e->n_hardware)) != QR_OK ||
        (err = parse_family_notes(pj, o, e)) != QR_OK)
        return err;
    int st = qr_pj_lookup(status, status_names);
    if (st < 0)
        return fail_at(pj, "status", (size_t) -1,
                       "is not tested, candidate, observed-unpinned, blocked or planned", status);
    e->status = (enum qr_ledger_status) st;
    return QR_OK;
}

static enum qr_err parse_entry(struct qr_pj *pj, yyjson_val *o, struct qr_ledger_entry *e)
{
    enum qr_err err = parse_entry_fields(pj, o, e);
    if (err != QR_OK)
        return err;
    if (strncmp(e->source_url, "https://", 8) != 0 || !e->source_url[8])
        return fail_at(pj, "source_url", (size_t) -1, "is not an absolute https URL",
                       e->source_url);
    if (e->observed_at && !qr_pj_is_rfc3339(e->observed_at))
        return fail_at(pj, "observed_at", (size_t) -1, "is not an RFC 3339 time", e->observed_at);
    for (size_t i = 0; i < e->n_engine_versions; i++)
        if (!plain_version(e->engine_versions[i]))
            return fail_at(pj, "engine_versions", i, "is not an exact version name",
                           e->engine_versions[i]);
    if ((err = check_caps(pj, "enabled_capabilities", e->enabled_capabilities, e->n_enabled)) !=
            QR_OK ||
        (err = check_caps(pj, "broken_capabilities", e->broken_capabilities, e->n_broken)) != QR_OK)
        return err;
    for (size_t i = 0; i < e->n_broken; i++)
        for (size_t j = 0; j < e->n_enabled; j++)
            if (strcmp(e->broken_capabilities[i], e->enabled_capabilities[j]) == 0)
                return fail_at(pj, "broken_capabilities", i, "is also listed as enabled",
                               e->broken_capabilities[i]);
    if (e->status == QR_LEDGER_TESTED) {
        const char *missing = !e->tested_ref          ? "tested_ref"
                              : !e->observed_at       ? "observed_at"
                              : !e->license_ref       ? "license_ref"
                              : !e->n_engine_versions ? "engine_versions"
                                                      : NULL;
        if (missing)
            return qr_pj_fail(pj, "a tested entry needs %s", missing);
    }
    return QR_OK;
}

static enum qr_err parse_alternative(struct qr_pj *pj, yyjson_val *o, struct qr_ledger_block *b)
{
    static const char *const keys[] = {"backend_kind", "engine_versions", "note", NULL};
    yyjson_val *a = yyjson_obj_get(o, "alternative");
    if (!a)
        return QR_OK;
    size_t mark = qr_pj_push_key(pj, "alternative");
    enum qr_err err;
    if ((err = qr_pj_object(pj, a, keys)) != QR_OK ||
        (err = qr_pj_str(pj, a, "backend_kind", true, QR_PJ_MAX_ID, &b->alt_backend_kind)) !=
            QR_OK ||
        (err = qr_pj_str(pj, a, "note", false, QR_PJ_MAX_TEXT, &b->alt_note)) != QR_OK ||
        (err = qr_pj_strs(pj, a, "engine_versions", false, true, 16, QR_PJ_MAX_ID,
                          &b->alt_engine_versions, &b->n_alt_engine_versions)) != QR_OK)
        return err;
    for (size_t i = 0; i < b->n_alt_engine_versions; i++)
        if (!qr_version_constraint_valid(b->alt_engine_versions[i]))
            return fail_at(pj, "engine_versions", i, "is not a version constraint",
                           b->alt_engine_versions[i]);
    qr_pj_pop(pj, mark);
    return QR_OK;
}

static enum qr_err parse_block(struct qr_pj *pj, yyjson_val *o, struct qr_ledger_block *b)
{
    static const char *const keys[] = {"id",
                                       "backend_kind",
                                       "project",
                                       "engine_versions",
                                       "model_family",
                                       "model",
                                       "hardware_class",
                                       "capability",
                                       "when",
                                       "reason",
                                       "alternative",
                                       "sources",
                                       "notes",
                                       NULL};
    enum qr_err err;
    if ((err = qr_pj_object(pj, o, keys)) != QR_OK ||
        (err = qr_pj_str(pj, o, "id", true, QR_PJ_MAX_ID, &b->id)) != QR_OK ||
        (err = qr_pj_str(pj, o, "backend_kind", true, QR_PJ_MAX_ID, &b->backend_kind)) != QR_OK ||
        (err = qr_pj_str(pj, o, "project", false, QR_PJ_MAX_ID, &b->project)) != QR_OK ||
        (err = qr_pj_str(pj, o, "model_family", true, QR_PJ_MAX_ID, &b->model_family)) != QR_OK ||
        (err = qr_pj_str(pj, o, "model", false, QR_PJ_MAX_ID, &b->model)) != QR_OK ||
        (err = qr_pj_str(pj, o, "hardware_class", true, QR_PJ_MAX_ID, &b->hardware_class)) !=
            QR_OK ||
        (err = qr_pj_str(pj, o, "capability", true, QR_PJ_MAX_ID, &b->capability)) != QR_OK ||
        (err = qr_pj_str(pj, o, "reason", true, QR_PJ_MAX_TEXT, &b->reason)) != QR_OK ||
        (err = qr_pj_str(pj, o, "notes", false, QR_PJ_MAX_TEXT, &b->notes)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "engine_versions", false, true, 16, QR_PJ_MAX_ID,
                          &b->engine_versions, &b->n_engine_versions)) != QR_OK ||
        (err = qr_pj_strs(pj, o, "when", false, true, 8, QR_PJ_MAX_ID, &b->when, &b->n_when)) !=
            QR_OK ||
        (err = qr_pj_strs(pj, o, "sources", true, true, 16, QR_PJ_MAX_TEXT, &b->sources,
                          &b->n_sources)) != QR_OK ||
        (err = parse_alternative(pj, o, b)) != QR_OK)
        return err;
    if (!qr_ledger_capability_known(b->capability))
        return fail_at(pj, "capability", (size_t) -1,
                       "is not a capability key of " QR_LEDGER_SCHEMA, b->capability);
    for (size_t i = 0; i < b->n_engine_versions; i++)
        if (!qr_version_constraint_valid(b->engine_versions[i]))
            return fail_at(pj, "engine_versions", i, "is not a version constraint",
                           b->engine_versions[i]);
    if (b->model && strcmp(b->model_family, "*") == 0)
        return qr_pj_fail(pj, "a block naming a model must name its model_family");
    return QR_OK;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const struct qr_ledger_entry *) a)->id,
                  ((const struct qr_ledger_entry *) b)->id);
}

static int cmp_block(const void *a, const void *b)
{
    return strcmp(((const struct qr_ledger_block *) a)->id,
                  ((const struct qr_ledger_block *) b)->id);
}

/* Parse the list at key into *items (calloc'd, size each), element by element. */
static enum qr_err parse_list(struct qr_pj *pj, yyjson_val *root, const char *key, bool required,
                              size_t max, struct qr_ledger *l, bool entries)
{
    yyjson_val *arr;
    size_t n;
    enum qr_err err = qr_pj_array(pj, root, key, required, max, &arr, &n);
    if (err != QR_OK || n == 0)
        return err;
    void *items =
        calloc(n, entries ? sizeof(struct qr_ledger_entry) : sizeof(struct qr_ledger_block));
    if (!items)
        return QR_ERR_NOMEM;
    if (entries)
        l->entries = items;
    else
        l->blocks = items;
    size_t mark = qr_pj_push_key(pj, key);
    for (size_t i = 0; i < n; i++) {
        size_t mi = qr_pj_push_idx(pj, i);
        yyjson_val *o = yyjson_arr_get(arr, i);
        if (entries) {
            l->n_entries = i + 1;
            err = parse_entry(pj, o, &l->entries[i]);
        } else {
            l->n_blocks = i + 1;
            err = parse_block(pj, o, &l->blocks[i]);
        }
        if (err != QR_OK)
            return err;
        const char *id = entries ? l->entries[i].id : l->blocks[i].id;
        for (size_t j = 0; j < i; j++)
            if (strcmp(id, entries ? l->entries[j].id : l->blocks[j].id) == 0)
                return qr_pj_fail(pj, "duplicate id '%s'", id);
        qr_pj_pop(pj, mi);
    }
    qr_pj_pop(pj, mark);
    if (entries)
        qsort(l->entries, n, sizeof(*l->entries), cmp_entry);
    else
        qsort(l->blocks, n, sizeof(*l->blocks), cmp_block);
    return QR_OK;
}

static enum qr_err parse_doc(const char *name, const char *json, size_t len, bool local,
                             struct qr_diag *diag, struct qr_ledger **out)
{
    static const char *const keys[] = {"schema_version", "entries", "blocks", NULL};
    struct qr_pj pj;
    const char *schema;
    *out = NULL;
    qr_pj_init(&pj, name, diag);
    struct qr_ledger *l = calloc(1, sizeof(*l));
    if (!l)
        return QR_ERR_NOMEM;
    enum qr_err err = qr_pj_parse(&pj, json, len, &l->doc);
    if (err != QR_OK)
        goto fail;
    yyjson_val *root = yyjson_doc_get_root(l->doc);
    if ((err = qr_pj_object(&pj, root, keys)) != QR_OK ||
        (err = qr_pj_str(&pj, root, "schema_version", true, QR_PJ_MAX_ID, &schema)) != QR_OK)
        goto fail;
    if (strcmp(schema, QR_LEDGER_SCHEMA) != 0) {
        err = fail_at(&pj, "schema_version", (size_t) -1, "is not " QR_LEDGER_SCHEMA, schema);
        goto fail;
    }
    if ((err = parse_list(&pj, root, "entries", !local, QR_LEDGER_MAX_ENTRIES, l, true)) != QR_OK ||
        (err = parse_list(&pj, root, "blocks", false, QR_LEDGER_MAX_BLOCKS, l, false)) != QR_OK)
        goto fail;
    for (size_t i = 0; i < l->n_entries; i++)
        l->entries[i].local = local;
    for (size_t i = 0; i < l->n_blocks; i++)
        l->blocks[i].local = local;
    *out = l;
    return QR_OK;
fail:
    qr_ledger_free(l);
    return err;
}

enum qr_err qr_ledger_parse(const char *name, const char *json, size_t len, struct qr_diag *diag,
                            struct qr_ledger **out)
{
    return parse_doc(name, json, len, false, diag, out);
}

enum qr_err qr_ledger_parse_local(const char *name, const char *json, size_t len,
                                  struct qr_diag *diag, struct qr_ledger **out)
{
    return parse_doc(name, json, len, true, diag, out);
}

/* The first id of a that is also in b (both sorted by id), or NULL. */
static const char *shared_id(const char *(*id_at)(const void *, size_t), const void *a, size_t na,
                             const void *b, size_t nb)
{
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        int c = strcmp(id_at(a, i), id_at(b, j));
        if (c == 0)
            return id_at(a, i);
        if (c < 0)
            i++;
        else
            j++;
    }
    return NULL;
}

static const char *entry_id_at(const void *v, size_t i)
{
    return ((const struct qr_ledger_entry *) v)[i].id;
}

static const char *block_id_at(const void *v, size_t i)
{
    return ((const struct qr_ledger_block *) v)[i].id;
}

/* Move the n items of size sz from *src to the end of *dst (n_dst items); *src is emptied. */
static bool append_items(void **dst, size_t *n_dst, void **src, size_t *n_src, size_t sz)
{
    if (*n_src == 0)
        return true;
    char *g = realloc(*dst, (*n_dst + *n_src) * sz);
    if (!g)
        return false;
    memcpy(g + *n_dst * sz, *src, *n_src * sz);
    *dst = g;
    *n_dst += *n_src;
    free(*src);
    *src = NULL;
    *n_src = 0;
    return true;
}

enum qr_err qr_ledger_merge(struct qr_ledger *builtin, struct qr_ledger *local,
                            const char *local_name, struct qr_diag *diag, struct qr_ledger **out)
{
    enum qr_err err = QR_OK;
    *out = NULL;
    const char *dup = shared_id(entry_id_at, builtin->entries, builtin->n_entries, local->entries,
                                local->n_entries);
    const char *list = "entries";
    if (!dup) {
        dup = shared_id(block_id_at, builtin->blocks, builtin->n_blocks, local->blocks,
                        local->n_blocks);
        list = "blocks";
    }
    if (dup) {
        err = qr_diag_set(diag, QR_ERR_INVALID, "'%s': %s: id '%s' is also in the builtin ledger",
                          local_name, list, dup);
        goto fail;
    }
    if (builtin->n_entries + local->n_entries > QR_LEDGER_MAX_ENTRIES ||
        builtin->n_blocks + local->n_blocks > QR_LEDGER_MAX_BLOCKS) {
        err = qr_diag_set(diag, QR_ERR_TOO_LARGE,
                          "'%s': with the builtin ledger more than %u entries or %u blocks",
                          local_name, QR_LEDGER_MAX_ENTRIES, QR_LEDGER_MAX_BLOCKS);
        goto fail;
    }
    if (!append_items((void **) &builtin->entries, &builtin->n_entries, (void **) &local->entries,
                      &local->n_entries, sizeof(struct qr_ledger_entry)) ||
        !append_items((void **) &builtin->blocks, &builtin->n_blocks, (void **) &local->blocks,
                      &local->n_blocks, sizeof(struct qr_ledger_block))) {
        err = QR_ERR_NOMEM;
        goto fail;
    }
    if (builtin->n_entries)
        qsort(builtin->entries, builtin->n_entries, sizeof(*builtin->entries), cmp_entry);
    if (builtin->n_blocks)
        qsort(builtin->blocks, builtin->n_blocks, sizeof(*builtin->blocks), cmp_block);
    builtin->local_doc = local->doc; /* the moved items' strings live in it */
    local->doc = NULL;
    qr_ledger_free(local);
    *out = builtin;
    return QR_OK;
fail:
    qr_ledger_free(builtin);
    qr_ledger_free(local);
    return err;
}

enum qr_err qr_ledger_load_builtin(struct qr_diag *diag, struct qr_ledger **out)
{
    const struct qr_builtin_file *f = qr_builtin_find("upstream-ledger.json");
    if (!f) {
        *out = NULL;
        return qr_diag_set(diag, QR_ERR_NOT_FOUND, "no builtin 'upstream-ledger.json'");
    }
    return qr_ledger_parse(f->path, f->data, f->len, diag, out);
}

size_t qr_ledger_entry_count(const struct qr_ledger *l)
{
    return l ? l->n_entries : 0;
}

const struct qr_ledger_entry *qr_ledger_entry_at(const struct qr_ledger *l, size_t i)
{
    return l && i < l->n_entries ? &l->entries[i] : NULL;
}

size_t qr_ledger_block_count(const struct qr_ledger *l)
{
    return l ? l->n_blocks : 0;
}

const struct qr_ledger_block *qr_ledger_block_at(const struct qr_ledger *l, size_t i)
{
    return l && i < l->n_blocks ? &l->blocks[i] : NULL;
}

/* --- queries -------------------------------------------------------------------------------- */

/* Whether a is newer than b: later observed_at (as written; the data uses UTC), then id order
 * (the earlier id wins a tie, so the pick is deterministic). */
static bool newer(const struct qr_ledger_entry *a, const struct qr_ledger_entry *b)
{
    int c = strcmp(a->observed_at ? a->observed_at : "", b->observed_at ? b->observed_at : "");
    return c > 0 || (c == 0 && strcmp(a->id, b->id) < 0);
}

/* The newest tested entry of kind whose versions satisfy the constraints (none = any). */
static const struct qr_ledger_entry *newest_tested(const struct qr_ledger *l, const char *kind,
                                                   const char *const *vc, size_t n_vc)
{
    const struct qr_ledger_entry *best = NULL;
    for (size_t i = 0; i < l->n_entries; i++) {
        const struct qr_ledger_entry *e = &l->entries[i];
        if (e->status != QR_LEDGER_TESTED || strcmp(e->backend_kind, kind) != 0)
            continue;
        if (!qr_version_list_match(vc, n_vc, e->engine_versions, e->n_engine_versions))
            continue;
        if (!best || newer(e, best))
            best = e;
    }
    return best;
}

static int cmp_kind(const void *a, const void *b)
{
    const struct qr_ledger_entry *x = *(const struct qr_ledger_entry *const *) a;
    const struct qr_ledger_entry *y = *(const struct qr_ledger_entry *const *) b;
    return strcmp(x->backend_kind, y->backend_kind);
}

size_t qr_ledger_latest_known_good(const struct qr_ledger *l, const struct qr_ledger_entry **out,
                                   size_t max)
{
    const struct qr_ledger_entry *picks[QR_LEDGER_MAX_ENTRIES];
    size_t n = 0;
    for (size_t i = 0; l && i < l->n_entries; i++) {
        const struct qr_ledger_entry *e = &l->entries[i];
        if (e->status != QR_LEDGER_TESTED)
            continue;
        bool seen = false;
        for (size_t j = 0; j < n && !seen; j++)
            seen = strcmp(picks[j]->backend_kind, e->backend_kind) == 0;
        if (!seen)
            picks[n++] = newest_tested(l, e->backend_kind, NULL, 0);
    }
    qsort(picks, n, sizeof(*picks), cmp_kind);
    for (size_t i = 0; i < n && i < max; i++)
        out[i] = picks[i];
    return n;
}

/* Compare one optional block field with a queried fact: 1 match, 0 no match, -1 unknown fact. */
static int fact(const char *block, const char *query, bool wildcard)
{
    if (!block || (wildcard && strcmp(block, "*") == 0))
        return 1;
    if (!query)
        return -1;
    return strcasecmp(block, query) == 0;
}

static bool holds(const char *cond, const struct qr_ledger_query *q)
{
    for (size_t i = 0; i < q->n_conditions; i++)
        if (q->conditions[i] && strcmp(q->conditions[i], cond) == 0)
            return true;
    return false;
}

/* 1 hit, 0 miss, -1 hit only because a fact is unknown. */
static int block_hits(const struct qr_ledger_block *b, const struct qr_ledger_query *q)
{
    if (strcmp(b->capability, q->capability) != 0 || strcmp(b->backend_kind, q->backend_kind) != 0)
        return 0;
    for (size_t i = 0; i < b->n_when; i++)
        if (!holds(b->when[i], q))
            return 0;
    int facts[4] = {fact(b->project, q->project, false),
                    fact(b->model_family, q->model_family, true), fact(b->model, q->model, false),
                    fact(b->hardware_class, q->hardware_class, true)};
    bool unknown = false;
    for (int i = 0; i < 4; i++) {
        if (facts[i] == 0)
            return 0;
        unknown |= facts[i] < 0;
    }
    if (b->n_engine_versions) {
        bool any = false;
        for (size_t i = 0; i < b->n_engine_versions; i++)
            any |= strcmp(b->engine_versions[i], "*") == 0;
        if (!any && q->n_engine_versions == 0)
            unknown = true;
        else if (!qr_version_list_match(b->engine_versions, b->n_engine_versions,
                                        q->engine_versions, q->n_engine_versions))
            return 0;
    }
    return unknown ? -1 : 1;
}

static int entry_hits(const struct qr_ledger_entry *e, const struct qr_ledger_query *q)
{
    if (e->status != QR_LEDGER_BLOCKED || strcmp(e->backend_kind, q->backend_kind) != 0)
        return 0;
    if (e->n_engine_versions == 0)
        return 1;
    if (q->n_engine_versions == 0)
        return -1;
    for (size_t i = 0; i < e->n_engine_versions; i++)
        for (size_t j = 0; j < q->n_engine_versions; j++)
            if (q->engine_versions[j] &&
                qr_version_cmp(e->engine_versions[i], q->engine_versions[j]) == QR_VERSION_EQUAL)
                return 1;
    return 0;
}

size_t qr_ledger_blocked(const struct qr_ledger *l, const struct qr_ledger_query *q,
                         struct qr_ledger_hit *out, size_t max)
{
    size_t n = 0;
    if (!l || !q->capability || !q->backend_kind)
        return 0;
    for (size_t i = 0; i < l->n_blocks; i++) {
        const struct qr_ledger_block *b = &l->blocks[i];
        int h = block_hits(b, q);
        if (h == 0)
            continue;
        if (n < max) {
            out[n] = (struct qr_ledger_hit){b, NULL, h > 0, NULL};
            if (b->alt_backend_kind)
                out[n].alternative = newest_tested(l, b->alt_backend_kind,
                                                   (const char *const *) b->alt_engine_versions,
                                                   b->n_alt_engine_versions);
        }
        n++;
    }
    for (size_t i = 0; i < l->n_entries; i++) {
        int h = entry_hits(&l->entries[i], q);
        if (h == 0)
            continue;
        if (n < max)
            out[n] = (struct qr_ledger_hit){NULL, &l->entries[i], h > 0, NULL};
        n++;
    }
    return n;
}

/* --- rendering ------------------------------------------------------------------------------ */

static void add_strs(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, const char **v,
                     size_t n)
{
    if (!n)
        return;
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(d, o, key);
    for (size_t i = 0; i < n; i++)
        yyjson_mut_arr_add_str(d, a, v[i]);
}

static void add_opt(yyjson_mut_doc *d, yyjson_mut_val *o, const char *key, const char *v)
{
    if (v)
        yyjson_mut_obj_add_str(d, o, key, v);
}

static yyjson_mut_val *render_entry(yyjson_mut_doc *d, const struct qr_ledger_entry *e)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, o, "id", e->id);
    yyjson_mut_obj_add_str(d, o, "origin", e->local ? "local" : "builtin");
    yyjson_mut_obj_add_str(d, o, "project", e->project);
    yyjson_mut_obj_add_str(d, o, "backend_kind", e->backend_kind);
    yyjson_mut_obj_add_str(d, o, "source_url", e->source_url);
    add_opt(d, o, "tested_ref", e->tested_ref);
    add_strs(d, o, "engine_versions", e->engine_versions, e->n_engine_versions);
    yyjson_mut_obj_add_str(d, o, "status", qr_ledger_status_str(e->status));
    add_opt(d, o, "observed_at", e->observed_at);
    add_strs(d, o, "enabled_capabilities", e->enabled_capabilities, e->n_enabled);
    add_strs(d, o, "broken_capabilities", e->broken_capabilities, e->n_broken);
    add_strs(d, o, "disabled_capabilities", e->disabled_capabilities, e->n_disabled);
    add_strs(d, o, "hardware_classes", e->hardware_classes, e->n_hardware);
    add_opt(d, o, "license_ref", e->license_ref);
    add_opt(d, o, "provenance", e->provenance);
    if (e->n_family_notes) {
        yyjson_mut_val *a = yyjson_mut_obj_add_arr(d, o, "model_family_notes");
        for (size_t i = 0; i < e->n_family_notes; i++) {
            yyjson_mut_val *f = yyjson_mut_arr_add_obj(d, a);
            yyjson_mut_obj_add_str(d, f, "family", e->family_notes[i].family);
            yyjson_mut_obj_add_str(d, f, "note", e->family_notes[i].note);
        }
    }
    add_opt(d, o, "notes", e->notes);
    return o;
}

static yyjson_mut_val *render_block(yyjson_mut_doc *d, const struct qr_ledger_block *b)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    yyjson_mut_obj_add_str(d, o, "id", b->id);
    yyjson_mut_obj_add_str(d, o, "origin", b->local ? "local" : "builtin");
    yyjson_mut_obj_add_str(d, o, "backend_kind", b->backend_kind);
    add_opt(d, o, "project", b->project);
    add_strs(d, o, "engine_versions", b->engine_versions, b->n_engine_versions);
    yyjson_mut_obj_add_str(d, o, "model_family", b->model_family);
    add_opt(d, o, "model", b->model);
    yyjson_mut_obj_add_str(d, o, "hardware_class", b->hardware_class);
    yyjson_mut_obj_add_str(d, o, "capability", b->capability);
    add_strs(d, o, "when", b->when, b->n_when);
    yyjson_mut_obj_add_str(d, o, "reason", b->reason);
    if (b->alt_backend_kind) {
        yyjson_mut_val *a = yyjson_mut_obj_add_obj(d, o, "alternative");
        yyjson_mut_obj_add_str(d, a, "backend_kind", b->alt_backend_kind);
        add_strs(d, a, "engine_versions", b->alt_engine_versions, b->n_alt_engine_versions);
        add_opt(d, a, "note", b->alt_note);
    }
    add_strs(d, o, "sources", b->sources, b->n_sources);
    add_opt(d, o, "notes", b->notes);
    return o;
}

yyjson_mut_val *qr_ledger_hit_render(yyjson_mut_doc *d, const struct qr_ledger_hit *h)
{
    yyjson_mut_val *o = yyjson_mut_obj(d);
    if (h->block) {
        yyjson_mut_obj_add_str(d, o, "block", h->block->id);
        yyjson_mut_obj_add_str(d, o, "capability", h->block->capability);
        yyjson_mut_obj_add_str(d, o, "reason", h->block->reason);
        add_strs(d, o, "sources", h->block->sources, h->block->n_sources);
    } else if (h->entry) {
        yyjson_mut_obj_add_str(d, o, "entry", h->entry->id);
        yyjson_mut_obj_add_str(d, o, "reason", "the ledger marks this engine build blocked");
    }
    yyjson_mut_obj_add_bool(d, o, "certain", h->certain);
    if (h->alternative) {
        yyjson_mut_val *a = yyjson_mut_obj_add_obj(d, o, "alternative");
        yyjson_mut_obj_add_str(d, a, "backend_kind", h->alternative->backend_kind);
        yyjson_mut_obj_add_str(d, a, "ledger_entry", h->alternative->id);
    }
    return o;
}

yyjson_mut_doc *qr_ledger_render(const struct qr_ledger *l)
{
    yyjson_mut_doc *d = yyjson_mut_doc_new(NULL);
    if (!d)
        return NULL;
    yyjson_mut_val *root = yyjson_mut_obj(d);
    yyjson_mut_doc_set_root(d, root);
    yyjson_mut_obj_add_str(d, root, "api_version", "v1alpha1");
    yyjson_mut_obj_add_str(d, root, "schema_version", QR_LEDGER_SCHEMA);
    yyjson_mut_val *entries = yyjson_mut_obj_add_arr(d, root, "entries");
    for (size_t i = 0; i < qr_ledger_entry_count(l); i++)
        yyjson_mut_arr_append(entries, render_entry(d, &l->entries[i]));
    const struct qr_ledger_entry *lkg[QR_LEDGER_MAX_ENTRIES];
    size_t n = qr_ledger_latest_known_good(l, lkg, QR_LEDGER_MAX_ENTRIES);
    yyjson_mut_val *good = yyjson_mut_obj_add_arr(d, root, "latest_known_good");
    for (size_t i = 0; i < n; i++)
        yyjson_mut_arr_append(good, render_entry(d, lkg[i]));
    yyjson_mut_val *blocks = yyjson_mut_obj_add_arr(d, root, "blocks");
    for (size_t i = 0; i < qr_ledger_block_count(l); i++)
        yyjson_mut_arr_append(blocks, render_block(d, &l->blocks[i]));
    return d;
}
