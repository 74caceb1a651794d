/* `quantum-runtime plan --model NAME|FILE [--ctx N] [--parallel N] [--prefer auto|cpu|hybrid|gpu]
 * [--allow-acceleration] [--allow-nvme-cold-tier] [--kv-type T] [--threads N]
 * [--reserve-ram-bytes N] [--json]`: the
 * placement plan (placement/placement.h) for a model on this host, without running anything -
 * the same document POST /v1/placement answers. A FILE is a GGUF path; a NAME is resolved in the
 * registry the configuration describes (models_dir, registry_dirs; environment and --config).
 * Exit 0 when the plan fits, 3 when it is refused (the plan with its numbers is still printed),
 * 2 on a usage or configuration error, 1 when the file cannot be read. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <yyjson.h>

#include "api/catalog.h"
#include "core/config.h"
#include "core/log.h"
#include "placement/placement.h"
#include "policy/ledger.h"
#include "router/router.h" /* QR_ROUTE_API_VERSION */

int qr_cli_plan(int argc, char **argv); /* the CLI table in main.c */

extern char **environ;

#define EXIT_REFUSED 3

static const char USAGE[] =
    "usage: quantum-runtime plan --model NAME|FILE [--ctx N] [--parallel N]"
    " [--prefer auto|cpu|hybrid|gpu] [--allow-acceleration] [--allow-nvme-cold-tier]"
    " [--kv-type T] [--threads N] [--reserve-ram-bytes N] [--config FILE] [--json]\n";

static bool opt_u64(int argc, char **argv, int *i, uint64_t max, uint64_t *out)
{
    const char *name = argv[*i], *v = *i + 1 < argc ? argv[++*i] : "";
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (!*v || *end || errno || v[0] == '-' || v[0] == '+' || !x || x > max) {
        fprintf(stderr, "quantum-runtime plan: %s wants an integer from 1 to %llu, got '%s'\n",
                name, (unsigned long long) max, v);
        return false;
    }
    *out = (uint64_t) x;
    return true;
}

struct opts {
    const char *model, *config;
    bool json;
    int accel; /* -1 not given */
    struct qr_placement_query q;
};

/* One option at argv[*i]: false (message printed) when unknown or malformed. */
static bool opt(int argc, char **argv, int *i, struct opts *o)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    uint64_t u = 0;
    if (!strcmp(a, "--json"))
        o->json = true;
    else if (!strcmp(a, "--allow-acceleration"))
        o->accel = 1;
    else if (!strcmp(a, "--allow-nvme-cold-tier"))
        o->q.req.allow_nvme_cold_tier = true;
    else if (!strcmp(a, "--ctx"))
        return opt_u64(argc, argv, i, 1ull << 24, &o->q.n_ctx);
    else if (!strcmp(a, "--reserve-ram-bytes"))
        return opt_u64(argc, argv, i, UINT64_MAX / 4, &o->q.req.reserve_ram_bytes);
    else if (!strcmp(a, "--parallel"))
        return opt_u64(argc, argv, i, 256, &o->q.n_seq);
    else if (!strcmp(a, "--threads") && opt_u64(argc, argv, i, 4096, &u))
        o->q.req.threads = (uint32_t) u;
    else if (!strcmp(a, "--threads"))
        return false;
    else if ((!strcmp(a, "--model") || !strcmp(a, "--config")) && v)
        *(a[2] == 'm' ? &o->model : &o->config) = argv[++*i];
    else if (!strcmp(a, "--prefer") && v && qr_placement_prefer_parse(v, &o->q.req.prefer))
        ++*i;
    else if (!strcmp(a, "--kv-type") && v && qr_placement_kv_type_parse(v, &o->q.req.kv_type))
        ++*i;
    else {
        fprintf(stderr, "quantum-runtime plan: bad argument '%s'%s%s%s\n", a, v ? " '" : "",
                v ? v : "", v ? "'" : "");
        return false;
    }
    return true;
}

/* --model as a path when such a file exists, else a registry name. */
static int resolve(struct opts *o, char *path, size_t cap)
{
    struct stat st;
    if (stat(o->model, &st) == 0 && S_ISREG(st.st_mode)) {
        o->q.path = o->model;
        return 0;
    }
    char *cargv[] = {"--config", (char *) o->config, NULL};
    struct qr_config cfg;
    struct qr_diag d = {{0}};
    if (qr_config_load(&cfg, o->config ? 2 : 0, cargv, environ, &d)) {
        fprintf(stderr, "quantum-runtime plan: invalid configuration: %s\n", d.msg);
        return 2;
    }
    struct qr_catalog *cat = NULL;
    int rc = 0;
    /* the log writes to stdout: keep the catalog's info/warn lines out of the plan (--json) */
    qr_log_setup(QR_LOG_ERROR, QR_LOG_JSON);
    if (qr_catalog_load(&cfg, NULL, &cat)) {
        fprintf(stderr, "quantum-runtime plan: out of memory\n");
        rc = 1;
    } else if (qr_placement_resolve_model(cat->registry, cfg.models_dir, o->model, path, cap, &d)) {
        fprintf(stderr, "quantum-runtime plan: %s\n", d.msg);
        rc = 1;
    } else {
        o->q.model = o->model;
        o->q.path = path;
    }
    qr_catalog_free(cat);
    qr_config_cleanup(&cfg);
    return rc;
}

static void print_lines(yyjson_val *plan, const char *key, const char *title)
{
    yyjson_val *a = yyjson_obj_get(plan, key), *x;
    size_t i, max;
    if (!yyjson_arr_size(a))
        return;
    printf("%s:\n", title);
    yyjson_arr_foreach(a, i, max, x) printf("  - %s\n", yyjson_is_str(x) ? yyjson_get_str(x) : "");
}

