/* Discovery of GGUF files written with the project's writer into a temp models directory: a
 * dense file becomes a model whose id comes from the file name and whose architecture contract
 * comes from the file; a MoE file in a subdirectory states its experts; a file at a manifest's
 * models: URI and a file whose sha256 a manifest states join that manifest's model (one
 * identity, no second model); a file at a manifest's URI with another digest, a digest two
 * manifests state, a broken file and a file without context length are reported and skipped; a
 * projector is skipped silently; the sha256 cache is used across restarts; URIs resolve. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yyjson.h>

#include "gguf/gguf.h"
#include "gguf/sha256.h"
#include "registry/registry.h"
#include "manifest_fixture.h"
#include "schema_check.h"

static char dir[64];
static char cache[128];

static const char TPL[] = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
                          "{% endfor %}{% if tools %}<tool_call>{% endif %}<think>";

static void tensor(struct qr_gguf_writer *w, const char *name, uint32_t type, uint32_t n,
                   uint64_t d0, uint64_t d1, uint64_t d2)
{
    uint64_t dims[3] = {d0, d1, d2};
    assert_int_equal(qr_gguf_writer_add_tensor(w, name, type, n, dims, NULL, 0), QR_OK);
}

static void finish(struct qr_gguf_writer *w, const char *rel)
{
    char path[256];
    struct qr_diag d = {{0}};
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (qr_gguf_writer_write_file(w, path, &d) != QR_OK)
        fail_msg("write %s: %s", path, d.msg);
    qr_gguf_writer_free(w);
}

/* A small dense decoder; seed changes the bytes (and so the sha256). */
static void dense(const char *rel, const char *arch, uint32_t ctx, uint32_t seed)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    char k[96];
    qr_gguf_writer_add_str(w, "general.architecture", qr_slice_str(arch));
    qr_gguf_writer_add_str(w, "general.name", QR_SLICE_LIT("Tiny Dense"));
    qr_gguf_writer_add_u32(w, "general.file_type", 1);
    qr_gguf_writer_add_u32(w, "general.seed", seed);
    if (ctx) {
        snprintf(k, sizeof k, "%s.context_length", arch);
        qr_gguf_writer_add_u32(w, k, ctx);
    }
    snprintf(k, sizeof k, "%s.block_count", arch);
    qr_gguf_writer_add_u32(w, k, 1);
    snprintf(k, sizeof k, "%s.embedding_length", arch);
    qr_gguf_writer_add_u32(w, k, 8);
    snprintf(k, sizeof k, "%s.attention.head_count", arch);
    qr_gguf_writer_add_u32(w, k, 2);
    snprintf(k, sizeof k, "%s.attention.head_count_kv", arch);
    qr_gguf_writer_add_u32(w, k, 1);
    qr_gguf_writer_add_str(w, "tokenizer.chat_template", (struct qr_slice){TPL, sizeof TPL - 1});
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 10, 1);
    tensor(w, "blk.0.ffn_up.weight", QR_GGML_F32, 2, 8, 16, 1);
    finish(w, rel);
}

static void moe(const char *rel)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("toymoe"));
    qr_gguf_writer_add_u32(w, "toymoe.context_length", 2048);
    qr_gguf_writer_add_u32(w, "toymoe.block_count", 2);
    qr_gguf_writer_add_u32(w, "toymoe.expert_count", 8);
    qr_gguf_writer_add_u32(w, "toymoe.expert_used_count", 2);
    qr_gguf_writer_add_u32(w, "toymoe.expert_shared_count", 1);
    tensor(w, "token_embd.weight", QR_GGML_F32, 2, 8, 10, 1);
    tensor(w, "blk.0.ffn_up.weight", QR_GGML_F32, 2, 8, 16, 1);
    tensor(w, "blk.1.ffn_gate_inp.weight", QR_GGML_F32, 2, 8, 8, 1);
    tensor(w, "blk.1.ffn_up_exps.weight", QR_GGML_F16, 3, 8, 4, 8);
    tensor(w, "blk.1.ffn_down_exps.weight", QR_GGML_F16, 3, 4, 8, 8);
    tensor(w, "blk.1.ffn_up_shexp.weight", QR_GGML_F32, 2, 8, 4, 1);
    finish(w, rel);
}

