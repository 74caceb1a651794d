/* Router plan cost: a registry of 1,000 generated models (eight unrelated families, dense and
 * MoE, each with a GGUF artifact carrying an Ollama tag and a Hugging Face repo) and 8 backends
 * (two each of llama.cpp, Ollama, vLLM, openai-compatible; one of each pair unhealthy or
 * disabled so every plan explains rejections), with the builtin ledger and policies. Each plan
 * resolves an alias (name:tag) and requires inference.text + tools.calling, a third also a
 * context; models are visited round-robin. Reported: microseconds per plan, per plan + JSON
 * render, and per registry lookup alone (the floor). Target: plan under 20 us.
 *
 * Usage: router_bench [--plans N] [--json FILE]
 *   make release && build/release/bench/router_bench   (docs/ROUTER.md "Performance") */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "router/with_registry.h"

#include "router/router.h"

#define N_MODELS   1000
#define N_BACKENDS 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static const char *const FAMILIES[] = {"llama", "qwen3moe", "mistral3", "deepseek2",
                                       "phi3",  "granite",  "olmoe",    "gemma4"};

static void add_model(struct qr_registry *r, int i)
{
    const char *fam = FAMILIES[i % 8];
    int moe = (i % 8 == 1 || i % 8 == 3 || i % 8 == 6);
    char json[4096];
    snprintf(json, sizeof json,
             "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\","
             "\"id\":\"m%04d-%s\",\"display_name\":\"m%d\",\"aliases\":[\"%s-m%d:latest\"],"
             "\"source\":{\"provider\":\"bench\",\"reference\":\"m%d\",\"revision\":\"r\"},"
             "\"backend\":{\"type\":\"llama.cpp\"},\"artifacts\":["
             "{\"uri\":\"models:m%04d.gguf\",\"backend\":\"llama.cpp\",\"format\":\"gguf\","
             "\"role\":\"inference\",\"ollama\":{\"tag\":\"%s-m%d:latest\"},"
             "\"huggingface\":{\"repo\":\"bench/m%04d\"}}],"
             "\"model\":{\"architecture\":\"%s\",\"parameter_class\":\"e4b\","
             "\"quantization\":\"q4_k_m\",\"context_window\":32768,"
             "\"architecture_class\":\"%s\"%s,"
             "\"architecture_contract\":{\"architecture\":\"%s\",\"ffn\":\"%s\","
             "\"context_length\":32768}},"
             "\"capabilities\":{\"text\":true,\"vision\":false,\"audio\":false,"
             "\"embeddings\":false,\"tools\":true,\"thinking\":true},"
             "\"compatibility\":{\"min_runtime_version\":\"0.4.0\"},"
             "\"state\":{\"install\":\"available\",\"verification\":\"unverified\","
             "\"lifecycle\":\"active\"},\"provenance\":{\"publisher\":\"bench\"}}",
             i, fam, i, fam, i, i, i, fam, i, i, fam, moe ? "moe" : "dense",
             moe ? ",\"experts\":{\"total\":64,\"active\":8}" : "", fam, moe ? "moe" : "dense");
    struct qr_diag d;
    if (qr_registry_add_json(r, json, strlen(json), "bench", QR_REG_FILE, &d, NULL) != QR_OK) {
        fprintf(stderr, "manifest %d: %s\n", i, d.msg);
        exit(1);
    }
}

static void desc(struct qr_cap_descriptor *d, const char *id, enum qr_cap_backend_kind kind)
{
    memset(d, 0, sizeof *d);
    snprintf(d->id, sizeof d->id, "%s", id);
    d->kind = kind;
    snprintf(d->adapter_version, sizeof d->adapter_version, "0.4.0");
    d->state = QR_CAP_BACKEND_READY;
    for (int k = 0; k < QR_CAP__COUNT; k++)
        d->caps[k] =
            qr_cap_info((enum qr_cap_key) k)->model_side ? QR_CAP_CONDITIONAL : QR_CAP_SUPPORTED;
    d->caps[QR_CAP_QUANT_FORMATS] = QR_CAP_UNKNOWN;
    d->caps[QR_CAP_CONTEXT_OVERRIDE] = QR_CAP_SUPPORTED;
    d->backend_managed = true;
}

