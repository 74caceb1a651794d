#include "core/timefmt.h"

#include <stdio.h>
#include <time.h>

void qr_rfc3339_ms(int64_t ms, char *out, size_t cap)
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char base[32];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%.24s.%03dZ", base, (int) (ms % 1000));
}
