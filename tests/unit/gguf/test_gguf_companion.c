/* Companions of a model file: named chat templates (tokenizer.chat_template.<name>, string values
 * only, in file order, with sha256 and markers) and projector files next to it (clip GGUF files;
 * the projection width decides match / mismatch / unknown; the model itself, non-clip GGUF
 * files, corrupt files and other names are not projectors; results in name order, count beyond
 * the cap). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/arch.h"
#include "gguf/companion.h"
#include "gguf/gguf.h"

static char dir[64];

static void path_of(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_gguf(struct qr_gguf_writer *w, const char *name)
{
    char p[256];
    path_of(p, sizeof p, name);
    struct qr_diag d = {{0}};
    if (qr_gguf_writer_write_file(w, p, &d) != QR_OK)
        fail_msg("write %s: %s", name, d.msg);
    qr_gguf_writer_free(w);
}

static void write_raw(const char *name, const char *bytes, size_t n)
{
    char p[256];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

static void write_model(void)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("llama"));
    qr_gguf_writer_add_u32(w, "llama.embedding_length", 64);
    qr_gguf_writer_add_str(w, "tokenizer.chat_template", QR_SLICE_LIT("{{ messages }}"));
    qr_gguf_writer_add_str(w, "tokenizer.chat_template.tool_use",
                           QR_SLICE_LIT("<|im_start|>{% if tools %}<tool_call>{% endif %}"));
    qr_gguf_writer_add_u32(w, "tokenizer.chat_template.bogus", 7); /* not a string: skipped */
    qr_gguf_writer_add_str(w, "tokenizer.chat_template.rag", QR_SLICE_LIT("[INST] rag"));
    write_gguf(w, "model.gguf");
}

static void write_clip(const char *name, const char *type, int64_t vision_dim, int64_t audio_dim)
{
    struct qr_gguf_writer *w = qr_gguf_writer_new();
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("clip"));
    if (type)
        qr_gguf_writer_add_str(w, "clip.projector_type", qr_slice_str(type));
    qr_gguf_writer_add_bool(w, "clip.has_vision_encoder", vision_dim >= 0);
    if (vision_dim > 0)
        qr_gguf_writer_add_u32(w, "clip.vision.projection_dim", (uint32_t) vision_dim);
    if (audio_dim >= 0)
        qr_gguf_writer_add_bool(w, "clip.has_audio_encoder", true);
    if (audio_dim > 0)
        qr_gguf_writer_add_u32(w, "clip.audio.projection_dim", (uint32_t) audio_dim);
    write_gguf(w, name);
}

static int setup(void **state)
{
    (void) state;
    snprintf(dir, sizeof dir, "/tmp/qr-companion-XXXXXX");
    assert_non_null(mkdtemp(dir));
    write_model();
    write_clip("mmproj-b.gguf", "gemma3", 64, -1);   /* match */
    write_clip("mmproj-a.gguf", "mlp", 32, -1);      /* mismatch */
    write_clip("audio.gguf", "ultravox", -1, 64);    /* audio only, match */
    write_clip("z-nodim.gguf", NULL, 0, -1);         /* no width: unknown */
    write_raw("corrupt.gguf", "GGUF\x03\x00", 6);    /* does not open: skipped */
    write_raw("notes.txt", "hello", 5);              /* not .gguf */
    struct qr_gguf_writer *w = qr_gguf_writer_new(); /* another model: not a projector */
    qr_gguf_writer_add_str(w, "general.architecture", QR_SLICE_LIT("qwen3"));
    write_gguf(w, "other.gguf");
    return 0;
}

static int teardown(void **state)
{
    (void) state;
    static const char *const names[] = {"model.gguf", "mmproj-b.gguf", "mmproj-a.gguf",
                                        "audio.gguf", "z-nodim.gguf",  "corrupt.gguf",
                                        "notes.txt",  "other.gguf"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char p[256];
        path_of(p, sizeof p, names[i]);
        unlink(p);
    }
    rmdir(dir);
    return 0;
}

