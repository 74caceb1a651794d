/* Host discovery through the real binary: GET /v1/host answers the predecessor's document with
 * this process's CPUs, and `quantum-runtime host --json` under `taskset -c 0` reports one
 * effective CPU and one physical core allowed (the restriction is seen, and the host profile's own
 * counts stay the host's, so the profile is still valid). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "harness.h"

static void test_v1_host(void **state)
{
    (void) state;
    struct qr_child d;
    qr_t_daemon_start(&d, 0, NULL);
    struct qr_t_resp r;
    qr_t_request("GET", d.port, "/v1/host", NULL, NULL, 0, &r);
    assert_int_equal(r.status, 200);
    yyjson_doc *doc = yyjson_read(r.body, r.body_len, 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "host_schema")),
                        "quantum.runtime/host-profile/v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "limits_schema")),
                        "quantum.runtime/host-limits/v1alpha1");
    yyjson_val *cpu = yyjson_obj_get(yyjson_obj_get(root, "host"), "cpu");
    uint64_t logical = yyjson_get_uint(yyjson_obj_get(cpu, "logical_cores"));
    uint64_t physical = yyjson_get_uint(yyjson_obj_get(cpu, "physical_cores"));
    assert_true(physical >= 1 && physical <= logical);
    /* hwloc's view: packages and every cache level it found, each with a size and instances */
    assert_true(!strncmp(yyjson_get_str(yyjson_obj_get(cpu, "topology_source")), "hwloc ", 6));
    assert_true(yyjson_get_uint(yyjson_obj_get(cpu, "packages")) >= 1);
    yyjson_val *caches = yyjson_obj_get(cpu, "caches"), *c;
    size_t ci, cmax;
    assert_true(yyjson_is_arr(caches));
    yyjson_arr_foreach(caches, ci, cmax, c)
    {
        assert_true(yyjson_get_uint(yyjson_obj_get(c, "level")) >= 1);
        assert_true(yyjson_get_uint(yyjson_obj_get(c, "size_bytes")) > 0);
        assert_true(yyjson_get_uint(yyjson_obj_get(c, "instances")) >= 1);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    yyjson_val *lim = yyjson_obj_get(root, "limits");
    uint64_t eff = yyjson_get_uint(yyjson_obj_get(lim, "effective_logical_cpus"));
    assert_true(eff >= 1 && eff <= (uint64_t) CPU_COUNT(&set));
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(lim, "affinity_logical_cpus")),
                     (uint64_t) CPU_COUNT(&set));
    assert_false(yyjson_get_bool(yyjson_obj_get(root, "calibrated")));
    yyjson_doc_free(doc);
    qr_t_resp_free(&r);
    assert_int_equal(qr_t_stop(&d, SIGTERM, 10000), 0);
}

static void test_cli_under_taskset(void **state)
{
    (void) state;
    char *out = NULL;
    char *taskset = access("/usr/bin/taskset", X_OK) == 0 ? "/usr/bin/taskset"
                    : access("/bin/taskset", X_OK) == 0   ? "/bin/taskset"
                                                          : NULL;
    if (!taskset)
        skip(); /* no taskset (util-linux) here */
    char *argv[] = {taskset, "-c", "0", QR_TEST_DAEMON, "host", "--json", NULL};
    assert_int_equal(qr_t_run(argv, NULL, 10000, &out), 0);
    yyjson_doc *doc = yyjson_read(out, strlen(out), 0);
    assert_non_null(doc);
    yyjson_val *root = yyjson_doc_get_root(doc);
    yyjson_val *lim = yyjson_obj_get(root, "limits");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(lim, "effective_logical_cpus")), 1);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(lim, "affinity_cpu_list")), "0");
    assert_true(yyjson_get_uint(yyjson_obj_get(lim, "physical_cores_allowed")) <= 1);
    /* the profile keeps the host's own counts: still valid under the restriction */
    yyjson_val *cpu = yyjson_obj_get(yyjson_obj_get(root, "host"), "cpu");
    assert_true(yyjson_get_uint(yyjson_obj_get(cpu, "physical_cores")) <=
                yyjson_get_uint(yyjson_obj_get(cpu, "logical_cores")));
    yyjson_doc_free(doc);
    free(out);
    char *bad[] = {QR_TEST_DAEMON, "host", "--bogus", NULL};
    assert_int_equal(qr_t_run(bad, NULL, 10000, &out), 2);
    free(out);
}

