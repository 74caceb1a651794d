/* The catalog's join of backend-listed models (qr_catalog_join_backend): a name the registry does
 * not know becomes a backend model whose manifest states what the backend reported (quirk 30:
 * vLLM's max_model_len, Ollama's family), a row without those states none, a known name keeps
 * what it was joined with, and a reload (qr_catalog_load with the previous catalog) keeps them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <yyjson.h>

#include "api/catalog.h"
#include "backend/backend.h"
#include "registry/registry.h"

#define D4 "4444444444444444444444444444444444444444444444444444444444444444"

struct fx {
    char dir[64];
    struct qr_config cfg;
    struct qr_catalog *c;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/qr-catalog-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    char sd[128], md[128];
    snprintf(sd, sizeof(sd), "QUANTUM_RUNTIME_STATE_DIR=%s", f->dir);
    snprintf(md, sizeof(md), "QUANTUM_RUNTIME_MODELS_DIR=%s", f->dir);
    char *env[] = {sd, md, "QUANTUM_RUNTIME_HASH_MODELS=false", NULL};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&f->cfg, 0, NULL, env, &d), QR_OK);
    assert_int_equal(qr_catalog_load(&f->cfg, NULL, &f->c), QR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    qr_catalog_free(f->c);
    qr_config_cleanup(&f->cfg);
    rmdir(f->dir);
    free(f);
    return 0;
}

/* The generated manifest of name, as compact JSON (caller frees). */
static char *manifest_of(const struct qr_catalog *c, const char *name)
{
    const struct qr_reg_model *m = qr_registry_find(c->registry, name);
    assert_non_null(m);
    assert_int_equal(m->source, QR_REG_BACKEND);
    yyjson_val *model = yyjson_obj_get((yyjson_val *) qr_manifest_root(m->m), "model");
    char *s = yyjson_val_write(model, 0, NULL);
    assert_non_null(s);
    return s;
}

#define VLLM_ROW(name, ctx)                                                                        \
    {                                                                                              \
        .id = name, .created = 1767225600, .owned_by = "vllm", .size_bytes = -1, .digest = "",     \
        .family = "", .context_length = ctx                                                        \
    }

static const struct qr_backend_model vllm_rows[] = {VLLM_ROW("Qwen/Qwen3-8B", 32768),
                                                    VLLM_ROW("sql-lora", -1)};

/* The /v1/models rows of the vLLM replay (tests/cases/replay-vllm/vllm-models.json). */
static void test_join_carries_context_length(void **state)
{
    struct fx *f = *state;
    qr_catalog_join_backend(f->c, "openai", false, vllm_rows, 2);
    char *s = manifest_of(f->c, "Qwen/Qwen3-8B");
    assert_string_equal(s, "{\"architecture\":\"unknown\",\"parameter_class\":\"unspecified\","
                           "\"quantization\":\"unspecified\",\"context_window\":32768,"
                           "\"architecture_class\":\"unknown\",\"context_policy\":"
                           "{\"backend_managed\":true},\"architecture_contract\":"
                           "{\"context_length\":32768}}");
    free(s);
    /* max_model_len null (a LoRA adapter): the placeholder, and no contract states a length */
    s = manifest_of(f->c, "sql-lora");
    assert_string_equal(s, "{\"architecture\":\"unknown\",\"parameter_class\":\"unspecified\","
                           "\"quantization\":\"unspecified\",\"context_window\":2048,"
                           "\"architecture_class\":\"unknown\",\"context_policy\":"
                           "{\"backend_managed\":true}}");
    free(s);
    struct qr_catalog_model cm;
    qr_catalog_model_find(f->c, "openai/Qwen/Qwen3-8B", &cm);
    assert_int_equal(cm.known, QR_KNOWN_BACKEND);
    assert_string_equal(cm.canonical_id, "openai.qwen-qwen3-8b");
    assert_int_equal(f->c->n_refused, 0);
}

/* Ollama's /api/tags family is the architecture; its context length when the adapter has one. */
static void test_join_carries_architecture(void **state)
{
    struct fx *f = *state;
    const struct qr_backend_model rows[] = {
        {.id = "qwen3:8b",
         .size_bytes = 5,
         .digest = "sha256:" D4,
         .owned_by = "",
         .family = "qwen3",
         .context_length = -1},
        {.id = "odd:1b",
         .size_bytes = 5,
         .digest = "",
         .owned_by = "",
         .family = "not a label",
         .context_length = 131072},
    };
    qr_catalog_join_backend(f->c, "ollama", true, rows, 2);
    struct qr_catalog_model cm;
    qr_catalog_model_find(f->c, "qwen3:8b", &cm);
    assert_int_equal(cm.known, QR_KNOWN_BACKEND);
    assert_string_equal(cm.architecture, "qwen3");
    char *s = manifest_of(f->c, "qwen3:8b");
    assert_null(strstr(s, "architecture_contract"));
    free(s);
    qr_catalog_model_find(f->c, "odd:1b", &cm);
    assert_string_equal(cm.architecture, "unknown");
    s = manifest_of(f->c, "odd:1b");
    assert_non_null(strstr(s, "\"architecture_contract\":{\"context_length\":131072}"));
    free(s);
}

/* A name already joined keeps its manifest; a reload reports the kept facts again. */
static void test_join_kept_and_reloaded(void **state)
{
    struct fx *f = *state;
    qr_catalog_join_backend(f->c, "openai", false, vllm_rows, 2);
    const struct qr_backend_model later[] = {VLLM_ROW("Qwen/Qwen3-8B", 8192)};
    qr_catalog_join_backend(f->c, "openai", false, later, 1);
    char *s = manifest_of(f->c, "Qwen/Qwen3-8B");
    assert_non_null(strstr(s, "\"context_window\":32768,"));
    free(s);

    struct qr_catalog *next = NULL;
    assert_int_equal(qr_catalog_load(&f->cfg, f->c, &next), QR_OK);
    qr_catalog_free(f->c);
    f->c = next;
    s = manifest_of(f->c, "Qwen/Qwen3-8B");
    assert_non_null(strstr(s, "\"architecture_contract\":{\"context_length\":32768}"));
    free(s);
    const struct qr_reg_model *m = qr_registry_find(f->c->registry, "Qwen/Qwen3-8B");
    assert_int_equal(m->n_remotes, 1);
    assert_int_equal(m->remotes[0].context_length, 32768);
    s = manifest_of(f->c, "sql-lora");
    assert_null(strstr(s, "architecture_contract"));
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_join_carries_context_length, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_carries_architecture, setup, teardown),
        cmocka_unit_test_setup_teardown(test_join_kept_and_reloaded, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
