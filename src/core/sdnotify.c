/* sd_notify(3) for the daemon: READY=1 once it listens with its backends open, STOPPING=1 when a
 * SIGTERM starts the graceful shutdown, WATCHDOG=1 from a timer on the event loop every half of
 * $WATCHDOG_USEC. The protocol is a datagram per notification on an AF_UNIX socket; nothing here
 * links libsystemd (dist/systemd/, docs/OPERATIONS.md "Running under systemd"). */
#include "core/sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/log.h"

struct qr_sdnotify_watchdog {
    struct event *timer;
    uint64_t interval_us;
    uint64_t pets;
};

enum qr_err qr_sdnotify_send(const char *state, struct qr_diag *diag)
{
    const char *name = getenv("NOTIFY_SOCKET");
    if (!name || !name[0])
        return QR_OK;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    if ((name[0] != '/' && name[0] != '@') || len >= sizeof(sa.sun_path))
        return qr_diag_set(diag, QR_ERR_IO, "NOTIFY_SOCKET '%s': not an absolute path or '@name'",
                           name);
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract namespace: the length counts, no terminating NUL */
    socklen_t salen = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return qr_diag_set(diag, QR_ERR_IO, "NOTIFY_SOCKET: socket: %s", strerror(errno));
    ssize_t n;
    do
        n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *) &sa, salen);
    while (n < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (n < 0)
        return qr_diag_set(diag, QR_ERR_IO, "NOTIFY_SOCKET '%s': %s", name, strerror(saved));
    return QR_OK;
}

/* Parse a decimal u64 that is the whole string. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

uint64_t qr_sdnotify_watchdog_interval_us(void)
{
    uint64_t usec = 0, pid = 0;
    if (!parse_u64(getenv("WATCHDOG_USEC"), &usec) || usec == 0)
        return 0;
    const char *p = getenv("WATCHDOG_PID");
    if (p && p[0] && (!parse_u64(p, &pid) || pid != (uint64_t) getpid()))
        return 0;
    return usec / 2 ? usec / 2 : 1;
}

static void pet(struct qr_sdnotify_watchdog *wd)
{
    struct qr_diag diag = {{0}};
    if (qr_sdnotify_send("WATCHDOG=1", &diag))
        QR_LOG(QR_LOG_WARN, "systemd watchdog notification failed", QR_LF_S("error", diag.msg));
    else
        wd->pets++;
}

static void watchdog_tick(evutil_socket_t fd, short what, void *arg)
{
    (void) fd;
    (void) what;
    pet(arg);
}

enum qr_err qr_sdnotify_watchdog_start(struct event_base *base, struct qr_diag *diag,
                                       struct qr_sdnotify_watchdog **out)
{
    *out = NULL;
    uint64_t interval = qr_sdnotify_watchdog_interval_us();
    if (!interval)
        return QR_OK;
    struct qr_sdnotify_watchdog *wd = calloc(1, sizeof(*wd));
    if (!wd)
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot allocate the watchdog");
    wd->interval_us = interval;
    wd->timer = event_new(base, -1, EV_PERSIST, watchdog_tick, wd);
    if (!wd->timer) {
        free(wd);
        return qr_diag_set(diag, QR_ERR_NOMEM, "cannot create the watchdog timer");
    }
    struct timeval tv = {(time_t) (interval / 1000000u), (suseconds_t) (interval % 1000000u)};
    event_add(wd->timer, &tv);
    pet(wd);
    QR_LOG(QR_LOG_INFO, "systemd watchdog enabled", QR_LF_N("interval_us", interval));
    *out = wd;
    return QR_OK;
}

uint64_t qr_sdnotify_watchdog_pets(const struct qr_sdnotify_watchdog *wd)
{
    return wd ? wd->pets : 0;
}

void qr_sdnotify_watchdog_free(struct qr_sdnotify_watchdog *wd)
{
    if (!wd)
        return;
    event_free(wd->timer);
    free(wd);
}
