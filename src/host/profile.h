/* Host discovery: what the machine has (host profile) and what this process may use of it (host
 * limits), the predecessor's schemas quantum.runtime/host-profile/v1alpha1 and
 * host-limits/v1alpha1 (GET /v1/host, `quantum-runtime host`), with its weak spots fixed: the
 * logical CPU count of the profile is the host's online CPUs (the predecessor mixed the host's
 * physical cores with the affinity-limited logical count, so a taskset'd daemon failed its own
 * validation), and the limits carry the physical cores behind the allowed CPUs and the cgroup
 * quota, which lower the effective CPU count instead of being only recorded.
 *
 * Everything is read from files under configurable roots (struct qr_host_roots, host/cpu.h), fail
 * soft: what cannot be read is zero/empty and a warning says so. */
#ifndef QR_HOST_PROFILE_H
#define QR_HOST_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "host/cpu.h"

#define QR_HOST_PROFILE_SCHEMA "quantum.runtime/host-profile/v1alpha1"
#define QR_HOST_LIMITS_SCHEMA  "quantum.runtime/host-limits/v1alpha1"

#define QR_HOST_MAX_NUMA     64u
#define QR_HOST_MAX_STORAGE  32u
#define QR_HOST_MAX_ACCEL    16u
#define QR_HOST_MAX_WARNINGS 8u

struct qr_host_numa_node {
    int id;
    char cpu_list[256];
    uint64_t memory_bytes, free_bytes;
};

struct qr_host_storage {
    char device[64];
    bool nvme;
    uint64_t size_bytes;
    bool rotational;
    int numa_node; /* -1 unknown */
};

struct qr_host_accel {
    char vendor[16]; /* "AMD", "NVIDIA", "Intel" */
    char device[32]; /* "card0" */
    uint64_t vram_bytes;
    int numa_node; /* -1 unknown */
};

#define QR_HOST_MAX_CACHES 8u

/* One cache level and type as hwloc sees it (all instances on the host). */
struct qr_host_cache {
    unsigned level;            /* 1..5 */
    char type[12];             /* "data", "instruction", "unified" */
    uint64_t size_bytes;       /* one instance */
    uint32_t instances;        /* how many on the host */
    uint32_t line_bytes;       /* 0 unknown */
    uint32_t pus_per_instance; /* logical CPUs sharing one instance */
};

struct qr_host_profile {
    int64_t collected_at_ms;
    char os[16], arch[32];
    char vendor_id[64], model_name[128];
    uint32_t physical_cores;   /* distinct (package, core) of the online CPUs */
    uint32_t logical_cores;    /* online CPUs of the host */
    uint32_t threads_per_core; /* logical / physical, at least 1 */
    char features[2048];       /* selected CPU flags, sorted, space separated */
    uint32_t packages;         /* sockets; 0 unknown */
    struct qr_host_cache caches[QR_HOST_MAX_CACHES];
    size_t n_caches;
    char topology_source[48]; /* "hwloc 2.9.0", or why there is none */
    struct qr_host_numa_node numa[QR_HOST_MAX_NUMA];
    size_t n_numa;
    uint64_t memory_total, memory_available, huge_page_size, huge_pages_total, huge_pages_free;
    struct qr_host_storage storage[QR_HOST_MAX_STORAGE];
    size_t n_storage;
    struct qr_host_accel accel[QR_HOST_MAX_ACCEL];
    size_t n_accel;
    char warnings[QR_HOST_MAX_WARNINGS][160];
    size_t n_warnings;
};

struct qr_host_limits {
    int64_t collected_at_ms;
    uint32_t effective_logical_cpus; /* min(affinity, cpuset, quota rounded up), at least 1 */
    uint32_t
        physical_cores_allowed; /* distinct physical cores behind the allowed CPUs; 0 unknown */
    char affinity_cpu_list[512];
    uint32_t affinity_logical_cpus;
    char cgroup_cpuset[512];
    uint32_t cgroup_cpuset_logical_cpus;
    double cpu_quota_cores; /* 0 = none or unknown */
    char cpu_quota_source[64];
    uint64_t memory_max_bytes; /* cgroup memory limit; 0 = none or unknown */
    bool guest;
    char virtualization[32]; /* "kvm", ..., "bare-metal-or-undetected" */
    char virtualization_evidence[160];
    char warnings[QR_HOST_MAX_WARNINGS][160];
    size_t n_warnings;
};

/* Count the CPUs of a list like "0-3,8,10-11"; -1 when malformed (end < start, junk). */
int qr_host_cpu_list_count(const char *list);

/* Discover both (roots NULL = the real ones). Never fails for missing files. */
void qr_host_discover(const struct qr_host_roots *roots, struct qr_host_profile *p,
                      struct qr_host_limits *l);

struct yyjson_mut_doc;
struct yyjson_mut_val;

/* The schemas' JSON objects, added as members into obj. QR_ERR_NOMEM only. */
enum qr_err qr_host_profile_json(const struct qr_host_profile *p, struct yyjson_mut_doc *doc,
                                 struct yyjson_mut_val *obj);
enum qr_err qr_host_limits_json(const struct qr_host_limits *l, struct yyjson_mut_doc *doc,
                                struct yyjson_mut_val *obj);

#define QR_HOST_CALIBRATION_SCHEMA "quantum.runtime/host-calibration/v1alpha1"

/* The GET /v1/host document (and `quantum-runtime host --json`): {"api_version", "host_schema",
 * "limits_schema", "calibration_schema", "host", "limits", "calibrated": false,
 * "last_calibration": null}, discovered fresh. NULL when out of memory. */
struct yyjson_mut_doc *qr_host_document(const struct qr_host_roots *roots, const char *api_version);

#endif
