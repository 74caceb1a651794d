/* Host profile and host limits (profile.h). */
#include "host/profile.h"

#include <hwloc.h>

#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include <yyjson.h>

#define MAX_FLAGS 512u

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void warn(char (*w)[160], size_t *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void warn(char (*w)[160], size_t *n, const char *fmt, ...)
{
    if (*n >= QR_HOST_MAX_WARNINGS)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w[(*n)++], 160, fmt, ap);
    va_end(ap);
}

static bool read_u64(const char *path, uint64_t *out)
{
    char buf[64];
    if (!qr_host_read_file(path, buf, sizeof buf))
        return false;
    char *end;
    unsigned long long v = strtoull(buf, &end, 10);
    if (end == buf || (*end && !isspace((unsigned char) *end)))
        return false;
    *out = v;
    return true;
}

static int read_int(const char *path, int def)
{
    char buf[32];
    if (!qr_host_read_file(path, buf, sizeof buf))
        return def;
    char *end;
    long v = strtol(buf, &end, 10);
    return end == buf ? def : (int) v;
}

/* Parse "0-3,8" into cpus (cap); the count, or -1 when malformed. */
static int cpu_list_parse(const char *list, uint32_t *cpus, size_t cap)
{
    int n = 0;
    const char *p = list;
    while (*p && isspace((unsigned char) *p))
        p++;
    if (!*p)
        return 0;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char) *p))
            return -1;
        unsigned long a = strtoul(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char) *++p))
                return -1;
            b = strtoul(p, &end, 10);
            p = end;
        }
        if (b < a || b >= QR_HOST_MAX_CPUS)
            return -1;
        for (unsigned long c = a; c <= b; c++) {
            if (cpus && (size_t) n < cap)
                cpus[n] = (uint32_t) c;
            n++;
        }
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p && isspace((unsigned char) *p))
            p++;
        return *p ? -1 : n;
    }
}

int qr_host_cpu_list_count(const char *list)
{
    return cpu_list_parse(list, NULL, 0);
}

/* ---- /proc/cpuinfo ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static void cpuinfo(const char *proc, struct qr_host_profile *p, bool *hypervisor)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/cpuinfo", proc);
    FILE *f = fopen(path, "r");
    if (!f) {
        warn(p->warnings, &p->n_warnings, "cpu: cannot read %.120s", path);
        return;
    }
    size_t cap = 16384;
    char *line = malloc(cap);
    bool have_flags = false;
    while (line && fgets(line, (int) cap, f)) {
        char *colon = strchr(line, ':');
        if (!colon)
            continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        size_t klen = (size_t) (colon - line);
        while (klen && (line[klen - 1] == ' ' || line[klen - 1] == '\t'))
            klen--;
        line[klen] = '\0';
        if (!p->vendor_id[0] && (!strcmp(line, "vendor_id") || !strcmp(line, "CPU implementer")))
            snprintf(p->vendor_id, sizeof p->vendor_id, "%s", v);
        else if (!p->model_name[0] && (!strcmp(line, "model name") || !strcmp(line, "Processor") ||
                                       !strcmp(line, "Hardware")))
            snprintf(p->model_name, sizeof p->model_name, "%s", v);
        else if (!have_flags && (!strcmp(line, "flags") || !strcmp(line, "Features"))) {
            have_flags = true;
            char *toks[MAX_FLAGS];
            size_t n = 0;
            char *save = NULL;
            for (char *t = strtok_r(v, " \t", &save); t && n < MAX_FLAGS;
                 t = strtok_r(NULL, " \t", &save)) {
                for (char *c = t; *c; c++)
                    *c = (char) tolower((unsigned char) *c);
                toks[n++] = t;
                if (!strcmp(t, "hypervisor"))
                    *hypervisor = true;
            }
            qsort(toks, n, sizeof toks[0], cmp_str);
            size_t w = 0;
            for (size_t i = 0; i < n; i++) {
                size_t len = strlen(toks[i]);
                if (w + len + 2 > sizeof p->features)
                    break;
                if (w)
                    p->features[w++] = ' ';
                memcpy(p->features + w, toks[i], len);
                w += len;
            }
            p->features[w] = '\0';
        }
    }
    free(line);
    fclose(f);
}

/* ---- hwloc: packages and caches (the host's, allowed or not) ---- */

