/* sd_notify without libsystemd: datagrams reach a real AF_UNIX socket named by $NOTIFY_SOCKET (a
 * path and an abstract '@' name), an invalid name is an error, nothing happens without it, and
 * the watchdog pets from a libevent timer every half of $WATCHDOG_USEC unless $WATCHDOG_PID names
 * another process. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/sdnotify.h"

/* Bind a datagram socket at name ('@' = abstract) and point $NOTIFY_SOCKET at it. */
static int listen_at(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(sa.sun_path, name, len);
    if (name[0] == '@')
        sa.sun_path[0] = '\0';
    else
        unlink(name);
    assert_int_equal(bind(fd, (struct sockaddr *) &sa,
                          (socklen_t) (offsetof(struct sockaddr_un, sun_path) + len)),
                     0);
    assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
    return fd;
}

/* Next datagram within timeout_ms, NUL-terminated in buf; false on timeout. */
static bool recv_msg(int fd, char *buf, size_t cap, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return false;
    ssize_t n = recv(fd, buf, cap - 1, 0);
    if (n < 0)
        return false;
    buf[n] = '\0';
    return true;
}

static void test_unset_is_noop(void **state)
{
    unsetenv("NOTIFY_SOCKET");
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_sdnotify_send("READY=1", &diag), QR_OK);
    assert_string_equal(diag.msg, "");
}

static void test_path_socket(void **state)
{
    char path[108];
    snprintf(path, sizeof(path), "/tmp/qr-sdnotify-%d.sock", (int) getpid());
    int fd = listen_at(path);
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_sdnotify_send("READY=1\nSTATUS=serving", &diag), QR_OK);
    char buf[256];
    assert_true(recv_msg(fd, buf, sizeof(buf), 2000));
    assert_string_equal(buf, "READY=1\nSTATUS=serving");
    close(fd);
    unlink(path);
    /* the listener is gone: the send fails with the name in the message */
    assert_int_equal(qr_sdnotify_send("STOPPING=1", &diag), QR_ERR_IO);
    assert_non_null(strstr(diag.msg, path));
    unsetenv("NOTIFY_SOCKET");
}

static void test_abstract_socket(void **state)
{
    char name[64];
    snprintf(name, sizeof(name), "@qr-sdnotify-test-%d", (int) getpid());
    int fd = listen_at(name);
    assert_int_equal(qr_sdnotify_send("STOPPING=1", NULL), QR_OK);
    char buf[256];
    assert_true(recv_msg(fd, buf, sizeof(buf), 2000));
    assert_string_equal(buf, "STOPPING=1");
    close(fd);
    unsetenv("NOTIFY_SOCKET");
}

static void test_invalid_name(void **state)
{
    setenv("NOTIFY_SOCKET", "relative/name", 1);
    struct qr_diag diag = {{0}};
    assert_int_equal(qr_sdnotify_send("READY=1", &diag), QR_ERR_IO);
    assert_non_null(strstr(diag.msg, "relative/name"));
    unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog_interval(void **state)
{
    char pid[32];
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 0);
    setenv("WATCHDOG_USEC", "200000", 1);
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 100000);
    snprintf(pid, sizeof(pid), "%d", (int) getpid());
    setenv("WATCHDOG_PID", pid, 1);
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 100000);
    snprintf(pid, sizeof(pid), "%d", (int) getpid() + 1);
    setenv("WATCHDOG_PID", pid, 1);
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 0); /* meant for another process */
    unsetenv("WATCHDOG_PID");
    setenv("WATCHDOG_USEC", "0", 1);
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 0);
    setenv("WATCHDOG_USEC", "12x", 1);
    assert_int_equal(qr_sdnotify_watchdog_interval_us(), 0);
    unsetenv("WATCHDOG_USEC");
}

static void test_watchdog_pets_from_loop(void **state)
{
    char name[64];
    snprintf(name, sizeof(name), "@qr-sdnotify-wd-%d", (int) getpid());
    int fd = listen_at(name);
    setenv("WATCHDOG_USEC", "200000", 1);
    struct event_base *base = event_base_new();
    assert_non_null(base);
    struct qr_diag diag = {{0}};
    struct qr_sdnotify_watchdog *wd = NULL;
    assert_int_equal(qr_sdnotify_watchdog_start(base, &diag, &wd), QR_OK);
    assert_non_null(wd);
    assert_int_equal(qr_sdnotify_watchdog_pets(wd), 1); /* one at once */
    struct timeval run = {0, 550000};
    event_base_loopexit(base, &run);
    event_base_dispatch(base);
    uint64_t pets = qr_sdnotify_watchdog_pets(wd);
    assert_in_range(pets, 3, 7); /* every 100 ms for 550 ms, plus the first (late on a busy host) */
    char buf[64];
    for (uint64_t i = 0; i < pets; i++) {
        assert_true(recv_msg(fd, buf, sizeof(buf), 1000));
        assert_string_equal(buf, "WATCHDOG=1");
    }
    /* a loop that does not run does not pet */
    usleep(300000);
    assert_int_equal(qr_sdnotify_watchdog_pets(wd), pets);
    assert_false(recv_msg(fd, buf, sizeof(buf), 100));
    qr_sdnotify_watchdog_free(wd);
    event_base_free(base);
    close(fd);
    unsetenv("WATCHDOG_USEC");
    unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog_off(void **state)
{
    unsetenv("WATCHDOG_USEC");
    struct event_base *base = event_base_new();
    struct qr_sdnotify_watchdog *wd = (void *) 1;
    assert_int_equal(qr_sdnotify_watchdog_start(base, NULL, &wd), QR_OK);
    assert_null(wd);
    qr_sdnotify_watchdog_free(wd);
    event_base_free(base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unset_is_noop),     cmocka_unit_test(test_path_socket),
        cmocka_unit_test(test_abstract_socket),   cmocka_unit_test(test_invalid_name),
        cmocka_unit_test(test_watchdog_interval), cmocka_unit_test(test_watchdog_pets_from_loop),
        cmocka_unit_test(test_watchdog_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