static void test_named_templates(void **state)
{
    (void) state;
    char p[256];
    path_of(p, sizeof p, "model.gguf");
    struct qr_gguf *g = NULL;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_open(p, NULL, &d, &g), QR_OK);
    struct qr_gguf_template t[4];
    assert_int_equal(qr_gguf_named_templates(g, t, 4), 2);
    assert_string_equal(t[0].name, "tool_use");
    assert_int_equal(t[0].bytes, strlen("<|im_start|>{% if tools %}<tool_call>{% endif %}"));
    assert_int_equal(t[0].markers,
                     QR_ARCH_TPL_CHATML | QR_ARCH_TPL_HERMES_TOOLS | QR_ARCH_TPL_TOOLS_VAR);
    assert_string_equal(t[1].name, "rag");
    assert_int_equal(t[1].markers, QR_ARCH_TPL_INST);
    uint8_t want[QR_SHA256_LEN];
    qr_sha256("[INST] rag", 10, want);
    assert_memory_equal(t[1].sha256, want, QR_SHA256_LEN);
    /* the count covers what did not fit */
    assert_int_equal(qr_gguf_named_templates(g, t, 1), 2);
    assert_string_equal(t[0].name, "tool_use");
    qr_gguf_close(g);
}

static void test_projectors_next_to_the_model(void **state)
{
    (void) state;
    char p[256];
    path_of(p, sizeof p, "model.gguf");
    struct qr_gguf_projector pr[8];
    size_t n = 99;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_find_projectors(p, 64, pr, 8, &n, &d), QR_OK);
    assert_int_equal(n, 4);
    assert_string_equal(pr[0].file, "audio.gguf");
    assert_string_equal(pr[0].projector_type, "ultravox");
    assert_true(pr[0].audio_known && pr[0].audio);
    assert_true(pr[0].vision_known && !pr[0].vision);
    assert_int_equal(pr[0].audio_projection_dim, 64);
    assert_int_equal(pr[0].match, QR_PROJECTOR_MATCH);
    assert_string_equal(pr[1].file, "mmproj-a.gguf");
    assert_int_equal(pr[1].vision_projection_dim, 32);
    assert_int_equal(pr[1].match, QR_PROJECTOR_MISMATCH);
    assert_string_equal(pr[2].file, "mmproj-b.gguf");
    assert_string_equal(pr[2].projector_type, "gemma3");
    assert_int_equal(pr[2].match, QR_PROJECTOR_MATCH);
    assert_false(pr[2].audio_known);
    assert_string_equal(pr[3].file, "z-nodim.gguf");
    assert_string_equal(pr[3].projector_type, "");
    assert_int_equal(pr[3].match, QR_PROJECTOR_UNKNOWN);
    assert_string_equal(qr_projector_match_name(pr[1].match), "mismatch");

    /* model width unknown: nothing can be matched */
    assert_int_equal(qr_gguf_find_projectors(p, 0, pr, 8, &n, &d), QR_OK);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(pr[i].match, QR_PROJECTOR_UNKNOWN);

    /* cap: the first ones in name order, the count covers all */
    assert_int_equal(qr_gguf_find_projectors(p, 64, pr, 2, &n, &d), QR_OK);
    assert_int_equal(n, 4);
    assert_string_equal(pr[1].file, "mmproj-a.gguf");
}

static void test_projector_errors(void **state)
{
    (void) state;
    struct qr_gguf_projector pr[2];
    size_t n = 99;
    struct qr_diag d = {{0}};
    assert_int_equal(qr_gguf_find_projectors("/nonexistent-dir/m.gguf", 64, pr, 2, &n, &d),
                     QR_ERR_IO);
    assert_int_equal(n, 0);
    assert_non_null(strstr(d.msg, "/nonexistent-dir/m.gguf"));
    assert_null(qr_projector_match_name(3));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_named_templates),
        cmocka_unit_test(test_projectors_next_to_the_model),
        cmocka_unit_test(test_projector_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
