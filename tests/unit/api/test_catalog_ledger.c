/* The catalog's ledger: the builtin ledger merged with <state_dir>/upstream-ledger.local.json.
 * A bad local file at start-up fails the load (the daemon refuses to start: fail closed); on a
 * reload (a previous catalog) the previous local ledger stays in force and the bad file is listed
 * as a problem with its JSON path; a corrected file is taken on the next reload; without a local
 * file the ledger is the builtin one. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/catalog.h"
#include "policy/ledger.h"

#define HEAD "{\"schema_version\":\"quantum.runtime/upstream-ledger/v1alpha1\","
#define BLOCK(id, cap)                                                                             \
    "{\"id\":\"" id "\",\"backend_kind\":\"llama.cpp\",\"model_family\":\"*\","                    \
    "\"hardware_class\":\"*\",\"capability\":\"" cap "\",\"reason\":\"r\","                        \
    "\"sources\":[\"evidence:conformance/1\"]}"

struct fx {
    char dir[64];
    char file[128];
    struct qr_config cfg;
};

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/qr-h-V-catalog-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->file, sizeof f->file, "%s/%s", f->dir, QR_LEDGER_LOCAL_FILE);
    char sd[128], md[128];
    snprintf(sd, sizeof(sd), "QUANTUM_RUNTIME_STATE_DIR=%s", f->dir);
    snprintf(md, sizeof(md), "QUANTUM_RUNTIME_MODELS_DIR=%s", f->dir);
    char *env[] = {sd, md, "QUANTUM_RUNTIME_HASH_MODELS=false", NULL};
    struct qr_diag d = {{0}};
    assert_int_equal(qr_config_load(&f->cfg, 0, NULL, env, &d), QR_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;
    unlink(f->file);
    qr_config_cleanup(&f->cfg);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static const struct qr_ledger_block *find_block(const struct qr_catalog *c, const char *id)
{
    for (size_t i = 0; i < qr_ledger_block_count(c->ledger); i++)
        if (!strcmp(qr_ledger_block_at(c->ledger, i)->id, id))
            return qr_ledger_block_at(c->ledger, i);
    return NULL;
}

static void test_no_local_file(void **state)
{
    struct fx *f = *state;
    struct qr_catalog *c = NULL;
    assert_int_equal(qr_catalog_load(&f->cfg, NULL, &c), QR_OK);
    assert_non_null(c->ledger);
    assert_null(c->ledger_local_json);
    for (size_t i = 0; i < qr_ledger_block_count(c->ledger); i++)
        assert_false(qr_ledger_block_at(c->ledger, i)->local);
    qr_catalog_free(c);
}

static void test_bad_local_file_refuses_start(void **state)
{
    struct fx *f = *state;
    write_file(f->file, HEAD "\"blocks\":[" BLOCK("x", "tools.callin") "]}");
    struct qr_catalog *c = (struct qr_catalog *) 1;
    assert_int_equal(qr_catalog_load(&f->cfg, NULL, &c), QR_ERR_CONFIG);
    /* a duplicate of a builtin id fails the same way */
    write_file(f->file, HEAD
               "\"blocks\":[" BLOCK("llamacpp-moe-offload-cuda-crash", "moe.expert_offload") "]}");
    assert_int_equal(qr_catalog_load(&f->cfg, NULL, &c), QR_ERR_CONFIG);
}

static void test_reload_keeps_previous_local_ledger(void **state)
{
    struct fx *f = *state;
    write_file(f->file, HEAD "\"blocks\":[" BLOCK("local-a", "tools.calling") "]}");
    struct qr_catalog *c = NULL, *next = NULL, *third = NULL;
    assert_int_equal(qr_catalog_load(&f->cfg, NULL, &c), QR_OK);
    const struct qr_ledger_block *b = find_block(c, "local-a");
    assert_non_null(b);
    assert_true(b->local);
    assert_non_null(find_block(c, "llamacpp-moe-offload-cuda-crash")); /* builtin ones stay */
    unsigned long gen = c->generation;
    /* the file goes bad: the reload keeps local-a and lists the problem */
    write_file(f->file, HEAD "\"blocks\":[" BLOCK("local-b", "tools.calling") ",{\"id\":1}]}");
    assert_int_equal(qr_catalog_load(&f->cfg, c, &next), QR_OK);
    assert_true(next->generation != gen);
    assert_non_null(find_block(next, "local-a"));
    assert_null(find_block(next, "local-b"));
    bool listed = false;
    for (size_t i = 0; i < next->n_problems; i++)
        listed |= !strcmp(next->problems[i].origin, f->file) &&
                  strstr(next->problems[i].message, "blocks[1]") != NULL;
    assert_true(listed);
    qr_catalog_free(c);
    /* corrected: the next reload takes it */
    write_file(f->file, HEAD "\"blocks\":[" BLOCK("local-b", "tools.calling") "]}");
    assert_int_equal(qr_catalog_load(&f->cfg, next, &third), QR_OK);
    assert_null(find_block(third, "local-a"));
    assert_non_null(find_block(third, "local-b"));
    assert_int_equal(third->n_problems, 0);
    qr_catalog_free(next);
    qr_catalog_free(third);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_local_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_local_file_refuses_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_keeps_previous_local_ledger, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
