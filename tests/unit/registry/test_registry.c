/* The registry: builtin manifests sorted by id; every spelling of a name (id, alias, name:tag,
 * case, implied :latest) resolves to the same model and nothing else does; registry directories
 * with bad, clashing and oversized files (each reported with its path and skipped); the
 * `/v1/models` and `/v1/models/{id}` documents; and backend-reported names joined by manifest
 * name or digest, created namespaced by backend otherwise, with one name under two digests
 * refused. */
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

#include "core/builtin.h"
#include "registry/registry.h"
#include "manifest_fixture.h"
#include "schema_check.h"

#define D1 "1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "2222222222222222222222222222222222222222222222222222222222222222"
#define D3 "3333333333333333333333333333333333333333333333333333333333333333"

static size_t n_builtin(void)
{
    const struct qr_builtin_file *f;
    size_t n;
    qr_builtin_under("models/", &f, &n);
    return n;
}

static struct qr_registry *builtin_registry(void)
{
    struct qr_registry *r = qr_registry_new();
    assert_int_equal(qr_registry_load_builtin(r), QR_OK);
    size_t np;
    const struct qr_reg_problem *p = qr_registry_problems(r, &np, NULL);
    if (np)
        fail_msg("builtin problem: %s", p[0].message);
    return r;
}

/* A minimal valid manifest with the given id and aliases/artifact fragments. */
static char *manifest(const char *id, const char *aliases, const char *artifacts)
{
    char *buf = malloc(4096);
    assert_non_null(buf);
    snprintf(buf, 4096,
             "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"%s\","
             "\"display_name\":\"T %s\",\"aliases\":[%s],"
             "\"source\":{\"provider\":\"test\",\"reference\":\"t\",\"revision\":\"unresolved\"},"
             "\"backend\":{\"type\":\"llama.cpp\"},\"artifacts\":[%s],"
             "\"model\":{\"architecture\":\"t\",\"parameter_class\":\"t\","
             "\"quantization\":\"t\",\"context_window\":4096},"
             "\"capabilities\":{\"text\":true,\"vision\":false,\"audio\":false,"
             "\"embeddings\":false,\"tools\":false,\"thinking\":false},"
             "\"compatibility\":{\"min_runtime_version\":\"0.4.0\"},"
             "\"state\":{\"install\":\"installed\",\"verification\":\"unverified\","
             "\"lifecycle\":\"active\"},\"provenance\":{\"publisher\":\"test\"}}",
             id, id, aliases, artifacts ? artifacts : "{\"uri\":\"profile://t\"}");
    return buf;
}

static void test_builtin_sorted(void **state)
{
    (void) state;
    struct qr_registry *r = builtin_registry();
    assert_int_equal(qr_registry_count(r), n_builtin());
    for (size_t i = 1; i < qr_registry_count(r); i++)
        assert_true(strcmp(qr_registry_at(r, i - 1)->m->id, qr_registry_at(r, i)->m->id) < 0);
    assert_null(qr_registry_at(r, qr_registry_count(r)));
    const struct qr_reg_model *m = qr_registry_find(r, "ember-coreui");
    assert_non_null(m);
    assert_int_equal(m->source, QR_REG_BUILTIN);
    assert_string_equal(m->origin, "builtin:models/ember-coreui.json");
    qr_registry_free(r);
}