static void topology(const struct qr_host_roots *r, struct qr_host_profile *p)
{
    if (strcmp(r->sys, "/sys") != 0 || strcmp(r->proc, "/proc") != 0) {
        /* hwloc reads the real /sys and /proc only */
        snprintf(p->topology_source, sizeof p->topology_source, "none (test roots)");
        return;
    }
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0) {
        warn(p->warnings, &p->n_warnings, "topology: hwloc_topology_init failed");
        return;
    }
    /* the whole host: what this process may use is in the limits */
    (void) hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
    if (hwloc_topology_load(t) != 0) {
        warn(p->warnings, &p->n_warnings, "topology: hwloc_topology_load failed");
        hwloc_topology_destroy(t);
        return;
    }
#ifdef HWLOC_VERSION
    snprintf(p->topology_source, sizeof p->topology_source, "hwloc %s", HWLOC_VERSION);
#else
    unsigned v = hwloc_get_api_version();
    snprintf(p->topology_source, sizeof p->topology_source, "hwloc (API %u.%u.%u)", v >> 16,
             (v >> 8) & 0xff, v & 0xff);
#endif
    int np = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE);
    p->packages = np > 0 ? (uint32_t) np : 0;
    static const hwloc_obj_type_t types[] = {
        HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L1ICACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L2ICACHE,
        HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L3ICACHE, HWLOC_OBJ_L4CACHE, HWLOC_OBJ_L5CACHE};
    for (size_t i = 0; i < sizeof types / sizeof types[0] && p->n_caches < QR_HOST_MAX_CACHES;
         i++) {
        int n = hwloc_get_nbobjs_by_type(t, types[i]);
        hwloc_obj_t o = n > 0 ? hwloc_get_obj_by_type(t, types[i], 0) : NULL;
        if (!o || !o->attr)
            continue;
        struct qr_host_cache *c = &p->caches[p->n_caches++];
        c->level = o->attr->cache.depth;
        snprintf(c->type, sizeof c->type, "%s",
                 o->attr->cache.type == HWLOC_OBJ_CACHE_DATA          ? "data"
                 : o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION ? "instruction"
                                                                      : "unified");
        c->size_bytes = o->attr->cache.size;
        c->instances = (uint32_t) n;
        c->line_bytes = o->attr->cache.linesize > 0 ? (uint32_t) o->attr->cache.linesize : 0;
        int w = o->cpuset ? hwloc_bitmap_weight(o->cpuset) : 0;
        c->pus_per_instance = w > 0 ? (uint32_t) w : 0;
    }
    hwloc_topology_destroy(t);
}

/* ---- /proc/meminfo ---- */

static void meminfo(const char *proc, struct qr_host_profile *p)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/meminfo", proc);
    FILE *f = fopen(path, "r");
    if (!f) {
        warn(p->warnings, &p->n_warnings, "memory: cannot read %.120s", path);
        return;
    }
    char line[256];
    uint64_t avail = 0, free_ = 0, buffers = 0, cached = 0;
    bool have_avail = false;
    while (fgets(line, sizeof line, f)) {
        char key[64];
        unsigned long long v;
        if (sscanf(line, "%63[^:]: %llu", key, &v) != 2)
            continue;
        uint64_t kb = (uint64_t) v * 1024u;
        if (!strcmp(key, "MemTotal"))
            p->memory_total = kb;
        else if (!strcmp(key, "MemAvailable")) {
            avail = kb;
            have_avail = true;
        } else if (!strcmp(key, "MemFree"))
            free_ = kb;
        else if (!strcmp(key, "Buffers"))
            buffers = kb;
        else if (!strcmp(key, "Cached"))
            cached = kb;
        else if (!strcmp(key, "Hugepagesize"))
            p->huge_page_size = kb;
        else if (!strcmp(key, "HugePages_Total"))
            p->huge_pages_total = v;
        else if (!strcmp(key, "HugePages_Free"))
            p->huge_pages_free = v;
    }
    fclose(f);
    p->memory_available = have_avail ? avail : free_ + buffers + cached;
    if (p->memory_total && p->memory_available > p->memory_total)
        p->memory_available = p->memory_total;
}

/* ---- NUMA, block devices, accelerators ---- */

static bool numbered(const char *name, const char *prefix, int *out)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) || !name[n])
        return false;
    for (const char *c = name + n; *c; c++)
        if (!isdigit((unsigned char) *c))
            return false;
    *out = atoi(name + n);
    return true;
}

