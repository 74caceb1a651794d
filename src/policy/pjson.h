/* Strict JSON decoding for the policy area's data files (model policies, the upstream ledger,
 * deployment profiles): every object's keys are checked against an allow-list (unknown and
 * duplicate keys rejected), every value's type and bounds are checked before use, every list is
 * capped, and every error names the file and the JSON path, e.g.
 * `cannot load 'policies/x.json': parameters[3].class: unknown class 'fast'`.
 *
 * Strings returned are borrowed from the yyjson document (NUL-terminated) and live as long as it;
 * arrays of string pointers are heap-allocated and owned by the caller (free()). */
#ifndef QR_POLICY_PJSON_H
#define QR_POLICY_PJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yyjson.h>

#include "core/err.h"

#define QR_PJ_MAX_FILE  (1u << 20) /* bytes of one data file */
#define QR_PJ_MAX_KEYS  64u        /* keys of one object */
#define QR_PJ_MAX_ID    128u       /* bytes of an id-like string */
#define QR_PJ_MAX_TEXT  4096u      /* bytes of a free-text string (notes, reasons) */
#define QR_PJ_MAX_ITEMS 256u       /* default cap on a list */

struct qr_pj {
    struct qr_diag *diag; /* borrowed; may be NULL */
    const char *name;     /* borrowed; the file name used in messages */
    const char *prefix;   /* borrowed; when set, messages start "<prefix>: " instead */
    char path[192];       /* current JSON path ("" at the root) */
    size_t path_len;
};

void qr_pj_init(struct qr_pj *p, const char *name, struct qr_diag *diag);

/* Extend the path by ".key" or "[i]"; returns the mark to give back to qr_pj_pop. */
size_t qr_pj_push_key(struct qr_pj *p, const char *key);
size_t qr_pj_push_idx(struct qr_pj *p, size_t i);
void qr_pj_pop(struct qr_pj *p, size_t mark);

/* Set the diagnostic "cannot load '<name>': <path>: <text>" (or "<prefix>: <path>: <text>") and
 * return QR_ERR_INVALID. */
enum qr_err qr_pj_fail(struct qr_pj *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse len bytes (at most QR_PJ_MAX_FILE) as one JSON value, no trailing content, no comments.
 * *out is owned by the caller (yyjson_doc_free). */
enum qr_err qr_pj_parse(struct qr_pj *p, const char *json, size_t len, yyjson_doc **out);

/* v must be an object whose keys are all in the NULL-terminated allowed list, each once. */
enum qr_err qr_pj_object(struct qr_pj *p, yyjson_val *v, const char *const *allowed);

/* A string field: absent -> *out NULL (an error when required); present -> a string of
 * 1..max_len bytes, not blank, without control characters. */
enum qr_err qr_pj_str(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                      size_t max_len, const char **out);

/* A boolean field; *present says whether it was there (out unchanged when absent). */
enum qr_err qr_pj_bool(struct qr_pj *p, yyjson_val *obj, const char *key, bool required, bool *out,
                       bool *present);

/* A non-negative integer field in [min, max]. */
enum qr_err qr_pj_u64(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                      uint64_t min, uint64_t max, uint64_t *out, bool *present);

/* An array field of at most max items (absent -> *out NULL, *n 0). required means present and
 * non-empty. */
enum qr_err qr_pj_array(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                        size_t max, yyjson_val **out, size_t *n);

/* A list of strings (each as qr_pj_str), at most max items, duplicates rejected when unique.
 * *out (heap, owned by the caller) is NULL when the list is absent or empty. */
enum qr_err qr_pj_strs(struct qr_pj *p, yyjson_val *obj, const char *key, bool required,
                       bool unique, size_t max, size_t max_len, const char ***out, size_t *n);

/* Check a string against a NULL-terminated list of names; returns the index or -1. */
int qr_pj_lookup(const char *s, const char *const *names);

/* "YYYY-MM-DD" with a valid month and day. */
bool qr_pj_is_date(const char *s);

/* RFC 3339 "YYYY-MM-DDThh:mm:ss[.frac](Z|+hh:mm|-hh:mm)". */
bool qr_pj_is_rfc3339(const char *s);

#endif