static void clip(const char *rel)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("clip"));
    tensor(w, "mm.0.weight", QR_GGML_F32, 2, 8, 8, 1);
    finish(w, rel);
}

static void raw(const char *rel, const char *data)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(data, f);
    fclose(f);
}

static void sha_of(const char *rel, char out[72])
{
    char path[256];
    struct qr_diag d;
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    assert_int_equal(qr_registry_file_sha256(path, out, &d), QR_OK);
}

static char *manifest(const char *id, const char *artifacts)
{
    char *buf = malloc(4096);
    assert_non_null(buf);
    snprintf(buf, 4096,
             "{\"schema_version\":\"quantum.runtime/model-manifest/v1alpha1\",\"id\":\"%s\","
             "\"display_name\":\"M %s\",\"source\":{\"provider\":\"test\",\"reference\":\"t\","
             "\"revision\":\"unresolved\"},\"backend\":{\"type\":\"llama.cpp\"},"
             "\"artifacts\":[%s],\"model\":{\"architecture\":\"t\",\"parameter_class\":\"t\","
             "\"quantization\":\"t\",\"context_window\":4096},\"capabilities\":{\"text\":true,"
             "\"vision\":false,\"audio\":false,\"embeddings\":false,\"tools\":false,"
             "\"thinking\":false},\"compatibility\":{\"min_runtime_version\":\"0.4.0\"},"
             "\"state\":{\"install\":\"installed\",\"verification\":\"unverified\","
             "\"lifecycle\":\"active\"},\"provenance\":{\"publisher\":\"test\"}}",
             id, id, artifacts);
    return buf;
}

static void add(struct qr_registry *r, const char *id, const char *artifacts)
{
    char *m = manifest(id, artifacts);
    struct qr_diag d = {{0}};
    if (qr_registry_add_json(r, m, strlen(m), id, QR_REG_FILE, &d, NULL) != QR_OK)
        fail_msg("%s", d.msg);
    free(m);
}

static const struct qr_reg_problem *problem(struct qr_registry *r, const char *needle)
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

static int setup(void **state)
{
    (void) state;
    snprintf(dir, sizeof dir, "/tmp/qr-disc-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(cache, sizeof cache, "%s.sha256-cache", dir);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    dense("My Model-Q4.gguf", "tinydense", 4096, 1);
    moe("sub/MoE_Small.GGUF");
    dense("joined-by-uri.gguf", "tinydense", 4096, 2);
    dense("joined-by-digest.gguf", "tinydense", 4096, 3);
    dense("pinned-wrong.gguf", "tinydense", 4096, 4);
    dense("twin.gguf", "tinydense", 4096, 5);
    dense("noctx.gguf", "tinydense", 0, 6);
    clip("mmproj.gguf");
    raw("broken.gguf", "GGUF but not really");
    raw("notes.txt", "not a model");
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, cache);
    assert_int_equal(system(cmd), 0);
    return 0;
}

/* A registry with the manifests the files should join, then discovery. */
static struct qr_registry *discover(bool no_hash)
{
    char dg[72], tw[72], art[512];
    struct qr_registry *r = qr_registry_new();
    add(r, "by-uri", "{\"uri\":\"models:joined-by-uri.gguf\",\"backend\":\"llama.cpp\"}");
    sha_of("joined-by-digest.gguf", dg);
    snprintf(art, sizeof art, "{\"uri\":\"hf:org/x\",\"sha256\":\"%s\"}", dg);
    add(r, "by-digest", art);
    add(r, "pinned", "{\"uri\":\"models:pinned-wrong.gguf\",\"sha256\":\"sha256:" HEX64 "\"}");
    sha_of("twin.gguf", tw);
    snprintf(art, sizeof art, "{\"uri\":\"hf:org/a\",\"sha256\":\"%s\"}", tw);
    add(r, "twin-a", art);
    snprintf(art, sizeof art, "{\"uri\":\"hf:org/b\",\"sha256\":\"%s\"}", tw);
    add(r, "twin-b", art);
    struct qr_discover_opts o = {dir, cache, no_hash};
    assert_int_equal(qr_registry_discover_gguf(r, &o), QR_OK);
    return r;
}