static void numa(const char *sys, struct qr_host_profile *p)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/devices/system/node", sys);
    DIR *d = opendir(dir);
    if (!d)
        return; /* no NUMA information: a kernel without it, not an error */
    struct dirent *e;
    while ((e = readdir(d)) && p->n_numa < QR_HOST_MAX_NUMA) {
        int id;
        if (!numbered(e->d_name, "node", &id))
            continue;
        struct qr_host_numa_node *n = &p->numa[p->n_numa++];
        n->id = id;
        char path[PATH_MAX + 320];
        snprintf(path, sizeof path, "%s/%s/cpulist", dir, e->d_name);
        qr_host_read_file(path, n->cpu_list, sizeof n->cpu_list);
        snprintf(path, sizeof path, "%s/%s/meminfo", dir, e->d_name);
        FILE *f = fopen(path, "r");
        char line[256];
        while (f && fgets(line, sizeof line, f)) {
            int nid;
            char key[64];
            unsigned long long kb;
            if (sscanf(line, "Node %d %63[^:]: %llu", &nid, key, &kb) != 3)
                continue;
            if (!strcmp(key, "MemTotal"))
                n->memory_bytes = (uint64_t) kb * 1024u;
            else if (!strcmp(key, "MemFree"))
                n->free_bytes = (uint64_t) kb * 1024u;
        }
        if (f)
            fclose(f);
    }
    closedir(d);
    /* readdir order is not sorted */
    for (size_t i = 1; i < p->n_numa; i++)
        for (size_t k = i; k > 0 && p->numa[k - 1].id > p->numa[k].id; k--) {
            struct qr_host_numa_node t = p->numa[k];
            p->numa[k] = p->numa[k - 1];
            p->numa[k - 1] = t;
        }
}

static void storage(const char *sys, struct qr_host_profile *p)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/block", sys);
    DIR *d = opendir(dir);
    if (!d) {
        warn(p->warnings, &p->n_warnings, "storage: cannot read %.120s", dir);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)) && p->n_storage < QR_HOST_MAX_STORAGE) {
        const char *n = e->d_name;
        if (n[0] == '.' || !strncmp(n, "loop", 4) || !strncmp(n, "ram", 3) ||
            !strncmp(n, "fd", 2) || !strncmp(n, "zram", 4))
            continue;
        struct qr_host_storage *s = &p->storage[p->n_storage++];
        snprintf(s->device, sizeof s->device, "%.63s", n);
        s->nvme = !strncmp(n, "nvme", 4);
        char path[PATH_MAX + 320];
        uint64_t sectors = 0, rot = 0;
        snprintf(path, sizeof path, "%s/%s/size", dir, n);
        if (read_u64(path, &sectors))
            s->size_bytes = sectors * 512u;
        snprintf(path, sizeof path, "%s/%s/queue/rotational", dir, n);
        s->rotational = read_u64(path, &rot) && rot == 1;
        snprintf(path, sizeof path, "%s/%s/device/numa_node", dir, n);
        s->numa_node = read_int(path, -1);
        if (s->numa_node < 0)
            s->numa_node = -1;
    }
    closedir(d);
    for (size_t i = 1; i < p->n_storage; i++)
        for (size_t k = i; k > 0 && strcmp(p->storage[k - 1].device, p->storage[k].device) > 0;
             k--) {
            struct qr_host_storage t = p->storage[k];
            p->storage[k] = p->storage[k - 1];
            p->storage[k - 1] = t;
        }
}

static void accelerators(const char *sys, struct qr_host_profile *p)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/class/drm", sys);
    DIR *d = opendir(dir);
    if (!d)
        return; /* no DRM devices: no accelerator visible, which is fine */
    struct dirent *e;
    char seen[QR_HOST_MAX_ACCEL][PATH_MAX];
    size_t n_seen = 0;
    while ((e = readdir(d)) && p->n_accel < QR_HOST_MAX_ACCEL) {
        int id;
        if (!numbered(e->d_name, "card", &id))
            continue; /* connectors are card0-HDMI-A-1 and the like */
        char path[PATH_MAX + 320], real[PATH_MAX], vendor[32];
        snprintf(path, sizeof path, "%s/%s/device", dir, e->d_name);
        if (!realpath(path, real))
            continue;
        bool dup = false;
        for (size_t i = 0; i < n_seen && !dup; i++)
            dup = !strcmp(seen[i], real);
        if (dup)
            continue;
        snprintf(seen[n_seen++], PATH_MAX, "%s", real);
        snprintf(path, sizeof path, "%s/%s/device/vendor", dir, e->d_name);
        if (!qr_host_read_file(path, vendor, sizeof vendor))
            continue;
        const char *v = !strcmp(vendor, "0x1002")   ? "AMD"
                        : !strcmp(vendor, "0x10de") ? "NVIDIA"
                        : !strcmp(vendor, "0x8086") ? "Intel"
                                                    : NULL;
        if (!v)
            continue;
        struct qr_host_accel *a = &p->accel[p->n_accel++];
        snprintf(a->vendor, sizeof a->vendor, "%s", v);
        snprintf(a->device, sizeof a->device, "%.31s", e->d_name);
        snprintf(path, sizeof path, "%s/%s/device/mem_info_vram_total", dir, e->d_name);
        read_u64(path, &a->vram_bytes);
        snprintf(path, sizeof path, "%s/%s/device/numa_node", dir, e->d_name);
        a->numa_node = read_int(path, -1);
        if (a->numa_node < 0)
            a->numa_node = -1;
    }
    closedir(d);
}

