/* The real daemon under a stand-in for systemd: $NOTIFY_SOCKET names a datagram socket this test
 * binds; the daemon sends READY=1 once it listens, WATCHDOG=1 every half of $WATCHDOG_USEC from
 * its loop, and STOPPING=1 when SIGTERM starts the graceful shutdown. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "harness.h"

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

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_ready_watchdog_stopping(void **state)
{
    char path[108], env_sock[160];
    snprintf(path, sizeof(path), "/tmp/qr-it-sdnotify-%d.sock", (int) getpid());
    unlink(path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strcpy(sa.sun_path, path);
    assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
    snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);
    const char *env[] = {env_sock, "WATCHDOG_USEC=200000", NULL};

    struct qr_child d;
    qr_t_daemon_start(&d, 0, env);
    char buf[512];
    assert_true(recv_msg(fd, buf, sizeof(buf), 10000));
    assert_non_null(strstr(buf, "READY=1"));
    /* it really listens by then */
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/healthz", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    qr_t_resp_free(&r);

    /* pets: every 100 ms; count them over one second */
    unsigned pets = 0;
    double end = now_ms() + 1000;
    while (now_ms() < end) {
        int left = (int) (end - now_ms());
        if (left <= 0 || !recv_msg(fd, buf, sizeof(buf), left))
            break;
        if (!strcmp(buf, "WATCHDOG=1"))
            pets++;
    }
    assert_in_range(pets, 4, 13); /* 10 nominal; fewer when the host is busy */

    assert_int_equal(kill(d.pid, SIGTERM), 0);
    bool stopping = false;
    for (int i = 0; i < 50 && !stopping; i++) {
        if (!recv_msg(fd, buf, sizeof(buf), 5000))
            break;
        stopping = strstr(buf, "STOPPING=1") != NULL;
    }
    assert_true(stopping);
    /* wait for the exit the first SIGTERM started (signal 0: no second one, which could land
     * after the loop has ended and its handlers are gone) */
    assert_int_equal(qr_t_stop(&d, 0, 10000), 0);
    close(fd);
    unlink(path);
}

/* Without $NOTIFY_SOCKET the daemon starts and stops as before (no error logged). */
static void test_without_systemd(void **state)
{
    struct qr_child d;
    qr_t_daemon_start(&d, 0, NULL);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
    assert_false(qr_t_log_contains(&d, "systemd notification failed"));
}

int main(void)
{
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ready_watchdog_stopping),
        cmocka_unit_test(test_without_systemd),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    curl_global_cleanup();
    return rc;
}
