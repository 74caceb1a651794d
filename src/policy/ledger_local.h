/* The local ledger file writer: <state_dir>/QR_LEDGER_LOCAL_FILE (policy/ledger.h), the same
 * schema as the builtin data/upstream-ledger.json, written by `quantum-runtime ledger evaluate`
 * and `ledger promote` and merged over the builtin ledger by the daemon. An edit reads the file
 * (or starts an empty document), adds or replaces entries and blocks by id, and saves: the whole
 * document is validated (qr_ledger_parse_local, then merged with the builtin ledger so no id is
 * in both) before it replaces the file atomically (temporary file, fsync, rename). A file lock
 * (<file>.lock) is held from open to cleanup, so two writers never interleave. docs/CONFORMANCE.md
 * "The local ledger file".
 *
 * Ownership: a qr_ledger_local owns its document; values passed to the put functions must be made
 * in l->doc and are taken. */
#ifndef QR_POLICY_LEDGER_LOCAL_H
#define QR_POLICY_LEDGER_LOCAL_H

#include <stdbool.h>
#include <stddef.h>

#include <yyjson.h>

#include "core/err.h"
#include "policy/ledger.h"

#define QR_LEDGER_LOCK_WAIT_MS 10000u /* how long open waits for another writer */

struct qr_ledger_local {
    char path[4200];
    yyjson_mut_doc *doc; /* {"schema_version","entries":[...],"blocks":[...]} */
    yyjson_mut_val *entries, *blocks;
    int lock_fd;  /* -1 when not locked */
    bool existed; /* the file was there at open */
};

/* Open <state_dir>/QR_LEDGER_LOCAL_FILE for editing (the directory is created when missing). A
 * file that exists but is not a valid local ledger is an error (QR_ERR_INVALID, with the path) and
 * is never overwritten. QR_ERR_BUSY when another writer holds the lock past
 * QR_LEDGER_LOCK_WAIT_MS. */
enum qr_err qr_ledger_local_open(const char *state_dir, struct qr_ledger_local *out,
                                 struct qr_diag *diag);
void qr_ledger_local_cleanup(struct qr_ledger_local *l);

/* The entry or block object with this id (borrowed from l->doc), or NULL. */
yyjson_mut_val *qr_ledger_local_find_entry(const struct qr_ledger_local *l, const char *id);
yyjson_mut_val *qr_ledger_local_find_block(const struct qr_ledger_local *l, const char *id);

/* Add obj (an object made in l->doc, with a string "id") to the entries or blocks, replacing the
 * one with the same id in place. QR_ERR_INVALID when obj has no string id. */
enum qr_err qr_ledger_local_put_entry(struct qr_ledger_local *l, yyjson_mut_val *obj);
enum qr_err qr_ledger_local_put_block(struct qr_ledger_local *l, yyjson_mut_val *obj);

/* Remove every block whose id starts with prefix; returns how many. */
size_t qr_ledger_local_remove_blocks(struct qr_ledger_local *l, const char *prefix);

/* Parse the document as it is now (validated as qr_ledger_parse_local); *out owned by the
 * caller. */
enum qr_err qr_ledger_local_parse(const struct qr_ledger_local *l, struct qr_ledger **out,
                                  struct qr_diag *diag);

/* Validate the document (alone, then merged with the builtin ledger) and replace the file with
 * it atomically. On any error the file on disk is unchanged. */
enum qr_err qr_ledger_local_save(struct qr_ledger_local *l, struct qr_diag *diag);

#endif