static void test_name_forms(void **state)
{
    (void) state;
    struct qr_registry *r = builtin_registry();
    const struct qr_reg_model *ember = qr_registry_find(r, "ember-coreui");
    assert_non_null(ember);
    /* the predecessor compared literally: ember-coreui != ember-coreui:latest (§6.2 item 2) */
    static const char *const SAME[] = {"ember-coreui:latest", "EMBER-COREUI", "Ember-CoreUI:Latest",
                                       "ember-coreui:LATEST"};
    for (size_t i = 0; i < sizeof SAME / sizeof SAME[0]; i++)
        assert_ptr_equal(qr_registry_find(r, SAME[i]), ember);
    const struct qr_reg_model *tci = qr_registry_find(r, "quantum-tci:e4b");
    assert_non_null(tci);
    assert_string_equal(tci->m->id, "quantum-tci-gemma4-e4b");
    assert_ptr_equal(qr_registry_find(r, "Quantum-TCI:E4B"), tci);
    assert_null(qr_registry_find(r, "quantum-tci")); /* :latest is not :e4b */
    assert_string_equal(qr_registry_find(r, "example/generic-text-model:latest")->m->id,
                        "generic-text-model");
    assert_null(qr_registry_find(r, "example/generic-text-model:v2"));
    assert_null(qr_registry_find(r, "generic-text"));
    assert_null(qr_registry_find(r, ""));
    assert_null(qr_registry_find(r, NULL));
    assert_null(qr_registry_find(r, "ember coreui"));
    assert_null(qr_registry_find(r, "ember-coreui:"));
    qr_registry_free(r);

    char key[QR_REG_KEY_MAX];
    assert_true(qr_registry_name_key("Org/Model", key));
    assert_string_equal(key, "org/model:latest");
    assert_true(qr_registry_name_key("host:1/org/model", key)); /* a ':' before the last '/' */
    assert_string_equal(key, "host:1/org/model:latest");
    assert_true(qr_registry_name_key("m:Q4_K_M", key));
    assert_string_equal(key, "m:q4_k_m");
    assert_false(qr_registry_name_key("", key));
    assert_false(qr_registry_name_key("-x", key));
    char big[200];
    memset(big, 'a', sizeof big);
    big[160] = 0;
    assert_true(qr_registry_name_key(big, key));
    assert_int_equal(strlen(key), 167);
    big[160] = 'a';
    big[161] = 0;
    assert_false(qr_registry_name_key(big, key));
}

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static const struct qr_reg_problem *find_problem(struct qr_registry *r, const char *needle)
{
    size_t n;
    const struct qr_reg_problem *p = qr_registry_problems(r, &n, NULL);
    for (size_t i = 0; i < n; i++) {
        if (strstr(p[i].message, needle))
            return &p[i];
    }
    fail_msg("no problem mentions '%s'", needle);
    return NULL;
}

static void test_registry_dir(void **state)
{
    (void) state;
    char dir[] = "/tmp/qr-reg-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *a = manifest("local-a", "\"Local:v1\"", NULL);
    char *c = manifest("ember-coreui", "", NULL);
    char *d = manifest("local-d", "\"LOCAL-A\"", NULL);
    char *e = manifest("local-e", "\"generic-text-model:latest\"", NULL);
    write_file(dir, "a-good.json", a, strlen(a));
    write_file(dir, "b-bad.json", "{\"id\":", 6);
    write_file(dir, "c-clash-id.json", c, strlen(c));
    write_file(dir, "d-clash-alias.json", d, strlen(d));
    write_file(dir, "e-clash-latest.json", e, strlen(e));
    write_file(dir, "notes.txt", "x", 1);
    char *big = malloc(QR_MANIFEST_MAX_BYTES + 10);
    assert_non_null(big);
    memset(big, ' ', QR_MANIFEST_MAX_BYTES + 10);
    write_file(dir, "f-big.json", big, QR_MANIFEST_MAX_BYTES + 10);
    free(big);

    struct qr_registry *r = builtin_registry();
    assert_int_equal(qr_registry_load_dir(r, dir), QR_OK);
    assert_int_equal(qr_registry_count(r), n_builtin() + 1);
    const struct qr_reg_model *m = qr_registry_find(r, "local:v1");
    assert_non_null(m);
    assert_string_equal(m->m->id, "local-a");
    assert_int_equal(m->source, QR_REG_FILE);
    assert_non_null(strstr(m->origin, "/a-good.json"));

    size_t np, total;
    qr_registry_problems(r, &np, &total);
    assert_int_equal(np, 5);
    assert_int_equal(total, 5);
    const struct qr_reg_problem *p = find_problem(r, "b-bad.json");
    assert_int_equal(p->kind, QR_REG_BAD_FILE);
    assert_non_null(strstr(p->message, "not JSON"));
    p = find_problem(r, "c-clash-id.json");
    assert_int_equal(p->kind, QR_REG_NAME_CLASH);
    assert_string_equal(p->other, "builtin:models/ember-coreui.json");
    assert_string_equal(p->name, "ember-coreui");
    assert_non_null(strstr(p->message, "id 'ember-coreui' of model 'ember-coreui' clashes with id "
                                       "'ember-coreui' of model 'ember-coreui' from "
                                       "'builtin:models/ember-coreui.json'"));
    p = find_problem(r, "d-clash-alias.json");
    assert_string_equal(p->name, "LOCAL-A");
    assert_non_null(strstr(p->other, "a-good.json"));
    assert_non_null(strstr(p->message, "alias 'LOCAL-A' of model 'local-d' clashes with id "
                                       "'local-a'"));
    p = find_problem(r, "e-clash-latest.json");
    assert_non_null(strstr(p->message, "alias 'generic-text-model:latest' of model 'local-e' "
                                       "clashes with id 'generic-text-model'"));
    p = find_problem(r, "f-big.json");
    assert_non_null(strstr(p->message, "above the cap"));
    /* conflicts are not merged: the builtin keeps its name, the clashing files added nothing */
    assert_int_equal(qr_registry_find(r, "ember-coreui")->source, QR_REG_BUILTIN);
    assert_null(qr_registry_find(r, "local-d"));
    assert_null(qr_registry_find(r, "local-e"));

    assert_int_equal(qr_registry_load_dir(r, "/nonexistent/qr-reg"), QR_ERR_NOT_FOUND);
    find_problem(r, "cannot open registry directory '/nonexistent/qr-reg'");

    static const char *const FILES[] = {
        "a-good.json",         "b-bad.json", "c-clash-id.json", "d-clash-alias.json",
        "e-clash-latest.json", "notes.txt",  "f-big.json"};
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, FILES[i]);
        unlink(path);
    }
    rmdir(dir);
    free(a);
    free(c);
    free(d);
    free(e);
    qr_registry_free(r);
}

