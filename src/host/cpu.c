/* CPU facts this process may use: affinity, physical cores behind it, cgroup quota. */
#include "host/cpu.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool qr_host_read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        n--;
    buf[n] = '\0';
    return n > 0;
}

static bool read_i64(const char *path, int64_t *out)
{
    char buf[64];
    if (!qr_host_read_file(path, buf, sizeof buf))
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno || end == buf || *end)
        return false;
    *out = v;
    return true;
}

struct core_key {
    int64_t package, die, core;
};

static bool core_of(const char *sys, uint32_t cpu, struct core_key *k)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%" PRIu32 "/topology/physical_package_id",
             sys, cpu);
    if (!read_i64(path, &k->package))
        return false;
    snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%" PRIu32 "/topology/core_id", sys, cpu);
    if (!read_i64(path, &k->core))
        return false;
    snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%" PRIu32 "/topology/die_id", sys, cpu);
    if (!read_i64(path, &k->die))
        k->die = 0; /* older kernels: no dies */
    return true;
}

/* Distinct physical cores among the allowed CPUs; 0 when any CPU's topology is missing. */
static uint32_t count_cores(const char *sys, const uint32_t *cpus, uint32_t n)
{
    struct core_key *keys = calloc(n ? n : 1, sizeof *keys);
    if (!keys)
        return 0;
    uint32_t distinct = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct core_key k;
        if (!core_of(sys, cpus[i], &k)) {
            distinct = 0;
            break;
        }
        bool seen = false;
        for (uint32_t j = 0; j < distinct && !seen; j++)
            seen = keys[j].package == k.package && keys[j].die == k.die && keys[j].core == k.core;
        if (!seen)
            keys[distinct++] = k;
    }
    free(keys);
    return distinct;
}

/* The cgroup path of this process for the v2 hierarchy ("0::/path") or for the v1 controller
 * `cpu` ("N:cpu,cpuacct:/path"). */
static bool cgroup_path(const char *proc, bool v2, char *out, size_t cap)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/self/cgroup", proc);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *p = c2 + 1;
        if (v2) {
            found = strcmp(line, "0") == 0 && *ctrls == '\0';
        } else {
            char list[256];
            snprintf(list, sizeof list, "%s", ctrls);
            char *save = NULL;
            for (char *t = strtok_r(list, ",", &save); t && !found; t = strtok_r(NULL, ",", &save))
                found = strcmp(t, "cpu") == 0;
        }
        if (found)
            snprintf(out, cap, "%s", strcmp(p, "/") == 0 ? "" : p);
    }
    fclose(f);
    return found;
}

/* cgroup v2: the smallest cpu.max quota from this process's cgroup up to the root. */
static bool quota_v2(const struct qr_host_roots *r, double *cores)
{
    char rel[PATH_MAX];
    if (!cgroup_path(r->proc, true, rel, sizeof rel))
        return false;
    bool any = false;
    double best = 0;
    for (;;) {
        char path[PATH_MAX + 64], buf[128];
        snprintf(path, sizeof path, "%s%s/cpu.max", r->cgroup, rel);
        if (qr_host_read_file(path, buf, sizeof buf)) {
            any = true;
            char q[32];
            long long period = 0;
            if (sscanf(buf, "%31s %lld", q, &period) == 2 && strcmp(q, "max") != 0 && period > 0) {
                long long quota = strtoll(q, NULL, 10);
                double c = quota > 0 ? (double) quota / (double) period : 0;
                if (c > 0 && (best == 0 || c < best))
                    best = c;
            }
        }
        char *slash = strrchr(rel, '/');
        if (!slash)
            break;
        *slash = '\0';
    }
    *cores = best;
    return any;
}

/* cgroup v1: cpu.cfs_quota_us / cpu.cfs_period_us of the cpu controller (-1 = no quota). */
static bool quota_v1(const struct qr_host_roots *r, double *cores)
{
    char rel[PATH_MAX];
    if (!cgroup_path(r->proc, false, rel, sizeof rel))
        return false;
    static const char *const mounts[] = {"cpu,cpuacct", "cpu", "cpuacct,cpu"};
    for (size_t m = 0; m < QR_ARRAY_LEN(mounts); m++) {
        /* In a container the listed path is often the host's; the namespace root holds the
         * files then. */
        const char *rels[] = {rel, ""};
        for (size_t i = 0; i < 2; i++) {
            char path[PATH_MAX * 2];
            int64_t quota, period;
            snprintf(path, sizeof path, "%s/%s%s/cpu.cfs_quota_us", r->cgroup, mounts[m], rels[i]);
            if (!read_i64(path, &quota))
                continue;
            snprintf(path, sizeof path, "%s/%s%s/cpu.cfs_period_us", r->cgroup, mounts[m], rels[i]);
            if (!read_i64(path, &period) || period <= 0)
                continue;
            *cores = quota > 0 ? (double) quota / (double) period : 0;
            return true;
        }
    }
    return false;
}