/* ---- limits ---- */

static void virtualization(const char *sys, bool hypervisor_flag, struct qr_host_limits *l)
{
    static const struct {
        const char *needle, *kind;
    } kinds[] = {{"kvm", "kvm"},
                 {"qemu", "kvm"},
                 {"vmware", "vmware"},
                 {"virtualbox", "virtualbox"},
                 {"microsoft", "hyper-v"},
                 {"hyper-v", "hyper-v"},
                 {"virtual machine", "hyper-v"},
                 {"xen", "xen"}};
    static const struct {
        const char *file, *label;
    } files[] = {{"class/dmi/id/product_name", "dmi product"},
                 {"class/dmi/id/sys_vendor", "dmi vendor"},
                 {"hypervisor/type", "hypervisor"}};
    for (size_t f = 0; f < QR_ARRAY_LEN(files); f++) {
        char path[PATH_MAX], v[128], low[128];
        snprintf(path, sizeof path, "%s/%s", sys, files[f].file);
        if (!qr_host_read_file(path, v, sizeof v))
            continue;
        size_t i = 0;
        for (; v[i] && i + 1 < sizeof low; i++)
            low[i] = (char) tolower((unsigned char) v[i]);
        low[i] = '\0';
        for (size_t k = 0; k < QR_ARRAY_LEN(kinds); k++) {
            if (strstr(low, kinds[k].needle)) {
                l->guest = true;
                snprintf(l->virtualization, sizeof l->virtualization, "%s", kinds[k].kind);
                snprintf(l->virtualization_evidence, sizeof l->virtualization_evidence, "%s: %s",
                         files[f].label, v);
                return;
            }
        }
    }
    if (hypervisor_flag) {
        l->guest = true;
        snprintf(l->virtualization, sizeof l->virtualization, "unknown-hypervisor");
        snprintf(l->virtualization_evidence, sizeof l->virtualization_evidence,
                 "cpuinfo: hypervisor flag");
        return;
    }
    snprintf(l->virtualization, sizeof l->virtualization, "bare-metal-or-undetected");
}

/* The process's cgroup v2 path ("0::/x" in /proc/self/cgroup), "" for the root. */
static void cgroup2_path(const char *proc, char *out, size_t cap)
{
    char path[PATH_MAX], buf[4096];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/self/cgroup", proc);
    if (!qr_host_read_file(path, buf, sizeof buf))
        return;
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "0::", 3)) {
            snprintf(out, cap, "%s", strcmp(line + 3, "/") ? line + 3 : "");
            return;
        }
    }
}

/* This process's cgroup v1 path of a controller ("" at the root or when there is none). */
static void cgroup1_path(const char *proc, const char *controller, char *out, size_t cap)
{
    char path[PATH_MAX], buf[4096];
    out[0] = '\0';
    snprintf(path, sizeof path, "%s/self/cgroup", proc);
    if (!qr_host_read_file(path, buf, sizeof buf))
        return;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0'; /* a + 1: the controller list, "memory" or "cpu,cpuacct" */
        char *csave = NULL;
        for (char *c = strtok_r(a + 1, ",", &csave); c; c = strtok_r(NULL, ",", &csave)) {
            if (!strcmp(c, controller)) {
                snprintf(out, cap, "%s", strcmp(b + 1, "/") ? b + 1 : "");
                return;
            }
        }
    }
}

/* The smallest memory limit on the way from dir (relative, "" = root) up to the root of a
 * hierarchy: file under base + each ancestor; "max" and huge values are none. 0 = none. */
static uint64_t memory_limit_up(const char *base, const char *dir, const char *file)
{
    char rel[PATH_MAX], path[PATH_MAX * 2];
    snprintf(rel, sizeof rel, "%s", dir);
    uint64_t best = 0;
    for (;;) {
        uint64_t v;
        snprintf(path, sizeof path, "%s%s/%s", base, rel, file);
        if (read_u64(path, &v) && v < (UINT64_C(1) << 62) && (!best || v < best))
            best = v;
        char *slash = strrchr(rel, '/');
        if (!rel[0])
            break;
        if (slash)
            *slash = '\0';
        else
            rel[0] = '\0';
    }
    return best;
}