static void test_dense_from_file(void **state)
{
    (void) state;
    struct qr_registry *r = discover(false);
    const struct qr_reg_model *m = qr_registry_find(r, "my-model-q4");
    assert_non_null(m);
    assert_int_equal(m->source, QR_REG_GGUF);
    assert_string_equal(m->m->display_name, "Tiny Dense");
    assert_string_equal(m->m->backend, "llama.cpp");
    assert_string_equal(m->m->architecture, "tinydense");
    assert_string_equal(m->m->architecture_class, "dense");
    assert_int_equal(m->m->caps,
                     QR_MANIFEST_CAP_TEXT | QR_MANIFEST_CAP_TOOLS | QR_MANIFEST_CAP_THINKING);
    assert_int_equal(m->n_files, 1);
    assert_string_equal(m->files[0].uri, "models:My%20Model-Q4.gguf");
    char sha[72];
    sha_of("My Model-Q4.gguf", sha);
    assert_string_equal(m->files[0].sha256, sha);
    assert_string_equal(m->m->artifacts[0].sha256, sha);
    assert_string_equal(m->m->artifacts[0].uri, "models:My%20Model-Q4.gguf");
    /* the contract */
    yyjson_val *c = yyjson_obj_get(yyjson_obj_get((yyjson_val *) qr_manifest_root(m->m), "model"),
                                   "architecture_contract");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(c, "ffn")), "dense");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(c, "context_length")), 4096);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(c, "block_count")), 1);
    yyjson_val *att = yyjson_obj_get(c, "attention");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(att, "head_count")), 2);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(att, "head_count_kv")), 1);
    uint8_t tdg[QR_SHA256_LEN];
    char hex[QR_SHA256_HEX], want[72];
    qr_sha256(TPL, sizeof TPL - 1, tdg);
    qr_sha256_hex(tdg, hex);
    snprintf(want, sizeof want, "sha256:%s", hex);
    yyjson_val *tpl = yyjson_obj_get(c, "chat_template");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(tpl, "sha256")), want);
    assert_null(yyjson_obj_get(c, "expert_count"));
    /* the file path resolves back from the URI */
    char *path;
    struct qr_diag d;
    assert_int_equal(qr_registry_resolve_uri(dir, m->files[0].uri, &path, &d), QR_OK);
    char expect[256];
    snprintf(expect, sizeof expect, "%s/My Model-Q4.gguf", dir);
    assert_string_equal(path, expect);
    free(path);
    qr_registry_free(r);
}

static void test_moe_in_subdir(void **state)
{
    (void) state;
    struct qr_registry *r = discover(false);
    const struct qr_reg_model *m = qr_registry_find(r, "moe_small");
    assert_non_null(m);
    assert_string_equal(m->files[0].uri, "models:sub/MoE_Small.GGUF");
    assert_string_equal(m->m->architecture_class, "moe");
    yyjson_val *md = yyjson_obj_get((yyjson_val *) qr_manifest_root(m->m), "model");
    yyjson_val *ex = yyjson_obj_get(md, "experts");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(ex, "total")), 8);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(ex, "active")), 2);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(ex, "shared")), 1);
    yyjson_val *c = yyjson_obj_get(md, "architecture_contract");
    assert_string_equal(yyjson_get_str(yyjson_obj_get(c, "ffn")), "moe");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(c, "expert_count")), 8);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(c, "expert_used_count")), 2);
    yyjson_val *p = yyjson_obj_get(c, "params");
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(p, "total")), 80 + 128 + 64 + 256 + 256 + 32);
    assert_int_equal(yyjson_get_uint(yyjson_obj_get(p, "active")),
                     80 + 128 + 64 + 32 + (256 + 256) * 2 / 8);
    qr_registry_free(r);
}

