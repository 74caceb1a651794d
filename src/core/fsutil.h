/* Small filesystem helpers shared by the daemon and the CLI. */
#ifndef QR_CORE_FSUTIL_H
#define QR_CORE_FSUTIL_H

#include <stdbool.h>

/* mkdir -p with mode 0700: create dir and every missing directory above it. With parents_only,
 * only the directories above the last component (for a file path). Errors are not reported here:
 * the caller's next open names the path that could not be created. Paths longer than 4095 bytes
 * are cut. */
void qr_mkdir_p(const char *dir, bool parents_only);

#endif