static void limits(const struct qr_host_roots *r, bool hypervisor, const struct qr_host_profile *p,
                   struct qr_host_limits *l)
{
    char path[PATH_MAX * 2], buf[4096], cg[PATH_MAX];
    /* affinity: Cpus_allowed_list of /proc/self/status */
    snprintf(path, sizeof path, "%s/self/status", r->proc);
    if (qr_host_read_file(path, buf, sizeof buf)) {
        char *s = strstr(buf, "Cpus_allowed_list:");
        if (s) {
            s += strlen("Cpus_allowed_list:");
            while (*s == ' ' || *s == '\t')
                s++;
            size_t len = strcspn(s, "\n");
            snprintf(l->affinity_cpu_list, sizeof l->affinity_cpu_list, "%.*s", (int) len, s);
        }
    }
    int aff = l->affinity_cpu_list[0] ? qr_host_cpu_list_count(l->affinity_cpu_list) : -1;
    if (aff > 0)
        l->affinity_logical_cpus = (uint32_t) aff;
    else
        warn(l->warnings, &l->n_warnings, "cpu: no affinity list in %.120s", path);
    /* cpuset: this cgroup's effective set, else the root's, else cgroup v1 */
    cgroup2_path(r->proc, cg, sizeof cg);
    const struct {
        const char *dir, *file;
    } tries[] = {{cg, "cpuset.cpus.effective"},
                 {cg, "cpuset.cpus"},
                 {"", "cpuset.cpus.effective"},
                 {"/cpuset", "cpuset.cpus"}};
    for (size_t i = 0; i < QR_ARRAY_LEN(tries) && !l->cgroup_cpuset[0]; i++) {
        snprintf(path, sizeof path, "%s%s/%s", r->cgroup, tries[i].dir, tries[i].file);
        qr_host_read_file(path, l->cgroup_cpuset, sizeof l->cgroup_cpuset);
    }
    int cs = l->cgroup_cpuset[0] ? qr_host_cpu_list_count(l->cgroup_cpuset) : -1;
    if (cs > 0)
        l->cgroup_cpuset_logical_cpus = (uint32_t) cs;
    else if (l->cgroup_cpuset[0])
        warn(l->warnings, &l->n_warnings, "cpu: malformed cpuset '%.120s'", l->cgroup_cpuset);
    /* physical cores behind the allowed CPUs, and the quota (host/cpu.c) */
    uint32_t *cpus = aff > 0 ? calloc((size_t) aff, sizeof *cpus) : NULL;
    struct qr_host_cpu c = {0};
    if (cpus && cpu_list_parse(l->affinity_cpu_list, cpus, (size_t) aff) == aff)
        qr_host_cpu_discover(r, cpus, (uint32_t) aff, &c, NULL);
    else
        qr_host_cpu_discover(r, NULL, 0, &c, NULL);
    free(cpus);
    l->physical_cores_allowed = c.physical_allowed;
    l->cpu_quota_cores = c.quota_cores;
    snprintf(l->cpu_quota_source, sizeof l->cpu_quota_source, "%s", c.quota_source);
    /* effective: the smallest of what is known, the quota rounded up, at least 1 */
    uint32_t eff = p->logical_cores ? p->logical_cores : UINT32_MAX;
    if (l->affinity_logical_cpus && l->affinity_logical_cpus < eff)
        eff = l->affinity_logical_cpus;
    if (l->cgroup_cpuset_logical_cpus && l->cgroup_cpuset_logical_cpus < eff)
        eff = l->cgroup_cpuset_logical_cpus;
    if (c.quota_cores > 0) {
        uint32_t q = (uint32_t) c.quota_cores;
        if ((double) q < c.quota_cores)
            q++;
        if (q < eff)
            eff = q;
    }
    l->effective_logical_cpus = eff == UINT32_MAX || eff == 0 ? 1 : eff;
    /* memory limit: the smallest cgroup v2 memory.max from this process's group up, else the
     * smallest v1 memory.limit_in_bytes from its memory group up ("max", huge = none) */
    uint64_t mem = memory_limit_up(r->cgroup, cg, "memory.max");
    if (!mem) {
        char v1[PATH_MAX], base[PATH_MAX];
        cgroup1_path(r->proc, "memory", v1, sizeof v1);
        snprintf(base, sizeof base, "%s/memory", r->cgroup);
        mem = memory_limit_up(base, v1, "memory.limit_in_bytes");
    }
    l->memory_max_bytes = mem;
    virtualization(r->sys, hypervisor, l);
}

