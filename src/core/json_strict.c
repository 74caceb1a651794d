/* Strict request-body checks on top of yyjson (json_strict.h): duplicate keys, nesting depth and
 * NUL characters, applied by every request decoder right after parsing so each refuses them with
 * a 400 in its own error shape. Duplicate keys are found by sorting the keys of large objects,
 * so a hostile object with many keys costs O(n log n), not O(n^2). */
#include "core/json_strict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIRWISE_MAX 16u /* objects this small are compared key by key */

struct key {
    const char *p;
    size_t n;
};

static int cmp_key(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void say(char *why, size_t cap, const char *what, const char *p, size_t n)
{
    if (cap)
        snprintf(why, cap, "%s '%.*s'", what, (int) (n > 64 ? 64 : n), p);
}

static bool has_nul(yyjson_val *s)
{
    return memchr(yyjson_get_str(s), '\0', yyjson_get_len(s)) != NULL;
}

static bool keys_unique(yyjson_val *obj, char *why, size_t cap)
{
    size_t n = yyjson_obj_size(obj);
    if (n < 2)
        return true;
    struct key small[PAIRWISE_MAX];
    struct key *k = n <= PAIRWISE_MAX ? small : malloc(n * sizeof(*k));
    if (!k)
        abort(); /* bounded by the request body, which already fit in memory */
    size_t i = 0, max;
    yyjson_val *key, *val;
    yyjson_obj_foreach(obj, i, max, key, val)
    {
        (void) val;
        k[i] = (struct key){yyjson_get_str(key), yyjson_get_len(key)};
    }
    bool ok = true;
    if (n <= PAIRWISE_MAX) {
        for (i = 0; ok && i < n; i++) {
            for (size_t j = i + 1; ok && j < n; j++) {
                if (!cmp_key(&k[i], &k[j])) {
                    say(why, cap, "duplicate key", k[i].p, k[i].n);
                    ok = false;
                }
            }
        }
    } else {
        qsort(k, n, sizeof(*k), cmp_key);
        for (i = 1; ok && i < n; i++) {
            if (!cmp_key(&k[i - 1], &k[i])) {
                say(why, cap, "duplicate key", k[i].p, k[i].n);
                ok = false;
            }
        }
        free(k);
    }
    return ok;
}

static bool check(yyjson_val *v, unsigned depth, char *why, size_t cap)
{
    if (yyjson_is_str(v)) {
        if (has_nul(v)) {
            say(why, cap, "a string contains a NUL character:", yyjson_get_str(v),
                strlen(yyjson_get_str(v)));
            return false;
        }
        return true;
    }
    if (!yyjson_is_ctn(v))
        return true;
    if (depth >= QR_JSON_MAX_DEPTH) {
        if (cap)
            snprintf(why, cap, "nesting deeper than %u levels", QR_JSON_MAX_DEPTH);
        return false;
    }
    size_t i, max;
    if (yyjson_is_arr(v)) {
        yyjson_val *e;
        yyjson_arr_foreach(v, i, max, e)
        {
            if (!check(e, depth + 1, why, cap))
                return false;
        }
        return true;
    }
    yyjson_val *key, *val;
    yyjson_obj_foreach(v, i, max, key, val)
    {
        if (has_nul(key)) {
            say(why, cap, "a key contains a NUL character:", yyjson_get_str(key),
                strlen(yyjson_get_str(key)));
            return false;
        }
        if (!check(val, depth + 1, why, cap))
            return false;
    }
    return keys_unique(v, why, cap);
}

bool qr_json_strict_ok(yyjson_val *root, char *why, size_t cap)
{
    if (cap)
        why[0] = '\0';
    return !root || check(root, 0, why, cap);
}