static void test_identity_joins(void **state)
{
    (void) state;
    struct qr_registry *r = discover(false);
    /* 5 manifests + my-model-q4 + moe_small: nothing else was created */
    assert_int_equal(qr_registry_count(r), 7);
    const struct qr_reg_model *m = qr_registry_find(r, "by-uri");
    assert_int_equal(m->n_files, 1);
    assert_string_equal(m->files[0].uri, "models:joined-by-uri.gguf");
    m = qr_registry_find(r, "by-digest");
    assert_int_equal(m->n_files, 1);
    assert_string_equal(m->files[0].uri, "models:joined-by-digest.gguf");
    assert_null(qr_registry_find(r, "joined-by-uri"));
    assert_null(qr_registry_find(r, "joined-by-digest"));
    /* conflicts: reported, not joined, not added */
    const struct qr_reg_problem *p = problem(r, "pinned-wrong.gguf': digest");
    assert_int_equal(p->kind, QR_REG_DIGEST_CLASH);
    assert_non_null(strstr(p->message, "differs from sha256:" HEX64));
    assert_int_equal(qr_registry_find(r, "pinned")->n_files, 0);
    assert_null(qr_registry_find(r, "pinned-wrong"));
    p = problem(r, "twin.gguf': digest");
    assert_non_null(strstr(p->message, "is stated by 2 models"));
    assert_null(qr_registry_find(r, "twin"));
    p = problem(r, "broken.gguf");
    assert_int_equal(p->kind, QR_REG_BAD_FILE);
    p = problem(r, "noctx.gguf': the file states no context length");
    assert_null(qr_registry_find(r, "mmproj"));
    size_t n;
    qr_registry_problems(r, &n, NULL);
    assert_int_equal(n, 4);
    /* the model listing shows what was joined */
    void *doc;
    assert_int_equal(qr_registry_model_json(r, "by-digest", &doc), QR_OK);
    char *s = qr_registry_json_write(doc, NULL);
    assert_non_null(strstr(s, "\"discovered\":{\"source\":\"file\",\"origin\":"
                              "\"registry-directory\",\"files\":[{\"uri\":"
                              "\"models:joined-by-digest.gguf\",\"sha256\":\"sha256:"));
    assert_null(strstr(s, dir)); /* no local paths in client-facing JSON */
    free(s);
    yyjson_mut_doc_free(doc);
    qr_registry_free(r);
}

static void test_generated_fit_schema(void **state)
{
    (void) state;
    struct qr_registry *r = discover(false);
    yyjson_doc *schema = schema_load();
    size_t n = 0;
    for (size_t i = 0; i < qr_registry_count(r); i++) {
        const struct qr_reg_model *m = qr_registry_at(r, i);
        if (m->source != QR_REG_GGUF)
            continue;
        yyjson_mut_doc *md = yyjson_mut_doc_new(NULL);
        yyjson_mut_doc_set_root(md, yyjson_val_mut_copy(md, (yyjson_val *) qr_manifest_root(m->m)));
        size_t len;
        char *s = yyjson_mut_write(md, 0, &len);
        schema_check_json(schema, s, len, m->m->id);
        free(s);
        yyjson_mut_doc_free(md);
        n++;
    }
    assert_int_equal(n, 2);
    yyjson_doc_free(schema);
    qr_registry_free(r);
}

static void test_cache_used(void **state)
{
    (void) state;
    struct qr_registry *r = discover(false);
    qr_registry_free(r);
    /* the cache names every hashed file; a forged entry with the right size and mtime is
     * believed, so a restart does not rehash */
    FILE *f = fopen(cache, "r");
    assert_non_null(f);
    char line[1024], path[256];
    assert_non_null(fgets(line, sizeof line, f));
    assert_string_equal(line, "qr-sha256-cache v1\n");
    size_t lines = 0;
    while (fgets(line, sizeof line, f))
        lines++;
    fclose(f);
    assert_int_equal(lines, 9); /* every *.gguf, the broken one included */
    snprintf(path, sizeof path, "%s/My Model-Q4.gguf", dir);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    f = fopen(cache, "w");
    fprintf(f, "qr-sha256-cache v1\nsha256:%s %lld %lld %lld %s\ngarbage line\n", HEX64B,
            (long long) st.st_size, (long long) st.st_mtim.tv_sec, (long long) st.st_mtim.tv_nsec,
            path);
    fclose(f);
    r = discover(false);
    const struct qr_reg_model *m = qr_registry_find(r, "my-model-q4");
    assert_string_equal(m->files[0].sha256, "sha256:" HEX64B);
    qr_registry_free(r);
    /* no_hash: no digests, joins by URI only */
    r = discover(true);
    m = qr_registry_find(r, "my-model-q4");
    assert_string_equal(m->files[0].sha256, "");
    assert_null(m->m->artifacts[0].sha256);
    assert_int_equal(qr_registry_find(r, "by-uri")->n_files, 1);
    assert_int_equal(qr_registry_find(r, "by-digest")->n_files, 0);
    assert_non_null(qr_registry_find(r, "joined-by-digest"));
    qr_registry_free(r);
    unlink(cache);
}