void qr_host_discover(const struct qr_host_roots *roots, struct qr_host_profile *p,
                      struct qr_host_limits *l)
{
    struct qr_host_roots r = {
        .sys = roots && roots->sys ? roots->sys : "/sys",
        .proc = roots && roots->proc ? roots->proc : "/proc",
        .cgroup = roots && roots->cgroup ? roots->cgroup : "/sys/fs/cgroup",
    };
    memset(p, 0, sizeof *p);
    memset(l, 0, sizeof *l);
    p->collected_at_ms = l->collected_at_ms = wall_ms();
    struct utsname u;
    if (uname(&u) == 0) {
        snprintf(p->os, sizeof p->os, "%.15s", !strcmp(u.sysname, "Linux") ? "linux" : u.sysname);
        snprintf(p->arch, sizeof p->arch, "%.31s", u.machine);
    }
    bool hypervisor = false;
    cpuinfo(r.proc, p, &hypervisor);
    /* the host's online CPUs and the physical cores behind them */
    char path[PATH_MAX], online[1024];
    snprintf(path, sizeof path, "%s/devices/system/cpu/online", r.sys);
    int n_online =
        qr_host_read_file(path, online, sizeof online) ? qr_host_cpu_list_count(online) : -1;
    if (n_online > 0) {
        p->logical_cores = (uint32_t) n_online;
        uint32_t *cpus = calloc((size_t) n_online, sizeof *cpus);
        struct qr_host_cpu c = {0};
        if (cpus && cpu_list_parse(online, cpus, (size_t) n_online) == n_online)
            qr_host_cpu_discover(&r, cpus, (uint32_t) n_online, &c, NULL);
        free(cpus);
        p->physical_cores = c.physical_allowed;
    } else {
        warn(p->warnings, &p->n_warnings, "cpu: cannot read %.120s", path);
    }
    if (!p->physical_cores && p->logical_cores) {
        p->physical_cores = p->logical_cores;
        warn(p->warnings, &p->n_warnings, "cpu: no topology: physical cores = logical");
    }
    p->threads_per_core =
        p->physical_cores ? (p->logical_cores + p->physical_cores - 1) / p->physical_cores : 1;
    if (!p->threads_per_core)
        p->threads_per_core = 1;
    topology(&r, p);
    meminfo(r.proc, p);
    numa(r.sys, p);
    storage(r.sys, p);
    accelerators(r.sys, p);
    limits(&r, hypervisor, p, l);
}

/* ---- JSON ---- */

