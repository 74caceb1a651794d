#include "core/fsutil.h"

#include <stdio.h>
#include <sys/stat.h>

void qr_mkdir_p(const char *dir, bool parents_only)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    }
    if (!parents_only)
        mkdir(path, 0700);
}