static char *write_doc(void *doc)
{
    size_t len;
    char *s = qr_registry_json_write(doc, &len);
    assert_non_null(s);
    assert_int_equal(strlen(s), len);
    return s;
}

static void test_list_json(void **state)
{
    (void) state;
    struct qr_registry *r = builtin_registry();
    char *m = manifest("zz-no-alias", "", NULL);
    struct qr_diag d;
    assert_int_equal(qr_registry_add_json(r, m, strlen(m), "test", QR_REG_FILE, &d, NULL), QR_OK);
    free(m);
    void *doc = qr_registry_list_json(r);
    char *s = write_doc(doc);
    char head[200];
    snprintf(head, sizeof head,
             "{\"api_version\":\"v1alpha1\",\"schema_version\":\"quantum.runtime/model-manifest/"
             "v1alpha1\",\"count\":%zu,\"models\":[",
             n_builtin() + 1);
    assert_int_equal(strncmp(s, head, strlen(head)), 0);
    assert_non_null(strstr(
        s, "{\"id\":\"ember-coreui\",\"display_name\":\"Ember CoreUI Model Profile\",\"aliases\":"
           "[\"ember-coreui:latest\"],\"backend\":\"ollama-adapter\",\"capabilities\":["
           "\"reasoning-control\",\"text\",\"thinking\",\"vision\"],\"state\":{\"install\":"
           "\"external\",\"verification\":\"unverified\",\"lifecycle\":\"active\"}}"));
    assert_non_null(strstr(
        s, "\"capabilities\":[\"reasoning-control\",\"structured-output\",\"text\",\"thinking\","
           "\"tools\",\"vision\"]"));
    /* aliases omitted when there are none */
    assert_non_null(strstr(s, "{\"id\":\"zz-no-alias\",\"display_name\":\"T zz-no-alias\","
                              "\"backend\":\"llama.cpp\",\"capabilities\":[\"text\"]"));
    free(s);
    yyjson_mut_doc_free(doc);
    qr_registry_free(r);
}

static void test_model_json(void **state)
{
    (void) state;
    struct qr_registry *r = builtin_registry();
    void *doc;
    assert_int_equal(qr_registry_model_json(r, "Quantum-TCI:e4b", &doc), QR_OK);
    char *s = write_doc(doc);
    yyjson_mut_doc_free(doc);
    yyjson_doc *rd = yyjson_read(s, strlen(s), 0);
    yyjson_val *root = yyjson_doc_get_root(rd);
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "api_version")), "v1alpha1");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(root, "requested_identifier")),
                        "Quantum-TCI:e4b");
    yyjson_val *model = yyjson_obj_get(root, "model");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(model, "id")), "quantum-tci-gemma4-e4b");
    /* the full manifest, byte for byte the same values as the builtin file */
    const struct qr_builtin_file *f = qr_builtin_find("models/quantum-tci-gemma4-e4b.json");
    yyjson_doc *orig = yyjson_read(f->data, f->len, 0);
    assert_true(yyjson_equals(yyjson_doc_get_root(orig), model));
    yyjson_val *disc = yyjson_obj_get(root, "discovered");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(disc, "source")), "builtin");
    yyjson_doc_free(orig);
    yyjson_doc_free(rd);
    free(s);
    assert_int_equal(qr_registry_model_json(r, "nope", &doc), QR_ERR_NOT_FOUND);
    assert_null(doc);
    assert_int_equal(qr_registry_model_json(r, "", &doc), QR_ERR_NOT_FOUND);
    qr_registry_free(r);
}