static bool add_time(yyjson_mut_doc *doc, yyjson_mut_val *o, const char *key, int64_t ms)
{
    time_t s = (time_t) (ms / 1000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char t[40];
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return yyjson_mut_obj_add_strcpy(doc, o, key, t);
}

static bool add_warnings(yyjson_mut_doc *doc, yyjson_mut_val *o, char (*w)[160], size_t n)
{
    if (!n)
        return true;
    yyjson_mut_val *a = yyjson_mut_obj_add_arr(doc, o, "warnings");
    for (size_t i = 0; a && i < n; i++)
        if (!yyjson_mut_arr_add_strcpy(doc, a, w[i]))
            return false;
    return a != NULL;
}

enum qr_err qr_host_profile_json(const struct qr_host_profile *p, yyjson_mut_doc *doc,
                                 yyjson_mut_val *obj)
{
    bool ok = yyjson_mut_obj_add_str(doc, obj, "schema_version", QR_HOST_PROFILE_SCHEMA) &&
              add_time(doc, obj, "collected_at", p->collected_at_ms) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "os", p->os) &&
              yyjson_mut_obj_add_strcpy(doc, obj, "arch", p->arch);
    yyjson_mut_val *cpu = ok ? yyjson_mut_obj_add_obj(doc, obj, "cpu") : NULL;
    ok = cpu != NULL;
    if (ok && p->vendor_id[0])
        ok = yyjson_mut_obj_add_strcpy(doc, cpu, "vendor_id", p->vendor_id);
    if (ok && p->model_name[0])
        ok = yyjson_mut_obj_add_strcpy(doc, cpu, "model_name", p->model_name);
    ok = ok && yyjson_mut_obj_add_uint(doc, cpu, "physical_cores", p->physical_cores) &&
         yyjson_mut_obj_add_uint(doc, cpu, "logical_cores", p->logical_cores) &&
         yyjson_mut_obj_add_uint(doc, cpu, "threads_per_core", p->threads_per_core) &&
         yyjson_mut_obj_add_uint(doc, cpu, "packages", p->packages) &&
         yyjson_mut_obj_add_strcpy(doc, cpu, "topology_source", p->topology_source);
    yyjson_mut_val *ca = ok ? yyjson_mut_obj_add_arr(doc, cpu, "caches") : NULL;
    ok = ok && ca;
    for (size_t i = 0; ok && i < p->n_caches; i++) {
        const struct qr_host_cache *c = &p->caches[i];
        yyjson_mut_val *co = yyjson_mut_arr_add_obj(doc, ca);
        ok = co && yyjson_mut_obj_add_uint(doc, co, "level", c->level) &&
             yyjson_mut_obj_add_strcpy(doc, co, "type", c->type) &&
             yyjson_mut_obj_add_uint(doc, co, "size_bytes", c->size_bytes) &&
             yyjson_mut_obj_add_uint(doc, co, "instances", c->instances) &&
             yyjson_mut_obj_add_uint(doc, co, "total_bytes", c->size_bytes * c->instances) &&
             yyjson_mut_obj_add_uint(doc, co, "line_bytes", c->line_bytes) &&
             yyjson_mut_obj_add_uint(doc, co, "logical_cpus_per_instance", c->pus_per_instance);
    }
    if (ok && p->features[0]) {
        yyjson_mut_val *fa = yyjson_mut_obj_add_arr(doc, cpu, "features");
        char tmp[sizeof p->features];
        snprintf(tmp, sizeof tmp, "%s", p->features);
        char *save = NULL;
        for (char *t = strtok_r(tmp, " ", &save); ok && fa && t; t = strtok_r(NULL, " ", &save))
            ok = yyjson_mut_arr_add_strcpy(doc, fa, t);
        ok = ok && fa;
    }
    yyjson_mut_val *nu = ok ? yyjson_mut_obj_add_obj(doc, obj, "numa") : NULL;
    ok = nu && yyjson_mut_obj_add_uint(doc, nu, "count", p->n_numa);
    if (ok && p->n_numa) {
        yyjson_mut_val *na = yyjson_mut_obj_add_arr(doc, nu, "nodes");
        for (size_t i = 0; ok && na && i < p->n_numa; i++) {
            yyjson_mut_val *n = yyjson_mut_arr_add_obj(doc, na);
            ok = n && yyjson_mut_obj_add_int(doc, n, "id", p->numa[i].id) &&
                 yyjson_mut_obj_add_strcpy(doc, n, "cpu_list", p->numa[i].cpu_list) &&
                 yyjson_mut_obj_add_uint(doc, n, "memory_bytes", p->numa[i].memory_bytes) &&
                 yyjson_mut_obj_add_uint(doc, n, "free_bytes", p->numa[i].free_bytes);
        }
        ok = ok && na;
    }
    yyjson_mut_val *m = ok ? yyjson_mut_obj_add_obj(doc, obj, "memory") : NULL;
    ok = m && yyjson_mut_obj_add_uint(doc, m, "total_bytes", p->memory_total) &&
         yyjson_mut_obj_add_uint(doc, m, "available_bytes", p->memory_available);
    if (ok && p->huge_page_size)
        ok = yyjson_mut_obj_add_uint(doc, m, "huge_page_size_bytes", p->huge_page_size) &&
             yyjson_mut_obj_add_uint(doc, m, "huge_pages_total", p->huge_pages_total) &&
             yyjson_mut_obj_add_uint(doc, m, "huge_pages_free", p->huge_pages_free);
    yyjson_mut_val *st = ok ? yyjson_mut_obj_add_arr(doc, obj, "storage") : NULL;
    ok = st != NULL;
    for (size_t i = 0; ok && i < p->n_storage; i++) {
        const struct qr_host_storage *s = &p->storage[i];
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, st);
        ok = o && yyjson_mut_obj_add_strcpy(doc, o, "device", s->device) &&
             yyjson_mut_obj_add_str(doc, o, "kind", s->nvme ? "nvme" : "block") &&
             (!s->size_bytes || yyjson_mut_obj_add_uint(doc, o, "size_bytes", s->size_bytes)) &&
             yyjson_mut_obj_add_bool(doc, o, "rotational", s->rotational) &&
             (s->numa_node < 0 || yyjson_mut_obj_add_int(doc, o, "numa_node", s->numa_node));
    }
    yyjson_mut_val *ac = ok ? yyjson_mut_obj_add_arr(doc, obj, "accelerators") : NULL;
    ok = ac != NULL;
    for (size_t i = 0; ok && i < p->n_accel; i++) {
        const struct qr_host_accel *a = &p->accel[i];
        yyjson_mut_val *o = yyjson_mut_arr_add_obj(doc, ac);
        ok = o && yyjson_mut_obj_add_str(doc, o, "kind", "gpu") &&
             yyjson_mut_obj_add_strcpy(doc, o, "vendor", a->vendor) &&
             yyjson_mut_obj_add_strcpy(doc, o, "device", a->device) &&
             (!a->vram_bytes || yyjson_mut_obj_add_uint(doc, o, "vram_bytes", a->vram_bytes)) &&
             (a->numa_node < 0 || yyjson_mut_obj_add_int(doc, o, "numa_node", a->numa_node));
    }
    ok = ok && add_warnings(doc, obj, (char(*)[160]) p->warnings, p->n_warnings);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

