/* The upstream ledger, schema quantum.runtime/upstream-ledger/v1alpha1: which engine builds were
 * tested, with which capabilities working or broken, on which hardware, under which license, and
 * the known-bad blocks - backend kind x engine version x model family/model x hardware class x
 * capability - that fail closed or send a request to a tested alternative. Data: the builtin
 * data/upstream-ledger.json. Rules: docs/POLICY.md "Upstream ledger".
 *
 * Ownership: a qr_ledger owns its parsed document; every pointer it hands out is borrowed and
 * lives until qr_ledger_free. */
#ifndef QR_POLICY_LEDGER_H
#define QR_POLICY_LEDGER_H

#include <stdbool.h>
#include <stddef.h>

#include <yyjson.h>

#include "core/err.h"

#define QR_LEDGER_SCHEMA      "quantum.runtime/upstream-ledger/v1alpha1"
#define QR_LEDGER_MAX_ENTRIES 256u
#define QR_LEDGER_MAX_BLOCKS  512u

enum qr_ledger_status {
    QR_LEDGER_TESTED = 0,            /* pinned build passed the conformance suite */
    QR_LEDGER_CANDIDATE = 1,         /* pinned build under test, not yet promoted */
    QR_LEDGER_OBSERVED_UNPINNED = 2, /* seen working, but not pinned or not conformance-tested */
    QR_LEDGER_BLOCKED = 3,           /* must not be used: every capability is blocked */
    QR_LEDGER_PLANNED = 4,           /* 0.3 compatibility: not yet integrated */
};

const char *qr_ledger_status_str(enum qr_ledger_status s);

/* Whether key is one of the 28 capability keys of quantum.runtime/backend/v1alpha1. */
bool qr_ledger_capability_known(const char *key);

struct qr_ledger_family_note {
    const char *family;
    const char *note;
};

struct qr_ledger_entry {
    const char *id;
    const char *project;
    const char *backend_kind;
    const char *source_url; /* absolute https */
    const char *tested_ref; /* tag or commit; NULL when absent */
    const char *
        *engine_versions; /* every name of the build ("0.7.0", "b11669"); exact, no ranges */
    size_t n_engine_versions;
    enum qr_ledger_status status;
    const char *observed_at;           /* RFC 3339: when it was tested/observed; NULL when absent */
    const char **enabled_capabilities; /* capability keys */
    size_t n_enabled;
    const char **broken_capabilities; /* capability keys */
    size_t n_broken;
    const char **disabled_capabilities; /* free text (the 0.3 field) */
    size_t n_disabled;
    const char **hardware_classes;
    size_t n_hardware;
    const char *license_ref; /* NULL when absent */
    const char *provenance;  /* how the build was obtained; NULL when absent */
    struct qr_ledger_family_note *family_notes;
    size_t n_family_notes;
    const char *notes;
    bool local; /* from the local ledger file (QR_LEDGER_LOCAL_FILE), not the builtin one */
};

struct qr_ledger_block {
    const char *id;
    const char *backend_kind;
    const char *project;          /* engine project when the kind fronts several; NULL = any */
    const char **engine_versions; /* constraints (policy/version.h); none = every version */
    size_t n_engine_versions;
    const char *model_family;   /* "*" = every family */
    const char *model;          /* canonical model id; NULL = every model of the family */
    const char *hardware_class; /* "*" = every host */
    const char *capability;     /* capability key */
    const char **when;          /* conditions that must all hold ("think=off", "stream"...) */
    size_t n_when;
    const char *reason;
    const char *alt_backend_kind; /* tested alternative: route there instead; NULL when none */
    const char **alt_engine_versions;
    size_t n_alt_engine_versions;
    const char *alt_note;
    const char **sources; /* >= 1: issue links, reference-document observations */
    size_t n_sources;
    const char *notes;
    bool local; /* from the local ledger file (QR_LEDGER_LOCAL_FILE), not the builtin one */
};

struct qr_ledger;

/* Parse and validate a ledger document (json is copied). Unknown fields, trailing JSON, unknown
 * capability keys, duplicate ids and malformed versions/dates/URLs are rejected with the JSON path
 * in diag. *out is owned by the caller. */
