/* Engine version strings and version constraints, shared by model policies and the upstream
 * ledger. Engines number themselves differently (Ollama "0.12.0", llama.cpp builds "b11669",
 * Debian's llama.cpp package "0.7.0", vLLM "0.7.3"), so versions compare only when they have the
 * same shape: split into runs of digits and of other characters, digit runs compare as numbers
 * (any length), other runs must be equal. "0.7.0" and "b11669" are incomparable, never ordered.
 *
 * A constraint is "*" (any version) or one or more space-separated clauses that must all hold:
 * "V" or "=V" (exactly), ">=V", ">V", "<=V", "<V". A constraint list matches when any of its
 * constraints does; an absent list means any version. */
#ifndef QR_POLICY_VERSION_H
#define QR_POLICY_VERSION_H

#include <stdbool.h>
#include <stddef.h>

#define QR_VERSION_MAX_LEN 64u

enum qr_version_order {
    QR_VERSION_LESS = -1,
    QR_VERSION_EQUAL = 0,
    QR_VERSION_GREATER = 1,
    QR_VERSION_INCOMPARABLE = 2,
};

/* Order of two version strings (both borrowed, non-NULL). */
enum qr_version_order qr_version_cmp(const char *a, const char *b);

/* Whether s is a well-formed constraint (what the loaders accept). */
bool qr_version_constraint_valid(const char *s);

/* Whether version satisfies the constraint; an incomparable clause does not hold. */
bool qr_version_satisfies(const char *constraint, const char *version);

/* Whether any of the n versions (one engine build may have several names, e.g. "0.7.0" and
 * "b11669") satisfies any of the n_c constraints. n_c == 0 means "any version" and is true even
 * when no version is known; otherwise an unknown version (n == 0) never satisfies. */
bool qr_version_list_match(const char *const *constraints, size_t n_c, const char *const *versions,
                           size_t n);

#endif