static void test_remote_join_and_create(void **state)
{
    (void) state;
    struct qr_registry *r = builtin_registry();
    struct qr_diag d = {{0}};
    const struct qr_reg_model *m, *ember = qr_registry_find(r, "ember-coreui");
    size_t n0 = qr_registry_count(r);

    /* a manifest name joins the manifest's model: one identity across backends */
    assert_int_equal(
        qr_registry_add_remote(r, "ollama", true, "ember-coreui:latest", D1, NULL, &d, &m), QR_OK);
    assert_ptr_equal(m, ember);
    assert_int_equal(ember->n_remotes, 1);
    assert_string_equal(ember->remotes[0].digest, "sha256:" D1);
    assert_int_equal(qr_registry_add_remote(r, "vllm1", false, "Ember-CoreUI", NULL, NULL, &d, &m),
                     QR_OK);
    assert_ptr_equal(m, ember);
    assert_int_equal(ember->n_remotes, 2);
    /* the same name under another digest is a conflict, not a second identity */
    assert_int_equal(
        qr_registry_add_remote(r, "ollama-b", true, "ember-coreui", "sha256:" D2, NULL, &d, &m),
        QR_ERR_INVALID);
    assert_null(m);
    const struct qr_reg_problem *p = find_problem(r, "reported with digest sha256:" D2);
    assert_int_equal(p->kind, QR_REG_DIGEST_CLASH);
    assert_int_equal(qr_registry_count(r), n0);

    /* unknown to every manifest: a new model namespaced by backend */
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "Llama3", D3, NULL, &d, &m), QR_OK);
    assert_string_equal(m->m->id, "ollama.llama3");
    assert_int_equal(m->source, QR_REG_BACKEND);
    assert_string_equal(m->m->backend, "ollama-adapter");
    assert_string_equal(m->m->artifacts[0].ollama_digest, "sha256:" D3);
    assert_ptr_equal(qr_registry_find(r, "llama3:latest"), m);
    assert_ptr_equal(qr_registry_find(r, "ollama/llama3"), m);
    const struct qr_reg_model *again;
    assert_int_equal(
        qr_registry_add_remote(r, "ollama", true, "llama3:latest", D3, NULL, &d, &again), QR_OK);
    assert_ptr_equal(again, m);
    assert_int_equal(qr_registry_count(r), n0 + 1);
    /* another backend's llama3 is not the same model by name alone */
    assert_int_equal(qr_registry_add_remote(r, "vllm1", false, "llama3", NULL, NULL, &d, &again),
                     QR_OK);
    assert_string_equal(again->m->id, "vllm1.llama3");
    assert_ptr_equal(qr_registry_find(r, "vllm1/llama3"), again);
    assert_ptr_equal(qr_registry_find(r, "llama3"), m);
    p = find_problem(r, "name 'llama3' is taken by model 'ollama.llama3'");
    assert_int_equal(p->kind, QR_REG_NAME_CLASH);
    /* ...but by digest it is */
    assert_int_equal(
        qr_registry_add_remote(r, "ollama2", true, "meta/llama3:8b", D3, NULL, &d, &again), QR_OK);
    assert_ptr_equal(again, m);

    /* unusable input is reported */
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "bad name", NULL, NULL, &d, &m),
                     QR_ERR_INVALID);
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "x", "sha256:xyz", NULL, &d, &m),
                     QR_ERR_INVALID);
    assert_int_equal(qr_registry_add_remote(r, "Bad Backend", true, "x", NULL, NULL, &d, &m),
                     QR_ERR_INVALID);
    qr_registry_free(r);
}