int main(int argc, char **argv)
{
    long n_plans = 200000;
    const char *json_out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--plans") == 0 && i + 1 < argc)
            n_plans = atol(argv[++i]);
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_out = argv[++i];
        else {
            fprintf(stderr, "usage: router_bench [--plans N] [--json FILE]\n");
            return 2;
        }
    }
    struct qr_registry *reg = qr_registry_new();
    for (int i = 0; i < N_MODELS; i++)
        add_model(reg, i);
    struct qr_diag d;
    struct qr_ledger *ledger = NULL;
    struct qr_policy_set *pol = NULL;
    if (qr_ledger_load_builtin(&d, &ledger) != QR_OK || qr_policy_set_load_builtin(&pol, &d)) {
        fprintf(stderr, "builtin data: %s\n", d.msg);
        return 1;
    }

    static const char *const v_lc[] = {"b11669", "0.7.0"}, *const v_ol[] = {"0.12.3"},
                             *const v_vl[] = {"0.7.2"};
    static const char *const ids[N_BACKENDS] = {"lc-a", "lc-b", "ol-a", "ol-b",
                                                "vl-a", "vl-b", "oa-a", "oa-b"};
    static const enum qr_cap_backend_kind kinds[N_BACKENDS] = {
        QR_CAP_KIND_LLAMACPP, QR_CAP_KIND_LLAMACPP, QR_CAP_KIND_OLLAMA, QR_CAP_KIND_OLLAMA,
        QR_CAP_KIND_VLLM,     QR_CAP_KIND_VLLM,     QR_CAP_KIND_OPENAI, QR_CAP_KIND_OPENAI};
    struct qr_cap_descriptor descs[N_BACKENDS];
    struct qr_route_backend b[N_BACKENDS];
    for (int i = 0; i < N_BACKENDS; i++) {
        desc(&descs[i], ids[i], kinds[i]);
        const char *const *v = i < 2 ? v_lc : i < 4 ? v_ol : v_vl;
        b[i] = (struct qr_route_backend){.desc = &descs[i],
                                         .engine_versions = v,
                                         .n_engine_versions = i < 2 ? 2 : 1,
                                         .healthy = (i % 2) == 0};
    }
    descs[7].state = QR_CAP_BACKEND_DISABLED;
    struct qr_router_env env = {.registry = reg,
                                .backends = b,
                                .n_backends = N_BACKENDS,
                                .hardware_class = "linux-cpu",
                                .policies = pol,
                                .ledger = ledger};
    env.opts.allow_fallback = true;

    char(*names)[64] = malloc(N_MODELS * sizeof *names);
    for (int i = 0; i < N_MODELS; i++)
        snprintf(names[i], 64, "%s-m%d", FAMILIES[i % 8], i); /* alias without tag: :latest */
    struct qr_cap_set req = QR_CAP_SET_EMPTY;
    qr_cap_set_add(&req, QR_CAP_INFERENCE_TEXT);
    qr_cap_set_add(&req, QR_CAP_TOOLS_CALLING);

    /* warm-up and a correctness check */
    size_t json_bytes = 0;
    for (int i = 0; i < N_MODELS; i++) {
        struct qr_route_query q = {.model = names[i], .required = req};
        struct qr_route_plan p;
        if (qr_router_plan(&env, &q, &p, &d) != QR_OK) {
            fprintf(stderr, "plan %s: %s\n", names[i], d.msg);
            return 1;
        }
        if (i == 0) {
            char *s = qr_route_write(&p, &json_bytes);
            free(s);
        }
        qr_route_plan_cleanup(&p);
    }

    volatile size_t sink = 0;
    double t0 = now_s();
    for (long n = 0; n < n_plans; n++) {
        struct qr_route_query q = {
            .model = names[n % N_MODELS], .required = req, .context = (n % 3 == 0) ? 8192 : 0};
        struct qr_route_plan p;
        qr_router_plan(&env, &q, &p, &d);
        sink += p.n_candidates;
        qr_route_plan_cleanup(&p);
    }
    double t_plan = (now_s() - t0) / (double) n_plans * 1e6;

    long n_json = n_plans / 4;
    t0 = now_s();
    for (long n = 0; n < n_json; n++) {
        struct qr_route_query q = {.model = names[n % N_MODELS], .required = req};
        struct qr_route_plan p;
        qr_router_plan(&env, &q, &p, &d);
        size_t len;
        char *s = qr_route_write(&p, &len);
        sink += len;
        free(s);
        qr_route_plan_cleanup(&p);
    }
    double t_json = (now_s() - t0) / (double) n_json * 1e6;

    t0 = now_s();
    for (long n = 0; n < n_plans; n++)
        sink += qr_registry_find(reg, names[n % N_MODELS]) != NULL;
    double t_find = (now_s() - t0) / (double) n_plans * 1e6;

    printf("router_bench: %d models x %d backends, %ld plans (candidates per plan: 24)\n", N_MODELS,
           N_BACKENDS, n_plans);
    printf("  plan                 %8.3f us/plan   (target < 20 us: %s)\n", t_plan,
           t_plan < 20.0 ? "met" : "MISSED");
    printf("  plan + JSON render   %8.3f us/plan   (%zu bytes of JSON)\n", t_json, json_bytes);
    printf("  registry lookup      %8.3f us/lookup (the floor)\n", t_find);
    if (json_out) {
        FILE *f = fopen(json_out, "w");
        if (f) {
            fprintf(f,
                    "{\"models\":%d,\"backends\":%d,\"plans\":%ld,\"us_per_plan\":%.3f,"
                    "\"us_per_plan_json\":%.3f,\"us_per_lookup\":%.3f,\"json_bytes\":%zu}\n",
                    N_MODELS, N_BACKENDS, n_plans, t_plan, t_json, t_find, json_bytes);
            fclose(f);
        }
    }
    (void) sink;
    free(names);
    qr_policy_set_free(pol);
    qr_ledger_free(ledger);
    qr_registry_free(reg);
    return 0;
}
