/* Time stamps as the APIs write them. */
#ifndef QR_CORE_TIMEFMT_H
#define QR_CORE_TIMEFMT_H

#include <stddef.h>
#include <stdint.h>

/* RFC 3339 UTC with milliseconds, "2026-12-03T06:18:29.123Z", of a wall-clock time in ms since
 * the epoch; cap >= 25 holds it whole. */
void qr_rfc3339_ms(int64_t ms, char *out, size_t cap);

#endif