static void test_resolve_uri(void **state)
{
    (void) state;
    char *p;
    struct qr_diag d;
    assert_int_equal(qr_registry_resolve_uri("/m", "models:a/b%20c.gguf", &p, &d), QR_OK);
    assert_string_equal(p, "/m/a/b c.gguf");
    free(p);
    assert_int_equal(qr_registry_resolve_uri("/m", "file:///x/y.gguf", &p, &d), QR_OK);
    assert_string_equal(p, "/x/y.gguf");
    free(p);
    static const char *const BAD[] = {"models:../x.gguf", "models:a/%2e%2e/x", "models:/abs",
                                      "models:a%00b",     "models:a/",         "models:%zz",
                                      "ollama:x",         "file://host/x",     "models:a/./b"};
    for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
        if (qr_registry_resolve_uri("/m", BAD[i], &p, &d) != QR_ERR_INVALID)
            fail_msg("'%s' resolved", BAD[i]);
        assert_null(p);
    }
    assert_int_equal(qr_registry_resolve_uri(NULL, "models:x", &p, &d), QR_ERR_INVALID);
}

/* A symlinked GGUF is served only when it resolves inside models_dir (issue 10): a link to a
 * file outside is a problem and no model; a link to a file inside (here in a hidden directory
 * the walk itself skips) is a model. */
static void test_symlink_escape(void **state)
{
    (void) state;
    char saved[sizeof dir], out[64], path[256], target[256];
    snprintf(saved, sizeof saved, "%s", dir);
    snprintf(out, sizeof out, "/tmp/qr-disc-out-XXXXXX");
    assert_non_null(mkdtemp(out));
    snprintf(dir, sizeof dir, "%s", out);
    dense("escape.gguf", "tinydense", 4096, 7);
    snprintf(dir, sizeof dir, "/tmp/qr-disc-in-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/.store", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    dense(".store/inner.gguf", "tinydense", 4096, 8);
    snprintf(target, sizeof target, "%s/escape.gguf", out);
    snprintf(path, sizeof path, "%s/escape.gguf", dir);
    assert_int_equal(symlink(target, path), 0);
    snprintf(path, sizeof path, "%s/inner-link.gguf", dir);
    assert_int_equal(symlink(".store/inner.gguf", path), 0);

    struct qr_registry *r = qr_registry_new();
    struct qr_discover_opts o = {dir, NULL, true};
    assert_int_equal(qr_registry_discover_gguf(r, &o), QR_OK);
    assert_null(qr_registry_find(r, "escape"));
    problem(r, "escape.gguf': a symlink that resolves outside models_dir");
    assert_non_null(qr_registry_find(r, "inner-link"));
    qr_registry_free(r);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", dir, out);
    assert_int_equal(system(cmd), 0);
    snprintf(dir, sizeof dir, "%s", saved);
}

static void test_missing_dir(void **state)
{
    (void) state;
    struct qr_registry *r = qr_registry_new();
    struct qr_discover_opts o = {"/nonexistent/qr-models", NULL, false};
    assert_int_equal(qr_registry_discover_gguf(r, &o), QR_ERR_NOT_FOUND);
    problem(r, "cannot open models directory '/nonexistent/qr-models'");
    qr_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dense_from_file), cmocka_unit_test(test_moe_in_subdir),
        cmocka_unit_test(test_identity_joins),  cmocka_unit_test(test_generated_fit_schema),
        cmocka_unit_test(test_cache_used),      cmocka_unit_test(test_resolve_uri),
        cmocka_unit_test(test_missing_dir),     cmocka_unit_test(test_symlink_escape),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