static void test_remote_digest_rules(void **state)
{
    (void) state;
    struct qr_registry *r = qr_registry_new();
    struct qr_diag d = {{0}};
    const struct qr_reg_model *m, *pinned, *tagged;
    char *a = manifest("pinned", "", "{\"uri\":\"models:p.gguf\",\"sha256\":\"sha256:" D1 "\"}");
    char *b = manifest("tagged", "\"tagged-alias\"",
                       "{\"uri\":\"ollama:tagged:v1\",\"ollama\":{\"tag\":\"tagged:v1\","
                       "\"digest\":\"sha256:" D2 "\"}}");
    assert_int_equal(qr_registry_add_json(r, a, strlen(a), "a", QR_REG_FILE, &d, &pinned), QR_OK);
    assert_int_equal(qr_registry_add_json(r, b, strlen(b), "b", QR_REG_FILE, &d, &tagged), QR_OK);
    /* the GGUF digest stated by a manifest joins, whatever the name */
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "some/name:q4", D1, NULL, &d, &m),
                     QR_OK);
    assert_ptr_equal(m, pinned);
    /* the Ollama digest stated for a tag joins; the tag under another digest is refused */
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "tagged:v1", D2, NULL, &d, &m),
                     QR_OK);
    assert_ptr_equal(m, tagged);
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "tagged:v1", D3, NULL, &d, &m),
                     QR_ERR_INVALID);
    assert_non_null(strstr(d.msg, "bound to sha256:" D2));
    /* a manifest's name with another manifest's digest: refused, neither is joined */
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "tagged-alias", D1, NULL, &d, &m),
                     QR_ERR_INVALID);
    find_problem(r, "'tagged-alias' is 'tagged' by name but its digest sha256:" D1
                    " is stated by 'pinned'");
    /* a digest two manifests state is ambiguous: refused */
    char *c =
        manifest("pinned-twin", "", "{\"uri\":\"models:q.gguf\",\"sha256\":\"sha256:" D1 "\"}");
    assert_int_equal(qr_registry_add_json(r, c, strlen(c), "c", QR_REG_FILE, &d, NULL), QR_OK);
    assert_int_equal(qr_registry_find_digest(r, "sha256:" D1, &m), 2);
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "other", D1, NULL, &d, &m),
                     QR_ERR_INVALID);
    find_problem(r, "is stated by 2 models");
    assert_int_equal(qr_registry_find_digest(r, "sha256:" D3, &m), 0);
    assert_null(m);
    free(a);
    free(b);
    free(c);
    qr_registry_free(r);
}

static int64_t model_int(const struct qr_reg_model *m, const char *a, const char *b)
{
    yyjson_val *v = yyjson_obj_get((yyjson_val *) qr_manifest_root(m->m), "model");
    v = yyjson_obj_get(v, a);
    v = b ? yyjson_obj_get(v, b) : v;
    return yyjson_is_int(v) ? yyjson_get_sint(v) : -1;
}

/* Quirk 30: what a backend reports besides the name (vLLM max_model_len, Ollama's family) is kept
 * with the report and stated by the manifest generated for it; a model whose backend reports no
 * context length gets the 2048 placeholder and no architecture_contract, never an invented one. */
