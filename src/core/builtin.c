/* Lookups over the generated builtin data table (see builtin.h, cmake/embed.cmake). */
#include "core/builtin.h"

#include <string.h>

void qr_builtin_under(const char *prefix, const struct qr_builtin_file **first, size_t *n)
{
    size_t count, plen = strlen(prefix);
    const struct qr_builtin_file *f = qr_builtin_files(&count);
    *first = NULL;
    *n = 0;
    for (size_t i = 0; i < count; i++) {
        if (strncmp(f[i].path, prefix, plen) != 0)
            continue;
        if (!*first)
            *first = &f[i];
        (*n)++;
    }
}

const struct qr_builtin_file *qr_builtin_find(const char *path)
{
    size_t count;
    const struct qr_builtin_file *f = qr_builtin_files(&count);
    for (size_t i = 0; i < count; i++) {
        if (strcmp(f[i].path, path) == 0)
            return &f[i];
    }
    return NULL;
}