enum qr_err qr_host_limits_json(const struct qr_host_limits *l, yyjson_mut_doc *doc,
                                yyjson_mut_val *obj)
{
    bool ok =
        yyjson_mut_obj_add_str(doc, obj, "schema_version", QR_HOST_LIMITS_SCHEMA) &&
        add_time(doc, obj, "collected_at", l->collected_at_ms) &&
        yyjson_mut_obj_add_uint(doc, obj, "effective_logical_cpus", l->effective_logical_cpus);
    if (ok && l->physical_cores_allowed)
        ok = yyjson_mut_obj_add_uint(doc, obj, "physical_cores_allowed", l->physical_cores_allowed);
    if (ok && l->affinity_cpu_list[0])
        ok = yyjson_mut_obj_add_strcpy(doc, obj, "affinity_cpu_list", l->affinity_cpu_list) &&
             yyjson_mut_obj_add_uint(doc, obj, "affinity_logical_cpus", l->affinity_logical_cpus);
    if (ok && l->cgroup_cpuset[0])
        ok = yyjson_mut_obj_add_strcpy(doc, obj, "cgroup_cpuset", l->cgroup_cpuset) &&
             yyjson_mut_obj_add_uint(doc, obj, "cgroup_cpuset_logical_cpus",
                                     l->cgroup_cpuset_logical_cpus);
    if (ok && l->cpu_quota_cores > 0)
        ok = yyjson_mut_obj_add_real(doc, obj, "cpu_quota_cores", l->cpu_quota_cores) &&
             yyjson_mut_obj_add_strcpy(doc, obj, "cpu_quota_source", l->cpu_quota_source);
    if (ok && l->memory_max_bytes)
        ok = yyjson_mut_obj_add_uint(doc, obj, "memory_max_bytes", l->memory_max_bytes);
    yyjson_mut_val *v = ok ? yyjson_mut_obj_add_obj(doc, obj, "virtualization") : NULL;
    ok = v && yyjson_mut_obj_add_bool(doc, v, "guest", l->guest) &&
         yyjson_mut_obj_add_strcpy(doc, v, "kind", l->virtualization);
    if (ok && l->virtualization_evidence[0])
        ok = yyjson_mut_obj_add_strcpy(doc, v, "evidence", l->virtualization_evidence);
    ok = ok && add_warnings(doc, obj, (char(*)[160]) l->warnings, l->n_warnings);
    return ok ? QR_OK : QR_ERR_NOMEM;
}

yyjson_mut_doc *qr_host_document(const struct qr_host_roots *roots, const char *api_version)
{
    struct qr_host_profile *p = malloc(sizeof *p);
    struct qr_host_limits *l = malloc(sizeof *l);
    yyjson_mut_doc *doc = p && l ? yyjson_mut_doc_new(NULL) : NULL;
    yyjson_mut_val *root = doc ? yyjson_mut_obj(doc) : NULL;
    bool ok = root != NULL;
    if (ok) {
        qr_host_discover(roots, p, l);
        yyjson_mut_doc_set_root(doc, root);
        yyjson_mut_val *h = NULL, *lim = NULL;
        ok = yyjson_mut_obj_add_strcpy(doc, root, "api_version", api_version) &&
             yyjson_mut_obj_add_str(doc, root, "host_schema", QR_HOST_PROFILE_SCHEMA) &&
             yyjson_mut_obj_add_str(doc, root, "limits_schema", QR_HOST_LIMITS_SCHEMA) &&
             yyjson_mut_obj_add_str(doc, root, "calibration_schema", QR_HOST_CALIBRATION_SCHEMA) &&
             (h = yyjson_mut_obj_add_obj(doc, root, "host")) != NULL &&
             qr_host_profile_json(p, doc, h) == QR_OK &&
             (lim = yyjson_mut_obj_add_obj(doc, root, "limits")) != NULL &&
             qr_host_limits_json(l, doc, lim) == QR_OK &&
             yyjson_mut_obj_add_bool(doc, root, "calibrated", false) &&
             yyjson_mut_obj_add_null(doc, root, "last_calibration");
    }
    free(p);
    free(l);
    if (!ok) {
        yyjson_mut_doc_free(doc);
        return NULL;
    }
    return doc;
}