/* Write text to path; false when it cannot be written. */
static bool put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* This process's cgroup v1 path for a controller ("/" when at the root), from /proc/self/cgroup. */
static void v1_path(const char *controller, char *out, size_t cap)
{
    snprintf(out, cap, "/");
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        if (!strcmp(a + 1, controller)) {
            b[1 + strcspn(b + 1, "\n")] = '\0';
            snprintf(out, cap, "%s", b + 1);
        }
    }
    if (f)
        fclose(f);
}

/* A child in a cgroup with a CPU quota of half a core and a memory limit of 3 GiB (cgroup v1, where
 * this machine lets the test create one; skipped otherwise): the limits report exactly those. */
static void test_cli_under_cgroup_quota(void **state)
{
    (void) state;
    char cpu_dir[600], mem_dir[1200], mem_base[512], cmd[3000];
    snprintf(cpu_dir, sizeof cpu_dir, "/sys/fs/cgroup/cpu/qr-test-%ld", (long) getpid());
    if (mkdir(cpu_dir, 0755) != 0) {
        fprintf(stderr, "skipped: cannot create a cgroup v1 cpu group here (%s)\n",
                strerror(errno));
        skip();
    }
    char path[1300];
    snprintf(path, sizeof path, "%s/cpu.cfs_period_us", cpu_dir);
    bool ok = put(path, "100000");
    snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", cpu_dir);
    ok = ok && put(path, "50000");
    v1_path("memory", mem_base, sizeof mem_base);
    snprintf(mem_dir, sizeof mem_dir, "/sys/fs/cgroup/memory%s/qr-test-%ld",
             strcmp(mem_base, "/") ? mem_base : "", (long) getpid());
    bool mem = ok && mkdir(mem_dir, 0755) == 0;
    snprintf(path, sizeof path, "%s/memory.limit_in_bytes", mem_dir);
    mem = mem && put(path, "3221225472");
    if (ok) {
        snprintf(cmd, sizeof cmd, "echo $$ > %s/cgroup.procs%s%s%s && exec %s host --json", cpu_dir,
                 mem ? " && echo $$ > " : "", mem ? mem_dir : "", mem ? "/cgroup.procs" : "",
                 QR_TEST_DAEMON);
        char *out = NULL;
        char *argv[] = {"/bin/sh", "-c", cmd, NULL};
        int rc = qr_t_run(argv, NULL, 10000, &out);
        yyjson_doc *doc = rc == 0 ? yyjson_read(out, strlen(out), 0) : NULL;
        yyjson_val *lim = yyjson_obj_get(yyjson_doc_get_root(doc), "limits");
        if (!doc)
            fprintf(stderr, "rc %d, output: %s\n", rc, out ? out : "");
        ok = doc != NULL;
        ok = ok && yyjson_get_real(yyjson_obj_get(lim, "cpu_quota_cores")) == 0.5;
        ok = ok && !strcmp(yyjson_get_str(yyjson_obj_get(lim, "cpu_quota_source")),
                           "cgroup v1 cpu.cfs_quota_us");
        ok = ok && yyjson_get_uint(yyjson_obj_get(lim, "effective_logical_cpus")) == 1;
        if (ok && mem)
            ok = yyjson_get_uint(yyjson_obj_get(lim, "memory_max_bytes")) == 3221225472u;
        if (!ok && doc)
            fprintf(stderr, "limits: %s\n", out);
        yyjson_doc_free(doc);
        free(out);
    }
    if (mem)
        rmdir(mem_dir);
    rmdir(cpu_dir);
    assert_true(ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_host),
        cmocka_unit_test(test_cli_under_taskset),
        cmocka_unit_test(test_cli_under_cgroup_quota),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
