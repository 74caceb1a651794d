/* Strict checks on a parsed request body that yyjson does not make itself: no object holds the
 * same key twice (yyjson keeps both and lookups see only one, so two layers could read two
 * different values), nesting stays within QR_JSON_MAX_DEPTH (no recursive walker downstream can be
 * driven deep), and no key or string contains a NUL character (identifiers and prompts travel as
 * C strings further down and would be cut silently). */
#ifndef QR_CORE_JSON_STRICT_H
#define QR_CORE_JSON_STRICT_H

#include <stdbool.h>
#include <stddef.h>

#include <yyjson.h>

#define QR_JSON_MAX_DEPTH 64u

/* True when root (borrowed; may be NULL) passes every check. Otherwise false, and why (caller's
 * buffer of cap bytes) says what failed, e.g. "duplicate key 'model'". */
bool qr_json_strict_ok(yyjson_val *root, char *why, size_t cap);

#endif
