/* The Runtime's builtin data: every JSON file under data/ (model manifests, model policies, the
 * upstream ledger, deployment profiles) compiled into the binary by cmake/embed.cmake, so the
 * daemon needs no data directory to start. Paths are relative to data/ ("models/x.json"). */
#ifndef QR_CORE_BUILTIN_H
#define QR_CORE_BUILTIN_H

#include <stddef.h>

struct qr_builtin_file {
    const char *path; /* relative to data/, '/'-separated */
    const char *data; /* the file's bytes, NUL-terminated (the NUL is not counted in len) */
    size_t len;
};

/* All builtin files sorted by path; *n is their count (the array has a {0} sentinel after). */
const struct qr_builtin_file *qr_builtin_files(size_t *n);

/* The files whose path starts with prefix (e.g. "models/"), in path order: the first one at
 * *first, *n of them (0 when none). */
void qr_builtin_under(const char *prefix, const struct qr_builtin_file **first, size_t *n);

/* The file at exactly path, or NULL. */
const struct qr_builtin_file *qr_builtin_find(const char *path);

#endif
