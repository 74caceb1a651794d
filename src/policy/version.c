/* Engine version ordering and constraints (version.h): the small grammar model policies and the
 * upstream ledger's known-bad blocks use to say which engine builds they apply to. */
#include "policy/version.h"

#include <string.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static size_t run_len(const char *s)
{
    size_t n = 0;
    bool d = is_digit(s[0]);
    while (s[n] && is_digit(s[n]) == d)
        n++;
    return n;
}

static int cmp_digits(const char *a, size_t na, const char *b, size_t nb)
{
    while (na > 1 && *a == '0')
        a++, na--;
    while (nb > 1 && *b == '0')
        b++, nb--;
    if (na != nb)
        return na < nb ? -1 : 1;
    int c = memcmp(a, b, na);
    return c < 0 ? -1 : c > 0;
}

enum qr_version_order qr_version_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        bool da = is_digit(*a), db = is_digit(*b);
        size_t na = run_len(a), nb = run_len(b);
        if (da != db)
            return QR_VERSION_INCOMPARABLE;
        if (da) {
            int c = cmp_digits(a, na, b, nb);
            if (c)
                return c < 0 ? QR_VERSION_LESS : QR_VERSION_GREATER;
        } else if (na != nb || memcmp(a, b, na) != 0) {
            return QR_VERSION_INCOMPARABLE;
        }
        a += na;
        b += nb;
    }
    if (!*a && !*b)
        return QR_VERSION_EQUAL;
    return *a ? QR_VERSION_GREATER : QR_VERSION_LESS;
}

enum op { OP_EQ, OP_GE, OP_GT, OP_LE, OP_LT };

/* Parse one clause at *s (no leading spaces); returns false when malformed. The version is
 * copied into v (NUL-terminated). */
static bool clause(const char **s, enum op *op, char *v)
{
    const char *p = *s;
    *op = OP_EQ;
    if (p[0] == '>' && p[1] == '=')
        *op = OP_GE, p += 2;
    else if (p[0] == '<' && p[1] == '=')
        *op = OP_LE, p += 2;
    else if (p[0] == '>')
        *op = OP_GT, p++;
    else if (p[0] == '<')
        *op = OP_LT, p++;
    else if (p[0] == '=')
        p++;
    size_t n = 0;
    while (p[n] && p[n] != ' ') {
        char c = p[n];
        bool ok = is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                  c == '-' || c == '+' || c == '_' || c == '~';
        if (!ok || n >= QR_VERSION_MAX_LEN)
            return false;
        v[n] = c;
        n++;
    }
    if (n == 0)
        return false;
    v[n] = 0;
    *s = p + n;
    return true;
}

static bool holds(enum op op, enum qr_version_order o)
{
    if (o == QR_VERSION_INCOMPARABLE)
        return false;
    switch (op) {
    case OP_EQ:
        return o == QR_VERSION_EQUAL;
    case OP_GE:
        return o != QR_VERSION_LESS;
    case OP_GT:
        return o == QR_VERSION_GREATER;
    case OP_LE:
        return o != QR_VERSION_GREATER;
    case OP_LT:
        return o == QR_VERSION_LESS;
    }
    return false;
}

/* Walk the constraint; with version NULL only the syntax is checked. */
static bool walk(const char *s, const char *version)
{
    if (!s || !*s)
        return false;
    if (strcmp(s, "*") == 0)
        return true;
    bool all = true;
    int clauses = 0;
    while (*s) {
        if (*s == ' ') {
            s++;
            continue;
        }
        enum op op;
        char v[QR_VERSION_MAX_LEN + 1];
        if (!clause(&s, &op, v) || ++clauses > 8)
            return false;
        if (version && !holds(op, qr_version_cmp(version, v)))
            all = false;
    }
    return clauses > 0 && all;
}

bool qr_version_constraint_valid(const char *s)
{
    return walk(s, NULL);
}

bool qr_version_satisfies(const char *constraint, const char *version)
{
    if (!version || !*version || !qr_version_constraint_valid(constraint))
        return false;
    return walk(constraint, version);
}

bool qr_version_list_match(const char *const *constraints, size_t n_c, const char *const *versions,
                           size_t n)
{
    if (n_c == 0)
        return true;
    for (size_t i = 0; i < n_c; i++) {
        if (strcmp(constraints[i], "*") == 0)
            return true;
        for (size_t j = 0; j < n; j++)
            if (qr_version_satisfies(constraints[i], versions[j]))
                return true;
    }
    return false;
}
