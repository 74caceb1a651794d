/* CPU facts from made-up sysfs/procfs/cgroup trees: physical cores behind the allowed CPUs (SMT
 * siblings are one core), cgroup v2 and v1 quotas, the default engine thread count; and one run
 * against the real host. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/cpu.h"

static char root[256];

static void mkdirs(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(tmp, 0700);
            *p = '/';
        }
    }
    mkdir(tmp, 0700);
}

static void put(const char *rel, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    mkdirs(dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* cpu0..3: package 0, cores 0,0,1,1 (two SMT pairs); cpu4: package 1, core 0. */
static void topology(void)
{
    static const int core[] = {0, 0, 1, 1, 0}, pkg[] = {0, 0, 0, 0, 1};
    for (int i = 0; i < 5; i++) {
        char rel[128], v[16];
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/core_id", i);
        snprintf(v, sizeof v, "%d\n", core[i]);
        put(rel, v);
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/physical_package_id", i);
        snprintf(v, sizeof v, "%d\n", pkg[i]);
        put(rel, v);
    }
}

static struct qr_host_roots roots(void)
{
    static char sys[PATH_MAX], proc[PATH_MAX], cg[PATH_MAX];
    snprintf(sys, sizeof sys, "%s/sys", root);
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cgroup", root);
    return (struct qr_host_roots){sys, proc, cg};
}

static int setup(void **state)
{
    (void) state;
    snprintf(root, sizeof root, "/tmp/qr-host-cpu-XXXXXX");
    assert_non_null(mkdtemp(root));
    topology();
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_smt_siblings_are_one_core(void **state)
{
    (void) state;
    struct qr_host_roots r = roots();
    struct qr_host_cpu c;
    const uint32_t all[] = {0, 1, 2, 3, 4}, pair[] = {0, 1}, split[] = {1, 2};
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_int_equal(c.logical_allowed, 5);
    assert_int_equal(c.physical_allowed, 3); /* (0,0) (0,1) (1,0) */
    assert_int_equal(qr_host_cpu_discover(&r, pair, 2, &c, NULL), QR_OK);
    assert_int_equal(c.physical_allowed, 1);
    assert_int_equal(qr_host_cpu_discover(&r, split, 2, &c, NULL), QR_OK);
    assert_int_equal(c.physical_allowed, 2);
    char why[160];
    assert_int_equal(qr_host_default_threads(&c, why, sizeof why), 2);
    assert_non_null(strstr(why, "2 physical cores allowed"));
}

static void test_missing_topology_is_unknown(void **state)
{
    (void) state;
    struct qr_host_roots r = roots();
    struct qr_host_cpu c;
    const uint32_t cpus[] = {0, 7}; /* cpu7 has no topology files */
    assert_int_equal(qr_host_cpu_discover(&r, cpus, 2, &c, NULL), QR_OK);
    assert_int_equal(c.logical_allowed, 2);
    assert_int_equal(c.physical_allowed, 0);
    char why[160];
    assert_int_equal(qr_host_default_threads(&c, why, sizeof why), 2);
    assert_non_null(strstr(why, "physical cores unknown"));
    assert_int_equal(qr_host_cpu_discover(&r, cpus, 0, &c, NULL), QR_ERR_INVALID);
}

static void test_cgroup_v2_quota_smallest_ancestor(void **state)
{
    (void) state;
    put("proc/self/cgroup", "0::/a/b\n");
    put("cgroup/a/b/cpu.max", "max 100000\n");
    put("cgroup/a/cpu.max", "150000 100000\n");
    put("cgroup/cpu.max", "400000 100000\n");
    struct qr_host_roots r = roots();
    struct qr_host_cpu c;
    const uint32_t all[] = {0, 1, 2, 3, 4};
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_true(c.quota_known);
    assert_true(c.quota_cores > 1.49 && c.quota_cores < 1.51);
    assert_string_equal(c.quota_source, "cgroup v2 cpu.max");
    char why[160];
    assert_int_equal(qr_host_default_threads(&c, why, sizeof why), 2); /* 1.5 rounds up */
    assert_non_null(strstr(why, "capped by cgroup v2 cpu.max 1.50 cores"));
    put("cgroup/a/cpu.max", "50000 100000\n");
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_int_equal(qr_host_default_threads(&c, NULL, 0), 1);
    put("cgroup/a/cpu.max", "max 100000\n");
    put("cgroup/cpu.max", "max 100000\n");
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_true(c.quota_known);
    assert_true(c.quota_cores == 0);
    assert_int_equal(qr_host_default_threads(&c, NULL, 0), 3);
}

static void test_cgroup_v1_quota(void **state)
{
    (void) state;
    put("proc/self/cgroup", "4:memory:/m\n3:cpu,cpuacct:/x\n0::/\n");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cgroup/cpu.max", root);
    unlink(path); /* no v2 file at the root */
    put("cgroup/cpu,cpuacct/x/cpu.cfs_quota_us", "100000\n");
    put("cgroup/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
    struct qr_host_roots r = roots();
    struct qr_host_cpu c;
    const uint32_t all[] = {0, 1, 2, 3, 4};
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_true(c.quota_known);
    assert_string_equal(c.quota_source, "cgroup v1 cpu.cfs_quota_us");
    assert_true(c.quota_cores > 0.99 && c.quota_cores < 1.01);
    assert_int_equal(qr_host_default_threads(&c, NULL, 0), 1);
    put("cgroup/cpu,cpuacct/x/cpu.cfs_quota_us", "-1\n");
    assert_int_equal(qr_host_cpu_discover(&r, all, 5, &c, NULL), QR_OK);
    assert_true(c.quota_known && c.quota_cores == 0);
}

static void test_real_host(void **state)
{
    (void) state;
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    struct qr_host_cpu c;
    assert_int_equal(qr_host_cpu_discover(NULL, NULL, 0, &c, NULL), QR_OK);
    assert_int_equal(c.logical_allowed, (uint32_t) CPU_COUNT(&set));
    assert_true(c.physical_allowed <= c.logical_allowed);
    char why[160];
    uint32_t t = qr_host_default_threads(&c, why, sizeof why);
    assert_true(t >= 1 && t <= c.logical_allowed);
    print_message(
        "real host: %u CPUs, %u physical cores allowed, quota %.2f (%s): %u threads, %s\n",
        c.logical_allowed, c.physical_allowed, c.quota_cores,
        c.quota_known ? c.quota_source : "unknown", t, why);

    /* Restricted to one CPU (as taskset would): one CPU, one core, one thread. */
    int first = -1;
    for (int i = 0; i < CPU_SETSIZE && first < 0; i++)
        if (CPU_ISSET(i, &set))
            first = i;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    enum qr_err e = qr_host_cpu_discover(NULL, NULL, 0, &c, NULL);
    assert_int_equal(sched_setaffinity(0, sizeof set, &set), 0);
    assert_int_equal(e, QR_OK);
    assert_int_equal(c.logical_allowed, 1);
    assert_true(c.physical_allowed <= 1);
    assert_int_equal(qr_host_default_threads(&c, NULL, 0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smt_siblings_are_one_core),
        cmocka_unit_test(test_missing_topology_is_unknown),
        cmocka_unit_test(test_cgroup_v2_quota_smallest_ancestor),
        cmocka_unit_test(test_cgroup_v1_quota),
        cmocka_unit_test(test_real_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
