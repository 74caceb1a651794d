/* Host profile and limits from a made-up sysfs/procfs/cgroup tree: CPU identity and flags, online
 * CPUs and the physical cores behind them, NUMA nodes, memory, block devices (NVMe flagged, loop
 * devices skipped), a GPU by its PCI vendor, the affinity and cpuset of the process, the cgroup
 * quota lowering the effective CPUs, the memory limit, virtualization; CPU list parsing; the
 * /v1/host document; and one run against the real host. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "host/profile.h"

static char root[128];

static void put(const char *rel, const char *text)
{
    char path[512], dir[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0700);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void tree(void)
{
    put("proc/cpuinfo", "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC Test\n"
                        "flags\t\t: sse4_2 avx2 fma hypervisor avx512f\n\nprocessor\t: 1\n");
    /* 4 online CPUs: two cores with two threads each */
    put("sys/devices/system/cpu/online", "0-3\n");
    static const int core[] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        char rel[128], v[8];
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/core_id", i);
        snprintf(v, sizeof v, "%d\n", core[i]);
        put(rel, v);
        snprintf(rel, sizeof rel, "sys/devices/system/cpu/cpu%d/topology/physical_package_id", i);
        put(rel, "0\n");
    }
    put("proc/meminfo", "MemTotal:       16384000 kB\nMemFree:         1000000 kB\n"
                        "MemAvailable:    8192000 kB\nHugePages_Total:       4\n"
                        "HugePages_Free:        2\nHugepagesize:       2048 kB\n");
    put("sys/devices/system/node/node0/cpulist", "0-3\n");
    put("sys/devices/system/node/node0/meminfo",
        "Node 0 MemTotal:       16384000 kB\nNode 0 MemFree:         1000000 kB\n");
    put("sys/block/nvme0n1/size", "2000000\n");
    put("sys/block/nvme0n1/queue/rotational", "0\n");
    put("sys/block/nvme0n1/device/numa_node", "0\n");
    put("sys/block/sda/size", "1000\n");
    put("sys/block/sda/queue/rotational", "1\n");
    put("sys/block/loop0/size", "8\n");
    put("sys/class/drm/card0/device/vendor", "0x10de\n");
    put("sys/class/drm/card0/device/mem_info_vram_total", "8589934592\n");
    put("sys/class/dmi/id/product_name", "KVM Virtual Machine\n");
    /* the process: CPUs 1-2 (taskset), cgroup v2 with a cpuset and 1.5 cores of quota, 2 GiB */
    put("proc/self/status", "Name:\tx\nCpus_allowed_list:\t1-2\n");
    put("proc/self/cgroup", "0::/svc\n");
    put("cgroup/svc/cpuset.cpus.effective", "0-2\n");
    put("cgroup/svc/cpu.max", "150000 100000\n");
    put("cgroup/svc/memory.max", "2147483648\n");
}

static struct qr_host_roots roots(void)
{
    static char sys[192], proc[192], cg[192];
    snprintf(sys, sizeof sys, "%s/sys", root);
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cgroup", root);
    return (struct qr_host_roots){sys, proc, cg};
}

