/* The CPUs this process may really use: the affinity mask, the physical cores behind it (SMT
 * siblings are one core), and the cgroup CPU quota (v2 cpu.max, v1 cpu.cfs_quota_us). This is the
 * part of host discovery the llama.cpp backend needs for its default thread count; the full host
 * profile (topology, caches, NUMA, memory, accelerators) builds on it.
 *
 * Everything is read from files under configurable roots ("/" in production), so a test can hand
 * it a made-up sysfs/procfs/cgroup tree. A fact that cannot be read is reported unknown (0), never
 * guessed. */
#ifndef QR_HOST_CPU_H
#define QR_HOST_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define QR_HOST_MAX_CPUS 4096u

struct qr_host_cpu {
    uint32_t logical_allowed;  /* CPUs in this process's affinity mask; 0 = unknown */
    uint32_t physical_allowed; /* distinct physical cores (package, core) holding an allowed CPU;
                                  0 = unknown (no topology files) */
    double quota_cores;        /* cgroup CPU quota in cores (quota / period); 0 = none or unknown */
    bool quota_known;          /* the cgroup files were read (a quota of "max" is known, 0) */
    char quota_source[64];     /* "cgroup v2 cpu.max", "cgroup v1 cpu.cfs_quota_us" or "" */
};

/* Roots to read from; NULL members mean the real ones ("/sys", "/proc", "/sys/fs/cgroup"). */
struct qr_host_roots {
    const char *sys;
    const char *proc;
    const char *cgroup;
};

/* Read a small text file into buf (NUL-terminated, trailing whitespace cut). False when it cannot
 * be read or is empty. */
bool qr_host_read_file(const char *path, char *buf, size_t cap);

/* Discover the CPU facts. `allowed` is the affinity as a list of CPU numbers (NULL = ask the
 * kernel with sched_getaffinity); tests pass their own. Never fails for missing files (the fact is
 * unknown); QR_ERR_INVALID only for bad arguments. */
enum qr_err qr_host_cpu_discover(const struct qr_host_roots *roots, const uint32_t *allowed,
                                 uint32_t n_allowed, struct qr_host_cpu *out, struct qr_diag *diag);

/* The engine thread count this host supports without oversubscription: the physical cores
 * allowed (else the logical CPUs allowed), capped by the quota rounded up, at least 1. Writes a
 * one-line reason ("2 physical cores allowed (affinity 0-3, SMT 2)", "...capped by cgroup v2
 * cpu.max 1.5 cores") into why (size why_len, may be NULL). */
uint32_t qr_host_default_threads(const struct qr_host_cpu *c, char *why, size_t why_len);

#endif