enum qr_err qr_ledger_parse(const char *name, const char *json, size_t len, struct qr_diag *diag,
                            struct qr_ledger **out);

/* The builtin ledger (data/upstream-ledger.json). */
enum qr_err qr_ledger_load_builtin(struct qr_diag *diag, struct qr_ledger **out);

/* The local ledger: <state_dir>/QR_LEDGER_LOCAL_FILE, written by `quantum-runtime ledger
 * evaluate/promote`, same schema. */
#define QR_LEDGER_LOCAL_FILE "upstream-ledger.local.json"

/* Parse a local ledger file: validated exactly as qr_ledger_parse, except that "entries" may be
 * absent or empty (a file of known-bad blocks only); every entry and block is marked local. */
enum qr_err qr_ledger_parse_local(const char *name, const char *json, size_t len,
                                  struct qr_diag *diag, struct qr_ledger **out);

/* One ledger of both: the entries and blocks of builtin and of local (both taken: freed on any
 * return), each list in id order. An id present in both lists of the same kind is an error naming
 * it and local_name ("'x.json': entries: id 'e' is also in the builtin ledger"). *out is owned
 * by the caller. */
enum qr_err qr_ledger_merge(struct qr_ledger *builtin, struct qr_ledger *local,
                            const char *local_name, struct qr_diag *diag, struct qr_ledger **out);

void qr_ledger_free(struct qr_ledger *l);

/* Entries in id order; blocks in id order. */
size_t qr_ledger_entry_count(const struct qr_ledger *l);
const struct qr_ledger_entry *qr_ledger_entry_at(const struct qr_ledger *l, size_t i);
size_t qr_ledger_block_count(const struct qr_ledger *l);
const struct qr_ledger_block *qr_ledger_block_at(const struct qr_ledger *l, size_t i);

/* Latest known good: per backend kind, its newest `tested` entry (latest observed_at, then id).
 * Writes at most max entries, in backend-kind order; returns how many backend kinds have one. */
size_t qr_ledger_latest_known_good(const struct qr_ledger *l, const struct qr_ledger_entry **out,
                                   size_t max);

/* One question: is capability C blocked for this backend/engine/model/host? Strings borrowed;
 * NULL (or no versions) means unknown. */
struct qr_ledger_query {
    const char *capability;   /* required */
    const char *backend_kind; /* required */
    const char *project;
    const char *const *engine_versions; /* every name of the running build */
    size_t n_engine_versions;
    const char *model_family;
    const char *model; /* canonical id */
    const char *hardware_class;
    const char *const *conditions; /* what holds for this request/launch ("think=off", ...) */
    size_t n_conditions;
};

struct qr_ledger_hit {
    const struct qr_ledger_block *block; /* the known-bad block; NULL for a blocked entry */
    const struct qr_ledger_entry *entry; /* the `blocked` entry, when block is NULL */
    bool certain; /* false: it matched only because a queried fact (version, project, family,
                     model, hardware class) is unknown - fail closed unless the caller pins it */
    const struct qr_ledger_entry *alternative; /* newest tested entry of the block's alternative
                                                  backend kind (matching its versions), or NULL */
};

/* The blocks and blocked entries that hit the query, blocks first in id order, then entries in
 * id order; at most max written to out; returns how many hit in all. */
size_t qr_ledger_blocked(const struct qr_ledger *l, const struct qr_ledger_query *q,
                         struct qr_ledger_hit *out, size_t max);

/* The /v1/upstreams body: {"api_version","schema_version","entries","latest_known_good",
 * "blocks"}; every entry and block carries "origin": "builtin" or "local". Owned by the caller
 * (yyjson_mut_doc_free); NULL when out of memory. */
yyjson_mut_doc *qr_ledger_render(const struct qr_ledger *l);

/* One hit as JSON (block id, capability, reason, sources, certain, alternative). */
yyjson_mut_val *qr_ledger_hit_render(yyjson_mut_doc *doc, const struct qr_ledger_hit *h);

#endif