enum qr_err qr_host_cpu_discover(const struct qr_host_roots *roots, const uint32_t *allowed,
                                 uint32_t n_allowed, struct qr_host_cpu *out, struct qr_diag *diag)
{
    if (!out || (allowed && (n_allowed == 0 || n_allowed > QR_HOST_MAX_CPUS)))
        return qr_diag_set(diag, QR_ERR_INVALID, "host cpu discovery: bad arguments");
    memset(out, 0, sizeof *out);
    struct qr_host_roots r = {
        .sys = roots && roots->sys ? roots->sys : "/sys",
        .proc = roots && roots->proc ? roots->proc : "/proc",
        .cgroup = roots && roots->cgroup ? roots->cgroup : "/sys/fs/cgroup",
    };

    uint32_t *cpus = NULL;
    uint32_t n = 0;
    if (allowed) {
        n = n_allowed;
        cpus = malloc(n * sizeof *cpus);
        if (!cpus)
            return qr_diag_set(diag, QR_ERR_NOMEM, "host cpu discovery: out of memory");
        memcpy(cpus, allowed, n * sizeof *cpus);
    } else {
        cpu_set_t *set = CPU_ALLOC(QR_HOST_MAX_CPUS);
        size_t size = CPU_ALLOC_SIZE(QR_HOST_MAX_CPUS);
        cpus = malloc(QR_HOST_MAX_CPUS * sizeof *cpus);
        if (!set || !cpus) {
            CPU_FREE(set);
            free(cpus);
            return qr_diag_set(diag, QR_ERR_NOMEM, "host cpu discovery: out of memory");
        }
        CPU_ZERO_S(size, set);
        if (sched_getaffinity(0, size, set) == 0)
            for (uint32_t c = 0; c < QR_HOST_MAX_CPUS; c++)
                if (CPU_ISSET_S(c, size, set))
                    cpus[n++] = c;
        CPU_FREE(set);
    }
    out->logical_allowed = n;
    out->physical_allowed = n ? count_cores(r.sys, cpus, n) : 0;
    free(cpus);

    double q = 0;
    if (quota_v2(&r, &q)) {
        out->quota_known = true;
        out->quota_cores = q;
        snprintf(out->quota_source, sizeof out->quota_source, "cgroup v2 cpu.max");
    } else if (quota_v1(&r, &q)) {
        out->quota_known = true;
        out->quota_cores = q;
        snprintf(out->quota_source, sizeof out->quota_source, "cgroup v1 cpu.cfs_quota_us");
    }
    return QR_OK;
}

uint32_t qr_host_default_threads(const struct qr_host_cpu *c, char *why, size_t why_len)
{
    char tmp[160];
    if (!why) {
        why = tmp;
        why_len = sizeof tmp;
    }
    uint32_t t;
    int w;
    if (c->physical_allowed) {
        t = c->physical_allowed;
        w = snprintf(why, why_len, "%" PRIu32 " physical cores allowed (%" PRIu32 " CPUs)", t,
                     c->logical_allowed);
    } else if (c->logical_allowed) {
        t = c->logical_allowed;
        w = snprintf(why, why_len, "%" PRIu32 " CPUs allowed (physical cores unknown)", t);
    } else {
        t = 1;
        w = snprintf(why, why_len, "1 (no CPU facts)");
    }
    if (c->quota_cores > 0) {
        uint32_t up = c->quota_cores < (double) UINT32_MAX ? (uint32_t) c->quota_cores : UINT32_MAX;
        if ((double) up < c->quota_cores)
            up++; /* rounded up: 1.5 cores run 2 threads */
        if (up < t) {
            t = up < 1 ? 1 : up;
            if (w >= 0 && (size_t) w < why_len)
                snprintf(why + w, why_len - (size_t) w, ", capped by %s %.2f cores",
                         c->quota_source, c->quota_cores);
        }
    }
    return t ? t : 1;
}
