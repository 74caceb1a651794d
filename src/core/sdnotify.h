/* The systemd service-manager notification protocol (sd_notify(3)) without libsystemd: datagrams
 * of "KEY=value" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an abstract
 * socket when it starts with '@'). Outside systemd ($NOTIFY_SOCKET unset) every call is a no-op,
 * so the daemon calls these unconditionally. The watchdog pets from a libevent timer on the
 * daemon's own loop: a loop that hangs stops petting and systemd restarts the service. */
#ifndef QR_CORE_SDNOTIFY_H
#define QR_CORE_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "core/err.h"

struct event_base;
struct qr_sdnotify_watchdog;

/* Send one notification (state: "READY=1", "STOPPING=1\nSTATUS=...", borrowed). QR_OK also when
 * $NOTIFY_SOCKET is unset (nothing to do); QR_ERR_IO with diag set when the socket name is
 * invalid or the datagram could not be sent. */
enum qr_err qr_sdnotify_send(const char *state, struct qr_diag *diag);

/* The watchdog interval systemd asks for: half of $WATCHDOG_USEC in microseconds, or 0 when the
 * watchdog is off ($WATCHDOG_USEC unset, invalid or 0, or $WATCHDOG_PID names another process). */
uint64_t qr_sdnotify_watchdog_interval_us(void);

/* Start petting: WATCHDOG=1 now and every qr_sdnotify_watchdog_interval_us() from a timer on
 * base (borrowed; must outlive the watchdog). *out is NULL when the watchdog is off; otherwise
 * owned by the caller, release with qr_sdnotify_watchdog_free. */
enum qr_err qr_sdnotify_watchdog_start(struct event_base *base, struct qr_diag *diag,
                                       struct qr_sdnotify_watchdog **out);

/* Number of WATCHDOG=1 datagrams sent so far (tests). */
uint64_t qr_sdnotify_watchdog_pets(const struct qr_sdnotify_watchdog *wd);

/* Stop the timer and free (NULL is fine). */
void qr_sdnotify_watchdog_free(struct qr_sdnotify_watchdog *wd);

#endif