/* A string member, "" when absent. */
static const char *str_of(yyjson_val *o, const char *k)
{
    const char *s = yyjson_get_str(yyjson_obj_get(o, k));
    return s ? s : "";
}

/* A byte count member as "12.50 GiB" / "3.2 MiB" / "512 B" (B(x).s lives for one printf). */
struct human {
    char s[24];
};

static struct human B(yyjson_val *o, const char *k) {
    struct human h;
    double b = (double) yyjson_get_uint(yyjson_obj_get(o, k));
    if (b >= 1024.0 * 1024.0 * 1024.0)
        snprintf(h.s, sizeof h.s, "%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
    else if (b >= 1024.0 * 1024.0)
        snprintf(h.s, sizeof h.s, "%.1f MiB", b / (1024.0 * 1024.0));
    else if (b >= 1024.0)
        snprintf(h.s, sizeof h.s, "%.1f KiB", b / 1024.0);
    else
        snprintf(h.s, sizeof h.s, "%.0f B", b);
    return h;
}

/* Text form: the decision, the numbers, where each class goes, the engine arguments, why. */
static void
print_text(yyjson_val *root)
{
    yyjson_val *p = yyjson_obj_get(root, "plan"), *x;
    yyjson_val *mem = yyjson_obj_get(p, "memory"), *ram = yyjson_obj_get(p, "ram");
    yyjson_val *vram = yyjson_obj_get(p, "vram"), *th = yyjson_obj_get(p, "threads");
    size_t i, max;
    printf("model: %s\n", str_of(yyjson_obj_get(root, "model"), "path"));
    printf("decision: %s (%s)\n", str_of(p, "decision"), str_of(p, "strategy"));
    printf("reason: %s\n", str_of(p, "reason"));
    printf("memory: weights %s, kv %s (%s), compute %s, engine %s, "
           "total %s\n",
           B(mem, "weights_bytes").s, B(mem, "kv_bytes").s, str_of(mem, "kv_type"),
           B(mem, "compute_bytes").s, B(mem, "engine_overhead_bytes").s, B(mem, "total_bytes").s);
    printf("ram: %s assigned of %s usable (available %s, reserve %s)\n", B(ram, "assigned_bytes").s,
           B(ram, "usable_bytes").s, B(ram, "available_bytes").s, B(ram, "reserve_bytes").s);
    printf("vram: %s assigned of %s usable (%" PRIu64 " devices)\n", B(vram, "assigned_bytes").s,
           B(vram, "usable_bytes").s, yyjson_get_uint(yyjson_obj_get(vram, "devices")));
    printf("classes:\n");
    yyjson_arr_foreach(yyjson_obj_get(p, "classes"), i, max, x)
    {
        printf("  %-16s %-9s %12" PRIu64 " bytes\n", str_of(x, "class"), str_of(x, "tier"),
               yyjson_get_uint(yyjson_obj_get(x, "bytes")));
    }
    const char *numa = str_of(th, "numa");
    printf("threads: %" PRIu64 " (numa %s)\n", yyjson_get_uint(yyjson_obj_get(th, "count")),
           numa[0] ? numa : "none");
    printf("engine args:");
    yyjson_arr_foreach(yyjson_obj_get(yyjson_obj_get(p, "engine"), "args"), i, max, x)
        printf(" %s", yyjson_is_str(x) ? yyjson_get_str(x) : "");
    printf("\nrequires:");
    yyjson_arr_foreach(yyjson_obj_get(p, "requires_backend_capabilities"), i, max, x)
        printf(" %s", yyjson_is_str(x) ? yyjson_get_str(x) : "");
    printf("\n");
    print_lines(p, "reasons", "reasons");
    print_lines(p, "warnings", "warnings");
}

int qr_cli_plan(int argc, char **argv)
{
    struct opts o = {.accel = -1};
    for (int i = 0; i < argc; i++) /* argv: what follows the command name */
        if (!opt(argc, argv, &i, &o))
            return 2;
    if (!o.model) {
        fputs(USAGE, stderr);
        return 2;
    }
    bool split =
        o.q.req.prefer == QR_PLACEMENT_PREFER_HYBRID || o.q.req.prefer == QR_PLACEMENT_PREFER_GPU;
    o.q.req.allow_acceleration = o.accel == 1 || split; /* a split asks for acceleration */
    char path[PATH_MAX];
    int rc = resolve(&o, path, sizeof path);
    if (rc)
        return rc;
    struct qr_ledger *ledger = NULL;
    struct qr_diag d = {{0}};
    if (qr_ledger_load_builtin(&d, &ledger))
        fprintf(stderr, "quantum-runtime plan: no ledger (%s): nothing counts as verified\n",
                d.msg);
    qr_placement_verified_from_ledger(ledger, &o.q.req.verified);
    qr_ledger_free(ledger);
    yyjson_mut_doc *doc = NULL;
    bool fits = false;
    if (qr_placement_document(&o.q, QR_ROUTE_API_VERSION, &doc, &fits, &d)) {
        fprintf(stderr, "quantum-runtime plan: %s\n", d.msg);
        return 1;
    }
    if (o.json) {
        char *s = yyjson_mut_write(doc, YYJSON_WRITE_PRETTY_TWO_SPACES, NULL);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        yyjson_doc *idoc = yyjson_mut_doc_imut_copy(doc, NULL);
        if (idoc)
            print_text(yyjson_doc_get_root(idoc));
        yyjson_doc_free(idoc);
    }
    yyjson_mut_doc_free(doc);
    return fits ? 0 : EXIT_REFUSED;
}