static void test_remote_facts_stated(void **state)
{
    (void) state;
    struct qr_registry *r = qr_registry_new();
    struct qr_diag d = {{0}};
    const struct qr_reg_model *m;

    struct qr_reg_remote_facts vllm = {"", 32768, NULL};
    assert_int_equal(
        qr_registry_add_remote(r, "openai", false, "Qwen/Qwen3-8B", NULL, &vllm, &d, &m), QR_OK);
    assert_string_equal(m->m->id, "openai.qwen-qwen3-8b");
    assert_string_equal(m->m->architecture, "unknown");
    assert_int_equal(model_int(m, "context_window", NULL), 32768);
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), 32768);
    assert_int_equal(m->remotes[0].context_length, 32768);
    assert_null(m->remotes[0].architecture);

    struct qr_reg_remote_facts ol = {"qwen3", 40960, NULL};
    assert_int_equal(qr_registry_add_remote(r, "ollama", true, "qwen3:8b", D1, &ol, &d, &m), QR_OK);
    assert_string_equal(m->m->architecture, "qwen3");
    assert_string_equal(m->remotes[0].architecture, "qwen3");
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), 40960);

    /* none reported (the adapters' -1 and ""): placeholder, no contract, nothing kept */
    struct qr_reg_remote_facts none = {"", -1, NULL};
    assert_int_equal(qr_registry_add_remote(r, "openai", false, "sql-lora", NULL, &none, &d, &m),
                     QR_OK);
    assert_string_equal(m->m->architecture, "unknown");
    assert_int_equal(model_int(m, "context_window", NULL), 2048);
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), -1);
    assert_int_equal(m->remotes[0].context_length, 0);
    assert_int_equal(qr_registry_add_remote(r, "openai", false, "no-facts", NULL, NULL, &d, &m),
                     QR_OK);
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), -1);

    /* unusable facts count as not reported; above the context_window cap the contract keeps it */
    struct qr_reg_remote_facts bad = {"not a label", 200000000, NULL};
    assert_int_equal(qr_registry_add_remote(r, "openai", false, "bad-facts", NULL, &bad, &d, &m),
                     QR_OK);
    assert_string_equal(m->m->architecture, "unknown");
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), -1);
    assert_null(m->remotes[0].architecture);
    struct qr_reg_remote_facts big = {"llama4", 10485760, NULL};
    assert_int_equal(qr_registry_add_remote(r, "openai", false, "scout", NULL, &big, &d, &m),
                     QR_OK);
    assert_int_equal(model_int(m, "context_window", NULL), 10000000);
    assert_int_equal(model_int(m, "architecture_contract", "context_length"), 10485760);
    size_t np;
    qr_registry_problems(r, &np, NULL);
    assert_int_equal(np, 0);

    /* /v1/models/{id} says where the values came from */
    void *doc;
    assert_int_equal(qr_registry_model_json(r, "Qwen/Qwen3-8B", &doc), QR_OK);
    size_t len;
    char *s = qr_registry_json_write(doc, &len);
    assert_non_null(strstr(s, "\"backends\":[{\"backend\":\"openai\",\"name\":\"Qwen/Qwen3-8B\","
                              "\"digest\":null,\"context_length\":32768}]"));
    free(s);
    yyjson_mut_doc_free(doc);
    assert_int_equal(qr_registry_model_json(r, "qwen3:8b", &doc), QR_OK);
    s = qr_registry_json_write(doc, &len);
    assert_non_null(strstr(s, "\"digest\":\"sha256:" D1 "\",\"architecture\":\"qwen3\","
                              "\"context_length\":40960}]"));
    free(s);
    yyjson_mut_doc_free(doc);
    assert_int_equal(qr_registry_model_json(r, "sql-lora", &doc), QR_OK);
    s = qr_registry_json_write(doc, &len);
    assert_non_null(strstr(s, "\"name\":\"sql-lora\",\"digest\":null}]"));
    free(s);
    yyjson_mut_doc_free(doc);
    qr_registry_free(r);
}

/* Manifests the registry generates for backends fit the published schema too. */
static void test_generated_fit_schema(void **state)
{
    (void) state;
    struct qr_registry *r = qr_registry_new();
    struct qr_diag d;
    const struct qr_reg_model *m;
    assert_int_equal(
        qr_registry_add_remote(r, "ollama", true, "hf.co/Org/Repo:Q4_K_M", D1, NULL, &d, &m),
        QR_OK);
    assert_int_equal(qr_registry_add_remote(r, "vllm", false, "org/model", NULL, NULL, &d, &m),
                     QR_OK);
    struct qr_reg_remote_facts fx = {"qwen3", 32768, NULL};
    assert_int_equal(qr_registry_add_remote(r, "vllm", false, "org/ctx", NULL, &fx, &d, &m), QR_OK);
    yyjson_doc *schema = schema_load();
    for (size_t i = 0; i < qr_registry_count(r); i++) {
        yyjson_mut_doc *md = yyjson_mut_doc_new(NULL);
        yyjson_mut_doc_set_root(
            md, yyjson_val_mut_copy(md, (yyjson_val *) qr_manifest_root(qr_registry_at(r, i)->m)));
        size_t len;
        char *s = yyjson_mut_write(md, 0, &len);
        schema_check_json(schema, s, len, qr_registry_at(r, i)->m->id);
        free(s);
        yyjson_mut_doc_free(md);
    }
    yyjson_doc_free(schema);
    qr_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_sorted),       cmocka_unit_test(test_name_forms),
        cmocka_unit_test(test_registry_dir),         cmocka_unit_test(test_list_json),
        cmocka_unit_test(test_model_json),           cmocka_unit_test(test_remote_join_and_create),
        cmocka_unit_test(test_remote_digest_rules),  cmocka_unit_test(test_remote_facts_stated),
        cmocka_unit_test(test_generated_fit_schema),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