static int setup(void **state)
{
    (void) state;
    snprintf(root, sizeof root, "/tmp/qr-host-profile-XXXXXX");
    if (!mkdtemp(root))
        return -1;
    tree();
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_cpu_lists(void **state)
{
    (void) state;
    assert_int_equal(qr_host_cpu_list_count("0-3,8,10-11"), 7);
    assert_int_equal(qr_host_cpu_list_count("5"), 1);
    assert_int_equal(qr_host_cpu_list_count(""), 0);
    assert_int_equal(qr_host_cpu_list_count("3-1"), -1);
    assert_int_equal(qr_host_cpu_list_count("0-"), -1);
    assert_int_equal(qr_host_cpu_list_count("a"), -1);
    assert_int_equal(qr_host_cpu_list_count("0,,1"), -1);
}

static void test_made_up_host(void **state)
{
    (void) state;
    struct qr_host_roots r = roots();
    static struct qr_host_profile p;
    static struct qr_host_limits l;
    qr_host_discover(&r, &p, &l);
    assert_string_equal(p.vendor_id, "AuthenticAMD");
    assert_string_equal(p.model_name, "AMD EPYC Test");
    assert_string_equal(p.features, "avx2 avx512f fma hypervisor sse4_2");
    assert_int_equal(p.logical_cores, 4);
    assert_int_equal(p.physical_cores, 2);
    assert_int_equal(p.threads_per_core, 2);
    assert_int_equal(p.memory_total, 16384000ull * 1024);
    assert_int_equal(p.memory_available, 8192000ull * 1024);
    assert_int_equal(p.huge_page_size, 2048 * 1024);
    assert_int_equal(p.huge_pages_total, 4);
    assert_int_equal(p.n_numa, 1);
    assert_string_equal(p.numa[0].cpu_list, "0-3");
    assert_int_equal(p.numa[0].free_bytes, 1000000ull * 1024);
    assert_int_equal(p.n_storage, 2); /* loop0 skipped */
    assert_string_equal(p.storage[0].device, "nvme0n1");
    assert_true(p.storage[0].nvme);
    assert_int_equal(p.storage[0].size_bytes, 2000000ull * 512);
    assert_int_equal(p.storage[0].numa_node, 0);
    assert_string_equal(p.storage[1].device, "sda");
    assert_true(p.storage[1].rotational);
    assert_int_equal(p.storage[1].numa_node, -1);
    assert_int_equal(p.n_accel, 1);
    assert_string_equal(p.accel[0].vendor, "NVIDIA");
    assert_int_equal(p.accel[0].vram_bytes, 8589934592ull);
    /* limits: affinity 1-2 (cpu1 on core 0, cpu2 on core 1), cpuset 0-2, quota 1.5 -> 2 */
    assert_string_equal(l.affinity_cpu_list, "1-2");
    assert_int_equal(l.affinity_logical_cpus, 2);
    assert_string_equal(l.cgroup_cpuset, "0-2");
    assert_int_equal(l.cgroup_cpuset_logical_cpus, 3);
    assert_int_equal(l.physical_cores_allowed, 2);
    assert_true(l.cpu_quota_cores > 1.49 && l.cpu_quota_cores < 1.51);
    assert_int_equal(l.effective_logical_cpus, 2);
    assert_int_equal(l.memory_max_bytes, 2147483648ull);
    assert_true(l.guest);
    assert_string_equal(l.virtualization, "kvm");
    assert_string_equal(l.virtualization_evidence, "dmi product: KVM Virtual Machine");
    /* a tighter quota lowers the effective CPUs */
    put("cgroup/svc/cpu.max", "50000 100000\n");
    qr_host_discover(&r, &p, &l);
    assert_int_equal(l.effective_logical_cpus, 1);
    put("cgroup/svc/cpu.max", "max 100000\n");
    qr_host_discover(&r, &p, &l);
    assert_int_equal(l.effective_logical_cpus, 2);
    assert_true(l.cpu_quota_cores == 0);
}

static void test_document(void **state)
{
    (void) state;
    struct qr_host_roots r = roots();
    yyjson_mut_doc *doc = qr_host_document(&r, "v1alpha1");
    assert_non_null(doc);
    char *s = yyjson_mut_write(doc, 0, NULL);
    yyjson_mut_doc_free(doc);
    yyjson_doc *d = yyjson_read(s, strlen(s), 0);
    free(s);
    yyjson_val *root_v = yyjson_doc_get_root(d);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root_v, "host_schema")),
                        "quantum.runtime/host-profile/v1alpha1");
    assert_false(yyjson_get_bool(yyjson_obj_get(root_v, "calibrated")));
    assert_true(yyjson_is_null(yyjson_obj_get(root_v, "last_calibration")));
    yyjson_val *cpu = yyjson_obj_get(yyjson_obj_get(root_v, "host"), "cpu");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(cpu, "physical_cores")), 2);
    assert_int_equal(yyjson_arr_size(yyjson_obj_get(cpu, "features")), 5);
    yyjson_val *st = yyjson_obj_get(yyjson_obj_get(root_v, "host"), "storage");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(yyjson_arr_get(st, 0), "kind")), "nvme");
    yyjson_val *lim = yyjson_obj_get(root_v, "limits");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(lim, "effective_logical_cpus")), 2);
    assert_string_equal(
        yyjson_get_str(yyjson_obj_get(yyjson_obj_get(lim, "virtualization"), "kind")), "kvm");
    yyjson_doc_free(d);
}

static void test_real_host(void **state)
{
    (void) state;
    static struct qr_host_profile p;
    static struct qr_host_limits l;
    qr_host_discover(NULL, &p, &l);
    assert_true(p.logical_cores >= 1);
    assert_true(p.physical_cores >= 1 && p.physical_cores <= p.logical_cores);
    assert_true(p.memory_total > 0 && p.memory_available <= p.memory_total);
    assert_true(l.effective_logical_cpus >= 1 && l.effective_logical_cpus <= p.logical_cores);
    assert_true(l.affinity_logical_cpus >= 1);
    print_message("real host: %u logical, %u physical, %u effective (affinity %s), %s\n",
                  p.logical_cores, p.physical_cores, l.effective_logical_cpus, l.affinity_cpu_list,
                  l.virtualization);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_lists),
        cmocka_unit_test(test_made_up_host),
        cmocka_unit_test(test_document),
        cmocka_unit_test(test_real_host),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
