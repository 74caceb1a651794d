/* libFuzzer target for the strict request-body checks (core/json_strict.c) that every request
 * decoder runs right after yyjson parsed the body. The first byte picks the size of the caller's
 * reason buffer (0..63, so a reason cut short and a zero cap are exercised too); the rest is the
 * body, read with the flags the decoders use (none, and BIGNUM_AS_RAW). Whatever parses is checked
 * against an independent reference: refused exactly when some key or string holds a NUL byte,
 * some container sits at depth QR_JSON_MAX_DEPTH or deeper (the root is depth 0), or some object
 * holds the same key twice (compared pairwise here, sorted there). A refusal always says why in
 * a NUL-terminated reason; an accepted body leaves an empty one.
 *
 * Seeds in corpus/fuzz_json_strict: ordinary request bodies, duplicate keys in small and large
 * objects, nesting at and past the limit, NUL characters in keys and strings (escaped). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_strict.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_key(yyjson_val *a, yyjson_val *b)
{
    return yyjson_get_len(a) == yyjson_get_len(b) &&
           memcmp(yyjson_get_str(a), yyjson_get_str(b), yyjson_get_len(a)) == 0;
}

/* The reference: true when v (at depth) and everything under it passes. */
static bool reference_ok(yyjson_val *v, unsigned depth)
{
    if (yyjson_is_str(v))
        return memchr(yyjson_get_str(v), '\0', yyjson_get_len(v)) == NULL;
    if (!yyjson_is_ctn(v))
        return true;
    if (depth >= QR_JSON_MAX_DEPTH)
        return false;
    size_t i, max;
    if (yyjson_is_arr(v)) {
        yyjson_val *e;
        yyjson_arr_foreach(v, i, max, e)
        {
            if (!reference_ok(e, depth + 1))
                return false;
        }
        return true;
    }
    yyjson_val *key, *val;
    yyjson_obj_foreach(v, i, max, key, val)
    {
        if (!reference_ok(key, depth + 1) || !reference_ok(val, depth + 1))
            return false;
        /* every later key of the same object (pairwise: inputs are at most 8 KiB) */
        size_t j, jmax;
        yyjson_val *key2, *val2;
        yyjson_obj_foreach(v, j, jmax, key2, val2)
        {
            (void) val2;
            if (j > i && same_key(key, key2))
                return false;
        }
    }
    return true;
}

static void check(const char *text, size_t len, yyjson_read_flag flags, size_t cap)
{
    yyjson_doc *doc = yyjson_read_opts((char *) (uintptr_t) text, len, flags, NULL, NULL);
    if (!doc)
        return;
    yyjson_val *root = yyjson_doc_get_root(doc);
    char why[64 + 1];
    memset(why, 'x', sizeof why);
    bool ok = qr_json_strict_ok(root, why, cap);
    if (ok != reference_ok(root, 0))
        abort();
    if (why[cap] != 'x') /* nothing written past the caller's buffer */
        abort();
    if (cap) {
        if (!memchr(why, '\0', cap))
            abort();
        if (ok != (why[0] == '\0') && cap > 1)
            abort();
    }
    yyjson_doc_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 8192)
        return 0;
    size_t cap = data[0] % 64u;
    check((const char *) data + 1, size - 1, YYJSON_READ_NOFLAG, cap);
    check((const char *) data + 1, size - 1, YYJSON_READ_BIGNUM_AS_RAW, cap);
    return 0;
}
