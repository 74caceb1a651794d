/* libFuzzer target for the upstream ledger loader and its block query. Any input must load or
 * fail with QR_ERR_INVALID / QR_ERR_TOO_LARGE and a "cannot load 'fuzz.json': " message, never
 * crash. A ledger that loads must render; every latest-known-good pick must be a tested entry,
 * one per backend kind; and every block must be found by a query built from its own fields
 * (engine version unknown, conditions as the block states them), reported as certain exactly
 * when the block names no version constraint, project or model and no specific family or
 * hardware class is left unknown.
 *
 * The same bytes also go through the local ledger path (qr_ledger_parse_local, then
 * qr_ledger_merge with the builtin ledger, as for <state_dir>/upstream-ledger.local.json): load or
 * a clear error, and a merge that keeps every entry and block of both or names the clash.
 *
 * Seeds in corpus/fuzz_ledger: the builtin ledger, a ledger with tested entries, blocks and
 * alternatives, and one file per rejection class. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_blocks(const struct qr_ledger *l)
{
    static struct qr_ledger_hit hits[QR_LEDGER_MAX_BLOCKS + QR_LEDGER_MAX_ENTRIES];
    for (size_t i = 0; i < qr_ledger_block_count(l); i++) {
        const struct qr_ledger_block *b = qr_ledger_block_at(l, i);
        struct qr_ledger_query q = {.capability = b->capability,
                                    .backend_kind = b->backend_kind,
                                    .project = b->project,
                                    .model_family = b->model_family,
                                    .model = b->model,
                                    .hardware_class = b->hardware_class,
                                    .conditions = (const char *const *) b->when,
                                    .n_conditions = b->n_when};
        size_t n = qr_ledger_blocked(l, &q, hits, QR_ARRAY_LEN(hits));
        if (n > QR_ARRAY_LEN(hits))
            abort();
        bool found = false;
        for (size_t j = 0; j < n; j++) {
            if (hits[j].block != b)
                continue;
            found = true;
            bool any_version = b->n_engine_versions == 0;
            for (size_t k = 0; k < b->n_engine_versions; k++)
                any_version |= strcmp(b->engine_versions[k], "*") == 0;
            if (hits[j].certain != any_version)
                abort();
            if (hits[j].alternative && hits[j].alternative->status != QR_LEDGER_TESTED)
                abort();
        }
        if (!found)
            abort();
    }
}

/* The same bytes as <state_dir>/upstream-ledger.local.json: parsed as a local ledger and merged
 * with the builtin one as the catalog does; a merged ledger holds the same checks. */
static void local_ledger(const uint8_t *data, size_t size)
{
    struct qr_diag d = {{0}};
    struct qr_ledger *local = NULL, *builtin = NULL, *merged = NULL;
    enum qr_err err = qr_ledger_parse_local("fuzz.json", (const char *) data, size, &d, &local);
    if (err != QR_OK) {
        if (local || (err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "cannot load 'fuzz.json': ", 25) != 0)
            abort();
        return;
    }
    size_t n_local = qr_ledger_entry_count(local) + qr_ledger_block_count(local);
    if (qr_ledger_load_builtin(&d, &builtin) != QR_OK)
        abort();
    size_t n_builtin = qr_ledger_entry_count(builtin) + qr_ledger_block_count(builtin);
    err = qr_ledger_merge(builtin, local, "fuzz.json", &d, &merged);
    if (err != QR_OK) {
        if (merged || (err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "'fuzz.json': ", 13) != 0)
            abort();
        return;
    }
    if (qr_ledger_entry_count(merged) + qr_ledger_block_count(merged) != n_local + n_builtin)
        abort();
    check_blocks(merged);
    yyjson_mut_doc *doc = qr_ledger_render(merged);
    if (!doc)
        abort();
    yyjson_mut_doc_free(doc);
    qr_ledger_free(merged);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    local_ledger(data, size);
    struct qr_diag d = {{0}};
    struct qr_ledger *l = NULL;
    enum qr_err err = qr_ledger_parse("fuzz.json", (const char *) data, size, &d, &l);
    if (err != QR_OK) {
        if (l || (err != QR_ERR_INVALID && err != QR_ERR_TOO_LARGE) ||
            strncmp(d.msg, "cannot load 'fuzz.json': ", 25) != 0)
            abort();
        return 0;
    }
    const struct qr_ledger_entry *lkg[QR_LEDGER_MAX_ENTRIES];
    size_t n = qr_ledger_latest_known_good(l, lkg, QR_LEDGER_MAX_ENTRIES);
    for (size_t i = 0; i < n; i++) {
        if (lkg[i]->status != QR_LEDGER_TESTED)
            abort();
        if (i && strcmp(lkg[i - 1]->backend_kind, lkg[i]->backend_kind) >= 0)
            abort();
    }
    check_blocks(l);
    yyjson_mut_doc *doc = qr_ledger_render(l);
    if (!doc)
        abort();
    yyjson_mut_doc_free(doc);
    qr_ledger_free(l);
    return 0;
}
