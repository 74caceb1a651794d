/* The daemon's catalog: everything the Runtime knows about models and how to run them, loaded
 * together at start-up and rebuilt together on SIGHUP -- the model registry (builtin manifests,
 * registry directories, GGUF discovery in models_dir, names the backend reported), the model
 * policies, the upstream ledger (the builtin one merged with <state_dir>/upstream-ledger.local.json
 * when that exists) and the deployment profiles. Loading is never fatal but for the local ledger:
 * any other bad file is logged and listed as a problem and skipped; a bad local ledger fails
 * closed (docs/POLICY.md "Local ledger"). Ownership: a catalog owns every object in it;
 * pointers borrowed from it live until qr_catalog_free. Single-threaded, like the event loop that
 * uses it. */
#ifndef QR_API_CATALOG_H
#define QR_API_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "core/err.h"

struct qr_registry;
struct qr_policy_set;
struct qr_ledger;
struct qr_profile_set;
struct qr_backend;
struct qr_backend_model;
struct qr_reg_model;

/* A problem of a catalog file other than a manifest (those are the registry's own problems). */
struct qr_catalog_problem {
    char *origin;  /* owned: "builtin:policies/x.json" or a path */
    char *message; /* owned: one line */
};

#define QR_CATALOG_MAX_PROBLEMS 256u

struct qr_catalog {
    struct qr_registry *registry;        /* owned, never NULL after a load */
    struct qr_policy_set *policies;      /* owned, never NULL after a load */
    struct qr_ledger *ledger;            /* owned; NULL when even the builtin ledger failed */
    struct qr_profile_set *profiles;     /* owned, never NULL after a load */
    struct qr_catalog_problem *problems; /* owned */
    size_t n_problems;
    char **names; /* owned: file names the policy/profile sets borrow */
    size_t n_names;
    char **refused; /* owned: backend names the registry refused (reported once, not retried) */
    size_t n_refused;
    char *ledger_local_json; /* owned: the local ledger text merged into ledger; NULL when none */
    size_t ledger_local_len;
    unsigned long generation; /* counts loads in this process: a reload gives a new value */
};

/* Build a catalog from cfg (state_dir, models_dir, registry_dirs, hash_models). previous, when not
 * NULL, is the running catalog: the backend-reported names it holds are reported again into the
 * new registry, so a reload does not forget them. Every problem is logged. The local ledger
 * <state_dir>/QR_LEDGER_LOCAL_FILE, when it exists, is merged into the builtin one; when it does
 * not read, parse, validate or merge: without previous (start-up) QR_ERR_CONFIG, the error (file
 * and JSON path) logged; with previous the previous local ledger text is merged instead (the
 * running ledger stays), the error is logged and listed as a problem. Otherwise QR_ERR_NOMEM
 * only. */
enum qr_err qr_catalog_load(const struct qr_config *cfg, const struct qr_catalog *previous,
                            struct qr_catalog **out);
void qr_catalog_free(struct qr_catalog *c);

/* Join the models a backend listed (rows borrowed) to the registry: names the registry does not
 * resolve yet are reported with qr_registry_add_remote (conflicts are recorded there, and logged
 * once here), with the row's family as architecture and its context_length, so a model the
 * registry creates for the name states them (/api/show model_info). A name the registry already
 * resolves keeps what it was joined with. backend_id is the adapter's id; kind_ollama says the
 * rows came from /api/tags. */
void qr_catalog_join_backend(struct qr_catalog *c, const char *backend_id, bool kind_ollama,
                             const struct qr_backend_model *rows, size_t n);

/* How the registry knows a model name. */
enum qr_catalog_known {
    QR_KNOWN_NONE = 0,     /* the registry does not resolve the name */
    QR_KNOWN_MANIFEST = 1, /* a manifest (builtin, registry directory, GGUF discovery) */
    QR_KNOWN_BACKEND = 2,  /* only a backend reported it: a generated placeholder manifest */
};

struct qr_catalog_model {
    enum qr_catalog_known known;
    const char *canonical_id;       /* borrowed; NULL when NONE */
    const char *architecture_class; /* borrowed; "" when the manifest states none */
    const char *architecture;       /* borrowed; model.architecture */
};

/* Resolve name (id, alias, name:tag) in the registry. Pointers live until the catalog is freed. */
void qr_catalog_model_find(const struct qr_catalog *c, const char *name,
                           struct qr_catalog_model *out);

/* A manifest model (not a backend-reported one) with an artifact for b's kind: an artifact whose
 * backend is b's kind, or, for Ollama, an ollama: URI or ollama tag. */
bool qr_catalog_serves(const struct qr_reg_model *m, const struct qr_backend *b);

/* The name b is asked for when serving m: the name b reported for it, else the Ollama tag for
 * Ollama, else the canonical id. Borrowed from the registry. */
const char *qr_catalog_served_name(const struct qr_reg_model *m, const struct qr_backend *b);

/* The i-th backend id that reported name (the registry's remotes of the model name resolves
 * to), or NULL past the last. Borrowed from the registry. */
const char *qr_catalog_reporter(const struct qr_catalog *c, const char *name, size_t i);

/* The catalog's problems as one JSON array (registry problems first), added to obj under key
 * "problems", with "problems_total". doc/obj are yyjson mutable values. */
void qr_catalog_add_problems(const struct qr_catalog *c, void *doc, void *obj);

#endif
